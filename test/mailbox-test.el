;;; mailbox-test.el --- Tests of mailbox delivery and the background wake  -*- lexical-binding: t; -*-

;;; Commentary:

;; Real commands run by the execution handlers leave mailbox records;
;; the background wake starts one turn for them, and the records become
;; <agent-message> blocks for the next request.  The wake itself is
;; observed by replacing the function that would start a chat turn.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-mailbox)

(defvar mailbox-test--n 0)

(defun mailbox-test--context (&rest extra)
  "Return a fresh execution context with EXTRA keys."
  (append extra (list :session (format "agent-%d" (cl-incf mailbox-test--n))
                      :owner "/root" :cwd default-directory)))

(defun mailbox-test--call (handler args &optional seconds)
  "Call async HANDLER with ARGS and wait (SECONDS) for its answer."
  (let ((box (list nil)))
    (funcall handler (lambda (v) (setcar box (list v))) args)
    (mevedel-test-wait-until (car box) (or seconds 20))
    (caar box)))

(defun mailbox-test--take (store session)
  "Return the unread blocks of /root in STORE, marking them delivered in SESSION."
  (let ((messages (mevedel-mailbox-unread store "/root")))
    (mevedel-mailbox-deliver store session (mapcar (lambda (m) (plist-get m :id)) messages))
    (mapcar #'mevedel-mailbox-format-message messages)))

(defmacro mailbox-test--with-mailbox (vars &rest body)
  "Run BODY in a fresh session whose executions mail a temporary store.
VARS is (DB SESSION): the names BODY sees for the store's file and the
session.  The store's directory goes afterwards."
  (declare (indent 1))
  (let ((dir (make-symbol "dir"))
        (ctx (make-symbol "ctx")))
    `(progn
       (mevedel-core-ensure)
       (let* ((,dir (make-temp-file "agent-mailbox" t))
              (,(car vars) (expand-file-name "session.sqlite" ,dir))
              (,ctx (mailbox-test--context :mailbox ,(car vars)))
              (,(cadr vars) (plist-get ,ctx :session))
              (mevedel-tool-exec-context-function (lambda () ,ctx)))
         (unwind-protect
             (progn ,@body)
           (delete-directory ,dir t))))))

(ert-deftest mevedel-mailbox:background-completion-wakes-once ()
  (mailbox-test--with-mailbox (db session)
    (let ((woken nil)
          (busy nil))
      ;; The woken turn makes the session busy.
      (cl-letf (((symbol-function 'mevedel-mailbox--wake)
                 (lambda (key) (push (cons key mevedel-mailbox-wake-prompt) woken) (setq busy t)))
                ((symbol-function 'mevedel-mailbox--idle-p)
                 (lambda (key) (and (equal key session) (not busy)))))
        ;; Two background completions while idle start one turn: the
        ;; second arrives while that turn runs and is read by it.
        (dolist (n '(1 2))
          (mailbox-test--call #'mevedel-tool-exec-bash
                            (list :command (format "sleep 0.%d; echo job %d" (+ 3 n) n)
                                  :description (format "job %d" n)
                                  :yield_time_ms 250)))
        (mevedel-test-wait-until (= (length (mevedel-core-exec-list session)) 0) 10)
        (mevedel-test-wait-until woken 5)
        (accept-process-output nil 0.3)
        (should (equal woken (list (cons session mevedel-mailbox-wake-prompt))))
        ;; Both results are injected into the next request, once.
        (let* ((store (mevedel-core-store-open db))
               (blocks (mailbox-test--take store session)))
          (should (= (length blocks) 2))
          (should (string-match-p
                   "\\`<agent-message type=\"EXECUTION\" sender=\"/root\" recipient=\"/root\" execution_id=\"x[0-9a-f]+\" description=\"job 1\" command=\"sleep 0.4; echo job 1\" termination=\"exit\" outcome=\"success\" exit_code=\"0\">\njob 1\n</agent-message>\\'"
                   (car blocks)))
          (should-not (mailbox-test--take store session))
          (should-not (gethash session mevedel-mailbox--pending-wakes))
          (mevedel-core-store-close store))))))

(ert-deftest mevedel-mailbox:stop-and-poll-do-not-wake ()
  (mailbox-test--with-mailbox (db session)
    (let ((woken nil))
      (cl-letf (((symbol-function 'mevedel-mailbox--wake) (lambda (key) (push key woken) t))
                ((symbol-function 'mevedel-mailbox--idle-p) (lambda (_key) t)))
        (let* ((a (mailbox-test--call #'mevedel-tool-exec-bash
                                    '(:command "sleep 20" :description "to stop"
                                               :yield_time_ms 250)))
               (id (plist-get (plist-get a :render-data) :execution-id)))
          (mailbox-test--call #'mevedel-tool-exec-stop-execution (list :execution_id id)))
        ;; The user's stop mails the result but does not wake.
        (let* ((a (mailbox-test--call #'mevedel-tool-exec-bash
                                    '(:command "sleep 20" :description "user stop"
                                               :yield_time_ms 250)))
               (id (plist-get (plist-get a :render-data) :execution-id)))
          (should (mevedel-core-exec-stop-by-user session id))
          (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10))
        (accept-process-output nil 0.5)
        (should-not woken)
        (let ((store (mevedel-core-store-open db)))
          (should (= (length (mailbox-test--take store session)) 1))
          (mevedel-core-store-close store))))))

(ert-deftest mevedel-mailbox:message-blocks-escape ()
  (let ((block (mevedel-mailbox-format-message
                '(:kind "EXECUTION" :sender "x1" :recipient "/root"
                        :attrs (("command" "a \"b\" <c> & d"))
                        :payload "x</agent-message>y"))))
    (should (equal block (concat "<agent-message type=\"EXECUTION\" sender=\"/root\" "
                                 "recipient=\"/root\" "
                                 "command=\"a &quot;b&quot; &lt;c&gt; &amp; d\">\n"
                                 "x<\\/agent-message>y\n</agent-message>")))))

(ert-deftest mevedel-mailbox:opening-tags-carry-sender-and-recipient ()
  ;; An agent's own mail names it; an execution's record names the
  ;; execution's owner, its recipient, as the sender.
  (should (string-prefix-p
           "<agent-message type=\"MAIL\" sender=\"/root/explorer\" recipient=\"/root\">\n"
           (mevedel-mailbox-format-message
            '(:kind "MAIL" :sender "/root/explorer" :recipient "/root" :payload "hi"))))
  (should (string-prefix-p
           "<agent-message type=\"MONITOR\" sender=\"/root\" recipient=\"/root\" execution_id=\"x9\" description=\"tail\">\n"
           (mevedel-mailbox-format-message
            '(:kind "MONITOR" :sender "x9" :recipient "/root"
                    :attrs (("execution_id" "x9") ("description" "tail")) :payload "line")))))

(provide 'mailbox-test)
;;; mailbox-test.el ends here
