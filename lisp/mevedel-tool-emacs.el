;;; mevedel-tool-emacs.el --- EmacsDescribe, EmacsFind, EmacsManual  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Introspection of the running Emacs for the model, through Emacs's own
;; documentation, source and Info APIs.
;;
;; EmacsDescribe reads one aspect of a function, variable or library:
;; its documentation, source, location, Info manual section or (for a
;; variable) global value.  Without a kind, a defined function is meant,
;; else a variable, else (for source and location) a library.  Names are
;; looked up with `intern-soft' only: asking about a name nobody defined
;; answers "not defined" and leaves `obarray' as it was.  A value read
;; always asks for permission (a value may hold a secret), other aspects
;; are read-only.  Source of a C primitive needs
;; `find-function-C-source-directory'; without it the answer says so
;; instead of prompting.  A library resolves only to a file inside a
;; local `load-path' directory.  Source files are read without leaving
;; a buffer behind.
;;
;; EmacsFind lists the functions, commands, variables or libraries whose
;; names match an Orderless-style pattern: space-separated components,
;; each a regexp (or a literal when it is not a valid regexp), all of
;; which must match, in any order; case is ignored unless a component
;; has an uppercase letter.  Libraries are the files in local
;; `load-path' directories.
;;
;; EmacsManual lists the Info manuals, a manual's nodes, or one node's
;; text.  It reads them in a temporary Info buffer that is never shown,
;; so the user's *info* buffer, its history and the window layout stay
;; as they were.  Manual: docs/tools/emacs.md.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'find-func)
(require 'help-fns)
(require 'info)
(require 'info-look)
(require 'lisp-mnt)
(require 'mevedel-tool-eval)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)

(defgroup mevedel-tool-emacs nil
  "The Emacs introspection tools: EmacsDescribe, EmacsFind, EmacsManual."
  :group 'mevedel-tool
  :prefix "mevedel-tool-emacs-")

(defcustom mevedel-tool-emacs-find-limit 200
  "Most names EmacsFind lists; it says how many more matched."
  :type 'natnum)

(defcustom mevedel-tool-emacs-source-max-lines 400
  "Most lines of a definition EmacsDescribe shows as its source."
  :type 'natnum)

;;;; Names

(defun mevedel-tool-emacs--symbol (name)
  "Return (SYMBOL) for NAME when the symbol exists, else nil; never intern."
  (let ((symbol (intern-soft name)))
    (when (or symbol (equal name "nil"))
      (list symbol))))

(defun mevedel-tool-emacs--variable-p (symbol)
  "Return non-nil when SYMBOL is a variable: bound or documented as one."
  (or (boundp symbol)
      (get symbol 'variable-documentation)
      (custom-variable-p symbol)))

(defun mevedel-tool-emacs--library-file (name &optional source)
  "Return the first file of library NAME in a local `load-path' directory.
With SOURCE, prefer its source file (.el or .el.gz) to compiled code.
Return nil when no such file lies inside a local `load-path' directory."
  (unless (or (string-empty-p name) (file-name-absolute-p name)
              (string-match-p "\\(?:\\`\\|/\\)\\.\\.\\(?:/\\|\\'\\)" name))
    (let* ((base (replace-regexp-in-string "\\.el\\(?:c\\|\\.gz\\)?\\'" "" name))
           (suffixes (if source
                         '(".el" ".el.gz" ".elc" "")
                       '(".elc" ".el" ".el.gz" ""))))
      (cl-loop for dir in load-path
               when (and (stringp dir) (not (file-remote-p dir)) (file-directory-p dir))
               thereis (cl-loop for suffix in suffixes
                                for file = (expand-file-name (concat base suffix) dir)
                                when (and (file-regular-p file)
                                          (file-in-directory-p file dir))
                                return file)))))

(defun mevedel-tool-emacs--kind (name kind aspect)
  "Return (KIND . OBJECT) that EmacsDescribe is asked about, or signal.
NAME is the name, KIND the given kind (a string or nil), ASPECT the
aspect.  OBJECT is the symbol, or the library's name."
  (let ((cell (mevedel-tool-emacs--symbol name)))
    (pcase kind
      ("function" (if (and cell (fboundp (car cell))) (cons 'function (car cell))
                    (error "%s is not defined as a function" name)))
      ("variable" (if (and cell (mevedel-tool-emacs--variable-p (car cell)))
                      (cons 'variable (car cell))
                    (error "%s is not defined as a variable" name)))
      ("library" (if (mevedel-tool-emacs--library-file name) (cons 'library name)
                   (error "No library %s in the load-path directories" name)))
      ('nil (cond ((and cell (fboundp (car cell))) (cons 'function (car cell)))
                  ((and cell (mevedel-tool-emacs--variable-p (car cell)))
                   (cons 'variable (car cell)))
                  ((and (member aspect '("source" "location"))
                        (mevedel-tool-emacs--library-file name))
                   (cons 'library name))
                  (t (error "%s is not defined (no function or variable of that name%s)"
                            name (if (member aspect '("source" "location"))
                                     ", nor a library" "")))))
      (_ (error "The kind argument must be function, variable or library, not %S" kind)))))

;;;; Documentation

(defun mevedel-tool-emacs--function-type (symbol)
  "Return what SYMBOL's function definition is, in a few words."
  (let ((def (indirect-function symbol)))
    (concat (cond ((special-form-p def) "special form")
                  ((macrop def) "macro")
                  ((commandp def) "command")
                  ((subrp def) "built-in function")
                  (t "function"))
            (let ((alias (symbol-function symbol)))
              (and (symbolp alias) alias (format " (an alias of %s)" alias))))))

(defun mevedel-tool-emacs--file-of (symbol type)
  "Return the file defining SYMBOL as TYPE (`defun' or `defvar'), or nil."
  (ignore-errors
    (if (eq type 'defun)
        ;; A primitive's file is known from its object, not from `defun'.
        (or (find-lisp-object-file-name symbol 'defun)
            (find-lisp-object-file-name symbol (indirect-function symbol) t))
      (find-lisp-object-file-name symbol type t))))

(defun mevedel-tool-emacs--function-doc (symbol)
  "Return the documentation of the function SYMBOL."
  (let* ((raw (ignore-errors (documentation symbol t)))
         (split (and raw (help-split-fundoc raw symbol)))
         (usage (if (car split)
                    (car split)
                  (format "%S" (cons symbol (help-function-arglist symbol t)))))
         (doc (or (if split (cdr split) raw) "Not documented."))
         (file (mevedel-tool-emacs--file-of symbol 'defun)))
    (concat (format "%s is a %s%s.\n\n" symbol (mevedel-tool-emacs--function-type symbol)
                    (if file (format " in %s" file) ""))
            usage "\n\n" (substitute-command-keys doc))))

(defun mevedel-tool-emacs--variable-doc (symbol)
  "Return the documentation of the variable SYMBOL, without its value."
  (let ((doc (documentation-property symbol 'variable-documentation t))
        (file (mevedel-tool-emacs--file-of symbol 'defvar)))
    (concat (format "%s is a%s variable%s.\n" symbol
                    (if (custom-variable-p symbol) " customizable" "")
                    (if file (format " defined in %s" file) ""))
            (and (local-variable-if-set-p symbol) "It becomes buffer-local when set.\n")
            (and (get symbol 'byte-obsolete-variable) "It is obsolete.\n")
            "\n" (or doc "Not documented.")
            "\n\n(Its value is not shown here: ask for the value aspect.)")))

(defun mevedel-tool-emacs--library-doc (name)
  "Return the Commentary of library NAME."
  (let ((file (mevedel-tool-emacs--library-file name t)))
    (with-temp-buffer
      (insert-file-contents file)
      (let ((commentary (lm-commentary)))
        (concat (format "Library %s (%s).\n\n" name file)
                (if commentary (string-trim (substring-no-properties commentary))
                  "It has no Commentary section."))))))

;;;; Source and location

(defun mevedel-tool-emacs--c-source-check (symbol type)
  "Signal unless the C definition of SYMBOL as TYPE can be read.
That needs `find-function-C-source-directory'; when it is unset or
missing, say so rather than letting find-func prompt for it."
  (let ((file (mevedel-tool-emacs--file-of symbol type)))
    (when (and file (string-match-p "\\.c\\'" file)
               (not (and find-function-C-source-directory
                         (file-directory-p find-function-C-source-directory))))
      (error "%s is defined in C (%s); reading its source needs \
`find-function-C-source-directory' set to Emacs's src/ directory, which is %s"
             symbol file (if find-function-C-source-directory "missing" "unset")))))

(defmacro mevedel-tool-emacs--in-definition (form &rest body)
  "Run BODY at the definition located by FORM, a (BUFFER . POSITION) pair.
A buffer FORM visited only for this is killed afterwards, so no file
buffer is left behind."
  (declare (indent 1))
  `(let* ((before (buffer-list))
          (found ,form)
          (buffer (car found)))
     (unwind-protect
         (with-current-buffer buffer
           (save-excursion
             (save-restriction
               (widen)
               (goto-char (or (cdr found) (point-min)))
               ,@body)))
       (unless (memq buffer before) (kill-buffer buffer)))))

(defun mevedel-tool-emacs--find (symbol type)
  "Return (BUFFER . POSITION) of SYMBOL's definition as TYPE, or signal."
  (mevedel-tool-emacs--c-source-check symbol type)
  (let ((found (if (eq type 'defun)
                   (find-function-noselect symbol t)
                 (find-variable-noselect symbol))))
    (unless (cdr found)
      (error "Cannot find the definition of %s in %s" symbol
             (buffer-file-name (car found))))
    found))

(defun mevedel-tool-emacs--definition-text ()
  "Return the definition at point, bounded by the source line limit."
  (let* ((start (line-beginning-position))
         (end (save-excursion (condition-case nil (progn (end-of-defun) (point))
                                (error (point-max)))))
         (line (line-number-at-pos start t))
         (lines (count-lines start end))
         (limit mevedel-tool-emacs-source-max-lines))
    (when (> lines limit)
      (setq end (save-excursion (goto-char start) (forward-line limit) (point))))
    (concat (format "%s:%d\n\n" (abbreviate-file-name (or buffer-file-name (buffer-name))) line)
            (buffer-substring-no-properties start end)
            (and (> lines limit)
                 (format "\n[… %d more lines of this definition not shown]" (- lines limit))))))

(defun mevedel-tool-emacs--source (kind object)
  "Return the source of OBJECT, a KIND (`function', `variable' or `library')."
  (if (eq kind 'library)
      (let ((file (mevedel-tool-emacs--library-file object t)))
        (with-temp-buffer
          (insert-file-contents file)
          (concat (format "%s\n\n" (abbreviate-file-name file)) (buffer-string))))
    (mevedel-tool-emacs--in-definition
        (mevedel-tool-emacs--find object (if (eq kind 'function) 'defun 'defvar))
      (mevedel-tool-emacs--definition-text))))

(defun mevedel-tool-emacs--location (kind object)
  "Return where OBJECT, a KIND, is defined."
  (if (eq kind 'library)
      (let ((file (mevedel-tool-emacs--library-file object t))
            (feature (intern-soft object)))
        (format "%s\nLoaded: %s" (abbreviate-file-name file)
                (if (and feature (featurep feature)) "yes" "no")))
    (let ((type (if (eq kind 'function) 'defun 'defvar)))
      (let ((file (mevedel-tool-emacs--file-of object type)))
        (cond ((null file)
               (format "%s has no recorded definition file (defined interactively?)" object))
              ((string-match-p "\\.c\\'" file)
               (condition-case err
                   (mevedel-tool-emacs--in-definition (mevedel-tool-emacs--find object type)
                     (format "%s:%d" buffer-file-name (line-number-at-pos nil t)))
                 (error (error-message-string err))))
              (t (mevedel-tool-emacs--in-definition (mevedel-tool-emacs--find object type)
                   (format "%s:%d" (abbreviate-file-name buffer-file-name)
                           (line-number-at-pos nil t)))))))))

;;;; Info sections and values

(defmacro mevedel-tool-emacs--in-info (&rest body)
  "Run BODY in a temporary Info buffer that is never displayed.
The user's *info* buffer, its history and every window stay as they
were."
  (declare (indent 0))
  `(with-temp-buffer
     (let ((Info-history nil)
           (Info-history-list Info-history-list)
           (Info-history-forward nil))
       (delay-mode-hooks (Info-mode))
       ,@body)))

(defun mevedel-tool-emacs--info (kind object)
  "Return the Info manual section documenting OBJECT, a KIND.
The index nodes are those `info-lookup' uses for Emacs Lisp symbols,
read in a temporary Info buffer."
  (when (eq kind 'library)
    (error "Libraries have no Info index entry; read their manual with EmacsManual"))
  (let* ((name (symbol-name object))
         (indexes (mapcar #'car (info-lookup->doc-spec 'symbol 'emacs-lisp-mode)))
         (found (cl-loop for index in indexes
                         thereis (mevedel-tool-emacs--in-info
                                   (ignore-errors
                                     (Info-goto-node index)
                                     (Info-menu name)
                                     (cons (format "(%s)%s"
                                                   (file-name-sans-extension
                                                    (file-name-nondirectory Info-current-file))
                                                   Info-current-node)
                                           (buffer-substring-no-properties
                                            (point-min) (point-max))))))))
    (unless found
      (error "No Info manual section for %s (looked in the indexes %s)" name
             (string-join indexes ", ")))
    (concat "Info node " (car found) "\n\n" (cdr found))))

(defun mevedel-tool-emacs--value (kind object)
  "Return the printed global value of OBJECT, a KIND."
  (unless (eq kind 'variable)
    (error "Only a variable has a value to read"))
  (if (default-boundp object)
      (format "%s's global value:\n%s" object
              (mevedel-tool-eval-print (default-value object)))
    (format "%s is void (it has no global value)" object)))

;;;; EmacsDescribe

(defconst mevedel-tool-emacs-aspects '("documentation" "source" "location" "info" "value")
  "What EmacsDescribe can read.")

(defun mevedel-tool-emacs-describe (args)
  "Answer the EmacsDescribe call ARGS (:name :kind :aspect)."
  (let* ((name (string-trim (or (plist-get args :name) "")))
         (aspect (or (plist-get args :aspect) "documentation")))
    (when (string-empty-p name) (error "The name argument must not be empty"))
    (unless (member aspect mevedel-tool-emacs-aspects)
      (error "The aspect argument must be one of %s, not %S"
             (string-join mevedel-tool-emacs-aspects ", ") aspect))
    (pcase-let ((`(,kind . ,object) (mevedel-tool-emacs--kind name (plist-get args :kind) aspect)))
      (pcase aspect
        ("documentation" (pcase kind
                           ('function
                            (concat (mevedel-tool-emacs--function-doc object)
                                    (and (mevedel-tool-emacs--variable-p object)
                                         (format "\n\n(%s is also a variable: ask with kind \
variable.)" object))))
                           ('variable (mevedel-tool-emacs--variable-doc object))
                           (_ (mevedel-tool-emacs--library-doc object))))
        ("source" (mevedel-tool-emacs--source kind object))
        ("location" (mevedel-tool-emacs--location kind object))
        ("info" (mevedel-tool-emacs--info kind object))
        ("value" (mevedel-tool-emacs--value kind object))))))

(defun mevedel-tool-emacs-check-describe (args)
  "Return `ask' for an EmacsDescribe call with ARGS asking for a value.
A value can hold a secret, so reading it always asks; other aspects
are decided as for any read-only tool."
  (and (equal (plist-get args :aspect) "value") 'ask))

;;;; EmacsFind

(defun mevedel-tool-emacs--components (pattern)
  "Return the matchers of the Orderless-style PATTERN, (REGEXP . FOLD) each.
Each space-separated component is a regexp, or a literal when it does
not compile; FOLD is non-nil unless it has an uppercase letter."
  (mapcar (lambda (component)
            (cons (condition-case nil
                      (progn (string-match-p component "") component)
                    (invalid-regexp (regexp-quote component)))
                  (let ((case-fold-search nil))
                    (not (string-match-p "[[:upper:]]" component)))))
          (split-string pattern " +" t)))

(defun mevedel-tool-emacs--matches-p (components name)
  "Return non-nil when every one of COMPONENTS matches NAME."
  (cl-every (lambda (c) (let ((case-fold-search (cdr c))) (string-match-p (car c) name)))
            components))

(defun mevedel-tool-emacs--libraries ()
  "Return the library names in local `load-path' directories, sorted."
  (let ((names (make-hash-table :test #'equal)))
    (dolist (dir load-path)
      (when (and (stringp dir) (not (file-remote-p dir)) (file-directory-p dir))
        (dolist (file (directory-files dir nil "\\.el\\(?:c\\|\\.gz\\)?\\'" t))
          (unless (string-match-p "\\`\\.\\|-\\(?:autoloads\\|pkg\\)\\.el" file)
            (puthash (replace-regexp-in-string "\\.el\\(?:c\\|\\.gz\\)?\\'" "" file) t names)))))
    (sort (hash-table-keys names) #'string<)))

(defun mevedel-tool-emacs--first-doc-line (symbol kind)
  "Return the first documentation line of SYMBOL as KIND, or nil."
  (let ((doc (ignore-errors
               (if (eq kind 'variable)
                   (documentation-property symbol 'variable-documentation t)
                 (documentation symbol t)))))
    (and (stringp doc) (car (split-string doc "\n")))))

(defun mevedel-tool-emacs-find (args)
  "Answer the EmacsFind call ARGS (:pattern :kind)."
  (let* ((pattern (string-trim (or (plist-get args :pattern) "")))
         (kind (or (plist-get args :kind) "function"))
         (components (mevedel-tool-emacs--components pattern))
         (matches nil))
    (unless components (error "The pattern argument must not be empty"))
    (pcase kind
      ("library"
       (setq matches (cl-remove-if-not (lambda (name) (mevedel-tool-emacs--matches-p components name))
                                       (mevedel-tool-emacs--libraries))))
      ((or "function" "command" "variable")
       (let ((test (pcase kind
                     ("function" #'fboundp)
                     ("command" #'commandp)
                     (_ #'mevedel-tool-emacs--variable-p))))
         (mapatoms (lambda (symbol)
                     (when (and (funcall test symbol)
                                (mevedel-tool-emacs--matches-p components (symbol-name symbol)))
                       (push symbol matches))))
         (setq matches (sort matches #'string<))))
      (_ (error "The kind argument must be function, command, variable or library, not %S" kind)))
    (if (null matches)
        (format "No %s name matches %S." kind pattern)
      (let ((shown (seq-take matches mevedel-tool-emacs-find-limit)))
        (concat (format "%d %s name%s match %S%s:\n" (length matches) kind
                        (if (cdr matches) "s" "") pattern
                        (if (> (length matches) (length shown))
                            (format " (the first %d shown; narrow the pattern)" (length shown))
                          ""))
                (mapconcat
                 (lambda (match)
                   (if (stringp match) match
                     (let ((line (mevedel-tool-emacs--first-doc-line
                                  match (if (equal kind "variable") 'variable 'function))))
                       (if line (format "%s — %s" match line) (symbol-name match)))))
                 shown "\n"))))))

;;;; EmacsManual

(defun mevedel-tool-emacs--info-directories ()
  "Return the directories of the Info manuals."
  (info-initialize)
  (delete-dups (cl-remove-if-not #'file-directory-p
                                 (append Info-directory-list Info-additional-directory-list))))

(defun mevedel-tool-emacs-manuals ()
  "Return the names of the installed Info manuals, sorted."
  (let ((names (make-hash-table :test #'equal)))
    (dolist (dir (mevedel-tool-emacs--info-directories))
      (dolist (file (directory-files dir nil "\\.info\\(?:\\.[a-z0-9]+\\)?\\'" t))
        (puthash (replace-regexp-in-string "\\.info\\(?:\\.[a-z0-9]+\\)?\\'" "" file) t names)))
    (sort (hash-table-keys names) #'string<)))

(defun mevedel-tool-emacs-node-text (manual node)
  "Return the text of NODE in MANUAL (or NODE written as (MANUAL)NODE)."
  (mevedel-tool-emacs--in-info
    (condition-case err
        (if manual (Info-find-node manual node t) (Info-goto-node node))
      (user-error (error "%s" (error-message-string err))))
    (buffer-substring-no-properties (point-min) (point-max))))

(defun mevedel-tool-emacs-nodes (manual)
  "Return the node names of MANUAL, in its order."
  (mevedel-tool-emacs--in-info
    (condition-case err
        (Info-find-node manual "Top" t)
      (user-error (error "%s" (error-message-string err))))
    (mapcar #'car (Info-toc-nodes Info-current-file))))

(defun mevedel-tool-emacs-manual (args)
  "Answer the EmacsManual call ARGS (:manual :node)."
  (let ((manual (plist-get args :manual))
        (node (plist-get args :node)))
    (cond
     ((and node (string-match-p "\\`(" node)) (mevedel-tool-emacs-node-text nil node))
     ((and manual node) (mevedel-tool-emacs-node-text manual node))
     (node (error "The node argument needs a manual (or write it as (MANUAL)NODE)"))
     (manual (let ((nodes (mevedel-tool-emacs-nodes manual)))
               (format "Manual %s has %d nodes:\n%s" manual (length nodes)
                       (string-join nodes "\n"))))
     (t (let ((manuals (mevedel-tool-emacs-manuals)))
          (format "%d Info manuals are installed:\n%s" (length manuals)
                  (string-join manuals "\n")))))))

;;;; Renderers

(defun mevedel-tool-emacs-render (name args result _render-data)
  "Render a call NAME (EmacsDescribe, EmacsFind, EmacsManual) with ARGS and RESULT."
  (list :header (concat name " "
                        (pcase name
                          ("EmacsDescribe" (format "%s%s" (or (plist-get args :name) "?")
                                                   (let ((aspect (plist-get args :aspect)))
                                                     (if aspect (format " (%s)" aspect) ""))))
                          ("EmacsFind" (format "%S%s" (or (plist-get args :pattern) "")
                                               (let ((kind (plist-get args :kind)))
                                                 (if kind (format " (%s)" kind) ""))))
                          (_ (string-join (delq nil (list (plist-get args :manual)
                                                          (plist-get args :node)))
                                          " › "))))
        :body (unless mevedel-tool-render-summary-only result)
        :expandable-p (and result (not (string-empty-p result)))
        :initially-collapsed-p t))

;;;; Declarations

(mevedel-define-tool EmacsDescribe
  :category "emacs"
  :groups '(emacs)
  :summary "Describe an Emacs function, variable or library: documentation, source, location, Info section or value."
  :description (concat
                "Describe one Emacs Lisp function, variable or library of the running Emacs. \
aspect: documentation (default; a library's Commentary), source (the definition's text), \
location (file and line; a library's file and whether it is loaded), info (its Info manual \
section) or value (a variable's global value; always asks the user). Without kind, a defined \
function is meant, else a variable, else (for source/location) a library. Manual: "
                mevedel-tool-eval-manual-address)
  :args ((name string :required "The symbol or library name")
         (kind string :optional "function, variable or library (default: inferred)"
               :enum ("function" "variable" "library"))
         (aspect string :optional "What to read (default documentation)"
                 :enum ("documentation" "source" "location" "info" "value")))
  :read-only-p t
  :max-result-size 30000
  :check-permission #'mevedel-tool-emacs-check-describe
  :function #'mevedel-tool-emacs-describe
  :renderer #'mevedel-tool-emacs-render)

(mevedel-define-tool EmacsFind
  :category "emacs"
  :groups '(emacs)
  :summary "Find Emacs functions, commands, variables or libraries by name (Orderless-style pattern)."
  :description (concat
                "List the Emacs functions, commands, variables or libraries (in load-path) whose \
names match an Orderless-style pattern: space-separated components, each a regexp or literal, \
all matching in any order (case-insensitive unless a component has an uppercase letter). \
Functions and commands come with their first documentation line. Manual: "
                mevedel-tool-eval-manual-address)
  :args ((pattern string :required "Components separated by spaces, e.g. \"buffer substring\"")
         (kind string :optional "function (default), command, variable or library"
               :enum ("function" "command" "variable" "library")))
  :read-only-p t
  :max-result-size 30000
  :function #'mevedel-tool-emacs-find
  :renderer #'mevedel-tool-emacs-render)

(mevedel-define-tool EmacsManual
  :category "emacs"
  :groups '(emacs)
  :summary "Read Emacs's Info manuals: list them, list a manual's nodes, or read one node."
  :description (concat
                "Read the Info manuals installed in this Emacs. No arguments: list the manuals. \
manual: list its nodes. manual and node (or node as \"(manual)Node\"): that node's text. The \
user's own Info window is left alone. Manual: " mevedel-tool-eval-manual-address)
  :args ((manual string :optional "Manual name, e.g. \"elisp\"")
         (node string :optional "Node name, e.g. \"Buffer Contents\""))
  :read-only-p t
  :max-result-size 30000
  :function #'mevedel-tool-emacs-manual
  :renderer #'mevedel-tool-emacs-render)

(provide 'mevedel-tool-emacs)
;;; mevedel-tool-emacs.el ends here
