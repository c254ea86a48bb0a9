;;; mevedel-agent-roles.el --- Agent roles, model tiers and verifier verdicts  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; What a child agent is, before the runtime (mevedel-agent.el) makes
;; one: its role, the model that serves it, and how its report is read.
;;
;; Roles.  `mevedel-agent-role' returns the role plist of a name, nil for
;; the default role (the child inherits everything from its delegator).
;; Named roles come from, highest precedence first:
;;
;;   1. the workspace's .mevedel/agents/NAME.md (mevedel's format);
;;   2. the workspace's .claude/agents/NAME.md (Claude Code's subagent
;;      format: name, description, tools, model, the body the prompt);
;;   3. `mevedel-agent-roles' (a defcustom);
;;   4. ~/.mevedel/agents/NAME.md, then ~/.claude/agents/NAME.md;
;;   5. the built-ins: worker, explorer, verifier, reviewer.
;;
;; A higher source replaces a role of the same name wholly; nothing is
;; merged.  Two files of one directory naming the same role are an
;; error, as is front matter that cannot be read: the message names the
;; file and line.  A broken file never takes the other roles down:
;; `mevedel-agent-role-names' leaves it out with a warning (once per
;; version of the file), and asking for the role it defines signals its
;; error.  Parsed files are cached by identity (modification time, size,
;; inode): a lookup stats the four directories and their files, and
;; reads only what changed.
;;
;; Every named role gets SendMessage and ListAgents; a role with Agent
;; gets the whole control bundle (Agent, WaitAgent, InterruptAgent) and
;; may delegate; a role with Bash gets WriteStdin.  A tool list may name
;; MCP tools as permission rules do (mcp__SERVER__TOOL, or mcp__SERVER
;; for all of a server's): a role with a list reaches no other MCP tool
;; (`mevedel-agent--specialists').
;;
;; Model tiers.  `mevedel-agent-tiers' names models (fast, balanced,
;; strong, or the user's own) as a gptel backend, a model and an effort;
;; `mevedel-agent-workload-tiers' maps the workloads explore, verify,
;; review, summary and goal-review to a tier.  `mevedel-agent-resolve-model' starts
;; from the delegator's model, applies the workload's tier, then the
;; explicit choice (the call's model, else the role's), then an explicit
;; effort.
;;
;; Verdicts.  A verifier's report ends with exactly one line
;; `VERDICT: PASS', `VERDICT: FAIL' or `VERDICT: PARTIAL';
;; `mevedel-agent-parse-verdict' reads it from the complete report.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'gptel)
(require 'mevedel-gptel)

(defgroup mevedel-agent-roles nil
  "Roles and model tiers of child agents."
  :group 'mevedel
  :prefix "mevedel-agent-")

(define-error 'mevedel-agent-role-error "Agent role error" 'user-error)

;;;; Tool bundles

(defconst mevedel-agent-roles--control-tools '("Agent" "WaitAgent" "InterruptAgent")
  "Tools a role that may delegate has: possessing Agent grants all three.")

(defconst mevedel-agent-roles--mail-tools '("SendMessage" "ListAgents")
  "Tools every named role has, so it can report and look around.")

(defconst mevedel-agent-roles--claude-tools
  '(("Write" . "ApplyPatch") ("Edit" . "ApplyPatch") ("MultiEdit" . "ApplyPatch")
    ("NotebookEdit" . "ApplyPatch") ("NotebookRead" . "Read") ("LS" . "Glob")
    ("Task" . "Agent") ("BashOutput" . "WriteStdin") ("KillShell" . "StopExecution")
    ("KillBash" . "StopExecution"))
  "Claude Code tool names and the mevedel tool that does their job.
Other names are kept as written.")

(defun mevedel-agent-roles--complete-tools (tools)
  "Return TOOLS (a list of names, or t) with the bundles a named role gets.
SendMessage and ListAgents always; with Agent, WaitAgent and
InterruptAgent; with Bash, WriteStdin.  Order is kept, duplicates go."
  (if (eq tools t)
      t
    (let ((tools (append tools mevedel-agent-roles--mail-tools)))
      (when (member "Agent" tools)
        (setq tools (append tools mevedel-agent-roles--control-tools)))
      (when (member "Bash" tools)
        (setq tools (append tools '("WriteStdin"))))
      (delete-dups (copy-sequence tools)))))

;;;; Built-in roles

(defconst mevedel-agent-roles--reporting
  "Report to your delegator: what you did, what you found with file:line \
references, and what is left open.  Keep measurements as labelled lists, each \
item naming its scenario, metric, value, unit and sample count.  Be brief; \
your delegator reads your final answer, not your working."
  "The reporting tone worker, explorer and verifier share.")

(defconst mevedel-agent-roles--worker-prompt
  "You are a worker agent: you carry out one bounded task your delegator gave \
you (implementation, running commands, debugging) and report back.  Other \
agents may be editing the same workspace at the same time: change only the \
files your task gives you, re-read a file before you patch it, and say which \
files you changed.  Delegate only parts that can really run in parallel."
  "The worker role's own instructions.")

(defconst mevedel-agent-roles--explorer-prompt
  "You are an explorer agent: you investigate, read-only, and report what you \
found.  Do not change files.  Search and read the code, run read-only commands, \
and separate what you observed from what you infer.  You may delegate \
implementation to worker agents when your task asks for it."
  "The explorer role's own instructions.")

(defconst mevedel-agent-roles--verifier-prompt
  "You are a verifier agent: you check, adversarially and read-only, whether \
a claim or a change holds.  Do not change files.  Try to break it: run the \
relevant tests and checks when you may, probe edge cases, read the code paths \
the change touches.

Your report ends with exactly one final line, alone and with nothing after it:
VERDICT: PASS (only after an adversarial probe that could have failed and did not),
VERDICT: FAIL (only with a concrete, actionable defect you name), or
VERDICT: PARTIAL (only when the environment kept you from checking, saying what).
Write no other line starting with VERDICT."
  "The verifier role's own instructions, with its report contract.")

(defconst mevedel-agent-roles--reviewer-prompt
  "You are a code reviewer.  Read the diff and the code around it, and find \
the defects the change introduces: bugs, broken edge cases, security and data \
loss risks, missing error handling, regressions.  Report only what a careful \
author would fix; no style nits, no praise.  Do not change files.

Answer with one JSON object and nothing else:
{\"findings\": [{\"title\": \"short imperative summary (at most 80 characters)\",
  \"body\": \"why it is a problem, in Markdown, citing files, lines and functions\",
  \"confidence_score\": 0.0 to 1.0,
  \"priority\": 0 (blocker), 1 (urgent), 2 (normal), 3 (low), or null,
  \"code_location\": {\"absolute_file_path\": \"/abs/path\",
                      \"line_range\": {\"start\": 1, \"end\": 1}}}],
 \"overall_correctness\": \"patch is correct\" or \"patch is incorrect\",
 \"overall_explanation\": \"one to three sentences justifying that verdict\",
 \"overall_confidence_score\": 0.0 to 1.0}
An empty findings list is fine when you found nothing."
  "The reviewer role's own instructions: the JSON shape /review reads.")

(defvar mevedel-agent-roles--builtins nil
  "The built-in role plists, made once (callers get copies).")

(defun mevedel-agent-roles--builtins ()
  "Return the built-in role plists."
  (or mevedel-agent-roles--builtins
      (setq mevedel-agent-roles--builtins (mevedel-agent-roles--make-builtins))))

(defun mevedel-agent-builtin-role-names ()
  "Return the names of the built-in roles, reading no file."
  (mapcar (lambda (role) (plist-get role :name)) (mevedel-agent-roles--builtins)))

(defun mevedel-agent-roles--make-builtins ()
  "Make the built-in role plists.
None has the main agent's `identity': each role's prompt says what it is."
  (let ((read '("Read" "Glob" "Grep" "Bash" "ToolSearch" "ToolCall")))
    (mapcar
     (lambda (role)
       (plist-put role :tools (mevedel-agent-roles--complete-tools (plist-get role :tools))))
     (list
      (list :name "worker" :source 'builtin
            :description "Implementation, commands and debugging of one bounded task; may delegate."
            :system-components (list 'tool-guidance 'environment 'workspace-instructions
                                     'memory-index 'resource-roster 'skills-roster
                                     'agent-roles mevedel-agent-roles--reporting)
            :prompt mevedel-agent-roles--worker-prompt
            :tools (append read '("StopExecution" "ListExecutions" "ApplyPatch"
                                  "Skill" "Agent"))
            :read-only nil :delegate t :leaf nil
            :model nil :effort nil :max-turns nil :workload nil :verdict nil)
      (list :name "explorer" :source 'builtin
            :description "Read-only investigation returning a compact report; may delegate to workers."
            :system-components (list 'tool-guidance 'environment 'workspace-instructions
                                     'resource-roster 'skills-roster 'agent-roles
                                     mevedel-agent-roles--reporting)
            :prompt mevedel-agent-roles--explorer-prompt
            :tools (append read '("Skill" "Agent"))
            :read-only t :delegate t :leaf nil
            :model nil :effort nil :max-turns nil :workload 'explore :verdict nil)
      (list :name "verifier" :source 'builtin
            :description "Adversarial read-only check of a claim or change, ending in VERDICT: PASS, FAIL or PARTIAL."
            :system-components (list 'tool-guidance 'environment 'workspace-instructions
                                     mevedel-agent-roles--reporting)
            :prompt mevedel-agent-roles--verifier-prompt
            :tools (copy-sequence read)
            :read-only t :delegate nil :leaf t
            :model nil :effort nil :max-turns nil :workload 'verify :verdict t)
      (list :name "reviewer" :source 'builtin
            :description "Code review of a diff, answering with prioritized findings as JSON (/review)."
            :system-components (list 'tool-guidance 'environment
                                     'workspace-instructions)
            :prompt mevedel-agent-roles--reviewer-prompt
            :tools (copy-sequence read)
            :read-only t :delegate nil :leaf t
            :model nil :effort nil :max-turns nil :workload 'review :verdict nil)))))

;;;; User roles: the defcustom

(defcustom mevedel-agent-roles nil
  "Roles defined in Lisp: an alist of (NAME . PLIST).
NAME is a string of lowercase letters, digits, `-' and `_'.  PLIST
takes the keys of a role file's front matter as keywords:
:description (a string, required), :prompt (the role's instructions),
:tools (a list of tool names; omitted, the role inherits its
delegator's tools), :model (a tier symbol or \"BACKEND:MODEL\"),
:effort (a symbol), :max-turns (an integer), :read-only, :verdict,
:workload (explore, verify, review or summary) and :system-components
\(prompt component symbols and literal strings).  These roles take
precedence over the global role files and the built-ins, and yield to
the workspace's role files."
  :type '(alist :key-type string :value-type plist))

;;;; User roles: files

(defcustom mevedel-agent-role-directories
  '((workspace . ".mevedel/agents") (workspace-claude . ".claude/agents")
    (global . "~/.mevedel/agents") (global-claude . "~/.claude/agents"))
  "Where role files are found, as (ORIGIN . DIRECTORY).
ORIGIN is `workspace', `workspace-claude', `global' or
`global-claude': the workspace's directories are relative to its root,
and the `-claude' ones hold Claude Code's subagent files.  Precedence,
highest first: workspace, workspace-claude, `mevedel-agent-roles',
global, global-claude, then the built-in roles."
  :type '(alist :key-type (choice (const workspace) (const workspace-claude)
                                  (const global) (const global-claude))
                :value-type directory))

(defconst mevedel-agent-roles--mevedel-keys
  '("name" "description" "tools" "model" "effort" "max-turns" "read-only" "verdict"
    "workload" "system-components")
  "Front-matter keys of mevedel's role files.")

(defconst mevedel-agent-roles--claude-keys '("name" "description" "tools" "model")
  "Front-matter keys of Claude Code's subagent files that mevedel reads.")

(defconst mevedel-agent-roles--claude-ignored
  '("color" "permissionMode" "skills" "hooks" "mcpServers")
  "Claude Code front-matter keys that have no mevedel meaning and are ignored.")

(defconst mevedel-agent-roles--claude-models
  '(("sonnet" . balanced) ("opus" . strong) ("haiku" . fast) ("inherit" . nil))
  "Claude Code's model aliases and the tier each one means here.")

(defconst mevedel-agent-roles--workloads '(explore verify review summary goal-review)
  "The workloads `mevedel-agent-workload-tiers' maps to tiers.")

(defvar mevedel-agent-roles--file-cache (make-hash-table :test #'equal)
  "File name -> (IDENTITY . ROLE-OR-ERROR) of the role files read so far.")

(defvar mevedel-agent-roles--dir-cache (make-hash-table :test #'equal)
  "Directory name -> (IDENTITY . FILE-NAMES) of the role directories listed.")

(defvar mevedel-agent-roles--warned (make-hash-table :test #'equal)
  "File name -> identity of the broken file version already warned about.")

(defun mevedel-agent-roles--identity (file)
  "Return FILE's identity (modification time, size, inode), or nil if absent."
  (when-let* ((attrs (file-attributes file)))
    (list (file-attribute-modification-time attrs)
          (file-attribute-size attrs)
          (file-attribute-inode-number attrs))))

(defun mevedel-agent-roles--fail (file line format-string &rest args)
  "Signal a role error about FILE at LINE, with FORMAT-STRING and ARGS."
  (signal 'mevedel-agent-role-error
          (list (format "%s:%d: %s" (abbreviate-file-name file) line
                        (apply #'format format-string args)))))

(defun mevedel-agent-roles--unquote (value)
  "Return the YAML scalar VALUE without its quotes and surrounding space."
  (let ((value (string-trim value)))
    (cond ((and (>= (length value) 2) (string-prefix-p "\"" value) (string-suffix-p "\"" value))
           (condition-case nil
               (car (read-from-string value))
             (error (substring value 1 -1))))
          ((and (>= (length value) 2) (string-prefix-p "'" value) (string-suffix-p "'" value))
           (string-replace "''" "'" (substring value 1 -1)))
          (t value))))

(defun mevedel-agent-roles--front-matter (file)
  "Read FILE's front matter: return (FIELDS . BODY).
FIELDS is a list of (KEY VALUE LINE): VALUE a string, or a list of
strings for a YAML list (flow `[a, b]' or block `- a' items); block
scalars (`|', `>') become one string.  Signal a role error naming the
line of anything this reader does not take."
  (let ((lines (with-temp-buffer
                 (insert-file-contents file)
                 (split-string (buffer-string) "\n")))
        (fields nil) (n 1))
    (unless (equal (string-trim-right (or (car lines) "")) "---")
      (mevedel-agent-roles--fail file 1 "a role file starts with front matter: a line `---'"))
    (setq lines (cdr lines))
    (catch 'done
      (while t
        (setq n (1+ n))
        (when (null lines)
          (mevedel-agent-roles--fail file 1 "the front matter opened here has no closing `---' line"))
        (let ((line (string-trim-right (pop lines))))
          (cond
           ((equal line "---") (throw 'done nil))
           ((or (string-blank-p line) (string-match-p "\\`[ \t]*#" line)))
           ((string-match "\\`\\([A-Za-z][A-Za-z0-9_-]*\\)[ \t]*:\\(?:[ \t]+\\(.*\\)\\)?\\'" line)
            (let ((key (match-string 1 line))
                  (value (string-trim (or (match-string 2 line) "")))
                  (start n))
              (when (assoc key fields)
                (mevedel-agent-roles--fail file n "`%s' is given twice (first on line %d)"
                                           key (nth 2 (assoc key fields))))
              (unless (string-match-p "\\`[\"']" value)
                (setq value (replace-regexp-in-string "[ \t]+#.*\\'" "" value)))
              (cond
               ((string-empty-p value)
                ;; A block list follows, or nothing.
                (let (items)
                  (while (and lines (string-match "\\`[ \t]+-[ \t]+\\(.*\\)\\'" (car lines)))
                    (push (mevedel-agent-roles--unquote (match-string 1 (pop lines))) items)
                    (setq n (1+ n)))
                  (setq value (if items (nreverse items) ""))))
               ((member value '("|" ">" "|-" ">-"))
                (let (text)
                  (while (and lines (or (string-blank-p (car lines))
                                        (string-match-p "\\`[ \t]+" (car lines))))
                    (push (string-trim (pop lines)) text)
                    (setq n (1+ n)))
                  (setq value (string-trim (mapconcat #'identity (nreverse text)
                                                      (if (string-prefix-p "|" value) "\n" " "))))))
               ((string-prefix-p "[" value)
                (unless (string-suffix-p "]" value)
                  (mevedel-agent-roles--fail file n "the list of `%s' has no closing `]'" key))
                (setq value (mapcar #'mevedel-agent-roles--unquote
                                    (split-string (substring value 1 -1) "," t "[ \t]+"))))
               (t (setq value (mevedel-agent-roles--unquote value))))
              (push (list key value start) fields)))
           (t (mevedel-agent-roles--fail file n "cannot read this line as `key: value'"))))))
    (cons (nreverse fields) (string-trim (mapconcat #'identity lines "\n")))))

(defun mevedel-agent-roles--list (value)
  "Return VALUE, a front-matter string or list, as a list of names.
A string is a comma (or space) separated list."
  (if (listp value) value (split-string value "[, \t]+" t)))

(defun mevedel-agent-roles--bool (file field)
  "Return the boolean of FIELD, (KEY VALUE LINE), of FILE."
  (pcase (downcase (if (stringp (nth 1 field)) (nth 1 field) ""))
    ((or "true" "yes" "on") t)
    ((or "false" "no" "off") nil)
    (_ (mevedel-agent-roles--fail file (nth 2 field) "`%s' is true or false, not %S"
                                  (car field) (nth 1 field)))))

(defun mevedel-agent-roles--check-name (file line name)
  "Return NAME when it can name a role; else signal about FILE's LINE."
  (cond ((not (and (stringp name) (string-match-p "\\`[a-z0-9][a-z0-9_-]*\\'" name)))
         (mevedel-agent-roles--fail
          file line "role name %S: use lowercase letters, digits, `-' and `_'" name))
        ((equal name "default")
         (mevedel-agent-roles--fail
          file line "`default' is the inherited role (omit the role); choose another name"))
        (t name)))

(defun mevedel-agent-roles--model-value (file field claude)
  "Return the role :model of FIELD, (KEY VALUE LINE), of FILE.
CLAUDE non-nil maps Claude Code's aliases (sonnet, opus, haiku,
inherit) to tiers.  A tier is a symbol, anything else a string."
  (let ((value (nth 1 field)))
    (unless (stringp value)
      (mevedel-agent-roles--fail file (nth 2 field) "`model' is one name, not a list"))
    (cond ((and claude (assoc value mevedel-agent-roles--claude-models))
           (cdr (assoc value mevedel-agent-roles--claude-models)))
          ((string-match-p ":" value) value)
          (t (intern value)))))

(defun mevedel-agent-roles--parse-file (file origin)
  "Return the role defined in FILE; ORIGIN is its directory's kind.
Signal a role error naming FILE and the line at fault."
  (pcase-let* ((claude (memq origin '(workspace-claude global-claude)))
               (`(,fields . ,body) (mevedel-agent-roles--front-matter file))
               (known (if claude mevedel-agent-roles--claude-keys mevedel-agent-roles--mevedel-keys))
               (role (list :source origin :file file :prompt (and (not (string-empty-p body)) body)
                           :tools t :read-only nil :leaf nil :model nil :effort nil
                           :max-turns nil :workload nil :verdict nil)))
    (dolist (field fields)
      (pcase-let ((`(,key ,value ,line) field))
        (pcase key
          ((guard (not (member key known)))
           (unless (and claude (member key mevedel-agent-roles--claude-ignored))
             (mevedel-agent-roles--fail file line "unknown key `%s' (known: %s)"
                                        key (string-join known ", "))))
          ("name" (plist-put role :name (mevedel-agent-roles--check-name file line value)))
          ("description"
           (unless (and (stringp value) (not (string-blank-p value)))
             (mevedel-agent-roles--fail file line "`description' is one non-empty line of text"))
           (plist-put role :description value))
          ("tools"
           (let ((tools (mapcar (lambda (name)
                                  (unless (string-match-p "\\`[A-Za-z][A-Za-z0-9_-]*\\'" name)
                                    (mevedel-agent-roles--fail file line "tool name %S" name))
                                  (or (and claude (cdr (assoc name mevedel-agent-roles--claude-tools)))
                                      name))
                                (mevedel-agent-roles--list value))))
             (unless tools
               (mevedel-agent-roles--fail file line "`tools' names no tool"))
             (plist-put role :tools tools)))
          ("model" (plist-put role :model (mevedel-agent-roles--model-value file field claude)))
          ("effort"
           (unless (and (stringp value) (string-match-p "\\`[a-z]+\\'" value))
             (mevedel-agent-roles--fail file line "`effort' is a word such as low, medium or high"))
           (plist-put role :effort (intern value)))
          ("max-turns"
           (unless (and (stringp value) (string-match-p "\\`[1-9][0-9]*\\'" value))
             (mevedel-agent-roles--fail file line "`max-turns' is a positive integer, not %S" value))
           (plist-put role :max-turns (string-to-number value)))
          ("read-only" (plist-put role :read-only (mevedel-agent-roles--bool file field)))
          ("verdict" (plist-put role :verdict (mevedel-agent-roles--bool file field)))
          ("workload"
           (let ((workload (and (stringp value) (intern value))))
             (unless (memq workload mevedel-agent-roles--workloads)
               (mevedel-agent-roles--fail file line "`workload' is one of %s"
                                          (mapconcat #'symbol-name mevedel-agent-roles--workloads ", ")))
             (plist-put role :workload workload)))
          ("system-components"
           (plist-put role :system-components (mapcar #'intern (mevedel-agent-roles--list value)))))))
    (unless (plist-get role :name)
      (if claude
          (mevedel-agent-roles--fail file 1 "a Claude Code subagent file needs `name'")
        (plist-put role :name (mevedel-agent-roles--check-name
                               file 1 (file-name-base file)))))
    (unless (plist-get role :description)
      (mevedel-agent-roles--fail file 1 "the front matter needs `description'"))
    (mevedel-agent-roles--finish role)))

(defun mevedel-agent-roles--finish (role)
  "Return ROLE with the facts derived from its tools and defaults filled in."
  (let ((tools (mevedel-agent-roles--complete-tools (plist-get role :tools))))
    (plist-put role :tools tools)
    (plist-put role :delegate (or (eq tools t) (and (member "Agent" tools) t)))
    (unless (plist-member role :system-components)
      (plist-put role :system-components
                 (append (list 'identity 'tool-guidance 'environment 'workspace-instructions)
                         ;; The roles and tiers its Agent calls may name.
                         (and (plist-get role :delegate) (list 'agent-roles)))))
    role))

(defun mevedel-agent-roles--cached-parse (file origin)
  "Return FILE's role, or the error it signals as (:error MESSAGE).
ORIGIN is as for `mevedel-agent-roles--parse-file'.  Unchanged files
are not read again."
  (let ((identity (mevedel-agent-roles--identity file))
        (cached (gethash file mevedel-agent-roles--file-cache)))
    (if (and cached (equal (car cached) identity))
        (cdr cached)
      (let ((result (condition-case err
                        (mevedel-agent-roles--parse-file file origin)
                      (mevedel-agent-role-error (list :error (cadr err) :file file))
                      (file-error (list :error (format "%s: %s" (abbreviate-file-name file)
                                                       (error-message-string err))
                                        :file file)))))
        (puthash file (cons identity result) mevedel-agent-roles--file-cache)
        result))))

(defun mevedel-agent-roles--directory-files (dir)
  "Return the role files (NAME.md) in DIR, cached until DIR is changed."
  (let ((identity (mevedel-agent-roles--identity dir))
        (cached (gethash dir mevedel-agent-roles--dir-cache)))
    (cond ((null identity) nil)
          ((and cached (equal (car cached) identity)) (cdr cached))
          (t (let ((files (and (file-directory-p dir)
                               (directory-files dir t "\\`[^.].*\\.md\\'"))))
               (puthash dir (cons identity files) mevedel-agent-roles--dir-cache)
               files)))))

(defun mevedel-agent-roles--directory (origin dir workspace)
  "Return the absolute directory of ORIGIN's DIR for WORKSPACE, or nil."
  (if (memq origin '(workspace workspace-claude))
      (and workspace (expand-file-name dir workspace))
    (expand-file-name dir)))

(defconst mevedel-agent-roles--recheck-seconds 1.0
  "Seconds the files of a role directory are trusted before they are looked at.
The directory itself is looked at on every lookup, so a file added or
removed shows at once; a file edited in place shows within this time.")

(defvar mevedel-agent-roles--entries-cache (make-hash-table :test #'equal)
  "Directory name -> (FILES CHECKED . ENTRIES) of the role directories read.")

(defun mevedel-agent-roles--from-directory (origin dir)
  "Return the roles and broken files of ORIGIN's directory DIR.
The value is a list of role plists and (:error MESSAGE :file FILE)
entries.  Two files naming one role are an error for both.  The files
are looked at again only once `mevedel-agent-roles--recheck-seconds'
have passed, or when the directory changed."
  (let ((files (mevedel-agent-roles--directory-files dir))
        (cached (gethash dir mevedel-agent-roles--entries-cache))
        (now (float-time)))
    (if (and cached (eq (car cached) files)
             (< (- now (cadr cached)) mevedel-agent-roles--recheck-seconds))
        (cddr cached)
      (let ((entries (mevedel-agent-roles--check-directory origin files)))
        (puthash dir (cons files (cons now entries)) mevedel-agent-roles--entries-cache)
        entries))))

(defun mevedel-agent-roles--check-directory (origin files)
  "Return the entries of the role FILES of one ORIGIN directory.
See `mevedel-agent-roles--from-directory'."
  (let* ((entries (mapcar (lambda (file) (mevedel-agent-roles--cached-parse file origin))
                          files))
         (names (make-hash-table :test #'equal)))
    (dolist (entry entries)
      (when-let* ((name (plist-get entry :name)))
        (puthash name (cons entry (gethash name names)) names)))
    (mapcar (lambda (entry)
              (let ((same (gethash (plist-get entry :name) names)))
                (if (cdr same)
                    (list :error (format "%s: role `%s' is also defined in %s"
                                         (abbreviate-file-name (plist-get entry :file))
                                         (plist-get entry :name)
                                         (mapconcat (lambda (other)
                                                      (abbreviate-file-name (plist-get other :file)))
                                                    (remq entry same) ", "))
                          :file (plist-get entry :file)
                          :name (plist-get entry :name))
                  entry)))
            entries)))

(defun mevedel-agent-roles--from-custom ()
  "Return the roles of `mevedel-agent-roles', checked."
  (mapcar
   (lambda (entry)
     (let ((name (car entry))
           (plist (copy-sequence (cdr entry))))
       (unless (and (stringp name) (string-match-p "\\`[a-z0-9][a-z0-9_-]*\\'" name)
                    (not (equal name "default")))
         (signal 'mevedel-agent-role-error
                 (list (format "`mevedel-agent-roles': %S cannot name a role" name))))
       (unless (stringp (plist-get plist :description))
         (signal 'mevedel-agent-role-error
                 (list (format "`mevedel-agent-roles': role %s needs a :description" name))))
       (mevedel-agent-roles--finish
        (append (list :name name :source 'custom)
                plist
                (list :prompt nil :tools t :read-only nil :leaf nil :model nil :effort nil
                      :max-turns nil :workload nil :verdict nil)))))
   mevedel-agent-roles))

(defun mevedel-agent-roles--entries (directory)
  "Return every role entry for the workspace DIRECTORY, highest precedence first.
Entries are role plists and (:error MESSAGE :file FILE) entries of
broken files, in the order of `mevedel-agent-role-directories' with
the defcustom's roles before the global ones and the built-ins last."
  (let ((workspace (and directory (expand-file-name directory)))
        (entries nil))
    (pcase-dolist (`(,origin . ,dir) mevedel-agent-role-directories)
      (when (eq origin 'global)
        (setq entries (append entries (mevedel-agent-roles--from-custom))))
      (when-let* ((dir (mevedel-agent-roles--directory origin dir workspace)))
        (setq entries (append entries (mevedel-agent-roles--from-directory origin dir)))))
    (unless (assq 'global mevedel-agent-role-directories)
      (setq entries (append entries (mevedel-agent-roles--from-custom))))
    (append entries (mevedel-agent-roles--builtins))))

(defun mevedel-agent-roles--warn (entry)
  "Warn once per version of its file about the broken role ENTRY."
  (let* ((file (plist-get entry :file))
         (identity (mevedel-agent-roles--identity file)))
    (unless (equal (gethash file mevedel-agent-roles--warned 'none) identity)
      (puthash file identity mevedel-agent-roles--warned)
      (display-warning 'mevedel (format "Agent role file left out: %s" (plist-get entry :error))))))

;;;; Public interface: roles

(defun mevedel-agent-role (name directory)
  "Return the role plist called NAME for the workspace DIRECTORY.
NAME nil (or \"\" or \"default\") is the default role: nil, the child inherits
its delegator's instructions, tools and model policy.  An unknown name
is a `user-error' listing the roles there are; a broken role file that
would define NAME (by its name or its file's) signals its own error."
  (if (or (null name) (member name '("" "default")))
      nil
    (or (cl-loop for entry in (mevedel-agent-roles--entries directory)
                 when (and (plist-get entry :error)
                           (or (equal (plist-get entry :name) name)
                               (equal (file-name-base (plist-get entry :file)) name)))
                 do (signal 'mevedel-agent-role-error (list (plist-get entry :error)))
                 when (equal (plist-get entry :name) name)
                 return (copy-tree entry))
        (user-error "Unknown agent role %S (roles: %s; omit the role for the default)"
                    name (string-join (mevedel-agent-role-names directory) ", ")))))

(defun mevedel-agent-role-roster (directory)
  "Return ((NAME . DESCRIPTION) ...) of the roles of the workspace DIRECTORY.
Sorted by name, each name once (the source of highest precedence).
Broken role files are left out, with a warning once per version."
  (let (roster)
    (dolist (entry (mevedel-agent-roles--entries directory))
      (cond ((plist-get entry :error) (mevedel-agent-roles--warn entry))
            ((assoc (plist-get entry :name) roster))
            (t (push (cons (plist-get entry :name) (plist-get entry :description)) roster))))
    (sort roster (lambda (a b) (string< (car a) (car b))))))

(defun mevedel-agent-role-names (directory)
  "Return the names of the roles of the workspace DIRECTORY, sorted.
Broken role files are left out, with a warning once per version."
  (mapcar #'car (mevedel-agent-role-roster directory)))

(defun mevedel-agent-roles-describe (&optional directory)
  "Describe the agent roles of the workspace DIRECTORY and where they come from.
Interactively DIRECTORY is `default-directory'.  Broken role files
are listed with their errors."
  (interactive)
  (let ((entries (mevedel-agent-roles--entries (or directory default-directory)))
        (seen nil))
    (with-help-window "*mevedel agent roles*"
      (princ "Agent roles (omit the role for the default, which inherits everything):\n\n")
      (dolist (entry entries)
        (cond
         ((plist-get entry :error)
          (princ (format "  BROKEN  %s\n\n" (plist-get entry :error))))
         ((member (plist-get entry :name) seen)
          (princ (format "  %-12s (hidden by the one above) %s\n\n" (plist-get entry :name)
                         (or (and (plist-get entry :file)
                                  (abbreviate-file-name (plist-get entry :file)))
                             (plist-get entry :source)))))
         (t
          (push (plist-get entry :name) seen)
          (princ (format "  %-12s %s\n               from %s; tools: %s%s\n\n"
                         (plist-get entry :name) (plist-get entry :description)
                         (or (and (plist-get entry :file)
                                  (abbreviate-file-name (plist-get entry :file)))
                             (plist-get entry :source))
                         (let ((tools (plist-get entry :tools)))
                           (if (eq tools t) "inherited" (string-join tools " ")))
                         (if-let* ((model (plist-get entry :model)))
                             (format "; model: %s" model)
                           "")))))))))

;;;; Model tiers

(defcustom mevedel-agent-tiers
  '((fast) (balanced) (strong))
  "Named model tiers: an alist of (TIER . PLIST).
PLIST's :backend is the name of a gptel backend (as in
`gptel-make-openai' and friends), :model its model (a symbol) and
:effort a reasoning effort symbol (nil: the provider's default).
Instead of :backend, :provider names an ACP agent of
`mevedel-acp-agents' (`claude-code'), :model then one of its model
ids or nil.  A
tier without :backend keeps the model it is applied to and only sets
:effort when it has one; the default tiers are empty, so children use
their delegator's model until you fill them in, for example:

  ((fast :backend \"Claude\" :model claude-haiku-4-5)
   (balanced :backend \"Claude\" :model claude-sonnet-4-5)
   (strong :backend \"Claude\" :model claude-opus-4-1 :effort high))

Add tiers of your own; their names become valid `model' values of
the Agent tool and of role files."
  :type '(alist :key-type symbol
                :value-type (plist :options ((:backend string) (:model symbol)
                                             (:effort symbol)))))

(defcustom mevedel-agent-workload-tiers
  '((explore . fast) (verify . balanced) (review . strong) (summary . fast)
    (goal-review . strong))
  "The tier of each workload: an alist of (WORKLOAD . SPEC).
WORKLOAD is explore, verify, review, summary or goal-review (a role's
:workload; summary is the handoff summary of a child started with
context summary; goal-review the verifier that checks a Goal's
completion, mevedel-goal.el).  SPEC is a tier of `mevedel-agent-tiers', a string
\"BACKEND:MODEL\", or nil for the delegator's model."
  :type '(alist :key-type symbol
                :value-type (choice (const :tag "Delegator's model" nil)
                                    (symbol :tag "Tier")
                                    (string :tag "BACKEND:MODEL"))))

(defun mevedel-agent-tier-names ()
  "Return the names of the model tiers, as strings."
  (mapcar (lambda (entry) (symbol-name (car entry))) mevedel-agent-tiers))

(defun mevedel-agent-roles--backend (name)
  "Return gptel's backend called NAME; signal listing the ones there are."
  (or (cdr (assoc name (mevedel-gptel-backends)))
      (user-error "No gptel backend %S (backends: %s)" name
                  (or (mapconcat #'car (mevedel-gptel-backends) ", ") "none"))))

(defun mevedel-agent-roles--model-names (backend)
  "Return the model symbols offered by BACKEND."
  (mapcar (lambda (model) (if (consp model) (car model) model))
          (gptel-backend-models backend)))

(defun mevedel-agent-roles--backend-model (backend model what)
  "Return (:backend BACKEND :model MODEL) when MODEL is one of BACKEND's.
WHAT names where the choice came from, for the error otherwise."
  (let ((models (mevedel-agent-roles--model-names backend)))
    (unless (or (null models) (memq model models))
      (user-error "%s: backend %s has no model %s (models: %s)" what
                  (gptel-backend-name backend) model
                  (mapconcat #'symbol-name models ", ")))
    (list :backend backend :model model)))

(defvar mevedel-acp-agents)

(defun mevedel-agent-roles--acp (spec)
  "Return (AGENT . MODEL) when SPEC names an ACP agent, else nil.
SPEC is AGENT or \"AGENT:MODEL\", AGENT one of `mevedel-acp-agents'
\(mevedel-acp.el), MODEL a model id it offers, or nil."
  (when (boundp 'mevedel-acp-agents)
    (let* ((text (format "%s" spec))
           (colon (string-search ":" text))
           (name (intern (if colon (substring text 0 colon) text))))
      (and (assq name mevedel-acp-agents)
           (cons name (and colon (substring text (1+ colon))))))))

(defun mevedel-agent-roles--select (spec)
  "Return the selection of SPEC: a plist of :backend, :model and :effort.
SPEC is a tier (symbol or string), \"BACKEND:MODEL\", a bare model
name one gptel backend offers, or an ACP agent (\"claude-code\",
\"claude-code:MODEL\"), whose selection is (:provider (AGENT . MODEL)
:effort nil).  Keys a tier leaves out are absent."
  (let ((tier (assq (if (symbolp spec) spec (intern spec)) mevedel-agent-tiers))
        (acp (mevedel-agent-roles--acp spec)))
    (cond
     ((and tier (plist-get (cdr tier) :provider))
      (list :provider (cons (plist-get (cdr tier) :provider)
                            (let ((model (plist-get (cdr tier) :model)))
                              (and model (format "%s" model))))
            :effort (plist-get (cdr tier) :effort)))
     (tier
      (let* ((plist (cdr tier))
             (backend (plist-get plist :backend))
             (model (plist-get plist :model)))
        (append (cond ((and backend model)
                       (mevedel-agent-roles--backend-model
                        (mevedel-agent-roles--backend backend) model (format "Tier %s" (car tier))))
                      ((or backend model)
                       (user-error "Tier %s needs both :backend and :model, or neither" (car tier))))
                (and (plist-member plist :effort) (list :effort (plist-get plist :effort))))))
     (acp (list :provider acp :effort nil))
     ((and (stringp spec) (string-match "\\`\\([^:]+\\):\\(.+\\)\\'" spec))
      (append (mevedel-agent-roles--backend-model
               (mevedel-agent-roles--backend (match-string 1 spec))
               (intern (match-string 2 spec)) spec)
              (list :effort nil)))
     (t
      (let* ((model (if (symbolp spec) spec (intern spec)))
             (offering (cl-remove-if-not
                        (lambda (entry) (memq model (mevedel-agent-roles--model-names (cdr entry))))
                        (mevedel-gptel-backends))))
        (if (= (length offering) 1)
            (list :backend (cdar offering) :model model :effort nil)
          (user-error "Model %s is %s (tiers: %s; or give BACKEND:MODEL)" spec
                      (if offering
                          (format "offered by several backends (%s)"
                                  (mapconcat #'car offering ", "))
                        "no tier and no gptel backend's model")
                      (string-join (mevedel-agent-tier-names) ", "))))))))

(defun mevedel-agent-roles--apply (current spec)
  "Return CURRENT, a model plist, with SPEC's selection applied.
A selection of a model replaces the effort too: an effort belongs
to the model it was chosen for."
  (if (null spec)
      current
    (let ((selected (mevedel-agent-roles--select spec)))
      (cond
       ((plist-member selected :backend)
        (list :backend (plist-get selected :backend)
              :model (plist-get selected :model)
              :effort (plist-get selected :effort)
              :provider nil))
       ((plist-get selected :provider)
        (list :backend (plist-get current :backend)
              :model (plist-get current :model)
              :effort (plist-get selected :effort)
              :provider (plist-get selected :provider)))
       (t
        (list :backend (plist-get current :backend)
              :model (plist-get current :model)
              :effort (if (plist-member selected :effort)
                          (plist-get selected :effort)
                        (plist-get current :effort))
              :provider (plist-get current :provider)))))))

(defun mevedel-agent-resolve-model (spec workload inherited &optional effort)
  "Return the model that serves a child: (:backend :model :effort :provider).
:provider is nil (gptel's backend and model) or (AGENT . MODEL), an
ACP agent answering the child instead.
Resolution starts from INHERITED, the delegator's plist of the same
shape, applies WORKLOAD's tier (`mevedel-agent-workload-tiers'), then
SPEC (the Agent call's model, else the role's: a tier, \"BACKEND:MODEL\",
a model one backend offers, or an ACP agent), then EFFORT, an explicit
effort symbol, which has the last word.  An unknown tier, backend or model is a
`user-error' listing the ones there are."
  (let ((result (list :backend (plist-get inherited :backend)
                      :model (plist-get inherited :model)
                      :effort (plist-get inherited :effort)
                      :provider (plist-get inherited :provider))))
    (when workload
      (unless (memq workload mevedel-agent-roles--workloads)
        (user-error "Unknown workload %s (workloads: %s)" workload
                    (mapconcat #'symbol-name mevedel-agent-roles--workloads ", ")))
      (setq result (mevedel-agent-roles--apply
                    result (alist-get workload mevedel-agent-workload-tiers))))
    (setq result (mevedel-agent-roles--apply
                  result (if (and (stringp spec) (string-blank-p spec)) nil spec)))
    (when effort
      (setq result (plist-put result :effort (if (stringp effort) (intern effort) effort))))
    result))

;;;; Verdicts

(defun mevedel-agent-parse-verdict (text)
  "Return the verdict of the verifier report TEXT, or nil.
The verdict is \"PASS\", \"FAIL\" or \"PARTIAL\".  The report's last
non-blank line must be exactly `VERDICT: PASS', `VERDICT: FAIL' or
`VERDICT: PARTIAL' (spaces around it aside), and no other line may
look like a verdict (`Verdict:' in any case): two verdicts, a line
after the verdict, another spelling or none at all mean no accepted
verdict."
  (when (stringp text)
    (let* ((lines (split-string (string-trim-right text) "\n"))
           (last (string-trim (car (last lines)))))
      (and (let ((case-fold-search nil))
             (string-match-p "\\`VERDICT: \\(?:PASS\\|FAIL\\|PARTIAL\\)\\'" last))
           (let ((case-fold-search t))
             (not (cl-some (lambda (line)
                             (string-match-p "\\`[ \t>*_#-]*verdict[ \t*_]*:" line))
                           (butlast lines))))
           (substring last 9)))))

(provide 'mevedel-agent-roles)
;;; mevedel-agent-roles.el ends here
