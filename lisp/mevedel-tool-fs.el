;;; mevedel-tool-fs.el --- Read, Glob and Grep  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The filesystem-shaped tools.  Each handler is asynchronous: it
;; starts the work in the native module (a background thread), returns
;; a cancel function at once, and calls its callback with a result
;; plist (:result TEXT [:status error]) exactly once, so Emacs never
;; waits on a file or a search.
;;
;; Paths may be ordinary filesystem paths or resource addresses (see
;; mevedel-resource.el).  An address is prepared before permission by
;; `mevedel-tool-fs-prepare-args', which keeps the opaque attempt beside
;; the arguments (keyed by the address string itself, so the arguments
;; stay plain data that can be printed and persisted); the handler
;; consumes it.  A handler called without that preparation prepares the
;; address itself.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-resource)

;;;; Customization

(defgroup mevedel-tool-fs nil
  "Read, Glob and Grep."
  :group 'mevedel-resource
  :prefix "mevedel-tool-fs-")

(defcustom mevedel-tool-fs-search-timeout 20
  "Seconds a Glob or Grep may run before it returns partial results."
  :type 'number)

(defcustom mevedel-tool-fs-remote-read-limit (* 64 1024 1024)
  "Largest remote (TRAMP) file, in bytes, that Read copies here to show.
Read of a remote file copies it once through TRAMP (as visiting it
would) and pages the local copy, which is deleted when the Read
settles."
  :type 'natnum)

(defvar mevedel-tool-fs--attempts (make-hash-table :test #'eq :weakness 'key)
  "Prepared attempts: address string object -> (TOOL . ATTEMPT).")

(defconst mevedel-tool-fs-path-args
  '(("Read" . :file_path) ("Glob" . :path) ("Grep" . :path))
  "The path-or-resource argument of each tool.")

;;;; Arguments

(defun mevedel-tool-fs--value (args key)
  "Return the value of KEY in ARGS, with JSON null and false as nil."
  (let ((v (plist-get args key)))
    (if (memq v '(:null :json-false)) nil v)))

(defun mevedel-tool-fs-prepare-args (tool args)
  "Prepare the resource address in ARGS of TOOL (\"Read\", \"Glob\", \"Grep\").
Return ARGS, unchanged.  For a resource address the opaque attempt is
kept for the handler, which finds it through the address string object.
Validation failures signal `mevedel-core-resource-error' naming the
address."
  (let* ((key (cdr (assoc tool mevedel-tool-fs-path-args)))
         (value (and key (mevedel-tool-fs--value args key))))
    (when (mevedel-resource-address-p value)
      (puthash value (cons tool (mevedel-resource-prepare value tool))
               mevedel-tool-fs--attempts))
    args))

(defun mevedel-tool-fs-prepared-attempt (tool address)
  "Return and forget the attempt prepared for TOOL from string ADDRESS, or nil."
  (let ((entry (gethash address mevedel-tool-fs--attempts)))
    (when (equal (car entry) tool)
      (remhash address mevedel-tool-fs--attempts)
      (cdr entry))))

(defun mevedel-tool-fs--target (tool args)
  "Return (TARGET . DISPLAY) for the path argument of TOOL in ARGS.
TARGET is a prepared attempt or an absolute file name; DISPLAY is how
results name it."
  (let* ((key (cdr (assoc tool mevedel-tool-fs-path-args)))
         (value (mevedel-tool-fs--value args key))
         (attempt (and (stringp value) (mevedel-tool-fs-prepared-attempt tool value))))
    (cond
     (attempt (cons attempt value))
     ((mevedel-resource-address-p value)
      (cons (mevedel-resource-prepare value tool) value))
     ((and (not value) (equal tool "Read"))
      (signal 'mevedel-core-resource-error (list "Read: `file_path' is required")))
     (t (let ((file (expand-file-name (or value default-directory))))
          (when (and (file-remote-p file) (not (equal tool "Read")))
            (signal 'mevedel-core-search-error
                    (list (format "%s: `%s' is on a remote host (TRAMP), and %s searches \
local files in-process.  Search on that host with a shell command (rg or grep there), \
or Read single remote files" tool (or value (abbreviate-file-name file)) tool))))
          (cons file (or value "")))))))

(defun mevedel-tool-fs--remote-copy (file display)
  "Return a local temporary copy of the remote FILE, named DISPLAY in errors.
A remote directory, a missing file or one over
`mevedel-tool-fs-remote-read-limit' signals `mevedel-core-resource-error'."
  (let* ((attrs (file-attributes file))
         (size (and attrs (file-attribute-size attrs)))
         (fail (lambda (why)
                 (signal 'mevedel-core-resource-error (list (format "Read `%s': %s" display why))))))
    (cond
     ((null attrs) (funcall fail "it does not exist"))
     ((eq t (file-attribute-type attrs))
      (funcall fail "it is a remote (TRAMP) directory; Read lists local directories only.  \
List it with a shell command on that host, or Read a file in it"))
     ((> size mevedel-tool-fs-remote-read-limit)
      (funcall fail (format "the remote file has %d bytes, more than \
`mevedel-tool-fs-remote-read-limit' (%d); read a range of it with a shell command on that host"
                            size mevedel-tool-fs-remote-read-limit)))
     (t (or (file-local-copy file)
            (funcall fail "TRAMP could not copy it here"))))))

;;;; Running

(defun mevedel-tool-fs--run (callback start)
  "Call START with a reply function and settle CALLBACK exactly once.
START returns a request id.  Return a function that cancels the request
and settles CALLBACK with a cancellation error, if it has not settled."
  (let* ((settled nil)
         (settle (lambda (result)
                   (unless settled
                     (setq settled t)
                     (funcall callback result))))
         (id nil))
    (condition-case err
        (setq id (funcall start
                          (lambda (status value)
                            (funcall settle
                                     (if (eq status 'ok)
                                         (list :result (plist-get value :text))
                                       (list :result (cadr value) :status 'error))))))
      (error (funcall settle (list :result (error-message-string err) :status 'error))))
    (lambda ()
      (when id (mevedel-core-search-cancel id))
      (funcall settle (list :result "Cancelled." :status 'error)))))

(defun mevedel-tool-fs--guard (callback body)
  "Run BODY, a function of no arguments returning a cancel function.
A signal from BODY settles CALLBACK with an error result instead."
  (condition-case err
      (funcall body)
    (error (funcall callback (list :result (error-message-string err) :status 'error))
           #'ignore)))

(defun mevedel-tool-fs--timeout-ms ()
  "Return the search time limit in milliseconds."
  (max 1 (round (* 1000 mevedel-tool-fs-search-timeout))))

;;;; Handlers

(defun mevedel-tool-fs-read (callback args)
  "Read the file, directory or resource named in ARGS; call CALLBACK.
ARGS has :file_path and optionally :offset, :limit and :char_offset.
Return a function that cancels the read."
  (mevedel-tool-fs--guard
   callback
   (lambda ()
     (pcase-let* ((`(,target . ,display) (mevedel-tool-fs--target "Read" args))
                  (copy (and (stringp target) (file-remote-p target)
                             (mevedel-tool-fs--remote-copy target display))))
       (mevedel-tool-fs--run
        (if copy
            (lambda (result)
              (delete-file copy)
              (funcall callback result))
          callback)
        (lambda (reply)
          (mevedel-core-resource-read
           (or copy target) display
           (list :offset (mevedel-tool-fs--value args :offset)
                 :limit (mevedel-tool-fs--value args :limit)
                 :char-offset (mevedel-tool-fs--value args :char_offset))
           reply)))))))

(defun mevedel-tool-fs-glob (callback args)
  "List the files matching :pattern below :path in ARGS; call CALLBACK.
Return a function that cancels the search."
  (mevedel-tool-fs--guard
   callback
   (lambda ()
     (pcase-let ((`(,target . ,display) (mevedel-tool-fs--target "Glob" args)))
       (mevedel-tool-fs--run
        callback
        (lambda (reply)
          (mevedel-core-search-glob target display
                                    (or (mevedel-tool-fs--value args :pattern) "")
                                    (mevedel-tool-fs--timeout-ms) reply)))))))

(defun mevedel-tool-fs--grep-options (args)
  "Return the module's Grep options for tool ARGS."
  (let* ((context (or (mevedel-tool-fs--value args :-C)
                      (mevedel-tool-fs--value args :context)))
         (line-numbers (plist-member args :-n)))
    (list :pattern (mevedel-tool-fs--value args :pattern)
          :glob (mevedel-tool-fs--value args :glob)
          :type (mevedel-tool-fs--value args :type)
          :output-mode (or (mevedel-tool-fs--value args :output_mode) "files_with_matches")
          :before (or (mevedel-tool-fs--value args :-B) context 0)
          :after (or (mevedel-tool-fs--value args :-A) context 0)
          :case-insensitive (mevedel-tool-fs--value args :-i)
          :line-numbers (if line-numbers (mevedel-tool-fs--value args :-n) t)
          :multiline (mevedel-tool-fs--value args :multiline)
          :head-limit (let ((h (mevedel-tool-fs--value args :head_limit))) (if h h 250))
          :offset (or (mevedel-tool-fs--value args :offset) 0))))

(defun mevedel-tool-fs-grep (callback args)
  "Search file contents for :pattern as ARGS say; call CALLBACK.
Return a function that cancels the search."
  (mevedel-tool-fs--guard
   callback
   (lambda ()
     (pcase-let ((`(,target . ,display) (mevedel-tool-fs--target "Grep" args)))
       (mevedel-tool-fs--run
        callback
        (lambda (reply)
          (mevedel-core-search-grep target display (mevedel-tool-fs--grep-options args)
                                    (mevedel-tool-fs--timeout-ms) reply)))))))

(provide 'mevedel-tool-fs)
;;; mevedel-tool-fs.el ends here
