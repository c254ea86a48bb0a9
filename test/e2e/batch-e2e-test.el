;;; batch-e2e-test.el --- bin/mevedel against the scripted model  -*- lexical-binding: t; -*-

;;; Commentary:

;; Runs the headless wrapper bin/mevedel as a subprocess, with an init
;; file pointing gptel at the scripted model server, and checks its
;; output (plain answer or JSON transcript) and exit status.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(cl-defun mevedel-batch-test--run (&key steps files (wire 'openai) args)
  "Run bin/mevedel with ARGS against a server replaying STEPS.
FILES populate the workspace.  Return (STATUS STDOUT STDERR LOG)."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace files))
         (script (mevedel-e2e-write-script steps))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) wire t nil))
         (stderr (make-temp-file "mevedel-batch-stderr")))
    (unwind-protect
        (with-temp-buffer
          (let* ((process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                               invocation-directory))
                                            process-environment))
                 (status (apply #'call-process
                                (expand-file-name "bin/mevedel" mevedel-test-root)
                                nil (list t stderr) nil
                                (append (list "--config" init "--dir" root) args))))
            (list status (buffer-string)
                  (with-temp-buffer (insert-file-contents stderr) (buffer-string))
                  (mevedel-scripted-model-log server))))
      (mevedel-scripted-model-stop server)
      (dolist (file (list init script stderr)) (delete-file file))
      (delete-directory root t))))

(defconst mevedel-batch-test--steps
  `(((text . "Reading.")
     (tool_calls . [((name . "Read") (arguments . ((file_path . "{{root}}notes.txt"))))
                    ((name . "Read") (arguments . ((file_path . "{{root}}gone.txt"))))]))
    ((expect . ((results . [((contains . "the answer is 42")) ((contains . "gone.txt"))])))
     (text . "The answer is 42.")))
  "A turn with one good and one failing call, then the answer.")

(dolist (wire mevedel-e2e-wires)
  (eval
   `(ert-deftest ,(intern (format "mevedel-batch:json-transcript-%s" wire)) ()
      ,(format "bin/mevedel --json prints the tool calls with IDs (%s wire format)." wire)
      (pcase-let ((`(,status ,stdout ,stderr ,log)
                   (mevedel-batch-test--run
                    :wire ',wire :steps mevedel-batch-test--steps
                    :files '(("notes.txt" . "the answer is 42\n"))
                    :args '("-p" "What is the answer?" "--json"))))
        (should (eql status 0))
        (should-not (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e))) log))
        (let* ((json (condition-case err
                         (json-parse-string stdout :object-type 'alist :array-type 'list
                                            :null-object nil :false-object nil)
                       (error (ert-fail (format "Not JSON (%S): %s\nstderr: %s"
                                                err stdout stderr)))))
               (calls (alist-get 'tool_calls json))
               (served (car (mevedel-e2e-served-ids log))))
          (should (equal (alist-get 'outcome json) "done"))
          (should (equal (alist-get 'answer json) "The answer is 42."))
          (should (= (length calls) 2))
          (should (equal (mapcar (lambda (c) (alist-get 'id c)) calls) served))
          (should (equal (mapcar (lambda (c) (alist-get 'status c)) calls) '("success" "error")))
          (should (equal (alist-get 'file_path (alist-get 'args (car calls)))
                         (concat (alist-get 'workspace json) "notes.txt")))
          (should (string-match-p "the answer is 42"
                                  (alist-get 'result_preview (car calls))))
          (should (string-match-p "\\`Error" (alist-get 'result_preview (cadr calls))))
          (should (equal (mapcar (lambda (m) (alist-get 'role m)) (alist-get 'messages json))
                         '("user" "assistant" "tool" "tool" "assistant"))))))
   t))

(ert-deftest mevedel-batch:plain-answer ()
  "Without --json, bin/mevedel prints only the final answer."
  (pcase-let ((`(,status ,stdout ,_stderr ,_log)
               (mevedel-batch-test--run
                :steps mevedel-batch-test--steps
                :files '(("notes.txt" . "the answer is 42\n"))
                :args '("-p" "What is the answer?"))))
    (should (eql status 0))
    (should (equal stdout "The answer is 42.\n"))))

(ert-deftest mevedel-batch:model-error-exits-non-zero ()
  "A request failing for good exits with status 1; --json still prints valid JSON."
  (pcase-let ((`(,status ,stdout ,stderr ,_log)
               (mevedel-batch-test--run
                :steps '(((error . ((status . 400) (message . "backend exploded")))))
                :args '("-p" "Hello" "--json"))))
    (should (eql status 1))
    (let ((json (json-parse-string stdout :object-type 'alist :null-object nil)))
      (should (equal (alist-get 'outcome json) "error"))
      (should (string-match-p "backend exploded" (alist-get 'error json))))
    (should (string-match-p "the turn failed" stderr))))

(ert-deftest mevedel-batch:usage-errors-exit-2 ()
  "A missing prompt or a bad permission mode is a usage error (status 2)."
  (dolist (args '(("--json") ("-p" "x" "--permission-mode" "yolo")))
    (pcase-let ((`(,status ,_stdout ,stderr ,_log)
                 (mevedel-batch-test--run :steps '(((text . "unused"))) :args args)))
      (should (eql status 2))
      (should (string-match-p "Usage: mevedel -p PROMPT" stderr)))))

(ert-deftest mevedel-batch:headless-ask-is-refused ()
  "In ask mode a call that needs approval is refused, since nobody can answer."
  (pcase-let ((`(,status ,stdout ,_stderr ,log)
               (mevedel-batch-test--run
                :steps `(((tool_calls . [((name . "Read")
                                          (arguments . ((file_path . "/etc/hostname"))))]))
                         ((expect . ((results . [((contains . "headless"))])))
                          (text . "I could not read it.")))
                :args '("-p" "Read /etc/hostname" "--json"))))
    (should (eql status 0))
    (should-not (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e))) log))
    (let ((call (car (alist-get 'tool_calls (json-parse-string stdout :object-type 'alist
                                                                :array-type 'list
                                                                :null-object nil)))))
      (should (equal (alist-get 'status call) "denied")))))

(provide 'batch-e2e-test)
;;; batch-e2e-test.el ends here
