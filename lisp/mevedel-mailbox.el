;;; mevedel-mailbox.el --- Mailbox delivery, chat owners, background wakes  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; What reaches the agents of a session.  Each chat has an owner, an
;; agent path: the root (/root) for the session's own chat, a child's
;; path for the retained agents of mevedel-agent.el.
;;
;; Mailbox delivery.  Background work (yielded Bash commands, Monitor)
;; leaves records in the session's mailbox (mailbox.sqlite).  When a
;; turn is sent, the owner's unread records go with it as
;; <agent-message> blocks, in arrival order; the opening tag names the
;; record's type, its sender and recipient (agent paths), then the
;; record's own attributes.  A record is marked delivered only once the
;; backend accepted the request that carries it, when the transcript
;; holds it (`mevedel-chat-accepted-functions'); a request that failed
;; or was aborted before that leaves it unread for a later turn, and the
;; chat takes its blocks out of the transcript again.
;;
;; Background wakes.  A record whose arrival should wake the model (see
;; the execution manual) marks its session; when the session's chat is
;; idle, one background turn starts with `mevedel-mailbox-wake-prompt'
;; and reads every unread record.  Records delivered otherwise (a
;; WriteStdin poll read the result, a later turn carried it) drop their
;; marks.  A turn that ends well offers the marks still pending; a
;; failed or aborted turn drops them and so starts no background turn
;; by itself: its mail stays unread until the next turn, or the next
;; record that wakes.
;;
;; The execution tools' events arrive through the hooks of
;; mevedel-tool-exec.el, which knows nothing of chats: progress and
;; completion breadcrumbs go to the rows of the chat whose session ran
;; the command.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-chat)
(require 'mevedel-interaction)
(require 'mevedel-save)
(require 'mevedel-session)
(require 'mevedel-tool-exec)

;;;; Owners

(defconst mevedel-mailbox-root "/root"
  "The canonical path of a session's root agent.")

(defun mevedel-mailbox-owner (chat)
  "Return the path of the agent that talks in CHAT: a child's, else the root's."
  (or (mevedel-chat-agent chat) mevedel-mailbox-root))

(defun mevedel-mailbox--chat-of (key)
  "Return the live chat whose session has the key KEY, or nil."
  (cl-find-if (lambda (chat)
                (let ((session (mevedel-chat-session chat)))
                  (and (mevedel-session-p session)
                       (equal (mevedel-session-id session) key))))
              (mevedel-chat-list)))

;;;; Message blocks

(defconst mevedel-mailbox-message-kinds
  '("EXECUTION" "MONITOR" "MONITOR_TERMINAL" "MAIL" "RESULT")
  "Mailbox kinds delivered to agents as <agent-message> blocks.")

(defun mevedel-mailbox--xml-escape (value)
  "Return VALUE (any object) as text safe inside an XML attribute."
  (let ((text (if (stringp value) value (format "%s" value))))
    (if (string-match-p "[&<>\"\n]" text)
        (replace-regexp-in-string
         "[&<>\"\n]"
         (lambda (c) (pcase c ("&" "&amp;") ("<" "&lt;") (">" "&gt;") ("\"" "&quot;") (_ "&#10;")))
         text t t)
      text)))

(defun mevedel-mailbox--sender (message)
  "Return the agent path that sent MESSAGE (a mailbox plist).
An execution's record names the execution as its sender; it comes
from the agent that owns the execution, its recipient."
  (let ((sender (plist-get message :sender)))
    (if (and (stringp sender) (string-prefix-p "/" sender))
        sender
      (plist-get message :recipient))))

(defun mevedel-mailbox-format-message (message)
  "Return MESSAGE (a mailbox plist) as an <agent-message> block.
Built by `concat', not `format': this runs for every record drained."
  (let ((body (or (plist-get message :payload) ""))
        (attrs (append `(("type" ,(plist-get message :kind))
                         ("sender" ,(mevedel-mailbox--sender message))
                         ("recipient" ,(plist-get message :recipient)))
                       (plist-get message :attrs))))
    (concat "<agent-message "
            (mapconcat (lambda (pair)
                         (concat (car pair) "=\"" (mevedel-mailbox--xml-escape (cadr pair)) "\""))
                       (cl-remove-if-not #'cadr attrs)
                       " ")
            ">\n"
            ;; A closing tag inside the output must not end the block.
            (if (string-match-p "</agent-message" body)
                (replace-regexp-in-string "</agent-message" "<\\/agent-message" body t t)
              body)
            (if (or (string-empty-p body) (string-suffix-p "\n" body)) "" "\n")
            "</agent-message>")))

(defun mevedel-mailbox-unread (store recipient)
  "Return RECIPIENT's unread agent messages in STORE, oldest first."
  (cl-remove-if-not (lambda (m) (member (plist-get m :kind) mevedel-mailbox-message-kinds))
                    (mevedel-core-mailbox-unread store recipient)))

(defun mevedel-mailbox-deliver (store session ids)
  "Mark the records IDS in STORE delivered, and forget their wakes in SESSION."
  (when ids
    (mevedel-core-mailbox-deliver store ids)
    (mevedel-mailbox-forget-wakes session ids)))

;;;; Background wakes

(defconst mevedel-mailbox-wake-prompt
  "Background work has reported; its messages follow. This is not a message from the user."
  "The fixed prompt of a turn started because background work finished.")

(defconst mevedel-mailbox-wake-notice "Background work has reported."
  "What the view shows in place of `mevedel-mailbox-wake-prompt'.")

(defvar mevedel-mailbox--pending-wakes (make-hash-table :test #'equal)
  "Session key -> mailbox ids whose arrival should wake the idle model.")

(defvar mevedel-mailbox--wake-timer nil
  "Timer that offers pending wakes, so several completions start one turn.")

(defun mevedel-mailbox--note-wake (session ids)
  "Remember that mailbox IDS of SESSION should wake it when idle."
  (when ids
    (puthash session (append (gethash session mevedel-mailbox--pending-wakes) ids)
             mevedel-mailbox--pending-wakes)
    (unless (timerp mevedel-mailbox--wake-timer)
      (setq mevedel-mailbox--wake-timer
            (run-at-time 0 nil #'mevedel-mailbox-offer-wakes)))))

(defun mevedel-mailbox-forget-wakes (session ids)
  "Drop IDS of SESSION from the pending wakes: they were read already."
  (when-let* ((pending (gethash session mevedel-mailbox--pending-wakes)))
    (let ((left (cl-set-difference pending ids)))
      (if left
          (puthash session left mevedel-mailbox--pending-wakes)
        (remhash session mevedel-mailbox--pending-wakes)))))

(defvar mevedel-mailbox-hold-functions nil
  "Functions of a root chat; one returning non-nil holds its background turns.
The value says why, as text (\"the composer's draft\").  The view holds
them while its composer has a draft: a turn starting then would take
the conversation from under the user.  Whoever holds calls
`mevedel-mailbox-hold-released' when it lets go.")

(defvar mevedel-mailbox-release-functions nil
  "Functions of a root chat, called when what held its background turns let go.
Work the harness starts on its own after background events (a Goal's
next turn) listens here to try again.")

(defun mevedel-mailbox-free-p (chat)
  "Return non-nil when a background turn may start in CHAT now.
CHAT is idle, no interaction (a child's card included) waits for the
user, and nothing holds it (`mevedel-mailbox-hold-functions')."
  (and chat (not (mevedel-chat-busy-p chat))
       (not (mevedel-interaction-list chat))
       (not (run-hook-with-args-until-success 'mevedel-mailbox-hold-functions chat))))

(defun mevedel-mailbox--idle-p (key)
  "Return non-nil when the chat of session KEY is open and free for a wake."
  (mevedel-mailbox-free-p (mevedel-mailbox--chat-of key)))

(defun mevedel-mailbox-wakes-pending-p (chat)
  "Return non-nil when records wait to wake the root CHAT."
  (let ((session (mevedel-chat-session chat)))
    (and (mevedel-session-p session) (not (mevedel-chat-agent chat))
         (gethash (mevedel-session-id session) mevedel-mailbox--pending-wakes)
         t)))

(defun mevedel-mailbox-hold-released (chat)
  "Offer CHAT's pending wakes later: what held them may have let go.
Then tell `mevedel-mailbox-release-functions'."
  (when (and (mevedel-mailbox-wakes-pending-p chat)
             (not (timerp mevedel-mailbox--wake-timer)))
    (setq mevedel-mailbox--wake-timer (run-at-time 0 nil #'mevedel-mailbox-offer-wakes)))
  (run-hook-with-args 'mevedel-mailbox-release-functions chat))

(defun mevedel-mailbox--interactions-changed (chat)
  "Offer CHAT's held wakes once its last interaction is answered."
  (unless (mevedel-interaction-list chat)
    (mevedel-mailbox-hold-released chat)))

(add-hook 'mevedel-interaction-change-functions #'mevedel-mailbox--interactions-changed)

(defun mevedel-mailbox--wake (key)
  "Start one background turn in the idle chat of session KEY.
Return non-nil when it started."
  (let ((chat (mevedel-mailbox--chat-of key)))
    (when (mevedel-mailbox-free-p chat)
      (mevedel-chat-send chat mevedel-mailbox-wake-prompt :background mevedel-mailbox-wake-notice)
      t)))

(defun mevedel-mailbox-offer-wakes (&optional session)
  "Start one background turn per idle session with pending wakes.
With SESSION, offer only that one.  Busy sessions keep their wakes for
later.  Return the sessions offered a turn."
  (setq mevedel-mailbox--wake-timer nil)
  (let (offered)
    (maphash (lambda (key _ids)
               (when (and (or (null session) (equal key session))
                          (mevedel-mailbox--idle-p key))
                 (push key offered)))
             mevedel-mailbox--pending-wakes)
    (dolist (key offered)
      (remhash key mevedel-mailbox--pending-wakes)
      (mevedel-mailbox--wake key))
    offered))

(defun mevedel-mailbox--session-closed (session)
  "Forget the pending wakes of SESSION, which is closing."
  (when (mevedel-session-p session)
    (remhash (mevedel-session-id session) mevedel-mailbox--pending-wakes)))

;;;; Mailbox delivery with a chat's turns

(defvar mevedel-mailbox--in-flight (make-hash-table :test #'eq :weakness 'key)
  "Chat -> mailbox ids its running turn carries, not yet accepted.")

(defvar mevedel-mailbox--draining (make-hash-table :test #'eq :weakness 'key)
  "Chat -> mailbox ids its next sample carries, not yet saved with it.")

(defun mevedel-mailbox--store (chat)
  "Return the open store of CHAT's durable session with mail, or nil.
A store already open is taken as it is: this runs before every sample
and every send, and the files behind an open store exist."
  (let ((session (mevedel-chat-session chat)))
    (and (mevedel-session-p session)
         (mevedel-session-durable-p session)
         (featurep 'mevedel-dyn)
         (or (mevedel-session-store session)
             (and (file-exists-p (mevedel-session-database-file session))
                  (mevedel-session-store-handle session))))))

(defun mevedel-mailbox-chat-messages (chat)
  "Return the unread mail of CHAT's agent as blocks for its next turn.
The records stay unread until the turn's request is accepted (see
`mevedel-mailbox--chat-accepted')."
  (when-let* ((store (mevedel-mailbox--store chat)))
    (let ((messages (mevedel-mailbox-unread store (mevedel-mailbox-owner chat))))
      (if messages
          (puthash chat (mapcar (lambda (m) (plist-get m :id)) messages)
                   mevedel-mailbox--in-flight)
        (remhash chat mevedel-mailbox--in-flight))
      (mapcar #'mevedel-mailbox-format-message messages))))

(defvar mevedel-mailbox-read-functions nil
  "Abnormal hook run with a chat and the mail its running turn reads now.
The mail (mailbox records) was drained before the turn's next sample;
the agents runtime stamps a turn that reads Plan mail.")

(defun mevedel-mailbox-chat-continuation-mail (chat)
  "Return the unread mail of CHAT's agent for the next sample.
Before each sample of a running turn the queue drains in arrival
order.  The records count as delivered once the chat has saved them
with its conversation (`mevedel-mailbox--mail-written'), which it does
before the sample is sent."
  (when-let* ((store (mevedel-mailbox--store chat))
              (messages (mevedel-mailbox-unread store (mevedel-mailbox-owner chat))))
    (puthash chat (mapcar (lambda (m) (plist-get m :id)) messages) mevedel-mailbox--draining)
    (run-hook-with-args 'mevedel-mailbox-read-functions chat messages)
    (mapcar #'mevedel-mailbox-format-message messages)))

(defun mevedel-mailbox--deliver-saved (chat ids conversation)
  "Mark IDS, mail CHAT read, delivered once CONVERSATION has saved it.
CONVERSATION is the store CHAT's conversation is being saved to, or
nil when it is not saved: the mail is delivered at once then.  Mail
whose save fails stays unread, to be read again, never lost."
  (when-let* ((store (mevedel-mailbox--store chat)))
    (let ((session (mevedel-session-id (mevedel-chat-session chat))))
      (if (not conversation)
          (mevedel-mailbox-deliver store session ids)
        (mevedel-core-mailbox-deliver-after conversation store ids)
        (mevedel-mailbox-forget-wakes session ids)))))

(defun mevedel-mailbox--mail-written (chat conversation)
  "Deliver the mail CHAT's next sample carries once CONVERSATION saved it.
A `mevedel-chat-mail-written-functions' member."
  (when-let* ((ids (gethash chat mevedel-mailbox--draining)))
    (remhash chat mevedel-mailbox--draining)
    (mevedel-mailbox--deliver-saved chat ids conversation)))

(defun mevedel-mailbox--chat-accepted (chat)
  "Mark the mail of CHAT's turn delivered: the backend accepted it.
That happens once the conversation holding it is saved."
  (when-let* ((ids (gethash chat mevedel-mailbox--in-flight)))
    (remhash chat mevedel-mailbox--in-flight)
    (mevedel-mailbox--deliver-saved chat ids (mevedel-save-queue chat))))

(defun mevedel-mailbox--chat-idle (chat outcome)
  "Forget the mail of CHAT's ended turn, whose OUTCOME is given.
A turn that ended well (`done') offers the session's pending wakes;
after a failed or aborted one they are dropped, so that it starts no
background turn: the mail stays unread for the next turn."
  (remhash chat mevedel-mailbox--in-flight)
  (remhash chat mevedel-mailbox--draining)
  (let* ((session (mevedel-chat-session chat))
         (key (and (mevedel-session-p session) (mevedel-session-id session))))
    (cond ((null key))
          ;; A child agent's turn says nothing about the root's wakes.
          ((mevedel-chat-agent chat))
          ((not (eq outcome 'done)) (remhash key mevedel-mailbox--pending-wakes))
          ((gethash key mevedel-mailbox--pending-wakes)
           (run-at-time 0 nil #'mevedel-mailbox-offer-wakes key)))))

;;;; Execution events

(defun mevedel-mailbox--exec-settled (data)
  "Handle the settlement DATA of an execution.
A completion that should wake the model marks its session; a yielded
command's row gets its breadcrumb, and its live progress goes."
  (when (plist-get data :wake)
    (mevedel-mailbox--note-wake (plist-get data :session) (plist-get data :mailbox-ids)))
  (when-let* ((id (plist-get data :tool-use-id))
              (chat (mevedel-mailbox--chat-of (plist-get data :session))))
    (mevedel-chat-set-progress chat id nil)
    (when (plist-get data :yielded)
      (condition-case err
          (mevedel-chat-update-render-data
           chat id (lambda (render-data) (mevedel-tool-exec-settle-render-data render-data data))
           (cons 'settled (plist-get data :id)))
        (error (display-warning 'mevedel (format "Cannot record how %s ended: %s"
                                                 (plist-get data :id)
                                                 (error-message-string err))))))))

(defun mevedel-mailbox--exec-monitor (data)
  "Mark the session of the monitor lines DATA to wake, when they should."
  (when (plist-get data :wake)
    (mevedel-mailbox--note-wake (plist-get data :session) (plist-get data :mailbox-ids))))

(defun mevedel-mailbox--exec-delivered (data)
  "Forget the wakes of the records in DATA: polling read them."
  (mevedel-mailbox-forget-wakes (plist-get data :session) (plist-get data :mailbox-ids)))

(defun mevedel-mailbox--exec-progress (data)
  "Show the progress event DATA on its call's row in its chat, live.
The row gets the state, elapsed time and bounded output tail; they
are transient and go when the execution settles."
  (when-let* ((id (plist-get data :tool-use-id))
              (chat (mevedel-mailbox--chat-of (plist-get data :session))))
    (mevedel-chat-set-progress chat id (list :execution-id (plist-get data :id)
                                             :state (plist-get data :state)
                                             :elapsed-ms (plist-get data :elapsed-ms)
                                             :live-tail (plist-get data :tail)))))

(add-hook 'mevedel-chat-message-functions #'mevedel-mailbox-chat-messages)
(add-hook 'mevedel-chat-continuation-mail-functions #'mevedel-mailbox-chat-continuation-mail)
(add-hook 'mevedel-chat-mail-written-functions #'mevedel-mailbox--mail-written)
(add-hook 'mevedel-chat-accepted-functions #'mevedel-mailbox--chat-accepted)
(add-hook 'mevedel-chat-idle-functions #'mevedel-mailbox--chat-idle)
(add-hook 'mevedel-session-close-functions #'mevedel-mailbox--session-closed)
(add-hook 'mevedel-tool-exec-settled-functions #'mevedel-mailbox--exec-settled)
(add-hook 'mevedel-tool-exec-monitor-functions #'mevedel-mailbox--exec-monitor)
(add-hook 'mevedel-tool-exec-delivered-functions #'mevedel-mailbox--exec-delivered)
(add-hook 'mevedel-tool-exec-progress-functions #'mevedel-mailbox--exec-progress)

(provide 'mevedel-mailbox)
;;; mevedel-mailbox.el ends here
