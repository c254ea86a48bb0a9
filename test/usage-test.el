;;; usage-test.el --- Usage records, prices and cost  -*- lexical-binding: t; -*-

;;; Commentary:

;; The price table's lookup (dated names, routers' prefixes, no
;; neighbouring model, long-context tiers), the cost of records (whole,
;; partial, unknown) and the records' model.  Recording gptel's
;; requests through a real turn is in e2e/usage-e2e-test.el; an ACP
;; agent's turns in acp-test.el.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-gptel)
(require 'mevedel-usage)
(require 'mevedel)

(defun usage-test--record (model &rest counts)
  "Return a record of MODEL with the usage COUNTS."
  (list :turn "t1" :agent "/root" :model model :usage (apply #'mevedel-usage-make counts)))

(ert-deftest mevedel-usage:price-names-a-model-and-its-dated-versions-only ()
  (should (equal (plist-get (mevedel-model-price "claude-sonnet-4-5-20250929") :input) 3.0))
  (should (equal (plist-get (mevedel-model-price 'gpt-4o-2024-08-06) :cache-read) 1.25))
  (should (equal (plist-get (mevedel-model-price "openai/gpt-4o-mini") :output) 0.6))
  (should (equal (plist-get (mevedel-model-price "claude-opus-4-20250514") :input) 15.0))
  ;; A neighbour is not the model: Opus 4.1's price is its own.
  (should (equal (plist-get (mevedel-model-price "claude-opus-4-1") :input) 15.0))
  (should (equal (plist-get (mevedel-model-price "claude-opus-4-5") :input) 5.0))
  (should-not (mevedel-model-price "claude-opus-4-9"))
  (should-not (mevedel-model-price "gpt-5-codex"))
  (should-not (mevedel-model-price nil))
  ;; Long context: the tier above its threshold.
  (should (equal (plist-get (mevedel-model-price "gemini-2.5-pro" 200000) :input) 1.25))
  (should (equal (plist-get (mevedel-model-price "gemini-2.5-pro" 200001) :input) 2.5)))

(ert-deftest mevedel-usage:cost-of-records-from-the-price-table ()
  (let ((mevedel-model-prices
         '(("m" :input 2.0 :output 10.0 :cache-read 0.2 :cache-write 2.5)
           ("openish" :input 1.0 :output 4.0 :cache-read 0.5))))
    ;; 1000 input, 500 output, 4000 read, 2000 written:
    ;; 0.002 + 0.005 + 0.0008 + 0.005 dollars.
    (should (= (mevedel-usage-record-cost
                (usage-test--record "m" :input 1000 :output 500 :cache-read 4000
                                    :cache-write 2000 :reasoning 100))
               0.0128))
    ;; No write count, no write price needed.
    (should (= (mevedel-usage-record-cost
                (usage-test--record "openish" :input 1000000 :output 1000000
                                    :cache-read 1000000))
               5.5))
    ;; A count with no price: the record has no price.
    (should-not (mevedel-usage-record-cost
                 (usage-test--record "openish" :input 10 :cache-write 10)))
    ;; A zero count needs no price.
    (should (= (mevedel-usage-record-cost (usage-test--record "openish" :input 10 :cache-write 0))
               1e-5))
    (let ((priced (usage-test--record "m" :input 1000000))
          (unknown (usage-test--record "elsewhere" :input 1000000))
          (no-model (usage-test--record nil :output 10)))
      (should (floatp (mevedel-usage-records-cost (list priced))))
      (should (= (mevedel-usage-records-cost (list priced unknown no-model)) 2.0))
      (should (equal (mevedel-usage-unpriced (list priced unknown no-model))
                     (list unknown no-model)))
      (should-not (mevedel-usage-records-cost (list unknown no-model)))
      (should-not (mevedel-usage-records-cost nil)))))

(ert-deftest mevedel-usage:shipped-prices-are-well-formed ()
  "Every shipped entry prices input, output and cache reads, in dollars per million."
  (dolist (entry (default-value 'mevedel-model-prices))
    (should (stringp (car entry)))
    (dolist (key '(:input :output :cache-read))
      (should (numberp (plist-get (cdr entry) key))))
    (when-let* ((above (plist-get (cdr entry) :above)))
      (should (natnump (car above)))
      (should (numberp (plist-get (cdr above) :input)))))
  (should (string-match-p "\\`[0-9]\\{4\\}-[0-9]\\{2\\}-[0-9]\\{2\\}\\'"
                          mevedel-model-prices-checked)))

(ert-deftest mevedel-usage:session-totals-follow-new-records-and-prices ()
  "The kept totals equal a fresh sum after each record and after a price change."
  (mevedel-test-with-view _view chat
    (let ((mevedel-model-prices '(("m" :input 1.0 :output 2.0 :cache-read 0.5))))
      (should (equal (mevedel-usage-totals chat) (list (mevedel-usage-sum nil) nil 0)))
      (should (equal (mevedel-usage-format-totals chat) "$0"))
      (mevedel-usage-record chat (mevedel-usage-make :input 1000000 :output 10) :model "m")
      (mevedel-usage-record chat (mevedel-usage-make :input 7 :cache-write 3) :model "m")
      (mevedel-usage-record chat (mevedel-usage-make :cache-read 2000000) :model "m")
      (let ((records (mevedel-usage-records chat)))
        (should (= (length records) 3))
        (should (equal (mevedel-usage-totals chat)
                       (list (mevedel-usage-sum records) (mevedel-usage-records-cost records) 1)))
        (should (equal (mevedel-usage-format-totals chat) "≥$2.00")))
      (setq mevedel-model-prices '(("m" :input 1.0 :output 2.0 :cache-read 0.5 :cache-write 1.0)))
      (should (= (nth 1 (mevedel-usage-totals chat))
                 (mevedel-usage-records-cost (mevedel-usage-records chat))))
      (should (= (nth 2 (mevedel-usage-totals chat)) 0)))))

(defun usage-test--read (function usage &optional info)
  "Return what FUNCTION, a usage reader, reports for USAGE and request INFO."
  (let* ((reported nil)
         (mevedel-gptel-usage-functions
          (list (lambda (_info counts source) (setq reported (list counts source))))))
    (funcall function usage (append info (list :model 'm-1)))
    reported))

(ert-deftest mevedel-usage:each-wire-s-usage-is-read-as-reported ()
  "Counts as each provider names them; what it leaves out stays nil."
  (should (equal (usage-test--read #'mevedel-gptel--anthropic-usage
                                   '(:input_tokens 10 :cache_read_input_tokens 2000
                                     :cache_creation_input_tokens 300 :output_tokens 50))
                 '((:input 10 :output 50 :cache-read 2000 :cache-write 300 :reasoning nil)
                   (:provider nil :model "m-1"))))
  ;; A stream whose message_delta has only the output: message_start's input.
  (should (equal (car (usage-test--read
                       #'mevedel-gptel--anthropic-usage '(:output_tokens 50)
                       '(:mevedel-usage-start (:input_tokens 10 :cache_read_input_tokens 0
                                               :cache_creation_input_tokens 0 :output_tokens 1))))
                 '(:input 10 :output 50 :cache-read 0 :cache-write 0 :reasoning nil)))
  (should (equal (car (usage-test--read
                       #'mevedel-gptel--openai-usage
                       '(:prompt_tokens 1500 :completion_tokens 80
                         :prompt_tokens_details (:cached_tokens 1024)
                         :completion_tokens_details (:reasoning_tokens 64))))
                 '(:input 476 :output 80 :cache-read 1024 :cache-write nil :reasoning 64)))
  ;; No details: nothing known of the cache or reasoning.
  (should (equal (car (usage-test--read #'mevedel-gptel--openai-usage
                                        '(:prompt_tokens 15 :completion_tokens 8)))
                 '(:input 15 :output 8 :cache-read nil :cache-write nil :reasoning nil)))
  (should (equal (car (usage-test--read
                       #'mevedel-gptel--openai-responses-usage
                       '(:input_tokens 900 :output_tokens 40 :input_tokens_details (:cached_tokens 800)
                         :output_tokens_details (:reasoning_tokens 30))))
                 '(:input 100 :output 40 :cache-read 800 :cache-write nil :reasoning 30)))
  (should (equal (car (usage-test--read
                       #'mevedel-gptel--gemini-usage
                       '(:promptTokenCount 11500 :candidatesTokenCount 1000 :totalTokenCount 22500
                         :cachedContentTokenCount 10000 :thoughtsTokenCount 10000)))
                 '(:input 1500 :output 11000 :cache-read 10000 :cache-write nil :reasoning 10000)))
  (should (equal (car (usage-test--read #'mevedel-gptel--bedrock-usage
                                        '(:inputTokens 5 :outputTokens 6 :cacheReadInputTokens 7
                                          :cacheWriteInputTokens 8)))
                 '(:input 5 :output 6 :cache-read 7 :cache-write 8 :reasoning nil)))
  (should (equal (car (usage-test--read #'mevedel-gptel--ollama-usage
                                        '(:prompt_eval_count 30 :eval_count 9)))
                 '(:input 30 :output 9 :cache-read nil :cache-write nil :reasoning nil)))
  ;; JSON null is not a count.
  (should (equal (car (usage-test--read #'mevedel-gptel--openai-usage
                                        '(:prompt_tokens 15 :completion_tokens :null)))
                 '(:input 15 :output nil :cache-read nil :cache-write nil :reasoning nil))))

(ert-deftest mevedel-usage:message-start-s-usage-is-noted-from-the-stream ()
  "The Anthropic stream's message_start usage is kept for the message_delta."
  (let ((info (list :backend nil)))
    (with-temp-buffer
      (insert "event: message_start\ndata: {\"type\": \"message_start\", \"message\": "
              "{\"usage\": {\"input_tokens\": 12, \"cache_read_input_tokens\": 3, "
              "\"output_tokens\": 1}}}\n\n")
      (mevedel-gptel--note-thinking info (point-min) (point-max)))
    (should (equal (plist-get info :mevedel-usage-start)
                   '(:input_tokens 12 :cache_read_input_tokens 3 :output_tokens 1)))))

;; Issue 38: a request's usage costs the same late in a long turn as
;; early.
(ert-deftest mevedel-usage:each-record-is-saved-once-by-itself ()
  "Recording a request prints its own record; the saved ones read back whole."
  (mevedel-test-with-view _view chat
    (let ((saved nil))
      (cl-letf (((symbol-function 'mevedel-save-checkpoint)
                 (lambda (_chat info &rest _) (setq saved (append info saved)))))
        (dotimes (i 40)
          (mevedel-usage-record chat (mevedel-usage-make :input i) :turn "t1" :model "m")))
      (should (= (length saved) 40))
      (dolist (entry saved)
        (should (string-prefix-p "usage-records t1 " (car entry)))
        (should (= (length (car (read-from-string (cdr entry)))) 1)))
      (should (equal (sort (mapcar (lambda (r) (plist-get (plist-get r :usage) :input))
                                   (mevedel-usage-read
                                    (cons '("usage-records t0" . "((:turn \"t0\" :at 1 :usage (:input 99)))")
                                          saved)))
                           #'<)
                     (append (number-sequence 0 39) '(99)))))))

(provide 'usage-test)
;;; usage-test.el ends here
