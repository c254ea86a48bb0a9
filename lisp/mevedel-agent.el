;;; mevedel-agent.el --- Retained child agents: spawn, mail, settlement  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The retained agents of a session below its root (/root).  Each child
;; is a conversation of its own: a chat made by `mevedel-chat-make-child'
;; that shares the root's session (permissions, mailbox) and is driven
;; through the same gptel path as the root's.  The child's identity is
;; its canonical path (/root/NAME, /root/NAME/SUB); storage ids never
;; reach the model.
;;
;; Lifecycle.  `mevedel-agent-spawn' validates the Agent call's inputs,
;; reserves the canonical path (a handle in `preparing', absent from
;; ListAgents and path resolution), freezes the configuration (backend,
;; model, effort, system text, tools, specialists (ADR 0022), context
;; settings, working directory), runs `mevedel-agent-start-functions'
;; once and `mevedel-agent-prompt-functions' on the task, copies the
;; requested parent context and sends the task.  Only then is the path
;; published.  A failure on the way releases the reservation
;; synchronously; a summary preparation cancelled with its Agent call
;; suppresses its late callback.
;;
;; Capacity.  At most `mevedel-agent-capacity' non-root turns of one
;; session are active at once, whatever their depth; the root uses no
;; slot.  A turn that finds no slot waits, first come first served, and
;; starts when one frees.  While a settlement runs no turn starts.
;;
;; Settlement.  Each turn (an invocation) settles exactly once, through
;; one gate: completion, failure and interruption race for it and the
;; first wins.  The complete payload and outcome are kept on the handle
;; before the bounded RESULT record (`mevedel-agent-result-preview'
;; characters) is appended to the spawn parent's mailbox, a durable,
;; acknowledged write.  Then `mevedel-agent-stop-functions' run, the
;; slot is released, the parent is woken (its WaitAgent, an idle
;; root's background turn, an idle child's turn) and waiting turns are
;; offered the free slots, oldest first.
;;
;; Mail.  SendMessage to an idle child starts a turn with the message
;; as its task (or waits for a slot); to an active one, or to /root,
;; it appends one MAIL record, drained before the recipient's next
;; sample (mevedel-mailbox.el).  Self-mail never starts a turn.
;; WaitAgent suspends its call until the caller has unread mail, the
;; user queues input in the caller's chat, or the timeout passes.
;;
;; Saving.  The published agents are kept in the session's metadata,
;; and each child's conversation in a store of its own under agents/,
;; written as it goes (mevedel-save.el).  A resumed session restores
;; the registry (`mevedel-resume-functions'); a child's conversation is
;; loaded only when it is first used (`mevedel-resume-chat'), except
;; one whose turn Emacs cut: it is loaded at once for its partial work.
;; Emacs exiting saves every child conversation.
;;
;; Roles and models come from mevedel-agent-roles.el
;; (`mevedel-agent-role', `mevedel-agent-resolve-model',
;; `mevedel-agent-parse-verdict'); a child's system text is built in
;; one place, `mevedel-agent--system-text'.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'gptel)
(require 'mevedel-mailbox)
(require 'mevedel-chat)
(require 'mevedel-resume)
(require 'mevedel-save)
(require 'mevedel-history)
(require 'mevedel-interaction)
(require 'mevedel-plan)
(require 'mevedel-hooks)
(require 'mevedel-gptel)
(require 'mevedel-permissions)
(require 'mevedel-session)
(require 'mevedel-tasks)
(require 'mevedel-tool-registry)
(require 'mevedel-transcript)
(require 'mevedel-agent-roles)
(require 'mevedel-prompt)
(require 'mevedel-skills)
(require 'mevedel-sandbox)
(require 'mevedel-render-data)

(declare-function mevedel-agent-role "mevedel-agent-roles" (name directory))
(declare-function mevedel-agent-resolve-model "mevedel-agent-roles" (spec workload inherited))
(declare-function mevedel-agent-parse-verdict "mevedel-agent-roles" (text))

(defgroup mevedel-agent nil
  "Retained child agents."
  :group 'mevedel
  :prefix "mevedel-agent-")

(defcustom mevedel-agent-capacity 10
  "Most active child-agent turns of one session at once.
The root agent uses no slot, so a session may run one more agent than
this."
  :type 'natnum)

(defconst mevedel-agent-result-preview 32768
  "Most characters of a payload a RESULT record carries.
The complete payload stays on the agent's handle (agent://root/PATH).")

(defconst mevedel-agent-wait-range '(10000 3600000 30000)
  "WaitAgent's timeout in milliseconds: minimum, maximum, default.")

(defconst mevedel-agent-name-limit 40
  "Most characters of an agent name's base before a -N suffix.")

(defvar mevedel-agent-start-functions nil
  "Abnormal hook run once when a child agent is created (SubagentStart).
Each function is called with the child's path, its task text and its
role name (nil for the default role), before the task is sent.")

(defvar mevedel-agent-stop-functions nil
  "Abnormal hook run after each turn of a child agent settles (SubagentStop).
Each function is called with the path, the outcome (`completed',
`failed' or `interrupted') and the complete payload.  It observes: the
agent stays retained.")

(defvar mevedel-agent-change-functions nil
  "Abnormal hook run with a session's ID when one of its agents changed.
That is its status (waiting, running, idle) or its tool-call count;
the background panel and `mevedel-ps' follow it.")

(defvar mevedel-agent-prompt-functions nil
  "Functions run on each task given to a child agent (UserPromptSubmit).
Each is called with the child's path and the task text and returns nil
to accept it, a string to use instead, or (block . REASON) to refuse
it; a refused initial task fails the Agent call, a refused follow-up
is not sent.")

;;;; Handles and trees

(cl-defstruct (mevedel-agent-handle (:constructor mevedel-agent--make-handle) (:copier nil))
  "A retained child agent."
  path parent role-name role config chat
  ;; `preparing', `running', `waiting' (for a slot) or `idle'.
  (status 'preparing)
  outcome payload verdict
  ;; Tool calls of its current (or latest) turn: a follow-up starts at 0.
  (tool-calls 0)
  ;; The running invocation, or nil.
  turn
  ;; The session's tree, and the spawn parent's chat (nil for an agent
  ;; restored from a saved session) and Agent call ID (its handle row).
  tree parent-chat spawn-id
  ;; While preparing: a function cancelling the preparation.
  cancel
  ;; The spawn parent's turn that created it (compared with `eq').
  spawn-turn
  ;; The session-relative file of its saved conversation, or nil.
  transcript
  ;; Non-nil when MAIL or a RESULT from another agent arrived while a
  ;; turn was active: its settlement offers the agent a turn to read
  ;; it, even if it came during the final sample.  Runtime only.
  wake
  ;; The model that served its latest turn (BACKEND:MODEL or
  ;; PROVIDER:MODEL) when it is not the frozen one (an ACP agent
  ;; acknowledged another), else nil.  The frozen identity stays.
  served)

(cl-defstruct (mevedel-agent--turn (:constructor mevedel-agent--make-turn) (:copier nil))
  "One invocation of a retained agent: a task until its settlement."
  handle text settled reason (samples 1) on-settle started
  ;; Non-nil once its request went out; and the handle's settled
  ;; result before it (OUTCOME PAYLOAD VERDICT), restored when it
  ;; never does (a follow-up that failed to start or was cancelled).
  dispatched previous
  ;; (OUTCOME . PAYLOAD) of an answer held while executions it owns
  ;; still run.
  held
  ;; Non-nil when UserPromptSubmit already accepted TEXT (an initial
  ;; task, during the spawn's preparation): the send runs no hooks.
  hooked
  ;; The call ID whose row started this turn (the spawn's Agent call,
  ;; or a SendMessage), or nil, and the chat whose transcript holds it
  ;; (nil: the spawn parent's); and the `:sandbox-summary' of its own
  ;; commands so far, which settlement patches into that row when it
  ;; is not the default.
  row row-chat sandbox
  ;; Its Plan stamp (from its caller, the session's sticky Plan or Plan
  ;; mail it reads), given once: each invocation applies its own, so a
  ;; follow-up after Plan ended is not read-only; and the permission
  ;; mode override it inherited from its caller (mevedel-plan.el).
  plan-stamp mode-override
  ;; When it began waiting for a slot, then when it started (a float time).
  (since (float-time)))

(cl-defstruct (mevedel-agent--tree (:constructor mevedel-agent--make-tree) (:copier nil))
  "The agents of one session."
  session
  (agents (make-hash-table :test #'equal))
  (active 0)
  ;; Turns waiting for a slot, oldest first.
  waiting
  ;; Settlements running now.
  (settling 0)
  ;; Path -> (CALLBACK . TIMER) of a pending WaitAgent.
  (waits (make-hash-table :test #'equal)))

(defvar mevedel-agent--trees (make-hash-table :test #'equal)
  "Session ID -> its `mevedel-agent--tree'.")

(defun mevedel-agent--tree-of (session)
  "Return the agent tree of SESSION, creating it."
  (let ((key (mevedel-session-id session)))
    (or (gethash key mevedel-agent--trees)
        (puthash key (mevedel-agent--make-tree :session session) mevedel-agent--trees))))

(defun mevedel-agent--path-of (chat)
  "Return the canonical path of the agent talking in CHAT."
  (or (mevedel-chat-agent chat) mevedel-mailbox-root))

(defun mevedel-agent--handle (tree path)
  "Return the published handle of PATH in TREE, or nil."
  (when-let* ((handle (gethash path (mevedel-agent--tree-agents tree))))
    (and (not (eq (mevedel-agent-handle-status handle) 'preparing)) handle)))

(defun mevedel-agent--handles (tree)
  "Return the published handles of TREE, sorted by path."
  (let (handles)
    (maphash (lambda (_ handle)
               (unless (eq (mevedel-agent-handle-status handle) 'preparing)
                 (push handle handles)))
             (mevedel-agent--tree-agents tree))
    (sort handles (lambda (a b) (string< (mevedel-agent-handle-path a)
                                         (mevedel-agent-handle-path b))))))

(defun mevedel-agent--forget-tree (session)
  "Forget SESSION's agents, killing their conversations."
  (when-let* (((mevedel-session-p session))
              (tree (gethash (mevedel-session-id session) mevedel-agent--trees)))
    (remhash (mevedel-session-id session) mevedel-agent--trees)
    (maphash (lambda (_ handle)
               (when-let* ((turn (mevedel-agent-handle-turn handle)))
                 (setf (mevedel-agent--turn-settled turn) t))
               (when-let* ((chat (mevedel-agent-handle-chat handle))
                           (buffer (mevedel-chat-data-buffer chat)))
                 (when (buffer-live-p buffer) (kill-buffer buffer))))
             (mevedel-agent--tree-agents tree))
    (maphash (lambda (_ wait) (when (timerp (cdr wait)) (cancel-timer (cdr wait))))
             (mevedel-agent--tree-waits tree))))

(add-hook 'mevedel-session-close-functions #'mevedel-agent--forget-tree)

(defun mevedel-agent--flush-all ()
  "Save every child conversation before Emacs exits (`kill-emacs-hook').
The children are not among the chats mevedel-save.el flushes: their
streamed text and pending checkpoint timers would be lost."
  (maphash (lambda (_ tree)
             (maphash (lambda (_ handle)
                        (when-let* ((chat (mevedel-agent-handle-chat handle))
                                    ((buffer-live-p (mevedel-chat-data-buffer chat))))
                          (condition-case err
                              (mevedel-save-flush chat 3)
                            (error (message "mevedel: saving %s failed: %s"
                                            (mevedel-agent-handle-path handle)
                                            (error-message-string err))))))
                      (mevedel-agent--tree-agents tree)))
           mevedel-agent--trees))

;; Before the session's lock goes (depth 90).
(add-hook 'kill-emacs-hook #'mevedel-agent--flush-all 50)

(defun mevedel-agent--resource-lines (chat)
  "Return the agent:// roster line once CHAT's session has retained agents."
  (when-let* (((mevedel-chat-p chat))
              (tree (gethash (mevedel-session-id (mevedel-chat-session chat))
                             mevedel-agent--trees))
              ((mevedel-agent--handles tree)))
    (list "- agent:// retained agents' results (agent://root/PATH)")))

(add-hook 'mevedel-prompt-resource-roster-functions #'mevedel-agent--resource-lines -70)

;;;; Names and paths

(defun mevedel-agent-normalize-name (name)
  "Return the base of an agent path for the free-form task NAME.
Lowercase; runs outside [a-z0-9_-] become one hyphen; hyphens at
either end go; the base is capped at `mevedel-agent-name-limit'
characters, cut at the last hyphen when there is one; empty is
\"agent\", \"root\" is \"agent-root\"."
  (let* ((base (replace-regexp-in-string "[^a-z0-9_-]+" "-" (downcase name) t t))
         (base (string-trim base "-+" "-+")))
    (when (> (length base) mevedel-agent-name-limit)
      (let* ((cut (substring base 0 mevedel-agent-name-limit))
             (hyphen (string-match-p "-[^-]*\\'" cut)))
        (setq base (string-trim-right (if (and hyphen (> hyphen 0)) (substring cut 0 hyphen) cut)
                                      "-+"))))
    (cond ((string-empty-p base) "agent")
          ((equal base "root") "agent-root")
          (t base))))

(defun mevedel-agent--unique-path (tree parent base)
  "Return the first free path PARENT/BASE, PARENT/BASE-2, ... in TREE.
Retained and preparing siblings both occupy their paths."
  (let* ((stem (concat parent "/" base))
         (path stem)
         (n 1))
    (while (gethash path (mevedel-agent--tree-agents tree))
      (setq n (1+ n) path (format "%s-%d" stem n)))
    path))

(defconst mevedel-agent--path-regexp "\\`/root\\(?:/[a-z0-9_-]+\\)+\\'"
  "A canonical child path.")

(defun mevedel-agent-resolve-path (tree caller target)
  "Return the retained handle TARGET names in TREE, seen from CALLER's path.
TARGET is canonical (/root/...) or relative to CALLER (a/b).  Signal
`user-error' for a malformed path or one no retained agent has."
  (let ((path (cond ((not (stringp target)) nil)
                    ((string-prefix-p "/" target) target)
                    (t (concat caller "/" target)))))
    (cond ((equal path mevedel-mailbox-root) nil)
          ((not (and path (string-match-p mevedel-agent--path-regexp path)))
           (user-error "`%s' is not an agent path (use the canonical /root/NAME a call returned)"
                       target))
          ((mevedel-agent--handle tree path))
          (t (user-error "No retained agent at %s (ListAgents lists them)" path)))))

;;;; Frozen configuration

(defconst mevedel-agent-config-keys
  '(:backend :model :effort :system :tools :specialists :context :directory :role :max-turns
             :params :provider)
  "Every key of a frozen agent configuration, exactly once each.")

(defun mevedel-agent-check-config (config)
  "Return CONFIG, a frozen configuration plist, or signal `error'.
Unknown, duplicate or missing keys are refused, so that a restored
configuration is exactly what was frozen."
  (unless (and (proper-list-p config) (cl-evenp (length config)))
    (error "An agent configuration is a plist, not %S" config))
  (let ((keys (cl-loop for (key _) on config by #'cddr collect key)))
    (dolist (key keys)
      (unless (memq key mevedel-agent-config-keys)
        (error "Unknown key %s in an agent configuration" key))
      (when (memq key (cdr (memq key keys)))
        (error "Key %s appears twice in an agent configuration" key)))
    (dolist (key mevedel-agent-config-keys)
      (unless (memq key keys)
        (error "Key %s is missing from an agent configuration" key))))
  config)

(defconst mevedel-agent--self-lead "\n\nYou are the retained agent "
  "How the section naming an agent to itself begins in its system text.")

(defun mevedel-agent--inherited-body (parent)
  "Return the instructions a default-role child of chat PARENT inherits.
That is PARENT's effective system text, without the section naming a
child PARENT to itself: the grandchild's own section follows, so its
prompt claims one identity."
  (let ((text (or (mevedel-chat-frozen-system parent) (mevedel-prompt-system-text parent))))
    (if-let* (((mevedel-chat-agent parent))
              (cut (string-search (concat mevedel-agent--self-lead (mevedel-chat-agent parent) ",")
                                  text)))
        (substring text 0 cut)
      text)))

(defun mevedel-agent--inherit-components (parent child)
  "Give the default-role chat CHILD the prompt components of chat PARENT.
PARENT's selection and what it read come along, less the journal map,
which only the main conversation receives; CHILD's context updates
follow them."
  (mevedel-prompt-confine child (remq 'journal-map (mevedel-prompt-components parent))
                          (cl-remove 'journal-map (mevedel-prompt-read parent) :key #'car)))

(defun mevedel-agent--system-text (parent child path role)
  "Return the system text of the child PATH (chat CHILD) of chat PARENT with ROLE.
The default role (ROLE nil) inherits PARENT's effective instructions
\(`mevedel-agent--inherited-body'); a named role's are its
`:system-components' (mevedel-prompt.el), rendered for CHILD, and then
its `:prompt'.  Either way a section naming the agent and its
reporting duty follows, and its working directory when that is not
the workspace root."
  (let ((body (if (null role)
                  (progn (mevedel-agent--inherit-components parent child)
                         (mevedel-agent--inherited-body parent))
                (mapconcat #'identity
                           (delq nil (list (mevedel-prompt-whole-text
                                            child (plist-get role :system-components))
                                           (plist-get role :prompt)))
                           "\n\n")))
        (directory (mevedel-prompt-directory child)))
    (format "%s%s%s, working for %s. The user's message is your \
task; your final answer is returned to %s as your result, so make it a complete, compact report \
(list measurements as labelled items: scenario, metric, value, unit, runs). SendMessage reaches \
other agents by path; ListAgents lists them.%s"
            body mevedel-agent--self-lead path (mevedel-agent--parent-path path)
            (mevedel-agent--parent-path path)
            (if (equal directory (mevedel-prompt-workspace child))
                ""
              (format " Your working directory is %s: relative paths, Bash and Eval start \
there." directory)))))

(defun mevedel-agent--parent-path (path)
  "Return the path of PATH's spawn parent."
  (substring path 0 (string-match-p "/[^/]*\\'" path)))

(defconst mevedel-agent-delegation-tools '("Agent" "WaitAgent" "InterruptAgent")
  "The control bundle that possessing Agent grants.")

(defconst mevedel-agent-named-role-tools '("SendMessage" "ListAgents")
  "Tools every named role gets.")

(defun mevedel-agent--tools (parent role)
  "Return the gptel tools of a child of chat PARENT with ROLE.
The default role (nil, or `:tools' t) inherits PARENT's; a named role
lists its own (registered native tools by name; the specialists it
names it reaches through ToolCall, see `mevedel-agent--specialists')
and gets SendMessage and ListAgents; Agent comes with WaitAgent and
InterruptAgent, and a role that may not delegate has none of them.
A `:read-only' role has no ApplyPatch, even inherited: its roster,
with its prompt, is its boundary.  Tools declared :root-only
\(Monitor) are no child's.  ListAgents is a specialist, not native: a
named role reaches it through ToolCall."
  (let* ((inherited (mevedel-chat-tools parent))
         (names (if (or (null role) (eq (plist-get role :tools) t))
                    (mapcar #'gptel-tool-name inherited)
                  (append (plist-get role :tools) mevedel-agent-named-role-tools)))
         (names (if (and role (not (plist-get role :delegate)))
                    (cl-set-difference names mevedel-agent-delegation-tools :test #'equal)
                  (if (member "Agent" names)
                      (append names mevedel-agent-delegation-tools)
                    names)))
         (names (cl-remove-duplicates names :test #'equal :from-end t))
         (names (if (plist-get role :read-only) (remove "ApplyPatch" names) names))
         (natives (cl-remove-if #'mevedel-tool-root-only (mevedel-tool-native-tools))))
    (delq nil (mapcar (lambda (name)
                        (when-let* ((tool (cl-find name natives
                                                   :key #'mevedel-tool-name :test #'equal)))
                          (or (cl-find name inherited :key #'gptel-tool-name :test #'equal)
                              (mevedel-tool-gptel-tool tool))))
                      names))))

(defun mevedel-agent--specialists (parent child role)
  "Return the identities of the specialists a child of chat PARENT reaches.
CHILD is the child's chat, ROLE its role.  The default role (nil, or
`:tools' t) inherits PARENT's catalog: a child parent's frozen set, or
the specialists visible to the root now; an empty frozen set stays
empty.  A named role with a tool list reaches only the specialists it
names, by name or as a permission rule would
\(`mevedel-permissions-rule-names'): mcp__SERVER__TOOL, or mcp__SERVER
for every tool of that server.  So a verifier reaches no Eval,
WebFetch or Skill its role does not list.  Either way the set is
frozen: tools registered later do not join it, and calls stay subject
to the tools the session has at the time (`mevedel-tool-visible-p')."
  (let ((names (and (consp (plist-get role :tools)) (plist-get role :tools)))
        (frozen (buffer-local-value 'mevedel-tool-frozen-specialists
                                    (mevedel-chat-data-buffer parent))))
    (if (and (not names) frozen)
        (sort (hash-table-keys frozen) #'string<)
      ;; A named role is not confined by its delegator's set: its
      ;; own (not yet frozen) buffer sees what the session has.
      (let ((buffer (mevedel-chat-data-buffer (if names child parent))))
        (cl-loop for tool in (mevedel-tool-specialists)
                 when (and (mevedel-tool-visible-p tool buffer)
                           (not (mevedel-tool-root-only tool))
                           (or (not names)
                               (cl-intersection (mevedel-permissions-rule-names
                                                 (mevedel-tool-name tool))
                                                names :test #'equal)))
                 collect (mevedel-tool-identity tool))))))

(defun mevedel-agent--skill-bound (parent role tools specialists)
  "Return (TOOLS . SPECIALISTS) of a child of chat PARENT, bounded by a skill.
When a skill with allowed-tools restricts PARENT's running turn, the
child spawned from it gets no native tool (gptel TOOLS) or specialist
identity (SPECIALISTS) outside that list; a named ROLE keeps its
SendMessage.  Without a restriction both are returned unchanged."
  (if-let* ((allowed (mevedel-skills-allowed (mevedel-chat-data-buffer parent))))
      (cons (cl-remove-if-not (lambda (tool)
                                (or (member (gptel-tool-name tool) allowed)
                                    (and role (equal (gptel-tool-name tool) "SendMessage"))))
                              tools)
            (if (eq specialists t)
                specialists
              (cl-remove-if-not
               (lambda (identity)
                 (when-let* ((tool (mevedel-tool-by-identity identity)))
                   (cl-intersection (mevedel-permissions-rule-names (mevedel-tool-name tool))
                                    allowed :test #'equal)))
               specialists)))
    (cons tools specialists)))

(defun mevedel-agent--freeze-specialists (child identities)
  "Confine the catalog of the child chat CHILD to the specialist IDENTITIES.
IDENTITIES t (an agent saved before specialists were frozen) confines
nothing."
  (unless (eq identities t)
    (let ((table (make-hash-table :test #'equal :size (max 1 (length identities)))))
      (dolist (identity identities) (puthash identity t table))
      (with-current-buffer (mevedel-chat-data-buffer child)
        (setq-local mevedel-tool-frozen-specialists table)))))

(defun mevedel-agent-role-tool-names (chat args)
  "Return the tool names the role of the Agent call ARGS of CHAT lists.
Nil for the default role and a role without a tool list, which inherit
their delegator's.  An unknown role signals `user-error'.  The Agent
tool readies the session's catalog for them before the spawn."
  (let ((tools (plist-get (mevedel-agent-role (mevedel-agent--string-arg args :role)
                                              (mevedel-chat-root chat))
                          :tools)))
    (and (listp tools) tools)))

(defun mevedel-agent--directory (parent value)
  "Return the working directory that VALUE names for a child of chat PARENT.
VALUE is absolute or relative to PARENT's directory; nil inherits it.
It must exist, symlinks resolved, inside the workspace or a registered
Git worktree of its repository; otherwise `user-error'."
  (let ((base (buffer-local-value 'default-directory (mevedel-chat-data-buffer parent))))
    (if (or (null value) (string-empty-p value))
        base
      (let ((dir (file-name-as-directory (expand-file-name value base))))
        (unless (file-directory-p dir)
          (user-error "The working_directory %s does not exist" value))
        (let ((true (file-name-as-directory (file-truename dir))))
          (unless (cl-some (lambda (root) (file-in-directory-p true root))
                           (cons (file-truename (mevedel-chat-root parent))
                                 (mevedel-agent--worktrees (mevedel-chat-root parent))))
            (user-error "The working_directory %s is outside the workspace and its Git worktrees"
                        value))
          true)))))

(defun mevedel-agent--worktrees (root)
  "Return the truenames of the Git worktrees of the repository at ROOT."
  (with-temp-buffer
    (let ((default-directory root))
      (when (eq 0 (ignore-errors (process-file "git" nil t nil "worktree" "list" "--porcelain")))
        (goto-char (point-min))
        (let (dirs)
          (while (re-search-forward "^worktree \\(.+\\)$" nil t)
            (push (file-truename (file-name-as-directory (match-string 1))) dirs))
          dirs)))))

(defun mevedel-agent--context-mode (value)
  "Return the context mode VALUE names: `none', `all', `summary' or a count.
Signal `user-error' for anything else."
  (cond ((or (null value) (equal value "none")) 'none)
        ((equal value "all") 'all)
        ((equal value "summary") 'summary)
        ((and (stringp value) (string-match-p "\\`[1-9][0-9]*\\'" value))
         (string-to-number value))
        (t (user-error "The context must be none, all, summary or a positive number of turns, not %S"
                       value))))

;;;; Context copies

(defun mevedel-agent--copy-context (parent child mode)
  "Copy the dialogue of chat PARENT that MODE names into chat CHILD's buffer.
`all' copies PARENT's effective conversation, a number N the
compaction summary (when there is one) and the last N turns; the text
keeps gptel's properties, so the copy is a conversation."
  (let* ((from (mevedel-chat-data-buffer parent))
         (pieces
          (with-current-buffer from
            (pcase mode
              ('all (list (buffer-substring (point-min) (point-max))))
              ((pred integerp)
               (let* ((turns (mevedel-chat-turns parent))
                      (turn (nth (1- (min mode (length turns))) turns))
                      (start (if turn (marker-position (plist-get turn :start)) (point-min)))
                      (summary (text-property-any (point-min) start 'mevedel-notice 'compaction)))
                 (delq nil (list (and summary
                                      (buffer-substring
                                       summary (or (text-property-not-all
                                                    summary start 'mevedel-notice 'compaction)
                                                   start)))
                                 (buffer-substring start (point-max))))))))))
    (with-current-buffer (mevedel-chat-data-buffer child)
      (goto-char (point-max))
      (dolist (piece pieces) (insert piece)))))

(defconst mevedel-agent-summary-prompt
  "Write a handoff summary of the conversation below for an agent that will do this task:\n\n%s\n\n\
Keep what the agent needs: decisions, constraints, file names, findings. Leave out the rest."
  "The request of a `summary' context; %s is the task.")

(defun mevedel-agent--summarize (parent task done)
  "Summarise chat PARENT's conversation for TASK; call DONE with the text or nil.
Return a function that cancels the request; a cancelled request never
calls DONE."
  (let* ((buffer (mevedel-chat-data-buffer parent))
         (text (mevedel-history-project buffer))
         (cancelled nil)
         (work (generate-new-buffer " *mevedel-agent-summary*")))
    (with-current-buffer work
      (setq-local gptel-backend (mevedel-chat-backend-effective parent)
                  gptel-model (mevedel-chat-model-effective parent)
                  gptel-use-tools nil)
      (gptel-request (concat (format mevedel-agent-summary-prompt task) "\n\n" text)
        :buffer work
        :system "You write handoff summaries of coding conversations."
        :stream nil
        ;; Its usage is the parent's (mevedel-usage.el).
        :context parent
        :callback (lambda (response _info)
                    (unless (or cancelled (not (or (stringp response) (null response))))
                      (setq cancelled t)
                      (kill-buffer work)
                      (funcall done (and (stringp response) response))))))
    (lambda ()
      (unless cancelled
        (setq cancelled t)
        (when (buffer-live-p work)
          (ignore-errors (gptel-abort work))
          (kill-buffer work))))))

(defun mevedel-agent--insert-background (child text &optional label)
  "Put TEXT in chat CHILD's buffer as a block headed by LABEL.
LABEL defaults to that of the handoff summary, a Task background."
  (with-current-buffer (mevedel-chat-data-buffer child)
    (goto-char (point-max))
    (insert (gptel-prompt-prefix-string)
            (or label
                "[Task background: a summary of the delegating conversation, for reference only]")
            "\n" (string-trim text) "\n")))

;;;; Who is calling: tasks and interactions

(defsubst mevedel-agent-caller-path (context)
  "Return the canonical path of the agent whose tool call has CONTEXT.
A child's data buffer names its agent; any other call is the root's.
Inline: the permission hooks ask it for every call."
  (let ((buffer (plist-get context :data-buffer)))
    (or (and (buffer-live-p buffer) (buffer-local-value 'mevedel-session-agent buffer))
        mevedel-mailbox-root)))

(defun mevedel-agent-known-p (session path)
  "Return non-nil when PATH is /root or a retained agent of SESSION."
  (or (equal path mevedel-mailbox-root)
      (when-let* ((tree (gethash (mevedel-session-id session) mevedel-agent--trees)))
        (and (mevedel-agent--handle tree path) t))))

(defun mevedel-agent-requester (context)
  "Return (PATH . TURN) of the child agent whose call has CONTEXT, or nil.
An Ask or plan card of a child is attributed to PATH and belongs to
its running TURN."
  (let ((path (mevedel-agent-caller-path context))
        (session (plist-get context :session)))
    (unless (equal path mevedel-mailbox-root)
      (when-let* (((mevedel-session-p session))
                  (tree (gethash (mevedel-session-id session) mevedel-agent--trees))
                  (handle (mevedel-agent--handle tree path)))
        (cons path (mevedel-agent-handle-turn handle))))))

(defun mevedel-agent--request-context (chat)
  "Return the context of a call of CHAT's running request, for its stamp or mode."
  (list :data-buffer (mevedel-chat-data-buffer chat) :session (mevedel-chat-session chat)))

(defun mevedel-agent--request-stamp (chat)
  "Return the Plan stamp of CHAT's running request, or nil.
A turn it starts or directs, a child's first included, is stamped
with it and keeps it after the root leaves Plan."
  (mevedel-plan-stamp (mevedel-agent--request-context chat)))

(defun mevedel-agent--request-override (chat)
  "Return the permission mode override of CHAT's running request, or nil.
An invocation it starts inherits it (an approved plan's `edits')."
  (run-hook-with-args-until-success 'mevedel-permissions-mode-functions
                                    (mevedel-agent--request-context chat)
                                    (mevedel-chat-session chat)))

(defun mevedel-agent--caller-handle (context &optional path)
  "Return the handle of the child agent whose call has CONTEXT, or nil.
PATH is the caller's path (`mevedel-agent-caller-path') when known."
  (let ((path (or path (mevedel-agent-caller-path context)))
        (session (plist-get context :session)))
    (unless (equal path mevedel-mailbox-root)
      (when-let* (((mevedel-session-p session))
                  (tree (gethash (mevedel-session-id session) mevedel-agent--trees)))
        (gethash path (mevedel-agent--tree-agents tree))))))

(defun mevedel-agent-plan-stamp (context)
  "Return the Plan stamp of the child agent whose call has CONTEXT.
That is its running invocation's, else `none'; nil for the root's
calls.  A role's read-only judgment is its prompt's, not a stamp: a
verifier may run the tests."
  (let ((path (mevedel-agent-caller-path context)))
    (unless (equal path mevedel-mailbox-root)
      (let* ((handle (mevedel-agent--caller-handle context path))
             (turn (and handle (mevedel-agent-handle-turn handle))))
        (or (and turn (mevedel-agent--turn-plan-stamp turn)) 'none)))))

(add-hook 'mevedel-plan-request-functions #'mevedel-agent-plan-stamp)

(defun mevedel-agent-mode-override (context _session)
  "Return the mode override of the child invocation whose call has CONTEXT, or nil.
A `mevedel-permissions-mode-functions' member: an invocation started
by a request with an override (the implementation of a plan approved
with edits) keeps it until it settles."
  (let ((path (mevedel-agent-caller-path context)))
    (unless (equal path mevedel-mailbox-root)
      (when-let* ((handle (mevedel-agent--caller-handle context path))
                  (turn (mevedel-agent-handle-turn handle)))
        (mevedel-agent--turn-mode-override turn)))))

(add-hook 'mevedel-permissions-mode-functions #'mevedel-agent-mode-override)

(defun mevedel-agent--mail-stamp (messages)
  "Return the Plan stamp carried by MESSAGES (mailbox records), or nil.
MAIL from a request with Plan authority names its stamp's kind in the
attribute \"plan\"; RESULT records carry none."
  (cl-loop for message in messages
           for kind = (cadr (assoc "plan" (plist-get message :attrs)))
           when (member kind '("sticky" "directive"))
           return (mevedel-plan-make-stamp (intern kind))))

(defun mevedel-agent--unread-stamp (chat)
  "Return the Plan stamp of the unread mail of CHAT's agent, or nil."
  (when-let* ((store (mevedel-mailbox--store chat)))
    (mevedel-agent--mail-stamp (mevedel-mailbox-unread store (mevedel-mailbox-owner chat)))))

(defun mevedel-agent--stamp-root-turn (chat turn)
  "Stamp the new TURN of the root CHAT if the unread mail it gets is Plan mail.
A `mevedel-chat-turn-functions' member; a child's invocation is
stamped when it starts (`mevedel-agent--start')."
  (unless (mevedel-chat-agent chat)
    (mevedel-plan-stamp-turn turn (mevedel-agent--unread-stamp chat))))

(add-hook 'mevedel-chat-turn-functions #'mevedel-agent--stamp-root-turn)

(defun mevedel-agent--mail-read (chat messages)
  "Stamp CHAT's running turn when MESSAGES, read before a sample, are Plan mail.
A `mevedel-mailbox-read-functions' member: from that sample on the
turn's calls keep Plan's boundary."
  (when-let* ((stamp (mevedel-agent--mail-stamp messages)))
    (if (mevedel-chat-agent chat)
        (when-let* ((handle (mevedel-agent--caller-handle (mevedel-agent--request-context chat)))
                    (turn (mevedel-agent-handle-turn handle))
                    ((not (mevedel-agent--turn-plan-stamp turn))))
          (setf (mevedel-agent--turn-plan-stamp turn) stamp))
      (when-let* ((turn (mevedel-chat-turn chat)))
        (mevedel-plan-stamp-turn turn stamp)))))

(add-hook 'mevedel-mailbox-read-functions #'mevedel-agent--mail-read)

(add-hook 'mevedel-tasks-caller-functions #'mevedel-agent-caller-path)
(add-hook 'mevedel-tasks-agent-known-functions #'mevedel-agent-known-p)
(add-hook 'mevedel-interaction-requester-functions #'mevedel-agent-requester)

;;;; Spawning

(defun mevedel-agent--start-hooks (session child path role-name continue)
  "Run SESSION's SubagentStart hooks for the new agent PATH, then CONTINUE.
Their context goes into chat CHILD as a background block before its
first request.  Without hooks CONTINUE runs at once."
  (mevedel-hooks-subagent-start
   session path (or role-name "default")
   (lambda (context)
     (when (and context (not (string-blank-p context)))
       (mevedel-agent--insert-background child context "[SubagentStart hook context]"))
     (funcall continue))))

(defun mevedel-agent--initial-prompt-hooks (handle task on-ready continue)
  "Run the UserPromptSubmit hooks on HANDLE's initial TASK, then CONTINUE.
They run once, during the preparation: a task they block fails the
Agent call (ON-READY hears the reason) and releases the reservation,
before the path is published; the task they accept is sent without
running them again."
  (let* ((tree (mevedel-agent-handle-tree handle))
         (stop (mevedel-hooks-prompt-submit
                (mevedel-agent--tree-session tree) task
                (lambda (blocked)
                  (when (eq (gethash (mevedel-agent-handle-path handle)
                                     (mevedel-agent--tree-agents tree))
                            handle)
                    (setf (mevedel-agent-handle-cancel handle) nil)
                    (if (not blocked)
                        (funcall continue)
                      (setf (mevedel-agent-handle-payload handle)
                            (format "A UserPromptSubmit hook blocked the task for %s: %s"
                                    (mevedel-agent-handle-path handle) blocked))
                      (mevedel-agent--release-reservation tree handle)
                      (when on-ready
                        (funcall on-ready nil nil (mevedel-agent-handle-payload handle))))))
                (mevedel-agent-handle-path handle))))
    (when (eq (mevedel-agent-handle-status handle) 'preparing)
      (unless (mevedel-agent-handle-cancel handle)
        (setf (mevedel-agent-handle-cancel handle) stop)))))

(defun mevedel-agent--dispatch-first (handle chat child task mode on-settle on-ready)
  "Send the first TASK of HANDLE's chat CHILD, spawned by CHAT in context MODE.
ON-SETTLE and ON-READY are the spawn's callbacks."
  (let ((dispatch (lambda (task)
                    (let ((waiting (mevedel-agent--activate handle task on-settle chat t)))
                      (when-let* ((turn (mevedel-agent-handle-turn handle)))
                        (setf (mevedel-agent--turn-row turn) (mevedel-agent-handle-spawn-id handle)))
                      (when on-ready (funcall on-ready (mevedel-agent-handle-path handle)
                                              waiting nil))))))
    (if (not (eq mode 'summary))
        (progn
          (unless (eq mode 'none) (mevedel-agent--copy-context chat child mode))
          (funcall dispatch task))
      (setf (mevedel-agent-handle-cancel handle)
            (mevedel-agent--summarize
             chat task
             (lambda (summary)
               (condition-case err
                   (if (not summary)
                       (error "The handoff summary request failed")
                     (mevedel-agent--insert-background child summary)
                     (funcall dispatch task))
                 (error (mevedel-agent--release-reservation (mevedel-agent-handle-tree handle) handle)
                        (when on-ready (funcall on-ready nil nil (error-message-string err)))))))))))


(defun mevedel-agent--string-arg (args key &optional required)
  "Return the string ARGS has under KEY, or nil; REQUIRED refuses blanks."
  (let ((value (plist-get args key)))
    (cond ((and (stringp value) (not (string-blank-p value))) value)
          (required (user-error "The argument %s must be a non-empty string" (substring (symbol-name key) 1)))
          ((or (null value) (eq value :null) (equal value "")) nil)
          ((stringp value) nil)
          (t (user-error "The argument %s must be a string" (substring (symbol-name key) 1))))))

(defun mevedel-agent--prompt-hooks (path text)
  "Run `mevedel-agent-prompt-functions' on TEXT for PATH; return the task.
Signal `user-error' when a hook blocks it."
  (dolist (function mevedel-agent-prompt-functions text)
    (pcase (funcall function path text)
      ('nil)
      ((and (pred stringp) replacement) (setq text replacement))
      (`(block . ,reason) (user-error "The task for %s was blocked: %s" path reason)))))

(defun mevedel-agent--inherited-model (parent)
  "Return the model plist of chat PARENT (:backend :model :effort :provider).
:provider is the ACP agent placement PARENT answers with, or nil."
  (list :backend (mevedel-chat-backend-effective parent)
        :model (mevedel-chat-model-effective parent)
        :effort (and (boundp 'gptel-reasoning-effort)
                     (buffer-local-value 'gptel-reasoning-effort
                                         (mevedel-chat-data-buffer parent)))
        :provider (let ((placement (mevedel-chat-placement parent)))
                    (and placement (not (eq (car placement) 'gptel)) placement))))

(defun mevedel-agent-spawn (chat args &optional on-settle row)
  "Create a retained child of the agent of CHAT for the Agent call ARGS.
ARGS is the plist the Agent tool receives (:task_name :message :role
:context :model :effort :working_directory), and for a harness
workflow :workload (a symbol of `mevedel-agent-workload-tiers' chosen
over the role's, as a Goal's goal-review).  ON-SETTLE, if non-nil,
is called once with (PATH OUTCOME PAYLOAD) when the child's first turn
settles, and consumes its RESULT: when it returns, the record
leaves the parent's mailbox (`mevedel-agent--consume').  ROW, the ID
of a handle row in CHAT's transcript (`mevedel-chat-append-handle'),
is kept up to date as an Agent call's row is.  Return the canonical
path; the turn runs, or waits for a slot, on its own.  Invalid inputs
signal `user-error' before anything is reserved."
  (mevedel-agent--spawn chat args on-settle nil row))

(defun mevedel-agent--spawn (chat args on-settle on-ready &optional spawn-id)
  "Create the child of CHAT for ARGS, calling ON-SETTLE when its turn settles.
See `mevedel-agent-spawn'.
ON-READY, if non-nil, is called with the path (nil when preparation
failed), whether the turn waits for a slot and the failure message,
once the child is dispatched; SPAWN-ID is the Agent call's ID, whose
row shows the handle.  Return the path, reserved and maybe still
preparing (a `summary' context: see
`mevedel-agent-cancel-preparation')."
  (let* ((session (mevedel-chat-session chat))
         (task-name (mevedel-agent--string-arg args :task_name t))
         (message (mevedel-agent--string-arg args :message t))
         (role-name (mevedel-agent--string-arg args :role))
         (role (mevedel-agent-role role-name (mevedel-chat-root chat)))
         (mode (mevedel-agent--context-mode (mevedel-agent--string-arg args :context)))
         (directory (mevedel-agent--directory chat (mevedel-agent--string-arg args :working_directory)))
         (model (mevedel-agent-resolve-model
                 (or (mevedel-agent--string-arg args :model) (plist-get role :model))
                 ;; A harness workflow (a Goal's check) names its own
                 ;; workload; the Agent tool's schema has no such argument.
                 (or (plist-get args :workload) (plist-get role :workload))
                 (mevedel-agent--inherited-model chat)))
         (effort (or (let ((e (mevedel-agent--string-arg args :effort))) (and e (intern e)))
                     (plist-get role :effort) (plist-get model :effort)))
         (tree (mevedel-agent--tree-of session))
         (parent-path (mevedel-agent--path-of chat))
         (path (mevedel-agent--unique-path tree parent-path
                                           (mevedel-agent-normalize-name task-name)))
         (handle (mevedel-agent--make-handle
                  :path path :parent parent-path :role-name role-name
                  :role role :parent-chat chat :spawn-id spawn-id :tree tree
                  :spawn-turn (mevedel-chat-turn chat))))
    ;; The reservation: the path is taken, but nobody sees it yet.
    (puthash path handle (mevedel-agent--tree-agents tree))
    (condition-case err
        (let* ((child (mevedel-chat-make-child chat path directory))
               (bounded (mevedel-agent--skill-bound
                         chat role (mevedel-agent--tools chat role)
                         (mevedel-agent--specialists chat child role)))
               (config (mevedel-agent-check-config
                        (list :backend (plist-get model :backend) :model (plist-get model :model)
                              :effort effort
                              :system (mevedel-agent--system-text chat child path role)
                              :tools (car bounded)
                              :specialists (cdr bounded)
                              :context mode :directory directory :role role-name
                              :max-turns (plist-get role :max-turns) :params nil
                              :provider (plist-get model :provider)))))
          (setf (mevedel-agent-handle-chat handle) child
                (mevedel-agent-handle-config handle) config
                (mevedel-chat-backend child) (plist-get config :backend)
                (mevedel-chat-model child) (plist-get config :model)
                (mevedel-chat-placement child) (plist-get config :provider)
                (mevedel-chat-frozen-system child) (plist-get config :system)
                (mevedel-chat-frozen-tools child) (plist-get config :tools))
          (mevedel-agent--freeze-specialists child (plist-get config :specialists))
          (with-current-buffer (mevedel-chat-data-buffer child)
            (setq-local mevedel-session-agent path
                        mevedel-tool-offered (mapcar #'gptel-tool-name (plist-get config :tools)))
            (when (boundp 'gptel-reasoning-effort)
              (set (make-local-variable 'gptel-reasoning-effort) effort)))
          (mevedel-chat-observe child (lambda (event _chat &rest records)
                                        (mevedel-agent--child-event handle event records)))
          (run-hook-with-args 'mevedel-agent-start-functions path message role-name)
          (let ((task (mevedel-agent--prompt-hooks path message)))
            (mevedel-agent--start-hooks
             session child path role-name
             (lambda ()
               (mevedel-agent--initial-prompt-hooks
                handle task on-ready
                (lambda ()
                  (mevedel-agent--dispatch-first handle chat child task mode on-settle
                                                 on-ready))))))
          ;; Blocked at once, without a caller to tell: the call fails.
          (unless (or on-ready (eq (gethash path (mevedel-agent--tree-agents tree)) handle))
            (user-error "%s" (mevedel-agent-handle-payload handle)))
          path)
      (error
       (mevedel-agent--release-reservation tree handle)
       (signal (car err) (cdr err))))))

(defun mevedel-agent-cancel-preparation (chat path)
  "Cancel the running preparation of the child PATH of CHAT's session.
The reservation goes at once and the preparation's late callback is
suppressed."
  (when-let* ((tree (gethash (mevedel-session-id (mevedel-chat-session chat)) mevedel-agent--trees))
              (handle (gethash path (mevedel-agent--tree-agents tree)))
              ((eq (mevedel-agent-handle-status handle) 'preparing)))
    (when (mevedel-agent-handle-cancel handle)
      (funcall (mevedel-agent-handle-cancel handle)))
    (mevedel-agent--release-reservation tree handle)))

(defun mevedel-agent--release-reservation (tree handle)
  "Drop HANDLE's reservation in TREE and its conversation."
  (when (eq (gethash (mevedel-agent-handle-path handle) (mevedel-agent--tree-agents tree)) handle)
    (remhash (mevedel-agent-handle-path handle) (mevedel-agent--tree-agents tree)))
  (when-let* ((chat (mevedel-agent-handle-chat handle))
              (buffer (mevedel-chat-data-buffer chat)))
    (when (buffer-live-p buffer) (kill-buffer buffer)))
  (mevedel-agent--offer tree))

;;;; Turns and capacity

(defun mevedel-agent--tree-of-handle (handle)
  "Return the tree HANDLE belongs to."
  (mevedel-agent-handle-tree handle))

(defun mevedel-agent--activate (handle text on-settle &optional caller hooked)
  "Start a turn of HANDLE with TEXT, or queue it for a slot.
ON-SETTLE is called when it settles.  CALLER, the chat whose request
starts the turn, gives it that request's mode override and, when the
request has Plan authority, its Plan stamp.  HOOKED says the
UserPromptSubmit hooks already accepted TEXT.  Return non-nil when it
waits."
  (let* ((tree (mevedel-agent--tree-of-handle handle))
         (stamp (and caller (mevedel-agent--request-stamp caller)))
         (turn (mevedel-agent--make-turn
                :handle handle :text text :on-settle on-settle :hooked hooked
                :plan-stamp (and (mevedel-plan-authority-p stamp) stamp)
                :mode-override (and caller (mevedel-agent--request-override caller))
                :previous (and (mevedel-agent-handle-outcome handle)
                               (list (mevedel-agent-handle-outcome handle)
                                     (mevedel-agent-handle-payload handle)
                                     (mevedel-agent-handle-verdict handle))))))
    (setf (mevedel-agent-handle-turn handle) turn
          (mevedel-agent-handle-tool-calls handle) 0
          (mevedel-agent-handle-outcome handle) nil
          (mevedel-agent-handle-payload handle) nil
          (mevedel-agent-handle-verdict handle) nil)
    (if (mevedel-agent--slot-free-p tree)
        (progn (mevedel-agent--start tree turn) nil)
      (setf (mevedel-agent-handle-status handle) 'waiting
            (mevedel-agent--tree-waiting tree) (append (mevedel-agent--tree-waiting tree)
                                                       (list turn)))
      (unless (mevedel-chat-store (mevedel-agent-handle-chat handle))
        (mevedel-agent--give-store handle (mevedel-agent-handle-chat handle)))
      (mevedel-agent--save-registry tree)
      (mevedel-agent--refresh handle)
      t)))

(defun mevedel-agent--slot-free-p (tree)
  "Return non-nil when a new turn in TREE may start now.
A slot is free, no settlement runs and no turn waits before it."
  (and (< (mevedel-agent--tree-active tree) mevedel-agent-capacity)
       (zerop (mevedel-agent--tree-settling tree))
       (null (mevedel-agent--tree-waiting tree))))

(defun mevedel-agent--start (tree turn)
  "Start TURN in TREE, taking a slot.
A start that fails gives the slot back and settles TURN as failed."
  (let* ((handle (mevedel-agent--turn-handle turn))
         (chat (mevedel-agent-handle-chat handle)))
    (cl-incf (mevedel-agent--tree-active tree))
    ;; A new turn follows the session's sticky Plan, and reading Plan
    ;; mail first makes it a Plan turn.
    (unless (mevedel-agent--turn-plan-stamp turn)
      (setf (mevedel-agent--turn-plan-stamp turn)
            (or (mevedel-agent--unread-stamp chat)
                (and (mevedel-plan-active-p (mevedel-agent--tree-session tree))
                     (mevedel-plan-make-stamp 'sticky)))))
    (setf (mevedel-agent--turn-started turn) t
          (mevedel-agent--turn-since turn) (float-time)
          (mevedel-agent-handle-status handle) 'running)
    (mevedel-agent--recover-backend chat)
    (condition-case err
        (progn
          ;; The directory was checked at the spawn; it may have gone since.
          (let ((directory (plist-get (mevedel-agent-handle-config handle) :directory)))
            (unless (file-directory-p directory)
              (error "Its working directory %s no longer exists" directory)))
          (mevedel-chat-send chat (mevedel-agent--turn-text turn)
                             :hooked (mevedel-agent--turn-hooked turn)
                             :on-done (lambda (_chat outcome)
                                        (mevedel-agent--turn-ended turn outcome)))
          (setf (mevedel-agent--turn-dispatched turn) t)
          ;; After dispatch (the request is on its way meanwhile; a new
          ;; store takes a while to make): the conversation is on disk
          ;; before the registry names the agent active.
          (unless (mevedel-chat-store chat)
            (mevedel-agent--give-store handle chat))
          (when (mevedel-chat-store chat)
            (mevedel-save-checkpoint chat '(("turn-open" . "1")) t))
          (mevedel-agent--save-registry tree))
      (error (mevedel-agent--settle turn 'failed
                                    (format "The turn could not start: %s"
                                            (error-message-string err)))))
    (mevedel-agent--refresh handle)))

(defun mevedel-agent--recover-backend (chat)
  "Give CHAT's turn the gptel backend now defined under its frozen backend's name.
A backend made again under the same name (its key or models changed)
replaces the object the child was frozen with; the turn uses the
current one.  The frozen identity, the name and model, is unchanged."
  (when-let* ((frozen (mevedel-chat-backend chat))
              ((gptel-backend-p frozen))
              (current (ignore-errors (gptel-get-backend (gptel-backend-name frozen))))
              ((not (eq current frozen))))
    (setf (mevedel-chat-backend chat) current)))

(defun mevedel-agent-note-served (chat model)
  "Note that MODEL, a model id, serves the running turn of the agent of CHAT.
An ACP agent calls this with the model it acknowledged while preparing
its session, which can differ from the one the agent was frozen with
\(an alias resolved, say).  The agent reports it beside its frozen
model until the frozen one is noted serving it; it is saved with the
agent, so an idle or resumed one still says what served it last."
  (when-let* ((path (mevedel-chat-agent chat))
              (tree (gethash (mevedel-session-id (mevedel-chat-session chat)) mevedel-agent--trees))
              (handle (mevedel-agent--handle tree path)))
    (let* ((config (mevedel-agent-handle-config handle))
           (served (mevedel-agent--model
                    (if (plist-get config :provider)
                        (plist-put (copy-sequence config) :provider
                                   (cons (car (plist-get config :provider)) model))
                      (plist-put (copy-sequence config) :model model))))
           (served (unless (equal served (mevedel-agent--model config)) served)))
      (unless (equal served (mevedel-agent-handle-served handle))
        (setf (mevedel-agent-handle-served handle) served)
        (mevedel-agent--save-registry tree)
        (mevedel-agent--refresh handle)))))

(defun mevedel-agent--offer (tree)
  "Start the waiting invocations of TREE, oldest first, while slots are free."
  (while (and (mevedel-agent--tree-waiting tree)
              (zerop (mevedel-agent--tree-settling tree))
              (< (mevedel-agent--tree-active tree) mevedel-agent-capacity))
    (let ((turn (pop (mevedel-agent--tree-waiting tree))))
      (unless (mevedel-agent--turn-settled turn)
        (mevedel-agent--start tree turn)))))

(defun mevedel-agent--child-event (handle event records)
  "Add a finished tool batch of HANDLE's conversation to its count.
EVENT is the conversation's event, RECORDS its arguments.  The
sandbox facts of the batch's commands join the running turn's."
  (when (eq event 'tool-results)
    (cl-incf (mevedel-agent-handle-tool-calls handle) (length (car records)))
    (when-let* ((turn (mevedel-agent-handle-turn handle)))
      (dolist (record (car records))
        (let ((result (if (plist-member record :mevedel-result)
                          (plist-get record :mevedel-result)
                        (plist-get record :result))))
          (when-let* (((stringp result))
                      (summary (plist-get (mevedel-render-data-extract result (plist-get record :id))
                                          :sandbox-summary)))
            (setf (mevedel-agent--turn-sandbox turn)
                  (mevedel-sandbox-summary-merge (mevedel-agent--turn-sandbox turn) summary))))))
    (mevedel-agent--refresh handle)))

(defun mevedel-agent--roll-up-sandbox (turn)
  "Keep TURN's non-default sandbox facts on the Agent row that started it.
The warning stays on that row (hidden render-data, never read by a
model) after the agent goes idle."
  (when-let* ((id (mevedel-agent--turn-row turn))
              (summary (mevedel-agent--turn-sandbox turn))
              ((mevedel-sandbox-summary-warning summary))
              (parent (or (mevedel-agent--turn-row-chat turn)
                          (mevedel-agent-handle-parent-chat (mevedel-agent--turn-handle turn))))
              ((buffer-live-p (mevedel-chat-data-buffer parent))))
    (ignore-errors
      (mevedel-chat-update-render-data
       parent id (lambda (render-data) (plist-put (copy-sequence render-data)
                                                  :sandbox-summary summary))
       'agent-sandbox))))

;;;; Settlement

(defun mevedel-agent--final-response (chat &optional all)
  "Return the text of the last response of CHAT's latest turn.
With ALL, return every response of the turn, for partial work."
  (let* ((start (mevedel-chat-turn-start chat))
         (segments (mevedel-history-segments (mevedel-chat-data-buffer chat)
                                             (and start (marker-position start))))
         (responses (cl-remove-if-not (lambda (s) (eq (plist-get s :type) 'response)) segments)))
    (string-trim
     (if all
         (mapconcat (lambda (s) (plist-get s :text)) responses "\n\n")
       (or (plist-get (car (last responses)) :text) "")))))

(defun mevedel-agent--turn-ended (turn outcome)
  "Settle TURN, whose chat turn ended with OUTCOME (`done', `error', `abort')."
  (let* ((handle (mevedel-agent--turn-handle turn))
         (chat (mevedel-agent-handle-chat handle))
         (reason (mevedel-agent--turn-reason turn)))
    (pcase outcome
      ((guard (eq reason 'max-turns))
       (mevedel-agent--settle
        turn 'completed
        (format "%s\n\n[Stopped before a final answer: the agent reached its limit of %d turns]"
                (mevedel-agent--final-response chat)
                (plist-get (mevedel-agent-handle-config handle) :max-turns))))
      ('done (mevedel-agent--settle-or-hold turn 'completed (mevedel-agent--final-response chat)))
      ('error (mevedel-agent--settle-or-hold
               turn 'failed (format "The agent's request failed: %s"
                                    (or (mevedel-chat-status-detail chat) "unknown error"))))
      (_ (mevedel-agent--settle turn 'interrupted (mevedel-agent--interrupted-payload turn))))))

(defun mevedel-agent--settle-or-hold (turn outcome payload)
  "Settle TURN with OUTCOME and PAYLOAD, or hold them while it owns executions.
A held turn stays active, slot and all, until its last yielded
command ends (`mevedel-agent--execution-reported'): then one
settlement publishes the answer and every completion it could not
read, and nothing reaches the agent's mailbox after it."
  (if (mevedel-agent--live-executions (mevedel-agent--turn-handle turn))
      (setf (mevedel-agent--turn-held turn) (cons outcome payload))
    (mevedel-agent--settle turn outcome payload)))

(defun mevedel-agent--live-executions (handle)
  "Return the unfinished yielded executions HANDLE's agent owns."
  (and (featurep 'mevedel-dyn)
       (mevedel-core-exec-list (mevedel-session-id (mevedel-agent--tree-session
                                                    (mevedel-agent-handle-tree handle)))
                               (mevedel-agent-handle-path handle))))

(defun mevedel-agent--stop-executions (handle)
  "Stop the executions HANDLE's agent owns; their records reach nobody's model.
What they report arrives after its settlement and goes on to its
spawn parent (`mevedel-agent--execution-reported')."
  (let ((key (mevedel-session-id (mevedel-agent--tree-session (mevedel-agent-handle-tree handle)))))
    (dolist (execution (mevedel-agent--live-executions handle))
      (ignore-errors (mevedel-core-exec-stop-by-user key (plist-get execution :id))))))

(defun mevedel-agent--execution-reported (data)
  "React to the execution report DATA (a settlement or monitor lines).
The root's own reports release its WaitAgent.  A child's last
execution ending settles its held turn; a report reaching a child
with no turn goes on to its spawn parent, as an EXECUTION record."
  (when-let* ((tree (gethash (plist-get data :session) mevedel-agent--trees))
              ((plist-get data :mailbox-ids)))
    (let ((owner (or (plist-get data :owner) mevedel-mailbox-root)))
      (if (equal owner mevedel-mailbox-root)
          (when (gethash owner (mevedel-agent--tree-waits tree))
            (mevedel-agent--release-wait tree owner (format "execution %s reported"
                                                            (plist-get data :id))))
        (when-let* ((handle (gethash owner (mevedel-agent--tree-agents tree))))
          (let ((turn (mevedel-agent-handle-turn handle)))
            (cond ((null turn)
                   (mevedel-agent--hand-on-executions (mevedel-agent--tree-session tree) owner
                                                      (mevedel-agent-handle-parent handle)))
                  ((and (mevedel-agent--turn-held turn)
                        (not (mevedel-agent--live-executions handle)))
                   (mevedel-agent--settle turn (car (mevedel-agent--turn-held turn))
                                          (cdr (mevedel-agent--turn-held turn)))))))))))

(add-hook 'mevedel-tool-exec-settled-functions #'mevedel-agent--execution-reported)
(add-hook 'mevedel-tool-exec-monitor-functions #'mevedel-agent--execution-reported)

(defun mevedel-agent--interrupted-payload (turn)
  "Return the payload of the interrupted TURN: its reason and partial work."
  (let ((handle (mevedel-agent--turn-handle turn)))
    (concat (format "Interrupted: %s." (or (mevedel-agent--turn-reason turn) "interrupted"))
            (mevedel-agent--partial-note
             (if (mevedel-agent--turn-started turn)
                 (mevedel-agent--final-response (mevedel-agent-handle-chat handle) t)
               "")))))

(defun mevedel-agent--partial-note (partial)
  "Return the text of a payload naming PARTIAL work, bounded; empty for none."
  (let ((partial (if (> (length partial) 4000)
                     (concat "…" (substring partial (- (length partial) 4000)))
                   partial)))
    (if (string-empty-p partial) "" (concat "\nPartial work:\n" partial))))

(defun mevedel-agent--recovered-work (handle)
  "Return the responses of the last turn of the restored HANDLE's conversation.
Its conversation is loaded (the cut turn settled as the root's is);
one that cannot be gives no partial work."
  (condition-case nil
      (let* ((chat (mevedel-agent--hydrate handle))
             (segments (mevedel-history-segments (mevedel-chat-data-buffer chat)))
             (last-task (cl-position 'user segments :key (lambda (s) (plist-get s :type))
                                     :from-end t)))
        (string-trim
         (mapconcat (lambda (s) (plist-get s :text))
                    (cl-remove-if-not (lambda (s) (eq (plist-get s :type) 'response))
                                      (nthcdr (1+ (or last-task -1)) segments))
                    "\n\n")))
    (error "")))

(defun mevedel-agent--stop-hooks (session handle payload)
  "Run SESSION's SubagentStop hooks for HANDLE's settled turn.
PAYLOAD is its answer.  They observe, once per turn: the agent stays
retained and idle."
  (mevedel-hooks-subagent-stop
   session (list :id (mevedel-agent-handle-path handle)
                 :type (or (mevedel-agent-handle-role-name handle) "default"))
   :last-message (or payload "")))

(defun mevedel-agent--settle (turn outcome payload)
  "Settle TURN with OUTCOME and PAYLOAD, once; later attempts do nothing.
Return non-nil when this call settled it."
  (unless (mevedel-agent--turn-settled turn)
    (setf (mevedel-agent--turn-settled turn) t)
    (let* ((handle (mevedel-agent--turn-handle turn))
           (tree (mevedel-agent--tree-of-handle handle))
           (session (mevedel-agent--tree-session tree))
           (path (mevedel-agent-handle-path handle))
           (parent (mevedel-agent-handle-parent handle))
           (verdict (and (mevedel-agent--turn-dispatched turn)
                         (plist-get (mevedel-agent-handle-role handle) :verdict)
                         (mevedel-agent-parse-verdict payload))))
      (cl-incf (mevedel-agent--tree-settling tree))
      (unwind-protect
          (progn
            (when (mevedel-agent--turn-started turn)
              (cl-decf (mevedel-agent--tree-active tree)))
            (setf (mevedel-agent--tree-waiting tree) (delq turn (mevedel-agent--tree-waiting tree))
                  (mevedel-agent-handle-turn handle) nil
                  (mevedel-agent-handle-status handle) 'idle)
            ;; A follow-up that never reached the provider keeps the
            ;; result before it: its RESULT reports the failure, but
            ;; agent://root/PATH still reads the last real answer.
            (pcase-let ((`(,kept-outcome ,kept-payload ,kept-verdict)
                         (if (mevedel-agent--turn-dispatched turn)
                             (list outcome payload verdict)
                           (or (mevedel-agent--turn-previous turn)
                               (list outcome payload nil)))))
              (setf (mevedel-agent-handle-outcome handle) kept-outcome
                    (mevedel-agent-handle-payload handle) kept-payload
                    (mevedel-agent-handle-verdict handle) kept-verdict))
            (unless (eq outcome 'completed)
              (setf (mevedel-agent-handle-wake handle) nil))
            (mevedel-agent--cancel-wait tree path)
            (mevedel-agent--save-registry tree)
            ;; The complete payload is on the handle and saved: publish
            ;; the preview.
            (let ((id (condition-case err
                          (mevedel-agent--post
                           session parent "RESULT" (mevedel-agent--preview payload) path
                           `(("outcome" ,(symbol-name outcome))
                             ,@(when verdict `(("verdict" ,verdict)))))
                        (error (display-warning 'mevedel (format "The result of %s is lost: %s"
                                                                 path (error-message-string err)))
                               nil))))
              (mevedel-agent--hand-on-executions session path parent)
              (mevedel-agent--roll-up-sandbox turn)
              (dolist (function mevedel-agent-stop-functions)
                (condition-case err
                    (funcall function path outcome payload)
                  (error (display-warning 'mevedel (format "A stop hook of %s failed: %s"
                                                           path (error-message-string err))))))
              (mevedel-tasks-settle-owner session path (eq outcome 'completed))
              (mevedel-agent--stop-hooks session handle payload)
              (let ((consumed (mevedel-agent--consume turn id outcome payload)))
                (mevedel-agent--refresh handle)
                (when (and id (not consumed)) (mevedel-agent--arrived tree parent id path)))))
        (cl-decf (mevedel-agent--tree-settling tree)))
      (mevedel-agent--offer tree)
      (mevedel-agent--wake-for-late-mail handle)
      t)))

(defun mevedel-agent--wake-for-late-mail (handle)
  "Give the settled HANDLE a turn for mail its last sample missed.
MAIL or a RESULT from another agent that arrived while its turn ran
and is still unread (it came during the final sample, after the last
drain) would otherwise wait for somebody's follow-up."
  (when-let* (((mevedel-agent-handle-wake handle))
              ((eq (mevedel-agent-handle-status handle) 'idle))
              (chat (mevedel-agent-handle-chat handle))
              (store (mevedel-mailbox--store chat))
              (path (mevedel-agent-handle-path handle)))
    (setf (mevedel-agent-handle-wake handle) nil)
    (when (cl-some (lambda (m) (and (member (plist-get m :kind) '("MAIL" "RESULT"))
                                    (not (equal (plist-get m :sender) path))))
                   (mevedel-mailbox-unread store path))
      (mevedel-agent--activate handle mevedel-mailbox-wake-prompt nil))))

(defun mevedel-agent--consume (turn id outcome payload)
  "Hand TURN's settlement, OUTCOME and PAYLOAD, to its workflow consumer.
Return non-nil if it took it.  The consumer (/review, /verify) shows
the result itself, so once it returns the RESULT record ID leaves the
parent's mailbox: no later turn reads it again and it wakes nobody.
A consumer that fails leaves the record for ordinary delivery."
  (when-let* ((on-settle (mevedel-agent--turn-on-settle turn)))
    (let* ((handle (mevedel-agent--turn-handle turn))
           (path (mevedel-agent-handle-path handle)))
      (condition-case err
          (progn
            (funcall on-settle path outcome payload)
            (when id
              (mevedel-core-mailbox-deliver
               (mevedel-session-store-handle
                (mevedel-agent--tree-session (mevedel-agent-handle-tree handle)))
               (list id)))
            t)
        (error (display-warning 'mevedel (format "The result handler of %s failed: %s"
                                                 path (error-message-string err)))
               nil)))))

(defun mevedel-agent--hand-on-executions (session path parent)
  "Move the unread EXECUTION records of PATH in SESSION to PARENT's mailbox.
Completions of the agent's yielded commands that it did not read
before its answer reach its spawn parent, attributed to it; they wake
nobody."
  (when-let* ((store (mevedel-session-store session))
              (left (cl-remove-if-not (lambda (m) (equal (plist-get m :kind) "EXECUTION"))
                                      (mevedel-core-mailbox-unread store path))))
    (dolist (message left)
      (mevedel-agent--post session parent "EXECUTION" (plist-get message :payload) path
                           (plist-get message :attrs)))
    (mevedel-core-mailbox-deliver store (mapcar (lambda (m) (plist-get m :id)) left))))

(defun mevedel-agent--preview (payload)
  "Return PAYLOAD bounded for a RESULT record."
  (if (> (length payload) mevedel-agent-result-preview)
      (concat (substring payload 0 mevedel-agent-result-preview)
              "\n[…the complete result is at agent://root/…; this is its beginning]")
    payload))

;;;; Mail

(defun mevedel-agent--post (session recipient kind payload sender &optional attrs)
  "Append PAYLOAD of KIND from SENDER to RECIPIENT's mailbox in SESSION.
The write is durable and acknowledged: on failure nothing was queued
and the error is signalled.  Return the record's id."
  (let ((store (condition-case err
                   (or (mevedel-session-store session) (mevedel-session-store-handle session))
                 (error (user-error "The session has no mailbox: %s" (error-message-string err))))))
    (mevedel-core-mailbox-post store recipient kind payload sender attrs)))

(defun mevedel-agent--arrived (tree recipient id sender)
  "React to the record ID from SENDER now in RECIPIENT's mailbox in TREE.
A pending WaitAgent of RECIPIENT wakes; else an idle root gets a
background turn, and an idle child (not mailing itself) a turn."
  (cond
   ((gethash recipient (mevedel-agent--tree-waits tree))
    (mevedel-agent--release-wait tree recipient (format "mail from %s" sender)))
   ((equal sender recipient))
   ((equal recipient mevedel-mailbox-root)
    (mevedel-mailbox--note-wake (mevedel-session-id (mevedel-agent--tree-session tree)) (list id)))
   ((when-let* ((handle (mevedel-agent--handle tree recipient))
                ((mevedel-agent-handle-chat handle)))
      (if (eq (mevedel-agent-handle-status handle) 'idle)
          (mevedel-agent--activate handle mevedel-mailbox-wake-prompt nil)
        ;; Read at its next sample, or after its settlement when
        ;; there is none (`mevedel-agent--wake-for-late-mail').
        (setf (mevedel-agent-handle-wake handle) t))))))

(defun mevedel-agent-send (chat target message &optional row)
  "Send MESSAGE from the agent of CHAT to the agent TARGET (SendMessage).
Return `started', `queued' or `waiting' (for a slot).  An idle child
starts a turn with MESSAGE as its task when a slot is free; at
capacity it gets MESSAGE as a MAIL record and a turn waiting for a
slot that reads it.  ROW, the SendMessage call's ID in CHAT, is the
row such a turn leaves its sandbox warning on, as a spawn's Agent
row.  An active one, /root and the sender itself get
a MAIL record.  From a request with Plan authority
the started turn is stamped, the record names the stamp (the turn
reading it is stamped), and a running child must be in a stamped
turn already: Plan cannot direct a turn that may change things."
  (unless (and (stringp message) (not (string-blank-p message)))
    (user-error "The message must be a non-empty string"))
  (let* ((session (mevedel-chat-session chat))
         (tree (mevedel-agent--tree-of session))
         (sender (mevedel-agent--path-of chat))
         (handle (mevedel-agent-resolve-path tree sender target))
         (recipient (if handle (mevedel-agent-handle-path handle) mevedel-mailbox-root))
         (stamp (mevedel-agent--request-stamp chat))
         (plan (and (mevedel-plan-authority-p stamp) (not (equal recipient sender)))))
    (when (and handle (not (equal recipient sender)))
      (mevedel-agent--hydrate handle))
    (when (and plan handle (eq (mevedel-agent-handle-status handle) 'running)
               (eq (mevedel-agent-plan-stamp
                    (mevedel-agent--request-context (mevedel-agent-handle-chat handle)))
                   'none))
      (user-error "%s is running a turn that is not in Plan mode, and this turn is: \
Plan cannot direct it.  Send the message once it is idle (ListAgents shows its status); \
it then starts a Plan turn"
                  recipient))
    (if (and handle (eq (mevedel-agent-handle-status handle) 'idle)
             (not (equal recipient sender))
             (< (mevedel-agent--tree-active tree) mevedel-agent-capacity))
        (let ((task (mevedel-agent--prompt-hooks recipient message)))
          (prog1 (if (mevedel-agent--activate handle task nil chat) 'waiting 'started)
            (mevedel-agent--mark-row handle chat row)))
      (let ((id (mevedel-agent--post session recipient "MAIL" message sender
                                     (and plan `(("plan" ,(symbol-name
                                                           (mevedel-plan-stamp-kind stamp))))))))
        (if (and handle (eq (mevedel-agent-handle-status handle) 'idle)
                 (not (equal recipient sender)))
            ;; At capacity the message is mail, read by the turn that
            ;; waits for a slot.
            (progn (mevedel-agent--activate handle mevedel-mailbox-wake-prompt nil chat)
                   (mevedel-agent--mark-row handle chat row)
                   'waiting)
          (mevedel-agent--arrived tree recipient id sender)
          (if (and handle (eq (mevedel-agent-handle-status handle) 'waiting)) 'waiting 'queued))))))

(defun mevedel-agent--mark-row (handle chat row)
  "Make the call ROW of CHAT the row of HANDLE's turn, when both exist."
  (when-let* ((row)
              (turn (mevedel-agent-handle-turn handle)))
    (setf (mevedel-agent--turn-row turn) row
          (mevedel-agent--turn-row-chat turn) chat)))

;;;; Waiting

(defun mevedel-agent-wait (chat timeout-ms callback)
  "Call CALLBACK with the wake reason once the agent of CHAT has mail.
Unread mail wakes it at once; user input queued in CHAT and
TIMEOUT-MS (clamped to `mevedel-agent-wait-range', nil for the
default) also wake it; a timeout is a success.  Return a function
that cancels the wait."
  (pcase-let* ((`(,low ,high ,default) mevedel-agent-wait-range)
               (ms (min high (max low (or timeout-ms default))))
               (tree (mevedel-agent--tree-of (mevedel-chat-session chat)))
               (path (mevedel-agent--path-of chat))
               (store (mevedel-mailbox--store chat)))
    (if-let* ((unread (and store (mevedel-mailbox-unread store path))))
        (progn (funcall callback (format "mail from %s" (mevedel-mailbox--sender (car unread))))
               #'ignore)
      (mevedel-agent--cancel-wait tree path)
      (let* ((observer nil)
             (entry (list callback
                          (run-at-time (/ ms 1000.0) nil #'mevedel-agent--release-wait tree path
                                       (format "timed out after %d ms" ms))
                          nil)))
        (setq observer (lambda (event _chat &rest _)
                         (when (eq event 'queued)
                           (mevedel-agent--release-wait tree path "the user sent a message"))))
        (setf (nth 2 entry) (lambda () (mevedel-chat-unobserve chat observer)))
        (mevedel-chat-observe chat observer)
        (puthash path entry (mevedel-agent--tree-waits tree))
        (lambda () (mevedel-agent--cancel-wait tree path))))))

(defun mevedel-agent--cancel-wait (tree path)
  "Drop PATH's pending wait in TREE without calling it; return its callback."
  (when-let* ((entry (gethash path (mevedel-agent--tree-waits tree))))
    (remhash path (mevedel-agent--tree-waits tree))
    (when (timerp (nth 1 entry)) (cancel-timer (nth 1 entry)))
    (when (nth 2 entry) (funcall (nth 2 entry)))
    (car entry)))

(defun mevedel-agent--release-wait (tree path reason)
  "Release PATH's pending wait in TREE with REASON, the registration first."
  (when-let* ((callback (mevedel-agent--cancel-wait tree path)))
    (funcall callback reason)))

;;;; Interrupting

(defun mevedel-agent-interrupt (chat target &optional reason)
  "Interrupt the current turn of the agent TARGET, seen from CHAT's agent.
REASON (default \"interrupted\") is recorded.  Never recursive: the
target's children go on.  Return its activity before the request:
`idle', `running' or `waiting'."
  (let* ((tree (mevedel-agent--tree-of (mevedel-chat-session chat)))
         (caller (mevedel-agent--path-of chat))
         (handle (or (mevedel-agent-resolve-path tree caller target)
                     (user-error "/root cannot be interrupted by InterruptAgent")))
         (status (mevedel-agent-handle-status handle))
         (turn (mevedel-agent-handle-turn handle)))
    (when (equal (mevedel-agent-handle-path handle) caller)
      (user-error "An agent cannot interrupt itself"))
    (mevedel-agent--cancel-wait tree (mevedel-agent-handle-path handle))
    (setf (mevedel-agent-handle-wake handle) nil)
    (when (and turn (not (mevedel-agent--turn-settled turn)))
      (setf (mevedel-agent--turn-reason turn) (or reason "interrupted"))
      (when-let* ((child (mevedel-agent-handle-chat handle))
                  ((or (mevedel-chat-compacting child) (mevedel-chat-hooking child))))
        ;; Its request is still held back: it never went out, so the
        ;; previous result stays.
        (setf (mevedel-agent--turn-dispatched turn) nil))
      (when (mevedel-agent--turn-started turn)
        (mevedel-chat-abort (mevedel-agent-handle-chat handle)))
      ;; The abort settled it through the chat, unless the turn had not
      ;; started or its request was already gone: the gate decides.
      (mevedel-agent--settle turn 'interrupted (mevedel-agent--interrupted-payload turn))
      (mevedel-agent--stop-executions handle))
    status))

(defun mevedel-agent--refuse-stale-call (context)
  "Refuse the call with CONTEXT of a child agent whose turn has ended.
A PreToolUse member.  Work queued by an interrupted turn (a call its
last sample made that the pipeline had not admitted yet) must not
start after the turn is terminal."
  (when-let* ((handle (mevedel-agent--caller-handle context))
              ((not (eq (mevedel-agent-handle-status handle) 'preparing))))
    (let ((turn (mevedel-agent-handle-turn handle)))
      (when (or (null turn) (mevedel-agent--turn-settled turn))
        (list :deny (format "The turn of %s has ended; this call was not run"
                            (mevedel-agent-handle-path handle)))))))

(add-hook 'mevedel-pipeline-pre-tool-use-functions #'mevedel-agent--refuse-stale-call)

;;;; Reminding a caller of its children

(defvar-local mevedel-agent--children-told nil
  "The child paths the running turn of this data buffer's agent was told of.")

(defun mevedel-agent--children-line (handle)
  "Return HANDLE as one line of a children reminder: path, role, state."
  (format "- %s (%s): %s" (mevedel-agent-handle-path handle)
          (or (mevedel-agent-handle-role-name handle) "default")
          (let ((status (mevedel-agent-handle-status handle))
                (outcome (mevedel-agent-handle-outcome handle)))
            (if (and (eq status 'idle) outcome)
                (format "idle, its last turn %s" outcome)
              (symbol-name status)))))

(defun mevedel-agent--direct-children (chat)
  "Return the published handles whose spawn parent is CHAT's agent, by path."
  (when-let* ((session (mevedel-chat-session chat))
              ((mevedel-session-p session))
              (tree (gethash (mevedel-session-id session) mevedel-agent--trees)))
    (let ((path (mevedel-agent--path-of chat)))
      (cl-remove-if-not (lambda (handle) (equal (mevedel-agent-handle-parent handle) path))
                        (mevedel-agent--handles tree)))))

(defun mevedel-agent--children-reminder (chat)
  "Remind CHAT's agent of its direct children before a turn's first sample.
A `mevedel-chat-message-functions' member: after a compaction or a
resume the conversation may no longer show which agents it started."
  (let ((children (mevedel-agent--direct-children chat)))
    (with-current-buffer (mevedel-chat-data-buffer chat)
      (setq mevedel-agent--children-told (mapcar #'mevedel-agent-handle-path children)))
    (when children
      (list (mevedel-agent--children-block
             chat "Your child agents (ListAgents lists the whole tree):" children)))))

(defun mevedel-agent--children-block (chat heading children)
  "Return the reminder block of CHAT's agent: HEADING, then CHILDREN's lines.
An <agent-children> element, so that a transcript reader takes it for
harness mail, not for the user's words."
  (concat "<agent-children caller=\"" (mevedel-agent--path-of chat) "\">\n" heading "\n"
          (mapconcat #'mevedel-agent--children-line children "\n")
          "\n</agent-children>"))

(defun mevedel-agent--new-children-reminder (chat)
  "Name, once, the children CHAT's running turn started since it was told.
A `mevedel-chat-continuation-mail-functions' member."
  (let* ((buffer (mevedel-chat-data-buffer chat))
         (told (buffer-local-value 'mevedel-agent--children-told buffer))
         (turn (mevedel-chat-turn chat))
         (new (and turn
                   (cl-remove-if-not
                    (lambda (handle) (and (eq (mevedel-agent-handle-spawn-turn handle) turn)
                                          (not (member (mevedel-agent-handle-path handle) told))))
                    (mevedel-agent--direct-children chat)))))
    (when new
      (with-current-buffer buffer
        (setq mevedel-agent--children-told
              (append told (mapcar #'mevedel-agent-handle-path new))))
      (list (mevedel-agent--children-block chat "Child agents you started in this turn:" new)))))

(add-hook 'mevedel-chat-message-functions #'mevedel-agent--children-reminder t)
(add-hook 'mevedel-chat-continuation-mail-functions #'mevedel-agent--new-children-reminder t)

;;;; Turn limits

(defun mevedel-agent--sample-notices (chat)
  "Count the next sample of CHAT's agent turn; return its limit notices.
A `mevedel-chat-continuation-mail-functions' member: at 80% of
`:max-turns' the agent is told to wrap up, at the limit to answer now;
past it the turn stops at this tool boundary."
  (when-let* ((path (mevedel-chat-agent chat))
              (tree (gethash (mevedel-session-id (mevedel-chat-session chat)) mevedel-agent--trees))
              (handle (gethash path (mevedel-agent--tree-agents tree)))
              (turn (mevedel-agent-handle-turn handle))
              (limit (plist-get (mevedel-agent-handle-config handle) :max-turns)))
    (let ((n (cl-incf (mevedel-agent--turn-samples turn))))
      (cond ((> n limit)
             (setf (mevedel-agent--turn-reason turn) 'max-turns)
             (run-at-time 0 nil #'mevedel-chat-abort chat)
             nil)
            ((= n limit)
             (list (format "[Turn limit: this is your final sample (%d of %d). Answer now, \
without calling tools.]" n limit)))
            ((= n (ceiling (* 0.8 limit)))
             (list (format "[Turn limit: %d of %d samples used. Wrap up soon.]" n limit)))))))

(add-hook 'mevedel-chat-continuation-mail-functions #'mevedel-agent--sample-notices)

;;;; Saving and restoring the registry

(defun mevedel-agent--give-store (handle child)
  "Give the chat CHILD of HANDLE the store its conversation is saved in.
It lives under the session's agents/ directory and keeps the
conversation from its start; a session without durable storage saves
no conversation."
  (let ((session (mevedel-chat-session child)))
    (when (and mevedel-save-sessions (mevedel-session-durable-p session))
      (let* ((relative (concat "agents/" (replace-regexp-in-string
                                          "/" "." (substring (mevedel-agent-handle-path handle) 1))
                               ".sqlite"))
             (file (expand-file-name relative (mevedel-session-ensure-storage session))))
        (make-directory (file-name-directory file) t)
        (setf (mevedel-chat-store child) (mevedel-core-store-open file)
              (mevedel-agent-handle-transcript handle) relative)
        (mevedel-transcript-track (mevedel-chat-data-buffer child) (mevedel-chat-store child))))))

(defun mevedel-agent--tool-named (name)
  "Return the gptel tool of the registered tool NAME, or nil."
  (when-let* ((tool (cl-find name (mevedel-tool-all) :key #'mevedel-tool-name :test #'equal)))
    (mevedel-tool-gptel-tool tool)))

(defun mevedel-agent--frozen-backend (name handle root)
  "Return the gptel backend NAME the restored HANDLE was frozen with.
A child saved without one (an ACP agent serves it) takes the root
chat ROOT's.  A named backend that is no longer defined is a
`user-error' naming it: serving the child with another model would
silently break its frozen identity."
  (cond ((gptel-backend-p name) name)
        ((null name) (mevedel-chat-backend-effective root))
        ((ignore-errors (gptel-get-backend name)))
        (t (user-error "The backend %s that serves %s is not defined; define it to continue \
this agent" name (mevedel-agent-handle-path handle)))))

(defun mevedel-agent--hydrate (handle)
  "Load the saved conversation of the restored HANDLE into a chat; return it.
Only this agent is loaded, with its frozen configuration.  Signal
`user-error' when its conversation cannot be loaded."
  (or (mevedel-agent-handle-chat handle)
      (let* ((tree (mevedel-agent-handle-tree handle))
             (session (mevedel-agent--tree-session tree))
             (root (or (mevedel-mailbox--chat-of (mevedel-session-id session))
                       (user-error "The session of %s is not open" (mevedel-agent-handle-path handle))))
             (relative (mevedel-agent-handle-transcript handle))
             (file (and relative (expand-file-name relative (mevedel-session-directory session))))
             (config (mevedel-agent-handle-config handle))
             (backend (mevedel-agent--frozen-backend (plist-get config :backend) handle root)))
        (unless (and file (file-exists-p file))
          (user-error "The conversation of %s was not saved" (mevedel-agent-handle-path handle)))
        (let ((child (mevedel-chat-make-child root (mevedel-agent-handle-path handle)
                                              (plist-get config :directory))))
          (setf (mevedel-chat-store child) (mevedel-core-store-open file))
          ;; A turn cut by a crash is settled as the root's would be.
          (mevedel-resume-chat child)
          (setf (mevedel-chat-backend child) backend
                (mevedel-chat-model child) (or (plist-get config :model)
                                               (mevedel-chat-model-effective root))
                (mevedel-chat-placement child) (plist-get config :provider)
                (mevedel-chat-frozen-system child) (plist-get config :system)
                (mevedel-chat-frozen-tools child)
                (delq nil (mapcar #'mevedel-agent--tool-named (plist-get config :tools)))
                (mevedel-agent-handle-parent-chat handle) root
                (mevedel-agent-handle-chat handle) child)
          (setf (mevedel-agent-handle-config handle)
                (plist-put (plist-put (copy-sequence config) :backend (mevedel-chat-backend child))
                           :tools (mevedel-chat-frozen-tools child)))
          (mevedel-agent--freeze-specialists child (plist-get config :specialists))
          ;; Its context updates follow its own selection; what its
          ;; frozen system text said is sent once more.
          (let ((role (mevedel-agent-handle-role handle)))
            (when (plist-member role :system-components)
              (mevedel-prompt-confine child (plist-get role :system-components))))
          (with-current-buffer (mevedel-chat-data-buffer child)
            (setq-local mevedel-session-agent (mevedel-agent-handle-path handle)
                        mevedel-tool-offered (mapcar #'gptel-tool-name
                                                     (mevedel-chat-frozen-tools child)))
            (when (boundp 'gptel-reasoning-effort)
              (set (make-local-variable 'gptel-reasoning-effort) (plist-get config :effort))))
          (mevedel-chat-observe child (lambda (event _chat &rest records)
                                        (mevedel-agent--child-event handle event records)))
          child))))

(defconst mevedel-agent-record-keys
  '(:path :parent :role :role-flags :config :status :outcome :payload :verdict
          :tool-calls :transcript :hook-context :served)
  "Every key of a saved registry record, exactly once each.
:hook-context is the context its hooks added that no request of it
carried yet (a blocked follow-up's, say): its next accepted task
reads it, after a resume too.  :served is the model that served its
latest turn when that was not the frozen one.")

(defconst mevedel-agent--role-flags '(:verdict)
  "The facts of a role the runtime reads after the spawn.
They are saved with the agent, so a resumed verifier's reports are
still parsed.  Its prompt component selection is saved beside them
\(:system-components), so a resumed child's context updates follow
it.")

(defun mevedel-agent--components (handle)
  "Return (COMPONENTS) of HANDLE's prompt component selection, or nil if unknown."
  (let ((chat (mevedel-agent-handle-chat handle))
        (role (mevedel-agent-handle-role handle)))
    (cond ((and chat (buffer-live-p (mevedel-chat-data-buffer chat)))
           (buffer-local-value 'mevedel-prompt-own-components (mevedel-chat-data-buffer chat)))
          ((plist-member role :system-components)
           (list (plist-get role :system-components))))))

(defun mevedel-agent--record (handle)
  "Return HANDLE as a registry record of printable data.
An agent restored but not used yet still has the saved names."
  (let ((config (copy-sequence (mevedel-agent-handle-config handle))))
    (setq config (plist-put config :backend (let ((b (plist-get config :backend)))
                                              (if (gptel-backend-p b) (gptel-backend-name b) b))))
    (setq config (plist-put config :tools (mapcar (lambda (tool)
                                                    (if (gptel-tool-p tool) (gptel-tool-name tool) tool))
                                                  (plist-get config :tools))))
    (list :path (mevedel-agent-handle-path handle) :parent (mevedel-agent-handle-parent handle)
          :role (mevedel-agent-handle-role-name handle)
          :role-flags (append
                       (cl-loop with role = (mevedel-agent-handle-role handle)
                                for flag in mevedel-agent--role-flags
                                append (list flag (and (plist-get role flag) t)))
                       (when-let* ((components (mevedel-agent--components handle)))
                         (list :system-components (car components))))
          :config config
          :status (mevedel-agent-handle-status handle) :outcome (mevedel-agent-handle-outcome handle)
          :payload (mevedel-agent-handle-payload handle)
          :verdict (mevedel-agent-handle-verdict handle)
          :tool-calls (mevedel-agent-handle-tool-calls handle)
          :transcript (mevedel-agent-handle-transcript handle)
          :hook-context (mevedel-hooks-context
                         (mevedel-agent--tree-session (mevedel-agent-handle-tree handle))
                         (mevedel-agent-handle-path handle))
          :served (mevedel-agent-handle-served handle))))

(defun mevedel-agent--save-registry (tree)
  "Save TREE's published agents in its session's store and wait for the write.
Does nothing for a session without durable storage."
  (let ((session (mevedel-agent--tree-session tree)))
    (when (and mevedel-save-sessions (mevedel-session-durable-p session))
      (condition-case err
          (let ((store (mevedel-session-store-handle session)))
            (mevedel-core-store-info-set
             store `(("agents" . ,(let ((print-escape-newlines t) (print-length nil)
                                        (print-level nil))
                                    (prin1-to-string
                                     (mapcar #'mevedel-agent--record
                                             (mevedel-agent--handles tree)))))))
            (mevedel-core-store-flush store 2))
        (error (display-warning 'mevedel (format "Cannot save the agents: %s"
                                                 (error-message-string err))))))))

(defun mevedel-agent--upgrade-record (record)
  "Return the saved RECORD with the configuration keys added since it was saved.
An agent saved before specialists were frozen (ADR 0022) has no
:specialists; it keeps reaching every specialist, as it did (t).  One
saved before children could run on ACP agents has no :provider: gptel
serves it (nil).  One saved when a spawn's Plan stamp bound every
later turn has a :plan-stamp, which goes: each turn takes its own.
One saved before hook context was kept has none waiting, and one saved
before the serving model was kept was served by its frozen one."
  (let ((config (plist-get record :config)))
    (if (not (and (proper-list-p record) (proper-list-p config)))
        record
      (when (plist-member record :plan-stamp)
        (setq record (cl-loop for (key value) on record by #'cddr
                              unless (eq key :plan-stamp) append (list key value))))
      (unless (plist-member record :hook-context)
        (setq record (append record (list :hook-context nil))))
      (unless (plist-member record :served)
        (setq record (append record (list :served nil))))
      (unless (plist-member config :specialists)
        (setq config (append config (list :specialists t))))
      (unless (plist-member config :provider)
        (setq config (append config (list :provider nil))))
      (if (eq config (plist-get record :config))
          record
        (plist-put (copy-sequence record) :config config)))))

(defun mevedel-agent-check-record (record)
  "Return RECORD, a saved registry record, or signal `error'.
Unknown, duplicate or missing keys, a malformed path and a
configuration that is not exactly the frozen schema are refused."
  (unless (and (proper-list-p record) (cl-evenp (length record)))
    (error "An agent record is a plist, not %S" record))
  (let ((keys (cl-loop for (key _) on record by #'cddr collect key)))
    (unless (and (= (length keys) (length mevedel-agent-record-keys))
                 (null (cl-set-exclusive-or keys mevedel-agent-record-keys)))
      (error "An agent record has the keys %S, not %S" keys mevedel-agent-record-keys)))
  (unless (and (stringp (plist-get record :path))
               (string-match-p mevedel-agent--path-regexp (plist-get record :path)))
    (error "An agent record has the path %S" (plist-get record :path)))
  (mevedel-agent-check-config (plist-get record :config))
  record)

(defun mevedel-agent--restore (chat)
  "Bring back the retained agents saved with the session of the root CHAT.
The records are checked; an idle agent's conversation is not loaded
\(the first use of one does, `mevedel-agent--hydrate').  An agent that
was active when Emacs stopped is loaded, its cut turn settled, and it
comes back interrupted: its spawn parent gets that RESULT with the
partial work (it wakes nobody)."
  (when-let* (((not (mevedel-chat-agent chat)))
              (session (mevedel-chat-session chat))
              ((mevedel-session-durable-p session))
              (store (mevedel-session-store session))
              (text (cdr (assoc "agents" (mevedel-core-store-info-get store))))
              ((not (string-empty-p text))))
    (let ((tree (mevedel-agent--tree-of session))
          (interrupted nil))
      (condition-case err
          (dolist (record (car (read-from-string text)))
            (setq record (mevedel-agent-check-record (mevedel-agent--upgrade-record record)))
            (let* ((active (memq (plist-get record :status) '(running waiting preparing)))
                   (handle (mevedel-agent--make-handle
                            :path (plist-get record :path) :parent (plist-get record :parent)
                            :role-name (plist-get record :role) :config (plist-get record :config)
                            :role (plist-get record :role-flags)
                            :status 'idle :tree tree
                            :outcome (if active 'interrupted (plist-get record :outcome))
                            :payload (if active
                                         "Interrupted: Emacs stopped before this turn finished."
                                       (plist-get record :payload))
                            :verdict (and (not active) (plist-get record :verdict))
                            :tool-calls (plist-get record :tool-calls)
                            :transcript (plist-get record :transcript)
                            :served (plist-get record :served))))
              (puthash (mevedel-agent-handle-path handle) handle (mevedel-agent--tree-agents tree))
              (when-let* ((blocks (plist-get record :hook-context)))
                (mevedel-hooks-restore-context session blocks (mevedel-agent-handle-path handle)))
              (when active (push handle interrupted))))
        (error (display-warning 'mevedel (format "The saved agents of this session are unusable: %s"
                                                 (error-message-string err)))
               (clrhash (mevedel-agent--tree-agents tree))
               (setq interrupted nil)))
      (when interrupted
        ;; As the root's cut turn, a child's is loaded now, so that its
        ;; RESULT carries the work it had done.
        (dolist (handle interrupted)
          (setf (mevedel-agent-handle-payload handle)
                (concat (mevedel-agent-handle-payload handle)
                        (mevedel-agent--partial-note (mevedel-agent--recovered-work handle)))))
        (mevedel-agent--save-registry tree)
        (dolist (handle (nreverse interrupted))
          (mevedel-agent--post session (mevedel-agent-handle-parent handle) "RESULT"
                               (mevedel-agent-handle-payload handle)
                               (mevedel-agent-handle-path handle)
                               '(("outcome" "interrupted"))))))))

(add-hook 'mevedel-resume-functions #'mevedel-agent--restore)

;;;; Status and views

(defun mevedel-agent--roster (session)
  "Return the retained agents of SESSION for history:// and agent://."
  (when-let* ((tree (gethash (mevedel-session-id session) mevedel-agent--trees)))
    (mapcar (lambda (handle)
              (append (mevedel-agent--handle-data handle)
                      (list :payload (mevedel-agent-handle-payload handle)
                            :buffer (lambda ()
                                      (mevedel-chat-data-buffer
                                       (mevedel-agent--hydrate handle))))))
            (mevedel-agent--handles tree))))

(add-hook 'mevedel-history-agents-functions #'mevedel-agent--roster)

(defun mevedel-agent-status (chat path)
  "Return the handle data of the agent PATH in CHAT's session, or nil.
A plist (:path :role :model :effort :status :tool-calls :outcome
:verdict)."
  (when-let* ((tree (gethash (mevedel-session-id (mevedel-chat-session chat))
                             mevedel-agent--trees))
              (handle (mevedel-agent--handle tree path)))
    (mevedel-agent--handle-data handle)))

(defun mevedel-agent--model (config)
  "Return the model serving an agent of frozen CONFIG, as BACKEND:MODEL.
An ACP agent's is PROVIDER:MODEL (or PROVIDER when it names none).
This is the child's own model, never its delegator's."
  (let ((provider (plist-get config :provider))
        (backend (plist-get config :backend))
        (model (plist-get config :model)))
    (if provider
        (if (cdr provider) (format "%s:%s" (car provider) (cdr provider)) (format "%s" (car provider)))
      (format "%s:%s" (if (gptel-backend-p backend) (gptel-backend-name backend) backend)
              model))))

(defun mevedel-agent--handle-data (handle)
  "Return the status plist of HANDLE.
:model and :effort name what serves it (nil effort: the provider's
default); :served, when non-nil, the model that actually served its
latest turn instead (`mevedel-agent-note-served')."
  (list :path (mevedel-agent-handle-path handle)
        :role (or (mevedel-agent-handle-role-name handle) "default")
        :model (mevedel-agent--model (mevedel-agent-handle-config handle))
        :served (mevedel-agent-handle-served handle)
        :effort (plist-get (mevedel-agent-handle-config handle) :effort)
        :status (mevedel-agent-handle-status handle)
        :tool-calls (mevedel-agent-handle-tool-calls handle)
        :outcome (mevedel-agent-handle-outcome handle)
        :verdict (mevedel-agent-handle-verdict handle)))

(defun mevedel-agent-list (chat)
  "Return the status plists of the retained agents of CHAT's session, by path."
  (mapcar #'mevedel-agent--handle-data
          (mevedel-agent--handles (mevedel-agent--tree-of (mevedel-chat-session chat)))))

(defun mevedel-agent-active (chat)
  "Return the running and waiting agents of CHAT's session, by path.
Each is a plist (:path :parent :role :status :tool-calls :elapsed-ms),
the time since the turn started, or since it began waiting."
  (when-let* ((tree (gethash (mevedel-session-id (mevedel-chat-session chat))
                             mevedel-agent--trees)))
    (cl-loop for handle in (mevedel-agent--handles tree)
             for turn = (mevedel-agent-handle-turn handle)
             when (and turn (memq (mevedel-agent-handle-status handle) '(running waiting)))
             collect (append (mevedel-agent--handle-data handle)
                             (list :parent (mevedel-agent-handle-parent handle)
                                   :elapsed-ms (round (* 1000 (- (float-time)
                                                                 (mevedel-agent--turn-since
                                                                  turn)))))))))

(defun mevedel-agent-result (chat path)
  "Return (OUTCOME . PAYLOAD) of PATH's latest settled turn in CHAT's session.
Signal `user-error' while it is active or before it has settled."
  (let* ((tree (mevedel-agent--tree-of (mevedel-chat-session chat)))
         (handle (or (mevedel-agent--handle tree path)
                     (user-error "No retained agent at %s" path))))
    (unless (and (eq (mevedel-agent-handle-status handle) 'idle)
                 (mevedel-agent-handle-outcome handle))
      (user-error "NOT READY: %s is %s; its result is readable once it settles"
                  path (mevedel-agent-handle-status handle)))
    (cons (mevedel-agent-handle-outcome handle) (mevedel-agent-handle-payload handle))))

(defun mevedel-agent-conversation (chat path)
  "Return the data buffer of the agent PATH in CHAT's session, or nil.
A restored agent's conversation is loaded now."
  (when-let* ((tree (gethash (mevedel-session-id (mevedel-chat-session chat)) mevedel-agent--trees))
              (handle (mevedel-agent--handle tree path)))
    (mevedel-chat-data-buffer (mevedel-agent--hydrate handle))))

(defun mevedel-agent--refresh (handle)
  "Update HANDLE's row in its spawn parent's transcript; tell its followers."
  (run-hook-with-args 'mevedel-agent-change-functions
                      (mevedel-session-id (mevedel-agent--tree-session
                                           (mevedel-agent-handle-tree handle))))
  (when-let* ((id (mevedel-agent-handle-spawn-id handle))
              (parent (mevedel-agent-handle-parent-chat handle))
              ((buffer-live-p (mevedel-chat-data-buffer parent))))
    (let ((data (mevedel-agent--handle-data handle)))
      (ignore-errors
        (mevedel-chat-update-render-data
         parent id (lambda (render-data)
                     (let ((new (copy-sequence render-data)))
                       (dolist (key '(:status :tool-calls :outcome :verdict :served) new)
                         (setq new (plist-put new key (plist-get data key))))))
         'agent-handle)))))

(provide 'mevedel-agent)
;;; mevedel-agent.el ends here
