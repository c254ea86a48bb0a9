;;; install-test.el --- Installing mevedel as the README says  -*- lexical-binding: t; -*-

;;; Commentary:

;; `package-vc-install' from a clone of this checkout (a file:// URL: no
;; network), in a child Emacs with a temporary HOME whose package
;; directory is empty; gptel and its dependencies come from .deps/elpa
;; (`package-directory-list'), so nothing is fetched.  The module is not
;; built again: a copy of the one this checkout built goes into
;; `mevedel-core-build-module-directory' once the package is installed
;; (so it is newer than the installed sources, not stale); building it
;; is what `mevedel-core-build' does on first use, and takes minutes of
;; cargo.
;;
;; Checked: the package is installed and described (README-elpa), only
;; lisp/ was byte-compiled (tests and benches were not), `(require
;; 'mevedel)' loads the installed files, the module loads, and the
;; offline demo finds its script in the installed package.

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)

(defun mevedel-install-test--child (home form)
  "Evaluate FORM in a child `emacs -Q --batch' with HOME; return its output.
The child has none of the checkout's directories on `load-path'."
  (with-temp-buffer
    (let* ((process-environment (append (list (concat "HOME=" home)) process-environment))
           (status (call-process (expand-file-name invocation-name invocation-directory)
                                 nil t nil "-Q" "--batch" "--eval" (prin1-to-string form))))
      (unless (eq status 0)
        (ert-fail (list 'child-emacs status (buffer-string))))
      (buffer-string))))

(ert-deftest mevedel-install:package-vc-install-from-a-clone ()
  "The README's package-vc recipe installs, describes, compiles and loads mevedel."
  (let* ((dir (make-temp-file "mevedel-install-" t))
         (home (expand-file-name "home" dir))
         (clone (expand-file-name "clone" dir))
         (modules (expand-file-name "module/" dir))
         (root (directory-file-name mevedel-test-root)))
    (unwind-protect
        (progn
          (make-directory home)
          (should (eq 0 (call-process "git" nil nil nil "clone" "-q" "--no-hardlinks" root clone)))
          (make-directory modules)
          (let ((output
                 (mevedel-install-test--child
                  home
                  `(progn
                     (require 'package)
                     (setq print-escape-newlines t)
                     (setq package-user-dir ,(expand-file-name "elpa" home)
                           package-directory-list (list ,(expand-file-name ".deps/elpa" root))
                           package-archives nil)
                     (package-initialize)
                     ;; The README's recipe, with the clone for its URL.
                     (package-vc-install '(mevedel :url ,(concat "file://" clone) :lisp-dir "lisp"))
                     (let* ((desc (cadr (assq 'mevedel package-alist)))
                            (dir (package-desc-dir desc)))
                       (princ (format "INSTALLED %s\nDIR %s\n" (package-installed-p 'mevedel) dir))
                       (princ (format "ELC %S\n"
                                      (mapcar (lambda (file) (file-relative-name file dir))
                                              (directory-files-recursively dir "\\.elc\\'")))))
                     (with-current-buffer (get-buffer-create "*Compile-Log*")
                       (princ (format "LOG %S\n" (buffer-string))))
                     (describe-package 'mevedel)
                     (with-current-buffer "*Help*"
                       (princ (format "HELP %S\n" (buffer-substring-no-properties (point-min) (point-max)))))
                     ;; The module this checkout built, copied now: newer
                     ;; than the installed sources.
                     (dolist (file '("mevedel-dyn.so" "mevedel-sandbox"))
                       (copy-file (expand-file-name file ,root) (expand-file-name file ,modules)))
                     (setq mevedel-core-build-module-directory ,modules
                           mevedel-core-build-policy 'never)
                     (require 'mevedel)
                     (princ (format "LIBRARY %s\n" (locate-library "mevedel")))
                     (mevedel-core-ensure)
                     (princ (format "MODULE %s\n" (featurep 'mevedel-dyn)))
                     (require 'mevedel-demo)
                     (princ (format "DEMO %s %s\n" (file-exists-p (mevedel-demo-script))
                                    (file-exists-p (mevedel-scripted-model-server-file))))))))
            (let ((installed (expand-file-name "elpa/mevedel/" home)))
              (should (string-search "INSTALLED t\n" output))
              (should (string-search (concat "DIR " installed "\n") output))
              ;; Only lisp/ is compiled: no test, bench or script file.
              (string-match "^ELC \\(.*\\)$" output)
              (let ((compiled (car (read-from-string (match-string 1 output)))))
                (should (member "lisp/mevedel.elc" compiled))
                ;; package-vc's own autoload indirection is compiled at the top.
                (should (equal (cl-remove-if (lambda (file) (string-prefix-p "lisp/" file)) compiled)
                               '("mevedel-autoloads.elc"))))
              (string-match "^LOG \\(.*\\)$" output)
              (let ((log (car (read-from-string (match-string 1 output)))))
                (should-not (string-match-p "Error\\|test/\\|bench" log)))
              ;; The description is README-elpa's, the requirements the header's.
              (string-match "^HELP \\(.*\\)$" output)
              (let ((help (car (read-from-string (match-string 1 output)))))
                (should (string-search "mevedel is an LLM coding agent that lives in Emacs." help))
                (should (string-search "M-x mevedel-core-build" help))
                (should (string-match-p "Requires: emacs-30\\.1, gptel-0\\.9\\.9" help)))
              (should (string-search (concat "LIBRARY " installed "lisp/mevedel.elc\n") output))
              (should (string-search "MODULE t\n" output))
              (should (string-search "DEMO t t\n" output)))))
      (delete-directory dir t))))

(provide 'install-test)
;;; install-test.el ends here
