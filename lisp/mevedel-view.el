;;; mevedel-view.el --- The session view: transcript, tool rows, composer  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A chat's view buffer shows, top to bottom:
;;
;;   transcript   read-only; rendered from the chat's gptel data buffer
;;   live zone    calls in flight (spinner), waiting line, the parts of
;;                `mevedel-view-live-functions' (the task fragment),
;;                then open interactions (permission cards, patch
;;                reviews, Ask, the plan card, hook approval;
;;                mevedel-interaction.el), whose text redraws leave alone
;;   panel        background work: yielded commands, monitors, and
;;                child agents running or waiting for a slot (drawn
;;                by mevedel-panel.el)
;;   separator    key hints
;;   composer     where the user types (RET newline, C-c C-c send;
;;                commands such as /ps and /stop, which files built on
;;                the view register, run here instead of reaching the
;;                model)
;;
;; The transcript is always re-derived from the data buffer: user text,
;; response text, tool rows (through the renderers of
;; mevedel-tool-render.el) and notices.  The only state the view keeps
;; is disposable: which rows the user expanded or collapsed, markers,
;; an index of what is drawn where, the spinner.
;;
;; What each change costs.  Reading the data is one pass over its
;; property changes, each scan bounded by the part being read.  A full
;; redraw (`mevedel-view-rerender') draws the last turns, those that
;; fill `mevedel-view--first-paint-lines', and returns; a timer draws
;; the turns before them a few at a time, oldest first, above a line
;; saying so (an old transcript too long to delete at once is hidden
;; and deleted by the same timer).  After that, nothing is drawn again
;; but the *tail*: the last block drawn and whatever the data gained
;; after it.  Streamed text is appended as it arrives; when tool results
;; arrive, the turn ends or a sample is retried, the tail is drawn again
;; from the data (the streamed text replaced by its rendering, the new
;; rows added), so a settled call costs its own row and the text
;; streamed since the last one, not its turn.  A row is drawn again
;; alone when it is toggled or its call's render-data or progress
;; changes.  Collapsed rows get their renderer's summary only
;; (`mevedel-tool-render-summary-only'); bodies are made on expanding.
;;
;; The index: each tool row's ID maps to the drawn turn holding it, a
;; marker where that turn's drawing starts and the chat's marker of
;; the turn in the data, so finding a row or its call searches one
;; turn.  There is one marker per turn, not per row: every marker
;; costs each insertion into its buffer.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'gptel)
(require 'mevedel-chat)
(require 'mevedel-remote)
(require 'mevedel-remote-exec)
(require 'mevedel-history)
(require 'mevedel-render-data)
(require 'mevedel-tool-render)
(require 'mevedel-locations)
(require 'mevedel-mentions)
(require 'mevedel-interaction)
(require 'mevedel-mailbox)
(require 'mevedel-markdown)
(require 'mevedel-plan)
(require 'mevedel-usage)

(declare-function mevedel-demo-attach "mevedel-demo" (chat &optional surface))

(defgroup mevedel-view nil
  "The session view."
  :group 'mevedel
  :prefix "mevedel-view-")

(defface mevedel-view-user '((t :inherit font-lock-keyword-face :weight bold))
  "Face of the user's messages.")

(defface mevedel-view-tool-header '((t :inherit font-lock-function-name-face))
  "Face of tool row headers.")

(defface mevedel-view-error '((t :inherit error :weight bold))
  "Face of the error marker of failed tool calls.")

(defface mevedel-view-warning '((t :inherit warning :weight bold))
  "Face of the warning marker of tool calls.")

(defface mevedel-view-success '((t :inherit success))
  "Face of the marker of successful tool calls.")

(defface mevedel-view-running '((t :inherit font-lock-constant-face))
  "Face of the spinner of running tool calls.")

(defface mevedel-view-notice '((t :inherit shadow :slant italic))
  "Face of notices such as errors and aborts.")

(defface mevedel-view-separator '((t :inherit shadow :overline t))
  "Face of the line between the transcript and the composer.")

(defface mevedel-view-prompt '((t :inherit minibuffer-prompt))
  "Face of the composer's prompt marker, where typing goes.")

(defface mevedel-view-card
  '((((class color) (background light)) :background "grey94" :extend t)
    (((class color) (background dark)) :background "grey16" :extend t)
    (t :extend t))
  "Face of permission cards: a quiet background that sets the card apart.
Not `highlight', which means the mouse is over something.")

(defface mevedel-view-card-risky '((t :inherit warning))
  "Face of the commands of a card's command that change files, or may.")

(defface mevedel-view-card-dangerous '((t :inherit error))
  "Face of the commands of a card's command the analysis calls dangerous.")

(defface mevedel-view-breadcrumb '((t :inherit shadow))
  "Face of the line saying how a background command ended.")

(defconst mevedel-view--spinner-frames ["⠋" "⠙" "⠹" "⠸" "⠼" "⠴" "⠦" "⠧" "⠇" "⠏"]
  "Frames of the spinner of live rows.")

(defconst mevedel-view--status-glyphs
  '((success "✓" mevedel-view-success)
    (warning "!" mevedel-view-warning)
    (error "×" mevedel-view-error)
    (denied "×" mevedel-view-error)
    (cancelled "⊘" mevedel-view-warning))
  "Marker and face of a row for each final status.")

;;;; Buffer-local state

(defvar-local mevedel-view--chat nil "The chat shown in this view.")
(defvar-local mevedel-view--transcript-end nil "End of the transcript.")
(defvar-local mevedel-view--panel nil
  "Start of the background work panel, between the live zone and the separator.
Text inserted at it belongs to the live zone before it, so it
advances; whoever draws the panel puts it back at the panel's start.")
(defvar-local mevedel-view--separator nil "Start of the separator line.")
(defvar-local mevedel-view--composer nil "Start of the composer.")
(defvar-local mevedel-view--tail nil
  "Start of the transcript's last block, which the next turn event draws again.")
(defvar-local mevedel-view--tail-data nil
  "Marker in the data buffer where the data of the transcript's last block starts.")
(defvar-local mevedel-view--parts nil
  "Hash table: tool-use ID to the drawn turn that holds its row.
A drawn turn is (DATA-START . VIEW-START): where it starts in the data
\(a position or the chat's marker of the turn) and a marker where its
drawing starts in the view.")
(defvar-local mevedel-view--part nil
  "The drawn turn that blocks are drawn into: the last one, or a pending one.")
(defvar-local mevedel-view--part-starts nil "The VIEW-START markers of the drawn turns.")
(defvar-local mevedel-view--pending nil
  "The turns not drawn yet, oldest first: a list of (START . END) in the data.
START and END are positions or markers of the chat's turns.")
(defvar-local mevedel-view--fill nil
  "Where the next pending turn is drawn (the line telling of them), or nil.")
(defvar-local mevedel-view--fill-timer nil "Timer drawing the pending turns.")
(defvar-local mevedel-view--stale nil
  "Overlay hiding the old transcript a full redraw left to the timer, or nil.")
(defvar-local mevedel-view--expanded nil "Hash table: tool-use ID to t (expanded) or `collapsed'.")
(defvar-local mevedel-view--history-index nil "Position in the input history, or nil.")
(defvar-local mevedel-view--draft nil "Composer text saved while browsing history.")
(defvar-local mevedel-view--spinner-timer nil "Timer animating live rows.")
(defvar-local mevedel-view--spinner-frame 0 "Current spinner frame.")
(defvar-local mevedel-view--last-kind nil "Kind of the last transcript block.")
(defvar-local mevedel-view--observer nil "This view's observer of its chat.")
(defvar-local mevedel-view--progress-ids nil "Calls whose progress waits to be drawn.")
(defvar-local mevedel-view--progress-timer nil "The pending progress redraw, or nil.")
(defvar-local mevedel-view--problem nil
  "Why the last prompt could not be sent, shown in the live zone, or nil.")
(defvar-local mevedel-view--stream nil
  "The response being streamed: (START RAW FENCE), or nil.
START is a marker where the drawing of RAW starts, RAW the text
streamed since its last settled line (`mevedel-markdown-settled') and
FENCE the regexp of the line closing the code block RAW opens, if any.")
(defvar-local mevedel-view--code-queue nil
  "Drawn text whose code blocks wait to be fontified: (START . END) markers.")
(defvar-local mevedel-view--code-timer nil "Timer fontifying the queued code blocks.")
(defvar-local mevedel-view--queued-overlay nil
  "Overlay showing the queued messages above the separator, or nil.
It advances over text inserted at its place: the answer streamed into
an empty live zone and the panel go before it, so the queue is read
below them, next to the composer.")

(defvar-local mevedel-view--answer nil
  "Marker where the answer being streamed starts, or nil between turns.
`mevedel-view--follow' keeps it in sight while the answer grows.")
(defvar-local mevedel-view--card-focused nil
  "Non-nil while point is on a card because a card took it from the composer.")

;;;; Modes and keys

(defvar-keymap mevedel-view-mode-map
  :doc "Keys of the session view."
  "C-c C-c" #'mevedel-view-send
  "C-c C-k" #'mevedel-view-abort
  "C-c C-l" #'mevedel-view-rerender
  "C-c C-p" #'mevedel-view-set-permission-mode
  "C-c C-u" #'mevedel-view-unqueue
  "C-c C-m" #'mevedel-view-set-model
  "M-p" #'mevedel-view-history-previous
  "M-n" #'mevedel-view-history-next
  ;; A row's own TAB (expand) wins on the row.
  "TAB" #'completion-at-point
  "<remap> <self-insert-command>" #'mevedel-view-self-insert)

(defvar-keymap mevedel-view-row-map
  :doc "Keys on a tool row's header."
  "TAB" #'mevedel-view-toggle-row
  "RET" #'mevedel-view-visit-row
  "<mouse-1>" #'mevedel-view-toggle-row)

(defvar-keymap mevedel-view-breadcrumb-map
  :doc "Keys on a row's breadcrumb line."
  "RET" #'mevedel-view-show-result
  "<mouse-1>" #'mevedel-view-show-result)

(defvar-keymap mevedel-view-card-map
  :doc "Keys on a permission card."
  "y" #'mevedel-view-allow-once
  "a" #'mevedel-view-allow-session
  "n" #'mevedel-view-deny
  "t" #'mevedel-view-deny-and-tell
  "TAB" #'mevedel-view-card-toggle-command)

(define-derived-mode mevedel-view-mode fundamental-mode "mevedel"
  "Major mode of mevedel session views.
The transcript is read-only; type in the composer at the bottom and
send with \\[mevedel-view-send].  A character typed in the transcript
\(outside a card) goes to the end of the composer.  A composer line
starting with / is a command (/help lists them); start with a space
to send such a line to the model.

\\{mevedel-view-mode-map}
On a tool row:
\\{mevedel-view-row-map}
On a row's breadcrumb line:
\\{mevedel-view-breadcrumb-map}
On a permission card:
\\{mevedel-view-card-map}"
  (setq-local truncate-lines nil)
  (setq-local word-wrap t)
  (setq-local buffer-undo-list t)
  (setq-local header-line-format '(:eval (mevedel-view--header-line)))
  (setq-local next-error-function #'mevedel-locations-next-error)
  ;; Copied text is the text as read: no faces, buttons or keymaps.
  (setq-local filter-buffer-substring-function #'mevedel-view--plain-substring)
  (add-hook 'completion-at-point-functions #'mevedel-view--slash-capf nil t)
  (add-hook 'before-change-functions #'mevedel-view--before-change nil t)
  (add-hook 'after-change-functions #'mevedel-view--after-change nil t))

;;;; Undo is the composer's

(defvar-local mevedel-view--undo-before nil
  "(UNDO-LIST . COMPOSER-START) before a change above the composer, or nil.")

(defun mevedel-view--before-change (beg _end)
  "Note the undo list before a change from BEG, when it is above the composer.
The view draws the transcript, the live zone and the panel above the
composer while the user types; `undo' there must undo only the
composer's editing (`mevedel-view--after-change')."
  (setq mevedel-view--undo-before
        (and (listp buffer-undo-list) mevedel-view--composer
             (< beg mevedel-view--composer)
             (cons buffer-undo-list (marker-position mevedel-view--composer)))))

(defun mevedel-view--after-change (beg &rest _)
  "Forget the undo records of a change above the composer.
The composer's own records move with its text: its positions changed
by the size of the change.  A composer emptied (a change at BEG within
it) lets the background turns its draft held start
\(`mevedel-view--draft-holds')."
  (when (and mevedel-view--chat mevedel-view--composer
             (>= beg mevedel-view--composer)
             (string-blank-p (mevedel-view--composer-text)))
    (mevedel-mailbox-hold-released mevedel-view--chat))
  (when-let* ((before mevedel-view--undo-before))
    (setq mevedel-view--undo-before nil
          buffer-undo-list (car before))
    (let ((delta (- mevedel-view--composer (cdr before))))
      (unless (zerop delta)
        (mevedel-view--shift-undo buffer-undo-list (cdr before) delta)))))

(defun mevedel-view--shift-undo (list from delta)
  "Move the positions from FROM on in the undo LIST by DELTA, in place.
In place, so that an `undo' going on (its `pending-undo-list' shares
the records) moves too."
  (let ((moved (lambda (pos) (if (>= pos from) (+ pos delta) pos))))
    (while (consp list)
      (let ((entry (car list)))
        (pcase entry
          ((pred integerp) (setcar list (funcall moved entry)))
          (`(,(and (pred integerp) beg) . ,(and (pred integerp) end))
           (setcar entry (funcall moved beg))
           (setcdr entry (funcall moved end)))
          (`(,(pred stringp) . ,(and (pred integerp) pos))
           (setcdr entry (if (< pos 0) (- (funcall moved (- pos))) (funcall moved pos))))
          (`(nil ,_ ,_ ,(pred integerp) . ,(pred integerp))
           (let ((cell (nthcdr 3 entry)))
             (setcar cell (funcall moved (car cell)))
             (setcdr cell (funcall moved (cdr cell)))))
          (`(apply ,(pred integerp) ,(pred integerp) ,(pred integerp) . ,_)
           (let ((cell (nthcdr 2 entry)))
             (setcar cell (funcall moved (car cell)))
             (setcar (cdr cell) (funcall moved (cadr cell)))))))
      (setq list (cdr list)))))

(defun mevedel-view-self-insert (n)
  "Insert the character typed N times; from the transcript, at the composer's end.
As in ERC and eshell, typing never meets \"Text is read-only\": outside
the composer and its cards (whose keymaps and fields are their own),
point moves to the end of the composer first."
  (interactive "p")
  (when-let* ((agent (mevedel-chat-agent mevedel-view--chat)))
    (user-error "This view of %s only looks; its parent reaches it with SendMessage" agent))
  (when (and mevedel-view--composer (< (point) mevedel-view--composer)
             (not (mevedel-interaction-at)))
    (goto-char (point-max)))
  (self-insert-command n))

(defun mevedel-view--plain-substring (start end &optional delete)
  "Return the text from START to END without its properties; DELETE it if non-nil.
The view's `filter-buffer-substring-function'."
  (let ((text (buffer-substring--filter start end delete)))
    (set-text-properties 0 (length text) nil text)
    text))

;;;; Creating the view

(defvar mevedel-view-header-functions nil
  "Functions of a chat returning a text for the view's header line, or nil.
They run at every redisplay of the header, so they must be cheap.")

(defvar mevedel-view-open-functions nil
  "Abnormal hook run with each new view buffer, once it is drawn.")

(defun mevedel-view-buffer (chat)
  "Return CHAT's view buffer, creating it if needed."
  (let* ((name (format "*mevedel: %s*" (mevedel-chat-name chat)))
         (buffer (get-buffer name)))
    (if (and buffer (eq (buffer-local-value 'mevedel-view--chat buffer) chat))
        buffer
      (mevedel-view--setup (generate-new-buffer name) chat))))

(defun mevedel-view-rebind (view chat)
  "Make VIEW, a view buffer, show CHAT instead of its chat; return VIEW.
What it showed goes; the window keeps the buffer (`/clear')."
  (with-current-buffer view
    (mevedel-view--killed)
    (remove-hook 'kill-buffer-hook #'mevedel-view--killed t)
    (let ((inhibit-read-only t))
      (delete-all-overlays)
      (erase-buffer)))
  (mevedel-view--setup view chat))

(defun mevedel-view--setup (buffer chat)
  "Make the empty BUFFER the view of CHAT, drawn; return BUFFER."
  (with-current-buffer buffer
    (mevedel-view-mode)
    (setq default-directory (mevedel-chat-root chat))
    (setq mevedel-view--chat chat
          mevedel-view--expanded (make-hash-table :test #'equal)
          mevedel-view--parts (make-hash-table :test #'equal))
    (let ((inhibit-read-only t))
      (insert (mevedel-view--separator-text))
      (setq mevedel-view--composer (point-marker))
      (setq mevedel-view--transcript-end (point-min-marker))
      (setq mevedel-view--tail (point-min-marker))
      (setq mevedel-view--tail-data (with-current-buffer (mevedel-chat-data-buffer chat)
                                      (point-min-marker)))
      (setq mevedel-view--panel (copy-marker (point-min) t))
      (setq mevedel-view--separator (copy-marker (point-min) t)))
    (setq buffer-undo-list nil)
    (setq mevedel-view--observer
          (lambda (event chat &rest args)
            (when (buffer-live-p buffer)
              (with-current-buffer buffer
                (mevedel-view--observe event chat args)))))
    (mevedel-chat-observe chat mevedel-view--observer)
    ;; A child agent's view only looks: its cards are the root's.
    (unless (mevedel-chat-agent chat)
      (mevedel-chat-set-prompter chat #'mevedel-view--prompt))
    (add-hook 'kill-buffer-hook #'mevedel-view--killed nil t)
    (add-hook 'window-size-change-functions #'mevedel-view--fit-separator nil t)
    (mevedel-view-rerender)
    (run-hook-with-args 'mevedel-view-open-functions buffer))
  buffer)

(defun mevedel-view--killed ()
  "Detach the chat from this view as it is killed."
  (when-let* ((chat mevedel-view--chat))
    (mevedel-chat-unobserve chat mevedel-view--observer)
    (when (eq (mevedel-chat-prompter chat) #'mevedel-view--prompt)
      (mevedel-chat-set-prompter chat nil))
    ;; A read-only chat lives only in its view.
    (when (mevedel-chat-read-only chat)
      (kill-buffer (mevedel-chat-data-buffer chat))))
  (when (timerp mevedel-view--progress-timer)
    (cancel-timer mevedel-view--progress-timer))
  (when (timerp mevedel-view--code-timer)
    (cancel-timer mevedel-view--code-timer))
  (mevedel-view--forget)
  (mevedel-view--stop-spinner))

(defvar mevedel-view-slash-commands nil
  "Commands the composer runs itself: a list of (NAME FUNCTION HELP COMPLETE).
A composer text of one line starting with /NAME calls FUNCTION with the
chat and the rest of the line, even while the model is working; the
model never sees it.  HELP annotates NAME's completion; COMPLETE, when
non-nil, is a function of the chat returning the candidates for the
command's arguments.  Files built on the view (mevedel-ps.el: /ps and
/stop) add their commands with `mevedel-view-register-slash-command'
when they are loaded.")

(defvar mevedel-view-slash-command-functions nil
  "Functions offering commands of one chat's own, besides the global ones.
Each is called with the chat and the name typed after the slash (a
prefix while completing, the whole name when the command runs) and
returns entries (NAME FUNCTION HELP COMPLETE) as in
`mevedel-view-slash-commands', at least those starting with that name.
mevedel-mcp-composer.el offers the prompts of the session's MCP
servers this way.")

(defun mevedel-view--slash-entries (chat name)
  "Return the composer commands of CHAT whose names may start with NAME.
The global ones, then those of `mevedel-view-slash-command-functions'."
  (append mevedel-view-slash-commands
          (and chat (cl-loop for function in mevedel-view-slash-command-functions
                             append (funcall function chat name)))))

(defun mevedel-view-register-slash-command (name function help &optional complete)
  "Make /NAME a composer command calling FUNCTION, annotated with HELP.
COMPLETE completes its arguments; see `mevedel-view-slash-commands'.
Registering NAME again replaces its entry where it stands, so the
order the separator shows commands in stays the order of loading."
  (declare (indent 1))
  (setf (alist-get name mevedel-view-slash-commands nil nil #'equal)
        (list function help complete)))

(defun mevedel-view--separator-text (&optional width)
  "Return the read-only line between the live zone and the composer.
Its hints fit in WIDTH columns (default the widest window showing the
view, else 80): the most useful come first, and /help always shows.
A child agent's view has no composer: its line says so, and nothing
can be typed after it."
  (if-let* ((agent (and mevedel-view--chat (mevedel-chat-agent mevedel-view--chat))))
      (propertize (concat "\n── " agent " only looks here: no composer; its parent reaches it"
                          " with SendMessage ──\n")
                  'face 'mevedel-view-separator 'read-only t 'front-sticky t
                  'mevedel-separator t)
    (mevedel-view--hint-line width)))

(defun mevedel-view--hint-line (width)
  "Return the separator line of a view with a composer, fit in WIDTH columns."
  (let* ((width (or width
                    (apply #'max 0 (mapcar #'window-body-width
                                           (get-buffer-window-list nil nil t)))))
         (width (if (< width 20) 80 width))
         (hints (append
                 (list (substitute-command-keys "\\<mevedel-view-mode-map>\\[mevedel-view-send] send")
                       (substitute-command-keys "\\<mevedel-view-mode-map>\\[mevedel-view-abort] abort")
                       (mevedel-view--menu-hint)
                       (substitute-command-keys "\\<mevedel-view-mode-map>\\[mevedel-view-history-previous]/\
\\[mevedel-view-history-next] history")
                       "TAB on a row: expand")
                 (and mevedel-view-slash-commands
                      (list (mapconcat (lambda (entry) (concat "/" (car entry)))
                                       (cons (assoc "help" mevedel-view-slash-commands)
                                             (remove (assoc "help" mevedel-view-slash-commands)
                                                     (reverse mevedel-view-slash-commands)))
                                       ", ")))))
         (line "──"))
    (dolist (hint hints)
      (let* ((next (concat line " " (if (equal line "──") "" "· ") hint))
             (commands (string-prefix-p "/" hint))
             ;; Room is kept for /help, which lists what does not fit.
             (room (- width 3 (if commands 0 (length " · /help")))))
        (cond ((<= (length next) room) (setq line next))
              (commands (setq line (concat line " · /help"))))))
    ;; The newline before the rule has no face: its overline would draw
    ;; a stray mark at the end of the line above.
    (propertize (concat "\n" (propertize line 'face 'mevedel-view-separator)
                        (propertize " ──" 'face 'mevedel-view-separator)
                        "\n" (propertize "› " 'face 'mevedel-view-prompt))
                'read-only t 'rear-nonsticky t 'front-sticky t 'mevedel-separator t)))

(defun mevedel-view--menu-hint ()
  "Return the separator's hint naming the keys of the menu, or nil without one.
The menu (mevedel-menu.el) binds them in the view's keymap; ? is the
only single key of the view outside rows and cards."
  (when-let* ((keys (where-is-internal 'mevedel-menu mevedel-view-mode-map)))
    (concat (mapconcat #'key-description keys "/")
            (and (eq (keymap-lookup mevedel-view-mode-map "?") 'mevedel-menu-or-insert) "/?")
            " menu")))

(defun mevedel-view--fit-separator (&optional _window)
  "Redraw the separator's hints for the view's current width.
A `window-size-change-functions' member, buffer-local to the view."
  (let ((text (mevedel-view--separator-text)))
    (unless (equal-including-properties
             text (buffer-substring mevedel-view--separator mevedel-view--composer))
      (let* ((inhibit-read-only t)
             (start (marker-position mevedel-view--separator))
             (panel-here (= mevedel-view--panel mevedel-view--separator))
             ;; Points in the composer keep their place in its text.
             (in-composer (lambda (pos) (and (>= pos mevedel-view--composer)
                                             (- pos mevedel-view--composer))))
             (offset (funcall in-composer (point)))
             (windows (delq nil (mapcar (lambda (window)
                                          (when-let* ((o (funcall in-composer
                                                                  (window-point window))))
                                            (cons window o)))
                                        (get-buffer-window-list nil nil t)))))
        (save-excursion
          (delete-region start mevedel-view--composer)
          (goto-char start)
          (insert text)
          ;; The markers that advance on insertion stay before the line.
          (set-marker mevedel-view--separator start)
          (when panel-here (set-marker mevedel-view--panel start))
          (set-marker mevedel-view--composer (point)))
        (when offset (goto-char (+ mevedel-view--composer offset)))
        (when mevedel-view--queued-overlay (mevedel-view--show-queued))
        (pcase-dolist (`(,window . ,o) windows)
          (set-window-point window (+ mevedel-view--composer o)))))))

(defun mevedel-view--header-line ()
  "Return the header line of the view, escaped for `format-mode-line'.
The permission mode comes first, so a narrow window never cuts it; the
provider, or backend and model, are those the next request uses."
  (string-replace
   "%" "%%"
   (if-let* ((chat mevedel-view--chat))
       (let ((who (mevedel-view--provider-name chat)))
         (concat " mevedel · " (mevedel-chat-name chat)
                 " · " (if (eq (mevedel-chat-permission-mode chat) 'plan)
                           (propertize "PLAN mode (read-only)" 'face 'warning)
                         (format "permissions: %s" (mevedel-chat-permission-mode chat)))
                 " · " (if (mevedel-chat-demo chat) (propertize who 'face 'warning) who)
                 " · " (mevedel-view--status-text chat)
                 " · " (mevedel-view--usage-text chat)
                 (mapconcat (lambda (text) (concat " · " text))
                            (delq nil (mapcar (lambda (f) (funcall f chat))
                                              mevedel-view-header-functions))
                            "")))
     " mevedel")))

(defvar-keymap mevedel-view--lease-map
  :doc "Keys of the header's wait for a remote workspace's lease."
  "<header-line> <mouse-1>" #'mevedel-view-lease-stop-waiting)

(defun mevedel-view-lease-stop-waiting ()
  "Stop waiting for this view's remote workspace's lease; open it read-only."
  (interactive)
  (if-let* ((chat mevedel-view--chat))
      (mevedel-remote-lease-stop-waiting (mevedel-session-workspace (mevedel-chat-session chat)))
    (call-interactively #'mevedel-remote-lease-stop-waiting)))

(defun mevedel-view--lease-header (chat)
  "Return the header's note on another session's lease of CHAT's workspace.
A `mevedel-view-header-functions' member: the user sees who holds it
from the moment the view opens (`mevedel-view--lease-look'), and while
CHAT waits for it a click stops waiting, read-only."
  (when-let* ((session (mevedel-chat-session chat))
              (workspace (mevedel-session-workspace session)))
    (if-let* ((text (mevedel-remote-lease-wait-text workspace)))
        (propertize text
                    'face 'warning 'mouse-face 'mode-line-highlight
                    'help-echo "mouse-1: stop waiting and open the workspace read-only"
                    'local-map mevedel-view--lease-map)
      (when-let* ((text (mevedel-remote-lease-seen-text workspace)))
        (propertize text 'face 'warning
                    'help-echo (concat "Another session writes this workspace: a write here "
                                       "does as `mevedel-remote-lease-policy' says"))))))

(add-hook 'mevedel-view-header-functions #'mevedel-view--lease-header)

(defun mevedel-view--lease-look (buffer)
  "Tell whether another session has the lease of BUFFER's remote workspace.
A `mevedel-view-open-functions' member: the header and a message say
so once the view is up, before any write (`mevedel-remote-lease-look')."
  (when-let* ((chat (buffer-local-value 'mevedel-view--chat buffer))
              (session (mevedel-chat-session chat))
              ((mevedel-remote-p (mevedel-session-workspace session)))
              ((not (mevedel-chat-read-only chat))))
    (mevedel-remote-lease-look (mevedel-session-workspace session) (mevedel-session-id session))))

(add-hook 'mevedel-view-open-functions #'mevedel-view--lease-look)

(defun mevedel-view--remote-sandbox-header (chat)
  "Return the header's warning that CHAT's remote commands run unconfined, or nil.
A `mevedel-view-header-functions' member: under `best-effort', a host
without a sandbox runs them directly, and the user sees it here."
  (when-let* ((session (mevedel-chat-session chat)))
    (mevedel-remote-exec-header-text (mevedel-session-workspace session))))

(add-hook 'mevedel-view-header-functions #'mevedel-view--remote-sandbox-header)

(defun mevedel-view--tokens (n)
  "Return the token count N briefly: 950, 12.3k, 400k, 1.2M."
  (let ((short (lambda (value unit)
                 (concat (string-remove-suffix ".0" (format (if (>= value 100) "%.0f" "%.1f")
                                                            value))
                         unit))))
    (cond ((< n 1000) (number-to-string n))
          ((< n 999500) (funcall short (/ n 1000.0) "k"))
          (t (funcall short (/ n 1000000.0) "M")))))

(defun mevedel-view--usage-text (chat)
  "Return how full CHAT's context is, then what this turn and the session cost.
An estimate (no request reported its size yet) is marked with ≈.  The
turn's part (its cost, and the share of its input read from the
cache) shows once a request of it reported usage; /usage has the rest."
  (pcase-let ((`(,tokens ,window ,estimated) (mevedel-chat-context-usage chat))
              (turn (mevedel-usage-turn-records chat)))
    (concat "context "
            (if estimated "≈" "")
            (if window
                (format "%d%% of %s" (round (* 100.0 (/ (float tokens) window)))
                        (mevedel-view--tokens window))
              (format "%s tokens" (mevedel-view--tokens tokens)))
            (when turn
              (let ((share (mevedel-usage-cache-share (mevedel-usage-sum turn))))
                (concat " · turn " (mevedel-usage-format-cost turn)
                        (if share (format ", %d%% cached" (round (* 100 share))) ""))))
            (let ((usage (mevedel-usage-session chat)))
              (format " · session %s, %s in / %s out"
                      (mevedel-usage-format-totals chat)
                      (mevedel-view--tokens (mevedel-usage-input usage))
                      (mevedel-view--tokens (or (plist-get usage :output) 0)))))))

(defun mevedel-view--status-text (chat)
  "Return a short description of CHAT's status.
An idle child agent is not ready for the user: its turn is over."
  (pcase (mevedel-chat-status chat)
    ('idle (cond ((not (mevedel-chat-agent chat)) "ready")
                 ((mevedel-chat-turns chat) "finished")
                 (t "not started")))
    ('waiting "waiting for the model")
    ('streaming "receiving")
    ('tools "running tools")
    ('hooks (format "running %s hooks" (mevedel-chat-status-detail chat)))
    ('error (propertize (format "error: %s" (or (mevedel-chat-status-detail chat) "?"))
                        'face 'error))
    ('abort "aborted")
    ;; Its error and pause are the live zone's (`mevedel-view--render-live').
    ('retrying (propertize "retrying" 'face 'warning))
    (other (format "%s" other))))

;;;; Finding calls in the data buffer

(defun mevedel-view--find (property value start limit)
  "Return the first position from START before LIMIT where PROPERTY is VALUE.
Values compare with `equal'; nil when there is none."
  (let ((pos start) (found nil))
    (while (and (not found) (< pos limit))
      (if (equal (get-text-property pos property) value)
          (setq found pos)
        (setq pos (next-single-property-change pos property nil limit))))
    found))

(defun mevedel-view--find-tool (id)
  "Return the segment of the drawn tool call ID in the data buffer, or nil.
The search starts where the data of the turn that holds its row starts."
  (when-let* ((part (gethash id mevedel-view--parts)))
    (with-current-buffer (mevedel-chat-data-buffer mevedel-view--chat)
      (save-restriction
        (widen)
        (when-let* ((start (mevedel-view--find 'gptel (cons 'tool id) (car part) (point-max))))
          (let ((end (mevedel-history-run-end start 'gptel (point-max))))
            (mevedel-history-tool-segment id (buffer-substring-no-properties start end) start
                                          (mevedel-history-tool-media start end))))))))

;;;; Inserting

(defun mevedel-view--append (string)
  "Insert STRING at the end of the transcript."
  (let ((inhibit-read-only t))
    (save-excursion
      (goto-char mevedel-view--transcript-end)
      (insert (propertize string 'read-only t 'front-sticky '(read-only)))
      (set-marker mevedel-view--transcript-end (point)))))

(defun mevedel-view--begin-block (kind)
  "Separate a new transcript block of KIND from the previous one."
  (let ((previous mevedel-view--last-kind))
    (when previous
      (let ((end (marker-position mevedel-view--transcript-end)))
        (mevedel-view--append
         (cond ((and (eq kind 'tool) (eq previous 'tool)) "")
               ((= end (point-min)) "")
               (t "\n")))))
    (setq mevedel-view--last-kind kind)))

(defun mevedel-view--insert-segment (segment)
  "Insert the rendering of SEGMENT at the end of the transcript."
  (pcase (plist-get segment :type)
    ('user
     (mevedel-view--begin-block 'user)
     (mevedel-view--append
      (concat (propertize "❯ " 'face 'mevedel-view-user)
              (mevedel-mentions-chips
               (propertize (plist-get segment :text) 'face 'mevedel-view-user))
              "\n")))
    ('response
     (let ((begin (marker-position mevedel-view--transcript-end)))
       (mevedel-view--begin-block 'response)
       ;; The separator's kind; the answer has its own already.
       (put-text-property begin mevedel-view--transcript-end 'mevedel-kind 'response))
     (mevedel-view--append-markdown
      (mevedel-history-trim (plist-get segment :text))
      (concat (if (plist-get segment :incomplete)
                  (propertize " [incomplete: the response was cut off]"
                              'face 'mevedel-view-warning 'mevedel-incomplete t)
                "")
              "\n")))
    ('notice
     (mevedel-view--begin-block 'notice)
     (mevedel-view--append
      (concat (propertize (if (eq (plist-get segment :kind) 'compaction)
                              (mevedel-view--compaction-text (plist-get segment :text))
                            (plist-get segment :text))
                          'face (if (eq (plist-get segment :kind) 'error)
                                    'error 'mevedel-view-notice))
              "\n")))
    ('tool
     (let ((row (mevedel-view--row-text segment)))
       (when row
         (puthash (plist-get segment :id) mevedel-view--part mevedel-view--parts)
         (mevedel-view--begin-block 'tool)
         (mevedel-view--append (propertize row 'mevedel-row (plist-get segment :id))))))
    ('group
     (dolist (member (plist-get segment :members))
       (puthash (plist-get member :id) mevedel-view--part mevedel-view--parts))
     (mevedel-view--begin-block 'tool)
     (mevedel-view--append (mevedel-view--group-text segment)))))

(defun mevedel-view--compaction-text (text)
  "Return the text of the compaction summary TEXT as the view has it."
  (if (string-match "\\`<conversation-summary recovery=\"\\([^\"]*\\)\">\n?\\(\\(?:.\\|\n\\)*?\\)\n?</conversation-summary>\\'"
                    text)
      (format "⟲ Earlier turns compacted: the model reads this summary instead \
\(full text kept in %s):\n%s"
              (match-string 1 text) (match-string 2 text))
    text))

(defun mevedel-view--expanded-p (id row)
  "Return non-nil when the row of call ID with ROW plist is expanded."
  (pcase (gethash id mevedel-view--expanded)
    ('t t)
    ('collapsed nil)
    (_ (not (plist-get row :initially-collapsed-p)))))

(defun mevedel-view--glyph (status)
  "Return the propertized marker of a row with STATUS."
  (if (eq status 'running)
      (propertize (aref mevedel-view--spinner-frames
                        (% mevedel-view--spinner-frame (length mevedel-view--spinner-frames)))
                  'face 'mevedel-view-running 'mevedel-spinner t)
    (pcase-let ((`(,glyph ,face) (alist-get status mevedel-view--status-glyphs)))
      (propertize glyph 'face face))))

(defun mevedel-view--indent (text)
  "Return TEXT with every non-empty line indented by four spaces."
  (replace-regexp-in-string "^\\(.\\)" "    \\1" text))

(defun mevedel-view--body-text (body mode)
  "Return BODY for display, fontified as MODE when MODE is non-nil."
  (let* ((limit mevedel-tool-render-body-max-chars)
         (cut (and (> (length body) limit)
                   (format "\n… %d more characters" (- (length body) limit))))
         (body (string-trim-right (if cut (substring body 0 limit) body))))
    (concat (mevedel-view--indent
             (if mode
                 (condition-case nil
                     (mevedel-tool-render-fontify body mode)
                   (error body))
               body))
            (and cut (propertize cut 'face 'shadow))
            "\n")))

(defconst mevedel-view--running-states '("running" "queued" "stopping")
  "Execution states whose rows show live progress.")

(defun mevedel-view--with-progress (id render-data)
  "Return RENDER-DATA of call ID with its live progress over it, if any.
Progress (`mevedel-chat-call-progress') is transient and counts only
while RENDER-DATA does not say the call has ended."
  (let ((progress (and mevedel-view--chat
                       (mevedel-chat-call-progress mevedel-view--chat id))))
    (if (and progress
             (member (or (plist-get render-data :state) "running")
                     mevedel-view--running-states))
        (append progress render-data)
      render-data)))

(defun mevedel-view--row-text (segment &optional live-status)
  "Return the text of the tool row for SEGMENT, or nil when it is hidden.
LIVE-STATUS, when non-nil, overrides the status (`running' for calls
in flight)."
  (let* (;; A row shows the images its call sent from their session's copies.
         (mevedel-session-current (or (and mevedel-view--chat
                                           (mevedel-chat-session mevedel-view--chat))
                                      mevedel-session-current))
         (id (plist-get segment :id))
         (name (plist-get segment :name))
         (args (plist-get segment :args))
         (result (plist-get segment :result))
         (render-data (mevedel-view--with-progress id (plist-get segment :render-data)))
         (summary (if (eq render-data (plist-get segment :render-data))
                      (mevedel-view--summary segment)
                    (mevedel-tool-render-row name args result render-data t)))
         ;; A running row expands only when asked (its command, say).
         (expanded (if live-status
                       (eq (gethash id mevedel-view--expanded) t)
                     (mevedel-view--expanded-p id summary)))
         (row (if expanded
                  (mevedel-tool-render-row name args result render-data nil)
                summary))
         (status (or live-status (plist-get row :status)))
         (expandable (plist-get (if live-status summary row) :expandable-p))
         ;; A row that cannot be toggled is one event line: no body.
         (expanded (and expandable expanded))
         ;; Expanded by default, a row may open on its preview; asked
         ;; for, it shows the whole body.
         (body (or (and expanded (not (eq (gethash id mevedel-view--expanded) t))
                        (plist-get row :preview-body))
                   (plist-get row :body))))
    (unless (plist-get row :hidden-p)
      (concat
       (propertize
        (concat (if expandable (if expanded "▾ " "▸ ") "  ")
                (mevedel-view--glyph status) " "
                (propertize (plist-get row :header) 'face 'mevedel-view-tool-header)
                (when-let* ((progress (plist-get render-data :progress-text)))
                  (propertize (concat " · " progress) 'face 'shadow))
                (pcase status
                  ('denied (propertize "  denied" 'face 'mevedel-view-error))
                  ('cancelled (propertize "  cancelled" 'face 'mevedel-view-warning)))
                "\n")
        'keymap mevedel-view-row-map 'mouse-face 'highlight
        'help-echo (format "%s call %s: TAB to expand or collapse" name id))
       (when (and expanded body (not (string-empty-p body)))
         (mevedel-locations-mark-body
          (mevedel-view--body-text body (plist-get row :body-mode))
          name args default-directory))
       (when (and expanded (plist-get row :child-calls))
         (mevedel-view--child-rows id (plist-get row :child-calls)))
       (when-let* (((not live-status))
                   (crumb (plist-get row :breadcrumb)))
         (mevedel-view--breadcrumb-text crumb id))))))

(defun mevedel-view--child-rows (id children)
  "Return the rows of CHILDREN, nested in the row of call ID.
Each child is (NAME ARGS RESULT RENDER-DATA [BATCH [CHILD-ID]]); calls
sharing a non-nil BATCH ran concurrently and are bracketed by a gutter
\(┌ │ └), so a fan-out reads differently from the same calls in sequence."
  (let ((prev nil) (rows nil))
    (while children
      (let* ((child (pop children))
             (batch (nth 4 child))
             (first (not (and batch (equal prev batch))))
             (last (not (and batch (equal (nth 4 (car children)) batch))))
             (text (or (mevedel-view--row-text
                        (list :id (or (nth 5 child) (format "%s/%s" id (car child)))
                              :name (car child) :args (nth 1 child) :result (nth 2 child)
                              :render-data (nth 3 child)))
                       "")))
        (push (mevedel-view--indent
               (if batch
                   (mevedel-view--gutter text (cond (first "┌ ") (last "└ ") (t "│ "))
                                         (if last "  " "│ "))
                 text))
              rows)
        (setq prev batch)))
    (apply #'concat (nreverse rows))))

(defun mevedel-view--gutter (text mark bar)
  "Return TEXT with MARK before its first line and BAR before the others."
  (let ((lines (split-string text "\n")))
    (mapconcat #'identity
               (cons (concat (propertize mark 'face 'shadow) (car lines))
                     (mapcar (lambda (line)
                               (if (string-empty-p line) line
                                 (concat (propertize bar 'face 'shadow) line)))
                             (cdr lines)))
               "\n")))

(defun mevedel-view--breadcrumb-text (crumb id)
  "Return the breadcrumb line CRUMB of the row of call ID."
  (propertize (concat "    ↳ " crumb "\n")
              'face 'mevedel-view-breadcrumb 'mevedel-breadcrumb id
              'keymap mevedel-view-breadcrumb-map 'mouse-face 'highlight
              'help-echo "RET: show the command's result"))

(defun mevedel-view--mark-row (text id)
  "Return row TEXT with every character tagged as the row of call ID."
  (propertize text 'mevedel-row id))

;;;; Rendering

(defun mevedel-view--summary (segment)
  "Return the collapsed row plist of tool SEGMENT, computed once per segment."
  (or (plist-get segment :summary)
      (let ((row (mevedel-tool-render-row (plist-get segment :name) (plist-get segment :args)
                                          (plist-get segment :result)
                                          (plist-get segment :render-data) t)))
        (plist-put segment :summary row)
        row)))

(defun mevedel-view--coalesce-key (segment)
  "Return the coalesce key of tool SEGMENT's row, or nil."
  (and (eq (plist-get segment :type) 'tool)
       (plist-get (mevedel-view--summary segment) :coalesce-key)))

(defun mevedel-view--hidden-row-p (segment)
  "Return non-nil when SEGMENT is a tool row its renderer hides."
  (and (eq (plist-get segment :type) 'tool)
       (plist-get (mevedel-view--summary segment) :hidden-p)))

(defun mevedel-view--coalesce (segments)
  "Return SEGMENTS, grouping consecutive tool rows with equal coalesce keys.
A group is a segment (:type group :id FIRST-ID :start FIRST-START
:members SEGMENTS).  Only another visible rendering ends a run: hidden
rows between two of its calls are members too (they draw nothing)."
  (let (result)
    (while segments
      (let* ((segment (pop segments))
             (key (mevedel-view--coalesce-key segment)))
        (if (not key)
            (push segment result)
          (let ((members (list segment)))
            (while (let ((next (cl-loop for s in segments
                                        unless (mevedel-view--hidden-row-p s) return s)))
                     (and next (equal (mevedel-view--coalesce-key next) key)))
              (while (mevedel-view--hidden-row-p (car segments))
                (push (pop segments) members))
              (push (pop segments) members))
            (push (if (cdr members)
                      (list :type 'group :id (plist-get segment :id)
                            :start (plist-get segment :start)
                            :members (nreverse members))
                    segment)
                  result)))))
    (nreverse result)))

(defun mevedel-view--group-text (group)
  "Return the text of the coalesced GROUP of tool rows.
All of it carries `mevedel-group', the group's ID; the header also
`mevedel-members', the IDs of its calls."
  (let* ((id (plist-get group :id))
         (members (plist-get group :members))
         (shown (cl-remove-if #'mevedel-view--hidden-row-p members))
         (final (mevedel-view--summary (car (last shown))))
         (expanded (eq (gethash (concat "group:" id) mevedel-view--expanded) t)))
    (propertize
     (concat
      (propertize
       (concat (if expanded "▾ " "▸ ") (mevedel-view--glyph (or (plist-get final :status) 'success))
               " " (propertize (plist-get final :header) 'face 'mevedel-view-tool-header)
               (propertize (format "  (%d calls)" (length shown)) 'face 'shadow)
               "\n")
       'keymap mevedel-view-row-map 'mouse-face 'highlight
       'mevedel-members (mapcar (lambda (segment) (plist-get segment :id)) members)
       'help-echo "TAB to show or hide the calls of this group")
      (when expanded
        (mapconcat (lambda (segment)
                     (propertize (or (mevedel-view--row-text segment) "")
                                 'mevedel-row (plist-get segment :id)))
                   members "")))
     'mevedel-group id)))

(defun mevedel-view--insert-segments (segments)
  "Append the rendering of data SEGMENTS to the transcript.
Return the last block drawn, (VIEW-START . DATA-START), or nil."
  (let (last)
    (dolist (segment (mevedel-view--coalesce segments) last)
      (let ((begin (marker-position mevedel-view--transcript-end))
            (inhibit-read-only t))
        (mevedel-view--insert-segment segment)
        ;; A response's text is drawn with its kind
        ;; (`mevedel-view--append-markdown'): a pass over it would
        ;; change nothing and cost a step per face.
        (unless (eq (plist-get segment :type) 'response)
          (put-text-property begin mevedel-view--transcript-end
                             'mevedel-kind (plist-get segment :type)))
        (setq last (cons begin (plist-get segment :start)))))))

(defun mevedel-view--kind-before (position)
  "Return the kind of the transcript block before POSITION, as drawn.
A coalesced group is drawn as a tool block."
  (let ((kind (and (> position (point-min)) (get-text-property (1- position) 'mevedel-kind))))
    (if (eq kind 'group) 'tool kind)))

(defun mevedel-view--truncate-to (position)
  "Delete the transcript from POSITION to its end."
  (mevedel-view--end-stream)
  (let ((inhibit-read-only t))
    (delete-region position mevedel-view--transcript-end)
    (set-marker mevedel-view--transcript-end position)
    (setq mevedel-view--last-kind (mevedel-view--kind-before position))))

(defun mevedel-view--draw (segments)
  "Append the rendering of SEGMENTS; the last block drawn becomes the tail."
  (when-let* ((last (mevedel-view--insert-segments segments)))
    (set-marker mevedel-view--tail (car last))
    (set-marker mevedel-view--tail-data (cdr last) (mevedel-chat-data-buffer mevedel-view--chat))))

(defconst mevedel-view--first-paint-lines 200
  "Lines at the transcript's end drawn before a full redraw returns.
That is more than the tallest window shows; the turns before them
are drawn by a timer, a few at a time.")

(defconst mevedel-view--fill-seconds 0.02
  "Longest time the timer draws earlier turns before Emacs does other work.")

(defconst mevedel-view--delete-now-chars 20000
  "Longest old transcript a full redraw deletes at once.
Deleting text costs more than its length (its text properties), so a
longer one is hidden and deleted by the timer, a piece at a time.")

(defun mevedel-view--turns (&optional from)
  "Return each turn of the data from FROM on, oldest first, as (START . END).
The first starts at FROM (default the buffer's start), the others at
the chat's markers of its turns' starts; the last ends at the buffer's
end.  Without recorded turns, all of the data is one turn."
  (let* ((data (mevedel-chat-data-buffer mevedel-view--chat))
         (from (or from 1))
         (end (with-current-buffer data (1+ (buffer-size))))
         ;; The chat's turns come newest first: those after FROM lead.
         (starts (sort (cl-loop for turn in (mevedel-chat-turns mevedel-view--chat)
                                for start = (plist-get turn :start)
                                while (and (eq (marker-buffer start) data) (> start from))
                                when (< start end) collect start)
                       #'<))
         (bounds (list from)))
    (dolist (bound (append starts (list end)))
      (unless (= bound (car bounds))
        (push bound bounds)))
    (setq bounds (nreverse bounds))
    (cl-mapcar #'cons bounds (cdr bounds))))

(defun mevedel-view--estimated-lines (segments)
  "Return about how many lines SEGMENTS take in the transcript, at least.
A tool row counts one line; other blocks the lines of their text."
  (cl-loop for segment in segments
           sum (if (memq (plist-get segment :type) '(user response notice))
                   (1+ (cl-count ?\n (plist-get segment :text)))
                 1)))

(defun mevedel-view-rerender (&optional buffer)
  "Redraw all of BUFFER's transcript (default the current view) from its data.
The last turns, at least `mevedel-view--first-paint-lines' of them,
are drawn now; the turns before them are drawn by a timer, oldest
first, above a line saying so."
  (interactive)
  (with-current-buffer (or buffer (current-buffer))
    (unless mevedel-view--chat (user-error "Not a mevedel view"))
    (save-excursion
      (mevedel-view--forget)
      (mevedel-view--end-stream)
      (when mevedel-view--stale (delete-overlay mevedel-view--stale))
      (setq mevedel-view--stale nil)
      (if (< (- mevedel-view--transcript-end (point-min)) mevedel-view--delete-now-chars)
          (let ((inhibit-read-only t))
            (delete-region (point-min) mevedel-view--transcript-end))
        (setq mevedel-view--stale (make-overlay (point-min) mevedel-view--transcript-end))
        (overlay-put mevedel-view--stale 'invisible t))
      (setq mevedel-view--last-kind nil)
      (let* ((data (mevedel-chat-data-buffer mevedel-view--chat))
             (turns (nreverse (mevedel-view--turns)))
             (lines 0)
             (parsed nil))
        (while (and turns (< lines mevedel-view--first-paint-lines))
          (let* ((turn (pop turns))
                 (segments (mevedel-history-segments data (car turn) (cdr turn))))
            (setq lines (+ lines (mevedel-view--estimated-lines segments)))
            (push (cons turn segments) parsed)))
        (set-marker mevedel-view--tail-data (or (car (car (car parsed))) 1) data)
        (when (or turns mevedel-view--stale)
          (setq mevedel-view--pending (nreverse turns)
                mevedel-view--fill (copy-marker mevedel-view--transcript-end))
          (mevedel-view--append (propertize "Drawing the earlier turns…\n"
                                            'face 'shadow 'mevedel-kind 'pending))
          (setq mevedel-view--last-kind 'pending)
          (setq mevedel-view--fill-timer
                (run-at-time 0 nil #'mevedel-view--fill-pending (current-buffer))))
        (set-marker mevedel-view--tail mevedel-view--transcript-end)
        (pcase-dolist (`(,turn . ,segments) parsed)
          (setq mevedel-view--part (mevedel-view--new-part (car turn)))
          (mevedel-view--draw segments)))
      (mevedel-view--render-live))))

(defun mevedel-view--fill-pending (buffer &optional all)
  "Draw what BUFFER has pending, oldest first, for a while or all if ALL.
The old transcript a full redraw left goes first; once no turn is
left, the line telling they are pending goes too."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (setq mevedel-view--fill-timer nil)
      (let* ((deadline (+ (float-time) mevedel-view--fill-seconds))
             (more (lambda () (or all (< (float-time) deadline)))))
        (while (and mevedel-view--stale (progn (mevedel-view--delete-stale) (funcall more))))
        (while (and mevedel-view--pending (not mevedel-view--stale)
                    (progn (mevedel-view--fill-one) (funcall more))))
        (if (or mevedel-view--stale mevedel-view--pending)
            (setq mevedel-view--fill-timer
                  (run-at-time 0 nil #'mevedel-view--fill-pending buffer))
          (mevedel-view--end-fill))))))

(defun mevedel-view--delete-stale ()
  "Delete a piece of the old transcript hidden by `mevedel-view--stale'."
  (let ((inhibit-read-only t))
    (delete-region (point-min) (min (overlay-end mevedel-view--stale)
                                    (+ (point-min) mevedel-view--delete-now-chars))))
  (when (= (overlay-start mevedel-view--stale) (overlay-end mevedel-view--stale))
    (delete-overlay mevedel-view--stale)
    (setq mevedel-view--stale nil)))

(defun mevedel-view--fill-one ()
  "Draw the oldest pending turn, above the line telling it is pending."
  (save-excursion
    (let* ((turn (pop mevedel-view--pending))
           (mevedel-view--transcript-end mevedel-view--fill)
           (mevedel-view--last-kind (mevedel-view--kind-before mevedel-view--fill))
           (mevedel-view--part (mevedel-view--new-part (car turn))))
      (mevedel-view--insert-segments
       (mevedel-history-segments (mevedel-chat-data-buffer mevedel-view--chat)
                              (car turn) (cdr turn))))))

(defun mevedel-view--end-fill ()
  "Remove the line standing for what is pending, joining the text around it.
The part after it was drawn as if a block came before it; the
separator its first block got goes when no block comes before it
after all, or when both are tool rows."
  (let* ((join (marker-position mevedel-view--fill))
         (inhibit-read-only t))
    (delete-region join (next-single-property-change join 'mevedel-kind nil
                                                     mevedel-view--transcript-end))
    (set-marker mevedel-view--fill nil)
    (setq mevedel-view--fill nil)
    (when (and (< join mevedel-view--transcript-end)
               (or (= join (point-min))
                   (and (eq (mevedel-view--kind-before join) 'tool)
                        (memq (get-text-property join 'mevedel-kind) '(tool group)))))
      (delete-region join (1+ join)))))

(defun mevedel-view--forget ()
  "Drop this view's index of what it drew and what it has pending."
  (when (timerp mevedel-view--fill-timer)
    (cancel-timer mevedel-view--fill-timer))
  (when mevedel-view--fill
    (set-marker mevedel-view--fill nil))
  (setq mevedel-view--fill-timer nil mevedel-view--fill nil mevedel-view--pending nil)
  (mapc (lambda (marker) (set-marker marker nil)) mevedel-view--part-starts)
  (setq mevedel-view--part-starts nil mevedel-view--part nil)
  (clrhash mevedel-view--parts))

(defun mevedel-view--new-part (data-start)
  "Return a new drawn turn of the data from DATA-START, drawn from here on.
Here is the transcript's end, or where a pending turn is drawn."
  (let ((start (copy-marker mevedel-view--transcript-end)))
    (push start mevedel-view--part-starts)
    (cons data-start start)))

(defun mevedel-view--render-turn ()
  "Redraw the transcript's tail from the data buffer, and the live zone.
The tail is the last block drawn and whatever the data gained after
it: streamed text drawn as it came is replaced by its rendering, new
rows are added, and nothing before the tail is touched."
  (save-excursion
    (mevedel-view--truncate-to mevedel-view--tail)
    (let ((data (mevedel-chat-data-buffer mevedel-view--chat))
          (from (marker-position mevedel-view--tail-data)))
      (pcase-dolist (`(,start . ,end) (mevedel-view--turns from))
        (unless (and mevedel-view--part (eql start from))
          (setq mevedel-view--part (mevedel-view--new-part start)))
        (mevedel-view--draw (mevedel-history-segments data start end))))
    (mevedel-view--render-live)))

(defun mevedel-view--render-live ()
  "Redraw the live zone: running tools, waiting line, then the interactions."
  (let ((inhibit-read-only t)
        (chat mevedel-view--chat)
        (running nil))
    (save-excursion
      ;; Open interactions keep their text (and point in it) across
      ;; redraws.  The new rows go in before the old ones, which then
      ;; go: a point at an interaction's start (a card that took it)
      ;; stays there, where deleting first would leave it above the
      ;; new rows.
      (let ((old (and (< mevedel-view--transcript-end (mevedel-view--interactions-start))
                      (copy-marker (mevedel-view--interactions-start))))
            (calls (mevedel-chat-live-calls chat))
            (start (progn (goto-char mevedel-view--transcript-end) (point))))
        (when calls (insert "\n"))
        (dolist (call calls)
          (let* ((done (plist-get call :result))
                 (text (mevedel-view--row-text
                        (list :id (plist-get call :id) :name (plist-get call :name)
                              :args (plist-get call :args)
                              :result done)
                        (unless done 'running))))
            (unless done (setq running t))
            (when text (insert (mevedel-view--mark-row text (plist-get call :id))))))
        (when mevedel-view--problem
          (insert (mevedel-view--problem-text mevedel-view--problem)))
        (when (eq (mevedel-chat-status chat) 'retrying)
          (insert "\n" (propertize (concat "⟳ " (or (mevedel-chat-status-detail chat) "retrying")
                                           (substitute-command-keys
                                            " · \\<mevedel-view-mode-map>\\[mevedel-view-abort] stops"))
                                   'face 'mevedel-view-warning 'mevedel-retry t)
                  "\n"))
        (when (and (memq (mevedel-chat-status chat) '(waiting))
                   (not calls))
          (setq running t)
          (insert "\n" (mevedel-view--glyph 'running) " "
                  (propertize "Waiting for the model…" 'face 'shadow) "\n"))
        (run-hook-with-args 'mevedel-view-live-functions chat)
        (when old
          (delete-region (point) old)
          (set-marker old nil))
        (add-text-properties start (point) '(read-only t mevedel-live t))
        (mevedel-view--draw-interactions chat)))
    (if running (mevedel-view--start-spinner) (mevedel-view--stop-spinner))))

(defun mevedel-view--grant-text (card grant operation-granted)
  "Return the lines of a CARD (`grant' or `escalation') asking for GRANT.
OPERATION-GRANTED non-nil means the call itself is allowed already."
  (concat
   (if (eq card 'escalation)
       "  The command runs with no sandbox: no filesystem, network or process limits.\n"
     (concat
      (format "  [%s] run the command\n" (if operation-granted "x" " "))
      (and (plist-get grant :network) "  [ ] network access\n")
      (mapconcat (lambda (path) (format "  [ ] read %s\n" path)) (plist-get grant :read) "")
      (mapconcat (lambda (path) (format "  [ ] write %s\n" path)) (plist-get grant :write) "")
      (mapconcat (lambda (name) (format "  [ ] pass the withheld variable %s\n" name))
                 (plist-get grant :env) "")))
   (when-let* ((why (plist-get grant :justification)))
     (format "  why: %s\n" (mevedel-tool-render-shorten why 200)))))

(defun mevedel-view--card-title (request)
  "Return the title of the permission card for REQUEST."
  (pcase (plist-get request :card)
    ('escalation (format "Run this %s call OUTSIDE the sandbox?" (plist-get request :tool)))
    ('grant (format "Allow %s with more sandbox permissions?" (plist-get request :tool)))
    (_ (format "Allow %s?" (plist-get request :tool)))))

(defconst mevedel-view--card-lines 20
  "Most lines of a card's command or paths shown before TAB shows all.
A longer list shows its first lines and its last five, so its end,
where a command often does the most, is never hidden.")

(defun mevedel-view--card-elide (lines expanded)
  "Return the strings LINES, eliding the middle of a long list unless EXPANDED."
  (let ((count (length lines))
        (tail 5))
    (if (or expanded (<= count mevedel-view--card-lines))
        lines
      (let ((head (- mevedel-view--card-lines tail)))
        (append (take head lines)
                (list (propertize
                       (format "    … %d more lines (%s shows all)\n"
                               (- count head tail)
                               (substitute-command-keys
                                "\\<mevedel-view-card-map>\\[mevedel-view-card-toggle-command]"))
                       'face 'shadow))
                (last lines tail))))))

(defun mevedel-view--card-command (request)
  "Return the lines of REQUEST's command as written, its risky commands marked.
Each line is whole: a long one wraps under the first column of the
command instead of being cut."
  (let* ((source (string-trim-right (copy-sequence (plist-get request :source)) "\n+"))
         (size (length source)))
    (dolist (effect (plist-get request :effects))
      (when-let* ((face (pcase (plist-get effect :class)
                          ("read-only" nil)
                          ("dangerous" 'mevedel-view-card-dangerous)
                          (_ 'mevedel-view-card-risky))))
        (add-face-text-property (min size (plist-get effect :start))
                                (min size (plist-get effect :end))
                                face nil source)))
    (concat
     "  command:\n"
     (apply #'concat
            (mevedel-view--card-elide
             (mapcar (lambda (line) (propertize (concat "    " line "\n") 'wrap-prefix "    "))
                     (split-string source "\n"))
             (plist-get request :expanded))))))

(defun mevedel-view--card-effects (request)
  "Return one line per command of REQUEST that touches files.
It says what the command reads, writes and deletes (workspace-relative,
absolute outside), or that its paths are unknown; a command touching
no file has no line."
  (apply #'concat
         (mevedel-view--card-elide
          (delq nil
                (mapcar
                 (lambda (effect)
                   (let ((parts (delq nil
                                      (list
                                       (when-let* ((paths (plist-get effect :reads)))
                                         (concat "reads: " (string-join paths ", ")))
                                       (when-let* ((paths (plist-get effect :writes)))
                                         (concat "writes: " (string-join paths ", ")))
                                       (when-let* ((paths (plist-get effect :deletes)))
                                         (concat "deletes: " (string-join paths ", ")))
                                       (and (plist-get effect :unknown) "paths: unknown")))))
                     (when parts
                       (propertize (format "  %s → %s\n" (plist-get effect :command)
                                           (string-join parts " · "))
                                   'wrap-prefix "    "))))
                 (plist-get request :effects)))
          (plist-get request :expanded))))

(defun mevedel-view--card-text (request)
  "Return the body of the permission card for REQUEST."
  (let* ((args (plist-get request :args))
         (card (plist-get request :card))
         (source (plist-get request :source))
         (body
          (concat
           (when source (mevedel-view--card-command request))
           (cl-loop for (key value) on args by #'cddr
                    unless (and source (eq key :command))
                    concat (format "  %s: %s\n" (substring (symbol-name key) 1)
                                   (mevedel-tool-render-shorten value 100)))
           (if source
               (mevedel-view--card-effects request)
             (when-let* ((paths (plist-get request :paths)))
               (format "  paths: %s\n" (string-join paths ", "))))
           (when-let* ((why (plist-get request :why)))
             (format "  asked: %s\n" why))
           (when card
             (mevedel-view--grant-text card (plist-get request :grant)
                                       (plist-get request :operation-granted)))
           (when-let* ((always (and (not card) (plist-get request :always))))
             (concat (substitute-command-keys
                      "  \\<mevedel-view-card-map>\\[mevedel-view-allow-session] allows ")
                     always "\n"))
           (substitute-command-keys
            (if (or card (not (plist-get request :always)))
                "  \\<mevedel-view-card-map>\\[mevedel-view-allow-once] allow once · \
\\[mevedel-view-deny] deny · \\[mevedel-view-deny-and-tell] deny and tell the model\n"
              "  \\<mevedel-view-card-map>\\[mevedel-view-allow-once] allow once · \
\\[mevedel-view-allow-session] always this session · \\[mevedel-view-deny] deny · \
\\[mevedel-view-deny-and-tell] deny, tell\n")))))
    ;; Under the faces of the risky commands.
    (add-face-text-property 0 (length body) 'mevedel-view-card t body)
    body))

;;;; Interactions

(defvar mevedel-view-live-functions nil
  "Abnormal hook run with the chat while the live zone is drawn.
Each function inserts its part at point (the task fragment), after
the running calls and before the open interactions.")

(defun mevedel-view--drawn-p (interaction)
  "Return non-nil when INTERACTION's text is in the view."
  (when-let* ((start (mevedel-interaction-start interaction)))
    (< start (overlay-end (mevedel-interaction-overlay interaction)))))

(defun mevedel-view--interactions-start ()
  "Return where the drawn interactions start in the live zone, else the panel."
  (let ((start (marker-position mevedel-view--panel)))
    (dolist (interaction (mevedel-interaction-list mevedel-view--chat))
      (when (mevedel-view--drawn-p interaction)
        (setq start (min start (mevedel-interaction-start interaction)))))
    start))

(defun mevedel-view--draw-interactions (chat)
  "Draw CHAT's open interactions that are not drawn yet, before the panel."
  (dolist (interaction (mevedel-interaction-list chat))
    (unless (mevedel-view--drawn-p interaction)
      (goto-char mevedel-view--panel)
      (let ((start (point)))
        (mevedel-interaction-insert interaction)
        (add-text-properties start (point) '(read-only t mevedel-live t))))))

(defun mevedel-view--interactions-changed (chat)
  "Redraw the live zone of CHAT's view; focus a new interaction.
A new interaction takes point even from a draft in the composer: the
draft stays, and point returns to it once no interaction waits.
A `mevedel-interaction-change-functions' member."
  (when-let* ((buffer (get-buffer (format "*mevedel: %s*" (mevedel-chat-name chat))))
              ((eq (buffer-local-value 'mevedel-view--chat buffer) chat)))
    (with-current-buffer buffer
      (let ((before (mevedel-interaction-at)))
        (save-excursion (mevedel-view--render-live))
        (when-let* (((not before))
                    (interaction (car (mevedel-interaction-list chat)))
                    (start (mevedel-interaction-start interaction)))
          (setq mevedel-view--card-focused t)
          (goto-char start)
          (when-let* ((window (get-buffer-window buffer)))
            (set-window-point window start)))
        (unless (mevedel-interaction-list chat)
          (mevedel-view--unfocus-card))))))

(add-hook 'mevedel-interaction-change-functions #'mevedel-view--interactions-changed)

(defun mevedel-view-buffers (session)
  "Return the live view buffers of SESSION's chats, its child agents' too."
  (cl-loop for buffer in (buffer-list)
           for chat = (buffer-local-value 'mevedel-view--chat buffer)
           when (and chat (eq (mevedel-chat-session chat) session))
           collect buffer))

(defun mevedel-view-redraw-live (chat)
  "Redraw the live zone of CHAT's view, if it has one."
  (when-let* ((buffer (get-buffer (format "*mevedel: %s*" (mevedel-chat-name chat))))
              ((eq (buffer-local-value 'mevedel-view--chat buffer) chat)))
    (with-current-buffer buffer
      (mevedel-view--keeping-card-points
       (lambda () (save-excursion (mevedel-view--render-live)))))))

;;;; Spinner

(defun mevedel-view--start-spinner ()
  "Animate the spinners of this view."
  (unless (timerp mevedel-view--spinner-timer)
    (let ((buffer (current-buffer)))
      (setq mevedel-view--spinner-timer
            (run-with-timer 0.12 0.12 #'mevedel-view--spin buffer)))))

(defun mevedel-view--stop-spinner ()
  "Stop animating spinners."
  (when (timerp mevedel-view--spinner-timer)
    (cancel-timer mevedel-view--spinner-timer))
  (setq mevedel-view--spinner-timer nil))

(defun mevedel-view--spin (buffer)
  "Advance the spinners of BUFFER; redraw finished live rows."
  (if (not (buffer-live-p buffer))
      nil
    (with-current-buffer buffer
      (cl-incf mevedel-view--spinner-frame)
      (let ((inhibit-read-only t)
            (frame (aref mevedel-view--spinner-frames
                         (% mevedel-view--spinner-frame (length mevedel-view--spinner-frames))))
            (finished (cl-some (lambda (call) (plist-get call :result))
                               (mevedel-chat-live-calls mevedel-view--chat))))
        (if finished
            (mevedel-view--render-live)
          (save-excursion
            (goto-char mevedel-view--transcript-end)
            (let (match)
              (while (setq match (text-property-search-forward 'mevedel-spinner t t))
                (let ((props (text-properties-at (prop-match-beginning match))))
                  (delete-region (prop-match-beginning match) (prop-match-end match))
                  (goto-char (prop-match-beginning match))
                  (insert (apply #'propertize frame props)))))))))))

;;;; Observing the chat

(defconst mevedel-view--progress-delay 0.25
  "Seconds over which progress of running calls is gathered into one redraw.")

(defun mevedel-view--progress (id)
  "Redraw the row of call ID with its new progress, soon.
Progress comes several times a second per command, so redraws are
gathered: at most one every `mevedel-view--progress-delay' seconds."
  (cl-pushnew id mevedel-view--progress-ids :test #'equal)
  (unless (timerp mevedel-view--progress-timer)
    (setq mevedel-view--progress-timer
          (run-at-time mevedel-view--progress-delay nil
                       #'mevedel-view--draw-progress (current-buffer)))))

(defun mevedel-view--draw-progress (buffer)
  "Redraw BUFFER's rows whose progress changed."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (let ((ids mevedel-view--progress-ids)
            (live (mapcar (lambda (call) (plist-get call :id))
                          (mevedel-chat-live-calls mevedel-view--chat))))
        (setq mevedel-view--progress-ids nil
              mevedel-view--progress-timer nil)
        (mevedel-view--keeping-card-points
         (lambda ()
           (save-excursion
             (dolist (id ids)
               (unless (member id live)
                 (mevedel-view--refresh-row id)))
             (when (cl-some (lambda (id) (member id live)) ids)
               (mevedel-view--render-live)))))))))

(defun mevedel-view--keeping-card-points (function)
  "Call FUNCTION; a point on an open card stays on it.
Rows and text drawn above a card whose start a point is at would
otherwise leave that point above them, where keys meant for the card
go elsewhere."
  (if (mevedel-interaction-list mevedel-view--chat)
      (mevedel-interaction-call-preserving-points function)
    (funcall function)))

(defun mevedel-view--observe (event chat args)
  "Update this view for CHAT's EVENT with ARGS."
  (mevedel-view--keeping-card-points
   (lambda () (mevedel-view--observe-1 event chat args))))

(defun mevedel-view--observe-1 (event _chat args)
  "Update this view for the chat's EVENT with ARGS (see `mevedel-view--observe')."
  (pcase event
    ('turn-start (setq mevedel-view--problem nil) (mevedel-view--render-turn))
    ('text (mevedel-view--append-text (car args)))
    ('tools-start (save-excursion (mevedel-view--render-live)))
    ((or 'tool-results 'turn-end 'retry) (mevedel-view--render-turn))
    ('tool-updated (save-excursion (mevedel-view--refresh-row (car args))))
    ('tool-progress (mevedel-view--progress (car args)))
    ('status
     (when (text-property-any mevedel-view--transcript-end mevedel-view--panel 'mevedel-retry t)
       (save-excursion (mevedel-view--render-live)))
     (force-mode-line-update))
    ('truncated (mevedel-view-rerender))
    ('queued (mevedel-view--show-queued))
    ('compacted (mevedel-view-rerender))
    ((or 'delivered 'appended) (mevedel-view--render-turn)))
  (when (eq event 'turn-end)
    (mevedel-view--unfocus-card)
    (mevedel-view--stop-spinner)
    (force-mode-line-update))
  (mevedel-view--follow)
  (when (and (eq event 'turn-end) mevedel-view--answer)
    (set-marker mevedel-view--answer nil)
    (setq mevedel-view--answer nil)))

(defun mevedel-view--follow ()
  "After a change of the view, keep useful the windows with point in the composer.
Such a window follows the conversation, and Emacs would keep its
point in sight by scrolling the answer's start away, or leave the
composer floating above empty lines once the live zone shrinks.
Instead, when the answer being streamed would scroll out of such a
window, the window scrolls only as far as shows its end at the
bottom and its start still in sight; once the answer is taller than
the window, the window shows it from its start and its point moves
there (typing still reaches the composer, `mevedel-view-self-insert'),
until the user moves.  A window with room to spare below the composer
shows more of the transcript above it."
  (dolist (window (get-buffer-window-list nil nil t))
    (when (>= (window-point window) mevedel-view--composer)
      (let* ((start (window-start window))
             (height (window-body-height window))
             (bottom (lambda ()
                       (save-excursion
                         (goto-char (point-max))
                         (vertical-motion (- 1 height) window)
                         (point)))))
        (cond
         ((and mevedel-view--answer (<= start mevedel-view--answer)
               (> (count-screen-lines start (point-max) nil window) height))
          (let ((answer (save-excursion (goto-char mevedel-view--answer)
                                        (skip-chars-forward "\n")
                                        (line-beginning-position)))
                (bottom (funcall bottom)))
            (if (<= bottom answer)
                (set-window-start window bottom)
              (set-window-start window answer)
              (set-window-point window answer))))
         ((and (> start (point-min))
               (< (count-screen-lines start (point-max) nil window) (1- height)))
          (set-window-start window (funcall bottom))))))))

(defun mevedel-view--append-markdown (text &optional suffix)
  "Append the assistant's TEXT rendered, then SUFFIX, to the transcript.
Names of existing files in it are buttons.  In an Org data buffer
gptel has turned the model's Markdown into Org: TEXT is shown as it is."
  (let ((inhibit-read-only t)
        (base default-directory)
        (cache (mevedel-locations-cache))
        (mevedel-markdown-enabled
         (and mevedel-markdown-enabled
              (not (with-current-buffer (mevedel-chat-data-buffer mevedel-view--chat)
                     (derived-mode-p 'org-mode))))))
    (save-excursion
      (goto-char mevedel-view--transcript-end)
      (let* ((start (point))
             ;; The kind too: the block is marked with it here.
             (properties '(read-only t front-sticky (read-only) mevedel-kind response))
             (pending (mevedel-markdown-insert
                       text
                       (lambda (start end)
                         (mevedel-locations-mark-region start end base cache))
                       properties)))
        (when suffix
          (insert (apply #'propertize suffix properties)))
        (when pending
          (mevedel-view--queue-code start (point)))
        (set-marker mevedel-view--transcript-end (point))))))

(defun mevedel-view--queue-code (start end)
  "Fontify the code blocks from START to END soon, on a timer."
  (setq mevedel-view--code-queue
        (nconc mevedel-view--code-queue (list (cons (copy-marker start) (copy-marker end)))))
  (unless (timerp mevedel-view--code-timer)
    (setq mevedel-view--code-timer
          (run-at-time 0 nil #'mevedel-view--fontify-code (current-buffer)))))

(defun mevedel-view--fontify-code (buffer)
  "Fontify BUFFER's queued code blocks for a while.
The rest, if any, waits for the next run of the timer."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (setq mevedel-view--code-timer nil)
      (let ((deadline (+ (float-time) mevedel-view--fill-seconds)))
        (while (and mevedel-view--code-queue
                    (let* ((range (car mevedel-view--code-queue))
                           (stopped (mevedel-markdown-fontify-pending
                                     (car range) (cdr range) deadline)))
                      (if stopped
                          (progn (set-marker (car range) stopped) nil)
                        (set-marker (car range) nil)
                        (set-marker (cdr range) nil)
                        (pop mevedel-view--code-queue)
                        t))))
        (when mevedel-view--code-queue
          (setq mevedel-view--code-timer
                (run-at-time 0 nil #'mevedel-view--fontify-code buffer)))))))

(defconst mevedel-view--stream-line-chars 4096
  "Longest unfinished line of a streamed response rendered again per chunk.
A longer one gets its chunks as they come until its line ends.")

(defun mevedel-view--append-response (text &optional markdown)
  "Append TEXT, a piece of the response being streamed, to the transcript.
MARKDOWN non-nil means TEXT is rendered."
  (let ((begin (marker-position mevedel-view--transcript-end))
        (inhibit-read-only t))
    (if markdown (mevedel-view--append-markdown text) (mevedel-view--append text))
    (put-text-property begin mevedel-view--transcript-end 'mevedel-kind 'response)))

(defun mevedel-view--append-text (chunk)
  "Append the streamed response CHUNK to the transcript, rendered.
What is settled (`mevedel-markdown-settled') is rendered once; the
unfinished line is rendered again with each chunk, and a code block
still open gets its chunks as unfontified code until it closes."
  (save-excursion
    (unless (eq mevedel-view--last-kind 'response)
      (let ((inhibit-read-only t))
        (delete-region mevedel-view--transcript-end (mevedel-view--interactions-start)))
      (mevedel-view--stop-spinner)
      (mevedel-view--begin-block 'response)
      (if mevedel-view--answer
          (set-marker mevedel-view--answer mevedel-view--transcript-end)
        (setq mevedel-view--answer (copy-marker mevedel-view--transcript-end)))
      (setq chunk (string-trim-left chunk))
      (mevedel-view--end-stream))
    (unless mevedel-view--stream
      (setq mevedel-view--stream (list (copy-marker mevedel-view--transcript-end) "" nil)))
    (pcase-let* ((`(,start ,raw ,fence) mevedel-view--stream)
                 (raw (concat raw chunk))
                 (inhibit-read-only t))
      (setf (nth 1 mevedel-view--stream) raw)
      (cond
       ((and fence (not (mevedel-markdown-closed-p fence raw (- (length raw) (length chunk)))))
        (mevedel-view--append-response (mevedel-markdown-code-text chunk)))
       ((and (not fence) (not (string-search "\n" chunk)))
        ;; RAW is the unfinished line (after the rows of a table
        ;; still growing): nothing settles.
        (if (> (length raw) mevedel-view--stream-line-chars)
            (mevedel-view--append-response chunk)
          (delete-region start mevedel-view--transcript-end)
          (mevedel-view--append-response raw t)))
       (t
        (pcase-let ((`(,settled . ,fence) (mevedel-markdown-settled raw)))
          (delete-region start mevedel-view--transcript-end)
          (when (> settled 0)
            (mevedel-view--append-response (substring raw 0 settled) t)
            (set-marker start mevedel-view--transcript-end))
          (let ((rest (substring raw settled)))
            (setf (nth 1 mevedel-view--stream) rest
                  (nth 2 mevedel-view--stream) fence)
            (if fence
                (mevedel-view--append-response (mevedel-markdown-open-block rest))
              (mevedel-view--append-response rest t)))))))))

(defun mevedel-view--end-stream ()
  "Forget the response being streamed; what is drawn stays."
  (when mevedel-view--stream
    (set-marker (car mevedel-view--stream) nil)
    (setq mevedel-view--stream nil)))

;;;; Permission cards

(defun mevedel-view--prompt (chat request)
  "Show CHAT's permission REQUEST as a card; return what takes it away.
The card is an interaction of the request that asked; its keys
settle it, and its settlement is the request's answer."
  (let ((interaction
         (mevedel-interaction-open
          chat :kind 'permission :owner (plist-get request :agent)
          :request (plist-get request :request)
          :title (mevedel-view--card-title request)
          :render (lambda (interaction)
                    (mevedel-view--card-text (mevedel-interaction-data interaction)))
          :keymap mevedel-view-card-map :data request
          :on-settle (lambda (_interaction outcome)
                       (unless (eq outcome 'withdrawn)
                         (funcall (plist-get request :answer) outcome))))))
    (lambda () (mevedel-interaction-settle interaction 'withdrawn))))

(defun mevedel-view--unfocus-card ()
  "Return point to the composer once no interaction waits, if one took it.
Point an interaction took may be left anywhere by its going (an abort
redraws the live zone and the turn's rows); point the user moved
stays."
  (when (and mevedel-view--card-focused
             (null (mevedel-interaction-list mevedel-view--chat)))
    (setq mevedel-view--card-focused nil)
    (when (< (point) mevedel-view--composer)
      (goto-char (point-max))
      (when-let* ((window (get-buffer-window (current-buffer))))
        (set-window-point window (point))))))

(defun mevedel-view--card-at-point ()
  "Return the permission card at point, or the first one."
  (let ((here (mevedel-interaction-at)))
    (or (and here (eq (mevedel-interaction-kind here) 'permission) here)
        (cl-find 'permission (mevedel-interaction-list mevedel-view--chat)
                 :key #'mevedel-interaction-kind)
        (user-error "No permission request is waiting"))))

(defun mevedel-view-allow-once ()
  "Allow the tool call of the permission card at point, this once."
  (interactive)
  (mevedel-interaction-settle (mevedel-view--card-at-point) 'once))

(defun mevedel-view-allow-session ()
  "Allow the call of the card at point, and what its card names, for the session.
The card says what that is: the tool, or for a command its command
keys (`npm test'); a card that offers no \"always\" says why."
  (interactive)
  (let* ((card (mevedel-view--card-at-point))
         (request (mevedel-interaction-data card)))
    (unless (and (plist-get request :always) (not (plist-get request :card)))
      (user-error "This card offers no \"always this session\" (%s)"
                  (or (plist-get request :why) "it asks for more sandbox permissions")))
    (mevedel-interaction-settle card 'session)))

(defun mevedel-view-deny ()
  "Deny the tool call of the permission card at point."
  (interactive)
  (mevedel-interaction-settle (mevedel-view--card-at-point) 'deny))

(defun mevedel-view-deny-and-tell (message)
  "Deny the call of the permission card at point and tell the model MESSAGE.
The model reads MESSAGE as the call's refusal: what to do instead."
  (interactive (list (progn (mevedel-view--card-at-point)
                            (read-string "Deny, and tell the model instead: "))))
  (if (string-blank-p message)
      (user-error "No message given: n denies without one")
    (mevedel-interaction-settle (mevedel-view--card-at-point)
                                (cons 'deny (string-trim message)))))

(defun mevedel-view-card-toggle-command ()
  "Show all of the command and paths of the card at point, or elide them again."
  (interactive)
  (let* ((card (mevedel-view--card-at-point))
         (request (mevedel-interaction-data card)))
    (setf (mevedel-interaction-data card)
          (plist-put request :expanded (not (plist-get request :expanded))))
    (mevedel-interaction-call-preserving-points
     (lambda () (mevedel-interaction-redraw card)))))

;;;; Addresses

(defun mevedel-view--visit-address (address)
  "Visit the backing file of the file-backed ADDRESS clicked in a view.
The address is validated and normalized through Read's preparation in
the view's session; an address without one file returns nil.  For
`mevedel-locations-address-functions'."
  (when-let* ((chat mevedel-view--chat))
    (let* ((mevedel-session-current (mevedel-chat-session chat))
           (default-directory (mevedel-chat-root chat))
           (path (condition-case err
                     (mevedel-resource-visit-path address)
                   (error (user-error "%s" (error-message-string err))))))
      (when path
        (unless (file-exists-p path)
          (user-error "%s does not exist" address))
        (find-file-other-window path)
        t))))

(add-hook 'mevedel-locations-address-functions #'mevedel-view--visit-address 50)

;;;; Rows

(defvar mevedel-view-row-visit-functions nil
  "Functions that may open what a tool row stands for, on RET.
Each is called with the view's chat, the call's tool name, arguments
and render-data; the first returning non-nil handled it (an Agent row
opens the child's view).  Otherwise RET expands or collapses the row.")

(defun mevedel-view-visit-row (&optional event)
  "Open what the tool row at point (or at mouse EVENT) stands for, else toggle it."
  (interactive (list last-nonmenu-event))
  (when (mouse-event-p event) (mouse-set-point event))
  (let* ((id (get-text-property (point) 'mevedel-row))
         (segment (and id (mevedel-view--find-tool id))))
    (unless (and segment
                 (run-hook-with-args-until-success
                  'mevedel-view-row-visit-functions mevedel-view--chat
                  (plist-get segment :name) (plist-get segment :args)
                  (plist-get segment :render-data)))
      (mevedel-view-toggle-row))))

(defun mevedel-view-toggle-row (&optional event)
  "Expand or collapse the tool row at point (or at mouse EVENT)."
  (interactive (list last-nonmenu-event))
  (when (mouse-event-p event) (mouse-set-point event))
  (let ((id (get-text-property (point) 'mevedel-row))
        (group (get-text-property (point) 'mevedel-group)))
    (cond (id (mevedel-view--toggle-call id))
          (group (mevedel-view--toggle-group group))
          (t (user-error "No tool row here")))))

(defun mevedel-view--toggle-call (id)
  "Expand or collapse the row of the tool call ID, running or finished."
  (let ((segment (mevedel-view--find-tool id)))
    (cond
     (segment
      (let* ((summary (mevedel-tool-render-row (plist-get segment :name) (plist-get segment :args)
                                               (plist-get segment :result)
                                               (plist-get segment :render-data) t))
             (expanded (mevedel-view--expanded-p id summary)))
        (when (plist-get summary :expandable-p)
          (puthash id (if expanded 'collapsed t) mevedel-view--expanded)
          (mevedel-view--redraw-row id segment))))
     ((cl-find id (mevedel-chat-live-calls mevedel-view--chat)
               :key (lambda (call) (plist-get call :id)) :test #'equal)
      (puthash id (if (eq (gethash id mevedel-view--expanded) t) 'collapsed t)
               mevedel-view--expanded)
      (let ((here (point)))
        (mevedel-interaction-call-preserving-points #'mevedel-view--render-live)
        (goto-char (min here (point-max)))))
     (t (user-error "No such call")))))

(defun mevedel-view--toggle-group (group)
  "Show or hide the rows of the coalesced GROUP at point."
  (let* ((key (concat "group:" group))
         (start (if (and (> (point) (point-min))
                         (eq (get-text-property (1- (point)) 'mevedel-group) group))
                    (previous-single-property-change (point) 'mevedel-group nil (point-min))
                  (point)))
         (segments (mapcar #'mevedel-view--find-tool
                           (get-text-property start 'mevedel-members))))
    (puthash key (if (eq (gethash key mevedel-view--expanded) t) 'collapsed t)
             mevedel-view--expanded)
    (mevedel-view--replace start (next-single-property-change start 'mevedel-group nil
                                                              mevedel-view--transcript-end)
                           (mevedel-view--group-text
                            (list :id group :members (delq nil segments))))
    (goto-char start)))

(defun mevedel-view--replace (start end text)
  "Replace the transcript's text from START to END with TEXT, read-only.
TEXT is one block, or one row of a block.  Point moves to START."
  (let ((inhibit-read-only t)
        (kind (get-text-property start 'mevedel-kind)))
    ;; The new text goes in after the old before it goes, so that the
    ;; markers at END (the next row, the transcript's end) stay after it.
    (goto-char end)
    (insert-before-markers
     (propertize text 'mevedel-kind kind 'read-only t 'front-sticky '(read-only)))
    (delete-region start end)
    (goto-char start)))

(defun mevedel-view--row-start (id)
  "Return the start of the row of call ID in this view's transcript, or nil."
  (when-let* ((part (gethash id mevedel-view--parts)))
    (mevedel-view--find 'mevedel-row id (cdr part) mevedel-view--transcript-end)))

(defun mevedel-view--redraw-row (id segment)
  "Redraw the transcript row of call ID from its data SEGMENT."
  (when-let* ((start (mevedel-view--row-start id)))
    (let ((text (propertize (or (mevedel-view--row-text segment) "") 'mevedel-row id)))
      (when-let* ((group (get-text-property start 'mevedel-group)))
        (put-text-property 0 (length text) 'mevedel-group group text))
      (mevedel-view--replace
       start (next-single-property-change start 'mevedel-row nil mevedel-view--transcript-end)
       text))))

(defun mevedel-view--refresh-row (id)
  "Redraw the row of call ID, if shown, from the data buffer.
A call a ToolCall program made (ID is PARENT/N) is drawn inside its
program's row, which is redrawn instead."
  (if (mevedel-view--row-start id)
      (when-let* ((segment (mevedel-view--find-tool id)))
        (mevedel-view--redraw-row id segment))
    (when (string-match "\\`\\(.+\\)/[0-9]+\\'" id)
      (mevedel-view--refresh-row (match-string 1 id)))))

(defun mevedel-view--reveal (id)
  "Expand the row of call ID and move point to it; return non-nil if shown.
A row of a turn not drawn yet is drawn first, with all pending turns."
  (when (and mevedel-view--pending (not (mevedel-view--row-start id)))
    (mevedel-view--fill-pending (current-buffer) t))
  (when (mevedel-view--row-start id)
    (unless (eq (gethash id mevedel-view--expanded) t)
      (when-let* ((segment (mevedel-view--find-tool id)))
        (puthash id t mevedel-view--expanded)
        (mevedel-view--redraw-row id segment)))
    (goto-char (mevedel-view--row-start id))
    (when-let* ((window (get-buffer-window (current-buffer))))
      (set-window-point window (point)))
    t))

(defun mevedel-view-show-result (&optional event)
  "Show the result row the breadcrumb at point (or at mouse EVENT) names."
  (interactive (list last-nonmenu-event))
  (when (mouse-event-p event) (mouse-set-point event))
  (let ((id (or (get-text-property (point) 'mevedel-breadcrumb)
                (get-text-property (point) 'mevedel-row))))
    (unless (and id (mevedel-view--reveal id))
      (user-error "No command result here"))))

(defun mevedel-view-show-call (chat id)
  "Show CHAT's view with the row of tool call ID expanded at point.
Return non-nil when the row is in the view."
  (let ((buffer (mevedel-view-buffer chat)))
    (pop-to-buffer buffer)
    (with-current-buffer buffer
      (mevedel-view--reveal id))))

;;;; The panel

(defun mevedel-view-panel-bounds ()
  "Return (START . END) of the current view's panel, or nil without a view.
The panel lies between the live zone and the separator; the file that
draws it (mevedel-panel.el) replaces it with `mevedel-view-replace-panel'."
  (and mevedel-view--panel
       (cons (marker-position mevedel-view--panel) (marker-position mevedel-view--separator))))

(defun mevedel-view-replace-panel (text)
  "Replace the current view's panel with TEXT, read-only; return its start."
  (let ((start (marker-position mevedel-view--panel))
        (inhibit-read-only t))
    (save-excursion
      (delete-region start mevedel-view--separator)
      (goto-char start)
      (insert (propertize text 'read-only t))
      (set-marker mevedel-view--panel start))
    start))

;;;; Composer

(defun mevedel-view--composer-text ()
  "Return the composer's text, its mentions' bindings kept."
  (mevedel-mentions-bound-text mevedel-view--composer (point-max)))

(defun mevedel-view-of (chat)
  "Return CHAT's live view buffer, or nil when it has none (a headless run)."
  (when-let* ((buffer (get-buffer (format "*mevedel: %s*" (mevedel-chat-name chat))))
              ((eq (buffer-local-value 'mevedel-view--chat buffer) chat)))
    buffer))

(defun mevedel-view--draft-holds (chat)
  "Return \"the composer's draft\" when CHAT's view has one, else nil.
A `mevedel-mailbox-hold-functions' member: a background turn does not
start under the user's typing."
  (when-let* ((buffer (mevedel-view-of chat)))
    (with-current-buffer buffer
      (and mevedel-view--composer
           (not (string-blank-p (mevedel-view--composer-text)))
           "the composer's draft"))))

(add-hook 'mevedel-mailbox-hold-functions #'mevedel-view--draft-holds)

(defun mevedel-view--set-composer (text)
  "Replace the composer's text with TEXT."
  (let ((inhibit-read-only t))
    (delete-region mevedel-view--composer (point-max))
    (goto-char (point-max))
    (insert text)))

(defun mevedel-view--slash (text &optional chat)
  "Return (FUNCTION . ARGUMENT) when TEXT is a composer command, else nil.
TEXT is a command when it is one line starting with /WORD; a WORD that
names no command in `mevedel-view-slash-commands' (nor one of CHAT's
own, `mevedel-view-slash-command-functions') is a user error."
  (when (string-match "\\`/\\([[:alnum:]_-]+\\)\\(?:[ \t]+\\(.*?\\)\\)?[ \t\n]*\\'" text)
    (let* ((name (match-string 1 text))
           (argument (match-string 2 text))
           (entry (assoc name (mevedel-view--slash-entries chat name))))
      (unless entry
        (user-error "Unknown command /%s (commands: %s); to send it to the model, start with a space"
                    name
                    (mapconcat (lambda (entry) (concat "/" (car entry)))
                               mevedel-view-slash-commands ", ")))
      (cons (cadr entry) (or argument "")))))

(defvar mevedel-view--help-keymaps
  (list (cons "On a tool row" 'mevedel-view-row-map)
        (cons "On a row's breadcrumb line" 'mevedel-view-breadcrumb-map)
        (cons "On a place (file:line) in a row or an answer" 'mevedel-locations-map)
        (cons "On a permission card" 'mevedel-view-card-map))
  "Where /help finds the view's keys besides its own: (TITLE . KEYMAP-SYMBOL).
Files drawing cards and parts of the view add theirs with
`mevedel-view-register-help-keys'.")

(defun mevedel-view-register-help-keys (title keymap)
  "List the keys of KEYMAP, a symbol, in /help under TITLE.
Registering TITLE again replaces its entry."
  (setf (alist-get title mevedel-view--help-keymaps nil nil #'equal) keymap))

(defun mevedel-view-help (&optional chat _argument)
  "Show the composer's commands (CHAT's own too) and the view's keys (/help)."
  (interactive)
  (with-help-window "*mevedel help*"
    (princ "Composer commands (type them in the composer, then send):\n\n")
    (dolist (entry (sort (copy-sequence (mevedel-view--slash-entries chat ""))
                         (lambda (a b) (string< (car a) (car b)))))
      (princ (format "  /%-10s %s\n" (car entry) (nth 2 entry))))
    (princ "\nAnything else starting with / is refused, not sent; start with a space\n")
    (princ "to send such text to the model.  A character typed in the transcript,\n")
    (princ "outside a card, goes to the end of the composer.\n\nKeys of the view:\n")
    (princ (substitute-command-keys "\\{mevedel-view-mode-map}"))
    (pcase-dolist (`(,title . ,keymap) mevedel-view--help-keymaps)
      (when (and (boundp keymap) (keymapp (symbol-value keymap)))
        (princ (format "\n%s:\n" title))
        (princ (substitute-command-keys (format "\\{%s}" keymap)))))))

(mevedel-view-register-slash-command "help"
  #'mevedel-view-help "list the composer's commands and the view's keys")

(defun mevedel-view--slash-capf ()
  "Complete composer command names, then the arguments of a command.
Arguments complete from the command's COMPLETE function (see
`mevedel-view-slash-commands')."
  (when (and mevedel-view--composer (>= (point) mevedel-view--composer))
    (let ((before (buffer-substring-no-properties mevedel-view--composer (point))))
      (cond ((string-match "\\`/\\([[:alnum:]_-]*\\)\\'" before)
             (let ((entries (mevedel-view--slash-entries mevedel-view--chat
                                                         (match-string 1 before))))
               (list (1+ mevedel-view--composer) (point)
                     (mapcar #'car entries)
                     :annotation-function
                     (lambda (name)
                       (concat "  " (nth 2 (assoc name entries)))))))
            ((string-match "\\`/\\([[:alnum:]_-]+\\)\\(?:[ \t]+[^ \t\n]+\\)*[ \t]+\\([^ \t\n]*\\)\\'"
                           before)
             (when-let* ((name (match-string 1 before))
                         (start (- (point) (length (match-string 2 before))))
                         (complete (nth 3 (assoc name (mevedel-view--slash-entries
                                                       mevedel-view--chat name)))))
               (list start (point)
                     (funcall complete mevedel-view--chat))))))))

(defun mevedel-view-send ()
  "Send the composer's text to the model.
A composer command (see `mevedel-view-slash-commands') runs here
instead."
  (interactive)
  (let* ((chat mevedel-view--chat)
         (raw (mevedel-view--composer-text))
         (slash (mevedel-view--slash raw chat))
         (text (string-trim raw)))
    (cond
     ((mevedel-chat-agent chat)
      (user-error "This view of %s only looks; reach the agent with SendMessage from its parent"
                  (mevedel-chat-agent chat)))
     (slash
      ;; A handled command leaves the composer, even when it fails.
      (mevedel-view--set-composer "")
      (setq mevedel-view--history-index nil mevedel-view--draft nil)
      (funcall (car slash) chat (cdr slash)))
     ((string-empty-p text) (user-error "The composer is empty"))
     ((mevedel-chat-busy-p chat)
      (mevedel-view--set-composer "")
      (setq mevedel-view--history-index nil mevedel-view--draft nil)
      (mevedel-chat-queue chat text)
      (message "%s" (substitute-command-keys
                     "Queued for after the current tool calls; \\[mevedel-view-unqueue] takes it back")))
     (t
      (mevedel-view--set-composer "")
      (setq mevedel-view--history-index nil mevedel-view--draft nil)
      (condition-case err
          (mevedel-chat-send chat text)
        (error
         ;; Not sent: the prompt goes back to the composer (it is in
         ;; the history too), and the view says why.
         (let* ((backend (eq (car err) 'mevedel-chat-backend-error))
                (why (if backend (cadr err) (error-message-string err))))
           (mevedel-view--set-composer raw)
           (setq mevedel-view--problem (cons why backend))
           (save-excursion (mevedel-view--render-live))
           (if backend (user-error "%s" why) (signal (car err) (cdr err))))))))))

(defun mevedel-view-use-demo ()
  "Talk to the offline demo model in this view's session."
  (interactive)
  (require 'mevedel-demo)
  (mevedel-demo-attach mevedel-view--chat)
  (setq mevedel-view--problem nil)
  (save-excursion (mevedel-view--render-live))
  (force-mode-line-update)
  (message "%s" (substitute-command-keys
                 "The offline demo model answers now; \\<mevedel-view-mode-map>\\[mevedel-view-send] sends")))

(defun mevedel-view--problem-text (problem)
  "Return the live zone's lines for PROBLEM, (MESSAGE . BACKEND-P)."
  (concat "\n" (propertize (concat "⚠ Not sent: " (car problem)) 'face 'mevedel-view-error) "\n"
          (if (cdr problem)
              (concat "  Fix the backend and send again, or "
                      (buttonize "use the offline demo model"
                                 (lambda (_) (mevedel-view-use-demo)))
                      " (M-x mevedel-view-use-demo).\n")
            "  The prompt is back in the composer.\n")))

(defun mevedel-view--show-queued ()
  "Show the chat's queued messages just above the separator line."
  (let ((queued (mevedel-chat-queued mevedel-view--chat)))
    (if (not queued)
        (when mevedel-view--queued-overlay
          (delete-overlay mevedel-view--queued-overlay)
          (setq mevedel-view--queued-overlay nil))
      (unless mevedel-view--queued-overlay
        (setq mevedel-view--queued-overlay
              (make-overlay mevedel-view--separator mevedel-view--separator nil t t)))
      (move-overlay mevedel-view--queued-overlay mevedel-view--separator mevedel-view--separator)
      (overlay-put mevedel-view--queued-overlay 'before-string
                   (propertize
                    (concat "\n" (mapconcat (lambda (text)
                                              (concat "⏵ queued: "
                                                      (truncate-string-to-width
                                                       (car (split-string text "\n")) 72 nil nil "…")))
                                            queued "\n")
                            (substitute-command-keys
                             "\n  (sent after the current tool calls; \\[mevedel-view-unqueue] takes the last back)"))
                    'face 'mevedel-view-notice)))))

(defun mevedel-view-unqueue ()
  "Take the newest queued message back into the composer, to edit or drop."
  (interactive)
  (unless (string-blank-p (mevedel-view--composer-text))
    (user-error "Empty the composer first"))
  (let ((text (or (mevedel-chat-unqueue mevedel-view--chat)
                  (user-error "Nothing is queued"))))
    (mevedel-view--set-composer text)))

(defun mevedel-view-abort ()
  "Abort the running turn."
  (interactive)
  (unless (mevedel-chat-abort mevedel-view--chat)
    (message "Nothing to abort")))

(defun mevedel-view--history-step (delta)
  "Move DELTA entries through the input history."
  (let* ((history (mevedel-chat-history mevedel-view--chat))
         (index (+ (or mevedel-view--history-index -1) delta)))
    (cond ((< index -1) (user-error "End of history"))
          ((>= index (length history)) (user-error "Beginning of history")))
    (unless mevedel-view--history-index
      (setq mevedel-view--draft (mevedel-view--composer-text)))
    (setq mevedel-view--history-index (and (>= index 0) index))
    (mevedel-view--set-composer (if (>= index 0) (nth index history) (or mevedel-view--draft "")))))

(defun mevedel-view-history-previous ()
  "Replace the composer's text with the previous input."
  (interactive)
  (mevedel-view--history-step 1))

(defun mevedel-view-history-next ()
  "Replace the composer's text with the next input."
  (interactive)
  (mevedel-view--history-step -1))

(defvar mevedel-view-model-choice-functions nil
  "Functions giving more choices of the model switcher and /model.
Each is called with the chat and returns a list of (LABEL . SELECT),
SELECT a function of the chat that makes it answer with LABEL's
choice (mevedel-acp.el offers its ACP agents and their models).")

(defvar mevedel-view-provider-functions nil
  "Functions naming what answers a chat's next turn instead of gptel.
Each is called with the chat and returns the name the header shows,
or nil when gptel's backend and model answer it.")

(defun mevedel-view--model-choices (&optional chat)
  "Return (LABEL . SELECT) for every model gptel knows and the other choices.
SELECT makes a chat use it; CHAT, when given, is offered the choices of
`mevedel-view-model-choice-functions' too."
  (append
   (mapcan (pcase-lambda (`(,name . ,backend))
             (mapcar (lambda (model)
                       (let ((model (if (consp model) (car model) model)))
                         (cons (format "%s:%s" name model)
                               (lambda (chat) (mevedel-chat-set-model chat backend model)))))
                     (gptel-backend-models backend)))
           (mevedel-gptel-backends))
   (and chat (cl-loop for function in mevedel-view-model-choice-functions
                      append (funcall function chat)))))

(defun mevedel-view--provider-name (chat)
  "Return the name of what answers CHAT's next turn.
That is its provider, or its gptel backend / model."
  (or (run-hook-with-args-until-success 'mevedel-view-provider-functions chat)
      (let ((backend (mevedel-chat-backend-effective chat))
            (model (mevedel-chat-model-effective chat)))
        (concat (if backend (gptel-backend-name backend) "no backend")
                (if model (format " / %s" model) "")))))

(defun mevedel-view-set-model (choice)
  "Use CHOICE for this session (/model).
CHOICE is \"BACKEND:MODEL\" of gptel's backends, or another choice of
`mevedel-view-model-choice-functions' (an ACP agent, or one of its models)."
  (interactive
   (list (completing-read
          (format "Model for this session (now %s): "
                  (mevedel-view--provider-name mevedel-view--chat))
          (mapcar #'car (mevedel-view--model-choices mevedel-view--chat)) nil t)))
  (let ((select (or (cdr (assoc choice (mevedel-view--model-choices mevedel-view--chat)))
                    (user-error "No model %s among gptel's backends (see `gptel-make-openai' and \
friends to add one)" choice))))
    (funcall select mevedel-view--chat)
    (force-mode-line-update)
    (message "This session now uses %s" choice)))

(defun mevedel-view--slash-model (_chat argument)
  "Choose this session's backend and model (/model [BACKEND:MODEL]).
ARGUMENT is the choice; empty, it is asked for."
  (if (string-blank-p argument)
      (call-interactively #'mevedel-view-set-model)
    (mevedel-view-set-model (string-trim argument))))

(mevedel-view-register-slash-command "model"
  #'mevedel-view--slash-model "choose this session's backend and model (/model B:M)"
  (lambda (chat) (mapcar #'car (mevedel-view--model-choices chat))))

(defun mevedel-view-set-permission-mode (mode)
  "Set this session's permission MODE."
  (interactive
   (list (intern (completing-read "Permission mode: "
                                  (mapcar #'symbol-name mevedel-permissions-modes) nil t))))
  (mevedel-plan-set-mode (mevedel-chat-session mevedel-view--chat) mode)
  (force-mode-line-update))

;;;; Entry point

(defun mevedel-view-chat (&optional buffer)
  "Return the chat shown in view BUFFER (default the current buffer)."
  (buffer-local-value 'mevedel-view--chat (or buffer (current-buffer))))

(provide 'mevedel-view)
;;; mevedel-view.el ends here
