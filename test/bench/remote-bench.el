;;; remote-bench.el --- Read of a small file on a remote workspace  -*- lexical-binding: t; -*-

;;; Commentary:

;; Against a private sshd on 127.0.0.1 (test/e2e/mevedel-sshd.el), with
;; the TRAMP connection open as in a running session: Read's handler,
;; the entry point a model's call reaches, on a 2 KB remote file, from
;; the call to its settled result.  The peer is what a user runs
;; without mevedel: TRAMP's own `insert-file-contents' of the same file
;; over the same open connection.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path
               (expand-file-name "../e2e" (file-name-directory
                                           (or load-file-name byte-compile-current-file
                                               buffer-file-name)))))
(require 'mevedel-tool-fs)
(require 'mevedel-sshd)
(require 'mevedel-bench-lib)

(defun remote-bench--read (file)
  "Return the seconds one Read of the remote FILE takes."
  (let ((result nil)
        (start (float-time))
        (default-directory (file-name-directory file)))
    (mevedel-tool-fs-read (lambda (r) (setq result r)) (list :file_path file))
    (while (not result) (accept-process-output nil 0.001))
    (prog1 (- (float-time) start)
      (unless (string-prefix-p "     1\tline 1" (plist-get result :result))
        (error "Bench Read failed: %s" (plist-get result :result))))))

(defun remote-bench--insert (file)
  "Return the seconds TRAMP's own `insert-file-contents' of FILE takes.
What a user runs without mevedel: visit the text over the same open
connection."
  (let ((start (float-time)))
    (with-temp-buffer
      (insert-file-contents file)
      (unless (string-prefix-p "line 1 " (buffer-string))
        (error "Bench: TRAMP read %s wrongly" file)))
    (- (float-time) start)))

(defun remote-bench--median (count thunk)
  "Time THUNK COUNT times, after a warm-up; return the median in milliseconds."
  (funcall thunk)
  (let ((samples (sort (cl-loop repeat count collect (funcall thunk)) #'<)))
    (* 1000 (nth (/ count 2) samples))))

(mevedel-core-ensure)
(let* ((sshd (mevedel-sshd-start))
       (dir (make-temp-file "mevedel-remote-bench-" t))
       (local (expand-file-name "small.txt" dir))
       (runs 21))
  (unwind-protect
      (progn
        (with-temp-file local
          (dotimes (i 100) (insert (format "line %d of a small remote file\n" (1+ i)))))
        (let ((file (mevedel-sshd-file sshd local)))
          (mevedel-bench-describe
           "Read of a 3 KB file (100 lines) on a TRAMP /ssh: workspace (private sshd on \
127.0.0.1, connection open), from the handler call to its numbered result; peer: TRAMP's own \
insert-file-contents of the same file over the same connection; median of %d runs each"
           runs)
          (mevedel-bench-report
           "remote-read-roundtrip"
           (remote-bench--median runs (lambda () (remote-bench--read file)))
           "ms" "tramp-insert-file-contents"
           (remote-bench--median runs (lambda () (remote-bench--insert file))))))
    (mevedel-sshd-stop sshd)
    (delete-directory dir t)))

;;; remote-bench.el ends here
