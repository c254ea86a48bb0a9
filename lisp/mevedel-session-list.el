;;; mevedel-session-list.el --- Saved sessions: new, resume, fork, rename, delete  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A workspace has one live session at a time (its chat); every
;; session it ever had is saved under .mevedel/sessions/ID/ (written as
;; it goes by mevedel-save.el, read back by mevedel-resume.el).  This
;; file chooses which one is live and manages the saved ones:
;;
;;   M-x mevedel-new, /new           a fresh session in a new view, in the
;;                                   same window
;;   /clear                          a fresh session in the same view
;;   M-x mevedel-sessions, /sessions the workspace's saved sessions, newest
;;                                   first (those another process has open
;;                                   say so): RET resume, r rename, f fork,
;;                                   d delete (after confirmation), g refresh
;;
;; Sessions that talked to the offline demo model are marked [demo];
;; M-x mevedel never resumes one, and a demo start (`mevedel-run'
;; without a usable backend) resumes only those.
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
;; (`mevedel-session-list-open-held').  Such a session cannot be renamed
;; or deleted here.
;;
;; This file does not save or load a conversation (mevedel-save.el,
;; mevedel-resume.el) and does not compact one (mevedel-compaction.el,
;; /compact).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'tabulated-list)
(require 'mevedel-catalog)
(require 'mevedel-chat)
(require 'mevedel-resume)
(require 'mevedel-save)
(require 'mevedel-session)
(require 'mevedel-transcript)
(require 'mevedel-view)
;; A session opened here asks about new workspace files with a card.
(require 'mevedel-file-approval)

;;;; Switching

(defun mevedel-session-list--close-live (root)
  "Save and close the live session of workspace ROOT, if any.
Return the window that showed its view, or nil."
  (when-let* ((chat (mevedel-chat-get root)))
    (when (mevedel-chat-busy-p chat)
      (user-error "A turn is running in %s; abort it first (C-c C-k)" (mevedel-chat-name chat)))
    (let* ((view (get-buffer (format "*mevedel: %s*" (mevedel-chat-name chat))))
           (window (and view (get-buffer-window view t))))
      (when-let* ((failure (mevedel-save-flush chat)))
        (user-error "Cannot save the session before switching: %s" failure))
      (when (buffer-live-p view) (kill-buffer view))
      (kill-buffer (mevedel-chat-data-buffer chat))
      window)))

(defun mevedel-session-list-open (&optional directory session)
  "Show the view of the session of DIRECTORY's workspace; return the buffer.
Without a live session there, the saved SESSION (an ID) is resumed;
SESSION nil means the most recent saved one when sessions are saved
\(`mevedel-save-sessions'), `demo' the most recent demo session and
`new' a fresh session.  Demo sessions stay apart: a live one is saved
and closed when SESSION is nil, and a live one of real work when it
is `demo'.  When another process writes the saved session, the user
chooses between a fork and a read-only view, or cancels: then the
value is nil (see `mevedel-session-list-open-held')."
  (let* ((root (mevedel-chat-workspace-root directory))
         (live (mevedel-chat-get root))
         (live (if (and live (memq session '(nil demo))
                        (not (eq (and (mevedel-chat-demo live) t) (eq session 'demo))))
                   (ignore (mevedel-session-list--close-live root))
                 live))
         (id (unless live
               (pcase session
                 ('new nil)
                 ('nil (and mevedel-save-sessions (mevedel-session-latest root)))
                 ('demo (and mevedel-save-sessions (mevedel-session-latest root t)))
                 (_ session))))
         (owner (and id (mevedel-session-owner root id))))
    (if owner
        (mevedel-session-list-open-held root id owner)
      (let ((buffer (mevedel-view-buffer (or live (mevedel-chat-get-create root id)))))
        (pop-to-buffer-same-window buffer)
        (goto-char (point-max))
        buffer))))

(defun mevedel-session-list-switch (root &optional id)
  "Make the saved session ID (nil: a fresh one) the live session of ROOT.
The view takes the window the previous session's view had, if any.
Return the view buffer.  When another process writes session ID, the
user is asked first (`mevedel-session-list-open-held'); the live session
stays unless a fork replaces it, and nil means the user cancelled."
  (let* ((root (file-name-as-directory (expand-file-name root)))
         (owner (and id (mevedel-session-owner root id))))
    (if owner
        (mevedel-session-list-open-held root id owner)
      (let* ((window (mevedel-session-list--close-live root))
             (view (mevedel-session-list-open root (or id 'new))))
        (when (window-live-p window)
          (set-window-buffer window view))
        view))))

(defun mevedel-session-list--root ()
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
  (mevedel-session-list-switch (if directory (mevedel-chat-workspace-root directory)
                                 (mevedel-session-list--root))))

(defun mevedel-session-list--slash-new (chat _argument)
  "Start a fresh session in CHAT's workspace, in a new view (/new)."
  (mevedel-session-list-switch (mevedel-chat-root chat)))

(defun mevedel-session-list--slash-clear (chat _argument)
  "Start a fresh session in CHAT's workspace in the same view (/clear)."
  (when (mevedel-chat-busy-p chat)
    (user-error "A turn is running in %s; abort it first (C-c C-k)" (mevedel-chat-name chat)))
  (let ((view (mevedel-view-buffer chat))
        (root (mevedel-chat-root chat)))
    (when-let* ((failure (mevedel-save-flush chat)))
      (user-error "Cannot save the session before clearing: %s" failure))
    ;; The view lets go of the chat before its data buffer goes.
    (with-current-buffer view (mevedel-view--killed))
    (kill-buffer (mevedel-chat-data-buffer chat))
    (mevedel-view-rebind view (mevedel-chat-get-create root))))

;;;; Forking, renaming, deleting

(defun mevedel-session-list--store-of (root id)
  "Return (STORE . CLOSE) for saved session ID of ROOT.
STORE is the live session's store when ID is live; CLOSE is non-nil
when the caller must close STORE."
  (let ((chat (mevedel-chat-get root)))
    (if (and chat (equal (mevedel-session-id (mevedel-chat-session chat)) id))
        (progn (mevedel-save-flush chat)
               (cons (mevedel-session-store-handle (mevedel-chat-session chat)) nil))
      (cons (mevedel-core-store-open
             (expand-file-name "session.sqlite"
                               (expand-file-name id (mevedel-session-sessions-directory root))))
            t))))

(defmacro mevedel-session-list--with-store (var root id &rest body)
  "Bind VAR to the store of saved session ID of ROOT around BODY."
  (declare (indent 3))
  (let ((pair (make-symbol "pair")))
    `(let* ((,pair (mevedel-session-list--store-of ,root ,id))
            (,var (car ,pair)))
       (unwind-protect (progn ,@body)
         (when (cdr ,pair) (mevedel-core-store-close ,var))))))

(defun mevedel-session-list--info (store key)
  "Return the metadata KEY of STORE, or nil when unset."
  (cdr (assoc key (mevedel-core-store-info-get store))))

(defun mevedel-session-list-fork (root id &optional turn)
  "Copy saved session ID of ROOT into a new session and return its ID.
TURN, a turn index (0 for the first turn), keeps the conversation
before that turn; nil keeps all of it.  The new session is saved, not
resumed.  A turn still running in ID (in another process, or cut by a
crash) is open in the copy too: resuming it settles that turn as
after a crash.  The copy gets its own copy of ID's working files
\(local/, work://), its plans/ reduced to the plan accepted then."
  (let ((session (mevedel-session-create :workspace root)))
    (with-temp-buffer
      (let (title turns inputs open demo plan)
        (mevedel-session-list--with-store store root id
          (mevedel-transcript-restore (current-buffer) store)
          (setq plan (mapcar (lambda (key) (cons key (mevedel-session-list--info store key)))
                             '("plan-archive" "plan-archive-sha256")))
          (setq open (mapcar (lambda (key) (cons key (or (mevedel-session-list--info store key) "")))
                             '("turn-open" "open-calls"))
                title (mevedel-session-list--info store "title")
                ;; A demo's fork is a demo session too.
                demo (or (mevedel-session-list--info store "demo") "")
                turns (reverse (car (read-from-string
                                     (or (mevedel-session-list--info store "turn-list") "nil"))))
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
                   ("demo" . ,demo)
                   ("created" . ,(mevedel-save-now))
                   ("updated" . ,(mevedel-save-now))
                   ("turns" . ,(number-to-string (length turns)))
                   ("turn-list" . ,(mevedel-save-print (reverse turns)))
                   ("chars" . ,(number-to-string (buffer-size)))))
          (mevedel-transcript-consolidate
           (current-buffer)
           (mevedel-transcript-export-name (current-buffer) (mevedel-session-directory session)))
          (when-let* ((failure (mevedel-core-store-flush store)))
            (error "Saving the fork failed: %s" failure))
          (mevedel-session-list--copy-local
           (expand-file-name "local" (expand-file-name id (mevedel-session-sessions-directory root)))
           (mevedel-session-local-directory session)
           (cdr (assoc "plan-archive" plan)) (cdr (assoc "plan-archive-sha256" plan)))
          (mevedel-session-close session))))
    (mevedel-session-id session)))

(defun mevedel-session-list--copy-local (from to archive sha256)
  "Copy the working files of local directory FROM into TO, for a fork.
Everything is copied but plans/, of which the fork keeps only the
accepted plan ARCHIVE (a file name), and only when its text still has
the SHA256 recorded when it was accepted: the fork's plans are what
was approved at the fork point, not drafts."
  (when (file-directory-p from)
    (make-directory to t)
    (dolist (entry (directory-files from nil directory-files-no-dot-files-regexp))
      (unless (equal entry "plans")
        (let ((source (expand-file-name entry from)))
          (if (and (file-directory-p source) (not (file-symlink-p source)))
              (copy-directory source (expand-file-name entry to) t t)
            (copy-file source (expand-file-name entry to) t t)))))
    (when-let* (((stringp archive))
                (source (expand-file-name archive (expand-file-name "plans" from)))
                ((file-regular-p source))
                ((equal sha256 (with-temp-buffer
                                 (let ((coding-system-for-read 'utf-8-unix))
                                   (insert-file-contents source))
                                 (secure-hash 'sha256 (current-buffer))))))
      (make-directory (expand-file-name "plans" to) t)
      (copy-file source (expand-file-name archive (expand-file-name "plans" to)) t t))))

(defun mevedel-session-list--refuse-held (root id doing)
  "Signal a user error saying DOING is refused when another process writes ID.
ID is a saved session of ROOT."
  (when-let* ((owner (mevedel-session-owner root id)))
    (user-error "Cannot %s: %s" doing (mevedel-session-in-use-message id owner))))

(defun mevedel-session-list-rename (root id title)
  "Set the title of saved session ID of ROOT to TITLE."
  (when (string-blank-p title) (user-error "A title cannot be empty"))
  (mevedel-session-list--refuse-held root id "rename it")
  (let ((chat (mevedel-chat-get root)))
    (when (and chat (equal (mevedel-session-id (mevedel-chat-session chat)) id))
      (setf (mevedel-chat-title chat) title)))
  (mevedel-session-list--with-store store root id
    (mevedel-core-store-info-set store `(("title" . ,title)))
    (mevedel-core-store-flush store)))

(defun mevedel-session-list-delete (root id)
  "Delete saved session ID of ROOT and everything it stored.
The live session cannot be deleted: switch to another first."
  (let ((chat (mevedel-chat-get root)))
    (when (and chat (equal (mevedel-session-id (mevedel-chat-session chat)) id))
      (user-error "Session %s is live; start or resume another one first" id)))
  (mevedel-session-list--refuse-held root id "delete it")
  (let ((dir (expand-file-name (mevedel-session--check-id id)
                               (mevedel-session-sessions-directory root))))
    (unless (file-exists-p (expand-file-name "session.sqlite" dir))
      (user-error "No saved session %s in %s" id root))
    (delete-directory dir t)))

;;;; The session list

(defvar-local mevedel-session-list--root nil
  "Workspace whose sessions this list shows.")

(define-obsolete-variable-alias 'mevedel-sessions-mode-map 'mevedel-session-list-mode-map "0.2")
(define-obsolete-variable-alias 'mevedel-sessions-mode-hook 'mevedel-session-list-mode-hook "0.2")

(defvar-keymap mevedel-session-list-mode-map
  :doc "Keys of the session list."
  "RET" #'mevedel-session-list-resume
  "r" #'mevedel-session-list-rename-at-point
  "f" #'mevedel-session-list-fork-at-point
  "d" #'mevedel-session-list-delete-at-point)

(define-derived-mode mevedel-session-list-mode tabulated-list-mode "mevedel-sessions"
  "Major mode of a workspace's list of saved mevedel sessions.
\\{mevedel-session-list-mode-map}"
  (setq tabulated-list-format [("Title" 44 t) ("Updated" 16 t) ("Turns" 5 mevedel-session-list--turns<)
                               ("Model" 22 t) ("Size" 8 mevedel-session-list--size<)]
        tabulated-list-sort-key nil)
  (add-hook 'tabulated-list-revert-hook #'mevedel-session-list--refresh nil t)
  (tabulated-list-init-header))

(defun mevedel-session-list--number (entry column)
  "Return the number shown in COLUMN of the list ENTRY."
  (string-to-number (aref (cadr entry) column)))

(defun mevedel-session-list--turns< (a b)
  "Return non-nil when the turn count of list entry A is below that of B."
  (< (mevedel-session-list--number a 2) (mevedel-session-list--number b 2)))

(defun mevedel-session-list--size< (a b)
  "Return non-nil when list entry A is smaller than B."
  (< (get-text-property 0 'mevedel-chars (aref (cadr a) 4))
     (get-text-property 0 'mevedel-chars (aref (cadr b) 4))))

(defun mevedel-session-list--refresh ()
  "Read the workspace's saved sessions into the list."
  (let ((live (when-let* ((chat (mevedel-chat-get mevedel-session-list--root)))
                (mevedel-session-id (mevedel-chat-session chat)))))
    (setq tabulated-list-entries
          (mapcar
           (lambda (entry)
             (let* ((info (cdr entry))
                    (get (lambda (key) (or (cdr (assoc key info)) "")))
                    (chars (string-to-number (funcall get "chars")))
                    (owner (mevedel-session-owner mevedel-session-list--root (car entry)))
                    (title (concat
                            (or (cdr (assoc "error" info))
                                (if (string-empty-p (funcall get "title")) (car entry)
                                  (funcall get "title")))
                            (if owner
                                (propertize (format " [in use by %s]"
                                                    (mevedel-session-owner-text owner))
                                            'face 'warning)
                              "")
                            (if (mevedel-session-demo-p info)
                                (propertize " [demo]" 'face 'shadow)
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
           (mevedel-session-saved mevedel-session-list--root)))))

;;;###autoload
(defun mevedel-sessions (&optional directory)
  "List the saved sessions of DIRECTORY's workspace (default: the current one)."
  (interactive)
  (let* ((root (if directory (mevedel-chat-workspace-root directory) (mevedel-session-list--root)))
         (buffer (get-buffer-create
                  (format "*mevedel sessions: %s*"
                          (file-name-nondirectory (directory-file-name root))))))
    (with-current-buffer buffer
      (mevedel-session-list-mode)
      (setq default-directory root
            mevedel-session-list--root root)
      (mevedel-session-list--refresh)
      (tabulated-list-print))
    (pop-to-buffer buffer)
    buffer))

(defun mevedel-session-list--slash-sessions (chat _argument)
  "List the saved sessions of CHAT's workspace (the /sessions command)."
  (mevedel-sessions (mevedel-chat-root chat)))

(defun mevedel-session-list--id-at-point ()
  "Return the ID of the session on this line."
  (or (tabulated-list-get-id) (user-error "No session on this line")))

(defun mevedel-session-list-resume ()
  "Resume the session on this line."
  (interactive)
  (let ((root mevedel-session-list--root)
        (id (mevedel-session-list--id-at-point)))
    (when-let* ((view (mevedel-session-list-switch root id)))
      (pop-to-buffer view))))

(defun mevedel-session-list-rename-at-point (title)
  "Rename the session on this line to TITLE."
  (interactive (list (read-string "New title: "
                                  (aref (tabulated-list-get-entry) 0))))
  (mevedel-session-list-rename mevedel-session-list--root (mevedel-session-list--id-at-point) title)
  (revert-buffer))

(defun mevedel-session-list-fork-at-point ()
  "Fork the session on this line up to a turn chosen by name, and resume the fork."
  (interactive)
  (let* ((root mevedel-session-list--root)
         (id (mevedel-session-list--id-at-point))
         (turns (mevedel-session-list--with-store store root id
                  (reverse (car (read-from-string
                                 (or (mevedel-session-list--info store "turn-list") "nil"))))))
         (all "the whole conversation")
         (choices (cons all (cl-loop for (_ label) in turns for i from 1
                                     collect (format "before turn %d: %s" i label))))
         (choice (completing-read "Fork keeping: " choices nil t nil nil all))
         (turn (unless (equal choice all) (1- (cl-position choice choices :test #'equal))))
         (fork (mevedel-session-list-fork root id turn)))
    (pop-to-buffer (mevedel-session-list-switch root fork))))

(defun mevedel-session-list-delete-at-point ()
  "Delete the session on this line after confirmation."
  (interactive)
  (let ((id (mevedel-session-list--id-at-point)))
    (when (yes-or-no-p (format "Delete session %s (%s) and everything it saved? "
                               id (aref (tabulated-list-get-entry) 0)))
      (mevedel-session-list-delete mevedel-session-list--root id)
      (revert-buffer))))

;;;; Sessions another process writes

(defun mevedel-session-list-ask-held (root id owner)
  "Ask what to do with saved session ID of ROOT, which OWNER writes.
Return `fork', `read-only' or nil (cancel)."
  (let ((title (ignore-errors
                 (mevedel-session-list--with-store store root id
                   (mevedel-session-list--info store "title")))))
    (pcase (car (read-multiple-choice
                 (format "Session %s%s is in use by %s; open" id
                         (if (and title (not (string-empty-p title))) (format " (%s)" title) "")
                         (mevedel-session-owner-text owner))
                 '((?f "a fork" "a new session copied from it, yours to continue")
                   (?r "read-only" "its transcript as last saved; sending is refused")
                   (?c "cancel" "leave it to that process"))))
      (?f 'fork)
      (?r 'read-only))))

(defun mevedel-session-list-open-held (root id owner)
  "Open saved session ID of ROOT, which OWNER (another process) writes.
The user chooses (`mevedel-session-list-ask-held'): a fork of it, which
becomes ROOT's live session, or a read-only view of it as last saved,
which replaces such a view shown before.  Return the view buffer
shown, or nil when the user cancels."
  (pcase (mevedel-session-list-ask-held root id owner)
    ('fork (mevedel-session-list-switch root (mevedel-session-list-fork root id)))
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

;;;; In the view

(mevedel-view-register-slash-command "new"
  #'mevedel-session-list--slash-new "start a fresh session (this one stays saved)")
(mevedel-view-register-slash-command "clear"
  #'mevedel-session-list--slash-clear "start a fresh session in this view")
(mevedel-view-register-slash-command "sessions"
  #'mevedel-session-list--slash-sessions "list, resume, fork, rename or delete saved sessions")

;;;; Former names

(define-obsolete-function-alias 'mevedel-sessions-open #'mevedel-session-list-open "0.2")
(define-obsolete-function-alias 'mevedel-sessions-switch #'mevedel-session-list-switch "0.2")
(define-obsolete-function-alias 'mevedel-sessions-fork #'mevedel-session-list-fork "0.2")
(define-obsolete-function-alias 'mevedel-sessions-rename #'mevedel-session-list-rename "0.2")
(define-obsolete-function-alias 'mevedel-sessions-delete #'mevedel-session-list-delete "0.2")
(define-obsolete-function-alias 'mevedel-sessions-ask-held #'mevedel-session-list-ask-held "0.2")
(define-obsolete-function-alias 'mevedel-sessions-open-held #'mevedel-session-list-open-held "0.2")
(define-obsolete-function-alias 'mevedel-sessions-mode #'mevedel-session-list-mode "0.2")
(define-obsolete-function-alias 'mevedel-sessions-resume #'mevedel-session-list-resume "0.2")
(define-obsolete-function-alias 'mevedel-sessions-rename-at-point
  #'mevedel-session-list-rename-at-point "0.2")
(define-obsolete-function-alias 'mevedel-sessions-fork-at-point
  #'mevedel-session-list-fork-at-point "0.2")
(define-obsolete-function-alias 'mevedel-sessions-delete-at-point
  #'mevedel-session-list-delete-at-point "0.2")

(provide 'mevedel-session-list)
;;; mevedel-session-list.el ends here
