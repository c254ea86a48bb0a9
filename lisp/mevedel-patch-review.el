;;; mevedel-patch-review.el --- Staged review of an ApplyPatch call  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; When a call of a tool that declares `:review' (ApplyPatch) would
;; ask for permission in a chat that a view shows, the chat does not
;; show a yes/no card: it calls the tool's review function with the
;; call's context, the session and the answer function.  For
;; ApplyPatch that is `mevedel-tool-patch-review', which passes its
;; planner to `mevedel-patch-review-start': that plans the patch in
;; memory (nothing is written) and opens a review buffer:
;;
;;   per file   a header: its state marker, operation, path, +added
;;              -removed ([~]: some hunks rejected or edited)
;;   per hunk   a state marker ([ ] undecided, [✓] accepted, [×]
;;              rejected, [e] edited), its @@ header and its diff
;;              lines, with `diff-mode' faces and old/new line numbers
;;
;; The review is an interaction (mevedel-interaction.el) of the request
;; that made the call: its card in the root view names the patch and
;; its requester (RET shows the buffer), and it is settled once, by the
;; buffer's keys, by killing the buffer, or by cancelling that request.
;;
;; The buffer opens in another window than the selected one (see
;; `mevedel-patch-review-display-action').  Its text is inserted in one
;; pass, a hunk's diff lines as one string; faces come from font-lock
;; keywords and line numbers are a `line-prefix' that a `jit-lock'
;; function puts on the lines being shown, so a large patch opens fast.
;;
;; Each `@@' section of the model's patch is a hunk of its own (the
;; module never merges two, however close).  A hunk can be split
;; further, at the line at point (s, as `diff-split-hunk' does); its
;; parts are decided alone.  With the region active, y and n decide
;; only the changed lines in it (as Magit stages a region): a rejected
;; removal stays in the file, a rejected addition stays out, and the
;; hunk, marked [~], applies as an edit of its new text.
;;
;; Keys: y accept the hunk (or the lines in the region), n reject it,
;; s split it at point, e edit its new text (C-c C-c saves the edit,
;; C-c C-k cancels), f attach feedback (to the hunk at point, to the
;; file on its header, to the whole patch with a prefix argument), Y /
;; N accept / reject the file, j / k (also TAB and S-TAB) the next /
;; previous hunk, M-n / M-p the next / previous file, C-c C-c settle,
;; C-c C-k reject everything, ? help.
;;
;; Settling keeps (:plan PLAN :selection SELECTION :feedback TEXT) in
;; a table under a fresh id and approves the call; the tool's handler
;; takes it back with `mevedel-patch-review-take' and applies only the
;; selection.  Undecided hunks count as accepted.  SELECTION is nil when
;; everything was accepted unchanged, else an alist from absolute path
;; to `reject' or a list of per-hunk choices (`accept', `reject' or
;; (edit . TEXT)), the shape `mevedel-core-patch-apply' takes; a file
;; accepted whole is left out of it.  Rejecting everything, or closing
;; the buffer without settling, refuses the call, with the user's
;; feedback in the reason.  A planning error approves the call with a
;; `plan-failed' record so that the handler reports the error itself.
;;
;; The approval record's :review-id reaches the handler through the
;; pipeline's approvals, and the handler takes the review by it.
;; A review settled for a call that is cancelled before its handler
;; runs is forgotten when the call withdraws it.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'diff-mode)
(require 'mevedel-core)
(require 'mevedel-interaction)
(require 'mevedel-pipeline)
(require 'mevedel-session)

(declare-function mevedel-core-patch-plan-files "mevedel-core" (plan))

;;;; Customization

(defgroup mevedel-patch-review nil
  "The staged review of ApplyPatch calls."
  :group 'mevedel
  :prefix "mevedel-patch-review-")

(defcustom mevedel-patch-review-display-action
  '((display-buffer-reuse-window display-buffer-pop-up-window
                                 display-buffer-use-some-window)
    (inhibit-same-window . t))
  "How the review buffer is shown: a `display-buffer' action.
The default keeps the selected window (the chat's view, usually) and
shows the review in another one."
  :type 'sexp)

(defface mevedel-patch-review-file-header
  '((t :inherit diff-file-header :extend t))
  "Face of a file's header line in a review.")

(defface mevedel-patch-review-accepted '((t :inherit success :weight bold))
  "Face of the marker of an accepted hunk.")

(defface mevedel-patch-review-rejected '((t :inherit error :weight bold))
  "Face of the marker of a rejected hunk.")

(defface mevedel-patch-review-edited '((t :inherit warning :weight bold))
  "Face of the marker of an edited hunk.")

(defface mevedel-patch-review-feedback '((t :inherit font-lock-comment-face :slant italic))
  "Face of feedback shown under a hunk, a file or the patch.")

(defface mevedel-patch-review-dropped '((t :inherit shadow :strike-through t))
  "Face of a changed line rejected alone: it is not applied.")

;;;; Settled reviews

(defvar mevedel-patch-review--settled (make-hash-table :test #'equal)
  "Review id -> (:plan PLAN :selection SELECTION :feedback TEXT).")

(defvar mevedel-patch-review--counter 0
  "Number of reviews settled so far, for fresh ids.")

(defun mevedel-patch-review-take (id)
  "Return the settled review ID and forget it, or nil when there is none.
The value is (:plan PLAN :selection SELECTION :feedback TEXT)."
  (prog1 (gethash id mevedel-patch-review--settled)
    (remhash id mevedel-patch-review--settled)))

;;;; Review state

(cl-defstruct (mevedel-patch-review--hunk (:constructor mevedel-patch-review--hunk-make)
                                          (:copier nil))
  "A hunk as the review shows it: a plan hunk (DATA, INDEX), or the part
of one from its diff line FROM to before line TO (nil: its start, its
end) after a split.  PICKS is an alist from a diff line's index to
`accept' or `reject', the lines decided alone (see the Commentary)."
  data index (state 'pending) edit feedback marker overlay width prefixes
  from to picks)

(cl-defstruct (mevedel-patch-review--file (:constructor mevedel-patch-review--file-make)
                                          (:copier nil))
  data hunks (state 'pending) feedback marker overlay)

(defvar-local mevedel-patch-review--files nil
  "The files of this review, a vector of `mevedel-patch-review--file'.")

(defvar-local mevedel-patch-review--plan nil
  "The plan this review shows.")

(defvar-local mevedel-patch-review--interaction nil
  "The interaction (mevedel-interaction.el) this review settles.")

(defvar-local mevedel-patch-review--context nil
  "The pipeline context of the reviewed call.")

(defvar-local mevedel-patch-review--done nil
  "Non-nil once this review's buffer is closing.")

(defvar-local mevedel-patch-review--feedback nil
  "Feedback on the whole patch, or nil.")

(defvar-local mevedel-patch-review--feedback-overlay nil
  "The overlay showing the whole patch's feedback.")

(defvar-local mevedel-patch-review--box nil
  "A cons whose car becomes the id this review was settled under.
The withdrawing function holds it too, after the buffer is gone.")

(defvar-local mevedel-patch-review--edit-buffer nil
  "The live hunk edit buffer of this review, or nil.")

;;;; Keys and mode

(defvar-keymap mevedel-patch-review-mode-map
  :doc "Keys of a patch review."
  "y" #'mevedel-patch-review-accept
  "n" #'mevedel-patch-review-reject
  "s" #'mevedel-patch-review-split
  "e" #'mevedel-patch-review-edit
  "f" #'mevedel-patch-review-feedback
  "Y" #'mevedel-patch-review-accept-file
  "N" #'mevedel-patch-review-reject-file
  "j" #'mevedel-patch-review-next-hunk
  "k" #'mevedel-patch-review-previous-hunk
  "TAB" #'mevedel-patch-review-next-hunk
  "<backtab>" #'mevedel-patch-review-previous-hunk
  "M-n" #'mevedel-patch-review-next-file
  "M-p" #'mevedel-patch-review-previous-file
  "C-c C-c" #'mevedel-patch-review-settle
  "C-c C-k" #'mevedel-patch-review-reject-all
  "q" #'mevedel-patch-review-quit
  "?" #'mevedel-patch-review-help)

(define-derived-mode mevedel-patch-review-mode special-mode "mevedel-review"
  "Major mode of an ApplyPatch review.
Decide per hunk, then settle; nothing is written before that.
Undecided hunks are accepted when the review is settled.

\\{mevedel-patch-review-mode-map}"
  (setq-local truncate-lines t)
  (setq-local buffer-undo-list t)
  ;; Headers and markers carry `font-lock-face', which font-lock leaves
  ;; alone; diff lines are fontified by keywords, as they are shown.
  (setq-local char-property-alias-alist
              (cons '(face font-lock-face) char-property-alias-alist))
  (setq-local font-lock-defaults '(mevedel-patch-review--font-lock-keywords t))
  (jit-lock-register #'mevedel-patch-review--number-lines)
  (add-hook 'kill-buffer-hook #'mevedel-patch-review--killed nil t))

;;;; Starting a review

(defvar-keymap mevedel-patch-review-card-map
  :doc "Keys on a review's card in the view."
  "RET" #'mevedel-patch-review-show)

(defun mevedel-patch-review-start (planner context session answer open)
  "Review the ApplyPatch call CONTEXT of SESSION; ANSWER gets the verdict.
Plan the call's patch with PLANNER, the tool's function of CONTEXT
\(nothing is written), open the review's interaction with OPEN (it
takes `mevedel-interaction-open''s keys but the owner and request) and
show the review buffer.  The review is
settled through that interaction, once: by the buffer's keys, by
killing the buffer, or by cancelling the request that asked.  A
planning error approves the call with a `plan-failed' record, so the
handler reports it.  Return a function that withdraws the review."
  (ignore session)
  (condition-case err
      (let* ((plan (funcall planner context))
             (buffer (mevedel-patch-review--make-buffer
                      plan (mevedel-core-patch-plan-files plan) context))
             (box (buffer-local-value 'mevedel-patch-review--box buffer))
             (interaction
              (funcall open :kind 'review :data buffer
                           :title (mevedel-patch-review--card-title buffer)
                           :render #'mevedel-patch-review--card-body
                           :keymap mevedel-patch-review-card-map
                           :on-settle (lambda (_interaction outcome)
                                        (mevedel-patch-review--close buffer)
                                        (pcase outcome
                                          (`(verdict . ,verdict) (funcall answer verdict))
                                          ('cancelled
                                           (funcall answer (cons 'deny "the request that made \
this ApplyPatch call was interrupted before its review was settled"))))))))
        (with-current-buffer buffer
          (setq mevedel-patch-review--interaction interaction))
        (pop-to-buffer buffer mevedel-patch-review-display-action)
        (lambda () (mevedel-patch-review--withdraw interaction box)))
    (error
     (funcall answer (cons 'approve (list :source 'review :outcome 'plan-failed
                                          :reason (error-message-string err))))
     nil)))

(defun mevedel-patch-review--card-title (buffer)
  "Return the title of the card of the review in BUFFER."
  (with-current-buffer buffer
    (pcase-let ((`(,hunks ,added ,removed) (mevedel-patch-review--totals
                                             mevedel-patch-review--files))
                (count (length mevedel-patch-review--files)))
      (format "Review the patch: %d file%s, %d hunk%s (+%d −%d)"
              count (if (= count 1) "" "s") hunks (if (= hunks 1) "" "s") added removed))))

(defun mevedel-patch-review--card-body (interaction)
  "Return the body of the review card INTERACTION: where the review is."
  (concat "  " (buffer-name (mevedel-interaction-data interaction)) "\n"
          (propertize (substitute-command-keys
                       "  \\<mevedel-patch-review-card-map>\\[mevedel-patch-review-show] \
shows the review; settle it there\n")
                      'face 'shadow)))

(defun mevedel-patch-review-show ()
  "Show the review of the card at point."
  (interactive)
  (let ((interaction (mevedel-interaction-at)))
    (unless (and interaction (eq (mevedel-interaction-kind interaction) 'review))
      (user-error "No patch review here"))
    (pop-to-buffer (mevedel-interaction-data interaction) mevedel-patch-review-display-action)))

(defun mevedel-patch-review--withdraw (interaction box)
  "Withdraw the review INTERACTION: close its buffer without answering.
A review already settled (its id in the car of BOX) but not taken yet
is forgotten: its call was cancelled before its handler ran."
  (when (car box)
    (remhash (car box) mevedel-patch-review--settled))
  (mevedel-interaction-settle interaction 'withdrawn))

(defun mevedel-patch-review--close (buffer)
  "Close the review BUFFER and its hunk edit buffer, unless they are closing."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (unless mevedel-patch-review--done
        (setq mevedel-patch-review--done t)
        (when (buffer-live-p mevedel-patch-review--edit-buffer)
          (kill-buffer mevedel-patch-review--edit-buffer))
        (let ((window (get-buffer-window buffer)))
          (if (and window (not (one-window-p t window)))
              (quit-window t window)
            (kill-buffer buffer)))))))

(defun mevedel-patch-review--make-buffer (plan files context)
  "Return a new review buffer of PLAN's FILES for CONTEXT."
  (let* ((files (vconcat
                 (cl-loop for data in files
                          collect (mevedel-patch-review--file-make
                                   :data data
                                   :hunks (vconcat
                                           (cl-loop for hunk in (plist-get data :hunks)
                                                    for i from 0
                                                    collect (mevedel-patch-review--hunk-make
                                                             :data hunk :index i)))))))
         (buffer (generate-new-buffer (format "*mevedel-review: %d file%s*" (length files)
                                              (if (= (length files) 1) "" "s")))))
    (with-current-buffer buffer
      (mevedel-patch-review-mode)
      (setq mevedel-patch-review--plan plan
            mevedel-patch-review--box (list nil)
            mevedel-patch-review--files files
            mevedel-patch-review--context context)
      (when-let* ((session (plist-get context :session))
                  ((mevedel-session-p session)))
        (setq default-directory (mevedel-session-workspace session)))
      (let ((inhibit-read-only t))
        (mevedel-patch-review--insert files))
      (goto-char (point-min))
      (mevedel-patch-review-next-hunk))
    buffer))

;;;; Drawing

(defconst mevedel-patch-review--markers
  '((pending "[ ]" nil)
    (accept "[✓]" mevedel-patch-review-accepted)
    (reject "[×]" mevedel-patch-review-rejected)
    (edit "[e]" mevedel-patch-review-edited)
    (partial "[~]" mevedel-patch-review-edited))
  "State -> (TEXT FACE) of a hunk's or a file's marker.")

(defun mevedel-patch-review--marker-text (state)
  "Return the marker text of STATE."
  (pcase-let ((`(,text ,face) (alist-get state mevedel-patch-review--markers)))
    (if face (propertize text 'font-lock-face face) text)))

(defun mevedel-patch-review--totals (files)
  "Return (HUNKS ADDED REMOVED) over FILES."
  (let ((hunks 0) (added 0) (removed 0))
    (cl-loop for file across files
             for data = (mevedel-patch-review--file-data file)
             do (cl-incf hunks (length (mevedel-patch-review--file-hunks file)))
             (cl-incf added (or (plist-get data :added) 0))
             (cl-incf removed (or (plist-get data :removed) 0)))
    (list hunks added removed)))

(defun mevedel-patch-review--file-title (data)
  "Return the title of the file DATA: operation, path and move target."
  (let ((op (plist-get data :op))
        (path (plist-get data :path))
        (move (plist-get data :move-to)))
    (concat (pcase op ('add "Add") ('delete "Delete") (_ (if move "Move" "Update")))
            " " path (if move (concat " → " move) ""))))

(defconst mevedel-patch-review--font-lock-keywords
  '(("^\\(\\+\\)\\(.*\n?\\)" (1 'diff-indicator-added) (2 'diff-added))
    ("^\\(-\\)\\(.*\n?\\)" (1 'diff-indicator-removed) (2 'diff-removed))
    ("^[ \\].*\n?" . 'diff-context))
  "Font-lock keywords of a review's diff lines: `diff-mode' faces.
Only diff lines start with a space, `+', `-' or a backslash: headers
start with their state marker.  Diff lines are inserted as plain text
and fontified as they are shown, so that opening a large review costs
no face work on unseen lines.")

(defun mevedel-patch-review--body (data)
  "Return the diff lines of the hunk DATA, ending in a newline."
  (let ((text (or (plist-get data :text) "")))
    (when (string-prefix-p "@@" text)
      (setq text (substring text (or (string-search "\n" text) (length text)))))
    (when (string-prefix-p "\n" text)
      (setq text (substring text 1)))
    (if (or (string-empty-p text) (string-suffix-p "\n" text)) text (concat text "\n"))))

(defun mevedel-patch-review--lines (data)
  "Return the diff lines of the plan hunk DATA, a list of strings."
  (split-string (mevedel-patch-review--body data) "\n" t))

(defun mevedel-patch-review--prefixes (hunk)
  "Return the line-number prefixes of HUNK's diff lines, a vector.
Each shows the line's old and new numbers; they are made the first time
a line of HUNK is shown."
  (or (mevedel-patch-review--hunk-prefixes hunk)
      (setf (mevedel-patch-review--hunk-prefixes hunk)
            (let ((all (mevedel-patch-review--data-prefixes hunk)))
              (cl-subseq all (or (mevedel-patch-review--hunk-from hunk) 0)
                         (or (mevedel-patch-review--hunk-to hunk) (length all)))))))

(defun mevedel-patch-review--data-prefixes (hunk)
  "Return the line-number prefixes of every diff line of HUNK's plan hunk."
  (let* ((data (mevedel-patch-review--hunk-data hunk))
         (width (mevedel-patch-review--hunk-width hunk))
         (old (or (plist-get data :old-start) 1))
         (new (or (plist-get data :new-start) 1))
         (blank (make-string width ?\s))
         (fmt (format "%%%dd" width)))
    (vconcat
     (mapcar (lambda (line)
               (propertize
                (concat
                 "  "
                 (pcase (and (not (string-empty-p line)) (aref line 0))
                   (?+ (prog1 (concat blank " " (format fmt new))
                         (cl-incf new)))
                   (?- (prog1 (concat (format fmt old) " " blank)
                         (cl-incf old)))
                   (?\\ (concat blank " " blank))
                   (_ (prog1 (concat (format fmt old) " "
                                     (format fmt new))
                        (cl-incf old) (cl-incf new))))
                 " ")
                'face 'line-number))
             (mevedel-patch-review--lines data)))))

(defun mevedel-patch-review--number-lines (beg end)
  "Show the old and new line numbers of the diff lines from BEG to END.
A `jit-lock' function: numbers are a `line-prefix', made as lines are
shown."
  (save-excursion
    (goto-char beg)
    (forward-line 0)
    (with-silent-modifications
      (while (< (point) end)
        (let ((hunk (get-text-property (point) 'mevedel-patch-review-body)))
          (if (not hunk)
              (forward-line 1)
            (let* ((start (if (and (> (point) (point-min))
                                   (eq (get-text-property (1- (point)) 'mevedel-patch-review-body)
                                       hunk))
                              (previous-single-property-change (point) 'mevedel-patch-review-body)
                            (point)))
                   (stop (next-single-property-change (point) 'mevedel-patch-review-body nil
                                                      (point-max)))
                   (prefixes (mevedel-patch-review--prefixes hunk))
                   (i (count-lines start (point))))
              (while (and (< (point) stop) (< (point) end))
                (when (< i (length prefixes))
                  (put-text-property (point) (min stop (1+ (line-end-position)))
                                     'line-prefix (aref prefixes i)))
                (cl-incf i)
                (forward-line 1))))))))
  `(jit-lock-bounds ,beg . ,end))

(defun mevedel-patch-review--number-width (data)
  "Return the width of the line numbers of the file DATA's hunks."
  (let ((top 1))
    (dolist (hunk (plist-get data :hunks))
      (setq top (max top
                     (+ (or (plist-get hunk :old-start) 0) (or (plist-get hunk :old-lines) 0))
                     (+ (or (plist-get hunk :new-start) 0) (or (plist-get hunk :new-lines) 0)))))
    (length (number-to-string top))))

(defun mevedel-patch-review--insert (files)
  "Insert the review of FILES at point, in one pass."
  (pcase-let ((`(,hunks ,added ,removed) (mevedel-patch-review--totals files)))
    (insert (propertize (format "Review ApplyPatch: %d file%s, %d hunk%s (+%d −%d)\n"
                                (length files) (if (= (length files) 1) "" "s")
                                hunks (if (= hunks 1) "" "s") added removed)
                        'font-lock-face 'bold)
            (substitute-command-keys
             (concat "\\<mevedel-patch-review-mode-map>Keys: "
                     "\\[mevedel-patch-review-accept] accept · "
                     "\\[mevedel-patch-review-reject] reject · "
                     "\\[mevedel-patch-review-split] split · "
                     "\\[mevedel-patch-review-edit] edit · "
                     "\\[mevedel-patch-review-feedback] feedback · "
                     "\\[mevedel-patch-review-accept-file]/\\[mevedel-patch-review-reject-file] "
                     "file · \\[mevedel-patch-review-settle] settle · "
                     "\\[mevedel-patch-review-reject-all] reject all · "
                     "\\[mevedel-patch-review-help] help\n")))
    (setq mevedel-patch-review--feedback-overlay (make-overlay (1- (point)) (1- (point))))
    (cl-loop
     for file across files
     for f from 0
     for data = (mevedel-patch-review--file-data file)
     for width = (mevedel-patch-review--number-width data)
     do
     (insert "\n")
     (let ((start (point)))
       (setf (mevedel-patch-review--file-marker file) (point-marker))
       (insert (mevedel-patch-review--marker-text 'pending) " "
               (propertize (format "%s  +%d −%d\n" (mevedel-patch-review--file-title data)
                                   (or (plist-get data :added) 0)
                                   (or (plist-get data :removed) 0))
                           'font-lock-face 'mevedel-patch-review-file-header))
       (setf (mevedel-patch-review--file-overlay file) (make-overlay (1- (point)) (1- (point))))
       (put-text-property start (point) 'mevedel-patch-review-file f))
     (cl-loop
      for hunk across (mevedel-patch-review--file-hunks file)
      for h from 0
      for hdata = (mevedel-patch-review--hunk-data hunk)
      do
      (let ((start (point)))
        (setf (mevedel-patch-review--hunk-marker hunk) (point-marker)
              (mevedel-patch-review--hunk-width hunk) width)
        (insert (mevedel-patch-review--marker-text 'pending) " "
                (propertize (concat (or (plist-get hdata :header) "@@") "\n")
                            'font-lock-face 'diff-hunk-header))
        (put-text-property start (point) 'line-prefix "  ")
        (setf (mevedel-patch-review--hunk-overlay hunk) (make-overlay (1- (point)) (1- (point))))
        (let ((body (point)))
          (insert (mevedel-patch-review--body hdata))
          (put-text-property body (point) 'mevedel-patch-review-body hunk))
        (add-text-properties start (point) (list 'mevedel-patch-review-file f
                                                 'mevedel-patch-review-hunk h)))))))

(defun mevedel-patch-review--set-marker (marker state)
  "Replace the state marker at MARKER with that of STATE.
The marker's text keeps its other properties (the hunk it belongs to,
its line's prefix)."
  (let ((inhibit-read-only t)
        (keep (cl-loop for (key value) on (text-properties-at marker) by #'cddr
                       unless (memq key '(face font-lock-face))
                       append (list key value))))
    (save-excursion
      (goto-char marker)
      (delete-char 3)
      (insert (mevedel-patch-review--marker-text state))
      (set-marker marker (- (point) 3))
      (add-text-properties marker (point) keep))))

(defun mevedel-patch-review--show-feedback (overlay text &optional indent)
  "Show feedback TEXT (nil to hide it) at OVERLAY, indented by INDENT.
OVERLAY sits at the end of a header line: the feedback is a line of
its own under it."
  (overlay-put overlay 'before-string
               (and text (concat "\n" (make-string (or indent 0) ?\s)
                                 (propertize (concat "✎ " text)
                                             'face 'mevedel-patch-review-feedback)))))

(defun mevedel-patch-review--set-hunk (hunk state &optional edit)
  "Set HUNK's STATE (`pending', `accept', `reject' or `edit' with EDIT).
Lines picked alone follow the hunk's state again."
  (setf (mevedel-patch-review--hunk-state hunk) state
        (mevedel-patch-review--hunk-edit hunk) (and (eq state 'edit) edit))
  (mevedel-patch-review--set-picks hunk nil)
  (mevedel-patch-review--set-marker (mevedel-patch-review--hunk-marker hunk) state))

(defun mevedel-patch-review--body-start (hunk)
  "Return the position of HUNK's first diff line."
  (save-excursion
    (goto-char (mevedel-patch-review--hunk-marker hunk))
    (line-beginning-position 2)))

(defun mevedel-patch-review--set-picks (hunk picks)
  "Set HUNK's PICKS and show its rejected lines struck through."
  (setf (mevedel-patch-review--hunk-picks hunk) picks)
  (let ((start (mevedel-patch-review--body-start hunk))
        (from (or (mevedel-patch-review--hunk-from hunk) 0)))
    (remove-overlays start (next-single-property-change start 'mevedel-patch-review-body
                                                        nil (point-max))
                     'mevedel-patch-review-pick t)
    (save-excursion
      (pcase-dolist (`(,line . ,state) picks)
        (when (eq state 'reject)
          (goto-char start)
          (forward-line (- line from))
          (let ((overlay (make-overlay (point) (line-end-position))))
            (overlay-put overlay 'mevedel-patch-review-pick t)
            (overlay-put overlay 'face 'mevedel-patch-review-dropped)))))))

(defun mevedel-patch-review--shown-state (hunk)
  "Return the state of HUNK's marker: `partial' when lines were picked."
  (if (mevedel-patch-review--hunk-picks hunk) 'partial (mevedel-patch-review--hunk-state hunk)))

(defun mevedel-patch-review--refresh-file (file)
  "Redraw FILE's marker from its hunks' states."
  (let* ((hunks (mevedel-patch-review--file-hunks file))
         (states (cl-map 'list #'mevedel-patch-review--shown-state hunks))
         (state (cond ((null states) (mevedel-patch-review--file-state file))
                      ((cl-every (lambda (s) (eq s 'reject)) states) 'reject)
                      ((cl-every (lambda (s) (eq s 'accept)) states) 'accept)
                      ((memq 'pending states) 'pending)
                      (t 'partial))))
    (mevedel-patch-review--set-marker (mevedel-patch-review--file-marker file) state)))

;;;; Where point is

(defun mevedel-patch-review--file-at-point ()
  "Return the file at point, or signal a user error."
  (let ((f (get-text-property (point) 'mevedel-patch-review-file)))
    (unless f (user-error "No file here"))
    (aref mevedel-patch-review--files f)))

(defun mevedel-patch-review--hunk-at-point (&optional noerror)
  "Return (FILE . HUNK) at point; without one, nil if NOERROR, else signal."
  (let ((f (get-text-property (point) 'mevedel-patch-review-file))
        (h (get-text-property (point) 'mevedel-patch-review-hunk)))
    (cond ((and f h)
           (let ((file (aref mevedel-patch-review--files f)))
             (cons file (aref (mevedel-patch-review--file-hunks file) h))))
          (noerror nil)
          (t (user-error "No hunk here")))))

(defun mevedel-patch-review--check-live ()
  "Signal a user error unless this is a review still waiting."
  (unless (derived-mode-p 'mevedel-patch-review-mode)
    (user-error "Not in a patch review"))
  (when mevedel-patch-review--done
    (user-error "This review is settled")))

;;;; Moving

(defun mevedel-patch-review--hunk-markers ()
  "Return the state markers of every hunk, in buffer order."
  (cl-loop for file across mevedel-patch-review--files
           append (cl-loop for hunk across (mevedel-patch-review--file-hunks file)
                           collect (mevedel-patch-review--hunk-marker hunk))))

(defun mevedel-patch-review--file-markers ()
  "Return the header markers of every file, in buffer order."
  (cl-map 'list #'mevedel-patch-review--file-marker mevedel-patch-review--files))

(defun mevedel-patch-review--step (markers count)
  "Move point COUNT of MARKERS forward (backward when negative).
Backwards, the first step goes to the start of the region point is in.
Stay put when there is no such marker; return non-nil when point moved."
  (let ((pos (point)))
    (dotimes (_ (abs count))
      (when-let* ((next (if (> count 0)
                            (cl-find-if (lambda (m) (> m pos)) markers)
                          (cl-find-if (lambda (m) (< m pos)) markers :from-end t))))
        (setq pos (marker-position next))))
    (unless (= pos (point))
      (goto-char pos))))

(defun mevedel-patch-review-next-hunk (&optional count)
  "Move to the COUNTth next hunk (default 1)."
  (interactive "p")
  (mevedel-patch-review--step (mevedel-patch-review--hunk-markers) (or count 1)))

(defun mevedel-patch-review-previous-hunk (&optional count)
  "Move to the COUNTth previous hunk (default 1)."
  (interactive "p")
  (mevedel-patch-review--step (mevedel-patch-review--hunk-markers) (- (or count 1))))

(defun mevedel-patch-review-next-file (&optional count)
  "Move to the COUNTth next file's header (default 1)."
  (interactive "p")
  (mevedel-patch-review--step (mevedel-patch-review--file-markers) (or count 1)))

(defun mevedel-patch-review-previous-file (&optional count)
  "Move to the COUNTth previous file's header (default 1)."
  (interactive "p")
  (mevedel-patch-review--step (mevedel-patch-review--file-markers) (- (or count 1))))

;;;; Deciding

(defun mevedel-patch-review--decide (state)
  "Set the hunk at point to STATE and move to the next undecided hunk.
With the region active, set only its changed lines to STATE, and stay."
  (mevedel-patch-review--check-live)
  (pcase-let ((`(,file . ,hunk) (mevedel-patch-review--hunk-at-point)))
    (if (use-region-p)
        (mevedel-patch-review--pick hunk state (region-beginning) (region-end))
    (mevedel-patch-review--set-hunk hunk state)
    (mevedel-patch-review--refresh-file file)
      (mevedel-patch-review-next-hunk))))

(defun mevedel-patch-review--pick (hunk state beg end)
  "Set the changed lines of HUNK from BEG to END to STATE, alone."
  (when (eq (mevedel-patch-review--hunk-state hunk) 'edit)
    (user-error "This hunk's text was edited: decide it whole"))
  (let* ((start (mevedel-patch-review--body-start hunk))
         (from (or (mevedel-patch-review--hunk-from hunk) 0))
         (lines (vconcat (mevedel-patch-review--lines (mevedel-patch-review--hunk-data hunk))))
         (picks (copy-sequence (mevedel-patch-review--hunk-picks hunk)))
         (picked nil))
    (save-excursion
      (goto-char (max beg start))
      (forward-line 0)
      (while (and (< (point) end)
                  (eq (get-text-property (point) 'mevedel-patch-review-body) hunk))
        (let ((line (+ from (count-lines start (point)))))
          (when (and (< line (length lines)) (memq (aref (aref lines line) 0) '(?+ ?-)))
            (setf (alist-get line picks) state)
            (setq picked t)))
        (forward-line 1)))
    (unless picked
      (user-error "The region holds no changed line of this hunk"))
    (deactivate-mark)
    (mevedel-patch-review--set-picks hunk picks)
    (mevedel-patch-review--set-marker (mevedel-patch-review--hunk-marker hunk) 'partial)
    (mevedel-patch-review--refresh-file (car (mevedel-patch-review--hunk-at-point)))))

(defun mevedel-patch-review-accept ()
  "Accept the hunk at point, or only the changed lines in the region."
  (interactive)
  (mevedel-patch-review--decide 'accept))

(defun mevedel-patch-review-reject ()
  "Reject the hunk at point, or only the changed lines in the region."
  (interactive)
  (mevedel-patch-review--decide 'reject))

(defun mevedel-patch-review-split ()
  "Split the hunk at point before the diff line at point into two hunks.
Each part is then decided alone; a part must hold a changed line."
  (interactive)
  (mevedel-patch-review--check-live)
  (pcase-let* ((`(,file . ,hunk) (mevedel-patch-review--hunk-at-point))
               (start (mevedel-patch-review--body-start hunk))
               (data (mevedel-patch-review--hunk-data hunk))
               (lines (vconcat (mevedel-patch-review--lines data)))
               (from (or (mevedel-patch-review--hunk-from hunk) 0))
               (to (or (mevedel-patch-review--hunk-to hunk) (length lines)))
               (at (and (eq (get-text-property (point) 'mevedel-patch-review-body) hunk)
                        (+ from (count-lines start (line-beginning-position)))))
               (changed (lambda (a b)
                          (cl-loop for i from a below b
                                   thereis (memq (aref (aref lines i) 0) '(?+ ?-))))))
    (unless (and at (funcall changed from at) (funcall changed at to))
      (user-error "Split on a line with changes both above it and from it on"))
    (when (eq (mevedel-patch-review--hunk-state hunk) 'edit)
      (user-error "This hunk's text was edited: decide it whole"))
    (let* ((hunks (mevedel-patch-review--file-hunks file))
           (position (cl-position hunk hunks))
           (f (cl-position file mevedel-patch-review--files))
           (state (mevedel-patch-review--hunk-state hunk))
           (part (mevedel-patch-review--hunk-make
                  :data data :index (mevedel-patch-review--hunk-index hunk) :state state
                  :width (mevedel-patch-review--hunk-width hunk) :from at :to to
                  :picks (cl-remove-if (lambda (pick) (< (car pick) at))
                                       (mevedel-patch-review--hunk-picks hunk))))
           (inhibit-read-only t))
      (setf (mevedel-patch-review--hunk-to hunk) at
            (mevedel-patch-review--hunk-prefixes hunk) nil
            (mevedel-patch-review--hunk-picks hunk)
            (cl-remove-if (lambda (pick) (>= (car pick) at))
                          (mevedel-patch-review--hunk-picks hunk)))
      (save-excursion
        (goto-char (line-beginning-position))
        (let ((header (point))
              (body-end (next-single-property-change (point) 'mevedel-patch-review-body
                                                     nil (point-max))))
          (insert (mevedel-patch-review--marker-text state) " "
                  (propertize (concat (mevedel-patch-review--part-header part lines) "\n")
                              'font-lock-face 'diff-hunk-header))
          (put-text-property header (point) 'line-prefix "  ")
          (setf (mevedel-patch-review--hunk-marker part) (copy-marker header)
                (mevedel-patch-review--hunk-overlay part) (make-overlay (1- (point)) (1- (point))))
          (put-text-property (point) (+ body-end (- (point) header))
                             'mevedel-patch-review-body part)
          (put-text-property header (point) 'mevedel-patch-review-file f)))
      (setf (mevedel-patch-review--file-hunks file)
            (vconcat (cl-subseq hunks 0 (1+ position)) (list part)
                     (cl-subseq hunks (1+ position))))
      (mevedel-patch-review--number-hunks file)
      (mevedel-patch-review--set-picks hunk (mevedel-patch-review--hunk-picks hunk))
      (mevedel-patch-review--set-picks part (mevedel-patch-review--hunk-picks part))
      (mevedel-patch-review--set-marker (mevedel-patch-review--hunk-marker part)
                                        (mevedel-patch-review--shown-state part))
      (goto-char (mevedel-patch-review--hunk-marker part)))))

(defun mevedel-patch-review--part-header (part lines)
  "Return the @@ header of PART, a split hunk's part, whose plan hunk has LINES."
  (let* ((data (mevedel-patch-review--hunk-data part))
         (old (or (plist-get data :old-start) 1))
         (new (or (plist-get data :new-start) 1))
         (old-count 0) (new-count 0))
    (dotimes (i (mevedel-patch-review--hunk-from part))
      (pcase (aref (aref lines i) 0)
        (?+ (cl-incf new))
        (?- (cl-incf old))
        (?\\ nil)
        (_ (cl-incf old) (cl-incf new))))
    (cl-loop for i from (mevedel-patch-review--hunk-from part)
             below (mevedel-patch-review--hunk-to part)
             do (pcase (aref (aref lines i) 0)
                  (?+ (cl-incf new-count))
                  (?- (cl-incf old-count))
                  (?\\ nil)
                  (_ (cl-incf old-count) (cl-incf new-count))))
    (format "@@ -%d,%d +%d,%d @@ (split)" old old-count new new-count)))

(defun mevedel-patch-review--number-hunks (file)
  "Mark the text of FILE's hunks with their places in its hunks again."
  (let* ((hunks (mevedel-patch-review--file-hunks file))
         (last (1- (length hunks))))
    (cl-loop for hunk across hunks
             for h from 0
             for start = (marker-position (mevedel-patch-review--hunk-marker hunk))
             for end = (if (< h last)
                           (marker-position (mevedel-patch-review--hunk-marker (aref hunks (1+ h))))
                         (next-single-property-change start 'mevedel-patch-review-hunk
                                                      nil (point-max)))
             do (put-text-property start end 'mevedel-patch-review-hunk h))))

(defun mevedel-patch-review--decide-file (state)
  "Set every hunk of the file at point to STATE; move to the next file."
  (mevedel-patch-review--check-live)
  (let ((file (mevedel-patch-review--file-at-point)))
    (setf (mevedel-patch-review--file-state file) state)
    (cl-loop for hunk across (mevedel-patch-review--file-hunks file)
             do (mevedel-patch-review--set-hunk hunk state))
    (mevedel-patch-review--refresh-file file)
    (goto-char (mevedel-patch-review--file-marker file))
    (mevedel-patch-review-next-file)))

(defun mevedel-patch-review-accept-file ()
  "Accept every hunk of the file at point."
  (interactive)
  (mevedel-patch-review--decide-file 'accept))

(defun mevedel-patch-review-reject-file ()
  "Reject the file at point: it is left alone."
  (interactive)
  (mevedel-patch-review--decide-file 'reject))

;;;; Editing a hunk

(defvar-local mevedel-patch-review--edit-origin nil
  "In a hunk edit buffer: (REVIEW-BUFFER FILE . HUNK).")

(defvar-keymap mevedel-patch-review-edit-mode-map
  :doc "Keys of a hunk edit buffer."
  "C-c C-c" #'mevedel-patch-review-edit-save
  "C-c C-k" #'mevedel-patch-review-edit-cancel)

(define-minor-mode mevedel-patch-review-edit-mode
  "Minor mode of the buffer editing a reviewed hunk's new text.
\\<mevedel-patch-review-edit-mode-map>\\[mevedel-patch-review-edit-save] \
saves the edit, \\[mevedel-patch-review-edit-cancel] cancels it."
  :lighter " Hunk-edit")

(defun mevedel-patch-review-edit ()
  "Edit the new text of the hunk at point in a small buffer.
The hunk then applies with that text in place of its new lines."
  (interactive)
  (mevedel-patch-review--check-live)
  (pcase-let* ((`(,file . ,hunk) (mevedel-patch-review--hunk-at-point))
               (data (mevedel-patch-review--file-data file))
               (review (current-buffer)))
    (when (eq (plist-get data :op) 'delete)
      (user-error "A deleted file has no new text to edit; accept or reject it"))
    (when (or (mevedel-patch-review--hunk-from hunk) (mevedel-patch-review--hunk-to hunk)
              (mevedel-patch-review--hunk-picks hunk))
      (user-error "This hunk was split or has lines decided alone: decide those instead"))
    (when (buffer-live-p mevedel-patch-review--edit-buffer)
      (kill-buffer mevedel-patch-review--edit-buffer))
    (let ((buffer (generate-new-buffer
                   (format "*mevedel-review-edit: %s hunk %d*" (plist-get data :path)
                           (1+ (mevedel-patch-review--hunk-index hunk))))))
      (setq mevedel-patch-review--edit-buffer buffer)
      (with-current-buffer buffer
        (insert (or (mevedel-patch-review--hunk-edit hunk)
                    (plist-get (mevedel-patch-review--hunk-data hunk) :new-text)
                    ""))
        (let ((mode (assoc-default (plist-get data :path) auto-mode-alist #'string-match-p)))
          (when (and (functionp mode) (not (memq mode '(archive-mode tar-mode))))
            (ignore-errors (delay-mode-hooks (funcall mode)))))
        (goto-char (point-min))
        (setq mevedel-patch-review--edit-origin (cons review (cons file hunk)))
        (mevedel-patch-review-edit-mode 1)
        (setq header-line-format
              (substitute-command-keys
               "\\<mevedel-patch-review-edit-mode-map>Edit the hunk's new text: \
\\[mevedel-patch-review-edit-save] save · \\[mevedel-patch-review-edit-cancel] cancel")))
      (pop-to-buffer buffer '((display-buffer-below-selected) (window-height . fit-window-to-buffer)))
      buffer)))

(defun mevedel-patch-review-edit-save ()
  "Save this buffer's text as the reviewed hunk's new text.
The review then moves on to the next hunk."
  (interactive)
  (pcase-let ((`(,review ,file . ,hunk) mevedel-patch-review--edit-origin)
              (text (buffer-substring-no-properties (point-min) (point-max)))
              (buffer (current-buffer)))
    (unless (buffer-live-p review)
      (user-error "The review of this hunk is gone"))
    (with-current-buffer review
      (mevedel-patch-review--check-live)
      (if (equal text (plist-get (mevedel-patch-review--hunk-data hunk) :new-text))
          (mevedel-patch-review--set-hunk hunk 'accept)
        (mevedel-patch-review--set-hunk hunk 'edit text))
      (mevedel-patch-review--refresh-file file)
      (setq mevedel-patch-review--edit-buffer nil))
    (mevedel-patch-review--close-edit buffer)
    ;; On to the next hunk, as after any decision.
    (let ((window (get-buffer-window review)))
      (with-current-buffer review
        (goto-char (mevedel-patch-review--hunk-marker hunk))
        (mevedel-patch-review-next-hunk)
        (when window (set-window-point window (point)))))))

(defun mevedel-patch-review-edit-cancel ()
  "Close this hunk edit buffer, leaving the hunk's text as it was."
  (interactive)
  (mevedel-patch-review--close-edit (current-buffer)))

(defun mevedel-patch-review--close-edit (buffer)
  "Kill the hunk edit BUFFER and its window."
  (let ((window (get-buffer-window buffer)))
    (if (and window (not (one-window-p t window)))
        (quit-window t window)
      (kill-buffer buffer))))

;;;; Feedback

(defun mevedel-patch-review-feedback (text &optional whole)
  "Attach feedback TEXT to the hunk at point, the file on its header, or WHOLE.
With a prefix argument (WHOLE non-nil) the feedback is on the whole
patch.  Empty TEXT removes the feedback.  The model receives it with
the result of the call."
  (interactive
   (list (read-string (if current-prefix-arg "Feedback on the patch: " "Feedback: "))
         current-prefix-arg))
  (mevedel-patch-review--check-live)
  (let ((text (and text (not (string-blank-p text)) (string-trim text)))
        (found (mevedel-patch-review--hunk-at-point t)))
    (cond
     (whole
      (setq mevedel-patch-review--feedback text)
      (mevedel-patch-review--show-feedback mevedel-patch-review--feedback-overlay text))
     (found
      (setf (mevedel-patch-review--hunk-feedback (cdr found)) text)
      (mevedel-patch-review--show-feedback
       (mevedel-patch-review--hunk-overlay (cdr found)) text 4))
     (t
      (let ((file (mevedel-patch-review--file-at-point)))
        (setf (mevedel-patch-review--file-feedback file) text)
        (mevedel-patch-review--show-feedback
         (mevedel-patch-review--file-overlay file) text 4))))))

(defun mevedel-patch-review--feedback-text ()
  "Return the review's feedback for the model, or nil when there is none."
  (let ((lines (and mevedel-patch-review--feedback
                    (list (format "On the whole patch: %s" mevedel-patch-review--feedback)))))
    (cl-loop for file across mevedel-patch-review--files
             for path = (plist-get (mevedel-patch-review--file-data file) :path)
             do (when-let* ((text (mevedel-patch-review--file-feedback file)))
                  (push (format "On %s: %s" path text) lines))
             (cl-loop for hunk across (mevedel-patch-review--file-hunks file)
                      do (when-let* ((text (mevedel-patch-review--hunk-feedback hunk)))
                           (push (format "On %s hunk %d (%s): %s" path
                                         (1+ (mevedel-patch-review--hunk-index hunk))
                                         (plist-get (mevedel-patch-review--hunk-data hunk)
                                                    :header)
                                         text)
                                 lines))))
    (and lines (string-join (nreverse lines) "\n"))))

;;;; Settling

(defun mevedel-patch-review--selection ()
  "Return (SELECTION ACCEPTED TOTAL) of this review.
Undecided hunks count as accepted; see the Commentary for SELECTION."
  (let ((accepted 0) (total 0) (selection nil))
    (cl-loop
     for file across mevedel-patch-review--files
     for hunks = (mevedel-patch-review--file-hunks file)
     for abs = (plist-get (mevedel-patch-review--file-data file) :abs)
     do
     (if (zerop (length hunks))
         (when (eq (mevedel-patch-review--file-state file) 'reject)
           (push (cons abs 'reject) selection))
       (let ((choices (mapcar #'mevedel-patch-review--choice
                              (mevedel-patch-review--by-plan-hunk hunks))))
         (cl-incf total (length choices))
         (cl-incf accepted (cl-count-if-not (lambda (c) (eq c 'reject)) choices))
         (cond ((cl-every (lambda (c) (eq c 'reject)) choices)
                (push (cons abs 'reject) selection))
               ((cl-every (lambda (c) (eq c 'accept)) choices))
               (t (push (cons abs choices) selection))))))
    (list (nreverse selection) accepted total)))

(defun mevedel-patch-review--by-plan-hunk (hunks)
  "Return the vector HUNKS as lists of the parts of each plan hunk, in order."
  (let ((groups nil))
    (cl-loop for hunk across hunks
             do (if (and groups (eql (mevedel-patch-review--hunk-index (caar groups))
                                     (mevedel-patch-review--hunk-index hunk)))
                    (push hunk (car groups))
                  (push (list hunk) groups)))
    (nreverse (mapcar #'reverse groups))))

(defun mevedel-patch-review--choice (parts)
  "Return the choice on a plan hunk shown as PARTS (one, unless split).
`accept', `reject' or (edit . TEXT); lines decided alone, or parts
decided differently, make the new text of what was accepted."
  (let ((hunk (car parts)))
    (if (and (null (cdr parts)) (null (mevedel-patch-review--hunk-picks hunk)))
        (pcase (mevedel-patch-review--hunk-state hunk)
          ('reject 'reject)
          ('edit (cons 'edit (mevedel-patch-review--hunk-edit hunk)))
          (_ 'accept))
      (let* ((data (mevedel-patch-review--hunk-data hunk))
             (lines (vconcat (mevedel-patch-review--lines data)))
             (decisions (make-vector (length lines) 'accept)))
        (dolist (part parts)
          (cl-loop for i from (or (mevedel-patch-review--hunk-from part) 0)
                   below (or (mevedel-patch-review--hunk-to part) (length lines))
                   do (aset decisions i
                            (or (alist-get i (mevedel-patch-review--hunk-picks part))
                                (if (eq (mevedel-patch-review--hunk-state part) 'reject)
                                    'reject
                                  'accept)))))
        (let ((changed (cl-loop for line across lines
                                for decision across decisions
                                when (memq (aref line 0) '(?+ ?-)) collect decision)))
          (cond ((not (memq 'reject changed)) 'accept)
                ((not (memq 'accept changed)) 'reject)
                (t (cons 'edit (mevedel-patch-review--picked-text data lines decisions)))))))))

(defun mevedel-patch-review--picked-text (data lines decisions)
  "Return the new text of the plan hunk DATA as the accepted lines make it.
LINES are its diff lines and DECISIONS each one's: a rejected removal
stays, a rejected addition stays out."
  (let ((text (cl-loop for line across lines
                       for decision across decisions
                       when (pcase (aref line 0)
                              (?\s t)
                              (?- (eq decision 'reject))
                              (?+ (eq decision 'accept)))
                       concat (concat (substring line 1) "\n")))
        (new (or (plist-get data :new-text) "")))
    ;; A hunk ending a file that has no final newline keeps it so.
    (if (and (not (string-empty-p new)) (not (string-suffix-p "\n" new)))
        (string-remove-suffix "\n" text)
      text)))

(defun mevedel-patch-review--finish (verdict)
  "Settle this review's interaction with VERDICT for the call.
Its settlement closes the buffer."
  (mevedel-interaction-settle mevedel-patch-review--interaction (cons 'verdict verdict)))

(defun mevedel-patch-review--rejection (&optional closed)
  "Return the refusal of the whole patch, with the feedback.
CLOSED non-nil says the review buffer was closed unsettled."
  (let ((feedback (mevedel-patch-review--feedback-text)))
    (cons 'deny (concat "the user rejected the whole patch"
                        (and closed " (closed the review without settling it)")
                        (and feedback (concat "; feedback: " feedback))))))

(defun mevedel-patch-review-settle ()
  "Settle the review: apply what was accepted, as decided.
Undecided hunks are accepted.  When every hunk was rejected this is
`mevedel-patch-review-reject-all'."
  (interactive)
  (mevedel-patch-review--check-live)
  (pcase-let ((`(,selection ,accepted ,total) (mevedel-patch-review--selection)))
    (if (and selection
             (cl-every (lambda (entry) (eq (cdr entry) 'reject)) selection)
             (= (length selection) (length mevedel-patch-review--files)))
        (mevedel-patch-review--finish (mevedel-patch-review--rejection))
      (let ((id (format "review-%d" (cl-incf mevedel-patch-review--counter))))
        (setcar mevedel-patch-review--box id)
        (puthash id (list :plan mevedel-patch-review--plan :selection selection
                          :feedback (mevedel-patch-review--feedback-text))
                 mevedel-patch-review--settled)
        (mevedel-patch-review--finish
         (cons 'approve (list :source 'review :outcome 'allow-once
                              :reason (format "reviewed: %d of %d hunk%s accepted"
                                              accepted total (if (= total 1) "" "s"))
                              :review-id id)))))))

(defun mevedel-patch-review-reject-all ()
  "Reject the whole patch: nothing is written."
  (interactive)
  (mevedel-patch-review--check-live)
  (mevedel-patch-review--finish (mevedel-patch-review--rejection)))

(defun mevedel-patch-review-quit ()
  "Reject the whole patch after confirmation, and close the review."
  (interactive)
  (mevedel-patch-review--check-live)
  (when (yes-or-no-p "Reject the whole patch? ")
    (mevedel-patch-review-reject-all)))

(defun mevedel-patch-review--killed ()
  "Reject the whole patch when its review buffer is killed unsettled."
  (unless mevedel-patch-review--done
    (setq mevedel-patch-review--done t)
    (when (buffer-live-p mevedel-patch-review--edit-buffer)
      (kill-buffer mevedel-patch-review--edit-buffer))
    (mevedel-patch-review--finish (mevedel-patch-review--rejection t))))

(defun mevedel-patch-review-help ()
  "Show the keys of the patch review in the echo area."
  (interactive)
  (message "%s"
           (substitute-command-keys
            (concat
             "\\<mevedel-patch-review-mode-map>"
             "Hunk at point: \\[mevedel-patch-review-accept] accept, "
             "\\[mevedel-patch-review-reject] reject (with the region: its lines only), "
             "\\[mevedel-patch-review-split] split at point, \\[mevedel-patch-review-edit] edit "
             "its new text, \\[mevedel-patch-review-feedback] feedback "
             "(on a file's header: the file; with a prefix: the patch)\n"
             "File at point: \\[mevedel-patch-review-accept-file] accept, "
             "\\[mevedel-patch-review-reject-file] reject\n"
             "Move: j or TAB / k or S-TAB hunk, "
             "\\[mevedel-patch-review-next-file] / \\[mevedel-patch-review-previous-file] file\n"
             "\\[mevedel-patch-review-settle] settle (undecided hunks are accepted), "
             "\\[mevedel-patch-review-reject-all] reject the whole patch, "
             "\\[mevedel-patch-review-quit] reject and close"))))

(provide 'mevedel-patch-review)
;;; mevedel-patch-review.el ends here
