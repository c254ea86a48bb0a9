;;; mevedel-recovery.el --- The sample recovery controller  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; When a model sample fails for a reason that may pass (the connection
;; was refused or reset, a timeout, HTTP 408, 429 or 5xx, a stream cut
;; before any of its tool calls ran), the sample is sent again after a
;; pause.  This file decides whether and when; it knows nothing of
;; gptel.  The gptel adapter (mevedel-gptel.el) says what failed and
;; replays the sample; the chat, a child agent's included, shows it.
;;
;; A `mevedel-recovery' is the allowance of one sample: at most
;; `mevedel-recovery-max-retries' retries after the first attempt.  The
;; pause grows exponentially from `mevedel-recovery-initial-delay' up to
;; `mevedel-recovery-max-delay', spread by `mevedel-recovery-jitter' so
;; that clients failing together do not retry together, and is never
;; shorter than the provider's Retry-After.  The pause is one timer; a
;; cancelled recovery runs nothing.

;;; Code:

(require 'cl-lib)

(defgroup mevedel-recovery nil
  "Retrying model samples after transient failures."
  :group 'mevedel
  :prefix "mevedel-recovery-")

(defcustom mevedel-recovery-max-retries 10
  "Most retries of one model sample after its first attempt failed.
Zero turns retries off: every failure ends the turn."
  :type 'natnum)

(defcustom mevedel-recovery-initial-delay 1.0
  "Seconds before the first retry; each further retry waits twice as long."
  :type 'number)

(defcustom mevedel-recovery-max-delay 8.0
  "Longest pause between two attempts, in seconds, before jitter.
A provider's Retry-After may ask for longer; it is honoured."
  :type 'number)

(defcustom mevedel-recovery-jitter 0.2
  "Fraction by which a pause is randomly lengthened or shortened.
0.2 makes a 4 s pause anything from 3.2 s to 4.8 s.  The pause never
drops below the provider's Retry-After."
  :type 'number)

(cl-defstruct (mevedel-recovery (:constructor mevedel-recovery-create)
                                (:copier nil))
  "The retry allowance of one model sample."
  (retries 0)
  timer)

(defun mevedel-recovery-new-sample (recovery)
  "Give RECOVERY a fresh allowance, for a new sample."
  (mevedel-recovery-cancel recovery)
  (setf (mevedel-recovery-retries recovery) 0))

(defun mevedel-recovery-exhausted-p (recovery)
  "Return non-nil when RECOVERY has no retry left."
  (>= (mevedel-recovery-retries recovery) mevedel-recovery-max-retries))

(defun mevedel-recovery-delay (retry &optional retry-after)
  "Return the pause in seconds before RETRY (1 for the first).
RETRY-AFTER, the provider's wish in seconds, is a lower bound."
  (let* ((backoff (min mevedel-recovery-max-delay
                       (* mevedel-recovery-initial-delay (expt 2.0 (1- retry)))))
         (spread (* backoff mevedel-recovery-jitter (- (* 2 (cl-random 1.0)) 1))))
    (max (+ backoff spread) (or retry-after 0) 0)))

(defun mevedel-recovery-schedule (recovery function &optional retry-after)
  "Count a retry of RECOVERY and call FUNCTION once after its pause.
RETRY-AFTER (seconds, or nil) is the provider's Retry-After.  Return
the plist (:retry N :of MAX :delay SECONDS), or nil without calling
FUNCTION when the allowance is used up."
  (unless (mevedel-recovery-exhausted-p recovery)
    (mevedel-recovery-cancel recovery)
    (let* ((retry (cl-incf (mevedel-recovery-retries recovery)))
           (delay (mevedel-recovery-delay retry retry-after)))
      (setf (mevedel-recovery-timer recovery)
            (run-at-time delay nil
                         (lambda ()
                           (setf (mevedel-recovery-timer recovery) nil)
                           (funcall function))))
      (list :retry retry :of mevedel-recovery-max-retries :delay delay))))

(defun mevedel-recovery-waiting-p (recovery)
  "Return non-nil while RECOVERY waits to retry."
  (and (mevedel-recovery-timer recovery) t))

(defun mevedel-recovery-cancel (recovery)
  "Stop RECOVERY's pending retry, if any."
  (when (timerp (mevedel-recovery-timer recovery))
    (cancel-timer (mevedel-recovery-timer recovery)))
  (setf (mevedel-recovery-timer recovery) nil))

(defun mevedel-recovery-describe (retry)
  "Return how a view names RETRY, a plist from `mevedel-recovery-schedule'."
  (format "retrying in %d s (%d/%d)"
          (max 1 (round (plist-get retry :delay)))
          (plist-get retry :retry) (plist-get retry :of)))

(provide 'mevedel-recovery)
;;; mevedel-recovery.el ends here
