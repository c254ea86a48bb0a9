;;; mevedel-shared.el --- Shared items: documents and whiteboards the user and the model edit  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A session's shared items are the documents (Markdown or Org) and
;; whiteboards (Excalidraw scenes) that the user and the model work on
;; together.  This file is their host on the Lisp side, loaded only when
;; an editing entry point is called (a shared:// Read or Grep, a
;; Shared* tool, `mevedel-shared-open', `mevedel-shared-export'): the
;; catalog holds only the declarations (mevedel-tool-editing.el).
;;
;; Storage: each item is two files in the session's storage,
;; shared/ID.eld (kind, format, title, discussions, history) and its
;; content, shared/ID.md, ID.org or ID.excalidraw.  Being files there,
;; an item survives restart and resume, and the checkpoint step keeps
;; their before-state so that a rewind restores them.
;;
;; A document is the buffer visiting its content file: the user edits
;; it directly, the model's edits go into the same buffer and are
;; saved at once.  Its blocks (headings, paragraphs, list items, code
;; blocks) each get an 8-hex hash of their text; the overview is one
;; line per block, and an edit names its targets by the hash the model
;; read, so an edit of a block that changed since is a conflict,
;; reported with the line now in its place, never a blind overwrite.
;; Every edit is atomic: all of it or nothing.
;;
;; A whiteboard's elements, hashes, rendering and page are the native
;; module's (crates/mevedel-core/src/shared/, the `mevedel-core-shared-'
;; wrappers): this file keeps its scene saved and its discussions.
;;
;; This file does not decide permissions, keep checkpoints or tell the
;; model of the user's changes: the pipeline, mevedel-checkpoint.el and
;; mevedel-edited-files.el do, from what this file serves them.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-session)
(require 'mevedel-pipeline)
(require 'mevedel-chat)
(require 'mevedel-resource)

(declare-function markdown-mode "markdown-mode" ())

;;;; Options

(defgroup mevedel-shared nil
  "Documents and whiteboards shared by the user and the model."
  :group 'mevedel
  :prefix "mevedel-shared-")

(defcustom mevedel-shared-line-limit 400
  "Longest block text, in characters, an overview line shows whole.
A longer block's line points to its full text at
shared://ID/elements/HASH instead of showing a truncated part."
  :type 'natnum)

(defcustom mevedel-shared-highlight-seconds 2
  "Seconds the model's fresh change stays highlighted in a shared document."
  :type 'number)

(defface mevedel-shared-change '((t :inherit highlight))
  "Face of the text the model just changed in a shared document.")

(defface mevedel-shared-comment '((t :inherit shadow :slant italic))
  "Face of the discussion messages shown below a shared document's blocks.")

(defcustom mevedel-shared-library-directories
  '(".mevedel/libraries" "~/.mevedel/libraries")
  "Directories holding Excalidraw element libraries (*.excalidrawlib).
A relative directory is relative to the workspace root.  Each file is
one library, named by its file name without the extension."
  :type '(repeat directory))

;;;; Items on disk

(defconst mevedel-shared-id-regexp "\\`[a-zA-Z0-9_-]\\{1,80\\}\\'"
  "What an item, element or image identity looks like.")

(defconst mevedel-shared--extensions
  '((markdown . "md") (org . "org") (excalidraw . "excalidraw"))
  "Content file extension of each item format.")

(defun mevedel-shared--directory (session)
  "Return SESSION's shared/ storage directory name (maybe not yet made)."
  (when-let* ((dir (mevedel-session-directory session)))
    (file-name-as-directory (expand-file-name "shared" dir))))

(defun mevedel-shared--meta-file (session id)
  "Return the name of the metadata file of item ID in SESSION."
  (expand-file-name (concat id ".eld") (mevedel-shared--directory session)))

(defun mevedel-shared--content-file (session id format)
  "Return the name of the content file of item ID, of FORMAT, in SESSION."
  (expand-file-name (concat id "." (alist-get format mevedel-shared--extensions))
                    (mevedel-shared--directory session)))

(defun mevedel-shared-files (session id &optional format)
  "Return the files of item ID in SESSION: its metadata and its content.
FORMAT is the item's when it does not exist yet.  The checkpoint step
keeps these files' before-state."
  (let ((meta (mevedel-shared-meta session id)))
    (list (mevedel-shared--meta-file session id)
          (mevedel-shared--content-file session id
                                        (or (plist-get meta :format) format 'markdown)))))

(defun mevedel-shared-meta (session id)
  "Return the metadata plist of item ID in SESSION, or nil when it is missing.
Keys: :id :kind (`document' or `whiteboard') :format (`markdown',
`org' or `excalidraw') :title :created :discussions :history."
  (when-let* (((string-match-p mevedel-shared-id-regexp id))
              (dir (mevedel-shared--directory session))
              (file (expand-file-name (concat id ".eld") dir))
              ((file-readable-p file)))
    (condition-case nil
        (with-temp-buffer
          (insert-file-contents file)
          (let ((meta (read (current-buffer))))
            (and (plist-get meta :kind) meta)))
      (error nil))))

(defun mevedel-shared--write-meta (session meta)
  "Write item META of SESSION to its metadata file."
  (let ((file (mevedel-shared--meta-file session (plist-get meta :id))))
    (make-directory (file-name-directory file) t)
    (with-temp-file file
      (let ((print-length nil) (print-level nil))
        (prin1 meta (current-buffer))
        (insert "\n")))))

(defun mevedel-shared-items (session)
  "Return the metadata of SESSION's items, oldest first."
  (let ((dir (mevedel-shared--directory session)))
    (when (and dir (file-directory-p dir))
      (sort (delq nil (mapcar (lambda (file)
                                (mevedel-shared-meta session (file-name-base file)))
                              (directory-files dir nil "\\.eld\\'")))
            (lambda (a b) (string< (plist-get a :created) (plist-get b :created)))))))

(defun mevedel-shared--note (session id author text)
  "Add to the history of item ID in SESSION that AUTHOR did TEXT."
  (when-let* ((meta (mevedel-shared-meta session id)))
    (mevedel-shared--write-meta
     session (plist-put meta :history
                        (append (plist-get meta :history)
                                (list (list :time (format-time-string "%FT%T%z")
                                            :author author :text text)))))))

(defun mevedel-shared--comment (session id target author text)
  "Add AUTHOR's comment TEXT on element or block TARGET of item ID in SESSION."
  (let ((meta (mevedel-shared-meta session id)))
    (mevedel-shared--write-meta
     session (plist-put meta :discussions
                        (append (plist-get meta :discussions)
                                (list (list :time (format-time-string "%FT%T%z")
                                            :target target :author author :text text)))))))

;;;; Documents

(defvar-local mevedel-shared--item nil
  "In a shared document's buffer: (SESSION . ID).")

(defvar-local mevedel-shared--issued nil
  "In a shared document's buffer: hash -> marker where its block started.
Each hash the model was shown is kept, so that an edit naming a hash
that changed can say what is now in its place.")

(defvar mevedel-shared--saving nil
  "Non-nil while this file saves a document for the model.")

(defun mevedel-shared--document-format ()
  "Return the current document buffer's format, `org' or `markdown'."
  (if (string-suffix-p ".org" (or buffer-file-name "")) 'org 'markdown))

(defun mevedel-shared--item-regexp (format)
  "Return the regexp of a list item's first line in FORMAT."
  (if (eq format 'org)
      "[ \t]*\\([-+]\\|[0-9]+[.)]\\)[ \t]\\|[ \t]+\\*[ \t]"
    "[ \t]*\\([-+*]\\|[0-9]+[.)]\\)[ \t]"))

(defun mevedel-shared--heading-regexp (format)
  "Return the regexp of a heading line in FORMAT."
  (if (eq format 'org) "\\*+[ \t]" "#\\{1,6\\}\\([ \t]\\|$\\)"))

(defun mevedel-shared--fence-regexp (format)
  "Return the regexp of a code block's first line in FORMAT; group 1 names it."
  (if (eq format 'org) "[ \t]*#\\+begin_\\(\\S-+\\)" "[ \t]*\\(```+\\|~~~+\\)"))

(defun mevedel-shared--starts-block-p (format)
  "Return non-nil when the line at point begins a block other than a paragraph.
That is a heading, an item or a code block of FORMAT."
  (let ((case-fold-search t))
    (or (looking-at-p (mevedel-shared--heading-regexp format))
        (looking-at-p (mevedel-shared--fence-regexp format))
        (looking-at-p (mevedel-shared--item-regexp format)))))

(defun mevedel-shared--blocks (format)
  "Return the blocks of the current buffer, in FORMAT, as (TYPE START END).
TYPE is `heading', `code', `item' or `paragraph'; END is the end of its
last line.  Blank lines separate blocks; a heading is one line, a code
block runs to its closing fence, and an item or a paragraph runs to
the next blank line or the next line beginning a block."
  (save-excursion
    (save-restriction
      (widen)
      (goto-char (point-min))
      (let ((case-fold-search t) (blocks nil))
        (while (not (eobp))
          (if (looking-at-p "[ \t]*$")
              (forward-line 1)
            (let ((start (point)) (type nil))
              (cond
               ((looking-at (mevedel-shared--fence-regexp format))
                (setq type 'code)
                (let ((close (if (eq format 'org)
                                 (concat "^[ \t]*#\\+end_" (regexp-quote (match-string 1)) "\\b")
                               (concat "^[ \t]*" (regexp-quote (match-string 1)) "[ \t]*$"))))
                  (end-of-line)
                  (if (re-search-forward close nil t) (forward-line 1) (goto-char (point-max)))))
               ((looking-at-p (mevedel-shared--heading-regexp format))
                (setq type 'heading)
                (forward-line 1))
               (t
                (setq type (if (looking-at-p (mevedel-shared--item-regexp format)) 'item 'paragraph))
                (forward-line 1)
                (while (and (not (eobp)) (not (looking-at-p "[ \t]*$"))
                            (not (mevedel-shared--starts-block-p format)))
                  (forward-line 1))))
              (push (list type start (save-excursion
                                       (skip-chars-backward "\n" start)
                                       (point)))
                    blocks))))
        (nreverse blocks)))))

(defun mevedel-shared--hash (text n)
  "Return the hash of a block with TEXT, the Nth (from 0) with that text."
  (substring (secure-hash 'sha256 (format "%s\0%d" text n)) 0 8))

(defun mevedel-shared--document-lines ()
  "Return the current document's blocks as (HASH TYPE START END TEXT)."
  (let ((seen (make-hash-table :test #'equal)))
    (cl-loop for (type start end) in (mevedel-shared--blocks (mevedel-shared--document-format))
             for text = (buffer-substring-no-properties start end)
             for n = (gethash text seen 0)
             do (puthash text (1+ n) seen)
             collect (list (mevedel-shared--hash text n) type start end text))))

(defun mevedel-shared--issue (lines)
  "Remember, in the current document, where each of LINES' hashes started."
  (unless mevedel-shared--issued
    (setq mevedel-shared--issued (make-hash-table :test #'equal)))
  (when (> (hash-table-count mevedel-shared--issued) 5000)
    (clrhash mevedel-shared--issued))
  (pcase-dolist (`(,hash ,_ ,start) lines)
    (let ((marker (or (gethash hash mevedel-shared--issued) (make-marker))))
      (set-marker marker start)
      (puthash hash marker mevedel-shared--issued))))

(defun mevedel-shared--count-comments (meta target)
  "Return how many discussion messages of item META are about TARGET."
  (cl-count target (plist-get meta :discussions)
            :key (lambda (m) (plist-get m :target)) :test #'equal))

(defun mevedel-shared--line (id meta line)
  "Return the overview line of the document block LINE of item ID with META."
  (pcase-let ((`(,hash ,type ,_ ,_ ,text) line))
    (let ((comments (mevedel-shared--count-comments meta hash)))
      (format "%s %s%s %s" hash type
              (if (> comments 0)
                  (format " [%d comment%s]" comments (if (= comments 1) "" "s"))
                "")
              (if (<= (length text) mevedel-shared-line-limit)
                  (json-serialize text)
                (format "(%d lines, %d characters: Read shared://%s/elements/%s)"
                        (1+ (cl-count ?\n text)) (length text) id hash))))))

(defun mevedel-shared--document-buffer (session meta)
  "Return the buffer of the document item META of SESSION, visiting it if needed."
  (let* ((id (plist-get meta :id))
         (file (mevedel-shared--content-file session id (plist-get meta :format))))
    (or (when-let* ((buffer (find-buffer-visiting file)))
          ;; Changed on disk behind an unmodified buffer (another run):
          ;; the file is the document then.
          (unless (or (buffer-modified-p buffer) (verify-visited-file-modtime buffer)
                      (not (file-exists-p file)))
            (with-current-buffer buffer (revert-buffer t t t)))
          buffer)
        (let ((buffer (find-file-noselect file)))
          (with-current-buffer buffer
            (if (eq (plist-get meta :format) 'org)
                (org-mode)
              (if (fboundp 'markdown-mode) (markdown-mode) (text-mode)))
            (setq mevedel-shared--item (cons session id))
            (mevedel-shared-document-mode 1)
            (mevedel-shared--show-discussions meta)
            (rename-buffer (format "*shared: %s*" (plist-get meta :title)) t))
          buffer))))

(defun mevedel-shared--show-discussions (meta)
  "Show the discussion messages of META below their blocks in the current document.
A message whose block changed since stays in shared://ID/discussions."
  (remove-overlays (point-min) (point-max) 'mevedel-shared-discussion t)
  (let ((lines (mevedel-shared--document-lines)))
    (pcase-dolist (`(,hash ,_ ,_ ,end) lines)
      (when-let* ((messages (cl-remove hash (plist-get meta :discussions)
                                       :key (lambda (m) (plist-get m :target))
                                       :test-not #'equal)))
        (let ((overlay (make-overlay end end)))
          (overlay-put overlay 'mevedel-shared-discussion t)
          (overlay-put overlay 'after-string
                       (propertize (mapconcat (lambda (m)
                                                (format "\n  ▸ %s: %s" (plist-get m :author)
                                                        (plist-get m :text)))
                                              messages "")
                                   'face 'mevedel-shared-comment)))))))

(defun mevedel-shared--after-save ()
  "Note in the item's history that the user saved an edit of its document."
  (when (and mevedel-shared--item (not mevedel-shared--saving))
    (mevedel-shared--note (car mevedel-shared--item) (cdr mevedel-shared--item)
                          'user "edited the document")
    (mevedel-shared--show-discussions (mevedel-shared-meta (car mevedel-shared--item)
                                                           (cdr mevedel-shared--item)))))

(defvar-keymap mevedel-shared-document-mode-map
  :doc "Keys of a shared document's buffer."
  "C-c C-; c" #'mevedel-shared-comment)

(define-minor-mode mevedel-shared-document-mode
  "Minor mode of a document shared with the model.
The model reads it block by block at shared://ID and edits it with
SharedEdit; your edits reach it as a context update.
\\<mevedel-shared-document-mode-map>\\[mevedel-shared-comment] comments on the block at point."
  :lighter " Shared"
  (if mevedel-shared-document-mode
      (add-hook 'after-save-hook #'mevedel-shared--after-save nil t)
    (remove-hook 'after-save-hook #'mevedel-shared--after-save t)))

(defun mevedel-shared--save-document ()
  "Save the current document buffer for the model, silently."
  (let ((mevedel-shared--saving t)
        (inhibit-message t)
        (save-silently t))
    (save-buffer)))

;;;; Views

(defun mevedel-shared--element-count (session meta)
  "Return the number of elements or blocks of item META of SESSION."
  (if (eq (plist-get meta :kind) 'document)
      (with-current-buffer (mevedel-shared--document-buffer session meta)
        (length (mevedel-shared--blocks (mevedel-shared--document-format))))
    (mevedel-shared--board-count session meta)))

(defun mevedel-shared--listing (session)
  "Return the text of shared://, SESSION's items and the libraries."
  (let ((items (mevedel-shared-items session)))
    (unless items
      (signal 'mevedel-core-resource-error
              (list "shared:// is unavailable: this session has no shared whiteboards or \
documents (SharedCreate makes one)")))
    (concat
     (mapconcat
      (lambda (meta)
        (let ((comments (length (plist-get meta :discussions))))
          (format "shared://%s  %s %s (%s, %d %s%s)"
                  (plist-get meta :id) (plist-get meta :kind) (json-serialize (plist-get meta :title))
                  (plist-get meta :format) (mevedel-shared--element-count session meta)
                  (if (eq (plist-get meta :kind) 'document) "blocks" "elements")
                  (if (> comments 0) (format ", %d comments" comments) ""))))
      items "\n")
     (format "\nshared://library  element libraries (%d)"
             (length (mevedel-shared--libraries session))))))

(defun mevedel-shared--document-overview (session meta)
  "Return the overview of document META of SESSION and issue its hashes."
  (with-current-buffer (mevedel-shared--document-buffer session meta)
    (let ((lines (mevedel-shared--document-lines))
          (id (plist-get meta :id)))
      (mevedel-shared--issue lines)
      (concat (format "shared://%s  document %s (%s), %d blocks%s\n\
Each line: HASH TYPE [comments] TEXT as a JSON string.  SharedEdit names blocks by HASH.\n"
                      id (json-serialize (plist-get meta :title)) (plist-get meta :format)
                      (length lines) (if (buffer-modified-p) ", with unsaved changes" ""))
              (mapconcat (lambda (line) (mevedel-shared--line id meta line)) lines "\n")))))

(defun mevedel-shared--document-element (session meta hash)
  "Return the full text of block HASH of document META of SESSION."
  (with-current-buffer (mevedel-shared--document-buffer session meta)
    (let ((line (assoc hash (mevedel-shared--document-lines))))
      (unless line
        (signal 'mevedel-core-resource-error
                (list (format "shared://%s/elements/%s is unavailable: no block has that hash \
now (Read shared://%s again)" (plist-get meta :id) hash (plist-get meta :id)))))
      (mevedel-shared--issue (list line))
      (nth 4 line))))

(defun mevedel-shared--discussions (meta)
  "Return the text of the discussions of item META."
  (let ((messages (plist-get meta :discussions)))
    (if (null messages)
        (format "shared://%s has no discussions yet." (plist-get meta :id))
      (mapconcat (lambda (m)
                   (format "%s %s on %s: %s" (plist-get m :time) (plist-get m :author)
                           (or (plist-get m :target) "the item")
                           (json-serialize (plist-get m :text))))
                 messages "\n"))))

(defun mevedel-shared--history (meta)
  "Return the text of the contribution history of item META."
  (mapconcat (lambda (h)
               (format "%s %s: %s" (plist-get h :time) (plist-get h :author) (plist-get h :text)))
             (plist-get meta :history) "\n"))

(defun mevedel-shared--discussions-of (session meta)
  "Return the text of shared://ID/discussions for item META of SESSION."
  (if (eq (plist-get meta :kind) 'document)
      (mevedel-shared--discussions meta)
    (mevedel-core-shared-board-discussions (mevedel-shared--board session meta))))

(defun mevedel-shared-view (canonical session)
  "Return the view of the shared:// address CANONICAL in SESSION.
The value is the text of a text view, or (picture META KEY) for a
whiteboard's rendering (KEY nil) or image KEY, which
`mevedel-shared-serve' delivers.  A missing item or part signals
`mevedel-core-resource-error'."
  (unless (mevedel-session-p session)
    (signal 'mevedel-core-resource-error
            (list (format "%s is unavailable outside a mevedel session" canonical))))
  (let ((parts (split-string (string-remove-prefix "shared://" canonical) "/" t)))
    (cond
     ((null parts) (mevedel-shared--listing session))
     ((equal (car parts) "library") (mevedel-shared--library-view session (cdr parts)))
     (t
      (let* ((meta (or (mevedel-shared-meta session (car parts))
                       (signal 'mevedel-core-resource-error
                               (list (format "`%s' is unavailable: no shared item with that id \
exists in this session (Read shared:// lists them)" canonical)))))
             (document (eq (plist-get meta :kind) 'document)))
        (when (and document (member (cadr parts) '("view.png" "images")))
          (signal 'mevedel-core-resource-error
                  (list (format "%s is unavailable: documents have no pictures (Read shared://%s)"
                                canonical (car parts)))))
        (pcase (cdr parts)
          ('nil (if document
                    (mevedel-shared--document-overview session meta)
                  (mevedel-shared--board-overview session meta)))
          ('("discussions") (mevedel-shared--discussions-of session meta))
          ('("history") (if document
                            (mevedel-shared--history meta)
                          (mevedel-core-shared-board-history
                           (mevedel-shared--board session meta))))
          (`("elements" ,element)
           (if document
               (mevedel-shared--document-element session meta element)
             (mevedel-shared--board-element session meta element)))
          ('("view.png") (list 'picture meta nil))
          (`("images" ,key) (list 'picture meta key))))))))

(defun mevedel-shared-serve (canonical session callback)
  "Call CALLBACK once with the view of the shared:// address CANONICAL in SESSION.
It gets the text, (file PATH) for a picture (a private temporary file
the caller deletes), or (error MESSAGE).  This is how Read and Grep
fetch a view (`mevedel-tool-editing-view')."
  (pcase (condition-case err
             (mevedel-shared-view canonical session)
           (error (list 'error (error-message-string err))))
    (`(picture ,meta ,key)
     (condition-case err
         (mevedel-shared--board-picture session meta key callback)
       (error (funcall callback (list 'error (error-message-string err))))))
    (`(sheet ,name)
     (condition-case err
         (mevedel-shared--sheet session name callback)
       (error (funcall callback (list 'error (error-message-string err))))))
    (value (funcall callback value))))

(defun mevedel-shared-watched (address session)
  "Return (KEY . TEXT) for the edited-file reminder of ADDRESS in SESSION.
KEY is the item address shared://ID the model read a part of, TEXT
its overview and discussions now (nil when the item is gone).  Return
nil for an address that is no item's."
  (when (and (mevedel-session-p session)
             (string-match "\\`shared://\\([a-zA-Z0-9_-]\\{1,80\\}\\)\\(?:/\\|\\'\\)" address)
             (not (equal (match-string 1 address) "library")))
    (let* ((id (match-string 1 address))
           (meta (mevedel-shared-meta session id)))
      (cons (concat "shared://" id)
            (and meta
                 (concat (if (eq (plist-get meta :kind) 'document)
                             (mevedel-shared--document-overview session meta)
                           ;; A page opening or closing changes nothing on the board.
                           (replace-regexp-in-string
                            ", [0-9]+ page\\(?:s\\|(s)\\)? open" ""
                            (mevedel-shared--board-overview session meta)))
                         "\n\nDiscussions:\n" (mevedel-shared--discussions-of session meta)
                         "\n"))))))

;;;; Whiteboards

(defvar mevedel-shared--boards (make-hash-table :test #'equal)
  "Open whiteboards: \"SESSION-ID/ID\" -> (HANDLE SESSION ID STAMP).
STAMP is the scene file's stamp when this process last wrote or read
it: a scene file with another stamp (restored by a rewind, written by
another run) is taken back into the board.")

(defun mevedel-shared--board-key (session id)
  "Return the event key of whiteboard ID of SESSION."
  (concat (mevedel-session-id session) "/" id))

(defun mevedel-shared--stamp (file)
  "Return FILE's stamp, or nil when it is missing."
  (car (mevedel-core-file-stamps (list file))))

(defun mevedel-shared--board-save (session id)
  "Write whiteboard ID of SESSION, with its discussions and history, to its file."
  (let* ((entry (gethash (mevedel-shared--board-key session id) mevedel-shared--boards))
         (file (mevedel-shared--content-file session id 'excalidraw))
         (coding-system-for-write 'utf-8))
    (write-region (mevedel-core-shared-board-scene (car entry)) nil file nil 'silent)
    (setf (nth 3 entry) (mevedel-shared--stamp file))))

(defun mevedel-shared--board (session meta)
  "Return the handle of whiteboard META of SESSION, opening it if needed."
  (let* ((id (plist-get meta :id))
         (key (mevedel-shared--board-key session id))
         (file (mevedel-shared--content-file session id 'excalidraw))
         (stamp (mevedel-shared--stamp file))
         (entry (gethash key mevedel-shared--boards))
         (scene (lambda () (with-temp-buffer
                             (let ((coding-system-for-read 'utf-8))
                               (insert-file-contents file))
                             (buffer-string)))))
    (cond
     ((null entry)
      (let ((handle (mevedel-core-shared-board-open
                     (list :id id :key key :scene (and stamp (funcall scene))))))
        (puthash key (list handle session id stamp) mevedel-shared--boards)
        handle))
     ((and stamp (not (equal stamp (nth 3 entry))))
      (mevedel-core-shared-board-restore (car entry) (funcall scene) "rewind")
      (setf (nth 3 entry) stamp)
      (car entry))
     (t (car entry)))))

(defun mevedel-shared--board-count (session meta)
  "Return the element count of whiteboard META of SESSION."
  (let ((overview (mevedel-core-shared-board-overview (mevedel-shared--board session meta))))
    (if (string-match ": \\([0-9]+\\) elements?" overview)
        (string-to-number (match-string 1 overview))
      0)))

(defun mevedel-shared--board-overview (session meta)
  "Return the overview of whiteboard META of SESSION."
  (concat (format "shared://%s  whiteboard %s\n" (plist-get meta :id)
                  (json-serialize (plist-get meta :title)))
          "Each line: HASH ID TYPE geometry [bindings] \"text\".  SharedEdit names elements \
by HASH.\n"
          (mevedel-core-shared-board-overview (mevedel-shared--board session meta))))

(defun mevedel-shared--board-element (session meta element)
  "Return the full ELEMENT of whiteboard META of SESSION."
  (or (mevedel-core-shared-board-element (mevedel-shared--board session meta) element)
      (signal 'mevedel-core-resource-error
              (list (format "shared://%s/elements/%s is unavailable: the board has no such \
element (Read shared://%s)" (plist-get meta :id) element (plist-get meta :id))))))

(defun mevedel-shared--picture-file (mime base64)
  "Write the BASE64 picture of type MIME to a private temporary file; return it."
  (let ((file (make-temp-file "mevedel-shared-" nil
                              (concat "." (car (split-string (cadr (split-string mime "/"))
                                                             "+")))))
        (coding-system-for-write 'binary))
    (write-region (base64-decode-string base64) nil file nil 'silent)
    file))

(defun mevedel-shared--board-picture (session meta key callback)
  "Call CALLBACK with (file PATH) of whiteboard META's rendering, or image KEY.
META is an item of SESSION.  PATH is a private temporary file the
caller deletes; a failure gives (error MESSAGE)."
  (let* ((handle (mevedel-shared--board session meta))
         (done nil)
         (deliver (lambda (mime base64)
                    (funcall callback (list 'file (mevedel-shared--picture-file mime base64))))))
    (if key
        (pcase (mevedel-core-shared-board-image handle key)
          (`(,mime ,base64) (funcall deliver mime base64))
          (_ (funcall callback (list 'error (format "shared://%s/images/%s is unavailable: the \
board has no such image" (plist-get meta :id) key)))))
      (mevedel-core-shared-board-render
       handle (lambda (status value)
                (unless done
                  (setq done t)
                  (if (eq status 'ok)
                      (funcall deliver "image/png" (plist-get value :png))
                    (funcall callback (list 'error (format "shared://%s/view.png: %s"
                                                           (plist-get meta :id)
                                                           (car (last value))))))))))))

(defun mevedel-shared--board-create (session meta content)
  "Open whiteboard META of SESSION with CONTENT and save it.
CONTENT is an Excalidraw scene or elements array as JSON, or nil."
  (let* ((id (plist-get meta :id))
         (key (mevedel-shared--board-key session id))
         (scene (and content (not (string-empty-p (string-trim content)))
                     (if (string-prefix-p "[" (string-trim content))
                         (format "{\"type\":\"excalidraw\",\"version\":2,\"elements\":%s}" content)
                       content))))
    (make-directory (mevedel-shared--directory session) t)
    (puthash key (list (mevedel-core-shared-board-open (list :id id :key key :scene scene))
                       session id nil)
             mevedel-shared--boards)
    (mevedel-shared--board-save session id)))

(defun mevedel-shared--library-elements (session op)
  "Return the elements of the library item OP names in SESSION, as a vector."
  (let* ((name (plist-get op :library))
         (file (or (cdr (assoc name (mevedel-shared--libraries session)))
                   (error "No element library `%s' (Read shared://library)" name)))
         (items (mevedel-shared--library-items file))
         (n (plist-get op :item)))
    (unless (and (integerp n) (<= 1 n (length items)))
      (error "Library %s has items 1 to %d, not %S" name (length items) n))
    (plist-get (nth (1- n) items) :elements)))

(defun mevedel-shared--image-source (session source)
  "Return (MIME . BASE64) of SOURCE, an image file or a readable resource.
A resource is file-backed, or an image of one of SESSION's whiteboards
\(shared://ID/images/KEY)."
  (let* ((attempt (and (mevedel-resource-address-p source)
                       (or (mevedel-resource-take-prepared source "Read")
                           (mevedel-resource-prepare source "Read"))))
         (facts (and attempt (mevedel-core-resource-attempt-facts attempt)))
         (canonical (plist-get facts :canonical)))
    (if (and canonical (string-match "\\`shared://\\([^/]+\\)/images/\\([^/]+\\)\\'" canonical))
        (let* ((id (match-string 1 canonical))
               (key (match-string 2 canonical))
               (meta (mevedel-shared-meta session id)))
          (pcase (and meta (eq (plist-get meta :kind) 'whiteboard)
                      (mevedel-core-shared-board-image (mevedel-shared--board session meta) key))
            (`(,mime ,base64) (cons mime base64))
            (_ (error "%s is unavailable: no whiteboard image there" source))))
      (let* ((file (cond ((null attempt) (expand-file-name source))
                         ((and (plist-get facts :available)
                               (= 1 (length (plist-get facts :paths))))
                          (car (plist-get facts :paths)))
                         (t (error "%s is no image: add-image takes a file, a file-backed \
resource or shared://ID/images/KEY" source))))
             (type (image-supported-file-p file)))
        (unless (and type (file-regular-p file))
          (error "%s is not an image file (PNG, JPEG, GIF, WebP or SVG)" source))
        (cons (pcase type
                ('svg "image/svg+xml")
                ('jpeg "image/jpeg")
                (_ (format "image/%s" type)))
              (with-temp-buffer
                (set-buffer-multibyte nil)
                (insert-file-contents-literally file)
                (base64-encode-region (point-min) (point-max) t)
                (buffer-string)))))))

(defun mevedel-shared--board-op (session op source)
  "Return the host's form of the model's whiteboard edit OP in SESSION.
A library insertion gets its item's elements, an image its SOURCE's bytes."
  (pcase (plist-get op :op)
    ((and "insert" (guard (plist-get op :library)))
     (list :op "insert" :elements (mevedel-shared--library-elements session op)
           :x (or (plist-get op :x) 0) :y (or (plist-get op :y) 0)))
    ("add-image"
     (unless source (error "An add-image edit needs SharedEdit's source: an image file or resource"))
     (pcase-let ((`(,mime . ,data) (mevedel-shared--image-source session source)))
       (append (list :op "add-image"
                     :key (or (plist-get op :key)
                              (substring (secure-hash 'sha256 data) 0 16))
                     :mime mime :data data)
               (cl-loop for key in '(:id :x :y :width :height)
                        when (plist-member op key) append (list key (plist-get op key))))))
    (_ op)))

(defun mevedel-shared--board-edit (session meta ops source)
  "Apply the whiteboard edits OPS (SOURCE: an image) to META of SESSION.
Return (TEXT . PREVIEW) or signal `mevedel-shared-conflict'."
  (let* ((id (plist-get meta :id))
         (handle (mevedel-shared--board session meta))
         (comments (cl-remove-if-not (lambda (op) (equal (plist-get op :op) "comment")) ops))
         (edits (cl-remove-if (lambda (op) (equal (plist-get op :op) "comment")) ops))
         (before (mevedel-core-shared-board-overview handle))
         (result (and edits
                      (mevedel-core-shared-board-edit
                       handle (json-serialize
                               (vconcat (mapcar (lambda (op)
                                                  (mevedel-shared--board-op session op source))
                                                edits))
                               :false-object :json-false)
                       "model"))))
    (dolist (op comments)
      (unless (and (stringp (plist-get op :id)) (stringp (plist-get op :text)))
        (error "Conflict: %s"
               (format "nothing in shared://%s was changed: a comment needs the id of an \
element and a text" id))))
    (when (equal (format "%s" (plist-get result :status)) "conflict")
      (error "Conflict: %s"
             (format "nothing in shared://%s was changed:\n- %s" id
                     (mapconcat
                      (lambda (c)
                        (if (plist-get c :current)
                            (format "element %s changed since you read it; it is now:\n  %s"
                                    (plist-get c :hash) (plist-get c :current))
                          (format "element %s is not on the board (it changed or was \
deleted); Read shared://%s again" (plist-get c :hash) id)))
                      (plist-get result :conflicts) "\n- "))))
    (dolist (op comments)
      (mevedel-core-shared-board-discuss handle (plist-get op :id) "model" (plist-get op :text)))
    (mevedel-shared--board-save session id)
    (let ((after (mevedel-core-shared-board-overview handle)))
      (cons (concat (format "Edited shared://%s: %d changed, %d added, %d deleted%s."
                            id (length (plist-get result :changed))
                            (length (plist-get result :added))
                            (length (plist-get result :deleted))
                            (if comments (format ", %d comment(s)" (length comments)) ""))
                    (if (plist-get result :lines)
                        (concat "  New and changed lines:\n"
                                (string-join (plist-get result :lines) "\n"))
                      ""))
            (condition-case nil
                (mevedel-core-patch-diff-texts before after (concat "shared://" id))
              (mevedel-core-error nil))))))

(defun mevedel-shared-visit (address chat)
  "Open the item of CHAT's session that the clicked ADDRESS names.
The address is validated and normalized first; a listing or library
address opens nothing and gives nil."
  (let ((canonical (condition-case err
                       (mevedel-resource-parse address)
                     (error (user-error "%s" (error-message-string err))))))
    (when (string-match "\\`shared://\\([a-zA-Z0-9_-]+\\)" canonical)
      (let ((id (match-string 1 canonical)))
        (unless (equal id "library")
          (let ((session (mevedel-chat-session chat)))
            (unless (mevedel-shared-meta session id)
              (user-error "%s is unavailable: no shared item with that id" address))
            (mevedel-shared-open session id)
            t))))))

(defun mevedel-shared--board-url (session meta)
  "Return the page address of whiteboard META of SESSION."
  (mevedel-core-shared-board-serve (mevedel-shared--board session meta)))

(defun mevedel-shared--board-scene-text (session meta)
  "Return the exported Excalidraw scene JSON of whiteboard META of SESSION."
  (mevedel-core-shared-board-scene (mevedel-shared--board session meta) t))

(defun mevedel-shared--board-event (data)
  "Save the board a browser changed or commented on; DATA is (KEY . PLIST)."
  (when-let* ((entry (gethash (car data) mevedel-shared--boards)))
    (mevedel-shared--board-save (nth 1 entry) (nth 2 entry))))

(defun mevedel-shared--close-boards (session)
  "Close SESSION's open whiteboards.  For `mevedel-session-close-functions'."
  (let ((prefix (concat (mevedel-session-id session) "/")))
    (maphash (lambda (key entry)
               (when (string-prefix-p prefix key)
                 (mevedel-core-shared-board-close (car entry))
                 (remhash key mevedel-shared--boards)))
             mevedel-shared--boards)))

(defun mevedel-shared--rewound (paths)
  "Bring the open whiteboards whose scene file is among PATHS up to date.
A restored scene is taken back (open pages follow); a board whose file
the rewind removed is closed.  For `mevedel-checkpoint-rewound-functions'."
  (maphash (lambda (key entry)
             (pcase-let ((`(,handle ,session ,id) entry))
               (let ((file (mevedel-shared--content-file session id 'excalidraw)))
                 (when (member file paths)
                   (if (file-exists-p file)
                       (when-let* ((meta (mevedel-shared-meta session id)))
                         (mevedel-shared--board session meta))
                     (mevedel-core-shared-board-close handle)
                     (remhash key mevedel-shared--boards))))))
           mevedel-shared--boards))

(mevedel-core-register-event-handler 'shared-changed #'mevedel-shared--board-event)
(mevedel-core-register-event-handler 'shared-comment #'mevedel-shared--board-event)
(mevedel-core-register-event-handler 'shared-pages #'ignore)
(add-hook 'mevedel-session-close-functions #'mevedel-shared--close-boards)
(add-hook 'mevedel-checkpoint-rewound-functions #'mevedel-shared--rewound)

;;;; Libraries

(defun mevedel-shared--libraries (session)
  "Return SESSION's element libraries as (NAME . FILE), by name."
  (let ((workspace (mevedel-session-workspace session))
        (found nil))
    (dolist (dir mevedel-shared-library-directories)
      (let ((dir (expand-file-name dir (if (string-prefix-p "~" dir) "~" workspace))))
        (when (file-directory-p dir)
          (dolist (file (directory-files dir t "\\.excalidrawlib\\'"))
            (let ((name (file-name-base file)))
              (when (and (string-match-p mevedel-shared-id-regexp name)
                         (not (assoc name found)))
                (push (cons name file) found)))))))
    (sort found (lambda (a b) (string< (car a) (car b))))))

(defun mevedel-shared--library-items (file)
  "Return the items of the library FILE as a list of plists."
  (let ((data (with-temp-buffer
                (insert-file-contents file)
                (json-parse-buffer :object-type 'plist))))
    (or (append (plist-get data :libraryItems) nil)
        ;; Version 1 libraries are arrays of element arrays.
        (mapcar (lambda (elements) (list :elements elements))
                (plist-get data :library)))))

(defun mevedel-shared--library-view (session parts)
  "Return the view of shared://library/PARTS in SESSION.
A sheet is (sheet NAME), NAME nil for every library, which
`mevedel-shared-serve' draws."
  (let ((libraries (mevedel-shared--libraries session)))
    (pcase parts
      ('nil (if libraries
                (mapconcat (lambda (lib)
                             (format "shared://library/%s  %d items" (car lib)
                                     (length (mevedel-shared--library-items (cdr lib)))))
                           libraries "\n")
              "No element libraries: put Excalidraw .excalidrawlib files in \
.mevedel/libraries/ of the workspace or in ~/.mevedel/libraries/."))
      ('("sheet.png") (list 'sheet nil))
      (`(,name "sheet.png")
       (unless (assoc name libraries)
         (signal 'mevedel-core-resource-error
                 (list (format "shared://library/%s is unavailable: no library has that name \
\(Read shared://library)" name))))
       (list 'sheet name))
      (`(,name)
       (let ((file (or (cdr (assoc name libraries))
                       (signal 'mevedel-core-resource-error
                               (list (format "shared://library/%s is unavailable: no library \
has that name (Read shared://library)" name))))))
         (let ((n 0))
           (mapconcat (lambda (item)
                        (format "%d %s (%d elements)" (cl-incf n)
                                (json-serialize (or (plist-get item :name) "unnamed"))
                                (length (plist-get item :elements))))
                      (mevedel-shared--library-items file) "\n")))))))

(defun mevedel-shared--sheet-items (session name)
  "Return the items of library NAME of SESSION, or of all, as (LABEL . ELEMENTS)."
  (cl-loop for (library . file) in (mevedel-shared--libraries session)
           when (or (null name) (equal name library))
           append (let ((n 0))
                    (mapcar (lambda (item)
                              (cons (if name (format "%d" (cl-incf n))
                                      (format "%s %d" library (cl-incf n)))
                                    (append (plist-get item :elements) nil)))
                            (mevedel-shared--library-items file)))))

(defun mevedel-shared--bounds (elements)
  "Return (X0 Y0 X1 Y1), the box around ELEMENTS."
  (let ((number (lambda (v) (if (numberp v) v 0))))
    (cl-loop for e in elements
             for x = (funcall number (plist-get e :x))
             for y = (funcall number (plist-get e :y))
             minimize x into x0 minimize y into y0
             maximize (+ x (abs (funcall number (plist-get e :width)))) into x1
             maximize (+ y (abs (funcall number (plist-get e :height)))) into y1
             finally return (list (or x0 0) (or y0 0) (or x1 0) (or y1 0)))))

(defun mevedel-shared--sheet-scene (items)
  "Return the scene JSON of ITEMS, (LABEL . ELEMENTS), in a numbered grid."
  (let* ((boxes (mapcar (lambda (item) (mevedel-shared--bounds (cdr item))) items))
         (cell-w (+ 60 (apply #'max 100 (mapcar (lambda (b) (- (nth 2 b) (nth 0 b))) boxes))))
         (cell-h (+ 80 (apply #'max 60 (mapcar (lambda (b) (- (nth 3 b) (nth 1 b))) boxes))))
         (columns (max 1 (ceiling (sqrt (length items)))))
         (seen (make-hash-table :test #'equal))
         (elements nil)
         (i 0))
    (cl-loop
     for (label . members) in items
     for (x0 y0) in boxes
     do (let ((ox (* cell-w (% i columns)))
              (oy (+ 40 (* cell-h (/ i columns)))))
          (push (list :type "text" :id (format "sheet-label-%d" i) :x ox :y (- oy 35)
                      :width 160 :height 25 :fontSize 20 :text label)
                elements)
          (dolist (e members)
            (let ((id (format "%s" (plist-get e :id))))
              (when (gethash id seen) (setq id (format "%s-%d" id i)))
              (puthash id t seen)
              (push (append (list :id id
                                  :x (+ ox (- (or (plist-get e :x) 0) x0))
                                  :y (+ oy (- (or (plist-get e :y) 0) y0)))
                            (cl-loop for (k v) on e by #'cddr
                                     unless (memq k '(:id :x :y)) append (list k v)))
                    elements)))
          (cl-incf i)))
    (json-serialize (list :type "excalidraw" :version 2 :elements (vconcat (nreverse elements))))))

(defun mevedel-shared--sheet (session name callback)
  "Draw the numbered sheet of library NAME (all when nil) of SESSION for CALLBACK.
CALLBACK gets (file PATH) or (error MESSAGE).  The sheet is a board
made for the drawing and closed after it."
  (let ((items (mevedel-shared--sheet-items session name)))
    (if (null items)
        (funcall callback (list 'error "shared://library/sheet.png is unavailable: there are \
no library items (Read shared://library)"))
      (let ((handle (mevedel-core-shared-board-open
                     (list :id "sheet" :key (concat (mevedel-session-id session) "/sheet")
                           :scene (mevedel-shared--sheet-scene items)))))
        (mevedel-core-shared-board-render
         handle (lambda (status value)
                  (mevedel-core-shared-board-close handle)
                  (funcall callback
                           (if (eq status 'ok)
                               (list 'file (mevedel-shared--picture-file
                                            "image/png" (plist-get value :png)))
                             (list 'error (format "The library sheet: %s"
                                                  (car (last value))))))))))))

;;;; Creating

(defun mevedel-shared--slug (title)
  "Return an item id made from TITLE."
  (let ((slug (string-trim (replace-regexp-in-string "[^a-z0-9]+" "-" (downcase title)) "-" "-")))
    (if (string-empty-p slug) "item" (substring slug 0 (min 40 (length slug))))))

(defun mevedel-shared-new-id (session args)
  "Return the id a SharedCreate call with ARGS gives its item in SESSION.
The :id of ARGS when given, else one made from the title that no item
has yet."
  (let ((id (plist-get args :id)))
    (if (stringp id)
        id
      (let* ((base (mevedel-shared--slug (or (plist-get args :title) "")))
             (candidate base)
             (n 1))
        (while (mevedel-shared-meta session candidate)
          (setq candidate (format "%s-%d" base (cl-incf n))))
        candidate))))

(defun mevedel-shared-create (session args &optional author)
  "Create the item SharedCreate's ARGS describe in SESSION; return the result text.
ARGS: :kind (\"document\" or \"whiteboard\"), :title, optionally :id,
:format (\"markdown\" or \"org\", documents) and :content (a document's
text, or a whiteboard's Excalidraw scene or elements as JSON).  AUTHOR
is who created it, `model' by default."
  (let* ((kind (intern (plist-get args :kind)))
         (title (plist-get args :title))
         (id (mevedel-shared-new-id session args))
         (format (if (eq kind 'whiteboard) 'excalidraw
                   (intern (or (plist-get args :format) "markdown"))))
         (content (plist-get args :content)))
    (unless (string-match-p mevedel-shared-id-regexp id)
      (error "`%s' is not an item id: use 1 to 80 of a-z A-Z 0-9 _ -" id))
    (when (mevedel-shared-meta session id)
      (error "The item shared://%s exists already; edit it with SharedEdit or choose another id" id))
    (mevedel-session-ensure-storage session)
    (let ((meta (list :id id :kind kind :format format :title title
                      :created (format-time-string "%FT%T.%6N%z")
                      :discussions nil
                      :history (list (list :time (format-time-string "%FT%T%z")
                                           :author (or author 'model) :text "created it")))))
      (if (eq kind 'whiteboard)
          (mevedel-shared--board-create session meta content)
        (let ((file (mevedel-shared--content-file session id format)))
          (make-directory (file-name-directory file) t)
          (with-temp-file file
            (when (and content (not (string-empty-p content)))
              (insert (string-trim-right content) "\n")))))
      (mevedel-shared--write-meta session meta)
      (concat (format "Created %s shared://%s.  The user opens it with M-x mevedel-shared-open.\n\n"
                      kind id)
              (mevedel-shared-view (concat "shared://" id) session)))))

;;;; Editing documents

(defun mevedel-shared--stale (id lines hash)
  "Return why HASH is not among the current LINES of document ID, with its line."
  (let* ((marker (and mevedel-shared--issued (gethash hash mevedel-shared--issued)))
         (pos (and marker (marker-position marker)))
         (now (and pos (cl-find-if (pcase-lambda (`(,_ ,_ ,start ,end)) (<= start pos end))
                                   lines))))
    (if now
        (format "block %s changed since you read it; its place now holds:\n  %s"
                hash (mevedel-shared--line id (mevedel-shared-meta (car mevedel-shared--item) id)
                                           now))
      (format "block %s is not in shared://%s (it changed or was removed); Read shared://%s again"
              hash id id))))

(defun mevedel-shared--edit-change (op lines)
  "Return the buffer change (START END TEXT KIND) of document edit OP.
LINES are the document's current blocks.  Comments give nil."
  (let* ((kind (plist-get op :op))
         (target (cl-find (plist-get op :hash) lines :key #'car :test #'equal))
         (text (and (stringp (plist-get op :text)) (string-trim (plist-get op :text) "\n+" "\n+"))))
    (pcase kind
      ("replace" (list (nth 2 target) (nth 3 target) text kind))
      ("delete"
       (let* ((tail (cdr (memq target lines)))
              (before (car (last (butlast lines (length (memq target lines)))))))
         (cond (tail (list (nth 2 target) (nth 2 (car tail)) "" kind))
               (before (list (nth 3 before) (nth 3 target) "" kind))
               (t (list (point-min) (point-max) "" kind)))))
      ("insert"
       (let ((after (cl-find (plist-get op :after) lines :key #'car :test #'equal))
             (before (cl-find (plist-get op :before) lines :key #'car :test #'equal)))
         (cond (after (list (nth 3 after) (nth 3 after) (concat "\n\n" text) kind))
               (before (list (nth 2 before) (nth 2 before) (concat text "\n\n") kind))
               (lines (let ((end (nth 3 (car (last lines)))))
                        (list end end (concat "\n\n" text) kind)))
               (t (list (point-min) (point-max) (concat text "\n") kind))))))))

(defun mevedel-shared--check-op (op lines id)
  "Return the problems of document edit OP on LINES of ID, as strings."
  (let ((kind (plist-get op :op))
        (problems nil))
    (unless (member kind '("replace" "delete" "insert" "comment"))
      (push (format "`%s' is not a document edit (replace, delete, insert, comment)" kind)
            problems))
    (when (and (member kind '("replace" "insert" "comment"))
               (not (and (stringp (plist-get op :text))
                         (not (string-empty-p (string-trim (plist-get op :text)))))))
      (push (format "%s needs a non-empty text" kind) problems))
    (dolist (key (pcase kind
                   ((or "replace" "delete" "comment") '(:hash))
                   ("insert" '(:after :before))))
      (let ((hash (plist-get op key)))
        (cond
         ((and (null hash) (eq key :hash)) (push (format "%s needs a target hash" kind) problems))
         ((null hash))
         ((not (stringp hash)) (push (format "%s: a hash is a string" kind) problems))
         ((not (assoc hash lines)) (push (mevedel-shared--stale id lines hash) problems)))))
    (nreverse problems)))

(defun mevedel-shared--edit-document (session meta ops)
  "Apply the document edits OPS to item META of SESSION, all or none.
Return (TEXT . PREVIEW): the result and a diff of the change."
  (let ((id (plist-get meta :id)))
    (with-current-buffer (mevedel-shared--document-buffer session meta)
      (let* ((lines (mevedel-shared--document-lines))
             (problems (cl-loop for op in ops append (mevedel-shared--check-op op lines id)))
             (named (cl-loop for op in ops
                             when (member (plist-get op :op) '("replace" "delete"))
                             collect (plist-get op :hash))))
        (dolist (hash (cl-remove-duplicates named :test #'equal))
          (when (> (cl-count hash named :test #'equal) 1)
            (push (format "block %s is named by two edits" hash) problems)))
        (dolist (op ops)
          (when (and (equal (plist-get op :op) "insert")
                     (cl-some (lambda (other)
                                (and (equal (plist-get other :op) "delete")
                                     (member (plist-get other :hash)
                                             (list (plist-get op :after) (plist-get op :before)))))
                              ops))
            (push "an insert is anchored to a block the same edit deletes" problems)))
        (when problems
          (error "Conflict: %s"
                 (format "nothing in shared://%s was changed:\n- %s" id
                         (string-join (delete-dups problems) "\n- "))))
        (let* ((before (buffer-substring-no-properties (point-min) (point-max)))
               (changes (cl-loop for op in ops
                                 for change = (and (not (equal (plist-get op :op) "comment"))
                                                   (mevedel-shared--edit-change op lines))
                                 when change collect change))
               (old-hashes (mapcar #'car lines)))
          (when changes
            (let ((fresh nil))
              (save-excursion
                (atomic-change-group
                  (dolist (change (sort (reverse changes)
                                        (lambda (a b) (or (> (car a) (car b))
                                                          (and (= (car a) (car b))
                                                               (> (cadr a) (cadr b)))))))
                    (pcase-let ((`(,start ,end ,text) change))
                      (goto-char start)
                      (delete-region start end)
                      (insert text)
                      (unless (string-empty-p text)
                        (let ((overlay (make-overlay start (point))))
                          (overlay-put overlay 'face 'mevedel-shared-change)
                          (push overlay fresh)))))))
              (run-at-time mevedel-shared-highlight-seconds nil #'mapc #'delete-overlay fresh))
            (mevedel-shared--save-document))
          (dolist (op ops)
            (when (equal (plist-get op :op) "comment")
              (mevedel-shared--comment session id (plist-get op :hash) 'model
                                       (plist-get op :text))))
          (mevedel-shared--show-discussions (mevedel-shared-meta session id))
          (let* ((counts (mapcar (lambda (kind)
                                   (cons kind (cl-count kind ops :key (lambda (o) (plist-get o :op))
                                                        :test #'equal)))
                                 '("replace" "delete" "insert" "comment")))
                 (summary (string-join
                           (cl-loop for (kind . n) in counts
                                    when (> n 0)
                                    collect (format "%d %s" n
                                                    (pcase kind ("replace" "replaced")
                                                           ("delete" "deleted")
                                                           ("insert" "inserted")
                                                           ("comment" "commented on"))))
                           ", "))
                 (meta (mevedel-shared-meta session id))
                 (now (mevedel-shared--document-lines))
                 (fresh (cl-remove-if (lambda (line) (member (car line) old-hashes)) now)))
            (mevedel-shared--issue now)
            (mevedel-shared--note session id 'model (concat summary " block(s)"))
            (cons (concat (format "Edited shared://%s: %s block(s); it has %d blocks now."
                                  id summary (length now))
                          (if fresh
                              (concat "  New and changed lines:\n"
                                      (mapconcat (lambda (line) (mevedel-shared--line id meta line))
                                                 fresh "\n"))
                            ""))
                  (and changes
                       (condition-case nil
                           (mevedel-core-patch-diff-texts
                            before (buffer-substring-no-properties (point-min) (point-max))
                            (concat "shared://" id))
                         (mevedel-core-error nil))))))))))

(defun mevedel-shared-edit (session args)
  "Apply SharedEdit's ARGS to an item of SESSION.
Return (TEXT . PREVIEW), or signal `mevedel-shared-conflict' when a
hash is stale or an edit is malformed: nothing is changed then."
  (let* ((id (plist-get args :id))
         (meta (or (mevedel-shared-meta session id)
                   (error "The item shared://%s is unavailable: no shared item with that id exists in \
this session (Read shared:// lists them)" id)))
         (ops (append (plist-get args :edits) nil)))
    (unless ops (error "SharedEdit needs at least one edit"))
    (if (eq (plist-get meta :kind) 'document)
        (mevedel-shared--edit-document session meta ops)
      (mevedel-shared--board-edit session meta ops (plist-get args :source)))))

(defun mevedel-shared-save-image (session args callback)
  "Write the image SharedSaveImage's ARGS name in SESSION to a new file.
CALLBACK gets the result text, or an \"Error: \" text.  The picture is
written in one step once it is ready; a call cancelled before that
writes nothing, so its cancellation is its true outcome."
  (condition-case err
      (let* ((id (plist-get args :id))
             (meta (or (mevedel-shared-meta session id)
                       (error "The item shared://%s is unavailable: no shared item with that id"
                              id)))
             (file (expand-file-name (plist-get args :file_path)))
             ;; The handler runs in the workspace: name the file from there.
             (display (if (file-in-directory-p file default-directory)
                          (file-relative-name file default-directory)
                        file))
             (cancelled nil))
        (when (eq (plist-get meta :kind) 'document)
          (error "The item shared://%s is a document: only whiteboards have images" id))
        (when (file-exists-p file)
          (error "%s exists already: SharedSaveImage writes a new file only" display))
        (mevedel-pipeline-add-canceller (lambda () (setq cancelled t)))
        (mevedel-shared--board-picture
         session meta (plist-get args :image)
         (lambda (value)
           (pcase value
             ((and `(file ,path) (guard cancelled)) (delete-file path))
             (`(file ,path)
              (funcall callback
                       (condition-case err
                           (progn
                             (make-directory (file-name-directory file) t)
                             (rename-file path file)
                             (format "Wrote %s (%d bytes)." display
                                     (file-attribute-size (file-attributes file))))
                         (error (ignore-errors (delete-file path))
                                (concat "Error: " (error-message-string err))))))
             (`(error ,message) (funcall callback (concat "Error: " message)))))))
    (error (funcall callback (concat "Error: " (error-message-string err))))))

;;;; Commands

(defun mevedel-shared--current-session ()
  "Return the session of the current buffer.
Its own, its shared item's, or the chat's of its workspace."
  (or (and (mevedel-session-p mevedel-session-current) mevedel-session-current)
      (car mevedel-shared--item)
      (when-let* ((chat (mevedel-chat-get (mevedel-chat-workspace-root))))
        (mevedel-chat-session chat))
      (user-error "No mevedel session here")))

(defun mevedel-shared--read-item (session prompt)
  "Ask with PROMPT for an item of SESSION; return its metadata."
  (let* ((items (or (mevedel-shared-items session)
                    (user-error "This session has no shared items")))
         (choices (mapcar (lambda (meta)
                            (cons (format "%s  %s %s" (plist-get meta :id) (plist-get meta :kind)
                                          (plist-get meta :title))
                                  meta))
                          items))
         (choice (completing-read prompt choices nil t)))
    (cdr (assoc choice choices))))

;;;###autoload
(defun mevedel-shared-new (session kind title &optional format)
  "Make a shared item of KIND titled TITLE in SESSION and open it.
KIND is `document' (FORMAT `markdown' or `org') or `whiteboard'.  The
model finds it at shared:// and edits it with you."
  (interactive
   (let* ((session (mevedel-shared--current-session))
          (kind (intern (completing-read "Share a: " '("document" "whiteboard") nil t)))
          (title (read-string "Title: ")))
     (list session kind title
           (and (eq kind 'document)
                (intern (completing-read "Format: " '("markdown" "org") nil t))))))
  (let* ((args (list :kind (symbol-name kind) :title title
                     :format (and format (symbol-name format))))
         (id (mevedel-shared-new-id session args)))
    (mevedel-shared-create session (plist-put args :id id) 'user)
    (mevedel-shared-open session id)
    id))

;;;###autoload
(defun mevedel-shared-open (session id)
  "Open item ID of SESSION: a document's buffer, a whiteboard in the browser."
  (interactive (let ((session (mevedel-shared--current-session)))
                 (list session (plist-get (mevedel-shared--read-item session "Open shared item: ")
                                          :id))))
  (let ((meta (or (mevedel-shared-meta session id) (user-error "No shared item %s" id))))
    (if (eq (plist-get meta :kind) 'document)
        (pop-to-buffer (mevedel-shared--document-buffer session meta))
      (browse-url (mevedel-shared--board-url session meta)))))

;;;###autoload
(defun mevedel-shared-export (session id file)
  "Write item ID of SESSION to FILE: a .md or .org document, an .excalidraw scene."
  (interactive
   (let* ((session (mevedel-shared--current-session))
          (meta (mevedel-shared--read-item session "Export shared item: "))
          (ext (alist-get (plist-get meta :format) mevedel-shared--extensions)))
     (list session (plist-get meta :id)
           (read-file-name "Export to: " nil nil nil (concat (plist-get meta :id) "." ext)))))
  (let* ((meta (or (mevedel-shared-meta session id) (user-error "No shared item %s" id)))
         (text (if (eq (plist-get meta :kind) 'document)
                   (with-current-buffer (mevedel-shared--document-buffer session meta)
                     (buffer-substring-no-properties (point-min) (point-max)))
                 (mevedel-shared--board-scene-text session meta))))
    (let ((coding-system-for-write 'utf-8))
      (write-region text nil file nil (if (called-interactively-p 'any) nil 'silent)))
    file))

(defun mevedel-shared-comment (text)
  "Comment TEXT on the block at point of this shared document, for the model."
  (interactive (list (read-string "Comment for the model: ")))
  (unless mevedel-shared--item (user-error "Not a shared document"))
  (let* ((pos (point))
         (line (or (cl-find-if (pcase-lambda (`(,_ ,_ ,start ,end)) (<= start pos (max end (1+ start))))
                               (mevedel-shared--document-lines))
                   (user-error "Point is on no block")))
         (session (car mevedel-shared--item))
         (id (cdr mevedel-shared--item)))
    (mevedel-shared--comment session id (car line) 'user text)
    (mevedel-shared--note session id 'user (format "commented on %s" (car line)))
    (mevedel-shared--show-discussions (mevedel-shared-meta session id))
    (message "Comment on block %s of shared://%s saved; the model sees it with its next request"
             (car line) id)))

(provide 'mevedel-shared)
;;; mevedel-shared.el ends here
