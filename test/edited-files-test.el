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
    (let ((blocks (mevedel-edited-files-update chat)))
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
    (should (string-search "+four" (car (mevedel-edited-files-update chat))))))

(ert-deftest mevedel-edited-files:a-huge-change-is-bounded ()
  (edited-files-test--with-chat chat
    (edited-files-test--write chat (mapconcat (lambda (n) (format "line %d\n" n)) (number-sequence 1 3000) ""))
    (edited-files-test--call chat "Read" '(:file_path "a.txt"))
    (edited-files-test--write chat (mapconcat (lambda (n) (format "LINE %d\n" n)) (number-sequence 1 3000) ""))
    (let ((block (car (mevedel-edited-files-update chat))))
      (should (< (length block) (+ mevedel-edited-files-diff-limit 1000)))
      (should (string-search "a large change" block)))))

(ert-deftest mevedel-edited-files:the-reading-is-saved-with-the-session ()
  (edited-files-test--with-chat chat
    (edited-files-test--call chat "Read" '(:file_path "a.txt"))
    (let ((saved (read (mevedel-save-print (mevedel-edited-files-saved chat)))))
      (edited-files-test--write chat "one\ntwo\n3\n")
      ;; A chat given the saved reading (a continued session) is told.
      (remhash chat mevedel-edited-files--read)
      (should-not (mevedel-edited-files-update chat))
      (mevedel-edited-files-restore chat saved)
      (should (string-search "+3" (car (mevedel-edited-files-update chat)))))))

(provide 'edited-files-test)
;;; edited-files-test.el ends here
