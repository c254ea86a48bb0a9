;;; mevedel-save.el --- Saving a chat's conversation as it goes  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Every session is saved while it runs, so that a crash loses at most
;; a couple of seconds of streamed text.  Its conversation (the data
;; buffer, as the transcript log of mevedel-transcript.el), metadata
;; (title, model, turns, token usage) and composer inputs go to the
;; session's store, WORKSPACE/.mevedel/sessions/ID/session.sqlite; a
;; child agent's conversation to its own store under agents/.  The
;; writes run on the store's writer thread: Emacs waits only where a
;; checkpoint must survive a kill (after tool results, at a turn's end).
;;
;; The chat (mevedel-chat.el) names the points of its life where it is
;; saved and runs `mevedel-chat-save-functions' at each; this file
;; registers there (`mevedel-save--at') and decides what each point
;; writes:
;;
;; - a turn's start materialises the storage, pushes the user's input
;;   and marks the turn open; a timer then checkpoints the streamed
;;   text every `mevedel-save-interval' seconds;
;; - tool calls starting are recorded as open calls, and forgotten once
;;   their results are in (settled: waited for);
;; - a turn's end writes all metadata, closes the turn (settled) and
;;   refreshes the readable copy (transcript.org, .md or .txt);
;; - a model change, a truncation, an appended turn and killing the
;;   data buffer write the metadata again.
;;
;; A turn's end also appends what is new in the provider history (the
;; messages as sent, mevedel-gptel.el) to the file beside the store,
;; and the metadata carries the frozen system text.
;;
;; Mail a continuing request carries counts as read once the save that
;; holds it is queued (`mevedel-chat-mail-written-functions').  Before
;; Emacs exits, every live chat is flushed.
;;
;; This file does not read a session back (mevedel-resume.el does), nor
;; list, fork or delete saved sessions (mevedel-session-list.el), nor
;; own the storage and its lock (mevedel-session.el).
;; `mevedel-save-sessions' nil turns saving off.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'gptel)
(require 'mevedel-core)
(require 'mevedel-gptel)
(require 'mevedel-session)
(require 'mevedel-transcript)
(require 'mevedel-chat)

;;;; Customization

(defgroup mevedel-save nil
  "Saving sessions as they go."
  :group 'mevedel-chat
  :prefix "mevedel-save-")

(define-obsolete-variable-alias 'mevedel-chat-save-sessions 'mevedel-save-sessions "0.2")

(defcustom mevedel-save-sessions t
  "Non-nil means conversations are saved in their session's storage.
Each session's transcript, metadata and input history then live in
WORKSPACE/.mevedel/sessions/ID/ and `mevedel' resumes the newest one."
  :type 'boolean)

(defconst mevedel-save-interval 2
  "Seconds between checkpoints of a turn's streamed text.")

;;;; Where and what is saved

(defun mevedel-save-print (value)
  "Return VALUE printed readably on one line."
  (let ((print-escape-newlines t) (print-length nil) (print-level nil))
    (prin1-to-string value)))

(defun mevedel-save--enabled-p (chat)
  "Return non-nil when CHAT's conversation is saved.
A child agent's is, in its own store, when it has one."
  (and mevedel-save-sessions
       (if (mevedel-chat-agent chat)
           (mevedel-chat-store chat)
         (and (mevedel-session-durable-p (mevedel-chat-session chat))
              (not (mevedel-chat-read-only chat))))))

(defun mevedel-save-store (chat &optional materialize)
  "Return the store CHAT's conversation is saved in.
That is a child agent's own, else the session's; MATERIALIZE makes the
session's storage first."
  (or (mevedel-chat-store chat)
      (if materialize
          (mevedel-session-store-handle (mevedel-chat-session chat))
        (mevedel-session-store (mevedel-chat-session chat)))))

(defun mevedel-save-now ()
  "Return the time now in epoch milliseconds, as a string."
  (number-to-string (truncate (* 1000 (float-time)))))

(defun mevedel-save-metadata (chat &rest extra)
  "Return EXTRA (pairs of strings) and all of CHAT's metadata.
It is written when turns begin, end or change; checkpoints in between
refresh only what grows (see `mevedel-save-checkpoint')."
  (let ((backend (mevedel-chat-backend-effective chat))
        (buffer (mevedel-chat-data-buffer chat)))
    `(,@extra
      ("title" . ,(or (mevedel-chat-title chat) ""))
      ("created" . ,(or (mevedel-chat-created chat) ""))
      ("updated" . ,(mevedel-save-now))
      ("backend" . ,(if backend (gptel-backend-name backend) ""))
      ("model" . ,(format "%s" (or (mevedel-chat-model-effective chat) "")))
      ("provider" . ,(format "%s" (or (car (mevedel-chat-placement chat)) "")))
      ("provider-model" . ,(or (cdr (mevedel-chat-placement chat)) ""))
      ("demo" . ,(if (mevedel-chat-demo chat) "1" ""))
      ("turns" . ,(number-to-string (length (mevedel-chat-turns chat))))
      ("turn-list" . ,(mevedel-save-print
                       (mapcar (lambda (turn)
                                 (list (plist-get turn :id) (plist-get turn :label)
                                       (marker-position (plist-get turn :start))))
                               (mevedel-chat-turns chat))))
      ("context-tokens" . ,(if (mevedel-chat-context-tokens chat)
                               (number-to-string (mevedel-chat-context-tokens chat))
                             ""))
      ("chars" . ,(number-to-string (buffer-size buffer)))
      ("prompt-state" . ,(if-let* ((frozen (mevedel-prompt-frozen chat)))
                             (mevedel-save-print frozen)
                           ""))
      ("read-files" . ,(if-let* ((read (mevedel-edited-files-saved chat)))
                           (mevedel-save-print read)
                         "")))))

(defconst mevedel-save--settle-timeout 2
  "Seconds a settled checkpoint waits for its writes.")

(defun mevedel-save-checkpoint (chat &optional info settled)
  "Save CHAT's unsaved conversation, its size and the time, and INFO.
INFO is an alist of metadata strings (`mevedel-save-metadata' gives
all of it).  The writes happen in the background; SETTLED non-nil
waits until they are done (they then survive Emacs being killed), as
after tool results and at the end of a turn.  Does nothing when CHAT
is not saved or has no storage yet."
  (when-let* ((store (mevedel-save-queue chat)))
    (mevedel-core-store-info-set
     store `(,@info ("updated" . ,(mevedel-save-now))
                    ("chars" . ,(number-to-string (buffer-size (mevedel-chat-data-buffer chat))))))
    (when settled
      (condition-case err
          (mevedel-core-store-flush store mevedel-save--settle-timeout)
        (mevedel-core-store-error
         (display-warning 'mevedel (format "Saving %s is slow: %s" (mevedel-chat-name chat)
                                           (error-message-string err))))))))

(defun mevedel-save-queue (chat)
  "Queue a save of CHAT's unsaved conversation and return its store.
Return nil when CHAT's conversation is not saved or has no storage yet."
  (when-let* (((mevedel-save--enabled-p chat))
              (buffer (mevedel-chat-data-buffer chat))
              ((mevedel-transcript-tracked-p buffer)))
    (mevedel-transcript-save buffer)
    (mevedel-save-store chat)))

;;;; The points of a chat's life

(defun mevedel-save--at (chat point &rest args)
  "Save CHAT at POINT of its life, with ARGS.
A `mevedel-chat-save-functions' member; see there for the points."
  (pcase point
    ('begin (mevedel-save--begin chat (car args)))
    ('calls (mevedel-save-checkpoint
             chat `(("open-calls" . ,(mevedel-save-print
                                      (mapcar (lambda (record)
                                                (list (plist-get record :id)
                                                      (plist-get record :name)
                                                      (plist-get record :args)))
                                              (car args)))))))
    ('results (mevedel-save-checkpoint chat '(("open-calls" . "")) t))
    ('inputs (mevedel-save--inputs chat (car args)))
    ('end (mevedel-save--settle chat))
    ('undo (mevedel-save--stop-timer chat))
    ('change (mevedel-save-checkpoint chat (mevedel-save-metadata chat)))
    ('append (mevedel-save--appended chat))
    ('kill (mevedel-save--killed chat))))

(add-hook 'mevedel-chat-save-functions #'mevedel-save--at)

(defun mevedel-save--begin (chat text)
  "Checkpoint CHAT at the start of a turn; TEXT is the user's input, if any.
The first turn materialises the session's storage."
  (when (mevedel-save--enabled-p chat)
    (condition-case err
        (let ((store (mevedel-save-store chat t))
              (buffer (mevedel-chat-data-buffer chat)))
          (unless (mevedel-transcript-tracked-p buffer)
            (mevedel-transcript-track buffer store))
          (unless (mevedel-chat-created chat)
            (setf (mevedel-chat-created chat) (mevedel-save-now)))
          (when (and text (not (mevedel-chat-agent chat)))
            (mevedel-core-store-input-push store text))
          (mevedel-save-checkpoint chat (mevedel-save-metadata chat '("turn-open" . "1")))
          (when (timerp (mevedel-chat-save-timer chat))
            (cancel-timer (mevedel-chat-save-timer chat)))
          (setf (mevedel-chat-save-timer chat)
                (run-at-time mevedel-save-interval mevedel-save-interval
                             #'mevedel-save--tick chat)))
      (error (display-warning 'mevedel (format "Cannot save the conversation: %s"
                                               (error-message-string err)))))))

(defun mevedel-save--tick (chat)
  "Checkpoint the streamed text of CHAT's running turn."
  (if (and (mevedel-chat-turn chat) (buffer-live-p (mevedel-chat-data-buffer chat)))
      (when (mevedel-transcript-dirty-p (mevedel-chat-data-buffer chat))
        (mevedel-save-checkpoint chat))
    (mevedel-save--stop-timer chat)))

(defun mevedel-save--stop-timer (chat)
  "Stop CHAT's checkpoint timer."
  (when (timerp (mevedel-chat-save-timer chat))
    (cancel-timer (mevedel-chat-save-timer chat)))
  (setf (mevedel-chat-save-timer chat) nil))

(defun mevedel-save--settle (chat)
  "Checkpoint CHAT at the end of a turn and refresh its readable copy."
  (mevedel-save--stop-timer chat)
  (when (mevedel-transcript-tracked-p (mevedel-chat-data-buffer chat))
    (mevedel-save-checkpoint
     chat (apply #'mevedel-save-metadata chat '("turn-open" . "") '("open-calls" . "")
                 (mevedel-save--history chat))
     t)
    (mevedel-transcript-consolidate
     (mevedel-chat-data-buffer chat)
     (if-let* ((store (mevedel-chat-store chat)))
         ;; A child agent's copy is named after its own store: the
         ;; agents share a directory.
         (let ((file (plist-get (mevedel-core-store-info store) :file)))
           (mevedel-transcript-export-name (mevedel-chat-data-buffer chat)
                                           (file-name-directory file) (file-name-base file)))
       (mevedel-transcript-export-name (mevedel-chat-data-buffer chat)
                                       (mevedel-session-directory (mevedel-chat-session chat)))))))

(defun mevedel-save-history-file (store)
  "Return the file beside STORE with its conversation's provider history."
  (concat (file-name-sans-extension (plist-get (mevedel-core-store-info store) :file))
          ".history.jsonl"))

(defun mevedel-save--history (chat)
  "Write what is new in CHAT's provider history; return its metadata pairs.
The messages go to `mevedel-save-history-file', one JSON line each,
appended when the history extends what was written; the metadata
says which lines count and where the history ends in the text."
  (let* ((store (mevedel-save-store chat))
         (history (buffer-local-value 'mevedel-gptel-history (mevedel-chat-data-buffer chat))))
    (if (not (and store history))
        '(("provider-history" . ""))
      (let* ((messages (plist-get history :messages))
             (saved (or (plist-get history :saved) 0))
             (coding-system-for-write 'utf-8-unix))
        (with-temp-buffer
          (cl-loop for index from saved below (length messages)
                   do (insert (json-serialize (aref messages index)
                                              :null-object :null :false-object :json-false)
                              "\n"))
          (write-region nil nil (mevedel-save-history-file store) (> saved 0) 'silent))
        (plist-put history :saved (length messages))
        `(("provider-history"
           . ,(mevedel-save-print (list :id (plist-get history :id)
                                        :wire (plist-get history :wire)
                                        :end (plist-get history :end)
                                        :sent (plist-get history :sent)
                                        :count (length messages)))))))))

(defun mevedel-save--inputs (chat texts)
  "Keep TEXTS, queued messages that joined CHAT's turn, in its input history."
  (when-let* ((store (and (mevedel-save--enabled-p chat)
                          (mevedel-session-store (mevedel-chat-session chat)))))
    (dolist (text texts)
      (mevedel-core-store-input-push store text))))

(defun mevedel-save--appended (chat)
  "Save CHAT after a turn mevedel wrote, and wait for the writes.
That turn may be the conversation's first: its storage is made then."
  (when (mevedel-save--enabled-p chat)
    (condition-case err
        (let ((buffer (mevedel-chat-data-buffer chat)))
          (unless (mevedel-transcript-tracked-p buffer)
            (mevedel-transcript-track
             buffer (mevedel-session-store-handle (mevedel-chat-session chat))))
          (mevedel-save-checkpoint chat (mevedel-save-metadata chat) t))
      (error (display-warning 'mevedel (format "Cannot save the conversation: %s"
                                               (error-message-string err)))))))

(defun mevedel-save--killed (chat)
  "Save CHAT, whose data buffer is being killed; a failure only warns."
  (mevedel-save--stop-timer chat)
  (condition-case err
      (mevedel-save-checkpoint chat (mevedel-save-metadata chat))
    (error (display-warning 'mevedel (format "Saving %s failed: %s" (mevedel-chat-name chat)
                                             (error-message-string err))))))

(defun mevedel-save--continued (info texts)
  "Save the mail among TEXTS that the request INFO continues with.
A `mevedel-gptel-continued-functions' member: the mail goes to the
conversation's store before it counts as read
\(`mevedel-chat-mail-written-functions')."
  (when-let* ((chat (plist-get info :context))
              ((mevedel-chat-p chat))
              ((cl-some (lambda (text) (get-text-property 0 'mevedel-mail text)) texts)))
    (run-hook-with-args 'mevedel-chat-mail-written-functions chat (mevedel-save-queue chat))))

(add-hook 'mevedel-gptel-continued-functions #'mevedel-save--continued)

;;;; Flushing

(defun mevedel-save-flush (chat &optional timeout)
  "Save CHAT now and wait up to TIMEOUT seconds for the writes to finish.
Return the message of a write that failed, or nil."
  (when (and (mevedel-save--enabled-p chat)
             (mevedel-transcript-tracked-p (mevedel-chat-data-buffer chat)))
    (mevedel-save-checkpoint chat (mevedel-save-metadata chat))
    (mevedel-core-store-flush (mevedel-save-store chat) timeout)))

(defun mevedel-save--flush-all ()
  "Save every live chat before Emacs exits (`kill-emacs-hook')."
  (dolist (chat (mevedel-chat-list))
    (condition-case err
        (mevedel-save-flush chat 3)
      (error (message "mevedel: saving %s failed: %s" (mevedel-chat-name chat)
                      (error-message-string err))))))

(add-hook 'kill-emacs-hook #'mevedel-save--flush-all)

(define-obsolete-function-alias 'mevedel-chat-checkpoint #'mevedel-save-checkpoint "0.2")
(define-obsolete-function-alias 'mevedel-chat-queue-save #'mevedel-save-queue "0.2")
(define-obsolete-function-alias 'mevedel-chat-flush #'mevedel-save-flush "0.2")

(provide 'mevedel-save)
;;; mevedel-save.el ends here
