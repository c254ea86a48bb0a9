;;; mevedel-edited-files.el --- Telling the model of files changed behind it  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The edited-file reminder.  Every file the model reads with Read is
;; remembered per chat with the text it read.  When such a file changes
;; by anything but the model's own calls (the user editing it in Emacs,
;; a save, another program, or anything between two headless
;; `--continue' runs), the chat's next request carries one context
;; update naming each changed file with a unified diff of the change,
;; so the model does not patch text that is gone.  The update is
;; appended as mail, like the environment update, at a turn's start and
;; before a request continues after tools: the request's prefix is never
;; rewritten.
;;
;; A change the model's own calls make (ApplyPatch, a command) is taken
;; as read.  While the model's calls that may change files run, changes
;; by others are still told apart: at the first such call's start,
;; what changed since the model looked is owed to it; when the last one
;; settles, a file whose visiting buffer the user edited meanwhile, or
;; that was saved from Emacs meanwhile, is owed too, and the rest (what
;; the command wrote, or a program it cannot be told from) is taken as
;; the model's.  What is owed keeps the text the model knew, so a
;; diff shows exactly the change it did not make.
;;
;; The diffs are made by the module off the main thread
;; (`mevedel-core-patch-diffs'), before the request goes: a turn waits
;; for them as it waits for an @mention's resource
;; (`mevedel-chat-before-send-functions'), and a request continuing
;; after tools has them from its calls' PostToolUse step.  Aborting
;; the turn cancels them.  One update's diffs share a budget
;; (`mevedel-edited-files-budget'); a file whose diff does not fit, or
;; that changed after the diffs were made, is named with a pointer to
;; Read it rather than cut.  A file too large to keep is announced
;; without a diff.  What was read is saved with the session
;; (`mevedel-edited-files-saved'), so a continued session compares
;; against the text read before.
;;
;; A resource the model reads can be watched the same way: a function
;; of `mevedel-edited-files-resource-functions' names the resource's
;; key (shared://ID for every part of a shared item) and gives its
;; text now; the update then names the address and diffs that text.
;;
;; This file does not watch files (nothing polls: changes are found
;; when a request is prepared and around the model's calls), and it
;; does not decide how the mail reaches the request (mevedel-chat.el
;; does).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-pipeline)
(require 'mevedel-prompt)
(require 'mevedel-session)
(require 'mevedel-tool-registry)

;;;; Options

(defgroup mevedel-edited-files nil
  "Telling the model of files changed since it read them."
  :group 'mevedel
  :prefix "mevedel-edited-files-")

(defcustom mevedel-edited-files-max-size 262144
  "Characters of a read file kept to diff a later change against.
A larger file is announced as changed without a diff."
  :type 'natnum)

(defcustom mevedel-edited-files-max-files 100
  "Files one chat remembers having read; the oldest read is forgotten first."
  :type 'natnum)

(defcustom mevedel-edited-files-budget 20000
  "Characters the diffs of one context update may take in all.
A file whose diff does not fit is named, and the model told to Read it."
  :type 'natnum)

(defcustom mevedel-edited-files-saved-size 1048576
  "Characters of read texts a session's metadata keeps, newest reads first.
The texts beyond are saved as stamps: a change to those files after a
resume is announced without a diff."
  :type 'natnum)

;;;; What each chat read

(defvar mevedel-edited-files-resource-functions nil
  "Functions of (ADDRESS SESSION) watching a resource the model reads.
The first to answer for ADDRESS returns (KEY . TEXT): KEY the address
that stands for what ADDRESS is part of, TEXT its text now, or nil
when it is gone.  mevedel-tool-editing.el watches shared:// items.")

(defun mevedel-edited-files--resource (address session)
  "Return (KEY . TEXT) of the watched resource ADDRESS in SESSION, or nil."
  (run-hook-with-args-until-success 'mevedel-edited-files-resource-functions address session))

(defun mevedel-edited-files--session (chat)
  "Return the session of CHAT's data buffer, or nil."
  (let ((buffer (mevedel-prompt-chat-data-buffer chat)))
    (and (buffer-live-p buffer) (buffer-local-value 'mevedel-session-current buffer))))

(defsubst mevedel-edited-files--address-p (name)
  "Return non-nil when NAME, a remembered entry's name, is a resource address."
  (string-match-p "\\`[a-z][a-z0-9+.-]*://" name))

(defvar mevedel-edited-files--read (make-hash-table :test #'eq :weakness 'key)
  "Per chat (a `mevedel-prompt-chat'): the files its model read.
A list of (FILE STAMP TEXT), newest first: FILE absolute, STAMP its
`mevedel-core-file-stamps' stamp when TEXT was taken, TEXT what the
model read, or nil when the file was too large to keep.")

(defun mevedel-edited-files--text (file)
  "Return FILE's text as the model would read it now, or nil.
A modified buffer visiting FILE gives its unsaved text; a file that is
missing, unreadable, binary or over `mevedel-edited-files-max-size'
gives nil."
  (let ((buffer (get-file-buffer file)))
    (if (and buffer (buffer-modified-p buffer))
        (with-current-buffer buffer
          (and (<= (buffer-size) mevedel-edited-files-max-size)
               (save-restriction (widen) (buffer-substring-no-properties
                                          (point-min) (point-max)))))
      (ignore-errors
        (and (file-regular-p file)
             (<= (file-attribute-size (file-attributes file)) (* 4 mevedel-edited-files-max-size))
             (with-temp-buffer
               (let ((coding-system-for-read 'utf-8))
                 (insert-file-contents file))
               (and (<= (buffer-size) mevedel-edited-files-max-size)
                    (not (search-forward "\0" nil t))
                    (buffer-string))))))))

(defun mevedel-edited-files--entry (file)
  "Return the (FILE STAMP TEXT) of FILE as it is now."
  (list file (car (mevedel-core-file-stamps (list file))) (mevedel-edited-files--text file)))

(defun mevedel-edited-files-note-read (chat file)
  "Remember that CHAT's model has just read FILE, an absolute name."
  (let ((read (cl-remove file (gethash chat mevedel-edited-files--read)
                         :key #'car :test #'equal)))
    (puthash chat (seq-take (cons (mevedel-edited-files--entry file) read)
                            mevedel-edited-files-max-files)
             mevedel-edited-files--read)))

(defun mevedel-edited-files-note-resource (chat address text)
  "Remember that CHAT's model has just read the resource ADDRESS, now TEXT."
  (let ((read (cl-remove address (gethash chat mevedel-edited-files--read)
                         :key #'car :test #'equal)))
    (puthash chat (seq-take (cons (list address t text) read) mevedel-edited-files-max-files)
             mevedel-edited-files--read)))

(defun mevedel-edited-files--changed (entry stamp)
  "Return the new (FILE STAMP TEXT) of ENTRY when its file changed, else nil.
STAMP is the file's stamp now; a modified visiting buffer counts as
the file's text."
  (pcase-let ((`(,file ,old-stamp ,old-text) entry))
    (let ((buffer (get-file-buffer file)))
      (unless (and (equal stamp old-stamp)
                   (not (and buffer (buffer-modified-p buffer))))
        (let ((text (mevedel-edited-files--text file)))
          (unless (and (equal text old-text) (or text (equal stamp old-stamp)))
            (list file stamp text)))))))

(defun mevedel-edited-files--resource-changed (entry session)
  "Return the new (ADDRESS STAMP TEXT) of resource ENTRY of SESSION, if it changed.
STAMP is t while the resource exists and nil once it is gone."
  (pcase-let ((`(,address ,_ ,old-text) entry))
    (when-let* ((now (mevedel-edited-files--resource address session)))
      (unless (equal (cdr now) old-text)
        (list address (and (cdr now) t) (cdr now))))))

(defun mevedel-edited-files--refresh (chat)
  "Take every file and resource CHAT read as it is now, announcing nothing.
Return the changed entries as (OLD . NEW).  A deleted file is
forgotten: the model reads it again if it comes back."
  (let* ((read (gethash chat mevedel-edited-files--read))
         (files (cl-remove-if #'mevedel-edited-files--address-p read :key #'car))
         (stamps (and files (mevedel-core-file-stamps (mapcar #'car files))))
         (session (mevedel-edited-files--session chat))
         (changes nil))
    (puthash chat
             (cl-loop for entry in read
                      for address = (mevedel-edited-files--address-p (car entry))
                      for stamp = (unless address (pop stamps))
                      for new = (if address
                                    (mevedel-edited-files--resource-changed entry session)
                                  (mevedel-edited-files--changed entry stamp))
                      when new do (push (cons entry new) changes)
                      unless (and new (null (nth 1 new))) collect (or new entry))
             mevedel-edited-files--read)
    (nreverse changes)))

;;;; What is owed to the model

(defvar mevedel-edited-files--owed (make-hash-table :test #'eq :weakness 'key)
  "Per chat: the changes by others its model is yet to be told of, oldest first.
Each is a list (OLD NEW DIFF): OLD and NEW are (FILE STAMP TEXT) as
the model knew the file and as it was found, DIFF the diff made for
it, `left' when it did not fit the update's budget, or nil when none
was made yet.")

(defun mevedel-edited-files--owe (chat found)
  "Owe CHAT's model what FOUND lists, each (OLD . NEW).
A change on top of one owed for the same file joins it: the model is
told the whole change from the text it knew."
  (let ((owed (gethash chat mevedel-edited-files--owed)))
    (pcase-dolist (`(,old . ,new) found)
      (let ((last (cl-find (car old) owed :key #'caar :test #'equal :from-end t)))
        (if (and last (equal (nth 2 (nth 1 last)) (nth 2 old)))
            (setf (nth 1 last) new
                  (nth 2 last) nil)
          (setq owed (append owed (list (list old new nil)))))))
    (puthash chat owed mevedel-edited-files--owed)))

(defun mevedel-edited-files--collect (chat)
  "Owe CHAT's model every change by others found now; return what is owed."
  (mevedel-edited-files--owe chat (mevedel-edited-files--refresh chat))
  (gethash chat mevedel-edited-files--owed))

;;;; While the model's calls run

(defvar mevedel-edited-files--windows (make-hash-table :test #'eq :weakness 'key)
  "Per chat whose model's calls that may change files run: (TICK . IDS).
TICK is `mevedel-edited-files--save-count' when the first began, IDS
the tool-use ids of those running.")

(defvar mevedel-edited-files--save-count 0
  "How many saves from Emacs `mevedel-edited-files--saved' has seen.")

(defvar mevedel-edited-files--saves (make-hash-table :test #'equal)
  "File -> `mevedel-edited-files--save-count' at its last save from Emacs.")

(defun mevedel-edited-files--saved ()
  "Note that this buffer's file was saved from Emacs: by the user, not a command.
On `after-save-hook' while some model's calls that may change files run."
  (when buffer-file-name
    (puthash (expand-file-name buffer-file-name)
             (cl-incf mevedel-edited-files--save-count)
             mevedel-edited-files--saves)))

(defun mevedel-edited-files--call-started (chat id)
  "Note that CHAT's model's call ID, which may change files, has started.
The first such call owes the model what others changed before it."
  (let ((window (gethash chat mevedel-edited-files--windows)))
    (unless window
      (mevedel-edited-files--collect chat)
      (add-hook 'after-save-hook #'mevedel-edited-files--saved)
      (setq window (list mevedel-edited-files--save-count)))
    (puthash chat (append window (list id)) mevedel-edited-files--windows)))

(defun mevedel-edited-files--call-ended (chat id)
  "Note the end of CHAT's model's call ID; after the last, sort out what changed.
A change is the user's, and owed, when the file's visiting buffer holds
an edit made meanwhile or the file was saved from Emacs meanwhile; any
other change is taken as read, the model's own."
  (when-let* ((window (gethash chat mevedel-edited-files--windows))
              ((member id (cdr window))))
    (let ((ids (remove id (cdr window))))
      (if ids
          (puthash chat (cons (car window) ids) mevedel-edited-files--windows)
        (remhash chat mevedel-edited-files--windows)
        (when (hash-table-empty-p mevedel-edited-files--windows)
          (remove-hook 'after-save-hook #'mevedel-edited-files--saved))
        (mevedel-edited-files--owe
         chat
         (cl-remove-if-not
          (pcase-lambda (`((,file ,_ ,before) . (,_ ,_ ,now)))
            (let ((buffer (get-file-buffer file)))
              (or (and buffer (buffer-modified-p buffer) (not (equal before now)))
                  (> (gethash file mevedel-edited-files--saves 0) (car window)))))
          (mevedel-edited-files--refresh chat)))))))

;;;; The diffs, made before the request goes

(defvar mevedel-edited-files--jobs (make-hash-table :test #'eq :weakness 'key)
  "Per chat making diffs: (ID . WAITERS), WAITERS called once they are made.")

(defun mevedel-edited-files--name (file root)
  "Return FILE as the update names it: relative to ROOT when below it."
  (if (and root (not (mevedel-edited-files--address-p file)) (file-in-directory-p file root))
      (file-relative-name file root)
    file))

(defun mevedel-edited-files-prepare (chat on-ready)
  "Make the diffs of what CHAT's model is owed, then call ON-READY.
Return nil when there is nothing to make (ON-READY is not called), else
a function that stops waiting, and stops the diffs when nobody else
waits for them.  The diffs are made by the module, off the main thread."
  (let ((pending (mevedel-edited-files--pending chat)))
    (when-let* ((job (or (gethash chat mevedel-edited-files--jobs)
                         (and pending (mevedel-edited-files--start chat pending)))))
      (setcdr job (cons on-ready (cdr job)))
      (lambda ()
        (when-let* ((job (gethash chat mevedel-edited-files--jobs)))
          (setcdr job (delq on-ready (cdr job)))
          (unless (cdr job)
            (remhash chat mevedel-edited-files--jobs)
            (mevedel-core-search-cancel (car job))))))))

(defun mevedel-edited-files--pending (chat)
  "Return what CHAT's model is owed that has texts to diff and no diff yet."
  (cl-remove-if-not (pcase-lambda (`(,old ,new ,diff))
                      (and (null diff) (nth 2 old) (nth 2 new)))
                    (mevedel-edited-files--collect chat)))

(defun mevedel-edited-files--start (chat pending)
  "Start to diff what CHAT's model is owed in PENDING; return the job."
  (let* ((root (mevedel-prompt-chat-root chat))
         (spent (cl-loop for (_ _ diff) in (gethash chat mevedel-edited-files--owed)
                         when (stringp diff) sum (length diff)))
         (job (list nil))
         ;; An item joined by a later change meanwhile keeps no stale diff.
         (news (mapcar #'cadr pending)))
    (setcar job
            (mevedel-core-patch-diffs
             (mapcar (pcase-lambda (`((,file ,_ ,before) (,_ ,_ ,now) ,_))
                       (list (mevedel-edited-files--name file root) before now))
                     pending)
             (max 0 (- mevedel-edited-files-budget spent))
             (lambda (status value)
               (when (eq (gethash chat mevedel-edited-files--jobs) job)
                 (remhash chat mevedel-edited-files--jobs)
                 (cl-loop for item in pending
                          for new in news
                          for diff in (and (eq status 'ok) (plist-get value :diffs))
                          when (eq (nth 1 item) new)
                          do (setf (nth 2 item) (or diff 'left)))
                 ;; What changed meanwhile is diffed before anyone goes on.
                 (let ((more (and (eq status 'ok) (mevedel-edited-files--pending chat))))
                   (if more
                       (setcdr (mevedel-edited-files--start chat more) (cdr job))
                     (dolist (waiter (cdr job))
                       (funcall waiter))))))))
    (puthash chat job mevedel-edited-files--jobs)
    job))

;;;; The context update

(defun mevedel-edited-files--describe (item root)
  "Return the text telling of the owed change ITEM, (OLD NEW DIFF).
ROOT is the workspace the file is named relative to."
  (pcase-let* ((`((,file ,_ ,before) (,_ ,stamp ,now) ,diff) item)
               (name (mevedel-edited-files--name file root)))
    (cond
     ((null stamp) (format "%s was deleted." name))
     ((not (and before now))
      (format "%s was changed; it is too large (or not text) to show the change: \
Read it again." name))
     ((stringp diff)
      (if (string-empty-p diff)
          (format "%s was changed back to the text you read." name)
        (format "%s was changed:\n%s" name (string-trim-right diff))))
     ((eq diff 'left)
      (format "%s was changed; its diff is left out (this update's diffs are \
limited to %d characters): Read %s for its current text."
              name mevedel-edited-files-budget name))
     (t (format "%s was changed just now: Read it for its current text." name)))))

(defun mevedel-edited-files-update (chat)
  "Return CHAT's context update for the files changed since its model read them.
A list of one block, or nil when nothing changed.  The changes count as
read from now on; their diffs are those `mevedel-edited-files-prepare'
made.  For `mevedel-chat-message-functions' and
`mevedel-chat-continuation-mail-functions'."
  (when-let* ((owed (mevedel-edited-files--collect chat)))
    (remhash chat mevedel-edited-files--owed)
    (let ((root (mevedel-prompt-chat-root chat)))
      (list (mevedel-prompt-update-block
             "edited-files"
             (concat "These files or shared items you read changed since, by someone else \
(the user or another program); use their current text:\n\n"
                     (mapconcat (lambda (item) (mevedel-edited-files--describe item root))
                                owed "\n\n")))))))

;;;; Following the model's calls

(defun mevedel-edited-files-observe (chat event info)
  "Follow a call of CHAT's model; EVENT and INFO are as the pipeline gives them.
A successful Read of a file remembers it; a call that may change files
opens or closes the span in which changes are told apart (see
`mevedel-edited-files--call-ended').  mevedel-chat.el calls this from
`mevedel-pipeline-tool-event-hook'."
  (when (memq (plist-get info :source) '(provider ptc))
    (let ((tool (mevedel-tool-get (plist-get info :name)))
          (path (plist-get (plist-get info :args) :file_path))
          (buffer (plist-get info :data-buffer))
          (id (plist-get info :tool-use-id)))
      (cond
       ((and (eq event 'settled) (equal (plist-get info :name) "Read")
             (eq (plist-get info :status) 'success)
             (stringp path) (mevedel-edited-files--address-p path))
        (when-let* ((watched (mevedel-edited-files--resource
                              path (mevedel-edited-files--session chat))))
          (mevedel-edited-files-note-resource chat (car watched) (cdr watched))))
       ((equal (plist-get info :name) "Read")
        (when (and (eq event 'settled) (eq (plist-get info :status) 'success) (stringp path)
                   (not (string-match-p "\\`[a-z][a-z0-9+.-]*://" path)))
          (let ((file (expand-file-name path (if (buffer-live-p buffer)
                                                 (buffer-local-value 'default-directory buffer)
                                               (mevedel-prompt-chat-root chat)))))
            (when (file-regular-p file)
              (mevedel-edited-files-note-read chat file)))))
       ((and tool (not (mevedel-tool-read-only-p tool)))
        (pcase event
          ('started (mevedel-edited-files--call-started chat id))
          ('settled (mevedel-edited-files--call-ended chat id))))))))

(defun mevedel-edited-files-post-tool-use (chat context)
  "Have the diffs ready before CHAT's request continues after CONTEXT's call.
CONTEXT is a PostToolUse context of the model's call: the call's
result waits (:await) while the module makes the diffs, and a
cancelled call stops them.  mevedel-chat.el calls this."
  (when (eq (plist-get context :source) 'provider)
    (mevedel-edited-files--call-ended chat (plist-get context :tool-use-id))
    (when (gethash chat mevedel-edited-files--read)
      (let ((ready nil) (resume nil))
        (when-let* ((stop (mevedel-edited-files-prepare
                           chat (lambda () (setq ready t) (when resume (funcall resume nil))))))
          (list :await (lambda (go)
                         (if ready (funcall go nil) (setq resume go))
                         stop)))))))

;;;; Saved with the session

(defun mevedel-edited-files-saved (chat)
  "Return what CHAT's model read, printable, for the session's metadata.
Texts beyond `mevedel-edited-files-saved-size' are left out."
  (let ((room mevedel-edited-files-saved-size))
    (mapcar (pcase-lambda (`(,file ,stamp ,text))
              (list file stamp (and text (<= (length text) room)
                                    (progn (cl-decf room (length text)) text))))
            (gethash chat mevedel-edited-files--read))))

(defun mevedel-edited-files-restore (chat saved)
  "Give CHAT the reading SAVED by `mevedel-edited-files-saved'."
  (when (proper-list-p saved)
    (puthash chat (cl-remove-if-not (lambda (entry)
                                      (and (consp entry) (stringp (car entry))))
                                    saved)
             mevedel-edited-files--read)))

(provide 'mevedel-edited-files)
;;; mevedel-edited-files.el ends here
