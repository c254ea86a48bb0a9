;;; mevedel-pipeline.el --- One execution pipeline for every tool call  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Every tool call, whether the model asked for it (a provider call,
;; `mevedel-pipeline-run-tool') or another tool or program did (a
;; nested call, `mevedel-pipeline-run-tool-outcome'), runs the same
;; steps:
;;
;;   1. schema-directed repair of the raw arguments (provider calls only;
;;      nested calls are validated without repair)
;;   2. PreToolUse hooks, each answering now or later (:await); an
;;      argument rewrite is validated again, never repaired; a hook's
;;      `allow' answers step 4's question, its `ask' forces one, and
;;      neither overrides a refusal (mevedel-hooks.el runs the user's
;;      hooks here)
;;   3. resource preparation, from the tool's declaration: `path'
;;      arguments are made absolute, and so are `path-or-resource' ones
;;      holding a path; a resource address is prepared for the
;;      argument's operation (`mevedel-pipeline-prepare-resources')
;;   4. permission: `mevedel-permissions-decide-call' allows, refuses,
;;      or asks through the session's prompter (a call that gptel's own
;;      confirmation already asked about is approved instead)
;;   5. snapshot capture for :snapshot-p tools
;;   6. the handler: (ARGS) or, for :async-p tools, (CALLBACK ARGS)
;;   7. the render transform, for successful string results without
;;      render-data
;;   8. PostToolUse hooks, or the failure hooks for an error
;;
;; and settle as one canonical outcome plist:
;;
;;   (:status success|error :result CANONICAL :raw-result RAW
;;    :render-data PLIST :media LIST :tool-use-id ID :parent-id ID
;;    :source SOURCE :name NAME :args ARGS :denied BOOL)
;;
;; :denied is non-nil when permission (a rule, the user, a PreToolUse
;; hook) refused the call rather than the tool failing.
;;
;; Any step can end the call with an error; a denied call never reaches
;; snapshots or the handler.  An automatic approval (a reviewer's, say)
;; is recorded by the permission step alone and lands in the outcome's
;; render-data as :permission-approvals, replacing whatever a handler or
;; transform put there, also when a later step fails.  Handlers hold no validation, hook,
;; permission or persistence code: they return a result (a legacy
;; "Error: ..." string is classified as an error here, at the handler
;; boundary, and nowhere else), or an envelope (:result R :status S
;; :render-data PLIST :media LIST); a signal becomes an error outcome.
;;
;; A provider call then projects the outcome for gptel: repair note and
;; hook context appended, oversized output persisted to the session's
;; tool-results/ (an <persisted-output> preview with an artifact://
;; address and exact Read and Grep follow-ups; omitted lines matching
;; `mevedel-pipeline-failure-patterns' are kept in it, numbered, within
;; the same budget, as they are in Bash output), and render-data attached
;; as the hidden block of mevedel-render-data.el; media, captured at the
;; handler boundary by mevedel-tool-media.el, ride on the text as
;; references in its `mevedel-tool-media' property.  Nested callers get the
;; canonical outcome only; an external provider (an MCP server) asks
;; `mevedel-pipeline-run-tool-outcome' for :projection `provider' and
;; gets the projected text as well, without the display block.
;;
;; Each settled call leaves a redacted tool-finished telemetry record,
;; kept in the session's store (see Telemetry below).
;;
;; Both entry points return a cancellation thunk that settles the call
;; exactly once; later continuations of a cancelled call are ignored.
;; Interactive chains yield to the command loop between steps after 20
;; ms of work, when input is pending, or eight runner frames deep;
;; batch callers chain synchronously.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-permissions)
(require 'mevedel-remote)
(require 'mevedel-render-data)
(require 'mevedel-resource)
(require 'mevedel-session)
(require 'mevedel-tool-media)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-repair)

;;;; Customization

(defgroup mevedel-pipeline nil
  "The tool execution pipeline of mevedel."
  :group 'mevedel
  :prefix "mevedel-pipeline-")

(defcustom mevedel-pipeline-yield-budget 0.02
  "Seconds of pipeline work after which an interactive chain yields."
  :type 'number)

(defcustom mevedel-pipeline-max-frames 8
  "Nested pipeline runner frames after which an interactive chain yields."
  :type 'natnum)

(defcustom mevedel-pipeline-result-cap 50000
  "Global cap (characters) on a tool result shown to the model.
A tool's :max-result-size applies only below this cap."
  :type 'natnum)

(defcustom mevedel-pipeline-preview-chars 4000
  "Characters of an oversized result kept in its preview (head plus tail)."
  :type 'natnum)

(defcustom mevedel-pipeline-read-continuation-lines 2000
  "Most lines the suggested Read continuation of persisted output asks for."
  :type 'natnum)

(defvar mevedel-pipeline--sent-failure-patterns 'unsent
  "The failure patterns last given to the module, or `unsent'.")

(defcustom mevedel-pipeline-failure-patterns
  '(;; cargo and rustc
    "^error(\\[E\\d{4}\\])?: "
    "^warning: "
    "^test \\S+ \\.\\.\\. FAILED$"
    "panicked at "
    "^test result: FAILED"
    ;; gcc, clang, Emacs's byte compiler and other file:line:col: tools
    "^[^\\s:]+(:\\d+){0,2}: ([Ff]atal [Ee]rror|[Ee]rror|[Ww]arning): "
    "undefined reference to "
    "[Aa]ssertion .*failed"
    ;; make
    "^make(\\[\\d+\\])?: \\*\\*\\* "
    ;; Python and pytest
    "^Traceback \\(most recent call last\\):"
    "^\\w*(Error|Exception)\\b"
    "^(FAILED|ERROR) \\S+::"
    "^=+ .*\\d+ (failed|errors?)\\b"
    ;; Node and npm
    "^not ok \\d+"
    "^npm (ERR!|error) "
    ;; Go
    "^--- FAIL: "
    "^FAIL(\\s|$)"
    "^panic: "
    "^\\s*\\S+\\.go:\\d+(:\\d+)?: "
    ;; ERT
    "^\\s+FAILED\\s+\\d+/\\d+\\s"
    "^Ran \\d+ tests?, .*[1-9]\\d* unexpected"
    "^Test \\S+ condition:$"
    ;; shells
    ": command not found$")
  "Regexps of lines a truncated preview keeps from its omitted middle.
When Bash or Monitor output, an oversized result or a
<persisted-output> preview leaves out a middle section, the omitted
lines that match one of these are shown too (at most 20, each with its
line number, within the preview's character budget).  Nil keeps none.

These are Rust `regex' syntax, not Emacs regexps: `(' `)' `|' `{' `}'
group and repeat unescaped, \\d \\s \\w \\b are classes and boundaries,
and `\\(' is a literal parenthesis.  Each is matched against one line
at a time, so ^ and $ are that line's ends.

Set through Customize or `setopt' (once the module is loaded), an
invalid pattern signals `mevedel-core-search-error' naming it and the
value stays as it was; a value set otherwise is checked before the next
preview (`mevedel-pipeline-sync-failure-patterns'), and an invalid one is
reported as a warning while the previous patterns stay in use."
  :type '(repeat string)
  :set (lambda (symbol value)
         (when (featurep 'mevedel-dyn)
           (mevedel-core-text-failure-patterns value)
           (setq mevedel-pipeline--sent-failure-patterns (copy-sequence value)))
         (set-default symbol value)))

;;;; Pluggable steps and hooks

(defvar mevedel-pipeline-tool-event-hook nil
  "Functions called with (EVENT INFO) as tool calls progress.
EVENT is `started', `permission-asked' (the call waits for the
user's answer), `permission-approved', `progress' (the handler
reported how far it is, see `mevedel-pipeline-report-progress') or
`settled'.  INFO is a fresh copy of (:event EVENT :tool-use-id ID
:parent-id ID :source SOURCE :name NAME :args ARGS :data-buffer
BUFFER), plus :status for `settled' and :progress TEXT for
`progress'.  Settlement is published before the caller's callback runs.
An observer's error is reported and changes nothing.")

(defvar mevedel-pipeline-pre-tool-use-functions nil
  "PreToolUse hooks: functions of one argument, the call context.
Each returns nil, or a plist: (:args NEW-ARGS) rewrites the arguments
\(validated again, never repaired), (:deny REASON) refuses the call,
\(:context TEXT) adds text to the provider's result, (:permission
`allow' or `ask' :permission-reason TEXT) lets the call skip the
permission question or forces it (a deny never becomes an allow).  A
hook that answers later returns (:await START): START is called with
a function to give the answer plist to, and may return a function
that stops the work when the call is cancelled.  A signal ends the
call with an error.")

(defvar mevedel-pipeline-post-tool-use-functions nil
  "PostToolUse hooks: functions of (CONTEXT OUTCOME) after a success.
They may return (:context TEXT), or (:await START) as PreToolUse
hooks do; their errors are reported only.")

(defvar mevedel-pipeline-post-tool-use-failure-functions nil
  "Failure hooks: functions of (CONTEXT OUTCOME) after an error outcome.
They may return (:context TEXT), or (:await START) as PreToolUse
hooks do; their errors are reported only.")


(defvar mevedel-pipeline-snapshot-functions nil
  "Functions of the call context run before a :snapshot-p tool's handler.
They capture what the call may change.  A signal ends the call with an
error before the handler runs.")

(defvar mevedel-pipeline-interactive-function (lambda () (not noninteractive))
  "Function returning non-nil when pipelines should yield between steps.")

(defvar mevedel-pipeline-input-pending-function #'input-pending-p
  "Function returning non-nil when user input is waiting.")

(defvar mevedel-pipeline-warn-function #'mevedel-pipeline--display-warning
  "Function of a message string that reports a non-fatal pipeline problem.")

;;;; Calls

(cl-defstruct (mevedel-pipeline--call (:constructor mevedel-pipeline--call-make)
                                      (:copier nil))
  tool name source tool-use-id parent-id data-buffer session confirmed
  args repair-note repair-event ran hook-context hook-queue hook-permission
  (step 0) waiting timer cancellers settled finish
  status result raw-result render-data media explicit-status
  approvals projection denied resolution directory (started (float-time)))

(defvar mevedel-pipeline--frames 0
  "Depth of nested pipeline runner frames on the current stack.")

(defvar mevedel-pipeline--slice-start nil
  "When the current uninterrupted stretch of pipeline work began.")

(defvar mevedel-pipeline--current nil
  "The call whose handler is starting or resuming, for handler helpers.")

(defvar mevedel-pipeline--judging nil
  "The call whose permission is being decided, for `mevedel-pipeline-pin'.")

(defun mevedel-pipeline--display-warning (message)
  "Report MESSAGE as a warning of type (mevedel pipeline)."
  (display-warning '(mevedel pipeline) message))

(defun mevedel-pipeline--warn (format-string &rest args)
  "Report FORMAT-STRING with ARGS through `mevedel-pipeline-warn-function'."
  (funcall mevedel-pipeline-warn-function (apply #'format format-string args)))

(defun mevedel-pipeline--context (call)
  "Return the context plist that CALL's hooks and functions receive."
  (list :tool (mevedel-pipeline--call-tool call)
        :name (mevedel-pipeline--call-name call)
        :args (mevedel-pipeline--call-args call)
        :tool-use-id (mevedel-pipeline--call-tool-use-id call)
        :parent-id (mevedel-pipeline--call-parent-id call)
        :source (mevedel-pipeline--call-source call)
        :data-buffer (mevedel-pipeline--call-data-buffer call)
        :session (mevedel-pipeline--call-session call)
        :confirmed (mevedel-pipeline--call-confirmed call)))

(defun mevedel-pipeline--workspace (call)
  "Return the directory name CALL's relative paths are relative to.
Worked out once per call: each name operation on it costs a search
of `file-name-handler-alist', and on a remote name a handler's work,
and the resources, permission and handler steps all need it."
  (or (mevedel-pipeline--call-directory call)
      (setf (mevedel-pipeline--call-directory call)
            (let ((directory (mevedel-session-call-directory
                              (mevedel-pipeline--call-session call)
                              (mevedel-pipeline--call-data-buffer call))))
              (if (directory-name-p directory)
                  directory
                (file-name-as-directory directory))))))

;;;; Events

(defun mevedel-pipeline--emit (call event &optional progress)
  "Publish EVENT of CALL to `mevedel-pipeline-tool-event-hook' observers.
PROGRESS is the text of a `progress' event."
  (let ((info (list :event event
                    :tool-use-id (mevedel-pipeline--call-tool-use-id call)
                    :parent-id (mevedel-pipeline--call-parent-id call)
                    :source (mevedel-pipeline--call-source call)
                    :name (mevedel-pipeline--call-name call)
                    :args (mevedel-pipeline--call-args call)
                    :data-buffer (mevedel-pipeline--call-data-buffer call))))
    (pcase event
      ('settled (setq info (append info (list :status (mevedel-pipeline--call-status call)))))
      ('progress (setq info (append info (list :progress progress)))))
    (run-hook-wrapped
     'mevedel-pipeline-tool-event-hook
     (lambda (observer)
       (condition-case err
           (funcall observer event (copy-tree info t))
         (error (mevedel-pipeline--warn "Tool event observer %S failed: %s"
                                        observer (error-message-string err))))
       nil))))

;;;; The runner

(defconst mevedel-pipeline--steps
  '(mevedel-pipeline--step-repair
    mevedel-pipeline--step-pre-hooks
    mevedel-pipeline--step-resources
    mevedel-pipeline--step-permission
    mevedel-pipeline--step-snapshot
    mevedel-pipeline--step-handler
    mevedel-pipeline--step-transform
    mevedel-pipeline--step-post-hooks)
  "The steps of every call, in order.
Each takes the call and returns non-nil to go on now, or nil when it
has arranged to resume the call later (see `mevedel-pipeline--await').")

(defun mevedel-pipeline--yield-p ()
  "Return non-nil when the running chain should yield before its next step."
  (and (funcall mevedel-pipeline-interactive-function)
       (or (>= mevedel-pipeline--frames mevedel-pipeline-max-frames)
           (> (- (float-time) mevedel-pipeline--slice-start) mevedel-pipeline-yield-budget)
           (funcall mevedel-pipeline-input-pending-function))))

(defun mevedel-pipeline--defer (call)
  "Continue CALL from an ordinary timer, once the current stack unwinds."
  (setf (mevedel-pipeline--call-timer call)
        (run-at-time 0 nil #'mevedel-pipeline--resume-deferred call)))

(defun mevedel-pipeline--resume-deferred (call)
  "Continue deferred CALL, unless a pipeline stack is still running.
A timer can fire inside a process wait of a running step; the call then
waits for that stack to unwind."
  (setf (mevedel-pipeline--call-timer call) nil)
  (unless (mevedel-pipeline--call-settled call)
    (if (> mevedel-pipeline--frames 0)
        (setf (mevedel-pipeline--call-timer call)
              (run-at-time 0.001 nil #'mevedel-pipeline--resume-deferred call))
      (mevedel-pipeline--advance call))))

(defun mevedel-pipeline--advance (call)
  "Advance CALL from where it stands until a step waits or CALL settles."
  (let* ((mevedel-pipeline--slice-start (or mevedel-pipeline--slice-start (float-time)))
         (mevedel-pipeline--frames (1+ mevedel-pipeline--frames))
         (first t))
    (catch 'mevedel-pipeline--stop
      (while (not (mevedel-pipeline--call-settled call))
        (when (and (not first) (mevedel-pipeline--yield-p))
          (mevedel-pipeline--defer call)
          (throw 'mevedel-pipeline--stop nil))
        (setq first nil)
        (let ((step (nth (mevedel-pipeline--call-step call) mevedel-pipeline--steps)))
          (if (null step)
              (mevedel-pipeline--settle call)
            (cl-incf (mevedel-pipeline--call-step call))
            (unless (funcall step call)
              (throw 'mevedel-pipeline--stop nil))))))))

(defun mevedel-pipeline--await (call receive)
  "Arrange for CALL to wait; return the continuation that resumes it.
The continuation calls RECEIVE with its arguments and advances CALL,
once.  A continuation that is late (the call was cancelled, settled or
is waiting on something else) does nothing."
  (let ((token (list 'waiting)))
    (setf (mevedel-pipeline--call-waiting call) token)
    (lambda (&rest values)
      (when (and (eq (mevedel-pipeline--call-waiting call) token)
                 (not (mevedel-pipeline--call-settled call)))
        (setf (mevedel-pipeline--call-waiting call) nil)
        (apply receive values)
        (mevedel-pipeline--advance call)))))

(defun mevedel-pipeline--fail (call result &optional early)
  "End CALL with the error RESULT: skip to its failure hooks.  Return t.
EARLY non-nil, or CALL being denied, skips the failure hooks too: a
call refused before it could run (invalid arguments, a malformed
address, a permission denial) has no use of the tool to report."
  (setf (mevedel-pipeline--call-status call) 'error
        (mevedel-pipeline--call-result call) result
        (mevedel-pipeline--call-raw-result call) result
        (mevedel-pipeline--call-step call)
        (if (or early (mevedel-pipeline--call-denied call))
            (length mevedel-pipeline--steps)
          (cl-position 'mevedel-pipeline--step-post-hooks mevedel-pipeline--steps)))
  t)

(defun mevedel-pipeline--render-data (call)
  "Return CALL's canonical render-data.
Any :permission-approvals that a handler or transform wrote are
replaced by the approvals the permission step accepted, if any."
  (let ((data (cl-loop for (key value) on (mevedel-pipeline--call-render-data call) by #'cddr
                       unless (eq key :permission-approvals) append (list key value)))
        (approvals (mevedel-pipeline--call-approvals call)))
    (if approvals
        (append data (list :permission-approvals (copy-tree approvals)))
      data)))

(defun mevedel-pipeline--outcome (call)
  "Return CALL's canonical outcome plist."
  (list :status (mevedel-pipeline--call-status call)
        :result (mevedel-pipeline--call-result call)
        :raw-result (mevedel-pipeline--call-raw-result call)
        :render-data (mevedel-pipeline--render-data call)
        :media (mevedel-pipeline--call-media call)
        :tool-use-id (mevedel-pipeline--call-tool-use-id call)
        :parent-id (mevedel-pipeline--call-parent-id call)
        :source (mevedel-pipeline--call-source call)
        :name (mevedel-pipeline--call-name call)
        :args (mevedel-pipeline--call-args call)
        :denied (mevedel-pipeline--call-denied call)))

(defun mevedel-pipeline--settle (call)
  "Settle CALL: publish `settled', then hand its outcome on.  Once only."
  (unless (mevedel-pipeline--call-settled call)
    (setf (mevedel-pipeline--call-settled call) t
          (mevedel-pipeline--call-waiting call) nil)
    (when-let* ((timer (mevedel-pipeline--call-timer call)))
      (cancel-timer timer)
      (setf (mevedel-pipeline--call-timer call) nil))
    (mevedel-pipeline--record-repair call)
    (mevedel-pipeline--record-finished call)
    (mevedel-pipeline--emit call 'settled)
    (funcall (mevedel-pipeline--call-finish call) (mevedel-pipeline--outcome call) call)))

(defun mevedel-pipeline--cancel (call)
  "Cancel CALL: withdraw what it waits for and settle it as an error.
Does nothing once CALL has settled."
  (unless (mevedel-pipeline--call-settled call)
    (when-let* ((timer (mevedel-pipeline--call-timer call)))
      (cancel-timer timer)
      (setf (mevedel-pipeline--call-timer call) nil))
    (setf (mevedel-pipeline--call-waiting call) nil)
    (dolist (canceller (prog1 (mevedel-pipeline--call-cancellers call)
                         (setf (mevedel-pipeline--call-cancellers call) nil)))
      (condition-case err
          (funcall canceller)
        (error (mevedel-pipeline--warn "Cancelling %s: %s" (mevedel-pipeline--call-name call)
                                       (error-message-string err)))))
    (setf (mevedel-pipeline--call-status call) 'error
          (mevedel-pipeline--call-result call)
          (format "Error: the %s call was cancelled" (mevedel-pipeline--call-name call)))
    (setf (mevedel-pipeline--call-raw-result call) (mevedel-pipeline--call-result call))
    (mevedel-pipeline--settle call)))

(defun mevedel-pipeline-add-canceller (function)
  "Run FUNCTION if the call whose handler is running now is cancelled.
Handlers call this to stop work they started; cancellers run newest
first, before the call settles."
  (when-let* ((call mevedel-pipeline--current))
    (push function (mevedel-pipeline--call-cancellers call))))

(defun mevedel-pipeline-continuation (function)
  "Return FUNCTION wrapped to run later inside the current handler's call.
A handler that waits (for a server, say) before its real work keeps
`mevedel-pipeline-current-context' and `mevedel-pipeline-add-canceller'
working in that work."
  (let ((call mevedel-pipeline--current))
    (lambda (&rest args)
      (let ((mevedel-pipeline--current call))
        (apply function args)))))

(defun mevedel-pipeline-report-progress (text)
  "Report TEXT as how far the call whose handler is running now has got.
TEXT is short (\"3/10 · indexing\"); the view shows the latest on the
call's row, or on the row of the ToolCall program that made it,
until the call settles.  From asynchronous work, call this inside a
`mevedel-pipeline-continuation'."
  (when-let* ((call mevedel-pipeline--current))
    (unless (mevedel-pipeline--call-settled call)
      (mevedel-pipeline--emit call 'progress text))))

(defun mevedel-pipeline-current-context ()
  "Return the context plist of the call whose handler is running now, or nil.
See `mevedel-pipeline--context' for its keys (:session, :tool-use-id, ...)."
  (and mevedel-pipeline--current (mevedel-pipeline--context mevedel-pipeline--current)))

(defun mevedel-pipeline-current-tool-use-id ()
  "Return the tool-use ID of the call whose handler is running now."
  (and mevedel-pipeline--current
       (mevedel-pipeline--call-tool-use-id mevedel-pipeline--current)))

(defun mevedel-pipeline-pin (resolve)
  "Keep what the call being judged resolves its arguments to: RESOLVE's value.
A tool's :get-paths calls this while permission is decided, so that
its handler acts on what was approved (`mevedel-pipeline-pinned'),
never on a second resolution that a changed link or directory would
redirect.  RESOLVE, a function of no arguments, runs in the call's
directory, as the handler will; outside a permission decision it is
not called."
  (when mevedel-pipeline--judging
    (setf (mevedel-pipeline--call-resolution mevedel-pipeline--judging) (funcall resolve))))

(defun mevedel-pipeline-pinned ()
  "Return what the running handler's call was approved with, or nil.
See `mevedel-pipeline-pin'."
  (and mevedel-pipeline--current
       (mevedel-pipeline--call-resolution mevedel-pipeline--current)))

(defun mevedel-pipeline-active-permission-approvals ()
  "Return a copy of the automatic approvals of the current handler's call.
Each is (:source SOURCE :outcome OUTCOME :reason TEXT).  This is
provenance for the handler's own records, never permission authority."
  (and mevedel-pipeline--current
       (copy-tree (mevedel-pipeline--call-approvals mevedel-pipeline--current))))

;;;; Telemetry

;; Each settled call leaves a redacted tool-finished record (tool,
;; identity, calling agent, outcome, whether the handler ran, duration;
;; never arguments or results), and a ToolCall program its ptc-script
;; span (mevedel-ptc.el).  A session keeps its newest records in memory
;; and, once it has a store, saves each there as session metadata
;; "tool-telemetry N", a list of one record (earlier versions saved up
;; to 100 under one N): a call prints its own record, never the ones
;; before it.  Records made before the store exists are saved when it
;; is made.

(defcustom mevedel-pipeline-telemetry-limit 500
  "How many telemetry records a session keeps in memory."
  :type 'natnum)

(cl-defstruct (mevedel-pipeline--telemetry (:constructor mevedel-pipeline--telemetry-make)
                                           (:copier nil))
  "One session's telemetry: newest first, the next key's number, unsaved ones."
  records next unsaved)

(defvar mevedel-pipeline--telemetry (make-hash-table :test #'eq :weakness 'key)
  "Session -> its `mevedel-pipeline--telemetry'.")

(defun mevedel-pipeline-telemetry (session)
  "Return SESSION's telemetry records kept in memory, oldest first."
  (when-let* ((log (gethash session mevedel-pipeline--telemetry)))
    (reverse (mevedel-pipeline--telemetry-records log))))

(defun mevedel-pipeline-saved-telemetry (info)
  "Return the telemetry records saved in session metadata INFO, oldest first.
A chunk that does not read is skipped."
  (let (chunks)
    (pcase-dolist (`(,key . ,text) info)
      (when (and (string-match "\\`tool-telemetry \\([0-9]+\\)\\'" key) text)
        (let ((records (ignore-errors (car (read-from-string text)))))
          (when (consp records)
            (push (cons (string-to-number (match-string 1 key)) records) chunks)))))
    (apply #'append (mapcar #'cdr (sort chunks :key #'car)))))

(defun mevedel-pipeline-record-telemetry (session record)
  "Record the redacted RECORD (a plist) of SESSION, stamped with :at.
Never signals: telemetry must not stop a tool call."
  (when (mevedel-session-p session)
    (condition-case err
        (let ((log (or (gethash session mevedel-pipeline--telemetry)
                       (puthash session (mevedel-pipeline--telemetry-make)
                                mevedel-pipeline--telemetry)))
              (record (append (list :at (truncate (* 1000 (float-time)))) record)))
          (setf (mevedel-pipeline--telemetry-records log)
                (take mevedel-pipeline-telemetry-limit
                      (cons record (mevedel-pipeline--telemetry-records log))))
          (push record (mevedel-pipeline--telemetry-unsaved log))
          (mevedel-pipeline--save-telemetry session log))
      (error (mevedel-pipeline--warn "Recording tool telemetry failed: %s"
                                     (error-message-string err))))))

(defun mevedel-pipeline--save-telemetry (session log)
  "Save LOG's unsaved records in SESSION's store, when it has one."
  (when-let* ((store (mevedel-session-store session))
              (unsaved (mevedel-pipeline--telemetry-unsaved log)))
    (unless (mevedel-pipeline--telemetry-next log)
      ;; After the records an earlier Emacs saved for this session.
      (setf (mevedel-pipeline--telemetry-next log)
            (1+ (cl-loop for (key . _) in (mevedel-core-store-info-get store)
                         when (string-match "\\`tool-telemetry \\([0-9]+\\)\\'" key)
                         maximize (string-to-number (match-string 1 key)) into top
                         finally return (or top -1)))))
    (let ((print-length nil) (print-level nil) (print-escape-newlines t))
      (mevedel-core-store-info-set
       store (cl-loop for record in (reverse unsaved)
                      collect (cons (format "tool-telemetry %d"
                                            (1- (cl-incf (mevedel-pipeline--telemetry-next log))))
                                    (prin1-to-string (list record))))))
    (setf (mevedel-pipeline--telemetry-unsaved log) nil)))

(defun mevedel-pipeline--telemetry-materialized (session _directory)
  "Save the telemetry SESSION recorded before it had a store."
  (when-let* ((log (gethash session mevedel-pipeline--telemetry)))
    (condition-case err
        (mevedel-pipeline--save-telemetry session log)
      (error (mevedel-pipeline--warn "Saving tool telemetry failed: %s"
                                     (error-message-string err))))))

(add-hook 'mevedel-session-storage-functions #'mevedel-pipeline--telemetry-materialized)

(defun mevedel-pipeline-telemetry-origin (buffer)
  "Return the path of the agent whose data buffer BUFFER is."
  (if (buffer-live-p buffer)
      (buffer-local-value 'mevedel-tool-repair-origin buffer)
    "/root"))

(defun mevedel-pipeline--record-finished (call)
  "Record the tool-finished telemetry of the settled CALL."
  (mevedel-pipeline-record-telemetry
   (mevedel-pipeline--call-session call)
   (list :event 'tool-finished
         :tool (mevedel-pipeline--call-name call)
         :tool-use-id (mevedel-pipeline--call-tool-use-id call)
         :parent-id (mevedel-pipeline--call-parent-id call)
         :source (mevedel-pipeline--call-source call)
         :origin (mevedel-pipeline-telemetry-origin (mevedel-pipeline--call-data-buffer call))
         :status (mevedel-pipeline--call-status call)
         :denied (and (mevedel-pipeline--call-denied call) t)
         :executed (and (mevedel-pipeline--call-ran call) t)
         :ms (round (* 1000 (- (float-time) (mevedel-pipeline--call-started call)))))))

;;;; Steps

(defun mevedel-pipeline--repair-event (call check)
  "Keep the repair event of CHECK of CALL's arguments, if not valid.
It is recorded with the repair diagnostics when CALL settles, saying
whether the handler ran and how it ended."
  (when-let* ((event (mevedel-tool-repair-event (mevedel-pipeline--call-tool call) check)))
    (let ((buffer (mevedel-pipeline--call-data-buffer call)))
      (when (buffer-live-p buffer)
        ;; The calling agent's path, which its data buffer holds.
        (setq event (plist-put event :origin
                               (buffer-local-value 'mevedel-tool-repair-origin buffer)))))
    (setf (mevedel-pipeline--call-repair-event call)
          (append event (list :source (mevedel-pipeline--call-source call))))))

(defun mevedel-pipeline--record-repair (call)
  "Record CALL's repair event, if any, now that CALL has settled."
  (when-let* ((event (mevedel-pipeline--call-repair-event call)))
    (let ((session (mevedel-pipeline--call-session call)))
      (mevedel-tool-repair-record
       (append event
               (list :executed (and (mevedel-pipeline--call-ran call) t)
                     :result (cond ((not (mevedel-pipeline--call-ran call)) 'refused)
                                   ((eq (mevedel-pipeline--call-status call) 'error) 'error)
                                   (t 'ok))))
       session
       ;; The log persists beside the session's store once it has one.
       (and (mevedel-session-p session) (mevedel-session-store session)
            (mevedel-session-directory session))))))

(add-hook 'mevedel-session-storage-functions #'mevedel-tool-repair-log-materialized)

(defun mevedel-pipeline--step-repair (call)
  "Validate CALL's raw arguments; repair them when CALL is a provider call."
  (let* ((check (mevedel-tool-repair-check (mevedel-pipeline--call-tool call)
                                           (mevedel-pipeline--call-args call)
                                           (or (eq (mevedel-pipeline--call-source call) 'provider)
                                               (eq (mevedel-pipeline--call-projection call)
                                                   'provider)))))
    (mevedel-pipeline--repair-event call check)
    (pcase (plist-get check :outcome)
      ('valid t)
      ('repaired
       (setf (mevedel-pipeline--call-args call) (plist-get check :args)
             (mevedel-pipeline--call-repair-note call) (plist-get check :note))
       t)
      (_ (mevedel-pipeline--fail call (plist-get check :guidance) t)))))

(defun mevedel-pipeline--run-hooks (call hooks invoke apply)
  "Run HOOKS of CALL in order, going on from where an awaited one left off.
INVOKE calls a hook and returns its answer; APPLY applies an answer
and returns nil when that ended CALL.  An answer (:await START) makes
CALL wait for the answer START is given (see
`mevedel-pipeline-pre-tool-use-functions'); this step then runs again
for the hooks left.  Return t to go on now, nil while waiting."
  (let ((queue (if-let* ((left (mevedel-pipeline--call-hook-queue call)))
                   (cdr left)
                 hooks)))
    (setf (mevedel-pipeline--call-hook-queue call) nil)
    (catch 'done
      (while queue
        (let ((answer (funcall invoke (pop queue))))
          (if (eq (car-safe answer) :await)
              (let* ((rest queue)
                     (resume (mevedel-pipeline--await
                              call (lambda (answer)
                                     (when (funcall apply answer)
                                       (setf (mevedel-pipeline--call-hook-queue call)
                                             (cons 'left rest))
                                       (cl-decf (mevedel-pipeline--call-step call))))))
                     (stop (funcall (cadr answer) resume)))
                (when (functionp stop)
                  (push stop (mevedel-pipeline--call-cancellers call)))
                (throw 'done nil))
            (unless (funcall apply answer)
              (throw 'done t)))))
      t)))

(defun mevedel-pipeline--apply-pre-answer (call answer)
  "Apply the PreToolUse ANSWER to CALL; return nil when it ended CALL."
  (catch 'done
    (when-let* ((text (plist-get answer :context)))
      (setf (mevedel-pipeline--call-hook-context call)
            (append (mevedel-pipeline--call-hook-context call) (list text))))
    (when (plist-member answer :deny)
      (mevedel-pipeline--fail
       call (mevedel-pipeline--refusal
             call (format "a PreToolUse hook blocked this %s call: %s"
                          (mevedel-pipeline--call-name call)
                          (or (plist-get answer :deny) "no reason given"))))
      (throw 'done nil))
    (when (plist-member answer :args)
      (let ((check (condition-case err
                       (mevedel-tool-repair-check (mevedel-pipeline--call-tool call)
                                                  (plist-get answer :args) nil)
                     (error (list :outcome 'invalid :guidance (error-message-string err))))))
        (if (eq (plist-get check :outcome) 'valid)
            (setf (mevedel-pipeline--call-args call) (plist-get check :args))
          (mevedel-pipeline--fail
           call (concat "Error: a PreToolUse hook rewrote the arguments invalidly. "
                        (plist-get check :guidance))
           t)
          (throw 'done nil))))
    (when-let* ((permission (plist-get answer :permission)))
      (when (memq permission '(allow ask))
        (let ((old (car (mevedel-pipeline--call-hook-permission call))))
          (unless (eq old 'ask)
            (setf (mevedel-pipeline--call-hook-permission call)
                  (cons permission (plist-get answer :permission-reason)))))))
    t))

(defun mevedel-pipeline--step-pre-hooks (call)
  "Run the PreToolUse hooks of CALL.
Rewritten arguments are validated again; a denial refuses CALL."
  (mevedel-pipeline--run-hooks
   call mevedel-pipeline-pre-tool-use-functions
   (lambda (hook)
     (condition-case err
         (funcall hook (mevedel-pipeline--context call))
       (error (list :failed (error-message-string err)))))
   (lambda (answer)
     (if (plist-member answer :failed)
         (progn (mevedel-pipeline--fail
                 call (format "Error: a PreToolUse hook failed: %s" (plist-get answer :failed)))
                nil)
       (mevedel-pipeline--apply-pre-answer call answer)))))

(defun mevedel-pipeline-prepare-resources (tool args workspace session)
  "Return ARGS of TOOL with its path arguments prepared from its declaration.
A `path' argument, and a `path-or-resource' one holding a path, is
made absolute against WORKSPACE.  A resource address in a
`path-or-resource' argument is prepared for that argument's operation
\(see `mevedel-tool-resource-operation') in SESSION, which owns its
work:// and artifact:// resources; the attempt waits for the handler
\(`mevedel-resource-take-prepared').  A malformed address, an
unsupported operation or a containment failure signals."
  (let ((args (copy-sequence args))
        (mevedel-session-current (or session mevedel-session-current)))
    (dolist (arg (mevedel-tool-args tool) args)
      (pcase-let* ((`(,name ,type . ,_) arg)
                   (key (mevedel-tool-arg-key name))
                   (value (plist-get args key)))
        (when (and (stringp value) (not (string-empty-p value))
                   (memq type '(path path-or-resource)))
          (if (and (eq type 'path-or-resource) (mevedel-resource-address-p value))
              (mevedel-resource-prepare-kept value (mevedel-tool-resource-operation tool arg))
            (setq args (plist-put args key (mevedel-remote-expand-file-name value workspace)))))))))

(defun mevedel-pipeline--step-resources (call)
  "Prepare CALL's path and resource arguments before permission."
  (condition-case err
      (progn
        (setf (mevedel-pipeline--call-args call)
              (mevedel-pipeline-prepare-resources
               (mevedel-pipeline--call-tool call) (mevedel-pipeline--call-args call)
               (mevedel-pipeline--workspace call) (mevedel-pipeline--call-session call)))
        t)
    (error (mevedel-pipeline--fail call (format "Error: %s" (error-message-string err)) t))))

(defun mevedel-pipeline--ahead (call)
  "Let CALL's tool start what its handler will ask for (its :ahead).
It gets the arguments as CALL starts, before any step: the work then
overlaps them all.  The handler asks for that work anyway (and only
takes this if its arguments came through the steps unchanged), so a
failure here only means it waits for the work itself: it is not
CALL's failure."
  (when-let* ((ahead (mevedel-tool-ahead (mevedel-pipeline--call-tool call))))
    (let ((default-directory (mevedel-pipeline--workspace call)))
      (condition-case nil
          (funcall ahead (mevedel-pipeline--call-args call))
        (error nil)))))

(defun mevedel-pipeline--refusal (call reason)
  "Mark CALL denied and return its refusal text, for REASON (a string or nil).
The outcome's :denied then tells a program that called the tool
\(ToolCall) that permission, not the tool, stopped it."
  (setf (mevedel-pipeline--call-denied call) t)
  (format "Permission denied: %s" (or reason (format "the %s call was not allowed"
                                                     (mevedel-pipeline--call-name call)))))

(defun mevedel-pipeline--approval-record (record)
  "Return the approval RECORD normalised, or nil when it is not one.
A record is a keyword plist with a symbol :source and a string :reason;
:outcome defaults to `allow-once'.  A string :review-id (the review
that approved, see `mevedel-define-tool''s :review) is kept for the
handler."
  (when (and (mevedel-render-data-plist-p record)
             (plist-get record :source) (symbolp (plist-get record :source))
             (stringp (plist-get record :reason)))
    (append (list :source (plist-get record :source)
                  :outcome (or (plist-get record :outcome) 'allow-once)
                  :reason (plist-get record :reason))
            (when-let* ((id (plist-get record :review-id))
                        ((stringp id)))
              (list :review-id id)))))

(defun mevedel-pipeline--approved (call &optional record)
  "Record that CALL may run and continue.  Return t.
RECORD, when given, is the automatic approval that allowed it (see
`mevedel-pipeline--approval-record'); a malformed one refuses CALL."
  (let ((approval (and record (mevedel-pipeline--approval-record record))))
    (if (and record (not approval))
        (mevedel-pipeline--fail
         call (format "Error: the permission check approved with a malformed record %S" record))
      (when approval
        (setf (mevedel-pipeline--call-approvals call)
              (append (mevedel-pipeline--call-approvals call) (list approval))))
      (mevedel-pipeline--emit call 'permission-approved)
      t)))

(defun mevedel-pipeline--answer (call answer)
  "Apply the prompt's ANSWER to CALL."
  (pcase answer
    ('approve (mevedel-pipeline--approved call))
    (`(approve . ,record) (mevedel-pipeline--approved call record))
    (`(deny . ,reason) (mevedel-pipeline--fail call (mevedel-pipeline--refusal call reason)))
    (_ (mevedel-pipeline--fail
        call (mevedel-pipeline--refusal
              call (format "the user declined this %s call; do not retry it unchanged"
                           (mevedel-pipeline--call-name call)))))))

(defun mevedel-pipeline--hook-decision (call decision)
  "Return DECISION about CALL, as modified by its PreToolUse hooks.
A hook's `ask' turns an allow into a question; its `allow' answers a
question, recorded as the hook's approval.  A refusal stays one."
  (pcase-let ((`(,permission . ,reason) (mevedel-pipeline--call-hook-permission call)))
    (cond
     ((and (eq permission 'ask) (or (eq decision 'allow) (eq (car-safe decision) 'allow)))
      'ask)
     ((and (eq permission 'allow) (eq decision 'ask))
      (cons 'allow (list :source 'hook :outcome 'allow-once
                         :reason (or reason (format "a PreToolUse hook allowed this %s call"
                                                    (mevedel-pipeline--call-name call))))))
     (t decision))))

(defun mevedel-pipeline--step-permission (call)
  "Allow, refuse, or ask about CALL.
The decision is `mevedel-permissions-decide-call''s.  An `ask' goes to
the session's prompter; without one, a call gptel's own confirmation
already asked about is approved (and recorded so), any other refused.
An approval may carry a record: (allow . RECORD) from the decision, or
\(approve . RECORD) from the prompter, e.g. (:source reviewer :outcome
allow-once :reason \"read-only\"); it becomes part of the outcome's
render-data as :permission-approvals."
  (let* ((session (mevedel-pipeline--call-session call))
         ;; A step resumed from a timer runs in no particular buffer: the
         ;; tool's :get-paths and :review resolve paths in the call's.
         (mevedel-session-current (or session mevedel-session-current))
         (default-directory (mevedel-pipeline--workspace call))
         (decision (mevedel-pipeline--hook-decision
                    call (condition-case err
                             (let ((mevedel-pipeline--judging call))
                               (mevedel-permissions-decide-call (mevedel-pipeline--context call)
                                                                session))
                           (error (list 'failed (error-message-string err))))))
         (name (mevedel-pipeline--call-name call)))
    (pcase decision
      ('allow (mevedel-pipeline--approved call))
      (`(allow . ,record) (mevedel-pipeline--approved call record))
      ('deny (mevedel-pipeline--fail call (mevedel-pipeline--refusal call nil)))
      (`(deny . ,reason) (mevedel-pipeline--fail call (mevedel-pipeline--refusal call reason)))
      ('ask
       (let ((prompter (and (mevedel-session-p session) (mevedel-session-prompter session))))
         (cond
          (prompter
           (mevedel-pipeline--emit call 'permission-asked)
           (let* ((answer (mevedel-pipeline--await
                           call (lambda (answer) (mevedel-pipeline--answer call answer))))
                  (withdraw (funcall prompter (mevedel-pipeline--context call) answer)))
             (when (functionp withdraw)
               (push withdraw (mevedel-pipeline--call-cancellers call)))
             ;; The prompt may have answered already.
             nil))
          ((mevedel-pipeline--call-confirmed call)
           (mevedel-pipeline--approved
            call (list :source 'gptel-confirmation :outcome 'allow-once
                       :reason (format "the user confirmed this %s call in gptel" name))))
          ((mevedel-session-p session)
           (mevedel-pipeline--fail
            call (mevedel-pipeline--refusal
                  call (mevedel-permissions-refusal-reason name 'headless))))
          (t (mevedel-pipeline--fail
              call (mevedel-pipeline--refusal
                    call (format "this %s call needs approval and nobody can approve it here; \
run it in a mevedel session (M-x mevedel), enable gptel's tool confirmation, or add an \
allow rule to `mevedel-permissions-rules'" name)))))))
      (`(failed ,message)
       (mevedel-pipeline--fail call (format "Error: the permission check failed: %s" message)))
      (_ (mevedel-pipeline--fail
          call (format "Error: the permission check returned %S" decision))))))

(defun mevedel-pipeline--step-snapshot (call)
  "Capture snapshots before CALL's handler when its tool is :snapshot-p."
  (if (not (mevedel-tool-snapshot-p (mevedel-pipeline--call-tool call)))
      t
    (condition-case err
        (progn (run-hook-with-args 'mevedel-pipeline-snapshot-functions
                                   (mevedel-pipeline--context call))
               t)
      (error (mevedel-pipeline--fail
              call (format "Error: capturing a snapshot failed: %s"
                           (error-message-string err)))))))

(defun mevedel-pipeline--envelope-p (value)
  "Return non-nil when VALUE has the form of a handler envelope (a :result)."
  (and (consp value) (keywordp (car value)) (proper-list-p value)
       (plist-member value :result)))

(defun mevedel-pipeline--media-p (media)
  "Return non-nil when MEDIA is a proper list of media records (nil included).
A record is a keyword plist with a string :mime and a string :data
\(the bytes) or :path (a file), or a reference an earlier capture
gave (a nested call's media passed on)."
  (and (proper-list-p media)
       (cl-every (lambda (record)
                   (and (mevedel-render-data-plist-p record)
                        (or (mevedel-tool-media-reference-p record)
                            (and (stringp (plist-get record :mime))
                                 (or (stringp (plist-get record :data))
                                     (stringp (plist-get record :path)))))))
                 media)))

(defun mevedel-pipeline--capture-media (call media)
  "Return the references of CALL's well-formed MEDIA, or the error text.
The error (bytes that are not what they claim, a file that cannot be
read) fails the call rather than reach the model without its image."
  (condition-case err
      (and media (mevedel-tool-media-capture media (mevedel-pipeline--call-tool-use-id call)
                                             (mevedel-pipeline--call-session call)))
    (error (format "Error: %s" (error-message-string err)))))

(defun mevedel-pipeline--accept (call value)
  "Take the handler's return VALUE for CALL: classify it at the boundary."
  (let (result status render-data media explicit)
    (if (mevedel-pipeline--envelope-p value)
        (setq result (plist-get value :result)
              explicit (plist-get value :status)
              render-data (plist-get value :render-data)
              media (plist-get value :media))
      (setq result value))
    (cond
     ((and (mevedel-pipeline--envelope-p value)
           (not (mevedel-render-data-plist-p value)))
      (mevedel-pipeline--fail call (format "Error: the %s handler returned a malformed envelope"
                                           (mevedel-pipeline--call-name call))))
     ((not (memq explicit '(nil success error)))
      (mevedel-pipeline--fail call (format "Error: the %s handler returned an invalid :status %S"
                                           (mevedel-pipeline--call-name call) explicit)))
     ((and render-data (not (mevedel-render-data-plist-p render-data)))
      (mevedel-pipeline--fail call (format "Error: the %s handler returned :render-data that is \
not a keyword plist" (mevedel-pipeline--call-name call))))
     ((not (mevedel-pipeline--media-p media))
      (mevedel-pipeline--fail call (format "Error: the %s handler returned :media that is not \
a list of (:mime TYPE :data BYTES) or (:mime TYPE :path FILE) records"
                                           (mevedel-pipeline--call-name call))))
     ((stringp (setq media (mevedel-pipeline--capture-media call media)))
      (mevedel-pipeline--fail call media))
     (t
      (when (stringp result)
        (setq result (mevedel-core-text-normalize result)))
      (setq status (or explicit
                       (if (and (stringp result) (string-prefix-p "Error:" result))
                           'error
                         'success)))
      (setf (mevedel-pipeline--call-status call) status
            (mevedel-pipeline--call-explicit-status call) explicit
            (mevedel-pipeline--call-result call) result
            (mevedel-pipeline--call-raw-result call) (if (mevedel-pipeline--envelope-p value)
                                                         (plist-get value :result)
                                                       value)
            (mevedel-pipeline--call-render-data call) render-data
            (mevedel-pipeline--call-media call) media)))))

(defun mevedel-pipeline--signal-result (err)
  "Return the error result for the handler signal ERR."
  (format "Error: %s" (error-message-string err)))

(defun mevedel-pipeline--step-handler (call)
  "Run CALL's handler and classify its answer."
  (let* ((tool (mevedel-pipeline--call-tool call))
         ;; A wrapped tool whose source changed has no handler to run.
         (handler (condition-case err (mevedel-tool-handler tool)
                    (error (mevedel-pipeline--signal-result err))))
         (args (mevedel-tool-repair-handler-args (mevedel-pipeline--call-args call)))
         (mevedel-pipeline--current call)
         (default-directory (mevedel-pipeline--workspace call)))
    (setf (mevedel-pipeline--call-ran call) t)
    (cond
     ((stringp handler)
      (mevedel-pipeline--accept call handler)
      t)
     ((not (mevedel-tool-async-p tool))
      (mevedel-pipeline--accept
       call (condition-case err
                (funcall handler args)
              (error (mevedel-pipeline--signal-result err))))
      t)
     (t
      (let* ((callback (mevedel-pipeline--await
                        call (lambda (value)
                               (let ((mevedel-pipeline--current call))
                                 (mevedel-pipeline--accept call value)))))
             (token (mevedel-pipeline--call-waiting call)))
        (condition-case err
            (progn (funcall handler callback args) nil)
          (error
           (if (not (eq (mevedel-pipeline--call-waiting call) token))
               ;; It answered before signalling; the answer stands.
               nil
             (setf (mevedel-pipeline--call-waiting call) nil)
             (mevedel-pipeline--accept call (mevedel-pipeline--signal-result err))
             t))))))))

(defun mevedel-pipeline--step-transform (call)
  "Derive CALL's render-data with its tool's :render-transform, if any.
Only successful string results without render-data qualify."
  (let ((transform (mevedel-tool-render-transform (mevedel-pipeline--call-tool call)))
        (result (mevedel-pipeline--call-result call)))
    (when (and transform (stringp result)
               (not (eq (mevedel-pipeline--call-status call) 'error))
               (null (mevedel-pipeline--call-render-data call)))
      (condition-case err
          (let ((data (funcall transform (mevedel-pipeline--call-name call)
                               (mevedel-pipeline--call-args call) result)))
            (cond
             ((null data))
             ((not (mevedel-render-data-plist-p data))
              (mevedel-pipeline--warn "Render transform of %s returned no keyword plist; ignored"
                                      (mevedel-pipeline--call-name call)))
             ((> (length (mevedel-render-data-print data)) mevedel-render-data-transform-limit)
              (mevedel-pipeline--warn "Render transform of %s returned more than %d characters \
of metadata; ignored" (mevedel-pipeline--call-name call) mevedel-render-data-transform-limit))
             (t (setf (mevedel-pipeline--call-render-data call) data))))
        (error (mevedel-pipeline--warn "Render transform of %s failed: %s"
                                       (mevedel-pipeline--call-name call)
                                       (error-message-string err)))))
    t))

(defun mevedel-pipeline--step-post-hooks (call)
  "Run CALL's PostToolUse hooks, or its failure hooks after an error."
  (mevedel-pipeline--run-hooks
   call (if (eq (mevedel-pipeline--call-status call) 'error)
            mevedel-pipeline-post-tool-use-failure-functions
          mevedel-pipeline-post-tool-use-functions)
   (lambda (hook)
     (condition-case err
         (funcall hook (mevedel-pipeline--context call) (mevedel-pipeline--outcome call))
       (error (mevedel-pipeline--warn "A post-tool-use hook failed: %s"
                                      (error-message-string err))
              nil)))
   (lambda (answer)
     (when-let* ((text (plist-get answer :context)))
       (setf (mevedel-pipeline--call-hook-context call)
             (append (mevedel-pipeline--call-hook-context call) (list text))))
     t)))

;;;; Entry points

(cl-defun mevedel-pipeline--start (tool args finish &key source tool-use-id parent-id
                                        data-buffer session projection confirmed)
  "Start a call of TOOL with ARGS; return the call.
FINISH gets the outcome and the call when it settles.  SOURCE,
TOOL-USE-ID, PARENT-ID, DATA-BUFFER and SESSION identify the call;
PROJECTION `provider' asks for provider treatment (repair, projection).
CONFIRMED says gptel's own confirmation already asked the user."
  (let* ((data-buffer (or data-buffer (current-buffer)))
         (session (or session (and (buffer-live-p data-buffer)
                                   (buffer-local-value 'mevedel-session-current data-buffer))))
         (call (mevedel-pipeline--call-make
                :tool tool :name (mevedel-tool-name tool) :source source
                :tool-use-id tool-use-id :parent-id parent-id
                :data-buffer data-buffer :session session :confirmed confirmed
                :args args :finish finish :projection projection)))
    (mevedel-pipeline--ahead call)
    (mevedel-pipeline--emit call 'started)
    (mevedel-pipeline--advance call)
    call))

(defun mevedel-pipeline--canceller (call)
  "Return the cancellation thunk of CALL."
  (lambda () (mevedel-pipeline--cancel call)))

(cl-defun mevedel-pipeline-run-tool-outcome (tool args callback &key tool-use-id parent-id
                                                  (source 'nested) data-buffer session
                                                  projection confirmed bound)
  "Run TOOL with ARGS as a nested or programmatic call; CALLBACK gets the outcome.
ARGS is the JSON-faithful argument plist; it is validated, never
repaired.  The outcome is the canonical plist described in the
Commentary, without provider-only projection text.  TOOL-USE-ID,
PARENT-ID, SOURCE (default `nested'), DATA-BUFFER and SESSION
identify the call; CONFIRMED is as for `mevedel-pipeline-run-tool'.
Return a thunk that cancels the call.

PROJECTION `provider' is for external providers (an MCP server
answering a model): ARGS may then be repaired, and the outcome also
holds :projection `provider' and :provider-result, the text a gptel
call would get (repair feedback, hook context, oversized output
persisted) without the render-data block.  Status, identity, media and
the canonical :render-data stay in the outcome.

BOUND, a number of characters, bounds a string :result longer than it
as a provider result is bounded (to TOOL's limit, else BOUND), the
full text persisted with an artifact:// address when the session has
storage: a ToolCall program gets a preview instead of failing on its
value budget."
  (mevedel-pipeline--canceller
   (mevedel-pipeline--start
    tool args
    (lambda (outcome call)
      (let ((result (plist-get outcome :result)))
        (when (and bound (stringp result) (> (length result) bound))
          (setq outcome (plist-put (copy-sequence outcome) :result
                                   (mevedel-pipeline--bound-text
                                    call result (plist-get outcome :status) bound)))))
      (funcall callback
               (if (eq projection 'provider)
                   (append outcome
                           (list :projection 'provider
                                 :provider-result (mevedel-pipeline--provider-result
                                                   outcome call)))
                 outcome)))
    :source source :tool-use-id tool-use-id :projection projection :confirmed confirmed
    :parent-id parent-id :data-buffer data-buffer :session session)))

(cl-defun mevedel-pipeline-run-tool (tool args callback &key tool-use-id parent-id
                                          data-buffer session confirmed)
  "Run TOOL with ARGS as a provider call; CALLBACK gets gptel's result value.
ARGS are the model's raw arguments (a JSON-faithful plist): they may be
repaired.  TOOL-USE-ID, PARENT-ID, DATA-BUFFER and SESSION identify
the call.  CONFIRMED non-nil says gptel's own confirmation already
asked the user about this call (the gptel adapter knows), which
approves a call nobody else can be asked about.  The result is the
provider projection of the outcome (see `mevedel-pipeline-project').
Return a thunk that cancels the call.

Every provider call of a registered tool comes here: the gptel tools
that mevedel-gptel.el makes call this function directly."
  (mevedel-pipeline--canceller
   (mevedel-pipeline--start
    tool args
    (lambda (outcome call) (funcall callback (mevedel-pipeline-project outcome call)))
    :source 'provider :tool-use-id tool-use-id :parent-id parent-id
    :data-buffer data-buffer :session session :confirmed confirmed)))

;;;; Provider projection and oversized results

(defun mevedel-pipeline-result-limit (tool)
  "Return TOOL's effective result limit in characters, or nil for none.
That is its declared :max-result-size, capped by
`mevedel-pipeline-result-cap'.  A tool without one (Read, say) bounds
its own output."
  (when-let* ((own (mevedel-tool-max-result-size tool)))
    (min own mevedel-pipeline-result-cap)))

(defun mevedel-pipeline--preview-pieces (text plan)
  "Return (HEAD . TAIL) of TEXT per the preview PLAN from the module."
  (let ((total (plist-get plan :total-chars)))
    (cons (substring-no-properties text 0 (plist-get plan :head-chars))
          (substring-no-properties text (- total (plist-get plan :tail-chars))))))

(defun mevedel-pipeline--artifact-name (call)
  "Return a fresh file name under tool-results/ for CALL's output."
  (let* ((base (replace-regexp-in-string
                "[^A-Za-z0-9._-]" "_"
                (or (mevedel-pipeline--call-tool-use-id call)
                    (format "%s-%s" (mevedel-pipeline--call-name call)
                            (format-time-string "%Y%m%dT%H%M%S%3N")))))
         (dir (mevedel-session-tool-results-directory (mevedel-pipeline--call-session call)))
         (name (concat base ".txt"))
         (n 1))
    (while (file-exists-p (expand-file-name name dir))
      (setq name (format "%s-%d.txt" base (cl-incf n))))
    name))

(defun mevedel-pipeline--persist (call text)
  "Save TEXT under CALL's session tool-results/; return its artifact address.
Return nil when the call's session has no storage yet: a preview is
not a reason to create it."
  (let ((session (mevedel-pipeline--call-session call)))
    (when (and (mevedel-session-durable-p session) (mevedel-session-storage-p session))
      (condition-case err
          (progn
            (mevedel-session-ensure-storage session)
            (let ((name (mevedel-pipeline--artifact-name call))
                  (coding-system-for-write 'utf-8-unix))
              (write-region (substring-no-properties text) nil
                            (expand-file-name name (mevedel-session-tool-results-directory
                                                    session))
                            nil 'silent)
              (concat "artifact://tool-results/" name)))
        (error (mevedel-pipeline--warn "Cannot persist the output of %s: %s"
                                       (mevedel-pipeline--call-name call)
                                       (error-message-string err))
               nil)))))

(defun mevedel-pipeline-sync-failure-patterns ()
  "Give the module `mevedel-pipeline-failure-patterns' when they changed.
Called before anything that may build a preview.  Invalid patterns
are reported once, as a warning, and the module keeps the patterns it
had: a bad customization never fails a tool call."
  (unless (equal mevedel-pipeline-failure-patterns mevedel-pipeline--sent-failure-patterns)
    (let ((patterns (copy-sequence mevedel-pipeline-failure-patterns)))
      (setq mevedel-pipeline--sent-failure-patterns patterns)
      (condition-case err
          (mevedel-core-text-failure-patterns patterns)
        (mevedel-core-error
         (mevedel-pipeline--warn "mevedel-pipeline-failure-patterns: %s"
                                 (if (stringp (cadr err)) (cadr err)
                                   (error-message-string err))))))))

(defun mevedel-pipeline--omission-line (plan)
  "Return the marker line standing for the middle that PLAN omits."
  (format "[... %d characters omitted (lines %d-%d) ...]"
          (plist-get plan :omitted-chars)
          (plist-get plan :omitted-first-line)
          (plist-get plan :omitted-last-line)))

(defun mevedel-pipeline--preview-body (text plan)
  "Return TEXT's head, omission marker and tail per PLAN."
  (pcase-let ((`(,head . ,tail) (mevedel-pipeline--preview-pieces text plan)))
    (concat head (unless (or (string-empty-p head) (string-suffix-p "\n" head)) "\n")
            (mevedel-pipeline--omission-line plan) "\n"
            (plist-get plan :kept)
            tail)))

(defun mevedel-pipeline-oversized-notice (text plan address)
  "Return the <persisted-output> notice for TEXT previewed per PLAN.
ADDRESS is the artifact:// address of the full text, or nil when it
could not be kept."
  (let* ((first (plist-get plan :omitted-first-line))
         (last (plist-get plan :omitted-last-line))
         (limit (min (1+ (- last first)) mevedel-pipeline-read-continuation-lines)))
    (concat
     "<persisted-output>\n"
     (format "Output too large: %d characters in %d lines; %d characters are omitted below.\n"
             (plist-get plan :total-chars) (plist-get plan :total-lines)
             (plist-get plan :omitted-chars))
     (if address
         (format "The complete output is saved at %s.\n" address)
       "The omitted text is unavailable: this request has no durable session storage. \
Rerun the call more narrowly (a smaller range, a more specific pattern or path) to see it.\n")
     (if (plist-get plan :kept)
         "\nPreview (head, the omitted lines that look like failures, tail):\n"
       "\nPreview (head and tail):\n")
     (mevedel-pipeline--preview-body text plan)
     (unless (string-suffix-p "\n" text) "\n")
     (when address
       (concat
        "\nTo read the omitted part: Read "
        (json-serialize (list :file_path address :offset first :limit limit))
        (if (> (1+ (- last first)) limit)
            (format " (then continue from offset %d)" (+ first limit))
          "")
        "\nTo search the complete output: Grep "
        (json-serialize (list :pattern "REGEXP" :path address :output_mode "content"))
        "\n"))
     "</persisted-output>")))

(defun mevedel-pipeline--bound-text (call text status &optional fallback)
  "Return TEXT bounded for CALL's provider result, persisting it if needed.
STATUS is the canonical status: oversized errors are truncated only.
FALLBACK is the limit for a tool that declares none."
  (let* ((limit (or (mevedel-pipeline-result-limit (mevedel-pipeline--call-tool call))
                    fallback))
         (plan (and limit (> (length text) limit)
                    (progn
                      (mevedel-pipeline-sync-failure-patterns)
                      (mevedel-core-text-preview
                       text (min mevedel-pipeline-preview-chars limit))))))
    (cond
     ((null plan) text)
     ((eq status 'error)
      (concat (mevedel-pipeline--preview-body text plan)
              (format "\n[Error output truncated: %d of %d characters shown; it was not saved.]"
                      (- (plist-get plan :total-chars) (plist-get plan :omitted-chars))
                      (plist-get plan :total-chars))))
     (t (mevedel-pipeline-oversized-notice text plan (mevedel-pipeline--persist call text))))))

(defun mevedel-pipeline--to-string (value)
  "Return VALUE as text, the way gptel does for a tool result.
A symbol gives its name, anything else but a string its printed form."
  (cond ((stringp value) value)
        ((symbolp value) (symbol-name value))
        (t (prin1-to-string value))))

(defun mevedel-pipeline-project (outcome call)
  "Return the provider result for OUTCOME of CALL, as gptel receives it.
Adds the repair note and hook context, bounds oversized text (see
`mevedel-pipeline-result-limit'), and appends the render-data
block when the call has render-data or an explicit status, then the
media records (as the text's `mevedel-tool-media' property).  A
non-string result without any of those stays as it is."
  (let* ((result (plist-get outcome :result))
         (status (plist-get outcome :status))
         (render-data (plist-get outcome :render-data))
         (note (mevedel-pipeline--call-repair-note call))
         (context (mevedel-pipeline--call-hook-context call))
         (attach (or render-data (mevedel-pipeline--call-explicit-status call))))
    (if (and (not (stringp result)) (not note) (not context) (not attach)
             (not (plist-get outcome :media)))
        result
      (let ((text (mevedel-pipeline--bound-text
                   call (mevedel-pipeline--to-string result) status)))
        (setq text (mevedel-tool-repair-attach-note text note))
        (dolist (piece context)
          (setq text (concat text "\n\n" piece)))
        (when attach
          (setq text (concat text (mevedel-render-data-encode
                                   (append (list :status status)
                                           (cl-loop for (k v) on render-data by #'cddr
                                                    unless (eq k :status) append (list k v)))
                                   (plist-get outcome :tool-use-id)))))
        (mevedel-pipeline--attach-media text (plist-get outcome :media))))))

(defun mevedel-pipeline--attach-media (text media)
  "Return TEXT carrying the MEDIA references as its `mevedel-tool-media' property.
Without MEDIA, return TEXT itself."
  (if (null media)
      text
    (let ((text (copy-sequence text)))
      (put-text-property 0 (length text) 'mevedel-tool-media (copy-tree media) text)
      text)))

(defun mevedel-pipeline--provider-result (outcome call)
  "Return the external provider's text for OUTCOME of CALL.
That is the gptel projection without its render-data block."
  (let ((projected (mevedel-pipeline-project outcome call)))
    (if (stringp projected)
        (mevedel-render-data-strip projected (plist-get outcome :tool-use-id))
      projected)))

(provide 'mevedel-pipeline)
;;; mevedel-pipeline.el ends here
