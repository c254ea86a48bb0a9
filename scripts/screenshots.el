;;; screenshots.el --- Draw the view's screenshots from a scripted session  -*- lexical-binding: t; -*-

;;; Commentary:

;; Loaded by scripts/screenshots.sh into a graphical Emacs (under Xvfb)
;; after scripts/load-path.el.  One session on a small shell project,
;; against the scripted model (no network), five turns:
;;
;;   1. the model greps and reads, then answers in Markdown
;;        -> view-turn.png, then its Grep row expanded -> view-grep-row.png
;;   2. it wants to run the tests, a command of a few lines: the
;;      permission card with what each line reads, writes and deletes
;;        -> view-permission-card.png
;;   3. it patches the bug: the patch review -> patch-review.png
;;   4. it starts a long build in the background -> view-background-panel.png,
;;      then /usage below the view, whose header shows the turn's cost
;;        -> view-usage.png
;;   5. in Plan mode it proposes a plan: the plan card -> view-plan-card.png
;;
;; Each PNG is the frame as `x-export-frames' draws it (Cairo builds),
;; written to the directory the command line names after --.

;;; Code:

(require 'cl-lib)
(require 'mevedel)
(require 'mevedel-scripted-model)
(mevedel--load)

(defconst screenshots--files
  '(("lib.sh" . "# Arithmetic for the build scripts.\nadd() {\n  echo $(( $1 - $2 ))\n}\n\nmul() {\n  echo $(( $1 * $2 ))\n}\n")
    ("test.sh" . ". ./lib.sh\nfail=0\ncheck() {\n  [ \"$2\" = \"$3\" ] || { echo \"$1 failed: $2\"; fail=1; }\n}\ncheck 'add 2 3' \"$(add 2 3)\" 5\ncheck 'mul 2 3' \"$(mul 2 3)\" 6\n[ \"$fail\" = 0 ] && echo \"all tests passed\"\nexit $fail\n")
    ("README.md" . "# calc\n\nShell arithmetic used by the build: `add` and `mul` in lib.sh.\n"))
  "The project the session works on.")

(defconst screenshots--patch
  (concat "*** Begin Patch\n*** Update File: lib.sh\n@@ add() {\n"
          "-  echo $(( $1 - $2 ))\n+  echo $(( $1 + $2 ))\n }\n*** End Patch\n")
  "The model's fix.")

(defconst screenshots--plan
  (concat "## Test `mul` as well as `add`\n\n"
          "1. test.sh: check `mul 0 5` and `mul -2 3`\n"
          "2. lib.sh: no change unless a check fails\n"
          "3. Verify: `sh test.sh` prints all tests passed")
  "The plan the model proposes in Plan mode.")

(defconst screenshots--steps
  `(((text . "I will look for `add` and read the library.")
     (tool_calls . [((name . "Grep")
                     (arguments . ((pattern . "add") (path . "{{root}}")
                                   (output_mode . "content"))))
                    ((name . "Read") (arguments . ((file_path . "{{root}}lib.sh"))))]))
    ((text . ,(concat "## Why `add 2 3` fails\n\n"
                      "`add` in **lib.sh** *subtracts* its arguments:\n\n"
                      "```sh\nadd() {\n  echo $(( $1 - $2 ))\n}\n```\n\n"
                      "- `test.sh` expects `add 2 3` to print **5**\n"
                      "- `mul` is right, see lib.sh:7\n\n"
                      "The fix is one character: `-` becomes `+`.")))
    ((tool_calls . [((name . "Bash")
                     (arguments . ((command . ,(concat "sh test.sh > test.log 2>&1\n"
                                                       "grep -c failed test.log\n"
                                                       "cat README.md lib.sh | wc -l\n"
                                                       "rm -f test.log"))
                                   (description . "run the tests"))))]))
    ((text . "You declined: I will not run the tests."))
    ((tool_calls . [((name . "ApplyPatch") (arguments . ((patch . ,screenshots--patch))))]))
    ((text . "The patch was not applied; tell me what to change."))
    ((tool_calls . [((name . "Bash")
                     (arguments . ((command . "for i in 1 2 3 4 5 6; do echo building part $i; sleep 5; done")
                                   (description . "build everything")
                                   (yield_time_ms . 1500))))]))
    ((text . "The build goes on in the background; I will look at its output when it ends."))
    ;; ProposePlan is a specialist: the model calls it through ToolCall.
    ((tool_calls . [((name . "ToolCall")
                     (arguments . ((program . ,(format "(ProposePlan :plan %S)"
                                                        screenshots--plan)))))]))
    ((text . "I keep planning; tell me what to look at.")))
  "The scripted model's answers, one per request.")

(defun screenshots--wait (what predicate &optional seconds)
  "Wait until PREDICATE returns non-nil, at most SECONDS (default 20); WHAT names it."
  (let ((deadline (+ (float-time) (or seconds 20))))
    (while (not (funcall predicate))
      (when (> (float-time) deadline)
        (error "Screenshots: timed out waiting for %s" what))
      (accept-process-output nil 0.05))))

(defun screenshots--shoot (dir name)
  "Write the selected frame as DIR/NAME.png."
  (redisplay t)
  (sit-for 0.3)
  (redisplay t)
  (let ((coding-system-for-write 'binary)
        (file (expand-file-name (concat name ".png") dir)))
    (write-region (x-export-frames nil 'png) nil file nil 'silent)
    (princ (format "screenshots: wrote %s\n" file) #'external-debugging-output)))

(defun screenshots--show-card (view)
  "Scroll VIEW's window so that its first open interaction shows whole."
  (let ((window (get-buffer-window view)))
    (with-current-buffer view
      (when-let* ((card (car (mevedel-interaction-list mevedel-view--chat)))
                  (start (mevedel-interaction-start card)))
        (set-window-point window start)
        (set-window-start window (save-excursion (goto-char start) (forward-line -4) (point)))))))

(defun screenshots--send (view text)
  "Type TEXT into VIEW's composer and send it."
  (with-current-buffer view
    (goto-char (point-max))
    (insert text)
    (mevedel-view-send)))

(defun screenshots--turn-ended (chat count)
  "Return a predicate: CHAT has ended COUNT turns."
  (let ((ended 0))
    (mevedel-chat-observe chat (lambda (event &rest _) (when (eq event 'turn-end) (cl-incf ended))))
    (lambda () (>= ended count))))

(defun screenshots-run (dir)
  "Draw the screenshots into DIR."
  (make-directory dir t)
  (let* ((parent (make-temp-file "mevedel-shots-" t))
         (root (file-name-as-directory (expand-file-name "calc" parent)))
         (script (make-temp-file "mevedel-shots-" nil ".json"))
         server view chat)
    (make-directory root)
    (pcase-dolist (`(,name . ,text) screenshots--files)
      (with-temp-file (expand-file-name name root) (insert text)))
    (with-temp-file script
      (insert (json-encode `((steps . ,(vconcat screenshots--steps))))))
    (unwind-protect
        (let ((gptel-stream t)
              (mevedel-save-sessions nil)
              ;; The scripted model, priced as Claude Sonnet is.
              (mevedel-model-prices
               '(("scripted-model" :input 3.0 :output 15.0 :cache-read 0.3 :cache-write 3.75))))
          (setq server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
          (load-theme 'modus-vivendi t)
          ;; Wide enough for the header's turn cost and cache share.
          (set-frame-size (selected-frame) 136 38)
          (delete-other-windows)
          (setq view (mevedel root)
                chat (mevedel-view-chat view))
          (setf (mevedel-chat-backend chat) (mevedel-scripted-model-backend server :name "scripted")
                (mevedel-chat-model chat) 'scripted-model)
          (let ((ended (screenshots--turn-ended chat 1)))
            (screenshots--send view "Why does `sh test.sh` fail?")
            (screenshots--wait "the first turn" ended))
          ;; New code blocks are colored by the view's timer.
          (screenshots--wait "the code's colors"
                             (lambda () (null (buffer-local-value 'mevedel-view--code-queue view))))
          (screenshots--shoot dir "view-turn")
          (with-current-buffer view
            (goto-char (point-min))
            (search-forward "Grep")
            (mevedel-view-toggle-row)
            (set-window-start (selected-window) (point-min)))
          (screenshots--shoot dir "view-grep-row")
          (with-current-buffer view (goto-char (point-max)))
          ;; The tests: the card, then no.
          (let ((ended (screenshots--turn-ended chat 1)))
            (screenshots--send view "Run the tests.")
            (screenshots--wait "the permission card" (lambda () (mevedel-chat-pending chat)))
            (screenshots--show-card view)
            (screenshots--shoot dir "view-permission-card")
            (with-current-buffer view (mevedel-view-deny))
            (screenshots--wait "the second turn" ended))
          ;; The patch: its review, then rejected.
          (let ((ended (screenshots--turn-ended chat 1)))
            (screenshots--send view "Fix it.")
            (screenshots--wait "the patch review"
                               (lambda () (cl-find-if (lambda (buffer)
                                                        (with-current-buffer buffer
                                                          (derived-mode-p 'mevedel-patch-review-mode)))
                                                      (buffer-list))))
            (let ((review (cl-find-if (lambda (buffer)
                                        (with-current-buffer buffer
                                          (derived-mode-p 'mevedel-patch-review-mode)))
                                      (buffer-list))))
              (screenshots--shoot dir "patch-review")
              (with-current-buffer review (mevedel-patch-review-reject-all)))
            (screenshots--wait "the third turn" ended))
          (delete-other-windows (get-buffer-window view))
          ;; The build in the background.
          (let ((ended (screenshots--turn-ended chat 1))
                (mevedel-permissions-rules '((allow "Bash"))))
            (screenshots--send view "Build it.")
            (screenshots--wait "the fourth turn" ended 40))
          (screenshots--wait "the panel" (lambda ()
                                           (with-current-buffer view
                                             (pcase-let ((`(,start . ,end) (mevedel-view-panel-bounds)))
                                               (< start end)))))
          (screenshots--shoot dir "view-background-panel")
          (screenshots--send view "/usage")
          (screenshots--shoot dir "view-usage")
          (delete-other-windows (get-buffer-window view))
          ;; A plan in Plan mode: its card, then "keep planning".
          (mevedel-plan-enter (mevedel-chat-session chat))
          (let ((ended (screenshots--turn-ended chat 1)))
            (screenshots--send view "Plan tests for mul.")
            (screenshots--wait "the plan card"
                               (lambda () (cl-find 'plan (mevedel-interaction-list chat)
                                                   :key #'mevedel-interaction-kind)))
            (screenshots--show-card view)
            (screenshots--shoot dir "view-plan-card")
            (mevedel-interaction-settle (car (mevedel-interaction-list chat)) 'stay)
            (screenshots--wait "the fifth turn" ended)))
      (when chat (ignore-errors (mevedel-chat-abort chat)))
      (when server (mevedel-scripted-model-stop server))
      (delete-file script)
      (delete-directory parent t))))

(provide 'screenshots)
;;; screenshots.el ends here
