;;; web-bench.el --- WebFetch of a 1 MB page; timer lag while pages convert  -*- lexical-binding: t; -*-

;;; Commentary:

;; The fixture server (test/fixtures/web/server.py, 127.0.0.1) serves
;; a generated 1 MB documentation-like HTML page.  WebFetch fetches and
;; renders it through the pipeline, as a model's call does (url-http
;; retrieval, module conversion on a worker thread, result text in
;; Lisp).  Peers, on the same bytes in this same Emacs: `pandoc -f html
;; -t gfm' through `call-process' when pandoc is installed, and the raw
;; `libxml-parse-html-region' + `shr-insert-document' an EWW-style
;; rendering would run on the main thread.  Then a 10 ms timer measures
;; how late Emacs runs timers while WebFetch fetches the 1 MB page and
;; the 5 MB single-line hostile page back to back.

;;; Code:

(require 'mevedel-pipeline)
(require 'mevedel-web)
(require 'mevedel-bench-lib)
(require 'shr)
(require 'mevedel-test-helpers)
(eval-and-compile
  (add-to-list 'load-path (expand-file-name "test/fixtures/web" mevedel-test-root)))
(require 'mevedel-web-fixture)

(defun web-bench--fetch (path)
  "Return the outcome of WebFetch of fixture PATH, waiting for it."
  (let ((outcome nil)
        (mevedel-permissions-rules '((allow "WebFetch" "127.0.0.1"))))
    (mevedel-pipeline-run-tool-outcome (mevedel-tool-get "WebFetch" "web")
                                       (list :url (mevedel-web-fixture-url path))
                                       (lambda (o) (setq outcome o)))
    (while (not outcome) (accept-process-output nil 0.005))
    (unless (eq (plist-get outcome :status) 'success)
      (error "WebFetch failed: %s" (plist-get outcome :result)))
    outcome))

(defun web-bench--median-ms (rounds thunk)
  "Return the median milliseconds of ROUNDS calls of THUNK."
  (let ((samples (cl-loop repeat rounds
                          collect (progn (garbage-collect)
                                         (* 1000 (mevedel-bench-seconds (funcall thunk)))))))
    (nth (/ rounds 2) (sort samples #'<))))

(defun web-bench--page-bytes (path)
  "Return the raw bytes the fixture serves at PATH."
  (let ((body nil))
    (mevedel-web-retrieval-start (mevedel-web-fixture-url path) (lambda (r) (setq body r)))
    (while (not body) (accept-process-output nil 0.005))
    (plist-get body :body)))

(defun web-bench--shr (html)
  "Render the HTML text as EWW would, on this thread."
  (with-temp-buffer
    (insert html)
    (let ((dom (libxml-parse-html-region (point-min) (point-max))))
      (with-temp-buffer
        (let ((shr-width 80) (shr-inhibit-images t))
          (shr-insert-document dom))))))

(defun web-bench-html-1mb ()
  "Report WebFetch of the 1 MB page against pandoc and SHR."
  (let* ((bytes (web-bench--page-bytes "/gen?kind=mb"))
         (html (decode-coding-string bytes 'utf-8))
         (file (make-temp-file "web-bench" nil ".html"))
         (text nil))
    (let ((coding-system-for-write 'binary)) (write-region bytes nil file nil 'silent))
    (unwind-protect
        (progn
          (web-bench--fetch "/gen?kind=mb")
          (let* ((ours (web-bench--median-ms
                        9 (lambda () (setq text (plist-get (web-bench--fetch "/gen?kind=mb") :result)))))
                 (shr (web-bench--median-ms 3 (lambda () (web-bench--shr html))))
                 (pandoc (and (executable-find "pandoc")
                              (web-bench--median-ms
                               3 (lambda ()
                                   (with-temp-buffer
                                     (call-process "pandoc" nil t nil "-f" "html" "-t" "gfm" file)))))))
            (mevedel-bench-describe "WebFetch of a generated %d-byte HTML page (4,300 sections of headings, paragraphs with links and code, lists, pre) from the local fixture server to %d characters of text, through the pipeline; median of 9. Peers on the same file: %s, median of 3"
                                    (length bytes) (length text)
                                    (if pandoc "pandoc -f html -t gfm (call-process) and libxml + shr-insert-document"
                                      "libxml + shr-insert-document (pandoc is not installed)"))
            (if pandoc
                (mevedel-bench-report "webfetch-html-1mb" ours "ms" "pandoc-gfm" pandoc)
              (mevedel-bench-report "webfetch-html-1mb" ours "ms" "shr-insert-document" shr))
            (when pandoc
              (mevedel-bench-report "webfetch-html-1mb-shr" ours "ms" "shr-insert-document" shr))))
      (delete-file file))))

(defun web-bench-timer-lag ()
  "Report the p99 lag of a 10 ms timer while WebFetch converts big pages."
  (let* ((fetches 0)
         (lags (mevedel-bench-timer-lags
                4 (lambda ()
                    (web-bench--fetch (if (cl-evenp fetches) "/gen?kind=mb" "/gen?kind=long"))
                    (cl-incf fetches)))))
    (mevedel-bench-describe "10 ms repeating timer while %d back-to-back WebFetch calls alternate the 1 MB page and a 5 MB single-line page (280,000 spans) for 4 s; %d timer samples, max lag %.1f ms"
                            fetches (length lags) (apply #'max lags))
    (mevedel-bench-report "webfetch-timer-lag-p99" (mevedel-bench-percentile lags 99) "ms")))

(web-bench-html-1mb)
(web-bench-timer-lag)
(mevedel-web-fixture-stop)

;;; web-bench.el ends here
