;;; plan-e2e-test.el --- Plan mode in a real session  -*- lexical-binding: t; -*-

;;; Commentary:

;; A real session (gptel against the scripted model) in Plan mode: the
;; model's edits and mutating command are refused, its plan goes to
;; work://plans/, its proposal is approved with edits by a key, and
;; the implementation turn that follows applies a patch; in a second
;; session that turn delegates, and its child's patch of an ordinary
;; file runs under the same override, without a card.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun plan-e2e--patch (path)
  "Return a patch adding PATH with one line."
  (format "*** Begin Patch\n*** Add File: %s\n+done\n*** End Patch" path))

(ert-deftest mevedel-e2e:plan-approved-leads-to-an-applypatch-that-runs ()
  "Plan refuses edits, keeps the plan in work://plans/; approval implements it."
  (let* ((answered nil)
         (run (mevedel-e2e-run
               :prompt "Add impl.txt"
               :setup (lambda (chat) (mevedel-plan-enter (mevedel-chat-session chat)))
               :steps `(((tool_calls . [((name . "ApplyPatch")
                                         (arguments . ((patch . ,(plan-e2e--patch "impl.txt")))))]))
                        ((expect . ((results . [((contains . "Plan mode: ApplyPatch may only write"))])))
                         (tool_calls . [((name . "Bash")
                                         (arguments . ((command . "touch impl.txt")
                                                       (description . "make it"))))]))
                        ((expect . ((results . [((contains . "only read-only commands"))])))
                         (tool_calls . [((name . "ApplyPatch")
                                         (arguments . ((patch . ,(plan-e2e--patch
                                                                  "work://plans/impl.md")))))]))
                        ((tool_calls . [((name . "ToolCall")
                                         (arguments . ((program . "(ProposePlan :plan \"1. Add impl.txt\")"))))]))
                        ((expect . ((results . [((contains . "approved the plan and allowed file edits"))])))
                         (text . "Approved; implementing next."))
                        ((expect . ((user_contains . "The user approved this plan")))
                         (tool_calls . [((name . "ApplyPatch")
                                         (arguments . ((patch . ,(plan-e2e--patch "impl.txt")))))]))
                        ((text . "Implemented.")))
               :during
               (lambda (chat view)
                 (when (and (not answered) (mevedel-interaction-list chat))
                   (setq answered t)
                   (switch-to-buffer view)
                   (execute-kbd-macro (kbd "e"))))
               :inspect
               (lambda (chat view)
                 ;; The implementation turn follows the Plan turn.
                 (let ((deadline (+ (float-time) 20)))
                   (while (and (< (float-time) deadline)
                               (not (and (file-exists-p (expand-file-name "impl.txt"
                                                                          (mevedel-chat-root chat)))
                                         (not (mevedel-chat-busy-p chat))
                                         (string-match-p "Implemented\\."
                                                         (mevedel-e2e-transcript-text view)))))
                     (accept-process-output nil 0.02)))
                 (list :file (file-exists-p (expand-file-name "impl.txt" (mevedel-chat-root chat)))
                       :plan (file-exists-p (expand-file-name
                                             "plans/impl.md"
                                             (mevedel-session-local-directory
                                              (mevedel-chat-session chat))))
                       :mode (mevedel-chat-permission-mode chat)
                       :transcript (mevedel-e2e-transcript-text view))))))
    (should answered)
    (let ((inspected (plist-get run :inspected)))
      (should (plist-get inspected :plan))
      (should (plist-get inspected :file))
      (should (eq (plist-get inspected :mode) 'ask))
      (should (string-match-p "Implemented\\." (plist-get inspected :transcript))))))

(ert-deftest mevedel-e2e:approve-with-edits-child-inherits-override ()
  "A plan approved with edits: the implementation's child agent edits without a card."
  (mevedel-e2e-with-chat (view chat server root)
      (mevedel-e2e-write-conversations
       `(("retained agent /root/builder"
          ((expect . ((user_contains . "Write child.txt")))
           (tool_calls . [((name . "ApplyPatch")
                           (arguments . ((patch . ,(plan-e2e--patch "child.txt")))))]))
          ((text . "child done")))
         (nil
          ((tool_calls . [((name . "ToolCall")
                           (arguments . ((program . "(ProposePlan :plan \"1. Delegate child.txt\")"))))]))
          ((expect . ((results . [((contains . "allowed file edits"))])))
           (text . "Approved; implementing next."))
          ((expect . ((user_contains . "The user approved this plan")))
           (tool_calls . [((name . "Agent")
                           (arguments . ((task_name . "Builder")
                                         (message . "Write child.txt"))))]))
          ((tool_calls . [((name . "WaitAgent") (arguments . ((timeout_ms . 30000))))]))
          ((expect . ((user_contains . "child done")))
           (text . "Implemented."))
          ((text . "Noted.") (times . 50)))))
    (let ((file (expand-file-name "child.txt" root))
          (answered nil)
          (carded nil))
      (mevedel-plan-enter (mevedel-chat-session chat))
      (mevedel-chat-send chat "Plan, then delegate child.txt")
      (let ((deadline (+ (float-time) 40)))
        (while (and (< (float-time) deadline)
                    (not (and (file-exists-p file)
                              (not (mevedel-chat-busy-p chat))
                              (string-match-p "Implemented\\."
                                              (mevedel-e2e-transcript-text view)))))
          (when (mevedel-chat-pending chat) (setq carded t))
          (when (and (not answered) (mevedel-interaction-list chat))
            (setq answered t)
            (switch-to-buffer view)
            (execute-kbd-macro (kbd "e")))
          (accept-process-output nil 0.02)))
      (should answered)
      (should-not (mevedel-scripted-model-mismatches server))
      (should (file-exists-p file))
      (should-not carded)
      (should (equal (mevedel-agent-result chat "/root/builder") '(completed . "child done")))
      ;; The session itself is back in its own mode.
      (should (eq (mevedel-chat-permission-mode chat) 'ask)))))

(provide 'plan-e2e-test)
;;; plan-e2e-test.el ends here
