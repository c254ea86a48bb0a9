;;; goal-test.el --- Goals: budgets, crossings, UpdateGoal's reach  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The parts of mevedel-goal.el that need no model: reading budgets,
;; charging usage records to a Goal once, the crossings told to the
;; root and its agents, and where UpdateGoal is offered.  The turns
;; themselves run in test/e2e/goal-e2e-test.el.

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)
(require 'mevedel-goal)

(ert-deftest mevedel-goal-test-budgets-parse ()
  "Dollars, tokens, times and turns read as /goal and --goal-* take them."
  (should (equal (mevedel-goal-parse-budget "2$") '(:cost 2.0)))
  (should (equal (mevedel-goal-parse-budget "$2.50") '(:cost 2.5)))
  (should (equal (mevedel-goal-parse-budget "500k") '(:tokens 500000)))
  (should (equal (mevedel-goal-parse-budget "2M") '(:tokens 2000000)))
  (should (equal (mevedel-goal-parse-budget "1200") '(:tokens 1200)))
  (should-error (mevedel-goal-parse-budget "lots") :type 'user-error)
  (should (equal (mevedel-goal-parse-time "30m") 1800))
  (should (equal (mevedel-goal-parse-time "1h30m") 5400))
  (should (equal (mevedel-goal-parse-time "90s") 90))
  (should (equal (mevedel-goal-parse-time "5") 300))
  (should-error (mevedel-goal-parse-time "soon") :type 'user-error)
  (should (equal (mevedel-goal-parse-turns "3") 3))
  (should-error (mevedel-goal-parse-turns "0") :type 'user-error)
  (should (equal (mevedel-goal-parse-command "--budget 2$ --turns 20 --time 30m Fix the --flag bug")
                 '("Fix the --flag bug" :cost 2.0 :turns 20 :seconds 1800)))
  (should-error (mevedel-goal-parse-command "--speed 3 go") :type 'user-error)
  (should (equal (cadr (should-error (mevedel-goal-parse-command "--turns")
                                     :type 'user-error))
                 "/goal --turns needs a value")))

(defun goal-test--record (chat turn agent tokens)
  "Record TOKENS of input for TURN of AGENT in CHAT's session."
  (mevedel-usage-record chat (mevedel-usage-make :input tokens :output 0) :turn turn :agent agent))

(ert-deftest mevedel-goal-test-usage-charged-once-and-crossings-told-once ()
  "The Goal's root turns and its agents' work in them are charged; crossings told once."
  (mevedel-test-with-view view chat
    (let* ((session (mevedel-chat-session chat))
           (child (mevedel-chat-make-child chat "/root/helper"))
           (goal (mevedel-goal--make :objective "Ship it" :budgets '(:tokens 1000)
                                     :turn-ids '("g1") :started 0)))
      (unwind-protect
          (progn
            (mevedel-goal--activate goal)
            (puthash session goal mevedel-goal--goals)
            ;; A root turn outside the Goal is not charged.
            (goal-test--record chat "before" "/root" 5000)
            (goal-test--record chat "g1" "/root" 400)
            ;; An agent is charged for what it does while a Goal turn
            ;; runs, not while the root works on something else.
            (setf (mevedel-chat-turn chat) (list :id "before"))
            (goal-test--record child "c0" "/root/helper" 3000)
            (setf (mevedel-chat-turn chat) (list :id "g1"))
            (goal-test--record child "c1" "/root/helper" 200)
            (setf (mevedel-chat-turn chat) nil)
            (should (equal (plist-get (mevedel-goal-usage chat goal) :tokens) 600))
            (should (equal (mevedel-goal--untold chat goal) '("Goal budget: tokens 50% used.")))
            (should-not (mevedel-goal--untold chat goal))
            ;; The agent hears the same crossing, once, before its next sample.
            (should (equal (length (mevedel-goal--continuation-mail child)) 1))
            (should-not (mevedel-goal--continuation-mail child))
            (goal-test--record chat "g1" "/root" 400)
            (should (equal (mevedel-goal--exhausted-budget chat goal) 'tokens))
            (let ((told (mevedel-goal--untold chat goal)))
              (should (equal (length told) 2))
              (should (string-match-p "80%" (car told)))
              (should (string-match-p "100% used; the Goal pauses" (cadr told))))
            ;; The facts of the next root turn name the objective and the budget used.
            (let ((facts (car (mevedel-goal--turn-mail chat))))
              (should (string-match-p "<context-update component=\"goal\">" facts))
              (should (string-match-p "Objective: Ship it" facts))
              (should (string-match-p "tokens 1000/1000" facts)))
            ;; A child's turn gets no Goal facts.
            (should-not (mevedel-goal--turn-mail child)))
        (remhash session mevedel-goal--goals)
        (kill-buffer (mevedel-chat-data-buffer child))))))

(ert-deftest mevedel-goal-test-cost-budget ()
  "The cost budget prices the Goal's records; spent, it is the budget that ran out."
  (mevedel-test-with-view view chat
    (let* ((session (mevedel-chat-session chat))
           (goal (mevedel-goal--make :objective "Ship it" :budgets '(:cost 1.0)
                                     :turn-ids '("g1") :started 0)))
      (unwind-protect
          (progn
            (mevedel-goal--activate goal)
            (puthash session goal mevedel-goal--goals)
            ;; Unpriced usage leaves the cost unknown, never spent.
            (mevedel-usage-record chat (mevedel-usage-make :input 900000) :turn "g1")
            (should-not (plist-get (mevedel-goal-usage chat goal) :cost))
            (should-not (mevedel-goal--exhausted-budget chat goal))
            (should (string-match-p "cost \\?/\\$1.00" (mevedel-goal-budget-text chat goal)))
            ;; 200k input tokens at $3 per million: $0.60.
            (mevedel-usage-record chat (mevedel-usage-make :input 200000) :turn "g1"
                                  :model "claude-sonnet-4-6")
            (should (< (abs (- (plist-get (mevedel-goal-usage chat goal) :cost) 0.6)) 1e-9))
            (should (equal (mevedel-goal--untold chat goal) '("Goal budget: cost 50% used.")))
            (mevedel-usage-record chat (mevedel-usage-make :input 200000) :turn "g1"
                                  :model "claude-sonnet-4-6")
            (should (eq (mevedel-goal--exhausted-budget chat goal) 'cost))
            (should (string-match-p "cost \\$1.20/\\$1.00" (mevedel-goal-budget-text chat goal))))
        (remhash session mevedel-goal--goals)))))

(ert-deftest mevedel-goal-test-what-comes-before-an-automatic-turn ()
  "Queued messages, background events, an open card and a draft each hold the next turn."
  (mevedel-test-with-view view chat
    (let ((session (mevedel-chat-session chat)))
      (should-not (mevedel-goal--hold chat))
      (with-current-buffer view
        (goto-char (point-max))
        (insert "half a thought"))
      (should (equal (mevedel-goal--hold chat) "the composer's draft"))
      (let ((card (mevedel-interaction-open chat :kind 'test :title "A card"
                                             :render (lambda (_) "Yes?"))))
        (should (equal (mevedel-goal--hold chat) "an open card"))
        (mevedel-interaction-settle card 'done))
      (puthash (mevedel-session-id session) '(7) mevedel-mailbox--pending-wakes)
      (unwind-protect
          (should (equal (mevedel-goal--hold chat) "background events"))
        (remhash (mevedel-session-id session) mevedel-mailbox--pending-wakes))
      (setf (mevedel-chat-queued chat) '("steer"))
      (should (equal (mevedel-goal--hold chat) "queued messages"))
      (setf (mevedel-chat-queued chat) nil))))

(ert-deftest mevedel-goal-test-complete-starts-the-goal-review-verifier ()
  "complete spawns the verifier, workload goal-review (tier strong), context none.
Its task is the objective, the accepted plan and the note; a verdict
other than PASS becomes the next turn's findings."
  (should (eq (alist-get 'goal-review mevedel-agent-workload-tiers) 'strong))
  (mevedel-test-with-view view chat
    (let* ((session (mevedel-chat-session chat))
           (goal (mevedel-goal--make :objective "Ship it" :started 0))
           (spawned nil))
      (unwind-protect
          (cl-letf (((symbol-function 'mevedel-agent-spawn)
                     (lambda (parent args on-settle)
                       (setq spawned (list parent args on-settle))
                       "/root/goal-review"))
                    ((symbol-function 'mevedel-plan-current) (lambda (_) "1. Ship."))
                    ((symbol-function 'mevedel-goal--offer-soon) #'ignore))
            (mevedel-goal--activate goal)
            (puthash session goal mevedel-goal--goals)
            (should (string-prefix-p "An independent verifier"
                                     (mevedel-goal-update chat "complete" "shipped v1")))
            (pcase-let ((`(,parent ,args ,on-settle) spawned))
              (should (eq parent chat))
              (should (equal (plist-get args :role) "verifier"))
              (should (equal (plist-get args :context) "none"))
              (should (eq (plist-get args :workload) 'goal-review))
              (should (string-match-p "Objective:\nShip it" (plist-get args :message)))
              (should (string-match-p "Accepted plan:\n1. Ship." (plist-get args :message)))
              (should (string-match-p "shipped v1" (plist-get args :message)))
              (should (equal (mevedel-goal-review goal) "/root/goal-review"))
              (should (string-prefix-p "Error: the Goal is being checked"
                                       (mevedel-goal-update chat "complete" "again")))
              (funcall on-settle "/root/goal-review" 'completed "No tests.\nVERDICT: PARTIAL")
              (should-not (mevedel-goal-review goal))
              (should (eq (mevedel-goal-state goal) 'active))
              (should (equal (mevedel-goal-verdicts goal) '("PARTIAL")))
              (should (string-match-p "VERDICT: PARTIAL" (mevedel-goal-findings goal)))
              (should (string-match-p "No tests\\." (mevedel-goal-findings goal)))))
        (remhash session mevedel-goal--goals)))))

(ert-deftest mevedel-goal-test-commands-and-header ()
  "/goal shows, pauses, resumes and cancels; the header shows state and budget used."
  (mevedel-test-with-view view chat
    (let* ((session (mevedel-chat-session chat))
           (goal (mevedel-goal--make :objective "Ship it" :budgets '(:turns 5) :turns 2
                                     :started 0)))
      (unwind-protect
          (cl-letf (((symbol-function 'mevedel-goal--offer-soon) #'ignore))
            (should-not (mevedel-goal--header chat))
            (mevedel-goal--activate goal)
            (puthash session goal mevedel-goal--goals)
            (should (string-match-p "\\`Goal active: turns 2/5 · tokens 0\\'"
                                    (substring-no-properties (mevedel-goal--header chat))))
            (with-current-buffer view
              (should (string-match-p "Goal active: turns 2/5"
                                      (mevedel-view--header-line))))
            (mevedel-goal-command chat "pause")
            (should (eq (mevedel-goal-state goal) 'paused))
            (should (string-match-p "Goal paused (paused by the user)"
                                    (mevedel-goal-status-text chat)))
            (should-error (mevedel-goal-command chat "pause") :type 'user-error)
            (should-error (mevedel-goal-command chat "Another objective") :type 'user-error)
            (with-current-buffer view (mevedel-goal "resume"))
            (should (eq (mevedel-goal-state goal) 'active))
            (mevedel-goal-command chat "cancel")
            (should (eq (mevedel-goal-state goal) 'cancelled))
            (should-not (mevedel-goal--header chat))
            (should-error (mevedel-goal-command chat "resume") :type 'user-error))
        (remhash session mevedel-goal--goals)))))

(ert-deftest mevedel-goal-test-notice-waits-for-the-running-turn ()
  "A verdict's notice never lands inside a turn that is writing the transcript."
  (mevedel-test-with-view view chat
    (cl-flet ((shown () (with-current-buffer (mevedel-chat-data-buffer chat)
                          (save-excursion (goto-char (point-min))
                                          (search-forward "Goal complete: here" nil t)))))
      (setf (mevedel-chat-turn chat) (list :id "running"))
      (mevedel-goal--notice chat "Goal complete: here")
      (should-not (shown))
      (setf (mevedel-chat-turn chat) nil)
      (run-hook-with-args 'mevedel-chat-idle-functions chat 'done)
      (should (shown)))))

(ert-deftest mevedel-goal-test-unsent-objective-sets-no-goal ()
  "When the first turn cannot be sent, the session is left without a Goal."
  (mevedel-test-with-view view chat
    (cl-letf (((symbol-function 'mevedel-chat-send)
               (lambda (&rest _) (signal 'mevedel-chat-backend-error '("no backend")))))
      (should-error (mevedel-goal-start chat "Ship it") :type 'mevedel-chat-backend-error)
      (should-not (mevedel-goal-of (mevedel-chat-session chat))))))

(ert-deftest mevedel-goal-test-update-goal-is-the-roots-only ()
  "UpdateGoal is offered to the root's catalog, never to a child agent's."
  (mevedel-test-with-view view chat
    (let ((child (mevedel-chat-make-child chat "/root/helper"))
          (tool (mevedel-tool-get "UpdateGoal" "goal")))
      (unwind-protect
          (progn
            (should tool)
            (should (mevedel-tool-standalone tool))
            (should-not (mevedel-tool-native-p tool))
            (should (mevedel-tool-root-only tool))
            (should (mevedel-tool-visible-p tool (mevedel-chat-data-buffer chat)))
            ;; A child's frozen catalog, whatever its role, leaves it out.
            (dolist (role (list nil (list :tools '("Read" "UpdateGoal"))))
              (should-not (member (mevedel-tool-identity tool)
                                  (mevedel-agent--specialists chat child role))))
            (should (equal (mevedel-goal-update child "complete" "done")
                           "Error: only the main conversation works on the Goal"))
            (should (equal (mevedel-goal-update chat "complete" "done")
                           "Error: no Goal is active in this session")))
        (kill-buffer (mevedel-chat-data-buffer child))))))

(ert-deftest mevedel-goal-test-progress-and-blocked ()
  "progress keeps the Goal going; blocked ends it with the model's reason."
  (mevedel-test-with-view view chat
    (let* ((session (mevedel-chat-session chat))
           (goal (mevedel-goal--make :objective "Ship it" :started 0)))
      (unwind-protect
          (progn
            (mevedel-goal--activate goal)
            (puthash session goal mevedel-goal--goals)
            (should (string-match-p "Error: the note is empty"
                                    (mevedel-goal-update chat "progress" " ")))
            (should (string-prefix-p "Progress noted" (mevedel-goal-update chat "progress" "half")))
            (should (eq (mevedel-goal-state goal) 'active))
            (should (string-prefix-p "Error: status must be"
                                     (mevedel-goal-update chat "finished" "x")))
            (should (string-prefix-p "The Goal is blocked"
                                     (mevedel-goal-update chat "blocked" "no key")))
            (should (eq (mevedel-goal-state goal) 'blocked))
            (should (equal (mevedel-goal-reason goal) "no key"))
            (should (string-match-p "Goal blocked (no key)" (mevedel-goal-status-text chat))))
        (remhash session mevedel-goal--goals)))))

(ert-deftest mevedel-goal-test-saved-active-goal-reads-back-paused ()
  "What is saved reads back; an active Goal comes back paused."
  (let* ((goal (mevedel-goal--make :objective "Ship it" :budgets '(:turns 3) :turns 2
                                   :verdicts '("FAIL") :started 5))
         (read (progn (mevedel-goal--activate goal)
                      (mevedel-goal--read (car (read-from-string
                                                (mevedel-save-print (mevedel-goal--print goal))))))))
    (should (eq (mevedel-goal-state read) 'paused))
    (should (string-match-p "restarted" (mevedel-goal-reason read)))
    (should (equal (mevedel-goal-turns read) 2))
    (should (equal (mevedel-goal-verdicts read) '("FAIL")))
    (should (equal (mevedel-goal-budgets read) '(:turns 3)))
    (should-not (mevedel-goal-active-since read))))

(ert-deftest mevedel-goal-test-manual-page ()
  "mevedel://goals.md, which UpdateGoal's description names, is a manual page."
  (let ((file (expand-file-name "goals.md" (mevedel-resource-docs-directory))))
    (should (file-readable-p file))
    (should (string-match-p "mevedel://goals.md" mevedel-tool-goal-description))
    (with-temp-buffer
      (insert-file-contents file)
      (should (search-forward "UpdateGoal" nil t))
      (should (search-forward "--goal-turns" nil t)))))

(provide 'goal-test)
;;; goal-test.el ends here
