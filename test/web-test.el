;;; web-test.el --- Tests of WebFetch and WebSearch  -*- lexical-binding: t; -*-

;;; Commentary:

;; Every call goes to the fixture server (test/fixtures/web/server.py)
;; on 127.0.0.1 and 127.0.0.2, never to the internet: charsets, link
;; rewriting, redirects and their permission decisions, content types,
;; timeouts, hostile pages, exactly-once delivery, DuckDuckGo-shaped
;; result pages, YouTube-shaped pages, renderers and the :get-domain
;; permission facts.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-pipeline)
(require 'mevedel-web)
(require 'mevedel-gptel)
(eval-and-compile
  (add-to-list 'load-path (expand-file-name "test/fixtures/web" mevedel-test-root)))
(require 'mevedel-web-fixture)

(defvar mevedel-web-test-rules
  '((allow "WebFetch" "127.0.0.1") (allow "WebFetch" "www.youtube.com"))
  "Permission rules the calls run under unless a test binds others.")

(defun mevedel-web-test-run (name args &optional session)
  "Run tool NAME with ARGS through the pipeline (in SESSION); return the outcome."
  (let ((outcome nil)
        (mevedel-permissions-rules mevedel-web-test-rules))
    (with-temp-buffer
      (setq-local mevedel-session-current session)
      (mevedel-pipeline-run-tool-outcome (mevedel-tool-get name "web") args
                                         (lambda (o) (setq outcome o))
                                         :session session)
      (mevedel-test-wait-until outcome 40))
    outcome))

(defun mevedel-web-test-fetch (path &optional second session)
  "Return the outcome of WebFetch of fixture PATH (on the SECOND host) in SESSION."
  (mevedel-web-test-run "WebFetch" (list :url (mevedel-web-fixture-url path second)) session))

(defun mevedel-web-test-text (outcome)
  "Return OUTCOME's result text."
  (plist-get outcome :result))

(defmacro mevedel-web-test-should-succeed (outcome &rest body)
  "Check that OUTCOME succeeded, then run BODY with `text' bound to its result."
  (declare (indent 1))
  `(let* ((o ,outcome) (text (plist-get o :result)))
     (should (equal (list (plist-get o :status) text) (list 'success text)))
     ,@body))

(defun mevedel-web-test-error (outcome)
  "Check that OUTCOME failed; return its result text."
  (should (eq (plist-get outcome :status) 'error))
  (plist-get outcome :result))

(defun mevedel-web-test-hex (string)
  "Return the unibyte STRING as hex digits."
  (mapconcat (lambda (b) (format "%02x" b)) string ""))

(defun mevedel-web-test-bytes-path (bytes type)
  "Return the fixture path serving unibyte BYTES with content TYPE (nil: none)."
  (concat "/bytes?hex=" (mevedel-web-test-hex bytes)
          (if type (concat "&type=" (url-hexify-string type)) "")))

(defun mevedel-web-test-session ()
  "Return a fresh durable session in a temporary workspace."
  (mevedel-session-create :workspace (make-temp-file "mevedel-web-ws" t)))

(defun mevedel-web-test-url-buffers ()
  "Return the live url-http buffers of the fixture hosts."
  (cl-remove-if-not (lambda (b) (string-match-p "\\` \\*http 127\\.0\\.0\\.[12]:" (buffer-name b)))
                    (buffer-list)))

;;;; Charsets

(ert-deftest mevedel-web:charset-from-header-meta-or-utf-8 ()
  ;; Latin-1 by the header.
  (mevedel-web-test-should-succeed
      (mevedel-web-test-fetch (mevedel-web-test-bytes-path
                               "<p>caf\351 cr\350me</p>" "text/html; charset=ISO-8859-1"))
    (should (string-match-p "café crème" text)))
  ;; Shift-JIS by a meta element.
  (mevedel-web-test-should-succeed
      (mevedel-web-test-fetch (mevedel-web-test-bytes-path
                               (concat "<html><head><meta charset=\"Shift_JIS\"></head>"
                                       "<body><p>\223\372\226{\214\352</p></body></html>")
                               "text/html"))
    (should (string-match-p "日本語" text)))
  ;; Nothing declared: UTF-8, with and without a byte-order mark.
  (dolist (bom '("" "\357\273\277"))
    (mevedel-web-test-should-succeed
        (mevedel-web-test-fetch (mevedel-web-test-bytes-path
                                 (concat bom "<p>na\303\257ve</p>") "text/html"))
      (should (equal text "naïve\n"))))
  ;; Other text is decoded the same way.
  (mevedel-web-test-should-succeed
      (mevedel-web-test-fetch (mevedel-web-test-bytes-path
                               "caf\351" "text/plain; charset=iso-8859-1"))
    (should (equal text "café"))))

;;;; Links

(ert-deftest mevedel-web:links-become-markdown-or-stay-plain ()
  (mevedel-web-test-should-succeed
      (mevedel-web-test-fetch "/file?name=links.html&type=text/html")
    (let ((base (mevedel-web-fixture-base)))
      ;; Relative to the base element, itself relative to the final URL.
      (should (string-search (format "[Intro](%s/docs/v2/intro.html)" base) text))
      (should (string-search
               "[Lisp \\[the language\\]](https://en.example.org/wiki/Lisp_%28language%29)" text))
      ;; Anchors, mailto and empty links stay plain.
      (should (string-search "\nSection below\n" text))
      (should (string-search "\nWrite to us\n" text))
      (should-not (string-search "mailto:" text))
      (should (string-search "\nafter empty\n" text))
      (should-not (string-search "/empty" text))
      ;; Text that is its URL is the bare URL; wrapped text is unwrapped.
      (should (string-search "\nhttps://example.net/plain\n" text))
      (should-not (string-search "[https://example.net/plain]" text))
      (should (string-search (format "[wrapped link text](%s/wrapped)" base) text)))))

(ert-deftest mevedel-web:accept-asks-for-markdown-first ()
  (mevedel-web-test-should-succeed (mevedel-web-test-fetch "/echo")
    (should (string-prefix-p "GET Accept: text/markdown," text))))

;;;; Redirects

(ert-deftest mevedel-web:same-host-redirects-are-followed-and-named ()
  (mevedel-web-test-should-succeed (mevedel-web-test-fetch "/chain?n=3")
    (should (equal text (format "Final URL: %s\n\nend of chain"
                                (mevedel-web-fixture-url "/chain?n=0"))))))

(ert-deftest mevedel-web:at-most-ten-redirects ()
  (mevedel-web-test-should-succeed (mevedel-web-test-fetch "/chain?n=10")
    (should (string-suffix-p "end of chain" text)))
  (should (string-match-p "more than 10 redirects"
                          (mevedel-web-test-error (mevedel-web-test-fetch "/chain?n=11")))))

(ert-deftest mevedel-web:cross-host-redirects-follow-the-permission-decision ()
  (let ((to (url-hexify-string (mevedel-web-fixture-url "/body?text=second&type=text/plain" t))))
    ;; Allowed by a rule: followed.
    (let ((mevedel-web-test-rules '((allow "WebFetch" "127.0.0.*"))))
      (mevedel-web-test-should-succeed (mevedel-web-test-fetch (concat "/redirect?to=" to))
        (should (string-suffix-p "\n\nsecond" text))
        (should (string-prefix-p "Final URL: http://127.0.0.2:" text))))
    ;; Denied by a rule: an error.
    (let ((mevedel-web-test-rules '((allow "WebFetch" "127.0.0.1") (deny "WebFetch" "127.0.0.2"))))
      (should (string-match-p "permission rules deny"
                              (mevedel-web-test-error
                               (mevedel-web-test-fetch (concat "/redirect?to=" to))))))
    ;; Undecided: returned for the model's next call.
    (mevedel-web-test-should-succeed (mevedel-web-test-fetch (concat "/redirect?to=" to))
      (should (string-prefix-p (concat "REDIRECT: " (url-unhex-string to)) text)))))

(ert-deftest mevedel-web:public-to-private-redirects-are-always-returned ()
  ;; 127.0.0.2 plays a public host here.
  (cl-letf* ((private (symbol-function 'mevedel-web-retrieval-private-host-p))
             ((symbol-function 'mevedel-web-retrieval-private-host-p)
              (lambda (host) (and (not (equal host "127.0.0.2")) (funcall private host))))
             (mevedel-web-test-rules '((allow "WebFetch" "*"))))
    (dolist (target (list (mevedel-web-fixture-url "/body?text=inside") "http://10.1.2.3/admin"))
      (mevedel-web-test-should-succeed
          (mevedel-web-test-fetch (concat "/redirect?to=" (url-hexify-string target)) t)
        (should (string-prefix-p (concat "REDIRECT: " target) text))))))

(ert-deftest mevedel-web:only-http-urls-are-ever-retrieved ()
  (should (string-match-p "only http and https"
                          (mevedel-web-test-error
                           (mevedel-web-test-run "WebFetch" '(:url "file:///etc/passwd")))))
  (let ((text (mevedel-web-test-error
               (mevedel-web-test-fetch "/redirect?to=file%3A%2F%2F%2Fetc%2Fpasswd"))))
    (should (string-match-p "redirected to file:///etc/passwd: only http and https" text))
    (should-not (string-match-p "root:" text))))

(ert-deftest mevedel-web:redirect-without-location-ends-in-the-timeout ()
  (let ((mevedel-web-retrieval-timeout 1))
    (should (string-match-p "timed out after 1 s"
                            (mevedel-web-test-error (mevedel-web-test-fetch "/noloc"))))
    (should-not (mevedel-web-test-url-buffers))))

;;;; Content types

(ert-deftest mevedel-web:text-types-come-back-verbatim ()
  (pcase-dolist (`(,name ,type ,expected)
                 `(("page.md" "text/markdown" "# Markdown page\n\nSome *markdown*")
                   ("data.json" "application/json" "{\"name\": \"fixture\"")
                   ("data.xml" "application/xml" "<?xml version=\"1.0\"?>\n<root>")
                   ("data.xml" "application/atom+xml" "<root><item>fixture")
                   ("data.json" "application/vnd.api+json" "\"n\": 1")))
    (mevedel-web-test-should-succeed
        (mevedel-web-test-fetch (format "/file?name=%s&type=%s" name (url-hexify-string type)))
      (should (string-search expected text)))))

(ert-deftest mevedel-web:images-are-checked-then-attached ()
  (let ((png (concat "\211PNG\r\n\032\n" (make-string 24 0))))
    (cl-letf (((symbol-function 'mevedel-gptel-model-accepts-mime-p) (lambda (&rest _) t)))
      (let ((o (mevedel-web-test-fetch (mevedel-web-test-bytes-path png "image/png"))))
        (mevedel-web-test-should-succeed o
          (should (string-match-p "\\`Image image/png, 32 B, attached\\.\\'" text))
          (should (equal (mevedel-tool-media-payloads (plist-get o :media) nil)
                         (list (cons "image/png" (base64-encode-string png t)))))))
      ;; The bytes must carry the type's signature.
      (should (string-match-p "image/png but its bytes are not one"
                              (mevedel-web-test-error
                               (mevedel-web-test-fetch (mevedel-web-test-bytes-path
                                                        "GIF89a...." "image/png")))))
      ;; At most 10 MiB.
      (should (string-match-p "(image/png, 11 MiB) is larger than 10 MiB"
                              (mevedel-web-test-error
                               (mevedel-web-test-fetch "/big?bytes=11534336")))))
    ;; A model that takes no images gets an error.
    (cl-letf (((symbol-function 'mevedel-gptel-model-accepts-mime-p) (lambda (&rest _) nil)))
      (should (string-match-p "does not accept image/png"
                              (mevedel-web-test-error
                               (mevedel-web-test-fetch
                                (mevedel-web-test-bytes-path png "image/png"))))))))

(ert-deftest mevedel-web:pdfs-become-text-and-an-artifact ()
  (should (executable-find "pdftotext"))
  (let* ((session (mevedel-web-test-session))
         (o (mevedel-web-test-fetch "/file?name=sample.pdf&type=application/pdf" nil session)))
    (mevedel-web-test-should-succeed o
      (should (string-match "\\`\\(artifact://tool-results/WebFetch-[^ ]+\\.pdf\\) (the PDF" text))
      (let ((file (expand-file-name (substring (match-string 1 text) (length "artifact://"))
                                    (mevedel-session-directory session))))
        (should (file-exists-p file))
        (should (equal (with-temp-buffer (set-buffer-multibyte nil)
                                         (insert-file-contents-literally file) (buffer-string))
                       (with-temp-buffer (set-buffer-multibyte nil)
                                         (insert-file-contents-literally
                                          (expand-file-name "sample.pdf" mevedel-web-fixture-directory))
                                         (buffer-string)))))
      (should (string-search "Fixture PDF text" text))))
  ;; Only whitespace: said so.
  (mevedel-web-test-should-succeed
      (mevedel-web-test-fetch "/file?name=blank.pdf&type=application/pdf" nil
                              (mevedel-web-test-session))
    (should (string-search "no extractable text" text)))
  ;; A failed extraction keeps the saved copy and says why.
  (mevedel-web-test-should-succeed
      (mevedel-web-test-fetch (mevedel-web-test-bytes-path "%PDF-1.4 not really" "application/pdf")
                              nil (mevedel-web-test-session))
    (should (string-prefix-p "artifact://tool-results/WebFetch-" text))
    (should (string-match-p "No text extracted: pdftotext failed (exit [0-9]+): ." text)))
  (should-not (cl-find-if (lambda (p) (string-prefix-p "mevedel-pdftotext" (process-name p)))
                          (process-list)))
  ;; Without storage the text alone.
  (mevedel-web-test-should-succeed (mevedel-web-test-fetch "/file?name=sample.pdf&type=application/pdf")
    (should (string-prefix-p "Fixture PDF text" (string-trim-left text)))))

(ert-deftest mevedel-web:pdf-without-pdftotext ()
  (let ((exec-path (list (make-temp-file "mevedel-empty-bin" t)))
        (process-environment (cons "PATH=/nonexistent" process-environment)))
    (should-not (executable-find "pdftotext"))
    ;; With storage: still a success, with the saved copy's address.
    (mevedel-web-test-should-succeed
        (mevedel-web-test-fetch "/file?name=sample.pdf&type=application/pdf" nil
                                (mevedel-web-test-session))
      (should (string-prefix-p "artifact://tool-results/WebFetch-" text))
      (should (string-search "No text extracted: pdftotext is not installed." text)))
    ;; Without: an error.
    (should (string-match-p "cannot extract the PDF's text .* pdftotext is not installed"
                            (mevedel-web-test-error
                             (mevedel-web-test-fetch
                              "/file?name=sample.pdf&type=application/pdf"))))))

(ert-deftest mevedel-web:other-types-and-statuses-are-errors ()
  (should (string-match-p "cannot read application/octet-stream content (4 B)"
                          (mevedel-web-test-error
                           (mevedel-web-test-fetch (mevedel-web-test-bytes-path
                                                    "\0\1\2\3" "application/octet-stream")))))
  (should (string-match-p "answered HTTP 404"
                          (mevedel-web-test-error (mevedel-web-test-fetch "/missing"))))
  ;; Nothing listens on port 1: a network error, said so.
  (should (string-match-p "\\`Error: retrieving http://127.0.0.1:1/ failed: "
                          (mevedel-web-test-error
                           (mevedel-web-test-run "WebFetch" '(:url "http://127.0.0.1:1/"))))))

(ert-deftest mevedel-web:responses-without-a-type-are-sniffed ()
  (mevedel-web-test-should-succeed (mevedel-web-test-fetch "/file?name=guide.html")
    (should (string-prefix-p "# The Fixture Guide\n" text)))
  (mevedel-web-test-should-succeed (mevedel-web-test-fetch "/file?name=sample.pdf")
    (should (string-search "Fixture PDF text" text)))
  (mevedel-web-test-should-succeed (mevedel-web-test-fetch "/file?name=page.md")
    (should (string-prefix-p "# Markdown page" text)))
  (should (string-match-p "(sniffed: binary)"
                          (mevedel-web-test-error
                           (mevedel-web-test-fetch (mevedel-web-test-bytes-path "ab\0cd" nil))))))

;;;; Timeouts, hostile pages, delivery

(ert-deftest mevedel-web:slow-server-hits-the-timeout ()
  (let ((mevedel-web-retrieval-timeout 1)
        (start (float-time)))
    (should (string-match-p "timed out after 1 s"
                            (mevedel-web-test-error (mevedel-web-test-fetch "/slow?seconds=20"))))
    (should (< (- (float-time) start) 10))
    (should-not (mevedel-web-test-url-buffers))))

(ert-deftest mevedel-web:hostile-pages-convert-within-the-timeout ()
  (mevedel-web-test-should-succeed (mevedel-web-test-fetch "/gen?kind=long")
    (should (= (cl-count ?w text) 280000)))
  (mevedel-web-test-should-succeed (mevedel-web-test-fetch "/gen?kind=deep")
    (should (equal text "deep\n")))
  (mevedel-web-test-should-succeed
      (mevedel-web-test-fetch (concat "/body?type=text/html&text="
                                      (url-hexify-string
                                       "<p>open <b>bold <i>both</p><a href=x>dangling<table><td>cell")))
    (should (string-search "open bold both" text))
    (should (string-search "cell" text))))

(ert-deftest mevedel-web:retrieval-delivers-exactly-once ()
  ;; A timeout racing a late response.
  (let ((mevedel-web-retrieval-timeout 1) (calls nil))
    (mevedel-web-retrieval-start (mevedel-web-fixture-url "/slow?seconds=2")
                          (lambda (r) (push r calls)))
    (mevedel-test-wait-until calls 10)
    (mevedel-test-sleep 2.5)
    (should (= (length calls) 1))
    (should (string-match-p "timed out" (plist-get (car calls) :error))))
  ;; Cancelled: nothing delivered, nothing left behind.
  (let ((calls 0))
    (funcall (mevedel-web-retrieval-start (mevedel-web-fixture-url "/slow?seconds=1")
                                   (lambda (_) (cl-incf calls))))
    (should-not (mevedel-web-test-url-buffers))
    (mevedel-test-sleep 1.5)
    (should (= calls 0)))
  ;; A cancelled tool call settles once, as cancelled.
  (let ((outcomes nil)
        (mevedel-permissions-rules mevedel-web-test-rules))
    (funcall (mevedel-pipeline-run-tool-outcome
              (mevedel-tool-get "WebFetch" "web")
              (list :url (mevedel-web-fixture-url "/slow?seconds=1"))
              (lambda (o) (push o outcomes))))
    (mevedel-test-sleep 1.5)
    (should (= (length outcomes) 1))
    (should (string-match-p "cancelled" (plist-get (car outcomes) :result)))
    (should-not (mevedel-web-test-url-buffers))))

;;;; WebSearch

(defmacro mevedel-web-test-with-search (&rest body)
  "Run BODY with WebSearch pointed at the fixture's DuckDuckGo page."
  (declare (indent 0))
  `(let ((mevedel-web-search-url (mevedel-web-fixture-url "/ddg")))
     ,@body))

(ert-deftest mevedel-web:search-parses-result-blocks ()
  (mevedel-web-test-with-search
    (let ((o (mevedel-web-test-run "WebSearch" '(:query "fixture"))))
      (mevedel-web-test-should-succeed o
        (should (string-prefix-p "Web search results for \"fixture\":\n\n1. The Fixture Guide\n   " text))
        (should (string-search (concat "   " (mevedel-web-fixture-url
                                               "/file?name=guide.html&type=text%2Fhtml")
                                       "\n   Everything about the fixture, in one page.")
                               text))
        ;; The ad is skipped, the duplicate destination dropped.
        (should-not (string-search "Sponsored" text))
        (should-not (string-search "(again)" text))
        (should (string-search "\n\n2. Example API reference\n   https://docs.example.com/api%20ref?v=2" text))
        (should (string-search "\n\n3. Bad example" text))
        (should-not (string-search "\n\n4. " text))
        (should-not (string-search "Feedback" text))
        (should (equal (mapcar (lambda (h) (plist-get h :title))
                               (plist-get (plist-get o :render-data) :results))
                       '("The Fixture Guide" "Example API reference" "Bad example")))))))

(ert-deftest mevedel-web:search-domain-filters-hold-at-label-boundaries ()
  (mevedel-web-test-with-search
    (mevedel-web-test-should-succeed
        (mevedel-web-test-run "WebSearch" '(:query "fixture" :allowed_domains ["example.com"]))
      (should (string-search "1. Example API reference" text))
      (should-not (string-search "badexample.com" text)))
    (mevedel-web-test-should-succeed
        (mevedel-web-test-run "WebSearch" '(:query "fixture" :blocked_domains ["example.com"]))
      (should (string-search "badexample.com" text))
      (should-not (string-search "docs.example.com" text)))
    (should (string-match-p "not both"
                            (mevedel-web-test-error
                             (mevedel-web-test-run "WebSearch"
                                                   '(:query "q" :allowed_domains ["a.com"]
                                                            :blocked_domains ["b.com"])))))
    (should (equal (mevedel-web--search-query "q" '("a.com" "b.org") nil)
                   "q site:a.com OR site:b.org"))
    (should (equal (mevedel-web--search-query "q" nil '("a.com")) "q -site:a.com"))))

(ert-deftest mevedel-web:search-challenge-differs-from-no-results ()
  (mevedel-web-test-with-search
    (should (string-match-p "bot challenge"
                            (mevedel-web-test-error
                             (mevedel-web-test-run "WebSearch" '(:query "challenge me")))))
    (mevedel-web-test-should-succeed (mevedel-web-test-run "WebSearch" '(:query "nothing"))
      (should (equal text "No results for \"nothing\".")))))

(ert-deftest mevedel-web:at-most-two-searches-in-flight ()
  (let ((mevedel-web-search-url (mevedel-web-fixture-url "/slow?seconds=1"))
        (mevedel-permissions-rules mevedel-web-test-rules)
        (outcomes nil)
        (most 0))
    (dotimes (_ 3)
      (mevedel-pipeline-run-tool-outcome (mevedel-tool-get "WebSearch" "web") '(:query "q")
                                         (lambda (o) (push o outcomes))))
    (while (< (length outcomes) 3)
      (setq most (max most mevedel-web--searches))
      (accept-process-output nil 0.02))
    (should (= most 2))
    (should (= mevedel-web--searches 0))
    (should-not mevedel-web--search-queue)))

;;;; YouTube

(ert-deftest mevedel-web:youtube-description-and-captions ()
  (let ((mevedel-web-youtube-watch-url (mevedel-web-fixture-url "/watch?v=%s")))
    (mevedel-web-test-should-succeed
        (mevedel-web-test-run "WebFetch" '(:url "https://www.youtube.com/watch?v=abc123"))
      (should (string-prefix-p "YouTube video abc123: Fixture talk\nChannel: Fixture channel" text))
      (should (string-search "A talk about fixtures.\nSecond line." text))
      (should (string-search "Transcript (English captions):\nhello and welcome\nfixtures & tests\n"
                             text)))
    ;; A caption failure keeps the description.
    (mevedel-web-test-should-succeed
        (mevedel-web-test-run "WebFetch" '(:url "https://www.youtube.com/watch?v=broken"))
      (should (string-search "A talk about fixtures." text))
      (should (string-search "Transcript unavailable: HTTP 500" text))))
  (should (equal (mevedel-web--youtube-id "https://youtu.be/xyz_1?t=3") "xyz_1"))
  (should (equal (mevedel-web--youtube-id "https://m.youtube.com/shorts/Ab-9") "Ab-9"))
  (should-not (mevedel-web--youtube-id "https://example.com/watch?v=abc")))

;;;; Rendering

(ert-deftest mevedel-web:fetch-row-header-and-link-buttons ()
  (let* ((row (mevedel-tool-render-row
               "WebFetch" '(:url "http://a.example/x")
               "Final URL: http://b.example/y\n\nSee [the docs](https://d.example/p) now."
               '(:url "http://a.example/x" :final-url "http://b.example/y" :http-status 200
                      :type "text/html" :size 2048)))
         (body (plist-get row :body)))
    (should (equal (plist-get row :header) "WebFetch a.example · → b.example · 2 KiB · 200 · text/html"))
    (let ((at (string-search "[the docs]" body)))
      (should (equal (get-text-property at 'mevedel-url body) "https://d.example/p"))
      (should (get-text-property at 'button body)))
    (should (equal (get-text-property (string-search "http://b.example/y" body) 'mevedel-url body)
                   "http://b.example/y")))
  ;; A failed fetch has the generic row, its diagnostic as body (issue 42).
  (let ((failed (mevedel-tool-render-row "WebFetch" '(:url "http://a.example/x") "Error: boom" nil)))
    (should (equal (plist-get failed :header) "WebFetch http://a.example/x"))
    (should (equal (plist-get failed :body) "Error: boom"))))

(ert-deftest mevedel-web:search-rows-list-titles-with-hosts ()
  (let* ((row (mevedel-tool-render-row
               "WebSearch" '(:query "q") "1. ..."
               '(:query "q" :results ((:title "Doc" :url "https://docs.example.com/a")
                                      (:title "Other" :url "http://o.example/")))))
         (body (plist-get row :body)))
    (should (equal (plist-get row :header) "WebSearch \"q\" · 2 results"))
    (should (equal (substring-no-properties body) "Doc — docs.example.com\nOther — o.example"))
    (should (equal (get-text-property 0 'mevedel-url body) "https://docs.example.com/a"))))

;;;; Manual

(ert-deftest mevedel-web:manual-is-readable ()
  (require 'mevedel-tool-fs)
  (let ((outcome nil))
    (with-temp-buffer
      (mevedel-pipeline-run-tool-outcome (mevedel-tool-get "Read" "filesystem")
                                         (list :file_path mevedel-web-manual-address)
                                         (lambda (o) (setq outcome o)))
      (mevedel-test-wait-until outcome 20))
    (should (eq (plist-get outcome :status) 'success))
    (should (string-search "# WebFetch and WebSearch" (plist-get outcome :result)))))

;;;; Permissions

(ert-deftest mevedel-web:permission-by-host ()
  (let ((tool (mevedel-tool-get "WebFetch" "web")))
    (with-temp-buffer
      (let ((mevedel-permissions-rules '((allow "WebFetch" "*.example.com")
                                         (deny "WebFetch" "evil.example"))))
        (should (eq (mevedel-permissions-decide-now tool '(:url "https://docs.example.com/x"))
                    'allow))
        (should (eq (mevedel-permissions-decide-now tool '(:url "https://evil.example/"))
                    'deny))
        (should (eq (mevedel-permissions-decide-now tool '(:url "https://badexample.com/"))
                    'ask))))
    ;; The default mode asks per host, and "always" covers that host only.
    (let* ((session (mevedel-web-test-session))
           (mevedel-permissions-rules nil)
           (context (list :tool tool :args '(:url "https://docs.python.org/3/")))
           (card (car (mevedel-permissions-cards context session))))
      (should (eq (mevedel-permissions-decide-call context session) 'ask))
      (should (string-search "it contacts docs.python.org" (plist-get card :why)))
      (should (equal (plist-get card :remember) '((domain . "docs.python.org"))))
      (mevedel-permissions-remember session (plist-get card :remember))
      (should (eq (mevedel-permissions-decide-call context session) 'allow))
      (should (eq (mevedel-permissions-decide-call
                   (list :tool tool :args '(:url "https://pypi.example/")) session)
                  'ask)))))

(provide 'web-test)
;;; web-test.el ends here
