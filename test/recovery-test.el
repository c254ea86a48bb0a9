;;; recovery-test.el --- The sample recovery controller  -*- lexical-binding: t; -*-

;;; Commentary:

;; Pauses (exponential, capped, jittered, never below Retry-After),
;; the allowance of one sample, one timer that a cancel stops, and the
;; words a view shows.  The end-to-end retries are in
;; e2e/provider-e2e-test.el.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-recovery)

(ert-deftest mevedel-recovery:pauses-grow-and-stop-at-the-cap ()
  (let ((mevedel-recovery-initial-delay 1.0)
        (mevedel-recovery-max-delay 10.0)
        (mevedel-recovery-jitter 0.0))
    (should (equal (mapcar #'mevedel-recovery-delay '(1 2 3 4 5 6))
                   '(1.0 2.0 4.0 8.0 10.0 10.0)))
    (should (= (mevedel-recovery-delay 1 7) 7))
    (should (= (mevedel-recovery-delay 3 1) 4.0))))

(ert-deftest mevedel-recovery:jitter-spreads-within-its-bounds ()
  (let ((mevedel-recovery-initial-delay 1.0)
        (mevedel-recovery-max-delay 60.0)
        (mevedel-recovery-jitter 0.2)
        (delays nil))
    (dotimes (_ 200) (push (mevedel-recovery-delay 3) delays))
    (should (cl-every (lambda (delay) (and (>= delay 3.2) (<= delay 4.8))) delays))
    (should (> (length (delete-dups (copy-sequence delays))) 1))
    ;; Jitter never takes a pause below the provider's Retry-After.
    (dotimes (_ 50) (should (>= (mevedel-recovery-delay 1 1.0) 1.0)))))

(ert-deftest mevedel-recovery:allowance-counts-and-runs-once ()
  (let* ((mevedel-recovery-max-retries 2)
         (mevedel-recovery-initial-delay 0.01)
         (mevedel-recovery-jitter 0.0)
         (recovery (mevedel-recovery-create))
         (calls 0))
    (let ((retry (mevedel-recovery-schedule recovery (lambda () (cl-incf calls)))))
      (should (equal (plist-get retry :retry) 1))
      (should (equal (plist-get retry :of) 2))
      (should (mevedel-recovery-waiting-p recovery))
      (should (equal (mevedel-recovery-describe retry) "retrying in 1 s (1/2)")))
    (mevedel-test-wait-until (= calls 1) 5)
    (accept-process-output nil 0.05)
    (should (= calls 1))
    (should-not (mevedel-recovery-waiting-p recovery))
    (should (mevedel-recovery-schedule recovery (lambda () (cl-incf calls))))
    (mevedel-test-wait-until (= calls 2) 5)
    (should (mevedel-recovery-exhausted-p recovery))
    (should-not (mevedel-recovery-schedule recovery (lambda () (cl-incf calls))))
    (mevedel-recovery-new-sample recovery)
    (should-not (mevedel-recovery-exhausted-p recovery))
    (should (= (mevedel-recovery-retries recovery) 0))))

(ert-deftest mevedel-recovery:cancel-stops-the-pending-retry ()
  (let* ((mevedel-recovery-initial-delay 0.05)
         (mevedel-recovery-jitter 0.0)
         (recovery (mevedel-recovery-create))
         (called nil))
    (mevedel-recovery-schedule recovery (lambda () (setq called t)))
    (mevedel-recovery-cancel recovery)
    (should-not (mevedel-recovery-waiting-p recovery))
    (accept-process-output nil 0.2)
    (should-not called)
    (should (equal (mevedel-recovery-describe '(:retry 3 :of 10 :delay 3.7))
                   "retrying in 4 s (3/10)"))))

(provide 'recovery-test)
;;; recovery-test.el ends here
