;;; resource-bench.el --- Resource address parsing and preparation  -*- lexical-binding: t; -*-

;;; Commentary:

;; Address parsing from Lisp through the module, on a fixed mix of
;; eight addresses covering the families, and preparation (stage one)
;; of a work:// Read including the session facts gathered in Lisp.

;;; Code:

(require 'mevedel-core)
(require 'mevedel-resource)
(require 'mevedel-bench-lib)

(defconst resource-bench--mix
  '("work://notes/plan.md"
    "work://shared/findings%20one.md/"
    "artifact://tool-results/toolu_0123.txt"
    "mevedel://tools/files.md"
    "memory://local-mevedel/topics/build.md"
    "memory://journal/2026-05-01T12:30:00Z.md"
    "skill://local-mevedel/review/SKILL.md"
    "agent://root/explore#/items/0")
  "Eight addresses, one or more per family.")

(defun resource-bench--cycle (n)
  "Parse N addresses, one `mevedel-resource-parse' call each, cycling the mix."
  (let ((rest resource-bench--mix))
    (dotimes (_ n)
      (mevedel-resource-parse (car rest))
      (setq rest (or (cdr rest) resource-bench--mix)))))

(defun resource-bench--many (n)
  "Parse the mix N times, one `mevedel-resource-parse-many' call each."
  (dotimes (_ n) (mevedel-resource-parse-many resource-bench--mix)))

(defun resource-bench--measure (runs n fn)
  "Return (WALL CPU GC) in us per unit of N over RUNS runs of FN with N.
WALL is elapsed time, CPU the process CPU time (what the calls cost
when other processes hold the CPU), GC the part of WALL spent in
garbage collection.  The runs follow each other without a forced
collection, so the collections the calls cause are in the means."
  (funcall fn (min n 1000))
  (garbage-collect)
  (let ((wall (float-time)) (cpu (current-cpu-time)) (gc gc-elapsed)
        (total (* runs n)))
    (dotimes (_ runs) (funcall fn n))
    (list (/ (* 1e6 (- (float-time) wall)) total)
          (/ (* 1e6 (- (car (current-cpu-time)) (car cpu))) (cdr cpu) total)
          (/ (* 1e6 (- gc-elapsed gc)) total))))

(mevedel-core-ensure)
(let* ((runs 7)
       (one (resource-bench--measure runs 40000 #'resource-bench--cycle))
       (many (mapcar (lambda (x) (/ x 8))
                     (resource-bench--measure runs 5000 #'resource-bench--many))))
  (mevedel-bench-describe
   "8-address mix (work, work://shared with a trailing slash, artifact, mevedel, memory key, journal, \
skill alias, agent#pointer) parsed and canonicalised from byte-compiled Lisp, one \
`mevedel-resource-parse' call per address, mean over %d runs of 40,000 calls, garbage collection included; \
the original Elisp parser took 76-104 us per call (measured outside this run), so the goal is <= 3.8 us"
   runs)
  (mevedel-bench-report "resource-parse-per-call" (nth 0 one) "us")
  (mevedel-bench-describe "the same calls: process CPU time per call (excludes time other processes hold the CPU), and the part of the wall time spent in Lisp garbage collection")
  (mevedel-bench-report "resource-parse-per-call-cpu" (nth 1 one) "us")
  (mevedel-bench-report "resource-parse-per-call-gc" (nth 2 one) "us")
  (mevedel-bench-describe "the mix in one `mevedel-resource-parse-many' call, wall time divided by 8 addresses, mean over %d runs of 5,000 calls" runs)
  (mevedel-bench-report "resource-parse-many-per-address" (nth 0 many) "us"))

(let* ((base (make-temp-file "mevedel-rbench" t))
       (session (expand-file-name "ws/.mevedel/sessions/s1" base))
       (mevedel-resource-session-function
        (lambda () (list :session-dir session :workspace (expand-file-name "ws" base)))))
  (unwind-protect
      (progn
        (make-directory (expand-file-name "local/notes" session) t)
        (with-temp-file (expand-file-name "local/notes/plan.md" session) (insert "x\n"))
        (let ((ctx (mevedel-resource-context)))
          (mevedel-bench-describe "prepare work://notes/plan.md for Read (existing file, containment checks), context gathered once")
          (mevedel-bench-report "resource-prepare-read"
                                (* 1e6 (mevedel-bench-per-call
                                        5000 (lambda () (mevedel-resource-prepare "work://notes/plan.md" "Read" ctx))))
                                "us")))
    (delete-directory base t)))

;;; resource-bench.el ends here
