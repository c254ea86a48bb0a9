;;; mevedel-scripted-model.el --- Run the local scripted model server  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; mevedel ships a small scripted model server,
;; scripted-model/server.py (Python 3, standard library only), that
;; speaks the OpenAI Chat Completions and Anthropic Messages wire
;; formats and replays a JSON script of model turns.  This file starts
;; it as an Emacs subprocess, builds a real gptel backend pointed at
;; it, and reads its request log.  The end-to-end tests and the offline
;; demo (`mevedel-demo') use it; nothing here is used in ordinary
;; sessions.

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'mevedel-core)
(require 'gptel-request)
(require 'gptel-openai)
(require 'gptel-anthropic)

(defgroup mevedel-scripted-model nil
  "The local scripted model server used by tests and the offline demo."
  :group 'mevedel
  :prefix "mevedel-scripted-model-")

(defcustom mevedel-scripted-model-python "python3"
  "Python 3 interpreter that runs the scripted model server."
  :type 'string)

(defcustom mevedel-scripted-model-start-timeout 10
  "Seconds to wait for the scripted model server to report its port."
  :type 'number)

(cl-defstruct (mevedel-scripted-model (:constructor mevedel-scripted-model--make)
                                      (:copier nil))
  "A running scripted model server."
  process port log-file script)

(defun mevedel-scripted-model-server-file ()
  "Return the file name of the scripted model server, or signal an error."
  (let ((file (expand-file-name "scripted-model/server.py"
                                (or (mevedel-core-build-source-root)
                                    (error "Cannot locate the mevedel checkout")))))
    (unless (file-exists-p file)
      (error "The scripted model server is missing: %s" file))
    file))

(defun mevedel-scripted-model--python ()
  "Return the Python interpreter, or signal an error naming what is missing."
  (or (executable-find mevedel-scripted-model-python)
      (error "The scripted model server needs %s, which is not installed"
             mevedel-scripted-model-python)))

(defun mevedel-scripted-model--allow-loopback ()
  "Keep proxies away from 127.0.0.1 for this Emacs and its children."
  (dolist (var '("no_proxy" "NO_PROXY"))
    (let ((current (getenv var)))
      (unless (and current (string-match-p "127\\.0\\.0\\.1" current))
        (setenv var (if (and current (not (string-empty-p current)))
                        (concat current ",127.0.0.1,localhost")
                      "127.0.0.1,localhost"))))))

(cl-defun mevedel-scripted-model-start (script &key vars log-file (delay 0.002))
  "Start the scripted model server replaying SCRIPT (a JSON file name).
VARS is an alist of (NAME . VALUE) strings replacing {{NAME}} in the
script.  Requests are logged to LOG-FILE (a temporary file by
default).  DELAY is the pause between streamed chunks, in seconds.
Return a `mevedel-scripted-model' once the server reports its port."
  (mevedel-scripted-model--allow-loopback)
  (let* ((log-file (or log-file (make-temp-file "mevedel-scripted-log" nil ".jsonl")))
         (output (generate-new-buffer " *mevedel-scripted-model*"))
         (command (append (list (mevedel-scripted-model--python) "-u"
                                (mevedel-scripted-model-server-file)
                                "--script" (expand-file-name script)
                                "--log" log-file
                                "--delay" (number-to-string delay))
                          (cl-loop for (name . value) in vars
                                   append (list "--var" (format "%s=%s" name value)))))
         (process (make-process :name "mevedel-scripted-model"
                                :buffer output
                                :command command
                                :connection-type 'pipe
                                :noquery t
                                :stderr output))
         (deadline (+ (float-time) mevedel-scripted-model-start-timeout))
         port)
    (while (and (not port) (process-live-p process) (< (float-time) deadline))
      (accept-process-output process 0.05)
      (with-current-buffer output
        (goto-char (point-min))
        (when (re-search-forward "^PORT \\([0-9]+\\)$" nil t)
          (setq port (string-to-number (match-string 1))))))
    (unless port
      (let ((text (with-current-buffer output (buffer-string))))
        (when (process-live-p process) (delete-process process))
        (kill-buffer output)
        (error "The scripted model server did not start: %s" (string-trim text))))
    (mevedel-scripted-model--make :process process :port port
                                  :log-file log-file :script script)))

(defun mevedel-scripted-model-stop (server)
  "Stop SERVER and discard its output buffer (the log file stays)."
  (let ((process (mevedel-scripted-model-process server)))
    (when (process-live-p process)
      (delete-process process))
    (when (buffer-live-p (process-buffer process))
      (kill-buffer (process-buffer process)))))

(defun mevedel-scripted-model-live-p (server)
  "Return non-nil when SERVER is running."
  (process-live-p (mevedel-scripted-model-process server)))

(cl-defun mevedel-scripted-model-backend (server &key (wire 'openai) (stream t) name)
  "Return a gptel backend that talks to SERVER.
WIRE is `openai' or `anthropic'; STREAM toggles streaming.  NAME
defaults to one naming the wire format and port.  The backend has
one model, `scripted-model', which takes tools and images (the server
accepts whatever it is sent), and bypasses any proxy for loopback."
  (let* ((host (format "127.0.0.1:%d" (mevedel-scripted-model-port server)))
         (name (or name (format "scripted-%s-%d" wire (mevedel-scripted-model-port server))))
         (common (list :host host :protocol "http" :stream stream :key "scripted"
                       :models '((scripted-model
                                  :capabilities (tool-use media)
                                  :mime-types ("image/png" "image/jpeg" "image/gif" "image/webp")))
                       :curl-args '("--noproxy" "127.0.0.1,localhost"))))
    (pcase wire
      ('openai (apply #'gptel-make-openai name :endpoint "/v1/chat/completions" common))
      ('anthropic (apply #'gptel-make-anthropic name :endpoint "/v1/messages" common))
      (_ (error "Unknown wire format %S (expected openai or anthropic)" wire)))))

(defun mevedel-scripted-model-log (server)
  "Return SERVER's request log: a list of alists, oldest first.
The server appends to the log while it runs, and a reader may catch
an entry half written: a last line without its newline is left out,
as if it were not there yet."
  (let ((file (mevedel-scripted-model-log-file server)))
    (when (file-exists-p file)
      (with-temp-buffer
        (insert-file-contents file)
        (goto-char (point-max))
        (delete-region (if (search-backward "\n" nil t) (1+ (point)) (point-min))
                       (point-max))
        (goto-char (point-min))
        (let (entries)
          (while (not (eobp))
            (unless (looking-at-p "[ \t]*$")
              (push (json-parse-buffer :object-type 'alist :array-type 'list
                                       :null-object nil :false-object nil)
                    entries))
            (forward-line 1))
          (nreverse entries))))))

(defun mevedel-scripted-model-mismatches (server)
  "Return every mismatch SERVER logged, as strings."
  (cl-loop for entry in (mevedel-scripted-model-log server)
           append (alist-get 'mismatches entry)))

(provide 'mevedel-scripted-model)
;;; mevedel-scripted-model.el ends here
