;;; code-bench.el --- Imenu on a 5,000-line file against Emacs's own index  -*- lexical-binding: t; -*-

;;; Commentary:

;; A deterministic Emacs Lisp file of 5,000 lines (defuns, defvars,
;; defcustoms and defmacros), visited in a buffer as a user has it
;; open.  Ours: the Imenu tool called as the model calls it, through
;; `mevedel-pipeline-run-tool-outcome' (validation, permission, the
;; handler, the outcome), up to the result text.  Peer: Emacs's own
;; `imenu--make-index-alist' on the same buffer with the same forced
;; rescan, which the tool runs inside; the difference is what the tool
;; adds (flattening, line numbers, text and the pipeline).

;;; Code:

(require 'mevedel-core)
(require 'mevedel-pipeline)
(require 'mevedel-tool-code)
(require 'mevedel-bench-lib)

(defun code-bench--text (lines)
  "Return Emacs Lisp text of exactly LINES lines, a definition every ten or so."
  (let ((parts nil) (count 0) (i 0))
    (while (< count lines)
      (push (pcase (% i 4)
              (0 (format "(defun code-bench-fn-%d (arg)\n  \"Return ARG plus %d.\"\n  (let ((x arg))\n    (setq x (+ x %d))\n    (when (> x 10)\n      (setq x (- x 1)))\n    (message \"%%s\" x)\n    x))\n\n" i i i))
              (1 (format "(defvar code-bench-var-%d %d\n  \"A variable.\n\nNumber %d.\")\n\n;; Filler comment one.\n;; Filler comment two.\n;; Filler comment three.\n\n" i i i))
              (2 (format "(defcustom code-bench-option-%d nil\n  \"An option, %d.\"\n  :type 'boolean\n  :group 'code-bench)\n\n;; Filler comment one.\n;; Filler comment two.\n;; Filler comment three.\n\n" i i))
              (_ (format "(defmacro code-bench-macro-%d (&rest body)\n  \"Run BODY, %d.\"\n  (declare (indent 0))\n  `(progn\n     (ignore %d)\n     ,@body))\n\n;; Filler comment.\n\n" i i i)))
            parts)
      (setq count (+ count (cl-count ?\n (car parts))) i (1+ i)))
    (with-temp-buffer
      (insert (apply #'concat (nreverse parts)))
      (goto-char (point-min))
      (forward-line lines)
      (buffer-substring (point-min) (point)))))

(defun code-bench--ours (tool file)
  "Return the Imenu result text for FILE through the pipeline with TOOL."
  (let ((outcome nil))
    (mevedel-pipeline-run-tool-outcome tool (list :file_path file)
                                       (lambda (o) (setq outcome o)))
    (unless (eq (plist-get outcome :status) 'success)
      (error "Imenu failed: %S" outcome))
    (plist-get outcome :result)))

(defun code-bench--interleaved (rounds ours peer)
  "Return (OURS-SECONDS . PEER-SECONDS), medians of ROUNDS alternating calls.
OURS and PEER are called in turn after a garbage collection each, so
that a slower stretch of this shared machine hits both alike."
  (let ((a nil) (b nil))
    (funcall ours) (funcall peer)
    (dotimes (_ rounds)
      (garbage-collect)
      (push (mevedel-bench-seconds (funcall ours)) a)
      (garbage-collect)
      (push (mevedel-bench-seconds (funcall peer)) b))
    (cons (mevedel-bench-percentile a 50) (mevedel-bench-percentile b 50))))

(defun code-bench--peer ()
  "Return Emacs's own Imenu index of the current buffer, rescanned."
  (let ((imenu-auto-rescan t)
        (imenu-auto-rescan-maxout most-positive-fixnum))
    (imenu--make-index-alist t)))

(let* ((dir (file-name-as-directory (make-temp-file "code-bench" t)))
       (file (expand-file-name "big.el" dir))
       (default-directory dir)
       (tool (mevedel-tool-get "Imenu" "code")))
  (unwind-protect
      (progn
        (let ((coding-system-for-write 'utf-8-unix))
          (write-region (code-bench--text 5000) nil file nil 'silent))
        (let ((buffer (find-file-noselect file)))
          (with-current-buffer buffer
            (let* ((text (code-bench--ours tool file))
                   (entries (1- (length (split-string text "\n")))))
              (mevedel-bench-describe
               "a %d-line Emacs Lisp file (%d KB) visited in emacs-lisp-mode, %d Imenu entries; \
ours: the Imenu tool through mevedel-pipeline-run-tool-outcome to its result text (%d KB); \
peer: imenu--make-index-alist on the same buffer, rescanned; medians of 21 alternating calls"
               (count-lines (point-min) (point-max)) (/ (buffer-size) 1024) entries
               (/ (length text) 1024))
              (pcase-let ((`(,ours . ,peer)
                           (code-bench--interleaved 21 (lambda () (code-bench--ours tool file))
                                                    #'code-bench--peer)))
                (mevedel-bench-report "imenu-5k-line-file" (* 1000 ours) "ms"
                                      "imenu--make-index-alist" (* 1000 peer)))))
          (kill-buffer buffer)))
    (delete-directory dir t)))

;;; code-bench.el ends here
