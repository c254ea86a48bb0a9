;;; read-media-bench.el --- Read of a large image and a long PDF  -*- lexical-binding: t; -*-

;;; Commentary:

;; Read's handler, the entry point a model's call reaches, on the
;; fixtures under test/fixtures/media/: a 4000×3000 PNG screenshot
;; decoded, scaled to 1568 px, encoded and handed back as a media
;; record, and the text of all pages of a 100-page PDF (pdfinfo and
;; pdftotext from poppler-utils).  Each figure is the median wall time
;; from the call to its settled result.

;;; Code:

(require 'mevedel-tool-fs)
(require 'mevedel-bench-lib)

(defun read-media-bench--fixture (name)
  "Return the absolute name of the media fixture NAME."
  (expand-file-name (concat "test/fixtures/media/" name) mevedel-test-root))

(defun read-media-bench--once (args accepts check)
  "Return the seconds one Read of ARGS takes for a model taking ACCEPTS.
CHECK is called with the result plist and signals when it is wrong."
  (cl-letf (((symbol-function 'mevedel-tool-fs-accepted-images) (lambda (_) accepts)))
    (let ((result nil)
          (start (float-time)))
      (mevedel-tool-fs-read (lambda (r) (setq result r)) args)
      (while (not result) (accept-process-output nil 0.001))
      (prog1 (- (float-time) start)
        (when (eq (plist-get result :status) 'error)
          (error "Bench Read failed: %s" (plist-get result :result)))
        (funcall check result)))))

(defun read-media-bench--median (runs args accepts check)
  "Return the median milliseconds of RUNS Reads of ARGS (see `read-media-bench--once')."
  (read-media-bench--once args accepts check)
  (let ((samples (sort (cl-loop repeat runs
                                collect (read-media-bench--once args accepts check))
                       #'<)))
    (* 1000 (nth (/ runs 2) samples))))

(mevedel-core-ensure)
(let ((runs 9))
  (mevedel-bench-describe
   "Read of a 4000x3000 PNG screenshot (test/fixtures/media/screen-4000x3000.png, 157 KB) for a \
model taking PNG, from the handler call to its result: decoded, scaled to 1568x1176, PNG-encoded, \
base64 across the module and decoded to the media record; median of %d runs; goal <= 150 ms"
   runs)
  (mevedel-bench-report
   "read-image-4k"
   (read-media-bench--median
    runs (list :file_path (read-media-bench--fixture "screen-4000x3000.png")) '("image/png")
    (lambda (r)
      (let ((data (plist-get (car (plist-get r :media)) :data)))
        (unless (and data (string-prefix-p "\x89PNG" data))
          (error "Bench read-image-4k: no PNG was sent")))))
   "ms")
  (mevedel-bench-describe
   "Read of pages 1-100 of a 100-page text PDF (test/fixtures/media/hundred-pages.pdf, 45 lines a \
page) for a text-only model: pdfinfo, pdftotext, the pages headed; median of %d runs; \
goal <= 300 ms"
   runs)
  (mevedel-bench-report
   "read-pdf-100-pages-text"
   (read-media-bench--median
    runs (list :file_path (read-media-bench--fixture "hundred-pages.pdf") :pages "1-100") nil
    (lambda (r)
      (unless (string-match-p "--- page 100 of 100 ---\nSection 100\\.1:" (plist-get r :result))
        (error "Bench read-pdf-100-pages-text: page 100 is missing"))))
   "ms"))

;;; read-media-bench.el ends here
