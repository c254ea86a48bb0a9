;;; roundtrip-bench.el --- Time per tool round trip of a headless turn  -*- lexical-binding: t; -*-

;;; Commentary:

;; Issue 38's overhead per tool round trip: a headless turn
;; (`bin/mevedel -p', the real gptel, streaming Anthropic) in which the
;; scripted model asks for 30 Reads, one at a time.  The figure is the
;; time from the first request's arrival at the server to the 31st's,
;; over 30: each interval is the server's answer, the module's HTTP
;; client (ADR 0027), gptel's stream parser, the pipeline running Read,
;; and the next request built and handed to the client; Emacs's start
;; and the session's saving are not in it.  Median of three turns.
;; Peer: 30 requests of the same size, each to a curl started for it
;; (the body on its standard input, as gptel gives it), against the
;; same server, nothing else: what one curl per request costs, which
;; every request of a turn paid before.
;;
;; Where the time went (before this bench's changes; profiled with
;; mevedel byte-compiled, gptel as fetched, 2 cores, load 1): 20.9 ms
;; per round trip, 10 ms while the request was under 64 KiB and 28 ms
;; above.  gptel writes the body after curl's config on curl's standard
;; input, a 64 KiB pipe, and Emacs waits 20 ms each time it finds the
;; pipe full; curl now reads the body from a file.  Of the 10 ms: from
;; curl's start to its first output 7.3-9 (the server 1.3-1.7,
;; starting curl about 5: it loads a dozen libraries), gptel's stream
;; parser 0.5-1.5, the tool and the next request 2-3.  The curl of a
;; turn's next request now starts while the current one runs.  Encoding
;; the growing request and writing it took 0.65 ms at 120 KB;
;; transcript writes and fsyncs did not show in the profile (a
;; headless turn has no view).
;;
;; Then, as CPU time per round trip (median of 27, byte-compiled, load
;; 8 on 2 cores): Emacs 3.7 ms.  Building the next request 0.8: gptel
;; encoded every message of the turn and the tools again, then
;; re-encoded that as UTF-8 (0.45), and the body file was opened six
;; times (0.3).  gptel's stream parser 0.37; from the response's end
;; to Read's dispatch 0.85 (the pipeline 0.45, the open-calls
;; checkpoint); from Read's result to the next request 0.9 with the
;; settled checkpoint, whose flush waits for a WAL commit without
;; fsync (0.02-0.3 ms wall).  The scripted server took 1.75 ms a
;; request, serializing each request again for its cache simulation
;; and its log.  A turn now encodes a message until it stops changing
;; and its tools once, writes the body at once, and the server costs
;; what a request adds: Emacs 3.0 ms (the request 0.3), the server
;; 0.67.  Starting the next curl blocks Emacs 0.2 ms (vfork; ms when
;; the machine is loaded).
;;
;; Then the requests left curl for the module's kept-alive client (ADR
;; 0027).  Same turns, same machine, load 11-13 on 2 cores, the two
;; transports alternating: the figure 5.7-9.7 ms with the client, 23-30
;; with a curl per request; Emacs's CPU per round trip 2.8-3.1 ms, 4.5-5.2
;; with curl (starting it and reading its pipe cost Emacs too).  A round
;; trip's parts (wall, loaded): the response's events to Read's dispatch
;; 1.1 ms, Read in the module 2.5, its result to the next request handed
;; to the client 2.1 (the seam call, copying the 120 KB body, 0.2-0.7),
;; the server's answer and its first event 3-6.  The first round trip
;; of a turn created the session's mailbox (35-47 ms, 1.2-1.5 ms of the
;; figure) to learn it held no mail; an empty mailbox is no longer
;; created to be read.  The client is made once per Emacs (6-9 ms, at
;; the turn's first request).
;;
;; A fresh headless run's first turn (headless-first-turn): 3.7-4.6 s
;; from the process's start to its exit, load 4-8 on 2 cores, of which
;; 3-4 s were Emacs compiling a native-code trampoline for each of
;; seven primitives mevedel redefines (`make-process' and the others
;; around gptel's request, `read-from-minibuffer' for the headless
;; guard), each in a subprocess it waited for, kept in the eln cache
;; under HOME: two in the first round trip (0.8-2.7 s of it), the rest
;; before the first request.  The tool-roundtrip figures above all ran
;; in one HOME, so only the bench's first turn paid, and its median
;; hid it.  Byte code needs no trampoline, and none is compiled now
;; (ADR 0032): 0.5-0.94 s, the first round trip 8-20 ms.  What is
;; left, byte-compiled, load 6: Emacs's start 0.1-0.15 s, loading
;; mevedel 0.2-0.3 (TRAMP 57 ms of it; url-http is now loaded at the
;; first web fetch), creating the session's store 30-90 ms.

;;; Code:

(require 'mevedel-bench-lib)
(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-scripted-model)

(defconst roundtrip-bench--calls 30
  "Read calls in the turn.")

(defun roundtrip-bench--turn ()
  "Run one headless turn of Reads; return ms per round trip and the last body."
  (mevedel-bench-reads-turn
   roundtrip-bench--calls 'anthropic nil
   (lambda (server _seconds)
     (let* ((log (mevedel-scripted-model-log server))
            (times (mapcar (lambda (entry) (alist-get 't entry)) log)))
       (unless (and (= (length times) (1+ roundtrip-bench--calls)) (cl-every #'numberp times))
         (error "Bench tool-roundtrip: %d requests arrived, not %d"
                (length times) (1+ roundtrip-bench--calls)))
       (list (/ (* 1000 (- (car (last times)) (car times))) roundtrip-bench--calls)
             (json-encode (alist-get 'body (car (last log)))))))))

(defun roundtrip-bench--bare-curl (body)
  "Send BODY to a scripted server 30 times, a curl each; return ms per request.
The server answers each as it answers the turn's last request."
  (let* ((script (make-temp-file "mevedel-roundtrip-bench-answer-" nil ".json"
                                 "{\"steps\": [{\"text\": \"Done.\"}], \"repeat\": true}"))
         (server (mevedel-scripted-model-start script :delay 0))
         (url (format "http://127.0.0.1:%d/v1/messages" (mevedel-scripted-model-port server)))
         (body (encode-coding-string body 'utf-8)))
    (unwind-protect
        (/ (* 1000 (mevedel-bench-seconds
                     (dotimes (_ roundtrip-bench--calls)
                       (let* ((done nil)
                              (process (make-process
                                        :name "roundtrip-bench-curl" :buffer nil
                                        :command (list "curl" "--silent" "--noproxy" "127.0.0.1"
                                                       "-N" "-D-" "-XPOST" "-H"
                                                       "Content-Type: application/json"
                                                       "--data-binary" "@-" url)
                                        :connection-type 'pipe :noquery t
                                        :filter #'ignore
                                        :sentinel (lambda (_process _event) (setq done t)))))
                         (process-send-string process body)
                         (process-send-eof process)
                         (while (not done) (accept-process-output process 0.05))))))
           roundtrip-bench--calls)
      (mevedel-scripted-model-stop server)
      (delete-file script))))

(let* ((turns (cl-loop repeat 3 collect (roundtrip-bench--turn)))
       (ours (mevedel-bench-percentile (mapcar #'car turns) 50))
       (body (cadr (car turns)))
       (peer (roundtrip-bench--bare-curl body)))
  (mevedel-bench-describe "a headless turn (bin/mevedel -p, gptel streaming Anthropic) of %d sequential Read calls of 60-line files against the scripted model (no pause between chunks); figure: time from the first request's arrival at the server to the last's, per round trip (answer, the module's kept-alive HTTP client, gptel's parser, Read through the pipeline, the next request built and sent; the request grows to %.0f KB), median of 3 turns; peer: one curl started per request, sending the last request's body to the same server, nothing else; goal <= 5 ms"
                          roundtrip-bench--calls (/ (length body) 1e3))
  (mevedel-bench-report "tool-roundtrip-30-reads" ours "ms" "curl-per-request" peer))

;;;; A fresh headless run's first turn

(defconst roundtrip-bench--fresh-runs 5
  "Fresh headless runs timed.")

(defun roundtrip-bench--fresh-turn ()
  "Run `bin/mevedel -p' for a turn of one Read in a fresh HOME; return ms.
Nothing under HOME and the XDG directories is left from an earlier
run (no eln cache, no session store), as for a first run, in a
container or in CI: the figure is from the process's start to its
exit."
  (let* ((home (make-temp-file "roundtrip-bench-home-" t))
         (process-environment
          (append (cl-loop for (name . dir) in '(("HOME" . ".") ("XDG_CONFIG_HOME" . ".config")
                                                 ("XDG_CACHE_HOME" . ".cache")
                                                 ("XDG_DATA_HOME" . ".local/share")
                                                 ("XDG_STATE_HOME" . ".local/state"))
                           collect (concat name "=" (expand-file-name dir home)))
                  process-environment)))
    (unwind-protect
        (mevedel-bench-reads-turn
         1 'anthropic nil
         (lambda (server seconds)
           (unless (= (length (mevedel-scripted-model-log server)) 2)
             (error "Bench headless-first-turn: %d requests arrived, not 2"
                    (length (mevedel-scripted-model-log server))))
           (* 1000 seconds)))
      (delete-directory home t))))

(defun roundtrip-bench--bare-emacs ()
  "Start a batch Emacs that does nothing and exits; return ms."
  (* 1000 (mevedel-bench-seconds
            (call-process (expand-file-name invocation-name invocation-directory)
                          nil nil nil "-Q" "--batch" "--eval" "(kill-emacs 0)"))))

(let ((ours (mevedel-bench-percentile
             (cl-loop repeat roundtrip-bench--fresh-runs collect (roundtrip-bench--fresh-turn))
             50))
      (peer (mevedel-bench-percentile
             (cl-loop repeat roundtrip-bench--fresh-runs collect (roundtrip-bench--bare-emacs))
             50)))
  (mevedel-bench-describe "a headless run (bin/mevedel -p, gptel streaming Anthropic, byte-compiled) in a fresh HOME and XDG directories (no eln cache, no session store) against the scripted model: one Read of a 60-line file, then the answer; figure: from the process's start to its exit (Emacs's start, loading mevedel, the session's store created, both requests, the session saved), median of %d runs; peer: a batch Emacs that starts and exits, median of %d; goal <= 2000 ms"
                          roundtrip-bench--fresh-runs roundtrip-bench--fresh-runs)
  (mevedel-bench-report "headless-first-turn" ours "ms" "bare-emacs-start" peer))

;;; roundtrip-bench.el ends here
