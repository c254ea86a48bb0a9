;;; tool-repair-test.el --- Tests of validation, repair and the repair log  -*- lexical-binding: t; -*-

;;; Commentary:

;; Every repair rule with positive and negative cases, checked from Lisp
;; through the module (conversion included); atomicity; repair turned
;; off; provider calls through the pipeline (nothing runs on invalid
;; input, notes on ok and error results); the redacted, bounded session
;; log and its persistence to <session>/repair-log.el.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-repair)
(require 'mevedel)
(require 'mevedel-pipeline)

(defvar mevedel-tool-repair-test--ran nil
  "Argument plists the test handler was called with.")

(defun mevedel-tool-repair-test--tool (&optional function async)
  "Register and return the Grep-shaped test tool.
FUNCTION is its handler (default: record the arguments); ASYNC says
whether it takes a callback."
  (mevedel-tool-register
   "RGrep"
   (list :description "Search file contents. Long text."
         :category "mevedel-repair-test"
         :read-only-p t
         :async-p async
         :function (or function
                       (lambda (args) (push args mevedel-tool-repair-test--ran) "matches"))
         :args '((pattern string :required "Regex.")
                 (path path :optional "Where.")
                 (glob string :optional "Glob.")
                 (source path-or-resource :optional "Source.")
                 (output_mode string :optional "Mode." :enum ("content" "count"))
                 (-i boolean :optional "Case.")
                 (head_limit integer :optional "Limit." :minimum 0 :maximum 1000)
                 (paths array :optional "Paths." :items path)
                 (globs array :optional "Globs." :items string :minItems 1)
                 (files array :required "Files." :items string)
                 (opts object :optional "Options."
                       :properties (label string context integer) :required (label))))))

(defmacro mevedel-tool-repair-test--with-tool (var &rest body)
  "Bind VAR to a fresh test tool around BODY; clean up afterwards."
  (declare (indent 1))
  `(let ((,var (mevedel-tool-repair-test--tool))
         (mevedel-tool-repair-test--ran nil)
         (mevedel-tool-repair-enabled t))
     (unwind-protect (progn ,@body)
       (mevedel-tool-unregister "RGrep" "mevedel-repair-test"))))

(defun mevedel-tool-repair-test--check (tool args)
  "Check model-produced ARGS for TOOL."
  (mevedel-tool-repair-check tool (append '(:files ["a"]) args) t))

(defun mevedel-tool-repair-test--canon (value)
  "Return VALUE with object keys sorted, to compare regardless of order."
  (cond ((mevedel-tool-repair-json-empty-object-p value) :empty-object)
        ((vectorp value) (cl-map 'vector #'mevedel-tool-repair-test--canon value))
        ((and (consp value) (keywordp (car value)))
         (let ((pairs (cl-loop for (k v) on value by #'cddr
                               collect (cons k (mevedel-tool-repair-test--canon v)))))
           (sort pairs (lambda (a b) (string< (car a) (car b))))))
        (t value)))

(defun mevedel-tool-repair-test--repaired (tool args expected rules)
  "Assert ARGS for TOOL repair to EXPECTED via rule numbers RULES; return the check."
  (let ((check (mevedel-tool-repair-test--check tool args)))
    (should (eq (plist-get check :outcome) 'repaired))
    (should (equal (mevedel-tool-repair-test--canon (plist-get check :args))
                   (mevedel-tool-repair-test--canon (append '(:files ["a"]) expected))))
    (should (equal (mapcar #'car (plist-get check :audit)) rules))
    check))

(defun mevedel-tool-repair-test--invalid (tool args paths)
  "Assert ARGS for TOOL stay invalid with issues at PATHS (sorted)."
  (let ((check (mevedel-tool-repair-test--check tool args)))
    (should (eq (plist-get check :outcome) 'invalid))
    (should (equal (sort (mapcar #'car (plist-get check :issues)) #'string<) paths))
    check))

;;;; Validation and the rules

(ert-deftest mevedel-tool-repair:valid-input-is-never-rewritten ()
  (mevedel-tool-repair-test--with-tool tool
    (dolist (args '((:pattern "defun" :path "src" :output_mode "content" :-i t :head_limit 10)
                    (:pattern "10" :glob "[a](http://a)" :source "x/[b.el](http://b.el)")
                    (:pattern "x" :-i :json-false :paths [])))
      (let ((check (mevedel-tool-repair-test--check tool args)))
        (should (eq (plist-get check :outcome) 'valid))
        (should (equal (plist-get check :args) (append '(:files ["a"]) args)))))))

(ert-deftest mevedel-tool-repair:rule1-omit-null-optional-only ()
  (mevedel-tool-repair-test--with-tool tool
    (let ((check (mevedel-tool-repair-test--repaired
                  tool '(:pattern "x" :path :null) '(:pattern "x") '(1))))
      (should (string-match-p "dropped null optional `path`"
                              (plist-get check :note))))
    (mevedel-tool-repair-test--repaired
     tool `(:pattern "x" :opts (:label "l" :context :null)) '(:pattern "x" :opts (:label "l")) '(1))
    ;; Required null is never filled in.
    (mevedel-tool-repair-test--invalid tool '(:pattern :null) '("/pattern"))
    (mevedel-tool-repair-test--invalid tool '(:pattern "x" :opts (:label :null)) '("/opts/label"))))

(ert-deftest mevedel-tool-repair:rule2-exact-json-strings ()
  (mevedel-tool-repair-test--with-tool tool
    (mevedel-tool-repair-test--repaired
     tool '(:pattern "x" :head_limit "10") '(:pattern "x" :head_limit 10) '(2))
    (mevedel-tool-repair-test--repaired
     tool '(:pattern "x" :-i "false") '(:pattern "x" :-i :json-false) '(2))
    (mevedel-tool-repair-test--repaired
     tool '(:pattern "x" :paths "[\"a\"]") '(:pattern "x" :paths ["a"]) '(2))
    (dolist (bad '("ten" " 10" "10px" "1.5" ""))
      (mevedel-tool-repair-test--invalid tool `(:pattern "x" :head_limit ,bad) '("/head_limit")))
    (mevedel-tool-repair-test--invalid tool '(:pattern "x" :-i "yes") '("/-i"))))

(ert-deftest mevedel-tool-repair:rule3-wrap-valid-singleton-only ()
  (mevedel-tool-repair-test--with-tool tool
    (mevedel-tool-repair-test--repaired
     tool '(:pattern "x" :paths "src") '(:pattern "x" :paths ["src"]) '(3))
    (mevedel-tool-repair-test--invalid tool '(:pattern "x" :paths 5) '("/paths"))
    (mevedel-tool-repair-test--invalid tool '(:pattern "x" :paths :json-false) '("/paths"))))

(ert-deftest mevedel-tool-repair:rule4-empty-object-only-for-optional-zero-item-arrays ()
  (mevedel-tool-repair-test--with-tool tool
    (let ((check (mevedel-tool-repair-test--repaired
                  tool `(:pattern "x" :paths ,(mevedel-tool-repair-json-empty-object))
                  '(:pattern "x" :paths []) '(4))))
      (should (eq (nth 4 (car (plist-get check :audit))) 'empty-object))
      (should (eq (nth 5 (car (plist-get check :audit))) 'empty-array)))
    ;; :minItems 1 forbids the empty array.
    (mevedel-tool-repair-test--invalid
     tool `(:pattern "x" :globs ,(mevedel-tool-repair-json-empty-object)) '("/globs"))
    ;; A required array's placeholder stays invalid.
    (let ((check (mevedel-tool-repair-check
                  tool `(:pattern "x" :files ,(mevedel-tool-repair-json-empty-object)) t)))
      (should (eq (plist-get check :outcome) 'invalid))
      (should (equal (mapcar #'car (plist-get check :issues)) '("/files"))))))

(ert-deftest mevedel-tool-repair:rule5-autolink-only-in-final-component-of-path ()
  (mevedel-tool-repair-test--with-tool tool
    (mevedel-tool-repair-test--repaired
     tool '(:pattern "x" :path "lisp/[foo.el](http://foo.el)") '(:pattern "x" :path "lisp/foo.el") '(5))
    (mevedel-tool-repair-test--repaired
     tool '(:pattern "x" :paths ["[a.md](https://a.md)"]) '(:pattern "x" :paths ["a.md"]) '(5))
    ;; string and path-or-resource arguments, and earlier components: untouched.
    (dolist (args '((:pattern "x" :glob "lisp/[foo.el](http://foo.el)")
                    (:pattern "x" :source "lisp/[foo.el](http://foo.el)")
                    (:pattern "x" :path "[lisp](http://lisp)/foo.el")))
      (should (eq (plist-get (mevedel-tool-repair-test--check tool args) :outcome) 'valid)))))

(ert-deftest mevedel-tool-repair:rule6-clamp-reports-before-and-after ()
  (mevedel-tool-repair-test--with-tool tool
    (let ((check (mevedel-tool-repair-test--repaired
                  tool '(:pattern "x" :head_limit 5000) '(:pattern "x" :head_limit 1000) '(6))))
      (should (string-match-p "clamped `head_limit` from 5000 to the maximum 1000"
                              (plist-get check :note))))
    (mevedel-tool-repair-test--repaired
     tool '(:pattern "x" :head_limit "-4") '(:pattern "x" :head_limit 0) '(2 6))))

(ert-deftest mevedel-tool-repair:three-rule-repair ()
  (mevedel-tool-repair-test--with-tool tool
    (mevedel-tool-repair-test--repaired
     tool '(:pattern "defun" :path :null :head_limit "10" :-i "true")
     '(:pattern "defun" :-i t :head_limit 10) '(1 2 2))))

(ert-deftest mevedel-tool-repair:atomic-one-unrepairable-issue-runs-nothing ()
  (mevedel-tool-repair-test--with-tool tool
    (let ((check (mevedel-tool-repair-test--check tool '(:pattern "x" :head_limit "10" :bogus 1)))
          (result nil))
      (should (eq (plist-get check :outcome) 'abandoned))
      (should (equal (mapcar #'car (plist-get check :issues)) '("/head_limit" "/bogus")))
      (should-not (plist-get check :args))
      (let ((guidance (plist-get check :guidance)))
        (should (string-match-p "- head_limit: expected integer, got string" guidance))
        (should (string-match-p "- bogus: is not an accepted argument" guidance))
        (should (string-match-p "nothing was run" guidance)))
      ;; Through the pipeline: the handler never runs.
      (mevedel-pipeline-run-tool tool '(:files ["a"] :pattern "x" :head_limit "10" :bogus 1)
                                    (lambda (r) (setq result r)))
      (should (null mevedel-tool-repair-test--ran))
      (should (string-prefix-p "Invalid arguments for RGrep" result)))))

(ert-deftest mevedel-tool-repair:guidance-is-bounded-and-value-free ()
  (mevedel-tool-repair-test--with-tool tool
    (let* ((args (list :path "SECRET-PATH" :head_limit "SECRET-TEN"))
           (args (append args (cl-loop for i below 12
                                       append (list (intern (format ":bogus%d" i)) "SECRET"))))
           (check (mevedel-tool-repair-check tool args t))
           (guidance (plist-get check :guidance)))
      (should (eq (plist-get check :outcome) 'invalid))
      (should-not (string-match-p "SECRET" guidance))
      (should (= 8 (cl-count-if (lambda (l) (string-match-p "\\`- [^.]" l))
                                (split-string guidance "\n"))))
      (should (string-match-p "- \\.\\.\\. and [0-9]+ more" guidance)))))

(ert-deftest mevedel-tool-repair:disabled-repair-validates-without-mutating ()
  (mevedel-tool-repair-test--with-tool tool
    (let ((mevedel-tool-repair-enabled nil))
      (mevedel-tool-repair-test--invalid tool '(:pattern "x" :head_limit "10") '("/head_limit")))
    ;; Programmatic (not model-produced) calls are validation-only too.
    (should (eq (plist-get (mevedel-tool-repair-check tool '(:files ["a"] :pattern "x" :path :null))
                           :outcome)
                'invalid))))

(ert-deftest mevedel-tool-repair:json-values-stay-distinct-across-the-boundary ()
  (mevedel-tool-repair-test--with-tool tool
    (let* ((args `(:files ["a"] :pattern "x" :paths ,(mevedel-tool-repair-json-empty-object)
                          :-i :json-false :globs :null))
           (json (mevedel-tool-repair-json-encode args)))
      (should (equal json "{\"files\":[\"a\"],\"pattern\":\"x\",\"paths\":{},\"-i\":false,\"globs\":null}"))
      (let ((decoded (mevedel-tool-repair-json-decode json)))
        (should (mevedel-tool-repair-json-empty-object-p (plist-get decoded :paths)))
        (should (eq (plist-get decoded :-i) :json-false))
        (should (eq (plist-get decoded :globs) :null))
        (should (equal (mevedel-tool-repair-json-encode decoded) json)))
      (should (equal (mevedel-tool-repair-handler-args `(:a :json-false :b ,(mevedel-tool-repair-json-empty-object)
                                                            :c [t :json-false]))
                     '(:a nil :b nil :c [t nil])))
      (should-error (mevedel-tool-repair-json-encode '(:a some-symbol)) :type 'mevedel-tool-error))))

;;;; Dispatch and notes

(ert-deftest mevedel-tool-repair:note-on-ok-and-error-results ()
  (mevedel-tool-repair-test--with-tool tool
    (let ((result nil))
      (mevedel-pipeline-run-tool tool '(:files ["a"] :pattern "x" :head_limit "7")
                                    (lambda (r) (setq result r)))
      (should (equal (mevedel-tool-repair-test--canon (car mevedel-tool-repair-test--ran))
                     (mevedel-tool-repair-test--canon '(:files ["a"] :head_limit 7 :pattern "x"))))
      (should (string-prefix-p "matches\n\n[Note: RGrep arguments repaired before running"
                               result)))
    (let ((failing (mevedel-tool-repair-test--tool (lambda (_) (error "Disk on fire"))))
          (result nil))
      (mevedel-pipeline-run-tool failing '(:files ["a"] :pattern "x" :path :null)
                                    (lambda (r) (setq result r)))
      (should (string-prefix-p "Error: Disk on fire\n\n[Note:" result)))
    (let ((async (mevedel-tool-repair-test--tool (lambda (cb args) (funcall cb (format "%S" args))) t))
          (result nil))
      (mevedel-pipeline-run-tool async '(:files ["a"] :pattern "x" :-i "true")
                                    (lambda (r) (setq result r)))
      (should (string-match "\\`\\((.*)\\)\n\n\\[Note:" result))
      (should (equal (mevedel-tool-repair-test--canon
                      (car (read-from-string (match-string 1 result))))
                     (mevedel-tool-repair-test--canon '(:-i t :files ["a"] :pattern "x")))))
    ;; A valid call gets no note.
    (let ((result nil))
      (mevedel-pipeline-run-tool (mevedel-tool-repair-test--tool)
                                    '(:files ["a"] :pattern "x") (lambda (r) (setq result r)))
      (should (equal result "matches")))))

;;;; The repair log

(defmacro mevedel-tool-repair-test--with-session (var &rest body)
  "Run BODY with VAR bound to a fresh session object used for logging."
  (declare (indent 1))
  `(let* ((,var (make-symbol "session"))
          (mevedel-tool-repair-session-function (lambda () ,var)))
     (unwind-protect (progn ,@body)
       (mevedel-tool-repair-log-forget ,var))))

(ert-deftest mevedel-tool-repair:log-is-redacted-and-skips-valid-calls ()
  (mevedel-tool-repair-test--with-tool tool
    (mevedel-tool-repair-test--with-session session
      (let ((mevedel-tool-repair-origin "/root/explorer")
            (mevedel-tool-repair-gptel-context '(:backend "ChatGPT" :model "gpt-4o")))
        (dolist (args '((:files ["a"] :pattern "SECRET-valid")
                        (:files ["a"] :pattern "SECRET-1" :head_limit "10" :path :null)
                        (:files ["a"] :pattern "SECRET-2" :head_limit "SECRET-ten")
                        (:files ["a"] :pattern "SECRET-3" :head_limit "10" :bogus "SECRET-4")))
          (mevedel-pipeline-run-tool tool args #'ignore)))
      (let ((log (mevedel-tool-repair-session-log session)))
        (should (equal (mapcar (lambda (e) (plist-get e :outcome)) log)
                       '(repaired invalid abandoned)))
        (should-not (string-match-p "SECRET" (prin1-to-string log)))
        (let ((repaired (car log)))
          (should (equal (plist-get repaired :backend) "ChatGPT"))
          (should (equal (plist-get repaired :model) "gpt-4o"))
          (should (equal (plist-get repaired :tool) "RGrep"))
          (should (equal (plist-get repaired :origin) "/root/explorer"))
          (should (equal (plist-get repaired :rules) '(omit-null parse-json-string)))
          (should (equal (plist-get repaired :schema-paths)
                         '("/properties/path" "/properties/head_limit/type")))
          (should (equal (plist-get repaired :shapes) '((null . absent) (string . integer))))
          (should (eq (plist-get repaired :executed) t))
          (should (eq (plist-get repaired :result) 'ok)))
        (should (eq (plist-get (nth 1 log) :executed) nil))
        (should (eq (plist-get (nth 2 log) :result) 'refused))))))

(ert-deftest mevedel-tool-repair:log-is-bounded ()
  (mevedel-tool-repair-test--with-session session
    (let ((mevedel-tool-repair-log-limit 5))
      (dotimes (i 12)
        (mevedel-tool-repair-record (list :outcome 'invalid :n i)))
      (should (equal (mapcar (lambda (e) (plist-get e :n))
                             (mevedel-tool-repair-session-log session))
                     '(7 8 9 10 11))))))

(ert-deftest mevedel-tool-repair:log-persists-with-backfill-and-retry ()
  (mevedel-tool-repair-test--with-session session
    (let* ((root (make-temp-file "mevedel-session" t))
           (dir (expand-file-name "session-1" root))
           (mevedel-tool-repair-persist-log t)
           (warnings nil))
      (unwind-protect
          (cl-letf (((symbol-function 'display-warning)
                     (lambda (_type message &rest _) (push message warnings))))
            ;; Before the session has a directory: kept, not written.
            (mevedel-tool-repair-record '(:outcome invalid :tool "Ünïcode" :n 1))
            (mevedel-tool-repair-record '(:outcome repaired :n 2))
            ;; The directory is named but does not exist yet: the append
            ;; fails, warns, and keeps the events queued.
            (mevedel-tool-repair-record '(:outcome invalid :n 3) session dir)
            (should (= 1 (length warnings)))
            (should (string-match-p "will retry" (car warnings)))
            (should-not (file-exists-p (expand-file-name "repair-log.el" dir)))
            ;; Once it exists, the next event backfills the queue.
            (make-directory dir)
            (mevedel-tool-repair-record '(:outcome repaired :n 4) session dir)
            (should (equal (mapcar (lambda (e) (plist-get e :n))
                                   (mevedel-tool-repair-read-log-file dir))
                           '(1 2 3 4)))
            ;; Later events are appended without rereading.
            (mevedel-tool-repair-record '(:outcome abandoned :n 5))
            (should (equal (mapcar (lambda (e) (plist-get e :n))
                                   (mevedel-tool-repair-read-log-file dir))
                           '(1 2 3 4 5)))
            (should (equal (plist-get (car (mevedel-tool-repair-read-log-file dir)) :tool)
                           "Ünïcode"))
            ;; A torn final line (a crash mid-append) is skipped when read.
            (write-region "(:outcome inval" nil (expand-file-name "repair-log.el" dir) 'append 'silent)
            (should (= 5 (length (mevedel-tool-repair-read-log-file dir))))
            ;; Telemetry failures never signal.
            (let ((mevedel-tool-repair-session-function (lambda () (error "No session"))))
              (mevedel-tool-repair-record '(:outcome invalid)))
            (should (string-match-p "No session" (car warnings))))
        (delete-directory root t)))))

(ert-deftest mevedel-tool-repair:log-not-persisted-when-disabled ()
  (mevedel-tool-repair-test--with-session session
    (let ((dir (make-temp-file "mevedel-session" t))
          (mevedel-tool-repair-persist-log nil))
      (unwind-protect
          (progn
            (mevedel-tool-repair-record '(:outcome invalid) session dir)
            (should-not (file-exists-p (expand-file-name "repair-log.el" dir)))
            (should (= 1 (length (mevedel-tool-repair-session-log session)))))
        (delete-directory dir t)))))

;; The pipeline passes a session with storage its directory: a repaired
;; call of a durable session lands in <session>/repair-log.el.
(ert-deftest mevedel-tool-repair:a-durable-session-persists-its-log ()
  (mevedel-tool-repair-test--with-tool tool
    (let* ((workspace (make-temp-file "mevedel-repair-ws" t))
           (session (mevedel-session-create :workspace workspace))
           (mevedel-tool-repair-persist-log t))
      (unwind-protect
          (progn
            ;; No storage yet: the event waits in memory.
            (mevedel-pipeline-run-tool tool '(:files ["a"] :pattern "x" :head_limit "10")
                                       #'ignore :session session)
            (should (mevedel-tool-repair-session-log session))
            (let ((dir (mevedel-session-ensure-storage session)))
              ;; Written as the storage is made.
              (should (= 1 (length (mevedel-tool-repair-read-log-file dir))))
              (mevedel-pipeline-run-tool tool '(:files ["a"] :pattern "y" :path :null)
                                         #'ignore :session session)
              (should (equal (mapcar (lambda (e) (plist-get e :outcome))
                                     (mevedel-tool-repair-read-log-file dir))
                             '(repaired repaired)))))
        (mevedel-tool-repair-log-forget session)
        (mevedel-session-close session)
        (delete-directory workspace t)))))

;; Issue 42 item 11: in a real chat the log is written by default, as
;; soon as the session has storage, naming the calling agent's path.
(ert-deftest mevedel-tool-repair:a-chat-logs-its-agents-calls-by-default ()
  (mevedel-tool-repair-test--with-tool tool
    (let* ((root (file-name-as-directory (make-temp-file "mevedel-repair-chat-" t)))
           (mevedel-save-sessions nil)
           (view (mevedel root))
           (chat (mevedel-view-chat view))
           (session (mevedel-chat-session chat))
           (child (generate-new-buffer " *child-data*")))
      (unwind-protect
          (progn
            (with-current-buffer child
              (setq-local mevedel-session-current session)
              (setq-local mevedel-tool-repair-origin "/root/explorer"))
            (should (equal (buffer-local-value 'mevedel-tool-repair-origin
                                               (mevedel-chat-data-buffer chat))
                           "/root"))
            (mevedel-pipeline-run-tool tool '(:files ["a"] :pattern "x" :head_limit "10")
                                       #'ignore :session session :data-buffer child)
            (mevedel-pipeline-run-tool tool '(:files ["a"] :pattern "y" :head_limit "10")
                                       #'ignore :session session
                                       :data-buffer (mevedel-chat-data-buffer chat))
            ;; Making the storage writes what waited, with no further event.
            (let ((dir (mevedel-session-ensure-storage session)))
              (should (equal (mapcar (lambda (e) (plist-get e :origin))
                                     (mevedel-tool-repair-read-log-file dir))
                             '("/root/explorer" "/root")))))
        (kill-buffer child)
        (mevedel-tool-repair-log-forget session)
        (kill-buffer view)
        (kill-buffer (mevedel-chat-data-buffer chat))
        (delete-directory root t)))))

(provide 'tool-repair-test)
;;; tool-repair-test.el ends here
