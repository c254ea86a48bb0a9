;;; patch-review-test.el --- Tests of the ApplyPatch review  -*- lexical-binding: t; -*-

;;; Commentary:

;; The review buffer driven by its keys: accept all, reject all, a mix
;; per hunk, an edited hunk, feedback, closing the buffer, withdrawal,
;; a planning error, and the chat's hook-up (a tool declaring :review
;; gets its review instead of a card; its handler takes the settled
;; review).  Plans come from a stand-in for the tool's planner and the
;; module's plan files, in the shape of the seam contract.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'mevedel-test-helpers)
(require 'mevedel-patch-review)
(require 'mevedel-chat)
(require 'mevedel)
(mevedel--load)

(defconst mevedel-patch-review-test--files
  '((:path "a.el" :abs "/ws/a.el" :op update :added 2 :removed 2
     :diff "" :hunks
     ((:index 0 :header "@@ -1,3 +1,3 @@" :old-start 1 :old-lines 3 :new-start 1 :new-lines 3
       :added 1 :removed 1 :text " (one)\n-(two)\n+(TWO)\n (three)\n" :new-text "(one)\n(TWO)\n(three)\n")
      (:index 1 :header "@@ -10,3 +10,3 @@ (defun f" :old-start 10 :old-lines 3
       :new-start 10 :new-lines 3 :added 1 :removed 1
       :text " (ten)\n-(eleven)\n+(ELEVEN)\n (twelve)\n"
       :new-text "(ten)\n(ELEVEN)\n(twelve)\n")))
    (:path "new.txt" :abs "/ws/new.txt" :op add :added 2 :removed 0 :diff ""
     :hunks ((:index 0 :header "@@ -0,0 +1,2 @@" :old-start 0 :old-lines 0 :new-start 1
              :new-lines 2 :added 2 :removed 0 :text "+hello\n+world\n"
              :new-text "hello\nworld\n")))
    (:path "old.txt" :abs "/ws/old.txt" :op delete :added 0 :removed 1 :diff ""
     :hunks ((:index 0 :header "@@ -1,1 +0,0 @@" :old-start 1 :old-lines 1 :new-start 0
              :new-lines 0 :added 0 :removed 1 :text "-bye\n" :new-text ""))))
  "The plan files of the test patch: three files, four hunks.")

(defmacro mevedel-patch-review-test--with (answers &rest body)
  "Run BODY in the review of the test patch; ANSWERS collects its answers.
BUFFER is bound to the review buffer and CONTEXT to the call's context."
  (declare (indent 1))
  `(let* ((,answers nil)
          (context (list :tool nil :args (list :patch "*** Begin Patch") :session nil))
          (ws (file-name-as-directory (make-temp-file "mevedel-review" t)))
          (chat (mevedel-chat-get-create ws))
          (withdraw nil)
          (buffer nil))
     (cl-letf (((symbol-function 'mevedel-tool-patch-plan-for-review)
                (lambda (_context) 'test-plan))
               ((symbol-function 'mevedel-core-patch-plan-files)
                (lambda (_plan) (copy-tree mevedel-patch-review-test--files))))
       (save-window-excursion
         (setq withdraw (mevedel-patch-review-start
                         #'mevedel-tool-patch-plan-for-review
                         context nil (lambda (answer) (push answer ,answers))
                         (lambda (&rest keys)
                           (apply #'mevedel-interaction-open chat :request 'review-request keys))))
         (setq buffer (window-buffer (selected-window)))
         (unwind-protect
             (progn (ignore withdraw) ,@body)
           (when (buffer-live-p buffer)
             (with-current-buffer buffer (setq mevedel-patch-review--done t))
             (kill-buffer buffer))
           (mevedel-interaction-cancel-request chat 'review-request)
           (kill-buffer (mevedel-chat-data-buffer chat))
           (delete-directory ws t))))))

(defun mevedel-patch-review-test--keys (buffer keys)
  "Type KEYS (a `kbd' string) in the review BUFFER."
  (with-current-buffer buffer
    (execute-kbd-macro (kbd keys))))

(defun mevedel-patch-review-test--take (answer)
  "Return the settled review that the approving ANSWER names."
  (should (eq (car answer) 'approve))
  (mevedel-patch-review-take (plist-get (cdr answer) :review-id)))

(ert-deftest mevedel-patch-review:buffer-shows-files-and-hunks ()
  "The review names every file with its counts, numbers lines, marks hunks."
  (mevedel-patch-review-test--with answers
    (should (equal (buffer-name buffer) "*mevedel-review: 3 files*"))
    (with-current-buffer buffer
      (should (eq major-mode 'mevedel-patch-review-mode))
      (let ((text (buffer-string)))
        (should (string-search "3 files, 4 hunks (+4 −3)" text))
        (should (string-search "Update a.el  +2 −2" text))
        (should (string-match-p "Add new\\.txt" text))
        (should (string-match-p "Delete old\\.txt" text))
        (should (string-match-p "\\[ \\] @@ -10,3 \\+10,3 @@ (defun f" text))
        ;; Old and new line numbers, then the diff line.
        (should (string-search "\n (ten)\n-(eleven)\n+(ELEVEN)\n (twelve)\n" text)))
      ;; Old and new line numbers prefix the diff lines once shown.
      (mevedel-patch-review--number-lines (point-min) (point-max))
      (cl-flet ((prefix (line)
                  (save-excursion
                    (goto-char (point-min))
                    (search-forward (concat "\n" line "\n"))
                    (forward-line -1)
                    (get-text-property (point) 'line-prefix))))
        (should (equal (prefix "-(eleven)") "  11    "))
        (should (equal (prefix "+(ELEVEN)") "     11 "))
        (should (equal (prefix " (ten)") "  10 10 "))
        (should (equal (prefix " (one)") "   1  1 "))
        (should (equal (prefix "+world") "    2 "))
        (should (eq (get-text-property 0 'face (prefix " (ten)")) 'line-number)))
      ;; A decision keeps the header's indentation.
      (save-excursion
        (mevedel-patch-review-accept)
        (goto-char (point-min))
        (search-forward "[✓] @@ -1,3")
        (should (equal (get-text-property (line-beginning-position) 'line-prefix) "  ")))
      ;; Diff faces on the lines, once they are fontified.
      (font-lock-ensure)
      (goto-char (point-min))
      (search-forward "+(TWO)")
      (should (eq (get-text-property (1- (point)) 'face) 'diff-added))
      (should (eq (get-text-property (- (point) 5) 'face) 'diff-added))
      (should (eq (get-text-property (- (point) 6) 'face) 'diff-indicator-added))
      (search-forward "-(eleven)")
      (should (eq (get-text-property (1- (point)) 'face) 'diff-removed))
      (search-forward "(twelve)")
      (should (eq (get-text-property (1- (point)) 'face) 'diff-context))
      (should (eq (get-char-property (point-min) 'face) 'bold))
      ;; Point starts on the first hunk.
      (goto-char (point-min))
      (mevedel-patch-review-next-hunk)
      (should (looking-at-p "\\[.\\] @@ -1,3"))
      (should-not answers))))

(ert-deftest mevedel-patch-review:keeps-the-selected-window ()
  "The review opens in another window: the buffer shown before stays shown."
  (let ((origin (get-buffer-create " *mevedel-review-origin*")))
    (unwind-protect
        (save-window-excursion
          (delete-other-windows)
          (switch-to-buffer origin)
          (mevedel-patch-review-test--with answers
            (should (get-buffer-window origin))
            (should (eq (window-buffer (selected-window)) buffer))
            (should (string-match-p "j or TAB / k or S-TAB hunk"
                                    (with-current-buffer buffer
                                      (mevedel-patch-review-help))))
            (should (get-buffer-window origin))))
      (kill-buffer origin))))

(ert-deftest mevedel-patch-review:accept-all ()
  "Accepting every hunk and settling approves with no selection: everything applies."
  (mevedel-patch-review-test--with answers
    (mevedel-patch-review-test--keys buffer "y y y y C-c C-c")
    (should (= (length answers) 1))
    (let ((answer (car answers)))
      (should (equal (plist-get (cdr answer) :reason) "reviewed: 4 of 4 hunks accepted"))
      (should (eq (plist-get (cdr answer) :source) 'review))
      (should (eq (plist-get (cdr answer) :outcome) 'allow-once))
      (let ((review (mevedel-patch-review-test--take answer)))
        (should (eq (plist-get review :plan) 'test-plan))
        (should (null (plist-get review :selection)))
        (should (null (plist-get review :feedback))))
      ;; Taken once only.
      (should-not (mevedel-patch-review-take (plist-get (cdr answer) :review-id))))
    (should-not (buffer-live-p buffer))))

(ert-deftest mevedel-patch-review:undecided-hunks-are-accepted ()
  "Settling at once accepts every hunk."
  (mevedel-patch-review-test--with answers
    (mevedel-patch-review-test--keys buffer "C-c C-c")
    (should (equal (plist-get (cdar answers) :reason) "reviewed: 4 of 4 hunks accepted"))
    (should (null (plist-get (mevedel-patch-review-test--take (car answers)) :selection)))))

(ert-deftest mevedel-patch-review:reject-all ()
  "C-c C-k refuses the call: the whole patch is rejected, nothing is kept."
  (mevedel-patch-review-test--with answers
    (mevedel-patch-review-test--keys buffer "y C-c C-k")
    (should (equal answers '((deny . "the user rejected the whole patch"))))
    (should-not (buffer-live-p buffer))))

(ert-deftest mevedel-patch-review:rejecting-every-hunk-is-reject-all ()
  "Rejecting every hunk, then settling, refuses the call."
  (mevedel-patch-review-test--with answers
    (mevedel-patch-review-test--keys buffer "n n n n C-c C-c")
    (should (equal answers '((deny . "the user rejected the whole patch"))))))

(ert-deftest mevedel-patch-review:per-hunk-mix ()
  "Per-hunk choices reach the selection; a wholly accepted file is left out."
  (mevedel-patch-review-test--with answers
    ;; a.el: accept, reject; new.txt: accept (y); old.txt: reject file (N).
    (mevedel-patch-review-test--keys buffer "y n y N")
    (with-current-buffer buffer
      (goto-char (point-min))
      (should (search-forward "[~] Update a.el" nil t))
      (should (search-forward "[×] @@ -10,3" nil t))
      (should (search-forward "[×] Delete old.txt" nil t)))
    (mevedel-patch-review-test--keys buffer "C-c C-c")
    (let ((answer (car answers)))
      (should (equal (plist-get (cdr answer) :reason) "reviewed: 2 of 4 hunks accepted"))
      (should (equal (plist-get (mevedel-patch-review-test--take answer) :selection)
                     '(("/ws/a.el" accept reject) ("/ws/old.txt" . reject)))))))

(ert-deftest mevedel-patch-review:movement ()
  "j/k and TAB move between hunks, M-n/M-p between files; decisions go by point."
  (mevedel-patch-review-test--with answers
    (mevedel-patch-review-test--keys buffer "j j k")
    (with-current-buffer buffer
      (should (looking-at-p "\\[ \\] @@ -10,3")))
    ;; Reject the second hunk of a.el only, after moving there.
    (mevedel-patch-review-test--keys buffer "n M-p M-p")
    (with-current-buffer buffer
      ;; A file with an undecided hunk is undecided.
      (should (looking-at-p "\\[ \\] Update a.el")))
    (mevedel-patch-review-test--keys buffer "M-n TAB C-c C-c")
    (should (equal (plist-get (mevedel-patch-review-test--take (car answers)) :selection)
                   '(("/ws/a.el" accept reject))))))

(ert-deftest mevedel-patch-review:edited-hunk ()
  "e edits a hunk's new text in a small buffer; C-c C-c there keeps the edit."
  (mevedel-patch-review-test--with answers
    (mevedel-patch-review-test--keys buffer "j e")
    (let ((edit (window-buffer (selected-window))))
      (should-not (eq edit buffer))
      (should (buffer-local-value 'mevedel-patch-review-edit-mode edit))
      (with-current-buffer edit
        (should (equal (buffer-string) "(ten)\n(ELEVEN)\n(twelve)\n"))
        (erase-buffer)
        (insert "(ten)\n(Eleven, edited)\n(twelve)\n"))
      (with-current-buffer edit (execute-kbd-macro (kbd "C-c C-c")))
      (should-not (buffer-live-p edit)))
    (with-current-buffer buffer
      (save-excursion
        (goto-char (point-min))
        (should (search-forward "[e] @@ -10,3" nil t))))
    ;; A cancelled edit changes nothing.
    ;; Saving moved on to the next hunk; back to the first one.
    (with-current-buffer buffer
      (should (looking-at-p "\\[ \\] @@ -0,0 \\+1,2 @@")))
    (mevedel-patch-review-test--keys buffer "k k e")
    (let ((edit (window-buffer (selected-window))))
      (with-current-buffer edit
        (should (equal (buffer-string) "(one)\n(TWO)\n(three)\n"))
        (insert "junk")
        (execute-kbd-macro (kbd "C-c C-k")))
      (should-not (buffer-live-p edit)))
    (mevedel-patch-review-test--keys buffer "C-c C-c")
    (let ((answer (car answers)))
      (should (equal (plist-get (cdr answer) :reason) "reviewed: 4 of 4 hunks accepted"))
      (should (equal (plist-get (mevedel-patch-review-test--take answer) :selection)
                     '(("/ws/a.el" accept (edit . "(ten)\n(Eleven, edited)\n(twelve)\n"))))))))

;;;; Splitting a hunk, and deciding lines

(defconst mevedel-patch-review-test--two-changes
  '((:path "a.el" :abs "/ws/a.el" :op update :added 2 :removed 2 :diff ""
     :hunks ((:index 0 :header "@@ -1,5 +1,5 @@" :old-start 1 :old-lines 5 :new-start 1
              :new-lines 5 :added 2 :removed 2 :text " a\n-b\n+B\n c\n-d\n+D\n e\n"
              :new-text "a\nB\nc\nD\ne\n"))))
  "One file whose one hunk holds two changes.")

(ert-deftest mevedel-patch-review:split-hunk-parts-are-decided-alone ()
  "s splits the hunk at point; accepting one part and rejecting the other
applies only the first change, as an edit of the hunk."
  (let ((mevedel-patch-review-test--files mevedel-patch-review-test--two-changes))
    (mevedel-patch-review-test--with answers
      (with-current-buffer buffer
        ;; Not where either part would lack a change.
        (search-forward "-b")
        (should-error (mevedel-patch-review-split) :type 'user-error)
        (search-forward " c")
        (mevedel-patch-review-split)
        (should (looking-at-p "\\[ \\] @@ -3,3 \\+3,3 @@ (split)\n"))
        (should (string-search "[ ] @@ -1,5 +1,5 @@\n a\n-b\n+B\n[ ] @@ -3,3 +3,3 @@ (split)\n c\n-d\n+D\n e\n"
                               (buffer-substring-no-properties (point-min) (point-max))))
        ;; Both parts' diff lines keep their line numbers.
        (should (equal (mevedel-patch-review--prefixes
                        (aref (mevedel-patch-review--file-hunks (aref mevedel-patch-review--files 0)) 1))
                       (cl-subseq (mevedel-patch-review--data-prefixes
                                   (aref (mevedel-patch-review--file-hunks
                                          (aref mevedel-patch-review--files 0))
                                         0))
                                  3))))
      (mevedel-patch-review-test--keys buffer "k y n")
      (with-current-buffer buffer
        (goto-char (point-min))
        (should (search-forward "[✓] @@ -1,5" nil t))
        (should (search-forward "[×] @@ -3,3" nil t))
        (should (search-backward "[~] Update a.el" nil t)))
      (mevedel-patch-review-test--keys buffer "C-c C-c")
      (should (equal (plist-get (mevedel-patch-review-test--take (car answers)) :selection)
                     '(("/ws/a.el" (edit . "a\nB\nc\nd\ne\n"))))))))

(ert-deftest mevedel-patch-review:region-decides-only-its-lines ()
  "n with the region on some changed lines rejects only those lines."
  (let ((mevedel-patch-review-test--files mevedel-patch-review-test--two-changes))
    (mevedel-patch-review-test--with answers
      (with-current-buffer buffer
        (search-forward "-d")
        (set-mark (line-beginning-position))
        (forward-line 1)
        (end-of-line)
        (activate-mark)
        (execute-kbd-macro (kbd "n"))
        (should-not (region-active-p))
        (goto-char (point-min))
        (should (search-forward "[~] @@ -1,5" nil t))
        ;; The rejected lines are struck through, the others are not.
        (search-forward "-d")
        (should (cl-some (lambda (o) (eq (overlay-get o 'face) 'mevedel-patch-review-dropped))
                         (overlays-at (line-beginning-position))))
        (search-backward "-b")
        (should-not (cl-some (lambda (o) (overlay-get o 'mevedel-patch-review-pick))
                             (overlays-at (point))))
        ;; A region with no changed line decides nothing.
        (goto-char (point-min))
        (search-forward " c")
        (set-mark (line-beginning-position))
        (end-of-line)
        (activate-mark)
        (should-error (mevedel-patch-review-reject) :type 'user-error)
        (deactivate-mark)
        ;; Editing a hunk with lines decided alone is refused.
        (should-error (mevedel-patch-review-edit) :type 'user-error))
      (mevedel-patch-review-test--keys buffer "C-c C-c")
      (let ((answer (car answers)))
        (should (equal (plist-get (cdr answer) :reason) "reviewed: 1 of 1 hunk accepted"))
        (should (equal (plist-get (mevedel-patch-review-test--take answer) :selection)
                       '(("/ws/a.el" (edit . "a\nB\nc\nd\ne\n")))))))))

(ert-deftest mevedel-patch-review:feedback-captured ()
  "Feedback on a hunk, a file and the patch is kept for the handler."
  (mevedel-patch-review-test--with answers
    (with-current-buffer buffer
      (mevedel-patch-review-feedback "use a constant here")
      (mevedel-patch-review-next-file)
      (mevedel-patch-review-next-file)
      (mevedel-patch-review-feedback "keep this file")
      (mevedel-patch-review-feedback "add a test" t)
      ;; Feedback shows in the buffer.
      (should (cl-some (lambda (o) (equal (overlay-get o 'before-string)
                                          "\n    ✎ use a constant here"))
                       (overlays-in (point-min) (point-max)))))
    (mevedel-patch-review-test--keys buffer "C-c C-c")
    (should (equal (plist-get (mevedel-patch-review-test--take (car answers)) :feedback)
                   (concat "On the whole patch: add a test\n"
                           "On a.el hunk 1 (@@ -1,3 +1,3 @@): use a constant here\n"
                           "On old.txt: keep this file")))))

(ert-deftest mevedel-patch-review:feedback-on-reject-all ()
  "Rejecting everything hands the feedback to the model in the refusal."
  (mevedel-patch-review-test--with answers
    (with-current-buffer buffer
      (mevedel-patch-review-feedback "write a smaller patch" t))
    (mevedel-patch-review-test--keys buffer "C-c C-k")
    (should (equal answers '((deny . "the user rejected the whole patch; feedback: \
On the whole patch: write a smaller patch"))))))

(ert-deftest mevedel-patch-review:closing-the-buffer-rejects ()
  "Killing the review buffer unsettled rejects the whole patch, once."
  (mevedel-patch-review-test--with answers
    (kill-buffer buffer)
    (should (equal answers '((deny . "the user rejected the whole patch \
(closed the review without settling it)"))))))

(ert-deftest mevedel-patch-review:withdraw-kills-the-buffer ()
  "The withdrawing function kills the review without answering."
  (mevedel-patch-review-test--with answers
    (should (functionp withdraw))
    (funcall withdraw)
    (should-not (buffer-live-p buffer))
    (should-not answers)))

(ert-deftest mevedel-patch-review:withdraw-after-settling-forgets-the-review ()
  "A call cancelled between its review's settlement and its handler leaves nothing kept."
  (mevedel-patch-review-test--with answers
    (mevedel-patch-review-test--keys buffer "C-c C-c")
    (let ((id (plist-get (cdar answers) :review-id)))
      (should (gethash id mevedel-patch-review--settled))
      (funcall withdraw)
      (should-not (mevedel-patch-review-take id)))))

(ert-deftest mevedel-patch-review:settled-review-refuses-keys ()
  "Nothing can be decided in a review once it is settled."
  (mevedel-patch-review-test--with answers
    (with-current-buffer buffer
      (setq mevedel-patch-review--done t)
      (should-error (mevedel-patch-review-accept) :type 'user-error)
      (should-error (mevedel-patch-review-settle) :type 'user-error))
    (should-not answers)))

(ert-deftest mevedel-patch-review:plan-failure-goes-to-the-handler ()
  "A patch that does not plan approves with a plan-failed record and shows nothing."
  (let ((answers nil))
    (cl-letf (((symbol-function 'mevedel-tool-patch-plan-for-review)
               (lambda (_context) (error "Hunk 2 of a.el does not apply"))))
      (should-not (mevedel-patch-review-start #'mevedel-tool-patch-plan-for-review
                                              (list :args nil) nil
                                              (lambda (answer) (push answer answers))
                                              (lambda (&rest _) (error "Opened a review")))))
    (should (equal answers '((approve :source review :outcome plan-failed
                                      :reason "Hunk 2 of a.el does not apply"))))
    (should-not (cl-some (lambda (b) (string-prefix-p "*mevedel-review" (buffer-name b)))
                         (buffer-list)))))

(ert-deftest mevedel-patch-review:registry-checks-review ()
  "`:review' must be a function."
  (should (memq :review mevedel-tool-keywords))
  (should-error (mevedel-tool-register "ReviewBad" (list :description "x" :function #'ignore
                                                         :review 42))
                :type 'mevedel-tool-declaration-error))

(ert-deftest mevedel-patch-review:chat-shows-the-review-not-a-card ()
  "In a chat with a prompter, a :review tool's asking call opens its review.
The handler takes the settled review by the id its approval carries."
  (let* ((ws (file-name-as-directory (make-temp-file "mevedel-review-chat" t)))
         (chat (mevedel-chat-get-create ws))
         (cards nil)
         (taken nil)
         (mevedel-permissions-rules nil))
    (mevedel-chat-set-prompter chat (lambda (_chat request) (push request cards)))
    (setf (mevedel-chat-turn chat) 'test-turn)
    (unwind-protect
        (cl-letf (((symbol-function 'mevedel-tool-patch-plan-for-review)
                   (lambda (context)
                     (should (equal (plist-get (plist-get context :args) :patch) "P"))
                     'chat-plan))
                  ((symbol-function 'mevedel-core-patch-plan-files)
                   (lambda (_plan) (copy-tree mevedel-patch-review-test--files))))
          (mevedel-define-tool ReviewMe
            :description "A test tool with a review."
            :args ((patch string :required "The patch."))
            :snapshot-p t
            :review #'mevedel-tool-patch-review
            :function (lambda (_args)
                        (setq taken (mevedel-patch-review-take
                                     (cl-some (lambda (approval) (plist-get approval :review-id))
                                              (mevedel-pipeline-active-permission-approvals))))
                        "applied"))
          (save-window-excursion
            (let ((box (mevedel-test-start-tool chat "ReviewMe" "toolu_review" '(:patch "P"))))
              (mevedel-test-wait-until (get-buffer "*mevedel-review: 3 files*") 10)
              (should-not cards)
              (should-not (car box))
              (let ((review (get-buffer "*mevedel-review: 3 files*")))
                (mevedel-patch-review-test--keys review "n C-c C-c"))
              (mevedel-test-wait-until (car box) 10)
              (should (string-prefix-p "applied" (caar box)))
              (should (eq (plist-get taken :plan) 'chat-plan))
              (should (equal (plist-get taken :selection) '(("/ws/a.el" reject accept))))
              (should (string-match-p "reviewed: 3 of 4 hunks accepted" (caar box))))))
      (mevedel-tool-unregister "ReviewMe")
      (setf (mevedel-chat-turn chat) nil)
      (kill-buffer (mevedel-chat-data-buffer chat))
      (delete-directory ws t))))

(ert-deftest mevedel-patch-review:chat-abort-withdraws-the-review ()
  "Cancelling the call (an aborted turn) kills its review buffer."
  (let* ((ws (file-name-as-directory (make-temp-file "mevedel-review-abort" t)))
         (chat (mevedel-chat-get-create ws))
         (mevedel-permissions-rules nil))
    (mevedel-chat-set-prompter chat #'ignore)
    (setf (mevedel-chat-turn chat) 'test-turn)
    (unwind-protect
        (cl-letf (((symbol-function 'mevedel-tool-patch-plan-for-review) (lambda (_) 'p))
                  ((symbol-function 'mevedel-core-patch-plan-files)
                   (lambda (_plan) (copy-tree mevedel-patch-review-test--files))))
          (mevedel-define-tool ReviewMe
            :description "A test tool with a review."
            :args ((patch string :required "The patch."))
            :snapshot-p t
            :review #'mevedel-tool-patch-review
            :function (lambda (_args) "applied"))
          (save-window-excursion
            (let ((cancel nil) (result nil))
              (with-current-buffer (mevedel-chat-data-buffer chat)
                (setq cancel (mevedel-pipeline-run-tool
                              (mevedel-tool-get "ReviewMe") '(:patch "P")
                              (lambda (r) (setq result r))
                              :tool-use-id "toolu_abort" :data-buffer (current-buffer))))
              (mevedel-test-wait-until (get-buffer "*mevedel-review: 3 files*") 10)
              (let ((review (get-buffer "*mevedel-review: 3 files*")))
                (funcall cancel)
                (should-not (buffer-live-p review))
                (should (string-match-p "cancelled" result))))))
      (mevedel-tool-unregister "ReviewMe")
      (setf (mevedel-chat-turn chat) nil)
      (kill-buffer (mevedel-chat-data-buffer chat))
      (delete-directory ws t))))

;;;; The review as an interaction

(defun mevedel-patch-review-test--open (chat id answers)
  "Open a review of the test patch in CHAT for call ID; return its buffer.
Its answers are pushed onto the car of ANSWERS; call IDs starting with
\"child\" are asked by /root/worker's `worker-request'."
  (let* ((context (list :tool nil :args (list :patch "P") :tool-use-id id))
         (mevedel-interaction-requester-functions
          (list (lambda (context)
                  (and (string-prefix-p "child" (plist-get context :tool-use-id))
                       (cons "/root/worker" 'worker-request))))))
    (cl-letf (((symbol-function 'mevedel-tool-patch-plan-for-review) (lambda (_) 'plan))
              ((symbol-function 'mevedel-core-patch-plan-files)
               (lambda (_plan) (copy-tree mevedel-patch-review-test--files))))
      (save-window-excursion
        (mevedel-patch-review-start
         #'mevedel-tool-patch-plan-for-review
         context nil (lambda (answer) (push answer (car answers)))
         (lambda (&rest keys) (apply #'mevedel-chat-open-interaction chat context keys)))
        (window-buffer (selected-window))))))

(defun mevedel-patch-review-test--press (buffer keys)
  "Type KEYS (a `kbd' string) in the review BUFFER, shown in the selected window."
  (save-window-excursion
    (switch-to-buffer buffer)
    (execute-kbd-macro (kbd keys))))

(defun mevedel-patch-review-test--card (buffer)
  "Return the open interaction of the review in BUFFER."
  (buffer-local-value 'mevedel-patch-review--interaction buffer))

(ert-deftest mevedel-patch-review:its-card-settles-once ()
  "The review is a card in the view; the first settlement is the only answer."
  (mevedel-test-with-view view chat
    (setf (mevedel-chat-turn chat) 'turn-a)
    (let* ((answers (list nil))
           (review (mevedel-patch-review-test--open chat "toolu_r" answers))
           (card (mevedel-patch-review-test--card review)))
      (unwind-protect
          (progn
            (should (eq (mevedel-interaction-kind card) 'review))
            (should (equal (mevedel-interaction-list chat) (list card)))
            (with-current-buffer view
              (should (string-search "\nReview the patch: 3 files, 4 hunks (+4 −3)\n  *mevedel-review: 3 files*\n"
                                     (buffer-substring-no-properties (point-min) (point-max))))
              ;; RET on the card shows the review.
              (goto-char (mevedel-interaction-start card))
              (save-window-excursion
                (call-interactively (lookup-key (mevedel-interaction-keymap card) (kbd "RET")))
                (should (eq (window-buffer (selected-window)) review))))
            (mevedel-patch-review-test--press review "C-c C-k")
            (should-not (buffer-live-p review))
            (should (= 1 (length (car answers))))
            (should (eq (car (caar answers)) 'deny))
            ;; Later settlements and cancels are ignored.
            (should-not (mevedel-interaction-settle card '(verdict approve)))
            (should (= 0 (mevedel-interaction-cancel-request chat 'turn-a)))
            (should (= 1 (length (car answers))))
            (should-not (mevedel-interaction-list chat))
            (with-current-buffer view
              (should-not (string-search "Review the patch" (buffer-string)))))
        (setf (mevedel-chat-turn chat) nil)
        (when (buffer-live-p review) (kill-buffer review))))))

(ert-deftest mevedel-patch-review:cancelling-a-request-closes-only-its-review ()
  "A child's review is attributed by path; cancelling its request leaves the root's."
  (mevedel-test-with-view view chat
    (setf (mevedel-chat-turn chat) 'turn-a)
    (let* ((root-answers (list nil))
           (child-answers (list nil))
           (root (mevedel-patch-review-test--open chat "toolu_r" root-answers))
           (child (mevedel-patch-review-test--open chat "child_r" child-answers)))
      (unwind-protect
          (progn
            (should (equal (mevedel-interaction-owner (mevedel-patch-review-test--card child))
                           "/root/worker"))
            (with-current-buffer view
              (should (string-search "Review the patch: 3 files, 4 hunks (+4 −3) · /root/worker\n"
                                     (buffer-substring-no-properties (point-min) (point-max)))))
            (should (= 1 (mevedel-interaction-cancel-request chat 'worker-request)))
            (should-not (buffer-live-p child))
            (should (eq (car (caar child-answers)) 'deny))
            (should (string-match-p "interrupted" (cdr (caar child-answers))))
            ;; The root's review still waits, and still settles.
            (should (buffer-live-p root))
            (should-not (car root-answers))
            (should (equal (mevedel-interaction-list chat)
                           (list (mevedel-patch-review-test--card root))))
            (mevedel-patch-review-test--press root "y C-c C-c")
            (should (eq (car (caar root-answers)) 'approve))
            (mevedel-patch-review-take (plist-get (cdr (caar root-answers)) :review-id)))
        (setf (mevedel-chat-turn chat) nil)
        (dolist (buffer (list root child))
          (when (buffer-live-p buffer) (kill-buffer buffer)))))))

;;;; With the module's plans and the ApplyPatch tool

(defmacro mevedel-patch-review-test--with-applypatch (chat ws &rest body)
  "Run BODY with CHAT a chat in a turn in the fresh workspace WS.
ApplyPatch shows its review there (its :review is set for the test)."
  (declare (indent 2))
  `(let* ((,ws (file-name-as-directory (make-temp-file "mevedel-review-real" t)))
          (,chat (mevedel-chat-get-create ,ws))
          (tool (mevedel-tool-get "ApplyPatch"))
          (review (mevedel-tool-review tool))
          (mevedel-permissions-rules nil))
     (mevedel-chat-set-prompter ,chat #'ignore)
     (setf (mevedel-chat-turn ,chat) 'test-turn
           (mevedel-tool-review tool) #'mevedel-tool-patch-review)
     (unwind-protect (save-window-excursion ,@body)
       (dolist (buffer (buffer-list))
         (when (string-prefix-p "*mevedel-review" (buffer-name buffer))
           (with-current-buffer buffer (setq mevedel-patch-review--done t))
           (kill-buffer buffer)))
       (setf (mevedel-tool-review tool) review
             (mevedel-chat-turn ,chat) nil)
       (kill-buffer (mevedel-chat-data-buffer ,chat))
       (delete-directory ,ws t))))

(defun mevedel-patch-review-test--write (file lines)
  "Write LINES (strings) to FILE, one a line."
  (with-temp-file file (insert (mapconcat (lambda (l) (concat l "\n")) lines ""))))

(defun mevedel-patch-review-test--read (file)
  "Return FILE's text."
  (with-temp-buffer (insert-file-contents file) (buffer-string)))

(defconst mevedel-patch-review-test--patch
  (concat "*** Begin Patch\n"
          "*** Update File: a.txt\n"
          "@@\n l2\n l3\n-l4\n+L4\n l5\n l6\n"
          "@@\n l16\n l17\n-l18\n+L18\n l19\n l20\n"
          "*** Add File: b.txt\n+new\n"
          "*** End Patch\n")
  "A patch with two hunks far apart in a.txt and a new b.txt.")

(ert-deftest mevedel-patch-review:applypatch-applies-what-the-review-kept ()
  "Through the module and ApplyPatch: a rejected hunk stays out, an edit goes in.
Nothing is written before the review settles, and the feedback reaches
the model's result."
  (require 'mevedel-tool-patch)
  (mevedel-patch-review-test--with-applypatch chat ws
    (let ((a (expand-file-name "a.txt" ws))
          (b (expand-file-name "b.txt" ws)))
      (mevedel-patch-review-test--write a (cl-loop for i from 1 to 24 collect (format "l%d" i)))
      (let* ((before (mevedel-patch-review-test--read a))
             (box (mevedel-test-start-tool chat "ApplyPatch" "toolu_real"
                                           (list :patch mevedel-patch-review-test--patch)))
             (buffer (progn (mevedel-test-wait-until (get-buffer "*mevedel-review: 2 files*") 10)
                            (get-buffer "*mevedel-review: 2 files*"))))
        (with-current-buffer buffer
          (should (string-search "Update a.txt  +2 −2" (buffer-string)))
          (should (string-search "Add b.txt  +1 −0" (buffer-string))))
        ;; Nothing is written while the review waits.
        (should (equal (mevedel-patch-review-test--read a) before))
        (should-not (file-exists-p b))
        ;; First hunk: rejected with feedback; second: edited; b.txt: accepted.
        (with-current-buffer buffer
          (mevedel-patch-review-feedback "keep l4 as it is"))
        (mevedel-patch-review-test--keys buffer "n e")
        (let ((edit (window-buffer (selected-window))))
          (with-current-buffer edit
            ;; The hunk's new side, context included.
            (should (equal (buffer-string) "l15\nl16\nl17\nL18\nl19\nl20\nl21\n"))
            (goto-char (point-min))
            (search-forward "L18")
            (insert " edited")
            (execute-kbd-macro (kbd "C-c C-c"))))
        (mevedel-patch-review-test--keys buffer "y C-c C-c")
        (mevedel-test-wait-until (car box) 10)
        (let ((text (caar box)))
          (should (string-match-p "reviewed: 2 of 3 hunks accepted" text))
          (should (string-search "keep l4 as it is" text)))
        (should (equal (mevedel-patch-review-test--read a)
                       (replace-regexp-in-string "^l18$" "L18 edited" before)))
        (should (equal (mevedel-patch-review-test--read b) "new\n"))))))

(ert-deftest mevedel-patch-review:close-sections-of-the-patch-are-two-hunks ()
  "Two `@@' sections of the model's patch two lines apart are two hunks."
  (require 'mevedel-tool-patch)
  (mevedel-patch-review-test--with-applypatch chat ws
    (let ((a (expand-file-name "a.txt" ws)))
      (mevedel-patch-review-test--write a (cl-loop for i from 1 to 12 collect (format "l%d" i)))
      (let* ((box (mevedel-test-start-tool
                   chat "ApplyPatch" "toolu_close"
                   (list :patch (concat "*** Begin Patch\n*** Update File: a.txt\n"
                                        "@@\n l3\n-l4\n+L4\n"
                                        "@@\n l6\n-l7\n+L7\n"
                                        "*** End Patch\n"))))
             (buffer (progn (mevedel-test-wait-until (get-buffer "*mevedel-review: 1 file*") 10)
                            (get-buffer "*mevedel-review: 1 file*"))))
        (with-current-buffer buffer
          (should (string-search "1 file, 2 hunks" (buffer-string))))
        ;; The second alone is applied.
        (mevedel-patch-review-test--keys buffer "n y C-c C-c")
        (mevedel-test-wait-until (car box) 10)
        (should (string-match-p "reviewed: 1 of 2 hunks accepted" (caar box)))
        (should (equal (mevedel-patch-review-test--read a)
                       (mapconcat (lambda (i) (if (= i 7) "L7\n" (format "l%d\n" i)))
                                  (number-sequence 1 12) "")))))))

(ert-deftest mevedel-patch-review:applypatch-reject-all-writes-nothing ()
  "Rejecting the whole patch refuses the call; no file changes."
  (require 'mevedel-tool-patch)
  (mevedel-patch-review-test--with-applypatch chat ws
    (let ((a (expand-file-name "a.txt" ws)))
      (mevedel-patch-review-test--write a (cl-loop for i from 1 to 24 collect (format "l%d" i)))
      (let* ((before (mevedel-patch-review-test--read a))
             (box (mevedel-test-start-tool chat "ApplyPatch" "toolu_none"
                                           (list :patch mevedel-patch-review-test--patch))))
        (mevedel-test-wait-until (get-buffer "*mevedel-review: 2 files*") 10)
        (mevedel-patch-review-test--keys (get-buffer "*mevedel-review: 2 files*") "C-c C-k")
        (mevedel-test-wait-until (car box) 10)
        (should (string-prefix-p "Permission denied: the user rejected the whole patch"
                                 (caar box)))
        (should (equal (mevedel-patch-review-test--read a) before))
        (should-not (file-exists-p (expand-file-name "b.txt" ws)))))))

(ert-deftest mevedel-patch-review:applypatch-plan-error-reaches-the-model ()
  "A hunk that does not apply shows no review: the handler reports the error."
  (require 'mevedel-tool-patch)
  (mevedel-patch-review-test--with-applypatch chat ws
    (mevedel-patch-review-test--write (expand-file-name "a.txt" ws) '("x" "y"))
    (let ((box (mevedel-test-start-tool chat "ApplyPatch" "toolu_bad"
                                        (list :patch mevedel-patch-review-test--patch))))
      (mevedel-test-wait-until (car box) 10)
      (should (string-prefix-p "Error:" (caar box)))
      (should (string-search "a.txt" (caar box)))
      (should-not (get-buffer "*mevedel-review: 2 files*")))))

(provide 'patch-review-test)
;;; patch-review-test.el ends here
