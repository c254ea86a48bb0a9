;;; mevedel-tool-code.el --- Imenu, Treesitter and Xref  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Code navigation through Emacs's own machinery, on the buffer that
;; visits the file: the user's buffer when there is one (its unsaved
;; text included), else a buffer visited for the call without being
;; displayed and killed afterwards.  No window changes, and the user's
;; narrowing and point stay as they were.
;;
;; Imenu lists the buffer's whole index, every nesting level, each leaf
;; prefixed with its category path ("Class Foo > method bar") and given
;; its whole-buffer line number even when the buffer is narrowed.  Only
;; Imenu's own special entries (*Rescan*) are skipped, by the negative
;; position that marks them.  The index is computed afresh.
;;
;; Treesitter shows the syntax node at a line and display column (a
;; tab counts as the columns it displays; a line or column the file
;; lacks is an error, never the nearest position) with its ancestors,
;; or the whole file's tree of named nodes.  The whole tree is built up
;; to `mevedel-tool-code-treesit-node-limit' nodes and then says it was
;; truncated.  The buffer's own parser is used; a buffer without one
;; gets a temporary parser for the language its mode names (deleted
;; afterwards).
;;
;; Xref finds definitions or references through the buffer's Xref
;; backend.  Emacs Lisp references are searched with the module's Grep
;; in the background (the files and modified buffers' texts) below the
;; recognised project's root, or the file's directory, without
;; registering a project.  A buffer without a usable backend (only etags, with no
;; tags table) says so.  Manual: docs/tools/emacs.md.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'imenu)
(require 'project)
(require 'treesit)
(require 'xref)
(require 'mevedel-core)
(require 'mevedel-pipeline)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)

(defgroup mevedel-tool-code nil
  "The code navigation tools: Imenu, Treesitter and Xref."
  :group 'mevedel-tool
  :prefix "mevedel-tool-code-")

(defcustom mevedel-tool-code-treesit-node-limit 5000
  "Most nodes a whole-file Treesitter tree is built from before it is cut."
  :type 'natnum)

(defcustom mevedel-tool-code-treesit-text-max 60
  "Longest leaf text shown beside a node in a Treesitter tree."
  :type 'natnum)

(defcustom mevedel-tool-code-treesit-languages
  '((js-json-mode . json) (js-mode . javascript) (sh-mode . bash) (c++-mode . cpp)
    (emacs-lisp-mode . elisp) (typescript-mode . typescript))
  "Tree-sitter language of major modes whose name does not say it.
Other modes use their name without -ts-mode or -mode (`python-mode':
python)."
  :type '(alist :key-type symbol :value-type symbol))

;;;; Buffers

(defun mevedel-tool-code--buffer (file)
  "Return (BUFFER . VISITED) for FILE: VISITED non-nil when made for this call."
  (let ((file (expand-file-name file)))
    (or (when-let* ((buffer (find-buffer-visiting file))) (cons buffer nil))
        (progn
          (unless (file-exists-p file) (error "No such file: %s" file))
          (when (file-directory-p file) (error "%s is a directory, not a file" file))
          (let ((enable-local-variables :safe)
                (large-file-warning-threshold nil))
            (cons (find-file-noselect file) t))))))

(defvar mevedel-tool-code--directory nil
  "The caller's `default-directory' while a tool works in a file's buffer.
Listed file names are relative to it.")

(defmacro mevedel-tool-code--in-file (file &rest body)
  "Run BODY in the buffer visiting FILE, widened, point and windows kept.
File buffers that BODY's call made (FILE's own, or those a backend
visited) are killed afterwards unless they were modified."
  (declare (indent 1))
  `(let* ((before (buffer-list))
          (mevedel-tool-code--directory default-directory)
          (buffer (car (mevedel-tool-code--buffer ,file))))
     (unwind-protect
         (save-window-excursion
           (with-current-buffer buffer
             (save-excursion
               (save-restriction
                 (widen)
                 ,@body))))
       (dolist (made (buffer-list))
         (unless (or (memq made before) (not (buffer-file-name made)) (buffer-modified-p made))
           (kill-buffer made))))))

(defun mevedel-tool-code--display-file (file)
  "Return FILE relative to the caller's directory when inside it."
  (let ((dir (or mevedel-tool-code--directory default-directory)))
    (if (and (stringp file) (file-in-directory-p file dir))
        (file-relative-name file dir)
      file)))

;;;; Imenu

(defun mevedel-tool-code--imenu-position (item)
  "Return the buffer position of the Imenu leaf ITEM, or nil."
  (let ((pos (if (and (consp (cdr item)) (not (imenu--subalist-p item)))
                 (cadr item)           ; a special item (NAME POS FN . ARGS)
               (cdr item))))
    (cond ((markerp pos) (marker-position pos))
          ((overlayp pos) (overlay-start pos))
          ((numberp pos) pos))))

(defun mevedel-tool-code--imenu-leaves (index)
  "Return the leaf entries of the Imenu INDEX as (PATH . POSITION), in order.
PATH is the list of names from the top category to the leaf.  Entries
with a negative position (Imenu's *Rescan*) are skipped."
  (let ((leaves nil)
        (stack (list (cons nil index))))
    (while stack
      (pcase-let ((`(,path . ,items) (pop stack)))
        (while items
          (let ((item (pop items)))
            (if (imenu--subalist-p item)
                (progn
                  ;; Finish this level after the sub-list, in order.
                  (push (cons path items) stack)
                  (setq stack (cons (cons (cons (car item) path) (cdr item)) stack)
                        items nil))
              (let ((pos (mevedel-tool-code--imenu-position item)))
                (when (and pos (>= pos 0))
                  (push (cons (reverse (cons (car item) path)) pos) leaves))))))))
    (nreverse leaves)))

(defun mevedel-tool-code--lines (positions)
  "Return a hash table from each of POSITIONS to its whole-buffer line.
Positions are visited in order, counting newlines between neighbours
once, so the cost is one pass over the buffer."
  (let ((lines (make-hash-table :size (length positions)))
        (line 1)
        (bol (point-min)))
    (dolist (pos (sort (delete-dups (copy-sequence positions)) #'<))
      (let ((start (save-excursion (goto-char (min pos (point-max))) (line-beginning-position))))
        (setq line (+ line (count-lines bol start))
              bol start)
        (puthash pos line lines)))
    lines))

(defun mevedel-tool-code-imenu (args)
  "Answer the Imenu call ARGS (:file_path)."
  (let ((file (plist-get args :file_path)))
    (mevedel-tool-code--in-file file
      (let* ((index (condition-case err
                        (let ((imenu-auto-rescan t)
                              (imenu-auto-rescan-maxout most-positive-fixnum))
                          (imenu--make-index-alist t))
                      (error (error "Imenu is not available in %s (%s): %s"
                                    (mevedel-tool-code--display-file file) major-mode
                                    (error-message-string err)))))
             (leaves (mevedel-tool-code--imenu-leaves index))
             (lines (mevedel-tool-code--lines (mapcar #'cdr leaves))))
        (if (null leaves)
            (format "%s (%s) has no Imenu entries." (mevedel-tool-code--display-file file)
                    major-mode)
          (concat (format "%s: %d Imenu entries (%s)\n" (mevedel-tool-code--display-file file)
                          (length leaves) major-mode)
                  (mapconcat (lambda (leaf)
                               (format "%d: %s" (gethash (cdr leaf) lines)
                                       (string-join (car leaf) " > ")))
                             leaves "\n")))))))

;;;; Treesitter

(defun mevedel-tool-code--language (language)
  "Return the tree-sitter language for the current buffer (or LANGUAGE)."
  (cond (language (intern language))
        ((car (treesit-parser-list)) (treesit-parser-language (car (treesit-parser-list))))
        ((alist-get major-mode mevedel-tool-code-treesit-languages))
        (t (intern (replace-regexp-in-string "\\(?:-ts\\)?-mode\\'" ""
                                             (symbol-name major-mode))))))

(defun mevedel-tool-code--parser (language)
  "Return (PARSER . TEMPORARY) for LANGUAGE in the current buffer, or signal."
  (or (when-let* ((parser (cl-find language (treesit-parser-list)
                                   :key #'treesit-parser-language)))
        (cons parser nil))
      (if (treesit-language-available-p language)
          (cons (treesit-parser-create language nil t) t)
        (error "No tree-sitter grammar for %s is installed (the buffer is in %s)"
               language major-mode))))

(defun mevedel-tool-code--position (line column)
  "Return the position of LINE (from 1) and display COLUMN (from 0), or signal.
A column inside a tab names the tab.  A LINE or COLUMN the buffer does
not have is an error."
  (let ((lines (count-lines (point-min) (point-max))))
    (unless (and (integerp line) (<= 1 line (max lines 1)))
      (error "Line %s does not exist: the file has %d lines" line lines))
    (goto-char (point-min))
    (forward-line (1- line))
    (if (null column)
        (progn (skip-chars-forward " \t") (point))
      (let ((width (save-excursion (end-of-line) (current-column))))
        (unless (and (integerp column) (<= 0 column width))
          (error "Column %s does not exist: line %d has display columns 0-%d"
                 column line width))
        (when (> (move-to-column column) column)
          (backward-char))
        (point)))))

(defun mevedel-tool-code--place (pos lines)
  "Return POS as LINE:COL, its line from LINES (see `mevedel-tool-code--lines')."
  (save-excursion
    (goto-char pos)
    (format "%d:%d" (gethash pos lines) (current-column))))

(defun mevedel-tool-code--node-line (node lines)
  "Return NODE's line in a listing: field, type, range and short leaf text.
LINES maps the node's start and end to their lines."
  (let ((field (treesit-node-field-name node))
        (text (and (zerop (treesit-node-child-count node t))
                   (treesit-node-text node t))))
    (concat (and field (concat field ": "))
            (treesit-node-type node) " "
            (mevedel-tool-code--place (treesit-node-start node) lines) "-"
            (mevedel-tool-code--place (treesit-node-end node) lines)
            (and text (<= (length text) mevedel-tool-code-treesit-text-max)
                 (not (string-match-p "\n" text))
                 (format " %S" text)))))

(defun mevedel-tool-code--node-lines (nodes)
  "Return the listing lines of NODES, a list of (NODE . DEPTH).
Their line numbers are counted in one pass over the buffer."
  (let ((lines (mevedel-tool-code--lines
                (mapcan (lambda (n) (list (treesit-node-start (car n)) (treesit-node-end (car n))))
                        nodes))))
    (mapcar (lambda (n)
              (concat (make-string (* 2 (cdr n)) ?\s)
                      (mevedel-tool-code--node-line (car n) lines)))
            nodes)))

(defun mevedel-tool-code--tree (root)
  "Return the named-node outline of ROOT, cut at the node limit."
  (let ((stack (list (cons root 0)))
        (limit mevedel-tool-code-treesit-node-limit)
        (count 0)
        (nodes nil))
    (while (and stack (< count limit))
      (let ((entry (pop stack)))
        (cl-incf count)
        (push entry nodes)
        (setq stack (nconc (mapcar (lambda (child) (cons child (1+ (cdr entry))))
                                   (treesit-node-children (car entry) t))
                           stack))))
    (concat (string-join (mevedel-tool-code--node-lines (nreverse nodes)) "\n")
            (when stack
              (format "\n[Tree truncated after %d nodes (mevedel-tool-code-treesit-node-limit); \
ask for a line and column to see one part]" limit)))))

(defun mevedel-tool-code--at (node)
  "Return the description of NODE, the node at a position, with its ancestors."
  (let ((ancestors nil)
        (parent (treesit-node-parent node)))
    (while parent
      (push (cons parent 1) ancestors)
      (setq parent (treesit-node-parent parent)))
    (let* ((children (mapcar (lambda (c) (cons c 1)) (treesit-node-children node t)))
           (listed (mevedel-tool-code--node-lines
                    (append (list (cons node 0)) ancestors children))))
      (concat "Node: " (car listed) "\n"
              (format "Text: %S\n" (truncate-string-to-width (treesit-node-text node t)
                                                             400 nil nil "…"))
              (when ancestors
                (concat "Ancestors (outermost first):\n"
                        (string-join (seq-take (cdr listed) (length ancestors)) "\n")
                        "\n"))
              (when children
                (concat "Children:\n"
                        (string-join (nthcdr (1+ (length ancestors)) listed) "\n")))))))

(defun mevedel-tool-code-treesit (args)
  "Answer the Treesitter call ARGS (:file_path :line :column :language)."
  (let ((file (plist-get args :file_path))
        (line (plist-get args :line))
        (column (plist-get args :column)))
    (when (and column (not line)) (error "A column needs a line"))
    (mevedel-tool-code--in-file file
      (let* ((language (mevedel-tool-code--language (plist-get args :language)))
             (parser (mevedel-tool-code--parser language)))
        (unwind-protect
            (let ((root (treesit-parser-root-node (car parser))))
              (if (null line)
                  (concat (format "%s (%s):\n" (mevedel-tool-code--display-file file) language)
                          (mevedel-tool-code--tree root))
                (let ((pos (mevedel-tool-code--position line column)))
                  ;; The smallest named node holding the character there.
                  (mevedel-tool-code--at
                   (treesit-node-descendant-for-range root pos (min (1+ pos) (point-max)) t)))))
          (when (cdr parser) (treesit-parser-delete (car parser))))))))

;;;; Xref

(defcustom mevedel-tool-code-xref-timeout-ms 30000
  "Milliseconds before an Emacs Lisp reference search stops with what it found."
  :type 'natnum)

(defconst mevedel-tool-code--symbol-edge "[^\\w\\-+*/:<>=!?$%&~^.]"
  "A character no Emacs Lisp symbol name has, as a class of the module's regex.")

(defun mevedel-tool-code--xref-root (file)
  "Return the directory Emacs Lisp references to FILE's symbols are searched in.
That is the root of the project `project-current' recognises, without
prompting or remembering it, else FILE's directory."
  (let ((dir (file-name-directory (expand-file-name file))))
    (if-let* ((project (project-current nil dir)))
        (expand-file-name (project-root project))
      dir)))

(defun mevedel-tool-code--xref-line (item)
  "Return the listing line of the xref ITEM: file:line:column: summary."
  (let* ((location (xref-item-location item))
         (marker (condition-case nil (xref-location-marker location) (error nil))))
    (if (not marker)
        (format "%s: %s" (xref-location-group location) (xref-item-summary item))
      (with-current-buffer (marker-buffer marker)
        (save-excursion
          (save-restriction
            (widen)
            (goto-char marker)
            (format "%s:%d:%d: %s"
                    (mevedel-tool-code--display-file (or buffer-file-name (buffer-name)))
                    (line-number-at-pos nil t) (current-column)
                    (string-trim (substring-no-properties (xref-item-summary item))))))))))

(defun mevedel-tool-code--listing (kind identifier backend lines)
  "Return the Xref answer: a header for KIND of IDENTIFIER by BACKEND, then LINES."
  (if (null lines)
      (format "No %s of %s found (%s backend)." kind identifier backend)
    (concat (format "%d %s of %s (%s backend):\n" (length lines)
                    (if (cdr lines) kind (string-remove-suffix "s" kind))
                    identifier backend)
            (string-join lines "\n"))))

(defun mevedel-tool-code--unsaved-texts (root)
  "Return (TRUENAME TEXT NEW-P) for each modified local buffer below ROOT.
The module's Grep searches those texts instead of the files."
  (cl-loop for buffer in (buffer-list)
           for file = (buffer-file-name buffer)
           when (and file (buffer-modified-p buffer) (not (file-remote-p file))
                     (file-in-directory-p file root))
           collect (list (file-truename file)
                         (with-current-buffer buffer
                           (save-restriction
                             (widen)
                             (buffer-substring-no-properties (point-min) (point-max))))
                         (not (file-exists-p file)))))

(defun mevedel-tool-code--reference-line (identifier match)
  "Return the listing line of IDENTIFIER's Grep MATCH (FILE:LINE:TEXT), or nil."
  (when (string-match "\\`\\(.+?\\):\\([0-9]+\\):\\(.*\\)\\'" match)
    (let* ((file (match-string 1 match))
           (line (match-string 2 match))
           (text (match-string 3 match))
           (start (with-syntax-table emacs-lisp-mode-syntax-table
                    (string-match (concat "\\_<" (regexp-quote identifier) "\\_>") text))))
      (format "%s:%s:%d: %s" (mevedel-tool-code--display-file file) line
              (if start
                  (with-temp-buffer (insert (substring text 0 start)) (current-column))
                0)
              (string-trim text)))))

(defun mevedel-tool-code--elisp-references (identifier root callback)
  "Search the Emacs Lisp files below ROOT for IDENTIFIER; answer CALLBACK.
The module's Grep runs in the background over the files and the
modified buffers' texts.  Return the search's request id."
  (let* ((directory mevedel-tool-code--directory)
         (edge mevedel-tool-code--symbol-edge)
         (pattern (format "(^|%s)%s($|%s)" edge
                          (replace-regexp-in-string "[][\\\\.+*?(){}|^$#&~-]" "\\\\\\&" identifier)
                          edge)))
    (mevedel-core-search-grep
     (directory-file-name (file-truename root)) (directory-file-name root)
     (list :pattern pattern :glob "*.el" :output-mode "content" :before 0 :after 0
           :line-numbers t :head-limit 0 :offset 0)
     mevedel-tool-code-xref-timeout-ms
     (lambda (status value)
       (funcall
        callback
        (if (not (eq status 'ok))
            (list :result (format "Error: the reference search failed: %s" (cadr value))
                  :status 'error)
          (let* ((mevedel-tool-code--directory directory)
                 (lines (delq nil (mapcar (lambda (match)
                                            (mevedel-tool-code--reference-line identifier match))
                                          (split-string (plist-get value :text) "\n" t)))))
            (concat (mevedel-tool-code--listing "references" identifier 'elisp
                                                (sort lines #'string<))
                    (and (plist-get value :partial)
                         (format "\n[The search stopped after %d ms: the list may be incomplete]"
                                 mevedel-tool-code-xref-timeout-ms)))))))
     (mevedel-tool-code--unsaved-texts root))))

(defun mevedel-tool-code--xref-check (backend kind file)
  "Signal unless BACKEND of FILE's buffer can find KIND."
  (cond
   ((null backend)
    (error "Unsupported: %s (%s) has no Xref backend" (mevedel-tool-code--display-file file)
           major-mode))
   ((and (eq backend 'etags) (not (or tags-file-name tags-table-list)))
    (error "Unsupported: %s (%s) has only the etags Xref backend and no tags table is \
loaded; use Grep instead" (mevedel-tool-code--display-file file) major-mode))
   ((and (file-remote-p default-directory)
         (not (and (eq backend 'elisp) (equal kind "references"))))
    (error "Unsupported: remote Xref supports only Emacs Lisp references"))))

(defun mevedel-tool-code-xref (callback args)
  "Answer the Xref call ARGS to CALLBACK.
ARGS holds :file_path, :kind, :identifier, :line and :column.
Emacs Lisp references are searched in the background; everything
else is answered at once."
  (condition-case err
      (let ((file (plist-get args :file_path))
            (kind (or (plist-get args :kind) "definitions")))
        (unless (member kind '("definitions" "references"))
          (error "The kind argument must be definitions or references, not %S" kind))
        (mevedel-tool-code--in-file file
          (let* ((backend (xref-find-backend))
                 (identifier
                  (or (plist-get args :identifier)
                      (and (plist-get args :line)
                           (progn (goto-char (mevedel-tool-code--position
                                              (plist-get args :line) (plist-get args :column)))
                                  (and backend (xref-backend-identifier-at-point backend))))
                      (error "Give an identifier, or a line (and column) to take it from"))))
            (mevedel-tool-code--xref-check backend kind file)
            (if (and (equal kind "references") (eq backend 'elisp))
                (let ((id (mevedel-tool-code--elisp-references
                           (substring-no-properties identifier)
                           (mevedel-tool-code--xref-root buffer-file-name) callback)))
                  (mevedel-pipeline-add-canceller (lambda () (mevedel-core-search-cancel id))))
              (funcall
               callback
               (mevedel-tool-code--listing
                kind identifier backend
                (mapcar #'mevedel-tool-code--xref-line
                        (condition-case nil
                            (if (equal kind "definitions")
                                (xref-backend-definitions backend identifier)
                              (xref-backend-references backend identifier))
                          (cl-no-applicable-method
                           (error "Unsupported: the %s Xref backend cannot find %s"
                                  backend kind))))))))))
    (error (funcall callback (list :result (concat "Error: " (error-message-string err))
                                   :status 'error)))))

;;;; Renderer

(defun mevedel-tool-code-render (name args result _render-data)
  "Render an Imenu, Treesitter or Xref call NAME with ARGS and RESULT."
  (let ((file (mevedel-tool-render-display-path (or (plist-get args :file_path) "?")))
        (line (plist-get args :line)))
    (list :header (concat name " " file
                          (and line (format ":%s" line))
                          (and (plist-get args :column) (format ":%s" (plist-get args :column)))
                          (pcase name
                            ("Xref" (format " %s %s" (or (plist-get args :kind) "definitions")
                                            (or (plist-get args :identifier) "at point")))
                            (_ "")))
          :body (unless mevedel-tool-render-summary-only result)
          :expandable-p (and result (not (string-empty-p result)))
          :initially-collapsed-p t)))

;;;; Declarations

(mevedel-define-tool Imenu
  :category "code"
  :groups '(code)
  :summary "Outline of a file from Emacs's Imenu: every definition with its category path and line."
  :description "Outline a file with Emacs's Imenu index, in the buffer that visits it (unsaved \
text included): every entry at every nesting level, each as \"LINE: Category > ... > name\" \
with whole-file line numbers. Manual: mevedel://tools/emacs.md"
  :args ((file_path path :required "The file to outline"))
  :read-only-p t
  :max-result-size 20000
  :function #'mevedel-tool-code-imenu
  :renderer #'mevedel-tool-code-render)

(mevedel-define-tool Treesitter
  :category "code"
  :groups '(code)
  :summary "Tree-sitter syntax tree of a file, or the syntax node at a line and column."
  :description "Show a file's tree-sitter syntax tree as named nodes (type, field, \
LINE:COL-LINE:COL range, short leaf text; cut at a node limit, which it says), or, with line \
\(from 1) and optionally column (display column from 0, tabs counted as displayed), the node \
there with its ancestors and children. A line or column the file lacks is an error. Uses the \
buffer visiting the file (unsaved text included). Manual: mevedel://tools/emacs.md"
  :args ((file_path path :required "The file to parse")
         (line integer :optional "Line of the node, from 1")
         (column integer :optional "Display column of the node, from 0 (default: the line's first non-blank)")
         (language string :optional "Tree-sitter language (default: the buffer's)"))
  :read-only-p t
  :max-result-size 30000
  :function #'mevedel-tool-code-treesit
  :renderer #'mevedel-tool-code-render)

(mevedel-define-tool Xref
  :category "code"
  :groups '(code)
  :summary "Find definitions or references of a symbol through Emacs's Xref backend for the file."
  :description "Find the definitions (default) or references of an identifier through the \
Xref backend of the buffer visiting file_path (Emacs Lisp, eglot, etags with a tags table...). \
Give identifier, or line and column to take the identifier there. Answers \
\"file:line:column: summary\" lines; a buffer without a usable backend says so. Emacs Lisp \
references are searched in the file's project (or directory). Manual: mevedel://tools/emacs.md"
  :args ((file_path path :required "A file whose buffer's backend answers")
         (kind string :optional "definitions (default) or references"
               :enum ("definitions" "references"))
         (identifier string :optional "The identifier (default: the one at line/column)")
         (line integer :optional "Line to take the identifier from, from 1")
         (column integer :optional "Display column on that line, from 0"))
  :read-only-p t
  :async-p t
  :max-result-size 20000
  :function #'mevedel-tool-code-xref
  :renderer #'mevedel-tool-code-render)

(provide 'mevedel-tool-code)
;;; mevedel-tool-code.el ends here
