;;; exec-bench.el --- Managed execution against call-process  -*- lexical-binding: t; -*-

;;; Commentary:

;; Bash through the module (sandbox preparation, spawn inside bwrap and
;; the Landlock helper as Bash's default, spool on disk, settle,
;; observation delivered through the event channel) against Emacs's own
;; `call-process' writing into a buffer, in the same Emacs session:
;; large output, output beyond the 64 MiB cap, and a trivial command.
;; Then Emacs's memory while 1 GiB is captured, the permission decision
;; of a Bash call, and the lag of a 10 ms timer while 8 commands stream.

;;; Code:

(require 'cl-lib)
(require 'mevedel-core)
(require 'mevedel-bench-lib)
(require 'mevedel-sandbox)

(mevedel-core-ensure)

(defvar exec-bench--workspace (make-temp-file "exec-bench-ws" t)
  "The working directory of the benchmarked commands.")

(defvar exec-bench--sandbox
  (mevedel-core-sandbox-object
   (mevedel-sandbox-request :env nil :writable (list exec-bench--workspace)
                            :state-dirs (list (expand-file-name ".mevedel" exec-bench--workspace))))
  "The sandbox request the Bash tool sends by default for this workspace.")

(defvar exec-bench--confined t
  "Non-nil runs the benchmarked commands in the default sandbox.")

(defvar exec-bench--layer nil
  "Sandbox request keys that choose a layer other than the default.
Both `exec-bench--sandbox' and the call-process peer's preparation get
them.")
;; Settlement events have no consumer here (the tools are not loaded).
(mevedel-core-register-event-handler 'exec-settled #'ignore)

(defvar exec-bench--n 0)

(defvar exec-bench--last-ms nil
  "Milliseconds from the last `exec-bench--run' start to its callback.")

(defun exec-bench--run (command &rest spec)
  "Run COMMAND in the foreground through the module; return the observation.
SPEC adds execution keys.  `exec-bench--last-ms' is set to the time
from the start to the callback: the loop waiting here returns from
`accept-process-output' up to 10 ms later, which no caller in a
session pays (callbacks run from the event channel's filter).  The
long yield only bounds the wait: on a loaded machine a command must
still end before it rather than come back yielded, still running."
  (let ((box (list nil))
        (start (float-time)))
    (mevedel-core-exec-start
     (append spec (list :session (format "bench-%d" (cl-incf exec-bench--n))
                        :owner "/root" :command command :yield-ms 600000
                        :cwd exec-bench--workspace
                        :sandbox (and exec-bench--confined exec-bench--sandbox)
                        :progress :false))
     (lambda (status value)
       (setq exec-bench--last-ms (* 1000 (- (float-time) start)))
       (setcar box (cons status value))))
    (while (not (car box)) (accept-process-output nil 0.01))
    (unless (eq (caar box) 'ok)
      (error "Bench command failed: %S" (car box)))
    (cdar box)))

(defun exec-bench--call-process (command)
  "Run COMMAND with `call-process' into a buffer; return the buffer size."
  (with-temp-buffer
    (call-process "bash" nil t nil "--noprofile" "--norc" "-c" command)
    (buffer-size)))

(defun exec-bench--call-process-confined (command)
  "Run COMMAND with `call-process' inside the same sandbox as ours.
The launch is prepared as the Bash tool's (policy, bwrap and the
Landlock helper's command line) and run into a buffer; return its size."
  (let ((argv (plist-get (mevedel-sandbox-prepare
                          (append
                           exec-bench--layer
                           (list :command (list "bash" "--noprofile" "--norc" "-c" command)
                                 :env nil :cwd exec-bench--workspace
                                 :writable (list exec-bench--workspace)
                                 :state-dirs (list (expand-file-name ".mevedel"
                                                                     exec-bench--workspace)))))
                         :argv)))
    (with-temp-buffer
      (apply #'call-process (car argv) nil t nil (cdr argv))
      (buffer-size))))

(defun exec-bench--median-ms (n thunk &optional measured)
  "Call THUNK N times (after one warm-up); return the median wall time in ms.
With MEASURED, a function of no arguments, use its value after each
call as that call's time instead."
  (funcall thunk)
  (let (samples)
    (dotimes (_ n)
      (garbage-collect)
      (let ((ms (* 1000 (mevedel-bench-seconds (funcall thunk)))))
        (push (if measured (funcall measured) ms) samples)))
    (mevedel-bench-percentile samples 50)))

(defun exec-bench--compare (id description command n &optional check peer-id peer-run)
  "Report ID (DESCRIPTION): COMMAND via the module and via `call-process'.
Median of N runs each.  CHECK, when non-nil, is called with one
observation and must return non-nil.  PEER-ID and PEER-RUN (a
function of the command) replace the raw `call-process' peer.
Return our median."
  (when check
    (unless (funcall check (exec-bench--run command))
      (error "Bench %s: unexpected result" id)))
  (let ((ours (exec-bench--median-ms n (lambda () (exec-bench--run command))
                                     (lambda () exec-bench--last-ms)))
        (peer (exec-bench--median-ms n (lambda ()
                                         (funcall (or peer-run #'exec-bench--call-process)
                                                  command)))))
    (mevedel-bench-describe "%s; ours is start to callback, the peer is the whole call; median of %d runs each" description n)
    (mevedel-bench-report id ours "ms" (or peer-id "call-process") peer)
    ours))

(exec-bench--compare
 "exec-seq-2m"
 "`seq 1 2000000` (14.9 MB), start to completed observation (preview of the unread output, exact counts); original mevedel: 1,812 ms vs raw call-process 33 ms"
 "seq 1 2000000" 5
 (lambda (obs) (equal (plist-get (plist-get obs :facts) :outcome) "success")))

(exec-bench--compare
 "exec-yes-cap"
 "`yes 0123456789abcdef | head -c 80000000`: ours stops at the 64 MiB cap (output-limit, TERM to the group), call-process takes all 80 MB into a buffer; original mevedel: 12.0 s vs raw 43 ms"
 "yes 0123456789abcdef | head -c 80000000" 3
 (lambda (obs) (equal (plist-get (plist-get obs :facts) :termination) "output-limit")))

(let ((unconfined
       (let ((exec-bench--confined nil))
         (exec-bench--compare
          "exec-true"
          "`true` without the sandbox against raw call-process (what managed execution adds: analysis, spawn, spool, settlement, observation through the event channel); original mevedel: 34 ms"
          "true" 30)))
      (confined
       (exec-bench--compare
        "exec-true-confined"
        "`true` confined as Bash's default (bwrap and the Landlock helper), against call-process running the same prepared sandbox command line (bwrap's own cost is in both)"
        "true" 30 nil "call-process-confined" #'exec-bench--call-process-confined)))
  (mevedel-bench-describe "what confinement adds to a Bash call of `true`: the median confined run (bwrap and the Landlock helper) minus the median unconfined one, both start to callback through the module; goal <= 15 ms")
  (mevedel-bench-report "sandbox-spawn-overhead-p50" (- confined unconfined) "ms"))

(let* ((exec-bench--layer '(:mode required :backend landlock))
       (exec-bench--sandbox
        (mevedel-core-sandbox-object
         (apply #'mevedel-sandbox-request
                :env nil :writable (list exec-bench--workspace)
                :state-dirs (list (expand-file-name ".mevedel" exec-bench--workspace))
                exec-bench--layer))))
  (exec-bench--compare
   "exec-true-landlock-only"
   "`true` confined by the Landlock helper alone (mevedel-sandbox-backend landlock, where bwrap cannot start), against call-process running the same prepared helper command line"
   "true" 30
   (lambda (obs) (eq (plist-get (plist-get obs :sandbox) :boundary) 'landlock))
   "call-process-landlock-only" #'exec-bench--call-process-confined))

;;;; Memory while capturing 1 GiB

(defun exec-bench--rss-kb ()
  "Return this Emacs's resident set size in kB."
  (with-temp-buffer
    (insert-file-contents "/proc/self/status")
    (re-search-forward "^VmRSS:[ \t]+\\([0-9]+\\)")
    (string-to-number (match-string 1))))

(let* ((dir (make-temp-file "exec-bench-gib" t))
       (before (progn (garbage-collect) (exec-bench--rss-kb)))
       (peak before)
       (sampler (run-at-time 0 0.05 (lambda () (setq peak (max peak (exec-bench--rss-kb))))))
       (seconds nil) (bytes nil))
  (unwind-protect
      (setq seconds
            (mevedel-bench-seconds
              (let ((obs (exec-bench--run "yes 0123456789abcdef | head -c 1073741824"
                                          :output-cap (* 2 1024 1024 1024)
                                          :artifact-dir dir)))
                (setq bytes (plist-get (plist-get obs :facts) :bytes)))))
    (cancel-timer sampler)
    (delete-directory dir t))
  (setq peak (max peak (exec-bench--rss-kb)))
  (unless (eql bytes 1073741824)
    (error "Captured %s bytes, not 1 GiB" bytes))
  (mevedel-bench-describe "capture 1 GiB (`yes ... | head -c 1073741824`, cap raised to 2 GiB) to the spool in %.2f s; Emacs VmRSS sampled every 50 ms; goal < 16 MiB" seconds)
  (mevedel-bench-report "exec-rss-growth-1gib" (/ (- peak before) 1024.0) "MiB"))

;;;; The permission decision of a Bash call

(require 'mevedel-tool-exec)

(let* ((mix '("git status --short"
              "grep -rn \"TODO\" src | sort | uniq -c | sort -rn | head -20"
              "cargo test --release 2>&1 | tail -40"
              "for f in *.el; do wc -l \"$f\"; done | sort -n"
              "find . -name '*.rs' -newer Cargo.toml -print0 | xargs -0 ls -la"
              "cd build && make -j4 && ./run-tests --verbose > log.txt"
              "sed -n '1,50p' README.md; echo \"$(date) done\""
              "rm -rf target/tmp && mkdir -p target/tmp && cp -r assets target/tmp/"))
       (rounds 7)
       (n 4000)
       (session (mevedel-session-create :workspace exec-bench--workspace :ephemeral t))
       (bash (mevedel-tool-get "Bash"))
       (k -1)
       ;; Every source new (a distinct trailing comment); the calls'
       ;; contexts are made before timing, so the figure is the decision.
       (contexts (vconcat
                  (cl-loop for j below (* rounds (+ n 100))
                           collect (list :tool bash :session session :tool-use-id "toolu_bench"
                                         :args (list :command (format "%s # %d" (nth (% j 8) mix) j)
                                                     :description "bench")))))
       (verdicts (mapcar (lambda (j) (mevedel-permissions-decide-call (aref contexts j) session))
                         (number-sequence 0 7)))
       (per (mevedel-bench-median-per-call
             rounds n (lambda ()
                        (mevedel-permissions-decide-call (aref contexts (cl-incf k)) session)))))
  (unless (and (eq (car verdicts) 'allow) (eq (car (last verdicts)) 'ask))
    (error "Bench bash-permission: unexpected verdicts %S" verdicts))
  (mevedel-bench-describe "the whole permission decision of a Bash call from Lisp (`mevedel-permissions-decide-call': mode, rules, session answers, the command's analysis and its files against the workspace) for the 8-command mix, each source never seen before (a distinct trailing comment; the %d calls are made before timing), in `ask' mode with no rules; the 8-mix figure is 8 calls; median of %d rounds of %d calls; goal <= 30 us for the mix" (length contexts) rounds n)
  (mevedel-bench-report "bash-permission-8-mix" (* 8e6 per) "us"))

;;;; Timer lag while 8 commands stream

(let* ((lags nil)
       (progress 0)
       (done 0)
       (last (float-time))
       (timer (run-at-time 0.01 0.01
                           (lambda ()
                             (let ((now (float-time)))
                               (push (* 1000 (- now last 0.01)) lags)
                               (setq last now))))))
  (mevedel-core-register-event-handler 'exec-progress (lambda (_) (cl-incf progress)))
  (unwind-protect
      (progn
        (dotimes (k 8)
          (mevedel-core-exec-start
           (list :session "bench-streams" :owner "/root" :yield-ms 600000
                 :command (format "for i in $(seq 1 300); do seq %d %d; sleep 0.01; done"
                                  k (+ k 2000)))
           (lambda (_status _value) (cl-incf done))))
        (while (< done 8) (accept-process-output nil 0.05)))
    (cancel-timer timer)
    (mevedel-core-register-event-handler 'exec-progress nil))
  (mevedel-bench-describe "a 10 ms repeating timer while 8 read-only commands run concurrently, each printing ~2,000 lines every 10 ms for ~4 s (%d timer ticks, %d progress events handled); goal p99 < 50 ms"
                          (length lags) progress)
  (mevedel-bench-report "exec-timer-lag-8-streams-p50" (mevedel-bench-percentile lags 50) "ms")
  (mevedel-bench-report "exec-timer-lag-8-streams-p99" (mevedel-bench-percentile lags 99) "ms"))

(delete-directory exec-bench--workspace t)

;;; exec-bench.el ends here
