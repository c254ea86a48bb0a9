;;; mevedel-transcript.el --- A data buffer's text and properties on disk  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A chat's data buffer (gptel's transcript) is saved in its session's
;; session.sqlite as a log of tail replacements (src/store/transcript.rs):
;; each save sends the text from the first position that changed since
;; the last save to the end of the buffer, with the properties gptel
;; and mevedel read back (`mevedel-transcript-properties').  Streaming
;; and tool results only ever change the tail, so a save costs what
;; changed, not the conversation.  The module copies the text and writes
;; it on its own thread; at quiet moments the log is compacted and a
;; readable copy (transcript.org, .md or .txt) is refreshed beside it.
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
  '(gptel mevedel-notice mevedel-incomplete mevedel-mail mevedel-compacted)
  "Text properties of a data buffer that are saved with its text.
gptel's `gptel' marks responses, tool calls and ignored text; the
others are mevedel's notices, cut responses, mail and turns replaced
by a summary in what the model is sent.")

(defvar-local mevedel-transcript--dirty nil
  "First position changed since the last save, or nil when saved.")

(defvar-local mevedel-transcript--store nil
  "The session store this buffer saves to, or nil when not tracked.")

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
    (add-hook 'after-change-functions #'mevedel-transcript--changed nil t)))

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

(defun mevedel-transcript-restore (buffer store)
  "Replace BUFFER's text with the transcript saved in STORE; track it.
Return non-nil when STORE held any text."
  (mevedel-transcript--without-gc (* 64 1024 1024)
    (pcase-let ((`(,text . ,props) (mevedel-core-transcript-load store)))
      (with-current-buffer buffer
        (let ((inhibit-read-only t) (inhibit-modification-hooks t))
          (widen)
          (erase-buffer)
          (insert text)
          (let ((size (buffer-size)))
            (pcase-dolist (`(,start ,end ,name ,value) (car (read-from-string props)))
              (when (< start size)
                (put-text-property (1+ start) (1+ (min end size)) name value))))
          (set-buffer-modified-p nil))
        (mevedel-transcript-track buffer store t)
        (> (length text) 0)))))

(defun mevedel-transcript-compact (buffer export)
  "Compact BUFFER's saved log, then write the readable copy EXPORT.
Both happen in the background."
  (when-let* ((store (buffer-local-value 'mevedel-transcript--store buffer)))
    (mevedel-core-transcript-compact store export)))

(defun mevedel-transcript-export-name (buffer directory)
  "Return the readable copy's file name for data BUFFER in DIRECTORY.
Its extension follows BUFFER's mode: .org, .md or .txt."
  (expand-file-name
   (concat "transcript."
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
