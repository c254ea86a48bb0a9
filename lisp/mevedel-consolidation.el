;;; mevedel-consolidation.el --- Reviewing quiet working notes into memory  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Memory consolidation as address-to-resource.md has it: the quiet
;; files of work://shared/ (the workspace's .mevedel/shared/) are
;; reviewed automatically, their lasting knowledge extracted into
;; memory, and each then deleted, kept or condensed, deletion
;; preferred; quiet attachments no note names, and empty folders, are
;; removed too.
;;
;; - When: as a turn of a root chat that has a view ends well, at most
;;   once per `mevedel-consolidation-interval-hours' per workspace, and
;;   only when some shared file has been untouched for
;;   `mevedel-consolidation-quiet-days'.  It waits, like a background
;;   wake, while the chat is busy, a card waits or the composer holds a
;;   draft (`mevedel-mailbox-free-p').  `mevedel-consolidation-enabled'
;;   turns it off.
;; - How: the harness first captures the quiet files and the first
;;   memory root (.mevedel/state/consolidation/STAMP/, private, never
;;   addressed by the model), then removes the quiet unreferenced
;;   attachments and empty folders itself, then starts one background
;;   turn asking the model to review the quiet notes.  Every change the
;;   model makes is an ApplyPatch under the session's permissions and
;;   review (in the default mode the user is asked about each).
;; - Seen and stopped: the turn shows a notice naming the files;
;;   aborting it stops the review (nothing more is changed);
;;   `mevedel-consolidation-undo' puts the notes, attachments and
;;   memory back as they were captured.
;;
;; /clean-work and /learn (mevedel-composer.el) are the explicit,
;; interactive forms.  This file does not write memory itself, does
;; not touch the journal, and does not run in headless runs (no view).

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'mevedel-chat)
(require 'mevedel-mailbox)
(require 'mevedel-prompt)
(require 'mevedel-resource)
(require 'mevedel-view)

;;;; Options

(defgroup mevedel-consolidation nil
  "Reviewing quiet working notes into memory."
  :group 'mevedel
  :prefix "mevedel-consolidation-")

(defcustom mevedel-consolidation-enabled t
  "Non-nil to review quiet working notes into memory on the harness's own."
  :type 'boolean)

(defcustom mevedel-consolidation-quiet-days 7
  "Days a file of work://shared/ is untouched before it is quiet."
  :type 'number)

(defcustom mevedel-consolidation-interval-hours 24
  "Hours between two consolidations of one workspace, at least."
  :type 'number)

(defcustom mevedel-consolidation-max-files 50
  "Quiet files one consolidation reviews at most, the oldest first."
  :type 'natnum)

;;;; What is quiet

(defun mevedel-consolidation--shared (workspace)
  "Return WORKSPACE's shared directory (.mevedel/shared/)."
  (expand-file-name ".mevedel/shared/" workspace))

(defun mevedel-consolidation--state (workspace)
  "Return WORKSPACE's directory of consolidation captures."
  (expand-file-name ".mevedel/state/consolidation/" workspace))

(defun mevedel-consolidation--text-p (file)
  "Return non-nil when FILE's first 8 KiB hold no NUL byte."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file nil 0 8192)
    (not (search-forward "\0" nil t))))

(defun mevedel-consolidation-quiet (workspace)
  "Return WORKSPACE's quiet shared files as (NOTES . ATTACHMENTS), oldest first.
NOTES are text files untouched for `mevedel-consolidation-quiet-days';
ATTACHMENTS the quiet other files that no shared note and no memory
file names.  Both absolute, at most `mevedel-consolidation-max-files'
in all."
  (let ((shared (mevedel-consolidation--shared workspace))
        (before (- (float-time) (* 86400 mevedel-consolidation-quiet-days))))
    (when (file-directory-p shared)
      (let* ((files (directory-files-recursively shared "" nil nil))
             (age (lambda (f) (file-attribute-modification-time (file-attributes f))))
             (quiet (seq-take (sort (cl-remove-if-not
                                     (lambda (f) (< (float-time (funcall age f)) before))
                                     files)
                                    (lambda (a b) (time-less-p (funcall age a) (funcall age b))))
                              mevedel-consolidation-max-files)))
        (when quiet
          ;; Only now is anything read: whether a file is text, and
          ;; which attachments a note or a memory file names.
          (let* ((texts (cl-remove-if-not #'mevedel-consolidation--text-p files))
                 (readers (append texts (mevedel-consolidation--memory-files workspace))))
            (cons (cl-remove-if-not (lambda (f) (member f texts)) quiet)
                  (cl-remove-if (lambda (f)
                                  (or (member f texts)
                                      (mevedel-consolidation--named-p
                                       (file-name-nondirectory f) readers)))
                                quiet))))))))

(defun mevedel-consolidation--named-p (name files)
  "Return non-nil when NAME is found in one of FILES, text files."
  (cl-some (lambda (file)
             (with-temp-buffer
               (insert-file-contents file)
               (search-forward name nil t)))
           files))

(defun mevedel-consolidation--memory-root (workspace)
  "Return (PATH KEY) of WORKSPACE's first memory root, or nil."
  (car (mevedel-resource-memory-root-list (directory-file-name workspace))))

(defun mevedel-consolidation--memory-files (workspace)
  "Return the files of WORKSPACE's first memory root, absolute."
  (when-let* ((root (car (mevedel-consolidation--memory-root workspace)))
              ((file-directory-p root)))
    (directory-files-recursively root "" nil nil)))

(defun mevedel-consolidation--last (workspace)
  "Return the time of WORKSPACE's last consolidation, a float, or 0."
  (let ((dir (mevedel-consolidation--state workspace)))
    (or (and (file-directory-p dir)
             (car (sort (mapcar #'string-to-number
                                (directory-files dir nil "\\`[0-9]+\\'"))
                        #'>)))
        0)))

(defun mevedel-consolidation-due-p (workspace)
  "Return non-nil when WORKSPACE's quiet notes are due for a review."
  (and mevedel-consolidation-enabled
       (> (- (float-time) (mevedel-consolidation--last workspace))
          (* 3600 mevedel-consolidation-interval-hours))
       (let ((quiet (mevedel-consolidation-quiet workspace)))
         (or (car quiet) (cdr quiet)
             (mevedel-consolidation--empty-folders workspace)))))

(defun mevedel-consolidation--empty-folders (workspace)
  "Return the empty folders below WORKSPACE's shared directory, deepest first.
A folder holding only empty folders is empty too."
  (let ((shared (mevedel-consolidation--shared workspace)))
    (when (file-directory-p shared)
      (sort (cl-remove-if-not
             (lambda (dir) (and (file-directory-p dir)
                                (null (directory-files-recursively dir ""))))
             (directory-files-recursively shared "" t))
            (lambda (a b) (> (length a) (length b)))))))

;;;; Capture and undo

(defun mevedel-consolidation--capture (workspace files)
  "Copy FILES and the memory root of WORKSPACE into a new capture; return it.
The capture is .mevedel/state/consolidation/SECONDS/, holding shared/
and memory/ copies and manifest.eld: (:time :shared :memory-root
:memory), the relative names of what it holds."
  (let* ((time (float-time))
         (dir (expand-file-name (format "%d/" (truncate time))
                                (mevedel-consolidation--state workspace)))
         (shared (mevedel-consolidation--shared workspace))
         (memory-root (car (mevedel-consolidation--memory-root workspace)))
         (memory (mevedel-consolidation--memory-files workspace)))
    (cl-flet ((keep (file base into)
                (let ((copy (expand-file-name (file-relative-name file base)
                                              (expand-file-name into dir))))
                  (make-directory (file-name-directory copy) t)
                  (copy-file file copy t t)
                  (file-relative-name file base))))
      (make-directory dir t)
      (let ((manifest
             (list :time time
                   :shared (mapcar (lambda (f) (keep f shared "shared")) files)
                   :memory-root memory-root
                   :memory (mapcar (lambda (f) (keep f memory-root "memory")) memory))))
        (with-temp-file (expand-file-name "manifest.eld" dir)
          (prin1 manifest (current-buffer)))
        (mevedel-consolidation--prune workspace)
        dir))))

(defun mevedel-consolidation--prune (workspace)
  "Delete all but the newest three captures of WORKSPACE."
  (let ((state (mevedel-consolidation--state workspace)))
    (dolist (old (nthcdr 3 (sort (directory-files state nil "\\`[0-9]+\\'")
                                 (lambda (a b) (> (string-to-number a) (string-to-number b))))))
      (delete-directory (expand-file-name old state) t))))

;;;###autoload
(defun mevedel-consolidation-undo (workspace)
  "Put back WORKSPACE's notes and memory as its last consolidation found them.
The captured shared files return; the memory root returns to its
captured files (a memory file made since the capture is removed).
The capture is then deleted.  Interactively, WORKSPACE is the current
chat's, else `default-directory'."
  (interactive (list (if-let* ((chat (ignore-errors (mevedel-view-chat (current-buffer)))))
                         (mevedel-prompt-workspace chat)
                       default-directory)))
  (let* ((state (mevedel-consolidation--state workspace))
         (stamp (and (file-directory-p state)
                     (car (sort (directory-files state nil "\\`[0-9]+\\'")
                                (lambda (a b) (> (string-to-number a) (string-to-number b)))))))
         (dir (and stamp (expand-file-name (concat stamp "/") state)))
         (manifest (and dir (with-temp-buffer
                              (insert-file-contents (expand-file-name "manifest.eld" dir))
                              (read (current-buffer))))))
    (unless manifest (user-error "No consolidation of %s to undo" workspace))
    (let ((shared (mevedel-consolidation--shared workspace))
          (memory-root (plist-get manifest :memory-root)))
      (dolist (name (plist-get manifest :shared))
        (let ((file (expand-file-name name shared)))
          (make-directory (file-name-directory file) t)
          (copy-file (expand-file-name name (expand-file-name "shared" dir)) file t t)))
      (when (and memory-root (file-directory-p memory-root))
        (dolist (file (directory-files-recursively memory-root "" nil nil))
          (unless (member (file-relative-name file memory-root) (plist-get manifest :memory))
            (delete-file file))))
      (dolist (name (plist-get manifest :memory))
        (let ((file (expand-file-name name memory-root)))
          (make-directory (file-name-directory file) t)
          (copy-file (expand-file-name name (expand-file-name "memory" dir)) file t t))))
    (delete-directory dir t)
    (when (called-interactively-p 'interactive)
      (message "mevedel: the notes and memory are back as the consolidation found them"))
    t))

;;;; The review

(defun mevedel-consolidation-task (notes memory-key)
  "Return the model's task reviewing NOTES, work://shared/ addresses.
MEMORY-KEY is the memory root's key lasting knowledge goes to."
  (concat
   "Memory consolidation (started by the harness, not the user): these working notes in "
   "work://shared/ have been untouched for a while.\n\n"
   (mapconcat (lambda (address) (concat "- " address)) notes "\n")
   "\n\nRead each one.  First move any lasting knowledge (decisions, conventions, facts "
   "about this project that will still hold) into memory: Read memory://root, update the "
   "topic that already covers it, else add one, with ApplyPatch on a memory://"
   memory-key "/FILE address; never a near-duplicate.  Then delete the note, keep it "
   "when work still depends on it, or condense it to what is still useful, all with "
   "ApplyPatch, preferring deletion.  Touch no other file.  End with one line per note: "
   "its address and what you did."))

(defun mevedel-consolidation-start (chat)
  "Start the consolidation of CHAT's workspace; return non-nil if it started.
Captures first, removes quiet unreferenced attachments and empty
folders, then sends the review as a background turn when quiet notes
are left."
  (let* ((workspace (file-name-as-directory (mevedel-prompt-workspace chat)))
         (quiet (mevedel-consolidation-quiet workspace))
         (notes (car quiet))
         (attachments (cdr quiet))
         (memory (mevedel-consolidation--memory-root workspace))
         (shared (mevedel-consolidation--shared workspace)))
    (mevedel-consolidation--capture workspace (append notes attachments))
    (mapc #'delete-file attachments)
    (mapc #'delete-directory (mevedel-consolidation--empty-folders workspace))
    (when (and notes memory)
      (let ((addresses (mapcar (lambda (f) (concat "work://shared/"
                                                   (mevedel-prompt-hexify
                                                    (file-relative-name f shared))))
                               notes)))
        (mevedel-chat-send
         chat (mevedel-consolidation-task addresses (nth 1 memory))
         :background
         (format "Memory consolidation: reviewing %d quiet note%s of work://shared/%s \
\(abort to stop; M-x mevedel-consolidation-undo puts them back)"
                 (length notes) (if (cdr notes) "s" "")
                 (if attachments
                     (format "; %d unreferenced attachment%s removed"
                             (length attachments) (if (cdr attachments) "s" ""))
                   "")))
        t))))

;;;; Plumbing

(defun mevedel-consolidation--turn-ended (chat outcome)
  "After CHAT's turn ended with OUTCOME, consolidate its workspace if due.
A `mevedel-chat-idle-functions' member: only a root chat with a view
whose turn completed; the check and the start wait for the chat to
be free."
  (when (and (eq outcome 'done) mevedel-consolidation-enabled
             (not (mevedel-chat-agent chat))
             (not (mevedel-chat-read-only chat))
             (mevedel-view-of chat))
    (run-at-time 0 nil
                 (lambda ()
                   (when (and (buffer-live-p (mevedel-chat-data-buffer chat))
                              (mevedel-mailbox-free-p chat)
                              (mevedel-consolidation-due-p (mevedel-prompt-workspace chat)))
                     (mevedel-consolidation-start chat))))))

(add-hook 'mevedel-chat-idle-functions #'mevedel-consolidation--turn-ended 90)

(provide 'mevedel-consolidation)
;;; mevedel-consolidation.el ends here
