;;; checkpoint-test.el --- Checkpoints, rewind and the session diff  -*- lexical-binding: t; -*-

;;; Commentary:

;; A test tool that writes files declares :snapshot-p, so the pipeline's
;; snapshot step checkpoints what it changes; another, not read-only,
;; stands for Bash.  Turns are set on the chat as `mevedel-chat-send'
;; would set them.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-checkpoint)

(defun checkpoint-test--write (args)
  "Write ARGS's :text to its :path, or delete the file when :text is empty."
  (let ((path (plist-get args :path)) (text (plist-get args :text)))
    (if (string-empty-p text)
        (delete-file path)
      (with-temp-file path (insert text)))
    (format "wrote %s" path)))

(defmacro checkpoint-test--with (chat &rest body)
  "Run BODY with CHAT bound to a fresh session's chat and two test tools."
  (declare (indent 1))
  `(mevedel-test-with-view view ,chat
     (let ((mevedel-permissions-rules (append '((allow "CkWrite") (allow "CkRun"))
                                              mevedel-permissions-rules)))
       (mevedel-tool-register
        "CkWrite" (list :category "mevedel-test" :description "Write a file."
                        :args '((path path :required "The file.")
                                (text string :required "Its new text, or empty to delete it."))
                        :function #'checkpoint-test--write :snapshot-p t))
       (mevedel-tool-register
        "CkRun" (list :category "mevedel-test" :description "Stands for Bash."
                      :args '((text string :required "Anything."))
                      :function (lambda (_args) "ran")))
       (unwind-protect (progn ,@body)
         (mevedel-tool-unregister "CkWrite" "mevedel-test")
         (mevedel-tool-unregister "CkRun" "mevedel-test")))))

(defun checkpoint-test--turn (chat id label)
  "Start turn ID (LABEL) of CHAT as `mevedel-chat-send' would."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (goto-char (point-max))
    (let ((start (copy-marker (point))))
      (insert "\n\n### " label "\n")
      (let ((turn (list :id id :label label :start start)))
        (push turn (mevedel-chat-turns chat))
        (setf (mevedel-chat-turn chat) turn
              (mevedel-chat-turn-start chat) start)))))

(defun checkpoint-test--end-turn (chat)
  "End CHAT's running turn."
  (setf (mevedel-chat-turn chat) nil))

(defun checkpoint-test--file (chat name)
  "Return the absolute path of NAME in CHAT's workspace."
  (expand-file-name name (mevedel-chat-root chat)))

(defun checkpoint-test--text (path)
  "Return PATH's text, or nil when it does not exist."
  (and (file-exists-p path)
       (with-temp-buffer (insert-file-contents path) (buffer-string))))

(defun checkpoint-test--two-turns (chat)
  "Run two turns in CHAT: the first edits a.txt and adds b.txt, the second
edits a.txt again and runs CkRun.  Return the ids and files."
  (let ((a (checkpoint-test--file chat "a.txt"))
        (b (checkpoint-test--file chat "b.txt")))
    (with-temp-file a (insert "zero\n"))
    (checkpoint-test--turn chat "t1" "first change")
    (mevedel-test-run-tool chat "CkWrite" "c1" (list :path a :text "one\n") t)
    (mevedel-test-run-tool chat "CkWrite" "c2" (list :path b :text "bee\n") t)
    ;; A second edit of a.txt in the same turn keeps the first before-state.
    (mevedel-test-run-tool chat "CkWrite" "c3" (list :path a :text "one!\n") t)
    (checkpoint-test--end-turn chat)
    (checkpoint-test--turn chat "t2" "second change")
    (mevedel-test-run-tool chat "CkWrite" "c4" (list :path a :text "two\n") t)
    (mevedel-test-run-tool chat "CkRun" "c5" (list :text "x") t)
    (checkpoint-test--end-turn chat)
    (list a b)))

(ert-deftest checkpoint-test-rewind-restores-two-turns-and-names-bash ()
  "Rewinding restores each turn's before-state; Bash turns are named."
  (checkpoint-test--with chat
    (pcase-let* ((`(,a ,b) (checkpoint-test--two-turns chat))
                 (store (mevedel-session-store (mevedel-chat-session chat)))
                 (turns (mevedel-core-checkpoint-turns store)))
      (should (equal (mapcar (lambda (turn) (plist-get turn :id)) turns) '("t1" "t2")))
      (should (plist-get (nth 1 turns) :bash))
      (should-not (plist-get (nth 0 turns) :bash))
      (let ((messages nil))
        (cl-letf (((symbol-function 'message)
                   (lambda (format &rest args) (push (apply #'format format args) messages))))
          (mevedel-rewind chat (nth 1 turns)))
        (should (equal (checkpoint-test--text a) "one!\n"))
        (should (equal (checkpoint-test--text b) "bee\n"))
        (should (string-match-p "what tools changed in turn 2 (Bash, Eval, ...) is not undone" (car messages))))
      ;; Turn 2 is forgotten; rewinding turn 1 goes back to the start.
      (should (equal (mapcar (lambda (turn) (plist-get turn :id))
                             (mevedel-core-checkpoint-turns store))
                     '("t1")))
      (mevedel-rewind chat (car (mevedel-core-checkpoint-turns store)))
      (should (equal (checkpoint-test--text a) "zero\n"))
      (should-not (file-exists-p b)))))

(ert-deftest checkpoint-test-working-files-are-not-checkpointed ()
  "Issue 42 item 5: work:// files, local or shared, survive a rewind."
  (checkpoint-test--with chat
    (let* ((session (mevedel-chat-session chat))
           (a (checkpoint-test--file chat "a.txt"))
           (shared (checkpoint-test--file chat ".mevedel/shared/notes.md")))
      (with-temp-file a (insert "zero\n"))
      (make-directory (file-name-directory shared) t)
      (checkpoint-test--turn chat "t1" "notes and a change")
      (mevedel-test-run-tool chat "CkWrite" "c1" (list :path a :text "one\n") t)
      (mevedel-test-run-tool chat "CkWrite" "c2" (list :path shared :text "finding\n") t)
      (let ((local (expand-file-name "plan.md" (mevedel-session-local-directory session))))
        (make-directory (file-name-directory local) t)
        (mevedel-test-run-tool chat "CkWrite" "c3" (list :path local :text "draft\n") t)
        (checkpoint-test--end-turn chat)
        (let* ((store (mevedel-session-store session))
               (turn (car (mevedel-core-checkpoint-turns store))))
          (should-not (string-search "notes.md" (mevedel-core-checkpoint-diff store)))
          (should (string-search "a.txt" (mevedel-core-checkpoint-diff store)))
          (mevedel-rewind chat turn)
          (should (equal (checkpoint-test--text a) "zero\n"))
          (should (equal (checkpoint-test--text shared) "finding\n"))
          (should (equal (checkpoint-test--text local) "draft\n")))))))

(ert-deftest checkpoint-test-changed-files-need-confirmation ()
  "A file changed since the session's edit is restored only when confirmed."
  (checkpoint-test--with chat
    (pcase-let* ((`(,a ,_b) (checkpoint-test--two-turns chat))
                 (store (mevedel-session-store (mevedel-chat-session chat)))
                 (t2 (nth 1 (mevedel-core-checkpoint-turns store))))
      (with-temp-file a (insert "the user's\n"))
      (should (equal (mapcar (lambda (step) (plist-get step :changed))
                             (mevedel-core-checkpoint-rewind-plan store "t2"))
                     '(t)))
      (cl-letf (((symbol-function 'yes-or-no-p) #'ignore))
        (should-error (mevedel-rewind chat t2) :type 'user-error))
      (should (equal (checkpoint-test--text a) "the user's\n"))
      (cl-letf (((symbol-function 'yes-or-no-p) (lambda (_) t)))
        (mevedel-rewind chat t2))
      (should (equal (checkpoint-test--text a) "one!\n")))))

(ert-deftest checkpoint-test-visited-buffers ()
  "An unmodified visiting buffer follows the rewind; a modified one stops it."
  (checkpoint-test--with chat
    (pcase-let* ((`(,a ,_b) (checkpoint-test--two-turns chat))
                 (store (mevedel-session-store (mevedel-chat-session chat)))
                 (t2 (nth 1 (mevedel-core-checkpoint-turns store)))
                 (buffer (find-file-noselect a)))
      (unwind-protect
          (progn
            (with-current-buffer buffer (insert "unsaved "))
            (should-error (mevedel-rewind chat t2) :type 'user-error)
            (should (equal (checkpoint-test--text a) "two\n"))
            (with-current-buffer buffer (revert-buffer t t t))
            (mevedel-rewind chat t2)
            (with-current-buffer buffer
              (should (equal (buffer-string) "one!\n"))
              (should-not (buffer-modified-p))))
        (kill-buffer buffer)))))

(ert-deftest checkpoint-test-truncate-conversation ()
  "Rewinding with TRUNCATE removes the turn and later ones from the chat."
  (checkpoint-test--with chat
    (checkpoint-test--two-turns chat)
    (let* ((store (mevedel-session-store (mevedel-chat-session chat)))
           (t2 (nth 1 (mevedel-core-checkpoint-turns store)))
           (data (mevedel-chat-data-buffer chat)))
      (should (with-current-buffer data
                (save-excursion (goto-char (point-min)) (search-forward "second change" nil t))))
      (mevedel-rewind chat t2 t)
      (with-current-buffer data
        (save-excursion
          (goto-char (point-min))
          (should (search-forward "first change" nil t))
          (should-not (search-forward "second change" nil t))))
      (should (equal (mapcar (lambda (turn) (plist-get turn :id)) (mevedel-chat-turns chat))
                     '("t1"))))))

(ert-deftest checkpoint-test-session-diff ()
  "The session diff shows each file from its first checkpoint to now."
  (checkpoint-test--with chat
    (checkpoint-test--two-turns chat)
    (let ((buffer (mevedel-session-diff chat)))
      (unwind-protect
          (with-current-buffer buffer
            (should (derived-mode-p 'diff-mode))
            (should (string-match-p "^-zero$" (buffer-string)))
            (should (string-match-p "^\\+two$" (buffer-string)))
            (should (string-match-p "^\\+bee$" (buffer-string))))
        (kill-buffer buffer)))))

(ert-deftest checkpoint-test-no-turn-no-storage ()
  "A snapshot tool run outside a turn records nothing and creates no storage."
  (checkpoint-test--with chat
    (let ((a (checkpoint-test--file chat "a.txt")))
      (mevedel-test-run-tool chat "CkRun" "r1" (list :text "x"))
      (mevedel-test-run-tool chat "CkWrite" "w1" (list :path a :text "one\n"))
      (should-not (mevedel-session-store (mevedel-chat-session chat)))
      (should-not (file-exists-p (expand-file-name ".mevedel" (mevedel-chat-root chat)))))))

(ert-deftest checkpoint-test-bash-before-storage-is-named ()
  "A turn that ran Bash before the session had storage is still named."
  (checkpoint-test--with chat
    (let ((a (checkpoint-test--file chat "a.txt")))
      (checkpoint-test--turn chat "t1" "run only")
      (mevedel-test-run-tool chat "CkRun" "r1" (list :text "x"))
      (checkpoint-test--end-turn chat)
      (should-not (mevedel-session-store (mevedel-chat-session chat)))
      (checkpoint-test--turn chat "t2" "edit")
      (mevedel-test-run-tool chat "CkWrite" "w1" (list :path a :text "one\n"))
      (checkpoint-test--end-turn chat)
      (let ((turns (mevedel-core-checkpoint-turns
                    (mevedel-session-store (mevedel-chat-session chat)))))
        (should (equal (mapcar (lambda (turn) (list (plist-get turn :id) (plist-get turn :bash)))
                               turns)
                       '(("t1" t) ("t2" nil))))))))

(ert-deftest checkpoint-test-applypatch-turns-rewind ()
  "ApplyPatch's edits in two turns are checkpointed and rewound."
  (checkpoint-test--with chat
    (let ((a (checkpoint-test--file chat "a.txt"))
          (b (checkpoint-test--file chat "b.txt")))
      (setf (mevedel-session-permission-mode (mevedel-chat-session chat)) 'edits)
      (with-temp-file a (insert "alpha\nbeta\n"))
      (checkpoint-test--turn chat "p1" "patch one")
      (should (string-match-p
               "^Updated a\\.txt"
               (mevedel-test-run-tool
                chat "ApplyPatch" "ap1"
                (list :patch (concat "*** Begin Patch\n*** Update File: a.txt\n@@\n alpha\n"
                                     "-beta\n+BETA\n*** End Patch\n")))))
      (checkpoint-test--end-turn chat)
      (checkpoint-test--turn chat "p2" "patch two")
      (mevedel-test-run-tool
       chat "ApplyPatch" "ap2"
       (list :patch (concat "*** Begin Patch\n*** Add File: b.txt\n+new\n"
                            "*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** End Patch\n")))
      (checkpoint-test--end-turn chat)
      (should (equal (checkpoint-test--text a) "ALPHA\nBETA\n"))
      (let ((store (mevedel-session-store (mevedel-chat-session chat))))
        (should (equal (mapcar (lambda (turn) (plist-get turn :files))
                               (mevedel-core-checkpoint-turns store))
                       (list (list a) (list a b))))
        (mevedel-rewind chat (nth 1 (mevedel-core-checkpoint-turns store)))
        (should (equal (checkpoint-test--text a) "alpha\nBETA\n"))
        (should-not (file-exists-p b))
        (mevedel-rewind chat (car (mevedel-core-checkpoint-turns store)))
        (should (equal (checkpoint-test--text a) "alpha\nbeta\n"))))))

(ert-deftest checkpoint-test-turn-without-an-id-records-nothing ()
  "A turn that is not a plist with an id (as some callers set it) records nothing."
  (checkpoint-test--with chat
    (let ((a (checkpoint-test--file chat "a.txt")))
      (setf (mevedel-chat-turn chat) 'some-turn)
      (should (string-prefix-p "wrote "
                               (mevedel-test-run-tool chat "CkWrite" "w1"
                                                      (list :path a :text "one\n"))))
      (setf (mevedel-chat-turn chat) nil)
      (should-not (mevedel-session-store (mevedel-chat-session chat))))))

(provide 'checkpoint-test)
;;; checkpoint-test.el ends here
