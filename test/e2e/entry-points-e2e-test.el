;;; entry-points-e2e-test.el --- Every door opens the same session  -*- lexical-binding: t; -*-

;;; Commentary:

;; Starts the product the way a user does, each in a fresh process:
;; an `emacs -Q' with only the package's autoloads (generated from
;; lisp/ as a package manager would) and the gptel settings of an
;; init file, then M-x mevedel, M-x mevedel-new, or M-x
;; mevedel-sessions and RET on a saved session's row, the prompt typed
;; into the composer and sent with C-c C-c; and the real bin/mevedel.
;; The scripted model server logs each first request: its native tool
;; names and its specialist listing must be the same at every door.
;; Nothing of mevedel is loaded into the child beyond what the command
;; loads itself.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun mevedel-entry-test--in-emacs (init root command prompt &optional require)
  "Run COMMAND in a fresh Emacs in ROOT, send PROMPT; return (STATUS . OUTPUT).
INIT is the init file setting the gptel backend.  COMMAND is a symbol:
`mevedel', `mevedel-new' or `mevedel-sessions' (RET on its first row).
The Emacs loads the package's autoloads, or with REQUIRE non-nil only
does (require \='mevedel), as a checkout on `load-path' is used."
  (mevedel-test-run-emacs
   `(progn
      ,(if require '(require 'mevedel) `(load ,(mevedel-e2e-autoloads) nil t))
      (load ,init nil t)
      (let ((default-directory ,(file-name-as-directory root)))
        (call-interactively #',command))
      ,@(when (eq command 'mevedel-sessions)
          ;; The list is the current buffer: RET on the newest session.
          '((goto-char (point-min))
            (call-interactively (key-binding (kbd "RET")))))
      (goto-char (point-max))
      (insert ,prompt)
      (call-interactively (key-binding (kbd "C-c C-c")))
      (let ((chat (mevedel-view-chat))
            (deadline (+ (float-time) 60)))
        (while (and (mevedel-chat-busy-p chat) (< (float-time) deadline))
          (accept-process-output nil 0.05))
        (princ (format "STATUS %s\n" (mevedel-chat-status chat)))
        (kill-emacs (if (mevedel-chat-busy-p chat) 1 0))))))

(defun mevedel-entry-test--strings (value)
  "Return every string inside the parsed JSON VALUE."
  (cond ((stringp value) (list value))
        ((consp value) (append (mevedel-entry-test--strings (car value))
                               (mevedel-entry-test--strings (cdr value))))))

(defun mevedel-entry-test--offer (entry)
  "Return (NATIVE-NAMES . SPECIALIST-NAMES) the logged request ENTRY offered.
Native names are the request's provider tools; specialists are the
lines of the specialist listing the conversation carries."
  (let* ((body (alist-get 'body entry))
         (native (mapcar (lambda (tool) (alist-get 'name (alist-get 'function tool)))
                         (alist-get 'tools body)))
         (listing (cl-find-if (lambda (text)
                                (string-match-p "Specialist tools you can call through ToolCall"
                                                text))
                              (mevedel-entry-test--strings (alist-get 'messages body))))
         (specialists nil))
    (when listing
      (let ((start 0))
        (while (string-match "^- (\\([^ )]+\\)" listing start)
          (push (match-string 1 listing) specialists)
          (setq start (match-end 0)))))
    (cons (sort native #'string<) (sort specialists #'string<))))

(ert-deftest mevedel-entry:every-door-offers-the-same-catalog ()
  "M-x mevedel, mevedel-new, a resume from the sessions list and bin/mevedel
offer the same native tools and the same specialists."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace '(("notes.txt" . "hello\n"))))
         (script (mevedel-e2e-write-script
                  (make-list 5 '((text . "Done.")))))
         (server (mevedel-scripted-model-start script))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server)
                                            'openai t nil))
         (offers nil))
    (unwind-protect
        (progn
          (pcase-dolist (`(,door ,command ,require)
                         '((mevedel mevedel nil) (new mevedel-new nil)
                           (resume mevedel-sessions nil) (new-required mevedel-new t)))
            (let* ((before (length (mevedel-scripted-model-log server)))
                   (run (mevedel-entry-test--in-emacs init root command
                                                      (format "Hello from %s" door) require)))
              (unless (equal (car run) 0)
                (ert-fail (format "%s failed:\n%s" door (cdr run))))
              (should (string-match-p "STATUS idle" (cdr run)))
              (let ((entry (nth before (mevedel-scripted-model-log server))))
                (when (eq door 'resume)
                  ;; RET resumed the newest session: its first turn is there.
                  (should (cl-some (lambda (text) (string-match-p "Hello from new" text))
                                   (mevedel-entry-test--strings
                                    (alist-get 'messages (alist-get 'body entry))))))
                (push (cons door (mevedel-entry-test--offer entry)) offers))))
          (let* ((before (length (mevedel-scripted-model-log server)))
                 (process-environment
                  (cons (concat "EMACS=" (expand-file-name invocation-name invocation-directory))
                        process-environment))
                 (status (call-process (expand-file-name "bin/mevedel" mevedel-test-root)
                                       nil nil nil
                                       "--config" init "--dir" root "-p" "Hello headless")))
            (should (equal status 0))
            (push (cons 'headless (mevedel-entry-test--offer
                                   (nth before (mevedel-scripted-model-log server))))
                  offers))
          (should-not (mevedel-scripted-model-mismatches server))
          (let ((reference (cdr (assq 'mevedel offers))))
            ;; The whole catalog is there: natives and the specialists of every family.
            (dolist (name '("Read" "Glob" "Grep" "Bash" "WriteStdin" "Monitor" "ApplyPatch"
                            "ToolSearch" "ToolCall" "Agent" "SendMessage" "WaitAgent"
                            "InterruptAgent"))
              (should (member name (car reference))))
            (dolist (name '("Eval" "EmacsDescribe" "Imenu" "Xref" "WebFetch" "WebSearch"
                            "Ask" "ProposePlan" "Skill" "TaskWrite" "StopExecution"
                            "UpdateGoal" "ListAgents"))
              (should (member name (cdr reference))))
            (dolist (offer offers)
              (should (equal (cons (car offer) (cdr offer)) (cons (car offer) reference))))))
      (mevedel-scripted-model-stop server)
      (dolist (file (list init script)) (delete-file file))
      (delete-directory root t))))

(ert-deftest mevedel-entry:goal-from-the-composer ()
  "In a fresh Emacs with the autoloads, M-x mevedel then /goal in the composer sets a Goal.
Its first turn carries the objective and the Goal's facts; with one
turn allowed, the Goal pauses and the session is idle after it."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace '(("notes.txt" . "hello\n"))))
         (script (mevedel-e2e-write-script (make-list 3 '((text . "Done.")))))
         (server (mevedel-scripted-model-start script))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server)
                                            'openai t nil)))
    (unwind-protect
        (let ((run (mevedel-entry-test--in-emacs init root 'mevedel
                                                 "/goal --turns 1 Say hello to the notes")))
          (unless (equal (car run) 0)
            (ert-fail (format "/goal failed:\n%s" (cdr run))))
          (should (string-match-p "STATUS idle" (cdr run)))
          (should (= (length (mevedel-scripted-model-log server)) 1))
          (let ((texts (mevedel-entry-test--strings
                        (alist-get 'messages (alist-get 'body (car (mevedel-scripted-model-log
                                                                    server)))))))
            (should (cl-some (lambda (text) (string-match-p "Say hello to the notes" text)) texts))
            (should (cl-some (lambda (text) (string-match-p "component=\"goal\"" text)) texts))))
      (mevedel-scripted-model-stop server)
      (dolist (file (list init script)) (delete-file file))
      (delete-directory root t))))

(ert-deftest mevedel-entry:headless-full-auto-patches-a-file ()
  "bin/mevedel in full-auto mode edits a file with ApplyPatch."
  (let* ((run (mevedel-e2e-headless
               :files '(("a.txt" . "old line\n"))
               :steps `(((tool_calls
                          . [((name . "ApplyPatch")
                              (arguments
                               . ((patch . "*** Begin Patch\n*** Update File: a.txt\n@@\n-old line\n+new line\n*** End Patch\n"))))]))
                        ((expect . ((results . [((contains . "a.txt"))])))
                         (text . "Fixed.")))
               :args '("-p" "fix a.txt" "--permission-mode" "full-auto" "--json")
               :read '("a.txt")))
         (json (mevedel-e2e-json run))
         (call (car (alist-get 'tool_calls json))))
    (should (equal (plist-get run :status) 0))
    (should (equal (alist-get 'outcome json) "done"))
    (should (equal (alist-get 'name call) "ApplyPatch"))
    (should (equal (alist-get 'status call) "success"))
    (should (equal (plist-get run :files) '(("a.txt" . "new line\n"))))))

(ert-deftest mevedel-entry:headless-plan-proposes-and-refuses-writes ()
  "bin/mevedel in Plan mode refuses an ordinary write and prints the proposed plan."
  (let* ((run (mevedel-e2e-headless
               :files '(("a.txt" . "old line\n"))
               :steps `(((tool_calls
                          . [((name . "ApplyPatch")
                              (arguments
                               . ((patch . "*** Begin Patch\n*** Add File: b.txt\n+new\n*** End Patch\n"))))]))
                        ((expect . ((results . [((contains . "Plan mode"))])))
                         (tool_calls
                          . [((name . "ToolCall")
                              (arguments
                               . ((program . "(ProposePlan :plan \"1. Rename the file.\")"))))]))
                        ((expect . ((results . [((contains . "The plan is proposed"))])))
                         (text . "Proposed.")))
               :args '("-p" "plan a change" "--permission-mode" "plan" "--json")
               :read '("b.txt")))
         (json (mevedel-e2e-json run)))
    (should (equal (plist-get run :status) 0))
    (should-not (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e)))
                           (plist-get run :log)))
    (should (equal (alist-get 'outcome json) "done"))
    (should (equal (mapcar (lambda (call) (alist-get 'status call)) (alist-get 'tool_calls json))
                   '("denied" "success")))
    (should (equal (alist-get 'plan json) "1. Rename the file."))
    (should (equal (plist-get run :files) '(("b.txt"))))))

(provide 'entry-points-e2e-test)
;;; entry-points-e2e-test.el ends here
