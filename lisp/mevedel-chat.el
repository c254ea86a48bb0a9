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
;; here: SessionStart when a chat starts, resumes or is compacted,
;; UserPromptSubmit before a prompt is sent (it may block it), and Stop
;; when a turn ends (it may send the turn on, as a background turn with
;; the hook's reason).  Their context reaches the model as mail.
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
buffer.  The second argument is the store the conversation's save was
queued to (`mevedel-chat-queue-save'), or nil when it is not saved:
the mail counts as read once that save is done, so that a crash cannot
lose it (`mevedel-core-mailbox-deliver-after').")

(defvar mevedel-chat-resume-functions nil
  "Abnormal hook run with a chat once its saved session is loaded.")

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
  backend model label
  observers prompter history
  live-calls cancellers updates
  (progress (make-hash-table :test #'equal))
  ;; Saving: the session's title (its first prompt unless renamed),
  ;; when it was created (epoch milliseconds), the timer checkpointing
  ;; a running turn, and the token usage reported so far.
  title created save-timer
  ;; Token usage the provider reported: totals of the session, and the
  ;; size of the last request's context (nil until one was reported).
  (input-tokens 0) (output-tokens 0) context-tokens
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
          (when id (mevedel-chat--resume chat))
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
    (let ((store (mevedel-core-store-open (mevedel-session-database-file session))))
      (unwind-protect (mevedel-chat--load chat store)
        (mevedel-core-store-close store)))
    (mevedel-transcript-untrack (mevedel-chat-data-buffer chat))
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
      (setq-local gptel-include-tool-results t)
      (setq-local gptel-confirm-tool-calls nil)
      (setq-local gptel-use-tools t)
      (add-hook 'mevedel-gptel-dispatch-functions #'mevedel-chat--keep-canceller nil t)
      (add-hook 'kill-buffer-hook #'mevedel-chat--data-buffer-killed nil t))
    buffer))

(defvar-local mevedel-chat--owner nil
  "The chat owning this data buffer.")

(defun mevedel-chat--data-buffer-killed ()
  "Forget the chat whose data buffer is being killed, aborting its turn.
A root chat is saved and its session closed; a child agent's chat
shares its session with the root, which stays open."
  (when-let* ((chat mevedel-chat--owner))
    (ignore-errors (mevedel-chat-abort chat))
    (mevedel-chat--stop-save-timer chat)
    (condition-case err
        (mevedel-chat-checkpoint chat (mevedel-chat--metadata chat))
      (error (display-warning 'mevedel (format "Saving %s failed: %s" (mevedel-chat-name chat)
                                               (error-message-string err)))))
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
The choice is this session's own: other sessions and gptel's defaults
keep theirs.  Observers hear `status'."
  (setf (mevedel-chat-backend chat) backend
        (mevedel-chat-model chat) model
        (mevedel-chat-label chat) nil)
  (mevedel-chat-checkpoint chat (mevedel-chat--metadata chat))
  (mevedel-chat--notify chat 'status))

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
`mevedel-chat-append-reply') and `turn-end' (the outcome: `done',
`error' or `abort')."
  (cl-pushnew function (mevedel-chat-observers chat)))

(defun mevedel-chat-unobserve (chat function)
  "Stop calling FUNCTION for CHAT's events."
  (setf (mevedel-chat-observers chat) (delq function (mevedel-chat-observers chat))))

(defun mevedel-chat--notify (chat event &rest args)
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
    (mevedel-chat--notify chat 'tool-progress id)))

(defun mevedel-chat-call-progress (chat id)
  "Return the live progress plist of tool call ID of CHAT, or nil."
  (gethash id (mevedel-chat-progress chat)))

(defun mevedel-chat--set-status (chat status &optional detail)
  "Set CHAT's STATUS (a symbol) and DETAIL (a string) and tell observers."
  (setf (mevedel-chat-status chat) status
        (mevedel-chat-status-detail chat) detail)
  (mevedel-chat--notify chat 'status))

;;;; System prompt and tools

(defun mevedel-chat--system-text (chat)
  "Return the system prompt for CHAT's next turn (mevedel-prompt.el).
A child agent's is the text frozen when it was created."
  (or (mevedel-chat-frozen-system chat)
      (mevedel-prompt-system-text chat)))

;; What changed since the model last read it, and what the user's
;; mentions attach, go with the user's text of a turn; the environment
;; and a skill's tool restriction are refreshed and lifted at its end.
(add-hook 'mevedel-chat-message-functions #'mevedel-prompt-context-updates)
(add-hook 'mevedel-chat-message-functions #'mevedel-mentions-message-function t)
(add-hook 'mevedel-chat-accepted-functions #'mevedel-prompt-note-accepted)
(add-hook 'mevedel-chat-idle-functions #'mevedel-environment-turn-ended)
(add-hook 'mevedel-chat-idle-functions #'mevedel-skills-turn-ended)

(defun mevedel-chat--refresh-agent-names (chat &rest _)
  "Read the agent roles of CHAT's workspace for the composer's @NAME."
  (mevedel-mentions-refresh-agent-names (mevedel-chat-root chat)))
(add-hook 'mevedel-chat-idle-functions #'mevedel-chat--refresh-agent-names)

(defun mevedel-chat-tools (chat)
  "Return the gptel tools offered to the model of CHAT.
They are those of every native mevedel tool, or a child agent's
frozen set."
  (or (mevedel-chat-frozen-tools chat) (mevedel-gptel-tools)))

;;;; Tool calls

(defun mevedel-chat--handle-tools-start (fsm)
  "Tell observers about the tool invocations of FSM."
  (let* ((info (gptel-fsm-info fsm))
         (chat (plist-get info :context)))
    (when (mevedel-chat-p chat)
      (setf (mevedel-chat-live-calls chat)
            (mevedel-gptel-in-call-order info (plist-get info :tool-use)))
      (mevedel-chat-checkpoint
       chat `(("open-calls" . ,(mevedel-chat--print
                                (mapcar (lambda (record)
                                          (list (plist-get record :id) (plist-get record :name)
                                                (plist-get record :args)))
                                        (mevedel-chat-live-calls chat))))))
      (mevedel-chat--set-status chat 'tools)
      (mevedel-chat--notify chat 'tools-start (mevedel-chat-live-calls chat))
      (dolist (name (mevedel-gptel-unknown-tool-names info))
        (mevedel-chat-note-unknown-tool chat name)))))

(defun mevedel-chat-note-unknown-tool (chat name)
  "Tell CHAT's observers that its model called NAME, a tool it was not offered.
The call is answered with an error and the turn goes on, so nothing
else would show that the model asked for what it does not have."
  (mevedel-chat--notify chat 'unknown-tool name))

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
    (mevedel-chat-checkpoint chat (mevedel-chat--metadata chat))
    (mevedel-chat--notify chat 'truncated)))

(defun mevedel-chat-append-reply (chat notice hidden reply)
  "Append to idle CHAT a turn mevedel wrote: NOTICE, HIDDEN, then REPLY.
A workflow such as /review ends this way.  NOTICE is what the view
shows of the user's side (the model never reads it), HIDDEN user-role
text the model reads and the view leaves out (the record of what was
asked and answered, e.g. a <user_action> block), REPLY the assistant's
answer both read.  The turn is saved; observers hear `appended'."
  (when (mevedel-chat-busy-p chat)
    (error "A turn is running in %s" (mevedel-chat-name chat)))
  (let ((buffer (mevedel-chat-data-buffer chat))
        (start nil))
    (mevedel-transcript-complete buffer)
    (setq start (with-current-buffer buffer (copy-marker (point-max))))
    (mevedel-chat--insert-notice chat 'workflow notice)
    (with-current-buffer buffer
      (save-excursion
        (goto-char (point-max))
        (insert "\n\n" (gptel-prompt-prefix-string)
                (propertize (concat (string-trim hidden) "\n") 'mevedel-mail t)
                "\n" (propertize (string-trim reply) 'gptel 'response) "\n")))
    (push (list :id (format "%x" (random most-positive-fixnum))
                :label (mevedel-chat--turn-label notice) :start start)
          (mevedel-chat-turns chat))
    (setf (mevedel-chat-turn-start chat) start)
    (when (mevedel-chat--saving-p chat)
      (condition-case err
          (progn
            (unless (mevedel-transcript-tracked-p buffer)
              (mevedel-transcript-track
               buffer (mevedel-session-store-handle (mevedel-chat-session chat))))
            (mevedel-chat-checkpoint chat (mevedel-chat--metadata chat) t))
        (error (display-warning 'mevedel (format "Cannot save the conversation: %s"
                                                 (error-message-string err))))))
    (mevedel-chat--notify chat 'appended)))

(cl-defun mevedel-chat-send (chat text &key on-done background)
  "Send TEXT as the user's next message in CHAT.
ON-DONE, if non-nil, is called with CHAT and the outcome (`done',
`error' or `abort') when the turn ends.  BACKGROUND, a string, marks a
turn the harness starts on its own (a background wake): the model reads
TEXT, but the view shows BACKGROUND as a notice instead of a user line,
and TEXT stays out of the input history.  When the request would fill
too much of the model's context (`mevedel-chat-needs-compaction-p'),
older turns are compacted first and the turn starts after that; the
value is then nil instead of the turn.  The user's UserPromptSubmit
hooks see TEXT first (not BACKGROUND turns'); while they run, or when
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
  (if background
      (mevedel-chat--send-or-compact chat text on-done background)
    (let ((turn nil) (sync t))
      (setf (mevedel-chat-hooking chat) t)
      (condition-case err
          (let ((stop (mevedel-hooks-prompt-submit
                       (mevedel-chat-session chat) text
                       (lambda (blocked)
                         (let ((sent (mevedel-chat--after-prompt-hooks
                                      chat text on-done blocked sync)))
                           (when sync (setq turn sent)))))))
            (when (mevedel-chat-hooking chat)
              ;; They run in the background: an abort stops them.
              (setf (mevedel-chat-hooking chat)
                    (lambda ()
                      (funcall stop)
                      (push text (mevedel-chat-history chat))
                      (when on-done (funcall on-done chat 'abort))))
              (mevedel-chat--set-status chat 'hooks "UserPromptSubmit")))
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
  (unless sync (mevedel-chat--set-status chat 'idle))
  (cond (blocked (mevedel-chat--prompt-blocked chat text blocked on-done) nil)
        (sync (mevedel-chat--send-or-compact chat text on-done nil))
        (t (condition-case err
               (mevedel-chat--send-or-compact chat text on-done nil)
             (error (message "mevedel: %s" (error-message-string err)) nil)))))

(defun mevedel-chat--prompt-blocked (chat text reason on-done)
  "Tell CHAT's user that a hook blocked the prompt TEXT for REASON.
TEXT stays in the input history; ON-DONE gets `blocked'."
  (push text (mevedel-chat-history chat))
  (mevedel-chat--insert-notice chat 'hook (concat "Prompt blocked by a hook: " reason))
  (setf (mevedel-chat-status-detail chat) reason)
  (mevedel-chat--notify chat 'truncated)
  (when on-done (funcall on-done chat 'blocked)))

(defun mevedel-chat--send-or-compact (chat text on-done background)
  "Send TEXT in CHAT, after a compaction of its history when needed.
ON-DONE and BACKGROUND are as for `mevedel-chat-send'."
  (if (mevedel-chat-needs-compaction-p chat text)
      (progn
        (mevedel-chat-compact
         chat nil (lambda (chat _outcome)
                    (mevedel-chat--send-now chat text on-done background)))
        nil)
    (mevedel-chat--send-now chat text on-done background)))

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
  (let ((backend (mevedel-chat-backend-effective chat))
        (model (mevedel-chat-model-effective chat))
        (buffer (mevedel-chat-data-buffer chat)))
    (mevedel-transcript-complete buffer)
    (unless background
      (push text (mevedel-chat-history chat))
      (unless (mevedel-chat-title chat)
        (setf (mevedel-chat-title chat) (mevedel-chat--turn-label text))))
    (when-let* ((problem (mevedel-gptel-backend-problem backend)))
      (signal 'mevedel-chat-backend-error (list problem)))
    (let ((start (with-current-buffer buffer (point-max))))
      (condition-case err
          (mevedel-chat--start-turn chat text on-done background backend model)
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
  (mevedel-chat--stop-save-timer chat)
  (setf (mevedel-chat-turn chat) nil
        (mevedel-chat-fsm chat) nil
        (mevedel-chat-on-done chat) nil
        (mevedel-chat-live-calls chat) nil)
  (mevedel-chat--set-status chat 'idle)
  (mevedel-chat--notify chat 'truncated))

(defun mevedel-chat--start-turn (chat text on-done background backend model)
  "Write TEXT as CHAT's next turn and send it to BACKEND's MODEL.
ON-DONE and BACKGROUND are as for `mevedel-chat-send'."
  (let ((buffer (mevedel-chat-data-buffer chat)))
    (with-current-buffer buffer
      (setq-local gptel-backend backend
                  gptel-model model
                  gptel-system-prompt (mevedel-chat--system-text chat)
                  gptel-tools (mevedel-gptel-request-tools (mevedel-chat-tools chat)))
      (goto-char (point-max))
      (let ((start (point))
            (mail (let ((mevedel-chat-turn-text (unless background text)))
                    (cl-loop for function in mevedel-chat-message-functions
                             append (funcall function chat)))))
        (when background
          (mevedel-chat--insert-notice chat 'background background)
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
             (fsm (mevedel-chat--make-fsm)))
        (push turn (mevedel-chat-turns chat))
        (run-hook-with-args 'mevedel-chat-turn-functions chat turn)
        (setf (mevedel-chat-turn chat) turn
              (mevedel-chat-fsm chat) fsm
              (mevedel-chat-on-done chat) on-done
              (mevedel-chat-live-calls chat) nil)
        (mevedel-chat--set-status chat 'waiting)
        (mevedel-chat--begin-save chat (unless background text))
        (mevedel-chat--notify chat 'turn-start text)
        (goto-char (point-max))
        (gptel-request nil
          :buffer buffer
          :position (point-max-marker)
          :stream gptel-stream
          :callback #'mevedel-chat--callback
          :context chat
          :transforms (append gptel-prompt-transform-functions
                              (list #'mevedel-chat--strip-render-data
                                #'mevedel-chat--drop-compacted))
          :fsm fsm)
        (mevedel-gptel-track-call-order fsm)
        turn))))

(defun mevedel-chat--callback (response info &optional raw)
  "Handle RESPONSE for the request with INFO; RAW skips transformation."
  (let ((chat (plist-get info :context)))
    (pcase response
      ((pred stringp)
       (mevedel-gptel-insert-response response info raw)
       (unless raw
         (mevedel-chat--set-status chat 'streaming)
         (mevedel-chat--notify chat 'text response)))
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
    (mevedel-chat-checkpoint chat '(("open-calls" . "")) t)
    (mevedel-chat--set-status chat 'waiting)
    (mevedel-chat--notify chat 'tool-results records)))

(defun mevedel-chat--handle-wait (fsm)
  "Note that FSM's request was sent."
  (when-let* ((chat (plist-get (gptel-fsm-info fsm) :context))
              ((mevedel-chat-p chat)))
    (mevedel-chat--set-status chat 'waiting)))

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

(defun mevedel-chat--insert-notice (chat kind text)
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
    (mevedel-chat--set-status chat (pcase outcome ('done 'idle) (_ outcome))
                              (mevedel-chat-status-detail chat))
    (mevedel-chat--settle-save chat)
    (mevedel-chat--notify chat 'turn-end outcome)
    (mevedel-chat--send-queued chat outcome)
    (when on-done (funcall on-done chat outcome))
    (run-hook-with-args 'mevedel-chat-idle-functions chat outcome)))

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
  (let ((blocks (mevedel-hooks-context (mevedel-chat-session chat))))
    (if blocks
        (puthash chat blocks mevedel-chat--hook-context-sent)
      (remhash chat mevedel-chat--hook-context-sent))
    blocks))

(defun mevedel-chat--hook-context-accepted (chat)
  "Forget the hook context that CHAT's accepted request carried."
  (when-let* ((blocks (gethash chat mevedel-chat--hook-context-sent)))
    (remhash chat mevedel-chat--hook-context-sent)
    (mevedel-hooks-forget-context (mevedel-chat-session chat) blocks)))

(defun mevedel-chat--hook-context-idle (chat _outcome)
  "Forget the prompt's own hook context of CHAT's turn if never accepted.
UserPromptSubmit hooks run again when the prompt is sent again; the
rest (SessionStart) waits for the next turn."
  (when-let* ((blocks (gethash chat mevedel-chat--hook-context-sent)))
    (remhash chat mevedel-chat--hook-context-sent)
    (mevedel-hooks-forget-context (mevedel-chat-session chat)
                                  (cl-remove-if-not #'mevedel-hooks-prompt-context-p blocks))))

(add-hook 'mevedel-chat-message-functions #'mevedel-chat--hook-context)
(add-hook 'mevedel-chat-accepted-functions #'mevedel-chat--hook-context-accepted)
(add-hook 'mevedel-chat-idle-functions #'mevedel-chat--hook-context-idle)

(defun mevedel-chat--hook-stop-turn (session reason)
  "Abort the turn of SESSION's chat, which a tool hook stopped for REASON.
The hook's own call is cancelled with the turn's other calls.  A
`mevedel-hooks-stop-turn-functions' member."
  (when-let* ((chat (cl-find session (mevedel-chat-list) :key #'mevedel-chat-session))
              ((mevedel-chat-abort chat)))
    (mevedel-chat--insert-notice chat 'hook (concat "A hook stopped the turn: " reason))
    (mevedel-chat--notify chat 'truncated)))

(add-hook 'mevedel-hooks-stop-turn-functions #'mevedel-chat--hook-stop-turn)

(defun mevedel-chat--stop-hooks (chat)
  "End CHAT's turn, unless its Stop hooks send it on with their reason.
The turn's ON-DONE then waits for the turn that goes on.  Aborting the
turn meanwhile stops the hooks."
  (let ((session (mevedel-chat-session chat))
        (turn (mevedel-chat-turn chat)))
    (if (not (mevedel-hooks-any-p session 'Stop))
        (mevedel-chat--finish chat 'done)
      (mevedel-chat--set-status chat 'hooks "Stop")
      (when-let* ((stop (mevedel-chat--run-stop-hooks chat session)))
        (push (lambda ()
                (funcall stop)
                (when (eq (mevedel-chat-turn chat) turn)
                  (mevedel-chat--insert-notice chat 'abort "Aborted")
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
      (mevedel-chat--set-status chat 'retrying
                                (format "%s; %s" (plist-get retry :message)
                                        (mevedel-recovery-describe retry)))
      (mevedel-chat--notify chat 'retry retry))))

(defun mevedel-chat--handle-error (fsm)
  "Finish the turn of FSM with an error."
  (when-let* ((info (gptel-fsm-info fsm))
              (chat (plist-get info :context))
              ((mevedel-chat-p chat))
              ((eq (mevedel-chat-fsm chat) fsm)))
    (let ((message (mevedel-chat-error-message info)))
      (mevedel-chat--insert-notice chat 'error (concat "Request failed: " message))
      (setf (mevedel-chat-status-detail chat) message)
      (mevedel-chat--finish chat 'error))))

(defun mevedel-chat--handle-abort (fsm)
  "Finish the turn of FSM as aborted."
  (when-let* ((chat (plist-get (gptel-fsm-info fsm) :context))
              ((mevedel-chat-p chat))
              ((eq (mevedel-chat-fsm chat) fsm))
              ((mevedel-chat-turn chat)))
    (mevedel-chat--settle-open-calls
     chat (mevedel-chat-live-calls chat)
     "Cancelled: the user interrupted the turn before this call finished.")
    (mevedel-chat--insert-notice chat 'abort "Aborted")
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
      (mevedel-chat--set-status chat 'idle)
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

;;;; Queued input

(defun mevedel-chat-queue (chat text)
  "Queue TEXT for CHAT's running turn; observers hear `queued'.
It is delivered as a user message after the current tool batch,
before the next sample; if the turn ends first, it starts the next
turn."
  (when (string-blank-p text) (user-error "Nothing to queue"))
  (setf (mevedel-chat-queued chat) (append (mevedel-chat-queued chat) (list (string-trim text))))
  (mevedel-chat--notify chat 'queued))

(defun mevedel-chat-unqueue (chat)
  "Take the newest queued message of CHAT back; return it, or nil."
  (when-let* ((queued (mevedel-chat-queued chat)))
    (setf (mevedel-chat-queued chat) (butlast queued))
    (mevedel-chat--notify chat 'queued)
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
          (push text (mevedel-chat-history chat))
          (when-let* ((store (and (mevedel-chat--saving-p chat)
                                  (mevedel-session-store (mevedel-chat-session chat)))))
            (mevedel-core-store-input-push store text)))
        (mevedel-chat--notify chat 'queued)
        (mevedel-chat--notify chat 'delivered queued))
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

(defun mevedel-chat--continued (info texts)
  "Save the mail among TEXTS that the request INFO continues with.
A `mevedel-gptel-continued-functions' member: the mail goes to the
conversation's store before it counts as read."
  (when-let* ((chat (plist-get info :context))
              ((mevedel-chat-p chat))
              ((cl-some (lambda (text) (get-text-property 0 'mevedel-mail text)) texts)))
    (run-hook-with-args 'mevedel-chat-mail-written-functions chat (mevedel-chat-queue-save chat))))

(add-hook 'mevedel-gptel-continued-functions #'mevedel-chat--continued)

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
                       (mevedel-chat--notify chat 'queued)
                       (mevedel-chat-send chat text)))))))

;;;; Compaction

(defcustom mevedel-chat-compact-threshold 0.8
  "Fraction of the model's context window that triggers compaction.
Before a turn is sent, when the context would exceed it, the older
turns are summarised first (see `mevedel-chat-compact').  nil turns
automatic compaction off; `/compact' still works."
  :type '(choice (const :tag "Never automatically" nil) number))

(defcustom mevedel-chat-compact-keep-turns 2
  "Most recent turns a compaction keeps verbatim."
  :type 'natnum)

(defcustom mevedel-chat-compact-prompt
  "Summarise the conversation below between a user and a coding agent \
working in their project, so that the agent can continue the work from \
the summary alone.  Keep: the user's goals and instructions, decisions \
and their reasons, files read or changed (with paths), commands run and \
what they showed, errors met, and what is left to do.  Drop pleasantries \
and repetition.  If an earlier summary is given, merge it with the new \
turns into one summary."
  "Instruction of the request that summarises older turns."
  :type 'string)

(defun mevedel-chat--drop-compacted ()
  "Remove the compacted text from this prompt buffer (a prompt transform).
Their summary, which follows them, stands in for them."
  (let ((pos (point-min)) (regions nil))
    (while (setq pos (text-property-any pos (point-max) 'mevedel-compacted t))
      (let ((end (or (text-property-not-all pos (point-max) 'mevedel-compacted t) (point-max))))
        (push (cons pos end) regions)
        (setq pos end)))
    (pcase-dolist (`(,start . ,end) regions)
      (delete-region start end))))

(defun mevedel-chat--summary-region (buffer)
  "Return (START . END) of the compaction summary in data BUFFER, or nil."
  (with-current-buffer buffer
    (when-let* ((start (text-property-any (point-min) (point-max) 'mevedel-notice 'compaction)))
      (cons start (or (text-property-not-all start (point-max) 'mevedel-notice 'compaction)
                      (point-max))))))

(defun mevedel-chat--summary-body (text)
  "Return the summary inside the compaction block TEXT."
  (string-trim (replace-regexp-in-string
                "\\`[ \t\n]*<conversation-summary[^>]*>\\|</conversation-summary>[ \t\n]*\\'" ""
                text)))

(defun mevedel-chat--recovery-copy (chat)
  "Write CHAT's whole transcript to the next compact-NNNN file; return its name."
  (let* ((buffer (mevedel-chat-data-buffer chat))
         (dir (mevedel-session-ensure-storage (mevedel-chat-session chat)))
         (ext (file-name-extension (mevedel-transcript-export-name buffer dir)))
         (n 1))
    (while (file-exists-p (expand-file-name (format "compact-%04d.%s" n ext) dir))
      (cl-incf n))
    (let ((file (expand-file-name (format "compact-%04d.%s" n ext) dir))
          (coding-system-for-write 'utf-8-unix))
      (with-current-buffer buffer
        (save-restriction
          (widen)
          (write-region (point-min) (point-max) file nil 'silent)))
      file)))

(defun mevedel-chat-needs-compaction-p (chat &optional text)
  "Return non-nil when CHAT's next request, with TEXT, would be too large.
That is more than `mevedel-chat-compact-threshold' of the model's
context window, with enough turns to compact."
  (pcase-let ((`(,tokens ,window ,_) (mevedel-chat-context-usage chat)))
    (and mevedel-chat-compact-threshold window
         (> (length (mevedel-chat-turns chat)) mevedel-chat-compact-keep-turns)
         (> (+ tokens (/ (length (or text "")) 4))
            (* mevedel-chat-compact-threshold window)))))

(defun mevedel-chat-compact (chat &optional focus on-done)
  "Summarise the older part of CHAT's conversation, and send that instead.
The `mevedel-chat-compact-keep-turns' most recent turns stay verbatim.
One summary request (without tools) summarises the turns since the
last compaction together with its summary, so summaries never stack;
FOCUS, a string, says what the summary should keep above all.  The
whole transcript is first copied to a numbered compact-NNNN file, and
the view keeps showing every turn.  ON-DONE is called with CHAT and
`done' or `error' at the end; observers hear `compacted'."
  (when (mevedel-chat-busy-p chat)
    (user-error "A turn is running in %s; wait or abort it first" (mevedel-chat-name chat)))
  (mevedel-transcript-complete (mevedel-chat-data-buffer chat))
  (let* ((keep (max 1 mevedel-chat-compact-keep-turns))
         (turns (mevedel-chat-turns chat))
         (buffer (mevedel-chat-data-buffer chat)))
    (when (<= (length turns) keep)
      (user-error "Nothing to compact: %s has only %d turn%s" (mevedel-chat-name chat)
                  (length turns) (if (= (length turns) 1) "" "s")))
    (let* ((cut (copy-marker (plist-get (nth (1- keep) turns) :start)))
           (old (mevedel-chat--summary-region buffer))
           (from (if old (cdr old) (with-current-buffer buffer (point-min))))
           (previous (and old (with-current-buffer buffer
                                (mevedel-chat--summary-body
                                 (buffer-substring-no-properties (car old) (cdr old))))))
           (conversation (mevedel-history-project buffer from cut))
           (backend (mevedel-chat-backend-effective chat))
           (model (mevedel-chat-model-effective chat))
           (recovery (mevedel-chat--recovery-copy chat)))
      (setf (mevedel-chat-compacting chat) t)
      (mevedel-chat--set-status chat 'compacting)
      (with-current-buffer buffer
        (let ((gptel-backend backend) (gptel-model model) (gptel-use-tools nil) (gptel-tools nil))
          (gptel-request
              (concat (and previous (concat "Earlier summary:\n" previous "\n\n"))
                      "Conversation to summarise:\n" (string-trim conversation)
                      (and focus (not (string-blank-p focus))
                           (concat "\n\nKeep above all: " focus)))
            :system mevedel-chat-compact-prompt
            :stream nil
            :callback
            (lambda (response info)
              (cond
               ((stringp response)
                (mevedel-chat--install-summary chat response cut recovery)
                (mevedel-chat--end-compaction chat 'done on-done))
               ((null response)
                (message "mevedel: compaction failed: %s"
                         (mevedel-chat-error-message info))
                (mevedel-chat--end-compaction chat 'error on-done)))))))
      recovery)))

(defun mevedel-chat--install-summary (chat summary cut recovery)
  "Put SUMMARY at CUT in CHAT's data buffer; what precedes it is compacted.
The previous summary goes.  RECOVERY names the copy of the transcript
made before."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (let ((inhibit-read-only t))
      (when-let* ((old (mevedel-chat--summary-region (current-buffer))))
        (delete-region (car old) (cdr old)))
      (put-text-property (point-min) cut 'mevedel-compacted t)
      (save-excursion
        (goto-char cut)
        (insert (propertize
                 (format "\n\n<conversation-summary recovery=\"%s\">\n%s\n</conversation-summary>\n"
                         (file-name-nondirectory recovery) (string-trim summary))
                 'mevedel-notice 'compaction 'front-sticky nil 'rear-nonsticky t)))
      (set-marker cut nil)))
  ;; What the compacted turns told the model (context updates,
  ;; subdirectory instructions) is told again.
  (mevedel-prompt-reset chat)
  (mevedel-chat-checkpoint chat (mevedel-chat--metadata chat) t))

(defun mevedel-chat--end-compaction (chat outcome on-done)
  "Finish CHAT's compaction with OUTCOME; call ON-DONE and tell observers."
  (setf (mevedel-chat-compacting chat) nil)
  (when (eq outcome 'done)
    (mevedel-hooks-session-start (mevedel-chat-session chat) "compact"))
  (mevedel-chat--set-status chat (if (eq outcome 'done) 'idle 'error)
                            (unless (eq outcome 'done) "compaction failed"))
  (mevedel-chat--notify chat 'compacted outcome)
  (when on-done (funcall on-done chat outcome)))

;;;; Token usage

(defcustom mevedel-chat-context-windows nil
  "Context window sizes in tokens of models gptel has no size for.
An alist of (MODEL . TOKENS), MODEL a symbol as in `gptel-model'."
  :type '(alist :key-type symbol :value-type natnum))

(defun mevedel-chat--count-usage (chat info)
  "Add the token usage reported for the turn of request INFO to CHAT.
gptel keeps the last sample's counts under :tokens and the turn's sums
under :tokens-full (input, cached input and output)."
  (when-let* ((full (plist-get info :tokens-full)))
    (cl-incf (mevedel-chat-input-tokens chat)
             (+ (or (plist-get full :input) 0) (or (plist-get full :cached) 0)))
    (cl-incf (mevedel-chat-output-tokens chat) (or (plist-get full :output) 0)))
  (when-let* ((last (plist-get info :tokens)))
    (setf (mevedel-chat-context-tokens chat)
          (+ (or (plist-get last :input) 0) (or (plist-get last :cached) 0)
             (or (plist-get last :output) 0)))))

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

;;;; Saving and resuming

(defcustom mevedel-chat-save-sessions t
  "Non-nil means conversations are saved in their session's storage.
Each session's transcript, metadata and input history then live in
WORKSPACE/.mevedel/sessions/ID/ and `mevedel' resumes the newest one."
  :type 'boolean)

(defconst mevedel-chat-checkpoint-interval 2
  "Seconds between checkpoints of a turn's streamed text.")

(defconst mevedel-chat--history-kept 500
  "Composer inputs a resumed session brings back.")

(defun mevedel-chat--print (value)
  "Return VALUE printed readably on one line."
  (let ((print-escape-newlines t) (print-length nil) (print-level nil))
    (prin1-to-string value)))

(defun mevedel-chat--saving-p (chat)
  "Return non-nil when CHAT's conversation is saved.
A child agent's is, in its own store, when it has one."
  (and mevedel-chat-save-sessions
       (if (mevedel-chat-agent chat)
           (mevedel-chat-store chat)
         (and (mevedel-session-durable-p (mevedel-chat-session chat))
              (not (mevedel-chat-read-only chat))))))

(defun mevedel-chat--store (chat &optional materialize)
  "Return the store CHAT's conversation is saved in.
That is a child agent's own, else the session's; MATERIALIZE makes the
session's storage first."
  (or (mevedel-chat-store chat)
      (if materialize
          (mevedel-session-store-handle (mevedel-chat-session chat))
        (mevedel-session-store (mevedel-chat-session chat)))))

(defun mevedel-chat--now ()
  "Return the time now in epoch milliseconds, as a string."
  (number-to-string (truncate (* 1000 (float-time)))))

(defun mevedel-chat--metadata (chat &rest extra)
  "Return EXTRA (pairs of strings) and all of CHAT's metadata.
It is written when turns begin, end or change; checkpoints in between
refresh only what grows (see `mevedel-chat-checkpoint')."
  (let ((backend (mevedel-chat-backend-effective chat))
        (buffer (mevedel-chat-data-buffer chat)))
    `(,@extra
      ("title" . ,(or (mevedel-chat-title chat) ""))
      ("created" . ,(or (mevedel-chat-created chat) ""))
      ("updated" . ,(mevedel-chat--now))
      ("backend" . ,(if backend (gptel-backend-name backend) ""))
      ("model" . ,(format "%s" (or (mevedel-chat-model-effective chat) "")))
      ("turns" . ,(number-to-string (length (mevedel-chat-turns chat))))
      ("turn-list" . ,(mevedel-chat--print
                       (mapcar (lambda (turn)
                                 (list (plist-get turn :id) (plist-get turn :label)
                                       (marker-position (plist-get turn :start))))
                               (mevedel-chat-turns chat))))
      ("input-tokens" . ,(number-to-string (mevedel-chat-input-tokens chat)))
      ("context-tokens" . ,(if (mevedel-chat-context-tokens chat)
                               (number-to-string (mevedel-chat-context-tokens chat))
                             ""))
      ("output-tokens" . ,(number-to-string (mevedel-chat-output-tokens chat)))
      ("chars" . ,(number-to-string (buffer-size buffer))))))

(defconst mevedel-chat--settle-timeout 2
  "Seconds a settled checkpoint waits for its writes.")

(defun mevedel-chat-checkpoint (chat &optional info settled)
  "Save CHAT's unsaved conversation, its size and the time, and INFO.
INFO is an alist of metadata strings (`mevedel-chat--metadata' gives
all of it).  The writes happen in the
background; SETTLED non-nil waits until they are done (they then
survive Emacs being killed), as after tool results and at the end of
a turn.  Does nothing when CHAT is not saved or has no storage yet."
  (when-let* ((store (mevedel-chat-queue-save chat)))
    (mevedel-core-store-info-set
     store `(,@info ("updated" . ,(mevedel-chat--now))
                    ("chars" . ,(number-to-string (buffer-size (mevedel-chat-data-buffer chat))))))
    (when settled
      (condition-case err
          (mevedel-core-store-flush store mevedel-chat--settle-timeout)
        (mevedel-core-store-error
         (display-warning 'mevedel (format "Saving %s is slow: %s" (mevedel-chat-name chat)
                                           (error-message-string err))))))))

(defun mevedel-chat-queue-save (chat)
  "Queue a save of CHAT's unsaved conversation and return its store.
Return nil when CHAT's conversation is not saved or has no storage yet."
  (when-let* (((mevedel-chat--saving-p chat))
              (buffer (mevedel-chat-data-buffer chat))
              ((mevedel-transcript-tracked-p buffer)))
    (mevedel-transcript-save buffer)
    (mevedel-chat--store chat)))

(defun mevedel-chat--begin-save (chat text)
  "Checkpoint CHAT at the start of a turn; TEXT is the user's input, if any.
The first turn materialises the session's storage."
  (when (mevedel-chat--saving-p chat)
    (condition-case err
        (let ((store (mevedel-chat--store chat t))
              (buffer (mevedel-chat-data-buffer chat)))
          (unless (mevedel-transcript-tracked-p buffer)
            (mevedel-transcript-track buffer store))
          (unless (mevedel-chat-created chat)
            (setf (mevedel-chat-created chat) (mevedel-chat--now)))
          (when (and text (not (mevedel-chat-agent chat)))
            (mevedel-core-store-input-push store text))
          (mevedel-chat-checkpoint chat (mevedel-chat--metadata chat '("turn-open" . "1")))
          (when (timerp (mevedel-chat-save-timer chat))
            (cancel-timer (mevedel-chat-save-timer chat)))
          (setf (mevedel-chat-save-timer chat)
                (run-at-time mevedel-chat-checkpoint-interval mevedel-chat-checkpoint-interval
                             #'mevedel-chat--tick-save chat)))
      (error (display-warning 'mevedel (format "Cannot save the conversation: %s"
                                               (error-message-string err)))))))

(defun mevedel-chat--tick-save (chat)
  "Checkpoint the streamed text of CHAT's running turn."
  (if (and (mevedel-chat-turn chat) (buffer-live-p (mevedel-chat-data-buffer chat)))
      (when (mevedel-transcript-dirty-p (mevedel-chat-data-buffer chat))
        (mevedel-chat-checkpoint chat))
    (mevedel-chat--stop-save-timer chat)))

(defun mevedel-chat--stop-save-timer (chat)
  "Stop CHAT's checkpoint timer."
  (when (timerp (mevedel-chat-save-timer chat))
    (cancel-timer (mevedel-chat-save-timer chat)))
  (setf (mevedel-chat-save-timer chat) nil))

(defun mevedel-chat--settle-save (chat)
  "Checkpoint CHAT at the end of a turn and refresh its readable copy."
  (mevedel-chat--stop-save-timer chat)
  (when-let* ((fsm (mevedel-chat-fsm chat)))
    (mevedel-chat--count-usage chat (gptel-fsm-info fsm)))
  (when (mevedel-transcript-tracked-p (mevedel-chat-data-buffer chat))
    (mevedel-chat-checkpoint
     chat (mevedel-chat--metadata chat '("turn-open" . "") '("open-calls" . "")) t)
    (mevedel-transcript-consolidate
     (mevedel-chat-data-buffer chat)
     (if-let* ((store (mevedel-chat-store chat)))
         ;; A child agent's copy is named after its own store: the
         ;; agents share a directory.
         (let ((file (plist-get (mevedel-core-store-info store) :file)))
           (mevedel-transcript-export-name (mevedel-chat-data-buffer chat)
                                           (file-name-directory file) (file-name-base file)))
       (mevedel-transcript-export-name (mevedel-chat-data-buffer chat)
                                       (mevedel-session-directory (mevedel-chat-session chat)))))))

(defun mevedel-chat-flush (chat &optional timeout)
  "Save CHAT now and wait up to TIMEOUT seconds for the writes to finish.
Return the message of a write that failed, or nil."
  (when (and (mevedel-chat--saving-p chat)
             (mevedel-transcript-tracked-p (mevedel-chat-data-buffer chat)))
    (mevedel-chat-checkpoint chat (mevedel-chat--metadata chat))
    (mevedel-core-store-flush (mevedel-chat--store chat) timeout)))

(defun mevedel-chat--flush-all ()
  "Save every live chat before Emacs exits (`kill-emacs-hook')."
  (dolist (chat (mevedel-chat-list))
    (condition-case err
        (mevedel-chat-flush chat 3)
      (error (message "mevedel: saving %s failed: %s" (mevedel-chat-name chat)
                      (error-message-string err))))))

(add-hook 'kill-emacs-hook #'mevedel-chat--flush-all)

(defun mevedel-chat--settle-open-calls (chat pending text)
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

(defvar mevedel-chat-recovered-result-functions nil
  "Functions that may give the result of a call Emacs stopped during.
Each is called with the session's STORE, its saved metadata INFO (an
alist of strings), and the call's ID, NAME and ARGS; the first string
returned is the call's result instead of the plain cancellation.
ToolCall settles from its recorded envelope this way.")

(defun mevedel-chat-resume (chat)
  "Load the saved conversation of CHAT, a child agent's chat, from its store.
See `mevedel-chat--resume'; the agent runtime loads a retained agent
this way when it is first used."
  (mevedel-chat--resume chat))

(defun mevedel-chat--resume (chat)
  "Load CHAT's saved conversation, input history and metadata.
A turn that was running when Emacs stopped is settled: its calls get
cancelled results, its cut response is marked incomplete and a notice
says what happened."
  (when-let* ((open-calls (mevedel-chat--load chat (mevedel-chat--store chat t))))
    (mevedel-chat--recover chat (car open-calls)))
  (run-hook-with-args 'mevedel-chat-resume-functions chat))

(defun mevedel-chat--load (chat store)
  "Load CHAT's conversation, input history and metadata saved in STORE.
Nothing is written.  Return (OPEN-CALLS) when a turn was running as
the conversation was last saved, OPEN-CALLS the (ID NAME ARGS) of the
calls it ran; else nil."
  (let* ((buffer (mevedel-chat-data-buffer chat))
         (info (mevedel-core-store-info-get store))
         (get (lambda (key) (let ((v (cdr (assoc key info)))) (and v (not (string-empty-p v)) v)))))
    (mevedel-transcript-restore buffer store t)
    (setf (mevedel-chat-title chat) (funcall get "title")
          (mevedel-chat-created chat) (funcall get "created")
          (mevedel-chat-input-tokens chat) (string-to-number (or (funcall get "input-tokens") "0"))
          (mevedel-chat-output-tokens chat) (string-to-number (or (funcall get "output-tokens") "0"))
          (mevedel-chat-context-tokens chat) (and (funcall get "context-tokens")
                                                  (string-to-number (funcall get "context-tokens")))
          (mevedel-chat-history chat) (reverse (mevedel-core-store-inputs
                                                store mevedel-chat--history-kept)))
    ;; The backend saved may not be defined in this Emacs: then the
    ;; user's default one serves.
    (when-let* ((name (funcall get "backend"))
                (backend (ignore-error user-error (gptel-get-backend name))))
      (setf (mevedel-chat-backend chat) backend))
    (when-let* ((model (funcall get "model")))
      (setf (mevedel-chat-model chat) (intern model)))
    (with-current-buffer buffer
      (setf (mevedel-chat-turns chat)
            (mapcar (pcase-lambda (`(,id ,label ,start))
                      (list :id id :label label
                            :start (copy-marker (max (point-min) (min start (point-max))))))
                    (car (read-from-string (or (funcall get "turn-list") "nil"))))))
    (when (funcall get "turn-open")
      (list (car (read-from-string (or (funcall get "open-calls") "nil")))))))

(defun mevedel-chat--recover (chat open-calls)
  "Settle the turn of CHAT that was running when Emacs stopped.
OPEN-CALLS are the (ID NAME ARGS) of the calls it was running."
  (mevedel-transcript-complete (mevedel-chat-data-buffer chat))
  (let* ((store (mevedel-session-store-handle (mevedel-chat-session chat)))
         (info (mevedel-core-store-info-get store)))
    (mevedel-chat--settle-open-calls
     chat open-calls
     (lambda (id name args)
       (or (run-hook-with-args-until-success 'mevedel-chat-recovered-result-functions
                                             store info id name args)
           "Cancelled: Emacs stopped before this call finished."))))
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (let ((end (point-max)))
      (when (and (> end (point-min)) (eq (get-text-property (1- end) 'gptel) 'response))
        (let ((start (or (previous-single-property-change end 'gptel) (point-min))))
          (put-text-property start end 'mevedel-incomplete t)))))
  (mevedel-chat--insert-notice chat 'interrupted
                               "Interrupted: Emacs stopped before this turn finished")
  (mevedel-chat-checkpoint
   chat (mevedel-chat--metadata chat '("turn-open" . "") '("open-calls" . ""))))

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
Return nil when the call is not there, else `updated' or `unchanged'."
  (when-let* ((region (mevedel-chat-tool-region (mevedel-chat-data-buffer chat) id)))
    (with-current-buffer (mevedel-chat-data-buffer chat)
      (save-excursion
        (save-restriction
          (widen)
          (narrow-to-region (car region) (cdr region))
          (let* ((old (mevedel-render-data-extract (current-buffer) id))
                 (new (and old (funcall function old)))
                 (property (get-text-property (point-min) 'gptel))
                 (inhibit-read-only t))
            (if (or (null new) (eq new old)
                    (not (mevedel-render-data-replace (current-buffer) id new)))
                'unchanged
              ;; The new block belongs to the call's region, like the old.
              (put-text-property (point-min) (point-max) 'gptel property)
              (mevedel-chat--notify chat 'tool-updated id)
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

(defun mevedel-chat-of-buffer (buffer)
  "Return the chat whose data buffer is BUFFER, or nil."
  (and (buffer-live-p buffer)
       (let ((chat (buffer-local-value 'mevedel-chat--owner buffer)))
         (and (mevedel-chat-p chat) chat))))

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
         (mevedel-chat--notify chat 'permission request)
         (funcall (mevedel-chat-prompter chat) chat request)))))))

(defun mevedel-chat--keep-canceller (cancel)
  "Keep CANCEL, the thunk of a call started in this data buffer, with its turn.
Aborting the turn then cancels the call."
  (when-let* ((chat (mevedel-chat-of-buffer (current-buffer)))
              ((mevedel-chat-turn chat)))
    (push cancel (mevedel-chat-cancellers chat))))

(provide 'mevedel-chat)
;;; mevedel-chat.el ends here
