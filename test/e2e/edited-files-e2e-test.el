;;; edited-files-e2e-test.el --- Files changed behind the model, headless  -*- lexical-binding: t; -*-

;;; Commentary:

;; Two headless runs of bin/mevedel in one workspace: the first reads a
;; file, something else changes it, and the second, continuing the
;; session, tells the model with a diff of the change.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(ert-deftest mevedel-e2e:a-file-changed-between-continued-runs-is-announced ()
  "A file read in one run and changed before --continue comes with its diff."
  (mevedel-e2e-with-headless-runs
      (run root server '(((tool_calls . [((name . "Read") (arguments . ((file_path . "notes.txt"))))]))
                         ((text . "I read it."))
                         ((text . "Noted the change.") (times . 3)))
           '(("notes.txt" . "alpha\nbeta\ngamma\n")))
    (cl-flet ((sent (n)
                (format "%S" (alist-get 'messages (alist-get 'body (nth n (mevedel-scripted-model-log server)))))))
      (should (= (car (run "-p" "read notes.txt")) 0))
      ;; Another program changes the file between the runs.
      (with-temp-file (expand-file-name "notes.txt" root)
        (insert "alpha\nBETA\ngamma\n"))
      (should (= (car (run "--continue" "-p" "anything new?")) 0))
      (let ((third (sent 2)))
        (should (string-search "<context-update component=\\\"edited-files\\\">" third))
        (should (string-search "notes.txt was changed" third))
        (should (string-search "-beta" third))
        (should (string-search "+BETA" third)))
      ;; Announced once: the first run's requests had nothing of it.
      (should-not (string-search "edited-files" (sent 1))))))

;; Issue 42 item 1: between --continue runs too, one update's diffs
;; share a budget; the file whose diff does not fit is named, to Read.
(ert-deftest mevedel-e2e:a-continued-run-s-diffs-share-a-budget ()
  "A huge change is named with a pointer to Read it; a small one has its diff."
  (mevedel-e2e-require-python)
  (let* ((lines (lambda (fmt) (mapconcat (lambda (n) (format fmt n)) (number-sequence 1 4000) "")))
         (root (mevedel-e2e-workspace `(("notes.txt" . "alpha\nbeta\ngamma\n")
                                        ("big.txt" . ,(funcall lines "line %d\n")))))
         (script (mevedel-e2e-write-script
                  '(((tool_calls . [((name . "Read") (arguments . ((file_path . "notes.txt"))))
                                    ((name . "Read") (arguments . ((file_path . "big.txt"))))]))
                    ((text . "I read them."))
                    ((text . "Noted the changes.") (times . 3)))))
         (server (mevedel-scripted-model-start script))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) 'openai t nil))
         (process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                       invocation-directory))
                                    process-environment)))
    (cl-flet ((run (&rest args)
                (with-temp-buffer
                  (let ((status (apply #'call-process (expand-file-name "bin/mevedel" mevedel-test-root)
                                       nil (list t nil) nil "--config" init "--dir" root args)))
                    (cons status (buffer-string))))))
      (unwind-protect
          (progn
            (should (= (car (run "-p" "read notes.txt and big.txt")) 0))
            (with-temp-file (expand-file-name "notes.txt" root)
              (insert "alpha\nBETA\ngamma\n"))
            (with-temp-file (expand-file-name "big.txt" root)
              (insert (funcall lines "LINE %d\n")))
            (should (= (car (run "--continue" "-p" "anything new?")) 0))
            (let ((third (format "%S" (alist-get 'messages (alist-get 'body (nth 2 (mevedel-scripted-model-log server)))))))
              (should (string-search "+BETA" third))
              (should (string-search "big.txt was changed; its diff is left out" third))
              (should (string-search "Read big.txt for its current text" third))
              (should-not (string-search "LINE 1\\n" third))))
        (mevedel-scripted-model-stop server)
        (dolist (file (list script init)) (delete-file file))
        (delete-directory root t)))))

(provide 'edited-files-e2e-test)
;;; edited-files-e2e-test.el ends here
