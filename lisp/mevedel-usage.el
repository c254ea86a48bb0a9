;;; mevedel-usage.el --- Token usage per request, turn and agent  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The core of mevedel's token accounting: one record per request a
;; provider reported usage for, kept per session and saved in its store
;; (session metadata "usage-records ID AT.N", a list of one record of
;; the root's turn ID: a request prints its own record, never its
;; turn's again; earlier versions saved a turn's under "usage-records
;; ID"), and sums of them per turn, per agent and for the session.
;;
;; A usage is a plist of token counts as the provider reported them:
;; :input, :output, :cache-read, :cache-write and :reasoning.  A count
;; the provider did not report stays nil, and a sum keeps a key nil
;; until some record reported it, so "unknown" never reads as zero.
;; A record is (:turn ID :root-turn ID :agent PATH :provider NAME :model
;; MODEL :at MS :usage USAGE): :turn is the turn of the agent that sent
;; it, :root-turn the root's turn it ran in (the same, for the root),
;; so a turn's sums include its agents' requests.  MODEL (a string, or
;; nil when unknown) prices it with `mevedel-model-prices'
;; (mevedel-model.el).
;;
;; Where records come from: every response of a gptel request made for
;; a chat (its turns, a child agent's, compaction, a handoff summary),
;; with the counts the adapter read from the provider's usage object
;; (`mevedel-gptel-usage-functions'); and each ACP turn (mevedel-acp.el:
;; an agent reports a turn's usage, not each of its model requests).
;; The records are the only token accounting: the view's header and
;; /usage, `bin/mevedel --json' and --list-sessions all sum them.  A
;; child agent's records belong to its session and are saved in the
;; session's store, with the agent's path.
;;
;; What it does not do: the price table (mevedel-model.el), showing
;; the sums (mevedel-view.el, mevedel-usage-view.el), cache policy or
;; budgets (they build on these records).

;;; Code:

(require 'cl-lib)
(require 'mevedel-chat)
(require 'mevedel-core)
(require 'mevedel-model)
(require 'mevedel-save)

;;; Records

(defconst mevedel-usage-keys '(:input :output :cache-read :cache-write :reasoning)
  "The token counts of a usage plist.")

(defvar mevedel-usage--records (make-hash-table :test #'eq :weakness 'key)
  "Each session's usage records, newest first.")

(defvar mevedel-usage--saved 0
  "Records this Emacs saved: with a record's time, its key is unique.")

(defun mevedel-usage-make (&rest counts)
  "Return the usage plist of COUNTS, keys of `mevedel-usage-keys'.
A count that is not a natural number (nil: not reported) stays nil."
  (cl-loop for key in mevedel-usage-keys
           for value = (plist-get counts key)
           append (list key (and (natnump value) value))))

(defun mevedel-usage--group (record)
  "Return the root turn RECORD is saved with, \"-\" for none."
  (or (plist-get record :root-turn) (plist-get record :turn) "-"))

(defun mevedel-usage-read (info)
  "Return the records saved in session metadata INFO (an alist), newest first."
  (let ((records nil))
    (pcase-dolist (`(,key . ,text) info)
      (when (and (string-prefix-p "usage-records" key) text (not (string-empty-p text)))
        (condition-case nil
            (let ((saved (car (read-from-string text))))
              (when (listp saved) (setq records (append saved records))))
          (error nil))))
    (sort records :key (lambda (record) (or (plist-get record :at) 0)) :reverse t)))

(defun mevedel-usage--restore (chat)
  "Return the records saved in the store of CHAT's session, newest first."
  (when-let* ((store (mevedel-session-store (mevedel-chat-session chat))))
    (mevedel-usage-read (mevedel-core-store-info-get store))))

(defun mevedel-usage--root (chat)
  "Return the root chat of CHAT's session: CHAT, or its workspace's live chat.
A child agent's records are saved in the session's store, the root's."
  (if-let* (((mevedel-chat-agent chat))
            (root (mevedel-chat-get (mevedel-chat-root chat)))
            ((eq (mevedel-chat-session root) (mevedel-chat-session chat))))
      root
    chat))

(defun mevedel-usage-records (chat)
  "Return the usage records of CHAT's session, newest first."
  (let* ((session (mevedel-chat-session chat))
         (records (gethash session mevedel-usage--records 'unread)))
    (if (eq records 'unread)
        (puthash session (mevedel-usage--restore chat) mevedel-usage--records)
      records)))

(defun mevedel-usage-record (chat usage &rest keys)
  "Record USAGE (see `mevedel-usage-make') of one request of CHAT.
KEYS: :turn (the turn's id; default CHAT's running turn), :agent (the
agent's path; default CHAT's agent, or \"/root\"), :provider (what
answered) and :model (the model that answered, which prices the
request).  The records are saved with the session's metadata."
  (let* ((turn (or (plist-get keys :turn)
                   (plist-get (mevedel-chat-turn chat) :id)))
         (root (mevedel-usage--root chat))
         (record (list :turn turn
                       :root-turn (if (eq root chat)
                                      turn
                                    (plist-get (or (mevedel-chat-turn root)
                                                   (car (mevedel-chat-turns root)))
                                               :id))
                       :agent (or (plist-get keys :agent) (mevedel-chat-agent chat) "/root")
                       :provider (plist-get keys :provider)
                       :model (and (plist-get keys :model) (format "%s" (plist-get keys :model)))
                       :at (truncate (* 1000 (float-time)))
                       :usage usage))
         (records (cons record (mevedel-usage-records chat))))
    (puthash (mevedel-chat-session chat) records mevedel-usage--records)
    (unless (mevedel-chat-agent root)
      (mevedel-save-checkpoint
       root `((,(format "usage-records %s %d.%d" (mevedel-usage--group record)
                        (plist-get record :at) (cl-incf mevedel-usage--saved))
               . ,(mevedel-save-print (list record))))))
    record))

(defun mevedel-usage-input (usage)
  "Return the whole input of USAGE: read from, written to or beside the cache."
  (+ (or (plist-get usage :input) 0) (or (plist-get usage :cache-read) 0)
     (or (plist-get usage :cache-write) 0)))

(defun mevedel-usage--gptel-response (info usage source)
  "Record USAGE, the usage of one response to the gptel request INFO.
SOURCE names its :provider and :model.  The request is the chat's
whose data buffer sent it, or the chat its :context names (a handoff
summary); its own requests also give the size of the chat's context."
  (let* ((context (plist-get info :context))
         (context (and (mevedel-chat-p context) context))
         (chat (or context (mevedel-chat-of-buffer (plist-get info :buffer)))))
    (when chat
      (let ((usage (apply #'mevedel-usage-make usage)))
        (mevedel-usage-record chat usage :provider (plist-get source :provider)
                              :model (plist-get source :model))
        (when (and context (eq (plist-get info :buffer) (mevedel-chat-data-buffer chat)))
          (setf (mevedel-chat-context-tokens chat)
                (+ (mevedel-usage-input usage) (or (plist-get usage :output) 0))))))))

(add-hook 'mevedel-gptel-usage-functions #'mevedel-usage--gptel-response)

;;; Sums

(defun mevedel-usage-sum (records)
  "Return the usage plist summing RECORDS; a key nobody reported stays nil."
  (cl-loop for key in mevedel-usage-keys
           append (list key (let ((counts (delq nil (mapcar (lambda (record)
                                                              (plist-get (plist-get record :usage)
                                                                         key))
                                                            records))))
                              (and counts (apply #'+ counts))))))

(defun mevedel-usage-turn-records (chat &optional turn)
  "Return the records of turn TURN (an id) of CHAT, newest first.
TURN defaults to CHAT's running or last turn.  A root's turn has the
requests of the agents that ran in it too."
  (when-let* ((turn (or turn (plist-get (or (mevedel-chat-turn chat)
                                            (car (mevedel-chat-turns chat)))
                                        :id))))
    (cl-remove-if-not (lambda (record)
                        (or (equal (plist-get record :turn) turn)
                            (equal (plist-get record :root-turn) turn)))
                      (mevedel-usage-records chat))))

(defun mevedel-usage-turn (chat &optional turn)
  "Return the usage summed over turn TURN (an id) of CHAT's session.
TURN defaults to CHAT's running or last turn; see
`mevedel-usage-turn-records'."
  (mevedel-usage-sum (mevedel-usage-turn-records chat turn)))

(defun mevedel-usage-agent (chat agent)
  "Return the usage summed over the requests of AGENT (a path) in CHAT's session."
  (mevedel-usage-sum (cl-remove agent (mevedel-usage-records chat)
                                :key (lambda (record) (plist-get record :agent))
                                :test-not #'equal)))

(defvar mevedel-usage--totals (make-hash-table :test #'eq :weakness 'key)
  "Each session's (RECORDS PRICES USAGE COST UNPRICED), see `mevedel-usage-totals'.")

(defun mevedel-usage-totals (chat)
  "Return (USAGE COST UNPRICED) of every request of CHAT's session.
USAGE sums them, COST is their cost as `mevedel-usage-records-cost'
gives it and UNPRICED how many have no price.  The header asks at each
redisplay: the sums are kept and only new records are added to them."
  (let* ((session (mevedel-chat-session chat))
         (records (mevedel-usage-records chat))
         (kept (gethash session mevedel-usage--totals)))
    (unless (and kept (eq (nth 0 kept) records) (eq (nth 1 kept) mevedel-model-prices))
      (let ((new nil) (tail records))
        (when (and kept (eq (nth 1 kept) mevedel-model-prices))
          (while (and tail (not (eq tail (nth 0 kept))))
            (push (pop tail) new)))
        (if (and kept (eq tail (nth 0 kept)) (eq (nth 1 kept) mevedel-model-prices))
            (setq kept (copy-sequence kept))
          (setq new (reverse records)
                kept (list nil mevedel-model-prices (mevedel-usage-sum nil) nil 0)))
        (dolist (record new)
          (let ((usage (plist-get record :usage))
                (cost (mevedel-usage-record-cost record)))
            (setf (nth 2 kept)
                  (cl-loop for key in mevedel-usage-keys
                           for sum = (plist-get (nth 2 kept) key)
                           for count = (plist-get usage key)
                           append (list key (if count (+ (or sum 0) count) sum))))
            (if cost
                (setf (nth 3 kept) (+ (or (nth 3 kept) 0) cost))
              (cl-incf (nth 4 kept)))))
        (setf (nth 0 kept) records)
        (puthash session kept mevedel-usage--totals)))
    (nthcdr 2 kept)))

(defun mevedel-usage-session (chat)
  "Return the usage summed over every request of CHAT's session."
  (car (mevedel-usage-totals chat)))

;;; Cost

(defun mevedel-usage-record-cost (record)
  "Return the cost of RECORD in US dollars, or nil when it has no price.
A record has a price when `mevedel-model-prices' prices its model and
every count it reports that is not zero.  A count the provider did not
report adds nothing; reasoning is billed as part of output."
  (let* ((usage (plist-get record :usage))
         (input (+ (or (plist-get usage :input) 0) (or (plist-get usage :cache-read) 0)
                   (or (plist-get usage :cache-write) 0)))
         (price (mevedel-model-price (plist-get record :model) input)))
    (when price
      (catch 'unpriced
        (cl-loop for key in '(:input :output :cache-read :cache-write)
                 for count = (plist-get usage key)
                 when (and count (> count 0))
                 sum (* count (or (plist-get price key) (throw 'unpriced nil)))
                 into micro
                 finally return (/ micro 1e6))))))

(defun mevedel-usage-records-cost (records)
  "Return the cost of RECORDS in US dollars, a float, or nil.
Nil means no record has a price (see `mevedel-usage-record-cost').
When only some have, the sum covers those and is a lower bound of
the real cost: `mevedel-usage-unpriced' returns the others, so that a
caller can say the figure is partial."
  (let ((costs (delq nil (mapcar #'mevedel-usage-record-cost records))))
    (and costs (float (apply #'+ costs)))))

(defun mevedel-usage-unpriced (records)
  "Return the RECORDS that have no price, in their order."
  (cl-remove-if #'mevedel-usage-record-cost records))

;;; Showing

(defun mevedel-usage-format-cost (records)
  "Return the cost of RECORDS for people: \"$0.0421\", \"≥$1.20\" or \"?\".
\"≥\" marks a sum that leaves out records without a price, \"?\"
records none of which has one; no records cost \"$0\"."
  (if-let* ((cost (mevedel-usage-records-cost records)))
      (mevedel-usage-format-dollars cost (mevedel-usage-unpriced records))
    (if records "?" "$0")))

(defun mevedel-usage-format-totals (chat)
  "Return the cost of CHAT's session as `mevedel-usage-format-cost' does."
  (pcase-let ((`(,_ ,cost ,unpriced) (mevedel-usage-totals chat)))
    (cond (cost (mevedel-usage-format-dollars cost (> unpriced 0)))
          ((> unpriced 0) "?")
          (t "$0"))))

(defun mevedel-usage-format-dollars (cost &optional partial)
  "Return COST in US dollars for people, marked with ≥ when PARTIAL."
  (concat (if partial "≥" "") (format (if (< cost 1) "$%.4f" "$%.2f") cost)))

(defun mevedel-usage-cache-share (usage)
  "Return the share of USAGE's input read from the cache, or nil.
Nil when no request reported cache reads, or there was no input."
  (let ((read (plist-get usage :cache-read))
        (input (mevedel-usage-input usage)))
    (and read (> input 0) (/ (float read) input))))

(defun mevedel-usage-group (records key)
  "Return RECORDS grouped by their KEY, ((VALUE . RECORDS) ...).
Groups come in the order their first record was made."
  (let ((groups nil))
    (dolist (record (reverse records))
      (let ((group (assoc (plist-get record key) groups)))
        (if group
            (push record (cdr group))
          (push (list (plist-get record key) record) groups))))
    (nreverse groups)))

(defun mevedel-usage-json (records)
  "Return the sums and cost of RECORDS as a plist for `json-serialize'.
Keys as the providers name them; an unknown count or cost is :null.
input_tokens is the input neither read from nor written to the cache."
  (let ((usage (mevedel-usage-sum records))
        (cost (mevedel-usage-records-cost records)))
    (list :input_tokens (or (plist-get usage :input) :null)
          :cache_read_tokens (or (plist-get usage :cache-read) :null)
          :cache_write_tokens (or (plist-get usage :cache-write) :null)
          :output_tokens (or (plist-get usage :output) :null)
          :reasoning_tokens (or (plist-get usage :reasoning) :null)
          :cost_usd (or cost :null)
          :cost_complete (if (and cost (not (mevedel-usage-unpriced records))) t :false))))

(defun mevedel-usage-record-json (record)
  "Return RECORD as a plist for `json-serialize': who, when, counts, cost."
  (append (list :turn (or (plist-get record :turn) :null)
                :agent (or (plist-get record :agent) :null)
                :provider (or (plist-get record :provider) :null)
                :model (or (plist-get record :model) :null)
                :at (or (plist-get record :at) :null))
          (butlast (mevedel-usage-json (list record)) 4)
          (list :cost_usd (or (mevedel-usage-record-cost record) :null))))

(provide 'mevedel-usage)
;;; mevedel-usage.el ends here
