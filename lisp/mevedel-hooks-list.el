;;; mevedel-hooks-list.el --- The *mevedel hooks* surface  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; `mevedel-hooks-list' (and /hooks in a session's composer) opens
;; *mevedel hooks*: every hook source of the workspace in running order
;; (`mevedel-hooks', .mevedel/hooks.el, .claude/settings.json and
;; .claude/settings.local.json), whether it may run (trusted, approved,
;; not approved yet, declined, broken), and its hooks.  On a source, a
;; approves its current content, r revokes the approval, RET visits the
;; file; g redraws.  docs/hooks.md is the manual.
;;
;; A workspace hook file that is new or changed asks before its
;; commands run, with the card of mevedel-file-approval.el in a view of
;; its workspace; the hooks wait for it without blocking Emacs.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-hooks)
(require 'mevedel-interaction)
(require 'mevedel-view)

(defvar-local mevedel-hooks-list--workspace nil
  "The workspace this hooks buffer describes.")

(defvar-keymap mevedel-hooks-list-mode-map
  :doc "Keys of the *mevedel hooks* surface."
  :parent special-mode-map
  "a" #'mevedel-hooks-list-approve
  "r" #'mevedel-hooks-list-revoke
  "RET" #'mevedel-hooks-list-visit
  "g" #'mevedel-hooks-list-refresh)

(define-derived-mode mevedel-hooks-list-mode special-mode "mevedel-hooks"
  "Major mode of the *mevedel hooks* surface.
\\{mevedel-hooks-list-mode-map}"
  (setq-local revert-buffer-function (lambda (&rest _) (mevedel-hooks-list-refresh))))

(defconst mevedel-hooks-list--states
  '((trusted . "trusted (your own setting)")
    (approved . "approved")
    (unapproved . "not approved: asks before its first command runs")
    (declined . "declined: does not run until it changes")
    (broken . "not used")
    (absent . "absent"))
  "How each state of a source reads.")

(defun mevedel-hooks-list--entry (entry)
  "Return the line describing ENTRY."
  (let ((matcher (plist-get entry :matcher)))
    (format "    %-18s %s%s%s\n"
            (plist-get entry :event)
            (if (member matcher '(nil "" "*")) "" (format "[%s] " matcher))
            (or (plist-get entry :command) (format "%S" (plist-get entry :function)))
            (if-let* ((timeout (plist-get entry :timeout)))
                (format "  (timeout %s s)" timeout)
              ""))))

(defun mevedel-hooks-list--source (source)
  "Insert SOURCE, a plist of `mevedel-hooks-sources', carrying it as a property."
  (let ((start (point))
        (file (plist-get source :file))
        (state (plist-get source :state)))
    (insert (propertize (if file
                            (file-relative-name file mevedel-hooks-list--workspace)
                          "mevedel-hooks")
                        'face 'bold)
            ": "
            (propertize (alist-get state mevedel-hooks-list--states)
                        'face (pcase state
                                ((or 'trusted 'approved) 'success)
                                ((or 'unapproved 'declined) 'warning)
                                ('broken 'error)
                                (_ 'shadow)))
            "\n")
    (when-let* ((problem (plist-get source :error)))
      (insert "    " (propertize problem 'face 'error) "\n"))
    (dolist (entry (plist-get source :entries))
      (insert (mevedel-hooks-list--entry entry)))
    (when (and (memq state '(trusted approved unapproved declined))
               (null (plist-get source :entries)))
      (insert "    (no hooks)\n"))
    (insert "\n")
    (put-text-property start (point) 'mevedel-hooks-source source)))

(defun mevedel-hooks-list-refresh ()
  "Redraw the hooks buffer from the workspace's files, keeping point's line."
  (interactive)
  (let ((inhibit-read-only t)
        (line (line-number-at-pos)))
    (erase-buffer)
    (insert (propertize (format "mevedel hooks of %s"
                                (abbreviate-file-name mevedel-hooks-list--workspace))
                        'face 'bold)
            (substitute-command-keys
             "\n\\<mevedel-hooks-list-mode-map>\\[mevedel-hooks-list-approve] approve · \
\\[mevedel-hooks-list-revoke] revoke · \\[mevedel-hooks-list-visit] visit · \
\\[mevedel-hooks-list-refresh] refresh · the manual: mevedel://hooks.md\n\n"))
    (mapc #'mevedel-hooks-list--source (mevedel-hooks-sources mevedel-hooks-list--workspace))
    (goto-char (point-min))
    (forward-line (1- line))))

(defun mevedel-hooks-list--at-point ()
  "Return the source at point, or signal a user error."
  (or (get-text-property (point) 'mevedel-hooks-source)
      (user-error "No hook source here")))

(defun mevedel-hooks-list--file-at-point ()
  "Return the workspace hook file at point, or signal a user error."
  (let ((source (mevedel-hooks-list--at-point)))
    (or (plist-get source :file)
        (user-error "Your own `mevedel-hooks' need no approval"))))

(defun mevedel-hooks-list-approve ()
  "Approve the current content of the hook file at point: its commands may run."
  (interactive)
  (let* ((source (mevedel-hooks-list--at-point))
         (file (mevedel-hooks-list--file-at-point)))
    (pcase (plist-get source :state)
      ('absent (user-error "%s does not exist" file))
      ('broken (user-error "Fix %s first: %s" file (plist-get source :error))))
    (mevedel-hooks-approve file (plist-get source :hash))
    (mevedel-hooks-list-refresh)))

(defun mevedel-hooks-list-revoke ()
  "Revoke the approval of the hook file at point: it asks again first."
  (interactive)
  (mevedel-hooks-revoke (mevedel-hooks-list--file-at-point))
  (mevedel-hooks-list-refresh))

(defun mevedel-hooks-list-visit ()
  "Visit the hook file at point (`mevedel-hooks' in Customize)."
  (interactive)
  (if-let* ((file (plist-get (mevedel-hooks-list--at-point) :file)))
      (find-file file)
    (customize-variable 'mevedel-hooks)))

;;;###autoload
(defun mevedel-hooks-list (&optional workspace)
  "Open *mevedel hooks*: the hook sources of WORKSPACE and whether they run.
WORKSPACE defaults to the current session's, else `default-directory'."
  (interactive)
  (let* ((workspace (file-name-as-directory
                     (expand-file-name
                      (or workspace
                          (and (mevedel-session-p mevedel-session-current)
                               (mevedel-session-workspace mevedel-session-current))
                          default-directory))))
         (buffer (get-buffer-create (format "*mevedel hooks: %s*"
                                            (file-name-nondirectory
                                             (directory-file-name workspace))))))
    (with-current-buffer buffer
      (unless (derived-mode-p 'mevedel-hooks-list-mode) (mevedel-hooks-list-mode))
      (setq mevedel-hooks-list--workspace workspace)
      (mevedel-hooks-list-refresh))
    (pop-to-buffer buffer)
    buffer))

(defun mevedel-hooks-list-slash (chat args)
  "Run /hooks for CHAT's workspace; it takes no ARGS."
  (unless (string-blank-p (or args ""))
    (user-error "/hooks takes no argument, not %s" args))
  (mevedel-hooks-list (mevedel-session-workspace (mevedel-chat-session chat))))

(mevedel-view-register-slash-command "hooks"
  #'mevedel-hooks-list-slash "the workspace's hooks and their approval (/hooks)")

(provide 'mevedel-hooks-list)
;;; mevedel-hooks-list.el ends here
