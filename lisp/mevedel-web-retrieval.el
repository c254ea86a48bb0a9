;;; mevedel-web-retrieval.el --- HTTP retrieval with redirects followed by hand  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; One HTTP(S) retrieval in the background for the web tools
;; (`mevedel-web-retrieval-start').  It uses url-http with redirects
;; turned off in each response buffer (`url-max-redirections' 0) and
;; follows them itself, at most `mevedel-web-retrieval-max-redirects',
;; repeating the method, body and headers as url-http adjusted them,
;; and only to http(s) URLs with a host.  The caller decides each hop
;; (follow, return it, or refuse); WebFetch's decision lives in
;; mevedel-web.el.  One timer (`mevedel-web-retrieval-timeout') covers a
;; retrieval and its redirects; the retrieval releases its buffer,
;; process and timer before it delivers, and delivers once.  A
;; cancelled retrieval delivers nothing.
;;
;; This file does not convert bodies (the module does, see
;; mevedel-web.el) and asks no permission.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'url)

;; `url-retrieve' loads url-http (and the network security manager) for
;; the first http or https URL; a session that fetches nothing does not
;; load them (tens of ms of every headless run's start).
(defvar url-http-end-of-headers)
(defvar url-http-response-status)
(defvar url-http-method)
(defvar url-http-data)
(defvar url-http-extra-headers)

;;;; Options

(define-obsolete-variable-alias 'mevedel-web-timeout 'mevedel-web-retrieval-timeout "0.2")
(define-obsolete-variable-alias 'mevedel-web-max-redirects
  'mevedel-web-retrieval-max-redirects "0.2")

(defcustom mevedel-web-retrieval-timeout 30
  "Seconds one retrieval may take, its redirects included.
Each YouTube stage has a timeout of its own; so does pdftotext."
  :group 'mevedel-web
  :type 'number)

(defcustom mevedel-web-retrieval-max-redirects 10
  "Most redirects one retrieval follows."
  :group 'mevedel-web
  :type 'natnum)
;;;; URLs

(defun mevedel-web-retrieval-url-problem (url)
  "Return why URL may not be retrieved, or nil when it is http(s) with a host."
  (let ((parsed (and (stringp url) (url-generic-parse-url url))))
    (cond ((not (and parsed (member (url-type parsed) '("http" "https"))))
           (format "only http and https URLs can be fetched, not %s" url))
          ((string-empty-p (or (url-host parsed) ""))
           (format "the URL %s has no host" url)))))

(defun mevedel-web-retrieval-host (url)
  "Return the host of URL, downcased, or nil."
  (when-let* ((parsed (and (stringp url) (url-generic-parse-url url)))
              (host (url-host parsed)))
    (and (not (string-empty-p host)) (downcase host))))

(defun mevedel-web-retrieval-private-host-p (host)
  "Return non-nil when HOST names this machine or a private network.
Literal addresses (loopback, private, link-local, unique-local) and
localhost names count; other names are judged public."
  (let ((h (downcase (string-trim host "\\[" "\\]"))))
    (or (equal h "localhost")
        (string-suffix-p ".localhost" h)
        (string-match-p (rx bos (or "127." "10." "192.168." "169.254." "0.")
                            (+ (any "0-9.")) eos)
                        h)
        (string-match-p (rx bos "172." (or (seq "1" (any "6-9")) (seq "2" digit) (seq "3" (any "01")))
                            "." (+ (any "0-9.")) eos)
                        h)
        (member h '("::1" "::"))
        (string-match-p (rx bos (or "fe8" "fe9" "fea" "feb" "fc" "fd")) h))))

;;;; Retrieval

(cl-defstruct (mevedel-web-retrieval--state (:constructor mevedel-web-retrieval--state-make)
                                      (:copier nil))
  url requested method data headers redirect callback timer buffer done (hops 0))

(defun mevedel-web-retrieval--release-buffer (buffer)
  "Kill BUFFER, a url-http response buffer, and its connection."
  (when (buffer-live-p buffer)
    (when-let* ((process (get-buffer-process buffer)))
      (set-process-sentinel process #'ignore)
      (set-process-filter process #'ignore)
      (delete-process process))
    (let ((kill-buffer-query-functions nil))
      (kill-buffer buffer))))

(defun mevedel-web-retrieval--release (r)
  "Release the timer and the response buffer of retrieval R."
  (when (mevedel-web-retrieval--state-timer r)
    (cancel-timer (mevedel-web-retrieval--state-timer r))
    (setf (mevedel-web-retrieval--state-timer r) nil))
  (mevedel-web-retrieval--release-buffer (mevedel-web-retrieval--state-buffer r))
  (setf (mevedel-web-retrieval--state-buffer r) nil))

(defun mevedel-web-retrieval--deliver (r result)
  "Release retrieval R and give its callback RESULT, once."
  (unless (mevedel-web-retrieval--state-done r)
    (setf (mevedel-web-retrieval--state-done r) t)
    (mevedel-web-retrieval--release r)
    (funcall (mevedel-web-retrieval--state-callback r) result)))

(defun mevedel-web-retrieval--send (r)
  "Send retrieval R's request for its current URL."
  (let* ((headers (mevedel-web-retrieval--state-headers r))
         (accept (cdr (assoc "Accept" headers)))
         (url-request-method (mevedel-web-retrieval--state-method r))
         (url-request-data (mevedel-web-retrieval--state-data r))
         (url-request-extra-headers (assoc-delete-all "Accept" (copy-sequence headers)))
         (url-mime-accept-string (or accept url-mime-accept-string))
         (url-max-redirections 0)
         (url-show-status nil))
    (condition-case err
        (let ((buffer (url-retrieve (mevedel-web-retrieval--state-url r)
                                    #'mevedel-web-retrieval--response (list r) t t)))
          (if (not (buffer-live-p buffer))
              (mevedel-web-retrieval--deliver r (list :error (format "cannot connect to %s"
                                                           (mevedel-web-retrieval--state-url r))))
            ;; url-http reads these in this buffer later: the request
            ;; once connected, the redirect limit when the response comes.
            (with-current-buffer buffer
              (setq-local url-max-redirections 0)
              (setq-local url-mime-accept-string url-mime-accept-string))
            (setf (mevedel-web-retrieval--state-buffer r) buffer)))
      (error (mevedel-web-retrieval--deliver
              r (list :error (format "cannot retrieve %s: %s" (mevedel-web-retrieval--state-url r)
                                     (error-message-string err))))))))

(defun mevedel-web-retrieval--headers-field (name)
  "Return header NAME of the response in the current url-http buffer, or nil."
  (save-excursion
    (save-restriction
      (narrow-to-region (point-min) url-http-end-of-headers)
      (goto-char (point-min))
      (forward-line 1)
      (mail-fetch-field name))))

(defun mevedel-web-retrieval--parse-type (value)
  "Return (TYPE . CHARSET) of a Content-Type header VALUE (nil: none)."
  (when (and value (not (string-empty-p (string-trim value))))
    (let* ((parts (split-string value ";" t "[ \t]+"))
           (charset (cl-loop for p in (cdr parts)
                             when (string-match "\\`charset=\"?\\([^\"]+\\)\"?\\'" p)
                             return (match-string 1 p))))
      (cons (downcase (string-trim (car parts))) charset))))

(defun mevedel-web-retrieval--response (status r)
  "Handle url-http's STATUS for retrieval R, in its response buffer."
  (let ((buffer (current-buffer)))
    (cond
     ((or (mevedel-web-retrieval--state-done r)
          (not (eq buffer (mevedel-web-retrieval--state-buffer r))))
      (mevedel-web-retrieval--release-buffer buffer))
     ((eq (car-safe (cdr (plist-get status :error))) 'http-redirect-limit)
      (mevedel-web-retrieval--redirect r (nth 2 (plist-get status :error))))
     ((and (plist-get status :error)
           (not (and (boundp 'url-http-end-of-headers) url-http-end-of-headers
                     (numberp url-http-response-status))))
      (mevedel-web-retrieval--deliver
       r (list :error (format "retrieving %s failed: %s" (mevedel-web-retrieval--state-url r)
                              (mevedel-web-retrieval--error-text (plist-get status :error))))))
     (t
      (let* ((type (mevedel-web-retrieval--parse-type (mevedel-web-retrieval--headers-field "content-type")))
             (code url-http-response-status)
             (body (buffer-substring-no-properties
                    (min (point-max) (1+ url-http-end-of-headers)) (point-max))))
        (mevedel-web-retrieval--deliver
         r (list :status code :type (car type) :charset (cdr type) :body body
                 :url (mevedel-web-retrieval--state-url r)
                 :requested (mevedel-web-retrieval--state-requested r)
                 :redirected (> (mevedel-web-retrieval--state-hops r) 0))))))))

(defun mevedel-web-retrieval--error-text (err)
  "Return url-http's error ERR as text."
  (pcase err
    (`(error http ,code) (format "HTTP %s" code))
    (`(error connection-failed ,what . ,_) (format "connection failed: %s" what))
    (`(,_ . ,data) (mapconcat (lambda (d) (format "%s" d)) data " "))
    (_ (format "%s" err))))

(defun mevedel-web-retrieval--redirect (r target)
  "Follow, return or refuse retrieval R's redirect to TARGET."
  (let ((buffer (current-buffer))
        (from (mevedel-web-retrieval--state-url r)))
    (cond
     ((not (stringp target))
      (mevedel-web-retrieval--deliver r (list :error (format "%s redirected without a Location" from))))
     ((mevedel-web-retrieval-url-problem target)
      (mevedel-web-retrieval--deliver r (list :error (format "%s redirected to %s: %s" from target
                                                   (mevedel-web-retrieval-url-problem target)))))
     ((>= (mevedel-web-retrieval--state-hops r) mevedel-web-retrieval-max-redirects)
      (mevedel-web-retrieval--deliver r (list :error (format "more than %d redirects (the last to %s)"
                                                   mevedel-web-retrieval-max-redirects target))))
     (t
      (let ((decision (if-let* ((decide (mevedel-web-retrieval--state-redirect r)))
                          (funcall decide from target)
                        'follow)))
        (pcase decision
          ('follow
           (setf (mevedel-web-retrieval--state-method r) url-http-method
                 (mevedel-web-retrieval--state-data r) url-http-data
                 (mevedel-web-retrieval--state-headers r) url-http-extra-headers
                 (mevedel-web-retrieval--state-url r) target
                 (mevedel-web-retrieval--state-buffer r) nil)
           (cl-incf (mevedel-web-retrieval--state-hops r))
           (mevedel-web-retrieval--release-buffer buffer)
           (mevedel-web-retrieval--send r))
          ('return (mevedel-web-retrieval--deliver r (list :redirect target :from from)))
          (`(error . ,message) (mevedel-web-retrieval--deliver r (list :error message)))))))))

(cl-defun mevedel-web-retrieval-start (url callback &key (method "GET") data headers redirect)
  "Retrieve URL in the background; call CALLBACK once with the outcome.
METHOD, DATA (a unibyte string) and HEADERS (an alist) make the
request.  REDIRECT, a function of (FROM TO), decides each redirect:
`follow', `return' (deliver (:redirect TO :from FROM)) or (error .
MESSAGE); without it every redirect is followed.  The outcome is
\(:status CODE :type TYPE :charset CHARSET :body BYTES :url FINAL
:requested URL :redirected BOOL), (:redirect ...) or (:error MESSAGE).
Return a function that cancels the retrieval (CALLBACK is then never
called)."
  (let ((r (mevedel-web-retrieval--state-make
            :url url :requested url :method method :data data :headers headers
            :redirect redirect :callback callback)))
    (if-let* ((problem (mevedel-web-retrieval-url-problem url)))
        (mevedel-web-retrieval--deliver r (list :error problem))
      (setf (mevedel-web-retrieval--state-timer r)
            (run-at-time mevedel-web-retrieval-timeout nil
                         (lambda ()
                           (mevedel-web-retrieval--deliver
                            r (list :error (format "%s timed out after %s s"
                                                   (mevedel-web-retrieval--state-url r)
                                                   mevedel-web-retrieval-timeout))))))
      (mevedel-web-retrieval--send r))
    (lambda ()
      (unless (mevedel-web-retrieval--state-done r)
        (setf (mevedel-web-retrieval--state-done r) t)
        (mevedel-web-retrieval--release r)))))

(provide 'mevedel-web-retrieval)
;;; mevedel-web-retrieval.el ends here
