;;; mevedel-demo.el --- Offline demo: a session against the scripted model  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Without a usable gptel backend (none configured, or its API key
;; cannot be found), `mevedel-run' starts the checkout's scripted model
;; server with a built-in demo script and points the session at it,
;; named "offline demo model" in the view's header, then sends a
;; first prompt so that a newcomer sees a whole tool-using turn.
;; `make run' calls `mevedel-run'.
;;
;; A session that talked to the demo is a demo session for good (saved
;; so): only a demo start resumes one, and the session list marks it.
;; This file does not choose the session (mevedel-session-list.el).

;;; Code:

(require 'auth-source)
(require 'cl-lib)
(require 'mevedel-chat)
(require 'mevedel-gptel)
(require 'mevedel-scripted-model)

(defconst mevedel-demo-label "offline demo model"
  "The name of the demo backend, which the view's header shows.")

(defcustom mevedel-demo-prompt "What is this project, and where are its main functions?"
  "First prompt sent in the offline demo."
  :type 'string
  :group 'mevedel)

(defvar mevedel-demo--server nil
  "The running demo server, or nil.")

(defvar mevedel-demo--vars nil
  "The script variables the running demo server was started with.")

(defconst mevedel-demo--readme-regexp "\\`README\\(?:\\.[[:alnum:]]+\\)?\\'"
  "File names the demo reads first.")

(defun mevedel-demo--file (root)
  "Return a file of ROOT for the demo to read, relative to ROOT, or nil.
A README first, else the first small text file at the top or one
level down."
  (let ((candidates
         (cl-loop for dir in (cons root (cl-remove-if-not
                                         #'file-directory-p
                                         (directory-files root t "\\`[^.]" nil 20)))
                  append (cl-remove-if-not
                          (lambda (file)
                            (and (file-regular-p file) (file-readable-p file)
                                 (< 0 (file-attribute-size (file-attributes file)) 1000000)))
                          (directory-files dir t "\\`[^.]" nil 200)))))
    (when-let* ((file (or (cl-find-if (lambda (file)
                                        (string-match-p mevedel-demo--readme-regexp
                                                        (file-name-nondirectory file)))
                                      candidates)
                          (cl-find-if (lambda (file)
                                        (with-temp-buffer
                                          (insert-file-contents-literally file nil 0 4096)
                                          (not (search-forward "\0" nil t))))
                                      candidates))))
      (file-relative-name file root))))

(defun mevedel-demo--pattern (file)
  "Return a word of FILE for the demo to search for, or nil."
  (with-temp-buffer
    (insert-file-contents file nil 0 8192)
    (goto-char (point-min))
    (let (word)
      (while (and (not word) (re-search-forward "\\_<[[:alpha:]][[:alnum:]_-]\\{4,30\\}\\_>" nil t))
        (unless (member (downcase (match-string 0)) '("about" "there" "these" "their" "which"))
          (setq word (match-string 0))))
      word)))

(defun mevedel-demo-vars (root surface)
  "Return the demo script's variables for workspace ROOT shown on SURFACE.
SURFACE is `view' or `headless': the closing words fit it."
  (let* ((file (mevedel-demo--file root))
         (pattern (or (and file (mevedel-demo--pattern (expand-file-name file root))) "TODO")))
    `(("root" . ,root)
      ("file" . ,(or file ""))
      ("what" . ,(if file (format "`%s`" file) "the workspace's listing"))
      ("pattern" . ,(regexp-quote pattern))
      ("hint" . ,(if (eq surface 'headless)
                     "Run `bin/mevedel --demo --json` to see each call's arguments and result."
                   "Press TAB on a tool row above to see what each call returned."))
      ("again" . ,(if (eq surface 'headless) "" " and run `M-x mevedel` again")))))

(defun mevedel-demo-script ()
  "Return the file name of the demo script."
  (expand-file-name "scripted-model/demo.json"
                    (or (mevedel-core-build-source-root)
                        (error "Cannot locate the mevedel checkout"))))

(defun mevedel-demo-backend-usable-p (&optional backend)
  "Return non-nil when BACKEND (default `gptel-backend') can be used.
A backend whose API key is configured but cannot be resolved is
unusable.  Without any backend gptel would use OpenAI: that is
usable when `gptel-api-key' is a string or the auth source has a
key for api.openai.com."
  (let ((backend (or backend (default-value 'gptel-backend))))
    (if (null backend)
        (or (and (stringp gptel-api-key) (not (string-empty-p gptel-api-key)))
            (and (eq gptel-api-key #'gptel-api-key-from-auth-source)
                 (auth-source-search :host "api.openai.com" :user "apikey"
                                     :require '(:secret))
                 t))
      (not (mevedel-gptel-backend-problem backend)))))

(defun mevedel-demo-attach (chat &optional surface)
  "Point CHAT at the offline demo model, starting its server if needed.
SURFACE, `view' (the default) or `headless', is where the demo's words
are read.  The script reads and searches CHAT's own workspace."
  (let ((vars (mevedel-demo-vars (mevedel-chat-root chat) (or surface 'view))))
    (unless (and mevedel-demo--server (mevedel-scripted-model-live-p mevedel-demo--server)
                 (equal vars mevedel-demo--vars))
      (mevedel-demo-stop)
      (setq mevedel-demo--server
            (mevedel-scripted-model-start (mevedel-demo-script) :vars vars :delay 0.03)
            mevedel-demo--vars vars)))
  (setf (mevedel-chat-backend chat)
        (mevedel-scripted-model-backend mevedel-demo--server
                                        :wire 'openai :stream t
                                        :name mevedel-demo-label)
        (mevedel-chat-model chat) 'scripted-model
        (mevedel-chat-demo chat) t)
  chat)

(defun mevedel-demo-stop ()
  "Stop the demo server."
  (when mevedel-demo--server
    (mevedel-scripted-model-stop mevedel-demo--server)
    (setq mevedel-demo--server nil)))

(add-hook 'kill-emacs-hook #'mevedel-demo-stop)

(defun mevedel-demo-open (chat)
  "Use the offline demo in CHAT when needed.
Without a usable gptel backend, start the offline demo model and
send `mevedel-demo-prompt' so that a full tool-using turn runs.  A
read-only chat sends nothing."
  (when (and (not (mevedel-chat-read-only chat))
             (not (mevedel-demo-backend-usable-p)))
    (mevedel-demo-attach chat)
    (unless (mevedel-chat-busy-p chat)
      (mevedel-chat-send chat mevedel-demo-prompt))))

(provide 'mevedel-demo)
;;; mevedel-demo.el ends here
