;;; agent-e2e-test.el --- Mailbox delivery across real turns  -*- lexical-binding: t; -*-

;;; Commentary:

;; A real session against the scripted model, with a record waiting in
;; its mailbox: a turn whose request fails leaves it unread (and takes
;; its block out of the transcript); the next successful turn delivers
;; it, once.  A failed or aborted turn never starts a background turn
;; by itself, even with a wake pending.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defmacro agent-e2e--with-chat (vars steps &rest body)
  "Run BODY with VARS (CHAT SERVER STORE) for a fresh session scripted by STEPS."
  (declare (indent 2))
  (pcase-let ((`(,chat ,server ,store) vars))
    `(mevedel-e2e-with-chat (_view ,chat ,server _root) (mevedel-e2e-write-script ,steps)
       (let ((,store (mevedel-session-store-handle (mevedel-chat-session ,chat))))
         ,@body))))

(defun agent-e2e--post (store)
  "Queue one EXECUTION record for /root in STORE; return its id."
  (mevedel-core-mailbox-post store "/root" "EXECUTION" "late-output-7\n" "x7"
                             '(("execution_id" "x7") ("description" "job")
                               ("command" "echo late-output-7") ("termination" "exit")
                               ("outcome" "success") ("exit_code" "0"))))

(defun agent-e2e--turn (chat text)
  "Send TEXT in CHAT and wait for the turn's outcome; return it."
  (let ((outcome nil))
    (mevedel-chat-send chat text :on-done (lambda (_chat result) (setq outcome result)))
    (mevedel-test-wait-until outcome 20)
    outcome))

(defun agent-e2e--data (chat)
  "Return the text of CHAT's data buffer."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (buffer-substring-no-properties (point-min) (point-max))))

(defun agent-e2e--count (regexp string)
  "Return how many times REGEXP matches in STRING."
  (let ((n 0) (start 0))
    (while (string-match regexp string start)
      (setq n (1+ n) start (match-end 0)))
    n))

(ert-deftest mevedel-e2e:mail-of-a-failed-request-stays-unread ()
  "A record carried by a failed request is unread afterwards; a success delivers it once."
  (agent-e2e--with-chat (chat server store)
      '(((error . ((status . 400) (message . "rejected"))))
        ((expect . ((user_contains . "late-output-7"))) (text . "Read it."))
        ((text . "Nothing new.")))
    (agent-e2e--post store)
    (should (eq (agent-e2e--turn chat "first") 'error))
    ;; The request failed: the record is still unread, and the
    ;; transcript no longer holds its block.
    (should (= (length (mevedel-core-mailbox-unread store "/root")) 1))
    (should-not (string-match-p "late-output-7" (agent-e2e--data chat)))
    (should (eq (agent-e2e--turn chat "second") 'done))
    (should-not (mevedel-core-mailbox-unread store "/root"))
    (should (eq (agent-e2e--turn chat "third") 'done))
    (let ((log (mevedel-scripted-model-log server)))
      (should (= (length log) 3))
      (should-not (mevedel-scripted-model-mismatches server))
      ;; The failed request carried it; the second carried it once; the
      ;; third only has it in the history, once: it was delivered once.
      (dolist (n '(0 1 2))
        (should (= 1 (agent-e2e--count
                      "<agent-message type=\\\\\"EXECUTION\\\\\" sender=\\\\\"/root\\\\\" recipient=\\\\\"/root\\\\\""
                      (json-encode (alist-get 'body (nth n log))))))))
    (should (= 1 (agent-e2e--count "<agent-message " (agent-e2e--data chat))))))

(defun agent-e2e--mark-wake (chat id)
  "Mark mailbox record ID of CHAT's session to wake it, as a completion does."
  (run-hook-with-args 'mevedel-tool-exec-settled-functions
                      (list :session (mevedel-session-id (mevedel-chat-session chat))
                            :wake t :mailbox-ids (list id))))

(ert-deftest mevedel-e2e:failed-or-aborted-turn-starts-no-background-turn ()
  "With a wake pending, neither a failed nor an aborted turn starts a background turn."
  (agent-e2e--with-chat (chat server store)
      '(((error . ((status . 400) (message . "rejected"))))
        ((text . "unused")))
    (let ((turns 0)
          (id (agent-e2e--post store)))
      (mevedel-chat-observe chat (lambda (event _chat &rest _)
                                   (when (eq event 'turn-start) (cl-incf turns))))
      ;; A completion arrives while the turn runs; the request fails.
      (let ((outcome nil))
        (mevedel-chat-send chat "first" :on-done (lambda (_chat result) (setq outcome result)))
        (agent-e2e--mark-wake chat id)
        (mevedel-test-wait-until outcome 20)
        (should (eq outcome 'error)))
      (accept-process-output nil 1)
      (should (= turns 1))
      ;; Aborted before the backend answered, likewise.
      (mevedel-chat-send chat "second")
      (agent-e2e--mark-wake chat id)
      (should (mevedel-chat-abort chat))
      (accept-process-output nil 1)
      (should (= turns 2))
      (should-not (mevedel-chat-busy-p chat))
      (should (= (length (mevedel-core-mailbox-unread store "/root")) 1))
      (should-not (string-match-p "late-output-7" (agent-e2e--data chat)))
      ;; The aborted request may have reached the server (the client
      ;; sends at once); no request came after it.
      (should (<= (length (mevedel-scripted-model-log server)) 2)))))

(provide 'agent-e2e-test)
;;; agent-e2e-test.el ends here
