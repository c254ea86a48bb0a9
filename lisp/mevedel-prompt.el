;;; mevedel-prompt.el --- The system prompt, assembled from components  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; What the model is told about itself, its tools and the workspace is
;; an ordered list of registered *prompt components*
;; (`mevedel-system-components'): a symbol defined with
;; `mevedel-prompt-define-component' (a function of the chat, or a
;; file), a literal string, or an inline (NAME :file PATH) or (NAME
;; :text STRING) entry.  `mevedel-prompt-system-text' assembles them for
;; a chat; agent roles pass their own list.
;;
;; Prompt cache.  The provider caches the request prefix, so the system
;; text must not change from turn to turn.  Each component has a
;; placement:
;;
;; - `system': rendered into the system text at the chat's first turn
;;   and frozen there.  When its text changes later (an AGENTS.md
;;   edited, a memory written) the new text reaches the model as a
;;   context update, and the system text stays as it was;
;; - `update': never in the system text; its text is a context update
;;   whenever it differs from what the model last read (environment,
;;   journal map).
;;
;; A context update is one labelled user-role block,
;; <context-update component="NAME">…</context-update>, sent as mail
;; before the user's text of a turn (`mevedel-chat-message-functions'):
;; it stays in the transcript, so it is sent once, and counts as read
;; only when the backend accepted the turn.
;;
;; Budgets.  Each component has a character budget (its own, else
;; `mevedel-prompt-component-budget'), and the system text as a whole
;; `mevedel-prompt-system-budget'; a cut text ends with a visible note
;; saying how much was left out.  File contents are cached by file
;; identity (size, modification time, inode): an unchanged file is
;; never read again.  See docs/prompt.md.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'url-util)

;;;; Customization

(defgroup mevedel-prompt nil
  "The system prompt and what the model is told about the workspace."
  :group 'mevedel
  :prefix "mevedel-prompt-")

(defcustom mevedel-system-components
  '(identity tool-guidance environment workspace-instructions memory-index
             journal-map resource-roster skills-roster agent-roles)
  "Prompt components of a main session, in order.
Each entry is a component symbol (`mevedel-prompt-define-component'),
a string (literal text), or (NAME :file PATH) / (NAME :text STRING)."
  :type '(repeat (choice symbol string sexp)))

(defcustom mevedel-prompt-identity
  "You are mevedel, a coding agent working inside Emacs on the user's project.
Use the tools to read and search files instead of guessing their contents, \
and cite file names with line numbers when you refer to code.  Change files \
with ApplyPatch, not with shell commands.  Keep answers short and concrete.  \
When a tool fails or a call is refused, read the message, adjust, and tell \
the user what happened."
  "Identity and working rules: the first component of the system prompt."
  :type 'string)

(defcustom mevedel-prompt-component-budget 12000
  "Characters a component may take in the prompt unless it sets its own."
  :type 'natnum)

(defcustom mevedel-prompt-system-budget 60000
  "Characters the whole system text may take."
  :type 'natnum)

;;;; The chat, as components see it

(cl-defstruct (mevedel-prompt-chat (:constructor nil) (:copier nil))
  "What prompt components read of a chat: its workspace root and data buffer.
The chat record (`mevedel-chat') includes it, so that the components,
which mevedel-chat.el requires, need nothing from that file."
  root data-buffer)

;;;; Registry

(defvar mevedel-prompt--components (make-hash-table :test #'eq)
  "Registered components: symbol -> plist.
The plist's keys: :function :file :budget :placement :doc.")

(cl-defun mevedel-prompt-define-component (name &key function file budget
                                                (placement 'system) doc)
  "Register prompt component NAME, a symbol.
FUNCTION, called with the chat, returns the component's text or nil;
FILE instead names a file whose text it is.  BUDGET bounds its
characters (default `mevedel-prompt-component-budget').  PLACEMENT is
`system' (frozen in the system text; later changes sent as context
updates) or `update' (always a context update).  DOC says what it is,
for /context."
  (unless (or function file)
    (error "Prompt component %s needs :function or :file" name))
  (unless (memq placement '(system update))
    (error "Prompt component %s: placement must be `system' or `update'" name))
  (puthash name (list :function function :file file :budget budget
                      :placement placement :doc doc)
           mevedel-prompt--components)
  name)

(defun mevedel-prompt-component (name)
  "Return the plist of registered component NAME, or nil."
  (gethash name mevedel-prompt--components))

(defun mevedel-prompt--entry (entry)
  "Return ENTRY of a component list as (NAME . PLIST), or nil if unknown."
  (pcase entry
    ((pred stringp) (cons 'text (list :text entry :placement 'system)))
    ((pred symbolp) (let ((plist (mevedel-prompt-component entry)))
                      (and plist (cons entry plist))))
    (`(,(and name (pred symbolp)) :file ,file)
     (cons name (list :file file :placement 'system)))
    (`(,(and name (pred symbolp)) :text ,text)
     (cons name (list :text text :placement 'system)))))

;;;; File texts, cached by identity

(defvar mevedel-prompt--files (make-hash-table :test #'equal)
  "Texts of files read for the prompt: absolute name -> (STAMP . TEXT).")

(defun mevedel-prompt-file-stamp (file)
  "Return FILE's stamp (`mevedel-core-file-stamps'), or nil when it is missing."
  (car (mevedel-core-file-stamps (list (expand-file-name file)))))

(defun mevedel-prompt-file-text (file &optional stamp)
  "Return the text of FILE, or nil when it is not a readable regular file.
The text is read again only when the file's stamp (size, modification
time, inode) changed since the last read.  STAMP, when the caller has
it already, saves looking again.  A relative FILE is expanded."
  (let* ((file (if (file-name-absolute-p file) file (expand-file-name file)))
         (stamp (or stamp (car (mevedel-core-file-stamps (list file))))))
    (if (not (and stamp (string-prefix-p "f:" stamp)))
        (progn (remhash file mevedel-prompt--files) nil)
      (let ((cached (gethash file mevedel-prompt--files)))
        (if (equal (car cached) stamp)
            (cdr cached)
          (let ((text (condition-case nil
                          (with-temp-buffer
                            (insert-file-contents file)
                            (buffer-string))
                        (file-error nil))))
            (puthash file (cons stamp text) mevedel-prompt--files)
            text))))))

;;;; Budgets

(defun mevedel-prompt-truncate (text budget &optional label)
  "Return TEXT cut to BUDGET characters, with a note when cut.
LABEL names what was cut in the note."
  (if (or (null budget) (<= (length text) budget))
      text
    (let ((note (format "\n[… %s truncated: %d of %d characters shown]"
                        (or label "text") budget (length text))))
      (concat (substring text 0 budget) note))))

;;;; Rendering

(defun mevedel-prompt-workspace (chat)
  "Return CHAT's workspace root as a directory name."
  (file-name-as-directory (mevedel-prompt-chat-root chat)))

(defun mevedel-prompt-directory (chat)
  "Return the working directory of CHAT's tools, as a directory name.
That is its data buffer's: a child agent's own working directory, the
workspace root for any other chat."
  (file-name-as-directory
   (expand-file-name (buffer-local-value 'default-directory (mevedel-prompt-chat-data-buffer chat)))))

(defun mevedel-prompt-hexify (path)
  "Return PATH percent-encoded for an address, slashes kept.
The common case, a name of unreserved characters only, costs nothing."
  (if (string-match-p "[^A-Za-z0-9._~/-]" path)
      (mapconcat #'url-hexify-string (split-string path "/") "/")
    path))

(defun mevedel-prompt--raw (name plist chat)
  "Return the text of component NAME with PLIST for CHAT, unbounded."
  (let ((text (cond ((plist-member plist :text) (plist-get plist :text))
                    ((plist-get plist :function)
                     (condition-case err
                         (funcall (plist-get plist :function) chat)
                       (error (format "[component %s failed: %s]"
                                      name (error-message-string err)))))
                    ((plist-get plist :file)
                     (mevedel-prompt-file-text
                      (expand-file-name (plist-get plist :file)
                                        (mevedel-prompt-workspace chat)))))))
    (and (stringp text) (not (string-blank-p text)) (mevedel-prompt--trim-end text))))

(defun mevedel-prompt--trim-end (text)
  "Return TEXT without trailing whitespace, TEXT itself when it has none.
Only the end is looked at, however long TEXT is."
  (let ((end (length text)))
    (while (and (> end 0) (memq (aref text (1- end)) '(?\s ?\t ?\n ?\r)))
      (setq end (1- end)))
    (if (= end (length text)) text (substring text 0 end))))

(defvar mevedel-prompt--warned nil
  "Unknown component entries already warned about.")

(defun mevedel-prompt-render (chat &optional components)
  "Return CHAT's COMPONENTS rendered: a list of (NAME PLACEMENT TEXT).
COMPONENTS defaults to `mevedel-system-components'.  TEXT, within the
component's budget, is nil for a component with nothing to say.  An
unknown entry is skipped with one warning."
  (with-current-buffer (let ((buffer (mevedel-prompt-chat-data-buffer chat)))
                         (if (buffer-live-p buffer) buffer (current-buffer)))
    (mevedel-prompt--render chat (or components mevedel-system-components))))

(defun mevedel-prompt--render (chat components)
  "Return CHAT's COMPONENTS rendered, as `mevedel-prompt-render' does."
  (cl-loop for entry in components
           for item = (mevedel-prompt--entry entry)
           if (null item)
           do (unless (member entry mevedel-prompt--warned)
                (push entry mevedel-prompt--warned)
                (display-warning 'mevedel (format "Unknown prompt component %S; skipped" entry)))
           else collect
           (let* ((name (car item)) (plist (cdr item))
                  (text (mevedel-prompt--raw name plist chat)))
             (list name (plist-get plist :placement)
                   (and text (mevedel-prompt-truncate
                              text (or (plist-get plist :budget)
                                       mevedel-prompt-component-budget)
                              (format "component %s" name)))))))

(defun mevedel-prompt--join (rendered)
  "Return the system text of RENDERED components within the overall budget."
  (mevedel-prompt-truncate
   (mapconcat #'identity
              (cl-loop for (_name placement text) in rendered
                       when (and text (eq placement 'system)) collect text)
              "\n\n")
   mevedel-prompt-system-budget "system prompt"))

;;;; Per-chat state: the frozen system text and what the model read

(defvar mevedel-prompt--states (make-hash-table :test #'eq :weakness 'key)
  "Per chat: plist (:components :system :rendered :read :pending).
:system is the frozen system text; :rendered (TIME . COMPONENTS) what
it was made of, which the turn's context updates use when they follow
within a second; :read an alist
NAME -> text the model has read; :pending the updates sent with the
current turn.")

(defun mevedel-prompt--state (chat)
  "Return CHAT's prompt state plist, made if needed."
  (or (gethash chat mevedel-prompt--states)
      (puthash chat (list :components nil :system nil :read nil :pending nil)
               mevedel-prompt--states)))

(defun mevedel-prompt-system-text (chat &optional components)
  "Return the system text for CHAT's next request.
COMPONENTS overrides `mevedel-system-components'.  The text is
assembled at the chat's first request and stays the same afterwards
\(the provider's prompt cache), until the component list changes or
`mevedel-prompt-reset' runs; what changes meanwhile reaches the model
as context updates (`mevedel-prompt-context-updates')."
  (let* ((components (or components mevedel-system-components))
         (state (mevedel-prompt--state chat)))
    (unless (and (plist-get state :system)
                 (equal (plist-get state :components) components))
      (let ((rendered (mevedel-prompt-render chat components)))
        (setq state (plist-put state :components components))
        (setq state (plist-put state :rendered (cons (float-time) rendered)))
        (setq state (plist-put state :system (mevedel-prompt--join rendered)))
        (setq state (plist-put state :read
                               (cl-loop for (name placement text) in rendered
                                        when (eq placement 'system)
                                        collect (cons name text))))
        (puthash chat state mevedel-prompt--states)))
    (plist-get state :system)))

(defun mevedel-prompt-frozen (chat)
  "Return CHAT's frozen system text and what the model read, printable, or nil.
A session saves it, so that a resumed conversation sends the system
text it began with (the provider's cached prefix) and gets what
changed since as context updates."
  (let ((state (mevedel-prompt--state chat)))
    (and (plist-get state :system)
         (list :components (plist-get state :components)
               :system (plist-get state :system)
               :read (plist-get state :read)))))

(defun mevedel-prompt-thaw (chat frozen)
  "Give CHAT the system text and reading saved as FROZEN.
FROZEN is what `mevedel-prompt-frozen' returned."
  (puthash chat (list :components (plist-get frozen :components)
                      :system (plist-get frozen :system)
                      :read (plist-get frozen :read)
                      :pending nil)
           mevedel-prompt--states))

(defvar-local mevedel-prompt-own-components nil
  "A child agent's component selection, as (COMPONENTS), or nil.
Set in its data buffer (`mevedel-prompt-confine'), so it outlives a
prompt reset (a compaction): the context updates that restore the
child's context follow its selection, not `mevedel-system-components'.")

(defun mevedel-prompt-confine (chat components &optional read)
  "Confine what CHAT's model is told of to COMPONENTS, having read READ.
CHAT is a child agent's, whose system text is frozen elsewhere: the
root's journal map, memory index or skills roster reach it only when
COMPONENTS has them.  READ is an alist (NAME . TEXT) of what its
system text already says; nil sends every component once."
  (with-current-buffer (mevedel-prompt-chat-data-buffer chat)
    (setq-local mevedel-prompt-own-components (list components)))
  (puthash chat (list :components components :system nil :read read :pending nil)
           mevedel-prompt--states))

(defun mevedel-prompt-components (chat)
  "Return the prompt components CHAT's model is kept current on."
  (let* ((state (gethash chat mevedel-prompt--states))
         (buffer (mevedel-prompt-chat-data-buffer chat))
         (own (and (buffer-live-p buffer)
                   (buffer-local-value 'mevedel-prompt-own-components buffer))))
    (cond ((plist-get state :components))
          (own (car own))
          (t mevedel-system-components))))

(defun mevedel-prompt-read (chat)
  "Return what CHAT's model has read: an alist (NAME . TEXT)."
  (plist-get (gethash chat mevedel-prompt--states) :read))

(defun mevedel-prompt-whole-text (chat components)
  "Return COMPONENTS for CHAT as one text, every placement in it.
A child agent's system text is made once this way from its role's
components and stays frozen with it; CHAT's context updates then
follow COMPONENTS (`mevedel-prompt-confine'), having read this text."
  (let ((rendered (and components (mevedel-prompt-render chat components))))
    (mevedel-prompt-confine chat components
                            (cl-loop for (name _placement text) in rendered
                                     collect (cons name text)))
    (mevedel-prompt-truncate
     (mapconcat #'identity (delq nil (mapcar (lambda (item) (nth 2 item)) rendered)) "\n\n")
     mevedel-prompt-system-budget "system prompt")))

(defvar mevedel-prompt-reset-functions nil
  "Functions called with a chat whose prompt state was reset.
Components that told the model something outside the system text and
the context updates (subdirectory instructions) forget it here.")

(defun mevedel-prompt-reset (chat)
  "Forget CHAT's frozen system text and what the model read.
The next request assembles the system text again and sends every
context update again (after a compaction, say)."
  (remhash chat mevedel-prompt--states)
  (run-hook-with-args 'mevedel-prompt-reset-functions chat))

(defun mevedel-prompt-update-block (name text)
  "Return the context-update block of component NAME saying TEXT."
  (format "<context-update component=\"%s\">\n%s\n</context-update>" name text))

(defun mevedel-prompt-context-updates (chat)
  "Return the blocks to send with CHAT's turn, one per changed component.
A component whose current text differs from what the model last read
gets one block; it counts as read once the backend accepts the turn
\(`mevedel-prompt-note-accepted').  A `system' component that has gone
empty says so."
  (let* ((state (mevedel-prompt--state chat))
         (read (plist-get state :read))
         (components (mevedel-prompt-components chat))
         (pending nil) (blocks nil))
    (pcase-dolist (`(,name ,_placement ,text)
                   (let ((rendered (plist-get state :rendered)))
                     (if (and rendered (< (- (float-time) (car rendered)) 1.0))
                         (cdr rendered)
                       (and components (mevedel-prompt-render chat components)))))
      (let ((seen (assq name read)))
        (unless (if seen (equal (cdr seen) text) (null text))
          (push (cons name text) pending)
          (push (mevedel-prompt-update-block
                 name (or text (format "(%s has nothing to report any more)" name)))
                blocks))))
    (setq state (plist-put state :rendered nil))
    (puthash chat (plist-put state :pending (nreverse pending)) mevedel-prompt--states)
    (nreverse blocks)))

(defun mevedel-prompt-note-accepted (chat)
  "Record that the model read what CHAT's turn sent (its pending blocks)."
  (let* ((state (mevedel-prompt--state chat))
         (read (plist-get state :read)))
    (pcase-dolist (`(,name . ,text) (plist-get state :pending))
      (setf (alist-get name read) text))
    (setq state (plist-put state :read read))
    (puthash chat (plist-put state :pending nil) mevedel-prompt--states)))

(defun mevedel-prompt-report (chat)
  "Return the /context report of CHAT: components, placements and sizes."
  (let* ((state (mevedel-prompt--state chat))
         (components (or (plist-get state :components) mevedel-system-components))
         (rendered (mevedel-prompt-render chat components))
         (system (plist-get state :system)))
    (concat
     (if system
         (format "System text: %d characters, as sent since the first request\n" (length system))
       (format "System text: not sent yet (%d characters now)\n"
               (length (mevedel-prompt--join rendered))))
     "\nComponents, in order:\n"
     (mapconcat
      (pcase-lambda (`(,name ,placement ,text))
        (let ((read (assq name (plist-get state :read))))
          (format "  %-24s %-7s %6d chars%s  %s" name placement (length (or text ""))
                  (if (and system (not (equal (cdr read) text)) (or read text))
                      " (changed: sent with the next turn)" "")
                  (or (plist-get (mevedel-prompt-component name) :doc) ""))))
      rendered "\n"))))

;;;; Built-in components

(defconst mevedel-prompt--tool-guidance
  "Tools: Read, Glob and Grep read and search files and resource addresses \
\(scheme://…); ApplyPatch changes files, each change reviewed by the user as \
the permission mode says; Bash runs commands.  Other tools are specialists: \
ToolSearch finds them and ToolCall calls them.  Skills are instructions \
packages: when one fits the task, load it with the Skill tool before you \
start.  Manuals for you are at mevedel:// (Read mevedel:// lists them)."
  "Text of the tool-guidance component.")

(defvar mevedel-prompt-resource-roster-functions nil
  "Functions of a chat returning its roster lines of resource families.
Each returns a list of lines (\"- SCHEME:// what it holds\") for the
families it owns that the chat's requests can use now, or nil.  The
owner of a family adds its function (with a depth, for a stable order),
so the roster lists only what is there: agent:// once agents exist,
skill:// once skills do.")

(defun mevedel-prompt--resource-roster (chat)
  "Return the resource families available to CHAT's requests.
mevedel:// is always there; the others come from
`mevedel-prompt-resource-roster-functions'."
  (concat "Resource addresses you can use in Read, Glob, Grep (and ApplyPatch where writable):\n"
          (mapconcat #'identity
                     (cons "- mevedel:// packaged manuals"
                           (apply #'append
                                  (mapcar (lambda (function) (funcall function chat))
                                          mevedel-prompt-resource-roster-functions)))
                     "\n")))

(mevedel-prompt-define-component
 'identity :function (lambda (_chat) mevedel-prompt-identity)
 :doc "identity and working rules (`mevedel-prompt-identity')")

(mevedel-prompt-define-component
 'tool-guidance :function (lambda (_chat) mevedel-prompt--tool-guidance)
 :doc "how the tools are used")

(mevedel-prompt-define-component
 'resource-roster :function #'mevedel-prompt--resource-roster
 :doc "resource families available")

(provide 'mevedel-prompt)
;;; mevedel-prompt.el ends here
