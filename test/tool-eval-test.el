;;; tool-eval-test.el --- Tests of the Eval tool  -*- lexical-binding: t; -*-

;;; Commentary:

;; Eval through the pipeline, as the model calls it: reading the forms,
;; live evaluation (value, messages, errors, the restored window
;; layout), permissions in each mode, and batch evaluation in a child
;; Emacs under Bash's sandbox, with an escape control: the same write
;; fails outside the workspace and succeeds inside it.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-tool-eval)

(defvar tool-eval-test--root
  (file-name-directory (directory-file-name
                        (file-name-directory (or load-file-name buffer-file-name))))
  "The checkout, where directories outside /tmp can be made.")

(defmacro tool-eval-test--in-session (var mode &rest body)
  "Run BODY with VAR a session in permission MODE and a temporary workspace.
The session's prompter pushes every card it is shown on `cards' and
answers none."
  (declare (indent 2))
  `(let* ((workspace (file-name-as-directory (make-temp-file "tool-eval-ws" t)))
          (cards nil)
          (,var (mevedel-session-create :workspace workspace)))
     (setf (mevedel-session-permission-mode ,var) ,mode)
     (ignore cards)
     (unwind-protect (progn ,@body)
       (mevedel-session-close ,var)
       (delete-directory workspace t))))

(defun tool-eval-test--run (session args &optional seconds)
  "Run Eval with ARGS in SESSION through the pipeline; return the outcome."
  (let ((box (list nil)))
    (mevedel-pipeline-run-tool-outcome (mevedel-tool-get "Eval" "emacs") args
                                       (lambda (o) (setcar box (list o)))
                                       :session session :tool-use-id "toolu_eval")
    (mevedel-test-wait-until (car box) (or seconds 30))
    (caar box)))

;;;; Reading and printing

(ert-deftest mevedel-tool-eval:reads-every-form-or-says-where-it-fails ()
  (should (equal (mevedel-tool-eval-read-forms "(+ 1 2) ; sum\n\n;; next\n(list 'a)")
                 '((+ 1 2) (list 'a))))
  (should-error (mevedel-tool-eval-read-forms "  ;; only a comment\n"))
  (let ((err (should-error (mevedel-tool-eval-read-forms "(setq a 1)\n(foo (bar)"))))
    (should (string-match-p "unfinished expression) at character 11"
                            (error-message-string err))))
  (should (string-match-p "invalid syntax"
                          (error-message-string
                           (should-error (mevedel-tool-eval-read-forms "(a))"))))))

(ert-deftest mevedel-tool-eval:printing-is-bounded ()
  (should (equal (mevedel-tool-eval-print '(1 "two" three)) "(1 \"two\" three)"))
  (let ((circular (list 1 2)))
    (setcdr (cdr circular) circular)
    (should (equal (mevedel-tool-eval-print circular) "#1=(1 2 . #1#)")))
  ;; Exactly the limit is not cut.
  (should (equal (mevedel-tool-eval-print "ab" 4) "\"ab\""))
  (let ((text (mevedel-tool-eval-print (make-string 5000 ?x) 100)))
    (should (string-prefix-p "\"xxx" text))
    (should (string-suffix-p "[printing stopped after 100 characters]" text))
    (should (< (length text) 150))))

;;;; Live

(ert-deftest mevedel-tool-eval:live-value-messages-and-errors ()
  (mevedel-core-ensure)
  (tool-eval-test--in-session session 'full-auto
    (let ((outcome (tool-eval-test--run
                    session '(:form "(message \"step %d\" 1) (message \"done\") (* 6 7)"))))
      (should (eq (plist-get outcome :status) 'success))
      (should (equal (plist-get outcome :result) "Messages:\nstep 1\ndone\n=> 42")))
    ;; The session's directory is default-directory; lexical-binding is on.
    (let ((outcome (tool-eval-test--run
                    session '(:form "(list default-directory (let ((x 1)) (funcall (lambda () x))))"))))
      (should (equal (plist-get outcome :result)
                     (format "=> (%S 1)" (file-name-as-directory
                                          (mevedel-session-workspace session))))))
    (let ((outcome (tool-eval-test--run session '(:form "(message \"before\") (car 1)"))))
      (should (eq (plist-get outcome :status) 'error))
      (should (string-match-p "\\`Messages:\nbefore\nError: Wrong type argument: listp, 1 (wrong-type-argument)"
                              (plist-get outcome :result))))
    (let ((outcome (tool-eval-test--run session '(:form "(+ 1"))))
      (should (eq (plist-get outcome :status) 'error))
      (should (string-match-p "does not read" (plist-get outcome :result))))
    (let ((outcome (tool-eval-test--run session '(:form "1" :mode "elsewhere"))))
      (should (eq (plist-get outcome :status) 'error)))))

;; Issue 42 item 9: a long value is cut only by the pipeline's preview,
;; which keeps its head and its tail, not by a 30,000-character prefix.
(ert-deftest mevedel-tool-eval:long-live-value-keeps-its-tail ()
  (mevedel-core-ensure)
  (tool-eval-test--in-session session 'full-auto
    (let* ((box (list nil))
           (text (progn
                   (mevedel-pipeline-run-tool (mevedel-tool-get "Eval" "emacs")
                                              '(:form "(concat \"HEAD\" (make-string 45000 ?a) \"TAIL\")")
                                              (lambda (r) (setcar box (list r)))
                                              :session session :tool-use-id "toolu_long")
                   (mevedel-test-wait-until (car box) 30)
                   (caar box))))
      (should (string-search "=> \"HEAD" text))
      (should (string-search "TAIL\"" text))
      (should-not (string-search "printing stopped" text))
      (should (< (length text) 40000)))))

(ert-deftest mevedel-tool-eval:live-restores-the-window-layout ()
  (mevedel-core-ensure)
  (tool-eval-test--in-session session 'full-auto
    (delete-other-windows)
    (let ((window (selected-window))
          (buffer (window-buffer)))
      (should (= 1 (length (window-list))))
      (let ((outcome (tool-eval-test--run
                      session '(:form "(split-window) (split-window) (length (window-list))"))))
        (should (equal (plist-get outcome :result) "=> 3")))
      ;; Restored: one window again, showing what it showed.
      (should (equal (window-list) (list window)))
      (should (eq (selected-window) window))
      (should (eq (window-buffer window) buffer))
      ;; preserve_ui false keeps what the forms did.
      (should (equal (plist-get (tool-eval-test--run
                                 session '(:form "(split-window) (length (window-list))"
                                                 :preserve_ui :json-false))
                                :result)
                     "=> 2"))
      (should (= 2 (length (window-list))))
      (delete-other-windows))))

(ert-deftest mevedel-tool-eval:asks-unless-full-auto ()
  (mevedel-core-ensure)
  (dolist (mode '(ask edits))
    (tool-eval-test--in-session session mode
      ;; Nobody can answer: a headless refusal, and nothing ran.
      (defvar tool-eval-test--ran nil)
      (setq tool-eval-test--ran nil)
      (let ((outcome (tool-eval-test--run session '(:form "(setq tool-eval-test--ran t)"))))
        (should (eq (plist-get outcome :status) 'error))
        (should (string-match-p "needs approval" (plist-get outcome :result)))
        (should-not tool-eval-test--ran))
      ;; With a prompter, the call waits on a card.
      (setf (mevedel-session-prompter session)
            (lambda (context _answer) (push context cards) #'ignore))
      (let ((cancel (mevedel-pipeline-run-tool-outcome
                     (mevedel-tool-get "Eval" "emacs") '(:form "(setq tool-eval-test--ran t)")
                     #'ignore :session session)))
        (mevedel-test-wait-until cards 5)
        (should-not tool-eval-test--ran)
        (funcall cancel))
      ;; Every call asks: no answer covers the next form, none is offered.
      (should-not (plist-get (car (mevedel-permissions-cards
                                   (list :tool (mevedel-tool-get "Eval" "emacs")
                                         :args '(:form "1") :tool-use-id "t" :session session)
                                   session))
                             :always))
      (mevedel-permissions-remember session '("Eval"))
      (setf (mevedel-session-prompter session) nil)
      (let ((outcome (tool-eval-test--run session '(:form "(setq tool-eval-test--ran t)"))))
        (should (string-match-p "needs approval" (plist-get outcome :result)))
        (should-not tool-eval-test--ran))))
  (tool-eval-test--in-session session 'full-auto
    (setq tool-eval-test--ran nil)
    (should (eq (plist-get (tool-eval-test--run session '(:form "(setq tool-eval-test--ran t)"))
                           :status)
                'success))
    (should tool-eval-test--ran)))

;;;; Batch

(ert-deftest mevedel-tool-eval:batch-runs-a-child-with-this-load-path ()
  (mevedel-core-ensure)
  (tool-eval-test--in-session session 'full-auto
    (let* ((outcome (tool-eval-test--run
                     session
                     '(:form "(message \"to stderr\")\n(list (featurep 'mevedel-tool-eval)\n (and (locate-library \"mevedel-tool-eval\") t) (file-name-as-directory default-directory) noninteractive)"
                             :mode "batch")
                     60))
           (result (plist-get outcome :result)))
      (should (eq (plist-get outcome :status) 'success))
      ;; A fresh Emacs (nothing of ours loaded) that finds our libraries,
      ;; running in the session's directory.
      (should (string-match-p
               (format "^=> (nil t %s t)$"
                       (regexp-quote (prin1-to-string
                                      (file-name-as-directory
                                       (file-truename (mevedel-session-workspace session))))))
               result))
      (should (string-match-p "^to stderr$" result))
      (should (string-match-p "<bash-execution [^>]*exit_code=\"0\"" result))
      (should (equal (plist-get (plist-get outcome :render-data) :outcome) "success")))
    ;; Strings with newlines and control characters reach the child intact.
    (let ((outcome (tool-eval-test--run
                    session '(:form "(list (length \"a\nb\0c\") (string-to-char \"\\e\"))"
                                    :mode "batch")
                    60)))
      (should (string-match-p "^=> (5 27)$" (plist-get outcome :result))))
    (let ((outcome (tool-eval-test--run session '(:form "(car 1)" :mode "batch") 60)))
      (should (eq (plist-get outcome :status) 'error))
      (should (string-match-p "^Error: Wrong type argument: listp, 1 (wrong-type-argument)$"
                              (plist-get outcome :result)))
      (should (string-match-p "exit_code=\"1\"" (plist-get outcome :result))))))

(ert-deftest mevedel-tool-eval:batch-is-confined-like-bash ()
  (mevedel-core-ensure)
  (let ((outside (file-name-as-directory
                  (make-temp-file (expand-file-name "target/eval-out" tool-eval-test--root) t))))
    (unwind-protect
        (tool-eval-test--in-session session 'full-auto
          (cl-flet ((write-to (file)
                      (tool-eval-test--run
                       session (list :form (format "(write-region \"escaped\" nil %S)" file)
                                     :mode "batch")
                       60)))
            (let* ((target (expand-file-name "escape.txt" outside))
                   (outcome (write-to target)))
              (should (eq (plist-get outcome :status) 'error))
              ;; Refused, or (under a private /tmp) not even there.
              (should (string-match-p
                       "^Error: .*\\(Read-only\\|denied\\|Permission\\|No such file or directory\\)"
                       (plist-get outcome :result)))
              (should-not (file-exists-p target)))
            ;; The control: the same form writing into the workspace succeeds.
            (let* ((target (expand-file-name "inside.txt" (mevedel-session-workspace session)))
                   (outcome (write-to target)))
              (should (eq (plist-get outcome :status) 'success))
              (should (file-exists-p target))))
          ;; Bash's grants: an additional writable path asks even in
          ;; full-auto, and once approved the write outside succeeds.
          (let* ((target (expand-file-name "granted.txt" outside))
                 (args (list :form (format "(write-region \"granted\" nil %S)" target)
                             :mode "batch"
                             :additional_permissions (list :write (vector (directory-file-name outside)))
                             :justification "the test writes there")))
            (should (string-match-p "needs approval"
                                    (plist-get (tool-eval-test--run session args) :result)))
            (should-not (file-exists-p target))
            (setf (mevedel-session-prompter session)
                  (lambda (context answer)
                    (push context cards)
                    (funcall answer 'approve)
                    #'ignore))
            (let ((outcome (tool-eval-test--run session args 60)))
              (should (eq (plist-get outcome :status) 'success))
              (should cards)
              (should (file-exists-p target)))))
      (delete-directory outside t))))

;;;; Rendering

(ert-deftest mevedel-tool-eval:renders-the-form ()
  (let ((row (mevedel-tool-render-row "Eval" '(:form "(emacs-version)\n(+ 1 2)")
                                      "=> 3" nil)))
    (should (equal (plist-get row :header) "Eval (emacs-version)"))
    (should (eq (plist-get row :status) 'success))
    (should (string-match-p "(\\+ 1 2)\n\n=> 3" (plist-get row :body))))
  (let ((row (mevedel-tool-render-row "Eval" '(:form "(sleep-for 60)" :mode "batch")
                                      "Still running." '(:state "running"))))
    (should (equal (plist-get row :header) "Eval (batch) (sleep-for 60)  running"))
    (should (eq (plist-get row :status) 'running))))

(provide 'tool-eval-test)
;;; tool-eval-test.el ends here
