;;; mevedel-menu.el --- The session view's transient menu  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; `mevedel-menu' (C-c C-o in a view, or ? outside the composer) gathers
;; what a session can do, as gptel's and Magit's users expect from a
;; transient: each entry runs the same command as its own key binding
;; or composer command, so the menu teaches the keys.  Being above
;; every part of the view, this file also gives /help their keymaps.

;;; Code:

(require 'transient)
(require 'mevedel-view)
(require 'mevedel-compaction)
(require 'mevedel-session-list)
(require 'mevedel-ps)
(require 'mevedel-tools)
(require 'mevedel-review)
(require 'mevedel-tool-plan)
(require 'mevedel-ask-ui)
(require 'mevedel-file-approval)
(require 'mevedel-panel)
(require 'mevedel-patch-review)
(require 'mevedel-tasks-view)

(defun mevedel-menu--session-line ()
  "Return the menu's heading: the session, its model and permission mode."
  (if-let* ((chat (mevedel-view-chat)))
      (format "mevedel · %s · %s / %s · permissions: %s"
              (mevedel-chat-name chat)
              (gptel-backend-name (mevedel-chat-backend-effective chat))
              (mevedel-chat-model-effective chat)
              (mevedel-chat-permission-mode chat))
    "mevedel"))

;;;###autoload (autoload 'mevedel-menu "mevedel-menu" nil t)
(transient-define-prefix mevedel-menu ()
  "What this session can do: model, permissions, sessions, commands, help."
  [:description mevedel-menu--session-line
   ["Model and permissions"
    ("m" "model and backend (C-c C-m, /model)" mevedel-view-set-model)
    ("p" "permission mode (C-c C-p)" mevedel-view-set-permission-mode)
    ("P" "plan mode on/off (/plan)" mevedel-tool-plan-toggle)]
   ["Sessions"
    ("n" "new session (/new)" mevedel-new)
    ("r" "resume, fork, rename, delete (/sessions)" mevedel-sessions)
    ("c" "compact older turns now (/compact)" mevedel-compact)]]
  [["This turn"
    ("k" "abort (C-c C-k)" mevedel-view-abort)
    ("u" "take a queued message back (C-c C-u)" mevedel-view-unqueue)
    ("l" "redraw (C-c C-l)" mevedel-view-rerender)]
   ["Tools and commands"
    ("t" "tools and their contracts (/tools)" mevedel-tools-list)
    ("e" "executions (C-c C-e, /ps)" mevedel-ps)
    ("R" "review changes (/review)" mevedel-review)
    ("V" "verify changes (/verify)" mevedel-verify)]
   ["Help"
    ("h" "commands and keys (/help)" mevedel-view-help)]])

(defun mevedel-menu-or-insert ()
  "Open `mevedel-menu' outside the composer; in it, insert the character typed."
  (interactive)
  (if (and mevedel-view--composer (>= (point) mevedel-view--composer))
      (call-interactively #'self-insert-command)
    (call-interactively #'mevedel-menu)))

(keymap-set mevedel-view-mode-map "C-c C-o" #'mevedel-menu)
(keymap-set mevedel-view-mode-map "?" #'mevedel-menu-or-insert)

;; /help lists the keys of every part of the view.
(pcase-dolist (`(,title . ,keymap)
               '(("On an Ask form" . mevedel-ask-ui-map)
                 ("On a patch review's card" . mevedel-patch-review-card-map)
                 ("On a plan card" . mevedel-tool-plan-card-map)
                 ("On a workspace file's approval card" . mevedel-file-approval-card-map)
                 ("On a background work item" . mevedel-panel-item-map)
                 ("On the task list" . mevedel-tasks-view-map)))
  (mevedel-view-register-help-keys title keymap))

(provide 'mevedel-menu)
;;; mevedel-menu.el ends here
