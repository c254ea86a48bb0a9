;;; ps-test.el --- The executions table (M-x mevedel-ps)  -*- lexical-binding: t; -*-

;;; Commentary:

;; Real commands run through the pipeline in a chat's session, and the
;; table of its executions: what it lists, stopping from it, showing
;; the call that started one, its details, typing into its terminal,
;; interrupting it, opening the output without reading it for the
;; model, and the composer's /ps and /stop.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defun ps-test--goto (execution)
  "Move point to the table line of EXECUTION."
  (goto-char (point-min))
  (while (and (not (eobp)) (not (equal (tabulated-list-get-id) execution)))
    (forward-line 1))
  (should (equal (tabulated-list-get-id) execution)))

(defun ps-test--state (execution)
  "Return the State column of EXECUTION in the current table, or nil."
  (when-let* ((entry (assoc execution tabulated-list-entries)))
    (substring-no-properties (aref (cadr entry) 2))))

(ert-deftest mevedel-ps:lists-inspects-without-reading-and-stops ()
  (mevedel-core-ensure)
  (mevedel-test-with-view _view chat
    (let* ((mevedel-sandbox-mode 'off)  ; "echo $$" below must print the group's id.
           (session (mevedel-session-id (mevedel-chat-session chat)))
           (result (mevedel-test-run-tool chat "Bash" "call_late"
                                          '(:command "sleep 1; echo late-output; sleep 1.5"
                                                     :description "late printer" :yield_time_ms 250) t))
           (late (mevedel-test-execution-id chat "call_late"))
           (long (progn
                   (should (string-match-p "state=\"running\"" result))
                   (mevedel-test-run-tool chat "Bash" "call_long"
                                          '(:command "echo $$; sleep 300" :description "long nap"
                                                     :yield_time_ms 300) t)
                   (mevedel-test-execution-id chat "call_long")))
           (pgid (with-current-buffer (mevedel-chat-data-buffer chat)
                   (goto-char (point-min))
                   (re-search-forward "^\\([0-9]+\\)$")
                   (string-to-number (match-string 1))))
           (ps (mevedel-ps chat)))
      (should (mevedel-test-group-members pgid))
      (with-current-buffer ps
        (should (derived-mode-p 'mevedel-ps-mode))
        (should (eq (key-binding (kbd "k")) #'mevedel-ps-stop))
        (should (eq (key-binding (kbd "o")) #'mevedel-ps-open-output))
        (should (eq (key-binding (kbd "RET")) #'mevedel-ps-show-entry))
        ;; Both yielded commands are listed with what the model called them.
        (let ((row (cadr (assoc long tabulated-list-entries))))
          (should row)
          (should (equal (mapcar #'substring-no-properties (append row nil))
                         (list "Bash" long "running" "long nap" "/root" (aref row 5) (aref row 6)
                               "off")))
          (should (string-match-p "\\`[0-9.]+s\\'" (aref row 5))))
        (should (assoc late tabulated-list-entries))
        ;; Its output, opened while it runs, is all there...
        (let ((spool (plist-get (gethash late mevedel-ps--items) :spool)))
          (mevedel-test-wait-until
            (and (file-exists-p spool)
                 (string-match-p "late-output"
                                 (with-temp-buffer (insert-file-contents spool) (buffer-string))))
            10))
        (ps-test--goto late)
        (let ((output (mevedel-ps-open-output)))
          (with-current-buffer output
            (should buffer-read-only)
            (should (equal (buffer-string) "late-output\n")))
          (kill-buffer output)))
      ;; ...and still unread for the model: its next poll returns it.
      (let ((poll (mevedel-test-run-tool chat "WriteStdin" "call_poll"
                                         (list :execution_id late :chars "" :yield_time_ms 5000) t)))
        (should (string-prefix-p "late-output\n<bash-execution" poll))
        (should (string-match-p "state=\"completed\"" poll))
        ;; The poll saw it end: its row has its breadcrumb all the same.
        (mevedel-test-wait-until
          (plist-get (mevedel-render-data-extract (mevedel-chat-data-buffer chat) "call_late")
                     :breadcrumb)
          5)
        (should (equal (plist-get (plist-get (mevedel-render-data-extract
                                              (mevedel-chat-data-buffer chat) "call_late")
                                             :breadcrumb)
                                  :outcome)
                       "completed")))
      ;; RET shows the call that started it, in the chat's view.
      (with-current-buffer ps
        (mevedel-ps-refresh)
        (ps-test--goto long)
        (mevedel-ps-show-entry)
        (should (eq (current-buffer) (mevedel-view-buffer chat)))
        (should (equal (get-text-property (point) 'mevedel-row) "call_long")))
      ;; Stopping asks first; no means no.
      (with-current-buffer ps
        (ps-test--goto long)
        (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) nil)))
          (mevedel-ps-stop))
        (accept-process-output nil 0.3)
        (should (mevedel-test-group-members pgid))
        (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) t)))
          (mevedel-ps-stop))
        (mevedel-test-wait-until (null (mevedel-test-group-members pgid)) 10)
        (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10)
        ;; The table follows the settlement by itself: ended executions
        ;; leave it (their results stay on their rows).
        (mevedel-test-wait-until (null tabulated-list-entries) 5)
        (should-not (ps-test--state late))
        (should-error (mevedel-ps-stop) :type 'user-error)))))

(ert-deftest mevedel-ps:lists-foreground-commands-and-monitors ()
  (mevedel-core-ensure)
  (mevedel-test-with-view _view chat
    (let* ((session (mevedel-session-id (mevedel-chat-session chat)))
           (box nil)
           (monitor (progn
                      (mevedel-test-run-tool chat "Monitor" "call_mon"
                                             '(:command "sleep 300" :description "nothing happens") t)
                      (mevedel-test-execution-id chat "call_mon"))))
      ;; A foreground command is still its request's: listed, marked so.
      (setq box (mevedel-test-start-tool chat "Bash" "call_fg"
                                         '(:command "sleep 3" :description "short nap"
                                                    :yield_time_ms 30000)))
      (mevedel-test-wait-until
        (equal (mapcar (lambda (item) (plist-get item :state)) (mevedel-core-exec-list session))
               '("running" "running"))
        5)
      ;; From the chat's view, C-c C-e opens the table of its session.
      (with-current-buffer (mevedel-view-buffer chat)
        (should (eq (key-binding (kbd "C-c C-e")) #'mevedel-ps))
        (call-interactively #'mevedel-ps))
      (with-current-buffer (format "*mevedel ps: %s*" (mevedel-chat-name chat))
        (should (eq mevedel-ps--chat chat))
        (let ((states (mapcar (lambda (entry)
                                (cons (substring-no-properties (aref (cadr entry) 3))
                                      (substring-no-properties (aref (cadr entry) 2))))
                              tabulated-list-entries)))
          (should (member '("Watching: nothing happens" . "running (0 events)") states))
          (should (member '("short nap" . "running (fg)") states))))
      (mevedel-test-wait-until (car box) 10)
      (should (string-match-p "state=\"completed\"" (caar box)))
      (mevedel-core-exec-stop-by-user session monitor)
      (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10))))

(ert-deftest mevedel-ps:details-input-and-interrupt-leave-output-unread ()
  (mevedel-core-ensure)
  (mevedel-test-with-view _view chat
    (let* ((session (mevedel-session-id (mevedel-chat-session chat)))
           (pty (progn (mevedel-test-run-tool chat "Bash" "call_pty"
                                              '(:command "echo ready; read x; echo got $x; sleep 300"
                                                         :description "asks a question" :tty t
                                                         :yield_time_ms 500) t)
                       (mevedel-test-execution-id chat "call_pty")))
           (pipe (progn (mevedel-test-run-tool chat "Bash" "call_pipe"
                                               '(:command "echo pipe-ready; sleep 300"
                                                          :description "pipe sleeper" :yield_time_ms 300) t)
                        (mevedel-test-execution-id chat "call_pipe")))
           (ps (mevedel-ps chat)))
      (with-current-buffer ps
        (should (equal (ps-test--state pty) "running pty"))
        (should (equal (ps-test--state pipe) "running"))
        ;; A line typed into the terminal reaches the command.
        (ps-test--goto pty)
        (mevedel-ps-send-line "hello")
        (let ((spool (plist-get (gethash pty mevedel-ps--items) :spool)))
          (mevedel-test-wait-until
            (string-match-p "got hello"
                            (with-temp-buffer (insert-file-contents spool) (buffer-string)))
            10))
        ;; Its details name it and show the latest output, read from the spool.
        (let ((details (mevedel-ps-describe)))
          (with-current-buffer details
            (should (derived-mode-p 'mevedel-ps-detail-mode))
            (should (string-match-p (concat "Execution: *" pty) (buffer-string)))
            (should (string-match-p "Terminal: *PTY" (buffer-string)))
            (should (string-match-p "Sandbox: *bwrap-landlock, network denied" (buffer-string)))
            (should (string-match-p "Latest output:\n\\(.\\|\n\\)*got hello" (buffer-string))))
          (kill-buffer details))
        ;; A pipe-mode command takes no line, but Ctrl-C interrupts it.
        (ps-test--goto pipe)
        (should-error (call-interactively #'mevedel-ps-send-line) :type 'user-error)
        (let ((details (mevedel-ps-describe)))
          (should (string-match-p "State: *running" (with-current-buffer details (buffer-string))))
          (mevedel-ps-interrupt)
          ;; Shown details follow the execution: they say when it ended.
          (mevedel-test-wait-until
            (string-match-p "has ended" (with-current-buffer details (buffer-string)))
            10)
          (kill-buffer details)))
      (mevedel-test-wait-until (null (assoc pipe (mapcar (lambda (item) (cons (plist-get item :id) t))
                                                         (mevedel-core-exec-list session))))
                               10)
      ;; The model still gets everything as unread output.
      (let ((poll (mevedel-test-run-tool chat "WriteStdin" "call_poll_pty"
                                         (list :execution_id pty :chars "" :yield_time_ms 5000) t)))
        (should (string-match-p "got hello" poll)))
      (let ((poll (mevedel-test-run-tool chat "WriteStdin" "call_poll_pipe"
                                         (list :execution_id pipe :chars "" :yield_time_ms 5000) t)))
        ;; (its output went with the yield; the interrupt ended it)
        (should (string-prefix-p "<bash-execution" poll))
        (should (string-match-p "signal=\"SIGINT\"\\|signal=\"2\"\\|exit_code=\"130\"" poll)))
      (mevedel-ps-stop-execution chat pty)
      (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10))))

(ert-deftest mevedel-ps:composer-commands ()
  (mevedel-core-ensure)
  (mevedel-test-with-view view chat
    (let* ((session (mevedel-session-id (mevedel-chat-session chat)))
           (ids (cl-loop for n below 3
                         do (mevedel-test-run-tool chat "Bash" (format "call_%d" n)
                                                   '(:command "sleep 300" :description "sleeper"
                                                              :yield_time_ms 250) t)
                         collect (mevedel-test-execution-id chat (format "call_%d" n))))
           (composer (lambda (text)
                       (with-current-buffer view
                         (mevedel-view--set-composer text)
                         (mevedel-view-send)))))
      (should (= 3 (length (mevedel-core-exec-list session))))
      (with-current-buffer view
        ;; Text that only starts with a slash goes to the model, an
        ;; unknown command is refused and stays in the composer.
        (should-not (mevedel-view--slash "/etc/hosts has a typo"))
        (should-not (mevedel-view--slash "/ps\nand more"))
        (mevedel-view--set-composer "/frobnicate now")
        (should-error (mevedel-view-send) :type 'user-error)
        (should (equal (mevedel-view--composer-text) "/frobnicate now"))
        ;; Completion offers the commands, then the running executions.
        (mevedel-view--set-composer "/st")
        (let ((capf (mevedel-view--slash-capf)))
          (should (equal (all-completions "st" (nth 2 capf)) '("stop"))))
        (mevedel-view--set-composer "/stop ")
        (should (equal (sort (copy-sequence (nth 2 (mevedel-view--slash-capf))) #'string<)
                       (sort (copy-sequence ids) #'string<))))
      ;; /ps opens the table; an unknown ID stops nothing.
      (funcall composer "/ps")
      (with-current-buffer (format "*mevedel ps: %s*" (mevedel-chat-name chat))
        ;; A command run without the sandbox says so, as a warning.
        (let ((unconfined (let ((mevedel-sandbox-mode 'off))
                            (mevedel-test-run-tool chat "Bash" "call_off"
                                                   '(:command "sleep 300" :description "bare"
                                                              :yield_time_ms 250)
                                                   t)
                            (mevedel-test-execution-id chat "call_off"))))
          (mevedel-ps-refresh)
          (let ((cell (aref (cadr (assoc unconfined tabulated-list-entries)) 7)))
            (should (equal (substring-no-properties cell) "off"))
            (should (eq (get-text-property 0 'face cell) 'warning)))
          (should (equal (substring-no-properties
                          (aref (cadr (assoc (car ids) tabulated-list-entries)) 7))
                         "bwrap-landlock"))
          (mevedel-ps-stop-execution chat unconfined)
          (mevedel-test-wait-until (= 3 (length (mevedel-core-exec-list session))) 10)))
      (with-current-buffer view (should (equal (mevedel-view--composer-text) "")))
      (should-error (funcall composer "/stop x00000000") :type 'user-error)
      (should (= 3 (length (mevedel-core-exec-list session))))
      ;; /stop ID stops that one, a bare /stop the others.
      (funcall composer (concat "/stop " (car ids)))
      (mevedel-test-wait-until (= 2 (length (mevedel-core-exec-list session))) 10)
      (should-not (member (car ids) (mapcar (lambda (item) (plist-get item :id))
                                            (mevedel-core-exec-list session))))
      (funcall composer "/stop")
      (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10)
      (should-error (funcall composer "/stop") :type 'user-error))))

(provide 'ps-test)
;;; ps-test.el ends here
