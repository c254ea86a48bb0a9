;;; mevedel-interaction.el --- The one primitive of direct user interactions  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Every direct question to the user (a permission or grant card, a
;; patch review's card, Ask's questionnaire, a plan proposal, the
;; approval of a workspace hook or .mcp.json file) is an interaction:
;; this file owns only what they all share, and the one way a
;; workspace file's content is approved
;; (`mevedel-interaction-ask-file-approval').
;;
;;   identity      each open interaction has one overlay in the root
;;                 view's live zone; the overlay is the interaction's
;;                 place (`mevedel-interaction-at'), it carries the
;;                 owner's keymap, and redrawing the live zone moves it
;;                 rather than making a new one
;;   settlement    `mevedel-interaction-settle' runs the owner's
;;                 ON-SETTLE exactly once, whatever answers, cancels or
;;                 aborts first; later settlements return nil
;;   cancellation  each interaction belongs to a REQUEST (the root
;;                 turn, or an agent's invocation); cancelling a request
;;                 (`mevedel-interaction-cancel-request') settles only
;;                 its own interactions as `cancelled'
;;   frame         a blank line, a title line naming the interaction and, for one a
;;                 child asked, its canonical path (`/root/worker'),
;;                 then the owner's body
;;
;; Owners supply the body (RENDER, a function of the interaction
;; returning text), keys and outcome translation; the primitive never
;; interprets an outcome.  Interactions are listed per chat in opening
;; order; the view draws them at the end of its live zone and hears of
;; every change through `mevedel-interaction-change-functions'.  A tool
;; call's interactions are opened with `mevedel-chat-open-interaction',
;; which names the requester.

;;; Code:

(require 'cl-lib)
(require 'subr-x)

(defgroup mevedel-interaction nil
  "Direct questions to the user: cards, reviews, Ask, plan approval."
  :group 'mevedel
  :prefix "mevedel-interaction-")

(defface mevedel-interaction-frame '((t :inherit (bold font-lock-keyword-face)))
  "Face of an interaction's title line.")

(defface mevedel-interaction-owner '((t :inherit shadow))
  "Face of the requester's path on an interaction's title line.")

(defvar mevedel-interaction-change-functions nil
  "Abnormal hook run with a chat whenever its open interactions change.
The view redraws its live zone from it.")

(defvar mevedel-interaction-requester-functions nil
  "Abnormal hook run with a tool call's context until one returns non-nil.
The answer is (OWNER . REQUEST): OWNER the canonical path of the agent
whose request made the call, REQUEST that request's token.  The agents
runtime adds the lookup of its agents; no answer means the root
session's running turn.")

(defun mevedel-interaction-requester (context)
  "Return (OWNER . REQUEST) of the agent request behind a call's CONTEXT, or nil.
Nil means the root session: owner \"/root\", its running turn."
  (run-hook-with-args-until-success 'mevedel-interaction-requester-functions context))

(cl-defstruct (mevedel-interaction (:constructor mevedel-interaction--make)
                                   (:copier nil))
  "A direct question to the user."
  id kind chat owner request title render keymap on-settle
  overlay settled outcome
  ;; The owner's own state (the questionnaire, the proposal).
  data)

(defvar mevedel-interaction--open (make-hash-table :test #'eq :weakness 'key)
  "Hash table: chat to its open interactions, oldest first.")

(defvar mevedel-interaction--counter 0
  "The last interaction id handed out.")

(defun mevedel-interaction--notify (chat)
  "Tell the views of CHAT that its interactions changed."
  (run-hook-with-args 'mevedel-interaction-change-functions chat))

(cl-defun mevedel-interaction-open (chat &key kind owner request title render keymap
                                         on-settle data)
  "Open an interaction of KIND in CHAT and return it.
OWNER is the requester's canonical path (default \"/root\"); REQUEST
the token that `mevedel-interaction-cancel-request' cancels it by;
TITLE the frame's title; RENDER a function of the interaction
returning its body text; KEYMAP the keys on it; ON-SETTLE a function
of the interaction and the outcome, run exactly once; DATA the
owner's state."
  (let ((interaction (mevedel-interaction--make
                      :id (cl-incf mevedel-interaction--counter)
                      :kind kind :chat chat :owner (or owner "/root")
                      :request request :title title :render render
                      :keymap keymap :on-settle on-settle :data data)))
    (puthash chat (append (gethash chat mevedel-interaction--open) (list interaction))
             mevedel-interaction--open)
    (mevedel-interaction--notify chat)
    interaction))

(defun mevedel-interaction-list (chat)
  "Return CHAT's open interactions, oldest first."
  (gethash chat mevedel-interaction--open))

(defun mevedel-interaction-settle (interaction outcome)
  "Settle INTERACTION with OUTCOME; return non-nil if this settled it.
Only the first settlement counts: its owner's ON-SETTLE runs with
OUTCOME, the overlay goes and the views redraw."
  (unless (mevedel-interaction-settled interaction)
    (setf (mevedel-interaction-settled interaction) t
          (mevedel-interaction-outcome interaction) outcome)
    (let ((chat (mevedel-interaction-chat interaction)))
      (puthash chat (delq interaction (gethash chat mevedel-interaction--open))
               mevedel-interaction--open)
      (when-let* ((overlay (mevedel-interaction-overlay interaction)))
        (when-let* ((buffer (overlay-buffer overlay)))
          (with-current-buffer buffer
            (let ((inhibit-read-only t))
              (delete-region (overlay-start overlay) (overlay-end overlay)))))
        (delete-overlay overlay))
      (unwind-protect
          (when-let* ((on-settle (mevedel-interaction-on-settle interaction)))
            (funcall on-settle interaction outcome))
        (mevedel-interaction--notify chat)))
    t))

(defun mevedel-interaction-cancel-request (chat request)
  "Settle CHAT's open interactions of REQUEST as `cancelled'.
Interactions of other requests stay open.  Return how many settled."
  (let ((count 0))
    (dolist (interaction (copy-sequence (mevedel-interaction-list chat)))
      (when (and (eq (mevedel-interaction-request interaction) request)
                 (mevedel-interaction-settle interaction 'cancelled))
        (cl-incf count)))
    count))

;;;; Drawing

(defun mevedel-interaction--frame (interaction)
  "Return INTERACTION's title line."
  (let ((owner (mevedel-interaction-owner interaction)))
    (concat "\n"
            (propertize (or (mevedel-interaction-title interaction) "Question")
                        'face 'mevedel-interaction-frame)
            (unless (equal owner "/root")
              (propertize (concat " · " owner) 'face 'mevedel-interaction-owner))
            "\n")))

(defun mevedel-interaction-text (interaction)
  "Return INTERACTION's whole text: its frame and its owner's body."
  (concat (mevedel-interaction--frame interaction)
          (funcall (mevedel-interaction-render interaction) interaction)))

(defun mevedel-interaction-insert (interaction)
  "Insert INTERACTION's text at point and put its overlay over it."
  (let ((start (point)))
    (insert (mevedel-interaction-text interaction))
    (let ((overlay (mevedel-interaction-overlay interaction)))
      (if (and overlay (overlay-buffer overlay))
          (move-overlay overlay start (point) (current-buffer))
        (setq overlay (make-overlay start (point) nil t nil))
        (overlay-put overlay 'mevedel-interaction interaction)
        (overlay-put overlay 'keymap (mevedel-interaction-keymap interaction))
        (overlay-put overlay 'evaporate nil)
        (setf (mevedel-interaction-overlay interaction) overlay)))))

(defun mevedel-interaction-redraw (interaction)
  "Draw INTERACTION again in place, leaving the rest of the view alone.
Return the start of its text, or nil when it is not drawn."
  (when-let* ((overlay (mevedel-interaction-overlay interaction))
              (buffer (overlay-buffer overlay)))
    (with-current-buffer buffer
      (let ((inhibit-read-only t)
            (start (overlay-start overlay))
            (properties (text-properties-at (overlay-start overlay))))
        (save-excursion
          (goto-char start)
          (delete-region start (overlay-end overlay))
          (insert (mevedel-interaction-text interaction))
          (move-overlay overlay start (point))
          ;; Keep the live zone's own marks (read-only, live) on it.
          (add-text-properties start (point)
                               (cl-loop for (key value) on properties by #'cddr
                                        when (memq key '(read-only mevedel-live))
                                        append (list key value))))
        start))))

(defun mevedel-interaction-at (&optional position)
  "Return the interaction drawn at POSITION (default point), or nil."
  (cl-some (lambda (overlay) (overlay-get overlay 'mevedel-interaction))
           (overlays-at (or position (point)))))

(defun mevedel-interaction-start (interaction)
  "Return the start of INTERACTION's text, or nil when it is not drawn."
  (when-let* ((overlay (mevedel-interaction-overlay interaction))
              ((overlay-buffer overlay)))
    (overlay-start overlay)))

(defun mevedel-interaction-call-preserving-points (function)
  "Call FUNCTION, keeping window points inside interactions where they were.
A redraw of the whole live zone moves the interactions' text; a
window whose point was in one keeps its offset in that interaction."
  (let ((kept (delq nil
                    (mapcar (lambda (window)
                              (when-let* ((point (window-point window))
                                          (interaction (mevedel-interaction-at point)))
                                (list window interaction
                                      (- point (mevedel-interaction-start interaction)))))
                            (get-buffer-window-list nil nil t))))
        (here (when-let* ((interaction (mevedel-interaction-at)))
                (cons interaction (- (point) (mevedel-interaction-start interaction))))))
    (funcall function)
    (pcase-dolist (`(,window ,interaction ,offset) kept)
      (when-let* ((start (mevedel-interaction-start interaction)))
        (set-window-point window (+ start offset))))
    (when-let* ((start (and here (mevedel-interaction-start (car here)))))
      (goto-char (+ start (cdr here))))))

;;;; Approving a workspace file

(defvar mevedel-interaction-file-approval-functions nil
  "Abnormal hook run with (FILE QUESTION CALLBACK) until one asks in a view.
QUESTION is as `mevedel-interaction-ask-file-approval' takes it.  A
member returns nil when no view of FILE's workspace can show the
question, else it asks there, calls CALLBACK once with t, nil or
`cancelled' and returns non-nil.  mevedel-file-approval.el adds the
view's card; when no member asks, the minibuffer does.")

(defun mevedel-interaction-ask-file-approval (file question callback)
  "Ask QUESTION about the current content of FILE; tell CALLBACK.
CALLBACK gets t to approve it, nil to refuse, or `cancelled' when the
question went unanswered (the turn that waited was interrupted).
QUESTION is a plist: :kind (the interaction's kind), :title (the
question, as \"Run the hooks of FILE?\"), :does (what the content
does, as \"It runs, outside the sandbox:\"), :summary (the lines it
runs or starts), :refused (what refusing means) and :context (the
pipeline context of the tool call that waits, or nil).  A card in a
view of FILE's workspace asks (`mevedel-interaction-file-approval-functions');
without one the minibuffer does, from a timer, so that it never asks
inside a process filter.  Workspace hook files and .mcp.json files
are approved so."
  (unless (run-hook-with-args-until-success 'mevedel-interaction-file-approval-functions
                                            file question callback)
    (run-at-time
     0 nil
     (lambda ()
       (funcall callback
                (condition-case nil
                    (y-or-n-p (format "%s is new or changed.  %s\n%s\n%s? "
                                      (abbreviate-file-name file)
                                      (plist-get question :does)
                                      (plist-get question :summary)
                                      (string-remove-suffix "?" (plist-get question :title))))
                  (quit nil)))))))

(defun mevedel-interaction-read-approvals (file)
  "Return the approvals kept in FILE: (PATH . HASH) pairs, or nil.
A missing, unreadable or malformed FILE holds none."
  (and (file-readable-p file)
       (condition-case nil
           (with-temp-buffer
             (insert-file-contents file)
             (let ((value (read (current-buffer))))
               (and (listp value) value)))
         (error nil))))

(defun mevedel-interaction-record-approval (approvals path hash file what)
  "Return APPROVALS with PATH approved at content HASH; write them to FILE.
HASH nil forgets PATH's approval.  WHAT names the files approved, for
FILE's first line."
  (let ((approvals (assoc-delete-all path (copy-sequence approvals))))
    (when hash
      (push (cons path hash) approvals))
    (make-directory (file-name-directory file) t)
    (with-temp-file file
      (let ((print-length nil) (print-level nil))
        (insert (format ";; %s whose content the user approved.\n" what))
        (prin1 approvals (current-buffer))
        (insert "\n")))
    approvals))

(provide 'mevedel-interaction)
;;; mevedel-interaction.el ends here
