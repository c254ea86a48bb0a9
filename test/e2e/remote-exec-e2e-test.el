;;; remote-exec-e2e-test.el --- A remote workspace's commands run on its host  -*- lexical-binding: t; -*-

;;; Commentary:

;; Against a private sshd on 127.0.0.1 (mevedel-sshd.el): Bash,
;; WriteStdin, StopExecution, ListExecutions and Monitor in a TRAMP
;; workspace run their commands on the host, as relayed executions of
;; the module, through the remote helper or (without it) TRAMP; their
;; results read as a local run's but for the workspace's name; the
;; host's sandbox confines them under the session's mode; a lost
;; connection settles the command, naming the host.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'mevedel-test-helpers)
(require 'mevedel-sshd)
(require 'mevedel)
(require 'mevedel-tool-exec)
(require 'mevedel-remote)
(require 'mevedel-remote-helper)
(require 'mevedel-remote-exec)
(mevedel--load)

(defmacro remote-exec-test--with (vars &rest body)
  "Bind VARS (SSHD LOCAL REMOTE HOST-DIR) to a server and two workspaces.
LOCAL is a local directory, REMOTE the TRAMP name of HOST-DIR on
SSHD (the same machine: the test reads the host's files directly).
BODY runs with a fresh helper cache; everything is removed afterwards."
  (declare (indent 1))
  (pcase-let ((`(,sshd ,local ,remote ,host-dir) vars))
    `(mevedel-sshd-with ,sshd
       (let* ((base (file-name-as-directory (make-temp-file "mevedel-rexec-" t)))
              (,local (expand-file-name "ws/" base))
              (,host-dir (expand-file-name "remote/ws/" base))
              (,remote (mevedel-sshd-file ,sshd ,host-dir))
              (mevedel-remote-state-directory (expand-file-name "state/" base))
              (mevedel-remote-helper-cache-directory (expand-file-name "cache/" base))
              (mevedel-sandbox-mode 'required))
         (make-directory ,local t)
         (make-directory ,host-dir t)
         (clrhash mevedel-remote--helpers)
         (clrhash mevedel-remote-helper--connections)
         (clrhash mevedel-remote-exec--unconfined)
         (clrhash mevedel-remote-exec--told)
         (unwind-protect (progn ,@body)
           (mevedel-test-stop-remote-helpers)
           (delete-directory base t))))))

(defun remote-exec-test--call (handler args directory &optional seconds)
  "Run the tool HANDLER on ARGS in DIRECTORY; return its result.
The result is a plist (:result TEXT ...) or an error string."
  (let ((result nil) (calls 0) (default-directory directory))
    (funcall handler (lambda (r) (setq result r) (cl-incf calls)) args)
    (mevedel-test-wait-until result (or seconds 40))
    (should (= calls 1))
    result))

(defun remote-exec-test--text (result)
  "Return the model-visible text of tool RESULT."
  (if (stringp result) result (plist-get result :result)))

(defun remote-exec-test--id (text)
  "Return the execution id in the envelope of TEXT."
  (and (string-match "execution_id=\"\\([^\"]+\\)\"" text) (match-string 1 text)))

(defun remote-exec-test--normal (text root)
  "Return TEXT with ROOT, its id and its timing made neutral.
What the host's login files print (this machine's pyenv) goes too."
  (thread-last
    (string-replace (directory-file-name root) "ROOT" text)
    (replace-regexp-in-string "^pyenv: [^\n]*\n" "")
    (replace-regexp-in-string "execution_id=\"[^\"]+\"" "execution_id=\"ID\"")
    (replace-regexp-in-string "duration_ms=\"[0-9]+\"" "duration_ms=\"T\"")))

(defmacro remote-exec-test--helper-env (value &rest body)
  "Run BODY with the remote helper's `MEVEDEL_REMOTE_NO_SANDBOX' set to VALUE."
  (declare (indent 1))
  `(let ((process-environment (cons (concat "MEVEDEL_REMOTE_NO_SANDBOX=" ,value)
                                    process-environment)))
     ,@body))

(defconst remote-exec-test--command
  "pwd; echo made > made.txt; printf 'raw \\377 byte\\n'; ls; false | true; echo end"
  "A command whose output names its directory and holds a byte that is not UTF-8.")

(defun remote-exec-test--stop-long (command yield-ms directory)
  "Run COMMAND in DIRECTORY until it yields after YIELD-MS, then stop it.
The stop must end it, within 10 seconds."
  (let* ((id (remote-exec-test--id
              (remote-exec-test--text
               (remote-exec-test--call #'mevedel-tool-exec-bash
                                       (list :command command :description "long"
                                             :yield_time_ms yield-ms)
                                       directory))))
         (started (float-time))
         (stopped (remote-exec-test--text
                   (remote-exec-test--call #'mevedel-tool-exec-stop-execution
                                           (list :execution_id id) directory))))
    (should (string-search "termination=\"stopped\"" stopped))
    (should (< (- (float-time) started) 10))))

(ert-deftest remote-exec:bash-runs-on-the-host-as-locally ()
  (remote-exec-test--with (sshd local remote host-dir)
    (ignore sshd)
    (let* ((args (list :command remote-exec-test--command :description "probe"))
           (here (remote-exec-test--text
                  (remote-exec-test--call #'mevedel-tool-exec-bash args local)))
           (there (remote-exec-test--text
                   (remote-exec-test--call #'mevedel-tool-exec-bash args remote))))
      ;; It ran on the host, in the workspace, through the helper.
      (should (file-exists-p (expand-file-name "made.txt" host-dir)))
      (should (string-search (concat "\n" (directory-file-name host-dir) "\n")
                             (concat "\n" there)))
      (should (mevedel-remote-helper--conn-p
               (gethash (mevedel-remote-host remote) mevedel-remote--helpers)))
      ;; The same text but for the workspace's name.
      (should (equal (remote-exec-test--normal there host-dir)
                     (remote-exec-test--normal here local)))
      (should (string-search "raw \ufffd byte" there))
      (should (string-search "exit_code=\"0\"" there)))))

(ert-deftest remote-exec:yield-poll-interrupt-stop-and-list ()
  (remote-exec-test--with (sshd local remote host-dir)
    (ignore sshd local host-dir)
    (let* ((first (remote-exec-test--text
                   (remote-exec-test--call
                    #'mevedel-tool-exec-bash
                    '(:command "echo started; sleep 2; echo finished" :description "slow"
                               :yield_time_ms 250)
                    remote)))
           (id (remote-exec-test--id first)))
      (should (string-search "Still running" first))
      (should (string-search "started" first))
      ;; Listed while it runs, then polled to its end.
      (should (string-search (format "execution_id=\"%s\"" id)
                             (let ((default-directory remote))
                               (mevedel-tool-exec-list-executions nil))))
      (let ((done (remote-exec-test--text
                   (remote-exec-test--call #'mevedel-tool-exec-write-stdin
                                           (list :execution_id id :chars ""
                                                 :yield_time_ms 10000)
                                           remote))))
        (should (string-search "finished" done))
        (should (string-search "exit_code=\"0\"" done))))
    ;; Ctrl-C interrupts a pipe-mode command on the host.
    (let* ((id (remote-exec-test--id
                (remote-exec-test--text
                 (remote-exec-test--call #'mevedel-tool-exec-bash
                                         '(:command "sleep 30" :description "nap"
                                                    :yield_time_ms 250)
                                         remote))))
           (after (remote-exec-test--text
                   (remote-exec-test--call #'mevedel-tool-exec-write-stdin
                                           (list :execution_id id :chars "\u0003"
                                                 :yield_time_ms 5000)
                                           remote))))
      (should (string-match-p "state=\"completed\"" after))
      (should (string-match-p "termination=\"\\(signal\\|exit\\)\"" after)))
    ;; StopExecution ends it there: TERM, then KILL.
    (progn
      (remote-exec-test--stop-long "sleep 60" 250 remote)
      (should (string-search "No yielded executions"
                             (let ((default-directory remote))
                               (mevedel-tool-exec-list-executions nil)))))))

(ert-deftest remote-exec:monitor-lines-come-from-the-host ()
  (remote-exec-test--with (sshd local remote host-dir)
    (ignore sshd local)
    (let* ((batches nil)
           (hook (lambda (data) (push data batches)))
           (dir (file-name-as-directory (make-temp-file "mevedel-rexec-art-" t)))
           (mevedel-tool-exec-context-function
            (lambda () (list :session "rexec-monitor" :owner "/root" :cwd remote
                             :artifact-dir dir))))
      (add-hook 'mevedel-tool-exec-monitor-functions hook)
      (unwind-protect
          (let ((first (remote-exec-test--text
                        (remote-exec-test--call
                         #'mevedel-tool-exec-monitor
                         '(:command "for i in 1 2 3; do echo line$i; sleep 0.2; done; pwd"
                                    :description "lines")
                         remote))))
            (should (string-search "monitor-execution" first))
            (mevedel-test-wait-until
             (cl-some (lambda (b) (member (directory-file-name host-dir)
                                          (plist-get b :monitor-lines)))
                      batches)
             20)
            (let ((lines (apply #'append (mapcar (lambda (b) (plist-get b :monitor-lines))
                                                 (reverse batches)))))
              (should (equal (cl-remove-if (lambda (l) (string-prefix-p "pyenv: " l)) lines)
                             (list "line1" "line2" "line3"
                                   (directory-file-name host-dir))))))
        (remove-hook 'mevedel-tool-exec-monitor-functions hook)
        (delete-directory dir t)))))

(ert-deftest remote-exec:long-output-is-kept-as-an-artifact ()
  (remote-exec-test--with (sshd local remote host-dir)
    (ignore sshd local host-dir)
    (let* ((dir (file-name-as-directory (make-temp-file "mevedel-rexec-art-" t)))
           (results (expand-file-name "tool-results/" dir))
           (mevedel-tool-exec-context-function
            (lambda () (list :session "rexec-artifact" :owner "/root" :cwd remote
                             :artifact-dir results))))
      (unwind-protect
          (let ((text (remote-exec-test--text
                       (remote-exec-test--call #'mevedel-tool-exec-bash
                                               '(:command "seq 1 200000" :description "many")
                                               remote))))
            (should (string-match "full output: \\(artifact://tool-results/[^ ]+\\)" text))
            (let ((file (car (directory-files results t "\\`exec-"))))
              (should file)
              (should (string-search (match-string 1 text)
                                     (concat "artifact://tool-results/"
                                             (file-name-nondirectory file))))
              (should (= (file-attribute-size (file-attributes file))
                         (1+ (length (mapconcat #'number-to-string (number-sequence 1 200000)
                                                "\n")))))))
        (delete-directory dir t)))))

(defun remote-exec-test--pipeline (name args session)
  "Run tool NAME with ARGS in SESSION through the pipeline; return the outcome."
  (let ((box (list nil)))
    (mevedel-pipeline-run-tool-outcome (mevedel-tool-get name) args
                                       (lambda (o) (setcar box (list o)))
                                       :session session :tool-use-id "toolu_rexec")
    (mevedel-test-wait-until (car box) 60)
    (caar box)))

(ert-deftest remote-exec:a-remote-session-reads-its-kept-output ()
  (remote-exec-test--with (sshd local remote host-dir)
    (ignore sshd local host-dir)
    (let ((session (mevedel-session-create :workspace remote)))
      (setf (mevedel-session-permission-mode session) 'full-auto)
      (unwind-protect
          (progn
            (mevedel-session-ensure-storage session)
            (let ((result (plist-get (remote-exec-test--pipeline
                                      "Bash" '(:command "seq 1 200000" :description "many")
                                      session)
                                     :result)))
              (should (string-match "full output: \\(artifact://tool-results/[^ ]+\\) " result))
              (let ((read (let ((mevedel-session-current session))
                            (remote-exec-test--pipeline
                           "Read" (list :file_path (match-string 1 result)
                                        :offset 199990 :limit 3)
                           session))))
                (should (string-search "199991\n" (plist-get read :result)))
                (should (string-search "199992\n" (plist-get read :result))))))
        (mevedel-session-close session)))))

(ert-deftest remote-exec:required-confines-on-the-host ()
  (remote-exec-test--with (sshd local remote host-dir)
    (ignore sshd local)
    (let* ((outside (expand-file-name "outside.txt" (file-name-directory
                                                     (directory-file-name host-dir))))
           (text (remote-exec-test--text
                  (remote-exec-test--call
                   #'mevedel-tool-exec-bash
                   (list :command (format "echo in > in.txt; echo out > %s || echo refused"
                                          outside)
                         :description "probe")
                   remote))))
      (should (file-exists-p (expand-file-name "in.txt" host-dir)))
      (should-not (file-exists-p outside))
      (should (string-search "refused" text))
      (should-not (string-search "without a sandbox" text)))))

(ert-deftest remote-exec:an-unconfined-host-says-so-once-and-in-the-header ()
  (remote-exec-test--with (sshd local remote host-dir)
    (ignore sshd local host-dir)
    ;; `required' refuses, with the helper's reason.
    (remote-exec-test--helper-env "1"
      (let ((refused (remote-exec-test--text
                      (remote-exec-test--call #'mevedel-tool-exec-bash
                                              '(:command "echo x > x.txt" :description "w")
                                              remote))))
        (should (string-search "termination=\"launch-failed\"" refused))
        (should (string-search "the sandbox is required" refused))
        (should-not (file-exists-p (expand-file-name "x.txt" host-dir))))
      (let* ((mevedel-sandbox-mode 'best-effort)
             (first (remote-exec-test--text
                     (remote-exec-test--call #'mevedel-tool-exec-bash
                                             '(:command "echo x > x.txt; echo one"
                                                        :description "w")
                                             remote)))
             (second (remote-exec-test--text
                      (remote-exec-test--call #'mevedel-tool-exec-bash
                                              '(:command "echo two" :description "w")
                                              remote))))
        (should (file-exists-p (expand-file-name "x.txt" host-dir)))
        (should (string-search (format "Note: commands on %s run without a sandbox"
                                       (mevedel-remote-host remote))
                               first))
        (should-not (string-search "run without a sandbox" second))
        (should (string-search "two" second))
        ;; A view of the workspace says so in its header.
        (let ((view (mevedel remote)))
          (unwind-protect
              (should (string-search (format "no sandbox on %s" (mevedel-remote-host remote))
                                     (with-current-buffer view (mevedel-view--header-line))))
            (let ((data (mevedel-chat-data-buffer (mevedel-view-chat view))))
              (kill-buffer view)
              (when (buffer-live-p data) (kill-buffer data)))))))))

(ert-deftest remote-exec:without-the-helper-tramp-runs-it-unconfined ()
  (remote-exec-test--with (sshd local remote host-dir)
    (ignore sshd)
    (cl-letf (((symbol-function 'mevedel-remote-helper--binary) #'ignore))
      (let ((refused (remote-exec-test--text
                      (remote-exec-test--call #'mevedel-tool-exec-bash
                                              '(:command "echo x > x.txt" :description "w")
                                              remote))))
        (should (string-search "the sandbox is required, but commands on" refused))
        (should (string-search "the mevedel helper does not run on" refused))
        (should-not (file-exists-p (expand-file-name "x.txt" host-dir))))
      (let* ((mevedel-sandbox-mode 'best-effort)
             (args (list :command "pwd; echo x > x.txt; printf 'a\\nb\\n'; exit 3"
                         :description "w"))
             (there (remote-exec-test--text
                     (remote-exec-test--call #'mevedel-tool-exec-bash args remote)))
             (here (let ((mevedel-sandbox-mode 'off))
                     (remote-exec-test--text
                      (remote-exec-test--call #'mevedel-tool-exec-bash args local)))))
        (should (file-exists-p (expand-file-name "x.txt" host-dir)))
        (should (string-search "exit_code=\"3\"" there))
        (should (string-search "run without a sandbox" there))
        (should (string-prefix-p
                 (remote-exec-test--normal
                  (car (split-string here "\nNote: " t)) local)
                 (remote-exec-test--normal there host-dir)))
        ;; StopExecution reaches the command through TRAMP too.
        (remote-exec-test--stop-long "echo up; sleep 60" 2000 remote)))))

(ert-deftest remote-exec:a-lost-connection-settles-the-command ()
  (remote-exec-test--with (sshd local remote host-dir)
    (ignore local host-dir)
    ;; The helper is up first: the command runs when the link goes.
    (remote-exec-test--call #'mevedel-tool-exec-bash '(:command "true" :description "warm")
                            remote)
    (let* ((first (remote-exec-test--text
                   (remote-exec-test--call #'mevedel-tool-exec-bash
                                           '(:command "echo up; sleep 60" :description "long"
                                                      :yield_time_ms 2000)
                                           remote)))
           (id (remote-exec-test--id first))
           (started (float-time)))
      (should (string-prefix-p "up\n" (remote-exec-test--normal first "/nowhere")))
      (mevedel-sshd-kill-connections sshd)
      (let ((after (remote-exec-test--text
                    (remote-exec-test--call #'mevedel-tool-exec-write-stdin
                                            (list :execution_id id :chars ""
                                                  :yield_time_ms 30000)
                                            remote 60))))
        (should (string-search "termination=\"lost\"" after))
        (should (string-search (mevedel-remote-host remote) after))
        (should (< (- (float-time) started) mevedel-remote-connect-timeout))))))

;;;; The real bin/mevedel

(require 'mevedel-e2e-helpers)

(ert-deftest remote-exec:headless-bash-runs-on-the-host ()
  (remote-exec-test--with (sshd local remote host-dir)
    (ignore local)
    (mevedel-e2e-require-python)
    (let* ((script (mevedel-e2e-write-script
                    '(((tool_calls
                        . [((name . "Bash")
                            (arguments . ((command . "pwd; echo hi > hi.txt; cat hi.txt")
                                          (description . "probe"))))]))
                      ((text . "Done.")))))
           (server (mevedel-scripted-model-start script))
           (init (mevedel-e2e-headless-config
                  (mevedel-scripted-model-port server) 'openai t
                  (append (mevedel-sshd-tramp-forms sshd)
                          `((setq mevedel-remote-helper-cache-directory
                                  ,mevedel-remote-helper-cache-directory)))))
           (process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                        invocation-directory))
                                      process-environment)))
      (unwind-protect
          (with-temp-buffer
            (let ((status (call-process (expand-file-name "bin/mevedel" mevedel-test-root)
                                        nil (list t nil) nil
                                        "--config" init "--dir" remote "--json"
                                        "-p" "go" "--permission-mode" "full-auto"
                                        "--timeout" "60")))
              (should (eql status 0))
              (let* ((json (json-parse-string (buffer-string) :object-type 'alist
                                              :array-type 'list :null-object nil
                                              :false-object nil))
                     (call (car (alist-get 'tool_calls json))))
                (should (equal (alist-get 'status call) "success"))
                (should (string-search (directory-file-name host-dir)
                                       (alist-get 'result_preview call)))
                (should (file-exists-p (expand-file-name "hi.txt" host-dir))))))
        (mevedel-scripted-model-stop server)
        (delete-file init)
        (delete-file script)))))

(provide 'remote-exec-e2e-test)
;;; remote-exec-e2e-test.el ends here
