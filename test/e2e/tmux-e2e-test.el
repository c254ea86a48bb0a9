;;; tmux-e2e-test.el --- A real terminal Emacs driven through tmux  -*- lexical-binding: t; -*-

;;; Commentary:

;; Starts `emacs -nw' inside a private tmux server, types M-x mevedel, a
;; prompt and C-c C-c like a user would, and checks the rendered screen
;; (tmux capture-pane) for the prompt, the tool row and the answer.
;; The model is the scripted server, reached through a real gptel
;; backend.  tmux and python3 are required: the test fails without them.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun mevedel-tmux-test--tmux (socket &rest args)
  "Run tmux on private SOCKET with ARGS; return its output, failing on error."
  (with-temp-buffer
    (let ((status (apply #'call-process "tmux" nil t nil "-L" socket args)))
      (unless (eql status 0)
        (ert-fail (format "tmux %S failed (%s): %s" args status (buffer-string))))
      (buffer-string))))

(defun mevedel-tmux-test--capture (socket)
  "Return the visible text of the test pane on SOCKET."
  (mevedel-tmux-test--tmux socket "capture-pane" "-p" "-t" "mevedel-test"))

(defun mevedel-tmux-test--keys (socket &rest keys)
  "Send KEYS (as tmux send-keys takes them) to the test pane on SOCKET."
  (apply #'mevedel-tmux-test--tmux socket "send-keys" "-t" "mevedel-test" keys))

(defun mevedel-tmux-test--settled (capture previous)
  "Return non-nil when CAPTURE shows what PREVIOUS, the capture before it, did.
The frames of a spinner do not count."
  (cl-flet ((still (text) (replace-regexp-in-string "[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]" "⠿" text t t)))
    (and previous (equal (still capture) (still previous)))))

(defun mevedel-tmux-test--wait-for (socket regexp seconds)
  "Wait up to SECONDS for the pane on SOCKET to match REGEXP; return the capture.
The capture returned is a settled screen, the same in two captures in
a row (`mevedel-tmux-test--settled'): a terminal Emacs writes a redraw
in pieces, top row first, and a capture between two of them shows a
screen that never was, such as the new header above the old text."
  (let ((deadline (+ (float-time) seconds))
        (previous nil)
        (capture ""))
    (while (and (not (and (string-match-p regexp capture)
                          (mevedel-tmux-test--settled capture previous)))
                (< (float-time) deadline))
      (sleep-for 0.2)
      (setq previous capture
            capture (mevedel-tmux-test--capture socket)))
    (unless (and (string-match-p regexp capture) (mevedel-tmux-test--settled capture previous))
      (ert-fail (format "Screen never settled matching %S in %s s; last capture:\n%s"
                        regexp seconds capture)))
    capture))

(defun mevedel-tmux-test--write-init (init server &rest forms)
  "Write to INIT an init file whose gptel talks to the scripted SERVER.
FORMS are evaluated after that setup."
  (with-temp-file init
    (prin1 `(progn
              (require 'mevedel)
              (require 'gptel)
              (require 'gptel-openai)
              (setq gptel-backend
                    (gptel-make-openai "tmux scripted"
                      :host ,(format "127.0.0.1:%d" (mevedel-scripted-model-port server))
                      :protocol "http" :endpoint "/v1/chat/completions"
                      :stream t :key "scripted" :models '(scripted-model)
                      :curl-args '("--noproxy" "127.0.0.1"))
                    gptel-model 'scripted-model
                    inhibit-startup-screen t)
              ,@forms)
           (current-buffer))))

(defun mevedel-tmux-test--open (socket root init)
  "Start `emacs -nw' loading INIT in ROOT on SOCKET, then M-x mevedel in it."
  (mevedel-tmux-test--tmux
   socket "-u" "new-session" "-d" "-s" "mevedel-test" "-x" "110" "-y" "36" "-c" root
   (mapconcat #'shell-quote-argument
              (list (expand-file-name invocation-name invocation-directory) "-nw" "-Q"
                    "-l" (expand-file-name "scripts/load-path.el" mevedel-test-root)
                    "-l" init)
              " "))
  (mevedel-tmux-test--wait-for socket "\\*scratch\\*" 60)
  (mevedel-tmux-test--keys socket "M-x")
  (mevedel-tmux-test--keys socket "-l" "mevedel")
  (mevedel-tmux-test--keys socket "Enter")
  (mevedel-tmux-test--wait-for socket "C-c C-c send" 60))

(defmacro mevedel-tmux-test--with-emacs (spec &rest body)
  "Run BODY with `emacs -nw' in tmux at M-x mevedel of a new workspace.
SPEC is (SOCKET ROOT SERVER FILES STEPS . INIT): ROOT is bound to a
workspace of FILES, SERVER to a scripted server replaying STEPS
\({{root}} is ROOT) and SOCKET to the private tmux server's.  The
terminal Emacs evaluates the forms INIT evaluates to after pointing
gptel at SERVER (`mevedel-tmux-test--write-init').  tmux and python3
are required.  Everything is removed afterwards."
  (declare (indent 1))
  (pcase-let ((`(,socket ,root ,server ,files ,steps . ,init) spec)
              (script (make-symbol "script"))
              (file (make-symbol "init")))
    `(progn
       (unless (executable-find "tmux")
         (ert-fail "tmux is required by this test but is not installed"))
       (mevedel-e2e-require-python)
       (let* ((,root (mevedel-e2e-workspace ,files))
              (,script (mevedel-e2e-write-script ,steps))
              (,server (mevedel-scripted-model-start ,script :vars `(("root" . ,,root))))
              (,file (make-temp-file "mevedel-tmux-init" nil ".el"))
              (,socket (format "mevedel-tmux-%d" (emacs-pid))))
         (mevedel-tmux-test--write-init ,file ,server ,@init)
         (unwind-protect
             (let ((process-environment (append '("LANG=C.UTF-8" "LC_ALL=C.UTF-8"
                                                  "TERM=xterm-256color")
                                                process-environment)))
               (mevedel-tmux-test--open ,socket ,root ,file)
               ,@body)
           (ignore-errors (mevedel-tmux-test--tmux ,socket "kill-server"))
           (mevedel-scripted-model-stop ,server)
           (delete-file ,file)
           (delete-file ,script)
           (delete-directory ,root t))))))

(ert-deftest mevedel-tmux:wait-for-returns-a-settled-screen ()
  "A capture taken in the middle of a redraw is not the screen waited for.
The first capture has the new header over the old text (a torn redraw);
the screen returned is the settled one after it, with the whole answer."
  (let ((captures '("x · ready ·\nTMUX-"
                    "x · ready ·\nTMUX-HOOKED: second."
                    "x · ready ·\nTMUX-HOOKED: second.")))
    (cl-letf (((symbol-function 'mevedel-tmux-test--capture)
               (lambda (_socket) (if (cdr captures) (pop captures) (car captures)))))
      (should (equal (mevedel-tmux-test--wait-for "unused" "· ready ·" 5)
                     "x · ready ·\nTMUX-HOOKED: second.")))))

(ert-deftest mevedel-tmux:no-key-then-abort-at-a-card ()
  "In `emacs -nw': a prompt without an API key says so within 2 s and offers the
demo; the prompt stays; aborting at a permission card, then typing a new
prompt, works."
  (mevedel-tmux-test--with-emacs
      (socket root server '(("notes.txt" . "the answer is 42\n"))
              '(((tool_calls . [((name . "Bash")
                                 (arguments . ((command . "rm -rf build")
                                               (description . "clean"))))]))
                ((text . "TMUX-SECOND: here is the next answer.")))
              ;; The session starts on a backend without a key; the
              ;; scripted one stays to switch to.
              '(setq auth-sources nil
                     gptel-api-key nil
                     mevedel-save-sessions nil
                     gptel-backend (gptel-make-openai "tmux no key"
                                     :host "api.invalid" :key #'gptel-api-key-from-auth-source
                                     :models '(gpt-test))
                     gptel-model 'gpt-test))
    (cl-flet ((keys (&rest keys) (apply #'mevedel-tmux-test--keys socket keys)))
      (keys "-l" "Clean up")
      (keys "C-c" "C-c")
      (let ((screen (mevedel-tmux-test--wait-for
                     socket "use the offline demo model" 2)))
        (should (string-match-p "Not sent: No API key for tmux no key" screen))
        (should-not (string-match-p "Waiting for the model" screen))
        ;; The prompt is still in the composer.
        (should (string-match-p "── *\n\\(?:.*\n\\)*› Clean up" screen)))
      ;; Switch to a backend that works, send the same prompt: a card.
      (keys "C-c" "C-m")
      (mevedel-tmux-test--wait-for socket "Model for this session" 30)
      (keys "-l" "tmux scripted:scripted-model") (keys "Enter")
      (mevedel-tmux-test--wait-for socket "tmux scripted / scripted-model" 30)
      (keys "C-c" "C-c")
      (mevedel-tmux-test--wait-for socket "y allow once" 60)
      (keys "C-c" "C-k")
      (let ((screen (mevedel-tmux-test--wait-for socket "rm -rf build  cancelled" 60)))
        (should (string-match-p "⊘ \\$ rm -rf build  cancelled" screen)))
      ;; Point is back in the composer: typing works and sends.
      (keys "-l" "Next question")
      (keys "C-c" "C-c")
      (let ((screen (mevedel-tmux-test--wait-for socket "TMUX-SECOND" 60)))
        (should (string-match-p "^❯ Next question" screen))
        (should-not (string-match-p "read-only" screen))))))

(ert-deftest mevedel-tmux:type-prompt-and-see-answer ()
  "M-x mevedel in `emacs -nw', type a prompt, C-c C-c, see the tool row and answer."
  (mevedel-tmux-test--with-emacs
      (socket root server '(("notes.txt" . "the answer is 42\n"))
              '(((text . "Reading the notes.")
                 (tool_calls . [((name . "Read")
                                 (arguments . ((file_path . "{{root}}notes.txt"))))]))
                ((expect . ((results . [((contains . "the answer is 42"))])
                            (user_contains . "What is the answer")))
                 (text . "TMUX-ANSWER: the notes say 42.")))
              '(setq mevedel-chat-context-windows '((scripted-model . 400000))))
    (mevedel-tmux-test--keys socket "-l" "What is the answer?")
    (mevedel-tmux-test--keys socket "C-c" "C-c")
    (let ((screen (mevedel-tmux-test--wait-for
                   socket "TMUX-ANSWER\\(?:.\\|\n\\)*· ready ·\\|· ready ·\\(?:.\\|\n\\)*TMUX-ANSWER"
                   60)))
      ;; The rendered screen: header, prompt, text, tool row, answer, composer.
      (should (string-match-p "mevedel · .* · tmux scripted / scripted-model" screen))
      ;; The context share keeps its % on a real header line.
      (should (string-match-p "· context [0-9]+% of 400k" screen))
      (should (string-match-p "^❯ What is the answer\\?" screen))
      (should (string-match-p "^Reading the notes\\." screen))
      (should (string-match-p "^▸ ✓ Read notes\\.txt" screen))
      (should (string-match-p "^TMUX-ANSWER: the notes say 42\\." screen))
      (should (string-match-p "── C-c C-c send" screen))
      (should (< (string-search "❯ What is the answer?" screen)
                 (string-search "Read notes.txt" screen)
                 (string-search "TMUX-ANSWER" screen)
                 (string-search "── C-c C-c send" screen)))
      (should-not (string-match-p "×" screen)))
    (should-not (mevedel-scripted-model-mismatches server))))

(ert-deftest mevedel-tmux:new-hook-file-asks-once-then-runs ()
  "A workspace hook file asks with a card before its first command; y runs
it, and its output reaches the model with the prompt.  The second prompt
does not ask."
  (let ((state (make-temp-file "mevedel-tmux-state" t)))
    (unwind-protect
        (mevedel-tmux-test--with-emacs
            (socket root server
                    '((".mevedel/hooks.el"
                       . "((UserPromptSubmit (:command \"echo TMUX-HOOK-CONTEXT\")))"))
                    '(((expect . ((user_contains . "TMUX-HOOK-CONTEXT")))
                       (text . "TMUX-HOOKED: first."))
                      ((expect . ((user_contains . "TMUX-HOOK-CONTEXT")))
                       (text . "TMUX-HOOKED: second.")))
                    `(setq mevedel-save-sessions nil
                           mevedel-hooks-approvals-file ,(expand-file-name "approved.eld" state)))
          (mevedel-tmux-test--keys socket "-l" "hello")
          (mevedel-tmux-test--keys socket "C-c" "C-c")
          ;; The view asks with a card, which takes point.
          (let ((screen (mevedel-tmux-test--wait-for socket "Run the hooks of .*hooks\\.el\\?" 60)))
            (should (string-match-p "new or changed since you approved it" screen))
            (should (string-match-p "UserPromptSubmit: echo TMUX-HOOK-CONTEXT" screen))
            (should (string-match-p "y approve · n refuse" screen)))
          (mevedel-tmux-test--keys socket "y")
          (mevedel-tmux-test--wait-for socket "TMUX-HOOKED: first\\." 60)
          (should (file-exists-p (expand-file-name "approved.eld" state)))
          (mevedel-tmux-test--keys socket "-l" "again")
          (mevedel-tmux-test--keys socket "C-c" "C-c")
          (should-not (string-match-p "Run the hooks of"
                                      (mevedel-tmux-test--wait-for
                                       socket "TMUX-HOOKED: second\\." 60)))
          (should-not (mevedel-scripted-model-mismatches server)))
      (delete-directory state t))))

(ert-deftest mevedel-tmux:make-run-offline-demo ()
  "scripts/run.sh (what `make run' starts) without a backend runs the demo turn."
  (unless (executable-find "tmux")
    (ert-fail "tmux is required by this test but is not installed"))
  (mevedel-e2e-require-python)
  (let* ((socket (format "mevedel-demo-%d" (emacs-pid)))
         (home (make-temp-file "mevedel-demo-home" t))
         ;; The demo's session is saved in the checkout: leave it as found.
         (storage (expand-file-name ".mevedel" mevedel-test-root))
         (had-storage (file-exists-p storage))
         (sessions (expand-file-name "sessions" storage))
         (before (and (file-directory-p sessions) (directory-files sessions nil "\\`[^.]"))))
    (unwind-protect
        (progn
          (mevedel-tmux-test--tmux
           socket "-u" "new-session" "-d" "-s" "mevedel-test" "-x" "120" "-y" "45"
           "-c" mevedel-test-root
           (mapconcat #'shell-quote-argument
                      (list "env" "-u" "DISPLAY" "-u" "WAYLAND_DISPLAY" "-u" "MEVEDEL_INIT"
                            (concat "HOME=" home) (concat "XDG_CONFIG_HOME=" home "/.config")
                            "LANG=C.UTF-8" "LC_ALL=C.UTF-8" "TERM=xterm-256color"
                            (concat "EMACS=" (expand-file-name invocation-name
                                                               invocation-directory))
                            "bash" (expand-file-name "scripts/run.sh" mevedel-test-root))
                      " "))
          (let ((screen (mevedel-tmux-test--wait-for
                         socket "That was a complete tool-using turn\\(?:.\\|\n\\)*── C-c C-c" 40)))
            (should (string-match-p "· offline demo model / scripted-model ·" screen))
            (should (string-match-p "^❯ What is this project" screen))
            (should (string-match-p "^This is the offline demo model" screen))
            (should (string-match-p "^▸ ✓ Read README\\.md" screen))
            (should (string-match-p "^▸ ✓ Grep \"mevedel\" in \\./" screen))
            (should-not (string-match-p "×" screen))
            (should (< (string-search "Read README.md" screen)
                       (string-search "Grep \"mevedel\"" screen)
                       (string-search "That was a complete" screen)))))
      (ignore-errors (mevedel-tmux-test--tmux socket "kill-server"))
      (if (not had-storage)
          (delete-directory storage t)
        (dolist (id (and (file-directory-p sessions) (directory-files sessions nil "\\`[^.]")))
          (unless (member id before)
            (delete-directory (expand-file-name id sessions) t))))
      (delete-directory home t))))

;; A terminal Emacs has no pictures: the rows say in words what was sent.
(ert-deftest mevedel-tmux:media-rows-say-what-was-sent ()
  "In `emacs -nw', Read of a PNG and of an SVG for a model that takes images:
each row says what was sent in words, and expanding one shows its text."
  (let ((media (expand-file-name "test/fixtures/media/" mevedel-test-root)))
    (mevedel-tmux-test--with-emacs
        (socket root server '(("notes.txt" . "notes\n"))
                `(((tool_calls . [((name . "Read")
                                   (arguments . ((file_path . ,(concat media "small.png")))))
                                  ((name . "Read")
                                   (arguments . ((file_path . ,(concat media "diagram.svg")))))]))
                  ((expect . ((results . [((contains . "PNG, 64×48 px"))
                                          ((contains . "sent drawn"))])))
                   (text . "TMUX-MEDIA: seen both.")))
                '(put 'scripted-model :capabilities '(media tool-use))
                '(put 'scripted-model :mime-types '("image/png" "image/jpeg"))
                '(setq mevedel-permissions-mode 'full-auto))
      (cl-flet ((keys (&rest keys) (apply #'mevedel-tmux-test--keys socket keys)))
        (keys "-l" "Look at both")
        (keys "C-c" "C-c")
        (let ((screen (mevedel-tmux-test--wait-for socket "TMUX-MEDIA" 60)))
          (should (string-match-p
                   "^▸ ✓ Read .*small\\.png · PNG, 64×48 px, [0-9.]+ KB · sent PNG 64×48 ([0-9.]+k)"
                   screen))
          (should (string-match-p
                   "^▸ ✓ Read .*diagram\\.svg · sent PNG 512×256 ([0-9.]+k)" screen))
          (should-not (string-match-p "\\[image\\]" screen)))
        ;; Expanding the SVG's row shows its text and the note, no picture.
        (keys "M-<")
        (keys "C-s") (keys "-l" "diagram.svg") (keys "Enter") (keys "TAB")
        (let ((screen (mevedel-tmux-test--wait-for socket "sent drawn, as an image" 30)))
          (should (string-match-p "<rect x=\"10\"" screen))
          (should-not (string-match-p "\\[image\\]" screen))))
      (should-not (mevedel-scripted-model-mismatches server)))))

(provide 'tmux-e2e-test)
;;; tmux-e2e-test.el ends here
