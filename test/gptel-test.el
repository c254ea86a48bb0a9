;;; gptel-test.el --- The gptel adapter: JSON null, tools, dispatch through real gptel  -*- lexical-binding: t; -*-

;;; Commentary:

;; Canned provider responses (no network) go through gptel's own
;; OpenAI and Anthropic parsers, streaming and not, and then through
;; `gptel--handle-tool-use' into a registered mevedel tool.  The
;; arguments mevedel receives must encode back to exactly the JSON the
;; provider sent: JSON null, false, empty object and empty array all
;; kept apart.  A control run without the bridge shows the loss the
;; bridge prevents.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-repair)
(require 'mevedel-gptel)
(require 'gptel-request)
(require 'gptel-openai)
(require 'gptel-anthropic)

(defconst mevedel-gptel-test--args
  "{\"n\":null,\"f\":false,\"o\":{},\"a\":[],\"nested\":{\"x\":null,\"y\":[{}],\"z\":false},\"s\":\"text\"}"
  "Tool-call arguments as the provider sends them.")

(defun mevedel-gptel-test--tool ()
  "Register and return the probe tool whose arguments cover every case."
  (mevedel-tool-register
   "Probe"
   (list :description "Probe argument decoding." :function (lambda (_) "ran")
         :category "mevedel-gptel-test"
         :read-only-p t
         :args '((n string :optional "Maybe null.")
                 (f boolean :optional "False.")
                 (o object :optional "Empty object.")
                 (a array :optional "Empty array." :items string)
                 (nested object :optional "Nested."
                         :properties (x string y (:type array :items object) z boolean))
                 (s string :required "Text.")))))

(defun mevedel-gptel-test--info (backend tool)
  "Return a fresh request INFO plist for BACKEND offering TOOL."
  (list :backend backend :model 'test-model :data (list :messages [])
        :buffer (current-buffer) :callback #'ignore
        :tools (list (mevedel-tool-gptel-tool tool))))

(defun mevedel-gptel-test--fsm (info)
  "Return a request state machine over INFO that can never send anything.
It has no transition table and no handlers, so finishing the tool calls
moves it to state nil and stops there."
  (gptel-make-fsm :state 'TOOL :table nil :handlers nil :info info))

(defun mevedel-gptel-test--run-tools (info)
  "Run the tool calls gptel captured in INFO; return the JSON mevedel got."
  (let ((captured nil))
    (cl-letf (((symbol-function 'mevedel-pipeline-run-tool)
               (lambda (_tool args callback &rest _)
                 (push (mevedel-tool-repair-json-encode args) captured)
                 (funcall callback "ok"))))
      (gptel--handle-tool-use (mevedel-gptel-test--fsm info)))
    captured))

(defun mevedel-gptel-test--sse (events)
  "Return an SSE stream of EVENTS, each (NAME . PLIST) or a PLIST."
  (mapconcat (lambda (e)
               (if (stringp (car-safe e))
                   (format "event: %s\ndata: %s\n\n" (car e) (json-serialize (cdr e)))
                 (format "data: %s\n\n" (if (stringp e) e (json-serialize e)))))
             events ""))

(defun mevedel-gptel-test--parts (string)
  "Split STRING into three chunks, as a streaming provider would."
  (let ((third (/ (length string) 3)))
    (list (substring string 0 third) (substring string third (* 2 third))
          (substring string (* 2 third)))))

;;;; OpenAI

(defun mevedel-gptel-test--openai ()
  "Return an OpenAI Chat Completions backend.
gptel picks its Responses API backend for api.openai.com, so the test
backend names another host, as OpenAI-compatible servers do."
  (gptel-make-openai "mevedel-test-openai" :key "k" :host "localhost:1" :protocol "http"
                     :models '(test-model)))

(defun mevedel-gptel-test--openai-nonstream (tool)
  "Parse a canned non-streaming OpenAI response for TOOL; return captured JSON."
  (let* ((backend (mevedel-gptel-test--openai))
         (info (mevedel-gptel-test--info backend tool))
         (body (json-serialize
                `(:id "chatcmpl-1" :object "chat.completion" :model "test-model"
                      :choices [(:index 0 :finish_reason "tool_calls"
                                        :message (:role "assistant" :content :null
                                                        :tool_calls [(:id "call_1" :type "function"
                                                                          :function (:name "Probe" :arguments ,mevedel-gptel-test--args))]))]
                      :usage (:prompt_tokens 1 :completion_tokens 1 :total_tokens 2)))))
    (with-temp-buffer
      (insert body)
      (goto-char (point-min))
      (gptel--parse-response backend (gptel--json-read) info))
    (mevedel-gptel-test--run-tools info)))

(ert-deftest mevedel-gptel:openai-nonstreaming-round-trip ()
  (let ((tool (mevedel-gptel-test--tool)))
    (should (equal (mevedel-gptel-test--openai-nonstream tool)
                   (list mevedel-gptel-test--args)))))

(ert-deftest mevedel-gptel:without-the-bridge-null-and-empty-object-are-lost ()
  (let ((tool (mevedel-gptel-test--tool)))
    (unwind-protect
        (progn
          (advice-remove 'json-parse-string #'mevedel-gptel--json-parse-string)
          (advice-remove 'gptel--handle-tool-use #'mevedel-gptel--handle-tool-use)
          (let ((got (car (mevedel-gptel-test--openai-nonstream tool))))
            (should-not (equal got mevedel-gptel-test--args))
            ;; null and {} both became nil, that is "absent".
            (should-not (string-match-p "\"n\"" got))
            (should-not (string-match-p "\"o\"" got))))
      (advice-add 'json-parse-string :around #'mevedel-gptel--json-parse-string)
      (advice-add 'gptel--handle-tool-use :around #'mevedel-gptel--handle-tool-use))))

(ert-deftest mevedel-gptel:openai-streaming-round-trip ()
  (let* ((tool (mevedel-gptel-test--tool))
         (backend (mevedel-gptel-test--openai))
         (info (mevedel-gptel-test--info backend tool))
         (chunk (lambda (delta &optional finish)
                  `(:id "c" :object "chat.completion.chunk"
                        :choices [(:index 0 :delta ,delta :finish_reason ,(or finish :null))]))))
    (with-temp-buffer
      (insert (mevedel-gptel-test--sse
               (append
                (list (funcall chunk '(:role "assistant" :content :null
                                             :tool_calls [(:index 0 :id "call_1" :type "function"
                                                                  :function (:name "Probe" :arguments ""))])))
                (mapcar (lambda (part)
                          (funcall chunk `(:tool_calls [(:index 0 :function (:arguments ,part))])))
                        (mevedel-gptel-test--parts mevedel-gptel-test--args))
                (list (funcall chunk '(:content :null) "tool_calls")
                      "[DONE]"))))
      (goto-char (point-min))
      (gptel-curl--parse-stream backend info))
    (should (equal (mevedel-gptel-test--run-tools info)
                   (list mevedel-gptel-test--args)))))

;;;; Anthropic

(ert-deftest mevedel-gptel:anthropic-nonstreaming-round-trip ()
  (let* ((tool (mevedel-gptel-test--tool))
         (backend (gptel-make-anthropic "mevedel-test-anthropic" :key "k" :models '(test-model)))
         (info (mevedel-gptel-test--info backend tool))
         (input (json-parse-string mevedel-gptel-test--args :object-type 'alist
                                   :null-object :null :false-object :json-false))
         (body (json-serialize
                `((id . "msg_1") (type . "message") (role . "assistant") (model . "test-model")
                  (content . [((type . "tool_use") (id . "toolu_1") (name . "Probe")
                               (input . ,input))])
                  (stop_reason . "tool_use")
                  (usage . ((input_tokens . 1) (output_tokens . 1))))
                :null-object :null :false-object :json-false)))
    (should (string-match-p (regexp-quote mevedel-gptel-test--args) body))
    (with-temp-buffer
      (insert body)
      (goto-char (point-min))
      (gptel--parse-response backend (gptel--json-read) info))
    (should (equal (mevedel-gptel-test--run-tools info)
                   (list mevedel-gptel-test--args)))))

(ert-deftest mevedel-gptel:anthropic-streaming-round-trip ()
  (let* ((tool (mevedel-gptel-test--tool))
         (backend (gptel-make-anthropic "mevedel-test-anthropic" :key "k" :models '(test-model)))
         (info (mevedel-gptel-test--info backend tool)))
    (with-temp-buffer
      (insert (mevedel-gptel-test--sse
               (append
                (list '("message_start" :type "message_start"
                        :message (:id "msg_1" :type "message" :role "assistant" :content []
                                      :usage (:input_tokens 1 :output_tokens 1)))
                      '("content_block_start" :type "content_block_start" :index 0
                        :content_block (:type "tool_use" :id "toolu_1" :name "Probe" :input ())))
                (mapcar (lambda (part)
                          `("content_block_delta" :type "content_block_delta" :index 0
                            :delta (:type "input_json_delta" :partial_json ,part)))
                        (mevedel-gptel-test--parts mevedel-gptel-test--args))
                (list '("content_block_stop" :type "content_block_stop" :index 0)
                      '("message_delta" :type "message_delta"
                        :delta (:stop_reason "tool_use") :usage (:output_tokens 5))
                      '("message_stop" :type "message_stop")))))
      (goto-char (point-min))
      (gptel-curl--parse-stream backend info))
    (should (equal (mevedel-gptel-test--run-tools info)
                   (list mevedel-gptel-test--args)))))

;;;; gptel tools of registered tools

(defconst mevedel-gptel-test--category "mevedel-gptel-registry-test")

(defmacro mevedel-gptel-test--with-clean (&rest body)
  "Run BODY, then drop every tool of the test category."
  (declare (indent 0))
  `(unwind-protect (progn ,@body)
     (dolist (tool (mevedel-tool-all))
       (when (equal (mevedel-tool-category tool) mevedel-gptel-test--category)
         (mevedel-tool-unregister (mevedel-tool-name tool) mevedel-gptel-test--category)))))

(ert-deftest mevedel-gptel:positional-args-become-a-plist ()
  (mevedel-gptel-test--with-clean
    (let* ((seen nil)
           (tool (mevedel-define-tool Pos
                   :description "Positional." :category mevedel-gptel-test--category
                   :read-only-p t
                   :function (lambda (args) (setq seen args) "done")
                   :args ((a string :required "A.") (b boolean :optional "B.")
                          (c integer :optional "C."))))
           (gptel-tool (gptel-get-tool (list mevedel-gptel-test--category "Pos")))
           (result nil))
      (should (eq gptel-tool (mevedel-tool-gptel-tool tool)))
      (should (gptel-tool-async gptel-tool))
      ;; gptel calls (FUNCTION CALLBACK A B C) with nil for absent arguments.
      (funcall (gptel-tool-function gptel-tool) (lambda (r) (setq result r)) "x" :json-false nil)
      (should (equal seen '(:a "x" :b nil)))
      (should (equal result "done"))
      (should (equal (mevedel-gptel-args-from-positional tool '("x" :json-false nil))
                     '(:a "x" :b :json-false))))))

(ert-deftest mevedel-gptel:wrapped-gptel-tool-freezes-its-contract ()
  (mevedel-gptel-test--with-clean
    (let* ((cat mevedel-gptel-test--category)
           (src-cat "mevedel-registry-test-source")
           (_source (gptel-make-tool :name "shout" :category src-cat
                                     :description "Upcase a word. Loudly."
                                     :args (list '(:name "word" :type string :description "W."))
                                     :function #'upcase))
           (tool (mevedel-define-tool Shout :wrap (list src-cat "shout") :category cat
                                      :read-only-p t))
           (result nil))
      (unwind-protect
          (progn
            (should (equal (mevedel-tool-identity tool) (format "%s/Shout" cat)))
            (should (equal (mevedel-tool-shape tool) (format "(%s/Shout :word string)" cat)))
            (should (equal (mevedel-tool-summary tool) "Upcase a word."))
            (funcall (gptel-tool-function (mevedel-tool-gptel-tool tool))
                     (lambda (r) (setq result r)) "hey")
            (should (equal result "HEY"))
            ;; A reconnect replacing the function with the same contract is fine.
            (gptel-make-tool :name "shout" :category src-cat :description "Upcase a word."
                             :args (list '(:name "word" :type string :description "W."))
                             :function (lambda (w) (concat (upcase w) "!")))
            (funcall (gptel-tool-function (mevedel-tool-gptel-tool tool))
                     (lambda (r) (setq result r)) "hey")
            (should (equal result "HEY!"))
            ;; Contract drift fails the call.
            (gptel-make-tool :name "shout" :category src-cat :description "Upcase a word."
                             :args (list '(:name "text" :type string :description "T."))
                             :function #'upcase)
            (funcall (gptel-tool-function (mevedel-tool-gptel-tool tool))
                     (lambda (r) (setq result r)) "hey")
            (should (string-match-p "changed since it was wrapped" result)))
        (setq gptel--known-tools (assoc-delete-all src-cat gptel--known-tools))))))

;;;; End to end through the pipeline

(ert-deftest mevedel-gptel:null-reaches-repair-and-context-reaches-the-log ()
  (let* ((tool (mevedel-gptel-test--tool))
         (session (make-symbol "session"))
         (mevedel-tool-repair-session-function (lambda () session))
         (backend (mevedel-gptel-test--openai))
         (info (mevedel-gptel-test--info backend tool)))
    (unwind-protect
        (progn
          (with-temp-buffer
            (insert (json-serialize
                     `(:choices [(:index 0 :finish_reason "tool_calls"
                                         :message (:role "assistant" :content :null
                                                         :tool_calls [(:id "call_1" :type "function"
                                                                           :function (:name "Probe" :arguments ,mevedel-gptel-test--args))]))])))
            (goto-char (point-min))
            (gptel--parse-response backend (gptel--json-read) info))
          (gptel--handle-tool-use (mevedel-gptel-test--fsm info))
          (let ((result (plist-get (car (plist-get info :tool-use)) :result)))
            ;; The nulls were seen as nulls (repaired away), not as absent.
            (should (string-match-p "\\`ran\n\n\\[Note: " result))
            (should (string-match-p "dropped null optional `n`" result))
            (should (string-match-p "dropped null optional `nested/x`" result)))
          (let ((event (car (mevedel-tool-repair-session-log session))))
            (should (equal (plist-get event :backend) "mevedel-test-openai"))
            (should (equal (plist-get event :model) "test-model"))
            (should (eq (plist-get event :outcome) 'repaired))))
      (mevedel-tool-repair-log-forget session))))

;;;; Failures, retries and call order

(defun mevedel-gptel-test--backend ()
  "Return an OpenAI backend at api.example over HTTPS."
  (gptel-make-openai "failure test" :host "api.example" :key "k" :models '(m)))

(ert-deftest mevedel-gptel:failures-are-named-once ()
  "Each failure is one sentence naming what failed, and whether it may pass."
  (let ((backend (mevedel-gptel-test--backend)))
    (cl-flet ((failure (&rest info) (mevedel-gptel-failure (append info (list :backend backend)))))
      (let ((refused (failure :mevedel-curl-exit 7 :error "Curl failed with exit code 7.")))
        (should (equal (plist-get refused :message)
                       "could not connect to api.example:443: connection refused or host \
unreachable (curl exit 7) — check gptel-backend and the network"))
        (should (plist-get refused :transient)))
      (let ((cut (failure :mevedel-curl-exit 18 :stream t
                          :tool-use (list (list :id "c" :function (list :name "Read"))))))
        (should (equal (plist-get cut :message)
                       "the stream ended before it was complete (curl exit 18) while the \
model was writing a call of Read"))
        (should (plist-get cut :transient)))
      (should (equal (plist-get (failure :mevedel-curl-exit 18) :message)
                     "the response ended before it was complete (curl exit 18)"))
      (let ((limited (failure :http-status "429" :mevedel-retry-after 3
                              :error '(:type "rate_limit" :message "slow down"))))
        (should (equal (plist-get limited :message) "api.example:443 answered HTTP 429: slow down"))
        (should (plist-get limited :transient))
        (should (equal (plist-get limited :retry-after) 3)))
      (should (plist-get (failure :http-status "503") :transient))
      (should (plist-get (failure :http-status "408") :transient))
      (should-not (plist-get (failure :http-status "400" :error "bad") :transient))
      (should-not (plist-get (failure :http-status "401") :transient))
      (should-not (plist-get (failure :mevedel-curl-exit 60) :transient))
      (let ((bad (failure :mevedel-malformed "the response body is not valid JSON")))
        (should (equal (plist-get bad :message)
                       "the response body is not valid JSON (HTTP 200 from api.example:443)"))
        (should-not (plist-get bad :transient)))
      (should (plist-get (failure :mevedel-stream-end 'incomplete) :transient))
      (should-not (plist-get (failure :mevedel-stream-end 'malformed) :transient))
      (should-not (failure :http-status "200")))))

(ert-deftest mevedel-gptel:malformed-bodies-are-recognized ()
  (let ((openai (mevedel-gptel-test--backend))
        (anthropic (gptel-make-anthropic "failure test a" :key "k" :models '(m))))
    (should (mevedel-gptel--malformed openai 'json-read-error))
    (should (mevedel-gptel--malformed openai '(:id "x")))
    (should (mevedel-gptel--malformed openai '(:choices [])))
    (should-not (mevedel-gptel--malformed openai '(:choices [(:message (:content "hi"))])))
    (should (mevedel-gptel--malformed anthropic '(:type "message")))
    (should-not (mevedel-gptel--malformed anthropic '(:content [(:type "text" :text "hi")])))))

(ert-deftest mevedel-gptel:retry-after-is-read-from-the-headers ()
  (with-temp-buffer
    (insert "HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\n\r\n{}")
    (should (equal (mevedel-gptel--retry-after (current-buffer)) 7)))
  (with-temp-buffer
    (insert "HTTP/1.1 503 Busy\r\nRetry-After: "
            (format-time-string "%a, %d %b %Y %T GMT" (time-add nil 120) t)
            "\r\n\r\n{}")
    (should (< 100 (mevedel-gptel--retry-after (current-buffer)) 121)))
  (with-temp-buffer
    (insert "HTTP/1.1 500 Oops\r\n\r\nretry-after: 9 (in the body, not a header)")
    (should-not (mevedel-gptel--retry-after (current-buffer)))))

(ert-deftest mevedel-gptel:provider-words-are-kept-and-gptels-guesses-dropped ()
  "An error body the provider wrote is quoted; one gptel could not read is not."
  (let ((backend (mevedel-gptel-test--backend)))
    (should (equal (plist-get (mevedel-gptel-failure
                               (list :backend backend :http-status "502"
                                     :status "(HTTP/1.1 502 Bad Gateway) Malformed JSON in response."
                                     :error "Malformed JSON in response"))
                              :message)
                   "api.example:443 answered HTTP 502 Bad Gateway"))
    (should (equal (mevedel-gptel--malformed backend '(:error (:message "quota exceeded")))
                   "the response is an error: quota exceeded"))
    (should (equal (plist-get (mevedel-gptel-failure
                               (list :backend backend :stream t :mevedel-stream-end 'incomplete
                                     :mevedel-stream-error "Overloaded"))
                              :message)
                   "the stream ended before it was complete (api.example:443 reported: Overloaded)"))
    (with-temp-buffer
      (insert "HTTP/1.1 200 OK\r\n\r\nevent: message_start\ndata: {\"type\":\"message_start\"}\n\n"
              "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
              "\"message\":\"Overloaded\"}}\n\n")
      (should (equal (mevedel-gptel--stream-error) "Overloaded")))
    (with-temp-buffer
      (insert "HTTP/1.1 200 OK\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"an \\\"error\\\" here\"}}]}\n\n")
      (should-not (mevedel-gptel--stream-error)))
    (with-temp-buffer
      (insert "HTTP/1.1 429 Too Many\r\nretry-after-ms: 1500\r\nretry-after: 9\r\n\r\n{}")
      (should (equal (mevedel-gptel--retry-after (current-buffer)) 1.5)))))

(ert-deftest mevedel-gptel:calls-and-their-echo-go-back-in-call-order ()
  "A response parsed newest first is answered and echoed in the model's order."
  (let* ((a (list :id "a" :name "Read")) (b (list :id "b" :name "Read"))
         (c (list :id "c" :name "Read"))
         (openai-echo (list :role "assistant" :tool_calls (vector (list :id "c") (list :id "b")
                                                                  (list :id "a"))))
         (anthropic-echo (list :role "assistant"
                               :content (vector (list :type "text" :text "hi")
                                                (list :type "tool_use" :id "b")
                                                (list :type "tool_use" :id "a"))))
         (fsm (gptel-make-fsm
               :info (list :mevedel-call-order '("a" "b" "c") :tool-use (list c b a)
                           :data (list :messages (vector '(:role "user") openai-echo))))))
    (mevedel-gptel--order-calls fsm)
    (should (equal (mapcar (lambda (r) (plist-get r :id)) (plist-get (gptel-fsm-info fsm) :tool-use))
                   '("a" "b" "c")))
    (should (equal (mapcar (lambda (r) (plist-get r :id)) (plist-get openai-echo :tool_calls))
                   '("a" "b" "c")))
    (setf (gptel-fsm-info fsm) (list :mevedel-call-order '("a" "b") :tool-use (list b a)
                                     :data (list :messages (vector anthropic-echo))))
    (mevedel-gptel--order-calls fsm)
    (should (equal (mapcar (lambda (r) (or (plist-get r :id) (plist-get r :type)))
                           (plist-get anthropic-echo :content))
                   '("text" "a" "b")))))

(ert-deftest mevedel-gptel:unknown-tools-are-named-once-in-call-order ()
  "Calls of tools the request does not offer are named once each, in call order.
A call already answered and gptel's structured-output stand-in are not
unknown tools."
  (let* ((known (gptel--make-tool-internal :name "Known" :function #'ignore :description "d"))
         (info (list :tools (list known)
                     :mevedel-call-order '("1" "2" "3" "4" "5" "6")
                     ;; Newest first, as the stream parsers keep them.
                     :tool-use (list (list :id "6" :name "Other" :result "done")
                                     (list :id "5" :name "Nope")
                                     (list :id "4" :name "response_json")
                                     (list :id "3" :name "Known")
                                     (list :id "2" :name "Zed")
                                     (list :id "1" :name "Nope")))))
    (should (equal (mevedel-gptel-unknown-tool-names info) '("Nope" "Zed")))
    (should (equal (mevedel-gptel-unknown-tool-names
                    (list :tools (list known) :tool-use (list (list :id "1" :name "Known"))))
                   nil))))

(ert-deftest mevedel-gptel:turn-state-machine-can-retry ()
  "A turn's table leaves TYPE for RTRY first, and RTRY goes back to WAIT."
  (let* ((fsm (mevedel-gptel-send-fsm nil))
         (table (gptel-fsm-table fsm)))
    (should (eq (cdr (car (alist-get 'TYPE table))) 'RTRY))
    (should (equal (alist-get 'RTRY table) '((t . WAIT))))
    (should (memq #'mevedel-gptel--retry (alist-get 'RTRY (gptel-fsm-handlers fsm))))
    (should-not (memq #'gptel--handle-error (alist-get 'ERRS (gptel-fsm-handlers fsm))))
    ;; gptel's own table is left alone.
    (should-not (assq 'RTRY gptel-send--transitions))))

(provide 'gptel-test)
;;;; Request bodies

(defun mevedel-gptel-test--config (info _uuid)
  "Return curl's config and body for INFO as gptel's `gptel-curl--get-config' does."
  (concat "url = \"http://x\"\n" mevedel-gptel--data-option
          (encode-coding-string (json-serialize (plist-get info :data) :null-object :null
                                                :false-object :json-false)
                                'utf-8-unix t)))

(defun mevedel-gptel-test--message (role text &optional mark)
  "Return an Anthropic message of ROLE with TEXT, with a breakpoint when MARK."
  (list :role role :content (vector (append (list :type "text" :text text)
                                            (and mark (list :cache_control
                                                            (list :type "ephemeral")))))))

(ert-deftest mevedel-gptel:a-turn-encodes-what-its-last-request-did-not ()
  "A message is encoded for the requests until it stops changing, the tools once.
The body is the one gptel would send."
  (let* ((encoded nil)
         (note (lambda (message) (push (plist-get message :role) encoded)))
         (tools (vector (list :name "Read" :input_schema (list :type "object"))))
         (info (list :mevedel-attempt t
                     :data (list :model "m" :messages nil :system "sys" :tools tools
                                 :stream :json-false)))
         (send (lambda (&rest messages)
                 (plist-put (plist-get info :data) :messages (vconcat messages))
                 (setq encoded nil)
                 (let ((parts (mevedel-gptel--request-parts #'mevedel-gptel-test--config
                                                            info "id")))
                   (should (equal (apply #'concat (car parts) mevedel-gptel--data-option
                                         (cdr parts))
                                  (mevedel-gptel-test--config info "id")))
                   (reverse encoded))))
         (a (mevedel-gptel-test--message "user" "a"))
         (b (mevedel-gptel-test--message "assistant" "b"))
         (c (mevedel-gptel-test--message "user" "c \u00e9" t))
         (d (mevedel-gptel-test--message "assistant" "d")))
    (advice-add 'mevedel-gptel--json :before note)
    (unwind-protect
        (progn
          (should (equal (funcall send a b c) '("user" "assistant" "user")))
          ;; The marked message changes with the marks: encoded again.
          (should (equal (funcall send a b c d) '("user" "assistant")))
          (should (equal (funcall send a b c d) '("user" "assistant")))
          ;; A message replaced is encoded again, and all after it.
          (should (equal (funcall send a (copy-sequence b) c d)
                         '("user" "assistant" "user" "assistant")))
          ;; A turn's tools are encoded once; a vector put in their
          ;; place is encoded again.
          (let ((serialized 0))
            (cl-letf* ((serialize (symbol-function 'json-serialize))
                       ((symbol-function 'json-serialize)
                        (lambda (object &rest args)
                          (when (eq object tools) (cl-incf serialized))
                          (apply serialize object args))))
              (funcall send a b)
              (should (= serialized 0))
              (setq tools (copy-sequence tools))
              (plist-put (plist-get info :data) :tools tools)
              (funcall send a b)
              (should (= serialized 1)))))
      (advice-remove 'mevedel-gptel--json note))))

(ert-deftest mevedel-gptel:a-request-leaves-the-backends-curl-args-alone ()
  "gptel appends \"--config -\" to a backend's curl arguments in place.
Had any request (one outside a turn too) kept that, every later turn
would go through curl, taking the extra arguments for ones only curl
understands."
  (let* ((args (list "--noproxy" "127.0.0.1"))
         (backend (gptel-make-openai "curl-args-test" :host "127.0.0.1:9" :protocol "http"
                                     :key "k" :models '(m) :curl-args args))
         (info (list :backend backend :model 'm :data (list :messages [])))
         (mevedel-gptel-transport 'native))
    ;; What gptel's `gptel-curl-get-response' does with the arguments.
    (mevedel-gptel--get-response
     (lambda (fsm) (nconc (list "curl") (gptel-curl--get-config-args (gptel-fsm-info fsm))
                          (list "--config" "-")))
     (gptel-make-fsm :info info))
    (should (equal (gptel-backend-curl-args backend) '("--noproxy" "127.0.0.1")))
    (should (eq (gptel-backend-curl-args backend) args))
    (should (mevedel-gptel--native-options (plist-put info :mevedel-attempt 1)))))

(ert-deftest mevedel-gptel:primitives-get-trampolines-only-for-native-callers ()
  "A redefined primitive costs a trampoline compiled while Emacs waits.
Only native callers need one: with gptel and mevedel as byte code (or
source) none is compiled; with gptel's request function native, one is."
  (should (native-comp-available-p))
  (let* ((dir (file-name-as-directory (make-temp-file "mevedel-trampolines" t)))
         (native-comp-enable-subr-trampolines dir)
         (redefine (lambda ()
                     (mevedel-gptel--letf (((symbol-function 'string-distance) #'ignore))
                       (should-not (string-distance "a" "b"))))))
    (unwind-protect
        (progn
          (should-not (mevedel-gptel--native-p 'gptel-curl-get-response))
          (funcall redefine)
          (should-not (directory-files-recursively dir "\\.eln\\'"))
          (cl-letf (((symbol-function 'gptel-curl-get-response)
                     (native-compile '(lambda (fsm) fsm))))
            (should (equal (mevedel-gptel--trampolines) dir))
            (funcall redefine))
          (should (directory-files-recursively dir "_string_distance_.*\\.eln\\'")))
      (delete-directory dir t))))

;;; gptel-test.el ends here
