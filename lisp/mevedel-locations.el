;;; mevedel-locations.el --- Jumping from the view to the code it shows  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The `file:line' places in an expanded tool row's body (Grep and Bash
;; output, a Read's numbered lines, a Glob's file names) and the file
;; names in the assistant's text carry a `mevedel-location' property:
;; RET or a click visits the place in another window, and
;; `next-error' / `previous-error' step through the places of the row
;; at point, as in a *grep* buffer.  Places are found when a row is
;; drawn, from its text alone; whether a file exists is asked only when
;; it is visited, or, for the assistant's text, once per name.
;;
;; Resource addresses (work://notes.md, agent://root/helper, ...) in
;; both are buttons too, recognized by their spelling only: a click hands
;; the address to `mevedel-locations-address-functions' (the view
;; validates it and visits its file, the agents view opens an agent),
;; so nothing is resolved while drawing.

;;; Code:

(require 'cl-lib)
(require 'subr-x)

(defgroup mevedel-locations nil
  "Jumping from the session view to files and lines."
  :group 'mevedel
  :prefix "mevedel-locations-")

(defvar-keymap mevedel-locations-map
  :doc "Keys on a place in the view."
  "RET" #'mevedel-locations-visit
  "<mouse-1>" #'mevedel-locations-visit
  "<mouse-2>" #'mevedel-locations-visit)

(defconst mevedel-locations--grep-regexp
  "^ *\\([^:\n\t]+\\):\\([0-9]+\\)[:-]"
  "A `file:line:' (or grep context `file-line-') at a line's start.")

(defconst mevedel-locations--read-regexp "^ *\\([0-9]+\\)\t"
  "A Read result's numbered line.")

(defconst mevedel-locations--name-regexp
  "\\`[/~]?\\(?:[[:alnum:]_.~-]+/\\)*[[:alnum:]_.-]+\\.[[:alpha:]][[:alnum:]]\\{0,7\\}\\'"
  "A file name with an extension, alone.")

(defvar-keymap mevedel-locations-address-map
  :doc "Keys on a resource address in the view."
  "RET" #'mevedel-locations-visit-address
  "<mouse-1>" #'mevedel-locations-visit-address
  "<mouse-2>" #'mevedel-locations-visit-address)

(defvar mevedel-locations-address-functions nil
  "Functions of an address string that visit it, for a click on it.
The first to return non-nil has handled it; each validates the address
itself and signals `user-error' for one it cannot show.")

(defconst mevedel-locations--address-regexp
  (concat "\\_<\\(?:mevedel\\|work\\|artifact\\|skill\\|agent\\|history\\|memory\\|mcp\\|shared\\)"
          "://[^][ \t\n\"'`()<>{}]*")
  "A resource address of one of the known families, as typed.")

(defun mevedel-locations-mark-addresses (start end)
  "Make the resource addresses from START to END of the current buffer buttons.
Trailing sentence punctuation is not part of an address."
  (save-excursion
    (goto-char start)
    (while (re-search-forward mevedel-locations--address-regexp end t)
      (let ((from (match-beginning 0))
            (to (progn (skip-chars-backward ".,;:!?" (match-beginning 0)) (point))))
        (add-text-properties from to
                             (list 'mevedel-address (buffer-substring-no-properties from to)
                                   'keymap mevedel-locations-address-map
                                   'mouse-face 'highlight
                                   'help-echo "RET: visit this address"))
        (add-face-text-property from to 'link)
        (goto-char (max (match-end 0) (1+ from)))))))

(defun mevedel-locations-visit-address (&optional event)
  "Visit the resource address at point (or at the click EVENT)."
  (interactive (list last-nonmenu-event))
  (when (mouse-event-p event) (posn-set-point (event-end event)))
  (let ((address (or (get-text-property (point) 'mevedel-address)
                     (user-error "No address here"))))
    (or (run-hook-with-args-until-success 'mevedel-locations-address-functions address)
        (user-error "Nothing here can show %s; Read it instead" address))))

(defun mevedel-locations--put (start end file line base)
  "Mark START to END of the current buffer as the place FILE:LINE under BASE."
  (add-text-properties start end
                       (list 'mevedel-location (list file line base)
                             'keymap mevedel-locations-map
                             'mouse-face 'highlight
                             'help-echo "RET: visit this place")))

(defun mevedel-locations-mark-body (text name args base)
  "Return TEXT, the body of a NAME tool row with ARGS, with its places marked.
Relative names are taken under BASE (the session's directory, or the
searched directory)."
  (with-temp-buffer
    (insert text)
    (goto-char (point-min))
    (let ((base (or (and (stringp (plist-get args :path))
                         (file-name-absolute-p (plist-get args :path))
                         (file-directory-p (plist-get args :path))
                         (file-name-as-directory (plist-get args :path)))
                    base)))
      (pcase name
        ("Read"
         (when-let* ((file (plist-get args :file_path)))
           (while (re-search-forward mevedel-locations--read-regexp nil t)
             (mevedel-locations--put (match-beginning 0) (line-end-position) file
                                     (string-to-number (match-string 1)) base))))
        ("Glob"
         (while (not (eobp))
           (skip-chars-forward " ")
           (unless (eolp)
             (mevedel-locations--put (point) (line-end-position)
                                     (buffer-substring-no-properties (point) (line-end-position))
                                     nil base))
           (forward-line 1)))
        (_
         (while (re-search-forward mevedel-locations--grep-regexp nil t)
           (mevedel-locations--put (match-beginning 1) (line-end-position) (match-string 1)
                                   (string-to-number (match-string 2)) base))))
      (mevedel-locations-mark-addresses (point-min) (point-max)))
    (buffer-string)))

(defvar-local mevedel-locations--exists nil
  "Hash table: (NAME . BASE) to whether file NAME exists under BASE.")

(defun mevedel-locations-cache ()
  "Return the current buffer's table of which files named in text exist."
  (or mevedel-locations--exists
      (setq mevedel-locations--exists (make-hash-table :test #'equal))))

(defun mevedel-locations-mark-region (start end base cache)
  "Make the names of files under BASE from START to END buttons.
Only names of existing files become buttons, each with an extension and
an optional `:LINE'; CACHE, from `mevedel-locations-cache', remembers
which exist.  Each candidate is found from its extension's dot, so the
text is searched once for dots followed by a letter."
  (save-excursion
    (goto-char start)
    (while (re-search-forward "\\.[[:alpha:]]" end t)
      (let* ((dot (match-beginning 0))
             (from (progn (goto-char dot) (skip-chars-backward "[:alnum:]_.~/-" start)
                          (point)))
             (to (progn (goto-char dot) (skip-chars-forward "[:alnum:]_.~/-" end)
                        (skip-chars-backward "." dot)
                        (point)))
             (name (buffer-substring-no-properties from to))
             (before (char-before from)))
        (when (and (or (null before) (memq before '(?\s ?\t ?\n ?\( ?\" ?' ?` ?\[)))
                   (string-match-p mevedel-locations--name-regexp name))
          (let* ((line (and (eq (char-after to) ?:)
                            (progn (goto-char (1+ to)) (skip-chars-forward "0-9" end)
                                   (> (point) (1+ to)))
                            (string-to-number (buffer-substring-no-properties (1+ to) (point)))))
                 (to (if line (point) to))
                 (key (cons name base))
                 (known (gethash key cache 'unknown)))
            (when (if (eq known 'unknown)
                      (puthash key (file-exists-p (expand-file-name name base)) cache)
                    known)
              (add-text-properties from to
                                   (list 'mevedel-location (list name line base)
                                         'keymap mevedel-locations-map 'mouse-face 'highlight
                                         'help-echo "RET: visit this file"))
              (add-face-text-property from to 'link))))
        (goto-char (max to (1+ dot))))))
  (mevedel-locations-mark-addresses start end))

;;;; Visiting

(defun mevedel-locations--find (location)
  "Return the existing file LOCATION, (FILE LINE BASE), names, or signal."
  (pcase-let ((`(,file ,_line ,base) location))
    (let ((path (expand-file-name file base)))
      (unless (file-exists-p path)
        (user-error "No such file: %s" path))
      path)))

(defun mevedel-locations-show (location &optional select)
  "Show the place LOCATION in another window; SELECT it when non-nil."
  (let* ((path (mevedel-locations--find location))
         (buffer (find-file-noselect path))
         (window (display-buffer buffer '(nil (inhibit-same-window . t)))))
    (with-current-buffer buffer
      (when-let* ((line (nth 1 location)))
        (widen)
        (goto-char (point-min))
        (forward-line (1- line)))
      (when window (set-window-point window (point))))
    (when (and select window) (select-window window))
    buffer))

(defun mevedel-locations-visit (&optional event)
  "Visit the place at point (or at the click EVENT) in another window."
  (interactive (list last-nonmenu-event))
  (when (mouse-event-p event) (posn-set-point (event-end event)))
  (let ((location (or (get-text-property (point) 'mevedel-location)
                      (user-error "No file or line here"))))
    (setq next-error-last-buffer (current-buffer))
    (mevedel-locations-show location t)))

(defun mevedel-locations--row-bounds ()
  "Return (START . END) of the tool row at point (its `mevedel-row' run)."
  (let ((id (or (get-text-property (point) 'mevedel-row)
                (user-error "Not on a tool row"))))
    (cons (let ((pos (point)))
            (while (and (> pos (point-min)) (equal (get-text-property (1- pos) 'mevedel-row) id))
              (setq pos (or (previous-single-property-change pos 'mevedel-row) (point-min))))
            pos)
          (or (next-single-property-change (point) 'mevedel-row) (point-max)))))

(defun mevedel-locations--places (bounds)
  "Return where each line between BOUNDS, (START . END), has a place, in order."
  (save-excursion
    (goto-char (car bounds))
    (let (places)
      (while (< (point) (cdr bounds))
        (when-let* ((pos (text-property-not-all (point) (min (line-end-position) (cdr bounds))
                                                'mevedel-location nil)))
          (push pos places))
        (forward-line 1))
      (nreverse places))))

(defun mevedel-locations-next-error (n &optional reset)
  "Show the place N places on in the tool row at point (`next-error-function').
RESET non-nil counts from before the row's first place."
  (let* ((places (or (mevedel-locations--places (mevedel-locations--row-bounds))
                     (user-error "No places in this row (TAB expands it)")))
         (here (and (not reset) (get-text-property (point) 'mevedel-location)
                    (cl-position-if (lambda (pos) (<= (line-beginning-position) pos (line-end-position)))
                                    places)))
         (target (cond (here (+ here n))
                       ((> n 0) (1- n))
                       (t (+ (length places) n)))))
    (unless (< -1 target (length places))
      (user-error "No more places in this row"))
    (goto-char (nth target places))
    (when-let* ((window (get-buffer-window (current-buffer))))
      (set-window-point window (point)))
    (mevedel-locations-show (get-text-property (point) 'mevedel-location))))

(provide 'mevedel-locations)
;;; mevedel-locations.el ends here
