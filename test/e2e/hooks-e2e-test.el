;;; hooks-e2e-test.el --- User hooks in a real session against the scripted model  -*- lexical-binding: t; -*-

;;; Commentary:

;; A real mevedel session whose workspace has a .mevedel/hooks.el: the
;; user approves it once, its UserPromptSubmit hook's output reaches the
;; model with the prompt, and its PreToolUse guard blocks the model's
;; `rm' with exit status 2, so the model's next request carries the
;; guard's reason and the directory survives.  A Stop hook then sends
;; the finished turn on once, with its reason as the next instruction.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)
(require 'mevedel-hooks)
(require 'mevedel-interaction)

(defconst hooks-e2e--guard
  "input=$(cat)
case \"$input\" in
  *'\"command\":\"rm '*) echo 'rm is blocked by the project guard; use git clean -n first' >&2; exit 2 ;;
esac
"
  "A PreToolUse guard refusing `rm'.")

(defconst hooks-e2e--stop
  "input=$(cat)
case \"$input\" in
  *'\"stop_hook_active\":true'*) exit 0 ;;
esac
echo '{\"decision\": \"block\", \"reason\": \"Say which files remain.\"}'
"
  "A Stop hook asking for one more answer.")

(ert-deftest mevedel-e2e:a-hook-blocks-bash-and-the-model-reads-why ()
  "The guard blocks `rm'; the model's next request holds the reason."
  (let* ((asked nil)
         (mevedel-hooks-can-ask-function (lambda () t))
         (mevedel-hooks-approve-function
          (lambda (file _summary callback) (push file asked) (funcall callback t)))
         (run (mevedel-e2e-run
               :wire 'openai :stream t :timeout 30
               :files `(("build/out.o" . "object")
                        ("guard.sh" . ,hooks-e2e--guard)
                        ("stop.sh" . ,hooks-e2e--stop)
                        (".mevedel/hooks.el"
                         . ,(prin1-to-string
                             '((UserPromptSubmit (:command "echo 'Sprint goal: smaller builds'"))
                               (PreToolUse (:matcher "Bash" :command "sh guard.sh" :timeout 10))
                               (Stop (:command "sh stop.sh"))))))
               :prompt "Remove the build directory"
               :setup (lambda (chat) (setf (mevedel-chat-permission-mode chat) 'full-auto))
               :steps `(((expect . ((user_contains . "Sprint goal: smaller builds")))
                         (tool_calls . [((name . "Bash")
                                         (arguments . ((command . "rm -rf build")
                                                       (description . "remove build"))))]))
                        ((expect . ((results . [((contains . "rm is blocked by the project guard; use git clean -n first"))])))
                         (text . "The guard refused; I left build/ alone."))
                        ((expect . ((user_contains . "Say which files remain.")))
                         (text . "build/out.o remains.")))
               :inspect (lambda (chat _view)
                          (mevedel-test-wait-until (not (mevedel-chat-busy-p chat)) 15)
                          (file-exists-p (expand-file-name "build/out.o" (mevedel-chat-root chat))))))
         (log (plist-get run :log)))
    (should (plist-get run :inspected))
    (should (= (length log) 3))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    (should (= (length asked) 1))
    (should (string-match-p "build/out\\.o remains\\." (plist-get run :transcript)))))

(defun hooks-e2e--count (text string)
  "Return how many times TEXT occurs in STRING."
  (let ((n 0) (start 0))
    (while (string-search text string start)
      (setq n (1+ n) start (+ (string-search text string start) (length text))))
    n))

(ert-deftest mevedel-e2e:hook-context-of-a-failed-request-goes-with-the-next ()
  "SessionStart context carried by a refused request is sent again, then once only.
The refused prompt's own UserPromptSubmit context goes with it."
  (let ((mevedel-hooks '((SessionStart (:command "cat >/dev/null; echo 'Branch: feature-x'"))
                         (UserPromptSubmit (:command "cat >/dev/null; echo 'Prompt note'")))))
    (mevedel-e2e-with-chat (_view chat server _root)
        (mevedel-e2e-write-script
         '(((error . ((status . 400) (message . "rejected"))))
           ((expect . ((user_contains . "Branch: feature-x"))) (text . "Noted."))
           ((text . "Again."))))
      (cl-flet ((turn (text)
                  (let ((outcome nil))
                    (mevedel-chat-send chat text :on-done (lambda (_chat result) (setq outcome result)))
                    (mevedel-test-wait-until outcome 20)
                    outcome)))
        (should (eq (turn "first") 'error))
        (should (eq (turn "second") 'done))
        (should (eq (turn "third") 'done)))
      (let ((log (mevedel-scripted-model-log server)))
        (should (= (length log) 3))
        (should-not (mevedel-scripted-model-mismatches server))
        ;; The SessionStart context: new in the refused request and the
        ;; next one, only in the history of the third.  Each prompt's own
        ;; context goes with it: the third request has the second's in
        ;; its history, and its own.
        (cl-loop for n from 0 to 2
                 for notes in '(1 1 2)
                 for body = (json-encode (alist-get 'body (nth n log)))
                 do (should (= 1 (hooks-e2e--count "Branch: feature-x" body)))
                 (should (= notes (hooks-e2e--count "Prompt note" body))))))))

(ert-deftest mevedel-e2e:a-refused-hook-card-leaves-the-guard-out ()
  "The view asks about a new hook file with a card while the Bash call waits.
Refusing it with n: the guard never runs, and the command does."
  (let* ((cards 0)
         (mevedel-hooks-can-ask-function (lambda () t))
         (run (mevedel-e2e-run
               :wire 'openai :stream t :timeout 30
               :files `(("build/out.o" . "object")
                        ("guard.sh" . ,hooks-e2e--guard)
                        (".mevedel/hooks.el"
                         . ,(prin1-to-string
                             '((PreToolUse (:matcher "Bash" :command "sh guard.sh" :timeout 10))))))
               :prompt "Remove the build directory"
               :setup (lambda (chat) (setf (mevedel-chat-permission-mode chat) 'full-auto))
               :during (lambda (chat view)
                         (when-let* ((card (cl-find 'hook-approval (mevedel-interaction-list chat)
                                                    :key #'mevedel-interaction-kind)))
                           (cl-incf cards)
                           (with-current-buffer view
                             (should (string-search "PreToolUse [Bash]: sh guard.sh"
                                                    (buffer-string)))
                             (goto-char (mevedel-interaction-start card))
                             (call-interactively
                              (lookup-key (mevedel-interaction-keymap card) "n")))))
               :steps `(((tool_calls . [((name . "Bash")
                                         (arguments . ((command . "rm -rf build")
                                                       (description . "remove build"))))]))
                        ((text . "Removed build/.")))
               :inspect (lambda (chat _view)
                          (mevedel-test-wait-until (not (mevedel-chat-busy-p chat)) 15)
                          (not (file-exists-p (expand-file-name "build/out.o"
                                                                (mevedel-chat-root chat))))))))
    (should (= cards 1))
    (should (plist-get run :inspected))
    (should (= (length (plist-get run :log)) 2))
    (should-not (string-match-p "blocked by the project guard" (plist-get run :transcript)))))

(ert-deftest mevedel-e2e:a-hook-answering-continue-false-ends-the-turn ()
  "A PreToolUse hook's continue false refuses the call and aborts the turn."
  (let* ((mevedel-hooks
          '((PreToolUse (:matcher "Bash"
                         :command "cat >/dev/null; echo '{\"continue\": false, \"stopReason\": \"maintenance window\"}'"))))
         (run (mevedel-e2e-run
               :wire 'anthropic :stream t
               :prompt "Deploy"
               :setup (lambda (chat) (setf (mevedel-chat-permission-mode chat) 'full-auto))
               :steps `(((tool_calls . [((name . "Bash")
                                         (arguments . ((command . "echo deploying")
                                                       (description . "deploy"))))]))
                        ((text . "never sent"))))))
    (should (eq (plist-get run :outcome) 'abort))
    (should (= (length (plist-get run :log)) 1))
    (should (string-match-p "A hook stopped the turn: maintenance window"
                            (plist-get run :transcript)))))

(ert-deftest mevedel-e2e:aborting-during-a-stop-hook-stops-it ()
  "C-c C-k while a slow Stop hook runs ends the turn at once and stops the hook."
  (let* ((mevedel-hooks `((Stop (:command ,(mevedel-test-sleep 300 "3")))))
         (aborted nil)
         (run (mevedel-e2e-run
               :wire 'openai :stream t :timeout 20
               :prompt "Hello"
               :steps '(((text . "Hi there.")))
               :during (lambda (chat _view)
                         (when (and (not aborted) (eq (mevedel-chat-status chat) 'hooks)
                                    (mevedel-test-processes-running (mevedel-test-sleep 300 "3")))
                           (setq aborted (float-time))
                           (mevedel-chat-abort chat))))))
    (should aborted)
    (should (eq (plist-get run :outcome) 'abort))
    (should (string-match-p "Aborted" (plist-get run :transcript)))
    (mevedel-test-wait-until (null (mevedel-test-processes-running (mevedel-test-sleep 300 "3")))
      5)))

(defconst hooks-e2e--frozen
  '((".mevedel/hooks.el"
     . "((UserPromptSubmit
  (:command \"case \\\"$(cat)\\\" in *deploy*) echo 'Deploys are frozen until Monday' >&2; exit 2 ;; esac\")))"))
  "A workspace whose UserPromptSubmit hook blocks deploy prompts.")

(ert-deftest mevedel-e2e:headless-skips-unapproved-hooks-unless-trusted ()
  "bin/mevedel skips an unapproved hook file with one stderr line.
With --trust-hooks the hook runs and blocks the prompt: nothing is sent."
  (let* ((file-line "mevedel: skipping the unapproved hooks of .*/\\.mevedel/hooks\\.el \
(--trust-hooks runs them)")
         (skipped (mevedel-e2e-headless
                   :files hooks-e2e--frozen
                   :steps '(((text . "Deploying.")))
                   :args '("-p" "deploy now")))
         (trusted (mevedel-e2e-headless
                   :files hooks-e2e--frozen
                   :steps '(((text . "Deploying.")))
                   :args '("-p" "deploy now" "--trust-hooks"))))
    (should (eql (plist-get skipped :status) 0))
    (should (equal (plist-get skipped :stdout) "Deploying.\n"))
    (should (= 1 (cl-count-if (lambda (line) (string-match-p file-line line))
                              (split-string (plist-get skipped :stderr) "\n"))))
    (should (= (length (plist-get skipped :log)) 1))
    (should (eql (plist-get trusted :status) 1))
    (should-not (string-match-p "skipping" (plist-get trusted :stderr)))
    (should (string-match-p "mevedel: a UserPromptSubmit hook blocked the prompt: \
Deploys are frozen until Monday" (plist-get trusted :stderr)))
    (should-not (plist-get trusted :log))))

(provide 'hooks-e2e-test)
;;; hooks-e2e-test.el ends here
