;;; usage-e2e-test.el --- Usage and cost of real turns, end to end  -*- lexical-binding: t; -*-

;;; Commentary:

;; Turns against the scripted model, which reports usage as each
;; provider does (cache reads and writes simulated, reasoning tokens on
;; OpenAI when a step asks): every request is one usage record with
;; exactly the counts the server answered, the model and the agent; the
;; view's header shows the turn's cost and cache share, /usage the
;; session's table, and headless `bin/mevedel --json' each request and
;; the sums, `--list-sessions' each session's cost.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)
(require 'mevedel-usage)

(defconst usage-e2e--prices
  '(("scripted-model" :input 3.0 :output 15.0 :cache-read 0.3 :cache-write 3.75))
  "What the scripted model costs in these tests, dollars per million tokens.")

(defconst usage-e2e--files
  (mevedel-e2e-numbered-files 3 60 "line %d of file %d")
  "Files large enough for the server to cache the requests that read them.")

(defun usage-e2e--steps (wire)
  "Return a script of three Read calls and an answer.
On OpenAI the first answer reports 40 reasoning tokens."
  (append (cl-loop for n below 3
                   collect `(,@(and (eq wire 'openai) (zerop n) '((reasoning_tokens . 40)))
                             ,(mevedel-e2e-read-call n)))
          '(((text . "Read them all.")))))

(defun usage-e2e--reported (request)
  "Return the usage plist the server answered REQUEST with, in mevedel's terms."
  (let ((usage (alist-get 'usage request)))
    (if (equal (alist-get 'wire request) "openai")
        (let ((cached (alist-get 'cached_tokens (alist-get 'prompt_tokens_details usage))))
          (list :input (- (alist-get 'prompt_tokens usage) cached)
                :output (alist-get 'completion_tokens usage)
                :cache-read cached :cache-write nil
                :reasoning (alist-get 'reasoning_tokens
                                      (alist-get 'completion_tokens_details usage))))
      (list :input (alist-get 'input_tokens usage) :output 5
            :cache-read (alist-get 'cache_read_input_tokens usage)
            :cache-write (alist-get 'cache_creation_input_tokens usage)
            :reasoning nil))))

(defun usage-e2e--cost (usages)
  "Return what USAGES cost at `usage-e2e--prices', computed here."
  (cl-loop for usage in usages
           sum (/ (+ (* 3.0 (plist-get usage :input)) (* 15.0 (plist-get usage :output))
                     (* 0.3 (plist-get usage :cache-read))
                     (* 3.75 (or (plist-get usage :cache-write) 0)))
                  1e6)))

(defun usage-e2e--grouped (n)
  "Return N with a comma before each group of three digits, or \"?\" for nil."
  (if n
      (let ((digits (number-to-string n)) (out ""))
        (while (> (length digits) 3)
          (setq out (concat "," (substring digits -3) out)
                digits (substring digits 0 -3)))
        (concat digits out))
    "?"))

(defun usage-e2e--sum (usages key)
  "Return the sum of KEY over USAGES, nil when none has it."
  (let ((counts (delq nil (mapcar (lambda (usage) (plist-get usage key)) usages))))
    (and counts (apply #'+ counts))))

(mevedel-e2e-deftest-matrix usage-e2e:each-request-is-a-record-shown-in-the-header-and-usage
  "Four requests, four records with the server's counts; header and /usage show their cost."
  (wire stream)
  (let* ((mevedel-model-prices usage-e2e--prices)
         (run (mevedel-e2e-run
               :wire wire :stream stream :files usage-e2e--files
               :prompt "Read the files." :steps (usage-e2e--steps wire)
               :inspect (lambda (chat view)
                          (with-current-buffer view
                            (goto-char (point-max))
                            (insert "/usage")
                            (mevedel-view-send))
                          (let ((table (get-buffer (format "*mevedel usage: %s*"
                                                           (mevedel-chat-name chat)))))
                            (prog1 (list :records (reverse (mevedel-usage-records chat))
                                         :header (with-current-buffer view
                                                   (mevedel-view--usage-text chat))
                                         :table (and table (with-current-buffer table
                                                             (buffer-string))))
                              (when table (kill-buffer table)))))))
         (inspected (plist-get run :inspected))
         (records (plist-get inspected :records))
         (reported (mapcar #'usage-e2e--reported (plist-get run :requests)))
         (cost (usage-e2e--cost reported)))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length reported) 4))
    ;; Exactly what the provider reported, request by request.
    (should (equal (mapcar (lambda (record) (plist-get record :usage)) records) reported))
    (dolist (record records)
      (should (equal (plist-get record :model) "scripted-model"))
      (should (equal (plist-get record :agent) "/root"))
      (should (stringp (plist-get record :provider))))
    (should (= (length (delete-dups (mapcar (lambda (r) (plist-get r :turn)) records))) 1))
    (should (< (abs (- (mevedel-usage-records-cost records) cost)) 1e-12))
    (when (eq wire 'openai)
      (should (equal (plist-get (nth 0 reported) :reasoning) 40)))
    ;; The cache served most of the later requests.
    (should (> (usage-e2e--sum reported :cache-read) 0))
    ;; The header: the turn's cost and the share of its input read from the cache.
    (let* ((read (usage-e2e--sum reported :cache-read))
           (input (+ (usage-e2e--sum reported :input) read
                     (or (usage-e2e--sum reported :cache-write) 0))))
      (should (string-search (format " · turn $%.4f, %d%% cached · session $%.4f, %s in / %s out"
                                     cost (round (* 100.0 (/ (float read) input))) cost
                                     (mevedel-view--tokens input)
                                     (mevedel-view--tokens (usage-e2e--sum reported :output)))
                             (plist-get inspected :header))))
    ;; /usage: a row per model and per agent, and the totals.
    (let ((table (plist-get inspected :table))
          (cells (list "4" (usage-e2e--grouped (usage-e2e--sum reported :input))
                       (usage-e2e--grouped (usage-e2e--sum reported :output))
                       (usage-e2e--grouped (usage-e2e--sum reported :cache-read))
                       (usage-e2e--grouped (usage-e2e--sum reported :cache-write))
                       (if (eq wire 'openai) "40" "?")
                       (format "$%.4f" cost))))
      (should (stringp table))
      (should (string-search (format "checked %s" mevedel-model-prices-checked) table))
      (dolist (name '("scripted-model" "/root" "Total"))
        (should (string-match-p
                 (concat "^" (regexp-quote name) " +"
                         (mapconcat #'regexp-quote cells " +")
                         "$")
                 table))))))

(defun usage-e2e--headless (wire stream)
  "Run two headless turns of WIRE (streaming when STREAM), then list the sessions.
Return (FIRST SECOND LISTED LISTED-JSON REQUESTS): the two --json
transcripts, --list-sessions as text and as JSON, and the server's
requests."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace usage-e2e--files))
         (script (mevedel-e2e-write-script
                  (append (usage-e2e--steps wire) '(((text . "Again."))))))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) wire stream
                                            `((setq mevedel-model-prices
                                                    ',usage-e2e--prices))))
         (process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                       invocation-directory))
                                    process-environment)))
    (unwind-protect
        (cl-flet ((run (&rest args)
                    (with-temp-buffer
                      (let ((status (apply #'call-process
                                           (expand-file-name "bin/mevedel" mevedel-test-root)
                                           nil (list t nil) nil "--config" init "--dir" root args)))
                        (unless (zerop status)
                          (ert-fail (format "bin/mevedel %S failed: %s %S" args (buffer-string)
                                            (mevedel-scripted-model-mismatches server))))
                        (buffer-string)))))
          (let ((first (run "-p" "Read the files." "--json"))
                (second (run "--continue" "-p" "Again." "--json")))
            (list (json-parse-string first :object-type 'alist :array-type 'list
                                     :null-object nil :false-object :false)
                  (json-parse-string second :object-type 'alist :array-type 'list
                                     :null-object nil :false-object :false)
                  (run "--list-sessions")
                  (json-parse-string (run "--list-sessions" "--json") :object-type 'alist
                                     :array-type 'list :null-object nil)
                  (mevedel-e2e-requests server))))
      (mevedel-scripted-model-stop server)
      (dolist (file (list script init)) (delete-file file))
      (delete-directory root t))))

(defun usage-e2e--json-usage (usage)
  "Return the usage plist USAGE (mevedel's terms) as the --json names it."
  `((input_tokens . ,(plist-get usage :input))
    (cache_read_tokens . ,(plist-get usage :cache-read))
    (cache_write_tokens . ,(plist-get usage :cache-write))
    (output_tokens . ,(plist-get usage :output))
    (reasoning_tokens . ,(plist-get usage :reasoning))))

(defun usage-e2e--json-sums (usages)
  "Return the sums of USAGES as the --json names them, cost left out."
  (usage-e2e--json-usage
   (cl-loop for key in '(:input :cache-read :cache-write :output :reasoning)
            append (list key (usage-e2e--sum usages key)))))

(mevedel-e2e-deftest-matrix usage-e2e:headless-json-carries-each-request-and-the-sums
  "--json has each request of the run's turn as reported, the turn's and session's sums.
--list-sessions shows the session's cost."
  (wire stream)
  (pcase-let* ((`(,first ,second ,listed ,listed-json ,requests) (usage-e2e--headless wire stream))
               (reported (mapcar #'usage-e2e--reported requests))
               (cost (usage-e2e--cost reported)))
    (should (= (length reported) 5))
    (let* ((usage (alist-get 'usage first))
           (entries (alist-get 'requests usage)))
      (should (= (length entries) 4))
      (cl-loop for entry in entries
               for expected in (seq-take reported 4)
               do (should (equal (cl-loop for (key . _) in (usage-e2e--json-usage expected)
                                          collect (assq key entry))
                                 (usage-e2e--json-usage expected)))
               (should (equal (alist-get 'model entry) "scripted-model"))
               (should (equal (alist-get 'agent entry) "/root"))
               (should (< (abs (- (alist-get 'cost_usd entry) (usage-e2e--cost (list expected))))
                          1e-12)))
      (dolist (sums (list usage (alist-get 'turn usage)))
        (should (equal (cl-loop for (key . _) in (usage-e2e--json-sums (seq-take reported 4))
                                collect (assq key sums))
                       (usage-e2e--json-sums (seq-take reported 4))))
        (should (eq (alist-get 'cost_complete sums) t))
        (should (< (abs (- (alist-get 'cost_usd sums) (usage-e2e--cost (seq-take reported 4))))
                   1e-12))))
    ;; The continued run: its own turn, the session's sums of both.
    (let ((usage (alist-get 'usage second)))
      (should (= (length (alist-get 'requests usage)) 1))
      (should (equal (cl-loop for (key . _) in (usage-e2e--json-sums reported)
                              collect (assq key usage))
                     (usage-e2e--json-sums reported)))
      (should (< (abs (- (alist-get 'cost_usd usage) cost)) 1e-12))
      (should (< (abs (- (alist-get 'cost_usd (alist-get 'turn usage))
                         (usage-e2e--cost (last reported))))
                 1e-12)))
    (should (string-match-p (format "  2 turns  +%s  Read the files\\.$"
                                    (regexp-quote (format "$%.4f" cost)))
                            listed))
    (should (< (abs (- (alist-get 'cost_usd (alist-get 'usage (car listed-json))) cost)) 1e-12))))

(ert-deftest usage-e2e:a-child-agent-s-requests-are-its-own-and-in-the-root-turn ()
  "A child's requests are recorded with its path, count in the root's turn and are saved.
The records reach the session's store, the root's, not the child's."
  (mevedel-e2e-require-python)
  (let* ((mevedel-model-prices usage-e2e--prices)
         (root (mevedel-e2e-workspace '(("a.txt" . "a\n"))))
         (script (mevedel-e2e-write-conversations
                  '(("retained agent /root/alpha" ((text . "alpha report")))
                    (nil
                     ((tool_calls . [((name . "Agent")
                                      (arguments . ((task_name . "Alpha")
                                                    (message . "Investigate alpha"))))]))
                     ((tool_calls . [((name . "WaitAgent") (arguments . ((timeout_ms . 20000))))]))
                     ((text . "Root done."))
                     ((text . "Noted.") (times . 50))))))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
         (gptel-stream t)
         (view (mevedel root))
         (chat (mevedel-view-chat view))
         (outcome nil))
    (unwind-protect
        (progn
          (setf (mevedel-chat-backend chat) (mevedel-scripted-model-backend server :wire 'anthropic)
                (mevedel-chat-model chat) 'scripted-model)
          (mevedel-chat-send chat "Delegate alpha." :on-done (lambda (_chat result)
                                                              (setq outcome result)))
          (mevedel-test-wait-until outcome 30)
          (should (eq outcome 'done))
          (mevedel-test-wait-until (cl-find "/root/alpha" (mevedel-usage-records chat)
                                            :key (lambda (record) (plist-get record :agent))
                                            :test #'equal)
                                   20)
          (let* ((records (reverse (mevedel-usage-records chat)))
                 (turn (plist-get (car (last (mevedel-chat-turns chat))) :id))
                 (alpha (cl-remove "/root/alpha" records :key (lambda (r) (plist-get r :agent))
                                   :test-not #'equal))
                 (requests (mevedel-e2e-requests server))
                 (alpha-requests (cl-remove-if-not
                                  (lambda (request)
                                    (string-search "retained agent /root/alpha"
                                                   (alist-get 'raw request)))
                                  requests)))
            (should-not (mevedel-scripted-model-mismatches server))
            (should (= (length alpha) (length alpha-requests) 1))
            (should (equal (plist-get (car alpha) :usage)
                           (usage-e2e--reported (car alpha-requests))))
            (should (equal (plist-get (car alpha) :model) "scripted-model"))
            (should-not (equal (plist-get (car alpha) :turn) turn))
            (should (equal (plist-get (car alpha) :root-turn) turn))
            ;; The root's first turn: its own three requests and the child's.
            (should (= (length (mevedel-usage-turn-records chat turn)) 4))
            (should (equal (plist-get (mevedel-usage-agent chat "/root/alpha") :output) 5))
            ;; Saved in the session's store with the root turn's records.
            (let* ((info (mevedel-core-store-info-get
                          (mevedel-session-store (mevedel-chat-session chat))))
                   (saved (mevedel-usage-read info)))
              (should (member (car alpha) saved))
              ;; Under a key of the root's turn, by itself.
              (should (cl-some (lambda (entry)
                                 (and (string-prefix-p (concat "usage-records " turn " ")
                                                       (car entry))
                                      (equal (car (read-from-string (cdr entry)))
                                             (list (car alpha)))))
                               info)))))
      (mevedel-scripted-model-stop server)
      (kill-buffer view)
      (when (buffer-live-p (mevedel-chat-data-buffer chat))
        (kill-buffer (mevedel-chat-data-buffer chat)))
      (delete-file script)
      (delete-directory root t))))

(ert-deftest usage-e2e:usage-in-a-fresh-emacs-from-the-autoloads ()
  "In an `emacs -Q' with only the package's autoloads: M-x mevedel, a turn, then /usage."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace usage-e2e--files))
         (script (mevedel-e2e-write-script (usage-e2e--steps 'anthropic)))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) 'anthropic t
                                            `((setq mevedel-model-prices
                                                    ',usage-e2e--prices)))))
    (unwind-protect
        (pcase-let* ((`(,status . ,output)
                      (mevedel-test-run-emacs
                       `(progn
                          (load ,(mevedel-e2e-autoloads) nil t)
                          (load ,init nil t)
                          (let ((default-directory ,(file-name-as-directory root)))
                            (call-interactively #'mevedel))
                          (cl-flet ((type (text)
                                      (goto-char (point-max))
                                      (insert text)
                                      (call-interactively (key-binding (kbd "C-c C-c")))))
                            (type "Read the files.")
                            (let ((chat (mevedel-view-chat))
                                  (deadline (+ (float-time) 60)))
                              (while (and (mevedel-chat-busy-p chat) (< (float-time) deadline))
                                (accept-process-output nil 0.05))
                              (type "/usage")
                              (princ (with-current-buffer
                                         (format "*mevedel usage: %s*" (mevedel-chat-name chat))
                                       (buffer-string)))
                              (kill-emacs 0))))))
                     (reported (mapcar #'usage-e2e--reported (mevedel-e2e-requests server))))
          (should (equal status 0))
          (should (= (length reported) 4))
          (should (string-match-p
                   (concat "^scripted-model +4 +"
                           (regexp-quote (usage-e2e--grouped (usage-e2e--sum reported :input)))
                           " +20 +"
                           (regexp-quote (usage-e2e--grouped (usage-e2e--sum reported :cache-read)))
                           " +"
                           (regexp-quote (usage-e2e--grouped (usage-e2e--sum reported :cache-write)))
                           " +\\? +"
                           (regexp-quote (format "$%.4f" (usage-e2e--cost reported)))
                           "$")
                   output))
          (should (string-match-p "^/root +4 " output)))
      (mevedel-scripted-model-stop server)
      (dolist (file (list script init)) (delete-file file))
      (delete-directory root t))))

(provide 'usage-e2e-test)
;;; usage-e2e-test.el ends here
