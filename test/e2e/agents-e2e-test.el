;;; agents-e2e-test.el --- Child agents over real turns  -*- lexical-binding: t; -*-

;;; Commentary:

;; Real sessions (real gptel, real tools) against the scripted model,
;; which answers the root and each child by matching the request's
;; system prompt (every child's names its path) and serves them in
;; parallel.  Each scenario runs with the OpenAI and the Anthropic wire
;; formats.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name)))
  (add-to-list 'load-path (expand-file-name ".." (file-name-directory
                                                  (or load-file-name buffer-file-name)))))
(require 'mevedel-e2e-helpers)
(require 'mevedel-agent-roles)
(require 'mevedel-agent)
(require 'mevedel-review)
(require 'mevedel-review-test-helpers)

(defmacro agents-e2e--with-session (vars wire conversations &rest body)
  "Run BODY with VARS (CHAT SERVER) for a session on WIRE scripted by CONVERSATIONS."
  (declare (indent 3))
  (pcase-let ((`(,chat ,server) vars))
    `(progn
       (mevedel-e2e-require-python)
       (let* ((root (mevedel-e2e-workspace '(("a.txt" . "a\n"))))
              (script (mevedel-e2e-write-conversations ,conversations))
              (,server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
              (gptel-stream t)
              (view (mevedel root))
              (,chat (mevedel-view-chat view)))
         (setf (mevedel-chat-backend ,chat) (mevedel-scripted-model-backend ,server :wire ,wire)
               (mevedel-chat-model ,chat) 'scripted-model)
         (unwind-protect (progn ,@body)
           (mevedel-scripted-model-stop ,server)
           (kill-buffer view)
           (when (buffer-live-p (mevedel-chat-data-buffer ,chat))
             (kill-buffer (mevedel-chat-data-buffer ,chat)))
           (delete-file script)
           (delete-directory root t))))))

(defun agents-e2e--quiet-p (chat)
  "Return non-nil when CHAT and every agent of its session are idle."
  (and (not (mevedel-chat-busy-p chat))
       (not (gethash (mevedel-session-id (mevedel-chat-session chat)) mevedel-mailbox--pending-wakes))
       (cl-every (lambda (agent) (eq (plist-get agent :status) 'idle))
                 (mevedel-agent-list chat))))

(defun agents-e2e--settle (chat seconds)
  "Wait up to SECONDS until CHAT's session stays quiet for half a second."
  (let ((deadline (+ (float-time) seconds)) (quiet-since nil))
    (while (and (< (float-time) deadline)
                (not (and quiet-since (> (- (float-time) quiet-since) 0.5))))
      (if (agents-e2e--quiet-p chat)
          (unless quiet-since (setq quiet-since (float-time)))
        (setq quiet-since nil))
      (accept-process-output nil 0.05))
    (should (agents-e2e--quiet-p chat))))

(defun agents-e2e--requests (server match)
  "Return the bodies of SERVER's requests whose system prompt contains MATCH."
  (cl-loop for entry in (mevedel-scripted-model-log server)
           for body = (alist-get 'body entry)
           when (string-match-p (regexp-quote match) (json-encode body))
           collect entry))

(defun agents-e2e--system (entry)
  "Return the system prompt of the logged request ENTRY."
  (let ((body (alist-get 'body entry)))
    (or (let ((system (alist-get 'system body)))
          (if (stringp system) system (and system (json-encode system))))
        (alist-get 'content (cl-find "system" (alist-get 'messages body)
                                     :key (lambda (m) (alist-get 'role m)) :test #'equal))
        "")))

(defun agents-e2e--results (entry)
  "Return the contents of the tool results carried by the log ENTRY."
  (mapcar (lambda (r) (alist-get 'content r)) (alist-get 'results entry)))

(defun agents-e2e--served (server conversation)
  "Return SERVER's log entries served by CONVERSATION (its index)."
  (cl-remove-if-not (lambda (entry) (eql (alist-get 'conversation entry) conversation))
                    (mevedel-scripted-model-log server)))

(defun agents-e2e--send (chat text)
  "Send TEXT in CHAT and wait for the turn's outcome; return it."
  (let ((outcome nil))
    (mevedel-chat-send chat text :on-done (lambda (_chat result) (setq outcome result)))
    (mevedel-test-wait-until outcome 60)
    outcome))

(defconst agents-e2e--noted '((text . "Noted.") (times . 50))
  "A root step answering every later background turn.")

(defmacro agents-e2e--deftest (name doc &rest body)
  "Define NAME-openai and NAME-anthropic running BODY with `wire' bound."
  (declare (indent 1) (doc-string 2))
  `(progn
     ,@(mapcar (lambda (wire)
                 `(ert-deftest ,(intern (format "%s-%s" name wire)) ()
                    ,(format "%s\nWire format %s." doc wire)
                    (let ((wire ',wire)) ,@body)))
               mevedel-e2e-wires)))

(agents-e2e--deftest mevedel-e2e:two-children-mail-wait-and-follow-up
  "Two parallel children with their own prompts; mail between them; WaitAgent; a follow-up."
  (agents-e2e--with-session (chat server) wire
      `(("retained agent /root/alpha"
         ;; Anthropic: the server checks that alpha's thinking comes
         ;; back unchanged in its later requests, the follow-up too.
         ((expect . ((user_contains . "Investigate alpha")))
          (thinking . "  Beta should hear from me.  ") (redacted_thinking . "alpha-opaque")
          (tool_calls . [((name . "SendMessage")
                          (arguments . ((target . "/root/beta") (message . "hello from alpha"))))]))
         ((thinking . "Time to report.") (text . "alpha report"))
         ((expect . ((user_contains . "follow up please"))) (text . "alpha follow-up")))
        ("retained agent /root/beta"
         ((expect . ((user_contains . "Investigate beta")))
          (tool_calls . [((name . "WaitAgent") (arguments . ((timeout_ms . 20000))))]))
         ((expect . ((user_contains . "hello from alpha")))
          (text . "beta report") (sleep . 1.5)))
        (nil
         ((tool_calls . [((name . "Agent")
                          (arguments . ((task_name . "Alpha") (message . "Investigate alpha"))))
                         ((name . "Agent")
                          (arguments . ((task_name . "Beta") (message . "Investigate beta"))))]))
         ((expect . ((results . [((contains . "/root/alpha (served by "))
                                 ((contains . "/root/beta (served by "))])))
          (tool_calls . [((name . "WaitAgent") (arguments . ((timeout_ms . 30000))))]))
         ((expect . ((results . [((contains . "mail from /root/alpha"))])
                     (user_contains . "alpha report")))
          (tool_calls . [((name . "SendMessage")
                          (arguments . ((target . "/root/alpha")
                                        (message . "follow up please"))))]))
         ((text . "Root done."))
         ,agents-e2e--noted))
    (should (eq (agents-e2e--send chat "Delegate alpha and beta.") 'done))
    (agents-e2e--settle chat 40)
    (should-not (mevedel-scripted-model-mismatches server))
    ;; Both children were asked with their own system prompts and tasks.
    (let ((alpha (agents-e2e--served server 0))
          (beta (agents-e2e--served server 1)))
      (should (= (length alpha) 3))
      (should (= (length beta) 2))
      (should (string-match-p "retained agent /root/alpha, working for /root"
                              (agents-e2e--system (car alpha))))
      (should (string-match-p "retained agent /root/beta" (agents-e2e--system (car beta))))
      ;; In parallel: beta's first request came before alpha's answer.
      (should (< (alist-get 't (car beta)) (alist-get 't (cadr alpha)))))
    ;; The follow-up continued alpha's conversation: its history is there.
    (let ((follow-up (nth 2 (agents-e2e--served server 0))))
      (should follow-up)
      (should (string-match-p "alpha report" (json-encode (alist-get 'body follow-up))))
      (should (string-match-p "Investigate alpha" (json-encode (alist-get 'body follow-up)))))
    (should (equal (mapcar (lambda (a) (plist-get a :path)) (mevedel-agent-list chat))
                   '("/root/alpha" "/root/beta")))
    (should (equal (mevedel-agent-result chat "/root/alpha") '(completed . "alpha follow-up")))
    (should (equal (mevedel-agent-result chat "/root/beta") '(completed . "beta report")))
    ;; Each child's readable copy is its own, beside its store.
    (let ((agents (expand-file-name "agents" (mevedel-session-directory (mevedel-chat-session chat)))))
      (mevedel-test-wait-until (and (file-exists-p (expand-file-name "root.alpha.txt" agents))
                                    (file-exists-p (expand-file-name "root.beta.txt" agents)))
                               10)
      (should-not (file-exists-p (expand-file-name "transcript.txt" agents)))
      (with-temp-buffer
        (insert-file-contents (expand-file-name "root.alpha.txt" agents))
        (should (search-forward "alpha follow-up" nil t))
        (should-not (search-forward "beta report" nil t))))))

(agents-e2e--deftest mevedel-e2e:interrupt-yields-one-interrupted-result
  "InterruptAgent aborts a child's request; exactly one interrupted RESULT reaches the root."
  (agents-e2e--with-session (chat server) wire
      `(("retained agent /root/sleeper"
         ((text . "never seen") (sleep . 30))
         ((expect . ((user_contains . "resume now"))) (text . "awake again")))
        (nil
         ((tool_calls . [((name . "Agent")
                          (arguments . ((task_name . "Sleeper") (message . "Sleep long"))))]))
         ;; The pause lets the sleeper's request reach the server first.
         ((tool_calls . [((name . "InterruptAgent") (arguments . ((target . "/root/sleeper"))))])
          (sleep . 1))
         ;; The RESULT is drained into the request after the interrupt.
         ((expect . ((results . [((contains . "/root/sleeper was running"))])
                     (user_contains . "outcome=\"interrupted\"")))
          (tool_calls . [((name . "SendMessage")
                          (arguments . ((target . "sleeper") (message . "resume now"))))]))
         ((text . "Root done."))
         ,agents-e2e--noted))
    (should (eq (agents-e2e--send chat "Start and stop a sleeper.") 'done))
    (agents-e2e--settle chat 40)
    (should-not (mevedel-scripted-model-mismatches server))
    (let ((data (with-current-buffer (mevedel-chat-data-buffer chat) (buffer-string))))
      (should (= 1 (cl-loop with start = 0 while (string-match "outcome=\"interrupted\"" data start)
                            count t do (setq start (match-end 0))))))
    (should (equal (mevedel-agent-result chat "/root/sleeper") '(completed . "awake again")))))

(agents-e2e--deftest mevedel-e2e:twelve-spawns-two-wait-for-slots
  "With capacity 10, two of twelve children wait and start when slots free."
  (agents-e2e--with-session (chat server) wire
      `(,@(cl-loop for n from 1 to 12
                   collect `(,(format "retained agent /root/job-%d," n)
                             ((text . ,(format "job %d done" n)) (sleep . 1.0))))
        (nil
         ((tool_calls . ,(vconcat (cl-loop for n from 1 to 12
                                           collect `((name . "Agent")
                                                     (arguments . ((task_name . ,(format "job %d" n))
                                                                   (message . ,(format "Do job %d" n)))))))))
         ((expect . ((results . [,@(make-list 10 '((lacks . "waiting")))
                                 ((contains . "waiting for a free agent slot"))
                                 ((contains . "waiting for a free agent slot"))])))
          (text . "Twelve started."))
         ,agents-e2e--noted))
    (should (eq (agents-e2e--send chat "Run twelve jobs.") 'done))
    (agents-e2e--settle chat 40)
    (should-not (mevedel-scripted-model-mismatches server))
    (let* ((firsts (cl-loop for n from 0 below 12
                            collect (alist-get 't (car (agents-e2e--served server n)))))
           (early (seq-take firsts 10))
           (late (last firsts 2)))
      (should (cl-every #'numberp firsts))
      ;; The two waiting jobs were sent only after the first jobs ended.
      (should (> (apply #'min late) (+ (apply #'min early) 0.9))))
    (should (= (length (mevedel-agent-list chat)) 12))
    (should (cl-every (lambda (a) (eq (plist-get a :outcome) 'completed)) (mevedel-agent-list chat)))))

(agents-e2e--deftest mevedel-e2e:summary-context-and-child-retries
  "A summary context runs one handoff request first; a child's failed sample is retried."
  (let ((mevedel-recovery-initial-delay 0.01)
        (mevedel-recovery-jitter 0.0))
    (agents-e2e--with-session (chat server) wire
        `(("handoff summaries"
           ((expect . ((user_contains . "Use the background")))
            (text . "The user prefers tabs.")))
          ("retained agent /root/summarized"
           ((error . ((status . 503) (message . "overloaded"))) (times . 2))
           ((expect . ((user_contains . "Use the background")))
            (text . "summarized done")))
          (nil
           ((text . "Earlier answer about tabs."))
           ((tool_calls . [((name . "Agent")
                            (arguments . ((task_name . "Summarized")
                                          (message . "Use the background")
                                          (context . "summary"))))]))
           ((expect . ((results . [((contains . "/root/summarized"))])))
            (tool_calls . [((name . "WaitAgent") (arguments . ((timeout_ms . 20000))))]))
           ((expect . ((user_contains . "summarized done"))) (text . "Root done."))
           ,agents-e2e--noted))
      (should (eq (agents-e2e--send chat "Talk about tabs.") 'done))
      (should (eq (agents-e2e--send chat "Delegate with a summary.") 'done))
      (agents-e2e--settle chat 30)
      (should-not (mevedel-scripted-model-mismatches server))
      ;; One handoff request, carrying the parent conversation.
      (let ((summary (agents-e2e--served server 0)))
        (should (= (length summary) 1))
        (should (string-match-p "Earlier answer about tabs" (json-encode (alist-get 'body (car summary))))))
      ;; The child's sample failed twice and was sent again; its task
      ;; follows the labelled background.
      (let ((child (agents-e2e--served server 1)))
        (should (= (length child) 3))
        (should (string-match-p "Task background.*The user prefers tabs"
                                (json-encode (alist-get 'body (car (last child)))))))
      (should (equal (mevedel-agent-result chat "/root/summarized")
                     '(completed . "summarized done")))
      ;; Exactly one RESULT reached the root, however many attempts.
      (let ((data (with-current-buffer (mevedel-chat-data-buffer chat) (buffer-string))))
        (should (= 1 (cl-loop with start = 0
                              while (string-match "type=\"RESULT\" sender=\"/root/summarized\""
                                                  data start)
                              count t do (setq start (match-end 0))))))
      t)))

;;;; Verdicts and /review

(defun agents-e2e--view-text (chat)
  "Return the transcript text of CHAT's view."
  (with-current-buffer (mevedel-view-buffer chat)
    (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))

(agents-e2e--deftest mevedel-e2e:a-verifiers-verdict-is-its-badge-and-in-its-result
  "A verifier ending with VERDICT: FAIL: the handle row's badge and the RESULT say it.
The root's system text lists the roles and tiers."
  (agents-e2e--with-session (chat server) wire
      `(("retained agent /root/check,"
         ((expect . ((user_contains . "Check that a.txt holds b")))
          (text . "Read a.txt: it holds a, not b.\nVERDICT: FAIL")))
        (nil
         ((tool_calls . [((name . "Agent")
                          (arguments . ((task_name . "check") (role . "verifier")
                                        (message . "Check that a.txt holds b"))))]))
         ((expect . ((results . [((contains . "/root/check"))])))
          (tool_calls . [((name . "WaitAgent") (arguments . ((timeout_ms . 20000))))]))
         ((expect . ((user_contains . "verdict=\"FAIL\"")))
          (text . "The claim fails."))
         ,agents-e2e--noted))
    (should (eq (agents-e2e--send chat "Verify that a.txt holds b.") 'done))
    (agents-e2e--settle chat 30)
    (should-not (mevedel-scripted-model-mismatches server))
    (should (equal (plist-get (mevedel-agent-status chat "/root/check") :verdict) "FAIL"))
    (mevedel-test-wait-until
      (string-match-p "Agent /root/check · verifier · [^·\n]+:[^·\n]+ · completed · 0 tool calls · VERDICT FAIL"
                      (agents-e2e--view-text chat))
      5)
    (let ((data (with-current-buffer (mevedel-chat-data-buffer chat) (buffer-string))))
      (should (string-match-p "type=\"RESULT\" sender=\"/root/check\"[^>]*verdict=\"FAIL\"" data))
      (should (string-match-p "it holds a, not b\\.\nVERDICT: FAIL" data)))
    ;; The root's first request tells it the roles and tiers in its
    ;; system text; the Agent schema lists none.
    (let ((body (json-encode (alist-get 'body (car (agents-e2e--served server 1))))))
      (should (string-match-p "- verifier: Adversarial read-only check" body))
      (should (string-match-p "Model tiers ([^)]*): fast, balanced, strong" body))
      (should-not (string-match-p "\"enum\":\\[\"explorer\"" body)))))

(defun agents-e2e--git (dir &rest args)
  "Run git with ARGS in DIR (test setup only)."
  (let ((default-directory dir))
    (should (eq 0 (apply #'call-process "git" nil nil nil
                         "-c" "user.name=Test" "-c" "user.email=test@example.invalid"
                         "-c" "init.defaultBranch=main" "-c" "commit.gpgsign=false" args)))))

(defun agents-e2e--review (chat)
  "Run /review of CHAT's uncommitted changes; return its workflow once done."
  (let ((workflow (mevedel-review-start chat 'review '(:kind uncommitted))))
    (mevedel-test-wait-until (and (eq (mevedel-review-workflow-state workflow) 'done)
                                  (not (mevedel-chat-busy-p chat)))
                             40)
    (agents-e2e--settle chat 20)
    workflow))

(agents-e2e--deftest mevedel-e2e:review-renders-the-reviewers-findings
  "/review of an uncommitted change: the reviewer's JSON becomes the numbered summary.
The result reaches the root model once, as the workflow's record, not
as agent mail; invalid JSON keeps the reviewer's answer as written."
  (agents-e2e--with-session (chat server) wire
      `(("retained agent /root/review,"
         ,(mevedel-review-test-reviewer-step root))
        ("retained agent /root/review-2,"
         ((expect . ((user_contains . "Answer with the JSON object")))
          (text . "Looks fine to me, nothing to report.")))
        (nil
         ((expect . ((user_contains . "What did the review find")))
          (text . "It found three problems."))
         ,agents-e2e--noted))
    (let ((dir (mevedel-chat-root chat)))
      (make-directory (expand-file-name "lisp" dir))
      (with-temp-file (expand-file-name "lisp/a.el" dir) (insert "(defun a ()\n  1)\n"))
      (agents-e2e--git dir "init" "-q")
      (agents-e2e--git dir "add" ".")
      (agents-e2e--git dir "commit" "-q" "-m" "Add a")
      (with-temp-file (expand-file-name "lisp/a.el" dir) (insert "(defun a ()\n  2)\n")))
    (let ((workflow (agents-e2e--review chat)))
      (should (equal (mevedel-review-workflow-path workflow) "/root/review"))
      (should (plist-get (mevedel-review-workflow-result workflow) :findings)))
    (should-not (mevedel-scripted-model-mismatches server))
    (let ((text (agents-e2e--view-text chat)))
      (should (string-match-p (regexp-quote "[/review of the uncommitted changes by /root/review]")
                              text))
      (should (string-match-p (regexp-quote mevedel-review-test-rendered) text))
      ;; Its handle row followed the reviewer to its end.
      (should (string-match-p "Review · /root/review · reviewer · [^ ]+ · completed · [0-9]+ tool calls? · patch is incorrect · 3 findings" text)))
    ;; The workflow consumed the RESULT: no mail waits, no background turn ran.
    (should-not (mevedel-core-mailbox-unread
                 (mevedel-session-store-handle (mevedel-chat-session chat)) "/root"))
    (should-not (agents-e2e--served server 2))
    ;; The next root turn reads the findings from the workflow's record only.
    (should (eq (agents-e2e--send chat "What did the review find?") 'done))
    (let ((body (json-encode (alist-get 'body (car (agents-e2e--served server 2))))))
      (should (string-match-p "Return the old value when the cache is cold" body))
      (should-not (string-match-p "agent-message" body))
      (should-not (string-match-p "mevedel-handle" body)))
    ;; A reviewer that does not answer with the JSON: its answer as written.
    (agents-e2e--review chat)
    (should-not (mevedel-scripted-model-mismatches server))
    (let ((text (agents-e2e--view-text chat)))
      (should (string-match-p "The reviewer /root/review-2 did not answer with the findings JSON"
                              text))
      (should (string-match-p "Looks fine to me, nothing to report\\." text)))))

;;;; Crashes

(defun agents-e2e--crash-form (root init)
  "Return the form of a child Emacs working in ROOT with INIT.
After one root turn it spawns two children (whose model never answers)
and mails the first one again and again, printing SPAWNED, then POSTED N
once the Nth record's append was acknowledged."
  `(progn
     (require 'mevedel)
     (load ,init nil t)
     (require 'mevedel-agent)
     (let* ((view (mevedel ,root))
            (chat (mevedel-view-chat view))
            (done nil))
       (mevedel-chat-send chat "hello" :on-done (lambda (&rest _) (setq done t)))
       (while (not done) (accept-process-output nil 0.02))
       (let ((a (mevedel-agent-spawn chat '(:task_name "a" :message "work a"))))
         (mevedel-agent-spawn chat '(:task_name "b" :message "work b"))
         (message "SPAWNED")
         (dotimes (i 100000)
           (mevedel-agent-send chat a (format "mail %d" i))
           (message "POSTED %d" i)
           (accept-process-output nil 0.002))))))

(defun agents-e2e--crash-once (posted delay)
  "Kill a child Emacs DELAY seconds after its POSTED-th mail, then resume.
Return a description of what failed, or nil."
  (let* ((root (mevedel-e2e-workspace '(("a.txt" . "a\n"))))
         (script (mevedel-e2e-write-conversations '(("retained agent /root/" ((text . "never") (sleep . 60) (times . 2)))
                                       (nil ((text . "hi") (times . 5))))))
         (server (mevedel-scripted-model-start script))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) 'openai t nil))
         (output (generate-new-buffer " *agents crash child*"))
         (problem nil))
    (unwind-protect
        (let ((child (make-process
                      :name "mevedel-agents-crash" :buffer output :noquery t
                      :connection-type 'pipe
                      :command (cons (expand-file-name invocation-name invocation-directory)
                                     (mevedel-test-emacs-args (agents-e2e--crash-form root init)))))
              (deadline (+ (float-time) 60))
              (acknowledged -1))
          (while (and (process-live-p child) (< acknowledged posted) (< (float-time) deadline))
            (accept-process-output child 0.01)
            (with-current-buffer output
              (goto-char (point-max))
              (when (re-search-backward "^POSTED \\([0-9]+\\)$" nil t)
                (setq acknowledged (string-to-number (match-string 1))))))
          (sleep-for delay)
          (signal-process child 'SIGKILL)
          (while (process-live-p child) (accept-process-output child 0.05))
          (with-current-buffer output
            (goto-char (point-max))
            (when (re-search-backward "^POSTED \\([0-9]+\\)$" nil t)
              (setq acknowledged (string-to-number (match-string 1)))))
          (let* ((gptel--known-backends (copy-sequence gptel--known-backends))
                 (gptel-backend gptel-backend)
                 (gptel-model gptel-model)
                 ;; A restored child needs the backend it was frozen
                 ;; with, as the restarted user's init defines it.
                 (_ (load init nil t))
                 (view (mevedel root))
                 (chat (mevedel-view-chat view))
                 (store (mevedel-session-store-handle (mevedel-chat-session chat)))
                 (mail (mapcar (lambda (m) (plist-get m :payload))
                               (mevedel-core-mailbox-unread store "/root/a")))
                 (results (cl-remove-if-not (lambda (m) (equal (plist-get m :kind) "RESULT"))
                                            (mevedel-core-mailbox-unread store "/root")))
                 (agents (mevedel-agent-list chat)))
            (cond
             ((< acknowledged posted)
              (setq problem (format "only %d mails were posted: %s" acknowledged
                                    (with-current-buffer output (buffer-string)))))
             ((not (equal (mapcar (lambda (a) (list (plist-get a :path) (plist-get a :outcome)))
                                  agents)
                          '(("/root/a" interrupted) ("/root/b" interrupted))))
              (setq problem (format "agents after the crash: %S" agents)))
             ((cl-loop for i from 0 to acknowledged
                       thereis (not (member (format "mail %d" i) mail)))
              (setq problem (format "acknowledged mail lost: %d acknowledged, %d unread"
                                    (1+ acknowledged) (length mail))))
             ((/= (length results) 2)
              (setq problem (format "%d RESULT records" (length results))))
             ;; The first use loads the child's saved conversation.
             ((not (string-match-p "work a\\(.\\|\n\\)*Interrupted: Emacs stopped"
                                   (with-current-buffer (mevedel-agent-conversation chat "/root/a")
                                     (buffer-string))))
              (setq problem (format "the conversation of /root/a was not saved and settled: %S"
                                    (with-current-buffer (mevedel-agent-conversation chat "/root/a")
                                      (buffer-string))))))))
      (agents-e2e--close root)
      (kill-buffer output)
      (mevedel-scripted-model-stop server)
      (dolist (file (list script init)) (delete-file file))
      (delete-directory root t))
    (when problem (format "kill after mail %d +%ss: %s" posted delay problem))))

(ert-deftest mevedel-e2e:bin-mevedel-late-mail-and-a-held-answer ()
  "Through bin/mevedel: a child's answer waits for its command; late mail is read.
The child yields a slow Bash command and answers while the root's mail
to it is in flight, during its final sample.  Its RESULT comes once
the command ends, with the completion as an EXECUTION record to the
root (not stranded in the child's mailbox), and the late mail gives
the child a turn that reads it."
  (let* ((run (mevedel-e2e-headless
               :conversations
               '(("retained agent /root/slow"
                  ((expect . ((user_contains . "Start the slow job")))
                   (tool_calls . [((name . "Bash")
                                   (arguments . ((command . "sleep 4.5; echo late-output")
                                                 (description . "slow job")
                                                 (yield_time_ms . 250))))]))
                  ((expect . ((results . [((contains . "execution_id"))])))
                   (text . "slow answer") (sleep . 2.5))
                  ((text . "slow read the news")))
                 (nil
                  ((tool_calls . [((name . "Agent")
                                   (arguments . ((task_name . "slow")
                                                 (message . "Start the slow job"))))]))
                  ((expect . ((results . [((contains . "/root/slow"))])))
                   (sleep . 1.5)
                   (tool_calls . [((name . "SendMessage")
                                   (arguments . ((target . "/root/slow")
                                                 (message . "late news"))))]))
                  ((tool_calls . [((name . "WaitAgent") (arguments . ((timeout_ms . 30000))))]))
                  ((expect . ((user_contains . "late-output")))
                   (tool_calls . [((name . "WaitAgent") (arguments . ((timeout_ms . 30000))))]))
                  ((text . "Root done."))))
               :args '("-p" "Delegate the slow job." "--json")))
         (log (plist-get run :log))
         (bodies (mapcar (lambda (entry) (json-encode (alist-get 'body entry))) log))
         (child (cl-remove-if-not (lambda (body) (string-match-p "retained agent /root/slow" body))
                                  bodies))
         (root (cl-set-difference bodies child :test #'equal)))
    (should (eql (plist-get run :status) 0))
    (should-not (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e))) log))
    (should (equal (alist-get 'outcome (mevedel-e2e-json run)) "done"))
    ;; The child's third request reads the mail that missed its answer.
    (should (= (length child) 3))
    (should (string-match-p "late news" (nth 2 child)))
    ;; The root read the unchanged answer and then the completion.
    (should (string-match-p "type=\\\\\"RESULT\\\\\"[^<]*slow answer\\(.\\|\n\\)*type=\\\\\"EXECUTION\\\\\"[^<]*late-output"
                            (nth 3 root)))
    (should (string-match-p "slow read the news" (nth 4 root)))))

(defun agents-e2e--close (root)
  "Kill the view and data buffer of ROOT's live chat, as a restart would."
  (when-let* ((chat (mevedel-chat-get root)))
    (let ((view (get-buffer (format "*mevedel: %s*" (mevedel-chat-name chat)))))
      (when view (kill-buffer view)))
    (kill-buffer (mevedel-chat-data-buffer chat))))

(ert-deftest mevedel-e2e:kill-9-while-children-run ()
  "After `kill -9' while two children run, 20 times: they resume interrupted.
Unread mail is intact, no acknowledged record is lost, and a child's
conversation loads on first use."
  (mevedel-e2e-require-python)
  (let ((problems nil))
    (dotimes (run 20)
      (when-let* ((problem (agents-e2e--crash-once (* 3 run) (* 0.005 (% run 4)))))
        (push problem problems)))
    (should-not problems)))

(provide 'agents-e2e-test)
;;; agents-e2e-test.el ends here
