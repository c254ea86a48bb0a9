;;; view-bench.el --- The session view on long transcripts  -*- lexical-binding: t; -*-

;;; Commentary:

;; Synthetic conversations of N turns of M tool calls, written into a
;; chat's data buffer in the format gptel writes (a prompt, a response,
;; then each call's "``` tool" block with its arguments and result,
;; separated as gptel separates them, and a closing response); calls
;; alternate between a Grep of 40 result lines and a Read of 100.
;; Measured: a full redraw of the view (`mevedel-view-rerender') on
;; 100 x 8 and 500 x 8 turns; resuming a saved 1000 x 8 session with
;; `mevedel' (written through the real save path, then read back from
;; session.sqlite); one tool settlement (the `tool-results' event) at
;; the end of a turn of 300 calls; and the view's memory for the
;; resumed session.

;;; Code:

(require 'mevedel)
(require 'mevedel-view)
(require 'memory-report)
(require 'mevedel-bench-lib)
(require 'mevedel-test-helpers)

(defun view-bench--data-size (chat)
  "Return the size of CHAT's data buffer in bytes."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (1- (position-bytes (point-max)))))

(defun view-bench--workspace ()
  "Return a new temporary workspace directory."
  (file-name-as-directory (make-temp-file "mevedel-vbench-" t)))

(defun view-bench--close (view)
  "Kill VIEW and its chat's data buffer."
  (let ((chat (mevedel-view-chat view)))
    (kill-buffer view)
    (kill-buffer (mevedel-chat-data-buffer chat))))

(defun view-bench--settle ()
  "Let timers the view started run until none is pending."
  (while (cl-some (lambda (timer) (eq (timer--function timer) #'mevedel-view--fill-pending))
                  timer-list)
    (accept-process-output nil 0.001)))

(defun view-bench--redraw (id turns calls runs before)
  "Report ID: a full redraw of a view of TURNS x CALLS, median of RUNS.
BEFORE says what the same redraw cost before the view drew the last
turns first."
  (let* ((root (view-bench--workspace))
         (mevedel-save-sessions nil)
         (view (mevedel root))
         (chat (mevedel-view-chat view)))
    (unwind-protect
        (progn
          (mevedel-bench-fill chat turns calls)
          (mevedel-view-rerender view)
          (view-bench--settle)
          (let (times totals)
            (dotimes (_ runs)
              (garbage-collect)
              (let ((start (float-time)))
                (mevedel-view-rerender view)
                (push (- (float-time) start) times)
                (view-bench--settle)
                (push (- (float-time) start) totals)))
            (mevedel-bench-describe "%d turns x %d calls (Grep 40 lines / Read 100 lines), data buffer %.1f MB, view %.2f MB; `mevedel-view-rerender' until it returns, median of %d runs after one warm-up (the whole transcript drawn after %.0f ms); before this change: %s"
                                    turns calls (/ (view-bench--data-size chat) 1e6)
                                    (/ (with-current-buffer view (buffer-size)) 1e6)
                                    runs (* 1000 (mevedel-bench-percentile totals 50)) before)
            (mevedel-bench-report id (* 1000 (mevedel-bench-percentile times 50)) "ms")))
      (view-bench--close view)
      (delete-directory root t))))

(defun view-bench--save-session (root turns calls)
  "Save a session of TURNS x CALLS in workspace ROOT through the real save path.
Return the data size in bytes."
  (let* ((view (mevedel root))
         (chat (mevedel-view-chat view)))
    (mevedel-save--begin chat nil)
    (mevedel-bench-fill chat turns calls)
    ;; As a turn ends: checkpoint, consolidation and the readable copy.
    (mevedel-save--settle chat)
    (let ((size (view-bench--data-size chat))
          (failure (mevedel-save-flush chat 60)))
      (when failure (error "Saving the bench session failed: %s" failure))
      (view-bench--close view)
      size)))

(defun view-bench--gc-bytes ()
  "Return the bytes of Lisp objects in use after a garbage collection."
  (cl-loop for (name size used) in (garbage-collect)
           unless (eq name 'heap)
           sum (* size (or used 0))))

(defun view-bench--last-screen-drawn-p (view lines)
  "Return non-nil when VIEW's transcript ends with its data's last LINES lines.
The data's last lines are its last closing response; the view holds
them when the transcript's end, where the window shows, is drawn."
  (with-current-buffer view
    (save-excursion
      (goto-char mevedel-view--transcript-end)
      (forward-line (- lines))
      (and (> (count-lines (point) mevedel-view--transcript-end) (1- lines))
           (string-match-p "It is defined in"
                           (buffer-substring-no-properties (point) mevedel-view--transcript-end))))))

(defun view-bench--resume (turns calls runs)
  "Report resuming a saved TURNS x CALLS session with `mevedel', RUNS times.
Then report the memory of the view of the resumed session."
  (let* ((root (view-bench--workspace))
         (size (view-bench--save-session root turns calls))
         times totals views lines)
    (unwind-protect
        (progn
          (dotimes (_ runs)
            (garbage-collect)
            (let* ((drawing 0)
                   (timed (lambda (redraw &rest args)
                            (let ((start (float-time)))
                              (prog1 (apply redraw args)
                                (setq drawing (+ drawing (- (float-time) start)))))))
                   (start (float-time))
                   (view (unwind-protect
                             (progn (advice-add 'mevedel-view-rerender :around timed)
                                    (mevedel root))
                           (advice-remove 'mevedel-view-rerender timed)))
                   (first (- (float-time) start)))
              (push drawing views)
              (setq lines (window-body-height (get-buffer-window view)))
              (unless (view-bench--last-screen-drawn-p view lines)
                (error "The view's last screen is not drawn when `mevedel' returns"))
              (push first times)
              (view-bench--settle)
              (push (- (float-time) start) totals)
              (view-bench--close view)))
          (mevedel-bench-describe "saved session of %d turns x %d calls, %.1f MB of data, in session.sqlite; `mevedel' on its workspace until it returns with the last screen drawn (the view's transcript ends with the last %d lines, the window's height, of the conversation; batch Emacs has no redisplay), median of %d runs; of that, the view's drawing (`mevedel-view-rerender') took %.0f ms, the rest is the chat resuming its data buffer from session.sqlite, its text from the intact readable copy and the last turns' properties first (everything drawn after %.0f ms); before this change: no saved sessions, and a full redraw of this data took 78 s (old code, one run); resuming from the log's text with every property applied first: 156 ms (make bench, session 9)"
                                  turns calls (/ size 1e6) lines runs
                                  (* 1000 (mevedel-bench-percentile views 50))
                                  (* 1000 (mevedel-bench-percentile totals 50)))
          (mevedel-bench-report "view-resume-20mb-first-paint"
                                (* 1000 (mevedel-bench-percentile times 50)) "ms")
          (let* ((chat (mevedel-chat-get-create root (mevedel-session-latest root)))
                 (before (progn (mevedel-transcript-complete (mevedel-chat-data-buffer chat))
                                (view-bench--gc-bytes)))
                 (view (mevedel-view-buffer chat)))
            (view-bench--settle)
            (let ((objects (- (view-bench--gc-bytes) before))
                  (text (with-current-buffer view (1- (position-bytes (point-max)))))
                  (undo (memory-report-object-size (buffer-local-value 'buffer-undo-list view))))
              (mevedel-bench-describe "the session above resumed without a view, then its view made and drawn to the end: the view buffer's text (%.2f MB) plus the growth of the Lisp objects `garbage-collect' counts (%.2f MB: mostly the view's text properties, intervals and their property lists; also its markers, its index and its undo list, %.2f MB by `memory-report-object-size', which batch Emacs has no command loop to truncate), over the data buffer's %.1f MB; before this change: 0.89 x"
                                      (/ text 1e6) (/ objects 1e6) (/ undo 1e6) (/ size 1e6))
              (mevedel-bench-report "view-memory-20mb" (/ (+ text objects) (float size)) "x-data"))
            (view-bench--close view)))
      (delete-directory root t))))

(defun view-bench--event (calls rounds)
  "Report one tool settlement at the end of a turn of CALLS calls.
The figure is the median over the last ROUNDS settlements."
  (let* ((root (view-bench--workspace))
         (mevedel-save-sessions nil)
         (view (mevedel root))
         (chat (mevedel-view-chat view))
         times)
    (unwind-protect
        (progn
          (mevedel-bench-fill chat 20 8)
          (mevedel-view-rerender view)
          (mevedel-test-begin-turn chat "Rename bench everywhere.")
          (mevedel-chat-notify chat 'turn-start "Rename bench everywhere.")
          (dotimes (i calls)
            (let* ((n (+ 1000 i))
                   (record (list :id (format "call_%05d" n) :name (if (cl-evenp n) "Grep" "Read")
                                 :args nil)))
              (dolist (chunk (list "\nChecking " (format "file %d." n)))
                (mevedel-bench-append chat (mevedel-bench-response chunk))
                (mevedel-chat-notify chat 'text chunk))
              (setf (mevedel-chat-live-calls chat) (list record))
              (mevedel-chat-notify chat 'tools-start (list record))
              (mevedel-bench-append chat "\n\n" (mevedel-bench-call n))
              (setf (mevedel-chat-live-calls chat) nil)
              (let ((start (float-time)))
                (mevedel-chat-notify chat 'tool-results (list record))
                (when (>= i (- calls rounds))
                  (push (- (float-time) start) times)))))
          (mevedel-bench-describe "a turn of %d calls (one per model response, each response streamed in 2 chunks) after 20 turns x 8 calls; the view's handling of one `tool-results' event (one call settled), median of the last %d; before this change: 42-73 ms per event in a 200-call turn (the issue's figure; 119 ms measured here on the old code for 300 calls)"
                                  calls rounds)
          (mevedel-bench-report "view-event-300-call-turn"
                                (* 1000 (mevedel-bench-percentile times 50)) "ms"))
      (view-bench--close view)
      (delete-directory root t))))

(mevedel-core-ensure)
(view-bench--redraw "view-redraw-2mb" 100 8 7
                    "175 ms for 1.9 MB (the issue's figure; 431 ms measured here on the old code)")
(view-bench--redraw "view-redraw-10mb" 500 8 5
                    "4.5 s for 9.5 MB (the issue's figure; 14.5 s measured here on the old code)")
(view-bench--resume 1000 8 3)
(view-bench--event 300 50)

;;; view-bench.el ends here
