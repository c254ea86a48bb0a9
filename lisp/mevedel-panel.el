;;; mevedel-panel.el --- The view's background work panel  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Above the composer of each view, the panel lists the work that goes
;; on without the model waiting for it: commands that yielded,
;; monitors, and child agents running or waiting for a slot
;; (`mevedel-ps-agent-items'), of every owner of the session.  Each item is one line (the
;; model's description, else the command; state; elapsed time; the
;; owner when it is not /root).  RET, TAB or a click expands an item in
;; place, without leaving the composer, to show its latest output and
;; the actions: open the whole output read-only, show the call that
;; started it, stop it.  Looking never consumes output the model has not
;; read.  An expanded agent offers to open its view or interrupt its
;; turn.  An ended item leaves the panel, unless it is expanded: then
;; it stays, marked with how it ended, until collapsed; an agent whose
;; turn settled always leaves (its row in the transcript tells how).  Beyond
;; `mevedel-panel-max-items' items, [Show all N] expands the panel in
;; place; [Manage] opens the session's table (`mevedel-ps').
;;
;; The panel follows the execution events at most once a second, and
;; while it shows running items a one-second timer keeps their elapsed
;; times current; a hidden view is redrawn when it is shown again.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-chat)
(require 'mevedel-ps)
(require 'mevedel-session)
(require 'mevedel-tool-exec)
(require 'mevedel-tool-render)
(require 'mevedel-view)

(defgroup mevedel-panel nil
  "The background work panel of session views."
  :group 'mevedel
  :prefix "mevedel-panel-")

(defcustom mevedel-panel-max-items 5
  "Most items the panel lists before offering [Show all N]."
  :type 'natnum)

(defcustom mevedel-panel-preview-lines 8
  "Most lines of output an expanded item shows."
  :type 'natnum)

(defface mevedel-panel-heading '((t :inherit shadow :weight bold))
  "Face of the panel's heading.")

(defface mevedel-panel-ended '((t :inherit shadow))
  "Face of items that have ended.")

(defconst mevedel-panel--refresh-interval 1.0
  "Fewest seconds between two redraws of a panel.")

;;;; Buffer-local state (in views)

(defvar-local mevedel-panel--expanded nil
  "Execution ID -> t for the items the user expanded.")
(defvar-local mevedel-panel--ended nil
  "Execution ID -> the item of an expanded execution that has ended.")
(defvar-local mevedel-panel--seen nil
  "Execution ID -> the last item drawn expanded, for when it ends.")
(defvar-local mevedel-panel--show-all nil "Non-nil when every item is listed.")
(defvar-local mevedel-panel--timer nil "The pending redraw, or nil.")
(defvar-local mevedel-panel--drawn 0 "When the panel was last drawn (a float time).")
(defvar-local mevedel-panel--stale nil "Non-nil when an event arrived while hidden.")

;;;; Items

(defun mevedel-panel-items (chat)
  "Return the background work of CHAT's session.
That is its yielded executions and its active agents.  Foreground
commands are not listed: their tool rows show them.  A child agent's
chat has only its own: those it started."
  (let ((items (append (and (featurep 'mevedel-dyn)
                            (cl-remove-if-not (lambda (item) (plist-get item :yielded))
                                              (mevedel-ps-items chat)))
                       (mevedel-ps-agent-items chat)))
        (agent (mevedel-chat-agent chat)))
    (if agent
        (cl-remove-if-not (lambda (item) (equal (plist-get item :owner) agent)) items)
      items)))

(defun mevedel-panel--label (item)
  "Return ITEM's one-line label."
  (pcase (plist-get item :kind)
    ("monitor" (plist-get item :label))
    ("agent" (concat "Agent " (plist-get item :label)))
    (_ (concat "$ " (plist-get item :label)))))

;;;; Drawing

(defvar-keymap mevedel-panel-item-map
  :doc "Keys on an item of the background work panel."
  "RET" #'mevedel-panel-toggle
  "TAB" #'mevedel-panel-toggle
  "<mouse-1>" #'mevedel-panel-toggle)

(defun mevedel-panel--button (label action &rest properties)
  "Return a button LABEL calling ACTION with the button, plus PROPERTIES."
  (apply #'make-text-button (concat "[" label "]") nil
         'action action 'follow-link t properties))

(defun mevedel-panel--item-text (item)
  "Return the text of ITEM: its line, and its details when expanded."
  (let* ((id (plist-get item :id))
         (ended (plist-get item :ended))
         (expanded (gethash id mevedel-panel--expanded))
         (owner (plist-get item :owner))
         (line (concat "  " (if expanded "▾ " "▸ ")
                       (mevedel-tool-render-shorten (mevedel-panel--label item) 60)
                       "  "
                       (propertize (or ended (plist-get item :state))
                                   'face (if ended 'mevedel-panel-ended 'mevedel-ps-live))
                       (if ended ""
                         (concat " " (mevedel-ps-duration (plist-get item :elapsed-ms))))
                       (if (and owner (not (equal owner "/root"))) (concat " · " owner) "")
                       "\n")))
    (concat
     (propertize line 'keymap mevedel-panel-item-map 'mouse-face 'highlight
                 'help-echo "RET: show or hide its output")
     (when expanded
       (if (mevedel-ps-agent-p item)
           (mevedel-panel--agent-details item)
         (mevedel-panel--execution-details item))))))

(defun mevedel-panel--execution-details (item)
  "Return the expanded details of the execution ITEM: its output and actions."
  (let ((id (plist-get item :id)))
    (concat
     (mapconcat (lambda (text) (concat "      " text "\n"))
                (or (plist-get item :preview) '("(no output yet)"))
                "")
     "      "
     (mevedel-panel--button "Open output"
                            (lambda (_) (mevedel-ps-show-output id (plist-get item :spool))))
     " "
     (mevedel-panel--button "Show call"
                            (let ((chat (mevedel-view-chat))
                                  (call (plist-get item :tool-use-id)))
                              (lambda (_)
                                (unless (and call (mevedel-view-show-call chat call))
                                  (user-error "The call that started %s is not in the conversation"
                                              id)))))
     " "
     (if (plist-get item :ended)
         (mevedel-panel--button "Collapse" (lambda (_) (mevedel-panel--collapse id)))
       (mevedel-panel--button "Stop" (lambda (_) (mevedel-panel--stop item))))
     "\n")))

(defun mevedel-panel--agent-details (item)
  "Return the expanded details of the agent ITEM: its counts and actions."
  (let ((n (plist-get item :tool-calls)))
    (concat "      " (format "%d tool call%s" n (if (= n 1) "" "s")) "\n"
            "      "
            (mevedel-panel--button "Open view" (lambda (_) (funcall (plist-get item :visit))))
            " "
            (mevedel-panel--button "Interrupt" (lambda (_) (mevedel-panel--stop item)))
            "\n")))

(defun mevedel-panel--preview (file)
  "Return the last lines of output FILE, as a list of one-line strings."
  (when-let* ((tail (mevedel-ps-tail file))
              ((not (string-empty-p tail))))
    (mapcar (lambda (line) (mevedel-tool-render-shorten line 100))
            (last (split-string (string-trim-right tail "\n") "\n")
                  mevedel-panel-preview-lines))))

(defun mevedel-panel--text (items)
  "Return the panel's text for ITEMS (expanded ended items included), or nil."
  (when items
    (let* ((n (length items))
           (shown (if (or mevedel-panel--show-all (<= n mevedel-panel-max-items))
                      items
                    (take mevedel-panel-max-items items))))
      (concat
       "\n"
       (propertize (format "Background work (%d)" n) 'face 'mevedel-panel-heading)
       "  "
       (mevedel-panel--button "Manage" (let ((chat (mevedel-view-chat)))
                                         (lambda (_) (mevedel-ps chat))))
       "\n"
       (mapconcat (lambda (item)
                    (propertize (mevedel-panel--item-text item)
                                'mevedel-panel-item (plist-get item :id)))
                  shown "")
       (when (< (length shown) n)
         (concat "  " (mevedel-panel--button (format "Show all %d" n)
                                             (lambda (_) (mevedel-panel--show-all t)))
                 "\n"))))))

(defun mevedel-panel--collect ()
  "Return the items for this view's panel, live ones first."
  (let* ((live (mevedel-panel-items (mevedel-view-chat)))
         (ids (mapcar (lambda (item) (plist-get item :id)) live)))
    (append
     (mapcar (lambda (item)
               (when (and (gethash (plist-get item :id) mevedel-panel--expanded)
                          (not (mevedel-ps-agent-p item)))
                 (setq item (plist-put item :preview
                                       (mevedel-panel--preview (plist-get item :spool))))
                 (puthash (plist-get item :id) item mevedel-panel--seen))
               item)
             live)
     (cl-loop for item being the hash-values of mevedel-panel--ended
              unless (member (plist-get item :id) ids) collect item))))

(defun mevedel-panel--window-spots ()
  "Return (WINDOW ID . COLUMN) for windows whose point is on a panel item."
  (cl-loop with (start . end) = (mevedel-view-panel-bounds)
           for window in (get-buffer-window-list (current-buffer) nil t)
           for point = (window-point window)
           for id = (and (>= point start) (< point end)
                         (get-text-property point 'mevedel-panel-item))
           when id
           collect (list window id (- point (save-excursion (goto-char point)
                                                            (line-beginning-position))))))

(defun mevedel-panel-redraw (&optional buffer)
  "Redraw the background work panel of view BUFFER (default current)."
  (with-current-buffer (or buffer (current-buffer))
    (when-let* ((chat (mevedel-view-chat))
                ((mevedel-view-panel-bounds))
                ((buffer-live-p (mevedel-chat-data-buffer chat))))
      (mevedel-panel--cancel-timer)
      (unless mevedel-panel--expanded
        (setq mevedel-panel--expanded (make-hash-table :test #'equal)
              mevedel-panel--ended (make-hash-table :test #'equal)
              mevedel-panel--seen (make-hash-table :test #'equal)))
      (let* ((items (mevedel-panel--collect))
             (spots (mevedel-panel--window-spots))
             (start (mevedel-view-replace-panel
                     (propertize (or (mevedel-panel--text items) "") 'mevedel-panel t))))
        (pcase-dolist (`(,window ,id ,column) spots)
          (let ((match (save-excursion
                         (goto-char start)
                         (text-property-search-forward 'mevedel-panel-item id t))))
            (when match
              (set-window-point window (min (+ (prop-match-beginning match) column)
                                            (prop-match-end match))))))
        (setq mevedel-panel--drawn (float-time)
              mevedel-panel--stale nil)
        (when (and (get-buffer-window (current-buffer) 'visible)
                   (cl-some (lambda (item) (not (plist-get item :ended))) items))
          (mevedel-panel--schedule mevedel-panel--refresh-interval))))))

;;;; Commands

(defun mevedel-panel--id-at (position)
  "Return the execution ID of the panel item at POSITION, or signal."
  (or (get-text-property position 'mevedel-panel-item)
      (user-error "No background work here")))

(defun mevedel-panel-toggle (&optional event)
  "Show or hide the output of the panel item at point (or at mouse EVENT)."
  (interactive (list last-nonmenu-event))
  (when (mouse-event-p event) (mouse-set-point event))
  (let ((id (mevedel-panel--id-at (point))))
    (if (gethash id mevedel-panel--expanded)
        (mevedel-panel--collapse id)
      (puthash id t mevedel-panel--expanded)
      (mevedel-panel-redraw))))

(defun mevedel-panel--collapse (id)
  "Hide the output of item ID; remove it from the panel if it ended."
  (remhash id mevedel-panel--expanded)
  (remhash id mevedel-panel--ended)
  (remhash id mevedel-panel--seen)
  (mevedel-panel-redraw))

(defun mevedel-panel--show-all (flag)
  "List every item when FLAG is non-nil, else the first few."
  (setq mevedel-panel--show-all flag)
  (mevedel-panel-redraw))

(defun mevedel-panel--stop (item)
  "Stop the execution of ITEM for the user, after confirmation.
An agent's turn is interrupted."
  (when (or (not mevedel-ps-confirm-stop)
            (y-or-n-p (format "%s %s (%s)? "
                              (if (mevedel-ps-agent-p item) "Interrupt" "Stop")
                              (plist-get item :id) (plist-get item :label))))
    (cond ((mevedel-ps-agent-p item) (funcall (plist-get item :stop)))
          ((mevedel-ps-stop-execution (mevedel-view-chat) (plist-get item :id))
           (message "Stopping %s" (plist-get item :id)))
          (t (message "%s had already ended" (plist-get item :id))))))

;;;; Following the executions

(defun mevedel-panel--cancel-timer ()
  "Cancel this view's pending panel redraw."
  (when (timerp mevedel-panel--timer)
    (cancel-timer mevedel-panel--timer))
  (setq mevedel-panel--timer nil))

(defun mevedel-panel--schedule (delay)
  "Redraw this view's panel in DELAY seconds, unless one is pending."
  (unless (timerp mevedel-panel--timer)
    (setq mevedel-panel--timer
          (run-at-time (max delay 0) nil #'mevedel-panel--timer-redraw (current-buffer)))))

(defun mevedel-panel--timer-redraw (buffer)
  "Redraw BUFFER's panel from its timer, when it is still shown."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (setq mevedel-panel--timer nil)
      (if (get-buffer-window buffer 'visible)
          (mevedel-panel-redraw)
        (setq mevedel-panel--stale t)))))

(defun mevedel-panel--views (session)
  "Return the live view buffers of the session whose key is SESSION.
Its child agents' views too: each shows its own background work."
  (when-let* ((chat (cl-find session (mevedel-chat-list) :key #'mevedel-ps-session-key
                             :test #'equal)))
    (mevedel-view-buffers (mevedel-chat-session chat))))

(defun mevedel-panel--on-event (data)
  "Schedule a redraw of the panels of the session named in event DATA."
  (dolist (buffer (mevedel-panel--views (plist-get data :session)))
    (with-current-buffer buffer
      (if (get-buffer-window buffer 'visible)
          (mevedel-panel--schedule (- (+ mevedel-panel--drawn mevedel-panel--refresh-interval)
                                      (float-time)))
        (setq mevedel-panel--stale t)))))

(defun mevedel-panel-note-change (session)
  "Redraw the panels of SESSION (its ID): work other than executions changed."
  (mevedel-panel--on-event (list :session session)))

(defun mevedel-panel--on-settled (data)
  "Keep the settled execution in DATA in its panels while expanded."
  (let ((id (plist-get data :id)))
    (dolist (buffer (mevedel-panel--views (plist-get data :session)))
      (with-current-buffer buffer
        (when-let* ((seen (and mevedel-panel--seen (gethash id mevedel-panel--seen))))
          (remhash id mevedel-panel--seen)
          (when (gethash id mevedel-panel--expanded)
            (puthash id (append (list :ended (mevedel-tool-exec-outcome-word (plist-get data :facts))
                                      :preview (or (mevedel-panel--preview (plist-get seen :spool))
                                                   (plist-get seen :preview)))
                                seen)
                     mevedel-panel--ended)))))
    (mevedel-panel--on-event data)))

(defun mevedel-panel--shown (_frame)
  "Redraw the panels of views that became visible with stale contents."
  (dolist (window (window-list nil 'no-minibuf))
    (let ((buffer (window-buffer window)))
      (when (buffer-local-value 'mevedel-panel--stale buffer)
        (mevedel-panel-redraw buffer)))))

(add-hook 'mevedel-tool-exec-progress-functions #'mevedel-panel--on-event)
(add-hook 'mevedel-tool-exec-settled-functions #'mevedel-panel--on-settled)
(add-hook 'mevedel-tool-exec-monitor-functions #'mevedel-panel--on-event)
(add-hook 'mevedel-view-open-functions #'mevedel-panel-redraw)
(add-hook 'window-buffer-change-functions #'mevedel-panel--shown)

(provide 'mevedel-panel)
;;; mevedel-panel.el ends here
