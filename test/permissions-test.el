;;; permissions-test.el --- Tests of permission modes and rules  -*- lexical-binding: t; -*-

;;; Commentary:

;; `mevedel-permissions-decide': modes, rule precedence (deny > ask >
;; allow), path globs, the per-workspace file (read, never evaluated)
;; and clear errors for malformed rules.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-permissions)

(defmacro mevedel-permissions-test--with-root (var &rest body)
  "Bind VAR to a fresh workspace directory around BODY."
  (declare (indent 1))
  `(let ((,var (file-name-as-directory (make-temp-file "mevedel-perm-" t)))
         (mevedel-permission-rules nil))
     (unwind-protect (progn ,@body)
       (delete-directory ,var t))))

(ert-deftest mevedel-permissions:modes-decide-without-rules ()
  (mevedel-permissions-test--with-root root
    (let ((inside (list (expand-file-name "a.txt" root)))
          (outside '("/etc/passwd")))
      ;; ask: read-only inside runs; outside or non-read-only asks.
      (should (eq (mevedel-permissions-decide "Read" :paths inside :root root
                                              :mode 'ask :read-only-p t)
                  'allow))
      (should (eq (mevedel-permissions-decide "Read" :paths outside :root root
                                              :mode 'ask :read-only-p t)
                  'ask))
      (should (eq (mevedel-permissions-decide "ApplyPatch" :paths inside :root root
                                              :mode 'ask :edits-p t)
                  'ask))
      ;; edits: edits inside run, outside ask, other tools ask.
      (should (eq (mevedel-permissions-decide "ApplyPatch" :paths inside :root root
                                              :mode 'edits :edits-p t)
                  'allow))
      (should (eq (mevedel-permissions-decide "ApplyPatch" :paths outside :root root
                                              :mode 'edits :edits-p t)
                  'ask))
      (should (eq (mevedel-permissions-decide "Bash" :root root :mode 'edits) 'ask))
      ;; full-auto: everything runs.
      (should (eq (mevedel-permissions-decide "Bash" :root root :mode 'full-auto) 'allow))
      (should-error (mevedel-permissions-decide "Bash" :root root :mode 'yolo)))))

(ert-deftest mevedel-permissions:deny-beats-ask-beats-allow ()
  (mevedel-permissions-test--with-root root
    (let ((path (list (expand-file-name "src/secret.env" root))))
      (let ((mevedel-permission-rules '((allow "Read") (ask "Read" "**/*.env"))))
        (should (eq (mevedel-permissions-decide "Read" :paths path :root root
                                                :mode 'full-auto)
                    'ask)))
      (let ((mevedel-permission-rules '((allow "Read") (ask "Read" "**/*.env")
                                        (deny "*" "src/secret.*"))))
        (should (eq (mevedel-permissions-decide "Read" :paths path :root root) 'deny)))
      ;; Session "always" answers are allow rules: a configured ask still wins.
      (let ((mevedel-permission-rules '((ask "Read" "**/*.env"))))
        (should (eq (mevedel-permissions-decide "Read" :paths path :root root
                                                :session-rules '((allow "Read")))
                    'ask)))
      ;; A rule for another tool does not apply.
      (let ((mevedel-permission-rules '((deny "Bash"))))
        (should (eq (mevedel-permissions-decide "Read" :paths path :root root
                                                :read-only-p t)
                    'allow))))))

(ert-deftest mevedel-permissions:globs ()
  (should (string-match-p (mevedel-permissions-glob-regexp "src/*.el") "src/a.el"))
  (should-not (string-match-p (mevedel-permissions-glob-regexp "src/*.el") "src/sub/a.el"))
  (should (string-match-p (mevedel-permissions-glob-regexp "src/**/*.el") "src/sub/deep/a.el"))
  (should (string-match-p (mevedel-permissions-glob-regexp "src/**/*.el") "src/a.el"))
  (should (string-match-p (mevedel-permissions-glob-regexp "a?c") "abc"))
  (should-not (string-match-p (mevedel-permissions-glob-regexp "a.c") "abc"))
  (mevedel-permissions-test--with-root root
    ;; Allow rules need every path to match; deny rules any path.
    (let ((mevedel-permission-rules '((allow "Edit" "docs/**"))))
      (should (eq (mevedel-permissions-decide
                   "Edit" :root root :mode 'ask
                   :paths (list (expand-file-name "docs/a.md" root)))
                  'allow))
      (should (eq (mevedel-permissions-decide
                   "Edit" :root root :mode 'ask
                   :paths (list (expand-file-name "docs/a.md" root)
                                (expand-file-name "src/b.el" root)))
                  'ask)))
    (let ((mevedel-permission-rules '((deny "Edit" "/etc/**"))))
      (should (eq (mevedel-permissions-decide "Edit" :root root :mode 'full-auto
                                              :paths '("/tmp/x" "/etc/hosts"))
                  'deny)))))

(ert-deftest mevedel-permissions:workspace-file-is-data ()
  (mevedel-permissions-test--with-root root
    (make-directory (expand-file-name ".mevedel" root))
    (let ((file (expand-file-name mevedel-permission-workspace-file root))
          (marker (expand-file-name "evaluated" root)))
      (with-temp-file file (insert "((deny \"Bash\") (allow \"Read\" \"docs/**\"))\n"))
      (should (eq (mevedel-permissions-decide "Bash" :root root :mode 'full-auto) 'deny))
      ;; Code in the file is never run: it is read as (malformed) rules.
      (with-temp-file file (insert (format "(write-region \"\" nil %S)" marker)))
      (should-error (mevedel-permissions-decide "Bash" :root root))
      (should-not (file-exists-p marker))
      ;; A malformed rule is an error naming the rule.
      (with-temp-file file (insert "((maybe \"Bash\"))"))
      (should (string-match-p "action must be allow, ask or deny"
                              (cadr (should-error (mevedel-permissions-decide
                                                   "Bash" :root root)))))
      (with-temp-file file (insert "(unclosed"))
      (should (string-match-p "Cannot read"
                              (cadr (should-error (mevedel-permissions-decide
                                                   "Bash" :root root))))))))

(ert-deftest mevedel-permissions:refusal-texts ()
  (should (string-prefix-p "Permission denied: a permission rule"
                           (mevedel-permissions-refusal "Bash" 'rule)))
  (should (string-match-p "user declined this Bash call"
                          (mevedel-permissions-refusal "Bash" 'user)))
  (should (string-match-p "headless" (mevedel-permissions-refusal "Bash" 'headless))))

(provide 'permissions-test)
;;; permissions-test.el ends here
