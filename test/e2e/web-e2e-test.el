;;; web-e2e-test.el --- WebSearch then WebFetch in a real session  -*- lexical-binding: t; -*-

;;; Commentary:

;; A real mevedel session whose scripted model searches the web (the
;; fixture's DuckDuckGo-shaped page), fetches the first result from the
;; fixture server and answers citing the page.  Nothing leaves
;; 127.0.0.1.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)
(eval-and-compile
  (add-to-list 'load-path (expand-file-name "test/fixtures/web" mevedel-test-root)))
(require 'mevedel-web-fixture)

(mevedel-e2e-deftest-matrix mevedel-e2e:web-search-then-fetch
    "The model finds a page with WebSearch, reads it with WebFetch and cites it."
    (wire stream)
  (let* ((guide (mevedel-web-fixture-url "/file?name=guide.html&type=text%2Fhtml"))
         (mevedel-web-search-url (mevedel-web-fixture-url "/ddg"))
         (run (mevedel-e2e-run
               :wire wire :stream stream
               :prompt "What is the fixture answer? Look it up."
               :setup (lambda (chat) (setf (mevedel-chat-permission-mode chat) 'full-auto))
               ;; The web tools are specialists: the model calls them through ToolCall.
               :steps `(((tool_calls . [((name . "ToolCall")
                                         (arguments . ((program . "(WebSearch :query \"fixture answer\")"))))]))
                        ((expect . ((results . [((contains . "1. The Fixture Guide")
                                                 (contains . ,guide))])))
                         (tool_calls . [((name . "ToolCall")
                                         (arguments . ((program . ,(format "(WebFetch :url %S)" guide)))))]))
                        ((expect . ((results . [((contains . "# The Fixture Guide")
                                                 (contains . "forty-two"))])))
                         (text . ,(format "The answer is forty-two, according to The Fixture Guide (%s)."
                                          guide))))))
         (log (plist-get run :log))
         (rows (plist-get run :rows)))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length log) 3))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    (should (equal (length rows) 2))
    (should (string-match-p "WebSearch \"fixture answer\" · 3 results" (cdr (nth 0 rows))))
    (should (string-match-p "WebFetch 127\\.0\\.0\\.1 · [0-9]+ B · 200 · text/html" (cdr (nth 1 rows))))
    (should (string-search (format "forty-two, according to The Fixture Guide (%s)." guide)
                           (plist-get run :transcript)))))

(mevedel-e2e-deftest-matrix mevedel-e2e:web-image-reaches-the-model
    "An image WebFetch returns is in the model's next request, in the wire's own shape."
    (wire stream)
  (let* ((png (concat (unibyte-string #x89 ?P ?N ?G ?\r ?\n #x1a ?\n) (make-string 24 0)))
         (url (mevedel-web-fixture-url
               (concat "/bytes?hex=" (mapconcat (lambda (b) (format "%02x" b)) png "")
                       "&type=image%2Fpng")))
         (b64 (base64-encode-string png t))
         (capabilities (get 'scripted-model :capabilities))
         (mimes (get 'scripted-model :mime-types))
         (run (unwind-protect
                  (progn
                    (put 'scripted-model :capabilities '(media tool-use))
                    (put 'scripted-model :mime-types '("image/png"))
                    (mevedel-e2e-run
                     :wire wire :stream stream
                     :prompt "What does the picture show?"
                     :setup (lambda (chat) (setf (mevedel-chat-permission-mode chat) 'full-auto))
                     :steps `(((tool_calls . [((name . "ToolCall")
                                               (arguments . ((program . ,(format "(WebFetch :url %S)" url)))))]))
                              ((expect . ((results . [((contains . "Image image/png, 32 B, attached."))])))
                               (text . "A blank picture.")))))
                (put 'scripted-model :capabilities capabilities)
                (put 'scripted-model :mime-types mimes)))
         (log (plist-get run :log))
         (messages (append (alist-get 'messages (alist-get 'body (nth 1 log))) nil)))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length log) 2))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    (pcase wire
      ('anthropic
       (let* ((result (cl-loop for m in messages
                               thereis (cl-find "tool_result" (append (alist-get 'content m) nil)
                                                :key (lambda (b) (and (listp b) (alist-get 'type b)))
                                                :test #'equal)))
              (image (cl-find "image" (append (alist-get 'content result) nil)
                              :key (lambda (b) (alist-get 'type b)) :test #'equal)))
         (should (equal (alist-get 'data (alist-get 'source image)) b64))
         (should (equal (alist-get 'media_type (alist-get 'source image)) "image/png"))))
      ('openai
       (let* ((tool-at (cl-position "tool" messages :key (lambda (m) (alist-get 'role m))
                                    :test #'equal))
              (after (nth (1+ tool-at) messages))
              (part (cl-find "image_url" (append (alist-get 'content after) nil)
                             :key (lambda (b) (alist-get 'type b)) :test #'equal)))
         (should (equal (alist-get 'role after) "user"))
         (should (equal (alist-get 'url (alist-get 'image_url part))
                        (concat "data:image/png;base64," b64))))))))

;; Through bin/mevedel: a page far over every limit, fetched by a
;; direct ToolCall expression, is the tool's bounded preview with the
;; whole text kept at an artifact:// address the model can search.
(ert-deftest mevedel-e2e:a-five-megabyte-page-through-toolcall-is-a-preview ()
  "ToolCall (WebFetch) of a 5 MB page: a bounded preview and an artifact copy."
  (let* ((url (mevedel-web-fixture-url "/gen?kind=five"))
         (run (mevedel-e2e-headless
               :args '("-p" "fetch the big page" "--permission-mode" "full-auto")
               :steps `(((tool_calls . [((name . "ToolCall")
                                         (arguments . ((program . ,(format "(WebFetch :url %S)" url)))))]))
                        ((tool_calls . [((name . "Grep")
                                         (arguments . ((pattern . "Line 129999 of")
                                                       (path . "artifact://tool-results/")
                                                       (output_mode . "content"))))]))
                        ((text . "done") (times . 3)))))
         (log (plist-get run :log))
         (fetched (car (mapcar (lambda (r) (alist-get 'content r))
                               (alist-get 'results (nth 1 log)))))
         (found (car (mapcar (lambda (r) (alist-get 'content r))
                             (alist-get 'results (nth 2 log)))))
         (raw (alist-get 'raw (nth 1 (plist-get run :requests)))))
    (should (eql (plist-get run :status) 0))
    (should (string-prefix-p "<persisted-output>" fetched))
    (should (string-match-p "Output too large: 5[0-9]\\{6\\} characters" fetched))
    (should (string-match-p "The complete output is saved at artifact://tool-results/" fetched))
    (should-not (string-match-p "value budget" fetched))
    ;; The whole request stays within the pipeline's cap, not megabytes.
    (should (< (length raw) 50000))
    ;; The copy is whole: its last line is there to find.
    (should (string-match-p "Line 129999 of the five megabyte page" found))))

(provide 'web-e2e-test)
;;; web-e2e-test.el ends here
