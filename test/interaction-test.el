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

;;;; Permission cards

(defmacro interaction-test--with-cards (view chat &rest body)
  "Run BODY with VIEW and CHAT a view in `ask' mode, in turn `turn-a'.
The tool Probe (not read-only, so it asks) is declared; calls whose
id starts with \"child\" are asked by /root/worker's `worker-request'."
  (declare (indent 2))
  `(mevedel-test-with-view ,view ,chat
     (let ((mevedel-interaction-requester-functions
            (list (lambda (context)
                    (and (string-prefix-p "child" (plist-get context :tool-use-id))
                         (cons "/root/worker" 'worker-request))))))
       (mevedel-define-tool Probe
         :description "A test tool that asks." :args ((x string :required "Anything."))
         :function (lambda (_args) "ran"))
       (setf (mevedel-chat-permission-mode ,chat) 'ask
             (mevedel-chat-turn ,chat) 'turn-a)
       (unwind-protect (progn ,@body)
         (setf (mevedel-chat-turn ,chat) nil)
         (mevedel-tool-unregister "Probe")))))

(defun interaction-test--ask (chat id)
  "Ask about a Probe call ID in CHAT; return (ANSWERS . WITHDRAW).
ANSWERS is a cons whose car lists the call's answers, newest first."
  (let* ((answers (list nil))
         (withdraw (funcall (mevedel-session-prompter (mevedel-chat-session chat))
                            (list :tool (mevedel-tool-get "Probe") :args '(:x "1")
                                  :tool-use-id id :data-buffer (mevedel-chat-data-buffer chat)
                                  :session (mevedel-chat-session chat))
                            (lambda (answer) (push answer (car answers))))))
    (cons answers withdraw)))

(defun interaction-test--card (chat id)
  "Return CHAT's open permission card of call ID."
  (cl-find-if (lambda (interaction)
                (and (eq (mevedel-interaction-kind interaction) 'permission)
                     (equal (plist-get (mevedel-interaction-data interaction) :id) id)))
              (mevedel-interaction-list chat)))

(ert-deftest mevedel-interaction:a-permission-card-is-answered-once ()
  (interaction-test--with-cards view chat
    (let* ((asked (interaction-test--ask chat "toolu_a"))
           (card (interaction-test--card chat "toolu_a")))
      (should card)
      (should (equal (mevedel-chat-pending chat) (list (mevedel-interaction-data card))))
      (with-current-buffer view
        (should (string-search "\nAllow Probe?\n  x: 1\n" (buffer-substring-no-properties
                                                            (point-min) (point-max))))
        ;; Its keys are on the card: y allows it.
        (goto-char (mevedel-interaction-start card))
        (call-interactively (lookup-key (mevedel-interaction-keymap card) "y")))
      (should (equal (caar asked) '(approve)))
      ;; A second answer, a late cancel or a withdrawal changes nothing.
      (should-not (mevedel-interaction-settle card 'deny))
      (should (= 0 (mevedel-interaction-cancel-request chat 'turn-a)))
      (funcall (plist-get (mevedel-interaction-data card) :answer) 'deny)
      (funcall (cdr asked))
      (should (equal (caar asked) '(approve)))
      (should-not (mevedel-interaction-list chat))
      (with-current-buffer view
        (should-not (string-search "Allow Probe?" (buffer-string))))
      ;; Withdrawn before an answer: the card goes, nobody is answered.
      (let ((withdrawn (interaction-test--ask chat "toolu_b")))
        (should (interaction-test--card chat "toolu_b"))
        (funcall (cdr withdrawn))
        (should-not (mevedel-interaction-list chat))
        (should-not (caar withdrawn))))))

(ert-deftest mevedel-interaction:cancelling-a-request-cancels-only-its-cards ()
  (interaction-test--with-cards view chat
    (let* ((root (interaction-test--ask chat "toolu_root"))
           (child (interaction-test--ask chat "child_1"))
           (root-card (interaction-test--card chat "toolu_root"))
           (child-card (interaction-test--card chat "child_1")))
      (should (equal (mevedel-interaction-owner child-card) "/root/worker"))
      ;; The child's card is in the root view, attributed by its path.
      (with-current-buffer view
        (should (string-search "\nAllow Probe? · /root/worker\n"
                               (buffer-substring-no-properties (point-min) (point-max)))))
      (should (= 1 (mevedel-interaction-cancel-request chat 'worker-request)))
      (should (eq (car (car (caar child))) 'deny))
      (should (string-match-p "interrupted" (cdr (car (caar child)))))
      ;; The root's card still waits, and still answers.
      (should-not (caar root))
      (should (equal (mevedel-interaction-list chat) (list root-card)))
      (should-not (mevedel-interaction-settle child-card 'once))
      (mevedel-interaction-settle root-card 'deny)
      (should (string-match-p "declined" (cdr (car (caar root))))))))

(ert-deftest mevedel-interaction:an-escalation-card-follows-the-calls-own ()
  (interaction-test--with-cards view chat
    (let* ((mevedel-permissions-rules nil)
           (answers nil)
           (session (mevedel-chat-session chat)))
      (funcall (mevedel-session-prompter session)
               (list :tool (mevedel-tool-get "Bash")
                     :args '(:command "make install" :description "install"
                                      :sandbox_permissions "require_escalated")
                     :tool-use-id "toolu_esc" :data-buffer (mevedel-chat-data-buffer chat)
                     :session session)
               (lambda (answer) (push answer answers)))
      (let ((first (car (mevedel-interaction-list chat))))
        (should (equal (mevedel-interaction-title first) "Allow Bash?"))
        (with-current-buffer view
          (goto-char (mevedel-interaction-start first))
          (mevedel-view-allow-once)))
      ;; The call's card went; the escalation's own card took its place.
      (let ((second (car (mevedel-interaction-list chat))))
        (should (= 1 (length (mevedel-interaction-list chat))))
        (should (equal (mevedel-interaction-title second)
                       "Run this Bash call OUTSIDE the sandbox?"))
        (should (eq (mevedel-interaction-request second) 'turn-a))
        (should-not answers)
        (with-current-buffer view
          (should (string-search "no sandbox" (buffer-string)))
          (goto-char (mevedel-interaction-start second))
          (mevedel-view-allow-once)))
      (should (equal answers '(approve)))
      (should-not (mevedel-interaction-list chat)))))

(provide 'interaction-test)
;;; interaction-test.el ends here
