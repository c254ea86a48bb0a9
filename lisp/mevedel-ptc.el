;;; mevedel-ptc.el --- ToolSearch, ToolCall and the specialist listing  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The model is offered a short native roster (tools declared :native);
;; every other registered tool is a specialist it reaches in three ways:
;;
;; - the specialist listing, mail a conversation receives when the
;;   listing changes (`mevedel-ptc-listing-mail'): one calling shape and
;;   summary per specialist, within `mevedel-ptc-listing-budget';
;; - ToolSearch, which answers a query with full contracts (one to
;;   three matches), calling shapes (more) or categories to try (none);
;; - ToolCall, which runs a program in the closed dialect of
;;   docs/ptc-dialect.md (mevedel://ptc-dialect.md).
;;
;; A ToolCall program is compiled and run by the native module (crates/mevedel-core/src/ptc/):
;; each run stops at the tool calls it needs, and this file's driver
;; starts them through `mevedel-pipeline-run-tool-outcome' (validation,
;; hooks, permission, cancellation) with ids TOOLCALL-ID/N and source
;; `ptc', at most `mevedel-ptc-parallelism' at once, feeds the results
;; back and runs the machine again.  Nothing blocks: the driver waits for
;; callbacks like any async tool.  A denied child aborts the program
;; with a bounded summary of what ran; other failures are values the
;; program sees.  The settled envelope's render-data holds the audit,
;; one entry per child (:ptc-children), drawn by `mevedel-ptc-render' as
;; one row per child with that tool's own renderer.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-chat)
(require 'mevedel-core)
(require 'mevedel-pipeline)
(require 'mevedel-render-data)
(require 'mevedel-session)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)


;;;; Customization

(defgroup mevedel-ptc nil
  "Programmatic tool calling: ToolSearch, ToolCall and the specialist listing."
  :group 'mevedel
  :prefix "mevedel-ptc-")

(defcustom mevedel-ptc-parallelism 4
  "Most nested calls of one ToolCall join that run at once."
  :type 'natnum)

(defcustom mevedel-ptc-step-budget 100000
  "Steps (evaluated expressions, elements an operation reads) a program may take."
  :type 'natnum)

(defcustom mevedel-ptc-depth-budget 64
  "How deep a program's expressions and function calls may nest."
  :type 'natnum)

(defcustom mevedel-ptc-value-budget 100000
  "Largest value a program may hold, in characters of its JSON form.
A child result larger than this becomes a failure the program sees."
  :type 'natnum)

(defcustom mevedel-ptc-retained-budget 400000
  "Characters of child results one program may keep in total."
  :type 'natnum)

(defcustom mevedel-ptc-composable-tools nil
  "Wrapped tools (CATEGORY/NAME) a ToolCall program may compose freely."
  :type '(repeat string))

(defcustom mevedel-ptc-result-collapse-line-threshold 20
  "Returned values longer than this many lines go into a collapsed Returned row.
Zero keeps every value inline."
  :type 'natnum)

(define-obsolete-variable-alias 'mevedel-tools-listing-budget
  'mevedel-ptc-listing-budget "0.1.0")
(defcustom mevedel-ptc-listing-budget 0.02
  "Share of the model's context window the specialist listing may use."
  :type 'number)

(define-obsolete-variable-alias 'mevedel-tools-listing-default-window
  'mevedel-ptc-listing-default-window "0.1.0")
(defcustom mevedel-ptc-listing-default-window 128000
  "Context window in tokens assumed when the model's is unknown."
  :type 'natnum)

(defconst mevedel-ptc--audit-preview-chars 2000
  "Characters kept of a direct call's result in its audit.
The envelope's own result has all of it.")

(defconst mevedel-ptc--summary-entries 10
  "Most completed calls a denial's partial summary names.")

(defconst mevedel-ptc--render-data-chars 4000
  "Largest printed render-data a child's audit entry keeps.")

(defconst mevedel-ptc--arg-chars 200
  "Longest argument string kept in a child's audit entry.")

;;;; The catalog

(defun mevedel-ptc-catalog (&optional buffer)
  "Return the tools a ToolCall program in data BUFFER may call.
That is every registered tool visible there (`mevedel-tool-visible-p':
a child agent's specialists are those frozen at its spawn) but
ToolCall itself and the native tools outside BUFFER's
`mevedel-tool-offered' (a child agent's role).  The list is kept for
later calls: do not modify it."
  (mevedel-ptc--catalog-tools (mevedel-ptc--catalog buffer)))

(defun mevedel-ptc-standalone-p (tool)
  "Return non-nil when TOOL may only be a ToolCall program's whole expression.
That is a tool declared :standalone, and a wrapped tool, whose
contract mevedel cannot vouch for, unless `mevedel-ptc-composable-tools'
names it."
  (if (mevedel-tool-wrap tool)
      (not (member (mevedel-tool-identity tool) mevedel-ptc-composable-tools))
    (mevedel-tool-standalone tool)))

;; Every ToolCall compiles its program against the catalog's names and
;; every ToolSearch searches it; with MCP servers it may hold thousands
;; of tools.  So a data buffer keeps its catalog, with the names and
;; the search index, until what it is made of changes: the registry or
;; the visibility of tools (`mevedel-tool-catalog-generation'), the
;; buffer's offered tools or frozen specialists, or the options
;; deciding natives and standalone tools.

(cl-defstruct (mevedel-ptc--catalog (:constructor mevedel-ptc--catalog-make)
                                    (:copier nil))
  "A data buffer's catalog, as built for KEY.
IDENTITIES and STANDALONE are the names a program may call and those it
may only call alone; INDEX is the ToolSearch index, made when first
searched."
  key tools identities standalone index)

(defvar-local mevedel-ptc--kept-catalog nil
  "This data buffer's `mevedel-ptc--catalog', as last built.")

(defvar mevedel-ptc--bufferless-catalog nil
  "The `mevedel-ptc--catalog' of calls without a data buffer, as last built.")

(defun mevedel-ptc--catalog (buffer)
  "Return the `mevedel-ptc--catalog' of data BUFFER, building it when out of date."
  (let* ((buffer (and (buffer-live-p buffer) buffer))
         (key (list mevedel-tool-catalog-generation mevedel-tool-visible-functions
                    mevedel-tool-native-extras mevedel-ptc-composable-tools
                    (and buffer (buffer-local-value 'mevedel-tool-offered buffer))
                    ;; A hash table, set once: `equal' compares it by identity.
                    (and buffer (buffer-local-value 'mevedel-tool-frozen-specialists buffer))))
         (kept (if buffer
                   (buffer-local-value 'mevedel-ptc--kept-catalog buffer)
                 mevedel-ptc--bufferless-catalog)))
    (if (and kept (equal key (mevedel-ptc--catalog-key kept)))
        kept
      (let* ((tools (mevedel-ptc--visible-tools buffer))
             (catalog (mevedel-ptc--catalog-make
                       :key key :tools tools
                       :identities (mapcar #'mevedel-tool-identity tools)
                       :standalone (mapcar #'mevedel-tool-identity
                                           (cl-remove-if-not #'mevedel-ptc-standalone-p tools)))))
        (if buffer
            (setf (buffer-local-value 'mevedel-ptc--kept-catalog buffer) catalog)
          (setq mevedel-ptc--bufferless-catalog catalog))
        catalog))))

(defun mevedel-ptc--visible-tools (buffer)
  "Return the tools of data BUFFER's catalog, read from the registry."
  (let ((offered (and buffer (buffer-local-value 'mevedel-tool-offered buffer))))
    (cl-remove-if (lambda (tool)
                    (or (equal (mevedel-tool-name tool) "ToolCall")
                        (and offered (mevedel-tool-native-p tool)
                             (not (member (mevedel-tool-name tool) offered)))
                        (not (mevedel-tool-visible-p tool buffer))))
                  (mevedel-tool-all))))

(defun mevedel-ptc--catalog-names (&optional buffer)
  "Return (NAMES . STANDALONE-NAMES): the identities a program in BUFFER may call."
  (let ((catalog (mevedel-ptc--catalog buffer)))
    (cons (mevedel-ptc--catalog-identities catalog)
          (mevedel-ptc--catalog-standalone catalog))))

(defun mevedel-ptc--search-index (buffer)
  "Return the ToolSearch index of data BUFFER's catalog."
  (let ((catalog (mevedel-ptc--catalog buffer)))
    (or (mevedel-ptc--catalog-index catalog)
        (setf (mevedel-ptc--catalog-index catalog)
              (mevedel-tool-search-index (mevedel-ptc--catalog-tools catalog))))))

(add-hook 'mevedel-resume-recovered-result-functions #'mevedel-ptc-recovered-result)

;;;; ToolSearch

(defvar mevedel-ptc-prepare-functions nil
  "Functions of (SESSION PROGRAM CALLBACK) readying SESSION's catalog.
PROGRAM is the text naming the tools about to be needed, or nil when
any may be.  ToolSearch (nil), ToolCall (its program) and Agent (the
child's role's tool names, or nil for a child inheriting its
delegator's catalog) call each in turn first and go on when it calls
CALLBACK with no arguments, which it must do once, at once or later.
MCP servers start this way on first use (see mevedel-mcp.el).")

(defun mevedel-ptc-prepared (program thunk)
  "Call THUNK once the calling session's catalog is ready for PROGRAM.
See `mevedel-ptc-prepare-functions'; THUNK runs inside the calling
tool's pipeline call."
  (let ((session (plist-get (mevedel-pipeline-current-context) :session))
        (thunk (mevedel-pipeline-continuation thunk)))
    (if (not session)
        (funcall thunk)
      (let ((step nil))
        (setq step (lambda (functions)
                     (if functions
                         (funcall (car functions) session program
                                  (lambda () (funcall step (cdr functions))))
                       (funcall thunk))))
        (funcall step mevedel-ptc-prepare-functions)))))

(defun mevedel-ptc-tool-search-async (callback args)
  "Answer ToolSearch ARGS through CALLBACK once the catalog is ready."
  (mevedel-ptc-prepared nil (lambda () (funcall callback (mevedel-ptc-tool-search args)))))

(defun mevedel-ptc-tool-search (args)
  "Answer ToolSearch ARGS (:query) over the caller's catalog."
  (let ((query (string-trim (or (plist-get args :query) ""))))
    (if (string-empty-p query)
        "Error: give ToolSearch a query: tool names, words of what you need, or a group"
      (plist-get (mevedel-tool-search
                  query (mevedel-ptc--search-index
                         (plist-get (mevedel-pipeline-current-context) :data-buffer)))
                 :text))))

;;;; The specialist listing

(defun mevedel-ptc-listing-section (tools budget)
  "Return the specialist listing of TOOLS within BUDGET characters, or nil.
One line per tool, its calling shape and summary, `[standalone only]'
marked; tools beyond BUDGET are counted and left to ToolSearch.  Nil
when TOOLS is empty."
  (when tools
    (let* ((head (concat "Specialist tools you can call through ToolCall "
                         "(ToolSearch gives a tool's full contract; "
                         "bracketed arguments are optional):\n"))
           (used (length head))
           (lines nil)
           (left 0))
      (dolist (tool tools)
        (let ((line (concat "- " (mevedel-tool-shape tool) " - " (mevedel-tool-summary tool)
                            (if (mevedel-ptc-standalone-p tool) " [standalone only]" "")
                            "\n")))
          (if (and (zerop left) (<= (+ used (length line)) budget))
              (progn (push line lines) (cl-incf used (length line)))
            (cl-incf left))))
      (concat "<specialist-tools>\n" head (apply #'concat (nreverse lines))
              (if (> left 0)
                  (format "(%d more: find them with ToolSearch.)\n" left)
                "")
              "</specialist-tools>"))))

(defun mevedel-ptc--listing-budget (chat)
  "Return the listing budget of CHAT in characters (four to a token)."
  (floor (* 4 mevedel-ptc-listing-budget
            (or (mevedel-chat-context-window chat) mevedel-ptc-listing-default-window))))

(defun mevedel-ptc--last-listing (buffer)
  "Return the last specialist listing of data BUFFER still sent to the model.
Nil when there is none.
A listing in turns a compaction replaced by its summary
\(`mevedel-compacted') is no longer sent, so it does not count."
  (with-current-buffer buffer
    (save-excursion
      (goto-char (point-max))
      (let (found)
        (while (and (not found) (search-backward "</specialist-tools>" nil t))
          (let ((end (+ (point) (length "</specialist-tools>"))))
            (if (get-text-property (point) 'mevedel-compacted)
                (goto-char (point-min))
              (when-let* ((start (search-backward "<specialist-tools>" nil t)))
                (setq found (buffer-substring-no-properties start end))))))
        found))))

(defun mevedel-ptc-listing-mail (chat)
  "Return CHAT's specialist listing as mail when it differs from the last one sent.
For `mevedel-chat-message-functions'.  The last listing is the one the
chat's data buffer holds, so a failed request (whose mail is taken out
again) or a resumed session gets it again."
  (when-let* ((buffer (mevedel-chat-data-buffer chat))
              (listing (mevedel-ptc-listing-section
                        (cl-remove-if #'mevedel-tool-native-p (mevedel-ptc-catalog buffer))
                        (mevedel-ptc--listing-budget chat))))
    (unless (equal listing (mevedel-ptc--last-listing (mevedel-chat-data-buffer chat)))
      (list listing))))

(add-hook 'mevedel-chat-message-functions #'mevedel-ptc-listing-mail)

;;;; ToolCall: running a program

(defvar mevedel-ptc--runs (make-hash-table :test #'equal)
  "Programs running now, by the ToolCall's tool-use ID.")

(cl-defstruct (mevedel-ptc--run (:constructor mevedel-ptc--run-make) (:copier nil))
  machine id direct data-buffer session callback
  (queue nil) (active 0) (cancels (make-hash-table)) (children nil)
  settled busy slice media checkpoint-timer (started (float-time))
  (progress nil :documentation "Latest reported progress, (N . TEXT) per call."))

(defun mevedel-ptc--observe (event info)
  "Track a nested call of a running program: waiting for permission, progress.
For `mevedel-pipeline-tool-event-hook': EVENT and INFO are its."
  (when-let* (((memq event '(permission-asked permission-approved progress)))
              ((eq (plist-get info :source) 'ptc))
              (run (gethash (plist-get info :parent-id) mevedel-ptc--runs))
              (n (string-to-number (car (last (split-string (plist-get info :tool-use-id) "/"))))))
    (if (eq event 'progress)
        (setf (alist-get n (mevedel-ptc--run-progress run))
              (format "%s: %s" (plist-get info :name) (plist-get info :progress)))
      (mevedel-ptc--set-child run n :waiting (eq event 'permission-asked)))
    (mevedel-ptc--progress run)))

(add-hook 'mevedel-pipeline-tool-event-hook #'mevedel-ptc--observe)

(defun mevedel-ptc--json-args (json)
  "Return the argument plist of the JSON object text JSON, JSON-faithful."
  (json-parse-string json :object-type 'plist :array-type 'array
                     :null-object :null :false-object :json-false))

(defun mevedel-ptc--text (value)
  "Return the tool result VALUE as the text a program sees."
  (cond ((stringp value) (substring-no-properties value))
        ((null value) "")
        ((symbolp value) (symbol-name value))
        (t (prin1-to-string value))))

(defun mevedel-ptc--audit-args (args)
  "Return ARGS for a child's audit: long strings cut, big aggregates dropped."
  (cl-loop for (key value) on args by #'cddr
           append (list key
                        (cond ((and (stringp value) (> (length value) mevedel-ptc--arg-chars))
                               (concat (substring value 0 mevedel-ptc--arg-chars) "…"))
                              ((and (or (vectorp value) (consp value))
                                    (> (length (prin1-to-string value)) mevedel-ptc--arg-chars))
                               "[dropped: too large]")
                              (t value)))))

(defun mevedel-ptc--audit-render-data (data)
  "Return a child's render DATA for its audit: dropped whole when it is large.
Its approval records stay, since they are small and say who allowed it."
  (if (<= (length (prin1-to-string data)) mevedel-ptc--render-data-chars)
      data
    (when-let* ((approvals (plist-get data :permission-approvals)))
      (list :permission-approvals approvals))))

(defun mevedel-ptc--progress (run)
  "Publish RUN's live aggregate (active tools, counts) to its chat, if any."
  (when-let* (((fboundp 'mevedel-chat-of-buffer))
              (chat (mevedel-chat-of-buffer (mevedel-ptc--run-data-buffer run)))
              (id (mevedel-ptc--run-id run)))
    (let ((children (mevedel-ptc--run-children run)))
      (mevedel-chat-set-progress
       chat id
       (unless (mevedel-ptc--run-settled run)
         (list :ptc-live t
               :ptc-active (cl-loop for c in children
                                    when (eq (plist-get c :status) 'running)
                                    collect (plist-get c :tool))
               :ptc-done (cl-count-if (lambda (c) (memq (plist-get c :status) '(success error)))
                                      children)
               :ptc-failed (cl-count 'error children :key (lambda (c) (plist-get c :status)))
               :ptc-waiting (cl-count-if (lambda (c) (and (eq (plist-get c :status) 'running)
                                                          (plist-get c :waiting)))
                                         children)
               :progress-text (cl-loop for (n . text) in (mevedel-ptc--run-progress run)
                                       when (eq (plist-get (mevedel-ptc--child run n) :status)
                                                'running)
                                       return text)))))))

(defun mevedel-ptc--child (run n)
  "Return RUN's audit entry of call N."
  (cl-find n (mevedel-ptc--run-children run) :key (lambda (c) (plist-get c :n))))

(defun mevedel-ptc--set-child (run n &rest props)
  "Set PROPS in RUN's audit entry of call N."
  (let ((entry (mevedel-ptc--child run n)))
    (cl-loop for (k v) on props by #'cddr do (setq entry (plist-put entry k v)))
    (setf (mevedel-ptc--run-children run)
          (mapcar (lambda (c) (if (eql (plist-get c :n) n) entry c))
                  (mevedel-ptc--run-children run)))))

;;;; The durable envelope

;; A ToolCall whose program calls tools records its envelope in the
;; session's metadata before the first nested call runs, and again at
;; most once a second while nested calls start and settle.  If Emacs stops mid-program, resuming settles the call
;; from that record: its row shows what had run, not only that it was
;; cut off.  The interpreter's own state is never resumed.

(defun mevedel-ptc--checkpoint-key (id)
  "Return the session metadata key of the envelope of ToolCall ID."
  (concat "ptc-envelope:" id))

(defun mevedel-ptc--store (run)
  "Return the open session store RUN's envelope is recorded in, or nil."
  (let ((session (mevedel-ptc--run-session run)))
    (and (mevedel-session-p session) (mevedel-session-store session))))

(defun mevedel-ptc--checkpoint (run)
  "Record RUN's envelope (its audit so far), or remove the record once RUN settled.
The write is queued before anything the nested calls write later."
  (when-let* ((store (mevedel-ptc--store run)))
    (condition-case err
        (mevedel-core-store-info-set
         store (list (cons (mevedel-ptc--checkpoint-key (mevedel-ptc--run-id run))
                           (if (mevedel-ptc--run-settled run)
                               ""
                             (let ((print-length nil) (print-level nil) (print-escape-newlines t))
                               (prin1-to-string
                                (list :direct (mevedel-ptc--run-direct run)
                                      :children (mevedel-ptc--run-children run))))))))
      (mevedel-core-error
       (display-warning 'mevedel (format "ToolCall %s: recording its progress failed: %s"
                                         (mevedel-ptc--run-id run) (error-message-string err)))))))

(defun mevedel-ptc--checkpoint-soon (run)
  "Record RUN's changed audit with the next write, at most once a second.
One record per nested call would rewrite the whole audit each time."
  (unless (or (mevedel-ptc--run-checkpoint-timer run) (not (mevedel-ptc--store run)))
    (setf (mevedel-ptc--run-checkpoint-timer run)
          (run-at-time 1 nil (lambda ()
                               (setf (mevedel-ptc--run-checkpoint-timer run) nil)
                               (unless (mevedel-ptc--run-settled run)
                                 (mevedel-ptc--checkpoint run)))))))

(defun mevedel-ptc--checkpoint-end (run)
  "Remove the record of the settled RUN, if it made one."
  (when-let* ((timer (mevedel-ptc--run-checkpoint-timer run)))
    (cancel-timer timer)
    (setf (mevedel-ptc--run-checkpoint-timer run) nil))
  (when (mevedel-ptc--run-children run)
    (mevedel-ptc--checkpoint run)))

(defun mevedel-ptc-recovered-result (store info id name _args)
  "Return the result of ToolCall ID, cut off when Emacs stopped, from its record.
INFO is STORE's saved metadata.  NAME must be ToolCall.  The record's
nested calls that were still running are marked interrupted; the
record is removed.  Return nil without a usable record."
  (when-let* (((equal name "ToolCall"))
              (key (mevedel-ptc--checkpoint-key id))
              (printed (cdr (assoc key info)))
              ((not (string-empty-p printed))))
    (mevedel-core-store-info-set store (list (cons key "")))
    (when-let* ((record (ignore-errors (car (read-from-string printed))))
                ((plist-get record :children)))
      (let* ((children (mapcar (lambda (c)
                                 (if (eq (plist-get c :status) 'running)
                                     (plist-put (copy-sequence c) :status 'error)
                                   c))
                               (plist-get record :children)))
             (finished (cl-count-if-not (lambda (c) (eq (plist-get c :status) 'error)) children)))
        (concat (format "Error: Emacs stopped while this ToolCall program ran; %d of its %d nested calls had finished (%s).  Check their effects before running it again."
                        finished (length children) (mevedel-ptc--tally children))
                (mevedel-render-data-encode
                 (list :status 'error :ptc-children children :ptc-direct (plist-get record :direct))
                 id))))))

(defun mevedel-ptc--launch (run request)
  "Start the nested call REQUEST, (N TOOL ARGS-JSON BATCH), of RUN."
  (pcase-let* ((`(,n ,name ,json ,batch) request)
               (tool (mevedel-tool-by-identity name))
               (args (mevedel-ptc--json-args json))
               (child-id (format "%s/%d" (mevedel-ptc--run-id run) n)))
    (setf (mevedel-ptc--run-children run)
          (append (mevedel-ptc--run-children run)
                  (list (list :n n :id child-id :tool name :args (mevedel-ptc--audit-args args)
                              :batch batch :status 'running))))
    (cl-incf (mevedel-ptc--run-active run))
    (if (= 1 (length (mevedel-ptc--run-children run)))
        (mevedel-ptc--checkpoint run)
      (mevedel-ptc--checkpoint-soon run))
    (if (null tool)
        (mevedel-ptc--child-settled
         run n (list :status 'error
                     :result (format "Error: the tool %s is no longer registered" name)))
      (mevedel-ptc--progress run)
      (let ((cancel (mevedel-pipeline-run-tool-outcome
                     tool args (lambda (outcome) (mevedel-ptc--child-settled run n outcome))
                     :tool-use-id child-id :parent-id (mevedel-ptc--run-id run) :source 'ptc
                     :bound (mevedel-ptc--bound run tool)
                     :data-buffer (mevedel-ptc--run-data-buffer run)
                     :session (mevedel-ptc--run-session run))))
        (when (eq (plist-get (mevedel-ptc--child run n) :status) 'running)
          (puthash n cancel (mevedel-ptc--run-cancels run)))))))

(defun mevedel-ptc--bound (run tool)
  "Return the characters a result of TOOL called by RUN may have unsaved.
A direct call is the tool's own call, bounded by the tool's own limit
\(`mevedel-pipeline-result-limit'); a composed program's calls by
the value budget, which only values a program computes answer to."
  (min mevedel-ptc-value-budget
       (or (and (mevedel-ptc--run-direct run) (mevedel-pipeline-result-limit tool))
           mevedel-ptc-value-budget)))

(defun mevedel-ptc--child-settled (run n outcome)
  "Record OUTCOME of RUN's call N, feed it to the machine and go on."
  (remhash n (mevedel-ptc--run-cancels run))
  (unless (mevedel-ptc--run-settled run)
    (cl-decf (mevedel-ptc--run-active run))
    (let* ((status (if (eq (plist-get outcome :status) 'error) 'error 'success))
           (text (mevedel-ptc--text (plist-get outcome :result)))
           (kept (if (or (mevedel-ptc--run-direct run)
                         (> (length text) mevedel-ptc-value-budget))
                     (mevedel-ptc--preview text)
                   text)))
      ;; A direct call's images are the program's: they reach the model.
      (when (mevedel-ptc--run-direct run)
        (setf (mevedel-ptc--run-media run) (plist-get outcome :media)))
      (mevedel-ptc--set-child run n :status (if (plist-get outcome :denied) 'denied status)
                              :result kept
                              :render-data (mevedel-ptc--audit-render-data
                                            (plist-get outcome :render-data)))
      (mevedel-ptc--checkpoint-soon run)
      (if (plist-get outcome :denied)
          (mevedel-ptc--abort-denied run n text)
        (mevedel-core-ptc-feed (mevedel-ptc--run-machine run) n (eq status 'success) text)
        (mevedel-ptc--progress run)
        (mevedel-ptc--kick run)))))

(defun mevedel-ptc--preview (text)
  "Return TEXT cut to the audit's preview size, saying so."
  (if (<= (length text) mevedel-ptc--audit-preview-chars)
      text
    (format "%s\n[... %d more characters]" (substring text 0 mevedel-ptc--audit-preview-chars)
            (- (length text) mevedel-ptc--audit-preview-chars))))

(defun mevedel-ptc--kick (run)
  "Advance RUN: start what is queued, or run the machine when results are in.
Reentrant calls (a child that settles synchronously) return at once;
the running loop sees their effect.  An interactive loop that has
worked for `mevedel-pipeline-yield-budget' goes on from a timer."
  (unless (mevedel-ptc--run-busy run)
    (setf (mevedel-ptc--run-busy run) t
          (mevedel-ptc--run-slice run) (float-time))
    (unwind-protect
        (catch 'yield
          (while (and (not (mevedel-ptc--run-settled run))
                      (or (and (mevedel-ptc--run-queue run)
                               (< (mevedel-ptc--run-active run) (max 1 mevedel-ptc-parallelism)))
                          (and (null (mevedel-ptc--run-queue run))
                               (zerop (mevedel-ptc--run-active run)))))
            (when (and (funcall mevedel-pipeline-interactive-function)
                       (> (- (float-time) (mevedel-ptc--run-slice run))
                          mevedel-pipeline-yield-budget))
              (run-at-time 0 nil #'mevedel-ptc--kick run)
              (throw 'yield nil))
            (if (mevedel-ptc--run-queue run)
                (mevedel-ptc--launch run (pop (mevedel-ptc--run-queue run)))
              (mevedel-ptc--step run))))
      (setf (mevedel-ptc--run-busy run) nil))))

(defun mevedel-ptc--step (run)
  "Run RUN's machine to its next requests, or settle RUN when it ends."
  (pcase (mevedel-core-ptc-resume (mevedel-ptc--run-machine run))
    (`(calls ,requests) (setf (mevedel-ptc--run-queue run) requests))
    (`(done ,text ,steps) (mevedel-ptc--finish run 'success text steps))
    (`(failed ,message ,steps)
     (mevedel-ptc--note-unknown-tool run message)
     (mevedel-ptc--finish run 'error
                          (if (and (mevedel-ptc--run-direct run) (mevedel-ptc--run-children run))
                              message
                            (concat "Error: the ToolCall program failed: " message))
                          steps))))

(defun mevedel-ptc--note-unknown-tool (run message)
  "Tell RUN's chat when its failure MESSAGE names a tool the catalog lacks.
Such a program does not compile, so it fails before any call.  The
dialect's operations are lower case: a capitalized name, or
CATEGORY/NAME, was meant as a tool, which the catalog does not have,
as a native call of a tool it was not offered."
  (when-let* (((null (mevedel-ptc--run-children run)))
              ((string-match "`\\([^`]+\\)` is neither an operation of the dialect nor a tool"
                             message))
              (name (match-string 1 message))
              ((let ((case-fold-search nil))
                 (string-match-p "\\`\\(?:[A-Z]\\|[^/]+/.\\)" name)))
              (chat (mevedel-chat-of-buffer (mevedel-ptc--run-data-buffer run))))
    (mevedel-chat-note-unknown-tool chat name)))

(defun mevedel-ptc--span (run outcome &optional text)
  "Record RUN's ptc-script telemetry span, ending with OUTCOME now.
Only the outcome, the budget a failure TEXT names, the nested-call
count and the duration: never the program, arguments or results."
  (mevedel-pipeline-record-telemetry
   (mevedel-ptc--run-session run)
   (list :event 'ptc-script
         :tool-use-id (mevedel-ptc--run-id run)
         :origin (mevedel-pipeline-telemetry-origin (mevedel-ptc--run-data-buffer run))
         :outcome outcome
         :budget (and text (string-match "\\<\\(step\\|value\\|retained\\|depth\\) budget\\>" text)
                      (intern (match-string 1 text)))
         :nested (length (mevedel-ptc--run-children run))
         :ms (round (* 1000 (- (float-time) (mevedel-ptc--run-started run)))))))

(defun mevedel-ptc--finish (run status text &optional count)
  "Settle RUN once with STATUS, result TEXT and the step COUNT of its run."
  (unless (mevedel-ptc--run-settled run)
    (setf (mevedel-ptc--run-settled run) t)
    (remhash (mevedel-ptc--run-id run) mevedel-ptc--runs)
    (mevedel-ptc--cancel-children run)
    (mevedel-ptc--progress run)
    (mevedel-ptc--checkpoint-end run)
    (mevedel-ptc--span run status (and (eq status 'error) text))
    (funcall (mevedel-ptc--run-callback run)
             (list :result text :status status :media (mevedel-ptc--run-media run)
                   :render-data (list :ptc-children (mevedel-ptc--run-children run)
                                      :ptc-direct (mevedel-ptc--run-direct run)
                                      :ptc-steps (or count 0))))))

(defun mevedel-ptc--cancel-children (run)
  "Cancel every nested call of RUN still in flight; forget queued ones.
RUN is settled already, so the cancelled calls' outcomes change nothing
but their audit entries."
  (setf (mevedel-ptc--run-queue run) nil)
  (let ((cancels nil))
    (maphash (lambda (n cancel) (push (cons n cancel) cancels)) (mevedel-ptc--run-cancels run))
    (clrhash (mevedel-ptc--run-cancels run))
    (pcase-dolist (`(,n . ,cancel) cancels)
      (funcall cancel)
      (mevedel-ptc--set-child run n :status 'error :result "Error: cancelled"))))

(defun mevedel-ptc--abort-denied (run n refusal)
  "Abort RUN because permission refused its call N with REFUSAL."
  (let* ((child (mevedel-ptc--child run n))
         (done (cl-remove-if (lambda (c) (memq (plist-get c :status) '(running denied)))
                             (mevedel-ptc--run-children run))))
    (mevedel-ptc--finish
     run 'error
     (concat
      (format "Permission denied: the ToolCall program stopped at call %d (%s): %s\n"
              n (plist-get child :tool) (string-trim (mevedel-ptc--preview refusal)))
      (if done
          (concat (format "Calls completed before it (%d):\n" (length done))
                  (mapconcat (lambda (c)
                               (format "- %s %s: %s" (plist-get c :tool)
                                       (mevedel-tool-render-shorten
                                        (prin1-to-string (plist-get c :args)) 60)
                                       (plist-get c :status)))
                             (take mevedel-ptc--summary-entries done) "\n")
                  (if (> (length done) mevedel-ptc--summary-entries)
                      (format "\n(and %d more)" (- (length done) mevedel-ptc--summary-entries))
                    ""))
        "No call completed before it.")
      "\nDo not retry the denied call unchanged."))))

(defun mevedel-ptc-run-program (callback args)
  "Run the ToolCall program in ARGS (:program); CALLBACK gets the envelope."
  (mevedel-ptc-prepared (plist-get args :program)
                        (lambda () (mevedel-ptc--run-program callback args))))

(defun mevedel-ptc--run-program (callback args)
  "Run the ToolCall program in ARGS with its catalog ready; CALLBACK gets it."
  (let* ((context (mevedel-pipeline-current-context))
         (names (mevedel-ptc--catalog-names (plist-get context :data-buffer)))
         (machine (mevedel-core-ptc-start
                   (or (plist-get args :program) "")
                   (car names)
                   (cdr names)
                   (list mevedel-ptc-step-budget mevedel-ptc-depth-budget
                         mevedel-ptc-value-budget mevedel-ptc-retained-budget)))
         (run (mevedel-ptc--run-make
               :machine machine :direct (mevedel-core-ptc-direct machine)
               :id (or (plist-get context :tool-use-id)
                       (format "ToolCall-%x" (random most-positive-fixnum)))
               :data-buffer (or (plist-get context :data-buffer) (current-buffer))
               :session (plist-get context :session)
               :callback callback)))
    (mevedel-pipeline-add-canceller
     (lambda ()
       (unless (mevedel-ptc--run-settled run)
         (setf (mevedel-ptc--run-settled run) t)
         (remhash (mevedel-ptc--run-id run) mevedel-ptc--runs)
         (mevedel-ptc--cancel-children run)
         (mevedel-ptc--progress run)
         (mevedel-ptc--checkpoint-end run)
         (mevedel-ptc--span run 'cancelled))))
    (puthash (mevedel-ptc--run-id run) run mevedel-ptc--runs)
    (mevedel-ptc--kick run)))

;;;; Rendering

(defun mevedel-ptc--child-row (child)
  "Return the view's child-call entry of the audit entry CHILD."
  (list (plist-get child :tool) (plist-get child :args) (plist-get child :result)
        (append (list :status (pcase (plist-get child :status)
                                ('denied 'error) ('running 'running) (s s)))
                (plist-get child :render-data))
        (plist-get child :batch) (plist-get child :id)))

(defun mevedel-ptc--tally (children)
  "Return a short tally of CHILDREN's tools, e.g. \"Read ×2, Grep\"."
  (let ((counts nil))
    (dolist (c children)
      (let ((cell (assoc (plist-get c :tool) counts)))
        (if cell (cl-incf (cdr cell)) (push (cons (plist-get c :tool) 1) counts))))
    (mapconcat (lambda (cell) (if (> (cdr cell) 1) (format "%s ×%d" (car cell) (cdr cell))
                                (car cell)))
               (nreverse counts) ", ")))

(defun mevedel-ptc-render (_name args result render-data)
  "Render a ToolCall call with ARGS, RESULT and RENDER-DATA.
A program that is one direct call renders as that tool's own row; a
composed program as one row whose children are the nested calls.  The
header says what ran (\"Ran 3 calls: Read ×3\"), not the tool's name."
  (let* ((children (plist-get render-data :ptc-children))
         (direct (plist-get render-data :ptc-direct))
         (child (car children)))
    (cond
     ((plist-get render-data :ptc-live)
      (list :header (format "%s%s"
                            (if-let* ((active (plist-get render-data :ptc-active)))
                                (concat "Running " (mevedel-ptc--tally
                                                    (mapcar (lambda (n) (list :tool n)) active)))
                              "Running calls")
                            (format " · %d done%s%s" (or (plist-get render-data :ptc-done) 0)
                                    (if (> (or (plist-get render-data :ptc-failed) 0) 0)
                                        (format ", %d failed" (plist-get render-data :ptc-failed))
                                      "")
                                    (if (> (or (plist-get render-data :ptc-waiting) 0) 0)
                                        (format ", %d waiting for permission"
                                                (plist-get render-data :ptc-waiting))
                                      "")))
            :expandable-p nil))
     ((and direct child (null (cdr children)) (not (eq (plist-get child :status) 'denied)))
      (mevedel-tool-render-row (plist-get child :tool) (plist-get child :args) result
                               (plist-get child :render-data) mevedel-tool-render-summary-only))
     (t
      (let* ((failed (cl-count-if (lambda (c) (memq (plist-get c :status) '(error denied)))
                                  children))
             (status (cond ((eq (plist-get render-data :status) 'error) 'error)
                           ((> failed 0) 'warning)
                           (t 'success)))
             (lines (and result (mevedel-tool-render-count-lines result)))
             (collapse (and result (eq status 'success)
                            (> mevedel-ptc-result-collapse-line-threshold 0)
                            (> lines mevedel-ptc-result-collapse-line-threshold))))
        (list :header (format "%s%s"
                              (if children
                                  (format "Ran %d call%s: %s" (length children)
                                          (if (cdr children) "s" "")
                                          (mevedel-ptc--tally children))
                                (concat "Ran a program: "
                                        (mevedel-tool-render-shorten
                                         (or (plist-get args :program) "") 60)))
                              (if (> failed 0) (format " · %d failed" failed) ""))
              :status status
              :body (unless (or mevedel-tool-render-summary-only collapse) result)
              :body-mode nil
              :expandable-p t
              :initially-collapsed-p t
              :child-calls
              (unless mevedel-tool-render-summary-only
                (append (mapcar #'mevedel-ptc--child-row children)
                        (when collapse
                          (list (list "Returned" nil result (list :status 'success)
                                      nil nil)))))))))))

(defun mevedel-ptc-render-search (_name args result _render-data)
  "Render a ToolSearch call with ARGS and RESULT."
  (list :header (format "ToolSearch %s" (mevedel-tool-render-shorten
                                         (or (plist-get args :query) "") 60))
        :body result :expandable-p t :initially-collapsed-p t))

;;;; Declarations

(mevedel-define-tool ToolSearch
  :native t
  :description "Find tools beyond your native ones and get their full contracts.
When to use: you need a capability your native tools lack (Emacs
introspection, code outlines, the web, executions...), or you need the
exact arguments of a specialist before calling it with ToolCall, or a
ToolCall failed on a specialist's arguments.
How: query is words matched (case-insensitive, any word) against tool
names, summaries, categories and groups. One to three matches return
full contracts; more return calling shapes - search again with one or
two exact names for their contracts. No match lists categories and
groups to try. Finding a tool does not authorize calling it."
  :args ((query string :required "Tool names, groups or words of what you need, e.g. \"outline\" or \"Imenu Xref\""))
  :read-only-p t
  :async-p t
  :groups '(discovery)
  :function #'mevedel-ptc-tool-search-async
  :renderer #'mevedel-ptc-render-search)

(mevedel-define-tool ToolCall
  :native t
  :description "Call specialist tools (and native ones) with a small program.
When to use: to call a specialist from your tool listing or ToolSearch;
to make several independent calls at once (parallel, parallel-map); to
chain calls and keep only what you need of their results.
How: program is one expression in a closed Lisp-like dialect:
  (Imenu :file_path \"lisp/a.el\")                  ; one call, shown as that tool
  (let [r (Grep :pattern \"defun\" :path \"lisp\")] (take (lines r) 5))
  (parallel-map [f [\"a.el\" \"b.el\"]] (Imenu :file_path f))  ; results in input order
  (parallel (Read :file_path \"a\") (Glob :pattern \"*.md\"))
Arguments are named :arg value, as in the tool's contract. A failed
call is a value: test it with (failed? x), read it with (error-message x).
A permission denial stops the whole program. Standalone-only tools must
be the whole program. Budgets bound steps, nesting and value sizes. The
operations (strings, numbers, lists, maps, get-in, json-parse, re-find,
map/filter/reduce...) are listed in mevedel://ptc-dialect.md; Read it
before writing anything beyond simple calls."
  :args ((program string :required "The program: one expression, e.g. (Imenu :file_path \"x.el\")"))
  ;; What a program returns is bounded as any result is; a direct
  ;; call's was bounded already, by its own tool's limit.
  :max-result-size 50000
  :async-p t
  :read-only-p t
  :groups '(discovery)
  :function #'mevedel-ptc-run-program
  :renderer #'mevedel-ptc-render)

(provide 'mevedel-ptc)
;;; mevedel-ptc.el ends here
