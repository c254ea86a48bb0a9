;;; shared-bench.el --- A whiteboard edit reaching an open page  -*- lexical-binding: t; -*-

;;; Commentary:

;; A 10-element SharedEdit-sized edit on a 500-element board with one
;; page open in headless Chromium: from the seam call to the moment the
;; page acknowledged it over the WebSocket (the reply of
;; `mevedel-core-shared-board-synced').  The page runs the real bundled
;; Excalidraw; a missing Chromium or page fails the bench.

;;; Code:

(require 'json)
(require 'mevedel-core)
(require 'mevedel-bench-lib)

(defvar mevedel-test-root)

(mevedel-core-ensure)
(let* ((root (or (getenv "MEVEDEL_ROOT") mevedel-test-root))
       (driver (mevedel-bench-checkout-file "test/e2e/shared-board-browser.mjs" "a broken checkout"))
       (modules (mevedel-bench-checkout-file ".deps/shared/npm/node_modules/playwright-core"
                                             "run make deps"))
       (board (mevedel-core-shared-board-open '(:id "bench")))
       (profile (make-temp-file "mevedel-chromium" t))
       (out "")
       (runs 40)
       samples proc)
  (ignore root)
  (unless (file-executable-p "/usr/bin/chromium")
    (error "/usr/bin/chromium is missing: run make deps"))
  (mevedel-core-shared-board-edit
   board
   (json-serialize
    (apply #'vector
           (mapcar (lambda (i)
                     `((op . "add")
                       (element . ((type . ,(if (= 0 (% i 3)) "ellipse" "rectangle"))
                                   (id . ,(format "e%03d" i))
                                   (x . ,(* 140 (% i 25))) (y . ,(* 90 (/ i 25)))
                                   (width . 120) (height . 70)))))
                   (number-sequence 0 499))))
   "model")
  (setq proc (make-process
              :name "shared-bench-browser" :noquery t :connection-type 'pipe
              :command (list "node" driver (file-name-directory modules)
                             (mevedel-core-shared-board-serve board) profile "hold")
              :filter (lambda (_ s) (setq out (concat out s)))))
  (with-timeout (60 (error "The page did not open: %s" out))
    (while (not (string-match-p "^READY$" out))
      (unless (process-live-p proc) (error "The browser driver ended: %s" out))
      (accept-process-output nil 0.05)))
  (let ((synced (lambda ()
                  (let (done)
                    (mevedel-core-shared-board-synced board (lambda (&rest _) (setq done t)))
                    (while (not done) (accept-process-output nil 0.01)))))
        (overview-hashes
         (lambda ()
           (let ((o (mevedel-core-shared-board-overview board)) (table (make-hash-table :test #'equal)))
             (dolist (line (cdr (split-string o "\n" t)))
               (let ((fields (split-string line " ")))
                 (puthash (nth 1 fields) (car fields) table)))
             table))))
    (dotimes (run (+ runs 5))
      (let* ((hashes (funcall overview-hashes))
             (ops (apply #'vector
                         (mapcar (lambda (k)
                                   (let ((id (format "e%03d" (+ (* 10 k) (% run 10)))))
                                     `((op . "update") (hash . ,(gethash id hashes))
                                       (set . ((x . ,(+ 5 (* run 3) (* 140 k))))))))
                                 (number-sequence 0 9))))
             (json (json-serialize ops))
             (start (float-time)))
        (mevedel-core-shared-board-edit board json "model")
        (funcall synced)
        (when (>= run 5)
          (push (* 1000 (- (float-time) start)) samples))
        ;; A model's edits come seconds apart: let the page finish
        ;; drawing this one before the next is timed.
        (let ((idle (+ (float-time) 0.2)))
          (while (< (float-time) idle) (accept-process-output nil 0.02))))))
  (process-send-eof proc)
  (with-timeout (10 (delete-process proc))
    (while (process-live-p proc) (accept-process-output nil 0.05)))
  (mevedel-core-shared-board-close board)
  (delete-directory profile t)
  (mevedel-bench-describe "a 10-element update (one SharedEdit's operations as JSON) on a 500-element whiteboard with one page open in headless Chromium running the bundled Excalidraw: from the seam call to the page's acknowledgement over the WebSocket; median and p90 of %d runs 0.2 s apart (the page done drawing the previous one), after 5 warm-ups; goal <= 20 ms" runs)
  (mevedel-bench-report "shared-edit-500-elements" (mevedel-bench-percentile samples 50) "ms")
  (mevedel-bench-report "shared-edit-500-elements-p90" (mevedel-bench-percentile samples 90) "ms"))

;;; shared-bench.el ends here
