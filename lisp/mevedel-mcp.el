;;; mevedel-mcp.el --- The user's MCP servers as specialist tools  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; MCP (Model Context Protocol) servers, configured as for Claude Code
;; (`mcpServers' in JSON), become specialist tools of a session.  The
;; protocol, the processes and the configuration parsing are the native
;; module's (crates/mevedel-core/src/mcp/); this file decides which
;; files a session reads, whether a workspace file may start anything,
;; when servers start, and how their tools join the catalog.
;;
;; What it does:
;;
;; - Configuration sources, merged by server name in this order: the
;;   user's `mevedel-mcp-user-file' (trusted), the workspace's
;;   .mcp.json (starts nothing until approved), and the files of
;;   `mevedel-mcp-command-line-files' (bin/mevedel --mcp-config,
;;   trusted, this run only).
;; - Approval of a workspace .mcp.json is remembered per content hash
;;   in `mevedel-mcp-approvals-file', like the approval of hook files
;;   (mevedel-hooks.el): a changed file asks again.  The question is a
;;   card where a view offers one (mevedel-file-approval.el), else
;;   the minibuffer.  A headless run cannot ask:
;;   `mevedel-mcp-trust-workspace' (--trust-mcp) approves the file for
;;   the run, and without it the model is told in one line that the
;;   workspace declares unapproved servers.
;; - One registry per session: a session's root and its child agents
;;   share the `mevedel-session', and so the registry.  Servers start on
;;   first use (ToolSearch, or a ToolCall program naming an mcp__
;;   tool), all approved ones in parallel, or when the first request of
;;   the session is sent with `mevedel-mcp-start-at-session-start'.  A
;;   server that fails is reported once (its error carries its last
;;   stderr lines) on stderr and to the model; the turn goes on.
;; - Each server tool is registered as a specialist named
;;   mcp__SERVER__TOOL (Claude Code's names), never native, so no MCP
;;   schema is in any request: the specialist listing shows its calling
;;   shape, ToolSearch its contract, and ToolCall calls it.  Its
;;   arguments are validated against the server's own input JSON
;;   Schema (:input-schema).  Results: text joined, images as media
;;   records, `isError' as a tool error; limits and artifacts are the
;;   pipeline's, as for any tool.
;; - Visibility.  The tool registry is global, so one mcp__ tool is
;;   registered once for all sessions; `mevedel-tool-visible-functions'
;;   hides it from every session whose registry has not listed that
;;   tool.  A session sees exactly the tools of its own servers, and a
;;   call runs on the calling session's own server.  See ADR 0021.
;; - Permissions: MCP tools are not read-only, so they ask in `ask'
;;   mode and run in `full-auto'; a rule naming mcp__SERVER matches
;;   every tool of that server (`mevedel-permissions-rule-names').
;;
;; Manual: docs/tools/mcp.md (mevedel://tools/mcp.md).
;;
;; - Resources: Read `mcp://' lists the servers with their state
;;   (starting none), `mcp://SERVER' its resources and templates, and
;;   `mcp://SERVER/ENCODED-URI' one resource's text, fresh each time.
;;   Notices (no content, no text, failures) name the address.
;; - `M-x mevedel-mcp': the servers of a session in a table, with keys
;;   to restart, stop, show the log and approve; it follows the
;;   servers' changed lists.  Failed servers are named in the view's
;;   header (`mevedel-view-header-functions') until they work again.
;; - A call's progress notifications become its reported progress
;;   (`mevedel-pipeline-report-progress'), shown on the row.
;; - Prompts as /mcp__SERVER__PROMPT commands of the composer
;;   (mevedel-mcp-composer.el), @SERVER:URI mentions attaching a
;;   resource (mevedel-mcp-mentions.el).
;;
;; - Stdio servers run directly, with the user's rights: they are the
;;   user's trusted programs.  `mevedel-mcp-sandbox' confines all or
;;   some of them with the launcher and policy of Bash commands
;;   (mevedel-sandbox.el): the workspace writable, the rest read-only,
;;   no network unless `mevedel-mcp-sandbox-network' grants it.  A
;;   server to be confined that no sandbox layer can confine does not
;;   start.
;;
;; What it does not do: speak the protocol or parse the configuration
;; (the module does), or confine HTTP servers (they are not processes
;; of mevedel).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-chat)
(require 'mevedel-core)
(require 'mevedel-interaction)
(require 'mevedel-session)
(require 'mevedel-tool-registry)
(require 'mevedel-pipeline)
(require 'mevedel-ptc)
(require 'mevedel-sandbox)
(require 'mevedel-tool-fs)
(require 'tabulated-list)
(require 'url-util)

;;; Options

(defgroup mevedel-mcp nil
  "MCP servers as tools of mevedel sessions."
  :group 'mevedel
  :prefix "mevedel-mcp-")

(defcustom mevedel-mcp-user-file
  (expand-file-name "mevedel/mcp.json"
                    (or (getenv "XDG_CONFIG_HOME") (expand-file-name "~/.config")))
  "The user's MCP configuration (Claude Code's `mcpServers' shape); trusted."
  :type 'file)

(defcustom mevedel-mcp-approvals-file
  (expand-file-name "mevedel/mcp-approved.eld"
                    (or (getenv "XDG_STATE_HOME") (expand-file-name "~/.local/state")))
  "File holding the content hashes of the approved workspace .mcp.json files."
  :type 'file)

(defcustom mevedel-mcp-start-at-session-start nil
  "Non-nil: start a session's approved servers with its first request.
Otherwise they start on first use (ToolSearch, or ToolCall of an
mcp__ tool)."
  :type 'boolean)

(defcustom mevedel-mcp-startup-timeout 30
  "Seconds a server has from launch to answer `initialize'."
  :type 'number)

(defcustom mevedel-mcp-max-result-size 50000
  "Characters of an MCP tool's result shown to the model.
A longer result is previewed and kept whole at an artifact:// address."
  :type 'natnum)

(defcustom mevedel-mcp-call-timeout nil
  "Seconds an MCP tool call may take, or nil for the registry's limit."
  :type '(choice (const :tag "Registry default" nil) number))

(defcustom mevedel-mcp-sandbox nil
  "Which stdio MCP servers run inside the sandbox of Bash commands.
nil runs every stdio server directly, with the user's rights: they are
the user's trusted programs.  t confines every stdio server; a list of
server names confines those.  A confined server starts through the
launcher of Bash commands, under `mevedel-sandbox-mode' and
`mevedel-sandbox-backend': it may write only the session's workspace
\(not its .git, dir-locals or .mevedel) and a private /tmp, reads the
rest but the home directory's secrets, starts from the environment
commands get (no secret-looking variables, see
`mevedel-sandbox-env-drop-patterns') plus its configured \"env\", and
has no network unless `mevedel-mcp-sandbox-network' names it.  Where no
sandbox layer can confine it, or `mevedel-sandbox-mode' is `off', it
does not start.  HTTP servers are not mevedel's processes: never
confined."
  :type '(choice (const :tag "None: run them directly" nil)
                 (const :tag "Every stdio server" t)
                 (repeat :tag "These servers" string)))

(defcustom mevedel-mcp-sandbox-network nil
  "Which confined stdio MCP servers keep network access.
nil denies it to every server `mevedel-mcp-sandbox' confines, as the
sandbox denies it to Bash commands; t grants it to all of them; a list
of server names to those."
  :type '(choice (const :tag "None" nil)
                 (const :tag "Every confined server" t)
                 (repeat :tag "These servers" string)))

(defvar mevedel-mcp-command-line-files nil
  "Further trusted configuration files, for this run (bin/mevedel --mcp-config).")

(defvar mevedel-mcp-trust-workspace nil
  "Non-nil: approve the workspace's .mcp.json for this run (--trust-mcp).")

(defvar mevedel-mcp-can-ask-function (lambda () (not noninteractive))
  "Function returning non-nil when the user can be asked to approve a file.")

(defvar mevedel-mcp-approve-function #'mevedel-mcp-ask-approval
  "Function of (FILE SUMMARY CALLBACK) asking whether FILE's servers may start.")

(cl-defstruct (mevedel-mcp--state (:constructor mevedel-mcp--state-make) (:copier nil))
  "A session's MCP registry and what this file knows of it."
  handle key files
  (tools (make-hash-table :test #'equal))
  loaded loading waiters notes
  (reported (make-hash-table :test #'equal)))

(defvar mevedel-mcp--states (make-hash-table :test #'eq :weakness 'key)
  "Session -> its `mevedel-mcp--state'.")

(defvar mevedel-mcp--by-key (make-hash-table :test #'equal :weakness 'value)
  "Notice key (the session id) -> its `mevedel-mcp--state'.")

(defvar mevedel-mcp--calls (make-hash-table)
  "Tool calls in flight, by request id: each reports its call's progress.")

;;; Commands

(defvar mevedel-mcp--approvals 'unread
  "Approved (FILE . HASH) pairs, or `unread'.")

(defun mevedel-mcp-approve-file (file hash)
  "Remember that the content HASH of the workspace FILE is approved."
  (setq mevedel-mcp--approvals
        (mevedel-interaction-record-approval (mevedel-mcp--approvals) file hash
                                             mevedel-mcp-approvals-file
                                             "Workspace .mcp.json files")))

(defun mevedel-mcp-ask-approval (file summary callback)
  "Ask whether the servers of FILE (SUMMARY) may start; tell CALLBACK.
A card in a view of FILE's workspace, else the minibuffer, asks (see
`mevedel-interaction-ask-file-approval')."
  (mevedel-interaction-ask-file-approval
   file (list :kind 'mcp-approval
              :title (format "Start the MCP servers of %s?" (abbreviate-file-name file))
              :does (format "It starts, %s:" (mevedel-mcp--where))
              :summary summary
              :refused "its servers do not start until it changes"
              :context (mevedel-pipeline-current-context))
   callback))

;;;; The view

(defvar-local mevedel-mcp--view-session nil
  "The session whose servers this `mevedel-mcp-mode' buffer lists.")

(defvar-keymap mevedel-mcp-mode-map
  :doc "Keys of the MCP server list."
  "g" #'mevedel-mcp-refresh
  "r" #'mevedel-mcp-restart-server
  "s" #'mevedel-mcp-stop-server
  "l" #'mevedel-mcp-show-log
  "a" #'mevedel-mcp-approve-server)

(define-derived-mode mevedel-mcp-mode tabulated-list-mode "mevedel-MCP"
  "The MCP servers of a session: state, transport, counts, last error.
\\{mevedel-mcp-mode-map}"
  (setq tabulated-list-format
        [("Server" 16 t) ("State" 10 t) ("Source" 12 t) ("Transport" 9 t)
         ("Tools" 5 nil :right-align t) ("Resources" 9 nil :right-align t)
         ("Last error" 0 nil)])
  (setq tabulated-list-padding 1)
  (add-hook 'tabulated-list-revert-hook #'mevedel-mcp--view-entries nil t)
  (tabulated-list-init-header))

(defun mevedel-mcp--state-label (status)
  "Return the state column of the server STATUS."
  (if (plist-get status :approved)
      (symbol-name (plist-get status :state))
    "unapproved"))

(defun mevedel-mcp--view-entries ()
  "Fill `tabulated-list-entries' from the view's session."
  (let ((state (gethash mevedel-mcp--view-session mevedel-mcp--states)))
    (setq tabulated-list-entries
          (and state
               (mapcar (lambda (status)
                         (let ((count (lambda (key)
                                        (if-let* ((n (plist-get status key)))
                                            (number-to-string n)
                                          "-"))))
                           (list (plist-get status :name)
                                 (vector (plist-get status :name)
                                         (mevedel-mcp--state-label status)
                                         (symbol-name (plist-get status :source))
                                         (symbol-name (plist-get status :transport))
                                         (funcall count :tools)
                                         (funcall count :resources)
                                         (replace-regexp-in-string
                                          "\n.*" "" (or (plist-get status :last-error) ""))))))
                       (mevedel-core-mcp-status (mevedel-mcp--state-handle state)))))))

(defun mevedel-mcp--pick-session ()
  "Return the session to show: the current buffer's, or one with servers."
  (or (and (mevedel-session-p mevedel-session-current) mevedel-session-current)
      (let (sessions)
        (maphash (lambda (session _) (push session sessions)) mevedel-mcp--states)
        (cond
         ((null sessions) (user-error "No session has opened its MCP servers yet"))
         ((null (cdr sessions)) (car sessions))
         (t (let ((id (completing-read "Session: " (mapcar #'mevedel-session-id sessions)
                                       nil t)))
              (cl-find id sessions :key #'mevedel-session-id :test #'equal)))))))

(defun mevedel-mcp (&optional session)
  "List the MCP servers of SESSION (default: this buffer's session).
Keys: g refresh, r restart, s stop, l show the server's log, a approve
the workspace .mcp.json that declares it."
  (interactive)
  (let* ((session (or session (mevedel-mcp--pick-session)))
         (buffer (get-buffer-create (format "*mevedel-mcp %s*" (mevedel-session-id session)))))
    (mevedel-mcp-state session)
    (with-current-buffer buffer
      (mevedel-mcp-mode)
      (setq mevedel-mcp--view-session session)
      (mevedel-mcp--view-entries)
      (tabulated-list-print))
    (pop-to-buffer buffer)
    buffer))

(defun mevedel-mcp--view-server ()
  "Return the state and the server name of the row at point."
  (let ((name (tabulated-list-get-id))
        (state (gethash mevedel-mcp--view-session mevedel-mcp--states)))
    (unless (and name state) (user-error "No MCP server on this line"))
    (cons state name)))

(defun mevedel-mcp-refresh ()
  "Show the servers' current state."
  (interactive)
  (mevedel-mcp--view-entries)
  (tabulated-list-print t))

(defun mevedel-mcp--after (buffer verb name)
  "Return a callback reporting VERB of NAME and refreshing BUFFER."
  (lambda (status value)
    (message (if (eq status 'ok) "MCP server %s %s" "MCP server %s: %s failed: %s")
             name verb (and (not (eq status 'ok)) (cadr value)))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer (mevedel-mcp-refresh)))))

(defun mevedel-mcp-restart-server ()
  "Restart the server at point now."
  (interactive)
  (pcase-let ((`(,state . ,name) (mevedel-mcp--view-server)))
    (setf (mevedel-mcp--state-loaded state) nil)
    (mevedel-core-mcp-restart (mevedel-mcp--state-handle state) name
                              (mevedel-mcp--after (current-buffer) "restarted" name))))

(defun mevedel-mcp-stop-server ()
  "Stop the server at point."
  (interactive)
  (pcase-let ((`(,state . ,name) (mevedel-mcp--view-server)))
    (mevedel-core-mcp-stop (mevedel-mcp--state-handle state) name
                           (mevedel-mcp--after (current-buffer) "stopped" name))))

(defun mevedel-mcp-show-log ()
  "Show the last stderr lines of the server at point."
  (interactive)
  (pcase-let* ((`(,state . ,name) (mevedel-mcp--view-server))
               (status (cl-find name (mevedel-core-mcp-status (mevedel-mcp--state-handle state))
                                :key (lambda (s) (plist-get s :name)) :test #'equal)))
    (with-current-buffer (get-buffer-create (format "*mevedel-mcp log %s*" name))
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (format "MCP server %s (%s), %s\n\n" name (plist-get status :file)
                        (mevedel-mcp--state-label status)))
        (when-let* ((err (plist-get status :last-error)))
          (insert "Last error: " err "\n\n"))
        (insert (string-join (plist-get status :stderr) "\n") "\n"))
      (special-mode)
      (pop-to-buffer (current-buffer)))))

(defun mevedel-mcp-approve-server ()
  "Approve the workspace .mcp.json declaring the server at point."
  (interactive)
  (pcase-let* ((`(,state . ,name) (mevedel-mcp--view-server))
               (file (cl-find-if (lambda (f) (and (eq (plist-get f :source) 'workspace)
                                                  (member name (plist-get f :servers))))
                                 (mevedel-mcp--state-files state))))
    (unless file (user-error "%s is not declared by a workspace .mcp.json" name))
    (when (y-or-n-p (format "Start the servers of %s (%s) %s? "
                            (abbreviate-file-name (plist-get file :file))
                            (string-join (plist-get file :servers) ", ")
                            (mevedel-mcp--where (plist-get file :servers))))
      (mevedel-mcp-approve-file (plist-get file :file) (plist-get file :sha256))
      (mevedel-core-mcp-approve (mevedel-mcp--state-handle state) (plist-get file :sha256))
      (setf (mevedel-mcp--state-loaded state) nil)
      (mevedel-mcp-refresh))))

;;; Plumbing

(defun mevedel-mcp--approvals ()
  "Return the approvals, reading `mevedel-mcp-approvals-file' once."
  (when (eq mevedel-mcp--approvals 'unread)
    (setq mevedel-mcp--approvals
          (mevedel-interaction-read-approvals mevedel-mcp-approvals-file)))
  mevedel-mcp--approvals)

(defun mevedel-mcp--workspace-file (session)
  "Return the .mcp.json of SESSION's workspace."
  (expand-file-name ".mcp.json" (mevedel-session-workspace session)))

(defun mevedel-mcp--environment ()
  "Return `process-environment' as (NAME . VALUE) pairs."
  (cl-loop for entry in process-environment
           for eq = (string-search "=" entry)
           when eq collect (cons (substring entry 0 eq) (substring entry (1+ eq)))))

(defun mevedel-mcp--where (&optional names)
  "Say where stdio servers run, for an approval question.
NAMES are the servers asked about; nil means any server."
  (let ((inside (lambda (name) (member name mevedel-mcp-sandbox))))
    (cond ((null mevedel-mcp-sandbox) "outside the sandbox")
          ((eq mevedel-mcp-sandbox t) "inside the sandbox")
          ((and names (cl-every inside names)) "inside the sandbox")
          ((and names (cl-notany inside names)) "outside the sandbox")
          (t "some inside the sandbox"))))

(defun mevedel-mcp--sandbox-args (workspace)
  "Return the `mevedel-core-mcp-open' arguments that confine stdio servers.
Nil when `mevedel-mcp-sandbox' confines none; else Bash's sandbox
request for WORKSPACE (writable, its .mevedel read-only) with the
environment commands get, and which servers are confined and which of
them keep the network."
  (when mevedel-mcp-sandbox
    (list :sandbox (mevedel-core-sandbox-object
                    (mevedel-sandbox-request
                     :env (car (mevedel-sandbox-environment process-environment))
                     :writable (list workspace)
                     :state-dirs (list (expand-file-name ".mevedel" workspace))))
          :sandbox-servers mevedel-mcp-sandbox
          :sandbox-network mevedel-mcp-sandbox-network)))

(defun mevedel-mcp--note (state text)
  "Note TEXT in STATE: for the user now, for the model with the next request."
  (message "mevedel: %s" text)
  (setf (mevedel-mcp--state-notes state)
        (append (mevedel-mcp--state-notes state) (list text))))

(defun mevedel-mcp-state (session)
  "Return SESSION's MCP state, opening its registry on first call."
  (or (gethash session mevedel-mcp--states)
      (let* ((files (append
                     (list (list mevedel-mcp-user-file "user")
                           (list (mevedel-mcp--workspace-file session) "workspace"))
                     (mapcar (lambda (f) (list (expand-file-name f) "command-line"))
                             mevedel-mcp-command-line-files)))
             (directory (mevedel-session-directory session))
             (key (mevedel-session-id session))
             (workspace (expand-file-name (mevedel-session-workspace session)))
             (handle (mevedel-core-mcp-open
                      (append
                       (list :files files
                             :env (mevedel-mcp--environment)
                             :cwd workspace
                             :log-file (and directory (file-directory-p directory)
                                            (expand-file-name "mcp.log" directory))
                             :startup-timeout-ms (round (* 1000 mevedel-mcp-startup-timeout))
                             :key key)
                       (mevedel-mcp--sandbox-args workspace))))
             (state (mevedel-mcp--state-make :handle handle :key key
                                             :files (mevedel-core-mcp-files handle))))
        (puthash session state mevedel-mcp--states)
        (puthash key state mevedel-mcp--by-key)
        (mevedel-mcp--check-files state)
        state)))

(defun mevedel-mcp-handle (session &optional if-open)
  "Return the handle of SESSION's registry, opening it on first call.
With IF-OPEN, return nil instead of opening it (opening may ask to
approve a workspace file).  The `mevedel-core-mcp-' functions take it."
  (when-let* ((state (if if-open
                         (gethash session mevedel-mcp--states)
                       (mevedel-mcp-state session))))
    (mevedel-mcp--state-handle state)))

(defun mevedel-mcp--check-files (state)
  "Report STATE's broken files and settle the approval of its workspace file."
  (dolist (file (mevedel-mcp--state-files state))
    (cond
     ((plist-get file :error)
      (mevedel-mcp--note state (format "MCP configuration %s: %s" (plist-get file :file)
                                       (plist-get file :error))))
     ((and (eq (plist-get file :source) 'workspace) (plist-get file :servers))
      (let ((name (plist-get file :file))
            (hash (plist-get file :sha256)))
        (cond
         ((or mevedel-mcp-trust-workspace
              (equal (cdr (assoc name (mevedel-mcp--approvals))) hash))
          (mevedel-core-mcp-approve (mevedel-mcp--state-handle state) hash))
         ((funcall mevedel-mcp-can-ask-function)
          (funcall mevedel-mcp-approve-function name
                   (mapconcat (lambda (s) (concat "  " s)) (plist-get file :servers) "\n")
                   (lambda (approved)
                     (when (eq approved t)
                       (mevedel-mcp-approve-file name hash)
                       (mevedel-core-mcp-approve (mevedel-mcp--state-handle state) hash)
                       (setf (mevedel-mcp--state-loaded state) nil)))))
         (t
          (mevedel-mcp--note
           state (format "The workspace's %s declares MCP servers (%s) that are not \
approved, so they are not started." (file-name-nondirectory name)
                          (string-join (plist-get file :servers) ", "))))))))))

(defun mevedel-mcp--register-tool (info)
  "Register the MCP tool INFO (a plist from `mevedel-core-mcp-tools')."
  (let ((full (plist-get info :full-name))
        (server (plist-get info :server))
        (tool (plist-get info :name)))
    (mevedel-tool-register
     full
     (list :category "mcp"
           :groups (list "mcp" server)
           :description (concat (or (plist-get info :description)
                                    (plist-get info :title) "")
                                (format " (MCP server %s, tool %s)" server tool))
           :input-schema (plist-get info :input-schema)
           :async-p t
           :max-result-size mevedel-mcp-max-result-size
           :function (lambda (callback args)
                       (mevedel-mcp--call server tool callback args))))))

(defun mevedel-mcp--load-tools (state server done)
  "List SERVER's tools in STATE, register them, then call DONE."
  (mevedel-core-mcp-tools
   (mevedel-mcp--state-handle state) server
   (lambda (status value)
     (if (not (eq status 'ok))
         (mevedel-mcp--failed state server (cadr value))
       (mevedel-mcp--recovered state server)
       (let ((table (mevedel-mcp--state-tools state)))
         (maphash (lambda (name owner) (when (equal owner server) (remhash name table)))
                  table)
         (dolist (info value)
           (condition-case err
               (progn (mevedel-mcp--register-tool info)
                      (puthash (plist-get info :full-name) server table))
             (error (message "mevedel: MCP tool %s not usable: %s"
                             (plist-get info :full-name) (error-message-string err)))))
         ;; The session sees other tools now (`mevedel-mcp--visible-p').
         (mevedel-tool-catalog-changed)))
     (funcall done))))

(defun mevedel-mcp--failed (state server message)
  "Report once that SERVER of STATE failed with MESSAGE.
The server stays named in the view's header until it lists its tools."
  (unless (equal (gethash server (mevedel-mcp--state-reported state)) message)
    (puthash server message (mevedel-mcp--state-reported state))
    (force-mode-line-update t)
    (mevedel-mcp--note state (format "MCP server %s failed: %s" server message))))

(defun mevedel-mcp--recovered (state server)
  "Forget that SERVER of STATE failed: it works again."
  (when (gethash server (mevedel-mcp--state-reported state))
    (remhash server (mevedel-mcp--state-reported state))
    (force-mode-line-update t)))

(defvar-keymap mevedel-mcp-header-map
  :doc "Keys of the failed servers' text in a view's header line."
  "<header-line> <mouse-1>" #'mevedel-mcp-from-header)

(defun mevedel-mcp-from-header (event)
  "Show the MCP servers of the view whose header line got EVENT."
  (interactive "e")
  (pcase-let ((`(,text . ,pos) (posn-string (event-start event))))
    (mevedel-mcp (and text (get-text-property (or pos 0) 'mevedel-mcp-session text)))))

(defun mevedel-mcp-header-text (chat)
  "Return the header text naming CHAT's failed MCP servers, or nil.
For `mevedel-view-header-functions'."
  (when-let* ((session (mevedel-chat-session chat))
              (state (gethash session mevedel-mcp--states))
              (failed (hash-table-keys (mevedel-mcp--state-reported state))))
    (propertize (format "MCP failed: %s" (string-join (sort failed #'string<) ", "))
                'face 'error 'mouse-face 'highlight 'keymap mevedel-mcp-header-map
                'mevedel-mcp-session session
                'help-echo "mouse-1: show the MCP servers (M-x mevedel-mcp)")))

(defun mevedel-mcp-prepare (session program callback)
  "Start SESSION's approved servers and list their tools, then call CALLBACK.
PROGRAM is the text naming the tools about to be needed (a ToolCall
program, a child agent's role's tool list), or nil when any may be:
text that names no mcp__ tool needs no server.  For
`mevedel-ptc-prepare-functions'."
  (let ((state (and (or (null program) (string-search "mcp__" program))
                    (mevedel-mcp-state session))))
    (if (or (null state) (mevedel-mcp--state-loaded state))
        (funcall callback)
      (mevedel-mcp--load state callback))))

(defun mevedel-mcp--load (state callback)
  "Start STATE's approved servers, list their tools, then call CALLBACK."
  (push callback (mevedel-mcp--state-waiters state))
  (unless (mevedel-mcp--state-loading state)
    (setf (mevedel-mcp--state-loading state) t)
    (let ((finish (lambda ()
                    (setf (mevedel-mcp--state-loading state) nil
                          (mevedel-mcp--state-loaded state) t)
                    (let ((waiters (nreverse (mevedel-mcp--state-waiters state))))
                      (setf (mevedel-mcp--state-waiters state) nil)
                      (mapc #'funcall waiters)))))
      (mevedel-core-mcp-start
       (mevedel-mcp--state-handle state) nil
       (lambda (status value)
         (let* ((started (and (eq status 'ok)
                              (cl-loop for (server err) in value
                                       if err do (mevedel-mcp--failed state server err)
                                       else collect server)))
                (left (length started)))
           (unless (eq status 'ok)
             (mevedel-mcp--note state (format "MCP servers did not start: %s" (cadr value))))
           (if (zerop left)
               (funcall finish)
             (dolist (server started)
               (mevedel-mcp--load-tools state server
                                        (lambda ()
                                          (when (zerop (cl-decf left))
                                            (funcall finish))))))))))))

(defun mevedel-mcp--image (block tool session buffer)
  "Return the image content BLOCK of TOOL's result as (media . RECORD) or text.
It is a media record when the model of BUFFER takes its type; else
it is saved in SESSION's tool-results/ and named, so the model can
tell the user where it is."
  (let* ((mime (plist-get block :mime-type))
         (bytes (condition-case nil (base64-decode-string (plist-get block :data))
                  (error nil))))
    (cond
     ((null bytes) (format "[image %s: the server sent data that is not base64]" mime))
     ((and (mevedel-tool-media-type-p mime)
           (mevedel-gptel-model-accepts-mime-p mime buffer))
      (cons 'media (list :mime mime :data bytes)))
     (t
      (let ((address (mevedel-session-save-artifact
                      session (replace-regexp-in-string "[^A-Za-z0-9_-]" "_" tool)
                      (or (nth 1 (mevedel-tool-media-type-p mime))
                          (replace-regexp-in-string "[^a-z0-9]" "" (car (last (split-string mime "/")))))
                      bytes)))
        (format "[image %s, %d bytes, not shown (the model does not take %s)%s]"
                mime (length bytes) mime
                (if address (concat "; saved at " address) "")))))))

(defun mevedel-mcp--result (value tool session buffer)
  "Return the pipeline envelope of the result VALUE of TOOL.
SESSION and BUFFER, the call's, decide what becomes of images (see
`mevedel-mcp--image')."
  (let (texts media)
    (dolist (block (plist-get value :content))
      (pcase (plist-get block :type)
        ('text (push (plist-get block :text) texts))
        ('image (let ((image (mevedel-mcp--image block tool session buffer)))
                  (if (eq (car-safe image) 'media)
                      (push (cdr image) media)
                    (push image texts))))
        ('resource (push (or (plist-get block :text)
                             (format "[resource %s]" (plist-get block :uri)))
                         texts))
        ('resource-link (push (format "[resource %s]"
                                      (plist-get (plist-get block :resource) :uri))
                              texts))
        (type (push (format "[%s content]" type) texts))))
    (let ((text (string-join (nreverse texts) "\n")))
      (when (and (string-empty-p text) (plist-get value :structured))
        (setq text (plist-get value :structured)))
      (list :result (if (and (string-empty-p text) media)
                        (format "[%d image(s)]" (length media))
                      text)
            :status (if (plist-get value :is-error) 'error 'success)
            :media (nreverse media)))))

(defun mevedel-mcp--call (server tool callback args)
  "Call TOOL of SERVER of the calling session with ARGS; CALLBACK gets it."
  (let* ((context (mevedel-pipeline-current-context))
         (session (plist-get context :session))
         (state (and session (gethash session mevedel-mcp--states))))
    (if (not state)
        (funcall callback (format "Error: no MCP server %s in this session" server))
      (let (id)
        (setq id (mevedel-core-mcp-call
                  (mevedel-mcp--state-handle state) server tool
                  (json-serialize args :null-object :null :false-object :json-false)
                  mevedel-mcp-call-timeout
                  (lambda (status value)
                    (remhash id mevedel-mcp--calls)
                    (funcall callback
                             (if (eq status 'ok)
                                 (mevedel-mcp--result value (format "mcp__%s__%s" server tool)
                                                      session (plist-get context :data-buffer))
                               (format "Error: %s" (cadr value)))))))
        (puthash id (mevedel-pipeline-continuation #'mevedel-pipeline-report-progress)
                 mevedel-mcp--calls)
        (mevedel-pipeline-add-canceller (lambda () (mevedel-core-mcp-cancel id)))))))

(defun mevedel-mcp--visible-p (tool buffer)
  "Return nil when TOOL is an MCP tool data BUFFER's session has not listed.
For `mevedel-tool-visible-functions'."
  (or (not (equal (mevedel-tool-category tool) "mcp"))
      (when-let* ((session (and (buffer-live-p buffer)
                                (buffer-local-value 'mevedel-session-current buffer)))
                  (state (gethash session mevedel-mcp--states)))
        (gethash (mevedel-tool-name tool) (mevedel-mcp--state-tools state)))))

(defun mevedel-mcp-mail (chat)
  "Return CHAT's MCP notes for the model, once each.
Opens the session's registry (so approval is settled before the first
request) and, with `mevedel-mcp-start-at-session-start', starts it.
For `mevedel-chat-message-functions'."
  (when-let* ((session (mevedel-chat-session chat))
              (state (mevedel-mcp-state session)))
    (when (and mevedel-mcp-start-at-session-start
               (not (mevedel-mcp--state-loaded state)))
      (mevedel-mcp--load state #'ignore))
    (when-let* ((notes (mevedel-mcp--state-notes state)))
      (setf (mevedel-mcp--state-notes state) nil)
      (list (concat "<mcp-notice>\n" (string-join notes "\n") "\n</mcp-notice>")))))

(defun mevedel-mcp--resource-lines (chat)
  "Return the mcp:// roster line when CHAT's session configures MCP servers.
It opens the session's registry, as `mevedel-mcp-mail' does for the
same request, so the first request's roster already knows."
  (when-let* (((mevedel-chat-p chat))
              (session (mevedel-chat-session chat))
              ((mevedel-session-p session))
              (handle (mevedel-mcp-handle session))
              ((mevedel-core-mcp-status handle)))
    (list "- mcp:// resources of the session's MCP servers (mcp:// lists the servers)")))

(defvar mevedel-mcp-notice-functions nil
  "Abnormal hook run with the data of each `mcp-notice' event of a session.
DATA is (:key SESSION-ID :kind KIND :server NAME ...); KIND is
`tools-changed', `resources-changed', `prompts-changed' or `crashed'.
mevedel-mcp-composer.el keeps its lists of prompts and resources fresh
this way.")

(defun mevedel-mcp--notice (data)
  "Handle an `mcp-notice' event DATA from a session's registry."
  (when-let* ((state (gethash (plist-get data :key) mevedel-mcp--by-key)))
    (run-hook-with-args 'mevedel-mcp-notice-functions data)
    (pcase (plist-get data :kind)
      ('crashed
       (mevedel-mcp--failed state (plist-get data :server)
                            (string-join (cons (plist-get data :message)
                                               (plist-get data :stderr))
                                         "\n")))
      ('tools-changed
       (mevedel-mcp--load-tools state (plist-get data :server) #'ignore))
      ('resources-changed
       ;; Listing again refreshes the count the listing and the view show.
       (mevedel-core-mcp-resources (mevedel-mcp--state-handle state) (plist-get data :server)
                                   (lambda (_status _value) (mevedel-mcp--refresh-views)))))))

(defun mevedel-mcp--refresh-views ()
  "Redraw every `mevedel-mcp' view."
  (dolist (buffer (buffer-list))
    (when (eq (buffer-local-value 'major-mode buffer) 'mevedel-mcp-mode)
      (with-current-buffer buffer (mevedel-mcp-refresh)))))

(defun mevedel-mcp--progress-text (progress total message)
  "Return the row text of a server's PROGRESS of TOTAL with MESSAGE.
Both numbers may be fractional; TOTAL and MESSAGE may be nil."
  (let ((number (lambda (n) (if (= n (ftruncate n)) (format "%d" n) (format "%.3g" n)))))
    (concat (funcall number progress)
            (and total (concat "/" (funcall number total)))
            (and message (not (string-empty-p message))
                 (concat " · " (car (split-string message "\n")))))))

(defun mevedel-mcp--progress (data)
  "Show the `mcp-progress' event DATA, (ID PROGRESS TOTAL MESSAGE), on its row."
  (pcase-let ((`(,id ,progress ,total ,message) data))
    (when-let* ((report (gethash id mevedel-mcp--calls)))
      (funcall report (mevedel-mcp--progress-text progress total message)))))

(defun mevedel-mcp--close (session)
  "Stop SESSION's servers and forget its registry."
  (when-let* ((state (gethash session mevedel-mcp--states)))
    (remhash session mevedel-mcp--states)
    (remhash (mevedel-mcp--state-key state) mevedel-mcp--by-key)
    (mevedel-tool-catalog-changed)
    (mevedel-core-mcp-stop (mevedel-mcp--state-handle state) nil #'ignore)))

;;;; Resources: mcp:// addresses

(defun mevedel-mcp--status-line (status)
  "Return the `Read mcp://' line of the server STATUS."
  (format "mcp://%s  %s, %s from %s%s%s%s%s"
          (url-hexify-string (plist-get status :name))
          (mevedel-mcp--state-label status)
          (plist-get status :transport)
          (plist-get status :source)
          (if-let* ((boundary (plist-get status :sandbox)))
              (format ", sandboxed (%s)" boundary)
            "")
          (if (plist-get status :tools) (format ", %d tools" (plist-get status :tools)) "")
          (if (plist-get status :resources)
              (format ", %d resources" (plist-get status :resources))
            "")
          (if-let* ((err (plist-get status :last-error)))
              (concat "; last error: " (car (split-string err "\n")))
            "")))

(defun mevedel-mcp--resource-listing (server value)
  "Return the `Read mcp://SERVER' text of VALUE, (:resources :templates)."
  (let ((line (lambda (uri name description mime)
                (concat "mcp://" (url-hexify-string server) "/" (url-hexify-string uri)
                        "  " name
                        (if description (concat " - " (car (split-string description "\n"))) "")
                        (if mime (format " (%s)" mime) "")))))
    (concat
     (if (plist-get value :resources)
         (mapconcat (lambda (r) (funcall line (plist-get r :uri) (plist-get r :name)
                                         (plist-get r :description) (plist-get r :mime-type)))
                    (plist-get value :resources) "\n")
       (format "MCP server %s lists no resources." server))
     (when (plist-get value :templates)
       (concat "\n\nResource templates (fill in the {placeholders}, encode the URI):\n"
               (mapconcat (lambda (r) (concat "  " (plist-get r :uri-template) "  "
                                              (plist-get r :name)))
                          (plist-get value :templates) "\n"))))))

(defun mevedel-mcp--contents-text (address contents)
  "Return the text of the resource CONTENTS (content plists) read at ADDRESS.
No content at all and content without text each get a notice naming
ADDRESS, so the model can tell them apart from an empty text."
  (cond
   ((null contents)
    (format "[%s: the server returned no content]" address))
   ((cl-notany (lambda (c) (plist-get c :text)) contents)
    (format "[%s: the server returned %d content item(s) and no text: %s]"
            address (length contents)
            (mapconcat (lambda (c) (or (plist-get c :mime-type)
                                       (symbol-name (plist-get c :type))))
                       contents ", ")))
   (t
    (mapconcat (lambda (c)
                 (or (plist-get c :text)
                     (format "[%s content%s, not text]" (plist-get c :type)
                             (if (plist-get c :mime-type)
                                 (concat " " (plist-get c :mime-type)) ""))))
               contents "\n"))))

(defun mevedel-mcp-read-address (canonical session callback)
  "Read the mcp:// address CANONICAL for SESSION; CALLBACK gets the text.
On failure CALLBACK gets (error MESSAGE).  `mcp://' lists the servers
without starting any; `mcp://SERVER' lists its resources and
`mcp://SERVER/ENCODED-URI' reads one, starting the server if needed
\(never an unapproved one).  For `mevedel-tool-fs-read-functions'."
  (when (string-prefix-p "mcp://" canonical)
    (if (not (mevedel-session-p session))
        (funcall callback (list 'error (format "%s is unavailable outside a mevedel session"
                                               canonical)))
      (mevedel-mcp--read-address canonical session callback))
    t))

(defun mevedel-mcp--read-address (canonical session callback)
  "Read the mcp:// address CANONICAL in SESSION; CALLBACK gets the text."
  (let* ((state (mevedel-mcp-state session))
         (handle (mevedel-mcp--state-handle state))
         (path (substring canonical (length "mcp://")))
         (slash (string-search "/" path))
         (server (and (not (string-empty-p path))
                      (url-unhex-string (if slash (substring path 0 slash) path))))
         (uri (and slash (url-unhex-string (substring path (1+ slash)))))
         (reply (lambda (render)
                  (lambda (status value)
                    (funcall callback (if (eq status 'ok)
                                          (funcall render value)
                                        (list 'error (format "Cannot read %s: %s"
                                                             canonical (cadr value)))))))))
    (cond
     ((null server)
      (let ((statuses (mevedel-core-mcp-status handle)))
        (funcall callback
                 (if statuses
                     (mapconcat #'mevedel-mcp--status-line statuses "\n")
                   "No MCP servers are configured (see mevedel://tools/mcp.md)."))))
     ((null uri)
      (mevedel-core-mcp-resources handle server
                                  (funcall reply (lambda (value)
                                                   (mevedel-mcp--resource-listing
                                                    server value)))))
     (t (mevedel-core-mcp-read handle server uri
                               (funcall reply (apply-partially #'mevedel-mcp--contents-text
                                                               canonical)))))))

(mevedel-core-register-event-handler 'mcp-notice #'mevedel-mcp--notice)
(mevedel-core-register-event-handler 'mcp-progress #'mevedel-mcp--progress)
(add-hook 'mevedel-tool-visible-functions #'mevedel-mcp--visible-p)
(add-hook 'mevedel-tool-fs-read-functions #'mevedel-mcp-read-address)
(add-hook 'mevedel-session-close-functions #'mevedel-mcp--close)
(add-hook 'mevedel-ptc-prepare-functions #'mevedel-mcp-prepare)
(add-hook 'mevedel-chat-message-functions #'mevedel-mcp-mail)
(add-hook 'mevedel-prompt-resource-roster-functions #'mevedel-mcp--resource-lines -40)
(add-hook 'mevedel-view-header-functions #'mevedel-mcp-header-text)

(provide 'mevedel-mcp)
;;; mevedel-mcp.el ends here
