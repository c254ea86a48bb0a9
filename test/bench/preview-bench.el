;;; preview-bench.el --- Bash output previews that keep failure lines  -*- lexical-binding: t; -*-

;;; Commentary:

;; The preview a model gets when it polls a Bash command (WriteStdin
;; with empty chars) whose unread output is a 64 MiB spool: counted,
;; cut into head and tail and, with `mevedel-pipeline-failure-patterns',
;; scanned for the lines that look like failures, all in Rust, then
;; delivered through the event channel.  The same spool is previewed
;; with the default patterns (200 error lines in it) and with none (the
;; plain preview), alternating, in the same Emacs.

;;; Code:

(require 'cl-lib)
(require 'mevedel-core)
(require 'mevedel-bench-lib)
(require 'mevedel-pipeline)

(mevedel-core-ensure)

;; Settlement and progress events have no consumer here.
(mevedel-core-register-event-handler 'exec-settled #'ignore)

(defconst preview-bench--size (* 64 1024 1024)
  "Bytes of the previewed output: the spool's cap.")

(defvar preview-bench--dir (make-temp-file "preview-bench" t)
  "Where the output file lives.")

(defvar preview-bench--file (expand-file-name "build.log" preview-bench--dir)
  "A build log of `preview-bench--size' bytes with 200 error lines.")

(defvar preview-bench--n 0)

(defun preview-bench--write-log ()
  "Write `preview-bench--file': build lines, and an error every 1/201th."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (let* ((filler "   Compiling dep-%07d v1.0.%d (/home/user/work/crates/dep-%07d)\n")
           (every (/ preview-bench--size (length (format filler 0 0 0)) 201))
           (line 0) (errors 0))
      (while (< (buffer-size) (- preview-bench--size 200))
        (setq line (1+ line))
        (if (and (zerop (% line every)) (< errors 200))
            (progn (setq errors (1+ errors))
                   (insert (format "src/module_%d.c:%d:5: error: expected ';' before 'return'\n"
                                   line (1+ (% line 900)))))
          (insert (format filler line (% line 10) line))))
      (insert (make-string (- preview-bench--size (buffer-size) 1) ?.) "\n")
      (unless (= errors 200)
        (error "The bench log has %d error lines, not 200" errors)))
    (let ((coding-system-for-write 'no-conversion))
      (write-region nil nil preview-bench--file nil 'silent)))
  (unless (= (file-attribute-size (file-attributes preview-bench--file)) preview-bench--size)
    (error "The bench log is not %d bytes" preview-bench--size)))

(defun preview-bench--wait (thunk)
  "Call THUNK with a callback; wait for it and return its (STATUS . VALUE)."
  (let ((box (list nil)))
    (funcall thunk (lambda (status value) (setcar box (cons status value))))
    (while (not (car box)) (accept-process-output nil 0.005))
    (unless (eq (caar box) 'ok)
      (error "Bench call failed: %S" (car box)))
    (car box)))

(defun preview-bench--poll-ms (check)
  "Return the milliseconds of one poll previewing the whole unread log.
A command that prints nothing before it yields, then the log, then
sleeps is started: it prints once the first observation is in (it
waits for a file made then, so a loaded machine cannot let output into
that observation); once all of the log is spooled, a WriteStdin-style
poll (`mevedel-core-exec-observe', no wait) is timed from the call to
its callback.  CHECK is called with that observation's output."
  (let* ((session (format "preview-bench-%d" (cl-incf preview-bench--n)))
         (go (expand-file-name session preview-bench--dir))
         (id (plist-get
              (cdr (preview-bench--wait
                    (lambda (cb)
                      (mevedel-core-exec-start
                       (list :session session :owner "/root" :yield-ms 50
                             :command (format "until [ -e %s ]; do sleep 0.01; done; cat %s; exec sleep 600"
                                              (shell-quote-argument go)
                                              (shell-quote-argument preview-bench--file))
                             :cwd preview-bench--dir :progress :false)
                       cb))))
              :id))
         (ms nil))
    (write-region "" nil go nil 'silent)
    (while (< (or (plist-get (car (mevedel-core-exec-list session "/root")) :bytes) 0)
              preview-bench--size)
      (accept-process-output nil 0.01))
    (garbage-collect)
    (let* ((start (float-time))
           (obs (preview-bench--wait
                 (lambda (cb)
                   (mevedel-core-exec-observe
                    session id "/root" 0
                    (lambda (status value)
                      (setq ms (* 1000 (- (float-time) start)))
                      (funcall cb status value)))))))
      (funcall check (plist-get (cdr obs) :output)))
    (preview-bench--wait (lambda (cb) (mevedel-core-exec-stop session id "/root" cb)))
    ms))

(defvar preview-bench--shown nil
  "How many of the 200 error lines the last kept preview showed.")

(defun preview-bench--kept-check (output)
  "Signal unless OUTPUT keeps some of the 200 error lines, numbered."
  (unless (string-match "\\[200 of the omitted lines look like failures; \\([0-9]+\\) shown, [0-9]+ not shown:\\]\n  L[0-9]+: src/module_"
                        output)
    (error "Bench preview-keep-lines-64mib: no kept lines in %S" (substring output 0 300)))
  (setq preview-bench--shown (string-to-number (match-string 1 output))))

(defun preview-bench--plain-check (output)
  "Signal unless OUTPUT is the plain preview."
  (when (or (string-match-p "like failures" output)
            (not (string-match-p "characters omitted" output)))
    (error "Bench preview-plain-64mib: not a plain preview")))

(unwind-protect
    (let ((rounds 7) kept plain)
      (preview-bench--write-log)
      ;; A warm-up of each, then alternate so both see the same machine.
      (dotimes (i (1+ rounds))
        (let ((mevedel-pipeline-failure-patterns
               (default-value 'mevedel-pipeline-failure-patterns)))
          (mevedel-pipeline-sync-failure-patterns)
          (let ((ms (preview-bench--poll-ms #'preview-bench--kept-check)))
            (when (> i 0) (push ms kept))))
        (let ((mevedel-pipeline-failure-patterns nil))
          (mevedel-pipeline-sync-failure-patterns)
          (let ((ms (preview-bench--poll-ms #'preview-bench--plain-check)))
            (when (> i 0) (push ms plain)))))
      (let ((ours (mevedel-bench-percentile kept 50))
            (base (mevedel-bench-percentile plain 50)))
        (mevedel-bench-describe "a Bash poll (WriteStdin, empty chars) whose unread output is a 64 MiB build log (1.0 M lines, 200 `file:line:col: error:' lines spread through it), from the call to its callback: the streaming count, head and tail, and with the %d default `mevedel-pipeline-failure-patterns' the scan for kept lines (%d shown: the first ones and the last that fit half the 2,000-character budget); the plain preview is the same spool with the patterns off; median of %d alternating rounds each; ratio %.2f; goal <= 1.2x the plain preview"
                                (length (default-value 'mevedel-pipeline-failure-patterns))
                                preview-bench--shown rounds (/ ours base))
        (mevedel-bench-report "preview-keep-lines-64mib" ours "ms")
        (mevedel-bench-report "preview-plain-64mib" base "ms")))
  (delete-directory preview-bench--dir t))

;;; preview-bench.el ends here
