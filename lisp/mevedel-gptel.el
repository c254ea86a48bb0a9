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
;; - `gptel--request-alist', `gptel--fsm-transition': aborting a turn
;;   that has no network request running (`mevedel-gptel-abort').
;; - `gptel--sanitize-model': gptel's default backend
;;   (`mevedel-gptel-default-backend').
;; - `gptel--get-api-key': whether a backend's key can be found
;;   (`mevedel-gptel-api-key').
;;
;; When the backend accepted a request: gptel's state machine leaves
;; WAIT for TYPE when the response's status line arrives (streaming,
;; `gptel-curl--stream-filter') or when the whole response has been
;; read (`gptel-curl--sentinel'), with the HTTP status in the request
;; info's :http-status.  `mevedel-gptel-accepted-p' says that status is
;; 200; a request that reached TOOL or DONE was accepted too.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'gptel)
(require 'mevedel-pipeline)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-repair)

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
Then record the call order in INFO."
  (prog1 (let ((mevedel-gptel--decoding t))
           (apply parse backend response info rest))
    (mevedel-gptel--note-calls info t)))

(defun mevedel-gptel--parse-stream (parse backend info &rest rest)
  "Apply PARSE to BACKEND, INFO and REST, null kept distinct.
Then record the call order in INFO."
  (prog1 (let ((mevedel-gptel--decoding t))
           (apply parse backend info rest))
    (mevedel-gptel--note-calls info nil)))

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
confirmation are remembered for `gptel--accept-tool-calls'."
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
    (prog1 (funcall handle fsm)
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
  "Return the gptel tools of every registered mevedel tool."
  (delq nil (mapcar #'mevedel-tool-gptel-tool (mevedel-tool-all))))

;;;; Turns

(defun mevedel-gptel-send-fsm (extras)
  "Return a new request state machine: gptel-send's, with EXTRAS handlers.
EXTRAS is a list of (STATE WHERE FUNCTION): WHERE is :before (first),
:after (last) or :before-results (right before gptel puts the tool
results into the next request)."
  (gptel-make-fsm :table gptel-send--transitions
                  :handlers (mevedel-gptel--send-handlers extras)))

(defun mevedel-gptel--send-handlers (extras)
  "Return gptel-send's state handlers with EXTRAS added.
See `mevedel-gptel-send-fsm'."
  (let ((handlers (copy-tree gptel-send--handlers)))
    (pcase-dolist (`(,state ,where ,function) extras)
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

;;;; Installation

(advice-add 'json-parse-string :around #'mevedel-gptel--json-parse-string)
(advice-add 'gptel--parse-response :around #'mevedel-gptel--parse-response)
(advice-add 'gptel-curl--parse-stream :around #'mevedel-gptel--parse-stream)
(advice-add 'gptel--handle-tool-use :around #'mevedel-gptel--handle-tool-use)
(advice-add 'gptel--accept-tool-calls :around #'mevedel-gptel--accept-tool-calls)

(mapc #'mevedel-gptel--register (mevedel-tool-all))
(add-hook 'mevedel-tool-registered-functions #'mevedel-gptel--register)
(add-hook 'mevedel-tool-unregistered-functions #'mevedel-gptel--unregister)

(provide 'mevedel-gptel)
;;; mevedel-gptel.el ends here
