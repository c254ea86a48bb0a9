;;; ps-test.el --- The executions table (M-x mevedel-ps)  -*- lexical-binding: t; -*-

;;; Commentary:

;; Real commands run through the pipeline in a chat's session, and the
;; table of its executions: what it lists, stopping from it, showing
;; the call that started one, and opening the output without reading
;; it for the model.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defmacro ps-test--with-chat (chat &rest body)
  "Bind CHAT to a fresh session's chat (its view open) around BODY."
  (declare (indent 1))
  `(let* ((root (file-name-as-directory (make-temp-file "mevedel-ps-" t)))
          (view (mevedel root))
          (,chat (mevedel-view-chat view))
          ;; No backend here: a background completion must not start a turn.
          (mevedel-exec-wake-function nil))
     (dolist (tool '("Bash" "WriteStdin"))
       (push (list 'allow tool) (mevedel-chat-session-rules ,chat)))
     (unwind-protect (progn ,@body)
       (when-let* ((ps (get-buffer (format "*mevedel ps: %s*" (mevedel-chat-name ,chat)))))
         (kill-buffer ps))
       (kill-buffer view)
       (kill-buffer (mevedel-chat-data-buffer ,chat))
       (delete-directory root t))))

(defun ps-test--run (chat name id args)
  "Run tool NAME with ARGS as call ID of CHAT; return its result text.
The call is appended to the data buffer as gptel writes it."
  (let ((box (list nil)))
    (with-current-buffer (mevedel-chat-data-buffer chat)
      (mevedel-pipeline-run-tool (mevedel-tool-get name) args
                                 (lambda (result) (setcar box (list result)))
                                 :tool-use-id id :data-buffer (current-buffer))
      (mevedel-test-wait-until (car box) 20)
      (goto-char (point-max))
      (insert "\n"
              (propertize (format "``` tool (%s)" name) 'gptel 'ignore)
              (propertize (concat "\n" (prin1-to-string (list :name name :args args)) "\n\n"
                                  (caar box))
                          'gptel (cons 'tool id))
              (propertize "\n```\n" 'gptel 'ignore)))
    (mevedel-view-rerender (mevedel-view-buffer chat))
    (caar box)))

(defun ps-test--execution (chat id)
  "Return the execution ID of call ID of CHAT."
  (plist-get (mevedel-render-data-extract (mevedel-chat-data-buffer chat) id) :execution-id))

(defun ps-test--goto (execution)
  "Move point to the table line of EXECUTION."
  (goto-char (point-min))
  (while (and (not (eobp)) (not (equal (tabulated-list-get-id) execution)))
    (forward-line 1))
  (should (equal (tabulated-list-get-id) execution)))

(defun ps-test--state (execution)
  "Return the State column of EXECUTION in the current table, or nil."
  (when-let* ((entry (assoc execution tabulated-list-entries)))
    (substring-no-properties (aref (cadr entry) 1))))

(ert-deftest mevedel-ps:lists-inspects-without-reading-and-stops ()
  (mevedel-core-ensure)
  (ps-test--with-chat chat
    (let* ((mevedel-sandbox-mode 'off)  ; "echo $$" below must print the group's id.
           (session (mevedel-session-id (mevedel-chat-session chat)))
           (result (ps-test--run chat "Bash" "call_late"
                                 '(:command "sleep 1; echo late-output; sleep 1.5"
                                            :description "late printer" :yield_time_ms 250)))
           (late (ps-test--execution chat "call_late"))
           (long (progn
                   (should (string-match-p "state=\"running\"" result))
                   (ps-test--run chat "Bash" "call_long"
                                 '(:command "echo $$; sleep 300" :description "long nap"
                                            :yield_time_ms 300))
                   (ps-test--execution chat "call_long")))
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
                         (list "Bash" "running" "long nap" "/root" (aref row 4) (aref row 5))))
          (should (string-match-p "\\`[0-9.]+s\\'" (aref row 4))))
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
      (let ((poll (ps-test--run chat "WriteStdin" "call_poll"
                                (list :execution_id late :chars "" :yield_time_ms 5000))))
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
        ;; The table follows the settlement by itself; ended items stay
        ;; for a while, marked as such, and cannot be stopped again.
        (mevedel-test-wait-until (equal (ps-test--state long) "stopped") 5)
        (should (equal (ps-test--state late) "completed"))
        (ps-test--goto long)
        (should-error (mevedel-ps-stop) :type 'user-error)))))

(ert-deftest mevedel-ps:lists-foreground-commands-and-monitors ()
  (mevedel-core-ensure)
  (ps-test--with-chat chat
    (push (list 'allow "Monitor") (mevedel-chat-session-rules chat))
    (let* ((session (mevedel-session-id (mevedel-chat-session chat)))
           (box (list nil))
           (monitor (progn
                      (ps-test--run chat "Monitor" "call_mon"
                                    '(:command "sleep 300" :description "nothing happens"))
                      (ps-test--execution chat "call_mon"))))
      ;; A foreground command is still its request's: listed, marked so.
      (with-current-buffer (mevedel-chat-data-buffer chat)
        (mevedel-pipeline-run-tool (mevedel-tool-get "Bash")
                                   '(:command "sleep 3" :description "short nap"
                                              :yield_time_ms 30000)
                                   (lambda (result) (setcar box (list result)))
                                   :tool-use-id "call_fg" :data-buffer (current-buffer)))
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
                                (cons (substring-no-properties (aref (cadr entry) 2))
                                      (substring-no-properties (aref (cadr entry) 1))))
                              tabulated-list-entries)))
          (should (member '("Watching: nothing happens" . "running (0 events)") states))
          (should (member '("short nap" . "running (fg)") states))))
      (mevedel-test-wait-until (car box) 10)
      (should (string-match-p "state=\"completed\"" (caar box)))
      (mevedel-core-exec-stop-by-user session monitor)
      (mevedel-test-wait-until (null (mevedel-core-exec-list session)) 10))))

(provide 'ps-test)
;;; ps-test.el ends here
