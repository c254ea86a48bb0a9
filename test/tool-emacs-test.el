;;; tool-emacs-test.el --- Tests of EmacsDescribe, EmacsFind and EmacsManual  -*- lexical-binding: t; -*-

;;; Commentary:

;; The introspection tools through the pipeline: kinds inferred, an
;; unknown name answered without interning it, source without a buffer
;; left behind, C source needing its directory, value reads asking,
;; Orderless-style matching, and Info reads that leave the user's
;; *info* buffer and windows alone (test/fixtures/emacs/mevtest.info is
;; a small hand-written manual).

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-tool-emacs)

(defvar tool-emacs-test--fixtures
  (expand-file-name "fixtures/emacs/"
                    (file-name-directory (or load-file-name buffer-file-name)))
  "The directory of the hand-written Info manual.")

(defun tool-emacs-test-frobnicate (widget)
  "Frobnicate WIDGET and return it.
A test function that the fixture manual documents."
  widget)

(defvar tool-emacs-test-secret "hunter2"
  "A variable whose value only a permitted read shows.")

(defun tool-emacs-test--run (name args &optional session)
  "Run tool NAME with ARGS through the pipeline in SESSION; return the outcome."
  (let ((box (list nil)))
    (mevedel-pipeline-run-tool-outcome (mevedel-tool-get name "emacs") args
                                       (lambda (o) (setcar box (list o)))
                                       :session session)
    (mevedel-test-wait-until (car box) 20)
    (caar box)))

(defun tool-emacs-test--ok (name args &optional session)
  "Return the result of a successful call of NAME with ARGS in SESSION."
  (let ((outcome (tool-emacs-test--run name args session)))
    (should (eq (plist-get outcome :status) 'success))
    (plist-get outcome :result)))

(defun tool-emacs-test--error (name args &optional session)
  "Return the result of a failed call of NAME with ARGS in SESSION."
  (let ((outcome (tool-emacs-test--run name args session)))
    (should (eq (plist-get outcome :status) 'error))
    (plist-get outcome :result)))

(defmacro tool-emacs-test--with-manual (&rest body)
  "Run BODY with the fixture manual installed and indexed for Emacs Lisp."
  (declare (indent 0))
  `(progn
     (info-initialize)
     (let ((Info-directory-list (cons tool-emacs-test--fixtures Info-directory-list))
           (info-lookup-alist (copy-tree info-lookup-alist))
           (info-lookup-cache nil))
       (info-lookup-add-help :topic 'symbol :mode 'emacs-lisp-mode
                             :regexp "[^][()`'‘’,\" \t\n]+"
                             :doc-spec '(("(mevtest)Index" nil "^ -+ .*: " "\\( \\|$\\)")))
       ,@body)))

;;;; EmacsDescribe

(ert-deftest mevedel-tool-emacs:describe-infers-the-kind ()
  (let ((doc (tool-emacs-test--ok "EmacsDescribe" '(:name "tool-emacs-test-frobnicate"))))
    (should (string-match-p "\\`tool-emacs-test-frobnicate is a function" doc))
    (should (string-match-p "(tool-emacs-test-frobnicate WIDGET)" doc))
    (should (string-match-p "Frobnicate WIDGET and return it" doc)))
  (let ((doc (tool-emacs-test--ok "EmacsDescribe" '(:name "tool-emacs-test-secret"))))
    (should (string-match-p "is a variable" doc))
    (should (string-match-p "only a permitted read" doc))
    ;; Documentation never shows the value.
    (should-not (string-match-p "hunter2" doc)))
  (should (string-match-p "is a command"
                          (tool-emacs-test--ok "EmacsDescribe" '(:name "forward-line"))))
  ;; A name that is both: a function unless kind says otherwise.
  (should (string-match-p "auto-fill-function is also a variable: ask with kind variable"
                          (tool-emacs-test--ok "EmacsDescribe" '(:name "auto-fill-function"))))
  (should (string-match-p "is a variable"
                          (tool-emacs-test--ok "EmacsDescribe"
                                               '(:name "auto-fill-function" :kind "variable"))))
  ;; A library only for source or location.
  (let ((location (tool-emacs-test--ok "EmacsDescribe" '(:name "mevedel-tool-emacs"
                                                          :aspect "location"))))
    (should (string-match-p "lisp/mevedel-tool-emacs\\.el\nLoaded: yes\\'" location)))
  (should (string-match-p "Library subr-x"
                          (tool-emacs-test--ok "EmacsDescribe" '(:name "subr-x" :kind "library")))))

(ert-deftest mevedel-tool-emacs:unknown-names-are-not-interned ()
  (let ((name "tool-emacs-test-never-defined-zq"))
    (should-not (intern-soft name))
    (dolist (aspect '(nil "source" "location" "info"))
      (should (string-match-p "is not defined"
                              (tool-emacs-test--error
                               "EmacsDescribe" (append (list :name name)
                                                       (and aspect (list :aspect aspect)))))))
    (should (string-match-p "not defined as a function"
                            (tool-emacs-test--error "EmacsDescribe"
                                                    (list :name name :kind "function"))))
    (tool-emacs-test--ok "EmacsFind" (list :pattern name))
    (should-not (intern-soft name))))

(ert-deftest mevedel-tool-emacs:source-leaves-no-buffer-behind ()
  (let* ((before (buffer-list))
         (source (tool-emacs-test--ok "EmacsDescribe" '(:name "mevedel-tool-emacs-describe"
                                                        :aspect "source"))))
    (should (string-match-p "\\`.*lisp/mevedel-tool-emacs\\.el:[0-9]+\n\n(defun mevedel-tool-emacs-describe (args)"
                            source))
    (should (string-match-p "(mevedel-tool-emacs--value kind object))))))\n\\'" source))
    (should (equal (buffer-list) before)))
  ;; A variable's source, and its location.
  (should (string-match-p "(defcustom mevedel-tool-emacs-find-limit 200"
                          (tool-emacs-test--ok "EmacsDescribe" '(:name "mevedel-tool-emacs-find-limit"
                                                                 :aspect "source"))))
  (should (string-match-p "mevedel-tool-emacs\\.el:[0-9]+\\'"
                          (tool-emacs-test--ok "EmacsDescribe" '(:name "mevedel-tool-emacs-find-limit"
                                                                 :aspect "location")))))

(ert-deftest mevedel-tool-emacs:c-source-needs-its-directory ()
  (let ((find-function-C-source-directory nil))
    (should (string-match-p "defined in C .*find-function-C-source-directory.*which is unset"
                            (tool-emacs-test--error "EmacsDescribe" '(:name "car" :aspect "source")))))
  (let ((find-function-C-source-directory "/nonexistent/emacs/src"))
    (should (string-match-p "which is missing"
                            (tool-emacs-test--error "EmacsDescribe" '(:name "car" :aspect "source"))))))

(ert-deftest mevedel-tool-emacs:value-reads-always-ask ()
  (mevedel-core-ensure)
  (let* ((workspace (make-temp-file "tool-emacs-ws" t))
         (session (mevedel-session-create :workspace workspace)))
    (unwind-protect
        (progn
          (dolist (mode '(ask edits))
            (setf (mevedel-session-permission-mode session) mode)
            ;; Documentation is read-only and runs; a value read asks, and
            ;; nobody can answer here.
            (tool-emacs-test--ok "EmacsDescribe" '(:name "tool-emacs-test-secret") session)
            (let ((refused (tool-emacs-test--error "EmacsDescribe"
                                                   '(:name "tool-emacs-test-secret" :aspect "value")
                                                   session)))
              (should (string-match-p "needs approval" refused))
              (should-not (string-match-p "hunter2" refused))))
          (setf (mevedel-session-permission-mode session) 'full-auto)
          (should (equal (tool-emacs-test--ok "EmacsDescribe"
                                              '(:name "tool-emacs-test-secret" :aspect "value")
                                              session)
                         "tool-emacs-test-secret's global value:\n\"hunter2\""))
          (should (string-match-p "Only a variable"
                                  (tool-emacs-test--error "EmacsDescribe"
                                                          '(:name "car" :aspect "value") session))))
      (mevedel-session-close session)
      (delete-directory workspace t))))

(ert-deftest mevedel-tool-emacs:describe-reads-the-info-section ()
  (tool-emacs-test--with-manual
    (let ((text (tool-emacs-test--ok "EmacsDescribe" '(:name "tool-emacs-test-frobnicate"
                                                       :aspect "info"))))
      (should (string-match-p "\\`Info node (mevtest)Widgets" text))
      (should (string-match-p "-- Function: tool-emacs-test-frobnicate widget" text)))
    (should (string-match-p "No Info manual section for tool-emacs-test-secret"
                            (tool-emacs-test--error "EmacsDescribe" '(:name "tool-emacs-test-secret"
                                                                      :aspect "info"))))))

;;;; EmacsFind

(ert-deftest mevedel-tool-emacs:find-matches-orderless-style ()
  ;; Components in any order, each a regexp.
  (let ((found (tool-emacs-test--ok "EmacsFind" '(:pattern "frobni tool-emacs-test"))))
    (should (string-match-p "\\`1 function name match" found))
    (should (string-match-p "^tool-emacs-test-frobnicate — Frobnicate WIDGET" found)))
  (should (string-match-p "^tool-emacs-test-frobnicate"
                          (tool-emacs-test--ok "EmacsFind" '(:pattern "^tool-emacs-test- cate$"))))
  ;; An invalid regexp is a literal; an uppercase letter makes it case-sensitive.
  (should (string-match-p "No function name"
                          (tool-emacs-test--ok "EmacsFind" '(:pattern "tool-emacs-test-[ frob"))))
  (should (string-match-p "No function name"
                          (tool-emacs-test--ok "EmacsFind" '(:pattern "Tool-emacs-test-frob"))))
  ;; Kinds.
  (should (string-match-p "^tool-emacs-test-secret"
                          (tool-emacs-test--ok "EmacsFind" '(:pattern "tool-emacs-test secret"
                                                             :kind "variable"))))
  (should (string-match-p "No command name"
                          (tool-emacs-test--ok "EmacsFind" '(:pattern "tool-emacs-test-frob"
                                                             :kind "command"))))
  (should (string-match-p "^mevedel-tool-emacs$"
                          (tool-emacs-test--ok "EmacsFind" '(:pattern "mevedel tool-emac"
                                                             :kind "library"))))
  ;; A broad pattern is cut, and says so.
  (let ((mevedel-tool-emacs-find-limit 5))
    (let ((found (tool-emacs-test--ok "EmacsFind" '(:pattern "buffer"))))
      (should (string-match-p "(the first 5 shown; narrow the pattern)" found))
      (should (= 6 (length (split-string found "\n")))))))

;;;; EmacsManual

(ert-deftest mevedel-tool-emacs:manual-lists-and-reads ()
  (tool-emacs-test--with-manual
    (should (member "mevtest" (split-string (tool-emacs-test--ok "EmacsManual" nil) "\n")))
    (should (equal (tool-emacs-test--ok "EmacsManual" '(:manual "mevtest"))
                   "Manual mevtest has 4 nodes:\nTop\nWidgets\nGadgets\nIndex"))
    (let ((text (tool-emacs-test--ok "EmacsManual" '(:manual "mevtest" :node "Gadgets"))))
      (should (string-match-p "Gadgets are never frobnicated" text)))
    (should (string-match-p "Widgets are frobnicated"
                            (tool-emacs-test--ok "EmacsManual" '(:node "(mevtest)Widgets"))))
    (should (string-match-p "No such node"
                            (tool-emacs-test--error "EmacsManual" '(:manual "mevtest"
                                                                    :node "Sprockets"))))
    (should (string-match-p "needs a manual"
                            (tool-emacs-test--error "EmacsManual" '(:node "Gadgets"))))))

(ert-deftest mevedel-tool-emacs:manual-leaves-the-users-info-alone ()
  (tool-emacs-test--with-manual
    (delete-other-windows)
    (save-window-excursion
      ;; The user reads Gadgets in *info*, shown in the only window.
      (info "(mevtest)Gadgets")
      (let* ((info (get-buffer "*info*"))
             (window (selected-window))
             (history (buffer-local-value 'Info-history info))
             (buffers (buffer-list)))
        (should (eq (window-buffer window) info))
        (tool-emacs-test--ok "EmacsManual" '(:manual "mevtest" :node "Widgets"))
        (tool-emacs-test--ok "EmacsManual" '(:manual "mevtest"))
        (tool-emacs-test--ok "EmacsDescribe" '(:name "tool-emacs-test-frobnicate" :aspect "info"))
        (with-current-buffer info
          (should (equal Info-current-node "Gadgets"))
          (should (equal Info-history history))
          (should (string-match-p "Gadgets are never" (buffer-string))))
        (should (equal (window-list) (list window)))
        (should (eq (window-buffer window) info))
        ;; No new buffer but the index lookup's own hidden one.
        (should (cl-every (lambda (b) (or (memq b buffers)
                                          (string-prefix-p " " (buffer-name b))))
                          (buffer-list)))
        (kill-buffer info)))))

(ert-deftest mevedel-tool-emacs:renders-rows ()
  (should (equal (plist-get (mevedel-tool-render-row "EmacsDescribe" '(:name "car" :aspect "source")
                                                     "x" nil)
                            :header)
                 "EmacsDescribe car (source)"))
  (should (equal (plist-get (mevedel-tool-render-row "EmacsFind" '(:pattern "buf str") "x" nil)
                            :header)
                 "EmacsFind \"buf str\""))
  (should (equal (plist-get (mevedel-tool-render-row "EmacsManual" '(:manual "elisp" :node "Buffers")
                                                     "x" nil)
                            :header)
                 "EmacsManual elisp › Buffers")))

(provide 'tool-emacs-test)
;;; tool-emacs-test.el ends here
