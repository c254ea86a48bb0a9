;;; remote-helper-test.el --- The remote helper's installation and messages  -*- lexical-binding: t; -*-

;;; Commentary:

;; Without a host: a module build installs the remote helper next to the
;; module under its architecture's name, and the client finds it there
;; (or says there is none for a host's architecture).  The helper over
;; a real sshd is test/e2e/remote-helper-e2e-test.el.

;;; Code:

(require 'ert)
(require 'mevedel-core-build)
(require 'mevedel-remote-helper)

(ert-deftest remote-helper:a-module-build-installs-the-helper-by-architecture ()
  "The build command builds the static helper; install puts it beside the module."
  (let* ((root (file-name-as-directory (make-temp-file "mevedel-rh-root-" t)))
         (modules (file-name-as-directory (make-temp-file "mevedel-rh-modules-" t)))
         (triple (mevedel-core-build--remote-triple))
         (arch (car (split-string triple "-")))
         (process-environment (cons "CARGO_TARGET_DIR" process-environment)))
    (unwind-protect
        (let ((mevedel-core-build-cargo-program "true")
              (mevedel-core-build-module-directory modules))
          (should (string-search (format "-p mevedel-remote --target %s" triple)
                                 (mevedel-core-build--command)))
          (should (string-search "+crt-static" (mevedel-core-build--command)))
          (dolist (file (list (concat "target/release/libmevedel_dyn" module-file-suffix)
                              "target/release/mevedel-sandbox"
                              (format "target/%s/release/mevedel-remote" triple)))
            (make-directory (file-name-directory (expand-file-name file root)) t)
            (with-temp-file (expand-file-name file root) (insert file))
            (set-file-modes (expand-file-name file root) #o755))
          (mevedel-core-build--install root (mevedel-core-build-module-file))
          (should (equal (mevedel-remote-helper--binary arch)
                         (expand-file-name (concat "mevedel-remote-" arch) modules)))
          (should-not (mevedel-remote-helper--binary "sparc64")))
      (delete-directory root t)
      (delete-directory modules t))))

(ert-deftest remote-helper:plists-become-the-helpers-json ()
  "Keys lose their dashes, nil values go, lists become arrays."
  (should (equal (json-serialize
                  (mevedel-remote-helper--json
                   '(:path "/p" :timeout-ms 5 :display nil
                     :options (:pattern "x" :line-numbers t :case-insensitive nil)
                     :unsaved (("/p/a" "text" nil)) :new-files ("/p/b"))))
                 (concat "{\"path\":\"/p\",\"timeout_ms\":5,"
                         "\"options\":{\"pattern\":\"x\",\"line_numbers\":true},"
                         "\"unsaved\":[[\"/p/a\",\"text\",false]],\"new_files\":[\"/p/b\"]}"))))

(provide 'remote-helper-test)
;;; remote-helper-test.el ends here
