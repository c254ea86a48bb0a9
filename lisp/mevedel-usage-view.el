;;; mevedel-usage-view.el --- The session's usage and cost table (/usage)  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; `/usage' in a view (or M-x mevedel-usage there) shows what the
;; session's requests used and cost: one table by model and one by
;; agent, each with the requests, input (neither read from nor written
;; to the cache), output, cache reads, cache writes, reasoning and
;; cost, and their total.  A count no request reported reads "?"; a
;; cost that leaves out requests without a price reads "≥$…".  g
;; redraws it.
;;
;; What it does not do: record or price anything (mevedel-usage.el,
;; mevedel-model.el); the view's header shows the running turn's cost.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-chat)
(require 'mevedel-model)
(require 'mevedel-usage)
(require 'mevedel-view)

;;;; Commands

(defvar-local mevedel-usage-view--chat nil
  "The chat whose session this buffer shows the usage of.")

(define-derived-mode mevedel-usage-view-mode special-mode "mevedel-usage"
  "The usage and cost of one session's requests, by model and by agent."
  (setq-local revert-buffer-function #'mevedel-usage-view--revert)
  (setq truncate-lines t))

;;;###autoload
(defun mevedel-usage (&optional chat)
  "Show the usage and cost of the session of CHAT, by model and by agent.
CHAT defaults to the chat of the current view."
  (interactive)
  (let* ((chat (or chat (mevedel-view-chat) (user-error "Not a mevedel view")))
         (buffer (get-buffer-create (format "*mevedel usage: %s*" (mevedel-chat-name chat)))))
    (with-current-buffer buffer
      (unless (derived-mode-p 'mevedel-usage-view-mode) (mevedel-usage-view-mode))
      (setq mevedel-usage-view--chat chat)
      (mevedel-usage-view--render))
    (pop-to-buffer buffer)
    buffer))

(defun mevedel-usage-view--slash (chat args)
  "Run /usage for CHAT; it takes no ARGS."
  (unless (string-blank-p (or args ""))
    (user-error "/usage takes no argument, not %s" args))
  (mevedel-usage chat))

(mevedel-view-register-slash-command "usage"
  #'mevedel-usage-view--slash "the session's tokens and cost by model and agent")

;;;; Drawing

(defconst mevedel-usage-view--columns
  '(("Requests" . nil) ("Input" . :input) ("Output" . :output) ("Cache read" . :cache-read)
    ("Cache write" . :cache-write) ("Reasoning" . :reasoning) ("Cost" . nil))
  "The table's columns after the first: (TITLE . KEY of the usage summed).")

(defun mevedel-usage-view--count (n)
  "Return the count N with thousands separated, or \"?\" when unknown."
  (if (null n)
      "?"
    (let ((text (number-to-string n)))
      (while (string-match "\\([0-9]\\)\\([0-9]\\{3\\}\\)\\(,\\|\\'\\)" text)
        (setq text (replace-match "\\1,\\2\\3" t nil text)))
      text)))

(defun mevedel-usage-view--cells (records)
  "Return the cells after the first of the row summing RECORDS."
  (let ((usage (mevedel-usage-sum records)))
    (mapcar (lambda (column)
              (pcase (car column)
                ("Requests" (number-to-string (length records)))
                ("Cost" (mevedel-usage-format-cost records))
                (_ (mevedel-usage-view--count (plist-get usage (cdr column))))))
            mevedel-usage-view--columns)))

(defun mevedel-usage-view--table (title groups records)
  "Insert a table headed TITLE: a row per (NAME . RECORDS) of GROUPS.
The last row is the total of RECORDS."
  (let* ((rows (append (mapcar (lambda (group)
                                 (cons (format "%s" (or (car group) "(unknown)"))
                                       (mevedel-usage-view--cells (cdr group))))
                               groups)
                       (list (cons "Total" (mevedel-usage-view--cells records)))))
         (header (cons title (mapcar #'car mevedel-usage-view--columns)))
         (widths (cl-loop for column below (length header)
                          collect (apply #'max (mapcar (lambda (row) (string-width (nth column row)))
                                                       (cons header rows))))))
    (cl-flet ((line (row &optional face)
                (let ((text (concat (string-pad (car row) (car widths))
                                    (cl-loop for cell in (cdr row)
                                             for width in (cdr widths)
                                             concat (concat "  " (string-pad cell width nil t))))))
                  (insert (if face (propertize text 'face face) text) "\n"))))
      (line header 'bold)
      (dolist (row (butlast rows)) (line row))
      (line (car (last rows)) 'bold))))

(defun mevedel-usage-view--render ()
  "Draw the usage of the chat of this buffer."
  (let* ((chat mevedel-usage-view--chat)
         (records (mevedel-usage-records chat))
         (inhibit-read-only t))
    (erase-buffer)
    (insert (propertize (format "Usage of session %s" (mevedel-session-id (mevedel-chat-session chat)))
                        'face 'bold)
            (if-let* ((title (mevedel-chat-title chat))) (format " (%s)" title) "")
            "\n"
            (substitute-command-keys
             (format "Tokens as the providers reported them; cost in US dollars from \
`mevedel-model-prices', checked %s.\n? is not reported, ≥ leaves out requests whose \
model has no price.\n\n"
                     mevedel-model-prices-checked)))
    (if (null records)
        (insert "No request has reported its usage yet.\n")
      (mevedel-usage-view--table "Model" (mevedel-usage-group records :model) records)
      (insert "\n")
      (mevedel-usage-view--table "Agent" (mevedel-usage-group records :agent) records))
    (goto-char (point-min))))

(defun mevedel-usage-view--revert (&rest _)
  "Draw the usage again, for `revert-buffer'."
  (unless (buffer-live-p (mevedel-chat-data-buffer mevedel-usage-view--chat))
    (user-error "The session is closed"))
  (mevedel-usage-view--render))

(provide 'mevedel-usage-view)
;;; mevedel-usage-view.el ends here
