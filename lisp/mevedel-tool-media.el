;;; mevedel-tool-media.el --- Images that tool results carry to the model  -*- lexical-binding: t; -*-

;;; Commentary:

;; A tool handler may return media records, (:mime TYPE :data BYTES)
;; or (:mime TYPE :path FILE), next to its text (WebFetch does for
;; images).  This file is the one place that handles them:
;;
;; - Capture (`mevedel-tool-media-capture', called by the pipeline when
;;   it accepts a handler's value) checks each record's type, size and
;;   signature, reads a :path once, and keeps the bytes behind an
;;   opaque reference (:media ID :tool-use-id TOOL-USE-ID).  A session
;;   with durable storage also gets a copy under its
;;   tool-results/media/, so that a resumed conversation sends the same
;;   images again without rereading where they came from.
;; - The references ride on the result's text as its
;;   `mevedel-tool-media' property, which the transcript saves; hooks
;;   and the view see only the text.
;; - Restoring (`mevedel-tool-media-payloads') turns references back
;;   into base64 payloads, from a cache bounded by
;;   `mevedel-tool-media-cache-max-bytes' (oldest dropped first, the
;;   newest always kept) or else from the session's copy.  Media
;;   captured without durable storage is gone once evicted.
;; - The provider shapes (`mevedel-tool-media-anthropic-blocks',
;;   `mevedel-tool-media-openai-parts') are built here;
;;   mevedel-gptel.el puts them into gptel's messages.

;;; Code:

(require 'cl-lib)
(require 'mevedel-session)

(defgroup mevedel-tool-media nil
  "Images that tool results carry to the model."
  :group 'mevedel)

(defcustom mevedel-tool-media-cache-max-bytes (* 25 1024 1024)
  "Most bytes of captured media kept in memory.
Beyond it the oldest records are dropped (the newest is always kept);
a dropped record is read again from its session's copy when there is
one."
  :type 'natnum)

(defconst mevedel-tool-media-limit (* 10 1024 1024)
  "Largest media record a tool result may carry, in bytes.")

(defconst mevedel-tool-media-types
  '(("image/png" "png" "\\`\x89PNG\r\n\x1a\n")
    ("image/jpeg" "jpeg" "\\`\xff\xd8\xff")
    ("image/gif" "gif" "\\`GIF8[79]a")
    ("image/webp" "webp" "\\`RIFF....WEBP"))
  "Media types a tool result may carry: (MIME EXTENSION SIGNATURE-REGEXP).
The signature is matched against the record's first bytes.")

(defvar mevedel-tool-media--cache (make-hash-table :test #'equal)
  "Captured media by record ID: (MIME . BASE64).")

(defvar mevedel-tool-media--order nil
  "Record IDs in `mevedel-tool-media--cache', newest first.")

;;;; Checking

(defun mevedel-tool-media-type-p (mime)
  "Return non-nil when MIME is a media type tool results may carry."
  (assoc mime mevedel-tool-media-types))

(defun mevedel-tool-media-problem (mime bytes)
  "Return why BYTES of type MIME cannot be carried, or nil when they can."
  (let ((type (assoc mime mevedel-tool-media-types)))
    (cond ((not type) (format "%s is not an image type a model is sent" mime))
          ((multibyte-string-p bytes) "the bytes were decoded as text")
          ((> (length bytes) mevedel-tool-media-limit)
           (format "%d bytes is more than the limit of %d" (length bytes)
                   mevedel-tool-media-limit))
          ((not (string-match-p (nth 2 type) bytes))
           (format "the bytes do not start with the %s signature" mime)))))

(defun mevedel-tool-media-reference-p (record)
  "Return non-nil when RECORD is a captured reference, not raw media."
  (and (consp record) (stringp (plist-get record :media))))

;;;; Capture

(defun mevedel-tool-media--id-mime (id)
  "Return the media type of record ID, or nil when capture gives no such ID."
  (and (stringp id)
       (string-match "\\`[0-9a-f]\\{32\\}\\.\\([a-z]+\\)\\'" id)
       (car (cl-find (match-string 1 id) mevedel-tool-media-types :key #'cadr :test #'equal))))

(defun mevedel-tool-media--file (session id)
  "Return the name of SESSION's copy of record ID, or nil without storage."
  (when-let* ((dir (and (mevedel-session-durable-p session)
                        (mevedel-session-tool-results-directory session))))
    (expand-file-name id (expand-file-name "media" dir))))

(defun mevedel-tool-media--remember (id mime base64)
  "Keep record ID (MIME, BASE64) in the cache, dropping the oldest over its bound."
  (puthash id (cons mime base64) mevedel-tool-media--cache)
  (push id mevedel-tool-media--order)
  (let ((total 0) (kept nil))
    (dolist (each mevedel-tool-media--order)
      (let ((size (length (cdr (gethash each mevedel-tool-media--cache)))))
        (if (and kept (> (+ total size) mevedel-tool-media-cache-max-bytes))
            (remhash each mevedel-tool-media--cache)
          (cl-incf total size)
          (push each kept))))
    (setq mevedel-tool-media--order (nreverse kept))))

(defun mevedel-tool-media--bytes (record)
  "Return RECORD's bytes: its :data, or its :path read once as bytes."
  (or (plist-get record :data)
      (with-temp-buffer
        (set-buffer-multibyte nil)
        (let ((coding-system-for-read 'binary))
          (insert-file-contents-literally (plist-get record :path)))
        (buffer-string))))

(defun mevedel-tool-media-capture (records tool-use-id session)
  "Return references for the media RECORDS of call TOOL-USE-ID in SESSION.
References already captured pass through.  A record that cannot be
carried (see `mevedel-tool-media-problem') signals `error' naming why,
so the call fails instead of reaching the model without its image."
  (mapcar
   (lambda (record)
     (if (mevedel-tool-media-reference-p record)
         record
       (let* ((mime (plist-get record :mime))
              (bytes (condition-case err (mevedel-tool-media--bytes record)
                       (file-error (error "Cannot read the image %s: %s" (plist-get record :path)
                                          (error-message-string err)))))
              (problem (mevedel-tool-media-problem mime bytes))
              (id (and (not problem)
                       (format "%s.%s" (md5 (format "%s%s%s" (random) (float-time) tool-use-id))
                               (nth 1 (assoc mime mevedel-tool-media-types))))))
         (when problem (error "The tool returned an image that cannot be sent: %s" problem))
         (mevedel-tool-media--remember id mime (base64-encode-string bytes t))
         (when-let* ((file (mevedel-tool-media--file session id)))
           (condition-case nil
               (progn
                 (mevedel-session-ensure-storage session)
                 (make-directory (file-name-directory file) t)
                 (let ((coding-system-for-write 'binary))
                   (write-region bytes nil file nil 'silent)))
             (error nil)))
         (list :media id :tool-use-id tool-use-id))))
   records))

;;;; Restoring

(defun mevedel-tool-media--restore (reference session)
  "Return (MIME . BASE64) of REFERENCE, from the cache or SESSION's copy, or nil."
  (let* ((id (plist-get reference :media))
         (mime (mevedel-tool-media--id-mime id)))
    (when mime
      (or (gethash id mevedel-tool-media--cache)
          (when-let* ((file (mevedel-tool-media--file session id))
                      ((file-readable-p file))
                      (bytes (mevedel-tool-media--bytes (list :path file))))
            (unless (mevedel-tool-media-problem mime bytes)
              (mevedel-tool-media--remember id mime (base64-encode-string bytes t))
              (gethash id mevedel-tool-media--cache)))))))

(defun mevedel-tool-media-payloads (references session)
  "Return the (MIME . BASE64) payloads of REFERENCES that can still be had.
SESSION supplies the durable copies of records no longer cached."
  (delq nil (mapcar (lambda (reference) (mevedel-tool-media--restore reference session))
                    references)))

;;;; Provider shapes

(defun mevedel-tool-media-anthropic-blocks (payloads)
  "Return Anthropic content blocks for PAYLOADS, a list of (MIME . BASE64)."
  (mapcar (lambda (payload)
            (list :type "image"
                  :source (list :type "base64" :media_type (car payload) :data (cdr payload))))
          payloads))

(defun mevedel-tool-media-openai-parts (payloads)
  "Return OpenAI chat content parts for PAYLOADS, a list of (MIME . BASE64)."
  (mapcar (lambda (payload)
            (list :type "image_url"
                  :image_url (list :url (concat "data:" (car payload) ";base64," (cdr payload)))))
          payloads))

(provide 'mevedel-tool-media)
;;; mevedel-tool-media.el ends here
