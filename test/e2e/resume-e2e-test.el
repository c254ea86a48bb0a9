;;; resume-e2e-test.el --- Saved sessions: round trip, resume, crashes  -*- lexical-binding: t; -*-

;;; Commentary:

;; Sessions saved through the real path (turns against the scripted
;; model, the transcript log in session.sqlite) and brought back: in
;; this Emacs, in a child Emacs, after `kill -9' of a child Emacs at
;; many points of its turns, and from the headless command line.  The
;; scripted server refuses a request whose history has a tool call
;; without a result, as real providers do.  Saving is mevedel-save.el,
;; loading and settling a cut turn mevedel-resume.el.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)
(require 'mevedel-session-list)

;;;; Round trip in this Emacs

(ert-deftest mevedel-resume:save-restore-round-trip ()
  "A saved session comes back with its text, properties, rows, mail and history.
The view after resuming shows the same rows; the next turn's request
carries every earlier message."
  (mevedel-e2e-with-server (root server mevedel-e2e-two-turns)
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view))
           (id (mevedel-session-id (mevedel-chat-session chat))))
      (mevedel-e2e-attach chat server 'openai)
      (should (eq (mevedel-e2e-send-and-wait view "What is the answer?") 'done))
      ;; The header shows the usage the provider reported (the scripted
      ;; server counts input as its caching simulation does).
      (let ((usage (with-current-buffer view (mevedel-view--usage-text chat)))
            (input (apply #'+ (mapcar (lambda (entry)
                                        (alist-get 'prompt_tokens (alist-get 'usage entry)))
                                      (mevedel-scripted-model-log server)))))
        (should (> input 0))
        (should (string-prefix-p (format "context %s tokens · turn ?"
                                         (mevedel-view--tokens (mevedel-chat-context-tokens chat)))
                                 usage))
        (should (string-suffix-p (format " · session ?, %s in / 10 out" (mevedel-view--tokens input))
                                 usage)))
      ;; Mail read with the first turn stays in the transcript, marked.
      (mevedel-core-mailbox-post (mevedel-session-store-handle (mevedel-chat-session chat))
                                 "/root" "EXECUTION" "a background note")
      (let* ((before (mevedel-test-saved-runs (mevedel-chat-data-buffer chat)))
             (rows (mevedel-e2e-view-rows view)))
        (should (string-match-p "It is 42" (car before)))
        (mevedel-e2e-close-live root)
        (should (equal (mapcar #'car (mevedel-session-saved root)) (list id)))
        (let* ((view2 (mevedel root))
               (chat2 (mevedel-view-chat view2)))
          (should-not (eq chat2 chat))
          (should (equal (mevedel-session-id (mevedel-chat-session chat2)) id))
          (should (equal (mevedel-test-saved-runs (mevedel-chat-data-buffer chat2)) before))
          (should (equal (mevedel-e2e-view-rows view2) rows))
          (should (equal (mevedel-chat-history chat2) '("What is the answer?")))
          (should (equal (mevedel-chat-title chat2) "What is the answer?"))
          (should (equal (with-current-buffer view2 (mevedel-view--usage-text chat2))
                         (with-current-buffer view2 (mevedel-view--usage-text chat))))
          (should (equal (mapcar (lambda (turn) (plist-get turn :label)) (mevedel-chat-turns chat2))
                         '("What is the answer?")))
          ;; The unread mail is still unread and goes with the next turn.
          (mevedel-e2e-attach chat2 server 'openai)
          (should (eq (mevedel-e2e-send-and-wait view2 "And the file?") 'done))
          (let* ((request (car (last (mevedel-scripted-model-log server))))
                 (messages (alist-get 'messages (alist-get 'body request)))
                 (texts (mapconcat (lambda (m) (format "%s" (alist-get 'content m))) messages "\n")))
            (should-not (alist-get 'mismatches request))
            (should (string-match-p "What is the answer\\?" texts))
            (should (string-match-p "It is 42" texts))
            (should (string-match-p "a background note" texts)))
          (with-current-buffer (mevedel-chat-data-buffer chat2)
            (should (text-property-any (point-min) (point-max) 'mevedel-mail t)))
          ;; The readable copy follows the transcript.
          (mevedel-save-flush chat2)
          (let ((copy (mevedel-transcript-export-name
                       (mevedel-chat-data-buffer chat2)
                       (mevedel-session-directory (mevedel-chat-session chat2)))))
            (should (file-exists-p copy))
            (should (string-match-p "notes.txt holds it"
                                    (with-temp-buffer (insert-file-contents copy)
                                                      (buffer-string))))))))))

;;;; history://

(ert-deftest mevedel-resume:history-read-and-grep ()
  "history://root pages the live conversation; Grep's lines match Read's.
history://saved lists saved sessions and reads and searches them
without resuming them; unavailable forms say why."
  (mevedel-e2e-with-server (root server mevedel-e2e-two-turns)
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view))
           (id (mevedel-session-id (mevedel-chat-session chat))))
      (mevedel-e2e-attach chat server 'openai)
      (should (eq (mevedel-e2e-send-and-wait view "What is the answer?") 'done))
      (cl-flet ((run (name args) (mevedel-test-run-tool chat name "call_h" args)))
        (let* ((whole (run "Read" '(:file_path "history://root")))
               (grep (run "Grep" '(:pattern "answer is 42" :path "history://root"
                                            :output_mode "content")))
               (line (and (string-match "\\`history://root:\\([0-9]+\\):" grep)
                          (string-to-number (match-string 1 grep)))))
          (should (string-match-p "## User" whole))
          (should (string-match-p "What is the answer\\?" whole))
          (should (string-match-p "### Tool call Read" whole))
          (should (string-match-p "It is 42\\." whole))
          (should-not (string-match-p "mevedel-render-data" whole))
          ;; Grep's line is the line Read shows there.
          (should line)
          (should (string-match-p
                   (format "^ *%d\t.*the answer is 42" line)
                   (run "Read" `(:file_path "history://root" :offset ,line :limit 1))))
          ;; Pages: a later page starts where asked.
          (should (string-match-p "^ *3\t" (run "Read" '(:file_path "history://root"
                                                                :offset 3 :limit 2)))))
        ;; Unsaved text is there at once.
        (with-current-buffer (mevedel-chat-data-buffer chat)
          (goto-char (point-max))
          (insert "\n\n### a note typed just now\n"))
        (should (string-match-p "a note typed just now"
                                (run "Grep" '(:pattern "typed just" :path "history://root"
                                                       :output_mode "content"))))
        ;; Saved sessions: listed, read and searched without resuming.
        (mevedel-save-flush chat)
        (let ((listing (run "Read" '(:file_path "history://saved"))))
          (should (string-match-p (regexp-quote (format "history://saved/%s/segment-0001.chat.org" id))
                                  listing))
          (should (string-match-p "What is the answer\\?" listing)))
        (should (string-match-p "It is 42"
                                (run "Read" `(:file_path ,(format "history://saved/%s/segment-0001.chat.org"
                                                                  id)))))
        (should (string-match-p (regexp-quote (format "history://saved/%s/segment-0001.chat.org:" id))
                                (run "Grep" '(:pattern "It is 42" :path "history://saved"
                                                       :output_mode "content"))))
        (should (string-match-p "segment-0001.chat.org"
                                (run "Glob" '(:pattern "*.org" :path "history://saved"))))
        (should (string-match-p "history://saved" (run "Read" (list :file_path "history://"))))
        (should (string-match-p "No retained agent at /root/reviewer"
                                (run "Read" '(:file_path "history://root/reviewer"))))
        (should (string-match-p "has no segment"
                                (run "Read" `(:file_path ,(format "history://saved/%s/segment-0002.chat.org"
                                                                  id)))))
        (should (string-match-p "lists the saved sessions"
                                (run "Read" '(:file_path "history://saved/no-such-session")))))
      ;; Issue 42 item 7: without a live session, Grep over the saved
      ;; sessions answers later (Emacs runs between sessions) and counts
      ;; the ones it could not read.
      (let ((broken (expand-file-name ".mevedel/sessions/broken-session" root)))
        (make-directory broken t)
        (with-temp-file (expand-file-name "session.sqlite" broken) (insert "not a database"))
        (with-temp-buffer
          (setq default-directory root)
          (let* ((result nil)
                 (mevedel-session-current nil))
            (mevedel-pipeline-run-tool (mevedel-tool-get "Grep")
                                       '(:pattern "It is 42" :path "history://saved"
                                                  :output_mode "content")
                                       (lambda (r) (setq result r)))
            (should-not result)
            (mevedel-test-wait-until result 30)
            (should (string-match-p (regexp-quote (format "history://saved/%s/segment-0001.chat.org:" id))
                                    result))
            (should (string-search "1 saved session could not be read" result))))))))

;;;; A failed write

(ert-deftest mevedel-resume:failed-write-is-reported-and-nothing-is-lost ()
  "A write the store refuses is reported, and the next checkpoint saves all.
The store's writer cannot write the readable copy into a directory
that is not there: the failure arrives as an event, warns, and marks
the conversation unsaved from its start, so nothing in memory is lost."
  (mevedel-e2e-with-server (root server mevedel-e2e-two-turns)
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view))
           (buffer (mevedel-chat-data-buffer chat))
           (reported nil)
           (mevedel-transcript-failure-functions
            (list (lambda (_file message) (push message reported)))))
      (mevedel-e2e-attach chat server 'openai)
      (should (eq (mevedel-e2e-send-and-wait view "What is the answer?") 'done))
      (should-not (mevedel-save-flush chat))
      (should-not (mevedel-transcript-dirty-p buffer))
      (mevedel-transcript-consolidate buffer (expand-file-name "no-such-dir/transcript.md" root))
      (mevedel-test-wait-until reported 10)
      (should (string-match-p "Cannot write" (car reported)))
      (should (mevedel-transcript-dirty-p buffer))
      (with-current-buffer "*Warnings*"
        (should (string-match-p "Saving the conversation failed" (buffer-string))))
      (let ((before (mevedel-test-saved-runs buffer)))
        (mevedel-save-flush chat)
        (mevedel-e2e-close-live root)
        (let ((view2 (mevedel root)))
          (should (equal (mevedel-test-saved-runs
                          (mevedel-chat-data-buffer (mevedel-view-chat view2)))
                         before)))))))

;;;; Resume after a restart

(ert-deftest mevedel-resume:resume-in-a-new-emacs ()
  "A child Emacs opening the workspace resumes its newest session.
It shows the saved turn and brings back the composer history."
  (mevedel-e2e-with-server (root server mevedel-e2e-two-turns)
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view)))
      (mevedel-e2e-attach chat server 'anthropic)
      (should (eq (mevedel-e2e-send-and-wait view "What is the answer?") 'done))
      (mevedel-e2e-close-live root)
      (pcase-let ((`(,status . ,output)
                   (mevedel-test-run-emacs
                    `(progn
                       (require 'mevedel)
                       (let* ((view (mevedel ,root))
                              (chat (mevedel-view-chat view)))
                         (princ (format "HISTORY=%S\n" (mevedel-chat-history chat)))
                         (princ (with-current-buffer view
                                  (buffer-substring-no-properties (point-min) (point-max)))))))))
        (unless (= status 0) (ert-fail (list status output)))
        (should (string-match-p "HISTORY=(\"What is the answer\\?\")" output))
        (should (string-match-p "❯ What is the answer\\?" output))
        (should (string-match-p "✓ Read notes\\.txt" output))
        (should (string-match-p "It is 42\\." output))))))

;; A session in sticky Plan is saved in Plan: a new Emacs resumes it
;; there, with the header saying so and the next turn stamped.
(ert-deftest mevedel-resume:sticky-plan-survives-resume-in-a-new-emacs ()
  "A session saved in sticky Plan resumes in Plan in a child Emacs."
  (mevedel-e2e-with-server (root server '(((text . "Planning first."))))
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view)))
      (mevedel-e2e-attach chat server 'openai)
      (mevedel-plan-enter (mevedel-chat-session chat))
      (should (eq (mevedel-e2e-send-and-wait view "Plan the change") 'done))
      (mevedel-e2e-close-live root)
      (pcase-let ((`(,status . ,output)
                   (mevedel-test-run-emacs
                    `(progn
                       (require 'mevedel)
                       (let* ((view (mevedel ,root))
                              (chat (mevedel-view-chat view))
                              (turn (list :id "next")))
                         (run-hook-with-args 'mevedel-chat-turn-functions chat turn)
                         (princ (format "MODE=%s STAMP=%S\n" (mevedel-chat-permission-mode chat)
                                        (plist-get turn :plan-stamp)))
                         (princ (with-current-buffer view (mevedel-view--header-line))))))))
        (unless (= status 0) (ert-fail (list status output)))
        (should (string-match-p "MODE=plan STAMP=(:plan sticky)" output))
        (should (string-match-p "PLAN mode" output))))))

;;;; Abort during a tool call

(mevedel-e2e-deftest-matrix mevedel-resume:abort-during-call-then-next-turn
    "After C-c C-k while a call runs, the call has a cancelled result.
The next turn's request is valid (no call without a result) and succeeds."
    (wire stream)
  (mevedel-e2e-with-server
      (root server `(((tool_calls . [((name . "Bash")
                                      (arguments . ((command . "sleep 5") (description . "wait"))))]))
                     ((text . "Fine."))))
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view))
           (aborted nil))
      (mevedel-e2e-attach chat server wire (not stream))
      (should (eq (mevedel-e2e-send-and-wait
                   view "wait"
                   (lambda (chat)
                     (when (and (not aborted) (eq (mevedel-chat-status chat) 'tools))
                       (setq aborted t)
                       (mevedel-chat-abort chat))))
                  'abort))
      (should (string-match-p "Cancelled: the user interrupted"
                              (with-current-buffer (mevedel-chat-data-buffer chat) (buffer-string))))
      (should (eq (mevedel-e2e-send-and-wait view "go on") 'done))
      (let ((request (car (last (mevedel-scripted-model-log server)))))
        (should-not (alist-get 'mismatches request))))))

;;;; Queued input

(mevedel-e2e-deftest-matrix mevedel-resume:queued-message-joins-after-the-tool-batch
    "A message sent while a call runs is queued, shown, then delivered.
It reaches the model as a user message after the call's result and
before the next sample; the transcript shows it there."
    (wire stream)
  (mevedel-e2e-with-server
      (root server `(((tool_calls . [((name . "Bash")
                                      (arguments . ((command . "sleep 1; echo slept")
                                                    (description . "wait"))))]))
                     ((expect . ((user_contains . "also look at the tests")))
                      (text . "Noted, tests too."))))
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view))
           (queued nil))
      (mevedel-e2e-attach chat server wire (not stream))
      (should (eq (mevedel-e2e-send-and-wait
                   view "wait a bit"
                   (lambda (chat)
                     (when (and (not queued) (eq (mevedel-chat-status chat) 'tools))
                       (setq queued t)
                       (with-current-buffer view
                         (goto-char (point-max))
                         (insert "also look at the tests")
                         (mevedel-view-send)
                         ;; Shown above the composer, and the composer is free.
                         (should (equal (mevedel-chat-queued chat) '("also look at the tests")))
                         (should (string-match-p "queued: also look at the tests"
                                                 (overlay-get mevedel-view--queued-overlay
                                                              'before-string)))
                         (should (string-empty-p (mevedel-view--composer-text)))))))
                  'done))
      (should queued)
      (should-not (mevedel-chat-queued chat))
      (let* ((request (car (last (mevedel-scripted-model-log server))))
             (messages (alist-get 'messages (alist-get 'body request))))
        (should-not (alist-get 'mismatches request))
        (should (string-match-p "also look at the tests"
                                (format "%s" (alist-get 'content (car (last messages)))))))
      (let ((transcript (mevedel-e2e-transcript-text view)))
        (should (< (string-search "$ sleep 1" transcript)
                   (string-search "❯ also look at the tests" transcript)
                   (string-search "Noted, tests too." transcript))))
      (should (equal (car (mevedel-chat-history chat)) "also look at the tests")))))

(ert-deftest mevedel-resume:queued-message-after-the-last-sample-starts-the-next-turn ()
  "A message queued during a turn without more tool batches is its own next turn.
A queued message can also be taken back into the composer."
  (mevedel-e2e-with-server
      (root server '(((text . "First answer, streamed slowly to leave time to queue."))
                     ((expect . ((user_contains . "follow-up")))
                      (text . "Second answer."))))
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view))
           (ends nil))
      (mevedel-e2e-attach chat server 'openai)
      (mevedel-chat-observe chat (lambda (event _chat &rest args)
                                   (when (eq event 'turn-end) (push (car args) ends))))
      (with-current-buffer view
        (goto-char (point-max))
        (insert "first")
        (mevedel-view-send)
        (should (mevedel-chat-busy-p chat))
        (insert "take me back")
        (mevedel-view-send)
        (mevedel-view-unqueue)
        (should (equal (mevedel-view--composer-text) "take me back"))
        (should-not (mevedel-chat-queued chat))
        (mevedel-view--set-composer "follow-up")
        (mevedel-view-send)
        (should (equal (mevedel-chat-queued chat) '("follow-up"))))
      (mevedel-test-wait-until (= (length ends) 2) 20)
      (should (equal ends '(done done)))
      (should (string-match-p "Second answer" (mevedel-e2e-transcript-text view)))
      (should-not (cl-some (lambda (entry) (alist-get 'mismatches entry))
                           (mevedel-scripted-model-log server))))))

;;;; Crashes

(defconst mevedel-resume-test--crash-steps
  (let ((long (mapconcat (lambda (i) (format "word%d" i)) (number-sequence 1 60) " ")))
    `(((text . ,(concat "First I look. " long))
       (tool_calls . [((name . "Read") (arguments . ((file_path . "{{root}}notes.txt"))))
                      ((name . "Bash") (arguments . ((command . "sleep 0.4; echo slept")
                                                     (description . "pause"))))]))
      ((text . ,(concat "Then I search. " long))
       (tool_calls . [((name . "Grep") (arguments . ((pattern . "answer") (path . "{{root}}"))))]))
      ((text . ,(concat "Done: 42. " long)))))
  "One turn of a crash run: streamed text, two parallel calls, a call, an answer.")

(defun mevedel-resume-test--child-form (root init turns)
  "Return the form of a child Emacs running TURNS turns in ROOT with INIT.
It reports on stderr: STREAM on the first chunk of each response, TOOLS
when calls start, SETTLED ID once a call's result is saved, TURN-END."
  `(progn
     (require 'mevedel)
     (load ,init nil t)
     (setq mevedel-permissions-mode 'full-auto)
     (let* ((view (mevedel ,root))
            (chat (mevedel-view-chat view))
            (done nil) (streaming nil))
       (mevedel-chat-observe
        chat (lambda (event _chat &rest args)
               (pcase event
                 ('text (unless streaming (setq streaming t) (message "STREAM")))
                 ('tools-start (setq streaming nil) (message "TOOLS"))
                 ('tool-results (dolist (r (car args)) (message "SETTLED %s" (plist-get r :id))))
                 ('turn-end (setq done t streaming nil) (message "TURN-END %s" (car args))))))
       (dotimes (i ,turns)
         (setq done nil)
         (mevedel-chat-send chat (format "turn %d" (1+ i)))
         (while (not done) (accept-process-output nil 0.02)))
       (message "ALL-DONE"))))

(defun mevedel-resume-test--crash-once (wire marker nth delay)
  "Kill a child Emacs DELAY seconds after its NTH MARKER line, then resume.
WIRE is the backend's format.  Return a description of what failed, or nil."
  (let* ((root (mevedel-e2e-workspace '(("notes.txt" . "the answer is 42\n"))))
         (script (mevedel-e2e-write-script
                  (append mevedel-resume-test--crash-steps mevedel-resume-test--crash-steps)))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root)) :delay 0.01))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) wire t nil))
         (recovery-script (mevedel-e2e-write-script '(((text . "Recovered.")))))
         (recovery (mevedel-scripted-model-start recovery-script))
         (output (generate-new-buffer " *crash child*"))
         (seen 0) (killed nil) (problem nil))
    (unwind-protect
        (let ((child (make-process
                      :name "mevedel-crash-child" :buffer output :noquery t
                      :connection-type 'pipe
                      :command (cons (expand-file-name invocation-name invocation-directory)
                                     (mevedel-test-emacs-args
                                      (mevedel-resume-test--child-form root init 2)))))
              (deadline (+ (float-time) 60)))
          ;; Kill at the chosen point.
          (while (and (process-live-p child) (not killed) (< (float-time) deadline))
            (accept-process-output child 0.01)
            (setq seen (with-current-buffer output
                         (cl-count-if (lambda (line) (string-prefix-p marker line))
                                      (split-string (buffer-string) "\n"))))
            (when (>= seen nth)
              (sleep-for delay)
              (signal-process child 'SIGKILL)
              (setq killed t)))
          (while (process-live-p child) (accept-process-output child 0.05))
          (let* ((lines (with-current-buffer output (split-string (buffer-string) "\n" t)))
                 (settled (delq nil (mapcar (lambda (line)
                                              (and (string-match "\\`SETTLED \\(.+\\)" line)
                                                   (match-string 1 line)))
                                            lines)))
                 (ended (cl-count-if (lambda (line) (string-prefix-p "TURN-END done" line)) lines))
                 (view (mevedel root))
                 (chat (mevedel-view-chat view))
                 (data (mevedel-chat-data-buffer chat))
                 (segments (mevedel-history-segments data)))
            (cond
             ((not killed) (setq problem (format "never saw %d %s lines: %S" nth marker lines)))
             ((cl-find-if-not (lambda (id) (mevedel-chat-tool-region data id)) settled)
              (setq problem (format "settled call %s lost"
                                    (cl-find-if-not (lambda (id) (mevedel-chat-tool-region data id))
                                                    settled))))
             ((< (cl-count 'user segments :key (lambda (s) (plist-get s :type))) ended)
              (setq problem (format "%d turns ended but %d are saved" ended
                                    (cl-count 'user segments :key (lambda (s) (plist-get s :type))))))
             (t
              (setf (mevedel-chat-backend chat)
                    (mevedel-scripted-model-backend recovery :wire wire :stream t)
                    (mevedel-chat-model chat) 'scripted-model)
              (let ((outcome (mevedel-e2e-send-and-wait view "after the crash"))
                    (request (car (last (mevedel-scripted-model-log recovery)))))
                (unless (and (eq outcome 'done) request (not (alist-get 'mismatches request)))
                  (setq problem (format "next turn %s: %S" outcome
                                        (alist-get 'mismatches request)))))))
            (when problem
              (setq problem (format "%s %s #%d +%ss: %s\nchild: %S" wire marker nth delay problem
                                    lines)))))
      (mevedel-e2e-close-live root)
      (kill-buffer output)
      (mevedel-scripted-model-stop server)
      (mevedel-scripted-model-stop recovery)
      (dolist (file (list script recovery-script init)) (delete-file file))
      (delete-directory root t))
    problem))

(defconst mevedel-resume-test--kill-points
  '(("STREAM" 1 0.05) ("STREAM" 1 0.2) ("TOOLS" 1 0.0) ("TOOLS" 1 0.2) ("SETTLED" 1 0.0)
    ("SETTLED" 2 0.01) ("STREAM" 2 0.1) ("TOOLS" 2 0.05) ("SETTLED" 3 0.0) ("TURN-END" 1 0.0))
  "Where a crash run kills its child: after the Nth MARKER line, plus a delay.
Streaming text, calls running, right after a result was saved, and a
turn's end (its compaction) are all covered, for each wire format.")

(ert-deftest mevedel-resume:kill-9-at-20-points ()
  "After `kill -9' of Emacs at 20 points, the resumed session is whole.
Every call whose result was reported saved is in the transcript, every
ended turn is there, and the next turn's request is valid and succeeds,
for OpenAI and Anthropic."
  (let ((problems nil))
    (dolist (wire '(openai anthropic))
      (pcase-dolist (`(,marker ,nth ,delay) mevedel-resume-test--kill-points)
        (when-let* ((problem (mevedel-resume-test--crash-once wire marker nth delay)))
          (push problem problems))))
    (should-not problems)))

(ert-deftest mevedel-resume:kill-9-during-a-toolcall-program ()
  "A ToolCall program cut off by `kill -9' comes back with what it had run."
  (let* ((root (mevedel-e2e-workspace '(("notes.txt" . "the answer is 42\n"))))
         (program "(let [a (Read :file_path \"{{root}}notes.txt\")
                         b (Bash :command \"sleep 30; echo late\" :description \"wait\")]
                     b)")
         (script (mevedel-e2e-write-script
                  `(((tool_calls . [((name . "ToolCall") (arguments . ((program . ,program))))]))
                    ((text . "unreachable")))))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) 'openai t nil))
         (output (generate-new-buffer " *crash child*")))
    (unwind-protect
        (let ((child (make-process
                      :name "mevedel-crash-child" :buffer output :noquery t
                      :connection-type 'pipe
                      :command (cons (expand-file-name invocation-name invocation-directory)
                                     (mevedel-test-emacs-args
                                      (mevedel-resume-test--child-form root init 1))))))
          ;; Read has settled and Bash runs once the record has caught up (1 s).
          (mevedel-test-wait-until
            (with-current-buffer output (string-search "TOOLS" (buffer-string))) 30)
          (sleep-for 2)
          (signal-process child 'SIGKILL)
          (while (process-live-p child) (accept-process-output child 0.05))
          (let* ((view (mevedel root))
                 (data (mevedel-chat-data-buffer (mevedel-view-chat view)))
                 (text (with-current-buffer data (buffer-substring-no-properties
                                                  (point-min) (point-max)))))
            (should (string-search "Error: Emacs stopped while this ToolCall program ran; 1 of \
its 2 nested calls had finished (Read, Bash)" text))
            (should (string-search "Interrupted: Emacs stopped before this turn finished"
                                   (with-current-buffer view (buffer-string))))))
      (mevedel-e2e-close-live root)
      (kill-buffer output)
      (mevedel-scripted-model-stop server)
      (dolist (file (list script init)) (delete-file file))
      (delete-directory root t))))

;;;; Headless

(ert-deftest mevedel-resume:headless-continue-and-list ()
  "The second headless run with --continue sends the first run's messages.
--list-sessions --json lists the session the --json transcript names."
  (mevedel-e2e-with-headless-runs
      (run root server '(((text . "First answer."))
                         ((expect . ((user_contains . "second")))
                          (text . "Second answer.")))
           '(("notes.txt" . "x\n")))
    (pcase-let* ((`(,s1 ,out1) (run "-p" "first question" "--json"))
                 (first (json-parse-string out1 :object-type 'alist))
                 (`(,s2 ,out2) (run "--continue" "-p" "second question"))
                 (`(,s3 ,out3) (run "--list-sessions" "--json"))
                 (listed (json-parse-string out3 :object-type 'alist :array-type 'list))
                 (`(,s4) (run "--resume" "no-such-session" "-p" "x")))
      (should (= s1 0))
      (should (stringp (alist-get 'session first)))
      (let ((reported (alist-get 'usage (car (mevedel-scripted-model-log server)))))
        (should (equal (cl-loop for key in '(input_tokens cache_read_tokens output_tokens
                                             context_tokens context_window
                                             context_estimated cost_usd)
                                collect (assq key (alist-get 'usage first)))
                       `((input_tokens . ,(- (alist-get 'prompt_tokens reported)
                                             (alist-get 'cached_tokens
                                                        (alist-get 'prompt_tokens_details
                                                                   reported))))
                         (cache_read_tokens . ,(alist-get 'cached_tokens
                                                          (alist-get 'prompt_tokens_details
                                                                     reported)))
                         (output_tokens . 5)
                         (context_tokens . ,(alist-get 'total_tokens reported))
                         (context_window . :null) (context_estimated . :false)
                         (cost_usd . :null)))))
      (should (= s2 0))
      (should (string-match-p "Second answer" out2))
      (let* ((log (mevedel-scripted-model-log server))
             (messages (alist-get 'messages (alist-get 'body (nth 1 log)))))
        (should-not (alist-get 'mismatches (nth 1 log)))
        (should (cl-find "first question" messages
                         :key (lambda (m) (format "%s" (alist-get 'content m)))
                         :test #'string-match-p))
        (should (cl-find "First answer." messages
                         :key (lambda (m) (format "%s" (alist-get 'content m)))
                         :test #'string-match-p)))
      (should (= s3 0))
      (should (equal (mapcar (lambda (s) (alist-get 'id s)) listed)
                     (list (alist-get 'session first))))
      (should (= (alist-get 'turns (car listed)) 2))
      (should (= s4 2)))))

(provide 'resume-e2e-test)
;;; resume-e2e-test.el ends here
