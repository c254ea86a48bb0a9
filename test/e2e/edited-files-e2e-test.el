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

(provide 'edited-files-e2e-test)
;;; edited-files-e2e-test.el ends here
