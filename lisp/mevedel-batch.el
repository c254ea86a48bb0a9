;;; mevedel-batch.el --- Headless runs: one turn, printed answer or JSON  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The command line
;;
;;   `emacs --batch -l mevedel -f mevedel-batch-run -- -p PROMPT [OPTIONS]'
;;
;; (or the bin/mevedel wrapper) runs one session turn to completion
;; with the configured gptel backend and prints the final answer, or
;; with --json a JSON transcript: the messages, and every tool call
;; with its ID, arguments, status and a result preview.
;;
;; Options:
;;   -p, --prompt TEXT         the user's message (required, unless --goal)
;;   --goal OBJECTIVE          work toward OBJECTIVE across turns until the
;;                             goal-review verifier agrees it is done
;;                             (mevedel-goal.el); instead of -p
;;   --goal-budget 2$|500k     the Goal's cost (dollars) or token budget
;;   --goal-turns N            the Goal's root turns, the first included
;;   --goal-time 30m           the Goal's wall time
;;   --json                    print a JSON transcript instead of the answer
;;   --dir DIR                 workspace directory (default: the current one);
;;                             a TRAMP name (/ssh:HOST:/path, /docker:...)
;;                             works on that host (docs/remote.md); it is
;;                             checked after --config, where TRAMP's
;;                             settings live
;;   --lease POLICY            a remote workspace another session writes:
;;                             fail (default), wait, take-over (once
;;                             stale) or read-only
;;   --permission-mode MODE    ask (default), edits, full-auto or plan
;;   --config FILE             load FILE first (gptel backend settings);
;;                             default $MEVEDEL_INIT, else
;;                             ~/.config/mevedel/init.el when it exists
;;   --demo                    talk to the offline demo model
;;   --provider NAME           answer with NAME instead of gptel: an ACP
;;                             agent of `mevedel-acp-agents' (claude-code,
;;                             codex, gemini; mevedel-acp.el); a continued
;;                             session moves to it (without it, it keeps
;;                             the provider it was saved with)
;;   --timeout SECONDS         give up after SECONDS (default 600)
;;   -c, --continue            continue the workspace's most recent session
;;   -r, --resume ID           continue the saved session ID
;;   --fork                    with --continue or --resume: continue in a
;;                             fork of that session (a new session copied
;;                             from it), which is left as it was
;;   --list-sessions           list the workspace's saved sessions and exit
;;                             (with --json: a JSON array)
;;   --trust-hooks             run the workspace's hook files as they are
;;                             when the run starts, approved or not
;;   --mcp-config FILE         also read MCP servers from FILE (trusted,
;;                             this run; may be given more than once)
;;   --trust-mcp               start the servers of the workspace's
;;                             .mcp.json, approved or not (this run)
;;   -h, --help                print the usage and exit
;;
;; Every run saves its session (see `mevedel-save-sessions'); the
;; JSON transcript names it under "session" (with --fork, the fork),
;; with the token usage under "usage": the session's sums and cost
;; (`mevedel-usage-json': input_tokens, the input neither read from nor
;; written to the cache, cache_read_tokens, cache_write_tokens,
;; output_tokens, reasoning_tokens, cost_usd, cost_complete), the same
;; for this run's turn under "turn", and each request of the turn as
;; its provider reported it under "requests".  --list-sessions shows
;; each session's cost (with --json, its sums under "usage").
;;
;; One process writes a session (mevedel-session.el, "Ownership"): a
;; session another process has open (an Emacs, another headless run)
;; is not continued.  The run exits with status 2 and says "session
;; ID is in use by process PID" on stderr; --fork continues in a fork
;; of it instead.
;;
;; The JSON transcript is UTF-8.  Its "unknown_tools" lists the tools
;; the model called that its catalog does not have (each name once, in
;; the order of first call; [] when none): each call was answered with
;; an error and the turn went on, so such a run may still end `done'.
;; A ToolCall program naming a tool the catalog lacks counts too (see
;; `mevedel-ptc--note-unknown-tool'); the calls of child agents are
;; theirs, not the run's.  stderr names each such tool once ("mevedel:
;; the model called unknown tool NAME"), with or without --json.
;; A failed sample that is retried says
;; so on stderr ("...; retrying in 4 s (3/10)"); a failed turn's
;; `error' names what failed.
;;
;; With --goal the run lasts until the Goal ends: the verifier passed it
;; (`complete'), the model said it is `blocked', a budget ran out
;; (`budget'), or a turn failed or the run timed out (`interrupted').
;; The JSON transcript (of the Goal's turns) then has a "goal" object:
;; outcome, verdicts (each verifier verdict, in order), turns and
;; usage; the exit status is 0 only for `complete'.
;;
;; Nobody can answer a permission question in a headless run: a call
;; that would ask is refused (the model is told so), and a turn whose
;; every call was refused ends with the outcome `refused'.  Exit status
;; (`mevedel-batch-usage-text'): 0 when the turn completed, 1 when it
;; failed, timed out or had every call refused, 2 for a usage or
;; configuration error or a session in use, 130 when interrupted
;; (bin/mevedel; Emacs itself exits with 2 on SIGINT in batch mode).
;;
;; Nobody can approve a workspace hook file either (mevedel-hooks.el):
;; an unapproved one is skipped with one line on stderr naming it,
;; unless --trust-hooks is given.  A prompt a UserPromptSubmit hook
;; blocks ends the run with the outcome `blocked' and status 1.
;;
;; In Plan mode (--permission-mode plan) the model explores read-only
;; and may propose a plan with ProposePlan.  Nobody can approve it
;; here: the plan is printed before the answer (with --json, under
;; "plan"), and continuing the session outside Plan mode implements it.
;;
;; The "--" keeps Emacs's own start-up from reading the options (it
;; would take an abbreviated --init-directory, for one).

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'mevedel-acp)
(require 'mevedel-catalog)
(require 'mevedel-chat)
(require 'mevedel-goal)
(require 'mevedel-history)
(require 'mevedel-permissions)
(require 'mevedel-session-list)
(require 'mevedel-recovery)
(require 'mevedel-remote)
(require 'mevedel-tool-render)
(require 'mevedel-usage)

(declare-function mevedel-demo-attach "mevedel-demo")
(defvar native-comp-enable-subr-trampolines)
(declare-function mevedel-demo-backend-usable-p "mevedel-demo")

(defcustom mevedel-batch-preview-chars 2000
  "Longest result preview in a JSON transcript."
  :type 'natnum
  :group 'mevedel)

(define-error 'mevedel-batch-usage "Usage error")

(defconst mevedel-batch-usage-text
  "Usage: mevedel -p PROMPT [OPTIONS]
       mevedel --goal OBJECTIVE [--goal-budget 2$] [--goal-turns N] [--goal-time 30m]
               [OPTIONS]
       mevedel --list-sessions [--json] [--dir DIR]

Run one turn of a mevedel session headless and print the answer (with
--goal, every turn of the Goal until it ends).

Options:
  -p, --prompt TEXT        the user's message
  --goal OBJECTIVE         work toward OBJECTIVE across turns until a verifier
                           agrees it is done (instead of -p)
  --goal-budget BUDGET     the Goal's cost (2$) or tokens (500k)
  --goal-turns N           the Goal's root turns, the first included
  --goal-time TIME         the Goal's wall time (30m, 90s, 2h)
  --json                   print a JSON transcript instead of the answer
  --dir DIR                workspace directory (default: the current one);
                           /ssh:HOST:/path and other TRAMP names work there
  --lease POLICY           when another session writes that remote workspace:
                           fail (default), wait, take-over (once stale) or
                           read-only
  --permission-mode MODE   ask (default), edits, full-auto or plan; calls that
                           would ask are refused, nobody can answer them
  --config FILE            Elisp setting gptel-backend and gptel-model
                           (default: $MEVEDEL_INIT, else
                           ~/.config/mevedel/init.el when it exists)
  --demo                   talk to the offline demo model
  --provider NAME          answer with an ACP agent instead of gptel:
                           claude-code, codex, gemini (`mevedel-acp-agents');
                           moves a continued session to NAME (gptel too)
  --timeout SECONDS        give up after SECONDS (default 600)
  -c, --continue           continue the workspace's most recent session
  -r, --resume ID          continue the saved session ID
  --fork                   with --continue or --resume: continue in a new
                           session copied from that one, which may be in use
  --list-sessions          list the workspace's saved sessions and their cost
  --trust-hooks            run the workspace's hook files (.mevedel/hooks.el,
                           .claude/settings.json) as they are now, unapproved
  --mcp-config FILE        also read MCP servers (Claude Code's mcpServers
                           JSON) from FILE, trusted, for this run; repeatable
  --trust-mcp              start the servers of the workspace's .mcp.json
                           for this run, approved or not
  -h, --help               print this and exit

Exit status: 0 done (with --goal: the Goal complete), 1 the turn failed,
timed out, was blocked by a hook or had every tool call refused (with --goal:
any other outcome), 2 usage or configuration error or the session
is in use by another process, 130 interrupted.
"
  "What `bin/mevedel --help' prints.")

(defun mevedel-batch--usage-error (format-string &rest args)
  "Signal a usage error with the message FORMAT-STRING formatted with ARGS."
  (signal 'mevedel-batch-usage (list (apply #'format format-string args))))

(defun mevedel-batch--argument-text (arg)
  "Return the command-line ARG as text.
Emacs decodes arguments with the locale's coding system; without one
\(the C locale) they stay bytes, which are taken as UTF-8."
  (if (multibyte-string-p arg) arg (decode-coding-string arg 'utf-8)))

(defun mevedel-batch--parse-args (args)
  "Return a plist of options parsed from the command-line ARGS."
  (let ((options (list :json nil :dir nil :mode nil :init nil :demo nil :timeout 600
                       :continue nil :resume nil :fork nil :list nil)))
    (while args
      (let ((arg (pop args)))
        (cl-flet ((value ()
                    (or (pop args)
                        (mevedel-batch--usage-error "%s needs a value" arg))))
          (pcase arg
            ((or "-p" "--prompt")
             (setq options (plist-put options :prompt (mevedel-batch--argument-text (value)))))
            ("--json" (setq options (plist-put options :json t)))
            ("--goal"
             (setq options (plist-put options :goal (mevedel-batch--argument-text (value)))))
            ("--goal-budget"
             (setq options (plist-put options :goal-budgets
                                      (append (plist-get options :goal-budgets)
                                              (mevedel-batch--goal-value
                                               #'mevedel-goal-parse-budget arg (value))))))
            ("--goal-turns"
             (setq options (plist-put options :goal-budgets
                                      (append (plist-get options :goal-budgets)
                                              (list :turns (mevedel-batch--goal-value
                                                            #'mevedel-goal-parse-turns arg
                                                            (value)))))))
            ("--goal-time"
             (setq options (plist-put options :goal-budgets
                                      (append (plist-get options :goal-budgets)
                                              (list :seconds (mevedel-batch--goal-value
                                                              #'mevedel-goal-parse-time arg
                                                              (value)))))))
            ("--dir" (setq options (plist-put options :dir (value))))
            ("--permission-mode"
             (let ((mode (intern (value))))
               (unless (memq mode mevedel-permissions-modes)
                 (mevedel-batch--usage-error
                  "Unknown permission mode %s (ask, edits, full-auto or plan)" mode))
               (setq options (plist-put options :mode mode))))
            ("--config" (setq options (plist-put options :init (value))))
            ("--demo" (setq options (plist-put options :demo t)))
            ("--provider" (setq options (plist-put options :provider (value))))
            ((or "-c" "--continue") (setq options (plist-put options :continue t)))
            ((or "-r" "--resume") (setq options (plist-put options :resume (value))))
            ("--fork" (setq options (plist-put options :fork t)))
            ("--lease"
             (let ((policy (value)))
               (unless (member policy '("fail" "wait" "take-over" "read-only"))
                 (mevedel-batch--usage-error
                  "--lease needs fail, wait, take-over or read-only, not %s" policy))
               (setq options (plist-put options :lease (intern policy)))))
            ("--list-sessions" (setq options (plist-put options :list t)))
            ("--trust-hooks" (setq options (plist-put options :trust-hooks t)))
            ("--trust-mcp" (setq options (plist-put options :trust-mcp t)))
            ("--mcp-config"
             (let ((file (expand-file-name (value))))
               (unless (file-readable-p file)
                 (mevedel-batch--usage-error "--mcp-config %s is not a readable file" file))
               (setq options (plist-put options :mcp-config
                                        (append (plist-get options :mcp-config)
                                                (list file))))))
            ("--timeout"
             (let ((seconds (string-to-number (value))))
               (unless (> seconds 0)
                 (mevedel-batch--usage-error "--timeout needs a positive number"))
               (setq options (plist-put options :timeout seconds))))
            ;; Help wins over whatever follows it.
            ((or "-h" "--help") (setq options (plist-put options :help t) args nil))
            ("--" nil)
            (_ (mevedel-batch--usage-error "Unknown argument %s (see --help)" arg))))))
    (unless (plist-get options :help)
      (when (and (plist-get options :goal) (plist-get options :prompt))
        (mevedel-batch--usage-error "--goal OBJECTIVE is the first prompt: give it or -p, not both"))
      (when (and (plist-get options :goal-budgets) (not (plist-get options :goal)))
        (mevedel-batch--usage-error "--goal-budget, --goal-turns and --goal-time need --goal"))
      (when (and (plist-get options :goal) (string-blank-p (plist-get options :goal)))
        (mevedel-batch--usage-error "--goal needs an objective")))
    (unless (or (plist-get options :prompt) (plist-get options :goal)
                (plist-get options :list) (plist-get options :help))
      (mevedel-batch--usage-error "Missing -p PROMPT (see --help)"))
    (when (and (plist-get options :continue) (plist-get options :resume))
      (signal 'mevedel-batch-usage (list "Use --continue or --resume ID, not both")))
    (when (and (plist-get options :fork)
               (not (or (plist-get options :continue) (plist-get options :resume))))
      (mevedel-batch--usage-error "--fork needs --continue or --resume ID"))
    options))

(defun mevedel-batch--goal-value (parse option text)
  "Return TEXT, the value of the Goal OPTION, read by PARSE.
A value PARSE refuses is a usage error."
  (condition-case err
      (funcall parse text)
    (user-error (mevedel-batch--usage-error "%s: %s" option (error-message-string err)))))

(defun mevedel-batch--session (root options)
  "Return the saved session ID OPTIONS ask to resume in ROOT, or nil.
With --fork, that is a new fork of the session asked for.  Signal a
usage error when the session asked for does not exist."
  (let ((id (mevedel-batch--session-asked root options)))
    (if (and id (plist-get options :fork))
        (mevedel-session-list-fork root id)
      id)))

(defun mevedel-batch--session-asked (root options)
  "Return the saved session ID OPTIONS name in ROOT, or nil.
Signal a usage error when it does not exist."
  (cond
   ((plist-get options :resume)
    (let ((id (plist-get options :resume)))
      (unless (assoc id (mevedel-session-saved root))
        (signal 'mevedel-batch-usage
                (list (format "No saved session %s in %s (see --list-sessions)" id root))))
      id))
   ((plist-get options :continue)
    ;; --demo continues the latest demo session, else the latest other one.
    (or (mevedel-session-latest root (plist-get options :demo))
        (signal 'mevedel-batch-usage
                (list (format "No saved session to continue in %s" root)))))))

(defun mevedel-batch-sessions (root)
  "Return ROOT's saved sessions as a list of plists, newest first."
  (mapcar (lambda (entry)
            (let ((info (cdr entry)))
              (cl-flet ((get (key) (cdr (assoc key info)))
                        (num (key) (string-to-number (or (cdr (assoc key info)) "0"))))
                (list :id (car entry)
                      :title (get "title")
                      :created (num "created")
                      :updated (num "updated")
                      :turns (num "turns")
                      :backend (get "backend")
                      :model (get "model")
                      :chars (num "chars")
                      :usage (mevedel-usage-json (mevedel-usage-read info))
                      :error (get "error")))))
          (mevedel-session-saved root)))

(defun mevedel-batch-list-sessions (options)
  "Return the output listing the saved sessions of OPTIONS' workspace."
  (let* ((root (mevedel-chat-workspace-root (or (plist-get options :dir) default-directory)))
         (sessions (mevedel-batch-sessions root)))
    (if (plist-get options :json)
        (concat (decode-coding-string
                 (json-serialize (vconcat (mapcar #'mevedel-batch--json-object sessions)))
                 'utf-8 t)
                "\n")
      (mapconcat (lambda (session)
                   (format "%s  %s  %3d turns  %9s  %s\n"
                           (plist-get session :id)
                           (format-time-string "%F %R" (/ (plist-get session :updated) 1000.0))
                           (plist-get session :turns)
                           (let* ((usage (plist-get session :usage))
                                  (cost (plist-get usage :cost_usd)))
                             (if (numberp cost)
                                 (mevedel-usage-format-dollars
                                  cost (not (eq (plist-get usage :cost_complete) t)))
                               "?"))
                           (or (plist-get session :title) "")))
                 sessions ""))))

(defun mevedel-batch--config-file (options)
  "Return the init file named by OPTIONS or the environment, or nil."
  (or (plist-get options :init)
      (let ((env (getenv "MEVEDEL_INIT")))
        (and env (not (string-empty-p env)) env))
      (let ((default (expand-file-name
                      "mevedel/init.el"
                      (or (getenv "XDG_CONFIG_HOME") (expand-file-name "~/.config")))))
        (and (file-exists-p default) default))))

;;;; The transcript

(defun mevedel-batch--json-value (value)
  "Return VALUE (decoded tool arguments) in a form `json-serialize' accepts."
  (cond ((memq value '(:json-false :false)) :false)
        ((eq value t) t)
        ((or (null value) (eq value :null)) :null)
        ((hash-table-p value)
         (let ((table (make-hash-table :test #'equal)))
           (maphash (lambda (k v) (puthash (format "%s" k) (mevedel-batch--json-value v) table))
                    value)
           table))
        ((stringp value) (mevedel-batch--json-string value))
        ((numberp value) value)
        ((keywordp value) (substring (symbol-name value) 1))
        ((symbolp value) (symbol-name value))
        ((vectorp value) (vconcat (mapcar #'mevedel-batch--json-value value)))
        ((and (consp value) (keywordp (car value)))
         (mevedel-batch--json-object value))
        ((consp value) (vconcat (mapcar #'mevedel-batch--json-value value)))
        (t (format "%S" value))))

(defun mevedel-batch--json-string (string)
  "Return STRING with raw bytes replaced by U+FFFD, as JSON needs Unicode."
  (if (cl-some (lambda (char) (> char #x3fff7f)) string)
      (concat (mapcar (lambda (char) (if (> char #x3fff7f) #xfffd char)) string))
    string))

(defun mevedel-batch--json-object (plist)
  "Return PLIST as a hash table for `json-serialize'."
  (let ((table (make-hash-table :test #'equal)))
    (cl-loop for (key value) on plist by #'cddr
             do (puthash (substring (symbol-name key) 1)
                         (mevedel-batch--json-value value) table))
    table))

(defun mevedel-batch--preview (text)
  "Return TEXT cut to `mevedel-batch-preview-chars'."
  (if (> (length text) mevedel-batch-preview-chars)
      (concat (substring text 0 mevedel-batch-preview-chars)
              (format "… [%d more characters]" (- (length text) mevedel-batch-preview-chars)))
    text))

(defun mevedel-batch-transcript (chat outcome &optional unknown-tools start)
  "Return the transcript of CHAT's last turn, ended with OUTCOME, as a plist.
START, a marker, makes it the transcript of the turns from there on
instead (a Goal's).
Keys: :messages (user, assistant and tool entries in order; an
assistant entry cut by a failed request has :incomplete t),
:tool-calls, :unknown_tools (the list UNKNOWN-TOOLS: tools the model
called that it does not have), :answer (the last assistant text),
:plan (a plan the model proposed in Plan mode, which nobody could
approve here) and
:error."
  (let ((segments (when-let* ((start (or start (mevedel-chat-turn-start chat))))
                    ;; No turn started when the run timed out in its
                    ;; prompt's hooks.
                    (mevedel-history-segments (mevedel-chat-data-buffer chat)
                                              (marker-position start))))
        messages calls answer)
    (dolist (segment segments)
      (pcase (plist-get segment :type)
        ('user (push (list :role "user" :content (plist-get segment :text)) messages))
        ('response
         (let ((text (string-trim (plist-get segment :text))))
           (setq answer text)
           (push (append (list :role "assistant" :content text)
                         (and (plist-get segment :incomplete) (list :incomplete t)))
                 messages)))
        ('tool
         (let* ((result (plist-get segment :result))
                (call (list :id (plist-get segment :id)
                            :name (plist-get segment :name)
                            :args (plist-get segment :args)
                            :status (symbol-name (mevedel-tool-render-status
                                                  result (plist-get segment :render-data)))
                            :result_preview (mevedel-batch--preview result))))
           (push call calls)
           (push (append (list :role "tool") call) messages)))
        ('notice (push (list :role "notice" :content (plist-get segment :text)) messages))))
    (list :outcome (symbol-name outcome)
          :session (mevedel-session-id (mevedel-chat-session chat))
          :usage (pcase-let ((`(,tokens ,window ,estimated) (mevedel-chat-context-usage chat))
                             (turn (mevedel-usage-turn-records chat)))
                   (append (mevedel-usage-json (mevedel-usage-records chat))
                           (list :context_tokens tokens
                                 :context_window window
                                 :context_estimated (if estimated t :json-false)
                                 :turn (mevedel-usage-json turn)
                                 :requests (vconcat (mapcar #'mevedel-usage-record-json
                                                            (reverse turn))))))
          :workspace (mevedel-chat-root chat)
          :backend (if-let* ((agent (mevedel-acp-chat-provider chat)))
                       (format "%s" agent)
                     (gptel-backend-name (mevedel-chat-backend-effective chat)))
          :model (if (mevedel-acp-chat-provider chat)
                     (or (mevedel-acp-chat-model chat) :null)
                   (format "%s" (mevedel-chat-model-effective chat)))
          :agent (or (mevedel-acp-chat-agent-info chat) :null)
          :messages (nreverse messages)
          :tool_calls (nreverse calls)
          :unknown_tools (vconcat unknown-tools)
          :answer (if (eq outcome 'done) answer nil)
          :plan (mevedel-plan-unattended (mevedel-chat-session chat))
          :error (and (not (eq outcome 'done))
                      (or (mevedel-chat-status-detail chat) (symbol-name outcome))))))

(defun mevedel-batch-transcript-json (transcript)
  "Return TRANSCRIPT (from `mevedel-batch-transcript') as a JSON string.
The string is text, not `json-serialize''s UTF-8 bytes: printed, bytes
would reach stdout as Emacs's raw-byte characters, encoded twice."
  (let ((object (make-hash-table :test #'equal)))
    (cl-loop for (key value) on transcript by #'cddr
             do (puthash (substring (symbol-name key) 1)
                         (pcase key
                           ((or :messages :tool_calls)
                            (vconcat
                             (mapcar (lambda (entry)
                                       (let ((table (make-hash-table :test #'equal)))
                                         (cl-loop for (k v) on entry by #'cddr
                                                  do (puthash (substring (symbol-name k) 1)
                                                              (if (eq k :args)
                                                                  (mevedel-batch--json-object v)
                                                                (mevedel-batch--json-value v))
                                                              table))
                                         table))
                                     value)))
                           (_ (mevedel-batch--json-value value)))
                         object))
    (decode-coding-string (json-serialize object) 'utf-8 t)))

;;;; Running

(defun mevedel-batch--report-retry (event _chat &rest args)
  "Report EVENT with ARGS on stderr when it is a retry of a failed sample."
  (when (eq event 'retry)
    (message "mevedel: %s; %s" (plist-get (car args) :message)
             (mevedel-recovery-describe (car args)))))

(defconst mevedel-batch--main-arguments
  '(:pattern :command :file_path :path :query :url :form :name :task_name :message)
  "Arguments that say what a tool call is about, in order of preference.")

(defun mevedel-batch--shorten (text width)
  "Return TEXT on one line, at most WIDTH characters."
  (truncate-string-to-width (replace-regexp-in-string "[\n\t ]+" " " text) width nil nil "…"))

(defun mevedel-batch-progress-line (record)
  "Return the stderr line telling of the settled tool call RECORD.
It is the tool's name, what the call is about (its first telling
argument) and what came of it: `Grep \"defun\" … 21 lines'."
  (let* ((args (plist-get record :args))
         (about (cl-loop for key in mevedel-batch--main-arguments
                         for value = (plist-get args key)
                         when (and (stringp value) (not (string-empty-p value)))
                         return value))
         (result (string-trim-right (or (plist-get record :result) "")))
         (lines (if (string-empty-p result) 0 (1+ (cl-count ?\n result)))))
    (concat (or (plist-get record :name) "?")
            (if about (concat " " (prin1-to-string (mevedel-batch--shorten about 60))) "")
            " … "
            (pcase (mevedel-tool-render-status result nil)
              ('denied "refused")
              ('error (concat "failed: " (mevedel-batch--shorten result 80)))
              (_ (format "%d line%s" lines (if (= lines 1) "" "s")))))))

(defun mevedel-batch--progress (event _chat &rest args)
  "Report EVENT with ARGS of a headless turn on stderr, one line per call."
  (when (eq event 'tool-results)
    (dolist (record (car args))
      (message "%s" (mevedel-batch-progress-line record)))))

(defun mevedel-batch-run-turn (options)
  "Run one turn described by OPTIONS.
Return a plist: :status (the exit status), :output (what to print)
and :error (a message, or nil)."
  (let* ((root (mevedel-chat-workspace-root (or (plist-get options :dir) default-directory)))
         (mevedel-hooks-trust-workspace (if (plist-get options :trust-hooks)
                                            (mevedel-hooks-trust-snapshot root)
                                          mevedel-hooks-trust-workspace))
         (mevedel-mcp-trust-workspace (or (plist-get options :trust-mcp)
                                          mevedel-mcp-trust-workspace))
         (mevedel-mcp-command-line-files (append mevedel-mcp-command-line-files
                                                 (plist-get options :mcp-config)))
         (mevedel-provider (mevedel-batch--provider options))
         (chat (mevedel-chat-get-create root (mevedel-batch--session root options)))
         (outcome nil)
         (unknown-tools nil)
         (deadline (+ (float-time) (plist-get options :timeout))))
    (mevedel-batch--open-storage chat)
    (when (plist-get options :mode)
      (setf (mevedel-chat-permission-mode chat) (plist-get options :mode)))
    (when (plist-get options :provider)
      (mevedel-batch--place chat mevedel-provider))
    (require 'mevedel-demo)
    (if (plist-get options :demo)
        (mevedel-demo-attach chat 'headless)
      (unless (or (mevedel-acp-chat-provider chat) (mevedel-demo-backend-usable-p))
        (signal 'mevedel-batch-usage
                (list "No usable gptel backend: set `gptel-backend' (and its key) in a \
config file (--config FILE, $MEVEDEL_INIT or ~/.config/mevedel/init.el), or use --demo"))))
    (mevedel-chat-observe chat #'mevedel-batch--report-retry)
    (mevedel-chat-observe chat (lambda (event _chat &optional name &rest _)
                                 (when (and (eq event 'unknown-tool)
                                            (not (member name unknown-tools)))
                                   (message "mevedel: the model called unknown tool %s" name)
                                   (setq unknown-tools (append unknown-tools (list name))))))
    (unless (plist-get options :json)
      (mevedel-chat-observe chat #'mevedel-batch--progress))
    (if (plist-get options :goal)
        (let ((goal (mevedel-goal-start chat (plist-get options :goal)
                                        (plist-get options :goal-budgets)))
              (start (mevedel-chat-turn-start chat)))
          (mevedel-chat-observe chat (lambda (event _chat &rest args)
                                       (when (eq event 'turn-end) (setq outcome (car args)))))
          (while (and (not (mevedel-batch--goal-over-p chat goal)) (< (float-time) deadline))
            (accept-process-output nil 0.05))
          (mevedel-batch--goal-result chat goal (and (not (mevedel-chat-busy-p chat)) outcome)
                                      options unknown-tools start))
      (mevedel-chat-send chat (plist-get options :prompt)
                         :on-done (lambda (_chat result) (setq outcome result)))
      (while (and (not outcome) (< (float-time) deadline))
        (accept-process-output nil 0.05))
      (if (eq outcome 'blocked)
          (mevedel-batch--blocked chat options)
        (mevedel-batch--result chat outcome options unknown-tools)))))

(defun mevedel-batch--open-storage (chat)
  "Open the storage of CHAT's session now, or fail the run saying why.
A run saves its session; a store that cannot be opened (a remote
workspace's state directory unwritable, say) would otherwise only warn
once the turn is under way."
  (let ((session (mevedel-chat-session chat)))
    (when (and mevedel-save-sessions (mevedel-session-durable-p session))
      (condition-case err
          (mevedel-session-ensure-storage session)
        (mevedel-session-locked (signal (car err) (cdr err)))
        (error (error "Cannot open the storage of session %s (%s): %s"
                      (mevedel-session-id session) (mevedel-session-directory session)
                      (error-message-string err)))))))

(defun mevedel-batch--goal-over-p (chat goal)
  "Return non-nil when GOAL of CHAT stopped and no work of it is left."
  (and (not (eq (mevedel-goal-state goal) 'active))
       (not (mevedel-goal-review goal))
       (not (mevedel-chat-busy-p chat))))

(defun mevedel-batch--goal-outcome (goal)
  "Return the outcome of the headless GOAL that stopped: a string."
  (pcase (mevedel-goal-state goal)
    ('complete "complete")
    ('blocked "blocked")
    ('cancelled "cancelled")
    (_ (if (mevedel-goal-exhausted goal) "budget" "interrupted"))))

(defun mevedel-batch--goal-result (chat goal outcome options unknown-tools start)
  "Return the result of the run of CHAT's GOAL, whose first turn began at START.
OUTCOME is how the last turn ended (nil: the run timed out); OPTIONS
and UNKNOWN-TOOLS are as for `mevedel-batch--result'."
  (unless outcome
    (mevedel-chat-abort chat)
    (mevedel-goal-pause chat (format "the run timed out after %s seconds"
                                     (plist-get options :timeout)))
    (setq outcome 'error))
  (let* ((goal-outcome (mevedel-batch--goal-outcome goal))
         (used (mevedel-goal-usage chat goal))
         (usage (plist-get used :usage))
         (transcript (mevedel-batch-transcript chat outcome unknown-tools start))
         (why (unless (equal goal-outcome "complete")
                (format "the Goal ended %s: %s" goal-outcome
                        (or (mevedel-goal-reason goal) goal-outcome)))))
    (setq transcript
          (plist-put transcript :goal
                     (list :outcome goal-outcome
                           :objective (mevedel-goal-objective goal)
                           :reason (mevedel-goal-reason goal)
                           :verdicts (vconcat (mevedel-goal-verdicts goal))
                           :turns (mevedel-goal-turns goal)
                           :usage (list :input_tokens (plist-get usage :input)
                                        :output_tokens (plist-get usage :output)
                                        :cache_read_tokens (plist-get usage :cache-read)
                                        :cache_write_tokens (plist-get usage :cache-write)
                                        :tokens (plist-get used :tokens)
                                        :cost_usd (plist-get used :cost)
                                        :seconds (round (plist-get used :seconds))))))
    (list :status (if (equal goal-outcome "complete") 0 1)
          :outcome "goal"
          :error why
          :output (if (plist-get options :json)
                      (concat (mevedel-batch-transcript-json transcript) "\n")
                    (when-let* ((answer (plist-get transcript :answer)))
                      (concat answer "\n"))))))

(defun mevedel-batch--provider (options)
  "Return the provider OPTIONS ask for (--provider), else `mevedel-provider'.
An agent `mevedel-acp-agents' does not name is a usage error."
  (if-let* ((name (plist-get options :provider)))
      (let ((provider (intern name)))
        (unless (or (eq provider 'gptel) (mevedel-acp-agent-config provider))
          (mevedel-batch--usage-error "Unknown provider %s (gptel or one of: %s)" name
                                      (mapconcat (lambda (entry) (symbol-name (car entry)))
                                                 mevedel-acp-agents ", ")))
        provider)
    mevedel-provider))

(defun mevedel-batch--place (chat provider)
  "Have PROVIDER, named by --provider, answer CHAT over the one saved with it.
A continued session keeps its placement otherwise, so the command
line has to say so to move it; a new session already follows
`mevedel-provider'."
  (unless (eq (or (mevedel-acp-chat-provider chat) 'gptel) provider)
    (if (eq provider 'gptel)
        (setf (mevedel-chat-placement chat) (list 'gptel))
      (mevedel-acp-place chat provider))))

(defun mevedel-batch--blocked (chat options)
  "Return the result of a run whose prompt a hook blocked in CHAT.
OPTIONS are the run's; the reason is the run's error."
  (let ((reason (format "a UserPromptSubmit hook blocked the prompt: %s"
                        (mevedel-chat-status-detail chat))))
    (list :status 1 :outcome "blocked" :error reason
          :output (if (plist-get options :json)
                      (concat (mevedel-batch-transcript-json
                               (list :outcome "blocked" :error reason :unknown_tools []
                                     :session (mevedel-session-id (mevedel-chat-session chat))))
                              "\n")
                    ""))))

(defun mevedel-batch--result (chat outcome options unknown-tools)
  "Return the result of CHAT's turn that ended with OUTCOME (nil: it timed out).
OPTIONS are the run's; UNKNOWN-TOOLS the tools the model called that
it does not have."
  (unless outcome
    (mevedel-chat-abort chat)
    (setf (mevedel-chat-status-detail chat)
          (format "timed out after %s seconds" (plist-get options :timeout)))
    (setq outcome 'error))
  (let ((transcript (mevedel-batch-transcript chat outcome unknown-tools)))
    (when (and (eq outcome 'done) (mevedel-batch--all-refused-p transcript))
      (setq transcript (mevedel-batch--refused transcript)))
    (list :status (if (equal (plist-get transcript :outcome) "done") 0 1)
          :outcome (plist-get transcript :outcome)
          :error (plist-get transcript :error)
          :output (if (plist-get options :json)
                      (concat (mevedel-batch-transcript-json transcript) "\n")
                    (concat (when-let* ((plan (plist-get transcript :plan)))
                              (concat plan "\n\n"))
                            (when-let* ((answer (plist-get transcript :answer)))
                              (concat answer "\n")))))))

(defun mevedel-batch--all-refused-p (transcript)
  "Return non-nil when every tool call of TRANSCRIPT was refused (and it has some)."
  (let ((calls (plist-get transcript :tool_calls)))
    (and calls (cl-every (lambda (call) (equal (plist-get call :status) "denied")) calls))))

(defun mevedel-batch--refused (transcript)
  "Return TRANSCRIPT with the outcome `refused' and an error saying why.
Its answer stays: the model may say what it could not do."
  (let ((transcript (copy-sequence transcript)))
    (setq transcript (plist-put transcript :outcome "refused"))
    (plist-put transcript :error
               (format "every tool call was refused (%d): a headless run cannot ask, so calls \
that would ask are refused; allow them with --permission-mode edits or full-auto, or with \
`mevedel-permissions-rules' in the config file"
                       (length (plist-get transcript :tool_calls))))))

(define-error 'mevedel-batch-config "Configuration error")

(defun mevedel-batch--syntax-line (file)
  "Return the line of the first unbalanced bracket or string in FILE, or nil."
  (with-temp-buffer
    (insert-file-contents file)
    (with-syntax-table emacs-lisp-mode-syntax-table
      (goto-char (point-min))
      (condition-case err
          (progn (while (progn (forward-comment (buffer-size)) (not (eobp)))
                   (forward-sexp 1))
                 nil)
        (scan-error (line-number-at-pos (nth 2 err)))))))

(defun mevedel-batch--load-config (file)
  "Load the config FILE; signal `mevedel-batch-config' saying what is wrong.
A syntax error names its line."
  (unless (file-readable-p file)
    (signal 'mevedel-batch-config (list (format "Cannot read the config file %s" file))))
  (condition-case err
      (load file nil t t)
    ((end-of-file invalid-read-syntax)
     (signal 'mevedel-batch-config
             (list (format "%s:%s: syntax error in the config file: %s"
                           file
                           (or (mevedel-batch--syntax-line file)
                               (and (natnump (nth 2 err)) (nth 2 err))
                               "?")
                           (error-message-string err)))))
    (error
     (signal 'mevedel-batch-config
             (list (format "Error in the config file %s: %s" file (error-message-string err)))))))

(defun mevedel-batch--refuse-question (prompt &rest _)
  "Signal that a headless run cannot answer the question PROMPT."
  (signal 'remote-file-error
          (list (format "a headless run cannot answer %S" (string-trim prompt)))))

(defun mevedel-batch--unattended (function)
  "Call FUNCTION with every minibuffer question failing instead of asked.
Nobody answers a headless run: a question (TRAMP asking for a password
or to confirm a host, say) would read the terminal, and batch Emacs
exits with 255 at the end of its input.  It signals an error naming
the question instead, which fails the call that asked.
`read-from-minibuffer', a primitive, is redefined without a
trampoline: Emacs would compile one before going on, 0.2-1 s of a run
in a fresh HOME, so that Emacs's own native code asking through it
would find the redefinition.  That code asks through
`completing-read-function' (bound here) instead.  `yes-or-no-p', also
a primitive, reads its answer from C; with `use-short-answers' it asks
`y-or-n-p', a Lisp function replaced here, so both are refused.
TRAMP opens no connection for incidental file checks meanwhile
\(`non-essential'): batch Emacs dies of an error in a process sentinel,
so a host lost mid-turn must not make such a check signal; the remote
tools reconnect for themselves (`mevedel-remote-call')."
  (let ((read (symbol-function 'read-from-minibuffer)))
    (let ((native-comp-enable-subr-trampolines nil))
      (fset 'read-from-minibuffer #'mevedel-batch--refuse-question))
    (unwind-protect
        (cl-letf (((symbol-function 'read-passwd)
                   (lambda (prompt &rest _)
                     (signal 'remote-file-error
                             (list (format "it asks for a password (%S), which a headless run \
cannot type" (string-trim prompt))))))
                  ((symbol-function 'y-or-n-p) #'mevedel-batch--refuse-question)
                  (use-short-answers t)
                  (completing-read-function #'mevedel-batch--refuse-question)
                  (non-essential t))
          (funcall function))
      (fset 'read-from-minibuffer read))))

(defun mevedel-batch--check-dir (options)
  "Check the --dir of OPTIONS is a directory; a remote one is reached first.
Signal a usage error for a missing directory, and
`mevedel-remote-unreachable' naming the host for a remote one that
cannot be reached in time.  A remote workspace another session writes
is said on stderr, and with --lease read-only opened so."
  (when-let* ((dir (plist-get options :dir)))
    (if (not (mevedel-remote-p dir))
        (unless (file-directory-p dir)
          (mevedel-batch--usage-error "--dir %s is not a directory" dir))
      (condition-case err
          (mevedel-remote-check dir)
        (mevedel-remote-unreachable (signal (car err) (cdr err)))
        (file-error (mevedel-batch--usage-error "--dir %s is not a directory" dir)))
      (when-let* ((policy (plist-get options :lease)))
        (setq mevedel-remote-lease-policy policy))
      (let ((root (mevedel-chat-workspace-root dir)))
        (when-let* ((holder (mevedel-remote-lease-holder root)))
          (message "mevedel: %s" (mevedel-remote-lease-open-message root holder))
          (when (eq mevedel-remote-lease-policy 'read-only)
            (mevedel-remote-lease-open-read-only root)))))))

(defun mevedel-batch--interrupted ()
  "Say on stderr that the run was interrupted (`kill-emacs-hook' during a run)."
  (message "mevedel: interrupted; the session is saved (--continue resumes it)"))

(defun mevedel-batch-main ()
  "Run one headless turn with the command line's arguments and exit.
See the commentary of mevedel-batch.el for the arguments and
`mevedel-batch-usage-text' for the exit status."
  (let ((args command-line-args-left)
        (status 1))
    (setq command-line-args-left nil)
    (add-hook 'kill-emacs-hook #'mevedel-batch--interrupted)
    (condition-case err
        (let ((options (mevedel-batch--parse-args args)))
          (if (plist-get options :help)
              (progn (princ mevedel-batch-usage-text) (setq status 0))
            (when-let* ((init (mevedel-batch--config-file options)))
              (mevedel-batch--load-config init))
            ;; After the config: TRAMP's settings for a remote --dir
            ;; are there.
            (mevedel-batch--unattended (lambda () (mevedel-batch--check-dir options)))
            (let ((result (mevedel-batch--unattended
                           (lambda ()
                             (if (plist-get options :list)
                                 (list :status 0 :output (mevedel-batch-list-sessions options))
                               (mevedel-batch-run-turn options))))))
              (princ (plist-get result :output))
              (when (plist-get result :error)
                (message (if (member (plist-get result :outcome) '("refused" "blocked" "goal"))
                             "mevedel: %s"
                           "mevedel: the turn failed: %s")
                         (plist-get result :error)))
              (setq status (plist-get result :status)))))
      (mevedel-batch-usage
       (message "mevedel: %s" (cadr err))
       (message "%s" (car (split-string mevedel-batch-usage-text "\n\n")))
       (setq status 2))
      (mevedel-batch-config
       (message "mevedel: %s" (cadr err))
       (setq status 2))
      (mevedel-session-locked
       (message "mevedel: %s; --fork continues in a fork of it" (cadr err))
       (setq status 2))
      (error
       (message "mevedel: %s" (error-message-string err))
       (setq status 1)))
    (remove-hook 'kill-emacs-hook #'mevedel-batch--interrupted)
    (kill-emacs status)))

(provide 'mevedel-batch)
;;; mevedel-batch.el ends here
