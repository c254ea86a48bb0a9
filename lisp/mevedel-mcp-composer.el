;;; mevedel-mcp-composer.el --- MCP prompts and resources in the composer  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The composer's side of the user's MCP servers (mevedel-mcp.el), in
;; Claude Code's spelling:
;;
;; - Prompts are commands, /mcp__SERVER__PROMPT (named like the
;;   servers' tools), offered with the view's own commands
;;   (`mevedel-view-slash-command-functions').  The words after the
;;   name are the prompt's arguments, in the order the server declares
;;   them; double quotes keep spaces together, and words beyond the
;;   last argument join it.  A required argument left out is asked for
;;   in the minibuffer, and with no words at all every argument is.
;;   The server fills the prompt in (prompts/get) and its messages are
;;   sent as the user's message (queued while a turn runs): text as it
;;   is, an embedded resource as its text, a resource link as its
;;   mcp:// address, and an image or audio as a line naming it, since a
;;   user message carries no media here.  Errors name the server and
;;   the prompt.
;; - The prompts known are those of the started servers, listed when
;;   completion or a command needs them and again after a server's
;;   notifications/prompts/list_changed.  Completing or running an
;;   /mcp… command is a use of MCP: it starts the approved servers.
;; - Completion of @SERVER:URI mentions (attached when the message is
;;   sent, mevedel-mcp-mentions.el): the configured servers once the
;;   session's registry is open, then the resources a server lists; a
;;   completed one is bound to its server and URI.  mcp:// addresses
;;   complete too, canonically, from what is already listed only.
;;
;; What it does not do: run prompts in headless runs (bin/mevedel -p),
;; complete the values of a prompt's arguments (completion/complete),
;; or offer resource templates.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'url-util)
(require 'mevedel-chat)
(require 'mevedel-composer)
(require 'mevedel-core)
(require 'mevedel-mcp)
(require 'mevedel-mcp-mentions)
(require 'mevedel-session)
(require 'mevedel-view)

;;; Options

(defvar mevedel-mcp-composer-read-argument-function #'read-string
  "Function of (PROMPT) asking the user for a prompt argument's value.")

(cl-defstruct (mevedel-mcp-composer--cache (:constructor mevedel-mcp-composer--cache-make)
                                           (:copier nil))
  "What the composer knows of one session's MCP servers."
  ;; Server -> its prompts, and server -> its resources, as listed.
  (prompts (make-hash-table :test #'equal))
  (resources (make-hash-table :test #'equal))
  ;; (KIND . SERVER) pairs being listed now.
  (listing (make-hash-table :test #'equal)))

(defvar mevedel-mcp-composer--caches (make-hash-table :test #'equal)
  "Session id -> its `mevedel-mcp-composer--cache'.")

;;; Commands

(defun mevedel-mcp-composer-commands (chat name)
  "Return the /mcp__ commands of CHAT's servers that may start with NAME.
For `mevedel-view-slash-command-functions'.  A NAME beginning with
\"mcp\" is a use of MCP: the servers start and list their prompts in
the background.  A whole mcp__SERVER__PROMPT name not listed yet is
offered too, so that running it waits for the listing."
  (when-let* ((session (mevedel-mcp-composer--session chat)))
    (let ((mcp (string-prefix-p "mcp" name)))
      (when mcp (mevedel-mcp-composer--list-prompts session nil))
      (when-let* ((cache (or (and mcp (mevedel-mcp-composer--cache session))
                             (gethash (mevedel-session-id session)
                                      mevedel-mcp-composer--caches))))
        (let ((entries (mevedel-mcp-composer--entries cache)))
          (if (or (assoc name entries)
                  (not (string-match-p "\\`mcp__[^_].*__." name)))
              entries
            (cons (list name (mevedel-mcp-composer--runner name) "MCP prompt" nil)
                  entries)))))))

(defun mevedel-mcp-composer--entries (cache)
  "Return the slash command entries for the MCP prompt lists in CACHE."
  (let (entries)
    (maphash (lambda (_server prompts)
               (dolist (prompt prompts)
                 (push (list (plist-get prompt :command)
                             (mevedel-mcp-composer--runner (plist-get prompt :command))
                             (mevedel-mcp-composer--help prompt)
                             nil)
                       entries)))
             (mevedel-mcp-composer--cache-prompts cache))
    (sort entries (lambda (a b) (string< (car a) (car b))))))

(defun mevedel-mcp-composer--help (prompt)
  "Return the completion annotation of PROMPT: what it is, its arguments."
  (let ((args (mapconcat (lambda (arg)
                           (concat (plist-get arg :name)
                                   (unless (plist-get arg :required) "?")))
                         (plist-get prompt :arguments) " ")))
    (concat (car (split-string (or (plist-get prompt :description)
                                   (plist-get prompt :title)
                                   (format "prompt %s" (plist-get prompt :name)))
                               "\n"))
            (format " (MCP server %s%s)" (plist-get prompt :server)
                    (if (string-empty-p args) "" (concat "; " args))))))

(defun mevedel-mcp-composer--runner (command)
  "Return the slash command function running the MCP prompt COMMAND."
  (lambda (chat argument)
    (mevedel-mcp-composer-run chat command argument)))

(defun mevedel-mcp-composer-run (chat command argument)
  "Run the MCP prompt COMMAND (mcp__SERVER__PROMPT) in CHAT with ARGUMENT.
ARGUMENT is the text after the command: its words are the prompt's
arguments.  The filled-in prompt is sent as the user's message (queued
when a turn is running)."
  (let ((session (or (mevedel-mcp-composer--session chat)
                     (user-error "/%s: MCP prompts need a mevedel session" command))))
    (mevedel-mcp-composer--list-prompts
     session
     (lambda ()
       ;; Out of the module's event dispatch before asking anything.
       (run-at-time
        0 nil
        (lambda ()
          (condition-case err
              (mevedel-mcp-composer--fill chat session command argument)
            ((error quit)
             (message "mevedel: /%s: %s" command (error-message-string err))))))))))

(defun mevedel-mcp-composer--find (session command)
  "Return the prompt of SESSION's servers whose command is COMMAND, or nil."
  (let (found)
    (maphash (lambda (_server prompts)
               (unless found
                 (setq found (cl-find command prompts
                                      :key (lambda (p) (plist-get p :command))
                                      :test #'equal))))
             (mevedel-mcp-composer--cache-prompts (mevedel-mcp-composer--cache session)))
    found))

(defun mevedel-mcp-composer--fill (chat session command argument)
  "Ask the server of SESSION's prompt COMMAND to fill it in from ARGUMENT.
Send the result in CHAT."
  (let* ((prompt (or (mevedel-mcp-composer--find session command)
                     (user-error "No MCP prompt /%s; the servers offer: %s" command
                                 (or (mapconcat (lambda (e) (concat "/" (car e)))
                                                (mevedel-mcp-composer--entries
                                                 (mevedel-mcp-composer--cache session))
                                                ", ")
                                     "none"))))
         (server (plist-get prompt :server))
         (name (plist-get prompt :name))
         (arguments (mevedel-mcp-composer-arguments prompt argument)))
    (mevedel-core-mcp-prompt
     (mevedel-mcp-handle session) server name arguments
     (lambda (status value)
       (if (not (eq status 'ok))
           (message "mevedel: /%s: MCP server %s, prompt %s: %s" command server name
                    (cadr value))
         (let ((text (mevedel-mcp-composer-prompt-text server value)))
           (if (string-blank-p text)
               (message "mevedel: /%s: MCP server %s, prompt %s: no text to send"
                        command server name)
             (mevedel-mcp-composer--send chat text))))))))

(defun mevedel-mcp-composer-arguments (prompt text)
  "Return PROMPT's arguments as (NAME . VALUE) pairs, from the words of TEXT.
Words go to the declared arguments in order (double quotes keep spaces,
words beyond the last argument join it).  A required argument left out
is asked for, as is every argument when TEXT has no words; an optional
one answered with nothing is left out."
  (let* ((declared (plist-get prompt :arguments))
         (words (condition-case nil
                    (split-string-and-unquote (or text ""))
                  (error (split-string (or text "") nil t))))
         (count (length declared))
         (ask-all (null words)))
    (when (and words (zerop count))
      (user-error "/%s takes no arguments" (plist-get prompt :command)))
    (when (> (length words) count)
      (setq words (append (take (1- count) words)
                          (list (string-join (nthcdr (1- count) words) " ")))))
    (cl-loop
     for arg in declared
     for given in (append words (make-list count nil))
     for required = (plist-get arg :required)
     for value = (or given
                     (and (or required ask-all)
                          (funcall mevedel-mcp-composer-read-argument-function
                                   (format "%s%s%s: " (plist-get arg :name)
                                           (if required "" " (optional)")
                                           (if-let* ((d (plist-get arg :description)))
                                               (format " [%s]" d)
                                             "")))))
     do (when (and required (or (null value) (string-empty-p value)))
          (user-error "/%s needs its argument %s" (plist-get prompt :command)
                      (plist-get arg :name)))
     when (and value (not (string-empty-p value)))
     collect (cons (plist-get arg :name) value))))

(defun mevedel-mcp-composer-prompt-text (server value)
  "Return the message the filled-in prompt VALUE of SERVER sends.
VALUE is (:description :messages).  A message of a role other than the
user's is marked with it."
  (mapconcat (lambda (message)
               (let ((text (mevedel-mcp-composer--content-text
                            server (plist-get message :content)))
                     (role (plist-get message :role)))
                 (if (equal role "user") text (format "[%s]\n%s" role text))))
             (plist-get value :messages) "\n\n"))

(defun mevedel-mcp-composer--content-text (server content)
  "Return the text standing for the prompt CONTENT of SERVER."
  (pcase (plist-get content :type)
    ('text (plist-get content :text))
    ('resource
     (if-let* ((text (plist-get content :text)))
         (format "<resource uri=\"%s\">\n%s\n</resource>" (plist-get content :uri) text)
       (format "[resource %s (%s), binary: not attached]" (plist-get content :uri)
               (or (plist-get content :mime-type) "no type"))))
    ('resource-link
     (let ((uri (plist-get (plist-get content :resource) :uri)))
       (format "[resource %s: Read %s]" uri (mevedel-mcp-mentions-address server uri))))
    ((and (or 'image 'audio) type)
     (format "[%s %s from the prompt: not attached, a user message carries no media]"
             type (plist-get content :mime-type)))
    (type (format "[%s content: not attached]" type))))

(defun mevedel-mcp-composer--send (chat text)
  "Send TEXT as the user's message in CHAT, queued during a turn."
  (condition-case err
      (if (mevedel-chat-busy-p chat)
          (mevedel-chat-queue chat text)
        (mevedel-chat-send chat text))
    (error (message "mevedel: the MCP prompt was not sent: %s" (error-message-string err)))))

;;; Completion of @SERVER:URI

(defun mevedel-mcp-composer-capf ()
  "Complete @SERVER: with the MCP servers, then @SERVER:URI with its resources.
Servers complete once the session's registry is open (its first
message opens it); after the colon it opens, and a server not started
yet starts to list its resources (complete again when they are in)."
  (when-let* ((composer mevedel-view--composer)
              ((>= (point) composer))
              (session (mevedel-mcp-composer--session (mevedel-view-chat)))
              (start (save-excursion (skip-chars-backward "^ \t\n(" composer) (point)))
              (token (buffer-substring-no-properties start (point)))
              ((string-match "\\`@\\([^ \t\n@:]*\\)\\(:\\)?" token)))
    (let* ((server (match-string 1 token))
           (colon (match-beginning 2))
           (handle (mevedel-mcp-handle session (not colon)))
           (servers (and handle (mapcar (lambda (s) (plist-get s :name))
                                        (mevedel-core-mcp-status handle)))))
      (cond
       ((null servers) nil)
       ((not colon)
        (list (1+ start) (point) (mapcar (lambda (s) (concat s ":")) servers)
              :exclusive 'no :annotation-function (lambda (_) "  MCP server")))
       ((member server servers)
        (let ((candidates (mapcar (lambda (r) (concat server ":" (plist-get r :uri)))
                                  (mevedel-mcp-composer--resources session server))))
          (list (1+ start) (point) candidates
                :exclusive 'no
                :annotation-function (lambda (_) "  MCP resource")
                :exit-function (mevedel-mcp-composer--binder server candidates))))))))

(defun mevedel-mcp-composer--binder (server candidates)
  "Return the completion exit function binding a completed resource of SERVER.
The @SERVER:URI token, when it is one of CANDIDATES, keeps that server
and URI (`mevedel-mentions-bind'), so the resource sent is the one
completed to."
  (lambda (string status)
    (let ((start (- (point) (length string) 1)))
      (when (and status (member string candidates) (>= start (point-min))
                 (eq (char-after start) ?@))
        (mevedel-mentions-bind start (point)
                               (list :kind 'mcp :server server
                                     :uri (substring string (1+ (length server)))))))))

(defun mevedel-mcp-composer-address-capf ()
  "Complete mcp:// addresses from the metadata the session's connection has.
mcp://SERVER/ for each configured server of an open registry, then
mcp://SERVER/ENCODED-URI for the resources already listed: canonical
plain text (`mevedel-mcp-mentions-address'), never a binding.  Nothing
is opened, started or listed (address-to-resource.md: MCP completion
uses metadata already held and never starts or refreshes a connection)."
  (when-let* ((composer mevedel-view--composer)
              ((>= (point) composer))
              (start (save-excursion (skip-chars-backward "^ \t\n(" composer) (point)))
              (token (buffer-substring-no-properties start (point)))
              ((string-prefix-p "mcp:" token))
              (session (mevedel-mcp-composer--session (mevedel-view-chat)))
              (handle (mevedel-mcp-handle session t)))
    (let* ((cache (mevedel-mcp-composer--cache session))
           (candidates
            (cl-loop for status in (mevedel-core-mcp-status handle)
                     for server = (plist-get status :name)
                     for listed = (gethash server (mevedel-mcp-composer--cache-resources cache))
                     collect (concat "mcp://" (url-hexify-string server) "/")
                     append (mapcar (lambda (r) (mevedel-mcp-mentions-address
                                                 server (plist-get r :uri)))
                                    (and (listp listed) listed)))))
      (list start (point) (mevedel-composer-address-table candidates)
            :exclusive 'no :annotation-function (lambda (_) "  MCP")))))

(defun mevedel-mcp-composer--resources (session server)
  "Return the resources of SESSION's SERVER as listed so far.
When they are not listed yet, list them in the background."
  (let ((listed (gethash server (mevedel-mcp-composer--cache-resources
                                 (mevedel-mcp-composer--cache session))
                         'unlisted)))
    (if (listp listed)
        listed
      (mevedel-mcp-composer--list session 'resources server nil)
      nil)))

(defun mevedel-mcp-composer--setup (view)
  "Complete @SERVER:URI in the composer of VIEW."
  (with-current-buffer view
    (add-hook 'completion-at-point-functions #'mevedel-mcp-composer-capf -10 t)
    (add-hook 'completion-at-point-functions #'mevedel-mcp-composer-address-capf -10 t)))

;;; Plumbing

(defun mevedel-mcp-composer--session (chat)
  "Return CHAT's session, or nil."
  (when-let* ((session (and chat (mevedel-chat-session chat))))
    (and (mevedel-session-p session) session)))

(defun mevedel-mcp-composer--cache (session)
  "Return SESSION's cache, made if needed."
  (let ((id (mevedel-session-id session)))
    (or (gethash id mevedel-mcp-composer--caches)
        (puthash id (mevedel-mcp-composer--cache-make) mevedel-mcp-composer--caches))))

(defun mevedel-mcp-composer--list-prompts (session callback)
  "Ask SESSION's servers not asked yet for their prompt lists; call CALLBACK.
The approved servers start first (`mevedel-mcp-prepare').  CALLBACK
may be nil."
  (mevedel-mcp-prepare
   session nil
   (lambda ()
     (let* ((cache (mevedel-mcp-composer--cache session))
            (table (mevedel-mcp-composer--cache-prompts cache))
            (ready (cl-loop for status in (mevedel-core-mcp-status (mevedel-mcp-handle session))
                            when (eq (plist-get status :state) 'ready)
                            collect (plist-get status :name)))
            (missing (cl-remove-if (lambda (server) (listp (gethash server table 'unlisted)))
                                   ready))
            (left (length missing)))
       ;; A server that stopped offers nothing.
       (maphash (lambda (server _) (unless (member server ready) (remhash server table)))
                table)
       (if (zerop left)
           (when callback (funcall callback))
         (dolist (server missing)
           (mevedel-mcp-composer--list session 'prompts server
                                       (lambda ()
                                         (when (and (zerop (cl-decf left)) callback)
                                           (funcall callback))))))))))

(defun mevedel-mcp-composer--list (session kind server done)
  "Ask SESSION's SERVER for its list of KIND and keep it in the cache.
KIND is `prompts' or `resources'.  Then call DONE, if non-nil.  One
listing of each runs at a time; after a failure the list is asked for
again next time (mevedel-mcp.el reports failed servers)."
  (let* ((cache (mevedel-mcp-composer--cache session))
         (key (cons kind server))
         (waiting (gethash key (mevedel-mcp-composer--cache-listing cache) 'none)))
    (if (listp waiting)
        (puthash key (cons done waiting) (mevedel-mcp-composer--cache-listing cache))
      (puthash key (list done) (mevedel-mcp-composer--cache-listing cache))
      (funcall (if (eq kind 'prompts) #'mevedel-core-mcp-prompts #'mevedel-core-mcp-resources)
               (mevedel-mcp-handle session) server
               (lambda (status value)
                 (when (eq status 'ok)
                   (puthash server (if (eq kind 'prompts) value (plist-get value :resources))
                            (if (eq kind 'prompts)
                                (mevedel-mcp-composer--cache-prompts cache)
                              (mevedel-mcp-composer--cache-resources cache))))
                 (let ((callbacks (gethash key (mevedel-mcp-composer--cache-listing cache))))
                   (remhash key (mevedel-mcp-composer--cache-listing cache))
                   (dolist (callback (nreverse callbacks))
                     (when callback (funcall callback)))))))))

(defun mevedel-mcp-composer--notice (data)
  "Keep the lists fresh after the `mcp-notice' DATA.
For `mevedel-mcp-notice-functions'."
  (when-let* ((cache (gethash (plist-get data :key) mevedel-mcp-composer--caches)))
    (let ((server (plist-get data :server)))
      (pcase (plist-get data :kind)
        ('prompts-changed (remhash server (mevedel-mcp-composer--cache-prompts cache)))
        ('resources-changed (remhash server (mevedel-mcp-composer--cache-resources cache)))
        ('crashed (remhash server (mevedel-mcp-composer--cache-prompts cache))
                  (remhash server (mevedel-mcp-composer--cache-resources cache)))))))

(defun mevedel-mcp-composer--close (session)
  "Forget what the composer knew of SESSION's servers."
  (remhash (mevedel-session-id session) mevedel-mcp-composer--caches))

(add-hook 'mevedel-view-slash-command-functions #'mevedel-mcp-composer-commands)
(add-hook 'mevedel-view-open-functions #'mevedel-mcp-composer--setup)
(add-hook 'mevedel-mcp-notice-functions #'mevedel-mcp-composer--notice)
(add-hook 'mevedel-session-close-functions #'mevedel-mcp-composer--close)

(provide 'mevedel-mcp-composer)
;;; mevedel-mcp-composer.el ends here
