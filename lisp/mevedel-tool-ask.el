;;; mevedel-tool-ask.el --- Ask: questions the model puts to the user  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Ask (a specialist, standalone only: its ToolCall program is the
;; call alone) shows 1 to `mevedel-ask-max-questions' questions in the
;; root view as one questionnaire (mevedel-ask-ui.el) and returns
;; the user's answers.  Each question has a header, the question, 1 to
;; 9 options (label, description, optional sample) and multiSelect.
;;
;; The arguments are checked before anything is shown: labels are
;; trimmed, and a question whose trimmed labels repeat is refused.
;; Submitting answers every question; one left unanswered reports "no
;; preference", which never authorises anything.  Cancelling (q, C-g)
;; is a tool error the model reads; C-c C-k also aborts the run.  A
;; headless run, or a chat no view shows, has no interactive user: the
;; call is an error the model can handle.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)
(require 'mevedel-pipeline)
(require 'mevedel-chat)
(require 'mevedel-ask-ui)

(defcustom mevedel-ask-max-questions 6
  "Most questions one Ask call may put."
  :type 'natnum
  :group 'mevedel-ask)

(defconst mevedel-tool-ask-description
  "Ask the user one or more questions and wait for the answers.
Use it when a decision is the user's (a preference, a trade-off, missing
requirements), not for facts you can find yourself.  Each question has a
short header, the question and 1-9 options (label, optional description,
optional sample: a snippet shown in a preview panel, e.g. code or a
layout); the user can always type a custom answer instead.  Set
multiSelect to true to let several options be chosen.  The result lists
every question with its answer; \"no preference\" means the user chose
nothing for it -- decide yourself, and never read it as permission."
  "What the model reads about Ask.")

;;;; Checking

(defun mevedel-tool-ask--string (value what)
  "Return VALUE trimmed, or signal that WHAT must be a non-empty string."
  (unless (and (stringp value) (not (string-blank-p value)))
    (error "%s must be a non-empty string" what))
  (string-trim value))

(defun mevedel-tool-ask-questions (args)
  "Return the question plists of Ask's ARGS, checked; signal on a bad one."
  (let ((questions (append (plist-get args :questions) nil)))
    (unless (<= 1 (length questions) mevedel-ask-max-questions)
      (error "Ask takes 1 to %d questions, not %d" mevedel-ask-max-questions
             (length questions)))
    (cl-loop
     for question in questions
     for n from 1
     collect
     (let* ((what (format "questions[%d]" n))
            (options (append (plist-get question :options) nil))
            (labels nil))
       (unless (<= 1 (length options) 9)
         (error "%s must have 1 to 9 options, not %d" what (length options)))
       (list :header (mevedel-tool-ask--string (plist-get question :header)
                                               (concat what ".header"))
             :question (mevedel-tool-ask--string (plist-get question :question)
                                                 (concat what ".question"))
             :multi (eq (plist-get question :multiSelect) t)
             :options
             (vconcat
              (cl-loop
               for option in options
               for m from 1
               collect
               (let ((label (mevedel-tool-ask--string
                             (plist-get option :label)
                             (format "%s.options[%d].label" what m)))
                     (sample (plist-get option :sample))
                     (description (plist-get option :description)))
                 (when (member label labels)
                   (error "%s has the option label %S twice" what label))
                 (push label labels)
                 (list :label label
                       :description (and (stringp description) (string-trim description))
                       :sample (and (stringp sample) (not (string-blank-p sample))
                                    (string-trim-right sample)))))))))))

;;;; The result

(defun mevedel-tool-ask-result (answers)
  "Return the model's text for the submitted ANSWERS, (QUESTION . LABELS) pairs.
Selected options' samples follow their answer."
  (mapconcat
   (pcase-lambda (`(,question . ,labels))
     (concat
      (format "%s: %s\n" (plist-get question :header) (plist-get question :question))
      (if labels
          (format "Answer: %s\n" (string-join labels "; "))
        "Answer: no preference (the user chose nothing; decide yourself)\n")
      (cl-loop for option across (plist-get question :options)
               when (and (plist-get option :sample) (member (plist-get option :label) labels))
               concat (format "Sample of %s:\n```\n%s\n```\n"
                              (plist-get option :label) (plist-get option :sample)))))
   answers "\n"))

;;;; The handler

(defun mevedel-tool-ask-run (callback args)
  "Put the questions of ARGS to the user; call CALLBACK with the answers."
  (let* ((context (mevedel-pipeline-current-context))
         (chat (mevedel-chat-of-buffer (plist-get context :data-buffer)))
         (questions (condition-case err (mevedel-tool-ask-questions args)
                      (error (funcall callback (concat "Error: " (error-message-string err)))
                             nil))))
    (cond
     ((null questions))
     ((not (and chat (mevedel-chat-prompter chat)))
      (funcall callback "Error: no interactive user: this run cannot ask questions; \
decide yourself and say what you assumed"))
     (t
      (let* ((requester (mevedel-chat-requester chat context))
             (interaction
              (mevedel-ask-ui-open
               chat questions
               :owner (car requester) :request (cdr requester)
               :on-settle
               (lambda (_interaction outcome)
                 (pcase outcome
                   (`(submitted . ,answers)
                    (funcall callback
                             (list :result (mevedel-tool-ask-result answers)
                                   :render-data
                                   (list :headers (mapcar (lambda (q) (plist-get (car q) :header))
                                                          answers)))))
                   ('aborted
                    (funcall callback "Error: the user cancelled the questions and stopped the run")
                    (run-at-time 0 nil #'mevedel-chat-abort chat))
                   (_ (funcall callback "Error: the user cancelled the questions without \
answering; do not ask them again unless something changed")))))))
        (mevedel-pipeline-add-canceller
         (lambda () (mevedel-interaction-settle interaction 'withdrawn))))))))

;;;; The renderer

(defun mevedel-tool-ask-render (_name args result render-data)
  "Render an Ask call with ARGS, its RESULT and RENDER-DATA.
The row says what happened (\"Asked 2 questions: Language · Tests\").
The headers come from RENDER-DATA, else from ARGS when they are
whole (a ToolCall row may hold them shortened)."
  (let* ((questions (plist-get args :questions))
         (headers (or (plist-get render-data :headers)
                      (and (sequencep questions) (not (stringp questions))
                           (delq nil (mapcar (lambda (q) (and (listp q) (plist-get q :header)))
                                             questions)))))
         (count (or (and headers (length headers))
                    (and (sequencep questions) (not (stringp questions)) (length questions)))))
    (list :header (concat (if result "Asked" "Asking")
                          (if count
                              (format " %d question%s" count (if (= count 1) "" "s"))
                            " questions")
                          (and headers
                               (concat ": " (mevedel-tool-render-shorten
                                             (string-join headers " · ") 60))))
          :body (unless mevedel-tool-render-summary-only result)
          :expandable-p (and result (not (string-empty-p result)))
          :initially-collapsed-p nil)))

;;;; The declaration

(mevedel-define-tool "Ask"
  :standalone t
  :category "interaction"
  :description mevedel-tool-ask-description
  :summary "Ask the user clarifying questions with options in a form; returns the answers."
  :args ((questions array :required "The questions, 1-6."
                    :minItems 1
                    :items (:type object
                                  :properties
                                  (header (:type string :description "A few words naming the question.")
                                          question (:type string :description "The question.")
                                          multiSelect (:type boolean
                                                             :description "Allow several options (default false).")
                                          options (:type array
                                                         :items (:type object
                                                                       :properties
                                                                       (label (:type string)
                                                                              description (:type string)
                                                                              sample (:type string))
                                                                       :required (label))))
                                  :required (header question options))))
  :function #'mevedel-tool-ask-run
  :async-p t
  :read-only-p t
  :renderer #'mevedel-tool-ask-render)

(provide 'mevedel-tool-ask)
;;; mevedel-tool-ask.el ends here
