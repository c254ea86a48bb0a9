;;; schema-bench.el --- Tool-call validation and repair, per call from Lisp  -*- lexical-binding: t; -*-

;;; Commentary:

;; Three calls of a Grep-shaped tool through `mevedel-tool-repair-check',
;; the entry point the pipeline uses: JSON encoding in Lisp, the module
;; call, validation (and repair) in Rust, and the result as Lisp values.
;; The Lisp files are byte-compiled (scripts/bench.sh), as an installed
;; package would be.  The figure is this Emacs process's CPU time per
;; call, garbage collection included: other jobs sharing the machine's two cores
;; inflate wall-clock time but not CPU time.

;;; Code:

(require 'mevedel-core)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-repair)
(require 'mevedel-gptel)
(require 'mevedel-bench-lib)

(mevedel-core-ensure)

(defun schema-bench--cpu-per-call (n thunk)
  "Call THUNK N times after a warm-up; return CPU seconds per call."
  (dotimes (_ (min n 200)) (funcall thunk))
  (garbage-collect)
  (let ((start (current-cpu-time)))
    (dotimes (_ n) (funcall thunk))
    (let ((end (current-cpu-time)))
      (/ (/ (float (- (car end) (car start))) (cdr end)) n))))

(let* ((tool (mevedel-tool-register
              "Grep"
              (list :description "Search file contents with a regular expression."
                    :category "bench" :function #'ignore
                    :args '((pattern string :required "Regex to search for.")
                            (path path :optional "File or directory to search.")
                            (glob string :optional "Glob filter.")
                            (type string :optional "File type filter.")
                            (output_mode string :optional "What to print."
                                         :enum ("content" "files_with_matches" "count"))
                            (-i boolean :optional "Case-insensitive.")
                            (-n boolean :optional "Line numbers.")
                            (-A integer :optional "Lines after." :minimum 0 :maximum 100)
                            (-B integer :optional "Lines before." :minimum 0 :maximum 100)
                            (-C integer :optional "Context lines." :minimum 0 :maximum 100)
                            (multiline boolean :optional "Multiline mode.")
                            (head_limit integer :optional "Stop after N results."
                                        :minimum 0 :maximum 10000)
                            (offset integer :optional "Skip N results." :minimum 0)))))
       (valid '(:pattern "defun" :path "src" :output_mode "content" :-i t :head_limit 10))
       (repair '(:pattern "defun" :path :null :head_limit "10" :-i "true"))
       (invalid '(:path "src" :head_limit "ten" :bogus 1))
       (n 20000)
       (measure (lambda (args expected)
                  (let ((check (mevedel-tool-repair-check tool args t)))
                    (unless (eq (plist-get check :outcome) expected)
                      (error "Expected %s, got %S" expected check)))
                  (* 1e6 (schema-bench--cpu-per-call
                          n (byte-compile
                             `(lambda () (mevedel-tool-repair-check ,tool ',args t))))))))
  (mevedel-bench-describe
   (concat "Grep-shaped tool (13 args), %d calls each of mevedel-tool-repair-check from Lisp "
           "(JSON encode, module call, Rust validation/repair, result as Lisp values), "
           "process CPU time per call incl. GC; original all-Elisp "
           "implementation: 52-59 us valid call, 120-166 us 3-rule repair (byte/native-compiled, "
           "2 vCPUs), goal >= 10x faster")
   n)
  (mevedel-bench-report "schema-valid-grep-call"
                        (funcall measure valid 'valid) "us")
  (mevedel-bench-report "schema-repair-3-rules"
                        (funcall measure repair 'repaired) "us")
  (mevedel-bench-report "schema-invalid-call"
                        (funcall measure invalid 'invalid) "us"))

;;; schema-bench.el ends here
