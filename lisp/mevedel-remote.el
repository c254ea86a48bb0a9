;;; mevedel-remote.el --- Workspaces on other hosts, reached through TRAMP  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A session whose workspace is a TRAMP directory (/ssh:HOST:/path,
;; /docker:..., /sudo:...) has that host as its execution target.
;; This file owns what that means outside the tools' own code:
;;
;; - State: the session's store, transcripts, checkpoints, artifacts
;;   and work:// files stay on this machine, under
;;   `mevedel-remote-state-directory', keyed by host and path
;;   (`mevedel-remote-state-root'), so a slow or lost link never holds
;;   a SQLite write and two hosts' workspaces never share one.
;; - Connection health: `mevedel-remote-check' reaches the host within
;;   `mevedel-remote-connect-timeout' or signals
;;   `mevedel-remote-unreachable' naming it; `mevedel-remote-call' does
;;   the same around any TRAMP operation, so a host that is down, hung
;;   or wants a password a headless run cannot type ends the call with
;;   that message, and the next call connects afresh.
;; - Search and paging where the files are: Glob, Grep and Read's
;;   pages go to the remote helper (mevedel-remote-helper.el, loaded
;;   and started by the first call that needs it,
;;   `mevedel-remote-with-helper'); when it cannot run there, Glob and
;;   Grep run `rg' on the host and Read pages the remote file by byte
;;   ranges, said once per host.  Results are named as a local run
;;   names them.
;; - ApplyPatch's remote writes: targets fetched to a private local
;;   mirror for the module to plan and apply, then every changed file
;;   written beside its target on the host and renamed over it, modes
;;   kept, all or none.
;; - The mutation lease: WORKSPACE/.mevedel/lease on the host names
;;   the one session that may write there; others wait (a timer looks
;;   again, so Emacs never blocks), take a stale lease over, or stay
;;   read-only (`mevedel-remote-lease-acquire').
;;
;; Not here: remote Bash and its sandbox (mevedel-remote-helper.el),
;; the tools' declarations (mevedel-tool-fs.el, mevedel-tool-patch.el).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'tramp)
(require 'mevedel-core)

(declare-function mevedel-remote-helper-ensure "mevedel-remote-helper")
(declare-function mevedel-remote-helper-glob "mevedel-remote-helper")
(declare-function mevedel-remote-helper-grep "mevedel-remote-helper")
(declare-function mevedel-remote-helper-read "mevedel-remote-helper")
(declare-function mevedel-remote-helper-cancel "mevedel-remote-helper")
(declare-function mevedel-remote-helper-live-p "mevedel-remote-helper")
(declare-function mevedel-remote-helper-write-all "mevedel-remote-helper")
(defvar mevedel-remote-helper-start-timeout)

;;;; Options

(defgroup mevedel-remote nil
  "Sessions whose workspace is on another host."
  :group 'mevedel
  :prefix "mevedel-remote-")

(defcustom mevedel-remote-state-directory "~/.mevedel/remote/"
  "Where remote workspaces keep their sessions' state on this machine.
Each workspace gets HOST-KEY/PATH-KEY/ below it."
  :type 'directory)

(defcustom mevedel-remote-connect-timeout 20
  "Seconds a TRAMP operation may take to reach its host before it fails.
Past it the call ends with an error naming the host, and the stuck
connection is dropped so that the next call reconnects."
  :type 'number)

(defcustom mevedel-remote-lease-stale-seconds 120
  "Seconds after its holder's last sign of life a mutation lease is stale.
The holder renews it every third of that while its session lives; a
stale lease may be taken over."
  :type 'natnum)

(defcustom mevedel-remote-lease-policy 'ask
  "What a session does when another session holds its workspace's lease.
`ask' asks (headless runs fail instead), `wait' waits for it to be
released or go stale, `take-over' takes it once stale (waiting until
then), `read-only' opens without writing, `fail' fails the write."
  :type '(choice (const ask) (const wait) (const take-over) (const read-only) (const fail)))

(defcustom mevedel-remote-lease-wait 600
  "Longest wait, in seconds, for another session's lease.
Used by the policies `wait' and `take-over'."
  :type 'natnum)

(defcustom mevedel-remote-lease-poll 2
  "Seconds between two looks at a lease a session waits for.
Each look is one short TRAMP operation; Emacs runs freely between."
  :type 'number)

(defcustom mevedel-remote-read-chunk (* 256 1024)
  "Bytes Read fetches from a remote file per step while paging it."
  :type 'natnum)

;;;; Targets

(define-error 'mevedel-remote-unreachable "Remote host unreachable" 'remote-file-error)

(defun mevedel-remote-p (file)
  "Return non-nil when FILE is on another host (a TRAMP name)."
  (and (stringp file) (or (mevedel-remote--split file) (file-remote-p file)) t))

(defun mevedel-remote-host (file)
  "Return FILE's TRAMP prefix, /METHOD:USER@HOST:, as FILE spells it.
Results and errors name the host this way: defaults TRAMP fills in
would make names the user never typed."
  (let ((local (file-remote-p file 'localname)))
    (if (and local (string-suffix-p local file))
        (substring-no-properties file 0 (- (length file) (length local)))
      (file-remote-p file))))

(defun mevedel-remote-local-name (file)
  "Return FILE's name on its own host."
  (or (file-remote-p file 'localname) file))

(defun mevedel-remote--key (text)
  "Return TEXT made safe as one file name component."
  (replace-regexp-in-string "[^A-Za-z0-9._@#-]" "_" text))

(defun mevedel-remote--proxy (vec)
  "Return the TRAMP name of the hop before VEC's host on the way, or nil.
The first match in `tramp-default-proxies-alist', as TRAMP picks it."
  (cl-loop for (host user proxy) in tramp-default-proxies-alist
           when (and (string-match-p (or (eval host t) "") (or (tramp-file-name-host-port vec) ""))
                     (string-match-p (or (eval user t) "") (or (tramp-file-name-user-domain vec) "")))
           return (when-let* ((proxy (eval proxy t)))
                    (substring-no-properties
                     (format-spec proxy (format-spec-make
                                         ?u (or (tramp-file-name-user vec) "")
                                         ?h (or (tramp-file-name-host vec) "")))))))

(defun mevedel-remote--route (file)
  "Return the hops on the way to FILE's host, as TRAMP takes them, or nil.
One string, the last hop first; nil for a direct connection.  A
multi-hop name loses its hops as soon as it is expanded (TRAMP keeps
them as proxies of its last hop, in `tramp-default-proxies-alist'),
so both spellings of a name get the same route.  Hops that lead back
to a host already on the way (/ssh:a|ssh:a:) would have TRAMP loop
forever without a word: signal `mevedel-remote-unreachable' instead."
  (let ((target (tramp-dissect-file-name (expand-file-name file)))
        (hops nil))
    (while-let ((proxy (mevedel-remote--proxy target)))
      (when (member proxy hops)
        (mevedel-remote--unreachable
         file (format "its hops lead back to %s, which TRAMP would follow forever" proxy)))
      (push proxy hops)
      (setq target (tramp-dissect-file-name proxy)))
    (and hops (string-join (nreverse hops) "|"))))

(defun mevedel-remote-state-root (workspace)
  "Return the local directory keeping the remote WORKSPACE's sessions' state.
The host key says method, user, host and port, and a hash of the hops
on the way (`mevedel-remote--route'): the same host behind two
gateways is two hosts.  The path key is readable, with a hash of the
exact path so that two paths never meet."
  (let* ((vec (tramp-dissect-file-name (expand-file-name workspace)))
         (route (mevedel-remote--route workspace))
         (path (directory-file-name (mevedel-remote-local-name workspace)))
         (host (mevedel-remote--key
                (concat (tramp-file-name-method vec) "-"
                        (if-let* ((user (tramp-file-name-user vec))) (concat user "@") "")
                        (tramp-file-name-host vec)
                        (if-let* ((port (tramp-file-name-port vec))) (concat "#" port) "")
                        (if route (concat "-" (substring (md5 route) 0 8)) ""))))
         (name (concat (mevedel-remote--key (string-trim (if (equal path "") "root" path) "/+" ""))
                       "-" (substring (md5 path) 0 10))))
    (file-name-as-directory
     (expand-file-name (concat host "/" name) (expand-file-name mevedel-remote-state-directory)))))

;;;; Names in remote workspaces

(defvar mevedel-remote--name-prefixes (make-hash-table :test #'equal)
  "Host prefixes whose plain names `mevedel-remote--name-handler' answers.")

(defun mevedel-remote--plain-local-p (local)
  "Return non-nil when LOCAL, a host-side name, is already expanded.
It starts with a slash (not `~') and has no `.' or `..' component and
no doubled slash: expanding it changes nothing."
  ;; String searches, not a regexp: this runs on every name of a call.
  (and (string-prefix-p "/" local)
       (not (or (string-search "//" local) (string-search "/./" local)
                (string-search "/../" local)
                (string-suffix-p "/." local) (string-suffix-p "/.." local)))))

(defun mevedel-remote--split (file)
  "Return (PREFIX . LOCAL) for a plain FILE under a known host prefix, else nil.
Plain string work, for the names a tool call passes around: cheaper
still than a file name operation answered here."
  (let* ((end (and (stringp file) (string-search ":/" file)))
         (prefix (and end (substring file 0 (1+ end)))))
    (when (and prefix (gethash prefix mevedel-remote--name-prefixes))
      (let ((local (substring file (1+ end))))
        (and (mevedel-remote--plain-local-p local) (cons prefix local))))))

(defun mevedel-remote--defer (operation args)
  "Run OPERATION on ARGS by the file name handlers after ours (TRAMP's)."
  (let ((inhibit-file-name-handlers
         (cons #'mevedel-remote--name-handler
               (and (eq inhibit-file-name-operation operation) inhibit-file-name-handlers)))
        (inhibit-file-name-operation operation))
    (apply operation args)))

(defun mevedel-remote--name-handler (operation &rest args)
  "Answer OPERATION on ARGS for a plain name under a known host prefix.
OPERATION is one of the pure name operations (the `operations'
property).  TRAMP dissects a name on each of them, a fraction of a
helper round trip every time, and a tool call makes dozens; for a
plain name (`mevedel-remote--plain-local-p') under a prefix TRAMP
spells as it is spelled, the answer is TRAMP's without asking it.
Anything else goes on to TRAMP."
  (let* ((name (car args))
         (dir (and (eq operation 'expand-file-name) (cadr args)))
         (full (cond ((not (stringp name)) nil)
                     ((not (eq operation 'expand-file-name)) name)
                     ((file-name-absolute-p name) name)
                     ;; Relative: DIR must be a plain name too.
                     ((string-empty-p name) nil)
                     ((mevedel-remote--split (or dir default-directory))
                      (let ((dir (or dir default-directory)))
                        (concat dir (unless (string-suffix-p "/" dir) "/") name)))))
         (split (mevedel-remote--split full))
         (prefix (car split))
         (local (cdr split)))
    (if (not (and split (or (not (eq operation 'file-remote-p))
                            (and (memq (cadr args) '(nil localname)) (null (nth 2 args))))))
        (mevedel-remote--defer operation args)
      (pcase operation
        ('expand-file-name full)
        ('file-name-as-directory (if (string-suffix-p "/" full) full (concat full "/")))
        ('directory-file-name (if (or (equal local "/") (not (string-suffix-p "/" full)))
                                  full
                                (substring full 0 -1)))
        ('file-name-directory (concat prefix (file-name-directory local)))
        ('file-name-nondirectory (file-name-nondirectory local))
        ('file-remote-p (if (cadr args) local prefix))))))

(defun mevedel-remote-expand-file-name (name &optional directory)
  "Return NAME expanded in DIRECTORY, as `expand-file-name' would.
A plain name under a host prefix answered here, or a relative one in
such a directory, gets `mevedel-remote--name-handler''s answer by
string work alone, without the search of every regexp of
`file-name-handler-alist' that reaching the handler costs: a tool
call expands its names several times.  Any other name is expanded."
  (or (and (stringp name)
           (if (file-name-absolute-p name)
               (and (mevedel-remote--split name) name)
             (let ((dir (or directory default-directory)))
               (and (not (string-empty-p name)) (mevedel-remote--split dir)
                    (let ((full (concat dir (unless (string-suffix-p "/" dir) "/") name)))
                      (and (mevedel-remote--split full) full))))))
      (expand-file-name name directory)))

(put 'mevedel-remote--name-handler 'operations
     '(expand-file-name file-name-as-directory directory-file-name file-name-directory
                        file-name-nondirectory file-remote-p))

(defun mevedel-remote-inside-p (file directory)
  "Return DIRECTORY's host-side name when FILE is inside it by name.
Both are expanded TRAMP names on one host whose names are answered
here (`mevedel-remote-fast-names'), without `.' or `..' components;
links are not resolved (that is the host's part, see
`mevedel-remote-read-page').  Nil otherwise."
  (let ((dir (mevedel-remote--split directory))
        (split (mevedel-remote--split file)))
    (and dir split
         (equal (car dir) (car split))
         (let ((local (if (string-suffix-p "/" (cdr dir)) (cdr dir) (concat (cdr dir) "/"))))
           (and (string-prefix-p local (cdr split)) local)))))

(defun mevedel-remote-fast-names (directory)
  "Answer plain name operations under the remote DIRECTORY's host here.
Only when TRAMP spells that host's prefix as DIRECTORY does, so that
the answers are TRAMP's own (see `mevedel-remote--name-handler')."
  (let ((prefix (mevedel-remote-host directory)))
    (when (and prefix (not (gethash prefix mevedel-remote--name-prefixes))
               (string-match-p "\\`/[^/]*:\\'" prefix)
               (equal (file-remote-p directory) prefix))
      (puthash prefix t mevedel-remote--name-prefixes)
      (push (cons (concat "\\`" (regexp-quote prefix) "/") #'mevedel-remote--name-handler)
            file-name-handler-alist))))

;;;; One TRAMP operation at a time

(defvar mevedel-remote--depth 0
  "How many `mevedel-remote-call's are running (nested).")

(defvar mevedel-remote--waiting nil
  "Functions waiting for TRAMP to be free, oldest first.")

(defun mevedel-remote--busy-p ()
  "Return non-nil while a TRAMP operation is in flight.
TRAMP locks a connection while it talks to the host; a process filter
or sentinel that ran then and started another operation would make
TRAMP signal \"Forbidden reentrant call\"."
  (or (> mevedel-remote--depth 0)
      ;; TRAMP keeps the lock among the properties of the connection's
      ;; process.
      (cl-some (lambda (process)
                 (and (process-live-p process)
                      (process-get process 'tramp-vector)
                      (tramp-get-connection-property process "locked")))
               (process-list))))

(defun mevedel-remote--arm (seconds)
  "Run the waiting functions in SECONDS, from the global timer list.
TRAMP suspends timers during an operation by binding `timer-list'; a
timer made meanwhile with `run-at-time' would be dropped when the
binding ends, so this one goes straight to the global list."
  (let ((timer (timer-create)))
    (timer-set-time timer (time-add nil seconds))
    (timer-set-function timer #'mevedel-remote--drain)
    ;; Due now or nearly: the head of the list keeps it sorted enough
    ;; for timers to run in order.
    (set-default 'timer-list (cons timer (default-value 'timer-list)))))

(defun mevedel-remote--drain ()
  "Call the functions waiting for TRAMP, if it is free; else try again soon."
  (if (mevedel-remote--busy-p)
      (mevedel-remote--arm 0.05)
    (while mevedel-remote--waiting
      (let ((function (pop mevedel-remote--waiting)))
        (with-demoted-errors "mevedel-remote: %S" (funcall function))))))

(defun mevedel-remote-when-free (function)
  "Call FUNCTION now, or as soon as no TRAMP operation is in flight.
Tool handlers on a remote workspace start this way: they may be
reached from a process filter running inside another TRAMP operation.
Return a function that drops FUNCTION if it has not run yet."
  (if (not (mevedel-remote--busy-p))
      (progn (funcall function) #'ignore)
    (setq mevedel-remote--waiting (nconc mevedel-remote--waiting (list function)))
    (mevedel-remote--arm 0)
    (lambda () (setq mevedel-remote--waiting (delq function mevedel-remote--waiting)))))

;;;; Connection health

(defun mevedel-remote--unreachable (file why)
  "Signal `mevedel-remote-unreachable' for FILE's host, saying WHY."
  (signal 'mevedel-remote-unreachable
          (list (format "Cannot reach %s (for %s): %s" (mevedel-remote-host file)
                        (mevedel-remote-local-name file) why))))

(defun mevedel-remote--drop (file)
  "Drop FILE's TRAMP connection, so that the next call reconnects."
  (ignore-errors (tramp-cleanup-connection (tramp-dissect-file-name file) t t)))

(defconst mevedel-remote--password-why
  "it asks for a password, which nobody can type here; use a key (ssh-agent) or \
`auth-source'"
  "Why a host whose login asks for a password cannot be reached headless.")

(defun mevedel-remote--why (err)
  "Return a short reason for the TRAMP error ERR."
  (let ((message (error-message-string err)))
    (cond
     ((string-match-p "[Pp]assword\\|passphrase\\|stdin" message) mevedel-remote--password-why)
     ((string-match-p "Permission denied" message) "authentication was refused")
     ;; TRAMP's advice to clean the connection up: done already.  And
     ;; the next call on a failed connection fails at finding commands.
     ((string-match-p "\\`Tramp failed to connect\\|\\`Couldn't find command" message)
      "the connection failed")
     (t message))))

(defvar mevedel-remote--password-asked nil
  "Non-nil once a login of the running `mevedel-remote-call' asked for a password.")

(defun mevedel-remote--refuse-password (_process _vec)
  "Fail a TRAMP login that asks for a password: nobody can type it here."
  (setq mevedel-remote--password-asked t)
  (signal 'remote-file-error (list "password asked")))

(defun mevedel-remote--connected-p (file)
  "Return non-nil when TRAMP's connection to FILE's host is up."
  (process-live-p (tramp-get-connection-process (tramp-dissect-file-name file))))

(defun mevedel-remote-call (file function)
  "Call FUNCTION for the remote FILE, failing loudly when its host is lost.
A host that does not answer within `mevedel-remote-connect-timeout', or
a connection error, signals `mevedel-remote-unreachable' naming the
host, and drops the connection so that the next call reconnects.
Return FUNCTION's value.  A local FILE just calls FUNCTION."
  (if (not (mevedel-remote-p file))
      (funcall function)
    (let ((done nil)
          (mevedel-remote--password-asked nil)
          ;; The tools' own calls connect (or reconnect) when needed.
          (non-essential nil)
          (mevedel-remote--depth (1+ mevedel-remote--depth))
          ;; TRAMP suspends timers while it works, `with-timeout''s
          ;; too: its own login timeout is what bounds a silent host.
          (tramp-connection-timeout mevedel-remote-connect-timeout))
      (unwind-protect
          (condition-case err
              (prog1 (with-timeout (mevedel-remote-connect-timeout
                                    (mevedel-remote--unreachable
                                     file (format "no answer within %s seconds"
                                                  mevedel-remote-connect-timeout)))
                       (if noninteractive
                           ;; Nobody can type a password in batch Emacs.
                           (let ((tramp-actions-before-shell
                                  (mapcar (lambda (action)
                                            (if (eq (cadr action) 'tramp-action-password)
                                                (list (car action)
                                                      #'mevedel-remote--refuse-password)
                                              action))
                                          tramp-actions-before-shell)))
                             (funcall function))
                         (funcall function)))
                (setq done t))
            (mevedel-remote-unreachable (signal (car err) (cdr err)))
            ((remote-file-error file-error)
             (cond
              (mevedel-remote--password-asked
               (mevedel-remote--unreachable file mevedel-remote--password-why))
              ((mevedel-remote--connected-p file) (signal (car err) (cdr err)))
              (t (mevedel-remote--unreachable file (mevedel-remote--why err)))))
            (quit (signal (car err) (cdr err))))
        (unless (or done (mevedel-remote--connected-p file))
          (mevedel-remote--drop file))))))

(defun mevedel-remote-check (directory)
  "Reach DIRECTORY's host and check DIRECTORY is a directory there.
Signal `mevedel-remote-unreachable' naming the host when it cannot be
reached in time, or a `file-error' when DIRECTORY is not a directory."
  ;; Hops that loop would hang TRAMP's first call for good.
  (mevedel-remote--route directory)
  ;; Nothing else runs yet: TRAMP may let timers run while it logs in,
  ;; so that `mevedel-remote-call''s time limit holds for a host that
  ;; accepts the connection and never answers.
  (let ((tramp-dont-suspend-timers t))
    (mevedel-remote-fast-names directory)
    (mevedel-remote-call
     directory
     (lambda ()
       (unless (file-directory-p directory)
         ;; TRAMP's predicates answer nil when the login failed.
         (if (or mevedel-remote--password-asked (not (mevedel-remote--connected-p directory)))
             (mevedel-remote--unreachable
              directory (if mevedel-remote--password-asked
                            mevedel-remote--password-why
                          "the login failed"))
           (signal 'file-error (list (format "%s is not a directory" directory)))))))))

;;;; Search and paging on the host (the fallback)

(defvar mevedel-remote--helpers (make-hash-table :test #'equal)
  "Per host: the remote helper's connection, or (:error MESSAGE).")

(defvar mevedel-remote--said-fallback (make-hash-table :test #'equal)
  "Hosts whose searches already said they run rg instead of the helper.")

(defun mevedel-remote--fallback-note (file)
  "Return the once-per-host note that FILE's search ran `rg' there, or nil."
  (let* ((host (mevedel-remote-host file))
         (helper (gethash host mevedel-remote--helpers)))
    (unless (gethash host mevedel-remote--said-fallback)
      (puthash host t mevedel-remote--said-fallback)
      (format "\n(Searched with rg on %s: the mevedel helper is not running there%s.)" host
              (if (eq (car-safe helper) :error) (concat ": " (cadr helper)) "")))))

(defun mevedel-remote--host-name (file directory)
  "Return the host-side name rg takes for FILE, relative names kept.
DIRECTORY is where rg runs; FILE was given relative to it or absolute."
  (if (file-name-absolute-p file)
      (mevedel-remote-local-name (expand-file-name file directory))
    file))

(defun mevedel-remote--rg-glob-args (pattern)
  "Return rg's arguments listing every file matching the Glob PATTERN."
  (list "--files" "--hidden" "--no-ignore" "--no-messages" "--sort" "path"
        "--glob" pattern "--glob" "!.git"))

(defun mevedel-remote--rg-grep-args (options)
  "Return rg's arguments for the Grep OPTIONS, the module's plist."
  (let ((mode (plist-get options :output-mode)))
    (append
     (list "--hidden" "--no-messages" "--color" "never" "--sort" "path" "--glob" "!.git")
     (pcase mode
       ("files_with_matches" (list "--files-with-matches"))
       ("count" (list "--count" "--with-filename"))
       (_ (append (list "--no-heading" "--with-filename")
                  (if (plist-get options :line-numbers) (list "--line-number")
                    (list "--no-line-number"))
                  (when (> (or (plist-get options :before) 0) 0)
                    (list "--before-context" (number-to-string (plist-get options :before))))
                  (when (> (or (plist-get options :after) 0) 0)
                    (list "--after-context" (number-to-string (plist-get options :after)))))))
     (when (plist-get options :case-insensitive) (list "--ignore-case"))
     (when (plist-get options :multiline) (list "--multiline" "--multiline-dotall"))
     (when-let* ((glob (plist-get options :glob))) (list "--glob" glob))
     (when-let* ((type (plist-get options :type))) (list "--type" type))
     (list "--regexp" (plist-get options :pattern)))))

(defun mevedel-remote--page (lines offset limit empty tool)
  "Page output LINES as the module does: skip OFFSET, show LIMIT (0: all).
EMPTY is the text for no lines; TOOL names the tool in errors.  `--'
separator lines are kept between shown lines but never counted."
  (let* ((marks (cl-loop with pending = nil
                         for line in lines
                         if (equal line "--") do (setq pending t)
                         else collect (prog1 (cons line pending) (setq pending nil))))
         (total (length marks)))
    (when (and (> total 0) (>= offset total))
      (error "%s: offset %d is past the last output line; this search has %d output line%s \
\(use an offset from 0 to %d)" tool offset total (if (= total 1) "" "s") (1- total)))
    (let* ((end (if (zerop limit) total (min total (+ offset limit))))
           (text (if (zerop total) empty
                   (cl-loop for (line . break) in (cl-subseq marks offset end)
                            for first = t then nil
                            concat (concat (if (and break (not first)) "--\n" "") line "\n")))))
      (if (and (> total 0) (< end total))
          (format "%s\n[Showing output lines %d-%d of %d. Continue with offset=%d, or raise \
head_limit (0 = unlimited).]\n" text (1+ offset) end total end)
        text))))

(defun mevedel-remote--name-lines (lines directory)
  "Return LINES with host-absolute file names as full TRAMP names.
Relative names stay relative to DIRECTORY, as a local run names them."
  (let ((prefix (mevedel-remote-host directory)))
    (mapcar (lambda (line)
              (if (and (string-prefix-p "/" line) (not (equal line "--")))
                  (concat prefix line)
                line))
            lines)))

(defun mevedel-remote--rg (directory args timeout-ms callback)
  "Run rg with ARGS in the remote DIRECTORY; CALLBACK gets (STATUS . LINES).
STATUS is rg's exit status, `timeout' when TIMEOUT-MS ran out (the
lines so far kept) or a string saying why it could not run.  It runs
through `process-file', to its end: an asynchronous TRAMP process
cleans up from its sentinel with remote commands, which would land in
the middle of whatever other TRAMP command is running then.  The
host's `timeout' bounds it.  Return a function that cancels nothing:
the search is over when this returns."
  (let ((default-directory (file-name-as-directory directory))
        (seconds (number-to-string (max 1 (ceiling timeout-ms 1000.0)))))
    (funcall callback
             (condition-case err
                 (with-temp-buffer
                   (let ((coding-system-for-read 'utf-8-unix))
                     (mevedel-remote-call
                      directory
                      (lambda ()
                        ;; The marker tells rg's status from a lost link.
                        (apply #'process-file "sh" nil (list t nil) nil "-c"
                               "timeout \"$0\" rg \"$@\"; printf '\\nmevedel-rg-exit=%d\\n' $?"
                               seconds args)))
                     (let ((lines (split-string (buffer-string) "\n" t)))
                       (if (not (string-match "\\`mevedel-rg-exit=\\([0-9]+\\)\\'"
                                              (or (car (last lines)) "")))
                           (mevedel-remote--unreachable directory "the connection was lost")
                         (let ((status (string-to-number (match-string 1 (car (last lines))))))
                           (cons (if (eql status 124) 'timeout status) (butlast lines)))))))
               (error (cons (error-message-string err) nil))))
    #'ignore))

(defun mevedel-remote--rg-result (tool directory status lines empty offset limit)
  "Return TOOL's result plist for rg's STATUS and LINES run in DIRECTORY.
EMPTY, OFFSET and LIMIT page the lines as the module pages its own."
  (cond
   ((stringp status) (list :result (format "%s on %s: %s" tool (mevedel-remote-host directory)
                                           status)
                           :status 'error))
   ((and (integerp status) (= status 127))
    (list :result (format "%s: rg is not installed on %s, and the mevedel helper cannot \
run there; install ripgrep (and coreutils' timeout) on that host" tool (mevedel-remote-host directory))
          :status 'error))
   ((and (integerp status) (> status 1))
    (list :result (format "%s on %s failed (rg exit %d): %s" tool (mevedel-remote-host directory)
                          status (string-join lines "\n"))
          :status 'error))
   (t (condition-case err
          (list :result
                (concat (mevedel-remote--page (mevedel-remote--name-lines lines directory)
                                              offset limit empty tool)
                        (when (eq status 'timeout)
                          "\n[Partial results: the search stopped at its time limit before \
finishing. To get complete results, narrow `path', add a `glob' or `type' filter, or make \
`pattern' more specific.]\n")
                        (mevedel-remote--fallback-note directory)))
        (error (list :result (error-message-string err) :status 'error))))))

(defun mevedel-remote-glob (path directory pattern timeout-ms callback)
  "List the files matching PATTERN below PATH on DIRECTORY's host.
PATH is as the model gave it (relative to the remote DIRECTORY, or
absolute); CALLBACK gets the result plist.  Return a cancel function."
  (mevedel-remote--rg
   directory (append (mevedel-remote--rg-glob-args pattern)
                     (when path (list (mevedel-remote--host-name path directory))))
   timeout-ms
   (lambda (outcome)
     (funcall callback (mevedel-remote--rg-result "Glob" directory (car outcome) (cdr outcome)
                                                  "No files found." 0 0)))))

(defun mevedel-remote-grep (path directory options timeout-ms callback)
  "Grep below PATH on DIRECTORY's host with OPTIONS, the module's plist.
PATH, TIMEOUT-MS and CALLBACK are as in `mevedel-remote-glob'.  Return a cancel
function."
  (mevedel-remote--rg
   directory (append (mevedel-remote--rg-grep-args options)
                     (when path (list (mevedel-remote--host-name path directory))))
   timeout-ms
   (lambda (outcome)
     (funcall callback
              (mevedel-remote--rg-result
               "Grep" directory (car outcome) (cdr outcome)
               (if (equal (plist-get options :output-mode) "files_with_matches")
                   "No files found." "No matches found.")
               (or (plist-get options :offset) 0) (or (plist-get options :head-limit) 0))))))

(defun mevedel-remote--fetch (file start end)
  "Return bytes START to END (exclusive) of the remote FILE, a unibyte string."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (let ((coding-system-for-read 'binary))
      (insert-file-contents-literally file nil start end))
    (buffer-string)))

(defun mevedel-remote--first-chunk (file)
  "Return (SIZE . BYTES): the remote FILE's size and its first chunk.
One command on the host, one round trip: the size and the first
`mevedel-remote-read-chunk' bytes (base64, so any byte survives the
shell).  Nil when FILE is not a readable regular file there."
  (with-temp-buffer
    (let ((status (process-file
                   "sh" nil t nil "-c"
                   "[ -f \"$0\" ] && [ -r \"$0\" ] || exit 3; wc -c < \"$0\"; head -c \"$1\" \"$0\" | base64"
                   (mevedel-remote-local-name file) (number-to-string mevedel-remote-read-chunk))))
      (when (eql status 0)
        (goto-char (point-min))
        (let ((size (string-to-number (buffer-substring (point) (line-end-position)))))
          (forward-line 1)
          (cons size (base64-decode-string
                      (replace-regexp-in-string "\\s-+" "" (buffer-substring (point) (point-max))))))))))

(defun mevedel-remote-read-text (file page)
  "Return the start of the remote text FILE that PAGE needs, or nil.
PAGE is Read's (:offset :limit ...).  The size and the first chunk of
`mevedel-remote-read-chunk' bytes come in one round trip; further
chunks follow only until the page's last line is in, never the whole
file unless the page needs it.  Return (TEXT . COMPLETE), TEXT
decoded, COMPLETE non-nil when it is the whole file, or nil when FILE
is not a regular file there or is binary (a NUL byte in its first
chunk): those go the local way, which says why."
  (mevedel-remote-call
   file
   (lambda ()
     (when-let* ((first (mevedel-remote--first-chunk file)))
       (let* ((size (car first))
              (bytes (cdr first))
              (want (+ (or (plist-get page :offset) 1) (or (plist-get page :limit) 2000) 1))
              (lines (cl-count ?\n bytes)))
         (unless (string-search "\0" bytes)
           (while (and (< (length bytes) size) (< lines want))
             (let ((chunk (mevedel-remote--fetch
                           file (length bytes)
                           (min size (+ (length bytes) mevedel-remote-read-chunk)))))
               (setq lines (+ lines (cl-count ?\n chunk))
                     bytes (concat bytes chunk))))
           (cons (decode-coding-string bytes 'utf-8) (>= (length bytes) size))))))))

(defun mevedel-remote-line-count (file)
  "Return how many lines the remote FILE has, counted on its host.
A last line without a newline counts, as Read counts it."
  (mevedel-remote-call
   file
   (lambda ()
     (with-temp-buffer
       (let ((size (file-attribute-size (file-attributes file))))
         (process-file "wc" nil t nil "-l" (mevedel-remote-local-name file))
         (+ (string-to-number (buffer-string))
            (if (and (> size 0)
                     (not (equal (mevedel-remote--fetch file (1- size) size) "\n")))
                1 0)))))))

(defun mevedel-remote--fallback (tool path directory query timeout-ms callback)
  "Run TOOL's QUERY below PATH with rg on DIRECTORY's host; settle CALLBACK."
  (if (equal tool "Grep")
      (mevedel-remote-grep path directory query timeout-ms callback)
    (mevedel-remote-glob path directory query timeout-ms callback)))

(defun mevedel-remote-with-helper (directory use fallback &optional host)
  "Call USE with the helper's connection on DIRECTORY's host, else FALLBACK.
The helper is loaded and started by the first call that needs it on a
host; when it cannot run there (no binary for the host's architecture,
which is never built mid-call, or a failed start) FALLBACK runs, then
and for every later call, and the reason is said once per host.
FALLBACK runs only when TRAMP is free (`mevedel-remote-when-free'), as
it may be reached from the helper's process filter.  HOST, when given,
is DIRECTORY's `mevedel-remote-host', already known: each TRAMP name
operation costs a fraction of a helper round trip."
  (let* ((host (or host (mevedel-remote-host directory)))
         (helper (gethash host mevedel-remote--helpers)))
    (cond
     ((not (require 'mevedel-remote-helper nil t))
      (mevedel-remote-when-free fallback))
     ((and helper (not (eq (car-safe helper) :error))
           (mevedel-remote-helper-live-p helper))
      (funcall use helper))
     ((eq (car-safe helper) :error) (mevedel-remote-when-free fallback))
     (t
      ;; A helper lost with its connection starts again.
      (remhash host mevedel-remote--helpers)
      (mevedel-remote-helper-ensure
       directory
       (lambda (connection)
         (if (or (not (eq (car-safe connection) :error))
                 (mevedel-remote--connected-p directory))
             (progn
               (puthash host connection mevedel-remote--helpers)
               (mevedel-remote-fast-names directory)
               (mevedel-remote-with-helper directory use fallback host))
           ;; The host is unreachable, not without a helper: the
           ;; fallback says so, and the next call tries the helper again.
           (mevedel-remote-when-free fallback))))))))

(defun mevedel-remote--helper-entry (file)
  "Return FILE's host's entry in `mevedel-remote--helpers', or nil."
  (gethash (or (car (mevedel-remote--split file)) (mevedel-remote-host file))
           mevedel-remote--helpers))

(defun mevedel-remote-has-helper-p (directory)
  "Return non-nil while the remote DIRECTORY's host has mevedel's helper running.
Read's permission relies on it: the helper checks where a file really
is (`mevedel-remote-read-page')."
  (let ((helper (mevedel-remote--helper-entry directory)))
    (and helper (not (eq (car-safe helper) :error))
         (mevedel-remote-helper-live-p helper))))

(defun mevedel-remote-helper-problem (file)
  "Return why the helper cannot run on FILE's host, or nil when unknown.
Known once `mevedel-remote-with-helper' fell back for that host."
  (let ((helper (mevedel-remote--helper-entry file)))
    (and (eq (car-safe helper) :error) (cadr helper))))

(defvar mevedel-remote--ahead (make-hash-table :test #'equal)
  "Pages asked ahead of their Read: (FILE DISPLAY PAGE) to (TIME ANSWER WAITER).
ANSWER is (STATUS VALUE) once the helper has answered; WAITER is the
Read's callback once the Read has asked.")

(defconst mevedel-remote--ahead-seconds 0.25
  "How long a page asked ahead may wait for its Read.
Longer means the Read waited for something (a question to the user):
its answer would be older than the Read, so it is asked again.")

(defun mevedel-remote-read-page-ahead (file display page)
  "Ask FILE's host now for the PAGE a Read will ask for, naming it DISPLAY.
Only when the host's helper is running already: this must cost the
call nothing.  `mevedel-remote-read-page' with the same arguments soon
after takes the answer, arrived or on its way, instead of asking."
  (when-let* ((conn (mevedel-remote--helper-entry file))
              ((not (eq (car-safe conn) :error)))
              ((mevedel-remote-helper-live-p conn))
              (split (mevedel-remote--split file)))
    (let ((now (float-time))
          (entry (list (float-time) nil nil)))
      (maphash (lambda (key old)
                 (when (> (- now (car old)) mevedel-remote--ahead-seconds)
                   (remhash key mevedel-remote--ahead)))
               mevedel-remote--ahead)
      (puthash (list file display page) entry mevedel-remote--ahead)
      (mevedel-remote-helper-read
       conn (cdr split) (append (list :display display) page)
       (lambda (status value)
         (if (nth 2 entry)
             (funcall (nth 2 entry) status value)
           (setf (nth 1 entry) (list status value))))))))

(defun mevedel-remote--take-ahead (file display page callback)
  "Give CALLBACK the answer to PAGE of FILE, named DISPLAY, asked ahead.
Return nil when none was asked, or too long ago.
An answer that is an error is not given: the Read asks again, and
meets the error, or a reconnected host, itself."
  (let* ((key (list file display page))
         (entry (gethash key mevedel-remote--ahead)))
    (when entry
      (remhash key mevedel-remote--ahead))
    (when (and entry (<= (- (float-time) (car entry)) mevedel-remote--ahead-seconds)
               (not (eq (car (nth 1 entry)) 'error)))
      (if (nth 1 entry)
          (apply callback (nth 1 entry))
        (setf (nth 2 entry) callback))
      t)))

(defun mevedel-remote--host-and-local (file)
  "Return (HOST . LOCAL): FILE's TRAMP prefix and its name on the host.
String work for a plain name under a known prefix, no handler search."
  (let* ((split (mevedel-remote--split file))
         (local (or (cdr split) (mevedel-remote-local-name file))))
    (cons (cond (split (car split))
                ((string-suffix-p local file)
                 (substring-no-properties file 0 (- (length file) (length local))))
                (t (mevedel-remote-host file)))
          local)))

(defun mevedel-remote-read-page (file display page callback fallback)
  "Read one PAGE of the remote text FILE on its host, named DISPLAY.
PAGE is (:offset :limit :char-offset :root); with :root, a host-side
directory, the helper refuses a FILE whose real name (links resolved)
is outside it.  The helper pages it where the file is, so one request
crosses the link whatever the file's size;
CALLBACK gets `ok' and (:text TEXT) or `error' and (SYMBOL MESSAGE),
as the local core's callbacks do.  Without the helper, FALLBACK (no
arguments) runs instead.  The same page asked ahead of the Read
\=(`mevedel-remote-read-page-ahead') is taken rather than asked again."
  (pcase-let* ((`(,host . ,local) (mevedel-remote--host-and-local file))
               (ask (lambda ()
                      (mevedel-remote-with-helper
                       ;; LOCAL is the host's name: string work, no handler search.
                       (concat host (let ((file-name-handler-alist nil)) (file-name-directory local)))
                       (lambda (conn)
                         (mevedel-remote-helper-read conn local (append (list :display display) page)
                                                     callback))
                       fallback host))))
    (unless (mevedel-remote--take-ahead
             file display page
             (lambda (status value)
               (if (eq status 'ok) (funcall callback status value) (funcall ask))))
      (funcall ask))))

(defun mevedel-remote--media-copy (file bytes)
  "Return a private local file holding BYTES, named with FILE's extension."
  (let ((coding-system-for-write 'binary)
        (extension (file-name-extension file)))
    (make-temp-file "mevedel-remote-media-" nil (and extension (concat "." extension)) bytes)))

(defun mevedel-remote--media-rest (conn local display first settle)
  "Fetch the rest of the remote media file LOCAL on CONN; SETTLE with its copy.
FIRST is the answer to its first request, (:bytes :size); the other
requests go out together, each for 32 times `mevedel-remote-read-chunk'
bytes at most.  DISPLAY names the file in errors."
  (let* ((size (plist-get first :size))
         (step (* 32 mevedel-remote-read-chunk))
         (parts (list (cons 0 (plist-get first :bytes))))
         (starts (and (< (length (plist-get first :bytes)) size)
                      (number-sequence (length (plist-get first :bytes)) (1- size)
                                       step)))
         (waiting (length starts))
         (done (lambda ()
                 (funcall settle 'ok
                          (mevedel-remote--media-copy
                           local (apply #'concat (mapcar #'cdr (sort parts #'car-less-than-car))))))))
    (if (null starts)
        (funcall done)
      (dolist (start starts)
        (mevedel-remote-helper-read
         conn local (list :display display :bytes t :start start
                          :length (min step (- size start)))
         (lambda (status value)
           (cond
            ((not (eq status 'ok)) (funcall settle status value))
            ((not (eql (plist-get value :size) size))
             (funcall settle 'error
                      (list 'mevedel-core-resource-error
                            (format "Read `%s': the remote file changed while it was read; \
read it again" display))))
            (t (push (cons start (plist-get value :bytes)) parts)
               (when (zerop (cl-decf waiting)) (funcall done))))))))))

(defun mevedel-remote-read-media (file display root limit callback fallback)
  "Fetch the remote image or PDF FILE, named DISPLAY, through its host's helper.
Read renders it here, as a local file: only its bytes cross the link,
through the helper's byte reads, not a TRAMP copy.  The first
`mevedel-remote-read-chunk' bytes come with the file's size in one
request, so a file over LIMIT bytes fails without the rest crossing,
and a small one takes one round trip; the rest is asked for at once.
CALLBACK gets `ok' and a private local copy with FILE's extension (the
caller deletes it), or `error' and (SYMBOL MESSAGE), once.  Without
the helper, FALLBACK (no arguments) runs instead.  ROOT is as :root in
`mevedel-remote-read-page'.  Return a function that drops the fetch:
CALLBACK is not called, no copy is left."
  (pcase-let* ((`(,host . ,local) (mevedel-remote--host-and-local file))
               (settled nil)
               (settle (lambda (status value)
                         (if settled
                             (when (eq status 'ok) (delete-file value))
                           (setq settled t)
                           (funcall callback status value)))))
    (mevedel-remote-with-helper
     ;; LOCAL is the host's name: string work, no handler search.
     (concat host (let ((file-name-handler-alist nil)) (file-name-directory local)))
     (lambda (conn)
       (mevedel-remote-helper-read
        conn local (list :display display :root root :bytes t :start 0
                         :length mevedel-remote-read-chunk)
        (lambda (status value)
          (cond
           ((not (eq status 'ok)) (funcall settle status value))
           ((> (plist-get value :size) limit)
            (funcall settle 'error
                     (list 'mevedel-core-resource-error
                           (format "Read `%s': the remote file has %d bytes, more than the %d \
a remote image or PDF may have (`mevedel-tool-fs-remote-read-limit')"
                                   display (plist-get value :size) limit))))
           (t (condition-case err
                  (mevedel-remote--media-rest conn local display value settle)
                (error (funcall settle 'error
                                (list 'mevedel-core-resource-error
                                      (format "Read `%s': %s" display
                                              (error-message-string err)))))))))))
     fallback host)
    (lambda () (setq settled t))))

(defun mevedel-remote-search (tool path directory display query timeout-ms callback)
  "Run TOOL (\"Glob\" or \"Grep\") on DIRECTORY's host; settle CALLBACK once.
PATH is the model's :path (nil: DIRECTORY), DISPLAY how a local run
names it, QUERY the module's pattern or options.  The remote helper
searches when it runs on that host, else rg there; the tree never
crosses the link.  Return a cancel function."
  (let* ((cancel #'ignore)
         (settled nil)
         (settle (lambda (result) (unless settled (setq settled t) (funcall callback result))))
         (root (mevedel-remote-local-name (expand-file-name (or path ".") directory))))
    (mevedel-remote-with-helper
     directory
     (lambda (helper)
       (let ((id (funcall (if (equal tool "Grep") #'mevedel-remote-helper-grep
                            #'mevedel-remote-helper-glob)
                          helper
                          (if (equal tool "Grep")
                              (list :path root :display display :options query
                                    :timeout-ms timeout-ms)
                            (list :path root :display display :pattern query
                                  :timeout-ms timeout-ms))
                          (lambda (status value)
                            (funcall settle (if (eq status 'ok)
                                                (list :result (plist-get value :text))
                                              (list :result (cadr value) :status 'error)))))))
         (setq cancel (lambda () (mevedel-remote-helper-cancel helper id)))))
     (lambda ()
       (unless settled
         (setq cancel (mevedel-remote--fallback tool path directory query timeout-ms settle)))))
    (lambda () (funcall cancel) (funcall settle (list :result "Cancelled." :status 'error)))))

;;;; ApplyPatch's writes

(defun mevedel-remote-patch-mirror (targets)
  "Copy the remote files of TARGETS into a private local mirror.
TARGETS are ApplyPatch's (AUTHORED ABS ...) with ABS remote.  Return
\(DIRECTORY . MAP), MAP an alist from each remote ABS to its mirror
file (which exists when the remote file does), the remote file's
attributes and the SHA-256 of its bytes (nil when it does not exist),
so that a write can tell the file changed meanwhile."
  (let ((dir (file-name-as-directory (make-temp-file "mevedel-patch-mirror-" t)))
        (map nil)
        (index 0))
    (set-file-modes dir #o700)
    (dolist (target targets)
      (let* ((abs (nth 1 target))
             (mirror (expand-file-name (format "%d/%s" (cl-incf index) (file-name-nondirectory abs))
                                       dir))
             (attrs (mevedel-remote-call abs (lambda () (file-attributes abs)))))
        (make-directory (file-name-directory mirror) t)
        (when (and attrs (not (eq (file-attribute-type attrs) t)))
          (mevedel-remote-call
           abs (lambda ()
                 (let ((coding-system-for-read 'binary) (coding-system-for-write 'binary))
                   (with-temp-buffer
                     (set-buffer-multibyte nil)
                     (insert-file-contents-literally abs)
                     (write-region nil nil mirror nil 'silent))))))
        (push (list abs mirror attrs
                    (and (file-exists-p mirror)
                         (with-temp-buffer
                           (set-buffer-multibyte nil)
                           (insert-file-contents-literally mirror)
                           (secure-hash 'sha256 (current-buffer)))))
              map)))
    (cons dir (nreverse map))))

(defun mevedel-remote-patch-write (writes)
  "Write the new bytes of WRITES to their remote files: all, or none.
WRITES is a list of (REMOTE LOCAL ATTRS HASH): the remote file, the
local file holding its new bytes (nil: delete it), and the attributes
and SHA-256 it had when read (nil: it did not exist).  The remote
helper does it in one request when it runs on the host
\=(`mevedel-remote-helper-write-all'), else TRAMP does
\=(`mevedel-remote--patch-write-tramp').  Either way a target changed
since it was read, or any failure, leaves every file as it was and
signals, naming the file."
  (if-let* ((conn (mevedel-remote--helper-now (caar writes))))
      (mevedel-remote--patch-write-helper conn writes)
    (mevedel-remote--patch-write-tramp writes)))

(defun mevedel-remote--await (done what seconds)
  "Wait up to SECONDS for DONE to return non-nil; return its value.
WHAT names what is awaited, for the error when it does not come."
  (let ((deadline (+ (float-time) seconds))
        value)
    (while (and (not (setq value (funcall done))) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or value (error "No answer within %s seconds from %s" seconds what))))

(defun mevedel-remote--helper-now (file)
  "Return the running helper's connection on FILE's host, or nil.
Starts it when it is not running yet; nil when it cannot run there."
  (let ((answer nil))
    (mevedel-remote-with-helper
     (file-name-directory file)
     (lambda (conn) (setq answer (list conn)))
     (lambda () (setq answer (list nil))))
    (car (mevedel-remote--await (lambda () answer)
                                (format "the mevedel helper on %s" (mevedel-remote-host file))
                                (+ mevedel-remote-helper-start-timeout
                                   mevedel-remote-connect-timeout)))))

(defun mevedel-remote--patch-write-helper (conn writes)
  "Have the helper of CONN write WRITES (see `mevedel-remote-patch-write')."
  (let ((answer nil))
    (mevedel-remote-helper-write-all
     conn
     (mapcar
      (pcase-lambda (`(,remote ,local ,attrs ,hash))
        (list :path (mevedel-remote-local-name remote)
              :data (and local
                         (with-temp-buffer
                           (set-buffer-multibyte nil)
                           (insert-file-contents-literally local)
                           (buffer-string)))
              :delete (not local)
              :expect-hash (cond (hash) ((not attrs) ""))))
      writes)
     (lambda (status value) (setq answer (list status value))))
    (pcase (mevedel-remote--await (lambda () answer)
                                  (format "the mevedel helper on %s" (mevedel-remote-host (caar writes)))
                                  mevedel-remote-connect-timeout)
      (`(ok ,_) nil)
      (`(error (,_ ,message)) (error "%s" message)))))

(defun mevedel-remote--patch-write-tramp (writes)
  "Write WRITES through TRAMP (see `mevedel-remote-patch-write').
Each new file is first written beside its target on the host, mode
kept; only when every one is there are they renamed over their
targets (atomic on the host), and deletions done.  A target changed
since it was read (by size and time), or any failure before the
renames, removes what was written beside and signals."
  (let ((staged nil))
    (condition-case err
        (progn
          (pcase-dolist (`(,remote ,_ ,attrs . ,_) writes)
            (let ((now (mevedel-remote-call remote (lambda () (file-attributes remote)))))
              (unless (equal (and attrs (list (file-attribute-size attrs)
                                              (file-attribute-modification-time attrs)))
                             (and now (list (file-attribute-size now)
                                            (file-attribute-modification-time now))))
                (error "`%s' changed on %s since the patch read it" (mevedel-remote-local-name remote)
                       (mevedel-remote-host remote)))))
          (pcase-dolist (`(,remote ,local ,attrs . ,_) writes)
            (when local
              (let ((beside (mevedel-remote-call
                             remote
                             (lambda ()
                               (make-directory (file-name-directory remote) t)
                               (make-temp-file (expand-file-name
                                                (concat "." (file-name-nondirectory remote)
                                                        ".mevedel-")
                                                (file-name-directory remote)))))))
                (push (cons beside remote) staged)
                (mevedel-remote-call
                 remote (lambda ()
                          (copy-file local beside t)
                          (when attrs
                            (set-file-modes beside (file-modes remote)))))))))
      (error
       (dolist (pair staged) (ignore-errors (delete-file (car pair))))
       (signal (car err) (cdr err))))
    (pcase-dolist (`(,beside . ,remote) (nreverse staged))
      (mevedel-remote-call remote (lambda () (rename-file beside remote t))))
    (pcase-dolist (`(,remote ,local . ,_) writes)
      (unless local
        (mevedel-remote-call remote (lambda () (delete-file remote)))))))

;;;; The mutation lease

(defvar mevedel-remote--leases (make-hash-table :test #'equal)
  "Workspaces whose lease this Emacs holds: workspace → (TOKEN . TIMER).")

(defvar mevedel-remote--read-only (make-hash-table :test #'equal)
  "Workspaces this Emacs opened read-only, beside another session's lease.")

(defvar mevedel-remote--seen (make-hash-table :test #'equal)
  "Workspaces whose lease another session held when last looked at.
Workspace → the holder, (TEXT . AGE-SECONDS); set when a session opens
there (`mevedel-remote-lease-look'), kept fresh by every later look.")

(defun mevedel-remote--lease-file (workspace)
  "Return the name of the remote WORKSPACE's lease file."
  (expand-file-name ".mevedel/lease" workspace))

(defun mevedel-remote--token (session-id)
  "Return the lease text naming SESSION-ID of this Emacs."
  (format "%s %s@%s pid %d" session-id (user-login-name) (system-name) (emacs-pid)))

(defun mevedel-remote-lease-holder (workspace)
  "Return (TEXT . AGE-SECONDS) of the lease on WORKSPACE, or nil when free."
  (let* ((file (mevedel-remote--lease-file workspace))
         (holder (mevedel-remote-call
                  workspace
                  (lambda ()
                    ;; Another machine changes the lease behind TRAMP's
                    ;; back: its cached attributes would show a lease
                    ;; released there as still held, by nobody.
                    (when-let* ((attrs (let ((remote-file-name-inhibit-cache t))
                                         (file-attributes file))))
                      (cons (with-temp-buffer
                              (ignore-error file-missing (insert-file-contents file))
                              (string-trim (buffer-string)))
                            (float-time (time-subtract (current-time)
                                                       (file-attribute-modification-time
                                                        attrs)))))))))
    ;; What the header says of another session's lease follows every look.
    (when (gethash workspace mevedel-remote--seen)
      (if (and holder (not (equal (car holder) (car (gethash workspace mevedel-remote--leases)))))
          (puthash workspace holder mevedel-remote--seen)
        (remhash workspace mevedel-remote--seen)))
    holder))

(defun mevedel-remote--renew (workspace token)
  "Rewrite the lease of WORKSPACE with TOKEN: its holder is alive."
  (let ((file (mevedel-remote--lease-file workspace)))
    (condition-case nil
        (mevedel-remote-call workspace
                             (lambda ()
                               (when (equal (car (mevedel-remote-lease-holder workspace)) token)
                                 (write-region token nil file nil 'silent))))
      (error nil))))

(defun mevedel-remote--take (workspace token)
  "Try to create WORKSPACE's lease naming TOKEN; return non-nil when taken.
Creation is exclusive on the host, so two sessions cannot both take it."
  (let ((file (mevedel-remote--lease-file workspace)))
    (mevedel-remote-call
     workspace
     (lambda ()
       (make-directory (file-name-directory file) t)
       (condition-case nil
           (progn (write-region token nil file nil 'silent nil 'excl) t)
         (file-already-exists nil))))))

(defun mevedel-remote--held (workspace token)
  "Record that this Emacs has WORKSPACE's lease as TOKEN, renewing it."
  (remhash workspace mevedel-remote--seen)
  (let ((timer (run-at-time (/ mevedel-remote-lease-stale-seconds 3.0)
                            (/ mevedel-remote-lease-stale-seconds 3.0)
                            #'mevedel-remote--renew workspace token)))
    (puthash workspace (cons token timer) mevedel-remote--leases)))

(defun mevedel-remote-lease-message (workspace holder)
  "Return the message saying HOLDER, (TEXT . AGE), has WORKSPACE's lease."
  (format "%s is being written by session %s (last seen %ds ago; stale after %ds)"
          workspace (car holder) (round (cdr holder)) mevedel-remote-lease-stale-seconds))

(defun mevedel-remote-lease-open-read-only (workspace)
  "Open the remote WORKSPACE read-only: no write of this Emacs takes its lease."
  (puthash workspace t mevedel-remote--read-only))

(defun mevedel-remote-read-only-p (workspace)
  "Return non-nil when this Emacs opened the remote WORKSPACE read-only."
  (gethash workspace mevedel-remote--read-only))

(defun mevedel-remote--ask (workspace holder)
  "Ask what to do about HOLDER's lease of WORKSPACE: a policy symbol."
  (let ((answer (read-multiple-choice
                 (concat (mevedel-remote-lease-message workspace holder) ".  ")
                 '((?w "wait" "Wait until it is released or goes stale")
                   (?t "take over" "Take it over (only once it is stale)")
                   (?r "read-only" "Open without writing")
                   (?q "quit" "Do not write")))))
    (pcase (car answer) (?w 'wait) (?t 'take-over) (?r 'read-only) (_ 'fail))))

(cl-defstruct (mevedel-remote--waiter (:constructor mevedel-remote--waiter-make)
                                      (:copier nil))
  "A session of this Emacs waiting for a remote workspace's lease."
  workspace token policy deadline then on-wait holder timer)

(defvar mevedel-remote--waiters nil
  "The lease waits of this Emacs, oldest first: `mevedel-remote--waiter's.")

(defun mevedel-remote--attempt (waiter)
  "Try once to give WAITER its workspace's lease; ask the user for policy `ask'.
Return t when taken, a refusal message, or the holder, (TEXT . AGE),
to wait for.  A free lease is taken; a stale one is removed first
under the policy `take-over'."
  (let* ((workspace (mevedel-remote--waiter-workspace waiter))
         (token (mevedel-remote--waiter-token waiter))
         (outcome nil))
    (while (not outcome)
      ;; Look before taking: a refused exclusive write would have TRAMP
      ;; echo "File already exists" at every look of a wait.
      (let ((holder (mevedel-remote-lease-holder workspace))
            (policy (mevedel-remote--waiter-policy waiter)))
        (cond
         ;; Free: take it, unless another session just did.
         ((null holder) (when (mevedel-remote--take workspace token) (setq outcome t)))
         ((equal (car holder) token) (setq outcome t))
         (t
          (when (eq policy 'ask)
            (setq policy (if noninteractive 'fail (mevedel-remote--ask workspace holder)))
            (setf (mevedel-remote--waiter-policy waiter) policy))
          (pcase policy
            ('read-only
             (mevedel-remote-lease-open-read-only workspace)
             (setq outcome (concat (mevedel-remote-lease-message workspace holder)
                                   "; opened read-only")))
            ((and (or 'wait 'take-over)
                  (guard (> (float-time) (mevedel-remote--waiter-deadline waiter))))
             (setq outcome (format "%s; waited %ds" (mevedel-remote-lease-message workspace holder)
                                   mevedel-remote-lease-wait)))
            ((and 'take-over (guard (> (cdr holder) mevedel-remote-lease-stale-seconds)))
             (mevedel-remote-call workspace
                                  (lambda () (delete-file (mevedel-remote--lease-file workspace)))))
            ((or 'wait 'take-over) (setq outcome holder))
            (_ (setq outcome (mevedel-remote-lease-message workspace holder))))))))
    outcome))

(defun mevedel-remote--settle (waiter outcome)
  "End WAITER's wait with OUTCOME (t or a refusal message) and tell its caller."
  (setq mevedel-remote--waiters (delq waiter mevedel-remote--waiters))
  (when-let* ((timer (mevedel-remote--waiter-timer waiter))) (cancel-timer timer))
  (let ((workspace (mevedel-remote--waiter-workspace waiter)))
    (when (and (eq outcome t) (not (gethash workspace mevedel-remote--leases)))
      (mevedel-remote--held workspace (mevedel-remote--waiter-token waiter))))
  (when (mevedel-remote--waiter-holder waiter) (force-mode-line-update t))
  (funcall (mevedel-remote--waiter-then waiter) (if (eq outcome t) nil outcome)))

(defun mevedel-remote--step (waiter)
  "Look at WAITER's lease again: take it, give up, or wait on.
Each look is a short TRAMP operation between two timer runs, so Emacs
stays responsive while a session waits, headless runs included."
  (when (memq waiter mevedel-remote--waiters)
    (let ((outcome (condition-case err
                       (mevedel-remote--attempt waiter)
                     (error (error-message-string err)))))
      (if (not (consp outcome))
          (mevedel-remote--settle waiter outcome)
        (let ((first (null (mevedel-remote--waiter-holder waiter))))
          (setf (mevedel-remote--waiter-holder waiter) outcome)
          (when first
            (message "mevedel: waiting for the lease: %s (M-x %s opens it read-only)"
                     (mevedel-remote-lease-message (mevedel-remote--waiter-workspace waiter) outcome)
                     'mevedel-remote-lease-stop-waiting)))
        (when-let* ((on-wait (mevedel-remote--waiter-on-wait waiter)))
          (funcall on-wait (mevedel-remote-lease-wait-text
                            (mevedel-remote--waiter-workspace waiter))))
        (force-mode-line-update t)
        (setf (mevedel-remote--waiter-timer waiter)
              (run-at-time mevedel-remote-lease-poll nil
                           #'mevedel-remote-when-free
                           (lambda () (mevedel-remote--step waiter))))))))

(defun mevedel-remote-lease-acquire (workspace session-id then &optional policy on-wait)
  "Make SESSION-ID of this Emacs the one writer of the remote WORKSPACE.
Call THEN with nil once it is, or with a message saying why not (who
holds the lease).  It is at once when this session holds the lease
already, when it is free, and for a local WORKSPACE.  Held by another
session, POLICY (default `mevedel-remote-lease-policy') decides: wait
for it, take it over once stale, open read-only, or refuse.  Waiting
never blocks Emacs: THEN runs later, from a timer, and ON-WAIT, when
given, is called with `mevedel-remote-lease-wait-text' at every look;
`mevedel-remote-lease-stop-waiting' ends the wait read-only.  Return
a function that drops the wait without calling THEN."
  (let ((token (mevedel-remote--token session-id)))
    (cond
     ((not (mevedel-remote-p workspace)) (funcall then nil) #'ignore)
     ((mevedel-remote-read-only-p workspace)
      (funcall then (format "%s was opened read-only beside another session's lease; \
nothing is written" workspace))
      #'ignore)
     ((equal (car (gethash workspace mevedel-remote--leases)) token) (funcall then nil) #'ignore)
     (t
      (let ((waiter (mevedel-remote--waiter-make
                     :workspace workspace :token token :then then :on-wait on-wait
                     :policy (or policy mevedel-remote-lease-policy)
                     :deadline (+ (float-time) mevedel-remote-lease-wait))))
        (push waiter mevedel-remote--waiters)
        (mevedel-remote--step waiter)
        (lambda ()
          (when (memq waiter mevedel-remote--waiters)
            (setq mevedel-remote--waiters (delq waiter mevedel-remote--waiters))
            (when-let* ((timer (mevedel-remote--waiter-timer waiter))) (cancel-timer timer))
            (force-mode-line-update t))))))))

(defun mevedel-remote-lease-open-message (workspace holder)
  "Return the message of a session opening WORKSPACE on HOLDER's lease.
HOLDER is (TEXT . AGE); the message says too what this session's
writes will do, by `mevedel-remote-lease-policy'."
  (format "%s; %s" (mevedel-remote-lease-message workspace holder)
          (pcase (if (and (eq mevedel-remote-lease-policy 'ask) noninteractive)
                     'fail
                   mevedel-remote-lease-policy)
            ('ask "this session's first write will ask what to do")
            ('wait "this session's writes will wait for it")
            ('take-over "this session's writes will wait for it, and take it over once stale")
            ('read-only "this session opens it read-only")
            (_ "this session's writes will fail"))))

(defun mevedel-remote-lease-look (workspace session-id)
  "Say at once that another session has the remote WORKSPACE's lease, if so.
SESSION-ID is the session of this Emacs opening WORKSPACE.  The lease
is still taken at its first write (a read-only question locks nobody
out), but the user learns now who writes there: a message, and
`mevedel-remote-lease-seen-text' for the session's header.  The look
is one short TRAMP call, made once the caller's view is up and TRAMP
is free (`mevedel-remote-when-free'); a host that cannot be reached
says nothing here, its first tool call does."
  (run-at-time
   0 nil #'mevedel-remote-when-free
   (lambda ()
     (let ((holder (ignore-error error (mevedel-remote-lease-holder workspace))))
       (if (or (null holder)
               (equal (car holder) (mevedel-remote--token session-id))
               (gethash workspace mevedel-remote--leases))
           (remhash workspace mevedel-remote--seen)
         (puthash workspace holder mevedel-remote--seen)
         (message "mevedel: %s" (mevedel-remote-lease-open-message workspace holder)))
       (force-mode-line-update t)))))

(defun mevedel-remote-lease-seen-text (workspace)
  "Return the text naming the session that has WORKSPACE's lease, or nil.
Known from `mevedel-remote-lease-look' and every later look at the
lease, while this Emacs neither holds it nor waits for it."
  (when-let* ((holder (gethash workspace mevedel-remote--seen)))
    (unless (mevedel-remote-lease-wait-text workspace)
      (format "Lease held by %s" (car holder)))))

(defun mevedel-remote-lease-wait-text (workspace)
  "Return the text showing this Emacs's wait for WORKSPACE's lease, or nil."
  (when-let* ((waiter (cl-find workspace mevedel-remote--waiters
                               :key #'mevedel-remote--waiter-workspace :test #'equal))
              (holder (mevedel-remote--waiter-holder waiter)))
    (format "Waiting for the lease held by %s (seen %ds ago)"
            (car holder) (round (cdr holder)))))

(defun mevedel-remote-lease-stop-waiting (workspace)
  "Stop waiting for the remote WORKSPACE's lease and open it read-only.
The writes that waited are refused, saying so; later ones too, until
the session is opened again."
  (interactive
   (let ((workspaces (delete-dups (mapcar #'mevedel-remote--waiter-workspace
                                          mevedel-remote--waiters))))
     (unless workspaces (user-error "No session waits for a lease"))
     (list (if (cdr workspaces)
               (completing-read "Open read-only: " workspaces nil t)
             (car workspaces)))))
  (unless (cl-find workspace mevedel-remote--waiters
                   :key #'mevedel-remote--waiter-workspace :test #'equal)
    (user-error "No session waits for the lease of %s" workspace))
  (mevedel-remote-lease-open-read-only workspace)
  (dolist (waiter (reverse mevedel-remote--waiters))
    (when (equal (mevedel-remote--waiter-workspace waiter) workspace)
      (mevedel-remote--settle
       waiter
       (format "%s was opened read-only while waiting for another session's lease; \
nothing was written" workspace)))))

(defun mevedel-remote-lease-release (workspace &optional session-id)
  "Give up this Emacs's lease of WORKSPACE, if it has it.
With SESSION-ID, only when that session holds it."
  (when-let* ((held (gethash workspace mevedel-remote--leases))
              ((or (null session-id)
                   (equal (car held) (mevedel-remote--token session-id)))))
    (remhash workspace mevedel-remote--leases)
    (cancel-timer (cdr held))
    (ignore-errors
      (mevedel-remote-call
       workspace
       (lambda ()
         (when (equal (car (mevedel-remote-lease-holder workspace)) (car held))
           (delete-file (mevedel-remote--lease-file workspace))))))))

(defun mevedel-remote--release-all ()
  "Give up every lease of this Emacs, as it exits."
  (dolist (workspace (hash-table-keys mevedel-remote--leases))
    (mevedel-remote-lease-release workspace)))

(add-hook 'kill-emacs-hook #'mevedel-remote--release-all)

(provide 'mevedel-remote)
;;; mevedel-remote.el ends here
