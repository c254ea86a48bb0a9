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
          (should (equal (assq 'unknown_tools json) '(unknown_tools)))
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
  "In ask mode a call that needs approval is refused, since nobody can answer.
A turn whose every call was refused says so: outcome `refused', exit 1,
and the model's answer is kept."
  (pcase-let ((`(,status ,stdout ,_stderr ,log)
               (mevedel-batch-test--run
                :steps `(((tool_calls . [((name . "Read")
                                          (arguments . ((file_path . "/etc/hostname"))))]))
                         ((expect . ((results . [((contains . "headless"))])))
                          (text . "I could not read it.")))
                :args '("-p" "Read /etc/hostname" "--json"))))
    (should (eql status 1))
    (should-not (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e))) log))
    (let* ((json (json-parse-string stdout :object-type 'alist :array-type 'list
                                    :null-object nil))
           (call (car (alist-get 'tool_calls json))))
      (should (equal (alist-get 'status call) "denied"))
      (should (equal (alist-get 'outcome json) "refused"))
      (should (string-match-p "every tool call was refused (1).*--permission-mode"
                              (alist-get 'error json)))
      (should (equal (alist-get 'answer json) "I could not read it.")))))

(ert-deftest mevedel-batch:help-and-exit-codes ()
  "--help and -h print the usage and exit 0; other mistakes say what is wrong, exit 2."
  (dolist (flag '("--help" "-h"))
    (pcase-let ((`(,status ,stdout ,stderr) (mevedel-e2e-bin flag)))
      (should (eql status 0))
      (should (string-match-p "\\`Usage: mevedel -p PROMPT" stdout))
      (should (string-match-p "--continue" stdout))
      (should (string-match-p "Exit status: 0 done.*130 interrupted" (replace-regexp-in-string "\n" " " stdout)))
      (should (equal stderr ""))))
  ;; Help wins over what follows it.
  (should (eql (car (mevedel-e2e-bin "--help" "--bogus")) 0))
  (pcase-let ((`(,status ,_ ,stderr) (mevedel-e2e-bin "--dir" "/no/such/dir" "-p" "x")))
    (should (eql status 2))
    (should (string-match-p "\\`mevedel: --dir /no/such/dir is not a directory\n" stderr))
    (should-not (string-match-p "file-missing\\|wrong-type\\|(\"" stderr)))
  (pcase-let ((`(,status ,_ ,stderr) (mevedel-e2e-bin "--bogus")))
    (should (eql status 2))
    (should (string-match-p "Unknown argument --bogus (see --help)" stderr)))
  ;; Configuration errors come from the config file, a syntax error with its line.
  (let ((config (make-temp-file "mevedel-config" nil ".el")))
    (unwind-protect
        (progn
          (with-temp-file config
            (insert "(setq gptel-model 'x)\n\n(setq mevedel-test-list (list 1 2)\n(setq other 3)\n"))
          (pcase-let ((`(,status ,_ ,stderr) (mevedel-e2e-bin "--config" config "-p" "x")))
            (should (eql status 2))
            (should (string-match-p (concat (regexp-quote config) ":3: syntax error in the config file")
                                    stderr)))
          (with-temp-file config (insert "(setq x 1))\n"))
          (pcase-let ((`(,status ,_ ,stderr) (mevedel-e2e-bin "--config" config "-p" "x")))
            (should (eql status 2))
            (should (string-match-p (concat (regexp-quote config) ":1: syntax error") stderr)))
          (with-temp-file config (insert "(mevedel-no-such-function 1)\n"))
          (pcase-let ((`(,status ,_ ,stderr) (mevedel-e2e-bin "--config" config "-p" "x")))
            (should (eql status 2))
            (should (string-match-p (concat "Error in the config file " (regexp-quote config)
                                            ": .*mevedel-no-such-function")
                                    stderr))))
      (delete-file config))))

(ert-deftest mevedel-batch:progress-is-one-readable-line-per-call ()
  "Headless progress on stderr: tool, what the call is about, what came of it."
  (pcase-let ((`(,status ,_stdout ,stderr ,_log)
               (mevedel-batch-test--run
                :steps mevedel-batch-test--steps
                :files '(("notes.txt" . "the answer is 42\n"))
                :args '("-p" "What is the answer?"))))
    (should (eql status 0))
    (should (string-match-p "^Read \"[^\"\n]*notes\\.txt\" … 1 line$" stderr))
    (should (string-match-p "^Read \"[^\"\n]*gone\\.txt\" … failed: Error" stderr))
    (should-not (string-match-p ":file_path\\|\\[tool\\]" stderr))))

(ert-deftest mevedel-batch:ctrl-c-exits-130 ()
  "Ctrl-C during a turn exits with 130, says so, and leaves the session saved."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace nil))
         (script (mevedel-e2e-write-script '(((fault . "stall") (seconds . 30)))))
         (server (mevedel-scripted-model-start script))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) 'openai t nil))
         (process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                       invocation-directory))
                                    process-environment))
         (output (generate-new-buffer " *mevedel-batch-int*"))
         (process (make-process :name "mevedel-batch-int" :buffer output
                                :command (list (expand-file-name "bin/mevedel" mevedel-test-root)
                                               "--config" init "--dir" root "-p" "Hello")
                                :connection-type 'pipe)))
    (unwind-protect
        (progn
          ;; Wait until the request is at the server, then Ctrl-C the group.
          (let ((deadline (+ (float-time) 30)))
            (while (and (null (mevedel-scripted-model-log server)) (< (float-time) deadline))
              (accept-process-output nil 0.05)))
          (should (mevedel-scripted-model-log server))
          (interrupt-process process)
          (let ((deadline (+ (float-time) 20)))
            (while (and (process-live-p process) (< (float-time) deadline))
              (accept-process-output process 0.05)))
          (should (eql (process-exit-status process) 130))
          (should (string-match-p "mevedel: interrupted; the session is saved"
                                  (with-current-buffer output (buffer-string))))
          (should (mevedel-session-saved root)))
      (when (process-live-p process) (delete-process process))
      (kill-buffer output)
      (mevedel-scripted-model-stop server)
      (dolist (file (list init script)) (delete-file file))
      (delete-directory root t))))

(ert-deftest mevedel-batch:demo-uses-the-workspace-it-runs-in ()
  "The headless demo reads a file that exists, finds a word that is there,
and closes with words for the command line, not for the view."
  (mevedel-e2e-require-python)
  (let ((root (mevedel-e2e-workspace '(("src/main.py" . "def compute_total():\n    return 42\n")))))
    (unwind-protect
        (pcase-let ((`(,status ,stdout ,stderr)
                     (mevedel-e2e-bin "--demo" "--dir" root "-p" "What is here?" "--json")))
          (should (eql status 0))
          (let* ((json (json-parse-string stdout :object-type 'alist :array-type 'list
                                          :null-object nil))
                 (calls (alist-get 'tool_calls json)))
            (should (equal (mapcar (lambda (c) (alist-get 'status c)) calls) '("success" "success")))
            (should (equal (alist-get 'file_path (alist-get 'args (car calls)))
                           (concat root "src/main.py")))
            (should (string-match-p "compute_total" (alist-get 'result_preview (car calls))))
            (should (equal (alist-get 'pattern (alist-get 'args (cadr calls))) "compute_total"))
            (should (string-match-p "main\\.py" (alist-get 'result_preview (cadr calls))))
            (should (string-match-p "bin/mevedel --demo --json" (alist-get 'answer json)))
            (should-not (string-match-p "TAB\\|M-x mevedel" (alist-get 'answer json))))
          (should-not (string-match-p "README" stderr)))
      (delete-directory root t))))

(defun mevedel-batch-test--count (regexp string)
  "Return how many times REGEXP matches in STRING."
  (let ((count 0) (start 0))
    (while (string-match regexp string start)
      (setq count (1+ count) start (match-end 0)))
    count))

(ert-deftest mevedel-batch:unknown-tool-is-reported ()
  "A model that calls a tool the catalog lacks, twice, still ends `done'.
The JSON names the tool once under unknown_tools, and so does stderr."
  (let* ((run (mevedel-e2e-headless
               :steps '(((tool_calls . [((name . "Nope") (arguments . ((x . 1))))]))
                        ((expect . ((results . [((contains . "Tool 'Nope' is not available")
                                                 (is_error . t))])))
                         (tool_calls . [((name . "Nope") (arguments . ((x . 2))))]))
                        ((expect . ((results . [((contains . "is not available"))])))
                         (text . "There is no such tool.")))
               :args '("-p" "Use the Nope tool." "--json")))
         (json (mevedel-e2e-json run))
         (stderr (plist-get run :stderr)))
    (should (eql (plist-get run :status) 0))
    (should-not (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e)))
                           (plist-get run :log)))
    (should (= (length (plist-get run :log)) 3))
    (should (equal (alist-get 'outcome json) "done"))
    (should (equal (alist-get 'unknown_tools json) '("Nope")))
    (should (= (mevedel-batch-test--count
                "^mevedel: the model called unknown tool Nope$" stderr)
               1))
    (should (= (mevedel-batch-test--count "unknown tool" stderr) 1))))

(ert-deftest mevedel-batch:tool-call-program-naming-a-missing-tool ()
  "A ToolCall program calling a tool the catalog lacks is an unknown tool call.
A misspelt operation of the dialect (lower case) is not."
  (let* ((run (mevedel-e2e-headless
               :steps '(((tool_calls . [((name . "ToolCall")
                                         (arguments . ((program . "(Missing :q 1)"))))
                                        ((name . "ToolCall")
                                         (arguments . ((program . "(nope 1)"))))]))
                        ((expect . ((results . [((contains . "`Missing` is neither"))
                                                ((contains . "`nope` is neither"))])))
                         (text . "Neither ran.")))
               :args '("-p" "Run the programs." "--json")))
         (json (mevedel-e2e-json run))
         (stderr (plist-get run :stderr)))
    (should (eql (plist-get run :status) 0))
    (should-not (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e)))
                           (plist-get run :log)))
    (should (equal (alist-get 'outcome json) "done"))
    (should (equal (alist-get 'unknown_tools json) '("Missing")))
    (should (= (mevedel-batch-test--count
                "^mevedel: the model called unknown tool Missing$" stderr)
               1))
    (should-not (string-match-p "unknown tool nope" stderr))))

(provide 'batch-e2e-test)
;;; batch-e2e-test.el ends here
