;;; mevedel-tool-fs.el --- Read, Glob and Grep  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The filesystem tool family: the declarations of Read, Glob and Grep,
;; their handlers and their row renderers.  Each handler is
;; asynchronous: it starts the work in the native module (a background
;; thread), returns a cancel function at once, and calls its callback
;; with a result plist (:result TEXT [:status error]) exactly once, so
;; Emacs never waits on a file or a search.  The declared functions
;; hand the pipeline the legacy shape it also understands: the text,
;; with errors as "Error: ..." strings.
;;
;; Paths may be ordinary filesystem paths or resource addresses (see
;; mevedel-resource.el).  Each tool's path argument is declared
;; `path-or-resource' with the :access of its operation, so the
;; pipeline prepares an address before permission and keeps the
;; opaque attempt beside it; the handler takes it with
;; `mevedel-resource-take-prepared'.  A handler called without that
;; preparation prepares the address itself.
;;
;; Unsaved buffers are what the model reads: before a call, one pass
;; over `buffer-list' finds the file-visiting buffers with unsaved
;; changes, and those whose file (by truename, as the module resolves
;; the search root) is the Read target or lies below the Glob or Grep
;; path hand their text to the module, one string per buffer and call.
;; Read pages that text, Grep searches it in place of the disk copy
;; (the buffer's line numbers; the walk's ignore rules still decide
;; which files are searched, and a buffer whose file does not exist
;; yet is searched when the walk would have searched it), and Glob
;; lists the files that exist only as such buffers.  Results mark each
;; such file, since ApplyPatch refuses it until the user saves.
;; Without modified buffers nothing changes.  Remote buffers are left
;; out; `mevedel-tool-fs-read-unsaved-buffers' turns it all off.
;;
;; Images and PDFs: the module recognizes them and answers with text
;; and pictures (decoded, scaled and re-encoded there, PDF pages
;; extracted or rendered by poppler there; see crates/mevedel-core's
;; media/).  This file only says which image types the call's model
;; takes (gptel's capabilities, through mevedel-gptel.el), and hands
;; the pictures to the pipeline as media records, with small
;; thumbnails as render-data for the row.  It does not check or send
;; the images itself (mevedel-tool-media.el does).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-history)
(require 'mevedel-memory)
(require 'mevedel-pipeline)
(require 'mevedel-remote)
(require 'mevedel-resource)
(require 'mevedel-session)
(require 'mevedel-tool-media)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)

(declare-function mevedel-gptel-model-accepts-mime-p "mevedel-gptel" (mime &optional buffer))

;;;; Customization

(defgroup mevedel-tool-fs nil
  "Read, Glob and Grep."
  :group 'mevedel-tool
  :prefix "mevedel-tool-fs-")

(defcustom mevedel-tool-fs-search-timeout 20
  "Seconds a Glob or Grep may run before it returns partial results."
  :type 'number)

(defcustom mevedel-tool-fs-read-unsaved-buffers t
  "Whether Read, Grep and Glob see files as their modified buffers have them.
When non-nil, a file visited in a buffer with unsaved changes is read
and searched as that buffer's text, marked \"(unsaved changes in
Emacs)\", and a buffer whose file does not exist yet is read, searched
and listed as that file, marked \"(unsaved new buffer in Emacs)\".
When nil, the tools see only what is on disk."
  :type 'boolean)

(defcustom mevedel-tool-fs-remote-read-limit (* 64 1024 1024)
  "Largest remote (TRAMP) file, in bytes, that Read copies here to show.
A remote image or PDF is fetched here by the remote helper's byte
reads and rendered as a local one; without the helper, a remote file
Read cannot page on its host is copied once through TRAMP (as visiting
it would).  The local copy is deleted when the Read settles."
  :type 'natnum)

(defcustom mevedel-tool-fs-image-max-side 1568
  "Longest side, in pixels, of an image Read sends the model.
Larger images and rendered PDF pages are scaled down to it; the
module never sends more than 8000."
  :type 'natnum)

;;;; Arguments

(defun mevedel-tool-fs--value (args key)
  "Return the value of KEY in ARGS, with JSON null and false as nil."
  (let ((v (plist-get args key)))
    (if (memq v '(:null :json-false)) nil v)))

(defun mevedel-tool-fs--target (tool key args)
  "Return (TARGET . DISPLAY) for the path argument KEY of TOOL in ARGS.
TOOL (\"Read\", \"Glob\" or \"Grep\") is also the resource operation.
TARGET is a prepared attempt or an absolute file name; DISPLAY is how
results name it."
  (let* ((value (mevedel-tool-fs--value args key))
         (attempt (and (stringp value) (mevedel-resource-take-prepared value tool))))
    (cond
     (attempt (cons attempt value))
     ((mevedel-resource-address-p value)
      (cons (mevedel-resource-prepare value tool) value))
     ((and (not value) (equal tool "Read"))
      (signal 'mevedel-core-resource-error (list "Read: `file_path' is required")))
     (t (cons (mevedel-remote-expand-file-name (or value default-directory)) (or value ""))))))

(defconst mevedel-tool-fs--local-media "\\.\\(?:png\\|jpe?g\\|gif\\|webp\\|pdf\\)\\'"
  "Remote files Read fetches here whole: the module renders images and PDFs.")

(defun mevedel-tool-fs--remote-copy (file display)
  "Return a local temporary copy of the remote FILE, named DISPLAY in errors.
A remote directory, a missing file or one over
`mevedel-tool-fs-remote-read-limit' signals `mevedel-core-resource-error'."
  (let* ((attrs (mevedel-remote-call file (lambda () (file-attributes file))))
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

(defun mevedel-tool-fs--remote-text (file args)
  "Return the text Read pages for the remote FILE with ARGS, or nil.
That is the text of a modified buffer visiting FILE, else the part of
the file the page needs (`mevedel-remote-read-text'), fetched without
copying the rest.  Nil for a binary file, an image or a PDF, and with
:pages or :mode: those go through a local copy."
  ;; By name: resolving links on the host would cost round trips.
  (let ((buffer (get-file-buffer file)))
    (cond
     ((and buffer (buffer-modified-p buffer) mevedel-tool-fs-read-unsaved-buffers)
      (mevedel-tool-fs--buffer-text buffer))
     ((or (mevedel-tool-fs--value args :pages) (mevedel-tool-fs--value args :mode)
          (string-match-p mevedel-tool-fs--local-media file))
      nil)
     (t (pcase-let ((`(,text . ,complete)
                     (mevedel-remote-read-text
                      file (list :offset (mevedel-tool-fs--value args :offset)
                                 :limit (mevedel-tool-fs--value args :limit)))))
          (if (or complete (null text))
              text
            ;; Only the start was fetched: the page's note must still
            ;; count the whole file's lines.
            (propertize text 'mevedel-tool-fs-lines (mevedel-remote-line-count file))))))))

(defun mevedel-tool-fs--whole-count (callback text)
  "Return CALLBACK, correcting the line total of a page of the partial TEXT.
TEXT, the start of a remote file, carries the file's line count as the
property `mevedel-tool-fs-lines' (see `mevedel-tool-fs--remote-text')."
  (if-let* ((lines (and text (get-text-property 0 'mevedel-tool-fs-lines text))))
      (lambda (result)
        (let ((text (plist-get result :result)))
          (funcall callback
                   (if (and (stringp text)
                            (string-match "\\[Showing lines [0-9]+-[0-9]+ of \\([0-9]+\\);" text))
                       (plist-put (copy-sequence result) :result
                                  (replace-match (number-to-string lines) t t text 1))
                     result))))
    callback))

;;;; Unsaved buffers

(defun mevedel-tool-fs--unsaved (target exact)
  "Return (BUFFER TRUENAME NEW-P) for each modified buffer under TARGET.
TARGET is an absolute file name or a prepared attempt, whose backing
paths count.  A buffer counts when it visits a local file with unsaved
changes, and its file is TARGET or, unless EXACT, below it.  NEW-P
says the file does not exist.  Return nil when
`mevedel-tool-fs-read-unsaved-buffers' is off."
  (when-let* ((mevedel-tool-fs-read-unsaved-buffers)
              (buffers (cl-loop for buffer in (buffer-list)
                                for file = (buffer-file-name buffer)
                                when (and file (buffer-modified-p buffer)
                                          (not (file-remote-p file)))
                                collect (cons buffer file)))
              (roots (if (stringp target)
                         (unless (file-remote-p target) (list target))
                       (plist-get (mevedel-core-resource-attempt-facts target) :paths))))
    (let* ((names (mevedel-core-truenames (append roots (mapcar #'cdr buffers))))
           (root-names (cl-subseq names 0 (length roots)))
           (dirs (unless exact (mapcar #'file-name-as-directory root-names))))
      (cl-loop for (buffer . file) in buffers
               for truename in (nthcdr (length roots) names)
               when (or (member truename root-names)
                        (cl-some (lambda (dir) (string-prefix-p dir truename)) dirs))
               collect (list buffer truename (not (file-exists-p file)))))))

(defun mevedel-tool-fs--buffer-text (buffer)
  "Return the whole text of BUFFER, narrowing aside, without properties."
  (with-current-buffer buffer
    (save-restriction
      (widen)
      (buffer-substring-no-properties (point-min) (point-max)))))

(defun mevedel-tool-fs--grep-unsaved (unsaved)
  "Return the module's Grep overlay, (TRUENAME TEXT NEW-P)s, for UNSAVED."
  (mapcar (pcase-lambda (`(,buffer ,truename ,new))
            (list truename (mevedel-tool-fs--buffer-text buffer) new))
          unsaved))

(defun mevedel-tool-fs--glob-unsaved (unsaved)
  "Return the truenames of the new files among UNSAVED, for Glob."
  (cl-loop for (_ truename new) in unsaved when new collect truename))

;;;; Text documents (history://, agent://, memory://root)

(defun mevedel-tool-fs--documents (target tool)
  "Return the text documents TARGET names for TOOL, or nil.
TARGET is what `mevedel-tool-fs--target' returned: only a prepared
history:// or agent:// attempt names documents (see
`mevedel-history-documents', `mevedel-history-agent-documents'), and a
Read of memory://root, which reads as the prompt's memory index."
  (unless (stringp target)
    (let* ((facts (mevedel-core-resource-attempt-facts target))
           (canonical (plist-get facts :canonical)))
      (cond
       ((and (equal tool "Read") (equal canonical "memory://root"))
        (let ((workspace (plist-get (funcall mevedel-resource-session-function) :workspace)))
          (list (cons canonical (or (mevedel-memory-index workspace)
                                    "No memory roots are configured.")))))
       ((and (member (plist-get facts :scheme) '("history" "agent")) (plist-get facts :available)
             ;; The bare listing is text the module has already.
             (not (equal canonical "history://")))
        (unless (mevedel-session-p mevedel-session-current)
          (signal 'mevedel-core-resource-error
                  (list (format "%s is unavailable outside a mevedel session" canonical))))
        (or (if (equal (plist-get facts :scheme) "agent")
                (mevedel-history-agent-documents canonical mevedel-session-current)
              (mevedel-history-documents canonical mevedel-session-current tool))
            (list (cons canonical ""))))))))

;;;; Addresses other files serve (mcp://, shared://)

(defvar mevedel-tool-fs-read-functions nil
  "Functions of (CANONICAL SESSION CALLBACK) serving a Read or Grep of an address.
One that serves the address CANONICAL returns non-nil and calls
CALLBACK once, later or at once, with the text, (file PATH) for a
picture Read shows as it shows an image file (PATH is a temporary
file, deleted after), or (error MESSAGE); Read then pages the text,
Grep searches it.  mevedel-mcp.el serves mcp:// this way, and
mevedel-tool-editing.el shared://.")

(defun mevedel-tool-fs--serve (target tool page callback)
  "Serve TOOL's call on the attempt TARGET; settle CALLBACK.
PAGE is Read's paging, or for Grep the search options.  Return a
function that cancels it, or nil when TARGET is no address a function
of `mevedel-tool-fs-read-functions' serves."
  (let* ((facts (and (not (stringp target)) (mevedel-core-resource-attempt-facts target)))
         (canonical (plist-get facts :canonical))
         (display (or (plist-get facts :authored) canonical))
         (cancel nil)
         (settled nil)
         (settle (lambda (result)
                   (unless settled
                     (setq settled t)
                     (funcall callback result))))
         (served
          (and canonical
               (run-hook-with-args-until-success
                'mevedel-tool-fs-read-functions canonical mevedel-session-current
                (lambda (text)
                  (if settled
                      ;; Cancelled meanwhile: only the picture's copy is left.
                      (pcase text (`(file ,file) (delete-file file)))
                    (pcase text
                      ((pred stringp)
                       (setq cancel
                             (mevedel-tool-fs--run
                              settle (lambda (reply)
                                       (if (equal tool "Grep")
                                           (mevedel-tool-fs--search-documents
                                            tool (list (cons canonical text)) page reply)
                                         (mevedel-core-resource-read-text
                                          text canonical page reply))))))
                      (`(file ,file)
                       (if (equal tool "Grep")
                           (progn (delete-file file)
                                  (funcall settle
                                           (list :result (format "Grep searches text; %s is a \
picture" display)
                                                 :status 'error)))
                         (setq cancel
                               (mevedel-tool-fs--run
                                (lambda (result)
                                  (delete-file file)
                                  (funcall settle result))
                                (lambda (reply)
                                  (mevedel-core-resource-read file display page reply))))))
                      (_ (funcall settle (list :result (cadr text) :status 'error))))))))))
    (and served
         (lambda ()
           (if cancel (funcall cancel)
             (funcall settle (list :result "Cancelled." :status 'error)))))))

;;;; Running

(defun mevedel-tool-fs--outcome (value)
  "Return the result plist of the module's reply VALUE.
A reply with pictures (:media, base64) gives media records for the
pipeline and, as render-data, each picture's size and thumbnail."
  (let ((media (plist-get value :media)))
    (append
     (list :result (plist-get value :text))
     (when media
       (list :media (mapcar (lambda (m)
                              (list :mime (plist-get m :mime)
                                    :data (base64-decode-string (plist-get m :base64))))
                            media)
             :render-data
             (list :media (mapcar (lambda (m)
                                    (list :mime (plist-get m :mime)
                                          :width (plist-get m :width)
                                          :height (plist-get m :height)
                                          :bytes (plist-get m :bytes)
                                          :thumbnail (plist-get m :thumbnail)))
                                  media)))))))

(defconst mevedel-tool-fs--image-types '("image/png" "image/jpeg" "image/gif" "image/webp")
  "Image types Read may send.")

(defun mevedel-tool-fs-accepted-images (buffer)
  "Return the image types the model of data BUFFER takes, nil for text only."
  (and (fboundp 'mevedel-gptel-model-accepts-mime-p)
       (cl-remove-if-not (lambda (mime) (mevedel-gptel-model-accepts-mime-p mime buffer))
                         mevedel-tool-fs--image-types)))

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
                                         (mevedel-tool-fs--outcome value)
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

(defun mevedel-tool-fs--when-free (callback args key start)
  "Call START, a handler's body, now or once TRAMP is free.
It waits (`mevedel-remote-when-free') when the path argument KEY of
ARGS names a remote file, or is relative in a remote workspace.
CALLBACK is the handler's.  Return a cancel function."
  (let ((value (mevedel-tool-fs--value args key)))
    (if (not (if (and (stringp value) (file-name-absolute-p value))
                 (mevedel-remote-p value)
               (mevedel-remote-p default-directory)))
        (funcall start)
      (let* ((cancel nil)
             (directory default-directory)
             (drop (mevedel-remote-when-free
                    (mevedel-pipeline-continuation
                     (lambda ()
                       (let ((default-directory directory))
                         (setq cancel (funcall start))))))))
        (lambda ()
          (if cancel (funcall cancel)
            (funcall drop)
            (funcall callback (list :result "Cancelled." :status 'error))))))))

(defun mevedel-tool-fs--read-permission (args)
  "Answer `allow' for a Read of ARGS in the workspace by name, on a helper's host.
A read-only call inside the workspace is allowed in every mode, and
deciding that for a remote file here would resolve its links through
TRAMP: four round trips.  When the file is inside the workspace by
name and mevedel's helper runs on its host, the helper resolves them
instead, in the Read's own request, and refuses a file that leads
outside (`mevedel-remote-read-page').  Nil otherwise: the usual check."
  (let ((file (mevedel-tool-fs--value args :file_path)))
    (and (stringp file)
         (mevedel-remote-inside-p file default-directory)
         (mevedel-remote-has-helper-p file)
         'allow)))

(defun mevedel-tool-fs--really-inside-p (file directory)
  "Return non-nil when the remote FILE, links resolved, is inside DIRECTORY.
Asked through TRAMP, when the helper that would check it is not there;
a host that cannot be reached signals, naming it."
  (mevedel-remote-call file (lambda () (file-in-directory-p file directory))))

(defun mevedel-tool-fs-read (callback args)
  "Read the file, directory or resource named in ARGS; call CALLBACK.
ARGS has :file_path and optionally :offset, :limit and :char_offset,
and for a PDF :pages and :mode.
Return a function that cancels the read."
  (mevedel-tool-fs--when-free
   callback args :file_path
   (lambda () (mevedel-tool-fs--read callback args))))

(defun mevedel-tool-fs--page (args)
  "Return the module's page request for Read's ARGS.
The image types come from the running call's model, so it is made
when the call starts, not in a later callback."
  (list :offset (mevedel-tool-fs--value args :offset)
        :limit (mevedel-tool-fs--value args :limit)
        :char-offset (mevedel-tool-fs--value args :char_offset)
        :pages (mevedel-tool-fs--value args :pages)
        :render (equal (mevedel-tool-fs--value args :mode) "image")
        :accepts (mevedel-tool-fs-accepted-images
                  (plist-get (mevedel-pipeline-current-context) :data-buffer))
        :max-side mevedel-tool-fs-image-max-side))

(defun mevedel-tool-fs--remote-page (args root)
  "Return the helper's page request for the Read ARGS of a remote text file.
ROOT is the host-side workspace the file is inside by name, or nil."
  (list :offset (mevedel-tool-fs--value args :offset)
        :limit (mevedel-tool-fs--value args :limit)
        :char-offset (mevedel-tool-fs--value args :char_offset)
        :root root))

(defun mevedel-tool-fs--read-ahead (args)
  "Ask the host for the page the Read ARGS will want (Read's :ahead).
Only a plain name of a remote text file inside the workspace, with no
modified buffer visiting it.  The resources step makes the name
absolute (`mevedel-pipeline-prepare-resources'), and the handler names
the file by it: it asks for this very page
\=(`mevedel-tool-fs--remote-page') and takes this answer, so the round
trip overlaps the steps before the handler
\=(`mevedel-remote-read-page-ahead')."
  (let ((value (mevedel-tool-fs--value args :file_path)))
    (when (and (stringp value)
               (not (or (mevedel-tool-fs--value args :pages) (mevedel-tool-fs--value args :mode)
                        (mevedel-resource-address-p value))))
      (let* ((target (mevedel-remote-expand-file-name value))
             (root (and (mevedel-remote-p target)
                        (not (string-match-p mevedel-tool-fs--local-media target))
                        (mevedel-remote-inside-p target default-directory))))
        (when (and root
                   (not (cl-loop for buffer in (buffer-list)
                                 thereis (and (equal (buffer-file-name buffer) target)
                                              (buffer-modified-p buffer)))))
          (mevedel-remote-read-page-ahead target target (mevedel-tool-fs--remote-page args root)))))))

(defun mevedel-tool-fs--read (callback args)
  "Read as `mevedel-tool-fs-read' with CALLBACK and ARGS, TRAMP being free.
A page of a remote text file is read by the helper on its host
\(`mevedel-remote-read-page'): one request, whatever the file's size.
A remote image or PDF is fetched by the helper's byte reads
\(`mevedel-remote-read-media') and rendered here as a local one.  A
modified buffer visiting the file goes the local way, as does
everything when the helper cannot run there."
  (mevedel-tool-fs--guard
   callback
   (lambda ()
     (pcase-let* ((`(,target . ,display) (mevedel-tool-fs--target "Read" :file_path args))
                  ;; TARGET is expanded: compared as `get-file-buffer'
                  ;; would, without its TRAMP name handling.
                  (buffer (and (stringp target)
                               (cl-loop for buffer in (buffer-list)
                                        when (equal (buffer-file-name buffer) target)
                                        return buffer)))
                  (media (and (stringp target)
                              (string-match-p mevedel-tool-fs--local-media target))))
       (if (or (not (and (stringp target) (mevedel-remote-p target)))
               (and buffer (buffer-modified-p buffer) mevedel-tool-fs-read-unsaved-buffers))
           (mevedel-tool-fs--read-here callback args)
         (let* ((directory default-directory)
                ;; Inside the workspace by name: the host checks the
                ;; real name (`mevedel-tool-fs--read-permission').
                (root (mevedel-remote-inside-p target directory))
                (cancel nil)
                (drop nil)
                (settled nil)
                (settle (lambda (result)
                          (unless settled (setq settled t) (funcall callback result))))
                (fallback (lambda ()
                            (unless settled
                              (let ((default-directory directory))
                                (condition-case err
                                    (if (and root (not (mevedel-tool-fs--really-inside-p
                                                        target directory)))
                                        (funcall settle
                                                 (list :result (format "Read `%s': it leads outside \
the workspace; Read the name it leads to itself (asking permission for it)" display)
                                                       :status 'error))
                                      (setq cancel (mevedel-tool-fs--read-here settle args)))
                                  (error (funcall settle
                                                  (list :result (error-message-string err)
                                                        :status 'error)))))))))
           (cond
            (media
             (let ((page (mevedel-tool-fs--page args)))
               (setq drop
                     (mevedel-remote-read-media
                      target display root mevedel-tool-fs-remote-read-limit
                      (lambda (status value)
                        (if (eq status 'ok)
                            (setq cancel
                                  (mevedel-tool-fs--run
                                   (lambda (result)
                                     (delete-file value)
                                     (funcall settle result))
                                   (lambda (reply)
                                     (mevedel-core-resource-read value display page reply))))
                          (funcall settle (list :result (cadr value) :status 'error))))
                      fallback))))
            ;; PDF arguments on another file: TRAMP's way.
            ((or (mevedel-tool-fs--value args :pages) (mevedel-tool-fs--value args :mode))
             (funcall fallback))
            (t
             (mevedel-remote-read-page
              target display (mevedel-tool-fs--remote-page args root)
              (lambda (status value)
                (funcall settle (if (eq status 'ok)
                                    (mevedel-tool-fs--outcome value)
                                  (list :result (cadr value) :status 'error))))
              fallback)))
           (lambda ()
             (when drop (funcall drop))
             (when cancel (funcall cancel))
             (funcall settle (list :result "Cancelled." :status 'error)))))))))

(defun mevedel-tool-fs--read-here (callback args)
  "Read as `mevedel-tool-fs--read' with CALLBACK and ARGS, on this machine.
A remote file's page is fetched by byte ranges (or the file copied)
through TRAMP."
  (mevedel-tool-fs--guard
   callback
   (lambda ()
     (pcase-let* ((`(,target . ,display) (mevedel-tool-fs--target "Read" :file_path args))
                  (documents (mevedel-tool-fs--documents target "Read"))
                  (remote (and (stringp target) (mevedel-remote-p target)))
                  (page-text (and remote (mevedel-tool-fs--remote-text target args)))
                  (copy (and remote (not page-text)
                             (mevedel-tool-fs--remote-copy target display)))
                  (`(,buffer ,_ ,new) (and (not documents)
                                           (car (mevedel-tool-fs--unsaved target t))))
                  (page (mevedel-tool-fs--page args)))
       (cond
        ((mevedel-tool-fs--serve target "Read" page callback))
        (page-text
         (mevedel-tool-fs--run
          (mevedel-tool-fs--whole-count callback page-text)
          (lambda (reply)
            (mevedel-core-resource-read-text (substring-no-properties page-text) display
                                             page reply))))
        ((and documents (get-text-property 0 'mevedel-history-status (cdar documents)))
         ;; A status (NOT READY) is whole: no page of it may hide it.
         (funcall callback (list :result (substring-no-properties (cdar documents))))
         #'ignore)
        (documents
           (mevedel-tool-fs--run
            callback (lambda (reply)
                       (mevedel-core-resource-read-text (cdar documents) (caar documents)
                                                        page reply))))
        (t
         (mevedel-tool-fs--run
        (if copy
            (lambda (result)
              (delete-file copy)
              (funcall callback result))
          callback)
        (lambda (reply)
          (mevedel-core-resource-read
           (or copy target) display page reply
           (and buffer (cons (mevedel-tool-fs--buffer-text buffer) new)))))))))))

(defun mevedel-tool-fs-send-image (file display crop callback)
  "Send the image FILE, named DISPLAY, as Read sends an image.
CROP, when non-nil, is the part (X Y WIDTH HEIGHT) to send.  CALLBACK
gets the tool result, as the pipeline takes it.  Return a function
that cancels the call.  EmacsScreenshot sends its pictures this way."
  (mevedel-tool-fs--run
   (lambda (result) (funcall callback (mevedel-tool-fs--envelope result)))
   (lambda (reply)
     (mevedel-core-resource-read
      file display
      (list :accepts (mevedel-tool-fs-accepted-images
                      (plist-get (mevedel-pipeline-current-context) :data-buffer))
            :max-side mevedel-tool-fs-image-max-side :crop crop)
      reply))))

(defun mevedel-tool-fs--search (tool search query unsaved callback args)
  "Run the module's SEARCH for TOOL below the :path in ARGS; call CALLBACK.
Glob and Grep differ only in SEARCH, in QUERY, a function of ARGS
returning what SEARCH takes after the target and its display form, and
in UNSAVED, a function of the modified buffers under the target (see
`mevedel-tool-fs--unsaved') returning what SEARCH takes last.  Return
a function that cancels the search."
  (mevedel-tool-fs--when-free
   callback args :path
   (lambda () (mevedel-tool-fs--search-now tool search query unsaved callback args))))

(defun mevedel-tool-fs--search-now (tool search query unsaved callback args)
  "Search now, TRAMP being free: see `mevedel-tool-fs--search'.
TOOL, SEARCH, QUERY, UNSAVED, CALLBACK and ARGS are as there."
  (mevedel-tool-fs--guard
   callback
   (lambda ()
     (pcase-let ((`(,target . ,display) (mevedel-tool-fs--target tool :path args)))
       (cond
        ((and (stringp target) (mevedel-remote-p target))
         (mevedel-remote-search tool (mevedel-tool-fs--value args :path)
                                (if (equal (file-remote-p target) (file-remote-p default-directory))
                                    default-directory
                                  ;; Another host's absolute path: run there.
                                  (file-name-directory
                                   (directory-file-name (or (mevedel-tool-fs--value args :path)
                                                            target))))
                                display (funcall query args) (mevedel-tool-fs--timeout-ms)
                                callback))
        ((mevedel-tool-fs--saved-p target)
         (mevedel-tool-fs--search-saved tool (funcall query args) callback))
        ((and (equal tool "Grep") (mevedel-tool-fs--serve target tool (funcall query args)
                                                          callback)))
        (t
         (if-let* ((documents (mevedel-tool-fs--documents target tool)))
             (mevedel-tool-fs--run
              callback (lambda (reply)
                         (mevedel-tool-fs--search-documents tool documents (funcall query args)
                                                            reply)))
           (let ((buffers (funcall unsaved (mevedel-tool-fs--unsaved target nil))))
             (mevedel-tool-fs--run
              callback
              (lambda (reply)
                (funcall search target display (funcall query args)
                         (mevedel-tool-fs--timeout-ms) reply buffers)))))))))))

(defun mevedel-tool-fs--saved-p (target)
  "Return non-nil when TARGET is the prepared address history://saved.
Searching it reads every saved session: `mevedel-tool-fs--search-saved'."
  (and (not (stringp target))
       (equal (plist-get (mevedel-core-resource-attempt-facts target) :canonical)
              "history://saved")))

(defun mevedel-tool-fs--search-saved (tool query callback)
  "Run TOOL's QUERY over the workspace's saved conversations; settle CALLBACK.
The sessions are read in steps (`mevedel-history-saved-documents'),
with only the workspace needed, not a live session; sessions that
could not be read are counted in a note after the result.  Return a
function that cancels the search."
  (let* ((workspace (plist-get (funcall mevedel-resource-session-function) :workspace))
         (settled nil)
         (settle (lambda (result) (unless settled (setq settled t) (funcall callback result))))
         (cancel-search nil)
         (cancel-reading
          (mevedel-history-saved-documents
           workspace tool
           (mevedel-pipeline-continuation
            (lambda (documents unreadable)
              (setq cancel-search
                    (mevedel-tool-fs--run
                     (lambda (result)
                       (funcall settle
                                (if (> unreadable 0)
                                    (plist-put (copy-sequence result) :result
                                               (format "%s\n\n(%d saved session%s could not be read \
and %s not searched.)"
                                                       (plist-get result :result) unreadable
                                                       (if (= unreadable 1) "" "s")
                                                       (if (= unreadable 1) "was" "were")))
                                  result)))
                     (lambda (reply)
                       (mevedel-tool-fs--search-documents tool documents query reply)))))))))
    (lambda ()
      (funcall cancel-reading)
      (if cancel-search (funcall cancel-search)
        (funcall settle (list :result "Cancelled." :status 'error))))))

(defun mevedel-tool-fs--search-documents (tool documents query reply)
  "Run TOOL's QUERY over conversation DOCUMENTS; REPLY gets the outcome.
Grep searches their text; Glob lists the addresses whose last part
matches the pattern.  Return the request id, or nil when done here."
  (if (equal tool "Grep")
      (mevedel-core-search-grep-texts documents query (mevedel-tool-fs--timeout-ms) reply)
    (let* ((regexp (wildcard-to-regexp (file-name-nondirectory query)))
           (names (cl-loop for (address . _) in documents
                           when (string-match-p regexp (file-name-nondirectory address))
                           collect address)))
      (funcall reply 'ok (list :text (if names (string-join names "\n") "No files found")))
      nil)))

(defun mevedel-tool-fs--glob-pattern (args)
  "Return the module's Glob pattern for tool ARGS."
  (or (mevedel-tool-fs--value args :pattern) ""))

(defun mevedel-tool-fs-glob (callback args)
  "List the files matching :pattern below :path in ARGS; call CALLBACK.
Return a function that cancels the search."
  (mevedel-tool-fs--search "Glob" #'mevedel-core-search-glob #'mevedel-tool-fs--glob-pattern
                           #'mevedel-tool-fs--glob-unsaved callback args))

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
Conversations (history://) are searched as their Read projection.
Return a function that cancels the search."
  (mevedel-tool-fs--search "Grep" #'mevedel-core-search-grep #'mevedel-tool-fs--grep-options
                           #'mevedel-tool-fs--grep-unsaved callback args))

;;;; Renderers

(defun mevedel-tool-fs--unsaved-mark (result read)
  "Return the mark a row's header gets for RESULT, or nil.
RESULT is a result text: of Read when READ is non-nil (its first line
says whether it is a buffer's text), else of Glob or Grep (a line names
a file with the mark of unsaved buffer text)."
  (when (stringp result)
    (if read
        (cl-loop for mark in '("unsaved changes in Emacs" "unsaved new buffer in Emacs")
                 when (string-prefix-p (concat "(" mark ":") result)
                 return (format " (%s)" mark))
      (and (string-match-p " (unsaved \\(?:changes\\|new buffer\\) in Emacs)$" result)
           " (unsaved buffers in Emacs)"))))

(defun mevedel-tool-fs--media-header (result render-data)
  "Return the part of a Read row's header for an image or PDF, or nil.
RESULT's first line says what was read and sent; RENDER-DATA's :media
lists the pictures.  A graphical Emacs shows their thumbnails; a
terminal one says in words what was sent."
  (when (stringp result)
    (let* ((media (plist-get render-data :media))
           (words
            (cond
             ((string-match "\\`Image `[^`\n]*`: \\([^;\n]+?\\)\\(?:;\\|\\. \\)" result)
              (concat " · " (match-string 1 result)))
             ((string-match "\\`PDF `[^`\n]*`: \\([0-9]+\\) pages?, \\([^\n]+?\\)\\. Showing \\(pages? [-0-9, ]+\\)"
                            result)
              (format " (%s of %s) · %s" (match-string 3 result) (match-string 1 result)
                      (match-string 2 result)))))
           (sent (mapconcat (lambda (m)
                              (format "%s %d×%d (%s)"
                                      (upcase (string-remove-prefix "image/" (plist-get m :mime)))
                                      (plist-get m :width) (plist-get m :height)
                                      (file-size-human-readable (plist-get m :bytes))))
                            media ", ")))
      (when (or words media)
        (concat words
                (when media
                  (if (display-images-p)
                      (concat " " (mapconcat #'mevedel-tool-fs--thumbnail media " "))
                    (concat " · sent " sent))))))))

(defvar mevedel-tool-fs--thumbnails (make-hash-table :test #'equal :weakness 'value)
  "Thumbnail images by their base64 text, so redrawing a row reuses them.")

(defun mevedel-tool-fs--thumbnail (media)
  "Return a string displaying the thumbnail of the picture MEDIA describes."
  (let* ((b64 (plist-get media :thumbnail))
         (image (and (stringp b64) (not (string-empty-p b64))
                     (or (gethash b64 mevedel-tool-fs--thumbnails)
                         (puthash b64 (create-image (base64-decode-string b64) 'png t
                                                    :ascent 'center)
                                  mevedel-tool-fs--thumbnails)))))
    (if image
        (propertize "[image]" 'display image)
      "[image]")))

(defun mevedel-tool-fs--max-width ()
  "Return the pixel width a full-size image in a row may take.
That is the body width of the window showing the current buffer (the
selected one when none does), less the row's indentation."
  (let ((window (or (get-buffer-window (current-buffer) t) (selected-window))))
    (max 64 (- (window-body-width window t) (* 6 (frame-char-width (window-frame window)))))))

(defun mevedel-tool-fs--full-size (payload)
  "Return a string displaying PAYLOAD, (MIME . BASE64), at most a window wide."
  (propertize "[image]" 'display
              (create-image (base64-decode-string (cdr payload)) nil t
                            :max-width (mevedel-tool-fs--max-width))))

(defun mevedel-tool-fs--media-body (args result render-data)
  "Return the expanded body of a media row: its pictures full size, then RESULT.
The pictures are the images the call sent, as RESULT's media references
restore them (see mevedel-tool-media.el), each scaled down to the
window's width; an image Read from a local file whose sent copy is gone
shows the file (ARGS's :file_path), anything else its thumbnail
\(RENDER-DATA).  A terminal Emacs shows RESULT alone."
  (let ((media (plist-get render-data :media))
        (file (plist-get args :file_path))
        (refs (and (stringp result) (not (string-empty-p result))
                   (get-text-property 0 'mevedel-tool-media result))))
    (if (not (and media (display-images-p)))
        result
      (let ((payloads (and refs (mevedel-tool-media-payloads refs mevedel-session-current))))
        ;; Pictures first: a long text is cut to the body's limit.
        (concat (cond
                 (payloads (mapconcat #'mevedel-tool-fs--full-size payloads "\n"))
                 ((and (stringp file) (string-prefix-p "Image " result)
                       (not (file-remote-p file)) (file-readable-p file))
                  (propertize "[image]" 'display
                              (create-image (expand-file-name file) nil nil
                                            :max-width (mevedel-tool-fs--max-width))))
                 (t (mapconcat #'mevedel-tool-fs--thumbnail media "\n")))
                "\n" result)))))

(defun mevedel-tool-fs-render-media (header args result render-data)
  "Return the row of a call that sent RESULT's pictures, headed HEADER.
ARGS and RENDER-DATA are the call's (see `mevedel-tool-fs-render-read')."
  (list :header (concat header (mevedel-tool-fs--media-header result render-data))
        :body (unless mevedel-tool-render-summary-only
                (mevedel-tool-fs--media-body args result render-data))
        :expandable-p (and result (not (string-empty-p result)))
        :initially-collapsed-p t))

(defun mevedel-tool-fs-render-read (_name args result render-data)
  "Render a Read call with ARGS, RESULT and RENDER-DATA."
  (let* ((path (mevedel-tool-render-arg args :file_path :path))
         (offset (plist-get args :offset))
         (limit (plist-get args :limit))
         (range (cond ((and offset limit) (format " (lines %s–%s)" offset (+ offset limit -1)))
                      (offset (format " (from line %s)" offset))
                      (limit (format " (first %s lines)" limit)))))
    (mevedel-tool-fs-render-media
     (concat "Read " (mevedel-tool-render-display-path (or path "?")) range
             (mevedel-tool-fs--unsaved-mark result t))
     args result render-data)))

(defun mevedel-tool-fs-render-grep (_name args result _render-data)
  "Render a Grep call with ARGS and RESULT, fontifying it like `grep-mode'."
  (let* ((pattern (plist-get args :pattern))
         (path (mevedel-tool-render-arg args :path :glob))
         (lines (and result (mevedel-tool-render-count-lines result))))
    (list :header (concat (format "Grep %S" (mevedel-tool-render-shorten (or pattern "") 48))
                          (and path (concat " in " (mevedel-tool-render-display-path path)))
                          (and lines (format " (%d line%s)" lines (if (= lines 1) "" "s")))
                          (mevedel-tool-fs--unsaved-mark result nil))
          :body (unless mevedel-tool-render-summary-only result)
          :body-mode 'grep-mode
          :expandable-p (and result (not (string-empty-p result)))
          :initially-collapsed-p t)))

(defun mevedel-tool-fs-render-glob (_name args result _render-data)
  "Render a Glob call with ARGS and RESULT."
  (let ((lines (and result (mevedel-tool-render-count-lines result))))
    (list :header (concat "Glob " (or (plist-get args :pattern) "?")
                          (when-let* ((path (plist-get args :path)))
                            (concat " in " (mevedel-tool-render-display-path path)))
                          (and lines (format " (%d)" lines))
                          (mevedel-tool-fs--unsaved-mark result nil))
          :body (unless mevedel-tool-render-summary-only result)
          :expandable-p (and result (not (string-empty-p result)))
          :initially-collapsed-p t)))

;;;; Descriptions

(defconst mevedel-tool-fs-read-description
  "Read a text file, a directory listing, or a resource address, with numbered lines.

When to use: you know the file or resource you need (a source file,
work://notes.md, artifact://tool-results/..., mevedel://tools/files.md).

When NOT to use: to find files by name (Glob) or text inside files (Grep).

How to use: file_path is a path or a scheme:// address.  Pages show
`limit' lines (default 2000) from line `offset' (from 1); lines over
2000 characters are cut with an exact char_offset continuation.  An
offset past the last line is an error naming the lines that exist and
a working last-page call.  Directories and bare addresses (work://,
artifact://, mevedel://, skill://, memory://root) list their entries.
Images (PNG, JPEG, GIF, WebP) are sent as images when the model
takes them, scaled to 1568 px at most, with their original size in
the text; animations send their first frame.  A PDF gives its page
count and the text of `pages' (default the first 10), each headed
\"--- page N of M ---\"; pages without text (scans), or all of them
with mode \"image\", are sent as images.  A file open in Emacs with unsaved
changes is read as the buffer's current text, headed \"(unsaved changes
in Emacs: ...)\" (or \"(unsaved new buffer in Emacs: ...)\" when not on
disk yet); ApplyPatch refuses such a file until the user saves it.
Manual: Read mevedel://tools/files.md."
  "Model-facing description of Read.")

(defconst mevedel-tool-fs-glob-description
  "List files whose path matches a glob pattern, in no promised order.

When to use: find files by name or location, e.g. \"**/*.el\" or \"src/**/*.rs\".

When NOT to use: to search file contents (Grep).

How to use: pattern is relative to path (default: the working directory;
a resource address works too).  A pattern without / matches file names at
any depth; one with / is anchored at path.  Hidden files are listed,
ignore files do not apply, VCS directories and symbolic links are
skipped; absolute patterns and .. are refused.  Files that exist only as
unsaved Emacs buffers are listed too, marked \" (unsaved new buffer in
Emacs)\".  Do not rely on the order of the list; sort it yourself if
order matters.  A search running past the time limit returns labelled
partial results.  Manual: Read mevedel://tools/files.md."
  "Model-facing description of Glob.")

(defconst mevedel-tool-fs-grep-description
  "Search file contents with a regular expression (ripgrep syntax).

When to use: find where something is defined or used, which files mention
it, or how often it occurs.

When NOT to use: to list files by name (Glob) or to read a known file (Read).

How to use: pattern is required.  output_mode is files_with_matches
(default), content (path:line:text) or count.  Narrow with path (a file,
directory or resource address), glob (\"*.el\") or type (\"rust\").  In
content mode: -A/-B/-C context, -n line numbers (default on), -i ignores
case, multiline lets patterns span lines.  head_limit (default 250, 0 for
all) and offset page the output lines; an offset past the last line is
an error, not \"no matches\".  Hidden files are searched, .gitignore is
respected while walking, VCS directories are skipped.  A file open in
Emacs with unsaved changes is searched as the buffer's current text, with
the buffer's line numbers, and named \"PATH (unsaved changes in Emacs)\"
once (\"(unsaved new buffer in Emacs)\": not on disk yet); ApplyPatch
refuses such a file until the user saves it.  Past the time limit you
get labelled partial results: narrow path, glob or type.  Manual: Read
mevedel://tools/files.md."
  "Model-facing description of Grep.")

;;;; Declarations

(defun mevedel-tool-fs--text (result)
  "Return RESULT, a handler's result plist, as the pipeline takes it."
  (let ((text (plist-get result :result)))
    (if (eq (plist-get result :status) 'error)
        (concat "Error: " text)
      text)))

(defun mevedel-tool-fs--envelope (result)
  "Return RESULT, a handler's result plist, as the pipeline takes it.
A result with media stays an envelope, so the pipeline sends them."
  (if (plist-get result :media)
      (list :result (plist-get result :result)
            :media (plist-get result :media)
            :render-data (plist-get result :render-data))
    (mevedel-tool-fs--text result)))

(defun mevedel-tool-fs--adapt (handler)
  "Return an asynchronous tool function running HANDLER."
  (lambda (callback args)
    (funcall handler
             (lambda (result) (funcall callback (mevedel-tool-fs--envelope result)))
             args)))

(mevedel-define-tool "Read"
  :native t
  :category "filesystem"
  :description mevedel-tool-fs-read-description
  :args ((file_path path-or-resource :required
                    "File, directory or resource address (scheme://...) to read."
                    :access read)
         (offset integer :optional "First line to show, from 1 (default 1).")
         (limit integer :optional "How many lines to show (default 2000).")
         (char_offset integer :optional
                      "Characters to skip in line OFFSET; shows only that line (for very long lines).")
         (pages string :optional
                "PDF pages to read, e.g. \"3-5\" or \"1,4,9-\" (default: the first 10).")
         (mode string :optional
               "PDF only: \"image\" sends the pages as images (at most 10) instead of their text."
               :enum ("text" "image")))
  :function (mevedel-tool-fs--adapt #'mevedel-tool-fs-read)
  :async-p t
  :read-only-p t
  :ahead #'mevedel-tool-fs--read-ahead
  :check-permission #'mevedel-tool-fs--read-permission
  :renderer #'mevedel-tool-fs-render-read
  :get-path (lambda (args) (plist-get args :file_path)))

(mevedel-define-tool "Glob"
  :native t
  :category "filesystem"
  :description mevedel-tool-fs-glob-description
  :args ((pattern string :required "Glob pattern, relative to path (e.g. \"**/*.el\").")
         (path path-or-resource :optional
               "Directory or resource address to search (default: the working directory)."
               :access glob))
  :max-result-size 30000
  :function (mevedel-tool-fs--adapt #'mevedel-tool-fs-glob)
  :async-p t
  :read-only-p t
  :renderer '((success . mevedel-tool-fs-render-glob))
  :get-path (lambda (args) (plist-get args :path)))

(mevedel-define-tool "Grep"
  :native t
  :category "filesystem"
  :description mevedel-tool-fs-grep-description
  :args ((pattern string :required "Regular expression to search for.")
         (path path-or-resource :optional
               "File, directory or resource address to search (default: the working directory)."
               :access grep)
         (glob string :optional "Only search files matching this glob (e.g. \"*.el\").")
         (type string :optional "Only search files of this ripgrep type (e.g. \"rust\").")
         (output_mode string :optional "What to show (default files_with_matches)."
                      :enum ("content" "files_with_matches" "count"))
         (-A integer :optional "Lines of context after each match (content mode).")
         (-B integer :optional "Lines of context before each match (content mode).")
         (-C integer :optional "Lines of context around each match (content mode).")
         (context integer :optional "Same as -C.")
         (-i boolean :optional "Ignore case.")
         (-n boolean :optional "Show line numbers in content mode (default true).")
         (multiline boolean :optional "Let . match newlines and patterns span lines.")
         (head_limit integer :optional "Show at most this many output lines (default 250; 0: all).")
         (offset integer :optional "Skip this many output lines first (default 0)."))
  :max-result-size 20000
  :function (mevedel-tool-fs--adapt #'mevedel-tool-fs-grep)
  :async-p t
  :read-only-p t
  :renderer '((success . mevedel-tool-fs-render-grep))
  :get-path (lambda (args) (plist-get args :path)))

(provide 'mevedel-tool-fs)
;;; mevedel-tool-fs.el ends here
