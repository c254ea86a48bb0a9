;;; session-bench.el --- Saving and loading a large session  -*- lexical-binding: t; -*-

;;; Commentary:

;; A synthetic 20 MB conversation (`mevedel-bench-fill') saved through
;; the product's checkpoints: the end of a turn (what Emacs waits for,
;; and until the consolidation and the readable copy are on disk), a
;; settled checkpoint after one more tool result (what every tool batch
;; costs), the whole conversation written at once (after a failed
;; write), and loading it back (`mevedel-transcript-restore').

;;; Code:

(require 'mevedel-bench-lib)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(let* ((root (file-name-as-directory (make-temp-file "mevedel-bench-session-" t)))
       (chat (mevedel-chat-get-create root))
       (buffer (mevedel-chat-data-buffer chat))
       (store (mevedel-session-store-handle (mevedel-chat-session chat))))
  (unwind-protect
      (let (rewrite rewrite-durable settled turn-end turn-end-durable load)
        (mevedel-bench-fill chat 1000 8)
        (mevedel-transcript-track buffer store)
        ;; The whole conversation written at once: what a session does
        ;; only after a write failed (checkpoints save what changed).
        (garbage-collect)
        (setq rewrite (* 1000 (mevedel-bench-seconds (mevedel-save-checkpoint chat))))
        (setq rewrite-durable
              (+ rewrite (* 1000 (mevedel-bench-seconds (mevedel-core-store-flush store 60)))))
        ;; What every tool batch costs: its results, saved and waited for.
        (let ((samples nil))
          (dotimes (i 20)
            (mevedel-bench-append chat "\n\n" (mevedel-bench-call (+ 100001 (* 2 i))))
            (push (* 1000 (mevedel-bench-seconds (mevedel-save-checkpoint chat nil t))) samples))
          (setq settled (mevedel-bench-percentile samples 50)))
        ;; The end of a turn: the answer saved and waited for, all the
        ;; metadata, then the log consolidated and the readable copy written
        ;; on the writer thread.
        (mevedel-bench-append chat (mevedel-bench-response "\nDone: it is in lisp/module-01.el."))
        (garbage-collect)
        (let ((start (float-time)))
          (mevedel-save--settle chat)
          (setq turn-end (* 1000 (- (float-time) start)))
          (mevedel-core-store-flush store 60)
          (setq turn-end-durable (* 1000 (- (float-time) start))))
        (with-temp-buffer
          (garbage-collect)
          (setq load (* 1000 (mevedel-bench-seconds
                               (mevedel-transcript-restore (current-buffer) store)))))
        (mevedel-bench-describe "the end of a turn in a %.1f MB session (1000 turns x 8 calls, Grep 40 lines / Read 100 lines): the answer and all metadata saved and waited for (mevedel-save--settle), then the log consolidated into one record and transcript.txt written on the writer thread; Emacs waits only for the first part; no figure before this change (sessions were not saved)"
                                (/ (with-current-buffer buffer (position-bytes (point-max))) 1e6))
        (mevedel-bench-report "session-save-20mb" turn-end "ms")
        (mevedel-bench-report "session-save-20mb-durable" turn-end-durable "ms")
        (mevedel-bench-describe "one more 100-line tool result appended to that session, then a settled checkpoint (waits for the write), median of 20")
        (mevedel-bench-report "session-checkpoint-tool-result" settled "ms")
        (mevedel-bench-describe "the whole 20 MB conversation written at once (only after a failed write: checkpoints write what changed): Emacs's share (text and properties copied out), then until written")
        (mevedel-bench-report "session-rewrite-20mb" rewrite "ms")
        (mevedel-bench-report "session-rewrite-20mb-durable" rewrite-durable "ms")
        (mevedel-bench-describe "loading that session's conversation back into a buffer (text and saved properties)")
        (mevedel-bench-report "session-load-20mb" load "ms"))
    (kill-buffer buffer)
    (delete-directory root t)))

;;; session-bench.el ends here
