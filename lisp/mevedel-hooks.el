;;; mevedel-hooks.el --- User hooks compatible with Claude Code's  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The user's own hooks: shell commands (or, globally, Lisp functions)
;; run at fixed points of a session, with Claude Code's input and output
;; conventions so existing hook scripts work unchanged.  docs/hooks.md
;; is the manual; this is the map.
;;
;; Sources, in the order their hooks run and their results combine:
;; `mevedel-hooks' (global, trusted), the workspace's .mevedel/hooks.el
;; (one list read as data, never evaluated), and the `hooks' sections of
;; .claude/settings.json and .claude/settings.local.json (unless
;; `mevedel-hooks-read-claude-settings' is nil).  A workspace file runs
;; only once the user approved its current content: approvals are
;; content hashes kept in `mevedel-hooks-approvals-file', outside every
;; workspace.  A headless run cannot ask; it skips such a file with one
;; line on stderr unless `mevedel-hooks-trust-workspace' (bin/mevedel
;; --trust-hooks) trusts it: the content it had when the run began.
;;
;; Events: PreToolUse, PostToolUse and PostToolUseFailure run inside the
;; tool pipeline (they are functions on its hook variables and answer
;; asynchronously); UserPromptSubmit, Stop and SessionStart are called by
;; mevedel-chat.el (SessionStart also by mevedel-compaction.el, after a
;; compaction); SubagentStart and SubagentStop by the agents runtime,
;; through `mevedel-hooks-run'.
;;
;; Commands run as managed executions of the module (crates/mevedel-core/src/exec/): their
;; own process group, never blocking Emacs, outside the model's sandbox
;; (they are the user's), in the workspace, with the event's JSON on
;; stdin and a per-hook timeout after which the group is stopped.  The
;; hooks matching one event run in parallel; their results combine in
;; configuration order, so the outcome never depends on which finished
;; first.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-interaction)
(require 'mevedel-permissions)
(require 'mevedel-pipeline)
(require 'mevedel-session)
(require 'mevedel-tool-repair)

;;;; Customization

(defgroup mevedel-hooks nil
  "User hooks run at fixed points of a session, as in Claude Code."
  :group 'mevedel
  :prefix "mevedel-hooks-")

(defcustom mevedel-hooks nil
  "Global hooks, run in every workspace without asking.
An alist of (EVENT HOOK...), EVENT one of `mevedel-hooks-events' and
each HOOK a plist:

  :matcher  which calls it applies to (see docs/hooks.md): a tool name,
            NAME|NAME alternatives or a regexp; nil, \"\" or \"*\" = all
  :command  a shell command run in the workspace with the event's JSON
            on stdin, or
  :function a function of the input (a plist with Claude Code's keys,
            :session_id, :tool_name, ...) returning nil, a string (as
            a command's stdout) or a plist shaped like the JSON output
            (:decision \"block\" :reason \"...\")
  :timeout  seconds before a command is stopped (default
            `mevedel-hooks-default-timeout')

Example: ((PreToolUse (:matcher \"Bash\" :command \"~/bin/guard.sh\"))
          (Stop (:function my-stop-check)))."
  :type '(alist :key-type symbol :value-type (repeat plist)))

(defcustom mevedel-hooks-read-claude-settings t
  "Non-nil reads the `hooks' of the workspace's .claude/settings.json.
.claude/settings.local.json is read too.  Like .mevedel/hooks.el,
they run only once approved."
  :type 'boolean)

(defcustom mevedel-hooks-default-timeout 60
  "Seconds a hook command may run before it is stopped, unless it says."
  :type 'number)

(defcustom mevedel-hooks-approvals-file
  (expand-file-name "mevedel/hooks-approved.eld"
                    (or (getenv "XDG_STATE_HOME") (expand-file-name "~/.local/state")))
  "File holding the content hashes of the approved workspace hook files."
  :type 'file)

(defcustom mevedel-hooks-output-limit 10000
  "Most characters of a hook's output that reach the model or the user."
  :type 'natnum)

(defcustom mevedel-hooks-stop-limit 8
  "Most times Stop hooks may continue one prompt's work before it ends anyway."
  :type 'natnum)

(defconst mevedel-hooks-events
  '(PreToolUse PostToolUse PostToolUseFailure UserPromptSubmit Stop SessionStart
               SubagentStart SubagentStop)
  "The events hooks can be attached to.")

(defconst mevedel-hooks-workspace-files
  '(".mevedel/hooks.el" ".claude/settings.json" ".claude/settings.local.json")
  "The workspace's hook files, relative to its root, in running order.")

(defvar mevedel-hooks-trust-workspace nil
  "Workspace hook files that run without approval: t (all), or an alist.
The alist holds (FILE . HASH) for the content trusted; bin/mevedel
--trust-hooks trusts the files as they are when the run starts (see
`mevedel-hooks-trust-snapshot'), so one the model changes is not.")

(defvar mevedel-hooks-can-ask-function (lambda () (not noninteractive))
  "Function returning non-nil when the user can be asked to approve a file.
A headless run (bin/mevedel) cannot ask.")

(defvar mevedel-hooks-approve-function #'mevedel-hooks-ask-approval
  "Function of (FILE SUMMARY CALLBACK) asking whether FILE's hooks may run.
SUMMARY lists its commands.  CALLBACK is called once: with t to
approve, nil to refuse, or `cancelled' when the question went
unanswered (it is asked again next time).  Tests replace it with a
stub.")

(defvar mevedel-hooks-call-context nil
  "The pipeline context of the tool call whose hooks start now, or nil.
Bound while `mevedel-hooks-run' starts a tool event's hooks: an
approval question it opens belongs to that call's requester (a child
agent's path and request, see `mevedel-interaction-requester').")

(defvar mevedel-hooks-report-function #'mevedel-hooks--display
  "Function of a message string telling the user about a hook.
Failed and timed-out hooks, blocked prompts and a hook's
systemMessage reach the user through it.")

(defvar mevedel-hooks-stop-turn-functions nil
  "Abnormal hook run with (SESSION REASON BUFFER) to end a turn for a tool hook.
A PreToolUse or PostToolUse hook answering continue false runs it;
BUFFER is the data buffer of the call's conversation (a child
agent's, whose turn alone ends), or nil for the root's.
mevedel-chat.el adds the abort of that chat's turn.")

(define-error 'mevedel-hooks-error "mevedel hook error")

;;;; Reading the sources

(defvar mevedel-hooks--files (make-hash-table :test #'equal)
  "Parsed workspace hook files: FILE -> (STAMP HASH ENTRIES ERROR).")

(defun mevedel-hooks--check-entry (event hook file)
  "Return HOOK of EVENT as an entry plist, or signal naming FILE.
FILE is nil for `mevedel-hooks', where functions are allowed."
  (let ((where (if file (format "%s: " file) "mevedel-hooks: ")))
    (unless (and (listp hook) (keywordp (car-safe hook)))
      (signal 'mevedel-hooks-error
              (list (format "%sa %s hook must be a plist like (:command \"...\"), not %S"
                            where event hook))))
    (let ((command (plist-get hook :command))
          (function (plist-get hook :function))
          (matcher (plist-get hook :matcher))
          (timeout (plist-get hook :timeout)))
      (cond
       ((and function file)
        (signal 'mevedel-hooks-error
                (list (format "%s:function hooks belong in `mevedel-hooks'; a workspace file \
holds only commands" where))))
       ((not (or (and (stringp command) (not (string-blank-p command)))
                 (and function (or (functionp function) (symbolp function)))))
        (signal 'mevedel-hooks-error
                (list (format "%sthe %s hook %S has no :command" where event hook))))
       ((not (or (null matcher) (stringp matcher)))
        (signal 'mevedel-hooks-error
                (list (format "%sthe :matcher of %S is not a string" where hook))))
       ((not (or (null timeout) (and (numberp timeout) (> timeout 0))))
        (signal 'mevedel-hooks-error
                (list (format "%sthe :timeout of %S is not a positive number" where hook)))))
      (list :event event :matcher matcher :command command :function function
            :timeout timeout :file file))))

(defun mevedel-hooks--entries-of (config file)
  "Return the entries of CONFIG, an alist (EVENT HOOK...), read from FILE."
  (unless (listp config)
    (signal 'mevedel-hooks-error
            (list (format "%s: the hooks must be one list of (EVENT HOOK...)" (or file "mevedel-hooks")))))
  (cl-loop for group in config
           for event = (car-safe group)
           unless (memq event mevedel-hooks-events)
           do (signal 'mevedel-hooks-error
                      (list (format "%s: unknown hook event %S (known: %s)"
                                    (or file "mevedel-hooks") event
                                    (mapconcat #'symbol-name mevedel-hooks-events ", "))))
           append (mapcar (lambda (hook) (mevedel-hooks--check-entry event hook file))
                          (cdr group))))

(defun mevedel-hooks-read-file (file)
  "Return the hook list of the .mevedel/hooks.el FILE, read as data.
The file holds one list; nothing in it is evaluated.  A syntax error
signals `mevedel-hooks-error' naming FILE and the line."
  (with-temp-buffer
    (insert-file-contents file)
    (with-syntax-table emacs-lisp-mode-syntax-table
      (goto-char (point-min))
      (forward-comment (buffer-size))
      (if (eobp)
          nil
        (let ((form (condition-case err
                        (read (current-buffer))
                      (end-of-file
                       (signal 'mevedel-hooks-error
                               (list (format "%s:%d: syntax error: a list is not closed"
                                             file (line-number-at-pos
                                                   (or (nth 1 (syntax-ppss (point-max)))
                                                       (point-max)))))))
                      (invalid-read-syntax
                       (signal 'mevedel-hooks-error
                               (list (format "%s:%d: syntax error: %s" file
                                             (line-number-at-pos)
                                             (error-message-string err))))))))
          (forward-comment (buffer-size))
          (unless (eobp)
            (signal 'mevedel-hooks-error
                    (list (format "%s:%d: the file must hold one list; more follows it"
                                  file (line-number-at-pos)))))
          form)))))

(defun mevedel-hooks--claude-entries (file)
  "Return the entries of the `hooks' section of the Claude Code settings FILE.
Events mevedel does not have are left out; hooks of a type other than
\"command\" are reported and left out."
  (let* ((json (condition-case err
                   (with-temp-buffer
                     (insert-file-contents file)
                     (json-parse-buffer :object-type 'alist :array-type 'list
                                        :null-object nil :false-object nil))
                 (json-error
                  (signal 'mevedel-hooks-error
                          (list (format "%s: invalid JSON: %s" file (error-message-string err)))))))
         (hooks (alist-get 'hooks json))
         entries)
    (dolist (group hooks)
      (when-let* ((event (car (memq (car group) mevedel-hooks-events))))
        (dolist (matcher-group (cdr group))
          (dolist (hook (alist-get 'hooks matcher-group))
            (if (not (equal (alist-get 'type hook "command") "command"))
                (funcall mevedel-hooks-report-function
                         (format "%s: %s hooks of type %S are not supported; skipped"
                                 file event (alist-get 'type hook)))
              (push (mevedel-hooks--check-entry
                     event (list :matcher (alist-get 'matcher matcher-group)
                                 :command (alist-get 'command hook)
                                 :timeout (alist-get 'timeout hook))
                     file)
                    entries))))))
    (nreverse entries)))

(defun mevedel-hooks--file (file)
  "Return (HASH ENTRIES ERROR) for the workspace hook FILE, or nil if absent.
The parse is cached until FILE's modification time or size changes."
  (when-let* ((attributes (file-attributes file)))
    (let ((stamp (list (file-attribute-modification-time attributes)
                       (file-attribute-size attributes)))
          (cached (gethash file mevedel-hooks--files)))
      (if (equal (car cached) stamp)
          (cdr cached)
        (let* ((text (with-temp-buffer
                       (insert-file-contents-literally file)
                       (buffer-string)))
               (hash (secure-hash 'sha256 text))
               (parsed (condition-case err
                           (list (if (string-suffix-p ".el" file)
                                     (mevedel-hooks--entries-of (mevedel-hooks-read-file file)
                                                                file)
                                   (mevedel-hooks--claude-entries file))
                                 nil)
                         ((mevedel-hooks-error file-error)
                          (list nil (error-message-string err)))))
               (value (cons hash parsed)))
          (puthash file (cons stamp value) mevedel-hooks--files)
          value)))))

(defun mevedel-hooks--workspace-files (workspace)
  "Return the hook files WORKSPACE may have, in running order."
  (cl-loop for name in mevedel-hooks-workspace-files
           when (or mevedel-hooks-read-claude-settings (string-prefix-p ".mevedel/" name))
           collect (expand-file-name name workspace)))

;;;; Trust

(defvar mevedel-hooks--approvals 'unread
  "The approvals: an alist (FILE . HASH), or `unread'.")

(defvar mevedel-hooks--declined (make-hash-table :test #'equal)
  "FILE -> hash of the content the user declined in this Emacs.")

(defvar mevedel-hooks--told (make-hash-table :test #'equal)
  "FILE -> hash whose problem (skip, syntax) was already reported.")

(defvar mevedel-hooks--asking (make-hash-table :test #'equal)
  "FILE -> callbacks waiting for the question about it now asked.")

(defun mevedel-hooks--approvals ()
  "Return the approvals alist, reading `mevedel-hooks-approvals-file' once."
  (when (eq mevedel-hooks--approvals 'unread)
    (setq mevedel-hooks--approvals
          (mevedel-interaction-read-approvals mevedel-hooks-approvals-file)))
  mevedel-hooks--approvals)

(defun mevedel-hooks-approved-p (file hash)
  "Return non-nil when the user approved FILE with the content HASH."
  (equal (cdr (assoc file (mevedel-hooks--approvals))) hash))

(defun mevedel-hooks-approve (file hash)
  "Record that FILE's hooks with the content HASH may run."
  (setq mevedel-hooks--approvals
        (mevedel-interaction-record-approval (mevedel-hooks--approvals) file hash
                                             mevedel-hooks-approvals-file
                                             "Workspace hook files"))
  (remhash file mevedel-hooks--declined))

(defun mevedel-hooks--summary (entries)
  "Return the lines naming the commands of ENTRIES, for an approval question."
  (mapconcat (lambda (entry)
               (format "  %s%s: %s" (plist-get entry :event)
                       (if (member (plist-get entry :matcher) '(nil "" "*")) ""
                         (format " [%s]" (plist-get entry :matcher)))
                       (plist-get entry :command)))
             entries "\n"))

(defun mevedel-hooks-ask-approval (file summary callback)
  "Ask whether FILE's hook commands (SUMMARY) may run; tell CALLBACK.
A card in a view of FILE's workspace, else the minibuffer, asks (see
`mevedel-interaction-ask-file-approval'); the hooks wait for it
without blocking.  A child agent's tool call asks in its name."
  (mevedel-interaction-ask-file-approval
   file (list :kind 'hook-approval
              :title (format "Run the hooks of %s?" (abbreviate-file-name file))
              :does "It runs, outside the sandbox:"
              :summary summary
              :refused "its hooks do not run until it changes"
              :context mevedel-hooks-call-context)
   callback))

(defun mevedel-hooks--settle-question (file hash approved)
  "Record the answer APPROVED about FILE's content HASH; call its waiters.
APPROVED is as `mevedel-hooks-approve-function''s callback gets it; a
cancelled question records nothing, and its waiters run no hooks."
  (pcase approved
    ('t (mevedel-hooks-approve file hash))
    ('cancelled)
    (_ (puthash file hash mevedel-hooks--declined)
       (funcall mevedel-hooks-report-function
                (format "The hooks of %s do not run: not approved"
                        (abbreviate-file-name file)))))
  (let ((waiting (gethash file mevedel-hooks--asking)))
    (remhash file mevedel-hooks--asking)
    (dolist (callback (nreverse waiting))
      (funcall callback (eq approved t)))))

(defun mevedel-hooks--trust (file hash entries callback)
  "Call CALLBACK with non-nil when FILE (content HASH, ENTRIES) may run."
  (cond
   ((or (eq mevedel-hooks-trust-workspace t)
        (equal (cdr (assoc file mevedel-hooks-trust-workspace)) hash)
        (mevedel-hooks-approved-p file hash))
    (funcall callback t))
   ((equal (gethash file mevedel-hooks--declined) hash) (funcall callback nil))
   ((not (funcall mevedel-hooks-can-ask-function))
    (unless (equal (gethash file mevedel-hooks--told) hash)
      (puthash file hash mevedel-hooks--told)
      (message "mevedel: skipping the unapproved hooks of %s (--trust-hooks runs them)" file))
    (funcall callback nil))
   ((gethash file mevedel-hooks--asking)
    (push callback (gethash file mevedel-hooks--asking)))
   (t
    (puthash file (list callback) mevedel-hooks--asking)
    (funcall mevedel-hooks-approve-function file (mevedel-hooks--summary entries)
             (lambda (approved) (mevedel-hooks--settle-question file hash approved))))))

(defun mevedel-hooks-revoke (file)
  "Forget the approval of FILE: its hooks ask again before they run."
  (setq mevedel-hooks--approvals
        (mevedel-interaction-record-approval (mevedel-hooks--approvals) file nil
                                             mevedel-hooks-approvals-file
                                             "Workspace hook files"))
  (remhash file mevedel-hooks--declined))

(defun mevedel-hooks-trust-snapshot (workspace)
  "Return (FILE . HASH) for each hook file of WORKSPACE as it is now.
As `mevedel-hooks-trust-workspace' it trusts this content only."
  (cl-loop for file in (mevedel-hooks--workspace-files workspace)
           for parsed = (mevedel-hooks--file file)
           when parsed collect (cons file (car parsed))))

(defun mevedel-hooks-sources (workspace)
  "Return the hook sources of WORKSPACE, in running order, for display.
Each is a plist: :file (nil for `mevedel-hooks'), :state (`trusted',
`approved', `unapproved', `declined', `broken' or `absent'), :hash,
:entries and :error."
  (cons (condition-case err
            (list :file nil :state 'trusted
                  :entries (mevedel-hooks--entries-of mevedel-hooks nil))
          (mevedel-hooks-error (list :file nil :state 'broken :error (error-message-string err))))
        (mapcar (lambda (file)
                  (pcase (mevedel-hooks--file file)
                    ('nil (list :file file :state 'absent))
                    (`(,hash ,entries ,problem)
                     (list :file file :hash hash :entries entries :error problem
                           :state (cond (problem 'broken)
                                        ((mevedel-hooks-approved-p file hash) 'approved)
                                        ((equal (gethash file mevedel-hooks--declined) hash)
                                         'declined)
                                        (t 'unapproved))))))
                (mevedel-hooks--workspace-files workspace))))

;;;; Matching

(defun mevedel-hooks--regexp (pattern)
  "Return the Emacs regexp for PATTERN, a JavaScript-style regexp.
Groups, alternatives and braces are unescaped there; \\d, \\w and \\s
are classes."
  (let ((i 0) (n (length pattern)) (out nil) (in-class nil))
    (while (< i n)
      (let ((c (aref pattern i)))
        (cond
         ((and (eq c ?\\) (< (1+ i) n))
          (let ((next (aref pattern (1+ i))))
            (push (pcase next
                    (?d "[0-9]") (?w "[[:alnum:]_]") (?s "[[:space:]]")
                    ((or ?\( ?\) ?| ?{ ?}) (string next))
                    (_ (string ?\\ next)))
                  out)
            (cl-incf i)))
         (in-class (when (eq c ?\]) (setq in-class nil)) (push (string c) out))
         ((eq c ?\[) (setq in-class t) (push "[" out))
         ((memq c '(?\( ?\) ?| ?{ ?})) (push (string ?\\ c) out))
         (t (push (string c) out))))
      (cl-incf i))
    (apply #'concat (nreverse out))))

(defun mevedel-hooks-matches-p (matcher value)
  "Return non-nil when MATCHER matches VALUE (a tool name, source, agent type).
Nil, \"\" and \"*\" select everything; letters, digits, `_' and `|'
are exact names and alternatives; anything else is a regexp, as in
Claude Code."
  (cond
   ((member matcher '(nil "" "*")) t)
   ((null value) nil)
   ((string-match-p "\\`[[:alnum:]_|]+\\'" matcher)
    (member value (split-string matcher "|" t)))
   (t (let ((case-fold-search nil))
        (condition-case nil
            (string-match-p (mevedel-hooks--regexp matcher) value)
          (invalid-regexp nil))))))

(defun mevedel-hooks--match-value (event input)
  "Return the field of INPUT that EVENT's matchers select on, or nil."
  (pcase event
    ((or 'PreToolUse 'PostToolUse 'PostToolUseFailure) (plist-get input :tool_name))
    ('SessionStart (plist-get input :source))
    ((or 'SubagentStart 'SubagentStop) (plist-get input :agent_type))))

(defun mevedel-hooks--candidates (workspace event input)
  "Return the groups of hooks of EVENT that match INPUT in WORKSPACE.
Each group is (FILE HASH ENTRIES); FILE is nil for `mevedel-hooks'.
A broken workspace file is reported once and left out."
  (let* ((value (mevedel-hooks--match-value event input))
         (wanted (lambda (entry)
                   (and (eq (plist-get entry :event) event)
                        (or (memq event '(UserPromptSubmit Stop))
                            (mevedel-hooks-matches-p (plist-get entry :matcher) value)))))
         (global (condition-case err
                     (cl-remove-if-not wanted (mevedel-hooks--entries-of mevedel-hooks nil))
                   (mevedel-hooks-error
                    (funcall mevedel-hooks-report-function (error-message-string err))
                    nil)))
         (groups (and global (list (list nil nil global)))))
    (when workspace
      (dolist (file (mevedel-hooks--workspace-files workspace))
        (pcase (mevedel-hooks--file file)
          (`(,hash ,_ ,(and (pred stringp) problem))
           (unless (equal (gethash file mevedel-hooks--told) hash)
             (puthash file hash mevedel-hooks--told)
             (funcall mevedel-hooks-report-function
                      (format "Hook file not used: %s" problem))))
          (`(,hash ,entries ,_)
           (when-let* ((matching (cl-remove-if-not wanted entries)))
             (push (list file hash matching) groups))))))
    (nreverse groups)))

(defun mevedel-hooks--trusted-entries (groups callback)
  "Call CALLBACK once with the entries of GROUPS that may run, in order."
  (let* ((left (length groups))
         (verdicts (make-vector left nil))
         (resolve (lambda (i ok)
                    (aset verdicts i ok)
                    (when (zerop (cl-decf left))
                      (funcall callback
                               (cl-loop for group in groups for v across verdicts
                                        when v append (nth 2 group)))))))
    (if (null groups)
        (funcall callback nil)
      (cl-loop for (file hash entries) in groups
               for i from 0
               do (let ((i i))
                    (if (null file)
                        (funcall resolve i t)
                      (mevedel-hooks--trust file hash entries
                                            (lambda (ok) (funcall resolve i ok)))))))))

;;;; Input

(defun mevedel-hooks--permission-mode (session)
  "Return Claude Code's name for SESSION's permission mode."
  (pcase (or (and (mevedel-session-p session) (mevedel-session-permission-mode session))
             mevedel-permissions-mode)
    ('edits "acceptEdits")
    ('full-auto "bypassPermissions")
    (_ "default")))

(defun mevedel-hooks--transcript-path (session)
  "Return the file of SESSION's transcript, or \"\" before it has one."
  (or (and (mevedel-session-durable-p session)
           (mevedel-session-database-file session))
      ""))

(defun mevedel-hooks-input (event session &rest fields)
  "Return the input of EVENT in SESSION: the common fields, then FIELDS.
FIELDS is a plist with Claude Code's keys (:tool_name ...).  The
common fields are session_id, transcript_path, cwd, permission_mode
and hook_event_name."
  (append (list :session_id (if (mevedel-session-p session) (mevedel-session-id session) "")
                :transcript_path (mevedel-hooks--transcript-path session)
                :cwd (directory-file-name
                      (expand-file-name (if (mevedel-session-p session)
                                            (mevedel-session-workspace session)
                                          default-directory)))
                :permission_mode (mevedel-hooks--permission-mode session)
                :hook_event_name (symbol-name event))
          fields))

(defun mevedel-hooks--json (input)
  "Return INPUT, an input plist, as JSON text."
  (decode-coding-string
   (json-serialize input :null-object :null :false-object :json-false) 'utf-8 t))

;;;; Per-session state

(defvar mevedel-hooks--state (make-hash-table :test #'eq :weakness 'key)
  "The hook state of each session.
SESSION -> plist: :context (blocks for the next turn, oldest first),
:starting (callbacks waiting for SessionStart hooks, or nil), :stops
\(continuations since the last prompt), :keys (the scheduler keys of its
hook commands).")

(defun mevedel-hooks--get (session key)
  "Return KEY of SESSION's hook state."
  (plist-get (gethash session mevedel-hooks--state) key))

(defun mevedel-hooks--put (session key value)
  "Set KEY of SESSION's hook state to VALUE."
  (puthash session (plist-put (gethash session mevedel-hooks--state) key value)
           mevedel-hooks--state))

;;;; Running one hook

(defun mevedel-hooks--bound (text)
  "Return TEXT trimmed and cut to `mevedel-hooks-output-limit' characters."
  (let ((text (string-trim (or text ""))))
    (if (> (length text) mevedel-hooks-output-limit)
        (concat (substring text 0 mevedel-hooks-output-limit) "\n[hook output truncated]")
      text)))

(defun mevedel-hooks--read (file)
  "Return the text of FILE (a hook's output), or \"\" when it is absent."
  (if (file-readable-p file)
      (with-temp-buffer
        (let ((coding-system-for-read 'utf-8))
          (insert-file-contents file nil 0 (* 4 mevedel-hooks-output-limit)))
        (buffer-string))
    ""))

(defun mevedel-hooks--label (entry)
  "Return how the user recognises ENTRY: its command or function."
  (if (plist-get entry :command)
      (truncate-string-to-width (plist-get entry :command) 60 nil nil "…")
    (format "%s" (plist-get entry :function))))

(defun mevedel-hooks--run-function (entry input callback)
  "Call ENTRY's function with INPUT; give CALLBACK the result plist."
  (funcall callback
           (condition-case err
               (let ((value (funcall (plist-get entry :function) input)))
                 (cond ((null value) (list :exit 0 :stdout ""))
                       ((stringp value) (list :exit 0 :stdout value))
                       ((and (consp value) (keywordp (car value)))
                        (list :exit 0 :output value))
                       (t (list :error (format "returned %S, not nil, a string or a plist"
                                               value)))))
             (error (list :error (error-message-string err))))))

(defun mevedel-hooks--scheduler-key (session entry)
  "Return the execution scheduler key of ENTRY's command in SESSION.
Each command has its own, so different hooks run in parallel and none
waits behind the model's commands."
  (let ((key (format "%s/hook-%s"
                     (if (mevedel-session-p session) (mevedel-session-id session) "none")
                     (substring (secure-hash 'sha1 (plist-get entry :command)) 0 10))))
    (when (mevedel-session-p session)
      (let ((keys (mevedel-hooks--get session :keys)))
        (unless (member key keys)
          (mevedel-hooks--put session :keys (cons key keys)))))
    key))

(defun mevedel-hooks--session-teardown (session)
  "Stop the hook commands of SESSION and forget their schedulers."
  (dolist (key (mevedel-hooks--get session :keys))
    (mevedel-core-exec-teardown key))
  (remhash session mevedel-hooks--state))

(add-hook 'mevedel-session-close-functions #'mevedel-hooks--session-teardown)

(defun mevedel-hooks--environment (workspace)
  "Return the environment of hook commands run in WORKSPACE."
  (let ((dir (directory-file-name workspace)))
    (append (list (concat "CLAUDE_PROJECT_DIR=" dir) (concat "MEVEDEL_PROJECT_DIR=" dir))
            (cl-remove-if (lambda (entry)
                            (string-match-p "\\`\\(CLAUDE\\|MEVEDEL\\)_PROJECT_DIR=" entry))
                          process-environment))))

(defun mevedel-hooks--run-command (entry json session workspace callback)
  "Run ENTRY's command in WORKSPACE with JSON on stdin; CALLBACK gets the result.
SESSION owns the execution.  The result is (:exit CODE :stdout TEXT
:stderr TEXT), or (:error TEXT) when it could not run or was stopped
at its timeout.  Return a function that stops the command."
  (let* ((dir (make-temp-file "mevedel-hook-" t))
         (in (expand-file-name "input.json" dir))
         (out (expand-file-name "stdout" dir))
         (err (expand-file-name "stderr" dir))
         (timeout (or (plist-get entry :timeout) mevedel-hooks-default-timeout))
         (key (mevedel-hooks--scheduler-key session entry))
         (done nil) (id nil)
         (finish (lambda (result)
                   (unless done
                     (setq done t)
                     (let ((result (if (plist-member result :exit)
                                       (append result (list :stdout (mevedel-hooks--read out)
                                                            :stderr (mevedel-hooks--read err)))
                                     result)))
                       (delete-directory dir t)
                       (funcall callback result))))))
    (let ((coding-system-for-write 'utf-8-unix))
      (write-region json nil in nil 'silent))
    (condition-case failure
        (setq id (mevedel-core-exec-start
                  (list :session key :owner "/hooks"
                        ;; Its own shell: a hook may start background
                        ;; work (`notify-send ... &'), which the
                        ;; model's commands may not.
                        :command (format "bash -c %s < %s > %s 2> %s"
                                         (shell-quote-argument (plist-get entry :command))
                                         (shell-quote-argument in) (shell-quote-argument out)
                                         (shell-quote-argument err))
                        :description (format "hook: %s" (mevedel-hooks--label entry))
                        :cwd (directory-file-name workspace)
                        :yield-ms (max 1 (round (* 1000 timeout)))
                        :environment (mevedel-hooks--environment workspace)
                        :progress :false)
                  (lambda (status value)
                    (cond
                     ((not (eq status 'ok))
                      (funcall finish (list :error (format "%s" (cadr value)))))
                     ((plist-get value :facts)
                      (let ((facts (plist-get value :facts)))
                        (funcall finish
                                 (if (plist-get facts :exit-code)
                                     (list :exit (plist-get facts :exit-code))
                                   (list :error (format "it ended by %s"
                                                        (plist-get facts :termination)))))))
                     (t
                      (mevedel-core-exec-stop
                       key (plist-get value :id) "/hooks"
                       (lambda (_status _value)
                         (funcall finish
                                  (list :error (format "timed out after %s s and was stopped"
                                                       timeout))))))))))
      (error (funcall finish (list :error (error-message-string failure)))))
    (lambda ()
      (when (and id (not done))
        (setq done t)
        (mevedel-core-exec-stop-by-user key id)
        (delete-directory dir t)))))

;;;; Interpreting results

(defun mevedel-hooks--parse-output (stdout)
  "Return STDOUT parsed as a JSON object (a plist), or nil when it is not one."
  (let ((text (string-trim stdout)))
    (when (string-prefix-p "{" text)
      (condition-case nil
          (let ((value (json-parse-string text :object-type 'plist :null-object :null
                                          :false-object :json-false)))
            (and (listp value) (or value '(:empty t))))
        (json-error nil)))))

(defun mevedel-hooks--context-on-stdout-p (event)
  "Return non-nil when plain stdout of EVENT's successful hooks is context."
  (memq event '(UserPromptSubmit SessionStart SubagentStart)))

(defun mevedel-hooks--string (value)
  "Return VALUE when it is a non-empty string, else nil."
  (and (stringp value) (not (string-blank-p value)) (mevedel-hooks--bound value)))

(defun mevedel-hooks--from-output (event output)
  "Return the verdict of the JSON OUTPUT (a plist) of a hook of EVENT."
  (let* ((specific (let ((s (plist-get output :hookSpecificOutput))) (and (listp s) s)))
         (decision (plist-get output :decision))
         (permission (plist-get specific :permissionDecision))
         (reason (or (mevedel-hooks--string (plist-get specific :permissionDecisionReason))
                     (mevedel-hooks--string (plist-get output :reason))))
         verdict)
    (when (eq (plist-get output :continue) :json-false)
      (setq verdict (plist-put verdict :stop (or (mevedel-hooks--string
                                                  (plist-get output :stopReason))
                                                 "a hook asked to stop"))))
    (when-let* ((message (mevedel-hooks--string (plist-get output :systemMessage))))
      (setq verdict (plist-put verdict :message message)))
    (when-let* ((context (mevedel-hooks--string (plist-get specific :additionalContext))))
      (setq verdict (plist-put verdict :context context)))
    (pcase (or permission decision)
      ((or "block" "deny")
       (setq verdict (plist-put verdict :block (or reason "a hook blocked it"))))
      ("ask" (when (eq event 'PreToolUse)
               (setq verdict (plist-put (plist-put verdict :permission 'ask)
                                        :permission-reason reason))))
      ((or "allow" "approve")
       (when (eq event 'PreToolUse)
         (setq verdict (plist-put (plist-put verdict :permission 'allow)
                                  :permission-reason reason)))))
    (when (and (eq event 'PreToolUse) (plist-member specific :updatedInput))
      (setq verdict (plist-put verdict :updated-input
                               (mevedel-tool-repair-json-restore-empty-objects
                                (plist-get specific :updatedInput)))))
    verdict))

(defun mevedel-hooks--verdict (event entry result)
  "Return the verdict of RESULT, what ENTRY's run for EVENT gave.
A plist with any of :block REASON, :context TEXT, :permission
`allow'/`ask' and :permission-reason, :updated-input ARGS, :stop
REASON, :message TEXT (for the user) and :error TEXT (for the user)."
  (let ((label (mevedel-hooks--label entry))
        (exit (plist-get result :exit)))
    (cond
     ((plist-get result :error)
      (list :error (format "The %s hook `%s' failed: %s" event label
                           (plist-get result :error))))
     ((plist-get result :output) (mevedel-hooks--from-output event (plist-get result :output)))
     ((eql exit 2)
      (let ((reason (or (mevedel-hooks--string (plist-get result :stderr))
                        (format "the hook `%s' exited with status 2" label))))
        (if (memq event '(SessionStart SubagentStart))
            (list :error (format "The %s hook `%s': %s" event label reason))
          (list :block reason))))
     ((eql exit 0)
      (let* ((stdout (plist-get result :stdout))
             (output (mevedel-hooks--parse-output stdout)))
        (cond (output (mevedel-hooks--from-output event output))
              ((and (mevedel-hooks--context-on-stdout-p event) (mevedel-hooks--string stdout))
               (list :context (mevedel-hooks--string stdout))))))
     (t (list :error (format "The %s hook `%s' exited with status %s%s" event label exit
                             (if-let* ((text (mevedel-hooks--string (plist-get result :stderr))))
                                 (concat ": " text) "")))))))

(defun mevedel-hooks--combine (verdicts)
  "Return the one verdict of VERDICTS, given in configuration order.
Texts join in order; a permission `ask' beats `allow'; the last
:updated-input wins."
  (let (block context stop message error permission reason updated has-updated)
    (dolist (v verdicts)
      (when-let* ((text (plist-get v :block))) (push text block))
      (when-let* ((text (plist-get v :context))) (push text context))
      (when-let* ((text (plist-get v :stop))) (push text stop))
      (when-let* ((text (plist-get v :message))) (push text message))
      (when-let* ((text (plist-get v :error))) (push text error))
      (when-let* ((p (plist-get v :permission)))
        (when (or (null permission) (and (eq p 'ask) (eq permission 'allow)))
          (setq permission p reason (plist-get v :permission-reason))))
      (when (plist-member v :updated-input)
        (setq updated (plist-get v :updated-input) has-updated t)))
    (append (and block (list :block (string-join (nreverse block) "\n")))
            (and context (list :context (string-join (nreverse context) "\n\n")))
            (and stop (list :stop (string-join (nreverse stop) "\n")))
            (and message (list :message (string-join (nreverse message) "\n")))
            (and error (list :error (string-join (nreverse error) "\n")))
            (and permission (list :permission permission :permission-reason reason))
            (and has-updated (list :updated-input updated)))))

;;;; Running an event

(defun mevedel-hooks--workspace (session)
  "Return SESSION's workspace, or `default-directory' without one."
  (file-name-as-directory
   (expand-file-name (if (mevedel-session-p session)
                         (mevedel-session-workspace session)
                       default-directory))))

(defun mevedel-hooks--run-entries (event entries input session callback)
  "Run ENTRIES of EVENT in parallel with INPUT; CALLBACK gets the verdict.
Return a function that stops the commands still running."
  (let* ((json (mevedel-hooks--json input))
         (workspace (mevedel-hooks--workspace session))
         (left (length entries))
         (verdicts (make-vector (length entries) nil))
         (stoppers nil))
    (cl-loop
     for entry in entries
     for i from 0
     do (let ((i i) (entry entry))
          (let ((collect
                 (lambda (result)
                   (aset verdicts i (mevedel-hooks--verdict event entry result))
                   (when (zerop (cl-decf left))
                     (let ((verdict (mevedel-hooks--combine (append verdicts nil))))
                       (dolist (key '(:error :message))
                         (when-let* ((text (plist-get verdict key)))
                           (funcall mevedel-hooks-report-function text)))
                       (funcall callback verdict))))))
            (if (plist-get entry :function)
                (mevedel-hooks--run-function entry input collect)
              (push (mevedel-hooks--run-command entry json session workspace collect)
                    stoppers)))))
    (lambda () (mapc #'funcall stoppers))))

(defun mevedel-hooks-run (event input callback &optional session)
  "Run the hooks of EVENT with INPUT in SESSION; CALLBACK gets their verdict.
INPUT is the event's input plist (see `mevedel-hooks-input').  The
verdict is a plist: :block REASON (exit status 2, decision \"block\"),
:context TEXT (for the model), :stop REASON (continue false),
:permission `allow' or `ask' with :permission-reason, :updated-input
ARGS (PreToolUse), :message and :error (already told to the user).
It is nil when no hook applies.  CALLBACK runs synchronously then,
and when every matching hook is a Lisp function; otherwise later, once
every matching command finished.  Return a function that stops the
commands still running, or nil.

The agents runtime calls this for SubagentStart (INPUT with :agent_id
and :agent_type) and SubagentStop (also :stop_hook_active,
:agent_transcript_path and :last_assistant_message)."
  (let ((groups (mevedel-hooks--candidates (and (mevedel-session-p session)
                                                (mevedel-session-workspace session))
                                           event input))
        (stop nil) (stopped nil))
    (if (null groups)
        (progn (funcall callback nil) nil)
      (mevedel-hooks--trusted-entries
       groups
       (lambda (entries)
         ;; The same command from two sources runs once, as in Claude Code.
         (let ((entries (cl-remove-duplicates
                         entries :from-end t
                         :test (lambda (a b) (and (plist-get a :command)
                                                  (equal (plist-get a :command)
                                                         (plist-get b :command)))))))
           (cond (stopped nil)
                 ((null entries) (funcall callback nil))
                 (t (setq stop (mevedel-hooks--run-entries event entries input session
                                                           callback)))))))
      (lambda () (setq stopped t) (when stop (funcall stop))))))

(defun mevedel-hooks-any-p (session event)
  "Return non-nil when a hook of EVENT may apply in SESSION.
Matchers are not consulted: this is the cheap test before gathering
an event's input."
  (let ((any (lambda (entries) (cl-some (lambda (e) (eq (plist-get e :event) event)) entries))))
    (or (ignore-errors (funcall any (mevedel-hooks--entries-of mevedel-hooks nil)))
        (and (mevedel-session-p session)
             (cl-some (lambda (file) (funcall any (nth 1 (mevedel-hooks--file file))))
                      (mevedel-hooks--workspace-files (mevedel-session-workspace session)))))))

(defun mevedel-hooks--display (text)
  "Tell the user TEXT about a hook, as a warning (on stderr in batch)."
  (display-warning '(mevedel hooks) text))

;;;; Tool calls (the pipeline's hook variables)

(defun mevedel-hooks--tool-input (context &rest fields)
  "Return the input of a tool hook for the pipeline CONTEXT, plus FIELDS."
  (append (list :tool_name (plist-get context :name)
                :tool_input (or (plist-get context :args) (mevedel-tool-repair-json-empty-object)))
          fields
          (list :tool_use_id (or (plist-get context :tool-use-id) ""))))

(defun mevedel-hooks--await (event make-input context answer)
  "Return the pipeline's (:await START) for EVENT's hooks, or nil.
MAKE-INPUT returns the input, as for `mevedel-hooks-run': it is made
only when a hook could apply, as most tool calls have none and it costs
a fair part of a remote Read.  CONTEXT is the call's pipeline context;
ANSWER turns the verdict into the pipeline's answer plist.  Nil
\(nothing to wait for) when no hook of EVENT, a tool event, could apply."
  (let ((session (plist-get context :session)))
    (when (mevedel-hooks--candidates (and (mevedel-session-p session)
                                          (mevedel-session-workspace session))
                                     event (list :tool_name (plist-get context :name)))
      (let ((input (funcall make-input)))
        (list :await
              (lambda (resume)
                (let ((mevedel-hooks-call-context context))
                  (mevedel-hooks-run event input
                                     (lambda (verdict) (funcall resume (funcall answer verdict)))
                                     session))))))))

(defun mevedel-hooks-pre-tool-use (context)
  "Run the PreToolUse hooks for the pipeline call CONTEXT.
A member of `mevedel-pipeline-pre-tool-use-functions'."
  (let ((session (plist-get context :session)))
    (mevedel-hooks--await
     'PreToolUse
     (lambda ()
       (apply #'mevedel-hooks-input 'PreToolUse session (mevedel-hooks--tool-input context)))
     context
     (lambda (verdict)
       (mevedel-hooks--stop-turn 'PreToolUse context verdict)
       (append
        (when-let* ((text (plist-get verdict :context))) (list :context text))
        (cond
         ((plist-get verdict :stop) (list :deny (plist-get verdict :stop)))
         ((plist-get verdict :block) (list :deny (plist-get verdict :block)))
         (t (append
             (when (plist-member verdict :updated-input)
               (list :args (plist-get verdict :updated-input)))
             (when-let* ((permission (plist-get verdict :permission)))
               (list :permission permission
                     :permission-reason (plist-get verdict :permission-reason)))))))))))

(defun mevedel-hooks--result-value (result)
  "Return the tool RESULT as a hook's tool_response: text stays text."
  (cond ((stringp result) (substring-no-properties result))
        ((null result) "")
        (t (condition-case nil
               (progn (ignore (json-serialize result :null-object :null
                                              :false-object :json-false))
                      result)
             (error (prin1-to-string result))))))

(defun mevedel-hooks--stop-turn (event context verdict)
  "End the turn of the call CONTEXT if the VERDICT of EVENT's hooks is to stop."
  (when-let* ((reason (plist-get verdict :stop)))
    (funcall mevedel-hooks-report-function (format "A %s hook stopped the turn: %s" event reason))
    (run-hook-with-args 'mevedel-hooks-stop-turn-functions (plist-get context :session) reason
                        (plist-get context :data-buffer))))

(defun mevedel-hooks--post-answer (event context verdict)
  "Return the pipeline's answer to the post-tool VERDICT of EVENT for call CONTEXT."
  (mevedel-hooks--stop-turn event context verdict)
  (let ((texts (delq nil (list (plist-get verdict :context)
                               (when-let* ((text (plist-get verdict :block)))
                                 (format "%s hook feedback: %s" event text))
                               (when-let* ((text (plist-get verdict :stop)))
                                 (format "A %s hook asked to stop: %s" event text))))))
    (and texts (list :context (string-join texts "\n\n")))))

(defun mevedel-hooks-post-tool-use (context outcome)
  "Run the PostToolUse hooks for the call CONTEXT that ended with OUTCOME.
A member of `mevedel-pipeline-post-tool-use-functions'."
  (let ((session (plist-get context :session)))
    (mevedel-hooks--await
     'PostToolUse
     (lambda ()
       (apply #'mevedel-hooks-input 'PostToolUse session
              (mevedel-hooks--tool-input
               context :tool_response (mevedel-hooks--result-value (plist-get outcome :result)))))
     context
     (lambda (verdict) (mevedel-hooks--post-answer 'PostToolUse context verdict)))))

(defun mevedel-hooks-post-tool-use-failure (context outcome)
  "Run the PostToolUseFailure hooks for the call CONTEXT that failed with OUTCOME.
A member of `mevedel-pipeline-post-tool-use-failure-functions'."
  (let ((session (plist-get context :session)))
    (mevedel-hooks--await
     'PostToolUseFailure
     (lambda ()
       (apply #'mevedel-hooks-input 'PostToolUseFailure session
              (mevedel-hooks--tool-input
               context :error (mevedel-hooks--result-value (plist-get outcome :result))
               :is_interrupt :json-false)))
     context
     (lambda (verdict) (mevedel-hooks--post-answer 'PostToolUseFailure context verdict)))))

(add-hook 'mevedel-pipeline-pre-tool-use-functions #'mevedel-hooks-pre-tool-use)
(add-hook 'mevedel-pipeline-post-tool-use-functions #'mevedel-hooks-post-tool-use)
(add-hook 'mevedel-pipeline-post-tool-use-failure-functions
          #'mevedel-hooks-post-tool-use-failure)

;;;; Session events (called by mevedel-chat.el and mevedel-compaction.el)

(defun mevedel-hooks--context-key (owner)
  "Return the hook state key of the context waiting for OWNER.
OWNER is a child agent's path, or nil for the main conversation: each
agent reads only its own hooks' context."
  (if owner (intern (concat ":context" owner)) :context))

(defun mevedel-hooks--add-context (session event text &optional owner)
  "Keep TEXT from EVENT's hooks for the next request of OWNER in SESSION.
OWNER is as for `mevedel-hooks--context-key'."
  (when text
    (let ((key (mevedel-hooks--context-key owner)))
      (mevedel-hooks--put session key
                          (append (mevedel-hooks--get session key)
                                  (list (format "<hook-context event=\"%s\">\n%s\n</hook-context>"
                                                event text)))))))

(defun mevedel-hooks-prompt-context-p (block)
  "Return non-nil when context BLOCK came from a UserPromptSubmit hook."
  (string-prefix-p "<hook-context event=\"UserPromptSubmit\">" block))

(defun mevedel-hooks-context (session &optional owner)
  "Return the hook context blocks waiting for OWNER's next turn in SESSION.
OWNER is a child agent's path, or nil for the main conversation (whose
are SessionStart's too).  They stay until `mevedel-hooks-forget-context'
says the model read them."
  (mevedel-hooks--get session (mevedel-hooks--context-key owner)))

(defun mevedel-hooks-restore-context (session blocks owner)
  "Make BLOCKS the hook context waiting for OWNER's next turn in SESSION.
A resumed child agent gets back the context its saved record kept."
  (mevedel-hooks--put session (mevedel-hooks--context-key owner) blocks))

(defun mevedel-hooks-forget-context (session blocks &optional owner)
  "Forget BLOCKS, context of OWNER's hooks in SESSION that a request carried."
  (let ((key (mevedel-hooks--context-key owner)))
    (mevedel-hooks--put session key
                        (cl-remove-if (lambda (block) (memq block blocks))
                                      (mevedel-hooks--get session key)))))

(defun mevedel-hooks-session-start (session source &optional model)
  "Run SESSION's SessionStart hooks for SOURCE (\"startup\", \"resume\", ...).
MODEL names the session's model.  Their context goes with the next
turn; a prompt sent meanwhile waits for them."
  (mevedel-hooks--put session :starting (list 'running))
  (mevedel-hooks-run
   'SessionStart
   (mevedel-hooks-input 'SessionStart session :source source :model (or model ""))
   (lambda (verdict)
     (mevedel-hooks--add-context session 'SessionStart (plist-get verdict :context))
     (let ((waiting (cdr (mevedel-hooks--get session :starting))))
       (mevedel-hooks--put session :starting nil)
       (mapc #'funcall (nreverse waiting))))
   session))

(defun mevedel-hooks-prompt-submit (session prompt callback &optional owner)
  "Run SESSION's UserPromptSubmit hooks for PROMPT; CALLBACK gets the outcome.
The outcome is nil to send PROMPT (the hooks' context goes with it),
or the reason it is blocked (already told to the user).  CALLBACK runs
synchronously when no hook applies.  OWNER is the child agent's path
whose task PROMPT is (nil: the main conversation's): the context is
kept for its turn alone.  Return a function that stops the hooks;
CALLBACK is then never called."
  (let* ((stopped nil) (stop nil)
         (go (lambda ()
               (unless stopped
                 (mevedel-hooks--put session :stops 0)
                 (setq stop
                       (mevedel-hooks-run
                        'UserPromptSubmit
                        (mevedel-hooks-input 'UserPromptSubmit session :prompt prompt)
                        (lambda (verdict)
                          (let ((blocked (or (plist-get verdict :block) (plist-get verdict :stop))))
                            (if blocked
                                (funcall mevedel-hooks-report-function
                                         (format "A UserPromptSubmit hook blocked the prompt: %s" blocked))
                              (mevedel-hooks--add-context session 'UserPromptSubmit
                                                          (plist-get verdict :context) owner))
                            (funcall callback blocked)))
                        session))))))
    (if-let* ((starting (mevedel-hooks--get session :starting)))
        (setcdr starting (cons go (cdr starting)))
      (funcall go))
    (lambda () (setq stopped t) (when stop (funcall stop)))))

(defun mevedel-hooks-stop (session last-message callback)
  "Run SESSION's Stop hooks after a turn answered LAST-MESSAGE.
CALLBACK gets nil to let the turn end, or the reason to go on with,
which the model reads as the next instruction.  At most
`mevedel-hooks-stop-limit' continuations follow one prompt."
  (let ((stops (or (mevedel-hooks--get session :stops) 0)))
    (mevedel-hooks-run
     'Stop
     (mevedel-hooks-input 'Stop session
                          :stop_hook_active (if (> stops 0) t :json-false)
                          :last_assistant_message (or last-message ""))
     (lambda (verdict)
       (let ((reason (and (not (plist-get verdict :stop)) (plist-get verdict :block))))
         (when (and reason (>= stops mevedel-hooks-stop-limit))
           (funcall mevedel-hooks-report-function
                    (format "Stop hooks continued this prompt %d times; it ends now" stops))
           (setq reason nil))
         (when reason (mevedel-hooks--put session :stops (1+ stops)))
         (funcall callback reason)))
     session)))

;;;; Subagent events (called by the agents runtime)

(defun mevedel-hooks-subagent-start (session agent-id agent-type callback)
  "Run SESSION's SubagentStart hooks for the agent AGENT-ID of AGENT-TYPE.
Matchers select on AGENT-TYPE.  CALLBACK gets the context for the
agent's first request, or nil.  Return a function that stops them."
  (mevedel-hooks-run
   'SubagentStart
   (mevedel-hooks-input 'SubagentStart session :agent_id agent-id :agent_type agent-type)
   (lambda (verdict) (funcall callback (plist-get verdict :context)))
   session))

(defun mevedel-hooks-subagent-stop (session agent &rest details)
  "Run SESSION's SubagentStop hooks for AGENT, a plist (:id ID :type TYPE).
DETAILS: :transcript (the agent's transcript file) and :last-message
\(its last answer).  The hooks observe: a block does not send the
agent on, so its turn's RESULT is the one its parent gets.  Return a
function that stops the hooks."
  (mevedel-hooks-run
   'SubagentStop
   (mevedel-hooks-input 'SubagentStop session
                        :stop_hook_active :json-false
                        :agent_id (plist-get agent :id)
                        :agent_type (plist-get agent :type)
                        :agent_transcript_path (or (plist-get details :transcript) "")
                        :last_assistant_message (or (plist-get details :last-message) ""))
   #'ignore
   session))

(provide 'mevedel-hooks)
;;; mevedel-hooks.el ends here
