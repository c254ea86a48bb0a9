;;; tasks-bench.el --- Drawing the task fragment  -*- lexical-binding: t; -*-

;;; Commentary:

;; 200 tasks over 12 owners (the main session, ten agents and a
;; bucket; a third completed, some blocked, every agent with a note)
;; in a shown view.  Measured: redrawing the live zone, which draws the
;; fragment (`mevedel-view-redraw-live', what a TaskWrite result or an
;; agent's settlement runs).

;;; Code:

(require 'mevedel)
(require 'mevedel-bench-lib)
(require 'mevedel-test-helpers)
(mevedel--load)

(let* ((root (file-name-as-directory (make-temp-file "mevedel-tbench-" t)))
       (mevedel-save-sessions nil)
       ;; The ten agents owning tasks stand for retained ones.
       (mevedel-tasks-agent-known-functions (list (lambda (_session _path) t)))
       (view (mevedel root))
       (chat (mevedel-view-chat view))
       (session (mevedel-chat-session chat))
       (owners (append '("/root" "docs")
                       (cl-loop for a below 10 collect (format "/root/agent%d" a)))))
  (switch-to-buffer view)
  (mevedel-tasks-write
   session "/root"
   (list :tasks
         (vconcat
          (cl-loop for i below 200
                   collect (list :subject (format "Task %d: do the part of the work numbered %d" i i)
                                 :status (pcase (% i 3) (0 "completed") (1 "in_progress")
                                                (_ "pending"))
                                 :activeForm (format "Working on part %d" i)
                                 :owner (nth (% i 12) owners)
                                 :blockedBy (if (= (% i 7) 2) (vector (max 1 (- i 1))) []))))))
  (dolist (owner owners)
    (mevedel-tasks-write session "/root" (list :note (format "status of %s" owner)
                                               :noteOwner owner)))
  (let ((ms (* 1000 (mevedel-bench-median-per-call
                     5 50 (lambda () (mevedel-view-redraw-live chat))))))
    (mevedel-bench-describe "200 tasks over 12 owners (1/3 done, notes), 80x%d window, \
live zone redraw with the fragment, median of 5 x 50" (window-body-height))
    (mevedel-bench-report "task-fragment-200" ms "ms"))
  (kill-buffer view)
  (delete-directory root t))

;;; tasks-bench.el ends here
