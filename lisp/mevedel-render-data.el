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
;; native codec (src/codec/) does the work: it finds blocks by their
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
;; OBJECT arguments are a string or a buffer (its accessible portion).

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

;;;; Text, offsets and provenance

(defun mevedel-render-data--text (object)
  "Return OBJECT's text without properties and its offset to positions.
OBJECT is a string (offset 0) or a buffer (offset `point-min')."
  (if (bufferp object)
      (with-current-buffer object
        (cons (buffer-substring-no-properties (point-min) (point-max)) (point-min)))
    (cons object 0)))

(defun mevedel-render-data--spans (string start limit)
  "Return 0-based spans from START to LIMIT of STRING (nil: current buffer).
They are the runs whose `gptel' property is `mevedel-render-data'."
  (let ((pos start) (spans nil))
    (while (< pos limit)
      (let ((next (next-single-property-change pos 'gptel string limit)))
        (when (eq (get-text-property pos 'gptel string) 'mevedel-render-data)
          (push (cons (- pos start) (- next start)) spans))
        (setq pos next)))
    (nreverse spans)))

(defun mevedel-render-data-vouched-spans (object)
  "Return the 0-based (START . END) spans of OBJECT with render-data provenance.
Those are the maximal runs whose `gptel' property is `mevedel-render-data'."
  (if (bufferp object)
      (with-current-buffer object
        (mevedel-render-data--spans nil (point-min) (point-max)))
    (mevedel-render-data--spans object 0 (length object))))

;;;; Reading

(defun mevedel-render-data-extract (object tool-use-id)
  "Return the render-data plist of TOOL-USE-ID's block in OBJECT, or nil.
Only a block bound to TOOL-USE-ID counts; the last one wins."
  (let ((found (mevedel-core-render-data-extract (car (mevedel-render-data--text object))
                                                 tool-use-id nil)))
    (nth 2 found)))

(defun mevedel-render-data-extract-unbound (object)
  "Return the plist of OBJECT's last unbound block with provenance, or nil."
  (let ((found (mevedel-core-render-data-extract (car (mevedel-render-data--text object))
                                                 nil
                                                 (mevedel-render-data-vouched-spans object))))
    (nth 2 found)))

(defun mevedel-render-data-blocks (object)
  "Return OBJECT's well-formed blocks as plists (:start :end :owner).
Positions are string indices or buffer positions; :owner is the bound
tool-use ID, nil when unbound, or `invalid'.  Authorisation is the
caller's business (see `mevedel-render-data-extract')."
  (pcase-let ((`(,text . ,offset) (mevedel-render-data--text object)))
    (mapcar (lambda (v) (list :start (+ offset (aref v 0)) :end (+ offset (aref v 1))
                              :owner (aref v 2)))
            (mevedel-core-render-data-scan text))))

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
  (with-current-buffer buffer
    (pcase-let* ((`(,text . ,offset) (mevedel-render-data--text buffer))
                 (spans (mevedel-core-render-data-spans
                         text tool-use-id (mevedel-render-data-vouched-spans buffer))))
      (dolist (span (reverse spans))
        (delete-region (+ offset (car span)) (+ offset (cdr span))))
      (length spans))))

(defun mevedel-render-data-replace (object tool-use-id plist)
  "Replace the payload of TOOL-USE-ID's block in OBJECT with PLIST.
For a string, return the new string (nil when it has no such block).
For a buffer, replace in place and return non-nil when a block was
replaced.  The new block keeps its binding and provenance."
  (pcase-let* ((`(,text . ,offset) (mevedel-render-data--text object))
               (found (mevedel-core-render-data-extract text tool-use-id nil)))
    (when found
      (let ((new (mevedel-render-data-encode plist tool-use-id))
            (start (nth 0 found)) (end (nth 1 found)))
        ;; A block at the very start or end may lack its outer newlines.
        (unless (eq (aref text start) ?\n)
          (setq new (substring new 1)))
        (unless (eq (aref text (1- end)) ?\n)
          (setq new (substring new 0 -1)))
        (if (bufferp object)
            (with-current-buffer object
              (save-excursion
                (goto-char (+ offset start))
                (delete-region (+ offset start) (+ offset end))
                (insert new))
              t)
          (concat (substring object 0 start) new (substring object end)))))))

(provide 'mevedel-render-data)
;;; mevedel-render-data.el ends here
