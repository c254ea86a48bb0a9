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
;; Repairs, invalid calls and abandoned candidates are recorded, without
;; values, by mevedel-tool-repair-diagnostics.el.

;;; Code:

(require 'cl-lib)
(require 'mevedel-core)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-repair-diagnostics)

(defvar mevedel-tool-repair-gptel-context nil
  "Plist (:backend NAME :model NAME) of the gptel request running tools.
The gptel adapter binds it while gptel runs a response's calls; repair
events record it.")

(defcustom mevedel-tool-input-repair-enabled t
  "Non-nil means invalid model-produced tool input may be repaired.
Nil keeps validation and telemetry but never changes arguments."
  :type 'boolean
  :group 'mevedel-tool)

(defvar mevedel-tool-repair-origin "/root"
  "Canonical path of the conversation whose tool calls run now.
Agents bind this to their own path, such as /root/explorer.")

;;;; JSON-faithful arguments

(defun mevedel-tool-json-empty-object ()
  "Return a new empty JSON object value (an empty hash table).
It stands for {} wherever nil would be ambiguous: inside argument
values decoded from a provider, nil could also mean null or absent."
  (make-hash-table :test #'eq :size 1))

(defun mevedel-tool-json-empty-object-p (value)
  "Return non-nil when VALUE is the explicit empty JSON object."
  (and (hash-table-p value) (zerop (hash-table-count value))))

(defun mevedel-tool-json-encode (args)
  "Return JSON text for the JSON-faithful argument plist ARGS.
Signal `mevedel-tool-error' when ARGS holds a value JSON cannot hold."
  (condition-case err
      (json-serialize args :null-object :null :false-object :json-false)
    ((wrong-type-argument json-error)
     (signal 'mevedel-tool-error
             (list (format "Tool arguments are not JSON-representable: %S" (cdr err)))))))

(defun mevedel-tool-json-restore-empty-objects (value)
  "Return VALUE with every nested nil (a decoded {}) made explicit.
VALUE is decoded JSON: plists for objects, vectors for arrays, and
:null for null, so a nil below the top level can only be {}.  The top
level (the argument plist itself) is kept as a plist."
  (cond
   ((vectorp value)
    (cl-map 'vector #'mevedel-tool-json--restore-element value))
   ((consp value)
    (cl-loop for (key val) on value by #'cddr
             append (list key (mevedel-tool-json--restore-element val))))
   (t value)))

(defun mevedel-tool-json--restore-element (value)
  "Return VALUE, an element or property value, with {} made explicit."
  (if (null value)
      (mevedel-tool-json-empty-object)
    (mevedel-tool-json-restore-empty-objects value)))

(defun mevedel-tool-json-decode (json)
  "Return the JSON-faithful argument plist of the JSON text JSON."
  (let ((value (json-parse-string json :object-type 'plist :null-object :null
                                  :false-object :json-false)))
    ;; Without an empty object anywhere there is nothing to restore.
    (if (string-search "{}" json)
        (mevedel-tool-json-restore-empty-objects value)
      value)))

(defun mevedel-tool-handler-args (args)
  "Return ARGS as handlers receive them: false and {} become nil.
Arrays stay vectors; JSON null cannot occur in validated arguments."
  (cond
   ((or (eq args :json-false) (mevedel-tool-json-empty-object-p args)) nil)
   ((vectorp args) (cl-map 'vector #'mevedel-tool-handler-args args))
   ((consp args)
    (cl-loop for (key val) on args by #'cddr
             append (list key (mevedel-tool-handler-args val))))
   (t args)))

;;;; Checking a call

(defun mevedel-tool-repair-check (tool args &optional model-produced)
  "Validate ARGS (JSON-faithful plist) for TOOL; repair if allowed.
Repair is attempted only when MODEL-PRODUCED is non-nil and
`mevedel-tool-input-repair-enabled' is non-nil.  Return a plist:
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
                 (mevedel-tool-json-encode args)
                 (and model-produced mevedel-tool-input-repair-enabled))))
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

(provide 'mevedel-tool-repair)
;;; mevedel-tool-repair.el ends here
