;;; session-e2e-test.el --- End-to-end sessions against the scripted model  -*- lexical-binding: t; -*-

;;; Commentary:

;; The real gptel (from .deps) drives a real mevedel session whose
;; tools run for real, against the scripted model server, for the
;; OpenAI and Anthropic wire formats with streaming on and off.  The
;; server's request log proves what the model received; the data
;; buffer and the view show what the user sees.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defconst mevedel-e2e--notes "first line of notes\nthe answer is 42\nlast line\n"
  "Content of the notes file the scenarios read.")

;;;; Read, then Grep, then the answer

(mevedel-e2e-deftest-matrix mevedel-e2e:read-search-answer
    "The model reads a real file, then greps the workspace, then answers.
The server receives each result under the ID it handed out; the view
shows two successful rows in call order and the final text."
    (wire stream)
  (let* ((run (mevedel-e2e-run
               :wire wire :stream stream
               :files `(("notes.txt" . ,mevedel-e2e--notes)
                        ("src/code.el" . "(defun answer () 42)\n"))
               :prompt "What is the answer in notes.txt?"
               :steps `(((text . "Let me read the notes.")
                         (tool_calls . [((name . "Read")
                                         (arguments . ((file_path . "{{root}}notes.txt"))))]))
                        ((expect . ((results . [((contains . "the answer is 42"))])))
                         (tool_calls . [((name . "Grep")
                                         (arguments . ((pattern . "defun answer")
                                                       (path . "{{root}}")
                                                       (output_mode . "content"))))]))
                        ((expect . ((results . [((contains . "code.el:1:(defun answer () 42)"))])))
                         (text . "The answer is 42, defined in src/code.el.")))))
         (log (plist-get run :log))
         (served (mevedel-e2e-served-ids log))
         (rows (plist-get run :rows)))
    (should (eq (plist-get run :outcome) 'done))
    ;; The server: three requests, no mismatch, results under the served IDs.
    (should (= (length log) 3))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    (should (= (length (nth 0 served)) 1))
    (should (= (length (nth 1 served)) 1))
    (should (equal (mevedel-e2e-result-ids (nth 1 log)) (nth 0 served)))
    (should (equal (mevedel-e2e-result-ids (nth 2 log)) (nth 1 served)))
    (should (string-match-p "the answer is 42"
                            (mevedel-e2e-result-content (nth 1 log) (car (nth 0 served)))))
    ;; The data buffer keeps each call under its own ID.
    (should (equal (plist-get run :ids) (append (nth 0 served) (nth 1 served))))
    ;; The view: two rows in call order, both successful, then the answer.
    (should (equal (mapcar #'car rows) (plist-get run :ids)))
    (should (string-match-p "✓ Read notes\\.txt" (cdr (nth 0 rows))))
    (should (string-match-p "✓ Grep \"defun answer\" in \\./ (1 line)" (cdr (nth 1 rows))))
    (should-not (cl-some (lambda (row) (string-match-p "×" (cdr row))) rows))
    (let ((transcript (plist-get run :transcript)))
      (should (string-match-p "❯ What is the answer in notes.txt\\?" transcript))
      (should (string-match-p "Let me read the notes\\." transcript))
      (should (string-match-p "The answer is 42, defined in src/code\\.el\\.\n\\'" transcript))
      ;; Order: prompt, first text, row 1, row 2, answer.
      (should (< (string-search "Let me read" transcript)
                 (string-search "Read notes.txt" transcript)
                 (string-search "Grep \"defun answer\"" transcript)
                 (string-search "The answer is 42" transcript))))))

;;;; A failing tool

(mevedel-e2e-deftest-matrix mevedel-e2e:failing-tool
    "A failing call renders a red × row and the model receives the error text."
    (wire stream)
  (let* ((run (mevedel-e2e-run
               :wire wire :stream stream
               :files '(("present.txt" . "here\n"))
               :prompt "Read missing.txt"
               :steps `(((tool_calls . [((name . "Read")
                                         (arguments . ((file_path . "{{root}}missing.txt"))))]))
                        ((expect . ((results . [((contains . "missing.txt"))])))
                         (text . "That file does not exist.")))))
         (log (plist-get run :log))
         (rows (plist-get run :rows))
         (error-text (mevedel-e2e-result-content (nth 1 log) (car (nth 0 (mevedel-e2e-served-ids log))))))
    (should (eq (plist-get run :outcome) 'done))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    (should (string-match-p "\\`Error" error-text))
    (should (string-match-p "missing\\.txt" error-text))
    (should (= (length rows) 1))
    (should (string-match-p "× Read missing\\.txt" (cdr (car rows))))
    (let ((rich (plist-get run :rich-transcript)))
      (should (memq 'mevedel-view-error
                    (ensure-list (get-text-property (string-search "×" rich) 'face rich)))))
    (should (string-match-p "That file does not exist\\." (plist-get run :transcript)))))

;;;; Parallel identical calls

(mevedel-e2e-deftest-matrix mevedel-e2e:parallel-identical-calls
    "Two parallel calls with identical arguments keep their distinct IDs."
    (wire stream)
  (let* ((run (mevedel-e2e-run
               :wire wire :stream stream
               :files `(("notes.txt" . ,mevedel-e2e--notes))
               :prompt "Read notes.txt twice"
               :steps `(((tool_calls . [((name . "Read")
                                         (arguments . ((file_path . "{{root}}notes.txt"))))
                                        ((name . "Read")
                                         (arguments . ((file_path . "{{root}}notes.txt"))))]))
                        ((expect . ((results . [((contains . "answer is 42"))
                                                ((contains . "answer is 42"))])))
                         (text . "Both reads agree.")))))
         (log (plist-get run :log))
         (served (car (mevedel-e2e-served-ids log)))
         (ids (plist-get run :ids)))
    (should (eq (plist-get run :outcome) 'done))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    (should (= (length served) 2))
    (should-not (equal (car served) (cadr served)))
    ;; Each served ID came back exactly once, and the data buffer and
    ;; view hold both, in the model's call order.
    (should (equal (sort (copy-sequence (mevedel-e2e-result-ids (nth 1 log))) #'string<)
                   (sort (copy-sequence served) #'string<)))
    (should (equal ids served))
    (should (equal (mapcar #'car (plist-get run :rows)) served))))

;;;; Permissions

(defvar mevedel-e2e--note-runs 0
  "How often the WriteNote handler ran.")

(defun mevedel-e2e--write-note (args)
  "Handler of the WriteNote test tool: write ARGS's text to its file."
  (cl-incf mevedel-e2e--note-runs)
  (with-temp-file (plist-get args :file) (insert (plist-get args :text)))
  (format "Wrote %s" (plist-get args :file)))

(defmacro mevedel-e2e--with-note-tool (&rest body)
  "Run BODY with the WriteNote tool registered natively and its run counter reset."
  (declare (indent 0))
  `(let ((mevedel-tool-native-extras '("WriteNote")))
     (setq mevedel-e2e--note-runs 0)
     (mevedel-define-tool WriteNote
       :description "Write a note file in the workspace."
       :args ((file path :required "File to write")
              (text string :required "Text of the note"))
       :function #'mevedel-e2e--write-note)
     (unwind-protect (progn ,@body)
       (mevedel-tool-unregister "WriteNote"))))

(defconst mevedel-e2e--note-steps
  `(((tool_calls . [((name . "WriteNote")
                     (arguments . ((file . "{{root}}note.txt") (text . "hello"))))]))
    ((expect . ((results . [((contains . "Permission denied"))])))
     (text . "I was not allowed to write the note.")))
  "Script of a model that tries to write a note and is refused.")

(mevedel-e2e-deftest-matrix mevedel-e2e:deny-rule-never-runs-handler
    "A call denied by a rule never reaches its handler; the model is told."
    (wire stream)
  (mevedel-e2e--with-note-tool
    (let* ((mevedel-permissions-rules '((deny "WriteNote" "**/note.txt")))
           (run (mevedel-e2e-run
                 :wire wire :stream stream :prompt "Write a note"
                 :setup (lambda (chat) (setf (mevedel-chat-permission-mode chat) 'full-auto))
                 :steps mevedel-e2e--note-steps))
           (log (plist-get run :log)))
      (should (eq (plist-get run :outcome) 'done))
      (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
      (should (= mevedel-e2e--note-runs 0))
      (should (string-match-p "permission rule forbids"
                              (mevedel-e2e-result-content
                               (nth 1 log) (car (nth 0 (mevedel-e2e-served-ids log))))))
      (should (string-match-p "× WriteNote.*denied" (cdr (car (plist-get run :rows))))))))

(defun mevedel-e2e--answer-card (key)
  "Return a DURING function that presses KEY on the first permission card."
  (let ((pressed nil))
    (lambda (chat view)
      (when (and (not pressed) (mevedel-chat-pending chat))
        (setq pressed t)
        (with-current-buffer view
          (let ((card (car (mevedel-interaction-list chat))))
            (goto-char (mevedel-interaction-start card))
            (forward-line 1)
            (should (string-match-p "Allow WriteNote\\?"
                                    (buffer-substring (point) (line-end-position))))
            (should (eq (mevedel-interaction-at) card))
            (call-interactively (lookup-key (mevedel-interaction-keymap card) key))))))))

(ert-deftest mevedel-e2e:card-deny-never-runs-handler ()
  "In ask mode a non-read-only call shows a card; `n' refuses it unrun."
  (mevedel-e2e--with-note-tool
    (let* ((run (mevedel-e2e-run
                 :wire 'anthropic :stream t :prompt "Write a note"
                 :during (mevedel-e2e--answer-card "n")
                 :steps mevedel-e2e--note-steps))
           (log (plist-get run :log)))
      (should (eq (plist-get run :outcome) 'done))
      (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
      (should (= mevedel-e2e--note-runs 0))
      (should (string-match-p "user declined"
                              (mevedel-e2e-result-content
                               (nth 1 log) (car (nth 0 (mevedel-e2e-served-ids log))))))
      (should-not (mevedel-chat-pending (plist-get run :chat))))))

(ert-deftest mevedel-e2e:card-allow-runs-handler ()
  "Pressing `y' on the card runs the call once and the model gets its result."
  (mevedel-e2e--with-note-tool
    (let* ((run (mevedel-e2e-run
                 :wire 'openai :stream nil :prompt "Write a note"
                 :during (mevedel-e2e--answer-card "y")
                 :steps `(((tool_calls . [((name . "WriteNote")
                                           (arguments . ((file . "{{root}}note.txt")
                                                         (text . "hello"))))]))
                          ((expect . ((results . [((contains . "Wrote"))])))
                           (text . "Done.")))))
           (log (plist-get run :log)))
      (should (eq (plist-get run :outcome) 'done))
      (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
      (should (= mevedel-e2e--note-runs 1))
      (should (string-match-p "✓ WriteNote" (cdr (car (plist-get run :rows))))))))

(ert-deftest mevedel-e2e:card-always-allows-for-the-session ()
  "Pressing `a' allows this tool for the rest of the session: no second card."
  (mevedel-e2e--with-note-tool
    (let* ((cards 0)
           (run (mevedel-e2e-run
                 :wire 'openai :stream t :prompt "Write two notes"
                 :during (mevedel-e2e--answer-card "a")
                 :setup (lambda (chat)
                          (mevedel-chat-observe
                           chat (lambda (event &rest _)
                                  (when (eq event 'permission) (cl-incf cards)))))
                 :steps `(((tool_calls . [((name . "WriteNote")
                                           (arguments . ((file . "{{root}}one.txt")
                                                         (text . "1"))))]))
                          ((expect . ((results . [((contains . "Wrote"))])))
                           (tool_calls . [((name . "WriteNote")
                                           (arguments . ((file . "{{root}}two.txt")
                                                         (text . "2"))))]))
                          ((expect . ((results . [((contains . "Wrote"))])))
                           (text . "Both written."))))))
      (should (eq (plist-get run :outcome) 'done))
      (should (= mevedel-e2e--note-runs 2))
      (should (= cards 1))
      (should (equal (hash-table-keys (mevedel-session-permission-answers
                                       (mevedel-chat-session (plist-get run :chat))))
                     '("WriteNote"))))))

(ert-deftest mevedel-e2e:abort-while-a-card-waits ()
  "Aborting while a permission card waits drops the card and never runs the call."
  (mevedel-e2e--with-note-tool
    (let* ((aborted nil)
           (run (mevedel-e2e-run
                 :wire 'anthropic :stream nil :prompt "Write a note"
                 :during (lambda (chat view)
                           (when (and (not aborted) (mevedel-chat-pending chat))
                             (setq aborted t)
                             (with-current-buffer view (mevedel-view-abort))))
                 :steps mevedel-e2e--note-steps)))
      (should aborted)
      (should (eq (plist-get run :outcome) 'abort))
      (should (= mevedel-e2e--note-runs 0))
      (should-not (mevedel-chat-pending (plist-get run :chat)))
      (should-not (mevedel-chat-busy-p (plist-get run :chat)))
      (should-not (string-match-p "Allow WriteNote" (plist-get run :transcript)))
      ;; The model was never sent a result for the abandoned call.
      (should (= (length (plist-get run :log)) 1)))))

(mevedel-e2e-deftest-matrix mevedel-e2e:rows-follow-call-order
    "Calls finishing in reverse order still appear in the model's call order."
    (wire stream)
  (mevedel-e2e--with-note-tool
    (let* ((answered nil)
           (finished nil)
           (run (mevedel-e2e-run
                 :wire wire :stream stream :prompt "Write two notes"
                 :during (lambda (chat _view)
                           (let ((pending (mevedel-chat-pending chat)))
                             (when (and (not answered) (= (length pending) 2))
                               (setq answered t)
                               ;; Cards are in call order; approve the second first.
                               (dolist (request (reverse pending))
                                 (setq finished (append finished (list (plist-get request :id))))
                                 (funcall (plist-get request :answer) 'once)))))
                 :steps `(((tool_calls . [((name . "WriteNote")
                                           (arguments . ((file . "{{root}}first.txt")
                                                         (text . "1"))))
                                          ((name . "WriteNote")
                                           (arguments . ((file . "{{root}}second.txt")
                                                         (text . "2"))))]))
                          ((expect . ((results . [((contains . "first.txt"))
                                                  ((contains . "second.txt"))])))
                           (text . "Both written."))))))
      (should (eq (plist-get run :outcome) 'done))
      (should (= mevedel-e2e--note-runs 2))
      (let ((served (car (mevedel-e2e-served-ids (plist-get run :log)))))
        ;; Completion order was the reverse of the call order...
        (should (equal finished (reverse served)))
        ;; ...but the data buffer and the rows follow the call order.
        (should (equal (plist-get run :ids) served))
        (should (equal (mapcar #'car (plist-get run :rows)) served))
        (should (string-match-p "first\\.txt" (cdr (car (plist-get run :rows)))))))))

;;;; Render-data

(ert-deftest mevedel-e2e:render-data-reaches-the-view-not-the-model ()
  "A tool's render-data gives its row a warning marker; the model never
sees the block, neither in the turn nor in the next turn's history."
  (mevedel-define-tool Probe
    :description "Probe something."
    :args ((target string :required "What to probe"))
    :read-only-p t
    :function (lambda (args)
                (list :result (format "probed %s" (plist-get args :target))
                      :render-data '(:warnings ("the probe was slow")))))
  (unwind-protect
      (let* ((mevedel-tool-native-extras '("Probe"))
             (second-outcome nil)
             (run (mevedel-e2e-run
                   :wire 'openai :stream t :prompt "Probe it"
                   :steps `(((tool_calls . [((name . "Probe")
                                             (arguments . ((target . "disk"))))]))
                            ((expect . ((results . [((contains . "probed disk")
                                                     (lacks . "mevedel-render-data"))])))
                             (text . "Probed."))
                            ((expect . ((user_contains . "And again?")))
                             (text . "Still fine.")))
                   :inspect (lambda (chat _view)
                              (mevedel-chat-send chat "And again?"
                                                 :on-done (lambda (_ o) (setq second-outcome o)))
                              (mevedel-test-wait-until second-outcome 10)
                              second-outcome)))
             (log (plist-get run :log)))
        (should (eq (plist-get run :outcome) 'done))
        (should (eq (plist-get run :inspected) 'done))
        (should (= (length log) 3))
        (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
        ;; Neither the tool result nor the later history carries the block.
        (dolist (entry log)
          (should-not (string-match-p "mevedel-render-data"
                                      (json-encode (alist-get 'body entry)))))
        (should (string-match-p "probed disk" (json-encode (alist-get 'body (nth 2 log)))))
        (should (string-match-p "^▸ ! Probe$" (plist-get run :transcript))))
    (mevedel-tool-unregister "Probe")))

;;;; Org data buffers

(ert-deftest mevedel-e2e:org-data-buffer ()
  "With `gptel-default-mode' Org, results are escaped in the data buffer
and unescaped in the view; block lines never show as user text."
  (let* ((gptel-default-mode 'org-mode)
         (content "* heading\n#+begin_src sh\necho hi\n#+end_src\n")
         (run (mevedel-e2e-run
               :wire 'anthropic :stream t :prompt "Read it"
               :files `(("notes.org" . ,content))
               :steps `(((tool_calls . [((name . "Read")
                                         (arguments . ((file_path . "{{root}}notes.org"))))]))
                        ((expect . ((results . [((contains . "* heading"))
                                                ])))
                         (text . "It has **one** heading.")))
               :inspect (lambda (chat view)
                          (list (with-current-buffer (mevedel-chat-data-buffer chat)
                                  (derived-mode-p 'org-mode))
                                (with-current-buffer view
                                  (goto-char (point-min))
                                  (search-forward "Read notes.org")
                                  (mevedel-view-toggle-row)
                                  (buffer-substring-no-properties
                                   (point-min) mevedel-view--transcript-end)))))))
    (should (eq (plist-get run :outcome) 'done))
    (should (car (plist-get run :inspected)))
    (let ((expanded (cadr (plist-get run :inspected))))
      (should (string-match-p "\t\\* heading$" expanded))
      (should (string-match-p "\t#\\+begin_src sh$" expanded))
      (should-not (string-match-p "begin_tool" expanded))
      (should (string-match-p "It has \\*one\\* heading\\." expanded)))))

;;;; Streaming and abort

(ert-deftest mevedel-e2e:streaming-appends-without-rerender ()
  "Streamed text reaches the view chunk by chunk; the turn is redrawn only
at its start, when tool results arrive and at its end."
  (let* ((chunks 0) (redraws 0) (full 0)
         (count-text (lambda (event &rest _) (when (eq event 'text) (cl-incf chunks))))
         (count-turn (lambda (&rest _) (cl-incf redraws)))
         (count-full (lambda (&rest _) (cl-incf full)))
         (long (mapconcat (lambda (n) (format "word%d" n)) (number-sequence 1 120) " ")))
    (advice-add 'mevedel-view--render-turn :before count-turn)
    (advice-add 'mevedel-view-rerender :before count-full)
    (unwind-protect
        (let ((run (mevedel-e2e-run
                    :wire 'openai :stream t :prompt "Talk" :delay 0.01
                    :setup (lambda (chat) (mevedel-chat-observe chat count-text))
                    :steps `(((text . ,long))))))
          (should (eq (plist-get run :outcome) 'done))
          (should (> chunks 20))
          (should (<= redraws 2))
          (should (= full 1))           ;the new view's first drawing
          (should (string-match-p "word1 word2 .* word120\n\\'" (plist-get run :transcript))))
      (advice-remove 'mevedel-view--render-turn count-turn)
      (advice-remove 'mevedel-view-rerender count-full))))

(ert-deftest mevedel-e2e:abort-stops-the-turn ()
  "C-c C-k during a slow stream ends the turn as aborted, with a notice."
  (let* ((aborted nil)
         (long (mapconcat (lambda (n) (format "w%d" n)) (number-sequence 1 400) " "))
         (run (mevedel-e2e-run
               :wire 'anthropic :stream t :prompt "Talk slowly" :delay 0.01
               :during (lambda (chat view)
                         (when (and (not aborted) (eq (mevedel-chat-status chat) 'streaming))
                           (setq aborted t)
                           (with-current-buffer view
                             (call-interactively (key-binding (kbd "C-c C-k"))))))
               :steps `(((text . ,long))))))
    (should aborted)
    (should (eq (plist-get run :outcome) 'abort))
    (should (string-match-p "\\[Aborted\\]\n\\'" (plist-get run :transcript)))
    (should-not (mevedel-chat-busy-p (plist-get run :chat)))))

;;;; Errors

(ert-deftest mevedel-e2e:request-error-ends-turn ()
  "An HTTP error that will not pass (400) ends the turn with an error notice."
  (let ((run (mevedel-e2e-run
              :wire 'openai :stream t :prompt "Hello"
              :steps '(((error . ((status . 400) (message . "no such model"))))))))
    (should (eq (plist-get run :outcome) 'error))
    (should (= (length (plist-get run :log)) 1))
    (should (string-match-p "Request failed: 127\\.0\\.0\\.1:[0-9]+ answered HTTP 400: no such model"
                            (plist-get run :transcript)))))

(provide 'session-e2e-test)
;;; session-e2e-test.el ends here
