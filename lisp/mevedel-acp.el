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
;; - One agent process per root chat, started at its first turn with
;;   the workspace as its directory, and one native session, opened
;;   then (Claude Code's file and shell tools switched off unless
;;   `mevedel-acp-keep-agent-tools') and recorded in the session's
;;   metadata ("acp-agent", "acp-session") before the prompt goes out.
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
;;   Closing the session stops the agent; Emacs exiting stops them all
;;   (mevedel-core.el), every process of each.
;;
;; - The agent's own tool calls run mevedel's PreToolUse hooks when
;;   announced (its permission request waits for them: a block answers
;;   `reject_once'; a call it runs unasked cannot be stopped, so a block
;;   is only noted on its result) and PostToolUse hooks once settled,
;;   whose feedback is a notice; mevedel's own tools run theirs in the
;;   pipeline.
;; - `terminal/create' is judged as a Bash call and run as a managed
;;   execution in the sandbox (the module serves the other terminal
;;   methods); the agent's slash commands are composer commands sent as
;;   prompt text; the usage it reports for a turn is recorded through
;;   mevedel-usage.el.
;;
;; Not here (yet): resuming a native session (`session/load'), child
;; agents on ACP and a model switcher.
;;
;; Manual: docs/providers.md (mevedel://providers.md).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'json)
(require 'mevedel-core)
(require 'mevedel-chat)
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

;;; Commands

(defun mevedel-acp-agent-config (name)
  "Return the plist of agent NAME (a symbol or string), or nil."
  (cdr (assq (if (stringp name) (intern name) name) mevedel-acp-agents)))

(defun mevedel-acp-chat-provider (chat)
  "Return the name of the ACP agent that answers CHAT, or nil for gptel."
  (if-let* ((agent (gethash chat mevedel-acp--by-chat)))
      (mevedel-acp--agent-name agent)
    (and mevedel-provider (not (eq mevedel-provider 'gptel))
         (not (mevedel-chat-agent chat))
         mevedel-provider)))

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
                                                              (plist-get value :mcp-http)))
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
      (t
       (let ((config (mevedel-acp-agent-config (mevedel-acp--agent-name agent)))
             (chat (mevedel-acp--agent-chat agent)))
         (mevedel-core-acp-new-session
          (mevedel-acp--agent-handle agent)
          (list :cwd (expand-file-name (mevedel-chat-root chat))
                :disallowed-tools (unless mevedel-acp-keep-agent-tools
                                    (plist-get config :disallowed-tools))
                :mcp-servers (mevedel-acp--serve agent))
          (lambda (status value)
            (if (not (eq status 'ok))
                (funcall function (cadr value))
              (let ((id (plist-get value :session-id)))
                (setf (mevedel-acp--agent-session-id agent) id)
                ;; Recorded, and waited for, before any prompt.
                (mevedel-save-checkpoint
                 chat `(("acp-agent" . ,(format "%s" (mevedel-acp--agent-name agent)))
                        ("acp-session" . ,id))
                 t)
                (funcall function nil)))))))))))

(defun mevedel-acp--send (chat name texts)
  "Send CHAT's running turn, whose prompt is TEXTS, to agent NAME."
  (let* ((agent (or (let ((known (gethash chat mevedel-acp--by-chat)))
                      ;; The module knows of an exit before its event
                      ;; arrives: a turn right after a crash starts anew.
                      (and known
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
          (mevedel-acp--agent-handle agent) (mevedel-acp--agent-session-id agent) texts
          (lambda (status value)
            (when (eq (mevedel-acp--agent-turn agent) turn)
              (cond
               ((not (eq status 'ok)) (mevedel-acp--finish agent 'error (cadr value)))
               ((equal (plist-get value :stop-reason) "cancelled")
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
                          :provider (format "%s" (mevedel-acp--agent-name agent)))))

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

(defun mevedel-acp--session-closed (session)
  "Stop the agents of SESSION's chats; a `mevedel-session-close-functions' member."
  (maphash (lambda (key agent)
             (when (eq (mevedel-chat-session (mevedel-acp--agent-chat agent)) session)
               (remhash key mevedel-acp--agents)
               (setf (mevedel-acp--agent-state agent) 'dead)
               (mevedel-acp--stop-serving agent)
               (when (mevedel-acp--agent-handle agent)
                 (mevedel-core-acp-stop (mevedel-acp--agent-handle agent) #'ignore))))
           mevedel-acp--agents))

(add-hook 'mevedel-session-close-functions #'mevedel-acp--session-closed)

;;;; What the agent sends

(defun mevedel-acp--running (data)
  "Return the agent of event DATA when it drives a running turn, else nil."
  (when-let* ((agent (gethash (plist-get data :key) mevedel-acp--agents))
              ((mevedel-acp--agent-turn agent)))
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
  (run-hook-with-args 'mevedel-hooks-stop-turn-functions
                      (mevedel-chat-session (mevedel-acp--agent-chat agent)) reason))

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

(defun mevedel-acp--terminal (agent data)
  "Answer AGENT's terminal/create DATA: run its command as a Bash call would.
The command is judged as a Bash call (rules, mode, session answers, a
card where someone can answer, a refusal where nobody can), then runs
as a managed execution of the session, in the sandbox, listed in the
background panel and /ps; the module serves its output, exit, kill
and release."
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
    (cond
     ((not (file-in-directory-p cwd root))
      (mevedel-acp--fail id (format "%s is outside the workspace; mevedel runs terminals only inside it" cwd)))
     (t
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
             (push withdraw (mevedel-acp--agent-cards agent))))))))))

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
