;;; tool-exec-test.el --- Tests of the execution tools' handlers  -*- lexical-binding: t; -*-

;;; Commentary:

;; The Bash, WriteStdin, ListExecutions, StopExecution and Monitor
;; handlers driven directly (as the pipeline calls them), the
;; model-visible text and the row renderers (test/mailbox-test.el has
;; the background wake and the mailbox messages).

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-tool-exec)

(defvar tool-exec-test--n 0)

(defmacro tool-exec-test--with-context (context &rest body)
  "Run BODY with the execution context CONTEXT (a plist form)."
  (declare (indent 1))
  `(let* ((ctx ,context)
          (mevedel-tool-exec-context-function (lambda () ctx)))
     ,@body))

(defun tool-exec-test--context (&rest extra)
  "Return a fresh context with EXTRA keys."
  (append extra (list :session (format "tool-exec-%d" (cl-incf tool-exec-test--n))
                      :owner "/root" :cwd default-directory)))

(defun tool-exec-test--call (handler args &optional seconds)
  "Call async HANDLER with ARGS and wait (SECONDS) for its answer."
  (let ((box (list nil)))
    (funcall handler (lambda (v) (setcar box (list v))) args)
    (mevedel-test-wait-until (car box) (or seconds 20))
    (caar box)))

(defun tool-exec-test--result (answer)
  "Return the result text of a handler ANSWER."
  (if (stringp answer) answer (plist-get answer :result)))

(ert-deftest mevedel-tool-exec:bash-yield-poll-and-complete ()
  (mevedel-core-ensure)
  (tool-exec-test--with-context (tool-exec-test--context)
    (let* ((answer (tool-exec-test--call
                    #'mevedel-tool-exec-bash
                    '(:command "echo start; sleep 1; echo end" :description "slow echo"
                               :yield_time_ms 300)))
           (text (tool-exec-test--result answer))
           (data (plist-get answer :render-data))
           (id (plist-get data :execution-id)))
      (should (string-prefix-p "start\n" text))
      (should (string-match-p "Still running. Poll with WriteStdin" text))
      (should (string-match-p "<bash-execution execution_id=\"x[0-9a-f]+\" state=\"running\"" text))
      (should (equal (plist-get data :state) "running"))
      (should (string-match-p (regexp-quote id) (mevedel-tool-exec-list-executions nil)))
      (let* ((done (tool-exec-test--call #'mevedel-tool-exec-write-stdin
                                         (list :execution_id id :chars "")))
             (text (tool-exec-test--result done)))
        (should (string-prefix-p "end\n<bash-execution" text))
        (should (string-match-p "outcome=\"success\"" text))
        (should (string-match-p "exit_code=\"0\"" text))
        (should (equal (plist-get (plist-get done :render-data) :state) "completed")))
      (should (equal (mevedel-tool-exec-list-executions nil) "No yielded executions are running.")))))

(ert-deftest mevedel-tool-exec:bash-argument-policy ()
  (mevedel-core-ensure)
  (tool-exec-test--with-context (tool-exec-test--context)
    (should (string-match-p "Error: description is required"
                            (tool-exec-test--call #'mevedel-tool-exec-bash '(:command "true"))))
    (should (string-match-p "Error: command is required"
                            (tool-exec-test--call #'mevedel-tool-exec-bash '(:description "x"))))
    (should (string-match-p "must be short"
                            (tool-exec-test--call
                             #'mevedel-tool-exec-bash
                             (list :command "true" :description (make-string 300 ?x)))))
    (should (string-match-p "Error: yield_time_ms must be a number"
                            (tool-exec-test--call
                             #'mevedel-tool-exec-bash
                             '(:command "true" :description "x" :yield_time_ms "soon"))))
    (should (string-match-p "Error: .*background operator"
                            (tool-exec-test--call
                             #'mevedel-tool-exec-bash '(:command "sleep 9 &" :description "bg")))))
  (should (= (mevedel-tool-exec--bounded 10 mevedel-tool-exec-yield-range "y") 250))
  (should (= (mevedel-tool-exec--bounded 99999 mevedel-tool-exec-yield-range "y") 30000))
  (should (= (mevedel-tool-exec--bounded nil mevedel-tool-exec-poll-range "y") 5000))
  (should (= (mevedel-tool-exec--bounded 1 mevedel-tool-exec-poll-range "y") 5000))
  (should (= (mevedel-tool-exec--bounded nil mevedel-tool-exec-input-range "y") 250)))

(ert-deftest mevedel-tool-exec:pty-input-and-pipe-refusal ()
  (mevedel-core-ensure)
  (tool-exec-test--with-context (tool-exec-test--context)
    (let* ((answer (tool-exec-test--call
                    #'mevedel-tool-exec-bash
                    '(:command "read x; echo got $x" :description "ask" :tty t
                               :yield_time_ms 300)))
           (id (plist-get (plist-get answer :render-data) :execution-id)))
      (should (string-match-p "tty=\"true\"" (tool-exec-test--result answer)))
      (let ((done (tool-exec-test--result
                   (tool-exec-test--call #'mevedel-tool-exec-write-stdin
                                         (list :execution_id id :chars "hello\n"
                                               :yield_time_ms 3000)))))
        (should (string-match-p "got hello" done))))
    (let* ((answer (tool-exec-test--call
                    #'mevedel-tool-exec-bash
                    '(:command "sleep 20" :description "nap" :yield_time_ms 250)))
           (id (plist-get (plist-get answer :render-data) :execution-id)))
      (should (string-match-p "Error: .*tty=true"
                              (tool-exec-test--call #'mevedel-tool-exec-write-stdin
                                                    (list :execution_id id :chars "x"))))
      (let ((stopped (tool-exec-test--result
                      (tool-exec-test--call #'mevedel-tool-exec-stop-execution
                                            (list :execution_id id)))))
        (should (string-match-p "termination=\"stopped\"" stopped))))
    (should (string-match-p "Error: no execution"
                            (tool-exec-test--call #'mevedel-tool-exec-stop-execution
                                                  '(:execution_id "x00000000"))))))

(ert-deftest mevedel-tool-exec:monitor-rules ()
  (mevedel-core-ensure)
  (tool-exec-test--with-context (tool-exec-test--context :owner "/root/worker")
    (should (string-match-p "only available to the root"
                            (tool-exec-test--call #'mevedel-tool-exec-monitor
                                                  '(:command "echo" :description "d")))))
  (tool-exec-test--with-context (tool-exec-test--context)
    (should (string-match-p "timeout_ms argument must be an integer"
                            (tool-exec-test--call #'mevedel-tool-exec-monitor
                                                  '(:command "echo" :description "d"
                                                             :timeout_ms 10))))
    (let* ((answer (tool-exec-test--call #'mevedel-tool-exec-monitor
                                         '(:command "sleep 20" :description "watch")))
           (text (tool-exec-test--result answer)))
      (should (string-match-p "<monitor-execution execution_id=" text))
      (should (string-match-p "Poll with WriteStdin" text))
      (tool-exec-test--call #'mevedel-tool-exec-stop-execution
                            (list :execution_id
                                  (plist-get (plist-get answer :render-data) :execution-id))))))

(ert-deftest mevedel-tool-exec:renderers ()
  (let* ((command "make -j4 all && ./run-the-whole-test-suite --with-many --options --here\necho two")
         (running (mevedel-tool-exec-render-bash
                   "Bash" (list :command command) "building\nStill running.\n<bash-execution execution_id=\"x1\" state=\"running\"/>"
                   '(:execution-id "x1" :state "running" :elapsed-ms 2500 :envelope t)))
         (done (mevedel-tool-exec-render-bash
                "Bash" (list :command "grep x f") "<bash-execution state=\"completed\"/>"
                '(:execution-id "x2" :state "completed" :outcome "no-match" :elapsed-ms 12
                  :envelope t))))
    (should (string-match-p "\\`\\$ make -j4 all && \\./run-the-whole-test-suite --with-many --op… …"
                            (plist-get running :header)))
    (should (string-match-p " … *running 2\\.5s\\'" (plist-get running :header)))
    (should (eq (plist-get running :status) 'running))
    (should (string-prefix-p (concat "$ " command "\n\nbuilding") (plist-get running :body)))
    (should-not (string-match-p "bash-execution" (plist-get running :body)))
    (should (plist-get running :initially-collapsed-p))
    (should (string-match-p "no-match 12ms\\'" (plist-get done :header)))
    (should (eq (plist-get done :status) 'success)))
  ;; Settled rows name the exit status (or the signal).
  (let ((ok (mevedel-tool-exec-render-bash
             "Bash" '(:command "make test") "ok\n<bash-execution state=\"completed\"/>"
             '(:execution-id "x3" :state "completed" :outcome "success" :exit-code 0
               :elapsed-ms 1500 :envelope t)))
        (failed (mevedel-tool-exec-render-bash
                 "Bash" '(:command "make lint") "" '(:execution-id "x4" :state "completed"
                                                    :outcome "failure" :exit-code 2
                                                    :elapsed-ms 40)))
        (killed (mevedel-tool-exec-render-bash
                 "Bash" '(:command "sleep 99") "" '(:execution-id "x5" :state "completed"
                                                   :outcome "stopped" :signal 9
                                                   :elapsed-ms 61000))))
    (should (equal (plist-get ok :header) "$ make test  done (exit 0) 1.5s"))
    (should (equal (plist-get ok :body) "$ make test\n\nok"))
    (should (equal (plist-get failed :header) "$ make lint  failed (exit 2) 40ms"))
    (should (eq (plist-get failed :status) 'error))
    (should (equal (plist-get killed :header) "$ sleep 99  stopped (signal 9) 1m01s")))
  (let ((poll (mevedel-tool-exec-render-control "WriteStdin" '(:execution_id "x1" :chars "") "out" nil))
        (ctrl-c (mevedel-tool-exec-render-control "WriteStdin" '(:execution_id "x1" :chars "\u0003") "" nil)))
    (should (plist-get poll :hidden-p))
    (should-not (plist-get ctrl-c :hidden-p))
    (should (string-match-p "Ctrl-C" (plist-get ctrl-c :header)))))

;;;; Through the pipeline, in a session

(defmacro tool-exec-test--in-session (var &rest body)
  "Run BODY with VAR bound to a durable session in a temporary workspace."
  (declare (indent 1))
  `(let* ((workspace (make-temp-file "tool-exec-ws" t))
          (,var (mevedel-session-create :workspace workspace)))
     (setf (mevedel-session-permission-mode ,var) 'full-auto)
     (unwind-protect (progn ,@body)
       (mevedel-session-close ,var)
       (delete-directory workspace t))))

(defun tool-exec-test--pipeline (name args session &optional seconds)
  "Run tool NAME with ARGS in SESSION through the pipeline; return the outcome."
  (let ((box (list nil)))
    (mevedel-pipeline-run-tool-outcome (mevedel-tool-get name) args
                                       (lambda (o) (setcar box (list o)))
                                       :session session :tool-use-id "toolu_exec")
    (mevedel-test-wait-until (car box) (or seconds 20))
    (caar box)))

(ert-deftest mevedel-tool-exec:registered-tools-run-in-the-session ()
  (mevedel-core-ensure)
  (should (mevedel-tool-get "Bash"))
  (should (string-match-p "mevedel://tools/execution.md"
                          (mevedel-tool-description (mevedel-tool-get "Bash"))))
  (dolist (name '("WriteStdin" "ListExecutions" "StopExecution" "Monitor"))
    (should (mevedel-tool-get name)))
  (tool-exec-test--in-session session
    ;; The session has stored something before: output is kept with it.
    (mevedel-session-ensure-storage session)
    (let* ((outcome (tool-exec-test--pipeline
                     "Bash" '(:command "pwd; seq 1 5000" :description "count") session))
           (data (plist-get outcome :render-data))
           (result (plist-get outcome :result)))
      (should (eq (plist-get outcome :status) 'success))
      (should (string-prefix-p (file-name-as-directory
                                (file-truename (mevedel-session-workspace session)))
                               (file-name-as-directory
                                (file-truename (car (split-string result "\n"))))))
      ;; 5000 lines do not fit: a head/tail preview naming a kept file in
      ;; the session's tool-results directory.
      (should (string-match-p "characters omitted" result))
      (should (plist-get data :artifact))
      (should (string-prefix-p (mevedel-session-tool-results-directory session)
                               (plist-get data :artifact)))
      (should (file-exists-p (plist-get data :artifact)))
      ;; The model is told its address, never the storage path.
      (let ((address (concat "artifact://tool-results/"
                             (file-name-nondirectory (plist-get data :artifact)))))
        (should (string-match-p (regexp-quote (concat "full output: " address " ...]")) result))
        (should (string-match-p (regexp-quote (format "output_file=\"%s\"" address)) result))
        (should-not (string-match-p (regexp-quote (mevedel-session-directory session)) result)))
      (should (equal (plist-get data :outcome) "success")))))

(ert-deftest mevedel-tool-exec:truncated-output-keeps-failure-lines ()
  "A compiler error in the omitted middle of Bash output is shown with its line."
  (mevedel-core-ensure)
  (tool-exec-test--in-session session
    (mevedel-session-ensure-storage session)
    (let* ((command "seq 1 3000; echo 'src/main.c:12:5: error: expected ;'; seq 3002 6000")
           (result (plist-get (tool-exec-test--pipeline
                               "Bash" (list :command command :description "build") session)
                              :result)))
      (should (string-match-p
               (concat "characters omitted (lines [0-9]+-[0-9]+ of this output); full output: [^\n]+\n"
                       "\\[1 of the omitted lines looks like a failure:\\]\n"
                       "  L3001: src/main\\.c:12:5: error: expected ;\n"
                       "\\[end of kept lines\\]\n")
               result))
      ;; Without patterns, the same output has the plain preview.
      (let* ((mevedel-pipeline-failure-patterns nil)
             (plain (plist-get (tool-exec-test--pipeline
                                "Bash" (list :command command :description "build") session)
                               :result)))
        (should (string-match-p "characters omitted" plain))
        (should-not (string-match-p "like a failure\\|like failures" plain)))
      (mevedel-pipeline-sync-failure-patterns))))

(ert-deftest mevedel-tool-exec:session-close-stops-its-processes ()
  (mevedel-core-ensure)
  ;; The command runs in the sandbox's PID namespace: find it by its
  ;; command line in /proc.
  (tool-exec-test--in-session session
    (let* ((outcome (tool-exec-test--pipeline
                     "Bash" (list :command (concat (mevedel-test-sleep 300 "25") " | "
                                                   (mevedel-test-sleep 300 "5"))
                                  :description "nap" :yield_time_ms 500)
                     session)))
      (should (equal (plist-get (plist-get outcome :render-data) :state) "running"))
      (should (= 2 (length (mevedel-test-processes-running (mevedel-test-sleep 300)))))))
  ;; Closing the session (at the end of the macro) tore it down.
  (mevedel-test-wait-until (null (mevedel-test-processes-running (mevedel-test-sleep 300))) 5))

(ert-deftest mevedel-tool-exec:cancelled-request-stops-foreground-command ()
  (mevedel-core-ensure)
  (tool-exec-test--in-session session
    (let* ((cancel (mevedel-pipeline-run-tool-outcome
                    (mevedel-tool-get "Bash")
                    '(:command "sleep 300" :description "long" :yield_time_ms 30000)
                    #'ignore :session session))
           (key (mevedel-session-id session)))
      (mevedel-test-wait-until (mevedel-core-exec-list key) 5)
      (funcall cancel)
      (mevedel-test-wait-until (null (mevedel-core-exec-list key)) 5))))

(provide 'tool-exec-test)
;;; tool-exec-test.el ends here
