;;; run-tests.el --- Run every ERT file of mevedel in one batch Emacs  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage (from the checkout root, as scripts/test.sh does):
;;   emacs -Q --batch -l scripts/load-path.el -l test/run-tests.el
;;
;; Loads test/*-test.el and then test/e2e/*-test.el, runs them all,
;; names every skipped test, and ends with "N passed, N failed, N
;; skipped".  Exits non-zero when any test failed.

;;; Code:

(require 'ert)

(defconst mevedel-run-tests--dir
  (file-name-directory (or load-file-name buffer-file-name)))

(add-to-list 'load-path mevedel-run-tests--dir)

(dolist (dir (list mevedel-run-tests--dir
                   (expand-file-name "e2e" mevedel-run-tests--dir)))
  (when (file-directory-p dir)
    (dolist (file (directory-files dir t "-test\\.el\\'"))
      (load file nil t))))

(let* ((stats (ert-run-tests-batch t))
       (skipped nil))
  (cl-loop for test across (ert--stats-tests stats)
           for result across (ert--stats-test-results stats)
           when (ert-test-skipped-p result)
           do (push (ert-test-name test) skipped))
  (let ((failed (ert-stats-completed-unexpected stats))
        (passed (- (ert-stats-completed-expected stats) (length skipped))))
    (dolist (name (nreverse skipped))
      (message "SKIPPED: %s" name))
    (message "ERT: %d passed, %d failed, %d skipped" passed failed (length skipped))
    (kill-emacs (if (zerop failed) 0 1))))

;;; run-tests.el ends here
