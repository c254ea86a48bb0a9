;;; screenshots-test.el --- `make screenshots' draws the view's PNGs  -*- lexical-binding: t; -*-

;;; Commentary:

;; Runs what `make screenshots' runs, into a temporary directory:
;; scripts/deps.sh screenshots installs the graphical Emacs and Xvfb when
;; they are missing (as root on Debian, as CI is), then
;; scripts/screenshots.sh draws the scripted session.  Each PNG must
;; exist, be a PNG, and have the frame's dimensions (read from its IHDR).

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)

(defconst mevedel-screenshots-test--names
  '("view-turn" "view-grep-row" "view-permission-card" "patch-review" "view-background-panel"
    "view-plan-card" "view-usage")
  "The screenshots the script draws.")

(defun mevedel-screenshots-test--dimensions (file)
  "Return (WIDTH . HEIGHT) of the PNG FILE, read from its IHDR chunk."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file nil 0 24)
    (let ((bytes (buffer-string)))
      (should (string-prefix-p "\211PNG\r\n\032\n" bytes))
      (should (equal (substring bytes 12 16) "IHDR"))
      (cl-flet ((u32 (at) (+ (ash (aref bytes at) 24) (ash (aref bytes (+ at 1)) 16)
                             (ash (aref bytes (+ at 2)) 8) (aref bytes (+ at 3)))))
        (cons (u32 16) (u32 20))))))

(defun mevedel-screenshots-test--run (program &rest args)
  "Run PROGRAM with ARGS in the checkout; return its output, failing on an error."
  (with-temp-buffer
    (let* ((default-directory (file-name-as-directory (getenv "MEVEDEL_ROOT")))
           (status (apply #'call-process program nil t nil args)))
      (unless (eq status 0)
        (ert-fail (list program args status (buffer-string))))
      (buffer-string))))

(ert-deftest mevedel-screenshots:the-script-draws-every-png ()
  "The screenshot script writes each PNG, non-empty, at the frame's size."
  (let ((dir (make-temp-file "mevedel-screenshots-" t)))
    (unwind-protect
        (progn
          (mevedel-screenshots-test--run "bash" "scripts/deps.sh" "screenshots")
          (mevedel-screenshots-test--run "bash" "scripts/screenshots.sh" dir)
          (let (sizes)
            (dolist (name mevedel-screenshots-test--names)
              (let ((file (expand-file-name (concat name ".png") dir)))
                (should (file-exists-p file))
                (should (> (file-attribute-size (file-attributes file)) 10000))
                (push (mevedel-screenshots-test--dimensions file) sizes)))
            ;; One frame: every picture has its size, a 136x38 frame.
            (should (= (length (delete-dups (copy-sequence sizes))) 1))
            (should (< 800 (car (car sizes)) 1280))
            (should (< 500 (cdr (car sizes)) 900))))
      (delete-directory dir t))))

(provide 'screenshots-test)
;;; screenshots-test.el ends here
