;;; mevedel-model.el --- What models cost  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The price table of common models (`mevedel-model-prices', in US
;; dollars per million tokens, checked on `mevedel-model-prices-checked')
;; and the lookup of one model's price for one request
;; (`mevedel-model-price').  The user edits the table; a model it does
;; not name has no price, and its cost stays unknown rather than being
;; guessed from a similar name.
;;
;; What it does not do: count tokens or add up costs (mevedel-usage.el
;; does, from the usage providers report), nor ask any provider for its
;; prices: the table is data, checked by hand.

;;; Code:

(require 'cl-lib)
(require 'subr-x)

(defgroup mevedel-model nil
  "What models cost."
  :group 'mevedel
  :prefix "mevedel-model-")

(defconst mevedel-model-prices-checked "2026-12-06"
  "The date the shipped `mevedel-model-prices' were checked.
They were compared with the prices the providers publish.")

(defcustom mevedel-model-prices
  '(;; Anthropic: cache writes are the 5-minute ones mevedel asks for.
    ("claude-opus-4-6" :input 5.0 :output 25.0 :cache-read 0.5 :cache-write 6.25)
    ("claude-opus-4-5" :input 5.0 :output 25.0 :cache-read 0.5 :cache-write 6.25)
    ("claude-opus-4-1" :input 15.0 :output 75.0 :cache-read 1.5 :cache-write 18.75)
    ("claude-opus-4" :input 15.0 :output 75.0 :cache-read 1.5 :cache-write 18.75)
    ("claude-sonnet-4-6" :input 3.0 :output 15.0 :cache-read 0.3 :cache-write 3.75)
    ("claude-sonnet-4-5" :input 3.0 :output 15.0 :cache-read 0.3 :cache-write 3.75
     :above (200000 :input 6.0 :output 22.5 :cache-read 0.6 :cache-write 7.5))
    ("claude-sonnet-4" :input 3.0 :output 15.0 :cache-read 0.3 :cache-write 3.75
     :above (200000 :input 6.0 :output 22.5 :cache-read 0.6 :cache-write 7.5))
    ("claude-3-7-sonnet" :input 3.0 :output 15.0 :cache-read 0.3 :cache-write 3.75)
    ("claude-3-5-sonnet" :input 3.0 :output 15.0 :cache-read 0.3 :cache-write 3.75)
    ("claude-haiku-4-5" :input 1.0 :output 5.0 :cache-read 0.1 :cache-write 1.25)
    ("claude-3-5-haiku" :input 0.8 :output 4.0 :cache-read 0.08 :cache-write 1.0)
    ("claude-3-haiku" :input 0.25 :output 1.25 :cache-read 0.03 :cache-write 0.3)
    ("claude-3-opus" :input 15.0 :output 75.0 :cache-read 1.5 :cache-write 18.75)
    ;; OpenAI: caching is automatic, and writing the cache is free.
    ("gpt-5.4" :input 2.5 :output 15.0 :cache-read 0.25)
    ("gpt-5.1" :input 1.25 :output 10.0 :cache-read 0.125)
    ("gpt-5" :input 1.25 :output 10.0 :cache-read 0.125)
    ("gpt-5-mini" :input 0.25 :output 2.0 :cache-read 0.025)
    ("gpt-5-nano" :input 0.05 :output 0.4 :cache-read 0.005)
    ("gpt-4.1" :input 2.0 :output 8.0 :cache-read 0.5)
    ("gpt-4.1-mini" :input 0.4 :output 1.6 :cache-read 0.1)
    ("gpt-4.1-nano" :input 0.1 :output 0.4 :cache-read 0.025)
    ("gpt-4o" :input 2.5 :output 10.0 :cache-read 1.25)
    ("gpt-4o-mini" :input 0.15 :output 0.6 :cache-read 0.075)
    ("o1" :input 15.0 :output 60.0 :cache-read 7.5)
    ("o3" :input 2.0 :output 8.0 :cache-read 0.5)
    ("o3-mini" :input 1.1 :output 4.4 :cache-read 0.55)
    ("o4-mini" :input 1.1 :output 4.4 :cache-read 0.275)
    ;; Gemini: implicit caching, no charge for writing it.
    ("gemini-2.5-pro" :input 1.25 :output 10.0 :cache-read 0.125
     :above (200000 :input 2.5 :output 15.0 :cache-read 0.25))
    ("gemini-2.5-flash" :input 0.3 :output 2.5 :cache-read 0.03)
    ("gemini-2.5-flash-lite" :input 0.1 :output 0.4 :cache-read 0.01)
    ("gemini-2.0-flash" :input 0.1 :output 0.4 :cache-read 0.025))
  "Prices of models in US dollars per million tokens.
Each entry is (MODEL . PRICES).  MODEL is a model's name as the backend
calls it; it also prices that name with a date or \"latest\" after it
\(\"claude-sonnet-4-5-20250929\", \"gpt-4o-2024-08-06\") and behind a
router's \"vendor/\" prefix, but no other model: \"claude-opus-4\" does
not price \"claude-opus-4-1\".  PRICES is a plist of :input (input
read neither from nor into the cache), :output (reasoning included, as
providers bill it), :cache-read and :cache-write.  A price left out
is unknown, unless no request reports that count.  :above (TOKENS .
PRICES) gives the prices of a request whose input, cached or not, is
more than TOKENS (long-context tiers).
The shipped prices were checked on `mevedel-model-prices-checked';
providers change them, so check before relying on a figure."
  :type '(alist :key-type (string :tag "Model")
                :value-type (plist :key-type (choice (const :input) (const :output)
                                                     (const :cache-read) (const :cache-write)
                                                     (const :above))
                                   :value-type sexp)))

(defun mevedel-model--matches-p (key name)
  "Return non-nil when price entry KEY prices the model called NAME."
  (let ((pattern (concat "\\`\\(?:[^/]*/\\)*" (regexp-quote key)
                         "\\(?:[-@]\\(?:[0-9]\\{8\\}\\|[0-9]\\{4\\}-[0-9]\\{2\\}-[0-9]\\{2\\}"
                         "\\|latest\\)\\)?\\'")))
    (string-match-p pattern name)))

(defvar mevedel-model--found (cons nil (make-hash-table :test #'equal))
  "(PRICES . TABLE): TABLE maps model names to their entry of PRICES, or `none'.
Sums price every record again; a changed `mevedel-model-prices' (a
new list) starts a new table.")

(defun mevedel-model--entry (name)
  "Return the entry of `mevedel-model-prices' pricing the model NAME, or nil."
  (unless (eq (car mevedel-model--found) mevedel-model-prices)
    (setq mevedel-model--found (cons mevedel-model-prices (make-hash-table :test #'equal))))
  (let ((entry (gethash name (cdr mevedel-model--found) 'unknown)))
    (when (eq entry 'unknown)
      (setq entry (or (cl-find-if (lambda (entry) (mevedel-model--matches-p (car entry) name))
                                  mevedel-model-prices)
                      'none))
      (puthash name entry (cdr mevedel-model--found)))
    (and (consp entry) entry)))

(defun mevedel-model-price (model &optional input)
  "Return the prices of MODEL (a string or symbol), a plist, or nil.
See `mevedel-model-prices' for its keys.  INPUT, the request's whole
input in tokens, picks a long-context tier when MODEL has one."
  (when-let* ((name (and model (format "%s" model)))
              (entry (mevedel-model--entry name)))
    (let ((above (plist-get (cdr entry) :above)))
      (if (and above input (> input (car above)))
          (cdr above)
        (cdr entry)))))

(provide 'mevedel-model)
;;; mevedel-model.el ends here
