;;; plan-test.el --- Plan mode: the boundary, the stamp, the plan card  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defun plan-test--patch (&rest paths)
  "Return a patch adding a one-line file at each of PATHS."
  (concat "*** Begin Patch\n"
          (mapconcat (lambda (path) (format "*** Add File: %s\n+planned\n" path)) paths "")
          "*** End Patch"))

(defmacro plan-test--with-plan (&rest body)
  "Run BODY with `view', `chat', `session' and `root', the session in Plan mode.
Every card is answered \"allow once\" (so only Plan can refuse) and
noted in `asked'."
  (declare (indent 0))
  `(mevedel-test-with-view view chat
     (let* ((session (mevedel-chat-session chat))
            (root (mevedel-session-workspace session))
            (asked nil))
       (ignore root)
       (mevedel-chat-set-prompter chat (lambda (_chat request)
                                         (push request asked)
                                         (funcall (plist-get request :answer) 'once)))
       (mevedel-plan-enter session)
       ,@body)))

(defun plan-test--run (chat name args)
  "Run tool NAME with ARGS in CHAT as a call of its running turn; return the result."
  (mevedel-test-run-tool chat name (format "p%d" (random 100000)) args))

(ert-deftest mevedel-plan:refused-before-anything-is-touched ()
  (plan-test--with-plan
    (mevedel-test-in-turn chat (list :id "t1" :plan-stamp (mevedel-plan-make-stamp 'sticky))
      ;; An ordinary path.
      (should (string-match-p "Plan mode: ApplyPatch may only write this session's work://"
                              (plan-test--run chat "ApplyPatch"
                                              (list :patch (plan-test--patch "src/a.txt")))))
      (should-not (file-exists-p (expand-file-name "src/a.txt" root)))
      ;; A mixed work:// and ordinary patch: neither side, and no storage made.
      (should (string-match-p "also targets `b.txt'"
                              (plan-test--run chat "ApplyPatch"
                                              (list :patch (plan-test--patch "work://plans/p.md"
                                                                             "b.txt")))))
      (should-not (file-exists-p (expand-file-name "b.txt" root)))
      (should-not (mevedel-session-storage-p session))
      ;; Shared and memory endpoints are not the session's.
      (dolist (path '("work://shared/notes.md" "memory://x/notes.md"))
        (should (string-match-p "Plan mode: ApplyPatch"
                                (plan-test--run chat "ApplyPatch"
                                                (list :patch (plan-test--patch path))))))
      ;; A mutating command.
      (should (string-match-p "Plan mode: only read-only commands run"
                              (plan-test--run chat "Bash" (list :command "touch made.txt"
                                                                :description "make a file"))))
      (should-not (file-exists-p (expand-file-name "made.txt" root)))
      ;; Eval.
      (should (string-match-p "Plan mode: Eval is not available"
                              (plan-test--run chat "Eval" (list :form "(setq plan-test--x 1)"))))
      (should-not (boundp 'plan-test--x))
      ;; Full-auto and an allow rule do not widen it.
      (let ((mevedel-permissions-rules '((allow "ApplyPatch") (allow "Bash"))))
        (should (string-match-p "Plan mode"
                                (plan-test--run chat "ApplyPatch"
                                                (list :patch (plan-test--patch "c.txt")))))
        (should-not (file-exists-p (expand-file-name "c.txt" root))))
      (should-not asked))))

(ert-deftest mevedel-plan:plans-and-reads-are-allowed ()
  (plan-test--with-plan
    (mevedel-test-in-turn chat (list :id "t2" :plan-stamp (mevedel-plan-make-stamp 'sticky))
      (with-temp-file (expand-file-name "seen.txt" root) (insert "hello\n"))
      ;; A plan in work://plans/ is written, without a card.
      (should (string-match-p "work://plans/plan.md"
                              (plan-test--run chat "ApplyPatch"
                                              (list :patch (plan-test--patch "work://plans/plan.md")))))
      (should (file-exists-p (expand-file-name "plans/plan.md"
                                               (mevedel-session-local-directory session))))
      ;; Read-only tools and proven read-only commands run.
      (should (string-match-p "hello" (plan-test--run chat "Read" (list :file_path "seen.txt"))))
      (should (string-match-p "seen.txt" (plan-test--run chat "Bash" (list :command "ls"
                                                                           :description "list"))))
      (should (string-match-p "#1 \\[pending\\] Step one"
                              (plan-test--run chat "TaskWrite"
                                              (list :tasks (vector '(:subject "Step one")))))))
    (should-not asked)))

(ert-deftest mevedel-plan:stamp-outlives-the-mode-and-directive-is-stricter ()
  (plan-test--with-plan
    (let ((stamped (list :id "t3" :plan-stamp (mevedel-plan-make-stamp 'sticky))))
      ;; A turn sent in Plan is stamped; one sent after it is not.
      (let ((turn (list :id "new")))
        (mevedel-plan--stamp-turn chat turn)
        (should (eq (mevedel-plan-stamp-kind (plist-get turn :plan-stamp)) 'sticky)))
      (mevedel-plan-leave session)
      (should (eq (mevedel-permissions-session-mode session) 'ask))
      (let ((turn (list :id "later")))
        (mevedel-plan--stamp-turn chat turn)
        (should-not (plist-get turn :plan-stamp)))
      ;; The stamped turn keeps Plan's boundary after the session left Plan.
      (mevedel-test-in-turn chat stamped
        (should (string-match-p "Plan mode"
                                (plan-test--run chat "ApplyPatch"
                                                (list :patch (plan-test--patch "d.txt")))))
        (should-not (file-exists-p (expand-file-name "d.txt" root))))
      ;; Directive planning refuses even a plan file.
      (mevedel-test-in-turn chat (list :id "t4" :plan-stamp (mevedel-plan-make-stamp 'directive))
        (should (string-match-p "Planning is read-only"
                                (plan-test--run chat "ApplyPatch"
                                                (list :patch (plan-test--patch
                                                              "work://plans/x.md"))))))
      ;; An agent request answers for its own stamp.
      (let ((mevedel-plan-request-functions
             (list (lambda (_context) (mevedel-plan-make-stamp 'sticky)))))
        (should (string-match-p "Plan mode"
                                (plan-test--run chat "Bash" (list :command "rm -f x"
                                                                  :description "rm"))))))))

(ert-deftest mevedel-plan:implementation-override-is-the-turns-mode ()
  (plan-test--with-plan
    (mevedel-plan-leave session)
    (setq asked nil)
    ;; The implementation turn runs in `edits' while the session stays in `ask'.
    (mevedel-test-in-turn chat (list :id "impl" :mode-override 'edits)
      (should (string-match-p "Added e.txt\\|e.txt"
                              (plan-test--run chat "ApplyPatch"
                                              (list :patch (plan-test--patch "e.txt")))))
      (should (file-exists-p (expand-file-name "e.txt" root))))
    (should-not asked)
    (should (eq (mevedel-permissions-session-mode session) 'ask))))

(ert-deftest mevedel-plan:card-keys ()
  (plan-test--with-plan
    (switch-to-buffer view)
    (let ((sent nil))
      (cl-letf (((symbol-function 'mevedel-chat-send)
                 (lambda (_chat text &rest _) (push text sent))))
        ;; f: feedback, staying in Plan.
        (mevedel-test-in-turn chat (list :id "t5" :plan-stamp (mevedel-plan-make-stamp 'sticky))
          (let ((box (mevedel-test-start-tool chat "ProposePlan" "pp1" (list :plan "1. Do it"))))
            (mevedel-test-wait-until (mevedel-interaction-list chat) 5)
            (should (eq (mevedel-interaction-kind (mevedel-interaction-at)) 'plan))
            (should (string-match-p "Plan proposal\n  1. Do it\n"
                                    (buffer-substring-no-properties (point-min) (point-max))))
            (execute-kbd-macro (kbd "f smaller SPC steps RET"))
            (mevedel-test-wait-until (car box) 5)
            (should (string-match-p "revised: smaller steps" (caar box)))
            (should (mevedel-plan-active-p session)))
          ;; q: stay.
          (let ((box (mevedel-test-start-tool chat "ProposePlan" "pp2" (list :plan "1. Do it"))))
            (mevedel-test-wait-until (mevedel-interaction-list chat) 5)
            (execute-kbd-macro (kbd "q"))
            (mevedel-test-wait-until (car box) 5)
            (should (string-match-p "stays in Plan mode" (caar box)))
            (should (mevedel-plan-active-p session))))
        ;; e: approve with edits; out of a turn the implementation starts at once.
        (let ((box (with-current-buffer (mevedel-chat-data-buffer chat)
                     (mevedel-test-start-tool chat "ProposePlan" "pp3" (list :plan "1. Edit"))))
              (turn (list :id "next")))
          (mevedel-test-wait-until (mevedel-interaction-list chat) 5)
          (execute-kbd-macro (kbd "e"))
          (mevedel-test-wait-until (car box) 5)
          (should (string-match-p "allowed file edits" (caar box)))
          (should-not (mevedel-plan-active-p session))
          (should (string-match-p "approved this plan.*\n\n1\\. Edit" (car sent)))
          (mevedel-plan--stamp-turn chat turn)
          (should (eq (plist-get turn :mode-override) 'edits))
          (should-not (plist-get turn :plan-stamp))
          (should (equal (mevedel-plan-current session) "1. Edit")))))))

(ert-deftest mevedel-plan:the-card-takes-point-from-a-draft ()
  "With a draft in the composer the plan card still takes point; f's
feedback, read in the minibuffer, is the plan's answer; the draft stays."
  (plan-test--with-plan
    (switch-to-buffer view)
    (goto-char (point-max))
    (insert "an unsent thought")
    (mevedel-test-in-turn chat (list :id "t6" :plan-stamp (mevedel-plan-make-stamp 'sticky))
      (let ((box (mevedel-test-start-tool chat "ProposePlan" "pp6" (list :plan "1. Do it"))))
        (mevedel-test-wait-until (mevedel-interaction-list chat) 5)
        (should (eq (mevedel-interaction-kind (mevedel-interaction-at)) 'plan))
        (should (eq (key-binding "f") #'mevedel-tool-plan-feedback))
        (execute-kbd-macro (kbd "f use SPC sqlite RET"))
        (mevedel-test-wait-until (car box) 5)
        (should (string-match-p "revised: use sqlite" (caar box)))
        (should (mevedel-plan-active-p session))
        ;; Nothing was typed into the composer or queued.
        (should (equal (mevedel-view--composer-text) "an unsent thought"))
        (should-not (mevedel-chat-queued chat))
        (should (= (point) (point-max)))))))

(ert-deftest mevedel-plan:propose-outside-plan-is-refused ()
  (mevedel-test-with-view view chat
    (should (string-match-p "Plan mode, which is off"
                            (mevedel-test-run-tool chat "ProposePlan" "pp4" (list :plan "x"))))))

(ert-deftest mevedel-plan:slash-and-header ()
  (mevedel-test-with-view view chat
    (let ((session (mevedel-chat-session chat)))
      (setf (mevedel-session-permission-mode session) 'edits)
      (mevedel-tool-plan--slash chat "")
      (should (mevedel-plan-active-p session))
      (with-current-buffer view
        (should (string-match-p "PLAN mode" (mevedel-view--header-line))))
      (mevedel-tool-plan--slash chat "off")
      (should (eq (mevedel-permissions-session-mode session) 'edits))
      (should-error (mevedel-tool-plan--slash chat "maybe") :type 'user-error))))

(ert-deftest mevedel-plan:approve-leaves-plan-for-the-previous-mode ()
  (mevedel-test-with-view view chat
    (switch-to-buffer view)
    (let ((session (mevedel-chat-session chat))
          (sent nil))
      (setf (mevedel-session-permission-mode session) 'edits)
      (mevedel-plan-enter session)
      (cl-letf (((symbol-function 'mevedel-chat-send)
                 (lambda (_chat text &rest _) (push text sent))))
        (let ((box (mevedel-test-start-tool chat "ProposePlan" "pa" (list :plan "1. Go"))))
          (mevedel-test-wait-until (mevedel-interaction-list chat) 5)
          (execute-kbd-macro (kbd "a"))
          (mevedel-test-wait-until (car box) 5)
          (should (string-match-p "\\`The user approved the plan\\." (caar box)))
          (should (eq (mevedel-permissions-session-mode session) 'edits))
          (should (= 1 (length sent)))
          (let ((turn (list :id "impl")))
            (mevedel-plan--stamp-turn chat turn)
            (should-not (plist-get turn :mode-override))
            (should-not (plist-get turn :plan-stamp))))))))

(ert-deftest mevedel-plan:choosing-plan-with-c-c-c-p-comes-back-to-the-mode-before ()
  "C-c C-p plan enters Plan remembering the mode; another mode leaves it."
  (mevedel-test-with-view view chat
    (switch-to-buffer view)
    (let ((session (mevedel-chat-session chat)))
      (setf (mevedel-session-permission-mode session) 'edits)
      (mevedel-view-set-permission-mode 'plan)
      (should (mevedel-plan-active-p session))
      (mevedel-plan-leave session)
      (should (eq (mevedel-permissions-session-mode session) 'edits))
      (mevedel-view-set-permission-mode 'plan)
      (mevedel-view-set-permission-mode 'full-auto)
      (should-not (mevedel-plan-active-p session))
      (should (eq (mevedel-permissions-session-mode session) 'full-auto))
      (mevedel-plan-leave session)
      (should (eq (mevedel-permissions-session-mode session) 'full-auto)))))

(ert-deftest mevedel-plan:sticky-plan-and-the-approved-plan-survive-resume ()
  (let* ((root (file-name-as-directory (make-temp-file "mevedel-plan-resume-" t)))
         (view (mevedel root))
         (chat (mevedel-view-chat view))
         (session (mevedel-chat-session chat))
         (id (mevedel-session-id session)))
    (unwind-protect
        (progn
          (setf (mevedel-session-permission-mode session) 'edits)
          ;; Entered before the session has storage: the turn's end saves it.
          (mevedel-plan-enter session)
          (should-not (mevedel-session-storage-p session))
          (mevedel-session-ensure-storage session)
          (mevedel-plan--turn-ended chat 'done)
          (mevedel-plan-save session "1. Keep it")
          (let* ((resumed (mevedel-session-list-switch root id))
                 (again (mevedel-view-chat resumed))
                 (restored (mevedel-chat-session again)))
            (setq view resumed chat again)
            (should-not (eq restored session))
            (should (mevedel-plan-active-p restored))
            (with-current-buffer resumed
              (should (string-match-p "PLAN mode" (mevedel-view--header-line))))
            ;; The next turn is stamped, so Plan's boundary applies to it.
            (let ((turn (list :id "next")))
              (mevedel-plan--stamp-turn again turn)
              (should (eq (mevedel-plan-stamp-kind (plist-get turn :plan-stamp)) 'sticky)))
            (should (equal (mevedel-plan-current restored) "1. Keep it"))
            ;; Leaving returns to the mode before Plan, and that is saved too.
            (mevedel-plan-leave restored)
            (should (eq (mevedel-permissions-session-mode restored) 'edits))
            (let* ((later (mevedel-session-list-switch root id))
                   (last (mevedel-view-chat later)))
              (setq view later chat last)
              (should-not (mevedel-plan-active-p (mevedel-chat-session last)))
              (should (equal (mevedel-plan-current (mevedel-chat-session last)) "1. Keep it")))))
      (when (buffer-live-p view) (kill-buffer view))
      (when (buffer-live-p (mevedel-chat-data-buffer chat))
        (kill-buffer (mevedel-chat-data-buffer chat)))
      (delete-directory root t))))

(ert-deftest mevedel-plan:accepted-plans-are-archived-and-forks-copy-work-files ()
  "Issue 42 item 5: accepted-TIMESTAMP.md archives; a fork copies local/."
  (let* ((root (file-name-as-directory (make-temp-file "mevedel-plan-fork-" t)))
         (view (mevedel root))
         (chat (mevedel-view-chat view))
         (session (mevedel-chat-session chat))
         (id (mevedel-session-id session)))
    (unwind-protect
        (let ((local (mevedel-session-local-directory session)))
          (mevedel-session-ensure-storage session)
          (make-directory (expand-file-name "plans" local) t)
          (make-directory (expand-file-name "notes" local) t)
          (with-temp-file (expand-file-name "notes/finding.md" local) (insert "found\n"))
          (with-temp-file (expand-file-name "plans/draft.md" local) (insert "draft\n"))
          (mevedel-plan-save session "1. Keep it\n")
          (let ((archives (directory-files (expand-file-name "plans" local) nil
                                           "\\`accepted-[0-9]\\{8\\}T[0-9]\\{6\\}Z\\.md\\'")))
            (should (= (length archives) 1))
            (should (equal (with-temp-buffer
                             (insert-file-contents (expand-file-name (car archives)
                                                                     (expand-file-name "plans" local)))
                             (buffer-string))
                           "1. Keep it\n"))
            ;; A second approval never overwrites the first archive.
            (mevedel-plan-save session "2. Then this\n")
            (should (= (length (directory-files (expand-file-name "plans" local) nil "\\`accepted-"))
                       2))
            (mevedel-save-checkpoint chat)
            (let* ((fork (mevedel-session-list-fork root id))
                   (copy (expand-file-name (concat fork "/local")
                                           (mevedel-session-sessions-directory root))))
              (should (file-exists-p (expand-file-name "notes/finding.md" copy)))
              ;; Of plans/, only the plan accepted at the fork point.
              (should-not (file-exists-p (expand-file-name "plans/draft.md" copy)))
              (should (equal (directory-files (expand-file-name "plans" copy) nil "\\`accepted-")
                             (last (directory-files (expand-file-name "plans" local)
                                                    nil "\\`accepted-"))))
              ;; The copies are independent.
              (delete-file (expand-file-name "notes/finding.md" copy))
              (should (file-exists-p (expand-file-name "notes/finding.md" local))))))
      (when (buffer-live-p view) (kill-buffer view))
      (when (buffer-live-p (mevedel-chat-data-buffer chat))
        (kill-buffer (mevedel-chat-data-buffer chat)))
      (delete-directory root t))))

(provide 'plan-test)
;;; plan-test.el ends here
