;;; mevedel-remote-helper.el --- Talk to mevedel's helper on a remote host  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A remote workspace's Glob, Grep, Read and writes run on its host, by
;; `mevedel-remote' (crates/mevedel-remote), so only results cross the
;; connection.  This file ships that binary over TRAMP (to a per-user
;; cache directory on the host, named by the binary's hash, copied once
;; per version), checks that the host's architecture has one and that
;; it runs (its hello line), and keeps one process per host, started by
;; `start-file-process' in the workspace's `default-directory'.  Calls
;; are asynchronous: each gets a request id, and its CALLBACK gets `ok'
;; and a plist, or `error' and (ERROR-SYMBOL MESSAGE), as the local
;; core's callbacks do.  A lost connection fails every pending call
;; with an error naming the host; the next call starts a new helper.
;;
;; Not here: which workspace is remote, routing the tools, the rg/grep
;; fallback and turning host paths into TRAMP names (mevedel-remote.el);
;; the searches themselves (the helper's crate).

;;; Code:

(require 'cl-lib)
(require 'tramp)
(require 'mevedel-core-build)

;;;; Options

(defgroup mevedel-remote-helper nil
  "The helper mevedel runs on remote hosts."
  :group 'mevedel
  :prefix "mevedel-remote-helper-")

(defcustom mevedel-remote-helper-cache-directory "~/.cache/mevedel/"
  "Directory on each remote host where the helper binary is kept.
A host-side name: relative to the remote user's home when it starts
with ~, else absolute."
  :type 'string)

(defcustom mevedel-remote-helper-start-timeout 30
  "Seconds a remote helper may take to say hello before it counts as failed."
  :type 'number)

(defvar mevedel-sandbox-mode)

(define-error 'mevedel-remote-helper-error "Remote helper failed")

;;;; Connections

(cl-defstruct (mevedel-remote-helper--conn
               (:constructor mevedel-remote-helper--conn-make)
               (:copier nil))
  "One helper process on one host."
  host process (next-id 0) (pending (make-hash-table)) (partial nil)
  ready waiting hello (streams (make-hash-table)))

(defvar mevedel-remote-helper--connections (make-hash-table :test #'equal)
  "Live connections by host (the TRAMP prefix `/method:user@host:').")

(defvar mevedel-remote-helper--told nil
  "Hosts already told that the helper cannot run there.")

(defvar mevedel-remote-helper--hashes (make-hash-table :test #'equal)
  "SHA-256 of each local helper binary, by file name and modification time.")

(defun mevedel-remote-helper--binary (arch)
  "Return the local helper binary built for ARCH, or nil."
  (let ((file (expand-file-name (concat "mevedel-remote-" arch)
                                (file-name-directory (mevedel-core-build-module-file)))))
    (and (file-executable-p file) file)))

(defun mevedel-remote-helper--hash (file)
  "Return the SHA-256 of FILE, computed once per version of it."
  (let ((key (cons file (file-attribute-modification-time (file-attributes file)))))
    (or (gethash key mevedel-remote-helper--hashes)
        (puthash key (with-temp-buffer
                       (set-buffer-multibyte nil)
                       (insert-file-contents-literally file)
                       (secure-hash 'sha256 (current-buffer)))
                 mevedel-remote-helper--hashes))))

(defun mevedel-remote-helper--arch (dir)
  "Return the machine name (`uname -m') of DIR's host."
  (let ((default-directory dir))
    (with-temp-buffer
      (unless (eql 0 (process-file "uname" nil t nil "-m"))
        (error "`uname -m' failed on %s" (file-remote-p dir)))
      (string-trim (buffer-string)))))

(defun mevedel-remote-helper--install (dir host)
  "Put the helper for DIR's host (HOST) in its cache; return its host path.
Copied only when the host lacks this exact version."
  (let* ((arch (mevedel-remote-helper--arch dir))
         (local (or (mevedel-remote-helper--binary arch)
                    (error "No mevedel helper is built for %s (the architecture of %s)"
                           arch host)))
         (cache (if (string-prefix-p "/" mevedel-remote-helper-cache-directory)
                    (concat host mevedel-remote-helper-cache-directory)
                  (expand-file-name mevedel-remote-helper-cache-directory
                                    (concat host "~/"))))
         (remote (expand-file-name (concat "mevedel-remote-"
                                           (substring (mevedel-remote-helper--hash local) 0 16))
                                   cache)))
    (unless (file-executable-p remote)
      (make-directory cache t)
      (let ((temp (concat remote ".part")))
        (copy-file local temp t)
        (set-file-modes temp #o755)
        (rename-file temp remote t)))
    (file-local-name remote)))

(defun mevedel-remote-helper--fail-pending (conn message)
  "Fail every pending call of CONN, and every waiter, with MESSAGE."
  (let ((pending (mevedel-remote-helper--conn-pending conn)))
    (setf (mevedel-remote-helper--conn-pending conn) (make-hash-table))
    (maphash (lambda (_id callback)
               (funcall callback 'error (list 'mevedel-remote-helper-error message)))
             pending))
  (let ((streams (mevedel-remote-helper--conn-streams conn)))
    (setf (mevedel-remote-helper--conn-streams conn) (make-hash-table))
    (maphash (lambda (_run handlers)
               (funcall (plist-get handlers :failed) message))
             streams))
  (let ((waiting (mevedel-remote-helper--conn-waiting conn)))
    (setf (mevedel-remote-helper--conn-waiting conn) nil)
    (dolist (callback waiting)
      (funcall callback (list :error message)))))

(defun mevedel-remote-helper--ready (conn)
  "Mark CONN ready and hand it to everyone waiting for it."
  (setf (mevedel-remote-helper--conn-ready conn) t)
  (let ((waiting (mevedel-remote-helper--conn-waiting conn)))
    (setf (mevedel-remote-helper--conn-waiting conn) nil)
    (dolist (callback waiting)
      (funcall callback conn))))

(defun mevedel-remote-helper--message (conn message)
  "Act on MESSAGE, one parsed line from CONN's helper."
  (cond
   ((plist-get message :hello)
    (setf (mevedel-remote-helper--conn-hello conn) (plist-get message :hello))
    (mevedel-remote-helper--ready conn))
   ((plist-get message :event)
    (mevedel-remote-helper--event conn message))
   (t
    (let* ((id (plist-get message :id))
           (pending (mevedel-remote-helper--conn-pending conn))
           (callback (gethash id pending)))
      (when callback
        (remhash id pending)
        (let ((err (plist-get message :error)))
          (if err
              (funcall callback 'error
                       (list (intern (format "mevedel-core-%s-error" (plist-get err :kind)))
                             (plist-get err :message)))
            (funcall callback 'ok (plist-get message :ok)))))))))

(defun mevedel-remote-helper--event (conn event)
  "Hand EVENT, pushed by CONN's helper for a streamed run, to its handlers."
  (let* ((run (plist-get event :run))
         (streams (mevedel-remote-helper--conn-streams conn))
         (handlers (gethash run streams)))
    (when handlers
      (pcase (plist-get event :event)
        ("exec_output"
         (funcall (plist-get handlers :output) (plist-get event :data)))
        ("exec_exit"
         (remhash run streams)
         (funcall (plist-get handlers :exited)
                  (plist-get event :exit_code) (plist-get event :signal)))))))

(defun mevedel-remote-helper--filter (conn)
  "Return the process filter of CONN: whole lines of JSON, one message each.
The start of a line still coming is kept in pieces, joined once its
end arrives: a streamed run's lines are long, and joining every
piece as it came would copy them over and over."
  (lambda (_process output)
    (if (not (string-search "\n" output))
        (push output (mevedel-remote-helper--conn-partial conn))
      (let ((text (apply #'concat (nreverse (cons output (mevedel-remote-helper--conn-partial conn)))))
            (start 0))
        (while (string-match "\n" text start)
          (let ((line (substring text start (match-beginning 0))))
            (setq start (match-end 0))
            (unless (string-empty-p line)
              (mevedel-remote-helper--message
               conn (condition-case nil
                        (json-parse-string line :object-type 'plist
                                           :null-object nil :false-object nil)
                      (json-parse-error (list :noise line)))))))
        (setf (mevedel-remote-helper--conn-partial conn)
              (and (< start (length text)) (list (substring text start))))))))

(defun mevedel-remote-helper--sentinel (conn)
  "Return the sentinel of CONN: when the helper ends, fail what it owed."
  (lambda (process _event)
    (unless (process-live-p process)
      (let ((host (mevedel-remote-helper--conn-host conn)))
        (when (eq (gethash host mevedel-remote-helper--connections) conn)
          (remhash host mevedel-remote-helper--connections))
        (mevedel-remote-helper--fail-pending
         conn
         (if (mevedel-remote-helper--conn-ready conn)
             (format "Lost the connection to the mevedel helper on %s" host)
           (format "The mevedel helper cannot run on %s (exit %s): %s"
                   host (process-exit-status process)
                   (string-trim (apply #'concat
                                       (reverse (mevedel-remote-helper--conn-partial conn)))))))))))

(defun mevedel-remote-helper--start (dir host)
  "Start the helper for DIR on HOST; return its connection."
  (let* ((program (mevedel-remote-helper--install dir host))
         (conn (mevedel-remote-helper--conn-make :host host))
         (default-directory dir)
         (process-connection-type nil)
         (process (start-file-process (format "mevedel-remote %s" host) nil program)))
    (set-process-query-on-exit-flag process nil)
    (set-process-coding-system process 'utf-8-unix 'utf-8-unix)
    (set-process-filter process (mevedel-remote-helper--filter conn))
    (set-process-sentinel process (mevedel-remote-helper--sentinel conn))
    (setf (mevedel-remote-helper--conn-process conn) process)
    (run-at-time mevedel-remote-helper-start-timeout nil
                 (lambda ()
                   (unless (mevedel-remote-helper--conn-ready conn)
                     (delete-process process))))
    conn))

(defun mevedel-remote-helper--tell-once (host message)
  "Say MESSAGE about HOST unless it was said already."
  (unless (member host mevedel-remote-helper--told)
    (push host mevedel-remote-helper--told)
    (message "%s; searching with rg/grep there instead" message)))

;;;; API

(defun mevedel-remote-helper-ensure (dir callback)
  "Have the helper running on DIR's host; call CALLBACK when it is known.
DIR is a TRAMP directory.  CALLBACK gets the connection, or (:error
MESSAGE) when the helper cannot run there (said once per host).
Return the connection (possibly still starting) or (:error MESSAGE)."
  (let* ((host (or (file-remote-p dir) (error "Not a remote directory: %s" dir)))
         (conn (gethash host mevedel-remote-helper--connections))
         (told (lambda (result)
                 (when (eq (car-safe result) :error)
                   (mevedel-remote-helper--tell-once host (cadr result)))
                 (funcall callback result))))
    (cond
     ((and conn (process-live-p (mevedel-remote-helper--conn-process conn)))
      (if (mevedel-remote-helper--conn-ready conn)
          (funcall callback conn)
        (push told (mevedel-remote-helper--conn-waiting conn)))
      conn)
     (t
      (condition-case err
          (let ((conn (mevedel-remote-helper--start dir host)))
            (puthash host conn mevedel-remote-helper--connections)
            (push told (mevedel-remote-helper--conn-waiting conn))
            conn)
        (error
         (let ((result (list :error (format "The mevedel helper cannot run on %s: %s"
                                            host (error-message-string err)))))
           (funcall told result)
           result)))))))

(defun mevedel-remote-helper-live-p (conn)
  "Return non-nil while the helper process of CONN is running.
A connection lost with its host is not reused: the next call starts
a new helper."
  (process-live-p (mevedel-remote-helper--conn-process conn)))

(defvar mevedel-remote-helper--json-keys (make-hash-table :test #'eq)
  "Plist key -> its JSON object key, made once: every request makes them.")

(defun mevedel-remote-helper--json (plist)
  "Return PLIST's JSON object: keys with `_' for `-', nil values dropped."
  (let (out)
    (while plist
      (let ((key (pop plist)) (value (pop plist)))
        (when value
          (push (or (gethash key mevedel-remote-helper--json-keys)
                    (puthash key (intern (concat ":" (string-replace
                                                      "-" "_" (substring (symbol-name key) 1))))
                             mevedel-remote-helper--json-keys))
                out)
          (push (cond ((eq value t) t)
                      ((and (consp value) (keywordp (car value)))
                       (mevedel-remote-helper--json value))
                      ((consp value)
                       (vconcat (mapcar (lambda (v) (if (consp v)
                                                        (vconcat (mapcar (lambda (x) (or x :false)) v))
                                                      v))
                                        value)))
                      (t value))
                out))))
    (nreverse out)))

(defun mevedel-remote-helper--call (conn op args callback)
  "Send OP with ARGS (a plist) to CONN; CALLBACK gets its answer."
  (let ((process (mevedel-remote-helper--conn-process conn))
        (id (cl-incf (mevedel-remote-helper--conn-next-id conn))))
    (if (not (process-live-p process))
        (funcall callback 'error
                 (list 'mevedel-remote-helper-error
                       (format "Lost the connection to the mevedel helper on %s"
                               (mevedel-remote-helper--conn-host conn))))
      (puthash id callback (mevedel-remote-helper--conn-pending conn))
      (process-send-string
       process
       (concat (json-serialize (list :id id :op op :args (mevedel-remote-helper--json args)))
               "\n")))
    id))

(defun mevedel-remote-helper-glob (conn plist callback)
  "Glob on CONN's host; CALLBACK gets `ok' and (:text :total :shown :partial).
PLIST is what `mevedel-core-search-glob' takes, with host paths:
:path :display :pattern :timeout-ms :new-files."
  (mevedel-remote-helper--call conn "glob" plist callback))

(defun mevedel-remote-helper-grep (conn plist callback)
  "Grep on CONN's host; CALLBACK gets `ok' and (:text :total :shown :partial).
PLIST is what `mevedel-core-search-grep' takes, with host paths:
:path :display :options :timeout-ms :unsaved (TRUENAME TEXT NEW-P)."
  (mevedel-remote-helper--call conn "grep" plist callback))

(defun mevedel-remote-helper-cancel (conn id)
  "Ask CONN's helper to stop request ID (it answers with what it found)."
  (mevedel-remote-helper--call conn "cancel" (list :target id) #'ignore))

(defun mevedel-remote-helper-read (conn host-path plist callback)
  "Read HOST-PATH on CONN's host; CALLBACK gets `ok' and (:text TEXT).
PLIST is :display and a page (:offset :limit :char-offset); with
:bytes t, :start and :length ask for raw bytes instead, and CALLBACK
gets (:bytes UNIBYTE-STRING :size FILE-SIZE)."
  (mevedel-remote-helper--call
   conn "read" (append (list :path host-path) plist)
   (if (plist-get plist :bytes)
       (lambda (status value)
         (funcall callback status
                  (if (eq status 'ok)
                      (list :bytes (base64-decode-string (plist-get value :data))
                            :size (plist-get value :size))
                    value)))
     callback)))

(defun mevedel-remote-helper-write (conn host-path content plist callback)
  "Replace HOST-PATH on CONN's host with CONTENT, atomically.
CONTENT is a string (multibyte: written as UTF-8).  PLIST may hold
:expect-hash, the SHA-256 the file must still have (\"\": it must not
exist).  The file's mode is kept.  CALLBACK gets `ok' and (:hash :size)."
  (let ((bytes (if (multibyte-string-p content)
                   (encode-coding-string content 'utf-8-unix)
                 content)))
    (mevedel-remote-helper--call
     conn "write"
     (list :path host-path :data (base64-encode-string bytes t)
           :expect-hash (plist-get plist :expect-hash))
     callback)))

;;;; ApplyPatch's writes

(defun mevedel-remote-helper-write-all (conn files callback)
  "Change FILES on CONN's host as one: all of them, or none.
FILES is a list of plists, one per file: :path (a host path), :data
\=(its new bytes, a unibyte string) or :delete t, :expect-hash (the
SHA-256 the file must still have; \"\" when it must not exist yet)
and :mode (default: the old file's, or the umask's for a new file).
The helper checks every expectation, writes every new content beside
its target, then renames them all over their targets and deletes; any
failure undoes what was done.  CALLBACK gets `ok' and (:files ...), or
`error' and (SYMBOL MESSAGE), MESSAGE naming the file and why."
  (mevedel-remote-helper--call
   conn "write_all"
   (list :files (vconcat
                 (mapcar (lambda (file)
                           (mevedel-remote-helper--json
                            (list :path (plist-get file :path)
                                  :data (when-let* ((data (plist-get file :data)))
                                          (base64-encode-string data t))
                                  :delete (plist-get file :delete)
                                  :expect-hash (plist-get file :expect-hash)
                                  :mode (plist-get file :mode))))
                         files)))
   callback))

;;;; Remote executions

(defun mevedel-remote-helper--spool-dir (conn)
  "Return the host directory of the output spools, for CONN."
  (if (string-prefix-p "/" mevedel-remote-helper-cache-directory)
      (concat mevedel-remote-helper-cache-directory "runs")
    (file-local-name
     (expand-file-name (concat mevedel-remote-helper-cache-directory "runs")
                       (concat (mevedel-remote-helper--conn-host conn) "~/")))))

(defun mevedel-remote-helper-exec-start (conn command directory callback &optional mode)
  "Run COMMAND in host DIRECTORY on CONN's host, in a process group of its own.
It is confined on the host (bubblewrap and Landlock, or whichever of
them the host has) with DIRECTORY the only writable root, under MODE
\=(`required', `best-effort' or `off'; default `mevedel-sandbox-mode'):
without a sandbox on the host, `required' refuses and `best-effort'
runs it unconfined.  Its output is spooled on the host, under the
helper's cache directory.  CALLBACK gets `ok' and (:run ID :spool
HOST-FILE :confined BOOL :unconfined_reason WHY :confinement TEXT)."
  (mevedel-remote-helper--call
   conn "exec_start"
   (list :command command :path directory
         :sandbox (symbol-name (or mode mevedel-sandbox-mode))
         :writable (list directory)
         :spool-dir (mevedel-remote-helper--spool-dir conn))
   callback))

(defun mevedel-remote-helper-exec-stream (conn plist handlers)
  "Run a command on CONN's host and have its output pushed as it comes.
PLIST is :argv (the program and its arguments, run as they are),
:directory (host path, where it runs), :env (\"NAME=VALUE\" strings
set for it), :sandbox (\"required\", \"best-effort\" or \"off\", or
such a symbol; default `mevedel-sandbox-mode', else required),
:writable (host paths, default the directory) and :tty (refused:
there is no terminal for remote commands).
HANDLERS is a plist of functions:
  :started (ANSWER) once it runs, ANSWER being (:run R :confined BOOL
           :unconfined_reason WHY :confinement TEXT :spool HOST-FILE);
  :output  (BASE64) each chunk of output, stdout and stderr merged, in
           order;
  :exited  (EXIT-CODE SIGNAL) when it ended after its last output,
           SIGNAL a name such as \"TERM\" or nil;
  :failed  (MESSAGE) when it could not start, or the connection was
           lost before it ended.
Exactly one of :exited and :failed is called, once.  The output also
stays in the host's spool, for `mevedel-remote-helper-exec-poll'."
  (let* ((directory (plist-get plist :directory))
         (sandbox (or (plist-get plist :sandbox)
                      (bound-and-true-p mevedel-sandbox-mode)
                      'required))
         (failed (or (plist-get handlers :failed) #'ignore)))
    (mevedel-remote-helper--call
     conn "exec_start"
     (list :argv (plist-get plist :argv) :path directory
           :env (plist-get plist :env)
           :tty (plist-get plist :tty)
           :stream t
           :sandbox (if (symbolp sandbox) (symbol-name sandbox) sandbox)
           :writable (or (plist-get plist :writable) (list directory))
           :spool-dir (mevedel-remote-helper--spool-dir conn))
     (lambda (status answer)
       (if (not (eq status 'ok))
           (funcall failed (cadr answer))
         (puthash (plist-get answer :run)
                  (list :output (or (plist-get handlers :output) #'ignore)
                        :exited (or (plist-get handlers :exited) #'ignore)
                        :failed failed)
                  (mevedel-remote-helper--conn-streams conn))
         (when-let* ((started (plist-get handlers :started)))
           (funcall started answer)))))
    nil))

(defun mevedel-remote-helper-exec-signal (conn run signal &optional callback)
  "Send SIGNAL (\"TERM\", \"KILL\", \"INT\" or \"HUP\") to run RUN's group on CONN.
CALLBACK, when given, gets `ok' and (:sent BOOL), nil when the run had
already ended."
  (mevedel-remote-helper--call conn "exec_signal" (list :run run :signal signal)
                               (or callback #'ignore)))

(defun mevedel-remote-helper-exec-poll (conn run plist callback)
  "Wait for remote execution RUN on CONN, then answer its output.
PLIST is :offset (bytes of output already seen) and :yield-time-ms
\(how long to wait for it to end).  CALLBACK gets `ok' and (:output
:next-offset :size :exited :exit-code :signal), keys spelled with `_'."
  (mevedel-remote-helper--call conn "exec_poll" (append (list :run run) plist) callback))

(defun mevedel-remote-helper-exec-write-stdin (conn run data close callback)
  "Write DATA to remote execution RUN's stdin on CONN; CLOSE: then close it.
CALLBACK gets `ok' and (:written N)."
  (mevedel-remote-helper--call
   conn "exec_stdin"
   (list :run run :data (if (multibyte-string-p data) (encode-coding-string data 'utf-8) data)
         :close close)
   callback))

(defun mevedel-remote-helper-exec-stop (conn run callback)
  "Stop remote execution RUN's process group on CONN (TERM, then KILL).
CALLBACK gets `ok' and the final poll's plist."
  (mevedel-remote-helper--call conn "exec_stop" (list :run run) callback))

(provide 'mevedel-remote-helper)
;;; mevedel-remote-helper.el ends here
