;;; patch-review-bench.el --- Time to show the ApplyPatch review  -*- lexical-binding: t; -*-

;;; Commentary:

;; A 50-file patch: each file has 400 lines and the patch updates it
;; with 3 hunks (one line replaced and one added per hunk).  The figure
;; is the median wall-clock time from `mevedel-patch-review-start' to
;; the review buffer shown, over 21 runs after a warm-up: planning the
;; patch in memory (the module's `mevedel-core-patch-plan' on files in a
;; temporary directory, the paths resolved as the tool does for
;; ordinary relative paths) and drawing the buffer.  Until the module
;; has the patch seam, the plan's files are built in Lisp in the
;; seam's shape instead, and the input line says so.  Goal: 50 ms.

;;; Code:

(require 'cl-lib)
(require 'mevedel-core)
(require 'mevedel-patch-review)
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

(defun patch-review-bench--synthetic-files ()
  "Return plan files in the seam's shape, for a module without the seam."
  (cl-loop
   for f below patch-review-bench--files
   collect
   (list :path (format "src/file-%02d.el" f) :abs (format "/tmp/src/file-%02d.el" f)
         :op 'update :added (* 2 patch-review-bench--hunks)
         :removed patch-review-bench--hunks :diff ""
         :hunks
         (cl-loop
          for h below patch-review-bench--hunks
          for at = (+ 20 (* h 120))
          collect
          (list :index h
                :header (format "@@ -%d,5 +%d,6 @@" (- at 1) (+ (- at 1) h))
                :old-start (- at 1) :old-lines 5 :new-start (+ (- at 1) h) :new-lines 6
                :added 2 :removed 1
                :text (concat
                       (mapconcat (lambda (l) (concat " " (patch-review-bench--line f l) "\n"))
                                  (list (- at 2) (- at 1)) "")
                       "-" (patch-review-bench--line f at) "\n"
                       "+" (patch-review-bench--line f at) " ; changed\n"
                       "+(defvar patch-review-bench-added nil)\n"
                       (mapconcat (lambda (l) (concat " " (patch-review-bench--line f l) "\n"))
                                  (list (+ at 1) (+ at 2)) ""))
                :new-text (concat (patch-review-bench--line f at) " ; changed\n"
                                  "(defvar patch-review-bench-added nil)\n"))))))

(let* ((real (fboundp 'mevedel-core-patch-plan))
       (dir (and real (patch-review-bench--tree)))
       (patch (patch-review-bench--patch))
       (context (list :tool nil :args (list :patch patch) :session nil))
       (synthetic (unless real (patch-review-bench--synthetic-files)))
       (plan-files (and (fboundp 'mevedel-core-patch-plan-files)
                        (symbol-function 'mevedel-core-patch-plan-files)))
       (samples nil))
  (unwind-protect
      (cl-letf (((symbol-function 'mevedel-tool-patch-plan-for-review)
                 (if real
                     (lambda (context)
                       (let* ((patch (plist-get (plist-get context :args) :patch))
                              (ops (mevedel-core-patch-parse patch))
                              (paths (cl-loop for op in ops
                                              append (cl-loop
                                                      for key in '(:path :move-to)
                                                      for p = (plist-get op key)
                                                      when p collect
                                                      (cons p (expand-file-name p dir))))))
                         (mevedel-core-patch-plan patch paths)))
                   (lambda (_context) 'synthetic-plan))))
        (unless real
          (fset 'mevedel-core-patch-plan-files (lambda (_plan) synthetic)))
        (unwind-protect
            (dotimes (i 23)
              (garbage-collect)
              (let* ((withdraw nil)
                     (seconds (mevedel-bench-seconds
                                (setq withdraw (mevedel-patch-review-start
                                                context nil #'ignore)))))
                (unless (functionp withdraw)
                  (error "The review did not open"))
                (unless (string-match-p "\\`\\*mevedel-review: 50 files\\*"
                                        (buffer-name (window-buffer (selected-window))))
                  (error "The review buffer is not shown"))
                (funcall withdraw)
                (when (>= i 2) (push (* 1000 seconds) samples))))
          (unless real
            (if plan-files
                (fset 'mevedel-core-patch-plan-files plan-files)
              (fmakunbound 'mevedel-core-patch-plan-files)))))
    (when dir (delete-directory dir t)))
  (mevedel-bench-describe
   "%d-file patch, %d hunks per file (%d lines each), %s; start to review buffer shown, \
median of %d runs (goal 50 ms)"
   patch-review-bench--files patch-review-bench--hunks patch-review-bench--lines
   (if real "planned by the module" "plan files built in Lisp (module without the patch seam)")
   (length samples))
  (mevedel-bench-report "applypatch-review-open" (mevedel-bench-percentile samples 50) "ms"))

;;; patch-review-bench.el ends here
