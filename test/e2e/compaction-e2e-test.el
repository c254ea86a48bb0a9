;;; compaction-e2e-test.el --- Older turns summarised, by hand and on their own  -*- lexical-binding: t; -*-

;;; Commentary:

;; A session against the scripted model compacted with /compact, then
;; again on its own once the context window fills: what the next
;; requests carry, the recovery copies, and what the view keeps
;; (mevedel-compaction.el).

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)
(require 'mevedel-compaction)

(defun mevedel-compaction-test--request-text (entry)
  "Return all message text of the logged request ENTRY, joined."
  (mapconcat (lambda (m) (format "%s" (alist-get 'content m)))
             (alist-get 'messages (alist-get 'body entry)) "\n"))

(ert-deftest mevedel-compaction:replaces-older-turns-with-one-summary ()
  "/compact and automatic compaction send one summary instead of older turns.
The next request carries the summary and the recent turns; a second
compaction updates the summary instead of adding one; each keeps a
numbered recovery copy; the view still shows every turn."
  (mevedel-e2e-with-server
      (root server '(((text . "Answer one."))
                     ((text . "Answer two."))
                     ((text . "Answer three."))
                     ((expect . ((user_contains . "Conversation to summarise")))
                      (text . "SUMMARY-ONE"))
                     ((expect . ((user_contains . "fourth question")))
                      (text . "Answer four."))
                     ((expect . ((user_contains . "Earlier summary:\nSUMMARY-ONE")))
                      (text . "SUMMARY-TWO"))
                     ((expect . ((user_contains . "fifth question")))
                      (text . "Answer five."))))
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view))
           (mevedel-compaction-keep-turns 2)
           (compacted nil))
      (mevedel-e2e-attach chat server 'openai)
      (mevedel-chat-observe chat (lambda (event _chat &rest args)
                                   (when (eq event 'compacted) (push (car args) compacted))))
      (dolist (prompt '("first question" "second question" "third question"))
        (should (eq (mevedel-e2e-send-and-wait view prompt) 'done)))
      ;; By hand, with the slash command.
      (with-current-buffer view
        (goto-char (point-max))
        (insert "/compact the numbers")
        (mevedel-view-send))
      (mevedel-test-wait-until compacted 20)
      (should (equal compacted '(done)))
      (let ((summary (mevedel-compaction-test--request-text
                      (nth 3 (mevedel-scripted-model-log server)))))
        (should (string-match-p "first question" summary))
        (should (string-match-p "Keep above all: the numbers" summary))
        (should-not (string-match-p "third question" summary)))
      (should (eq (mevedel-e2e-send-and-wait view "fourth question") 'done))
      (let ((request (mevedel-compaction-test--request-text
                      (nth 4 (mevedel-scripted-model-log server)))))
        (should (string-match-p "SUMMARY-ONE" request))
        (should (string-match-p "Answer two\\." request))
        (should (string-match-p "Answer three\\." request))
        (should-not (string-match-p "first question\\|Answer one" request)))
      ;; Automatically, when the context would be too full: 15 tokens
      ;; reported plus the prompt pass 80% of a 20-token window.
      (let ((mevedel-chat-context-windows '((scripted-model . 20))))
        (should (mevedel-compaction-needed-p chat "fifth question"))
        (should (eq (mevedel-e2e-send-and-wait view "fifth question") 'done)))
      (should (equal compacted '(done done)))
      (let* ((log (mevedel-scripted-model-log server))
             (request (mevedel-compaction-test--request-text (nth 6 log))))
        (should-not (cl-some (lambda (entry) (alist-get 'mismatches entry)) log))
        (should (= (length log) 7))
        (should (string-match-p "SUMMARY-TWO" request))
        (should-not (string-match-p "SUMMARY-ONE" request))
        (should-not (string-match-p "Answer two\\." request))
        (should (string-match-p "Answer three\\." request))
        (should (string-match-p "Answer four\\." request)))
      ;; One summary in the data buffer; recovery copies; every turn in view.
      (with-current-buffer (mevedel-chat-data-buffer chat)
        (should (= 1 (how-many "<conversation-summary" (point-min) (point-max)))))
      (let ((dir (mevedel-session-directory (mevedel-chat-session chat))))
        (should (= 2 (length (directory-files dir nil "\\`compact-000[12]\\.")))))
      (let ((transcript (mevedel-e2e-transcript-text view)))
        (dolist (text '("first question" "Answer one." "Answer two." "Answer five."
                        "⟲ Earlier turns compacted"))
          (should (string-search text transcript)))))))

(provide 'compaction-e2e-test)
;;; compaction-e2e-test.el ends here
