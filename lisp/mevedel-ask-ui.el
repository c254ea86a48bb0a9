;;; mevedel-ask-ui.el --- Ask's questionnaire in the view  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The questionnaire an Ask call shows, an interaction
;; (mevedel-interaction.el) in the root view's live zone:
;;
;;   Ask · 3 questions
;;   ▸ Storage: Where should drafts live? → SQLite
;;   ▾ Format: Which export format?
;;     1. ( ) Markdown — plain text, diffable
;;     2. (•) Org — folds, tables
;;     c. Custom answer…
;;     ┌ sample: Org
;;     │ * Heading
;;     └
;;   ▸ Sync: When to sync? → no answer yet
;;
;;   [ Submit ]  1/3 answered
;;   n/p move · TAB next · RET choose · c custom · … · ? keys
;;
;; One question is open; the others take one line each.  Point is the
;; focused entry: n/p, C-n/C-p and the arrows move between entries
;; and never redraw the form, except the sample panel when point
;; reaches an option whose sample it does not show.  TAB/S-TAB open
;; the next/previous question, Submit being the last stop.  RET or a
;; click chooses, c edits a custom answer, C-v/M-v page a sample.
;;
;; Every line is wrapped here, to the width of the narrowest window
;; showing the view (less the continuation column when that window has
;; no right fringe), so lines are rows there.  The form's height is the
;; tallest any open question needs, with blank lines above Submit
;; making up the difference, so moving between questions never moves
;; what is below.  When that width changes, the form is laid out again.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-interaction)

(defgroup mevedel-ask nil
  "Ask, the questionnaire the model puts to the user."
  :group 'mevedel
  :prefix "mevedel-ask-")

(define-obsolete-variable-alias 'mevedel-ask-sample-height
  'mevedel-ask-ui-sample-height "0.1.0")
(defcustom mevedel-ask-ui-sample-height 8
  "Most rows a question's sample panel takes."
  :type 'natnum)

(defface mevedel-ask-ui-heading '((t :inherit bold))
  "Face of the open question's heading.")

(defface mevedel-ask-ui-closed '((t :inherit default))
  "Face of a closed question's line.")

(defface mevedel-ask-ui-answer '((t :inherit success))
  "Face of an answer shown after →.")

(defface mevedel-ask-ui-dim '((t :inherit shadow))
  "Face of descriptions, hints and the progress count.")

(defface mevedel-ask-ui-sample '((t :inherit (fixed-pitch secondary-selection) :extend t))
  "Face of sample rows.")

(define-obsolete-face-alias 'mevedel-ask-heading 'mevedel-ask-ui-heading "0.1.0")
(define-obsolete-face-alias 'mevedel-ask-closed 'mevedel-ask-ui-closed "0.1.0")
(define-obsolete-face-alias 'mevedel-ask-answer 'mevedel-ask-ui-answer "0.1.0")
(define-obsolete-face-alias 'mevedel-ask-dim 'mevedel-ask-ui-dim "0.1.0")
(define-obsolete-face-alias 'mevedel-ask-sample 'mevedel-ask-ui-sample "0.1.0")

;;;; The form

(cl-defstruct (mevedel-ask-ui-form (:constructor mevedel-ask-ui-form--make) (:copier nil))
  "A questionnaire's state."
  ;; A vector of (:header :question :options VECTOR :multi BOOL); an
  ;; option is (:label :description :sample).
  questions
  ;; A vector of answers, one per question: (:chosen INDICES :custom TEXT).
  answers
  ;; The open question's index; the number of questions means Submit.
  (open 0)
  ;; Per question: the sample option shown and the panel's first row.
  shown scroll
  ;; The width laid out for and the height budget at that width.
  width height)

(defun mevedel-ask-ui-form-create (questions)
  "Return a form for QUESTIONS, a list of question plists (see the struct)."
  (let ((n (length questions)))
    (mevedel-ask-ui-form--make
     :questions (vconcat questions)
     :answers (make-vector n nil)
     :shown (vconcat (mapcar (lambda (q)
                               (cl-position-if (lambda (o) (plist-get o :sample))
                                               (plist-get q :options)))
                             questions))
     :scroll (make-vector n 0))))

(defun mevedel-ask-ui--question (form i)
  "Return question I of FORM."
  (aref (mevedel-ask-ui-form-questions form) i))

(defun mevedel-ask-ui--answer (form i)
  "Return the answer plist of question I of FORM."
  (aref (mevedel-ask-ui-form-answers form) i))

(defun mevedel-ask-ui--answered-p (form i)
  "Return non-nil when question I of FORM has an answer."
  (let ((answer (mevedel-ask-ui--answer form i)))
    (or (plist-get answer :chosen) (plist-get answer :custom))))

(defun mevedel-ask-ui--count (form)
  "Return how many questions FORM has."
  (length (mevedel-ask-ui-form-questions form)))

(defun mevedel-ask-ui-answer-labels (form i)
  "Return question I's answer in FORM as labels, in offered order, custom last."
  (let* ((question (mevedel-ask-ui--question form i))
         (answer (mevedel-ask-ui--answer form i))
         (options (plist-get question :options)))
    (append (cl-loop for j below (length options)
                     when (memq j (plist-get answer :chosen))
                     collect (plist-get (aref options j) :label))
            (and (plist-get answer :custom) (list (plist-get answer :custom))))))

;;;; Layout

(defun mevedel-ask-ui--wrap (text width first rest)
  "Return TEXT word-wrapped to WIDTH columns as lines.
The first line starts with FIRST, the others with REST (a hanging
indentation)."
  (let ((words (split-string (string-trim text) "[ \t\n]+" t))
        (lines nil)
        (line first)
        (fresh t))
    (dolist (word words)
      (let ((candidate (if fresh (concat line word) (concat line " " word))))
        (if (or fresh (<= (string-width candidate) width))
            (setq line candidate fresh nil)
          (push line lines)
          (setq line (concat rest word)))
        ;; A word longer than the line is cut into pieces.
        (while (> (string-width line) width)
          (let ((cut (max (1+ (string-width rest)) width)))
            (push (truncate-string-to-width line cut) lines)
            (setq line (concat rest (substring line (length (truncate-string-to-width
                                                              line cut)))))))))
    (nreverse (cons line lines))))

(defun mevedel-ask-ui--sample-rows (sample width)
  "Return SAMPLE's lines cut into rows of WIDTH columns, continuations marked ↪."
  (let ((rows nil))
    (dolist (line (split-string sample "\n"))
      (let ((first t))
        (while (or first (> (string-width line) 0))
          (let* ((room (if first width (- width 2)))
                 (piece (truncate-string-to-width line (max room 1))))
            (push (if first piece (concat "↪ " piece)) rows)
            (setq line (substring line (length piece))
                  first nil)))))
    (nreverse rows)))

(defun mevedel-ask-ui--panel-height (form i width)
  "Return the sample panel rows of question I of FORM at WIDTH, 0 without samples."
  (let ((longest 0))
    (seq-doseq (option (plist-get (mevedel-ask-ui--question form i) :options))
      (when-let* ((sample (plist-get option :sample)))
        (setq longest (max longest (length (mevedel-ask-ui--sample-rows
                                            sample (mevedel-ask-ui--sample-width width)))))))
    (min longest mevedel-ask-ui-sample-height)))

(defun mevedel-ask-ui--sample-width (width)
  "Return the columns of a sample row in a form WIDTH wide."
  (max 10 (- width 6)))

(defun mevedel-ask-ui--line (line)
  "Return LINE and its newline, which has LINE's entry and panel properties.
Each entry is then one run of its property, however many lines it takes."
  (concat line (propertize "\n"
                           'mevedel-ask-entry (get-text-property 0 'mevedel-ask-entry line)
                           'mevedel-ask-panel (get-text-property 0 'mevedel-ask-panel line))))

(defun mevedel-ask-ui--entry (line entry)
  "Return LINE marked as (part of) ENTRY."
  (propertize line 'mevedel-ask-entry entry))

(defun mevedel-ask-ui--closed-answer (form i)
  "Return the text after → on question I's closed line in FORM."
  (let ((labels (mevedel-ask-ui-answer-labels form i)))
    (if labels (string-join labels ", ") "no answer yet")))

(defun mevedel-ask-ui--panel-lines (form i width)
  "Return the sample panel lines of open question I of FORM at WIDTH."
  (let* ((height (mevedel-ask-ui--panel-height form i width)))
    (when (> height 0)
      (let* ((shown (aref (mevedel-ask-ui-form-shown form) i))
             (option (aref (plist-get (mevedel-ask-ui--question form i) :options) shown))
             (rows (mevedel-ask-ui--sample-rows (plist-get option :sample)
                                             (mevedel-ask-ui--sample-width width)))
             (scroll (min (aref (mevedel-ask-ui-form-scroll form) i)
                          (max 0 (- (length rows) height))))
             (visible (seq-take (nthcdr scroll rows) height))
             (more (> (length rows) (+ scroll height))))
        (mapcar
         (lambda (line) (propertize line 'mevedel-ask-panel t))
         `(,(truncate-string-to-width
             (concat "    ┌ sample: " (plist-get option :label)
                     (if (> (length rows) height)
                         (format " (%d–%d of %d)" (1+ scroll) (+ scroll (length visible))
                                 (length rows))
                       ""))
             width)
           ,@(mapcar (lambda (row) (propertize (concat "    │ " row) 'face 'mevedel-ask-ui-sample))
                     visible)
           ,@(make-list (- height (length visible)) "    │")
           ,(if more "    └ C-v more" "    └")))))))

(defun mevedel-ask-ui--open-lines (form i width)
  "Return the lines of question I of FORM, open, at WIDTH."
  (let* ((question (mevedel-ask-ui--question form i))
         (answer (mevedel-ask-ui--answer form i))
         (multi (plist-get question :multi))
         (heading (list 'question i))
         (lines (mapcar (lambda (line)
                          (mevedel-ask-ui--entry (propertize line 'face 'mevedel-ask-ui-heading)
                                              heading))
                        (mevedel-ask-ui--wrap (concat (plist-get question :header) ": "
                                                   (plist-get question :question))
                                           width "▾ " "  "))))
    (cl-loop for option across (plist-get question :options)
             for j from 0
             do (let* ((entry (list 'option i j))
                       (chosen (memq j (plist-get answer :chosen)))
                       (mark (if multi (if chosen "[x]" "[ ]") (if chosen "(•)" "( )")))
                       (first (format "  %s %s " (if (< j 9) (format "%d." (1+ j)) "  ") mark))
                       (indent (make-string (string-width first) ?\s)))
                  (dolist (line (mevedel-ask-ui--wrap (plist-get option :label) width first indent))
                    (setq lines (nconc lines (list (mevedel-ask-ui--entry line entry)))))
                  (when-let* ((description (plist-get option :description)))
                    (unless (string-blank-p description)
                      (dolist (line (mevedel-ask-ui--wrap description width indent indent))
                        (setq lines (nconc lines (list (mevedel-ask-ui--entry
                                                        (propertize line 'face 'mevedel-ask-ui-dim)
                                                        entry)))))))))
    (let ((custom (plist-get answer :custom))
          (entry (list 'custom i)))
      (dolist (line (mevedel-ask-ui--wrap (if custom (concat "custom: " custom) "custom answer…")
                                       width "  c. " "     "))
        (setq lines (nconc lines (list (mevedel-ask-ui--entry line entry))))))
    (nconc lines (mevedel-ask-ui--panel-lines form i width))))

(defun mevedel-ask-ui--question-lines (form open width)
  "Return the lines of FORM's questions with question OPEN open, at WIDTH."
  (cl-loop for i below (mevedel-ask-ui--count form)
           append (if (= i open)
                      (mevedel-ask-ui--open-lines form i width)
                    (let ((question (mevedel-ask-ui--question form i)))
                      (list (mevedel-ask-ui--entry
                             (concat
                              (truncate-string-to-width
                               (concat "▸ " (plist-get question :header) ": "
                                       (plist-get question :question))
                               (max 10 (- width 3 (min (/ width 2)
                                                        (string-width
                                                         (mevedel-ask-ui--closed-answer form i)))))
                               nil nil "…")
                              " → "
                              (propertize (truncate-string-to-width
                                           (mevedel-ask-ui--closed-answer form i)
                                           (/ width 2) nil nil "…")
                                          'face (if (mevedel-ask-ui--answered-p form i)
                                                    'mevedel-ask-ui-answer 'mevedel-ask-ui-dim)))
                             (list 'question i)))))))

(defun mevedel-ask-ui--hint (width)
  "Return the one hint line, cut to WIDTH.
It names the keys used most and fits 80 columns; \\`?' lists them all."
  (propertize (truncate-string-to-width
               "n/p · TAB next · RET choose · c custom · C-c C-c submit · q cancel · ? keys"
               width nil nil "…")
              'face 'mevedel-ask-ui-dim))

(defun mevedel-ask-ui-help ()
  "List every key of the Ask form."
  (interactive)
  (with-help-window (help-buffer)
    (princ "Keys on an Ask form:\n\n")
    (princ (substitute-command-keys "\\{mevedel-ask-ui-map}"))))

(defun mevedel-ask-ui-form-layout (form width)
  "Lay FORM out at WIDTH: set its width and its height budget."
  (setf (mevedel-ask-ui-form-width form) width
        (mevedel-ask-ui-form-height form)
        (cl-loop for i below (mevedel-ask-ui--count form)
                 maximize (length (mevedel-ask-ui--question-lines form i width)))))

(defun mevedel-ask-ui-form-text (form)
  "Return FORM's body text as laid out."
  (let* ((width (mevedel-ask-ui-form-width form))
         (lines (mevedel-ask-ui--question-lines form (mevedel-ask-ui-form-open form) width))
         (answered (cl-loop for i below (mevedel-ask-ui--count form)
                            count (mevedel-ask-ui--answered-p form i))))
    (concat
     (mapconcat #'mevedel-ask-ui--line lines "")
     (make-string (max 0 (- (mevedel-ask-ui-form-height form) (length lines))) ?\n)
     (mevedel-ask-ui--entry (concat (propertize "[ Submit ]" 'face 'bold)
                                 (propertize (format "  %d/%d answered" answered
                                                     (mevedel-ask-ui--count form))
                                             'face 'mevedel-ask-ui-dim))
                         (list 'submit))
     "\n" (mevedel-ask-ui--hint width) "\n")))

;;;; The questionnaire as an interaction

(defvar mevedel-ask-ui--forms nil
  "The open questionnaires' interactions, for re-layout on width changes.")

(defun mevedel-ask-ui--width (interaction)
  "Return the columns INTERACTION's form is laid out for.
That is the narrowest window showing its text, less the continuation
column when that window has no right fringe; 80 when none shows it."
  (let* ((overlay (mevedel-interaction-overlay interaction))
         (buffer (and overlay (overlay-buffer overlay)))
         (widths (and buffer
                      (mapcar (lambda (window)
                                (- (window-body-width window)
                                   (if (zerop (or (cadr (window-fringes window)) 0)) 1 0)))
                              (get-buffer-window-list buffer nil t)))))
    (if widths (max 20 (apply #'min widths)) 80)))

(defun mevedel-ask-ui--render (interaction)
  "Return the body of INTERACTION's questionnaire, laid out for its windows."
  (let ((form (mevedel-interaction-data interaction))
        (width (mevedel-ask-ui--width interaction)))
    (unless (eql width (mevedel-ask-ui-form-width form))
      (mevedel-ask-ui-form-layout form width))
    (mevedel-ask-ui-form-text form)))

(defvar-keymap mevedel-ask-ui-map
  :doc "Keys on an Ask questionnaire."
  "n" #'mevedel-ask-ui-next-entry
  "p" #'mevedel-ask-ui-previous-entry
  "C-n" #'mevedel-ask-ui-next-entry
  "C-p" #'mevedel-ask-ui-previous-entry
  "<down>" #'mevedel-ask-ui-next-entry
  "<up>" #'mevedel-ask-ui-previous-entry
  "TAB" #'mevedel-ask-ui-next-question
  "<backtab>" #'mevedel-ask-ui-previous-question
  "S-TAB" #'mevedel-ask-ui-previous-question
  "RET" #'mevedel-ask-ui-choose
  "<mouse-1>" #'mevedel-ask-ui-choose
  "c" #'mevedel-ask-ui-custom
  "C-v" #'mevedel-ask-ui-page-down
  "M-v" #'mevedel-ask-ui-page-up
  "C-c C-c" #'mevedel-ask-ui-submit
  "q" #'mevedel-ask-ui-cancel
  "C-g" #'mevedel-ask-ui-cancel
  "C-c C-k" #'mevedel-ask-ui-abort
  "?" #'mevedel-ask-ui-help
  "1" #'mevedel-ask-ui-focus-option "2" #'mevedel-ask-ui-focus-option
  "3" #'mevedel-ask-ui-focus-option "4" #'mevedel-ask-ui-focus-option
  "5" #'mevedel-ask-ui-focus-option "6" #'mevedel-ask-ui-focus-option
  "7" #'mevedel-ask-ui-focus-option "8" #'mevedel-ask-ui-focus-option
  "9" #'mevedel-ask-ui-focus-option)

(defun mevedel-ask-ui-open (chat questions &rest keys)
  "Show QUESTIONS to the user in CHAT's view; return the interaction.
QUESTIONS are checked question plists.  KEYS are passed to
`mevedel-interaction-open' (:owner, :request, :on-settle).  The
outcome is (submitted . ANSWERS), `cancelled' or `aborted'; ANSWERS
is a list of (QUESTION . LABELS), LABELS nil for no preference."
  (let* ((form (mevedel-ask-ui-form-create questions))
         (interaction
          (apply #'mevedel-interaction-open chat
                 :kind 'ask
                 :title (format "Ask · %d question%s" (length questions)
                                (if (cdr questions) "s" ""))
                 :render #'mevedel-ask-ui--render
                 :keymap mevedel-ask-ui-map
                 :data form
                 :on-settle (let ((on-settle (plist-get keys :on-settle)))
                              (lambda (interaction outcome)
                                (setq mevedel-ask-ui--forms (delq interaction mevedel-ask-ui--forms))
                                (when on-settle (funcall on-settle interaction outcome))))
                 (cl-loop for (key value) on keys by #'cddr
                          unless (eq key :on-settle) append (list key value)))))
    (push interaction mevedel-ask-ui--forms)
    (mevedel-ask-ui--goto interaction (list 'question 0))
    interaction))

(defun mevedel-ask-ui--here ()
  "Return the interaction and form at point, or signal a user error."
  (let ((interaction (mevedel-interaction-at)))
    (unless (and interaction (eq (mevedel-interaction-kind interaction) 'ask))
      (user-error "No questionnaire here"))
    (cons interaction (mevedel-interaction-data interaction))))

(defun mevedel-ask-ui--entry-at (&optional position)
  "Return the form entry at POSITION (default point), or nil."
  (get-text-property (or position (point)) 'mevedel-ask-entry))

(defun mevedel-ask-ui--entry-start (interaction entry)
  "Return the start of ENTRY (compared with `equal') in INTERACTION, or nil."
  (let* ((overlay (mevedel-interaction-overlay interaction))
         (position (overlay-start overlay))
         (end (overlay-end overlay))
         (found nil))
    (with-current-buffer (overlay-buffer overlay)
      (while (and (not found) position (< position end))
        (if (equal (get-text-property position 'mevedel-ask-entry) entry)
            (setq found position)
          (setq position (next-single-property-change position 'mevedel-ask-entry nil end)))))
    found))

(defun mevedel-ask-ui--goto (interaction entry)
  "Move point to ENTRY of INTERACTION where point is in INTERACTION.
That is the buffer's point and the points of the windows showing it;
a point elsewhere (the user typing in the composer) stays.  Return
ENTRY's start, or nil when it is not drawn."
  (when-let* ((overlay (mevedel-interaction-overlay interaction))
              (buffer (overlay-buffer overlay))
              (start (mevedel-ask-ui--entry-start interaction entry)))
    (with-current-buffer buffer
      (when (eq (mevedel-interaction-at) interaction)
        (goto-char start))
      (dolist (window (get-buffer-window-list buffer nil t))
        (when (eq (mevedel-interaction-at (window-point window)) interaction)
          (set-window-point window start))))
    start))

(defun mevedel-ask-ui--redraw (interaction entry)
  "Redraw INTERACTION's form in place and put point on ENTRY."
  (mevedel-interaction-redraw interaction)
  (or (mevedel-ask-ui--goto interaction entry)
      (mevedel-ask-ui--goto interaction (list 'question
                                              (min (mevedel-ask-ui-form-open
                                                    (mevedel-interaction-data interaction))
                                                   (1- (mevedel-ask-ui--count
                                                        (mevedel-interaction-data interaction))))))))

;;;; Moving

(defun mevedel-ask-ui--step (delta)
  "Move point to the entry DELTA (1 or -1) entries away, without redrawing."
  (pcase-let* ((`(,interaction . ,form) (mevedel-ask-ui--here))
               (overlay (mevedel-interaction-overlay interaction))
               (start (overlay-start overlay))
               (end (overlay-end overlay))
               (position (point))
               (current (mevedel-ask-ui--entry-at))
               (target nil))
    (if (> delta 0)
        (let ((p position))
          (while (and (not target) (< p end))
            (setq p (next-single-property-change p 'mevedel-ask-entry nil end))
            (when (and (< p end) (mevedel-ask-ui--entry-at p)
                       (not (eq (mevedel-ask-ui--entry-at p) current)))
              (setq target p))))
      ;; From the start of the current entry's run, back run by run.
      (let ((p (if current
                   (previous-single-property-change (1+ position) 'mevedel-ask-entry nil start)
                 position)))
        (while (and (not target) (> p start))
          (setq p (previous-single-property-change p 'mevedel-ask-entry nil start))
          (when (mevedel-ask-ui--entry-at p)
            (setq target p)))))
    (when target
      (goto-char target)
      (mevedel-ask-ui--visit interaction form (mevedel-ask-ui--entry-at)))))

(defun mevedel-ask-ui--visit (interaction form entry)
  "Show in FORM's sample panel the sample of ENTRY, if it is a sample option.
Only the panel's lines in INTERACTION are drawn again, at the same height."
  (pcase entry
    (`(option ,i ,j)
     (when (and (plist-get (aref (plist-get (mevedel-ask-ui--question form i) :options) j) :sample)
                (not (eql (aref (mevedel-ask-ui-form-shown form) i) j)))
       (aset (mevedel-ask-ui-form-shown form) i j)
       (aset (mevedel-ask-ui-form-scroll form) i 0)
       (mevedel-ask-ui--redraw-panel interaction form i)))))

(defun mevedel-ask-ui--redraw-panel (interaction form i)
  "Draw the sample panel of question I of FORM in INTERACTION again."
  (let* ((overlay (mevedel-interaction-overlay interaction))
         (start (text-property-any (overlay-start overlay) (overlay-end overlay)
                                   'mevedel-ask-panel t)))
    (when start
      (let ((end (or (text-property-not-all start (overlay-end overlay) 'mevedel-ask-panel t)
                     (overlay-end overlay)))
            (inhibit-read-only t)
            (point (point)))
        (save-excursion
          (goto-char start)
          (delete-region start end)
          (insert (propertize (mapconcat #'mevedel-ask-ui--line
                                         (mevedel-ask-ui--panel-lines
                                          form i (mevedel-ask-ui-form-width form))
                                         "")
                              'read-only t 'mevedel-live t)))
        (goto-char point)))))

(defun mevedel-ask-ui-next-entry ()
  "Move to the next entry of the questionnaire."
  (interactive)
  (mevedel-ask-ui--step 1))

(defun mevedel-ask-ui-previous-entry ()
  "Move to the previous entry of the questionnaire."
  (interactive)
  (mevedel-ask-ui--step -1))

(defun mevedel-ask-ui--open-question (interaction form open)
  "Open question OPEN of FORM in INTERACTION and move point there.
OPEN equal to the number of questions means Submit."
  (setf (mevedel-ask-ui-form-open form) open)
  (if (>= open (mevedel-ask-ui--count form))
      (mevedel-ask-ui--redraw interaction (list 'submit))
    (let ((chosen (car (plist-get (mevedel-ask-ui--answer form open) :chosen))))
      (mevedel-ask-ui--redraw interaction (if chosen (list 'option open chosen)
                                            (list 'question open))))))

(defun mevedel-ask-ui-next-question ()
  "Open the next question; after the last one, go to Submit."
  (interactive)
  (pcase-let ((`(,interaction . ,form) (mevedel-ask-ui--here)))
    (mevedel-ask-ui--open-question interaction form
                                   (min (1+ (mevedel-ask-ui-form-open form))
                                        (mevedel-ask-ui--count form)))))

(defun mevedel-ask-ui-previous-question ()
  "Open the previous question."
  (interactive)
  (pcase-let ((`(,interaction . ,form) (mevedel-ask-ui--here)))
    (mevedel-ask-ui--open-question interaction form
                                   (max 0 (1- (mevedel-ask-ui-form-open form))))))

(defun mevedel-ask-ui-focus-option ()
  "Move to the option of the open question that the digit typed names."
  (interactive)
  (pcase-let* ((`(,interaction . ,form) (mevedel-ask-ui--here))
               (open (mevedel-ask-ui-form-open form))
               (j (- (event-basic-type last-command-event) ?1)))
    (when (and (< open (mevedel-ask-ui--count form))
               (< -1 j (length (plist-get (mevedel-ask-ui--question form open) :options))))
      (mevedel-ask-ui--goto interaction (list 'option open j))
      (mevedel-ask-ui--visit interaction form (list 'option open j)))))

;;;; Answering

(defun mevedel-ask-ui--next-unanswered (form after)
  "Return the first unanswered question of FORM after AFTER, else Submit."
  (or (cl-loop for k from 1 below (mevedel-ask-ui--count form)
               for i = (% (+ after k) (mevedel-ask-ui--count form))
               unless (mevedel-ask-ui--answered-p form i) return i)
      (mevedel-ask-ui--count form)))

(defun mevedel-ask-ui-choose (&optional event)
  "Choose the entry at point (or at mouse EVENT)."
  (interactive (list last-nonmenu-event))
  (when (mouse-event-p event) (mouse-set-point event))
  (pcase-let ((`(,interaction . ,form) (mevedel-ask-ui--here)))
    (pcase (mevedel-ask-ui--entry-at)
      (`(question ,i)
       (unless (= i (mevedel-ask-ui-form-open form))
         (mevedel-ask-ui--open-question interaction form i)))
      (`(option ,i ,j)
       (let* ((answer (mevedel-ask-ui--answer form i))
              (chosen (plist-get answer :chosen)))
         (if (plist-get (mevedel-ask-ui--question form i) :multi)
             (progn
               (aset (mevedel-ask-ui-form-answers form) i
                     (plist-put (copy-sequence answer) :chosen
                                (if (memq j chosen) (remq j chosen) (cons j chosen))))
               (mevedel-ask-ui--redraw interaction (list 'option i j)))
           (aset (mevedel-ask-ui-form-answers form) i (list :chosen (list j)))
           (mevedel-ask-ui--open-question interaction form
                                          (mevedel-ask-ui--next-unanswered form i)))))
      (`(custom ,_) (mevedel-ask-ui-custom))
      (`(submit) (mevedel-ask-ui-submit)))))

(defun mevedel-ask-ui-custom ()
  "Edit the custom answer of the open question (or the question at point)."
  (interactive)
  (pcase-let* ((`(,interaction . ,form) (mevedel-ask-ui--here))
               (i (pcase (mevedel-ask-ui--entry-at)
                    (`(question ,i) i) (`(option ,i ,_) i) (`(custom ,i) i)
                    (_ (mevedel-ask-ui-form-open form)))))
    (when (< i (mevedel-ask-ui--count form))
      (let* ((question (mevedel-ask-ui--question form i))
             (answer (mevedel-ask-ui--answer form i))
             (text (string-trim (read-string (format "%s (empty clears): "
                                                     (plist-get question :header))
                                             (plist-get answer :custom))))
             (custom (unless (string-empty-p text) text)))
        (aset (mevedel-ask-ui-form-answers form) i
              (if (plist-get question :multi)
                  (list :chosen (plist-get answer :chosen) :custom custom)
                (if custom (list :custom custom) (list :chosen (plist-get answer :chosen)))))
        (if (and custom (not (plist-get question :multi)))
            (mevedel-ask-ui--open-question interaction form
                                           (mevedel-ask-ui--next-unanswered form i))
          (setf (mevedel-ask-ui-form-open form) i)
          (mevedel-ask-ui--redraw interaction (list 'custom i)))))))

(defun mevedel-ask-ui--page (direction)
  "Page the open question's sample panel by DIRECTION (1 or -1), else scroll."
  (pcase-let* ((`(,interaction . ,form) (mevedel-ask-ui--here))
               (i (mevedel-ask-ui-form-open form)))
    (if (not (and (< i (mevedel-ask-ui--count form))
                  (> (mevedel-ask-ui--panel-height form i (mevedel-ask-ui-form-width form)) 0)
                  (memq (car (mevedel-ask-ui--entry-at)) '(question option custom))
                  (eql (cadr (mevedel-ask-ui--entry-at)) i)))
        (if (> direction 0) (scroll-up-command) (scroll-down-command))
      (let* ((height (mevedel-ask-ui--panel-height form i (mevedel-ask-ui-form-width form)))
             (option (aref (plist-get (mevedel-ask-ui--question form i) :options)
                           (aref (mevedel-ask-ui-form-shown form) i)))
             (rows (length (mevedel-ask-ui--sample-rows
                            (plist-get option :sample)
                            (mevedel-ask-ui--sample-width (mevedel-ask-ui-form-width form)))))
             (scroll (aref (mevedel-ask-ui-form-scroll form) i)))
        (aset (mevedel-ask-ui-form-scroll form) i
              (max 0 (min (max 0 (- rows height)) (+ scroll (* direction height)))))
        (mevedel-ask-ui--redraw-panel interaction form i)))))

(defun mevedel-ask-ui-page-down ()
  "Show the next page of the open question's sample, else scroll the window."
  (interactive)
  (mevedel-ask-ui--page 1))

(defun mevedel-ask-ui-page-up ()
  "Show the previous page of the open question's sample, else scroll back."
  (interactive)
  (mevedel-ask-ui--page -1))

(defun mevedel-ask-ui-submit ()
  "Submit the questionnaire; unanswered questions report no preference."
  (interactive)
  (pcase-let ((`(,interaction . ,form) (mevedel-ask-ui--here)))
    (mevedel-interaction-settle
     interaction
     (cons 'submitted
           (cl-loop for i below (mevedel-ask-ui--count form)
                    collect (cons (mevedel-ask-ui--question form i)
                                  (mevedel-ask-ui-answer-labels form i)))))))

(defun mevedel-ask-ui-cancel ()
  "Cancel the questionnaire only, and let the run go on."
  (interactive)
  (mevedel-interaction-settle (car (mevedel-ask-ui--here)) 'cancelled))

(defun mevedel-ask-ui-abort ()
  "Cancel the questionnaire and abort the run."
  (interactive)
  (mevedel-interaction-settle (car (mevedel-ask-ui--here)) 'aborted))

;;;; Re-layout

(defun mevedel-ask-ui--relayout (&optional _frame)
  "Lay open questionnaires out again whose narrowest window changed width.
A `window-size-change-functions' and `window-buffer-change-functions'
member."
  (dolist (interaction mevedel-ask-ui--forms)
    (let ((form (mevedel-interaction-data interaction)))
      (when (and (mevedel-interaction-start interaction)
                 (not (eql (mevedel-ask-ui--width interaction) (mevedel-ask-ui-form-width form))))
        (with-current-buffer (overlay-buffer (mevedel-interaction-overlay interaction))
          (let ((entry (mevedel-ask-ui--entry-at
                        (let ((p (point)))
                          (if (eq (mevedel-interaction-at p) interaction) p
                            (mevedel-interaction-start interaction))))))
            (mevedel-ask-ui--redraw interaction (or entry (list 'question 0)))))))))

(add-hook 'window-size-change-functions #'mevedel-ask-ui--relayout)
;; A view shown in a window of another width counts as a change too.
(add-hook 'window-buffer-change-functions #'mevedel-ask-ui--relayout)

(provide 'mevedel-ask-ui)
;;; mevedel-ask-ui.el ends here
