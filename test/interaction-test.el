;;; interaction-test.el --- The interaction primitive  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defun interaction-test--open (chat request &rest keys)
  "Open a test interaction in CHAT for REQUEST; KEYS go to the primitive.
Its settlements are pushed onto the `outcomes' list of its data."
  (let ((outcomes (list nil)))
    (apply #'mevedel-interaction-open chat
           :kind 'test :request request :title "Test question"
           :render (lambda (_) "  body line\n")
           :data outcomes
           :on-settle (lambda (interaction outcome)
                        (push outcome (car (mevedel-interaction-data interaction))))
           keys)))

(defun interaction-test--outcomes (interaction)
  "Return the outcomes INTERACTION's owner heard, oldest first."
  (reverse (car (mevedel-interaction-data interaction))))

(ert-deftest mevedel-interaction:settles-exactly-once ()
  (mevedel-test-with-view view chat
    (let ((interaction (interaction-test--open chat 'turn-1)))
      (should (memq interaction (mevedel-interaction-list chat)))
      (should (mevedel-interaction-settle interaction 'yes))
      (should-not (mevedel-interaction-settle interaction 'no))
      (should (= 0 (mevedel-interaction-cancel-request chat 'turn-1)))
      (should (equal (interaction-test--outcomes interaction) '(yes)))
      (should-not (mevedel-interaction-list chat))
      ;; Its text and overlay are gone from the view.
      (with-current-buffer view
        (should-not (string-match-p "Test question" (buffer-string)))
        (should-not (overlay-buffer (mevedel-interaction-overlay interaction)))))))

(ert-deftest mevedel-interaction:cancelling-a-request-leaves-the-others ()
  (mevedel-test-with-view view chat
    (let ((mine (interaction-test--open chat 'request-a))
          (sibling (interaction-test--open chat 'request-b :owner "/root/worker")))
      (should (= 1 (mevedel-interaction-cancel-request chat 'request-a)))
      (should (equal (interaction-test--outcomes mine) '(cancelled)))
      (should-not (interaction-test--outcomes sibling))
      (should (equal (mevedel-interaction-list chat) (list sibling)))
      ;; A child's interaction is attributed by its canonical path.
      (with-current-buffer view
        (should (string-match-p "Test question · /root/worker\n  body line"
                                (buffer-substring-no-properties (point-min) (point-max)))))
      (mevedel-interaction-settle sibling 'done))))

(ert-deftest mevedel-interaction:one-overlay-across-live-zone-redraws ()
  (mevedel-test-with-view view chat
    (switch-to-buffer view)
    (let* ((interaction (interaction-test--open chat 'turn))
           (overlay (mevedel-interaction-overlay interaction)))
      ;; The view focused it; point stays in it while the live zone is redrawn.
      (should (eq (mevedel-interaction-at) interaction))
      (forward-line 2)
      (let ((offset (- (point) (mevedel-interaction-start interaction))))
        (mevedel-view-redraw-live chat)
        (mevedel-view-rerender view)
        (should (eq (mevedel-interaction-overlay interaction) overlay))
        (should (eq (mevedel-interaction-at) interaction))
        (should (= offset (- (point) (mevedel-interaction-start interaction)))))
      ;; A redraw in place keeps the overlay and the live zone's marks.
      (mevedel-interaction-redraw interaction)
      (should (eq (overlay-buffer overlay) view))
      (should (get-text-property (overlay-start overlay) 'read-only))
      (mevedel-interaction-settle interaction 'done))))

(provide 'interaction-test)
;;; interaction-test.el ends here
