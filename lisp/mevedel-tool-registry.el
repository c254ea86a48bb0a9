;;; mevedel-tool-registry.el --- Tool declarations and the registry  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Every model-facing tool is declared once with `mevedel-define-tool'.
;; Registration compiles the declaration in the native module (provider
;; JSON Schema, cached validator, calling shape, summary), keeps the
;; result in the registry under (CATEGORY . NAME), and runs
;; `mevedel-tool-registered-functions'; the gptel adapter
;; (mevedel-gptel.el) makes the tool's gptel tool there.
;;
;; Argument DSL, one list per argument:
;;
;;   (NAME TYPE :required|:optional "description" . EXTRAS)
;;
;; TYPE is one of `string', `path', `path-or-resource', `integer',
;; `number', `boolean', `array' or `object'.  EXTRAS are :enum (a list
;; of options), :items (a TYPE or a nested schema plist (:type TYPE
;; ...)), :properties (a plist NAME SCHEMA ...), :required (a list of
;; property names), :minimum, :maximum, :minItems, :maxItems, and, for
;; `path-or-resource' arguments only, :access ACCESS.
;;
;; ACCESS says what the tool does with the file or resource the
;; argument names: `read', `glob', `grep' (reads; `read' also for a
;; tool that mutates something else and only reads this argument) or
;; `write'.  Without it, an argument of a read-only tool is read and
;; one of any other tool is written.  The pipeline prepares a resource
;; address in such an argument for that operation before permission
;; (see `mevedel-tool-resource-operation'); the key is not part of the
;; provider schema.
;;
;; Argument values are kept JSON-faithful while they are checked: JSON
;; null is :null, false is :json-false, true is t, an array is a vector,
;; an object is a keyword plist, and an empty object nested in a value
;; is an empty hash table (see `mevedel-tool-repair-json-empty-object').  An
;; absent argument is simply missing from the plist.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)

(declare-function gptel-get-tool "gptel-request" (path))
(declare-function gptel-tool-args "gptel-request" (tool))
(declare-function gptel-tool-async "gptel-request" (tool))
(declare-function gptel-tool-function "gptel-request" (tool))
(declare-function gptel-tool-description "gptel-request" (tool))

;;;; Customization and errors

(defgroup mevedel-tool nil
  "Model-facing tools of mevedel: declaration, validation and repair."
  :group 'mevedel
  :prefix "mevedel-tool-")

(define-error 'mevedel-tool-error "mevedel tool error")
(define-error 'mevedel-tool-declaration-error
              "Invalid mevedel tool declaration" 'mevedel-tool-error)

;;;; Declarations

(defconst mevedel-tool-keywords
  '(:description :function :args
    ;; Behavior
    :read-only-p :snapshot-p :async-p :ahead
    ;; Permissions
    :check-permission :get-path :get-paths :get-domain :grant-request :review
    ;; Loading, grouping and where the tool is offered
    :category :groups :wrap :native :root-only :standalone :plan
    ;; A contract given as JSON Schema text instead of :args (MCP tools)
    :input-schema
    ;; Display and output
    :summary :max-result-size :render-transform :renderer)
  "Keywords `mevedel-define-tool' accepts.")

(defconst mevedel-tool-arg-types
  '(string path path-or-resource integer number boolean array object)
  "Argument types of the DSL.")

(defconst mevedel-tool--arg-extras
  '(:enum :items :properties :required :minimum :maximum :minItems :maxItems :access)
  "Keywords allowed after an argument's description.")

(defconst mevedel-tool-accesses
  '((read . "Read") (glob . "Glob") (grep . "Grep") (write . "ApplyPatch"))
  "Values of an argument's :access, with the resource operation of each.")

(defconst mevedel-tool--schema-keys
  '(:type :description :enum :items :properties :required :minimum :maximum
    :minItems :maxItems)
  "Keywords allowed in a nested schema plist.")

(cl-defstruct (mevedel-tool (:constructor mevedel-tool--make) (:copier nil))
  "A registered tool: its declaration plus what registration built."
  name category description summary function args
  read-only-p snapshot-p async-p ahead
  check-permission get-path get-paths get-domain grant-request review
  wrap max-result-size render-transform renderer
  native root-only standalone plan
  ;; Built by registration:
  identity handle provider-schema gptel-args shape arg-keys gptel-tool)

(defun mevedel-tool--declaration-error (name format-string &rest args)
  "Signal a declaration error for tool NAME: FORMAT-STRING with ARGS."
  (signal 'mevedel-tool-declaration-error
          (list (format "mevedel-define-tool %s: %s" name
                        (apply #'format format-string args)))))

(defun mevedel-tool--name-string (name)
  "Return NAME (a symbol or string) as a string."
  (if (symbolp name) (symbol-name name) name))

(defun mevedel-tool--check-schema (tool where schema)
  "Check the nested SCHEMA at WHERE of TOOL: a TYPE or (:type TYPE ...)."
  (cond
   ((memq schema mevedel-tool-arg-types) nil)
   ((and (consp schema) (keywordp (car schema)))
    (unless (zerop (% (length schema) 2))
      (mevedel-tool--declaration-error tool "%s: odd number of elements" where))
    (cl-loop for (key value) on schema by #'cddr
             unless (memq key mevedel-tool--schema-keys)
             do (mevedel-tool--declaration-error tool "%s: unknown key %S" where key)
             when (eq key :type)
             do (unless (memq value mevedel-tool-arg-types)
                  (mevedel-tool--declaration-error tool "%s: unknown type %S" where value)))
    (unless (plist-get schema :type)
      (mevedel-tool--declaration-error tool "%s: missing :type" where)))
   (t (mevedel-tool--declaration-error
       tool "%s: expected a type or (:type TYPE ...), got %S" where schema))))

(defun mevedel-tool--check-args (tool args)
  "Check the argument DSL ARGS of TOOL; signal on the first mistake."
  (unless (listp args)
    (mevedel-tool--declaration-error tool ":args must be a list of argument forms"))
  (let ((seen nil))
    (dolist (arg args)
      (pcase arg
        (`(,name ,type ,flag . ,rest)
         (unless (and (or (symbolp name) (stringp name)) name (not (keywordp name)))
           (mevedel-tool--declaration-error tool "argument name %S is not a symbol or string" name))
         (let ((arg-name (mevedel-tool--name-string name)))
           (when (member arg-name seen)
             (mevedel-tool--declaration-error tool "argument %s is declared twice" arg-name))
           (push arg-name seen)
           (unless (memq type mevedel-tool-arg-types)
             (mevedel-tool--declaration-error tool "argument %s: unknown type %S" arg-name type))
           (unless (memq flag '(:required :optional))
             (mevedel-tool--declaration-error
              tool "argument %s: say :required or :optional after the type, not %S" arg-name flag))
           (unless (stringp (car rest))
             (mevedel-tool--declaration-error tool "argument %s: the description must be a string" arg-name))
           (unless (zerop (% (length (cdr rest)) 2))
             (mevedel-tool--declaration-error tool "argument %s: odd number of extras" arg-name))
           (cl-loop for (key value) on (cdr rest) by #'cddr
                    unless (memq key mevedel-tool--arg-extras)
                    do (mevedel-tool--declaration-error
                        tool "argument %s: unknown extra %S" arg-name key)
                    when (eq key :items)
                    do (mevedel-tool--check-schema tool (format "argument %s :items" arg-name) value)
                    when (eq key :properties)
                    do (cl-loop for (_ sub) on value by #'cddr
                                do (mevedel-tool--check-schema
                                    tool (format "argument %s :properties" arg-name) sub))
                    when (eq key :access)
                    do (cond ((not (assq value mevedel-tool-accesses))
                              (mevedel-tool--declaration-error
                               tool "argument %s: :access must be one of %s, not %S" arg-name
                               (mapconcat (lambda (a) (symbol-name (car a)))
                                          mevedel-tool-accesses " ")
                               value))
                             ((not (eq type 'path-or-resource))
                              (mevedel-tool--declaration-error
                               tool "argument %s: :access %s is only for path-or-resource arguments"
                               arg-name value))))))
        (_ (mevedel-tool--declaration-error
            tool "argument %S is not (NAME TYPE :required|:optional \"description\" . EXTRAS)"
            arg))))))

(defun mevedel-tool--check-declaration (name properties)
  "Check the declaration of tool NAME with PROPERTIES; return PROPERTIES."
  (unless (and name (or (symbolp name) (stringp name))
               (not (string-empty-p (mevedel-tool--name-string name))))
    (mevedel-tool--declaration-error name "the tool name must be a non-empty symbol or string"))
  (unless (zerop (% (length properties) 2))
    (mevedel-tool--declaration-error name "odd number of keyword arguments"))
  (let ((seen nil))
    (cl-loop for (key _) on properties by #'cddr
             do (unless (memq key mevedel-tool-keywords)
                  (mevedel-tool--declaration-error
                   name "unknown keyword %S (known: %s)" key
                   (mapconcat #'symbol-name mevedel-tool-keywords " ")))
             (when (memq key seen)
               (mevedel-tool--declaration-error name "%S given twice" key))
             (push key seen)))
  (unless (plist-member properties :wrap)
    (dolist (key '(:description :function))
      (unless (plist-member properties key)
        (mevedel-tool--declaration-error name "%S is required" key))))
  ;; A backquoted :args is checked once evaluated, when it is declared.
  (unless (eq (car-safe (plist-get properties :args)) '\`)
    (mevedel-tool--check-args name (plist-get properties :args)))
  properties)

(defmacro mevedel-define-tool (name &rest properties)
  "Declare and register the model-facing tool NAME (a symbol or string).
PROPERTIES are keyword arguments; every value is evaluated except
:args, the literal argument DSL (see the Commentary of this file).  A
backquoted :args is evaluated, for argument forms shared by several
tools (,@FORMS splices them in); it is checked when it is declared.

Required: :description (for the model) and :function (the handler,
called with the argument plist, or with a callback and the plist when
:async-p is non-nil), unless :wrap names a gptel tool (CATEGORY NAME)
whose contract is frozen and reused.

Behavior: :read-only-p :snapshot-p :async-p :ahead (a function of the
model's arguments, called as the call starts, with `default-directory'
the call's workspace: it may start read-only work its handler will
ask for, a remote Read's round trip, so that it overlaps the steps
before the handler, which takes it only if its arguments came through
them unchanged; an error in it is the handler's to meet).
Permissions: :check-permission :get-path :get-paths :get-domain (a
function of the arguments returning the host a call contacts, which
permission rules match instead of paths) :grant-request (a
function of the arguments returning the sandbox grant they ask for,
or nil; a grant is always asked about, see `mevedel-permissions-judge')
:review (a function of (CONTEXT SESSION ANSWER OPEN) that a chat with
a view calls instead of showing a yes/no card when the call asks: it
opens its interaction with OPEN, shows its own review, calls ANSWER
once with the pipeline's answer and returns a function that withdraws
the review, see `mevedel-chat--ask').
Loading and grouping: :category (default \"mevedel\") :groups (a list
of symbols or strings ToolSearch offers the tool under) :wrap.
Someone else's contract: :input-schema, JSON Schema text of the
arguments used instead of :args for validation and the provider schema
\(an MCP server's tool, see mevedel-mcp.el).
Where it is offered: :native (non-nil: offered to the model in every
request as a provider tool; without it the tool is a specialist, found
with ToolSearch and called through ToolCall) :root-only (non-nil:
only the root agent is offered it; a child agent's tools and catalog
leave it out) :standalone (non-nil: a
ToolCall program may call it only as its whole expression) :plan (what
Plan mode does with its calls: a function of the stamp's kind, the
arguments and the call's context returning Plan's verdict, nil for the
usual decision; without it Plan denies the calls unless the tool is
read-only or its own check finds them harmless, see mevedel-plan.el).
The description and arguments are fixed when the tool is declared:
they go before every message of every request, so a fact that
changes during a session (roles, skills, servers) belongs in a prompt
component, whose changes are appended as context updates.
Display and output: :summary (default: the description's first
sentence, at most 160 characters) :max-result-size (a positive
integer: longer results are previewed and persisted, see
`mevedel-pipeline-result-limit') :render-transform :renderer (how the
view draws the tool's rows: a function or a dispatch alist, see
mevedel-tool-render.el).

An unknown keyword or a malformed argument form is an error when the
macro is expanded.  Re-registering the same (CATEGORY . NAME) replaces
the earlier registration."
  (declare (indent 1))
  (mevedel-tool--check-declaration name properties)
  (let ((forms (cl-loop for (key value) on properties by #'cddr
                        append (list key (if (and (eq key :args)
                                                  (not (eq (car-safe value) '\`)))
                                             (list 'quote value)
                                           value)))))
    `(mevedel-tool-declare ,(mevedel-tool--name-string name) (list ,@forms))))

;;;; Descriptors for the module

(defun mevedel-tool--json-name (name)
  "Return the JSON string for NAME, a symbol, keyword or string."
  (cond ((keywordp name) (substring (symbol-name name) 1))
        ((symbolp name) (symbol-name name))
        (t name)))

(defun mevedel-tool--schema-descriptor (schema)
  "Return the module descriptor of the nested SCHEMA."
  (if (symbolp schema)
      (list :type (symbol-name schema))
    (cl-loop for (key value) on schema by #'cddr
             append (list key (mevedel-tool--extra-value key value)))))

(defun mevedel-tool--extra-value (key value)
  "Return the descriptor form of the extra KEY with VALUE."
  (pcase key
    (:type (symbol-name value))
    (:enum (vconcat (mapcar (lambda (v) (if (and (symbolp v) v) (symbol-name v) v)) value)))
    (:items (mevedel-tool--schema-descriptor value))
    (:properties (vconcat (cl-loop for (name sub) on value by #'cddr
                                   collect (append (list :name (mevedel-tool--json-name name))
                                                   (mevedel-tool--schema-descriptor sub)))))
    (:required (vconcat (mapcar #'mevedel-tool--json-name value)))
    (_ value)))

(defun mevedel-tool--arg-descriptor (arg)
  "Return the module descriptor of the DSL argument ARG."
  (pcase-let ((`(,name ,type ,flag ,doc . ,extras) arg))
    (append (list :name (mevedel-tool--json-name name)
                  :type (symbol-name type)
                  :flag (substring (symbol-name flag) 1)
                  :description doc)
            (cl-loop for (key value) on extras by #'cddr
                     unless (eq key :access)
                     append (list key (mevedel-tool--extra-value key value)))
            ;; The module knows only whether the argument is read.
            (when (memq (plist-get extras :access) '(read glob grep))
              (list :access "read")))))

(defun mevedel-tool--gptel-arg-descriptor (arg)
  "Return the module descriptor of the gptel argument plist ARG."
  (let ((type (format "%s" (plist-get arg :type))))
    (append (list :name (mevedel-tool--json-name (plist-get arg :name))
                  :type type
                  :flag (if (plist-get arg :optional) "optional" "required"))
            (when-let* ((doc (plist-get arg :description))) (list :description doc))
            (cl-loop for key in '(:enum :items :properties :required
                                  :minimum :maximum :minItems :maxItems)
                     when (plist-member arg key)
                     append (list key (mevedel-tool--gptel-schema key (plist-get arg key)))))))

(defun mevedel-tool--gptel-schema (key value)
  "Return the descriptor form of gptel's schema KEY with VALUE."
  (pcase key
    (:items (mevedel-tool--gptel-nested value))
    (:properties (vconcat (cl-loop for (name sub) on value by #'cddr
                                   collect (append (list :name (mevedel-tool--json-name name))
                                                   (mevedel-tool--gptel-nested sub)))))
    ((or :enum :required) (vconcat value))
    (_ value)))

(defun mevedel-tool--gptel-nested (schema)
  "Return the descriptor of gptel's nested SCHEMA plist."
  (cl-loop for (key value) on schema by #'cddr
           when (memq key mevedel-tool--schema-keys)
           append (list key (if (eq key :type)
                                (format "%s" value)
                              (mevedel-tool--gptel-schema key value)))))

;;;; The registry

(defvar mevedel-tool--registry (make-hash-table :test #'equal)
  "\(CATEGORY . NAME) -> `mevedel-tool'.")

(defvar mevedel-tool--order nil
  "Registry keys in first-registration order, newest first.")

(defvar mevedel-tool-registered-functions nil
  "Abnormal hook run with each `mevedel-tool' just registered (or again).
The gptel adapter makes the tool's gptel tool here, so a tool declared
before or after it was loaded is offered alike.")

(defvar mevedel-tool-unregistered-functions nil
  "Abnormal hook run with the NAME and CATEGORY of an unregistered tool.")

(defvar mevedel-tool-catalog-generation 0
  "How many times what a catalog holds may have changed, for those who keep one.
Registering a tool (again) or unregistering one counts, and so does a
change in the answer of one of `mevedel-tool-visible-functions', which
its owner reports with `mevedel-tool-catalog-changed'.")

(defun mevedel-tool-catalog-changed ()
  "Note that catalogs built before now may be out of date."
  (cl-incf mevedel-tool-catalog-generation))

(defvar mevedel-tool--pending nil
  "Declarations waiting for the native module: (NAME . PROPERTIES), newest first.
Registering compiles a declaration in the module, and loading or
byte-compiling a tool family must not build it: until the module is
loaded (`mevedel-core-ready-hook'), or a tool is looked up, they wait.")

(defun mevedel-tool--register-pending ()
  "Register the declarations that waited for the native module."
  (let ((pending (reverse mevedel-tool--pending)))
    (setq mevedel-tool--pending nil)
    (pcase-dolist (`(,name . ,properties) pending)
      (mevedel-tool--register-now name properties))))

(add-hook 'mevedel-core-ready-hook #'mevedel-tool--register-pending)

(defun mevedel-tool--ready ()
  "Register the waiting declarations, loading the native module for them."
  (when mevedel-tool--pending
    (mevedel-core-ensure)
    (mevedel-tool--register-pending)))

(defun mevedel-tool-get (name &optional category)
  "Return the registered tool NAME in CATEGORY, or nil.
Without CATEGORY, return the first tool named NAME in registration order."
  (mevedel-tool--ready)
  (if category
      (gethash (cons category name) mevedel-tool--registry)
    (cl-loop for key in (reverse mevedel-tool--order)
             when (equal (cdr key) name)
             return (gethash key mevedel-tool--registry))))

(defun mevedel-tool-all ()
  "Return every registered tool, in first-registration order."
  (mevedel-tool--ready)
  (cl-loop for key in (reverse mevedel-tool--order)
           collect (gethash key mevedel-tool--registry)))

(defun mevedel-tool-unregister (name &optional category)
  "Remove the tool NAME in CATEGORY (default \"mevedel\") from the registry."
  (let ((key (cons (or category "mevedel") name)))
    (setq mevedel-tool--pending
          (cl-remove-if (lambda (entry)
                          (and (equal (car entry) name)
                               (equal (or (plist-get (cdr entry) :category) "mevedel") (car key))))
                        mevedel-tool--pending))
    (remhash key mevedel-tool--registry)
    (setq mevedel-tool--order (delete key mevedel-tool--order))
    (mevedel-tool-catalog-changed)
    (run-hook-with-args 'mevedel-tool-unregistered-functions name (car key))))

(defun mevedel-tool--json-parse (string)
  "Parse STRING, JSON written by the module, keeping false distinct."
  (json-parse-string string :object-type 'plist :null-object :null
                     :false-object :json-false))

(defun mevedel-tool--check-values (name properties)
  "Check the evaluated display and grouping PROPERTIES of tool NAME."
  (let ((size (plist-get properties :max-result-size))
        (review (plist-get properties :review))
        (renderer (plist-get properties :renderer))
        (groups (plist-get properties :groups))
        (plan (plist-get properties :plan)))
    (when (and (plist-get properties :native) (plist-get properties :wrap))
      (mevedel-tool--declaration-error
       name ":native needs mevedel's own implementation; a :wrap tool is a specialist \
\(name it in `mevedel-tool-native-extras' to offer it natively)"))
    ;; A function's name may be declared before the function is defined.
    (unless (or (symbolp plan) (functionp plan))
      (mevedel-tool--declaration-error name ":plan must be a function, not %S" plan))
    (unless (and (proper-list-p groups)
                 (cl-every (lambda (g) (or (stringp g) (and g (symbolp g)))) groups))
      (mevedel-tool--declaration-error
       name ":groups must be a list of symbols or strings, not %S" groups))
    (unless (or (null review) (functionp review))
      (mevedel-tool--declaration-error name ":review must be a function, not %S" review))
    (unless (or (null size) (and (natnump size) (> size 0)))
      (mevedel-tool--declaration-error
       name ":max-result-size must be a positive integer, not %S" size))
    (unless (or (null renderer) (functionp renderer)
                (and (consp renderer)
                     (cl-every (lambda (entry)
                                 (and (consp entry)
                                      (memq (car entry) '(success error default))
                                      (functionp (cdr entry))))
                               renderer)))
      (mevedel-tool--declaration-error
       name ":renderer must be a function or an alist of (success|error|default . FUNCTION), \
not %S" renderer))))

(defvar mevedel-tool--arg-key-cache (make-hash-table :test #'equal)
  "Argument name (a symbol or string) -> its plist key, made once.")

(defun mevedel-tool-arg-key (name)
  "Return the plist key of the argument called NAME (a symbol or string).
Kept once made: every call's resource step asks it for each argument."
  (or (gethash name mevedel-tool--arg-key-cache)
      (puthash name (intern (concat ":" (mevedel-tool--name-string name)))
               mevedel-tool--arg-key-cache)))

(defun mevedel-tool-resource-operation (tool arg)
  "Return the resource operation of the DSL argument ARG of TOOL.
That is \"Read\", \"Glob\", \"Grep\" or \"ApplyPatch\" (a write), from
the argument's :access, else from whether TOOL is read-only."
  (let ((access (plist-get (nthcdr 4 arg) :access)))
    (cdr (assq (or access (if (mevedel-tool-read-only-p tool) 'read 'write))
               mevedel-tool-accesses))))

(defun mevedel-tool-register (name properties)
  "Register the tool NAME with PROPERTIES, as `mevedel-define-tool' does.
Return the new `mevedel-tool'.  Replaces an earlier registration with
the same category and name; `mevedel-tool-registered-functions' runs.
This loads the native module; a declaration at load time
\(`mevedel-define-tool') waits for it instead, see `mevedel-tool-declare'."
  (mevedel-tool--check-declaration name properties)
  (mevedel-tool--check-values name properties)
  (mevedel-core-ensure)
  (mevedel-tool--register-now name properties))

(defun mevedel-tool-declare (name properties)
  "Declare the tool NAME with PROPERTIES: register it once the module is loaded.
The declaration is checked now.  Until the native module is loaded
it waits in `mevedel-tool--pending' (loading or byte-compiling a tool
family must not build the module), and the value is nil; with the
module loaded, it is registered at once and the tool returned."
  (mevedel-tool--check-declaration name properties)
  (mevedel-tool--check-values name properties)
  (if (mevedel-core-ready-p)
      (mevedel-tool--register-now name properties)
    (push (cons name properties) mevedel-tool--pending)
    nil))

(defun mevedel-tool--register-now (name properties)
  "Register the checked declaration of NAME with PROPERTIES; return the tool."
  (let* ((category (or (plist-get properties :category) "mevedel"))
         (wrap (plist-get properties :wrap))
         (source (and wrap (mevedel-tool--wrap-source name wrap)))
         (description (or (plist-get properties :description)
                          (and source (gptel-tool-description source))))
         (arg-descriptors
          (if source
              (mapcar #'mevedel-tool--gptel-arg-descriptor (gptel-tool-args source))
            (mapcar #'mevedel-tool--arg-descriptor (plist-get properties :args))))
         (identity (if wrap (format "%s/%s" category name) name))
         (descriptor (list :name name :identity identity :category category
                           :groups (vconcat (mapcar #'mevedel-tool--json-name
                                                    (plist-get properties :groups)))
                           :description (or description "")
                           :summary (or (plist-get properties :summary) :null)
                           :args (vconcat arg-descriptors)
                           :input_schema
                           (if-let* ((schema (plist-get properties :input-schema)))
                               (json-parse-string schema :null-object :null
                                                  :false-object :json-false)
                             :null)))
         (compiled (mevedel-core-schema-compile
                    (json-serialize descriptor :null-object :null :false-object :json-false)))
         (gptel-args (append (mevedel-tool--json-parse (nth 2 compiled)) nil))
         (tool (mevedel-tool--make
                :name name :category category :description description
                :summary (nth 4 compiled)
                :function (plist-get properties :function)
                :args (plist-get properties :args)
                :read-only-p (plist-get properties :read-only-p)
                :snapshot-p (plist-get properties :snapshot-p)
                :async-p (if source (gptel-tool-async source) (plist-get properties :async-p))
                :ahead (plist-get properties :ahead)
                :check-permission (plist-get properties :check-permission)
                :get-path (plist-get properties :get-path)
                :get-paths (plist-get properties :get-paths)
                :get-domain (plist-get properties :get-domain)
                :grant-request (plist-get properties :grant-request)
                :review (plist-get properties :review)
                :wrap (and wrap (list :source wrap
                                      :args (copy-tree (gptel-tool-args source) t)
                                      :async (gptel-tool-async source)))
                :max-result-size (plist-get properties :max-result-size)
                :render-transform (plist-get properties :render-transform)
                :renderer (plist-get properties :renderer)
                :native (and (plist-get properties :native) t)
                :root-only (and (plist-get properties :root-only) t)
                :standalone (and (plist-get properties :standalone) t)
                :plan (plist-get properties :plan)
                :identity identity
                :handle (nth 0 compiled)
                :provider-schema (mevedel-tool--json-parse (nth 1 compiled))
                :gptel-args gptel-args
                :shape (nth 3 compiled)
                :arg-keys (mapcar (lambda (a) (intern (concat ":" (plist-get a :name))))
                                  gptel-args)))
         (key (cons category name)))
    (unless (gethash key mevedel-tool--registry)
      (push key mevedel-tool--order))
    (puthash key tool mevedel-tool--registry)
    (mevedel-tool-catalog-changed)
    (run-hook-with-args 'mevedel-tool-registered-functions tool)
    tool))

;;;; Provider schemas

(defun mevedel-tool-provider-schema-copy (tool)
  "Return a fresh copy of TOOL's provider schema, for one request.
Changing the copy (say, narrowing an enum) never reaches the registry."
  (copy-tree (mevedel-tool-provider-schema tool) t))

;;;; Wrapped gptel tools

(defun mevedel-tool--wrap-source (name wrap)
  "Return the gptel tool WRAP ((CATEGORY NAME)) names for tool NAME."
  (require 'gptel-request)
  (unless (and (consp wrap) (stringp (car wrap)) (stringp (cadr wrap)))
    (mevedel-tool--declaration-error name ":wrap must be (CATEGORY NAME), got %S" wrap))
  (condition-case nil
      (gptel-get-tool wrap)
    (error (mevedel-tool--declaration-error name ":wrap names no gptel tool %S" wrap))))

(defun mevedel-tool-wrapped-function (tool)
  "Return a function to run wrapped TOOL's source with an argument plist.
The source is looked up again on every call, so a reconnect can
replace its function; a changed argument contract or calling
convention signals `mevedel-tool-error' and needs rewrapping."
  (let* ((wrap (mevedel-tool-wrap tool))
         (source (gptel-get-tool (plist-get wrap :source))))
    (unless (and (equal (gptel-tool-args source) (plist-get wrap :args))
                 (eq (and (gptel-tool-async source) t) (and (plist-get wrap :async) t)))
      (signal 'mevedel-tool-error
              (list (format "The contract of %s changed since it was wrapped; wrap it again"
                            (plist-get wrap :source)))))
    (let ((names (mapcar (lambda (a) (intern (format ":%s" (plist-get a :name))))
                         (plist-get wrap :args)))
          (fn (gptel-tool-function source)))
      (if (plist-get wrap :async)
          (lambda (callback args)
            (apply fn callback (mapcar (lambda (k) (plist-get args k)) names)))
        (lambda (args)
          (apply fn (mapcar (lambda (k) (plist-get args k)) names)))))))

(defun mevedel-tool-handler (tool)
  "Return TOOL's handler: its :function, or its wrapped source's."
  (if (mevedel-tool-wrap tool)
      (mevedel-tool-wrapped-function tool)
    (mevedel-tool-function tool)))

;;;; ToolSearch

(defun mevedel-tool-search-index (tools)
  "Return the ToolSearch index of the list TOOLS, for `mevedel-tool-search'.
Making it crosses to the module once per tool; searching it does not,
so a caller whose catalog stays the same keeps it."
  (mevedel-core-schema-index (vconcat (mapcar #'mevedel-tool-handle tools))))

(defun mevedel-tool-search (query &optional tools)
  "Search TOOLS (default: every registered tool) for QUERY.
TOOLS is a list of tools or an index from `mevedel-tool-search-index'.
Return a plist (:kind KIND :text TEXT :shown IDENTITIES :total N).
KIND is `contracts' (one to three matches, full contracts), `shapes'
\(more matches: at most 20 calling shapes with summaries) or `none'
\(suggesting at most 20 sorted categories and groups)."
  (pcase-let ((`(,kind ,text ,shown ,total)
               (mevedel-core-schema-search
                (if (user-ptrp tools)
                    tools
                  (mevedel-tool-search-index (or tools (mevedel-tool-all))))
                query)))
    (list :kind kind :text text :shown shown :total total)))

(defun mevedel-tool-contract (tool)
  "Return the full contract text of TOOL, as in ToolSearch results."
  (mevedel-core-schema-contract (mevedel-tool-handle tool)))

;;;; The catalog: native tools and specialists

(defcustom mevedel-tool-native-extras nil
  "Names of further registered tools to offer natively, as provider tools.
For a tool of your own that the model should see in every request
instead of finding it through ToolSearch; each one added changes the
provider schemas, so keep it short.  An MCP server's tool (category
mcp) is never offered so: servers list tools during a session, and
the provider schemas must stay the same for a session's life."
  :type '(repeat string)
  :group 'mevedel-tool)

(defun mevedel-tool-native-p (tool)
  "Return non-nil when TOOL is native: offered to the model as a provider tool.
A short native roster keeps the provider schemas, and so the cached
prompt prefix, stable as tools are added: only declarations saying
:native are in it (a wrapped gptel tool called Read stays a
specialist), and the tools named in `mevedel-tool-native-extras'.
Every other tool is a specialist: the model finds it with ToolSearch,
sees it in the conversation's specialist listing and calls it through
ToolCall."
  (or (mevedel-tool-native tool)
      (and (member (mevedel-tool-name tool) mevedel-tool-native-extras)
           (not (equal (mevedel-tool-category tool) "mcp")))))

(defvar-local mevedel-tool-offered nil
  "Names of the tools this data buffer's model is offered, or nil for all.
A child agent's role narrows them; a ToolCall program there may call
no native tool outside them (its specialists are those of
`mevedel-tool-frozen-specialists').")

(defvar-local mevedel-tool-frozen-specialists nil
  "The specialists this data buffer's model may reach, or nil for all.
A child agent's: a hash table of their identities, frozen at its spawn
\(mevedel-agent.el), so tools registered later (an MCP server listing
new ones) do not join a running child's catalog.")

(defvar mevedel-tool-visible-functions nil
  "Functions of (TOOL BUFFER) that may hide TOOL from data BUFFER's model.
The registry is global, but some tools belong to one session (an MCP
server's, see mevedel-mcp.el): a tool is visible in BUFFER unless one
of these returns nil.  ToolSearch, ToolCall and the specialist listing
only see visible tools.  A function whose answer changes other than
when a tool is registered or unregistered says so with
`mevedel-tool-catalog-changed': catalogs are kept until then.")

(defun mevedel-tool-visible-p (tool buffer)
  "Return non-nil when TOOL is visible to the model of data BUFFER.
A specialist outside BUFFER's `mevedel-tool-frozen-specialists' is
not; any tool may be hidden by `mevedel-tool-visible-functions'."
  (and (or (mevedel-tool-native-p tool)
           (not (buffer-live-p buffer))
           (let ((frozen (buffer-local-value 'mevedel-tool-frozen-specialists buffer)))
             (or (null frozen) (gethash (mevedel-tool-identity tool) frozen))))
       (run-hook-with-args-until-failure 'mevedel-tool-visible-functions tool buffer)))

(defun mevedel-tool-native-tools ()
  "Return the registered native tools, in registration order."
  (cl-remove-if-not #'mevedel-tool-native-p (mevedel-tool-all)))

(defun mevedel-tool-specialists ()
  "Return the registered specialists (every tool that is not native)."
  (cl-remove-if #'mevedel-tool-native-p (mevedel-tool-all)))

(defvar mevedel-tool--identities nil
  "(GENERATION . TABLE): identity -> the first tool of that identity.
Made from the registry as of `mevedel-tool-catalog-generation'
GENERATION, so that each call of a ToolCall program finds its tool
without walking thousands of MCP tools.")

(defun mevedel-tool-by-identity (identity)
  "Return the registered tool whose identity is IDENTITY, or nil.
A built-in's identity is its name, a wrapped tool's CATEGORY/NAME; of
tools sharing one, the first registered."
  (mevedel-tool--ready)
  (unless (eql (car mevedel-tool--identities) mevedel-tool-catalog-generation)
    (let ((table (make-hash-table :test #'equal)))
      (dolist (tool (mevedel-tool-all))
        (unless (gethash (mevedel-tool-identity tool) table)
          (puthash (mevedel-tool-identity tool) tool table)))
      (setq mevedel-tool--identities (cons mevedel-tool-catalog-generation table))))
  (gethash identity (cdr mevedel-tool--identities)))

(provide 'mevedel-tool-registry)
;;; mevedel-tool-registry.el ends here
