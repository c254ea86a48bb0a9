;;; mevedel-markdown.el --- The assistant's Markdown as the view shows it  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The model writes Markdown.  The data buffer keeps it as written (the
;; provider reads it again); the view shows it rendered: headings,
;; emphasis, inline code, lists, quotes, rules, tables, links and URLs
;; as buttons, fenced code blocks fontified by their language's major
;; mode.  Markup is removed, not hidden, so what is copied from the
;; view is the text as read: a code block's lines are its source,
;; without its fences (its header also has a copy button).
;;
;; Rendering is line-local: apart from fenced blocks and tables (whose
;; columns are aligned), each line is rendered alone (emphasis, code
;; spans and links do not span lines).
;; So a streamed answer can be rendered as its lines complete
;; (`mevedel-markdown-settled'), and rendering the pieces one by one
;; gives what rendering the whole gives.
;;
;; What it costs.  The text goes into a hidden buffer of its own,
;; killed once the rendering is copied out (erasing it would step
;; through each of its property runs); the fenced blocks are found in one pass, then each stretch of prose
;; between them gets one forward pass per construct, each a search for
;; the construct's first character with its match bounded to the line.
;; Faces and buttons go on the text where it is; the markup around
;; them is deleted once the pass is done, last first, so that no
;; position found moves and no text is copied piece by piece.
;; A code block's text is fontified once, in a hidden buffer kept per
;; major mode (made with the mode's hooks delayed, so a user's
;; `prog-mode-hook' never runs there), and its faces are copied over
;; run by run.  The language names a mode through
;; `mevedel-markdown-language-modes', then markdown-mode's own table
;; when markdown-mode is loaded, then LANG-mode when that is a major
;; mode for code, text or configuration.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'button)

(declare-function markdown-get-lang-mode "markdown-mode" (lang))

(defgroup mevedel-markdown nil
  "How the session view renders the assistant's Markdown."
  :group 'mevedel
  :prefix "mevedel-markdown-")

(defcustom mevedel-markdown-enabled t
  "Non-nil means the view renders the assistant's Markdown.
Nil shows the text as the model wrote it."
  :type 'boolean)

(defcustom mevedel-markdown-language-modes
  '(("elisp" . emacs-lisp-mode) ("emacs-lisp" . emacs-lisp-mode) ("el" . emacs-lisp-mode)
    ("lisp" . lisp-mode) ("scheme" . scheme-mode)
    ("sh" . sh-mode) ("bash" . sh-mode) ("shell" . sh-mode) ("zsh" . sh-mode)
    ("console" . sh-mode) ("shell-session" . sh-mode)
    ("py" . python-mode) ("python" . python-mode)
    ("js" . js-mode) ("javascript" . js-mode) ("jsx" . js-mode) ("json" . js-json-mode)
    ("c" . c-mode) ("h" . c-mode) ("cpp" . c++-mode) ("c++" . c++-mode) ("cc" . c++-mode)
    ("java" . java-mode) ("rb" . ruby-mode) ("ruby" . ruby-mode) ("perl" . perl-mode)
    ("diff" . diff-mode) ("patch" . diff-mode)
    ("html" . mhtml-mode) ("xml" . nxml-mode) ("css" . css-mode) ("sql" . sql-mode)
    ("make" . makefile-gmake-mode) ("makefile" . makefile-gmake-mode)
    ("toml" . conf-toml-mode) ("ini" . conf-mode) ("conf" . conf-mode)
    ("tex" . latex-mode) ("latex" . latex-mode)
    ("md" . markdown-mode) ("markdown" . markdown-mode)
    ("rs" . rust-mode) ("rust" . rust-mode) ("go" . go-mode) ("lua" . lua-mode)
    ("yaml" . yaml-mode) ("yml" . yaml-mode) ("ts" . typescript-mode)
    ("typescript" . typescript-mode))
  "Major modes that fontify fenced code blocks, by language name.
A mode that is not defined is skipped (the block is shown unfontified
unless another way finds a mode, see `mevedel-markdown--mode')."
  :type '(alist :key-type string :value-type function))

(defface mevedel-markdown-heading-1 '((t :inherit bold :height 1.3))
  "Face of first-level headings.")

(defface mevedel-markdown-heading-2 '((t :inherit bold :height 1.15))
  "Face of second-level headings.")

(defface mevedel-markdown-heading '((t :inherit bold))
  "Face of headings of the third level and below.")

(defface mevedel-markdown-code '((t :inherit font-lock-constant-face))
  "Face of inline code.")

(defface mevedel-markdown-code-block
  '((((class color) (min-colors 88) (background dark)) :background "gray14" :extend t)
    (((class color) (min-colors 88) (background light)) :background "gray94" :extend t)
    (t :extend t))
  "Face of a fenced code block's lines, under their fontification.")

(defface mevedel-markdown-code-header '((t :inherit shadow))
  "Face of the line naming a code block's language.")

(defface mevedel-markdown-bullet '((t :inherit font-lock-builtin-face))
  "Face of list bullets and numbers.")

(defface mevedel-markdown-quote '((t :inherit font-lock-doc-face))
  "Face of block quotes.")

(defface mevedel-markdown-rule '((t :inherit shadow))
  "Face of horizontal rules.")

(defface mevedel-markdown-strike '((t :strike-through t))
  "Face of struck-through text.")

(define-button-type 'mevedel-markdown-link
  'face 'link
  'follow-link t
  'action #'mevedel-markdown--follow
  'help-echo (lambda (_window _object pos)
               (format "RET: open %s" (get-text-property pos 'mevedel-markdown-url))))

(defun mevedel-markdown--follow (button)
  "Open the address of the link BUTTON."
  (browse-url (button-get button 'mevedel-markdown-url)))

;;;; Buffers

(defvar mevedel-markdown--work nil
  "The hidden buffer a streamed text is looked at in.")

(defvar mevedel-markdown--mode-buffers nil
  "Alist: major mode to its hidden fontification buffer, or to nil if it failed.")

(defun mevedel-markdown--hidden-buffer (variable name)
  "Return the hidden buffer kept in VARIABLE (made as NAME if gone), empty."
  (unless (buffer-live-p (symbol-value variable))
    (set variable (generate-new-buffer name t))
    (with-current-buffer (symbol-value variable)
      (setq buffer-undo-list t)))
  (with-current-buffer (symbol-value variable)
    (let ((inhibit-read-only t) (inhibit-modification-hooks t))
      (erase-buffer)))
  (symbol-value variable))

(defun mevedel-markdown--work-buffer ()
  "Return the hidden buffer a streamed text is looked at in, empty."
  (mevedel-markdown--hidden-buffer 'mevedel-markdown--work " *mevedel-markdown*"))

(defun mevedel-markdown--mode-buffer (mode)
  "Return the hidden buffer that fontifies as MODE, or nil if MODE fails there."
  (let ((entry (assq mode mevedel-markdown--mode-buffers)))
    (if (and entry (or (null (cdr entry)) (buffer-live-p (cdr entry))))
        (cdr entry)
      (let ((buffer (generate-new-buffer (format " *mevedel-markdown %s*" mode) t)))
        (condition-case nil
            (with-current-buffer buffer
              (let ((inhibit-message t))
                (delay-mode-hooks (funcall mode)))
              (setq buffer-undo-list t)
              (font-lock-set-defaults))
          (error (kill-buffer buffer) (setq buffer nil)))
        (setf (alist-get mode mevedel-markdown--mode-buffers) buffer)
        buffer))))

(defun mevedel-markdown--mode (lang)
  "Return the major mode that fontifies code in language LANG, or nil."
  (let* ((lang (downcase lang))
         (listed (cdr (assoc lang mevedel-markdown-language-modes)))
         (own (intern-soft (concat lang "-mode"))))
    (cond ((string-empty-p lang) nil)
          ((and listed (fboundp listed)) listed)
          ((and (fboundp 'markdown-get-lang-mode)
                (let ((mode (markdown-get-lang-mode lang)))
                  (and mode (fboundp mode) mode))))
          ;; A name from the model calls only a major mode, never a minor one.
          ((and own (fboundp own) (not (memq own minor-mode-list))
                (provided-mode-derived-p own '(prog-mode text-mode conf-mode)))
           own))))

;;;; Rendering

(defvar mevedel-markdown--properties nil
  "Text properties the text being rendered gets everywhere, a plist.
They are put on TEXT while it is one run, and on what the rendering
inserts as it inserts it: a pass over the rendered text, split into
a run per face, would cost more.")

(defvar mevedel-markdown--pending nil
  "Non-nil when the rendering left code blocks' faces for later.")

(defun mevedel-markdown-insert (text &optional mark properties)
  "Insert TEXT, Markdown, rendered for the view, at point.
MARK, when non-nil, is called with the bounds of each stretch of prose
\(not code blocks), in the buffer where TEXT is rendered, once it is
rendered: the view marks file names there.  PROPERTIES, a plist, go on
all of the text.  The rendering goes from buffer to buffer, never
through a string.  Return non-nil when code blocks wait for their
faces (`mevedel-markdown-fontify-pending')."
  ;; A buffer of its own, killed after: erasing the rendered text
  ;; would step through each of its property runs.
  (let ((work (generate-new-buffer " *mevedel-markdown-render*" t))
        (mevedel-markdown--properties properties)
        (mevedel-markdown--pending nil))
    (unwind-protect
        (progn
          (with-current-buffer work
            (setq buffer-undo-list t)
            (let ((inhibit-read-only t)
                  (inhibit-modification-hooks t)
                  (case-fold-search nil))
              (mevedel-markdown--insert text)
              (if mevedel-markdown-enabled
                  (mevedel-markdown--render-buffer mark)
                (when mark (funcall mark (point-min) (point-max))))))
          (insert-buffer-substring work))
      (kill-buffer work))
    mevedel-markdown--pending))

(defun mevedel-markdown--insert (string)
  "Insert STRING at point with `mevedel-markdown--properties'."
  (let ((start (point)))
    (insert string)
    (when mevedel-markdown--properties
      (add-text-properties start (point) mevedel-markdown--properties))))

(defconst mevedel-markdown--fence-regexp
  "^\\([ \t]*\\)\\(```+\\|~~~+\\)[ \t]*\\([^ \t\n`{}]*\\)\\([^\n]*\\)$"
  "A fenced code block's opening line: indentation, fence, language, the rest.")

(defun mevedel-markdown--fences ()
  "Return the fenced code blocks of the buffer, in order.
Each is (START CODE CODE-END END LANG INDENT): where its opening line
starts, where its code starts and ends, where its closing line ends
\(the buffer's end when it is not closed), its language and how far its
opening line is indented."
  (goto-char (point-min))
  (let (blocks)
    (while (re-search-forward mevedel-markdown--fence-regexp nil t)
      (let ((start (match-beginning 0))
            (indent (- (match-end 1) (match-beginning 1)))
            (fence (match-string 2))
            (lang (match-string 3))
            (code (min (1+ (match-end 0)) (point-max))))
        ;; A backtick fence's line holds no other backtick: ```x``` is code.
        (unless (and (eq (aref fence 0) ?`) (string-search "`" (match-string 4)))
          (goto-char code)
          (if (re-search-forward (concat "^[ \t]*" fence (substring fence 0 1) "*[ \t]*$") nil t)
              (push (list start code (match-beginning 0) (min (1+ (match-end 0)) (point-max))
                          lang indent)
                    blocks)
            (push (list start code (point-max) (point-max) lang indent) blocks)
            (goto-char (point-max))))))
    (nreverse blocks)))

(defun mevedel-markdown--render-buffer (mark)
  "Render the Markdown of the current buffer in place; MARK as for the render.
Work goes from the end back, so that what is before stays where it is."
  (let ((prose-end (point-max)))
    (dolist (block (nreverse (mevedel-markdown--fences)))
      (mevedel-markdown--prose (nth 3 block) prose-end mark)
      (mevedel-markdown--code-block block)
      (setq prose-end (car block)))
    (mevedel-markdown--prose (point-min) prose-end mark)))

;;;;; Code blocks

(defun mevedel-markdown--header (lang block)
  "Return the line that stands for the opening fence of BLOCK in LANG.
BLOCK nil is a block still being written: it has no copy button yet."
  (concat (propertize (if (string-empty-p lang) "code" lang)
                      'face '(mevedel-markdown-code-header mevedel-markdown-code-block))
          (propertize " " 'face 'mevedel-markdown-code-block)
          (if block
              (propertize (buttonize "copy" #'mevedel-markdown--copy-block block
                                     "Copy this code block")
                          'face '(button mevedel-markdown-code-block))
            (propertize "…" 'face '(mevedel-markdown-code-header mevedel-markdown-code-block)))
          (propertize "\n" 'face 'mevedel-markdown-code-block)))

(defun mevedel-markdown--code-block (block)
  "Render the code BLOCK, an element of `mevedel-markdown--fences', in place."
  (pcase-let* ((`(,start ,code ,code-end ,end ,lang ,indent) block)
               (id (list lang))
               (code-end (copy-marker code-end)))
    (delete-region code-end end)
    (when (> indent 0)
      ;; The lines lose the opening fence's indentation, as CommonMark says.
      (goto-char code)
      (while (< (point) code-end)
        (delete-region (point) (+ (point) (min indent (skip-chars-forward " " code-end))))
        (forward-line 1)))
    (when-let* ((mode (mevedel-markdown--mode lang)))
      (mevedel-markdown--fontify code code-end mode))
    (add-face-text-property code code-end 'mevedel-markdown-code-block t)
    (put-text-property code code-end 'mevedel-markdown-block id)
    (delete-region start code)
    (goto-char start)
    (mevedel-markdown--insert (mevedel-markdown--header lang id))
    (set-marker code-end nil)))

(defconst mevedel-markdown--faces-kept 256
  "How many code blocks' faces `mevedel-markdown--faces' keeps.")

(defvar mevedel-markdown--faces (make-hash-table :test #'equal)
  "Hash table: (MODE . CODE) to the face runs MODE gives CODE.
A block is drawn several times (as it closes while streaming, when its
turn ends, when a later call of the turn settles); it is fontified once.")

(defun mevedel-markdown--face-runs (text mode)
  "Return the faces that MODE's fontification gives TEXT.
Each element is (FROM TO FACE), counted from 0."
  (let ((key (cons mode text)))
    (or (gethash key mevedel-markdown--faces)
        (when-let* ((buffer (mevedel-markdown--mode-buffer mode)))
          (let (runs)
            (with-current-buffer buffer
              (let ((inhibit-read-only t) (inhibit-modification-hooks t) (inhibit-message t))
                (erase-buffer)
                (insert text)
                (with-demoted-errors "mevedel-markdown: fontifying failed: %S"
                  (font-lock-fontify-region (point-min) (point-max)))
                (let ((pos (point-min)))
                  (while (< pos (point-max))
                    (let ((next (next-single-property-change pos 'face nil (point-max))))
                      (when-let* ((face (get-text-property pos 'face)))
                        (push (list (1- pos) (1- next) face) runs))
                      (setq pos next))))
                (erase-buffer)))
            (when (>= (hash-table-count mevedel-markdown--faces) mevedel-markdown--faces-kept)
              (clrhash mevedel-markdown--faces))
            (puthash key (or runs '(nil)) mevedel-markdown--faces))))))

(defun mevedel-markdown--apply-faces (start spans)
  "Put on the text from START the faces of SPANS.
Each span is (FROM TO FACE), counted from START."
  (pcase-dolist (`(,from ,to ,face) spans)
    (when face
      (put-text-property (+ start from) (+ start to) 'face face))))

(defun mevedel-markdown--fontify (start end mode)
  "Give the code from START to END MODE's faces, now if they are known.
Faces not known yet are left for `mevedel-markdown-fontify-pending':
the code is marked `mevedel-markdown-pending' with MODE."
  (let ((runs (gethash (cons mode (buffer-substring-no-properties start end))
                       mevedel-markdown--faces)))
    (if runs
        (mevedel-markdown--apply-faces start runs)
      (setq mevedel-markdown--pending t)
      (put-text-property start end 'mevedel-markdown-pending mode))))

(defun mevedel-markdown-fontify-pending (start end &optional deadline)
  "Fontify the code blocks from START to END whose faces were left for later.
Stop at the first block after DEADLINE, a `float-time', if non-nil;
return where the work stopped then, else nil.  Rendering a long answer
leaves its new code blocks to this: fontifying takes longer than all
the rest, so the text is shown first and colored a moment later."
  (with-silent-modifications
    (let ((pos start) (stopped nil))
      (while (and (not stopped)
                  (setq pos (text-property-not-all pos end 'mevedel-markdown-pending nil)))
        (if (and deadline (> (float-time) deadline))
            (setq stopped pos)
          (let* ((mode (get-text-property pos 'mevedel-markdown-pending))
                 (stop (next-single-property-change pos 'mevedel-markdown-pending nil end))
                 (runs (mevedel-markdown--face-runs (buffer-substring-no-properties pos stop)
                                                    mode)))
            (remove-text-properties pos stop '(mevedel-markdown-pending nil))
            (pcase-dolist (`(,from ,to ,face) runs)
              (when face
                (add-face-text-property (+ pos from) (+ pos to) face)))
            (setq pos stop))))
      stopped)))

(defun mevedel-markdown--copy-block (block)
  "Copy the text of the code BLOCK after point to the kill ring."
  (let* ((start (or (text-property-any (point) (point-max) 'mevedel-markdown-block block)
                    (user-error "No code block here")))
         (end (next-single-property-change start 'mevedel-markdown-block nil (point-max))))
    (kill-new (buffer-substring-no-properties start end))
    (message "Copied %d lines" (count-lines start end))))

(defun mevedel-markdown-code-text (text)
  "Return TEXT as the unfontified code of a block still being written."
  (propertize text 'face 'mevedel-markdown-code-block))

(defun mevedel-markdown-open-block (text)
  "Return TEXT, a fenced block still being written, as shown until it closes.
TEXT is the block's complete opening line and its code so far; the
code is fontified once the block closes."
  (let ((newline (or (string-search "\n" text) (length text))))
    (concat (mevedel-markdown--header
             (if (string-match mevedel-markdown--fence-regexp (substring text 0 newline))
                 (match-string 3 text)
               "")
             nil)
            (mevedel-markdown-code-text (substring text (min (length text) (1+ newline)))))))

;;;;; Prose

(defvar mevedel-markdown--markup nil
  "The inline markup found so far, to be deleted: a list of (START . END).
The inline pass puts faces and buttons on the text as written and
pushes each delimiter it passes here; the ranges do not overlap and
come last found first, so deleting them in this order moves none that
is still to be deleted.")

(defun mevedel-markdown--prose (start end mark)
  "Render the prose from START to END; MARK as for the render."
  (when (< start end)
    ;; The end stays after text a table's alignment inserts there.
    (let ((end (copy-marker end t)))
      (mevedel-markdown--lines start end)
      (mevedel-markdown--mark-tables start end)
      (let ((mevedel-markdown--markup nil))
        (mevedel-markdown--inline start (marker-position end))
        (pcase-dolist (`(,from . ,to) mevedel-markdown--markup)
          (delete-region from to)))
      (mevedel-markdown--align-tables start end)
      (when mark (funcall mark start (marker-position end)))
      (set-marker end nil))))

(defconst mevedel-markdown--table-delimiter-regexp
  "^[ \t]*|?[ \t]*:?-+:?[ \t]*\\(?:|[ \t]*:?-+:?[ \t]*\\)*|?[ \t]*$"
  "A table's delimiter row, under its header row.")

(defun mevedel-markdown--mark-tables (start end)
  "Mark each table from START to END, a marker, with `mevedel-markdown-table'.
A table is a row starting with |, a delimiter row, then the rows that
start with |.  The value is the list of the columns' alignments."
  (goto-char start)
  ;; Found from their bars, not from every line start.
  (while (search-forward "|" end t)
    (let ((header (line-beginning-position)))
      (if (not (and (save-excursion (backward-char) (skip-chars-backward " \t") (bolp))
                    (zerop (forward-line 1))
                    (< (point) end)
                    (looking-at mevedel-markdown--table-delimiter-regexp)))
          (progn (goto-char header) (goto-char (min end (line-end-position))))
        (let ((aligns (mapcar (lambda (cell)
                                (let ((cell (string-trim cell)))
                                  (cond ((and (string-prefix-p ":" cell) (string-suffix-p ":" cell))
                                         'center)
                                        ((string-suffix-p ":" cell) 'right)
                                        (t 'left))))
                              (mevedel-markdown--row-cells (match-string-no-properties 0)))))
          (while (and (zerop (forward-line 1)) (< (point) end) (looking-at-p "[ \t]*|")))
          (put-text-property header (min (point) end) 'mevedel-markdown-table aligns))))))

(defun mevedel-markdown--row-cells (line)
  "Return the cells of the table row LINE, a string: split at |, ends trimmed."
  (let ((line (string-trim line)))
    (split-string (string-remove-suffix "|" (string-remove-prefix "|" line)) "|")))

(defun mevedel-markdown--cell-bounds ()
  "Return the cells of the table row at point: a list of (START . END).
A | inside inline code does not separate cells."
  (let ((eol (line-end-position)) (cells nil) (from nil))
    (skip-chars-forward " \t" eol)
    (when (eq (char-after) ?|) (forward-char 1))
    (setq from (point))
    (while (search-forward "|" eol 'move)
      (unless (memq 'mevedel-markdown-code (ensure-list (get-text-property (1- (point)) 'face)))
        (push (cons from (1- (point))) cells)
        (setq from (point))))
    (when (save-excursion (goto-char from) (skip-chars-forward " \t" eol) (< (point) eol))
      (push (cons from eol) cells))
    (nreverse cells)))

(defun mevedel-markdown--align-tables (start limit)
  "Align the columns of the rendered tables from START to LIMIT, a marker.
Cells are padded to their column's width as shown (after the inline
constructs were rendered); | becomes │ and the delimiter row a rule."
  (let ((pos start))
    (while (setq pos (text-property-not-all pos limit 'mevedel-markdown-table nil))
      (let* ((aligns (get-text-property pos 'mevedel-markdown-table))
             (end (copy-marker (next-single-property-change pos 'mevedel-markdown-table nil
                                                            limit)))
             (rows nil) (widths nil))
        ;; The rows' cells, as text, and each column's width.
        (goto-char pos)
        (while (< (point) end)
          (let ((cells (mapcar (lambda (bounds)
                                 (string-trim (buffer-substring (car bounds) (cdr bounds))))
                               (save-excursion (mevedel-markdown--cell-bounds)))))
            (push cells rows)
            (unless (= (length rows) 2)
              (let ((i 0))
                (dolist (cell cells)
                  (if (nth i widths)
                      (setcar (nthcdr i widths) (max (nth i widths) (string-width cell)))
                    (setq widths (append widths (list (string-width cell)))))
                  (setq i (1+ i))))))
          (forward-line 1))
        (setq rows (nreverse rows))
        (delete-region pos end)
        (goto-char pos)
        (let ((bar (propertize "│" 'face 'mevedel-markdown-rule)))
          (cl-loop for cells in rows for n from 0
                   do (mevedel-markdown--insert
                       (if (= n 1)
                           (propertize (concat "├" (mapconcat (lambda (w) (make-string (+ w 2) ?─))
                                                              widths "┼")
                                               "┤\n")
                                       'face 'mevedel-markdown-rule)
                         (concat bar
                                 (cl-loop for width in widths for i from 0
                                          for cell = (or (nth i cells) "")
                                          for room = (- width (string-width cell))
                                          for align = (or (nth i aligns) 'left)
                                          for left = (pcase align
                                                       ('right room) ('center (/ room 2)) (_ 0))
                                          concat (concat " " (make-string left ?\s)
                                                         (if (= n 0)
                                                             (let ((cell (copy-sequence cell)))
                                                               (add-face-text-property
                                                                0 (length cell) 'bold nil cell)
                                                               cell)
                                                           cell)
                                                         (make-string (- room left) ?\s) " " bar))
                                 "\n")))))
        (setq pos (point))
        (set-marker end nil)))))

(defconst mevedel-markdown--line-regexp
  (concat "^\\([ \t]*\\)\\(?:"
          "\\(#\\{1,6\\}\\)[ \t]+"                        ; 2 heading
          "\\|\\(\\([-*_]\\)[ \t]*\\4[ \t]*\\4[-*_ \t]*\\)$" ; 3 rule
          "\\|\\([-*+]\\)[ \t]+\\(\\[[ xX]\\][ \t]\\)?"   ; 5 bullet, 6 task
          "\\|\\([0-9]\\{1,9\\}[.)]\\)[ \t]"              ; 7 number
          "\\|\\(>[ \t]?\\)"                              ; 8 quote
          "\\)")
  "A line that starts a heading, rule, list item or quote.")

(defconst mevedel-markdown--bullets ["•" "◦" "▪"]
  "Bullets of list items, by nesting level.")

(defun mevedel-markdown--lines (start end)
  "Render the line constructs from START to END, a marker."
  (goto-char start)
  (while (re-search-forward mevedel-markdown--line-regexp end t)
    (let ((bol (match-beginning 0))
          (indent (- (match-end 1) (match-beginning 1))))
      (cond
       ((match-beginning 2)
        (let ((level (- (match-end 2) (match-beginning 2))))
          (delete-region bol (match-end 0))
          (add-face-text-property bol (line-end-position)
                                  (pcase level
                                    (1 'mevedel-markdown-heading-1)
                                    (2 'mevedel-markdown-heading-2)
                                    (_ 'mevedel-markdown-heading)))))
       ((match-beginning 3)
        (delete-region (match-beginning 3) (match-end 3))
        (goto-char (match-beginning 3))
        (mevedel-markdown--insert (propertize (make-string 40 ?─) 'face 'mevedel-markdown-rule)))
       ((match-beginning 5)
        (let ((task (and (match-beginning 6)
                         (if (eq (char-after (1+ (match-beginning 6))) ?\s) "☐ " "☑ ")))
              (task-start (match-beginning 6))
              (task-end (match-end 6))
              (bullet (match-beginning 5)))
          (when task
            (delete-region task-start task-end)
            (goto-char task-start)
            (mevedel-markdown--insert (propertize task 'face 'mevedel-markdown-bullet)))
          (delete-region bullet (1+ bullet))
          (goto-char bullet)
          (mevedel-markdown--insert (propertize (aref mevedel-markdown--bullets (% (/ indent 2) 3))
                              'face 'mevedel-markdown-bullet))))
       ((match-beginning 7)
        (add-face-text-property (match-beginning 7) (match-end 7) 'mevedel-markdown-bullet))
       ((match-beginning 8)
        (delete-region (match-beginning 8) (match-end 8))
        (goto-char (match-beginning 8))
        (mevedel-markdown--insert (propertize "▌ " 'face 'mevedel-markdown-rule))
        (add-face-text-property (point) (line-end-position) 'mevedel-markdown-quote)))
      (goto-char (line-end-position)))))

(defconst mevedel-markdown--inline-start "[`*_~[!<]\\|https?://"
  "Where an inline construct may start.")

(defconst mevedel-markdown--link-regexp
  "!?\\[\\([^]\n]+\\)\\](<?\\([^ \t\n()<>]+\\)>?\\(?:[ \t]+\"[^\"\n]*\"\\)?)"
  "An inline link or image: its text and its address.")

(defconst mevedel-markdown--url-regexp "<?\\(https?://[^] \t\n<>\"'`()]+\\)\\(>\\)?"
  "A bare or <bracketed> URL.")

(defun mevedel-markdown--inline (start end)
  "Render the inline constructs from START to END, in place.
Code spans, links, URLs and emphasis are found in one forward pass;
each stays on its line, and the text inside a link or an emphasis is
rendered the same way.  Faces and buttons go on the text as written,
whose positions do not change: the markup around them is left to
delete, in `mevedel-markdown--markup'."
  (goto-char start)
  (while (re-search-forward mevedel-markdown--inline-start end t)
    (let ((from (match-beginning 0)))
      (goto-char from)
      (unless (mevedel-markdown--construct end)
        (goto-char (1+ from))))))

(defun mevedel-markdown--delete-later (from to)
  "Leave the markup from FROM to TO to be deleted after the inline pass."
  (push (cons from to) mevedel-markdown--markup))

(defun mevedel-markdown--construct (end)
  "Render the inline construct at point, moving past it.
Return nil, point unmoved, when none starts here or it ends after END."
  (let ((char (char-after)))
    (pcase char
      (?` (mevedel-markdown--code-span end))
      ((or ?\[ ?!)
       (when (and (looking-at mevedel-markdown--link-regexp) (<= (match-end 0) end))
         (let ((url (match-string-no-properties 2))
               (text-start (match-beginning 1)) (text-end (match-end 1))
               (after (match-end 0)))
           (mevedel-markdown--delete-later (point) text-start)
           (mevedel-markdown--inline text-start text-end)
           (mevedel-markdown--delete-later text-end after)
           (mevedel-markdown--button text-start text-end url)
           (goto-char after))))
      ((or ?< ?h)
       (when (and (looking-at mevedel-markdown--url-regexp)
                  (or (eq char ?<) (not (mevedel-markdown--word-char-p (char-before)))))
         (let ((from (point))
               (url-start (match-beginning 1))
               (url-end (match-end 1))
               (after (match-end 0))
               (bracketed (and (eq char ?<) (match-beginning 2))))
           (unless bracketed
             ;; A sentence's final punctuation is not the URL's.
             (goto-char url-end)
             (skip-chars-backward ".,;:!?" url-start)
             (setq url-end (point) after (point)))
           (if (not (and (<= after end) (or bracketed (eq char ?h))))
               (progn (goto-char from) nil)
             (when bracketed
               (mevedel-markdown--delete-later from url-start)
               (mevedel-markdown--delete-later url-end after))
             (mevedel-markdown--button url-start url-end
                                       (buffer-substring-no-properties url-start url-end))
             (goto-char after)))))
      (_ (mevedel-markdown--emphasis char end)))))

(defun mevedel-markdown--code-span (end)
  "Render the code span at point, moving past it; nil if it is not closed.
It closes on its line, before END, with as many backticks as it opens with."
  (let ((open (point))
        (close nil) (content nil) (after nil))
    (if (looking-at "`\\([^`\n]+\\)`\\([^`]\\|\\'\\)")
        ;; The common case: one backtick each side.
        (setq content (match-beginning 1) close (match-end 1) after (1+ close))
      (let* ((start (progn (skip-chars-forward "`" end) (point)))
             (size (- start open))
             (fence (make-string size ?`))
             (limit (min (line-end-position) end)))
        (setq content start)
        (while (and (not close) (search-forward fence limit t))
          (let ((here (match-beginning 0)))
            (skip-chars-forward "`" limit)
            (when (= (- (point) here) size)
              (setq close here after (point)))))))
    (if (not (and close (<= after end)))
        (progn (goto-char open) nil)
      ;; `` `x` `` shows `x`: one space inside each end goes.
      (when (and (> (- close content) 2) (eq (char-after content) ?\s)
                 (eq (char-before close) ?\s)
                 (progn (goto-char content) (skip-chars-forward " " close) (< (point) close)))
        (setq content (1+ content) close (1- close)))
      (mevedel-markdown--delete-later open content)
      (mevedel-markdown--delete-later close after)
      (add-face-text-property content close 'mevedel-markdown-code)
      (goto-char after))))

(defun mevedel-markdown--button (start end url)
  "Make START to END a button opening URL."
  (make-text-button start end 'type 'mevedel-markdown-link 'mevedel-markdown-url url))

(defun mevedel-markdown--word-char-p (char)
  "Return non-nil when CHAR, a character or nil, is part of a word."
  (and char (eq (char-syntax char) ?w)))

(defconst mevedel-markdown--emphasis-faces
  '((1 . italic) (2 . bold) (3 . (bold italic)))
  "Faces of emphasis by the number of its delimiter characters.")

(defconst mevedel-markdown--emphasis-regexps
  (vconcat (cl-loop for char in '(?* ?_ ?~)
                    append (cl-loop for size from 1 to 3
                                    for quoted = (regexp-quote (make-string size char))
                                    for c = (string char)
                                    collect (concat quoted "\\([^ \t\n" c "]\\(?:[^\n]*?[^ \t\n"
                                                    c "]\\)??\\)" quoted))))
  "Regexps of emphasis delimited by SIZE characters, at SIZE - 1.
The * regexps come first, then those of _ (from 3), then ~ (from 6).")

(defun mevedel-markdown--emphasis (char end)
  "Render the emphasis delimited by CHAR at point, moving past it.
Return nil, point unmoved, when there is none.
The longest delimiter (up to three CHARs; two for ~) whose closing one
follows on the line, before END, wins.  Its text starts and ends with
a character that is not a space; underscores count only outside words."
  (let* ((from (point))
         (limit (min end (+ from 3)))
         (run (let ((to (1+ from)))
                (while (and (< to limit) (eq (char-after to) char))
                  (setq to (1+ to)))
                (- to from)))
         (size (if (eq char ?~) (and (>= run 2) 2) run))
         (underscore (eq char ?_))
         (face nil))
    (when (and size (not (and underscore (mevedel-markdown--word-char-p (char-before)))))
      (while (and (not face) (> size 0))
        (if (and (looking-at (aref mevedel-markdown--emphasis-regexps
                                   (+ size -1 (pcase char (?* 0) (?_ 3) (_ 6)))))
                 (<= (match-end 0) end)
                 (not (eq (char-after (match-end 0)) char))
                 (not (and underscore (mevedel-markdown--word-char-p
                                       (char-after (match-end 0))))))
            (setq face (if (eq char ?~) 'mevedel-markdown-strike
                         (alist-get size mevedel-markdown--emphasis-faces)))
          (setq size (if (eq char ?~) 0 (1- size))))))
    (when face
      ;; The match data are those of the delimiters that won.
      (let ((text-start (match-beginning 1)) (text-end (match-end 1)) (after (match-end 0)))
        (mevedel-markdown--delete-later from text-start)
        (mevedel-markdown--inline text-start text-end)
        (mevedel-markdown--delete-later text-end after)
        (add-face-text-property text-start text-end face)
        (goto-char after)))))

;;;; Streaming

(defun mevedel-markdown-settled (text)
  "Return where the settled part of TEXT, a Markdown text still growing, ends.
The settled part is its complete lines up to the last one outside a
fenced block and before a table still growing: more text changes
nothing in its rendering.  The value
is (END . FENCE): FENCE is non-nil when a fenced block opens at END and
is not closed yet; it is then the regexp of the line that closes it,
and its opening line is complete."
  (with-current-buffer (mevedel-markdown--work-buffer)
    (let ((case-fold-search nil))
      (insert text)
      (let ((last-line (save-excursion
                         (goto-char (point-max))
                         (skip-chars-backward "^\n")
                         (point)))
            (settled nil) (fence nil))
        (goto-char (point-min))
        (while (and (not fence) (re-search-forward mevedel-markdown--fence-regexp last-line t))
          (let ((start (match-beginning 0))
                (opening (match-string 2))
                (rest (match-string 4)))
            (unless (and (eq (aref opening 0) ?`) (string-search "`" rest))
              (forward-line 1)
              (let ((close (concat "^[ \t]*" opening (substring opening 0 1) "*[ \t]*$")))
                (if (re-search-forward close last-line t)
                    (forward-line 1)
                  (setq settled (1- start) fence close))))))
        (unless fence
          ;; A table is aligned as a whole: its rows settle when it ends.
          (let ((table nil))
            (goto-char last-line)
            (while (and (not (bobp)) (progn (forward-line -1) (looking-at-p "[ \t]*|")))
              (setq table (point)))
            (when table (setq settled (1- table)))))
        (prog1 (cons (or settled (1- last-line)) fence)
          (erase-buffer))))))

(defun mevedel-markdown-closed-p (fence text from)
  "Return non-nil when a complete line of TEXT from FROM on closes FENCE.
FENCE is the regexp `mevedel-markdown-settled' returned.  The search
starts at the beginning of the line FROM is on."
  (let ((case-fold-search nil)
        (from (1+ (or (cl-position ?\n text :end from :from-end t) -1))))
    ;; $ matched before a newline, not at TEXT's end: the line is complete.
    (and (string-match fence text from) (< (match-end 0) (length text)))))

(provide 'mevedel-markdown)
;;; mevedel-markdown.el ends here
