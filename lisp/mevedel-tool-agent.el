;;; mevedel-tool-agent.el --- Agent, SendMessage, WaitAgent, InterruptAgent, ListAgents  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The collaboration tools over the agent runtime
;; (mevedel-agent.el): their declarations, handlers and
;; renderers, and the `agent-roles' prompt component that tells the
;; model which roles and tiers the Agent tool accepts (not its schema,
;; which stays the same for a session: ADR 0026).  The calling agent is
;; the one whose data buffer runs the call.  Agent rows are one-line
;; handles (path, role, status, tool calls, verdict) that the runtime
;; updates as the child works.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-agent)
(require 'mevedel-agent-roles)
(require 'mevedel-gptel)
(require 'mevedel-chat)
(require 'mevedel-pipeline)
(require 'mevedel-prompt)
(require 'mevedel-ptc)
(require 'mevedel-sandbox)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)

(defconst mevedel-tool-agent-manual-address "mevedel://agents.md"
  "Where the model reads how agents are named, run, mail and wait.")

(defun mevedel-tool-agent--chat ()
  "Return the chat of the running call, or signal `user-error'."
  (or (mevedel-chat-of-buffer (plist-get (mevedel-pipeline-current-context) :data-buffer))
      (user-error "Agents are only available in a mevedel session")))

(defmacro mevedel-tool-agent--guard (callback &rest body)
  "Run BODY; a `user-error' or `error' settles CALLBACK with an error result."
  (declare (indent 1))
  `(condition-case err
       (progn ,@body)
     (error (funcall ,callback (list :result (concat "Error: " (error-message-string err))
                                     :status 'error)))))

(defun mevedel-tool-agent-check (_args)
  "Return the permission facet of a collaboration call: `delegated'.
The calls themselves touch no files, so they never ask (an explicit
deny rule still refuses them); what each agent then does is decided
call by call under the session's permissions."
  'delegated)

;;;; Agent

(defun mevedel-tool-agent-spawn (callback args)
  "Start a retained child agent for ARGS; call CALLBACK with its path.
The session's catalog is readied first (its MCP servers started, see
`mevedel-ptc-prepared'), so that the specialists the child's role
allows are there when its set is frozen."
  (mevedel-tool-agent--guard callback
    (let* ((chat (mevedel-tool-agent--chat))
           (names (mevedel-agent-role-tool-names chat args))
           (id (mevedel-pipeline-current-tool-use-id))
           (settled nil)
           (path nil))
      (mevedel-pipeline-add-canceller
       (lambda ()
         (setq settled t)
         (when path (mevedel-agent-cancel-preparation chat path))))
      (mevedel-ptc-prepared
       (and names (string-join names " "))
       (lambda ()
         (unless settled
           (mevedel-tool-agent--guard callback
             (setq path
                   (mevedel-agent--spawn
                    chat args nil
                    (lambda (path waiting failure)
                      (unless settled
                        (setq settled t)
                        (funcall callback
                                 (if failure
                                     (list :result (concat "Error: " failure) :status 'error)
                                   (let ((status (mevedel-agent-status chat path)))
                                     (list :result (mevedel-tool-agent--launch-text status waiting)
                                           :render-data status))))))
                    id)))))))))

(defun mevedel-tool-agent--sandbox-text (render-data)
  "Return the header part warning of RENDER-DATA's non-default sandbox use, or \"\"."
  (if-let* ((warning (mevedel-sandbox-summary-warning (plist-get render-data :sandbox-summary))))
      (format " · %s" warning)
    ""))

(defun mevedel-tool-agent--served-by (status)
  "Return the model serving the agent of STATUS and its effort, as text.
A turn served by another model than the frozen one names that too."
  (concat (plist-get status :model)
          (if-let* ((effort (plist-get status :effort))) (format ", effort %s" effort) "")
          (if-let* ((served (plist-get status :served)))
              (format "; its latest turn was served by %s" served)
            "")))

(defun mevedel-tool-agent--launch-text (status waiting)
  "Return the Agent call's result for the child of STATUS; WAITING for a slot.
The path first, then the launch snapshot: the model and effort frozen
for it, which need not be the caller's."
  (concat (plist-get status :path)
          (format " (served by %s)" (mevedel-tool-agent--served-by status))
          (if waiting
              (format " (waiting for a free agent slot: %d agents are active; it starts when \
one settles)" mevedel-agent-capacity)
            "")))

(defun mevedel-tool-agent-render (_name args result render-data)
  "Render an Agent call with ARGS, RESULT and RENDER-DATA as a one-line handle.
A workflow's handle (/review, /verify: RENDER-DATA has :workflow)
names the workflow first, its agent once started, and its :summary
once it settled."
  (let* ((workflow (plist-get render-data :workflow))
         (path (or (plist-get render-data :path)
                   (and (not workflow) (or (plist-get args :task_name) "?")))))
    (list :header (concat (if workflow
                              (concat workflow (if path (concat " · " path) ""))
                            (concat "Agent " path))
                          (if-let* ((role (plist-get render-data :role))) (format " · %s" role) "")
                          (if-let* ((model (plist-get render-data :model)))
                              (format " · %s%s" model
                                      (if-let* ((effort (plist-get render-data :effort)))
                                          (format " (%s)" effort)
                                        ""))
                            "")
                          (if-let* ((served (plist-get render-data :served)))
                              (format " · served by %s" served)
                            "")
                          (if-let* ((status (plist-get render-data :status)))
                              (format " · %s" (if (eq status 'idle)
                                                  (or (plist-get render-data :outcome) 'idle)
                                                status))
                            "")
                          (if-let* ((n (plist-get render-data :tool-calls)))
                              (format " · %d tool call%s" n (if (= n 1) "" "s"))
                            "")
                          (if-let* ((verdict (plist-get render-data :verdict)))
                              (format " · VERDICT %s" verdict)
                            "")
                          (if-let* ((summary (plist-get render-data :summary)))
                              (format " · %s" summary)
                            "")
                          (mevedel-tool-agent--sandbox-text render-data))
          :body (unless mevedel-tool-render-summary-only
                  (concat (or (plist-get args :message) "")
                          (if result (concat "\n\n" result) "")))
          :expandable-p t
          :initially-collapsed-p t)))

(mevedel-define-tool Agent
  :native t
  :description (concat
                "Start a retained child agent on a task; it works in parallel with you and its \
final answer reaches you as a RESULT message (wait for it with WaitAgent, or finish and be woken). \
Work directly by default: delegate parallel work or a fresh-context investigation with a compact \
result. The message is the child's whole assignment (files it owns, what to return). Returns \
the child's canonical path (/root/NAME) for SendMessage, InterruptAgent and agent://PATH, and \
the model serving it. \
context: none (default), all (your whole conversation), summary (a handoff summary) or a \
number of recent turns. Manual: " mevedel-tool-agent-manual-address)
  :args ((task_name string :required "A short name for the task; it becomes the agent's path")
         (message string :required "The complete task for the child")
         (role string :optional
               "A role of the prompt's agent roles; omit for the default role, which \
inherits yours")
         (context string :optional "none (default), all, summary, or a number of turns as a string")
         (model string :optional
                "A model tier of the prompt's agent roles, or BACKEND:MODEL; omit to inherit")
         (effort string :optional "Reasoning effort; omit to inherit")
         (working_directory string :optional
                            "An existing directory in the workspace or one of its Git worktrees"))
  :groups '(agents)
  :async-p t
  :check-permission #'mevedel-tool-agent-check
  :function #'mevedel-tool-agent-spawn
  :renderer #'mevedel-tool-agent-render)

;;;; The roles and tiers the model may name

(defun mevedel-tool-agent-roster (chat)
  "Return the text of the `agent-roles' prompt component for CHAT.
It lists the roles of CHAT's workspace (built-ins, `mevedel-agent-roles',
.mevedel/agents and .claude/agents files) and the model tiers.  They
are not in the Agent tool's schema: the tools go before every message
of a request, so a role file added during a session would break the
provider's cached prefix; as a component, the change is appended as a
context update.  Role files are read through the roles module's cache."
  (concat "Agent roles (the Agent tool's role; omit it for the default role, which \
inherits yours):\n"
          (mapconcat (lambda (role)
                       (format "- %s: %s" (car role)
                               (mevedel-tool-render-shorten (or (cdr role) "") 160)))
                     (mevedel-agent-role-roster (mevedel-prompt-workspace chat))
                     "\n")
          "\nModel tiers (the Agent tool's model, or BACKEND:MODEL): "
          (if-let* ((tiers (mevedel-agent-tier-names)))
              (string-join tiers ", ")
            "none configured")))

(mevedel-prompt-define-component
 'agent-roles :function #'mevedel-tool-agent-roster
 :doc "agent roles and model tiers the Agent tool accepts")

;;;; SendMessage

(defun mevedel-tool-agent-send (callback args)
  "Send the message of ARGS to its target agent; call CALLBACK."
  (mevedel-tool-agent--guard callback
    (let* ((chat (mevedel-tool-agent--chat))
           (delivery (mevedel-agent-send chat (plist-get args :target) (plist-get args :message)
                                         (mevedel-pipeline-current-tool-use-id))))
      (funcall callback
               (list :result (if (eq delivery 'waiting)
                                 (format "%s is waiting for a free agent slot; it starts when one \
settles." (plist-get args :target))
                               "")
                     :render-data (list :delivery delivery))))))

(defun mevedel-tool-agent-render-send (_name args _result render-data)
  "Render a SendMessage call with ARGS and RENDER-DATA.
A turn it started that ran commands outside the default sandbox
leaves that warning here, as on an Agent row."
  (list :header (format "SendMessage: %s (%s)%s" (or (plist-get args :target) "?")
                        (pcase (plist-get render-data :delivery)
                          ('started "started")
                          ('waiting "waiting for a slot")
                          ('queued "queued")
                          (_ "failed"))
                        (mevedel-tool-agent--sandbox-text render-data))
        :body (unless mevedel-tool-render-summary-only (plist-get args :message))
        :expandable-p t
        :initially-collapsed-p t))

(mevedel-define-tool SendMessage
  :native t
  :description "Send a message to a retained agent by path (/root for the main agent). An idle \
agent starts a turn with it as its task; a running one reads it before its next step. Put \
final findings in your final answer, not only in mail."
  :args ((target string :required "The agent's canonical path (/root/NAME) or one relative to you")
         (message string :required "The message"))
  :groups '(agents)
  :async-p t
  :check-permission #'mevedel-tool-agent-check
  :function #'mevedel-tool-agent-send
  :renderer #'mevedel-tool-agent-render-send)

;;;; WaitAgent

(defun mevedel-tool-agent-wait (callback args)
  "Wait for mail to the caller as ARGS say; call CALLBACK with the wake reason."
  (mevedel-tool-agent--guard callback
    (let* ((timeout (plist-get args :timeout_ms))
           (cancel (mevedel-agent-wait
                    (mevedel-tool-agent--chat)
                    (and (numberp timeout) (round timeout))
                    (lambda (reason) (funcall callback (format "Woken: %s." reason))))))
      (mevedel-pipeline-add-canceller cancel))))

(defun mevedel-tool-agent-render-wait (_name _args result _render-data)
  "Render a WaitAgent call with its RESULT."
  (list :header (if result
                    (format "WaitAgent: agents (%s)"
                            (string-remove-suffix "." (string-remove-prefix "Woken: " result)))
                  "Waiting for agents")
        :coalesce-key "WaitAgent"))

(mevedel-define-tool WaitAgent
  :native t
  :standalone t
  :description "Wait until mail or a RESULT from an agent arrives for you, the user writes, or \
timeout_ms passes (default 30000, 10000-3600000); a timeout is not an error. The result only \
says what woke you: the messages themselves follow."
  :args ((timeout_ms integer :optional "Longest wait in milliseconds"))
  :groups '(agents)
  :async-p t
  :read-only-p t
  :function #'mevedel-tool-agent-wait
  :renderer #'mevedel-tool-agent-render-wait)

;;;; InterruptAgent

(defun mevedel-tool-agent-interrupt (args)
  "Interrupt the current turn of the agent ARGS name; return what it was doing."
  (let* ((chat (mevedel-tool-agent--chat))
         (before (mevedel-agent-interrupt chat (plist-get args :target))))
    (format "%s was %s." (plist-get args :target)
            (if (eq before 'idle) "idle: nothing to interrupt" before))))

(mevedel-define-tool InterruptAgent
  :native t
  :description "Interrupt the current turn of one retained agent (not /root, not yourself). Its \
children go on; its path, conversation and mail stay, so SendMessage can continue it. Exactly \
one RESULT with outcome interrupted follows."
  :args ((target string :required "The agent's canonical path or one relative to you"))
  :groups '(agents)
  :check-permission #'mevedel-tool-agent-check
  :function #'mevedel-tool-agent-interrupt)

;;;; ListAgents

(defun mevedel-tool-agent-list (_args)
  "Return the retained agents of the session, sorted by path."
  (let ((agents (mevedel-agent-list (mevedel-tool-agent--chat))))
    (if (null agents)
        "No retained agents."
      (mapconcat (lambda (agent)
                   (format "%s  %s  %s%s%s  %s  %d tool calls%s"
                           (plist-get agent :path) (plist-get agent :role)
                           (plist-get agent :model)
                           (if-let* ((effort (plist-get agent :effort)))
                               (format " (effort %s)" effort)
                             "")
                           (if-let* ((served (plist-get agent :served)))
                               (format " (served by %s)" served)
                             "")
                           (if (eq (plist-get agent :status) 'idle)
                               (format "idle (%s)" (or (plist-get agent :outcome) "new"))
                             (plist-get agent :status))
                           (plist-get agent :tool-calls)
                           (if (plist-get agent :verdict)
                               (format "  VERDICT %s" (plist-get agent :verdict))
                             "")))
                 agents "\n"))))

(mevedel-define-tool ListAgents
  :description "List every retained agent of the session by path, with role, model and status."
  :args ()
  :groups '(agents)
  :read-only-p t
  :function #'mevedel-tool-agent-list)

(provide 'mevedel-tool-agent)
;;; mevedel-tool-agent.el ends here
