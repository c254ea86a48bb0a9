;;; mevedel-history.el --- history:// — conversations as Markdown for Read and Grep  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; `history://root' is the session's own conversation and
;; `history://saved[/SESSION[/SEGMENT]]' the workspace's saved ones, as
;; one Markdown projection: user messages, responses, tool calls with
;; their arguments and results, and notices, without render-data, gptel's
;; block markup or the transcript's properties.  The live conversation is
;; projected from its data buffer, unsaved text included; a saved one
;; from its session's store, without resuming it.  Read pages the
;; projection and Grep searches it with the same line numbers (the
;; module serves both, see `mevedel-core-resource-read-text').
;;
;; A saved session has one segment, segment-0001.chat.org: compaction
;; keeps every turn in the transcript (the model is sent a summary
;; instead), so there is no archive to read apart from it.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'gptel)
(require 'mevedel-core)
(require 'mevedel-render-data)
(require 'mevedel-session)
(require 'mevedel-transcript)

(declare-function org-unescape-code-in-string "org-src")

(defconst mevedel-history-segment "segment-0001.chat.org"
  "The name of a saved session's one segment.")

;;;; Projection

(defun mevedel-history--tool (id text)
  "Return the projection of tool call ID whose data-buffer TEXT is given."
  (let* ((text (if (derived-mode-p 'org-mode)
                   (progn (require 'org-src) (org-unescape-code-in-string text))
                 text))
         (read (condition-case nil (read-from-string text) (error nil)))
         (call (car read))
         (result (string-trim (mevedel-render-data-strip
                               (if read (substring text (cdr read)) text) id))))
    (format "### Tool call %s (%s)\n\nArguments: %s\n\nResult:\n\n%s\n\n"
            (or (plist-get call :name) "?") id
            (let ((print-escape-newlines t)) (prin1-to-string (plist-get call :args)))
            result)))

(defun mevedel-history-project (buffer)
  "Return data BUFFER's conversation as Markdown, unsaved text included."
  (with-current-buffer buffer
    (save-restriction
      (widen)
      (let ((pos (point-min)) (end (point-max)) (parts nil) (last nil)
            (prefix (string-trim (gptel-prompt-prefix-string))))
        (while (< pos end)
          (let* ((prop (get-text-property pos 'gptel))
                 (notice (get-text-property pos 'mevedel-notice))
                 (next (min (next-single-property-change pos 'gptel nil end)
                            (next-single-property-change pos 'mevedel-notice nil end)))
                 (text (buffer-substring-no-properties pos next)))
            (cond
             (notice
              (push (format "> %s\n\n" (replace-regexp-in-string
                                        "\n" "\n> " (string-trim text) t t))
                    parts)
              (setq last 'notice))
             ((eq prop 'response)
              (unless (eq last 'response) (push "## Assistant\n\n" parts))
              (push text parts)
              (setq last 'response))
             ((eq (car-safe prop) 'tool)
              (when (eq last 'response) (push "\n\n" parts))
              (push (mevedel-history--tool (cdr prop) text) parts)
              (setq last 'tool))
             ((null prop)
              (let ((clean (string-trim
                            (replace-regexp-in-string
                             "^[ \t]*#\\+\\(?:begin\\|end\\)_\\(?:tool\\|reasoning\\).*\n?" ""
                             text))))
                (when (string-prefix-p prefix clean)
                  (setq clean (string-trim (substring clean (length prefix)))))
                (unless (string-empty-p clean)
                  (when (eq last 'response) (push "\n\n" parts))
                  (push (format "## User\n\n%s\n\n" clean) parts)
                  (setq last 'user)))))
            (setq pos next)))
        (string-trim-right (apply #'concat (nreverse parts)))))))

;;;; Sources

(defun mevedel-history--saved-text (workspace id)
  "Return the projection of WORKSPACE's saved session ID."
  (let ((file (expand-file-name "session.sqlite"
                                (expand-file-name (mevedel-session--check-id id)
                                                  (mevedel-session-sessions-directory workspace)))))
    (unless (file-exists-p file)
      (signal 'mevedel-core-resource-error
              (list (format "history://saved/%s does not exist (Read history://saved lists the saved sessions)"
                            id))))
    (let ((store (mevedel-core-store-open file)))
      (unwind-protect
          (with-temp-buffer
            (funcall (or gptel-default-mode #'text-mode))
            (mevedel-transcript-restore (current-buffer) store)
            (mevedel-history-project (current-buffer)))
        (mevedel-core-store-close store)))))

(defun mevedel-history--saved-listing (workspace)
  "Return the listing of WORKSPACE's saved sessions."
  (let ((saved (mevedel-session-saved workspace)))
    (if (null saved)
        "No saved conversations in this workspace."
      (mapconcat
       (lambda (entry)
         (let ((info (cdr entry)))
           (format "history://saved/%s/%s  %s  (%s turns, updated %s)"
                   (car entry) mevedel-history-segment
                   (or (cdr (assoc "title" info)) "")
                   (or (cdr (assoc "turns" info)) "?")
                   (let ((ms (string-to-number (or (cdr (assoc "updated" info)) "0"))))
                     (format-time-string "%F %R" (/ ms 1000.0))))))
       saved "\n"))))

(defun mevedel-history-documents (canonical session operation)
  "Return the documents CANONICAL names for SESSION, for OPERATION.
CANONICAL is a history:// address in canonical form; OPERATION is
\"Read\", \"Grep\" or \"Glob\".  The value is a list of (ADDRESS .
TEXT): the conversations to search for Grep, the one to page (or the
listing) for Read, and for Glob the addresses alone (TEXT nil).  An
address that names nothing available signals
`mevedel-core-resource-error'."
  (let* ((workspace (mevedel-session-workspace session))
         (fail (lambda (message) (signal 'mevedel-core-resource-error (list message))))
         (segment (lambda (id) (format "history://saved/%s/%s" id mevedel-history-segment)))
         (saved (lambda (id)
                  (cons (funcall segment id)
                        (unless (equal operation "Glob")
                          (mevedel-history--saved-text workspace id))))))
    (pcase (split-string (string-remove-prefix "history://" canonical) "/" t)
      (`("root")
       (let ((buffer (mevedel-session-conversation session)))
         (unless (buffer-live-p buffer)
           (funcall fail "history://root is unavailable: this session has no live conversation"))
         (list (cons canonical (unless (equal operation "Glob")
                                 (mevedel-history-project buffer))))))
      (`("saved")
       (if (equal operation "Read")
           (list (cons canonical (mevedel-history--saved-listing workspace)))
         (mapcar (lambda (entry) (funcall saved (car entry)))
                 (cl-remove-if (lambda (entry) (assoc "error" (cdr entry)))
                               (mevedel-session-saved workspace)))))
      (`("saved" ,id)
       (let ((document (funcall saved id)))
         (if (equal operation "Read")
             (list (cons canonical (car document)))
           (list document))))
      (`("saved" ,id ,name)
       (unless (equal name mevedel-history-segment)
         (funcall fail (format "history://saved/%s has no segment %s (its segment is %s)"
                               id name mevedel-history-segment)))
       (list (cons canonical (cdr (funcall saved id)))))
      (_ (funcall fail (format "`%s' names no conversation" canonical))))))

(provide 'mevedel-history)
;;; mevedel-history.el ends here
