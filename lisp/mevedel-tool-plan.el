;;; mevedel-tool-plan.el --- ProposePlan: the plan card of Plan mode  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; ProposePlan (a specialist, standalone only) is how the model, in
;; Plan mode, presents its plan: the view shows it as a card, an
;; interaction (mevedel-interaction.el), with
;;
;;   a  approve: leave Plan, implement in a new turn
;;   e  approve and allow edits for that implementation turn
;;   f  revise: send feedback (read in the minibuffer), stay in Plan
;;   q  not yet: stay in Plan
;;
;; What each answer does to the session is mevedel-plan.el's; the
;; model reads what happened as the call's result.  Outside Plan mode
;; the call is refused.  In a headless run nobody can approve: the
;; plan is kept for the run to print (`mevedel-plan-unattended') and
;; the model is told to end its turn.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)
(require 'mevedel-pipeline)
(require 'mevedel-chat)
(require 'mevedel-interaction)
(require 'mevedel-plan)
(require 'mevedel-view)

(defconst mevedel-tool-plan-description
  "In Plan mode, present your finished plan to the user for approval.
Call it once you have explored enough (read-only) to know what to change:
the plan is Markdown -- the goal, the files and the changes to each, the
order, how to verify.  The user approves it (Plan mode ends and a new turn
implements it; end your turn right after an approval), asks for changes
(revise and propose again) or keeps planning.  Long plans can be written to
work://plans/NAME.md first with ApplyPatch.  Manual: mevedel://plan.md."
  "What the model reads about ProposePlan.")

(defvar-keymap mevedel-tool-plan-card-map
  :doc "Keys on a plan card."
  "a" #'mevedel-tool-plan-approve
  "e" #'mevedel-tool-plan-approve-with-edits
  "f" #'mevedel-tool-plan-feedback
  "q" #'mevedel-tool-plan-stay)

(defun mevedel-tool-plan--render (interaction)
  "Return the body of the plan card INTERACTION."
  (concat
   (mapconcat (lambda (line) (concat "  " line))
              (split-string (string-trim-right (mevedel-interaction-data interaction)) "\n")
              "\n")
   "\n"
   (propertize (substitute-command-keys
                "  \\<mevedel-tool-plan-card-map>\\[mevedel-tool-plan-approve] approve · \
\\[mevedel-tool-plan-approve-with-edits] approve, allow edits · \
\\[mevedel-tool-plan-feedback] revise with feedback · \\[mevedel-tool-plan-stay] keep planning\n")
               'face 'shadow)))

(defun mevedel-tool-plan--here ()
  "Return the plan card at point, or signal a user error."
  (let ((interaction (mevedel-interaction-at)))
    (unless (and interaction (eq (mevedel-interaction-kind interaction) 'plan))
      (user-error "No plan card here"))
    interaction))

(defun mevedel-tool-plan-approve ()
  "Approve the plan at point: leave Plan mode and implement it."
  (interactive)
  (mevedel-interaction-settle (mevedel-tool-plan--here) 'approve))

(defun mevedel-tool-plan-approve-with-edits ()
  "Approve the plan at point and allow edits while it is implemented."
  (interactive)
  (mevedel-interaction-settle (mevedel-tool-plan--here) 'approve-edits))

(defun mevedel-tool-plan-feedback (text)
  "Send TEXT as feedback on the plan at point, and stay in Plan."
  (interactive (list (progn (mevedel-tool-plan--here)
                            (read-string "What should change in the plan? "))))
  (if (string-blank-p text)
      (user-error "No feedback given")
    (mevedel-interaction-settle (mevedel-tool-plan--here) (cons 'feedback (string-trim text)))))

(defun mevedel-tool-plan-stay ()
  "Keep planning: leave the plan unapproved and stay in Plan mode."
  (interactive)
  (mevedel-interaction-settle (mevedel-tool-plan--here) 'stay))

(defun mevedel-tool-plan-outcome-text (outcome)
  "Return the text the model gets for the card's OUTCOME."
  (pcase outcome
    ('approve "The user approved the plan.  Plan mode is over; a new turn implements the \
plan.  End this turn now, without further tool calls.")
    ('approve-edits "The user approved the plan and allowed file edits for its \
implementation.  Plan mode is over; a new turn implements the plan.  End this turn now, \
without further tool calls.")
    (`(feedback . ,text) (format "Error: the user wants the plan revised: %s\nStay in Plan \
mode, look into it and propose the revised plan." text))
    ('stay "Error: the user did not approve the plan yet and stays in Plan mode; wait for \
their message.")
    (_ "Error: the plan was not answered (the turn was interrupted).")))

(defun mevedel-tool-plan-run (callback args)
  "Show the plan in ARGS to the user; call CALLBACK with their answer."
  (let* ((context (mevedel-pipeline-current-context))
         (chat (mevedel-chat-of-buffer (plist-get context :data-buffer)))
         (plan (string-trim (or (plist-get args :plan) ""))))
    (cond
     ((string-empty-p plan) (funcall callback "Error: the plan is empty"))
     ((mevedel-interaction-requester context)
      ;; Approval leaves the session's Plan mode and starts the
      ;; implementation, which only the root conversation can own.
      (funcall callback "Error: only the main conversation proposes plans to the user; \
give the plan as your final answer, for your caller to propose"))
     ((not (mevedel-plan-stamp context))
      (funcall callback "Error: ProposePlan is for Plan mode, which is off: go ahead and \
work on the task"))
     ((not (and chat (mevedel-chat-prompter chat)))
      ;; Headless: the run prints the plan; the user approves it by
      ;; continuing the session outside Plan mode.
      (mevedel-plan-propose-unattended (mevedel-chat-session chat) plan)
      (funcall callback "The plan is proposed.  Nobody can approve it during this run: it \
is shown to the user, who approves it by continuing the session outside Plan mode.  End \
this turn now with one short sentence, without repeating the plan."))
     (t
      (let ((interaction
             (mevedel-chat-open-interaction
              chat context :kind 'plan :title "Plan proposal" :data plan
              :render #'mevedel-tool-plan--render
              :keymap mevedel-tool-plan-card-map
              :on-settle
              (lambda (_interaction outcome)
                (funcall callback (mevedel-tool-plan-outcome-text outcome))
                (pcase outcome
                  ('approve (mevedel-plan-approve chat plan nil))
                  ('approve-edits (mevedel-plan-approve chat plan 'edits)))))))
        (mevedel-pipeline-add-canceller
         (lambda () (mevedel-interaction-settle interaction 'withdrawn))))))))

(defun mevedel-tool-plan-render (_name _args result _render-data)
  "Render a ProposePlan call with its RESULT."
  (list :header (cond ((null result) "ProposePlan")
                      ((string-prefix-p "The user approved" result) "ProposePlan approved")
                      (t "ProposePlan not approved"))
        :body (unless mevedel-tool-render-summary-only result)
        :expandable-p (and result (not (string-empty-p result)))
        :initially-collapsed-p t))

(mevedel-define-tool "ProposePlan"
  :standalone t
  :category "interaction"
  :description mevedel-tool-plan-description
  :summary "Plan mode: present the finished plan to the user for approval."
  :args ((plan string :required "The plan, in Markdown."))
  :function #'mevedel-tool-plan-run
  :async-p t
  :read-only-p t
  :renderer #'mevedel-tool-plan-render)

;;;; Entering and leaving from the view

(defun mevedel-tool-plan-toggle (&optional chat on)
  "Turn sticky Plan mode of CHAT (default the view's) on or off.
ON `on' or `off' sets it; nil toggles.  The next turn is planned."
  (interactive)
  (let* ((chat (or chat (mevedel-view-chat) (user-error "Not a mevedel view")))
         (session (mevedel-chat-session chat))
         (on (pcase on ('on t) ('off nil) (_ (not (mevedel-plan-active-p session))))))
    (if on (mevedel-plan-enter session) (mevedel-plan-leave session))
    (force-mode-line-update t)
    (message (if on "Plan mode: read-only exploration; the model proposes a plan to approve"
               "Plan mode off (permissions: %s)")
             (mevedel-chat-permission-mode chat))))

(defun mevedel-tool-plan--slash (chat argument)
  "Run /plan [on|off] in CHAT with ARGUMENT."
  (mevedel-tool-plan-toggle
   chat (pcase (string-trim (or argument ""))
          ("" (if (mevedel-plan-active-p (mevedel-chat-session chat)) 'off 'on))
          ("on" 'on) ("off" 'off)
          (other (user-error "Usage: /plan [on|off], not /plan %s" other)))))

(mevedel-view-register-slash-command "plan"
  #'mevedel-tool-plan--slash "plan first: read-only until you approve a plan (/plan off)"
  (lambda (_chat) '("on" "off")))

(provide 'mevedel-tool-plan)
;;; mevedel-tool-plan.el ends here
