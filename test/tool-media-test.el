;;; tool-media-test.el --- Tool-result images: capture, restore, provider shapes  -*- lexical-binding: t; -*-

;;; Commentary:

;; Capture checks and stores media behind references; restoring reads
;; the cache or the session's copy; gptel's messages get the images in
;; each provider's shape, both for a result gptel just received and
;; for one it reads back from the data buffer.

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel-tool-media)
(require 'mevedel-gptel)

(defconst mevedel-tool-media-test--png
  (concat (unibyte-string #x89 ?P ?N ?G ?\r ?\n #x1a ?\n) (make-string 24 0))
  "The smallest bytes that pass as a PNG here.")

(defmacro mevedel-tool-media-test--with-cache (&rest body)
  "Run BODY with an empty media cache of its own."
  (declare (indent 0) (debug t))
  `(let ((mevedel-tool-media--cache (make-hash-table :test #'equal))
         (mevedel-tool-media--order nil))
     ,@body))

(defun mevedel-tool-media-test--payload (bytes)
  "Return the payload BYTES of a PNG restore to."
  (cons "image/png" (base64-encode-string bytes t)))

;;;; Capture and restore

(ert-deftest mevedel-tool-media:capture-checks-and-restores ()
  (mevedel-tool-media-test--with-cache
    (let* ((png mevedel-tool-media-test--png)
           (refs (mevedel-tool-media-capture (list (list :mime "image/png" :data png))
                                             "toolu_1" nil)))
      (should (equal (plist-get (car refs) :tool-use-id) "toolu_1"))
      (should (string-match-p "\\`[0-9a-f]\\{32\\}\\.png\\'" (plist-get (car refs) :media)))
      (should (equal (mevedel-tool-media-payloads refs nil)
                     (list (mevedel-tool-media-test--payload png))))
      ;; A reference passes through a second capture unchanged.
      (should (equal (mevedel-tool-media-capture refs "toolu_2" nil) refs))
      ;; A forged or unknown reference restores to nothing.
      (should-not (mevedel-tool-media-payloads '((:media "../../etc/passwd")) nil))
      (should-not (mevedel-tool-media-payloads
                   (list (list :media (concat (make-string 32 ?a) ".png"))) nil)))
    (dolist (case `(((:mime "image/png" :data "GIF89a......") . "signature")
                    ((:mime "image/tiff" :data "II*\0") . "not an image type")
                    ((:mime "image/png" :data "\x89PNG é") . "decoded as text")
                    ((:mime "image/png" :data ,(concat mevedel-tool-media-test--png
                                                      (make-string mevedel-tool-media-limit 0)))
                     . "more than the limit")
                    ((:mime "image/png" :path "/nonexistent/x.png") . "Cannot read")))
      (let ((err (should-error (mevedel-tool-media-capture (list (car case)) "t" nil))))
        (should (string-match-p (cdr case) (error-message-string err)))))))

(ert-deftest mevedel-tool-media:a-path-is-read-once-and-a-copy-kept ()
  (let ((dir (make-temp-file "mevedel-media" t)))
    (unwind-protect
    (mevedel-tool-media-test--with-cache
      (let* ((session (mevedel-session-create :workspace dir))
             (file (expand-file-name "shot.png" dir))
             (png mevedel-tool-media-test--png))
        (let ((coding-system-for-write 'binary))
          (write-region png nil file nil 'silent))
        (let* ((refs (mevedel-tool-media-capture (list (list :mime "image/png" :path file))
                                                 "toolu_9" session))
               (copy (expand-file-name (concat "media/" (plist-get (car refs) :media))
                                       (mevedel-session-tool-results-directory session))))
          ;; The original goes; the session's copy and the cache remain.
          (delete-file file)
          (should (file-exists-p copy))
          (should (equal (mevedel-tool-media-payloads refs session)
                         (list (mevedel-tool-media-test--payload png))))
          ;; Evicted from memory, the copy answers (a resumed session).
          (clrhash mevedel-tool-media--cache)
          (should (equal (mevedel-tool-media-payloads refs session)
                         (list (mevedel-tool-media-test--payload png))))
          ;; A copy that was changed into something else is not sent.
          (clrhash mevedel-tool-media--cache)
          (with-temp-file copy (insert "not a png"))
          (should-not (mevedel-tool-media-payloads refs session)))))
      (delete-directory dir t))))

(ert-deftest mevedel-tool-media:cache-drops-the-oldest-keeps-the-newest ()
  (mevedel-tool-media-test--with-cache
    (let* ((png mevedel-tool-media-test--png)
           (size (length (base64-encode-string png t)))
           (mevedel-tool-media-cache-max-bytes (* 2 size))
           (capture (lambda (tag)
                      (mevedel-tool-media-capture
                       (list (list :mime "image/png" :data (concat png tag))) tag nil)))
           (a (funcall capture "a")) (b (funcall capture "b")) (c (funcall capture "c")))
      ;; Without durable storage an evicted record is gone.
      (should-not (mevedel-tool-media-payloads a nil))
      (should (mevedel-tool-media-payloads b nil))
      (should (mevedel-tool-media-payloads c nil))
      ;; The newest is kept even when it alone exceeds the bound.
      (let* ((mevedel-tool-media-cache-max-bytes 1)
             (d (funcall capture "d")))
        (should (mevedel-tool-media-payloads d nil))
        (should-not (mevedel-tool-media-payloads c nil))))))

;;;; Provider shapes in gptel's messages

(defun mevedel-tool-media-test--result (png)
  "Return a projected result text carrying PNG as a captured reference."
  (propertize "Image image/png, 32 B, attached." 'mevedel-tool-media
              (mevedel-tool-media-capture (list (list :mime "image/png" :data png))
                                          "toolu_live" nil)))

(ert-deftest mevedel-tool-media:a-fresh-result-carries-its-image ()
  (mevedel-tool-media-test--with-cache
    (let* ((png mevedel-tool-media-test--png)
           (b64 (base64-encode-string png t))
           (call (list :id "toolu_live" :name "ToolCall"
                       :result (mevedel-tool-media-test--result png)))
           (anthropic (gptel--parse-tool-results
                       (gptel-make-anthropic "media-a" :key "k" :models '(m)) (list call)))
           (block (aref (plist-get anthropic :content) 0))
           (openai (gptel--parse-tool-results
                    (gptel-make-openai "media-o" :key "k" :models '(m) :host "127.0.0.1:1"
                             :endpoint "/v1/chat/completions") (list call))))
      ;; Anthropic: text and image inside the tool_result.
      (should (equal (plist-get block :type) "tool_result"))
      (should (equal (aref (plist-get block :content) 0)
                     '(:type "text" :text "Image image/png, 32 B, attached.")))
      (should (equal (aref (plist-get block :content) 1)
                     (list :type "image" :source (list :type "base64" :media_type "image/png"
                                                       :data b64))))
      ;; OpenAI: the tool message, then a user message with the image.
      (should (= (length openai) 2))
      (should (equal (plist-get (nth 0 openai) :role) "tool"))
      (should (equal (plist-get (nth 1 openai) :role) "user"))
      (should (equal (aref (plist-get (nth 1 openai) :content) 1)
                     (list :type "image_url"
                           :image_url (list :url (concat "data:image/png;base64," b64))))))))

(defun mevedel-tool-media-test--buffer (png)
  "Insert a prompt and a settled call whose result carries PNG, as gptel writes it."
  (insert "Fetch the picture.\n\n")
  (mevedel-gptel-append-settled-call "toolu_buf" "ToolCall" '(:program "(WebFetch :url \"x\")")
                                     (mevedel-tool-media-test--result png))
  (goto-char (point-max))
  (insert (propertize "It is a tiny image." 'gptel 'response) "\n\nAnd now?"))

(ert-deftest mevedel-tool-media:a-result-read-back-from-the-buffer-carries-its-image ()
  (mevedel-tool-media-test--with-cache
    (let ((png mevedel-tool-media-test--png)
          (gptel-track-response t))
      (with-temp-buffer
        (mevedel-tool-media-test--buffer png)
        (let* ((b64 (base64-encode-string png t))
               (messages (gptel--parse-buffer
                          (gptel-make-anthropic "media-a" :key "k" :models '(m)) nil))
               (results (cl-loop for m in messages
                                 when (and (vectorp (plist-get m :content))
                                           (equal (plist-get (aref (plist-get m :content) 0) :type)
                                                  "tool_result"))
                                 collect (aref (plist-get m :content) 0))))
          (should (= (length results) 1))
          (should (equal (plist-get (aref (plist-get (car results) :content) 1) :source)
                         (list :type "base64" :media_type "image/png" :data b64))))
        (goto-char (point-max))
        (let* ((messages (gptel--parse-buffer
                          (gptel-make-openai "media-o" :key "k" :models '(m) :host "127.0.0.1:1"
                             :endpoint "/v1/chat/completions") nil))
               (roles (mapcar (lambda (m) (plist-get m :role)) messages))
               (at (cl-position "tool" roles :test #'equal)))
          ;; user prompt, assistant call, tool result, user image, assistant, user.
          (should (equal roles '("user" "assistant" "tool" "user" "assistant" "user")))
          (should (equal (plist-get (aref (plist-get (nth (1+ at) messages) :content) 1) :type)
                         "image_url")))))))

(provide 'tool-media-test)
;;; tool-media-test.el ends here
