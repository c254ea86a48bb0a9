;;; session-bench.el --- Saving and loading a large session  -*- lexical-binding: t; -*-

;;; Commentary:

;; A synthetic 20 MB conversation (`mevedel-bench-fill') saved through the product's checkpoint
;; (`mevedel-chat-checkpoint'): what Emacs's thread pays (the text
;; crossing into the module and queued), when the write is durable (the
;; writer thread done), a settled checkpoint after one more tool result
;; (what every tool batch costs), the background compaction into the
;; readable copy, and loading it back (`mevedel-transcript-restore').

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
      (let (full durable settled compact load)
        (mevedel-bench-fill chat 1000 8)
        (mevedel-transcript-track buffer store)
        (garbage-collect)
        (setq full (* 1000 (mevedel-bench-seconds (mevedel-chat-checkpoint chat))))
        (setq durable (+ full (* 1000 (mevedel-bench-seconds (mevedel-core-store-flush store 60)))))
        (let ((samples nil))
          (dotimes (i 20)
            (mevedel-bench-append chat "\n\n" (mevedel-bench-call (+ 100001 (* 2 i))))
            (push (* 1000 (mevedel-bench-seconds (mevedel-chat-checkpoint chat nil t))) samples))
          (setq settled (mevedel-bench-percentile samples 50)))
        (setq compact (* 1000 (mevedel-bench-seconds
                                (mevedel-transcript-compact
                                 buffer (mevedel-transcript-export-name
                                         buffer (mevedel-session-directory (mevedel-chat-session chat))))
                                (mevedel-core-store-flush store 60))))
        (with-temp-buffer
          (garbage-collect)
          (setq load (* 1000 (mevedel-bench-seconds
                               (mevedel-transcript-restore (current-buffer) store)))))
        (mevedel-bench-describe "a %.1f MB conversation (1000 turns x 8 calls, Grep 40 lines / Read 100 lines), saved through mevedel-chat-checkpoint into session.sqlite (no figure before this change: sessions were not saved)"
                                (/ (with-current-buffer buffer (position-bytes (point-max))) 1e6))
        (mevedel-bench-report "session-save-20mb" full "ms")
        (mevedel-bench-report "session-save-20mb-durable" durable "ms")
        (mevedel-bench-describe "one more 100-line tool result appended to that conversation, then a settled checkpoint (waits for the write), median of 20")
        (mevedel-bench-report "session-checkpoint-tool-result" settled "ms")
        (mevedel-bench-describe "compacting that conversation's log into one record and writing transcript.txt, on the writer thread")
        (mevedel-bench-report "session-compact-20mb-background" compact "ms")
        (mevedel-bench-describe "loading that conversation back into a buffer (text and saved properties)")
        (mevedel-bench-report "session-load-20mb" load "ms"))
    (kill-buffer buffer)
    (delete-directory root t)))

;;; session-bench.el ends here
