;;; mevedel-tool-basic.el --- A small read-only Read tool  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A read-only Read tool for sessions, registered with gptel through
;; `mevedel-chat-make-tool' (so its calls pass the permission check).
;; It stands in until the filesystem tools are registered.

;;; Code:

(require 'mevedel-chat)

(defun mevedel-tool-basic--read (args)
  "Return the numbered lines of the file in ARGS (:file_path :offset :limit)."
  (let* ((file (expand-file-name (plist-get args :file_path)))
         (offset (max 1 (or (plist-get args :offset) 1)))
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

(defun mevedel-tool-basic-tools (_chat)
  "Return the basic tools for a chat."
  (list (mevedel-chat-make-tool
         :name "Read"
         :description "Read a text file and return its lines, numbered from 1."
         :args '((:name "file_path" :type string
                        :description "Absolute path, or relative to the workspace")
                 (:name "offset" :type integer :optional t
                        :description "First line to return (1-based)")
                 (:name "limit" :type integer :optional t
                        :description "How many lines to return"))
         :function #'mevedel-tool-basic--read
         :read-only-p t
         :get-paths (lambda (args) (list (plist-get args :file_path))))))

(mevedel-chat-add-tool-provider #'mevedel-tool-basic-tools)

(provide 'mevedel-tool-basic)
;;; mevedel-tool-basic.el ends here
