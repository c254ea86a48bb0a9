;;; mevedel-acp.el --- ACP agents (Claude Code, Codex, Gemini) as providers  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A chat's turns answered by an Agent Client Protocol agent instead of
;; gptel: `mevedel-provider' names one of `mevedel-acp-agents' (built
;; in: `claude-code', `codex', `gemini'), and this file registers on
;; `mevedel-chat-provider-functions' to drive the chat's turns with it.
;; The protocol and the agent's processes are the native module's
;; (crates/mevedel-core/src/acp/); this file decides.
;;
;; - One agent process per chat (a root's, or a child agent's placed
;;   on an agent at its spawn: `mevedel-chat-placement'), started at
;;   its first turn with the workspace as its directory, and one native
;;   session, opened then (Claude Code's file and shell tools switched
;;   off unless `mevedel-acp-keep-agent-tools') and recorded in the
;;   chat's metadata ("acp-agent", "acp-session", the agent's name and
;;   version, its model) before the prompt goes out.
;; - A chat that comes back (resumed, a retained child's follow-up, a
;;   new agent process) reopens its saved native session with
;;   `session/load'; the history the agent replays is not written
;;   again.  When it cannot, the native history is uncertain: the turn
;;   fails saying so until `mevedel-claude-code-recover-history' has the
;;   next turn start a new native session seeded with mevedel's
;;   transcript (as a chat with turns of gptel's or another agent's is).
;; - The view's model switcher and /model offer the agents on PATH and
;;   the models their session reports; choosing one places the chat.
;; - A turn: the prompt (its mail, then the user's text) goes to
;;   `session/prompt'.  The agent's text is the assistant's answer in
;;   the data buffer, streamed to observers as gptel's is; its tool
;;   calls are live rows while they run and settled calls (name as the
;;   agent called it, raw input as arguments) once they end; its
;;   thoughts and plans are notices.  So the view, the saved transcript
;;   and `bin/mevedel --json' show them as they show gptel's turns.
;; - `session/request_permission' is answered by the session's
;;   permission mode: `full-auto' allows, an "always this session"
;;   answer or an allow rule naming the tool allows, a deny rule
;;   refuses, `edits' allows read, edit and search calls, and otherwise
;;   a view's card asks; where nobody can be asked (headless), the
;;   answer is `reject_once', so the model is told and the turn goes on.
;; - `fs/read_text_file' reads a visiting buffer's text, unsaved
;;   changes included; `fs/write_text_file' writes through ApplyPatch
;;   (the pipeline: permission, checkpoint, a visiting buffer updated;
;;   a buffer with unsaved changes refuses it).
;; - mevedel's own tools, those a root gptel turn is offered (the
;;   native ones, ToolSearch and ToolCall reaching the specialists), are
;;   served to the agent's session by an MCP server of the module on
;;   127.0.0.1 behind a secret, passed in `session/new' when the agent
;;   takes HTTP servers: Claude Code calls them `mcp__mevedel__Read' and
;;   so on.  Each call runs through `mevedel-pipeline-run-tool-outcome'
;;   as a provider call (validation, hooks, permission, result limits,
;;   ApplyPatch's review and checkpoints, Bash's sandbox); the agent's
;;   own permission request for them is allowed, since the pipeline
;;   asks.  Its row is the agent's tool call update, named as the agent
;;   called it.  The server stops with the session or the agent.
;; - Aborting the turn sends `session/cancel'; the agent then ends it.
;;   An agent's error ends the turn with its message word for word.
;;   Either, once the prompt went out, leaves the native history
;;   uncertain, as a failed `session/load' does.
;;   Closing the session stops the agent; Emacs exiting stops them all
;;   (mevedel-core.el), every process of each.
;;
;; - The agent's own tool calls run mevedel's PreToolUse hooks when
;;   announced (its permission request waits for them: a block answers
;;   `reject_once'; a call it runs unasked cannot be stopped, so a block
;;   is only noted on its result) and PostToolUse hooks once settled,
;;   whose feedback is a notice; mevedel's own tools run theirs in the
;;   pipeline.
;; - `terminal/create' runs Bash's PreToolUse hooks, is judged as a
;;   Bash call and run as a managed execution in the sandbox (the
;;   module serves the other terminal methods), and its end runs the
;;   PostToolUse hooks; the agent's slash commands are composer commands sent as
;;   prompt text; the usage it reports for a turn is recorded through
;;   mevedel-usage.el.
;;
;; Not here: the child agents' lifecycle (completion, interruption,
;; capacity, RESULT: mevedel-agent.el), which an agent's chat turn only
;; serves.
;;
;; Manual: docs/providers.md (mevedel://providers.md).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'json)
(require 'mevedel-core)
(require 'mevedel-chat)
(require 'mevedel-agent)
(require 'mevedel-history)
(require 'mevedel-resume)
(require 'mevedel-goal)
(require 'mevedel-gptel)
(require 'mevedel-hooks)
(require 'mevedel-permissions)
(require 'mevedel-pipeline)
(require 'mevedel-save)
(require 'mevedel-session)
(require 'mevedel-tool-exec)
(require 'mevedel-tool-media)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-repair)
(require 'mevedel-usage)

;;; Options

(defgroup mevedel-acp nil
  "ACP agents as providers."
  :group 'mevedel
  :prefix "mevedel-acp-")

(defconst mevedel-acp--claude-tools
  '("Read" "Write" "Edit" "MultiEdit" "NotebookEdit" "Bash" "BashOutput" "KillShell")
  "Claude Code's tools that touch files or run commands unconfined.")

(defconst mevedel-acp--server-name "mevedel"
  "The name of mevedel's MCP server for an agent.
The agent names its tools mcp__mevedel__NAME.")

(defcustom mevedel-acp-agents
  `((claude-code :command "claude-agent-acp"
                 :package "@zed-industries/claude-agent-acp"
                 :disallowed-tools ,mevedel-acp--claude-tools)
    (codex :command "codex-acp" :package "@zed-industries/codex-acp")
    (gemini :command "gemini" :args ("--experimental-acp") :package "@google/gemini-cli"))
  "ACP agents a session may use, by name: (NAME . PLIST).
PLIST has :command (looked up in the variable `exec-path'), :args,
:env (a list of (VAR . VALUE) set on top of Emacs's environment),
:package (the npm package that installs the command, named when it
is missing) and :disallowed-tools (the agent's own tools to switch
off; Claude Code only)."
  :type '(alist :key-type symbol :value-type plist))

(defcustom mevedel-provider 'gptel
  "What answers a session's turns: `gptel', or an agent of `mevedel-acp-agents'."
  :type '(choice (const gptel) symbol))

(defcustom mevedel-acp-keep-agent-tools nil
  "Non-nil keeps the agent's own file and shell tools.
They then read, write and run commands directly, outside mevedel's
sandbox, buffers and checkpoints; mevedel only answers the agent's
permission requests for them."
  :type 'boolean)

(defcustom mevedel-acp-startup-timeout 60
  "Seconds an agent may take to start and to open a session."
  :type 'number)

(cl-defstruct (mevedel-acp--agent (:constructor mevedel-acp--make-agent) (:copier nil))
  "One agent process driving one root chat."
  name key chat handle
  ;; `starting', `ready' or `dead'; thunks waiting for `ready'.
  (state 'starting) waiting
  session-id
  ;; From `initialize': whether it offers `session/load', and its name
  ;; and version.  While `session/load' replays the agent's history,
  ;; `loading' is non-nil and its updates are not the turn's.  Its
  ;; session's models, (ID . NAME), and the current one.  The text
  ;; seeding the next prompt of a new native conversation, if any.
  load-session about loading models model seed
  ;; Whether the agent takes MCP servers over HTTP, the server of
  ;; mevedel's tools for its session, and that server's calls in
  ;; flight (id -> cancellation thunk).
  mcp-http server served
  ;; The agent's slash commands, (NAME DESCRIPTION HINT), as it last
  ;; listed them.
  commands
  ;; The chat turn being driven, whether it was cancelled, its calls
  ;; (id -> record), the thought being streamed, the refused call ids
  ;; with their reasons, and what withdraws its open cards.
  turn cancelled calls thought refused cards
  ;; The PreToolUse hooks of the turn's calls, by call id: (waiting
  ;; . CALLBACKS) while they run, (done . VERDICT) after.
  hooked)

(defvar mevedel-acp--agents (make-hash-table :test #'equal)
  "Agents by the key their events carry.")

(defvar mevedel-acp--by-chat (make-hash-table :test #'eq :weakness 'key)
  "The agent of each chat.")

(defvar mevedel-view--chat)

;;; Commands

(defun mevedel-acp-agent-config (name)
  "Return the plist of agent NAME (a symbol or string), or nil."
  (cdr (assq (if (stringp name) (intern name) name) mevedel-acp-agents)))

(defun mevedel-acp-chat-provider (chat)
  "Return the name of the ACP agent that answers CHAT, or nil for gptel.
That is CHAT's placement (chosen in the view, kept from its first ACP
turn, resumed, or frozen at a child's spawn), else, for a root chat,
`mevedel-provider'."
  (let ((placed (car (mevedel-chat-placement chat))))
    (cond (placed (unless (eq placed 'gptel) placed))
          ((mevedel-chat-agent chat) nil)
          ((and mevedel-provider (not (eq mevedel-provider 'gptel))) mevedel-provider))))

;;; Plumbing

(defun mevedel-acp--command (name config)
  "Return the program of agent NAME with CONFIG, found in variable `exec-path'.
Signal a `user-error' naming its npm package when it is missing."
  (let ((command (plist-get config :command)))
    (or (and command (executable-find command))
        (user-error "The %s agent needs `%s' on PATH%s" name command
                    (if-let* ((package (plist-get config :package)))
                        (format "; install it with: npm install -g %s" package)
                      "")))))

(defun mevedel-acp--provider (chat)
  "Return the function that sends each turn of CHAT to its ACP agent, or nil.
A `mevedel-chat-provider-functions' member.  A missing agent program
is a `user-error' here, before the turn changes anything."
  (when-let* ((name (mevedel-acp-chat-provider chat)))
    (let ((config (or (mevedel-acp-agent-config name)
                      (user-error "No agent %s in `mevedel-acp-agents'" name))))
      (unless (gethash chat mevedel-acp--by-chat)
        (mevedel-acp--command name config))
      (lambda (chat texts) (mevedel-acp--send chat name texts)))))

(add-hook 'mevedel-chat-provider-functions #'mevedel-acp--provider)

(defun mevedel-acp--log-file (name)
  "Return the log of agent NAME's stderr."
  (expand-file-name (format "mevedel/acp/%s.log" name) user-emacs-directory))

(defun mevedel-acp--start (chat name)
  "Start agent NAME for CHAT; return its state."
  (let* ((config (mevedel-acp-agent-config name))
         (key (format "%s-%x" name (random most-positive-fixnum)))
         (agent (mevedel-acp--make-agent :name name :key key :chat chat))
         (ms (round (* 1000 mevedel-acp-startup-timeout))))
    (puthash key agent mevedel-acp--agents)
    (puthash chat agent mevedel-acp--by-chat)
    ;; The chat keeps this agent, whatever `mevedel-provider' says later.
    (unless (eq (car (mevedel-chat-placement chat)) name)
      (setf (mevedel-chat-placement chat) (list name)))
    (setf (mevedel-acp--agent-handle agent)
          (mevedel-core-acp-start
           (list :name (format "%s" name)
                 :command (mevedel-acp--command name config)
                 :args (plist-get config :args)
                 :env (plist-get config :env)
                 :cwd (expand-file-name (mevedel-chat-root chat))
                 :key key
                 :stderr-log (mevedel-acp--log-file name)
                 :startup-timeout-ms ms :request-timeout-ms ms)
           (lambda (status value)
             (let ((waiting (nreverse (mevedel-acp--agent-waiting agent))))
               (setf (mevedel-acp--agent-waiting agent) nil
                     (mevedel-acp--agent-state agent) (if (eq status 'ok) 'ready 'dead)
                     (mevedel-acp--agent-mcp-http agent) (and (eq status 'ok)
                                                              (plist-get value :mcp-http))
                     (mevedel-acp--agent-load-session agent) (and (eq status 'ok)
                                                                  (plist-get value :load-session))
                     (mevedel-acp--agent-about agent)
                     (and (eq status 'ok)
                          (string-join (delq nil (list (plist-get value :name)
                                                       (plist-get value :version)))
                                       " ")))
               (dolist (thunk waiting)
                 (funcall thunk (unless (eq status 'ok) (cadr value))))))))
    agent))

(defun mevedel-acp--when-ready (agent function)
  "Call FUNCTION with nil once AGENT is ready, or with the error that stopped it."
  (pcase (mevedel-acp--agent-state agent)
    ('ready (funcall function nil))
    ('starting (push function (mevedel-acp--agent-waiting agent)))
    (_ (funcall function (format "%s is not running" (mevedel-acp--agent-name agent))))))

(defun mevedel-acp--with-session (agent function)
  "Call FUNCTION with nil once AGENT has a session, or with what failed."
  (mevedel-acp--when-ready
   agent
   (lambda (failure)
     (cond
      (failure (funcall function failure))
      ((mevedel-acp--agent-session-id agent) (funcall function nil))
      (t (mevedel-acp--open-session agent function))))))

(defun mevedel-acp--session-args (agent)
  "Return the `session/new' and `session/load' arguments of AGENT's session."
  (let ((config (mevedel-acp-agent-config (mevedel-acp--agent-name agent))))
    (list :cwd (expand-file-name (mevedel-chat-root (mevedel-acp--agent-chat agent)))
          :disallowed-tools (unless mevedel-acp-keep-agent-tools
                              (plist-get config :disallowed-tools))
          :mcp-servers (mevedel-acp--serve agent))))

(defun mevedel-acp--send (chat name texts)
  "Send CHAT's running turn, whose prompt is TEXTS, to agent NAME."
  (let* ((agent (or (let ((known (gethash chat mevedel-acp--by-chat)))
                      ;; The module knows of an exit before its event
                      ;; arrives: a turn right after a crash starts anew.
                      (and known
                           (or (eq (mevedel-acp--agent-name known) name)
                               (progn (mevedel-acp--stop known) nil))
                           (pcase (mevedel-acp--agent-state known)
                             ('starting t)
                             ('ready (mevedel-core-acp-alive-p
                                      (mevedel-acp--agent-handle known))))
                           known))
                    (mevedel-acp--start chat name)))
         (turn (mevedel-chat-turn chat)))
    (setf (mevedel-acp--agent-turn agent) turn
          (mevedel-acp--agent-cancelled agent) nil
          (mevedel-acp--agent-calls agent) (make-hash-table :test #'equal)
          (mevedel-acp--agent-thought agent) nil
          (mevedel-acp--agent-refused agent) nil
          (mevedel-acp--agent-cards agent) nil
          (mevedel-acp--agent-hooked agent) (make-hash-table :test #'equal))
    (mevedel-acp--with-session
     agent
     (lambda (failure)
       (cond
        ((not (eq (mevedel-acp--agent-turn agent) turn)))
        (failure (mevedel-acp--finish agent 'error failure))
        ((mevedel-acp--agent-cancelled agent) (mevedel-acp--finish agent 'abort))
        (t
         (mevedel-core-acp-prompt
          (mevedel-acp--agent-handle agent) (mevedel-acp--agent-session-id agent)
          (if-let* ((seed (mevedel-acp--agent-seed agent)))
              (progn (setf (mevedel-acp--agent-seed agent) nil)
                     (cons seed texts))
            texts)
          (lambda (status value)
            (when (eq (mevedel-acp--agent-turn agent) turn)
              (cond
               ((not (eq status 'ok))
                (mevedel-acp--unsettle agent (concat "its turn failed: " (cadr value)))
                (mevedel-acp--finish agent 'error (cadr value)))
               ((equal (plist-get value :stop-reason) "cancelled")
                (mevedel-acp--unsettle agent "its turn was interrupted")
                (mevedel-acp--finish agent 'abort))
               ((equal (plist-get value :stop-reason) "refusal")
                (mevedel-acp--finish agent 'error
                                     (format "%s refused to answer" (mevedel-acp--agent-name agent))))
               (t (mevedel-acp--count-usage agent value)
                  (mevedel-acp--finish agent 'done))))))))))))

(defun mevedel-acp--count-usage (agent value)
  "Record the usage AGENT reported for its turn, VALUE the prompt's answer.
An agent reports a turn's tokens, not each model request's: the turn
is one record."
  (when (cl-some (lambda (key) (plist-get value key))
                 '(:input :output :cached-read :cached-write :thought))
    (mevedel-usage-record (mevedel-acp--agent-chat agent)
                          (mevedel-usage-make :input (plist-get value :input)
                                              :output (plist-get value :output)
                                              :cache-read (plist-get value :cached-read)
                                              :cache-write (plist-get value :cached-write)
                                              :reasoning (plist-get value :thought))
                          :provider (format "%s" (mevedel-acp--agent-name agent))
                          :model (mevedel-acp-chat-model (mevedel-acp--agent-chat agent)))))

(defun mevedel-acp--header (chat)
  "Return the tokens of CHAT's last turn, when an ACP agent reported them.
A `mevedel-view-header-functions' member."
  (when (gethash chat mevedel-acp--by-chat)
    (let ((usage (mevedel-usage-turn chat)))
      (when (or (plist-get usage :input) (plist-get usage :output))
        (format "turn %d in / %d out"
                (+ (or (plist-get usage :input) 0) (or (plist-get usage :cache-read) 0)
                   (or (plist-get usage :cache-write) 0))
                (or (plist-get usage :output) 0))))))

(add-hook 'mevedel-view-header-functions #'mevedel-acp--header)

(defun mevedel-acp--finish (agent outcome &optional detail)
  "End AGENT's turn with OUTCOME (`done', `error', `abort') and DETAIL."
  (let ((chat (mevedel-acp--agent-chat agent))
        (turn (mevedel-acp--agent-turn agent)))
    (mevedel-acp--flush-thought agent)
    (mapc #'funcall (mevedel-acp--agent-cards agent))
    (let ((open (cl-loop for record being the hash-values of (mevedel-acp--agent-calls agent)
                         unless (plist-get record :result) collect record)))
      (when open
        (mevedel-chat-settle-open-calls
         chat open "Cancelled: the turn ended before this call finished.")))
    (setf (mevedel-acp--agent-turn agent) nil
          (mevedel-acp--agent-cards agent) nil)
    (mevedel-acp--cancel-served agent)
    (mevedel-chat-provider-done chat turn outcome detail)))

(defun mevedel-acp--abort (chat)
  "Cancel CHAT's turn if its ACP agent drives it; non-nil then.
A `mevedel-chat-abort-functions' member: the agent ends the turn."
  (when-let* ((agent (gethash chat mevedel-acp--by-chat))
              (turn (mevedel-acp--agent-turn agent))
              ((eq turn (mevedel-chat-turn chat))))
    (setf (mevedel-acp--agent-cancelled agent) t)
    (mapc #'funcall (mevedel-acp--agent-cards agent))
    (setf (mevedel-acp--agent-cards agent) nil)
    (if (and (eq (mevedel-acp--agent-state agent) 'ready)
             (mevedel-acp--agent-session-id agent))
        (condition-case nil
            (mevedel-core-acp-cancel (mevedel-acp--agent-handle agent)
                                     (mevedel-acp--agent-session-id agent))
          (error (mevedel-acp--finish agent 'abort)))
      (mevedel-acp--finish agent 'abort))
    t))

(add-hook 'mevedel-chat-abort-functions #'mevedel-acp--abort)

(defun mevedel-acp--stop (agent)
  "Stop AGENT, its processes and its server, and forget it."
  (remhash (mevedel-acp--agent-key agent) mevedel-acp--agents)
  (when (eq (gethash (mevedel-acp--agent-chat agent) mevedel-acp--by-chat) agent)
    (remhash (mevedel-acp--agent-chat agent) mevedel-acp--by-chat))
  (setf (mevedel-acp--agent-state agent) 'dead)
  (mevedel-acp--stop-serving agent)
  (when (mevedel-acp--agent-handle agent)
    (mevedel-core-acp-stop (mevedel-acp--agent-handle agent) #'ignore)))

(defun mevedel-acp--session-closed (session)
  "Stop the agents of SESSION's chats; a `mevedel-session-close-functions' member."
  (dolist (agent (hash-table-values mevedel-acp--agents))
    (when (eq (mevedel-chat-session (mevedel-acp--agent-chat agent)) session)
      (mevedel-acp--stop agent))))

(add-hook 'mevedel-session-close-functions #'mevedel-acp--session-closed)

;;;; Native conversations: resuming and recovering

(defvar mevedel-acp--natives (make-hash-table :test #'eq :weakness 'key)
  "Each chat's native conversation: (:agent :session :history :about).
:agent names the ACP agent whose conversation :session is; :history
is nil, (uncertain . REASON) when it could not be resumed, or
`recover' when the next turn starts a new one seeded with mevedel's
transcript.  As saved in the chat's metadata.")

(defconst mevedel-acp--excerpt-limit 60000
  "Characters of mevedel's transcript a recovered conversation starts with.")

(defun mevedel-acp--native (chat)
  "Return CHAT's native conversation plist (see `mevedel-acp--natives')."
  (gethash chat mevedel-acp--natives))

(defun mevedel-acp--history-string (history)
  "Return HISTORY (see `mevedel-acp--natives') as saved."
  (pcase history
    ('recover "recover")
    (`(uncertain . ,reason) (concat "uncertain: " reason))
    (_ "")))

(defun mevedel-acp--record-native (chat &rest plist)
  "Set PLIST's keys of CHAT's native conversation, and save all of it now.
Waited for: a session id is on disk before the prompt that uses it."
  (let ((native (copy-sequence (mevedel-acp--native chat))))
    (cl-loop for (key value) on plist by #'cddr
             do (setq native (plist-put native key value)))
    (puthash chat native mevedel-acp--natives)
    (mevedel-save-checkpoint
     chat `(("acp-agent" . ,(or (plist-get native :agent) ""))
            ("acp-session" . ,(or (plist-get native :session) ""))
            ("acp-agent-info" . ,(or (plist-get native :about) ""))
            ("acp-model" . ,(or (plist-get native :model) ""))
            ("acp-history" . ,(mevedel-acp--history-string (plist-get native :history))))
     t)))

(defun mevedel-acp--resumed (chat)
  "Take CHAT's native conversation from its saved metadata.
A `mevedel-resume-functions' member, for a root or a child agent's chat."
  (when-let* ((store (mevedel-save-store chat))
              (info (mevedel-core-store-info-get store))
              (agent (cdr (assoc "acp-agent" info)))
              ((not (string-empty-p agent))))
    (let ((get (lambda (key) (let ((v (cdr (assoc key info))))
                               (and v (not (string-empty-p v)) v))))
          (history (cdr (assoc "acp-history" info))))
      (puthash chat
               (list :agent agent :session (funcall get "acp-session")
                     :about (funcall get "acp-agent-info") :model (funcall get "acp-model")
                     :history (cond ((equal history "recover") 'recover)
                                    ((and history (string-prefix-p "uncertain: " history))
                                     (cons 'uncertain (substring history 11)))))
               mevedel-acp--natives))))

(add-hook 'mevedel-resume-functions #'mevedel-acp--resumed)

(defun mevedel-acp--open-session (agent function)
  "Give AGENT a native session; then call FUNCTION with nil or what failed.
The chat's saved conversation with this agent is resumed with
`session/load'; otherwise, or when recovering, a new one is opened,
seeded with mevedel's transcript when the chat has earlier turns.  A
conversation that cannot be resumed is marked uncertain, and the turn
fails saying how to recover."
  (let* ((chat (mevedel-acp--agent-chat agent))
         (name (format "%s" (mevedel-acp--agent-name agent)))
         (native (mevedel-acp--native chat))
         (mine (equal (plist-get native :agent) name))
         (history (and mine (plist-get native :history)))
         (saved (and mine (plist-get native :session))))
    (cond
     ((eq (car-safe history) 'uncertain)
      (funcall function (mevedel-acp--uncertain-message chat (cdr history))))
     ((and saved (not (eq history 'recover)))
      (if (not (mevedel-acp--agent-load-session agent))
          (mevedel-acp--lose-history
           agent (format "%s cannot resume conversations (it has no session/load)" name)
           function)
        (setf (mevedel-acp--agent-loading agent) t)
        (mevedel-core-acp-new-session
         (mevedel-acp--agent-handle agent)
         (append (list :load saved) (mevedel-acp--session-args agent))
         (lambda (status value)
           (setf (mevedel-acp--agent-loading agent) nil)
           (if (eq status 'ok)
               (mevedel-acp--opened agent value function)
             (mevedel-acp--lose-history agent (cadr value) function))))))
     (t
      (mevedel-core-acp-new-session
       (mevedel-acp--agent-handle agent) (mevedel-acp--session-args agent)
       (lambda (status value)
         (if (not (eq status 'ok))
             (funcall function (cadr value))
           (let ((earlier (mevedel-acp--excerpt chat)))
             (when earlier
               (setf (mevedel-acp--agent-seed agent) earlier)
               (mevedel-chat-insert-notice
                chat 'recovered
                (format "%s starts a new conversation of its own, given mevedel's transcript \
of this one so far" name))))
           (mevedel-acp--opened agent value function))))))))

(defun mevedel-acp--opened (agent value function)
  "Record AGENT's session VALUE (a new or load reply); then call FUNCTION.
The session and agent are saved before any prompt.  When the chat's
placement names a model other than the session's, it is chosen first."
  (let* ((chat (mevedel-acp--agent-chat agent))
         (id (plist-get value :session-id))
         (models (mevedel-acp--json (plist-get value :models)))
         (wanted (cdr (mevedel-chat-placement chat))))
    (setf (mevedel-acp--agent-session-id agent) id
          (mevedel-acp--agent-models agent)
          (mapcar (lambda (model) (cons (plist-get model :modelId)
                                        (or (plist-get model :name) (plist-get model :modelId))))
                  (plist-get models :availableModels))
          (mevedel-acp--agent-model agent) (plist-get models :currentModelId))
    (mevedel-acp--record-native
     chat :agent (format "%s" (mevedel-acp--agent-name agent)) :session id
     :about (mevedel-acp--agent-about agent) :model (mevedel-acp--agent-model agent)
     :history nil)
    (when (and (mevedel-chat-agent chat) (mevedel-acp--agent-model agent))
      (mevedel-agent-note-served chat (mevedel-acp--agent-model agent)))
    (if (or (not wanted) (equal wanted (mevedel-acp--agent-model agent)))
        (funcall function nil)
      (mevedel-acp--choose-model agent wanted function))))

(defun mevedel-acp--uncertain-message (chat reason)
  "Return the error of a turn of CHAT whose native history is uncertain by REASON."
  (format "The agent's own conversation%s could not be resumed (%s), so what it \
remembers is uncertain.  M-x mevedel-claude-code-recover-history continues in a new \
conversation, given mevedel's transcript of this one."
          (if-let* ((path (mevedel-chat-agent chat))) (format " of %s" path) "")
          reason))

(defun mevedel-acp--lose-history (agent reason function)
  "Mark the native conversation of AGENT's chat uncertain by REASON.
Say so in the chat, and call FUNCTION with the turn's error."
  (let ((chat (mevedel-acp--agent-chat agent)))
    (mevedel-acp--record-native chat :history (cons 'uncertain reason))
    (funcall function (mevedel-acp--uncertain-message chat reason))))

(defun mevedel-acp--unsettle (agent reason)
  "Mark the native conversation of AGENT's chat uncertain by REASON.
For a prompt that was interrupted or failed: what the agent kept of
it is unknown, so the next turn says so (as for a failed
`session/load') instead of building on it: the live session is
dropped, so the next turn reopens it and meets the mark."
  (setf (mevedel-acp--agent-session-id agent) nil)
  (mevedel-acp--record-native (mevedel-acp--agent-chat agent)
                              :history (cons 'uncertain reason)))

(defun mevedel-acp--excerpt (chat)
  "Return mevedel's transcript of CHAT before its running turn, labelled, or nil.
The most recent `mevedel-acp--excerpt-limit' characters of it."
  (let* ((buffer (mevedel-chat-data-buffer chat))
         (start (mevedel-chat-turn-start chat))
         (end (if start (marker-position start) (with-current-buffer buffer (point-max))))
         (text (mapconcat
                (lambda (segment)
                  (pcase (plist-get segment :type)
                    ('user (concat "User: " (plist-get segment :text)))
                    ('response (concat "Assistant: " (plist-get segment :text)))
                    ((and 'tool (guard (not (plist-get segment :handle))))
                     (format "Tool call %s %s -> %s" (plist-get segment :name)
                             (mevedel-save-print (plist-get segment :args))
                             (let ((result (plist-get segment :result)))
                               (if (stringp result) result (mevedel-save-print result)))))
                    (_ nil)))
                (mevedel-history-segments buffer nil end)
                "\n\n")))
    (setq text (string-trim text))
    (unless (string-empty-p text)
      (when (> (length text) mevedel-acp--excerpt-limit)
        (setq text (concat "[...]\n" (substring text (- mevedel-acp--excerpt-limit)))))
      (concat "[mevedel: this conversation began before you joined it, or your own record \
of it was lost.  Here is mevedel's transcript of it so far, for context; the user's new \
message follows.]\n\n" text "\n\n[End of mevedel's transcript]"))))

(defun mevedel-acp--recover-target ()
  "Ask for the chat whose native conversation to recover, in this view's session.
The root's, or a retained child agent's by its path."
  (let* ((chat (or (and (boundp 'mevedel-view--chat) mevedel-view--chat)
                   (user-error "Run this in a mevedel view")))
         (paths (cons "/root" (mapcar (lambda (data) (plist-get data :path))
                                      (mevedel-agent-list chat))))
         (path (if (cdr paths) (completing-read "Recover the conversation of: " paths nil t)
                 "/root")))
    (if (equal path "/root")
        chat
      (mevedel-chat-of-buffer (or (mevedel-agent-conversation chat path)
                                  (user-error "No conversation of %s" path))))))

(defun mevedel-claude-code-recover-history (chat)
  "Continue CHAT's conversation with its ACP agent in a new native conversation.
For when the agent's own record of it is lost or uncertain (Claude
Code, or any ACP agent): its next turn opens a new conversation of
the agent, starting with mevedel's transcript of this one, labelled
as such.  Interactively, CHAT is the view's, or a retained child
agent's chosen by path.  Every turn of the session must be idle and
an active Goal paused: nothing may talk to the agent meanwhile."
  (interactive (list (mevedel-acp--recover-target)))
  (let ((name (or (mevedel-acp-chat-provider chat)
                  (user-error "An ACP agent does not answer this conversation")))
        (root (mevedel-chat-get (mevedel-chat-root chat))))
    (when (or (mevedel-chat-busy-p chat)
              (and root (eq (mevedel-chat-session root) (mevedel-chat-session chat))
                   (mevedel-chat-busy-p root))
              (mevedel-agent-active chat))
      (user-error "Wait until every turn of this session ends, or stop them, first"))
    (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat)))
                ((eq (mevedel-goal-state goal) 'active)))
      (user-error "Pause the Goal first (/goal pause): its next turn would race the recovery"))
    (when-let* ((agent (gethash chat mevedel-acp--by-chat)))
      ;; Its next turn opens a new session.
      (setf (mevedel-acp--agent-session-id agent) nil))
    (mevedel-acp--record-native chat :agent (format "%s" name) :history 'recover)
    (mevedel-chat-insert-notice
     chat 'recovered
     (format "Recovering: %s's next turn starts a new conversation of its own, given \
mevedel's transcript of this one" name))
    (mevedel-chat-notify chat 'truncated)
    (message "The next turn of %s starts anew with mevedel's transcript"
             (or (mevedel-chat-agent chat) "this session"))))

;;;; Models: the view's switcher and /model

(defun mevedel-acp--installed ()
  "Return the names of `mevedel-acp-agents' whose program is on PATH."
  (cl-loop for (name . config) in mevedel-acp-agents
           when (and (plist-get config :command) (executable-find (plist-get config :command)))
           collect name))

(defun mevedel-acp--model-choices (chat)
  "Return the switcher's choices of ACP agents for CHAT: (LABEL . SELECT).
Each agent on PATH, and each model its running session reports, as
AGENT:MODEL.  A `mevedel-view-model-choice-functions' member."
  (let ((agent (gethash chat mevedel-acp--by-chat)))
    (append
     (mapcar (lambda (name)
               (cons (format "%s" name) (lambda (chat) (mevedel-acp-place chat name))))
             (mevedel-acp--installed))
     (and agent (mevedel-acp--agent-session-id agent)
          (mapcar (lambda (model)
                    (cons (format "%s:%s" (mevedel-acp--agent-name agent) (car model))
                          (lambda (chat)
                            (mevedel-acp-place chat (mevedel-acp--agent-name agent) (car model)))))
                  (mevedel-acp--agent-models agent))))))

(add-hook 'mevedel-view-model-choice-functions #'mevedel-acp--model-choices)

(defun mevedel-acp-place (chat name &optional model)
  "Make the ACP agent NAME (a symbol) answer CHAT from its next turn on.
MODEL, a model id the agent reported, is chosen for its session.  An
agent other than the running one replaces it: the new one is given
mevedel's transcript of the conversation so far."
  (let ((agent (gethash chat mevedel-acp--by-chat)))
    (when (mevedel-chat-busy-p chat)
      (user-error "Wait until the turn ends, or stop it, first"))
    (mevedel-acp--command name (or (mevedel-acp-agent-config name)
                                   (user-error "No agent %s in `mevedel-acp-agents'" name)))
    (setf (mevedel-chat-placement chat) (cons name model))
    (mevedel-save-checkpoint chat (mevedel-save-metadata chat))
    (when (and agent (not (eq (mevedel-acp--agent-name agent) name)))
      (mevedel-acp--stop agent))
    (when (and agent model (eq (mevedel-acp--agent-name agent) name)
               (mevedel-acp--agent-session-id agent)
               (not (equal model (mevedel-acp--agent-model agent))))
      (mevedel-acp--choose-model agent model
                                 (lambda (failure)
                                   (when failure (message "mevedel: %s" failure)))))
    (mevedel-chat-notify chat 'status)))

(defun mevedel-acp--choose-model (agent model function)
  "Choose MODEL for AGENT's session; then call FUNCTION with nil or what failed."
  (mevedel-core-acp-set-model
   (mevedel-acp--agent-handle agent) (mevedel-acp--agent-session-id agent) model
   (lambda (status value)
     (if (not (eq status 'ok))
         (funcall function (cadr value))
       (setf (mevedel-acp--agent-model agent) model)
       (mevedel-acp--record-native (mevedel-acp--agent-chat agent) :model model)
       (when (mevedel-chat-agent (mevedel-acp--agent-chat agent))
         (mevedel-agent-note-served (mevedel-acp--agent-chat agent) model))
       (funcall function nil)))))

(defun mevedel-acp--provider-name (chat)
  "Return the ACP agent and model answering CHAT's next turn, or nil.
A `mevedel-view-provider-functions' member."
  (when-let* ((name (mevedel-acp-chat-provider chat)))
    (let* ((agent (gethash chat mevedel-acp--by-chat))
           (model (or (cdr (mevedel-chat-placement chat))
                      (and agent (eq (mevedel-acp--agent-name agent) name)
                           (mevedel-acp--agent-model agent))
                      (plist-get (mevedel-acp--native chat) :model))))
      (format "%s%s" name (if model (format " / %s" model) "")))))

(add-hook 'mevedel-view-provider-functions #'mevedel-acp--provider-name)

(defun mevedel-acp-chat-agent-info (chat)
  "Return the name and version CHAT's ACP agent gave itself, or nil."
  (or (when-let* ((agent (gethash chat mevedel-acp--by-chat))) (mevedel-acp--agent-about agent))
      (plist-get (mevedel-acp--native chat) :about)))

(defun mevedel-acp-chat-model (chat)
  "Return the model id of CHAT's ACP agent, when known, or nil."
  (or (cdr (mevedel-chat-placement chat))
      (when-let* ((agent (gethash chat mevedel-acp--by-chat))) (mevedel-acp--agent-model agent))
      (plist-get (mevedel-acp--native chat) :model)))

;;;; What the agent sends

(defun mevedel-acp--running (data)
  "Return the agent of event DATA when it drives a running turn, else nil.
The history `session/load' replays is not the turn's: mevedel has its
own transcript of it."
  (when-let* ((agent (gethash (plist-get data :key) mevedel-acp--agents))
              ((mevedel-acp--agent-turn agent))
              ((not (mevedel-acp--agent-loading agent))))
    agent))

(defun mevedel-acp--flush-thought (agent)
  "Write AGENT's streamed thought into its chat as a notice."
  (when-let* ((thought (mevedel-acp--agent-thought agent)))
    (setf (mevedel-acp--agent-thought agent) nil)
    (unless (string-blank-p thought)
      (mevedel-chat-insert-notice (mevedel-acp--agent-chat agent) 'thought
                                  (concat "Thinking: " (string-trim thought))))))

(defun mevedel-acp--update (data)
  "Handle DATA, an `acp-update' event."
  (when-let* (((eq (plist-get data :kind) 'commands))
              (agent (gethash (plist-get data :key) mevedel-acp--agents)))
    ;; Listed right after session/new too, outside any turn.
    (setf (mevedel-acp--agent-commands agent) (plist-get data :commands)))
  (when-let* ((agent (mevedel-acp--running data)))
    (let ((chat (mevedel-acp--agent-chat agent)))
      (pcase (plist-get data :kind)
        ('thought
         (setf (mevedel-acp--agent-thought agent)
               (concat (mevedel-acp--agent-thought agent) (plist-get data :text))))
        ('message
         (mevedel-acp--flush-thought agent)
         (when-let* ((text (plist-get data :text)))
           (mevedel-chat-provider-accepted chat)
           (with-current-buffer (mevedel-chat-data-buffer chat)
             (mevedel-gptel-append-response text))
           (mevedel-chat-set-status chat 'streaming)
           (mevedel-chat-notify chat 'text text)))
        ('tool-call
         (mevedel-acp--flush-thought agent)
         (mevedel-chat-provider-accepted chat)
         (mevedel-acp--tool-call agent data))
        ('plan
         (mevedel-acp--flush-thought agent)
         (mevedel-chat-insert-notice
          chat 'plan
          (concat "Plan:\n"
                  (mapconcat (pcase-lambda (`(,content ,_priority ,status))
                               (format "  %s %s" (pcase status
                                                   ("completed" "✓")
                                                   ("in_progress" "…")
                                                   (_ "○"))
                                       content))
                             (plist-get data :entries) "\n")))
         (mevedel-chat-notify chat 'tool-results nil))))))

(defun mevedel-acp--json (text)
  "Return the JSON TEXT as Lisp data (objects as plists), or nil."
  (and text (condition-case nil
                (json-parse-string text :object-type 'plist :array-type 'list
                                   :null-object nil :false-object :json-false)
              (json-parse-error nil))))

(defun mevedel-acp--content-text (content)
  "Return the text of a tool call's CONTENT (parsed JSON), or nil."
  (let ((parts (delq nil (mapcar (lambda (item)
                                   (pcase (plist-get item :type)
                                     ("content" (plist-get (plist-get item :content) :text))
                                     ("diff" (format "Changed %s" (plist-get item :path)))
                                     ("terminal" (format "Terminal %s"
                                                         (plist-get item :terminalId)))))
                                 content))))
    (and parts (string-join parts "\n"))))

(defun mevedel-acp--tool-call (agent data)
  "Record the tool call update DATA of AGENT's turn; settle it once it ended."
  (let* ((chat (mevedel-acp--agent-chat agent))
         (calls (mevedel-acp--agent-calls agent))
         (id (plist-get data :id))
         (record (or (gethash id calls) (list :id id :name "tool" :args nil)))
         (input (mevedel-acp--json (plist-get data :raw-input)))
         (status (plist-get data :status))
         (new (not (gethash id calls))))
    (when-let* ((name (or (plist-get data :name)
                          (and new (plist-get data :title)))))
      (setq record (plist-put record :name name)))
    (when (plist-get data :title)
      (setq record (plist-put record :title (plist-get data :title))))
    (when input
      (setq record (plist-put record :args (if (keywordp (car-safe input))
                                               input
                                             (list :input input)))))
    (when-let* ((text (or (mevedel-acp--content-text (mevedel-acp--json (plist-get data :content)))
                          (let ((output (plist-get data :raw-output)))
                            (and output (let ((parsed (mevedel-acp--json output)))
                                          (if (stringp parsed) parsed output)))))))
      (setq record (plist-put record :output text)))
    (puthash id record calls)
    (when new (mevedel-acp--announced agent record (plist-get data :raw-input)))
    (if (and (member status '("completed" "failed")) (not (plist-get record :result)))
        (mevedel-acp--settle agent record status)
      (unless (plist-get record :result)
        (setf (mevedel-chat-live-calls chat)
              (append (cl-remove id (mevedel-chat-live-calls chat)
                                 :key (lambda (call) (plist-get call :id)) :test #'equal)
                      (list record)))
        (mevedel-chat-set-status chat 'tools)
        (mevedel-chat-notify chat 'tools-start (mevedel-chat-live-calls chat))))))

(defun mevedel-acp--settle (agent record status)
  "Write the call RECORD of AGENT's turn, ended with STATUS, into the transcript."
  (let* ((chat (mevedel-acp--agent-chat agent))
         (id (plist-get record :id))
         (refused (cdr (assoc id (mevedel-acp--agent-refused agent))))
         (output (or (plist-get record :output) ""))
         (result (concat (cond (refused (concat "Permission denied: " refused))
                               ((equal status "failed") (concat "Error: " output))
                               ((string-empty-p output) "Done.")
                               (t output))
                         (mevedel-acp--unenforced agent id))))
    (setq record (plist-put record :result result))
    (puthash id record (mevedel-acp--agent-calls agent))
    (with-current-buffer (mevedel-chat-data-buffer chat)
      (mevedel-gptel-append-settled-call id (plist-get record :name)
                                         (plist-get record :args) result))
    (setf (mevedel-chat-live-calls chat)
          (cl-remove id (mevedel-chat-live-calls chat)
                     :key (lambda (call) (plist-get call :id)) :test #'equal))
    (mevedel-chat-set-status chat 'waiting)
    (mevedel-chat-notify chat 'tool-results (list record))
    (unless refused (mevedel-acp--post-hooks agent record status))))

(defun mevedel-acp--exited (data)
  "Handle DATA, an `acp-exited' event: the agent ended on its own."
  (when-let* ((agent (gethash (plist-get data :key) mevedel-acp--agents)))
    (setf (mevedel-acp--agent-state agent) 'dead)
    (mevedel-acp--stop-serving agent)
    (unless (mevedel-acp--agent-turn agent)
      (message "mevedel: %s%s" (plist-get data :message)
               (if-let* ((stderr (plist-get data :stderr)))
                   (concat "; its last stderr lines:\n" (string-join stderr "\n"))
                 "")))))

;;;; The agent's requests

(defun mevedel-acp--answer (id answer)
  "Answer the agent's request ID with ANSWER (see `mevedel-core-acp-answer')."
  (mevedel-core-acp-answer id answer))

(defun mevedel-acp--fail (id message)
  "Answer the agent's request ID with an error saying MESSAGE."
  (mevedel-acp--answer id (list :error-code -32603 :error-message message)))

(defun mevedel-acp--request (data)
  "Handle DATA, an `acp-request' event: answer the agent's request."
  (let ((agent (gethash (plist-get data :key) mevedel-acp--agents))
        (id (plist-get data :id)))
    (condition-case err
        (cond
         ((not agent) (mevedel-acp--fail id "mevedel has closed this agent's session"))
         (t (pcase (plist-get data :method)
              ("fs/read_text_file" (mevedel-acp--read agent data))
              ("fs/write_text_file" (mevedel-acp--write agent data))
              ("session/request_permission" (mevedel-acp--permission agent data))
              ("terminal/create" (mevedel-acp--terminal agent data))
              (method (mevedel-acp--fail
                       id (format "mevedel does not serve %s to ACP agents yet" method))))))
      (error (mevedel-acp--fail id (error-message-string err))))))

(defun mevedel-acp--inside-p (agent path)
  "Return non-nil when PATH is inside the workspace of AGENT's chat."
  (file-in-directory-p path (mevedel-chat-root (mevedel-acp--agent-chat agent))))

(defun mevedel-acp--read (agent data)
  "Answer the read DATA of AGENT: a visiting buffer's text, unsaved edits included."
  (let* ((path (plist-get data :path))
         (chat (mevedel-acp--agent-chat agent))
         (buffer (find-buffer-visiting path))
         (line (plist-get data :line))
         (limit (plist-get data :limit)))
    (cond
     ((and (not (mevedel-acp--inside-p agent path))
           (not (eq (mevedel-chat-permission-mode chat) 'full-auto)))
      (mevedel-acp--fail (plist-get data :id)
                         (format "%s is outside the workspace; mevedel reads only inside it \
unless the permission mode is full-auto" path)))
     ((and (not buffer) (not (file-readable-p path)))
      (mevedel-acp--answer (plist-get data :id)
                           (list :error-code -32002
                                 :error-message (format "%s does not exist" path))))
     (t
      (let ((text (if buffer
                      (with-current-buffer buffer
                        (save-restriction (widen) (buffer-substring-no-properties
                                                   (point-min) (point-max))))
                    (with-temp-buffer
                      (insert-file-contents path)
                      (buffer-string)))))
        (when (or line limit)
          (let* ((lines (split-string text "\n"))
                 (from (max 0 (1- (or line 1))))
                 (taken (seq-take (nthcdr from lines) (or limit most-positive-fixnum))))
            (setq text (string-join taken "\n"))))
        (mevedel-acp--answer (plist-get data :id) (list :text text)))))))

(defun mevedel-acp--patch-lines (text prefix)
  "Return TEXT's lines, each after PREFIX, as the lines of a patch."
  (mapconcat (lambda (line) (concat prefix line))
             (split-string (string-remove-suffix "\n" text) "\n")
             "\n"))

(defun mevedel-acp--write (agent data)
  "Answer the write DATA of AGENT through ApplyPatch.
A new file is added; an existing one has all its lines replaced, so
the call gets ApplyPatch's permission, review, checkpoint and visited
buffer update, and a buffer with unsaved changes refuses it."
  (let* ((path (plist-get data :path))
         (id (plist-get data :id))
         (chat (mevedel-acp--agent-chat agent))
         (content (plist-get data :content))
         (old (and (file-exists-p path)
                   (with-temp-buffer (insert-file-contents path) (buffer-string)))))
    (mevedel-pipeline-run-tool-outcome
     (mevedel-tool-get "ApplyPatch")
     (list :patch (concat "*** Begin Patch\n"
                          (if old
                              (concat "*** Update File: " path "\n@@\n"
                                      (mevedel-acp--patch-lines old "-") "\n")
                            (concat "*** Add File: " path "\n"))
                          (mevedel-acp--patch-lines content "+")
                          "\n*** End Patch"))
     (lambda (outcome)
       (let ((result (plist-get outcome :result)))
         (if (eq (plist-get outcome :status) 'success)
             (mevedel-acp--answer id (list :written t))
           (mevedel-acp--fail id (if (stringp result) result (format "%S" result))))))
     :data-buffer (mevedel-chat-data-buffer chat)
     :session (mevedel-chat-session chat)
     :tool-use-id (format "acp-write-%s" id))))

(defun mevedel-acp--option (options kinds)
  "Return the id of the first of OPTIONS, (ID NAME KIND), of one of KINDS."
  (car (cl-find-if (lambda (option) (member (nth 2 option) kinds)) options)))

(defun mevedel-acp--verdict (agent name kind)
  "Return how AGENT's permission request for tool NAME of KIND is answered.
That is `allow', `ask' or (deny . REASON), per the session's mode,
answers and rules."
  (let* ((chat (mevedel-acp--agent-chat agent))
         (session (mevedel-chat-session chat))
         (mode (mevedel-permissions-session-mode session))
         (root (mevedel-chat-root chat))
         (rules (mevedel-permissions-applicable-rules root))
         (rule (and rules (mevedel-permissions-matching-rule rules (list name) nil root))))
    (cond
     ;; mevedel's own tools: its pipeline asks, with the tool's own rules.
     ((string-prefix-p (concat "mcp__" mevedel-acp--server-name "__") name) 'allow)
     ((eq (car rule) 'deny)
      (cons 'deny (format "a permission rule forbids this %s call. Do not retry it." name)))
     ((eq (car rule) 'allow) 'allow)
     ((eq mode 'full-auto) 'allow)
     ((eq (car rule) 'ask) 'ask)
     ((mevedel-permissions-answered-p session (cons 'acp name)) 'allow)
     ((and (eq mode 'edits) (member kind '("read" "edit" "search"))) 'allow)
     (t 'ask))))

(defun mevedel-acp--permission (agent data)
  "Answer AGENT's permission request DATA: PreToolUse hooks, then the policy.
mevedel's own tools run their hooks in the pipeline, not here."
  (let ((name (mevedel-acp--call-name agent data)))
    (if (mevedel-acp--own-tool-p name)
        (mevedel-acp--decide agent data nil)
      (mevedel-acp--pre-hooks agent (plist-get data :tool-call-id) name
                              (plist-get data :raw-input)
                              (lambda (verdict) (mevedel-acp--decide agent data verdict))))))

(defun mevedel-acp--call-name (agent data)
  "Return the tool name of the call AGENT's request or update DATA is about."
  (or (plist-get data :name)
      (when-let* ((calls (mevedel-acp--agent-calls agent)))
        (plist-get (gethash (plist-get data :tool-call-id) calls) :name))
      (plist-get data :title) "tool"))

(defun mevedel-acp--own-tool-p (name)
  "Return non-nil when NAME is one of mevedel's tools served to the agent."
  (string-prefix-p (concat "mcp__" mevedel-acp--server-name "__") name))

(defun mevedel-acp--decide (agent data hooked)
  "Answer the permission request DATA of AGENT by mevedel's policy.
HOOKED is the verdict of the call's PreToolUse hooks: a block, a stop
or an input change refuses the call (the agent's own tools cannot take
changed input), a permission decision of `allow' or `ask' replaces the
mode's."
  (let* ((id (plist-get data :id))
         (chat (mevedel-acp--agent-chat agent))
         (call (plist-get data :tool-call-id))
         (name (mevedel-acp--call-name agent data))
         (options (plist-get data :options))
         (allow (lambda ()
                  (mevedel-acp--answer
                   id (let ((option (mevedel-acp--option options '("allow_once" "allow_always"))))
                        (if option (list :option option) (list :cancelled t))))))
         (deny (lambda (reason)
                 (push (cons call reason) (mevedel-acp--agent-refused agent))
                 (mevedel-acp--answer
                  id (let ((option (mevedel-acp--option options '("reject_once" "reject_always"))))
                       (if option (list :option option) (list :cancelled t))))))
         (policy (mevedel-acp--verdict agent name (plist-get data :tool-kind)))
         (verdict
          (cond
           ((plist-get hooked :stop)
            (mevedel-acp--hook-stop agent (plist-get hooked :stop))
            (cons 'deny (format "a PreToolUse hook stopped the turn: %s"
                                (plist-get hooked :stop))))
           ((plist-get hooked :block)
            (cons 'deny (format "a PreToolUse hook blocked this %s call: %s"
                                name (plist-get hooked :block))))
           ((plist-member hooked :updated-input)
            (cons 'deny (format "a PreToolUse hook asked to change this %s call's input, \
which mevedel cannot do for an ACP agent's own tools; it was refused instead" name)))
           ((eq (car-safe policy) 'deny) policy)
           ((plist-get hooked :permission) (plist-get hooked :permission))
           (t policy))))
    (pcase verdict
      ('allow (funcall allow))
      (`(deny . ,reason) (funcall deny reason))
      (_
       (if (not (and (mevedel-chat-prompter chat) (mevedel-acp--agent-turn agent)))
           (funcall deny (mevedel-permissions-refusal-reason name 'headless))
         (mevedel-acp--ask agent data name allow deny))))))

(defun mevedel-acp--ask (agent data name allow deny)
  "Show the card for AGENT's permission request DATA about tool NAME.
ALLOW and DENY (with a reason) answer the agent."
  (let* ((chat (mevedel-acp--agent-chat agent))
         (agent-name (mevedel-acp--agent-name agent))
         (args (let ((input (mevedel-acp--json (plist-get data :raw-input))))
                 (if (keywordp (car-safe input)) input (and input (list :input input)))))
         (request
          (list :tool name :args args :id (plist-get data :tool-call-id)
                :why (format "%s asks before %s" agent-name
                             (or (plist-get data :title) name))
                :always (format "every %s call of %s for the rest of this session"
                                name agent-name)
                :remember (list (cons 'acp name))
                :request (mevedel-chat-request chat))))
    (setq request
          (plist-put request :answer
                     (lambda (reply)
                       (pcase reply
                         ('once (funcall allow))
                         ('session (mevedel-permissions-remember (mevedel-chat-session chat)
                                                                 (list (cons 'acp name)))
                                   (funcall allow))
                         ('cancelled (mevedel-core-acp-answer (plist-get data :id)
                                                              (list :cancelled t)))
                         (_ (funcall deny (mevedel-permissions-refusal-reason name 'user)))))))
    (mevedel-chat-notify chat 'permission request)
    (when-let* ((hide (funcall (mevedel-chat-prompter chat) chat request)))
      (push hide (mevedel-acp--agent-cards agent)))))

;;;; Hooks around the agent's own tool calls

(defun mevedel-acp--pre-hooks (agent id name raw-input callback)
  "Run the PreToolUse hooks of AGENT's call ID of tool NAME once.
RAW-INPUT is the call's input as JSON text.  CALLBACK gets their
verdict (see `mevedel-hooks-run'), now or once they ran: the call's
announcement starts them, its permission request waits for them."
  (let* ((table (or (mevedel-acp--agent-hooked agent)
                    (setf (mevedel-acp--agent-hooked agent) (make-hash-table :test #'equal))))
         (entry (gethash id table)))
    (pcase (car entry)
      ('done (funcall callback (cdr entry)))
      ('waiting (setcdr entry (cons callback (cdr entry))))
      (_
       (let* ((cell (list 'waiting callback))
              (session (mevedel-chat-session (mevedel-acp--agent-chat agent)))
              (input (mevedel-acp--json raw-input)))
         (puthash id cell table)
         (mevedel-hooks-run
          'PreToolUse
          (mevedel-hooks-input 'PreToolUse session
                               :tool_name name
                               :tool_input (if (keywordp (car-safe input))
                                               input
                                             (mevedel-tool-repair-json-empty-object))
                               :tool_use_id id)
          (lambda (verdict)
            (let ((waiting (reverse (cdr cell))))
              (setcar cell 'done)
              (setcdr cell verdict)
              (dolist (function waiting) (funcall function verdict))))
          session))))))

(defun mevedel-acp--hook-stop (agent reason)
  "End AGENT's turn: a tool hook asked to stop for REASON."
  (funcall mevedel-hooks-report-function (format "A tool hook stopped the turn: %s" reason))
  (let ((chat (mevedel-acp--agent-chat agent)))
    (run-hook-with-args 'mevedel-hooks-stop-turn-functions
                        (mevedel-chat-session chat) reason (mevedel-chat-data-buffer chat))))

(defun mevedel-acp--announced (agent record raw-input)
  "Start the PreToolUse hooks of AGENT's newly announced call RECORD.
RAW-INPUT is its input as JSON text.  A call the agent asks permission
for waits for them there; one it runs without asking has already
started, so a stop ends the turn and a block is only noted on its
result."
  (let ((name (plist-get record :name)))
    (unless (mevedel-acp--own-tool-p name)
      (mevedel-acp--pre-hooks
       agent (plist-get record :id) name raw-input
       (lambda (verdict)
         (when-let* ((reason (plist-get verdict :stop))
                     ((mevedel-acp--agent-turn agent)))
           (mevedel-acp--hook-stop agent reason)))))))

(defun mevedel-acp--unenforced (agent id)
  "Return the note for AGENT's call ID, run although a PreToolUse hook blocked it."
  (when-let* ((table (mevedel-acp--agent-hooked agent))
              (entry (gethash id table))
              ((eq (car entry) 'done))
              (reason (plist-get (cdr entry) :block))
              ((not (assoc id (mevedel-acp--agent-refused agent)))))
    (format "\n\n(A PreToolUse hook blocked this call: %s.  %s ran it without asking \
permission, so mevedel could not stop it.)" reason (mevedel-acp--agent-name agent))))

(defun mevedel-acp--post-hooks (agent record status)
  "Run the PostToolUse hooks of RECORD (PostToolUseFailure when STATUS is failed).
RECORD is AGENT's settled call.  The agent has the result already:
the hooks' feedback is shown to the user, and a stop ends the turn."
  (unless (mevedel-acp--own-tool-p (plist-get record :name))
    (let* ((chat (mevedel-acp--agent-chat agent))
           (session (mevedel-chat-session chat))
           (failed (equal status "failed"))
           (event (if failed 'PostToolUseFailure 'PostToolUse))
           (args (plist-get record :args)))
      (mevedel-hooks-run
       event
       (apply #'mevedel-hooks-input event session
              :tool_name (plist-get record :name)
              :tool_input (if (keywordp (car-safe args))
                              args
                            (mevedel-tool-repair-json-empty-object))
              (append (if failed
                          (list :error (or (plist-get record :output) "")
                                :is_interrupt :json-false)
                        (list :tool_response (or (plist-get record :output) "")))
                      (list :tool_use_id (plist-get record :id))))
       (lambda (verdict)
         (when-let* ((text (or (plist-get verdict :block) (plist-get verdict :context))))
           (mevedel-chat-insert-notice chat 'hook (format "%s hook on %s: %s" event
                                                          (plist-get record :name) text)))
         (when-let* ((reason (plist-get verdict :stop))
                     ((mevedel-acp--agent-turn agent)))
           (mevedel-acp--hook-stop agent reason)))
       session))))

;;;; The agent's slash commands

(defvar mevedel-view-slash-commands)

(defun mevedel-acp-composer-commands (chat _name)
  "Return the slash commands of CHAT's agent as composer entries.
For `mevedel-view-slash-command-functions': /NAME ARGS is sent to the
agent as the prompt's text (queued while a turn runs), which is how
an ACP agent takes its commands.  A name one of mevedel's own commands
has stays mevedel's."
  (when-let* ((agent (gethash chat mevedel-acp--by-chat)))
    (cl-loop
     for (name description hint) in (mevedel-acp--agent-commands agent)
     unless (assoc name (bound-and-true-p mevedel-view-slash-commands))
     collect (let ((name name))
               (list name
                     (lambda (chat argument)
                       (let ((text (string-trim (concat "/" name " " argument))))
                         (if (mevedel-chat-busy-p chat)
                             (mevedel-chat-queue chat text)
                           (mevedel-chat-send chat text))))
                     (concat description (if hint (format " (%s)" hint) ""))
                     nil)))))

(add-hook 'mevedel-view-slash-command-functions #'mevedel-acp-composer-commands)

;;;; The agent's terminals

(defun mevedel-acp--terminal-line (command args)
  "Return the shell line of a terminal running COMMAND with ARGS.
Without ARGS, COMMAND is a shell line already; a shell given -c and a
script is that script, so permissions judge the commands it runs."
  (cond ((null args) command)
        ((and (member (file-name-nondirectory command) '("sh" "bash"))
              (equal (car args) "-c") (= (length args) 2))
         (cadr args))
        (t (mapconcat #'shell-quote-argument (cons command args) " "))))

(defvar mevedel-acp--terminals (make-hash-table :test #'equal)
  "The agents' running terminals: tool use id -> (AGENT ARGS).
ARGS are the Bash call's arguments its hooks see.")

(defun mevedel-acp--terminal (agent data)
  "Answer AGENT's terminal/create DATA: run its command as a Bash call would.
The command runs Bash's PreToolUse hooks (a block refuses it) and is
judged as a Bash call (rules, mode, session answers, a card where
someone can answer, a refusal where nobody can), then runs as a
managed execution of the session, in the sandbox, listed in the
background panel and /ps; the module serves its output, exit, kill
and release.  Its end runs the PostToolUse hooks
\=(`mevedel-acp--terminal-ended')."
  (let* ((id (plist-get data :id))
         (chat (mevedel-acp--agent-chat agent))
         (session (mevedel-chat-session chat))
         (root (expand-file-name (mevedel-chat-root chat)))
         (cwd (expand-file-name (or (plist-get data :cwd) root) root))
         (line (mevedel-acp--terminal-line (plist-get data :command) (plist-get data :args)))
         (description (format "%s terminal" (mevedel-acp--agent-name agent)))
         (tool-use-id (format "acp-terminal-%s" id))
         (context (list :tool (mevedel-tool-get "Bash")
                        :args (list :command line :description description)
                        :data-buffer (mevedel-chat-data-buffer chat)
                        :session session :tool-use-id tool-use-id))
         (start (lambda ()
                  (puthash tool-use-id (list agent (plist-get context :args))
                           mevedel-acp--terminals)
                  (mevedel-acp--answer
                   id (list :terminal
                            (mevedel-tool-exec-command-spec
                             (list :session (mevedel-session-id session) :owner "/root"
                                   :cwd cwd :tool-use-id tool-use-id)
                             line description (plist-get data :env))))))
         (refuse (lambda (reason)
                   (mevedel-acp--answer id (list :error-code -32603
                                                 :error-message (concat "Permission denied: "
                                                                        reason))))))
    (if (not (file-in-directory-p cwd root))
        (mevedel-acp--fail id (format "%s is outside the workspace; mevedel runs terminals only inside it" cwd))
      (mevedel-acp--pre-hooks
       agent tool-use-id "Bash" (json-serialize (plist-get context :args))
       (lambda (verdict)
         (if-let* ((reason (or (plist-get verdict :stop) (plist-get verdict :block))))
             (progn
               (funcall refuse (format "a PreToolUse hook blocked this Bash call: %s" reason))
               (when (and (plist-get verdict :stop) (mevedel-acp--agent-turn agent))
                 (mevedel-acp--hook-stop agent reason)))
           (mevedel-acp--judge-terminal agent context start refuse)))))))

(defun mevedel-acp--judge-terminal (agent context start refuse)
  "Judge AGENT's terminal, the Bash call CONTEXT, as its PreToolUse hooks let it.
Call START when it may run, or REFUSE with the reason it may not."
  (let ((chat (mevedel-acp--agent-chat agent))
        (session (plist-get context :session)))
    (pcase (mevedel-permissions-decide-call context session)
      ((or 'allow `(allow . ,_)) (funcall start))
      (`(deny . ,reason) (funcall refuse reason))
      (_
       (if (not (and (mevedel-chat-prompter chat) (mevedel-acp--agent-turn agent)))
           (funcall refuse (mevedel-permissions-refusal-reason "Bash" 'headless))
         (let ((withdraw
                (mevedel-permissions-ask
                 context session
                 (lambda (answer)
                   (if (eq answer 'approve) (funcall start) (funcall refuse (cdr answer))))
                 (lambda (request)
                   (setq request (plist-put request :request (mevedel-chat-request chat)))
                   (mevedel-chat-notify chat 'permission request)
                   (funcall (mevedel-chat-prompter chat) chat request)))))
           (push withdraw (mevedel-acp--agent-cards agent))))))))

(defun mevedel-acp--terminal-ended (data)
  "Run the PostToolUse hooks of an agent's terminal that ended, as of Bash.
DATA is an execution's settlement (`mevedel-tool-exec-settled-functions'):
a terminal ends by exiting or by being killed or released.  The hooks
see its output; one killed by a signal is a PostToolUseFailure."
  (when-let* ((id (plist-get data :tool-use-id))
              (entry (gethash id mevedel-acp--terminals)))
    (remhash id mevedel-acp--terminals)
    (pcase-let ((`(,agent ,args) entry)
                (status (if (equal (plist-get (plist-get data :facts) :termination) "exit")
                            "completed"
                          "failed")))
      (mevedel-core-exec-observe
       (plist-get data :session) (plist-get data :id) nil 0
       (lambda (ok value)
         (mevedel-acp--post-hooks
          agent (list :id id :name "Bash" :args args
                      :output (if (eq ok 'ok) (plist-get value :output) ""))
          status))))))

(add-hook 'mevedel-tool-exec-settled-functions #'mevedel-acp--terminal-ended)

;;;; mevedel's tools for the agent

(defun mevedel-acp--served-tools (chat)
  "Return the tools served to CHAT's agent: those a root gptel turn is offered.
That is the native tools, ToolSearch and ToolCall reaching the
specialists."
  (let ((buffer (mevedel-chat-data-buffer chat)))
    (cl-remove-if-not (lambda (tool) (mevedel-tool-visible-p tool buffer))
                      (mevedel-tool-native-tools))))

(defun mevedel-acp--serve (agent)
  "Serve mevedel's tools to AGENT's session; return its `:mcp-servers'.
Nil when the agent takes no MCP server over HTTP."
  (when (mevedel-acp--agent-mcp-http agent)
    (mevedel-acp--stop-serving agent)
    (let* ((tools (mevedel-acp--served-tools (mevedel-acp--agent-chat agent)))
           (handle (mevedel-core-mcp-serve-start
                    (list :key (mevedel-acp--agent-key agent)
                          :tools (mapcar (lambda (tool)
                                           (list (mevedel-tool-name tool)
                                                 (mevedel-tool-description tool)
                                                 (json-serialize (mevedel-tool-provider-schema tool)
                                                                 :null-object :null
                                                                 :false-object :json-false)))
                                         tools))))
           (address (mevedel-core-mcp-serve-address handle)))
      (setf (mevedel-acp--agent-server agent) handle
            (mevedel-acp--agent-served agent) (make-hash-table))
      (list (list :name mevedel-acp--server-name :url (plist-get address :url)
                  :headers (list (cons "Authorization"
                                       (concat "Bearer " (plist-get address :secret)))))))))

(defun mevedel-acp--cancel-served (agent)
  "Cancel what AGENT's session asked mevedel's tools for and is still running."
  (when-let* ((served (mevedel-acp--agent-served agent)))
    (let ((cancels (hash-table-values served)))
      (clrhash served)
      (mapc #'funcall cancels))))

(defun mevedel-acp--stop-serving (agent)
  "Stop the server of mevedel's tools for AGENT and cancel its work."
  (mevedel-acp--cancel-served agent)
  (when-let* ((handle (mevedel-acp--agent-server agent)))
    (setf (mevedel-acp--agent-server agent) nil)
    (mevedel-core-mcp-serve-stop handle)))

(defun mevedel-acp--served-answer (outcome session)
  "Return the MCP answer for the pipeline OUTCOME of a call in SESSION."
  (let ((text (plist-get outcome :provider-result)))
    (list :text (if (stringp text) (substring-no-properties text) (format "%S" text))
          :images (mapcar (lambda (payload) (cons (cdr payload) (car payload)))
                          (mevedel-tool-media-payloads (plist-get outcome :media) session))
          :error (eq (plist-get outcome :status) 'error))))

(defun mevedel-acp--served-call (data)
  "Run DATA, an `mcp-serve-call' event, through mevedel's pipeline.
As a root gptel turn's call would run: validation and repair, hooks,
permission (cards, modes, a headless refusal), result limits, review
and checkpoints, the sandbox."
  (let* ((agent (gethash (plist-get data :key) mevedel-acp--agents))
         (id (plist-get data :id))
         (name (plist-get data :name))
         (tool (and agent (mevedel-acp--agent-server agent)
                    (cl-find name (mevedel-acp--served-tools (mevedel-acp--agent-chat agent))
                             :key #'mevedel-tool-name :test #'equal))))
    (if (not tool)
        (mevedel-core-mcp-serve-answer
         id (list :text (format "mevedel cannot run %s for this session" name) :error t))
      (let* ((chat (mevedel-acp--agent-chat agent))
             (session (mevedel-chat-session chat))
             (served (mevedel-acp--agent-served agent))
             (done nil)
             (cancel
              (condition-case err
                  (mevedel-pipeline-run-tool-outcome
                   tool (mevedel-tool-repair-json-decode (plist-get data :arguments))
                   (lambda (outcome)
                     (setq done t)
                     (remhash id served)
                     (mevedel-core-mcp-serve-answer
                      id (mevedel-acp--served-answer outcome session)))
                   :tool-use-id (or (plist-get data :tool-use-id) (format "mcp-%s" id))
                   :source 'provider :projection 'provider
                   :data-buffer (mevedel-chat-data-buffer chat) :session session)
                (error (setq done t)
                       (mevedel-core-mcp-serve-answer
                        id (list :text (error-message-string err) :error t))
                       nil))))
        (unless done (puthash id cancel served))))))

(defun mevedel-acp--served-cancelled (data)
  "Cancel the call of DATA, an `mcp-serve-cancel' event: its client gave up."
  (when-let* ((agent (gethash (plist-get data :key) mevedel-acp--agents))
              (served (mevedel-acp--agent-served agent))
              (cancel (gethash (plist-get data :id) served)))
    (remhash (plist-get data :id) served)
    (funcall cancel)))

(mevedel-core-register-event-handler 'mcp-serve-call #'mevedel-acp--served-call)
(mevedel-core-register-event-handler 'mcp-serve-cancel #'mevedel-acp--served-cancelled)
(mevedel-core-register-event-handler 'acp-update #'mevedel-acp--update)
(mevedel-core-register-event-handler 'acp-request #'mevedel-acp--request)
(mevedel-core-register-event-handler 'acp-exited #'mevedel-acp--exited)

(provide 'mevedel-acp)
;;; mevedel-acp.el ends here
