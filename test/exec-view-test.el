;;; exec-view-test.el --- Executions in the session view  -*- lexical-binding: t; -*-

;;; Commentary:

;; Real commands run through the pipeline in a chat's session.  A
;; running command's row follows its progress (state, elapsed time,
;; latest output) until it settles.  The background work panel above
;; the composer lists the yielded ones, expands in place without
;; consuming output, keeps an expanded item that ended until it is
;; collapsed, folds long lists behind [Show all N] and stops items.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defun exec-view-test--text (view)
  "Return the panel's text in VIEW."
  (with-current-buffer view
    (buffer-substring-no-properties mevedel-view--panel mevedel-view--separator)))

(defun exec-view-test--yield (chat id command &optional description)
  "Start COMMAND as Bash call ID of CHAT, yielding at once; return its execution."
  (should (string-match-p "state=\"running\""
                          (mevedel-test-run-tool chat "Bash" id
                                                 (list :command command
                                                       :description (or description "panel job")
                                                       :yield_time_ms 250)
                                                 t)))
  (mevedel-test-execution-id chat id))

(defun exec-view-test--goto (view id)
  "Move point in VIEW to the panel line of execution ID; return the position."
  (with-current-buffer view
    (let ((match (save-excursion
                   (goto-char mevedel-view--panel)
                   (text-property-search-forward 'mevedel-panel-item id t))))
      (should match)
      (goto-char (prop-match-beginning match)))))

(defun exec-view-test--row (view id)
  "Return the text of the row of call ID in VIEW."
  (with-current-buffer view
    (save-excursion
      (goto-char (point-min))
      (let ((match (text-property-search-forward 'mevedel-row id t)))
        (should match)
        (buffer-substring-no-properties (prop-match-beginning match) (prop-match-end match))))))

(ert-deftest mevedel-exec-view:running-row-follows-progress ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    (let ((session (mevedel-session-id (mevedel-chat-session chat))))
      (exec-view-test--yield chat "call_slow" "echo early; sleep 2.5; printf 'la%s\\n' te-line; sleep 1.5"
                             "slow printer")
      (switch-to-buffer view)
      (should (string-match-p "\\$ echo early; .*running [0-9]+ms\n" (exec-view-test--row view "call_slow")))
      ;; After two seconds, progress brings the elapsed time and, in the
      ;; expanded body, the latest output: no transcript is written.
      (with-current-buffer view
        (puthash "call_slow" t mevedel-view--expanded)
        (mevedel-view--refresh-row "call_slow"))
      (mevedel-test-wait-until
        (string-match-p "late-line" (exec-view-test--row view "call_slow")) 10)
      (should (string-match-p "running [2-9]\\.[0-9]s" (exec-view-test--row view "call_slow")))
      (should (mevedel-chat-call-progress chat "call_slow"))
      (with-current-buffer (mevedel-chat-data-buffer chat)
        (should-not (string-match-p "late-line" (buffer-string))))
      ;; Settled: the final facts replace the progress.
      (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10)
      (mevedel-test-wait-until
        (string-match-p "done (exit 0)" (exec-view-test--row view "call_slow")) 5)
      (should-not (mevedel-chat-call-progress chat "call_slow")))))

(ert-deftest mevedel-panel:lists-expands-and-keeps-output-unread ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    (let* ((session (mevedel-session-id (mevedel-chat-session chat)))
           (job (exec-view-test--yield chat "call_job"
                                   "echo first; sleep 1; echo second-line; sleep 300"
                                   "counts slowly")))
      (switch-to-buffer view)
      ;; The composer keeps its text and point through panel redraws.
      (with-current-buffer view
        (mevedel-view--set-composer "half-typed")
        (goto-char (point-max)))
      (mevedel-panel-redraw view)
      (should (string-match-p "Background work (1)" (exec-view-test--text view)))
      (should (string-match-p "▸ \\$ counts slowly  running" (exec-view-test--text view)))
      ;; A foreground command is its tool row's, not the panel's.
      (let ((box (mevedel-test-start-tool chat "Bash" "call_fg"
                                          '(:command "sleep 2" :description "in front"
                                                     :yield_time_ms 30000))))
        (mevedel-test-wait-until
          (= 2 (length (mevedel-core-exec-list session))) 5)
        (mevedel-panel-redraw view)
        (should-not (string-match-p "in front" (exec-view-test--text view)))
        (mevedel-test-wait-until (car box) 10))
      ;; Expanding shows the latest output and the actions, in place.
      (exec-view-test--goto view job)
      (with-current-buffer view
        (should (eq (key-binding (kbd "RET")) #'mevedel-panel-toggle))
        (mevedel-panel-toggle))
      (mevedel-test-wait-until (string-match-p "second-line" (exec-view-test--text view)) 10)
      (let ((text (exec-view-test--text view)))
        (should (string-match-p "▾ \\$ counts slowly" text))
        (should (string-match-p "      first\n      second-line\n" text))
        (should (string-match-p "\\[Open output\\] \\[Show call\\] \\[Stop\\]" text)))
      (with-current-buffer view
        (should (equal (mevedel-view--composer-text) "half-typed")))
      ;; Open output reads the spool; the model still gets all of it.
      (mevedel-test-press-panel-button view "Open output")
      (with-current-buffer (format "*mevedel output: %s*" job)
        (should (string-match-p "first\nsecond-line\n" (buffer-string)))
        (kill-buffer))
      (let ((poll (mevedel-test-run-tool chat "WriteStdin" "call_poll"
                                         (list :execution_id job :chars "" :yield_time_ms 5000))))
        (should (string-match-p "second-line" poll)))
      ;; Show call reveals the row that started it.
      (mevedel-test-press-panel-button view "Show call")
      (with-current-buffer view
        (should (equal (get-text-property (point) 'mevedel-row) "call_job")))
      ;; Stop (confirmed) ends it; expanded, it stays marked until collapsed.
      (switch-to-buffer view)
      (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) t)))
        (mevedel-test-press-panel-button view "Stop"))
      (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10)
      (mevedel-test-wait-until (string-match-p "counts slowly  stopped" (exec-view-test--text view)) 5)
      (should (string-match-p "\\[Collapse\\]" (exec-view-test--text view)))
      (should (string-match-p "second-line" (exec-view-test--text view)))
      (mevedel-test-press-panel-button view "Collapse")
      (should (equal (exec-view-test--text view) "")))))

(ert-deftest mevedel-panel:ended-items-leave-and-long-lists-fold ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    (let* ((session (mevedel-session-id (mevedel-chat-session chat)))
           (ids (cl-loop for n below 6
                         collect (exec-view-test--yield chat (format "call_%d" n) "sleep 300"
                                                    (format "sleeper %d" n))))
           (short (exec-view-test--yield chat "call_short" "sleep 1.5" "short one")))
      (switch-to-buffer view)
      (mevedel-panel-redraw view)
      (should (string-match-p "Background work (7)" (exec-view-test--text view)))
      (should (= 5 (cl-count-if (lambda (line) (string-prefix-p "  ▸" line))
                                (split-string (exec-view-test--text view) "\n"))))
      (mevedel-test-press-panel-button view "Show all 7")
      (should (= 7 (cl-count-if (lambda (line) (string-prefix-p "  ▸" line))
                                (split-string (exec-view-test--text view) "\n"))))
      ;; A collapsed item that ends leaves the panel by itself.
      (mevedel-test-wait-until (not (string-match-p "short one" (exec-view-test--text view))) 10)
      (should-not (member short (mapcar (lambda (item) (plist-get item :id))
                                        (mevedel-core-exec-list session))))
      (should (string-match-p "Background work (6)" (exec-view-test--text view)))
      ;; [Manage] opens the session's table.
      (mevedel-test-press-panel-button view "Manage")
      (with-current-buffer (format "*mevedel ps: %s*" (mevedel-chat-name chat))
        (should (= 6 (length tabulated-list-entries))))
      (dolist (id ids) (mevedel-ps-stop-execution chat id))
      (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10)
      (mevedel-test-wait-until (equal (exec-view-test--text view) "") 5))))

(provide 'exec-view-test)
;;; exec-view-test.el ends here
