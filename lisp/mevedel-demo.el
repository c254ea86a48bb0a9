;;; mevedel-demo.el --- Offline demo: a session against the scripted model  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Without a usable gptel backend (none configured, or its API key
;; cannot be found), `mevedel-run' starts the checkout's scripted model
;; server with a built-in demo script and points the session at it,
;; labelled "offline demo model" in the view's header, then sends a
;; first prompt so that a newcomer sees a whole tool-using turn.
;; `make run' calls `mevedel-run'.

;;; Code:

(require 'auth-source)
(require 'mevedel-chat)
(require 'mevedel-gptel)
(require 'mevedel-scripted-model)

(declare-function mevedel-view-open "mevedel-view")
(declare-function mevedel-view-chat "mevedel-view")

(defconst mevedel-demo-label "offline demo model"
  "How the demo backend is labelled in the view.")

(defcustom mevedel-demo-prompt "What is this project, and where are its main functions?"
  "First prompt sent in the offline demo."
  :type 'string
  :group 'mevedel)

(defvar mevedel-demo--server nil
  "The running demo server, or nil.")

(defun mevedel-demo-script ()
  "Return the file name of the demo script."
  (expand-file-name "test/fake-llm/demo.json"
                    (or (mevedel-core-source-root)
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

(defun mevedel-demo-attach (chat)
  "Point CHAT at the offline demo model, starting its server if needed."
  (unless (and mevedel-demo--server (mevedel-scripted-model-live-p mevedel-demo--server))
    (setq mevedel-demo--server
          (mevedel-scripted-model-start (mevedel-demo-script)
                                        :vars `(("root" . ,(mevedel-chat-root chat)))
                                        :delay 0.03)))
  (setf (mevedel-chat-backend chat)
        (mevedel-scripted-model-backend mevedel-demo--server
                                        :wire 'openai :stream t
                                        :name mevedel-demo-label)
        (mevedel-chat-model chat) 'scripted-model
        (mevedel-chat-label chat) mevedel-demo-label)
  chat)

(defun mevedel-demo-stop ()
  "Stop the demo server."
  (when mevedel-demo--server
    (mevedel-scripted-model-stop mevedel-demo--server)
    (setq mevedel-demo--server nil)))

(add-hook 'kill-emacs-hook #'mevedel-demo-stop)

(defun mevedel-demo-open (&optional directory)
  "Open the session of DIRECTORY's workspace; use the offline demo when needed.
Without a usable gptel backend, start the offline demo model and
send `mevedel-demo-prompt' so that a full tool-using turn runs.
Return the view buffer."
  (require 'mevedel-view)
  (let ((buffer (mevedel-view-open directory)))
    (unless (mevedel-demo-backend-usable-p)
      (let ((chat (mevedel-view-chat buffer)))
        (mevedel-demo-attach chat)
        (with-current-buffer buffer (force-mode-line-update))
        (unless (mevedel-chat-busy-p chat)
          (mevedel-chat-send chat mevedel-demo-prompt))))
    buffer))

(provide 'mevedel-demo)
;;; mevedel-demo.el ends here
