;;; tool-code-test.el --- Tests of Imenu, Treesitter and Xref  -*- lexical-binding: t; -*-

;;; Commentary:

;; The code navigation tools through the pipeline, on files visited for
;; the call and on the user's buffers: Imenu's nesting, category paths,
;; special entries and narrowing; Treesitter's exact positions (display
;; columns, errors for what the file lacks) and truncation, with the
;; JSON grammar scripts/deps.sh builds (a test fails, never skips, when
;; it is missing); Xref definitions and references and unsupported
;; backends, without registering a project.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-pipeline)
(require 'mevedel-tool-code)

(defmacro tool-code-test--with-dir (var &rest body)
  "Run BODY with VAR a fresh directory, `default-directory' there."
  (declare (indent 1))
  `(let* ((,var (file-name-as-directory (file-truename (make-temp-file "tool-code" t))))
          (default-directory ,var))
     (unwind-protect (progn ,@body)
       (dolist (buffer (buffer-list))
         (when (and (buffer-file-name buffer)
                    (file-in-directory-p (buffer-file-name buffer) ,var))
           (with-current-buffer buffer (set-buffer-modified-p nil))
           (kill-buffer buffer)))
       (delete-directory ,var t))))

(defun tool-code-test--write (file text)
  "Write TEXT to FILE and return FILE's absolute name."
  (let ((file (expand-file-name file)))
    (make-directory (file-name-directory file) t)
    (with-temp-file file (insert text))
    file))

(defun tool-code-test--run (name args)
  "Run tool NAME with ARGS through the pipeline; return the outcome."
  (let ((box (list nil)))
    (mevedel-pipeline-run-tool-outcome (mevedel-tool-get name "code") args
                                       (lambda (o) (setcar box (list o))))
    (mevedel-test-wait-until (car box) 20)
    (caar box)))

(defun tool-code-test--ok (name args)
  "Return the result of a successful call of NAME with ARGS."
  (let ((outcome (tool-code-test--run name args)))
    (should (equal (list (plist-get outcome :status) (plist-get outcome :result))
                   (list 'success (plist-get outcome :result))))
    (plist-get outcome :result)))

(defun tool-code-test--error (name args)
  "Return the result of a failed call of NAME with ARGS."
  (let ((outcome (tool-code-test--run name args)))
    (should (eq (plist-get outcome :status) 'error))
    (plist-get outcome :result)))

(defun tool-code-test--visiting (file)
  "Return the buffer visiting FILE, or nil."
  (find-buffer-visiting file))

;;;; Imenu

(defconst tool-code-test--python
  "class Outer:
    def method(self):
        pass

    class Inner:
        def deep(self):
            pass


def top():
    pass
"
  "A Python file whose Imenu index nests three levels.")

(ert-deftest mevedel-tool-code:imenu-lists-every-level-with-its-path ()
  (tool-code-test--with-dir dir
    (let* ((file (tool-code-test--write "nest.py" tool-code-test--python))
           (windows (window-list))
           (text (tool-code-test--ok "Imenu" (list :file_path file))))
      (should (equal text "nest.py: 5 Imenu entries (python-mode)
1: Outer (class) > *class definition*
2: Outer (class) > method (def)
5: Outer (class) > Inner (class) > *class definition*
6: Outer (class) > Inner (class) > deep (def)
10: top (def)"))
      ;; The file was visited for the call only, and no window changed.
      (should-not (tool-code-test--visiting file))
      (should (equal windows (window-list))))))

(ert-deftest mevedel-tool-code:imenu-skips-only-negative-special-entries ()
  (tool-code-test--with-dir dir
    (let* ((file (tool-code-test--write "special.txt" "one\ntwo\nthree\n"))
           (buffer (find-file-noselect file)))
      (with-current-buffer buffer
        (setq-local imenu-create-index-function
                    (lambda ()
                      (list (cons "*star*" 5)
                            (list "Group" (cons "plain" 9)
                                  ;; A special item: (NAME POSITION FUNCTION).
                                  (list "special" 1 #'ignore))
                            (cons "*hidden*" -5)))))
      (should (equal (tool-code-test--ok "Imenu" (list :file_path file))
                     "special.txt: 3 Imenu entries (text-mode)
2: *star*
3: Group > plain
1: Group > special")))))

(ert-deftest mevedel-tool-code:imenu-reads-the-users-narrowed-unsaved-buffer ()
  (tool-code-test--with-dir dir
    (let* ((file (tool-code-test--write "nest.py" tool-code-test--python))
           (buffer (find-file-noselect file)))
      (with-current-buffer buffer
        (goto-char (point-max))
        (insert "\ndef unsaved():\n    pass\n")
        (goto-char (point-min))
        (re-search-forward "^def top")
        (narrow-to-region (line-beginning-position) (point-max))
        (goto-char (point-max))
        (let ((restriction (list (point-min) (point-max) (point))))
          (let ((text (tool-code-test--ok "Imenu" (list :file_path file))))
            ;; Entries outside the narrowing, whole-buffer lines, and the
            ;; text nobody saved.
            (should (string-match-p "^1: Outer (class) > \\*class definition\\*$" text))
            (should (string-match-p "^10: top (def)$" text))
            (should (string-match-p "^13: unsaved (def)$" text)))
          (should (equal restriction (list (point-min) (point-max) (point))))
          (should (buffer-modified-p)))))))

(ert-deftest mevedel-tool-code:imenu-unavailable-is-an-error ()
  (tool-code-test--with-dir dir
    (let ((file (tool-code-test--write "plain.txt" "nothing here\n")))
      (should (string-match-p "Imenu is not available in plain.txt (text-mode)"
                              (tool-code-test--error "Imenu" (list :file_path file))))
      (should (string-match-p "No such file"
                              (tool-code-test--error "Imenu" (list :file_path "missing.py")))))))

;;;; Treesitter

(defconst tool-code-test--json "{\n\t\"a\": [1, 2],\n\t\"b\": {\"c\": true}\n}\n"
  "A JSON file indented with tabs.")

(defun tool-code-test--require-json ()
  "Fail unless the JSON grammar is installed (make deps builds it)."
  (should (treesit-available-p))
  (unless (treesit-language-available-p 'json)
    (ert-fail "No tree-sitter JSON grammar: run `make deps' (it builds .deps/tree-sitter/)")))

(ert-deftest mevedel-tool-code:treesit-node-at-a-display-column ()
  (tool-code-test--require-json)
  (tool-code-test--with-dir dir
    (let ((file (tool-code-test--write "data.json" tool-code-test--json)))
      ;; `[' is the 7th character of line 2 but at display column 13:
      ;; the tab before it is 8 columns wide.
      (let ((text (tool-code-test--ok "Treesitter" (list :file_path file :line 2 :column 13))))
        (should (string-match-p "\\`Node: value: array 2:13-2:19\n" text))
        (should (string-match-p "^Text: \"\\[1, 2\\]\"$" text))
        (should (string-match-p "^Ancestors (outermost first):\n  document 1:0-5:0\n  object 1:0-4:1\n  pair 2:8-2:19$"
                                text))
        (should (string-match-p "^Children:\n  number 2:14-2:15 \"1\"\n  number 2:17-2:18 \"2\"\\'" text)))
      ;; A column inside the tab names the tab, which the object holds.
      (should (string-match-p "\\`Node: object 1:0-4:1"
                              (tool-code-test--ok "Treesitter" (list :file_path file :line 2
                                                                     :column 3))))
      ;; Without a column: the line's first non-blank.
      (should (string-match-p "\\`Node: key: string 3:8-3:11"
                              (tool-code-test--ok "Treesitter" (list :file_path file :line 3))))
      (should-not (tool-code-test--visiting file)))))

(ert-deftest mevedel-tool-code:treesit-positions-the-file-lacks-are-errors ()
  (tool-code-test--require-json)
  (tool-code-test--with-dir dir
    (let ((file (tool-code-test--write "data.json" tool-code-test--json)))
      (should (string-match-p "Line 5 does not exist: the file has 4 lines"
                              (tool-code-test--error "Treesitter" (list :file_path file :line 5))))
      (should (string-match-p "Line 0 does not exist"
                              (tool-code-test--error "Treesitter" (list :file_path file :line 0))))
      (should (string-match-p "Column 21 does not exist: line 2 has display columns 0-20"
                              (tool-code-test--error "Treesitter" (list :file_path file :line 2
                                                                        :column 21))))
      ;; The end of the line is a column the line has.
      (tool-code-test--ok "Treesitter" (list :file_path file :line 2 :column 20))
      (should (string-match-p "A column needs a line"
                              (tool-code-test--error "Treesitter" (list :file_path file
                                                                        :column 2)))))))

(ert-deftest mevedel-tool-code:treesit-whole-tree-and-truncation ()
  (tool-code-test--require-json)
  (tool-code-test--with-dir dir
    (let ((file (tool-code-test--write "data.json" tool-code-test--json)))
      (should (equal (tool-code-test--ok "Treesitter" (list :file_path file))
                     "data.json (json):
document 1:0-5:0
  object 1:0-4:1
    pair 2:8-2:19
      key: string 2:8-2:11
        string_content 2:9-2:10 \"a\"
      value: array 2:13-2:19
        number 2:14-2:15 \"1\"
        number 2:17-2:18 \"2\"
    pair 3:8-3:24
      key: string 3:8-3:11
        string_content 3:9-3:10 \"b\"
      value: object 3:13-3:24
        pair 3:14-3:23
          key: string 3:14-3:17
            string_content 3:15-3:16 \"c\"
          value: true 3:19-3:23 \"true\""))
      (let* ((mevedel-tool-code-treesit-node-limit 4)
             (text (tool-code-test--ok "Treesitter" (list :file_path file))))
        (should (= 6 (length (split-string text "\n"))))
        (should (string-suffix-p "[Tree truncated after 4 nodes (mevedel-tool-code-treesit-node-limit); ask for a line and column to see one part]"
                                 text))))))

(ert-deftest mevedel-tool-code:treesit-widens-the-users-buffer ()
  (tool-code-test--require-json)
  (tool-code-test--with-dir dir
    (let* ((file (tool-code-test--write "data.json" tool-code-test--json))
           (buffer (find-file-noselect file)))
      (with-current-buffer buffer
        (json-ts-mode)
        (goto-char (point-min))
        (forward-line 2)
        (narrow-to-region (point) (line-end-position))
        ;; Line 2 lies outside the narrowing: still found, by its file line.
        (should (string-match-p "\\`Node: value: array 2:13-2:19"
                                (tool-code-test--ok "Treesitter" (list :file_path file :line 2
                                                                       :column 13))))
        (should (= (point-min) (save-excursion (goto-char (point-min)) (pos-bol))))
        (should (equal (buffer-substring (point-min) (point-max)) "\t\"b\": {\"c\": true}"))
        ;; The buffer's own parser, and no temporary one left behind.
        (should (= 1 (length (treesit-parser-list))))
        (widen)))
    ;; A file visited in a mode without a parser gets a temporary one.
    (let* ((file (tool-code-test--write "other.txt" "[true]\n"))
           (buffer (find-file-noselect file)))
      (with-current-buffer buffer
        (should-not (treesit-parser-list))
        (should (string-match-p "^  array 1:0-1:6"
                                (tool-code-test--ok "Treesitter" (list :file_path file
                                                                       :language "json"))))
        (should-not (treesit-parser-list))))
    (should (string-match-p "No tree-sitter grammar for nonesuch"
                            (tool-code-test--error "Treesitter"
                                                   (list :file_path (expand-file-name "other.txt" dir)
                                                         :language "nonesuch"))))))

;;;; Xref

(ert-deftest mevedel-tool-code:xref-elisp-definitions-and-project-references ()
  (tool-code-test--with-dir dir
    (let* ((project-list-file (expand-file-name "projects-list" dir))
           (root (expand-file-name "proj/" dir))
           (_ (make-directory root))
           (default-directory root)
           (_ (should (zerop (call-process "git" nil nil nil "init" "-q" root))))
           (a (tool-code-test--write "proj/sub/a.el"
                                     ";;; a.el --- test  -*- lexical-binding: t; -*-\n(defun tool-code-test-target ()\n  \"Answer.\"\n  42)\n"))
           (b (tool-code-test--write "proj/other/b.el"
                                     "(defun tool-code-test-user ()\n  (+ 1 (tool-code-test-target)))\n"))
           (outside (tool-code-test--write (expand-file-name "c.el" dir)
                                           "(tool-code-test-target)\n")))
      (ignore b outside)
      (load a nil t)
      (should (equal (tool-code-test--ok "Xref" (list :file_path a :identifier "tool-code-test-target"))
                     "1 definition of tool-code-test-target (elisp backend):
proj/sub/a.el:2:0: (defun tool-code-test-target)"))
      ;; References: the whole project (other/ too), nothing outside it.
      (let ((text (tool-code-test--ok "Xref" (list :file_path a :kind "references"
                                                   :identifier "tool-code-test-target"))))
        (should (string-match-p "\\`2 references of tool-code-test-target (elisp backend):\n" text))
        (should (string-match-p "^proj/other/b\\.el:2:8: (\\+ 1 (tool-code-test-target)))$" text))
        (should (string-match-p "^proj/sub/a\\.el:2:7: (defun tool-code-test-target ()$" text))
        (should-not (string-match-p "c\\.el" text)))
      ;; A reference only in the text of a modified buffer counts.
      (let ((buffer (find-file-noselect b)))
        (with-current-buffer buffer
          (goto-char (point-max))
          (insert "(defun tool-code-test-unsaved () (tool-code-test-target))\n"))
        (should (string-match-p "^proj/other/b\\.el:3:34: (defun tool-code-test-unsaved"
                                (tool-code-test--ok "Xref" (list :file_path a :kind "references"
                                                                 :identifier "tool-code-test-target"))))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer))
      ;; The identifier at a line and column.
      (should (string-match-p "^proj/sub/a\\.el:2:0: (defun tool-code-test-target)$"
                              (tool-code-test--ok "Xref" (list :file_path b :line 2 :column 10))))
      ;; No project was registered.
      (should-not (file-exists-p project-list-file))
      (should-not (tool-code-test--visiting a))
      (should-not (tool-code-test--visiting b))
      (fmakunbound 'tool-code-test-target))))

(ert-deftest mevedel-tool-code:xref-references-without-a-project-stay-in-the-directory ()
  (tool-code-test--with-dir dir
    (let ((a (tool-code-test--write "here/a.el" "(defun tool-code-test-lonely () 1)\n(tool-code-test-lonely)\n")))
      (tool-code-test--write "there/b.el" "(tool-code-test-lonely)\n")
      (let ((text (tool-code-test--ok "Xref" (list :file_path a :kind "references"
                                                   :identifier "tool-code-test-lonely"))))
        (should (string-match-p "\\`2 references" text))
        (should-not (string-match-p "b\\.el" text)))
      ;; A cancelled search settles the call once.
      (let* ((outcomes nil)
             (cancel (mevedel-pipeline-run-tool-outcome
                      (mevedel-tool-get "Xref" "code")
                      (list :file_path a :kind "references" :identifier "tool-code-test-lonely")
                      (lambda (o) (push o outcomes)))))
        (funcall cancel)
        (mevedel-test-wait-until outcomes 5)
        (sleep-for 0.3)
        (should (= 1 (length outcomes)))
        (should (eq (plist-get (car outcomes) :status) 'error))))))

(ert-deftest mevedel-tool-code:xref-unsupported-backends-say-so ()
  (tool-code-test--with-dir dir
    (let ((file (tool-code-test--write "notes.txt" "alpha beta\n"))
          (tags-file-name nil)
          (tags-table-list nil))
      (should (string-match-p "Unsupported: notes.txt (text-mode) has only the etags Xref backend"
                              (tool-code-test--error "Xref" (list :file_path file
                                                                  :identifier "alpha"))))
      (let ((xref-backend-functions nil))
        (should (string-match-p "Unsupported: notes.txt (text-mode) has no Xref backend"
                                (tool-code-test--error "Xref" (list :file_path file
                                                                    :identifier "alpha")))))
      (should (string-match-p "Give an identifier"
                              (tool-code-test--error "Xref" (list :file_path file)))))))

(ert-deftest mevedel-tool-code:renders-rows ()
  (should (equal (plist-get (mevedel-tool-render-row "Treesitter" '(:file_path "a.json" :line 2 :column 3)
                                                     "x" nil)
                            :header)
                 "Treesitter a.json:2:3"))
  (should (equal (plist-get (mevedel-tool-render-row "Xref" '(:file_path "a.el" :kind "references"
                                                                         :identifier "foo")
                                                     "x" nil)
                            :header)
                 "Xref a.el references foo"))
  (should (equal (plist-get (mevedel-tool-render-row "Imenu" '(:file_path "a.el") "x" nil) :header)
                 "Imenu a.el")))

(provide 'tool-code-test)
;;; tool-code-test.el ends here
