;;; mevedel-usage.el --- Token usage per request, turn and agent  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The core of mevedel's token accounting: one record per request a
;; provider reported usage for, kept per session and saved in its store
;; (session metadata "usage-records"), and sums of them per turn, per
;; agent and for the session.
;;
;; A usage is a plist of token counts as the provider reported them:
;; :input, :output, :cache-read, :cache-write and :reasoning.  A count
;; the provider did not report stays nil, and a sum keeps a key nil
;; until some record reported it, so "unknown" never reads as zero.
;; A record is (:turn ID :agent PATH :provider NAME :model MODEL :at MS
;; :usage USAGE); MODEL (a string, or nil when unknown) prices it with
;; `mevedel-model-prices' (mevedel-model.el).
;;
;; Callers: mevedel-acp.el records each ACP turn's usage (an agent
;; reports a turn's usage, not each of its model requests).  Recording
;; also adds input and output to the chat's counters the view's header
;; and `bin/mevedel --json' show.
;;
;; What it does not do: the price table (mevedel-model.el), cache
;; accounting policy or budgets (they build on these records), nor
;; counting gptel's requests, which mevedel-chat.el still counts itself.

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

(defun mevedel-usage-make (&rest counts)
  "Return the usage plist of COUNTS, keys of `mevedel-usage-keys'.
A count that is not a natural number (nil: not reported) stays nil."
  (cl-loop for key in mevedel-usage-keys
           for value = (plist-get counts key)
           append (list key (and (natnump value) value))))

(defun mevedel-usage--restore (chat)
  "Return the records saved in the store of CHAT's session, newest first."
  (when-let* ((store (mevedel-save-store chat))
              (text (cdr (assoc "usage-records" (mevedel-core-store-info-get store))))
              ((not (string-empty-p text))))
    (condition-case nil
        (let ((records (car (read-from-string text))))
          (and (listp records) records))
      (error nil))))

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
         (record (list :turn turn
                       :agent (or (plist-get keys :agent) (mevedel-chat-agent chat) "/root")
                       :provider (plist-get keys :provider)
                       :model (and (plist-get keys :model) (format "%s" (plist-get keys :model)))
                       :at (truncate (* 1000 (float-time)))
                       :usage usage))
         (records (cons record (mevedel-usage-records chat))))
    (puthash (mevedel-chat-session chat) records mevedel-usage--records)
    (cl-incf (mevedel-chat-input-tokens chat)
             (+ (or (plist-get usage :input) 0) (or (plist-get usage :cache-read) 0)
                (or (plist-get usage :cache-write) 0)))
    (cl-incf (mevedel-chat-output-tokens chat) (or (plist-get usage :output) 0))
    (mevedel-save-checkpoint chat `(("usage-records" . ,(mevedel-save-print records))))
    record))

;;; Sums

(defun mevedel-usage-sum (records)
  "Return the usage plist summing RECORDS; a key nobody reported stays nil."
  (cl-loop for key in mevedel-usage-keys
           append (list key (let ((counts (delq nil (mapcar (lambda (record)
                                                              (plist-get (plist-get record :usage)
                                                                         key))
                                                            records))))
                              (and counts (apply #'+ counts))))))

(defun mevedel-usage-turn (chat &optional turn)
  "Return the usage summed over turn TURN (an id) of CHAT's session.
TURN defaults to CHAT's running or last turn."
  (let ((turn (or turn (plist-get (or (mevedel-chat-turn chat) (car (mevedel-chat-turns chat)))
                                  :id))))
    (mevedel-usage-sum (cl-remove turn (mevedel-usage-records chat)
                                  :key (lambda (record) (plist-get record :turn))
                                  :test-not #'equal))))

(defun mevedel-usage-agent (chat agent)
  "Return the usage summed over the requests of AGENT (a path) in CHAT's session."
  (mevedel-usage-sum (cl-remove agent (mevedel-usage-records chat)
                                :key (lambda (record) (plist-get record :agent))
                                :test-not #'equal)))

(defun mevedel-usage-session (chat)
  "Return the usage summed over every request of CHAT's session."
  (mevedel-usage-sum (mevedel-usage-records chat)))

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

(provide 'mevedel-usage)
;;; mevedel-usage.el ends here
