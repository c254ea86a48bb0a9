;;; mevedel-tool-repair-diagnostics.el --- Redacted repair audit log  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Repairs, invalid calls and abandoned candidates are recorded as
;; redacted events: backend, model, tool, origin path, outcome, rule
;; ids, schema paths, before/after shape names, execution state and
;; result class.  Never argument values, paths, commands, prompts,
;; schemas, validation messages or results.  Valid calls are not
;; recorded.
;;
;; Each session keeps its newest `mevedel-tool-repair-log-limit' events
;; in memory.  With `mevedel-tool-repair-persist-log', events are also
;; appended, one printed plist per line, to <session>/repair-log.el once
;; the session has a directory; events recorded before that are
;; backfilled when `mevedel-tool-repair-log-materialize' names it.
;;
;; Sessions: a session is any object compared with `eq'.  Until session
;; storage exists, `mevedel-tool-repair-session-function' maps a call to
;; its session (by default the buffer the call runs in); the session
;; layer rebinds it and calls `mevedel-tool-repair-log-materialize' and
;; `mevedel-tool-repair-log-flush'.

;;; Code:

(require 'cl-lib)

(defcustom mevedel-tool-repair-log-limit 200
  "How many repair events each session keeps in memory."
  :type 'natnum
  :group 'mevedel-tool)

(defcustom mevedel-tool-repair-persist-log nil
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
  (directory nil :documentation "Session directory once materialized.")
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

(defun mevedel-tool-repair-record (event &optional session)
  "Record the redacted EVENT (a plist) in SESSION's log.
SESSION defaults to what `mevedel-tool-repair-session-function'
returns.  Never signals: a failure is reported as a warning, because
telemetry must not stop a tool call."
  (condition-case err
      (let* ((log (mevedel-tool-repair--log
                   (or session (funcall mevedel-tool-repair-session-function))))
             (limit mevedel-tool-repair-log-limit))
        (setf (mevedel-tool-repair--log-events log)
              (take limit (cons event (mevedel-tool-repair--log-events log))))
        (when mevedel-tool-repair-persist-log
          (setf (mevedel-tool-repair--log-pending log)
                (take limit (cons event (mevedel-tool-repair--log-pending log))))
          (when (mevedel-tool-repair--log-directory log)
            (mevedel-tool-repair--append log))))
    (error (display-warning 'mevedel
                            (format "Recording a tool repair event failed: %s"
                                    (error-message-string err))
                            :warning))))

(defun mevedel-tool-repair-log-materialize (session directory)
  "Tell SESSION's log that the session now lives in DIRECTORY.
Events recorded so far (bounded by `mevedel-tool-repair-log-limit')
are appended to DIRECTORY/repair-log.el when
`mevedel-tool-repair-persist-log' is non-nil.  Return non-nil when
nothing is left waiting."
  (let ((log (mevedel-tool-repair--log session)))
    (setf (mevedel-tool-repair--log-directory log) directory)
    (mevedel-tool-repair--append log)))

(defun mevedel-tool-repair-log-flush (session)
  "Retry appending SESSION's queued events, as after a successful save.
Return non-nil when nothing is left waiting."
  (when-let* ((log (gethash session mevedel-tool-repair--logs)))
    (mevedel-tool-repair--append log)))

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

(provide 'mevedel-tool-repair-diagnostics)
;;; mevedel-tool-repair-diagnostics.el ends here
