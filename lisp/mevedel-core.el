;;; mevedel-core.el --- Native module loader and Lisp API of mevedel  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; mevedel's performance-critical core is a Rust dynamic module,
;; `mevedel-dyn'.  This file is the only caller of its functions (all
;; named `mevedel-core--...'): it loads the module (which
;; mevedel-core-build.el finds, and builds when it is missing or older
;; than its sources), checks its version before anything relies on it,
;; and wires up the event channel through which background Rust work
;; reaches Lisp.
;;
;; Nothing here builds or loads at `require' or byte-compile time; call
;; `mevedel-core-ensure' (every entry point does) or
;; \\[mevedel-core-build].

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core-build)

;;;; Customization

(defgroup mevedel-core nil
  "Native module of mevedel: build, loading and the event channel."
  :group 'mevedel
  :prefix "mevedel-core-")

;;;; Errors

(define-error 'mevedel-core-version-mismatch
              "mevedel's native module has the wrong version" 'mevedel-core-load-error)

;;;; Module functions (defined by mevedel-dyn at load time)

(declare-function mevedel-core--version "ext:mevedel-dyn" ())
(declare-function mevedel-core--channel-open "ext:mevedel-dyn" (process))
(declare-function mevedel-core--channel-close "ext:mevedel-dyn" ())
(declare-function mevedel-core--events-drain "ext:mevedel-dyn" ())
(declare-function mevedel-core--events-dropped "ext:mevedel-dyn" ())
(declare-function mevedel-core--selftest-events "ext:mevedel-dyn" (count))
(declare-function mevedel-core--selftest-ping "ext:mevedel-dyn" (id))
(declare-function mevedel-core--selftest-panic "ext:mevedel-dyn" (message))
(declare-function mevedel-core--exec-stop-all "ext:mevedel-dyn" (grace-ms))
(declare-function mevedel-core--exec-live-groups "ext:mevedel-dyn" ())
(declare-function mevedel-core--resource-parse "ext:mevedel-dyn" (text))
(declare-function mevedel-core--resource-parse-many "ext:mevedel-dyn" (texts))
(declare-function mevedel-core--truenames "ext:mevedel-dyn" (files))
(declare-function mevedel-core--file-stamps "ext:mevedel-dyn" (files))
(declare-function mevedel-core--resource-prepare "ext:mevedel-dyn" (address args))
(declare-function mevedel-core--resource-attempt-facts "ext:mevedel-dyn" (attempt))
(declare-function mevedel-core--resource-read "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--search-grep "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--search-glob "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--resource-read-text "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--search-grep-texts "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--search-cancel "ext:mevedel-dyn" (id))
(declare-function mevedel-core--search-running "ext:mevedel-dyn" ())
(declare-function mevedel-core--sandbox-probe "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--sandbox-forget-probes "ext:mevedel-dyn" ())
(declare-function mevedel-core--sandbox-decide "ext:mevedel-dyn" (request))
(declare-function mevedel-core--sandbox-prepare "ext:mevedel-dyn" (request))
(declare-function mevedel-core--schema-compile "ext:mevedel-dyn" (descriptor))
(declare-function mevedel-core--schema-check "ext:mevedel-dyn" (tool arguments repair))
(declare-function mevedel-core--schema-index "ext:mevedel-dyn" (tools))
(declare-function mevedel-core--schema-search "ext:mevedel-dyn" (index query))
(declare-function mevedel-core--schema-contract "ext:mevedel-dyn" (tool))
(declare-function mevedel-core--text-normalize "ext:mevedel-dyn" (string))
(declare-function mevedel-core--text-preview "ext:mevedel-dyn" (string budget))
(declare-function mevedel-core--text-failure-patterns "ext:mevedel-dyn" (patterns))
(declare-function mevedel-core--codec-encode "ext:mevedel-dyn" (printed owner))
(declare-function mevedel-core--codec-payload "ext:mevedel-dyn" (printed owner))
(declare-function mevedel-core--codec-scan "ext:mevedel-dyn" (text))
(declare-function mevedel-core--codec-text-bytes "ext:mevedel-dyn" (text))
(declare-function mevedel-core--codec-spans "ext:mevedel-dyn" (text owner vouched))
(declare-function mevedel-core--codec-extract "ext:mevedel-dyn" (text owner vouched))
(declare-function mevedel-core--codec-decode-all "ext:mevedel-dyn" (text))
(declare-function mevedel-core--store-open "ext:mevedel-dyn" (file))
(declare-function mevedel-core--store-close "ext:mevedel-dyn" (store))
(declare-function mevedel-core--store-info "ext:mevedel-dyn" (store))
(declare-function mevedel-core--store-mailbox-post "ext:mevedel-dyn" (store args))
(declare-function mevedel-core--store-mailbox-unread "ext:mevedel-dyn" (store recipient))
(declare-function mevedel-core--store-mailbox-deliver "ext:mevedel-dyn" (store ids))
(declare-function mevedel-core--store-mailbox-deliver-after "ext:mevedel-dyn" (store mailbox ids))
(declare-function mevedel-core--store-transcript-save "ext:mevedel-dyn" (store at props))
(declare-function mevedel-core--store-transcript-consolidate "ext:mevedel-dyn" (store export))
(declare-function mevedel-core--store-transcript-load "ext:mevedel-dyn" (store full))
(declare-function mevedel-core--checkpoint-before "ext:mevedel-dyn" (store turn label paths))
(declare-function mevedel-core--checkpoint-after "ext:mevedel-dyn" (store paths))
(declare-function mevedel-core--checkpoint-note-bash "ext:mevedel-dyn" (store turn label))
(declare-function mevedel-core--checkpoint-turns "ext:mevedel-dyn" (store))
(declare-function mevedel-core--checkpoint-rewind-plan "ext:mevedel-dyn" (store turn))
(declare-function mevedel-core--checkpoint-rewind "ext:mevedel-dyn" (store turn))
(declare-function mevedel-core--checkpoint-diff "ext:mevedel-dyn" (store))
(declare-function mevedel-core--store-flush "ext:mevedel-dyn" (store timeout-ms))
(declare-function mevedel-core--store-info-set "ext:mevedel-dyn" (store pairs))
(declare-function mevedel-core--store-info-get "ext:mevedel-dyn" (store))
(declare-function mevedel-core--store-file-info "ext:mevedel-dyn" (file))
(declare-function mevedel-core--store-input-push "ext:mevedel-dyn" (store text))
(declare-function mevedel-core--store-inputs "ext:mevedel-dyn" (store limit))
(declare-function mevedel-core--exec-start "ext:mevedel-dyn" (request-id spec))
(declare-function mevedel-core--exec-observe "ext:mevedel-dyn" (request-id args))
(declare-function mevedel-core--exec-write "ext:mevedel-dyn" (request-id args))
(declare-function mevedel-core--exec-stop "ext:mevedel-dyn" (request-id args))
(declare-function mevedel-core--exec-stop-by-user "ext:mevedel-dyn" (session id))
(declare-function mevedel-core--exec-input-by-user "ext:mevedel-dyn" (session id chars))
(declare-function mevedel-core--exec-list "ext:mevedel-dyn" (session owner))
(declare-function mevedel-core--exec-teardown "ext:mevedel-dyn" (session))
(declare-function mevedel-core--exec-teardown-all "ext:mevedel-dyn" ())
(declare-function mevedel-core--exec-relay-started "ext:mevedel-dyn" (args))
(declare-function mevedel-core--exec-relay-output "ext:mevedel-dyn" (args))
(declare-function mevedel-core--exec-relay-exit "ext:mevedel-dyn" (args))
(declare-function mevedel-core--exec-relay-failed "ext:mevedel-dyn" (args))
(declare-function mevedel-core--acp-stop-all "ext:mevedel-dyn" (limit-ms))
(declare-function mevedel-core--bash-permission "ext:mevedel-dyn" (source cwd root))
(declare-function mevedel-core--bash-effects "ext:mevedel-dyn" (source cwd root))

;;;; Loading

(defconst mevedel-core-expected-version "0.1.0"
  "Version of mevedel-dyn that this Lisp code was written against.
It must equal the workspace version in Cargo.toml.")

(defun mevedel-core--check-version ()
  "Signal `mevedel-core-version-mismatch' unless the loaded module fits."
  (let ((actual (mevedel-core--version)))
    (unless (equal actual mevedel-core-expected-version)
      (signal 'mevedel-core-version-mismatch
              (list (format (concat "mevedel-dyn is version %s but this mevedel expects %s. "
                                    "Rebuild it with M-x mevedel-core-build (or `make module'), "
                                    "then restart Emacs: a loaded module cannot be replaced")
                            actual mevedel-core-expected-version))))))

(defvar mevedel-core--ready nil
  "Non-nil once the module is loaded, version-checked and wired up.")

(defvar mevedel-core-ready-hook nil
  "Hook run once, when the native module has been loaded and connected.
Lisp that needs the module to set itself up (the tool registry
compiling its declarations) waits for this, so that loading or
byte-compiling mevedel never builds the module.")

(defun mevedel-core-ready-p ()
  "Return non-nil when the native module is loaded and connected."
  mevedel-core--ready)

(defun mevedel-core-ensure ()
  "Make sure the native module is built, loaded, current and connected.
Builds per `mevedel-core-build-policy' when needed.  Signals
`mevedel-core-load-error' (or its child `mevedel-core-version-mismatch')
when the module cannot be used."
  (unless mevedel-core--ready
    (unless (featurep 'mevedel-dyn)
      (when (mevedel-core-build-stale-p)
        (mevedel-core-build-as-policy-says))
      (module-load (mevedel-core-build-module-file)))
    (mevedel-core--check-version)
    (mevedel-core--open-channel)
    (add-hook 'kill-emacs-hook #'mevedel-core-shutdown)
    (setq mevedel-core--ready t)
    (run-hooks 'mevedel-core-ready-hook))
  t)

(defun mevedel-core-version ()
  "Return the version of the loaded native module."
  (mevedel-core-ensure)
  (mevedel-core--version))

;;;; Event channel

(defvar mevedel-core--channel-process nil
  "Pipe process whose output wakes Lisp for queued module events.")

(defvar mevedel-core--event-handlers (make-hash-table :test #'eq)
  "Event kind (a symbol) -> function of one argument, the event data.")

(defun mevedel-core-register-event-handler (kind function)
  "Call FUNCTION with the data of every module event of KIND (a symbol).
Replaces any earlier handler for KIND; FUNCTION nil removes it."
  (if function
      (puthash kind function mevedel-core--event-handlers)
    (remhash kind mevedel-core--event-handlers)))

(defun mevedel-core--dispatch-events (&rest _)
  "Drain the module's event queue and hand each event to its handler.
A handler's error is reported and does not stop later events."
  (dolist (event (mevedel-core--events-drain))
    (let ((handler (gethash (car event) mevedel-core--event-handlers)))
      (if (not handler)
          (message "mevedel: no handler for module event `%s'" (car event))
        (condition-case err
            (funcall handler (cdr event))
          (error (message "mevedel: error in handler for `%s': %s"
                          (car event) (error-message-string err))))))))

(defun mevedel-core--open-channel ()
  "Create the event pipe process and connect the module to it."
  (unless (process-live-p mevedel-core--channel-process)
    (setq mevedel-core--channel-process
          ;; Adaptive read buffering would delay reading a process that
          ;; sends single bytes by up to 50 ms: every reply would wait.
          (let ((process-adaptive-read-buffering nil))
            (make-pipe-process :name "mevedel-events"
                               :buffer nil
                               :coding 'binary
                               :noquery t
                               :filter #'mevedel-core--dispatch-events
                               :sentinel #'ignore)))
    (mevedel-core--channel-open mevedel-core--channel-process)))

(defun mevedel-core-close-channel ()
  "Disconnect the module from Lisp and delete the event pipe process."
  (when (featurep 'mevedel-dyn)
    (mevedel-core--channel-close))
  (when (process-live-p mevedel-core--channel-process)
    (delete-process mevedel-core--channel-process))
  (setq mevedel-core--channel-process nil
        mevedel-core--ready nil))

;;;; Asynchronous requests

(defvar mevedel-core--next-request-id 0
  "Id of the last asynchronous module request.")

(defvar mevedel-core--pending-requests (make-hash-table :test #'eql)
  "Request id -> callback waiting for its `reply' event.")

(defun mevedel-core-request (start callback)
  "Start an asynchronous module request and return its id.
START is called with a fresh request id and must hand it to a module
function.  When the module replies, CALLBACK is called with two
arguments: `ok' and the value, or `error' and (ERROR-SYMBOL MESSAGE)."
  (mevedel-core-ensure)
  (let ((id (cl-incf mevedel-core--next-request-id)))
    (puthash id callback mevedel-core--pending-requests)
    (condition-case err
        (funcall start id)
      (error (remhash id mevedel-core--pending-requests)
             (signal (car err) (cdr err))))
    id))

(defun mevedel-core--handle-reply (data)
  "Deliver DATA, a `reply' event, to the request's callback."
  (pcase-let* ((`(,id ,status . ,rest) data)
               (callback (gethash id mevedel-core--pending-requests)))
    (remhash id mevedel-core--pending-requests)
    (when callback
      (pcase status
        ('ok (funcall callback 'ok (car rest)))
        (_ (funcall callback 'error
                    (list (intern (format "mevedel-core-%s-error" (car rest)))
                          (cadr rest))))))))

(mevedel-core-register-event-handler 'reply #'mevedel-core--handle-reply)

;;;; Self-tests

(defun mevedel-core-channel-selftest (count callback)
  "Send COUNT events from a Rust worker thread through the channel.
When all have arrived, call CALLBACK with a plist (:received N :in-order
BOOL :seconds S)."
  (mevedel-core-ensure)
  (let ((received 0) (in-order t) (start (float-time)))
    (mevedel-core-register-event-handler
     'selftest
     (lambda (n)
       (unless (eql n received) (setq in-order nil))
       (cl-incf received)
       (when (= received count)
         (mevedel-core-register-event-handler 'selftest nil)
         (funcall callback (list :received received :in-order in-order
                                 :seconds (- (float-time) start))))))
    (mevedel-core--selftest-events count)))

(defvar mevedel-core--pong-callbacks (make-hash-table :test #'eql)
  "Ping id -> callback for `mevedel-core-channel-ping'.")

(defun mevedel-core-channel-ping (callback)
  "Ask a Rust worker thread to answer through the channel; call CALLBACK then.
Measures one round trip: Lisp to module to worker to pipe to filter."
  (mevedel-core-ensure)
  (let ((id (cl-incf mevedel-core--next-request-id)))
    (puthash id callback mevedel-core--pong-callbacks)
    (mevedel-core--selftest-ping id)))

(mevedel-core-register-event-handler
 'pong (lambda (id)
         (let ((cb (gethash id mevedel-core--pong-callbacks)))
           (remhash id mevedel-core--pong-callbacks)
           (when cb (funcall cb)))))

;;;; Processes and sandbox

(defun mevedel-core-live-process-groups ()
  "Return the ids of owned process groups that still have members."
  (mevedel-core-ensure)
  (mevedel-core--exec-live-groups))

(defun mevedel-core-stop-all-processes (&optional grace-ms)
  "Stop every owned process group: TERM, then KILL after GRACE-MS (500).
Return the number of groups signalled."
  (mevedel-core-ensure)
  (mevedel-core--exec-stop-all (or grace-ms 500)))

(defcustom mevedel-core-probe-timeout 2000
  "Milliseconds the sandbox probe gives bubblewrap to start and exit."
  :type 'natnum)

(defun mevedel-core-sandbox-probe (callback &optional options)
  "Probe which confinement layers work here, without blocking Emacs.
CALLBACK gets a plist (:bwrap-path :bwrap-works :bwrap-problem
:landlock-abi :landlock-problem :landlock-enforced :helper-path
:helper-problem), or nil if the probe failed.  OPTIONS is a plist:
:timeout-ms (default `mevedel-core-probe-timeout'), :path (where to look
for bwrap; default the PATH of `process-environment'), :helper (default
`mevedel-core-build-helper-file'), :target (default \"local\") and
:refresh (non-nil to probe again instead of answering from the cache
kept per target, path and helper)."
  (mevedel-core-request
   (lambda (id)
     (mevedel-core--sandbox-probe
      id
      (list :timeout-ms (or (plist-get options :timeout-ms) mevedel-core-probe-timeout)
            :path (or (plist-get options :path) (getenv "PATH"))
            :helper (or (plist-get options :helper) (mevedel-core-build-helper-file))
            :target (or (plist-get options :target) "local")
            :refresh (plist-get options :refresh))))
   (lambda (status value) (funcall callback (and (eq status 'ok) value)))))

;;;; Resource addresses, Read, Glob and Grep

(defun mevedel-core-resource-parse (text)
  "Return the canonical spelling of resource address TEXT.
Return TEXT itself when it is already canonical, nil when TEXT is an
ordinary path (no `scheme://' prefix).  A malformed address signals
`mevedel-core-resource-error' naming TEXT and the reason."
  (mevedel-core-ensure)
  (mevedel-core--resource-parse text))

(defun mevedel-core-resource-parse-many (texts)
  "Return the canonical address of each string in TEXTS, in one call.
An ordinary path gives nil; a malformed address signals
`mevedel-core-resource-error'."
  (mevedel-core-ensure)
  (mevedel-core--resource-parse-many texts))

(defun mevedel-core-truenames (files)
  "Return each absolute file name in FILES with its links resolved.
Like `file-truename' (missing parts kept, a dangling link followed),
for many names in one call and without a system call per Lisp step."
  (mevedel-core-ensure)
  (mevedel-core--truenames files))

(defun mevedel-core-file-stamps (files)
  "Return the stamp of each absolute file name in FILES, in one call.
A stamp is a string that stays `equal' while the file is unchanged
\(kind, size, modification time, inode; links followed), nil for a
missing file."
  (mevedel-core-ensure)
  (mevedel-core--file-stamps files))

(defun mevedel-core-resource-prepare (address operation context)
  "Prepare resource ADDRESS for OPERATION and return an opaque attempt.
OPERATION is one of the strings \"Read\", \"Glob\", \"Grep\" and
\"ApplyPatch\".  CONTEXT is a plist: :session-dir, :workspace and
:docs-root (directories or nil), :memory-roots (a list of (PATH KIND
LABEL)), :skills (a list of (NAME SOURCE-KEY ROOT ORIGIN PLUGIN)) and
:recall-days.  Malformed addresses, unsupported operations and
containment failures signal `mevedel-core-resource-error'."
  (mevedel-core-ensure)
  (mevedel-core--resource-prepare
   address
   (list :operation operation
         :session-dir (plist-get context :session-dir)
         :workspace (plist-get context :workspace)
         :docs-root (plist-get context :docs-root)
         :memory-roots (plist-get context :memory-roots)
         :skills (plist-get context :skills)
         :recall-days (or (plist-get context :recall-days) 14))))

(defun mevedel-core-resource-attempt-facts (attempt)
  "Return the permission facts of ATTEMPT as a plist.
Keys: :operation :scheme :canonical :authored :write :paths :available."
  (mevedel-core--resource-attempt-facts attempt))

(defun mevedel-core-resource-read (target display page callback &optional unsaved)
  "Read TARGET in the background and call CALLBACK with the outcome.
TARGET is an attempt from `mevedel-core-resource-prepare' or an
absolute file name, shown to the model as DISPLAY.  PAGE is a plist
\(:offset :limit :char-offset), and for an image or PDF also :pages,
:render, :accepts (image types the model takes), :max-side and :crop
\(X Y WIDTH HEIGHT); these answer (:text TEXT :media PICTURES), each
picture (:mime :base64 :width :height :bytes :thumbnail).  UNSAVED,
when non-nil, is (TEXT .  NEW-P): the text of a modified buffer
visiting TARGET, read instead of it, and whether its file is yet to
be created.  CALLBACK gets `ok' and
\(:text TEXT), or `error' and (ERROR-SYMBOL MESSAGE).  Return the
request id."
  (let ((path (and (stringp target) target)))
    (mevedel-core-request
     (lambda (id)
       (mevedel-core--resource-read
        id (list :attempt (and (not path) target) :path path :display display
                 :offset (plist-get page :offset) :limit (plist-get page :limit)
                 :char-offset (plist-get page :char-offset) :unsaved unsaved
                 :pages (plist-get page :pages) :render (plist-get page :render)
                 :accepts (plist-get page :accepts) :max-side (plist-get page :max-side)
                 :crop (plist-get page :crop))))
     callback)))

(defun mevedel-core-search-grep (target display options timeout-ms callback
                                        &optional unsaved)
  "Grep TARGET in the background and call CALLBACK with the outcome.
TARGET and DISPLAY are as in `mevedel-core-resource-read'.  OPTIONS is
a plist (:pattern :glob :type :output-mode :before :after
:case-insensitive :line-numbers :multiline :head-limit :offset).
TIMEOUT-MS (0: none) ends the search with partial results.  UNSAVED is
a list of (TRUENAME TEXT NEW-P): modified buffers searched instead of
the files of those truenames (NEW-P: the file does not exist yet).
CALLBACK gets `ok' and (:text :total :shown :partial), or `error' and
\(ERROR-SYMBOL MESSAGE).  Return the request id, for
`mevedel-core-search-cancel'."
  (let ((path (and (stringp target) target)))
    (mevedel-core-request
     (lambda (id)
       (mevedel-core--search-grep
        id (list :attempt (and (not path) target) :path path :display display
                 :options options :timeout-ms timeout-ms :unsaved unsaved)))
     callback)))

(defun mevedel-core-resource-read-text (text display page callback)
  "Read TEXT, a document of mevedel's own named DISPLAY, in pages like a file.
PAGE and CALLBACK are as in `mevedel-core-resource-read'.  Return the
request id."
  (mevedel-core-request
   (lambda (id)
     (mevedel-core--resource-read-text
      id (list :text text :display display :offset (plist-get page :offset)
               :limit (plist-get page :limit) :char-offset (plist-get page :char-offset))))
   callback))

(defun mevedel-core-search-grep-texts (texts options timeout-ms callback)
  "Grep TEXTS, a list of (ADDRESS . TEXT) documents, in the background.
Each is searched as one file named ADDRESS.  OPTIONS, TIMEOUT-MS and
CALLBACK are as in `mevedel-core-search-grep'.  Return the request id."
  (mevedel-core-request
   (lambda (id)
     (mevedel-core--search-grep-texts
      id (list :texts texts :options options :timeout-ms timeout-ms)))
   callback))

(defun mevedel-core-search-glob (target display pattern timeout-ms callback
                                        &optional new-files)
  "Glob PATTERN below TARGET in the background; call CALLBACK when done.
TARGET, DISPLAY, TIMEOUT-MS and CALLBACK are as in
`mevedel-core-search-grep'.  NEW-FILES are the truenames of files that
exist only as unsaved buffers, listed (marked) when they match.  Return
the request id."
  (let ((path (and (stringp target) target)))
    (mevedel-core-request
     (lambda (id)
       (mevedel-core--search-glob
        id (list :attempt (and (not path) target) :path path :display display
                 :pattern pattern :timeout-ms timeout-ms :new-files new-files)))
     callback)))

(defun mevedel-core-search-cancel (id)
  "Ask the Read, Glob or Grep request ID to stop.
Its callback still gets one reply (an error saying it was cancelled).
Return non-nil if the request was running."
  (and (featurep 'mevedel-dyn) (mevedel-core--search-cancel id)))

(defun mevedel-core-search-running ()
  "Return how many Read, Glob and Grep requests are running."
  (mevedel-core-ensure)
  (mevedel-core--search-running))

(defun mevedel-core-sandbox-forget-probes ()
  "Forget every cached sandbox probe; the next use probes again."
  (mevedel-core-ensure)
  (mevedel-core--sandbox-forget-probes))

(defconst mevedel-core--sandbox-request-keys
  '((:mode . symbol) (:backend . symbol) (:command . list) (:cwd . string)
    (:writable . list) (:state-dirs . list) (:home . string)
    (:inaccessible . list) (:read-only . list) (:allow-dir-locals . boolean)
    (:network . boolean) (:extra-write . list)
    (:extra-read . list) (:escalated . boolean) (:env . list)
    (:path . string) (:helper . string) (:target . string)
    (:probe-timeout-ms . integer))
  "Keys of a sandbox request plist and the type of each value.")

(defun mevedel-core-sandbox-object (request)
  "Return the sandbox REQUEST plist in the module's shape.
Keys with a nil value are left out (the module's defaults apply); the
helper defaults to `mevedel-core-build-helper-file'.  Managed
executions pass it as the :sandbox of their spec."
  (let ((out nil))
    (cl-loop for (key value) on request by #'cddr
             for type = (or (alist-get key mevedel-core--sandbox-request-keys)
                            (signal 'mevedel-core-sandbox-error
                                    (list (format "Unknown sandbox request key %S" key))))
             when value
             do (setq out (nconc out
                                 (list key
                                       (pcase type
                                         ('symbol (symbol-name value))
                                         ('list (vconcat value))
                                         ('boolean t)
                                         (_ value))))))
    (unless (plist-get out :helper)
      (setq out (nconc out (list :helper (mevedel-core-build-helper-file)))))
    out))

(defun mevedel-core-sandbox-decide (request)
  "Return the boundary the sandbox REQUEST plist would get.
The result is (:boundary SYMBOL :disclosure TEXT :refusal TEXT).  Uses
the cached probe, probing synchronously (within the request's
:probe-timeout-ms) when there is none."
  (mevedel-core-ensure)
  (mevedel-core--sandbox-decide (mevedel-core-sandbox-object request)))

(defun mevedel-core-sandbox-prepare (request)
  "Prepare the sandbox REQUEST plist and describe it, running nothing.
Return (:boundary :argv :cwd :disclosure :refusal :network
:extra-writes :extra-reads).  Probes like `mevedel-core-sandbox-decide'.
Signals `mevedel-core-sandbox-error' when a path cannot be used."
  (mevedel-core-ensure)
  (mevedel-core--sandbox-prepare (mevedel-core-sandbox-object request)))

;;;; Managed execution (Bash, Monitor)

(defun mevedel-core-exec-start (spec callback)
  "Start the managed execution SPEC and return its id.
SPEC is a plist: :session (key of the session's scheduler), :owner
\(\"/root\" or an agent path), :command, :description, :kind (\"bash\" or
\"monitor\"), :cwd, :tty, :timeout-ms (monitor), :yield-ms, :artifact-dir,
:mailbox (the session.sqlite file), :tool-use-id, :sandbox (a plist
from `mevedel-core-sandbox-object' without :command; absent runs the
shell directly), :environment (complete \"NAME=VALUE\" list), :env (extra
settings), :login-prelude (Bash run after a login shell's startup
files), :output-cap, :stop-grace-ms, :progress and :relay (t: no
local child; the command runs where the `exec-relay' events say, see
`mevedel-core-exec-relay-started').  Refusals (the
`&' operator, 64 live processes, Monitor rules) signal
`mevedel-core-exec-error' at once.  CALLBACK gets `ok' and the first
observation plist after :yield-ms, or `error' and (SYMBOL MESSAGE)."
  (let (exec-id)
    (mevedel-core-request
     (lambda (request)
       (setq exec-id (mevedel-core--exec-start request spec)))
     callback)
    exec-id))

(defun mevedel-core-exec-observe (session id owner wait-ms callback)
  "Observe execution ID of SESSION for OWNER after up to WAIT-MS.
OWNER nil means the user, who may see every execution.  CALLBACK gets
`ok' and the observation: newly unread output, state and, once done,
:facts."
  (mevedel-core-ensure)
  (mevedel-core-request
   (lambda (request)
     (mevedel-core--exec-observe
      request (list :session session :id id :owner owner :wait-ms wait-ms)))
   callback))

(defun mevedel-core-exec-write (session id owner chars wait-ms callback)
  "Send CHARS to execution ID of SESSION, then observe it after WAIT-MS.
Ordinary input goes only to PTY executions; \"\\x03\" is Ctrl-C.
CALLBACK is as for `mevedel-core-exec-observe'."
  (mevedel-core-ensure)
  (mevedel-core-request
   (lambda (request)
     (mevedel-core--exec-write
      request (list :session session :id id :owner owner :chars chars :wait-ms wait-ms)))
   callback))

(defun mevedel-core-exec-stop (session id owner callback)
  "Stop execution ID of SESSION for OWNER (TERM, then KILL).
CALLBACK gets `ok' and the final observation once it has settled."
  (mevedel-core-ensure)
  (mevedel-core-request
   (lambda (request)
     (mevedel-core--exec-stop request (list :session session :id id :owner owner)))
   callback))

(defun mevedel-core-exec-input-by-user (session id chars)
  "Send CHARS to execution ID of SESSION for the user.
Ordinary input goes only to PTY executions; \"\\x03\" is Ctrl-C.
Unlike `mevedel-core-exec-write', nothing is observed: the model's
unread output stays unread.  Signals `mevedel-core-exec-error' when
the execution takes no such input."
  (mevedel-core-ensure)
  (mevedel-core--exec-input-by-user session id chars))

(defun mevedel-core-exec-stop-by-user (session id)
  "Stop execution ID of SESSION for the user; return non-nil if it ran.
Its result is delivered as usual, without waking the model."
  (mevedel-core-ensure)
  (mevedel-core--exec-stop-by-user session id))

(defun mevedel-core-exec-list (session &optional owner)
  "Return plists of OWNER's yielded, unfinished executions in SESSION.
With OWNER nil, return every unfinished execution of SESSION."
  (mevedel-core-ensure)
  (mevedel-core--exec-list session owner))

(defun mevedel-core-exec-relay-started (session id boundary &optional disclosure)
  "Report that relayed execution ID of SESSION started under BOUNDARY.
A relayed execution (spec :relay t) runs no local child: the module
publishes `exec-relay' events (:session :id :op), op \"launch\" with
:argv :cwd :env :tty :kind, then \"signal\" (:signal \"TERM\", \"KILL\"
or \"INT\") and \"stdin\" (:data), and Lisp runs the command elsewhere
and reports back with this function, `mevedel-core-exec-relay-output',
then one of `mevedel-core-exec-relay-exit' and
`mevedel-core-exec-relay-failed'.  BOUNDARY names the confinement as
the local sandbox's facts do (\"bwrap-landlock\", \"bwrap\",
\"landlock\", \"unconfined\", \"off\"); DISCLOSURE says what it lacks.
Each returns non-nil when the execution still listened."
  (mevedel-core--exec-relay-started
   (list :session session :id id :boundary boundary :disclosure disclosure)))

(defun mevedel-core-exec-relay-output (session id data)
  "Report output of relayed execution ID of SESSION.
DATA is the chunk's bytes in base64, so bytes that are not UTF-8 reach
the spool unchanged."
  (mevedel-core--exec-relay-output (list :session session :id id :data data)))

(defun mevedel-core-exec-relay-exit (session id exit-code signal)
  "Report that relayed execution ID of SESSION ended.
EXIT-CODE is its exit status, or nil when it died of SIGNAL (a name
such as \"TERM\", or a number as a string)."
  (mevedel-core--exec-relay-exit
   (list :session session :id id :exit-code exit-code :signal signal)))

(defun mevedel-core-exec-relay-failed (session id message)
  "Report that relayed execution ID of SESSION failed, MESSAGE saying why.
Before its start was reported it settles as a launch failure, after
as lost."
  (mevedel-core--exec-relay-failed (list :session session :id id :message message)))

(defun mevedel-core-exec-teardown (session)
  "Stop every execution of SESSION silently; return how many ran."
  (if (featurep 'mevedel-dyn) (mevedel-core--exec-teardown session) 0))

(defun mevedel-core-bash-permission (source cwd root)
  "Return what a permission decision needs to know about Bash SOURCE.
SOURCE would run in the directory CWD of the workspace ROOT (both
absolute).  See the module function `mevedel-core--bash-permission'
for the plist's keys.  The module remembers recent analyses, so a
repeated source costs a comparison instead of an analysis.  The plist,
and the lists and strings inside it, may be shared with other results
\(sources judged alike get the same one), so do not modify them."
  (or mevedel-core--ready (mevedel-core-ensure))
  (mevedel-core--bash-permission source cwd root))

(defun mevedel-core-bash-effects (source cwd root)
  "Return what each command of Bash SOURCE does to files, for a card.
SOURCE would run in the directory CWD of the workspace ROOT (both
absolute).  One plist per command, in source order: :command, :class,
:start and :end (0-based character offsets in SOURCE), :reads,
:writes and :deletes (relative to ROOT inside it, else absolute) and
:unknown; see the module function `mevedel-core--bash-effects'.  Only
a card asks: a permission decision needs none of it."
  (or mevedel-core--ready (mevedel-core-ensure))
  (mevedel-core--bash-effects source cwd root))

(defun mevedel-core-shutdown ()
  "Stop every process the module owns and close the event channel.
Runs from `kill-emacs-hook', because module finalizers do not run at exit.
Managed executions are torn down first, so their spools are removed."
  (when (featurep 'mevedel-dyn)
    (mevedel-core--acp-stop-all 5000)
    (mevedel-core--exec-teardown-all)
    (mevedel-core--exec-stop-all 500)
    (mevedel-core-close-channel)))

;;;; Tool schemas

(defun mevedel-core-schema-compile (descriptor)
  "Compile the tool DESCRIPTOR (JSON text) into a handle.
Return (HANDLE PROVIDER-SCHEMA-JSON GPTEL-ARGS-JSON SHAPE SUMMARY).
Signals `mevedel-core-schema-error' naming what is wrong."
  (mevedel-core-ensure)
  (mevedel-core--schema-compile descriptor))

(defun mevedel-core-schema-check (handle arguments repair)
  "Check ARGUMENTS (JSON text) against the tool HANDLE.
Non-nil REPAIR allows the repair catalogue.  Return t when valid as
sent, else (repaired ARGS NOTE AUDIT), (invalid GUIDANCE ISSUES) or
\(abandoned GUIDANCE ISSUES AUDIT); see `mevedel-tool-repair-check'."
  (mevedel-core-ensure)
  (mevedel-core--schema-check handle arguments repair))

(defun mevedel-core-schema-index (handles)
  "Return the ToolSearch index of the vector of tool HANDLES.
It is searched with `mevedel-core-schema-search' as long as the
catalog stays the same."
  (mevedel-core-ensure)
  (mevedel-core--schema-index handles))

(defun mevedel-core-schema-search (index query)
  "Search the ToolSearch INDEX for QUERY.
Return (KIND TEXT SHOWN TOTAL), KIND being `contracts', `shapes' or `none'."
  (mevedel-core-ensure)
  (mevedel-core--schema-search index query))

(defun mevedel-core-schema-contract (handle)
  "Return the full contract text of the tool HANDLE."
  (mevedel-core-ensure)
  (mevedel-core--schema-contract handle))

;;;; Text, render-data codec and session store

(defconst mevedel-core--non-unicode-regexp
  (rx (+ (any (#x110000 . #x3fffff))))
  "Runs of characters the module cannot copy: above U+10FFFF or raw bytes.")

(defun mevedel-core--mask-non-unicode (string)
  "Return STRING with each raw byte and non-Unicode character as U+FFFD.
The module copies strings as UTF-8, which cannot carry those
characters; replacing them one for one keeps every character position.
Called by the module when Emacs refuses to copy STRING."
  (replace-regexp-in-string
   mevedel-core--non-unicode-regexp
   (lambda (run) (make-string (length run) #xfffd))
   (if (multibyte-string-p string) string (string-to-multibyte string))
   t t))

(defun mevedel-core-text-normalize (string)
  "Return STRING as valid Unicode text.
STRING itself, properties included, when it already is (checked in one
scan); otherwise a repaired copy: raw bytes that form UTF-8 are
decoded, and other raw bytes, surrogates and characters above U+10FFFF
become U+FFFD."
  (mevedel-core-ensure)
  (mevedel-core--text-normalize string))

(defun mevedel-core-text-preview (string budget)
  "Return a head-and-tail preview plan for STRING within BUDGET characters.
Nil when STRING fits.  Otherwise a plist of :total-chars, :head-chars
and :tail-chars (equal budgets, cut near newlines), :omitted-chars
\(exact), :omitted-first-line and :omitted-last-line (1-based),
:total-lines and :kept, the block of omitted lines that look like
failures (see `mevedel-core-text-failure-patterns'; nil when none
matched), whose characters count against BUDGET; the pieces are
\(substring STRING 0 HEAD-CHARS) and
\(substring STRING (- TOTAL-CHARS TAIL-CHARS))."
  (mevedel-core-ensure)
  (mevedel-core--text-preview string budget))

(defun mevedel-core-text-failure-patterns (patterns)
  "Make every later preview keep omitted lines matching one of PATTERNS.
PATTERNS is a list of Rust regexps, each matched against one line; nil
keeps no lines.  This covers `mevedel-core-text-preview' and the
previews of execution output.  An invalid pattern signals
`mevedel-core-search-error' naming it, and the patterns in use stay."
  (mevedel-core-ensure)
  (mevedel-core--text-failure-patterns patterns))

(defun mevedel-core-render-data-encode (printed owner)
  "Return the render-data block for PRINTED, a keyword plist printed by `prin1'.
OWNER is the tool-use ID the block is bound to, or nil for an unbound
record.  Signals `mevedel-core-schema-error' when PRINTED is not one
readable keyword plist."
  (mevedel-core-ensure)
  (mevedel-core--codec-encode printed owner))

(defun mevedel-core-render-data-payload (printed owner)
  "Return the printed payload that `mevedel-core-render-data-encode' would wrap.
PRINTED and OWNER are as there."
  (mevedel-core-ensure)
  (mevedel-core--codec-payload printed owner))

(defun mevedel-core-render-data-scan (text)
  "Return every well-formed render-data block of TEXT in one flat vector.
The vector is [START END OWNER START END OWNER ...]; OWNER is the
tool-use ID, nil for an unbound block, or `invalid'.  TEXT is a string
\(positions are indices) or nil for the current buffer's accessible
portion (positions are buffer positions), which the module reads in
chunks.  The same holds for TEXT in the other render-data functions."
  (mevedel-core-ensure)
  (mevedel-core--codec-scan text))

(defun mevedel-core-render-data-text-bytes (text)
  "Return how many bytes TEXT has as the render-data functions receive it.
TEXT is as for `mevedel-core-render-data-scan'.  It is copied into the
module exactly as those functions copy it and nothing else is done, so
timing this measures the transfer alone."
  (mevedel-core-ensure)
  (mevedel-core--codec-text-bytes text))

(defun mevedel-core-render-data-spans (text owner vouched)
  "Return the (START . END) spans of TEXT's blocks to scrub for OWNER.
TEXT is as for `mevedel-core-render-data-scan'.
Those are the blocks bound to OWNER and the unbound blocks lying inside
one of the VOUCHED (START . END) spans."
  (mevedel-core-ensure)
  (mevedel-core--codec-spans text owner vouched))

(defun mevedel-core-render-data-extract (text owner vouched)
  "Return (START END PLIST) for TEXT's last block authorised for OWNER, or nil.
With OWNER a string, only blocks bound to it count; with OWNER nil, only
unbound blocks inside one of the VOUCHED (START . END) spans."
  (mevedel-core-ensure)
  (mevedel-core--codec-extract text owner vouched))

(defun mevedel-core-render-data-decode-all (text)
  "Return every well-formed block of TEXT decoded, in one flat vector.
The vector is [START END OWNER PLIST START END OWNER PLIST ...]; OWNER
is as in `mevedel-core-render-data-scan'.  Callers keep only the blocks
they can authorise.  ASCII strings in the plists are unibyte, as
`read' makes them."
  (mevedel-core-ensure)
  (mevedel-core--codec-decode-all text))

(defun mevedel-core-store-open (file)
  "Open the session store FILE (SQLite, WAL mode), creating it if needed.
Return a handle for the other `mevedel-core-store-' and mailbox functions."
  (mevedel-core-ensure)
  (mevedel-core--store-open (expand-file-name file)))

(defun mevedel-core-store-close (store)
  "Close STORE.  Using it afterwards signals `mevedel-core-store-error'."
  (mevedel-core--store-close store))

(defun mevedel-core-store-info (store)
  "Return (:file FILE :journal-mode MODE :schema-version N) of STORE."
  (mevedel-core--store-info store))

(defun mevedel-core-mailbox-post (store recipient kind payload &optional sender attrs)
  "Queue PAYLOAD (a string) of KIND for RECIPIENT in STORE; return its id.
SENDER, when non-nil, names who sent it.  ATTRS is a list of (NAME
VALUE) strings: the record's opening-tag attributes, kept in order."
  (mevedel-core--store-mailbox-post
   store (list :recipient recipient :kind kind :payload payload :sender sender :attrs attrs)))

(defun mevedel-core-mailbox-unread (store recipient)
  "Return RECIPIENT's undelivered messages in STORE, oldest first.
Each is a plist (:id :recipient :sender :kind :payload :created-at)."
  (mevedel-core--store-mailbox-unread store recipient))

(defun mevedel-core-mailbox-deliver (store ids)
  "Mark the messages with IDS delivered in STORE; return how many were not yet."
  (mevedel-core--store-mailbox-deliver store ids))

(defun mevedel-core-mailbox-deliver-after (store mailbox ids)
  "Mark the messages with IDS in MAILBOX delivered after STORE's queued writes.
Those writes (a conversation's transcript) go first, in the
background; the messages are not unread meanwhile, and become unread
again if one of those writes fails.  MAILBOX is the session store that
holds the mailbox; it may be STORE."
  (mevedel-core--store-mailbox-deliver-after store mailbox ids))

(defun mevedel-core-transcript-save (store at props)
  "Save the current buffer's accessible text as STORE's transcript from AT on.
AT is a 0-based character offset: the transcript keeps its first AT
characters and continues with this text.  PROPS is a flat list (START
END NAME VALUE ...) of the text's properties, bounds relative to the
text, printed readably (one `prin1-to-string').  The text is copied now
and written in the background; a failed write becomes a `store-failure'
event."
  (mevedel-core--store-transcript-save store at props))

(defun mevedel-core-transcript-consolidate (store &optional export)
  "Consolidate STORE's transcript log, then write its text to the file EXPORT.
Both happen in the background, after the saves already queued."
  (mevedel-core--store-transcript-consolidate store (and export (expand-file-name export))))

(defun mevedel-core-transcript-load (store &optional full)
  "Return STORE's saved transcript, once queued writes end, as a plist.
:text is its text, or nil when :copy, the file name of the readable
copy, holds exactly that text (:chars characters, UTF-8); FULL non-nil
always gives :text.  :chunks are its properties as (FROM . PRINTED),
the latest-ending first: PRINTED is the printed list ((START END NAME
VALUE) ...), 0-based bounds, and once a chunk and those before it are
applied every property reaching past character FROM is."
  (pcase-let ((`(,text ,copy ,chars ,chunks) (mevedel-core--store-transcript-load store full)))
    (list :text (and text (decode-coding-string text 'utf-8-unix t))
          :copy copy :chars chars :chunks chunks)))

(defun mevedel-core-store-flush (store &optional timeout)
  "Wait up to TIMEOUT seconds (default 5) for the queued writes of STORE.
Return the message of the first save that failed since the last
flush, or nil; signal `mevedel-core-store-error' on timeout."
  (mevedel-core--store-flush store (round (* 1000 (or timeout 5)))))

(defun mevedel-core-store-info-set (store pairs)
  "Set session metadata in STORE from PAIRS, an alist of strings.
An empty value removes its key.  Written in the background."
  (mevedel-core--store-info-set store pairs))

(defun mevedel-core-store-info-get (store)
  "Return the session metadata of STORE, an alist of strings."
  (mevedel-core--store-info-get store))

(defun mevedel-core-store-file-info (file)
  "Return the session metadata of the session store FILE, read-only."
  (mevedel-core-ensure)
  (mevedel-core--store-file-info (expand-file-name file)))

(defun mevedel-core-store-input-push (store text)
  "Append TEXT to the composer history kept in STORE (in the background)."
  (mevedel-core--store-input-push store text))

(defun mevedel-core-store-inputs (store limit)
  "Return the newest LIMIT composer inputs kept in STORE, oldest first."
  (mevedel-core--store-inputs store limit))

;;;; Patches

(define-error 'mevedel-core-patch-error "mevedel patch error" 'mevedel-core-error)

(declare-function mevedel-core--patch-parse "ext:mevedel-dyn" (patch))
(declare-function mevedel-core--patch-plan "ext:mevedel-dyn" (patch paths))
(declare-function mevedel-core--patch-plan-files "ext:mevedel-dyn" (plan))
(declare-function mevedel-core--patch-apply "ext:mevedel-dyn" (plan selection))
(declare-function mevedel-core--patch-before "ext:mevedel-dyn" (plan))
(declare-function mevedel-core--patch-diffs-start "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--patch-diff-texts "ext:mevedel-dyn" (before now name))

(defun mevedel-core-patch-parse (patch)
  "Return the file operations of PATCH, a patch in the ApplyPatch grammar.
Each is a plist (:op OP :path PATH), OP being `add', `delete' or
`update'; an update also has :move-to (the authored destination or nil)
and :hunks (how many `@@' hunks).  Paths are as written in PATCH.  A
grammar error signals `mevedel-core-patch-error' naming the line number
and the offending line."
  (mevedel-core-ensure)
  (mevedel-core--patch-parse patch))

(defun mevedel-core-patch-plan (patch paths)
  "Plan PATCH against the files PATHS resolves it to; return the plan.
PATHS is an alist from every authored path in PATCH, `:move-to'
destinations included, to the absolute file name it stands for.  Every
target is read, every hunk matched and every result computed in memory;
nothing is written.  A hunk that does not apply, an ambiguous hunk, a
missing or existing target, or a binary or non-UTF-8 file signals
`mevedel-core-patch-error' naming the file, the hunk and the nearest
lines the file contains.  The plan is opaque: pass it to
`mevedel-core-patch-plan-files', `mevedel-core-patch-apply' and
`mevedel-core-patch-before'."
  (mevedel-core-ensure)
  (mevedel-core--patch-plan
   patch
   (mapcar (lambda (pair) (cons (car pair) (expand-file-name (cdr pair))))
           paths)))

(defun mevedel-core-patch-plan-files (plan)
  "Return the files of PLAN in patch order, each a plist.
Keys: :path (authored), :abs, :op (`add', `delete' or `update'),
:move-to and :move-abs (nil without a move), :added, :removed, :diff
\(the unified diff of the whole file change) and :hunks.  The hunks are
the diff hunks of the computed change, indexed from 0, each a plist of
:index, :header (\"@@ -12,7 +12,9 @@\"), :old-start, :old-lines,
:new-start, :new-lines, :added, :removed, :text (the hunk's unified
lines with 3 lines of context) and :new-text (the lines that replace the
hunk's old lines, context included)."
  (mevedel-core--patch-plan-files plan))

(defun mevedel-core-patch-apply (plan &optional selection)
  "Apply PLAN atomically and return what was done.
With SELECTION nil, apply everything.  Otherwise SELECTION is an alist
\((ABS . CHOICE) ...) keyed by the :abs of a file of PLAN; CHOICE is
`reject' (leave the file alone), `accept' (all of it) or a list with one
choice per hunk of the file, in index order: `accept', `reject' or
\(edit . TEXT), TEXT replacing that hunk's :new-text.  A file missing
from SELECTION is applied whole.  Every target is checked against the
bytes PLAN read first; a file changed since makes the whole apply fail
with nothing written, and so does any failure while writing.  The value
is (:files FILES :added N :removed N), each of FILES a plist of :path,
:abs, :op, :move-to, :status (`applied', `rejected' or `partial'),
:added, :removed and :diff (what was actually applied)."
  (mevedel-core--patch-apply plan selection))

(defun mevedel-core-patch-before (plan)
  "Return the before-state of every target of PLAN, for checkpoints.
The value is an alist ((ABS . BYTES) ...): BYTES is a unibyte string
of the file as PLAN read it, or nil when the file did not exist (as for
an added file or a move destination)."
  (mevedel-core--patch-before plan))

(defun mevedel-core-patch-diff-texts (before now name)
  "Return the unified diff of NAME from BEFORE to NOW, or \"\" when they agree.
Synchronous: for small texts, as a shared item's edit preview; the
edited-file reminder diffs in the background (`mevedel-core-patch-diffs')."
  (mevedel-core--patch-diff-texts before now name))

(defun mevedel-core-patch-diffs (files budget callback)
  "Diff each of FILES in the background, then call CALLBACK.
FILES is a list of (NAME BEFORE NOW), the texts of the file NAME
before and now.  The diffs, with 3 lines of context, take at most
BUDGET characters in all: a diff that does not fit in what is left is
nil.  CALLBACK gets `ok' and (:diffs DIFFS), one per file in order,
or `error' and (ERROR-SYMBOL MESSAGE), as when the request is
cancelled (`mevedel-core-search-cancel').  Return the request id."
  (mevedel-core-request
   (lambda (id)
     (mevedel-core--patch-diffs-start id (list :changes files :budget budget)))
   callback))

;;;; Checkpoints

(defun mevedel-core-checkpoint-before (store turn label paths)
  "Record in STORE the present state of PATHS before TURN's edit.
TURN is the turn's id and LABEL what the user asked in it.  Each of
PATHS (absolute) the turn has not recorded yet gets its bytes kept as
a content-addressed blob, or a note that it did not exist.  Return how
many paths were new to the turn."
  (mevedel-core--checkpoint-before store turn label paths))

(defun mevedel-core-checkpoint-after (store paths)
  "Remember in STORE the present content of PATHS after an edit.
A later rewind compares the files with this to find changes made since."
  (mevedel-core--checkpoint-after store paths))

(defun mevedel-core-checkpoint-note-bash (store turn label)
  "Mark TURN (LABEL: what the user asked) in STORE as having run Bash."
  (mevedel-core--checkpoint-note-bash store turn label))

(defun mevedel-core-checkpoint-turns (store)
  "Return the recorded turn plists of STORE, oldest first.
Each is a plist (:id ID :seq N :number N :label TEXT :started-at MS
:bash BOOL :files PATHS): SEQ orders them, NUMBER counts them from 1."
  (mevedel-core--checkpoint-turns store))

(defun mevedel-core-checkpoint-rewind-plan (store turn)
  "Return what rewinding STORE's files to before TURN would do.
A list of plists (:path PATH :action restore|delete :changed BOOL),
one per file not already in that state; CHANGED means the file is not
as the session's last edit left it."
  (mevedel-core--checkpoint-rewind-plan store turn))

(defun mevedel-core-checkpoint-rewind (store turn)
  "Restore what STORE's session edited from TURN on, all files or none.
Each gets its state before TURN back (a file that did not exist then
is removed); TURN and the later turns are then forgotten.  Return the
steps taken, as `mevedel-core-checkpoint-rewind-plan' describes them.
A file that changes meanwhile makes it fail with nothing written."
  (mevedel-core--checkpoint-rewind store turn))

(defun mevedel-core-checkpoint-diff (store)
  "Return the unified diff of what STORE's session edits changed.
Each file's state before its first checkpoint against the disk now."
  (mevedel-core--checkpoint-diff store))

;;;; PTC

(declare-function mevedel-core--ptc-start "ext:mevedel-dyn" (source args))
(declare-function mevedel-core--ptc-direct "ext:mevedel-dyn" (machine))
(declare-function mevedel-core--ptc-feed "ext:mevedel-dyn" (machine n ok text))
(declare-function mevedel-core--ptc-resume "ext:mevedel-dyn" (machine))

(defun mevedel-core-ptc-start (source tools standalone budgets)
  "Compile the ToolCall program SOURCE into a machine and return it.
TOOLS are the names the program may call, STANDALONE those that must
be the whole program; BUDGETS is (STEPS DEPTH VALUE RETAINED).  A
program that does not compile fails on its first resume."
  (mevedel-core-ensure)
  (pcase-let ((`(,steps ,depth ,value ,retained) budgets))
    (mevedel-core--ptc-start
     source (list :tools tools :standalone standalone :steps steps :depth depth
                  :value value :retained retained))))

(defun mevedel-core-ptc-direct (machine)
  "Return the tool of MACHINE's program when it is one direct call, else nil."
  (mevedel-core--ptc-direct machine))

(defun mevedel-core-ptc-feed (machine n ok text)
  "Give MACHINE the result TEXT of its call N (OK nil: the call failed)."
  (mevedel-core--ptc-feed machine n ok text))

(defun mevedel-core-ptc-resume (machine)
  "Run MACHINE until it needs results or ends.
Return (calls ((N TOOL ARGS-JSON BATCH) ...)), (done TEXT STEPS) or
\(failed MESSAGE STEPS)."
  (mevedel-core--ptc-resume machine))

;;;; Web

(declare-function mevedel-core--web-convert "ext:mevedel-dyn" (id args))

(defun mevedel-core-web-convert (kind body options callback)
  "Convert BODY, a fetched response, in the background; CALLBACK gets it.
BODY holds the response's bytes as characters 0..255 (decode the
unibyte body as `latin-1').  KIND and OPTIONS: \"html\" (CHARSET URL):
readable text with Markdown links resolved against URL, `ok' and
\(:text :title :charset); \"text\" (CHARSET): the decoded text, (:text
:charset); \"search\" (ALLOWED BLOCKED): a DuckDuckGo result page,
\(:results ((:title :url :snippet) ...) :challenge BOOL); \"youtube-page\"
nil: (:title :author :description :captions URL); \"captions\" nil: the
caption text.  CHARSET is the Content-Type header's, or nil.  Return
the request id."
  (mevedel-core-request
   (lambda (id)
     (mevedel-core--web-convert
      id (nconc (list :kind kind :body body)
                (pcase kind
                  ("html" (list :charset (nth 0 options) :url (nth 1 options)))
                  ("text" (list :charset (nth 0 options)))
                  ("search" (list :allowed (nth 0 options) :blocked (nth 1 options)))))))
   callback))

;;;; HTTP requests

(declare-function mevedel-core--http-request "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--http-cancel "ext:mevedel-dyn" (id))

(defvar mevedel-core--http-functions (make-hash-table :test #'eql)
  "Running HTTP request id -> function receiving its events.")

(defun mevedel-core-http-request (args function)
  "POST the request ARGS describe over the module's kept-alive client.
ARGS is a plist: :url, :headers (\"Name: value\" strings), :body (a
list of strings, concatenated), :proxy, :http-proxy, :https-proxy and
:no-proxy.  FUNCTION is called with (output TEXT) for each piece of
curl-style output (status line and headers, then the body), and once
with (exit CODE MESSAGE HEADER-BYTES): CODE is 0 or the exit code curl
gives the same failure.  Return the request id."
  (mevedel-core-ensure)
  (let ((id (cl-incf mevedel-core--next-request-id)))
    (puthash id function mevedel-core--http-functions)
    (condition-case err
        (mevedel-core--http-request id args)
      (error (remhash id mevedel-core--http-functions)
             (signal (car err) (cdr err))))
    id))

(defun mevedel-core-http-cancel (id)
  "Stop HTTP request ID at once, closing its connection.
Its function hears no more of it."
  (remhash id mevedel-core--http-functions)
  (mevedel-core--http-cancel id))

(defun mevedel-core--handle-http (data)
  "Hand DATA, an `http' event (ID KIND . VALUES), to its request's function."
  (when-let* ((function (gethash (car data) mevedel-core--http-functions)))
    (when (eq (cadr data) 'exit)
      (remhash (car data) mevedel-core--http-functions))
    (funcall function (cdr data))))

(mevedel-core-register-event-handler 'http #'mevedel-core--handle-http)

;;;; MCP

(declare-function mevedel-core--mcp-open "ext:mevedel-dyn" (args))
(declare-function mevedel-core--mcp-files "ext:mevedel-dyn" (handle))
(declare-function mevedel-core--mcp-approve "ext:mevedel-dyn" (handle sha256))
(declare-function mevedel-core--mcp-status "ext:mevedel-dyn" (handle))
(declare-function mevedel-core--mcp-start "ext:mevedel-dyn" (id handle name))
(declare-function mevedel-core--mcp-stop "ext:mevedel-dyn" (id handle name))
(declare-function mevedel-core--mcp-restart "ext:mevedel-dyn" (id handle name))
(declare-function mevedel-core--mcp-tools "ext:mevedel-dyn" (id handle name))
(declare-function mevedel-core--mcp-call "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--mcp-cancel "ext:mevedel-dyn" (id))
(declare-function mevedel-core--mcp-resources "ext:mevedel-dyn" (id handle name))
(declare-function mevedel-core--mcp-read "ext:mevedel-dyn" (id handle name uri))
(declare-function mevedel-core--mcp-prompts "ext:mevedel-dyn" (id handle name))
(declare-function mevedel-core--mcp-prompt "ext:mevedel-dyn" (id args))

(defun mevedel-core-mcp-open (args)
  "Open a registry of MCP servers, starting none; return its handle.
ARGS is a plist: :files, a list of (FILE SOURCE), SOURCE one of
\"user\", \"workspace\" or \"command-line\", in merge order; :env, a
list of (NAME . VALUE) strings; :cwd; :log-file; :startup-timeout-ms;
:request-timeout-ms; :key, the string its `mcp-notice' events carry;
:sandbox, a request from `mevedel-core-sandbox-object' (no :command)
for the stdio servers that run confined: :sandbox-servers, t or a list
of names, and of those :sandbox-network (t or names) keep the network."
  (mevedel-core-ensure)
  (mevedel-core--mcp-open args))

(defun mevedel-core-mcp-files (handle)
  "Return the configuration files HANDLE's registry read.
Each is a plist (:file :source :sha256 :servers :error)."
  (mevedel-core--mcp-files handle))

(defun mevedel-core-mcp-approve (handle sha256)
  "Approve HANDLE's workspace servers from the file hashing to SHA256.
Return their names."
  (mevedel-core--mcp-approve handle sha256))

(defun mevedel-core-mcp-status (handle)
  "Return the status plist of every server of HANDLE."
  (mevedel-core--mcp-status handle))

(defun mevedel-core-mcp-start (handle name callback)
  "Start server NAME of HANDLE (nil: every approved one); CALLBACK gets it.
Return the request id."
  (mevedel-core-request
   (lambda (id) (mevedel-core--mcp-start id handle name)) callback))

(defun mevedel-core-mcp-stop (handle name callback)
  "Stop server NAME of HANDLE (nil: all); CALLBACK gets t."
  (mevedel-core-request
   (lambda (id) (mevedel-core--mcp-stop id handle name)) callback))

(defun mevedel-core-mcp-restart (handle name callback)
  "Restart server NAME of HANDLE now; CALLBACK gets t."
  (mevedel-core-request
   (lambda (id) (mevedel-core--mcp-restart id handle name)) callback))

(defun mevedel-core-mcp-tools (handle name callback)
  "List the tools of server NAME of HANDLE; CALLBACK gets plists.
Each is (:server :name :full-name :title :description :input-schema
:annotations), the schema as JSON text."
  (mevedel-core-request
   (lambda (id) (mevedel-core--mcp-tools id handle name)) callback))

(defun mevedel-core-mcp-call (handle server tool arguments timeout callback)
  "Call TOOL of SERVER in HANDLE with ARGUMENTS, JSON text of an object.
TIMEOUT is in seconds (nil: the registry's).  CALLBACK gets (:content
:structured :is-error).  Return the request id, which
`mevedel-core-mcp-cancel' takes; progress comes as `mcp-progress' events."
  (mevedel-core-request
   (lambda (id)
     (mevedel-core--mcp-call
      id (list :handle handle :server server :tool tool :arguments arguments
               :timeout-ms (and timeout (round (* 1000 timeout))))))
   callback))

(defun mevedel-core-mcp-cancel (id)
  "Cancel the MCP tool call of request ID; non-nil if it was running."
  (mevedel-core--mcp-cancel id))

(defun mevedel-core-mcp-resources (handle name callback)
  "List the resources of server NAME of HANDLE.
CALLBACK gets (:resources :templates)."
  (mevedel-core-request
   (lambda (id) (mevedel-core--mcp-resources id handle name)) callback))

(defun mevedel-core-mcp-read (handle name uri callback)
  "Read URI from server NAME of HANDLE; CALLBACK gets content plists."
  (mevedel-core-request
   (lambda (id) (mevedel-core--mcp-read id handle name uri)) callback))

(defun mevedel-core-mcp-prompts (handle name callback)
  "Give CALLBACK the prompt list of server NAME of HANDLE, as plists.
Each is (:server :name :command :title :description :arguments), an
argument being (:name :description :required)."
  (mevedel-core-request
   (lambda (id) (mevedel-core--mcp-prompts id handle name)) callback))

(defun mevedel-core-mcp-prompt (handle server prompt arguments callback)
  "Fill in PROMPT of SERVER in HANDLE with ARGUMENTS, (NAME . VALUE) strings.
CALLBACK gets (:description :messages), each message (:role :content)."
  (mevedel-core-request
   (lambda (id)
     (mevedel-core--mcp-prompt
      id (list :handle handle :server server :prompt prompt :arguments arguments)))
   callback))

;;;; ACP

(declare-function mevedel-core--acp-start "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--acp-new-session "ext:mevedel-dyn" (id args))
(declare-function mevedel-core--acp-prompt "ext:mevedel-dyn" (id handle session texts))
(declare-function mevedel-core--acp-set-model "ext:mevedel-dyn" (id handle session model))
(declare-function mevedel-core--acp-cancel "ext:mevedel-dyn" (handle session))
(declare-function mevedel-core--acp-stop "ext:mevedel-dyn" (id handle))
(declare-function mevedel-core--acp-alive "ext:mevedel-dyn" (handle))
(declare-function mevedel-core--acp-answer "ext:mevedel-dyn" (id args))

(defun mevedel-core-acp-start (args callback)
  "Start an ACP agent as ARGS say; return its handle at once.
ARGS is a plist: :name, :command, :args, :env (a list of (NAME .
VALUE) set on top of Emacs's environment), :cwd, :key (the string its
`acp-update', `acp-request' and `acp-exited' events carry),
:stderr-log, :startup-timeout-ms and :request-timeout-ms.  CALLBACK
gets (:name :title :version :load-session :mcp-http :pid) once it is
initialized."
  (let (handle)
    (mevedel-core-request
     (lambda (id) (setq handle (mevedel-core--acp-start id args)))
     callback)
    handle))

(defun mevedel-core-acp-new-session (handle args callback)
  "Open a session of HANDLE's agent; CALLBACK gets (:session-id :modes :models).
ARGS is a plist: :load (the id of a session to reopen with
`session/load', whose history arrives as `acp-update' events first),
:cwd, :disallowed-tools (Claude Code's tools to switch off) and
:mcp-servers, each (:name :command :args :env) or (:name :url
:headers).  :modes and :models are the agent's JSON text."
  (mevedel-core-request
   (lambda (id) (mevedel-core--acp-new-session id (append (list :handle handle) args)))
   callback))

(defun mevedel-core-acp-set-model (handle session model callback)
  "Choose MODEL, a model id string, for SESSION of HANDLE's agent.
CALLBACK gets t once the agent took it."
  (mevedel-core-request
   (lambda (id) (mevedel-core--acp-set-model id handle session model))
   callback))

(defun mevedel-core-acp-prompt (handle session texts callback)
  "Run a turn of SESSION of HANDLE's agent with the text blocks TEXTS.
CALLBACK gets (:stop-reason :input :output :cached-read :cached-write
:thought) when the agent ends the turn.  Return the request id."
  (mevedel-core-request
   (lambda (id) (mevedel-core--acp-prompt id handle session texts))
   callback))

(defun mevedel-core-acp-cancel (handle session)
  "Ask HANDLE's agent to end SESSION's turn."
  (mevedel-core--acp-cancel handle session))

(defun mevedel-core-acp-stop (handle callback)
  "Stop HANDLE's agent and every process of it; CALLBACK gets t then."
  (mevedel-core-request
   (lambda (id) (mevedel-core--acp-stop id handle))
   callback))

(defun mevedel-core-acp-alive-p (handle)
  "Return non-nil while any process of HANDLE's agent is alive."
  (mevedel-core--acp-alive handle))

(defun mevedel-core-acp-answer (id answer)
  "Answer the agent's request ID with ANSWER, a plist.
It is (:text TEXT), (:written t), (:option ID), (:cancelled t) or
\(:error-code CODE :error-message MESSAGE).  Return non-nil when the
request was still waiting."
  (mevedel-core--acp-answer id answer))

;;;; MCP server of mevedel's own tools

(declare-function mevedel-core--mcp-serve-start "ext:mevedel-dyn" (args))
(declare-function mevedel-core--mcp-serve-address "ext:mevedel-dyn" (handle))
(declare-function mevedel-core--mcp-serve-stop "ext:mevedel-dyn" (handle))
(declare-function mevedel-core--mcp-serve-answer "ext:mevedel-dyn" (id args))

(defun mevedel-core-mcp-serve-start (args)
  "Serve mevedel's tools over MCP on 127.0.0.1 as ARGS say; return a handle.
ARGS is a plist: :key (the string its `mcp-serve-call' and
`mcp-serve-cancel' events carry) and :tools, each (NAME DESCRIPTION
SCHEMA-JSON).  Only clients sending its fresh secret are served."
  (mevedel-core--mcp-serve-start args))

(defun mevedel-core-mcp-serve-address (handle)
  "Return (:url URL :secret TOKEN): where and how to reach HANDLE's server."
  (mevedel-core--mcp-serve-address handle))

(defun mevedel-core-mcp-serve-stop (handle)
  "Stop HANDLE's MCP server, ending whatever still waits for an answer."
  (mevedel-core--mcp-serve-stop handle))

(defun mevedel-core-mcp-serve-answer (id answer)
  "Answer the served call ID with ANSWER, a plist.
It has :text, :images (a list of (BASE64 . MIME)) and :error (non-nil
for a failed call).  Return non-nil when the client still waited."
  (mevedel-core--mcp-serve-answer id answer))

;;;; Shared whiteboards

(declare-function mevedel-core--shared-open "ext:mevedel-dyn" (args))
(declare-function mevedel-core--shared-overview "ext:mevedel-dyn" (handle))
(declare-function mevedel-core--shared-element "ext:mevedel-dyn" (handle id))
(declare-function mevedel-core--shared-edit "ext:mevedel-dyn" (handle ops author))
(declare-function mevedel-core--shared-scene "ext:mevedel-dyn" (handle export))
(declare-function mevedel-core--shared-restore "ext:mevedel-dyn" (handle scene author))
(declare-function mevedel-core--shared-render "ext:mevedel-dyn" (id handle))
(declare-function mevedel-core--shared-synced "ext:mevedel-dyn" (id handle))
(declare-function mevedel-core--shared-serve "ext:mevedel-dyn" (handle assets))
(declare-function mevedel-core--shared-discussions "ext:mevedel-dyn" (handle))
(declare-function mevedel-core--shared-discuss "ext:mevedel-dyn" (handle element author text))
(declare-function mevedel-core--shared-history "ext:mevedel-dyn" (handle))
(declare-function mevedel-core--shared-image "ext:mevedel-dyn" (handle key))
(declare-function mevedel-core--shared-close "ext:mevedel-dyn" (handle))

(defun mevedel-core-shared-board-open (args)
  "Open a whiteboard as ARGS say and return its handle.
ARGS is a plist: :id (the board's id), :key (the string its
`shared-changed', `shared-comment' and `shared-pages' events carry;
default the id) and :scene (Excalidraw scene JSON text to start from,
as `mevedel-core-shared-board-scene' gave it, or nil)."
  (mevedel-core-ensure)
  (mevedel-core--shared-open args))

(defun mevedel-core-shared-board-overview (handle)
  "Return HANDLE's overview: a heading and one hashed line per element."
  (mevedel-core--shared-overview handle))

(defun mevedel-core-shared-board-element (handle id)
  "Return element ID of HANDLE in full as text, or nil when it is not there."
  (mevedel-core--shared-element handle id))

(defun mevedel-core-shared-board-edit (handle ops author)
  "Apply OPS, the JSON text of an array of operations, to HANDLE.
AUTHOR (a string) is recorded in the history.  All operations apply
or none: the result is (:status ok :changed :added :deleted :lines) or
\(:status conflict :conflicts ((:hash :current) ...)); an invalid
operation signals `mevedel-core-schema-error'."
  (mevedel-core--shared-edit handle ops author))

(defun mevedel-core-shared-board-scene (handle &optional export)
  "Return HANDLE's scene as JSON text, for saving and restoring.
With EXPORT, the `.excalidraw' file's: live elements only, no
discussions or history."
  (mevedel-core--shared-scene handle export))

(defun mevedel-core-shared-board-restore (handle scene author)
  "Make HANDLE's board SCENE (JSON text) again, for AUTHOR; open pages follow.
Return what `mevedel-core-shared-board-edit' returns when it applies."
  (mevedel-core--shared-restore handle scene author))

(defun mevedel-core-shared-board-render (handle callback)
  "Draw HANDLE's board as PNG for CALLBACK.
CALLBACK gets `ok' and (:png :width :height :source): :png is base64,
:source `page' (an open page's Excalidraw drawing)
or `headless'.  Return the request id."
  (mevedel-core-request
   (lambda (id) (mevedel-core--shared-render id handle))
   callback))

(defun mevedel-core-shared-board-synced (handle callback)
  "Call CALLBACK once HANDLE's open pages show its last change.
It gets `ok' and (:pages N), N the pages open then."
  (mevedel-core-request
   (lambda (id) (mevedel-core--shared-synced id handle))
   callback))

(defun mevedel-core-shared-page-directory ()
  "Return the directory of the built whiteboard page, next to the module."
  (expand-file-name "shared-page/"
                    (file-name-directory (mevedel-core-build-module-file))))

(defun mevedel-core-shared-board-serve (handle)
  "Return the 127.0.0.1 URL of HANDLE's page, starting the host if needed.
Signal `mevedel-core-load-error' when the page was not built."
  (let ((assets (mevedel-core-shared-page-directory)))
    (unless (file-exists-p (expand-file-name "index.html" assets))
      (signal 'mevedel-core-load-error
              (list (format "The whiteboard page is not built in %s: run `make page'"
                            assets))))
    (mevedel-core--shared-serve handle assets)))

(defun mevedel-core-shared-board-discussions (handle)
  "Return HANDLE's discussions as text."
  (mevedel-core--shared-discussions handle))

(defun mevedel-core-shared-board-discuss (handle element author text)
  "Add AUTHOR's TEXT to ELEMENT's discussion on HANDLE's board."
  (mevedel-core--shared-discuss handle element author text))

(defun mevedel-core-shared-board-history (handle)
  "Return HANDLE's history of contributions as text."
  (mevedel-core--shared-history handle))

(defun mevedel-core-shared-board-image (handle key)
  "Return image KEY of HANDLE's board as (MIME BASE64), or nil."
  (mevedel-core--shared-image handle key))

(defun mevedel-core-shared-board-close (handle)
  "Close HANDLE's board and disconnect its pages.
Every function given HANDLE afterwards signals an error."
  (mevedel-core--shared-close handle))

(provide 'mevedel-core)
;;; mevedel-core.el ends here
