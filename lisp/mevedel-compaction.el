;;; mevedel-compaction.el --- Summarising older turns when the context fills  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Compaction replaces the older turns of a conversation, as the model
;; reads it, with one summary.  Before a turn is sent, when the request
;; would fill more than `mevedel-compaction-threshold' of the model's
;; context window (`mevedel-chat-context-usage'), the turn waits: one
;; request without tools summarises every turn but the
;; `mevedel-compaction-keep-turns' most recent, then the turn goes.
;; `/compact [FOCUS]' and M-x mevedel-compact do it by hand.
;;
;; The summary sits in the data buffer where the kept turns begin, as a
;; <conversation-summary> notice; the text before it is marked
;; `mevedel-compacted' and a prompt transform drops it from every later
;; request.  A second compaction summarises the earlier summary with
;; the turns since, so summaries never stack.  Before each, the whole
;; transcript is copied to compact-NNNN beside the session; the view
;; keeps showing every turn.  After one, the prompt's context updates
;; are sent again (`mevedel-prompt-reset') and the SessionStart hooks
;; run with the source "compact".
;;
;; The chat reaches this file through its hooks: the check before a
;; send (`mevedel-chat-before-send-functions') and the prompt
;; transform (`mevedel-chat-prompt-transform-functions').  This file
;; does not count tokens (mevedel-chat.el keeps the usage the provider
;; reports) nor save the conversation (mevedel-save.el); the transcript
;; log's own rewrite on disk is consolidation, not compaction
;; (mevedel-transcript.el).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'gptel)
(require 'mevedel-gptel)
(require 'mevedel-history)
(require 'mevedel-hooks)
(require 'mevedel-prompt)
(require 'mevedel-session)
(require 'mevedel-transcript)
(require 'mevedel-chat)
(require 'mevedel-save)
(require 'mevedel-view)

;;;; Customization

(defgroup mevedel-compaction nil
  "Summarising older turns when the model's context fills."
  :group 'mevedel-chat
  :prefix "mevedel-compaction-")

(define-obsolete-variable-alias 'mevedel-chat-compact-threshold
  'mevedel-compaction-threshold "0.2")
(define-obsolete-variable-alias 'mevedel-chat-compact-keep-turns
  'mevedel-compaction-keep-turns "0.2")
(define-obsolete-variable-alias 'mevedel-chat-compact-prompt
  'mevedel-compaction-prompt "0.2")

(defcustom mevedel-compaction-threshold 0.8
  "Fraction of the model's context window that triggers compaction.
Before a turn is sent, when the context would exceed it, the older
turns are summarised first (see `mevedel-compaction-start').  nil turns
automatic compaction off; `/compact' still works."
  :type '(choice (const :tag "Never automatically" nil) number))

(defcustom mevedel-compaction-keep-turns 2
  "Most recent turns a compaction keeps verbatim."
  :type 'natnum)

(defcustom mevedel-compaction-prompt
  "Summarise the conversation below between a user and a coding agent \
working in their project, so that the agent can continue the work from \
the summary alone.  Keep: the user's goals and instructions, decisions \
and their reasons, files read or changed (with paths), commands run and \
what they showed, errors met, and what is left to do.  Drop pleasantries \
and repetition.  If an earlier summary is given, merge it with the new \
turns into one summary."
  "Instruction of the request that summarises older turns."
  :type 'string)

;;;; The summary in the data buffer

(defun mevedel-compaction--drop-compacted ()
  "Remove the compacted text from this prompt buffer (a prompt transform).
Their summary, which follows them, stands in for them."
  (let ((pos (point-min)) (regions nil))
    (while (setq pos (text-property-any pos (point-max) 'mevedel-compacted t))
      (let ((end (or (text-property-not-all pos (point-max) 'mevedel-compacted t) (point-max))))
        (push (cons pos end) regions)
        (setq pos end)))
    (pcase-dolist (`(,start . ,end) regions)
      (delete-region start end))))

(defun mevedel-compaction--summary-region (buffer)
  "Return (START . END) of the compaction summary in data BUFFER, or nil."
  (with-current-buffer buffer
    (when-let* ((start (text-property-any (point-min) (point-max) 'mevedel-notice 'compaction)))
      (cons start (or (text-property-not-all start (point-max) 'mevedel-notice 'compaction)
                      (point-max))))))

(defun mevedel-compaction--summary-body (text)
  "Return the summary inside the compaction block TEXT."
  (string-trim (replace-regexp-in-string
                "\\`[ \t\n]*<conversation-summary[^>]*>\\|</conversation-summary>[ \t\n]*\\'" ""
                text)))

(defun mevedel-compaction--recovery-copy (chat)
  "Write CHAT's whole transcript to the next compact-NNNN file; return its name."
  (let* ((buffer (mevedel-chat-data-buffer chat))
         (dir (mevedel-session-ensure-storage (mevedel-chat-session chat)))
         (ext (file-name-extension (mevedel-transcript-export-name buffer dir)))
         (n 1))
    (while (file-exists-p (expand-file-name (format "compact-%04d.%s" n ext) dir))
      (cl-incf n))
    (let ((file (expand-file-name (format "compact-%04d.%s" n ext) dir))
          (coding-system-for-write 'utf-8-unix))
      (with-current-buffer buffer
        (save-restriction
          (widen)
          (write-region (point-min) (point-max) file nil 'silent)))
      file)))

;;;; Compacting

(defun mevedel-compaction-needed-p (chat &optional text)
  "Return non-nil when CHAT's next request, with TEXT, would be too large.
That is more than `mevedel-compaction-threshold' of the model's
context window, with enough turns to compact."
  (pcase-let ((`(,tokens ,window ,_) (mevedel-chat-context-usage chat)))
    (and mevedel-compaction-threshold window
         (> (length (mevedel-chat-turns chat)) mevedel-compaction-keep-turns)
         (> (+ tokens (/ (length (or text "")) 4))
            (* mevedel-compaction-threshold window)))))

(defvar-local mevedel-compaction--running nil
  "(ON-DONE . FSM) of the compaction running in this data buffer, or nil.")

(defun mevedel-compaction-start (chat &optional focus on-done)
  "Summarise the older part of CHAT's conversation, and send that instead.
The `mevedel-compaction-keep-turns' most recent turns stay verbatim.
One summary request (without tools) summarises the turns since the
last compaction together with its summary, so summaries never stack;
FOCUS, a string, says what the summary should keep above all.  The
whole transcript is first copied to a numbered compact-NNNN file, and
the view keeps showing every turn.  ON-DONE is called with CHAT and
`done', `error' or `abort' (`mevedel-chat-abort' stopped it) at the
end; observers hear `compacted'."
  (when (mevedel-chat-busy-p chat)
    (user-error "A turn is running in %s; wait or abort it first" (mevedel-chat-name chat)))
  (mevedel-transcript-complete (mevedel-chat-data-buffer chat))
  (let* ((keep (max 1 mevedel-compaction-keep-turns))
         (turns (mevedel-chat-turns chat))
         (buffer (mevedel-chat-data-buffer chat)))
    (when (<= (length turns) keep)
      (user-error "Nothing to compact: %s has only %d turn%s" (mevedel-chat-name chat)
                  (length turns) (if (= (length turns) 1) "" "s")))
    (let* ((cut (copy-marker (plist-get (nth (1- keep) turns) :start)))
           (old (mevedel-compaction--summary-region buffer))
           (from (if old (cdr old) (with-current-buffer buffer (point-min))))
           (previous (and old (with-current-buffer buffer
                                (mevedel-compaction--summary-body
                                 (buffer-substring-no-properties (car old) (cdr old))))))
           (conversation (mevedel-history-project buffer from cut))
           (backend (mevedel-chat-backend-effective chat))
           (model (mevedel-chat-model-effective chat))
           (recovery (mevedel-compaction--recovery-copy chat)))
      (setf (mevedel-chat-compacting chat) t)
      (mevedel-chat-set-status chat 'compacting)
      (with-current-buffer buffer
        (let ((gptel-backend backend) (gptel-model model) (gptel-use-tools nil) (gptel-tools nil)
              (running (list on-done)))
          ;; `mevedel-compaction--abort' takes it; a late answer then
          ;; finds it gone and changes nothing.
          (setq mevedel-compaction--running running)
          (setcdr
           running
           (gptel-request
              (concat (and previous (concat "Earlier summary:\n" previous "\n\n"))
                      "Conversation to summarise:\n" (string-trim conversation)
                      (and focus (not (string-blank-p focus))
                           (concat "\n\nKeep above all: " focus)))
            :system mevedel-compaction-prompt
            :stream nil
            :callback
            (lambda (response info)
              (when (eq (buffer-local-value 'mevedel-compaction--running buffer) running)
                (cond
                 ((stringp response)
                  (mevedel-compaction--install-summary chat response cut recovery)
                  (mevedel-compaction--end chat 'done on-done))
                 ((null response)
                  (message "mevedel: compaction failed: %s"
                           (mevedel-chat-error-message info))
                  (mevedel-compaction--end chat 'error on-done)))))))))
      recovery)))

(defun mevedel-compaction--abort (chat)
  "Stop CHAT's running compaction; return non-nil if one ran.
A `mevedel-chat-abort-functions' member.  The turn it held back is
not sent: an interrupted agent's request must not go out after its
turn was recorded interrupted."
  (when-let* (((mevedel-chat-compacting chat))
              (buffer (mevedel-chat-data-buffer chat))
              (running (buffer-local-value 'mevedel-compaction--running buffer)))
    (mevedel-compaction--end chat 'abort (car running))
    (when (cdr running) (ignore-errors (mevedel-gptel-abort (cdr running) buffer)))
    t))

(add-hook 'mevedel-chat-abort-functions #'mevedel-compaction--abort)

(defun mevedel-compaction--install-summary (chat summary cut recovery)
  "Put SUMMARY at CUT in CHAT's data buffer; what precedes it is compacted.
The previous summary goes.  RECOVERY names the copy of the transcript
made before."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (let ((inhibit-read-only t))
      (when-let* ((old (mevedel-compaction--summary-region (current-buffer))))
        (delete-region (car old) (cdr old)))
      (put-text-property (point-min) cut 'mevedel-compacted t)
      (save-excursion
        (goto-char cut)
        (insert (propertize
                 (format "\n\n<conversation-summary recovery=\"%s\">\n%s\n</conversation-summary>\n"
                         (file-name-nondirectory recovery) (string-trim summary))
                 'mevedel-notice 'compaction 'front-sticky nil 'rear-nonsticky t)))
      (set-marker cut nil)))
  ;; What the compacted turns told the model (context updates,
  ;; subdirectory instructions) is told again.
  (mevedel-prompt-reset chat)
  (mevedel-save-checkpoint chat (mevedel-save-metadata chat) t))

(defun mevedel-compaction--end (chat outcome on-done)
  "Finish CHAT's compaction with OUTCOME; call ON-DONE and tell observers."
  (setf (mevedel-chat-compacting chat) nil)
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (setq mevedel-compaction--running nil))
  ;; SessionStart is the session's: a child's compaction is not one.
  (when (and (eq outcome 'done) (not (mevedel-chat-agent chat)))
    (mevedel-hooks-session-start (mevedel-chat-session chat) "compact"))
  (mevedel-chat-set-status chat (if (memq outcome '(done abort)) 'idle 'error)
                           (when (eq outcome 'error) "compaction failed"))
  (mevedel-chat-notify chat 'compacted outcome)
  (when on-done (funcall on-done chat outcome)))

(defun mevedel-compaction--before-send (chat text send)
  "Compact CHAT first when its next request, with TEXT, would be too large.
A `mevedel-chat-before-send-functions' member: SEND sends the turn once
the compaction is over, whether it worked or not; an aborted one
gives SEND `abort', which ends the turn unsent.  Return non-nil then."
  (when (mevedel-compaction-needed-p chat text)
    (mevedel-compaction-start chat nil (lambda (_chat outcome)
                                         (if (eq outcome 'abort) (funcall send 'abort)
                                           (funcall send))))
    t))

(add-hook 'mevedel-chat-before-send-functions #'mevedel-compaction--before-send)
(add-hook 'mevedel-chat-prompt-transform-functions #'mevedel-compaction--drop-compacted)

;;;; Commands

(defun mevedel-compact (focus)
  "Compact the older part of this view's session now, keeping above all FOCUS.
FOCUS may be empty."
  (interactive (list (read-string "Keep above all (empty: nothing special): ")))
  (mevedel-compaction--slash-compact (or (mevedel-view-chat) (user-error "Not a mevedel view"))
                                     focus))

(defun mevedel-compaction--slash-compact (chat argument)
  "Compact the older part of CHAT now, keeping above all ARGUMENT (/compact FOCUS)."
  (mevedel-compaction-start chat argument
                            (lambda (_chat outcome)
                              (message (if (eq outcome 'done)
                                           "mevedel: older turns compacted into a summary"
                                         "mevedel: compaction failed; nothing changed"))))
  (message "mevedel: summarising older turns..."))

(mevedel-view-register-slash-command "compact"
  #'mevedel-compaction--slash-compact
  "summarise older turns now (/compact FOCUS: what to keep above all)")

(define-obsolete-function-alias 'mevedel-chat-needs-compaction-p
  #'mevedel-compaction-needed-p "0.2")
(define-obsolete-function-alias 'mevedel-chat-compact #'mevedel-compaction-start "0.2")

(provide 'mevedel-compaction)
;;; mevedel-compaction.el ends here
