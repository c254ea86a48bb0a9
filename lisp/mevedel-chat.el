;;; mevedel-chat.el --- A workspace's agent session driven by gptel  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; One chat per workspace (the project.el root, else a directory).  A
;; chat owns a gptel *data buffer*: the transcript gptel reads and
;; writes, in `gptel-default-mode'.  Each turn inserts the user's text
;; there and runs `gptel-request' with the user's backend and model,
;; mevedel's system prompt (mevedel-prompt.el) and mevedel's tools.
;; Observers (the view, headless runs) follow the turn through
;; `mevedel-chat-observe'.
;;
;; Everything that touches gptel's internals goes through the gptel
;; adapter (mevedel-gptel.el): the turn's state handlers, inserting
;; responses and, one authoritative record at a time in the model's
;; call order, tool results; aborting.  The adapter's gptel tools run
;; every call through the pipeline (mevedel-pipeline.el); a data buffer
;; keeps the cancellation thunks of its calls with the chat's turn, so
;; that aborting the turn cancels them.
;;
;; Mail.  `mevedel-chat-message-functions' supply blocks sent before
;; the user's text of a turn.  They stay in the transcript only if the
;; backend accepted the turn's request (`mevedel-chat-accepted-functions'
;; then run); a request that failed or was aborted before that takes
;; its mail out of the data buffer again.
;;
;; Failures.  A sample that failed for a reason that may pass is sent
;; again by the turn's state machine (mevedel-gptel.el, RTRY, with the
;; pauses of mevedel-recovery.el); the chat's status is then `retrying'
;; and observers hear `retry'.  A turn that fails for good has one
;; message naming what failed (`mevedel-gptel-failure'), in its status
;; detail and in an error notice.
;;
;; Hooks.  The user's hooks (mevedel-hooks.el) run at three points
;; here: SessionStart when a chat starts or resumes (and, from
;; mevedel-compaction.el, after a compaction), UserPromptSubmit before
;; a prompt is sent (it may block it), and Stop when a turn ends (it
;; may send the turn on, as a background turn with the hook's reason).
;; Their context reaches the model as mail.
;;
;; Not here.  Saving (mevedel-save.el), resuming (mevedel-resume.el)
;; and compaction (mevedel-compaction.el) sit above this file and
;; register on its hooks: `mevedel-chat-save-functions' at each point
;; where the conversation is saved, `mevedel-chat-load-functions' when
;; a saved session is opened, `mevedel-chat-before-send-functions' and
;; `mevedel-chat-prompt-transform-functions' around a turn's request.
;; The tool catalog (mevedel-catalog.el) loads them all.  The token
;; usage of each response is recorded by mevedel-usage.el, which also
;; sets the size of the chat's context (`mevedel-chat-context-usage').
;;
;; The pipeline's permission step decides with mevedel-permissions.el.
;; The chat's session carries the permission mode and answers; while a
;; view shows the chat (`mevedel-chat-set-prompter'), the session's
;; prompter hands the cards mevedel-permissions.el plans, and a tool's
;; :review, to the view, where they are interactions
;; (mevedel-interaction.el) of the request that asked.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'project)
(require 'gptel)
(require 'mevedel-gptel)
(require 'mevedel-history)
(require 'mevedel-hooks)
(require 'mevedel-interaction)
(require 'mevedel-edited-files)
(require 'mevedel-environment)
(require 'mevedel-instructions)
(require 'mevedel-memory)
(require 'mevedel-mentions)
(require 'mevedel-permissions)
(require 'mevedel-pipeline)
(require 'mevedel-prompt)
(require 'mevedel-recovery)
(require 'mevedel-render-data)
(require 'mevedel-session)
(require 'mevedel-skills)
(require 'mevedel-tool-registry)
(require 'mevedel-transcript)

(defgroup mevedel-chat nil
  "Agent sessions."
  :group 'mevedel
  :prefix "mevedel-chat-")

(defvar mevedel-chat-message-functions nil
  "Functions returning mail to put before the user's text of a turn.
Each is called with the chat when a turn is sent and returns a list of
strings (e.g. <agent-message> blocks); they are sent with the user's
message, in order, and the view does not show them.  The mail counts
as read only once `mevedel-chat-accepted-functions' run for the turn.")

(defvar mevedel-chat-turn-text nil
  "The user's text of the turn whose mail is being gathered, or nil.
Bound while `mevedel-chat-message-functions' run; nil for a turn the
harness starts on its own.")

(defvar mevedel-chat-accepted-functions nil
  "Abnormal hook run with a chat whose turn's request the backend accepted.
It runs once per turn, when the first response of the turn's first
request begins (see `mevedel-gptel-accepted-p'): from then on the
transcript holds the turn's mail and the model has read it.")

(defvar mevedel-chat-turn-functions nil
  "Abnormal hook run with a chat and its new turn's plist as the turn is sent.
Functions may add keys to the plist (Plan mode's stamp).")

(defvar mevedel-chat-continuation-mail-functions nil
  "Functions returning mail for the next sample of a running turn.
Each is called with the chat before a request continues after a tool
batch and returns a list of strings (e.g. <agent-message> blocks),
each sent as a user message of that request and written to the data
buffer before it; the view does not show them.  The mail counts as
read once it is saved with the conversation: then
`mevedel-chat-mail-written-functions' run.")

(defvar mevedel-chat-mail-written-functions nil
  "Abnormal hook run with a chat once the mail of its next sample is written.
The mail `mevedel-chat-continuation-mail-functions' gave is in the data
buffer; mevedel-save.el runs the hook as it queues the save.  The
second argument is the store that save was queued to
\(`mevedel-save-queue'), or nil when the conversation is not saved:
the mail counts as read once that save is done, so that a crash cannot
lose it (`mevedel-core-mailbox-deliver-after').")

(defvar mevedel-chat-load-functions nil
  "Abnormal hook run with a new chat of a saved session, to load it.
`mevedel-chat-get-create' runs it when it resumes a saved session,
before the SessionStart hooks; `mevedel-chat-open-read-only' when
another process writes the session (`mevedel-chat-read-only' is then
non-nil: nothing may be written).  mevedel-resume.el loads the
conversation this way.")

(defvar mevedel-chat-save-functions nil
  "Abnormal hook run at each point of a chat's life where it is saved.
Each function is called with the chat, the point (a symbol) and the
point's arguments:
`begin'   a turn starts; the user's text, nil for a turn the harness
          starts on its own;
`calls'   the turn's tool calls start; their records, in call order;
`results' their results are in the data buffer;
`inputs'  queued messages joined the running turn; their texts;
`end'     the turn ended;
`undo'    a turn whose request failed to start was undone;
`change'  the model or the turns changed between turns;
`append'  mevedel appended a turn of its own (see
          `mevedel-chat-append-reply');
`kill'    the data buffer is being killed.
mevedel-save.el saves the conversation this way.")

(defvar mevedel-chat-before-send-functions nil
  "Functions that may hold a turn back until work it needs is done.
Each is called with the chat, the turn's text and a function that
sends the turn.  One that returns non-nil holds the turn: it calls
that function once its work is done (with the argument `abort' when
the turn was aborted meanwhile: it ends unsent), and the functions
after it are not called.  Compaction (mevedel-compaction.el) summarises
older turns first this way.")

(defvar mevedel-chat-prompt-transform-functions nil
  "Prompt transforms of a turn's requests, after gptel's and the chat's own.
Each is called in the request's prompt buffer as the members of
`gptel-prompt-transform-functions' are.  Compaction drops the turns
its summary stands for this way.")

(defvar mevedel-chat-provider-functions nil
  "Abnormal hook choosing what answers a chat's turns instead of gptel.
Each function is called with the chat; one that drives it returns a
function of the chat and the turn's prompt, a list of texts (its mail
blocks, then the user's text), which sends the turn and reports its
end with `mevedel-chat-provider-done'.  When none does, gptel answers
\(mevedel-acp.el registers here for ACP agents).")

(defvar mevedel-chat-idle-functions nil
  "Abnormal hook run with a chat whose turn has just ended, and the outcome.
The outcome is `done', `error' or `abort'.")

;;;; The chat object

(cl-defstruct (mevedel-chat (:constructor mevedel-chat--make)
                            (:copier nil)
                            (:include mevedel-prompt-chat))
  "An agent session of one workspace.
Its root and data buffer are the slots of `mevedel-prompt-chat'."
  name session
  (status 'idle) status-detail
  fsm turn turn-start on-done mail accepted
  ;; The turns sent so far, newest first: plists (:id :label :start).
  turns
  backend model
  ;; Who answers its turns when not gptel's default: nil (the root
  ;; follows `mevedel-provider', a child gptel) or (PROVIDER . MODEL),
  ;; PROVIDER `gptel' or an ACP agent's name (mevedel-acp.el), MODEL
  ;; the agent's model id or nil.  Chosen in the view or frozen at a
  ;; child's spawn, saved with the session.
  placement
  ;; Non-nil in a session begun with the offline demo model
  ;; (mevedel-demo.el): saved with it, so that only a demo start
  ;; resumes it.
  demo
  observers prompter history
  live-calls cancellers updates
  (progress (make-hash-table :test #'equal))
  ;; Saving: the session's title (its first prompt unless renamed),
  ;; when it was created (epoch milliseconds), the timer checkpointing
  ;; a running turn, and the token usage reported so far.
  title created save-timer
  ;; The size of the last request's context as the provider reported
  ;; it (nil until one was reported); mevedel-usage.el keeps the rest.
  context-tokens
  ;; Messages the user sent while the turn ran, oldest first.
  queued
  ;; Non-nil while older turns are being summarised.
  compacting
  ;; Non-nil while UserPromptSubmit hooks decide about a prompt: then
  ;; (once they run in the background) the function that stops them.
  hooking
  ;; A child agent's chat: its canonical path (nil for the root), the
  ;; system text and gptel tools frozen when it was created, and the
  ;; store of its own transcript (nil: not saved).
  agent frozen-system frozen-tools store)

(defvar mevedel-chat--chats (make-hash-table :test #'equal)
  "Live chats by workspace root.")

(defun mevedel-chat-workspace-root (&optional directory)
  "Return the workspace root for DIRECTORY (default `default-directory').
That is the project.el project root, else DIRECTORY itself."
  (let* ((directory (file-name-as-directory (expand-file-name (or directory default-directory))))
         (project (let ((default-directory directory)) (project-current nil directory))))
    (file-name-as-directory (expand-file-name (if project (project-root project) directory)))))

(defun mevedel-chat-get (root)
  "Return the live chat of workspace ROOT, or nil."
  (let ((chat (gethash (file-name-as-directory (expand-file-name root)) mevedel-chat--chats)))
    (and chat (buffer-live-p (mevedel-chat-data-buffer chat)) chat)))

(defun mevedel-chat-list ()
  "Return the live chats."
  (let (chats)
    (maphash (lambda (_ chat)
               (when (buffer-live-p (mevedel-chat-data-buffer chat)) (push chat chats)))
             mevedel-chat--chats)
    chats))

(defun mevedel-chat-get-create (root &optional id)
  "Return the chat of workspace ROOT, creating it if needed.
A new chat starts a new session, or resumes the saved session ID of
ROOT when ID is non-nil (see `mevedel-session-saved'): this Emacs then
takes the session's lock first, and signals `mevedel-session-locked'
when another process writes it (`mevedel-chat-open-read-only' shows
such a session).
The tool catalog (mevedel-catalog.el) must be loaded: a session opened
without it would offer the model fewer tools than every other one."
  (unless (featurep 'mevedel-catalog)
    (error "Load the tool catalog (mevedel-catalog) before opening a session"))
  (let ((root (file-name-as-directory (expand-file-name root))))
    (or (mevedel-chat-get root)
        (let* ((name (file-name-nondirectory (directory-file-name root)))
               (chat (mevedel-chat--make :root root :name name))
               (session (mevedel-session-create :workspace root :id id)))
          (when id (mevedel-session-ensure-storage session))
          (setf (mevedel-session-permission-mode session) mevedel-permissions-mode
                (mevedel-chat-session chat) session
                (mevedel-chat-data-buffer chat) (mevedel-chat--make-data-buffer chat)
                (mevedel-session-conversation session) (mevedel-chat-data-buffer chat))
          (puthash root chat mevedel-chat--chats)
          (when id (run-hook-with-args 'mevedel-chat-load-functions chat))
          (mevedel-hooks-session-start session (if id "resume" "startup")
                                       (format "%s" (mevedel-chat-model-effective chat)))
          chat))))

(defun mevedel-chat-open-read-only (root id owner)
  "Return a chat showing saved session ID of ROOT, which OWNER writes.
OWNER is another process (as `mevedel-session-owner' gives it): this
chat reads the conversation as it was last saved and never writes
it, and sending in it is refused, naming OWNER.  It is not ROOT's live
chat; killing its view kills it."
  (let* ((root (file-name-as-directory (expand-file-name root)))
         (session (mevedel-session-create :workspace root :id id))
         (chat (mevedel-chat--make
                :root root :session session
                :name (format "%s %s (read-only)"
                              (file-name-nondirectory (directory-file-name root)) id))))
    (setf (mevedel-session-read-only session) owner
          (mevedel-session-permission-mode session) mevedel-permissions-mode
          (mevedel-chat-data-buffer chat) (mevedel-chat--make-data-buffer chat)
          (mevedel-session-conversation session) (mevedel-chat-data-buffer chat))
    (run-hook-with-args 'mevedel-chat-load-functions chat)
    chat))

(defun mevedel-chat-read-only (chat)
  "Return the owner writing CHAT's session when CHAT may only read it.
That is another process (see `mevedel-session-owner'); nil for a chat
that may write its session."
  (mevedel-session-read-only (mevedel-chat-session chat)))

(defun mevedel-chat-make-child (parent path &optional directory)
"Return a new chat for the child agent PATH below the chat PARENT.
It shares PARENT's workspace, session (permissions, mailbox) and
model, has its own data buffer (working directory DIRECTORY, default
PARENT's) and is not one of `mevedel-chat-list': the agent runtime
owns it.  Its conversation is saved only in the store the runtime
gives it (`mevedel-chat-store'), never in the session's."
  (let ((chat (mevedel-chat--make :root (mevedel-chat-root parent)
                                  :name (format "%s %s" (mevedel-chat-name parent) path)
                                  :session (mevedel-chat-session parent)
                                  :backend (mevedel-chat-backend-effective parent)
                                  :model (mevedel-chat-model-effective parent)
                                  :agent path)))
    (setf (mevedel-chat-data-buffer chat) (mevedel-chat--make-data-buffer chat))
    (when directory
      (with-current-buffer (mevedel-chat-data-buffer chat)
        (setq default-directory (file-name-as-directory directory))))
    chat))

(defun mevedel-chat--make-data-buffer (chat)
  "Create the gptel data buffer of CHAT."
  (let ((buffer (generate-new-buffer (format " *mevedel-data: %s*" (mevedel-chat-name chat)))))
    (with-current-buffer buffer
      (funcall (or gptel-default-mode #'text-mode))
      (setq default-directory (mevedel-chat-root chat))
      (setq-local mevedel-chat--owner chat)
      (setq-local mevedel-session-current (mevedel-chat-session chat))
      ;; Repair events name the agent whose call it was.
      (setq-local mevedel-tool-repair-origin (or (mevedel-chat-agent chat) "/root"))
      (setq-local gptel-include-tool-results t)
      (setq-local gptel-confirm-tool-calls nil)
      (setq-local gptel-use-tools t)
      ;; One provider cache per session and agent (mevedel-gptel.el).
      (setq-local mevedel-gptel-cache-key
                  (concat "mevedel-"
                          (substring (secure-hash 'sha256
                                                  (format "%s %s" (mevedel-session-id
                                                                   (mevedel-chat-session chat))
                                                          (or (mevedel-chat-agent chat) "")))
                                     0 32)))
      (add-hook 'mevedel-gptel-dispatch-functions #'mevedel-chat--keep-canceller nil t)
      (add-hook 'kill-buffer-hook #'mevedel-chat--data-buffer-killed nil t))
    buffer))

(defvar-local mevedel-chat--owner nil
  "The chat owning this data buffer.")

(defsubst mevedel-chat-of-buffer (buffer)
  "Return the chat whose data buffer is BUFFER, or nil.
Inline: the permission hooks ask it for every tool call."
  (and (buffer-live-p buffer)
       (let ((chat (buffer-local-value 'mevedel-chat--owner buffer)))
         (and (mevedel-chat-p chat) chat))))

(defun mevedel-chat--data-buffer-killed ()
  "Forget the chat whose data buffer is being killed, aborting its turn.
A root chat is saved and its session closed; a child agent's chat
shares its session with the root, which stays open."
  (when-let* ((chat mevedel-chat--owner))
    (ignore-errors (mevedel-chat-abort chat))
    (mevedel-chat--save chat 'kill)
    (if (mevedel-chat-agent chat)
        (when-let* ((store (mevedel-chat-store chat)))
          (ignore-errors (mevedel-core-store-flush store 2))
          (mevedel-core-store-close store)
          (setf (mevedel-chat-store chat) nil))
      (mevedel-session-close (mevedel-chat-session chat))
      ;; A read-only chat is not its workspace's live one.
      (when (eq (gethash (mevedel-chat-root chat) mevedel-chat--chats) chat)
        (remhash (mevedel-chat-root chat) mevedel-chat--chats)))))

(defun mevedel-chat-backend-effective (chat)
  "Return the gptel backend for the next turn of CHAT.
That is CHAT's own backend, else `gptel-backend'; without either,
gptel's default (OpenAI) is chosen and recorded in `gptel-backend'."
  (or (mevedel-chat-backend chat)
      (mevedel-gptel-default-backend)))

(defun mevedel-chat-set-model (chat backend model)
  "Give CHAT the gptel BACKEND and MODEL from its next turn on, and save them.
gptel then answers CHAT, whatever `mevedel-provider' says.  The choice
is this session's own: other sessions and gptel's defaults keep
theirs.  Observers hear `status'."
  (setf (mevedel-chat-backend chat) backend
        (mevedel-chat-model chat) model
        (mevedel-chat-placement chat) (list 'gptel))
  (mevedel-chat--save chat 'change)
  (mevedel-chat-notify chat 'status))

(defun mevedel-chat-model-effective (chat)
  "Return the gptel model for the next turn of CHAT."
  (or (mevedel-chat-model chat) (default-value 'gptel-model)))

(defun mevedel-chat-busy-p (chat)
  "Return non-nil during a turn of CHAT, its prompt's hooks or a compaction."
  (and (or (mevedel-chat-turn chat) (mevedel-chat-compacting chat) (mevedel-chat-hooking chat))
       t))

;;;; Observers

(defun mevedel-chat-observe (chat function)
  "Call FUNCTION with (EVENT CHAT . ARGS) for each event of CHAT.
EVENT is one of `turn-start', `text' (ARGS: the chunk), `tools-start'
\(the records), `tool-results' (the records, in call order),
`permission' (the request), `unknown-tool' (the name of a tool the
model called that its catalog does not have, see
`mevedel-chat-note-unknown-tool'),
`retry' (a failed sample is sent again after a pause: the plist
\(:message :retry :of :delay), the attempt's text already gone),
`tool-updated' (the ID of a call whose render-data changed after it
settled, see `mevedel-chat-update-render-data'), `tool-progress' (the
ID of a call whose live progress changed, see
`mevedel-chat-set-progress'), `status', `truncated' (turns were
removed, see `mevedel-chat-truncate'), `queued' (the queued messages
changed, see `mevedel-chat-queue'), `delivered' (queued messages joined
the turn: the list of texts), `appended' (a turn mevedel wrote, see
`mevedel-chat-append-reply'), `goal' (the session's Goal changed, see
mevedel-goal.el) and `turn-end' (the outcome: `done', `error' or
`abort')."
  (cl-pushnew function (mevedel-chat-observers chat)))

(defun mevedel-chat-unobserve (chat function)
  "Stop calling FUNCTION for CHAT's events."
  (setf (mevedel-chat-observers chat) (delq function (mevedel-chat-observers chat))))

(defun mevedel-chat--save (chat point &rest args)
  "Save CHAT at POINT of its life, with ARGS (see `mevedel-chat-save-functions')."
  (apply #'run-hook-with-args 'mevedel-chat-save-functions chat point args))

(defun mevedel-chat-notify (chat event &rest args)
  "Tell CHAT's observers about EVENT with ARGS; observer errors only warn."
  (dolist (observer (mevedel-chat-observers chat))
    (condition-case err
        (apply observer event chat args)
      (error (display-warning 'mevedel (format "Observer of %s failed: %s"
                                               event (error-message-string err)))))))

;;;; Live progress

(defconst mevedel-chat-progress-limit 256
  "Most calls of one chat with live progress kept at once.")

(defun mevedel-chat-set-progress (chat id progress)
  "Set the live PROGRESS plist of tool call ID of CHAT (nil to drop it).
PROGRESS is transient render-data (e.g. :state, :elapsed-ms,
:live-tail) that views show over the call's own while it runs; it is
never written to the transcript.  Observers hear `tool-progress'."
  (let ((table (mevedel-chat-progress chat)))
    (if progress
        (progn
          (when (and (>= (hash-table-count table) mevedel-chat-progress-limit)
                     (not (gethash id table)))
            (clrhash table))
          (puthash id progress table))
      (remhash id table))
    (mevedel-chat-notify chat 'tool-progress id)))

(defun mevedel-chat-call-progress (chat id)
  "Return the live progress plist of tool call ID of CHAT, or nil."
  (gethash id (mevedel-chat-progress chat)))

(defun mevedel-chat--reported-progress (event info)
  "Show a model's call's reported progress (INFO of EVENT) on its row.
Calls inside ToolCall programs are the program's (mevedel-ptc.el).
For `mevedel-pipeline-tool-event-hook'."
  (when-let* (((memq event '(progress settled)))
              ((eq (plist-get info :source) 'provider))
              (chat (mevedel-chat-of-buffer (plist-get info :data-buffer)))
              (id (plist-get info :tool-use-id)))
    (if (eq event 'progress)
        (mevedel-chat-set-progress chat id (list :progress-text (plist-get info :progress)))
      (when (plist-get (mevedel-chat-call-progress chat id) :progress-text)
        (mevedel-chat-set-progress chat id nil)))))

(add-hook 'mevedel-pipeline-tool-event-hook #'mevedel-chat--reported-progress)

(defun mevedel-chat-set-status (chat status &optional detail)
  "Set CHAT's STATUS (a symbol) and DETAIL (a string) and tell observers."
  (setf (mevedel-chat-status chat) status
        (mevedel-chat-status-detail chat) detail)
  (mevedel-chat-notify chat 'status))

;;;; System prompt and tools

(defun mevedel-chat--system-text (chat)
  "Return the system prompt for CHAT's next turn (mevedel-prompt.el).
A child agent's is the text frozen when it was created."
  (or (mevedel-chat-frozen-system chat)
      (mevedel-prompt-system-text chat)))

(defun mevedel-chat--roster-lines (chat)
  "Return the roster lines of the session families CHAT's requests can use.
For `mevedel-prompt-resource-roster-functions': work:// and artifact://
need a session that can keep files (they are made on first write);
live history://root a conversation, history://saved the workspace."
  (let ((session (and (mevedel-chat-p chat) (mevedel-chat-session chat))))
    (append
     (when (mevedel-session-durable-p session)
       (list "- work:// this session's working files; work://shared/ workspace notes"
             "- artifact:// saved tool output named in results"))
     (when (mevedel-chat-p chat)
       (list "- history://root this conversation; history://saved earlier sessions")))))

(add-hook 'mevedel-prompt-resource-roster-functions #'mevedel-chat--roster-lines -90)

;; What changed since the model last read it, and what the user's
;; mentions attach, go with the user's text of a turn; the environment
;; and a skill's tool restriction are refreshed and lifted at its end.
(add-hook 'mevedel-chat-message-functions #'mevedel-prompt-context-updates)
(add-hook 'mevedel-chat-message-functions #'mevedel-edited-files-update)
(add-hook 'mevedel-chat-message-functions #'mevedel-mentions-message-function t)
(add-hook 'mevedel-chat-continuation-mail-functions #'mevedel-edited-files-update)

(defvar mevedel-chat--preparing (make-hash-table :test #'eq :weakness 'key)
  "Chat -> the function that stops preparing its next turn's diffs.")

(defun mevedel-chat--prepare-edited-files (chat text send)
  "Hold CHAT's turn of TEXT while its edited-file diffs are made; then SEND.
A `mevedel-chat-before-send-functions' member, run after the others: the
status is `attaching' meanwhile; aborting stops the diffs and drops
the turn (TEXT stays in the input history).  If a turn started
meanwhile, TEXT waits in the queue."
  (when-let* ((stop (mevedel-edited-files-prepare
                     chat (lambda ()
                            (remhash chat mevedel-chat--preparing)
                            (mevedel-chat-set-status chat 'idle)
                            (condition-case err
                                (if (mevedel-chat-busy-p chat)
                                    (mevedel-chat-queue chat text)
                                  (funcall send))
                              (error (message "mevedel: %s" (error-message-string err))))))))
    (puthash chat (lambda ()
                    (funcall stop)
                    (push text (mevedel-chat-history chat))
                    (funcall send 'abort))
             mevedel-chat--preparing)
    (mevedel-chat-set-status chat 'attaching)
    t))

(defun mevedel-chat--stop-preparing (chat)
  "Stop preparing CHAT's next turn; non-nil if it was.
A `mevedel-chat-abort-functions' member."
  (when-let* ((stop (gethash chat mevedel-chat--preparing)))
    (remhash chat mevedel-chat--preparing)
    (mevedel-chat-set-status chat 'idle)
    (funcall stop)
    t))

(defun mevedel-chat--edited-files-post-tool-use (context _outcome)
  "Make the edited-file diffs before the chat of CONTEXT's call continues.
A PostToolUse (and failure) member of the pipeline."
  (when-let* ((chat (mevedel-chat-of-buffer (plist-get context :data-buffer))))
    (mevedel-edited-files-post-tool-use chat context)))

(add-hook 'mevedel-chat-before-send-functions #'mevedel-chat--prepare-edited-files 90)
(add-hook 'mevedel-chat-abort-functions #'mevedel-chat--stop-preparing)
(add-hook 'mevedel-pipeline-post-tool-use-functions #'mevedel-chat--edited-files-post-tool-use)
(add-hook 'mevedel-pipeline-post-tool-use-failure-functions
          #'mevedel-chat--edited-files-post-tool-use)
(add-hook 'mevedel-chat-accepted-functions #'mevedel-prompt-note-accepted)

(defun mevedel-chat--forget-history (chat)
  "Read CHAT's next request from its text, without the provider history.
A prompt reset (after a compaction) starts a new cached prefix."
  (mevedel-gptel-forget-history (mevedel-chat-data-buffer chat)))

(add-hook 'mevedel-prompt-reset-functions #'mevedel-chat--forget-history)
(add-hook 'mevedel-chat-idle-functions #'mevedel-environment-turn-ended)
(add-hook 'mevedel-chat-idle-functions #'mevedel-skills-turn-ended)

(defun mevedel-chat--refresh-agent-names (chat &rest _)
  "Read the agent roles of CHAT's workspace for the composer's @NAME."
  (mevedel-mentions-refresh-agent-names (mevedel-chat-root chat)))
(add-hook 'mevedel-chat-idle-functions #'mevedel-chat--refresh-agent-names)

(defun mevedel-chat-tools (chat)
  "Return the gptel tools offered to the model of CHAT.
They are those of every native mevedel tool, or a child agent's
frozen set: an empty one stays empty, never all tools."
  (if (mevedel-chat-agent chat)
      (mevedel-chat-frozen-tools chat)
    (mevedel-gptel-tools)))

;;;; Tool calls

(defun mevedel-chat--handle-tools-start (fsm)
  "Tell observers about the tool invocations of FSM."
  (let* ((info (gptel-fsm-info fsm))
         (chat (plist-get info :context)))
    (when (mevedel-chat-p chat)
      (setf (mevedel-chat-live-calls chat)
            (mevedel-gptel-in-call-order info (plist-get info :tool-use)))
      (mevedel-chat--save chat 'calls (mevedel-chat-live-calls chat))
      (mevedel-chat-set-status chat 'tools)
      (mevedel-chat-notify chat 'tools-start (mevedel-chat-live-calls chat))
      (dolist (name (mevedel-gptel-unknown-tool-names info))
        (mevedel-chat-note-unknown-tool chat name)))))

(defun mevedel-chat-note-unknown-tool (chat name)
  "Tell CHAT's observers that its model called NAME, a tool it was not offered.
The call is answered with an error and the turn goes on, so nothing
else would show that the model asked for what it does not have."
  (mevedel-chat-notify chat 'unknown-tool name))

(defun mevedel-chat--handle-results-ready (fsm)
  "Keep render-data out of the tool results FSM sends to the model.
Each call's full result (render-data block included) is kept under
:mevedel-result for the data buffer."
  (dolist (record (plist-get (gptel-fsm-info fsm) :tool-use))
    (let ((result (plist-get record :result)))
      (when (and (stringp result) (not (plist-member record :mevedel-result)))
        (plist-put record :mevedel-result result)
        (plist-put record :result
                   (mevedel-render-data-strip result (plist-get record :id)))))))

(defun mevedel-chat--strip-render-data ()
  "Remove render-data blocks from the tool results of this prompt buffer.
A prompt transform: each block bound to its own call's ID goes, so
render-data never reaches the model."
  (let ((regions nil) (pos (point-min)))
    (while (< pos (point-max))
      (let ((next (next-single-property-change pos 'gptel nil (point-max)))
            (value (get-text-property pos 'gptel)))
        (when (eq (car-safe value) 'tool)
          (push (list pos next (cdr value)) regions))
        (setq pos next)))
    (pcase-dolist (`(,start ,end ,id) regions)
      (let* ((text (buffer-substring start end))
             (stripped (mevedel-render-data-strip text id)))
        (unless (eq stripped text)
          (save-excursion
            (goto-char start)
            (delete-region start end)
            (insert stripped)))))))

;;;; Sending a turn

(defun mevedel-chat--make-fsm ()
  "Return the state machine of a mevedel turn: gptel-send's plus our handlers."
  (mevedel-gptel-send-fsm
   `((TRET :before-results ,#'mevedel-chat--handle-results-ready)
     (TOOL :before ,#'mevedel-chat--handle-tools-start)
     (WAIT :after ,#'mevedel-chat--handle-wait)
     (TYPE :after ,#'mevedel-chat--handle-type)
     (TOOL :before ,#'mevedel-chat--note-accepted)
     (DONE :before ,#'mevedel-chat--note-accepted)
     (DONE :after ,#'mevedel-chat--handle-done)
     (RTRY :after ,#'mevedel-chat--handle-retry)
     (ERRS :after ,#'mevedel-chat--handle-error)
     (ABRT :after ,#'mevedel-chat--handle-abort))))

(defun mevedel-chat--turn-label (text)
  "Return the first line of TEXT, shortened, to name its turn."
  (let ((line (car (split-string (string-trim text) "\n"))))
    (truncate-string-to-width (or line "") 72 nil nil "…")))

(defun mevedel-chat-truncate (chat turn)
  "Remove TURN and every later turn from CHAT's conversation.
TURN is one of `mevedel-chat-turns'.  The data buffer loses the text
from the turn's start on, so the model no longer sees it; the view is
drawn again by observers of `truncated'."
  (when (mevedel-chat-busy-p chat)
    (user-error "A turn is running in %s; abort it first" (mevedel-chat-name chat)))
  (let ((tail (memq turn (mevedel-chat-turns chat))))
    (unless tail
      (error "Turn %s is not one of this chat's" (plist-get turn :id)))
    (with-current-buffer (mevedel-chat-data-buffer chat)
      (let ((inhibit-read-only t))
        (delete-region (plist-get turn :start) (point-max))))
    (setf (mevedel-chat-turns chat) (cdr tail)
          (mevedel-chat-turn-start chat) (plist-get (cadr tail) :start))
    (mevedel-chat--save chat 'change)
    (mevedel-chat-notify chat 'truncated)))

(defun mevedel-chat-append-reply (chat notice hidden reply)
  "Append to idle CHAT a turn mevedel wrote: NOTICE, HIDDEN, then REPLY.
A workflow such as /review ends this way.  NOTICE is what the view
shows of the user's side (the model never reads it), HIDDEN user-role
text the model reads and the view leaves out (the record of what was
asked and answered, e.g. a <user_action> block), REPLY the assistant's
answer both read.  The turn is saved; observers hear `appended'."
  (mevedel-chat--append-turn
   chat notice
   (lambda ()
     (save-excursion
       (goto-char (point-max))
       (insert "\n\n" (gptel-prompt-prefix-string)
               (propertize (concat (string-trim hidden) "\n") 'mevedel-mail t)
               "\n" (propertize (string-trim reply) 'gptel 'response) "\n")))))

(defun mevedel-chat-append-handle (chat notice id name args render-data)
  "Append to idle CHAT a turn of NOTICE and a row hidden from the model.
The row is a settled call ID of the tool NAME with ARGS and
RENDER-DATA, drawn by NAME's renderer and updated with
`mevedel-chat-update-render-data', as a call of the model's would be;
a workflow that starts an agent itself (/review) shows its handle
this way.  The model never reads it: it is marked `mevedel-handle',
which every request drops (`mevedel-chat--drop-handles').  The turn
is saved; observers hear `appended'."
  (mevedel-chat--append-turn
   chat notice
   (lambda ()
     (let ((from (point-max))
           (inhibit-read-only t))
       (mevedel-gptel-append-settled-call id name args (mevedel-render-data-encode render-data id))
       (put-text-property from (point-max) 'mevedel-handle t)))))

(defun mevedel-chat--append-turn (chat notice insert)
  "Append to idle CHAT a turn mevedel wrote: NOTICE, then INSERT's text.
INSERT is called in CHAT's data buffer after the notice.  The turn is
listed and saved; observers hear `appended'."
  (when (mevedel-chat-busy-p chat)
    (error "A turn is running in %s" (mevedel-chat-name chat)))
  (let* ((buffer (mevedel-chat-data-buffer chat))
         (start (progn (mevedel-transcript-complete buffer)
                       (with-current-buffer buffer (copy-marker (point-max))))))
    (mevedel-chat-insert-notice chat 'workflow notice)
    (with-current-buffer buffer (funcall insert))
    (push (list :id (format "%x" (random most-positive-fixnum))
                :label (mevedel-chat--turn-label notice) :start start)
          (mevedel-chat-turns chat))
    (setf (mevedel-chat-turn-start chat) start)
    (mevedel-chat--save chat 'append)
    (mevedel-chat-notify chat 'appended)))

(defun mevedel-chat--drop-handles ()
  "Remove the rows of `mevedel-chat-append-handle' from this prompt buffer.
A prompt transform: the model made no such call, so it never sees one."
  (let ((pos (point-min)) (regions nil))
    (while (setq pos (text-property-any pos (point-max) 'mevedel-handle t))
      (let ((end (or (text-property-not-all pos (point-max) 'mevedel-handle t) (point-max))))
        (push (cons pos end) regions)
        (setq pos end)))
    (pcase-dolist (`(,start . ,end) regions)
      (delete-region start end))))

(cl-defun mevedel-chat-send (chat text &key on-done background hooked)
  "Send TEXT as the user's next message in CHAT.
ON-DONE, if non-nil, is called with CHAT and the outcome (`done',
`error' or `abort') when the turn ends.  BACKGROUND, a string, marks a
turn the harness starts on its own (a background wake): the model reads
TEXT, but the view shows BACKGROUND as a notice instead of a user line,
and TEXT stays out of the input history.  When a member of
`mevedel-chat-before-send-functions' holds the turn (older turns are
compacted first when the request would fill too much of the model's
context), the turn starts after that and the value is nil instead of
the turn.  The user's UserPromptSubmit hooks see TEXT first (not
BACKGROUND turns', nor those of a HOOKED text, whose hooks already
accepted it: a child agent's initial task); while they run, or when
they block it, the value is nil too, and a blocked prompt's ON-DONE
gets `blocked'."
  (when-let* ((owner (mevedel-chat-read-only chat)))
    (user-error "Read-only: %s; fork it to continue here"
                (mevedel-session-in-use-message (mevedel-session-id (mevedel-chat-session chat))
                                                owner)))
  (when (mevedel-chat-busy-p chat)
    (user-error "A turn is already running in %s; abort it first" (mevedel-chat-name chat)))
  (when (string-blank-p text)
    (user-error "Nothing to send"))
  (if (or background hooked)
      (mevedel-chat--send-when-ready chat text on-done background)
    (let ((turn nil) (sync t))
      (setf (mevedel-chat-hooking chat) t)
      (condition-case err
          (let ((stop (mevedel-hooks-prompt-submit
                       (mevedel-chat-session chat) text
                       (lambda (blocked)
                         (let ((sent (mevedel-chat--after-prompt-hooks
                                      chat text on-done blocked sync)))
                           (when sync (setq turn sent))))
                       (mevedel-chat-agent chat))))
            (when (mevedel-chat-hooking chat)
              ;; They run in the background: an abort stops them.
              (setf (mevedel-chat-hooking chat)
                    (lambda ()
                      (funcall stop)
                      (push text (mevedel-chat-history chat))
                      (when on-done (funcall on-done chat 'abort))))
              (mevedel-chat-set-status chat 'hooks "UserPromptSubmit")))
        (error (setf (mevedel-chat-hooking chat) nil)
               (signal (car err) (cdr err))))
      (setq sync nil)
      turn)))

(defun mevedel-chat--after-prompt-hooks (chat text on-done blocked sync)
  "Send TEXT in CHAT now that its UserPromptSubmit hooks answered; return the turn.
BLOCKED is the hooks' reason to keep TEXT from the model, or nil.
SYNC non-nil says they answered at once, within `mevedel-chat-send',
whose caller then hears a failure to send; later, it is a message.
ON-DONE is as for `mevedel-chat-send'."
  (setf (mevedel-chat-hooking chat) nil)
  (unless sync (mevedel-chat-set-status chat 'idle))
  (cond (blocked (mevedel-chat--prompt-blocked chat text blocked on-done) nil)
        (sync (mevedel-chat--send-when-ready chat text on-done nil))
        (t (condition-case err
               (mevedel-chat--send-when-ready chat text on-done nil)
             (error (message "mevedel: %s" (error-message-string err)) nil)))))

(defun mevedel-chat--prompt-blocked (chat text reason on-done)
  "Tell CHAT's user that a hook blocked the prompt TEXT for REASON.
TEXT stays in the input history; ON-DONE gets `blocked'."
  (push text (mevedel-chat-history chat))
  (mevedel-chat-insert-notice chat 'hook (concat "Prompt blocked by a hook: " reason))
  (setf (mevedel-chat-status-detail chat) reason)
  (mevedel-chat-notify chat 'truncated)
  (when on-done (funcall on-done chat 'blocked)))

(defun mevedel-chat--send-when-ready (chat text on-done background)
  "Send TEXT in CHAT, unless `mevedel-chat-before-send-functions' hold it.
Return the turn, or nil when it is held (it starts later).  ON-DONE
and BACKGROUND are as for `mevedel-chat-send'."
  (let ((send (lambda (&optional outcome)
                (if (eq outcome 'abort)
                    (when on-done (funcall on-done chat 'abort))
                  (mevedel-chat--send-now chat text on-done background)))))
    (unless (run-hook-with-args-until-success 'mevedel-chat-before-send-functions
                                              chat text send)
      (funcall send))))

(define-error 'mevedel-chat-backend-error
              "The backend cannot take a request" 'user-error)

(defun mevedel-chat--send-now (chat text on-done background)
  "Start the turn of CHAT sending TEXT.
ON-DONE and BACKGROUND are as for `mevedel-chat-send'.  A backend
that cannot take the request (`mevedel-gptel-backend-problem') is a
`mevedel-chat-backend-error' before anything changes; any other
failure before the request is on its way undoes the turn, so the
chat is never left waiting for a request that was not sent.  Either
way TEXT stays in the input history."
  (let* ((provider (run-hook-with-args-until-success 'mevedel-chat-provider-functions chat))
         (backend (unless provider (mevedel-chat-backend-effective chat)))
         (model (unless provider (mevedel-chat-model-effective chat)))
         (buffer (mevedel-chat-data-buffer chat)))
    (mevedel-transcript-complete buffer)
    (unless background
      (push text (mevedel-chat-history chat))
      (unless (mevedel-chat-title chat)
        (setf (mevedel-chat-title chat) (mevedel-chat--turn-label text))))
    (when-let* ((problem (and backend (mevedel-gptel-backend-problem backend))))
      (signal 'mevedel-chat-backend-error (list problem)))
    (let ((start (with-current-buffer buffer (point-max))))
      (condition-case err
          (mevedel-chat--start-turn chat text on-done background
                                    (or provider backend) model)
        (error
         (mevedel-chat--undo-start chat start)
         (signal (car err) (cdr err)))))))

(defun mevedel-chat--undo-start (chat start)
  "Undo a turn of CHAT whose request failed to start; its text began at START."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (let ((inhibit-read-only t))
      (delete-region (min start (point-max)) (point-max))))
  (when (eq (car (mevedel-chat-turns chat)) (mevedel-chat-turn chat))
    (pop (mevedel-chat-turns chat)))
  (mevedel-chat--save chat 'undo)
  (setf (mevedel-chat-turn chat) nil
        (mevedel-chat-fsm chat) nil
        (mevedel-chat-on-done chat) nil
        (mevedel-chat-live-calls chat) nil)
  (mevedel-chat-set-status chat 'idle)
  (mevedel-chat-notify chat 'truncated))

(defun mevedel-chat--start-turn (chat text on-done background backend model)
  "Write TEXT as CHAT's next turn and send it to BACKEND's MODEL.
BACKEND may instead be a provider's function (see
`mevedel-chat-provider-functions'), which then sends the turn.
ON-DONE and BACKGROUND are as for `mevedel-chat-send'."
  (let ((buffer (mevedel-chat-data-buffer chat))
        (provider (and (functionp backend) backend)))
    (with-current-buffer buffer
      (unless provider
        (setq-local gptel-backend backend
                    gptel-model model
                    gptel-system-prompt (mevedel-chat--system-text chat)
                    gptel-tools (mevedel-chat-tools chat)))
      (goto-char (point-max))
      (let ((start (point))
            (mail (let ((mevedel-chat-turn-text (unless background text)))
                    (cl-loop for function in mevedel-chat-message-functions
                             append (funcall function chat)))))
        (when background
          (mevedel-chat-insert-notice chat 'background background)
          (goto-char (point-max)))
        (unless (bobp) (insert "\n\n"))
        (insert (gptel-prompt-prefix-string))
        (setf (mevedel-chat-mail chat)
              (and mail (cons (copy-marker (point))
                              (progn (dolist (block mail)
                                       (insert (propertize (concat block "\n") 'mevedel-mail t)))
                                     (copy-marker (point)))))
              (mevedel-chat-accepted chat) nil)
        (insert (if background
                    (propertize (string-trim text) 'mevedel-mail t)
                  (string-trim text))
                "\n")
        (setf (mevedel-chat-turn-start chat) (copy-marker start)))
      (let* ((turn (list :id (format "%x" (random most-positive-fixnum))
                         :label (mevedel-chat--turn-label (or background text))
                         :start (mevedel-chat-turn-start chat)))
             (fsm (unless provider (mevedel-chat--make-fsm))))
        (push turn (mevedel-chat-turns chat))
        (run-hook-with-args 'mevedel-chat-turn-functions chat turn)
        (setf (mevedel-chat-turn chat) turn
              (mevedel-chat-fsm chat) fsm
              (mevedel-chat-on-done chat) on-done
              (mevedel-chat-live-calls chat) nil)
        (mevedel-chat-set-status chat 'waiting)
        (mevedel-chat--save chat 'begin (unless background text))
        (mevedel-chat-notify chat 'turn-start text)
        (goto-char (point-max))
        (if provider
            (funcall provider chat
                     (append (when-let* ((mail (mevedel-chat-mail chat)))
                               (list (buffer-substring-no-properties (car mail) (cdr mail))))
                             (list text)))
          (gptel-request nil
            :buffer buffer
            :position (point-max-marker)
            :stream gptel-stream
            :callback #'mevedel-chat--callback
            :context chat
            :transforms (append gptel-prompt-transform-functions
                                (list #'mevedel-chat--strip-render-data
                                      #'mevedel-chat--drop-handles)
                                mevedel-chat-prompt-transform-functions)
            :fsm fsm)
          (mevedel-gptel-track-call-order fsm))
        turn))))

(defun mevedel-chat--callback (response info &optional raw)
  "Handle RESPONSE for the request with INFO; RAW skips transformation."
  (let ((chat (plist-get info :context)))
    (pcase response
      ((pred stringp)
       (mevedel-gptel-insert-response response info raw)
       (unless raw
         (mevedel-chat-set-status chat 'streaming)
         (mevedel-chat-notify chat 'text response)))
      (`(tool-result . ,_)
       (mevedel-chat--insert-results chat info))
      (`(tool-call . ,calls)
       ;; Only reached when a user's pre-tool-call hook asks for gptel's
       ;; own confirmation.  mevedel's permission check runs inside each
       ;; tool, so run them rather than block in a process callback.
       (mevedel-gptel-run-held-calls calls))
      (`(reasoning . ,_)
       (mevedel-gptel-insert-response response info raw))
      (_ nil))))

(defun mevedel-chat--insert-results (chat info)
  "Insert the finished tool invocations of INFO into the data buffer of CHAT.
Each keeps its own ID, arguments and full result (render-data block
included), in the model's call order."
  (let ((records (mevedel-gptel-in-call-order info (plist-get info :tool-use))))
    (mevedel-gptel-insert-tool-results
     info records (lambda (record)
                    (if (plist-member record :mevedel-result)
                        (plist-get record :mevedel-result)
                      (plist-get record :result))))
    (mevedel-chat--retry-updates chat)
    (setf (mevedel-chat-live-calls chat) nil)
    (mevedel-chat--save chat 'results)
    (mevedel-chat-set-status chat 'waiting)
    (mevedel-chat-notify chat 'tool-results records)))

(defun mevedel-chat--handle-wait (fsm)
  "Note that FSM's request was sent."
  (when-let* ((chat (plist-get (gptel-fsm-info fsm) :context))
              ((mevedel-chat-p chat)))
    (mevedel-chat-set-status chat 'waiting)))

(defun mevedel-chat--note-accepted (fsm)
  "Note that the backend accepted the request of FSM's turn, once per turn."
  (when-let* ((chat (plist-get (gptel-fsm-info fsm) :context))
              ((mevedel-chat-p chat))
              ((eq (mevedel-chat-fsm chat) fsm))
              ((not (mevedel-chat-accepted chat))))
    (setf (mevedel-chat-accepted chat) t)
    (run-hook-with-args 'mevedel-chat-accepted-functions chat)))

(defun mevedel-chat--handle-type (fsm)
  "Note an accepted request when FSM's response begins with HTTP 200."
  (when (mevedel-gptel-accepted-p (gptel-fsm-info fsm))
    (mevedel-chat--note-accepted fsm)))

(defun mevedel-chat--withdraw-mail (chat)
  "Take the mail of CHAT's turn out of its data buffer, unless it was accepted.
The records stay unread for a later turn."
  (pcase (mevedel-chat-mail chat)
    (`(,start . ,end)
     (when (and (not (mevedel-chat-accepted chat)) (marker-buffer start))
       (with-current-buffer (marker-buffer start)
         (let ((inhibit-read-only t))
           (delete-region start end))))
     (set-marker start nil)
     (set-marker end nil)))
  (setf (mevedel-chat-mail chat) nil))

(defun mevedel-chat-insert-notice (chat kind text)
  "Append a notice of KIND with TEXT to CHAT's data buffer.
Notices are never sent to the model."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (save-excursion
      (goto-char (point-max))
      (insert (propertize (format "\n\n[%s]\n" text)
                          'gptel 'ignore 'mevedel-notice kind 'front-sticky nil)))))

(defun mevedel-chat--finish (chat outcome)
  "End CHAT's turn with OUTCOME and tell observers and the turn's caller."
  (let ((on-done (mevedel-chat-on-done chat)))
    ;; Updates still waiting for their call now never find it.
    (mevedel-chat--retry-updates chat)
    (setf (mevedel-chat-updates chat) nil)
    (mevedel-chat--withdraw-mail chat)
    ;; Whatever the turn still asks the user is moot now.
    (mevedel-interaction-cancel-request chat (mevedel-chat-turn chat))
    (setf (mevedel-chat-turn chat) nil
          (mevedel-chat-on-done chat) nil
          (mevedel-chat-live-calls chat) nil
          (mevedel-chat-cancellers chat) nil)
    (mevedel-chat-set-status chat (pcase outcome ('done 'idle) (_ outcome))
                             (mevedel-chat-status-detail chat))
    (mevedel-chat--save chat 'end)
    (mevedel-chat-notify chat 'turn-end outcome)
    (mevedel-chat--send-queued chat outcome)
    (when on-done (funcall on-done chat outcome))
    (run-hook-with-args 'mevedel-chat-idle-functions chat outcome)))

(defun mevedel-chat-provider-accepted (chat)
  "Note that the provider driving CHAT took its turn's prompt, once per turn."
  (unless (mevedel-chat-accepted chat)
    (setf (mevedel-chat-accepted chat) t)
    (run-hook-with-args 'mevedel-chat-accepted-functions chat)))

(defun mevedel-chat-provider-done (chat turn outcome &optional detail)
  "End TURN of CHAT, driven by a provider, with OUTCOME and DETAIL.
OUTCOME is `done' (Stop hooks run first, as for gptel), `error' (DETAIL
says what failed, word for word) or `abort'.  A TURN that is no longer
CHAT's running one is left alone."
  (when (and turn (eq (mevedel-chat-turn chat) turn))
    (pcase outcome
      ('done (setf (mevedel-chat-status-detail chat) nil)
             (mevedel-chat--stop-hooks chat))
      ('error (mevedel-chat-insert-notice chat 'error (concat "Request failed: " detail))
              (setf (mevedel-chat-status-detail chat) detail)
              (mevedel-chat--finish chat 'error))
      (_ (mevedel-chat-insert-notice chat 'abort "Aborted")
         (setf (mevedel-chat-status-detail chat) nil)
         (mevedel-chat--finish chat 'abort)))))

(defun mevedel-chat--handle-done (fsm)
  "Finish the turn of FSM successfully."
  (when-let* ((chat (plist-get (gptel-fsm-info fsm) :context))
              ((mevedel-chat-p chat))
              ((eq (mevedel-chat-fsm chat) fsm)))
    (setf (mevedel-chat-status-detail chat) nil)
    (mevedel-chat--stop-hooks chat)))

(defun mevedel-chat--last-answer (chat)
  "Return the last assistant text of CHAT's current turn, or nil."
  (when-let* ((start (mevedel-chat-turn-start chat)))
    (let (answer)
      (dolist (segment (mevedel-history-segments (mevedel-chat-data-buffer chat)
                                                 (marker-position start))
                       answer)
        (when (eq (plist-get segment :type) 'response)
          (setq answer (string-trim (plist-get segment :text))))))))

(defvar mevedel-chat--hook-context-sent (make-hash-table :test #'eq :weakness 'key)
  "The hook context blocks each chat's unaccepted turn carries.")

(defun mevedel-chat--hook-context (chat)
  "Return the context of CHAT's hooks waiting for its turn, as mail blocks.
They are forgotten only once the backend accepts the turn's request, so
a request that fails before that sends them again with the next turn."
  (let ((blocks (mevedel-hooks-context (mevedel-chat-session chat) (mevedel-chat-agent chat))))
    (if blocks
        (puthash chat blocks mevedel-chat--hook-context-sent)
      (remhash chat mevedel-chat--hook-context-sent))
    blocks))

(defun mevedel-chat--hook-context-accepted (chat)
  "Forget the hook context that CHAT's accepted request carried."
  (when-let* ((blocks (gethash chat mevedel-chat--hook-context-sent)))
    (remhash chat mevedel-chat--hook-context-sent)
    (mevedel-hooks-forget-context (mevedel-chat-session chat) blocks (mevedel-chat-agent chat))))

(defun mevedel-chat--hook-context-idle (chat _outcome)
  "Forget the prompt's own hook context of CHAT's turn if never accepted.
UserPromptSubmit hooks run again when the prompt is sent again; the
rest (SessionStart) waits for the next turn."
  (when-let* ((blocks (gethash chat mevedel-chat--hook-context-sent)))
    (remhash chat mevedel-chat--hook-context-sent)
    (mevedel-hooks-forget-context (mevedel-chat-session chat)
                                  (cl-remove-if-not #'mevedel-hooks-prompt-context-p blocks)
                                  (mevedel-chat-agent chat))))

(add-hook 'mevedel-chat-message-functions #'mevedel-chat--hook-context)
(add-hook 'mevedel-chat-accepted-functions #'mevedel-chat--hook-context-accepted)
(add-hook 'mevedel-chat-idle-functions #'mevedel-chat--hook-context-idle)

(defun mevedel-chat--hook-stop-turn (session reason &optional buffer)
  "Abort the turn that a tool hook stopped for REASON.
That is the turn of the chat of data BUFFER, the call's conversation:
a child agent's call ends its own turn, not the root's.  Without
BUFFER, SESSION's root chat.  The hook's own call is cancelled with
the turn's other calls.  A `mevedel-hooks-stop-turn-functions' member."
  (when-let* ((chat (or (and (buffer-live-p buffer) (mevedel-chat-of-buffer buffer))
                        (cl-find-if (lambda (chat) (and (eq (mevedel-chat-session chat) session)
                                                        (not (mevedel-chat-agent chat))))
                                    (mevedel-chat-list))))
              ((mevedel-chat-abort chat)))
    (mevedel-chat-insert-notice chat 'hook (concat "A hook stopped the turn: " reason))
    (mevedel-chat-notify chat 'truncated)))

(add-hook 'mevedel-hooks-stop-turn-functions #'mevedel-chat--hook-stop-turn)

(defun mevedel-chat--stop-hooks (chat)
  "End CHAT's turn, unless its Stop hooks send it on with their reason.
The turn's ON-DONE then waits for the turn that goes on.  Aborting the
turn meanwhile stops the hooks."
  (let ((session (mevedel-chat-session chat))
        (turn (mevedel-chat-turn chat)))
    ;; Stop is the main assistant's; a child's turn ends with the
    ;; agent runtime's SubagentStop.
    (if (or (mevedel-chat-agent chat) (not (mevedel-hooks-any-p session 'Stop)))
        (mevedel-chat--finish chat 'done)
      (mevedel-chat-set-status chat 'hooks "Stop")
      (when-let* ((stop (mevedel-chat--run-stop-hooks chat session)))
        (push (lambda ()
                (funcall stop)
                (when (eq (mevedel-chat-turn chat) turn)
                  (mevedel-chat-insert-notice chat 'abort "Aborted")
                  (mevedel-chat--finish chat 'abort)))
              (mevedel-chat-cancellers chat))))))

(defun mevedel-chat--run-stop-hooks (chat session)
  "Run SESSION's Stop hooks for CHAT's turn; return what stops them."
  (mevedel-hooks-stop
   session (mevedel-chat--last-answer chat)
   (lambda (reason)
     (setf (mevedel-chat-status-detail chat) nil)
     (if (not reason)
         (mevedel-chat--finish chat 'done)
       (let ((on-done (mevedel-chat-on-done chat)))
         (setf (mevedel-chat-on-done chat) nil)
         (mevedel-chat--finish chat 'done)
         (if (mevedel-chat-busy-p chat)
             (when on-done (funcall on-done chat 'done))
           (mevedel-chat-send chat (concat "Stop hook feedback:\n" reason)
                              :on-done on-done
                              :background "A Stop hook sent the turn on")))))))

(defun mevedel-chat-error-message (info)
  "Return a one-line description of the error in request INFO."
  (or (plist-get (mevedel-gptel-failure info) :message) "unknown error"))

(defun mevedel-chat--handle-retry (fsm)
  "Tell observers that FSM's failed sample will be sent again.
The failed attempt's text is already out of the data buffer.
Observers hear `retry' with the plist (:message :retry :of :delay)."
  (when-let* ((info (gptel-fsm-info fsm))
              (chat (plist-get info :context))
              ((mevedel-chat-p chat))
              ((eq (mevedel-chat-fsm chat) fsm)))
    (let ((retry (plist-get info :mevedel-retry)))
      (mevedel-chat-set-status chat 'retrying
                               (format "%s; %s" (plist-get retry :message)
                                       (mevedel-recovery-describe retry)))
      (mevedel-chat-notify chat 'retry retry))))

(defun mevedel-chat--handle-error (fsm)
  "Finish the turn of FSM with an error."
  (when-let* ((info (gptel-fsm-info fsm))
              (chat (plist-get info :context))
              ((mevedel-chat-p chat))
              ((eq (mevedel-chat-fsm chat) fsm)))
    (let ((message (mevedel-chat-error-message info)))
      (mevedel-chat-insert-notice chat 'error (concat "Request failed: " message))
      (setf (mevedel-chat-status-detail chat) message)
      (mevedel-chat--finish chat 'error))))

(defun mevedel-chat--handle-abort (fsm)
  "Finish the turn of FSM as aborted."
  (when-let* ((chat (plist-get (gptel-fsm-info fsm) :context))
              ((mevedel-chat-p chat))
              ((eq (mevedel-chat-fsm chat) fsm))
              ((mevedel-chat-turn chat)))
    (mevedel-chat-settle-open-calls
     chat (mevedel-chat-live-calls chat)
     "Cancelled: the user interrupted the turn before this call finished.")
    (mevedel-chat-insert-notice chat 'abort "Aborted")
    (setf (mevedel-chat-status-detail chat) nil)
    (mevedel-chat--finish chat 'abort)))

(defvar mevedel-chat-abort-functions nil
  "Abnormal hook run with a chat to abort that has no running turn.
Each function may stop other work the user started in the chat (a
/review preparing its evidence) and returns non-nil if it did.")

(defun mevedel-chat-abort (chat)
  "Abort CHAT's running turn, if any.
The request stops first; then the turn's tool calls are cancelled,
which withdraws their permission cards.  A prompt still waiting for
its UserPromptSubmit hooks is not sent (it stays in the input
history).  Without a running turn, `mevedel-chat-abort-functions' may
stop other work.  Return non-nil when a turn, such a prompt or other
work was running."
  (cond
   ((functionp (mevedel-chat-hooking chat))
    (let ((stop (mevedel-chat-hooking chat)))
      (setf (mevedel-chat-hooking chat) nil)
      (mevedel-chat-set-status chat 'idle)
      (funcall stop)
      (mevedel-interaction-cancel-request chat 'idle))
    t)
   ((and (mevedel-chat-turn chat) (mevedel-chat-fsm chat))
    (let ((cancellers (mevedel-chat-cancellers chat)))
      (mevedel-gptel-abort (mevedel-chat-fsm chat) (mevedel-chat-data-buffer chat))
      ;; The turn is over: settle its tool calls (and their cards).
      (mapc #'funcall cancellers))
    t)
   (t (run-hook-with-args-until-success 'mevedel-chat-abort-functions chat))))

(defun mevedel-chat-settle-open-calls (chat pending text)
  "Settle with the result TEXT each call of CHAT in PENDING that has none yet.
Each call is a record (a plist with :id :name :args) or a list (ID NAME
ARGS).  TEXT may also be a function of ID, NAME and ARGS.  A call the
model made must have a result in the transcript, or the next request
is invalid for most backends."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (dolist (call pending)
      (pcase-let ((`(,id ,name ,args)
                   (if (keywordp (car-safe call))
                       (list (plist-get call :id) (plist-get call :name) (plist-get call :args))
                     call)))
        (unless (mevedel-chat-tool-region (current-buffer) id)
          (mevedel-gptel-append-settled-call
           id name args (if (functionp text) (funcall text id name args) text)))))))

;;;; Queued input

(defun mevedel-chat-queue (chat text)
  "Queue TEXT for CHAT's running turn; observers hear `queued'.
It is delivered as a user message after the current tool batch,
before the next sample; if the turn ends first, it starts the next
turn."
  (when (string-blank-p text) (user-error "Nothing to queue"))
  (setf (mevedel-chat-queued chat) (append (mevedel-chat-queued chat) (list (string-trim text))))
  (mevedel-chat-notify chat 'queued))

(defun mevedel-chat-unqueue (chat)
  "Take the newest queued message of CHAT back; return it, or nil."
  (when-let* ((queued (mevedel-chat-queued chat)))
    (setf (mevedel-chat-queued chat) (butlast queued))
    (mevedel-chat-notify chat 'queued)
    (car (last queued))))

(defun mevedel-chat--deliver-queued (info)
  "Return the mail and queued messages of the chat of request INFO, now delivered.
A `mevedel-gptel-continuation-functions' member: they join the
request that continues after a tool batch, each a user message, the
mail (`mevedel-chat-continuation-mail-functions') first."
  (when-let* ((chat (plist-get info :context))
              ((mevedel-chat-p chat)))
    (let ((mail (cl-loop for function in mevedel-chat-continuation-mail-functions
                         append (mapcar (lambda (block) (propertize block 'mevedel-mail t))
                                        (funcall function chat))))
          (queued (mevedel-chat-queued chat)))
      (when queued
        (setf (mevedel-chat-queued chat) nil)
        (dolist (text queued)
          (push text (mevedel-chat-history chat)))
        (mevedel-chat--save chat 'inputs queued)
        (mevedel-chat-notify chat 'queued)
        (mevedel-chat-notify chat 'delivered queued))
      (append mail (cl-loop for text in queued
                            collect text
                            append (mevedel-chat--queued-mentions chat text))))))

(defun mevedel-chat--queued-mentions (chat text)
  "Return the hidden blocks of the mentions in the queued TEXT of CHAT.
A mention that cannot be expanded (an ambiguous skill) says why."
  (when (string-match-p "[@$]" text)
    (mapcar (lambda (block) (propertize block 'mevedel-mail t))
            (condition-case err
                (mevedel-mentions-blocks chat text)
              (user-error (list (format "[The mentions of the message above were not \
expanded: %s]" (error-message-string err))))))))

(add-hook 'mevedel-gptel-continuation-functions #'mevedel-chat--deliver-queued)

(defun mevedel-chat--send-queued (chat outcome)
  "After a turn of CHAT ended with OUTCOME, send what was queued for it.
Only a turn that completed hands its queue on; after a failure or an
abort the queue waits for the user."
  (when (and (eq outcome 'done) (mevedel-chat-queued chat))
    (run-at-time 0 nil
                 (lambda ()
                   (when (and (buffer-live-p (mevedel-chat-data-buffer chat))
                              (not (mevedel-chat-busy-p chat))
                              (mevedel-chat-queued chat))
                     (let ((text (pop (mevedel-chat-queued chat))))
                       (mevedel-chat-notify chat 'queued)
                       (mevedel-chat-send chat text)))))))

;;;; Token usage

(defcustom mevedel-chat-context-windows nil
  "Context window sizes in tokens of models gptel has no size for.
An alist of (MODEL . TOKENS), MODEL a symbol as in `gptel-model'."
  :type '(alist :key-type symbol :value-type natnum))

(defun mevedel-chat-context-window (chat)
  "Return the context window of CHAT's model in tokens, or nil if unknown."
  (let ((model (mevedel-chat-model-effective chat)))
    (or (alist-get model mevedel-chat-context-windows)
        (and (symbolp model) (numberp (get model :context-window))
             (round (* 1000 (get model :context-window)))))))

(defun mevedel-chat-context-usage (chat)
  "Return (TOKENS WINDOW ESTIMATED) for the context of CHAT's next request.
TOKENS is what the provider reported for the last request, or, when
none was reported, an estimate from the transcript's size (four
characters a token), and then ESTIMATED is non-nil.  WINDOW is the
model's context window in tokens, or nil when unknown."
  (let ((reported (mevedel-chat-context-tokens chat)))
    (list (or reported
              (/ (buffer-size (mevedel-chat-data-buffer chat)) 4))
          (mevedel-chat-context-window chat)
          (not reported))))

;;;; Updating a settled call's render-data

(defconst mevedel-chat-update-queue-limit 64
  "Most render-data updates a chat keeps for calls not yet in its data buffer.")

(defun mevedel-chat-tool-region (buffer id)
  "Return (START . END) of tool call ID's region in data BUFFER, or nil.
The search goes backwards from the end, where the calls that change
\(the running turn's) are."
  (mevedel-transcript-complete buffer)
  (with-current-buffer buffer
    (save-excursion
      (save-restriction
        (widen)
        (goto-char (point-max))
        (when-let* ((match (text-property-search-backward
                            'gptel id (lambda (id value)
                                        (and (eq (car-safe value) 'tool)
                                             (equal (cdr value) id))))))
          (cons (prop-match-beginning match) (prop-match-end match)))))))

(defun mevedel-chat--apply-update (chat id function)
  "Apply FUNCTION to the render-data of call ID in CHAT's data buffer.
A call a ToolCall program made (ID is PARENT/N) has its render-data
in its program's audit (:ptc-children), and is updated there.  Return
nil when the call is not there, else `updated' or `unchanged'."
  (or (mevedel-chat--apply-own-update chat id function)
      (when (string-match "\\`\\(.+\\)/[0-9]+\\'" id)
        (mevedel-chat--apply-update
         chat (match-string 1 id)
         (lambda (render-data)
           (let* ((children (plist-get render-data :ptc-children))
                  (child (cl-find id children :key (lambda (c) (plist-get c :id))
                                  :test #'equal))
                  (old (plist-get child :render-data))
                  (new (and child (funcall function old))))
             (if (or (null new) (eq new old))
                 render-data
               (plist-put (copy-sequence render-data) :ptc-children
                          (mapcar (lambda (c)
                                    (if (eq c child) (plist-put (copy-sequence c) :render-data new) c))
                                  children)))))))))

(defun mevedel-chat--apply-own-update (chat id function)
  "Apply FUNCTION to the render-data of the row of call ID in CHAT's data buffer.
Return nil when the call has no row there, else `updated' or `unchanged'."
  (when-let* ((region (mevedel-chat-tool-region (mevedel-chat-data-buffer chat) id)))
    (with-current-buffer (mevedel-chat-data-buffer chat)
      (save-excursion
        (save-restriction
          (widen)
          (narrow-to-region (car region) (cdr region))
          (let* ((old (mevedel-render-data-extract (current-buffer) id))
                 (new (and old (funcall function old)))
                 (property (get-text-property (point-min) 'gptel))
                 (handle (get-text-property (point-min) 'mevedel-handle))
                 (inhibit-read-only t))
            (if (or (null new) (eq new old)
                    (not (mevedel-render-data-replace (current-buffer) id new)))
                'unchanged
              ;; The new block belongs to the call's region, like the old.
              (put-text-property (point-min) (point-max) 'gptel property)
              (when handle (put-text-property (point-min) (point-max) 'mevedel-handle handle))
              (mevedel-chat-notify chat 'tool-updated id)
              'updated)))))))

(defun mevedel-chat-update-render-data (chat id function &optional key)
  "Apply FUNCTION to the render-data of the settled tool call ID of CHAT.
FUNCTION takes the call's render-data plist and returns its new
render-data, or the same (`eq') plist to change nothing.  A new plist
replaces the call's hidden block in the data buffer (the model never
sees it) and observers hear `tool-updated'.  A call whose result is not
in the data buffer yet (other calls of its turn still run) gets the
update when the turn's results are inserted; KEY names that waiting
update, so a later one with the same ID and KEY replaces it.  Return
`updated', `unchanged', `queued', or nil when the call is unknown."
  (or (mevedel-chat--apply-update chat id function)
      (when (mevedel-chat-busy-p chat)
        (let* ((entry (list id key function))
               (kept (cl-remove-if (lambda (e) (and (equal (car e) id) (equal (cadr e) key)))
                                   (mevedel-chat-updates chat))))
          (setf (mevedel-chat-updates chat)
                (last (append kept (list entry)) mevedel-chat-update-queue-limit))
          'queued))))

(defun mevedel-chat--retry-updates (chat)
  "Retry the render-data edits waiting in CHAT; keep those still waiting."
  (let ((waiting (mevedel-chat-updates chat)))
    (setf (mevedel-chat-updates chat) nil)
    (dolist (entry waiting)
      (unless (mevedel-chat--apply-update chat (car entry) (nth 2 entry))
        (push entry (mevedel-chat-updates chat))))
    (setf (mevedel-chat-updates chat) (nreverse (mevedel-chat-updates chat)))))

;;;; Tools, permissions and the pipeline

(defun mevedel-chat--edited-files (event info)
  "Tell mevedel-edited-files.el of EVENT (INFO) of a call in a chat.
For `mevedel-pipeline-tool-event-hook'."
  (when-let* ((chat (mevedel-chat-of-buffer (plist-get info :data-buffer))))
    (mevedel-edited-files-observe chat event info)))

(add-hook 'mevedel-pipeline-tool-event-hook #'mevedel-chat--edited-files)

(defun mevedel-chat-permission-mode (chat)
  "Return the permission mode of CHAT's session."
  (mevedel-permissions-session-mode (mevedel-chat-session chat)))

(gv-define-setter mevedel-chat-permission-mode (mode chat)
  `(setf (mevedel-session-permission-mode (mevedel-chat-session ,chat)) ,mode))

(defun mevedel-chat-set-prompter (chat function)
  "Let FUNCTION show CHAT's permission cards, or nobody with nil.
FUNCTION is called with CHAT and each card's request (see
`mevedel-permissions-cards'; :agent and :request say who asked, as
`mevedel-chat-requester' does) and returns a function taking the card
away, or nil.  While it is set, the session's prompter asks through
the chat during a turn."
  (setf (mevedel-chat-prompter chat) function
        (mevedel-session-prompter (mevedel-chat-session chat))
        (and function
             (lambda (context answer) (mevedel-chat--ask chat context answer)))))

(defun mevedel-chat-requester (chat context)
  "Return (OWNER . REQUEST) of the tool call CONTEXT that asks in CHAT.
A child agent's call belongs to its path and its running request
\=(`mevedel-interaction-requester'); any other to \"/root\" and CHAT's
request (`mevedel-chat-request').  Its interactions are opened with
these, so that interrupting one request cancels only its own."
  (or (mevedel-interaction-requester context)
      (cons "/root" (mevedel-chat-request chat))))

(defun mevedel-chat-request (chat)
  "Return the token of CHAT's request: its running turn, else `idle'.
Between turns (a prompt's UserPromptSubmit hooks, SessionStart) the
request is `idle'; aborting the prompt cancels its interactions."
  (or (mevedel-chat-turn chat) 'idle))

(defun mevedel-chat-open-interaction (chat context &rest keys)
  "Open an interaction in CHAT for the tool call CONTEXT; return it.
KEYS are `mevedel-interaction-open''s; the owner and request are the
call's requester (`mevedel-chat-requester')."
  (let ((requester (mevedel-chat-requester chat context)))
    (apply #'mevedel-interaction-open chat
           :owner (car requester) :request (cdr requester) keys)))

(defun mevedel-chat-pending (chat)
  "Return the permission requests of CHAT's open cards, in the model's call order."
  (let ((order (and (mevedel-chat-fsm chat)
                    (plist-get (gptel-fsm-info (mevedel-chat-fsm chat)) :mevedel-call-order))))
    (cl-stable-sort (cl-loop for interaction in (mevedel-interaction-list chat)
                             when (eq (mevedel-interaction-kind interaction) 'permission)
                             collect (mevedel-interaction-data interaction))
                    #'<
                    :key (lambda (request)
                           (or (cl-position (plist-get request :id) order :test #'equal)
                               most-positive-fixnum)))))

(defun mevedel-chat--ask (chat context answer)
  "Ask about the tool call CONTEXT in CHAT; call ANSWER with the reply.
The cards (see `mevedel-permissions-ask') go to CHAT's prompter one by
one, and observers hear `permission'.  A tool that declares :review
shows its own review instead: its function gets (CONTEXT SESSION
ANSWER OPEN), OPEN being `mevedel-chat-open-interaction' for CHAT and
CONTEXT without them, and returns the withdrawing function.  Outside a
turn, or without a prompter, the call is refused.  Return a function
that withdraws the question."
  (cond
   ((not (and (mevedel-chat-prompter chat)
              (mevedel-chat-turn (or (mevedel-chat-of-buffer (plist-get context :data-buffer))
                                     chat))))
    (funcall answer (cons 'deny (mevedel-permissions-refusal-reason
                                 (mevedel-tool-name (plist-get context :tool)) 'headless)))
    nil)
   ((mevedel-tool-review (plist-get context :tool))
    (funcall (mevedel-tool-review (plist-get context :tool))
             context (mevedel-chat-session chat) answer
             (lambda (&rest keys) (apply #'mevedel-chat-open-interaction chat context keys))))
   (t
    (let ((requester (mevedel-chat-requester chat context)))
      (mevedel-permissions-ask
       context (mevedel-chat-session chat) answer
       (lambda (request)
         (unless (equal (car requester) "/root")
           (setq request (plist-put request :agent (car requester))))
         (setq request (plist-put request :request (cdr requester)))
         (mevedel-chat-notify chat 'permission request)
         (funcall (mevedel-chat-prompter chat) chat request)))))))

(defun mevedel-chat--keep-canceller (cancel)
  "Keep CANCEL, the thunk of a call started in this data buffer, with its turn.
Aborting the turn then cancels the call."
  (when-let* ((chat (mevedel-chat-of-buffer (current-buffer)))
              ((mevedel-chat-turn chat)))
    (push cancel (mevedel-chat-cancellers chat))))

(provide 'mevedel-chat)
;;; mevedel-chat.el ends here
