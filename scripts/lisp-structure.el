;;; lisp-structure.el --- Fail on load-order wiring and cycles  -*- lexical-binding: t; -*-

;;; Commentary:

;; `make lint' runs it: `emacs -Q --batch -l scripts/lisp-structure.el [DIRECTORY]'.
;;
;; Reads every DIRECTORY/*.el (default: the lisp/ next to scripts/)
;; with `read' and checks two rules, printing one finding per line and
;; exiting 1 when there is any:
;;
;; - No file sets, in its top-level forms, a variable that another
;;   file defines (`setq', `setq-default', `set', `setf' of the
;;   variable or of its `alist-get' or `plist-get', `push',
;;   `cl-pushnew', `add-to-list').  Such wiring works only when the
;;   files load in one order; a file registers with the owner's hook
;;   (`add-hook') or registration function instead.
;;
;; - The graph of the files, with an edge for each `require' anywhere
;;   in a file and for each `declare-function' naming another file,
;;   has no cycle.  A `declare-function' is a dependency the byte
;;   compiler does not see; counted, the files still form layers.

;;; Code:

(require 'cl-lib)
(require 'subr-x)

(defconst lisp-structure-progn-forms '(progn eval-and-compile eval-when-compile)
  "Forms whose body runs at load time as if it were at top level.")

(defconst lisp-structure-definers
  '(defvar defcustom defconst defvar-local defvar-keymap define-minor-mode)
  "Forms defining the variable they name (a `defvar' only with a value).")

(defvar lisp-structure-findings 0
  "Number of findings printed so far.")

(defun lisp-structure-report (format-string &rest args)
  "Print one finding, FORMAT-STRING applied to ARGS, and count it."
  (cl-incf lisp-structure-findings)
  (message "%s" (apply #'format format-string args)))

(defun lisp-structure-read (file)
  "Return the top-level forms of FILE as a list of (FORM START END).
START and END delimit the form's text; the body of one of
`lisp-structure-progn-forms' or of `with-eval-after-load' gives its
own forms with the same bounds."
  (with-temp-buffer
    (insert-file-contents file)
    (set-syntax-table emacs-lisp-mode-syntax-table)
    (let ((forms nil))
      (condition-case nil
          (while t
            (forward-comment (buffer-size))
            (let* ((start (point))
                   (form (read (current-buffer))))
              (push (list form start (point)) forms)))
        (end-of-file nil))
      (cl-mapcan (lambda (entry)
                   (mapcar (lambda (form) (cons form (cdr entry)))
                           (lisp-structure-top (car entry))))
                 (nreverse forms)))))

(defun lisp-structure-top (form)
  "Return the list of forms that run at load time for top-level FORM."
  (pcase form
    (`(with-eval-after-load ,_ . ,body) (cl-mapcan #'lisp-structure-top body))
    (`(,(pred (memq _ lisp-structure-progn-forms)) . ,body)
     (cl-mapcan #'lisp-structure-top body))
    (_ (list form))))

(defun lisp-structure-line (file position)
  "Return the line of POSITION in FILE."
  (with-temp-buffer
    (insert-file-contents file)
    (line-number-at-pos position)))

(defun lisp-structure-place-variable (place)
  "Return the variable that a setter of PLACE assigns, or nil."
  (pcase place
    ((pred symbolp) place)
    (`(alist-get ,_ ,(and (pred symbolp) variable) . ,_) variable)
    (`(plist-get ,(and (pred symbolp) variable) . ,_) variable)))

(defun lisp-structure-set-variables (form)
  "Return the variables assigned by top-level FORM."
  (pcase form
    (`(,(or 'setq 'setq-default) . ,pairs)
     (cl-loop for (variable _) on pairs by #'cddr collect variable))
    (`(setf . ,pairs)
     (delq nil (cl-loop for (place _) on pairs by #'cddr
                        collect (lisp-structure-place-variable place))))
    (`(,(or 'push 'cl-pushnew) ,_ ,place . ,_)
     (delq nil (list (lisp-structure-place-variable place))))
    (`(,(or 'set 'add-to-list) (quote ,(and (pred symbolp) variable)) . ,_)
     (list variable))))

(defun lisp-structure-defined-variable (form)
  "Return the variable defined by top-level FORM, or nil."
  (pcase form
    (`(defvar ,_) nil)
    (`(,(pred (memq _ lisp-structure-definers)) ,(and (pred symbolp) name) . ,_) name)))

(defun lisp-structure-walk (form function)
  "Call FUNCTION on every list within FORM, FORM included, outside quoted data."
  (when (consp form)
    (funcall function form)
    (unless (eq (car form) 'quote)
      (while (consp form)
        (lisp-structure-walk (car form) function)
        (setq form (cdr form))))))

(defun lisp-structure-edges (forms features)
  "Return the dependency edges of FORMS on FEATURES, the files checked.
Each is (FEATURE WHAT START END): WHAT says why, START and END bound
the top-level form it is in."
  (let ((edges nil))
    (pcase-dolist (`(,form ,start ,end) forms)
      (lisp-structure-walk
       form
       (lambda (form)
         (pcase-let ((`(,feature ,what)
                      (pcase form
                        (`(require (quote ,(and (pred symbolp) feature)) . ,_)
                         (list feature (format "requires %s" feature)))
                        (`(declare-function ,name ,(and (pred stringp) file) . ,_)
                         (let ((feature (intern (file-name-base
                                                 (string-remove-prefix "ext:" file)))))
                           (list feature (format "declares %s from %s" name feature)))))))
           (when (memq feature features)
             (push (list feature what start end) edges))))))
    (nreverse edges)))

(defun lisp-structure-components (nodes successors)
  "Return the strongly connected components of the graph on NODES.
SUCCESSORS is a function of a node returning the nodes its edges reach
\(Tarjan's algorithm)."
  (let ((index (make-hash-table :test #'eq))
        (low (make-hash-table :test #'eq))
        (stack nil) (on-stack (make-hash-table :test #'eq))
        (next 0) (components nil))
    (cl-labels
        ((visit (node)
           (puthash node next index)
           (puthash node next low)
           (cl-incf next)
           (push node stack)
           (puthash node t on-stack)
           (dolist (successor (funcall successors node))
             (cond ((not (gethash successor index))
                    (visit successor)
                    (puthash node (min (gethash node low) (gethash successor low)) low))
                   ((gethash successor on-stack)
                    (puthash node (min (gethash node low) (gethash successor index)) low))))
           (when (= (gethash node low) (gethash node index))
             (let ((component nil) member)
               (while (progn (setq member (pop stack))
                             (remhash member on-stack)
                             (push member component)
                             (not (eq member node))))
               (push component components)))))
      (dolist (node nodes)
        (unless (gethash node index)
          (visit node))))
    components))

(defun lisp-structure-name (file)
  "Return FILE's name as the findings show it, with its directory's name."
  (file-relative-name file (file-name-directory
                            (directory-file-name (file-name-directory file)))))

(defun lisp-structure-edge-line (file edge)
  "Return the line in FILE of EDGE's `require' or `declare-function'.
The form found in EDGE's top-level form, else that form's first line."
  (with-temp-buffer
    (insert-file-contents file)
    (goto-char (nth 2 edge))
    (let ((what (nth 1 edge)))
      (if (re-search-forward
           (if (string-prefix-p "requires " what)
               (format "(require '%s\\_>" (regexp-quote (symbol-name (car edge))))
             (format "(declare-function[ \t\n]+%s\\_>"
                     (regexp-quote (cadr (split-string what)))))
           (nth 3 edge) t)
          (line-number-at-pos (match-beginning 0))
        (line-number-at-pos (nth 2 edge))))))

(defun lisp-structure-check (directory)
  "Check the *.el files of DIRECTORY; print the findings and return their number."
  (let* ((files (directory-files directory t "\\`[^.].*\\.el\\'"))
         (features (mapcar (lambda (file) (intern (file-name-base file))) files))
         (forms (mapcar #'lisp-structure-read files))
         (owners (make-hash-table :test #'eq))
         (graph (make-hash-table :test #'eq)))
    (cl-loop for file in files for entries in forms do
             (dolist (entry entries)
               (when-let* ((variable (lisp-structure-defined-variable (car entry))))
                 (unless (gethash variable owners)
                   (puthash variable file owners)))))
    (cl-loop for file in files for entries in forms do
             (dolist (entry entries)
               (dolist (variable (lisp-structure-set-variables (car entry)))
                 (when-let* ((owner (gethash variable owners))
                             ((not (equal owner file))))
                   (lisp-structure-report
                    "%s:%d: sets %s, defined in %s, at load time; %s"
                    (lisp-structure-name file) (lisp-structure-line file (nth 1 entry))
                    variable (file-name-nondirectory owner)
                    "register through the owner's hook or function instead")))))
    (cl-loop for feature in features for entries in forms do
             (puthash feature
                      (cl-remove feature (lisp-structure-edges entries features) :key #'car)
                      graph))
    (dolist (component (lisp-structure-components
                        features
                        (lambda (feature) (delete-dups (mapcar #'car (gethash feature graph))))))
      (when (cdr component)
        (let ((members (sort component #'string<)))
          (lisp-structure-report "cycle of %d files: %s"
                                 (length members) (mapconcat #'symbol-name members " "))
          (dolist (feature members)
            (let ((file (expand-file-name (format "%s.el" feature) directory)))
              (dolist (edge (gethash feature graph))
                (when (memq (car edge) members)
                  (message "  %s:%d: %s" (lisp-structure-name file)
                           (lisp-structure-edge-line file edge)
                           (nth 1 edge)))))))))
    lisp-structure-findings))

(let* ((directory (or (pop command-line-args-left)
                      (expand-file-name "../lisp" (file-name-directory load-file-name))))
       (count (lisp-structure-check directory)))
  (message "lisp-structure: %s" (if (zerop count) "ok" (format "%d finding(s)" count)))
  (kill-emacs (if (zerop count) 0 1)))

;;; lisp-structure.el ends here
