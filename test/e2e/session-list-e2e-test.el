;;; session-list-e2e-test.el --- Saved sessions: new, fork, rename, delete  -*- lexical-binding: t; -*-

;;; Commentary:

;; The saved sessions of a workspace managed through the real path
;; (mevedel-session-list.el): a fresh session, resuming, a fork up to
;; a turn, renaming and deleting, against the scripted model.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)
(require 'mevedel-session-list)

;;;; New, fork, rename, delete

(ert-deftest mevedel-session-list:new-fork-rename-delete ()
  "Sessions can be started afresh, resumed, forked, renamed and deleted."
  (mevedel-e2e-with-server (root server mevedel-e2e-two-turns)
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view))
           (first (mevedel-session-id (mevedel-chat-session chat))))
      (mevedel-e2e-attach chat server 'openai)
      (should (eq (mevedel-e2e-send-and-wait view "What is the answer?") 'done))
      (should (eq (mevedel-e2e-send-and-wait view "And the file?") 'done))
      ;; /new: a fresh session; the first stays saved.
      (with-current-buffer view
        (goto-char (point-max))
        (insert "/new")
        (mevedel-view-send))
      (should-not (buffer-live-p view))
      (let ((fresh (mevedel-chat-get root)))
        (should-not (equal (mevedel-session-id (mevedel-chat-session fresh)) first))
        (should (= 0 (buffer-size (mevedel-chat-data-buffer fresh))))
        (should (equal (mapcar #'car (mevedel-session-saved root)) (list first))))
      ;; /clear does the same in the same view buffer.
      (let* ((before (mevedel-chat-get root))
             (view (mevedel-view-buffer before)))
        (with-current-buffer view
          (goto-char (point-max))
          (insert "/clear")
          (mevedel-view-send))
        (should (buffer-live-p view))
        (should-not (eq (mevedel-view-chat view) before))
        (should (eq (mevedel-view-chat view) (mevedel-chat-get root)))
        (should-not (equal (mevedel-session-id (mevedel-chat-session (mevedel-chat-get root)))
                           (mevedel-session-id (mevedel-chat-session before))))
        (should (string-empty-p (with-current-buffer view (mevedel-view--composer-text)))))
      ;; Fork the first session before its second turn.
      (let ((fork (mevedel-session-list-fork root first 1)))
        (should (equal (sort (mapcar #'car (mevedel-session-saved root)) #'string<)
                       (sort (list first fork) #'string<)))
        (let ((view (mevedel-session-list-switch root fork)))
          (with-current-buffer (mevedel-chat-data-buffer (mevedel-view-chat view))
            (should (string-match-p "It is 42" (buffer-string)))
            (should-not (string-match-p "And the file" (buffer-string))))
          (should (equal (length (mevedel-chat-turns (mevedel-view-chat view))) 1)))
        ;; Rename it; the list shows the new title.
        (mevedel-session-list-rename root fork "Only the answer")
        (should (equal (cdr (assoc "title" (cdr (assoc fork (mevedel-session-saved root)))))
                       "Only the answer"))
        (with-current-buffer (mevedel-sessions root)
          (should (string-match-p "Only the answer" (buffer-string)))
          (should (string-match-p "What is the answer" (buffer-string)))
          (kill-buffer))
        ;; The live session cannot be deleted; the other one can.
        (should-error (mevedel-session-list-delete root fork) :type 'user-error)
        (mevedel-session-list-switch root first)
        (with-current-buffer (mevedel-chat-data-buffer (mevedel-chat-get root))
          (should (string-match-p "notes.txt holds it" (buffer-string))))
        (mevedel-session-list-delete root fork)
        (should (equal (mapcar #'car (mevedel-session-saved root)) (list first)))))))

(provide 'session-list-e2e-test)
;;; session-list-e2e-test.el ends here
