;;; exec-sandbox-test.el --- Bash and Monitor under the sandbox  -*- lexical-binding: t; -*-

;;; Commentary:

;; Real confined runs of the execution tools: what a command may write,
;; the network, escalation and its permission cards, refusals and
;; disclosures, PTY input and Ctrl-C across bwrap's session boundary,
;; stop and teardown (0 processes, seen through /proc), Monitor.
;; bwrap and Landlock must work here: the first test fails loudly
;; otherwise.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-tool-exec)
(require 'mevedel-chat)
(require 'mevedel-view)

(defvar exec-sandbox-test--n 0)

(defvar exec-sandbox-test--root
  (file-name-directory (directory-file-name
                        (file-name-directory (or load-file-name buffer-file-name))))
  "The checkout, where directories outside /tmp can be made.")

(defmacro exec-sandbox-test--with-workspace (var &rest body)
  "Run BODY with VAR a fresh workspace that is the execution context's cwd."
  (declare (indent 1))
  `(let* ((,var (file-name-as-directory (make-temp-file "exec-sbx-ws" t)))
          (ctx (list :session (format "exec-sbx-%d" (cl-incf exec-sandbox-test--n))
                     :owner "/root" :cwd ,var))
          (mevedel-tool-exec-context-function (lambda () ctx)))
     (unwind-protect (progn ,@body)
       (mevedel-core-exec-teardown (plist-get ctx :session))
       (delete-directory ,var t))))

(defmacro exec-sandbox-test--with-outside (var &rest body)
  "Run BODY with VAR a fresh directory outside every writable root and /tmp."
  (declare (indent 1))
  `(let ((,var (file-name-as-directory
                (make-temp-file (expand-file-name "target/exec-sbx-out" exec-sandbox-test--root) t))))
     (unwind-protect (progn ,@body)
       (delete-directory ,var t))))

(defun exec-sandbox-test--call (handler args &optional seconds)
  "Call the async HANDLER with ARGS; return its answer (within SECONDS)."
  (let ((box (list nil)))
    (funcall handler (lambda (v) (setcar box (list v))) args)
    (mevedel-test-wait-until (car box) (or seconds 30))
    (caar box)))

(defun exec-sandbox-test--bash (command &rest args)
  "Run COMMAND through the Bash handler with ARGS; return the answer."
  (exec-sandbox-test--call #'mevedel-tool-exec-bash
                           (append (list :command command :description "test"
                                         :yield_time_ms 20000)
                                   args)))

(defun exec-sandbox-test--text (answer)
  "Return the model-visible text of ANSWER."
  (if (stringp answer) answer (plist-get answer :result)))

(defun exec-sandbox-test--listener ()
  "Return (PROCESS PORT . CONNECTIONS-CELL) for a 127.0.0.1 listener."
  (let* ((count (list 0))
         (server (make-network-process
                  :name "exec-sbx-listener" :server t :host "127.0.0.1" :service t
                  :family 'ipv4 :noquery t
                  :sentinel (lambda (_p _e) nil)
                  :log (lambda (_server _client _message) (cl-incf (car count))))))
    (list server (process-contact server :service) count)))

;;;; Filesystem and facts

(ert-deftest mevedel-exec-sandbox:default-boundary-is-bwrap-and-landlock ()
  (mevedel-core-ensure)
  (exec-sandbox-test--with-workspace ws
    (let* ((answer (exec-sandbox-test--bash "echo hi"))
           (data (plist-get answer :render-data)))
      ;; Fails loudly when bwrap or Landlock do not work here.
      (should (string-prefix-p "hi\n" (exec-sandbox-test--text answer)))
      (should-not (string-match-p "Note:" (exec-sandbox-test--text answer)))
      ;; The default boundary leaves no summary (nothing to warn about).
      (should-not (plist-get data :sandbox-summary))
      (let ((obs nil))
        (mevedel-core-exec-start
         (list :session (plist-get ctx :session) :owner "/root" :command "true"
               :description "t" :kind "bash" :cwd (directory-file-name ws) :yield-ms 20000
               :sandbox (mevedel-tool-exec--sandbox ctx (directory-file-name ws) nil))
         (lambda (_status value) (setq obs value)))
        (mevedel-test-wait-until obs 30)
        (should (eq (plist-get (plist-get obs :sandbox) :boundary) 'bwrap-landlock))
        (should (equal (plist-get (plist-get obs :sandbox) :landlock) "full"))
        (should (eq (plist-get (plist-get obs :sandbox) :start) 'started))
        (should (eq (plist-get (plist-get obs :sandbox) :network) 'denied))))))

(ert-deftest mevedel-exec-sandbox:pipeline-status-and-signals-cross-the-sandbox ()
  (mevedel-core-ensure)
  (exec-sandbox-test--with-workspace _ws
    ;; The PIPESTATUS snapshot descriptor reaches the confined shell...
    (let ((text (exec-sandbox-test--text (exec-sandbox-test--bash "false | true"))))
      (should (string-match-p "pipeline_exit_codes=\"1 0\"" text)))
    ;; ...and a death by signal stays one (bwrap alone reports 128+N).
    (let ((text (exec-sandbox-test--text (exec-sandbox-test--bash "kill -TERM $$"))))
      (should (string-match-p "signal=\"15\"" text))
      (should-not (string-match-p "exit_code=" text)))
    (let ((text (exec-sandbox-test--text (exec-sandbox-test--bash "exit 143"))))
      (should (string-match-p "exit_code=\"143\"" text)))))

(ert-deftest mevedel-exec-sandbox:writes-only-inside-the-workspace ()
  (mevedel-core-ensure)
  (exec-sandbox-test--with-workspace ws
    (exec-sandbox-test--with-outside out
      (make-directory (expand-file-name ".git/hooks" ws) t)
      (let* ((target (expand-file-name "escaped" out))
             (hook (expand-file-name ".git/hooks/pre-commit" ws))
             (answer (exec-sandbox-test--bash
                      (format "echo in > inside.txt && echo ok-inside; \
echo x > %s || echo denied-outside; echo x > %s || echo denied-hook"
                              (shell-quote-argument target) (shell-quote-argument hook))))
             (text (exec-sandbox-test--text answer)))
        (should (string-match-p "^ok-inside$" text))
        (should (string-match-p "^denied-outside$" text))
        (should (string-match-p "^denied-hook$" text))
        (should (equal (with-temp-buffer
                         (insert-file-contents (expand-file-name "inside.txt" ws))
                         (buffer-string))
                       "in\n"))
        (should-not (file-exists-p target))
        (should-not (file-exists-p hook))
        ;; The control: unconfined, the same write succeeds.
        (let ((mevedel-sandbox-mode 'off))
          (let ((text (exec-sandbox-test--text
                       (exec-sandbox-test--bash (format "echo x > %s && echo wrote"
                                                        (shell-quote-argument target))))))
            (should (string-match-p "^wrote$" text))
            (should (string-match-p "Note: the sandbox is off" text))))
        (should (file-exists-p target))))))

(ert-deftest mevedel-exec-sandbox:extra-write-path-is-writable ()
  (mevedel-core-ensure)
  (exec-sandbox-test--with-workspace _ws
    (exec-sandbox-test--with-outside out
      (let* ((target (expand-file-name "granted" out))
             (answer (exec-sandbox-test--bash
                      (format "echo g > %s && echo wrote" (shell-quote-argument target))
                      :additional_permissions (list :write (vector (directory-file-name out))))))
        (should (string-match-p "^wrote$" (exec-sandbox-test--text answer)))
        (should (file-exists-p target))
        (let ((summary (plist-get (plist-get answer :render-data) :sandbox-summary)))
          (should (= 1 (plist-get summary :extra-write-mounts)))
          (should (string-match-p "1 extra writable path"
                                  (mevedel-sandbox-summary-warning summary))))))))

;;;; Network

(ert-deftest mevedel-exec-sandbox:network-denied-unless-granted ()
  (mevedel-core-ensure)
  (pcase-let ((`(,server ,port ,count) (exec-sandbox-test--listener)))
    (unwind-protect
        (exec-sandbox-test--with-workspace _ws
          (let* ((probe (format "echo hi > /dev/tcp/127.0.0.1/%d && echo connected \
|| echo refused" port))
                 (denied (exec-sandbox-test--text (exec-sandbox-test--bash probe))))
            (should (string-match-p "^refused$" denied))
            (should-not (string-match-p "^connected$" denied))
            (accept-process-output nil 0.2)
            (should (= 0 (car count)))
            (let* ((answer (exec-sandbox-test--bash
                            probe :additional_permissions '(:network t)
                            :justification "talk to the test listener"))
                   (granted (exec-sandbox-test--text answer)))
              (should (string-match-p "^connected$" granted))
              (mevedel-test-wait-until (> (car count) 0) 5)
              (should (member "network allowed"
                              (split-string (mevedel-sandbox-summary-warning
                                             (plist-get (plist-get answer :render-data)
                                                        :sandbox-summary))
                                            "sandbox: \\|, " t))))))
      (delete-process server))))

;;;; Modes: refusal and disclosure

(defun exec-sandbox-test--path-without-bwrap ()
  "Return a directory holding only a link to bash (no bwrap)."
  (let ((dir (make-temp-file "exec-sbx-bin" t)))
    (make-symbolic-link (executable-find "bash") (expand-file-name "bash" dir))
    dir))

(ert-deftest mevedel-exec-sandbox:required-refuses-without-bwrap ()
  (mevedel-core-ensure)
  (let* ((bin (exec-sandbox-test--path-without-bwrap))
         (process-environment (cons (concat "PATH=" bin) process-environment))
         (mevedel-sandbox-mode 'required))
    (unwind-protect
        (exec-sandbox-test--with-workspace ws
          (let* ((answer (exec-sandbox-test--bash "touch ran"))
                 (text (exec-sandbox-test--text answer))
                 (data (plist-get answer :render-data)))
            (should (string-match-p "the sandbox refused to run the command: .*bwrap" text))
            (should (string-match-p "termination=\"launch-failed\"" text))
            (should-not (file-exists-p (expand-file-name "ran" ws)))
            (should (= 1 (plist-get (plist-get data :sandbox-summary) :refusals)))
            (should (string-match-p "1 refused"
                                    (plist-get (mevedel-tool-exec-render-bash
                                                "Bash" '(:command "touch ran") text data)
                                               :header))))
          ;; The reason names no private path of mevedel's.
          (let* ((mevedel-sandbox-backend 'landlock)
                 (mevedel-sandbox--helper-cache
                  (cons mevedel-core-build-module-directory "/nonexistent/mevedel-sandbox"))
                 (text (exec-sandbox-test--text (exec-sandbox-test--bash "touch ran"))))
            (should (string-match-p "the sandbox refused to run the command" text))
            (should (string-match-p "the sandbox helper" text))
            (should-not (string-match-p "nonexistent" text))
            (should-not (file-exists-p (expand-file-name "ran" ws)))))
      (delete-directory bin t))))

(ert-deftest mevedel-exec-sandbox:best-effort-discloses ()
  (mevedel-core-ensure)
  (let* ((bin (exec-sandbox-test--path-without-bwrap))
         (process-environment (cons (concat "PATH=" bin) process-environment))
         (mevedel-sandbox-mode 'best-effort))
    (unwind-protect
        (exec-sandbox-test--with-workspace ws
          ;; No bwrap: the Landlock helper alone, said so.
          (let* ((answer (exec-sandbox-test--bash "touch ran && echo ok"))
                 (text (exec-sandbox-test--text answer))
                 (summary (plist-get (plist-get answer :render-data) :sandbox-summary)))
            (should (string-match-p "^ok$" text))
            (should (string-match-p "Note: this command was confined by Landlock only" text))
            (should (equal (plist-get summary :boundaries) '(landlock)))
            (should (string-match-p "\\[sandbox: Landlock only\\]"
                                    (plist-get (mevedel-tool-exec-render-bash
                                                "Bash" '(:command "touch ran") text
                                                (plist-get answer :render-data))
                                               :header))))
          ;; No layer at all (the helper is missing too): unconfined, said so.
          (let* ((mevedel-sandbox--helper-cache
                  (cons mevedel-core-build-module-directory "/nonexistent/mevedel-sandbox"))
                 (answer (exec-sandbox-test--bash "touch ran2 && echo ok"))
                 (text (exec-sandbox-test--text answer)))
            (should (string-match-p "^ok$" text))
            (should (string-match-p "Note: no sandbox layer works here" text))
            (should-not (string-match-p "nonexistent" text))
            (should (file-exists-p (expand-file-name "ran2" ws)))
            (should (equal (plist-get (plist-get (plist-get answer :render-data)
                                                 :sandbox-summary)
                                      :boundaries)
                           '(unconfined)))))
      (delete-directory bin t))))

;;;; PTY, Ctrl-C, stop, teardown

(ert-deftest mevedel-exec-sandbox:pty-input-and-ctrl-c ()
  (mevedel-core-ensure)
  (exec-sandbox-test--with-workspace _ws
    (let* ((answer (exec-sandbox-test--call
                    #'mevedel-tool-exec-bash
                    '(:command "read x; echo got $x" :description "ask" :tty t
                               :yield_time_ms 500)))
           (id (plist-get (plist-get answer :render-data) :execution-id)))
      (should (equal (plist-get (plist-get answer :render-data) :state) "running"))
      (should (string-match-p "got hello"
                              (exec-sandbox-test--text
                               (exec-sandbox-test--call
                                #'mevedel-tool-exec-write-stdin
                                (list :execution_id id :chars "hello\n" :yield_time_ms 5000))))))
    ;; Ctrl-C reaches the command once, through the terminal, and only it.
    (dolist (tty '(t nil))
      (let* ((answer (exec-sandbox-test--call
                      #'mevedel-tool-exec-bash
                      (list :command "trap 'echo got-INT; exit 7' INT; \
while :; do sleep 0.1; done"
                            :description "wait" :tty tty :yield_time_ms 700)))
             (id (plist-get (plist-get answer :render-data) :execution-id)))
        (should (equal (plist-get (plist-get answer :render-data) :state) "running"))
        (exec-sandbox-test--call #'mevedel-tool-exec-write-stdin
                                 (list :execution_id id :chars "\u0003" :yield_time_ms 250))
        (let ((done (exec-sandbox-test--text
                     (exec-sandbox-test--call #'mevedel-tool-exec-write-stdin
                                              (list :execution_id id :chars ""
                                                    :yield_time_ms 10000)))))
          (should (string-match-p "got-INT\r?$" done))
          (should (string-match-p "exit_code=\"7\"" done)))))))

(ert-deftest mevedel-exec-sandbox:yield-poll-stop-and-teardown-leave-no-process ()
  (mevedel-core-ensure)
  (let (session)
    (exec-sandbox-test--with-workspace _ws
      (setq session (plist-get ctx :session))
      (let* ((answer (exec-sandbox-test--call
                      #'mevedel-tool-exec-bash
                      (list :command (concat "echo started; " (mevedel-test-sleep 301 "5")
                                             " | " (mevedel-test-sleep 301 "75"))
                            :description "nap" :yield_time_ms 700)))
             (id (plist-get (plist-get answer :render-data) :execution-id)))
        (should (string-prefix-p "started\n" (exec-sandbox-test--text answer)))
        (should (= 2 (length (mevedel-test-processes-running (mevedel-test-sleep 301)))))
        (should (string-match-p "state=\"running\""
                                (exec-sandbox-test--text
                                 (exec-sandbox-test--call
                                  #'mevedel-tool-exec-write-stdin
                                  (list :execution_id id :chars "" :yield_time_ms 5000)))))
        (should (string-match-p "termination=\"stopped\""
                                (exec-sandbox-test--text
                                 (exec-sandbox-test--call #'mevedel-tool-exec-stop-execution
                                                          (list :execution_id id)))))
        (should-not (mevedel-test-processes-running (mevedel-test-sleep 301))))
      ;; A yielded command left running goes with its session.
      (let ((answer (exec-sandbox-test--call
                     #'mevedel-tool-exec-bash
                     (list :command (mevedel-test-sleep 302 "5")
                           :description "nap" :yield_time_ms 500))))
        (should (equal (plist-get (plist-get answer :render-data) :state) "running"))
        (should (mevedel-test-processes-running (mevedel-test-sleep 302)))))
    (mevedel-test-wait-until (null (mevedel-test-processes-running (mevedel-test-sleep 302))) 5)
    (should (equal (mevedel-core-exec-list session) nil))))

;;;; Emacs exit

(ert-deftest mevedel-exec-sandbox:kill-emacs-leaves-no-confined-process ()
  "Emacs's exit ends confined commands: setsid, nohup and double forks too."
  (let* ((dir (make-temp-file "exec-sbx-exit" t))
         (result
          (mevedel-test-run-emacs
           `(progn
              (require 'mevedel-sandbox)
              (load ,(expand-file-name "test/mevedel-test-helpers.el" mevedel-test-root) nil t)
              (mevedel-core-ensure)
              (let ((sandbox (mevedel-core-sandbox-object
                              (mevedel-sandbox-request :env nil :writable (list ,dir))))
                    (started 0))
                (dolist (cmd (list ,(concat "setsid " (mevedel-test-sleep 305 "25")
                                            " < /dev/null > /dev/null 2>&1")
                                   ,(concat "nohup " (mevedel-test-sleep 305 "5") " > /dev/null 2>&1")
                                   ,(format "sh -c '%s | cat'" (mevedel-test-sleep 305 "75"))))
                  (mevedel-core-exec-start
                   (list :session "exit" :owner "/root" :command cmd :yield-ms 100
                         :cwd ,dir :sandbox sandbox)
                   (lambda (_status _value) (cl-incf started)))
                  (sleep-for 0.3))
                (let ((deadline (+ (float-time) 15)))
                  (while (and (< (float-time) deadline)
                              (< (length (mevedel-test-processes-running ,(mevedel-test-sleep 305))) 3))
                    (accept-process-output nil 0.05)))
                (princ (format "RUNNING=%d\n"
                               (length (mevedel-test-processes-running ,(mevedel-test-sleep 305)))))
                (kill-emacs 0))))))
    (unwind-protect
        (progn
          (should (eql (car result) 0))
          (should (string-match-p "RUNNING=3" (cdr result)))
          (mevedel-test-wait-until (null (mevedel-test-processes-running (mevedel-test-sleep 305))) 5))
      (delete-directory dir t))))

;;;; Monitor

(ert-deftest mevedel-exec-sandbox:monitor-runs-confined ()
  (mevedel-core-ensure)
  (exec-sandbox-test--with-workspace _ws
    (exec-sandbox-test--with-outside out
      (let* ((lines nil)
             (mevedel-tool-exec-monitor-functions
              (list (lambda (data) (setq lines (append lines (plist-get data :monitor-lines))))))
             (target (expand-file-name "m" out))
             (answer (exec-sandbox-test--call
                      #'mevedel-tool-exec-monitor
                      (list :command (format "touch %s 2>/dev/null; echo rc=$?; \
echo hi > /dev/tcp/127.0.0.1/9 2>/dev/null; echo net=$?"
                                             (shell-quote-argument target))
                            :description "confined watcher"))))
        (should (string-match-p "monitor-execution" (exec-sandbox-test--text answer)))
        (mevedel-test-wait-until (>= (length lines) 2) 20)
        (let ((text (format "%S" lines)))
          (should (string-match-p "rc=1" text))
          (should (string-match-p "net=1" text)))
        (should-not (file-exists-p target))))))

;;;; Permissions: grants and escalation are asked about

(defmacro exec-sandbox-test--with-chat (chat cards &rest body)
  "Run BODY with CHAT a chat whose prompter pushes each card on CARDS."
  (declare (indent 2))
  `(let* ((ws (make-temp-file "exec-sbx-chat" t))
          (,chat (mevedel-chat-get-create ws))
          (,cards nil))
     (mevedel-chat-set-prompter ,chat (lambda (_chat request) (push request ,cards)))
     (setf (mevedel-chat-turn ,chat) 'test-turn)
     (unwind-protect (progn ,@body)
       (setf (mevedel-chat-turn ,chat) nil)
       (kill-buffer (mevedel-chat-data-buffer ,chat))
       (delete-directory ws t))))

(defun exec-sandbox-test--context (chat args)
  "Return a pipeline context for a Bash call with ARGS in CHAT."
  (list :tool (mevedel-tool-get "Bash") :args args
        :data-buffer (mevedel-chat-data-buffer chat) :tool-use-id "toolu_sbx"
        :session (mevedel-chat-session chat)))

(defun exec-sandbox-test--decide (chat args)
  "Return the permission decision of a Bash call with ARGS in CHAT."
  (mevedel-permissions-decide-call (exec-sandbox-test--context chat args)
                                   (mevedel-chat-session chat)))

(defun exec-sandbox-test--prompt (chat args answer)
  "Ask CHAT's session about a Bash call with ARGS; ANSWER gets the reply."
  (funcall (mevedel-session-prompter (mevedel-chat-session chat))
           (exec-sandbox-test--context chat args) answer))

(ert-deftest mevedel-exec-sandbox:grants-always-ask ()
  (exec-sandbox-test--with-chat chat cards
    (setf (mevedel-chat-permission-mode chat) 'full-auto)
    (let ((plain '(:command "ls" :description "list"))
          (net '(:command "curl x" :description "fetch"
                          :additional_permissions (:network t :read ["/opt/data"])
                          :justification "download the data set"))
          (escalated '(:command "make install" :description "install"
                                :sandbox_permissions "require_escalated")))
      (should (eq (exec-sandbox-test--decide chat plain) 'allow))
      (should (eq (exec-sandbox-test--decide chat net) 'ask))
      (should (eq (exec-sandbox-test--decide chat escalated) 'ask))
      ;; An allow rule for Bash does not cover a grant either; a deny rule wins.
      (let ((mevedel-permissions-rules '((allow "Bash"))))
        (should (eq (exec-sandbox-test--decide chat net) 'ask)))
      (let ((mevedel-permissions-rules '((deny "Bash"))))
        (should (eq (car (exec-sandbox-test--decide chat escalated))
                    'deny)))
      ;; Malformed grants are named.
      (should-error (exec-sandbox-test--decide
                     chat '(:command "x" :description "x"
                                     :additional_permissions (:write ["relative/dir"])))
                    :type 'error)
      ;; One combined card for additive grants; the call itself was allowed.
      (let (answer)
        (exec-sandbox-test--prompt chat net (lambda (a) (setq answer a)))
        (should (= 1 (length cards)))
        (should (eq (plist-get (car cards) :card) 'grant))
        (should (plist-get (car cards) :operation-granted))
        (should (equal (plist-get (plist-get (car cards) :grant) :read) '("/opt/data")))
        (should (string-match-p "\\[ \\] network access"
                                (mevedel-view--grant-text 'grant (plist-get (car cards) :grant) t)))
        (funcall (plist-get (car cards) :answer) 'session)
        (should (eq answer 'approve))
        ;; "Always" on a grant card adds no rule.
        (should (zerop (hash-table-count
                        (mevedel-session-permission-answers (mevedel-chat-session chat))))))
      ;; In ask mode, escalation is a second, separate card after the call's own.
      (setf (mevedel-chat-permission-mode chat) 'ask cards nil)
      (let (answer)
        (exec-sandbox-test--prompt chat escalated (lambda (a) (setq answer a)))
        (should (= 1 (length cards)))
        (should-not (plist-get (car cards) :card))
        (funcall (plist-get (car cards) :answer) 'once)
        (should-not answer)
        (should (= 2 (length cards)))
        (should (eq (plist-get (car cards) :card) 'escalation))
        (funcall (plist-get (car cards) :answer) 'deny)
        (should (eq (car answer) 'deny)))
      ;; Headless: nobody can approve, the call is refused.
      (setf (mevedel-chat-turn chat) nil)
      (let (answer)
        (exec-sandbox-test--prompt chat escalated (lambda (a) (setq answer a)))
        (should (eq (car answer) 'deny))
        (should (string-match-p "headless" (cdr answer)))))))

(ert-deftest mevedel-exec-sandbox:escalation-runs-unconfined-after-approval ()
  (mevedel-core-ensure)
  (exec-sandbox-test--with-chat chat cards
    (exec-sandbox-test--with-outside out
      (let* ((target (expand-file-name "escalated" out))
             (args (list :command (format "echo e > %s && echo wrote" (shell-quote-argument target))
                         :description "write outside" :sandbox_permissions "require_escalated"
                         :justification "the test needs it"))
             (outcome nil))
        (setf (mevedel-chat-permission-mode chat) 'full-auto)
        (mevedel-pipeline-run-tool-outcome
         (mevedel-tool-get "Bash") args (lambda (o) (setq outcome o))
         :data-buffer (mevedel-chat-data-buffer chat) :session (mevedel-chat-session chat)
         :tool-use-id "toolu_esc")
        (mevedel-test-wait-until cards 10)
        (should (eq (plist-get (car cards) :card) 'escalation))
        (should-not outcome)
        (should-not (file-exists-p target))
        (funcall (plist-get (car cards) :answer) 'once)
        (mevedel-test-wait-until outcome 30)
        (should (string-match-p "^wrote$" (plist-get outcome :result)))
        (should (string-match-p "Note: this command ran outside the sandbox" (plist-get outcome :result)))
        (should (file-exists-p target))
        (should (equal (plist-get (plist-get (plist-get outcome :render-data) :sandbox-summary)
                                  :boundaries)
                       '(escalated)))
        (mevedel-core-exec-teardown (mevedel-session-id (mevedel-chat-session chat)))))))

(provide 'exec-sandbox-test)
;;; exec-sandbox-test.el ends here
