;;; read-media-test.el --- Read of images and PDFs, and EmacsScreenshot  -*- lexical-binding: t; -*-

;;; Commentary:

;; Read's handler over the module for the files under
;; test/fixtures/media/: images become media records (scaled within
;; the limits) with thumbnails as render-data, PDFs their pages' text
;; and a rendered page, errors name the file, a PDF saved as a session
;; artifact reads through its artifact:// address, cancelling settles
;; once, and the row says what was sent.  EmacsScreenshot in batch
;; Emacs is an error saying why.  The requests a model receives are
;; checked in test/e2e/read-media-e2e-test.el.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-tool-fs)
(require 'mevedel-tool-screenshot)

(defun mevedel-read-media-test--fixture (name)
  "Return the absolute name of the media fixture NAME."
  (expand-file-name (concat "test/fixtures/media/" name) mevedel-test-root))

(defun mevedel-read-media-test--call (handler args &optional accepts)
  "Run the asynchronous HANDLER on ARGS for a model taking ACCEPTS; return its result."
  (let ((result nil) (calls 0))
    (cl-letf (((symbol-function 'mevedel-tool-fs-accepted-images) (lambda (_) accepts)))
      (funcall handler (lambda (r) (setq result r) (cl-incf calls)) args)
      (mevedel-test-wait-until result 30))
    (should (= calls 1))
    result))

(defun mevedel-read-media-test--png-size (bytes)
  "Return (WIDTH . HEIGHT) of the PNG BYTES, from its header."
  (should (string-prefix-p "\x89PNG\r\n\x1a\n" bytes))
  (cl-flet ((u32 (at) (+ (ash (aref bytes at) 24) (ash (aref bytes (+ at 1)) 16)
                         (ash (aref bytes (+ at 2)) 8) (aref bytes (+ at 3)))))
    (cons (u32 16) (u32 20))))

(defconst mevedel-read-media-test--all '("image/png" "image/jpeg" "image/gif" "image/webp")
  "Every image type a model may take.")

(ert-deftest mevedel-read-media:a-large-png-becomes-a-scaled-media-record ()
  (let* ((r (mevedel-read-media-test--call
             #'mevedel-tool-fs-read
             (list :file_path (mevedel-read-media-test--fixture "screen-4000x3000.png"))
             mevedel-read-media-test--all))
         (media (plist-get r :media))
         (data (plist-get (car media) :data)))
    (should-not (eq (plist-get r :status) 'error))
    (should (= (length media) 1))
    (should (equal (plist-get (car media) :mime) "image/png"))
    (should-not (multibyte-string-p data))
    (should (equal (mevedel-read-media-test--png-size data) '(1568 . 1176)))
    (should (<= (length (base64-encode-string data t)) (* 5 1024 1024)))
    (should (string-match-p "PNG, 4000×3000 px" (plist-get r :result)))
    (let ((shown (car (plist-get (plist-get r :render-data) :media))))
      (should (equal (plist-get shown :width) 1568))
      (should (> (length (plist-get shown :thumbnail)) 0)))))

(ert-deftest mevedel-read-media:the-pipeline-takes-the-envelope-and-a-text-only-model-a-note ()
  (let ((sent nil))
    (cl-letf (((symbol-function 'mevedel-tool-fs-accepted-images)
               (lambda (_) '("image/png"))))
      (funcall (mevedel-tool-fs--adapt #'mevedel-tool-fs-read)
               (lambda (value) (setq sent value))
               (list :file_path (mevedel-read-media-test--fixture "small.png")))
      (mevedel-test-wait-until sent 20))
    (should (plist-get sent :media))
    (should (string-match-p "sent as it is" (plist-get sent :result))))
  (let ((r (mevedel-read-media-test--call
            #'mevedel-tool-fs-read
            (list :file_path (mevedel-read-media-test--fixture "small.png")) nil)))
    (should-not (plist-get r :media))
    (should (string-match-p "64×48 px.*text only" (plist-get r :result)))))

(ert-deftest mevedel-read-media:a-corrupt-image-is-an-error-naming-it ()
  (let* ((dir (make-temp-file "mevedel-media-" t))
         (file (expand-file-name "broken.png" dir)))
    (unwind-protect
        (let ((bytes (with-temp-buffer
                       (set-buffer-multibyte nil)
                       (insert-file-contents-literally
                        (mevedel-read-media-test--fixture "small.png"))
                       (buffer-substring 1 200))))
          (let ((coding-system-for-write 'binary))
            (write-region bytes nil file nil 'silent))
          (let ((r (mevedel-read-media-test--call #'mevedel-tool-fs-read (list :file_path file)
                                                  mevedel-read-media-test--all)))
            (should (eq (plist-get r :status) 'error))
            (should (string-match-p "broken\\.png.*corrupt or truncated" (plist-get r :result)))))
      (delete-directory dir t))))

(ert-deftest mevedel-read-media:a-pdf-gives-page-text-and-renders-the-scanned-page ()
  (let* ((r (mevedel-read-media-test--call
             #'mevedel-tool-fs-read
             (list :file_path (mevedel-read-media-test--fixture "three-pages.pdf"))
             '("image/png")))
         (text (plist-get r :result)))
    (should (string-match-p "--- page 1 of 3 ---\nAlpha page one\\." text))
    (should (string-match-p "--- page 2 of 3 ---\nBravo page two\\." text))
    (should (string-match-p "--- page 3 of 3 ---\n(no text layer" text))
    (should (= (length (plist-get r :media)) 1))
    (let ((size (mevedel-read-media-test--png-size (plist-get (car (plist-get r :media)) :data))))
      (should (= (max (car size) (cdr size)) 1568))))
  (let ((r (mevedel-read-media-test--call
            #'mevedel-tool-fs-read
            (list :file_path (mevedel-read-media-test--fixture "three-pages.pdf")
                  :pages "1-2" :mode "image")
            '("image/png"))))
    (should (= (length (plist-get r :media)) 2))
    (should (string-match-p "Showing pages 1-2\\." (plist-get r :result)))))

(ert-deftest mevedel-read-media:an-encrypted-pdf-is-a-clear-error ()
  (let ((r (mevedel-read-media-test--call
            #'mevedel-tool-fs-read
            (list :file_path (mevedel-read-media-test--fixture "encrypted.pdf"))
            mevedel-read-media-test--all)))
    (should (eq (plist-get r :status) 'error))
    (should (string-match-p "encrypted\\.pdf.*encrypted with a password" (plist-get r :result)))))

(ert-deftest mevedel-read-media:a-saved-pdf-reads-through-its-artifact-address ()
  (let* ((base (file-name-as-directory (make-temp-file "mevedel-media-" t)))
         (session (expand-file-name "ws/.mevedel/sessions/s1/" base))
         (mevedel-resource-session-function
          (lambda () (list :session-dir (directory-file-name session)
                           :workspace (expand-file-name "ws" base)))))
    (unwind-protect
        (progn
          (make-directory (expand-file-name "tool-results" session) t)
          (copy-file (mevedel-read-media-test--fixture "three-pages.pdf")
                     (expand-file-name "tool-results/WebFetch-1.pdf" session))
          (let* ((default-directory (expand-file-name "ws/" base))
                 (r (mevedel-read-media-test--call
                     #'mevedel-tool-fs-read
                     '(:file_path "artifact://tool-results/WebFetch-1.pdf" :pages "2"))))
            (should (string-prefix-p "PDF `artifact://tool-results/WebFetch-1.pdf`: 3 pages"
                                     (plist-get r :result)))
            (should (string-match-p "--- page 2 of 3 ---\nBravo" (plist-get r :result)))))
      (delete-directory base t))))

(ert-deftest mevedel-read-media:cancelling-a-pdf-read-settles-once ()
  (let ((results nil))
    (cl-letf (((symbol-function 'mevedel-tool-fs-accepted-images) #'ignore))
      (let ((cancel (mevedel-tool-fs-read
                     (lambda (r) (push r results))
                     (list :file_path (mevedel-read-media-test--fixture "hundred-pages.pdf")
                           :pages "1-100"))))
        (funcall cancel)))
    (mevedel-test-wait-until (= (mevedel-core-search-running) 0) 20)
    (accept-process-output nil 0.1)
    (should (= (length results) 1))
    (should (equal (plist-get (car results) :result) "Cancelled."))))

(ert-deftest mevedel-read-media:the-row-names-pages-sizes-and-what-was-sent ()
  (let* ((r (mevedel-read-media-test--call
             #'mevedel-tool-fs-read
             (list :file_path (mevedel-read-media-test--fixture "screen-4000x3000.png"))
             '("image/png")))
         (row (mevedel-tool-fs-render-read "Read" '(:file_path "screen.png")
                                           (plist-get r :result) (plist-get r :render-data))))
    (should (string-match-p "PNG, 4000×3000 px, 156\\.6 KB" (plist-get row :header)))
    (should (string-match-p "sent PNG 1568×1176 ([0-9.]+[kM])" (plist-get row :header))))
  (let* ((r (mevedel-read-media-test--call
             #'mevedel-tool-fs-read
             (list :file_path (mevedel-read-media-test--fixture "hundred-pages.pdf")) nil))
         (row (mevedel-tool-fs-render-read "Read" '(:file_path "h.pdf")
                                           (plist-get r :result) nil)))
    (should (string-match-p "(pages 1-10 of 100) · 48\\.6 KB" (plist-get row :header)))))

(ert-deftest mevedel-read-media:an-expanded-row-shows-the-sent-pictures-full-size ()
  "A tool segment keeps its call's media references on its result, and the
expanded row of a graphical Emacs shows each sent picture, not its
thumbnail, at most as wide as the window."
  (let* ((r (mevedel-read-media-test--call
             #'mevedel-tool-fs-read
             (list :file_path (mevedel-read-media-test--fixture "three-pages.pdf")
                   :pages "3" :mode "image")
             '("image/png")))
         (page (plist-get (car (plist-get r :media)) :data))
         (mevedel-tool-media--cache (make-hash-table :test #'equal))
         (mevedel-tool-media--order nil)
         (refs (mevedel-tool-media-capture (plist-get r :media) "toolu_1" nil))
         (segment
          (with-temp-buffer
            (insert (propertize (concat (prin1-to-string '(:name "Read" :args (:file_path "p.pdf")))
                                        "\n" (propertize (plist-get r :result)
                                                         'mevedel-tool-media refs))
                                'gptel '(tool . "toolu_1")))
            (mevedel-history-tool-segment
             "toolu_1" (buffer-substring-no-properties (point-min) (point-max)) (point-min)
             (mevedel-history-tool-media (point-min) (point-max)))))
         (result (plist-get segment :result)))
    (should (equal (get-text-property 0 'mevedel-tool-media result) refs))
    (cl-letf (((symbol-function 'display-images-p) (lambda (&rest _) t)))
      (let* ((row (mevedel-tool-fs-render-read "Read" '(:file_path "p.pdf") result
                                               (plist-get r :render-data)))
             (body (plist-get row :body))
             (at (text-property-not-all 0 (length body) 'display nil body))
             (image (and at (get-text-property at 'display body))))
        (should (eq (car-safe image) 'image))
        (should (equal (plist-get (cdr image) :data) page))
        (should (equal (plist-get (cdr image) :max-width) (mevedel-tool-fs--max-width)))))))

(ert-deftest mevedel-read-media:a-screenshot-in-batch-emacs-says-why-not ()
  (let ((r nil))
    (mevedel-tool-screenshot-take (lambda (v) (setq r v)) nil)
    (should (stringp r))
    (should (string-match-p "\\`Error: EmacsScreenshot cannot take a picture: .*batch" r)))
  (should (eq (funcall (mevedel-tool-check-permission (mevedel-tool-get "EmacsScreenshot")) nil)
              'ask)))

(provide 'read-media-test)
;;; read-media-test.el ends here
