;;; ask-test.el --- Ask's questionnaire, driven by keys  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)
(require 'mevedel-tool-ask)

(defun ask-test--option (label &optional description sample)
  "Return an option plist with LABEL, DESCRIPTION and SAMPLE, as JSON reads."
  `(:label ,label ,@(and description (list :description description))
           ,@(and sample (list :sample sample))))

(defun ask-test--question (header question options &optional multi)
  "Return a question plist HEADER QUESTION OPTIONS MULTI, as JSON reads."
  `(:header ,header :question ,question :options ,(vconcat options)
            ,@(and multi (list :multiSelect t))))

(defun ask-test--three ()
  "Return three questions: samples, multi-select, plain."
  (list (ask-test--question "Format" "Which export format?"
                            (list (ask-test--option "Markdown" "plain text" "# Title\nbody")
                                  (ask-test--option "Org" "folds and tables" "* Title\nbody")
                                  (ask-test--option " JSON " "machine readable")))
        (ask-test--question "Targets" "Which targets should build?"
                            (list (ask-test--option "linux") (ask-test--option "mac")
                                  (ask-test--option "windows"))
                            t)
        (ask-test--question "Sync" "When to sync?"
                            (list (ask-test--option "On save") (ask-test--option "Hourly")))))

(defmacro ask-test--with-form (questions &rest body)
  "Start Ask with QUESTIONS in a shown view; run BODY with `box', `view', `chat'.
`box' is the call's result box; point is in the form."
  (declare (indent 1))
  `(mevedel-test-with-view view chat
     (switch-to-buffer view)
     (let ((box (mevedel-test-start-tool chat "Ask" "ask-1"
                                         (list :questions (vconcat ,questions)))))
       (mevedel-test-wait-until (or (car box) (mevedel-interaction-list chat)) 10)
       (should-not (car box))
       (should (eq (mevedel-interaction-kind (mevedel-interaction-at)) 'ask))
       ,@body)))

(defun ask-test--keys (keys)
  "Type KEYS (a `kbd' string) in the selected window."
  (execute-kbd-macro (kbd keys)))

(defun ask-test--entry ()
  "Return the form entry at point."
  (get-text-property (point) 'mevedel-ask-entry))

(defun ask-test--form-text ()
  "Return the text of the form at point, without properties."
  (let ((overlay (mevedel-interaction-overlay (mevedel-interaction-at))))
    (buffer-substring-no-properties (overlay-start overlay) (overlay-end overlay))))

(defun ask-test--form-lines ()
  "Return the number of lines of the form at point."
  (length (split-string (ask-test--form-text) "\n")))

(defun ask-test--result (box)
  "Wait for the Ask call in BOX and return its result text."
  (mevedel-test-wait-until (car box) 10)
  (caar box))

(ert-deftest mevedel-ask:every-binding-drives-the-form ()
  (ask-test--with-form (ask-test--three)
    ;; The first question is open at its heading; the others are one line each.
    (should (equal (ask-test--entry) '(question 0)))
    (should (string-match-p "▸ Targets: Which targets should build\\? → no answer yet"
                            (ask-test--form-text)))
    ;; Moving between entries never repaints the form.
    (let ((tick (buffer-chars-modified-tick)))
      (ask-test--keys "n")
      (should (equal (ask-test--entry) '(option 0 0)))
      (ask-test--keys "p")
      (should (equal (ask-test--entry) '(question 0)))
      (ask-test--keys "C-n")
      (should (equal (ask-test--entry) '(option 0 0)))
      (ask-test--keys "C-p <down>")
      (should (equal (ask-test--entry) '(option 0 0)))
      (ask-test--keys "<up>")
      (should (equal (ask-test--entry) '(question 0)))
      ;; 1-9 focus an option from the heading too.
      (ask-test--keys "3")
      (should (equal (ask-test--entry) '(option 0 2)))
      (should (= tick (buffer-chars-modified-tick))))
    ;; Labels are trimmed for display.
    (should (string-match-p "3\\. ( ) JSON$" (ask-test--form-text)))
    ;; RET chooses; a single-select answer opens the next unanswered question.
    (ask-test--keys "2 RET")
    (should (equal (ask-test--entry) '(question 1)))
    (should (string-match-p "▸ Format: Which export format\\? → Org" (ask-test--form-text)))
    ;; Multi-select: RET toggles and stays; custom text is kept alongside.
    (ask-test--keys "3 RET 1 RET")
    (should (equal (ask-test--entry) '(option 1 0)))
    (should (string-match-p "\\[x\\] linux" (ask-test--form-text)))
    (should (string-match-p "\\[x\\] windows" (ask-test--form-text)))
    (ask-test--keys "c arm64 RET")
    (should (string-match-p "custom: arm64" (ask-test--form-text)))
    ;; c starts from the previous answer; editing replaces only the custom text.
    (ask-test--keys "c -v2 RET")
    (should (string-match-p "custom: arm64-v2" (ask-test--form-text)))
    (should (string-match-p "\\[x\\] linux" (ask-test--form-text)))
    ;; TAB / S-TAB open the next / previous question; Submit is the last stop.
    (ask-test--keys "TAB")
    (should (equal (ask-test--entry) '(question 2)))
    (ask-test--keys "<backtab>")
    (should (equal (ask-test--entry) '(option 1 0)))
    (ask-test--keys "TAB TAB")
    (should (equal (ask-test--entry) '(submit)))
    (ask-test--keys "TAB")
    (should (equal (ask-test--entry) '(submit)))
    (should (string-match-p "\\[ Submit \\]  2/3 answered" (ask-test--form-text)))
    ;; RET on a closed question opens it on its current answer.
    (goto-char (mevedel-ask-ui--entry-start (mevedel-interaction-at) '(question 0)))
    (ask-test--keys "RET")
    (should (equal (ask-test--entry) '(option 0 1)))
    ;; C-c C-c submits; the unanswered question reports no preference.
    (ask-test--keys "C-c C-c")
    (let ((result (ask-test--result box)))
      (should (string-match-p "Format: Which export format\\?\nAnswer: Org\n" result))
      (should (string-match-p "Sample of Org:\n```\n\\* Title\nbody\n```" result))
      (should (string-match-p "Answer: linux; windows; arm64-v2\n" result))
      (should (string-match-p "Sync: When to sync\\?\nAnswer: no preference" result)))
    (should-not (mevedel-interaction-list chat))))

(ert-deftest mevedel-ask:description-chooses-and-submit-row-submits ()
  (ask-test--with-form (list (ask-test--question "One" "Pick one"
                                                 (list (ask-test--option "A" "the first")
                                                       (ask-test--option "B"))))
    ;; RET on the description chooses its option; then point is on Submit.
    (ask-test--keys "n")
    (forward-line 1)
    (should (equal (ask-test--entry) '(option 0 0)))
    (should (string-prefix-p "the first" (string-trim (buffer-substring (line-beginning-position)
                                                                        (line-end-position)))))
    (ask-test--keys "RET")
    (should (equal (ask-test--entry) '(submit)))
    (ask-test--keys "RET")
    (should (string-match-p "Answer: A\n" (ask-test--result box)))))

(ert-deftest mevedel-ask:the-form-takes-point-from-a-draft ()
  "The form takes point though the composer holds a draft; its key line fits 80."
  (mevedel-test-with-view view chat
    (switch-to-buffer view)
    (goto-char (point-max))
    (insert "draft")
    (let ((box (mevedel-test-start-tool chat "Ask" "ask-d"
                                        (list :questions (vconcat (ask-test--three))))))
      (mevedel-test-wait-until (mevedel-interaction-list chat) 10)
      (should (eq (mevedel-interaction-kind (mevedel-interaction-at)) 'ask))
      (should (equal (mevedel-view--composer-text) "draft"))
      (should (cl-some (lambda (line) (string-match-p "C-c C-c submit" line))
                       (split-string (ask-test--form-text) "\n")))
      (dolist (line (split-string (ask-test--form-text) "\n"))
        (when (string-search "submit" line)
          (should (<= (string-width line) 80))))
      (ask-test--keys "q")
      (should (ask-test--result box)))))

(ert-deftest mevedel-ask:cancel-and-abort ()
  (dolist (keys '("q" "C-g"))
    (ask-test--with-form (ask-test--three)
      (let ((aborted nil))
        (cl-letf (((symbol-function 'mevedel-chat-abort) (lambda (_) (setq aborted t))))
          (ask-test--keys keys)
          (should (string-match-p "\\`Error: the user cancelled the questions without answering"
                                  (ask-test--result box)))
          (mevedel-test-sleep 0.05)
          (should-not aborted)))))
  (ask-test--with-form (ask-test--three)
    (let ((aborted nil))
      (cl-letf (((symbol-function 'mevedel-chat-abort) (lambda (c) (setq aborted c))))
        (ask-test--keys "C-c C-k")
        (should (string-match-p "stopped the run" (ask-test--result box)))
        (mevedel-test-wait-until aborted 5)
        (should (eq aborted chat))))))

(ert-deftest mevedel-ask:withdrawn-with-its-call ()
  (mevedel-test-with-view view chat
    (let* ((result nil)
           (cancel (with-current-buffer (mevedel-chat-data-buffer chat)
                     (mevedel-pipeline-run-tool (mevedel-tool-get "Ask")
                                                (list :questions (vconcat (ask-test--three)))
                                                (lambda (r) (setq result r))
                                                :tool-use-id "ask-2"
                                                :data-buffer (current-buffer)))))
      (mevedel-test-wait-until (mevedel-interaction-list chat) 10)
      (funcall cancel)
      (should result)
      (should-not (mevedel-interaction-list chat))
      (with-current-buffer view
        (should-not (text-property-any (point-min) (point-max) 'mevedel-ask-entry '(submit)))))))

(ert-deftest mevedel-ask:duplicate-labels-rejected-before-showing ()
  (mevedel-test-with-view view chat
    (let ((result (mevedel-test-run-tool
                   chat "Ask" "ask-d"
                   (list :questions
                         (vector (ask-test--question "Dup" "Which?"
                                                     (list (ask-test--option "Same")
                                                           (ask-test--option " Same "))))))))
      (should (string-match-p "option label \"Same\" twice" result))
      (should-not (mevedel-interaction-list chat)))))

(ert-deftest mevedel-ask:headless-has-no-interactive-user ()
  (mevedel-test-with-view view chat
    (mevedel-chat-set-prompter chat nil)
    (let ((result (mevedel-test-run-tool chat "Ask" "ask-h"
                                         (list :questions (vconcat (ask-test--three))))))
      (should (string-match-p "\\`Error: no interactive user" result))
      (should-not (mevedel-interaction-list chat)))))

(ert-deftest mevedel-ask:samples-panel-wraps-pages-and-follows-point ()
  (let ((mevedel-ask-ui-sample-height 4)
        (long (mapconcat (lambda (n) (format "line %d" n)) (number-sequence 1 12) "\n")))
    (ask-test--with-form
        (list (ask-test--question
               "Look" "Which layout?"
               (list (ask-test--option "Tall" nil long)
                     (ask-test--option "Wide" nil (make-string 150 ?w))
                     (ask-test--option "None"))))
      (set-frame-width nil 60)
      (run-hook-with-args 'window-size-change-functions (selected-frame))
      (should (string-match-p "┌ sample: Tall (1–4 of 12)" (ask-test--form-text)))
      (let ((lines (ask-test--form-lines)))
        ;; C-v / M-v page the sample while point is in the open question.
        (ask-test--keys "C-v")
        (should (string-match-p "┌ sample: Tall (5–8 of 12)" (ask-test--form-text)))
        (should (string-match-p "│ line 5\n" (ask-test--form-text)))
        (ask-test--keys "C-v C-v")
        (should (string-match-p "(9–12 of 12)" (ask-test--form-text)))
        (ask-test--keys "M-v")
        (should (string-match-p "(5–8 of 12)" (ask-test--form-text)))
        ;; Visiting an option shows its sample, wrapped with ↪ rows, at the same height.
        (ask-test--keys "2")
        (should (string-match-p "┌ sample: Wide" (ask-test--form-text)))
        (should (string-match-p "│ ↪ w" (ask-test--form-text)))
        (should (= lines (ask-test--form-lines)))
        ;; An option without a sample leaves the last one shown.
        (ask-test--keys "3")
        (should (string-match-p "┌ sample: Wide" (ask-test--form-text)))
        ;; Every row fits the 60-column window (59 without a right fringe).
        (dolist (line (split-string (ask-test--form-text) "\n"))
          (should (<= (string-width line) 59)))
        ;; A wider window lays the form out again at once.
        (set-frame-width nil 100)
        (run-hook-with-args 'window-size-change-functions (selected-frame))
        (should (eq (mevedel-ask-ui-form-width (mevedel-interaction-data (mevedel-interaction-at)))
                    99))
        (should (string-match-p "┌ sample: Wide" (ask-test--form-text)))
        (should (equal (ask-test--entry) '(option 0 2)))
        (set-frame-width nil 80)))))

(ert-deftest mevedel-ask:form-height-is-constant-between-questions ()
  (dolist (width '(60 100))
    (ask-test--with-form
        (list (ask-test--question "Short" "Yes?" (list (ask-test--option "y") (ask-test--option "n")))
              (ask-test--question
               "Long" (string-join (make-list 30 "why") " ")
               (list (ask-test--option "First" (string-join (make-list 40 "detail") " "))
                     (ask-test--option "Second" nil "a\nb\nc\nd\ne\nf")
                     (ask-test--option "Third")))
              (ask-test--question "Multi" "Which?" (list (ask-test--option "a") (ask-test--option "b")
                                                         (ask-test--option "c"))
                                  t))
      (set-frame-width nil width)
      (run-hook-with-args 'window-size-change-functions (selected-frame))
      (let ((height (ask-test--form-lines))
            (seen nil))
        (dotimes (_ 4)
          (ask-test--keys "TAB")
          (push (ask-test--form-lines) seen))
        (dotimes (_ 4)
          (ask-test--keys "<backtab>")
          (push (ask-test--form-lines) seen))
        (should (equal (delete-dups seen) (list height))))
      (set-frame-width nil 80))))

(ert-deftest mevedel-ask:a-childs-form-is-attributed-and-cancelled-with-its-request ()
  (let ((mevedel-interaction-requester-functions
         (list (lambda (_context) (cons "/root/worker" 'worker-request)))))
    (ask-test--with-form (ask-test--three)
      (should (string-match-p "\\`\nAsk · 3 questions · /root/worker\n" (ask-test--form-text)))
      ;; Interrupting another request leaves it; its own request cancels it.
      (should (= 0 (mevedel-interaction-cancel-request chat 'other-request)))
      (should-not (car box))
      (should (= 1 (mevedel-interaction-cancel-request chat 'worker-request)))
      (should (string-match-p "cancelled the questions" (ask-test--result box))))))

(ert-deftest mevedel-ask:a-click-chooses ()
  (ask-test--with-form (ask-test--three)
    (let ((pos (mevedel-ask-ui--entry-start (mevedel-interaction-at) '(option 0 1))))
      (goto-char (mevedel-ask-ui--entry-start (mevedel-interaction-at) '(question 0)))
      (execute-kbd-macro (vector (list 'mouse-1 (list (selected-window) pos '(0 . 0) 0))))
      (should (string-match-p "▸ Format: Which export format\\? → Org" (ask-test--form-text)))
      (should (equal (ask-test--entry) '(question 1)))
      ;; S-TAB goes back like <backtab>.
      (ask-test--keys "S-TAB")
      (should (equal (ask-test--entry) '(option 0 1))))))

(provide 'ask-test)
;;; ask-test.el ends here
