;;; mevedel-agent-view.el --- Looking at child agents and stopping them  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The user's side of the retained agents (mevedel-agent.el).
;; RET on an Agent row of a view opens the child's own view: the same
;; live rendering of its transcript, read-only (its composer refuses to
;; send and its permission cards stay in the root's view, attributed by
;; path).  `/agents' (or M-x mevedel-agent-view-list) lists the
;; session's agents, running and waiting ones first: RET opens one, k
;; interrupts its turn (the turn records "interrupted by user").
;;
;; Agents running or waiting for a slot are also background work: this
;; file gives them to the background panel and `mevedel-ps' as items
;; (`mevedel-ps-agents-functions'), with the same open and interrupt
;; actions, and redraws both as their status changes
;; (`mevedel-agent-change-functions').  Idle agents are only in
;; `/agents'.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'tabulated-list)
(require 'url-util)
(require 'mevedel-agent)
(require 'mevedel-chat)
(require 'mevedel-panel)
(require 'mevedel-ps)
(require 'mevedel-view)

(defun mevedel-agent-view-open (chat path)
  "Show the read-only live view of the agent PATH of CHAT's session."
  (let ((buffer (or (mevedel-agent-conversation chat path)
                    (user-error "No retained agent at %s" path))))
    (pop-to-buffer (mevedel-view-buffer (mevedel-chat-of-buffer buffer)))))

(defun mevedel-agent-view--visit-row (chat name _args render-data)
  "Open the child of the Agent row with RENDER-DATA in CHAT; NAME is the tool's."
  (when-let* (((equal name "Agent"))
              (path (plist-get render-data :path)))
    (mevedel-agent-view-open (mevedel-agent-view--root chat) path)
    t))

(add-hook 'mevedel-view-row-visit-functions #'mevedel-agent-view--visit-row)

(defun mevedel-agent-view--visit-address (address)
  "Open the agent that ADDRESS, clicked in a view, names; nil for others.
agent://root/PATH and history://root/PATH are normalized first, so any
spelling the resolver accepts opens the same agent.  For
`mevedel-locations-address-functions'."
  (when-let* ((chat (bound-and-true-p mevedel-view--chat))
              (canonical (condition-case err
                             (mevedel-resource-parse address)
                           (error (user-error "%s" (error-message-string err)))))
              ((string-match "\\`\\(?:agent\\|history\\)://root/\\([^#]+\\)" canonical)))
    (mevedel-agent-view-open (mevedel-agent-view--root chat)
                             (concat "/root/" (url-unhex-string (match-string 1 canonical))))
    t))

(add-hook 'mevedel-locations-address-functions #'mevedel-agent-view--visit-address 10)

(defun mevedel-agent-view--root (chat)
  "Return the root chat of CHAT's session (CHAT itself for a root)."
  (if (mevedel-chat-agent chat)
      (or (cl-find (mevedel-chat-session chat) (mevedel-chat-list) :key #'mevedel-chat-session)
          chat)
    chat))

;;;; The list

(defvar-local mevedel-agent-view--chat nil
  "The chat whose session's agents this list shows.")

(defvar-keymap mevedel-agent-view-list-mode-map
  :doc "Keys of the agent list."
  "RET" #'mevedel-agent-view-open-at-point
  "k" #'mevedel-agent-view-interrupt-at-point
  "g" #'revert-buffer)

(define-derived-mode mevedel-agent-view-list-mode tabulated-list-mode "mevedel agents"
  "The retained agents of a session.
\\{mevedel-agent-view-list-mode-map}"
  (setq tabulated-list-format [("Path" 40 t) ("Role" 10 t) ("Status" 22 t) ("Calls" 6 t)
                               ("Verdict" 8 t)]
        tabulated-list-padding 1)
  (add-hook 'tabulated-list-revert-hook #'mevedel-agent-view--fill nil t)
  (tabulated-list-init-header))

(defun mevedel-agent-view--fill ()
  "Fill the agent list from its session, active agents first."
  (let ((agents (mevedel-agent-list mevedel-agent-view--chat)))
    (setq tabulated-list-entries
          (mapcar (lambda (agent)
                    (list (plist-get agent :path)
                          (vector (plist-get agent :path) (plist-get agent :role)
                                  (if (eq (plist-get agent :status) 'idle)
                                      (format "idle (%s)" (or (plist-get agent :outcome) "new"))
                                    (symbol-name (plist-get agent :status)))
                                  (number-to-string (plist-get agent :tool-calls))
                                  (or (plist-get agent :verdict) ""))))
                  (append (cl-remove-if (lambda (a) (eq (plist-get a :status) 'idle)) agents)
                          (cl-remove-if-not (lambda (a) (eq (plist-get a :status) 'idle))
                                            agents))))))

(defun mevedel-agent-view-list (chat)
  "List the retained agents of CHAT's session."
  (interactive (list (or (and (derived-mode-p 'mevedel-view-mode)
                              (mevedel-view-chat (current-buffer)))
                         (car (mevedel-chat-list))
                         (user-error "No mevedel session is open"))))
  (let ((chat (mevedel-agent-view--root chat)))
    (with-current-buffer (get-buffer-create (format "*mevedel agents: %s*" (mevedel-chat-name chat)))
      (mevedel-agent-view-list-mode)
      (setq mevedel-agent-view--chat chat)
      (mevedel-agent-view--fill)
      (tabulated-list-print)
      (pop-to-buffer (current-buffer)))))

(defun mevedel-agent-view-open-at-point ()
  "Open the view of the agent on this line."
  (interactive)
  (mevedel-agent-view-open mevedel-agent-view--chat
                           (or (tabulated-list-get-id) (user-error "No agent here"))))

(defun mevedel-agent-view-interrupt (chat path)
  "Interrupt the current turn of the agent PATH of CHAT's session for the user."
  (let ((before (mevedel-agent-interrupt chat path "interrupted by user")))
    (message "%s was %s" path (if (eq before 'idle) "idle: nothing to interrupt" before))))

(defun mevedel-agent-view-interrupt-at-point ()
  "Interrupt the current turn of the agent on this line."
  (interactive)
  (mevedel-agent-view-interrupt mevedel-agent-view--chat
                                (or (tabulated-list-get-id) (user-error "No agent here")))
  (revert-buffer))

;;;; Background work

(defun mevedel-agent-view-work-items (chat)
  "Return the running and waiting agents of CHAT's session as work items.
A `mevedel-ps-agents-functions' member; see it for their shape."
  (let ((root (mevedel-agent-view--root chat)))
    (mapcar (lambda (agent)
              (let ((path (plist-get agent :path)))
                (list :id path :kind "agent" :owner (plist-get agent :parent)
                      :state (if (eq (plist-get agent :status) 'waiting)
                                 "waiting for a slot"
                               "running")
                      :label (format "%s (%s)" path (plist-get agent :role))
                      :elapsed-ms (plist-get agent :elapsed-ms)
                      :tool-calls (plist-get agent :tool-calls)
                      :visit (lambda () (mevedel-agent-view-open root path))
                      :stop (lambda () (mevedel-agent-view-interrupt root path)))))
            (mevedel-agent-active root))))

(defun mevedel-agent-view--changed (session)
  "Redraw the panels and tables of SESSION (its ID) after an agent changed."
  (mevedel-panel-note-change session)
  (mevedel-ps-note-change session))

(add-hook 'mevedel-ps-agents-functions #'mevedel-agent-view-work-items)
(add-hook 'mevedel-agent-change-functions #'mevedel-agent-view--changed)

(mevedel-view-register-slash-command "agents"
  (lambda (chat _args) (mevedel-agent-view-list chat))
  "list the session's agents (RET opens one, k interrupts it)")

(provide 'mevedel-agent-view)
;;; mevedel-agent-view.el ends here
