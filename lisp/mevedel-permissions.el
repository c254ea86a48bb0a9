;;; mevedel-permissions.el --- Permission modes, rules and decisions  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Whether a tool call may run without asking: the one decision that
;; the pipeline's permission step makes for every call, in a chat, a
;; headless run or a plain gptel buffer.
;;
;; A permission mode sets the default: `ask' (read-only tools inside
;; the workspace run, everything else asks), `edits' (file edits inside
;; the workspace run as well) and `full-auto' (everything runs).
;;
;; Rules override the mode.  A rule is (ACTION TOOL [GLOB...]) with
;; ACTION `allow', `ask' or `deny', TOOL a tool name or "*", and
;; optional path globs (`*' within a path component, `**' across
;; components; relative globs are matched against paths relative to
;; the workspace).  A rule without globs matches every call of TOOL.
;; With globs, an ask or deny rule matches when one of the call's paths
;; matches one of them, by its name or by its real path (links
;; resolved), an allow rule only when all of their real paths do.  Among
;; matching rules deny beats ask beats allow.  Rules come from
;; `mevedel-permissions-rules' and from the workspace's
;; .mevedel/permissions.el (a list of rules, read as data, never
;; evaluated; reread when it changed, checked at most once every
;; `mevedel-permissions-recheck-interval' seconds).
;;
;; A tool with :get-domain (WebFetch) contacts a host: its rules' globs
;; match that host instead of paths ("docs.python.org", "*.example.com"),
;; it is never "inside the workspace", so `ask' and `edits' ask for it,
;; and "always" answers it per host: (domain . HOST).
;;
;; A tool's own :check-permission, called with the arguments, says
;; more: `allow', `ask', `deny' or (deny . REASON) (rules decide before
;; it; `full-auto' turns its allow or ask into allow), (allow . RECORD)
;; for an automatic approval, `delegated' for a call that acts under
;; the authority of what it addresses (an execution or agent the
;; caller owns: no mode, answer, allow or ask rule applies and it never
;; asks, but a deny rule naming it or "*" refuses it), or (command .
;; SOURCE) for a call that runs the Bash SOURCE in the workspace.
;; Commands are judged by the module's analysis
;; (`mevedel-core-bash-permission'): a read-only command whose files
;; are all inside the workspace runs in every mode; rules for "Bash"
;; apply to every command tool (Bash and Monitor), matched against the
;; command's files.
;;
;; A session's "always this session" answers (`mevedel-permissions-
;; remember') allow a tool, or, for commands, a command key: the
;; command name and its subcommand (`npm test', `git status').  A
;; command runs on answers alone when every key in it was answered;
;; a command without keys (computed, dangerous, shell code) never does.
;; An explicit ask or deny rule beats an answer.  A call asking for a
;; sandbox grant (network, more paths, escalation) always asks, and
;; answers never cover a grant.
;;
;; Before all of that, `mevedel-permissions-restriction-functions' may
;; refuse a call outright or let it run without asking (Plan mode's
;; boundary, mevedel-plan.el; a deny rule still refuses it), and
;; `mevedel-permissions-mode-functions' may give one request its own
;; mode (an approved plan's implementation override).
;;
;; `mevedel-permissions-decide-call' returns `allow', (allow . RECORD),
;; `ask' or (deny . REASON).  On `ask', the pipeline calls the session's
;; prompter, whose cards `mevedel-permissions-cards' plans and
;; `mevedel-permissions-ask' runs: each card says why it asked and
;; what "always this session" would allow.  Outside any session the
;; mode is `ask' and there are no answers.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-resource)
(require 'mevedel-session)
(require 'mevedel-remote)
(require 'mevedel-tool-registry)

(defgroup mevedel-permissions nil
  "Which tool calls run without asking."
  :group 'mevedel
  :prefix "mevedel-permissions-")

(defconst mevedel-permissions-modes '(ask edits full-auto plan)
  "The permission modes.
`plan' is sticky Plan mode (mevedel-plan.el): it asks like `ask', and
the restrictions of Plan come first, whatever the rules say.")

(defcustom mevedel-permissions-mode 'ask
  "Default permission mode of new sessions.
`ask': read-only tools run inside the workspace; anything else asks.
`edits': file edits inside the workspace run as well.
`full-auto': every call runs unless a rule says otherwise.
`plan': sticky Plan mode: read-only work and plans in work://plans/."
  :type '(choice (const ask) (const edits) (const full-auto) (const plan)))

(defcustom mevedel-permissions-rules nil
  "Permission rules for every workspace, each (ACTION TOOL [GLOB...]).
ACTION is `allow', `ask' or `deny'; TOOL is a tool name or \"*\";
each GLOB matches file paths (`*' within a component, `**' across).
Among the rules that match a call, deny beats ask beats allow.
Example: ((deny \"Bash\") (allow \"Read\" \"/usr/share/doc/**\"))."
  :type '(repeat (cons (choice (const allow) (const ask) (const deny))
                       (cons string (repeat string)))))

(defcustom mevedel-permissions-workspace-file ".mevedel/permissions.el"
  "File, relative to a workspace root, holding that workspace's rules."
  :type 'string)

(defvar mevedel-permissions-recheck-interval 1.0
  "Seconds during which a workspace's rules file is not checked again.")

(defconst mevedel-permissions--rank '((deny . 3) (ask . 2) (allow . 1))
  "Precedence of rule actions.")

;;;; Rules

(defun mevedel-permissions-check-rule (rule)
  "Signal an error naming the problem unless RULE is well formed."
  (pcase rule
    (`(,action ,tool . ,globs)
     (unless (memq action '(allow ask deny))
       (error "Permission rule %S: action must be allow, ask or deny" rule))
     (unless (and (stringp tool) (not (string-empty-p tool)))
       (error "Permission rule %S: tool must be a non-empty string" rule))
     (unless (cl-every #'stringp globs)
       (error "Permission rule %S: globs must be strings" rule)))
    (_ (error "Permission rule %S is not (ACTION TOOL [GLOB...])" rule)))
  rule)

(defun mevedel-permissions-workspace-rules (root)
  "Return the rules in ROOT's workspace permission file, or nil.
The file holds one list of rules; it is read, never evaluated."
  (let ((file (expand-file-name mevedel-permissions-workspace-file root)))
    (when (file-readable-p file)
      (let ((rules (with-temp-buffer
                     (insert-file-contents file)
                     (condition-case err
                         (read (current-buffer))
                       (error (error "Cannot read %s: %s" file (error-message-string err)))))))
        (unless (listp rules)
          (error "%s must hold a list of rules" file))
        (mapc #'mevedel-permissions-check-rule rules)))))

(defun mevedel-permissions-glob-regexp (glob)
  "Return a regexp matching the paths GLOB matches."
  (let ((i 0) (n (length glob)) (parts nil))
    (while (< i n)
      (let ((c (aref glob i)))
        (cond
         ((and (eq c ?*) (< (1+ i) n) (eq (aref glob (1+ i)) ?*))
          (if (and (< (+ i 2) n) (eq (aref glob (+ i 2)) ?/))
              (progn (push "\\(?:.*/\\)?" parts) (cl-incf i 3))
            (push ".*" parts) (cl-incf i 2)))
         ((eq c ?*) (push "[^/]*" parts) (cl-incf i))
         ((eq c ??) (push "[^/]" parts) (cl-incf i))
         (t (push (regexp-quote (string c)) parts) (cl-incf i)))))
    (concat "\\`" (apply #'concat (nreverse parts)) "\\'")))

(defun mevedel-permissions--glob-match-p (glob path bases)
  "Return non-nil when GLOB matches PATH; relative globs are under BASES.
BASES are the workspace root as spelled and its real directory (links
resolved), as directory names: PATH is taken as it is spelled, a
link's name below the first or a real path below the second."
  (let* ((absolute (expand-file-name path (car bases)))
         (regexp (mevedel-permissions-glob-regexp
                  (if (file-name-absolute-p glob) (expand-file-name glob) glob))))
    (or (string-match-p regexp absolute)
        (and (not (file-name-absolute-p glob))
             (cl-some (lambda (base)
                        (and (string-prefix-p base absolute)
                             (string-match-p regexp (substring absolute (length base)))))
                      bases)))))

(defvar mevedel-permissions--workspace-cache (make-hash-table :test #'equal)
  "Workspace root -> (GENERATION ATTRIBUTES RULES) of its rules file.")

(defvar mevedel-permissions--generation 0
  "Bumped `mevedel-permissions-recheck-interval' after a file was checked.
An entry of `mevedel-permissions--workspace-cache' made in the current
generation is fresh: deciding a call then costs no clock or file call.")

(defvar mevedel-permissions--expiry nil
  "The timer that starts the next generation, or nil when none waits.")

(defun mevedel-permissions--expire ()
  "Start a new generation: every workspace's rules file is checked again."
  (setq mevedel-permissions--expiry nil)
  (cl-incf mevedel-permissions--generation))

(defun mevedel-permissions--workspace-rules-cached (root)
  "Return ROOT's workspace rules, rereading the file only when it changed.
The file's attributes are compared again only after
`mevedel-permissions-recheck-interval' seconds (a one-shot timer, armed
when a file is checked, starts a new generation); an interval of 0
checks on every call."
  (let ((entry (gethash root mevedel-permissions--workspace-cache))
        (interval mevedel-permissions-recheck-interval))
    (if (and entry (eq (car entry) mevedel-permissions--generation) (> interval 0))
        (nth 2 entry)
      (unless (or mevedel-permissions--expiry (<= interval 0))
        (setq mevedel-permissions--expiry
              (run-at-time interval nil #'mevedel-permissions--expire)))
      (let* ((file (expand-file-name mevedel-permissions-workspace-file root))
             (attributes (file-attributes file))
             (stamp (and attributes (list (file-attribute-modification-time attributes)
                                          (file-attribute-size attributes)
                                          (file-attribute-inode-number attributes)))))
        (if (and entry (equal stamp (nth 1 entry)))
            (progn (setcar entry mevedel-permissions--generation) (nth 2 entry))
          (let ((rules (and stamp (mevedel-permissions-workspace-rules root))))
            (puthash root (list mevedel-permissions--generation stamp rules)
                     mevedel-permissions--workspace-cache)
            rules))))))

(defvar mevedel-permissions--user-rules nil
  "(RULES . CHECKED): `mevedel-permissions-rules' when last checked.")

(defvar mevedel-permissions--last nil
  "The latest answer of `mevedel-permissions-applicable-rules'.
It is (ROOT GENERATION . RULES), kept for the next call in ROOT.")

(defun mevedel-permissions-applicable-rules (root)
  "Return the rules that apply in workspace ROOT: the user's, then ROOT's."
  (let ((last mevedel-permissions--last))
    (if (and (eq root (car last))
             (eq (cadr last) mevedel-permissions--generation)
             (eq (car mevedel-permissions--user-rules) mevedel-permissions-rules)
             (> mevedel-permissions-recheck-interval 0))
        (cddr last)
      (let ((rules (mevedel-permissions--applicable-rules root)))
        (setq mevedel-permissions--last
              (cons root (cons mevedel-permissions--generation rules)))
        rules))))

(defun mevedel-permissions--applicable-rules (root)
  "Return the rules that apply in workspace ROOT, checked anew."
  (let ((user (if (eq (car mevedel-permissions--user-rules) mevedel-permissions-rules)
                  (cdr mevedel-permissions--user-rules)
                (let ((checked (mapc #'mevedel-permissions-check-rule
                                     (copy-sequence mevedel-permissions-rules))))
                  (setq mevedel-permissions--user-rules (cons mevedel-permissions-rules checked))
                  checked)))
        (workspace (mevedel-permissions--workspace-rules-cached root)))
    (if workspace (append user workspace) user)))

(defun mevedel-permissions--domain-match-p (glob host)
  "Return non-nil when GLOB (\"example.com\", \"*.example.com\") matches HOST."
  (string-match-p (mevedel-permissions-glob-regexp (downcase glob)) (downcase host)))

(defun mevedel-permissions--rule-matches-p (rule names paths bases &optional domain reals)
  "Return non-nil when RULE matches a call of a tool in NAMES on PATHS.
BASES are the directories relative globs are under (see
`mevedel-permissions--glob-match-p').
With DOMAIN, the call contacts that host and the globs match it instead.
REALS are PATHS with links resolved, one for each: a deny or ask rule
binds a file by either name, an allow rule must cover every real file,
so a link cannot carry a call into or out of a glob."
  (pcase-let ((`(,action ,rule-tool . ,globs) rule))
    (and (or (equal rule-tool "*") (member rule-tool names))
         (or (null globs)
             (if domain
                 (cl-some (lambda (glob) (mevedel-permissions--domain-match-p glob domain))
                          globs)
               (and paths
                    (let ((match (lambda (path)
                                   (cl-some (lambda (glob)
                                              (mevedel-permissions--glob-match-p glob path bases))
                                            globs))))
                      (if (eq action 'allow)
                          (cl-every match (or reals paths))
                        (cl-some match (append paths reals))))))))))

(defun mevedel-permissions-rule-names (name)
  "Return the names a rule may give the tool NAME by.
That is NAME itself and, for an MCP tool mcp__SERVER__TOOL, mcp__SERVER,
which names every tool of that server (Claude Code's rule)."
  (if (string-match "\\`\\(mcp__.+?\\)__." name)
      (list name (match-string 1 name))
    (list name)))

(defun mevedel-permissions-matching-rule (rules names paths root &optional domain reals)
  "Return the strongest of RULES matching a call on PATHS, or nil.
NAMES are the names the call's tool answers to; ROOT is the workspace
root for relative globs.  DOMAIN is the host a :get-domain tool's call
contacts; the globs then match it.  REALS are PATHS with links
resolved (see `mevedel-permissions--rule-matches-p')."
  (let ((best nil)
        ;; The root's real directory is looked up once for every glob.
        (bases (and paths
                    (delete-dups (list (file-name-as-directory (expand-file-name root))
                                       (file-name-as-directory (file-truename root)))))))
    (dolist (rule rules)
      (when (and (mevedel-permissions--rule-matches-p rule names paths bases domain reals)
                 (> (alist-get (car rule) mevedel-permissions--rank)
                    (alist-get (car best) mevedel-permissions--rank 0)))
        (setq best rule)))
    best))

;;;; Facts of a call

(defun mevedel-permissions--operation (tool args address)
  "Return the resource operation of TOOL on ADDRESS, one of its ARGS' values.
It is the operation of the `path-or-resource' argument holding ADDRESS,
else a read for a read-only tool and a write for any other."
  (or (cl-loop for arg in (mevedel-tool-args tool)
               when (and (eq (nth 1 arg) 'path-or-resource)
                         (equal (plist-get args (mevedel-tool-arg-key (car arg))) address))
               return (mevedel-tool-resource-operation tool arg))
      (if (mevedel-tool-read-only-p tool) "Read" "ApplyPatch")))

(defun mevedel-permissions-tool-paths (tool args)
  "Return the file paths a call of TOOL with ARGS touches.
TOOL's :get-paths or :get-path decide when it has them; otherwise its
`path' and `path-or-resource' arguments.  A resource address, in any
spelling, stands for the real files behind it
\(`mevedel-resource-judged-paths'), so that rules and the workspace
check judge what the call reaches, never the text typed; a malformed
address signals."
  (let ((paths (cond ((mevedel-tool-get-paths tool)
                      (funcall (mevedel-tool-get-paths tool) args))
                     ((mevedel-tool-get-path tool)
                      (list (funcall (mevedel-tool-get-path tool) args)))
                     (t (cl-loop for (name type) in (mevedel-tool-args tool)
                                 when (memq type '(path path-or-resource))
                                 collect (plist-get args (mevedel-tool-arg-key name)))))))
    (cl-loop for path in (ensure-list paths)
             when (and (stringp path) (not (string-empty-p path)))
             append (if (mevedel-resource-address-p path)
                        (mevedel-resource-judged-paths
                         (mevedel-resource-prepared
                          path (mevedel-permissions--operation tool args path)))
                      (list path)))))

(defsubst mevedel-permissions-tool-grant (tool args)
  "Return the sandbox grant a call of TOOL with ARGS asks for, or nil.
It comes from the tool's :grant-request (see `mevedel-define-tool'):
a plist (:escalated BOOL :network BOOL :read PATHS :write PATHS
:env NAMES :justification TEXT), NAMES being withheld environment
variables to pass through for this call."
  (let ((request (mevedel-tool-grant-request tool)))
    (and request (funcall request args))))

(defsubst mevedel-permissions--root (context session)
  "Return the workspace root of the call CONTEXT in SESSION (or nil)."
  (if (mevedel-session-p session)
      (mevedel-session-workspace session)
    (let* ((buffer (plist-get context :data-buffer))
           (root (mevedel-remote-expand-file-name (if (buffer-live-p buffer)
                                                      (buffer-local-value 'default-directory buffer)
                                                    default-directory))))
      (if (directory-name-p root) root (file-name-as-directory root)))))

(defun mevedel-permissions--inside-p (paths root)
  "Return non-nil when every one of PATHS is inside ROOT."
  (cl-every (lambda (path) (file-in-directory-p (expand-file-name path root) root))
            paths))

;;;; Session answers

(defun mevedel-permissions-remember (session keys)
  "Record \"always this session\" answers KEYS in SESSION.
Each key is a tool name or (command . KEY) for a command key."
  (when (mevedel-session-p session)
    (dolist (key keys)
      (puthash key t (mevedel-session-permission-answers session)))))

(defun mevedel-permissions-answered-p (session key)
  "Return non-nil when SESSION answered \"always\" for KEY."
  (and (mevedel-session-p session)
       (gethash key (mevedel-session-permission-answers session))))

(defsubst mevedel-permissions--commands-answered-p (session facts)
  "Return non-nil when SESSION's answers cover every command key of FACTS.
Inline: every command that would otherwise ask is checked."
  (and (mevedel-session-p session)
       ;; Most sessions have answered nothing: no key to read or make.
       (> (hash-table-count (mevedel-session-permission-answers session)) 0)
       (let ((keys (plist-get facts :keys))
             (answers (mevedel-session-permission-answers session)))
         (and keys
              (not (plist-get facts :unkeyed))
              (progn (while (and keys (gethash (cons 'command (car keys)) answers))
                       (setq keys (cdr keys)))
                     (null keys))))))

;;;; Decisions

(defvar mevedel-permissions-restriction-functions nil
  "Abnormal hook run with a call's context and session before any rule.
The first function returning non-nil decides the call: (deny . REASON)
refuses it, `allow' runs it without asking unless a deny rule refuses
it.  Plan mode's boundary (mevedel-plan.el) is one: no mode, rule or
answer widens it.")

(defvar mevedel-permissions-mode-functions nil
  "Abnormal hook run with a call's context and session to get its mode.
The first function returning non-nil gives the mode instead of the
session's, such as an implementation override of one invocation.")

(defsubst mevedel-permissions-session-mode (session)
  "Return the permission mode in SESSION, or `ask' outside any session."
  (if (mevedel-session-p session)
      (or (mevedel-session-permission-mode session) mevedel-permissions-mode)
    'ask))

(defsubst mevedel-permissions--mode (context session)
  "Return the permission mode of the call CONTEXT in SESSION.
A `mevedel-permissions-mode-functions' override, else the session's.
The decision asks for it only in a branch that needs it: a read-only
command inside the workspace never does."
  (or (run-hook-with-args-until-success 'mevedel-permissions-mode-functions context session)
      (mevedel-permissions-session-mode session)))

(defun mevedel-permissions--mode-verdict (mode read-only-p edits-p inside)
  "Return the verdict of MODE on a call with READ-ONLY-P, EDITS-P and INSIDE."
  (pcase mode
    ('full-auto 'allow)
    ('edits (if (and (or read-only-p edits-p) inside) 'allow 'ask))
    ((or 'ask 'plan) (if (and read-only-p inside) 'allow 'ask))
    (_ (error "Unknown permission mode %S (expected one of %S)"
              mode mevedel-permissions-modes))))

(defun mevedel-permissions-judge (context session)
  "Judge the tool call CONTEXT (a pipeline context) in SESSION (or nil).
Return a plist: :verdict (`allow', (allow . RECORD), `ask', `deny' or
\(deny . REASON)), :by (what decided: `restriction', `delegated',
`rule', `own', `read-only', `answer' or `mode'), :rule (the rule that
matched), :mode, :command (the command's facts, for command tools),
:source, :directory and :root (the command, where it runs, the
workspace), :paths and :grant (the sandbox grant asked for; a grant makes any
verdict but a deny `ask', with :operation the verdict on the call
itself)."
  (mevedel-permissions--judge context session t))

(defun mevedel-permissions--judge (context session full)
  "Judge CONTEXT in SESSION: the plist of `mevedel-permissions-judge' if FULL.
Without FULL, return only the verdict, making nothing else: this is
the path of every call, and the plist is for cards only."
  (let* ((tool (plist-get context :tool))
         (args (plist-get context :args))
         (restricted (run-hook-with-args-until-success
                      'mevedel-permissions-restriction-functions context session))
         (check (and (not restricted) (mevedel-tool-check-permission tool)))
         (own (and check (funcall check args))))
    (if (and restricted (not (eq restricted 'allow)))
        (if full (list :verdict restricted :operation restricted :by 'restriction) restricted)
      (let* ((name (mevedel-tool-name tool))
             (root (mevedel-permissions--root context session))
             ;; A child agent's relative paths start at its own directory.
             ;; Most calls work in the workspace, ROOT itself, which is
             ;; expanded already: expanding it again would cost two
             ;; file name handler searches, the dearest step of a call.
             (directory (let ((called (mevedel-session-call-directory
                                       session (plist-get context :data-buffer))))
                          (if (eq called root)
                              root
                            (file-name-as-directory (expand-file-name called)))))
             (source (and (eq (car-safe own) 'command) (cdr own)))
             (facts (and source (mevedel-core-bash-permission source directory root)))
             (domain (and (mevedel-tool-get-domain tool)
                          (funcall (mevedel-tool-get-domain tool) args)))
             (paths (cond (source (plist-get facts :paths))
                          (domain nil)
                          (t (mapcar (lambda (path) (mevedel-remote-expand-file-name path directory))
                                     (mevedel-permissions-tool-paths tool args)))))
             (rules (mevedel-permissions-applicable-rules root))
             (rule (and rules (mevedel-permissions-matching-rule
                               rules (if source (list "Bash" name)
                                       (mevedel-permissions-rule-names name))
                               paths root
                               domain (and paths (mevedel-core-truenames
                                                  (mapcar (lambda (path)
                                                            (expand-file-name path root))
                                                          paths))))))
             (grant (mevedel-permissions-tool-grant tool args))
             (verdict nil)
             (by nil))
        (cond
         ;; A restriction's allow and a delegated call never ask, but an
         ;; explicit deny rule binds them as it binds every call.
         ((or restricted (eq own 'delegated))
          (if (eq (car rule) 'deny)
              (setq verdict 'deny by 'rule)
            (setq verdict 'allow by (if restricted 'restriction 'delegated) rule nil)))
         (rule (setq verdict (car rule) by 'rule))
         ((or (eq own 'deny) (eq (car-safe own) 'deny)) (setq verdict own by 'own))
         (source
          (cond ((plist-get facts :inside) (setq verdict 'allow by 'read-only))
                ((eq (mevedel-permissions--mode context session) 'full-auto)
                 (setq verdict 'allow by 'mode))
                ((mevedel-permissions--commands-answered-p session facts)
                 (setq verdict 'allow by 'answer))
                (t (setq verdict 'ask by 'mode))))
         ((eq (car-safe own) 'allow) (setq verdict own by 'own))
         ((memq own '(allow ask))
          (setq verdict (if (eq (mevedel-permissions--mode context session) 'full-auto)
                            'allow
                          own)
                by 'own))
         ((or (mevedel-permissions-answered-p session name)
              (and domain (mevedel-permissions-answered-p session (cons 'domain domain))))
          (setq verdict 'allow by 'answer))
         (t (setq verdict (mevedel-permissions--mode-verdict
                           (mevedel-permissions--mode context session)
                           (mevedel-tool-read-only-p tool) (mevedel-tool-snapshot-p tool)
                           (and (not domain) (mevedel-permissions--inside-p paths root)))
                  by 'mode)))
        (let ((final (if (and grant (not (eq verdict 'deny)) (not (eq (car-safe verdict) 'deny)))
                         'ask
                       verdict)))
          (if full
              (list :verdict final :operation verdict :by by :rule rule
                    :mode (mevedel-permissions--mode context session)
                    :command facts :source source :directory directory :root root
                    :paths paths :domain domain :grant grant)
            final))))))

(defun mevedel-permissions-decide-call (context session)
  "Decide the tool call CONTEXT (a pipeline context) in SESSION (or nil).
Return `allow', (allow . RECORD), `ask' or (deny . REASON); see the
Commentary for the order of rules, the tool's own check, answers and
the mode.  Outside a session the mode is `ask' and there are no
answers."
  (let ((verdict (mevedel-permissions--judge context session nil)))
    (if (eq verdict 'deny)
        (cons 'deny (mevedel-permissions-refusal-reason
                     (mevedel-tool-name (plist-get context :tool)) 'rule))
      verdict)))

(defun mevedel-permissions-decide-now (tool args &optional buffer)
  "Return what a fresh call of TOOL with ARGS would get, without asking.
The call is judged as if dispatched from BUFFER (default: the current
buffer), under its session's mode, rules and answers: `allow' when it
would run without a prompt, `deny' when it is refused, `ask' when
someone would have to be asked.  WebFetch decides a redirect to
another host with this."
  (let* ((buffer (or buffer (current-buffer)))
         (session (and (buffer-live-p buffer)
                       (buffer-local-value 'mevedel-session-current buffer)))
         (verdict (mevedel-permissions--judge
                   (list :tool tool :args args :data-buffer buffer) session nil)))
    (pcase verdict
      ((or 'allow `(allow . ,_)) 'allow)
      ((or 'deny `(deny . ,_)) 'deny)
      (_ 'ask))))

;;;; Cards

(defun mevedel-permissions--why (judged name)
  "Return the line saying why a call of tool NAME JUDGED so asks."
  (let ((facts (plist-get judged :command))
        (rule (plist-get judged :rule)))
    (pcase (plist-get judged :by)
      ('rule (format "the rule %S asks; \"always this session\" cannot override it"
                     rule))
      ('own (format "%s asks about these arguments" name))
      (_ (cond
          ((and facts (plist-get facts :read-only))
           (format "permission mode %s: it reads outside the workspace (%s)"
                   (plist-get judged :mode)
                   (string-join (plist-get facts :paths) ", ")))
          (facts
           (format "permission mode %s: %s" (plist-get judged :mode)
                   (string-join (or (plist-get facts :reasons)
                                    (list (format "`%s' is not read-only"
                                                  (plist-get facts :class))))
                                "; ")))
          ((plist-get judged :domain)
           (format "permission mode %s: it contacts %s" (plist-get judged :mode)
                   (plist-get judged :domain)))
          (t (format "permission mode %s: %s" (plist-get judged :mode)
                     (if (plist-get judged :paths)
                         "it is not read-only, or reaches outside the workspace"
                       "it is not read-only"))))))))

(defun mevedel-permissions--always (judged name)
  "Return (TEXT . KEYS) for the \"always\" answer to a call of NAME JUDGED so.
TEXT describes what the answer allows and KEYS are what it records;
return nil when no answer may allow the call."
  (let ((facts (plist-get judged :command)))
    (cond
     ;; A rule, or the tool's own check, asks every time: no answer
     ;; is consulted, so none is offered.
     ((memq (plist-get judged :by) '(rule own)) nil)
     ((plist-get judged :domain)
      (let ((host (plist-get judged :domain)))
        (cons (format "%s of %s for the rest of this session (not other hosts)" name host)
              (list (cons 'domain host)))))
     ((not facts) (cons (format "every %s call for the rest of this session" name)
                        (list name)))
     ((or (plist-get facts :unkeyed) (null (plist-get facts :keys))) nil)
     (t (cons (format "%s for the rest of this session (not other commands)"
                      (mapconcat (lambda (key) (format "`%s'" key))
                                 (plist-get facts :keys) ", "))
              (mapcar (lambda (key) (cons 'command key)) (plist-get facts :keys)))))))

(defun mevedel-permissions-cards (context session)
  "Return the permission cards the tool call CONTEXT in SESSION needs.
Each is a request plist (:tool :args :paths :id :why :always
:remember, and for grants :card `grant' or `escalation' with :grant).
:why tells what asked, :always what \"always this session\" allows
\(nil when it is not offered) and :remember the answers it records.
A command's cards also have :source, the command, and :effects, what
each of its commands does to files (`mevedel-core-bash-effects'),
asked for here because only a card shows it.
Additive grants share one card with the call itself; escalation, which
turns confinement off, has a card of its own after the call's."
  (let* ((judged (mevedel-permissions-judge context session))
         (tool (plist-get context :tool))
         (name (mevedel-tool-name tool))
         (verdict (plist-get judged :operation))
         (operation (not (or (eq verdict 'allow) (eq (car-safe verdict) 'allow))))
         (always (and operation (mevedel-permissions--always judged name)))
         (source (plist-get judged :source))
         (base (append
                (list :tool name :args (plist-get context :args)
                      :paths (plist-get judged :paths)
                      :id (plist-get context :tool-use-id))
                (and source
                     (list :source source
                           :effects (mevedel-core-bash-effects
                                     source (plist-get judged :directory)
                                     (plist-get judged :root))))))
         (call (append base (list :why (mevedel-permissions--why judged name)
                                  :always (car always) :remember (cdr always))))
         (grant (plist-get judged :grant)))
    (cond ((null grant) (list call))
          ((plist-get grant :escalated)
           (append (and operation (list call))
                   (list (append base (list :card 'escalation :grant grant)))))
          (t (list (append (if operation call base)
                           (list :card 'grant :grant grant
                                 :operation-granted (not operation))))))))

(defun mevedel-permissions-ask (context session answer present)
  "Ask about the tool call CONTEXT of SESSION, card by card.
ANSWER takes `approve' or (deny . REASON), once.  PRESENT is called
with each card's request (see `mevedel-permissions-cards') to show it
and returns a function taking the card away, or nil.  The request's
:answer function then gets the reply: `once', `session' (also
remembers the card's :remember answers), `deny', (deny . MESSAGE)
when the user refuses and tells the model MESSAGE instead, or
`cancelled' when the request that asked was interrupted; only the
first reply counts, and it takes the card away.  Return a function
that withdraws the question."
  (let ((cards (mevedel-permissions-cards context session))
        (name (mevedel-tool-name (plist-get context :tool)))
        (current nil))
    (cl-labels ((ask (request)
                  (let* ((open t)
                         (hide nil)
                         (close (lambda ()
                                  (prog1 open
                                    (when open
                                      (setq open nil)
                                      (when (functionp hide) (funcall hide)))))))
                    (setq current close)
                    (plist-put request :answer
                               (lambda (reply)
                                 (when (funcall close)
                                   (pcase reply
                                     ((or 'once 'session)
                                      (when (eq reply 'session)
                                        (mevedel-permissions-remember
                                         session (plist-get request :remember)))
                                      (setq cards (cdr cards))
                                      (if cards (ask (car cards)) (funcall answer 'approve)))
                                     ('cancelled
                                      (funcall answer (cons 'deny (format "the request that made \
this %s call was interrupted before the user answered" name))))
                                     (`(deny . ,message)
                                      (funcall answer
                                               (cons 'deny (mevedel-permissions-refusal-reason
                                                            name 'user message))))
                                     (_ (funcall answer
                                                 (cons 'deny (mevedel-permissions-refusal-reason
                                                              name 'user))))))))
                    (setq hide (funcall present request))
                    ;; PRESENT may have had the card answered already.
                    (when (and (not open) (functionp hide))
                      (funcall hide)))))
      (ask (car cards))
      (lambda () (funcall current)))))

(defun mevedel-permissions-refusal (tool how)
  "Return the result text the model sees when a call of TOOL is refused.
HOW is `rule' (a deny rule), `user' (the user said no) or
`headless' (nobody could be asked)."
  (concat "Permission denied: " (mevedel-permissions-refusal-reason tool how)))

(defun mevedel-permissions-refusal-reason (tool how &optional message)
  "Return why a call of TOOL was refused, for the model.
HOW is as for `mevedel-permissions-refusal'.  MESSAGE is what the
user who refused it tells the model instead, if anything."
  (pcase how
    ('rule (format "a permission rule forbids this %s call. \
Do not retry it; choose another approach or ask the user." tool))
    ((guard message) (format "the user declined this %s call and says instead: %s\n\
Do not retry it unchanged; follow what the user says." tool message))
    ('user (format "the user declined this %s call. \
Do not retry it unchanged; ask the user how to proceed." tool))
    (_ (format "this %s call needs approval and nobody can approve it in \
a headless run (use --permission-mode or an allow rule)." tool))))

(provide 'mevedel-permissions)
;;; mevedel-permissions.el ends here
