;;; mevedel-mentions.el --- @file, @agent and $skill in the user's text  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Mentions are operations the user writes in a message; the text the
;; model reads keeps them as written, and what they do comes as
;; labelled blocks sent with it (mail, `mevedel-chat-message-functions'):
;;
;; - @PATH attaches the file's current content (a modified buffer
;;   visiting it counts), @PATH:10-40 lines 10 to 40, as an
;;   <attachment> block, bounded by `mevedel-mentions-file-budget';
;; - @AGENT, a role `mevedel-mentions-agent-names' returns,
;;   asks the model to delegate the task to that agent;
;; - $NAME invokes the skill NAME for the turn: its instructions, and
;;   its tool restriction (mevedel-skills.el).  A name fitting two
;;   skills is an error naming their exact addresses.
;;
;; A token that names no file, agent or skill stays plain text.  A
;; mention completion inserted keeps what it was completed to (its
;; binding), whatever the text around it becomes.  The view draws
;; mentions as chips (`mevedel-mentions-chips').

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-agent-roles)
(require 'mevedel-prompt)
(require 'mevedel-skills)

(defvar mevedel-chat-turn-text)

(defgroup mevedel-mentions nil
  "Mentions in the user's messages."
  :group 'mevedel
  :prefix "mevedel-mentions-")

(defcustom mevedel-mentions-file-budget 60000
  "Characters an attached file may take in a request."
  :type 'natnum)

(defvar mevedel-mentions--agent-names nil
  "The agent roles of the workspace, as last read at a turn's end.")

(defun mevedel-mentions-agent-names ()
  "Return the agent roles @NAME can ask to delegate to.
Completion runs on keystrokes, so this reads no role files: it is the
list `mevedel-mentions-refresh-agent-names' read last, else the
built-in roles."
  (or mevedel-mentions--agent-names (mevedel-agent-builtin-role-names)))

(defun mevedel-mentions-refresh-agent-names (directory)
  "Read the agent roles of the workspace DIRECTORY for @NAME."
  (setq mevedel-mentions--agent-names
        (ignore-errors (mevedel-agent-role-names directory))))

(defface mevedel-mentions-chip '((t :inherit (highlight fixed-pitch) :box (:line-width -1)))
  "Face of a mention in the view.")

(defvar mevedel-mentions--skill-names nil
  "Skill names the last parse knew of, for drawing chips without looking.")

;;;; Finding mentions

(defun mevedel-mentions--skill-names ()
  "Return the names of the discovered skills, and remember them for chips."
  (setq mevedel-mentions--skill-names
        (or (mapcar (lambda (s) (plist-get s :name)) (mevedel-skills-list)) '(""))))

(defconst mevedel-mentions-regexp
  (concat "\\(?:^\\|[ \t\n(]\\)\\(\\([@$]\\)\\([[:alnum:]_./~+-]*[[:alnum:]_/~+-]\\)"
          "\\(?::\\([0-9]+\\)\\(?:-\\([0-9]+\\)\\)?\\)?\\)")
  "A mention: group 1 the whole token, 2 its sigil, 3 the name, 4-5 a line range.")

(defun mevedel-mentions-parse (text root)
  "Return the mentions of TEXT for workspace ROOT, in order.
Each is a plist (:kind file|agent|skill :token STRING :start :end) plus
:file, :from and :to for files, :name for agents and skills (and
:spec, an exact skill address, for a skill bound by completion).
Mentions bound by completion (`mevedel-mentions-bind') are taken as
bound, but for bound MCP resources (mevedel-mcp-mentions.el's); the
rest of TEXT is parsed from its spelling."
  (let* ((bound (mevedel-mentions-bound text))
         (mentions (reverse (cl-remove 'mcp bound :key (lambda (m) (plist-get m :kind)))))
         (start 0)
         (agents (mevedel-mentions-agent-names))
         (skills nil))
    (while (string-match mevedel-mentions-regexp text start)
      (setq start (match-end 1))
      (let* ((sigil (match-string 2 text)) (name (match-string 3 text))
             (from (match-string 4 text)) (to (match-string 5 text))
             (base (list :token (match-string 1 text)
                         :start (match-beginning 1) :end (match-end 1))))
        (cond
         ((cl-some (lambda (m) (and (< (match-beginning 1) (plist-get m :end))
                                    (> (match-end 1) (plist-get m :start))))
                   bound))
         ((equal sigil "$")
          (when (and (null from)
                     (member name (or skills
                                      (setq skills (mevedel-mentions--skill-names)))))
            (push (append (list :kind 'skill :name name) base) mentions)))
         (t
          (let ((file (expand-file-name name root)))
            (cond ((file-regular-p file)
                   (push (append (list :kind 'file :file file
                                       :from (and from (string-to-number from))
                                       :to (and from (string-to-number (or to from))))
                                 base)
                         mentions))
                  ((and (null from) (member name agents))
                   (push (append (list :kind 'agent :name name) base) mentions))))))))
    (sort (nreverse mentions)
          (lambda (a b) (< (plist-get a :start) (plist-get b :start))))))

;;;; Bound mentions

;; Completion binds the mention it inserts: the token carries its
;; exact locator as the hidden `mevedel-mention' property (the file's
;; absolute name, the agent's name, the skill's exact address, an MCP
;; resource's server and URI), which
;; the composer's text keeps through drafts, the queue and a send that
;; failed.  Text typed around the token leaves it bound; an edit inside
;; it unbinds it, and it is parsed from its spelling again.

(defun mevedel-mentions-bind (start end binding)
  "Bind the mention between START and END of this buffer to BINDING.
BINDING is (:kind file :file ABSOLUTE), (:kind agent :name NAME),
\(:kind skill :name NAME [:spec EXACT-ADDRESS]) or (:kind mcp :server
NAME :uri URI), the last for an @SERVER:URI resource, which
mevedel-mcp-mentions.el reads.  Text typed just after the token does
not join it."
  (add-text-properties
   start end
   (list 'mevedel-mention (append (list :token (buffer-substring-no-properties start end))
                                  binding)
         'rear-nonsticky '(mevedel-mention))))

(defun mevedel-mentions-bound-text (start end)
  "Return this buffer's text from START to END with only its bindings."
  (let ((text (buffer-substring-no-properties start end)) (pos start))
    (while (< pos end)
      (let ((next (next-single-property-change pos 'mevedel-mention nil end)))
        (when-let* ((binding (get-text-property pos 'mevedel-mention)))
          (put-text-property (- pos start) (- next start) 'mevedel-mention binding text))
        (setq pos next)))
    text))

(defun mevedel-mentions-bound (text)
  "Return the mentions TEXT binds whose token is still as completed.
A bound file that no longer exists is no mention."
  (let ((pos 0) (end (length text)) out)
    (while (< pos end)
      (let ((next (next-single-property-change pos 'mevedel-mention text end))
            (binding (get-text-property pos 'mevedel-mention text)))
        (when (and binding
                   (equal (substring-no-properties text pos next) (plist-get binding :token))
                   (or (not (eq (plist-get binding :kind) 'file))
                       (file-regular-p (plist-get binding :file))))
          (push (append (list :start pos :end next) binding) out))
        (setq pos next)))
    (nreverse out)))

;;;; What mentions send

(defun mevedel-mentions--file-text (file)
  "Return FILE's current text: a modified buffer visiting it, else the file."
  (let ((buffer (find-buffer-visiting file)))
    (if (and buffer (buffer-modified-p buffer))
        (with-current-buffer buffer
          (save-restriction (widen) (buffer-substring-no-properties (point-min) (point-max))))
      (with-temp-buffer
        (insert-file-contents file)
        (buffer-string)))))

(defcustom mevedel-mentions-file-size-limit (* 8 1024 1024)
  "Bytes beyond which a mentioned file is not attached (the model can Read it)."
  :type 'natnum)

(defun mevedel-mentions-attachment (mention root)
  "Return the <attachment> block of file MENTION, relative to ROOT."
  (if (> (or (file-attribute-size (file-attributes (plist-get mention :file))) 0)
         mevedel-mentions-file-size-limit)
      (format "<attachment kind=\"file\" path=\"%s\">\nNot attached: the file is larger \
than %d bytes; Read it in pages instead.\n</attachment>"
              (file-relative-name (plist-get mention :file) root)
              mevedel-mentions-file-size-limit)
    (mevedel-mentions--attachment mention root)))

(defun mevedel-mentions--attachment (mention root)
  "Return the <attachment> block of file MENTION, relative to ROOT, read now."
  (let* ((file (plist-get mention :file))
         (lines (split-string (mevedel-mentions--file-text file) "\n"))
         (lines (if (and lines (string-empty-p (car (last lines)))) (butlast lines) lines))
         (from (max 1 (or (plist-get mention :from) 1)))
         (to (min (length lines) (or (plist-get mention :to) (length lines))))
         (body (mapconcat #'identity
                          (cl-loop for n from from to to
                                   collect (format "%6d\t%s" n (nth (1- n) lines)))
                          "\n")))
    (format "<attachment kind=\"file\" path=\"%s\"%s>\n%s\n</attachment>"
            (file-relative-name file root)
            (if (plist-get mention :from) (format " lines=\"%d-%d\"" from to) "")
            (mevedel-prompt-truncate body mevedel-mentions-file-budget
                                     (file-relative-name file root)))))

(defun mevedel-mentions-blocks (chat text)
  "Return the blocks TEXT's mentions send in CHAT's turn; apply its skills.
A skill mention restricts the turn's tools when the skill says so."
  (let ((root (file-name-as-directory (expand-file-name (mevedel-prompt-chat-root chat)))))
    (cl-loop
     for mention in (mevedel-mentions-parse text root)
     collect
     (pcase (plist-get mention :kind)
       ('file (mevedel-mentions-attachment mention root))
       ('agent (format "<delegation-request agent=\"%s\">\nThe user asks that this task \
be delegated to the %s agent: start it with the Agent tool (give it the task and what \
it needs) instead of doing the work yourself.\n</delegation-request>"
                       (plist-get mention :name) (plist-get mention :name)))
       ('skill (let ((skill (mevedel-skills-find (or (plist-get mention :spec)
                                                     (plist-get mention :name)))))
                 (mevedel-skills-restrict (mevedel-prompt-chat-data-buffer chat) skill)
                 (mevedel-skills-instructions skill)))))))

(defun mevedel-mentions-message-function (chat)
  "Return the mention blocks of CHAT's turn text (`mevedel-chat-turn-text')."
  (and mevedel-chat-turn-text
       (string-match-p "[@$]" mevedel-chat-turn-text)
       (mevedel-mentions-blocks chat mevedel-chat-turn-text)))

;;;; In the view

(defun mevedel-mentions-chips (text)
  "Return TEXT with its mentions drawn as chips.
Only the spelling decides (no file or skill is looked up): @ with a
path-like name, a line range or an agent's name, $ with a skill name
seen when a message was sent."
  (if (not (string-match-p "[@$]" text))
      text
    (let ((text (copy-sequence text)) (start 0)
          (agents (mevedel-mentions-agent-names)))
      (while (string-match mevedel-mentions-regexp text start)
        (setq start (match-end 1))
        (let* ((sigil (match-string 2 text)) (name (match-string 3 text))
               (kind (cond ((equal sigil "$")
                            (and (member name mevedel-mentions--skill-names) "skill"))
                           ((or (match-beginning 4) (string-match-p "[./]" name)) "file")
                           ((member name agents) "agent"))))
          (when kind
            (add-text-properties (match-beginning 1) (match-end 1)
                                 (list 'face 'mevedel-mentions-chip
                                       'help-echo (format "A %s mention: sent with this message"
                                                          kind))
                                 text))))
      text)))

(provide 'mevedel-mentions)
;;; mevedel-mentions.el ends here
