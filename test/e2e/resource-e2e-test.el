;;; resource-e2e-test.el --- Resource addresses through bin/mevedel  -*- lexical-binding: t; -*-

;;; Commentary:

;; Headless runs of bin/mevedel against the scripted server, for what
;; the model is told through resource addresses: agent:// of a child
;; still at work; a running command's notice names its output by an
;; artifact:// address, listed and readable before the command ends.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun resource-e2e--result-with (log needle)
  "Return the first tool result content in LOG containing NEEDLE, or nil."
  (cl-loop for entry in log
           thereis (cl-loop for content in (mapcar (lambda (r) (alist-get 'content r))
                                                   (alist-get 'results entry))
                            when (and (stringp content) (string-search needle content))
                            return content)))

(ert-deftest mevedel-e2e:agent-address-of-a-running-child-is-not-ready ()
  "Read agent://root/PATH while the child works: a success naming its history."
  (let* ((run (mevedel-e2e-headless
               :conversations
               '(("retained agent /root/slow" ((text . "slow report") (sleep . 4)))
                 (nil ((tool_calls . [((name . "Agent")
                                       (arguments . ((task_name . "Slow")
                                                     (message . "Take your time"))))]))
                      ((tool_calls . [((name . "Read")
                                       (arguments . ((file_path . "agent://root/slow"))))]))
                      ((text . "Checked.") (times . 20))))
               :args '("-p" "start a slow agent")))
         (result (resource-e2e--result-with (plist-get run :log) "NOT READY")))
    (should (eql (plist-get run :status) 0))
    (should result)
    (should (string-match-p "NOT READY: /root/slow is running" result))
    (should (string-match-p "history://root/slow" result))
    (should-not (string-match-p "\\`Error" result))))

(ert-deftest mevedel-e2e:a-running-commands-output-is-an-artifact ()
  "The notice names artifact://, which lists and reads while the command runs."
  (let* ((run (mevedel-e2e-headless
               :steps '(((tool_calls . [((name . "Bash")
                                         (arguments . ((command . "seq 1 20000; sleep 3; echo done")
                                                       (description . "long")
                                                       (yield_time_ms . 500))))]))
                        ((tool_calls . [((name . "Read") (arguments . ((file_path . "artifact://"))))]))
                        ((text . "ok") (times . 5)))
               :args '("-p" "count slowly")))
         (notice (resource-e2e--result-with (plist-get run :log) "full output: "))
         (listing (resource-e2e--result-with (plist-get run :log) "# artifact://tool-results/")))
    (should (eql (plist-get run :status) 0))
    (should notice)
    (should (string-match "full output: \\(artifact://tool-results/exec-[^ ]+\\.out\\)" notice))
    (let ((address (match-string 1 notice)))
      (should-not (string-search (plist-get run :root) notice))
      ;; Listed while the command still runs (it sleeps after its output).
      (should listing)
      (should (string-search address listing)))))

(provide 'resource-e2e-test)
;;; resource-e2e-test.el ends here
