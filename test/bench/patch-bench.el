;;; patch-bench.el --- ApplyPatch: applying a large patch, showing the review  -*- lexical-binding: t; -*-

;;; Commentary:

;; 1. A 200-hunk patch to a 20,000-line file, applied by an ApplyPatch
;;    call through the pipeline (an ephemeral session in `edits' mode,
;;    so nothing asks), against `git apply' of the same change as a
;;    unified diff, run by `call-process' in the same Emacs.  The file
;;    is written back between runs, outside the timings.
;;
;; 2. A 50-file patch: each file has 400 lines and the patch updates it
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
(require 'mevedel-pipeline)
(require 'mevedel-chat)

(mevedel-core-ensure)

;;;; A 200-hunk patch against git apply

(defconst patch-bench--big-lines 20000)
(defconst patch-bench--big-hunks 200)

(defun patch-bench--big-line (n)
  "Return line N (from 0) of the 20,000-line file."
  (format "(defconst patch-bench-line-%05d %d \"line %d\")" n (* 7 n) n))

(defun patch-bench--big-changes ()
  "Return the 0-based lines the 200 hunks replace, one per 100 lines."
  (cl-loop for h below patch-bench--big-hunks collect (+ 50 (* h 100))))

(defun patch-bench--big-patch ()
  "Return the 200-hunk change as an ApplyPatch patch and as a unified diff."
  (let ((ours (list "*** Begin Patch\n*** Update File: big.el\n"))
        (git (list "--- a/big.el\n+++ b/big.el\n")))
    (dolist (at (patch-bench--big-changes))
      (let ((before (cl-loop for l from (- at 3) below at concat (concat " " (patch-bench--big-line l) "\n")))
            (after (cl-loop for l from (1+ at) to (+ at 3) concat (concat " " (patch-bench--big-line l) "\n")))
            (change (concat "-" (patch-bench--big-line at) "\n"
                            "+" (patch-bench--big-line at) " ; changed\n")))
        (push (concat "@@\n" before change after) ours)
        (push (format "@@ -%d,7 +%d,7 @@\n%s%s%s" (- at 2) (- at 2) before change after) git)))
    (push "*** End Patch\n" ours)
    (cons (apply #'concat (nreverse ours)) (apply #'concat (nreverse git)))))

(defun patch-bench--apply (data patch)
  "Apply PATCH with an ApplyPatch call from data buffer DATA; return the result."
  (let ((result nil))
    (with-current-buffer data
      (mevedel-pipeline-run-tool (mevedel-tool-get "ApplyPatch") (list :patch patch)
                                 (lambda (r) (setq result r))
                                 :tool-use-id "bench" :data-buffer data))
    (while (not result) (accept-process-output nil 0.001))
    (unless (string-match-p "^Updated big\\.el (\\+200 -200)" result)
      (error "ApplyPatch failed: %s" (substring result 0 (min 300 (length result)))))
    result))

(let* ((dir (file-name-as-directory (make-temp-file "patch-bench-big" t)))
       (file (expand-file-name "big.el" dir))
       (original (cl-loop for l below patch-bench--big-lines
                          concat (concat (patch-bench--big-line l) "\n")))
       (patches (patch-bench--big-patch))
       (diff-file (expand-file-name "change.diff" (make-temp-file "patch-bench-diff" t)))
       (session (mevedel-session-create :workspace dir :ephemeral t))
       (_chat (mevedel-chat-get-create dir))
       (data (generate-new-buffer " *patch-bench*"))
       (reset (lambda () (let ((coding-system-for-write 'utf-8-unix))
                           (write-region original nil file nil 'silent))))
       (expected nil) (ours nil) (git nil))
  (setf (mevedel-session-permission-mode session) 'edits)
  (with-current-buffer data
    (setq default-directory dir)
    (setq-local mevedel-session-current session))
  (let ((coding-system-for-write 'utf-8-unix))
    (write-region (cdr patches) nil diff-file nil 'silent))
  (unwind-protect
      (dotimes (i 13)
        (funcall reset)
        (garbage-collect)
        (let ((seconds (mevedel-bench-seconds (patch-bench--apply data (car patches)))))
          (when (>= i 2) (push (* 1000 seconds) ours)))
        (setq expected (with-temp-buffer (insert-file-contents file) (buffer-string)))
        (funcall reset)
        (garbage-collect)
        (let* ((default-directory dir)
               (status nil)
               (seconds (mevedel-bench-seconds
                          (setq status (call-process "git" nil nil nil "apply" diff-file)))))
          (unless (eql status 0) (error "git apply failed with %s" status))
          (when (>= i 2) (push (* 1000 seconds) git)))
        (unless (equal expected (with-temp-buffer (insert-file-contents file) (buffer-string)))
          (error "ApplyPatch and git apply disagree")))
    (kill-buffer data)
    (delete-directory dir t)
    (delete-directory (file-name-directory diff-file) t))
  (mevedel-bench-describe
   "%d-hunk patch (one line replaced per hunk, 3 context lines each side) to a %d-line file: \
an ApplyPatch call through the pipeline to its result, against `git apply' of the same \
unified diff (call-process); median of %d runs each, alternating"
   patch-bench--big-hunks patch-bench--big-lines (length ours))
  (mevedel-bench-report "applypatch-200-hunks" (mevedel-bench-percentile ours 50) "ms"
                        "git-apply" (mevedel-bench-percentile git 50)))

;;;; Showing the review of a 50-file patch

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
       (chat (mevedel-chat-get-create dir))
       (context (list :tool (mevedel-tool-get "ApplyPatch")
                      :args (list :patch (patch-review-bench--patch)) :session session))
       (samples nil)
       (planning nil))
  (unwind-protect
      (dotimes (i 23)
        (garbage-collect)
        (let* ((withdraw nil)
               (seconds (mevedel-bench-seconds
                          (setq withdraw (mevedel-patch-review-start
                                         #'mevedel-tool-patch-plan-for-review
                                         context session #'ignore
                                         (lambda (&rest keys)
                                           (apply #'mevedel-chat-open-interaction
                                                  chat context keys)))))))
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
    (kill-buffer (mevedel-chat-data-buffer chat))
    (delete-directory dir t))
  (mevedel-bench-describe
   "%d-file patch, %d hunks per file (%d-line files), planned by ApplyPatch's \
`mevedel-tool-patch-plan-for-review' and the module; `mevedel-patch-review-start' to the review \
buffer shown, median of %d runs (goal 50 ms); of which planning alone (target checks and the \
module's plan): median %.1f ms"
   patch-review-bench--files patch-review-bench--hunks patch-review-bench--lines
   (length samples) (mevedel-bench-percentile planning 50))
  (mevedel-bench-report "applypatch-review-open" (mevedel-bench-percentile samples 50) "ms"))

;;; patch-bench.el ends here
