;;; mevedel-remote-exec.el --- Run a remote workspace's commands on its host  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; In a remote workspace, Bash, Monitor, WriteStdin and StopExecution
;; work on executions of the native module like anywhere else, but the
;; execution is relayed (spec :relay t): the module runs no local child
;; and publishes `exec-relay' events instead.  This file answers them.
;; A "launch" starts the command on the host, through the remote helper
;; when it runs there (`mevedel-remote-helper-exec-stream', confined by
;; the host's sandbox under the session's `mevedel-sandbox-mode'), else
;; through TRAMP's `make-process', unconfined.  Output, the exit and
;; failures go back into the module, which spools them locally, so
;; yields, artifact:// output, Monitor lines, stops and mail are the
;; module's as for a local command.  "signal" and "stdin" events reach
;; the running command the same two ways.
;;
;; A host where commands run unconfined under `best-effort' is said so
;; once on the session's first result (`mevedel-remote-exec-note') and
;; in the session's header (`mevedel-remote-exec-header-text').

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-remote)
(require 'mevedel-remote-helper)

(defvar mevedel-sandbox-mode)

;;;; State

(cl-defstruct (mevedel-remote-exec--run
               (:constructor mevedel-remote-exec--run-make)
               (:copier nil))
  "One relayed command on its host."
  session id host directory
  ;; The helper's connection and run id, or TRAMP's process.
  conn run process
  ;; Signals and input that came before the command's start.
  (queue nil)
  done)

(defvar mevedel-remote-exec--asked (make-hash-table :test #'equal)
  "Relayed executions not launched yet: (SESSION . ID) to (:root :mode).")

(defvar mevedel-remote-exec--runs (make-hash-table :test #'equal)
  "Launched relayed executions: (SESSION . ID) to their run.")

(defvar mevedel-remote-exec--unconfined (make-hash-table :test #'equal)
  "Hosts whose commands run unconfined: host to the reason.")

(defvar mevedel-remote-exec--told (make-hash-table :test #'equal)
  "Sessions whose model was told that their host's commands run unconfined.")

;;;; Starting

(defun mevedel-remote-exec-register (session id root mode)
  "Remember how relayed execution ID of SESSION is to run on its host.
ROOT is the writable root (the workspace, a TRAMP name) and MODE the
session's `mevedel-sandbox-mode'; its launch event comes later."
  (puthash (cons session id) (list :root root :mode mode) mevedel-remote-exec--asked))

(defun mevedel-remote-exec--on-relay (data)
  "Carry out the module's `exec-relay' event DATA.
A launch that cannot even begin is reported failed: the execution
waits for its command's end otherwise."
  (let ((key (cons (plist-get data :session) (plist-get data :id))))
    (pcase (plist-get data :op)
      ("launch"
       (condition-case err
           (mevedel-remote-exec--launch key data)
         (error (mevedel-core-exec-relay-failed
                 (car key) (cdr key)
                 (format "the command could not be started: %s" (error-message-string err))))))
      ("signal" (mevedel-remote-exec--send key (list :signal (plist-get data :signal))))
      ("stdin" (mevedel-remote-exec--send key (list :stdin (plist-get data :data)))))))

(mevedel-core-register-event-handler 'exec-relay #'mevedel-remote-exec--on-relay)

(defun mevedel-remote-exec--launch (key data)
  "Start the command of launch event DATA for execution KEY on its host."
  (let* ((asked (prog1 (gethash key mevedel-remote-exec--asked)
                  (remhash key mevedel-remote-exec--asked)))
         (directory (file-name-as-directory (plist-get data :cwd)))
         (host (mevedel-remote-host directory))
         (run (mevedel-remote-exec--run-make :session (car key) :id (cdr key) :host host
                                             :directory directory))
         (mode (or (plist-get asked :mode) mevedel-sandbox-mode))
         (root (or (plist-get asked :root) directory)))
    (puthash key run mevedel-remote-exec--runs)
    (condition-case err
        (mevedel-remote-with-helper
         directory
         (lambda (conn) (mevedel-remote-exec--by-helper run conn data mode root))
         (lambda () (mevedel-remote-exec--by-tramp run data mode directory))
         host)
      (error (mevedel-remote-exec--failed run (error-message-string err))))))

(defun mevedel-remote-exec--false-p (value)
  "Return non-nil when the helper's JSON VALUE is false or absent."
  (memq value '(nil :false :json-false)))

(defun mevedel-remote-exec--boundary (answer mode)
  "Return the boundary name of the helper's start ANSWER under MODE."
  (let ((confinement (plist-get answer :confinement)))
    (cond ((not (mevedel-remote-exec--false-p (plist-get answer :confined)))
           (pcase confinement
             ("bubblewrap and Landlock" "bwrap-landlock")
             ("bubblewrap" "bwrap")
             ("Landlock" "landlock")
             (_ "bwrap-landlock")))
          ((eq mode 'off) "off")
          (t "unconfined"))))

(defun mevedel-remote-exec--by-helper (run conn data mode root)
  "Start RUN's command of launch event DATA through the helper on CONN.
MODE is the sandbox mode and ROOT the writable root."
  (let ((session (mevedel-remote-exec--run-session run))
        (id (mevedel-remote-exec--run-id run))
        (tty (plist-get data :tty)))
    (mevedel-remote-helper-exec-stream
     conn
     (list :argv (plist-get data :argv)
           :directory (mevedel-remote-local-name (plist-get data :cwd))
           :env (plist-get data :env)
           :sandbox mode
           :writable (list (mevedel-remote-local-name (directory-file-name root)))
           :tty tty)
     (list :started
           (lambda (answer)
             (setf (mevedel-remote-exec--run-conn run) conn
                   (mevedel-remote-exec--run-run run) (plist-get answer :run))
             (let ((boundary (mevedel-remote-exec--boundary answer mode))
                   (why (plist-get answer :unconfined_reason)))
               (mevedel-remote-exec--started run boundary (and (stringp why) why)))
             ;; A pipe-mode command's stdin is closed, as a local one's.
             (unless tty
               (mevedel-remote-helper-exec-write-stdin conn (plist-get answer :run) "" t #'ignore))
             (mevedel-remote-exec--flush run))
           :output (lambda (chunk) (mevedel-core-exec-relay-output session id chunk))
           :exited (lambda (code signal) (mevedel-remote-exec--exited run code signal))
           :failed (lambda (message) (mevedel-remote-exec--failed run (format "%s" message)))))))

(defun mevedel-remote-exec--by-tramp (run data mode directory)
  "Start RUN's command of launch event DATA with TRAMP in DIRECTORY.
The helper does not run on the host, so nothing can confine the
command: MODE `required' refuses it, naming why."
  (let* ((host (mevedel-remote-exec--run-host run))
         (why (format "the mevedel helper does not run on %s%s" host
                      (if-let* ((problem (mevedel-remote-helper-problem directory)))
                          (concat ": " problem)
                        "")))
         (session (mevedel-remote-exec--run-session run))
         (id (mevedel-remote-exec--run-id run))
         (tty (plist-get data :tty)))
    (cond
     ((mevedel-remote-exec--run-done run))
     ;; Without a known problem of the helper, the host was not reached.
     ((and (not (mevedel-remote-helper-problem directory))
           (condition-case err
               (progn (mevedel-remote-check directory) nil)
             (error (mevedel-remote-exec--failed run (error-message-string err)) t))))
     ((eq mode 'required)
      (mevedel-remote-exec--failed
       run (format "the sandbox is required, but commands on %s cannot be confined: %s"
                   host why)))
     (t
      (condition-case err
          (let ((process
                 (mevedel-remote-call
                  directory
                  (lambda ()
                    (let ((default-directory directory))
                      (make-process
                       :name (format "mevedel-relay-%s" id)
                       :command (append (list "env") (plist-get data :env) (plist-get data :argv))
                       :connection-type (if tty 'pty 'pipe)
                       :coding 'binary
                       :noquery t
                       :file-handler t
                       :filter (lambda (_process chunk)
                                 (mevedel-core-exec-relay-output
                                  session id (base64-encode-string chunk t)))
                       :sentinel (lambda (process _event)
                                   (unless (process-live-p process)
                                     (mevedel-remote-exec--ended run process)))))))))
            (setf (mevedel-remote-exec--run-process run) process)
            (mevedel-remote-exec--started run (if (eq mode 'off) "off" "unconfined") why)
            (unless tty (process-send-eof process))
            (mevedel-remote-exec--flush run))
        (error (mevedel-remote-exec--failed run (error-message-string err))))))))

(defun mevedel-remote-exec--ended (run process)
  "Report RUN's end from its TRAMP PROCESS's status."
  (if (eq (process-status process) 'signal)
      (mevedel-remote-exec--exited run nil (number-to-string (process-exit-status process)))
    (mevedel-remote-exec--exited run (process-exit-status process) nil)))

;;;; Reports

(defun mevedel-remote-exec--started (run boundary disclosure)
  "Report that RUN started under BOUNDARY; DISCLOSURE names what it lacks.
A host found unconfined is remembered for the header and the note."
  (let ((host (mevedel-remote-exec--run-host run)))
    (if (equal boundary "unconfined")
        (puthash host (or disclosure "no sandbox works there") mevedel-remote-exec--unconfined)
      (remhash host mevedel-remote-exec--unconfined))
    (mevedel-core-exec-relay-started (mevedel-remote-exec--run-session run)
                                     (mevedel-remote-exec--run-id run)
                                     boundary disclosure)))

(defun mevedel-remote-exec--finish (run)
  "Mark RUN done and forget it; return nil when it already was."
  (unless (mevedel-remote-exec--run-done run)
    (setf (mevedel-remote-exec--run-done run) t)
    (remhash (cons (mevedel-remote-exec--run-session run) (mevedel-remote-exec--run-id run))
             mevedel-remote-exec--runs)
    t))

(defun mevedel-remote-exec--exited (run code signal)
  "Report RUN's exit with CODE, or by SIGNAL (a name or number)."
  (when (mevedel-remote-exec--finish run)
    (mevedel-core-exec-relay-exit (mevedel-remote-exec--run-session run)
                                  (mevedel-remote-exec--run-id run)
                                  code (and signal (format "%s" signal)))))

(defun mevedel-remote-exec--failed (run message)
  "Report that RUN failed, MESSAGE naming why (and its host)."
  (when (mevedel-remote-exec--finish run)
    (let ((host (mevedel-remote-exec--run-host run)))
      (mevedel-core-exec-relay-failed
       (mevedel-remote-exec--run-session run) (mevedel-remote-exec--run-id run)
       (if (string-search host message) message (format "%s (on %s)" message host))))))

;;;; Signals and input

(defun mevedel-remote-exec--send (key request)
  "Pass REQUEST (:signal NAME or :stdin TEXT) to execution KEY's command."
  (when-let* ((run (gethash key mevedel-remote-exec--runs)))
    (if (or (mevedel-remote-exec--run-run run) (mevedel-remote-exec--run-process run))
        (mevedel-remote-exec--deliver run request)
      (setf (mevedel-remote-exec--run-queue run)
            (append (mevedel-remote-exec--run-queue run) (list request))))))

(defun mevedel-remote-exec--flush (run)
  "Deliver what was asked of RUN before its command started."
  (let ((queue (mevedel-remote-exec--run-queue run)))
    (setf (mevedel-remote-exec--run-queue run) nil)
    (dolist (request queue)
      (mevedel-remote-exec--deliver run request))))

(defun mevedel-remote-exec--deliver (run request)
  "Pass REQUEST (:signal NAME or :stdin TEXT) to RUN's started command."
  (let ((signal (plist-get request :signal))
        (text (plist-get request :stdin))
        (conn (mevedel-remote-exec--run-conn run))
        (process (mevedel-remote-exec--run-process run)))
    (cond
     ((mevedel-remote-exec--run-done run))
     (conn
      (if signal
          (mevedel-remote-helper-exec-signal conn (mevedel-remote-exec--run-run run) signal)
        (mevedel-remote-helper-exec-write-stdin
         conn (mevedel-remote-exec--run-run run) text nil #'ignore)))
     ((not (process-live-p process)))
     (text (process-send-string process (encode-coding-string text 'utf-8)))
     (t
      ;; TRAMP signals the remote process by a command on its
      ;; connection, which may not run inside another TRAMP operation.
      (mevedel-remote-when-free
       (lambda ()
         (when (process-live-p process)
           (condition-case nil
               (mevedel-remote-call
                (mevedel-remote-exec--run-directory run)
                (lambda () (signal-process process (intern signal))))
             (error (delete-process process))))))))))

;;;; Telling the user and the model

(defun mevedel-remote-exec-unconfined-reason (workspace)
  "Return why commands in the remote WORKSPACE run unconfined, or nil."
  (and (mevedel-remote-p workspace)
       (gethash (mevedel-remote-host workspace) mevedel-remote-exec--unconfined)))

(defun mevedel-remote-exec-note (session workspace)
  "Return the note that WORKSPACE's commands run unconfined, once per SESSION.
Nil when they are confined, or SESSION's model was told already."
  (when-let* ((why (mevedel-remote-exec-unconfined-reason workspace))
              ((not (gethash session mevedel-remote-exec--told))))
    (puthash session t mevedel-remote-exec--told)
    (format "Note: commands on %s run without a sandbox (%s)."
            (mevedel-remote-host workspace) why)))

(defun mevedel-remote-exec-header-text (workspace)
  "Return the header's warning that WORKSPACE's commands run unconfined, or nil."
  (when (mevedel-remote-exec-unconfined-reason workspace)
    (propertize (format "no sandbox on %s" (mevedel-remote-host workspace))
                'face 'warning
                'help-echo (mevedel-remote-exec-unconfined-reason workspace))))

(provide 'mevedel-remote-exec)
;;; mevedel-remote-exec.el ends here
