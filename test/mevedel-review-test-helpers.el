;;; mevedel-review-test-helpers.el --- A scripted reviewer for /review tests  -*- lexical-binding: t; -*-

;;; Commentary:

;; The answer of a scripted reviewer and the summary /review must
;; render from it, for ERT (review-test.el) and for an end-to-end run
;; against the scripted model server (scripted-model/): there,
;; `mevedel-review-test-reviewer-step' is the server's step that answers
;; the reviewer's request, and `mevedel-review-test-rendered' what the
;; view must then show.

;;; Code:

(require 'json)

(defun mevedel-review-test-answer (directory)
  "Return a reviewer's JSON answer about files of the workspace DIRECTORY.
Three findings: priority 1 in lisp/a.el, an unspecified (null)
priority in lisp/b.el, priority 3 outside the workspace."
  (let ((root (file-name-as-directory (expand-file-name directory))))
    (json-encode
     `((findings
        . [((title . "Return the old value when the cache is cold")
            (body . "`a' now returns 2 on every call, but callers in\nlisp/b.el still expect 1.")
            (confidence_score . 0.8)
            (priority . 1)
            (code_location . ((absolute_file_path . ,(concat root "lisp/a.el"))
                              (line_range . ((start . 2) (end . 2))))))
           ((title . "Name the magic number")
            (body . "The 2 deserves a constant.")
            (confidence_score . 0.35)
            (priority)
            (code_location . ((absolute_file_path . ,(concat root "lisp/b.el"))
                              (line_range . ((start . 1) (end . 4))))))
           ((title . "Document the new default")
            (body . "")
            (confidence_score . 0.5)
            (priority . 3)
            (code_location . ((absolute_file_path . "/etc/elsewhere.conf")
                              (line_range . ((start . 3) (end . 3))))))])
       (overall_correctness . "patch is incorrect")
       (overall_explanation . "The new return value breaks an existing caller.")
       (overall_confidence_score . 0.75)))))

(defconst mevedel-review-test-rendered
  "Review of the uncommitted changes: the patch is incorrect (confidence 0.75).
The new return value breaks an existing caller.

3 findings:

1. [P1] Return the old value when the cache is cold
   lisp/a.el:2 · confidence 0.80
   `a' now returns 2 on every call, but callers in
   lisp/b.el still expect 1.

2. Name the magic number
   lisp/b.el:1-4 · confidence 0.35
   The 2 deserves a constant.

3. [P3] Document the new default
   /etc/elsewhere.conf:3 · confidence 0.50
"
  "The summary /review renders from `mevedel-review-test-answer'.")

(defun mevedel-review-test-reviewer-step (directory)
  "Return the scripted-model step answering /review's reviewer in DIRECTORY.
It checks that the request is the reviewer's task and answers with
`mevedel-review-test-answer'; add the runtime's request matching
\(e.g. on the reviewer's system prompt) when other requests run at the
same time."
  `((expect . ((user_contains . "Answer with the JSON object")))
    (text . ,(mevedel-review-test-answer directory))))

(provide 'mevedel-review-test-helpers)
;;; mevedel-review-test-helpers.el ends here
