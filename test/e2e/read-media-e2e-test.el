;;; read-media-e2e-test.el --- Read of images and PDFs in a real session  -*- lexical-binding: t; -*-

;;; Commentary:

;; A real mevedel session whose scripted model Reads a 4000×3000 PNG
;; and a PDF with a page of text and a page without: the next request
;; the server logs carries the images in the wire's own shape (an
;; Anthropic image block inside the tool result, an OpenAI image_url
;; data URL in the user message after it), scaled within the limits,
;; beside the text stating the original size and the pages' text.  An
;; encrypted PDF is a tool error; a text-only model gets a note and no
;; image.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun mevedel-e2e-media--fixture (name)
  "Return the absolute name of the media fixture NAME."
  (expand-file-name (concat "test/fixtures/media/" name) mevedel-test-root))

(defun mevedel-e2e-media--png-size (b64)
  "Return (WIDTH . HEIGHT) of the base64 PNG B64."
  (let ((bytes (base64-decode-string b64)))
    (should (string-prefix-p "\x89PNG\r\n\x1a\n" bytes))
    (cl-flet ((u32 (at) (+ (ash (aref bytes at) 24) (ash (aref bytes (+ at 1)) 16)
                           (ash (aref bytes (+ at 2)) 8) (aref bytes (+ at 3)))))
      (cons (u32 16) (u32 20)))))

(defun mevedel-e2e-media--run (wire stream capabilities steps)
  "Run STEPS over WIRE (STREAM) with the model's CAPABILITIES; return the run.
The backend, made before the turn, declares its model's capabilities:
they are replaced after it is made."
  (let ((old-capabilities nil))
    (unwind-protect
        (mevedel-e2e-run
         :wire wire :stream stream :timeout 40
         :prompt "Look at the screenshot and the paper."
         :setup (lambda (chat)
                  (setq old-capabilities (get 'scripted-model :capabilities))
                  (put 'scripted-model :capabilities capabilities)
                  (setf (mevedel-chat-permission-mode chat) 'full-auto))
         :steps steps)
      (put 'scripted-model :capabilities old-capabilities))))

(defun mevedel-e2e-media--parts (content)
  "Return the parts of the message CONTENT, nil when it is a string."
  (and (not (stringp content)) (append content nil)))

(defun mevedel-e2e-media--images (wire messages)
  "Return the base64 images of the tool results in MESSAGES, in the WIRE's shape.
Anthropic: image blocks inside tool_result blocks; OpenAI: image_url
data URLs of user messages (data URLs with another type fail the test)."
  (pcase wire
    ('anthropic
     (cl-loop for m in messages
              append (cl-loop for block in (mevedel-e2e-media--parts (alist-get 'content m))
                              when (equal (alist-get 'type block) "tool_result")
                              append (cl-loop for part in (mevedel-e2e-media--parts
                                                           (alist-get 'content block))
                                              when (equal (alist-get 'type part) "image")
                                              collect (let ((source (alist-get 'source part)))
                                                        (should (equal (alist-get 'type source) "base64"))
                                                        (should (equal (alist-get 'media_type source)
                                                                       "image/png"))
                                                        (alist-get 'data source))))))
    ('openai
     (cl-loop for m in messages
              when (equal (alist-get 'role m) "user")
              append (cl-loop for part in (mevedel-e2e-media--parts (alist-get 'content m))
                              when (equal (alist-get 'type part) "image_url")
                              collect (let ((url (alist-get 'url (alist-get 'image_url part))))
                                        (should (string-prefix-p "data:image/png;base64," url))
                                        (string-remove-prefix "data:image/png;base64," url)))))))

(mevedel-e2e-deftest-matrix mevedel-e2e:read-sends-images-and-pdf-pages
    "Read's scaled image and rendered PDF page reach the model in the wire's shape."
    (wire stream)
  (let* ((png (mevedel-e2e-media--fixture "screen-4000x3000.png"))
         (pdf (mevedel-e2e-media--fixture "three-pages.pdf"))
         (run (mevedel-e2e-media--run
               wire stream '(media tool-use)
               `(((tool_calls . [((name . "Read") (arguments . ((file_path . ,png))))
                                 ((name . "Read") (arguments . ((file_path . ,pdf))))]))
                 ((expect . ((results . [((contains . "PNG, 4000×3000 px"))
                                         ((contains . "--- page 2 of 3 ---\nBravo page two."))])))
                  (text . "A screen and a paper.")))))
         (log (plist-get run :log))
         (messages (append (alist-get 'messages (alist-get 'body (nth 1 log))) nil))
         (images (mevedel-e2e-media--images wire messages)))
    (should (eq (plist-get run :outcome) 'done))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    ;; The screenshot, then the PDF's page 3 (no text layer).
    (should (= (length images) 2))
    (should (equal (mevedel-e2e-media--png-size (nth 0 images)) '(1568 . 1176)))
    (let ((page (mevedel-e2e-media--png-size (nth 1 images))))
      (should (= (max (car page) (cdr page)) 1568)))
    (dolist (b64 images) (should (<= (length b64) (* 5 1024 1024))))
    (should (string-match-p "Read .*screen-4000x3000\\.png · PNG, 4000×3000 px"
                            (cdr (nth 0 (plist-get run :rows)))))
    (should (string-match-p "Read .*three-pages\\.pdf (pages 1-3 of 3)"
                            (cdr (nth 1 (plist-get run :rows)))))))

(mevedel-e2e-deftest-matrix mevedel-e2e:read-media-errors-and-text-only-models
    "An encrypted PDF and a corrupt image are tool errors; a text-only model gets a note."
    (wire stream)
  (let* ((dir (make-temp-file "mevedel-media-" t))
         (broken (expand-file-name "broken.gif" dir))
         (run (unwind-protect
                  (progn
                    (with-temp-file broken
                      (set-buffer-multibyte nil)
                      (insert "GIF89a\x20\x00\x18\x00"))
                    (mevedel-e2e-media--run
                     wire stream '(tool-use)
                     `(((tool_calls . [((name . "Read")
                                        (arguments . ((file_path . ,(mevedel-e2e-media--fixture
                                                                     "encrypted.pdf")))))
                                       ((name . "Read") (arguments . ((file_path . ,broken))))
                                       ((name . "Read")
                                        (arguments . ((file_path . ,(mevedel-e2e-media--fixture
                                                                     "small.png")))))]))
                       ((expect . ((results . [((contains . "encrypted with a password"))
                                               ((contains . "corrupt or truncated"))
                                               ((contains . "takes text only"))])))
                        (text . "Noted.")))))
                (delete-directory dir t)))
         (log (plist-get run :log))
         (messages (append (alist-get 'messages (alist-get 'body (nth 1 log))) nil)))
    (should (eq (plist-get run :outcome) 'done))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    (should-not (mevedel-e2e-media--images wire messages))))

(provide 'read-media-e2e-test)
;;; read-media-e2e-test.el ends here
