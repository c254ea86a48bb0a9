;;; headless-interaction-e2e-test.el --- Ask and Plan mode in headless runs  -*- lexical-binding: t; -*-

;;; Commentary:

;; bin/mevedel against the scripted model: Ask gets "no interactive
;; user" as a tool error the model reads and goes on from, and
;; --permission-mode plan refuses an edit before anything is written.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(ert-deftest mevedel-e2e:headless-ask-has-no-interactive-user ()
  "A headless Ask is an error result; the run still finishes."
  (let ((run (mevedel-e2e-headless
              :args '("-p" "Choose for me")
              :steps `(((tool_calls . [((name . "ToolCall")
                                        (arguments . ((program . "(Ask :questions [{:header \"Pick\" :question \"Which?\" :options [{:label \"A\"} {:label \"B\"}]}])"))))]))
                       ((expect . ((results . [((contains . "no interactive user"))])))
                        (text . "I picked A myself."))))))
    (should (eql (plist-get run :status) 0))
    (should (string-match-p "I picked A myself\\." (plist-get run :stdout)))))

(ert-deftest mevedel-e2e:headless-plan-mode-refuses-edits ()
  "With --permission-mode plan, a mutating command is refused by Plan, a read-only one runs."
  (let ((run (mevedel-e2e-headless
              :args '("-p" "Plan it" "--permission-mode" "plan")
              :steps `(((tool_calls . [((name . "Bash")
                                        (arguments . ((command . "touch x.txt")
                                                      (description . "make x"))))]))
                       ((expect . ((results . [((contains . "Plan mode: only read-only commands"))])))
                        (tool_calls . [((name . "Bash")
                                        (arguments . ((command . "ls")
                                                      (description . "list"))))]))
                       ((expect . ((results . [((contains . "exit_code=\"0\""))])))
                        (text . "Here is the plan: add x.txt."))))))
    (should (eql (plist-get run :status) 0))
    (should (string-match-p "Here is the plan" (plist-get run :stdout)))
    (should-not (cl-some (lambda (entry) (string-match-p "has no matching" (format "%S" entry)))
                         (plist-get run :log)))))

(provide 'headless-interaction-e2e-test)
;;; headless-interaction-e2e-test.el ends here
