;;; agent-roles-test.el --- Tests of agent roles, model tiers and verdicts  -*- lexical-binding: t; -*-

;;; Commentary:

;; Roles from every source (built-ins, the defcustom, mevedel's and
;; Claude Code's role files in the workspace and globally), their
;; precedence, broken files and the parse cache; each step of model
;; resolution; verifier verdict lines.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-agent-roles)

(defmacro agent-roles-test--with-dirs (vars &rest body)
  "Run BODY with a fresh workspace and global home for role files.
VARS is (WORKSPACE HOME): the names BODY sees for the two directories;
role files go under WORKSPACE/.mevedel/agents, WORKSPACE/.claude/agents,
HOME/.mevedel/agents and HOME/.claude/agents.  Caches start empty."
  (declare (indent 1))
  `(let* ((,(car vars) (make-temp-file "roles-ws" t))
          (,(cadr vars) (make-temp-file "roles-home" t))
          (mevedel-agent-roles nil)
          (mevedel-agent-role-directories
           (list '(workspace . ".mevedel/agents") '(workspace-claude . ".claude/agents")
                 (cons 'global (expand-file-name ".mevedel/agents" ,(cadr vars)))
                 (cons 'global-claude (expand-file-name ".claude/agents" ,(cadr vars)))))
          (mevedel-agent-roles--file-cache (make-hash-table :test #'equal))
          (mevedel-agent-roles--dir-cache (make-hash-table :test #'equal))
          (mevedel-agent-roles--warned (make-hash-table :test #'equal))
          (mevedel-agent-roles--entries-cache (make-hash-table :test #'equal))
          (mevedel-agent-roles--recheck-seconds 0))
     (unwind-protect
         (progn ,@body)
       (delete-directory ,(car vars) t)
       (delete-directory ,(cadr vars) t))))

(defun agent-roles-test--write (dir relative text)
  "Write TEXT to RELATIVE under DIR, making directories; return the file."
  (let ((file (expand-file-name relative dir)))
    (make-directory (file-name-directory file) t)
    (with-temp-file file (insert text))
    file))

(defun agent-roles-test--error (form-thunk)
  "Return the message of the role error FORM-THUNK signals, or nil."
  (condition-case err
      (progn (funcall form-thunk) nil)
    (mevedel-agent-role-error (cadr err))))

;;;; Built-in roles

(ert-deftest mevedel-agent-roles:builtins ()
  (agent-roles-test--with-dirs (ws _home)
    (should (equal (mevedel-agent-role-names ws) '("explorer" "reviewer" "verifier" "worker")))
    (should-not (mevedel-agent-role nil ws))
    (should-not (mevedel-agent-role "default" ws))
    (should-not (mevedel-agent-role "" ws))
    (let ((worker (mevedel-agent-role "worker" ws))
          (explorer (mevedel-agent-role "explorer" ws))
          (verifier (mevedel-agent-role "verifier" ws))
          (reviewer (mevedel-agent-role "reviewer" ws)))
      ;; Every named role reports and looks around.
      (dolist (role (list worker explorer verifier reviewer))
        (should (member "SendMessage" (plist-get role :tools)))
        (should (member "ListAgents" (plist-get role :tools)))
        (should (member "WriteStdin" (plist-get role :tools)))
        (should (stringp (plist-get role :description)))
        (should (stringp (plist-get role :prompt)))
        (should (memq 'workspace-instructions (plist-get role :system-components)))
        (should (memq 'environment (plist-get role :system-components)))
        (should-not (plist-get role :max-turns)))
      ;; Agent brings the whole control bundle; leaves have none of it.
      (dolist (role (list worker explorer))
        (should (plist-get role :delegate))
        (should-not (plist-get role :leaf))
        (dolist (tool '("Agent" "WaitAgent" "InterruptAgent"))
          (should (member tool (plist-get role :tools)))))
      (dolist (role (list verifier reviewer))
        (should-not (plist-get role :delegate))
        (should (plist-get role :leaf))
        (dolist (tool '("Agent" "WaitAgent" "InterruptAgent" "ApplyPatch"))
          (should-not (member tool (plist-get role :tools)))))
      (should-not (plist-get worker :read-only))
      (should (member "ApplyPatch" (plist-get worker :tools)))
      (should (memq 'memory-index (plist-get worker :system-components)))
      (should-not (memq 'memory-index (plist-get explorer :system-components)))
      (should (memq 'skills-roster (plist-get explorer :system-components)))
      (should-not (memq 'skills-roster (plist-get verifier :system-components)))
      (should (plist-get explorer :read-only))
      (should-not (member "ApplyPatch" (plist-get explorer :tools)))
      (should (eq (plist-get explorer :workload) 'explore))
      (should (plist-get verifier :verdict))
      (should (eq (plist-get verifier :workload) 'verify))
      (should (string-match-p "VERDICT: PARTIAL" (plist-get verifier :prompt)))
      (should (eq (plist-get reviewer :workload) 'review))
      (should (string-match-p "overall_confidence_score" (plist-get reviewer :prompt))))))

(ert-deftest mevedel-agent-roles:unknown-name-lists-roles ()
  (agent-roles-test--with-dirs (ws _home)
    (let ((err (should-error (mevedel-agent-role "planner" ws) :type 'user-error)))
      (should (string-match-p "Unknown agent role \"planner\"" (cadr err)))
      (should (string-match-p "explorer, reviewer, verifier, worker" (cadr err))))))

;;;; User roles

(ert-deftest mevedel-agent-roles:defcustom-role ()
  (agent-roles-test--with-dirs (ws _home)
    (let ((mevedel-agent-roles
           '(("docs" :description "Writes documentation" :tools ("Read" "ApplyPatch")
              :model fast :max-turns 20 :prompt "Write docs."))))
      (let ((role (mevedel-agent-role "docs" ws)))
        (should (eq (plist-get role :source) 'custom))
        (should (equal (plist-get role :tools) '("Read" "ApplyPatch" "SendMessage" "ListAgents")))
        (should (eq (plist-get role :model) 'fast))
        (should (= (plist-get role :max-turns) 20))
        (should-not (plist-get role :delegate))
        (should (equal (plist-get role :system-components)
                       '(identity tool-guidance environment workspace-instructions)))
        (should (member "docs" (mevedel-agent-role-names ws)))))
    (let ((mevedel-agent-roles '(("Bad Name" :description "x"))))
      (should-error (mevedel-agent-role "worker" ws) :type 'mevedel-agent-role-error))
    (let ((mevedel-agent-roles '(("nodesc" :tools ("Read")))))
      (should (string-match-p "needs a :description"
                              (agent-roles-test--error (lambda () (mevedel-agent-role "x" ws))))))))

(ert-deftest mevedel-agent-roles:mevedel-file ()
  (agent-roles-test--with-dirs (ws _home)
    (agent-roles-test--write ws ".mevedel/agents/perf.md" "---
# A role of our own.
description: \"Measures: runs the benches\"
tools: [Read, Bash, Agent]
model: Claude:claude-opus
effort: high
max-turns: 30
read-only: true
verdict: false
workload: verify
system-components:
  - workspace-instructions
  - environment
---
Run the benches and report the figures.
")
    (let ((role (mevedel-agent-role "perf" ws)))
      (should (equal (plist-get role :name) "perf"))
      (should (eq (plist-get role :source) 'workspace))
      (should (equal (plist-get role :description) "Measures: runs the benches"))
      (should (equal (plist-get role :tools)
                     '("Read" "Bash" "Agent" "SendMessage" "ListAgents" "WaitAgent"
                       "InterruptAgent" "WriteStdin")))
      (should (plist-get role :delegate))
      (should (equal (plist-get role :model) "Claude:claude-opus"))
      (should (eq (plist-get role :effort) 'high))
      (should (= (plist-get role :max-turns) 30))
      (should (plist-get role :read-only))
      (should-not (plist-get role :verdict))
      (should (eq (plist-get role :workload) 'verify))
      (should (equal (plist-get role :system-components) '(workspace-instructions environment)))
      (should (equal (plist-get role :prompt) "Run the benches and report the figures.")))))

(ert-deftest mevedel-agent-roles:claude-file ()
  (agent-roles-test--with-dirs (ws home)
    (agent-roles-test--write ws ".claude/agents/code-reviewer.md" "---
name: code-reviewer
description: Expert code review specialist. Use proactively after writing code.
tools: Read, Grep, Glob, Bash, Edit, Task, mcp__github__get_pr
model: sonnet
color: blue
---

You are a senior code reviewer.
Review the diff.
")
    (agent-roles-test--write home ".claude/agents/helper.md" "---
name: helper
description: \"Inherits everything.\\nSecond line.\"
model: inherit
---
Help.
")
    (let ((role (mevedel-agent-role "code-reviewer" ws)))
      (should (eq (plist-get role :source) 'workspace-claude))
      ;; Claude's names become mevedel's; unknown ones stay as written.
      (should (equal (plist-get role :tools)
                     '("Read" "Grep" "Glob" "Bash" "ApplyPatch" "Agent" "mcp__github__get_pr"
                       "SendMessage" "ListAgents" "WaitAgent" "InterruptAgent" "WriteStdin")))
      (should (eq (plist-get role :model) 'balanced))
      (should (equal (plist-get role :prompt) "You are a senior code reviewer.\nReview the diff.")))
    (let ((role (mevedel-agent-role "helper" ws)))
      (should (eq (plist-get role :source) 'global-claude))
      (should (equal (plist-get role :description) "Inherits everything.\nSecond line."))
      (should-not (plist-get role :model))
      ;; No tools line: the role inherits the delegator's tools.
      (should (eq (plist-get role :tools) t))
      (should (plist-get role :delegate)))
    ;; Folded block scalars and block lists, as YAML writes them.
    (agent-roles-test--write ws ".claude/agents/folded.md" "---
name: folded
description: >
  Reviews pull requests
  before they merge.
tools:
  - Read
  - \"Grep\"
model: claude-opus-4-1
---
Body.
")
    (let ((role (mevedel-agent-role "folded" ws)))
      (should (equal (plist-get role :description) "Reviews pull requests before they merge."))
      (should (equal (seq-take (plist-get role :tools) 2) '("Read" "Grep")))
      ;; A full model name is kept for resolution (one backend must offer it).
      (should (eq (plist-get role :model) 'claude-opus-4-1)))
    (dolist (pair '(("opus" . strong) ("haiku" . fast)))
      (agent-roles-test--write ws ".claude/agents/m.md"
                               (format "---\nname: m\ndescription: d\nmodel: %s\n---\nx\n" (car pair)))
      (should (eq (plist-get (mevedel-agent-role "m" ws) :model) (cdr pair))))))

(ert-deftest mevedel-agent-roles:precedence ()
  (agent-roles-test--with-dirs (ws home)
    (let ((role-file (lambda (dir text)
                       (agent-roles-test--write dir ".mevedel/agents/worker.md"
                                                (format "---\ndescription: %s\n---\n" text))))
          (claude-file (lambda (dir text)
                         (agent-roles-test--write dir ".claude/agents/w.md"
                                                  (format "---\nname: worker\ndescription: %s\n---\n"
                                                          text))))
          (description (lambda () (plist-get (mevedel-agent-role "worker" ws) :description))))
      (should (eq (plist-get (mevedel-agent-role "worker" ws) :source) 'builtin))
      (funcall claude-file home "global claude")
      (should (equal (funcall description) "global claude"))
      (funcall role-file home "global mevedel")
      (should (equal (funcall description) "global mevedel"))
      (let ((mevedel-agent-roles '(("worker" :description "custom"))))
        (should (equal (funcall description) "custom"))
        (funcall claude-file ws "workspace claude")
        (should (equal (funcall description) "workspace claude"))
        (funcall role-file ws "workspace mevedel")
        (should (equal (funcall description) "workspace mevedel"))
        ;; A higher source replaces the role wholly: no built-in tools leak in.
        (should (eq (plist-get (mevedel-agent-role "worker" ws) :tools) t))
        (should (equal (cl-count "worker" (mevedel-agent-role-names ws) :test #'equal) 1))))))

(ert-deftest mevedel-agent-roles:bad-front-matter-names-file-and-line ()
  (agent-roles-test--with-dirs (ws _home)
    (pcase-dolist (`(,text ,line ,what)
                   '(("no front matter\n" 1 "starts with front matter")
                     ("---\ndescription: x\n" 1 "no closing")
                     ("---\ndescription: x\nthis is not yaml\n---\n" 3 "key: value")
                     ("---\ndescription: x\ncolour: red\n---\n" 3 "unknown key `colour'")
                     ("---\ndescription: x\nmax-turns: many\n---\n" 3 "positive integer")
                     ("---\ndescription: x\nread-only: maybe\n---\n" 3 "true or false")
                     ("---\ndescription: x\nworkload: build\n---\n" 3 "one of explore")
                     ("---\ndescription: x\ntools: [Read, Bash\n---\n" 3 "closing `]'")
                     ("---\ndescription: x\ndescription: y\n---\n" 3 "given twice")
                     ("---\ntools: Read\n---\n" 1 "needs `description'")))
      (let ((file (agent-roles-test--write ws ".mevedel/agents/broken.md" text)))
        (let ((message (agent-roles-test--error (lambda () (mevedel-agent-role "broken" ws)))))
          (should message)
          (should (string-match-p (regexp-quote (format "%s:%d:" (abbreviate-file-name file) line))
                                  message))
          (should (string-match-p (regexp-quote what) message)))))
    ;; A Claude file needs its name.
    (let ((file (agent-roles-test--write ws ".claude/agents/anon.md" "---\ndescription: x\n---\n")))
      (should (string-match-p (regexp-quote (format "%s:1: a Claude Code subagent file needs `name'"
                                                    (abbreviate-file-name file)))
                              (agent-roles-test--error (lambda () (mevedel-agent-role "anon" ws))))))))

(ert-deftest mevedel-agent-roles:broken-file-is-left-out-loudly ()
  (agent-roles-test--with-dirs (ws _home)
    (agent-roles-test--write ws ".mevedel/agents/good.md" "---\ndescription: fine\n---\n")
    (agent-roles-test--write ws ".mevedel/agents/bad.md" "---\ndescription: x\nnope\n---\n")
    (let ((warnings nil))
      (cl-letf (((symbol-function 'display-warning)
                 (lambda (_type message &rest _) (push message warnings))))
        (should (equal (mevedel-agent-role-names ws)
                       '("explorer" "good" "reviewer" "verifier" "worker")))
        (should (equal (mevedel-agent-role-names ws)
                       '("explorer" "good" "reviewer" "verifier" "worker"))))
      ;; One warning for this version of the file, naming it and its line.
      (should (= (length warnings) 1))
      (should (string-match-p "bad.md:3: cannot read this line" (car warnings))))
    ;; The other roles still resolve.
    (should (equal (plist-get (mevedel-agent-role "good" ws) :description) "fine"))))

(ert-deftest mevedel-agent-roles:describe-lists-sources-and-broken-files ()
  (agent-roles-test--with-dirs (ws _home)
    (agent-roles-test--write ws ".mevedel/agents/worker.md" "---\ndescription: Our worker\n---\n")
    (agent-roles-test--write ws ".mevedel/agents/bad.md" "---\ndescription: x\n")
    (mevedel-agent-roles-describe ws)
    (with-current-buffer "*mevedel agent roles*"
      (let ((text (buffer-string)))
        (should (string-match-p "worker +Our worker\n +from .*\\.mevedel/agents/worker\\.md; tools: inherited"
                                text))
        (should (string-match-p "worker +(hidden by the one above) builtin" text))
        (should (string-match-p "BROKEN .*bad\\.md:1: the front matter opened here has no closing" text))
        (should (string-match-p "reviewer +Code review" text))))
    (kill-buffer "*mevedel agent roles*")))

(ert-deftest mevedel-agent-roles:duplicate-names-in-one-directory ()
  (agent-roles-test--with-dirs (ws _home)
    (agent-roles-test--write ws ".claude/agents/a.md" "---\nname: twin\ndescription: a\n---\n")
    (agent-roles-test--write ws ".claude/agents/b.md" "---\nname: twin\ndescription: b\n---\n")
    (let ((message (agent-roles-test--error (lambda () (mevedel-agent-role "twin" ws)))))
      (should (string-match-p "role `twin' is also defined in" message)))))

(ert-deftest mevedel-agent-roles:parse-is-cached-by-file-identity ()
  (agent-roles-test--with-dirs (ws _home)
    (let ((file (agent-roles-test--write ws ".mevedel/agents/one.md" "---\ndescription: v1\n---\n"))
          (reads 0))
      (advice-add 'mevedel-agent-roles--front-matter :before (lambda (&rest _) (cl-incf reads))
                  '((name . count)))
      (unwind-protect
          (progn
            (dotimes (_ 5) (mevedel-agent-role "one" ws) (mevedel-agent-role-names ws))
            (should (= reads 1))
            ;; Within the recheck time a file is not even looked at.
            (let ((mevedel-agent-roles--recheck-seconds 60)
                  (stats 0))
              (cl-letf* ((identity (symbol-function 'mevedel-agent-roles--identity))
                         ((symbol-function 'mevedel-agent-roles--identity)
                          (lambda (f) (when (equal f file) (cl-incf stats)) (funcall identity f))))
                (dotimes (_ 5) (mevedel-agent-role "one" ws))
                (should (= stats 0))))
            ;; A changed file (another size and time) is read again, once.
            (with-temp-file file (insert "---\ndescription: version two\n---\n"))
            (set-file-times file (time-add nil 10))
            (dotimes (_ 3)
              (should (equal (plist-get (mevedel-agent-role "one" ws) :description) "version two")))
            (should (= reads 2))
            ;; A new file appears without a restart; a removed one goes.
            (agent-roles-test--write ws ".mevedel/agents/two.md" "---\ndescription: t\n---\n")
            (set-file-times (file-name-directory file) (time-add nil 20))
            (should (member "two" (mevedel-agent-role-names ws)))
            (delete-file file)
            (set-file-times (file-name-directory file) (time-add nil 30))
            (should-not (member "one" (mevedel-agent-role-names ws))))
        (advice-remove 'mevedel-agent-roles--front-matter 'count)))))

;;;; The roles and tiers the model is told of

(ert-deftest mevedel-agent-roles:the-prompt-lists-roles-and-tiers-the-agent-schema-none ()
  (require 'mevedel)
  (mevedel--load)
  (require 'mevedel-tool-agent)
  (agent-roles-test--with-dirs (ws _home)
    (agent-roles-test--write ws ".mevedel/agents/perf.md"
                             "---\ndescription: Runs the benches\n---\nRun them.\n")
    (agent-roles-test--write ws ".claude/agents/code-reviewer.md"
                             "---\nname: code-reviewer\ndescription: Reviews code\n---\nReview.\n")
    (let* ((other (make-temp-file "roles-other" t))
           (mevedel-agent-tiers '((fast) (deep :effort high)))
           (registered (mevedel-tool-gptel-tool (mevedel-tool-get "Agent")))
           (schema (copy-tree (gptel-tool-args registered) t))
           (chat (mevedel-chat-get-create ws))
           (elsewhere (mevedel-chat-get-create other))
           (roster (lambda (chat)
                     (nth 2 (car (mevedel-prompt-render chat '(agent-roles))))))
           (update (lambda ()
                     (prog1 (cl-find-if (lambda (block)
                                          (string-search "component=\"agent-roles\"" block))
                                        (mevedel-prompt-context-updates chat))
                       (mevedel-prompt-note-accepted chat)))))
      (unwind-protect
          (progn
            (should (memq 'agent-roles mevedel-system-components))
            (should (string-match-p "^- perf: Runs the benches$" (funcall roster chat)))
            (should (string-match-p "^- code-reviewer: Reviews code$" (funcall roster chat)))
            (should (string-match-p "Model tiers ([^)]*): fast, deep\\'" (funcall roster chat)))
            ;; Another workspace's chat is told its own roles.
            (should-not (string-match-p "perf" (funcall roster elsewhere)))
            (should (string-match-p "^- worker: " (funcall roster elsewhere)))
            ;; The first request freezes the list in the system text; a
            ;; role file added later is a context update, and the tools
            ;; the chat offers are the registered ones, untouched.
            (should (string-match-p "- perf: " (mevedel-prompt-system-text chat)))
            (should-not (funcall update))
            (agent-roles-test--write ws ".mevedel/agents/docs.md"
                                     "---\ndescription: Writes docs\n---\nWrite.\n")
            (set-file-times (expand-file-name ".mevedel/agents" ws) (time-add nil 10))
            (should (string-match-p "- docs: Writes docs" (or (funcall update) "")))
            (should-not (string-match-p "docs" (mevedel-prompt-system-text chat)))
            (should (eq (cl-find "Agent" (mevedel-chat-tools chat)
                                 :key #'gptel-tool-name :test #'equal)
                        registered))
            (should (equal (gptel-tool-args registered) schema))
            (let ((role (cl-find "role" schema :key (lambda (arg) (plist-get arg :name))
                                 :test #'equal)))
              (should-not (plist-get role :enum))
              (should-not (string-match-p "worker" (plist-get role :description))))
            ;; Changed tiers are an update too.
            (let ((mevedel-agent-tiers '((quick))))
              (should (string-match-p "Model tiers ([^)]*): quick" (or (funcall update) "")))))
        (kill-buffer (mevedel-chat-data-buffer chat))
        (kill-buffer (mevedel-chat-data-buffer elsewhere))
        (delete-directory other t)))))

(ert-deftest mevedel-agent-roles:a-delegating-role-file-is-told-the-roles ()
  (agent-roles-test--with-dirs (ws _home)
    (agent-roles-test--write ws ".mevedel/agents/lead.md"
                             "---\ndescription: Leads\ntools: [Read, Agent]\n---\nLead.\n")
    (agent-roles-test--write ws ".mevedel/agents/leaf.md"
                             "---\ndescription: Leaf\ntools: [Read]\n---\nRead.\n")
    (should (memq 'agent-roles (plist-get (mevedel-agent-role "lead" ws) :system-components)))
    (should-not (memq 'agent-roles
                      (plist-get (mevedel-agent-role "leaf" ws) :system-components)))
    (dolist (name '("worker" "explorer"))
      (should (memq 'agent-roles (plist-get (mevedel-agent-role name ws) :system-components))))))

;;;; Model tiers

(defvar agent-roles-test--backends nil
  "The gptel backends the tier tests use, as (NAME . BACKEND).")

(defun agent-roles-test--backends ()
  "Return two test backends: Alpha (a1, a2) and Beta (b1, shared)."
  (or agent-roles-test--backends
      (setq agent-roles-test--backends
            (list (cons "Alpha" (gptel-make-openai "Alpha" :key "k" :models '(a1 a2 shared)))
                  (cons "Beta" (gptel-make-openai "Beta" :key "k" :models '(b1 shared)))))))

(defmacro agent-roles-test--with-tiers (tiers workloads &rest body)
  "Run BODY with TIERS and WORKLOADS as the tier options, and the test backends."
  (declare (indent 2))
  `(let ((mevedel-agent-tiers ,tiers)
         (mevedel-agent-workload-tiers ,workloads))
     (cl-letf (((symbol-function 'mevedel-gptel-backends) #'agent-roles-test--backends))
       ,@body)))

(defun agent-roles-test--parent ()
  "Return the delegator's model plist of the tier tests."
  (list :backend (cdr (assoc "Alpha" (agent-roles-test--backends))) :model 'a1 :effort 'medium))

(defun agent-roles-test--names (plist)
  "Return PLIST, a resolved model, with its backend's name."
  (list (gptel-backend-name (plist-get plist :backend)) (plist-get plist :model)
        (plist-get plist :effort)))

(ert-deftest mevedel-agent-roles:resolution-order ()
  (agent-roles-test--with-tiers
      '((fast :backend "Beta" :model b1 :effort low)
        (strong :backend "Alpha" :model a2 :effort high)
        (deeper :effort high))
      '((explore . fast) (review . strong) (verify . nil) (summary . "Beta:shared"))
    (let ((parent (agent-roles-test--parent)))
      ;; Nothing chosen: the delegator's model and effort.
      (should (equal (agent-roles-test--names (mevedel-agent-resolve-model nil nil parent))
                     '("Alpha" a1 medium)))
      ;; A workload without a tier inherits.
      (should (equal (agent-roles-test--names (mevedel-agent-resolve-model nil 'verify parent))
                     '("Alpha" a1 medium)))
      ;; The workload's tier.
      (should (equal (agent-roles-test--names (mevedel-agent-resolve-model nil 'explore parent))
                     '("Beta" b1 low)))
      ;; A workload mapped to BACKEND:MODEL: no effort carried over to another model.
      (should (equal (agent-roles-test--names (mevedel-agent-resolve-model nil 'summary parent))
                     '("Beta" shared nil)))
      ;; The explicit (or role) model beats the workload.
      (should (equal (agent-roles-test--names (mevedel-agent-resolve-model 'strong 'explore parent))
                     '("Alpha" a2 high)))
      (should (equal (agent-roles-test--names (mevedel-agent-resolve-model "fast" 'review parent))
                     '("Beta" b1 low)))
      (should (equal (agent-roles-test--names
                      (mevedel-agent-resolve-model "Alpha:a2" 'explore parent))
                     '("Alpha" a2 nil)))
      ;; A tier of effort alone keeps the model it is applied to.
      (should (equal (agent-roles-test--names (mevedel-agent-resolve-model 'deeper 'explore parent))
                     '("Beta" b1 high)))
      ;; An explicit effort has the last word.
      (should (equal (agent-roles-test--names
                      (mevedel-agent-resolve-model 'strong 'explore parent "low"))
                     '("Alpha" a2 low)))
      ;; A bare model one backend offers.
      (should (equal (agent-roles-test--names (mevedel-agent-resolve-model "b1" nil parent))
                     '("Beta" b1 nil)))
      ;; An empty string is no choice.
      (should (equal (agent-roles-test--names (mevedel-agent-resolve-model "" nil parent))
                     '("Alpha" a1 medium)))
      (should (equal (mevedel-agent-tier-names) '("fast" "strong" "deeper"))))))

(ert-deftest mevedel-agent-roles:resolution-errors ()
  (agent-roles-test--with-tiers '((fast :backend "Gamma" :model g1) (half :model a1))
      '((explore . fast))
    (let ((parent (agent-roles-test--parent)))
      (should (string-match-p "No gptel backend \"Nope\" (backends: Alpha, Beta)"
                              (cadr (should-error (mevedel-agent-resolve-model "Nope:x" nil parent)
                                                  :type 'user-error))))
      (should (string-match-p "backend Alpha has no model zz (models: a1, a2, shared)"
                              (cadr (should-error (mevedel-agent-resolve-model "Alpha:zz" nil parent)
                                                  :type 'user-error))))
      (should (string-match-p "Model huge is no tier.*tiers: fast, half"
                              (cadr (should-error (mevedel-agent-resolve-model "huge" nil parent)
                                                  :type 'user-error))))
      (should (string-match-p "offered by several backends (Alpha, Beta)"
                              (cadr (should-error (mevedel-agent-resolve-model "shared" nil parent)
                                                  :type 'user-error))))
      ;; A tier naming a backend that does not exist says so when used.
      (should (string-match-p "No gptel backend \"Gamma\""
                              (cadr (should-error (mevedel-agent-resolve-model nil 'explore parent)
                                                  :type 'user-error))))
      (should (string-match-p "Tier half needs both"
                              (cadr (should-error (mevedel-agent-resolve-model 'half nil parent)
                                                  :type 'user-error))))
      (should-error (mevedel-agent-resolve-model nil 'build parent) :type 'user-error))))

;;;; Verdicts

(ert-deftest mevedel-agent-roles:verdicts ()
  (pcase-dolist (`(,text ,verdict)
                 '(("Checked it.\n\nVERDICT: PASS" "PASS")
                   ("Broken at foo.el:3.\nVERDICT: FAIL\n\n  \n" "FAIL")
                   ("No network.\n   VERDICT: PARTIAL  " "PARTIAL")
                   ;; Two verdict lines: ambiguous.
                   ("VERDICT: FAIL\nthen I looked again\nVERDICT: PASS" nil)
                   ("**Verdict:** fine\nVERDICT: PASS" nil)
                   ;; A line after the verdict.
                   ("VERDICT: PASS\nHope this helps." nil)
                   ;; Other spellings.
                   ("verdict: pass" nil)
                   ("Verdict: PASS" nil)
                   ("VERDICT: PASSED" nil)
                   ("VERDICT:PASS" nil)
                   ("**VERDICT: PASS**" nil)
                   ("The verdict is clear.\nVERDICT: PASS" "PASS")
                   ("" nil)
                   ("No verdict here." nil)))
    (should (equal (mevedel-agent-parse-verdict text) verdict)))
  (should-not (mevedel-agent-parse-verdict nil)))

(provide 'agent-roles-test)
;;; agent-roles-test.el ends here
