;;; sandbox-bench.el --- Sandbox launch and preparation costs  -*- lexical-binding: t; -*-

;;; Commentary:

;; 1. Spawning `true' to completion through `mevedel-sandbox-run'
;;    (Lisp -> module -> owner -> exit -> event channel -> callback),
;;    confined (bwrap + Landlock helper; Landlock helper alone) against
;;    the same path unconfined (mode off), p50 of sequential runs.
;; 2. Preparing one launch (policy, protected-path discovery, argv) from
;;    Lisp, with a workspace of 5,000 files in 50 directories plus a
;;    .git: per call with the discovery cache valid, and per call when a
;;    directory change forces a full walk each time.

;;; Code:

(require 'mevedel-sandbox)
(require 'mevedel-bench-lib)

(mevedel-core-ensure)

(defun mevedel-sandbox-bench--run-ms (request)
  "Run the sandbox REQUEST plist; return the wall time until its callback, in ms.
The callback's own clock reading counts: `accept-process-output' may
sleep out its timeout after a child's SIGCHLD even though the filter
already ran."
  (let ((done nil) (called nil) (start (float-time)))
    (mevedel-sandbox-run request (lambda (o) (setq called (float-time) done o)))
    (while (not done) (accept-process-output nil 0.05))
    (unless (eq (plist-get done :start) 'started)
      (error "Sandbox bench run did not start: %S" done))
    (* 1000 (- called start))))

(defun mevedel-sandbox-bench--p50 (n request)
  "Return the median over N runs of REQUEST, after a warm-up."
  (dotimes (_ 5) (mevedel-sandbox-bench--run-ms request))
  (let (samples)
    (dotimes (_ n) (push (mevedel-sandbox-bench--run-ms request) samples))
    (mevedel-bench-percentile samples 50)))

(let* ((ws (make-temp-file "mevedel-bench-ws" t))
       (n 60)
       (base (list :command '("true") :cwd ws :writable (list ws)))
       (unconfined (mevedel-sandbox-bench--p50 n (append '(:mode off) base)))
       (confined (mevedel-sandbox-bench--p50 n (append '(:mode required) base)))
       (landlock (mevedel-sandbox-bench--p50
                  n (append '(:mode required :backend landlock) base))))
  (mevedel-bench-describe
   "%d sequential runs of `true' to completion via mevedel-sandbox-run (callback through the event channel)" n)
  (mevedel-bench-report "sandbox-spawn-true-bwrap-landlock-p50" confined "ms"
                        "unconfined" unconfined)
  (mevedel-bench-report "sandbox-spawn-true-landlock-only-p50" landlock "ms"
                        "unconfined" unconfined)
  (mevedel-bench-describe "confined (bwrap + Landlock helper) minus unconfined, p50s of the runs above")
  (mevedel-bench-report "sandbox-spawn-overhead-p50" (- confined unconfined) "ms")
  (delete-directory ws t))

(let* ((ws (make-temp-file "mevedel-bench-5k" t))
       (old (encode-time '(0 0 0 1 1 2001 nil nil t)))
       (request (list :command '("true") :cwd ws :writable (list ws)))
       (calls 2000))
  (make-directory (expand-file-name ".git/hooks" ws) t)
  (dotimes (d 50)
    (let ((dir (expand-file-name (format "dir%02d" d) ws)))
      (make-directory dir)
      (dotimes (f 100)
        (write-region "x" nil (expand-file-name (format "file%03d.txt" f) dir) nil 'silent))
      (set-file-times dir old)))
  (set-file-times (expand-file-name ".git" ws) old)
  (set-file-times ws old)
  (let ((plan (mevedel-sandbox-prepare request)))
    (unless (eq (plist-get plan :boundary) 'bwrap-landlock)
      (error "Sandbox bench expected bwrap-landlock, got %S" plan)))
  (mevedel-bench-describe
   "prepare one confined launch from Lisp (JSON request, policy, .git discovery, bwrap + helper argv); workspace of 5,000 files in 50 dirs + .git, discovery cache valid; mean of %d calls" calls)
  (mevedel-bench-report "sandbox-prepare-5k-files-cached"
                        (* 1000 (mevedel-bench-per-call
                                 calls (lambda () (mevedel-sandbox-prepare request))))
                        "ms")
  (let ((stamp 0))
    (mevedel-bench-describe
     "the same, but the workspace root's mtime changes before every call, forcing a full walk of the 5,000 files; mean of 300 calls")
    (mevedel-bench-report "sandbox-prepare-5k-files-walk"
                          (* 1000 (mevedel-bench-per-call
                                   300 (lambda ()
                                         (set-file-times ws (time-add old (cl-incf stamp)))
                                         (mevedel-sandbox-prepare request))))
                          "ms"))
  (delete-directory ws t))

;;; sandbox-bench.el ends here
