;;; batch-test.el --- Unit tests of headless runs  -*- lexical-binding: t; -*-

;;; Commentary:

;; Option parsing and the JSON transcript encoding of bin/mevedel; the
;; end-to-end runs are in e2e/batch-e2e-test.el.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-batch)

(ert-deftest mevedel-batch:parse-options ()
  (let ((options (mevedel-batch--parse-args
                  '("--" "-p" "hi" "--json" "--dir" "/tmp" "--permission-mode" "edits"
                    "--config" "/x.el" "--timeout" "5"))))
    (should (equal (plist-get options :prompt) "hi"))
    (should (plist-get options :json))
    (should (equal (plist-get options :dir) "/tmp"))
    (should (eq (plist-get options :mode) 'edits))
    (should (equal (plist-get options :init) "/x.el"))
    (should (= (plist-get options :timeout) 5)))
  (dolist (bad '(() ("-p") ("-p" "x" "--timeout" "soon") ("-p" "x" "--frobnicate")
                 ("-p" "x" "--permission-mode" "sometimes")))
    (should-error (mevedel-batch--parse-args bad) :type 'mevedel-batch-usage)))

(ert-deftest mevedel-batch:json-keeps-argument-types ()
  (let* ((empty (make-hash-table :test #'equal))
         (json (mevedel-batch-transcript-json
                (list :outcome "done" :answer nil
                      :tool_calls
                      (list (list :id "call_1" :name "Grep"
                                  :args (list :pattern "x" :i :json-false :n t :limit 3
                                              :path :null :globs ["*.el" "*.md"]
                                              :opts (list :deep empty))
                                  :status "success" :result_preview "r"))
                      :messages nil)))
         (parsed (json-parse-string json :object-type 'alist :null-object 'null
                                    :false-object 'false :array-type 'list))
         (args (alist-get 'args (car (alist-get 'tool_calls parsed)))))
    (should (eq (alist-get 'answer parsed) 'null))
    (should (equal (alist-get 'pattern args) "x"))
    (should (eq (alist-get 'i args) 'false))
    (should (eq (alist-get 'n args) t))
    (should (eq (alist-get 'path args) 'null))
    (should (equal (alist-get 'globs args) '("*.el" "*.md")))
    (should (equal (alist-get 'opts args) '((deep))))
    (should (equal (alist-get 'messages parsed) nil))))

(ert-deftest mevedel-batch:json-is-text-not-bytes ()
  "The JSON transcript is decoded text, so printing it writes UTF-8 once."
  (let ((json (mevedel-batch-transcript-json
               (list :outcome "done" :answer "Größe ✓ 日本" :error nil
                     :messages (list (list :role "user" :content (string ?a #x3fffc3 ?b)))
                     :tool_calls nil))))
    (should (multibyte-string-p json))
    (should (string-search "\"answer\":\"Größe ✓ 日本\"" json))
    (should (string-search (string ?a #xfffd ?b) json))))

(ert-deftest mevedel-batch:prompt-bytes-are-read-as-utf-8 ()
  "A prompt Emacs left as bytes (the C locale) is decoded as UTF-8."
  (should (equal (plist-get (mevedel-batch--parse-args
                             (list "-p" (encode-coding-string "Grüße ✓" 'utf-8)))
                            :prompt)
                 "Grüße ✓")))

(provide 'batch-test)
(ert-deftest mevedel-batch:questions-fail-without-compiling-a-trampoline ()
  "A headless run refuses questions, Emacs's native code's among them.
No trampoline for `read-from-minibuffer' is compiled on the way: it
made every run in a fresh HOME wait for a compiler."
  (should (native-comp-available-p))
  (let* ((dir (file-name-as-directory (make-temp-file "mevedel-trampolines" t)))
         (native-comp-enable-subr-trampolines dir)
         (asked (lambda (question)
                  (condition-case err
                      (mevedel-batch--unattended question)
                    (remote-file-error (cadr err))))))
    (unwind-protect
        (progn
          ;; `completing-read-default' is native code in Emacs.
          (should (native-comp-function-p (symbol-function 'completing-read-default)))
          (should (equal (funcall asked (lambda () (completing-read "Host? " '("a" "b"))))
                         "a headless run cannot answer \"Host?\""))
          (should (equal (funcall asked (lambda () (read-from-minibuffer "Name: ")))
                         "a headless run cannot answer \"Name:\""))
          (should (equal (funcall asked (lambda () (yes-or-no-p "Delete it? ")))
                         "a headless run cannot answer \"Delete it?\""))
          (should (equal (funcall asked (lambda () (y-or-n-p "Trust host? ")))
                         "a headless run cannot answer \"Trust host?\""))
          (should (string-match-p "password (\"Password:\")"
                                  (funcall asked (lambda () (read-passwd "Password: ")))))
          (should (equal (funcall asked (lambda () 'answered)) 'answered))
          (should (subr-primitive-p (symbol-function 'read-from-minibuffer)))
          (should-not (directory-files-recursively dir "\\.eln\\'")))
      (delete-directory dir t))))

;;; batch-test.el ends here
