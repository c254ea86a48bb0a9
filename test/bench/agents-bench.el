;;; agents-bench.el --- Child agents: mail, dispatch, ten streaming at once  -*- lexical-binding: t; -*-

;;; Commentary:

;; Three figures of the retained agent runtime, each through the
;; product's entry points:
;;
;; - mailbox-append-deliver: SendMessage's path to a running agent
;;   (`mevedel-agent-send': the durable, acknowledged append and its
;;   arrival) plus the drain before the recipient's next sample, as the
;;   gptel adapter runs it (`mevedel-gptel-continuation-functions':
;;   unread, formatted; then `mevedel-gptel-continued-functions': the
;;   recipient's conversation save queued, the record marked delivered
;;   after it by the writer thread), per record;
;; - agent-spawn-to-dispatch: from the Agent call (`mevedel-agent-spawn')
;;   to the child's request arriving at the scripted model server, which
;;   answers at once;
;; - agents-10-timer-lag-p99: ten children streaming long answers from
;;   the scripted server at once; how late a 10 ms Emacs timer runs.

;;; Code:

(require 'mevedel-bench-lib)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)
(require 'mevedel-agent)
(require 'mevedel-scripted-model)
(require 'json)

(defun agents-bench--script (conversations)
  "Write a scripted-model script of CONVERSATIONS ((MATCH . STEPS) ...)."
  (let ((file (make-temp-file "agents-bench-" nil ".json")))
    (with-temp-file file
      (insert (json-encode
               `((conversations
                  . ,(vconcat (mapcar (lambda (c)
                                        `(,@(and (car c) `((match . ,(car c))))
                                          (steps . ,(vconcat (cdr c)))
                                          (repeat . t)))
                                      conversations)))))))
    file))

(defun agents-bench--idle-p (chat)
  "Return non-nil when every agent of CHAT's session is idle."
  (cl-every (lambda (agent) (eq (plist-get agent :status) 'idle)) (mevedel-agent-list chat)))

(defun agents-bench--session (conversations body)
  "Call BODY with a root chat and a server replaying CONVERSATIONS."
  (let* ((root (file-name-as-directory (make-temp-file "agents-bench-ws-" t)))
         (script (agents-bench--script conversations))
         (server (mevedel-scripted-model-start script :delay 0.002))
         (chat (mevedel-chat-get-create root))
         (gptel-stream t))
    (setf (mevedel-chat-backend chat) (mevedel-scripted-model-backend server)
          (mevedel-chat-model chat) 'scripted-model)
    (unwind-protect (funcall body chat server)
      (mevedel-scripted-model-stop server)
      (kill-buffer (mevedel-chat-data-buffer chat))
      (delete-file script)
      (delete-directory root t))))

;;;; Mail

(agents-bench--session
 '(("retained agent /root/" ((text . "working") (sleep . 600))) (nil ((text . "root"))))
 (lambda (chat _server)
   (let* ((sender (mevedel-agent-spawn chat '(:task_name "sender" :message "send")))
          (recipient (mevedel-agent-spawn chat '(:task_name "recipient" :message "receive")))
          (sender-chat (mevedel-chat-of-buffer (mevedel-agent-conversation chat sender)))
          (n 500))
     (let* ((recipient-chat (mevedel-chat-of-buffer (mevedel-agent-conversation chat recipient)))
            (message (make-string 400 ?m))
            (per (mevedel-bench-median-per-call
                  5 n (lambda ()
                        (mevedel-agent-send sender-chat recipient message)
                        (mevedel-test-drain-mail recipient-chat)))))
       (mevedel-bench-describe "SendMessage of a 400-character message from one running child to another (durable SQLite append in WAL mode, acknowledged), then the recipient's drain before its next sample (unread query, <agent-message> block, the recipient's conversation save queued, the records held and marked delivered by its writer thread after that save); median of 5 rounds of %d records" n)
       (mevedel-bench-report "mailbox-append-deliver" (* 1e6 per) "us"))
     (mevedel-agent-interrupt chat sender)
     (mevedel-agent-interrupt chat recipient))))

;;;; Spawn to dispatch

(agents-bench--session
 '(("retained agent /root/" ((text . "ok"))) (nil ((text . "root"))))
 (lambda (chat server)
   (let ((samples nil) (returned nil))
     (dotimes (i 21)
       (let* ((start (float-time))
              (path (mevedel-agent-spawn chat (list :task_name (format "dispatch %d" i)
                                                    :message "Answer ok."))))
         (push (* 1000 (- (float-time) start)) returned)
         (mevedel-test-wait-until (agents-bench--idle-p chat) 60)
         (let ((entry (cl-find-if (lambda (e)
                                    (string-match-p (regexp-quote (concat "agent " path ","))
                                                    (json-encode (alist-get 'body e))))
                                  (mevedel-scripted-model-log server))))
           ;; The first spawn warms caches up and is not counted.
           (when (> i 0)
             (push (* 1000 (- (alist-get 't entry) start)) samples)))))
     (mevedel-bench-describe "Agent call (mevedel-agent-spawn, default role, context none) until the child's request reaches the scripted model server on loopback (curl started, request sent), 20 spawns one after the other, median; the call itself returns in %.2f ms (median), having also made the child's transcript store and saved the registry after the dispatch"
                             (mevedel-bench-percentile returned 50))
     (mevedel-bench-report "agent-spawn-to-dispatch" (mevedel-bench-percentile samples 50) "ms"))))

;;;; Ten children streaming

(agents-bench--session
 `(("retained agent /root/" ((text . ,(mapconcat (lambda (n) (format "Finding %d: line %d of the report." n n))
                                                  (number-sequence 1 400) " "))))
   (nil ((text . "root"))))
 (lambda (chat _server)
   (dotimes (i 10)
     (mevedel-agent-spawn chat (list :task_name (format "streamer %d" i) :message "Report.")))
   (let* ((lags (mevedel-bench-timer-lags
                 6 (lambda () (accept-process-output nil 0.005))))
          (done (agents-bench--idle-p chat)))
     (mevedel-bench-describe "10 children streaming at once from the scripted model (each a 14 kB answer in ~1200 SSE chunks, 2 ms apart), a 10 ms repeating timer for 6 s: p99 of how late it ran (%d samples%s)"
                             (length lags) (if done ", all children settled" ", children still streaming at the end"))
     (mevedel-bench-report "agents-10-timer-lag-p99" (mevedel-bench-percentile lags 99) "ms"))))

;;; agents-bench.el ends here
