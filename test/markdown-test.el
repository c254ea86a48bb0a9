;;; markdown-test.el --- Tests of the view's rendering of Markdown  -*- lexical-binding: t; -*-

;;; Commentary:

;; Golden faces: the face at given places of rendered Markdown for each
;; construct, code blocks fontified by their modes, links as buttons,
;; tables aligned;
;; then the view: the data keeps the raw Markdown, copying gives the
;; text as read, and a streamed answer (an unclosed fence included) is
;; drawn as the whole answer is.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defun mevedel-markdown-test--render (text)
  "Return TEXT rendered, its code blocks fontified, as a string."
  (with-temp-buffer
    (mevedel-markdown-insert text)
    (mevedel-markdown-fontify-pending (point-min) (point-max))
    (buffer-string)))

(defun mevedel-markdown-test--faces (string word &optional nth)
  "Return the faces, a list, at the NTH (default first) WORD in STRING."
  (let ((pos -1))
    (dotimes (_ (1+ (or nth 0)))
      (setq pos (or (string-search word string (1+ pos))
                    (error "No %S in %S" word string))))
    (ensure-list (get-text-property pos 'face string))))

(defmacro mevedel-markdown-test--should-face (string word face)
  "Assert that WORD in STRING has FACE among its faces."
  `(should (memq ,face (mevedel-markdown-test--faces ,string ,word))))

(ert-deftest mevedel-markdown:each-construct-has-its-face ()
  "Headings, emphasis, code, lists, quotes and rules: markup goes, faces stay."
  (let ((out (mevedel-markdown-test--render
              (concat "# Top\n## Second\n### Third\n\n"
                      "Plain **strong** and *soft* and _under_ and ***both*** and ~~gone~~.\n"
                      "Nested **outer *inner* outer** and `code` and ``a ` tick``.\n"
                      "- first\n  - second\n* third\n3. numbered\n- [ ] todo\n- [x] done\n"
                      "> quoted line\n\n---\n"
                      "snake_case_name stays, 2 * 3 * 4 stays, a_b_c stays.\n"))))
    (should (equal (substring-no-properties out 0 (string-search "\n" out)) "Top"))
    (mevedel-markdown-test--should-face out "Top" 'mevedel-markdown-heading-1)
    (mevedel-markdown-test--should-face out "Second" 'mevedel-markdown-heading-2)
    (mevedel-markdown-test--should-face out "Third" 'mevedel-markdown-heading)
    (mevedel-markdown-test--should-face out "strong" 'bold)
    (should-not (memq 'italic (mevedel-markdown-test--faces out "strong")))
    (mevedel-markdown-test--should-face out "soft" 'italic)
    (mevedel-markdown-test--should-face out "under" 'italic)
    (mevedel-markdown-test--should-face out "both" 'bold)
    (mevedel-markdown-test--should-face out "both" 'italic)
    (mevedel-markdown-test--should-face out "gone" 'mevedel-markdown-strike)
    ;; Nested emphasis: the inner word has both faces, the outer words one.
    (mevedel-markdown-test--should-face out "inner" 'bold)
    (mevedel-markdown-test--should-face out "inner" 'italic)
    (should-not (memq 'italic (mevedel-markdown-test--faces out "outer")))
    (mevedel-markdown-test--should-face out "code" 'mevedel-markdown-code)
    (mevedel-markdown-test--should-face out "a ` tick" 'mevedel-markdown-code)
    (dolist (markup '("**" "~~" "`code`" "# " "- first" "> " "---" "[ ]"))
      (should-not (string-search markup out)))
    (should (string-search "• first" out))
    (should (string-search "  ◦ second" out))
    (should (string-search "• third" out))
    (mevedel-markdown-test--should-face out "•" 'mevedel-markdown-bullet)
    (mevedel-markdown-test--should-face out "3." 'mevedel-markdown-bullet)
    (should (string-search "☐ todo" out))
    (should (string-search "☑ done" out))
    (mevedel-markdown-test--should-face out "quoted line" 'mevedel-markdown-quote)
    (mevedel-markdown-test--should-face out "────" 'mevedel-markdown-rule)
    ;; Underscores and stars inside words or between spaces are text.
    (should (string-search "snake_case_name stays, 2 * 3 * 4 stays, a_b_c stays." out))
    (should-not (get-text-property (string-search "case" out) 'face out))))

(ert-deftest mevedel-markdown:links-and-urls-are-buttons ()
  "An inline link shows its text as a button to its address; bare URLs too."
  (let ((out (mevedel-markdown-test--render
              "See [the **manual**](https://example.org/m \"Title\"), <https://a.example/x> \
and https://b.example/y. Not `https://c.example/z`.\n")))
    (should (equal (substring-no-properties out)
                   "See the manual, https://a.example/x and https://b.example/y. Not https://c.example/z.\n"))
    (with-temp-buffer
      (insert out)
      (let ((link (button-at (1+ (string-search "the" out)))))
        (should link)
        (should (equal (button-get link 'mevedel-markdown-url) "https://example.org/m"))
        (should (eq (button-type link) 'mevedel-markdown-link)))
      ;; The link's text keeps its own emphasis.
      (should (memq 'bold (ensure-list (get-text-property (1+ (string-search "manual" out)) 'face))))
      (should (equal (button-get (button-at (1+ (string-search "https://a" out))) 'mevedel-markdown-url)
                     "https://a.example/x"))
      ;; The sentence's full stop is not the URL's.
      (should (equal (button-get (button-at (1+ (string-search "https://b" out))) 'mevedel-markdown-url)
                     "https://b.example/y"))
      (should-not (button-at (1+ (string-search "https://c" out))))
      (let ((opened nil))
        (cl-letf (((symbol-function 'browse-url) (lambda (url &rest _) (setq opened url))))
          (goto-char (1+ (string-search "the" out)))
          (push-button))
        (should (equal opened "https://example.org/m"))))))

(ert-deftest mevedel-markdown:code-blocks-are-fontified-by-their-mode ()
  "A fenced emacs-lisp block gets emacs-lisp-mode's faces; its fences go."
  (let* ((code "(defun mevedel-test-fn (x)\n  \"Say X.\"\n  (message \"%s\" x))\n")
         (out (mevedel-markdown-test--render
               (concat "Before.\n\n```emacs-lisp\n" code "```\n\nAfter *it*.\n"))))
    (should (equal (substring-no-properties out)
                   (concat "Before.\n\nemacs-lisp copy\n" code "\nAfter it.\n")))
    (mevedel-markdown-test--should-face out "defun" 'font-lock-keyword-face)
    (mevedel-markdown-test--should-face out "mevedel-test-fn" 'font-lock-function-name-face)
    (mevedel-markdown-test--should-face out "\"%s\"" 'font-lock-string-face)
    (mevedel-markdown-test--should-face out "defun" 'mevedel-markdown-code-block)
    (mevedel-markdown-test--should-face out "emacs-lisp" 'mevedel-markdown-code-header)
    ;; Markup inside code is code.
    (let ((out (mevedel-markdown-test--render "```\nx = *not* **this** `one`\n```\n")))
      (should (string-search "x = *not* **this** `one`" out))
      (should-not (memq 'bold (mevedel-markdown-test--faces out "this"))))
    ;; An indented fence's lines lose its indentation; ~~~ fences too.
    (let ((out (mevedel-markdown-test--render "1. step\n   ~~~python\n   def f():\n       return 1\n   ~~~\n")))
      (should (string-search "python copy\ndef f():\n    return 1\n" out))
      (mevedel-markdown-test--should-face out "def" 'font-lock-keyword-face))
    ;; A block not closed runs to the end, fontified.
    (let ((out (mevedel-markdown-test--render "```emacs-lisp\n(defun g ()")))
      (should (equal (substring-no-properties out) "emacs-lisp copy\n(defun g ()"))
      (mevedel-markdown-test--should-face out "defun" 'font-lock-keyword-face))))

(ert-deftest mevedel-markdown:only-major-modes-fontify ()
  "A language names a major mode; a name the model made up runs nothing."
  (should (eq (mevedel-markdown--mode "Emacs-Lisp") 'emacs-lisp-mode))
  (should (eq (mevedel-markdown--mode "python") 'python-mode))
  (should (eq (mevedel-markdown--mode "scheme") 'scheme-mode))
  ;; LANG-mode when it is a major mode for code.
  (should (eq (mevedel-markdown--mode "perl") 'perl-mode))
  (should-not (mevedel-markdown--mode "auto-fill"))
  (should-not (mevedel-markdown--mode "global-auto-revert"))
  (should-not (mevedel-markdown--mode "no-such-language"))
  (should-not (mevedel-markdown--mode ""))
  (let ((auto-fill-function nil))
    (mevedel-markdown-test--render "```auto-fill\ntext\n```\n")
    (should-not auto-fill-function)))

(ert-deftest mevedel-markdown:rendering-can-be-turned-off ()
  "With `mevedel-markdown-enabled' nil the text is shown as written."
  (let ((mevedel-markdown-enabled nil)
        (text "# Title\n**bold** and `code`\n```sh\nls\n```\n"))
    (should (equal (mevedel-markdown-test--render text) text))))

(ert-deftest mevedel-markdown:tables-are-aligned ()
  "A table's columns are aligned as shown, its header bold, its rule drawn."
  (let ((out (mevedel-markdown-test--render
              (concat "| Name | Size | Note |\n|:-----|-----:|:----:|\n"
                      "| **lib.sh** | 12 | `a|b` ok |\n| test.sh | 1234 | x |\n\nAfter.\n"))))
    (should (equal (substring-no-properties out)
                   (concat "│ Name    │ Size │  Note  │\n"
                           "├─────────┼──────┼────────┤\n"
                           "│ lib.sh  │   12 │ a|b ok │\n"
                           "│ test.sh │ 1234 │   x    │\n"
                           "\nAfter.\n")))
    (mevedel-markdown-test--should-face out "Name" 'bold)
    (mevedel-markdown-test--should-face out "lib.sh" 'bold)
    (mevedel-markdown-test--should-face out "a|b" 'mevedel-markdown-code)
    (mevedel-markdown-test--should-face out "├" 'mevedel-markdown-rule)
    ;; Rows without a delimiter row are no table.
    (should (string-search "| a | b |"
                           (mevedel-markdown-test--render "| a | b |\n| c | d |\n")))
    ;; A row that is no header, then a table.
    (should (string-prefix-p "| x\n│ a │\n├───┤\n"
                             (substring-no-properties
                              (mevedel-markdown-test--render "| x\n| a |\n|---|\n"))))))

;; The inline pass puts faces on the text as written and deletes the
;; markup afterwards: what a construct's checks see next to it is the
;; markup, not the text the deletion brings there.
(ert-deftest mevedel-markdown:markup-next-to-markup ()
  "Constructs side by side, nested or after a table render as written apart."
  (let ((out (mevedel-markdown-test--render
              "**a**_b_ x_*y*_z `c`https://e.example/p [l **m**](https://l.example) end\n")))
    (should (equal (substring-no-properties out) "ab x_y_z chttps://e.example/p l m end\n"))
    (mevedel-markdown-test--should-face out "a" 'bold)
    (mevedel-markdown-test--should-face out "b" 'italic)
    (should-not (memq 'bold (mevedel-markdown-test--faces out "b")))
    ;; Underscores inside a word stay; the stars between them are emphasis.
    (mevedel-markdown-test--should-face out "y" 'italic)
    (mevedel-markdown-test--should-face out "c" 'mevedel-markdown-code)
    (with-temp-buffer
      (insert out)
      ;; Before the URL is the code span's closing backtick, not its c.
      (should (equal (button-get (button-at (1+ (string-search "https://e" out)))
                                 'mevedel-markdown-url)
                     "https://e.example/p"))
      (let ((link (button-at (1+ (string-search "l m" out)))))
        (should (equal (button-get link 'mevedel-markdown-url) "https://l.example"))
        ;; One button over the link's text, its bold word included.
        (should (= (button-end link) (+ 4 (string-search "l m" out)))))
      (mevedel-markdown-test--should-face out "m end" 'bold)))
  ;; A table that ends where a code block starts keeps its rows.
  (let ((out (mevedel-markdown-test--render "| a | b |\n|---|---|\n| 1 | 2 |\n```sh\nls\n```\n")))
    (should (equal (substring-no-properties out)
                   "│ a │ b │\n├───┼───┤\n│ 1 │ 2 │\nsh copy\nls\n"))))

;;;; In the view

(defmacro mevedel-markdown-test--with-view (var &rest body)
  "Bind VAR to a fresh view of a temporary workspace around BODY."
  (declare (indent 1))
  `(let* ((root (file-name-as-directory (make-temp-file "mevedel-md-" t)))
          (mevedel-save-sessions nil)
          (,var (mevedel root))
          (chat (mevedel-view-chat ,var)))
     (unwind-protect
         (progn ,@body)
       (kill-buffer ,var)
       (kill-buffer (mevedel-chat-data-buffer chat))
       (delete-directory root t))))

(defun mevedel-markdown-test--stream (chat chunks)
  "Stream CHUNKS of a response into CHAT, as gptel does."
  (dolist (chunk chunks)
    (with-current-buffer (mevedel-chat-data-buffer chat)
      (goto-char (point-max))
      (insert (propertize chunk 'gptel 'response)))
    (mevedel-chat-notify chat 'text chunk)))

(defun mevedel-markdown-test--transcript (view)
  "Return VIEW's transcript text, its code fontified first."
  (with-current-buffer view
    (while mevedel-view--code-queue
      (mevedel-view--fontify-code view))
    (buffer-substring mevedel-view--tail mevedel-view--transcript-end)))

(defconst mevedel-markdown-test--answer
  (concat "Here is the **fix** for `lisp/a.el`:\n\n"
          "```emacs-lisp\n(defun a-fn ()\n  \"Do it.\"\n  (message \"done\"))\n```\n\n"
          "- it *works*\n- see [docs](https://example.org)\n")
  "A response with prose, a code block, a list and a link.")

(ert-deftest mevedel-markdown:the-view-renders-the-data-keeps-markdown ()
  "The view shows the answer rendered; the data buffer keeps it as written."
  (mevedel-markdown-test--with-view view
    (make-directory (expand-file-name "lisp" root))
    (with-temp-file (expand-file-name "lisp/a.el" root) (insert ";; a\n"))
    (mevedel-test-begin-turn chat "Fix it")
    (mevedel-markdown-test--stream chat (list (concat "\n" mevedel-markdown-test--answer)))
    (mevedel-chat-notify chat 'turn-end)
    (with-current-buffer (mevedel-chat-data-buffer chat)
      (should (string-search mevedel-markdown-test--answer (buffer-string))))
    (let ((shown (mevedel-markdown-test--transcript view)))
      (should (string-search "\nHere is the fix for lisp/a.el:\n\nemacs-lisp copy\n(defun a-fn ()"
                             (substring-no-properties shown)))
      (mevedel-markdown-test--should-face shown "fix" 'bold)
      (mevedel-markdown-test--should-face shown "defun" 'font-lock-keyword-face)
      (mevedel-markdown-test--should-face shown "works" 'italic))
    (with-current-buffer view
      ;; A file name in inline code is still a place to visit.
      (goto-char (point-min))
      (search-forward "for lisp/a")
      (should (equal (car (get-text-property (point) 'mevedel-location)) "lisp/a.el"))
      (should (memq 'mevedel-markdown-code (ensure-list (get-text-property (point) 'face))))
      ;; The link is a button in the read-only transcript.
      (search-forward "see doc")
      (should (equal (button-get (button-at (point)) 'mevedel-markdown-url) "https://example.org"))
      (should (get-text-property (point) 'read-only)))))

(ert-deftest mevedel-markdown:copying-a-block-gives-its-source ()
  "`kill-ring-save' over a rendered block, or its copy button, gives the source."
  (mevedel-markdown-test--with-view view
    (mevedel-test-begin-turn chat "Fix it")
    (mevedel-markdown-test--stream chat (list (concat "\n" mevedel-markdown-test--answer)))
    (mevedel-chat-notify chat 'turn-end)
    (mevedel-markdown-test--transcript view)
    (let ((source "(defun a-fn ()\n  \"Do it.\"\n  (message \"done\"))\n")
          (kill-ring nil))
      (with-current-buffer view
        (goto-char (point-min))
        (let* ((start (text-property-not-all (point-min) (point-max) 'mevedel-markdown-block nil))
               (end (next-single-property-change start 'mevedel-markdown-block)))
          (kill-ring-save start end)
          (should (equal-including-properties (car kill-ring) source))
          ;; Copying across prose gives plain text too: no faces, buttons, keymaps.
          (kill-ring-save (point-min) mevedel-view--transcript-end)
          (should-not (text-properties-at 0 (car kill-ring)))
          (should-not (next-property-change 0 (car kill-ring)))
          (should-not (string-search "```" (car kill-ring)))
          (kill-new "")
          ;; The header's copy button.
          (goto-char (point-min))
          (search-forward "emacs-lisp ")
          (push-button)
          (should (equal-including-properties (car kill-ring) source)))))))

(ert-deftest mevedel-markdown:a-streamed-table-is-aligned-as-a-whole ()
  "A streamed table's rows wait for its end; the view then aligns it as a whole."
  (mevedel-markdown-test--with-view view
    (let ((answer "Sizes:\n\n| File | Lines |\n|---|---:|\n| a.el | 5 |\n| longer-name.el | 1200 |\n\nDone.\n"))
      (mevedel-test-begin-turn chat "Count")
      (mevedel-markdown-test--stream
       chat (cl-loop for i from 0 below (length answer) by 4
                     collect (substring answer i (min (length answer) (+ i 4)))))
      (let ((streamed (mevedel-markdown-test--transcript view)))
        (should (string-search (concat "│ File           │ Lines │\n"
                                       "├────────────────┼───────┤\n"
                                       "│ a.el           │     5 │\n"
                                       "│ longer-name.el │  1200 │\n")
                               streamed))
        (mevedel-chat-notify chat 'turn-end)
        (should (equal (string-trim (substring-no-properties
                                     streamed (string-search "Sizes" streamed)))
                       (let ((drawn (mevedel-markdown-test--transcript view)))
                         (string-trim (substring-no-properties
                                       drawn (string-search "Sizes" drawn))))))))))

(ert-deftest mevedel-markdown:a-streamed-answer-is-drawn-as-the-whole ()
  "Streamed in small chunks, an open fence included, the answer reads as drawn at once."
  (mevedel-markdown-test--with-view view
    (let ((answer (concat "# Roadmap\n\nFirst **bold\nline** then `co" "de`.\n\n"
                           "```emacs-lisp\n(defun streamed ()\n  (list 1 2))\n```\n"
                           "Done *now*.")))
      (mevedel-test-begin-turn chat "Plan it")
      ;; Up to an open fence: its code shows as code, no fence characters.
      (let ((open (string-search "(list" answer)))
        (mevedel-markdown-test--stream chat (list (concat "\n" (substring answer 0 open))))
        (let ((shown (mevedel-markdown-test--transcript view)))
          (should (string-search "emacs-lisp …\n(defun streamed ()\n" shown))
          (should-not (string-search "```" shown))
          (mevedel-markdown-test--should-face shown "(defun streamed" 'mevedel-markdown-code-block)
          (mevedel-markdown-test--should-face shown "Roadmap" 'mevedel-markdown-heading-1)
          (mevedel-markdown-test--should-face shown "code" 'mevedel-markdown-code))
        (mevedel-markdown-test--stream
         chat (cl-loop for i from open below (length answer) by 3
                       collect (substring answer i (min (length answer) (+ i 3))))))
      (let ((streamed (mevedel-markdown-test--transcript view)))
        (mevedel-markdown-test--should-face streamed "defun" 'font-lock-keyword-face)
        (mevedel-markdown-test--should-face streamed "now" 'italic)
        ;; Emphasis does not span lines: "**bold" and "line**" stay as written.
        (should (string-search "First **bold\nline** then code." streamed))
        (mevedel-chat-notify chat 'turn-end)
        (let ((drawn (mevedel-markdown-test--transcript view)))
          (should (equal (string-trim (substring-no-properties
                                       streamed (string-search "Roadmap" streamed)))
                         (string-trim (substring-no-properties
                                       drawn (string-search "Roadmap" drawn)))))
          (should (equal (mevedel-markdown-test--faces streamed "streamed")
                         (mevedel-markdown-test--faces drawn "streamed"))))))))

(provide 'markdown-test)
;;; markdown-test.el ends here
