;;; mevedel-session.el --- Session objects and their lazily made storage  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A session owns durable state under its workspace:
;;
;;   WORKSPACE/.mevedel/sessions/SESSION-ID/
;;     tool-results/    persisted oversized tool output (artifact://)
;;     local/           session working files (work://)
;;     session.sqlite   conversation, checkpoints, session info (title,
;;                      tasks, agent registry, plan, ToolCall runs), inputs
;;     mailbox.sqlite   the mailbox (made on the first mail)
;;
;; Nothing exists until the first durable write asks for it
;; (`mevedel-session-ensure-storage'): creating a session, reading its
;; paths or discovering artifacts never touches the disk, and neither
;; do reads (Read, Glob, Grep, read-only Bash, ListExecutions).  When
;; the workspace is in a Git repository, materialising also adds the
;; workspace's .mevedel/ to the repository's info/exclude.  The module
;; may create the directory itself when it posts background mail
;; beside session.sqlite; `mevedel-session-storage-written' then
;; completes it.
;; Ephemeral sessions (one-off requests) have no storage at all.  A
;; workspace on another host (TRAMP) keeps the same tree on this
;; machine instead, under `mevedel-remote-state-directory' keyed by
;; host and path (see mevedel-remote.el).
;;
;; A session also carries its permission state: its mode, its
;; "always this session" answers and the function that asks the user
;; (see mevedel-permissions.el).
;;
;; One process writes a session: the one holding its lock, the
;; symbolic link SESSION-DIRECTORY/lock whose target names it,
;; PID@HOST:START (START: when that process started, in epoch seconds,
;; which tells a reused PID from the owner).  A symbolic link is made
;; in one step, so two processes cannot both make it, as with Emacs's
;; own file locks.  A session takes its lock when it resumes
;; (`mevedel-session-lock') or first makes its storage, and gives it
;; up when it is closed or Emacs exits.  A lock whose process is gone
;; (on this host) is stale and taken over; one held by a live process
;; makes the storage refuse (`mevedel-session-locked'), and
;; `mevedel-session-owner' says who holds it beforehand.  A session's
;; child agents run in its process and share its lock.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-remote)

(defgroup mevedel-session nil
  "Sessions of mevedel and their storage."
  :group 'mevedel
  :prefix "mevedel-session-")

(define-error 'mevedel-session-error "mevedel session error")
(define-error 'mevedel-session-no-storage
              "This session has no durable storage" 'mevedel-session-error)
(define-error 'mevedel-session-locked "Session in use" 'mevedel-session-error)

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
  conversation
  ;; For a session only looked at, the owner (as `mevedel-session-owner'
  ;; gives it) of the process writing it: this one never does.
  read-only)

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
     (expand-file-name (mevedel-session-id session)
                       (mevedel-session-sessions-directory (mevedel-session-workspace session))))))

(defun mevedel-session-storage-p (session)
  "Return non-nil when SESSION's storage has been materialised.
A session only looked at has none here: its storage is the writing
process's."
  (when-let* ((dir (mevedel-session-directory session))
              ((not (mevedel-session-read-only session))))
    (file-directory-p dir)))

(defun mevedel-session-durable-p (session)
  "Return non-nil when SESSION can have durable storage (it is not ephemeral)."
  (and (mevedel-session-p session) (not (mevedel-session-ephemeral session))))

(defun mevedel-session-tool-results-directory (session)
  "Return the name of SESSION's tool-results directory (maybe not yet made)."
  (when-let* ((dir (mevedel-session-directory session)))
    (file-name-as-directory (expand-file-name "tool-results" dir))))

(defun mevedel-session-save-artifact (session prefix extension bytes)
  "Save BYTES in SESSION's tool-results/, named by PREFIX, time and EXTENSION.
BYTES is a unibyte string, written as is.  Return the file's
artifact:// address, or nil when SESSION keeps no files or the write
fails: an artifact is a convenience, never a reason to fail a call."
  (when (mevedel-session-durable-p session)
    (condition-case nil
        (progn
          (mevedel-session-ensure-storage session)
          (let ((dir (mevedel-session-tool-results-directory session))
                (coding-system-for-write 'binary))
            (make-directory dir t)
            (let ((file (make-temp-file
                         (expand-file-name
                          (format-time-string (concat prefix "-%Y%m%dT%H%M%S-")) dir)
                         nil (concat "." extension))))
              (write-region bytes nil file nil 'silent)
              (concat "artifact://tool-results/" (file-name-nondirectory file)))))
      (error nil))))

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
  "Return the directory holding WORKSPACE's sessions (maybe not yet made).
A remote WORKSPACE keeps them on this machine (`mevedel-remote-state-root'):
a SQLite store never waits on a network link."
  (file-name-as-directory
   (if (mevedel-remote-p workspace)
       (expand-file-name "sessions" (mevedel-remote-state-root workspace))
     (expand-file-name ".mevedel/sessions" workspace))))

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

(defun mevedel-session-demo-p (info)
  "Return non-nil when the saved session of INFO talked to the demo model."
  (equal (cdr (assoc "demo" info)) "1"))

(defun mevedel-session-latest (workspace &optional demo)
  "Return the ID of WORKSPACE's most recently updated saved conversation, or nil.
Only demo sessions count when DEMO is non-nil, and only the others
when it is nil: the demo's conversation never reaches a real model
unasked (see `mevedel-session-demo-p')."
  (car (cl-find-if (lambda (entry)
                     (and (not (assoc "error" (cdr entry)))
                          (eq (and (mevedel-session-demo-p (cdr entry)) t) (and demo t))))
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

(defvar mevedel-session-storage-functions nil
  "Functions of (SESSION DIRECTORY) run once SESSION's storage exists.
What was kept in memory until then (the repair log, say) can be
written there.  They must not signal.")

(defun mevedel-session-ensure-storage (session)
  "Materialise SESSION's storage for a durable write; return its directory.
Creates tool-results/, local/ and session.sqlite (WAL mode) and, in a
Git repository, excludes .mevedel/.  Signals
`mevedel-session-no-storage' for an ephemeral session."
  (let ((dir (or (mevedel-session-directory session)
                 (signal 'mevedel-session-no-storage
                         (list (format "Session %s is ephemeral" (mevedel-session-id session)))))))
    (unless (and (mevedel-session-store session) (file-directory-p dir))
      (mevedel-session--refuse-read-only session)
      (make-directory (mevedel-session-tool-results-directory session) t)
      (make-directory (mevedel-session-local-directory session) t)
      ;; Also when the directory exists: the module may have made it
      ;; for mail (the line is added once).  A remote workspace's
      ;; state is not in it.
      (unless (mevedel-remote-p (mevedel-session-workspace session))
        (mevedel-session-git-exclude (mevedel-session-workspace session)))
      (mevedel-session-lock session)
      (setf (mevedel-session-store session)
            (mevedel-core-store-open (mevedel-session-database-file session)))
      (run-hook-with-args 'mevedel-session-storage-functions session dir))
    dir))

(defun mevedel-session-storage-written (id)
  "Complete the storage of the live session ID after the module wrote to it.
The module creates the session directory when it posts mail for an
unsaved session; this adds the rest (and the Git
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
  "Close SESSION's store, if open, and give up its lock and lease.
Files stay on disk.
Runs `mevedel-session-close-functions' first."
  (run-hook-with-args 'mevedel-session-close-functions session)
  (when-let* ((store (mevedel-session-store session)))
    (mevedel-core-store-close store)
    (setf (mevedel-session-store session) nil))
  (mevedel-session-unlock session)
  (mevedel-remote-lease-release (mevedel-session-workspace session)
                                (mevedel-session-id session)))

;;;; Ownership: one writer per session

(defvar mevedel-session--held (make-hash-table :test #'equal)
  "Sessions of this process holding their lock, by storage directory.")

(defvar mevedel-session--token nil
  "The lock target naming this process, once made (see the Commentary).")

(defun mevedel-session--lock-file (directory)
  "Return the name of the lock of the session storage DIRECTORY."
  (expand-file-name "lock" directory))

(defconst mevedel-session--clock-ticks 100
  "Clock ticks a second in /proc/PID/stat: USER_HZ, 100 on Linux.")

(defun mevedel-session--proc-start (pid)
  "Return when process PID started, in whole epoch seconds, from /proc; or nil.
That is the boot time of /proc/stat plus the start of /proc/PID/stat,
in clock ticks after boot: both constants, so every process reading
them gets the same start."
  (ignore-errors
    (let ((boot (with-temp-buffer
                  (insert-file-contents "/proc/stat")
                  (and (re-search-forward "^btime \\([0-9]+\\)$" nil t)
                       (string-to-number (match-string 1)))))
          ;; Field 22; the name before it, in parentheses, may hold spaces.
          (ticks (with-temp-buffer
                   (insert-file-contents (format "/proc/%d/stat" pid))
                   (goto-char (point-max))
                   (nth 19 (split-string (buffer-substring (1+ (search-backward ")"))
                                                           (point-max)))))))
      (and boot ticks (string-match-p "\\`[0-9]+\\'" ticks)
           (+ boot (/ (string-to-number ticks) mevedel-session--clock-ticks))))))

(defun mevedel-session--process-start (pid)
  "Return when process PID started, in whole epoch seconds, or nil.
/proc gives it exactly (`mevedel-session--proc-start').  Without
/proc, `process-attributes' gives it, but it subtracts the uptime from
a clock read just after: a process stalled between the two reads (a
loaded machine short of memory) gets a start seconds late, and a live
owner checked so would seem a newer process with its PID, its lock
stale."
  (or (mevedel-session--proc-start pid)
      (when-let* ((start (alist-get 'start (process-attributes pid))))
        (truncate (float-time start)))))

(defun mevedel-session--my-token ()
  "Return the lock target naming this process, PID@HOST:START.
It is made once: a start time read again may round differently."
  (or mevedel-session--token
      (setq mevedel-session--token
            (let ((start (mevedel-session--process-start (emacs-pid))))
              (format "%d@%s%s" (emacs-pid) (system-name) (if start (format ":%d" start) ""))))))

(defun mevedel-session--lock-target (file)
  "Return the target of the lock FILE, or nil when there is none.
A file there that is no symbolic link gives \"\", which names nobody."
  (or (file-symlink-p file) (and (file-exists-p file) "")))

(defun mevedel-session--parse-owner (target)
  "Return the owner named by the lock TARGET, or nil when it names none.
An owner is a plist (:pid PID :host HOST :start START)."
  (when (and target
             (string-match "\\`\\([0-9]+\\)@\\([^:@]+\\)\\(?::\\([0-9]+\\)\\)?\\'" target))
    (list :pid (string-to-number (match-string 1 target))
          :host (match-string 2 target)
          :start (and (match-beginning 3) (string-to-number (match-string 3 target))))))

(defun mevedel-session--mine-p (owner)
  "Return non-nil when OWNER is this process."
  (and (eql (plist-get owner :pid) (emacs-pid))
       (equal (plist-get owner :host) (system-name))))

(defun mevedel-session--alive-p (owner)
  "Return non-nil when the process OWNER names may still hold its lock.
One on another host cannot be checked, so it may.  Here, a process
that is gone, a zombie or a newer one with the same PID (it started
at another time) holds nothing."
  (let ((pid (plist-get owner :pid)))
    (if (not (equal (plist-get owner :host) (system-name)))
        t
      (if-let* ((attributes (process-attributes pid)))
          (and (not (equal (alist-get 'state attributes) "Z"))
               (let ((recorded (plist-get owner :start))
                     (start (mevedel-session--process-start pid)))
                 (or (not recorded) (not start) (<= (abs (- recorded start)) 2))))
        ;; Without process attributes (no /proc), ask the kernel.
        (zerop (signal-process pid 0))))))

(defun mevedel-session--holder (directory target &optional session)
  "Return the owner holding the lock of DIRECTORY, whose target is TARGET.
nil when that lock names nobody, its process is gone (it is stale) or
it is SESSION's.  This process holds it for another of its sessions
only while that one is open."
  (when-let* ((owner (mevedel-session--parse-owner target)))
    (if (mevedel-session--mine-p owner)
        (let ((holder (gethash directory mevedel-session--held)))
          (and holder (not (eq holder session)) owner))
      (and (mevedel-session--alive-p owner) owner))))

(defun mevedel-session-owner (workspace id)
  "Return the owner of another process writing saved session ID of WORKSPACE.
That is a plist (:pid PID :host HOST :start START) when a live
process other than this Emacs holds the session's lock; nil when
nobody does, the lock is stale or this Emacs holds it."
  (let* ((directory (file-name-as-directory
                     (expand-file-name (mevedel-session--check-id id)
                                       (mevedel-session-sessions-directory workspace))))
         (owner (mevedel-session--holder
                 directory (mevedel-session--lock-target (mevedel-session--lock-file directory)))))
    (and owner (not (mevedel-session--mine-p owner)) owner)))

(defun mevedel-session-owner-text (owner)
  "Return how to name the process OWNER: \"process PID\" (and its host)."
  (format "process %d%s" (plist-get owner :pid)
          (if (equal (plist-get owner :host) (system-name))
              ""
            (format " on %s" (plist-get owner :host)))))

(defun mevedel-session-in-use-message (id owner)
  "Return the sentence saying that session ID is in use by OWNER."
  (format "session %s is in use by %s" id (mevedel-session-owner-text owner)))

(defun mevedel-session--refuse-read-only (session)
  "Signal `mevedel-session-locked' when SESSION is only looked at."
  (when-let* ((owner (mevedel-session-read-only session)))
    (signal 'mevedel-session-locked
            (list (mevedel-session-in-use-message (mevedel-session-id session) owner)))))

(defun mevedel-session--make-lock (file token)
  "Make the lock FILE naming TOKEN in one step; return nil when it exists."
  (condition-case nil
      (progn (make-symbolic-link token file) t)
    (file-already-exists nil)))

(defun mevedel-session--break (file target)
  "Delete the stale lock FILE, whose target was TARGET, unless it changed.
One process at a time breaks a lock, holding FILE.break meanwhile: so
none deletes the lock another has just made in the stale one's place.
A break lock whose process is gone is deleted."
  (let ((guard (concat file ".break")))
    (if (mevedel-session--make-lock guard (mevedel-session--my-token))
        (unwind-protect
            (when (equal (mevedel-session--lock-target file) target)
              (delete-file file))
          (delete-file guard))
      (let ((owner (mevedel-session--parse-owner (mevedel-session--lock-target guard))))
        (if (and owner (not (mevedel-session--mine-p owner)) (mevedel-session--alive-p owner))
            (sleep-for 0.05)
          (ignore-error file-missing (delete-file guard)))))))

(defconst mevedel-session--lock-tries 20
  "Times taking a lock tries again after a stale one went.")

(defun mevedel-session-lock (session)
  "Make this process the only writer of SESSION: take its lock.
Does nothing when SESSION holds it already.  A stale lock is taken
over; one another process holds (or another open session of this
one) makes this signal `mevedel-session-locked', saying
\"session ID is in use by process PID\".  SESSION's storage directory
must exist."
  (mevedel-session--refuse-read-only session)
  (let ((directory (mevedel-session-directory session)))
    (unless (eq (gethash directory mevedel-session--held) session)
      (let ((file (mevedel-session--lock-file directory))
            (tries 0))
        (while (not (mevedel-session--make-lock file (mevedel-session--my-token)))
          (let* ((target (mevedel-session--lock-target file))
                 (owner (mevedel-session--holder directory target session)))
            (when owner
              (signal 'mevedel-session-locked
                      (list (mevedel-session-in-use-message (mevedel-session-id session) owner))))
            (when (> (cl-incf tries) mevedel-session--lock-tries)
              (signal 'mevedel-session-error
                      (list (format "Cannot take the lock %s: it keeps changing" file))))
            (when target (mevedel-session--break file target))))
        (puthash directory session mevedel-session--held)))))

(defun mevedel-session--drop-lock (directory)
  "Delete the lock of DIRECTORY when it names this process."
  (let ((file (mevedel-session--lock-file directory)))
    (when (equal (mevedel-session--lock-target file) (mevedel-session--my-token))
      (ignore-error file-missing (delete-file file)))))

(defun mevedel-session-unlock (session)
  "Give up SESSION's lock, if it has it: another process may then write it."
  (when-let* ((directory (mevedel-session-directory session))
              ((eq (gethash directory mevedel-session--held) session)))
    (remhash directory mevedel-session--held)
    (mevedel-session--drop-lock directory)))

(defun mevedel-session--unlock-all ()
  "Give up every lock of this process, as Emacs exits (`kill-emacs-hook').
It runs after the hooks saving the sessions (depth 90)."
  (maphash (lambda (directory _session) (mevedel-session--drop-lock directory))
           mevedel-session--held)
  (clrhash mevedel-session--held))

(add-hook 'kill-emacs-hook #'mevedel-session--unlock-all 90)

;;;; The current session

(defvar-local mevedel-session-current nil
  "The session that owns this buffer's tool calls, or nil.
Data buffers set it; tool calls without an explicit session use the
one of the buffer they run in.")

(defvar-local mevedel-session-agent nil
  "The canonical path of the child agent whose tool calls this buffer runs.
nil means the session's root agent, /root.")

(defsubst mevedel-session-call-directory (session buffer)
  "Return the directory a call from data BUFFER in SESSION works in.
A child agent's buffer keeps its own working directory (its Agent
call's working_directory, else its parent's), so its relative paths,
commands and permission paths start there; any other call works in
SESSION's workspace.  Without a session, BUFFER's directory.  Inline:
every permission decision asks it."
  (cond ((and (buffer-live-p buffer) (buffer-local-value 'mevedel-session-agent buffer))
         (buffer-local-value 'default-directory buffer))
        ((mevedel-session-p session) (mevedel-session-workspace session))
        ((buffer-live-p buffer) (buffer-local-value 'default-directory buffer))
        (t default-directory)))

(provide 'mevedel-session)
;;; mevedel-session.el ends here
