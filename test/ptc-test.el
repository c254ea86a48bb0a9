;;; ptc-test.el --- Tests of ToolSearch, ToolCall and the specialist listing  -*- lexical-binding: t; -*-

;;; Commentary:

;; ToolCall programs run against test tools (category "mevedel-test")
;; through the real pipeline: nested ids and source, joins in input
;; order under `mevedel-ptc-parallelism', failures as values, a denial
;; aborting with a partial summary, cancellation settling each nested
;; call once.  Also ToolSearch's answers, the native roster, the
;; specialist listing and the ToolCall renderer.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-ptc)
(require 'mevedel-tool-exec)
(require 'mevedel-tool-fs)
(require 'mevedel-gptel)
(require 'mevedel-tools)
(require 'mevedel)

(defvar mevedel-ptc-test--pending nil
  "Calls of the async test tool waiting to finish: (CALLBACK . ARGS), newest first.")

(defvar mevedel-ptc-test--events nil
  "Pipeline events seen: (EVENT ID SOURCE PARENT), newest first.")

(defun mevedel-ptc-test--tool (name &rest properties)
  "Register the test specialist NAME with PROPERTIES over a default declaration."
  (mevedel-tool-register
   name
   (append properties
           (list :category "mevedel-test"
                 :description (format "%s: a test tool that echoes a file name." name)
                 :args '((file_path string :required "A file."))
                 :read-only-p t))))

(defmacro mevedel-ptc-test--with (&rest body)
  "Run BODY with test tools Echo, Slow (async), Fail, Deny and batch chaining."
  (declare (indent 0))
  `(let ((mevedel-ptc-test--pending nil)
         (mevedel-ptc-test--events nil)
         (mevedel-pipeline-interactive-function #'ignore)
         (mevedel-pipeline-pre-tool-use-functions nil)
         (mevedel-pipeline-post-tool-use-functions nil)
         (mevedel-pipeline-post-tool-use-failure-functions nil)
         (mevedel-pipeline-tool-event-hook
          (list #'mevedel-ptc--observe
                (lambda (event info)
                  (push (list event (plist-get info :tool-use-id) (plist-get info :source)
                              (plist-get info :parent-id))
                        mevedel-ptc-test--events)))))
     (mevedel-ptc-test--tool "Echo" :function (lambda (args) (format "echo %s" (plist-get args :file_path))))
     (mevedel-ptc-test--tool "Slow" :async-p t
                             :function (lambda (callback args)
                                         (push (cons callback args) mevedel-ptc-test--pending)))
     (mevedel-ptc-test--tool "Fail" :function (lambda (_) "Error: no such file"))
     (mevedel-ptc-test--tool "Deny" :check-permission (lambda (_) '(deny . "not here"))
                             :function (lambda (_) "never"))
     (unwind-protect (progn ,@body)
       (dolist (tool (mevedel-tool-all))
         (when (equal (mevedel-tool-category tool) "mevedel-test")
           (mevedel-tool-unregister (mevedel-tool-name tool) "mevedel-test"))))))

(defun mevedel-ptc-test--run (program &optional session)
  "Start the ToolCall PROGRAM as the call \"call_1\", in SESSION if given.
Return (OUTCOME-CELL . CANCEL): the cell's car becomes the outcome."
  (let* ((cell (list nil))
         (cancel (mevedel-pipeline-run-tool-outcome
                  (mevedel-tool-get "ToolCall") (list :program program)
                  (lambda (outcome) (setcar cell outcome))
                  :tool-use-id "call_1" :source 'provider :session session)))
    (cons cell cancel)))

(defun mevedel-ptc-test--outcome (program)
  "Run PROGRAM to its end (it must not wait) and return its outcome."
  (let ((outcome (car (car (mevedel-ptc-test--run program)))))
    (should outcome)
    outcome))

(defun mevedel-ptc-test--children (outcome)
  "Return the audit entries of OUTCOME."
  (plist-get (plist-get outcome :render-data) :ptc-children))

;;;; ToolCall

(ert-deftest mevedel-ptc-test-direct-call ()
  "A direct call returns the tool's result; the child has id ID/1, source ptc."
  (mevedel-ptc-test--with
    (let ((outcome (mevedel-ptc-test--outcome "(Echo :file_path \"a.el\")")))
      (should (eq (plist-get outcome :status) 'success))
      (should (equal (plist-get outcome :result) "echo a.el"))
      (should (equal (plist-get (plist-get outcome :render-data) :ptc-direct) "Echo"))
      (should (member '(settled "call_1/1" ptc "call_1") mevedel-ptc-test--events))
      (should (member '(started "call_1/1" ptc "call_1") mevedel-ptc-test--events)))))

(ert-deftest mevedel-ptc-test-composed-program ()
  "Sequential bindings feed one call's result to the next; the value returns as JSON."
  (mevedel-ptc-test--with
    (let ((outcome (mevedel-ptc-test--outcome
                    "(let [a (Echo :file_path \"x\") b (Echo :file_path a)] [a b (count b)])")))
      (should (equal (plist-get outcome :result) "[\"echo x\",\"echo echo x\",11]"))
      (should (equal (mapcar (lambda (c) (plist-get c :id)) (mevedel-ptc-test--children outcome))
                     '("call_1/1" "call_1/2"))))))

(ert-deftest mevedel-ptc-test-only-a-direct-call-passes-images-on ()
  "A direct call's images are the program's; a composed program's result is text only."
  (mevedel-ptc-test--with
    (let ((png (concat (unibyte-string #x89 ?P ?N ?G ?\r ?\n #x1a ?\n) "pixels")))
      (mevedel-ptc-test--tool "Picture"
                              :function (lambda (_) (list :result "one picture"
                                                          :media (list (list :mime "image/png"
                                                                             :data png)))))
      (let ((direct (mevedel-ptc-test--outcome "(Picture :file_path \"p.png\")"))
            (composed (mevedel-ptc-test--outcome
                       "(let [p (Picture :file_path \"p.png\")] (str p \"!\"))")))
        (should (equal (mevedel-tool-media-payloads (plist-get direct :media) nil)
                       (list (cons "image/png" (base64-encode-string png t)))))
        (should (equal (plist-get (car (plist-get direct :media)) :tool-use-id) "call_1/1"))
        (should (equal (plist-get composed :result) "one picture!"))
        (should-not (plist-get composed :media))))))

(ert-deftest mevedel-ptc-test-a-cut-off-program-settles-from-its-record ()
  "A running program's audit is in the session store; resuming settles it from there."
  (mevedel-ptc-test--with
    (let* ((workspace (make-temp-file "mevedel-ptc-ws" t))
           (session (mevedel-session-create :workspace workspace))
           (store (mevedel-session-store-handle session))
           (key "ptc-envelope:call_1")
           (recorded (lambda ()
                       (mevedel-core-store-flush store)
                       (cdr (assoc key (mevedel-core-store-info-get store))))))
      (unwind-protect
          (progn
            (mevedel-ptc-test--run
             "(let [a (Echo :file_path \"x\") b (Slow :file_path a)] b)" session)
            ;; Echo ran, Slow runs: the record catches up within a second.
            (mevedel-test-wait-until
              (let ((r (funcall recorded)))
                (and r (string-match-p "Slow" r) (string-match-p "echo x" r)))
              3)
            (let* ((text (mevedel-ptc-recovered-result
                          store (mevedel-core-store-info-get store) "call_1" "ToolCall" nil))
                   (data (mevedel-render-data-extract text "call_1"))
                   (children (plist-get data :ptc-children)))
              (should (string-prefix-p "Error: Emacs stopped while this ToolCall program ran; 1 of \
its 2 nested calls had finished (Echo, Slow)" text))
              (should (eq (plist-get data :status) 'error))
              (should (equal (mapcar (lambda (c) (list (plist-get c :tool) (plist-get c :status)))
                                     children)
                             '(("Echo" success) ("Slow" error))))
              ;; The record is consumed; another tool's call is not ToolCall's.
              (should-not (funcall recorded))
              (should-not (mevedel-ptc-recovered-result store nil "call_1" "ToolCall" nil))
              (should-not (mevedel-ptc-recovered-result store `((,key . "x")) "call_1" "Bash" nil)))
            ;; A program that settles leaves no record.
            (mevedel-ptc-test--run "(Slow :file_path \"y\")" session)
            (should (funcall recorded))
            (pcase-dolist (`(,callback . ,_) mevedel-ptc-test--pending)
              (funcall callback "done"))
            (should-not (funcall recorded)))
        (mevedel-session-close session)
        (delete-directory workspace t)))))

;; Issue 42 item 11: every settled call leaves a tool-finished record
;; and a program its ptc-script span, redacted, kept in the session
;; store.
(ert-deftest mevedel-ptc-test-telemetry-is-kept-in-the-session-store ()
  (mevedel-ptc-test--with
    (let* ((workspace (make-temp-file "mevedel-ptc-ws" t))
           (session (mevedel-session-create :workspace workspace))
           (store (mevedel-session-store-handle session))
           (saved (lambda ()
                    (mevedel-core-store-flush store)
                    (mevedel-pipeline-saved-telemetry (mevedel-core-store-info-get store)))))
      (unwind-protect
          (progn
            (should (car (car (mevedel-ptc-test--run
                               "(let [a (Echo :file_path \"secret.el\") b (Fail :file_path a)] [a b])"
                               session))))
            (let ((records (funcall saved)))
              (should (equal (mapcar (lambda (r) (list (plist-get r :event) (plist-get r :tool-use-id)
                                                       (or (plist-get r :status)
                                                           (plist-get r :outcome))))
                                     records)
                             '((tool-finished "call_1/1" success)
                               (tool-finished "call_1/2" error)
                               (ptc-script "call_1" success)
                               (tool-finished "call_1" success))))
              (should (equal (plist-get (nth 2 records) :nested) 2))
              (should (equal (plist-get (nth 0 records) :origin) "/root"))
              (should (equal (plist-get (nth 0 records) :source) 'ptc))
              (should (plist-get (nth 0 records) :executed))
              (should (natnump (plist-get (nth 3 records) :ms)))
              ;; Redacted: no argument, program or result is kept.
              (should-not (string-search "secret" (prin1-to-string records)))
              (should (equal records (mevedel-pipeline-telemetry session))))
            ;; A program stopped by a budget says which.
            (let ((mevedel-ptc-step-budget 50))
              (mevedel-ptc-test--run "(distinct (range 5000))" session))
            (let ((span (car (last (butlast (funcall saved))))))
              (should (equal (list (plist-get span :event) (plist-get span :outcome)
                                   (plist-get span :budget))
                             '(ptc-script error step)))))
        (mevedel-session-close session)
        (delete-directory workspace t)))))

(ert-deftest mevedel-ptc-test-a-narrowed-buffer-calls-only-its-natives ()
  "A child agent's ToolCall reaches its role's native tools and every specialist."
  (mevedel-ptc-test--with
    (with-temp-buffer
      (setq-local mevedel-tool-offered '("Read" "ToolCall" "ToolSearch"))
      (let ((names (car (mevedel-ptc--catalog-names (current-buffer))))
            (whole (car (mevedel-ptc--catalog-names nil))))
        (should (member "Read" names))
        (should (member "Echo" names))
        (should-not (member "Bash" names))
        (should-not (member "ApplyPatch" names))
        (should (member "Bash" whole))
        (should-not (cl-find "Bash" (mevedel-ptc-catalog (current-buffer))
                             :key #'mevedel-tool-name :test #'equal))))))

(ert-deftest mevedel-ptc-test-failures-are-values ()
  "A failed call is a value the program inspects; the row counts the failure."
  (mevedel-ptc-test--with
    (let ((outcome (mevedel-ptc-test--outcome
                    "(let [r (Fail :file_path \"x\")] (if (failed? r) (str \"handled: \" (error-message r)) r))")))
      (should (eq (plist-get outcome :status) 'success))
      (should (equal (plist-get outcome :result) "handled: Error: no such file"))
      (should (eq (plist-get (car (mevedel-ptc-test--children outcome)) :status) 'error))
      (should (eq (plist-get (mevedel-ptc-render "ToolCall" nil (plist-get outcome :result)
                                                 (plist-get outcome :render-data))
                             :status)
                  'warning)))))

(ert-deftest mevedel-ptc-test-static-errors ()
  "Unknown tools, malformed programs and composed standalone tools fail before any call."
  (mevedel-ptc-test--with
    (mevedel-ptc-test--tool "Quiz" :function (lambda (_) "answer") :standalone t)
    (dolist (case '(("(Nope :file_path \"x\")" . "neither an operation")
                    ("(Echo :file_path" . "never closed")
                    ("(do (Quiz :file_path \"q\") (Echo :file_path \"x\"))" . "standalone only")))
      (let ((outcome (mevedel-ptc-test--outcome (car case))))
        (should (eq (plist-get outcome :status) 'error))
        (should (string-match-p "\\`Error: the ToolCall program failed" (plist-get outcome :result)))
        (should (string-match-p (regexp-quote (cdr case)) (plist-get outcome :result)))
        (should-not (mevedel-ptc-test--children outcome))))
    (should (equal (plist-get (mevedel-ptc-test--outcome "(Quiz :file_path \"q\")") :result)
                   "answer"))))

(ert-deftest mevedel-ptc-test-parallel-order-and-cap ()
  "parallel-map keeps input order when calls finish out of order, at most the cap at once."
  (mevedel-ptc-test--with
    (let* ((mevedel-ptc-parallelism 2)
           (run (mevedel-ptc-test--run
                 "(parallel-map [f [\"a\" \"b\" \"c\"]] (Slow :file_path f))"))
           (cell (car run)))
      ;; Two started, the third waits for a slot.
      (should (= (length mevedel-ptc-test--pending) 2))
      ;; The second finishes first.
      (let ((b (cl-find "b" mevedel-ptc-test--pending :key (lambda (p) (plist-get (cdr p) :file_path))
                        :test #'equal)))
        (setq mevedel-ptc-test--pending (delq b mevedel-ptc-test--pending))
        (funcall (car b) "B"))
      (should (= (length mevedel-ptc-test--pending) 2))
      (should-not (car cell))
      (dolist (p (prog1 mevedel-ptc-test--pending (setq mevedel-ptc-test--pending nil)))
        (funcall (car p) (upcase (plist-get (cdr p) :file_path))))
      (let ((outcome (car cell)))
        (should (equal (plist-get outcome :result) "[\"A\",\"B\",\"C\"]"))
        (should (equal (mapcar (lambda (c) (plist-get c :batch)) (mevedel-ptc-test--children outcome))
                       '(1 1 1)))))))

(ert-deftest mevedel-ptc-test-denial-aborts-with-summary ()
  "A denied call mid-program stops it; the result names what ran and later calls never start."
  (mevedel-ptc-test--with
    (let ((outcome (mevedel-ptc-test--outcome
                    "(let [a (Echo :file_path \"one\") b (Fail :file_path \"two\") c (Deny :file_path \"x\")] (Echo :file_path \"never\"))")))
      (should (eq (plist-get outcome :status) 'error))
      (let ((text (plist-get outcome :result)))
        (should (string-match-p "\\`Permission denied: the ToolCall program stopped at call 3 (Deny)" text))
        (should (string-match-p "not here" text))
        (should (string-match-p "Calls completed before it (2)" text))
        (should (string-match-p "- Echo .*: success" text))
        (should (string-match-p "- Fail .*: error" text)))
      (should (= 3 (length (mevedel-ptc-test--children outcome))))
      (should-not (assoc "call_1/4" (mapcar #'cdr mevedel-ptc-test--events))))))

(ert-deftest mevedel-ptc-test-cancellation-settles-each-child-once ()
  "Cancelling the envelope settles every nested call exactly once; late results change nothing."
  (mevedel-ptc-test--with
    (let* ((mevedel-ptc-parallelism 2)
           (run (mevedel-ptc-test--run
                 "(parallel (Slow :file_path \"a\") (Slow :file_path \"b\") (Slow :file_path \"c\"))"))
           (late mevedel-ptc-test--pending))
      (should (= (length late) 2))
      (funcall (cdr run))
      (should (eq (plist-get (car (car run)) :status) 'error))
      (dolist (p late) (funcall (car p) "late"))
      (let ((settled (cl-remove-if-not (lambda (e) (and (eq (car e) 'settled)
                                                        (string-prefix-p "call_1/" (nth 1 e))))
                                       mevedel-ptc-test--events)))
        (should (equal (sort (mapcar #'cadr settled) #'string<) '("call_1/1" "call_1/2"))))
      ;; The queued third call never started.
      (should-not (assoc 'started (cl-remove-if-not (lambda (e) (equal (nth 1 e) "call_1/3"))
                                                    mevedel-ptc-test--events))))))

(ert-deftest mevedel-ptc-test-oversized-child-is-previewed ()
  "A child result over the value budget reaches the program as a preview.
Results are bounded on every path, ToolCall included: the program gets
the <persisted-output> notice instead of failing on its value budget,
and the audit keeps no more than that."
  (mevedel-ptc-test--with
    (mevedel-ptc-test--tool "Big" :function (lambda (_) (make-string 20000 ?x)))
    (let* ((mevedel-ptc-value-budget 5000)
           (outcome (mevedel-ptc-test--outcome
                     "(let [r (Big :file_path \"x\")] (if (failed? r) (error-message r) r))")))
      (should (eq (plist-get outcome :status) 'success))
      (should (string-match-p "<persisted-output>" (plist-get outcome :result)))
      (should (string-match-p "Output too large: 20000 characters" (plist-get outcome :result)))
      (should (< (length (plist-get (car (mevedel-ptc-test--children outcome)) :result)) 5000)))))

(ert-deftest mevedel-ptc-test-a-direct-call-has-its-tools-limits ()
  "A direct call is bounded by its tool's own limit, not the value budget."
  (mevedel-ptc-test--with
    (mevedel-ptc-test--tool "Wide" :max-result-size 5000
                            :function (lambda (_) (make-string 20000 ?w)))
    (let ((outcome (mevedel-ptc-test--outcome "(Wide :file_path \"x\")")))
      (should (eq (plist-get outcome :status) 'success))
      (should (string-match-p "Output too large: 20000 characters" (plist-get outcome :result)))
      (should (< (length (plist-get outcome :result)) 5000)))
    ;; Composed, the same call is a value the program may narrow.
    (let ((outcome (mevedel-ptc-test--outcome
                    "(let [r (Wide :file_path \"x\")] (count r))")))
      (should (equal (plist-get outcome :result) "20000")))))

(ert-deftest mevedel-ptc-test-toolcall-is-bounded-like-a-tool ()
  "What a program returns reaches the model within ToolCall's own limit."
  (mevedel-ptc-test--with
    (mevedel-ptc-test--tool "Big" :function (lambda (_) (make-string 90000 ?b)))
    (let ((box nil))
      (mevedel-pipeline-run-tool (mevedel-tool-get "ToolCall")
                                 (list :program "(let [r (Big :file_path \"x\")] r)")
                                 (lambda (result) (setq box (list result)))
                                 :tool-use-id "call_big")
      (mevedel-test-wait-until box 10)
      (let ((text (mevedel-render-data-strip (car box) "call_big")))
        (should (string-match-p "Output too large: 90000 characters" text))
        (should (<= (length text) (mevedel-pipeline-result-limit
                                   (mevedel-tool-get "ToolCall"))))))))

(ert-deftest mevedel-ptc-test-audit-bounds-arguments-and-render-data ()
  "A child's long argument strings are cut and its large render-data dropped."
  (mevedel-ptc-test--with
    (mevedel-ptc-test--tool "Heavy" :function
                            (lambda (_) (list :result "ok"
                                              :render-data (list :blob (make-string 9000 ?r)))))
    (let* ((outcome (mevedel-ptc-test--outcome
                     "(do (Heavy :file_path (join (map (fn [x] \"p\") (range 500)))) 1)"))
           (child (car (mevedel-ptc-test--children outcome))))
      (should (< (length (plist-get (plist-get child :args) :file_path)) 210))
      (should-not (plist-get child :render-data)))))

(ert-deftest mevedel-ptc-test-live-row-counts-permission-waits ()
  "While a nested call waits for the user, the live row says so; the answer resumes it."
  (mevedel-ptc-test--with
    (mevedel-ptc-test--tool "Asks" :check-permission (lambda (_) 'ask)
                            :function (lambda (args) (format "asked %s" (plist-get args :file_path))))
    (let* ((answers nil)
           (progress nil)
           (session (mevedel-session-create :workspace temporary-file-directory :ephemeral t)))
      (setf (mevedel-session-prompter session)
            (lambda (_context answer) (push answer answers) nil))
      (cl-letf (((symbol-function 'mevedel-chat-of-buffer) (lambda (_) 'chat))
                ((symbol-function 'mevedel-chat-set-progress)
                 (lambda (_chat _id plist) (setq progress plist))))
        (let ((run (mevedel-ptc-test--run
                    "(let [a (Echo :file_path \"x\")] (Asks :file_path a))" session)))
          (should (= 1 (length answers)))
          (should-not (car (car run)))
          (let ((row (mevedel-ptc-render "ToolCall" nil nil progress)))
            (should (string-match-p "running Asks · 1 done, 1 waiting for permission"
                                    (plist-get row :header))))
          (funcall (car answers) 'approve)
          (should (equal (plist-get (car (car run)) :result) "asked echo x"))
          (should-not progress))))))

;;;; ToolSearch

(ert-deftest mevedel-ptc-test-envelope-needs-no-approval ()
  "ToolSearch and ToolCall run without a card in `ask' mode; nested calls decide for themselves."
  (let ((session (mevedel-session-create :workspace temporary-file-directory :ephemeral t)))
    (should (eq (mevedel-permissions-session-mode session) 'ask))
    (dolist (name '("ToolSearch" "ToolCall"))
      (should (eq (mevedel-permissions-decide-call
                   (list :tool (mevedel-tool-get name) :args '(:program "1" :query "x"))
                   session)
                  'allow)))))

(ert-deftest mevedel-ptc-test-tool-search ()
  "Few matches give contracts, more give shapes, none suggests groups; empty is an error."
  (mevedel-ptc-test--with
    (mevedel-ptc-test--tool "Outline" :groups '(code) :summary "Outline of a file's definitions."
                            :function #'ignore)
    (let ((text (mevedel-ptc-tool-search '(:query "outline"))))
      (should (string-match-p "^## Outline" text))
      (should (string-match-p "Calling shape: (Outline :file_path string)" text)))
    (let ((text (mevedel-ptc-tool-search '(:query "test"))))
      (should (string-match-p "tools match" text))
      (should (string-match-p "exact tool names" text)))
    (should (string-match-p "Categories and groups you can search for: .*code"
                            (mevedel-ptc-tool-search '(:query "zzzqqq"))))
    (should (string-prefix-p "Error:" (mevedel-ptc-tool-search '(:query "  "))))))

;; The catalog a data buffer keeps: its index must never answer for
;; a catalog that has changed since it was made.

(defun mevedel-ptc-test--search (query buffer)
  "Return ToolSearch's answer to QUERY through the pipeline, for data BUFFER."
  (let ((cell (list nil)))
    (mevedel-pipeline-run-tool-outcome
     (mevedel-tool-get "ToolSearch") (list :query query)
     (lambda (outcome) (setcar cell outcome))
     :tool-use-id "search_1" :source 'provider :data-buffer buffer)
    (should (car cell))
    (plist-get (car cell) :result)))

(defun mevedel-ptc-test--call-in (program buffer)
  "Return the result of the ToolCall PROGRAM run for data BUFFER."
  (let ((cell (list nil)))
    (mevedel-pipeline-run-tool-outcome
     (mevedel-tool-get "ToolCall") (list :program program)
     (lambda (outcome) (setcar cell outcome))
     :tool-use-id "call_1" :source 'provider :data-buffer buffer)
    (should (car cell))
    (plist-get (car cell) :result)))

(ert-deftest mevedel-ptc-test-kept-catalog-is-never-stale ()
  "A data buffer keeps its ToolSearch index and names, but never past a change.
Registering, redeclaring and unregistering a tool, a visibility change
its owner reports, and another buffer's narrower catalog all show at
once."
  (mevedel-ptc-test--with
    (let* ((hidden nil)
           (hide (lambda (tool _buffer) (not (member (mevedel-tool-name tool) hidden))))
           (declare (lambda (description result)
                      (mevedel-tool-register
                       "Zyzzyva" (list :category "mevedel-test" :description description
                                       :args '((file_path string :required "A file."))
                                       :read-only-p t :function (lambda (_) result)))))
           (found (lambda (text) (string-match-p "^## Zyzzyva" text)))
           (none (lambda (text) (string-prefix-p "No tools match" text))))
      (with-temp-buffer
        (let ((data (current-buffer)))
          (should (funcall none (mevedel-ptc-test--search "zyzzyva" data)))
          ;; Kept: the next search of the same catalog uses the same index.
          (let ((index (mevedel-ptc--search-index data)))
            (should (string-match-p "^## Echo" (mevedel-ptc-test--search "Echo" data)))
            (should (eq index (mevedel-ptc--search-index data))))
          (funcall declare "First words." "z1")
          (let ((text (mevedel-ptc-test--search "zyzzyva" data)))
            (should (funcall found text))
            (should (string-match-p "First words" text)))
          (should (equal (mevedel-ptc-test--call-in "(Zyzzyva :file_path \"x\")" data) "z1"))
          (funcall declare "Second words." "z2")
          (let ((text (mevedel-ptc-test--search "zyzzyva" data)))
            (should (string-match-p "Second words" text))
            (should-not (string-match-p "First words" text)))
          (should (equal (mevedel-ptc-test--call-in "(Zyzzyva :file_path \"x\")" data) "z2"))
          ;; A child's buffer, frozen without it, keeps a catalog of its
          ;; own; searching there leaves this buffer's alone.
          (with-temp-buffer
            (setq-local mevedel-tool-frozen-specialists (make-hash-table :test #'equal))
            (should (funcall none (mevedel-ptc-test--search "zyzzyva" (current-buffer)))))
          (should (funcall found (mevedel-ptc-test--search "zyzzyva" data)))
          ;; A visibility function's owner reports a change of its answer.
          (let ((mevedel-tool-visible-functions (cons hide mevedel-tool-visible-functions)))
            (should (funcall found (mevedel-ptc-test--search "zyzzyva" data)))
            (setq hidden '("Zyzzyva"))
            (mevedel-tool-catalog-changed)
            (should (funcall none (mevedel-ptc-test--search "zyzzyva" data)))
            (should (string-match-p "`Zyzzyva` is neither an operation"
                                    (mevedel-ptc-test--call-in "(Zyzzyva :file_path \"x\")" data))))
          (should (funcall found (mevedel-ptc-test--search "zyzzyva" data)))
          (mevedel-tool-unregister "Zyzzyva" "mevedel-test")
          (should (funcall none (mevedel-ptc-test--search "zyzzyva" data)))
          (should-not (mevedel-tool-by-identity "Zyzzyva"))
          (should (string-match-p "`Zyzzyva` is neither an operation"
                                  (mevedel-ptc-test--call-in "(Zyzzyva :file_path \"x\")" data))))))))

;;;; Catalog and listing

(ert-deftest mevedel-ptc-test-native-roster ()
  "gptel is offered exactly the native roster; execution control is a specialist."
  (let ((names (mapcar #'gptel-tool-name (mevedel-gptel-tools))))
    (dolist (name '("Read" "Bash" "WriteStdin" "Monitor" "Glob" "Grep" "ToolSearch" "ToolCall"))
      (should (member name names)))
    (should-not (member "ListExecutions" names))
    (should-not (member "StopExecution" names)))
  (should (member (mevedel-tool-get "ListExecutions") (mevedel-tool-specialists)))
  (should (member (mevedel-tool-get "StopExecution") (mevedel-tool-specialists)))
  (should-not (member (mevedel-tool-get "Read") (mevedel-tool-specialists))))

(ert-deftest mevedel-ptc-test-listing-budget-and-standalone ()
  "The listing shows shapes and summaries within its budget and counts the rest."
  (mevedel-ptc-test--with
    (mevedel-ptc-test--tool "Quiz" :function #'ignore :standalone t)
    (let* ((tools (list (mevedel-tool-get "Echo") (mevedel-tool-get "Quiz")))
           (full (mevedel-ptc-listing-section tools 10000))
           (cut (mevedel-ptc-listing-section tools 200)))
      (should (string-match-p "^- (Echo :file_path string) - Echo: a test tool" full))
      (should (string-match-p "^- (Quiz :file_path string) - .* \\[standalone only\\]$" full))
      (should (string-match-p "(1 more: find them with ToolSearch.)" cut))
      (should-not (mevedel-ptc-listing-section nil 100)))))

(ert-deftest mevedel-ptc-test-listing-delivered-when-changed ()
  "The listing is mail only when it differs from the last one the transcript holds."
  (mevedel-ptc-test--with
    (mevedel-test-with-view _view chat
      (cl-letf (((symbol-function 'mevedel-chat-context-window) (lambda (_) 100000)))
        (let ((mail (mevedel-ptc-listing-mail chat)))
          (should (= 1 (length mail)))
          (should (string-match-p "(Echo :file_path string)" (car mail)))
          (with-current-buffer (mevedel-chat-data-buffer chat)
            (insert "earlier text\n" (car mail) "\nlater text"))
          (should-not (mevedel-ptc-listing-mail chat))
          ;; Compacted away, the listing is no longer read: it goes again.
          (with-current-buffer (mevedel-chat-data-buffer chat)
            (put-text-property (point-min) (point-max) 'mevedel-compacted t))
          (should (equal (mevedel-ptc-listing-mail chat) mail))
          (with-current-buffer (mevedel-chat-data-buffer chat)
            (goto-char (point-max))
            (insert "\n" (car mail)))
          (should-not (mevedel-ptc-listing-mail chat))
          (mevedel-ptc-test--tool "Extra" :function #'ignore)
          (should (string-match-p "(Extra :file_path string)"
                                  (car (mevedel-ptc-listing-mail chat)))))))))

(ert-deftest mevedel-ptc-test-catalog-follows-the-registry ()
  "The names a program may call are kept between runs, and follow registrations."
  (mevedel-ptc-test--with
    (should (string-match-p "`Later` is neither an operation" (plist-get (mevedel-ptc-test--outcome "(Later :file_path \"x\")")
                                                            :result)))
    (mevedel-ptc-test--tool "Later" :function (lambda (_) "later ran"))
    (should (equal (plist-get (mevedel-ptc-test--outcome "(Later :file_path \"x\")") :result)
                   "later ran"))
    ;; A changed declaration is seen too: Later becomes standalone-only.
    (mevedel-ptc-test--tool "Later" :function (lambda (_) "later ran") :standalone t)
    (should (string-match-p "standalone\\|whole program"
                            (plist-get (mevedel-ptc-test--outcome
                                        "[(Later :file_path \"x\") (Later :file_path \"y\")]")
                                       :result)))
    (mevedel-tool-unregister "Later" "mevedel-test")))

;;;; Rendering

(ert-deftest mevedel-ptc-test-render-direct-and-composed ()
  "A direct call renders as its tool; a composed one lists each child, joins batched."
  (mevedel-ptc-test--with
    (mevedel-ptc-test--tool "Drawn" :function (lambda (_) "drawn result")
                            :renderer (lambda (_name args result _data)
                                        (list :header (format "Drawn %s" (plist-get args :file_path))
                                              :body result :expandable-p t)))
    (let* ((outcome (mevedel-ptc-test--outcome "(Drawn :file_path \"x.el\")"))
           (row (mevedel-ptc-render "ToolCall" nil (plist-get outcome :result)
                                    (plist-get outcome :render-data))))
      (should (equal (plist-get row :header) "Drawn x.el")))
    (let* ((outcome (mevedel-ptc-test--outcome
                     "(parallel-map [f [\"a\" \"b\" \"c\"]] (Drawn :file_path f))"))
           (row (mevedel-ptc-render "ToolCall" nil (plist-get outcome :result)
                                    (plist-get outcome :render-data)))
           (children (plist-get row :child-calls)))
      (should (equal (plist-get row :header) "Ran 3 calls: Drawn ×3"))
      (should (equal (mapcar #'car children) '("Drawn" "Drawn" "Drawn")))
      (should (equal (mapcar (lambda (c) (nth 4 c)) children) '(1 1 1)))
      (should (equal (mapcar (lambda (c) (nth 5 c)) children)
                     '("call_1/1" "call_1/2" "call_1/3"))))))

;;;; The tools surface

(ert-deftest mevedel-ptc-test-tools-surface ()
  "/tools lists native and discoverable tools; RET shows a contract; s searches."
  (mevedel-ptc-test--with
    (let ((buffer (mevedel-tools-slash nil "list")))
      (unwind-protect
          (with-current-buffer buffer
            (should (derived-mode-p 'mevedel-tools-mode))
            (goto-char (point-min))
            (should (search-forward "Native (offered" nil t))
            (should (search-forward "(Read " nil t))
            (should (search-forward "Discoverable" nil t))
            (should (search-forward "(Echo :file_path string)" nil t))
            (mevedel-tools-toggle-contract)
            (should (save-excursion (search-forward "Calling shape: (Echo :file_path string)" nil t)))
            (mevedel-tools-toggle-contract)
            (should-not (save-excursion (search-forward "Calling shape: (Echo" nil t)))
            (mevedel-tools-search "echo")
            (should (save-excursion (search-forward "Search: echo\n## Echo" nil t))))
        (kill-buffer buffer)))
    (should-error (mevedel-tools-slash nil "bogus") :type 'user-error)))

(ert-deftest mevedel-ptc-test-view-brackets-joins ()
  "Child rows of one join share a gutter; sequential children get none."
  (let* ((mevedel-view--expanded (make-hash-table :test #'equal))
         (rows (mevedel-view--child-rows
               "c1" '(("Echo" (:file_path "a") "A" nil 1 "c1/1")
                      ("Echo" (:file_path "b") "B" nil 1 "c1/2")
                      ("Echo" (:file_path "c") "C" nil 1 "c1/3")
                      ("Echo" (:file_path "d") "D" nil nil "c1/4")))))
    (should (string-match-p "^    ┌ .*Echo a" rows))
    (should (string-match-p "^    │ .*Echo b" rows))
    (should (string-match-p "^    └ .*Echo c" rows))
    (should (string-match-p "^    [^┌│└ ].*Echo d" rows))))

(provide 'ptc-test)
;;; ptc-test.el ends here
