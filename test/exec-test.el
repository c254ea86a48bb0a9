;;; exec-test.el --- Tests of managed execution through the Lisp API  -*- lexical-binding: t; -*-

;;; Commentary:

;; The Rust side has its own tests (cargo test exec::); these drive the
;; same machinery from Lisp: asynchronous observations through the
;; event channel, progress and settlement events, refusals as Lisp
;; errors, and what Emacs's exit leaves behind (checked through /proc).

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-core)

(defvar mevedel-exec-test--counter 0)

(defun mevedel-exec-test--session ()
  "Return a fresh session key."
  (format "exec-test-%d" (cl-incf mevedel-exec-test--counter)))

(defmacro mevedel-exec-test--with-handlers (bindings &rest body)
  "Run BODY with event handlers BINDINGS ((KIND FUNCTION) ...), then restore the old ones."
  (declare (indent 1))
  (let ((saved (make-symbol "saved")))
    `(let ((,saved (mapcar (lambda (kind) (cons kind (gethash kind mevedel-core--event-handlers)))
                           ',(mapcar #'car bindings))))
       ,@(mapcar (lambda (b) `(mevedel-core-register-event-handler ',(car b) ,(cadr b)))
                 bindings)
       (unwind-protect (progn ,@body)
         (dolist (entry ,saved)
           (mevedel-core-register-event-handler (car entry) (cdr entry)))))))

(defun mevedel-exec-test--start (spec)
  "Start SPEC; return (ID . BOX) where BOX's car receives the first observation."
  (let* ((box (list nil))
         (id (mevedel-core-exec-start spec (lambda (status value)
                                             (setcar box (cons status value))))))
    (cons id box)))

(defmacro mevedel-exec-test--await (box &optional seconds)
  "Wait for BOX's car, an async answer, and return its value."
  `(progn (mevedel-test-wait-until (car ,box) ,(or seconds 20))
          (should (eq (car (car ,box)) 'ok))
          (cdr (car ,box))))

(ert-deftest mevedel-exec:yield-then-poll-then-completion ()
  (mevedel-core-ensure)
  (let* ((session (mevedel-exec-test--session))
         (started (mevedel-exec-test--start
                   (list :session session :owner "/root" :description "two lines"
                         :command "echo first; sleep 0.8; echo second" :yield-ms 300)))
         (obs (mevedel-exec-test--await (cdr started))))
    (should (stringp (car started)))
    (should (equal (plist-get obs :state) "running"))
    (should (equal (plist-get obs :output) "first\n"))
    (should (equal (plist-get obs :id) (car started)))
    (should (equal (mapcar (lambda (e) (plist-get e :id))
                           (mevedel-core-exec-list session "/root"))
                   (list (car started))))
    (should-not (mevedel-core-exec-list session "/root/other"))
    (let ((box (list nil)))
      (mevedel-core-exec-observe session (car started) "/root" 10000
                                 (lambda (status value) (setcar box (cons status value))))
      (let* ((done (mevedel-exec-test--await box))
             (facts (plist-get done :facts)))
        (should (equal (plist-get done :state) "completed"))
        (should (equal (plist-get done :output) "second\n"))
        (should (equal (plist-get facts :outcome) "success"))
        (should (equal (plist-get facts :termination) "exit"))
        (should (eql (plist-get facts :exit-code) 0))))
    ;; Another owner cannot see it.
    (should-error (mevedel-core-exec-observe session (car started) "/root/x" 0 #'ignore)
                  :type 'mevedel-core-exec-error)))

(ert-deftest mevedel-exec:refusals-are-exec-errors ()
  (mevedel-core-ensure)
  (let ((err (should-error
              (mevedel-core-exec-start
               (list :session (mevedel-exec-test--session) :owner "/root"
                     :command "sleep 5 & echo hi")
               #'ignore)
              :type 'mevedel-core-exec-error)))
    (should (string-match-p "background operator" (cadr err))))
  (should-error (mevedel-core-exec-start
                 (list :session "x" :owner "/root/agent" :kind "monitor"
                       :description "d" :command "echo")
                 #'ignore)
                :type 'mevedel-core-exec-error)
  (should-error (mevedel-core-exec-start (list :session "x" :owner "/root" :bogus 1) #'ignore)
                :type 'mevedel-core-exec-error))

(ert-deftest mevedel-exec:progress-then-settlement-events ()
  (mevedel-core-ensure)
  (let* ((session (mevedel-exec-test--session))
         (progress nil) (settled nil))
    (mevedel-exec-test--with-handlers
        ((exec-progress (lambda (data)
                          (when (equal (plist-get data :session) session)
                            (push data progress))))
         (exec-settled (lambda (data)
                         (when (equal (plist-get data :session) session)
                           (push data settled)))))
      (let* ((started (mevedel-exec-test--start
                       (list :session session :owner "/root" :tool-use-id "toolu_1"
                             :command "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.5; done"
                             :yield-ms 250)))
             (obs (mevedel-exec-test--await (cdr started))))
        (should (equal (plist-get obs :state) "running"))
        (mevedel-test-wait-until settled 20)
        (let ((s (car settled)))
          (should (equal (plist-get s :id) (car started)))
          (should (equal (plist-get s :tool-use-id) "toolu_1"))
          (should (plist-get s :yielded))
          ;; No mailbox configured: no record, no wake.
          (should-not (plist-get s :wake))
          (should (equal (plist-get (plist-get s :facts) :outcome) "success")))
        ;; Progress started after two seconds, carried a bounded tail and
        ;; came at most four times a second.
        (should progress)
        (let ((first (car (last progress))))
          (should (>= (plist-get first :elapsed-ms) 1900))
          (should (string-match-p "tick" (plist-get first :tail)))
          (should (equal (plist-get first :tool-use-id) "toolu_1")))
        (should (<= (length progress) 8))))))

(ert-deftest mevedel-exec:yielded-completion-is-mailed-and-wakes ()
  (mevedel-core-ensure)
  (let* ((session (mevedel-exec-test--session))
         (dir (make-temp-file "mevedel-exec-mail" t))
         (db (expand-file-name "session.sqlite" dir))
         (settled nil))
    (unwind-protect
        (mevedel-exec-test--with-handlers
            ((exec-settled (lambda (data)
                             (when (equal (plist-get data :session) session)
                               (setq settled data)))))
          (let* ((started (mevedel-exec-test--start
                           (list :session session :owner "/root" :mailbox db
                                 :description "wait a bit"
                                 :command "sleep 0.5; echo finished" :yield-ms 250))))
            (mevedel-exec-test--await (cdr started))
            (mevedel-test-wait-until settled 10)
            (should (plist-get settled :wake))
            (should (= (length (plist-get settled :mailbox-ids)) 1))
            (let* ((store (mevedel-core-store-open db))
                   (records (mevedel-core-mailbox-unread store "/root")))
              (mevedel-core-store-close store)
              (should (= (length records) 1))
              (should (equal (plist-get (car records) :kind) "EXECUTION"))
              (should (equal (plist-get (car records) :sender) (car started)))
              (should (equal (plist-get (car records) :payload) "finished\n"))
              (should (equal (assoc "outcome" (plist-get (car records) :attrs))
                             '("outcome" "success"))))))
      (delete-directory dir t))))

(ert-deftest mevedel-exec:analysis-from-lisp ()
  (let ((a (mevedel-core-bash-permission "grep -n x f | sort" "/ws" "/ws")))
    (should (equal (plist-get a :class) "read-only"))
    (should (plist-get a :read-only))
    (should (plist-get a :inside))
    (should (equal (plist-get a :keys) '("grep" "sort")))
    (should (equal (plist-get a :paths) '("/ws/f")))
    ;; Lists of keys seen before are shared, not made again.
    (should (eq (plist-get (mevedel-core-bash-permission "grep -c y g | sort" "/ws" "/ws") :keys)
                (plist-get a :keys))))
  (let ((a (mevedel-core-bash-permission "rm -rf /" "/ws" "/ws")))
    (should (equal (plist-get a :class) "dangerous"))
    (should (plist-get a :reasons))
    (should (plist-get a :unkeyed)))
  (should-not (plist-get (mevedel-core-bash-permission "sleep 1 &" "/ws" "/ws") :read-only))
  (should-not (plist-get (mevedel-core-bash-permission "cat /etc/passwd" "/ws" "/ws") :inside))
  (should-error (mevedel-core-bash-permission 42 "/ws" "/ws") :type 'wrong-type-argument)
  ;; Sources judged alike share one result plist, which is not made
  ;; again; other facts get another.
  (let ((a (mevedel-core-bash-permission "git status --short # 1" "/ws" "/ws"))
        (b (mevedel-core-bash-permission "git status --short # 2" "/ws" "/ws"))
        (c (mevedel-core-bash-permission "git status --short" "/elsewhere" "/ws")))
    (should (equal (plist-get a :class) "read-only"))
    (should (equal (plist-get a :keys) '("git status")))
    (should (plist-get a :inside))
    (should (eq a b))
    (should-not (eq a c))
    (should-not (plist-get c :inside))
    (should (equal (plist-get c :keys) '("git status")))))

(ert-deftest mevedel-exec:kill-emacs-leaves-no-process ()
  "Emacs's exit stops every group: forked grandchildren and nohup too."
  (let* ((dir (make-temp-file "mevedel-exec-exit" t))
         (result
          (mevedel-test-run-emacs
           `(progn
              (require 'mevedel-core)
              (mevedel-core-ensure)
              (let ((ids nil))
                (dolist (cmd (list ,(format "sh -c 'sleep 300 & echo $! > %s/gc.part && mv %s/gc.part %s/gc; wait'"
                                           dir dir dir)
                                   "nohup sleep 300"
                                   "sleep 300"))
                  (push (mevedel-core-exec-start
                         (list :session "exit" :owner "/root" :command cmd :yield-ms 100)
                         #'ignore)
                        ids)
                  ;; Yield so the next exclusive command is admitted.
                  (sleep-for 0.3))
                (let ((deadline (+ (float-time) 10)))
                  (while (and (< (float-time) deadline)
                              (not (file-exists-p ,(expand-file-name "gc" dir))))
                    (accept-process-output nil 0.05)))
                (princ (format "GROUPS=%S\n" (mevedel-core-live-process-groups)))
                (kill-emacs 0))))))
    (unwind-protect
        (progn
          (should (eql (car result) 0))
          (should (string-match "GROUPS=\\((.*)\\)" (cdr result)))
          (let ((groups (car (read-from-string (match-string 1 (cdr result)))))
                (grandchild (with-temp-buffer
                              (insert-file-contents (expand-file-name "gc" dir))
                              (string-to-number (buffer-string)))))
            (should (= (length groups) 3))
            (should (> grandchild 0))
            (mevedel-test-wait-until
              (and (cl-every (lambda (g) (null (mevedel-test-group-members g))) groups)
                   (not (mevedel-test-pid-alive-p grandchild)))
              5)))
      (delete-directory dir t))))

(provide 'exec-test)
;;; exec-test.el ends here
