;;; cards-test.el --- Tests of permission cards drawn in the view  -*- lexical-binding: t; -*-

;;; Commentary:

;; What a Bash card shows (the whole command, line by line, its risky
;; commands marked; one line of paths per command), that every card
;; takes point even from a draft, the card's faces, the composer's
;; prompt and rule, and "deny, and tell the model instead".

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-permissions)
(require 'mevedel-view)
(require 'mevedel-tool-exec)
(require 'mevedel)
(mevedel--load)

(defmacro cards-test--with-view (&rest body)
  "Run BODY with `view' and `chat', the view shown, Bash asking in `ask' mode."
  (declare (indent 0))
  `(mevedel-test-with-view view chat
     (switch-to-buffer view)
     (let ((mevedel-permissions-rules nil))
       (setf (mevedel-chat-permission-mode chat) 'ask
             (mevedel-chat-turn chat) 'turn-a)
       (unwind-protect (progn ,@body)
         (setf (mevedel-chat-turn chat) nil)))))

(defun cards-test--ask (chat command)
  "Ask about a Bash call of COMMAND in CHAT; return a box of its answers."
  (let ((answers (list nil)))
    (funcall (mevedel-session-prompter (mevedel-chat-session chat))
             (list :tool (mevedel-tool-get "Bash")
                   :args (list :command command :description "test")
                   :tool-use-id (format "toolu_%d" (random 100000))
                   :data-buffer (mevedel-chat-data-buffer chat)
                   :session (mevedel-chat-session chat))
             (lambda (answer) (push answer (car answers))))
    answers))

(defun cards-test--card-text ()
  "Return the text of the interaction at point, without properties."
  (let ((overlay (mevedel-interaction-overlay (mevedel-interaction-at))))
    (buffer-substring-no-properties (overlay-start overlay) (overlay-end overlay))))

(defun cards-test--face-at (text)
  "Return the faces at the first TEXT in the buffer, as a list."
  (save-excursion
    (goto-char (point-min))
    (search-forward text)
    (ensure-list (get-text-property (match-beginning 0) 'face))))

(defun cards-test--script (lines last)
  "Return a command of LINES lines, `echo step N', ending with LAST."
  (concat (mapconcat (lambda (i) (format "echo step %d" i)) (number-sequence 1 (1- lines)) "\n")
          "\n" last))

(ert-deftest mevedel-cards:a-long-command-shows-its-head-and-its-end ()
  "41 lines: the first 15, a line counting the rest, the last 5; TAB shows all."
  (cards-test--with-view
    (let ((long (concat "printf '%s\\n' " (make-string 300 ?x))))
      (cards-test--ask chat (cards-test--script 40 (concat long "\nrm -rf src")))
      (let ((text (cards-test--card-text)))
        (should (string-search "  command:\n    echo step 1\n    echo step 2\n" text))
        (should (string-search "    echo step 15\n    … 21 more lines (TAB shows all)\n" text))
        (should-not (string-search "echo step 16\n" text))
        (should-not (string-search "echo step 36\n" text))
        (should (string-search "    echo step 37\n" text))
        ;; The end is never hidden, and a long line is whole (it wraps).
        (should (string-search (concat "    " long "\n    rm -rf src\n") text))
        (should-not (string-search "command: echo" text)))
      (should (equal (get-text-property (save-excursion (search-forward "printf") (point))
                                        'wrap-prefix)
                     "    "))
      ;; The risky command is marked; the harmless ones are not.
      (should (memq 'mevedel-view-card-risky (cards-test--face-at "rm -rf src")))
      (should-not (memq 'mevedel-view-card-risky (cards-test--face-at "echo step 1\n")))
      (should (memq 'mevedel-view-card (cards-test--face-at "echo step 1\n")))
      ;; TAB shows every line, and again elides them.
      (execute-kbd-macro (kbd "TAB"))
      (should (eq (mevedel-interaction-kind (mevedel-interaction-at)) 'permission))
      (should (string-search "    echo step 16\n    echo step 17\n" (cards-test--card-text)))
      (should-not (string-search "more lines" (cards-test--card-text)))
      (execute-kbd-macro (kbd "TAB"))
      (should (string-search "21 more lines" (cards-test--card-text)))
      (execute-kbd-macro (kbd "n")))))

(ert-deftest mevedel-cards:a-dangerous-command-is-marked-as-such ()
  (cards-test--with-view
    (cards-test--ask chat "ls\nrm -rf /")
    (should (memq 'mevedel-view-card-dangerous (cards-test--face-at "rm -rf /")))
    (should-not (memq 'mevedel-view-card-dangerous (cards-test--face-at "ls\n")))
    (execute-kbd-macro (kbd "n"))))

(ert-deftest mevedel-cards:paths-are-per-command-and-true ()
  "`git status' touches no file; rm deletes, redirections write, make is unknown."
  (cards-test--with-view
    (cards-test--ask chat "git status && git log -3\nrm -rf src\ncat /etc/hosts notes.txt > out.txt\nmake")
    (let ((text (cards-test--card-text)))
      (should (string-search "  rm → deletes: src\n" text))
      (should (string-search "  cat → reads: /etc/hosts, notes.txt · writes: out.txt\n" text))
      (should (string-search "  make → paths: unknown\n" text))
      ;; No line for the commands that touch nothing, and no subcommand as a file.
      (should-not (string-search "git status →" text))
      (should-not (string-search "/status" text))
      (should-not (string-search "/log" text))
      (should-not (string-search "paths: /" text)))
    (execute-kbd-macro (kbd "n"))
    (cards-test--ask chat "rm -rf /etc")
    (should (string-search "  rm → deletes: /etc\n" (cards-test--card-text)))
    (execute-kbd-macro (kbd "n"))))

(ert-deftest mevedel-cards:a-card-takes-point-from-a-draft ()
  "The card takes point though the composer holds a draft; the draft stays."
  (cards-test--with-view
    (goto-char (point-max))
    (insert "half a thought")
    (let ((answers (cards-test--ask chat "rm -rf build")))
      (should (eq (mevedel-interaction-kind (mevedel-interaction-at)) 'permission))
      (should (eq (window-point (selected-window)) (point)))
      (should (equal (mevedel-view--composer-text) "half a thought"))
      (execute-kbd-macro (kbd "y"))
      (should (equal (car answers) '(approve)))
      ;; Point goes back to the draft, which is as it was.
      (should (= (point) (point-max)))
      (should (equal (mevedel-view--composer-text) "half a thought")))))

(ert-deftest mevedel-cards:a-focused-card-keeps-point-as-rows-redraw ()
  "Running rows above a card that took point redraw without moving point."
  (cards-test--with-view
    (setf (mevedel-chat-live-calls chat)
          (list (list :id "toolu_run" :name "Bash"
                      :args (list :command "sleep 9" :description "wait"))))
    (unwind-protect
        (progn
          (mevedel-view-redraw-live chat)
          (cards-test--ask chat "rm -rf build")
          (let ((card (mevedel-interaction-at)))
            (should (eq (mevedel-interaction-kind card) 'permission))
            (should (= (point) (mevedel-interaction-start card)))
            (mevedel-view-redraw-live chat)
            (mevedel-view-redraw-live chat)
            (should (eq (mevedel-interaction-at) card))
            (should (= (point) (mevedel-interaction-start card))))
          (execute-kbd-macro (kbd "n")))
      (setf (mevedel-chat-live-calls chat) nil))))

(ert-deftest mevedel-cards:a-card-opened-with-no-rows-keeps-point ()
  "A running row that appears above a card opened alone leaves point on it.
So does a tool result drawn into the transcript above it."
  (cards-test--with-view
    (unwind-protect
        (progn
          (cards-test--ask chat "rm -rf build")
          (let ((card (mevedel-interaction-at)))
            (should (eq (mevedel-interaction-kind card) 'permission))
            (should (= (point) (mevedel-interaction-start card)))
            (setf (mevedel-chat-live-calls chat)
                  (list (list :id "toolu_run" :name "Bash"
                              :args (list :command "sleep 9" :description "wait"))))
            (mevedel-view-redraw-live chat)
            (should (eq (mevedel-interaction-at) card))
            (should (= (point) (mevedel-interaction-start card)))
            (should (< (text-property-any (point-min) (point-max) 'mevedel-live t)
                       (point)))
            (mevedel-chat-notify chat 'tools-start nil)
            (should (= (point) (mevedel-interaction-start card))))
          (execute-kbd-macro (kbd "n")))
      (setf (mevedel-chat-live-calls chat) nil))))

(ert-deftest mevedel-cards:deny-and-tell-the-model ()
  "t refuses the call with the user's message for the model."
  (cards-test--with-view
    (let ((answers (cards-test--ask chat "rm -rf build")))
      (should (string-search "t deny, tell" (cards-test--card-text)))
      (cl-letf (((symbol-function 'read-string) (lambda (&rest _) "  use make clean  ")))
        (execute-kbd-macro (kbd "t")))
      (should-not (mevedel-interaction-list chat))
      (pcase-let ((`(deny . ,reason) (caar answers)))
        (should (string-match-p "declined this Bash call and says instead: use make clean\n"
                                reason))))
    ;; An empty message is no answer: the card stays.
    (cards-test--ask chat "rm -rf build")
    (cl-letf (((symbol-function 'read-string) (lambda (&rest _) " ")))
      (should-error (call-interactively #'mevedel-view-deny-and-tell) :type 'user-error))
    (should (mevedel-interaction-list chat))
    (execute-kbd-macro (kbd "n"))))

(ert-deftest mevedel-cards:faces-mean-what-they-show ()
  "Cards are not `highlight'; the rule draws nothing on the line above; a prompt."
  (should-not (memq 'highlight (ensure-list (face-attribute 'mevedel-view-card :inherit))))
  (should-not (string-search "highlight" (format "%S" (face-default-spec 'mevedel-view-card))))
  (cards-test--with-view
    (let* ((separator (marker-position mevedel-view--separator))
           (composer (marker-position mevedel-view--composer)))
      ;; The newline ending the line above the rule has no overline face.
      (should (eq (char-after separator) ?\n))
      (should-not (get-text-property separator 'face))
      (should (eq (get-text-property (1+ separator) 'face) 'mevedel-view-separator))
      ;; The composer's prompt marker is just before it, and read-only.
      (should (equal (buffer-substring-no-properties (- composer 2) composer) "› "))
      (should (eq (get-text-property (1- composer) 'face) 'mevedel-view-prompt))
      (goto-char (point-max))
      (insert "typed")
      (should (equal (mevedel-view--composer-text) "typed")))))

(ert-deftest mevedel-cards:a-running-row-expands ()
  "TAB on a running Bash row shows its whole command; TAB again hides it."
  (cards-test--with-view
    (let ((calls (list (list :id "toolu_run" :name "Bash"
                             :args (list :command "sleep 1\necho done" :description "wait")))))
      (setf (mevedel-chat-live-calls chat) calls)
      (unwind-protect
          (progn
            (mevedel-view-redraw-live chat)
        (goto-char (point-min))
        (search-forward "$ sleep 1")
        (should (string-search "▸ " (buffer-substring (line-beginning-position)
                                                      (line-end-position))))
        (mevedel-view-toggle-row)
        (should (string-search "echo done" (buffer-string)))
        (should (get-text-property (point) 'mevedel-row))
        (mevedel-view-toggle-row)
        (should-not (string-search "echo done" (buffer-string))))
        (setf (mevedel-chat-live-calls chat) nil)))))

(provide 'cards-test)
;;; cards-test.el ends here
