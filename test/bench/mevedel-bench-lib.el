;;; mevedel-bench-lib.el --- Helpers for mevedel's benchmarks  -*- lexical-binding: t; -*-

;;; Commentary:

;; Shared by test/bench/*-bench.el: timing, percentiles, and the exact
;; BENCH line format the project's tooling reads.

;;; Code:

(require 'cl-lib)

(declare-function mevedel-gptel-append-settled-call "mevedel-gptel")

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

(defun mevedel-bench--lines (n prefix)
  "Return N numbered lines of about 70 characters starting with PREFIX."
  (mapconcat (lambda (i)
               (format "%s %4d: (defun example-%d (arg) \"Return ARG.\" (list arg %d))"
                       prefix i i i))
             (number-sequence 1 n) "\n"))

(defun mevedel-bench-fill-transcript (buffer turns calls)
  "Append a synthetic conversation of TURNS turns to data BUFFER.
Each turn has a prompt, a response and CALLS pairs of tool calls: a
Grep with a 40-line result and a Read with a 100-line result, in
gptel's format for the buffer's mode.  Return the turns' start
positions, first turn first."
  (let ((grep (mevedel-bench--lines 40 "src/file.el:"))
        (read (mevedel-bench--lines 100 "    "))
        (starts nil))
    (with-current-buffer buffer
      (dotimes (turn turns)
        (goto-char (point-max))
        (push (point) starts)
        (insert (format "### Question %d: where is example defined?\n\n" turn))
        (insert (propertize (format "Let me look (turn %d).\n" turn) 'gptel 'response))
        (dotimes (call calls)
          (mevedel-gptel-append-settled-call (format "call_%d_%d_g" turn call) "Grep"
                                             '(:pattern "defun example" :output_mode "content")
                                             grep)
          (mevedel-gptel-append-settled-call (format "call_%d_%d_r" turn call) "Read"
                                             '(:file_path "/tmp/src/file.el") read))
        (goto-char (point-max))
        (insert (propertize (format "\nIt is defined in src/file.el (turn %d).\n" turn)
                            'gptel 'response))))
    (nreverse starts)))

(provide 'mevedel-bench-lib)
;;; mevedel-bench-lib.el ends here
