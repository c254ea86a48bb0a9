;;; mevedel-ps.el --- The executions of a session, in a table  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; `M-x mevedel-ps' (or /ps in the composer) lists the executions of a
;; chat's session: every command and monitor still running, foreground
;; or yielded, whoever owns it.  An execution leaves the table when it
;; ends; its result stays on its tool row.  From the table the user can
;; show the tool call that started one (RET), see its details and live
;; output tail (i), type a line into its terminal (l), interrupt it (c),
;; stop it (k or s, after confirmation) or read its whole output so far
;; (o).  /stop ID in the composer stops one directly; a bare /stop stops
;; every execution of the session.
;;
;; The session's running and waiting child agents are listed too, from
;; `mevedel-ps-agents-functions' (mevedel-agent-view.el): RET, i or o
;; opens the agent's view, k, s or c interrupts its turn (k and s after
;; confirmation).  An agent leaves the table when its turn settles.
;;
;; Quitting Emacs (C-x C-c) while a turn, an execution or an agent
;; runs asks first, naming them; yes stops them and waits briefly for
;; their results before the sessions are saved on the way out.
;;
;; These are the user's controls: they do not go through the model's
;; tools and do not widen what the model may do, and reading the output
;; opens the spool file itself, so the model's unread output stays
;; unread.  The table follows the execution events (progress,
;; settlement, monitor lines), at most once a second, and while it
;; shows live items a one-second timer keeps their elapsed times
;; current; nothing polls while it is not shown.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'tabulated-list)
(require 'mevedel-core)
(require 'mevedel-chat)
(require 'mevedel-sandbox)
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
  "Face of notes about executions that have ended.")

(defface mevedel-ps-live '((t :inherit font-lock-constant-face))
  "Face of the state of running executions.")

(defconst mevedel-ps-refresh-interval 1.0
  "Fewest seconds between two refreshes of a table.")

(defconst mevedel-ps-tail-bytes 4096
  "Most bytes of an execution's latest output its details show.")

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
(defvar-local mevedel-ps--detail nil "(CHAT . ID): the execution these details show.")

(defvar mevedel-ps-agents-functions nil
  "Abnormal hook run with a chat until one returns its session's active agents.
They come as items, each a plist: :id (the agent's path) :kind
\"agent\" :owner :state :label :elapsed-ms :tool-calls, :visit (a
function showing the agent) and :stop (a function interrupting its
turn for the user).  The agents' view adds them, so the table works
without it; the background panel lists them too.")

(defun mevedel-ps-agent-items (chat)
  "Return the active agents of CHAT's session, as items."
  (run-hook-with-args-until-success 'mevedel-ps-agents-functions chat))

(defun mevedel-ps-agent-p (item)
  "Return non-nil when ITEM is an agent's, not an execution's."
  (equal (plist-get item :kind) "agent"))

;;;; Items

(defun mevedel-ps-session-key (chat)
  "Return the execution key of CHAT's session."
  (mevedel-session-id (mevedel-chat-session chat)))

(defun mevedel-ps-items (chat)
  "Return the running executions of CHAT's session.
Each is a plist: :id :kind :owner :state :command :description :label
:tty :elapsed-ms :bytes :yielded :events :tool-use-id :spool :sandbox
\(the boundary facts, nil until its launch is prepared)."
  (mapcar (lambda (item)
            (append (list :label (mevedel-ps-label item)) item))
          (and (featurep 'mevedel-dyn)
               (mevedel-core-exec-list (mevedel-ps-session-key chat)))))

(defun mevedel-ps-label (item)
  "Return the label of ITEM: a monitor's description, else description or command."
  (let ((description (plist-get item :description)))
    (if (equal (plist-get item :kind) "monitor")
        (concat "Watching: " (mevedel-tool-render-shorten (or description "") 200))
      (mevedel-tool-render-shorten
       (if (and description (not (string-blank-p description)))
           description
         (plist-get item :command))
       200))))

(defun mevedel-ps-duration (ms)
  "Return MS milliseconds as a short duration, or an empty string."
  (cond ((null ms) "")
        ((< ms 60000) (format "%.1fs" (/ ms 1000.0)))
        ((< ms 3600000) (format "%dm%02ds" (/ ms 60000) (/ (% ms 60000) 1000)))
        (t (format "%dh%02dm" (/ ms 3600000) (/ (% ms 3600000) 60000)))))

(defun mevedel-ps--entry (item)
  "Return the tabulated-list entry of ITEM."
  (if (mevedel-ps-agent-p item)
      (list (plist-get item :id)
            (vector "Agent" (plist-get item :id)
                    (propertize (plist-get item :state) 'face 'mevedel-ps-live)
                    (plist-get item :label) (or (plist-get item :owner) "")
                    (mevedel-ps-duration (plist-get item :elapsed-ms))
                    (format "%d calls" (plist-get item :tool-calls)) ""))
    (mevedel-ps--execution-entry item)))

(defun mevedel-ps--execution-entry (item)
  "Return the tabulated-list entry of the execution ITEM."
  (let ((monitor (equal (plist-get item :kind) "monitor")))
    (list (plist-get item :id)
          (vector (if monitor "Monitor" "Bash")
                  (plist-get item :id)
                  (propertize (concat (plist-get item :state)
                                      (cond ((and monitor (plist-get item :events))
                                             (format " (%d events)" (plist-get item :events)))
                                            ((not (plist-get item :yielded)) " (fg)"))
                                      (and (plist-get item :tty) " pty"))
                              'face 'mevedel-ps-live)
                  (plist-get item :label)
                  (or (plist-get item :owner) "")
                  (mevedel-ps-duration (plist-get item :elapsed-ms))
                  (file-size-human-readable (or (plist-get item :bytes) 0))
                  (mevedel-ps--boundary (plist-get item :sandbox))))))

(defun mevedel-ps--boundary (sandbox)
  "Return the boundary of the SANDBOX facts, marked when not the default."
  (if (null sandbox)
      ""
    (let ((name (symbol-name (plist-get sandbox :boundary))))
      (if (mevedel-tool-exec-sandbox-summary sandbox)
          (propertize name 'face 'warning)
        name))))

;;;; The mode

(defvar-keymap mevedel-ps-mode-map
  :doc "Keys of the executions table."
  "RET" #'mevedel-ps-show-entry
  "i" #'mevedel-ps-describe
  "l" #'mevedel-ps-send-line
  "c" #'mevedel-ps-interrupt
  "k" #'mevedel-ps-stop
  "s" #'mevedel-ps-stop
  "o" #'mevedel-ps-open-output)

(define-derived-mode mevedel-ps-mode tabulated-list-mode "mevedel-ps"
  "Major mode of the table of a session's executions.
On a line, \\<mevedel-ps-mode-map>\\[mevedel-ps-show-entry] shows the call that
started the execution, \\[mevedel-ps-describe] its details and latest output,
\\[mevedel-ps-send-line] types a line into its terminal, \\[mevedel-ps-interrupt] interrupts it,
\\[mevedel-ps-stop] stops it and \\[mevedel-ps-open-output] opens its output;
\\[revert-buffer] refreshes.

\\{mevedel-ps-mode-map}"
  (setq tabulated-list-format
        [("Kind" 8 t) ("ID" 10 t) ("State" 18 t) ("Command" 36 t) ("Owner" 10 t)
         ("Elapsed" 9 t :right-align t) ("Output" 8 t :right-align t) ("Sandbox" 14 t)])
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
  (let ((items (and (buffer-live-p (mevedel-chat-data-buffer mevedel-ps--chat))
                    (append (mevedel-ps-items mevedel-ps--chat)
                            (mevedel-ps-agent-items mevedel-ps--chat)))))
    (setq mevedel-ps--items (make-hash-table :test #'equal))
    (dolist (item items)
      (puthash (plist-get item :id) item mevedel-ps--items))
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
  "Keep a shown table with live items current, once a second."
  (when (and (mevedel-ps--visible-p) (> (hash-table-count mevedel-ps--items) 0))
    (mevedel-ps--schedule mevedel-ps-refresh-interval)))

(defun mevedel-ps--shown (_window)
  "Refresh this table if events arrived while it was hidden."
  (when (and mevedel-ps--stale (mevedel-ps--visible-p))
    (mevedel-ps-refresh)))

(defvar mevedel-ps--details nil
  "Buffers in `mevedel-ps-detail-mode': the ones execution events may refresh.")

(defun mevedel-ps--refresh-detail (buffer)
  "Show BUFFER's execution details again, keeping its windows' places."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (setq mevedel-ps--timer nil)
      (let ((places (mapcar (lambda (window)
                              (list window (window-point window) (window-start window)))
                            (get-buffer-window-list buffer nil t))))
        (mevedel-ps--revert-detail)
        (pcase-dolist (`(,window ,point ,start) places)
          (set-window-start window (min start (point-max)) t)
          (set-window-point window (min point (point-max))))))))

(defun mevedel-ps--on-detail-event (key)
  "Refresh the shown details of executions of session KEY, once a second at most."
  (setq mevedel-ps--details (cl-remove-if-not #'buffer-live-p mevedel-ps--details))
  (dolist (buffer mevedel-ps--details)
    (with-current-buffer buffer
      (when (and mevedel-ps--detail (not mevedel-ps--timer)
                 (get-buffer-window buffer t)
                 (buffer-live-p (mevedel-chat-data-buffer (car mevedel-ps--detail)))
                 (equal (mevedel-ps-session-key (car mevedel-ps--detail)) key))
        (setq mevedel-ps--timer
              (run-at-time (max 0 (- (+ mevedel-ps--refreshed mevedel-ps-refresh-interval)
                                     (float-time)))
                           nil #'mevedel-ps--refresh-detail buffer))))))

(defun mevedel-ps--on-event (data)
  "Refresh the tables and details of the session named in the execution event DATA."
  (mevedel-ps--on-detail-event (plist-get data :session))
  (let ((key (plist-get data :session)))
    (dolist (buffer mevedel-ps--tables)
      (when (and (buffer-live-p buffer)
                 (eq (buffer-local-value 'major-mode buffer) 'mevedel-ps-mode))
        (with-current-buffer buffer
          (when (and mevedel-ps--chat
                     (buffer-live-p (mevedel-chat-data-buffer mevedel-ps--chat))
                     (equal (mevedel-ps-session-key mevedel-ps--chat) key))
            (if (not (mevedel-ps--visible-p))
                (setq mevedel-ps--stale t)
              ;; An event replaces a later tick.
              (when (and mevedel-ps--due
                         (> mevedel-ps--due
                            (+ mevedel-ps--refreshed mevedel-ps-refresh-interval)))
                (mevedel-ps--cancel-timer))
              (mevedel-ps--schedule (- (+ mevedel-ps--refreshed mevedel-ps-refresh-interval)
                                       (float-time))))))))))

(defun mevedel-ps-note-change (session)
  "Refresh the tables of SESSION (its ID): work other than executions changed."
  (mevedel-ps--on-event (list :session session)))

(add-hook 'mevedel-tool-exec-progress-functions #'mevedel-ps--on-event)
(add-hook 'mevedel-tool-exec-settled-functions #'mevedel-ps--on-event)
(add-hook 'mevedel-tool-exec-monitor-functions #'mevedel-ps--on-event)

;;;; Commands

(defun mevedel-ps--item-at-point ()
  "Return the item on the current line, or signal."
  (or (and mevedel-ps--items (gethash (tabulated-list-get-id) mevedel-ps--items))
      (user-error "No execution on this line")))

(defun mevedel-ps-show-entry ()
  "Show the tool call that started the execution at point in the chat view.
On an agent, show the agent's view."
  (interactive)
  (let* ((item (mevedel-ps--item-at-point))
         (id (plist-get item :tool-use-id)))
    (cond ((mevedel-ps-agent-p item) (funcall (plist-get item :visit)))
          ((not (and id (mevedel-view-show-call mevedel-ps--chat id)))
           (user-error "The call that started %s is not in the conversation"
                       (plist-get item :id))))))

(defun mevedel-ps-stop-execution (chat id)
  "Stop execution ID of CHAT's session for the user; return non-nil if it ran."
  (mevedel-core-exec-stop-by-user (mevedel-ps-session-key chat) id))

(defun mevedel-ps-stop ()
  "Stop the execution at point (TERM to its process group, then KILL).
On an agent, interrupt its turn."
  (interactive)
  (let ((item (mevedel-ps--item-at-point)))
    (when (or (not mevedel-ps-confirm-stop)
              (y-or-n-p (format "%s %s (%s)? "
                                (if (mevedel-ps-agent-p item) "Interrupt" "Stop")
                                (plist-get item :id) (plist-get item :label))))
      (cond ((mevedel-ps-agent-p item) (funcall (plist-get item :stop)))
            ((mevedel-ps-stop-execution mevedel-ps--chat (plist-get item :id))
             (message "Stopping %s" (plist-get item :id)))
            (t (message "%s had already ended" (plist-get item :id))))
      (mevedel-ps--schedule 0))))

(defun mevedel-ps--input (item chars)
  "Send CHARS to the execution of ITEM for the user."
  (condition-case err
      (mevedel-core-exec-input-by-user (mevedel-ps-session-key mevedel-ps--chat)
                                       (plist-get item :id) chars)
    (mevedel-core-exec-error (user-error "%s" (cadr err)))))

(defun mevedel-ps-send-line (line)
  "Type LINE and a newline into the terminal of the execution at point.
Only executions started with a terminal (tty) take input."
  (interactive
   (let ((item (mevedel-ps--item-at-point)))
     (unless (plist-get item :tty)
       (user-error "%s has no terminal; its input is closed" (plist-get item :id)))
     (list (read-string (format "Line for %s: " (plist-get item :id))))))
  (let ((item (mevedel-ps--item-at-point)))
    (mevedel-ps--input item (concat line "\n"))
    (message "Sent a line to %s" (plist-get item :id))))

(defun mevedel-ps-interrupt ()
  "Interrupt the execution at point, as Ctrl-C would.
Through its terminal when it has one, else SIGINT to its process group.
On an agent, interrupt its turn."
  (interactive)
  (let ((item (mevedel-ps--item-at-point)))
    (if (mevedel-ps-agent-p item)
        (funcall (plist-get item :stop))
      (mevedel-ps--input item "\x03")
      (message "Interrupted %s" (plist-get item :id)))
    (mevedel-ps--schedule 0)))

;;;; Details

(define-derived-mode mevedel-ps-detail-mode special-mode "mevedel-execution"
  "Major mode of one execution's details.
\\<mevedel-ps-detail-mode-map>\\[revert-buffer] shows them again."
  (setq-local revert-buffer-function #'mevedel-ps--revert-detail)
  (add-hook 'kill-buffer-hook #'mevedel-ps--cancel-timer nil t)
  (cl-pushnew (current-buffer) mevedel-ps--details))

(defun mevedel-ps-tail (file)
  "Return the last `mevedel-ps-tail-bytes' of FILE from a line start, or nil."
  (when (and file (file-readable-p file))
    (let ((size (file-attribute-size (file-attributes file))))
      (with-temp-buffer
        (let ((coding-system-for-read 'utf-8))
          (insert-file-contents file nil (max 0 (- size mevedel-ps-tail-bytes)) size))
        (goto-char (point-min))
        (when (and (> size mevedel-ps-tail-bytes) (search-forward "\n" nil t))
          (delete-region (point-min) (point)))
        (buffer-string)))))

(defun mevedel-ps--insert-field (name value)
  "Insert a details line NAME: VALUE."
  (insert (propertize (format "%-12s" (concat name ":")) 'face 'bold) value "\n"))

(defun mevedel-ps--sandbox-text (sandbox)
  "Return a line describing the SANDBOX facts of an execution."
  (if (null sandbox)
      "not started yet"
    (concat (symbol-name (plist-get sandbox :boundary))
            (and (plist-get sandbox :network) (format ", network %s" (plist-get sandbox :network)))
            (let ((writes (or (plist-get sandbox :extra-writes) 0)))
              (and (> writes 0) (format ", %d extra writable path%s" writes (if (= writes 1) "" "s"))))
            (and (plist-get sandbox :disclosure) (concat "; " (plist-get sandbox :disclosure))))))

(defun mevedel-ps--revert-detail (&rest _)
  "Show the details of this buffer's execution again."
  (let* ((chat (car mevedel-ps--detail))
         (id (cdr mevedel-ps--detail))
         (item (cl-find id (and (buffer-live-p (mevedel-chat-data-buffer chat))
                                (mevedel-ps-items chat))
                        :key (lambda (item) (plist-get item :id)) :test #'equal))
         (inhibit-read-only t))
    (setq mevedel-ps--refreshed (float-time))
    (erase-buffer)
    (if (null item)
        (insert (propertize (format "Execution %s has ended; its result is on its tool row.\n" id)
                            'face 'mevedel-ps-finished))
      (mevedel-ps--insert-field "Execution" id)
      (mevedel-ps--insert-field "Kind" (plist-get item :kind))
      (mevedel-ps--insert-field "State" (concat (plist-get item :state)
                                                (if (plist-get item :yielded) ", yielded"
                                                  ", foreground")))
      (mevedel-ps--insert-field "Owner" (plist-get item :owner))
      (mevedel-ps--insert-field "Terminal" (if (plist-get item :tty) "PTY" "pipes (stdin closed)"))
      (mevedel-ps--insert-field "Elapsed" (mevedel-ps-duration (plist-get item :elapsed-ms)))
      (mevedel-ps--insert-field "Output" (format "%d bytes" (or (plist-get item :bytes) 0)))
      (when (plist-get item :description)
        (mevedel-ps--insert-field "Description" (plist-get item :description)))
      (mevedel-ps--insert-field "Spool" (or (plist-get item :spool) ""))
      (mevedel-ps--insert-field "Sandbox" (mevedel-ps--sandbox-text (plist-get item :sandbox)))
      (insert (propertize "Command:" 'face 'bold) "\n" (plist-get item :command) "\n\n"
              (propertize "Latest output:" 'face 'bold) "\n"
              (or (mevedel-ps-tail (plist-get item :spool)) "")))
    (goto-char (point-min))
    (set-buffer-modified-p nil)))

(defun mevedel-ps-describe ()
  "Show the details and latest output of the execution at point.
Reading the output file leaves the model's unread output unread.  On
an agent, show the agent's view."
  (interactive)
  (let ((item (mevedel-ps--item-at-point)))
    (if (mevedel-ps-agent-p item)
        (funcall (plist-get item :visit))
      (let ((chat mevedel-ps--chat)
            (buffer (get-buffer-create (format "*mevedel execution: %s*" (plist-get item :id)))))
        (with-current-buffer buffer
          (mevedel-ps-detail-mode)
          (setq mevedel-ps--detail (cons chat (plist-get item :id)))
          (mevedel-ps--revert-detail))
        (display-buffer buffer)
        buffer))))

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

(defun mevedel-ps-show-output (id file)
  "Show the output FILE of execution ID read-only; return its buffer.
This reads the file; the model's unread output stays unread."
  (unless (and file (file-readable-p file))
    (user-error "The output of %s is no longer kept" id))
  (let ((buffer (get-buffer-create (format "*mevedel output: %s*" id))))
    (with-current-buffer buffer
      (mevedel-ps-output-mode)
      (setq mevedel-ps--output-file file)
      (mevedel-ps--revert-output)
      (goto-char (point-min)))
    (pop-to-buffer buffer)
    buffer))

(defun mevedel-ps-open-output ()
  "Open the whole output of the execution at point, read-only.
This reads the output file; the model's unread output stays unread.
On an agent, show the agent's view."
  (interactive)
  (let ((item (mevedel-ps--item-at-point)))
    (if (mevedel-ps-agent-p item)
        (funcall (plist-get item :visit))
      (mevedel-ps-show-output (plist-get item :id) (plist-get item :spool)))))

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
every owner); an execution leaves it when it ends."
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

;;;; Composer commands

(defun mevedel-ps-live-ids (chat)
  "Return the IDs of the running executions of CHAT's session."
  (mapcar (lambda (item) (plist-get item :id)) (mevedel-ps-items chat)))

(defun mevedel-ps-slash-ps (chat _argument)
  "Show the executions of CHAT's session (the composer's /ps)."
  (mevedel-ps chat))

(defun mevedel-ps-stop-candidates (chat)
  "Return what /stop can name in CHAT's session: execution ids, agent paths."
  (append (mevedel-ps-live-ids chat)
          (mapcar (lambda (item) (plist-get item :id)) (mevedel-ps-agent-items chat))))

(defun mevedel-ps-slash-stop (chat argument)
  "Stop what ARGUMENT names in CHAT's session (/stop).
ARGUMENT holds execution ids, whose processes stop, and paths of
active agents, whose turns are interrupted.  An empty ARGUMENT stops
every running execution of the session, whoever owns it; agents are
interrupted only when named.  Return how many were running."
  (let* ((live (mevedel-ps-live-ids chat))
         (agents (mevedel-ps-agent-items chat))
         (agent-of (lambda (id) (cl-find id agents :key (lambda (a) (plist-get a :id))
                                         :test #'equal)))
         (ids (if (string-blank-p argument) live (split-string argument))))
    (unless ids
      (user-error "No execution is running in this session"))
    (dolist (id ids)
      (unless (or (member id live) (funcall agent-of id))
        (let ((running (mevedel-ps-stop-candidates chat)))
          (user-error "No running execution or active agent %s (running: %s)" id
                      (if running (string-join running ", ") "none")))))
    (let ((stopped 0) (interrupted 0))
      (dolist (id ids)
        (if-let* ((agent (funcall agent-of id)))
            (progn (funcall (plist-get agent :stop)) (cl-incf interrupted))
          (when (mevedel-ps-stop-execution chat id) (cl-incf stopped))))
      (message "%s" (string-join
                     (delq nil (list (and (or (> stopped 0) (zerop interrupted))
                                          (format "Stopping %d execution%s" stopped
                                                  (if (= stopped 1) "" "s")))
                                     (and (> interrupted 0)
                                          (format "interrupted %d agent%s" interrupted
                                                  (if (= interrupted 1) "" "s")))))
                     "; "))
      (+ stopped interrupted))))

;;;; Quitting Emacs

(defconst mevedel-ps--quit-wait 3.0
  "Longest seconds quitting waits for stopped executions to settle.
Settled, their results (and output files) are recorded before the
sessions are saved on the way out.")

(defun mevedel-ps--running-work ()
  "Return (CHAT . NAMES) for each live chat with a turn or background work.
NAMES say what runs: the open turn, executions and active agents."
  (cl-loop for chat in (mevedel-chat-list)
           for names = (append
                        (and (mevedel-chat-busy-p chat)
                             (list (format "a turn of %s" (mevedel-chat-name chat))))
                        (mapcar (lambda (item)
                                  (format "%s %s (%s)"
                                          (pcase (plist-get item :kind)
                                            ("bash" "command")
                                            (kind kind))
                                          (plist-get item :id) (plist-get item :label)))
                                (append (mevedel-ps-items chat) (mevedel-ps-agent-items chat))))
           when names collect (cons chat names)))

(defun mevedel-ps-quit-query ()
  "Ask before Emacs quits with a session's turn or background work going on.
A `kill-emacs-query-functions' member.  The question names what runs;
yes aborts the turns, interrupts the agents and stops the executions,
waits a little for them to settle so that their results are recorded
and saved with the sessions, and lets Emacs quit."
  (let ((work (mevedel-ps--running-work)))
    (or (null work)
        (when (yes-or-no-p (format "A mevedel session is still running %s.  Stop it and quit? "
                                   (string-join (mapcan (lambda (w) (copy-sequence (cdr w))) work)
                                                ", ")))
          (pcase-dolist (`(,chat . ,_) work)
            (mevedel-chat-abort chat)
            (dolist (agent (mevedel-ps-agent-items chat))
              (funcall (plist-get agent :stop)))
            (dolist (id (mevedel-ps-live-ids chat))
              (mevedel-ps-stop-execution chat id)))
          (let ((deadline (+ (float-time) mevedel-ps--quit-wait)))
            (while (and (mevedel-ps--running-work) (< (float-time) deadline))
              (accept-process-output nil 0.05)))
          t))))

(add-hook 'kill-emacs-query-functions #'mevedel-ps-quit-query)

;;;; In the view

(keymap-set mevedel-view-mode-map "C-c C-e" #'mevedel-ps)
(mevedel-view-register-slash-command "ps"
  #'mevedel-ps-slash-ps "show the session's running executions")
(mevedel-view-register-slash-command "stop"
  #'mevedel-ps-slash-stop
  "stop execution ID or interrupt agent PATH (/stop ID), or stop all executions (/stop)"
  #'mevedel-ps-stop-candidates)

(provide 'mevedel-ps)
;;; mevedel-ps.el ends here
