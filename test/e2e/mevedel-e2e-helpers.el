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

(defun mevedel-e2e-write-script (steps)
  "Write a scripted-model script of STEPS (Lisp data) to a temp file."
  (let ((file (make-temp-file "mevedel-script-" nil ".json")))
    (with-temp-file file
      (insert (json-encode `((steps . ,(vconcat steps))))))
    file))

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
                :log (mevedel-scripted-model-log server)
                :rows (mevedel-e2e-view-rows view)
                :transcript (mevedel-e2e-transcript-text view)
                :rich-transcript (mevedel-e2e-transcript-text view t)
                :ids (mevedel-e2e-data-ids chat)
                :inspected (and inspect (funcall inspect chat view))
                :chat chat :view view :root root))
      (mevedel-scripted-model-stop server)
      (when (buffer-live-p view) (kill-buffer view))
      (when (and chat (buffer-live-p (mevedel-chat-data-buffer chat)))
        (kill-buffer (mevedel-chat-data-buffer chat)))
      (delete-file script)
      (delete-directory root t))))

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

(provide 'mevedel-e2e-helpers)
;;; mevedel-e2e-helpers.el ends here
