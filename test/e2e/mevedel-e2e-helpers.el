;;; mevedel-e2e-helpers.el --- Helpers for end-to-end session tests  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run a real mevedel session (real gptel, real tools) against the
;; scripted model server, then look at what happened: the server's
;; request log, the data buffer's tool-call IDs and the view's rows.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'json)
(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-scripted-model)
(mevedel--load)

(defconst mevedel-e2e-wires '(openai anthropic)
  "Wire formats every end-to-end scenario runs with.")

(defun mevedel-e2e-require-python ()
  "Fail (never skip) when python3 is missing."
  (unless (executable-find "python3")
    (ert-fail "python3 is required by the end-to-end tests but is not installed")))

(defun mevedel-e2e-workspace (files)
  "Create a temporary workspace holding FILES, an alist (NAME . CONTENT)."
  (let ((dir (file-name-as-directory (make-temp-file "mevedel-ws-" t))))
    (pcase-dolist (`(,name . ,content) files)
      (let ((file (expand-file-name name dir)))
        (make-directory (file-name-directory file) t)
        (with-temp-file file (insert content))))
    dir))

(defun mevedel-e2e-numbered-files (count lines line)
  "Return COUNT files f0.txt, f1.txt... of LINES lines each.
LINE is the format of a line, given its number (from 1) and its
file's (from 0).  The files are as `mevedel-e2e-workspace' takes them."
  (cl-loop for n below count
           collect (cons (format "f%d.txt" n)
                         (mapconcat (lambda (i) (format line i n)) (number-sequence 1 lines) "\n"))))

(defun mevedel-e2e-read-call (n)
  "Return the field of a script step calling Read on fN.txt of the workspace.
The files are those of `mevedel-e2e-numbered-files'."
  `(tool_calls . [((name . "Read") (arguments . ((file_path . ,(format "{{root}}f%d.txt" n)))))]))

(defun mevedel-e2e-write-script (steps)
  "Write a scripted-model script of STEPS (Lisp data) to a temp file."
  (let ((file (make-temp-file "mevedel-script-" nil ".json")))
    (with-temp-file file
      (insert (json-encode `((steps . ,(vconcat steps))))))
    file))

(defun mevedel-e2e-write-conversations (conversations)
  "Write a script of CONVERSATIONS ((MATCH . STEPS) ...; MATCH nil for the root).
The scripted server answers each request with the steps of the first
conversation whose MATCH its system prompt contains."
  (let ((file (make-temp-file "mevedel-conversations-" nil ".json")))
    (with-temp-file file
      (insert (json-encode
               `((conversations
                  . ,(vconcat (mapcar (lambda (c)
                                        `(,@(and (car c) `((match . ,(car c))))
                                          (steps . ,(vconcat (cdr c)))))
                                      conversations)))))))
    file))

(defmacro mevedel-e2e-with-chat (vars script &rest body)
  "Run BODY with VARS (VIEW CHAT SERVER ROOT) bound for a fresh session.
SCRIPT (evaluated) is a script file for the scripted server, which the
chat's backend is (${root} in it is ROOT); ROOT is a workspace holding
a.txt.  Afterwards the
server stops and the buffers, SCRIPT and ROOT go."
  (declare (indent 2))
  (pcase-let ((`(,view ,chat ,server ,root) vars))
    `(progn
       (mevedel-e2e-require-python)
       (let* ((,root (mevedel-e2e-workspace '(("a.txt" . "a\n"))))
              (script ,script)
              (,server (mevedel-scripted-model-start script :vars `(("root" . ,,root))))
              (gptel-stream t)
              (,view (mevedel ,root))
              (,chat (mevedel-view-chat ,view)))
         (setf (mevedel-chat-backend ,chat) (mevedel-scripted-model-backend ,server)
               (mevedel-chat-model ,chat) 'scripted-model)
         (unwind-protect (progn ,@body)
           (mevedel-scripted-model-stop ,server)
           (kill-buffer ,view)
           (when (buffer-live-p (mevedel-chat-data-buffer ,chat))
             (kill-buffer (mevedel-chat-data-buffer ,chat)))
           (delete-file script)
           (delete-directory ,root t))))))

(defun mevedel-e2e-view-rows (buffer)
  "Return the tool rows of view BUFFER's transcript as (ID . HEADER-LINE)."
  (with-current-buffer buffer
    (save-excursion
      (goto-char (point-min))
      (let (rows match)
        (while (and (setq match (text-property-search-forward 'mevedel-row nil
                                                              (lambda (_ v) v)))
                    (< (prop-match-beginning match) mevedel-view--transcript-end))
          (push (cons (prop-match-value match)
                      (save-excursion
                        (goto-char (prop-match-beginning match))
                        (buffer-substring-no-properties (point) (line-end-position))))
                rows))
        (nreverse rows)))))

(defun mevedel-e2e-transcript-text (buffer &optional properties)
  "Return the transcript text of view BUFFER, with PROPERTIES if non-nil."
  (with-current-buffer buffer
    (funcall (if properties #'buffer-substring #'buffer-substring-no-properties)
             (point-min) mevedel-view--transcript-end)))

(defun mevedel-e2e-data-ids (chat)
  "Return the tool-call IDs in CHAT's data buffer, in buffer order."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (save-excursion
      (goto-char (point-min))
      (let (ids match)
        (while (setq match (text-property-search-forward
                            'gptel nil (lambda (_ v) (eq (car-safe v) 'tool))))
          (push (cdr (prop-match-value match)) ids))
        (nreverse ids)))))

(defun mevedel-e2e-served-ids (log)
  "Return the tool-call IDs the server handed out, per request of LOG."
  (mapcar (lambda (entry) (alist-get 'served_tool_ids entry)) log))

(defun mevedel-e2e-result-ids (entry)
  "Return the IDs of the tool results carried by log ENTRY."
  (mapcar (lambda (result) (alist-get 'id result)) (alist-get 'results entry)))

(defun mevedel-e2e-result-content (entry id)
  "Return the content of the tool result for ID in log ENTRY."
  (alist-get 'content (cl-find id (alist-get 'results entry)
                               :key (lambda (r) (alist-get 'id r)) :test #'equal)))

(defun mevedel-e2e-requests (server)
  "Return the requests SERVER received, oldest first, as the server keeps them.
Each is an alist: n, wire, raw (the body's text, as sent) and usage."
  (with-temp-buffer
    (unless (zerop (call-process "curl" nil t nil "-s" "--noproxy" "127.0.0.1"
                                 (format "http://127.0.0.1:%d/requests"
                                         (mevedel-scripted-model-port server))))
      (ert-fail (format "Could not read the server's requests: %s" (buffer-string))))
    (goto-char (point-min))
    (json-parse-buffer :object-type 'alist :array-type 'list)))

(defun mevedel-e2e--unmark (value)
  "Return VALUE (parsed JSON) without its cache breakpoint."
  (if (and (consp value) (consp (car value)))
      (cl-remove 'cache_control value :key #'car)
    value))

(defun mevedel-e2e-prefix (raw)
  "Return the cached prefix of the request body RAW as one string.
That is what the provider caches, in its order: the tools, the system
text and the messages, each serialized as sent (key order kept),
cache breakpoints left out."
  (let* ((body (json-parse-string raw :object-type 'alist :null-object :null
                                  :false-object :false))
         (serialize (lambda (value)
                      (json-serialize (mevedel-e2e--unmark value)
                                      :null-object :null :false-object :false)))
         (blocks (lambda (content)
                   (cond ((stringp content)
                          (funcall serialize `((type . "text") (text . ,content))))
                         ((vectorp content) (mapconcat serialize content ""))
                         (t (funcall serialize content))))))
    (concat
     (mapconcat serialize (alist-get 'tools body) "")
     "\n"
     (let ((system (alist-get 'system body)))
       (if system (funcall blocks system) ""))
     "\n"
     (mapconcat (lambda (message)
                  (concat (alist-get 'role message) ":"
                          (funcall serialize (cl-remove 'content message :key #'car))
                          (funcall blocks (alist-get 'content message))
                          "\n"))
                (alist-get 'messages body) ""))))

(defun mevedel-e2e-check-extends (requests)
  "Fail unless each of REQUESTS (raw bodies) extends the one before it.
The failure names the request and the first byte where it differs."
  (cl-loop for (before after) on requests
           for n from 1
           while after
           do (let* ((old (mevedel-e2e-prefix before))
                     (new (mevedel-e2e-prefix after))
                     (same (abs (compare-strings old nil nil new nil nil))))
                (when (< (1- same) (length old))
                  (ert-fail
                   (format "Request %d does not extend request %d: first differing byte %d\n\
before: %S\nafter:  %S"
                           (1+ n) n (1- same)
                           (substring old (max 0 (- same 80)) (min (length old) (+ same 80)))
                           (substring new (max 0 (- same 80))
                                      (min (length new) (+ same 80)))))))))

(defun mevedel-e2e-cached-share (requests &optional from)
  "Return the share of input tokens REQUESTS read from the cache, from FROM.
REQUESTS are as `mevedel-e2e-requests' gives them; FROM skips the
first ones."
  (let ((read 0) (total 0))
    (dolist (request (nthcdr (or from 0) requests))
      (let ((usage (alist-get 'usage request))
            (count (lambda (usage key) (or (alist-get key usage) 0))))
        (if (equal (alist-get 'wire request) "openai")
            (setq read (+ read (funcall count (alist-get 'prompt_tokens_details usage)
                                        'cached_tokens))
                  total (+ total (funcall count usage 'prompt_tokens)))
          (setq read (+ read (funcall count usage 'cache_read_input_tokens))
                total (+ total (funcall count usage 'cache_read_input_tokens)
                         (funcall count usage 'cache_creation_input_tokens)
                         (funcall count usage 'input_tokens))))))
    (if (zerop total) 0.0 (/ (float read) total))))

(cl-defun mevedel-e2e-run (&key steps files (wire 'openai) (stream t) prompt
                                 setup during inspect (timeout 20) (delay 0.001))
  "Run one session turn against the scripted model; return what happened.
STEPS is the model script (with {{root}} for the workspace), FILES
the workspace's files, WIRE and STREAM the backend's format, PROMPT
the user's message (typed into the composer and sent with
`mevedel-view-send').  SETUP is called with the chat before sending,
DURING is called repeatedly with the chat and view while the turn
runs.  INSPECT is called with the chat and view after the turn; its
value is returned as :inspected.  DELAY is the server's pause between
streamed chunks.  Return a plist: :outcome :log :rows :transcript :rich-transcript
:ids :chat :view :root (the buffers are killed by then)."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace files))
         (script (mevedel-e2e-write-script steps))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root)) :delay delay))
         (gptel-stream t)
         view chat outcome)
    (unwind-protect
        (progn
          (setq view (mevedel root)
                chat (mevedel-view-chat view))
          (setf (mevedel-chat-backend chat)
                (mevedel-scripted-model-backend server :wire wire :stream stream)
                (mevedel-chat-model chat) 'scripted-model)
          (when setup (funcall setup chat))
          (mevedel-chat-observe chat (lambda (event _chat &rest args)
                                       (when (eq event 'turn-end) (setq outcome (car args)))))
          (with-current-buffer view
            (goto-char (point-max))
            (insert prompt)
            (mevedel-view-send))
          (let ((deadline (+ (float-time) timeout)))
            (while (and (not outcome) (< (float-time) deadline))
              (when during (funcall during chat view))
              (accept-process-output nil 0.02)))
          (list :outcome outcome
                :inspected (and inspect (funcall inspect chat view))
                :log (mevedel-scripted-model-log server)
                :requests (mevedel-e2e-requests server)
                :rows (mevedel-e2e-view-rows view)
                :transcript (mevedel-e2e-transcript-text view)
                :rich-transcript (mevedel-e2e-transcript-text view t)
                :ids (mevedel-e2e-data-ids chat)
                :chat chat :view view :root root))
      (mevedel-scripted-model-stop server)
      (when (buffer-live-p view) (kill-buffer view))
      (when (and chat (buffer-live-p (mevedel-chat-data-buffer chat)))
        (kill-buffer (mevedel-chat-data-buffer chat)))
      (delete-file script)
      (delete-directory root t))))

(defun mevedel-e2e-free-port ()
  "Return a loopback TCP port nothing listens on (it was just free)."
  (let* ((server (make-network-process :name "mevedel-e2e-port" :server t
                                       :host "127.0.0.1" :service t :noquery t))
         (port (process-contact server :service)))
    (delete-process server)
    port))

(defvar mevedel-e2e--autoloads-file nil
  "The autoloads file generated from lisp/, made once per run.")

(defun mevedel-e2e-autoloads ()
  "Return the package's autoloads file, generated as a package manager does."
  (or (and mevedel-e2e--autoloads-file (file-exists-p mevedel-e2e--autoloads-file)
           mevedel-e2e--autoloads-file)
      (let* ((lisp (expand-file-name "lisp" mevedel-test-root))
             (file (expand-file-name "mevedel-autoloads.el"
                                     (make-temp-file "mevedel-autoloads" t)))
             (relative (file-name-as-directory
                        (file-relative-name lisp (file-name-directory file)))))
        (loaddefs-generate lisp file)
        ;; In a package the file sits beside the libraries and names them
        ;; bare, to be found on `load-path'; so it does here.
        (with-temp-file file
          (insert-file-contents file)
          (while (search-forward (concat "\"" relative) nil t)
            (replace-match "\"" t t)))
        (setq mevedel-e2e--autoloads-file file))))

(defun mevedel-e2e-headless-config (port wire stream settings)
  "Write an init file pointing gptel at 127.0.0.1:PORT; return its name.
WIRE and STREAM choose the backend; SETTINGS are forms evaluated after."
  (let ((file (make-temp-file "mevedel-e2e-init" nil ".el")))
    (with-temp-file file
      (prin1 `(progn
                (require 'gptel)
                (require 'gptel-openai)
                (require 'gptel-anthropic)
                (setq gptel-model 'scripted-model
                      gptel-stream ,stream
                      gptel-backend
                      (,(if (eq wire 'openai) 'gptel-make-openai 'gptel-make-anthropic)
                       "headless scripted"
                       :host ,(format "127.0.0.1:%d" port)
                       :protocol "http"
                       :endpoint ,(if (eq wire 'openai) "/v1/chat/completions" "/v1/messages")
                       :stream ,stream :key "scripted"
                       ;; As `mevedel-scripted-model-backend''s: tools and images.
                       :models '((scripted-model
                                  :capabilities (tool-use media)
                                  :mime-types ("image/png" "image/jpeg" "image/gif" "image/webp")))
                       :curl-args '("--noproxy" "127.0.0.1")))
                ,@settings)
             (current-buffer)))
    file))

(cl-defun mevedel-e2e-headless (&key steps conversations files (wire 'openai) (stream t)
                                      args settings env port (delay 0.001) read)
  "Run bin/mevedel with ARGS against a scripted server replaying STEPS.
CONVERSATIONS instead scripts several conversations, as
`mevedel-e2e-write-conversations' takes them (child agents).
FILES populate the workspace; WIRE and STREAM choose the backend;
SETTINGS are Lisp forms the init file evaluates last; ENV entries
\(\"NAME=VALUE\") go into the environment.  PORT, when given, is where
the backend is said to be instead of the server's port.  READ names
workspace files to read after the run.  Return a plist: :status,
:stdout (decoded as UTF-8), :stdout-valid (non-nil when stdout was
valid UTF-8), :stderr, :log, :root, :port and :files (an alist of each
READ file and its text, nil when it does not exist)."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace files))
         (script (if conversations
                     (mevedel-e2e-write-conversations conversations)
                   (mevedel-e2e-write-script steps)))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root)) :delay delay))
         (port-given port)
         (port (or port (mevedel-scripted-model-port server)))
         (init (mevedel-e2e-headless-config port wire stream settings))
         (stderr (make-temp-file "mevedel-e2e-stderr")))
    (unwind-protect
        (with-temp-buffer
          (set-buffer-multibyte nil)
          (let* ((process-environment
                  (append env (list (concat "EMACS=" (expand-file-name invocation-name
                                                                       invocation-directory)))
                          process-environment))
                 (coding-system-for-read 'binary)
                 (status (apply #'call-process
                                (expand-file-name "bin/mevedel" mevedel-test-root)
                                nil (list t stderr) nil
                                (append (list "--config" init "--dir" root) args)))
                 (bytes (buffer-string))
                 (text (decode-coding-string bytes 'utf-8)))
            (list :status status
                  :stdout text
                  :stdout-valid (and (not (cl-some (lambda (char) (> char #x3fff7f)) text))
                                     (equal (encode-coding-string text 'utf-8) bytes))
                  :stderr (with-temp-buffer
                            (let ((coding-system-for-read 'utf-8))
                              (insert-file-contents stderr))
                            (buffer-string))
                  :log (mevedel-scripted-model-log server)
                  :requests (and (null port-given) (mevedel-e2e-requests server))
                  :root root :port port
                  :files (mapcar (lambda (name)
                                   (let ((file (expand-file-name name root)))
                                     (cons name (and (file-exists-p file)
                                                     (with-temp-buffer
                                                       (insert-file-contents file)
                                                       (buffer-string))))))
                                 read))))
      (mevedel-scripted-model-stop server)
      (dolist (file (list init script stderr)) (delete-file file))
      (delete-directory root t))))

(defun mevedel-e2e-bin (&rest args)
  "Run bin/mevedel with ARGS; return (STATUS STDOUT STDERR).
The config file is the one ARGS name (--config), if any."
  (let ((stderr (make-temp-file "mevedel-batch-stderr"))
        (process-environment (append (list (concat "EMACS=" (expand-file-name invocation-name
                                                                              invocation-directory))
                                           "MEVEDEL_INIT=")
                                     process-environment)))
    (unwind-protect
        (with-temp-buffer
          (let ((status (apply #'call-process (expand-file-name "bin/mevedel" mevedel-test-root)
                               nil (list t stderr) nil args)))
            (list status (buffer-string)
                  (with-temp-buffer (insert-file-contents stderr) (buffer-string)))))
      (delete-file stderr))))

;; A test of several runs in one workspace (--continue, --resume)
;; starts them itself, against one server.
(defmacro mevedel-e2e-with-headless-runs (spec &rest body)
  "Run BODY with a workspace, a scripted server and bin/mevedel for both.
SPEC is (RUN ROOT SERVER STEPS &optional FILES): ROOT is bound to a
new workspace of FILES, SERVER to a scripted server replaying STEPS
\({{root}} is ROOT), and (RUN ARGS...) runs bin/mevedel in ROOT
against SERVER (OpenAI wire, streaming) and returns (STATUS STDOUT
STDERR).  Everything is removed afterwards."
  (declare (indent 1))
  (pcase-let ((`(,run ,root ,server ,steps ,files) spec)
              (script (make-symbol "script"))
              (init (make-symbol "init")))
    `(progn
       (mevedel-e2e-require-python)
       (let* ((,root (mevedel-e2e-workspace ,files))
              (,script (mevedel-e2e-write-script ,steps))
              (,server (mevedel-scripted-model-start ,script :vars `(("root" . ,,root))))
              (,init (mevedel-e2e-headless-config (mevedel-scripted-model-port ,server)
                                                  'openai t nil)))
         (cl-flet ((,run (&rest args)
                     (apply #'mevedel-e2e-bin "--config" ,init "--dir" ,root args)))
           (unwind-protect (progn ,@body)
             (mevedel-scripted-model-stop ,server)
             (dolist (file (list ,script ,init)) (delete-file file))
             (delete-directory ,root t)))))))

(defun mevedel-e2e-json (run)
  "Return the JSON transcript RUN (from `mevedel-e2e-headless') printed."
  (condition-case err
      (json-parse-string (plist-get run :stdout) :object-type 'alist :array-type 'list
                         :null-object nil :false-object nil)
    (error (ert-fail (format "Not JSON (%S): %s\nstderr: %s"
                             err (plist-get run :stdout) (plist-get run :stderr))))))

;;;; A session against the scripted model, in this Emacs

(defun mevedel-e2e-attach (chat server wire &optional plain)
  "Point CHAT at the scripted SERVER with WIRE, streaming unless PLAIN."
  (setf (mevedel-chat-backend chat)
        (mevedel-scripted-model-backend server :wire wire :stream (not plain))
        (mevedel-chat-model chat) 'scripted-model))

(defun mevedel-e2e-send-and-wait (view prompt &optional during)
  "Send PROMPT from VIEW's composer and wait for the turn; return its outcome.
DURING is called with the chat while the turn runs."
  (let* ((chat (mevedel-view-chat view))
         (outcome nil)
         (observer (lambda (event _chat &rest args)
                     (when (eq event 'turn-end) (setq outcome (car args))))))
    (mevedel-chat-observe chat observer)
    (unwind-protect
        (progn
          (with-current-buffer view
            (goto-char (point-max))
            (insert prompt)
            (mevedel-view-send))
          (let ((deadline (+ (float-time) 20)))
            (while (and (not outcome) (< (float-time) deadline))
              (when during (funcall during chat))
              (accept-process-output nil 0.02))))
      (mevedel-chat-unobserve chat observer))
    outcome))

(defun mevedel-e2e-close-live (root)
  "Kill the view and data buffer of ROOT's live chat, as a restart would."
  (when-let* ((chat (mevedel-chat-get root)))
    (let ((view (get-buffer (format "*mevedel: %s*" (mevedel-chat-name chat)))))
      (when view (kill-buffer view)))
    (kill-buffer (mevedel-chat-data-buffer chat))))

(defmacro mevedel-e2e-with-server (spec &rest body)
  "Run BODY with a workspace and a scripted server.
SPEC is (ROOT SERVER STEPS &optional FILES): ROOT and SERVER are bound."
  (declare (indent 1))
  (pcase-let ((`(,root ,server ,steps ,files) spec))
    `(progn
       (mevedel-e2e-require-python)
       (let* ((,root (mevedel-e2e-workspace (or ,files '(("notes.txt" . "the answer is 42\n")))))
              (script (mevedel-e2e-write-script ,steps))
              (,server (mevedel-scripted-model-start script :vars `(("root" . ,,root))))
              (mevedel-permissions-mode 'full-auto))
         (unwind-protect (progn ,@body)
           (mevedel-e2e-close-live ,root)
           (mevedel-scripted-model-stop ,server)
           (delete-file script)
           (delete-directory ,root t))))))

(defconst mevedel-e2e-two-turns
  '(((text . "Let me read.")
     (tool_calls . [((name . "Read") (arguments . ((file_path . "{{root}}notes.txt"))))]))
    ((expect . ((results . [((contains . "the answer is 42"))])))
     (text . "It is 42."))
    ((expect . ((user_contains . "And the file?")))
     (tool_calls . [((name . "Grep") (arguments . ((pattern . "answer") (path . "{{root}}")
                                                   (output_mode . "content"))))]))
    ((text . "notes.txt holds it.")))
  "A script of two turns with one call each.")


(defmacro mevedel-e2e-deftest-matrix (name doc args &rest body)
  "Define NAME-WIRE-stream and NAME-WIRE-plain tests for every wire format.
DOC is the docstring.  ARGS is (WIRE STREAM): BODY runs with them bound."
  (declare (indent 3) (doc-string 2))
  `(progn
     ,@(cl-loop for wire in mevedel-e2e-wires
                append
                (cl-loop for stream in '(t nil)
                         collect
                         `(ert-deftest ,(intern (format "%s-%s-%s" name wire
                                                        (if stream "stream" "plain")))
                              ()
                            ,(format "%s\nWire format %s, %s." doc wire
                                     (if stream "streaming" "not streaming"))
                            (let ((,(car args) ',wire) (,(cadr args) ,stream))
                              ,@body))))))

;;;; MCP servers

(defun mevedel-e2e-mcp-everything ()
  "Return server-everything's script, failing loudly when it is missing."
  (let ((js (expand-file-name
             ".deps/mcp/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
             mevedel-test-root)))
    (unless (file-exists-p js)
      (ert-fail (format "%s is missing: the MCP test servers are not installed; \
run scripts/deps.sh" js)))
    js))

(defun mevedel-e2e-mcp-config (servers)
  "Write an MCP configuration of SERVERS (an alist NAME -> spec); return its file."
  (let ((file (make-temp-file "mevedel-mcp" nil ".json")))
    (with-temp-file file
      (insert (json-encode `((mcpServers . ,servers)))))
    file))

(defun mevedel-e2e-mcp-everything-spec ()
  "Return the stdio spec of server-everything."
  `((command . "node") (args . [,(mevedel-e2e-mcp-everything) "stdio"])))

(provide 'mevedel-e2e-helpers)
;;; mevedel-e2e-helpers.el ends here
