;;; mevedel-resume.el --- Resuming a saved session, settling a cut turn  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Brings a saved conversation back into a chat: the transcript into
;; the data buffer, then the title, model and backend (or the chosen
;; provider: `mevedel-chat-placement'), token usage,
;; turn list and the last composer inputs from the session's metadata
;; (what mevedel-save.el wrote), then the frozen system text and the
;; provider history the next request replays.  `mevedel-chat-get-create' opening a
;; saved session (M-x mevedel, the sessions list, `bin/mevedel
;; --continue') and `mevedel-chat-open-read-only' run
;; `mevedel-chat-load-functions', where this file registers; the agent
;; runtime resumes a retained child agent with `mevedel-resume-chat'.
;;
;; A turn that was running when Emacs stopped is settled as it comes
;; back: each open call gets a result (a cancellation, or what a
;; `mevedel-resume-recovered-result-functions' member recovers, as
;; ToolCall does from its envelope), the cut response is marked
;; incomplete and a notice says the turn was interrupted, so the next
;; request is valid for every backend.  Then `mevedel-resume-functions'
;; run: Plan mode and the agent registry restore their state there.
;;
;; A read-only chat (a session another process writes) is loaded
;; without settling or writing anything.  This file does not save
;; (mevedel-save.el), choose which session to open or list them
;; (mevedel-session-list.el), or take a session's lock
;; (mevedel-session.el).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'gptel)
(require 'mevedel-core)
(require 'mevedel-session)
(require 'mevedel-transcript)
(require 'mevedel-chat)
(require 'mevedel-save)

;;;; Hooks

(define-obsolete-variable-alias 'mevedel-chat-resume-functions 'mevedel-resume-functions "0.2")

(defvar mevedel-resume-functions nil
  "Abnormal hook run with a chat once its saved session is loaded.")

(define-obsolete-variable-alias 'mevedel-chat-recovered-result-functions
  'mevedel-resume-recovered-result-functions "0.2")

(defvar mevedel-resume-recovered-result-functions nil
  "Functions that may give the result of a call Emacs stopped during.
Each is called with the session's STORE, its saved metadata INFO (an
alist of strings), and the call's ID, NAME and ARGS; the first string
returned is the call's result instead of the plain cancellation.
ToolCall settles from its recorded envelope this way.")

(defconst mevedel-resume--history-kept 500
  "Composer inputs a resumed session brings back.")

;;;; Loading

(defun mevedel-resume-chat (chat)
  "Load CHAT's saved conversation, input history and metadata.
A turn that was running when Emacs stopped is settled: its calls get
cancelled results, its cut response is marked incomplete and a notice
says what happened.  Then `mevedel-resume-functions' run.  A resumed
root session comes here through `mevedel-chat-load-functions'; the
agent runtime loads a retained child agent this way when it is first
used."
  (when-let* ((open-calls (mevedel-resume--load chat (mevedel-save-store chat t))))
    (mevedel-resume--recover chat (car open-calls)))
  (run-hook-with-args 'mevedel-resume-functions chat))

(defun mevedel-resume--load-saved (chat)
  "Load the saved session of the new CHAT.
A `mevedel-chat-load-functions' member.  A chat that may write its
session resumes it (`mevedel-resume-chat'); a read-only one reads the
conversation as last saved and writes nothing."
  (if (not (mevedel-chat-read-only chat))
      (mevedel-resume-chat chat)
    (let ((store (mevedel-core-store-open
                  (mevedel-session-database-file (mevedel-chat-session chat)))))
      (unwind-protect (mevedel-resume--load chat store)
        (mevedel-core-store-close store)))
    (mevedel-transcript-untrack (mevedel-chat-data-buffer chat))))

(add-hook 'mevedel-chat-load-functions #'mevedel-resume--load-saved)

(defun mevedel-resume--load (chat store)
  "Load CHAT's conversation, input history and metadata saved in STORE.
Nothing is written.  Return (OPEN-CALLS) when a turn was running as
the conversation was last saved, OPEN-CALLS the (ID NAME ARGS) of the
calls it ran; else nil."
  (let* ((buffer (mevedel-chat-data-buffer chat))
         (info (mevedel-core-store-info-get store))
         (get (lambda (key) (let ((v (cdr (assoc key info)))) (and v (not (string-empty-p v)) v)))))
    (mevedel-transcript-restore buffer store t)
    (when-let* ((frozen (funcall get "prompt-state")))
      (mevedel-prompt-thaw chat (car (read-from-string frozen))))
    (when-let* ((read (funcall get "read-files")))
      (mevedel-edited-files-restore chat (car (read-from-string read))))
    (when-let* ((saved (funcall get "provider-history"))
                (history (mevedel-resume--history store (car (read-from-string saved)))))
      (mevedel-gptel-set-history buffer history))
    (setf (mevedel-chat-title chat) (funcall get "title")
          (mevedel-chat-created chat) (funcall get "created")
          (mevedel-chat-context-tokens chat) (and (funcall get "context-tokens")
                                                  (string-to-number (funcall get "context-tokens")))
          (mevedel-chat-history chat) (reverse (mevedel-core-store-inputs
                                                store mevedel-resume--history-kept)))
    ;; The backend saved may not be defined in this Emacs: then the
    ;; user's default one serves.
    (when-let* ((name (funcall get "backend"))
                (backend (ignore-error user-error (gptel-get-backend name))))
      (setf (mevedel-chat-backend chat) backend))
    (when-let* ((model (funcall get "model")))
      (setf (mevedel-chat-model chat) (intern model)))
    (when-let* ((provider (funcall get "provider")))
      (setf (mevedel-chat-placement chat) (cons (intern provider) (funcall get "provider-model"))))
    (setf (mevedel-chat-demo chat) (equal (funcall get "demo") "1"))
    (with-current-buffer buffer
      (setf (mevedel-chat-turns chat)
            (mapcar (pcase-lambda (`(,id ,label ,start))
                      (list :id id :label label
                            :start (copy-marker (max (point-min) (min start (point-max))))))
                    (car (read-from-string (or (funcall get "turn-list") "nil"))))))
    (when (funcall get "turn-open")
      (list (car (read-from-string (or (funcall get "open-calls") "nil")))))))

(defun mevedel-resume--history (store saved)
  "Return the provider history SAVED (its metadata) describes in STORE, or nil.
Nil when its file holds fewer messages than SAVED counts."
  (let ((file (mevedel-save-history-file store))
        (count (plist-get saved :count)))
    (when (file-readable-p file)
      (with-temp-buffer
        (set-buffer-multibyte nil)
        (insert-file-contents-literally file)
        (let ((messages (make-vector count nil)))
          (when (cl-loop for index below count
                         always (progn (skip-chars-forward "\n")
                                       (not (eobp)))
                         do (aset messages index
                                  (json-parse-buffer :object-type 'plist :null-object :null
                                                     :false-object :json-false)))
            (forward-line 1)
            (append (list :messages messages :saved count
                          :json (mevedel-gptel-history-json-from-lines
                                 (buffer-substring-no-properties (point-min) (point))))
                    (cl-loop for key in '(:id :wire :end :sent)
                             append (list key (plist-get saved key))))))))))

;;;; A turn cut by a crash

(defun mevedel-resume--recover (chat open-calls)
  "Settle the turn of CHAT that was running when Emacs stopped.
OPEN-CALLS are the (ID NAME ARGS) of the calls it was running."
  (mevedel-transcript-complete (mevedel-chat-data-buffer chat))
  (let* ((store (mevedel-session-store-handle (mevedel-chat-session chat)))
         (info (mevedel-core-store-info-get store)))
    (mevedel-chat-settle-open-calls
     chat open-calls
     (lambda (id name args)
       (or (run-hook-with-args-until-success 'mevedel-resume-recovered-result-functions
                                             store info id name args)
           "Cancelled: Emacs stopped before this call finished."))))
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (let ((end (point-max)))
      (when (and (> end (point-min)) (eq (get-text-property (1- end) 'gptel) 'response))
        (let ((start (or (previous-single-property-change end 'gptel) (point-min))))
          (put-text-property start end 'mevedel-incomplete t)))))
  (mevedel-chat-insert-notice chat 'interrupted
                              "Interrupted: Emacs stopped before this turn finished")
  (mevedel-save-checkpoint
   chat (mevedel-save-metadata chat '("turn-open" . "") '("open-calls" . ""))))

(define-obsolete-function-alias 'mevedel-chat-resume #'mevedel-resume-chat "0.2")

(provide 'mevedel-resume)
;;; mevedel-resume.el ends here
