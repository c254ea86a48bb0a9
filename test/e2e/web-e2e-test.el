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

(provide 'web-e2e-test)
;;; web-e2e-test.el ends here
