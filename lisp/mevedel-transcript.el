;;; mevedel-transcript.el --- A data buffer's text and properties on disk  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A chat's data buffer (gptel's transcript) is saved in its session's
;; session.sqlite as a log of tail replacements (crates/mevedel-core/src/store/transcript.rs):
;; each save sends the text from the first position that changed since
;; the last save to the end of the buffer, with the properties gptel
;; and mevedel read back (`mevedel-transcript-properties').  Streaming
;; and tool results only ever change the tail, so a save costs what
;; changed, not the conversation.  The module copies the text and writes
;; it on its own thread; at quiet moments the log is consolidated, the
;; conversation is written for people (transcript.org, .md or .txt:
;; who said what, each tool call with its arguments and result) and the
;; exact text is copied beside it (transcript.resume).
;;
;; Restoring inserts the resume copy when it is provably the consolidated text
;; (crates/mevedel-core/src/store/readable.rs), else the log's text.  A chat resuming lazily
;; gets the properties of its last part at once and the rest from a
;; timer; `mevedel-transcript-complete' applies them on demand, and any
;; change to the buffer applies them first (docs/adr/0009-*).
;;
;; A failed write arrives as a `store-failure' event: the buffer is then
;; marked unsaved from its start, so the next save rewrites it whole,
;; and nothing in memory is lost.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)

(defgroup mevedel-transcript nil
  "How conversations are saved."
  :group 'mevedel
  :prefix "mevedel-transcript-")

(defconst mevedel-transcript-properties
  '(gptel mevedel-notice mevedel-incomplete mevedel-mail mevedel-compacted mevedel-tool-media
          mevedel-history-end mevedel-handle)
  "Text properties of a data buffer that are saved with its text.
gptel's `gptel' marks responses, tool calls and ignored text; the
others are mevedel's notices, cut responses, mail, turns replaced by
a summary in what the model is sent, the references of tool
results' images (mevedel-tool-media.el), where the saved provider
history ends (mevedel-gptel.el) and the rows only the view shows
\(`mevedel-chat-append-handle').")

(defvar-local mevedel-transcript--dirty nil
  "First position changed since the last save, or nil when saved.")

(defvar-local mevedel-transcript--store nil
  "The session store this buffer saves to, or nil when not tracked.")

(defvar-local mevedel-transcript--pending nil
  "Property chunks of the restored text not applied yet, latest-ending first.
Each is (FROM . PRINTED), as `mevedel-core-transcript-load' gives them.")

(defvar-local mevedel-transcript--complete-from nil
  "Position from which on the restored text has all its properties.")

(defvar-local mevedel-transcript--timer nil
  "Timer applying the pending properties, or nil.")

(defmacro mevedel-transcript--without-gc (bytes &rest body)
  "Run BODY, which conses about BYTES of short-lived strings, without GC.
The text crosses into the module in chunks, each a new string; at the
default `gc-cons-threshold' a 20 MB conversation would collect garbage
some 25 times on the way."
  (declare (indent 1))
  `(let ((gc-cons-threshold (max gc-cons-threshold (* 2 ,bytes))))
     ,@body))

(defun mevedel-transcript--changed (beg _end _length)
  "Note that the text from BEG on changed (`after-change-functions')."
  (setq mevedel-transcript--dirty (min beg (or mevedel-transcript--dirty beg))))

(defun mevedel-transcript-track (buffer store &optional saved)
  "Keep BUFFER saved in STORE from now on.
SAVED non-nil means BUFFER's text is what STORE holds already;
otherwise the next save writes all of it."
  (with-current-buffer buffer
    (setq mevedel-transcript--store store
          mevedel-transcript--dirty (unless saved (point-min)))
    (add-hook 'before-change-functions #'mevedel-transcript--before-change nil t)
    (add-hook 'after-change-functions #'mevedel-transcript--changed nil t)))

(defun mevedel-transcript-untrack (buffer)
  "Stop saving BUFFER: its text is only looked at from now on."
  (with-current-buffer buffer
    (setq mevedel-transcript--store nil
          mevedel-transcript--dirty nil)))

(defun mevedel-transcript-tracked-p (buffer)
  "Return non-nil when BUFFER is kept saved in a session store."
  (and (buffer-live-p buffer) (buffer-local-value 'mevedel-transcript--store buffer) t))

(defun mevedel-transcript-dirty-p (buffer)
  "Return non-nil when BUFFER has text not yet saved."
  (and (buffer-local-value 'mevedel-transcript--dirty buffer) t))

(defun mevedel-transcript--properties (from to)
  "Return the saved properties between FROM and TO as a flat list.
It is (START END NAME VALUE ...), bounds relative to FROM."
  (let ((props nil))
    (dolist (name mevedel-transcript-properties)
      (let ((pos from))
        (while (< pos to)
          (let ((next (next-single-property-change pos name nil to))
                (value (get-text-property pos name)))
            (when value
              (setq props (cons value (cons name (cons (- next from) (cons (- pos from) props))))))
            (setq pos next)))))
    (nreverse props)))

(defun mevedel-transcript-save (buffer)
  "Queue a save of BUFFER's unsaved text; return non-nil if there was any."
  (with-current-buffer buffer
    (when-let* ((store mevedel-transcript--store)
                (from mevedel-transcript--dirty))
      (save-restriction
        (widen)
        (let ((from (max (point-min) (min from (point-max)))))
          (mevedel-transcript-complete buffer from)
          (save-restriction
            (narrow-to-region from (point-max))
            (mevedel-transcript--without-gc (- (position-bytes (point-max)) (position-bytes from))
              (mevedel-core-transcript-save
               store (- from 1)
               (let ((print-escape-newlines t) (print-length nil) (print-level nil))
                 (prin1-to-string (mevedel-transcript--properties from (point-max)))))))))
      (setq mevedel-transcript--dirty nil)
      t)))

(defun mevedel-transcript-save-all (buffer)
  "Queue a save of all of BUFFER's text (e.g. after a failed write)."
  (with-current-buffer buffer
    (setq mevedel-transcript--dirty (point-min)))
  (mevedel-transcript-save buffer))

;;;; Properties applied after the text

(defconst mevedel-transcript--apply-seconds 0.01
  "Longest time the timer applies properties before Emacs does other work.")

(defun mevedel-transcript--apply-chunk ()
  "Apply the next pending chunk of properties to the current buffer."
  (pcase-let ((`(,from . ,printed) (pop mevedel-transcript--pending))
              (size (buffer-size))
              (inhibit-read-only t)
              (inhibit-modification-hooks t))
    (save-restriction
      (widen)
      (pcase-dolist (`(,start ,end ,name ,value) (car (read-from-string printed)))
        (when (< start size)
          (put-text-property (1+ start) (1+ (min end size)) name value))))
    (setq mevedel-transcript--complete-from (1+ from))))

(defun mevedel-transcript-complete (buffer &optional from)
  "Apply BUFFER's pending properties from FROM (default its start) on.
After this, the text from FROM to the end has every saved property."
  (with-current-buffer buffer
    (while (and mevedel-transcript--pending
                (> mevedel-transcript--complete-from (or from 1)))
      (mevedel-transcript--apply-chunk))
    (unless mevedel-transcript--pending
      (when (timerp mevedel-transcript--timer)
        (cancel-timer mevedel-transcript--timer))
      (setq mevedel-transcript--timer nil))))

(defun mevedel-transcript--complete-later (buffer)
  "Apply BUFFER's pending properties a few at a time on a timer."
  (with-current-buffer buffer
    (setq mevedel-transcript--timer
          (and mevedel-transcript--pending
               (run-at-time 0 nil #'mevedel-transcript--complete-some buffer)))))

(defun mevedel-transcript--complete-some (buffer)
  "Apply pending properties of BUFFER for a while, then let Emacs work."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (let ((deadline (+ (float-time) mevedel-transcript--apply-seconds)))
        (while (and mevedel-transcript--pending (< (float-time) deadline))
          (mevedel-transcript--apply-chunk)))
      (mevedel-transcript--complete-later buffer))))

(defun mevedel-transcript--before-change (_beg _end)
  "Apply the pending properties before a change to the text (a hook).
Their bounds count from the text as it was restored."
  (when mevedel-transcript--pending
    (mevedel-transcript-complete (current-buffer))))

(defun mevedel-transcript--insert-copy (file chars)
  "Insert FILE, the resume copy of CHARS characters; return non-nil if so.
Only the file is read: no handler, format or hook sees it."
  (let ((coding-system-for-read 'utf-8-unix)
        (file-name-handler-alist nil)
        (after-insert-file-functions nil)
        (format-alist nil))
    (and (ignore-error file-error (insert-file-contents file) t)
         (or (= (buffer-size) chars)
             (progn (erase-buffer) nil)))))

(defun mevedel-transcript-restore (buffer store &optional lazy)
  "Replace BUFFER's text with the transcript saved in STORE; track it.
The text is the session's resume copy when it is intact, else what
the log holds.  With LAZY non-nil, only the properties of the last
part are applied now: the rest are applied by a timer, or at once by
`mevedel-transcript-complete' (which every reader of the buffer
other than a view drawing its last turns must call).  Return non-nil
when STORE held any text."
  (mevedel-transcript--without-gc (* 64 1024 1024)
    (let ((loaded (mevedel-core-transcript-load store)))
      (with-current-buffer buffer
        (let ((inhibit-read-only t) (inhibit-modification-hooks t))
          (widen)
          (erase-buffer)
          (unless (and (plist-get loaded :copy)
                       (mevedel-transcript--insert-copy (plist-get loaded :copy)
                                                        (plist-get loaded :chars)))
            (unless (plist-get loaded :text)
              (setq loaded (mevedel-core-transcript-load store t)))
            (insert (plist-get loaded :text)))
          (set-buffer-modified-p nil))
        (setq mevedel-transcript--pending (plist-get loaded :chunks)
              mevedel-transcript--complete-from (point-max))
        (mevedel-transcript-track buffer store t)
        (if lazy
            (mevedel-transcript--complete-later buffer)
          (mevedel-transcript-complete buffer))
        (> (buffer-size) 0)))))

(defun mevedel-transcript-consolidate (buffer export)
  "Consolidate BUFFER's saved log into one record; write EXPORT.
EXPORT gets the conversation for people, and the resume copy goes
beside it.  All of it happens in the background."
  (when-let* ((store (buffer-local-value 'mevedel-transcript--store buffer)))
    (mevedel-core-transcript-consolidate store export)))

(defun mevedel-transcript-export-name (buffer directory &optional stem)
  "Return the conversation file's name for data BUFFER in DIRECTORY.
STEM names it (default \"transcript\"); its extension follows BUFFER's
mode: .org, .md or .txt."
  (expand-file-name
   (concat (or stem "transcript") "."
           (with-current-buffer buffer
             (cond ((derived-mode-p 'org-mode) "org")
                   ((derived-mode-p 'markdown-mode) "md")
                   (t "txt"))))
   directory))

;;;; Failures

(defvar mevedel-transcript-failure-functions nil
  "Abnormal hook run with a store file and a message when a save failed.
The buffers saving to that store are already marked unsaved.")

(defun mevedel-transcript--on-failure (data)
  "Handle a `store-failure' event DATA, (FILE MESSAGE)."
  (pcase-let ((`(,file ,message) data))
    (dolist (buffer (buffer-list))
      (when-let* ((store (buffer-local-value 'mevedel-transcript--store buffer))
                  ((equal (plist-get (mevedel-core-store-info store) :file) file)))
        (with-current-buffer buffer
          (setq mevedel-transcript--dirty (point-min)))))
    (display-warning 'mevedel (format "Saving the conversation failed (%s): %s; \
it stays in memory and is saved again at the next checkpoint" file message))
    (run-hook-with-args 'mevedel-transcript-failure-functions file message)))

(mevedel-core-register-event-handler 'store-failure #'mevedel-transcript--on-failure)

(provide 'mevedel-transcript)
;;; mevedel-transcript.el ends here
