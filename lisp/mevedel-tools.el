;;; mevedel-tools.el --- The *mevedel tools* surface  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; `mevedel-tools-list' (and /tools, /tools list in a session's
;; composer) opens *mevedel tools*: the native tools the model is
;; offered, then the discoverable specialists it reaches through
;; ToolSearch and ToolCall, each with its calling shape and summary.
;; RET on a tool shows or hides its full contract, s searches the
;; catalog as ToolSearch does, g redraws and c opens gptel's menu.  The
;; buffer is read-only UI, never transcript content.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-catalog)
(require 'mevedel-tool-registry)
(require 'mevedel-ptc)
(require 'mevedel-view)

(declare-function gptel-menu "gptel-transient")

(defvar-local mevedel-tools--query nil
  "The search shown at the top of this tools buffer, or nil.")

(defvar-keymap mevedel-tools-mode-map
  :doc "Keys of the *mevedel tools* surface."
  :parent special-mode-map
  "RET" #'mevedel-tools-toggle-contract
  "s" #'mevedel-tools-search
  "g" #'mevedel-tools-refresh
  "c" #'mevedel-tools-configure)

(define-derived-mode mevedel-tools-mode special-mode "mevedel-tools"
  "Major mode of the *mevedel tools* surface.
\\{mevedel-tools-mode-map}"
  (setq-local revert-buffer-function (lambda (&rest _) (mevedel-tools-refresh))))

(defun mevedel-tools--line (tool)
  "Return the listing line of TOOL, carrying TOOL as `mevedel-tool'."
  (propertize (concat "  " (propertize (mevedel-tool-shape tool) 'face 'font-lock-function-name-face)
                      "\n      " (mevedel-tool-summary tool)
                      (if (mevedel-ptc-standalone-p tool) " [standalone only]" "")
                      "\n")
              'mevedel-tool tool))

(defun mevedel-tools-refresh ()
  "Redraw the tools buffer from the registry, keeping point's line."
  (interactive)
  (let ((inhibit-read-only t)
        (line (line-number-at-pos)))
    (erase-buffer)
    (insert (propertize "mevedel tools" 'face 'bold)
            (substitute-command-keys
             "   \\<mevedel-tools-mode-map>\\[mevedel-tools-toggle-contract] contract · \
\\[mevedel-tools-search] search · \\[mevedel-tools-refresh] refresh · \
\\[mevedel-tools-configure] gptel menu\n\n"))
    (when mevedel-tools--query
      (insert (propertize (format "Search: %s\n" mevedel-tools--query) 'face 'bold)
              (plist-get (mevedel-tool-search mevedel-tools--query (mevedel-ptc-catalog)) :text)
              "\n\n"))
    (insert (propertize "Native (offered to the model as provider tools)\n" 'face 'bold))
    (mapc (lambda (tool) (insert (mevedel-tools--line tool))) (mevedel-tool-native-tools))
    (insert "\n" (propertize "Discoverable (ToolSearch finds them, ToolCall calls them)\n"
                             'face 'bold))
    (let ((specialists (mevedel-tool-specialists)))
      (if specialists
          (mapc (lambda (tool) (insert (mevedel-tools--line tool))) specialists)
        (insert "  none registered\n")))
    (goto-char (point-min))
    (forward-line (1- line))))

(defun mevedel-tools-toggle-contract ()
  "Show or hide the full contract of the tool at point."
  (interactive)
  (let ((tool (get-text-property (point) 'mevedel-tool))
        (inhibit-read-only t))
    (unless tool (user-error "No tool on this line"))
    (save-excursion
      (goto-char (or (next-single-property-change (point) 'mevedel-tool) (point-max)))
      (if (eq (get-text-property (point) 'mevedel-tools-contract) tool)
          (delete-region (point) (or (next-single-property-change (point) 'mevedel-tools-contract)
                                     (point-max)))
        (insert (propertize (concat (replace-regexp-in-string
                                     "^" "      " (mevedel-tool-contract tool))
                                    "\n\n")
                            'mevedel-tools-contract tool 'face 'shadow))))))

(defun mevedel-tools-search (query)
  "Show what ToolSearch answers for QUERY at the top; empty QUERY clears it."
  (interactive (list (read-string "Search tools (names, groups, words): "
                                  mevedel-tools--query)))
  (setq mevedel-tools--query (and (not (string-blank-p query)) (string-trim query)))
  (mevedel-tools-refresh)
  (goto-char (point-min)))

(defun mevedel-tools-configure ()
  "Open gptel's menu, where the backend, model and tools are configured."
  (interactive)
  (require 'gptel-transient)
  (call-interactively #'gptel-menu))

;;;###autoload
(defun mevedel-tools-list ()
  "Open *mevedel tools*: the native and discoverable tools and their contracts."
  (interactive)
  (let ((buffer (get-buffer-create "*mevedel tools*")))
    (with-current-buffer buffer
      (unless (derived-mode-p 'mevedel-tools-mode) (mevedel-tools-mode))
      (mevedel-tools-refresh))
    (pop-to-buffer buffer)
    buffer))

(defun mevedel-tools-slash (_chat args)
  "Run /tools with ARGS: no argument or \"list\" opens the tools surface."
  (if (member (string-trim (or args "")) '("" "list"))
      (mevedel-tools-list)
    (user-error "/tools takes no argument or `list', not %s" args)))

(mevedel-view-register-slash-command "tools"
  #'mevedel-tools-slash "list the native and discoverable tools (/tools)")

(provide 'mevedel-tools)
;;; mevedel-tools.el ends here
