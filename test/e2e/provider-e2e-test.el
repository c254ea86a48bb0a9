;;; provider-e2e-test.el --- Provider faults against the scripted model  -*- lexical-binding: t; -*-

;;; Commentary:

;; Real gptel against the scripted model server, in both wire formats,
;; streaming and not: non-ASCII through `bin/mevedel --json', the wire
;; order of tool results and their echoed calls, broken responses as
;; errors, and retries of failed samples (counts seen by the server,
;; Retry-After, the failed attempt's text discarded, abort).  Timing is
;; only ever checked from below.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defconst provider-e2e--fast-retries
  '((setq mevedel-recovery-initial-delay 0.01 mevedel-recovery-jitter 0.0))
  "Init forms that make retries quick in headless runs.")

(defmacro provider-e2e--fast (&rest body)
  "Run BODY with quick retries."
  (declare (indent 0))
  `(let ((mevedel-recovery-initial-delay 0.01)
         (mevedel-recovery-jitter 0.0)
         (mevedel-recovery-max-retries 10))
     ,@body))

(defun provider-e2e--count (regexp string)
  "Return how often REGEXP matches in STRING."
  (let ((count 0) (start 0))
    (while (string-match regexp string start)
      (setq count (1+ count) start (match-end 0)))
    count))

(defun provider-e2e--mismatches (log)
  "Return every mismatch in the server LOG."
  (cl-loop for entry in log append (alist-get 'mismatches entry)))

;;;; Item 6: --json is UTF-8

(defconst provider-e2e--prompt "Prüfe die Größe — ✓ 日本語 🙂"
  "A prompt far from ASCII.")

(defun provider-e2e--utf8-check (wire stream env)
  "Check non-ASCII through bin/mevedel --json with WIRE, STREAM and ENV."
  (let* ((run (mevedel-e2e-headless
               :wire wire :stream stream :env env
               :files '(("größe.txt" . "Größe: 42 ✓ — 日本\n"))
               :steps '(((text . "Ich lese.")
                         (tool_calls . [((name . "Read")
                                         (arguments . ((file_path . "{{root}}größe.txt"))))]))
                        ((expect . ((results . [((contains . "Größe: 42 ✓ — 日本"))])
                                    (user_contains . "Größe — ✓ 日本語 🙂")))
                         (text . "Die Größe ist 42 ✓ — 日本語 🙂")))
               :args (list "-p" provider-e2e--prompt "--json")))
         (json (mevedel-e2e-json run))
         (call (car (alist-get 'tool_calls json))))
    (should (eql (plist-get run :status) 0))
    (should (plist-get run :stdout-valid))
    (should-not (provider-e2e--mismatches (plist-get run :log)))
    (should (equal (alist-get 'answer json) "Die Größe ist 42 ✓ — 日本語 🙂"))
    (should (equal (alist-get 'content (car (alist-get 'messages json))) provider-e2e--prompt))
    (should (string-suffix-p "größe.txt" (alist-get 'file_path (alist-get 'args call))))
    (should (string-match-p "Größe: 42 ✓ — 日本" (alist-get 'result_preview call)))))

(mevedel-e2e-deftest-matrix mevedel-e2e:json-is-utf8 "bin/mevedel --json round-trips non-ASCII as UTF-8."
    (wire stream)
  (provider-e2e--utf8-check wire stream '("LANG=C.UTF-8" "LC_ALL=C.UTF-8")))

(ert-deftest mevedel-e2e:json-is-utf8-in-the-c-locale ()
  "In the C locale the prompt is read as UTF-8 and --json still prints UTF-8."
  (provider-e2e--utf8-check 'openai t '("LANG=C" "LC_ALL=C")))

;;;; Item 7: wire order

(defconst provider-e2e--order-steps
  '(((tool_calls . [((name . "Read") (arguments . ((file_path . "{{root}}a.txt"))))
                    ((name . "Read") (arguments . ((file_path . "{{root}}b.txt"))))]))
    ((expect . ((results . [((contains . "alpha")) ((contains . "beta"))])))
     (tool_calls . [((name . "Read") (arguments . ((file_path . "{{root}}a.txt"))))
                    ((name . "Read") (arguments . ((file_path . "{{root}}a.txt"))))
                    ((name . "Read") (arguments . ((file_path . "{{root}}b.txt"))))]))
    ((expect . ((results . [((contains . "alpha")) ((contains . "alpha"))
                            ((contains . "beta"))])))
     (text . "Done.")))
  "Two calls, then three of which two are identical.")

(mevedel-e2e-deftest-matrix mevedel-e2e:results-go-back-in-call-order
    "Results and echoed calls go back in the model's order, with their own IDs."
    (wire stream)
  (let* ((run (mevedel-e2e-run :wire wire :stream stream :prompt "Read them"
                               :files '(("a.txt" . "alpha\n") ("b.txt" . "beta\n"))
                               :steps provider-e2e--order-steps))
         (log (plist-get run :log))
         (served (mevedel-e2e-served-ids log)))
    (should (eq (plist-get run :outcome) 'done))
    (should-not (provider-e2e--mismatches log))
    (should (= (length log) 3))
    (should (= (length (nth 0 served)) 2))
    (should (= (length (nth 1 served)) 3))
    (dolist (n '(1 2))
      (let ((entry (nth n log)))
        (should (equal (mevedel-e2e-result-ids entry) (nth (1- n) served)))
        (should (equal (alist-get 'echo_ids entry) (nth (1- n) served)))))
    (let ((calls (append (nth 0 served) (nth 1 served))))
      (should (equal (plist-get run :ids) calls))
      (should (= (length (delete-dups (copy-sequence calls))) 5)))))

;;;; Item 8: broken responses are errors

(defun provider-e2e--broken (wire stream fault error &rest step)
  "Run a headless turn whose response breaks with FAULT; check it fails with ERROR.
WIRE and STREAM choose the backend; STEP adds to the faulty step.  The
fault repeats; when ERROR names a transient failure it is retried
twice (three requests), otherwise never (one request).  Return the
JSON transcript."
  (let* ((transient (string-match-p "ended before it was complete" error))
         (run (mevedel-e2e-headless
               :wire wire :stream stream
               :settings (append provider-e2e--fast-retries
                                 '((setq mevedel-recovery-max-retries 2)))
               :steps `(((fault . ,fault) (times . 5) ,@step))
               :args '("-p" "Hello" "--json")))
         (json (mevedel-e2e-json run))
         (stderr (plist-get run :stderr)))
    (ert-info ((format "%s %s: %s" wire fault stderr))
      (should (eql (plist-get run :status) 1))
      (should (equal (alist-get 'outcome json) "error"))
      (should-not (alist-get 'answer json))
      (should (string-match-p error (alist-get 'error json)))
      (should (= (length (plist-get run :log)) (if transient 3 1)))
      (when transient
        (should (string-match-p "gave up after 2 retries" (alist-get 'error json)))
        (should (= (provider-e2e--count "retrying in [0-9]+ s ([12]/2)" stderr) 2)))
      (should (= (provider-e2e--count "the turn failed: " stderr) 1))
      (should-not (string-match-p "Curl failed" stderr)))
    json))

(mevedel-e2e-deftest-matrix mevedel-e2e:broken-responses-are-errors
    "A malformed body, truncated JSON and a cut stream fail the headless run."
    (wire stream)
  (if stream
      (progn
        (provider-e2e--broken wire t "malformed" "held an event that is not valid JSON")
        (provider-e2e--broken wire t "truncated_json"
                              "the stream ended before it was complete (the connection closed")
        (let ((json (provider-e2e--broken
                     wire t "close_mid_stream"
                     "the stream ended before it was complete (code 18)"
                     '(text . "The first half of an answer that goes on"))))
          (let ((reply (cl-find "assistant" (alist-get 'messages json)
                                :key (lambda (m) (alist-get 'role m)) :test #'equal)))
            (should (string-prefix-p "The first" (alist-get 'content reply)))
            (should (eq (alist-get 'incomplete reply) t))))
        (provider-e2e--broken wire t "truncated_stream"
                              "ended before it was complete.* while the model was writing a call of Read"
                              '(tool_calls . [((name . "Read")
                                               (arguments . ((file_path . "/nowhere/at/all.txt"))))])
                              '(cut_after . 3)))
    (provider-e2e--broken wire nil "malformed" "the response body is not valid JSON (HTTP 200")
    (provider-e2e--broken wire nil "truncated_json"
                          "the response body is cut off: its JSON ends early (HTTP 200")
    (provider-e2e--broken wire nil "close_mid_stream"
                          "the response ended before it was complete (code 18)")))

(dolist (wire mevedel-e2e-wires)
  (eval
   `(ert-deftest ,(intern (format "mevedel-e2e:view-marks-cut-text-incomplete-%s" wire)) ()
      ,(format "The view shows a cut stream's failure and marks its text incomplete (%s)." wire)
      (let* ((run (let ((mevedel-recovery-max-retries 0))
                    (mevedel-e2e-run :wire ',wire :stream t :prompt "Hello"
                                     :steps '(((fault . "close_mid_stream")
                                               (text . "The first half of an answer that goes on"))))))
             (transcript (plist-get run :transcript)))
        (should (eq (plist-get run :outcome) 'error))
        (should (string-match-p "The first.*\\[incomplete: the response was cut off\\]" transcript))
        (should (string-match-p
                 "Request failed: the stream ended before it was complete (code 18)"
                 transcript))))
   t))

;;;; Item 9: retries

(mevedel-e2e-deftest-matrix mevedel-e2e:transient-failures-are-retried
    "Failures that may pass are retried; the tool call is not run again and
the failed attempt's text is gone."
    (wire stream)
  (provider-e2e--fast
    (let* ((chunks nil) (retries nil)
           (run (mevedel-e2e-run
                 :wire wire :stream stream :prompt "Read a"
                 :files '(("a.txt" . "alpha\n"))
                 :setup (lambda (chat)
                          (mevedel-chat-observe
                           chat (lambda (event _chat &rest args)
                                  (pcase event
                                    ('text (push (car args) chunks))
                                    ('retry (push (car args) retries))))))
                 :steps '(((tool_calls . [((name . "Read")
                                           (arguments . ((file_path . "{{root}}a.txt"))))]))
                          ((error . ((status . 500) (message . "overloaded"))))
                          ((error . ((status . 503) (message . "unavailable"))))
                          ((error . ((status . 408) (message . "too slow"))))
                          ((fault . "reset"))
                          ((fault . "close_mid_stream") (text . "PARTIAL-ATTEMPT-TEXT and more"))
                          ((expect . ((results . [((contains . "alpha"))])))
                           (text . "All good.")))
                 :inspect (lambda (chat _view)
                            (with-current-buffer (mevedel-chat-data-buffer chat)
                              (buffer-string)))))
           (log (plist-get run :log))
           (id (car (nth 0 (mevedel-e2e-served-ids log)))))
      (should (eq (plist-get run :outcome) 'done))
      (should-not (provider-e2e--mismatches log))
      (should (= (length log) 7))
      (should (equal (mapcar (lambda (entry) (alist-get 'fault entry)) (cdr log))
                     '("http 500" "http 503" "http 408" "reset" "close_mid_stream" nil)))
      (dolist (entry (cdr log))
        (should (equal (mevedel-e2e-result-ids entry) (list id))))
      (should (equal (mapcar (lambda (retry) (plist-get retry :retry)) (reverse retries))
                     '(1 2 3 4 5)))
      (should (cl-every (lambda (retry) (= (plist-get retry :of) 10)) retries))
      (should (equal (plist-get run :ids) (list id)))
      (should (= (length (plist-get run :rows)) 1))
      (when stream
        (should (cl-some (lambda (chunk) (string-search "PARTIAL" chunk)) chunks)))
      (should-not (string-search "PARTIAL" (plist-get run :inspected)))
      (should-not (string-search "PARTIAL" (plist-get run :transcript)))
      (should (string-search "All good." (plist-get run :transcript))))))

(ert-deftest mevedel-e2e:each-sample-has-its-own-allowance ()
  "The allowance is per sample: a retry before and after a tool call both fit in one."
  (provider-e2e--fast
    (let* ((mevedel-recovery-max-retries 1)
           (run (mevedel-e2e-run
                 :wire 'anthropic :stream t :prompt "Read a"
                 :files '(("a.txt" . "alpha\n"))
                 :steps '(((error . ((status . 529) (message . "overloaded"))))
                          ((tool_calls . [((name . "Read")
                                           (arguments . ((file_path . "{{root}}a.txt"))))]))
                          ((error . ((status . 529) (message . "overloaded"))))
                          ((expect . ((results . [((contains . "alpha"))])))
                           (text . "Done."))))))
      (should (eq (plist-get run :outcome) 'done))
      (should (= (length (plist-get run :log)) 4))
      (should-not (provider-e2e--mismatches (plist-get run :log))))))

(mevedel-e2e-deftest-matrix mevedel-e2e:retry-after-is-honoured
    "A 429's Retry-After sets the least pause before the retry."
    (wire stream)
  (provider-e2e--fast
    (let* ((run (mevedel-e2e-run
                 :wire wire :stream stream :prompt "Hello"
                 :steps '(((error . ((status . 429) (message . "slow down") (retry_after . 1))))
                          ((text . "Thanks for waiting.")))))
           (log (plist-get run :log)))
      (should (eq (plist-get run :outcome) 'done))
      (should (= (length log) 2))
      (should (>= (- (alist-get 't (nth 1 log)) (alist-get 't (nth 0 log))) 1.0)))))

(ert-deftest mevedel-e2e:timeouts-are-retried ()
  "A request that times out (curl's --max-time) is sent again."
  (provider-e2e--fast
    (let* ((retries nil)
           (run (mevedel-e2e-run
                 :wire 'openai :stream t :prompt "Hello" :timeout 30
                 :setup (lambda (chat)
                          (mevedel-chat-observe chat (lambda (event _chat &rest args)
                                                       (when (eq event 'retry)
                                                         (push (car args) retries))))
                          (setf (mevedel-chat-backend chat)
				(gptel-make-openai "scripted with a timeout"
                                  :host (gptel-backend-host (mevedel-chat-backend chat))
                                  :protocol "http" :endpoint "/v1/chat/completions"
                                  :stream t :key "scripted" :models '(scripted-model)
                                  :curl-args '("--noproxy" "127.0.0.1" "--max-time" "3"))))
                 :steps '(((fault . "stall") (seconds . 10))
                          ((text . "Back in time."))))))
      (should (eq (plist-get run :outcome) 'done))
      (should (equal (mapcar (lambda (entry) (alist-get 'fault entry)) (plist-get run :log))
                     '("stall" nil)))
      (should (string-search "Back in time." (plist-get run :transcript)))
      (should (= (length retries) 1))
      (should (string-match-p "timed out (curl exit 28)" (plist-get (car retries) :message))))))

(dolist (wire mevedel-e2e-wires)
  (eval
   `(ert-deftest ,(intern (format "mevedel-e2e:headless-retries-then-gives-up-%s" wire)) ()
      ,(format "Headless retries are written on stderr; then the run fails (%s)." wire)
      (let* ((run (mevedel-e2e-headless
                   :wire ',wire :stream t
                   :settings (append provider-e2e--fast-retries
                                     '((setq mevedel-recovery-max-retries 3)))
                   :steps '(((error . ((status . 503) (message . "busy"))) (times . 9)))
                   :args '("-p" "Hello")))
             (stderr (plist-get run :stderr)))
        (should (eql (plist-get run :status) 1))
        (should (= (length (plist-get run :log)) 4))
        (dolist (n '(1 2 3))
          (should (string-match-p
                   (format "answered HTTP 503: busy; retrying in [0-9]+ s (%d/3)" n) stderr)))
        (should (string-match-p "the turn failed: .*HTTP 503: busy; gave up after 3 retries"
                                stderr))))
   t))

(ert-deftest mevedel-e2e:connection-refused-is-named-once ()
  "A refused connection is retried, then named once with what to check."
  (let* ((port (mevedel-e2e-free-port))
         (run (mevedel-e2e-headless
               :port port
               :settings (append provider-e2e--fast-retries
                                 '((setq mevedel-recovery-max-retries 1)))
               :steps '(((text . "unused")))
               :args '("-p" "Hello" "--json")))
         (json (mevedel-e2e-json run))
         (stderr (plist-get run :stderr))
         (named (format "could not connect to 127.0.0.1:%d: connection refused" port)))
    (should (eql (plist-get run :status) 1))
    (should (string-prefix-p named (alist-get 'error json)))
    (should (string-match-p "check gptel-backend and the network" (alist-get 'error json)))
    (should (string-match-p "retrying in [0-9]+ s (1/1)" stderr))
    (should (= (provider-e2e--count "the turn failed: " stderr) 1))
    (should-not (string-match-p "Curl failed" (concat stderr (alist-get 'error json))))
    (should-not (plist-get run :log))))

(ert-deftest mevedel-e2e:abort-stops-a-waiting-retry ()
  "C-c C-k in the view stops a retry that waits; the sample is not sent again."
  (let* ((mevedel-recovery-initial-delay 30)
         (shown nil)
         (run (mevedel-e2e-run
               :wire 'openai :stream t :prompt "Hello"
               :steps '(((error . ((status . 500) (message . "overloaded"))) (times . 3))
                        ((text . "unused")))
               :during (lambda (chat view)
                         (when (and (eq (mevedel-chat-status chat) 'retrying) (not shown))
                           (setq shown (with-current-buffer view (buffer-string)))
                           (with-current-buffer view
                             (call-interactively (key-binding (kbd "C-c C-k"))))))
               :inspect (lambda (chat _view)
                          (accept-process-output nil 0.3)
                          (plist-get (gptel-fsm-info (mevedel-chat-fsm chat))
                                     :mevedel-recovery)))))
    (should shown)
    (should (string-match-p "answered HTTP 500: overloaded; retrying in [0-9]+ s (1/10)" shown))
    (should (eq (plist-get run :outcome) 'abort))
    (should (= (length (plist-get run :log)) 1))
    (should-not (mevedel-recovery-waiting-p (plist-get run :inspected)))))

(provide 'provider-e2e-test)
;;; provider-e2e-test.el ends here
