;;; run-tests.el --- Run every ERT file of mevedel in one batch Emacs  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage (from the checkout root, as scripts/test.sh does):
;;   emacs -Q --batch -l scripts/load-path.el -l test/run-tests.el
;;
;; Loads test/*-test.el and then test/e2e/*-test.el, runs them all,
;; names every skipped test, and ends with "N passed, N failed, N
;; skipped".  Exits non-zero when any test failed.
;;
;; MEVEDEL_TEST_SHARD=I/N runs only every Nth test, from the Ith (0
;; based): scripts/test.sh starts N such Emacs side by side, because
;; most end-to-end tests wait on servers and children rather than
;; compute, and one Emacs left the machine's cores idle.

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

(defun mevedel-run-tests--selector ()
  "Return the ERT selector for this run's shard (see the Commentary)."
  (let ((shard (getenv "MEVEDEL_TEST_SHARD")))
    (if (not (and shard (string-match "\\`\\([0-9]+\\)/\\([1-9][0-9]*\\)\\'" shard)))
        (progn (when (and shard (not (string-empty-p shard)))
                 (error "MEVEDEL_TEST_SHARD must be I/N, not %S" shard))
               t)
      (let* ((index (string-to-number (match-string 1 shard)))
             (count (string-to-number (match-string 2 shard)))
             ;; By name, so every shard splits the same list.
             (tests (sort (ert-select-tests t t)
                          :key (lambda (test) (symbol-name (ert-test-name test)))))
             (mine (cl-loop for test in tests
                            for i from 0
                            when (= (% i count) index) collect test)))
        (unless (< index count)
          (error "MEVEDEL_TEST_SHARD %S: I must be below N" shard))
        `(member ,@mine)))))

(let* ((stats (ert-run-tests-batch (mevedel-run-tests--selector)))
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
