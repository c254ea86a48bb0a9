;;; channel-bench.el --- Event channel round-trip latency  -*- lexical-binding: t; -*-

;;; Commentary:

;; 1,000 sequential round trips: Lisp asks the module, a tokio worker
;; thread pushes an event, the wake-up byte reaches the pipe process,
;; and the filter dispatches to the handler.

;;; Code:

(require 'mevedel-core)
(require 'mevedel-bench-lib)

(mevedel-core-ensure)
(let ((samples nil) (n 1000))
  (dotimes (_ 50)                       ; warm-up
    (let ((done nil))
      (mevedel-core-channel-ping (lambda () (setq done t)))
      (while (not done) (accept-process-output nil 0.05))))
  (dotimes (_ n)
    (let ((done nil) (start (float-time)))
      (mevedel-core-channel-ping (lambda () (setq done (float-time))))
      (while (not done) (accept-process-output nil 0.05))
      (push (* 1e6 (- done start)) samples)))
  (mevedel-bench-describe "%d sequential event-channel round trips (Lisp -> worker thread -> pipe -> filter -> handler)" n)
  (mevedel-bench-report "channel-roundtrip-p50" (mevedel-bench-percentile samples 50) "us")
  (mevedel-bench-report "channel-roundtrip-p99" (mevedel-bench-percentile samples 99) "us"))

(let (result)
  (mevedel-core-channel-selftest 100000 (lambda (r) (setq result r)))
  (while (not result) (accept-process-output nil 0.05))
  (mevedel-bench-describe "burst of 100,000 events pushed by one worker thread, drained and dispatched in Lisp")
  (mevedel-bench-report "channel-burst-100k" (* 1000 (plist-get result :seconds)) "ms"))

;;; channel-bench.el ends here
