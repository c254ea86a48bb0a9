;;; permissions-test.el --- Tests of permission modes and rules  -*- lexical-binding: t; -*-

;;; Commentary:

;; `mevedel-permissions-decide-call': modes, rule precedence (deny >
;; ask > allow), path globs, the per-workspace file (read, never
;; evaluated) and clear errors for malformed rules; Bash judged by its
;; analysis, command-keyed session answers, the execution controls,
;; the cards, and reads that leave no session storage behind.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-permissions)
(require 'mevedel-chat)
(require 'mevedel-tool-exec)
(require 'mevedel-tool-fs)
(require 'mevedel-tool-emacs)
(require 'mevedel-view)

(cl-defun mevedel-permissions-test--decide (name &key paths root mode read-only-p edits-p
                                                 session-rules)
  "Decide a call of a tool NAME touching PATHS in workspace ROOT.
MODE is the session's permission mode, READ-ONLY-P and EDITS-P the
tool's nature, SESSION-RULES allow rules the session answered.  A
refusal is returned as `deny'."
  (let ((session (mevedel-session-create :workspace root :ephemeral t))
        (tool (mevedel-tool--make :name name :read-only-p read-only-p :snapshot-p edits-p
                                  :get-paths (lambda (_) paths))))
    (setf (mevedel-session-permission-mode session) mode)
    (dolist (rule session-rules)
      (mevedel-permissions-remember session (list (nth 1 rule))))
    (let ((verdict (mevedel-permissions-decide-call (list :tool tool :args nil :session session)
                                                    session)))
      (if (eq (car-safe verdict) 'deny) 'deny verdict))))

(defmacro mevedel-permissions-test--with-root (var &rest body)
  "Bind VAR to a fresh workspace directory around BODY."
  (declare (indent 1))
  `(let ((,var (file-name-as-directory (make-temp-file "mevedel-perm-" t)))
         (mevedel-permissions-rules nil)
         (mevedel-permissions-recheck-interval 0))
     (unwind-protect (progn ,@body)
       (delete-directory ,var t))))

(ert-deftest mevedel-permissions:modes-decide-without-rules ()
  (mevedel-permissions-test--with-root root
    (let ((inside (list (expand-file-name "a.txt" root)))
          (outside '("/etc/passwd")))
      ;; ask: read-only inside runs; outside or non-read-only asks.
      (should (eq (mevedel-permissions-test--decide "Read" :paths inside :root root
                                              :mode 'ask :read-only-p t)
                  'allow))
      (should (eq (mevedel-permissions-test--decide "Read" :paths outside :root root
                                              :mode 'ask :read-only-p t)
                  'ask))
      (should (eq (mevedel-permissions-test--decide "ApplyPatch" :paths inside :root root
                                              :mode 'ask :edits-p t)
                  'ask))
      ;; edits: edits inside run, outside ask, other tools ask.
      (should (eq (mevedel-permissions-test--decide "ApplyPatch" :paths inside :root root
                                              :mode 'edits :edits-p t)
                  'allow))
      (should (eq (mevedel-permissions-test--decide "ApplyPatch" :paths outside :root root
                                              :mode 'edits :edits-p t)
                  'ask))
      (should (eq (mevedel-permissions-test--decide "Bash" :root root :mode 'edits) 'ask))
      ;; full-auto: everything runs.
      (should (eq (mevedel-permissions-test--decide "Bash" :root root :mode 'full-auto) 'allow))
      (should-error (mevedel-permissions-test--decide "Bash" :root root :mode 'yolo)))))

(ert-deftest mevedel-permissions:deny-beats-ask-beats-allow ()
  (mevedel-permissions-test--with-root root
    (let ((path (list (expand-file-name "src/secret.env" root))))
      (let ((mevedel-permissions-rules '((allow "Read") (ask "Read" "**/*.env"))))
        (should (eq (mevedel-permissions-test--decide "Read" :paths path :root root
                                                :mode 'full-auto)
                    'ask)))
      (let ((mevedel-permissions-rules '((allow "Read") (ask "Read" "**/*.env")
                                         (deny "*" "src/secret.*"))))
        (should (eq (mevedel-permissions-test--decide "Read" :paths path :root root) 'deny)))
      ;; Session "always" answers are allow rules: a configured ask still wins.
      (let ((mevedel-permissions-rules '((ask "Read" "**/*.env"))))
        (should (eq (mevedel-permissions-test--decide "Read" :paths path :root root
                                                :session-rules '((allow "Read")))
                    'ask)))
      ;; A rule for another tool does not apply.
      (let ((mevedel-permissions-rules '((deny "Bash"))))
        (should (eq (mevedel-permissions-test--decide "Read" :paths path :root root
                                                :read-only-p t)
                    'allow))))))

(ert-deftest mevedel-permissions:globs ()
  (should (string-match-p (mevedel-permissions-glob-regexp "src/*.el") "src/a.el"))
  (should-not (string-match-p (mevedel-permissions-glob-regexp "src/*.el") "src/sub/a.el"))
  (should (string-match-p (mevedel-permissions-glob-regexp "src/**/*.el") "src/sub/deep/a.el"))
  (should (string-match-p (mevedel-permissions-glob-regexp "src/**/*.el") "src/a.el"))
  (should (string-match-p (mevedel-permissions-glob-regexp "a?c") "abc"))
  (should-not (string-match-p (mevedel-permissions-glob-regexp "a.c") "abc"))
  (mevedel-permissions-test--with-root root
    ;; Allow rules need every path to match; deny rules any path.
    (let ((mevedel-permissions-rules '((allow "Edit" "docs/**"))))
      (should (eq (mevedel-permissions-test--decide
                   "Edit" :root root :mode 'ask
                   :paths (list (expand-file-name "docs/a.md" root)))
                  'allow))
      (should (eq (mevedel-permissions-test--decide
                   "Edit" :root root :mode 'ask
                   :paths (list (expand-file-name "docs/a.md" root)
                                (expand-file-name "src/b.el" root)))
                  'ask)))
    (let ((mevedel-permissions-rules '((deny "Edit" "/etc/**"))))
      (should (eq (mevedel-permissions-test--decide "Edit" :root root :mode 'full-auto
                                              :paths '("/tmp/x" "/etc/hosts"))
                  'deny)))))

;; Deciding a call checks no file while its generation is fresh; the
;; next generation (the one-shot timer's expiry) sees a rewritten file.
(ert-deftest mevedel-permissions:workspace-file-is-rechecked-per-generation ()
  (mevedel-permissions-test--with-root root
    (make-directory (expand-file-name ".mevedel" root))
    (let ((file (expand-file-name mevedel-permissions-workspace-file root))
          (mevedel-permissions-recheck-interval 3600)
          (session (mevedel-session-create :workspace root :ephemeral t))
          (tool (mevedel-tool--make :name "Bash")))
      (setf (mevedel-session-permission-mode session) 'full-auto)
      (cl-flet ((decide ()
                  (let ((verdict (mevedel-permissions-decide-call
                                  (list :tool tool :args nil :session session) session)))
                    (if (eq (car-safe verdict) 'deny) 'deny verdict))))
        (mevedel-permissions--expire)
        (with-temp-file file (insert "((deny \"Bash\"))\n"))
        (should (eq (decide) 'deny))
        (should (timerp mevedel-permissions--expiry))
        ;; Rewritten (another size): this generation still has the old rules.
        (with-temp-file file (insert "((allow \"Bash\"))\n"))
        (let ((checks 0))
          (cl-letf* ((attributes (symbol-function 'file-attributes))
                     ((symbol-function 'file-attributes)
                      (lambda (&rest args) (cl-incf checks) (apply attributes args))))
            (should (eq (decide) 'deny))
            (should (= checks 0))
            (mevedel-permissions--expire)
            (should (eq (decide) 'allow))
            (should (= checks 1))))
        (cancel-timer mevedel-permissions--expiry)
        (mevedel-permissions--expire)))))

(ert-deftest mevedel-permissions:workspace-file-is-data ()
  (mevedel-permissions-test--with-root root
    (make-directory (expand-file-name ".mevedel" root))
    (let ((file (expand-file-name mevedel-permissions-workspace-file root))
          (marker (expand-file-name "evaluated" root)))
      (with-temp-file file (insert "((deny \"Bash\") (allow \"Read\" \"docs/**\"))\n"))
      (should (eq (mevedel-permissions-test--decide "Bash" :root root :mode 'full-auto) 'deny))
      ;; Code in the file is never run: it is read as (malformed) rules.
      (with-temp-file file (insert (format "(write-region \"\" nil %S)" marker)))
      (should-error (mevedel-permissions-test--decide "Bash" :root root))
      (should-not (file-exists-p marker))
      ;; A malformed rule is an error naming the rule.
      (with-temp-file file (insert "((maybe \"Bash\"))"))
      (should (string-match-p "action must be allow, ask or deny"
                              (cadr (should-error (mevedel-permissions-test--decide
                                                   "Bash" :root root)))))
      (with-temp-file file (insert "(unclosed"))
      (should (string-match-p "Cannot read"
                              (cadr (should-error (mevedel-permissions-test--decide
                                                   "Bash" :root root))))))))

(ert-deftest mevedel-permissions:refusal-texts ()
  (should (string-prefix-p "Permission denied: a permission rule"
                           (mevedel-permissions-refusal "Bash" 'rule)))
  (should (string-match-p "user declined this Bash call"
                          (mevedel-permissions-refusal "Bash" 'user)))
  (should (string-match-p "headless" (mevedel-permissions-refusal "Bash" 'headless))))

;;;; Commands, answers and cards

(defmacro mevedel-permissions-test--with-chat (chat cards &rest body)
  "Run BODY with CHAT a chat in a fresh workspace, in a turn, whose
prompter pushes each permission card it is shown on CARDS."
  (declare (indent 2))
  `(let* ((ws (file-name-as-directory (make-temp-file "mevedel-perm-chat" t)))
          (,chat (mevedel-chat-get-create ws))
          (,cards nil)
          (mevedel-permissions-rules nil))
     (mevedel-chat-set-prompter ,chat (lambda (_chat request) (push request ,cards)))
     (setf (mevedel-chat-turn ,chat) 'test-turn)
     (unwind-protect (progn ,@body)
       (setf (mevedel-chat-turn ,chat) nil)
       (mevedel-core-exec-teardown (mevedel-session-id (mevedel-chat-session ,chat)))
       (kill-buffer (mevedel-chat-data-buffer ,chat))
       (delete-directory ws t))))

(defun mevedel-permissions-test--context (chat name args)
  "Return the pipeline context of a call of tool NAME with ARGS in CHAT."
  (list :tool (mevedel-tool-get name) :args args :tool-use-id "toolu_perm"
        :data-buffer (mevedel-chat-data-buffer chat) :session (mevedel-chat-session chat)))

(defun mevedel-permissions-test--bash (chat command &optional name)
  "Return the decision on running COMMAND with Bash (or tool NAME) in CHAT."
  (mevedel-permissions-decide-call
   (mevedel-permissions-test--context chat (or name "Bash")
                                      (list :command command :description "test"))
   (mevedel-chat-session chat)))

(defun mevedel-permissions-test--card (chat command)
  "Return the card a Bash call of COMMAND in CHAT would show."
  (car (mevedel-permissions-cards
        (mevedel-permissions-test--context chat "Bash" (list :command command :description "t"))
        (mevedel-chat-session chat))))

(ert-deftest mevedel-permissions:read-only-bash-runs-without-a-card ()
  "In `ask' mode `git status' runs without a card; `rm -rf build' shows one."
  (mevedel-permissions-test--with-chat chat cards
    (should (eq (mevedel-chat-permission-mode chat) 'ask))
    (let ((status (mevedel-test-start-tool chat "Bash" "call_status"
                                           '(:command "git status" :description "status"))))
      (mevedel-test-wait-until (car status) 20)
      (should-not cards)
      (should-not (string-prefix-p "Permission denied" (caar status))))
    (let ((rm (mevedel-test-start-tool chat "Bash" "call_rm"
                                       '(:command "rm -rf build" :description "clean"))))
      (mevedel-test-wait-until cards 10)
      (should (= (length cards) 1))
      (should (string-match-p "`rm` changes files" (plist-get (car cards) :why)))
      (should-not (car rm))
      (funcall (plist-get (car cards) :answer) 'deny)
      (mevedel-test-wait-until (car rm) 10)
      (should (string-prefix-p "Permission denied" (caar rm))))))

(ert-deftest mevedel-permissions:execution-controls-never-ask ()
  "A WriteStdin poll and a StopExecution of the model's own execution show no card."
  (mevedel-permissions-test--with-chat chat cards
    (let* ((started (mevedel-test-run-tool chat "Bash" "call_sleep"
                                           (list :command (mevedel-test-sleep 30 "1")
                                                 :description "wait" :yield_time_ms 250)))
           (id (plist-get (mevedel-render-data-extract started "call_sleep") :execution-id)))
      (should id)
      (should (string-match-p "Still running" started))
      (let ((poll (mevedel-test-run-tool chat "WriteStdin" "call_poll"
                                         (list :execution_id id :chars "" :yield_time_ms 5000))))
        (should-not (string-prefix-p "Permission denied" poll)))
      (let ((stop (mevedel-test-run-tool chat "StopExecution" "call_stop"
                                         (list :execution_id id))))
        (should (string-match-p "stopped" stop)))
      (should (string-match-p "execution"
                              (mevedel-test-run-tool chat "ListExecutions" "call_list" nil)))
      (should-not cards)
      ;; Even an ask rule for every tool does not make them ask.
      (let ((mevedel-permissions-rules '((ask "*"))))
        (should (eq (mevedel-permissions-decide-call
                     (mevedel-permissions-test--context chat "StopExecution"
                                                        (list :execution_id id))
                     (mevedel-chat-session chat))
                    'allow))))))

(ert-deftest mevedel-permissions:always-allows-the-command-class ()
  "`a' on `npm test''s card allows `npm test --watch=false', not `curl'."
  (mevedel-permissions-test--with-chat chat cards
    (let ((context (mevedel-permissions-test--context
                    chat "Bash" '(:command "npm test" :description "test")))
          (answer nil))
      (should (eq (mevedel-permissions-test--bash chat "npm test") 'ask))
      (funcall (mevedel-session-prompter (mevedel-chat-session chat)) context
               (lambda (a) (setq answer a)))
      (should (= (length cards) 1))
      ;; The card says what "always" allows, and only that.
      (should (string-match-p "`npm test'" (plist-get (car cards) :always)))
      (should (string-match-p "not other commands" (plist-get (car cards) :always)))
      (funcall (plist-get (car cards) :answer) 'session)
      (should (eq answer 'approve))
      (should (eq (mevedel-permissions-test--bash chat "npm test --watch=false") 'allow))
      (should (eq (mevedel-permissions-test--bash chat "timeout 60 npm test") 'allow))
      (should (eq (mevedel-permissions-test--bash chat "curl -s https://example.com") 'ask))
      ;; A compound command needs every one of its commands answered.
      (should (eq (mevedel-permissions-test--bash chat "npm test && curl x") 'ask))
      (should (eq (mevedel-permissions-test--bash chat "npm install") 'ask))
      ;; Monitor shares Bash's answers.
      (should (eq (mevedel-permissions-test--bash chat "npm test" "Monitor") 'allow))
      ;; The answer never covers a sandbox grant.
      (should (eq (mevedel-permissions-decide-call
                   (mevedel-permissions-test--context
                    chat "Bash" '(:command "npm test" :description "t"
                                           :additional_permissions (:network t)))
                   (mevedel-chat-session chat))
                  'ask))
      ;; Commands nothing may answer for offer no "always".
      (should-not (plist-get (mevedel-permissions-test--card chat "eval \"$x\"") :always))
      (should-not (plist-get (mevedel-permissions-test--card chat "rm -rf /") :always)))))

(ert-deftest mevedel-permissions:ask-rule-beats-a-session-answer ()
  "An explicit ask rule wins over `a', and the card says so."
  (mevedel-permissions-test--with-chat chat _cards
    (mevedel-permissions-remember (mevedel-chat-session chat) '((command . "npm test")))
    (should (eq (mevedel-permissions-test--bash chat "npm test") 'allow))
    (let ((mevedel-permissions-rules '((ask "Bash"))))
      (should (eq (mevedel-permissions-test--bash chat "npm test") 'ask))
      (should (eq (mevedel-permissions-test--bash chat "git status") 'ask))
      (let ((card (mevedel-permissions-test--card chat "npm test")))
        (should (string-match-p "rule (ask \"Bash\") asks" (plist-get card :why)))
        (should (string-match-p "cannot override" (plist-get card :why)))
        (should-not (plist-get card :always))
        (should (string-match-p "rule (ask \"Bash\")"
                                (mevedel-view--card-text card)))))
    ;; Bash's rules are Monitor's.
    (let ((mevedel-permissions-rules '((deny "Bash"))))
      (should (eq (car (mevedel-permissions-test--bash chat "git status" "Monitor")) 'deny)))))

(ert-deftest mevedel-permissions:a-tool-that-always-asks-offers-no-always ()
  "A call the tool's own check asks about gets no \"always this session\".
No answer is consulted for it (EmacsDescribe's value reads ask every
time), so offering one would be a lie."
  (mevedel-permissions-test--with-chat chat _cards
    (let ((card (car (mevedel-permissions-cards
                      (mevedel-permissions-test--context
                       chat "EmacsDescribe" '(:name "user-full-name" :aspect "value"))
                      (mevedel-chat-session chat)))))
      (should (string-match-p "EmacsDescribe asks" (plist-get card :why)))
      (should-not (plist-get card :always)))))

(ert-deftest mevedel-permissions:read-only-bash-outside-the-workspace-asks ()
  (mevedel-permissions-test--with-chat chat _cards
    (should (eq (mevedel-permissions-test--bash chat "cat README.md | head -3") 'allow))
    (should (eq (mevedel-permissions-test--bash chat "ls src && rg -n TODO src") 'allow))
    (should (eq (mevedel-permissions-test--bash chat "cat /etc/passwd") 'ask))
    (should (eq (mevedel-permissions-test--bash chat "cat ../x") 'ask))
    (should (eq (mevedel-permissions-test--bash chat "cd sub && cat ../../x") 'ask))
    (should (string-match-p "reads outside the workspace (/etc/passwd)"
                            (plist-get (mevedel-permissions-test--card chat "cat /etc/passwd")
                                       :why)))
    ;; A rule with globs sees the command's files.
    (let ((mevedel-permissions-rules '((allow "Bash" "/etc/**"))))
      (should (eq (mevedel-permissions-test--bash chat "cat /etc/passwd") 'allow)))
    ;; full-auto runs it; edits mode does not cover commands.
    (setf (mevedel-chat-permission-mode chat) 'edits)
    (should (eq (mevedel-permissions-test--bash chat "cat /etc/passwd") 'ask))
    (should (eq (mevedel-permissions-test--bash chat "git status") 'allow))
    (setf (mevedel-chat-permission-mode chat) 'full-auto)
    (should (eq (mevedel-permissions-test--bash chat "cat /etc/passwd") 'allow))))

(ert-deftest mevedel-permissions:reads-leave-no-session-storage ()
  "A Read and a read-only Bash in a fresh git workspace leave no .mevedel/."
  (mevedel-permissions-test--with-chat chat cards
    (let* ((ws (mevedel-chat-root chat))
           (exclude (expand-file-name ".git/info/exclude" ws)))
      (should (zerop (let ((default-directory ws)) (call-process "git" nil nil nil "init" "-q"))))
      (with-temp-file (expand-file-name "notes.txt" ws) (insert "alpha\nbeta\n"))
      (let ((before (and (file-exists-p exclude)
                         (with-temp-buffer (insert-file-contents exclude) (buffer-string)))))
        (should (string-match-p "alpha"
                                (mevedel-test-run-tool chat "Read" "call_read"
                                                       (list :file_path (expand-file-name
                                                                         "notes.txt" ws)))))
        (should (string-match-p "notes.txt"
                                (mevedel-test-run-tool chat "Bash" "call_ls"
                                                       '(:command "ls; git status --short"
                                                                  :description "look"))))
        (should (string-match-p "No yielded"
                                (mevedel-test-run-tool chat "ListExecutions" "call_list" nil)))
        (should-not cards)
        (should-not (file-exists-p (expand-file-name ".mevedel" ws)))
        (should (equal (and (file-exists-p exclude)
                            (with-temp-buffer (insert-file-contents exclude) (buffer-string)))
                       before))))))

(provide 'permissions-test)
;;; permissions-test.el ends here
