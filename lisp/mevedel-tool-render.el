;;; mevedel-tool-render.el --- Tool row renderers  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A tool row in the session view is one header line and a collapsible
;; body.  A renderer turns one completed call into the row's parts:
;;
;;   (RENDERER NAME ARGS RESULT RENDER-DATA) => PLIST
;;
;; NAME is the tool name, ARGS the final argument plist, RESULT the
;; result text the model saw (render-data blocks removed) and
;; RENDER-DATA the call's render-data plist or nil.  PLIST may carry
;; :header (a string, required), :body, :preview-body (strings),
;; :body-mode (a major mode used to fontify the body), :status
;; (`success', `error', `warning', `denied', `cancelled' or `running'),
;; :expandable-p, :hidden-p, :coalesce-key, :child-calls,
;; :initially-collapsed-p and :breadcrumb (one line shown below the row
;; whether it is expanded or not, e.g. how a background command ended;
;; it leads back to the row).  A renderer may be a function or a dispatch
;; alist ((success . FN) (error . FN) (default . FN)) keyed by the
;; call's status.  It comes from the tool's :renderer declaration (the
;; renderer lives in the tool's own file); a tool without one, or a
;; call of an unknown tool, gets `mevedel-tool-render-generic'.
;; While a collapsed row is drawn,
;; `mevedel-tool-render-summary-only' is non-nil: a renderer may then
;; skip building its body.
;;
;; A renderer that signals, or returns a plist that fails validation,
;; produces a warning and the generic renderer draws the row instead.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-tool-registry)

(defgroup mevedel-tool-render nil
  "How tool calls are drawn in the session view."
  :group 'mevedel
  :prefix "mevedel-tool-render-")

(defcustom mevedel-tool-render-preview-lines 6
  "Lines of a row's body shown when the renderer gives no preview."
  :type 'natnum)

(defcustom mevedel-tool-render-body-max-chars 60000
  "Longest body a row displays; longer bodies are cut with a note."
  :type 'natnum)

(defvar mevedel-tool-render-summary-only nil
  "Non-nil while a collapsed row is rendered.
Renderers may then return only the header and status.")

(defconst mevedel-tool-render--keys
  '(:header :body :preview-body :body-mode :status :expandable-p :hidden-p
            :coalesce-key :child-calls :initially-collapsed-p :breadcrumb)
  "Keys a renderer's plist may carry.")

(defconst mevedel-tool-render-statuses '(success error warning denied cancelled running)
  "Statuses a tool row can have.")

;;;; Lookup

(defun mevedel-tool-render--lookup (name status)
  "Return the renderer function for tool NAME with call STATUS.
The registered tool's :renderer decides; without one, or without a
matching entry in its dispatch alist, the generic renderer draws."
  (let ((renderer (when-let* ((tool (mevedel-tool-get name)))
                    (mevedel-tool-renderer tool))))
    (cond ((null renderer) #'mevedel-tool-render-generic)
          ((functionp renderer) renderer)
          (t (or (alist-get (pcase status
                              ((or 'success 'warning) 'success)
                              ((or 'error 'denied 'cancelled) 'error))
                            renderer)
                 (alist-get 'default renderer)
                 #'mevedel-tool-render-generic)))))

;;;; Status

(defun mevedel-tool-render-status (result render-data)
  "Return the status of a call with RESULT text and RENDER-DATA plist.
An explicit :status in RENDER-DATA wins; otherwise a result starting
with \"Error\" or a tool-call error tag is an error, a permission
refusal is `denied', a call an abort or a stopped Emacs cut short
`cancelled', anything else `success'.  :warnings in
RENDER-DATA turn success into `warning'."
  (let ((explicit (plist-get render-data :status)))
    (cond ((and (eq explicit 'success) (plist-get render-data :warnings)) 'warning)
          ((memq explicit mevedel-tool-render-statuses) explicit)
          ((null result) 'running)
          ((string-match-p "\\`[ \t\n]*Permission denied" result) 'denied)
          ((string-match-p "\\`[ \t\n]*Cancelled\\b" result) 'cancelled)
          ((string-match-p "\\`[ \t\n]*\\(?:Error\\b\\|<tool_call_error>\\)" result) 'error)
          ((plist-get render-data :warnings) 'warning)
          (t 'success))))

;;;; Rendering with validation and fallback

(defun mevedel-tool-render-validate (plist)
  "Signal an error unless PLIST is a valid renderer result; return it."
  (unless (and (listp plist) (cl-evenp (length plist)))
    (error "Renderer result is not a plist: %S" plist))
  (cl-loop for (key value) on plist by #'cddr
           unless (memq key mevedel-tool-render--keys)
           do (error "Unknown renderer key %S" key)
           do (pcase key
                (:header (unless (and (stringp value) (not (string-empty-p value)))
                           (error "Renderer :header must be a non-empty string: %S" value)))
                ((or :body :preview-body)
                 (unless (or (null value) (stringp value))
                   (error "Renderer %S must be a string or nil: %S" key value)))
                (:breadcrumb
                 (unless (or (null value) (and (stringp value) (not (string-match-p "\n" value))))
                   (error "Renderer :breadcrumb must be one line of text or nil: %S" value)))
                (:body-mode (unless (or (null value) (functionp value))
                              (error "Renderer :body-mode must be a mode function: %S" value)))
                (:status (unless (memq value mevedel-tool-render-statuses)
                           (error "Renderer :status must be one of %S: %S"
                                  mevedel-tool-render-statuses value)))
                (:child-calls (unless (listp value)
                                (error "Renderer :child-calls must be a list: %S" value)))))
  (unless (plist-get plist :header)
    (error "Renderer result has no :header"))
  plist)

(defun mevedel-tool-render-row (name args result render-data &optional collapsed)
  "Return the validated row plist for a call of tool NAME.
ARGS, RESULT and RENDER-DATA are the call's arguments, result text
and render-data.  RESULT nil means the call is still running.
COLLAPSED non-nil binds `mevedel-tool-render-summary-only'.  The
returned plist always has :header and :status; a failing renderer
is reported with `display-warning' and replaced by the generic one."
  (let* ((status (mevedel-tool-render-status result render-data))
         (renderer (mevedel-tool-render--lookup name status))
         (mevedel-tool-render-summary-only collapsed)
         (row (condition-case err
                  (mevedel-tool-render-validate
                   (funcall renderer name args result render-data))
                (error
                 (display-warning
                  'mevedel
                  (format "Renderer for %s failed, using the generic one: %s"
                          name (error-message-string err)))
                 (mevedel-tool-render-generic name args result render-data)))))
    (setq row (plist-put (copy-sequence row) :status
                         (mevedel-tool-render--final-status
                          status (plist-get render-data :status) (plist-get row :status))))
    (when (null result)
      (setq row (plist-put row :status 'running)))
    row))

(defun mevedel-tool-render--final-status (status explicit visual)
  "Return a row's status from the call's STATUS and the renderer's VISUAL one.
EXPLICIT is the pipeline's own :status in the call's render-data.  A
failed call (error or denied) stays so whatever the renderer says; an
explicit success overrides a renderer's inferred error but keeps its
warnings and lifecycle states.  Otherwise the renderer's status, when
it gives one, wins."
  (cond ((memq status '(error denied)) status)
        ((null visual) status)
        ((and (eq explicit 'success) (eq visual 'error)) 'success)
        (t visual)))

;;;; Helpers for renderers

(defun mevedel-tool-render-arg (args &rest keys)
  "Return the first non-empty value in ARGS under one of KEYS."
  (cl-loop for key in keys
           for value = (plist-get args key)
           when (and value (not (equal value "")))
           return value))

(defun mevedel-tool-render-shorten (text &optional width)
  "Return TEXT on one line, at most WIDTH (default 72) characters."
  (let ((line (replace-regexp-in-string "[\n\t ]+" " " (format "%s" text))))
    (truncate-string-to-width (string-trim line) (or width 72) nil nil "…")))

(defun mevedel-tool-render-first-line (text)
  "Return the first non-blank line of TEXT.
Only the text up to that line is looked at."
  (let ((text (or text "")))
    (if (string-match "^[ \t\r]*[^ \t\r\n].*$" text)
        (match-string 0 text)
      "")))

(defun mevedel-tool-render-count-lines (text)
  "Return the number of non-empty lines in TEXT, without splitting it."
  (let ((text (or text "")) (count 0) (pos 0))
    (while (< pos (length text))
      (let ((end (or (string-search "\n" text pos) (length text))))
        (when (> end pos) (setq count (1+ count)))
        (setq pos (1+ end))))
    count))

(defun mevedel-tool-render-display-path (path)
  "Return PATH relative to `default-directory' when it lies inside it."
  (if (and (stringp path) (file-name-absolute-p path)
           (string-prefix-p (expand-file-name default-directory) (expand-file-name path)))
      (file-relative-name path default-directory)
    path))

(defun mevedel-tool-render-fontify (text mode)
  "Return TEXT fontified as MODE would, with `face' properties.
MODE's hooks do not run."
  (with-temp-buffer
    (insert text)
    (delay-mode-hooks (funcall mode))
    (let ((inhibit-message t))
      (font-lock-ensure))
    (let ((pos (point-min))
          (inhibit-read-only t))
      (while (< pos (point-max))
        (let ((next (next-single-property-change pos 'font-lock-face nil (point-max)))
              (face (get-text-property pos 'font-lock-face)))
          (when face (put-text-property pos next 'face face))
          (setq pos next))))
    (buffer-substring (point-min) (point-max))))

;;;; The generic renderer

(defun mevedel-tool-render-generic (name args result _render-data)
  "Render a call of tool NAME with ARGS and RESULT: the fallback renderer."
  (let ((key (mevedel-tool-render-arg args :file_path :path :file :pattern :command :url :query)))
    (list :header (if key
                      (format "%s %s" name (mevedel-tool-render-shorten
                                            (mevedel-tool-render-display-path key)))
                    name)
          :body result
          :expandable-p (and result (not (string-empty-p result)))
          :initially-collapsed-p t)))

(provide 'mevedel-tool-render)
;;; mevedel-tool-render.el ends here
