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

(defun resource-bench--cpu-us (n thunk)
  "Return the process CPU microseconds per call of THUNK over N calls.
On a shared, loaded machine wall-clock time also counts the time other
processes hold the CPU; CPU time does not."
  (dotimes (_ (min n 100)) (funcall thunk))
  (garbage-collect)
  (let ((cpu (current-cpu-time)))
    (dotimes (_ n) (funcall thunk))
    (/ (* 1e6 (- (car (current-cpu-time)) (car cpu))) (cdr cpu) n)))

(mevedel-core-ensure)
(let* ((n 20000)
       (one (mevedel-bench-per-call
             n (let ((rest resource-bench--mix))
                 (lambda ()
                   (mevedel-resource-parse (car rest))
                   (setq rest (or (cdr rest) resource-bench--mix))))))
       (mix (mevedel-bench-per-call
             (/ n 8) (lambda () (dolist (a resource-bench--mix) (mevedel-resource-parse a)))))
       (many (mevedel-bench-per-call
              (/ n 8) (lambda () (mevedel-resource-parse-many resource-bench--mix)))))
  (mevedel-bench-describe
   "8-address mix (work, work://shared, artifact, mevedel, memory key, journal, skill alias, agent#pointer); \
parse + canonicalise from Lisp (mean wall time, then process CPU time); the original Elisp parser took 76-104 us per call")
  (mevedel-bench-report "resource-parse-per-address" (* 1e6 one) "us")
  (mevedel-bench-report "resource-parse-mix-8-calls" (* 1e6 mix) "us")
  (mevedel-bench-report "resource-parse-mix-1-call" (* 1e6 many) "us")
  (mevedel-bench-report "resource-parse-per-address-cpu"
                        (resource-bench--cpu-us
                         n (let ((rest resource-bench--mix))
                             (lambda ()
                               (mevedel-resource-parse (car rest))
                               (setq rest (or (cdr rest) resource-bench--mix)))))
                        "us")
  (mevedel-bench-report "resource-parse-mix-1-call-cpu"
                        (resource-bench--cpu-us
                         (/ n 8) (lambda () (mevedel-resource-parse-many resource-bench--mix)))
                        "us"))

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
