;;; graphical-driver.el --- The session a graphical Emacs runs for graphical-e2e-test  -*- lexical-binding: t; -*-

;;; Commentary:

;; Loaded by test/e2e/graphical-e2e-test.el into a graphical Emacs
;; under Xvfb (never by the batch test runner: the file name does not
;; end in -test.el).  One turn against the scripted model: EmacsScreenshot
;; of the frame, Read of a PDF page in image mode and Read of an SVG.
;; Then the view is looked at as a person would: the thumbnails in the
;; rows' headers, and each row expanded, with its pictures full size.
;; What was seen goes to a report file (a printed plist) for the test
;; to judge, with a PNG of the frame beside it for a person to look at.

;;; Code:

(eval-and-compile
  (let ((here (file-name-directory (or load-file-name buffer-file-name))))
    (add-to-list 'load-path (expand-file-name ".." here))
    (add-to-list 'load-path here)))
(require 'mevedel-e2e-helpers)

(defun graphical-driver--images (start end)
  "Return the pixel sizes (WIDTH . HEIGHT) of the images displayed from START to END."
  (let ((pos start) (sizes nil))
    (while (< pos end)
      (let ((display (get-text-property pos 'display))
            (next (next-single-property-change pos 'display nil end)))
        (when (eq (car-safe display) 'image)
          (push (image-size display t) sizes))
        (setq pos next)))
    (nreverse sizes)))

(defun graphical-driver--row (id)
  "Return (START . END) of the row of call ID in the current view."
  (when-let* ((match (save-excursion
                       (goto-char (point-min))
                       (text-property-search-forward 'mevedel-row id #'equal))))
    (cons (prop-match-beginning match) (prop-match-end match))))

(defun graphical-driver--png-size (b64)
  "Return (WIDTH . HEIGHT) of the base64 PNG B64, or nil for another type."
  (let ((bytes (base64-decode-string b64)))
    (when (string-prefix-p "\x89PNG\r\n\x1a\n" bytes)
      (cl-flet ((u32 (at) (+ (ash (aref bytes at) 24) (ash (aref bytes (+ at 1)) 16)
                             (ash (aref bytes (+ at 2)) 8) (aref bytes (+ at 3)))))
        (cons (u32 16) (u32 20))))))

(defun graphical-driver--sent (log)
  "Return the sizes of the PNG images the last request of LOG carries (OpenAI)."
  (let ((messages (append (alist-get 'messages (alist-get 'body (car (last log)))) nil)))
    (cl-loop for m in messages
             when (and (equal (alist-get 'role m) "user") (not (stringp (alist-get 'content m))))
             append (cl-loop for part in (append (alist-get 'content m) nil)
                             when (equal (alist-get 'type part) "image_url")
                             collect (graphical-driver--png-size
                                      (string-remove-prefix
                                       "data:image/png;base64,"
                                       (alist-get 'url (alist-get 'image_url part))))))))

(defun graphical-driver--look (view png)
  "Return what VIEW's rows show, collapsed and expanded; write the frame to PNG."
  (switch-to-buffer view)
  (delete-other-windows)
  (redisplay t)
  (with-current-buffer view
    (let ((rows nil))
      (pcase-dolist (`(,id . ,header) (mevedel-e2e-view-rows view))
        (let* ((span (graphical-driver--row id))
               (collapsed (graphical-driver--images (car span) (cdr span))))
          (mevedel-view--toggle-call id)
          (redisplay t)
          (let ((span (graphical-driver--row id)))
            (push (list :header header :collapsed collapsed
                        :expanded (graphical-driver--images (car span) (cdr span)))
                  rows))))
      (goto-char (point-min))
      (redisplay t)
      (let ((coding-system-for-write 'binary))
        (write-region (x-export-frames nil 'png) nil png nil 'silent))
      (list :rows (nreverse rows)
            :window-width (window-body-width nil t)))))

(defun graphical-driver-run (report png)
  "Run the turn, look at the view, and write the REPORT; the frame goes to PNG."
  ;; Offered natively, so the script calls it by name (not through ToolCall).
  (setq mevedel-tool-native-extras '("EmacsScreenshot"))
  (let ((result
         (condition-case err
             (let* ((empty (make-hash-table))
                    (run (mevedel-e2e-run
                          :timeout 60
                          :prompt "Look at the UI, the scan and the diagram."
                          :setup (lambda (chat)
                                   (put 'scripted-model :capabilities '(media tool-use))
                                   (setf (mevedel-chat-permission-mode chat) 'full-auto))
                          :steps
                          `(((tool_calls
                              . [((name . "EmacsScreenshot") (arguments . ,empty))
                                 ((name . "Read")
                                  (arguments . ((file_path . ,(expand-file-name
                                                               "test/fixtures/media/three-pages.pdf"
                                                               mevedel-test-root))
                                                (pages . "3") (mode . "image"))))
                                 ((name . "Read")
                                  (arguments . ((file_path . ,(expand-file-name
                                                               "test/fixtures/media/diagram.svg"
                                                               mevedel-test-root)))))]))
                            ((expect . ((results . [((contains . "Image `frame"))
                                                    ((contains . "--- page 3 of 3 ---"))
                                                    ((contains . "sent drawn"))])))
                             (text . "Seen.")))
                          :inspect (lambda (_chat view) (graphical-driver--look view png))))
                    (log (plist-get run :log)))
               (append (list :outcome (plist-get run :outcome)
                             :mismatches (cl-mapcan (lambda (entry)
                                                      (copy-sequence (alist-get 'mismatches entry)))
                                                    log)
                             :sent (graphical-driver--sent log)
                             :results (mapcar (lambda (entry)
                                                (mapcar (lambda (r) (alist-get 'content r))
                                                        (alist-get 'results entry)))
                                              log))
                       (plist-get run :inspected)))
           (error (list :error (error-message-string err))))))
    (with-temp-file report
      (let ((print-length nil) (print-level nil))
        (prin1 result (current-buffer))))))

(provide 'graphical-driver)
;;; graphical-driver.el ends here
