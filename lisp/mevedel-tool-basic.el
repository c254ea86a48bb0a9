;;; mevedel-tool-basic.el --- A small read-only Read tool  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A read-only Read tool, declared with `mevedel-define-tool' so that
;; its calls run through the pipeline (validation, permissions, render
;; data) like every tool.  It stands in until the filesystem tools are
;; registered.

;;; Code:

(require 'cl-lib)
(require 'mevedel-tool-registry)

(defun mevedel-tool-basic--read (args)
  "Return the numbered lines of the file in ARGS (:file_path :offset :limit)."
  (let* ((file (expand-file-name (plist-get args :file_path)))
         (offset (or (plist-get args :offset) 1))
         (limit (or (plist-get args :limit) 2000)))
    (unless (file-exists-p file)
      (error "File does not exist: %s" file))
    (when (file-directory-p file)
      (error "%s is a directory, not a file" file))
    (with-temp-buffer
      (insert-file-contents file)
      (goto-char (point-min))
      (forward-line (1- offset))
      (let ((lines nil) (n offset))
        (while (and (not (eobp)) (< (- n offset) limit))
          (push (format "%6d\t%s" n (buffer-substring (point) (line-end-position))) lines)
          (forward-line 1)
          (cl-incf n))
        (mapconcat #'identity (nreverse lines) "\n")))))

(mevedel-define-tool Read
  :description "Read a text file and return its lines, numbered from 1."
  :args ((file_path path :required "Absolute path, or relative to the workspace")
         (offset integer :optional "First line to return (1-based)" :minimum 1)
         (limit integer :optional "How many lines to return" :minimum 1))
  :read-only-p t
  :function #'mevedel-tool-basic--read)

(provide 'mevedel-tool-basic)
;;; mevedel-tool-basic.el ends here
