;;; mevedel-tool-exec.el --- Bash, WriteStdin, ListExecutions, StopExecution, Monitor  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The execution tools.  The work happens in the native module (see
;; crates/mevedel-core/src/exec/): commands run in their own process groups, their output
;; goes to a capped spool on disk, and results come back through the
;; event channel.  This file holds the tool handlers (argument policy,
;; the model-visible text, render-data), the tool-row renderers and
;; the hooks that publish progress, settlement, monitor lines and
;; deliveries; mevedel-mailbox.el turns those into chat rows, mail and
;; background wakes.
;;
;; Calls run in a context (session, owner, working directory, storage)
;; supplied by `mevedel-tool-exec-context-function'; the session code binds
;; it.  See docs/tools/execution.md for what the model is told.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-pipeline)
(require 'mevedel-remote)
(require 'mevedel-remote-exec)
(require 'mevedel-resource)
(require 'mevedel-sandbox)
(require 'mevedel-session)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)

;;;; Customization

(defgroup mevedel-tool-exec nil
  "Managed command execution: Bash, Monitor and their controls."
  :group 'mevedel-tool
  :prefix "mevedel-tool-exec-")

(defcustom mevedel-tool-exec-stop-grace-ms 1000
  "Milliseconds between TERM and KILL when an execution is stopped."
  :type 'natnum)

(defconst mevedel-tool-exec-yield-range '(250 30000 10000)
  "Bash yield_time_ms: minimum, maximum, default.")

(defconst mevedel-tool-exec-poll-range '(5000 300000 5000)
  "WriteStdin yield_time_ms for an empty poll: minimum, maximum, default.")

(defconst mevedel-tool-exec-input-range '(250 30000 250)
  "WriteStdin yield_time_ms after input: minimum, maximum, default.")

(defconst mevedel-tool-exec-monitor-timeout-range '(1000 3600000 300000)
  "Monitor timeout_ms: minimum, maximum, default.")

(defconst mevedel-tool-exec-description-max 200
  "Longest Bash or Monitor description accepted, in characters.")

(defconst mevedel-tool-exec-manual-address "mevedel://tools/execution.md"
  "Where the execution manual is served.")

;;;; Context

(defun mevedel-tool-exec-default-context ()
  "Return the context of the running tool call.
Inside a session (the pipeline's call context names one), executions
use the session's ID as their scheduler key and the call's directory
\(`mevedel-session-call-directory': a child agent's own, else the
workspace) as working directory.  A durable session's session.sqlite receives
background results (the module creates it when it posts the first
one), and its tool-results directory keeps output once the storage
exists; until then output stays in a temporary spool.  Outside any
session executions share the key \"default\" and have no storage.
The owner is the agent whose data buffer runs the call (see
`mevedel-session-agent'), /root by default."
  (let* ((call (mevedel-pipeline-current-context))
         (session (plist-get call :session))
         (buffer (plist-get call :data-buffer))
         (base (list :owner (or (and (buffer-live-p buffer)
                                     (buffer-local-value 'mevedel-session-agent buffer))
                                "/root")
                     :tool-use-id (plist-get call :tool-use-id))))
    (if (not (mevedel-session-p session))
        (append (list :session "default" :cwd default-directory) base)
      (let* ((durable-session (mevedel-session-durable-p session))
             (stored (and durable-session (mevedel-session-storage-p session))))
        (append (list :session (mevedel-session-id session)
                      :cwd (mevedel-session-call-directory session buffer)
                      :root (mevedel-session-workspace session)
                      :artifact-dir (and stored
                                         (mevedel-session-tool-results-directory session))
                      :mailbox (and durable-session (mevedel-session-database-file session)))
                base)))))

(defvar mevedel-tool-exec-context-function #'mevedel-tool-exec-default-context
  "Function of no arguments returning the calling context, a plist.
Keys: :session (the session key), :owner (\"/root\" or an agent path),
:cwd, :root (the writable root: the session's workspace; without
it, :cwd), :artifact-dir (durable directory for kept output), :store (the
session store handle) and :mailbox (its session.sqlite file),
:tool-use-id, :writable (more directories the sandbox lets commands
write besides :cwd) and :environment (a complete \"NAME=VALUE\" list;
`process-environment' when absent).")

(defun mevedel-tool-exec-context (&optional durable)
  "Return the current call's context (see `mevedel-tool-exec-context-function').
DURABLE non-nil (a command that may change files, a Monitor) first
creates the storage of the call's durable session; reads never do."
  (when-let* ((durable)
              (session (plist-get (mevedel-pipeline-current-context) :session))
              ((mevedel-session-durable-p session)))
    (mevedel-session-ensure-storage session))
  (let ((context (funcall mevedel-tool-exec-context-function)))
    (unless (plist-get context :session)
      (error "The execution context names no session"))
    context))

;;;; Arguments

(defun mevedel-tool-exec--bounded (value range name)
  "Return VALUE clamped to RANGE (MIN MAX DEFAULT); nil means DEFAULT.
NAME labels the argument in errors.  Non-numbers are rejected."
  (pcase-let ((`(,min ,max ,default) range))
    (cond ((null value) default)
          ((not (numberp value))
           (error "%s must be a number of milliseconds, not %S" name value))
          (t (max min (min max (round value)))))))

(defun mevedel-tool-exec--true-p (value)
  "Return non-nil when the JSON-faithful VALUE is true."
  (and value (not (memq value '(:json-false :false :null)))))

(defun mevedel-tool-exec--required-string (args key name)
  "Return the non-empty string at KEY of ARGS, or signal naming NAME."
  (let ((value (plist-get args key)))
    (unless (and (stringp value) (not (string-blank-p value)))
      (error "%s is required and must be a non-empty string" name))
    value))

(defun mevedel-tool-exec--description (args)
  "Return the short description in ARGS, or signal."
  (let ((value (string-trim (mevedel-tool-exec--required-string args :description "description"))))
    (when (> (length value) mevedel-tool-exec-description-max)
      (error "The description must be short (at most %d characters); it names the command"
             mevedel-tool-exec-description-max))
    value))

;;;; Permissions

(defun mevedel-tool-exec-check-command (args)
  "Return the permission facet of a Bash or Monitor call with ARGS.
The call runs its command: (command . SOURCE), which
mevedel-permissions.el judges by the command's analysis, with Bash's
rules and session answers for both tools."
  (let ((command (plist-get args :command)))
    (if (and (stringp command)
             (not (string-empty-p command))
             ;; Commands start with a non-blank; only others need a scan.
             (or (not (memq (aref command 0) '(?\s ?\t ?\n ?\r)))
                 (string-match-p "[^ \t\n\r]" command)))
        (cons 'command command)
      'ask)))

(defun mevedel-tool-exec-check-control (_args)
  "Return the permission facet of an execution control call.
WriteStdin, StopExecution and ListExecutions act under the authority
of the execution they name, which the module only lets its owner
reach: `delegated', never asked about (an explicit deny rule still
refuses them)."
  'delegated)

(defun mevedel-tool-exec--read-only-p (command context)
  "Return non-nil when COMMAND, run for CONTEXT, is proven read-only."
  (let ((cwd (or (plist-get context :cwd) default-directory)))
    (plist-get (mevedel-core-bash-permission command (expand-file-name cwd)
                                             (expand-file-name cwd))
               :read-only)))

;;;; Sandbox

(defun mevedel-tool-exec--grant-paths (value name)
  "Return VALUE, the paths of additional_permissions.NAME, as a list.
Each must be an absolute file name; signal otherwise."
  (let ((paths (cond ((memq value '(nil :null)) nil)
                     ((or (vectorp value) (listp value)) (append value nil))
                     (t (error "The additional_permissions.%s argument must be an array \
of absolute paths" name)))))
    (mapcar (lambda (path)
              (unless (and (stringp path) (string-prefix-p "/" path))
                (error "The additional_permissions.%s entry %S is not an absolute path"
                       name path))
              (directory-file-name (expand-file-name path)))
            paths)))

(defun mevedel-tool-exec-permission-args (&optional prefix)
  "Return the argument forms that ask for more than the default sandbox.
Bash, Monitor and batch Eval declare them alike, and
`mevedel-tool-exec-grant-request' reads them.  PREFIX begins the
descriptions of the two permission arguments (Eval says which mode
they are for)."
  `((sandbox_permissions
     string :optional
     ,(concat prefix "\"require_escalated\" to run outside the sandbox (asks the user)")
     :enum ("use_default" "require_escalated"))
    (additional_permissions
     object :optional
     ,(concat prefix "More sandbox permissions (asks the user): network, read/write \
paths, withheld environment variables to pass")
     :properties (network (:type boolean)
                  read (:type array :items string)
                  write (:type array :items string)
                  env (:type array :items string)))
    (justification string :optional "Why the extra permissions are needed, for the user")))

(defun mevedel-tool-exec-grant-request (args)
  "Return the sandbox grant a Bash or Monitor call with ARGS asks for.
That is nil for the default sandbox, or a plist (:escalated BOOL
:network BOOL :read PATHS :write PATHS :env NAMES :justification TEXT)
from the sandbox_permissions, additional_permissions and
justification arguments.  Malformed values signal an error naming
them."
  ;; `memq' is an instruction where `plist-get' is a call, and every
  ;; Bash call is asked: a value that happens to be one of these
  ;; keywords only costs the full reading, which finds no grant.
  (when (or (memq :sandbox_permissions args) (memq :additional_permissions args))
    (mevedel-tool-exec--grant-request args)))

(defun mevedel-tool-exec--grant-request (args)
  "Return the grant ARGS ask for (see `mevedel-tool-exec-grant-request')."
  (let* ((mode (plist-get args :sandbox_permissions))
         (escalated (pcase mode
                      ((or 'nil :null "use_default") nil)
                      ("require_escalated" t)
                      (_ (error "The sandbox_permissions argument must be \"use_default\" \
or \"require_escalated\", not %S" mode))))
         (extra (plist-get args :additional_permissions))
         (extra (if (or (hash-table-p extra) (eq extra :null)) nil extra))
         (_ (unless (listp extra)
              (error "The additional_permissions argument must be an object")))
         (network (mevedel-tool-exec--true-p (plist-get extra :network)))
         (read (mevedel-tool-exec--grant-paths (plist-get extra :read) "read"))
         (write (mevedel-tool-exec--grant-paths (plist-get extra :write) "write"))
         (env (mevedel-tool-exec--grant-names (plist-get extra :env)))
         (why (plist-get args :justification)))
    (when (or escalated network read write env)
      (list :escalated escalated :network network :read read :write write :env env
            :justification (and (stringp why) (not (string-blank-p why)) why)))))

(defun mevedel-tool-exec--grant-names (value)
  "Return VALUE, the names of additional_permissions.env, as a list.
Each must be an environment variable name; signal otherwise."
  (let ((names (cond ((memq value '(nil :null)) nil)
                     ((or (vectorp value) (listp value)) (append value nil))
                     (t (error "The additional_permissions.env argument must be an array \
of variable names")))))
    (dolist (name names names)
      (unless (and (stringp name) (string-match-p "\\`[A-Za-z_][A-Za-z0-9_]*\\'" name))
        (error "The additional_permissions.env entry %S is not a variable name" name)))))

(defun mevedel-tool-exec--environment (context grant)
  "Return (ENTRIES . WITHHELD), the environment of a command run for CONTEXT.
Secret-looking variables are withheld (`mevedel-sandbox-environment')
unless GRANT passes them for this call."
  (mevedel-sandbox-environment (or (plist-get context :environment) process-environment)
                               (plist-get grant :env)))

(defvar mevedel-tool-exec--env-told (make-hash-table :test #'equal)
  "Sessions whose model was told which variables are withheld.")

(defun mevedel-tool-exec--withheld-note (session withheld)
  "Return the note naming WITHHELD variables, once per SESSION, or nil."
  (when (and withheld (not (gethash session mevedel-tool-exec--env-told)))
    (puthash session t mevedel-tool-exec--env-told)
    (format "Note: these environment variables look secret and are withheld from \
commands: %s.  Ask for one with additional_permissions.env when a command needs it."
            (string-join withheld ", "))))

(defun mevedel-tool-exec--evaluated-warning (files)
  "Return the warning naming FILES Emacs may evaluate that changed, or nil."
  (when files
    (format "Warning: this command created, changed or removed files Emacs may \
evaluate later: %s"
            (mapconcat #'abbreviate-file-name files ", "))))

(defun mevedel-tool-exec--sandbox (context cwd grant)
  "Return the sandbox request of a command run for CONTEXT in CWD.
GRANT is what `mevedel-tool-exec-grant-request' returned (approved by the
permission step).  Writable: the context's :root (else CWD) and its
:writable; the workspace's .mevedel state stays read-only.  A child
agent's working_directory is its CWD, never a writable root of its
own: selecting a checkout grants nothing.  Readable besides the
default: the grant's and the context's :readable."
  (let ((root (let ((dir (plist-get context :root)))
                (if dir (directory-file-name (expand-file-name dir)) cwd))))
    (mevedel-core-sandbox-object
     (mevedel-sandbox-request
      :env nil
      :writable (delete-dups (delq nil (cons root (plist-get context :writable))))
      :state-dirs (list (expand-file-name ".mevedel" root))
      :network (plist-get grant :network)
      :extra-read (append (plist-get grant :read) (plist-get context :readable))
      :extra-write (plist-get grant :write)
      :escalated (plist-get grant :escalated)))))

(defun mevedel-tool-exec--boundary (obs)
  "Return the sandbox facts plist of observation OBS, or nil."
  (or (plist-get obs :sandbox)
      (plist-get (plist-get obs :facts) :sandbox)))

(defun mevedel-tool-exec-sandbox-summary (sandbox)
  "Return the `:sandbox-summary' for the SANDBOX facts of one execution.
It is nil when the facts are the default (confined, nothing added)."
  (let ((summary (and sandbox (mevedel-sandbox-summary-add nil sandbox))))
    (and (mevedel-sandbox-summary-warning summary) summary)))

(defun mevedel-tool-exec--scrub (text)
  "Return TEXT without the sandbox helper's file name or scratch directories.
The model sees why a sandbox failed, not mevedel's private paths."
  (let ((helper (ignore-errors (mevedel-sandbox-helper))))
    (replace-regexp-in-string
     "/[^ \n\"']*/mevedel-sandbox-[[:alnum:]]\\{6\\}" "the sandbox's scratch directory"
     (if (stringp helper) (string-replace helper "the sandbox helper" text) text)
     t t)))

(defun mevedel-tool-exec--boundary-note (sandbox)
  "Return one line telling the model about a non-default SANDBOX boundary."
  (pcase (plist-get sandbox :boundary)
    ('unconfined "Note: no sandbox layer works here, so this command ran unconfined.")
    ('off "Note: the sandbox is off, so this command ran unconfined.")
    ('escalated "Note: this command ran outside the sandbox (escalation was approved).")
    ('landlock "Note: this command was confined by Landlock only.")))

;;;; Model-visible text

(defun mevedel-tool-exec--xml-escape (value)
  "Return VALUE (any object) as text safe inside an XML attribute."
  (let ((text (if (stringp value) value (format "%s" value))))
    (replace-regexp-in-string
     "[&<>\"\n]"
     (lambda (c) (pcase c ("&" "&amp;") ("<" "&lt;") (">" "&gt;") ("\"" "&quot;") (_ "&#10;")))
     text t t)))

(defun mevedel-tool-exec--attrs (pairs)
  "Return the attribute text of PAIRS ((NAME . VALUE) ...), skipping nil values."
  (mapconcat (lambda (p) (format "%s=\"%s\"" (car p) (mevedel-tool-exec--xml-escape (cdr p))))
             (cl-remove-if-not #'cdr pairs)
             " "))

(defun mevedel-tool-exec--ints (list)
  "Return LIST of integers as space-separated text, or nil when empty."
  (and list (mapconcat #'number-to-string list " ")))

(defun mevedel-tool-exec-envelope (obs)
  "Return the <bash-execution .../> line summarising observation OBS."
  (let* ((facts (plist-get obs :facts))
         (monitor (equal (plist-get obs :kind) "monitor")))
    (format "<%s %s/>"
            (if monitor "monitor-execution" "bash-execution")
            (mevedel-tool-exec--attrs
             `(("execution_id" . ,(plist-get obs :id))
               ("state" . ,(plist-get obs :state))
               ("command" . ,(plist-get obs :command))
               ,@(if facts
                     `(("exit_code" . ,(plist-get facts :exit-code))
                       ("signal" . ,(plist-get facts :signal))
                       ("termination" . ,(plist-get facts :termination))
                       ("outcome" . ,(plist-get facts :outcome))
                       ("duration_ms" . ,(plist-get facts :duration-ms))
                       ("pipeline_exit_codes" . ,(mevedel-tool-exec--ints
                                                  (plist-get facts :pipeline-exit-codes)))
                       ("pipeline_failed_stages" . ,(mevedel-tool-exec--ints
                                                     (plist-get facts :pipeline-failed-stages)))
                       ("pipeline_classification" . ,(plist-get facts :pipeline-classification)))
                   `(("elapsed_ms" . ,(plist-get obs :elapsed-ms))))
               ("tty" . ,(and (plist-get obs :tty) "true"))
               ("events" . ,(and monitor (plist-get obs :events)))
               ("omitted_chars" . ,(let ((n (plist-get obs :omitted-chars)))
                                     (and n (> n 0) n)))
               ("output_file" . ,(mevedel-tool-exec--output-address
                                   (plist-get obs :artifact))))))))

(defun mevedel-tool-exec--output-address (file)
  "Return the address the model gets for FILE, a command's kept output.
Output kept in a session's tool-results/ is named by its artifact://
address, never by its path in the session's storage; output outside
one (a session without storage) keeps its path."
  (and file
       (or (mevedel-resource-artifact-address
            file (file-name-directory (directory-file-name (file-name-directory file))))
           file)))

(defun mevedel-tool-exec-format-observation (obs &optional first note)
  "Return the model-visible text of observation OBS.
The command's output comes first, unchanged; then, when a pipeline
stage failed, one line naming it; in the FIRST observation of a
command, a line about a non-default sandbox boundary; a warning naming
changed files Emacs may evaluate; the line NOTE, if any; then the
envelope.  A still-running command says how to continue."
  (let* ((facts (plist-get obs :facts))
         (output (or (plist-get obs :output) ""))
         (state (plist-get obs :state))
         (parts (list output)))
    (unless (or (string-empty-p output) (string-suffix-p "\n" output))
      (push "\n" parts))
    (when-let* ((note (plist-get facts :note)))
      (push (concat note "\n") parts))
    (when-let* ((error (plist-get facts :error)))
      (push (concat (mevedel-tool-exec--scrub error) "\n") parts))
    (when-let* ((note (and first (mevedel-tool-exec--boundary-note (mevedel-tool-exec--boundary obs)))))
      (push (concat note "\n") parts))
    (when-let* ((warning (mevedel-tool-exec--evaluated-warning
                          (plist-get (mevedel-tool-exec--boundary obs) :evaluated-changes))))
      (push (concat warning "\n") parts))
    (when note
      (push (concat note "\n") parts))
    (unless facts
      (push (format (if (equal state "queued")
                        "Waiting for its turn (another command holds the exclusive lane). \
Poll with WriteStdin(execution_id=\"%s\", chars=\"\") or cancel with StopExecution.\n"
                      "Still running. Poll with WriteStdin(execution_id=\"%s\", chars=\"\"), \
send input (tty only) or stop it with StopExecution.\n")
                    (plist-get obs :id))
            parts))
    (push (mevedel-tool-exec-envelope obs) parts)
    (apply #'concat (nreverse parts))))

(defun mevedel-tool-exec-render-data (obs)
  "Return the render-data plist for observation OBS."
  (let ((facts (plist-get obs :facts)))
    (mevedel-sandbox-render-data
     (list :execution-id (plist-get obs :id)
          :kind (plist-get obs :kind)
          :state (plist-get obs :state)
          :elapsed-ms (or (plist-get facts :duration-ms) (plist-get obs :elapsed-ms))
          :exit-code (plist-get facts :exit-code)
          :signal (plist-get facts :signal)
          :termination (plist-get facts :termination)
          :outcome (plist-get facts :outcome)
          :tty (and (plist-get obs :tty) t)
          :bytes (plist-get obs :bytes)
          :omitted-chars (plist-get obs :omitted-chars)
          :artifact (plist-get obs :artifact)
          :evaluated-changes (plist-get (mevedel-tool-exec--boundary obs) :evaluated-changes)
          :envelope t)
     (mevedel-tool-exec-sandbox-summary (mevedel-tool-exec--boundary obs)))))

(defun mevedel-tool-exec--answer (callback &optional first note)
  "Return a module callback that answers CALLBACK with a tool result.
FIRST says the result is the command's first observation; NOTE is a
line it adds."
  (lambda (status value)
    (funcall callback
             (if (eq status 'ok)
                 (list :result (mevedel-tool-exec-format-observation value first note)
                       :render-data (mevedel-tool-exec-render-data value))
               (format "Error: %s" (cadr value))))))

(defun mevedel-tool-exec--error-text (err)
  "Return the message of the signal ERR, without its error-symbol prefix."
  (if (and (memq 'mevedel-core-error (get (car err) 'error-conditions))
           (stringp (cadr err)))
      (cadr err)
    (error-message-string err)))

(defun mevedel-tool-exec--guard (callback thunk)
  "Call THUNK; a signal becomes an \"Error: ...\" answer to CALLBACK."
  (condition-case err
      (funcall thunk)
    (error (funcall callback (format "Error: %s" (mevedel-tool-exec--error-text err))))))

;;;; Handlers

(defun mevedel-tool-exec--spec (context args &rest extra)
  "Return the execution spec for CONTEXT plus EXTRA keys.
ARGS are the call's arguments; their sandbox grant (see
`mevedel-tool-exec-grant-request') shapes the sandbox request."
  (let* ((cwd (let ((dir (or (plist-get context :cwd) default-directory)))
                (and dir (directory-file-name (expand-file-name dir)))))
         (grant (mevedel-tool-exec-grant-request args))
         ;; A remote workspace's command runs on its host, relayed:
         ;; its host confines it and keeps its own environment.
         (remote (mevedel-remote-p cwd)))
    (mevedel-pipeline-sync-failure-patterns)
    (append extra
            (list :session (plist-get context :session)
                  :owner (or (plist-get context :owner) "/root")
                  :cwd cwd
                  :artifact-dir (plist-get context :artifact-dir)
                  :mailbox (plist-get context :mailbox)
                  :tool-use-id (plist-get context :tool-use-id)
                  :sandbox (unless remote (mevedel-tool-exec--sandbox context cwd grant))
                  :environment (unless remote
                                 (car (mevedel-tool-exec--environment context grant)))
                  :login-prelude (mevedel-sandbox-login-prelude (plist-get grant :env))
                  :stop-grace-ms mevedel-tool-exec-stop-grace-ms
                  :relay remote))))

(defun mevedel-tool-exec--start (context spec callback)
  "Start SPEC for CONTEXT (see `mevedel-core-exec-start'); return its id.
A relayed spec's command is to run on its remote workspace's host,
writable there below the context's :root, under the sandbox mode in
force now."
  (let ((id (mevedel-core-exec-start spec callback)))
    (when (plist-get spec :relay)
      (mevedel-remote-exec-register (plist-get spec :session) id
                                    (or (plist-get context :root) (plist-get spec :cwd))
                                    mevedel-sandbox-mode))
    id))

(defun mevedel-tool-exec-command-spec (context command description &optional env)
  "Return the spec to run COMMAND as Bash would for CONTEXT, unobserved.
CONTEXT is as `mevedel-tool-exec-context-function' returns; DESCRIPTION
names the command and ENV lists \"NAME=VALUE\" settings applied last.
An ACP agent's terminal runs so (mevedel-acp.el): the same sandbox,
environment policy and spool as a Bash call, started and read by the
module's terminal code instead of a tool call."
  (apply #'mevedel-tool-exec--spec context nil :command command :description description
         :kind "bash" (and env (list :env env))))

(defun mevedel-tool-exec-bash (callback args)
  "Run the Bash call ARGS (:command :description :yield_time_ms :tty).
Answer CALLBACK with the output so far and the execution's facts."
  (mevedel-tool-exec--guard
   callback
   (lambda ()
     (mevedel-tool-exec-run-command
      callback args (mevedel-tool-exec--required-string args :command "command")
      (mevedel-tool-exec--description args)))))

(defun mevedel-tool-exec-run-command (callback args command description
                                               &optional environment readable)
  "Run the Bash COMMAND for the tool call ARGS as a managed execution.
This is Bash's path, shared by every tool that runs a child process
\(batch Eval): the call's context, sandbox, output spool, yield and
teardown.  ARGS give :yield_time_ms, :tty and the sandbox grant;
DESCRIPTION names the command; ENVIRONMENT is a list of \"NAME=VALUE\"
entries that replace those variables for this command; READABLE lists
directories the sandbox shows read-only besides its defaults.  Answer
CALLBACK once with the output so far and the execution's facts.
Argument errors signal: callers turn them into error results."
  (let* ((yield (mevedel-tool-exec--bounded (plist-get args :yield_time_ms)
                                            mevedel-tool-exec-yield-range "yield_time_ms"))
         (context (let ((context (mevedel-tool-exec-context)))
                    ;; A command that may change files keeps its
                    ;; output in the session's storage.
                    (if (mevedel-tool-exec--read-only-p command context)
                        context
                      (mevedel-tool-exec-context t))))
         (context (if environment
                      (plist-put (copy-sequence context) :environment
                                 (mevedel-tool-exec--override-environment
                                  (or (plist-get context :environment) process-environment)
                                  environment))
                    context))
         (context (if readable (plist-put (copy-sequence context) :readable readable) context))
         (answered nil)
         (note (mevedel-tool-exec--withheld-note
                (plist-get context :session)
                (cdr (mevedel-tool-exec--environment
                      context (mevedel-tool-exec-grant-request args)))))
         (id (mevedel-tool-exec--start
              context
              (mevedel-tool-exec--spec context args
                                       :command command :description description :kind "bash"
                                       :tty (and (mevedel-tool-exec--true-p (plist-get args :tty)) t)
                                       :yield-ms yield)
              (lambda (status value)
                (setq answered t)
                (funcall (mevedel-tool-exec--answer
                          callback t (mevedel-tool-exec--first-notes context note))
                         status value)))))
    ;; Until it yields, the command belongs to its request: an
    ;; aborted request stops it.
    (mevedel-pipeline-add-canceller
     (lambda ()
       (unless answered
         (mevedel-core-exec-stop-by-user (plist-get context :session) id))))))

(defun mevedel-tool-exec--first-notes (context note)
  "Return NOTE, with the remote host's unconfined notice for CONTEXT, or nil.
A remote workspace whose host runs commands unconfined says so on its
session's first result (`mevedel-remote-exec-note')."
  (let ((remote (mevedel-remote-exec-note (plist-get context :session)
                                          (or (plist-get context :root)
                                              (plist-get context :cwd)))))
    (if (and note remote) (concat note "\n" remote) (or note remote))))

(defun mevedel-tool-exec--override-environment (base entries)
  "Return BASE, a \"NAME=VALUE\" list, with ENTRIES replacing their names."
  (let ((names (mapcar (lambda (entry) (concat (car (split-string entry "=")) "=")) entries)))
    (append entries
            (cl-remove-if (lambda (entry)
                            (cl-some (lambda (name) (string-prefix-p name entry)) names))
                          base))))

(defun mevedel-tool-exec-write-stdin (callback args)
  "Poll or send input to an execution; answer CALLBACK with what it printed.
ARGS has :execution_id, :chars and :yield_time_ms.  Empty chars polls;
other chars go to a PTY; \"\\u0003\" is Ctrl-C."
  (mevedel-tool-exec--guard
   callback
   (lambda ()
     (let* ((id (mevedel-tool-exec--required-string args :execution_id "execution_id"))
            (chars (or (plist-get args :chars) ""))
            (_ (unless (stringp chars) (error "The chars argument must be a string")))
            (context (mevedel-tool-exec-context))
            (range (if (string-empty-p chars) mevedel-tool-exec-poll-range mevedel-tool-exec-input-range))
            (wait (mevedel-tool-exec--bounded (plist-get args :yield_time_ms) range "yield_time_ms")))
       (mevedel-pipeline-sync-failure-patterns)
       (if (string-empty-p chars)
           (mevedel-core-exec-observe (plist-get context :session) id
                                      (or (plist-get context :owner) "/root") wait
                                      (mevedel-tool-exec--answer callback))
         (mevedel-core-exec-write (plist-get context :session) id
                                  (or (plist-get context :owner) "/root") chars wait
                                  (mevedel-tool-exec--answer callback)))))))

(defun mevedel-tool-exec-stop-execution (callback args)
  "Stop the execution named in ARGS (:execution_id) and answer CALLBACK."
  (mevedel-tool-exec--guard
   callback
   (lambda ()
     (let ((id (mevedel-tool-exec--required-string args :execution_id "execution_id"))
           (context (mevedel-tool-exec-context)))
       (mevedel-core-exec-stop (plist-get context :session) id
                               (or (plist-get context :owner) "/root")
                               (mevedel-tool-exec--answer callback))))))

(defun mevedel-tool-exec-list-executions (_args)
  "Return the caller's yielded, unfinished executions as text."
  (let* ((context (mevedel-tool-exec-context))
         (items (mevedel-core-exec-list (plist-get context :session)
                                        (or (plist-get context :owner) "/root"))))
    (if (null items)
        "No yielded executions are running."
      (mapconcat
       (lambda (e)
         (format "<execution %s/>"
                 (mevedel-tool-exec--attrs
                  `(("execution_id" . ,(plist-get e :id))
                    ("kind" . ,(plist-get e :kind))
                    ("state" . ,(plist-get e :state))
                    ("description" . ,(plist-get e :description))
                    ("command" . ,(plist-get e :command))
                    ("elapsed_ms" . ,(plist-get e :elapsed-ms))
                    ("bytes" . ,(plist-get e :bytes))
                    ("tty" . ,(and (plist-get e :tty) "true"))))))
       items "\n"))))

(defun mevedel-tool-exec-monitor (callback args)
  "Start a Monitor: ARGS :command :description :timeout_ms.
Its stdout lines reach the root model as events; answer CALLBACK with
its execution id once it is launched."
  (mevedel-tool-exec--guard
   callback
   (lambda ()
     (let* ((command (mevedel-tool-exec--required-string args :command "command"))
            (description (mevedel-tool-exec--description args))
            (timeout (or (plist-get args :timeout_ms)
                         (nth 2 mevedel-tool-exec-monitor-timeout-range)))
            (context (mevedel-tool-exec-context t)))
       (unless (and (integerp timeout)
                    (<= (nth 0 mevedel-tool-exec-monitor-timeout-range) timeout
                        (nth 1 mevedel-tool-exec-monitor-timeout-range)))
         (error "The timeout_ms argument must be an integer from %d to %d"
                (nth 0 mevedel-tool-exec-monitor-timeout-range)
                (nth 1 mevedel-tool-exec-monitor-timeout-range)))
       (unless (equal (or (plist-get context :owner) "/root") "/root")
         (error "Monitor is only available to the root agent"))
       (mevedel-tool-exec--start
        context
        (mevedel-tool-exec--spec context args :command command :description description
                                 :kind "monitor" :timeout-ms timeout :yield-ms 10000)
        (lambda (status value)
          (funcall (mevedel-tool-exec--answer
                    callback t (mevedel-tool-exec--first-notes context nil))
                   status value)))))))

;;;; Events: progress, settlement, monitor lines

(defvar mevedel-tool-exec-progress-functions nil
  "Abnormal hook run with each progress plist of a running command.
Keys: :session :id :tool-use-id :state :elapsed-ms :bytes :tail.  The
view uses it to refresh the command's row; it creates no transcript.")

(defvar mevedel-tool-exec-settled-functions nil
  "Abnormal hook run with each settlement plist.
Keys: :session :id :owner :kind :tool-use-id :command :description
:yielded :facts :mailbox-ids :mailbox :wake :error.")

(defvar mevedel-tool-exec-monitor-functions nil
  "Abnormal hook run with each batch of monitor lines.
Keys: :session :id :owner :tool-use-id :description :monitor-lines
:monitor-omitted :mailbox-ids :wake.")

(defvar mevedel-tool-exec-delivered-functions nil
  "Abnormal hook run when polling read background results.
Called with a plist (:session KEY :mailbox-ids IDS): those records
were delivered by WriteStdin or StopExecution, so they wake nobody.")

(defun mevedel-tool-exec--on-progress (data)
  "Handle a progress event DATA."
  (run-hook-with-args 'mevedel-tool-exec-progress-functions data))

(defun mevedel-tool-exec--on-settled (data)
  "Handle a settlement event DATA."
  (run-hook-with-args 'mevedel-tool-exec-settled-functions data))

(defun mevedel-tool-exec--on-monitor (data)
  "Handle a monitor-lines event DATA."
  (run-hook-with-args 'mevedel-tool-exec-monitor-functions data))

(defun mevedel-tool-exec--on-delivered (data)
  "Handle DATA: a result was read by polling, so it wakes nobody."
  (run-hook-with-args 'mevedel-tool-exec-delivered-functions data))

(mevedel-core-register-event-handler 'exec-progress #'mevedel-tool-exec--on-progress)
(mevedel-core-register-event-handler 'exec-settled #'mevedel-tool-exec--on-settled)
(mevedel-core-register-event-handler 'exec-monitor #'mevedel-tool-exec--on-monitor)
(mevedel-core-register-event-handler 'exec-delivered #'mevedel-tool-exec--on-delivered)

;;;; Renderers

(defconst mevedel-tool-exec--success-outcomes '("success" "no-match" "different" "false")
  "Outcomes of a command that did what it was asked (see the execution manual).")

(defun mevedel-tool-exec--elapsed (ms)
  "Return MS milliseconds as a short duration."
  (cond ((null ms) nil)
        ((< ms 1000) (format "%dms" ms))
        ((< ms 60000) (format "%.1fs" (/ ms 1000.0)))
        (t (format "%dm%02ds" (/ ms 60000) (/ (% ms 60000) 1000)))))

(defun mevedel-tool-exec--state-label (render-data status)
  "Return the state shown for a row with RENDER-DATA and call STATUS."
  (let ((state (plist-get render-data :state))
        (outcome (plist-get render-data :outcome)))
    (cond ((member state '("running" "queued" "stopping")) state)
          ((equal outcome "success") "done")
          ((member outcome mevedel-tool-exec--success-outcomes) outcome)
          ((equal outcome "stopped") "stopped")
          ((equal (plist-get render-data :termination) "lost") "lost")
          ((or outcome (eq status 'error)) "failed"))))

(defun mevedel-tool-exec--row-warning (render-data)
  "Return the bracketed warning of a row with RENDER-DATA, or nil."
  (let ((parts (delq nil (list (mevedel-sandbox-summary-warning
                                (plist-get render-data :sandbox-summary))
                               (when-let* ((changes (plist-get render-data :evaluated-changes)))
                                 (concat "changed files Emacs evaluates: "
                                         (mapconcat #'abbreviate-file-name changes ", ")))))))
    (and parts (string-join parts "; "))))

(defun mevedel-tool-exec--header (prefix text render-data status)
  "Return a row header: PREFIX, TEXT's first line (60 columns), state, elapsed.
RENDER-DATA and STATUS give the state; a non-default sandbox boundary
and changed files Emacs may evaluate add their warnings."
  (let* ((state (mevedel-tool-exec--state-label render-data status))
         (warning (mevedel-tool-exec--row-warning render-data))
         (exit (let ((code (plist-get render-data :exit-code))
                     (signal (plist-get render-data :signal)))
                 (cond (signal (format "signal %s" signal))
                       (code (format "exit %s" code)))))
         (elapsed (mevedel-tool-exec--elapsed (plist-get render-data :elapsed-ms))))
    (concat prefix (mevedel-tool-exec--first-line text)
            (and state (concat "  " state))
            (and exit (concat " (" exit ")"))
            (and elapsed (concat " " elapsed))
            (and warning (concat "  [" warning "]")))))

(defconst mevedel-tool-exec--model-hint-regexp
  "^\\(?:Still running\\. Poll with\\|Waiting for its turn (another\\) .*StopExecution\\.\\(?:\n\\|\\'\\)"
  "The line of a running command's result telling the model how to poll it.
A row leaves it out: its spinner says the command runs, and the user
neither polls nor calls StopExecution.")

(defun mevedel-tool-exec--strip-envelope (result)
  "Return RESULT without its trailing execution envelope, for a row.
The line telling the model how to poll goes too."
  (let ((result (if (and result (string-match "\n?<\\(?:bash\\|monitor\\)-execution [^\n]*/>\\'"
                                              result))
                    (substring result 0 (match-beginning 0))
                  result)))
    (if (and result (string-match mevedel-tool-exec--model-hint-regexp result))
        (replace-match "" t t result)
      result)))

(defun mevedel-tool-exec--body (command result render-data)
  "Return a row body: the exact COMMAND above RESULT's bounded output.
RENDER-DATA marks whether RESULT carries an envelope to remove; while
the command runs, its live progress brings the latest output instead."
  (unless mevedel-tool-render-summary-only
    (let ((output (cond ((plist-get render-data :live-tail))
                        ((plist-get render-data :envelope)
                         (mevedel-tool-exec--strip-envelope result))
                        (t result))))
      (concat "$ " command "\n"
              (and output (not (string-empty-p output)) (concat "\n" output))))))

(defun mevedel-tool-exec--status (render-data fallback)
  "Return the row status for RENDER-DATA, else FALLBACK."
  (let ((state (plist-get render-data :state))
        (outcome (plist-get render-data :outcome)))
    (cond ((member state '("running" "queued" "stopping")) 'running)
          ((member outcome mevedel-tool-exec--success-outcomes) 'success)
          ((equal outcome "stopped") 'warning)
          (outcome 'error)
          (t fallback))))

(defun mevedel-tool-exec--text-exit (result render-data)
  "Return the exit status of a Bash call from RENDER-DATA or RESULT, or nil."
  (or (plist-get render-data :exit-code)
      (plist-get render-data :exit_code)
      (and result
           (string-match "exit[_ ]code[=:]? *\"?\\(-?[0-9]+\\)" result)
           (string-to-number (match-string 1 result)))))

(defun mevedel-tool-exec--render-plain (args result render-data)
  "Render a Bash call that started no execution: ARGS, RESULT, RENDER-DATA.
That is a call still waiting (RESULT nil) or one refused or failed
before it ran.  The header shows the command's first line and any
exit status RESULT names."
  (let* ((command (or (plist-get args :command) ""))
         (first (mevedel-tool-render-first-line command))
         (more (string-match-p "\n[ \t]*[^ \t\n]" (string-trim command)))
         (exit (mevedel-tool-exec--text-exit result render-data)))
    (list :header (concat "$ " (mevedel-tool-render-shorten first 64) (and more " …")
                          (cond ((null result) "")
                                (exit (format "  [exit %s]" exit))))
          :body (unless mevedel-tool-render-summary-only
                  (concat (and more (concat command "\n\n")) result))
          :expandable-p t
          :initially-collapsed-p t)))

(defun mevedel-tool-exec-render-bash (_name args result render-data)
  "Render a Bash call with ARGS, RESULT and RENDER-DATA.
Rows whose render-data did not come from these handlers (no execution
id) are drawn by `mevedel-tool-exec--render-plain'."
  (let ((command (or (plist-get args :command) "")))
    (if (not (plist-get render-data :execution-id))
        (mevedel-tool-exec--render-plain args result render-data)
      (list :header (mevedel-tool-exec--header "$ " command render-data nil)
            :status (mevedel-tool-exec--status render-data 'success)
            :body (mevedel-tool-exec--body command result render-data)
            :breadcrumb (mevedel-tool-exec-breadcrumb-text (plist-get render-data :breadcrumb))
            :expandable-p t
            :initially-collapsed-p t))))

(defun mevedel-tool-exec-render-monitor (_name args result render-data)
  "Render a Monitor call with ARGS, RESULT and RENDER-DATA."
  (let ((description (or (plist-get args :description) "")))
    (list :header (concat "Watching: "
                          (truncate-string-to-width description 60 nil nil "…")
                          (when-let* ((warning (mevedel-tool-exec--row-warning render-data)))
                            (concat "  [" warning "]")))
          :status (mevedel-tool-exec--status render-data 'success)
          :body (mevedel-tool-exec--body (or (plist-get args :command) "") result render-data)
          :breadcrumb (mevedel-tool-exec-breadcrumb-text (plist-get render-data :breadcrumb))
          :expandable-p t
          :initially-collapsed-p t)))

(defun mevedel-tool-exec-render-control (name args result render-data)
  "Render a WriteStdin, StopExecution or ListExecutions call NAME.
ARGS, RESULT and RENDER-DATA are as for any renderer.  An empty poll
is hidden: the command's own row shows its output and status."
  (let* ((id (plist-get args :execution_id))
         (chars (plist-get args :chars))
         (poll (and (equal name "WriteStdin") (or (null chars) (equal chars "")))))
    (list :header (concat name (and id (concat " " id))
                          (cond ((equal chars "\u0003") " (Ctrl-C)")
                                ((and chars (not poll))
                                   (format " %S" (truncate-string-to-width chars 40 nil nil "…")))))
          :status (mevedel-tool-exec--status render-data 'success)
          :hidden-p (and poll (not (string-prefix-p "Error:" (or result ""))))
          :body (unless mevedel-tool-render-summary-only
                  (if (plist-get render-data :envelope)
                      (mevedel-tool-exec--strip-envelope result)
                    result))
          :expandable-p t
          :initially-collapsed-p t)))

;;;; Completion breadcrumbs

;; A command that yielded (the model got its execution ID) and later
;; ended, however that was observed, leaves one line at its original
;; row: what ran and how it ended.  It is kept in the row's render-data
;; (`:breadcrumb'), together with the terminal facts that replace the
;; row's "running" state, so it is part of the transcript and its
;; identity (session, owner, execution ID) is checked there: repeated
;; events add nothing, and two runs of one command are two rows.

(defun mevedel-tool-exec-outcome-word (facts)
  "Return how an execution with terminal FACTS ended, for the user.
That is \"completed\", \"failed\", \"stopped\" or \"timed out\"."
  (let ((outcome (plist-get facts :outcome)))
    (cond ((member outcome mevedel-tool-exec--success-outcomes) "completed")
          ((equal outcome "stopped") "stopped")
          ((equal outcome "timeout") "timed out")
          (t "failed"))))

(defun mevedel-tool-exec--first-line (text)
  "Return TEXT's first line, bounded to 60 columns, marking what was cut."
  (let* ((text (string-trim (or text "")))
         (first (car (split-string text "\n"))))
    (concat (truncate-string-to-width (or first "") 60 nil nil "…")
            (and (string-match-p "\n" text) " …"))))

(defun mevedel-tool-exec-breadcrumb (data)
  "Return the breadcrumb plist of the settlement DATA of a yielded execution."
  (let ((facts (plist-get data :facts))
        (monitor (equal (plist-get data :kind) "monitor")))
    (list :session (plist-get data :session)
          :owner (plist-get data :owner)
          :execution-id (plist-get data :id)
          :label (if monitor
                     (concat "Watching: " (mevedel-tool-exec--first-line
                                           (plist-get data :description)))
                   (concat "$ " (mevedel-tool-exec--first-line (plist-get data :command))))
          :outcome (mevedel-tool-exec-outcome-word facts)
          :exit-code (plist-get facts :exit-code)
          :signal (plist-get facts :signal))))

(defun mevedel-tool-exec-breadcrumb-text (breadcrumb)
  "Return the line shown for BREADCRUMB (a plist), or nil for none."
  (when breadcrumb
    (let ((code (plist-get breadcrumb :exit-code))
          (signal (plist-get breadcrumb :signal)))
      (concat (plist-get breadcrumb :label) " — " (plist-get breadcrumb :outcome)
              (cond (code (format " (exit %s)" code))
                    (signal (format " (signal %s)" signal)))))))

(defun mevedel-tool-exec--same-breadcrumb-p (a b)
  "Return non-nil when breadcrumbs A and B are for the same execution."
  (cl-every (lambda (key) (equal (plist-get a key) (plist-get b key)))
            '(:session :owner :execution-id)))

(defun mevedel-tool-exec-settle-render-data (render-data data)
  "Return RENDER-DATA of a row updated for the settlement DATA.
A yielded execution's row gets its terminal facts and its breadcrumb.
RENDER-DATA itself comes back (unchanged) when it belongs to another
execution, when DATA is not a yielded one's, or when the row already
has this breadcrumb."
  (let ((facts (plist-get data :facts))
        (breadcrumb (mevedel-tool-exec-breadcrumb data)))
    (if (or (not (plist-get data :yielded))
            (not (equal (plist-get render-data :execution-id) (plist-get data :id)))
            (mevedel-tool-exec--same-breadcrumb-p (plist-get render-data :breadcrumb) breadcrumb))
        render-data
      (let ((new (copy-sequence render-data)))
        (dolist (pair `((:state . "completed")
                        (:elapsed-ms . ,(plist-get facts :duration-ms))
                        (:exit-code . ,(plist-get facts :exit-code))
                        (:signal . ,(plist-get facts :signal))
                        (:termination . ,(plist-get facts :termination))
                        (:outcome . ,(plist-get facts :outcome))
                        (:bytes . ,(plist-get facts :bytes))
                        (:evaluated-changes
                         . ,(plist-get (plist-get facts :sandbox) :evaluated-changes))
                        (:breadcrumb . ,breadcrumb)))
          (setq new (plist-put new (car pair) (cdr pair))))
        (mevedel-sandbox-render-data
         new (mevedel-tool-exec-sandbox-summary (plist-get facts :sandbox)))))))

;;;; Session teardown

(defun mevedel-tool-exec-session-teardown (session)
  "Stop every execution of SESSION (a `mevedel-session'), silently."
  (when (and (mevedel-session-p session) (featurep 'mevedel-dyn))
    (mevedel-core-exec-teardown (mevedel-session-id session))))

(add-hook 'mevedel-session-close-functions #'mevedel-tool-exec-session-teardown)

(defun mevedel-tool-exec--mail-written (data)
  "Complete the storage of DATA's session when the module posted mail to it."
  (when (plist-get data :mailbox)
    (mevedel-session-storage-written (plist-get data :session))))

(add-hook 'mevedel-tool-exec-settled-functions #'mevedel-tool-exec--mail-written)
(add-hook 'mevedel-tool-exec-monitor-functions #'mevedel-tool-exec--mail-written)

;;;; Tools

(mevedel-define-tool Bash
  :native t
  :description (concat
                "Run a Bash command in the workspace and return its combined stdout/stderr \
with exit facts (exit_code, outcome, termination; pipeline_exit_codes for a final pipeline). \
A command still running after yield_time_ms returns its output so far and an execution_id: \
poll it or type into it with WriteStdin, list with ListExecutions, stop with StopExecution; \
a background completion is delivered to you later. tty=true gives the command a terminal \
with writable stdin; otherwise stdin is closed. Do not use `&' (rejected); there is no \
automatic timeout (use `timeout N cmd'). Output is capped at 64 MiB and long output is \
shown as head and tail. Commands run in a sandbox: the workspace is writable (not .git), the \
network is off and secret-looking environment variables are withheld; \
additional_permissions (network, read/write paths, env names) or \
sandbox_permissions=\"require_escalated\" ask the user first, with your justification. \
Manual: " mevedel-tool-exec-manual-address)
  :args `((command string :required "The Bash source to run")
         (description string :required
                      "A short description of what the command does (a few words)")
         (yield_time_ms integer :optional
                        "How long to wait before returning a running command (default 10000)"
                        :minimum 250 :maximum 30000)
         (tty boolean :optional "Run in a pseudo-terminal with writable stdin (default false)")
         ,@(mevedel-tool-exec-permission-args))
  :async-p t
  :max-result-size 30000
  :check-permission #'mevedel-tool-exec-check-command
  :grant-request #'mevedel-tool-exec-grant-request
  :function #'mevedel-tool-exec-bash
  :renderer #'mevedel-tool-exec-render-bash)

(mevedel-define-tool WriteStdin
  :native t
  :description (concat
                "Poll a running execution, or send it input. With empty chars it waits up to \
yield_time_ms (5000-300000, default 5000) for completion and returns the output printed since \
your last look. Input goes only to tty executions (yield_time_ms 250-30000, default 250); \
chars \"\\u0003\" sends Ctrl-C. Manual: " mevedel-tool-exec-manual-address)
  :args ((execution_id string :required "The id a Bash or Monitor call returned")
         (chars string :optional "Text to type (empty: just poll)")
         (yield_time_ms integer :optional "How long to wait, in milliseconds"
                        :minimum 250 :maximum 300000))
  :async-p t
  :max-result-size 30000
  :check-permission #'mevedel-tool-exec-check-control
  :function #'mevedel-tool-exec-write-stdin
  :renderer #'mevedel-tool-exec-render-control)

(mevedel-define-tool ListExecutions
  :description "List your executions that are still running after they yielded."
  :args ()
  :groups '(execution)
  :read-only-p t
  :check-permission #'mevedel-tool-exec-check-control
  :function #'mevedel-tool-exec-list-executions
  :renderer #'mevedel-tool-exec-render-control)

(mevedel-define-tool StopExecution
  :description "Stop one of your running executions (TERM, then KILL) and return its final output."
  :args ((execution_id string :required "The id a Bash or Monitor call returned"))
  :groups '(execution)
  :async-p t
  :max-result-size 30000
  :check-permission #'mevedel-tool-exec-check-control
  :function #'mevedel-tool-exec-stop-execution
  :renderer #'mevedel-tool-exec-render-control)

(mevedel-define-tool Monitor
  :native t
  ;; Its events wake the root; a child's stdout lines would reach nobody.
  :root-only t
  :description (concat
                "Watch a command whose stdout lines should reach you as events while you do \
other work (e.g. `tail -f log | grep --line-buffered ERROR'). Each stdout line becomes an \
event; stderr is only kept in the output file. It stops at timeout_ms (default 300000) or when \
it floods (over 100 lines a minute). For one eventual result use Bash instead. It runs in \
Bash's sandbox, with the same sandbox_permissions, additional_permissions and justification. \
Manual: "
                mevedel-tool-exec-manual-address)
  :args `((command string :required "The Bash source of the watcher")
         (description string :required "What it watches; shown with every event")
         (timeout_ms integer :optional "Milliseconds until it is stopped (default 300000)"
                     :minimum 1000 :maximum 3600000)
         ,@(mevedel-tool-exec-permission-args))
  :async-p t
  :check-permission #'mevedel-tool-exec-check-command
  :grant-request #'mevedel-tool-exec-grant-request
  :function #'mevedel-tool-exec-monitor
  :renderer #'mevedel-tool-exec-render-monitor)

(provide 'mevedel-tool-exec)
;;; mevedel-tool-exec.el ends here
