;;; mevedel-environment.el --- The environment the model is told about  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The `environment' prompt component: operating system, shell, Emacs
;; version, workspace root, git branch and a short status, and the date.
;; It is an `update' component (mevedel-prompt.el): the model reads it
;; as a context update whenever it changed, never in the system text.
;;
;; Git facts come from one asynchronous `git status --porcelain=v1 -b'
;; per workspace, started when the component is rendered and at the end
;; of every turn; the component always renders from what the last run
;; found, so a turn never waits for git.  A run still going is not
;; started again.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'mevedel-prompt)

(defgroup mevedel-environment nil
  "The environment facts in mevedel's prompt."
  :group 'mevedel
  :prefix "mevedel-environment-")

(defcustom mevedel-environment-status-lines 10
  "How many changed files of `git status' the environment lists."
  :type 'natnum)

(defvar mevedel-environment--git (make-hash-table :test #'equal)
  "Per workspace: plist (:text TEXT :process PROCESS) of its git facts.")

(defun mevedel-environment--summarize (output)
  "Return the prompt lines of `git status --porcelain=v1 -b' OUTPUT."
  (let* ((lines (split-string output "\n" t))
         (head (car lines))
         (files (cdr lines))
         (branch (if (and head (string-match "\\`## \\(?:No commits yet on \\)?\\([^ .]+\\)" head))
                     (match-string 1 head)
                   "unknown")))
    (concat (format "Git branch: %s%s\n" branch
                    (if (and head (string-match "\\[\\([^]]+\\)\\]" head))
                        (format " (%s)" (match-string 1 head)) ""))
            (if (null files)
                "Git status: clean"
              (concat (format "Git status: %d changed\n" (length files))
                      (mapconcat (lambda (line) (concat "  " line))
                                 (seq-take files mevedel-environment-status-lines) "\n")
                      (if (> (length files) mevedel-environment-status-lines)
                          (format "\n  … %d more" (- (length files)
                                                     mevedel-environment-status-lines))
                        ""))))))

(defun mevedel-environment-refresh (root &optional on-done)
  "Find the git facts of workspace ROOT in the background.
ON-DONE, if non-nil, is called with no argument once they are known.
Nothing starts while a run for ROOT is still going."
  (let ((entry (gethash root mevedel-environment--git)))
    (unless (process-live-p (plist-get entry :process))
      (if (not (and (executable-find "git")
                    (file-exists-p (expand-file-name ".git" root))))
          (progn (puthash root (list :text nil) mevedel-environment--git)
                 (when on-done (funcall on-done)))
        (let* ((buffer (generate-new-buffer " *mevedel git status*" t))
               (errors (get-buffer-create " *mevedel git status errors*" t))
               (default-directory root)
               (process
                (make-process
                 :name "mevedel-git-status" :buffer buffer :noquery t
                 :connection-type 'pipe
                 :command '("git" "--no-optional-locks" "status" "--porcelain=v1" "-b")
                 ;; One buffer for every run's errors, emptied each time.
                 :stderr (with-current-buffer errors (erase-buffer) errors)
                 :sentinel
                 (lambda (process _event)
                   (unless (process-live-p process)
                     (let ((text (and (eq (process-exit-status process) 0)
                                      (buffer-live-p buffer)
                                      (mevedel-environment--summarize
                                       (with-current-buffer buffer (buffer-string))))))
                       (kill-buffer buffer)
                       (puthash root (list :text text) mevedel-environment--git)
                       (when on-done (funcall on-done))))))))
          (puthash root (list :text (plist-get entry :text) :process process)
                   mevedel-environment--git))))))

(defun mevedel-environment--checkout (root directory)
  "Return whose git facts describe DIRECTORY of workspace ROOT.
A DIRECTORY that is a checkout of its own (a Git worktree) has its
own; any other has ROOT's."
  (if (and directory (file-exists-p (expand-file-name ".git" directory)))
      directory
    root))

(defun mevedel-environment-text (root &optional directory)
  "Return the environment text for workspace ROOT from what is known now.
DIRECTORY, when it is not ROOT, is where the calls work (a child
agent's working directory): it is named, with its own git facts when
it is a checkout.  Start a git refresh when none ran yet."
  (let* ((directory (and directory (not (equal directory root)) directory))
         (checkout (mevedel-environment--checkout root directory)))
    (unless (gethash checkout mevedel-environment--git)
      (mevedel-environment-refresh checkout))
    (string-join
     (delq nil
           (list (format "Operating system: %s" system-type)
                 (format "Shell: %s" (or (getenv "SHELL") shell-file-name))
                 (format "Emacs: %s" emacs-version)
                 (format "Workspace root: %s" root)
                 (and directory (format "Working directory: %s (relative paths and commands \
start here)" directory))
                 (plist-get (gethash checkout mevedel-environment--git) :text)
                 (format "Date: %s" (format-time-string "%F"))))
     "\n")))

(defun mevedel-environment--component (chat)
  "Return the environment component's text for CHAT."
  (mevedel-environment-text (mevedel-prompt-workspace chat) (mevedel-prompt-directory chat)))

(defun mevedel-environment-turn-ended (chat &rest _)
  "Refresh the git facts of CHAT's workspace for its next turn."
  (mevedel-environment-refresh (mevedel-environment--checkout (mevedel-prompt-workspace chat)
                                                              (mevedel-prompt-directory chat))))

(mevedel-prompt-define-component
 'environment :function #'mevedel-environment--component :placement 'update
 :budget 2000 :doc "OS, shell, Emacs, workspace, git branch and status, date")

(provide 'mevedel-environment)
;;; mevedel-environment.el ends here
