;;; chat-ux-view-test.el --- The view as a user meets it: queue, header, typing  -*- lexical-binding: t; -*-

;;; Commentary:

;; The view's second round of fixes (issue 43), each asserted on the
;; buffer's text, point and faces: queued input below the answer, a
;; readable header, demo sessions kept apart, typing reaching the
;; composer, the window following a stream, the child agent's view,
;; and quitting with work running.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defun chat-ux-view-test--stream (chat text)
  "Append TEXT to CHAT's data buffer as streamed response text, and tell the view."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (goto-char (point-max))
    (insert (propertize text 'gptel 'response)))
  (mevedel-chat-notify chat 'text text))

;;;; 4. Queued input

(ert-deftest chat-ux-view:queued-input-is-below-the-streaming-answer ()
  "The queue notice stays next to the composer while the answer streams in.
After taking one message back, the notice of the rest is still there."
  (mevedel-test-with-view view chat
    (with-current-buffer view
      (mevedel-test-begin-turn chat "Explain it.")
      (mevedel-chat-notify chat 'turn-start "Explain it.")
      (mevedel-chat-queue chat "first queued")
      (mevedel-chat-queue chat "second queued")
      (chat-ux-view-test--stream chat "\nThe answer starts here")
      (chat-ux-view-test--stream chat " and goes on.\nMore lines.\n")
      (let ((overlay mevedel-view--queued-overlay)
            (answer (save-excursion (goto-char (point-min))
                                    (search-forward "More lines."))))
        (should (overlayp overlay))
        (should (string-match-p "queued: first queued\n.*queued: second queued"
                                (overlay-get overlay 'before-string)))
        ;; Drawn after the answer, right before the separator line.
        (should (> (overlay-start overlay) answer))
        (should (= (overlay-start overlay) mevedel-view--separator))
        ;; C-c C-u takes the newest back; the notice of the other stays put.
        (goto-char (point-max))
        (mevedel-view-unqueue)
        (should (equal (mevedel-view--composer-text) "second queued"))
        (chat-ux-view-test--stream chat "Even more.\n")
        (mevedel-view-replace-panel "a panel line\n")
        (mevedel-view--fit-separator)
        (should (eq mevedel-view--queued-overlay overlay))
        (should (= (overlay-start overlay) mevedel-view--separator))
        (should (> (overlay-start overlay)
                   (save-excursion (goto-char (point-min)) (search-forward "a panel line"))))
        (should (string-match-p "first queued" (overlay-get overlay 'before-string)))
        (should-not (string-match-p "second queued" (overlay-get overlay 'before-string)))))))

;;;; 6. The header

(defun chat-ux-view-test--header ()
  "Return the header line as `format-mode-line' shows it.
Batch Emacs formats no mode lines, so the escaping is undone here as
redisplay does: every %% is one %, and no other % may be left."
  (let ((text (mevedel-view--header-line)))
    (should-not (string-match-p "%[^%]\\|%\\'" (string-replace "%%" "" text)))
    (string-replace "%%" "%" text)))

(ert-deftest chat-ux-view:the-header-is-readable-and-keeps-its-percent ()
  "The context share keeps its % through `format-mode-line'; the mode comes first.
A retry's error is in the live zone, not in the header.  (The tmux test
mevedel-tmux:type-prompt-and-see-answer reads the % on a real screen.)"
  (mevedel-test-with-view view chat
    (with-current-buffer view
      (let ((mevedel-chat-context-windows '((header-test . 400000))))
        (setf (mevedel-chat-model chat) 'header-test)
        ;; Estimated: no request reported its size yet.
        (with-current-buffer (mevedel-chat-data-buffer chat)
          (insert (make-string 192000 ?x)))
        (should (string-match-p "context ≈12% of 400k"
                                (chat-ux-view-test--header)))
        (setf (mevedel-chat-context-tokens chat) 60000)
        (let ((shown (chat-ux-view-test--header)))
          (should (string-match-p "context 15% of 400k" shown))
          (should-not (string-match-p "≈\\|estimate" shown))))
      (setf (mevedel-chat-model chat) 'no-window-known
            (mevedel-chat-context-tokens chat) 15)
      (should (string-match-p "context 15 tokens" (chat-ux-view-test--header)))
      (should (equal (mevedel-view--tokens 1234) "1.2k"))
      (should (equal (mevedel-view--tokens 128000) "128k"))
      (should (equal (mevedel-view--tokens 1000000) "1M"))
      ;; Plan mode comes before everything that may be long.
      (setf (mevedel-chat-permission-mode chat) 'plan)
      (let ((shown (chat-ux-view-test--header)))
        (should (string-match-p "\\` mevedel · [^·]+ · PLAN mode (read-only) · " shown))
        (should (< (string-search "PLAN mode (read-only)" shown) 60)))
      ;; A retry: the header says retrying, the live zone says why.
      (mevedel-chat-set-status chat 'retrying "HTTP 529 overloaded; again in 4 s (2 of 5)")
      (mevedel-chat-notify chat 'status)
      (save-excursion (mevedel-view--render-live))
      (let ((shown (chat-ux-view-test--header)))
        (should (string-match-p "· retrying ·" shown))
        (should-not (string-match-p "529" shown)))
      (should (string-match-p "⟳ HTTP 529 overloaded"
                              (buffer-substring-no-properties mevedel-view--transcript-end
                                                              mevedel-view--composer)))
      (mevedel-chat-set-status chat 'idle))))

;;;; 7. Typing goes to the composer

(ert-deftest chat-ux-view:typing-in-the-transcript-goes-to-the-composer ()
  "A printing character typed above the composer is inserted at its end.
? opens the menu there instead; the footer names the menu's keys."
  (mevedel-test-with-view view chat
    (switch-to-buffer view)
    (mevedel-test-insert-call chat "Grep" "call_g" '(:pattern "x") "a.el:1:x")
    (with-current-buffer view
      (goto-char (point-max))
      (insert "draft ")
      (goto-char (point-min))
      (should (< (point) mevedel-view--composer))
      (execute-kbd-macro "hi")
      (should (equal (mevedel-view--composer-text) "draft hi"))
      (should (= (point) (point-max)))
      ;; From a tool row too: its keys are TAB and RET only.
      (goto-char (point-min))
      (search-forward "Grep")
      (execute-kbd-macro "!")
      (should (equal (mevedel-view--composer-text) "draft hi!"))
      ;; ? is the view's own key outside the composer: the menu.
      (goto-char (point-min))
      (let ((opened nil))
        (cl-letf (((symbol-function 'mevedel-menu) (lambda () (interactive) (setq opened t))))
          (execute-kbd-macro "?"))
        (should opened)
        (should (equal (mevedel-view--composer-text) "draft hi!")))
      ;; The footer names the menu's keys.
      (should (string-match-p "C-c C-o/\\? menu"
                              (buffer-substring-no-properties mevedel-view--separator
                                                              mevedel-view--composer))))))

(ert-deftest chat-ux-view:help-lists-every-command-and-key ()
  "/help names every composer command and every command bound in the view's parts."
  (mevedel-test-with-view view chat
    (with-current-buffer view
      (mevedel-view--set-composer "/help")
      (mevedel-view-send)
      (let ((text (with-current-buffer "*mevedel help*" (buffer-string)))
            (maps (cons '("view" . mevedel-view-mode-map) mevedel-view--help-keymaps)))
        (kill-buffer "*mevedel help*")
        (dolist (entry (mevedel-view--slash-entries chat ""))
          (should (string-match-p (concat "/" (regexp-quote (car entry)) " ") text)))
        (dolist (title '("On an Ask form" "On a plan card" "On a patch review's card"
                         "On a row's breadcrumb line" "On a background work item"))
          (should (string-search title text)))
        (pcase-dolist (`(,_ . ,map) maps)
          (map-keymap (lambda (_key command)
                        (when (and (symbolp command) (commandp command)
                                   (not (eq command 'mevedel-view-self-insert)))
                          (should (string-search (symbol-name command) text))))
                      (symbol-value map)))
        (should (string-match-p "typed in the transcript" text))))))

;;;; 14. Quitting asks

(ert-deftest chat-ux-view:quitting-with-work-running-asks-and-stops-it ()
  "C-x C-c with a background command running asks, naming it; no keeps it.
Yes stops it, its result is recorded in the transcript, and Emacs may quit."
  (mevedel-core-ensure)
  (mevedel-test-with-view _view chat
    (let* ((mevedel-sandbox-mode 'off)
           (result (mevedel-test-run-tool chat "Bash" "call_nap"
                                          '(:command "echo started; sleep 300"
                                                     :description "long nap" :yield_time_ms 300)
                                          t))
           (id (mevedel-test-execution-id chat "call_nap"))
           (asked nil))
      (should (string-match-p "state=\"running\"" result))
      (should (member 'mevedel-ps-quit-query kill-emacs-query-functions))
      ;; No: nothing is stopped and Emacs stays.
      (cl-letf (((symbol-function 'yes-or-no-p) (lambda (prompt) (setq asked prompt) nil)))
        (should-not (run-hook-with-args-until-failure 'kill-emacs-query-functions)))
      (should (string-match-p (concat "session is still running command " (regexp-quote id) " (long nap)")
                              asked))
      (should (member id (mevedel-ps-live-ids chat)))
      ;; Yes: stopped and settled before the query returns.
      (cl-letf (((symbol-function 'yes-or-no-p) (lambda (_) t)))
        (should (mevedel-ps-quit-query)))
      (should-not (mevedel-ps-live-ids chat))
      ;; Nothing left: no question.
      (cl-letf (((symbol-function 'yes-or-no-p) (lambda (_) (ert-fail "asked again"))))
        (should (mevedel-ps-quit-query))))))

;;;; 15. The README's recipes

(ert-deftest chat-ux-view:the-readme-documents-what-the-view-does ()
  "The README's recipes name no placeholder host and document the view's doors.
Every composer command, the menu, /model, --timeout, the demo command
and the .git/info/exclude edit are described; RET on a row as it is bound."
  (let ((readme (with-temp-buffer
                  (insert-file-contents (expand-file-name "README.md" mevedel-test-root))
                  ;; One line: the prose wraps anywhere.
                  (replace-regexp-in-string "[ \n]+" " " (buffer-string)))))
    (should-not (string-search "example.invalid" readme))
    (should (string-match-p "substitute" (downcase readme)))
    (dolist (entry mevedel-view-slash-commands)
      (should (string-match-p (concat "`/" (regexp-quote (car entry)) "[] `]") readme)))
    (dolist (needle '("C-c C-o" "`/model [BACKEND:MODEL]`" "--timeout SECONDS"
                      "mevedel-view-use-demo" ".git/info/exclude" "`[demo]`"
                      "first build takes"))
      (should (string-search needle readme)))
    ;; RET on a row visits what it stands for, and the README says so.
    (should (eq (keymap-lookup mevedel-view-row-map "RET") #'mevedel-view-visit-row))
    (should (string-match-p "`RET` on a tool row | open what it stands for" readme))
    (should (eq (keymap-lookup mevedel-view-mode-map "C-c C-m") #'mevedel-view-set-model))))

;;;; 9. The child agent's view

(ert-deftest chat-ux-view:a-child-agent-s-view-is-honest ()
  "A child's view has no composer, shows its own tasks only, and says finished."
  (mevedel-test-with-view view chat
    (let* ((mevedel-tasks-agent-known-functions (list (lambda (_session _path) t)))
           (session (mevedel-chat-session chat))
           (child (mevedel-chat-make-child chat "/root/worker"))
           (child-view (mevedel-view-buffer child)))
      (unwind-protect
          (progn
            (mevedel-tasks-write session "/root" (list :tasks (vector '(:subject "Parent's plan"))))
            (mevedel-tasks-write session "/root/worker"
                                 (list :tasks (vector '(:subject "Worker's probe"))))
            (with-current-buffer view
              (let ((live (buffer-substring-no-properties mevedel-view--transcript-end
                                                          mevedel-view--composer)))
                (should (string-search "Parent's plan" live))
                (should (string-search "Worker's probe" live))))
            (with-current-buffer child-view
              (let ((live (buffer-substring-no-properties mevedel-view--transcript-end
                                                          (point-max))))
                (should (string-search "Worker's probe" live))
                (should-not (string-search "Parent's plan" live))
                ;; No composer: the line says so and nothing can be typed.
                (should (string-match-p "/root/worker only looks here: no composer" live))
                (should-not (string-search "C-c C-c send" live)))
              (goto-char (point-max))
              (should-error (insert "x") :type 'text-read-only)
              (switch-to-buffer child-view)
              (goto-char (point-min))
              (let ((err (should-error (execute-kbd-macro "x") :type 'user-error)))
                (should (string-match-p "only looks.*SendMessage" (cadr err))))
              (should (string-match-p "· not started ·" (mevedel-view--header-line)))
              ;; Its turn over, it is finished, not "ready".
              (mevedel-test-begin-turn child "Probe it.")
              (should (string-match-p "· finished ·" (mevedel-view--header-line)))
              (should-not (string-match-p "ready" (mevedel-view--header-line)))))
        (kill-buffer child-view)
        (kill-buffer (mevedel-chat-data-buffer child))))))

;;;; 8. The window while streaming

(ert-deftest chat-ux-view:the-window-keeps-the-answer-s-start-and-no-empty-lines ()
  "A long streamed answer stays visible from its start; the composer never floats.
The window is the selected one of batch Emacs (its height is real)."
  (mevedel-test-with-view view chat
    (switch-to-buffer view)
    (let ((window (selected-window))
          (lines (lambda (from n)
                   (mapconcat (lambda (i) (format "%s line %d" from i))
                              (number-sequence 1 n) "\n"))))
      ;; A transcript taller than the window, its end shown near the top:
      ;; after the next change the composer is at the bottom again.
      (with-current-buffer (mevedel-chat-data-buffer chat)
        (insert "### Old\n\n" (propertize (funcall lines "old" 60) 'gptel 'response)))
      (mevedel-view-rerender view)
      (goto-char (point-max))
      (set-window-start window (save-excursion (forward-line -3) (point)))
      (mevedel-chat-notify chat 'status)
      (let ((height (window-body-height window))
            (shown (count-screen-lines (window-start window) (point-max) nil window)))
        (should (>= shown (- height 2)))
        (should (<= shown height)))
      (should (= (window-point window) (point-max)))
      (should (> (window-start window) (point-min)))
      ;; A new answer: short, the window follows the composer.
      (mevedel-test-begin-turn chat "Explain it.")
      (mevedel-chat-notify chat 'turn-start "Explain it.")
      (goto-char (point-max))
      (chat-ux-view-test--stream chat "\nANSWER-START here.\n")
      (let ((answer (save-excursion (goto-char (point-min))
                                    (search-forward "ANSWER-START")
                                    (line-beginning-position))))
        (should (>= (window-point window) mevedel-view--composer))
        ;; Scrolled only so far: the end at the bottom, the start in sight.
        (should (<= (window-start window) answer))
        (should (>= (count-screen-lines (window-start window) (point-max) nil window)
                    (1- (window-body-height window))))
        ;; Long: the window shows it from its start, point on it.
        (chat-ux-view-test--stream chat (concat (funcall lines "new" 60) "\n"))
        (should (= (window-point window) answer))
        (should (= (window-start window) answer))
        ;; More text leaves the window alone: the user reads from the start.
        (chat-ux-view-test--stream chat (concat (funcall lines "more" 10) "\n"))
        (should (= (window-start window) answer))
        (should (= (window-point window) answer))
        ;; The turn's end draws its text again: the window still shows
        ;; the answer from its start (or the prompt just above it).
        (mevedel-chat-notify chat 'turn-end)
        (let ((prompt (save-excursion (goto-char (point-min))
                                      (search-forward "❯ Explain it.")
                                      (forward-line -1)
                                      (point))))
          (should (<= prompt (window-start window) answer))
          (should (< (window-point window) mevedel-view--composer)))))))

;;;; 11. Words users know

(ert-deftest chat-ux-view:rows-say-what-happened ()
  "Ask, TaskWrite and ToolCall rows say what happened, not the tool's name.
A running command's row leaves out the line telling the model how to poll."
  (mevedel-test-with-view view chat
    (let ((mevedel-tasks-agent-known-functions (list (lambda (_session _path) t))))
      (mevedel-test-insert-call chat "Ask" "call_ask"
                                '(:questions [(:header "Language" :question "Which?")])
                                "Language: Which?\nAnswer: Go")
      (mevedel-test-run-tool chat "TaskWrite" "call_t1"
                             (list :tasks (vector '(:subject "Probe" :status "in_progress")
                                                  '(:subject "Ship" :status "in_progress")
                                                  '(:subject "Tidy")))
                             t)
      (with-current-buffer view
        (let ((text (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))
          (should (string-match-p "^▾ ✓ Asked 1 question: Language\n    Language: Which?" text))
          (should (string-match-p "^▸ ✓ Tasks: 2 in progress, 1 to do$" text))
          (should-not (string-match-p "TaskWrite\\|^. . Ask " text)))))
    (should (equal (plist-get (mevedel-tool-render-row
                               "ToolCall" '(:program "x")
                               nil '(:ptc-live t :ptc-active ("Ask") :ptc-done 0) t)
                              :header)
                   "Running Ask · 0 done"))
    (should (equal (plist-get (mevedel-tool-render-row "Ask" '(:questions [(:header "A") (:header "B")])
                                                       nil nil t)
                              :header)
                   "Asking 2 questions: A · B"))
    (should (equal (mevedel-tool-exec--strip-envelope
                    (concat "partial output\nStill running. Poll with WriteStdin(execution_id=\"x1\", "
                            "chars=\"\"), send input (tty only) or stop it with StopExecution.\n"
                            "<bash-execution id=\"x1\" state=\"running\"/>"))
                   "partial output\n"))))

(provide 'chat-ux-view-test)
;;; chat-ux-view-test.el ends here
