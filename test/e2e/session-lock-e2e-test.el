;;; session-lock-e2e-test.el --- One writer per session, across real processes  -*- lexical-binding: t; -*-

;;; Commentary:

;; Two processes on one session: this Emacs holding a session while
;; bin/mevedel (the offline demo model) tries to continue it, and a
;; child Emacs holding one while this Emacs opens it the way the user
;; does.  Nobody writes a session another process holds; --fork and the
;; fork offered in Emacs continue in a copy; each side keeps every turn
;; it saved.  A lock whose process is gone is taken over.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)
(require 'mevedel-session-list)
(require 'mevedel-demo)

(defun mevedel-session-lock-test--headless (root &rest args)
  "Run bin/mevedel --demo in ROOT with ARGS; return (STATUS STDOUT STDERR)."
  (apply #'mevedel-e2e-bin "--demo" "--dir" root args))

(defun mevedel-session-lock-test--json (run)
  "Return the JSON transcript RUN, (STATUS STDOUT STDERR), printed."
  (condition-case err
      (json-parse-string (nth 1 run) :object-type 'alist :array-type 'list :null-object nil)
    (error (ert-fail (format "Not JSON (%S): %s\nstderr: %s" err (nth 1 run) (nth 2 run))))))

(defun mevedel-session-lock-test--open (root)
  "Open ROOT's latest session as a demo start does; return its view, or nil.
The sessions here talked to the demo model (`--demo'): M-x mevedel
starts a new session instead of resuming one, only a demo start does."
  (mevedel-session-list-open root 'demo))

(defun mevedel-session-lock-test--first-session (root)
  "Save a session of one turn (\"first question\") in ROOT headless; return its ID."
  (let ((run (mevedel-session-lock-test--headless root "-p" "first question" "--json")))
    (should (eql (car run) 0))
    (alist-get 'session (mevedel-session-lock-test--json run))))

(defun mevedel-session-lock-test--saved (root id)
  "Return (TURNS . TEXT) of saved session ID of ROOT: its turn count and transcript."
  (let ((store (mevedel-core-store-open
                (expand-file-name "session.sqlite"
                                  (expand-file-name id (mevedel-session-sessions-directory root))))))
    (unwind-protect
        (with-temp-buffer
          (mevedel-transcript-restore (current-buffer) store)
          (cons (string-to-number (cdr (assoc "turns" (mevedel-core-store-info-get store))))
                (buffer-string)))
      (mevedel-core-store-close store))))

(defun mevedel-session-lock-test--lock (root id)
  "Return the target of the lock of saved session ID of ROOT, or nil."
  (file-symlink-p (expand-file-name "lock" (expand-file-name
                                            id (mevedel-session-sessions-directory root)))))

(defun mevedel-session-lock-test--turn (chat prompt)
  "Send PROMPT in CHAT to the demo model and wait; return the outcome."
  (let ((outcome nil))
    (mevedel-demo-attach chat 'headless)
    (mevedel-chat-send chat prompt :on-done (lambda (_chat result) (setq outcome result)))
    (let ((deadline (+ (float-time) 30)))
      (while (and (not outcome) (< (float-time) deadline))
        (accept-process-output nil 0.05)))
    outcome))

(defun mevedel-session-lock-test--close (root)
  "Kill the views and data buffer of ROOT's live chat."
  (when-let* ((chat (mevedel-chat-get root)))
    (dolist (buffer (buffer-list))
      (when (eq (buffer-local-value 'mevedel-view--chat buffer) chat)
        (kill-buffer buffer)))
    (kill-buffer (mevedel-chat-data-buffer chat))))

(defmacro mevedel-session-lock-test--with-workspace (root &rest body)
  "Run BODY with ROOT bound to a workspace with a README, removed afterwards."
  (declare (indent 1))
  `(progn
     (mevedel-e2e-require-python)
     (let ((,root (mevedel-e2e-workspace '(("README.md" . "compute_total returns 42\n"))))
           (mevedel-permissions-mode 'full-auto))
       (unwind-protect (progn ,@body)
         (mevedel-session-lock-test--close ,root)
         (mevedel-demo-stop)
         (delete-directory ,root t)))))

;;;; This Emacs holds, bin/mevedel tries

(ert-deftest mevedel-session-lock:headless-refuses-a-session-emacs-holds ()
  "bin/mevedel --continue or --resume of a session this Emacs has open exits 2.
It says who holds the session and writes nothing.  With --fork it
continues in a fork, whose ID the JSON names; this Emacs then sends a
turn in the original, and both keep every turn.  Once this Emacs closes
the session, a headless run continues it."
  (mevedel-session-lock-test--with-workspace root
    (let* ((id (mevedel-session-lock-test--first-session root))
           (chat (mevedel-chat-get-create root id))
           (message (format "mevedel: session %s is in use by process %d" id (emacs-pid))))
      (should (equal (mevedel-session-lock-test--lock root id) (mevedel-session--my-token)))
      (dolist (args `(("--continue") ("--resume" ,id) ("--continue" "--json")))
        (pcase-let ((`(,status ,stdout ,stderr)
                     (apply #'mevedel-session-lock-test--headless root
                            (append args '("-p" "second question")))))
          (should (eql status 2))
          (should (equal stdout ""))
          (should (string-match-p (concat "^" (regexp-quote message)) stderr))))
      (should (equal (car (mevedel-session-lock-test--saved root id)) 1))
      ;; --fork continues in a copy.
      (let* ((run (mevedel-session-lock-test--headless
                   root "--continue" "--fork" "-p" "forked question" "--json"))
             (json (mevedel-session-lock-test--json run))
             (fork (alist-get 'session json)))
        (should (eql (car run) 0))
        (should (equal (alist-get 'outcome json) "done"))
        (should (stringp fork))
        (should-not (equal fork id))
        (should (equal (alist-get 'content (car (alist-get 'messages json))) "forked question"))
        ;; The fork's process is gone: its lock went with it.
        (should-not (mevedel-session-lock-test--lock root fork))
        ;; This Emacs goes on in the original.
        (should (eq (mevedel-session-lock-test--turn chat "emacs question") 'done))
        (should-not (mevedel-save-flush chat 5))
        (pcase-let ((`(,turns . ,text) (mevedel-session-lock-test--saved root id)))
          (should (= turns 2))
          (should (string-match-p "first question" text))
          (should (string-match-p "emacs question" text))
          (should-not (string-match-p "forked question" text)))
        (pcase-let ((`(,turns . ,text) (mevedel-session-lock-test--saved root fork)))
          (should (= turns 2))
          (should (string-match-p "first question" text))
          (should (string-match-p "forked question" text))
          (should-not (string-match-p "emacs question" text))))
      ;; Closed here, the session is free again.
      (mevedel-session-lock-test--close root)
      (should-not (mevedel-session-lock-test--lock root id))
      (let ((run (mevedel-session-lock-test--headless
                  root "--resume" id "-p" "third question" "--json")))
        (should (eql (car run) 0))
        (should (equal (alist-get 'session (mevedel-session-lock-test--json run)) id)))
      (pcase-let ((`(,turns . ,text) (mevedel-session-lock-test--saved root id)))
        (should (= turns 3))
        (should (string-match-p "emacs question" text))
        (should (string-match-p "third question" text))))))

(ert-deftest mevedel-session-lock:stale-lock-is-taken-over-headless ()
  "A lock naming a process that is gone does not stop bin/mevedel --continue.
The run continues the session and gives the lock up as it exits."
  (mevedel-session-lock-test--with-workspace root
    (let* ((id (mevedel-session-lock-test--first-session root))
           (dead (let ((process (make-process :name "mevedel-dead" :command '("true")
                                              :noquery t)))
                   (while (process-live-p process) (accept-process-output process 0.02))
                   (process-id process)))
           (lock (expand-file-name "lock" (expand-file-name
                                           id (mevedel-session-sessions-directory root)))))
      (make-symbolic-link (format "%d@%s:1000" dead (system-name)) lock)
      (should-not (mevedel-session-owner root id))
      (let ((run (mevedel-session-lock-test--headless
                  root "--continue" "-p" "after a crash" "--json")))
        (should (eql (car run) 0))
        (should (equal (alist-get 'session (mevedel-session-lock-test--json run)) id)))
      (should-not (file-symlink-p lock))
      (pcase-let ((`(,turns . ,text) (mevedel-session-lock-test--saved root id)))
        (should (= turns 2))
        (should (string-match-p "after a crash" text))))))

(ert-deftest mevedel-session-lock:fork-needs-a-session-to-fork ()
  "--fork without --continue or --resume is a usage error; --help documents it."
  (mevedel-session-lock-test--with-workspace root
    (pcase-let ((`(,status ,_ ,stderr)
                 (mevedel-session-lock-test--headless root "--fork" "-p" "x")))
      (should (eql status 2))
      (should (string-match-p "^mevedel: --fork needs --continue or --resume ID$" stderr)))
    (pcase-let ((`(,status ,stdout ,_) (mevedel-session-lock-test--headless root "--help")))
      (should (eql status 0))
      (should (string-match-p "^  --fork  " stdout)))))

;;;; Exits of a headless run

(ert-deftest mevedel-session-lock:headless-exits-give-the-lock-up ()
  "A headless run holds its session's lock and gives it up however it ends.
Timed out (status 1) or interrupted (Ctrl-C, status 130), it leaves
no lock behind, so the next run continues the session."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace '(("notes.txt" . "x\n"))))
         (script (mevedel-e2e-write-script '(((sleep . 8) (text . "Too late."))
                                             ((sleep . 8) (text . "Too late again."))
                                             ((text . "In time.")))))
         (server (mevedel-scripted-model-start script))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) 'openai t nil))
         (process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                       invocation-directory))
                                    process-environment))
         (output (generate-new-buffer " *mevedel-interrupted*"))
         (process nil))
    (unwind-protect
        (let ((status (call-process (expand-file-name "bin/mevedel" mevedel-test-root) nil nil nil
                                    "--config" init "--dir" root "-p" "first" "--timeout" "2"))
              (id (mevedel-session-latest root)))
          (should (eql status 1))
          (should id)
          (should-not (mevedel-session-lock-test--lock root id))
          (setq process (make-process
                         :name "mevedel-interrupted" :buffer output :noquery t :sentinel #'ignore
                         :command (list (expand-file-name "bin/mevedel" mevedel-test-root)
                                        "--config" init "--dir" root "--continue" "-p" "second")))
          (let ((deadline (+ (float-time) 30)))
            (while (and (< (length (mevedel-scripted-model-log server)) 2)
                        (< (float-time) deadline))
              (accept-process-output nil 0.05)))
          (let ((owner (mevedel-session-owner root id)))
            (should owner)
            (should (eql (alist-get 'ppid (process-attributes (plist-get owner :pid)))
                         (process-id process))))
          (interrupt-process process)
          (let ((deadline (+ (float-time) 20)))
            (while (and (process-live-p process) (< (float-time) deadline))
              (accept-process-output process 0.05)))
          (should (eql (process-exit-status process) 130))
          (should-not (mevedel-session-lock-test--lock root id))
          (should (eql (call-process (expand-file-name "bin/mevedel" mevedel-test-root) nil nil nil
                                     "--config" init "--dir" root "--continue" "-p" "third")
                       0))
          (should (string-match-p "first\\(.\\|\n\\)*second\\(.\\|\n\\)*third\\(.\\|\n\\)*In time"
                                  (cdr (mevedel-session-lock-test--saved root id)))))
      (when (and process (process-live-p process)) (delete-process process))
      (kill-buffer output)
      (mevedel-scripted-model-stop server)
      (dolist (file (list script init)) (delete-file file))
      (delete-directory root t))))

;;;; Forking a session in the middle of a turn

(ert-deftest mevedel-session-lock:fork-of-a-running-turn ()
  "A fork taken while a headless run is in the middle of its turn keeps both.
The fork resumes that turn as cut (a notice says so) and takes a turn
of its own; the headless run finishes its turn in the original.
Neither holds the other's turn."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace '(("notes.txt" . "the answer is 42\n"))))
         (script (mevedel-e2e-write-script
                  '(((text . "Reading.")
                     (tool_calls . [((name . "Read")
                                     (arguments . ((file_path . "{{root}}notes.txt"))))]))
                    ((expect . ((results . [((contains . "the answer is 42"))])))
                     (sleep . 6) (text . "Slow answer."))
                    ((expect . ((user_contains . "fork question")))
                     (text . "Fork answer.")))))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) 'openai t nil))
         (output (generate-new-buffer " *mevedel-slow*"))
         (process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                       invocation-directory))
                                    process-environment))
         (headless (make-process
                    :name "mevedel-slow" :buffer output :noquery t :sentinel #'ignore
                    :command (list (expand-file-name "bin/mevedel" mevedel-test-root)
                                   "--config" init "--dir" root "-p" "slow question")
                    :connection-type 'pipe))
         (mevedel-permissions-mode 'full-auto)
         (prompts nil))
    (unwind-protect
        (progn
          ;; The run waits for its second answer: its turn is open.
          (let ((deadline (+ (float-time) 30)))
            (while (and (< (length (mevedel-scripted-model-log server)) 2)
                        (< (float-time) deadline))
              (accept-process-output nil 0.05)))
          (should (= (length (mevedel-scripted-model-log server)) 2))
          (should (process-live-p headless))
          (let* ((id (mevedel-session-latest root))
                 (view (mevedel-session-lock-test--answering ?f prompts (mevedel root)))
                 (chat (mevedel-view-chat view))
                 (fork (mevedel-session-id (mevedel-chat-session chat))))
            (should (= (length prompts) 1))
            ;; The owner is the wrapper's Emacs.
            (should (string-match "in use by process \\([0-9]+\\)" (car prompts)))
            (should (eql (alist-get 'ppid (process-attributes
                                           (string-to-number (match-string 1 (car prompts)))))
                         (process-id headless)))
            (should-not (equal fork id))
            (should (string-match-p "Interrupted"
                                    (with-current-buffer (mevedel-chat-data-buffer chat)
                                      (buffer-string))))
            (setf (mevedel-chat-backend chat)
                  (mevedel-scripted-model-backend server :wire 'openai :stream t)
                  (mevedel-chat-model chat) 'scripted-model)
            (let ((outcome nil))
              (mevedel-chat-send chat "fork question"
                                 :on-done (lambda (_chat result) (setq outcome result)))
              (let ((deadline (+ (float-time) 30)))
                (while (and (not outcome) (< (float-time) deadline))
                  (accept-process-output nil 0.05)))
              (should (eq outcome 'done)))
            (should-not (mevedel-save-flush chat 5))
            (let ((deadline (+ (float-time) 30)))
              (while (and (process-live-p headless) (< (float-time) deadline))
                (accept-process-output headless 0.05)))
            (should (eql (process-exit-status headless) 0))
            (should (string-match-p "Slow answer" (with-current-buffer output (buffer-string))))
            (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry)))
                                   (mevedel-scripted-model-log server)))
            (pcase-let ((`(,turns . ,text) (mevedel-session-lock-test--saved root id)))
              (should (= turns 1))
              (should (string-match-p "Reading\\.\\(.\\|\n\\)*Slow answer" text))
              (should-not (string-match-p "fork question\\|Fork answer" text)))
            (pcase-let ((`(,turns . ,text) (mevedel-session-lock-test--saved root fork)))
              (should (= turns 2))
              (should (string-match-p "slow question\\(.\\|\n\\)*Reading\\." text))
              (should (string-match-p "fork question\\(.\\|\n\\)*Fork answer" text))
              (should-not (string-match-p "Slow answer" text)))))
      (when (process-live-p headless) (delete-process headless))
      (kill-buffer output)
      (mevedel-session-lock-test--close root)
      (mevedel-scripted-model-stop server)
      (dolist (file (list script init)) (delete-file file))
      (delete-directory root t))))

;;;; Processes racing for one lock

(ert-deftest mevedel-session-lock:racing-processes-one-wins ()
  "Of four Emacsen taking a stale lock at the same moment, exactly one wins.
The others are told the winner's PID: none deleted the lock the
winner had just made in the stale one's place."
  (let* ((root (mevedel-e2e-workspace nil))
         (directory (expand-file-name "race" (mevedel-session-sessions-directory root)))
         (dead (let ((process (make-process :name "mevedel-dead" :command '("true")
                                            :noquery t)))
                 (while (process-live-p process) (accept-process-output process 0.02))
                 (process-id process)))
         (start (+ (float-time) 3))
         (racers nil))
    (make-directory directory t)
    (make-symbolic-link (format "%d@%s" dead (system-name)) (expand-file-name "lock" directory))
    (unwind-protect
        (progn
          (dotimes (_ 4)
            (push (make-process
                   :name "mevedel-racer" :buffer (generate-new-buffer " *mevedel-racer*")
                   :noquery t :sentinel #'ignore
                   :command (list (expand-file-name invocation-name invocation-directory)
                                  "-Q" "--batch"
                                  "-l" (expand-file-name "scripts/load-path.el" mevedel-test-root)
                                  "-l" "mevedel-session"
                                  "--eval"
                                  (format "(let ((session (mevedel-session-create :workspace %S
                                                                                 :id \"race\")))
                                             (while (< (float-time) %f) (sleep-for 0.001))
                                             (condition-case err
                                                 (progn (mevedel-session-lock session)
                                                        (princ (format \"WON %%d\\n\" (emacs-pid))))
                                               (mevedel-session-locked
                                                (princ (format \"LOST %%s\\n\" (cadr err)))))
                                             (sleep-for 2))"
                                          root start)))
                  racers))
          (let ((deadline (+ start 30)))
            (while (and (cl-some #'process-live-p racers) (< (float-time) deadline))
              (accept-process-output nil 0.05)))
          (let* ((outputs (mapcar (lambda (racer) (with-current-buffer (process-buffer racer)
                                                    (string-trim (buffer-string))))
                                  racers))
                 (won (cl-remove-if-not (lambda (o) (string-prefix-p "WON " o)) outputs))
                 (winner (and (= (length won) 1) (substring (car won) 4))))
            (should (= (length won) 1))
            (dolist (output outputs)
              (unless (equal output (car won))
                (should (equal output (format "LOST session race is in use by process %s"
                                              winner)))))))
      (dolist (racer racers)
        (when (process-live-p racer) (delete-process racer))
        (kill-buffer (process-buffer racer)))
      (delete-directory root t))))

;;;; A child Emacs holds, this Emacs opens

(defun mevedel-session-lock-test--holder (root id)
  "Start a child Emacs holding saved session ID of ROOT; return its process.
It has the session open once it printed HOLDING, and keeps it until
interrupted."
  (let* ((output (generate-new-buffer " *mevedel-holder*"))
         (process (make-process
                   :name "mevedel-holder" :buffer output :noquery t
                   :command (list (expand-file-name invocation-name invocation-directory)
                                  "-Q" "--batch"
                                  "-l" (expand-file-name "scripts/load-path.el" mevedel-test-root)
                                  "-l" "mevedel"
                                  "--eval" (format "(progn (mevedel--load)
                                                     (mevedel-chat-get-create %S %S)
                                                     (message \"HOLDING\")
                                                     (while t (sleep-for 1)))"
                                                   root id))))
         (deadline (+ (float-time) 30)))
    (while (and (process-live-p process) (< (float-time) deadline)
                (not (with-current-buffer output
                       (save-excursion (goto-char (point-min)) (search-forward "HOLDING" nil t)))))
      (accept-process-output process 0.05))
    (unless (with-current-buffer output (string-match-p "HOLDING" (buffer-string)))
      (ert-fail (format "The child Emacs did not open the session: %s"
                        (with-current-buffer output (buffer-string)))))
    process))

(defmacro mevedel-session-lock-test--answering (key prompts &rest body)
  "Run BODY with the held-session question answered by KEY.
Each question's prompt is pushed onto the variable PROMPTS."
  (declare (indent 2))
  `(cl-letf (((symbol-function 'read-multiple-choice)
              (lambda (prompt choices &rest _)
                (push prompt ,prompts)
                (assq ,key choices))))
     ,@body))

(ert-deftest mevedel-session-lock:emacs-offers-fork-or-read-only ()
  "Opening a session a child Emacs holds asks, naming the session and the PID.
Cancel opens nothing; read-only shows the transcript and refuses to
send, naming the owner, and writes nothing; a fork becomes the live,
writable session.  The sessions list asks the same and keeps the live
session unless a fork replaces it.  Once the child is interrupted, its
lock is gone and the session resumes."
  (mevedel-session-lock-test--with-workspace root
    (let* ((id (mevedel-session-lock-test--first-session root))
           (holder (mevedel-session-lock-test--holder root id))
           (pid (process-id holder))
           (prompts nil))
      (unwind-protect
          (progn
            (should (eql (plist-get (mevedel-session-owner root id) :pid) pid))
            (let ((err (should-error (mevedel-chat-get-create root id)
                                     :type 'mevedel-session-locked)))
              (should (equal (cadr err) (format "session %s is in use by process %d" id pid))))
            (should-not (mevedel-chat-get root))
            ;; The sessions list says who has it.
            (with-current-buffer (mevedel-sessions root)
              (should (string-match-p (format "first question \\[in use by process %d\\]" pid)
                                      (buffer-string)))
              (kill-buffer))
            ;; Cancel.
            (mevedel-session-lock-test--answering ?c prompts
              (should-not (mevedel-session-lock-test--open root)))
            (should (string-match-p (format "\\`Session %s (first question) is in use by process %d"
                                            (regexp-quote id) pid)
                                    (car prompts)))
            (should-not (mevedel-chat-get root))
            ;; Read-only.
            (let* ((view (mevedel-session-lock-test--answering ?r prompts (mevedel-session-lock-test--open root)))
                   (chat (mevedel-view-chat view)))
              (should (= (length prompts) 2))
              (should (mevedel-chat-read-only chat))
              (should-not (mevedel-chat-get root))
              (should (string-match-p "first question"
                                      (with-current-buffer (mevedel-chat-data-buffer chat)
                                        (buffer-string))))
              (let ((err (should-error (with-current-buffer view
                                         (goto-char (point-max))
                                         (insert "may I?")
                                         (mevedel-view-send))
                                       :type 'user-error)))
                (should (string-match-p (format "session %s is in use by process %d"
                                                (regexp-quote id) pid)
                                        (cadr err))))
              (should (equal (car (mevedel-session-lock-test--saved root id)) 1))
              (should (string-match-p (format "\\`%d@" pid) (mevedel-session-lock-test--lock root id)))
              (let ((data (mevedel-chat-data-buffer chat)))
                (kill-buffer view)
                (should-not (buffer-live-p data))))
            ;; Fork.
            (let* ((view (mevedel-session-lock-test--answering ?f prompts (mevedel-session-lock-test--open root)))
                   (chat (mevedel-view-chat view))
                   (fork (mevedel-session-id (mevedel-chat-session chat))))
              (should (= (length prompts) 3))
              (should-not (equal fork id))
              (should (eq (mevedel-chat-get root) chat))
              (should-not (mevedel-chat-read-only chat))
              (should (eq (mevedel-session-lock-test--turn chat "fork question") 'done))
              (should-not (mevedel-save-flush chat 5))
              (pcase-let ((`(,turns . ,text) (mevedel-session-lock-test--saved root fork)))
                (should (= turns 2))
                (should (string-match-p "first question" text))
                (should (string-match-p "fork question" text)))
              ;; RET in the sessions list asks too; read-only leaves the fork live.
              (let* ((other (mevedel-session-lock-test--answering ?r prompts
                              (mevedel-session-list-switch root id)))
                     (name (buffer-name other)))
                (should (= (length prompts) 4))
                (should (mevedel-chat-read-only (mevedel-view-chat other)))
                (should (eq (mevedel-chat-get root) chat))
                ;; Asked again, a fresh read-only view replaces it.
                (let ((again (mevedel-session-lock-test--answering ?r prompts
                               (mevedel-session-list-switch root id))))
                  (should (= (length prompts) 5))
                  (should-not (buffer-live-p other))
                  (should (equal (buffer-name again) name))
                  (kill-buffer again)))
              ;; Nor can the held session be renamed or deleted here.
              (should-error (mevedel-session-list-rename root id "mine") :type 'user-error)
              (should-error (mevedel-session-list-delete root id) :type 'user-error)
              (should (equal (car (mevedel-session-lock-test--saved root id)) 1)))
            ;; The child exits (Ctrl-C): its lock goes, and the session resumes.
            (interrupt-process holder)
            (let ((deadline (+ (float-time) 20)))
              (while (and (process-live-p holder) (< (float-time) deadline))
                (accept-process-output holder 0.05)))
            (should-not (process-live-p holder))
            (should-not (mevedel-session-lock-test--lock root id))
            (should-not (mevedel-session-owner root id))
            (mevedel-session-lock-test--answering ?c prompts
              (let ((view (mevedel-session-list-switch root id)))
                (should (= (length prompts) 5))
                (should (equal (mevedel-session-id (mevedel-chat-session (mevedel-view-chat view)))
                               id)))))
        (when (process-live-p holder) (delete-process holder))
        (kill-buffer (process-buffer holder))))))

(provide 'session-lock-e2e-test)
;;; session-lock-e2e-test.el ends here
