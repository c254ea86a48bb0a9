;;; remote-bench.el --- Read of a small file on a remote workspace  -*- lexical-binding: t; -*-

;;; Commentary:

;; Against a private sshd on 127.0.0.1 (test/e2e/mevedel-sshd.el), with
;; the TRAMP connection open as in a running session: Read's handler,
;; the entry point a model's call reaches, on a 2 KB remote file, from
;; the call to its settled result.  The peer is two ssh round trips on
;; the same open connection (`ssh HOST true' through its control
;; socket), the issue's goal: one Read within two round trips' time.

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

(defun remote-bench--round-trip (sshd)
  "Return the seconds of one ssh round trip to SSHD on TRAMP's open connection."
  (let ((start (float-time))
        (status (call-process "ssh" nil nil nil "-F" (mevedel-sshd-config sshd)
                              "-o" (concat "ControlPath="
                                           (expand-file-name "cm-%C" (mevedel-sshd-dir sshd)))
                              "-o" "ControlMaster=no" (mevedel-sshd-alias sshd) "true")))
    (unless (eql status 0) (error "Bench: ssh %s true failed (%s)" (mevedel-sshd-alias sshd) status))
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
127.0.0.1, connection open), from the handler call to its result; peer: two ssh round trips \
(`ssh HOST true' on the same connection's control socket); median of %d runs; goal ratio >= 1"
           runs)
          (mevedel-bench-report
           "remote-read-roundtrip"
           (remote-bench--median runs (lambda () (remote-bench--read file)))
           "ms" "ssh-round-trip-x2"
           (* 2 (remote-bench--median runs (lambda () (remote-bench--round-trip sshd)))))))
    (mevedel-sshd-stop sshd)
    (delete-directory dir t)))

;;; remote-bench.el ends here
