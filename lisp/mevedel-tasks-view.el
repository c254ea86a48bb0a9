;;; mevedel-tasks-view.el --- The task status fragment above the composer  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; While a task is open, the view's live zone ends with a compact
;; fragment of the session's tasks (mevedel-tasks.el):
;;
;;   ── tasks · 2 running · 1 blocked · 3 done ──
;;   note: migrating the schema
;;   ◐ Write the migration
;;   worker · ◐ Running the test suite
;;   reviewer
;;     note: halfway
;;     ○ Review the patch
;;     ◌ Sign off (waits on #4)
;;
;; Open tasks are ordered once, in progress, then pending, then
;; blocked; an owner's rows stay together at its best-ordered task.
;; The main session's rows have no label (its note comes first); an
;; owner with one open task is shown inline behind its dim label
;; (/root/ stripped), one with several under a dim header.  A running
;; agent-owned row shows its activeForm.  TAB or RET on the fragment
;; shows or hides the done section.  The fragment takes at most
;; `mevedel-tasks-view-height' of the window: rows past that are
;; counted in one last row (… 4 completed), open rows always before
;; completed ones, and a header left with nothing under it goes.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-tasks)
(require 'mevedel-chat)
(require 'mevedel-view)

(defcustom mevedel-tasks-view-height 0.4
  "Most of the window's height the task fragment takes, a fraction."
  :type 'number
  :group 'mevedel-tasks)

(defface mevedel-tasks-view-dim '((t :inherit shadow))
  "Face of owner labels, headers, notes and the count row.")

(defface mevedel-tasks-view-running '((t :inherit font-lock-constant-face))
  "Face of a running task's row.")

(defface mevedel-tasks-view-separator '((t :inherit shadow))
  "Face of the fragment's separator line.")

(defvar mevedel-tasks-view--show-done (make-hash-table :test #'eq :weakness 'key)
  "Hash table: session to non-nil when its done section is shown.")

;;;; The lines

(defun mevedel-tasks-view--rank (task)
  "Return TASK's display priority: 0 running, 1 pending, 2 blocked."
  (cond ((equal (plist-get task :status) "in_progress") 0)
        ((mevedel-tasks-blocked-p task) 2)
        (t 1)))

(defun mevedel-tasks-view--label (owner)
  "Return OWNER's short label: its path without /root/."
  (string-remove-prefix "/root/" owner))

(defun mevedel-tasks-view--row (task indent)
  "Return the (row . TEXT) line of open TASK, indented by INDENT."
  (let* ((rank (mevedel-tasks-view--rank task))
         (agent (mevedel-tasks-agent-path-p (plist-get task :owner)))
         (form (plist-get task :active-form))
         (text (if (and (= rank 0) agent form (not (string-empty-p form)))
                   form
                 (plist-get task :subject))))
    (concat indent
            (pcase rank (0 "◐ ") (1 "○ ") (_ "◌ "))
            (if (= rank 0) (propertize text 'face 'mevedel-tasks-view-running) text)
            (if (= rank 2)
                (propertize (format " (waits on %s)"
                                    (mapconcat (lambda (id) (format "#%d" id))
                                               (plist-get task :blocked-by) ", "))
                            'face 'mevedel-tasks-view-dim)
              ""))))

(defun mevedel-tasks-view--note (note indent)
  "Return the line of NOTE, indented by INDENT."
  (propertize (concat indent "note: " note) 'face 'mevedel-tasks-view-dim))

(defun mevedel-tasks-view--open-lines (open notes)
  "Return the lines of the OPEN tasks, sorted, with NOTES, as (KIND . TEXT).
KIND is `header', `note' or `row'."
  (let ((seen nil) (lines nil))
    (dolist (task open)
      (let ((owner (plist-get task :owner)))
        (unless (member owner seen)
          (push owner seen)
          (let ((own (cl-remove-if-not (lambda (task) (equal (plist-get task :owner) owner)) open))
                (note (cdr (assoc owner notes))))
            (cond
             ((equal owner "/root")
              (dolist (task own) (push (cons 'row (mevedel-tasks-view--row task "")) lines)))
             ((null (cdr own))
              (push (cons 'row (concat (propertize (concat (mevedel-tasks-view--label owner) " · ")
                                                   'face 'mevedel-tasks-view-dim)
                                       (mevedel-tasks-view--row (car own) "")))
                    lines)
              (when note (push (cons 'note (mevedel-tasks-view--note note "  ")) lines)))
             (t
              (push (cons 'header (propertize (mevedel-tasks-view--label owner)
                                              'face 'mevedel-tasks-view-dim))
                    lines)
              (when note (push (cons 'note (mevedel-tasks-view--note note "  ")) lines))
              (dolist (task own) (push (cons 'row (mevedel-tasks-view--row task "  ")) lines))))))))
    (nreverse lines)))

(defun mevedel-tasks-view--separator (open done width)
  "Return the separator line with the tallies of OPEN and DONE tasks, WIDTH wide."
  (let* ((running (cl-count 0 open :key #'mevedel-tasks-view--rank))
         (pending (cl-count 1 open :key #'mevedel-tasks-view--rank))
         (blocked (cl-count 2 open :key #'mevedel-tasks-view--rank))
         (text (concat "── tasks"
                       (mapconcat (pcase-lambda (`(,n . ,what))
                                    (if (> n 0) (format " · %d %s" n what) ""))
                                  `((,running . "running") (,pending . "pending")
                                    (,blocked . "blocked") (,done . "done"))
                                  "")
                       " ")))
    (propertize (concat text (make-string (max 2 (- width (string-width text))) ?─))
                'face 'mevedel-tasks-view-separator)))

(defun mevedel-tasks-view-lines (tasks notes &optional width max-rows show-done)
  "Return the fragment's lines for TASKS and NOTES, or nil when none is open.
WIDTH (default 80) bounds each line; MAX-ROWS (default: no bound)
bounds their number; SHOW-DONE non-nil adds the done section."
  (let* ((width (or width 80))
         (open (cl-stable-sort (cl-remove-if-not #'mevedel-tasks-open-p tasks) #'<
                               :key #'mevedel-tasks-view--rank))
         (done (cl-remove-if #'mevedel-tasks-open-p tasks)))
    (when open
      (let* ((main-note (and (cl-find "/root" open
                                      :key (lambda (task) (plist-get task :owner)) :test #'equal)
                             (cdr (assoc "/root" notes))))
             (body (append
                    (and main-note (list (cons 'note (mevedel-tasks-view--note main-note ""))))
                    (mevedel-tasks-view--open-lines open notes)
                    (and show-done done
                         (cons (cons 'header (propertize "done" 'face 'mevedel-tasks-view-dim))
                               (mapcar (lambda (task)
                                         (cons 'done
                                               (concat "  ✓ " (plist-get task :subject)
                                                       (propertize
                                                        (concat " · " (mevedel-tasks-view--label
                                                                       (plist-get task :owner)))
                                                        'face 'mevedel-tasks-view-dim))))
                                       done)))))
             (room (and max-rows (max 1 (1- max-rows)))))
        (when (and room (> (length body) room))
          (let* ((kept (seq-take body (1- room))))
            ;; A header or note left with no row under it goes.
            (while (and kept (memq (car (car (last kept))) '(header note)))
              (setq kept (butlast kept)))
            (let* ((omitted (nthcdr (length kept) body))
                   (open-left (cl-count 'row omitted :key #'car))
                   (done-left (if show-done (cl-count 'done omitted :key #'car) 0)))
              (setq body (append kept
                                 (list (cons 'count
                                             (propertize
                                              (concat "… "
                                                      (string-join
                                                       (delq nil
                                                             (list (and (> open-left 0)
                                                                        (format "%d more open"
                                                                                open-left))
                                                                   (and (> done-left 0)
                                                                        (format "%d completed"
                                                                                done-left))))
                                                       " · "))
                                              'face 'mevedel-tasks-view-dim))))))))
        (cons (mevedel-tasks-view--separator open (length done) width)
              (mapcar (lambda (line) (truncate-string-to-width (cdr line) width nil nil "…"))
                      body))))))

;;;; In the view

(defvar-keymap mevedel-tasks-view-map
  :doc "Keys on the task fragment."
  "TAB" #'mevedel-tasks-view-toggle-done
  "RET" #'mevedel-tasks-view-toggle-done)

(defun mevedel-tasks-view--insert (chat)
  "Insert the task fragment of CHAT's session at point, if a task is open.
A child agent's view shows only the tasks it owns.  A
`mevedel-view-live-functions' member."
  (let* ((session (mevedel-chat-session chat))
         (agent (mevedel-chat-agent chat))
         (own (lambda (owner) (or (not agent) (equal owner agent))))
         (window (get-buffer-window (current-buffer)))
         (lines (mevedel-tasks-view-lines
                 (cl-remove-if-not (lambda (task) (funcall own (plist-get task :owner)))
                                   (mevedel-tasks-list session))
                 (cl-remove-if-not (lambda (note) (funcall own (car note)))
                                   (mevedel-tasks-notes session))
                 (if window (1- (window-body-width window)) 80)
                 (if window (max 3 (floor (* mevedel-tasks-view-height (window-body-height window))))
                   12)
                 (gethash session mevedel-tasks-view--show-done))))
    (when lines
      (insert (propertize (concat "\n" (mapconcat #'identity lines "\n") "\n")
                          'keymap mevedel-tasks-view-map 'mevedel-tasks t)))))

(defun mevedel-tasks-view-toggle-done ()
  "Show or hide the completed tasks in the fragment at point."
  (interactive)
  (let* ((chat (or (and (derived-mode-p 'mevedel-view-mode) (mevedel-view-chat))
                   (user-error "Not a mevedel view")))
         (session (mevedel-chat-session chat)))
    (puthash session (not (gethash session mevedel-tasks-view--show-done))
             mevedel-tasks-view--show-done)
    (mevedel-view-redraw-live chat)
    (when-let* ((start (text-property-any (point-min) (point-max) 'mevedel-tasks t)))
      (goto-char (1+ start)))))

(defun mevedel-tasks-view--changed (session)
  "Redraw the fragment of SESSION's views, its child agents' too.
A `mevedel-tasks-change-functions' member."
  (dolist (view (mevedel-view-buffers session))
    (mevedel-view-redraw-live (mevedel-view-chat view))))

(add-hook 'mevedel-tasks-change-functions #'mevedel-tasks-view--changed)
(add-hook 'mevedel-view-live-functions #'mevedel-tasks-view--insert)

(provide 'mevedel-tasks-view)
;;; mevedel-tasks-view.el ends here
