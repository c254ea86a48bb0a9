;;; checkdoc.el --- Fail on any checkdoc complaint  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -l scripts/checkdoc.el FILE...

;;; Code:

(require 'checkdoc)

(let ((failed nil))
  (dolist (file command-line-args-left)
    (with-current-buffer (find-file-noselect file)
      (let ((checkdoc-diagnostic-buffer "*checkdoc*")
            (checkdoc-autofix-flag 'never))
        (with-current-buffer (get-buffer-create checkdoc-diagnostic-buffer)
          (let ((inhibit-read-only t)) (erase-buffer)))
        (checkdoc-current-buffer t)
        (with-current-buffer checkdoc-diagnostic-buffer
          (goto-char (point-min))
          (while (re-search-forward "^.*:[0-9]+: .*$" nil t)
            (setq failed t)
            (message "%s" (match-string 0)))))))
  (setq command-line-args-left nil)
  (kill-emacs (if failed 1 0)))

;;; checkdoc.el ends here
