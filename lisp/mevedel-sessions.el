;;; mevedel-sessions.el --- Saved sessions: new, resume, fork, rename, delete  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A workspace has one live session at a time (its chat); every
;; session it ever had is saved under .mevedel/sessions/ID/ (see
;; mevedel-chat.el, "Saving and resuming").  This file switches between
;; them:
;;
;;   M-x mevedel-new, /new           a fresh session in a new view, in the
;;                                   same window
;;   /clear                          a fresh session in the same view
;;   M-x mevedel-sessions, /sessions the workspace's saved sessions, newest
;;                                   first (those another process has open
;;                                   say so): RET resume, r rename, f fork,
;;                                   d delete (after confirmation), g refresh
;;   /compact [FOCUS]                summarise older turns now (see
;;                                   `mevedel-chat-compact')
;;
;; Switching saves the live session and closes it first; a running
;; turn must be aborted before.  A fork copies a session's
;; conversation up to the start of a chosen turn (or all of it) into a
;; new session and resumes that; the original is left as it was.
;;
;; One process writes a session (see mevedel-session.el, "Ownership").
;; Resuming a session another process writes (an Emacs, or a headless
;; `bin/mevedel --continue') asks first, naming that process: open a
;; fork of it, open it read-only (its view refuses to send), or cancel
;; (`mevedel-sessions-open-held').  Such a session cannot be renamed or
;; deleted here.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'tabulated-list)
(require 'mevedel-catalog)
(require 'mevedel-chat)
(require 'mevedel-session)
(require 'mevedel-transcript)
(require 'mevedel-view)

;;;; Switching

(defun mevedel-sessions--close-live (root)
  "Save and close the live session of workspace ROOT, if any.
Return the window that showed its view, or nil."
  (when-let* ((chat (mevedel-chat-get root)))
    (when (mevedel-chat-busy-p chat)
      (user-error "A turn is running in %s; abort it first (C-c C-k)" (mevedel-chat-name chat)))
    (let* ((view (get-buffer (format "*mevedel: %s*" (mevedel-chat-name chat))))
           (window (and view (get-buffer-window view t))))
      (when-let* ((failure (mevedel-chat-flush chat)))
        (user-error "Cannot save the session before switching: %s" failure))
      (when (buffer-live-p view) (kill-buffer view))
      (kill-buffer (mevedel-chat-data-buffer chat))
      window)))

(defun mevedel-sessions-open (&optional directory session)
  "Show the view of the session of DIRECTORY's workspace; return the buffer.
Without a live session there, the saved SESSION (an ID) is resumed;
SESSION nil means the most recent saved one when sessions are saved
\(`mevedel-chat-save-sessions'), and `new' a fresh session.  When
another process writes the saved session, the user chooses between a
fork and a read-only view, or cancels: then the value is nil (see
`mevedel-sessions-open-held')."
  (let* ((root (mevedel-chat-workspace-root directory))
         (live (mevedel-chat-get root))
         (id (unless live
               (pcase session
                 ('new nil)
                 ('nil (and mevedel-chat-save-sessions (mevedel-session-latest root)))
                 (_ session))))
         (owner (and id (mevedel-session-owner root id))))
    (if owner
        (mevedel-sessions-open-held root id owner)
      (let ((buffer (mevedel-view-buffer (or live (mevedel-chat-get-create root id)))))
        (pop-to-buffer-same-window buffer)
        (goto-char (point-max))
        buffer))))

(defun mevedel-sessions-switch (root &optional id)
  "Make the saved session ID (nil: a fresh one) the live session of ROOT.
The view takes the window the previous session's view had, if any.
Return the view buffer.  When another process writes session ID, the
user is asked first (`mevedel-sessions-open-held'); the live session
stays unless a fork replaces it, and nil means the user cancelled."
  (let* ((root (file-name-as-directory (expand-file-name root)))
         (owner (and id (mevedel-session-owner root id))))
    (if owner
        (mevedel-sessions-open-held root id owner)
      (let* ((window (mevedel-sessions--close-live root))
             (view (mevedel-sessions-open root (or id 'new))))
        (when (window-live-p window)
          (set-window-buffer window view))
        view))))

(defun mevedel-sessions--root ()
  "Return the workspace of the current buffer."
  (if-let* ((chat (and (derived-mode-p 'mevedel-view-mode) (mevedel-view-chat))))
      (mevedel-chat-root chat)
    (mevedel-chat-workspace-root)))

;;;###autoload
(defun mevedel-new (&optional directory)
  "Start a fresh session in DIRECTORY's workspace, saving the current one.
The current session stays saved and can be resumed from
\\[mevedel-sessions]."
  (interactive)
  (mevedel-sessions-switch (if directory (mevedel-chat-workspace-root directory)
                             (mevedel-sessions--root))))

(defun mevedel-sessions--slash-new (chat _argument)
  "Start a fresh session in CHAT's workspace, in a new view (/new)."
  (mevedel-sessions-switch (mevedel-chat-root chat)))

(defun mevedel-sessions--slash-clear (chat _argument)
  "Start a fresh session in CHAT's workspace in the same view (/clear)."
  (when (mevedel-chat-busy-p chat)
    (user-error "A turn is running in %s; abort it first (C-c C-k)" (mevedel-chat-name chat)))
  (let ((view (mevedel-view-buffer chat))
        (root (mevedel-chat-root chat)))
    (when-let* ((failure (mevedel-chat-flush chat)))
      (user-error "Cannot save the session before clearing: %s" failure))
    ;; The view lets go of the chat before its data buffer goes.
    (with-current-buffer view (mevedel-view--killed))
    (kill-buffer (mevedel-chat-data-buffer chat))
    (mevedel-view-rebind view (mevedel-chat-get-create root))))

;;;; Forking, renaming, deleting

(defun mevedel-sessions--store-of (root id)
  "Return (STORE . CLOSE) for saved session ID of ROOT.
STORE is the live session's store when ID is live; CLOSE is non-nil
when the caller must close STORE."
  (let ((chat (mevedel-chat-get root)))
    (if (and chat (equal (mevedel-session-id (mevedel-chat-session chat)) id))
        (progn (mevedel-chat-flush chat)
               (cons (mevedel-session-store-handle (mevedel-chat-session chat)) nil))
      (cons (mevedel-core-store-open
             (expand-file-name "session.sqlite"
                               (expand-file-name id (mevedel-session-sessions-directory root))))
            t))))

(defmacro mevedel-sessions--with-store (var root id &rest body)
  "Bind VAR to the store of saved session ID of ROOT around BODY."
  (declare (indent 3))
  (let ((pair (make-symbol "pair")))
    `(let* ((,pair (mevedel-sessions--store-of ,root ,id))
            (,var (car ,pair)))
       (unwind-protect (progn ,@body)
         (when (cdr ,pair) (mevedel-core-store-close ,var))))))

(defun mevedel-sessions--info (store key)
  "Return the metadata KEY of STORE, or nil when unset."
  (cdr (assoc key (mevedel-core-store-info-get store))))

(defun mevedel-sessions-fork (root id &optional turn)
  "Copy saved session ID of ROOT into a new session and return its ID.
TURN, a turn index (0 for the first turn), keeps the conversation
before that turn; nil keeps all of it.  The new session is saved, not
resumed.  A turn still running in ID (in another process, or cut by a
crash) is open in the copy too: resuming it settles that turn as
after a crash."
  (let ((session (mevedel-session-create :workspace root)))
    (with-temp-buffer
      (let (title turns inputs open)
        (mevedel-sessions--with-store store root id
          (mevedel-transcript-restore (current-buffer) store)
          (setq open (mapcar (lambda (key) (cons key (or (mevedel-sessions--info store key) "")))
                             '("turn-open" "open-calls"))
                title (mevedel-sessions--info store "title")
                turns (reverse (car (read-from-string
                                     (or (mevedel-sessions--info store "turn-list") "nil"))))
                inputs (mevedel-core-store-inputs store most-positive-fixnum)))
        (when (and turn (< turn (length turns)))
          (delete-region (nth 2 (nth turn turns)) (point-max))
          (setq turns (cl-subseq turns 0 turn)
                open nil))
        (let ((store (mevedel-session-store-handle session)))
          (mevedel-transcript-track (current-buffer) store)
          (mevedel-transcript-save (current-buffer))
          (dolist (input inputs) (mevedel-core-store-input-push store input))
          (mevedel-core-store-info-set
           store `(,@open
                   ("title" . ,(format "Fork of %s" (or title id)))
                   ("forked-from" . ,id)
                   ("created" . ,(mevedel-chat--now))
                   ("updated" . ,(mevedel-chat--now))
                   ("turns" . ,(number-to-string (length turns)))
                   ("turn-list" . ,(mevedel-chat--print (reverse turns)))
                   ("chars" . ,(number-to-string (buffer-size)))))
          (mevedel-transcript-consolidate
           (current-buffer)
           (mevedel-transcript-export-name (current-buffer) (mevedel-session-directory session)))
          (when-let* ((failure (mevedel-core-store-flush store)))
            (error "Saving the fork failed: %s" failure))
          (mevedel-session-close session))))
    (mevedel-session-id session)))

(defun mevedel-sessions--refuse-held (root id doing)
  "Signal a user error saying DOING is refused when another process writes ID.
ID is a saved session of ROOT."
  (when-let* ((owner (mevedel-session-owner root id)))
    (user-error "Cannot %s: %s" doing (mevedel-session-in-use-message id owner))))

(defun mevedel-sessions-rename (root id title)
  "Set the title of saved session ID of ROOT to TITLE."
  (when (string-blank-p title) (user-error "A title cannot be empty"))
  (mevedel-sessions--refuse-held root id "rename it")
  (let ((chat (mevedel-chat-get root)))
    (when (and chat (equal (mevedel-session-id (mevedel-chat-session chat)) id))
      (setf (mevedel-chat-title chat) title)))
  (mevedel-sessions--with-store store root id
    (mevedel-core-store-info-set store `(("title" . ,title)))
    (mevedel-core-store-flush store)))

(defun mevedel-sessions-delete (root id)
  "Delete saved session ID of ROOT and everything it stored.
The live session cannot be deleted: switch to another first."
  (let ((chat (mevedel-chat-get root)))
    (when (and chat (equal (mevedel-session-id (mevedel-chat-session chat)) id))
      (user-error "Session %s is live; start or resume another one first" id)))
  (mevedel-sessions--refuse-held root id "delete it")
  (let ((dir (expand-file-name (mevedel-session--check-id id)
                               (mevedel-session-sessions-directory root))))
    (unless (file-exists-p (expand-file-name "session.sqlite" dir))
      (user-error "No saved session %s in %s" id root))
    (delete-directory dir t)))

;;;; The session list

(defvar-local mevedel-sessions--root nil
  "Workspace whose sessions this list shows.")

(defvar-keymap mevedel-sessions-mode-map
  :doc "Keys of the session list."
  "RET" #'mevedel-sessions-resume
  "r" #'mevedel-sessions-rename-at-point
  "f" #'mevedel-sessions-fork-at-point
  "d" #'mevedel-sessions-delete-at-point)

(define-derived-mode mevedel-sessions-mode tabulated-list-mode "mevedel-sessions"
  "Major mode of a workspace's list of saved mevedel sessions.
\\{mevedel-sessions-mode-map}"
  (setq tabulated-list-format [("Title" 44 t) ("Updated" 16 t) ("Turns" 5 mevedel-sessions--turns<)
                               ("Model" 22 t) ("Size" 8 mevedel-sessions--size<)]
        tabulated-list-sort-key nil)
  (add-hook 'tabulated-list-revert-hook #'mevedel-sessions--refresh nil t)
  (tabulated-list-init-header))

(defun mevedel-sessions--number (entry column)
  "Return the number shown in COLUMN of the list ENTRY."
  (string-to-number (aref (cadr entry) column)))

(defun mevedel-sessions--turns< (a b)
  "Return non-nil when the turn count of list entry A is below that of B."
  (< (mevedel-sessions--number a 2) (mevedel-sessions--number b 2)))

(defun mevedel-sessions--size< (a b)
  "Return non-nil when list entry A is smaller than B."
  (< (get-text-property 0 'mevedel-chars (aref (cadr a) 4))
     (get-text-property 0 'mevedel-chars (aref (cadr b) 4))))

(defun mevedel-sessions--refresh ()
  "Read the workspace's saved sessions into the list."
  (let ((live (when-let* ((chat (mevedel-chat-get mevedel-sessions--root)))
                (mevedel-session-id (mevedel-chat-session chat)))))
    (setq tabulated-list-entries
          (mapcar
           (lambda (entry)
             (let* ((info (cdr entry))
                    (get (lambda (key) (or (cdr (assoc key info)) "")))
                    (chars (string-to-number (funcall get "chars")))
                    (owner (mevedel-session-owner mevedel-sessions--root (car entry)))
                    (title (concat
                            (or (cdr (assoc "error" info))
                                (if (string-empty-p (funcall get "title")) (car entry)
                                  (funcall get "title")))
                            (if owner
                                (propertize (format " [in use by %s]"
                                                    (mevedel-session-owner-text owner))
                                            'face 'warning)
                              ""))))
               (list (car entry)
                     (vector (if (equal (car entry) live)
                                 (propertize (concat "● " title) 'face 'bold)
                               title)
                             (let ((ms (string-to-number (funcall get "updated"))))
                               (if (> ms 0) (format-time-string "%F %R" (/ ms 1000.0)) ""))
                             (funcall get "turns")
                             (funcall get "model")
                             (propertize (file-size-human-readable chars) 'mevedel-chars chars)))))
           (mevedel-session-saved mevedel-sessions--root)))))

;;;###autoload
(defun mevedel-sessions (&optional directory)
  "List the saved sessions of DIRECTORY's workspace (default: the current one)."
  (interactive)
  (let* ((root (if directory (mevedel-chat-workspace-root directory) (mevedel-sessions--root)))
         (buffer (get-buffer-create
                  (format "*mevedel sessions: %s*"
                          (file-name-nondirectory (directory-file-name root))))))
    (with-current-buffer buffer
      (mevedel-sessions-mode)
      (setq default-directory root
            mevedel-sessions--root root)
      (mevedel-sessions--refresh)
      (tabulated-list-print))
    (pop-to-buffer buffer)
    buffer))

(defun mevedel-sessions--slash-sessions (chat _argument)
  "List the saved sessions of CHAT's workspace (the /sessions command)."
  (mevedel-sessions (mevedel-chat-root chat)))

(defun mevedel-sessions--id-at-point ()
  "Return the ID of the session on this line."
  (or (tabulated-list-get-id) (user-error "No session on this line")))

(defun mevedel-sessions-resume ()
  "Resume the session on this line."
  (interactive)
  (let ((root mevedel-sessions--root)
        (id (mevedel-sessions--id-at-point)))
    (when-let* ((view (mevedel-sessions-switch root id)))
      (pop-to-buffer view))))

(defun mevedel-sessions-rename-at-point (title)
  "Rename the session on this line to TITLE."
  (interactive (list (read-string "New title: "
                                  (aref (tabulated-list-get-entry) 0))))
  (mevedel-sessions-rename mevedel-sessions--root (mevedel-sessions--id-at-point) title)
  (revert-buffer))

(defun mevedel-sessions-fork-at-point ()
  "Fork the session on this line up to a turn chosen by name, and resume the fork."
  (interactive)
  (let* ((root mevedel-sessions--root)
         (id (mevedel-sessions--id-at-point))
         (turns (mevedel-sessions--with-store store root id
                  (reverse (car (read-from-string
                                 (or (mevedel-sessions--info store "turn-list") "nil"))))))
         (all "the whole conversation")
         (choices (cons all (cl-loop for (_ label) in turns for i from 1
                                     collect (format "before turn %d: %s" i label))))
         (choice (completing-read "Fork keeping: " choices nil t nil nil all))
         (turn (unless (equal choice all) (1- (cl-position choice choices :test #'equal))))
         (fork (mevedel-sessions-fork root id turn)))
    (pop-to-buffer (mevedel-sessions-switch root fork))))

(defun mevedel-sessions-delete-at-point ()
  "Delete the session on this line after confirmation."
  (interactive)
  (let ((id (mevedel-sessions--id-at-point)))
    (when (yes-or-no-p (format "Delete session %s (%s) and everything it saved? "
                               id (aref (tabulated-list-get-entry) 0)))
      (mevedel-sessions-delete mevedel-sessions--root id)
      (revert-buffer))))

;;;; Sessions another process writes

(defun mevedel-sessions-ask-held (root id owner)
  "Ask what to do with saved session ID of ROOT, which OWNER writes.
Return `fork', `read-only' or nil (cancel)."
  (let ((title (ignore-errors
                 (mevedel-sessions--with-store store root id
                   (mevedel-sessions--info store "title")))))
    (pcase (car (read-multiple-choice
                 (format "Session %s%s is in use by %s; open" id
                         (if (and title (not (string-empty-p title))) (format " (%s)" title) "")
                         (mevedel-session-owner-text owner))
                 '((?f "a fork" "a new session copied from it, yours to continue")
                   (?r "read-only" "its transcript as last saved; sending is refused")
                   (?c "cancel" "leave it to that process"))))
      (?f 'fork)
      (?r 'read-only))))

(defun mevedel-sessions-open-held (root id owner)
  "Open saved session ID of ROOT, which OWNER (another process) writes.
The user chooses (`mevedel-sessions-ask-held'): a fork of it, which
becomes ROOT's live session, or a read-only view of it as last saved,
which replaces such a view shown before.  Return the view buffer
shown, or nil when the user cancels."
  (pcase (mevedel-sessions-ask-held root id owner)
    ('fork (mevedel-sessions-switch root (mevedel-sessions-fork root id)))
    ('read-only
     ;; A read-only view shown before gives way to a fresh copy.
     (dolist (buffer (buffer-list))
       (when-let* ((chat (and (eq (buffer-local-value 'major-mode buffer) 'mevedel-view-mode)
                              (mevedel-view-chat buffer))))
         (when (and (mevedel-chat-read-only chat)
                    (equal (mevedel-chat-root chat) root)
                    (equal (mevedel-session-id (mevedel-chat-session chat)) id))
           (kill-buffer buffer))))
     (let ((view (mevedel-view-buffer (mevedel-chat-open-read-only root id owner))))
       (pop-to-buffer-same-window view)
       (goto-char (point-max))
       view))
    (_ (message "Not opened: %s" (mevedel-session-in-use-message id owner))
       nil)))

;;;; Compacting by hand

(defun mevedel-compact (focus)
  "Compact the older part of this view's session now, keeping above all FOCUS.
FOCUS may be empty."
  (interactive (list (read-string "Keep above all (empty: nothing special): ")))
  (mevedel-sessions--slash-compact (or (mevedel-view-chat) (user-error "Not a mevedel view"))
                                   focus))

(defun mevedel-sessions--slash-compact (chat argument)
  "Compact the older part of CHAT now, keeping above all ARGUMENT (/compact FOCUS)."
  (mevedel-chat-compact chat argument
                        (lambda (_chat outcome)
                          (message (if (eq outcome 'done)
                                       "mevedel: older turns compacted into a summary"
                                     "mevedel: compaction failed; nothing changed"))))
  (message "mevedel: summarising older turns..."))

;;;; In the view

(mevedel-view-register-slash-command "new"
  #'mevedel-sessions--slash-new "start a fresh session (this one stays saved)")
(mevedel-view-register-slash-command "clear"
  #'mevedel-sessions--slash-clear "start a fresh session in this view")
(mevedel-view-register-slash-command "compact"
  #'mevedel-sessions--slash-compact
  "summarise older turns now (/compact FOCUS: what to keep above all)")
(mevedel-view-register-slash-command "sessions"
  #'mevedel-sessions--slash-sessions "list, resume, fork, rename or delete saved sessions")

(provide 'mevedel-sessions)
;;; mevedel-sessions.el ends here
