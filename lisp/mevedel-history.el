;;; mevedel-history.el --- history:// — conversations as Markdown for Read and Grep  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A data buffer (gptel's transcript) reads as a list of segments
;; (`mevedel-history-segments'): user messages, responses, tool calls
;; with their arguments, results and render-data, and notices.  The
;; view draws them, headless runs print them, and history:// projects
;; them.
;;
;; `history://root' is the session's own conversation and
;; `history://saved[/SESSION[/SEGMENT]]' the workspace's saved ones, as
;; one Markdown projection of its segments, without render-data, mail,
;; gptel's block markup or the transcript's properties.  The live
;; conversation is projected from its data buffer, unsaved text
;; included; a saved one from its session's store, without resuming
;; it.  Read pages the
;; projection and Grep searches it with the same line numbers (the
;; module serves both, see `mevedel-core-resource-read-text').
;;
;; Grep and Glob over all of history://saved read the sessions one per
;; timer tick (`mevedel-history-saved-documents'), with only the
;; workspace needed, and count those that could not be read.
;;
;; A saved session has one segment, segment-0001.chat.org: compaction
;; keeps every turn in the transcript (the model is sent a summary
;; instead), so there is no archive to read apart from it.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'gptel)
(require 'mevedel-core)
(require 'mevedel-render-data)
(require 'mevedel-session)
(require 'mevedel-transcript)
(require 'url-util)

(declare-function org-unescape-code-in-string "org-src")

(defconst mevedel-history-segment "segment-0001.chat.org"
  "The name of a saved session's one segment.")

;;;; Segments of a data buffer

(defun mevedel-history--unescape (text)
  "Undo Org's code escaping of TEXT when the data buffer is in Org mode."
  (if (derived-mode-p 'org-mode)
      (progn (require 'org-src) (org-unescape-code-in-string text))
    text))

(defconst mevedel-history--render-data-opening "<!-- mevedel-render-data -->"
  "How a render-data block starts; results without it have no render-data.")

(defun mevedel-history-trim (string &optional from)
  "Return STRING from index FROM (default 0) without blank lines around it.
Leading blank lines go but the first line keeps its indentation (a
Read result's padded line numbers); trailing whitespace goes.  Only
the ends are looked at, however long STRING is."
  (let* ((from (or from 0))
         (to (length string))
         (scan from))
    (while (and (< scan to) (memq (aref string scan) '(?\s ?\t ?\n ?\r)))
      (when (eq (aref string scan) ?\n) (setq from (1+ scan)))
      (setq scan (1+ scan)))
    (when (= scan to) (setq from to))
    (while (and (> to from) (memq (aref string (1- to)) '(?\s ?\t ?\n ?\r)))
      (setq to (1- to)))
    (substring string from to)))

(defun mevedel-history-tool-media (start end)
  "Return the media references of the tool result between START and END, or nil.
They ride on the result's text in the current (data) buffer as its
`mevedel-tool-media' property (see mevedel-tool-media.el)."
  (when-let* ((at (text-property-not-all start end 'mevedel-tool-media nil)))
    (get-text-property at 'mevedel-tool-media)))

(defun mevedel-history-tool-segment (id text &optional start media)
  "Return the segment of the tool call ID whose data-buffer TEXT is given.
START is where TEXT starts in the data buffer.  The result loses the
call's render-data block, which becomes the segment's :render-data.
MEDIA, the call's media references, rides on the result as its
`mevedel-tool-media' property, so a renderer can show the images sent."
  (let* ((text (mevedel-history--unescape text))
         (read (condition-case nil
                   (read-from-string text)
                 (error nil)))
         (call (car read))
         (result (mevedel-history-trim text (cdr read)))
         (render-data nil))
    (when (string-search mevedel-history--render-data-opening result)
      (setq render-data (mevedel-render-data-extract result id)
            result (mevedel-history-trim (mevedel-render-data-strip result id))))
    (when (and media (stringp result) (not (string-empty-p result)))
      (setq result (propertize result 'mevedel-tool-media media)))
    (list :type 'tool :id id :start start
          :name (or (plist-get call :name) "?")
          :args (plist-get call :args)
          :result result
          :render-data render-data)))

(defconst mevedel-history--block-line-regexp
  "^[ \t]*#\\+\\(?:begin\\|end\\)_\\(?:tool\\|reasoning\\).*\n?"
  "Lines framing tool results and reasoning in Org data buffers.
gptel strips them before sending; so do the segments.")

(defun mevedel-history--without-mail (start end)
  "Return the text from START to END without the mail sent with a turn.
Mail (`mevedel-chat-message-functions') carries the `mevedel-mail'
property; the model reads it, the segments leave it out."
  (let ((pos start) (parts nil))
    (while (< pos end)
      (let ((next (next-single-property-change pos 'mevedel-mail nil end)))
        (unless (get-text-property pos 'mevedel-mail)
          (push (buffer-substring-no-properties pos next) parts))
        (setq pos next)))
    (apply #'concat (nreverse parts))))

(defun mevedel-history-run-end (pos property limit)
  "Return where the run of PROPERTY's value at POS ends, at most LIMIT.
Adjacent runs of `equal' values (a transcript read back from disk has
copies) count as one."
  (let ((value (get-text-property pos property))
        (next (next-single-property-change pos property nil limit)))
    (while (and (< next limit) (equal (get-text-property next property) value))
      (setq next (next-single-property-change next property nil limit)))
    next))

(defun mevedel-history-segments (buffer &optional start end)
  "Return the transcript segments of data BUFFER between START and END.
They default to the buffer's beginning and end.  Each segment is a
plist with :type `user', `response', `tool' or `notice' and :start,
where it starts in BUFFER.  A response cut by a failed request has
:incomplete t; a tool row only the view shows has :handle t.  One
pass over the text's property changes finds them."
  (mevedel-transcript-complete buffer start)
  (with-current-buffer buffer
    (save-restriction
      (widen)
      (let* ((pos (if (markerp start) (marker-position start) (or start (point-min))))
             (end (if (markerp end) (marker-position end) (or end (point-max))))
             (prefix (gptel-prompt-prefix-string))
             (notice-change pos)
             segments)
        (while (< pos end)
          (when (<= notice-change pos)
            (setq notice-change (next-single-property-change pos 'mevedel-notice nil end)))
          (let* ((prop (get-text-property pos 'gptel))
                 (notice (get-text-property pos 'mevedel-notice))
                 (next (min (mevedel-history-run-end pos 'gptel end) notice-change)))
            (cond
             (notice (push (list :type 'notice :start pos :kind notice
                                 :text (string-trim (buffer-substring-no-properties pos next)))
                           segments))
             ((eq prop 'response)
              (let ((text (buffer-substring-no-properties pos next)))
                (if (eq (plist-get (car segments) :type) 'response)
                    (push text (plist-get (car segments) :pieces))
                  (push (list :type 'response :start pos :pieces (list text)) segments)))
              (when (get-text-property pos 'mevedel-incomplete)
                (plist-put (car segments) :incomplete t)))
             ((eq (car-safe prop) 'tool)
              (push (mevedel-history-tool-segment (cdr prop) (buffer-substring-no-properties pos next)
                                                pos (mevedel-history-tool-media pos next))
                    segments)
              ;; A row only the view shows (`mevedel-chat-append-handle').
              (when (get-text-property pos 'mevedel-handle)
                (plist-put (car segments) :handle t)))
             ((null prop)
              (let ((clean (string-trim
                            (string-remove-prefix
                             prefix (string-trim-left
                                     (replace-regexp-in-string
                                      mevedel-history--block-line-regexp ""
                                      (mevedel-history--without-mail pos next)))))))
                (unless (string-empty-p clean)
                  (push (list :type 'user :start pos :text clean) segments)))))
            (setq pos next)))
        (let (result)
          (dolist (segment segments result)
            (if (not (eq (plist-get segment :type) 'response))
                (push segment result)
              (let ((text (apply #'concat (reverse (plist-get segment :pieces)))))
                (unless (string-blank-p text)
                  (push (list :type 'response :start (plist-get segment :start) :text text
                              :incomplete (plist-get segment :incomplete))
                        result))))))))))

;;;; Projection

(defun mevedel-history--segment-text (segment)
  "Return the Markdown of one SEGMENT of `mevedel-history-segments'."
  (pcase (plist-get segment :type)
    ('user (format "## User\n\n%s\n\n" (plist-get segment :text)))
    ('response (format "## Assistant\n\n%s\n\n" (string-trim (plist-get segment :text))))
    ('tool (if (plist-get segment :handle)
               ""
             (format "### Tool call %s (%s)\n\nArguments: %s\n\nResult:\n\n%s\n\n"
                     (plist-get segment :name) (plist-get segment :id)
                     (let ((print-escape-newlines t)) (prin1-to-string (plist-get segment :args)))
                     (plist-get segment :result))))
    ('notice (format "> %s\n\n" (replace-regexp-in-string
                                  "\n" "\n> " (plist-get segment :text) t t)))))

(defun mevedel-history-project (buffer &optional start end)
  "Return data BUFFER's conversation as Markdown, unsaved text included.
START and END limit it to part of BUFFER."
  (string-trim-right
   (mapconcat #'mevedel-history--segment-text (mevedel-history-segments buffer start end) "")))

;;;; Sources

(defun mevedel-history--saved-text (workspace id)
  "Return the projection of WORKSPACE's saved session ID."
  (let ((file (expand-file-name "session.sqlite"
                                (expand-file-name (mevedel-session--check-id id)
                                                  (mevedel-session-sessions-directory workspace)))))
    (unless (file-exists-p file)
      (signal 'mevedel-core-resource-error
              (list (format "history://saved/%s does not exist (Read history://saved lists the saved sessions)"
                            id))))
    (let ((store (mevedel-core-store-open file)))
      (unwind-protect
          (with-temp-buffer
            (funcall (or gptel-default-mode #'text-mode))
            (mevedel-transcript-restore (current-buffer) store)
            (mevedel-history-project (current-buffer)))
        (mevedel-core-store-close store)))))

(defun mevedel-history-saved-documents (workspace operation done)
  "Collect WORKSPACE's saved conversations for OPERATION, then call DONE.
OPERATION is \"Grep\" or \"Glob\".  One session is read and
projected per timer tick, so Emacs stays responsive however many
there are; DONE gets the documents, (ADDRESS . TEXT) as
`mevedel-history-documents' gives them, and the number of sessions
that could not be read (listed with an error, or failing now).
Return a function that stops the collection; DONE is then not called."
  (let* ((saved (mevedel-session-saved workspace))
         (unreadable (cl-count-if (lambda (entry) (assoc "error" (cdr entry))) saved))
         (ids (mapcar #'car (cl-remove-if (lambda (entry) (assoc "error" (cdr entry))) saved)))
         (documents nil)
         (timer nil)
         (step nil))
    (setq step
          (lambda ()
            (setq timer nil)
            (if (null ids)
                (funcall done (nreverse documents) unreadable)
              (let ((id (pop ids)))
                (condition-case nil
                    (push (cons (format "history://saved/%s/%s" id mevedel-history-segment)
                                (unless (equal operation "Glob")
                                  (mevedel-history--saved-text workspace id)))
                          documents)
                  (error (cl-incf unreadable))))
              (setq timer (run-at-time 0 nil step)))))
    (setq timer (run-at-time 0 nil step))
    (lambda () (when timer (cancel-timer timer) (setq timer nil)))))

(defun mevedel-history--saved-listing (workspace)
  "Return the listing of WORKSPACE's saved sessions."
  (let ((saved (mevedel-session-saved workspace)))
    (if (null saved)
        "No saved conversations in this workspace."
      (mapconcat
       (lambda (entry)
         (let ((info (cdr entry)))
           (format "history://saved/%s/%s  %s  (%s turns, updated %s)"
                   (car entry) mevedel-history-segment
                   (or (cdr (assoc "title" info)) "")
                   (or (cdr (assoc "turns" info)) "?")
                   (let ((ms (string-to-number (or (cdr (assoc "updated" info)) "0"))))
                     (format-time-string "%F %R" (/ ms 1000.0))))))
       saved "\n"))))

(defvar mevedel-history-agents-functions nil
  "Abnormal hook run with a session until one returns its retained agents.
Each agent is a plist (:path :role :model :effort :served :status
:outcome :payload :buffer), :served the model that served its latest
turn when not its own, :buffer a function returning the agent's data
buffer (loading a saved one).  `history://root/PATH' and `agent://'
read them; the agent runtime adds its roster, without which a session
has no agents.")

(defun mevedel-history-agents (session)
  "Return the retained agents of SESSION (see `mevedel-history-agents-functions')."
  (run-hook-with-args-until-success 'mevedel-history-agents-functions session))

(defun mevedel-history--agent (session path)
  "Return the retained agent PATH of SESSION as a plist, or signal."
  (or (cl-find path (mevedel-history-agents session)
               :key (lambda (agent) (plist-get agent :path)) :test #'equal)
      (signal 'mevedel-core-resource-error
              (list (format "No retained agent at %s (Read agent:// lists them)" path)))))

(defun mevedel-history--pointer-key (token)
  "Return the key the canonical JSON-pointer TOKEN names.
The canonical address percent-encodes each token (spaces, non-ASCII),
whose RFC 6901 escapes are undone after."
  (let ((key (decode-coding-string (url-unhex-string token) 'utf-8)))
    (replace-regexp-in-string "~0" "~" (replace-regexp-in-string "~1" "/" key t t) t t)))

(defun mevedel-history--pointer (text pointer canonical)
  "Return the part of the JSON TEXT that the JSON POINTER names.
An empty POINTER is the whole parsed value.  A string comes back as
its text, anything else as deterministic JSON.  CANONICAL names the
address in errors."
  (let ((value (condition-case nil
                   (json-parse-string (string-trim text) :object-type 'alist
                                      :null-object :null :false-object :false)
                 (error (signal 'mevedel-core-resource-error
                                (list (format "%s: the result is not one JSON value, so it has no %s"
                                              canonical (if (string-empty-p pointer)
                                                            "JSON selection"
                                                          pointer))))))))
    (dolist (token (cdr (split-string pointer "/")))
      (let ((key (mevedel-history--pointer-key token)))
        (setq value
              (cond ((and (consp value) (assoc (intern key) value)) (cdr (assoc (intern key) value)))
                    ((and (vectorp value) (string-match-p "\\`[0-9]+\\'" key)
                          (< (string-to-number key) (length value)))
                     (aref value (string-to-number key)))
                    (t (signal 'mevedel-core-resource-error
                               (list (format "%s: the result has nothing at %s" canonical pointer))))))))
    (if (stringp value) value (json-serialize value :null-object :null :false-object :false))))

(defun mevedel-history--not-ready (path status history)
  "Return the NOT READY answer for the agent PATH, whose STATUS is active.
HISTORY is the address of its conversation.
It is text, not an error (the spec's status), and names the
conversation the agent is writing; Read passes it on unpaged, so no
offset or fragment hides it."
  (propertize
   (format "NOT READY: %s is %s; its result is readable once it settles.  \
Its conversation so far: %s" path status history)
   'mevedel-history-status 'not-ready))

(defun mevedel-history-agent-documents (canonical session)
  "Return the one document the agent:// address CANONICAL names in SESSION.
agent:// lists the retained agents; agent://root/PATH is the terminal
outcome and complete settled result of PATH's latest turn (#POINTER a
part of a JSON result, an empty one the whole parsed value), NOT
READY while the agent works.  Nothing changes state."
  (pcase-let* ((`(,address ,pointer) (split-string canonical "#"))
               (path (string-remove-prefix "agent://" address)))
    (list
     (cons canonical
           (if (string-empty-p path)
               (let ((agents (mevedel-history-agents session)))
                 (if (null agents)
                     "No retained agents in this session."
                   (mapconcat (lambda (agent)
                                (format "agent://%s  %s  %s%s%s  %s%s"
                                        (substring (plist-get agent :path) 1)
                                        (plist-get agent :role) (or (plist-get agent :model) "")
                                        (if-let* ((effort (plist-get agent :effort)))
                                            (format " (effort %s)" effort)
                                          "")
                                        (if-let* ((served (plist-get agent :served)))
                                            (format " (served by %s)" served)
                                          "")
                                        (plist-get agent :status)
                                        (if (plist-get agent :outcome)
                                            (format " (last turn %s)" (plist-get agent :outcome))
                                          "")))
                              agents "\n")))
             (let* ((encoded path)
                    (path (concat "/" (decode-coding-string (url-unhex-string path) 'utf-8)))
                    (agent (mevedel-history--agent session path))
                    (status (plist-get agent :status)))
               (cond
                ((not (eq status 'idle))
                 (mevedel-history--not-ready path status (concat "history://" encoded)))
                ((not (plist-get agent :outcome))
                 (signal 'mevedel-core-resource-error
                         (list (format "%s is unavailable: %s is %s and has no settled result"
                                       canonical path status))))
                (pointer (mevedel-history--pointer (plist-get agent :payload) pointer canonical))
                (t (format "[%s's latest turn: %s]\n%s" path (plist-get agent :outcome)
                           (plist-get agent :payload))))))))))

(defun mevedel-history-documents (canonical session operation)
  "Return the documents CANONICAL names for SESSION, for OPERATION.
CANONICAL is a history:// address in canonical form; OPERATION is
\"Read\", \"Grep\" or \"Glob\".  The value is a list of (ADDRESS .
TEXT): the conversations to search for Grep, the one to page (or the
listing) for Read, and for Glob the addresses alone (TEXT nil).  An
address that names nothing available signals
`mevedel-core-resource-error'."
  (let* ((workspace (mevedel-session-workspace session))
         (fail (lambda (message) (signal 'mevedel-core-resource-error (list message))))
         (segment (lambda (id) (format "history://saved/%s/%s" id mevedel-history-segment)))
         (saved (lambda (id)
                  (cons (funcall segment id)
                        (unless (equal operation "Glob")
                          (mevedel-history--saved-text workspace id))))))
    (pcase (split-string (string-remove-prefix "history://" canonical) "/" t)
      (`("root")
       (let ((buffer (mevedel-session-conversation session)))
         (unless (buffer-live-p buffer)
           (funcall fail "history://root is unavailable: this session has no live conversation"))
         (list (cons canonical (unless (equal operation "Glob")
                                 (mevedel-history-project buffer))))))
      (`("root" . ,path)
       (let ((buffer (condition-case err
                         (funcall (plist-get (mevedel-history--agent
                                              session (concat "/root/" (string-join path "/")))
                                             :buffer))
                       (user-error (signal 'mevedel-core-resource-error
                                           (list (error-message-string err)))))))
         (list (cons canonical (unless (equal operation "Glob")
                                 (mevedel-history-project buffer))))))
      (`("saved")
       (if (equal operation "Read")
           (list (cons canonical (mevedel-history--saved-listing workspace)))
         (mapcar (lambda (entry) (funcall saved (car entry)))
                 (cl-remove-if (lambda (entry) (assoc "error" (cdr entry)))
                               (mevedel-session-saved workspace)))))
      (`("saved" ,id)
       (let ((document (funcall saved id)))
         (if (equal operation "Read")
             (list (cons canonical (car document)))
           (list document))))
      (`("saved" ,id ,name)
       (unless (equal name mevedel-history-segment)
         (funcall fail (format "history://saved/%s has no segment %s (its segment is %s)"
                               id name mevedel-history-segment)))
       (list (cons canonical (cdr (funcall saved id)))))
      (_ (funcall fail (format "`%s' names no conversation" canonical))))))

(provide 'mevedel-history)
;;; mevedel-history.el ends here
