;;; ptc-bench.el --- ToolCall interpretation and the specialist listing  -*- lexical-binding: t; -*-

;;; Commentary:

;; ptc-interpret-1k-steps: a pure ToolCall program of about a thousand
;; steps run by the ToolCall handler the pipeline calls
;; (`mevedel-ptc-run-program': compiling it in the module, running the
;; machine, settling the envelope).  tool-listing-build: the specialist
;; listing of 200 registered specialists within the default budget, as
;; `mevedel-ptc-listing-mail' builds it for each turn.

;;; Code:

(require 'mevedel-core)
(require 'mevedel-ptc)
(require 'mevedel-bench-lib)

(mevedel-core-ensure)

(let* ((program "(let [xs (range 115)]
  (reduce (fn [acc x] (if (= (mod x 3) 0) (+ acc x) acc)) 0 xs))")
       (steps nil)
       (run (lambda ()
              (let ((result nil))
                (mevedel-ptc-run-program (lambda (envelope) (setq result envelope))
                                         (list :program program))
                result)))
       (envelope (funcall run)))
  (setq steps (plist-get (plist-get envelope :render-data) :ptc-steps))
  (unless (and (equal (plist-get envelope :result) "2223") (<= 900 steps 1100))
    (error "Unexpected ToolCall outcome: %S" envelope))
  (mevedel-bench-describe
   "a pure ToolCall program of %d steps (reduce over a range of 115 with a conditional body), \
run by the ToolCall handler (module compile + interpret + envelope), median of 9 rounds \
of 2000; goal <= 100 us" steps)
  (mevedel-bench-report "ptc-interpret-1k-steps"
                        (* 1e6 (mevedel-bench-median-per-call 9 2000 run)) "us"))

(dotimes (i 200)
  (mevedel-tool-register
   (format "Bench%03d" i)
   (list :category "bench" :description (format "Benchmark tool %d: does one specific thing to a file. More text follows here." i)
         :groups '(bench)
         :args '((file_path path :required "The file.")
                 (limit integer :optional "At most this many.")
                 (mode string :optional "How." :enum ("fast" "slow")))
         :function #'ignore)))

(let* ((budget (floor (* 4 mevedel-ptc-listing-budget mevedel-ptc-listing-default-window)))
       (build (lambda () (mevedel-ptc-listing-section (mevedel-tool-specialists) budget)))
       (text (funcall build)))
  (unless (string-match-p "more: find them with ToolSearch" text)
    (error "The listing of 200 tools should exceed its budget"))
  (mevedel-bench-describe
   "specialist listing of %d registered specialists within %d characters (2%% of a 128k-token \
window), median of 9 rounds of 200; goal <= 1 ms" (length (mevedel-tool-specialists)) budget)
  (mevedel-bench-report "tool-listing-build"
                        (* 1e3 (mevedel-bench-median-per-call 9 200 build)) "ms"))

;;; ptc-bench.el ends here
