;;; mevedel-memory.el --- Persistent memory and the workspace journal in the prompt  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Two prompt components over what the resource layer already serves:
;;
;; - `memory-index': the files of the configured memory roots
;;   (`mevedel-resource-memory-roots'), each as its memory://KEY/PATH
;;   address and its first line, bounded.  The model reads them with
;;   Read and writes them with ApplyPatch on the explicit address, under
;;   the normal review.  A root's listing is kept until one of its
;;   directories changes (their modification times are checked, nothing
;;   is listed again otherwise; one module call stamps them all).
;; - `journal-map': the recent public entries of the workspace journal
;;   (.mevedel/journal/NAME.md, NAME being YYYY-MM-DDTHH:MM:SSZ-SLUG),
;;   newest first, within `mevedel-resource-journal-recall-days'.  The
;;   directory is looked at most once every ten seconds; ages are checked
;;   on every use.  It belongs in the main session's prompt only.
;;
;; `mevedel-memory-journal-file-name' names a new entry;
;; `mevedel-memory-journal-new' (/journal) opens one for the user.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'url-util)
(require 'project)
(require 'mevedel-core)
(require 'mevedel-prompt)
(require 'mevedel-resource)

(defgroup mevedel-memory nil
  "Persistent memory and the journal in mevedel's prompt."
  :group 'mevedel
  :prefix "mevedel-memory-")

(defcustom mevedel-memory-index-entries 100
  "How many memory files the prompt's memory index lists at most."
  :type 'natnum)

(defcustom mevedel-memory-journal-map-entries 20
  "How many journal entries the prompt's journal map lists at most."
  :type 'natnum)

;;;; Memory roots

(defconst mevedel-memory--journal-guidance
  (concat "The workspace journal (memory://journal/, read-only) holds dated public entries.  "
          "When the user asks you to record the work, write a short entry with ApplyPatch as "
          "an Add File of .mevedel/journal/YYYY-MM-DDTHH:MM:SSZ-SLUG.md in the workspace root "
          "(UTC time now, SLUG a few lowercase words joined by dashes): what was done, why, and "
          "what is left.  That new file is the one thing ApplyPatch may write under .mevedel/; "
          "entries are never edited, moved or deleted afterwards.")
  "How the model writes a journal entry, in the memory index.")

(defvar mevedel-memory--listings (make-hash-table :test #'equal)
  "Per memory root: (DIRECTORY-STAMPS . FILES), FILES relative, sorted.")

(defun mevedel-memory--mtime (dir)
  "Return DIR's stamp, or nil when it is not a directory."
  (let ((stamp (mevedel-prompt-file-stamp dir)))
    (and stamp (string-prefix-p "d:" stamp) stamp)))

(defun mevedel-memory--walk (root)
  "Return (DIRECTORY-STAMPS . FILES) of ROOT, listed now, at most the index's size."
  (let ((times nil) (files nil) (queue (list root))
        (limit (1+ mevedel-memory-index-entries)))
    (while (and queue (< (length files) limit))
      (let ((dir (pop queue)))
        (push (cons dir (mevedel-memory--mtime dir)) times)
        (dolist (entry (directory-files dir t "\\`[^.]" t))
          (cond ((file-directory-p entry) (setq queue (append queue (list entry))))
                ((file-regular-p entry) (push (file-relative-name entry root) files))))))
    (cons times (sort files #'string<))))

(defun mevedel-memory-root-files (root)
  "Return the files below memory ROOT, relative and sorted, or nil.
The last listing is reused while none of ROOT's directories changed."
  (when (mevedel-memory--mtime root)
    (let ((cached (gethash root mevedel-memory--listings)))
      (if (and cached (equal (mapcar #'cdr (car cached))
                             (mevedel-core-file-stamps (mapcar #'car (car cached)))))
          (cdr cached)
        (let ((listing (mevedel-memory--walk root)))
          (puthash root listing mevedel-memory--listings)
          (cdr listing))))))

(defvar mevedel-memory--first-lines (make-hash-table :test #'equal)
  "First lines by file: (TEXT . LINE), TEXT compared by `eq'.")

(defun mevedel-memory--first-line (file &optional stamp)
  "Return the first non-blank line of FILE, shortened, or nil.
It is found once per text of the file.  STAMP is the file's stamp,
when known."
  (when-let* ((text (mevedel-prompt-file-text file stamp)))
    (let ((cached (gethash file mevedel-memory--first-lines)))
      (if (eq (car cached) text)
          (cdr cached)
        (cdr (puthash file
                      (cons text
                            (and (string-match "^[ \t#*-]*\\([^ \t\n].*\\)$" text)
                                 (truncate-string-to-width (match-string 1 text) 100 nil nil "…")))
                      mevedel-memory--first-lines))))))

(defvar mevedel-memory--indexes (make-hash-table :test #'equal)
  "Memory index texts by workspace: (LISTINGS STAMPS . TEXT).")

(defun mevedel-memory-index (workspace)
  "Return the memory index text of WORKSPACE, or nil without memory roots.
The text is made again only when a root's listing or a listed file's
stamp changed."
  (when-let* ((roots (mevedel-resource-memory-root-list workspace)))
    (let* ((listings (mapcar (lambda (root) (mevedel-memory-root-files (car root))) roots))
           (absolute (cl-loop for (path) in roots
                              for files in listings
                              for dir = (file-name-as-directory path)
                              append (mapcar (lambda (file) (concat dir file))
                                             (seq-take files mevedel-memory-index-entries))))
           (stamps (mevedel-core-file-stamps (seq-take absolute mevedel-memory-index-entries)))
           (cached (gethash workspace mevedel-memory--indexes)))
      (if (and cached (cl-every #'eq (car cached) listings) (equal (cadr cached) stamps))
          (cddr cached)
        (let ((text (mevedel-memory--index-text roots listings stamps)))
          (puthash workspace (cons listings (cons stamps text)) mevedel-memory--indexes)
          text)))))

(defun mevedel-memory--index-text (roots listings stamps)
  "Return the index text of memory ROOTS with their LISTINGS.
STAMPS are those of the first listed files, in order."
  (let ((lines nil) (count 0) (more 0))
    (cl-loop for (path key) in roots
             for files in listings
             for dir = (file-name-as-directory path)
             do (dolist (file files)
                  (if (>= count mevedel-memory-index-entries)
                      (cl-incf more)
                    (cl-incf count)
                    (push (format "- memory://%s/%s%s" key (mevedel-prompt-hexify file)
                                  (if-let* ((line (mevedel-memory--first-line
                                                   (concat dir file) (pop stamps))))
                                      (concat " — " line) ""))
                          lines))))
    (concat
     "Persistent memory (memory://): notes kept across sessions.  Read a note with Read; "
     "add or change one with ApplyPatch on its memory://KEY/PATH address (the user reviews "
     "it).  Keep one topic per short file; record lasting facts and decisions, not "
     "session chatter.\n"
     mevedel-memory--journal-guidance
     "\nRoots: "
     (mapconcat (pcase-lambda (`(,path ,key ,_)) (format "memory://%s/ (%s)" key
                                                         (abbreviate-file-name path)))
                roots ", ")
     "\n"
     (if lines
         (concat "Index:\n" (string-join (nreverse lines) "\n")
                 (if (> more 0) (format "\n… %d more (Glob memory://root lists all)" more) ""))
       "No memory files yet."))))

(defun mevedel-memory--index-component (chat)
  "Return the memory-index component's text for CHAT."
  (mevedel-memory-index (directory-file-name (mevedel-prompt-workspace chat))))

(mevedel-prompt-define-component
 'memory-index :function #'mevedel-memory--index-component
 :budget 8000 :doc "memory://root index (`mevedel-resource-memory-roots')")

;;;; The journal

(defconst mevedel-memory--journal-name-re
  (concat "\\`\\([0-9]\\{4\\}\\)-\\([0-9][0-9]\\)-\\([0-9][0-9]\\)T"
          "\\([0-9][0-9]\\):\\([0-9][0-9]\\):\\([0-9][0-9]\\)Z"
          "\\(?:-[A-Za-z0-9._-]+\\)?\\.md\\'")
  "Names of public journal entries.")

(defun mevedel-memory-journal-entry-name-p (name)
  "Return non-nil when NAME is the file name of a public journal entry."
  (string-match-p mevedel-memory--journal-name-re name))

(defun mevedel-memory-journal-file-name (slug &optional time)
  "Return the file name of a journal entry about SLUG written at TIME.
TIME defaults to now; SLUG is reduced to letters, digits and dashes."
  (let ((slug (replace-regexp-in-string "[^A-Za-z0-9]+" "-" (downcase slug))))
    (format "%s%s.md" (format-time-string "%FT%TZ" time t)
            (if (string-empty-p (string-trim slug "-+" "-+")) ""
              (concat "-" (string-trim slug "-+" "-+"))))))

(defun mevedel-memory-journal-entry-time (name)
  "Return the creation time NAME records, or nil for no entry name."
  (when (string-match mevedel-memory--journal-name-re name)
    (encode-time (list (string-to-number (match-string 6 name))
                       (string-to-number (match-string 5 name))
                       (string-to-number (match-string 4 name))
                       (string-to-number (match-string 3 name))
                       (string-to-number (match-string 2 name))
                       (string-to-number (match-string 1 name))
                       nil nil t))))

(defvar mevedel-memory--journal-seen (make-hash-table :test #'equal)
  "Per journal directory: (TIME . NAMES), when it was last looked at.")

(defconst mevedel-memory--journal-interval 10
  "Seconds between two looks at a journal directory.")

(defun mevedel-memory-journal-names (workspace &optional now)
  "Return WORKSPACE's recallable journal entry names, newest first.
NOW (default the current time) decides the age; the directory is looked
at again only after `mevedel-memory--journal-interval' seconds."
  (let* ((dir (expand-file-name ".mevedel/journal" workspace))
         (now (or now (current-time)))
         (seen (gethash dir mevedel-memory--journal-seen))
         (names (if (and seen (< (float-time (time-subtract now (car seen)))
                                 mevedel-memory--journal-interval)
                         (not (time-less-p now (car seen))))
                    (cdr seen)
                  (let ((names (and (file-directory-p dir)
                                    (cl-remove-if-not
                                     (lambda (name)
                                       (file-regular-p (expand-file-name name dir)))
                                     (directory-files dir nil mevedel-memory--journal-name-re t)))))
                    (puthash dir (cons now names) mevedel-memory--journal-seen)
                    names)))
         (oldest (time-subtract now (* 86400 mevedel-resource-journal-recall-days))))
    (sort (cl-remove-if-not
           (lambda (name)
             (let ((time (mevedel-memory-journal-entry-time name)))
               (and time (not (time-less-p time oldest)) (not (time-less-p now time)))))
           names)
          (lambda (a b) (string< b a)))))

(defun mevedel-memory-journal-new (workspace slug)
  "Visit a new journal entry about SLUG in WORKSPACE, for the user to write.
The file is named for now (`mevedel-memory-journal-file-name') and is
created when saved.  Return its buffer."
  (interactive
   (list (or (and (fboundp 'project-current)
                  (when-let* ((project (project-current))) (project-root project)))
             default-directory)
         (read-string "Journal entry about: ")))
  (let* ((dir (expand-file-name ".mevedel/journal" workspace))
         (file (expand-file-name (mevedel-memory-journal-file-name slug) dir)))
    (make-directory dir t)
    (pop-to-buffer (find-file-noselect file))
    (current-buffer)))

(defun mevedel-memory-journal-address (name)
  "Return the memory://journal/ address of entry NAME (colons as %3A)."
  (concat "memory://journal/" (string-replace ":" "%3A" name)))

(defun mevedel-memory-journal-map (workspace)
  "Return the journal map text of WORKSPACE, or nil without recent entries."
  (when-let* ((names (mevedel-memory-journal-names workspace)))
    (let ((dir (expand-file-name ".mevedel/journal" workspace)))
      (concat
       (format "Recent journal entries (last %d days, newest first; Read one for the whole entry):\n"
               mevedel-resource-journal-recall-days)
       (mapconcat (lambda (name)
                    (concat "- " (mevedel-memory-journal-address name)
                            (if-let* ((line (mevedel-memory--first-line
                                             (expand-file-name name dir))))
                                (concat " — " line) "")))
                  (seq-take names mevedel-memory-journal-map-entries) "\n")))))

(defun mevedel-memory--journal-component (chat)
  "Return the journal-map component's text for CHAT."
  (mevedel-memory-journal-map (mevedel-prompt-workspace chat)))

(defun mevedel-memory--resource-lines (chat)
  "Return the memory:// roster lines for CHAT's workspace.
memory://root needs a configured root (a first write may create its
directory); memory://journal/ a recallable published entry."
  (let ((workspace (mevedel-prompt-workspace chat)))
    (append
     (when mevedel-resource-memory-roots
       (list "- memory://root persistent memory (its index is above)"))
     (when (mevedel-memory-journal-names workspace)
       (list "- memory://journal/ dated journal entries (read-only)")))))

(add-hook 'mevedel-prompt-resource-roster-functions #'mevedel-memory--resource-lines -30)

(mevedel-prompt-define-component
 'journal-map :function #'mevedel-memory--journal-component :placement 'update
 :budget 4000 :doc "recent memory://journal/ entries (main session only)")

(provide 'mevedel-memory)
;;; mevedel-memory.el ends here
