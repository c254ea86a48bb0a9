;;; mevedel-goal.el --- Goals: the root works toward an objective across turns  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A Goal is an objective the root conversation works toward across
;; turns, within budgets, until an independent check agrees it is
;; done.  One Goal per root session: /goal OBJECTIVE in a view (or
;; M-x mevedel-goal), `bin/mevedel --goal OBJECTIVE' headless.  The
;; objective is the first turn's prompt.
;;
;; States: `active' (the harness starts the next root turn whenever the
;; root is idle), `paused' (a budget ran out, a turn failed, the user
;; paused it, or Emacs restarted), `blocked' (the model said it cannot
;; go on), `complete' (the goal-review verifier said PASS) and
;; `cancelled'.  /goal pause, /goal resume and /goal cancel change it;
;; /goal alone says where it stands.
;;
;; Continuation.  When a root turn ends and the Goal is active, the
;; next turn starts on its own, marked in the transcript as an
;; automatic turn, after what comes first: queued user messages, then
;; background events (mevedel-mailbox.el).  A draft in the composer or
;; an open card holds it until the draft is sent or cleared and the
;; card answered.  Each root turn of an active Goal carries the Goal's
;; facts (objective, accepted plan, budget used) as a context update
;; appended to the conversation, never in the system text.
;;
;; Completion is checked, not claimed.  The model ends a Goal with
;; UpdateGoal (mevedel-tool-goal.el): `complete' starts the built-in
;; verifier with the workload goal-review, context none, told only the
;; objective, the accepted plan and the note; only VERDICT: PASS
;; completes the Goal.  Any other answer comes back to the root as the
;; next automatic turn, with the verifier's findings.
;;
;; Budgets: tokens, cost (US dollars, from the usage records' prices),
;; wall time while active and root turns (the first included).  The
;; usage of the Goal's root turns and of the agents working meanwhile
;; is charged once, from the session's usage records (mevedel-usage.el).
;; Crossing 50%, 80% and 100% is told to the root and to those agents;
;; at 100% the Goal pauses after the current turn.
;;
;; The Goal is saved in the session's metadata ("goal") and comes back
;; paused after a restart.
;;
;; What it does not do: run turns itself (mevedel-chat.el does), price
;; usage (mevedel-usage.el), or decide what the verifier may do (its
;; role, mevedel-agent-roles.el).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-agent)
(require 'mevedel-agent-roles)
(require 'mevedel-chat)
(require 'mevedel-interaction)
(require 'mevedel-mailbox)
(require 'mevedel-plan)
(require 'mevedel-prompt)
(require 'mevedel-resume)
(require 'mevedel-session)
(require 'mevedel-usage)
(require 'mevedel-view)

;;; Options

(defgroup mevedel-goal nil
  "Goals: the root works toward an objective across turns."
  :group 'mevedel
  :prefix "mevedel-goal-")

(defconst mevedel-goal-thresholds '(50 80 100)
  "The percentages of a budget whose crossing the model is told of.")

(defconst mevedel-goal-budget-names
  '((turns . "turns") (tokens . "tokens") (cost . "cost") (seconds . "time"))
  "Each budget and the word that names it.")

;;; State

(cl-defstruct (mevedel-goal (:constructor mevedel-goal--make) (:copier nil))
  "A session's Goal."
  objective
  ;; active, paused, blocked, complete or cancelled.
  (state 'active)
  ;; Why it is paused, blocked or ended (text), and the budget that
  ;; ran out (a key of `mevedel-goal-budget-names') when that is why.
  reason exhausted
  ;; Plist of limits: :turns :tokens :cost (dollars) :seconds.
  budgets
  ;; Root turns run while active, and their ids (usage attribution).
  (turns 0) turn-ids
  ;; When it was set (epoch ms), seconds spent active before the
  ;; current stretch, and when the current stretch began (float-time).
  started (seconds 0.0) active-since
  ;; Each verifier verdict, oldest first: PASS, FAIL, PARTIAL or none.
  verdicts
  ;; The running check's path (t while it starts), the findings the
  ;; next turn brings the root, and the last UpdateGoal note.
  review findings note
  ;; Crossings raised, as (BUDGET . PERCENT), and what holds the next
  ;; turn back (text), if anything.
  warned held
  ;; The budget used as the header shows it, made when the Goal
  ;; changes: the header is drawn far more often than usage is priced.
  shown)

(defvar mevedel-goal--goals (make-hash-table :test #'eq :weakness 'key)
  "Session -> its Goal.")

(defvar mevedel-goal--told (make-hash-table :test #'eq :weakness 'key)
  "Chat -> the crossings (BUDGET . PERCENT) it was told of.")

(defun mevedel-goal-of (session)
  "Return SESSION's Goal, or nil."
  (gethash session mevedel-goal--goals))

(defun mevedel-goal-live-p (goal)
  "Return non-nil when GOAL may still go on (active or paused)."
  (and goal (memq (mevedel-goal-state goal) '(active paused)) t))

(defun mevedel-goal--print (goal)
  "Return GOAL as a plist to save."
  (list :objective (mevedel-goal-objective goal)
        :state (mevedel-goal-state goal)
        :reason (mevedel-goal-reason goal)
        :exhausted (mevedel-goal-exhausted goal)
        :budgets (mevedel-goal-budgets goal)
        :turns (mevedel-goal-turns goal)
        :turn-ids (mevedel-goal-turn-ids goal)
        :started (mevedel-goal-started goal)
        :seconds (mevedel-goal--seconds goal)
        :verdicts (mevedel-goal-verdicts goal)
        :findings (mevedel-goal-findings goal)
        :note (mevedel-goal-note goal)
        :warned (mevedel-goal-warned goal)))

(defun mevedel-goal--read (plist)
  "Return the Goal saved as PLIST; an active one comes back paused."
  (let ((goal (mevedel-goal--make
               :objective (plist-get plist :objective)
               :state (plist-get plist :state)
               :reason (plist-get plist :reason)
               :exhausted (plist-get plist :exhausted)
               :budgets (plist-get plist :budgets)
               :turns (or (plist-get plist :turns) 0)
               :turn-ids (plist-get plist :turn-ids)
               :started (plist-get plist :started)
               :seconds (or (plist-get plist :seconds) 0.0)
               :verdicts (plist-get plist :verdicts)
               :findings (plist-get plist :findings)
               :note (plist-get plist :note)
               :warned (plist-get plist :warned))))
    (when (eq (mevedel-goal-state goal) 'active)
      (setf (mevedel-goal-state goal) 'paused
            (mevedel-goal-reason goal) "Emacs restarted; /goal resume goes on"))
    goal))

(defun mevedel-goal--save (session)
  "Save SESSION's Goal in its metadata, when the session is durable."
  (when-let* ((goal (mevedel-goal-of session))
              ((mevedel-session-durable-p session)))
    (condition-case err
        (mevedel-core-store-info-set (mevedel-session-store-handle session)
                                     `(("goal" . ,(mevedel-save-print (mevedel-goal--print goal)))))
      (error (display-warning 'mevedel (format "Cannot save the Goal: %s"
                                               (error-message-string err)))))))

(defun mevedel-goal--resume (chat)
  "Bring back the Goal saved with the resumed session of the root CHAT, paused.
A `mevedel-resume-functions' member."
  (unless (mevedel-chat-agent chat)
    (let* ((session (mevedel-chat-session chat))
           (text (and (mevedel-session-storage-p session)
                      (cdr (assoc "goal" (mevedel-core-store-info-get
                                          (mevedel-session-store-handle session)))))))
      (when (and text (not (string-empty-p text)))
        (condition-case nil
            (puthash session (mevedel-goal--read (car (read-from-string text)))
                     mevedel-goal--goals)
          (error nil))))))

(add-hook 'mevedel-resume-functions #'mevedel-goal--resume)

(defun mevedel-goal--changed (chat)
  "Save CHAT's Goal and tell CHAT's observers (event `goal')."
  (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat))))
    (setf (mevedel-goal-shown goal) (mevedel-goal-budget-text chat goal)))
  (mevedel-goal--save (mevedel-chat-session chat))
  (force-mode-line-update t)
  (mevedel-chat-notify chat 'goal (mevedel-goal-of (mevedel-chat-session chat))))

;;; Budgets

(defun mevedel-goal-parse-budget (text)
  "Return the budget TEXT names: (:cost DOLLARS) or (:tokens N).
\"2$\", \"$2.50\" are dollars; \"500k\", \"2M\", \"20000\" tokens."
  (let ((text (string-trim (or text ""))))
    (cond
     ((string-match "\\`\\$?\\([0-9]+\\(?:\\.[0-9]+\\)?\\)\\$?\\'" text)
      (let ((value (string-to-number (match-string 1 text))))
        (if (string-search "$" text)
            (list :cost (float value))
          (list :tokens (truncate value)))))
     ((string-match "\\`\\([0-9]+\\(?:\\.[0-9]+\\)?\\)\\([kKmM]\\)\\'" text)
      (list :tokens (truncate (* (string-to-number (match-string 1 text))
                                 (if (member (match-string 2 text) '("k" "K")) 1000 1000000)))))
     (t (user-error "Budget %S: give dollars (2$) or tokens (500k)" text)))))

(defun mevedel-goal-parse-time (text)
  "Return the seconds TEXT names: \"30m\", \"90s\", \"2h\", \"1h30m\".
A bare number is minutes."
  (let ((text (string-trim (or text ""))) (seconds 0) (start 0))
    (cond
     ((string-match-p "\\`[0-9]+\\(?:\\.[0-9]+\\)?\\'" text)
      (* 60 (string-to-number text)))
     ((string-match-p "\\`\\(?:[0-9]+\\(?:\\.[0-9]+\\)?[hms]\\)+\\'" text)
      (while (string-match "\\([0-9]+\\(?:\\.[0-9]+\\)?\\)\\([hms]\\)" text start)
        (cl-incf seconds (* (string-to-number (match-string 1 text))
                            (pcase (match-string 2 text) ("h" 3600) ("m" 60) (_ 1))))
        (setq start (match-end 0)))
      seconds)
     (t (user-error "Time %S: give it as 30m, 90s or 2h" text)))))

(defun mevedel-goal-parse-turns (text)
  "Return the positive number TEXT names, a turn budget."
  (let ((n (and (string-match-p "\\`[0-9]+\\'" (string-trim (or text "")))
                (string-to-number text))))
    (unless (and n (> n 0)) (user-error "Turns %S: give a positive number" text))
    n))

(defun mevedel-goal--seconds (goal)
  "Return the seconds GOAL has been active."
  (+ (mevedel-goal-seconds goal)
     (if-let* ((since (mevedel-goal-active-since goal))) (- (float-time) since) 0)))

(defun mevedel-goal--records (chat goal)
  "Return the usage records of CHAT's session charged to GOAL.
Those made in its root turns, by the root or by agents working for it
then (a record names the root turn it ran in), each charged once."
  (let ((turns (mevedel-goal-turn-ids goal)))
    (cl-remove-if-not (lambda (record) (member (or (plist-get record :root-turn) (plist-get record :turn)) turns))
                      (mevedel-usage-records chat))))

(defun mevedel-goal-usage (chat goal)
  "Return the usage of GOAL of CHAT, a plist.
Its keys are :turns :tokens :cost :seconds and :usage; :cost is nil
when no price is known, :usage is the summed usage plist."
  (let* ((records (mevedel-goal--records chat goal))
         (usage (mevedel-usage-sum records)))
    (list :turns (mevedel-goal-turns goal)
          :tokens (cl-loop for key in '(:input :output :cache-read :cache-write)
                           sum (or (plist-get usage key) 0))
          :cost (mevedel-usage-records-cost records)
          :seconds (mevedel-goal--seconds goal)
          :usage usage)))

(defun mevedel-goal--shares (chat goal)
  "Return ((BUDGET . PERCENT-USED) ...) of GOAL's budgets in CHAT."
  (let ((used (mevedel-goal-usage chat goal))
        (budgets (mevedel-goal-budgets goal)))
    (cl-loop for (budget . _) in mevedel-goal-budget-names
             for key = (intern (format ":%s" budget))
             for limit = (plist-get budgets key)
             for value = (plist-get used key)
             when (and limit (> limit 0) value)
             collect (cons budget (* 100.0 (/ value (float limit)))))))

(defun mevedel-goal--exhausted-budget (chat goal)
  "Return the first budget of GOAL that CHAT used up, or nil."
  (car (cl-find-if (lambda (share) (>= (cdr share) 100)) (mevedel-goal--shares chat goal))))

(defun mevedel-goal--crossings (chat goal)
  "Note GOAL's budgets CHAT crossed a threshold of; return all raised so far."
  (pcase-dolist (`(,budget . ,percent) (mevedel-goal--shares chat goal))
    (dolist (threshold mevedel-goal-thresholds)
      (when (and (>= percent threshold)
                 (not (member (cons budget threshold) (mevedel-goal-warned goal))))
        (setf (mevedel-goal-warned goal)
              (append (mevedel-goal-warned goal) (list (cons budget threshold)))))))
  (mevedel-goal-warned goal))

(defun mevedel-goal--format-amount (budget value)
  "Return VALUE of BUDGET briefly."
  (pcase budget
    ('cost (format "$%.2f" value))
    ('seconds (if (>= value 60) (format "%dm" (round (/ value 60.0))) (format "%ds" (round value))))
    (_ (format "%d" value))))

(defun mevedel-goal-budget-text (chat goal)
  "Return the use of each budget of GOAL of CHAT.
For example \"turns 2/3 · $0.10/$2.00\"."
  (let ((used (mevedel-goal-usage chat goal))
        (budgets (mevedel-goal-budgets goal)))
    (mapconcat
     #'identity
     (delq nil
           (cl-loop for (budget . name) in mevedel-goal-budget-names
                    for key = (intern (format ":%s" budget))
                    for limit = (plist-get budgets key)
                    for value = (plist-get used key)
                    when (or limit (memq budget '(turns tokens)))
                    collect (format "%s %s%s" name
                                    (if value (mevedel-goal--format-amount budget value) "?")
                                    (if limit
                                        (concat "/" (mevedel-goal--format-amount budget limit))
                                      ""))))
     " · ")))

;;; Telling the model

(defun mevedel-goal--warning (budget percent)
  "Return the model's warning that BUDGET crossed PERCENT."
  (format "Goal budget: %s %d%% used%s." (cdr (assq budget mevedel-goal-budget-names)) percent
          (if (>= percent 100)
              "; the Goal pauses when this turn ends: wrap up and say where you stand"
            "")))

(defun mevedel-goal--untold (chat goal)
  "Return the warnings of GOAL's crossings CHAT was not told of yet.
They count as told from now on."
  (let* ((raised (mevedel-goal--crossings chat goal))
         (told (gethash chat mevedel-goal--told))
         (new (cl-remove-if (lambda (crossing) (member crossing told)) raised)))
    (when new
      (puthash chat (append told new) mevedel-goal--told))
    (mapcar (lambda (crossing) (mevedel-goal--warning (car crossing) (cdr crossing))) new)))

(defun mevedel-goal-facts (chat goal)
  "Return the context-update block of GOAL's facts for CHAT's root turn."
  (let ((plan (mevedel-plan-current (mevedel-chat-session chat))))
    (mevedel-prompt-update-block
     "goal"
     (concat "A Goal is active: you work toward it across turns until it is done.\n"
             "Objective: " (mevedel-goal-objective goal) "\n"
             (if plan (concat "Accepted plan:\n" plan "\n") "")
             (format "This is root turn %d of the Goal.  Budget used: %s.\n"
                     (1+ (mevedel-goal-turns goal)) (mevedel-goal-budget-text chat goal))
             (mapconcat (lambda (warning) (concat warning "\n")) (mevedel-goal--untold chat goal) "")
             "When the objective is met, call UpdateGoal with status complete and the \
evidence as its note: an independent verifier checks it.  Call it with status blocked \
and the reason when you cannot go on, or progress with a note to record where you \
stand."))))

(defun mevedel-goal--turn-mail (chat)
  "Return the Goal's facts for CHAT's turn, a root turn of an active Goal.
A `mevedel-chat-message-functions' member."
  (unless (mevedel-chat-agent chat)
    (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat)))
                ((eq (mevedel-goal-state goal) 'active)))
      (list (mevedel-goal-facts chat goal)))))

(defun mevedel-goal--continuation-mail (chat)
  "Return the budget warnings CHAT's next sample should carry.
The root and every agent of the session hear each crossing once.
A `mevedel-chat-continuation-mail-functions' member."
  (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat)))
              ((eq (mevedel-goal-state goal) 'active))
              (warnings (mevedel-goal--untold chat goal)))
    (list (mevedel-prompt-update-block "goal" (string-join warnings "\n")))))

(add-hook 'mevedel-chat-message-functions #'mevedel-goal--turn-mail 80)
(add-hook 'mevedel-chat-continuation-mail-functions #'mevedel-goal--continuation-mail)

;;; Setting and changing a Goal

(defun mevedel-goal--check-root (chat)
  "Signal unless CHAT is a root conversation that may send."
  (when (mevedel-chat-agent chat)
    (user-error "Goals belong to the main conversation, not to %s" (mevedel-chat-agent chat)))
  (when (mevedel-chat-read-only chat)
    (user-error "This session is read-only here")))

(defun mevedel-goal--activate (goal)
  "Make GOAL active, its time running again."
  (setf (mevedel-goal-state goal) 'active
        (mevedel-goal-reason goal) nil
        (mevedel-goal-exhausted goal) nil
        (mevedel-goal-held goal) nil)
  (unless (mevedel-goal-active-since goal)
    (setf (mevedel-goal-active-since goal) (float-time))))

(defun mevedel-goal--stop-clock (goal)
  "Stop GOAL's time."
  (when-let* ((since (mevedel-goal-active-since goal)))
    (cl-incf (mevedel-goal-seconds goal) (- (float-time) since))
    (setf (mevedel-goal-active-since goal) nil)))

(defun mevedel-goal-start (chat objective &optional budgets)
  "Set OBJECTIVE as CHAT's Goal within BUDGETS; send it as the first turn.
BUDGETS is a plist of :turns :tokens :cost :seconds.  Return the Goal."
  (mevedel-goal--check-root chat)
  (let ((session (mevedel-chat-session chat))
        (objective (string-trim objective)))
    (when (string-empty-p objective) (user-error "The Goal needs an objective"))
    (when (mevedel-goal-live-p (mevedel-goal-of session))
      (user-error "This session has a Goal already: /goal cancel it first"))
    (when (mevedel-chat-busy-p chat)
      (user-error "A turn is running; set the Goal once it ends"))
    (let ((goal (mevedel-goal--make :objective objective :budgets budgets
                                    :started (truncate (* 1000 (float-time))))))
      (mevedel-goal--activate goal)
      (puthash session goal mevedel-goal--goals)
      (remhash chat mevedel-goal--told)
      (mevedel-goal--changed chat)
      (condition-case err
          (mevedel-chat-send chat objective
                             :on-done (lambda (chat outcome)
                                        (when (eq outcome 'blocked)
                                          (mevedel-goal-pause chat "a hook blocked its prompt"))))
        ;; Not sent (no usable backend): no Goal was set either.
        (error (remhash session mevedel-goal--goals)
               (signal (car err) (cdr err))))
      goal)))

(defun mevedel-goal-pause (chat &optional reason exhausted)
  "Pause CHAT's active Goal, saying REASON; EXHAUSTED names a spent budget."
  (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat)))
              ((eq (mevedel-goal-state goal) 'active)))
    (mevedel-goal--stop-clock goal)
    (setf (mevedel-goal-state goal) 'paused
          (mevedel-goal-reason goal) (or reason "paused by the user")
          (mevedel-goal-exhausted goal) exhausted
          (mevedel-goal-held goal) nil)
    (mevedel-goal--changed chat)
    goal))

(defun mevedel-goal-resume (chat)
  "Resume CHAT's paused or blocked Goal.
Its next turn starts when the root is idle."
  (mevedel-goal--check-root chat)
  (let ((goal (mevedel-goal-of (mevedel-chat-session chat))))
    (unless (and goal (memq (mevedel-goal-state goal) '(paused blocked)))
      (user-error "No paused Goal to resume"))
    (when-let* ((budget (mevedel-goal--exhausted-budget chat goal)))
      (user-error "The Goal's %s budget is spent; set a new Goal with a larger one"
                  (cdr (assq budget mevedel-goal-budget-names))))
    (mevedel-goal--activate goal)
    (mevedel-goal--changed chat)
    (mevedel-goal--offer-soon chat)
    goal))

(defun mevedel-goal-cancel (chat)
  "Cancel CHAT's Goal, so that no automatic turn follows.
A running turn is not stopped."
  (let ((goal (mevedel-goal-of (mevedel-chat-session chat))))
    (unless (mevedel-goal-live-p goal) (user-error "No Goal to cancel"))
    (mevedel-goal--end chat goal 'cancelled "cancelled by the user")
    goal))

(defun mevedel-goal--end (chat goal state reason)
  "End GOAL of CHAT in STATE for REASON."
  (mevedel-goal--stop-clock goal)
  (setf (mevedel-goal-state goal) state
        (mevedel-goal-reason goal) reason
        (mevedel-goal-held goal) nil
        (mevedel-goal-findings goal) nil)
  (mevedel-goal--changed chat))

(defun mevedel-goal-status-text (chat)
  "Return a line saying where CHAT's Goal stands, or nil without one."
  (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat))))
    (concat (format "Goal %s" (mevedel-goal-state goal))
            (cond ((mevedel-goal-review goal) " (being checked)")
                  ((mevedel-goal-held goal) (format " (waiting: %s)" (mevedel-goal-held goal)))
                  ((mevedel-goal-reason goal) (format " (%s)" (mevedel-goal-reason goal)))
                  (t ""))
            " · " (mevedel-goal-budget-text chat goal))))

;;; The model's word: UpdateGoal

(defun mevedel-goal-update (chat status note)
  "Apply the model's UpdateGoal STATUS with NOTE in CHAT; return the answer."
  (let ((goal (mevedel-goal-of (mevedel-chat-session chat)))
        (note (string-trim (or note ""))))
    (cond
     ((mevedel-chat-agent chat) "Error: only the main conversation works on the Goal")
     ((not (and goal (eq (mevedel-goal-state goal) 'active)))
      "Error: no Goal is active in this session")
     ((string-empty-p note) "Error: the note is empty: give the evidence, the reason or the progress")
     (t
      (setf (mevedel-goal-note goal) note)
      (pcase status
        ("progress"
         (mevedel-goal--changed chat)
         "Progress noted.  Keep working toward the Goal.")
        ("blocked"
         (mevedel-goal--end chat goal 'blocked note)
         "The Goal is blocked; the user is told why.  End your turn now.")
        ("complete"
         (if (mevedel-goal-review goal)
             "Error: the Goal is being checked already; end your turn"
           (mevedel-goal--start-review chat goal note)
           "An independent verifier now checks the Goal.  End your turn now; if it does not \
agree, its findings come back to you."))
        (_ (format "Error: status must be complete, blocked or progress, not %s" status)))))))

;;; The check

(defun mevedel-goal-review-task (objective plan note)
  "Return the goal-review task for OBJECTIVE, the accepted PLAN and NOTE."
  (concat "Check, adversarially and independently, whether this objective is met in the \
workspace.  You do not see the conversation that worked on it: find the evidence \
yourself (read the files, run the checks you are allowed to).\n\nObjective:\n"
          objective "\n"
          (if plan (concat "\nAccepted plan:\n" plan "\n") "")
          "\nThe implementer's claim of completion:\n" note "\n"
          "\nEnd your report with exactly one line VERDICT: PASS (the objective is met), \
VERDICT: FAIL or VERDICT: PARTIAL, after your findings.\n"))

(defun mevedel-goal--start-review (chat goal note)
  "Start the goal-review verifier of CHAT's GOAL, whose completion NOTE claims."
  (setf (mevedel-goal-review goal) t)
  (condition-case err
      (let ((path (mevedel-agent-spawn
                   chat
                   (list :task_name "goal-review" :role "verifier" :context "none"
                         :workload 'goal-review
                         :message (mevedel-goal-review-task
                                   (mevedel-goal-objective goal)
                                   (mevedel-plan-current (mevedel-chat-session chat)) note))
                   (lambda (path outcome payload)
                     (mevedel-goal--reviewed chat goal path outcome payload)))))
        (when (eq (mevedel-goal-review goal) t)
          (setf (mevedel-goal-review goal) path)))
    (error
     (setf (mevedel-goal-review goal) nil)
     (mevedel-goal--reviewed chat goal nil 'failed
                             (format "The verifier could not start: %s"
                                     (error-message-string err))))))

(defun mevedel-goal--reviewed (chat goal path outcome payload)
  "Take the verdict of GOAL's check by PATH in CHAT: OUTCOME and its PAYLOAD."
  (let ((verdict (and (eq outcome 'completed) (mevedel-agent-parse-verdict payload))))
    (setf (mevedel-goal-review goal) nil)
    (setf (mevedel-goal-verdicts goal)
          (append (mevedel-goal-verdicts goal) (list (or verdict "none"))))
    (cond
     ;; Cancelled or blocked while the check ran: its verdict is moot.
     ((not (and (eq (mevedel-goal-of (mevedel-chat-session chat)) goal)
                (mevedel-goal-live-p goal)))
      (mevedel-goal--changed chat))
     ((equal verdict "PASS")
      (mevedel-goal--end chat goal 'complete "the verifier agreed (VERDICT: PASS)")
      (mevedel-goal--notice chat "Goal complete: the verifier said PASS"))
     (t
      (setf (mevedel-goal-findings goal)
            (format "The goal-review verifier%s did not accept the Goal as complete (%s).  \
Its findings:\n\n%s\n\nWork on them, then call UpdateGoal again."
                    (if path (concat " " path) "")
                    (if verdict (concat "VERDICT: " verdict)
                      (format "no accepted verdict; its turn %s" outcome))
                    (string-trim (or payload ""))))
      (mevedel-goal--changed chat)
      (when (memq (mevedel-goal-state goal) '(active))
        (mevedel-goal--after-turn chat goal))))))

;;; Continuation

(defun mevedel-goal--notice (chat text)
  "Show TEXT as a notice in CHAT's transcript once no turn is writing there."
  (if (not (mevedel-chat-busy-p chat))
      (progn (mevedel-chat-insert-notice chat 'background text)
             (mevedel-chat-notify chat 'truncated))
    (letrec ((wait (lambda (idle _outcome)
                     (when (eq idle chat)
                       (remove-hook 'mevedel-chat-idle-functions wait)
                       (mevedel-goal--notice chat text)))))
      (add-hook 'mevedel-chat-idle-functions wait))))

(defun mevedel-goal--turn-started (chat turn)
  "Count TURN of the root CHAT toward its active Goal.
A `mevedel-chat-turn-functions' member."
  (unless (mevedel-chat-agent chat)
    (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat)))
                ((eq (mevedel-goal-state goal) 'active)))
      (cl-incf (mevedel-goal-turns goal))
      (push (plist-get turn :id) (mevedel-goal-turn-ids goal))
      (setf (mevedel-goal-held goal) nil)
      (mevedel-goal--changed chat))))

(add-hook 'mevedel-chat-turn-functions #'mevedel-goal--turn-started)

(defun mevedel-goal--turn-ended (chat outcome)
  "After a root turn of CHAT ended with OUTCOME, go on with its active Goal.
A failed or aborted turn pauses it.  A `mevedel-chat-idle-functions' member."
  (unless (mevedel-chat-agent chat)
    (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat)))
                ((eq (mevedel-goal-state goal) 'active)))
      (if (eq outcome 'done)
          (mevedel-goal--after-turn chat goal)
        (mevedel-goal-pause chat (if (eq outcome 'abort) "the turn was interrupted"
                                   "the turn failed"))))))

(add-hook 'mevedel-chat-idle-functions #'mevedel-goal--turn-ended 90)

(defun mevedel-goal--after-turn (chat goal)
  "Pause GOAL of CHAT when a budget is spent, else offer its next turn.
While its check runs, the verdict decides."
  (unless (mevedel-goal-review goal)
    (if-let* ((budget (mevedel-goal--exhausted-budget chat goal)))
        (mevedel-goal-pause chat (format "its %s budget is spent"
                                         (cdr (assq budget mevedel-goal-budget-names)))
                            budget)
      (mevedel-goal--changed chat)
      (mevedel-goal--offer-soon chat))))

(defun mevedel-goal--offer-soon (chat)
  "Offer CHAT's Goal its next turn once the current command is over.
What a turn's end starts first (queued messages, background events) is
scheduled before this."
  (run-at-time 0 nil #'mevedel-goal-offer chat))

(defun mevedel-goal--hold (chat)
  "Return the reason the next automatic turn of CHAT must wait, or nil."
  (cond ((mevedel-chat-queued chat) "queued messages")
        ((mevedel-mailbox-wakes-pending-p chat) "background events")
        ((mevedel-interaction-list chat) "an open card")
        ((run-hook-with-args-until-success 'mevedel-mailbox-hold-functions chat))))

(defun mevedel-goal-offer (chat)
  "Start the next automatic turn of CHAT's active Goal, unless it must wait.
Return the turn, or nil."
  (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat)))
              ((eq (mevedel-goal-state goal) 'active))
              ((not (mevedel-goal-review goal)))
              ((buffer-live-p (mevedel-chat-data-buffer chat)))
              ((not (mevedel-chat-busy-p chat))))
    (if-let* ((hold (mevedel-goal--hold chat)))
        (unless (equal hold (mevedel-goal-held goal))
          (setf (mevedel-goal-held goal) hold)
          (force-mode-line-update t))
      (let ((findings (mevedel-goal-findings goal)))
        (setf (mevedel-goal-findings goal) nil
              (mevedel-goal-held goal) nil)
        (condition-case err
            (mevedel-chat-send
             chat (or findings "Continue working toward the Goal.  This is not a message \
from the user.")
             :background (format "Goal: automatic turn %d%s" (1+ (mevedel-goal-turns goal))
                                 (if findings " with the verifier's findings" "")))
          ;; A turn that cannot start (no usable backend) must not
          ;; leave the Goal waiting for it.
          (error (setf (mevedel-goal-findings goal) findings)
                 (mevedel-goal-pause chat (format "its next turn could not start: %s"
                                                  (error-message-string err)))
                 nil))))))

(defun mevedel-goal--released (chat)
  "Offer CHAT's held Goal its turn: what held it may have let go."
  (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat)))
              ((mevedel-goal-held goal)))
    (mevedel-goal--offer-soon chat)))

(add-hook 'mevedel-mailbox-release-functions #'mevedel-goal--released)

;;; Commands

(defun mevedel-goal-parse-command (text)
  "Return the objective and budgets of the /goal arguments TEXT.
\(OBJECTIVE . BUDGETS): options --budget 2$|500k, --turns N and
--time 30m come first."
  (let ((words (split-string (string-trim text) "[ \t\n]+" t))
        (budgets nil))
    (while (and words (string-prefix-p "--" (car words)))
      (let* ((option (pop words))
             (value (or (pop words) (user-error "/goal %s needs a value" option))))
        (setq budgets
              (append budgets
                      (pcase option
                        ("--budget" (mevedel-goal-parse-budget value))
                        ("--turns" (list :turns (mevedel-goal-parse-turns value)))
                        ("--time" (list :seconds (mevedel-goal-parse-time value)))
                        (_ (user-error "Unknown /goal option %s (--budget, --turns, --time)"
                                       option)))))))
    (let ((objective (string-trim
                      (if words
                          (substring text (string-search (car words) text))
                        ""))))
      (cons objective budgets))))

(defun mevedel-goal-command (chat argument)
  "Run /goal ARGUMENT in CHAT: set a Goal, pause, resume, cancel or show it."
  (let ((argument (string-trim (or argument ""))))
    (pcase argument
      ("" (message "%s" (or (mevedel-goal-status-text chat) "No Goal: /goal OBJECTIVE sets one")))
      ("pause" (unless (mevedel-goal-pause chat "paused by the user")
                 (user-error "No active Goal to pause"))
               (message "%s" (mevedel-goal-status-text chat)))
      ("resume" (mevedel-goal-resume chat) (message "%s" (mevedel-goal-status-text chat)))
      ("cancel" (mevedel-goal-cancel chat) (message "Goal cancelled"))
      (_ (pcase-let ((`(,objective . ,budgets) (mevedel-goal-parse-command argument)))
           (mevedel-goal-start chat objective budgets))))))

;;;###autoload
(defun mevedel-goal (objective)
  "Set OBJECTIVE as the Goal of this view's session and start working on it.
With options first, as /goal takes them: --budget 2$ (or 500k
tokens), --turns N, --time 30m.  \"pause\", \"resume\" and
\"cancel\" change the current Goal."
  (interactive (list (read-string "Goal (objective, or pause/resume/cancel): ")))
  (mevedel-goal-command (or (mevedel-view-chat) (user-error "Not a mevedel view")) objective))

(mevedel-view-register-slash-command "goal"
  #'mevedel-goal-command
  "work toward an objective across turns (/goal [--budget 2$] [--turns N] \
[--time 30m] OBJECTIVE; /goal pause|resume|cancel; /goal shows it)"
  (lambda (_chat) '("pause" "resume" "cancel")))

(defun mevedel-goal--header (chat)
  "Return the Goal's state and budget for CHAT's header, or nil.
A `mevedel-view-header-functions' member."
  (unless (mevedel-chat-agent chat)
    (when-let* ((goal (mevedel-goal-of (mevedel-chat-session chat)))
                ((not (eq (mevedel-goal-state goal) 'cancelled))))
      (propertize (format "Goal %s%s: %s" (mevedel-goal-state goal)
                          (if (mevedel-goal-review goal) ", checking" "")
                          (or (mevedel-goal-shown goal) (mevedel-goal-budget-text chat goal)))
                  'face (if (eq (mevedel-goal-state goal) 'active) 'success 'warning)))))

(add-hook 'mevedel-view-header-functions #'mevedel-goal--header)

(provide 'mevedel-goal)
;;; mevedel-goal.el ends here
