;;; ask-tasks-e2e-test.el --- Ask and tasks in a real session  -*- lexical-binding: t; -*-

;;; Commentary:

;; A real session (gptel against the scripted model) whose model asks
;; the user through Ask, answered by typed keys, and keeps a task list
;; that the view's fragment follows.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun ask-tasks-e2e--view-text (view)
  "Return VIEW's text without properties."
  (with-current-buffer view (buffer-substring-no-properties (point-min) (point-max))))

(ert-deftest mevedel-e2e:ask-answered-by-keys-reaches-the-model ()
  "The model's Ask shows a form; keys answer it; the model reads the answer."
  (let* ((program "(Ask :questions [{:header \"Language\" :question \"Which language?\"
 :options [{:label \"Rust\" :description \"fast\"} {:label \"Go\"}]}
 {:header \"Tests\" :question \"Which test kinds?\" :multiSelect true
 :options [{:label \"unit\"} {:label \"e2e\"}]}])")
         (typed nil)
         (run (mevedel-e2e-run
               :prompt "Set the project up"
               :steps `(((tool_calls . [((name . "ToolCall")
                                         (arguments . ((program . ,program))))]))
                        ((expect . ((results . [((contains . "Language: Which language?\nAnswer: Go\n\nTests: Which test kinds?\nAnswer: unit; e2e; fuzz"))])))
                         (text . "Go it is.")))
               :during
               (lambda (chat view)
                 (when (and (not typed) (mevedel-interaction-list chat))
                   (setq typed t)
                   (switch-to-buffer view)
                   (with-current-buffer view
                     (should (eq (mevedel-interaction-kind (mevedel-interaction-at)) 'ask))
                     (execute-kbd-macro (kbd "2 RET 1 RET 2 RET c fuzz RET C-c C-c"))))))))
    (should typed)
    (should (eq (plist-get run :outcome) 'done))
    (should (string-match-p "Go it is\\." (plist-get run :transcript)))
    (should (string-match-p "Asked 2 questions: Language · Tests" (plist-get run :transcript)))))

(ert-deftest mevedel-e2e:taskwrite-sequence-drives-the-fragment ()
  "TaskWrite calls create and update tasks; the fragment follows each one."
  (let* ((snapshots nil)
         (run (mevedel-e2e-run
               :prompt "Build and test"
               :steps `(((tool_calls . [((name . "ToolCall")
                                         (arguments
                                          . ((program . "(TaskWrite :tasks [{:subject \"Build\" :status \"in_progress\"} {:subject \"Test\" :blockedBy [1]}])"))))]))
                        ((expect . ((results . [((contains . "#1 [in_progress] Build"))])))
                         (tool_calls . [((name . "ToolCall")
                                         (arguments
                                          . ((program . "(TaskWrite :tasks [{:id 1 :status \"completed\"} {:id 2 :status \"in_progress\"}])"))))]))
                        ((expect . ((results . [((contains . "#2 [in_progress] Test"))])))
                         (text . "Building done, testing.")))
               :during
               (lambda (_chat view)
                 (let ((text (ask-tasks-e2e--view-text view)))
                   (when (string-match "── tasks[^\n]*\n\\(?:[^\n]+\n\\)*?" text)
                     (let ((fragment (match-string 0 text)))
                       (unless (equal fragment (car snapshots))
                         (push fragment snapshots))))))
               :inspect (lambda (_chat view) (ask-tasks-e2e--view-text view)))))
    (should (eq (plist-get run :outcome) 'done))
    (setq snapshots (nreverse snapshots))
    (should (cl-some (lambda (s) (string-match-p "tasks · 1 running · 1 blocked" s)) snapshots))
    (should (string-match-p "── tasks · 1 running · 1 done ─+\n◐ Test\n"
                            (plist-get run :inspected)))))

(ert-deftest mevedel-e2e:task-nudge-reaches-the-model-once ()
  "After an interval of requests without a task write, one reminder joins a request."
  (let* ((mevedel-tasks-nudge-interval 2)
         (read-call (lambda () `((name . "Read") (arguments . ((file_path . "a.txt"))))))
         (run (mevedel-e2e-run
               :files '(("a.txt" . "alpha\n"))
               :prompt "Work on it"
               :setup (lambda (chat) (setf (mevedel-chat-permission-mode chat) 'full-auto))
               :steps `(((tool_calls . [((name . "ToolCall")
                                         (arguments
                                          . ((program . "(TaskWrite :tasks [{:subject \"Long job\" :status \"in_progress\"}])"))))]))
                        ((tool_calls . [,(funcall read-call)]))
                        ((expect . ((user_contains . "<system-reminder>The task list has not changed")))
                         (tool_calls . [,(funcall read-call)]))
                        ((tool_calls . [,(funcall read-call)]))
                        ((text . "Still going."))))))
    (should (eq (plist-get run :outcome) 'done))
    ;; Continuations 2 and 4 are due (interval 2); 3 is not: requests 3
    ;; and 4 carry one reminder, request 5 two.
    (should (equal (mapcar (lambda (entry)
                             (let ((body (format "%S" (alist-get 'body entry))) (n 0) (start 0))
                               (while (string-match "<system-reminder>The task list" body start)
                                 (setq n (1+ n) start (match-end 0)))
                               n))
                           (plist-get run :log))
                   '(0 0 1 1 2)))
    (should-not (string-match-p "system-reminder" (plist-get run :transcript)))))

(provide 'ask-tasks-e2e-test)
;;; ask-tasks-e2e-test.el ends here
