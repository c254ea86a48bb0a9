;;; mevedel-render-data.el --- The render-data side channel of tool results  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A tool result may carry display metadata for the view: a keyword
;; plist appended to the result text as a hidden block
;;
;;   \n<!-- mevedel-render-data -->\n(:tool-use-id "ID" ...)\n<!-- /mevedel-render-data -->\n
;;
;; propertized `gptel' `mevedel-render-data' and `invisible' t.  The
;; native codec (crates/mevedel-core/src/codec/) does the work: it finds blocks by their
;; opening delimiters, reads exactly one printed object with a reader
;; that evaluates nothing, and accepts only a proper keyword plist
;; followed by whitespace and the closing delimiter.  Anything else is
;; ordinary text and stays as it is.
;;
;; A block bound to a tool-use ID counts only for that ID.  An unbound
;; block (a non-tool record) counts only where this file vouches for
;; its provenance: the whole block carries the `gptel' property
;; `mevedel-render-data', which only `mevedel-render-data-encode' (and
;; a transcript persisted from it) puts there.  Delimiter-shaped text
;; typed by a user or returned by a tool therefore stays visible.
;;
;; OBJECT arguments are a string or a buffer (its accessible portion,
;; read by the module in chunks rather than copied as one string).

;;; Code:

(require 'cl-lib)
(require 'mevedel-core)

(defconst mevedel-render-data-transform-limit 8192
  "Largest printed render-data (characters) a render transform may return.")

;;;; Plists and printing

(defun mevedel-render-data-plist-p (object)
  "Return non-nil when OBJECT is a proper, even keyword plist (nil included)."
  (and (proper-list-p object)
       (cl-evenp (length object))
       (cl-loop for key in object by #'cddr always (keywordp key))))

(defun mevedel-render-data-print (plist)
  "Return PLIST printed as readable data on one line.
Signals an error for unprintable or circular values."
  (let ((print-length nil) (print-level nil) (print-circle nil)
        (print-escape-newlines t) (print-escape-control-characters t)
        (print-escape-nonascii nil) (print-escape-multibyte nil)
        (print-quoted t) (print-gensym nil) (float-output-format nil)
        (print-integers-as-characters nil))
    (prin1-to-string plist)))

;;;; Encoding

(defun mevedel-render-data-encode (plist &optional tool-use-id)
  "Return the hidden render-data block for PLIST, bound to TOOL-USE-ID.
Without TOOL-USE-ID the block is an unbound record.  The block carries
the provenance properties.  Signals `mevedel-core-schema-error' when
PLIST is not a keyword plist of readable data."
  (let ((block (mevedel-core-render-data-encode (mevedel-render-data-print plist)
                                                tool-use-id)))
    (propertize block 'gptel 'mevedel-render-data 'invisible t)))

;;;; Text and provenance

(defmacro mevedel-render-data--with-text (object var &rest body)
  "Run BODY with VAR bound to OBJECT's text argument for the codec.
A string is passed as it is; for a buffer, BODY runs in it with VAR nil,
which makes the codec read its accessible portion (positions are then
buffer positions)."
  (declare (indent 2))
  `(if (bufferp ,object)
       (with-current-buffer ,object (let ((,var nil)) ,@body))
     (let ((,var ,object)) ,@body)))

(defun mevedel-render-data--spans (string start limit)
  "Return the spans from START to LIMIT of STRING (nil: current buffer).
They are the runs whose `gptel' property is `mevedel-render-data'."
  (let ((pos start) (spans nil))
    (while (< pos limit)
      (let ((next (next-single-property-change pos 'gptel string limit)))
        (when (eq (get-text-property pos 'gptel string) 'mevedel-render-data)
          (push (cons pos next) spans))
        (setq pos next)))
    (nreverse spans)))

(defun mevedel-render-data-vouched-spans (object)
  "Return the (START . END) spans of OBJECT with render-data provenance.
Those are the maximal runs whose `gptel' property is
`mevedel-render-data'; positions are string indices or buffer positions."
  (if (bufferp object)
      (with-current-buffer object
        (mevedel-render-data--spans nil (point-min) (point-max)))
    (mevedel-render-data--spans object 0 (length object))))

;;;; Reading

(defun mevedel-render-data-extract (object tool-use-id)
  "Return the render-data plist of TOOL-USE-ID's block in OBJECT, or nil.
Only a block bound to TOOL-USE-ID counts; the last one wins."
  (mevedel-render-data--with-text object text
    (nth 2 (mevedel-core-render-data-extract text tool-use-id nil))))

(defun mevedel-render-data-extract-unbound (object)
  "Return the plist of OBJECT's last unbound block with provenance, or nil."
  (let ((vouched (mevedel-render-data-vouched-spans object)))
    (mevedel-render-data--with-text object text
      (nth 2 (mevedel-core-render-data-extract text nil vouched)))))

(defun mevedel-render-data-blocks (object)
  "Return OBJECT's well-formed blocks as plists (:start :end :owner).
Positions are string indices or buffer positions; :owner is the bound
tool-use ID, nil when unbound, or `invalid'.  Authorisation is the
caller's business (see `mevedel-render-data-extract')."
  (let ((flat (mevedel-render-data--with-text object text
                (mevedel-core-render-data-scan text))))
    (cl-loop for i from 0 below (length flat) by 3
             collect (list :start (aref flat i) :end (aref flat (1+ i))
                           :owner (aref flat (+ i 2))))))

;;;; Stripping and replacing

(defun mevedel-render-data-strip (string &optional tool-use-id)
  "Return STRING without the blocks a provider message must not carry.
Those are the blocks bound to TOOL-USE-ID and unbound blocks with
provenance.  Everything else, text properties included, is kept."
  (let ((spans (mevedel-core-render-data-spans
                string tool-use-id (mevedel-render-data-vouched-spans string))))
    (if (null spans)
        string
      (let ((pieces nil) (pos 0))
        (dolist (span spans)
          (push (substring string pos (car span)) pieces)
          (setq pos (cdr span)))
        (push (substring string pos) pieces)
        (apply #'concat (nreverse pieces))))))

(defun mevedel-render-data-strip-buffer (buffer &optional tool-use-id)
  "Delete from BUFFER the blocks bound to TOOL-USE-ID and provenanced ones.
These are the blocks `mevedel-render-data-strip' would remove.  Return
how many were deleted."
  (let ((vouched (mevedel-render-data-vouched-spans buffer)))
    (with-current-buffer buffer
      (let ((spans (mevedel-core-render-data-spans nil tool-use-id vouched)))
        (dolist (span (reverse spans))
          (delete-region (car span) (cdr span)))
        (length spans)))))

(defun mevedel-render-data-replace (object tool-use-id plist)
  "Replace the payload of TOOL-USE-ID's block in OBJECT with PLIST.
For a string, return the new string (nil when it has no such block).
For a buffer, replace in place and return non-nil when a block was
replaced.  The new block keeps its binding and provenance."
  (when-let* ((found (mevedel-render-data--with-text object text
                       (mevedel-core-render-data-extract text tool-use-id nil))))
    (let* ((start (nth 0 found)) (end (nth 1 found))
           (char-at (lambda (pos) (if (bufferp object)
                                      (with-current-buffer object (char-after pos))
                                    (aref object pos))))
           (new (mevedel-render-data-encode plist tool-use-id)))
      ;; A block at the very start or end may lack its outer newlines.
      (unless (eq (funcall char-at start) ?\n)
        (setq new (substring new 1)))
      (unless (eq (funcall char-at (1- end)) ?\n)
        (setq new (substring new 0 -1)))
      (if (bufferp object)
          (with-current-buffer object
            (save-excursion
              (goto-char start)
              (delete-region start end)
              (insert new))
            t)
        (concat (substring object 0 start) new (substring object end))))))

(provide 'mevedel-render-data)
;;; mevedel-render-data.el ends here
