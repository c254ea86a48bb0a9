;;; mevedel-instructions.el --- Workspace instructions: AGENTS.md files  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The project's own instructions for agents.  In a directory, the
;; instruction files are AGENTS.md (CLAUDE.md when there is no
;; AGENTS.md, for projects set up for Claude Code) and then
;; AGENTS.local.md, the user's uncommitted additions.
;;
;; - The `workspace-instructions' prompt component holds the user's
;;   global files (in `mevedel-instructions-global-directory') and the
;;   workspace root's.  It is a `system' component: edits reach the
;;   model as context updates (mevedel-prompt.el).
;; - A subdirectory's files are loaded when they first become relevant:
;;   the first time a tool call of the model touches a file below that
;;   directory (the paths the permission step sees), its files ride on
;;   that call's result, once per conversation (a PostToolUse function
;;   of the pipeline).
;;
;; Every file is bounded by `mevedel-instructions-file-budget'; a cut
;; file says so.  File texts are cached by identity (mevedel-prompt.el).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-prompt)
(require 'mevedel-permissions)
(require 'mevedel-remote)
(require 'mevedel-pipeline)
(require 'mevedel-session)

(defgroup mevedel-instructions nil
  "AGENTS.md instruction files in mevedel's prompt."
  :group 'mevedel
  :prefix "mevedel-instructions-")

(defcustom mevedel-instructions-global-directory
  (expand-file-name "mevedel" (or (getenv "XDG_CONFIG_HOME") "~/.config"))
  "Directory of the user's own instruction files, for every workspace."
  :type 'directory)

(defcustom mevedel-instructions-file-budget 20000
  "Characters one instruction file may take in the prompt."
  :type 'natnum)

;;;; Files of a directory

(defun mevedel-instructions-files (directory)
  "Return the instruction files of DIRECTORY that exist, in reading order.
AGENTS.md, else CLAUDE.md; then AGENTS.local.md.  One module call
looks at all three."
  (let* ((names (mapcar (lambda (name) (expand-file-name name directory))
                        '("AGENTS.md" "CLAUDE.md" "AGENTS.local.md")))
         (regular (cl-mapcar (lambda (file stamp) (and stamp (string-prefix-p "f:" stamp) file))
                             names (mevedel-core-file-stamps names))))
    (delq nil (list (or (nth 0 regular) (nth 1 regular)) (nth 2 regular)))))

(defvar mevedel-instructions--blocks (make-hash-table :test #'equal)
  "Prompt blocks by instruction file: (TEXT . BLOCK), TEXT compared by `eq'.")

(defun mevedel-instructions-block (file)
  "Return the prompt block of instruction FILE, or nil when it is empty.
The block is made once per text of the file."
  (when-let* ((text (mevedel-prompt-file-text file)))
    (let ((cached (gethash file mevedel-instructions--blocks)))
      (if (eq (car cached) text)
          (cdr cached)
        (cdr (puthash
              file
              (cons text
                    (unless (string-blank-p text)
                      (format "<instructions file=\"%s\">\n%s\n</instructions>"
                              (abbreviate-file-name file)
                              (string-trim-right
                               (mevedel-prompt-truncate text mevedel-instructions-file-budget
                                                        (abbreviate-file-name file))))))
              mevedel-instructions--blocks))))))

(defun mevedel-instructions-base-files (root)
  "Return the global and workspace ROOT instruction files in effect."
  (append (mevedel-instructions-files mevedel-instructions-global-directory)
          (mevedel-instructions-files root)))

(defun mevedel-instructions--component (chat)
  "Return the workspace-instructions component's text for CHAT."
  (when-let* ((blocks (delq nil (mapcar #'mevedel-instructions-block
                                        (mevedel-instructions-base-files
                                         (mevedel-prompt-workspace chat))))))
    (concat "Instructions from the user and the project (AGENTS.md files).  Follow them; "
            "a later file, and one nearer the files you work on, takes precedence.  "
            "Files in subdirectories arrive with the first tool result that touches them.\n\n"
            (string-join blocks "\n\n"))))

(mevedel-prompt-define-component
 'workspace-instructions :function #'mevedel-instructions--component
 :budget 40000 :doc "global and workspace-root AGENTS.md / AGENTS.local.md / CLAUDE.md")

;;;; Subdirectories, when first relevant

(defvar mevedel-instructions--seen (make-hash-table :test #'eq :weakness 'key)
  "Subdirectory instructions per data buffer: (DIRECTORIES . FILES).
DIRECTORIES are those already looked at, FILES the instruction files
loaded from them, in order.")

(defun mevedel-instructions--between (root file)
  "Return the directories below ROOT down to FILE's own, outermost first.
FILE is expanded once; its directories are then prefixes of it, found
by string work: every name operation searches `file-name-handler-alist',
and this runs after every call of the model's."
  (let* ((root (if (directory-name-p root) root (file-name-as-directory root)))
         (file (mevedel-remote-expand-file-name file))
         ;; A directory's own name, trailing slash aside, is not among them.
         (end (if (directory-name-p file) (1- (length file)) (length file)))
         (start (length root))
         (dirs nil)
         (slash nil))
    (when (string-prefix-p root file)
      (while (and (setq slash (string-search "/" file start)) (< slash end))
        (push (substring file 0 (1+ slash)) dirs)
        (setq start (1+ slash))))
    (nreverse dirs)))

(defun mevedel-instructions-loaded (buffer)
  "Return the subdirectory instruction files loaded for data BUFFER."
  (cdr (gethash buffer mevedel-instructions--seen)))

(defun mevedel-instructions-for-paths (buffer root paths)
  "Return the blocks of instructions PATHS make relevant in data BUFFER.
PATHS are absolute file names under workspace ROOT; each subdirectory
between ROOT and them is looked at once per BUFFER, and its files are
returned once.  Return nil when nothing is new."
  (let* ((seen (or (gethash buffer mevedel-instructions--seen) (cons nil nil)))
         (blocks nil))
    (dolist (path paths)
      (dolist (dir (mevedel-instructions--between root path))
        (unless (member dir (car seen))
          (push dir (car seen))
          (dolist (file (mevedel-instructions-files dir))
            (setcdr seen (append (cdr seen) (list file)))
            (when-let* ((block (mevedel-instructions-block file)))
              (push block blocks))))))
    (puthash buffer seen mevedel-instructions--seen)
    (nreverse blocks)))

(defun mevedel-instructions-post-tool-use (context _outcome)
  "Attach the instructions of the directories CONTEXT's call touched first.
A PostToolUse function of the pipeline, for the model's own calls."
  (when (and (eq (plist-get context :source) 'provider)
             (buffer-live-p (plist-get context :data-buffer)))
    (let* ((buffer (plist-get context :data-buffer))
           (session (plist-get context :session))
           (workspace (if (mevedel-session-p session)
                          (mevedel-session-workspace session)
                        (buffer-local-value 'default-directory buffer)))
           (root (mevedel-remote-expand-file-name workspace))
           ;; Most calls work in the workspace: expand it once.
           (called (mevedel-session-call-directory session buffer))
           (directory (if (eq called workspace) root (expand-file-name called)))
           (paths (mapcar (lambda (path) (mevedel-remote-expand-file-name path directory))
                          (mevedel-permissions-tool-paths (plist-get context :tool)
                                                          (plist-get context :args))))
           (blocks (mevedel-instructions-for-paths buffer root paths)))
      (when blocks
        (list :context (concat "<workspace-instructions>\nInstructions for the directories "
                               "this call touched; follow them for files there.\n\n"
                               (string-join blocks "\n\n")
                               "\n</workspace-instructions>"))))))

(add-hook 'mevedel-pipeline-post-tool-use-functions #'mevedel-instructions-post-tool-use)

(defun mevedel-instructions-forget (chat)
  "Forget which subdirectory instructions CHAT's model has read."
  (remhash (mevedel-prompt-chat-data-buffer chat) mevedel-instructions--seen))

(add-hook 'mevedel-prompt-reset-functions #'mevedel-instructions-forget)

(defun mevedel-instructions-in-effect (chat)
  "Return every instruction file in effect for CHAT, in reading order."
  (append (mevedel-instructions-base-files (mevedel-prompt-workspace chat))
          (mevedel-instructions-loaded (mevedel-prompt-chat-data-buffer chat))))

(provide 'mevedel-instructions)
;;; mevedel-instructions.el ends here
