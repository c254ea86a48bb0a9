;;; mevedel-ps.el --- The executions of a session, in a table  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; `M-x mevedel-ps' lists the executions of a chat's session: every
;; command and monitor still running (foreground or yielded, whoever
;; owns it) and those that ended in the last minute.  From the table
;; the user can show the tool call that started one (RET), stop one
;; (k or s, after confirmation) or read its whole output so far (o).
;;
;; These are the user's controls: they do not go through the model's
;; tools, and reading the output opens the spool file itself, so the
;; model's unread output stays unread.  The table follows the
;; execution events (progress, settlement, monitor lines), at most once
;; a second, and while live items exist a one-second timer keeps their
;; elapsed times current; nothing polls while it is not shown.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'tabulated-list)
(require 'mevedel-core)
(require 'mevedel-chat)
(require 'mevedel-session)
(require 'mevedel-tool-exec)
(require 'mevedel-view)

(defgroup mevedel-ps nil
  "The table of a session's executions."
  :group 'mevedel
  :prefix "mevedel-ps-")

(defcustom mevedel-ps-confirm-stop t
  "Non-nil means ask before stopping an execution from the table."
  :type 'boolean)

(defface mevedel-ps-finished '((t :inherit shadow))
  "Face of executions that have ended.")

(defface mevedel-ps-live '((t :inherit font-lock-constant-face))
  "Face of the state of running executions.")

(defconst mevedel-ps-refresh-interval 1.0
  "Fewest seconds between two refreshes of a table.")

;;;; Buffer-local state

(defvar mevedel-ps--tables nil
  "Buffers in `mevedel-ps-mode': the ones execution events may refresh.
Events arrive several times a second while commands run, so they visit
this list rather than every buffer.")

(defvar-local mevedel-ps--chat nil "The chat whose executions this table shows.")
(defvar-local mevedel-ps--timer nil "The pending refresh, or nil.")
(defvar-local mevedel-ps--due nil "When the pending refresh runs (a float time).")
(defvar-local mevedel-ps--refreshed 0 "When the table was last refreshed (a float time).")
(defvar-local mevedel-ps--stale nil "Non-nil when an event arrived while hidden.")
(defvar-local mevedel-ps--items nil "Execution ID -> its item plist, for the commands.")
(defvar-local mevedel-ps--spools nil
  "Execution ID -> its output file, kept from its live rows for after it ends.")

;;;; Items

(defun mevedel-ps--session-key (chat)
  "Return the execution key of CHAT's session."
  (mevedel-session-id (mevedel-chat-session chat)))

(defun mevedel-ps-items (chat)
  "Return the executions of CHAT's session, live ones first.
Each is a plist: :id :kind :owner :state :label :elapsed-ms :bytes
:yielded :tool-use-id :spool :live, and :facts for ended ones."
  (let* ((key (mevedel-ps--session-key chat))
         (live (and (featurep 'mevedel-dyn) (mevedel-core-exec-list key)))
         (ids (mapcar (lambda (item) (plist-get item :id)) live)))
    (append
     (mapcar (lambda (item)
               (list :id (plist-get item :id) :kind (plist-get item :kind)
                     :owner (plist-get item :owner) :state (plist-get item :state)
                     :label (mevedel-ps--label item) :elapsed-ms (plist-get item :elapsed-ms)
                     :bytes (plist-get item :bytes) :yielded (plist-get item :yielded)
                     :events (plist-get item :events)
                     :tool-use-id (plist-get item :tool-use-id)
                     :spool (plist-get item :spool) :live t))
             live)
     (cl-loop for data in (mevedel-exec-recently-finished key)
              for facts = (plist-get data :facts)
              unless (member (plist-get data :id) ids)
              collect (list :id (plist-get data :id) :kind (plist-get data :kind)
                            :owner (plist-get data :owner)
                            :state (mevedel-exec-outcome-word facts)
                            :label (mevedel-ps--label data)
                            :elapsed-ms (plist-get facts :duration-ms)
                            :bytes (plist-get facts :bytes) :yielded (plist-get data :yielded)
                            :tool-use-id (plist-get data :tool-use-id)
                            :facts facts)))))

(defun mevedel-ps--label (item)
  "Return the label of ITEM: a monitor's description, else description or command."
  (let ((description (plist-get item :description)))
    (if (equal (plist-get item :kind) "monitor")
        (concat "Watching: " (mevedel-tool-render-shorten (or description "") 200))
      (mevedel-tool-render-shorten
       (if (and description (not (string-blank-p description)))
           description
         (plist-get item :command))
       200))))

(defun mevedel-ps--duration (ms)
  "Return MS milliseconds as a short duration, or an empty string."
  (cond ((null ms) "")
        ((< ms 60000) (format "%.1fs" (/ ms 1000.0)))
        ((< ms 3600000) (format "%dm%02ds" (/ ms 60000) (/ (% ms 60000) 1000)))
        (t (format "%dh%02dm" (/ ms 3600000) (/ (% ms 3600000) 60000)))))

(defun mevedel-ps--entry (item)
  "Return the tabulated-list entry of ITEM."
  (let* ((live (plist-get item :live))
         (face (if live 'default 'mevedel-ps-finished))
         (monitor (equal (plist-get item :kind) "monitor"))
         (state (concat (plist-get item :state)
                        (and live monitor (plist-get item :events)
                             (format " (%d events)" (plist-get item :events)))
                        (and live (not monitor) (not (plist-get item :yielded)) " (fg)"))))
    (list (plist-get item :id)
          (vector (propertize (if monitor "Monitor" "Bash") 'face face)
                  (propertize state 'face (if live 'mevedel-ps-live face))
                  (propertize (plist-get item :label) 'face face)
                  (propertize (or (plist-get item :owner) "") 'face face)
                  (propertize (mevedel-ps--duration (plist-get item :elapsed-ms)) 'face face)
                  (propertize (if (plist-get item :bytes)
                                  (file-size-human-readable (plist-get item :bytes))
                                "")
                              'face face)))))

;;;; The mode

(defvar-keymap mevedel-ps-mode-map
  :doc "Keys of the executions table."
  "RET" #'mevedel-ps-show-entry
  "k" #'mevedel-ps-stop
  "s" #'mevedel-ps-stop
  "o" #'mevedel-ps-open-output)

(define-derived-mode mevedel-ps-mode tabulated-list-mode "mevedel-ps"
  "Major mode of the table of a session's executions.
On a line, \\<mevedel-ps-mode-map>\\[mevedel-ps-show-entry] shows the call that
started the execution, \\[mevedel-ps-stop] stops it and
\\[mevedel-ps-open-output] opens its output; \\[revert-buffer] refreshes.

\\{mevedel-ps-mode-map}"
  (setq tabulated-list-format
        [("Kind" 8 t) ("State" 18 t) ("Command" 44 t) ("Owner" 10 t)
         ("Elapsed" 9 t :right-align t) ("Output" 8 t :right-align t)])
  (setq tabulated-list-padding 1)
  (add-hook 'tabulated-list-revert-hook #'mevedel-ps--update nil t)
  (add-hook 'window-buffer-change-functions #'mevedel-ps--shown nil t)
  (add-hook 'kill-buffer-hook #'mevedel-ps--cancel-timer nil t)
  (add-hook 'kill-buffer-hook #'mevedel-ps--forget nil t)
  (cl-pushnew (current-buffer) mevedel-ps--tables)
  (tabulated-list-init-header))

(defun mevedel-ps--forget ()
  "Take this buffer off `mevedel-ps--tables'."
  (setq mevedel-ps--tables (delq (current-buffer) mevedel-ps--tables)))

(defun mevedel-ps--update ()
  "Recompute this table's entries."
  (let ((items (if (buffer-live-p (mevedel-chat-data-buffer mevedel-ps--chat))
                   (mevedel-ps-items mevedel-ps--chat)
                 nil)))
    (setq mevedel-ps--items (make-hash-table :test #'equal))
    (let ((spools (make-hash-table :test #'equal)))
      (dolist (item items)
        (let* ((id (plist-get item :id))
               (spool (or (plist-get item :spool)
                          (and mevedel-ps--spools (gethash id mevedel-ps--spools)))))
          (when spool
            (puthash id spool spools)
            (setq item (plist-put item :spool spool)))
          (puthash id item mevedel-ps--items)))
      (setq mevedel-ps--spools spools))
    (setq tabulated-list-entries (mapcar #'mevedel-ps--entry items)
          mevedel-ps--refreshed (float-time)
          mevedel-ps--stale nil)))

(defun mevedel-ps-refresh (&optional buffer)
  "Redraw the executions table BUFFER (default the current buffer)."
  (with-current-buffer (or buffer (current-buffer))
    (mevedel-ps--cancel-timer)
    (mevedel-ps--update)
    (tabulated-list-print t)
    (mevedel-ps--schedule-tick)))

;;;; Refreshing

(defun mevedel-ps--cancel-timer ()
  "Cancel this table's pending refresh."
  (when (timerp mevedel-ps--timer)
    (cancel-timer mevedel-ps--timer))
  (setq mevedel-ps--timer nil
        mevedel-ps--due nil))

(defun mevedel-ps--visible-p ()
  "Return non-nil when this table is shown in a window."
  (get-buffer-window (current-buffer) 'visible))

(defun mevedel-ps--schedule (delay)
  "Refresh this table in DELAY seconds, unless a refresh is already due."
  (unless (timerp mevedel-ps--timer)
    (setq mevedel-ps--due (+ (float-time) (max delay 0))
          mevedel-ps--timer
          (run-at-time (max delay 0) nil #'mevedel-ps--timer-refresh (current-buffer)))))

(defun mevedel-ps--timer-refresh (buffer)
  "Refresh BUFFER from its timer, when it still exists."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (setq mevedel-ps--timer nil
            mevedel-ps--due nil)
      (if (mevedel-ps--visible-p)
          (mevedel-ps-refresh)
        (setq mevedel-ps--stale t)))))

(defun mevedel-ps--schedule-tick ()
  "Keep a shown table with live items current, once a second.
A table showing only ended items refreshes when the first expires."
  (when (mevedel-ps--visible-p)
    (let ((items (hash-table-values mevedel-ps--items)))
      (cond ((cl-some (lambda (item) (plist-get item :live)) items)
             (mevedel-ps--schedule mevedel-ps-refresh-interval))
            (items
             (mevedel-ps--schedule (max mevedel-ps-refresh-interval
                                        (- (+ (cl-loop for data in (mevedel-exec-recently-finished
                                                                   (mevedel-ps--session-key
                                                                    mevedel-ps--chat))
                                                       minimize (plist-get data :finished-at))
                                              mevedel-exec-recent-seconds)
                                           (float-time)))))))))

(defun mevedel-ps--shown (_window)
  "Refresh this table if events arrived while it was hidden."
  (when (and mevedel-ps--stale (mevedel-ps--visible-p))
    (mevedel-ps-refresh)))

(defun mevedel-ps--on-event (data)
  "Refresh the tables of the session named in the execution event DATA."
  (let ((key (plist-get data :session)))
    (dolist (buffer mevedel-ps--tables)
      (when (and (buffer-live-p buffer)
                 (eq (buffer-local-value 'major-mode buffer) 'mevedel-ps-mode))
        (with-current-buffer buffer
          (when (and mevedel-ps--chat
                     (buffer-live-p (mevedel-chat-data-buffer mevedel-ps--chat))
                     (equal (mevedel-ps--session-key mevedel-ps--chat) key))
            (if (not (mevedel-ps--visible-p))
                (setq mevedel-ps--stale t)
              ;; An event replaces a later tick.
              (when (and mevedel-ps--due
                         (> mevedel-ps--due
                            (+ mevedel-ps--refreshed mevedel-ps-refresh-interval)))
                (mevedel-ps--cancel-timer))
              (mevedel-ps--schedule (- (+ mevedel-ps--refreshed mevedel-ps-refresh-interval)
                                       (float-time))))))))))

(add-hook 'mevedel-exec-progress-functions #'mevedel-ps--on-event)
(add-hook 'mevedel-exec-settled-functions #'mevedel-ps--on-event)
(add-hook 'mevedel-exec-monitor-functions #'mevedel-ps--on-event)

;;;; Commands

(defun mevedel-ps--item-at-point ()
  "Return the item on the current line, or signal."
  (or (and mevedel-ps--items (gethash (tabulated-list-get-id) mevedel-ps--items))
      (user-error "No execution on this line")))

(defun mevedel-ps-show-entry ()
  "Show the tool call that started the execution at point in the chat view."
  (interactive)
  (let* ((item (mevedel-ps--item-at-point))
         (id (plist-get item :tool-use-id)))
    (unless (and id (mevedel-view-show-call mevedel-ps--chat id))
      (user-error "The call that started %s is not in the conversation" (plist-get item :id)))))

(defun mevedel-ps-stop ()
  "Stop the execution at point (TERM to its process group, then KILL)."
  (interactive)
  (let ((item (mevedel-ps--item-at-point)))
    (unless (plist-get item :live)
      (user-error "%s has already ended" (plist-get item :id)))
    (when (or (not mevedel-ps-confirm-stop)
              (y-or-n-p (format "Stop %s (%s)? " (plist-get item :id) (plist-get item :label))))
      (if (mevedel-core-exec-stop-by-user (mevedel-ps--session-key mevedel-ps--chat)
                                          (plist-get item :id))
          (message "Stopping %s" (plist-get item :id))
        (message "%s had already ended" (plist-get item :id)))
      (mevedel-ps--schedule 0))))

(defvar-local mevedel-ps--output-file nil "The spool file this output buffer shows.")

(define-derived-mode mevedel-ps-output-mode special-mode "mevedel-output"
  "Major mode of an execution's output, read-only.
\\<mevedel-ps-output-mode-map>\\[revert-buffer] reads the output file again."
  (setq-local revert-buffer-function #'mevedel-ps--revert-output)
  (setq truncate-lines nil))

(defun mevedel-ps--revert-output (&rest _)
  "Read this buffer's output file again, keeping point."
  (let ((inhibit-read-only t)
        (point (point)))
    (erase-buffer)
    (if (file-readable-p mevedel-ps--output-file)
        (let ((coding-system-for-read 'utf-8))
          (insert-file-contents mevedel-ps--output-file))
      (insert (propertize "The output file is gone (the execution was retired).\n"
                          'face 'mevedel-ps-finished)))
    (goto-char (min point (point-max)))
    (set-buffer-modified-p nil)))

(defun mevedel-ps-open-output ()
  "Open the whole output of the execution at point, read-only.
This reads the output file; the model's unread output stays unread."
  (interactive)
  (let* ((item (mevedel-ps--item-at-point))
         (file (plist-get item :spool)))
    (unless (and file (file-readable-p file))
      (user-error "The output of %s is no longer kept" (plist-get item :id)))
    (let ((buffer (get-buffer-create (format "*mevedel output: %s*" (plist-get item :id)))))
      (with-current-buffer buffer
        (mevedel-ps-output-mode)
        (setq mevedel-ps--output-file file)
        (mevedel-ps--revert-output)
        (goto-char (point-min)))
      (pop-to-buffer buffer)
      buffer)))

;;;; Entry point

(defun mevedel-ps--read-chat ()
  "Return the chat whose executions to show: the current one, else ask."
  (or (and (derived-mode-p 'mevedel-view-mode) (mevedel-view-chat))
      (and (derived-mode-p 'mevedel-ps-mode) mevedel-ps--chat)
      (mevedel-chat-get (mevedel-chat-workspace-root))
      (let ((chats (mevedel-chat-list)))
        (cond ((null chats) (user-error "No mevedel session is open"))
              ((null (cdr chats)) (car chats))
              (t (let ((name (completing-read "Executions of session: "
                                              (mapcar #'mevedel-chat-name chats) nil t)))
                   (cl-find name chats :key #'mevedel-chat-name :test #'equal)))))))

;;;###autoload
(defun mevedel-ps (&optional chat)
  "Show the executions of CHAT's session in a table; return its buffer.
CHAT defaults to the session of the current view or workspace.  The
table lists running commands and monitors (foreground and yielded, of
every owner) and those that ended in the last minute."
  (interactive)
  (let* ((chat (or chat (mevedel-ps--read-chat)))
         (buffer (get-buffer-create (format "*mevedel ps: %s*" (mevedel-chat-name chat)))))
    (with-current-buffer buffer
      (unless (derived-mode-p 'mevedel-ps-mode)
        (mevedel-ps-mode))
      (setq mevedel-ps--chat chat))
    (pop-to-buffer buffer)
    (mevedel-ps-refresh buffer)
    buffer))

(provide 'mevedel-ps)
;;; mevedel-ps.el ends here
