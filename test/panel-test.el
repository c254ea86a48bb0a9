;;; panel-test.el --- The view's background work panel  -*- lexical-binding: t; -*-

;;; Commentary:

;; Real commands run through the pipeline in a chat's session; the
;; panel above the composer lists the yielded ones, expands in place
;; without consuming output, keeps an expanded item that ended until it
;; is collapsed, folds long lists behind [Show all N] and stops items.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defun panel-test--text (view)
  "Return the panel's text in VIEW."
  (with-current-buffer view
    (buffer-substring-no-properties mevedel-view--panel mevedel-view--separator)))

(defun panel-test--yield (chat id command &optional description)
  "Start COMMAND as Bash call ID of CHAT, yielding at once; return its execution."
  (should (string-match-p "state=\"running\""
                          (mevedel-test-run-tool chat "Bash" id
                                                 (list :command command
                                                       :description (or description "panel job")
                                                       :yield_time_ms 250)
                                                 t)))
  (mevedel-test-execution-id chat id))

(defun panel-test--goto (view id)
  "Move point in VIEW to the panel line of execution ID; return the position."
  (with-current-buffer view
    (let ((match (save-excursion
                   (goto-char mevedel-view--panel)
                   (text-property-search-forward 'mevedel-panel-item id t))))
      (should match)
      (goto-char (prop-match-beginning match)))))

(defun panel-test--press (view label)
  "Press the button labelled [LABEL] in VIEW's panel."
  (with-current-buffer view
    (goto-char mevedel-view--panel)
    (should (search-forward (concat "[" label "]") mevedel-view--separator t))
    (push-button (match-beginning 0))))

(ert-deftest mevedel-panel:lists-expands-and-keeps-output-unread ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    (let* ((session (mevedel-session-id (mevedel-chat-session chat)))
           (job (panel-test--yield chat "call_job"
                                   "echo first; sleep 1; echo second-line; sleep 300"
                                   "counts slowly")))
      (switch-to-buffer view)
      ;; The composer keeps its text and point through panel redraws.
      (with-current-buffer view
        (mevedel-view--set-composer "half-typed")
        (goto-char (point-max)))
      (mevedel-panel-redraw view)
      (should (string-match-p "Background work (1)" (panel-test--text view)))
      (should (string-match-p "▸ \\$ counts slowly  running" (panel-test--text view)))
      ;; A foreground command is its tool row's, not the panel's.
      (let ((box (list nil)))
        (with-current-buffer (mevedel-chat-data-buffer chat)
          (mevedel-pipeline-run-tool (mevedel-tool-get "Bash")
                                     '(:command "sleep 2" :description "in front"
                                                :yield_time_ms 30000)
                                     (lambda (result) (setcar box (list result)))
                                     :tool-use-id "call_fg" :data-buffer (current-buffer)))
        (mevedel-test-wait-until
          (= 2 (length (mevedel-core-exec-list session))) 5)
        (mevedel-panel-redraw view)
        (should-not (string-match-p "in front" (panel-test--text view)))
        (mevedel-test-wait-until (car box) 10))
      ;; Expanding shows the latest output and the actions, in place.
      (panel-test--goto view job)
      (with-current-buffer view
        (should (eq (key-binding (kbd "RET")) #'mevedel-panel-toggle))
        (mevedel-panel-toggle))
      (mevedel-test-wait-until (string-match-p "second-line" (panel-test--text view)) 10)
      (let ((text (panel-test--text view)))
        (should (string-match-p "▾ \\$ counts slowly" text))
        (should (string-match-p "      first\n      second-line\n" text))
        (should (string-match-p "\\[Open output\\] \\[Show call\\] \\[Stop\\]" text)))
      (with-current-buffer view
        (should (equal (mevedel-view--composer-text) "half-typed")))
      ;; Open output reads the spool; the model still gets all of it.
      (panel-test--press view "Open output")
      (with-current-buffer (format "*mevedel output: %s*" job)
        (should (string-match-p "first\nsecond-line\n" (buffer-string)))
        (kill-buffer))
      (let ((poll (mevedel-test-run-tool chat "WriteStdin" "call_poll"
                                         (list :execution_id job :chars "" :yield_time_ms 5000))))
        (should (string-match-p "second-line" poll)))
      ;; Show call reveals the row that started it.
      (panel-test--press view "Show call")
      (with-current-buffer view
        (should (equal (get-text-property (point) 'mevedel-row) "call_job")))
      ;; Stop (confirmed) ends it; expanded, it stays marked until collapsed.
      (switch-to-buffer view)
      (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) t)))
        (panel-test--press view "Stop"))
      (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10)
      (mevedel-test-wait-until (string-match-p "counts slowly  stopped" (panel-test--text view)) 5)
      (should (string-match-p "\\[Collapse\\]" (panel-test--text view)))
      (should (string-match-p "second-line" (panel-test--text view)))
      (panel-test--press view "Collapse")
      (should (equal (panel-test--text view) "")))))

(ert-deftest mevedel-panel:ended-items-leave-and-long-lists-fold ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    (let* ((session (mevedel-session-id (mevedel-chat-session chat)))
           (ids (cl-loop for n below 6
                         collect (panel-test--yield chat (format "call_%d" n) "sleep 300"
                                                    (format "sleeper %d" n))))
           (short (panel-test--yield chat "call_short" "sleep 1.5" "short one")))
      (switch-to-buffer view)
      (mevedel-panel-redraw view)
      (should (string-match-p "Background work (7)" (panel-test--text view)))
      (should (= 5 (cl-count-if (lambda (line) (string-prefix-p "  ▸" line))
                                (split-string (panel-test--text view) "\n"))))
      (panel-test--press view "Show all 7")
      (should (= 7 (cl-count-if (lambda (line) (string-prefix-p "  ▸" line))
                                (split-string (panel-test--text view) "\n"))))
      ;; A collapsed item that ends leaves the panel by itself.
      (mevedel-test-wait-until (not (string-match-p "short one" (panel-test--text view))) 10)
      (should-not (member short (mapcar (lambda (item) (plist-get item :id))
                                        (mevedel-core-exec-list session))))
      (should (string-match-p "Background work (6)" (panel-test--text view)))
      ;; [Manage] opens the session's table.
      (panel-test--press view "Manage")
      (with-current-buffer (format "*mevedel ps: %s*" (mevedel-chat-name chat))
        (should (= 6 (length tabulated-list-entries))))
      (dolist (id ids) (mevedel-ps-stop-execution chat id))
      (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10)
      (mevedel-test-wait-until (equal (panel-test--text view) "") 5))))

(provide 'panel-test)
;;; panel-test.el ends here
