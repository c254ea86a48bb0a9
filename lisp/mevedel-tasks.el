;;; mevedel-tasks.el --- A session's tasks: owners, validation, settlement, saving  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The task list TaskWrite and TaskList (mevedel-tool-tasks.el) work
;; on, and the status fragment (mevedel-tasks-view.el) shows.
;;
;; One list per session.  A task is (:id N :subject TEXT :status
;; STATUS :active-form TEXT :owner OWNER :blocked-by IDS); STATUS is
;; `pending', `in_progress' or `completed'.  IDs are allocated across
;; the session, completed tasks included, and never reused; completed
;; tasks are kept.  A subject is one non-blank line (whitespace runs
;; collapse to one space).
;;
;; Owners: "/root" is the main session; "/root/NAME[/NAME...]" is a
;; retained agent's canonical path, which must name an agent the
;; session knows (`mevedel-tasks-agent-known-functions'); any other
;; string not starting with "/" is a user-defined bucket.  A write
;; without owner belongs to its caller (`mevedel-tasks-caller').
;; The root may change every task; an agent only its own, its
;; descendants', the main session's and buckets', never another
;; agent's.  Each owner may carry one short note.
;;
;; A TaskWrite is checked whole before anything changes: one bad entry,
;; a foreign agent's task or an unknown note owner refuses the call.
;; `blockedBy' is the only edge; every write drops edges to absent or
;; completed tasks.
;;
;; `mevedel-tasks-settle-owner' is what an agent's turn settling calls:
;; success completes the owner's open tasks and clears its note,
;; failure leaves them open.  The list is saved in the session's
;; metadata after each change and read back, its owners checked again,
;; the first time a resumed session's tasks are asked for.
;;
;; The nudge: when tasks are open and none was written for
;; `mevedel-tasks-nudge-interval' model requests, the model is reminded
;; once with the TaskList text; then not again for another interval.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-session)

(defgroup mevedel-tasks nil
  "Session tasks and their status fragment."
  :group 'mevedel
  :prefix "mevedel-tasks-")

(defcustom mevedel-tasks-nudge-interval 8
  "Model requests without a task write after which the model is reminded once."
  :type 'natnum)

(defvar mevedel-tasks-caller-functions nil
  "Abnormal hook run with a pipeline call context until one returns a path.
That is the canonical path of the calling agent; without an answer the
caller is the main session, \"/root\".  The agents runtime adds the
lookup of its agents, so the tasks work without it.")

(defvar mevedel-tasks-agent-known-functions nil
  "Abnormal hook run with a session and a canonical agent path.
The agent exists unless a member returns nil; with no member every
agent path counts.  The agents runtime adds the check against the
session's registry, so the tasks work without it.")

(defvar mevedel-tasks-change-functions nil
  "Abnormal hook run with a session whenever its tasks change.")

(defconst mevedel-tasks-statuses '("pending" "in_progress" "completed")
  "The statuses a task can have.")

(cl-defstruct (mevedel-tasks-state (:constructor mevedel-tasks-state--make) (:copier nil))
  "A session's tasks."
  (next-id 1)
  ;; Tasks in creation order.
  tasks
  ;; Alist: owner to note.
  notes
  ;; Model requests seen, and the request of the last write and nudge.
  (requests 0) (written 0) (nudged 0))

(defvar mevedel-tasks--states (make-hash-table :test #'eq :weakness 'key)
  "Hash table: session to its task state.")

(define-error 'mevedel-tasks-error "Invalid task write")

(defun mevedel-tasks--fail (format-string &rest args)
  "Refuse a task write: signal `mevedel-tasks-error' with FORMAT-STRING and ARGS."
  (signal 'mevedel-tasks-error (list (apply #'format format-string args))))

;;;; Owners

(defun mevedel-tasks-agent-path-p (owner)
  "Return non-nil when OWNER is a well-formed agent path, /root/NAME[/NAME...]."
  (and (stringp owner)
       (string-match-p "\\`/root\\(?:/[A-Za-z0-9][A-Za-z0-9_.-]*\\)+\\'" owner)))

(defun mevedel-tasks--opaque-p (owner)
  "Return non-nil when OWNER has the shape of a storage ID, not of a name."
  (string-match-p "\\`[[:xdigit:]-]\\{16,\\}\\'" owner))

(defun mevedel-tasks-owner-check (session owner)
  "Return OWNER normalised for SESSION, or nil when it is not a valid owner.
\"/root\" and a known agent's path are canonical; a bucket is any other
name not starting with a slash and not shaped like a storage ID."
  (when (stringp owner)
    (let ((owner (string-trim owner)))
      (cond ((member owner '("/root" "/root/")) "/root")
            ((string-prefix-p "/" owner)
             (and (mevedel-tasks-agent-path-p owner)
                  (run-hook-with-args-until-failure
                   'mevedel-tasks-agent-known-functions session owner)
                  owner))
            ((or (string-empty-p owner) (mevedel-tasks--opaque-p owner)) nil)
            (t owner)))))

(defun mevedel-tasks-caller (context)
  "Return the canonical path of the caller of the tool call with CONTEXT.
See `mevedel-tasks-caller-functions'."
  (or (run-hook-with-args-until-success 'mevedel-tasks-caller-functions context)
      "/root"))

(defun mevedel-tasks-may-write-p (caller owner)
  "Return non-nil when CALLER may change what OWNER owns.
The root may change everything; an agent its own, its descendants',
the main session's and buckets', not another agent's."
  (or (equal caller "/root")
      (not (mevedel-tasks-agent-path-p owner))
      (equal owner caller)
      (string-prefix-p (concat caller "/") owner)))

;;;; State, saving and resuming

(defun mevedel-tasks--print (value)
  "Return VALUE printed readably."
  (let ((print-escape-newlines t) (print-length nil) (print-level nil))
    (prin1-to-string value)))

(defun mevedel-tasks--restore (session text)
  "Return the task state SESSION saved as TEXT, owners checked again.
Entries whose owners are malformed, storage IDs or unknown agents are
dropped, and so are edges to tasks that are gone or completed."
  (let* ((data (condition-case nil (car (read-from-string text)) (error nil)))
         (state (mevedel-tasks-state--make :next-id (max 1 (or (plist-get data :next-id) 1)))))
    (dolist (task (plist-get data :tasks))
      (when-let* ((owner (mevedel-tasks-owner-check session (plist-get task :owner)))
                  ((integerp (plist-get task :id)))
                  ((member (plist-get task :status) mevedel-tasks-statuses))
                  ((stringp (plist-get task :subject))))
        (push (plist-put (copy-sequence task) :owner owner) (mevedel-tasks-state-tasks state))
        (setf (mevedel-tasks-state-next-id state)
              (max (mevedel-tasks-state-next-id state) (1+ (plist-get task :id))))))
    (setf (mevedel-tasks-state-tasks state) (nreverse (mevedel-tasks-state-tasks state)))
    (pcase-dolist (`(,owner . ,note) (plist-get data :notes))
      (when-let* ((owner (mevedel-tasks-owner-check session owner)))
        (when (stringp note)
          (push (cons owner note) (mevedel-tasks-state-notes state)))))
    (mevedel-tasks--drop-resolved-edges state)
    state))

(defun mevedel-tasks-state (session)
  "Return SESSION's task state, read back from its storage the first time."
  (or (gethash session mevedel-tasks--states)
      (puthash session
               (or (when-let* (((mevedel-session-storage-p session))
                               (store (mevedel-session-store-handle session))
                               (text (cdr (assoc "tasks" (mevedel-core-store-info-get store))))
                               ((not (string-empty-p text))))
                     (mevedel-tasks--restore session text))
                   (mevedel-tasks-state--make))
               mevedel-tasks--states)))

(defun mevedel-tasks--save (session state)
  "Save SESSION's task STATE in its storage, when the session is durable."
  (when (mevedel-session-durable-p session)
    (condition-case err
        (mevedel-core-store-info-set
         (mevedel-session-store-handle session)
         `(("tasks" . ,(mevedel-tasks--print
                        (list :next-id (mevedel-tasks-state-next-id state)
                              :tasks (mevedel-tasks-state-tasks state)
                              :notes (mevedel-tasks-state-notes state))))))
      (error (display-warning 'mevedel (format "Cannot save the tasks: %s"
                                               (error-message-string err)))))))

(defun mevedel-tasks--changed (session state)
  "Save SESSION's changed STATE and tell the views."
  (mevedel-tasks--save session state)
  (run-hook-with-args 'mevedel-tasks-change-functions session))

;;;; Queries

(defun mevedel-tasks-list (session)
  "Return SESSION's tasks in creation order."
  (mevedel-tasks-state-tasks (mevedel-tasks-state session)))

(defun mevedel-tasks-notes (session)
  "Return SESSION's notes, an alist from owner to text."
  (mevedel-tasks-state-notes (mevedel-tasks-state session)))

(defun mevedel-tasks-open-p (task)
  "Return non-nil when TASK is not completed."
  (not (equal (plist-get task :status) "completed")))

(defun mevedel-tasks-any-open-p (session)
  "Return non-nil when SESSION has an open task."
  (cl-some #'mevedel-tasks-open-p (mevedel-tasks-list session)))

(defun mevedel-tasks--find (state id)
  "Return the task of STATE with ID, or nil."
  (cl-find id (mevedel-tasks-state-tasks state) :key (lambda (task) (plist-get task :id))))

(defun mevedel-tasks--drop-resolved-edges (state)
  "Remove STATE's blockedBy edges to tasks that are absent or completed."
  (let ((open (make-hash-table)))
    (dolist (task (mevedel-tasks-state-tasks state))
      (when (mevedel-tasks-open-p task) (puthash (plist-get task :id) t open)))
    (setf (mevedel-tasks-state-tasks state)
          (mapcar (lambda (task)
                    (let ((edges (plist-get task :blocked-by)))
                      (if (cl-every (lambda (id) (gethash id open)) edges)
                          task
                        (plist-put (copy-sequence task) :blocked-by
                                   (cl-remove-if-not (lambda (id) (gethash id open)) edges)))))
                  (mevedel-tasks-state-tasks state)))))

;;;; Writing

(defun mevedel-tasks--subject (value what)
  "Return VALUE as one non-blank line, or refuse WHAT."
  (unless (stringp value) (mevedel-tasks--fail "%s: subject must be a string" what))
  (let ((subject (string-trim (replace-regexp-in-string "[[:space:]\n]+" " " value))))
    (when (string-empty-p subject) (mevedel-tasks--fail "%s: subject is blank" what))
    subject))

(defun mevedel-tasks--checked-entry (session state caller entry n)
  "Return ENTRY, the Nth of a TaskWrite by CALLER in SESSION, checked.
STATE holds the tasks it may update.
The result is (:create PLIST) or (:update ID PLIST), PLIST holding
only what the entry sets; signal `mevedel-tasks-error' when it is bad."
  (let* ((what (format "tasks[%d]" n))
         (id (plist-get entry :id))
         (existing (and id (mevedel-tasks--find state id)))
         (changes nil))
    (when (and id (not (integerp id)))
      (mevedel-tasks--fail "%s: id must be an integer" what))
    (when (and id (not existing))
      (mevedel-tasks--fail "%s: there is no task %s (omit id to create one)" what id))
    (when (and existing (not (mevedel-tasks-may-write-p caller (plist-get existing :owner))))
      (mevedel-tasks--fail "%s: task %d belongs to %s; %s may not change it"
                           what id (plist-get existing :owner) caller))
    (when (or (plist-member entry :subject) (not existing))
      (setq changes (plist-put changes :subject
                               (mevedel-tasks--subject (plist-get entry :subject) what))))
    (when-let* ((status (plist-get entry :status)))
      (unless (member status mevedel-tasks-statuses)
        (mevedel-tasks--fail "%s: status must be pending, in_progress or completed" what))
      (setq changes (plist-put changes :status status)))
    (when (plist-member entry :activeForm)
      (let ((form (plist-get entry :activeForm)))
        (unless (stringp form) (mevedel-tasks--fail "%s: activeForm must be a string" what))
        (setq changes (plist-put changes :active-form
                                 (string-trim (replace-regexp-in-string "[[:space:]\n]+" " "
                                                                        form))))))
    (when (plist-member entry :owner)
      (let ((owner (mevedel-tasks-owner-check session (plist-get entry :owner))))
        (unless owner
          (mevedel-tasks--fail "%s: unknown owner %S" what (plist-get entry :owner)))
        (setq changes (plist-put changes :owner owner))))
    (when (plist-member entry :blockedBy)
      (let ((ids (append (plist-get entry :blockedBy) nil)))
        (unless (cl-every #'integerp ids)
          (mevedel-tasks--fail "%s: blockedBy must be task ids" what))
        (setq changes (plist-put changes :blocked-by (delete-dups (remove id ids))))))
    (if existing (list :update id changes) (list :create changes))))

(defun mevedel-tasks-write (session caller args)
  "Apply TaskWrite ARGS by CALLER (a canonical path) to SESSION's tasks.
ARGS hold :tasks (a vector of entries) and :note / :noteOwner.  Every
entry and the note owner are checked before anything changes; one bad
one signals `mevedel-tasks-error' and nothing is written.  Return the
IDs created and updated, in entry order."
  (let* ((state (mevedel-tasks-state session))
         (entries (append (plist-get args :tasks) nil))
         (checked (cl-loop for entry in entries for n from 1
                           collect (mevedel-tasks--checked-entry session state caller entry n)))
         (note (plist-get args :note))
         (note-owner (and (or note (plist-member args :noteOwner))
                          (if (plist-get args :noteOwner)
                              (mevedel-tasks-owner-check session (plist-get args :noteOwner))
                            caller))))
    (unless (or entries note)
      (mevedel-tasks--fail "Nothing to write: give tasks, a note, or both"))
    (when (and note (not (stringp note)))
      (mevedel-tasks--fail "note must be a string"))
    (when (and (or note (plist-get args :noteOwner)) (not note-owner))
      (mevedel-tasks--fail "unknown noteOwner %S" (plist-get args :noteOwner)))
    (when (and note-owner (not (mevedel-tasks-may-write-p caller note-owner)))
      (mevedel-tasks--fail "the note of %s is not %s's to change" note-owner caller))
    ;; Everything is valid: apply.
    (let ((ids nil))
      (dolist (change checked)
        (pcase change
          (`(:create ,plist)
           (let ((id (mevedel-tasks-state-next-id state)))
             (cl-incf (mevedel-tasks-state-next-id state))
             (setf (mevedel-tasks-state-tasks state)
                   (append (mevedel-tasks-state-tasks state)
                           (list (list :id id
                                       :subject (plist-get plist :subject)
                                       :status (or (plist-get plist :status) "pending")
                                       :active-form (plist-get plist :active-form)
                                       :owner (or (plist-get plist :owner) caller)
                                       :blocked-by (plist-get plist :blocked-by)))))
             (push id ids)))
          (`(:update ,id ,plist)
           (setf (mevedel-tasks-state-tasks state)
                 (mapcar (lambda (task)
                           (if (eql (plist-get task :id) id)
                               (let ((task (copy-sequence task)))
                                 (cl-loop for (key value) on plist by #'cddr
                                          do (setq task (plist-put task key value)))
                                 task)
                             task))
                         (mevedel-tasks-state-tasks state)))
           (push id ids))))
      (when note-owner
        (let ((text (string-trim (or note ""))))
          (setf (mevedel-tasks-state-notes state)
                (append (assoc-delete-all note-owner (mevedel-tasks-state-notes state))
                        (unless (string-empty-p text) (list (cons note-owner text)))))))
      (mevedel-tasks--drop-resolved-edges state)
      (setf (mevedel-tasks-state-written state) (mevedel-tasks-state-requests state))
      (mevedel-tasks--changed session state)
      (nreverse ids))))

(defun mevedel-tasks-settle-owner (session owner succeeded)
  "Settle OWNER's tasks in SESSION after its turn ended, SUCCEEDED or not.
The agents runtime calls this when an agent's turn settles (also when
it returns to retained idle).  Success completes OWNER's open tasks,
clears its note and unblocks what waited on them; failure or an
interruption leaves them open for recovery.  Return the IDs completed."
  (when succeeded
    (let* ((state (mevedel-tasks-state session))
           (done nil))
      (setf (mevedel-tasks-state-tasks state)
            (mapcar (lambda (task)
                      (if (and (equal (plist-get task :owner) owner)
                               (mevedel-tasks-open-p task))
                          (progn (push (plist-get task :id) done)
                                 (plist-put (copy-sequence task) :status "completed"))
                        task))
                    (mevedel-tasks-state-tasks state)))
      (setf (mevedel-tasks-state-notes state)
            (assoc-delete-all owner (mevedel-tasks-state-notes state)))
      (mevedel-tasks--drop-resolved-edges state)
      (mevedel-tasks--changed session state)
      (nreverse done))))

;;;; What the model reads

(defun mevedel-tasks-blocked-p (task)
  "Return non-nil when the open TASK waits on an open task."
  (and (plist-get task :blocked-by) (not (equal (plist-get task :status) "in_progress"))))

(defun mevedel-tasks-owners (session)
  "Return SESSION's task and note owners, the main session first."
  (let ((owners (delete-dups (append (mapcar (lambda (task) (plist-get task :owner))
                                             (mevedel-tasks-list session))
                                     (mapcar #'car (mevedel-tasks-notes session))))))
    (if (member "/root" owners) (cons "/root" (delete "/root" owners)) owners)))

(defun mevedel-tasks-list-text (session)
  "Return SESSION's tasks in the text TaskList gives the model.
Owners are canonical paths with full subjects; agents' groups say they
are retained agents' work."
  (let ((tasks (mevedel-tasks-list session))
        (notes (mevedel-tasks-notes session)))
    (if (and (null tasks) (null notes))
        "No tasks yet.  Create them with TaskWrite (omit id)."
      (mapconcat
       (lambda (owner)
         (concat
          (cond ((equal owner "/root") "/root (this session's own work):\n")
                ((mevedel-tasks-agent-path-p owner)
                 (format "%s (the retained agent %s's work):\n" owner owner))
                (t (format "%s (a shared bucket):\n" owner)))
          (when-let* ((note (cdr (assoc owner notes))))
            (format "  note: %s\n" note))
          (mapconcat
           (lambda (task)
             (format "  #%d [%s] %s%s%s\n" (plist-get task :id) (plist-get task :status)
                     (plist-get task :subject)
                     (if-let* ((form (plist-get task :active-form)))
                         (if (string-empty-p form) "" (format " (active: %s)" form))
                       "")
                     (if (plist-get task :blocked-by)
                         (format " (blocked by %s)"
                                 (mapconcat (lambda (id) (format "#%d" id))
                                            (plist-get task :blocked-by) ", "))
                       "")))
           (cl-remove-if-not (lambda (task) (equal (plist-get task :owner) owner)) tasks)
           "")))
       (mevedel-tasks-owners session) "\n"))))

(defun mevedel-tasks-nudge (session)
  "Count a model request of SESSION; return a reminder when one is due, else nil.
It is due when a task is open, none was written for
`mevedel-tasks-nudge-interval' requests and none was sent for as many."
  (let* ((state (mevedel-tasks-state session))
         (now (cl-incf (mevedel-tasks-state-requests state))))
    (when (and (mevedel-tasks-any-open-p session)
               (>= (- now (mevedel-tasks-state-written state)) mevedel-tasks-nudge-interval)
               (>= (- now (mevedel-tasks-state-nudged state)) mevedel-tasks-nudge-interval))
      (setf (mevedel-tasks-state-nudged state) now)
      (concat "<system-reminder>The task list has not changed for a while.  If you are \
working on these tasks, update them with TaskWrite (mark finished ones completed); ignore \
this if they are current.  Never mention this reminder to the user.\n\n"
              (mevedel-tasks-list-text session)
              "</system-reminder>"))))

(provide 'mevedel-tasks)
;;; mevedel-tasks.el ends here
