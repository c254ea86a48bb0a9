;;; acp-e2e-test.el --- bin/mevedel --provider claude-code, for real  -*- lexical-binding: t; -*-

;;; Commentary:

;; The real `claude-agent-acp' (installed by scripts/deps.sh under
;; .deps/acp/, Claude Code's CLI inside it), which nobody here wrote,
;; driven headless through `bin/mevedel --provider claude-code' against
;; the scripted Anthropic server: no network, no account, a temporary
;; HOME.  A text turn; the agent's permission request answered per mode
;; (full-auto allows its Write, ask refuses it with reject_once and the
;; turn goes on); a stalled model ending on --timeout with no process
;; of the agent left; mevedel's own Read, ApplyPatch and Bash called by
;; Claude Code as mcp__mevedel__* (the read sees an unsaved buffer, the
;; patch a checkpoint and the visited buffer, the command the sandbox).
;; Missing node or agent fails, never skips.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defconst acp-e2e--bin
  (expand-file-name ".deps/acp/npm/node_modules/.bin" mevedel-test-root)
  "Where scripts/deps.sh installs claude-agent-acp.")

(defun acp-e2e--require-agent ()
  "Fail (never skip) when node or claude-agent-acp is missing."
  (mevedel-e2e-require-python)
  (unless (executable-find "node")
    (ert-fail "node is required by the ACP end-to-end tests but is not installed"))
  (unless (file-executable-p (expand-file-name "claude-agent-acp" acp-e2e--bin))
    (ert-fail (format "%s/claude-agent-acp is missing; run scripts/deps.sh" acp-e2e--bin))))

(defun acp-e2e--agent-processes (root)
  "Return the pids of live processes whose working directory is ROOT."
  (let ((root (directory-file-name (file-truename root))))
    (cl-loop for dir in (directory-files "/proc" nil "\\`[0-9]+\\'")
             for cwd = (ignore-errors (file-truename (format "/proc/%s/cwd" dir)))
             for stat = (ignore-errors
                          (with-temp-buffer
                            (insert-file-contents (format "/proc/%s/stat" dir))
                            (buffer-string)))
             when (and cwd (equal (directory-file-name cwd) root)
                       stat (not (string-match-p ") Z " stat)))
             collect (string-to-number dir))))

(cl-defun acp-e2e--run (&key script args settings root home)
  "Run bin/mevedel --provider claude-code with ARGS against SCRIPT.
SCRIPT is the scripted server's script as Lisp data ({{root}} is the
workspace); SETTINGS are forms the config file evaluates, or a
function of the workspace returning them.  ROOT and HOME, when given,
are the workspace and home to run in, kept afterwards (a second run
continues there); otherwise fresh ones are made and deleted.
Return a plist: :status
:stdout :stderr :log :root :json (parsed, or nil), :left (pids of
processes still working in the workspace) and :notes (what the config
wrote to $HOME/notes.txt, or nil)."
  (acp-e2e--require-agent)
  (let* ((keep root)
         (root (or root (acp-e2e--workspace)))
         (home (or home (make-temp-file "mevedel-acp-home-" t)))
         (file (make-temp-file "mevedel-acp-script-" nil ".json"))
         (init (make-temp-file "mevedel-acp-init-" nil ".el"))
         (stderr (make-temp-file "mevedel-acp-stderr"))
         (server nil))
    (with-temp-file file (insert (json-encode script)))
    (with-temp-file init
      (prin1 `(progn ,@(if (functionp settings) (funcall settings root) settings))
             (current-buffer)))
    (setq server (mevedel-scripted-model-start file :vars `(("root" . ,root))))
    (unwind-protect
        (with-temp-buffer
          (let* ((process-environment
                  (append
                   (list (concat "EMACS=" (expand-file-name invocation-name invocation-directory))
                         (concat "PATH=" acp-e2e--bin ":" (getenv "PATH"))
                         (concat "HOME=" home)
                         (concat "XDG_CONFIG_HOME=" home "/.config")
                         (format "ANTHROPIC_BASE_URL=http://127.0.0.1:%d"
                                 (mevedel-scripted-model-port server))
                         "ANTHROPIC_API_KEY=dummy"
                         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
                   process-environment))
                 (status (apply #'call-process (expand-file-name "bin/mevedel" mevedel-test-root)
                                nil (list t stderr) nil
                                (append (list "--config" init "--dir" root
                                              "--provider" "claude-code" "--json")
                                        args)))
                 (stdout (buffer-string)))
            (list :status status :stdout stdout :root root
                  :stderr (with-temp-buffer (insert-file-contents stderr) (buffer-string))
                  :log (mevedel-scripted-model-log server)
                  :json (ignore-errors
                          (json-parse-string stdout :object-type 'alist :array-type 'list
                                             :null-object nil :false-object nil))
                  :left (acp-e2e--agent-processes root)
                  :notes (let ((notes (expand-file-name "notes.txt" home)))
                           (and (file-exists-p notes)
                                (with-temp-buffer (insert-file-contents notes) (buffer-string))))
                  :files (directory-files root))))
      (mevedel-scripted-model-stop server)
      (dolist (f (list file init stderr)) (delete-file f))
      (unless keep
        (delete-directory home t)
        (delete-directory root t)))))

(defun acp-e2e--workspace ()
  "Return a new workspace with a.txt and b.txt."
  (mevedel-e2e-workspace '(("a.txt" . "a\n") ("b.txt" . "one\ntwo\n"))))

(defun acp-e2e--explain (run)
  "Return RUN's output, for a failing assertion's message."
  (format "status %s\nstdout: %s\nstderr: %s" (plist-get run :status)
          (plist-get run :stdout) (plist-get run :stderr)))

(ert-deftest acp-e2e-text-turn ()
  "A text turn: Claude Code's answer is the run's answer, the agent gone after."
  (let* ((text "Hello from the scripted model, through Claude Code.")
         (run (acp-e2e--run :script `((repeat . t) (steps . [((text . ,text))]))
                            :args '("-p" "Say hello." "--timeout" "120")))
         (json (plist-get run :json)))
    (should (equal (list (plist-get run :status) (alist-get 'answer json))
                   (list 0 text)))
    (should (equal (alist-get 'backend json) "claude-code"))
    (should (equal (alist-get 'content (car (alist-get 'messages json))) "Say hello."))
    ;; The prompt reached the model through Claude Code, without its
    ;; unconfined file and shell tools.
    (let ((turn (cl-find-if (lambda (entry)
                              (string-match-p "Say hello\\." (json-encode (alist-get 'body entry))))
                            (plist-get run :log))))
      (should turn)
      (let ((tools (mapcar (lambda (tool) (alist-get 'name tool))
                           (alist-get 'tools (alist-get 'body turn)))))
        (should tools)
        (dolist (tool '("Read" "Write" "Edit" "Bash"))
          (should-not (member tool tools)))))
    (should-not (plist-get run :left))))

(defun acp-e2e--write-script ()
  "Return a script making Claude Code call its Write tool, then answer."
  '((repeat . t)
    (conversations
     . [((match . "Write")
         (steps . [((tool_calls . [((name . "Write")
                                    (arguments . ((file_path . "{{root}}/out.txt")
                                                  (content . "written\n"))))]))
                   ((text . "Finished."))]))
        ((steps . [((text . "ok"))])
         (repeat . t))])))

(defun acp-e2e--write-call (run)
  "Return the Write call of RUN's --json transcript."
  (cl-find "Write" (alist-get 'tool_calls (plist-get run :json))
           :key (lambda (call) (alist-get 'name call)) :test #'equal))

(ert-deftest acp-e2e-permission-per-mode ()
  "Claude Code's permission request: full-auto allows the Write, ask refuses it."
  (let* ((settings '((setq mevedel-acp-keep-agent-tools t)))
         (allowed (acp-e2e--run :script (acp-e2e--write-script) :settings settings
                                :args '("-p" "Write the file." "--timeout" "120"
                                        "--permission-mode" "full-auto")))
         (refused (acp-e2e--run :script (acp-e2e--write-script) :settings settings
                                :args '("-p" "Write the file." "--timeout" "120"
                                        "--permission-mode" "ask"))))
    (should (eql (plist-get allowed :status) 0))
    (should (member "out.txt" (plist-get allowed :files)))
    (let ((call (acp-e2e--write-call allowed)))
      (should call)
      (should (equal (alist-get 'status call) "success"))
      (should (string-suffix-p "out.txt" (alist-get 'file_path (alist-get 'args call)))))
    (should-not (member "out.txt" (plist-get refused :files)))
    (let ((call (acp-e2e--write-call refused)))
      (should call)
      (should (equal (alist-get 'status call) "denied")))
    ;; The model was told and the turn went on to its answer.
    (should (equal (alist-get 'answer (plist-get refused :json)) "Finished."))
    (should-not (plist-get allowed :left))
    (should-not (plist-get refused :left))))

(ert-deftest acp-e2e-stalled-model-times-out-leaving-no-agent ()
  "A model that never answers ends on --timeout: exit 1, \"timed out\", nothing left."
  (let ((run (acp-e2e--run :script '((repeat . t) (steps . [((text . "too late") (sleep . 120))]))
                           :args '("-p" "Take your time." "--timeout" "15"))))
    (should (eql (plist-get run :status) 1))
    (should (string-match-p "timed out" (plist-get run :stderr)))
    (should-not (plist-get run :left))))

;;;; mevedel's own tools, served to Claude Code over MCP

(defun acp-e2e--mcp-script (outside)
  "Return a script making Claude Code call mevedel's Read, ApplyPatch and Bash.
The Bash command writes inside the workspace and then to OUTSIDE."
  `((steps
     . [((tool_calls . [((name . "mcp__mevedel__Read")
                         (arguments . ((file_path . "{{root}}/a.txt"))))]))
        ((expect . ((results . [((contains . "unsaved line from Emacs"))])))
         (tool_calls . [((name . "mcp__mevedel__ApplyPatch")
                         (arguments
                          . ((patch . ,(concat "*** Begin Patch\n*** Update File: b.txt\n"
                                               "@@\n one\n-two\n+patched two\n*** End Patch\n")))))]))
        ((expect . ((results . [((contains . "b.txt"))])))
         (tool_calls . [((name . "mcp__mevedel__Bash")
                         (arguments
                          . ((command . ,(format "echo inside > inside.txt; \
if echo escaped > %s; then echo wrote outside; else echo refused outside; fi"
                                                 outside))
                             (description . "Write inside and outside the workspace"))))]))
        ((text . "Finished."))])))

(defun acp-e2e--mcp-settings (root)
  "Return the config forms of the MCP test for the workspace ROOT.
a.txt gets an unsaved change, b.txt is visited, the sandbox is
required, and the checkpoints and b.txt's buffer are noted in
$HOME/notes.txt."
  `((setq mevedel-sandbox-mode 'required)
    (with-current-buffer (find-file-noselect ,(expand-file-name "a.txt" root))
      (goto-char (point-max))
      (insert "unsaved line from Emacs\n"))
    (find-file-noselect ,(expand-file-name "b.txt" root))
    ;; The config file is not lexical: nothing here may close over a variable.
    (advice-add 'mevedel-core-checkpoint-before :after
                (lambda (_store _id _label paths)
                  (write-region (format "checkpoint %S\n" paths) nil
                                (expand-file-name "notes.txt" (getenv "HOME")) t 'quiet)))
    (add-hook 'kill-emacs-hook
              (lambda ()
                (when-let* ((buffer (get-file-buffer ,(expand-file-name "b.txt" root))))
                  (write-region (concat "b.txt buffer: "
                                        (with-current-buffer buffer (buffer-string)))
                                nil (expand-file-name "notes.txt" (getenv "HOME")) t 'quiet))))))

(defun acp-e2e--call (run name)
  "Return the call NAME of RUN's --json transcript."
  (cl-find name (alist-get 'tool_calls (plist-get run :json))
           :key (lambda (call) (alist-get 'name call)) :test #'equal))

(ert-deftest acp-e2e-mevedel-tools-through-mcp ()
  "Claude Code reads, patches and runs a command with mevedel's tools over MCP.
The read sees the unsaved buffer, the patch updates the visited buffer
after a checkpoint, the command is confined to the workspace."
  ;; Not under /tmp: the sandbox gives commands a private one.
  (let* ((outside (make-temp-name "/var/tmp/mevedel-acp-outside-"))
         (run (unwind-protect
                  (acp-e2e--run :script (acp-e2e--mcp-script outside)
                                :settings #'acp-e2e--mcp-settings
                                :args '("-p" "Use mevedel's tools." "--timeout" "180"
                                        "--permission-mode" "full-auto"))
                (when (file-exists-p outside)
                  (delete-file outside)
                  (setq outside t))))
         (log (plist-get run :log))
         (notes (or (plist-get run :notes) "")))
    (should (equal (list (plist-get run :status) (alist-get 'answer (plist-get run :json)))
                   (list 0 "Finished.")))
    ;; The scripted server saw every result it expected: no mismatch.
    (should-not (cl-find-if (lambda (entry) (alist-get 'mismatches entry)) log))
    ;; Claude Code was offered mevedel's tools under their MCP names.
    (let ((offered (mapcar (lambda (tool) (alist-get 'name tool))
                           (alist-get 'tools (alist-get 'body (cl-find-if
                                                               (lambda (entry)
                                                                 (alist-get 'tools (alist-get 'body entry)))
                                                               log))))))
      (dolist (name '("mcp__mevedel__Read" "mcp__mevedel__ApplyPatch" "mcp__mevedel__Bash"
                      "mcp__mevedel__Grep" "mcp__mevedel__Glob" "mcp__mevedel__ToolSearch"
                      "mcp__mevedel__ToolCall"))
        (should (member name offered)))
      (should-not (member "Read" offered)))
    ;; The rows name the calls as Claude Code did, and each succeeded.
    (dolist (name '("mcp__mevedel__Read" "mcp__mevedel__ApplyPatch" "mcp__mevedel__Bash"))
      (let ((call (acp-e2e--call run name)))
        (should call)
        (should (equal (alist-get 'status call) "success"))))
    ;; The patch went through mevedel: a checkpoint of b.txt, the buffer updated.
    (should (string-match-p "checkpoint (\"[^\"]*/b\\.txt\")" notes))
    (should (string-match-p "b\\.txt buffer: one\npatched two\n" notes))
    ;; The command ran, confined: inside the workspace only.
    (should (member "inside.txt" (plist-get run :files)))
    (should (string-match-p "refused outside"
                            (alist-get 'result_preview (acp-e2e--call run "mcp__mevedel__Bash"))))
    (should-not (eq outside t))
    (should-not (plist-get run :left))))

;;;; Resuming: a second --continue turn reaches the same native session

(ert-deftest acp-e2e-continue-resumes-the-native-session ()
  "`--continue' loads Claude Code's own session: the model sees the earlier turn.
The first turn calls mevedel's Grep; --json lists it as Claude Code
called it, with its raw input as args and its status; the session's
backend (agent name and version) is in --json and the metadata."
  (let ((root (acp-e2e--workspace))
        (home (make-temp-file "mevedel-acp-home-" t)))
    (unwind-protect
        (let* ((first (acp-e2e--run
                       :root root :home home
                       :script '((steps . [((tool_calls . [((name . "mcp__mevedel__Grep")
                                                            (arguments . ((pattern . "two"))))]))
                                           ((expect . ((results . [((contains . "b.txt"))])))
                                            (text . "Noted: pineapple."))]))
                       :args '("-p" "Remember the word pineapple." "--timeout" "120"
                               "--permission-mode" "full-auto")))
               (json (plist-get first :json))
               (grep (acp-e2e--call first "mcp__mevedel__Grep"))
               (second (acp-e2e--run
                        :root root :home home
                        :script '((repeat . t) (steps . [((text . "It was pineapple."))]))
                        :args '("--continue" "-p" "Which word?" "--timeout" "120")))
               (turn (cl-find-if (lambda (entry)
                                   (string-match-p "Which word\\?"
                                                   (json-encode (alist-get 'body entry))))
                                 (plist-get second :log))))
          (should (equal (list (plist-get first :status) (alist-get 'answer json))
                         (list 0 "Noted: pineapple.")))
          (should grep)
          (should (equal (alist-get 'pattern (alist-get 'args grep)) "two"))
          (should (equal (alist-get 'status grep) "success"))
          (should (string-prefix-p "@zed-industries/claude-agent-acp " (alist-get 'agent json)))
          (should (equal (list (plist-get second :status) (alist-get 'answer (plist-get second :json)))
                         (list 0 "It was pineapple.")))
          (should (equal (alist-get 'session (plist-get second :json)) (alist-get 'session json)))
          ;; The model got the first turn back from Claude Code's own session.
          (should turn)
          (let ((body (json-encode (alist-get 'body turn))))
            (should (string-match-p "Remember the word pineapple" body))
            (should (string-match-p "Noted: pineapple" body))
            ;; From Claude Code's session, not mevedel's transcript as a seed.
            (should-not (string-match-p "mevedel's transcript" body)))
          (should-not (plist-get first :left))
          (should-not (plist-get second :left)))
      (delete-directory home t)
      (delete-directory root t))))

(provide 'acp-e2e-test)
;;; acp-e2e-test.el ends here
