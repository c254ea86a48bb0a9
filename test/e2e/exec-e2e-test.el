;;; exec-e2e-test.el --- Bash in a real session against the scripted model  -*- lexical-binding: t; -*-

;;; Commentary:

;; A real mevedel session (M-x mevedel's code path) whose model, the
;; scripted server, calls Bash: the command runs in the workspace, the
;; model receives its output and exit facts, and the view's row shows
;; the command's first line and its exit status.  A command that
;; yields and then finishes while the session is idle is delivered as
;; an EXECUTION <agent-message> in one background turn.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun exec-e2e--allow-bash (chat)
  "Let CHAT run Bash without a permission card."
  (setf (mevedel-chat-permission-mode chat) 'full-auto))

(mevedel-e2e-deftest-matrix mevedel-e2e:bash-output-reaches-the-model
    "The model calls Bash and receives its output and exit facts.
The view's row shows the command's first line and its exit status."
    (wire stream)
  (let* ((run (mevedel-e2e-run
               :wire wire :stream stream
               :files '(("data.txt" . "alpha\nbeta\n"))
               :prompt "Count the lines of data.txt"
               :setup #'exec-e2e--allow-bash
               :steps `(((tool_calls . [((name . "Bash")
                                         (arguments . ((command . "wc -l < data.txt; echo marker-$((6 * 7))")
                                                       (description . "count lines"))))]))
                        ((expect . ((results . [((contains . "2\nmarker-42\n")
                                                 (contains . "exit_code=\"0\"")
                                                 (lacks . "mevedel-render-data"))])))
                         (text . "data.txt has 2 lines.")))))
         (log (plist-get run :log))
         (served (mevedel-e2e-served-ids log))
         (rows (plist-get run :rows)))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length log) 2))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    (let ((content (mevedel-e2e-result-content (nth 1 log) (car (nth 0 served)))))
      (should (string-prefix-p "2\nmarker-42\n<bash-execution " content))
      (should (string-match-p "outcome=\"success\"" content))
      (should (string-match-p "command=\"wc -l &lt; data.txt; echo marker-\\$((6 \\* 7))\""
                              content)))
    (should (= (length rows) 1))
    (should (string-match-p
             "✓ \\$ wc -l < data\\.txt; echo marker-\\$((6 \\* 7))  done (exit 0) [0-9.]+m?s"
             (cdr (car rows))))
    ;; It never yielded: no completion breadcrumb.
    (should-not (string-match-p "↳" (plist-get run :transcript)))
    (should (string-match-p "data\\.txt has 2 lines\\.\n\\'" (plist-get run :transcript)))))

(ert-deftest mevedel-e2e:background-bash-wakes-one-turn ()
  "A yielded command that finishes while the session is idle wakes it once.
Its EXECUTION record reaches the model as an <agent-message> block in
the background turn's request, after which the mail is delivered."
  (let* ((turns nil)
         (run (mevedel-e2e-run
               :wire 'openai :stream t :timeout 30
               :prompt "Start the slow job"
               :setup (lambda (chat)
                        (exec-e2e--allow-bash chat)
                        (mevedel-chat-observe chat (lambda (event _chat &rest args)
                                                     (when (eq event 'turn-end)
                                                       (push (car args) turns)))))
               :steps `(((tool_calls . [((name . "Bash")
                                         (arguments . ((command . "sleep 1; echo late-result")
                                                       (description . "slow job")
                                                       (yield_time_ms . 250))))]))
                        ((expect . ((results . [((contains . "Still running"))])))
                         (text . "It is running in the background."))
                        ((expect . ((user_contains . "late-result")))
                         (text . "The slow job printed late-result.")))
               :inspect (lambda (_chat _view)
                          ;; The first turn is over; the completion wakes a second.
                          (mevedel-test-wait-until (= (length turns) 2) 15)
                          ;; No third turn follows.
                          (accept-process-output nil 1.5)
                          (length turns))))
         (log (plist-get run :log)))
    (should (eq (plist-get run :outcome) 'done))
    (should (equal (plist-get run :inspected) 2))
    (should (equal turns '(done done)))
    (should (= (length log) 3))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    (let ((body (json-encode (alist-get 'body (nth 2 log)))))
      (should (string-match-p (regexp-quote "<agent-message type=\\\"EXECUTION\\\" sender=\\\"/root\\\" recipient=\\\"/root\\\" execution_id=\\\"x")
                              body))
      (should (string-match-p (regexp-quote "description=\\\"slow job\\\"") body))
      (should (string-match-p (regexp-quote "outcome=\\\"success\\\" exit_code=\\\"0\\\">") body))
      (should (string-match-p (regexp-quote mevedel-mailbox-wake-prompt) body))
      ;; The settled row's render-data (breadcrumb included) stays hidden.
      (should-not (string-match-p "mevedel-render-data\\|:breadcrumb" body)))
    ;; Neither the mail nor the wake prompt is shown as the user's text;
    ;; the background turn begins with its notice instead.
    (let ((transcript (plist-get run :transcript)))
      (should-not (string-match-p "agent-message" transcript))
      (should-not (string-match-p (regexp-quote mevedel-mailbox-wake-prompt) transcript))
      (should (= (cl-count ?❯ transcript) 1))
      ;; The yielded command left one breadcrumb at its row; delivering
      ;; its result added none.
      (should (= (cl-count ?↳ transcript) 1))
      (should (string-match-p (concat "\\$ sleep 1; echo late-result  done (exit 0) [0-9.]+m?s\n"
                                      "    ↳ \\$ sleep 1; echo late-result — completed (exit 0)\n")
                              transcript))
      (should (string-match-p (concat (regexp-quote mevedel-mailbox-wake-notice)
                                      "\\(?:.\\|\n\\)*The slow job printed late-result\\.")
                              transcript)))))

(provide 'exec-e2e-test)
;;; exec-e2e-test.el ends here
