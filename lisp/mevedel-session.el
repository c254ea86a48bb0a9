;;; mevedel-session.el --- Session objects and their lazily made storage  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A session owns durable state under its workspace:
;;
;;   WORKSPACE/.mevedel/sessions/SESSION-ID/
;;     tool-results/    persisted oversized tool output (artifact://)
;;     local/           session working files (work://)
;;     session.sqlite   conversation, checkpoints, later the registry and tasks
;;     mailbox.sqlite   the mailbox (made with session.sqlite)
;;
;; Nothing exists until the first durable write asks for it
;; (`mevedel-session-ensure-storage'): creating a session, reading its
;; paths or discovering artifacts never touches the disk, and neither
;; do reads (Read, Glob, Grep, read-only Bash, ListExecutions).  When
;; the workspace is in a Git repository, materialising also adds the
;; workspace's .mevedel/ to the repository's info/exclude.  The module
;; may create the directory itself when it posts background mail to
;; session.sqlite; `mevedel-session-storage-written' then completes it.
;; Ephemeral sessions (one-off requests) have no storage at all.
;;
;; A session also carries its permission state: its mode, its
;; "always this session" answers and the function that asks the user
;; (see mevedel-permissions.el).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)

(defgroup mevedel-session nil
  "Sessions of mevedel and their storage."
  :group 'mevedel
  :prefix "mevedel-session-")

(define-error 'mevedel-session-error "mevedel session error")
(define-error 'mevedel-session-no-storage
              "This session has no durable storage" 'mevedel-session-error)

(cl-defstruct (mevedel-session (:constructor mevedel-session--make) (:copier nil))
  "A session: its identity, workspace, permission state and storage."
  (id nil :read-only t)
  (workspace nil :read-only t)
  (ephemeral nil :read-only t)
  store
  ;; nil means `mevedel-permissions-mode'.
  permission-mode
  ;; "Always this session" answers: an `equal' table whose keys are
  ;; tool names and (command . KEY) for command keys.
  (permission-answers (make-hash-table :test #'equal) :read-only t)
  ;; Function of (CONTEXT ANSWER) asking the user about a call, or nil
  ;; when nobody can be asked.
  prompter
  ;; The buffer of the session's main conversation (history://root),
  ;; or nil.
  conversation)

(defvar mevedel-session--live (make-hash-table :test #'equal :weakness 'value)
  "Sessions by ID, while something holds them.")

;;;; Creating

(defun mevedel-session-new-id ()
  "Return a fresh session ID: a timestamp and random hex digits."
  (format "%s-%06x" (format-time-string "%Y%m%dT%H%M%S") (random #x1000000)))

(defun mevedel-session--check-id (id)
  "Signal `mevedel-session-error' unless ID is a safe directory name."
  (unless (and (stringp id)
               (string-match-p "\\`[A-Za-z0-9][A-Za-z0-9._-]*\\'" id)
               (not (string-match-p "\\.\\." id)))
    (signal 'mevedel-session-error
            (list (format "Invalid session ID %S: use letters, digits, `.', `_' and `-'" id))))
  id)

(cl-defun mevedel-session-create (&key workspace id ephemeral)
  "Return a new session for WORKSPACE (default: `default-directory').
ID defaults to `mevedel-session-new-id'.  EPHEMERAL non-nil makes a
session without durable storage.  Nothing is written to disk."
  (let ((workspace (file-name-as-directory
                    (expand-file-name (or workspace default-directory)))))
    (unless (file-directory-p workspace)
      (signal 'mevedel-session-error
              (list (format "Workspace %s is not a directory" workspace))))
    (let ((session (mevedel-session--make
                    :id (mevedel-session--check-id (or id (mevedel-session-new-id)))
                    :workspace workspace
                    :ephemeral ephemeral)))
      (puthash (mevedel-session-id session) session mevedel-session--live)
      session)))

(defun mevedel-session-find (id)
  "Return the live session whose ID is ID, or nil."
  (gethash id mevedel-session--live))

;;;; Paths (computed, never created here)

(defun mevedel-session-directory (session)
  "Return SESSION's storage directory name, or nil when it is ephemeral.
The directory may not exist yet; see `mevedel-session-ensure-storage'."
  (unless (mevedel-session-ephemeral session)
    (file-name-as-directory
     (expand-file-name (concat ".mevedel/sessions/" (mevedel-session-id session))
                       (mevedel-session-workspace session)))))

(defun mevedel-session-storage-p (session)
  "Return non-nil when SESSION's storage has been materialised."
  (when-let* ((dir (mevedel-session-directory session)))
    (file-directory-p dir)))

(defun mevedel-session-durable-p (session)
  "Return non-nil when SESSION can have durable storage (it is not ephemeral)."
  (and (mevedel-session-p session) (not (mevedel-session-ephemeral session))))

(defun mevedel-session-tool-results-directory (session)
  "Return the name of SESSION's tool-results directory (maybe not yet made)."
  (when-let* ((dir (mevedel-session-directory session)))
    (file-name-as-directory (expand-file-name "tool-results" dir))))

(defun mevedel-session-local-directory (session)
  "Return the name of SESSION's local directory (maybe not yet made)."
  (when-let* ((dir (mevedel-session-directory session)))
    (file-name-as-directory (expand-file-name "local" dir))))

(defun mevedel-session-database-file (session)
  "Return the name of SESSION's session.sqlite (maybe not yet made)."
  (when-let* ((dir (mevedel-session-directory session)))
    (expand-file-name "session.sqlite" dir)))

;;;; Saved sessions

(defun mevedel-session-sessions-directory (workspace)
  "Return the directory holding WORKSPACE's sessions (maybe not yet made)."
  (file-name-as-directory (expand-file-name ".mevedel/sessions" workspace)))

(defun mevedel-session-saved (workspace)
  "Return WORKSPACE's saved conversations, most recently updated first.
Each is (ID . INFO), INFO the session's metadata as an alist of
strings (\"title\", \"updated\", \"turns\", \"model\", ...).  Only sessions
that saved a conversation are listed; a session whose store cannot be
read is listed with an \"error\" entry."
  (let ((dir (mevedel-session-sessions-directory workspace))
        (sessions nil))
    (when (file-directory-p dir)
      (dolist (id (directory-files dir nil "\\`[A-Za-z0-9][A-Za-z0-9._-]*\\'"))
        (let ((file (expand-file-name "session.sqlite" (expand-file-name id dir))))
          (when (file-exists-p file)
            (let ((info (condition-case err
                            (mevedel-core-store-file-info file)
                          (error (list (cons "error" (error-message-string err)))))))
              (when (or (assoc "turns" info) (assoc "error" info))
                (push (cons id info) sessions)))))))
    (sort sessions
          (lambda (a b)
            (> (string-to-number (or (cdr (assoc "updated" (cdr a))) "0"))
               (string-to-number (or (cdr (assoc "updated" (cdr b))) "0")))))))

(defun mevedel-session-latest (workspace)
  "Return the ID of WORKSPACE's most recently updated saved conversation, or nil."
  (car (cl-find-if-not (lambda (entry) (assoc "error" (cdr entry)))
                       (mevedel-session-saved workspace))))

;;;; Git exclusion

(defun mevedel-session--git-common-dir (workspace)
  "Return the Git directory shared by WORKSPACE's worktrees, or nil.
Handles a .git directory and a .git file (linked worktrees)."
  (when-let* ((top (locate-dominating-file workspace ".git")))
    (let ((dot-git (expand-file-name ".git" top)))
      (cond
       ((file-directory-p dot-git) (cons top dot-git))
       ((file-regular-p dot-git)
        (with-temp-buffer
          (insert-file-contents dot-git)
          (when (re-search-forward "^gitdir: *\\(.+\\)$" nil t)
            (let* ((gitdir (expand-file-name (string-trim (match-string 1)) top))
                   (commondir (expand-file-name "commondir" gitdir)))
              (cons top
                    (if (file-exists-p commondir)
                        (with-temp-buffer
                          (insert-file-contents commondir)
                          (expand-file-name (string-trim (buffer-string)) gitdir))
                      gitdir))))))))))

(defun mevedel-session-git-exclude (workspace)
  "Add WORKSPACE's .mevedel/ to its Git repository's info/exclude.
Does nothing outside a repository or when the line is already there.
Return the exclude file changed, or nil."
  (when-let* ((found (mevedel-session--git-common-dir workspace)))
    (let* ((top (car found))
           (relative (file-relative-name (expand-file-name ".mevedel" workspace) top))
           (line (concat "/" relative "/"))
           (exclude (expand-file-name "info/exclude" (cdr found))))
      (unless (and (file-exists-p exclude)
                   (with-temp-buffer
                     (insert-file-contents exclude)
                     (re-search-forward (concat "^" (regexp-quote line) "$") nil t)))
        (make-directory (file-name-directory exclude) t)
        (with-temp-buffer
          (when (file-exists-p exclude)
            (insert-file-contents exclude)
            (goto-char (point-max))
            (unless (or (bobp) (bolp)) (insert "\n")))
          (insert line "\n")
          (let ((coding-system-for-write 'utf-8-unix))
            (write-region (point-min) (point-max) exclude nil 'silent)))
        exclude))))

;;;; Materialising

(defun mevedel-session-ensure-storage (session)
  "Materialise SESSION's storage for a durable write; return its directory.
Creates tool-results/, local/ and session.sqlite (WAL mode) and, in a
Git repository, excludes .mevedel/.  Signals
`mevedel-session-no-storage' for an ephemeral session."
  (let ((dir (or (mevedel-session-directory session)
                 (signal 'mevedel-session-no-storage
                         (list (format "Session %s is ephemeral" (mevedel-session-id session)))))))
    (unless (and (mevedel-session-store session) (file-directory-p dir))
      (make-directory (mevedel-session-tool-results-directory session) t)
      (make-directory (mevedel-session-local-directory session) t)
      ;; Also when the directory exists: the module may have made it
      ;; for mail (the line is added once).
      (mevedel-session-git-exclude (mevedel-session-workspace session))
      (setf (mevedel-session-store session)
            (mevedel-core-store-open (mevedel-session-database-file session))))
    dir))

(defun mevedel-session-storage-written (id)
  "Complete the storage of the live session ID after the module wrote to it.
The module creates the session directory when it posts mail to an
unsaved session's session.sqlite; this adds the rest (and the Git
exclusion).  Does nothing for an unknown session or one whose storage
is open already."
  (when-let* ((session (mevedel-session-find id))
              ((mevedel-session-durable-p session))
              ((not (mevedel-session-store session))))
    (mevedel-session-ensure-storage session)))

(defun mevedel-session-store-handle (session)
  "Return SESSION's open session store, materialising storage first."
  (mevedel-session-ensure-storage session)
  (mevedel-session-store session))

(defvar mevedel-session-close-functions nil
  "Abnormal hook run with a session that is being closed.
It runs before the store closes: execution teardown, for one, stops
the session's processes here.")

(defun mevedel-session-close (session)
  "Close SESSION's store, if open.  Files stay on disk.
Runs `mevedel-session-close-functions' first."
  (run-hook-with-args 'mevedel-session-close-functions session)
  (when-let* ((store (mevedel-session-store session)))
    (mevedel-core-store-close store)
    (setf (mevedel-session-store session) nil)))

;;;; The current session

(defvar-local mevedel-session-current nil
  "The session that owns this buffer's tool calls, or nil.
Data buffers set it; tool calls without an explicit session use the
one of the buffer they run in.")

(defvar-local mevedel-session-agent nil
  "The canonical path of the child agent whose tool calls this buffer runs.
nil means the session's root agent, /root.")

(defun mevedel-session-call-directory (session buffer)
  "Return the directory a call from data BUFFER in SESSION works in.
A child agent's buffer keeps its own working directory (its Agent
call's working_directory, else its parent's), so its relative paths,
commands and permission paths start there; any other call works in
SESSION's workspace.  Without a session, BUFFER's directory."
  (cond ((and (buffer-live-p buffer) (buffer-local-value 'mevedel-session-agent buffer))
         (buffer-local-value 'default-directory buffer))
        ((mevedel-session-p session) (mevedel-session-workspace session))
        ((buffer-live-p buffer) (buffer-local-value 'default-directory buffer))
        (t default-directory)))

(provide 'mevedel-session)
;;; mevedel-session.el ends here
