;;; mevedel-test-helpers.el --- Shared helpers for mevedel's ERT tests  -*- lexical-binding: t; -*-

;;; Commentary:

;; Helpers for running forms in a child batch Emacs and for waiting on
;; asynchronous module work without busy loops of our own.

;;; Code:

(require 'ert)
(require 'cl-lib)

(defconst mevedel-test-root
  (file-name-directory
   (directory-file-name
    (file-name-directory (or load-file-name buffer-file-name))))
  "Root of the checkout under test.")

(defun mevedel-test-emacs-args (form)
  "Return the argv of a batch Emacs that evaluates FORM with mevedel's paths."
  (list "-Q" "--batch" "-l" (expand-file-name "scripts/load-path.el" mevedel-test-root)
        "--eval" (prin1-to-string form)))

(defun mevedel-test-run-emacs (form)
  "Evaluate FORM in a child batch Emacs; return (EXIT-STATUS . OUTPUT)."
  (with-temp-buffer
    (let* ((default-directory mevedel-test-root)
           (status (apply #'call-process (expand-file-name invocation-name invocation-directory)
                          nil t nil (mevedel-test-emacs-args form))))
      (cons status (buffer-string)))))

(defmacro mevedel-test-wait-until (condition &optional seconds)
  "Process events until CONDITION holds, or fail after SECONDS (default 10)."
  (declare (indent 0))
  `(let ((deadline (+ (float-time) ,(or seconds 10))))
     (while (and (not ,condition) (< (float-time) deadline))
       (accept-process-output nil 0.01))
     (should ,condition)))

(defun mevedel-test-pid-alive-p (pid)
  "Non-nil when PID exists and is not a zombie."
  (let ((stat (format "/proc/%d/stat" pid)))
    (and (file-exists-p stat)
         (with-temp-buffer
           (insert-file-contents stat)
           (goto-char (point-max))
           (search-backward ")")
           (not (looking-at ") Z"))))))

(defun mevedel-test-group-members (pgid)
  "Return the pids of live (non-zombie) processes in process group PGID."
  (cl-loop for dir in (directory-files "/proc" nil "\\`[0-9]+\\'")
           for stat = (ignore-errors
                        (with-temp-buffer
                          (insert-file-contents (format "/proc/%s/stat" dir))
                          (buffer-string)))
           when stat
           when (string-match ") \\([A-Z]\\) [0-9]+ \\([0-9]+\\) " stat)
           when (and (= (string-to-number (match-string 2 stat)) pgid)
                     (not (equal (match-string 1 stat) "Z")))
           collect (string-to-number dir)))

(defun mevedel-test-processes-running (marker)
  "Return the pids of live processes whose command line starts with MARKER.
Found through /proc, so processes inside a sandbox's PID namespace
count too."
  (cl-loop for dir in (directory-files "/proc" nil "\\`[0-9]+\\'")
           for cmdline = (ignore-errors
                           (with-temp-buffer
                             (set-buffer-multibyte nil)
                             (insert-file-contents-literally (format "/proc/%s/cmdline" dir))
                             (subst-char-in-string ?\0 ?\s (buffer-string))))
           for stat = (ignore-errors
                        (with-temp-buffer
                          (insert-file-contents (format "/proc/%s/stat" dir))
                          (buffer-string)))
           when (and cmdline (string-prefix-p marker cmdline)
                     stat (not (string-match-p ") Z " stat)))
           collect (string-to-number dir)))

(defun mevedel-test-tool-text (id name args result)
  "Return data-buffer text for call ID of NAME with ARGS and RESULT.
The text is what gptel writes for a tool call."
  (concat (propertize (format "``` tool (%s)" name) 'gptel 'ignore)
          (propertize (concat "\n" (prin1-to-string (list :name name :args args)) "\n\n" result)
                      'gptel (cons 'tool id))
          (propertize "\n```\n" 'gptel 'ignore)))

(provide 'mevedel-test-helpers)
;;; mevedel-test-helpers.el ends here
