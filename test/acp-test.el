;;; acp-test.el --- ACP agents as providers, against the scripted agent  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A chat whose turns an ACP agent answers (mevedel-acp.el), driven
;; through its view as a user does, with the project's scripted agent
;; (crates/mevedel-core/tests/acp-agents/fake_agent.py) as the agent:
;; streamed text as the assistant's answer, the native session id
;; saved, permission requests per mode (a card in ask mode, allowed in
;; full-auto, refused where nobody can answer), reads that see unsaved
;; buffers, writes through ApplyPatch, mevedel's own tools served
;; over MCP run through the pipeline, terminals as sandboxed executions
;; judged as Bash, hooks around the agent's own calls, its slash
;; commands in the composer, its usage recorded, cancel on abort, an
;; agent's failure word for word, and a missing agent named with its
;; package.

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-acp)
(require 'mevedel-history)
(require 'mevedel-interaction)
(require 'mevedel-agent)
(require 'mevedel-usage)
(require 'mevedel-batch)

(defconst acp-test--fake
  (expand-file-name "crates/mevedel-core/tests/acp-agents/fake_agent.py" mevedel-test-root)
  "The scripted ACP agent.")

(defmacro acp-test--with-agent (view chat &rest body)
  "Run BODY with VIEW and CHAT of a fresh session answered by the scripted agent.
The agent keeps its sessions in a file, so a later process of it
resumes them, as real agents do; `acp-test--args' are its options."
  (declare (indent 2))
  `(progn
     (unless (executable-find "python3")
       (ert-fail "python3 is required by the ACP tests but is not installed"))
     (let* ((state (make-temp-file "mevedel-acp-state-" nil ".json" "{}"))
            (mevedel-acp-agents `((fake :command "python3"
                                        :args (,acp-test--fake "--state" ,state ,@acp-test--args)
                                        :package "fake-agent")))
            (mevedel-provider 'fake))
       (unwind-protect
           (mevedel-test-with-view ,view ,chat
             (unwind-protect (progn ,@body)
               (when (buffer-live-p (mevedel-chat-data-buffer ,chat))
                 (mevedel-chat-abort ,chat))))
         (delete-file state)))))

(defvar acp-test--args nil
  "More options of the scripted agent, for `acp-test--with-agent'.")

(defun acp-test--reopen (view chat)
  "Close VIEW and CHAT's session, as quitting Emacs does; return the new view.
It shows the same session, resumed as the sessions list resumes it."
  (let ((root (mevedel-chat-root chat))
        (id (mevedel-session-id (mevedel-chat-session chat))))
    (kill-buffer view)
    (kill-buffer (mevedel-chat-data-buffer chat))
    (let ((again (mevedel-session-list-open root id)))
      (should (equal (mevedel-session-id (mevedel-chat-session (mevedel-view-chat again))) id))
      again)))

(defmacro acp-test--reopened (view chat old-view old-chat &rest body)
  "Run BODY with VIEW and CHAT the resumed session of OLD-VIEW and OLD-CHAT."
  (declare (indent 4))
  `(let* ((,view (acp-test--reopen ,old-view ,old-chat))
          (,chat (mevedel-view-chat ,view)))
     (unwind-protect (progn ,@body)
       (mevedel-chat-abort ,chat)
       (kill-buffer ,view)
       (kill-buffer (mevedel-chat-data-buffer ,chat)))))

(defun acp-test--send (view chat text &optional during)
  "Type TEXT in VIEW and send it; return CHAT's outcome once its turn ended.
DURING is called with nothing while the turn runs."
  (let ((outcome nil))
    (mevedel-chat-observe chat (lambda (event _chat &rest args)
                                 (when (eq event 'turn-end) (setq outcome (car args)))))
    (with-current-buffer view
      (goto-char (point-max))
      (insert text)
      (mevedel-view-send))
    (let ((deadline (+ (float-time) 30)))
      (while (and (not outcome) (< (float-time) deadline))
        (when during (funcall during))
        (accept-process-output nil 0.02)))
    outcome))

(defun acp-test--segments (chat)
  "Return the transcript segments of CHAT's last turn."
  (mevedel-history-segments (mevedel-chat-data-buffer chat)
                            (marker-position (mevedel-chat-turn-start chat))))

(defun acp-test--answer (chat)
  "Return the assistant's text of CHAT's last turn."
  (mapconcat (lambda (s) (plist-get s :text))
             (cl-remove 'response (acp-test--segments chat)
                        :key (lambda (s) (plist-get s :type)) :test-not #'eq)
             ""))

(defun acp-test--calls (chat)
  "Return the tool segments of CHAT's last turn."
  (cl-remove 'tool (acp-test--segments chat)
             :key (lambda (s) (plist-get s :type)) :test-not #'eq))

(defun acp-test--view-rows (view)
  "Return VIEW's tool rows as (ID . LINE)."
  (with-current-buffer view
    (save-excursion
      (goto-char (point-min))
      (let (rows match)
        (while (setq match (text-property-search-forward 'mevedel-row nil (lambda (_ v) v)))
          (push (cons (prop-match-value match)
                      (buffer-substring-no-properties (prop-match-beginning match)
                                                      (prop-match-end match)))
                rows))
        rows))))

(defun acp-test--saved (chat)
  "Return CHAT's saved session metadata."
  (mevedel-core-store-info-get (mevedel-save-store chat)))

(ert-deftest acp-test-text-turn-streams-and-saves-the-native-session ()
  "The agent's text is the answer, shown in the view; its session id is saved."
  (acp-test--with-agent view chat
    (let ((texts nil))
      (mevedel-chat-observe chat (lambda (event _chat &rest args)
                                   (when (eq event 'text) (push (car args) texts))))
      (should (eq (acp-test--send view chat "Hello there") 'done))
      (should (equal (acp-test--answer chat) "Hello there"))
      (should (equal texts '("Hello there")))
      (should (string-match-p "Hello there" (with-current-buffer view (buffer-string))))
      (should (equal (mevedel-acp-chat-provider chat) 'fake))
      (let ((info (cdr (assoc (mevedel-session-id (mevedel-chat-session chat))
                              (mevedel-session-saved (mevedel-chat-root chat))))))
        (should (equal (cdr (assoc "acp-agent" info)) "fake"))
        (should (equal (cdr (assoc "acp-session" info)) "sess-1")))
      ;; The next turn goes to the same agent and session.
      (should (eq (acp-test--send view chat "Again") 'done))
      (should (equal (acp-test--answer chat) "Again"))
      (should (equal (mevedel-acp--agent-session-id (gethash chat mevedel-acp--by-chat))
                     "sess-1")))))

(ert-deftest acp-test-ask-mode-shows-a-card-and-allows-once ()
  "In ask mode the agent's permission request is a card; allowing it lets the call run."
  (acp-test--with-agent view chat
    (setf (mevedel-chat-permission-mode chat) 'ask)
    (let ((cards 0))
      (should (eq (acp-test--send
                   view chat "ask"
                   (lambda ()
                     (when-let* ((card (car (mevedel-interaction-list chat))))
                       (cl-incf cards)
                       (should (equal (plist-get (mevedel-interaction-data card) :tool) "Write"))
                       (mevedel-interaction-settle card 'once))))
                  'done))
      (should (= cards 1)))
    (should (string-match-p "permission: allow" (acp-test--answer chat)))
    (let ((call (car (acp-test--calls chat))))
      (should (equal (plist-get call :name) "Write"))
      (should (equal (plist-get (plist-get call :args) :file_path) "x.txt"))
      (should (equal (plist-get call :result) "wrote x.txt")))
    (should (assoc "call-w" (acp-test--view-rows view)))
    ;; The thought is a notice of the turn.
    (should (cl-find-if (lambda (s) (and (eq (plist-get s :type) 'notice)
                                         (string-match-p "I should write" (plist-get s :text))))
                        (acp-test--segments chat)))))

(ert-deftest acp-test-full-auto-allows-and-nobody-to-ask-rejects ()
  "Full-auto allows without a card; without a prompter the answer is reject_once."
  (acp-test--with-agent view chat
    (setf (mevedel-chat-permission-mode chat) 'full-auto)
    (should (eq (acp-test--send view chat "ask" (lambda () (should-not (mevedel-interaction-list chat))))
                'done))
    (should (string-match-p "permission: allow" (acp-test--answer chat)))
    (setf (mevedel-chat-permission-mode chat) 'ask)
    (mevedel-chat-set-prompter chat nil)
    (should (eq (acp-test--send view chat "ask") 'done))
    (should (string-match-p "permission: reject" (acp-test--answer chat)))
    (let ((call (car (acp-test--calls chat))))
      (should (string-prefix-p "Permission denied: this Write call needs approval"
                               (plist-get call :result))))))

(ert-deftest acp-test-read-sees-unsaved-buffers-and-writes-through-apply-patch ()
  "fs/read_text_file reads a buffer's unsaved text; fs/write_text_file is ApplyPatch's."
  (acp-test--with-agent view chat
    (setf (mevedel-chat-permission-mode chat) 'full-auto)
    (let* ((root (mevedel-chat-root chat))
           (file (expand-file-name "a.txt" root))
           (new (expand-file-name "new.txt" root))
           (checkpoints nil)
           (record (lambda (&rest args) (push args checkpoints))))
      (with-temp-file file (insert "on disk\n"))
      (let ((buffer (find-file-noselect file)))
        (unwind-protect
            (progn
              (with-current-buffer buffer
                (erase-buffer)
                (insert "unsaved edit\n"))
              (should (eq (acp-test--send view chat (concat "read " file)) 'done))
              (should (equal (acp-test--answer chat) "read: unsaved edit\n"))
              ;; Unsaved work is never clobbered.
              (should (eq (acp-test--send view chat (format "write %s clobber" file)) 'done))
              (should (string-match-p "write: .*unsaved changes" (acp-test--answer chat)))
              (should (equal (with-current-buffer buffer (buffer-string)) "unsaved edit\n"))
              ;; Saved, the buffer is updated by the write, with a checkpoint.
              (with-current-buffer buffer (revert-buffer t t))
              (advice-add 'mevedel-core-checkpoint-before :after record)
              (unwind-protect
                  (should (eq (acp-test--send view chat (format "write %s replaced" file)) 'done))
                (advice-remove 'mevedel-core-checkpoint-before record))
              (should (equal (acp-test--answer chat) "write: ok"))
              (should (equal (with-current-buffer buffer (buffer-string)) "replaced\n"))
              (should-not (buffer-modified-p buffer))
              (should (string-match-p "a\\.txt" (format "%S" checkpoints))))
          (with-current-buffer buffer (set-buffer-modified-p nil))
          (kill-buffer buffer)))
      (should (equal (with-temp-buffer (insert-file-contents file) (buffer-string)) "replaced\n"))
      (should (eq (acp-test--send view chat (format "write %s hello" new)) 'done))
      (should (equal (acp-test--answer chat) "write: ok"))
      (should (equal (with-temp-buffer (insert-file-contents new) (buffer-string)) "hello\n")))))

(defun acp-test--json-answer (chat)
  "Return the JSON object CHAT's last answer holds, as a plist."
  (json-parse-string (acp-test--answer chat) :object-type 'plist :null-object nil
                     :false-object :false))

(ert-deftest acp-test-terminals-run-as-managed-executions ()
  "terminal/* run in the sandbox as executions the panel lists, with limits and kill."
  (acp-test--with-agent view chat
    (setf (mevedel-chat-permission-mode chat) 'full-auto)
    ;; Output within the byte limit, cut at its start beyond it.
    (should (eq (acp-test--send view chat "terminal 6 printf 'héllo world'; exit 3") 'done))
    (let ((answer (acp-test--json-answer chat)))
      (should (string-prefix-p "x" (plist-get (plist-get answer :create) :terminalId)))
      (should (equal (plist-get answer :wait) '(:exitCode 3)))
      (should (equal (plist-get (plist-get answer :output) :output) " world"))
      (should (eq (plist-get (plist-get answer :output) :truncated) t))
      (should (equal (plist-get answer :release) nil)))
    ;; A limit landing inside a character keeps only whole characters.
    (should (eq (acp-test--send view chat "terminal 10 printf 'héllo world'") 'done))
    (should (equal (plist-get (plist-get (acp-test--json-answer chat) :output) :output)
                   "llo world"))
    ;; Confined: the workspace's own state and the user's files stay read-only.
    (should (eq (acp-test--send
                 view chat (format "terminal 0 touch %s/escape.txt; echo $?"
                                   (directory-file-name (expand-file-name "~"))))
                'done))
    (should-not (file-exists-p (expand-file-name "~/escape.txt")))
    ;; Kill: the panel lists it while it runs; it ends by a signal.
    (let ((listed nil))
      (should (eq (acp-test--send
                   view chat "terminal-kill"
                   (lambda ()
                     (when (cl-find-if (lambda (item) (equal (plist-get item :command) "sleep 30"))
                                       (mevedel-core-exec-list
                                        (mevedel-session-id (mevedel-chat-session chat))))
                       (setq listed t))))
                  'done))
      (let ((answer (acp-test--json-answer chat)))
        (should-not (plist-get (plist-get answer :running) :exitStatus))
        (should (plist-get (plist-get answer :wait) :signal))
        (should (plist-get (plist-get answer :output) :exitStatus))
        (should (string-match-p "no terminal" (plist-get (plist-get answer :after) :message))))
      (should listed))))

(ert-deftest acp-test-terminal-commands-are-judged-as-bash ()
  "A terminal's command needs Bash's permission: refused headless, a card in ask mode."
  (acp-test--with-agent view chat
    (setf (mevedel-chat-permission-mode chat) 'ask
          ;; The helpers allow every Bash call; a terminal must ask here.
          mevedel-permissions-rules nil)
    (let ((cards nil))
      (should (eq (acp-test--send
                   view chat "terminal 0 echo hi > ../made.txt"
                   (lambda ()
                     (when-let* ((card (car (mevedel-interaction-list chat))))
                       (push (mevedel-interaction-data card) cards)
                       (mevedel-interaction-settle card 'deny))))
                  'done))
      (should (equal (plist-get (car cards) :tool) "Bash"))
      (should (= (length cards) 1))
      (should (equal (plist-get (car cards) :source) "echo hi > ../made.txt")))
    (should (string-match-p "Permission denied: the user declined"
                            (plist-get (plist-get (acp-test--json-answer chat) :create) :message)))
    (should-not (file-exists-p (expand-file-name "../made.txt" (mevedel-chat-root chat))))
    (mevedel-chat-set-prompter chat nil)
    (should (eq (acp-test--send view chat "terminal 0 echo hi > ../made.txt") 'done))
    (should (string-match-p "Permission denied: this Bash call needs approval"
                            (plist-get (plist-get (acp-test--json-answer chat) :create) :message)))
    ;; A read-only command inside the workspace runs without asking.
    (should (eq (acp-test--send view chat "terminal 0 echo fine") 'done))
    (should (equal (plist-get (plist-get (acp-test--json-answer chat) :output) :output) "fine\n"))))

(ert-deftest acp-test-terminals-run-bash-hooks ()
  "A terminal runs Bash's hooks: a PreToolUse block refuses it, PostToolUse sees its output."
  (acp-test--with-agent view chat
    (setf (mevedel-chat-permission-mode chat) 'full-auto)
    (let* ((pre nil)
           (post nil)
           (mevedel-hooks
            `((PreToolUse (:matcher "Bash"
                           :function ,(lambda (input)
                                        (push input pre)
                                        (when (string-match-p
                                               "rm " (plist-get (plist-get input :tool_input)
                                                                :command))
                                          '(:decision "block" :reason "no removing")))))
              (PostToolUse (:matcher "Bash"
                            :function ,(lambda (input) (push input post)
                                         '(:decision "block" :reason "seen it")))))))
      (should (eq (acp-test--send view chat "terminal 0 rm -f kept.txt") 'done))
      (should (equal (plist-get (plist-get (acp-test--json-answer chat) :create) :message)
                     "Permission denied: a PreToolUse hook blocked this Bash call: no removing"))
      (should (equal (plist-get (plist-get (car pre) :tool_input) :command) "rm -f kept.txt"))
      (should (equal (plist-get (car pre) :tool_name) "Bash"))
      (should-not post)
      (should (eq (acp-test--send view chat "terminal 0 echo hooked") 'done))
      (should (equal (plist-get (plist-get (acp-test--json-answer chat) :output) :output)
                     "hooked\n"))
      (should (mevedel-test-wait-until post 5))
      (should (= (length post) 1))
      (should (equal (plist-get (car post) :hook_event_name) "PostToolUse"))
      (should (equal (plist-get (plist-get (car post) :tool_input) :command) "echo hooked"))
      (should (equal (plist-get (car post) :tool_response) "hooked\n"))
      (should (mevedel-test-wait-until
               (string-match-p "PostToolUse hook on Bash: seen it"
                               (with-current-buffer (mevedel-chat-data-buffer chat)
                                 (buffer-string)))
               5)))))

(ert-deftest acp-test-agent-commands-are-composer-commands ()
  "The agent's slash commands complete in the composer and go to it as text."
  (acp-test--with-agent view chat
    (should (eq (acp-test--send view chat "commands") 'done))
    (let ((entries (mevedel-view--slash-entries chat "")))
      (should (equal (nth 2 (assoc "summarize" entries)) "Summarize a file ([path])"))
      (should (equal (nth 2 (assoc "init" entries)) "Write a CLAUDE.md"))
      ;; A name mevedel's own command has stays mevedel's.
      (should (= (cl-count "review" entries :key #'car :test #'equal) 1)))
    (with-current-buffer view
      (goto-char (point-max))
      (insert "/summ")
      (let ((capf (mevedel-view--slash-capf)))
        (should (equal (all-completions "summ" (nth 2 capf)) '("summarize"))))
      (mevedel-view--set-composer ""))
    (should (eq (acp-test--send view chat "/summarize src/main.rs") 'done))
    (should (equal (acp-test--answer chat) "/summarize src/main.rs"))))

(ert-deftest acp-test-usage-is-recorded-per-turn-and-agent ()
  "The usage an agent reports for a turn is one record; sums per turn, agent, session."
  (acp-test--with-agent view chat
    (should (eq (acp-test--send view chat "Hello") 'done))
    (should-not (mevedel-usage-records chat))
    (should-not (mevedel-acp--header chat))
    (should (eq (acp-test--send view chat "commands") 'done))
    (should (equal (mevedel-usage-turn chat)
                   '(:input 12 :output 7 :cache-read 3 :cache-write nil :reasoning nil)))
    (should (equal (mevedel-acp--header chat) "turn 15 in / 7 out"))
    (should (eq (acp-test--send view chat "commands") 'done))
    (let ((records (mevedel-usage-records chat)))
      (should (= (length records) 2))
      (should (equal (plist-get (car records) :provider) "fake"))
      (should (equal (plist-get (car records) :model) "fast-model"))
      (should (equal (plist-get (car records) :turn)
                     (plist-get (car (mevedel-chat-turns chat)) :id))))
    (should (equal (mevedel-usage-session chat)
                   '(:input 24 :output 14 :cache-read 6 :cache-write nil :reasoning nil)))
    (should (equal (plist-get (mevedel-usage-agent chat "/root") :output) 14))
    (should-not (plist-get (mevedel-usage-agent chat "/root/other") :output))
    (should (= (mevedel-usage-input (mevedel-usage-session chat)) 30))))

(ert-deftest acp-test-usage-records-come-back-on-resume ()
  "Usage records are saved with the session; a resumed one keeps summing them."
  (acp-test--with-agent view chat
    (should (eq (acp-test--send view chat "commands") 'done))
    (acp-test--reopened view2 chat2 view chat
      (let ((records (mevedel-usage-records chat2)))
        (should (= (length records) 1))
        (should (equal (plist-get (car records) :provider) "fake")))
      (should (equal (mevedel-usage-session chat2)
                     '(:input 12 :output 7 :cache-read 3 :cache-write nil :reasoning nil)))
      (should (eq (acp-test--send view2 chat2 "commands") 'done))
      (should (= (length (mevedel-usage-records chat2)) 2))
      (should (equal (mevedel-usage-session chat2)
                     '(:input 24 :output 14 :cache-read 6 :cache-write nil :reasoning nil)))
      (should (equal (mevedel-usage-turn chat2)
                     '(:input 12 :output 7 :cache-read 3 :cache-write nil :reasoning nil))))))

(ert-deftest acp-test-pre-tool-use-hooks-refuse-the-agents-calls ()
  "A blocking PreToolUse hook answers the agent's permission request with reject."
  (acp-test--with-agent view chat
    (setf (mevedel-chat-permission-mode chat) 'full-auto)
    (let* ((seen nil)
           (mevedel-hooks `((PreToolUse (:matcher "Write"
                                         :function ,(lambda (input)
                                                      (push input seen)
                                                      '(:decision "block" :reason "no writes"))))
                            (PostToolUse (:function ,(lambda (input) (push input seen) nil))))))
      (should (eq (acp-test--send view chat "ask") 'done))
      (should (string-match-p "permission: reject" (acp-test--answer chat)))
      (should (equal (plist-get (car (acp-test--calls chat)) :result)
                     "Permission denied: a PreToolUse hook blocked this Write call: no writes"))
      ;; Once per call (announced, then asked), with the agent's input; no
      ;; PostToolUse for a refused call.
      (should (= (length seen) 1))
      (should (equal (plist-get (car seen) :hook_event_name) "PreToolUse"))
      (should (equal (plist-get (car seen) :tool_name) "Write"))
      (should (equal (plist-get (plist-get (car seen) :tool_input) :file_path) "x.txt")))))

(ert-deftest acp-test-hooks-see-calls-the-agent-runs-unasked ()
  "A call the agent runs without asking: a block is noted, PostToolUse sees its result."
  (acp-test--with-agent view chat
    (let* ((post nil)
           (mevedel-hooks `((PreToolUse (:matcher "Bash"
                                         :function ,(lambda (_)
                                                      '(:decision "block" :reason "no shell"))))
                            (PostToolUse (:function ,(lambda (input) (push input post)
                                                       '(:decision "block"
                                                         :reason "look again")))))))
      (should (eq (acp-test--send view chat "run-tool") 'done))
      (let ((result (plist-get (car (acp-test--calls chat)) :result)))
        (should (string-prefix-p "file-a" result))
        (should (string-match-p "A PreToolUse hook blocked this call: no shell.*could not stop it"
                                result)))
      (should (= (length post) 1))
      (should (equal (plist-get (car post) :tool_response) "file-a"))
      (should (equal (plist-get (car post) :tool_use_id) "call-b"))
      (should (cl-find-if (lambda (s) (and (eq (plist-get s :type) 'notice)
                                           (string-match-p "PostToolUse hook on Bash: look again"
                                                           (plist-get s :text))))
                          (acp-test--segments chat))))))

(ert-deftest acp-test-hooks-skip-mevedels-own-tools ()
  "mevedel's tools served over MCP run their hooks in the pipeline, not again here."
  (acp-test--with-agent view chat
    (should (eq (acp-test--send view chat "Hello") 'done))
    (let* ((agent (gethash chat mevedel-acp--by-chat))
           (ran nil)
           (mevedel-hooks `((PreToolUse (:function ,(lambda (_) (setq ran t) nil))))))
      (setf (mevedel-acp--agent-turn agent) (list :id "t"))
      (unwind-protect
          (mevedel-acp--announced agent (list :id "c" :name "mcp__mevedel__Read") nil)
        (setf (mevedel-acp--agent-turn agent) nil))
      (should-not ran)
      (mevedel-acp--announced agent (list :id "d" :name "Read") "{}")
      (should ran))))

(ert-deftest acp-test-served-tool-calls-run-through-the-pipeline ()
  "An `mcp-serve-call' runs mevedel's tool and answers by id; unknown names fail."
  (acp-test--with-agent view chat
    (should (eq (acp-test--send view chat "Hello") 'done))
    (let* ((agent (gethash chat mevedel-acp--by-chat))
           (root (mevedel-chat-root chat))
           (file (expand-file-name "a.txt" root))
           (answers nil)
           (servers (progn (setf (mevedel-acp--agent-mcp-http agent) t)
                           (mevedel-acp--serve agent))))
      ;; What session/new gets: mevedel's server, its secret as a bearer token.
      (should (equal (plist-get (car servers) :name) "mevedel"))
      (should (string-prefix-p "http://127.0.0.1:" (plist-get (car servers) :url)))
      (should (string-match-p "\\`Bearer [0-9a-f]\\{64\\}\\'"
                              (cdr (assoc "Authorization" (plist-get (car servers) :headers)))))
      ;; Claude Code's permission request for mevedel's tool: the pipeline asks.
      (setf (mevedel-chat-permission-mode chat) 'ask)
      (should (eq (mevedel-acp--verdict agent "mcp__mevedel__ApplyPatch" "edit") 'allow))
      (should (eq (mevedel-acp--verdict agent "Write" "edit") 'ask))
      (setf (mevedel-chat-permission-mode chat) 'full-auto)
      (with-temp-file file (insert "on disk\n"))
      (let ((buffer (find-file-noselect file)))
        (unwind-protect
            (cl-letf (((symbol-function 'mevedel-core-mcp-serve-answer)
                       (lambda (id answer) (push (cons id answer) answers) t)))
              (with-current-buffer buffer (erase-buffer) (insert "unsaved edit\n"))
              (mevedel-acp--served-call
               (list :key (mevedel-acp--agent-key agent) :id 7 :name "Read"
                     :arguments (json-encode `((file_path . ,file))) :tool-use-id "toolu_1"))
              (mevedel-acp--served-call
               (list :key (mevedel-acp--agent-key agent) :id 8 :name "Write"
                     :arguments "{}"))
              (let ((deadline (+ (float-time) 10)))
                (while (and (< (length answers) 2) (< (float-time) deadline))
                  (accept-process-output nil 0.02))))
          (with-current-buffer buffer (set-buffer-modified-p nil))
          (kill-buffer buffer)))
      (let ((read (cdr (assq 7 answers)))
            (unknown (cdr (assq 8 answers))))
        (should (string-match-p "unsaved edit" (plist-get read :text)))
        (should-not (plist-get read :error))
        (should (plist-get unknown :error))
        (should (string-match-p "cannot run Write" (plist-get unknown :text))))
      (mevedel-acp--stop-serving agent)
      (should-not (mevedel-acp--agent-server agent)))))

(ert-deftest acp-test-abort-cancels-the-turn ()
  "Aborting sends session/cancel; the agent ends the turn cancelled."
  (acp-test--with-agent view chat
    (let ((aborted nil))
      (should (eq (acp-test--send
                   view chat "hang"
                   (lambda ()
                     (when (and (not aborted)
                                (string-match-p "waiting" (or (acp-test--answer chat) "")))
                       (setq aborted t)
                       (with-current-buffer view (mevedel-view-abort)))))
                  'abort))
      (should aborted))
    (should (eq (mevedel-chat-status chat) 'abort))
    ;; What the agent kept of the cancelled turn is unknown: the next
    ;; turn says so instead of building on it.
    (should (equal (cdr (assoc "acp-history" (acp-test--saved chat)))
                   "uncertain: its turn was interrupted"))
    (should (eq (acp-test--send view chat "again") 'error))
    (should (string-match-p "could not be resumed (its turn was interrupted).*recover-history"
                            (mevedel-chat-status-detail chat)))))

(ert-deftest acp-test-agent-failure-is-shown-word-for-word ()
  "An agent that dies ends the turn with its exit and last stderr lines."
  (acp-test--with-agent view chat
    (should (eq (acp-test--send view chat "crash") 'error))
    (let ((detail (mevedel-chat-status-detail chat)))
      (should (string-match-p "fake: exited with status 3 before answering session/prompt" detail))
      (should (string-match-p "fatal: the model backend went away" detail))
      (should (string-match-p "Request failed: fake: exited with status 3"
                              (with-current-buffer view (buffer-string)))))
    ;; The native history is uncertain: the next turn says so, and
    ;; after recovery a new agent answers.
    (should (string-prefix-p "uncertain: its turn failed: fake: exited with status 3"
                             (cdr (assoc "acp-history" (acp-test--saved chat)))))
    (should (eq (acp-test--send view chat "back") 'error))
    (should (string-match-p "recover-history" (mevedel-chat-status-detail chat)))
    (with-current-buffer view
      (call-interactively #'mevedel-claude-code-recover-history))
    (should (eq (acp-test--send view chat "back") 'done))
    (should (equal (acp-test--answer chat) "back"))))

(ert-deftest acp-test-missing-agent-names-its-package ()
  "A provider whose program is missing is refused before the turn starts."
  (let ((mevedel-acp-agents '((ghost :command "mevedel-no-such-agent"
                                     :package "@example/ghost-acp")))
        (mevedel-provider 'ghost))
    (mevedel-test-with-view view chat
      (let ((err (should-error (mevedel-chat-send chat "hi") :type 'user-error)))
        (should (string-match-p "mevedel-no-such-agent.*npm install -g @example/ghost-acp"
                                (cadr err))))
      (should-not (mevedel-chat-turn chat)))))

;;;; Resuming, recovering, models and children

(ert-deftest acp-test-resume-loads-the-native-session ()
  "A resumed session's next turn reaches the same native session (session/load).
The chat keeps its agent though `mevedel-provider' changed; the replayed
history does not enter the transcript twice."
  (acp-test--with-agent view chat
    (should (eq (acp-test--send view chat "first question") 'done))
    (let ((info (acp-test--saved chat)))
      (should (equal (cdr (assoc "acp-agent-info" info)) "fake-agent 0.1"))
      (should (equal (cdr (assoc "acp-model" info)) "fast-model"))
      (should (equal (cdr (assoc "provider" info)) "fake")))
    (let ((mevedel-provider 'gptel))
      (acp-test--reopened view2 chat2 view chat
        (should (eq (mevedel-acp-chat-provider chat2) 'fake))
        (should (string-match-p "fake / fast-model"
                                (with-current-buffer view2 (mevedel-view--header-line))))
        (should (eq (acp-test--send view2 chat2 "history") 'done))
        (should (equal (acp-test--answer chat2) "first question [fast-model]"))
        (should (equal (mevedel-acp--agent-session-id (gethash chat2 mevedel-acp--by-chat))
                       "sess-1"))
        (should-not (string-match-p "earlier answer"
                                    (with-current-buffer (mevedel-chat-data-buffer chat2)
                                      (buffer-string))))))))

(ert-deftest acp-test-lost-history-is-uncertain-until-recovered ()
  "Without session/load the history is uncertain; recovery seeds a new session."
  (let ((acp-test--args '("--no-load")))
    (acp-test--with-agent view chat
      (should (eq (acp-test--send view chat "first question") 'done))
      (acp-test--reopened view2 chat2 view chat
        (should (eq (acp-test--send view2 chat2 "history") 'error))
        (let ((detail (mevedel-chat-status-detail chat2)))
          (should (string-match-p "could not be resumed (fake cannot resume" detail))
          (should (string-match-p "mevedel-claude-code-recover-history" detail)))
        (should (string-prefix-p "uncertain: " (cdr (assoc "acp-history" (acp-test--saved chat2)))))
        ;; It stays uncertain until the user recovers.
        (should (eq (acp-test--send view2 chat2 "history") 'error))
        ;; Recovery waits for an active Goal to be paused.
        (let ((session (mevedel-chat-session chat2)))
          (puthash session (mevedel-goal--make :objective "Ship it" :state 'active)
                   mevedel-goal--goals)
          (unwind-protect
              (should (string-match-p
                       "Pause the Goal first"
                       (cadr (should-error (mevedel-claude-code-recover-history chat2)
                                           :type 'user-error))))
            (remhash session mevedel-goal--goals)))
        ;; Refused, it changed nothing.
        (should (string-prefix-p "uncertain: " (cdr (assoc "acp-history" (acp-test--saved chat2)))))
        (with-current-buffer view2
          (call-interactively #'mevedel-claude-code-recover-history))
        (should (equal (cdr (assoc "acp-history" (acp-test--saved chat2))) "recover"))
        (should (string-match-p "Recovering: fake's next turn starts a new conversation"
                                (with-current-buffer view2 (buffer-string))))
        (should (eq (acp-test--send view2 chat2 "history") 'done))
        ;; The new session got mevedel's transcript, labelled, first.
        (let ((answer (acp-test--answer chat2)))
          (should (string-match-p "\\`\\[mevedel: this conversation began before" answer))
          (should (string-match-p "User: first question" answer))
          (should (string-match-p "Assistant: first question" answer)))
        (should (equal (cdr (assoc "acp-session" (acp-test--saved chat2))) "sess-2"))
        (should-not (assoc "acp-history" (acp-test--saved chat2)))))))

(ert-deftest acp-test-continue-with-provider-moves-the-session ()
  "bin/mevedel --continue --provider NAME moves the session to NAME.
Without --provider the continued session keeps the provider saved with it."
  (unless (executable-find "python3")
    (ert-fail "python3 is required by the ACP tests but is not installed"))
  (let* ((state (make-temp-file "mevedel-acp-state-" nil ".json" "{}"))
         (root (file-name-as-directory (make-temp-file "mevedel-batch-" t)))
         (agent `(:command "python3" :args (,acp-test--fake "--state" ,state)
                           :package "fake-agent"))
         (mevedel-acp-agents `((fake ,@agent) (other ,@agent)))
         (mevedel-provider 'gptel)
         (run (lambda (&rest args)
                ;; One headless run, its session closed after it as the
                ;; process exiting closes it: the next run resumes it.
                (let* ((result (mevedel-batch-run-turn
                                (mevedel-batch--parse-args
                                 (append (list "--json" "--dir" root) args))))
                       (json (json-parse-string (plist-get result :output)
                                                :object-type 'plist))
                       (chat (mevedel-chat-get-create root (plist-get json :session))))
                  (mevedel-acp--session-closed (mevedel-chat-session chat))
                  (kill-buffer (mevedel-chat-data-buffer chat))
                  (should (equal (plist-get json :outcome) "done"))
                  (plist-get json :backend)))))
    (unwind-protect
        (progn
          (should (equal (funcall run "-p" "one" "--provider" "fake") "fake"))
          (should (equal (funcall run "-p" "two" "--continue") "fake"))
          (should (equal (funcall run "-p" "three" "--continue" "--provider" "other") "other"))
          (should (equal (funcall run "-p" "four" "--continue") "other")))
      (mevedel-test-delete-workspace root)
      (delete-file state))))

(ert-deftest acp-test-model-switcher-lists-agents-and-their-models ()
  "The switcher and /model offer the agent and its models; a choice is used."
  (acp-test--with-agent view chat
    (let ((mevedel-acp-agents (append mevedel-acp-agents
                                      '((ghost :command "mevedel-no-such-agent")))))
      (should (member "fake" (mapcar #'car (mevedel-view--model-choices chat))))
      (should-not (member "ghost" (mapcar #'car (mevedel-view--model-choices chat))))
      (should (eq (acp-test--send view chat "Hello") 'done))
      (let ((choices (funcall (nth 3 (assoc "model" mevedel-view-slash-commands)) chat)))
        (should (member "fake:fast-model" choices))
        (should (member "fake:smart-model" choices)))
      (with-current-buffer view
        (mevedel-view-set-model "fake:smart-model"))
      (let ((deadline (+ (float-time) 10)))
        (while (and (not (equal (cdr (assoc "acp-model" (acp-test--saved chat))) "smart-model"))
                    (< (float-time) deadline))
          (accept-process-output nil 0.02)))
      (should (string-match-p "fake / smart-model"
                              (with-current-buffer view (mevedel-view--header-line))))
      (should (eq (acp-test--send view chat "history") 'done))
      (should (equal (acp-test--answer chat) "Hello [smart-model]"))
      ;; Back to gptel: the header names gptel's backend again.
      (let ((gptel--known-backends (copy-sequence gptel--known-backends)))
        (gptel-make-openai "acp-test-backend" :key "x" :models '(m1))
        (with-current-buffer view (mevedel-view-set-model "acp-test-backend:m1"))
        (should-not (mevedel-acp-chat-provider chat))
        (should (string-match-p "acp-test-backend / m1"
                                (with-current-buffer view (mevedel-view--header-line))))))))

(ert-deftest acp-test-child-agent-on-an-acp-agent ()
  "Agent :model \"fake\" places a child on the agent; a follow-up resumes its session."
  (acp-test--with-agent view chat
    (let ((mevedel-provider 'gptel)
          (settled nil))
      (let ((path (mevedel-agent-spawn chat '(:task_name "helper" :message "child task"
                                                         :model "fake")
                                       (lambda (path outcome payload)
                                         (push (list path outcome payload) settled)))))
        (should (equal path "/root/helper"))
        (let ((deadline (+ (float-time) 30)))
          (while (and (not settled) (< (float-time) deadline))
            (accept-process-output nil 0.02)))
        (should (equal (car settled) '("/root/helper" completed "child task")))
        ;; Placed on the agent without a model, it reports the one the agent chose.
        (should (equal (plist-get (mevedel-agent-status chat path) :model) "fake"))
        (should (equal (plist-get (mevedel-agent-status chat path) :served) "fake:fast-model"))
        (let* ((buffer (mevedel-agent-conversation chat path))
               (child (mevedel-chat-of-buffer buffer))
               (session (mevedel-acp--agent-session-id (gethash child mevedel-acp--by-chat))))
          (should (equal (mevedel-chat-placement child) '(fake)))
          (should (equal (cdr (assoc "acp-session" (acp-test--saved child))) session))
          ;; The root stays on gptel.
          (should-not (mevedel-acp-chat-provider chat))
          (should (eq (mevedel-agent-send chat path "history") 'started))
          (let ((deadline (+ (float-time) 30)))
            (while (and (not (eq (plist-get (mevedel-agent-status chat path) :status) 'idle))
                        (< (float-time) deadline))
              (accept-process-output nil 0.02)))
          (should (equal (mevedel-agent-result chat path)
                         '(completed . "child task [fast-model]")))
          ;; After a restart the retained child resumes its own session.
          (acp-test--reopened view2 chat2 view chat
            (should (eq (mevedel-agent-send chat2 path "history") 'started))
            (let ((deadline (+ (float-time) 30)))
              (while (and (not (eq (plist-get (mevedel-agent-status chat2 path) :status) 'idle))
                          (< (float-time) deadline))
                (accept-process-output nil 0.02)))
            (should (equal (mevedel-agent-result chat2 path)
                           '(completed . "child task | history [fast-model]")))
            (let ((child (mevedel-chat-of-buffer (mevedel-agent-conversation chat2 path))))
              (should (equal (mevedel-chat-placement child) '(fake)))
              (should (equal (mevedel-acp--agent-session-id (gethash child mevedel-acp--by-chat))
                             session)))))))))

(provide 'acp-test)
;;; acp-test.el ends here
