;;; mevedel-tool-tasks.el --- TaskWrite and TaskList  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The model's checklist: TaskWrite creates (no id) and updates (an
;; id) tasks and owner notes, TaskList reads them back.  Both are
;; specialists (called through ToolCall; the native roster stays
;; short) and touch only the session's task list (mevedel-tasks.el),
;; so they are read-only for permissions and Plan mode.  The nudge
;; reminder joins a request that continues after tools.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)
(require 'mevedel-pipeline)
(require 'mevedel-tasks)

(declare-function mevedel-chat-p "mevedel-chat" (object))
(declare-function mevedel-chat-session "mevedel-chat" (chat))
(defvar mevedel-gptel-continuation-functions)

(defconst mevedel-tool-tasks-write-description
  "Create and update the session's task checklist, so you and the user can track progress.
Use it for work with three or more steps, or when the user lists several
things: create the tasks first, mark one in_progress before you start it and
completed as soon as it is done (never batch completions).  Omit id to create
a task (subject required); give an existing id to update it (only the fields
you pass change).  subject is one line; activeForm is the present-continuous
form shown while it runs (\"Running the tests\").  owner defaults to you;
blockedBy lists task ids this one waits for.  note/noteOwner set a short
status note for an owner (an empty note clears it).  The whole call is
refused, nothing changed, if any entry is invalid."
  "What the model reads about TaskWrite.")

(defun mevedel-tool-tasks--session ()
  "Return the session of the call whose handler is running."
  (let ((context (mevedel-pipeline-current-context)))
    (or (plist-get context :session)
        (error "TaskWrite needs a session"))))

(defun mevedel-tool-tasks-write (args)
  "Apply the TaskWrite ARGS; return the task list for the model."
  (let* ((context (mevedel-pipeline-current-context))
         (session (mevedel-tool-tasks--session))
         (caller (mevedel-tasks-caller context)))
    (condition-case err
        (let ((ids (mevedel-tasks-write session caller args)))
          (concat (if ids
                      (format "Updated tasks %s.\n\n"
                              (mapconcat (lambda (id) (format "#%d" id)) ids ", "))
                    "Note updated.\n\n")
                  (mevedel-tasks-list-text session)))
      (mevedel-tasks-error
       (format "Error: %s; nothing was changed" (error-message-string err))))))

(defun mevedel-tool-tasks-list (args)
  "Return the session's tasks for the model; ARGS are none."
  (ignore args)
  (mevedel-tasks-list-text (mevedel-tool-tasks--session)))

(defconst mevedel-tool-tasks--status-words
  '(("in_progress" . "in progress") ("pending" . "to do") ("completed" . "done"))
  "How the task list's row names each status, in the order it counts them.")

(defun mevedel-tool-tasks--summary (result)
  "Return the task list's counts after the TaskWrite that returned RESULT.
\"Tasks: 2 in progress, 1 to do\", from the list in RESULT."
  (cond
   ((null result) "Updating the task list")
   ((string-prefix-p "Error:" result) "Task list not changed")
   (t (let* ((counts (mapcar (lambda (entry)
                               (let ((regexp (concat "^  #[0-9]+ \\[" (car entry) "\\]"))
                                     (start 0) (n 0))
                                 (while (string-match regexp result start)
                                   (setq n (1+ n) start (match-end 0)))
                                 (cons (cdr entry) n)))
                             mevedel-tool-tasks--status-words))
             (shown (cl-remove-if #'zerop counts :key #'cdr)))
        (concat "Tasks: "
                (if shown
                    (mapconcat (lambda (count) (format "%d %s" (cdr count) (car count)))
                               shown ", ")
                  "none"))))))

(defun mevedel-tool-tasks-render-write (_name _args result _render-data)
  "Render a TaskWrite call by its RESULT.
The row says what the list holds now; expanded, it shows the list."
  (list :header (mevedel-tool-tasks--summary result)
        :body (unless mevedel-tool-render-summary-only result)
        :expandable-p (and result (not (string-empty-p result)))
        :initially-collapsed-p t))

(mevedel-define-tool "TaskWrite"
  :category "tasks"
  :description mevedel-tool-tasks-write-description
  :summary "Plan/checklist tracking: create and update tasks with status, owner and dependencies."
  :args ((tasks array :optional "Tasks to create (no id) or update (id)."
                :items (:type object
                              :properties
                              (id (:type integer :description "An existing task's id: update it.")
                                  subject (:type string :description "One line saying what to do.")
                                  status (:type string :enum ("pending" "in_progress" "completed"))
                                  activeForm (:type string :description "Shown while it runs.")
                                  owner (:type string :description "/root, an agent path or a bucket name.")
                                  blockedBy (:type array :items integer
                                                   :description "Ids of tasks this one waits for."))))
         (note string :optional "A short status note for noteOwner; empty clears it.")
         (noteOwner string :optional "Whose note (default: you)."))
  :function #'mevedel-tool-tasks-write
  :read-only-p t
  :renderer '((success . mevedel-tool-tasks-render-write)))

(mevedel-define-tool "TaskList"
  :category "tasks"
  :description "List the session's tasks by owner, with ids, statuses, blockers and notes."
  :summary "Plan/checklist tracking: list every owner's tasks, dependencies and notes."
  :args ()
  :function #'mevedel-tool-tasks-list
  :read-only-p t)

;;;; The nudge

(defun mevedel-tool-tasks--nudge (info)
  "Return the task reminder for the request INFO continues, when one is due.
A `mevedel-gptel-continuation-functions' member: each continued
request counts towards `mevedel-tasks-nudge-interval'."
  (when-let* ((chat (plist-get info :context))
              ((mevedel-chat-p chat))
              (text (mevedel-tasks-nudge (mevedel-chat-session chat))))
    ;; Marked as mail: the model reads it, the view does not show it.
    (list (propertize text 'mevedel-mail t))))

(add-hook 'mevedel-gptel-continuation-functions #'mevedel-tool-tasks--nudge 90)

(provide 'mevedel-tool-tasks)
;;; mevedel-tool-tasks.el ends here
