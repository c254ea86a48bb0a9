;;; ask-bench.el --- Moving focus in Ask's questionnaire  -*- lexical-binding: t; -*-

;;; Commentary:

;; A 6-question Ask form, 4 options per question, each option with a
;; 30-line sample, in a shown 100-column view.  Measured: the keys a
;; user moves with, through the command loop (`execute-kbd-macro'):
;; n through every entry of each question (its sample panel redrawn
;; on each option), p back, and TAB to open the next question.

;;; Code:

(require 'mevedel)
(require 'mevedel-bench-lib)
(require 'mevedel-test-helpers)
(mevedel--load)

(defun ask-bench--questions ()
  "Return six questions of four sample-bearing options, as JSON reads."
  (vconcat
   (cl-loop for q below 6
            collect
            (list :header (format "Q%d" q)
                  :question (format "Which variant of component %d should we build first?" q)
                  :options
                  (vconcat
                   (cl-loop for o below 4
                            collect
                            (list :label (format "Variant %d" o)
                                  :description "A description long enough to wrap once in a \
narrow window, as real ones do."
                                  :sample (mapconcat (lambda (n) (format "(defun v%d-%d () %d)" o n n))
                                                     (number-sequence 1 30) "\n"))))))))

(let* ((root (file-name-as-directory (make-temp-file "mevedel-abench-" t)))
       (mevedel-save-sessions nil)
       (view (mevedel root))
       (chat (mevedel-view-chat view))
       (keys 0))
  (set-frame-width nil 100)
  (switch-to-buffer view)
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (mevedel-pipeline-run-tool (mevedel-tool-get "Ask") (list :questions (ask-bench--questions))
                               #'ignore :tool-use-id "bench" :data-buffer (current-buffer)))
  (mevedel-test-wait-until (mevedel-interaction-list chat) 60)
  (let* ((rounds 5)
         (seconds
          (mevedel-bench-seconds
            (dotimes (_ rounds)
              (dotimes (_ 6)
                (dotimes (_ 6) (execute-kbd-macro (kbd "n")) (cl-incf keys))
                (dotimes (_ 6) (execute-kbd-macro (kbd "p")) (cl-incf keys))
                (execute-kbd-macro (kbd "TAB")) (cl-incf keys))
              (dotimes (_ 6) (execute-kbd-macro (kbd "<backtab>")) (cl-incf keys))))))
    (mevedel-bench-describe "6 questions x 4 options with 30-line samples, 100 columns; \
%d keys (n, p, TAB, S-TAB) through the command loop" keys)
    (mevedel-bench-report "ask-redraw" (/ (* 1000 seconds) keys) "ms/key"))
  (kill-buffer view)
  (delete-directory root t))

;;; ask-bench.el ends here
