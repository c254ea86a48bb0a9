;;; mevedel-gptel.el --- The one adapter between mevedel and gptel  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Every use of gptel's private symbols, and every advice mevedel puts
;; on gptel or Emacs functions, lives in this file; the rest of mevedel
;; calls the functions below.  A gptel upgrade should touch this file
;; only.  What each piece of gptel is relied on for:
;;
;; - `gptel-make-tool' (public): every registered mevedel tool gets a
;;   gptel tool whose function runs the call through the pipeline
;;   (`mevedel-pipeline-run-tool'), in any buffer: a chat's data
;;   buffer, a headless run, or a plain gptel buffer.  Tools that are
;;   not read-only are made with :confirm t, so that where gptel's own
;;   confirmation is on (its default `auto') gptel asks before running
;;   them.  Tools registered later, or again, follow through
;;   `mevedel-tool-registered-functions'; `gptel--known-tools' loses an
;;   unregistered tool.
;; - `gptel--handle-tool-use' (advice): before gptel runs the calls of
;;   a response, decoded empty objects in their arguments are made
;;   explicit (see the JSON bridge below), the request's backend and
;;   model are bound for the repair log, and the calls are queued so
;;   that each tool function learns which call it serves
;;   (`mevedel-gptel-dispatched-call'): its tool-use ID, and whether
;;   gptel's confirmation asked the user about it.  Calls that gptel
;;   holds for confirmation are kept until `gptel--accept-tool-calls'
;;   (advice) runs them: those calls count as confirmed, unless mevedel
;;   itself accepted them (`mevedel-gptel-run-held-calls').
;; - `gptel--parse-response' and `gptel-curl--parse-stream' (advice):
;;   while a backend decodes a response, a `json-parse-string' (advice)
;;   asking for :null-object nil gets :null, so JSON null survives
;;   decoding; false is already :json-false and [] a vector.
;;   Afterwards the IDs of new tool calls are appended to the request's
;;   call order (`:mevedel-call-order' in the request info), because
;;   the stream parsers keep the newest call first.
;; - `gptel-send--transitions', `gptel-send--handlers',
;;   `gptel--handle-tool-result': a chat's state machine is
;;   gptel-send's plus mevedel's handlers (`mevedel-gptel-send-fsm').
;; - `gptel--insert-response', `gptel-curl--stream-insert-response':
;;   response text goes into a data buffer as gptel's own callbacks
;;   insert it (`mevedel-gptel-insert-response').
;; - `gptel--display-tool-results', `gptel--make-tool-internal': gptel
;;   finds a result's ID by tool name, so parallel calls of one tool
;;   would share an ID; `mevedel-gptel-insert-tool-results' hands it
;;   one authoritative record at a time, in call order.
;; - `gptel--inject-prompt': a message the user queued while tools ran
;;   joins the request that continues after them
;;   (`mevedel-gptel-continuation-functions'), and the data buffer.
;; - `gptel--request-alist', `gptel--fsm-transition': aborting a turn
;;   that has no network request running (`mevedel-gptel-abort').
;; - `gptel-send--transitions' again: a turn's table adds RTRY, where a
;;   failed sample waits to be sent again (see "Turns" below and
;;   mevedel-recovery.el).  A retry restores gptel's `:position' and
;;   `:tracking-marker' markers, its parsers' keys in the request info
;;   and the request data as they were when the attempt began.
;; - `gptel-curl--sentinel', `gptel-curl--stream-cleanup' (advice): in
;;   a mevedel turn they note curl's exit code and Retry-After, and when
;;   curl failed or a 200 stream closed before its last event they fail
;;   the request themselves, so that it moves once, with its error set.
;;   `gptel--parse-response' (above) also makes a 200 body that is not
;;   the backend's answer an error.  `gptel--handle-error' runs without
;;   its message: `mevedel-gptel-failure' names the failure, once.
;; - `gptel--sanitize-model': gptel's default backend
;;   (`mevedel-gptel-default-backend').
;; - `gptel--get-api-key': whether a backend's key can be found
;;   (`mevedel-gptel-api-key').
;; - `gptel--parse-tool-results', `gptel--parse-buffer' (advice): a
;;   tool result's images (mevedel-tool-media.el) reach Anthropic inside
;;   its tool_result and OpenAI's chat API as a user message after it,
;;   both when gptel sends a result it just got and when it reads the
;;   conversation back from the buffer.
;; - `gptel--model-capable-p', `gptel--model-mime-capable-p': whether
;;   the model takes an image (`mevedel-gptel-model-accepts-mime-p').
;; - The request data gptel builds (`:data' in the request info):
;;   before each send (WAIT) the saved provider history goes in front
;;   of what gptel parsed and the cache breakpoints or key are set
;;   ("Prompt caching", "Provider history"); at DONE the request's
;;   messages become the history.  `gptel--create-prompt-buffer'
;;   (advice) copies only the text after the history's mark, and
;;   `gptel-curl--get-config' (advice) puts the history's saved
;;   encoding into the body as it is, and gives curl the body in a
;;   file instead of after the config on its standard input (a full
;;   pipe stalls Emacs 20 ms).
;; - `gptel-curl-get-response' (advice): in a turn the request goes
;;   over the module's kept-alive HTTP client, a pipe process standing
;;   in for curl, and `gptel--request-alist''s abort function stops it
;;   there too ("The module's HTTP client", ADR 0027).  Through curl
;;   (`mevedel-gptel-transport'), the curl of the next request starts
;;   while a request runs, and gptel's `make-process' (bound around the
;;   call) gets it back ("A started curl").
;; - `gptel--anthropic-update-tokens' and the other backends'
;;   `gptel--BACKEND-update-tokens' (advice): each response's usage as
;;   the provider reported it (`mevedel-gptel-usage-functions').
;;
;; When the backend accepted a request: gptel's state machine leaves
;; WAIT for TYPE when the response's status line arrives (streaming,
;; `gptel-curl--stream-filter') or when the whole response has been
;; read (`gptel-curl--sentinel'), with the HTTP status in the request
;; info's :http-status.  `mevedel-gptel-accepted-p' says that status is
;; 200; a request that reached TOOL or DONE was accepted too.
;;
;; Primitives this file redefines for gptel's code and its own
;; (`json-parse-string', `make-process', `process-status', `message'
;; and others) get no trampoline unless that code is native
;; ("Redefined primitives").

;;; Code:

(require 'cl-lib)
(require 'map)
(require 'subr-x)
(require 'gptel)
(require 'gptel-openai)
(require 'gptel-anthropic)
(require 'mevedel-pipeline)
(require 'mevedel-recovery)
(require 'mevedel-session)
(require 'mevedel-tool-media)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-repair)

(declare-function org-escape-code-in-string "org-src")
(defvar native-comp-enable-subr-trampolines)
(declare-function gptel-gemini-p "gptel-gemini")

;;;; JSON null bridge

(defvar mevedel-gptel--decoding nil
  "Non-nil while a gptel backend parses a provider response.")

(defun mevedel-gptel--json-parse-string (parse string &rest args)
  "Call PARSE on STRING and ARGS, keeping JSON null distinct while decoding."
  (if (and mevedel-gptel--decoding
           (plist-member args :null-object)
           (null (plist-get args :null-object)))
      (apply parse string (plist-put (copy-sequence args) :null-object :null))
    (apply parse string args)))

(defun mevedel-gptel-restore-call (tool-call)
  "Make decoded empty objects in TOOL-CALL's :args explicit, in place.
TOOL-CALL is gptel's plist (:name NAME :args ARGS ...).  Idempotent."
  (when (plist-get tool-call :args)
    (plist-put tool-call :args
               (mevedel-tool-repair-json-restore-empty-objects (plist-get tool-call :args))))
  tool-call)

;;;; Redefined primitives

;; Native code calls a primitive directly, not through its symbol: a
;; redefinition reaches it only through a trampoline.  Emacs compiles
;; one the first time each primitive is redefined, in a subprocess it
;; waits for (0.4-1 s on 2 cores), and keeps it in the eln cache under
;; HOME.  This file redefines seven for gptel's code and its own, so a
;; headless run in a fresh HOME (a container, CI) spent 3-7 s on them,
;; one of them in the turn's first round trip.  Byte code sees a
;; redefinition without a trampoline, so none is compiled unless that
;; code is native (ADR 0032).

(defun mevedel-gptel--native-p (function)
  "Return non-nil when FUNCTION, under any advice, is native code."
  (native-comp-function-p (advice--cd*r (indirect-function function))))

(defun mevedel-gptel--trampolines ()
  "Return `native-comp-enable-subr-trampolines' for this file's redefinitions.
Nil unless gptel's request code or this file is native code: byte
code needs no trampoline."
  (and (bound-and-true-p native-comp-enable-subr-trampolines)
       (or (mevedel-gptel--native-p 'gptel-curl-get-response)
           (mevedel-gptel--native-p 'mevedel-gptel--end))
       native-comp-enable-subr-trampolines))

(defmacro mevedel-gptel--letf (bindings &rest body)
  "Run BODY with BINDINGS as `cl-letf*' does, each a primitive redefined.
The primitives get trampolines only if the code calling them needs
them (`mevedel-gptel--trampolines'); a primitive BODY redefines gets
one on the same terms."
  (declare (indent 1) (debug cl-letf))
  `(let ((native-comp-enable-subr-trampolines (mevedel-gptel--trampolines)))
     (cl-letf* ,bindings ,@body)))

;;;; Call order

(defun mevedel-gptel--note-calls (info in-order)
  "Append IDs of new tool invocations in INFO to its call order.
IN-ORDER says the :tool-use list is in call order; otherwise it
holds the newest call first, as gptel's stream parsers keep it."
  (when (plist-member info :mevedel-call-order)
    (let* ((seen (plist-get info :mevedel-call-order))
           (new (cl-loop for call in (plist-get info :tool-use)
                         for id = (plist-get call :id)
                         when (and id (not (member id seen))) collect id)))
      (when new
        (plist-put info :mevedel-call-order
                   (append seen (if in-order new (nreverse new))))))))

(defun mevedel-gptel--parse-response (parse backend response info &rest rest)
  "Apply PARSE to BACKEND, RESPONSE, INFO and REST, null kept distinct.
Then record the call order in INFO.  In a mevedel request a body that
is not what BACKEND answers with is an error, never an empty answer."
  (if-let* (((plist-get info :mevedel-recovery))
            (problem (mevedel-gptel--malformed backend response info)))
      (progn (plist-put info :mevedel-malformed problem)
             (plist-put info :error problem)
             nil)
    (let ((text (let ((mevedel-gptel--decoding t))
                  (apply parse backend response info rest))))
      (mevedel-gptel--note-calls info t)
      (mevedel-gptel--note-text info text)
      (when (and (cl-typep backend 'gptel-anthropic) (consp response))
        (plist-put info :mevedel-content (plist-get response :content)))
      text)))

(defun mevedel-gptel--note-text (info text)
  "Add TEXT, what the model wrote, to the response text kept in INFO.
The history keeps it as written: gptel's buffer parser would trim it.
The pieces are kept newest first and joined once, at the end."
  (when (and (stringp text) (not (string-empty-p text)))
    (plist-put info :mevedel-text (cons text (plist-get info :mevedel-text)))))

(defun mevedel-gptel--parse-stream (parse backend info &rest rest)
  "Apply PARSE to BACKEND, INFO and REST, null kept distinct.
Then record the call order in INFO."
  (let* ((start (point))
         (text (let ((mevedel-gptel--decoding t))
                 (apply parse backend info rest))))
    (mevedel-gptel--note-calls info nil)
    (mevedel-gptel--note-text info text)
    (when (cl-typep backend 'gptel-anthropic)
      (mevedel-gptel--note-thinking info start (point)))
    text))

(defun mevedel-gptel--note-thinking (info from to)
  "Keep the thinking blocks of the Anthropic events between FROM and TO in INFO.
gptel's stream parser keeps one thinking text and drops redacted
blocks; Anthropic wants each block of a tool loop back unchanged, its
signature with it.  :mevedel-thinking holds (INDEX . BLOCK), newest
first.  The usage of message_start goes to :mevedel-usage-start: the
input counts are there when message_delta leaves them out."
  (save-excursion
    (goto-char from)
    (while (re-search-forward
            "^event: \\(?:content_block_\\(start\\|delta\\)\\|message_start\\)\ndata: \\(.*\\)$" to t)
      (let* ((event (ignore-errors
                      (json-parse-string (match-string 2) :object-type 'plist
                                         :null-object :null :false-object :json-false)))
             (index (plist-get event :index))
             (found (assq index (plist-get info :mevedel-thinking))))
        (pcase (list (match-string 1) (plist-get (plist-get event :content_block) :type)
                     (plist-get (plist-get event :delta) :type))
          (`(nil ,_ ,_)
           (plist-put info :mevedel-usage-start (plist-get (plist-get event :message) :usage)))
          (`("start" ,(or "thinking" "redacted_thinking") ,_)
           (plist-put info :mevedel-thinking
                      (cons (cons index (copy-sequence (plist-get event :content_block)))
                            (plist-get info :mevedel-thinking))))
          (`("delta" ,_ "thinking_delta")
           (when found
             (plist-put (cdr found) :thinking (concat (plist-get (cdr found) :thinking)
                                                      (plist-get (plist-get event :delta) :thinking)))))
          (`("delta" ,_ "signature_delta")
           (when found
             (setcdr found (plist-put (cdr found) :signature
                                      (concat (plist-get (cdr found) :signature)
                                              (plist-get (plist-get event :delta) :signature)))))))))))

(defun mevedel-gptel-track-call-order (fsm)
  "Record the model's call order in the request info of FSM."
  (plist-put (gptel-fsm-info fsm) :mevedel-call-order nil))

(defun mevedel-gptel-in-call-order (info records)
  "Return RECORDS (tool-use plists of INFO) sorted into the model's call order."
  (let ((order (plist-get info :mevedel-call-order)))
    (cl-stable-sort (copy-sequence records) #'<
                    :key (lambda (record)
                           (or (cl-position (plist-get record :id) order :test #'equal)
                               most-positive-fixnum)))))

(defun mevedel-gptel--order-calls (fsm)
  "Put the tool invocations of FSM's response and their echo in the model's order.
gptel answers the calls in the order of the request info's :tool-use
and echoes them as the request data's last assistant message; the
stream parsers keep both newest first.  Text and reasoning blocks of an
Anthropic echo stay ahead of its tool_use blocks."
  (let* ((info (gptel-fsm-info fsm))
         (messages (plist-get (plist-get info :data) :messages))
         (echo (and (vectorp messages) (> (length messages) 0)
                    (aref messages (1- (length messages))))))
    (plist-put info :tool-use (mevedel-gptel-in-call-order info (plist-get info :tool-use)))
    (when (equal (plist-get echo :role) "assistant")
      (let ((calls (plist-get echo :tool_calls))
            (content (plist-get echo :content)))
        (when (vectorp calls)
          (plist-put echo :tool_calls
                     (vconcat (mevedel-gptel-in-call-order info (append calls nil)))))
        (when (vectorp content)
          (let ((uses (cl-remove-if-not (lambda (block)
                                          (equal (plist-get block :type) "tool_use"))
                                        (append content nil))))
            (plist-put echo :content
                       (vconcat (cl-remove-if (lambda (block) (memq block uses))
                                              (append content nil))
                                (mevedel-gptel-in-call-order info uses)))))))))

;;;; Which call a tool function serves

(defvar mevedel-gptel--dispatch nil
  "Calls gptel may invoke now: (RECORD . CONFIRMED) conses.
RECORD is gptel's tool-use plist; CONFIRMED says gptel's confirmation
asked the user about it.")

(defvar mevedel-gptel--held nil
  "Tool-use records gptel holds for its confirmation, newest first.")

(defconst mevedel-gptel--held-limit 32
  "Most held calls remembered; a rejected call is never taken back.")

(defvar mevedel-gptel--auto-accept nil
  "Non-nil while mevedel itself runs calls gptel held for confirmation.")

(defun mevedel-gptel--handle-tool-use (handle fsm)
  "Prepare the pending tool invocations of FSM, then apply HANDLE to FSM.
Decoded empty objects become explicit, the repair log learns the
request's backend and model, and the calls are queued for
`mevedel-gptel-dispatched-call'.  Calls gptel holds for its
confirmation are remembered for `gptel--accept-tool-calls'.  gptel's
notice of a call of an unknown tool is left out when the tool was
reported already (`mevedel-gptel-unknown-tool-names')."
  (let* ((info (gptel-fsm-info fsm))
         (backend (plist-get info :backend))
         (mevedel-tool-repair-gptel-context
          (list :backend (and backend (gptel-backend-name backend))
                :model (and (plist-get info :model)
                            (format "%s" (plist-get info :model)))))
         (pending (cl-remove-if (lambda (call) (plist-get call :result))
                                (plist-get info :tool-use)))
         (mevedel-gptel--dispatch (mapcar (lambda (call)
                                            (cons (mevedel-gptel-restore-call call) nil))
                                          pending)))
    (prog1 (if-let* ((reported (plist-get info :mevedel-unknown-tools)))
               (mevedel-gptel--letf ((message (symbol-function 'message))
                                     ((symbol-function 'message)
                                      (lambda (format-string &rest args)
                                        (unless (and (equal format-string "Unknown tool called by model: %s")
                                                     (member (car args) reported))
                                          (apply message format-string args)))))
                 (funcall handle fsm))
             (funcall handle fsm))
      (when mevedel-gptel--dispatch
        (setq mevedel-gptel--held
              (take mevedel-gptel--held-limit
                    (append (mapcar #'car mevedel-gptel--dispatch) mevedel-gptel--held)))))))

(defun mevedel-gptel--accept-tool-calls (accept &optional tool-calls overlay)
  "Apply ACCEPT to TOOL-CALLS and OVERLAY; gptel's confirmation asked about them.
TOOL-CALLS are gptel's (SPEC ARGS CALLBACK) triples of held calls; they
count as confirmed unless mevedel itself accepts them."
  (let* ((confirmed (not mevedel-gptel--auto-accept))
         (mevedel-gptel--dispatch
          (cl-loop for (_spec args _callback) in tool-calls
                   for record = (cl-find args mevedel-gptel--held
                                         :key (lambda (r) (plist-get r :args)) :test #'eq)
                   when record collect (cons record confirmed))))
    (setq mevedel-gptel--held (cl-set-difference mevedel-gptel--held
                                                 (mapcar #'car mevedel-gptel--dispatch)
                                                 :test #'eq))
    (funcall accept tool-calls overlay)))

(defun mevedel-gptel-run-held-calls (held)
  "Run HELD, what gptel held for its confirmation, without asking.
HELD is what a request callback received as (tool-call . HELD).
They do not count as confirmed: the pipeline decides them."
  (let ((mevedel-gptel--auto-accept t))
    (gptel--accept-tool-calls held nil)))

(defun mevedel-gptel--same-call-p (record keys values)
  "Return non-nil when RECORD's arguments at KEYS are VALUES, object for object."
  (let ((args (plist-get record :args)))
    (and (= (length keys) (length values))
         (cl-every (lambda (key value) (eq (plist-get args key) value)) keys values))))

(defun mevedel-gptel-dispatched-call (tool values)
  "Return the call of TOOL, invoked now with positional VALUES, or nil.
The result is a plist (:id ID :name NAME :args ARGS :confirmed BOOL):
the model's tool-use ID, and whether gptel's confirmation asked the
user about this call.  It is nil outside gptel's tool dispatch."
  (let* ((name (mevedel-tool-name tool))
         (keys (mevedel-tool-arg-keys tool))
         (entry (cl-find-if (lambda (entry)
                              (and (equal (plist-get (car entry) :name) name)
                                   (mevedel-gptel--same-call-p (car entry) keys values)))
                            mevedel-gptel--dispatch)))
    (when entry
      (setq mevedel-gptel--dispatch (delq entry mevedel-gptel--dispatch))
      (list :id (plist-get (car entry) :id) :name name
            :args (plist-get (car entry) :args) :confirmed (cdr entry)))))

;;;; gptel tools for registered mevedel tools

(defvar mevedel-gptel-dispatch-functions nil
  "Abnormal hook run with the cancellation thunk of each call started here.
It runs in the call's data buffer, so a buffer-local function can keep
the thunks of its own calls (a chat cancels them when its turn ends).")

(defun mevedel-gptel-args-from-positional (tool values)
  "Return the argument plist of TOOL from gptel's positional VALUES.
A nil value is an absent argument: the JSON bridge keeps null, false
and empty objects as non-nil values."
  (cl-loop for key in (mevedel-tool-arg-keys tool)
           for value in values
           unless (null value) append (list key value)))

(defun mevedel-gptel--run (tool callback values)
  "Run TOOL's call with positional VALUES through the pipeline for gptel.
CALLBACK gets the result."
  (let* ((call (mevedel-gptel-dispatched-call tool values))
         (cancel (mevedel-pipeline-run-tool
                  tool (mevedel-gptel-args-from-positional tool values) callback
                  :tool-use-id (plist-get call :id)
                  :data-buffer (current-buffer)
                  :confirmed (plist-get call :confirmed))))
    (run-hook-with-args 'mevedel-gptel-dispatch-functions cancel)
    cancel))

(defun mevedel-gptel--register (tool)
  "Make and register the gptel tool of the mevedel TOOL; return it.
gptel gets its own copy of the argument plists, so nothing it or a
request does to them reaches the registry."
  (gptel-make-tool
   :name (mevedel-tool-name tool)
   :category (mevedel-tool-category tool)
   :description (mevedel-tool-description tool)
   :args (copy-tree (mevedel-tool-gptel-args tool) t)
   :async t
   :confirm (not (mevedel-tool-read-only-p tool))
   :function (lambda (callback &rest values) (mevedel-gptel--run tool callback values)))
  (setf (mevedel-tool-gptel-tool tool)
        (gptel-get-tool (list (mevedel-tool-category tool) (mevedel-tool-name tool)))))

(defun mevedel-gptel--unregister (name category)
  "Forget the gptel tool NAME of CATEGORY."
  (when-let* ((entry (assoc category gptel--known-tools)))
    (setcdr entry (cl-remove name (cdr entry) :key #'car :test #'equal))))

(defun mevedel-gptel-tools ()
  "Return the gptel tools offered to the model: those of the native tools.
Specialists stay out of the provider schemas; the model reaches them
through ToolSearch and ToolCall (see `mevedel-tool-native-p')."
  (delq nil (mapcar #'mevedel-tool-gptel-tool (mevedel-tool-native-tools))))

;;;; Turns

;; A mevedel turn runs gptel-send's state machine with one more state,
;; RTRY: a response that failed for a reason that may pass goes from
;; TYPE to RTRY instead of ERRS, and from there, after the pause the
;; recovery controller (mevedel-recovery.el) chose, back to WAIT, which
;; sends the same sample again.  Each WAIT notes where its attempt
;; began (`mevedel-gptel--begin-attempt'), so that a retry takes the
;; failed attempt's text out of the data buffer and its state out of
;; the request.  Tools only run after TYPE, so no completed call is
;; ever replayed.

(defun mevedel-gptel-send-fsm (extras)
  "Return a new request state machine: gptel-send's, with EXTRAS handlers.
EXTRAS is a list of (STATE WHERE FUNCTION): WHERE is :before (first),
:after (last) or :before-results (right before gptel puts the tool
results into the next request).  STATE may be RTRY, entered when a
failed sample will be retried; (plist-get INFO :mevedel-retry) then
says when (see `mevedel-recovery-schedule') and why (:message)."
  (gptel-make-fsm :table (mevedel-gptel--send-transitions)
                  :handlers (mevedel-gptel--send-handlers extras)))

(defun mevedel-gptel--send-transitions ()
  "Return gptel-send's transition table with the RTRY state added."
  (let ((table (copy-tree gptel-send--transitions)))
    (push (cons #'mevedel-gptel--retry-p 'RTRY) (alist-get 'TYPE table))
    (append table (list (list 'RTRY (cons t 'WAIT))))))

(defun mevedel-gptel--send-handlers (extras)
  "Return gptel-send's state handlers with mevedel's and EXTRAS added.
See `mevedel-gptel-send-fsm'."
  (let ((handlers (copy-tree gptel-send--handlers)))
    (setf (alist-get 'ERRS handlers)
          (cl-substitute #'mevedel-gptel--handle-error #'gptel--handle-error
                         (alist-get 'ERRS handlers)))
    (pcase-dolist (`(,state ,where ,function)
                   (append extras
                           `((WAIT :before ,#'mevedel-gptel--prepare-request)
                             (WAIT :before ,#'mevedel-gptel--begin-attempt)
                             (TOOL :before ,#'mevedel-gptel--order-calls)
                             (DONE :before ,#'mevedel-gptel--record-history)
                             (DONE :before ,#'mevedel-gptel--end-requests)
                             (ERRS :before ,#'mevedel-gptel--end-requests)
                             (ABRT :before ,#'mevedel-gptel--end-requests)
                             (RTRY :before ,#'mevedel-gptel--retry)
                             (ERRS :before ,#'mevedel-gptel--mark-incomplete)
                             (ABRT :before ,#'mevedel-gptel--cancel-retry))))
      (let ((entry (assq state handlers)))
        (unless entry
          (setq entry (list state))
          (push entry handlers))
        (setcdr entry
                (pcase where
                  (:before (cons function (cdr entry)))
                  (:after (append (cdr entry) (list function)))
                  (:before-results
                   (let ((tail (memq #'gptel--handle-tool-result (cdr entry))))
                     (append (butlast (cdr entry) (length tail)) (list function) tail)))))))
    handlers))

(defun mevedel-gptel--handle-error (fsm)
  "Run gptel's error handler for FSM without its echo-area message.
The turn reports the failure itself, once, in its own words."
  (let ((inhibit-message t)
        (message-log-max nil))
    (gptel--handle-error fsm)))

;;;; Prompt caching

;; Providers cache the longest prefix a request shares with an earlier
;; one (docs/prompt.md).  Anthropic caches only up to breakpoints the
;; request marks, at most four: mevedel marks the last tool, the system
;; text, the end of the previous request and the end of this one, so
;; that each request reads all the previous one wrote, however many
;; blocks a tool batch added.  gptel's own `gptel-cache' marks stay on
;; the user's prompt while a tool loop grows; they are replaced here.
;; OpenAI caches automatically; a stable `prompt_cache_key' keeps a
;; session's requests on the same cache.

(defcustom mevedel-gptel-prompt-cache t
  "Non-nil means mevedel's requests ask the provider to cache their prefix.
Anthropic requests get cache breakpoints, OpenAI-style requests a
`prompt_cache_key'."
  :type 'boolean
  :group 'mevedel)

(defvar-local mevedel-gptel-cache-key nil
  "The `prompt_cache_key' of requests from this data buffer, or nil.
A chat sets it once: the same for all of a session's (or an agent's)
requests, so they reach the same cache.")

(defun mevedel-gptel--unmark (block)
  "Return BLOCK, an Anthropic block plist, without its cache breakpoint."
  (if (plist-member block :cache_control)
      (let ((copy (copy-sequence block)))
        (cl-remf copy :cache_control)
        copy)
    block))

(defun mevedel-gptel--blocks (content)
  "Return Anthropic CONTENT as a vector of blocks, without breakpoints.
A string becomes one text block, so that the message keeps the same
shape whether or not a breakpoint is on it."
  (if (stringp content)
      (vector (list :type "text" :text content))
    (vconcat (mapcar #'mevedel-gptel--unmark content))))

(defun mevedel-gptel--mark (vector)
  "Put a cache breakpoint on the last block of VECTOR, when it has one."
  (let ((last (1- (length vector))))
    (when (>= last 0)
      (aset vector last (append (aref vector last)
                                (list :cache_control (list :type "ephemeral")))))))

(defun mevedel-gptel--anthropic-breakpoints (info)
  "Place the cache breakpoints of the Anthropic request INFO is about to send.
Every message's content becomes blocks (it keeps that shape in later
requests); marks go on the last tool, the system text, the message
that ended the previous request of this conversation and the last
message."
  (let* ((data (plist-get info :data))
         (messages (plist-get data :messages))
         (tools (plist-get data :tools))
         (system (plist-get data :system))
         (previous (plist-get info :mevedel-cache-end)))
    ;; The tools marked for the turn's first request stay, the same
    ;; vector: their encoding is kept for the turn's next requests
    ;; (`mevedel-gptel--request-parts').
    (when (and (vectorp tools) (not (eq tools (plist-get info :mevedel-marked-tools))))
      (setq tools (vconcat (mapcar #'mevedel-gptel--unmark tools)))
      (mevedel-gptel--mark tools)
      (plist-put data :tools tools)
      (plist-put info :mevedel-marked-tools tools))
    (when system
      (setq system (mevedel-gptel--blocks system))
      (mevedel-gptel--mark system)
      (plist-put data :system system))
    ;; A replayed history is in block form without marks already.
    (cl-loop for index from (or (car (plist-get info :mevedel-prefix)) 0) below (length messages)
             for message = (aref messages index)
             do (plist-put message :content
                           (mevedel-gptel--blocks (plist-get message :content))))
    (let ((last (1- (length messages))))
      (when (and previous (< previous last))
        (mevedel-gptel--mark (plist-get (aref messages previous) :content)))
      (when (>= last 0)
        (mevedel-gptel--mark (plist-get (aref messages last) :content)))
      (plist-put info :mevedel-cache-end last))))

(defun mevedel-gptel--prepare-request (fsm)
  "Make the request FSM is about to send: saved history, then caching."
  (let* ((info (gptel-fsm-info fsm))
         (backend (plist-get info :backend))
         (buffer (plist-get info :buffer))
         (key (and (buffer-live-p buffer)
                   (buffer-local-value 'mevedel-gptel-cache-key buffer))))
    (mevedel-gptel--replay-history info)
    (when (and (plist-get info :stream) (eq (car (plist-get info :history)) 'TRET))
      (mevedel-gptel--echo-thinking info))
    (plist-put info :mevedel-text nil)
    (plist-put info :mevedel-content nil)
    (plist-put info :mevedel-thinking nil)
    (when mevedel-gptel-prompt-cache
      (cond ((cl-typep backend 'gptel-anthropic)
             (mevedel-gptel--anthropic-breakpoints info))
            ((and key (cl-typep backend 'gptel-openai))
             (plist-put (plist-get info :data) :prompt_cache_key key))))))

;;;; Provider history

;; The next request of a conversation repeats the messages sent before
;; exactly as they were sent (docs/adr/0031-*): a turn that ends saves
;; its request's messages and the model's final message as the
;; buffer's history, and marks where it ends in the buffer's text with
;; the `mevedel-history-end' property.  Reading the buffer for the next
;; request, gptel's parser reads only the text after the mark; the
;; history goes before what it read.  gptel's parser trims tool
;; results, splits text from tool calls on OpenAI and drops thinking,
;; so a conversation read back from its text alone would not be the
;; prefix the provider cached.

(defvar-local mevedel-gptel-history nil
  "The provider messages this data buffer's conversation sent, or nil.
A plist: :id (the value of the `mevedel-history-end' mark), :wire
\(`anthropic' or `openai'), :messages (a vector of message plists,
as gptel encodes them), :end (the buffer position after the last
text they hold) and :sent (how many of them the last request sent;
the model's final message follows).")

(defun mevedel-gptel--wire (backend)
  "Return the wire format of BACKEND whose history is kept, or nil."
  (cond ((cl-typep backend 'gptel-anthropic) 'anthropic)
        ((cl-typep backend 'gptel-openai) 'openai)))

(defun mevedel-gptel-forget-history (buffer)
  "Forget the provider history of data BUFFER.
The next request is read from the text.
After a compaction the summary is the conversation's new prefix."
  (with-current-buffer buffer
    (save-restriction
      (widen)
      (let ((inhibit-read-only t) (at (point-min)))
        (while (setq at (text-property-not-all at (point-max) 'mevedel-history-end nil))
          (remove-text-properties at (1+ at) '(mevedel-history-end nil)))))
    (setq mevedel-gptel-history nil)))

(defun mevedel-gptel-set-history (buffer history)
  "Make HISTORY (see `mevedel-gptel-history') the history of BUFFER.
A resumed conversation gets its saved history back this way; it
counts only while the mark it names is in the text."
  (with-current-buffer buffer
    (setq mevedel-gptel-history history)))

(defun mevedel-gptel--history-mark (history)
  "Return the position of HISTORY's end mark in the current buffer, or nil."
  (let ((end (plist-get history :end)))
    (and end (<= end (point-max)) (> end (point-min))
         (equal (get-text-property (1- end) 'mevedel-history-end) (plist-get history :id))
         (1- end))))

(defun mevedel-gptel--final-message (info wire)
  "Return the model's final message of the request INFO for WIRE, or nil.
It holds the text the model wrote, untrimmed, and the blocks it came
with (Anthropic's thinking, with their signatures)."
  (let ((text (apply #'concat (reverse (plist-get info :mevedel-text))))
        (blocks (plist-get info :mevedel-content)))
    (pcase wire
      ('anthropic
       (let ((content (if blocks
                          (cl-remove-if (lambda (block) (equal (plist-get block :type) "tool_use"))
                                        blocks)
                        (vconcat (mevedel-gptel--thinking-blocks info)
                                 (and text (not (string-empty-p text))
                                      (list (list :type "text" :text text)))))))
         (and (> (length content) 0) (list :role "assistant" :content (vconcat content)))))
      ('openai
       (and text (not (string-empty-p text)) (list :role "assistant" :content text))))))

(defun mevedel-gptel--thinking-blocks (info)
  "Return the thinking blocks a streamed Anthropic response of INFO held, in order."
  (mapcar #'cdr (sort (copy-sequence (plist-get info :mevedel-thinking)) #'car-less-than-car)))

(defun mevedel-gptel--echo-thinking (info)
  "Give the model's last message in request INFO its own thinking blocks.
After a streamed response with tool calls, gptel's copy of the message
has at most one thinking block, rebuilt from its parts; the blocks as
the provider sent them replace it."
  (when-let* ((blocks (mevedel-gptel--thinking-blocks info))
              (messages (plist-get (plist-get info :data) :messages))
              (at (cl-position "assistant" messages :key (lambda (m) (plist-get m :role))
                               :test #'equal :from-end t)))
    (let ((message (aref messages at)))
      (plist-put message :content
                 (vconcat blocks
                          (cl-remove-if (lambda (block)
                                          (member (plist-get block :type)
                                                  '("thinking" "redacted_thinking")))
                                        (mevedel-gptel--blocks (plist-get message :content))))))))

(defun mevedel-gptel--record-history (fsm)
  "Keep the messages of FSM's finished request as its buffer's history."
  (let* ((info (gptel-fsm-info fsm))
         (buffer (plist-get info :buffer))
         (wire (mevedel-gptel--wire (plist-get info :backend)))
         (messages (plist-get (plist-get info :data) :messages)))
    (when (and wire (vectorp messages) (buffer-live-p buffer))
      (let ((final (mevedel-gptel--final-message info wire)))
        (when (eq wire 'anthropic)
          (cl-loop for index from (or (car (plist-get info :mevedel-prefix)) 0)
                   below (length messages)
                   for message = (aref messages index)
                   do (plist-put message :content
                                 (mevedel-gptel--blocks (plist-get message :content)))))
        (with-current-buffer buffer
          (mevedel-gptel-forget-history buffer)
          (let ((end (point-max))
                (id (format "%x-%x" (random most-positive-fixnum) (length messages)))
                (inhibit-read-only t))
            (when (> end (point-min))
              ;; A change like any other: the transcript saves the mark.
              (put-text-property (1- end) end 'mevedel-history-end id)
              (let ((all (if final (vconcat messages (list final)) messages)))
                (setq mevedel-gptel-history
                      (list :id id :wire wire :end end :sent (length messages)
                            :saved (plist-get info :mevedel-history-saved)
                            :json (mevedel-gptel--history-json info all)
                            :messages all))))))))))

(defun mevedel-gptel--json (message)
  "Return MESSAGE encoded as gptel encodes a request (UTF-8 JSON)."
  (json-serialize message :null-object :null :false-object :json-false))

(defun mevedel-gptel--history-json (info messages)
  "Return MESSAGES as the JSON of an array's elements, without brackets.
What the request INFO replayed was encoded before: only the rest is
encoded now."
  (pcase-let ((`(,count ,json ,_) (plist-get info :mevedel-prefix)))
    (if (and count (> count 0))
        (concat json
                (and (< count (length messages)) ",")
                (mapconcat #'mevedel-gptel--json (substring messages count) ","))
      (mapconcat #'mevedel-gptel--json messages ","))))

(defun mevedel-gptel-history-json-from-lines (lines)
  "Return LINES, the saved history's messages one per line, as history JSON.
LINES is unibyte UTF-8, each message's JSON followed by a newline."
  (let ((json (substring lines 0 (max 0 (1- (length lines))))))
    (subst-char-in-string ?\n ?, json t)))

(defun mevedel-gptel--history-tail (backend args orig)
  "Parse the current prompt buffer after its history mark with ORIG, BACKEND, ARGS.
Return the messages after the mark behind a placeholder naming the
history, or nil when the buffer has no mark for BACKEND's wire."
  (when-let* ((wire (mevedel-gptel--wire backend))
              (at (text-property-not-all (point-min) (point) 'mevedel-history-end nil))
              (id (get-text-property at 'mevedel-history-end)))
    (save-restriction
      (narrow-to-region (1+ at) (point))
      (cons (list :mevedel-history id :wire wire)
            (apply orig backend args)))))

(defun mevedel-gptel--create-prompt-buffer (create &rest args)
  "Apply CREATE to ARGS, copying only the text after the history's mark.
The prompt buffer gptel makes holds the conversation's text for its
parser; with a history, only the text after the mark (the mark's
character included) is read."
  (if-let* ((at (and (mevedel-gptel--wire gptel-backend)
                     (eq (plist-get mevedel-gptel-history :wire)
                         (mevedel-gptel--wire gptel-backend))
                     (mevedel-gptel--history-mark mevedel-gptel-history))))
      (save-restriction
        (narrow-to-region at (point-max))
        (apply create args))
    (apply create args)))

(defun mevedel-gptel--replay-history (info)
  "Put the saved history in place of its placeholder in request INFO.
The text after the mark was read into messages; the history goes
before them.  OpenAI's history starts with its system message, which
stays as it was first sent."
  (let* ((data (plist-get info :data))
         (messages (plist-get data :messages))
         (at (cl-position-if (lambda (message) (plist-get message :mevedel-history)) messages)))
    (when at
      (let* ((placeholder (aref messages at))
             (buffer (plist-get info :buffer))
             (history (and (buffer-live-p buffer)
                           (buffer-local-value 'mevedel-gptel-history buffer))))
        (if (and history (equal (plist-get history :id) (plist-get placeholder :mevedel-history))
                 (eq (plist-get history :wire) (plist-get placeholder :wire)))
            (let ((replayed (plist-get history :messages)))
              (plist-put data :messages (vconcat replayed (substring messages (1+ at))))
              (plist-put info :mevedel-history-saved (plist-get history :saved))
              (when (plist-get history :json)
                (plist-put info :mevedel-prefix
                           (list (length replayed) (plist-get history :json) replayed))))
          ;; The history went away between reading and sending: read
          ;; the whole conversation as the text says it.
          (with-current-buffer buffer
            (mevedel-gptel-forget-history buffer)
            (let ((whole (save-excursion
                           (save-restriction
                             (widen)
                             (goto-char (plist-get info :position))
                             (gptel--parse-buffer (plist-get info :backend) nil)))))
              (plist-put data :messages (vconcat (substring messages 0 at) whole)))))
        ;; The new turn adds a few blocks after the history's end,
        ;; within the provider's look-back from the last breakpoint: a
        ;; breakpoint inside the history would change its encoding.
        (plist-put info :mevedel-cache-end nil)))))

(defconst mevedel-gptel--data-option "data-binary = @-\n\n"
  "Where gptel's curl config ends and the request body, read from stdin, begins.")

(defun mevedel-gptel--tools-json (info)
  "Return the encoded tools of request INFO, or nil when it has none.
A turn's requests share one tools vector (gptel builds the request's
data once per turn), encoded for the first and kept in INFO."
  (when-let* ((tools (plist-get (plist-get info :data) :tools))
              ((vectorp tools)))
    (let ((kept (plist-get info :mevedel-tools-json)))
      (if (eq (car kept) tools)
          (cdr kept)
        (let ((json (encode-coding-string
                     (json-serialize tools :null-object :null :false-object :json-false)
                     'utf-8-unix t)))
          (plist-put info :mevedel-tools-json (cons tools json))
          json)))))

(defun mevedel-gptel--marked-p (message)
  "Return non-nil when a block of MESSAGE carries a cache breakpoint."
  (let ((content (plist-get message :content)))
    (and (vectorp content)
         (cl-some (lambda (block) (and (consp block) (plist-member block :cache_control)))
                  content))))

(defun mevedel-gptel--messages-json (info messages from)
  "Return MESSAGES of request INFO from index FROM on as JSON array elements.
A message a request sent keeps its encoding in INFO until the turn
ends, up to the first that carries a cache breakpoint (marks move, and
only messages from that one on change, see
`mevedel-gptel--anthropic-breakpoints'); only the messages after those
are encoded, not the whole turn for each request of it."
  (pcase-let* ((`(,start ,objects ,jsons) (plist-get info :mevedel-encoded))
               (kept (if (and (eql start from)
                              (<= (length objects) (- (length messages) from))
                              (cl-loop for object in objects
                                       for index from from
                                       always (eq object (aref messages index))))
                         (length objects)
                       (setq objects nil jsons nil)
                       0))
               (fresh (cl-loop for index from (+ from kept) below (length messages)
                               collect (mevedel-gptel--json (aref messages index))))
               (stable (cl-loop for index from (+ from kept) below (length messages)
                                for json in fresh
                                until (mevedel-gptel--marked-p (aref messages index))
                                collect (cons (aref messages index) json))))
    (plist-put info :mevedel-encoded
               (list from (append objects (mapcar #'car stable))
                     (append jsons (mapcar #'cdr stable))))
    (mapconcat #'identity (append jsons fresh) ",")))

(defun mevedel-gptel--request-parts (get-config info uuid)
  "Return curl's config for INFO and UUID without the body, and the body's parts.
The result is (CONFIG . PARTS): GET-CONFIG's text (gptel's
`gptel-curl--get-config') up to its data option, and the strings
whose concatenation is the request body.  The replayed history's
messages were encoded when they were saved, the turn's messages when
a request of the turn sent them (`mevedel-gptel--messages-json') and
its tools for its first request (`mevedel-gptel--tools-json'); gptel
encodes the rest.  Encoding the whole conversation every time costs
tens of milliseconds per megabyte.  The history's encoding is a part
of its own, so the whole body is never copied into one string either.
Return nil when GET-CONFIG's text has no body where gptel puts it."
  (pcase-let* ((`(,count ,json ,replayed) (plist-get info :mevedel-prefix))
               (data (plist-get info :data))
               (messages (plist-get data :messages))
               (ours (vectorp messages))
               (count (if (and count ours (>= (length messages) count)
                               (cl-loop for index below count
                                        always (eq (aref messages index) (aref replayed index))))
                          count
                        0))
               (tools (plist-get data :tools))
               (tools-json (mevedel-gptel--tools-json info))
               ;; The tools' place in gptel's text: a string no other
               ;; can equal, quoted as JSON quotes it.
               (placeholder (concat "mevedel-tools-" uuid))
               (text (unwind-protect
                         (progn (when ours (plist-put data :messages []))
                                (when tools-json (plist-put data :tools placeholder))
                                (funcall get-config info uuid))
                       (plist-put data :messages messages)
                       (when tools-json (plist-put data :tools tools))))
               (data-at (string-search mevedel-gptel--data-option text)))
    (when data-at
      (let* ((body-at (+ data-at (length mevedel-gptel--data-option)))
             (messages-at (and ours (string-search "\"messages\":[]" text body-at)))
             (split (and messages-at (+ messages-at (length "\"messages\":["))))
             (quoted (concat "\"" placeholder "\""))
             (tools-at (and tools-json (string-search quoted text body-at))))
        (when (and (or split (not ours)) (or tools-at (not tools-json)))
          (cons (substring text 0 data-at)
                (mevedel-gptel--splice
                 text body-at
                 (sort (delq nil
                             (list (and split
                                        (list split split
                                              (delq nil (list (and (> count 0) json)
                                                              (and (> count 0)
                                                                   (< count (length messages))
                                                                   ",")
                                                              (and (< count (length messages))
                                                                   (mevedel-gptel--messages-json
                                                                    info messages count))))))
                                   (and tools-at (list tools-at (+ tools-at (length quoted))
                                                       (list tools-json)))))
                       :key #'car))))))))

(defun mevedel-gptel--splice (text from edits)
  "Return the parts of TEXT from FROM on with EDITS made.
EDITS, in order, are (START END STRINGS): STRINGS replace TEXT from
START to END."
  (let ((parts nil))
    (pcase-dolist (`(,start ,end ,strings) edits)
      (push (substring text from start) parts)
      (setq parts (append (reverse strings) parts)
            from end))
    (push (substring text from) parts)
    (delete "" (nreverse parts))))

(defvar mevedel-gptel--body-files nil
  "Request body files not yet deleted; Emacs deletes them when it exits.")

(defvar mevedel-gptel--swept nil
  "Non-nil once this Emacs deleted the body files of Emacsen that died.")

(defun mevedel-gptel--body-prefix (pid)
  "Return the name prefix of the body files of the Emacs with PID."
  (expand-file-name (format "mevedel-request-%d-" pid) temporary-file-directory))

(defun mevedel-gptel--sweep-bodies ()
  "Delete the body files an Emacs killed while sending left behind."
  (setq mevedel-gptel--swept t)
  (dolist (file (directory-files temporary-file-directory t
                                 "\\`mevedel-request-[0-9]+-"))
    (let ((pid (string-to-number (substring (file-name-nondirectory file)
                                            (length "mevedel-request-")))))
      (unless (or (= pid (emacs-pid)) (process-attributes pid))
        (ignore-errors (delete-file file))))))

(defconst mevedel-gptel--join-limit (* 4 1024 1024)
  "Bytes of a request body below which its parts are joined and written at once.")

(defun mevedel-gptel--write-body (info parts)
  "Write PARTS, the body of request INFO, to a new file; return the file.
It is deleted when curl exits (`mevedel-gptel--sentinel'), when the
turn ends (`mevedel-gptel--end-requests'), or when Emacs does; one an
Emacs killed outright left is deleted by the next that sends."
  (mevedel-gptel--drop-body info)
  (unless mevedel-gptel--swept (mevedel-gptel--sweep-bodies))
  (let* ((coding-system-for-write 'no-conversion)
         (write-region-inhibit-fsync t)
         (create-lockfiles nil)
         (parts (mapcar (lambda (part)
                          (if (multibyte-string-p part) (encode-coding-string part 'utf-8-unix) part))
                        parts))
         ;; One write, unless a part is large (a long saved history):
         ;; each write opens the file again.
         (parts (if (< (apply #'+ (mapcar #'length parts)) mevedel-gptel--join-limit)
                    (list (apply #'concat parts))
                  parts))
         (file nil))
    ;; The file is made by the first write, private, under a name no
    ;; other file has (as `make-temp-file', which would open it once
    ;; more).
    (with-file-modes #o600
      (while (not file)
        (let ((name (make-temp-name (mevedel-gptel--body-prefix (emacs-pid)))))
          (condition-case nil
              (progn (write-region (car parts) nil name nil 'silent nil 'excl)
                     (setq file name))
            (file-already-exists nil)))))
    (push file mevedel-gptel--body-files)
    (plist-put info :mevedel-body-file file)
    (dolist (part (cdr parts))
      (write-region part nil file t 'silent))
    file))

(defun mevedel-gptel--drop-body (info)
  "Delete the body file of request INFO, if it has one."
  (when-let* ((file (plist-get info :mevedel-body-file)))
    (plist-put info :mevedel-body-file nil)
    (setq mevedel-gptel--body-files (delete file mevedel-gptel--body-files))
    (delete-file file)))

(defun mevedel-gptel--drop-bodies ()
  "Delete every request body file left (`kill-emacs-hook')."
  (mapc #'delete-file mevedel-gptel--body-files)
  (setq mevedel-gptel--body-files nil))

(defun mevedel-gptel--request-config (get-config info uuid)
  "Return what curl is given for INFO and UUID: GET-CONFIG's text, body in a file.
In a mevedel turn curl reads the body from a file
\(`mevedel-gptel--write-body'), not after the config on its standard
input: a pipe holds 64 KiB, and Emacs, finding it full, waits 20 ms
before it writes again, every 64 KiB, while curl, just started, has
not read yet; nearly every request of a conversation is larger.  The
body is built as `mevedel-gptel--request-parts' says."
  (cond
   ((not (plist-get info :mevedel-attempt)) (funcall get-config info uuid))
   ((plist-get info :mevedel-native)
    ;; The module's client takes the body's parts (`mevedel-gptel--send').
    (let* ((request (or (mevedel-gptel--request-parts get-config info uuid)
                        (let* ((text (funcall get-config info uuid))
                               (at (string-search mevedel-gptel--data-option text)))
                          (cons (substring text 0 at)
                                (list (substring text (+ at (length mevedel-gptel--data-option)))))))))
      (plist-put info :mevedel-native (cdr request))
      (car request)))
   ((when-let* ((request (mevedel-gptel--request-parts get-config info uuid)))
      (concat (car request)
              (format "data-binary = %S\n"
                      (concat "@" (mevedel-gptel--write-body info (cdr request)))))))
   (t (funcall get-config info uuid))))

;;;; A started curl

;; curl takes milliseconds to start (it loads a dozen libraries), most
;; of a round trip to a nearby server, and gptel starts one per
;; request.  It starts curl first and gives it the request on its
;; standard input: a curl started earlier, waiting, can take it.  While
;; a request of a turn runs, the curl of the next one starts; the next
;; request of the turn gives it its config.  It is the same program
;; with the same arguments, so nothing of how a request is sent
;; changes.

(defun mevedel-gptel--start-curl (command)
  "Start curl with COMMAND, to wait for a request's config; return its process."
  (let ((process (make-process :name "gptel-curl" :buffer nil :command command
                               :connection-type 'pipe :noquery t :sentinel #'ignore)))
    ;; `process-command' names the program by its absolute file name.
    (process-put process 'mevedel-command command)
    process))

(defun mevedel-gptel--get-response (get-response fsm)
  "Apply GET-RESPONSE to FSM, giving it the curl its turn started.
In a mevedel turn the request's curl is the one started while the
previous request ran, when its command is the same; then the curl of
the next request starts.  Unless the request goes over the module's
client (`mevedel-gptel-transport')."
  (let* ((info (gptel-fsm-info fsm))
         (backend (plist-get info :backend))
         (curl-args (gptel-backend-curl-args backend))
         (native (and (plist-get info :mevedel-attempt)
                      (mevedel-gptel--native-options info))))
    ;; gptel appends its own arguments to the backend's list in place,
    ;; one more "--config -" per request, which would then send every
    ;; later request through curl: any request gets a copy.
    (cl-letf (((gptel-backend-curl-args backend)
               (copy-sequence (if (functionp curl-args) (funcall curl-args) curl-args))))
      (cond
       ((not (plist-get info :mevedel-attempt))
        (funcall get-response fsm))
       (native
        (mevedel-gptel--end-requests fsm)
        (mevedel-gptel--send get-response fsm native))
       (t (mevedel-gptel--get-response-by-curl get-response fsm))))))

(defun mevedel-gptel--get-response-by-curl (get-response fsm)
  "Apply GET-RESPONSE to FSM with the curl its turn started, and start the next."
  (let* ((info (gptel-fsm-info fsm))
         (started (plist-get info :mevedel-curl))
         (command nil))
    (plist-put info :mevedel-curl nil)
    (mevedel-gptel--letf ((make-process (symbol-function 'make-process))
                          ((symbol-function 'make-process)
                           (lambda (&rest args)
                             (setq command (copy-sequence (plist-get args :command)))
                             (if (and started (process-live-p started)
                                      (equal (process-get started 'mevedel-command) command))
                                 (prog1 started
                                   (set-process-buffer started (plist-get args :buffer))
                                   (setq started nil))
                               (apply make-process args)))))
      (funcall get-response fsm))
    (when started (delete-process started))
    (when command
      (plist-put info :mevedel-curl (mevedel-gptel--start-curl command)))))

(defun mevedel-gptel--end-requests (fsm)
  "Let go of what FSM's turn kept for its next request: its body file and curl."
  (when-let* ((info (gptel-fsm-info fsm)))
    (mevedel-gptel--drop-body info)
    (when-let* ((curl (plist-get info :mevedel-curl)))
      (plist-put info :mevedel-curl nil)
      (delete-process curl))))

;;;; The module's HTTP client

;; A curl per request costs its start (milliseconds: it loads a dozen
;; libraries) and a new connection, most of a tool round trip to a
;; nearby server.  The module's client (`mevedel-core-http-request')
;; keeps connections open and prints each response as curl would;
;; gptel's own request function still runs, with a pipe process
;; standing in for curl: gptel writes its config to it (read here for
;; the URL, headers and proxy), its filter gets the response, and its
;; sentinel runs when the response ends, seeing the exit code curl
;; would have had.  Requests that need curl go through curl (ADR 0027).

(defcustom mevedel-gptel-transport 'native
  "How the requests of mevedel turns reach the backend.
`native': over the module's HTTP client, whose connections stay open
between requests.  `curl': one curl per request, as gptel sends them.
A request goes through curl whatever this says when it needs what
only curl does: an argument in `gptel-curl-extra-args' or the
backend's `curl-args' other than --noproxy, --proxy, --silent and
--location (Bedrock signs requests with them), a binary coding system,
or a SOCKS proxy."
  :type '(choice (const :tag "Kept-alive HTTP client" native)
                 (const :tag "curl per request" curl))
  :group 'mevedel)

(defun mevedel-gptel--proxy-env (name &optional exact)
  "Return environment variable NAME, or its upper-case form unless EXACT.
Empty counts as unset."
  (let ((value (or (getenv name) (and (not exact) (getenv (upcase name))))))
    (and value (not (string-empty-p value)) value)))

(defun mevedel-gptel--native-options (info)
  "Return the client options for request INFO, or nil when it needs curl.
The options are a plist for `mevedel-core-http-request': the proxies
curl would use (as curl, only the lower-case http_proxy) and what the
curl arguments the client understands ask for."
  (let* ((backend (plist-get info :backend))
         (curl-args (gptel-backend-curl-args backend))
         (args (append gptel-curl-extra-args
                       (if (functionp curl-args) (funcall curl-args) curl-args)))
         (options (list :proxy (mevedel-gptel--proxy-env "all_proxy")
                        :http-proxy (mevedel-gptel--proxy-env "http_proxy" t)
                        :https-proxy (mevedel-gptel--proxy-env "https_proxy")
                        :no-proxy (mevedel-gptel--proxy-env "no_proxy")))
         (ok (and (eq mevedel-gptel-transport 'native)
                  (featurep 'mevedel-dyn)
                  (not (eq (gptel-backend-coding-system backend) 'binary)))))
    (while (and ok args)
      (let ((arg (pop args)))
        (pcase arg
          ("--noproxy" (plist-put options :no-proxy (pop args)))
          ((or "--proxy" "-x") (plist-put options :proxy (pop args)))
          ((or "--silent" "-s" "--location" "-L") nil)
          (_ (setq ok nil)))))
    (unless (string-empty-p gptel-proxy)
      (plist-put options :proxy gptel-proxy))
    (and ok
         (not (cl-some (lambda (proxy) (and (stringp proxy) (string-prefix-p "socks" proxy)))
                       (list (plist-get options :proxy) (plist-get options :http-proxy)
                             (plist-get options :https-proxy))))
         options)))

(defun mevedel-gptel--config-options (config)
  "Return the options of curl CONFIG, gptel's text, as (NAME . VALUE) pairs."
  (let ((options nil) (start 0))
    (while (string-match "^\\([a-z-]+\\)\\(?: = \\(.+\\)\\)?$" config start)
      (push (cons (match-string 1 config)
                  (and (match-beginning 2) (car (read-from-string (match-string 2 config)))))
            options)
      (setq start (match-end 0)))
    (nreverse options)))

(defun mevedel-gptel--send (get-response fsm options)
  "Apply GET-RESPONSE to FSM, its request sent over the module's client.
OPTIONS are the client's (`mevedel-gptel--native-options')."
  (let* ((info (gptel-fsm-info fsm))
         (process nil)
         (config nil)
         (send-string (symbol-function 'process-send-string))
         (send-eof (symbol-function 'process-send-eof)))
    (plist-put info :mevedel-native t)
    (unwind-protect
        (mevedel-gptel--letf (((symbol-function 'make-process)
                               (lambda (&rest args)
                                 (setq process (make-pipe-process :name "mevedel-http" :noquery t
                                                                  :buffer (plist-get args :buffer)
                                                                  :sentinel #'ignore))))
                              ((symbol-function 'process-send-string)
                               (lambda (target string)
                                 (if (eq target process)
                                     (setq config string)
                                   (funcall send-string target string))))
                              ((symbol-function 'process-send-eof)
                               (lambda (&optional target)
                                 (unless (eq target process) (funcall send-eof target)))))
          (funcall get-response fsm))
      (setq options (nconc (list :body (plist-get info :mevedel-native)) options))
      (plist-put info :mevedel-native nil))
    (when-let* ((entry (and config (assq process gptel--request-alist))))
      (let* ((config (mevedel-gptel--config-options config))
             (write-out (cdr (assoc "write-out" config)))
             (abort (cddr entry))
             (id (condition-case err
                     (mevedel-core-http-request
                      (nconc (list :url (cdr (assoc "url" config))
                                   :headers (cl-loop for (name . value) in config
                                                     when (equal name "header") collect value))
                             (if-let* ((proxy (cdr (assoc "proxy" config))))
                                 (plist-put options :proxy proxy)
                               options))
                      (lambda (event) (mevedel-gptel--receive process write-out event)))
                   (error (message "mevedel: the request could not start: %s"
                                   (error-message-string err))
                          nil))))
        (if (not id)
            ;; As a curl that could not start: the request fails, once.
            (mevedel-gptel--end process 2)
          ;; gptel's abort (C-c C-k, `gptel-abort', a cancelled turn)
          ;; stops the request in the module too, closing its connection.
          (setcdr (cdr entry) (lambda ()
                                (mevedel-core-http-cancel id)
                                (funcall abort))))))))

(defun mevedel-gptel--receive (process write-out event)
  "Give EVENT of the request behind PROCESS to gptel as curl's output.
WRITE-OUT is what gptel asked curl to print after the response."
  (when (process-live-p process)
    (pcase event
      (`(output ,text) (funcall (process-filter process) process text))
      (`(exit ,code ,_message ,header-bytes)
       (when (and (zerop code) write-out)
         (funcall (process-filter process) process
                  (string-replace "%{size_header}" (number-to-string header-bytes) write-out)))
       (mevedel-gptel--end process code)))))

(defun mevedel-gptel--end (process code)
  "Run the sentinel of PROCESS as for a curl that exited with CODE."
  (let ((sentinel (process-sentinel process))
        (status (symbol-function 'process-status))
        (exit-status (symbol-function 'process-exit-status)))
    (set-process-sentinel process #'ignore)
    (process-put process 'mevedel-native-exit code)
    (unwind-protect
        (mevedel-gptel--letf (((symbol-function 'process-status)
                               (lambda (target) (if (eq target process) 'exit (funcall status target))))
                              ((symbol-function 'process-exit-status)
                               (lambda (target) (if (eq target process) code (funcall exit-status target)))))
          (funcall sentinel process (if (zerop code) "finished\n"
                                      (format "exited abnormally with code %d\n" code))))
      (delete-process process))))

;;;; Attempts and retries

(defconst mevedel-gptel--attempt-keys
  '(:partial_text :partial_json :partial_reasoning :reasoning :reasoning-block
    :reasoning-chunks :signature :stop-reason)
  "Request info keys gptel's parsers fill during one response.
A retried attempt gets them back as they were when it began.")

(defconst mevedel-gptel--failure-keys
  '(:mevedel-curl-exit :mevedel-native-exit :mevedel-retry-after :mevedel-stream-end
    :mevedel-stream-error :mevedel-malformed :mevedel-retry)
  "Request info keys mevedel fills while one response fails.")

(defvar mevedel-gptel-continuation-functions nil
  "Abnormal hook run with a request's info before it continues after tools.
The first function returning non-nil gives a list of strings: user
messages added to the request (and to its buffer) before the next
sample, in order.")

(defvar mevedel-gptel-continued-functions nil
  "Abnormal hook run with a request's info and the messages it continues with.
It runs once the messages `mevedel-gptel-continuation-functions' gave
are in the request and its buffer, before the sample is sent.")

(defun mevedel-gptel--insert-user-message (info text)
  "Add TEXT as a user message to the request INFO, in its buffer and data.
The text goes where the next response would, and the response
follows it."
  (let* ((tracking (plist-get info :tracking-marker))
         (at (if (markerp tracking) tracking (plist-get info :position))))
    (with-current-buffer (marker-buffer at)
      (save-excursion
        (goto-char at)
        (let ((inhibit-read-only t))
          (insert (if (bolp) "\n" "\n\n") (gptel-prompt-prefix-string) (string-trim text) "\n\n"))
        (set-marker at (point))
        (unless (eq at (plist-get info :position))
          (set-marker (plist-get info :position) (point)))))
    (gptel--inject-prompt (plist-get info :backend) (plist-get info :data)
                          (if (and (fboundp 'gptel-gemini-p) (gptel-gemini-p (plist-get info :backend)))
                              (list :role "user" :parts (vector (list :text text)))
                            (list :role "user" :content text)))))

(defun mevedel-gptel--begin-attempt (fsm)
  "Note where the attempt FSM is about to send begins.
A WAIT that does not follow RTRY starts a new sample, with a fresh
retry allowance."
  (let* ((info (gptel-fsm-info fsm))
         (recovery (or (plist-get info :mevedel-recovery)
                       (let ((new (mevedel-recovery-create)))
                         (plist-put info :mevedel-recovery new)
                         new)))
         (position (plist-get info :position))
         (tracking (plist-get info :tracking-marker)))
    (unless (eq (car (plist-get info :history)) 'RTRY)
      (mevedel-recovery-new-sample recovery))
    ;; Between a tool batch and the next sample, messages the user
    ;; queued join the request (before the attempt is recorded, so that
    ;; a retry resends them).
    (when (eq (car (plist-get info :history)) 'TRET)
      (let ((texts (run-hook-with-args-until-success 'mevedel-gptel-continuation-functions info)))
        (dolist (text texts)
          (mevedel-gptel--insert-user-message info text))
        (when texts
          (run-hook-with-args 'mevedel-gptel-continued-functions info texts))))
    (dolist (key mevedel-gptel--failure-keys)
      (when (plist-get info key) (plist-put info key nil)))
    (when-let* ((previous (plist-get (plist-get info :mevedel-attempt) :start)))
      (set-marker previous nil))
    (plist-put info :mevedel-attempt
               (list :start (copy-marker (if (markerp tracking) tracking position))
                     :position (marker-position position)
                     :tracking (and (markerp tracking) (marker-position tracking))
                     :keys (mapcar (lambda (key) (cons key (plist-get info key)))
                                   mevedel-gptel--attempt-keys)
                     :data (copy-sequence (plist-get info :data))))))

(defun mevedel-gptel--attempt-end (info)
  "Return where the text of the current attempt of INFO ends, or nil.
gptel inserts a response at its tracking marker, which follows the
text; an attempt that inserted nothing has no text."
  (let ((start (plist-get (plist-get info :mevedel-attempt) :start))
        (tracking (plist-get info :tracking-marker)))
    (and (markerp tracking) (eq (marker-buffer tracking) (marker-buffer start))
         (> tracking start)
         (marker-position tracking))))

(defun mevedel-gptel--discard-attempt (info)
  "Undo what the failed attempt of request INFO left behind.
Its text leaves the data buffer, gptel's parser state and the request
data return to how they were when it began."
  (when-let* ((attempt (plist-get info :mevedel-attempt))
              (start (plist-get attempt :start))
              (buffer (marker-buffer start)))
    (let ((end (mevedel-gptel--attempt-end info)))
      (when end
        (with-current-buffer buffer
          (let ((inhibit-read-only t))
            (delete-region start end))))
      (set-marker (plist-get info :position) (plist-get attempt :position) buffer)
      (if (plist-get attempt :tracking)
          (set-marker (plist-get info :tracking-marker) (plist-get attempt :tracking) buffer)
        (plist-put info :tracking-marker nil)))
    (pcase-dolist (`(,key . ,value) (plist-get attempt :keys))
      (plist-put info key value))
    (let ((data (plist-get info :data)))
      (cl-loop for (key value) on (plist-get attempt :data) by #'cddr
               do (plist-put data key value)))))

(defun mevedel-gptel--retry-p (info)
  "Return non-nil when the failed response of INFO should be retried."
  (when-let* ((recovery (plist-get info :mevedel-recovery))
              (failure (mevedel-gptel-failure info)))
    (and (plist-get failure :transient)
         (not (mevedel-recovery-exhausted-p recovery)))))

(defun mevedel-gptel--retry (fsm)
  "Discard FSM's failed attempt and send its sample again after a pause."
  (let* ((info (gptel-fsm-info fsm))
         (failure (mevedel-gptel-failure info)))
    (mevedel-gptel--discard-attempt info)
    (plist-put info :mevedel-retry
               (append (mevedel-recovery-schedule
                        (plist-get info :mevedel-recovery)
                        (lambda ()
                          (when (and (eq (gptel-fsm-state fsm) 'RTRY)
                                     (buffer-live-p (plist-get info :buffer)))
                            (gptel--fsm-transition fsm 'WAIT)))
                        (plist-get failure :retry-after))
                       (list :message (plist-get failure :message))))))

(defun mevedel-gptel--cancel-retry (fsm)
  "Stop the pending retry of FSM, which is being aborted."
  (when-let* ((recovery (plist-get (gptel-fsm-info fsm) :mevedel-recovery)))
    (mevedel-recovery-cancel recovery)))

(defun mevedel-gptel--mark-incomplete (fsm)
  "Mark the response text of FSM's failed attempt as incomplete.
The text stays in the data buffer, with the `mevedel-incomplete'
property, so views and transcripts can say it was cut."
  (when-let* ((info (gptel-fsm-info fsm))
              (start (plist-get (plist-get info :mevedel-attempt) :start))
              (end (mevedel-gptel--attempt-end info)))
    (with-current-buffer (marker-buffer start)
      (let ((inhibit-read-only t)
            (pos (marker-position start)))
        (while (< pos end)
          (let ((next (next-single-property-change pos 'gptel nil end)))
            (when (eq (get-text-property pos 'gptel) 'response)
              (put-text-property pos next 'mevedel-incomplete t))
            (setq pos next)))))))

;;;; Failures

;; gptel reports a failed request as curl's exit code or the provider's
;; error object, and reads a broken 200 (a body that is not JSON, a
;; stream cut before its end) as a short answer.  In a mevedel request
;; the sentinels below note what happened, broken responses become
;; errors, and `mevedel-gptel-failure' says in one sentence what failed
;; and whether it may pass.

(defconst mevedel-gptel--curl-exits
  '((5 "could not resolve the proxy of %s" nil)
    (6 "could not resolve the host of %s" nil)
    (7 "could not connect to %s: connection refused or host unreachable" t)
    (16 "the HTTP/2 connection to %s failed" t)
    (18 "the %s ended before it was complete" t)
    (28 "the request to %s timed out" t)
    (35 "the TLS handshake with %s failed" t)
    (47 "%s redirected too many times" nil)
    (52 "%s closed the connection without answering" t)
    (55 "the connection to %s was reset while sending" t)
    (56 "the connection to %s was reset" t)
    (60 "the TLS certificate of %s could not be verified" nil)
    (92 "the HTTP/2 stream from %s was reset" t))
  "Curl exit codes: (CODE FORMAT TRANSIENT).
FORMAT names the host (the response or stream for 18).")

(defconst mevedel-gptel--stream-ends
  '((gptel-anthropic . "^event: *message_stop")
    (gptel-openai . "^data: *\\[DONE\\]"))
  "How the stream of a backend type ends: (TYPE . REGEXP).
A stream of these types that closes without its end is incomplete.")

(defconst mevedel-gptel--unreadable-errors
  '("Malformed JSON in response" "Malformed JSON in response."
    "Could not parse HTTP response." "Could not parse Curl response"
    "Could not parse curl response.")
  "What gptel says of an error response whose body it could not read.
The status line's reason phrase says more.")

(defun mevedel-gptel--address (backend)
  "Return BACKEND's host with its port, as HOST:PORT."
  (let ((host (or (gptel-backend-host backend) "?")))
    (if (string-match-p ":[0-9]+\\'" host)
        host
      (format "%s:%s" host (if (equal (gptel-backend-protocol backend) "http") 80 443)))))

(defun mevedel-gptel--unreadable-body (info)
  "Return why the body of request INFO in the current buffer is not JSON.
The buffer is curl's output: headers, body, and the write-out that
gptel put after it, which gives the body's start."
  (save-excursion
    (goto-char (point-max))
    (when-let* ((uuid (plist-get info :uuid))
                ((search-backward uuid nil t))
                (trailer (1- (point)))
                (start (progn (goto-char trailer)
                              (cdr-safe (ignore-errors (read (current-buffer))))))
                ((integerp start))
                (body (string-trim (buffer-substring-no-properties
                                    (min (max start (point-min)) trailer) trailer))))
      (if (string-empty-p body)
          "the response body is empty"
        (condition-case nil
            (ignore (json-parse-string body))
          (json-end-of-file "the response body is cut off: its JSON ends early")
          (error nil))))))

(defun mevedel-gptel--malformed (backend response &optional info)
  "Return what is wrong with the decoded 200 RESPONSE of BACKEND, or nil.
INFO, the request, lets an unreadable body be looked at again."
  (cond ((not (and (consp response) (keywordp (car response))))
         (or (and info (mevedel-gptel--unreadable-body info))
             "the response body is not valid JSON"))
        ((plist-get response :error)
         (format "the response is an error: %s"
                 (or (mevedel-gptel--error-text (plist-get response :error)) "no message")))
        ((and (cl-typep backend 'gptel-anthropic)
              (not (vectorp (plist-get response :content))))
         "the response has no content")
        ((and (cl-typep backend 'gptel-openai)
              (not (and (vectorp (plist-get response :choices))
                        (> (length (plist-get response :choices)) 0))))
         "the response has no choices")))

(defun mevedel-gptel--stream-end (info)
  "Return how the stream of INFO in the current process buffer ended.
That is `complete', `incomplete' (it closed before its end) or
`malformed' (its end arrived, but the parser stopped before it, at an
event it could not read); nil for backends without a known end."
  (when-let* ((end (cdr (cl-find-if (lambda (entry) (cl-typep (plist-get info :backend) (car entry)))
                                    mevedel-gptel--stream-ends))))
    (let ((found (save-excursion
                   (goto-char (point-max))
                   (re-search-backward end nil t))))
      (cond ((null found) 'incomplete)
            ((< found (point)) 'complete)
            (t 'malformed)))))

(defun mevedel-gptel--stream-error ()
  "Return the message of an error event in the current process buffer, or nil.
Providers may report a failure inside a 200 stream (an Anthropic
`error' event, an OpenAI-style error object) and then close it."
  (save-excursion
    (goto-char (point-min))
    (when (re-search-forward "\r?\n\r?\n" nil t)
      (let (found)
        (while (and (not found)
                    (re-search-forward "^\\(?:data: *\\)?\\({.*\"error\".*}\\)[ \t\r]*$" nil t))
          (let ((object (ignore-errors
                          (json-parse-string (match-string 1) :object-type 'plist
                                             :null-object nil :false-object nil))))
            (setq found (and (consp object)
                             (mevedel-gptel--error-text (plist-get object :error))))))
        found))))

(defun mevedel-gptel--retry-after (buffer)
  "Return the Retry-After of the response in BUFFER in seconds, or nil."
  (with-current-buffer buffer
    (save-excursion
      (goto-char (point-min))
      (let ((case-fold-search t)
            (headers-end (save-excursion (re-search-forward "\r?\n\r?\n" nil t))))
        (if (and headers-end
                 (re-search-forward "^retry-after-ms:[ \t]*\\([0-9.]+\\)" headers-end t))
            (/ (string-to-number (match-string 1)) 1000.0)
          (goto-char (point-min))
          (when (and headers-end
                     (re-search-forward "^retry-after:[ \t]*\\([^\r\n]+\\)" headers-end t))
            (let ((value (string-trim (match-string 1))))
              (if (string-match-p "\\`[0-9]+\\(?:\\.[0-9]*\\)?\\'" value)
                  (string-to-number value)
                (ignore-errors
                  (max 0 (float-time (time-subtract (date-to-time value) nil))))))))))))

(defun mevedel-gptel--error-text (error)
  "Return the provider's message in gptel's ERROR (a plist or string), or nil."
  (let ((text (cond ((stringp error) error)
                    ((consp error) (or (plist-get error :message)
                                       (plist-get error :type)))
                    (error (format "%S" error)))))
    (and text (not (string-blank-p (format "%s" text)))
         (string-trim (format "%s" text)))))

(defun mevedel-gptel--writing-call (info)
  "Return the words naming the tool call INFO's cut stream was writing.
They are empty when no call was arriving."
  (let* ((call (car (plist-get info :tool-use)))
         (name (or (plist-get call :name)
                   (plist-get (plist-get call :function) :name))))
    (if (and (stringp name) (not (string-empty-p name)))
        (format " while the model was writing a call of %s" name)
      "")))

(defun mevedel-gptel-failure (info)
  "Return what failed in the request of INFO, or nil when nothing did.
The result is a plist: :message (one sentence naming the failure),
:transient (a retry may succeed) and :retry-after (seconds the
provider asked to wait, or nil)."
  (let* ((backend (plist-get info :backend))
         (address (if backend (mevedel-gptel--address backend) "the backend"))
         (stream (plist-get info :stream))
         (exit (plist-get info :mevedel-curl-exit))
         (status (plist-get info :http-status))
         (failure
          (cond
           ((and exit (/= exit 0))
            (pcase-let ((`(,format ,transient)
                         (or (alist-get exit mevedel-gptel--curl-exits)
                             (list "the request to %s failed" nil))))
              (list :message
                    (concat (format format (if (= exit 18)
                                               (if stream "stream" "response")
                                             address))
                            (format (if (plist-get info :mevedel-native-exit)
                                        " (code %d)"
                                      " (curl exit %d)")
                                    exit)
                            (if stream (mevedel-gptel--writing-call info) "")
                            (if (memq exit '(5 6 7 28 35 60))
                                " — check gptel-backend and the network"
                              ""))
                    :transient transient)))
           ((and status (not (member status '("200" "100"))))
            (let ((code (string-to-number status))
                  (text (mevedel-gptel--error-text (plist-get info :error)))
                  (reason (and (stringp (plist-get info :status))
                               (string-match "HTTP/[.0-9]+ +[0-9]+ +\\([^()\r\n]+\\)"
                                             (plist-get info :status))
                               (string-trim (match-string 1 (plist-get info :status))))))
              (when (member text mevedel-gptel--unreadable-errors)
                (setq text nil))
              (list :message (format "%s answered HTTP %s%s" address status
                                     (cond (text (concat ": " text))
                                           (reason (concat " " reason))
                                           (t "")))
                    :transient (or (memq code '(408 429)) (<= 500 code 599)))))
           ((plist-get info :mevedel-malformed)
            (list :message (format "%s (HTTP 200 from %s)"
                                   (plist-get info :mevedel-malformed) address)))
           ((eq (plist-get info :mevedel-stream-end) 'incomplete)
            (list :message (concat "the stream ended before it was complete"
                                   (if-let* ((text (plist-get info :mevedel-stream-error)))
                                       (format " (%s reported: %s)" address text)
                                     " (the connection closed before its last event)")
                                   (mevedel-gptel--writing-call info))
                  :transient t))
           ((eq (plist-get info :mevedel-stream-end) 'malformed)
            (list :message (format "the stream from %s held an event that is not valid JSON"
                                   address)))
           ((plist-get info :error)
            (list :message (or (mevedel-gptel--error-text (plist-get info :error))
                               "the request failed"))))))
    (when failure
      (let ((recovery (plist-get info :mevedel-recovery)))
        (when (and (plist-get failure :transient) recovery
                   (mevedel-recovery-exhausted-p recovery)
                   (> (mevedel-recovery-retries recovery) 0))
          (plist-put failure :message
                     (let ((retries (mevedel-recovery-retries recovery)))
                       (format "%s; gave up after %d %s" (plist-get failure :message)
                               retries (if (= retries 1) "retry" "retries"))))))
      (plist-put failure :retry-after (plist-get info :mevedel-retry-after)))))

(defun mevedel-gptel--sentinel (sentinel process status)
  "Apply gptel's SENTINEL to PROCESS and STATUS, noting how it ended.
In a mevedel request, a transfer curl gave up on, and a 200 stream
that closed before its end, fail here: the request moves on with the
failure as its error instead of reading as an answer."
  (let* ((fsm (car (alist-get process gptel--request-alist)))
         (info (and fsm (gptel-fsm-info fsm)))
         (buffer (process-buffer process)))
    (when (and info (memq (process-status process) '(exit signal)))
      (mevedel-gptel--drop-body info))
    (if (not (and info (plist-get info :mevedel-recovery)
                  (memq (process-status process) '(exit signal))
                  (buffer-live-p buffer)))
        (funcall sentinel process status)
      (let ((exit (process-exit-status process)))
        (plist-put info :mevedel-curl-exit exit)
        (plist-put info :mevedel-native-exit (process-get process 'mevedel-native-exit))
        (plist-put info :mevedel-retry-after (mevedel-gptel--retry-after buffer))
        (when (and (plist-get info :stream) (zerop exit)
                   (member (plist-get info :http-status) '("200" "100")))
          (with-current-buffer buffer
            (plist-put info :mevedel-stream-end (mevedel-gptel--stream-end info))
            (unless (eq (plist-get info :mevedel-stream-end) 'complete)
              (plist-put info :mevedel-stream-error (mevedel-gptel--stream-error)))))
        (if (and (zerop exit)
                 (memq (plist-get info :mevedel-stream-end) '(nil complete)))
            (funcall sentinel process status)
          (setf (alist-get process gptel--request-alist nil 'remove) nil)
          (kill-buffer buffer)
          (when (eq (gptel-fsm-state fsm) 'WAIT)
            (gptel--fsm-transition fsm))
          (plist-put info :error (plist-get (mevedel-gptel-failure info) :message))
          (gptel--fsm-transition fsm))))))

(defun mevedel-gptel-accepted-p (info)
  "Return non-nil when the backend answered the request of INFO with HTTP 200."
  (equal (plist-get info :http-status) "200"))

(defun mevedel-gptel-insert-response (response info raw)
  "Insert RESPONSE of the request INFO as gptel's own callbacks would.
RAW is passed through."
  (if (plist-get info :stream)
      (gptel-curl--stream-insert-response response info raw)
    (gptel--insert-response response info raw)))

(defun mevedel-gptel-tool-spec (info name)
  "Return the tool spec named NAME offered in request INFO, or nil."
  (cl-find-if (lambda (spec) (equal (gptel-tool-name spec) name))
              (plist-get info :tools)))

(defun mevedel-gptel-unknown-tool-names (info)
  "Return the tools the model asked for in INFO that its request does not offer.
gptel answers such a call itself (the tool \"is not available\") and
runs nothing: the model asked for a tool its catalog does not have.
Each name once, in the model's call order; gptel's stand-in tool for
structured output is not one of them.  The caller reports them, so
gptel's own notice, one per call, is left out for these names (see
`mevedel-gptel--handle-tool-use')."
  (let ((names nil))
    (dolist (call (mevedel-gptel-in-call-order info (plist-get info :tool-use)))
      (let ((name (plist-get call :name)))
        (unless (or (plist-get call :result)
                    (mevedel-gptel-tool-spec info name)
                    (equal name gptel--ersatz-json-tool)
                    (member name names))
          (push name names))))
    (plist-put info :mevedel-unknown-tools
               (append names (plist-get info :mevedel-unknown-tools)))
    (nreverse names)))

(defun mevedel-gptel-insert-tool-results (info records result)
  "Insert the finished tool invocations RECORDS of request INFO.
Each goes through gptel alone, with its record as the only :tool-use
entry, so that its ID, arguments and result are its own.  RESULT is a
function of a record returning the text to insert for it."
  (let ((all (plist-get info :tool-use)))
    (unwind-protect
        (dolist (record records)
          (let ((name (plist-get record :name)))
            (plist-put info :tool-use (list record))
            (gptel--display-tool-results
             (list (list (or (mevedel-gptel-tool-spec info name)
                             (gptel--make-tool-internal :name name :function #'ignore
                                                        :description "Unknown tool" :include t))
                         (plist-get record :args)
                         (funcall result record)))
             info)))
      (plist-put info :tool-use all))))

(defun mevedel-gptel-append-response (text)
  "Append TEXT to the current buffer as the assistant's response.
It reads back as gptel's own response text does: a provider other
than gptel (an ACP agent) writes its answer this way."
  (save-excursion
    (goto-char (point-max))
    (let ((inhibit-read-only t))
      (insert (propertize text 'gptel 'response)))))

;; gptel's format for a settled call, written without a request: a
;; call the turn never finished (aborted, or Emacs stopped) still gets
;; a result, so that every later request is valid for every backend.
(defun mevedel-gptel-append-settled-call (id name args result)
  "Append tool call ID of NAME with ARGS and RESULT to the current buffer.
The text is what gptel writes for a finished call in the buffer's mode
\(Org or Markdown-like), so the call and its result reach the model."
  (save-excursion
    (goto-char (point-max))
    (let ((call (prin1-to-string (list :name name :args args)))
          (inhibit-read-only t))
      (unless (or (bobp) (eq (char-before) ?\n)) (insert "\n"))
      (if (derived-mode-p 'org-mode)
          (progn
            (require 'org-src)
            (insert "#+begin_tool (" name ")"
                    (propertize (org-escape-code-in-string (concat "\n" call "\n\n" result))
                                'gptel (cons 'tool id))
                    "\n#+end_tool\n"))
        (insert (propertize (format "``` tool (%s)" name) 'gptel 'ignore)
                (propertize (concat "\n" call "\n\n" result) 'gptel (cons 'tool id))
                (propertize "\n```\n" 'gptel 'ignore))))))

(defun mevedel-gptel-abort (fsm buffer)
  "Abort the request of FSM, whose data buffer is BUFFER.
Between network requests (tools running) there is no process to
stop: FSM moves to ABRT itself, its callback silenced."
  (if (cl-find-if (lambda (entry) (eq (cadr entry) fsm)) gptel--request-alist)
      (let ((inhibit-message t)) (gptel-abort buffer))
    (plist-put (gptel-fsm-info fsm) :callback #'ignore)
    (gptel--fsm-transition fsm 'ABRT)))

;;;; Backends

(defun mevedel-gptel-default-backend ()
  "Return gptel's default backend, choosing it (OpenAI) when none is set."
  (or (default-value 'gptel-backend)
      (progn (gptel--sanitize-model) (default-value 'gptel-backend))))

(defun mevedel-gptel-api-key (backend)
  "Return BACKEND's API key, found the way gptel does; signal without one."
  (let ((gptel-backend backend))
    (gptel--get-api-key)))

(defun mevedel-gptel-backends ()
  "Return gptel's configured backends as (NAME . BACKEND), as gptel lists them."
  (copy-sequence gptel--known-backends))

(defun mevedel-gptel-backend-problem (backend)
  "Return why BACKEND cannot take a request now, and what to do; nil if it can.
Checked before a turn starts: without a key gptel would fail inside
its request, and the turn would wait forever."
  (cond
   ((null backend) "No gptel backend is set: set `gptel-backend' (M-x customize-variable)")
   ((not (gptel-backend-p backend))
    (format "`gptel-backend' is %S, not a gptel backend (make one with gptel-make-openai, \
gptel-make-anthropic, gptel-make-ollama, ...)" backend))
   ((null (gptel-backend-key backend)) nil)
   ((condition-case nil
        (let* ((inhibit-message t)
               (key (mevedel-gptel-api-key backend)))
          (and (stringp key) (not (string-empty-p key))))
      (error nil))
    nil)
   (t (format "No API key for %s: set the backend's :key or `gptel-api-key', or add \
\"machine %s login apikey password KEY\" to your auth-source file (~/.authinfo)"
              (gptel-backend-name backend) (gptel-backend-host backend)))))

;;;; Tool-result media

(defvar mevedel-gptel--parsing nil
  "Non-nil while gptel parses a buffer into messages.")

(defvar mevedel-gptel--media-messages nil
  "While gptel parses a buffer: (TOOL-MESSAGE . MEDIA-MESSAGE) pairs.
Each MEDIA-MESSAGE is an OpenAI user message carrying a call's images,
to follow that call's result.")

(defun mevedel-gptel--region-media ()
  "Return the media references of the tool result region at point, or nil.
While gptel parses a buffer, point is inside the result it reads."
  (when (eq (car-safe (get-text-property (point) 'gptel)) 'tool)
    (let* ((end (next-single-property-change (point) 'gptel nil (point-max)))
           (at (text-property-not-all (point) end 'mevedel-tool-media nil)))
      (and at (get-text-property at 'mevedel-tool-media)))))

(defun mevedel-gptel--call-media (call)
  "Return the media payloads of the tool CALL gptel is sending a result for.
A result gptel has from the tool carries its references on its text;
one gptel reads back from the buffer has them on the buffer's text."
  (let* ((result (plist-get call :result))
         (refs (or (and (stringp result) (> (length result) 0)
                        (get-text-property 0 'mevedel-tool-media result))
                   (and mevedel-gptel--parsing (mevedel-gptel--region-media)))))
    (and refs (mevedel-tool-media-payloads refs mevedel-session-current))))

(defun mevedel-gptel--parse-tool-results (orig backend tool-use)
  "Call ORIG with BACKEND and TOOL-USE, then add each call's images.
Anthropic takes them inside the tool_result block; OpenAI's chat API
takes images only from the user, so a user message naming the call
follows its result."
  (let ((messages (funcall orig backend tool-use)))
    (dolist (call tool-use)
      (when-let* ((payloads (mevedel-gptel--call-media call))
                  (id (plist-get call :id)))
        (cond
         ((and (equal (plist-get messages :role) "user")
               (vectorp (plist-get messages :content)))
          (cl-loop for block across (plist-get messages :content)
                   when (equal (plist-get block :tool_use_id) id)
                   do (plist-put block :content
                                 (vconcat (list (list :type "text"
                                                      :text (plist-get block :content)))
                                          (mevedel-tool-media-anthropic-blocks payloads)))))
         ((and (consp messages) (consp (car messages)))
          (when-let* ((tool-message (cl-find id messages :key (lambda (m) (plist-get m :tool_call_id))
                                             :test #'equal)))
            (let ((media-message
                   (list :role "user"
                         :content (vconcat (list (list :type "text"
                                                       :text (format "Images the tool call %s returned:" id)))
                                           (mevedel-tool-media-openai-parts payloads)))))
              ;; A buffer's parser keeps only its first message: the
              ;; parse below puts this one in after it.
              (if mevedel-gptel--parsing
                  (push (cons tool-message media-message) mevedel-gptel--media-messages)
                (setq messages (append messages (list media-message))))))))))
    messages))

(defun mevedel-gptel--parse-buffer (orig backend &rest args)
  "Call ORIG with BACKEND and ARGS; put OpenAI media messages after their results."
  (let* ((mevedel-gptel--parsing t)
         (mevedel-gptel--media-messages nil)
         (prompts (or (mevedel-gptel--history-tail backend args orig)
                      (apply orig backend args))))
    (dolist (pair mevedel-gptel--media-messages)
      (when-let* ((tail (memq (car pair) prompts)))
        (setcdr tail (cons (cdr pair) (cdr tail)))))
    prompts))

;;;; Usage

;; Each backend's `gptel--BACKEND-update-tokens' (advice, before) gets
;; the usage object of a response as the provider sent it; gptel keeps
;; only sums that merge cache writes into input and drop reasoning.
;; The advice hands each response's counts, as reported, to
;; `mevedel-gptel-usage-functions'.

(defvar mevedel-gptel-usage-functions nil
  "Abnormal hook run with a request's info, the usage of a response and its source.
The usage is a plist of token counts: :input (input neither read from
nor written to the cache), :output (reasoning included), :cache-read,
:cache-write and :reasoning.  A count the provider did not report is
nil.  The source is a plist: :provider (the backend's name) and
:model (the model's name).")

(defun mevedel-gptel--count (&rest values)
  "Return the sum of VALUES that are counts, or nil when none is."
  (let ((counts (cl-remove-if-not #'natnump values)))
    (and counts (apply #'+ counts))))

(defun mevedel-gptel--report-usage (info &rest usage)
  "Run `mevedel-gptel-usage-functions' with INFO and the USAGE plist.
A value of USAGE that is not a count, or a key it leaves out, is nil."
  (run-hook-with-args 'mevedel-gptel-usage-functions info
                      (cl-loop for key in '(:input :output :cache-read :cache-write :reasoning)
                               append (list key (mevedel-gptel--count (plist-get usage key))))
                      (list :provider (and (plist-get info :backend)
                                           (gptel-backend-name (plist-get info :backend)))
                            :model (and (plist-get info :model)
                                        (format "%s" (plist-get info :model))))))

(defun mevedel-gptel--uncached (total cached)
  "Return TOTAL input less CACHED, nil when TOTAL is unknown."
  (and (natnump total) (- total (if (natnump cached) cached 0))))

(defun mevedel-gptel--anthropic-usage (usage info)
  "Report Anthropic's USAGE for the request INFO.
A streamed message_delta may carry only the output: the input counts
then come from the message_start noted in INFO."
  (when usage
    (let ((usage (append usage (plist-get info :mevedel-usage-start))))
      (mevedel-gptel--report-usage
       info :input (plist-get usage :input_tokens) :output (plist-get usage :output_tokens)
       :cache-read (plist-get usage :cache_read_input_tokens)
       :cache-write (plist-get usage :cache_creation_input_tokens)))))

(defun mevedel-gptel--openai-usage (usage info)
  "Report the USAGE of an OpenAI chat completion for the request INFO.
Its prompt_tokens include the cached ones (prompt_cache_hit_tokens on
some compatible servers)."
  (when usage
    (let ((cached (or (map-nested-elt usage '(:prompt_tokens_details :cached_tokens))
                      (plist-get usage :prompt_cache_hit_tokens))))
      (mevedel-gptel--report-usage
       info :input (mevedel-gptel--uncached (plist-get usage :prompt_tokens) cached)
       :output (plist-get usage :completion_tokens) :cache-read cached
       :reasoning (map-nested-elt usage '(:completion_tokens_details :reasoning_tokens))))))

(defun mevedel-gptel--openai-responses-usage (usage info)
  "Report the USAGE of an OpenAI response (Responses API) for the request INFO."
  (when usage
    (let ((cached (map-nested-elt usage '(:input_tokens_details :cached_tokens))))
      (mevedel-gptel--report-usage
       info :input (mevedel-gptel--uncached (plist-get usage :input_tokens) cached)
       :output (plist-get usage :output_tokens) :cache-read cached
       :reasoning (map-nested-elt usage '(:output_tokens_details :reasoning_tokens))))))

(defun mevedel-gptel--gemini-usage (usage info)
  "Report Gemini's USAGE (usageMetadata) for the request INFO.
Its candidates leave the thoughts out; both are billed as output."
  (when usage
    (let ((cached (plist-get usage :cachedContentTokenCount))
          (thoughts (plist-get usage :thoughtsTokenCount)))
      (mevedel-gptel--report-usage
       info :input (mevedel-gptel--uncached (plist-get usage :promptTokenCount) cached)
       :output (mevedel-gptel--count (plist-get usage :candidatesTokenCount) thoughts)
       :cache-read cached :reasoning thoughts))))

(defun mevedel-gptel--bedrock-usage (usage info)
  "Report Bedrock's USAGE (Converse API) for the request INFO."
  (when usage
    (mevedel-gptel--report-usage
     info :input (plist-get usage :inputTokens) :output (plist-get usage :outputTokens)
     :cache-read (plist-get usage :cacheReadInputTokens)
     :cache-write (plist-get usage :cacheWriteInputTokens))))

(defun mevedel-gptel--ollama-usage (usage info)
  "Report Ollama's USAGE for the request INFO."
  (when usage
    (mevedel-gptel--report-usage
     info :input (plist-get usage :prompt_eval_count) :output (plist-get usage :eval_count))))

;;;; Installation

(let ((native-comp-enable-subr-trampolines (mevedel-gptel--trampolines)))
  (advice-add 'json-parse-string :around #'mevedel-gptel--json-parse-string))
(advice-add 'gptel--parse-response :around #'mevedel-gptel--parse-response)
(advice-add 'gptel-curl--parse-stream :around #'mevedel-gptel--parse-stream)
(advice-add 'gptel--handle-tool-use :around #'mevedel-gptel--handle-tool-use)
(advice-add 'gptel--accept-tool-calls :around #'mevedel-gptel--accept-tool-calls)
(advice-add 'gptel-curl--sentinel :around #'mevedel-gptel--sentinel)
(advice-add 'gptel-curl--stream-cleanup :around #'mevedel-gptel--sentinel)
(advice-add 'gptel--parse-tool-results :around #'mevedel-gptel--parse-tool-results)
(advice-add 'gptel--parse-buffer :around #'mevedel-gptel--parse-buffer)
(advice-add 'gptel-curl--get-config :around #'mevedel-gptel--request-config)
(advice-add 'gptel--create-prompt-buffer :around #'mevedel-gptel--create-prompt-buffer)
(pcase-dolist (`(,function . ,reader)
               '((gptel--anthropic-update-tokens . mevedel-gptel--anthropic-usage)
                 (gptel--openai-update-tokens . mevedel-gptel--openai-usage)
                 (gptel--openai-responses-update-tokens . mevedel-gptel--openai-responses-usage)
                 (gptel--gemini-update-tokens . mevedel-gptel--gemini-usage)
                 (gptel--bedrock-update-tokens . mevedel-gptel--bedrock-usage)
                 (gptel--ollama-update-tokens . mevedel-gptel--ollama-usage)))
  (advice-add function :before reader))
(advice-add 'gptel-curl-get-response :around #'mevedel-gptel--get-response)
(add-hook 'kill-emacs-hook #'mevedel-gptel--drop-bodies)

(mapc #'mevedel-gptel--register (mevedel-tool-all))
(add-hook 'mevedel-tool-registered-functions #'mevedel-gptel--register)
(add-hook 'mevedel-tool-unregistered-functions #'mevedel-gptel--unregister)

;;;; Model capabilities

(defun mevedel-gptel-model-accepts-mime-p (mime &optional buffer)
  "Return non-nil when BUFFER's gptel model accepts media of type MIME.
BUFFER defaults to the current buffer; WebFetch asks before it
attaches an image.  Only Anthropic and OpenAI chat backends are sent
tool-result images (see \"Tool-result media\")."
  (with-current-buffer (if (buffer-live-p buffer) buffer (current-buffer))
    (and gptel-model
         (or (cl-typep gptel-backend 'gptel-anthropic) (cl-typep gptel-backend 'gptel-openai))
         (gptel--model-capable-p 'media)
         (gptel--model-mime-capable-p mime))))

(provide 'mevedel-gptel)
;;; mevedel-gptel.el ends here
