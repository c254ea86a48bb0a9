;;; chat-ux-e2e-test.el --- Dead ends a new user met in the chat  -*- lexical-binding: t; -*-

;;; Commentary:

;; The view driven as a user drives it, against the scripted model:
;; aborting while a permission card waits, and a send that fails before
;; the backend accepted the prompt.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defmacro chat-ux-test--with-view (spec &rest body)
  "Run BODY with a view on a workspace and a scripted server.
SPEC is (VIEW SERVER STEPS): VIEW and SERVER are bound."
  (declare (indent 1))
  (pcase-let ((`(,view ,server ,steps) spec))
    `(progn
       (mevedel-e2e-require-python)
       (let* ((root (mevedel-e2e-workspace '(("notes.txt" . "the answer is 42\n"))))
              (script (mevedel-e2e-write-script ,steps))
              (,server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
              (mevedel-save-sessions nil)
              (,view (mevedel root)))
         (unwind-protect
             (let ((chat (mevedel-view-chat ,view)))
               (setf (mevedel-chat-backend chat)
                     (mevedel-scripted-model-backend ,server :wire 'openai :stream t)
                     (mevedel-chat-model chat) 'scripted-model)
               ,@body)
           (let ((chat (mevedel-view-chat ,view)))
             (mevedel-chat-abort chat)
             (kill-buffer ,view)
             (kill-buffer (mevedel-chat-data-buffer chat)))
           (mevedel-scripted-model-stop ,server)
           (delete-file script)
           (delete-directory root t))))))

(defun chat-ux-test--wait (predicate)
  "Wait up to 20 seconds for PREDICATE to return non-nil; return its value."
  (let ((deadline (+ (float-time) 20)) value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.02))
    value))

(defun chat-ux-test--type-and-send (view text)
  "Type TEXT at point in VIEW, as a user would, and send it."
  (with-current-buffer view
    (execute-kbd-macro text)
    (mevedel-view-send)))

(ert-deftest chat-ux:abort-at-a-card-returns-to-the-composer ()
  "C-c C-k while a card waits: point back in the composer, the row cancelled.
Typing a new prompt then works."
  (chat-ux-test--with-view (view server
                                 '(((tool_calls . [((name . "Bash")
                                                     (arguments . ((command . "rm -rf build")
                                                                   (description . "clean"))))]))
                                   ((text . "Second answer."))))
    (let ((chat (mevedel-view-chat view)))
      (setf (mevedel-chat-permission-mode chat) 'ask)
      (with-current-buffer view
        (goto-char (point-max))
        (chat-ux-test--type-and-send view "Clean up")
        (should (chat-ux-test--wait (lambda () (mevedel-chat-pending chat))))
        ;; The card took point.
        (should (< (point) mevedel-view--composer))
        (should (eq (mevedel-interaction-kind (mevedel-interaction-at)) 'permission))
        (mevedel-view-abort)
        (should (chat-ux-test--wait (lambda () (not (mevedel-chat-busy-p chat)))))
        (should (>= (point) mevedel-view--composer))
        (should (= (window-point (get-buffer-window view)) (point)))
        ;; The call stays in the transcript, cancelled.
        (let ((rows (mevedel-e2e-view-rows view)))
          (should (= (length rows) 1))
          (should (string-match-p "rm -rf build" (cdar rows))))
        (should (string-match-p "⊘ \\$ rm -rf build  cancelled" (mevedel-e2e-transcript-text view)))
        ;; Typing at point works and sends.
        (chat-ux-test--type-and-send view "Next question")
        (should (chat-ux-test--wait (lambda () (not (mevedel-chat-busy-p chat)))))
        (should (string-match-p "Second answer" (mevedel-e2e-transcript-text view)))))))

(ert-deftest chat-ux:no-api-key-says-so-and-offers-the-demo ()
  "Without a key the prompt is not sent: the view says why and what to do.
The prompt stays in the composer and the history; the demo button
then gives a working session."
  (chat-ux-test--with-view (view _server '(((text . "unused"))))
    (let ((chat (mevedel-view-chat view))
          (auth-sources nil)
          (gptel-api-key nil))
      (setf (mevedel-chat-backend chat)
            (gptel-make-openai "mevedel-test-no-key" :key #'gptel-api-key-from-auth-source
                               :host "api.invalid" :models '(gpt-test)))
      (with-current-buffer view
        (goto-char (point-max))
        (let ((err (should-error (chat-ux-test--type-and-send view "Hello there")
                                 :type 'user-error)))
          (should (string-match-p "No API key for mevedel-test-no-key" (cadr err)))
          (should (string-match-p "machine api.invalid login apikey" (cadr err))))
        (should (equal (mevedel-view--composer-text) "Hello there"))
        (should (equal (car (mevedel-chat-history chat)) "Hello there"))
        (should-not (mevedel-chat-busy-p chat))
        (should-not (mevedel-chat-turns chat))
        (should (= 0 (buffer-size (mevedel-chat-data-buffer chat))))
        (let ((live (buffer-substring-no-properties mevedel-view--transcript-end
                                                    mevedel-view--composer)))
          (should (string-match-p "Not sent: No API key" live))
          (should (string-match-p "use the offline demo model" live))
          (should-not (string-match-p "Waiting for the model" live)))
        ;; The button's command: the demo answers the same prompt.
        (mevedel-view-use-demo)
        (mevedel-view-send)
        (should (chat-ux-test--wait (lambda () (and (mevedel-chat-turns chat)
                                                    (not (mevedel-chat-busy-p chat))))))
        (should (eq (mevedel-chat-status chat) 'idle))
        (should-not (string-match-p "Not sent" (buffer-string)))))))

(ert-deftest chat-ux:a-failed-send-gives-the-prompt-back ()
  "A failure before the request is sent leaves nothing half done.
The prompt returns to the composer and the history, the transcript is
as before, and the next send works."
  (chat-ux-test--with-view (view _server '(((text . "It works now."))))
    (let ((chat (mevedel-view-chat view)))
      (with-current-buffer view
        (goto-char (point-max))
        (cl-letf (((symbol-function 'gptel-request)
                   (lambda (&rest _) (signal 'void-function '(gptel-make-openai)))))
          (should-error (chat-ux-test--type-and-send view "First try")))
        (should (equal (mevedel-view--composer-text) "First try"))
        (should (equal (car (mevedel-chat-history chat)) "First try"))
        (should-not (mevedel-chat-busy-p chat))
        (should-not (mevedel-chat-turns chat))
        (should (= 0 (buffer-size (mevedel-chat-data-buffer chat))))
        (should (string-match-p "Not sent: Symbol.s function definition is void: gptel-make-openai"
                                (buffer-substring-no-properties mevedel-view--transcript-end
                                                                mevedel-view--composer)))
        (mevedel-view-send)
        (should (chat-ux-test--wait (lambda () (and (mevedel-chat-turns chat)
                                                    (not (mevedel-chat-busy-p chat))))))
        (should (string-match-p "It works now" (mevedel-e2e-transcript-text view)))
        (should-not (string-match-p "Not sent" (buffer-string)))))))

(ert-deftest chat-ux:loads-from-a-checkout-without-package-autoloads ()
  "Loading mevedel by `require' from a checkout needs no package autoloads.
gptel's backends, the demo and the entry point are all defined, as
the README's manual setup promises."
  (let* ((elpa (expand-file-name ".deps/elpa" mevedel-test-root))
         (args (append '("-Q" "--batch")
                       (cl-loop for dir in (directory-files elpa t "\\`[^.]")
                                when (file-directory-p dir) append (list "-L" dir))
                       (list "-L" (expand-file-name "lisp" mevedel-test-root)
                             "--eval"
                             (prin1-to-string
                              '(progn (require 'mevedel)
                                      (require 'mevedel-demo)
                                      (princ (list (fboundp 'gptel-make-openai)
                                                   (fboundp 'gptel-make-anthropic)
                                                   (fboundp 'mevedel-demo-attach)
                                                   (commandp 'mevedel)
                                                   (commandp 'mevedel-sessions)))))))))
    (with-temp-buffer
      (should (eql 0 (apply #'call-process (expand-file-name invocation-name invocation-directory)
                            nil t nil args)))
      (should (string-match-p "(t t t t t)\\'" (buffer-string))))))

(ert-deftest chat-ux:the-demo-fits-the-workspace-and-the-surface ()
  "The demo reads a README when there is one, else another text file."
  (require 'mevedel-demo)
  (let ((with-readme (mevedel-e2e-workspace '(("README.org" . "* Widgets\nQuantum widgets.\n")
                                              ("a.txt" . "other\n"))))
        (without (mevedel-e2e-workspace '(("data.bin" . "\0\1\2binary")
                                          ("lib/core.el" . "(defun widget-spin () 1)\n"))))
        (empty (mevedel-e2e-workspace nil)))
    (unwind-protect
        (progn
          (let ((vars (mevedel-demo-vars with-readme 'view)))
            (should (equal (cdr (assoc "file" vars)) "README.org"))
            (should (equal (cdr (assoc "pattern" vars)) "Widgets"))
            (should (string-match-p "TAB on a tool row" (cdr (assoc "hint" vars)))))
          (let ((vars (mevedel-demo-vars without 'headless)))
            (should (equal (cdr (assoc "file" vars)) "lib/core.el"))
            (should (equal (cdr (assoc "pattern" vars)) "defun"))
            (should (string-match-p "--json" (cdr (assoc "hint" vars)))))
          (let ((vars (mevedel-demo-vars empty 'view)))
            (should (equal (cdr (assoc "file" vars)) ""))
            (should (equal (cdr (assoc "what" vars)) "the workspace's listing"))))
      (dolist (dir (list with-readme without empty)) (delete-directory dir t)))))

(ert-deftest chat-ux:model-switching-is-per-session-and-saved ()
  "/model picks one of gptel's backends and models; the header shows it; resume keeps it."
  (chat-ux-test--with-view (view server '(((text . "Answered by the second model."))))
    (let* ((chat (mevedel-view-chat view))
           (first (mevedel-scripted-model-backend server :wire 'openai :stream t
                                                  :name "mevedel-test-first"))
           (second (mevedel-scripted-model-backend server :wire 'anthropic :stream t
                                                   :name "mevedel-test-second"))
           (mevedel-save-sessions t))
      (ignore first)
      (with-current-buffer view
        (should (member "mevedel-test-second:scripted-model" (mapcar #'car (mevedel-view--model-choices))))
        (should (eq (key-binding (kbd "C-c C-m")) #'mevedel-view-set-model))
        (mevedel-view--set-composer "/model mevedel-test-second:scripted-model")
        (mevedel-view-send)
        (should (eq (mevedel-chat-backend chat) second))
        (should (string-match-p "mevedel-test-second / scripted-model" (mevedel-view--header-line)))
        (should-error (mevedel-view-set-model "nobody:nothing") :type 'user-error)
        (should (eq (mevedel-chat-backend chat) second))
        ;; The next turn goes to it, and the session remembers it.
        (goto-char (point-max))
        (chat-ux-test--type-and-send view "Hello")
        (should (chat-ux-test--wait (lambda () (and (mevedel-chat-turns chat)
                                                    (not (mevedel-chat-busy-p chat))))))
        (should (string-match-p "Answered by the second model" (mevedel-e2e-transcript-text view)))
        (should (equal (alist-get 'path (car (mevedel-scripted-model-log server))) "/v1/messages"))
        (mevedel-save-flush chat)
        (let ((info (mevedel-core-store-info-get (mevedel-session-store-handle (mevedel-chat-session chat)))))
          (should (equal (cdr (assoc "backend" info)) "mevedel-test-second"))
          (should (equal (cdr (assoc "model" info)) "scripted-model")))))))

;;;; The demo stays apart from real work

(ert-deftest chat-ux:the-demo-never-leaks-into-real-work ()
  "After the demo, M-x mevedel with a real backend starts a new session.
The demo's history never reaches the real model, the header names the
backend and model the next request uses, and the list marks the demo."
  (mevedel-e2e-with-server (root server '(((text . "REAL: a real answer."))))
    (require 'mevedel-demo)
    (let ((auth-sources nil) (gptel-api-key nil)
          (mevedel-save-sessions t))
      ;; No usable backend: M-x mevedel-run talks to the demo.
      (let* ((demo-view (let ((gptel-backend nil)) (mevedel-run root)))
             (demo (mevedel-view-chat demo-view))
             (demo-id (mevedel-session-id (mevedel-chat-session demo))))
        (should (chat-ux-test--wait (lambda () (and (mevedel-chat-turns demo)
                                                    (not (mevedel-chat-busy-p demo))))))
        (should (mevedel-chat-demo demo))
        (should (string-match-p "offline demo model / scripted-model"
                                (with-current-buffer demo-view (mevedel-view--header-line))))
        ;; A real backend now: M-x mevedel saves the demo and starts afresh.
        (let* ((gptel-backend (mevedel-scripted-model-backend server :name "mevedel-test-real"))
               (gptel-model 'scripted-model)
               (view (mevedel root))
               (chat (mevedel-view-chat view)))
          (should-not (buffer-live-p demo-view))
          (should-not (mevedel-chat-demo chat))
          (should-not (equal (mevedel-session-id (mevedel-chat-session chat)) demo-id))
          (should (= 0 (buffer-size (mevedel-chat-data-buffer chat))))
          (let ((header (with-current-buffer view (mevedel-view--header-line))))
            (should (string-match-p "· mevedel-test-real / scripted-model ·" header))
            (should-not (string-match-p "demo" header)))
          (should (eq (mevedel-e2e-send-and-wait view "Hello") 'done))
          (let ((sent (format "%S" (alist-get 'body (car (mevedel-scripted-model-log server))))))
            (should (string-match-p "Hello" sent))
            (should-not (string-match-p (regexp-quote mevedel-demo-prompt) sent)))
          ;; Another Emacs, as a restart: the latest session is the demo's
          ;; no more, yet M-x mevedel still resumes the real one.
          (mevedel-e2e-close-live root)
          (should (equal (mevedel-session-latest root) (mevedel-session-id (mevedel-chat-session chat))))
          (should (equal (mevedel-session-latest root t) demo-id))
          ;; The list shows both, the demo marked.
          (with-current-buffer (mevedel-sessions root)
            (goto-char (point-min))
            (should (search-forward "[demo]" nil t))
            (should (equal (tabulated-list-get-id) demo-id))
            (should (= 1 (how-many "\\[demo\\]" (point-min) (point-max))))
            (kill-buffer)))))
    (mevedel-demo-stop)))

(provide 'chat-ux-e2e-test)
;;; chat-ux-e2e-test.el ends here
