;;; shared-e2e-test.el --- Shared documents through headless bin/mevedel  -*- lexical-binding: t; -*-

;;; Commentary:

;; Two headless runs of bin/mevedel against the scripted model: the
;; first creates a shared document with SharedCreate (through ToolCall,
;; in edits mode) and reads it at shared://plan; the user changes the
;; document between the runs; the second, continuing the session, is
;; told of the change and lists the document the first run made.  Then
;; a user's Emacs, with only the package's autoloads, resumes the
;; session and exports the document: the host loads only then.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(ert-deftest mevedel-e2e:a-shared-document-lives-across-continued-runs ()
  "SharedCreate and Read shared:// headless; the item survives into --continue."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace '(("README" . "x\n"))))
         (script (mevedel-e2e-write-script
                  '(((tool_calls . [((name . "ToolCall")
                                     (arguments . ((program . "(SharedCreate :kind \"document\" \
:title \"Plan\" :id \"plan\" :content \"# Plan\\n\\nShip it on Friday.\\n\")"))))]))
                    ((expect . ((results . [((contains . "Created document shared://plan"))])))
                     (tool_calls . [((name . "Read") (arguments . ((file_path . "shared://plan"))))]))
                    ((expect . ((results . [((contains . "paragraph \"Ship it on Friday.\""))])))
                     (text . "The plan is shared."))
                    ((tool_calls . [((name . "Read") (arguments . ((file_path . "shared://"))))]))
                    ((expect . ((results . [((contains . "shared://plan  document \"Plan\""))])))
                     (text . "One document.")))))
         (server (mevedel-scripted-model-start script))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) 'openai t nil))
         (process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                       invocation-directory))
                                    process-environment)))
    (cl-flet ((run (&rest args)
                (with-temp-buffer
                  (let ((status (apply #'call-process (expand-file-name "bin/mevedel" mevedel-test-root)
                                       nil (list t nil) nil "--config" init "--dir" root
                                       "--permission-mode" "edits" args)))
                    (cons status (buffer-string)))))
              (sent (n)
                (format "%S" (alist-get 'messages (alist-get 'body (nth n (mevedel-scripted-model-log server)))))))
      (unwind-protect
          (progn
            (let ((first (run "-p" "share a plan")))
              (should (= (car first) 0))
              (should (string-search "The plan is shared." (cdr first))))
            (let ((file (car (file-expand-wildcards
                              (expand-file-name ".mevedel/sessions/*/shared/plan.md" root)))))
              (should file)
              ;; The user edits the document between the runs.
              (with-temp-file file (insert "# Plan\n\nShip it on Monday.\n")))
            (let ((second (run "--continue" "-p" "what items are there?")))
              (should (= (car second) 0))
              (should (string-search "One document." (cdr second))))
            (let ((fourth (sent 3)))
              (should (string-search "shared://plan was changed" fourth))
              (should (string-search "+" fourth))
              (should (string-search "Ship it on Monday." fourth)))
            (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry)))
                                   (mevedel-scripted-model-log server)))
            ;; A user's Emacs with only the package's autoloads: M-x mevedel
            ;; resumes the session without the shared host; exporting loads it.
            (let* ((export (expand-file-name "plan-export.md" root))
                   (child (mevedel-test-run-emacs
                           `(progn
                              (load ,(mevedel-e2e-autoloads) nil t)
                              (load ,init nil t)
                              (let ((default-directory ,(file-name-as-directory root)))
                                (call-interactively #'mevedel))
                              (princ (format "HOST %s\n" (featurep 'mevedel-shared)))
                              (mevedel-shared-export (mevedel-chat-session (mevedel-view-chat))
                                                     "plan" ,export)
                              (princ (format "HOST %s\n" (featurep 'mevedel-shared)))))))
              (should (= (car child) 0))
              (should (string-search "HOST nil\nHOST t" (cdr child)))
              (should (equal (with-temp-buffer (insert-file-contents export) (buffer-string))
                             "# Plan\n\nShip it on Monday.\n"))))
        (mevedel-scripted-model-stop server)
        (dolist (file (list script init)) (delete-file file))
        (delete-directory root t)))))

(ert-deftest mevedel-e2e:a-whiteboard-headless ()
  "SharedCreate a whiteboard, SharedEdit it by the hash read, read it back: bin/mevedel -p."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace '(("README" . "x\n"))))
         (create "(SharedCreate :kind \"whiteboard\" :title \"Flow\" :id \"flow\" :content \
\"[{\\\"type\\\":\\\"rectangle\\\",\\\"id\\\":\\\"a\\\",\\\"x\\\":0,\\\"y\\\":0,\\\"width\\\":80,\\\"height\\\":40}]\")")
         ;; The program reads the board and edits the element by the hash it read.
         (edit "(let [o (Read :file_path \"shared://flow\")
                      h (nth (re-find \"([0-9a-f]{8}) a rectangle\" o) 1)]
                  (SharedEdit :id \"flow\" :edits [{:op \"update\" :hash h :set {:x 200}}
                                                   {:op \"add\" :element {:type \"ellipse\" :id \"b\"
                                                     :x 0 :y 100 :width 50 :height 50}}]))")
         (script (mevedel-e2e-write-script
                  `(((tool_calls . [((name . "ToolCall") (arguments . ((program . ,create))))]))
                    ((expect . ((results . [((contains . "Created whiteboard shared://flow"))])))
                     (tool_calls . [((name . "ToolCall") (arguments . ((program . ,edit))))]))
                    ((expect . ((results . [((contains . "1 changed, 1 added"))])))
                     (tool_calls . [((name . "Read") (arguments . ((file_path . "shared://flow"))))]))
                    ((expect . ((results . [((contains . "a rectangle x=200"))
                                            ])))
                     (text . "Drawn.")))))
         (server (mevedel-scripted-model-start script))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) 'openai t nil))
         (process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                       invocation-directory))
                                    process-environment)))
    (unwind-protect
        (with-temp-buffer
          (should (= 0 (call-process (expand-file-name "bin/mevedel" mevedel-test-root)
                                     nil (list t nil) nil "--config" init "--dir" root
                                     "--permission-mode" "edits" "-p" "draw a flow")))
          (should (string-search "Drawn." (buffer-string)))
          (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry)))
                                 (mevedel-scripted-model-log server)))
          (should (file-expand-wildcards
                   (expand-file-name ".mevedel/sessions/*/shared/flow.excalidraw" root))))
      (mevedel-scripted-model-stop server)
      (dolist (file (list script init)) (delete-file file))
      (delete-directory root t))))

(provide 'shared-e2e-test)
;;; shared-e2e-test.el ends here
