;;; mevedel-mcp-mentions.el --- @SERVER:URI attaches an MCP resource  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A message may mention a resource of one of the session's MCP servers
;; as @SERVER:URI (Claude Code's @server:protocol://path).  Sending it
;; attaches that resource's text, as an <attachment> block like an
;; @file's (mevedel-mentions.el), bounded by
;; `mevedel-mentions-file-budget'.  The text the model reads keeps the
;; mention as written.
;;
;; - The resource is read when the message is sent, fresh, through the
;;   same path as Read mcp://SERVER/ENCODED-URI
;;   (`mevedel-mcp-read-address'): the server starts if it must, an
;;   unapproved one never does.  Reading is asynchronous, so the turn
;;   waits for it (`mevedel-chat-before-send-functions'); the chat's
;;   status is then `attaching', and aborting drops the message (it
;;   stays in the input history).
;; - A resource that cannot be read is attached as a block saying why,
;;   naming the server; the turn goes on.
;; - Only a SERVER configured for the session makes a mention, and URI
;;   needs a scheme; punctuation ending a sentence is not part of it.
;; - A mention completion inserted is bound to its server and URI (the
;;   exact locator, `mevedel-mentions-bind'): it reads that resource
;;   while its text is as completed, even a URI the spelling cannot
;;   carry (a space).
;;
;; Completing @SERVER:URI in the composer is mevedel-mcp-composer.el's.
;;
;; What it does not do: attach the resources of a message queued while
;; a turn runs and delivered within it (its @SERVER:URI stays text), or
;; draw mentions as chips.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'url-util)
(require 'mevedel-chat)
(require 'mevedel-core)
(require 'mevedel-mcp)
(require 'mevedel-mentions)
(require 'mevedel-prompt)
(require 'mevedel-session)

(defvar mevedel-mcp-mentions--attached (make-hash-table :test #'eq :weakness 'key)
  "Chat -> (TEXT . BLOCKS): the resources read for the turn about to start.")

(defvar mevedel-mcp-mentions--pending (make-hash-table :test #'eq :weakness 'key)
  "Chat -> the function cancelling the reading for its next message.")

;;; Mentions

(defun mevedel-mcp-mentions-address (server uri)
  "Return the mcp:// address of URI on SERVER (`Read' takes it)."
  (concat "mcp://" (url-hexify-string server) "/" (url-hexify-string uri)))

(defun mevedel-mcp-mentions-parse (text servers)
  "Return the @SERVER:URI mentions of TEXT naming one of SERVERS, in order.
Each is (SERVER . URI), each once.  A mention completion bound
\(`mevedel-mentions-bind', kind `mcp') gives the server and URI it was
completed to, whatever its spelling; the rest are read from it."
  (let* ((bound (mevedel-mentions-bound text))
         (found (cl-loop for m in bound
                         when (eq (plist-get m :kind) 'mcp)
                         collect (list (plist-get m :start) (plist-get m :server)
                                       (plist-get m :uri))))
         (start 0))
    (while (string-match "\\(?:^\\|[ \t\n(]\\)\\(@\\([^ \t\n@:]+\\):\\([[:alpha:]][[:alnum:]+.-]*:[^ \t\n]+\\)\\)"
                         text start)
      (setq start (match-end 0))
      (let ((from (match-beginning 1)) (to (match-end 1))
            (server (match-string 2 text))
            (uri (replace-regexp-in-string "[].,;:!?\"')]+\\'" "" (match-string 3 text))))
        (unless (cl-some (lambda (m) (and (< from (plist-get m :end))
                                          (> to (plist-get m :start))))
                         bound)
          (push (list from server uri) found))))
    (let (mentions)
      (pcase-dolist (`(,_ ,server ,uri) (sort found (lambda (a b) (< (car a) (car b)))))
        (when (and (member server servers) (string-match-p ":." uri))
          (cl-pushnew (cons server uri) mentions :test #'equal)))
      (nreverse mentions))))

(defun mevedel-mcp-mentions-attachment (server uri result)
  "Return the <attachment> block of URI on SERVER read as RESULT.
RESULT is the text, or (error MESSAGE)."
  (let ((address (mevedel-mcp-mentions-address server uri))
        (failed (eq (car-safe result) 'error)))
    (when failed
      (message "mevedel: @%s:%s not attached: %s" server uri (cadr result)))
    (format "<attachment kind=\"mcp-resource\" server=\"%s\" uri=\"%s\" address=\"%s\">\n%s\n</attachment>"
            server uri address
            (if failed
                (format "Not attached: MCP server %s could not read it: %s" server (cadr result))
              (mevedel-prompt-truncate result mevedel-mentions-file-budget address)))))

;;; Plumbing

(defun mevedel-mcp-mentions--before-send (chat text send)
  "Read the resources TEXT mentions before the turn of CHAT; then SEND.
For `mevedel-chat-before-send-functions': holds the turn while reading
and returns non-nil then.  The other members run once the reading is
done; the blocks go with the turn (`mevedel-mcp-mentions-mail')."
  (when-let* (((string-search "@" text))
              (session (mevedel-chat-session chat))
              ((mevedel-session-p session))
              (handle (mevedel-mcp-handle session))
              (mentions (mevedel-mcp-mentions-parse
                         text (mapcar (lambda (s) (plist-get s :name))
                                      (mevedel-core-mcp-status handle)))))
    (let ((blocks (make-vector (length mentions) nil))
          (left (length mentions))
          (cancelled nil))
      (puthash chat (lambda ()
                      (setq cancelled t)
                      (push text (mevedel-chat-history chat))
                      (mevedel-chat-set-status chat 'idle))
               mevedel-mcp-mentions--pending)
      (mevedel-chat-set-status chat 'attaching)
      (cl-loop
       for (server . uri) in mentions
       for i from 0
       do (let ((i i) (server server) (uri uri))
            (mevedel-mcp-read-address
             (mevedel-mcp-mentions-address server uri) session
             (lambda (result)
               (unless cancelled
                 (aset blocks i (mevedel-mcp-mentions-attachment server uri result))
                 (when (zerop (cl-decf left))
                   (mevedel-mcp-mentions--send chat text send (append blocks nil))))))))
      t)))

(defun mevedel-mcp-mentions--send (chat text send blocks)
  "Send TEXT in CHAT with BLOCKS, its resources, now that they are read.
SEND starts the turn, once the other `mevedel-chat-before-send-functions'
let it; if a turn started meanwhile, TEXT waits in the queue."
  (remhash chat mevedel-mcp-mentions--pending)
  (mevedel-chat-set-status chat 'idle)
  (condition-case err
      (if (mevedel-chat-busy-p chat)
          (mevedel-chat-queue chat text)
        (puthash chat (cons text blocks) mevedel-mcp-mentions--attached)
        (let ((mevedel-chat-before-send-functions
               (remq #'mevedel-mcp-mentions--before-send mevedel-chat-before-send-functions)))
          (unless (run-hook-with-args-until-success
                   'mevedel-chat-before-send-functions chat text send)
            (funcall send))))
    (error (message "mevedel: %s" (error-message-string err)))))

(defun mevedel-mcp-mentions-mail (chat)
  "Return the resource blocks read for CHAT's turn, once.
For `mevedel-chat-message-functions'."
  (when-let* ((attached (gethash chat mevedel-mcp-mentions--attached)))
    (remhash chat mevedel-mcp-mentions--attached)
    (and (equal (car attached) mevedel-chat-turn-text) (cdr attached))))

(defun mevedel-mcp-mentions--abort (chat)
  "Stop reading the resources of CHAT's next message; non-nil if it was.
For `mevedel-chat-abort-functions'."
  (when-let* ((cancel (gethash chat mevedel-mcp-mentions--pending)))
    (remhash chat mevedel-mcp-mentions--pending)
    (funcall cancel)
    t))

(add-hook 'mevedel-chat-before-send-functions #'mevedel-mcp-mentions--before-send -50)
(add-hook 'mevedel-chat-message-functions #'mevedel-mcp-mentions-mail t)
(add-hook 'mevedel-chat-abort-functions #'mevedel-mcp-mentions--abort)

(provide 'mevedel-mcp-mentions)
;;; mevedel-mcp-mentions.el ends here
