;;; screenshots.el --- Draw the view's screenshots from a scripted session  -*- lexical-binding: t; -*-

;;; Commentary:

;; Loaded by scripts/screenshots.sh into a graphical Emacs (under Xvfb)
;; after scripts/load-path.el.  One session on a small shell project,
;; against the scripted model (no network), four turns:
;;
;;   1. the model greps and reads, then answers in Markdown
;;        -> view-turn.png, then its Grep row expanded -> view-grep-row.png
;;   2. it wants to run the tests: the permission card -> view-permission-card.png
;;   3. it patches the bug: the patch review -> patch-review.png
;;   4. it starts a long build in the background -> view-background-panel.png
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
                     (arguments . ((command . "sh test.sh") (description . "run the tests"))))]))
    ((text . "You declined: I will not run the tests."))
    ((tool_calls . [((name . "ApplyPatch") (arguments . ((patch . ,screenshots--patch))))]))
    ((text . "The patch was not applied; tell me what to change."))
    ((tool_calls . [((name . "Bash")
                     (arguments . ((command . "for i in 1 2 3 4 5 6; do echo building part $i; sleep 5; done")
                                   (description . "build everything")
                                   (yield_time_ms . 1500))))]))
    ((text . "The build goes on in the background; I will look at its output when it ends.")))
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
              (mevedel-save-sessions nil))
          (setq server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
          (load-theme 'modus-vivendi t)
          (set-frame-size (selected-frame) 110 38)
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
          (screenshots--shoot dir "view-background-panel"))
      (when chat (ignore-errors (mevedel-chat-abort chat)))
      (when server (mevedel-scripted-model-stop server))
      (delete-file script)
      (delete-directory parent t))))

(provide 'screenshots)
;;; screenshots.el ends here
