;;; mevedel-tool-repair.el --- Validate and repair raw model tool calls  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Every raw model call is checked in the native module against its
;; tool's compiled schema before anything runs.  Valid input passes
;; untouched.  Invalid model-produced input gets one atomic pass of the
;; repair catalogue (omit null optionals, parse exact JSON strings, wrap
;; singletons, {} to [] for optional arrays, unwrap Markdown auto-links
;; in paths, clamp to declared bounds); the candidate is committed only
;; when it validates.  Otherwise the model gets bounded, value-free
;; guidance and nothing runs.  Direct programmatic calls are only
;; validated.
;;
;; A committed repair adds one corrective note to the tool's result.
;;
;; Repairs, invalid calls and abandoned candidates are recorded in the
;; repair log as redacted events: backend, model, tool, origin path,
;; outcome, rule ids, schema paths, before/after shape names, execution
;; state and result class.  Never argument values, paths, commands,
;; prompts, schemas, validation messages or results.  Valid calls are
;; not recorded.
;;
;; Each session keeps its newest `mevedel-tool-repair-log-limit' events
;; in memory.  With `mevedel-tool-repair-persist-log', events are also
;; appended, one printed plist per line, to <session>/repair-log.el once
;; the session has storage: the pipeline passes the session's directory
;; with each event from then on, and events recorded before are written
;; as soon as that storage is made.  Each event names the agent whose
;; call it was (its data buffer's `mevedel-tool-repair-origin').  Calls outside any session are logged under the buffer they run
;; in (`mevedel-tool-repair-session-function') and never persisted.

;;; Code:

(require 'cl-lib)
(require 'mevedel-core)
(require 'mevedel-tool-registry)

(defvar mevedel-tool-repair-gptel-context nil
  "Plist (:backend NAME :model NAME) of the gptel request running tools.
The gptel adapter binds it while gptel runs a response's calls; repair
events record it.")

(defcustom mevedel-tool-repair-enabled t
  "Non-nil means invalid model-produced tool input may be repaired.
Nil keeps validation and telemetry but never changes arguments."
  :type 'boolean
  :group 'mevedel-tool)

(defvar mevedel-tool-repair-origin "/root"
  "Canonical path of the conversation whose tool calls run now.
A chat's data buffer sets it locally to its agent's path, such as
/root/explorer; the pipeline reads it there for each call.")

;;;; JSON-faithful arguments

(defun mevedel-tool-repair-json-empty-object ()
  "Return a new empty JSON object value (an empty hash table).
It stands for {} wherever nil would be ambiguous: inside argument
values decoded from a provider, nil could also mean null or absent."
  (make-hash-table :test #'eq :size 1))

(defun mevedel-tool-repair-json-empty-object-p (value)
  "Return non-nil when VALUE is the explicit empty JSON object."
  (and (hash-table-p value) (zerop (hash-table-count value))))

(defun mevedel-tool-repair-json-encode (args)
  "Return JSON text for the JSON-faithful argument plist ARGS.
Signal `mevedel-tool-error' when ARGS holds a value JSON cannot hold."
  (condition-case err
      (json-serialize args :null-object :null :false-object :json-false)
    ((wrong-type-argument json-error)
     (signal 'mevedel-tool-error
             (list (format "Tool arguments are not JSON-representable: %S" (cdr err)))))))

(defun mevedel-tool-repair-json-restore-empty-objects (value)
  "Return VALUE with every nested nil (a decoded {}) made explicit.
VALUE is decoded JSON: plists for objects, vectors for arrays, and
:null for null, so a nil below the top level can only be {}.  The top
level (the argument plist itself) is kept as a plist."
  (cond
   ((vectorp value)
    (cl-map 'vector #'mevedel-tool-repair--json-restore-element value))
   ((consp value)
    (cl-loop for (key val) on value by #'cddr
             append (list key (mevedel-tool-repair--json-restore-element val))))
   (t value)))

(defun mevedel-tool-repair--json-restore-element (value)
  "Return VALUE, an element or property value, with {} made explicit."
  (if (null value)
      (mevedel-tool-repair-json-empty-object)
    (mevedel-tool-repair-json-restore-empty-objects value)))

(defun mevedel-tool-repair-json-decode (json)
  "Return the JSON-faithful argument plist of the JSON text JSON."
  (let ((value (json-parse-string json :object-type 'plist :null-object :null
                                  :false-object :json-false)))
    ;; Without an empty object anywhere there is nothing to restore.
    (if (string-search "{}" json)
        (mevedel-tool-repair-json-restore-empty-objects value)
      value)))

(defun mevedel-tool-repair-handler-args (args)
  "Return ARGS as handlers receive them: false and {} become nil.
Arrays stay vectors; JSON null cannot occur in validated arguments."
  (cond
   ((or (eq args :json-false) (mevedel-tool-repair-json-empty-object-p args)) nil)
   ((vectorp args) (cl-map 'vector #'mevedel-tool-repair-handler-args args))
   ((consp args)
    (cl-loop for (key val) on args by #'cddr
             append (list key (mevedel-tool-repair-handler-args val))))
   (t args)))

;;;; Checking a call

(defun mevedel-tool-repair-check (tool args &optional model-produced)
  "Validate ARGS (JSON-faithful plist) for TOOL; repair if allowed.
Repair is attempted only when MODEL-PRODUCED is non-nil and
`mevedel-tool-repair-enabled' is non-nil.  Return a plist:
  (:outcome valid :args ARGS)
  (:outcome repaired :args NEW-ARGS :note NOTE :audit AUDIT)
  (:outcome invalid :guidance TEXT :issues ISSUES)
  (:outcome abandoned :guidance TEXT :issues ISSUES :audit AUDIT)
AUDIT is ((RULE-NUMBER RULE-ID INSTANCE-PATH SCHEMA-PATH BEFORE AFTER)
...), RULE-ID, BEFORE and AFTER (shape names) being symbols; ISSUES is
\((INSTANCE-PATH SCHEMA-PATH) ...), described in words by the guidance.
NEW-ARGS come from the module already JSON-faithful."
  (let ((result (mevedel-core-schema-check
                 (mevedel-tool-handle tool)
                 (mevedel-tool-repair-json-encode args)
                 (and model-produced mevedel-tool-repair-enabled))))
    (pcase result
      ('t (list :outcome 'valid :args args))
      (`(repaired ,new-args ,note ,audit)
       (list :outcome 'repaired :args new-args :note note :audit audit))
      (`(invalid ,guidance ,issues)
       (list :outcome 'invalid :guidance guidance :issues issues))
      (`(abandoned ,guidance ,issues ,audit)
       (list :outcome 'abandoned :guidance guidance :issues issues :audit audit)))))

(defun mevedel-tool-repair-attach-note (result note)
  "Return RESULT with the corrective NOTE appended (when NOTE is non-nil).
Applies to error results too; a non-string RESULT is printed first."
  (cond ((null note) result)
        ((stringp result) (concat result "\n\n" note))
        (t (format "%s\n\n%s" result note))))

;;;; Repair events

(defun mevedel-tool-repair-event (tool check)
  "Return the redacted event for CHECK of TOOL, or nil for a valid call."
  (let ((outcome (plist-get check :outcome))
        (context (bound-and-true-p mevedel-tool-repair-gptel-context)))
    (unless (eq outcome 'valid)
      (list :time (float-time)
            :backend (plist-get context :backend)
            :model (plist-get context :model)
            :tool (mevedel-tool-identity tool)
            :origin mevedel-tool-repair-origin
            :outcome outcome
            :rules (mapcar #'cadr (plist-get check :audit))
            :schema-paths (delete-dups
                           (append (mapcar #'cadddr (plist-get check :audit))
                                   (mapcar #'cadr (plist-get check :issues))))
            :shapes (mapcar (lambda (a) (cons (nth 4 a) (nth 5 a)))
                            (plist-get check :audit))))))

;;;; Repair log

(defcustom mevedel-tool-repair-log-limit 200
  "How many repair events each session keeps in memory."
  :type 'natnum
  :group 'mevedel-tool)

(defcustom mevedel-tool-repair-persist-log t
  "Non-nil means repair events are also appended to <session>/repair-log.el."
  :type 'boolean
  :group 'mevedel-tool)

(defvar mevedel-tool-repair-session-function #'current-buffer
  "Function of no arguments returning the session of the current call.")

(defconst mevedel-tool-repair-log-file-name "repair-log.el"
  "Name of the persistent repair log inside a session directory.")

(cl-defstruct (mevedel-tool-repair--log (:constructor mevedel-tool-repair--log-make)
                                        (:copier nil))
  "One session's repair log."
  (events nil :documentation "Newest first, at most the limit.")
  (directory nil :documentation "Session directory once it has storage.")
  (pending nil :documentation "Events not yet appended, newest first."))

(defvar mevedel-tool-repair--logs (make-hash-table :test #'eq :weakness 'key)
  "Session -> `mevedel-tool-repair--log'.")

(defun mevedel-tool-repair--log (session)
  "Return SESSION's log, creating it."
  (or (gethash session mevedel-tool-repair--logs)
      (puthash session (mevedel-tool-repair--log-make) mevedel-tool-repair--logs)))

(defun mevedel-tool-repair-session-log (session)
  "Return SESSION's in-memory repair events, oldest first."
  (when-let* ((log (gethash session mevedel-tool-repair--logs)))
    (reverse (mevedel-tool-repair--log-events log))))

(defun mevedel-tool-repair-log-forget (session)
  "Drop SESSION's in-memory log and anything not yet persisted."
  (remhash session mevedel-tool-repair--logs))

(defun mevedel-tool-repair-record (event &optional session directory)
  "Record the redacted EVENT (a plist) in SESSION's log.
SESSION defaults to what `mevedel-tool-repair-session-function'
returns.  DIRECTORY, given once SESSION has storage, is where its log
persists: with `mevedel-tool-repair-persist-log', the events not yet
written (bounded by `mevedel-tool-repair-log-limit') are appended to
DIRECTORY/repair-log.el, and kept for the next event when that fails.
Never signals: a failure is reported as a warning, because telemetry
must not stop a tool call."
  (condition-case err
      (let* ((log (mevedel-tool-repair--log
                   (or session (funcall mevedel-tool-repair-session-function))))
             (limit mevedel-tool-repair-log-limit))
        (setf (mevedel-tool-repair--log-events log)
              (take limit (cons event (mevedel-tool-repair--log-events log))))
        (when directory
          (setf (mevedel-tool-repair--log-directory log) directory))
        (when mevedel-tool-repair-persist-log
          (setf (mevedel-tool-repair--log-pending log)
                (take limit (cons event (mevedel-tool-repair--log-pending log))))
          (when (mevedel-tool-repair--log-directory log)
            (mevedel-tool-repair--append log))))
    (error (display-warning 'mevedel
                            (format "Recording a tool repair event failed: %s"
                                    (error-message-string err))
                            :warning))))

(defun mevedel-tool-repair-log-materialized (session directory)
  "Note that SESSION's storage now exists in DIRECTORY.
The events SESSION logged before it had storage are written now (with
`mevedel-tool-repair-persist-log'), not only with its next event."
  (when-let* ((log (gethash session mevedel-tool-repair--logs)))
    (setf (mevedel-tool-repair--log-directory log) directory)
    (when mevedel-tool-repair-persist-log
      (mevedel-tool-repair--append log))))

(defun mevedel-tool-repair--append (log)
  "Append LOG's pending events to its file; keep them when that fails.
The file is only appended to: earlier entries are never reread and
the directory is not checked first.  Return non-nil on success."
  (let ((pending (mevedel-tool-repair--log-pending log))
        (directory (mevedel-tool-repair--log-directory log)))
    (cond
     ((null pending) t)
     ((null directory) nil)
     (t
      (condition-case err
          (let ((coding-system-for-write 'utf-8-unix)
                (print-length nil) (print-level nil)
                (print-escape-newlines t) (print-escape-control-characters t))
            (write-region (mapconcat (lambda (event) (concat (prin1-to-string event) "\n"))
                                     (reverse pending) "")
                          nil (expand-file-name mevedel-tool-repair-log-file-name directory)
                          'append 'silent)
            (setf (mevedel-tool-repair--log-pending log) nil)
            t)
        (error
         (display-warning 'mevedel
                          (format "Appending to the repair log in %s failed (will retry): %s"
                                  directory (error-message-string err))
                          :warning)
         nil))))))

(defun mevedel-tool-repair-read-log-file (directory)
  "Return the events persisted in DIRECTORY/repair-log.el, oldest first.
A torn final line (from a crash) is skipped."
  (let ((file (expand-file-name mevedel-tool-repair-log-file-name directory)))
    (when (file-exists-p file)
      (with-temp-buffer
        (let ((coding-system-for-read 'utf-8-unix))
          (insert-file-contents file))
        (let (events)
          (while (not (eobp))
            (let ((line (buffer-substring-no-properties (point) (line-end-position))))
              (condition-case nil
                  (let ((event (car (read-from-string line))))
                    (when (consp event) (push event events)))
                ((invalid-read-syntax end-of-file) nil)))
            (forward-line 1))
          (nreverse events))))))

(provide 'mevedel-tool-repair)
;;; mevedel-tool-repair.el ends here
