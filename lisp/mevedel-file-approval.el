;;; mevedel-file-approval.el --- The card approving a workspace file's content  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A workspace file that makes Emacs run programs outside the sandbox
;; (.mevedel/hooks.el and Claude's settings files run hook commands,
;; .mcp.json starts MCP servers) is approved by its content before it
;; does anything: `mevedel-interaction-ask-file-approval' asks, and
;; this file lets a view of the file's workspace ask with a card (an
;; interaction: y approves, n refuses).  The one asking waits for the
;; answer without blocking Emacs.  A child agent's tool call asks in
;; its name: the card shows its path and goes with its request.
;;
;; What an approval is remembered as, and what waits for it, is the
;; asker's (mevedel-hooks.el, mevedel-mcp.el); without a view, the
;; minibuffer asks (mevedel-interaction.el).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-chat)
(require 'mevedel-interaction)
(require 'mevedel-view)

(defvar-keymap mevedel-file-approval-card-map
  :doc "Keys on a workspace file's approval card."
  "y" #'mevedel-file-approval-card-approve
  "n" #'mevedel-file-approval-card-refuse)

(defun mevedel-file-approval--view-of (file)
  "Return a live root view of the workspace holding FILE, shown ones first, or nil."
  (cl-find-if (lambda (buffer)
                (when-let* ((chat (buffer-local-value 'mevedel-view--chat buffer)))
                  (and (not (mevedel-chat-agent chat))
                       (mevedel-chat-prompter chat)
                       (file-in-directory-p file (mevedel-chat-root chat)))))
              (sort (cl-remove-if-not (lambda (buffer)
                                        (eq (buffer-local-value 'major-mode buffer)
                                            'mevedel-view-mode))
                                      (buffer-list))
                    (lambda (a b) (and (get-buffer-window a t) (not (get-buffer-window b t)))))))

(defun mevedel-file-approval-ask-card (file question callback)
  "Ask QUESTION about FILE with a card in a view of FILE's workspace.
QUESTION is as `mevedel-interaction-ask-file-approval' takes it;
CALLBACK gets t, nil or `cancelled'.  Return nil when no view can
ask.  A member of `mevedel-interaction-file-approval-functions'."
  (when-let* ((view (mevedel-file-approval--view-of file)))
    (let* ((chat (buffer-local-value 'mevedel-view--chat view))
           (requester (mevedel-chat-requester chat (plist-get question :context))))
      (mevedel-interaction-open
       chat :kind (plist-get question :kind) :owner (car requester) :request (cdr requester)
       :title (plist-get question :title)
       :data question
       :render #'mevedel-file-approval--card-body
       :keymap mevedel-file-approval-card-map
       :on-settle (lambda (_interaction outcome)
                    (funcall callback (pcase outcome ('approve t) ('refuse nil) (_ 'cancelled))))))
    t))

(add-hook 'mevedel-interaction-file-approval-functions #'mevedel-file-approval-ask-card)

(defun mevedel-file-approval--card-body (interaction)
  "Return the body of the file approval card INTERACTION."
  (let ((question (mevedel-interaction-data interaction)))
    (propertize
     (concat "  The file is new or changed since you approved it.  "
             (plist-get question :does) "\n"
             (plist-get question :summary) "\n"
             (substitute-command-keys
              "  \\<mevedel-file-approval-card-map>\\[mevedel-file-approval-card-approve] approve · \
\\[mevedel-file-approval-card-refuse] refuse")
             (format " (%s)\n" (plist-get question :refused)))
     'face 'mevedel-view-card)))

(defun mevedel-file-approval--card-here ()
  "Return the file approval card at point, or signal a user error."
  (let ((interaction (mevedel-interaction-at)))
    (unless (and interaction
                 (eq (mevedel-interaction-render interaction) #'mevedel-file-approval--card-body))
      (user-error "No file approval here"))
    interaction))

(defun mevedel-file-approval-card-approve ()
  "Approve the file of the card at point: what it declares may run."
  (interactive)
  (mevedel-interaction-settle (mevedel-file-approval--card-here) 'approve))

(defun mevedel-file-approval-card-refuse ()
  "Refuse the file of the card at point; an edit of it asks again."
  (interactive)
  (mevedel-interaction-settle (mevedel-file-approval--card-here) 'refuse))

(provide 'mevedel-file-approval)
;;; mevedel-file-approval.el ends here
