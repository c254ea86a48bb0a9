;;; mevedel-bench-lib.el --- Helpers for mevedel's benchmarks  -*- lexical-binding: t; -*-

;;; Commentary:

;; Shared by test/bench/*-bench.el: timing, percentiles, and the exact
;; BENCH line format the project's tooling reads.

;;; Code:

(require 'cl-lib)

(defun mevedel-bench-percentile (samples p)
  "Return the P-th percentile (0-100) of the number list SAMPLES."
  (let* ((sorted (sort (copy-sequence samples) #'<))
         (rank (max 0 (min (1- (length sorted))
                           (1- (ceiling (* (/ p 100.0) (length sorted))))))))
    (nth rank sorted)))

(defmacro mevedel-bench-seconds (&rest body)
  "Run BODY once; return elapsed wall-clock seconds."
  (declare (indent 0))
  `(let ((start (float-time)))
     ,@body
     (- (float-time) start)))

(defun mevedel-bench-per-call (n thunk)
  "Call THUNK N times after a warm-up; return the mean seconds per call."
  (dotimes (_ (min n 100)) (funcall thunk))
  (garbage-collect)
  (/ (mevedel-bench-seconds (dotimes (_ n) (funcall thunk))) n))

(defun mevedel-bench-median-per-call (rounds n thunk)
  "Return the median of ROUNDS figures of `mevedel-bench-per-call' N THUNK.
For figures of a few microseconds, where one round lasts milliseconds
and a single preemption of this process would decide it."
  (let ((figures (cl-loop repeat rounds
                          collect (mevedel-bench-per-call n thunk))))
    (nth (/ rounds 2) (sort figures #'<))))

(defun mevedel-bench-describe (format-string &rest args)
  "Print the line describing the next figures' input (FORMAT-STRING, ARGS)."
  (princ (concat "input: " (apply #'format format-string args) "\n")))

(defun mevedel-bench-report (id ours unit &optional peer-id peer)
  "Print one BENCH line: ID, our figure OURS in UNIT, optional PEER-ID/PEER.
The ratio is PEER divided by OURS, so above 1 means we are faster."
  (princ (if peer-id
             (format "BENCH %s ours=%.3f %s peer=%s:%.3f %s ratio=%.2f\n"
                     id ours unit peer-id peer unit (/ peer (float ours)))
           (format "BENCH %s ours=%.3f %s\n" id ours unit))))

(provide 'mevedel-bench-lib)
;;; mevedel-bench-lib.el ends here
