;;; mevedel.el --- LLM coding agent with a native core  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;; Author: The mevedel authors
;; Version: 0.1.0
;; Package-Requires: ((emacs "30.1") (gptel "0.9.9"))
;; Keywords: tools, convenience, ai
;; URL: https://example.invalid/mevedel

;;; Commentary:

;; mevedel is a coding-agent harness inside Emacs: a gptel backend
;; drives a session whose model works through tools, with a Rust dynamic
;; module doing the heavy lifting (search, processes, sandboxing,
;; durable state) so that Emacs never freezes.
;;
;; This file is the entry point.  \\[mevedel-status] shows whether the
;; native core works on this machine.

;;; Code:

(require 'mevedel-core)

(defgroup mevedel nil
  "LLM coding agent with a native core."
  :group 'tools
  :prefix "mevedel-")

;;;; Sessions

(declare-function mevedel-session-list-open "mevedel-session-list")
(declare-function mevedel-demo-open "mevedel-demo")
(declare-function mevedel-demo-backend-usable-p "mevedel-demo")
(declare-function mevedel-view-chat "mevedel-view")
(declare-function mevedel-batch-main "mevedel-batch")

;; The commands of files loaded on first use, for a checkout loaded by
;; `require' without package autoloads (a package's autoloads file says
;; the same).
(dolist (command '((mevedel-new . "mevedel-session-list")
                   (mevedel-sessions . "mevedel-session-list")
                   (mevedel-rewind . "mevedel-checkpoint")
                   (mevedel-session-diff . "mevedel-checkpoint")
                   (mevedel-ps . "mevedel-ps")
                   (mevedel-review . "mevedel-review")
                   (mevedel-verify . "mevedel-review")
                   (mevedel-agent-roles-describe . "mevedel-agent-roles")
                   (mevedel-hooks-list . "mevedel-hooks-list")
                   (mevedel-tools-list . "mevedel-tools")
                   (mevedel-usage . "mevedel-usage-view")
                   (mevedel-menu . "mevedel-menu")
                   (mevedel-sandbox-status . "mevedel-sandbox")))
  (unless (fboundp (car command))
    (autoload (car command) (cdr command) nil t)))

(defun mevedel--load ()
  "Load the tool catalog, the session's view and its commands."
  (require 'mevedel-catalog)
  (require 'mevedel-view)
  (require 'mevedel-composer)
  (require 'mevedel-consolidation)
  (require 'mevedel-mcp-composer)
  (require 'mevedel-tools)
  (require 'mevedel-hooks-list)
  (require 'mevedel-file-approval)
  (require 'mevedel-tasks-view)
  (require 'mevedel-review)
  (require 'mevedel-agent-view)
  (require 'mevedel-usage-view)
  (require 'mevedel-ps)
  (require 'mevedel-panel)
  (require 'mevedel-session-list)
  (require 'mevedel-menu)
  ;; Here, when a session is asked for, is where a first build asks.
  (mevedel-core-ensure))

;;;###autoload
(defun mevedel (&optional directory)
  "Open the agent session of the current workspace.
The workspace is the project.el project root, else DIRECTORY (by
default `default-directory').  Type in the composer at the bottom;
\\<mevedel-view-mode-map>\\[mevedel-view-send] sends, \\[mevedel-view-abort] aborts."
  (interactive)
  (mevedel--load)
  (mevedel-session-list-open directory))

;; M-x mevedel-review and mevedel-verify open a session as this command does.
;;;###autoload
(add-hook 'mevedel-review-open-functions #'mevedel)

;;;###autoload
(defun mevedel-run (&optional directory)
  "Open a session like `mevedel'; without a usable backend, run the demo.
When no gptel backend is configured (or its API key cannot be
found), the session of DIRECTORY's workspace talks to the offline
demo model, a local scripted server, and sends a first prompt.
`make run' calls this."
  (interactive)
  (mevedel--load)
  (require 'mevedel-demo)
  (let ((buffer (mevedel-session-list-open
                 directory (unless (mevedel-demo-backend-usable-p) 'demo))))
    ;; nil: the user cancelled opening a session another process writes.
    (when buffer
      (mevedel-demo-open (mevedel-view-chat buffer))
      (with-current-buffer buffer (force-mode-line-update)))
    buffer))

;;;###autoload
(defun mevedel-batch-run ()
  "Run one headless session turn from the command line, print, and exit.
Run Emacs as `emacs --batch -l mevedel -f mevedel-batch-run -- -p
PROMPT' with optional --json, --dir DIR, --permission-mode MODE,
--config FILE, --demo and --timeout SECONDS.  See also bin/mevedel."
  (require 'mevedel-batch)
  (mevedel-batch-main))

;;;; Status buffer

(defun mevedel--status-insert (label value &optional face)
  "Insert a status line LABEL: VALUE, VALUE in FACE."
  (insert (format "%-22s " (concat label ":"))
          (propertize (format "%s" value) 'face (or face 'default))
          "\n"))

(defun mevedel--status-update (buffer key text face)
  "Replace the placeholder for KEY in BUFFER with TEXT in FACE."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (save-excursion
          (goto-char (point-min))
          (when-let* ((match (text-property-search-forward 'mevedel-status key t)))
            (delete-region (prop-match-beginning match) (prop-match-end match))
            (goto-char (prop-match-beginning match))
            (insert (propertize text 'face face 'mevedel-status key))))))))

(defun mevedel--status-placeholder (label key)
  "Insert LABEL and a placeholder; `mevedel--status-update' fills in KEY."
  (insert (format "%-22s " (concat label ":"))
          (propertize "checking..." 'face 'shadow 'mevedel-status key)
          "\n"))

(defun mevedel--describe-probe (probe)
  "Return (TEXT . FACE) describing the sandbox PROBE plist."
  (if (null probe)
      (cons "probe failed" 'error)
    (let ((bwrap (if (plist-get probe :bwrap-works)
                     (format "bubblewrap works (%s)" (plist-get probe :bwrap-path))
                   (format "bubblewrap unusable: %s" (plist-get probe :bwrap-problem))))
          (landlock (if (plist-get probe :landlock-abi)
                        (format "Landlock ABI %d" (plist-get probe :landlock-abi))
                      (format "Landlock unavailable: %s" (plist-get probe :landlock-problem)))))
      (cons (concat bwrap "; " landlock)
            (if (plist-get probe :bwrap-works) 'success 'warning)))))

;;;###autoload
(defun mevedel-status ()
  "Show whether mevedel's native core works here.
Reports the module version, an event-channel self-test (1,000 events
from a Rust worker thread) and which sandbox layers are available."
  (interactive)
  (let ((buffer (get-buffer-create "*mevedel status*")))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (special-mode)
        (insert (propertize "mevedel\n\n" 'face 'bold))
        (condition-case err
            (progn
              (mevedel-core-ensure)
              (mevedel--status-insert "Native module" (mevedel-core-version) 'success)
              (mevedel--status-insert "Module file" (mevedel-core-build-module-file))
              (mevedel--status-placeholder "Event channel" 'channel)
              (mevedel--status-placeholder "Sandbox" 'sandbox)
              (mevedel-core-channel-selftest
               1000
               (lambda (result)
                 (mevedel--status-update
                  buffer 'channel
                  (format "%d events received %s in %.1f ms"
                          (plist-get result :received)
                          (if (plist-get result :in-order) "in order" "OUT OF ORDER")
                          (* 1000 (plist-get result :seconds)))
                  (if (plist-get result :in-order) 'success 'error))))
              (mevedel-core-sandbox-probe
               (lambda (probe)
                 (let ((desc (mevedel--describe-probe probe)))
                   (mevedel--status-update buffer 'sandbox (car desc) (cdr desc))))))
          (error
           (mevedel--status-insert "Native module" (error-message-string err) 'error)))
        (insert "\n" (mevedel--status-sessions-text))))
    (pop-to-buffer-same-window buffer)))

(declare-function mevedel-chat-list "mevedel-chat")
(declare-function mevedel-chat-name "mevedel-chat")
(declare-function mevedel-chat-status "mevedel-chat")

(defun mevedel--status-sessions-text ()
  "Return the status buffer's lines about the sessions open in this Emacs."
  (let ((chats (and (featurep 'mevedel-chat) (mevedel-chat-list))))
    (if (null chats)
        "No open session: start one with M-x mevedel in a project.\n"
      (concat (format "Open session%s:\n" (if (cdr chats) "s" ""))
              (mapconcat (lambda (chat)
                           (format "  %s (%s)\n" (mevedel-chat-name chat) (mevedel-chat-status chat)))
                         chats "")
              "M-x mevedel in a project shows its session.\n"))))

(provide 'mevedel)
;;; mevedel.el ends here
