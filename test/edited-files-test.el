;;; edited-files-test.el --- Tests for the edited-file reminder  -*- lexical-binding: t; -*-

;;; Commentary:

;; Files the model read and something else changed reach its next
;; request as one context update with their diffs; its own changes do
;; not; the reading survives a save and resume.

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defmacro edited-files-test--with-chat (var &rest body)
  "Run BODY with VAR a chat of a fresh workspace holding a.txt, edits allowed."
  (declare (indent 1))
  `(let* ((dir (file-name-as-directory (make-temp-file "edited-files" t)))
          (,var (progn (with-temp-file (expand-file-name "a.txt" dir)
                         (insert "one\ntwo\nthree\n"))
                       (mevedel-chat-get-create dir))))
     (setf (mevedel-session-permission-mode (mevedel-chat-session ,var)) 'full-auto)
     (unwind-protect (progn ,@body)
       (dolist (buffer (buffer-list))
         (when (and (buffer-file-name buffer) (string-prefix-p dir (buffer-file-name buffer)))
           (with-current-buffer buffer (set-buffer-modified-p nil))
           (kill-buffer buffer)))
       (kill-buffer (mevedel-chat-data-buffer ,var))
       (delete-directory dir t))))

(defun edited-files-test--call (chat name args)
  "Run tool NAME with ARGS as CHAT's model's call; return its result."
  (let ((box nil))
    (with-current-buffer (mevedel-chat-data-buffer chat)
      (mevedel-pipeline-run-tool (mevedel-tool-get name) args
                                 (lambda (result) (setq box (list result)))
                                 :tool-use-id (format "call-%s" (random 100000))
                                 :data-buffer (mevedel-chat-data-buffer chat)
                                 :session (mevedel-chat-session chat)))
    (mevedel-test-wait-until box 20)
    (car box)))

(defun edited-files-test--write (chat text)
  "Write TEXT to a.txt of CHAT's workspace, as another program would."
  (with-temp-file (expand-file-name "a.txt" (mevedel-chat-root chat))
    (insert text)))

(ert-deftest mevedel-edited-files:an-outside-change-is-announced-once-with-its-diff ()
  (edited-files-test--with-chat chat
    (should-not (mevedel-edited-files-update chat))
    (edited-files-test--call chat "Read" '(:file_path "a.txt"))
    (should-not (mevedel-edited-files-update chat))
    (edited-files-test--write chat "one\nTWO\nthree\n")
    (let ((blocks (mevedel-test-edited-files-update chat)))
      (should (= (length blocks) 1))
      (should (string-prefix-p "<context-update component=\"edited-files\">" (car blocks)))
      (should (string-search "a.txt was changed:\n--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three"
                             (car blocks))))
    ;; Told once.
    (should-not (mevedel-edited-files-update chat))
    ;; A deleted file is said to be gone.
    (delete-file (expand-file-name "a.txt" (mevedel-chat-root chat)))
    (should (string-search "a.txt was deleted." (car (mevedel-edited-files-update chat))))))

(ert-deftest mevedel-edited-files:the-models-own-change-is-not-announced ()
  (edited-files-test--with-chat chat
    (edited-files-test--call chat "Read" '(:file_path "a.txt"))
    (should (string-search "Updated a.txt"
                           (edited-files-test--call
                            chat "ApplyPatch"
                            '(:patch "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+2\n*** End Patch\n"))))
    (should-not (mevedel-edited-files-update chat))))

(ert-deftest mevedel-edited-files:an-unsaved-edit-in-emacs-is-announced ()
  (edited-files-test--with-chat chat
    (edited-files-test--call chat "Read" '(:file_path "a.txt"))
    (with-current-buffer (find-file-noselect (expand-file-name "a.txt" (mevedel-chat-root chat)))
      (goto-char (point-max))
      (insert "four\n"))
    (should (string-search "+four" (car (mevedel-test-edited-files-update chat))))))

;; Issue 42 item 1: one update's diffs share a budget; a file whose diff
;; does not fit is named with a pointer to Read it, not cut.
(ert-deftest mevedel-edited-files:an-update-s-diffs-share-a-budget ()
  (edited-files-test--with-chat chat
    (let ((big (expand-file-name "big.txt" (mevedel-chat-root chat))))
      (with-temp-file big
        (insert (mapconcat (lambda (n) (format "line %d\n" n)) (number-sequence 1 3000) "")))
      (edited-files-test--call chat "Read" '(:file_path "a.txt"))
      (edited-files-test--call chat "Read" '(:file_path "big.txt"))
      (with-temp-file big
        (insert (mapconcat (lambda (n) (format "LINE %d\n" n)) (number-sequence 1 3000) "")))
      (edited-files-test--write chat "one\nTWO\nthree\n")
      (let ((block (car (mevedel-test-edited-files-update chat))))
        (should (< (length block) (+ mevedel-edited-files-budget 1000)))
        (should (string-search "-two\n+TWO" block))
        (should (string-search "big.txt was changed; its diff is left out" block))
        (should (string-search "Read big.txt for its current text" block))
        (should-not (string-search "LINE 1\n" block))))))

;; Issue 42 item 1: the diffs are made off the main thread, and stop when
;; the turn waiting for them is aborted.
(ert-deftest mevedel-edited-files:a-turn-waits-for-its-diffs-and-abort-stops-them ()
  (edited-files-test--with-chat chat
    (edited-files-test--call chat "Read" '(:file_path "a.txt"))
    (edited-files-test--write chat "one\nTWO\nthree\n")
    (let* ((sent nil)
           (held (mevedel-chat--prepare-edited-files chat "go" (lambda (&optional o) (push (or o 'sent) sent)))))
      (should held)
      (should (eq (mevedel-chat-status chat) 'attaching))
      (should (mevedel-chat-abort chat))
      (should (eq (mevedel-chat-status chat) 'idle))
      (should (equal sent '(abort)))
      (should (equal (car (mevedel-chat-history chat)) "go"))
      (mevedel-test-wait-until (zerop (mevedel-core-search-running)) 10)
      ;; Prepared again, the turn goes once the diffs are in.
      (setq sent nil)
      (should (mevedel-chat--prepare-edited-files chat "go" (lambda (&optional o) (push (or o 'sent) sent))))
      (mevedel-test-wait-until sent 20)
      (should (equal sent '(sent)))
      (should (string-search "-two\n+TWO" (car (mevedel-edited-files-update chat)))))))

;; Issue 42 item 1: a request continuing after tools has its diffs
;; made before it goes: the model's call waits for them (PostToolUse).
(ert-deftest mevedel-edited-files:a-call-s-result-waits-for-the-diffs ()
  (edited-files-test--with-chat chat
    (with-temp-file (expand-file-name "b.txt" (mevedel-chat-root chat)) (insert "bee\n"))
    (edited-files-test--call chat "Read" '(:file_path "a.txt"))
    (edited-files-test--write chat "one\nTWO\nthree\n")
    (edited-files-test--call chat "Read" '(:file_path "b.txt"))
    ;; Made by the time the call settled: no job runs, the diff is in.
    (should (zerop (mevedel-core-search-running)))
    (should (stringp (nth 2 (car (gethash chat mevedel-edited-files--owed)))))
    (should (string-search "-two\n+TWO" (car (mevedel-edited-files-update chat))))))

;; Issue 42 item 1: a change the user makes while the model's own
;; command runs is told; what the command itself wrote is not.
(ert-deftest mevedel-edited-files:a-user-edit-during-the-model-s-command-is-announced ()
  (edited-files-test--with-chat chat
    (let* ((root (mevedel-chat-root chat))
           (b (expand-file-name "b.txt" root)))
      (with-temp-file b (insert "bee\n"))
      (edited-files-test--call chat "Read" '(:file_path "a.txt"))
      (edited-files-test--call chat "Read" '(:file_path "b.txt"))
      (let ((box nil))
        (with-current-buffer (mevedel-chat-data-buffer chat)
          (mevedel-pipeline-run-tool
           (mevedel-tool-get "Bash")
           '(:command "sleep 1; printf 'BEE\\n' > b.txt" :description "wait, then write b")
           (lambda (result) (setq box (list result)))
           :tool-use-id "call-bash"
           :data-buffer (mevedel-chat-data-buffer chat)
           :session (mevedel-chat-session chat)))
        ;; Meanwhile the user edits a.txt in Emacs and saves it.
        (with-current-buffer (find-file-noselect (expand-file-name "a.txt" root))
          (goto-char (point-max))
          (insert "four\n")
          (let ((inhibit-message t)) (save-buffer)))
        (mevedel-test-wait-until box 20))
      (let ((block (car (mevedel-test-edited-files-update chat))))
        (should (string-search "a.txt was changed" block))
        (should (string-search "+four" block))
        ;; The command's own write to b.txt is not announced.
        (should-not (string-search "b.txt" block))))))

(ert-deftest mevedel-edited-files:the-reading-is-saved-with-the-session ()
  (edited-files-test--with-chat chat
    (edited-files-test--call chat "Read" '(:file_path "a.txt"))
    (let ((saved (read (mevedel-save-print (mevedel-edited-files-saved chat)))))
      (edited-files-test--write chat "one\ntwo\n3\n")
      ;; A chat given the saved reading (a continued session) is told.
      (remhash chat mevedel-edited-files--read)
      (should-not (mevedel-edited-files-update chat))
      (mevedel-edited-files-restore chat saved)
      (should (string-search "+3" (car (mevedel-test-edited-files-update chat)))))))

(provide 'edited-files-test)
;;; edited-files-test.el ends here
