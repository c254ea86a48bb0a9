;;; graphical-e2e-test.el --- Pictures in a real graphical Emacs under Xvfb  -*- lexical-binding: t; -*-

;;; Commentary:

;; Starts Xvfb on a free display and a graphical (Cairo) Emacs on it,
;; which runs test/e2e/graphical-driver.el: a session whose scripted
;; model takes an EmacsScreenshot, Reads a scanned PDF page as an image
;; and Reads an SVG.  The report it writes says what reached the model
;; and what the view showed: a thumbnail in each row's header, and each
;; expanded row's pictures full size, scaled down to the window's width.
;; Xvfb and a graphical Emacs (scripts/deps.sh installs both) are
;; required: the test fails, never skips, without them.  The terminal
;; Emacs's rows, which say in words what was sent, are checked in
;; test/e2e/tmux-e2e-test.el.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun mevedel-graphical-test--emacs ()
  "Return a graphical Emacs that can export its frames, or fail the test."
  (let ((emacs (or (executable-find "emacs-gtk") (executable-find "emacs-lucid")
                   (expand-file-name invocation-name invocation-directory))))
    (unless (eql 0 (call-process emacs nil nil nil "--batch" "--eval"
                                 "(kill-emacs (if (fboundp 'x-export-frames) 0 1))"))
      (ert-fail (format "%s cannot export frames: a graphical Cairo Emacs (Debian's \
emacs-gtk; scripts/deps.sh installs it) is required" emacs)))
    emacs))

(defun mevedel-graphical-test--xvfb ()
  "Start Xvfb on a free display; return (PROCESS . DISPLAY), or fail the test."
  (unless (executable-find "Xvfb")
    (ert-fail "Xvfb is required by this test but is not installed (scripts/deps.sh installs it)"))
  (let* ((number (cl-loop for n from (+ 100 (% (emacs-pid) 400)) below 1000
                          unless (file-exists-p (format "/tmp/.X%d-lock" n)) return n))
         (socket (format "/tmp/.X11-unix/X%d" number))
         ;; -noreset: no refusals while it resets between clients.
         (process (start-process "mevedel-xvfb" " *mevedel-xvfb*" "Xvfb"
                                 (format ":%d" number) "-noreset" "-screen" "0" "1280x900x24"
                                 "-nolisten" "tcp"))
         (deadline (+ (float-time) 15)))
    (set-process-query-on-exit-flag process nil)
    (while (and (not (file-exists-p socket)) (process-live-p process) (< (float-time) deadline))
      (accept-process-output process 0.05))
    (unless (and (file-exists-p socket) (process-live-p process))
      (delete-process process)
      (ert-fail (format "Xvfb did not start: %s"
                        (with-current-buffer " *mevedel-xvfb*" (buffer-string)))))
    (cons process (format ":%d" number))))

(defun mevedel-graphical-test--run ()
  "Run the driver's session in a graphical Emacs; return its report and log."
  (let* ((emacs (mevedel-graphical-test--emacs))
         (xvfb (mevedel-graphical-test--xvfb))
         (dir (make-temp-file "mevedel-graphical-" t))
         (report (expand-file-name "report.eld" dir))
         (png (expand-file-name "frame.png" dir))
         (log (expand-file-name "emacs.log" dir)))
    (unwind-protect
        (let ((process-environment (cons (concat "DISPLAY=" (cdr xvfb)) process-environment)))
          ;; Its output goes to a file: the children it starts (the
          ;; scripted server) would hold a pipe open past its exit.
          (call-process "timeout" nil (list :file log) nil "-k" "5" "150" emacs "-Q"
                        "-l" (expand-file-name "scripts/load-path.el" mevedel-test-root)
                        "-l" (expand-file-name "test/e2e/graphical-driver.el" mevedel-test-root)
                        "--eval" (prin1-to-string
                                  `(unwind-protect (graphical-driver-run ,report ,png)
                                     (kill-emacs 0))))
          (with-temp-buffer
            (unless (file-exists-p report)
              (insert-file-contents log)
              (ert-fail (format "The graphical Emacs wrote no report; it said:\n%s"
                                (buffer-string))))
            (list (with-temp-buffer
                    (insert-file-contents report)
                    (read (current-buffer)))
                  (and (file-exists-p png)
                       (file-attribute-size (file-attributes png))))))
      (delete-process (car xvfb))
      (delete-directory dir t))))

(ert-deftest mevedel-graphical:screenshot-thumbnails-and-full-size-pictures ()
  "In a graphical Emacs, EmacsScreenshot, a rendered PDF page and an SVG reach
the model as images; their rows show thumbnails, and expanded rows the
pictures full size, scaled to the window's width."
  (mevedel-e2e-require-python)
  (pcase-let* ((`(,report ,frame-png) (mevedel-graphical-test--run))
               (rows (plist-get report :rows))
               (width (plist-get report :window-width)))
    (should-not (plist-get report :error))
    (should (eq (plist-get report :outcome) 'done))
    (should-not (plist-get report :mismatches))
    (should (> frame-png 0))
    ;; The screenshot: a picture of the frame, as the text says.
    (let* ((texts (car (last (plist-get report :results))))
           (shot (cl-find-if (lambda (text) (string-prefix-p "Image `frame" text)) texts))
           (sent (plist-get report :sent)))
      (should shot)
      (should (string-match "PNG, \\([0-9]+\\)×\\([0-9]+\\) px" shot))
      (should (= (length sent) 3))
      (let ((shot-size (cons (string-to-number (match-string 1 shot))
                             (string-to-number (match-string 2 shot)))))
        (should (> (car shot-size) 200))
        (should (member shot-size sent)))
      ;; The PDF page, 1568 px on its longest side; the SVG 512×256.
      (should (cl-some (lambda (s) (= (max (car s) (cdr s)) 1568)) sent))
      (should (member '(512 . 256) sent)))
    (should (= (length rows) 3))
    (dolist (row rows)
      (let ((header (plist-get row :header))
            (thumbnails (plist-get row :collapsed))
            (full (plist-get row :expanded)))
        (ert-info ((format "Row %s" header))
          ;; Collapsed: one thumbnail, no side above 96 px, no words for it.
          (should (= (length thumbnails) 1))
          (should (<= (max (caar thumbnails) (cdar thumbnails)) 96))
          (should-not (string-match-p "· sent " header))
          ;; Expanded: the thumbnail in the header, and the picture below,
          ;; larger than it and no wider than the window.
          (should (= (length full) 2))
          (let ((picture (nth 1 full)))
            (should (> (car picture) 96))
            (should (<= (car picture) width))))))
    ;; The PDF page (wider than the window) is scaled down to the window.
    (let ((page (nth 1 (plist-get (cl-find-if (lambda (row)
                                                 (string-match-p "three-pages\\.pdf"
                                                                 (plist-get row :header)))
                                               rows)
                                   :expanded))))
      (should (> (car page) (/ width 2))))))

(provide 'graphical-e2e-test)
;;; graphical-e2e-test.el ends here
