;;; load-path.el --- Put this checkout and its fetched deps on load-path  -*- lexical-binding: t; -*-

;;; Commentary:

;; Loaded with -l by `make run', `make test', `make bench' and `make
;; lint'.  The packages that scripts/deps.sh extracted under
;; .deps/elpa/ go in *front* of load-path, so that they shadow older
;; built-in copies (Emacs 30.1's transient is too old for gptel).  The
;; tree-sitter grammars it built under .deps/tree-sitter/ are found
;; through `treesit-extra-load-path'.  MEVEDEL_DEPS_DIR names another
;; .deps, as it does for scripts/deps.sh.

;;; Code:

;; A stale .elc next to an edited .el must never win in a checkout.
(setq load-prefer-newer t)

(let* ((root (file-name-directory
              (directory-file-name (file-name-directory load-file-name))))
       (deps (or (getenv "MEVEDEL_DEPS_DIR") (expand-file-name ".deps" root)))
       (elpa (expand-file-name "elpa" deps)))
  (defvar treesit-extra-load-path)
  (push (expand-file-name "tree-sitter" deps) treesit-extra-load-path)
  (when (file-directory-p elpa)
    (dolist (dir (directory-files elpa t "\\`[^.]"))
      (when (file-directory-p dir)
        (push dir load-path)))
    (dolist (dir (directory-files elpa t "\\`[^.]"))
      (dolist (autoloads (and (file-directory-p dir)
                              (directory-files dir t "-autoloads\\.el\\'")))
        (load autoloads nil t))))
  (push (expand-file-name "lisp" root) load-path))

;;; load-path.el ends here
