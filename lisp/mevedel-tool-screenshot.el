;;; mevedel-tool-screenshot.el --- EmacsScreenshot: a picture of Emacs  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; EmacsScreenshot (a specialist in the `emacs' group) lets the model
;; see the UI it is working on: an image of the selected frame, or of
;; the window showing a named buffer in it.  Emacs draws the frame
;; (`x-export-frames', a Cairo build's PNG export); the module crops a
;; window out of it and scales and encodes it exactly as Read does an
;; image (crates/mevedel-core's media/), off the main thread, so this
;; file only takes the picture, writes it to a temporary file that
;; lives until the call settles, and hands the result to the pipeline.
;; It asks in `ask' mode (a screen may show what the user would not
;; share).  A terminal or batch Emacs, or one without Cairo, has no
;; picture to give: the call is an error saying so.  It does not
;; capture other programs' windows or the desktop.

;;; Code:

(require 'cl-lib)
(require 'mevedel-tool-fs)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)

;;;; Plumbing

(defun mevedel-tool-screenshot--window (frame name)
  "Return the window of FRAME showing the buffer NAME; signal when none does."
  (or (get-buffer-window name frame)
      (error "No window of the selected frame shows a buffer named `%s'; the windows show: %s"
             name (mapconcat (lambda (w) (buffer-name (window-buffer w)))
                             (window-list frame 'no-minibuf) ", "))))

(defun mevedel-tool-screenshot--problem (frame)
  "Return why no picture of FRAME can be taken, or nil when one can."
  (cond (noninteractive "this Emacs runs in batch mode, with no frame to picture")
        ((not (display-graphic-p frame))
         "the selected frame is on a text terminal, which Emacs cannot picture")
        ((not (fboundp 'x-export-frames))
         "this Emacs was built without Cairo, which exporting a frame as PNG needs")))

(defun mevedel-tool-screenshot-take (callback args)
  "Picture the selected frame, or the window ARGS's :window names; call CALLBACK.
Return a function that cancels the call."
  (let* ((frame (selected-frame))
         (name (let ((v (plist-get args :window))) (and (stringp v) v)))
         (problem (mevedel-tool-screenshot--problem frame)))
    (if problem
        (progn (funcall callback (concat "Error: EmacsScreenshot cannot take a picture: "
                                         problem "."))
               #'ignore)
      (condition-case err
          (let* ((window (and name (mevedel-tool-screenshot--window frame name)))
                 (crop (and window (pcase-let ((`(,x0 ,y0 ,x1 ,y1) (window-pixel-edges window)))
                                     (list x0 y0 (- x1 x0) (- y1 y0)))))
                 (file (make-temp-file "mevedel-screenshot-" nil ".png"))
                 (display (if name (format "window of %s" name)
                            (format "frame %s" (frame-parameter frame 'name)))))
            (let ((coding-system-for-write 'binary))
              (write-region (x-export-frames frame 'png) nil file nil 'silent))
            (mevedel-tool-fs-send-image file display crop
                                        (lambda (result)
                                          (delete-file file)
                                          (funcall callback result))))
        (error (funcall callback (concat "Error: " (error-message-string err)))
               #'ignore)))))

(defun mevedel-tool-screenshot-render (_name args result render-data)
  "Render an EmacsScreenshot call with ARGS, RESULT and RENDER-DATA."
  (mevedel-tool-fs-render-media
   (concat "EmacsScreenshot " (or (plist-get args :window) "frame")) nil result render-data))

;;;; Declaration

(mevedel-define-tool EmacsScreenshot
  :category "emacs"
  :groups '(emacs)
  :summary "See the Emacs UI: an image of the selected frame or of the window showing a buffer."
  :description "Take a picture of the selected Emacs frame, or with window of the window \
showing that buffer, and send it as an image (scaled to 1568 px at most), so you can see the UI \
you are working on. Needs a graphical Emacs built with Cairo and a model that takes images; \
always asks the user unless the session is in full-auto mode. Manual: Read \
mevedel://tools/emacs.md."
  :args ((window string :optional "Name of a buffer shown in the frame; its window is pictured."))
  :read-only-p t
  :async-p t
  :check-permission (lambda (_args) 'ask)
  :function #'mevedel-tool-screenshot-take
  :renderer #'mevedel-tool-screenshot-render)

(provide 'mevedel-tool-screenshot)
;;; mevedel-tool-screenshot.el ends here
