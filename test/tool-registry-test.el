;;; tool-registry-test.el --- Tests of mevedel-define-tool and the registry  -*- lexical-binding: t; -*-

;;; Commentary:

;; The macro's expansion-time checks, summaries, replacement on
;; re-registration, provider-schema lowering through the module for
;; every DSL type, per-request schema copies, and ToolSearch.  The gptel
;; tools made for registered tools are tested in test/gptel-test.el.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-repair)
(require 'mevedel-gptel)
(require 'mevedel-catalog)

(defconst mevedel-tool-registry-test--category "mevedel-registry-test")

(defmacro mevedel-tool-registry-test--with-clean (&rest body)
  "Run BODY, then drop every tool of the test category."
  (declare (indent 0))
  `(unwind-protect (progn ,@body)
     (dolist (tool (mevedel-tool-all))
       (when (equal (mevedel-tool-category tool) mevedel-tool-registry-test--category)
         (mevedel-tool-unregister (mevedel-tool-name tool) mevedel-tool-registry-test--category)))))

(defun mevedel-tool-registry-test--expansion-error (form)
  "Return the message of the declaration error FORM raises when expanded."
  (let ((err (should-error (macroexpand-all form) :type 'mevedel-tool-declaration-error)))
    (cadr err)))

;;;; The macro

(ert-deftest mevedel-tool-registry:unknown-keyword-is-an-expansion-error ()
  (let ((message (mevedel-tool-registry-test--expansion-error
                  '(mevedel-define-tool Bogus
                     :description "D." :function #'ignore :read-only t))))
    (should (string-match-p "mevedel-define-tool Bogus: unknown keyword :read-only" message)))
  ;; Expansion alone failed: nothing was registered.
  (should-not (mevedel-tool-get "Bogus"))
  ;; Byte-compiling a file with the form fails too, at compile time.
  (let ((file (make-temp-file "mevedel-bad-tool" nil ".el")))
    (unwind-protect
        (progn
          (with-temp-file file
            (insert ";;; -*- lexical-binding: t -*-\n(require 'mevedel-tool-registry)\n"
                    "(mevedel-define-tool Bogus :description \"D.\" :function #'ignore :bogus 1)\n"))
          (should-not (byte-compile-file file)))
      (delete-file file)
      (ignore-errors (delete-file (concat file "c")))))
  (should-not (mevedel-tool-get "Bogus")))

(ert-deftest mevedel-tool-registry:malformed-declarations-are-expansion-errors ()
  (dolist (case '(((mevedel-define-tool T :function #'ignore) ":description is required")
                  ((mevedel-define-tool T :description "D." :function #'ignore :args ((x strin :required "d")))
                   "argument x: unknown type strin")
                  ((mevedel-define-tool T :description "D." :function #'ignore :args ((x string "d")))
                   "say :required or :optional")
                  ((mevedel-define-tool T :description "D." :function #'ignore
                                        :args ((x string :optional "d" :bogus 1)))
                   "argument x: unknown extra :bogus")
                  ((mevedel-define-tool T :description "D." :function #'ignore
                                        :args ((x string :optional "d" :access read)))
                   ":access read is only for path-or-resource")
                  ((mevedel-define-tool T :description "D." :function #'ignore
                                        :args ((x string :optional "d") (x integer :optional "e")))
                   "argument x is declared twice")
                  ((mevedel-define-tool T :description "D." :function #'ignore
                                        :args ((x array :optional "d" :items (:type nope))))
                   "unknown type nope")
                  ((mevedel-define-tool T :description "D." :function #'ignore :summary)
                   "odd number")))
    (should (string-match-p (regexp-quote (cadr case))
                            (mevedel-tool-registry-test--expansion-error (car case))))))

(ert-deftest mevedel-tool-registry:semantic-mistakes-fail-registration-with-context ()
  (let ((err (should-error
              (mevedel-define-tool BadBounds
                :description "D." :function #'ignore
                :category mevedel-tool-registry-test--category
                :args ((x string :optional "d" :minimum 1)))
              :type 'mevedel-core-schema-error)))
    (should (string-match-p "tool BadBounds: argument x: :minimum is only allowed for integer and number"
                            (cadr err))))
  (should-not (mevedel-tool-get "BadBounds" mevedel-tool-registry-test--category)))

;; Display and output facts are evaluated values, checked when the tool
;; is registered; the message names the keyword.
(ert-deftest mevedel-tool-registry:bad-renderer-or-result-size-is-refused ()
  (dolist (case `((:renderer "not a function" ":renderer must be a function")
                  (:renderer ((sometimes . ignore)) ":renderer must be a function")
                  (:renderer ((success . 42)) ":renderer must be a function")
                  (:max-result-size 0 ":max-result-size must be a positive integer")
                  (:max-result-size "30000" ":max-result-size must be a positive integer")
                  (:groups "navigation" ":groups must be a list of symbols or strings")))
    (let ((err (should-error
                (mevedel-tool-register
                 "BadFact" (list :description "D." :function #'ignore
                                 :category mevedel-tool-registry-test--category
                                 (nth 0 case) (nth 1 case)))
                :type 'mevedel-tool-declaration-error)))
      (should (string-match-p (concat "mevedel-define-tool BadFact: "
                                      (regexp-quote (nth 2 case)))
                              (cadr err)))))
  (should-not (mevedel-tool-get "BadFact" mevedel-tool-registry-test--category)))

(ert-deftest mevedel-tool-registry:access-names-the-resource-operation ()
  (should (string-match-p
           ":access must be one of read glob grep write, not peek"
           (mevedel-tool-registry-test--expansion-error
            '(mevedel-define-tool T :description "D." :function #'ignore
                                  :args ((x path-or-resource :optional "d" :access peek))))))
  (mevedel-tool-registry-test--with-clean
    (let* ((args '((a path-or-resource :optional "A.")
                   (b path-or-resource :optional "B." :access read)
                   (c path-or-resource :optional "C." :access glob)
                   (d path-or-resource :optional "D." :access grep)
                   (e path-or-resource :optional "E." :access write)))
           (reader (mevedel-tool-register
                    "Reader" (list :description "D." :function #'ignore :read-only-p t
                                   :category mevedel-tool-registry-test--category :args args)))
           (writer (mevedel-tool-register
                    "Writer" (list :description "D." :function #'ignore
                                   :category mevedel-tool-registry-test--category :args args))))
      ;; Without :access a read-only tool reads, any other tool writes.
      (should (equal (mapcar (lambda (arg) (mevedel-tool-resource-operation reader arg)) args)
                     '("Read" "Read" "Glob" "Grep" "ApplyPatch")))
      (should (equal (mapcar (lambda (arg) (mevedel-tool-resource-operation writer arg)) args)
                     '("ApplyPatch" "Read" "Glob" "Grep" "ApplyPatch")))
      ;; The key never reaches the provider schema.
      (should-not (string-search "access" (format "%S" (mevedel-tool-provider-schema writer)))))))

;;;; Summaries and replacement

(ert-deftest mevedel-tool-registry:summary-defaults-to-first-sentence-within-160 ()
  (mevedel-tool-registry-test--with-clean
    (let ((short (mevedel-define-tool Short
                   :description "Read one file. Then explain much more about it."
                   :function #'ignore :category mevedel-tool-registry-test--category))
          (long (mevedel-define-tool Long
                  :description (concat (mapconcat #'identity (make-list 50 "word") " ") ". Next.")
                  :function #'ignore :category mevedel-tool-registry-test--category))
          (given (mevedel-define-tool Given
                   :description "Whatever. More." :summary "Track plan items."
                   :function #'ignore :category mevedel-tool-registry-test--category)))
      (should (equal (mevedel-tool-summary short) "Read one file."))
      (should (<= (length (mevedel-tool-summary long)) 160))
      (should (string-prefix-p "word word" (mevedel-tool-summary long)))
      (should (equal (mevedel-tool-summary given) "Track plan items.")))))

(ert-deftest mevedel-tool-registry:reregistering-replaces ()
  (mevedel-tool-registry-test--with-clean
    (let* ((cat mevedel-tool-registry-test--category)
           (count (length (mevedel-tool-all)))
           (first (mevedel-define-tool Twice :description "First." :function #'ignore
                                       :category cat :args ((a string :required "A."))))
           (second (mevedel-define-tool Twice :description "Second." :function #'ignore
                                        :category cat :args ((b integer :optional "B.")))))
      (should (= (length (mevedel-tool-all)) (1+ count)))
      (should (eq (mevedel-tool-get "Twice" cat) second))
      (should-not (eq first second))
      (should (equal (mevedel-tool-shape (mevedel-tool-get "Twice" cat)) "(Twice [:b integer])"))
      (let ((gptel-tool (gptel-get-tool (list cat "Twice"))))
        (should (equal (gptel-tool-description gptel-tool) "Second."))
        (should (= 1 (length (alist-get cat gptel--known-tools nil nil #'equal)))))
      ;; The old handle still works on its own schema; the new one differs.
      (should (eq 'valid (plist-get (mevedel-tool-repair-check first '(:a "x")) :outcome)))
      (should (eq 'invalid (plist-get (mevedel-tool-repair-check second '(:a "x")) :outcome))))))

;;;; Provider schemas

(ert-deftest mevedel-tool-registry:lowering-golden-for-every-type ()
  (mevedel-tool-registry-test--with-clean
    (let ((tool (mevedel-define-tool Every
                  :description "Every type." :function #'ignore
                  :category mevedel-tool-registry-test--category
                  :args ((s string :required "Text." :enum ("a" "b"))
                         (p path :optional "File.")
                         (r path-or-resource :optional "Source." :access read)
                         (i integer :optional "Count." :minimum 0 :maximum 9)
                         (n number :optional "Ratio." :minimum 0.5)
                         (b boolean :optional "Flag.")
                         (a array :optional "Files." :items path :minItems 1 :maxItems 3)
                         (o object :optional "Options."
                            :properties (k (:type integer :description "K.") v string)
                            :required (k))))))
      (should (equal (json-serialize (mevedel-tool-provider-schema tool)
                                     :false-object :json-false)
                     (concat
                      "{\"additionalProperties\":false,\"properties\":{"
                      "\"a\":{\"description\":\"Files.\",\"items\":{\"description\":"
                      "\"Pass a raw filesystem path, not Markdown or a URL.\",\"type\":\"string\"},"
                      "\"maxItems\":3,\"minItems\":1,\"type\":\"array\"},"
                      "\"b\":{\"description\":\"Flag.\",\"type\":\"boolean\"},"
                      "\"i\":{\"description\":\"Count.\",\"maximum\":9,\"minimum\":0,\"type\":\"integer\"},"
                      "\"n\":{\"description\":\"Ratio.\",\"minimum\":0.5,\"type\":\"number\"},"
                      "\"o\":{\"additionalProperties\":false,\"description\":\"Options.\","
                      "\"properties\":{\"k\":{\"description\":\"K.\",\"type\":\"integer\"},"
                      "\"v\":{\"type\":\"string\"}},\"required\":[\"k\"],\"type\":\"object\"},"
                      "\"p\":{\"description\":\"File. Pass a raw filesystem path, not Markdown or a URL.\","
                      "\"type\":\"string\"},"
                      "\"r\":{\"description\":\"Source.\",\"type\":\"string\"},"
                      "\"s\":{\"description\":\"Text.\",\"enum\":[\"a\",\"b\"],\"type\":\"string\"}},"
                      "\"required\":[\"s\"],\"type\":\"object\"}")))
      ;; gptel gets the same per-argument schemas, in declaration order.
      (should (equal (mapcar (lambda (a) (plist-get a :name)) (mevedel-tool-gptel-args tool))
                     '("s" "p" "r" "i" "n" "b" "a" "o")))
      (should (plist-get (nth 1 (mevedel-tool-gptel-args tool)) :optional))
      (should-not (plist-member (nth 0 (mevedel-tool-gptel-args tool)) :optional))
      (should (equal (mevedel-tool-shape tool)
                     (concat "(Every :s string [:p string] [:r string] [:i integer] [:n number]"
                             " [:b boolean] [:a array] [:o object])"))))))

(ert-deftest mevedel-tool-registry:per-request-copies-never-leak ()
  (mevedel-tool-registry-test--with-clean
    (let* ((args '((role string :required "Role." :enum ("a" "b"))))
           (tool (mevedel-tool-register "Agentish"
                                        (list :description "D." :function #'ignore
                                              :category mevedel-tool-registry-test--category
                                              :args args)))
           (copy (mevedel-tool-provider-schema-copy tool)))
      ;; A request narrows the enum on its copy.
      (plist-put (plist-get (plist-get copy :properties) :role) :enum ["only"])
      (should (equal (plist-get (plist-get (plist-get (mevedel-tool-provider-schema tool)
                                                      :properties)
                                           :role)
                                :enum)
                     ["a" "b"]))
      ;; Changing what gptel holds does not reach the registry either.
      (plist-put (car (gptel-tool-args (mevedel-tool-gptel-tool tool))) :enum ["x"])
      (should (equal (plist-get (car (mevedel-tool-gptel-args tool)) :enum) ["a" "b"]))
      ;; The authored DSL stays as declared.
      (should (equal (mevedel-tool-args tool) '((role string :required "Role." :enum ("a" "b")))))
      ;; A second registration builds its own schema.
      (let ((again (mevedel-tool-register "Agentish"
                                          (list :description "D." :function #'ignore
                                                :category mevedel-tool-registry-test--category
                                                :args args))))
        (should-not (eq (mevedel-tool-provider-schema again) (mevedel-tool-provider-schema tool)))
        (should (equal (plist-get (plist-get (plist-get (mevedel-tool-provider-schema again)
                                                        :properties)
                                             :role)
                                  :enum)
                       ["a" "b"]))))))

;;;; Where a tool is offered: facts of the declaration

(ert-deftest mevedel-tool-registry:offering-facts-are-declared ()
  "Native, root-only, standalone-only, Plan's verdict and request arguments are declared."
  (mevedel-tool-registry-test--with-clean
    (let* ((cat mevedel-tool-registry-test--category)
           (plain (mevedel-tool-register "Plain" (list :description "D." :function #'ignore
                                                       :category cat)))
           (native (mevedel-tool-register "Roster" (list :description "D." :function #'ignore
                                                         :category cat :native t)))
           (whole (mevedel-tool-register "Whole" (list :description "D." :function #'ignore
                                                       :category cat :standalone t)))
           (verdict (lambda (_kind _args _context) '(deny . "no")))
           (planned (mevedel-tool-register "Planned" (list :description "D." :function #'ignore
                                                           :category cat :plan verdict))))
      (should-not (mevedel-tool-native-p plain))
      (should-not (mevedel-tool-root-only plain))
      (should (mevedel-tool-root-only
               (mevedel-tool-register "Rooted" (list :description "D." :function #'ignore
                                                     :category cat :root-only t))))
      (should (mevedel-tool-native-p native))
      (should (memq native (mevedel-tool-native-tools)))
      (should (memq plain (mevedel-tool-specialists)))
      (should (mevedel-tool-standalone whole))
      (should-not (mevedel-tool-standalone plain))
      (should (eq (mevedel-tool-plan planned) verdict))
      ;; A user's extra natives are offered natively too, but never an
      ;; MCP server's tool, which a server may list in mid-session.
      (let ((mevedel-tool-native-extras '("Plain" "mcp__srv__echo"))
            (served (mevedel-tool-register
                     "mcp__srv__echo" (list :description "D." :function #'ignore
                                            :category "mcp"))))
        (unwind-protect
            (progn (should (mevedel-tool-native-p plain))
                   (should-not (mevedel-tool-native-p served)))
          (mevedel-tool-unregister "mcp__srv__echo" "mcp")))))
  ;; The built-ins' roster is what their declarations say.
  (should (equal (sort (mapcar #'mevedel-tool-name (mevedel-tool-native-tools)) #'string<)
                 (sort (list "Read" "Bash" "WriteStdin" "Monitor" "Glob" "Grep" "ApplyPatch"
                             "ToolSearch" "ToolCall" "Agent" "SendMessage" "WaitAgent"
                             "InterruptAgent")
                       #'string<)))
  ;; Only Monitor and UpdateGoal are the root's alone.
  (should (equal (sort (mapcar #'mevedel-tool-name (cl-remove-if-not #'mevedel-tool-root-only
                                                                      (mevedel-tool-all)))
                       #'string<)
                 '("Monitor" "UpdateGoal")))
  (should (equal (sort (mapcar #'mevedel-tool-name
                               (cl-remove-if-not #'mevedel-tool-standalone (mevedel-tool-all)))
                       #'string<)
                 '("Ask" "ProposePlan" "Skill" "UpdateGoal" "WaitAgent")))
  (should (mevedel-tool-plan (mevedel-tool-get "ApplyPatch"))))

(ert-deftest mevedel-tool-registry:offering-facts-are-checked ()
  (dolist (case '((:plan "deny" ":plan must be a function")))
    (let ((err (should-error
                (mevedel-tool-register
                 "BadOffer" (list :description "D." :function #'ignore
                                  :category mevedel-tool-registry-test--category
                                  (nth 0 case) (nth 1 case)))
                :type 'mevedel-tool-declaration-error)))
      (should (string-match-p (regexp-quote (nth 2 case)) (cadr err)))))
  ;; Native membership needs mevedel's own implementation.
  (let ((gptel--known-tools (copy-tree gptel--known-tools)))
    (gptel-make-tool :name "wrapped_probe" :category "mevedel-registry-test-gptel"
                     :description "A gptel tool." :args nil :function #'ignore)
    (let ((err (should-error
                (mevedel-tool-register "WrappedNative"
                                       (list :wrap '("mevedel-registry-test-gptel" "wrapped_probe")
                                             :native t))
                :type 'mevedel-tool-declaration-error)))
      (should (string-match-p ":native needs mevedel's own implementation" (cadr err)))))
  (should-not (mevedel-tool-get "BadOffer" mevedel-tool-registry-test--category)))

(ert-deftest mevedel-tool-registry:backquoted-args-share-fragments ()
  "A backquoted :args is evaluated, so tools can splice shared argument forms."
  (mevedel-tool-registry-test--with-clean
    (let ((shared '((depth integer :optional "How deep."))))
      (eval `(mevedel-define-tool Spliced
               :description "D." :function #'ignore
               :category mevedel-tool-registry-test--category
               :args `((name string :required "A name.") ,@',shared))
            t)
      (should (equal (mevedel-tool-arg-keys (mevedel-tool-get "Spliced"
                                                              mevedel-tool-registry-test--category))
                     '(:name :depth)))
      ;; An evaluated mistake is still named when it is declared.
      (should (string-match-p
               "argument depth: unknown type integr"
               (cadr (should-error
                      (eval `(mevedel-define-tool Misspliced
                               :description "D." :function #'ignore
                               :category mevedel-tool-registry-test--category
                               :args `((depth integr :optional "How deep.")))
                            t)
                      :type 'mevedel-tool-declaration-error))))))
  ;; Bash, Monitor and Eval declare the sandbox arguments once, alike.
  (let ((keys (lambda (name) (mevedel-tool-arg-keys (mevedel-tool-get name)))))
    (dolist (name '("Bash" "Monitor" "Eval"))
      (should (equal (last (funcall keys name) 3)
                     '(:sandbox_permissions :additional_permissions :justification))))))

;;;; ToolSearch

(ert-deftest mevedel-tool-registry:tool-search-matches-and-renders ()
  (mevedel-tool-registry-test--with-clean
    (let* ((cat mevedel-tool-registry-test--category)
           (tools (list (mevedel-define-tool Imenu :description "Fast outline of a file."
                          :function #'ignore :category cat :groups '("navigation")
                          :args ((file_path path :required "File.")))
                        (mevedel-define-tool Xref :description "Find references."
                          :function #'ignore :category cat :groups '("navigation")
                          :args ((symbol string :required "Name.")
                                 (limit integer :optional "Max." :minimum 1))))))
      (dotimes (i 25)
        (push (mevedel-tool-register (format "Task%02d" i)
                                     (list :description "Track a checklist item." :function #'ignore
                                           :category cat :groups '("planning")))
              tools))
      (let ((few (mevedel-tool-search "NAVIGATION" tools)))
        (should (eq (plist-get few :kind) 'contracts))
        (should (equal (plist-get few :shown) '("Imenu" "Xref")))
        (should (string-match-p "Calling shape: (Xref :symbol string \\[:limit integer\\])"
                                (plist-get few :text))))
      (let ((exact (mevedel-tool-search "xref" tools)))
        (should (equal (plist-get exact :shown) '("Xref"))))
      (let ((broad (mevedel-tool-search "planning navigation" tools)))
        (should (eq (plist-get broad :kind) 'shapes))
        (should (= (plist-get broad :total) 27))
        (should (= (length (plist-get broad :shown)) 20))
        (should (string-match-p "showing the first 20" (plist-get broad :text))))
      (let ((none (mevedel-tool-search "zebra" tools)))
        (should (eq (plist-get none :kind) 'none))
        (should (string-match-p (regexp-quote (format "%s, navigation, planning." cat))
                                (plist-get none :text))))
      (should (string-match-p "^## Imenu" (mevedel-tool-contract (mevedel-tool-get "Imenu" cat)))))))

(provide 'tool-registry-test)
;;; tool-registry-test.el ends here
