;;; agent-test.el --- Tests of the retained agent runtime  -*- lexical-binding: t; -*-

;;; Commentary:

;; Naming, path resolution, the frozen configuration's closed schema,
;; capacity, the settlement gate and its races, mail and WaitAgent, and
;; turn limits.  Child turns are not sent to a model here: sending is
;; replaced by a recorder, and a test ends a turn by calling the
;; `:on-done' the chat would call.  The end-to-end tests
;; (test/e2e/agents-e2e-test.el) run real turns.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-agent-roles)
(require 'mevedel)
(mevedel--load)
(require 'mevedel-agent)

;;;; Names

(ert-deftest mevedel-agent:names-are-normalised-exactly ()
  (dolist (case '(("Review code-block copy" . "review-code-block-copy")
                  ("" . "agent")
                  ("!!!" . "agent")
                  ("root" . "agent-root")
                  ("ROOT" . "agent-root")
                  ("--Tests  and   docs--" . "tests-and-docs")
                  ("snake_case_ok" . "snake_case_ok")
                  ("été x" . "t-x")
                  ("a/b" . "a-b")))
    (should (equal (mevedel-agent-normalize-name (car case)) (cdr case))))
  ;; Capped at 40, at the last hyphen of the first 40 characters.
  (let ((long "implement the retained multi agent runtime with mail and waits"))
    (should (equal (mevedel-agent-normalize-name long) "implement-the-retained-multi-agent"))
    (should (<= (length (mevedel-agent-normalize-name long)) 40)))
  ;; Without a hyphen the first 40 characters stay.
  (should (equal (mevedel-agent-normalize-name (make-string 50 ?x)) (make-string 40 ?x))))

;;;; A session with agents, turns recorded instead of sent

(defvar agent-test--sends nil
  "The sends recorded: (CHAT TEXT ON-DONE), newest first.")

(defmacro agent-test--with-root (var &rest body)
  "Run BODY with VAR a root chat of a fresh workspace, child turns recorded."
  (declare (indent 1))
  `(let* ((dir (make-temp-file "agent-runtime" t))
          (,var (mevedel-chat-get-create dir))
          (agent-test--sends nil)
          (mevedel-agent-start-functions nil)
          (mevedel-agent-stop-functions nil)
          (mevedel-agent-prompt-functions nil))
     (setf (mevedel-chat-backend ,var) (gptel-make-openai "agent-test" :key "x"
                                                          :models '(m))
           (mevedel-chat-model ,var) 'm)
     (cl-letf (((symbol-function 'mevedel-chat-send)
                (lambda (chat text &rest keys)
                  ;; The task goes into the transcript, as a real send does.
                  (with-current-buffer (mevedel-chat-data-buffer chat)
                    (goto-char (point-max))
                    (insert text "\n"))
                  (push (list chat text (plist-get keys :on-done)) agent-test--sends)
                  nil)))
       (unwind-protect (progn ,@body)
         (kill-buffer (mevedel-chat-data-buffer ,var))
         (delete-directory dir t)))))

(defun agent-test--spawn (chat name &rest args)
  "Spawn a child of CHAT named NAME with more ARGS; return its path."
  (mevedel-agent-spawn chat (append (list :task_name name :message (format "Task of %s" name))
                                    args)))

(defun agent-test--send-of (path)
  "Return the latest recorded send of the agent PATH."
  (cl-find path agent-test--sends
           :key (lambda (send) (mevedel-chat-agent (car send))) :test #'equal))

(defun agent-test--finish (path outcome &optional answer)
  "End the running turn of PATH with OUTCOME; its response is ANSWER."
  (let* ((send (agent-test--send-of path))
         (chat (car send)))
    (when answer
      (with-current-buffer (mevedel-chat-data-buffer chat)
        (goto-char (point-max))
        (insert (propertize answer 'gptel 'response))))
    (setq agent-test--sends (delq send agent-test--sends))
    (funcall (nth 2 send) chat outcome)))

(defun agent-test--mail (chat recipient)
  "Return the unread mail of RECIPIENT in CHAT's session."
  (mevedel-core-mailbox-unread (mevedel-session-store-handle (mevedel-chat-session chat))
                               recipient))

(ert-deftest mevedel-agent:repeated-names-get-suffixes-among-retained-and-preparing ()
  (agent-test--with-root root
    (should (equal (agent-test--spawn root "Review code-block copy")
                   "/root/review-code-block-copy"))
    (should (equal (agent-test--spawn root "review code block copy")
                   "/root/review-code-block-copy-2"))
    ;; A preparing sibling (summary context) occupies its path too.
    (cl-letf (((symbol-function 'mevedel-agent--summarize) (lambda (&rest _) #'ignore)))
      (should (equal (agent-test--spawn root "review code block copy" :context "summary")
                     "/root/review-code-block-copy-3")))
    (should (equal (agent-test--spawn root "review-code-block-copy")
                   "/root/review-code-block-copy-4"))
    ;; The preparing one is not listed.
    (should (equal (mapcar (lambda (a) (plist-get a :path)) (mevedel-agent-list root))
                   '("/root/review-code-block-copy" "/root/review-code-block-copy-2"
                     "/root/review-code-block-copy-4")))
    ;; Cancelling the preparation frees its path at once.
    (mevedel-agent-cancel-preparation root "/root/review-code-block-copy-3")
    (should (equal (agent-test--spawn root "review code block copy")
                   "/root/review-code-block-copy-3"))))

(ert-deftest mevedel-agent:children-are-created-below-their-caller ()
  (agent-test--with-root root
    (let* ((path (agent-test--spawn root "implementation"))
           (child (car (agent-test--send-of path))))
      (should (equal (agent-test--spawn child "tests") "/root/implementation/tests"))
      ;; The child's own system text names it; the grandchild inherits it.
      (should (string-match-p "retained agent /root/implementation, working for /root"
                              (mevedel-chat-frozen-system child)))
      (should (equal (mevedel-agent--path-of child) "/root/implementation")))))

;; Issue 42 item 12: the roster lists only the families this session
;; can use: agent:// once an agent is retained, not before.
(ert-deftest mevedel-agent:the-resource-roster-follows-the-session ()
  (agent-test--with-root root
    (let ((roster (lambda () (mevedel-prompt--resource-roster root))))
      (should (string-search "- mevedel://" (funcall roster)))
      (should (string-search "- work://" (funcall roster)))
      (should (string-search "- history://root" (funcall roster)))
      (should (string-search "- memory://root" (funcall roster)))
      (should-not (string-search "agent://" (funcall roster)))
      (should-not (string-search "memory://journal/" (funcall roster)))
      (agent-test--spawn root "helper")
      (should (string-search "- agent://" (funcall roster))))))

;; Issue 42 item 12: a clicked agent:// or history://root/ address, in
;; any spelling the resolver accepts, opens that agent's view.
(ert-deftest mevedel-agent:clicked-agent-addresses-open-the-agent ()
  (require 'mevedel-agent-view)
  (agent-test--with-root root
    (let ((path (agent-test--spawn root "helper"))
          (shown nil))
      (cl-letf (((symbol-function 'pop-to-buffer)
                 (lambda (buffer &rest _) (push (mevedel-chat-agent (mevedel-view-chat buffer)) shown))))
        (with-temp-buffer
          (setq-local mevedel-view--chat root)
          (should (mevedel-agent-view--visit-address "agent://root/helper"))
          (should (mevedel-agent-view--visit-address "history://root/%68elper/"))
          (should-not (mevedel-agent-view--visit-address "work://notes.md"))
          (should-error (mevedel-agent-view--visit-address "agent://root/../x") :type 'user-error)))
      (should (equal shown (list path path))))))

(ert-deftest mevedel-agent:inputs-are-validated-before-reservation ()
  (agent-test--with-root root
    (dolist (args '((:task_name "a")
                    (:task_name "a" :message "  ")
                    (:message "m")
                    (:task_name "a" :message "m" :context "0")
                    (:task_name "a" :message "m" :context "-3")
                    (:task_name "a" :message "m" :context "some")
                    (:task_name "a" :message "m" :role "nonexistent")
                    (:task_name "a" :message "m" :working_directory "/")
                    (:task_name "a" :message "m" :working_directory "no/such/dir")))
      (should-error (mevedel-agent-spawn root args) :type 'user-error))
    (should-not (mevedel-agent-list root))
    (should-not agent-test--sends)
    ;; A blocked initial task releases its reservation.
    (let ((mevedel-agent-prompt-functions (list (lambda (_path _text) '(block . "no")))))
      (should-error (agent-test--spawn root "a") :type 'user-error))
    (should (equal (agent-test--spawn root "a") "/root/a"))))

(ert-deftest mevedel-agent:a-working-directory-is-where-the-childs-tools-work ()
  (agent-test--with-root root
    (let* ((dir (file-name-as-directory (file-truename (mevedel-chat-root root))))
           (sub (expand-file-name "sub/" dir))
           (mevedel-permissions-rules (append '((allow "Bash") (allow "ApplyPatch"))
                                              mevedel-permissions-rules)))
      (make-directory sub)
      (with-temp-file (expand-file-name "here.txt" sub) (insert "inside sub\n"))
      (with-temp-file (expand-file-name "top.txt" dir) (insert "inside the root\n"))
      (let* ((path (agent-test--spawn root "sub work" :working_directory "sub"))
             (child (car (agent-test--send-of path))))
        ;; Relative Read, Glob and Grep start at the child's directory.
        (should (string-match-p "inside sub"
                                (mevedel-test-run-tool child "Read" "r1" '(:file_path "here.txt"))))
        (let ((glob (mevedel-test-run-tool child "Glob" "g1" '(:pattern "*.txt"))))
          (should (string-match-p "here\\.txt" glob))
          (should-not (string-match-p "top\\.txt" glob)))
        (let ((grep (mevedel-test-run-tool child "Grep" "s1" '(:pattern "inside"))))
          (should (string-match-p "here\\.txt" grep))
          (should-not (string-match-p "top\\.txt" grep)))
        ;; Bash runs there, but its writable root stays the workspace:
        ;; selecting a directory grants nothing.
        (let* ((writable nil)
               (request (symbol-function 'mevedel-sandbox-request)))
          (cl-letf (((symbol-function 'mevedel-sandbox-request)
                     (lambda (&rest args)
                       (push (plist-get args :writable) writable)
                       (apply request args))))
            (should (string-match-p (regexp-quote (directory-file-name sub))
                                    (mevedel-test-run-tool child "Bash" "b1"
                                                           '(:command "pwd" :description "where")))))
          (should (equal (mapcar (lambda (d) (file-name-as-directory (file-truename d)))
                                 (car writable))
                         (list dir))))
        ;; ApplyPatch's relative paths are there, for the permission step too.
        (mevedel-test-run-tool child "ApplyPatch" "p1"
                               '(:patch "*** Begin Patch\n*** Add File: made.txt\n+made\n*** End Patch"))
        (should (file-exists-p (expand-file-name "made.txt" sub)))
        (should-not (file-exists-p (expand-file-name "made.txt" dir)))
        (let ((mevedel-permissions-rules '((allow "ApplyPatch") (deny "ApplyPatch" "sub/**"))))
          (should (string-match-p "denied"
                                  (mevedel-test-run-tool
                                   child "ApplyPatch" "p2"
                                   '(:patch "*** Begin Patch\n*** Add File: no.txt\n+no\n*** End Patch")))))
        (should-not (file-exists-p (expand-file-name "no.txt" sub)))
        ;; Its checkpoints record the files it changes there.
        (should (equal (mevedel-checkpoint--paths
                        (mevedel-tool-get "ApplyPatch")
                        '(:patch "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch")
                        (mevedel-chat-session child) (mevedel-chat-data-buffer child))
                       (list (expand-file-name "x.txt" sub))))
        ;; Its prompt says where it works; the root's calls stay at the root.
        (should (string-match-p (regexp-quote (concat "Your working directory is " sub))
                                (mevedel-chat-frozen-system child)))
        (should (string-match-p (regexp-quote (concat "Working directory: " sub))
                                (mevedel-environment--component child)))
        (should-not (string-match-p "Working directory"
                                    (mevedel-environment--component root)))
        (should (string-match-p "inside the root"
                                (mevedel-test-run-tool root "Read" "r2" '(:file_path "top.txt"))))
        ;; A directory gone by a follow-up fails the turn; nothing falls
        ;; back.  The RESULT says so; the retained result stays the
        ;; last real answer.
        (agent-test--finish path 'done "worked in sub")
        (mevedel-core-mailbox-deliver (mevedel-session-store-handle (mevedel-chat-session root))
                                      (mapcar (lambda (m) (plist-get m :id))
                                              (agent-test--mail root "/root")))
        (delete-directory sub t)
        (let ((sends (length agent-test--sends)))
          (mevedel-agent-send root path "go on")
          (should (= (length agent-test--sends) sends)))
        (let ((result (car (agent-test--mail root "/root"))))
          (should (equal (plist-get result :attrs) '(("outcome" "failed"))))
          (should (string-match-p "working directory .*sub/ no longer exists"
                                  (plist-get result :payload))))
        (should (equal (mevedel-agent-result root path) '(completed . "worked in sub")))))))

(ert-deftest mevedel-agent:paths-resolve-strictly ()
  (agent-test--with-root root
    (let* ((tree (mevedel-agent--tree-of (mevedel-chat-session root)))
           (path (agent-test--spawn root "explore"))
           (child (car (agent-test--send-of path))))
      (agent-test--spawn child "deep")
      (should (equal (mevedel-agent-handle-path (mevedel-agent-resolve-path tree "/root" "explore"))
                     "/root/explore"))
      (should (equal (mevedel-agent-handle-path
                      (mevedel-agent-resolve-path tree "/root/explore" "deep"))
                     "/root/explore/deep"))
      (should-not (mevedel-agent-resolve-path tree "/root/explore" "/root"))
      (dolist (bad '("/root/Explore" "/root//x" "/other/x" "/root/explore/" "explore deep"))
        (should-error (mevedel-agent-resolve-path tree "/root" bad) :type 'user-error))
      ;; An unknown path, and a storage-id-like string, are unknown.
      (should-error (mevedel-agent-resolve-path tree "/root" "/root/nobody") :type 'user-error)
      (should-error (mevedel-agent-resolve-path tree "/root" "4f3a9c") :type 'user-error))))

(ert-deftest mevedel-agent:frozen-configuration-is-a-closed-schema ()
  (let ((good (cl-loop for key in mevedel-agent-config-keys append (list key nil))))
    (should (eq (mevedel-agent-check-config good) good))
    (should-error (mevedel-agent-check-config (append good '(:extra 1))))
    (should-error (mevedel-agent-check-config (append good '(:model x))))
    (should-error (mevedel-agent-check-config (cddr good)))
    (should-error (mevedel-agent-check-config '(:backend)))))

(ert-deftest mevedel-agent:follow-ups-keep-the-frozen-configuration ()
  (agent-test--with-root root
    (let* ((path (agent-test--spawn root "frozen"))
           (child (car (agent-test--send-of path)))
           (system (mevedel-chat-frozen-system child)))
      (agent-test--finish path 'done "first answer")
      (let ((mevedel-prompt-identity "A different prompt now."))
        (setf (mevedel-chat-model root) 'other)
        (should (eq (mevedel-agent-send root path "again") 'started)))
      (should (eq (car (agent-test--send-of path)) child))
      (should (equal (mevedel-chat-frozen-system child) system))
      (should (eq (mevedel-chat-model child) 'm)))))

;;;; What other features see of agents

(ert-deftest mevedel-agent:tasks-and-cards-know-the-calling-agent ()
  (agent-test--with-root root
    (let* ((path (agent-test--spawn root "owner"))
           (child (car (agent-test--send-of path)))
           (session (mevedel-chat-session root))
           (context (list :data-buffer (mevedel-chat-data-buffer child) :session session)))
      (should (equal (mevedel-agent-caller-path context) path))
      (should (equal (mevedel-agent-caller-path
                      (list :data-buffer (mevedel-chat-data-buffer root) :session session))
                     "/root"))
      (should (mevedel-agent-known-p session path))
      (should (mevedel-agent-known-p session "/root"))
      (should-not (mevedel-agent-known-p session "/root/nobody"))
      (should (equal (car (mevedel-agent-requester context)) path))
      (should-not (mevedel-agent-requester (list :data-buffer (mevedel-chat-data-buffer root)
                                                 :session session)))
      ;; The agent's own task is completed when its turn succeeds.
      (mevedel-tasks-write session path '(:tasks [(:subject "look around" :status "in_progress")]))
      (should (mevedel-tasks-open-p (car (mevedel-tasks-list session))))
      (agent-test--finish path 'done "all seen")
      (should-not (mevedel-tasks-open-p (car (mevedel-tasks-list session)))))))

(ert-deftest mevedel-agent:only-the-root-proposes-plans ()
  "A child's ProposePlan is refused: approving would end the session's Plan."
  (agent-test--with-root root
    (let ((session (mevedel-chat-session root)))
      (mevedel-plan-enter session)
      (let* ((path (agent-test--spawn root "planner"))
             (child (car (agent-test--send-of path))))
        (mevedel-chat-set-prompter root (lambda (&rest _) (error "No card expected")))
        (should (string-match-p "only the main conversation proposes plans"
                                (mevedel-test-run-tool child "ProposePlan" "pp1"
                                                       (list :plan "1. Do it"))))
        (should-not (mevedel-interaction-list root))
        (should-not (mevedel-interaction-list child))
        (should (mevedel-plan-active-p session))))))

(defun agent-test--verdict (chat tool args)
  "Return the Plan boundary's verdict on CHAT's call of TOOL with ARGS."
  (let ((session (mevedel-chat-session chat)))
    (mevedel-plan-restriction (list :tool (mevedel-tool-get tool) :args args
                                    :data-buffer (mevedel-chat-data-buffer chat) :session session)
                              session)))

(defun agent-test--tool-names (chat)
  "Return the names of the native tools offered to CHAT's model."
  (mapcar #'gptel-tool-name (mevedel-chat-tools chat)))

(ert-deftest mevedel-agent:read-only-is-the-roles-prompt-not-a-hidden-rule ()
  "A read-only role's boundary is its prompt and its tool roster.
No hidden rule limits its Bash to proven read-only commands (a
verifier runs the tests), and a worker an explorer starts may edit."
  (require 'mevedel-ptc)
  (agent-test--with-root root
    (let* ((patch "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch")
           (verifier (car (agent-test--send-of
                           (agent-test--spawn root "check" :role "verifier"))))
           (explorer (car (agent-test--send-of
                           (agent-test--spawn root "look" :role "explorer"))))
           (worker (car (agent-test--send-of
                         (agent-test--spawn explorer "build" :role "worker")))))
      (should-not (agent-test--verdict verifier "Bash" '(:command "make test > log.txt"
                                                         :description "Run the tests")))
      (should (string-match-p "Do not change files" (mevedel-chat-frozen-system verifier)))
      ;; Its roster has no edit tool; its catalog no Eval.
      (should-not (member "ApplyPatch" (agent-test--tool-names verifier)))
      (should-not (member "Eval" (agent-test--catalog verifier)))
      (should-not (agent-test--verdict verifier "Read" '(:file_path "x.txt")))
      ;; A read-only role that inherits its delegator's tools has no edit tool.
      (let* ((mevedel-agent-roles '(("looker" :description "Looks" :read-only t)))
             (looker (car (agent-test--send-of (agent-test--spawn root "l" :role "looker")))))
        (should (member "Bash" (agent-test--tool-names looker)))
        (should-not (member "ApplyPatch" (agent-test--tool-names looker))))
      ;; The explorer's worker is left to the usual decision, like the root.
      (should (member "ApplyPatch" (agent-test--tool-names worker)))
      (should-not (agent-test--verdict worker "ApplyPatch" (list :patch patch)))
      (should-not (agent-test--verdict root "ApplyPatch" (list :patch patch))))))

(ert-deftest mevedel-agent:each-invocation-applies-its-own-plan-visibility ()
  "A turn started under Plan keeps Plan's boundary after the root leaves it;
a later follow-up, started outside Plan, does not."
  (agent-test--with-root root
    (let ((patch "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch"))
      (mevedel-plan-enter (mevedel-chat-session root))
      (let* ((path (agent-test--spawn root "plan it" :role "worker"))
             (planner (car (agent-test--send-of path))))
        (mevedel-plan-leave (mevedel-chat-session root))
        (should (string-match-p "Plan mode"
                                (cdr (agent-test--verdict planner "ApplyPatch"
                                                          (list :patch patch)))))
        (should-not (agent-test--verdict root "ApplyPatch" (list :patch patch)))
        (agent-test--finish path 'done "the plan")
        (should (eq (mevedel-agent-send root path "implement it") 'started))
        (should-not (agent-test--verdict planner "ApplyPatch" (list :patch patch)))))))

(defun agent-test--start-hook (seen)
  "Return a SubagentStart hook function recording into the cons SEEN."
  (lambda (input)
    (push (list 'start (plist-get input :agent_id) (plist-get input :agent_type)) (car seen))
    "Use the project's own test runner."))

(defun agent-test--stop-hook (seen)
  "Return a SubagentStop hook function recording into the cons SEEN.
It blocks every stop, which must change nothing."
  (lambda (input)
    (push (list 'stop (plist-get input :stop_hook_active) (plist-get input :last_assistant_message))
          (car seen))
    '(:decision "block" :reason "Run the tests too.")))

(ert-deftest mevedel-agent:subagent-start-adds-context-and-subagent-stop-observes ()
  (agent-test--with-root root
    (let* ((seen (list nil))
           (mevedel-hooks `((SubagentStart (:function ,(agent-test--start-hook seen)))
                            (SubagentStop (:function ,(agent-test--stop-hook seen)))))
           (path (agent-test--spawn root "tester" :role "worker"))
           (child (car (agent-test--send-of path))))
      (should (equal (car (last (car seen))) (list 'start path "worker")))
      (should (string-search "[SubagentStart hook context]\nUse the project's own test runner."
                             (with-current-buffer (mevedel-chat-data-buffer child) (buffer-string))))
      ;; The stop hook sees the report; its block does not send the agent on.
      (agent-test--finish path 'done "first report")
      (should (equal (car (car seen)) '(stop :json-false "first report")))
      (should-not (agent-test--send-of path))
      (should (eq (plist-get (mevedel-agent-status root path) :status) 'idle))
      (should (equal (mevedel-agent-result root path) '(completed . "first report")))
      ;; One RESULT reaches the parent.
      (should (= 1 (cl-count path (agent-test--mail root "/root")
                             :key (lambda (m) (plist-get m :sender)) :test #'equal))))))

;;;; Identities: prompts, tools, counts, restored models

(ert-deftest mevedel-agent:built-in-roles-do-not-claim-the-main-identity ()
  (agent-test--with-root root
    (let ((mevedel-prompt-identity "You are THE-MAIN-ASSISTANT."))
      (dolist (role '("worker" "explorer" "verifier" "reviewer"))
        (let ((child (car (agent-test--send-of (agent-test--spawn root role :role role)))))
          (should-not (string-search "THE-MAIN-ASSISTANT" (mevedel-chat-frozen-system child)))
          (should (string-search (plist-get (mevedel-agent-role role (mevedel-chat-root root))
                                            :prompt)
                                 (mevedel-chat-frozen-system child))))))))

(defun agent-test--update-names (chat)
  "Return the component names of the context updates CHAT's next turn sends."
  (mapcar (lambda (block)
            (and (string-match "component=\"\\([^\"]+\\)\"" block) (intern (match-string 1 block))))
          (mevedel-prompt-context-updates chat)))

(ert-deftest mevedel-agent:children-get-only-their-own-prompt-components ()
  "A verifier's context updates follow its role's components, also after a
compaction and a resume; a default child inherits its parent's, less the
journal map."
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (path (agent-test--spawn root "check" :role "verifier"))
           (verifier (car (agent-test--send-of path)))
           (default (car (agent-test--send-of (agent-test--spawn root "plain"))))
           (own (plist-get (mevedel-agent-role "verifier" (mevedel-chat-root root))
                           :system-components)))
      ;; Literal text components are named `text'.
      ;; What its system text says is not sent again.
      (should-not (agent-test--update-names verifier))
      ;; A compaction restores its own components, not the root's.
      (mevedel-prompt-reset verifier)
      (let ((names (agent-test--update-names verifier)))
        (should names)
        (dolist (name names) (should (or (memq name own) (eq name 'text))))
        (should-not (memq 'memory-index names))
        (should-not (memq 'skills-roster names)))
      (should (memq 'journal-map (mevedel-prompt-components root)))
      (should-not (memq 'journal-map (mevedel-prompt-components default)))
      (should (memq 'memory-index (mevedel-prompt-components default)))
      ;; A resumed verifier keeps its selection.
      (agent-test--finish path 'done "VERDICT: PASS")
      (let ((dir (mevedel-chat-root root))
            (id (mevedel-session-id session)))
        (kill-buffer (mevedel-chat-data-buffer root))
        (let ((again (mevedel-chat-get-create dir id)))
          (unwind-protect
              (let ((resumed (mevedel-chat-of-buffer (mevedel-agent-conversation again path))))
                (should (equal (mevedel-prompt-components resumed) own))
                (dolist (name (agent-test--update-names resumed))
                  (should (or (memq name own) (eq name 'text)))))
            (kill-buffer (mevedel-chat-data-buffer again))))))))

(ert-deftest mevedel-agent:a-default-grandchild-claims-one-identity ()
  (agent-test--with-root root
    (let* ((child (car (agent-test--send-of (agent-test--spawn root "implementation"))))
           (grandchild (car (agent-test--send-of (agent-test--spawn child "tests"))))
           (system (mevedel-chat-frozen-system grandchild)))
      (should (= 1 (with-temp-buffer
                     (insert system)
                     (goto-char (point-min))
                     (how-many "You are the retained agent"))))
      (should (string-search "retained agent /root/implementation/tests, working for \
/root/implementation" system))
      (should-not (string-search "retained agent /root/implementation," system)))))

(ert-deftest mevedel-agent:monitor-is-the-roots-and-list-agents-is-discoverable ()
  (require 'mevedel-ptc)
  (agent-test--with-root root
    (let ((default (car (agent-test--send-of (agent-test--spawn root "default"))))
          (worker (car (agent-test--send-of (agent-test--spawn root "worker" :role "worker")))))
      (should (member "Monitor" (agent-test--tool-names root)))
      (dolist (chat (list default worker))
        (should-not (member "Monitor" (agent-test--tool-names chat)))
        (should-not (member "Monitor" (agent-test--catalog chat)))
        (should-not (member "ListAgents" (agent-test--tool-names chat)))
        (should (member "ListAgents" (agent-test--catalog chat))))
      ;; A named role has SendMessage natively.
      (should (member "SendMessage" (agent-test--tool-names worker))))))

(ert-deftest mevedel-agent:an-empty-catalog-never-falls-back-to-all-tools ()
  (agent-test--with-root root
    (let* ((mevedel-agent-roles '(("bare" :description "Nothing" :tools ())))
           (child (car (agent-test--send-of (agent-test--spawn root "bare" :role "bare")))))
      ;; Only the tools every named role gets.
      (should (equal (sort (agent-test--tool-names child) #'string<) '("SendMessage")))
      (setf (mevedel-chat-frozen-tools child) nil)
      (should-not (mevedel-chat-tools child))
      ;; A default child of it inherits that emptiness.
      (let ((sub (car (agent-test--send-of (agent-test--spawn child "sub")))))
        (should-not (mevedel-chat-tools sub))))))

(ert-deftest mevedel-agent:tool-calls-count-per-turn ()
  (agent-test--with-root root
    (let* ((path (agent-test--spawn root "counter"))
           (handle (mevedel-agent--handle (mevedel-agent--tree-of (mevedel-chat-session root))
                                          path)))
      (mevedel-agent--child-event handle 'tool-results '(((:id "1") (:id "2") (:id "3"))))
      (should (= 3 (plist-get (mevedel-agent-status root path) :tool-calls)))
      (agent-test--finish path 'done "first")
      (should (eq (mevedel-agent-send root path "again") 'started))
      (should (= 0 (plist-get (mevedel-agent-status root path) :tool-calls)))
      (mevedel-agent--child-event handle 'tool-results '(((:id "4"))))
      (should (= 1 (plist-get (mevedel-agent-status root path) :tool-calls))))))

(ert-deftest mevedel-agent:a-restored-child-keeps-its-frozen-model-or-names-what-is-missing ()
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (id (mevedel-session-id session))
           (dir (mevedel-chat-root root))
           (path (agent-test--spawn root "frozen")))
      (agent-test--finish path 'done "report")
      (kill-buffer (mevedel-chat-data-buffer root))
      (let ((again (mevedel-chat-get-create dir id)))
        (unwind-protect
            (progn
              ;; Its backend gone, the first use is an error naming it,
              ;; never the root's backend.
              (setf (mevedel-chat-backend again) (gptel-make-openai "agent-other" :key "x"
                                                                    :models '(o))
                    (mevedel-chat-model again) 'o)
              (let ((gptel--known-backends (cl-remove "agent-test" gptel--known-backends
                                                      :key #'car :test #'equal)))
                (should (string-search "agent-test"
                                       (cadr (should-error (mevedel-agent-conversation again path)
                                                           :type 'user-error)))))
              (let* ((buffer (mevedel-agent-conversation again path))
                     (child (mevedel-chat-of-buffer buffer)))
                (should (equal (gptel-backend-name (mevedel-chat-backend child)) "agent-test"))
                (should (eq (mevedel-chat-model child) 'm))))
          (kill-buffer (mevedel-chat-data-buffer again)))))))

(ert-deftest mevedel-agent:the-model-serving-a-child-is-visible ()
  "The row, ListAgents, agent:// and the saved record name the child's model."
  (require 'mevedel-tool-agent)
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (other (gptel-make-openai "agent-strong" :key "x" :models '(big)))
           (path (agent-test--spawn root "modelled" :model "agent-strong:big" :effort "high")))
      (ignore other)
      (let ((status (mevedel-agent-status root path)))
        (should (equal (plist-get status :model) "agent-strong:big"))
        (should (eq (plist-get status :effort) 'high))
        (should (string-search "· agent-strong:big (high) ·"
                               (plist-get (mevedel-tool-agent-render "Agent" nil path status)
                                          :header))))
      (should (string-search (format "%s  default  agent-strong:big (effort high)" path)
                             (mevedel-test-run-tool root "ListAgents" "l1" nil)))
      (should (string-search "agent://root/modelled  default  agent-strong:big (effort high)"
                             (cdar (mevedel-history-agent-documents "agent://" session))))
      ;; The root's model is not what the child reports.
      (should-not (string-search "agent-test:m" (mevedel-test-run-tool root "ListAgents" "l2" nil)))
      (agent-test--finish path 'done "report")
      (let ((dir (mevedel-chat-root root))
            (id (mevedel-session-id session)))
        (kill-buffer (mevedel-chat-data-buffer root))
        (let ((again (mevedel-chat-get-create dir id)))
          (unwind-protect
              (should (equal (plist-get (mevedel-agent-status again path) :model)
                             "agent-strong:big"))
            (kill-buffer (mevedel-chat-data-buffer again))))))))

;;;; Session hooks stay the main conversation's

(ert-deftest mevedel-agent:session-hooks-do-not-reach-into-child-turns ()
  "Stop and SessionStart are the main conversation's; a tool hook that
stops a child's call ends the child's turn, not the root's."
  (require 'mevedel-compaction)
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (child (car (agent-test--send-of (agent-test--spawn root "worker"))))
           (mevedel-hooks '((Stop (:function ignore))))
           (stop-ran nil) (finished nil) (started nil) (aborted nil))
      (cl-letf (((symbol-function 'mevedel-chat--finish)
                 (lambda (chat outcome) (push (cons chat outcome) finished)))
                ((symbol-function 'mevedel-hooks-stop)
                 (lambda (&rest _) (setq stop-ran t) nil))
                ((symbol-function 'mevedel-hooks-session-start)
                 (lambda (_session source &rest _) (push source started)))
                ((symbol-function 'mevedel-chat-abort)
                 (lambda (chat &rest _) (push chat aborted) nil)))
        ;; Top-level Stop hooks: not for the child's turn.
        (mevedel-chat--stop-hooks child)
        (should-not stop-ran)
        (should (equal finished (list (cons child 'done))))
        (mevedel-chat--stop-hooks root)
        (should stop-ran)
        ;; A child's compaction fires no SessionStart; the root's does.
        (mevedel-compaction--end child 'done nil)
        (should-not started)
        (mevedel-compaction--end root 'done nil)
        (should (equal started '("compact")))
        ;; A tool hook stopping the child's call aborts the child's turn.
        (mevedel-chat--hook-stop-turn session "stop it" (mevedel-chat-data-buffer child))
        (should (equal aborted (list child)))
        (mevedel-chat--hook-stop-turn session "stop it" nil)
        (should (equal aborted (list root child)))))))

(ert-deftest mevedel-agent:a-blocked-initial-task-fails-the-agent-call ()
  "UserPromptSubmit runs on the initial task during preparation, once: a
block fails the Agent call before the path is published."
  (agent-test--with-root root
    (let* ((seen nil)
           (mevedel-hooks `((UserPromptSubmit
                             (:function ,(lambda (input)
                                           (push (plist-get input :prompt) seen)
                                           (when (string-search "forbidden" (plist-get input :prompt))
                                             '(:decision "block" :reason "Not that.")))))))
           (ready nil))
      (mevedel-agent--spawn root '(:task_name "bad" :message "a forbidden task") nil
                            (lambda (path waiting failure) (setq ready (list path waiting failure))))
      (should (equal (car ready) nil))
      (should (string-search "Not that." (nth 2 ready)))
      (should-not (mevedel-agent-list root))
      (should-not agent-test--sends)
      ;; The synchronous entry point signals it.
      (should-error (mevedel-agent-spawn root '(:task_name "bad" :message "forbidden again"))
                    :type 'user-error)
      (should-not (mevedel-agent-list root))
      ;; An accepted task is sent once, its hooks not run again.
      (setq seen nil)
      (let ((path (agent-test--spawn root "good")))
        (should (equal seen '("Task of good")))
        (should (agent-test--send-of path))))))

(ert-deftest mevedel-agent:hook-context-is-each-agents-own ()
  "A child's UserPromptSubmit context goes to that child alone; the
session's SessionStart context stays the main conversation's."
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (mevedel-hooks `((UserPromptSubmit
                             (:function ,(lambda (input)
                                           (format "context for: %s" (plist-get input :prompt)))))))
           (path (agent-test--spawn root "helper"))
           (child (car (agent-test--send-of path))))
      (mevedel-hooks--add-context session 'SessionStart "the session started")
      (let ((root-blocks (mevedel-chat--hook-context root))
            (child-blocks (mevedel-chat--hook-context child)))
        (should (cl-some (lambda (b) (string-search "the session started" b)) root-blocks))
        (should-not (cl-some (lambda (b) (string-search "Task of helper" b)) root-blocks))
        (should (cl-some (lambda (b) (string-search "context for: Task of helper" b)) child-blocks))
        (should-not (cl-some (lambda (b) (string-search "the session started" b)) child-blocks))))))

(ert-deftest mevedel-agent:a-skills-allowed-tools-bound-a-child-spawned-from-it ()
  (require 'mevedel-ptc)
  (agent-test--with-root root
    (let ((buffer (mevedel-chat-data-buffer root)))
      (mevedel-skills-restrict buffer '(:name "narrow" :allowed-tools ("Read" "Grep" "Agent")))
      (unwind-protect
          (let ((default (car (agent-test--send-of (agent-test--spawn root "default"))))
                (worker (car (agent-test--send-of (agent-test--spawn root "w" :role "worker")))))
            (should (equal (sort (agent-test--tool-names default) #'string<)
                           '("Agent" "Grep" "Read" "ToolCall" "ToolSearch")))
            (should-not (member "Bash" (agent-test--tool-names worker)))
            (should-not (member "ApplyPatch" (agent-test--tool-names worker)))
            (should (member "SendMessage" (agent-test--tool-names worker)))
            (should-not (member "Eval" (agent-test--catalog default)))
            (should-not (member "ListAgents" (agent-test--catalog worker))))
        (mevedel-skills-unrestrict buffer))
      ;; Without the restriction, nothing is bounded.
      (let ((free (car (agent-test--send-of (agent-test--spawn root "free")))))
        (should (member "Bash" (agent-test--tool-names free)))))))

(ert-deftest mevedel-agent:the-agent-result-names-the-model-and-effort-serving-the-child ()
  "The Agent call's result is the path and the launch snapshot of its model."
  (require 'mevedel-tool-agent)
  (agent-test--with-root root
    (let* ((path (agent-test--spawn root "deep" :effort "high"))
           (text (mevedel-tool-agent--launch-text (mevedel-agent-status root path) nil)))
      (should (equal text "/root/deep (served by agent-test:m, effort high)"))
      (should (string-suffix-p "it starts when one settles)"
                               (mevedel-tool-agent--launch-text
                                (mevedel-agent-status root path) t))))))

(ert-deftest mevedel-agent:a-turn-reports-the-model-that-served-it-when-not-the-frozen-one ()
  "A model acknowledged for a turn that is not the frozen one is reported
beside it (row, ListAgents, agent://), saved and resumed; the frozen
identity is unchanged, and a turn served by the frozen model clears it."
  (require 'mevedel-tool-agent)
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (id (mevedel-session-id session))
           (dir (mevedel-chat-root root))
           (path (agent-test--spawn root "aliased"))
           (child (car (agent-test--send-of path))))
      (mevedel-agent-note-served child "m-2025")
      (let ((status (mevedel-agent-status root path)))
        (should (equal (plist-get status :model) "agent-test:m"))
        (should (equal (plist-get status :served) "agent-test:m-2025"))
        (should (string-search "served by agent-test:m-2025"
                               (plist-get (mevedel-tool-agent-render "Agent" nil nil status)
                                          :header))))
      (should (string-search "agent-test:m (served by agent-test:m-2025)"
                             (cl-letf (((symbol-function 'mevedel-tool-agent--chat)
                                        (lambda () root)))
                               (mevedel-tool-agent-list nil))))
      (agent-test--finish path 'done "done")
      (kill-buffer (mevedel-chat-data-buffer root))
      (let ((again (mevedel-chat-get-create dir id)))
        (unwind-protect
            (progn
              (should (equal (plist-get (mevedel-agent-status again path) :served)
                             "agent-test:m-2025"))
              (should (string-search "(served by agent-test:m-2025)"
                                     (cdar (mevedel-history-agent-documents
                                            "agent://" (mevedel-chat-session again)))))
              ;; The frozen model noted serving a later turn clears it.
              (should (eq (mevedel-agent-send again path "again") 'started))
              (mevedel-agent-note-served (car (agent-test--send-of path)) "m")
              (should-not (plist-get (mevedel-agent-status again path) :served)))
          (kill-buffer (mevedel-chat-data-buffer again)))))))

(ert-deftest mevedel-agent:a-turn-uses-the-backend-now-defined-under-the-frozen-name ()
  "A backend made again under the same name serves the child's next turn."
  (agent-test--with-root root
    (let* ((path (agent-test--spawn root "keyed"))
           (child (car (agent-test--send-of path)))
           (old (mevedel-chat-backend child)))
      (agent-test--finish path 'done "done")
      (let ((new (gptel-make-openai "agent-test" :key "rotated" :models '(m))))
        (should-not (eq new old))
        (should (eq (mevedel-agent-send root path "again") 'started))
        (should (eq (mevedel-chat-backend child) new))
        (should (equal (plist-get (mevedel-agent-status root path) :model) "agent-test:m"))))))

(ert-deftest mevedel-agent:an-agent-row-keeps-its-non-default-sandbox-warning ()
  "A turn's commands that ran outside the default sandbox leave a durable
warning on the Agent row that started it."
  (require 'mevedel-tool-agent)
  (agent-test--with-root root
    (let* ((rows nil)
           (path nil))
      (cl-letf (((symbol-function 'mevedel-chat-update-render-data)
                 (lambda (_chat id function &optional _key)
                   (setf (alist-get id rows nil nil #'equal)
                         (funcall function (or (alist-get id rows nil nil #'equal)
                                               (list :path "x"))))
                   'updated)))
        (setq path (mevedel-agent--spawn root '(:task_name "risky" :message "Run it") nil nil
                                         "call-1"))
        (let* ((handle (mevedel-agent--handle (mevedel-agent--tree-of (mevedel-chat-session root))
                                              path))
               (escalated (mevedel-render-data-encode
                           (list :sandbox-summary (list :attempts 1 :starts 1
                                                        :boundaries '(escalated)))
                           "b1"))
               (quiet (mevedel-render-data-encode
                       (list :sandbox-summary (list :attempts 1 :starts 1
                                                    :boundaries '(bwrap-landlock)))
                       "b2")))
          (mevedel-agent--child-event handle 'tool-results
                                      (list (list (list :id "b1" :result (concat "ok\n" escalated))
                                                  (list :id "b2" :result (concat "ok\n" quiet)))))
          (agent-test--finish path 'done "ran it")
          (let ((data (alist-get "call-1" rows nil nil #'equal)))
            (should (equal (plist-get (plist-get data :sandbox-summary) :boundaries)
                           '(escalated bwrap-landlock)))
            (should (string-search "escalated outside the sandbox"
                                   (plist-get (mevedel-tool-agent-render "Agent" nil path data)
                                              :header)))))))))

(ert-deftest mevedel-agent:a-sendmessage-row-keeps-the-sandbox-warning-of-its-turn ()
  "A turn SendMessage started, whose commands ran outside the default
sandbox, leaves the warning on that SendMessage row, not the spawn's."
  (require 'mevedel-tool-agent)
  (agent-test--with-root root
    (let* ((rows nil)
           (path nil))
      (cl-letf (((symbol-function 'mevedel-chat-update-render-data)
                 (lambda (_chat id function &optional _key)
                   (setf (alist-get id rows nil nil #'equal)
                         (funcall function (or (alist-get id rows nil nil #'equal)
                                               (list :delivery 'started))))
                   'updated)))
        (setq path (mevedel-agent--spawn root '(:task_name "risky" :message "Look") nil nil
                                         "call-1"))
        (agent-test--finish path 'done "looked")
        (should (eq (mevedel-agent-send root path "Now run it" "call-2") 'started))
        (let ((handle (mevedel-agent--handle (mevedel-agent--tree-of (mevedel-chat-session root))
                                             path)))
          (mevedel-agent--child-event
           handle 'tool-results
           (list (list (list :id "b1"
                             :result (concat "ok\n"
                                             (mevedel-render-data-encode
                                              (list :sandbox-summary
                                                    (list :attempts 1 :starts 1
                                                          :boundaries '(unconfined)))
                                              "b1"))))))
          (agent-test--finish path 'done "ran it")
          (should-not (plist-get (alist-get "call-1" rows nil nil #'equal) :sandbox-summary))
          (let ((data (alist-get "call-2" rows nil nil #'equal)))
            (should (equal (plist-get (plist-get data :sandbox-summary) :boundaries)
                           '(unconfined)))
            (should (string-search
                     (mevedel-sandbox-summary-warning (plist-get data :sandbox-summary))
                     (plist-get (mevedel-tool-agent-render-send
                                 "SendMessage" (list :target path) nil data)
                                :header)))))))))

;;;; Capacity and settlement

(ert-deftest mevedel-agent:capacity-is-ten-and-the-rest-wait-in-order ()
  (agent-test--with-root root
    (let ((paths (cl-loop for n from 1 to 12
                          collect (agent-test--spawn root (format "job %d" n)))))
      (should (= (length agent-test--sends) 10))
      (should (equal (mapcar (lambda (p) (plist-get (mevedel-agent-status root p) :status))
                             (last paths 2))
                     '(waiting waiting)))
      ;; A settlement frees a slot: the oldest waiting turn starts.
      (agent-test--finish (nth 3 paths) 'done "four")
      (should (eq (plist-get (mevedel-agent-status root (nth 10 paths)) :status) 'running))
      (should (eq (plist-get (mevedel-agent-status root (nth 11 paths)) :status) 'waiting))
      ;; A failed turn frees its slot too.
      (agent-test--finish (nth 0 paths) 'error)
      (should (eq (plist-get (mevedel-agent-status root (nth 11 paths)) :status) 'running))
      (should (= (length agent-test--sends) 10))
      (should (equal (mapcar (lambda (m) (list (plist-get m :sender) (plist-get m :kind)))
                             (agent-test--mail root "/root"))
                     `((,(nth 3 paths) "RESULT") (,(nth 0 paths) "RESULT")))))))

(ert-deftest mevedel-agent:a-settlement-publishes-the-payload-before-the-preview ()
  (agent-test--with-root root
    (let* ((path (agent-test--spawn root "big"))
           (answer (make-string (+ mevedel-agent-result-preview 100) ?a))
           (seen nil))
      (setq mevedel-agent-stop-functions
            (list (lambda (p outcome payload)
                    ;; By now the handle holds the complete payload.
                    (push (list p outcome (length payload)
                                (cdr (mevedel-agent-result root p)))
                          seen))))
      (should-error (mevedel-agent-result root path) :type 'user-error)
      (agent-test--finish path 'done answer)
      (should (equal (car (car seen)) path))
      (should (eq (nth 1 (car seen)) 'completed))
      (should (equal (mevedel-agent-result root path) (cons 'completed answer)))
      (let ((record (car (agent-test--mail root "/root"))))
        (should (< (length (plist-get record :payload)) (length answer)))
        (should (equal (plist-get record :attrs) '(("outcome" "completed"))))))))

(ert-deftest mevedel-agent:a-workflow-consumed-result-is-not-mail-for-the-root ()
  (agent-test--with-root root
    (let* ((seen nil)
           (wakes nil)
           (key (mevedel-session-id (mevedel-chat-session root)))
           (results (lambda (sender)
                      (cl-remove-if-not (lambda (m) (and (equal (plist-get m :sender) sender)
                                                         (equal (plist-get m :kind) "RESULT")))
                                        (agent-test--mail root "/root")))))
      (cl-letf (((symbol-function 'mevedel-mailbox--note-wake)
                 (lambda (session ids) (when (equal session key) (push ids wakes)))))
        ;; A consumer that returns takes the RESULT: no mail, no wake.
        (let ((path (mevedel-agent-spawn root '(:task_name "review" :message "look")
                                         (lambda (p outcome payload)
                                           (push (list p outcome payload) seen)))))
          (agent-test--finish path 'done "the findings")
          (should (equal seen `((,path completed "the findings"))))
          (should-not (funcall results path))
          (should-not wakes))
        ;; A consumer that fails leaves it for ordinary delivery.
        (let ((path (mevedel-agent-spawn root '(:task_name "verify" :message "check")
                                         (lambda (&rest _) (error "Handler broke")))))
          (let ((warning-minimum-log-level :emergency))
            (agent-test--finish path 'done "VERDICT: PASS"))
          (should (= (length (funcall results path)) 1))
          (should (= (length wakes) 1)))
        ;; Without a consumer the RESULT is mail, as ever.
        (let ((path (agent-test--spawn root "plain")))
          (agent-test--finish path 'done "report")
          (should (= (length (funcall results path)) 1))
          (should (= (length wakes) 2)))))))

(ert-deftest mevedel-agent:interrupt-during-settlement-settles-once ()
  (agent-test--with-root root
    (let* ((path (agent-test--spawn root "racer"))
           (interrupted nil))
      ;; The interrupt arrives while the completion settles.
      (setq mevedel-agent-stop-functions
            (list (lambda (p _outcome _payload)
                    (push (mevedel-agent-interrupt root p) interrupted))))
      (agent-test--finish path 'done "the answer")
      (should (equal interrupted '(idle)))
      (let ((results (agent-test--mail root "/root")))
        (should (= (length results) 1))
        (should (equal (plist-get (car results) :attrs) '(("outcome" "completed"))))))))

(ert-deftest mevedel-agent:interrupt-yields-one-interrupted-result-and-keeps-the-agent ()
  (agent-test--with-root root
    (let* ((path (agent-test--spawn root "long"))
           (child (car (agent-test--send-of path)))
           (grandchild (agent-test--spawn child "sub"))
           (ends 0))
      (setq mevedel-agent-stop-functions (list (lambda (&rest _) (cl-incf ends))))
      (should-error (mevedel-agent-interrupt root "/root") :type 'user-error)
      (should-error (mevedel-agent-interrupt child path) :type 'user-error)
      (should (eq (mevedel-agent-interrupt root path) 'running))
      ;; The chat's own end (its abort) comes late and is ignored.
      (agent-test--finish path 'abort)
      (should (= ends 1))
      (let ((results (agent-test--mail root "/root")))
        (should (= (length results) 1))
        (should (equal (plist-get (car results) :attrs) '(("outcome" "interrupted"))))
        (should (string-prefix-p "Interrupted: interrupted." (plist-get (car results) :payload))))
      ;; Not recursive; identity kept; a follow-up continues it.
      (should (eq (plist-get (mevedel-agent-status root grandchild) :status) 'running))
      (should (eq (mevedel-agent-interrupt root path) 'idle))
      (should (eq (mevedel-agent-send root path "go on") 'started))
      (should (eq (car (agent-test--send-of path)) child)))))

(ert-deftest mevedel-agent:a-waiting-turn-interrupted-settles-without-starting ()
  (agent-test--with-root root
    (let ((mevedel-agent-capacity 1))
      (agent-test--spawn root "one")
      (let ((second (agent-test--spawn root "two")))
        (should (eq (plist-get (mevedel-agent-status root second) :status) 'waiting))
        (should (eq (mevedel-agent-interrupt root second) 'waiting))
        (should (eq (plist-get (mevedel-agent-status root second) :status) 'idle))
        (should (eq (plist-get (mevedel-agent-status root second) :outcome) 'interrupted))
        (agent-test--finish "/root/one" 'done "x")
        ;; Nothing started for it.
        (should-not agent-test--sends)))))

;;;; Mail and waiting

(ert-deftest mevedel-agent:unread-completions-go-to-the-spawn-parent-after-the-answer ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "runner"))
           (store (mevedel-session-store-handle (mevedel-chat-session root))))
      (mevedel-core-mailbox-post store a "EXECUTION" "late output\n" "x1"
                                 '(("execution_id" "x1") ("outcome" "success")))
      (agent-test--finish a 'done "answer")
      (should-not (agent-test--mail root a))
      (should (equal (mapcar (lambda (m) (list (plist-get m :kind) (plist-get m :sender)
                                               (plist-get m :payload)))
                             (agent-test--mail root "/root"))
                     `(("RESULT" ,a "answer") ("EXECUTION" ,a "late output\n")))))))

(ert-deftest mevedel-agent:send-starts-queues-or-waits ()
  (agent-test--with-root root
    (let* ((mevedel-agent-capacity 1)
           (a (agent-test--spawn root "a"))
           (child (car (agent-test--send-of a))))
      ;; Active recipient: one MAIL record.
      (should (eq (mevedel-agent-send root a "hello a") 'queued))
      (should (equal (mapcar (lambda (m) (list (plist-get m :kind) (plist-get m :sender)
                                               (plist-get m :payload)))
                             (agent-test--mail root a))
                     '(("MAIL" "/root" "hello a"))))
      ;; Self-mail is queued and starts nothing.
      (should (eq (mevedel-agent-send child a "note to self") 'queued))
      ;; Mail to /root from a child.
      (should (eq (mevedel-agent-send child "/root" "hi root") 'queued))
      (should (equal (plist-get (car (agent-test--mail root "/root")) :sender) a))
      ;; At capacity, a message to an idle child is MAIL, read by the
      ;; turn that waits for a slot (it is not that turn's task).
      (mevedel-test-drain-mail child)
      (agent-test--finish a 'done "done")
      (let ((b (agent-test--spawn root "b")))
        (should (eq (mevedel-agent-send root a "more") 'waiting))
        (should (equal (mapcar (lambda (m) (list (plist-get m :kind) (plist-get m :payload)))
                               (agent-test--mail root a))
                       '(("MAIL" "more"))))
        (agent-test--finish b 'done "b done")
        (should (equal (cadr (agent-test--send-of a)) mevedel-mailbox-wake-prompt))
        (should (string-match-p "\\`<agent-message type=\"MAIL\" sender=\"/root\"[^>]*>\nmore"
                                (car (mevedel-test-drain-mail child))))))))

(ert-deftest mevedel-agent:mail-drains-before-each-sample-in-order ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "a"))
           (child (car (agent-test--send-of a))))
      (mevedel-agent-send root a "first")
      (mevedel-agent-send root a "second")
      (let ((blocks (mevedel-test-drain-mail child)))
        (should (= (length blocks) 2))
        (should (string-match-p "\\`<agent-message type=\"MAIL\" sender=\"/root\" recipient=\"/root/a\">\nfirst\n" (car blocks)))
        (should (string-match-p "second" (cadr blocks))))
      (should-not (agent-test--mail root a))
      (should-not (mevedel-mailbox-chat-continuation-mail child)))))

(ert-deftest mevedel-agent:drained-mail-stays-unread-until-saved ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "a"))
           (child (car (agent-test--send-of a))))
      (mevedel-agent-send root a "first")
      ;; Drained, not yet in the conversation: still unread.
      (should (= 1 (length (mevedel-mailbox-chat-continuation-mail child))))
      (should (= 1 (length (agent-test--mail root a))))
      ;; In the conversation, its save queued: read, and delivered once
      ;; the save is written.
      (let ((written nil))
        (cl-letf* ((deliver-after (symbol-function 'mevedel-core-mailbox-deliver-after))
                   ((symbol-function 'mevedel-core-mailbox-deliver-after)
                    (lambda (conversation mailbox ids)
                      (push conversation written)
                      (funcall deliver-after conversation mailbox ids))))
          (should (= 1 (length (mevedel-test-drain-mail child)))))
        (should (equal written (list (mevedel-chat-store child)))))
      (should-not (agent-test--mail root a))
      (mevedel-core-store-flush (mevedel-chat-store child))
      (should-not (agent-test--mail root a))
      (should-not (mevedel-test-drain-mail child)))))

(ert-deftest mevedel-agent:wait-wakes-on-mail-once-and-clamps ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "a"))
           (tree (mevedel-agent--tree-of (mevedel-chat-session root)))
           (woken nil))
      (mevedel-agent-wait root 5 (lambda (reason)
                                   ;; Released before the callback runs.
                                   (push (list reason (gethash "/root" (mevedel-agent--tree-waits
                                                                         tree)))
                                         woken)))
      ;; 5 ms is clamped to the 10 s minimum.
      (let ((timer (nth 1 (gethash "/root" (mevedel-agent--tree-waits tree)))))
        (should (> (float-time (time-subtract (timer--time timer) nil)) 9)))
      (agent-test--finish a 'done "result")
      (should (equal woken (list (list (format "mail from %s" a) nil))))
      ;; The RESULT is still unread: another wait returns at once.
      (let ((again nil))
        (mevedel-agent-wait root nil (lambda (reason) (setq again reason)))
        (should (equal again (format "mail from %s" a))))
      ;; User input in the waiting chat wakes it too.
      (mevedel-core-mailbox-deliver (mevedel-session-store-handle (mevedel-chat-session root))
                                    (mapcar (lambda (m) (plist-get m :id))
                                            (agent-test--mail root "/root")))
      (let ((steered nil))
        (mevedel-agent-wait root nil (lambda (reason) (setq steered reason)))
        (mevedel-chat-queue root "look at this")
        (should (equal steered "the user sent a message"))))))

(ert-deftest mevedel-agent:a-result-to-an-idle-child-parent-starts-its-turn ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "a"))
           (child (car (agent-test--send-of a)))
           (sub (agent-test--spawn child "sub")))
      (agent-test--finish a 'done "a waits")
      (agent-test--finish sub 'done "sub result")
      (should (equal (cadr (agent-test--send-of a)) mevedel-mailbox-wake-prompt)))))

;;;; Resources

(ert-deftest mevedel-agent:agent-and-history-addresses-read-without-changing-state ()
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (a (agent-test--spawn root "json result"))
           (b (agent-test--spawn root "busy")))
      (should (string-match-p "agent://root/json-result  default  agent-test:m  running"
                              (cdar (mevedel-history-agent-documents "agent://" session))))
      ;; A running agent's address answers NOT READY, naming its history.
      (dolist (address '("agent://root/json-result" "agent://root/json-result#/findings"))
        (let ((text (cdar (mevedel-history-agent-documents address session))))
          (should (string-prefix-p "NOT READY: /root/json-result is running" text))
          (should (string-match-p "history://root/json-result" text))))
      (agent-test--finish a 'done "{\"findings\": [{\"title\": \"x/y\"}], \"ok\": true}")
      (let ((mail (length (agent-test--mail root "/root"))))
        ;; The whole payload, after its terminal outcome.
        (should (equal (cdar (mevedel-history-agent-documents "agent://root/json-result" session))
                       "[/root/json-result's latest turn: completed]
{\"findings\": [{\"title\": \"x/y\"}], \"ok\": true}"))
        (should (equal (cdar (mevedel-history-agent-documents
                              "agent://root/json-result#/findings/0/title" session))
                       "x/y"))
        ;; An empty fragment is the parsed value, as deterministic JSON.
        (should (equal (cdar (mevedel-history-agent-documents "agent://root/json-result#" session))
                       "{\"findings\":[{\"title\":\"x/y\"}],\"ok\":true}"))
        (should-error (mevedel-history-agent-documents "agent://root/json-result#/nope" session)
                      :type 'mevedel-core-resource-error)
        (should-error (mevedel-history-agent-documents "agent://root/nobody" session)
                      :type 'mevedel-core-resource-error)
        ;; history://root/PATH is the agent's own transcript.
        (let ((text (cdar (mevedel-history-documents "history://root/json-result" session "Read"))))
          (should (string-match-p "Task of json result" text))
          (should (string-match-p "findings" text)))
        (should (string-match-p "Task of busy"
                                (cdar (mevedel-history-documents "history://root/busy" session
                                                                 "Grep"))))
        ;; Reading changed nothing.
        (should (= mail (length (agent-test--mail root "/root"))))
        (should (eq (plist-get (mevedel-agent-status root b) :status) 'running))))))

(ert-deftest mevedel-agent:agent-json-keys-are-percent-decoded ()
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (a (agent-test--spawn root "keys")))
      (agent-test--finish a 'done "{\"two words\": 1, \"caf\u00e9\": \"ok\", \"a/b\": [true]}")
      ;; The canonical address percent-encodes pointer tokens.
      (should (equal (cdar (mevedel-history-agent-documents "agent://root/keys#/two%20words" session))
                     "1"))
      (should (equal (cdar (mevedel-history-agent-documents "agent://root/keys#/caf%C3%A9" session))
                     "ok"))
      (should (equal (cdar (mevedel-history-agent-documents "agent://root/keys#/a~1b/0" session))
                     "true")))))

(ert-deftest mevedel-agent:an-idle-agent-without-a-result-is-unavailable ()
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (a (agent-test--spawn root "quiet")))
      (cl-letf (((symbol-function 'mevedel-history-agents)
                 (lambda (_) (list (list :path a :role "default" :status 'idle :outcome nil)))))
        (should (string-match-p "unavailable"
                                (cadr (should-error (mevedel-history-agent-documents
                                                     "agent://root/quiet" session)
                                                    :type 'mevedel-core-resource-error))))))))

;;;; Saved with the session

(ert-deftest mevedel-agent:the-registry-is-saved-and-resumed-interrupted ()
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (id (mevedel-session-id session))
           (dir (mevedel-chat-root root))
           (done (agent-test--spawn root "finished"))
           (busy (agent-test--spawn root "busy")))
      (agent-test--finish done 'done "the finished report")
      (mevedel-agent-send root busy "unread mail for busy")
      (let ((unread (length (agent-test--mail root busy))))
        ;; The session goes as Emacs would at a crash: nothing settles.
        (kill-buffer (mevedel-chat-data-buffer root))
        (let ((again (mevedel-chat-get-create dir id)))
          (unwind-protect
              (progn
                (should (equal (mapcar (lambda (a) (list (plist-get a :path) (plist-get a :status)
                                                         (plist-get a :outcome)))
                                       (mevedel-agent-list again))
                               `((,busy idle interrupted) (,done idle completed))))
                (should (equal (mevedel-agent-result again done) '(completed . "the finished report")))
                ;; The turn that was running reports interrupted, once.
                (let ((results (cl-remove-if-not
                                (lambda (m) (equal (plist-get m :sender) busy))
                                (agent-test--mail again "/root"))))
                  (should (= (length results) 1))
                  (should (equal (plist-get (car results) :attrs) '(("outcome" "interrupted")))))
                ;; Unread mail is intact; no idle conversation was loaded.
                (should (= (length (agent-test--mail again busy)) unread))
                ;; The first use loads that one conversation, and
                ;; continues it with the frozen configuration.
                (let ((buffer (mevedel-agent-conversation again done)))
                  (should (string-match-p "the finished report"
                                          (with-current-buffer buffer (buffer-string))))
                  (should (string-match-p "retained agent /root/finished"
                                          (mevedel-chat-frozen-system
                                           (mevedel-chat-of-buffer buffer))))
                  (should (eq (mevedel-agent-send again done "go on") 'started))
                  (should (eq (car (agent-test--send-of done))
                              (mevedel-chat-of-buffer buffer))))
                ;; A new agent still gets the next free name.
                (should (equal (agent-test--spawn again "busy") "/root/busy-2")))
            (kill-buffer (mevedel-chat-data-buffer again))))))))

(ert-deftest mevedel-agent:saved-records-are-a-closed-schema ()
  (let* ((config (cl-loop for key in mevedel-agent-config-keys append (list key nil)))
         (good (list :path "/root/a" :parent "/root" :role nil
                     :role-flags '(:verdict nil)
                     :config config :status 'idle
                     :outcome 'completed :payload "x" :verdict nil :tool-calls 0)))
    (setq good (append good '(:transcript "agents/root.a.sqlite" :hook-context nil :served nil)))
    (should (eq (mevedel-agent-check-record good) good))
    ;; A record saved before hook context and the serving model were
    ;; kept has none waiting, and was served by its frozen model.
    (let ((unhooked (butlast good 4)))
      (should-error (mevedel-agent-check-record unhooked))
      (should (equal (mevedel-agent-check-record (mevedel-agent--upgrade-record unhooked)) good)))
    ;; A record saved when a spawn's Plan stamp bound every turn loses it.
    (let ((stamped (append good '(:plan-stamp (:plan sticky)))))
      (should-error (mevedel-agent-check-record stamped))
      (should (equal (mevedel-agent-check-record (mevedel-agent--upgrade-record stamped)) good)))
    (should-error (mevedel-agent-check-record (append good '(:extra 1))))
    (should-error (mevedel-agent-check-record (append good '(:path "/root/b"))))
    (should-error (mevedel-agent-check-record (cddr good)))
    (should-error (mevedel-agent-check-record (plist-put (copy-sequence good) :path "root/a")))
    (should-error (mevedel-agent-check-record
                   (plist-put (copy-sequence good) :config (append config '(:x 1)))))
    ;; A record saved before specialists were frozen still loads, unconfined.
    (let* ((old (plist-put (copy-sequence good) :config
                           (cl-loop for (key value) on config by #'cddr
                                    unless (eq key :specialists) append (list key value))))
           (upgraded (mevedel-agent--upgrade-record old)))
      (should-error (mevedel-agent-check-record old))
      (should (eq (mevedel-agent-check-record upgraded) upgraded))
      (should (eq (plist-get (plist-get upgraded :config) :specialists) t))
      (should (eq (mevedel-agent--upgrade-record good) good)))))

;;;; Specialists: MCP tools by role, frozen at the spawn

(defun agent-test--register-mcp (name)
  "Register a stand-in MCP tool NAME (category mcp), as mevedel-mcp.el would."
  (mevedel-tool-register name (list :category "mcp" :groups '("mcp")
                                    :description (concat name " does a thing")
                                    :input-schema "{\"type\": \"object\"}"
                                    :function (lambda (_) "done"))))

(defun agent-test--catalog (chat)
  "Return the identities a ToolCall program of CHAT may call."
  (mapcar #'mevedel-tool-identity (mevedel-ptc-catalog (mevedel-chat-data-buffer chat))))

(ert-deftest mevedel-agent:specialists-follow-the-role-and-are-frozen-at-spawn ()
  "A child's MCP specialists are those its role allows, frozen at its spawn.
The default role inherits its delegator's; a named role reaches an MCP
tool only by naming it (mcp__SERVER__TOOL or mcp__SERVER) and never
as a native tool; tools registered later join no running child, a
default grandchild inherits its parent's set, and a resumed child
keeps the identities it was frozen with."
  (require 'mevedel-ptc)
  (let ((mevedel-tool-visible-functions nil)
        (mevedel-agent-roles
         '(("plain" :description "No MCP" :tools ("Read" "ToolCall"))
           ("server" :description "A server's" :tools ("ToolCall" "mcp__srv"))
           ("one" :description "One tool" :tools ("ToolCall" "mcp__srv__a" "Agent")))))
    (agent-test--register-mcp "mcp__srv__a")
    (agent-test--register-mcp "mcp__srv__b")
    (unwind-protect
        (agent-test--with-root root
          (let* ((child-of (lambda (path) (car (agent-test--send-of path))))
                 (default (funcall child-of (agent-test--spawn root "default")))
                 (plain (funcall child-of (agent-test--spawn root "plain" :role "plain")))
                 (server (funcall child-of (agent-test--spawn root "server" :role "server")))
                 (one (funcall child-of (agent-test--spawn root "one" :role "one")))
                 (mcp (lambda (chat)
                        (sort (cl-remove-if-not (lambda (id) (string-prefix-p "mcp__" id))
                                                (agent-test--catalog chat))
                              #'string<))))
            (should (equal (funcall mcp root) '("mcp__srv__a" "mcp__srv__b")))
            (should (equal (funcall mcp default) '("mcp__srv__a" "mcp__srv__b")))
            (should (equal (funcall mcp plain) nil))
            (should (equal (funcall mcp server) '("mcp__srv__a" "mcp__srv__b")))
            (should (equal (funcall mcp one) '("mcp__srv__a")))
            ;; A named role reaches only the specialists it lists, and
            ;; ListAgents, which every named role gets.
            (should-not (member "ListExecutions" (agent-test--catalog plain)))
            (should (member "ListAgents" (agent-test--catalog plain)))
            ;; Naming an MCP tool does not make it a provider tool.
            (should-not (cl-find "mcp__srv__a" (mevedel-chat-tools one)
                                 :key #'gptel-tool-name :test #'equal))
            ;; The specialist listing each child receives is its own.
            (let ((listing (lambda (chat) (car (mevedel-ptc-listing-mail chat)))))
              (should (string-match-p "mcp__srv__b" (funcall listing default)))
              (should-not (string-match-p "mcp__" (funcall listing plain)))
              (should-not (string-match-p "mcp__srv__b" (funcall listing one))))
            ;; A tool listed later reaches the root, not the running children.
            (agent-test--register-mcp "mcp__srv__c")
            (should (member "mcp__srv__c" (funcall mcp root)))
            (dolist (chat (list default server one))
              (should-not (member "mcp__srv__c" (funcall mcp chat))))
            ;; A ToolCall program of a child cannot name it.
            (with-current-buffer (mevedel-chat-data-buffer server)
              (should-not (member "mcp__srv__c" (car (mevedel-ptc--catalog-names
                                                      (current-buffer)))))
              (should (member "mcp__srv__a" (car (mevedel-ptc--catalog-names
                                                  (current-buffer))))))
            ;; A default grandchild inherits its parent's set, not the root's.
            (let ((grandchild (funcall child-of (agent-test--spawn one "sub"))))
              (should (equal (funcall mcp grandchild) '("mcp__srv__a"))))
            ;; A named grandchild resolves its own role, not its parent's set.
            (let ((named (funcall child-of (agent-test--spawn one "wide" :role "server"))))
              (should (equal (funcall mcp named) '("mcp__srv__a" "mcp__srv__b" "mcp__srv__c"))))
            ;; A resumed agent keeps the identities it was frozen with.
            (let* ((session (mevedel-chat-session root))
                   (dir (mevedel-chat-root root)))
              (agent-test--finish "/root/one" 'done "one's report")
              (kill-buffer (mevedel-chat-data-buffer root))
              (let ((again (mevedel-chat-get-create dir (mevedel-session-id session))))
                (unwind-protect
                    (let ((resumed (mevedel-chat-of-buffer
                                    (mevedel-agent-conversation again "/root/one"))))
                      (should (equal (funcall mcp resumed) '("mcp__srv__a")))
                      (should-not (cl-find "mcp__srv__a" (mevedel-chat-tools resumed)
                                           :key #'gptel-tool-name :test #'equal)))
                  (kill-buffer (mevedel-chat-data-buffer again)))))))
      (dolist (name '("mcp__srv__a" "mcp__srv__b" "mcp__srv__c"))
        (mevedel-tool-unregister name "mcp")))))

;;;; Plan stamps and the implementation override across agents

(defun agent-test--mode-verdict (chat patch)
  "Return the permission verdict on CHAT's ApplyPatch of PATCH."
  (let ((session (mevedel-chat-session chat)))
    (mevedel-permissions-decide-call (list :tool (mevedel-tool-get "ApplyPatch")
                                           :args (list :patch patch)
                                           :data-buffer (mevedel-chat-data-buffer chat)
                                           :session session)
                                     session)))

(ert-deftest mevedel-agent:approve-with-edits-child-inherits-override ()
  (agent-test--with-root root
    (let ((patch "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch")
          child grandchild)
      ;; The implementation turn of a plan approved with edits spawns a child.
      (mevedel-test-in-turn root (list :id "impl" :mode-override 'edits)
        (let ((path (agent-test--spawn root "build" :role "worker")))
          (setq child (car (agent-test--send-of path)))
          (should (eq (agent-test--mode-verdict child patch) 'allow))))
      ;; The override stays with the child's invocation after the root
      ;; turn ended, and reaches what it spawns.
      (should (eq (agent-test--mode-verdict root patch) 'ask))
      (should (eq (agent-test--mode-verdict child patch) 'allow))
      (setq grandchild (car (agent-test--send-of
                             (agent-test--spawn child "part" :role "worker"))))
      (should (eq (agent-test--mode-verdict grandchild patch) 'allow))
      ;; It ends with that invocation: a later follow-up has the session's mode.
      (agent-test--finish "/root/build" 'done "built")
      (should (eq (mevedel-agent-send root "/root/build" "more") 'started))
      (should (eq (agent-test--mode-verdict child patch) 'ask))
      (should (eq (mevedel-permissions-session-mode (mevedel-chat-session root)) 'ask)))))

(ert-deftest mevedel-agent:plan-turns-direct-only-plan-turns ()
  (agent-test--with-root root
    (let* ((patch "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch")
           (session (mevedel-chat-session root))
           (plain (agent-test--spawn root "plain" :role "worker"))
           (plain-chat (car (agent-test--send-of plain)))
           (sticky (list :id "plan" :plan-stamp (mevedel-plan-make-stamp 'sticky))))
      (mevedel-test-in-turn root sticky
        (let ((planner (agent-test--spawn root "planner" :role "worker")))
          ;; A running turn without a stamp cannot be directed from Plan.
          (should (string-match-p
                   "/root/plain is running a turn that is not in Plan mode"
                   (cadr (should-error (mevedel-agent-send root plain "edit it")
                                       :type 'user-error))))
          (should-not (agent-test--mail root plain))
          ;; A stamped one can, and the record names the stamp.
          (should (eq (mevedel-agent-send root planner "look at b") 'queued))
          (should (equal (plist-get (car (agent-test--mail root planner)) :attrs)
                         '(("plan" "sticky"))))
          ;; An idle agent started from Plan starts a Plan turn.
          (agent-test--finish plain 'done "done")
          (should (eq (mevedel-agent-send root plain "now plan") 'started))
          (should (string-match-p "Plan mode" (cdr (agent-test--verdict
                                                    plain-chat "ApplyPatch" (list :patch patch)))))
          ;; Mail from Plan to it that its last sample missed...
          (should (eq (mevedel-agent-send root plain "one more thing") 'queued))
          (agent-test--finish plain 'done "planned")))
      ;; ...wakes it when that turn ends, and stamps the turn reading it.
      (should (equal (cadr (agent-test--send-of plain)) mevedel-mailbox-wake-prompt))
      (should (string-match-p "Plan mode" (cdr (agent-test--verdict
                                                plain-chat "ApplyPatch" (list :patch patch)))))
      (mevedel-test-drain-mail plain-chat)
      (agent-test--finish plain 'done "read")
      ;; With no Plan mail left, an ordinary follow-up is ordinary.
      (should (eq (mevedel-agent-send root plain "edit now") 'started))
      (should-not (agent-test--verdict plain-chat "ApplyPatch" (list :patch patch)))
      (agent-test--finish plain 'done "edited")
      ;; A turn starting while the session is in sticky Plan is a Plan
      ;; turn, even without a caller (a result waking its parent).
      (let ((sub (agent-test--spawn plain-chat "sub")))
        (mevedel-agent-send root plain "wait for sub")
        (agent-test--finish plain 'done "waiting")
        (mevedel-plan-enter session)
        (agent-test--finish sub 'done "sub result")
        (should (equal (cadr (agent-test--send-of plain)) mevedel-mailbox-wake-prompt))
        (mevedel-plan-leave session)
        (should (string-match-p "Plan mode" (cdr (agent-test--verdict
                                                  plain-chat "ApplyPatch" (list :patch patch)))))))))

(ert-deftest mevedel-agent:plan-mail-stamps-the-root-turn-that-reads-it ()
  (agent-test--with-root root
    (let* ((patch "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch")
           (planner (mevedel-test-in-turn root
                        (list :id "plan" :plan-stamp (mevedel-plan-make-stamp 'sticky))
                      (agent-test--spawn root "planner" :role "worker")))
           (planner-chat (car (agent-test--send-of planner))))
      ;; /root always takes mail, even from Plan.
      (should (eq (mevedel-agent-send planner-chat "/root" "first") 'queued))
      ;; A root turn that starts with it unread is a Plan turn.
      (let ((turn (list :id "next")))
        (run-hook-with-args 'mevedel-chat-turn-functions root turn)
        (should (eq (mevedel-plan-stamp-kind (plist-get turn :plan-stamp)) 'sticky)))
      ;; A running root turn becomes one when it drains the mail.
      (mevedel-test-in-turn root (list :id "running")
        (should-not (agent-test--verdict root "ApplyPatch" (list :patch patch)))
        (should (= 1 (length (mevedel-test-drain-mail root))))
        (should (string-match-p "Plan mode" (cdr (agent-test--verdict
                                                  root "ApplyPatch" (list :patch patch))))))
      ;; A RESULT from the planner carries no stamp.
      (agent-test--finish planner 'done "the plan")
      (let ((turn (list :id "after")))
        (run-hook-with-args 'mevedel-chat-turn-functions root turn)
        (should-not (plist-get turn :plan-stamp))))))

(ert-deftest mevedel-agent:a-plan-spawned-childs-follow-up-after-resume-is-not-plan ()
  "A resumed child's follow-up outside Plan applies its own visibility."
  (agent-test--with-root root
    (let* ((patch "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch")
           (session (mevedel-chat-session root))
           (id (mevedel-session-id session))
           (dir (mevedel-chat-root root))
           (planner (progn (mevedel-plan-enter session)
                           (mevedel-test-in-turn root
                               (list :id "plan" :plan-stamp (mevedel-plan-make-stamp 'sticky))
                             (agent-test--spawn root "planner" :role "worker")))))
      (mevedel-plan-leave session)
      (agent-test--finish planner 'done "the plan")
      (kill-buffer (mevedel-chat-data-buffer root))
      (let ((again (mevedel-chat-get-create dir id)))
        (unwind-protect
            (let ((child (mevedel-chat-of-buffer (mevedel-agent-conversation again planner))))
              (should-not (mevedel-plan-active-p (mevedel-chat-session again)))
              (should (eq (mevedel-agent-send again planner "go on") 'started))
              (should-not (agent-test--verdict child "ApplyPatch" (list :patch patch))))
          (kill-buffer (mevedel-chat-data-buffer again)))))))

(ert-deftest mevedel-agent:pending-hook-context-is-saved-with-the-agent-and-resumed ()
  "Hook context waiting for an agent's next turn survives a restart, its own."
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (id (mevedel-session-id session))
           (dir (mevedel-chat-root root))
           (held (agent-test--spawn root "held"))
           (other (agent-test--spawn root "other"))
           (blocks (list "<hook-context event=\"UserPromptSubmit\">\nuse the staging db\n\
</hook-context>")))
      ;; A follow-up's hook added context; the follow-up never reached the model.
      (mevedel-hooks-restore-context session blocks held)
      (agent-test--finish held 'done "first")
      (agent-test--finish other 'done "first")
      (kill-buffer (mevedel-chat-data-buffer root))
      (let ((again (mevedel-chat-get-create dir id)))
        (unwind-protect
            (let ((resumed (mevedel-chat-session again)))
              (should (equal (mevedel-hooks-context resumed held) blocks))
              (should-not (mevedel-hooks-context resumed other))
              (should-not (member (car blocks) (mevedel-hooks-context resumed nil))))
          (kill-buffer (mevedel-chat-data-buffer again)))))))

(ert-deftest mevedel-agent:resumed-agents-keep-their-tools-and-verdicts ()
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (id (mevedel-session-id session))
           (dir (mevedel-chat-root root))
           (patch "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch")
           (checker (agent-test--spawn root "check" :role "verifier"))
           (planner (progn (mevedel-plan-enter session)
                           (prog1 (agent-test--spawn root "plan it" :role "worker")
                             (mevedel-plan-leave session))))
           (builder (agent-test--spawn root "build" :role "worker")))
      (agent-test--finish checker 'done "Probed it.\nVERDICT: FAIL")
      ;; The RESULT names the verdict it parsed.
      (should (equal (plist-get (cl-find checker (agent-test--mail root "/root")
                                         :key (lambda (m) (plist-get m :sender)) :test #'equal)
                                :attrs)
                     '(("outcome" "completed") ("verdict" "FAIL"))))
      (dolist (path (list planner builder)) (agent-test--finish path 'done "done"))
      (kill-buffer (mevedel-chat-data-buffer root))
      (let ((again (mevedel-chat-get-create dir id)))
        (unwind-protect
            (cl-flet ((verdict (path)
                        (agent-test--verdict
                         (mevedel-chat-of-buffer (mevedel-agent-conversation again path))
                         "ApplyPatch" (list :patch patch))))
              (should (equal (plist-get (mevedel-agent-status again checker) :verdict) "FAIL"))
              (should-not (member "ApplyPatch"
                                  (agent-test--tool-names
                                   (mevedel-chat-of-buffer
                                    (mevedel-agent-conversation again checker)))))
              ;; An idle agent has no turn, so no Plan stamp.
              (should-not (verdict planner))
              (should-not (verdict builder))
              ;; The resumed verifier's next report is still read for its verdict.
              (should (eq (mevedel-agent-send again checker "again") 'started))
              (agent-test--finish checker 'done "Looked again.\nVERDICT: PASS")
              (should (equal (plist-get (mevedel-agent-status again checker) :verdict) "PASS")))
          (kill-buffer (mevedel-chat-data-buffer again)))))))

;;;; Views

(ert-deftest mevedel-agent:an-agent-row-opens-the-childs-read-only-view ()
  (require 'mevedel-agent-view)
  (agent-test--with-root root
    (let* ((view (mevedel-view-buffer root))
           (prompter (mevedel-session-prompter (mevedel-chat-session root)))
           (path (agent-test--spawn root "looked at")))
      (unwind-protect
          (progn
            (should (mevedel-agent-view--visit-row root "Agent" nil (list :path path)))
            (should-not (mevedel-agent-view--visit-row root "Read" nil (list :path path)))
            (let ((child-view (window-buffer (selected-window))))
              (should (equal (mevedel-chat-agent (mevedel-view-chat child-view)) path))
              ;; Opening it left the session's cards with the root's view.
              (should (eq (mevedel-session-prompter (mevedel-chat-session root)) prompter))
              (with-current-buffer child-view
                (should (string-match-p "Task of looked at" (buffer-string)))
                (should-error (mevedel-view-send) :type 'user-error))
              (kill-buffer child-view))
            ;; /agents lists it; k interrupts it.
            (mevedel-agent-view-list root)
            (with-current-buffer (format "*mevedel agents: %s*" (mevedel-chat-name root))
              (goto-char (point-min))
              (should (equal (tabulated-list-get-id) path))
              (mevedel-agent-view-interrupt-at-point)
              (should (string-match-p "idle (interrupted)" (buffer-string)))
              (kill-buffer))
            (should (string-match-p "interrupted by user"
                                    (cdr (mevedel-agent-result root path)))))
        (kill-buffer view)))))

;;;; Turn limits

(defun agent-test--panel (view)
  "Return the background panel's text in VIEW."
  (with-current-buffer view
    (buffer-substring-no-properties mevedel-view--panel mevedel-view--separator)))

(ert-deftest mevedel-agent:active-agents-are-background-work-with-interrupt ()
  (require 'mevedel-agent-view)
  (agent-test--with-root root
    (let* ((mevedel-agent-capacity 1)
           (view (mevedel-view-buffer root))
           (ps nil)
           (rows (lambda ()
                   (with-current-buffer ps
                     (mapcar (lambda (entry)
                               (mapcar #'substring-no-properties (append (cadr entry) nil)))
                             tabulated-list-entries)))))
      (unwind-protect
          (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) t)))
            (switch-to-buffer view)
            (mevedel-panel-redraw view)
            (should (equal (agent-test--panel view) ""))
            (setq ps (mevedel-ps root))
            (should-not (funcall rows))
            (switch-to-buffer view)
            (display-buffer ps)
            (let ((alpha (agent-test--spawn root "alpha" :role "worker"))
                  (beta (agent-test--spawn root "beta")))
              ;; The panel and /ps follow the new agents by themselves (no
              ;; timer was running): the running one and the waiting one.
              (mevedel-test-wait-until
                (string-match-p "Background work (2)" (agent-test--panel view)) 5)
              (mevedel-test-wait-until (= 2 (length (funcall rows))) 5)
              (let ((text (agent-test--panel view)))
                (should (string-match-p "Background work (2)" text))
                (should (string-match-p "▸ Agent /root/alpha (worker)  running [0-9.]+s\n" text))
                (should (string-match-p
                         "▸ Agent /root/beta (default)  waiting for a slot [0-9.]+s\n" text)))
              ;; /ps has them too, with the same interrupt as a stop.
              (let ((row (assoc "Agent" (funcall rows))))
                (should (equal (butlast row 3) (list "Agent" alpha "running" "/root/alpha (worker)"
                                                     "/root")))
                (should (equal (last row 2) '("0 calls" ""))))
              (should (member "waiting for a slot" (mapcar #'caddr (funcall rows))))
              (with-current-buffer ps
                (goto-char (point-min))
                (while (not (equal (tabulated-list-get-id) beta)) (forward-line 1))
                (mevedel-ps-stop))
              (should (eq (plist-get (mevedel-agent-status root beta) :outcome) 'interrupted))
              (should (string-match-p "interrupted by user" (cdr (mevedel-agent-result root beta))))
              ;; Both follow the change by themselves; the settled agent leaves.
              (mevedel-test-wait-until
                (not (string-match-p "beta" (agent-test--panel view))) 5)
              (mevedel-test-wait-until (= 1 (length (funcall rows))) 5)
              (should (string-match-p "Background work (1)" (agent-test--panel view)))
              ;; Expanded, an agent offers its view and the interrupt.
              (with-current-buffer view
                (goto-char mevedel-view--panel)
                (search-forward "Agent /root/alpha")
                (mevedel-panel-toggle))
              (should (string-match-p "0 tool calls\n +\\[Open view\\] \\[Interrupt\\]"
                                      (agent-test--panel view)))
              (mevedel-test-press-panel-button view "Open view")
              (let ((child-view (window-buffer (selected-window))))
                (should (equal (mevedel-chat-agent (mevedel-view-chat child-view)) alpha))
                (kill-buffer child-view))
              (switch-to-buffer view)
              (mevedel-test-press-panel-button view "Interrupt")
              (should (eq (plist-get (mevedel-agent-status root alpha) :outcome) 'interrupted))
              ;; Idle agents are /agents', not the panel's.
              (mevedel-test-wait-until (equal (agent-test--panel view) "") 5)
              (mevedel-test-wait-until (null (funcall rows)) 5)
              (should (= (length (mevedel-agent-list root)) 2))))
        (when (buffer-live-p ps) (kill-buffer ps))
        (kill-buffer view)))))

(ert-deftest mevedel-agent:slash-stop-interrupts-a-named-agent ()
  (agent-test--with-root root
    (let ((a (agent-test--spawn root "alpha"))
          (b (agent-test--spawn root "beta")))
      ;; The composer completes agent paths after /stop.
      (should (member a (mevedel-ps-stop-candidates root)))
      (should-error (mevedel-ps-slash-stop root "/root/nobody") :type 'user-error)
      ;; A bare /stop is for executions: agents are interrupted by name.
      (should-error (mevedel-ps-slash-stop root "") :type 'user-error)
      (should (= 1 (mevedel-ps-slash-stop root a)))
      (should (eq (plist-get (mevedel-agent-status root a) :outcome) 'interrupted))
      (should-not (plist-get (mevedel-agent-status root b) :outcome))
      (should-not (member a (mevedel-ps-stop-candidates root))))))

(ert-deftest mevedel-agent:max-turns-warns-then-stops-with-a-note ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "capped"))
           (child (car (agent-test--send-of a)))
           (tree (mevedel-agent--tree-of (mevedel-chat-session root)))
           (handle (gethash a (mevedel-agent--tree-agents tree)))
           (aborted nil))
      (setf (mevedel-agent-handle-config handle)
            (plist-put (mevedel-agent-handle-config handle) :max-turns 5))
      (cl-letf (((symbol-function 'mevedel-chat-abort) (lambda (chat) (setq aborted chat) t)))
        ;; Samples 2, 3: nothing; 4 (80%): a warning; 5: the last; 6: stop.
        (should-not (mevedel-agent--sample-notices child))
        (should-not (mevedel-agent--sample-notices child))
        (should (string-match-p "Wrap up" (car (mevedel-agent--sample-notices child))))
        (should (string-match-p "final sample" (car (mevedel-agent--sample-notices child))))
        (should-not (mevedel-agent--sample-notices child))
        (mevedel-test-wait-until aborted 2)
        (should (eq aborted child)))
      (agent-test--finish a 'abort "partial answer")
      (should (equal (mevedel-agent-result root a)
                     (cons 'completed "partial answer\n\n[Stopped before a final answer: \
the agent reached its limit of 5 turns]"))))))

;;;; Mail, executions and lifecycle (issue 41)

(ert-deftest mevedel-agent:mail-during-the-final-sample-is-acted-on ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "a"))
           (child (car (agent-test--send-of a)))
           (sub (agent-test--spawn child "sub")))
      ;; MAIL and a RESULT arrive while a's final answer streams: no
      ;; tool boundary follows to drain them.
      (should (eq (mevedel-agent-send root a "late news") 'queued))
      (agent-test--finish sub 'done "sub result")
      (agent-test--finish a 'done "answer")
      ;; Its settlement gives it a turn that reads them.
      (should (eq (plist-get (mevedel-agent-status root a) :status) 'running))
      (should (equal (cadr (agent-test--send-of a)) mevedel-mailbox-wake-prompt))
      (let ((blocks (mevedel-test-drain-mail child)))
        (should (= (length blocks) 2))
        (should (string-match-p "late news" (car blocks)))
        (should (string-match-p "type=\"RESULT\" sender=\"/root/a/sub\"" (cadr blocks))))
      ;; Mail read before the answer wakes nothing after it.
      (mevedel-agent-send root a "read in time")
      (mevedel-test-drain-mail child)
      (agent-test--finish a 'done "second answer")
      (should (eq (plist-get (mevedel-agent-status root a) :status) 'idle))
      ;; Nor does self-mail, nor mail to a turn that failed.
      (mevedel-agent-send root a "go")
      (mevedel-agent-send child a "note to self")
      (mevedel-agent-send root a "for the failed turn")
      (agent-test--finish a 'error)
      (should (eq (plist-get (mevedel-agent-status root a) :status) 'idle)))))

(defun agent-test--result-kinds (chat)
  "Return (KIND SENDER PAYLOAD) of the unread mail of /root in CHAT's session."
  (mapcar (lambda (m) (list (plist-get m :kind) (plist-get m :sender) (plist-get m :payload)))
          (agent-test--mail chat "/root")))

(ert-deftest mevedel-agent:an-answer-is-held-while-its-executions-run ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "runner"))
           (child (car (agent-test--send-of a))))
      (should (string-match-p
               "execution_id"
               (mevedel-test-run-tool child "Bash" "b1" '(:command "sleep 1.5; echo late output"
                                                          :description "wait" :yield_time_ms 250))))
      (agent-test--finish a 'done "my answer")
      ;; Held: still active, nothing published yet.
      (should (eq (plist-get (mevedel-agent-status root a) :status) 'running))
      (should-not (agent-test--mail root "/root"))
      (mevedel-test-wait-until (eq (plist-get (mevedel-agent-status root a) :status) 'idle) 20)
      ;; One settlement: the unchanged answer, then the completion it
      ;; could not read, attributed to it; nothing left in its mailbox.
      (let ((mail (agent-test--result-kinds root)))
        (should (equal (mapcar #'butlast mail) `(("RESULT" ,a) ("EXECUTION" ,a))))
        (should (equal (nth 2 (car mail)) "my answer"))
        (should (string-match-p "late output" (nth 2 (cadr mail)))))
      (should-not (agent-test--mail root a))
      (should (equal (mevedel-agent-result root a) '(completed . "my answer"))))))

(ert-deftest mevedel-agent:interrupt-stops-the-targets-executions-and-queued-work ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "runner"))
           (child (car (agent-test--send-of a)))
           (key (mevedel-session-id (mevedel-chat-session root))))
      (mevedel-test-run-tool child "Bash" "b1" '(:command "sleep 30" :description "wait"
                                                      :yield_time_ms 250))
      (should (= 1 (length (mevedel-core-exec-list key a))))
      (should (eq (mevedel-agent-interrupt root a) 'running))
      ;; Its execution is terminated...
      (mevedel-test-wait-until (null (mevedel-core-exec-list key a)) 20)
      ;; ...and its report reaches the spawn parent, not the idle
      ;; agent's mailbox, where nothing would read it.
      (mevedel-test-wait-until (assoc "EXECUTION" (agent-test--result-kinds root)) 10)
      (should-not (agent-test--mail root a))
      ;; A call its last sample made, not yet admitted, does not run.
      (should (string-match-p "turn of /root/runner has ended"
                              (mevedel-test-run-tool child "Bash" "b2"
                                                     '(:command "touch ran.txt" :description "touch"))))
      (should-not (file-exists-p (expand-file-name "ran.txt" (mevedel-chat-root root)))))))

(ert-deftest mevedel-agent:a-root-wait-wakes-on-its-own-background-work ()
  (agent-test--with-root root
    (let ((woken nil))
      (mevedel-test-run-tool root "Bash" "b1" '(:command "sleep 0.5; echo done"
                                                :description "wait" :yield_time_ms 250))
      (mevedel-agent-wait root 60000 (lambda (reason) (setq woken reason)))
      (mevedel-test-wait-until woken 20)
      (should (string-match-p "\\`execution .* reported\\'" woken)))))

(ert-deftest mevedel-agent:an-active-turn-resumes-with-its-partial-work ()
  (agent-test--with-root root
    (let* ((session (mevedel-chat-session root))
           (id (mevedel-session-id session))
           (dir (mevedel-chat-root root))
           (busy (agent-test--spawn root "busy"))
           (child (car (agent-test--send-of busy))))
      (with-current-buffer (mevedel-chat-data-buffer child)
        (goto-char (point-max))
        (insert (propertize "Found the first two causes" 'gptel 'response)))
      (mevedel-save-checkpoint child nil t)
      ;; Emacs stops: nothing settles.
      (kill-buffer (mevedel-chat-data-buffer root))
      (let ((again (mevedel-chat-get-create dir id)))
        (unwind-protect
            (let ((result (cl-find busy (agent-test--mail again "/root")
                                   :key (lambda (m) (plist-get m :sender)) :test #'equal)))
              (should (equal (plist-get result :attrs) '(("outcome" "interrupted"))))
              (should (string-match-p "Emacs stopped.*\nPartial work:\nFound the first two causes"
                                      (plist-get result :payload)))
              (should (string-match-p "Partial work"
                                      (cdr (mevedel-agent-result again busy)))))
          (kill-buffer (mevedel-chat-data-buffer again)))))))

(ert-deftest mevedel-agent:emacs-exit-saves-child-conversations ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "writer"))
           (child (car (agent-test--send-of a)))
           (buffer (mevedel-chat-data-buffer child)))
      (should (memq #'mevedel-agent--flush-all kill-emacs-hook))
      (with-current-buffer buffer
        (goto-char (point-max))
        (insert (propertize "streamed, not yet saved" 'gptel 'response)))
      (should (mevedel-transcript-dirty-p buffer))
      (mevedel-agent--flush-all)
      (should-not (mevedel-transcript-dirty-p buffer))
      (let ((store (mevedel-core-store-open
                    (expand-file-name (mevedel-agent-handle-transcript
                                       (mevedel-agent--handle
                                        (mevedel-agent--tree-of (mevedel-chat-session root)) a))
                                      (mevedel-session-directory (mevedel-chat-session root))))))
        (should (string-match-p "streamed, not yet saved"
                                (with-temp-buffer
                                  (mevedel-transcript-restore (current-buffer) store)
                                  (buffer-string))))))))

(ert-deftest mevedel-agent:each-turn-is-reminded-of-its-children ()
  (agent-test--with-root root
    (let* ((a (agent-test--spawn root "a"))
           (b (agent-test--spawn root "b" :role "worker"))
           (child (car (agent-test--send-of a))))
      (agent-test--spawn child "grandchild")
      (agent-test--finish b 'done "b done")
      (let ((reminder (mevedel-agent--children-reminder root)))
        (should (equal reminder
                       (list (format "<agent-children caller=\"/root\">
Your child agents (ListAgents lists the whole tree):
- %s (default): running
- %s (worker): idle, its last turn completed
</agent-children>" a b)))))
      ;; A child started in the turn is named once at the next boundary.
      (mevedel-test-in-turn root (list :id "turn")
        (let ((c (agent-test--spawn root "c")))
          (should (member (format "<agent-children caller=\"/root\">
Child agents you started in this turn:
- %s (default): running
</agent-children>" c)
                          (mevedel-test-drain-mail root)))
          (should-not (cl-some (lambda (block) (string-match-p "Child agents" block))
                               (mevedel-test-drain-mail root))))))))

(ert-deftest mevedel-agent:background-turns-wait-for-drafts-and-cards ()
  (agent-test--with-root root
    (let* ((key (mevedel-session-id (mevedel-chat-session root)))
           (view (mevedel-view-buffer root))
           (root-sends (lambda () (cl-remove-if-not (lambda (send) (eq (car send) root))
                                                    agent-test--sends))))
      (unwind-protect
          (progn
            ;; A draft in the composer holds the wake.
            (with-current-buffer view (mevedel-view--set-composer "half a thought"))
            (mevedel-mailbox--note-wake key '(1))
            (mevedel-mailbox-offer-wakes)
            (should-not (funcall root-sends))
            ;; Emptying it lets the wake go.
            (with-current-buffer view (mevedel-view--set-composer ""))
            (mevedel-test-wait-until (funcall root-sends) 5)
            (setq agent-test--sends nil)
            (setf (mevedel-chat-turn root) nil)
            ;; A child's card open in the root's view holds it too.
            (let ((card (mevedel-interaction-open root :kind 'test :owner "/root/a"
                                                  :request 'child :title "Allow?"
                                                  :render (lambda (_) "Allow?"))))
              (mevedel-mailbox--note-wake key '(2))
              (mevedel-mailbox-offer-wakes)
              (should-not (funcall root-sends))
              (mevedel-interaction-settle card 'cancelled)
              (mevedel-test-wait-until (funcall root-sends) 5)))
        (remhash key mevedel-mailbox--pending-wakes)
        (kill-buffer view)))))

(ert-deftest mevedel-agent:a-cancelled-follow-up-keeps-the-previous-result ()
  (agent-test--with-root root
    (let* ((mevedel-agent-capacity 1)
           (a (agent-test--spawn root "a")))
      (agent-test--finish a 'done "first answer")
      (agent-test--spawn root "b")
      (should (eq (mevedel-agent-send root a "more") 'waiting))
      (should (eq (mevedel-agent-interrupt root a) 'waiting))
      (should (equal (mevedel-agent-result root a) '(completed . "first answer")))
      (should (equal (plist-get (car (last (agent-test--mail root "/root"))) :attrs)
                     '(("outcome" "interrupted")))))))

(ert-deftest mevedel-agent:an-interrupt-during-compaction-sends-nothing ()
  (let* ((dir (make-temp-file "agent-compaction" t))
         (root (mevedel-chat-get-create dir))
         (summary-callback nil)
         (compact nil)
         (sent nil)
         (mevedel-compaction-keep-turns 1)
         (mevedel-agent-stop-functions nil)
         (mevedel-agent-prompt-functions nil))
    (setf (mevedel-chat-backend root) (gptel-make-openai "agent-test" :key "x" :models '(m))
          (mevedel-chat-model root) 'm)
    (unwind-protect
        (cl-letf (((symbol-function 'mevedel-compaction-needed-p) (lambda (&rest _) compact))
                  ((symbol-function 'mevedel-compaction--recovery-copy) (lambda (_) "compact-0001"))
                  ((symbol-function 'gptel-request)
                   (lambda (&rest args) (setq summary-callback (plist-get (cdr args) :callback))
                     nil))
                  ((symbol-function 'mevedel-chat--send-now)
                   (lambda (chat _text on-done &rest _) (push (cons chat on-done) sent) nil)))
          (let* ((tree (mevedel-agent--tree-of (mevedel-chat-session root)))
                 (mevedel-agent-start-functions
                  ;; Its conversation has turns enough to compact.
                  (list (lambda (path &rest _)
                          (let ((child (mevedel-agent-handle-chat
                                        (gethash path (mevedel-agent--tree-agents tree)))))
                            (with-current-buffer (mevedel-chat-data-buffer child)
                              (insert "an older turn\n")
                              (setf (mevedel-chat-turns child)
                                    (list (list :start (point-max-marker))
                                          (list :start (point-min-marker)))))))))
                 (path (agent-test--spawn root "compacting"))
                 (child (car (car sent))))
            ;; A first turn answers.
            (with-current-buffer (mevedel-chat-data-buffer child)
              (insert (propertize "the first answer" 'gptel 'response)))
            (funcall (cdr (pop sent)) child 'done)
            (should (equal (mevedel-agent-result root path) '(completed . "the first answer")))
            ;; The follow-up's request waits for the compaction of its history.
            (setq compact t)
            (should (eq (mevedel-agent-send root path "more") 'started))
            (should summary-callback)
            (should-not sent)
            (should (= (mevedel-agent--tree-active tree) 1))
            (should (eq (mevedel-agent-interrupt root path) 'running))
            (should (= (mevedel-agent--tree-active tree) 0))
            ;; The summary comes back late: the request stays unsent.
            (funcall summary-callback "a summary" nil)
            (should-not sent)
            ;; It never went out: the previous result stays, and the
            ;; RESULT says the follow-up was interrupted.
            (should (equal (mevedel-agent-result root path) '(completed . "the first answer")))
            (should (equal (plist-get (car (last (agent-test--mail root "/root"))) :attrs)
                           '(("outcome" "interrupted"))))))
      (kill-buffer (mevedel-chat-data-buffer root))
      (delete-directory dir t))))

(provide 'agent-test)
;;; agent-test.el ends here
