;;; goal-e2e-test.el --- Goals through bin/mevedel and a live view  -*- lexical-binding: t; -*-

;;; Commentary:

;; Goals against the scripted model: headless runs of bin/mevedel
;; --goal (completion on the second verification, a turn budget, a
;; Goal the model says is blocked, the usage errors), and a view whose
;; automatic turns wait behind a queued user message and a draft, and
;; whose Goal comes back paused after a restart.  The goal-review
;; verifier is its own conversation of the script, matched by its
;; system prompt.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name)))
  (add-to-list 'load-path (expand-file-name ".." (file-name-directory
                                                  (or load-file-name buffer-file-name)))))
(require 'mevedel-e2e-helpers)
(require 'mevedel-goal)

(defconst goal-e2e--verifier "You are a verifier agent"
  "What only the verifier's system prompt says: its conversation's match.")

(defun goal-e2e--update (status note &optional text)
  "Return a script step calling UpdateGoal with STATUS and NOTE, after TEXT."
  `(,@(and text `((text . ,text)))
    (tool_calls . [((name . "ToolCall")
                    (arguments . ((program . ,(format "(UpdateGoal :status %S :note %S)"
                                                      status note)))))])))

(defun goal-e2e--served (run conversation)
  "Return the request bodies of RUN's log served by CONVERSATION (an index), as JSON text."
  (cl-loop for entry in (plist-get run :log)
           when (eql (alist-get 'conversation entry) conversation)
           collect (json-encode (alist-get 'body entry))))

(ert-deftest mevedel-e2e:goal-completes-on-the-second-verification ()
  "FAIL with findings goes back to the root; the second check's PASS completes the Goal.
The verifier's requests carry the objective and the note, never the
root's conversation.  Both wire formats."
  (dolist (wire mevedel-e2e-wires)
    (goal-e2e--second-verification wire)))

(defun goal-e2e--second-verification (wire)
  "Run the scenario of `mevedel-e2e:goal-completes-on-the-second-verification' on WIRE."
  (let* ((run (mevedel-e2e-headless
               :wire wire
               :conversations
               `((,goal-e2e--verifier
                  ((expect . ((user_contains . "Make hello.txt say hello")))
                   (text . "hello.txt is missing.\nVERDICT: FAIL"))
                  ((expect . ((user_contains . "wrote hello.txt at last")))
                   (text . "hello.txt says hello.\nVERDICT: PASS")))
                 (nil
                  ,(goal-e2e--update "complete" "it is done already" "ROOT-CHATTER-ONE")
                  ((expect . ((results . [((contains . "independent verifier"))])))
                   (text . "Waiting for the check."))
                  ((expect . ((user_contains . "hello.txt is missing")))
                   ,@(goal-e2e--update "complete" "wrote hello.txt at last" "ROOT-CHATTER-TWO"))
                  ((text . "Checked again."))))
               :args '("--goal" "Make hello.txt say hello" "--json"
                       "--permission-mode" "full-auto")))
         (json (mevedel-e2e-json run))
         (goal (alist-get 'goal json))
         (verifier (goal-e2e--served run 0))
         (root (goal-e2e--served run 1)))
    (should (equal (plist-get run :status) 0))
    (should (equal (alist-get 'outcome goal) "complete"))
    (should (equal (alist-get 'verdicts goal) '("FAIL" "PASS")))
    (should (equal (alist-get 'turns goal) 2))
    (should (= (length root) 4))
    (should (= (length verifier) 2))
    ;; Fresh context: the objective and the note, no root conversation.
    (dolist (request verifier)
      (should (string-match-p "Make hello.txt say hello" request))
      (should-not (string-match-p "ROOT-CHATTER" request))
      (should-not (string-match-p "Waiting for the check" request)))
    (should (string-match-p "it is done already" (car verifier)))
    (should (string-match-p "wrote hello.txt at last" (cadr verifier)))
    ;; The transcript marks the automatic turn and the completion.
    (let ((notices (cl-loop for message in (alist-get 'messages json)
                            when (equal (alist-get 'role message) "notice")
                            collect (alist-get 'content message))))
      (should (cl-some (lambda (text)
                         (string-match-p "Goal: automatic turn 2 with the verifier's findings" text))
                       notices))
      (should (cl-some (lambda (text) (string-match-p "Goal complete" text)) notices)))
    ;; Each root turn carried the Goal's facts.
    (should (string-match-p "component=\\\\\"goal\\\\\"" (nth 0 root)))
    (should (string-match-p "root turn 2 of the Goal" (nth 2 root)))))

(ert-deftest mevedel-e2e:goal-stops-on-its-turn-budget ()
  "--goal-turns 3 allows exactly three root turns; the outcome is budget, status 1."
  (let* ((run (mevedel-e2e-headless
               :conversations `((nil ((text . "Still working.") (times . 20))))
               :args '("--goal" "Polish everything" "--goal-turns" "3" "--json")))
         (json (mevedel-e2e-json run))
         (goal (alist-get 'goal json)))
    (should (equal (plist-get run :status) 1))
    (should (equal (alist-get 'outcome goal) "budget"))
    (should (equal (alist-get 'turns goal) 3))
    (should (equal (alist-get 'verdicts goal) nil))
    (should (= (length (plist-get run :log)) 3))
    (should (string-match-p "turns budget is spent" (plist-get run :stderr)))))

(ert-deftest mevedel-e2e:goal-blocked-by-the-model ()
  "UpdateGoal blocked ends the Goal without a check; the outcome is blocked, status 1."
  (let* ((run (mevedel-e2e-headless
               :conversations
               `((,goal-e2e--verifier ((text . "never\nVERDICT: PASS")))
                 (nil ,(goal-e2e--update "blocked" "I need the API key")
                      ((text . "I am blocked."))))
               :args '("--goal" "Deploy it" "--json")))
         (json (mevedel-e2e-json run))
         (goal (alist-get 'goal json)))
    (should (equal (plist-get run :status) 1))
    (should (equal (alist-get 'outcome goal) "blocked"))
    (should (equal (alist-get 'reason goal) "I need the API key"))
    (should (equal (alist-get 'turns goal) 1))
    (should (null (goal-e2e--served run 0)))
    (should (= (length (goal-e2e--served run 1)) 2))))

(ert-deftest mevedel-e2e:goal-usage-errors ()
  "-p with --goal, and a Goal budget without --goal, are usage errors (status 2)."
  (pcase-let ((`(,status ,_ ,stderr) (mevedel-e2e-bin "--goal" "x" "-p" "y")))
    (should (equal status 2))
    (should (string-match-p "not both" stderr)))
  (pcase-let ((`(,status ,_ ,stderr) (mevedel-e2e-bin "-p" "y" "--goal-turns" "3")))
    (should (equal status 2))
    (should (string-match-p "need --goal" stderr)))
  (pcase-let ((`(,status ,_ ,stderr) (mevedel-e2e-bin "--goal" "x" "--goal-budget" "lots")))
    (should (equal status 2))
    (should (string-match-p "--goal-budget" stderr))))

;;;; In a view

(defun goal-e2e--user-texts (server)
  "Return the last user text of each request SERVER's log holds."
  (mapcar (lambda (entry)
            (let* ((body (alist-get 'body entry))
                   (user (cl-remove-if-not (lambda (m) (equal (alist-get 'role m) "user"))
                                           (alist-get 'messages body)))
                   (content (alist-get 'content (car (last user)))))
              (if (stringp content) content (json-encode content))))
          (mevedel-scripted-model-log server)))

(ert-deftest mevedel-e2e:goal-automatic-turns-wait-behind-queued-input-and-drafts ()
  "A queued user message runs before the next automatic turn; a draft holds it."
  (mevedel-e2e-with-chat (view chat server _root)
      (mevedel-e2e-write-script '(((text . "Working.") (sleep . 0.5))
                                  ((text . "Steered."))
                                  ((text . "Continued.") (sleep . 0.5))
                                  ((text . "Again."))))
    (mevedel-goal-start chat "Tidy the notes" '(:turns 4))
    (let ((goal (mevedel-goal-of (mevedel-chat-session chat))))
      (mevedel-chat-queue chat "Use British spelling")
      (mevedel-test-wait-until (>= (mevedel-goal-turns goal) 3) 20)
      ;; A draft written during the third turn holds the fourth.
      (with-current-buffer view
        (goto-char (point-max))
        (insert "half a thought"))
      (mevedel-test-wait-until (mevedel-goal-held goal) 10)
      (should (equal (mevedel-goal-turns goal) 3))
      (should (equal (mevedel-goal-held goal) "the composer's draft"))
      (should-not (mevedel-chat-busy-p chat))
      (with-current-buffer view
        (delete-region (- (point-max) (length "half a thought")) (point-max)))
      (mevedel-test-wait-until (eq (mevedel-goal-state goal) 'paused) 20)
      (should (equal (mevedel-goal-turns goal) 4))
      (should (eq (mevedel-goal-exhausted goal) 'turns)))
    (let ((texts (goal-e2e--user-texts server)))
      (should (= (length texts) 4))
      (should (string-match-p "Tidy the notes" (nth 0 texts)))
      (should (string-match-p "Use British spelling" (nth 1 texts)))
      (should (string-match-p "Continue working toward the Goal" (nth 2 texts)))
      (should (string-match-p "Continue working toward the Goal" (nth 3 texts))))
    (should (string-match-p "Goal: automatic turn 3" (mevedel-e2e-transcript-text view)))))

(ert-deftest mevedel-e2e:goal-comes-back-paused-after-a-restart ()
  "An active Goal saved with its session is paused when the session opens again.
/goal resume then goes on with it."
  (mevedel-e2e-with-server (root server '(((text . "First step done."))
                                          ((text . "Second step.") (sleep . 2))
                                          ((text . "Third."))))
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view))
           (id (mevedel-session-id (mevedel-chat-session chat))))
      (mevedel-e2e-attach chat server 'openai)
      (mevedel-goal-start chat "Write the notes" '(:turns 3))
      (mevedel-test-wait-until (>= (length (mevedel-scripted-model-log server)) 2) 10)
      ;; Emacs dies during the second turn: nothing more is saved.
      (cl-letf (((symbol-function 'mevedel-goal--save) #'ignore))
        (mevedel-e2e-close-live root))
      (let* ((chat (mevedel-chat-get-create root id))
             (goal (mevedel-goal-of (mevedel-chat-session chat))))
        (mevedel-e2e-attach chat server 'openai)
        (should goal)
        (should (eq (mevedel-goal-state goal) 'paused))
        (should (string-match-p "restarted" (mevedel-goal-reason goal)))
        (should (equal (mevedel-goal-objective goal) "Write the notes"))
        (should (equal (mevedel-goal-turns goal) 2))
        (sleep-for 0.3)
        (should-not (mevedel-chat-busy-p chat))
        (mevedel-goal-command chat "resume")
        (mevedel-test-wait-until (not (eq (mevedel-goal-state goal) 'active)) 20)
        (should (eq (mevedel-goal-state goal) 'paused))
        (should (eq (mevedel-goal-exhausted goal) 'turns))
        (should (equal (mevedel-goal-turns goal) 3))))))

(provide 'goal-e2e-test)
;;; goal-e2e-test.el ends here
