;;; sandbox-bench.el --- Cost of preparing a sandbox launch  -*- lexical-binding: t; -*-

;;; Commentary:

;; Preparing one launch (policy, protected-path discovery, argv) from
;; Lisp, with a workspace of 5,000 files in 50 directories plus a .git:
;; per call with the discovery cache valid, and per call when a
;; directory change forces a full walk each time.  Running confined
;; commands is measured on the path the product runs them, as managed
;; executions: `exec-true-confined' and `exec-true-landlock-only' in
;; exec-bench.el.

;;; Code:

(require 'mevedel-sandbox)
(require 'mevedel-bench-lib)

(mevedel-core-ensure)

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
