;;; mevedel-bench-lib.el --- Helpers for mevedel's benchmarks  -*- lexical-binding: t; -*-

;;; Commentary:

;; Shared by test/bench/*-bench.el: timing, percentiles, and the exact
;; BENCH line format the project's tooling reads.

;;; Code:

(require 'cl-lib)
(require 'json)
(eval-when-compile (require 'mevedel-chat))
(declare-function mevedel-test-begin-turn "mevedel-test-helpers" (chat text))

(declare-function mevedel-test-tool-text "mevedel-test-helpers")
(declare-function mevedel-chat-data-buffer "mevedel-chat")
(declare-function mevedel-chat-turns "mevedel-chat")
(declare-function gptel-prompt-prefix-string "gptel")

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

(defun mevedel-bench-timer-lags (seconds step)
  "Call STEP back to back for SECONDS under a 10 ms repeating timer.
Return how late the timer ran each time, in milliseconds: how long
the main thread was kept from running timers while STEP's work ran."
  (let* ((lags nil) (last (float-time))
         (timer (run-at-time 0.01 0.01
                             (lambda ()
                               (let ((now (float-time)))
                                 (push (* 1000 (max 0 (- now last 0.01))) lags)
                                 (setq last now))))))
    (unwind-protect
        (let ((deadline (+ (float-time) seconds)))
          (while (< (float-time) deadline)
            (funcall step)))
      (cancel-timer timer))
    lags))

(defun mevedel-bench-checkout-file (relative remedy)
  "Return RELATIVE under the checkout being measured, $MEVEDEL_ROOT.
When it is missing the bench fails, saying REMEDY: a bench never skips."
  (let ((file (expand-file-name relative (or (getenv "MEVEDEL_ROOT") default-directory))))
    (unless (file-exists-p file)
      (error "%s is missing: %s" file remedy))
    file))

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

;;;; A headless turn of Reads

(declare-function mevedel-scripted-model-start "mevedel-scripted-model")
(declare-function mevedel-scripted-model-stop "mevedel-scripted-model")
(declare-function mevedel-scripted-model-port "mevedel-scripted-model")
(defvar mevedel-test-root)

(defun mevedel-bench--reads-script (count)
  "Write the script of a turn of COUNT sequential Reads; return its file."
  (let ((file (make-temp-file "mevedel-bench-reads-" nil ".json")))
    (with-temp-file file
      (insert (json-encode
               `((steps . ,(vconcat
                            (cl-loop for n below count
                                     collect `((tool_calls . [((name . "Read")
                                                               (arguments . ((file_path . ,(format "{{root}}f%d.txt" (% n 3))))))])))
                            '(((text . "Done.")))))))))
    file))

(defun mevedel-bench--reads-init (port wire settings)
  "Write an init file: a streaming WIRE backend at 127.0.0.1:PORT, SETTINGS."
  (let ((file (make-temp-file "mevedel-bench-reads-init" nil ".el")))
    (with-temp-file file
      (prin1 `(progn
                (require 'gptel)
                (require ',(if (eq wire 'openai) 'gptel-openai 'gptel-anthropic))
                (setq gptel-model 'scripted-model
                      gptel-stream t
                      gptel-backend
                      (,(if (eq wire 'openai) 'gptel-make-openai 'gptel-make-anthropic)
                       "bench scripted" :host ,(format "127.0.0.1:%d" port) :protocol "http"
                       :endpoint ,(if (eq wire 'openai) "/v1/chat/completions" "/v1/messages")
                       :stream t :key "scripted"
                       :models '((scripted-model :capabilities (tool-use media cache)))
                       :curl-args '("--noproxy" "127.0.0.1")))
                ,@settings)
             (current-buffer)))
    file))

(defun mevedel-bench-reads-turn (count wire settings measure)
  "Run `bin/mevedel -p' for a turn of COUNT Reads; return MEASURE's value.
The scripted model asks for the Reads (of three 60-line files) on the
streaming WIRE (`anthropic' or `openai'); SETTINGS are forms the init
file evaluates last.  MEASURE is called with the server and the run's
seconds (from starting bin/mevedel to its exit) once the turn has
ended; the server, the workspace and the files go afterwards."
  (let* ((root (file-name-as-directory (make-temp-file "mevedel-bench-reads-ws-" t)))
         (script (mevedel-bench--reads-script count))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root)) :delay 0))
         (init (mevedel-bench--reads-init (mevedel-scripted-model-port server) wire settings))
         (process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                       invocation-directory))
                                    process-environment)))
    (unwind-protect
        (progn
          (dotimes (n 3)
            (with-temp-file (expand-file-name (format "f%d.txt" n) root)
              (dotimes (line 60) (insert (format "  line %d of file %d: some text to read  \n"
                                                 line n)))))
          (let* ((status nil)
                 (seconds (mevedel-bench-seconds
                            (setq status (call-process
                                          (expand-file-name "bin/mevedel" mevedel-test-root)
                                          nil nil nil "--config" init "--dir" root
                                          "-p" "Read the files one at a time.")))))
            (unless (eql status 0)
              (error "Bench: the headless turn of %d Reads failed" count))
            (funcall measure server seconds)))
      (mevedel-scripted-model-stop server)
      (dolist (file (list script init)) (delete-file file))
      (delete-directory root t))))

;;;; Synthetic conversations

;; N turns of M tool calls, written into a chat's data buffer in the
;; format gptel writes (a prompt, a response, then each call's "``` tool"
;; block with its arguments and result, and a closing response); calls
;; alternate between a Grep of 40 result lines and a Read of 100.

(defun mevedel-bench--grep-result (i)
  "Return the 40-line result of the Grep of call I."
  (mapconcat (lambda (k)
               (format "lisp/m%02d.el:%d:  (defun b-%d-%d () %d)" (% (+ i k) 37) (* 7 k) i k k))
             (number-sequence 1 40) "\n"))

(defun mevedel-bench--read-result (i)
  "Return the 100-line result of the Read of call I."
  (mapconcat (lambda (k)
               (format "%5d\t(setq v%d (+ v%d %d))" k k i (* i k)))
             (number-sequence 1 100) "\n"))

(defun mevedel-bench-call (i)
  "Return the data-buffer text of call number I."
  (let ((id (format "call_%05d" i)))
    (if (cl-evenp i)
        (mevedel-test-tool-text id "Grep" (list :pattern (format "bench-%d" i) :path "lisp")
                                (mevedel-bench--grep-result i))
      (mevedel-test-tool-text id "Read" (list :file_path (format "lisp/module-%02d.el" (% i 37)))
                              (mevedel-bench--read-result i)))))

(defun mevedel-bench-append (chat &rest texts)
  "Append TEXTS to CHAT's data buffer."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (goto-char (point-max))
    (apply #'insert texts)))

(defun mevedel-bench-response (text)
  "Return TEXT as a response in the data buffer."
  (propertize text 'gptel 'response))

(defun mevedel-bench-fill (chat turns calls)
  "Append TURNS turns of CALLS calls each to CHAT's data buffer."
  (let ((n 0))
    (dotimes (turn turns)
      (mevedel-test-begin-turn chat (format "Question %d: where is bench-%d defined?" turn turn))
      (mevedel-bench-append chat (mevedel-bench-response "\nI will search for it and read the files."))
      (dotimes (_ calls)
        (mevedel-bench-append chat "\n\n" (mevedel-bench-call n))
        (setq n (1+ n)))
      (mevedel-bench-append chat (mevedel-bench-response
                                (format "\nIt is defined in lisp/module-%02d.el, line %d."
                                        (% turn 37) turn))))))

(provide 'mevedel-bench-lib)
;;; mevedel-bench-lib.el ends here
