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
;; as read: after each of its calls that may change files, the files it
;; has read are looked at again.  The diff is computed by the module
;; (`mevedel-core-patch-diff-texts') and bounded: a huge change says so.
;; A file too large to keep is announced without a diff.  What was read
;; is saved with the session (`mevedel-edited-files-saved'), so a
;; continued session compares against the text read before.
;;
;; A resource the model reads can be watched the same way: a function
;; of `mevedel-edited-files-resource-functions' names the resource's
;; key (shared://ID for every part of a shared item) and gives its
;; text now; the update then names the address and diffs that text.
;;
;; This file does not watch files (nothing polls: changes are found
;; when a request is about to be sent), and it does not decide how the
;; mail reaches the request (mevedel-chat.el does).

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

(defcustom mevedel-edited-files-diff-limit 8000
  "Characters of one file's diff in the context update."
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

;;;; The context update

(defun mevedel-edited-files--describe (old new root)
  "Return the text telling of the change from OLD to NEW, (FILE STAMP TEXT).
ROOT is the workspace the file is named relative to."
  (pcase-let* ((`(,file ,_ ,before) old)
               (`(,_ ,stamp ,now) new)
               (name (if (and root (not (mevedel-edited-files--address-p file))
                              (file-in-directory-p file root))
                         (file-relative-name file root)
                       file)))
    (cond
     ((null stamp) (format "%s was deleted." name))
     ((and before now)
      (let ((diff (condition-case nil
                      (mevedel-core-patch-diff-texts before now name
                                                     mevedel-edited-files-diff-limit)
                    (mevedel-core-error nil))))
        (if diff
            (format "%s was changed:\n%s" name (string-trim-right diff))
          (format "%s was changed (the change could not be shown as a diff)." name))))
     (t (format "%s was changed; it is too large (or not text) to show the change: \
Read it again." name)))))

(defun mevedel-edited-files-update (chat)
  "Return CHAT's context update for the files changed since its model read them.
A list of one block, or nil when nothing changed.  The changes count as
read from now on.  For `mevedel-chat-message-functions' and
`mevedel-chat-continuation-mail-functions'."
  (when-let* ((changes (mevedel-edited-files--refresh chat)))
    (let ((root (mevedel-prompt-chat-root chat)))
      (list (mevedel-prompt-update-block
             "edited-files"
             (concat "These files or shared items you read changed since, by someone else \
(the user or another program); use their current text:\n\n"
                     (mapconcat (pcase-lambda (`(,old . ,new))
                                  (mevedel-edited-files--describe old new root))
                                changes "\n\n")))))))

;;;; Following the model's calls

(defun mevedel-edited-files-observe (chat event info)
  "Follow a call of CHAT's model; EVENT and INFO are as the pipeline gives them.
A successful Read of a file remembers it; any other settled call that
may change files takes the files read as they are now, so that the
model's own change is not announced back to it.  mevedel-chat.el
calls this from `mevedel-pipeline-tool-event-hook'."
  (when (and (eq event 'settled) (memq (plist-get info :source) '(provider ptc)))
    (let ((tool (mevedel-tool-get (plist-get info :name)))
          (path (plist-get (plist-get info :args) :file_path))
          (buffer (plist-get info :data-buffer)))
      (cond
       ((and (equal (plist-get info :name) "Read") (eq (plist-get info :status) 'success)
             (stringp path) (mevedel-edited-files--address-p path))
        (when-let* ((watched (mevedel-edited-files--resource
                              path (mevedel-edited-files--session chat))))
          (mevedel-edited-files-note-resource chat (car watched) (cdr watched))))
       ((equal (plist-get info :name) "Read")
        (when (and (eq (plist-get info :status) 'success) (stringp path))
          (let ((file (expand-file-name path (if (buffer-live-p buffer)
                                                 (buffer-local-value 'default-directory buffer)
                                               (mevedel-prompt-chat-root chat)))))
            (when (file-regular-p file)
              (mevedel-edited-files-note-read chat file)))))
       ((and tool (not (mevedel-tool-read-only-p tool)))
        (mevedel-edited-files--refresh chat))))))

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
