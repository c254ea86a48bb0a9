;;; pipeline-test.el --- Tests of the tool execution pipeline  -*- lexical-binding: t; -*-

;;; Commentary:

;; A fake tool driven through every branch of mevedel-pipeline.el:
;; repair and validation, PreToolUse rewrites, permission (allow, deny,
;; ask), snapshots, sync and async handlers, envelopes, render
;; transforms, hooks, events, cancellation, yielding, and oversized
;; result persistence.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-pipeline)

(defvar mevedel-pipeline-test--log nil
  "What the fake tool's handler, snapshot and prompt saw, newest first.")

(defun mevedel-pipeline-test--note (&rest entry)
  "Record ENTRY in the log."
  (push entry mevedel-pipeline-test--log))

(defun mevedel-pipeline-test--seen (kind)
  "Return the logged entries of KIND, oldest first."
  (reverse (cl-remove-if-not (lambda (e) (eq (car e) kind)) mevedel-pipeline-test--log)))

(defun mevedel-pipeline-test--tool (name &rest properties)
  "Register the test tool NAME with PROPERTIES over a default declaration."
  (mevedel-tool-register
   name
   (append properties
           (list :category "mevedel-test"
                 :description "A tool for tests."
                 :args '((path path :optional "A file.")
                         (count integer :optional "A count." :minimum 0 :maximum 10)
                         (text string :optional "Some text."))))))

(defmacro mevedel-pipeline-test--with (&rest body)
  "Run BODY with a clean log, batch chaining and no hooks or prompt."
  (declare (indent 0))
  `(let ((mevedel-pipeline-test--log nil)
         (mevedel-pipeline-tool-event-hook nil)
         (mevedel-pipeline-pre-tool-use-functions nil)
         (mevedel-pipeline-post-tool-use-functions nil)
         (mevedel-pipeline-post-tool-use-failure-functions nil)
         (mevedel-pipeline-snapshot-functions
          (list (lambda (ctx) (mevedel-pipeline-test--note 'snapshot (plist-get ctx :args)))))
         (mevedel-pipeline-interactive-function #'ignore)
         (mevedel-pipeline-warn-function
          (lambda (message) (mevedel-pipeline-test--note 'warning message))))
     (unwind-protect (progn ,@body)
       (dolist (tool (mevedel-tool-all))
         (when (equal (mevedel-tool-category tool) "mevedel-test")
           (mevedel-tool-unregister (mevedel-tool-name tool) "mevedel-test"))))))

(defun mevedel-pipeline-test--asking-session (prompter)
  "Return an ephemeral session whose PROMPTER answers permission questions."
  (let ((session (mevedel-session-create :workspace temporary-file-directory :ephemeral t)))
    (setf (mevedel-session-prompter session) prompter)
    session))

(defun mevedel-pipeline-test--echo (args)
  "A handler that logs ARGS and returns a result naming them."
  (mevedel-pipeline-test--note 'handler args)
  (format "ran with %S" args))

(defun mevedel-pipeline-test--run (tool args &rest keys)
  "Run TOOL with ARGS as a nested call; return its outcome (sync)."
  (let ((outcome 'unsettled))
    (apply #'mevedel-pipeline-run-tool-outcome tool args
           (lambda (o) (setq outcome o)) keys)
    outcome))

(defun mevedel-pipeline-test--provider (tool args &rest keys)
  "Run TOOL with ARGS as a provider call; return what gptel would get."
  (let ((result 'unsettled))
    (apply #'mevedel-pipeline-run-tool tool args (lambda (r) (setq result r)) keys)
    result))

;;;; Allow, deny, ask

(ert-deftest mevedel-pipeline:allowed-call-runs-and-settles ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PEcho" :read-only-p t
                                              :function #'mevedel-pipeline-test--echo))
           (events nil)
           (mevedel-pipeline-tool-event-hook
            (list (lambda (event info) (push (cons event (plist-get info :tool-use-id)) events))))
           (outcome (mevedel-pipeline-test--run tool '(:text "hi") :tool-use-id "t1"
                                                :parent-id "p0")))
      (should (eq (plist-get outcome :status) 'success))
      (should (equal (plist-get outcome :result) "ran with (:text \"hi\")"))
      (should (equal (plist-get outcome :tool-use-id) "t1"))
      (should (equal (plist-get outcome :parent-id) "p0"))
      (should (eq (plist-get outcome :source) 'nested))
      (should (equal (nreverse events)
                     '((started . "t1") (permission-approved . "t1") (settled . "t1")))))))

(ert-deftest mevedel-pipeline:deny-never-reaches-snapshot-or-handler ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PDenied" :snapshot-p t
                                              :function #'mevedel-pipeline-test--echo
                                              :check-permission
                                              (lambda (_) '(deny . "rule says no"))))
           (outcome (mevedel-pipeline-test--run tool '(:text "x"))))
      (should (eq (plist-get outcome :status) 'error))
      (should (equal (plist-get outcome :result) "Permission denied: rule says no"))
      (should-not (mevedel-pipeline-test--seen 'snapshot))
      (should-not (mevedel-pipeline-test--seen 'handler)))))

(ert-deftest mevedel-pipeline:ask-approve-and-deny ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PAsk" :snapshot-p t
                                              :function #'mevedel-pipeline-test--echo))
           (answers nil)
           (session (mevedel-pipeline-test--asking-session
                     (lambda (ctx answer)
                       (mevedel-pipeline-test--note 'asked (plist-get ctx :name))
                       (push answer answers)
                       nil)))
           (approved 'unsettled) (denied 'unsettled))
      ;; The default decision for a tool that is not read-only is `ask'.
      (mevedel-pipeline-run-tool-outcome tool '(:text "a") (lambda (o) (setq approved o))
                                         :session session)
      (mevedel-pipeline-run-tool-outcome tool '(:text "b") (lambda (o) (setq denied o))
                                         :session session)
      (should (eq approved 'unsettled))
      (should (eq denied 'unsettled))
      (should (= (length (mevedel-pipeline-test--seen 'asked)) 2))
      (should-not (mevedel-pipeline-test--seen 'handler))
      (funcall (nth 0 answers) 'deny)
      (funcall (nth 1 answers) 'approve)
      (should (eq (plist-get approved :status) 'success))
      (should (eq (plist-get denied :status) 'error))
      (should (string-prefix-p "Permission denied: the user declined" (plist-get denied :result)))
      ;; Only the approved call captured a snapshot and ran.
      (should (equal (mapcar #'cadr (mevedel-pipeline-test--seen 'handler)) '((:text "a"))))
      (should (equal (mapcar #'cadr (mevedel-pipeline-test--seen 'snapshot)) '((:text "a")))))))

(ert-deftest mevedel-pipeline:ask-without-prompt-is-a-refusal ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PNoPrompt" :function #'mevedel-pipeline-test--echo))
           (outcome (mevedel-pipeline-test--run tool nil)))
      (should (eq (plist-get outcome :status) 'error))
      (should (string-match-p "nobody can approve" (plist-get outcome :result)))
      (should-not (mevedel-pipeline-test--seen 'handler)))))

(ert-deftest mevedel-pipeline:tool-check-permission-decides ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool
                  "PChecked" :function #'mevedel-pipeline-test--echo
                  :check-permission (lambda (args) (if (plist-get args :text) 'allow 'deny)))))
      (should (eq (plist-get (mevedel-pipeline-test--run tool '(:text "x")) :status) 'success))
      (should (eq (plist-get (mevedel-pipeline-test--run tool nil) :status) 'error)))))

;;;; Automatic approvals

(ert-deftest mevedel-pipeline:reviewer-approvals-enter-render-data ()
  (mevedel-pipeline-test--with
    (let* ((seen nil)
           (record '(:source reviewer :outcome allow-once :reason "only reads"))
           (reviewed (lambda (check)
                       (mevedel-pipeline-test--tool
                        "PReviewed"
                        :check-permission check
                        :function (lambda (_)
                                    (setq seen (mevedel-pipeline-active-permission-approvals))
                                    ;; A handler cannot author approvals.
                                    '(:result "done" :render-data
                                              (:exit 0 :permission-approvals ((:source me))))))))
           (tool (funcall reviewed (lambda (_) (cons 'allow record)))))
      (let ((outcome (mevedel-pipeline-test--run tool nil)))
        (should (eq (plist-get outcome :status) 'success))
        (should (equal seen (list record)))
        (should (equal (plist-get outcome :render-data)
                       (list :exit 0 :permission-approvals (list record))))
        ;; The guest value never carries them.
        (should (equal (plist-get outcome :result) "done")))
      ;; The provider's block carries them; the text sent to the model does not.
      (let ((text (mevedel-pipeline-test--provider tool nil :tool-use-id "toolu_rev")))
        (should (equal (plist-get (mevedel-render-data-extract text "toolu_rev")
                                  :permission-approvals)
                       (list record)))
        (should (equal (mevedel-render-data-strip text "toolu_rev") "done")))
      ;; A later failure keeps the accepted approval.
      (let* ((failing (mevedel-pipeline-test--tool
                       "PReviewedFails" :function (lambda (_) (error "Broke"))
                       :check-permission (lambda (_) (cons 'allow record))))
             (outcome (mevedel-pipeline-test--run failing nil)))
        (should (eq (plist-get outcome :status) 'error))
        (should (equal (plist-get (plist-get outcome :render-data) :permission-approvals)
                       (list record))))
      ;; A plain allow records nothing, and a handler's field is dropped.
      (let* ((tool (funcall reviewed (lambda (_) 'allow)))
             (outcome (mevedel-pipeline-test--run tool nil)))
        (should (equal (plist-get outcome :render-data) '(:exit 0)))
        (should-not seen))
      ;; A prompt (an automatic reviewer) may approve with a record too.
      (let* ((tool (funcall reviewed (lambda (_) 'ask)))
             (session (mevedel-pipeline-test--asking-session
                       (lambda (_ctx answer)
                         (funcall answer (cons 'approve '(:source reviewer :reason "ok"))))))
             (outcome (mevedel-pipeline-test--run tool nil :session session)))
        (should (equal (plist-get (plist-get outcome :render-data) :permission-approvals)
                       '((:source reviewer :outcome allow-once :reason "ok")))))
      ;; A review's id reaches the handler; other keys do not.
      (let* ((tool (funcall reviewed (lambda (_) 'ask)))
             (session (mevedel-pipeline-test--asking-session
                       (lambda (_ctx answer)
                         (funcall answer (cons 'approve '(:source review :reason "reviewed"
                                                          :review-id "review-7" :extra 1)))))))
        (mevedel-pipeline-test--run tool nil :session session)
        (should (equal seen '((:source review :outcome allow-once :reason "reviewed"
                                       :review-id "review-7")))))
      ;; A malformed record refuses the call before the handler.
      (setq seen 'untouched)
      (let* ((tool (funcall reviewed (lambda (_) '(allow :reason 42))))
             (outcome (mevedel-pipeline-test--run tool nil)))
        (should (eq (plist-get outcome :status) 'error))
        (should (eq seen 'untouched))))))

;;;; Validation, repair and PreToolUse hooks

(ert-deftest mevedel-pipeline:provider-calls-are-repaired-nested-calls-are-not ()
  (mevedel-pipeline-test--with
    (let ((tool (mevedel-pipeline-test--tool "PRepair" :read-only-p t
                                             :function #'mevedel-pipeline-test--echo)))
      ;; A null optional argument is invalid; repair omits it.
      (let ((provider (mevedel-pipeline-test--provider tool '(:text "x" :count :null))))
        (should (string-prefix-p "ran with (:text \"x\")" provider))
        (should (> (length provider) (length "ran with (:text \"x\")"))))
      (let ((nested (mevedel-pipeline-test--run tool '(:text "x" :count :null))))
        (should (eq (plist-get nested :status) 'error))
        (should (= (length (mevedel-pipeline-test--seen 'handler)) 1))))))

(ert-deftest mevedel-pipeline:invalid-arguments-never-run ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PInvalid" :read-only-p t
                                              :function #'mevedel-pipeline-test--echo))
           (outcome (mevedel-pipeline-test--provider tool '(:count "many"))))
      (should (stringp outcome))
      (should-not (mevedel-pipeline-test--seen 'handler)))))

(ert-deftest mevedel-pipeline:hook-rewrite-is-revalidated-not-repaired ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PHook" :read-only-p t
                                              :function #'mevedel-pipeline-test--echo))
           (rewrite nil)
           (mevedel-pipeline-pre-tool-use-functions
            (list (lambda (_ctx) (list :args rewrite :context "hook says hi")))))
      ;; A valid rewrite is what the handler sees.
      (setq rewrite '(:text "rewritten" :count 3))
      (should (eq (plist-get (mevedel-pipeline-test--run tool '(:text "orig")) :status) 'success))
      (should (equal (cadr (car (mevedel-pipeline-test--seen 'handler)))
                     '(:text "rewritten" :count 3)))
      ;; A rewrite that repair could fix (null optional) is refused.
      (setq rewrite '(:text "x" :count :null))
      (let ((outcome (mevedel-pipeline-test--run tool '(:text "orig"))))
        (should (eq (plist-get outcome :status) 'error))
        (should (string-match-p "PreToolUse hook rewrote the arguments invalidly"
                                (plist-get outcome :result))))
      ;; Out of range too.
      (setq rewrite '(:count 99))
      (should (eq (plist-get (mevedel-pipeline-test--run tool nil) :status) 'error))
      (should (= (length (mevedel-pipeline-test--seen 'handler)) 1))
      ;; Hook context reaches the provider's text.
      (setq rewrite '(:text "ok"))
      (should (string-match-p "hook says hi" (mevedel-pipeline-test--provider tool nil))))))

(ert-deftest mevedel-pipeline:hook-deny-and-hook-error ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PHookDeny" :read-only-p t
                                              :function #'mevedel-pipeline-test--echo))
           (mevedel-pipeline-pre-tool-use-functions (list (lambda (_) '(:deny "not today")))))
      (should (string-match-p "not today"
                              (plist-get (mevedel-pipeline-test--run tool nil) :result)))
      (setq mevedel-pipeline-pre-tool-use-functions (list (lambda (_) (error "Hook broke"))))
      (should (string-match-p "Hook broke"
                              (plist-get (mevedel-pipeline-test--run tool nil) :result)))
      (should-not (mevedel-pipeline-test--seen 'handler)))))

(ert-deftest mevedel-pipeline:hooks-may-answer-later ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PHookLater" :read-only-p t
                                              :function #'mevedel-pipeline-test--echo))
           (resume nil) (stopped nil) (order nil)
           (mevedel-pipeline-pre-tool-use-functions
            (list (lambda (_) (push 'first order)
                    (list :await (lambda (answer) (setq resume answer)
                                   (lambda () (setq stopped t)))))
                  (lambda (ctx) (push (list 'second (plist-get ctx :args)) order) nil)))
           (mevedel-pipeline-post-tool-use-functions
            (list (lambda (_ctx _outcome)
                    (list :await (lambda (answer) (funcall answer '(:context "post later")))))))
           (result 'unsettled))
      (mevedel-pipeline-run-tool tool '(:text "orig") (lambda (r) (setq result r)))
      ;; The first hook waits; nothing after it ran.
      (should (eq result 'unsettled))
      (should (equal order '(first)))
      (funcall resume '(:args (:text "later") :context "pre later"))
      ;; The second hook ran with the rewrite, then the handler.
      (should (equal (reverse order) '(first (second (:text "later")))))
      (should (equal (cadr (car (mevedel-pipeline-test--seen 'handler))) '(:text "later")))
      (should (string-match-p "pre later\n\npost later" result))
      ;; A call cancelled while a hook waits stops the hook's work.
      (setq order nil stopped nil)
      (let ((cancel (mevedel-pipeline-run-tool tool nil #'ignore)))
        (funcall cancel)
        (should stopped)
        (funcall resume '(:args (:text "too late")))
        (should-not (cdr order))))))

(ert-deftest mevedel-pipeline:hook-permission-never-overrides-a-refusal ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PHookPerm"
                                              :function #'mevedel-pipeline-test--echo))
           (asked 0)
           (session (mevedel-pipeline-test--asking-session
                     (lambda (_ctx answer) (cl-incf asked) (funcall answer 'approve))))
           (permission nil)
           (mevedel-pipeline-pre-tool-use-functions
            (list (lambda (_) (list :permission permission :permission-reason "hook says so")))))
      ;; allow answers the question the mode would ask.
      (setq permission 'allow)
      (let ((outcome (mevedel-pipeline-test--run tool nil :session session)))
        (should (eq (plist-get outcome :status) 'success))
        (should (= asked 0))
        (should (equal (plist-get (plist-get outcome :render-data) :permission-approvals)
                       '((:source hook :outcome allow-once :reason "hook says so")))))
      ;; ask asks even where the mode allows.
      (setf (mevedel-session-permission-mode session) 'full-auto)
      (setq permission 'ask)
      (should (eq (plist-get (mevedel-pipeline-test--run tool nil :session session) :status)
                  'success))
      (should (= asked 1))
      ;; allow is no match for a deny rule.
      (setq permission 'allow)
      (let ((mevedel-permissions-rules '((deny "PHookPerm"))))
        (should (plist-get (mevedel-pipeline-test--run tool nil :session session) :denied))))))

(ert-deftest mevedel-pipeline:paths-are-normalised ()
  (mevedel-pipeline-test--with
    (let* ((ws (file-name-as-directory (make-temp-file "mevedel-ws" t)))
           (session (mevedel-session-create :workspace ws :ephemeral t))
           (tool (mevedel-pipeline-test--tool "PPath" :read-only-p t
                                              :function #'mevedel-pipeline-test--echo)))
      (unwind-protect
          (progn
            (mevedel-pipeline-test--run tool '(:path "src/a.el") :session session)
            (should (equal (cadr (car (mevedel-pipeline-test--seen 'handler)))
                           (list :path (expand-file-name "src/a.el" ws)))))
        (delete-directory ws t)))))

;;;; Handlers and envelopes

(ert-deftest mevedel-pipeline:handler-signal-is-a-canonical-error ()
  (mevedel-pipeline-test--with
    (let ((sync (mevedel-pipeline-test--tool "PBoom" :read-only-p t
                                             :function (lambda (_) (error "Boom"))))
          (async (mevedel-pipeline-test--tool "PAsyncBoom" :read-only-p t :async-p t
                                              :function (lambda (_cb _args) (error "Async boom")))))
      (let ((o (mevedel-pipeline-test--run sync nil)))
        (should (eq (plist-get o :status) 'error))
        (should (equal (plist-get o :result) "Error: Boom")))
      (let ((o (mevedel-pipeline-test--run async nil)))
        (should (eq (plist-get o :status) 'error))
        (should (equal (plist-get o :result) "Error: Async boom"))))))

(ert-deftest mevedel-pipeline:results-are-classified-at-the-boundary ()
  (mevedel-pipeline-test--with
    (let* ((value nil)
           (tool (mevedel-pipeline-test--tool "PValue" :read-only-p t
                                              :function (lambda (_) value))))
      (cl-flet ((run (v) (setq value v) (mevedel-pipeline-test--run tool nil)))
        (should (eq (plist-get (run "Error: legacy") :status) 'error))
        (should (eq (plist-get (run "fine") :status) 'success))
        (let ((o (run '(:result "no prefix" :status error))))
          (should (eq (plist-get o :status) 'error))
          (should (equal (plist-get o :result) "no prefix")))
        (let ((o (run '(:result "Error: but fine" :status success :render-data (:k 1)))))
          (should (eq (plist-get o :status) 'success))
          (should (equal (plist-get o :render-data) '(:k 1))))
        (should (string-match-p "invalid :status"
                                (plist-get (run '(:result "x" :status maybe)) :result)))
        (should (string-match-p "not a keyword plist"
                                (plist-get (run '(:result "x" :render-data (a 1))) :result)))
        (should (string-match-p "malformed envelope"
                                (plist-get (run '(:result "x" :status)) :result)))
        ;; Non-string results stay as they are, nil included.
        (let ((o (run 42)))
          (should (equal (plist-get o :result) 42))
          (should (eq (plist-get o :status) 'success)))
        (should (null (plist-get (run nil) :result)))
        (setq value nil)
        (should (null (mevedel-pipeline-test--provider tool nil)))
        ;; Text is normalised at the boundary.
        (should (equal (plist-get (run (concat "a" (string #x3fffc3 #x3fffa9))) :result) "aé"))))))

(ert-deftest mevedel-pipeline:async-handler-answers-once ()
  (mevedel-pipeline-test--with
    (let* ((callback nil)
           (tool (mevedel-pipeline-test--tool "PAsync" :read-only-p t :async-p t
                                              :function (lambda (cb _args) (setq callback cb))))
           (outcomes nil))
      (mevedel-pipeline-run-tool-outcome tool nil (lambda (o) (push o outcomes)))
      (should-not outcomes)
      (funcall callback "first")
      (funcall callback "second")
      (should (= (length outcomes) 1))
      (should (equal (plist-get (car outcomes) :result) "first")))))

;;;; Cancellation

(ert-deftest mevedel-pipeline:cancellation-settles-exactly-once ()
  (mevedel-pipeline-test--with
    (let* ((callback nil)
           (tool (mevedel-pipeline-test--tool
                  "PCancel" :read-only-p t :async-p t
                  :function (lambda (cb _args)
                              (mevedel-pipeline-add-canceller
                               (lambda () (mevedel-pipeline-test--note 'stopped)))
                              (setq callback cb))))
           (outcomes nil)
           (events nil)
           (mevedel-pipeline-tool-event-hook (list (lambda (e _) (push e events))))
           (cancel (mevedel-pipeline-run-tool-outcome tool nil (lambda (o) (push o outcomes)))))
      (funcall cancel)
      (funcall cancel)
      (should (= (length outcomes) 1))
      (should (eq (plist-get (car outcomes) :status) 'error))
      (should (string-match-p "cancelled" (plist-get (car outcomes) :result)))
      (should (= (length (mevedel-pipeline-test--seen 'stopped)) 1))
      ;; The handler's late answer is ignored.
      (funcall callback "too late")
      (should (= (length outcomes) 1))
      (should (equal (cl-count 'settled events) 1)))))

(ert-deftest mevedel-pipeline:cancelling-a-pending-question-withdraws-it ()
  (mevedel-pipeline-test--with
    (let* ((answer nil)
           (withdrawn nil)
           (session (mevedel-pipeline-test--asking-session
                     (lambda (_ctx k) (setq answer k) (lambda () (setq withdrawn t)))))
           (tool (mevedel-pipeline-test--tool "PCancelAsk" :function #'mevedel-pipeline-test--echo))
           (outcomes nil)
           (cancel (mevedel-pipeline-run-tool-outcome tool nil (lambda (o) (push o outcomes))
                                                      :session session)))
      (funcall cancel)
      (should withdrawn)
      (funcall answer 'approve)
      (should (= (length outcomes) 1))
      (should-not (mevedel-pipeline-test--seen 'handler)))))

(ert-deftest mevedel-pipeline:settled-call-ignores-cancel ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PDone" :read-only-p t
                                              :function #'mevedel-pipeline-test--echo))
           (outcomes nil)
           (cancel (mevedel-pipeline-run-tool-outcome tool nil (lambda (o) (push o outcomes)))))
      (funcall cancel)
      (should (= (length outcomes) 1))
      (should (eq (plist-get (car outcomes) :status) 'success)))))

;;;; Events

(ert-deftest mevedel-pipeline:event-order-copies-and-failing-observers ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool "PEvents" :read-only-p t
                                              :function #'mevedel-pipeline-test--echo))
           (seen nil)
           (settled-before-callback nil)
           (outcome nil)
           (mevedel-pipeline-tool-event-hook
            (list (lambda (_e info) (plist-put (plist-get info :args) :text "mutated")
                    (error "Observer broke"))
                  (lambda (e info)
                    (push (list e (plist-get info :tool-use-id) (plist-get info :parent-id)
                                (plist-get info :source) (plist-get info :name)
                                (plist-get info :args) (plist-get info :data-buffer))
                          seen)
                    (when (eq e 'settled) (setq settled-before-callback (not outcome)))))))
      (with-temp-buffer
        (mevedel-pipeline-run-tool tool '(:text "orig") (lambda (r) (setq outcome r))
                                   :tool-use-id "id7" :parent-id "p")
        (should (stringp outcome))
        (should settled-before-callback)
        (setq seen (nreverse seen))
        (should (equal (mapcar #'car seen) '(started permission-approved settled)))
        (dolist (entry seen)
          (should (equal (nth 1 entry) "id7"))
          (should (equal (nth 2 entry) "p"))
          (should (eq (nth 3 entry) 'provider))
          (should (equal (nth 4 entry) "PEvents"))
          (should (equal (nth 5 entry) '(:text "orig")))
          (should (eq (nth 6 entry) (current-buffer))))
        (should (= (length (mevedel-pipeline-test--seen 'warning)) 3))))))

(ert-deftest mevedel-pipeline:post-and-failure-hooks ()
  (mevedel-pipeline-test--with
    (let* ((value "ok")
           (tool (mevedel-pipeline-test--tool "PPost" :read-only-p t :function (lambda (_) value)))
           (mevedel-pipeline-post-tool-use-functions
            (list (lambda (_ctx o) (mevedel-pipeline-test--note 'post (plist-get o :status))
                    '(:context "post context"))))
           (mevedel-pipeline-post-tool-use-failure-functions
            (list (lambda (_ctx o) (mevedel-pipeline-test--note 'failure (plist-get o :status))))))
      (should (string-match-p "post context" (mevedel-pipeline-test--provider tool nil)))
      (setq value "Error: bad")
      (mevedel-pipeline-test--run tool nil)
      (should (equal (mevedel-pipeline-test--seen 'post) '((post success))))
      (should (equal (mevedel-pipeline-test--seen 'failure) '((failure error)))))))

;; Issue 42 item 9: a call refused before it ran has no use of the tool
;; to report, so the failure hooks stay quiet; a failing handler still
;; reaches them.
(ert-deftest mevedel-pipeline:early-refusals-skip-failure-hooks ()
  (mevedel-pipeline-test--with
    (let* ((mevedel-pipeline-post-tool-use-failure-functions
            (list (lambda (ctx o) (mevedel-pipeline-test--note
                                   'failure (plist-get ctx :args) (plist-get o :status)))))
           (denied (mevedel-pipeline-test--tool "PEarlyDenied" :function #'mevedel-pipeline-test--echo
                                                :check-permission (lambda (_) 'deny)))
           (failing (mevedel-pipeline-test--tool "PEarlyFails" :read-only-p t
                                                 :function (lambda (_) "Error: broke"))))
      ;; Invalid arguments (count above its maximum, not repaired when nested).
      (should (eq (plist-get (mevedel-pipeline-test--run failing '(:count "many")) :status) 'error))
      ;; A malformed resource address.
      (let ((reader (mevedel-tool-register
                     "PEarlyAddress"
                     (list :category "mevedel-test" :description "A tool for tests."
                           :read-only-p t :function #'mevedel-pipeline-test--echo
                           :args '((file_path path-or-resource :required "A file or address."))))))
        (should (eq (plist-get (mevedel-pipeline-test--run reader '(:file_path "work://a/../b"))
                               :status)
                    'error)))
      ;; A permission denial.
      (should (eq (plist-get (mevedel-pipeline-test--run denied '(:text "x")) :status) 'error))
      (should-not (mevedel-pipeline-test--seen 'failure))
      ;; A handler failure still runs them.
      (mevedel-pipeline-test--run failing '(:text "y"))
      (should (equal (mevedel-pipeline-test--seen 'failure) '((failure (:text "y") error)))))))

;;;; Yielding

(ert-deftest mevedel-pipeline:yields-when-input-is-pending ()
  (mevedel-pipeline-test--with
    (let* ((pending t)
           (mevedel-pipeline-interactive-function #'always)
           (mevedel-pipeline-input-pending-function (lambda () pending))
           (tool (mevedel-pipeline-test--tool "PYield" :read-only-p t
                                              :function #'mevedel-pipeline-test--echo))
           (outcome nil))
      (mevedel-pipeline-run-tool-outcome tool nil (lambda (o) (setq outcome o)))
      ;; The first step ran; the chain then deferred to a timer.
      (should-not outcome)
      (should-not (mevedel-pipeline-test--seen 'handler))
      (setq pending nil)
      (mevedel-test-wait-until outcome 5)
      (should (eq (plist-get outcome :status) 'success))
      (should (= (length (mevedel-pipeline-test--seen 'handler)) 1)))))

(ert-deftest mevedel-pipeline:yields-after-eight-nested-frames ()
  (mevedel-pipeline-test--with
    (let* ((mevedel-pipeline-interactive-function #'always)
           (mevedel-pipeline-input-pending-function #'ignore)
           (mevedel-pipeline-yield-budget 1000)
           (depths nil)
           (tool nil))
      ;; Each call's handler runs the next call nested, answering
      ;; synchronously from inside: frames pile up.
      (setq tool (mevedel-pipeline-test--tool
                  "PNest" :read-only-p t :async-p t
                  :function (lambda (cb args)
                              (push mevedel-pipeline--frames depths)
                              (let ((n (or (plist-get args :count) 0)))
                                (if (>= n 10)
                                    (funcall cb "bottom")
                                  (mevedel-pipeline-run-tool-outcome
                                   tool (list :count (1+ n))
                                   (lambda (o) (funcall cb (plist-get o :result)))))))))
      (let ((outcome nil))
        (mevedel-pipeline-run-tool-outcome tool '(:count 0) (lambda (o) (setq outcome o)))
        (should-not outcome)
        (should (<= (apply #'max depths) mevedel-pipeline-max-frames))
        (mevedel-test-wait-until outcome 5)
        (should (equal (plist-get outcome :result) "bottom"))))))

(ert-deftest mevedel-pipeline:batch-chains-synchronously ()
  (mevedel-pipeline-test--with
    (let* ((mevedel-pipeline-interactive-function (lambda () (not noninteractive)))
           (mevedel-pipeline-input-pending-function #'always)
           (tool (mevedel-pipeline-test--tool "PBatch" :read-only-p t
                                              :function #'mevedel-pipeline-test--echo)))
      (should noninteractive)
      (should (eq (plist-get (mevedel-pipeline-test--run tool nil) :status) 'success)))))

;;;; Render transforms and the side channel

(ert-deftest mevedel-pipeline:render-transform ()
  (mevedel-pipeline-test--with
    (let* ((value "three\nlines\nhere")
           (transform (lambda (_name _args result) (list :lines (length (split-string result "\n")))))
           (tool (mevedel-pipeline-test--tool "PTransform" :read-only-p t
                                              :function (lambda (_) value)
                                              :render-transform (lambda (n a r) (funcall transform n a r)))))
      (should (equal (plist-get (mevedel-pipeline-test--run tool nil) :render-data) '(:lines 3)))
      ;; Not for errors, nor when the handler gave render-data.
      (setq value "Error: x\ny")
      (should-not (plist-get (mevedel-pipeline-test--run tool nil) :render-data))
      (setq value '(:result "a\nb" :render-data (:own t)))
      (should (equal (plist-get (mevedel-pipeline-test--run tool nil) :render-data) '(:own t)))
      ;; Oversized metadata is rejected, errors warn; the result is kept.
      (setq value "plain")
      (setq transform (lambda (_n _a r) (list :copy (make-string 9000 ?x) :r r)))
      (let ((o (mevedel-pipeline-test--run tool nil)))
        (should-not (plist-get o :render-data))
        (should (equal (plist-get o :result) "plain")))
      (setq transform (lambda (&rest _) (error "Transform broke")))
      (let ((o (mevedel-pipeline-test--run tool nil)))
        (should (equal (plist-get o :result) "plain"))
        (should (eq (plist-get o :status) 'success)))
      (should (= (length (mevedel-pipeline-test--seen 'warning)) 2)))))

(ert-deftest mevedel-pipeline:provider-result-carries-bound-render-data ()
  (mevedel-pipeline-test--with
    (let* ((tool (mevedel-pipeline-test--tool
                  "PMeta" :read-only-p t
                  :function (lambda (_) '(:result "visible" :render-data (:exit 0)))))
           (text (mevedel-pipeline-test--provider tool nil :tool-use-id "call-9")))
      (should (string-prefix-p "visible\n<!-- mevedel-render-data -->" text))
      (should (equal (mevedel-render-data-extract text "call-9")
                     '(:tool-use-id "call-9" :status success :exit 0)))
      (should (equal (mevedel-render-data-strip text "call-9") "visible"))
      ;; Nested callers get no projection text.
      (should (equal (plist-get (mevedel-pipeline-test--run tool nil) :result) "visible")))))

;;;; Media and external providers

(ert-deftest mevedel-pipeline:media-rides-on-the-provider-result ()
  (mevedel-pipeline-test--with
    (let* ((png (concat (unibyte-string #x89 ?P ?N ?G ?\r ?\n #x1a ?\n) "rest"))
           (media (list (list :mime "image/png" :data png)))
           (tool (mevedel-pipeline-test--tool
                  "PMedia" :read-only-p t
                  :function (lambda (_) (list :result "one image" :media media))))
           (text (mevedel-pipeline-test--provider tool nil :tool-use-id "toolu_img"))
           (refs (get-text-property 0 'mevedel-tool-media text))
           (outcome (mevedel-pipeline-test--run tool nil)))
      (should (equal (substring-no-properties text) "one image"))
      ;; The text carries a reference, not the bytes; it restores to them.
      (should (equal (plist-get (car refs) :tool-use-id) "toolu_img"))
      (should-not (plist-get (car refs) :data))
      (should (equal (mevedel-tool-media-payloads refs nil)
                     (list (cons "image/png" (base64-encode-string png t)))))
      (should (mevedel-tool-media-reference-p (car (plist-get outcome :media))))
      ;; Bytes that are not the type they claim fail the call.
      (let* ((fake (mevedel-pipeline-test--tool
                    "PFakeMedia" :read-only-p t
                    :function (lambda (_) '(:result "x" :media ((:mime "image/png" :data "GIF89a"))))))
             (outcome (mevedel-pipeline-test--run fake nil)))
        (should (eq (plist-get outcome :status) 'error))
        (should (string-match-p "signature" (plist-get outcome :result))))
      ;; Malformed media is a canonical error at the handler boundary.
      (let* ((bad (mevedel-pipeline-test--tool
                   "PBadMedia" :read-only-p t
                   :function (lambda (_) '(:result "x" :media ((:data "no type"))))))
             (outcome (mevedel-pipeline-test--run bad nil)))
        (should (eq (plist-get outcome :status) 'error))
        (should (string-match-p ":media" (plist-get outcome :result)))))))

(ert-deftest mevedel-pipeline:external-provider-projection ()
  (mevedel-pipeline-test--with
    (mevedel-pipeline-test--with-session session t
      (mevedel-session-ensure-storage session)
      (let* ((png-file (expand-file-name "x.png" (mevedel-session-directory session)))
             (media (list (list :mime "image/png" :path png-file)))
             (big (mevedel-pipeline-test--lines 2000))
             (tool (mevedel-pipeline-test--tool
                    "PExternal" :read-only-p t :max-result-size 5000
                    :function (lambda (args)
                                (list :result (if (plist-get args :text) big "small")
                                      :render-data '(:lines 2000) :media media))))
             (outcome nil))
        (let ((coding-system-for-write 'binary))
          (write-region (unibyte-string #x89 ?P ?N ?G ?\r ?\n #x1a ?\n) nil png-file nil 'silent))
        ;; Raw arguments are repaired (a null optional is dropped), the
        ;; oversized text persisted, the display block left out.
        (mevedel-pipeline-run-tool-outcome
         tool '(:text "x" :count :null) (lambda (o) (setq outcome o))
         :tool-use-id "toolu_mcp" :source 'mcp :session session :projection 'provider)
        (should (eq (plist-get outcome :status) 'success))
        (should (eq (plist-get outcome :projection) 'provider))
        (should (equal (plist-get outcome :tool-use-id) "toolu_mcp"))
        (should (eq (plist-get outcome :source) 'mcp))
        (should (mevedel-tool-media-reference-p (car (plist-get outcome :media))))
        (should (equal (plist-get outcome :render-data) '(:lines 2000)))
        (should (equal (plist-get outcome :result) big))
        (let ((provider (plist-get outcome :provider-result)))
          (should (string-prefix-p "<persisted-output>" provider))
          (should (string-match-p "artifact://tool-results/toolu_mcp\\.txt" provider))
          (should-not (string-match-p "mevedel-render-data" provider))
          (should (equal (get-text-property 0 'mevedel-tool-media provider)
                         (plist-get outcome :media))))
        ;; Without :projection the same raw arguments are not repaired.
        (setq outcome nil)
        (mevedel-pipeline-run-tool-outcome tool '(:text "x" :count :null)
                                           (lambda (o) (setq outcome o)) :session session)
        (should (eq (plist-get outcome :status) 'error))
        (should-not (plist-member outcome :provider-result))))))

;;;; Oversized results

(defun mevedel-pipeline-test--lines (n)
  "Return N numbered lines of text."
  (mapconcat (lambda (i) (format "line %05d of the output" i)) (number-sequence 1 n) "\n"))

(defmacro mevedel-pipeline-test--with-session (var durable &rest body)
  "Run BODY with VAR a session (DURABLE or ephemeral) in a temporary workspace."
  (declare (indent 2))
  `(let* ((ws (file-name-as-directory (make-temp-file "mevedel-ws" t)))
          (,var (mevedel-session-create :workspace ws :ephemeral (not ,durable))))
     (unwind-protect (progn ,@body)
       (mevedel-session-close ,var)
       (delete-directory ws t))))

(ert-deftest mevedel-pipeline:oversized-result-is-persisted-with-preview ()
  (mevedel-pipeline-test--with
    (mevedel-pipeline-test--with-session session t
      ;; The session has stored something before: output may join it.
      (mevedel-session-ensure-storage session)
      (let* ((full (mevedel-pipeline-test--lines 2000))
             (mevedel-pipeline-preview-chars 1000)
             (tool (mevedel-pipeline-test--tool "PBig" :read-only-p t :max-result-size 5000
                                                :function (lambda (_) full)))
             (text (mevedel-pipeline-test--provider tool nil :tool-use-id "toolu_big"
                                                    :session session))
             (file (expand-file-name "toolu_big.txt"
                                     (mevedel-session-tool-results-directory session))))
        (should (string-prefix-p "<persisted-output>\n" text))
        (should (string-suffix-p "</persisted-output>" text))
        (should (string-match-p "artifact://tool-results/toolu_big\\.txt" text))
        ;; The artifact is complete.
        (should (equal (with-temp-buffer (insert-file-contents file) (buffer-string)) full))
        ;; Equal budgets, exact omitted count.
        (let ((plan (mevedel-core-text-preview full 1000)))
          (should (<= (plist-get plan :head-chars) 500))
          (should (<= (plist-get plan :tail-chars) 500))
          (should (string-match-p
                   (format "\\[\\.\\.\\. %d characters omitted (lines %d-%d) \\.\\.\\.\\]"
                           (plist-get plan :omitted-chars)
                           (plist-get plan :omitted-first-line)
                           (plist-get plan :omitted-last-line))
                   text))
          (should (= (+ (plist-get plan :head-chars) (plist-get plan :tail-chars)
                        (plist-get plan :omitted-chars))
                     (length full)))
          ;; The Read continuation starts at the first omitted line.
          (should (string-match
                   "Read {\"file_path\":\"artifact://tool-results/toolu_big.txt\",\"offset\":\\([0-9]+\\),\"limit\":\\([0-9]+\\)}"
                   text))
          (let ((offset (string-to-number (match-string 1 text)))
                (limit (string-to-number (match-string 2 text))))
            (should (= offset (plist-get plan :omitted-first-line)))
            (should (= (+ offset limit -1) (plist-get plan :omitted-last-line)))
            ;; Following it yields exactly the omitted lines.
            (let ((lines (split-string full "\n")))
              (should (string-prefix-p
                       (string-join (seq-subseq lines (1- offset) (+ offset limit -1)) "\n")
                       (concat (substring full (plist-get plan :head-chars)
                                          (- (length full) (plist-get plan :tail-chars)))))))))
        (should (string-match-p "Grep {\"pattern\":\"REGEXP\",\"path\":\"artifact://tool-results/toolu_big.txt\",\"output_mode\":\"content\"}"
                                text))
        ;; Nested callers get the full canonical result.
        (should (equal (plist-get (mevedel-pipeline-test--run tool nil :session session) :result)
                       full))))))

(ert-deftest mevedel-pipeline:persisted-output-continuations-work-with-read-and-grep ()
  ;; The notice's Read and Grep calls, taken verbatim, run through the
  ;; real tools and show the omitted middle.
  (require 'mevedel-tool-fs)
  (mevedel-pipeline-test--with
    (mevedel-pipeline-test--with-session session t
      (mevedel-session-ensure-storage session)
      (with-temp-buffer
        (setq mevedel-session-current session)
        (let* ((full (mevedel-pipeline-test--lines 3000))
               (mevedel-pipeline-preview-chars 1000)
               (tool (mevedel-pipeline-test--tool "PHuge" :read-only-p t :max-result-size 5000
                                                  :function (lambda (_) full)))
               (plan (mevedel-core-text-preview full 1000))
               (text (mevedel-pipeline-test--provider tool nil :tool-use-id "toolu_huge"
                                                      :session session))
               (call-args (lambda (name)
                            (should (string-match (concat name " \\({[^\n]*}\\)") text))
                            (json-parse-string (match-string 1 text) :object-type 'plist)))
               (read-args (funcall call-args "Read"))
               (grep-args (plist-put (funcall call-args "Grep") :pattern "line 01500 "))
               (page nil) (hits nil))
          (should (equal (plist-get read-args :offset) (plist-get plan :omitted-first-line)))
          (mevedel-pipeline-run-tool (mevedel-tool-get "Read" "filesystem") read-args
                                     (lambda (r) (setq page r)))
          (mevedel-test-wait-until page 20)
          ;; The page starts at the first omitted line and shows it numbered.
          (should (string-match-p
                   (format "\\`[ ]*%d\t%s\n"
                           (plist-get plan :omitted-first-line)
                           (format "line %05d of the output" (plist-get plan :omitted-first-line)))
                   page))
          (should (string-match-p "line 01000 of the output" page))
          (mevedel-pipeline-run-tool (mevedel-tool-get "Grep" "filesystem") grep-args
                                     (lambda (r) (setq hits r)))
          (mevedel-test-wait-until hits 20)
          (should (equal hits "artifact://tool-results/toolu_huge.txt:1500:line 01500 of the output\n")))))))

;;;; Kept failure lines

(defun mevedel-pipeline-test--fixture (name)
  "Return the text of the preview fixture NAME under crates/mevedel-core/src/text/fixtures/."
  (with-temp-buffer
    (insert-file-contents (expand-file-name (concat "crates/mevedel-core/src/text/fixtures/" name) mevedel-test-root))
    (buffer-string)))

(defun mevedel-pipeline-test--padded (fixture)
  "Return FIXTURE between 1000 numbered lines on each side."
  (concat (mevedel-pipeline-test--lines 1000) "\n" fixture
          (mevedel-pipeline-test--lines 1000) "\n"))

(ert-deftest mevedel-pipeline:oversized-result-keeps-failure-lines ()
  "A failing ERT run in the omitted middle keeps its failure lines, numbered."
  (mevedel-pipeline-test--with
    (mevedel-pipeline-test--with-session session t
      (mevedel-session-ensure-storage session)
      (let* ((full (mevedel-pipeline-test--padded
                    (mevedel-pipeline-test--fixture "ert-failed.txt")))
             (mevedel-pipeline-preview-chars 2000)
             (tool (mevedel-pipeline-test--tool "PKept" :read-only-p t :max-result-size 5000
                                                :function (lambda (_) full)))
             (text (mevedel-pipeline-test--provider tool nil :tool-use-id "toolu_kept"
                                                    :session session))
             (lines (split-string full "\n"))
             (number (lambda (prefix)
                       (1+ (cl-position-if (lambda (l) (string-prefix-p prefix l)) lines)))))
        (should (string-match-p "Preview (head, the omitted lines that look like failures, tail):"
                                text))
        (should (string-match-p
                 (concat "(lines [0-9]+-[0-9]+) \\.\\.\\.\\]\n"
                         "\\[5 of the omitted lines look like failures:\\]\n"
                         (regexp-quote
                          (format "  L%d: Test demo-adds-wrongly condition:\n"
                                  (funcall number "Test demo-adds-wrongly condition:"))))
                 text))
        (dolist (prefix '("   FAILED  2/3  demo-adds-wrongly" "Test demo-signals condition:"
                          "   FAILED  3/3  demo-signals" "Ran 3 tests, 1 results as expected"))
          (should (string-match-p (regexp-quote (format "  L%d: %s" (funcall number prefix) prefix))
                                  text)))
        (should (string-match-p "^\\[end of kept lines\\]\n" text))
        ;; Head, tail and kept lines share the budget; the counts stay exact.
        (let ((plan (mevedel-core-text-preview full 2000)))
          (should (<= (+ (plist-get plan :head-chars) (plist-get plan :tail-chars)
                         (with-temp-buffer
                           (insert (plist-get plan :kept))
                           (goto-char (point-min))
                           (cl-loop while (re-search-forward "^  L.*\n" nil t)
                                    sum (length (match-string 0)))))
                      2000))
          (should (= (+ (plist-get plan :head-chars) (plist-get plan :tail-chars)
                        (plist-get plan :omitted-chars))
                     (length full))))))))

(ert-deftest mevedel-pipeline:failure-patterns-off-and-invalid ()
  "Nil patterns keep no lines; invalid ones warn once and change nothing."
  (mevedel-pipeline-test--with
    (let* ((full (mevedel-pipeline-test--padded
                  (mevedel-pipeline-test--fixture "python-traceback.txt")))
           (kept (lambda ()
                   (mevedel-pipeline-sync-failure-patterns)
                   (plist-get (mevedel-core-text-preview full 2000) :kept))))
      (unwind-protect
          (progn
            (let ((mevedel-pipeline-failure-patterns nil))
              (should-not (funcall kept)))
            (let ((mevedel-pipeline-failure-patterns '("^Traceback" "bad(")))
              (should-not (funcall kept))
              (funcall kept)
              ;; Reported once, naming the pattern; the previous (nil) stay.
              (should (equal (length (mevedel-pipeline-test--seen 'warning)) 1))
              (should (string-match-p "\"bad(\"" (cadr (car (mevedel-pipeline-test--seen 'warning))))))
            (should (string-match-p "\\[2 of the omitted lines look like failures:\\]"
                                    (funcall kept)))
            ;; Through Customize, an invalid value is an error and is not set.
            (let ((before mevedel-pipeline-failure-patterns))
              (should (string-match-p
                       "\"(\""
                       (cadr (should-error (customize-set-variable
                                            'mevedel-pipeline-failure-patterns '("("))
                                           :type 'mevedel-core-search-error))))
              (should (eq mevedel-pipeline-failure-patterns before))))
        (mevedel-pipeline-sync-failure-patterns)))))

(ert-deftest mevedel-pipeline:oversized-preview-creates-no-storage ()
  "An unsaved session's oversized output is previewed, not saved."
  (mevedel-pipeline-test--with
    (mevedel-pipeline-test--with-session session t
      (let* ((tool (mevedel-pipeline-test--tool
                    "PBigUnsaved" :read-only-p t :max-result-size 5000
                    :function (lambda (_) (mevedel-pipeline-test--lines 2000))))
             (text (mevedel-pipeline-test--provider tool nil :tool-use-id "toolu_unsaved"
                                                    :session session)))
        (should (< (length text) 6000))
        (should-not (string-match-p "artifact://" text))
        (should-not (mevedel-session-storage-p session))
        (should-not (file-exists-p (expand-file-name ".mevedel" ws)))))))

(ert-deftest mevedel-pipeline:confirmed-calls-are-approved-without-a-prompter ()
  "Outside a session, gptel's own confirmation approves a call that asks."
  (mevedel-pipeline-test--with
    (let ((tool (mevedel-pipeline-test--tool "PConfirmed" :function #'mevedel-pipeline-test--echo)))
      (let ((refused (mevedel-pipeline-test--provider tool '(:text "a"))))
        (should (string-match-p "Permission denied: this PConfirmed call needs approval"
                                refused))
        (should (string-match-p "gptel's tool confirmation" refused)))
      (let ((outcome (mevedel-pipeline-test--run tool '(:text "b") :confirmed t)))
        (should (eq (plist-get outcome :status) 'success))
        (should (equal (plist-get (plist-get outcome :render-data) :permission-approvals)
                       '((:source gptel-confirmation :outcome allow-once
                                  :reason "the user confirmed this PConfirmed call in gptel"))))))))

(ert-deftest mevedel-pipeline:oversized-error-is-truncated-not-persisted ()
  (mevedel-pipeline-test--with
    (mevedel-pipeline-test--with-session session t
      (let* ((full (concat "Error: " (mevedel-pipeline-test--lines 2000)))
             (tool (mevedel-pipeline-test--tool "PBigError" :read-only-p t :max-result-size 5000
                                                :function (lambda (_) full)))
             (text (mevedel-pipeline-test--provider tool nil :tool-use-id "toolu_err"
                                                    :session session)))
        (should (< (length text) 5000))
        (should (string-prefix-p "Error: line 00001" text))
        (should (string-match-p "not saved" text))
        (should-not (string-match-p "artifact://" text))
        (should-not (mevedel-session-storage-p session))))))

(ert-deftest mevedel-pipeline:oversized-without-storage-says-unavailable ()
  (mevedel-pipeline-test--with
    (mevedel-pipeline-test--with-session session nil
      (let* ((full (mevedel-pipeline-test--lines 3000))
             (tool (mevedel-pipeline-test--tool "Grep" :read-only-p t :max-result-size 20000
                                                :function (lambda (_) full)))
             (text (mevedel-pipeline-test--provider tool nil :tool-use-id "toolu_e"
                                                    :session session)))
        ;; The declared limit is 20k characters.
        (should (= (mevedel-pipeline-result-limit tool) 20000))
        (should (string-match-p "unavailable" text))
        (should (string-match-p "narrow" text))
        (should-not (string-match-p "artifact://" text))
        (should-not (file-exists-p (expand-file-name ".mevedel" ws)))))))

(ert-deftest mevedel-pipeline:result-limits ()
  (mevedel-pipeline-test--with
    (cl-flet ((limit (name &rest props)
                (mevedel-pipeline-result-limit
                 (apply #'mevedel-pipeline-test--tool name :function #'ignore props))))
      ;; Only the declaration counts: a tool's name gives it no limit.
      (should-not (limit "Bash"))
      (should-not (limit "XrefReferences"))
      (should (= (limit "WebFetch" :max-result-size 50000) 50000))
      (should (= (limit "PCustom" :max-result-size 80000) 50000))
      (should (= (limit "PCustom2" :max-result-size 1234) 1234))
      (should-not (limit "PNoLimit")))))

;; Issue 38: a settled call's telemetry costs the same late in a long
;; session as early.
(ert-deftest mevedel-pipeline:each-telemetry-record-is-saved-once-by-itself ()
  "A record prints only itself; saved records, old chunks too, read back in order."
  (let* ((workspace (make-temp-file "mevedel-telemetry-ws" t))
         (session (mevedel-session-create :workspace workspace))
         (store (mevedel-session-store-handle session))
         (written nil)
         (count (lambda (info)
                  (dolist (entry info)
                    (when (string-prefix-p "tool-telemetry" (car entry))
                      (push (length (car (read-from-string (cdr entry)))) written))))))
    (unwind-protect
        (progn
          ;; What an earlier version saved: a chunk of two.
          (mevedel-core-store-info-set
           store '(("tool-telemetry 0" . "((:at 1 :tool \"Old1\") (:at 2 :tool \"Old2\"))")))
          (advice-add 'mevedel-core-store-info-set :before
                      (lambda (_store info) (funcall count info)) '((name . telemetry-test)))
          (dotimes (i 150)
            (mevedel-pipeline-record-telemetry session (list :tool (format "T%d" i))))
          (should (= (length written) 150))
          (should (equal (delete-dups written) '(1)))
          (mevedel-core-store-flush store)
          (let ((saved (mevedel-pipeline-saved-telemetry (mevedel-core-store-info-get store))))
            (should (equal (mapcar (lambda (r) (plist-get r :tool)) saved)
                           (append '("Old1" "Old2")
                                   (cl-loop for i below 150 collect (format "T%d" i)))))))
      (advice-remove 'mevedel-core-store-info-set 'telemetry-test)
      (mevedel-session-close session)
      (delete-directory workspace t))))

(provide 'pipeline-test)
;;; pipeline-test.el ends here
