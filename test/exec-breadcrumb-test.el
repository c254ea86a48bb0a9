;;; exec-breadcrumb-test.el --- Completion breadcrumbs of yielded commands  -*- lexical-binding: t; -*-

;;; Commentary:

;; Real commands run through the pipeline in a chat's session; their
;; results go into the chat's data buffer the way gptel writes them,
;; and the view shows them.  A command that yielded and then ended
;; leaves exactly one breadcrumb line at its row, however its end was
;; observed; a foreground command leaves none.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defun exec-breadcrumb-test--render-data (chat id)
  "Return the render-data of call ID in CHAT's data buffer."
  (mevedel-render-data-extract (mevedel-chat-data-buffer chat) id))

(defun exec-breadcrumb-test--transcript (view)
  "Return the transcript text of VIEW."
  (with-current-buffer view
    (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))

(defun exec-breadcrumb-test--crumbs (view)
  "Return the breadcrumb lines of VIEW's transcript."
  (cl-remove-if-not (lambda (line) (string-prefix-p "    ↳ " line))
                    (split-string (exec-breadcrumb-test--transcript view) "\n")))

(defun exec-breadcrumb-test--settled-p (chat id)
  "Return non-nil when call ID of CHAT has its breadcrumb."
  (plist-get (exec-breadcrumb-test--render-data chat id) :breadcrumb))

(defun exec-breadcrumb-test--yielded-bash (chat id command)
  "Start COMMAND as Bash call ID of CHAT, yielding after 250 ms; insert its row.
Return the execution ID."
  (let* ((args (list :command command :description "background job" :yield_time_ms 250))
         (result (mevedel-test-run-tool chat "Bash" id args t)))
    (should (string-match-p "state=\"running\"" result))
    (plist-get (exec-breadcrumb-test--render-data chat id) :execution-id)))

(ert-deftest mevedel-exec-breadcrumb:yielded-completion-leaves-one ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    (let* ((settlements nil)
           (capture (lambda (data) (push data settlements)))
           (session (mevedel-session-id (mevedel-chat-session chat))))
      (add-hook 'mevedel-tool-exec-settled-functions capture)
      (unwind-protect
          (let ((execution (exec-breadcrumb-test--yielded-bash
                            chat "call_y" "sleep 0.6; echo done-marker")))
            (should (string-match-p "running" (exec-breadcrumb-test--transcript view)))
            (should-not (exec-breadcrumb-test--crumbs view))
            (mevedel-test-wait-until (exec-breadcrumb-test--settled-p chat "call_y") 10)
            ;; The view followed the event: the row is settled, one line below it.
            (should (equal (exec-breadcrumb-test--crumbs view)
                           '("    ↳ $ sleep 0.6; echo done-marker — completed (exit 0)")))
            (should (string-match-p
                     "▸ ✓ \\$ sleep 0\\.6; echo done-marker  done (exit 0) [0-9.]+m?s\n    ↳ "
                     (exec-breadcrumb-test--transcript view)))
            (let ((crumb (plist-get (exec-breadcrumb-test--render-data chat "call_y") :breadcrumb)))
              (should (equal (plist-get crumb :execution-id) execution))
              (should (equal (plist-get crumb :owner) "/root"))
              (should (equal (plist-get crumb :session) session)))
            ;; Taking the mail for the next request leaves the one
            ;; breadcrumb alone (test/e2e/exec-e2e-test.el shows the
            ;; delivering turn itself).
            (let ((blocks (mevedel-mailbox-chat-messages chat)))
              (should (= (length blocks) 1))
              (should (string-match-p "done-marker" (car blocks))))
            ;; Repeated polls and a retried event add nothing.
            (dotimes (_ 2)
              (should (string-match-p
                       "done-marker"
                       (mevedel-test-run-tool chat "WriteStdin" "call_poll"
                                              (list :execution_id execution :chars "")))))
            (should (= (length settlements) 1))
            (let ((data-text (with-current-buffer (mevedel-chat-data-buffer chat)
                               (buffer-string))))
              (mevedel-tool-exec--on-settled (car settlements))
              (should (equal (with-current-buffer (mevedel-chat-data-buffer chat) (buffer-string))
                             data-text)))
            (mevedel-view-rerender view)
            (should (= (length (exec-breadcrumb-test--crumbs view)) 1))
            (should-not (string-match-p "agent-message" (exec-breadcrumb-test--transcript view)))
            ;; RET on the breadcrumb shows the original result row, expanded.
            (with-current-buffer view
              (goto-char (point-min))
              (search-forward "↳")
              (should (eq (key-binding (kbd "RET")) #'mevedel-view-show-result))
              (mevedel-view-show-result)
              (should (equal (get-text-property (point) 'mevedel-row) "call_y"))
              (should (looking-at-p "▾ ✓ \\$ sleep 0\\.6"))
              (should (string-match-p "    \\$ sleep 0\\.6; echo done-marker\n"
                                      (exec-breadcrumb-test--transcript view)))))
        (remove-hook 'mevedel-tool-exec-settled-functions capture)))))

(ert-deftest mevedel-exec-breadcrumb:foreground-completion-leaves-none ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    (let ((result (mevedel-test-run-tool
                   chat "Bash" "call_f" '(:command "echo quick" :description "quick") t)))
      (should (string-match-p "state=\"completed\"" result))
      ;; Give a (wrong) breadcrumb every chance to arrive.
      (accept-process-output nil 0.5)
      (should-not (exec-breadcrumb-test--settled-p chat "call_f"))
      (should-not (exec-breadcrumb-test--crumbs view))
      (should (string-match-p "✓ \\$ echo quick  done (exit 0)"
                              (exec-breadcrumb-test--transcript view))))))

(ert-deftest mevedel-exec-breadcrumb:identical-concurrent-commands-leave-two ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    (let ((a (exec-breadcrumb-test--yielded-bash chat "call_a" "sleep 0.5; echo same"))
          (b (exec-breadcrumb-test--yielded-bash chat "call_b" "sleep 0.5; echo same")))
      (should-not (equal a b))
      (mevedel-test-wait-until (and (exec-breadcrumb-test--settled-p chat "call_a")
                                    (exec-breadcrumb-test--settled-p chat "call_b"))
                               10)
      (should (equal (exec-breadcrumb-test--crumbs view)
                     (make-list 2 "    ↳ $ sleep 0.5; echo same — completed (exit 0)")))
      ;; Each sits at its own row.
      (with-current-buffer view
        (dolist (pair (list (cons "call_a" a) (cons "call_b" b)))
          (let ((start (mevedel-view--row-start (car pair))))
            (goto-char start)
            (forward-line 1)
            (should (equal (get-text-property (point) 'mevedel-breadcrumb) (car pair)))
            (should (equal (plist-get (plist-get (exec-breadcrumb-test--render-data
                                                  chat (car pair))
                                                 :breadcrumb)
                                      :execution-id)
                           (cdr pair)))))))))

(ert-deftest mevedel-exec-breadcrumb:stops-and-failures-name-their-outcome ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    (let ((session (mevedel-session-id (mevedel-chat-session chat)))
          (by-model (exec-breadcrumb-test--yielded-bash chat "call_m" "sleep 30"))
          (by-user (exec-breadcrumb-test--yielded-bash chat "call_u" "sleep 30"))
          (failing (exec-breadcrumb-test--yielded-bash chat "call_x" "sleep 0.4\nexit 3")))
      (should (string-match-p "termination=\"stopped\""
                              (mevedel-test-run-tool chat "StopExecution" "call_stop"
                                                     (list :execution_id by-model))))
      (should (mevedel-core-exec-stop-by-user session by-user))
      (mevedel-test-wait-until (and (exec-breadcrumb-test--settled-p chat "call_m")
                                    (exec-breadcrumb-test--settled-p chat "call_u")
                                    (exec-breadcrumb-test--settled-p chat "call_x"))
                               15)
      (should failing)
      (let ((crumbs (exec-breadcrumb-test--crumbs view)))
        (should (= (length crumbs) 3))
        (should (string-match-p "\\`    ↳ \\$ sleep 30 — stopped\\(?: (signal 15)\\)?\\'"
                                (nth 0 crumbs)))
        (should (string-match-p "\\`    ↳ \\$ sleep 30 — stopped" (nth 1 crumbs)))
        (should (equal (nth 2 crumbs) "    ↳ $ sleep 0.4 … — failed (exit 3)")))
      (should (string-match-p "stopped" (plist-get (exec-breadcrumb-test--render-data
                                                    chat "call_u")
                                                   :outcome))))))

(ert-deftest mevedel-exec-breadcrumb:completion-before-its-row-waits-for-it ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    ;; A turn is running whose other calls still work, so the yielded
    ;; result has not reached the data buffer when the command ends.
    (setf (mevedel-chat-turn chat) (list :id "turn"))
    (let* ((args '(:command "sleep 0.3; echo early" :description "early" :yield_time_ms 250))
           (result (mevedel-test-run-tool chat "Bash" "call_e" args)))
      (should (string-match-p "state=\"running\"" result))
      (mevedel-test-wait-until (mevedel-chat-updates chat) 10)
      (mevedel-test-insert-call chat "Bash" "call_e" args result)
      (should-not (exec-breadcrumb-test--crumbs view))
      (mevedel-chat--finish chat 'done)
      (should-not (mevedel-chat-updates chat))
      (should (equal (exec-breadcrumb-test--crumbs view)
                     '("    ↳ $ sleep 0.3; echo early — completed (exit 0)"))))))

(ert-deftest mevedel-exec-breadcrumb:texts ()
  (should (equal (mevedel-tool-exec-outcome-word '(:outcome "no-match")) "completed"))
  (should (equal (mevedel-tool-exec-outcome-word '(:outcome "timeout")) "timed out"))
  (should (equal (mevedel-tool-exec-outcome-word '(:outcome "failure")) "failed"))
  (should (equal (mevedel-tool-exec-outcome-word '(:outcome "stopped")) "stopped"))
  (let ((monitor (mevedel-tool-exec-breadcrumb
                  '(:session "s" :owner "/root" :id "x1" :kind "monitor" :command "tail -f log"
                             :description "errors in the log" :yielded t
                             :facts (:outcome "timeout" :termination "timeout")))))
    (should (equal (mevedel-tool-exec-breadcrumb-text monitor)
                   "Watching: errors in the log — timed out")))
  (should (equal (mevedel-tool-exec-breadcrumb-text
                  (mevedel-tool-exec-breadcrumb
                   (list :session "s" :owner "/root" :id "x2" :kind "bash" :yielded t
                         :command (concat (make-string 70 ?a) "\nsecond")
                         :facts '(:outcome "failure" :signal 9))))
                 (concat "$ " (make-string 59 ?a) "… … — failed (signal 9)")))
  (should-error (mevedel-tool-render-validate '(:header "h" :breadcrumb "two\nlines")))
  ;; Another execution's row, or a foreground one, is left alone.
  (let ((data '(:execution-id "x3" :state "running")))
    (should (eq (mevedel-tool-exec-settle-render-data data '(:id "x4" :yielded t :facts nil)) data))
    (should (eq (mevedel-tool-exec-settle-render-data data '(:id "x3" :yielded nil :facts nil)) data))))

(provide 'exec-breadcrumb-test)
;;; exec-breadcrumb-test.el ends here
