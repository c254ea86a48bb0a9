;;; mevedel-tool-goal.el --- UpdateGoal: the model's word on the Goal  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; UpdateGoal (a specialist, standalone only, the root conversation's
;; only) is how the model says where the session's Goal stands:
;; `complete' with the evidence, which starts the independent check,
;; `blocked' with the reason, or `progress' with a note.  What each
;; does to the Goal is mevedel-goal.el's; the call touches nothing
;; else, so it is read-only for permissions and Plan mode.  Child
;; agents never see it: they work for a Goal, they do not end it.

;;; Code:

(require 'mevedel-tool-registry)
(require 'mevedel-pipeline)
(require 'mevedel-chat)
(require 'mevedel-goal)

(defconst mevedel-tool-goal-description
  "Say where the session's Goal stands.  status complete: the objective is met; note is \
the evidence (what you changed, how you checked it).  An independent verifier then checks \
it without your conversation; end your turn after the call.  Only its PASS completes the \
Goal; otherwise its findings come back to you.  status blocked: you cannot go on without \
the user; note says why.  status progress: note records where you stand.  Manual: \
mevedel://goals.md."
  "What the model reads about UpdateGoal.")

(defun mevedel-tool-goal-run (args)
  "Apply the UpdateGoal ARGS to the Goal of the calling conversation."
  (let ((chat (mevedel-chat-of-buffer
               (plist-get (mevedel-pipeline-current-context) :data-buffer))))
    (if (mevedel-chat-p chat)
        (mevedel-goal-update chat (plist-get args :status) (plist-get args :note))
      "Error: UpdateGoal needs a session")))

(mevedel-define-tool "UpdateGoal"
  :standalone t
  :root-only t
  :category "goal"
  :description mevedel-tool-goal-description
  :summary "Goals: report the Goal complete (checked independently), blocked, or progress."
  :args ((status string :required "complete, blocked or progress."
                 :enum ("complete" "blocked" "progress"))
         (note string :required "The evidence, the reason or the progress."))
  :function #'mevedel-tool-goal-run
  :read-only-p t)

(provide 'mevedel-tool-goal)
;;; mevedel-tool-goal.el ends here
