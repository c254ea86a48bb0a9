;;; patch-review-bench.el --- Time to show the ApplyPatch review  -*- lexical-binding: t; -*-

;;; Commentary:

;; A 50-file patch: each file has 400 lines and the patch updates it
;; with 3 hunks (one line replaced and one added per hunk).  The figure
;; is the median wall-clock time from `mevedel-patch-review-start' to
;; the review buffer shown, over 21 runs after a warm-up: resolving
;; and planning the patch in memory (ApplyPatch's
;; `mevedel-tool-patch-plan-for-review' over files in a temporary
;; workspace, the module's plan), fetching the plan's files and diffs,
;; and drawing the buffer.  Goal: 50 ms.

;;; Code:

(require 'cl-lib)
(require 'mevedel-core)
(require 'mevedel-patch-review)
(require 'mevedel-session)
(require 'mevedel-tool-patch)
(require 'mevedel-bench-lib)

(mevedel-core-ensure)

(defconst patch-review-bench--files 50)
(defconst patch-review-bench--lines 400)
(defconst patch-review-bench--hunks 3)

(defun patch-review-bench--line (file line)
  "Return the text of LINE of FILE in the generated tree."
  (format "(defvar patch-review-bench-%02d-%03d %d) ; line %d of file %d"
          file line (* file line) line file))

(defun patch-review-bench--patch ()
  "Return the 50-file patch, in the Codex grammar."
  (with-temp-buffer
    (insert "*** Begin Patch\n")
    (dotimes (f patch-review-bench--files)
      (insert (format "*** Update File: src/file-%02d.el\n" f))
      (dotimes (h patch-review-bench--hunks)
        (let ((at (+ 20 (* h 120))))
          (insert "@@\n")
          (dolist (l (list (- at 2) (- at 1)))
            (insert " " (patch-review-bench--line f l) "\n"))
          (insert "-" (patch-review-bench--line f at) "\n"
                  "+" (patch-review-bench--line f at) " ; changed\n"
                  "+(defvar patch-review-bench-added nil)\n")
          (dolist (l (list (+ at 1) (+ at 2)))
            (insert " " (patch-review-bench--line f l) "\n")))))
    (insert "*** End Patch\n")
    (buffer-string)))

(defun patch-review-bench--tree ()
  "Write the files the patch updates under a new directory; return it."
  (let ((dir (file-name-as-directory (make-temp-file "patch-review-bench" t))))
    (make-directory (expand-file-name "src" dir))
    (dotimes (f patch-review-bench--files)
      (with-temp-file (expand-file-name (format "src/file-%02d.el" f) dir)
        (dotimes (l patch-review-bench--lines)
          (insert (patch-review-bench--line f l) "\n"))))
    dir))

(let* ((dir (patch-review-bench--tree))
       (session (mevedel-session-create :workspace dir :ephemeral t))
       (context (list :tool (mevedel-tool-get "ApplyPatch")
                      :args (list :patch (patch-review-bench--patch)) :session session))
       (samples nil)
       (planning nil))
  (unwind-protect
      (dotimes (i 23)
        (garbage-collect)
        (let* ((withdraw nil)
               (seconds (mevedel-bench-seconds
                          (setq withdraw (mevedel-patch-review-start context session #'ignore)))))
          (unless (functionp withdraw)
            (error "The review did not open"))
          (unless (string-match-p "\\`\\*mevedel-review: 50 files\\*"
                                  (buffer-name (window-buffer (selected-window))))
            (error "The review buffer is not shown"))
          (funcall withdraw)
          (when (>= i 2) (push (* 1000 seconds) samples))))
    (setq planning (cl-loop repeat 11
                            collect (* 1000 (mevedel-bench-seconds
                                              (mevedel-tool-patch-plan-for-review context)))))
    (mevedel-session-close session)
    (delete-directory dir t))
  (mevedel-bench-describe
   "%d-file patch, %d hunks per file (%d-line files), planned by ApplyPatch's \
`mevedel-tool-patch-plan-for-review' and the module; `mevedel-patch-review-start' to the review \
buffer shown, median of %d runs (goal 50 ms); of which planning alone (target checks and the \
module's plan): median %.1f ms"
   patch-review-bench--files patch-review-bench--hunks patch-review-bench--lines
   (length samples) (mevedel-bench-percentile planning 50))
  (mevedel-bench-report "applypatch-review-open" (mevedel-bench-percentile samples 50) "ms"))

;;; patch-review-bench.el ends here
