;;; mevedel-core-build.el --- Build and install mevedel's native module  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Finds mevedel's Rust sources, decides whether the built module is
;; older than them, builds it with cargo (asynchronously in a
;; `compilation-mode' buffer, or synchronously in batch) and installs it
;; where `mevedel-core' loads it from.  Kept apart from the loader so
;; that mevedel-core.el is only about loading and calling the module.

;;; Code:

(require 'cl-lib)
(require 'compile)
(require 'subr-x)

;;;; Errors

;; Defined here rather than in mevedel-core.el because building signals
;; them too, and M-x mevedel-core-build can load this file on its own.
(define-error 'mevedel-core-error "mevedel core error")
(define-error 'mevedel-core-load-error
              "Cannot load mevedel's native module" 'mevedel-core-error)

;;;; Customization

;; The old names still work; the aliases come first so that a value set
;; before this file loads is kept.
(define-obsolete-variable-alias 'mevedel-core-module-directory
  'mevedel-core-build-module-directory "0.1.0")
(define-obsolete-variable-alias 'mevedel-core-cargo-program
  'mevedel-core-build-cargo-program "0.1.0")

(defcustom mevedel-core-build-module-directory nil
  "Directory that holds the built module file `mevedel-dyn.so'.
Nil means the directory holding mevedel's Cargo.toml (the package or
checkout root), falling back to the directory of this file."
  :group 'mevedel-core
  :type '(choice (const :tag "Package root" nil) directory))

(defcustom mevedel-core-build-policy 'ask
  "What to do when the module is missing or older than its sources.
`ask' asks before building (in batch Emacs it behaves like `always',
since nobody can answer); `always' builds without asking; `never'
signals an error instead."
  :group 'mevedel-core
  :type '(choice (const ask) (const always) (const never)))

(defcustom mevedel-core-build-cargo-program "cargo"
  "Name or path of cargo, used to build the module."
  :group 'mevedel-core
  :type 'string)

;;;; Locating and building

(defconst mevedel-core-build--this-directory
  (file-name-directory (or load-file-name byte-compile-current-file
                           buffer-file-name default-directory))
  "Directory of this file when it was loaded.")

(defun mevedel-core-build-source-root ()
  "Return the directory holding mevedel's Cargo.toml, or nil."
  (locate-dominating-file mevedel-core-build--this-directory "Cargo.toml"))

(defun mevedel-core-build-module-file ()
  "Return the absolute file name where the module is expected."
  (unless module-file-suffix
    (signal 'mevedel-core-load-error
            '("This Emacs was built without dynamic module support")))
  (expand-file-name (concat "mevedel-dyn" module-file-suffix)
                    (or mevedel-core-build-module-directory
                        (mevedel-core-build-source-root)
                        mevedel-core-build--this-directory)))

(defun mevedel-core-build--source-files (root)
  "Return the files under ROOT whose change requires a rebuild.
ROOT holds the workspace's Cargo.toml and Cargo.lock; each crate under
crates/ has its own Cargo.toml and .rs sources."
  (append (cl-remove-if-not #'file-exists-p
                            (mapcar (lambda (f) (expand-file-name f root))
                                    '("Cargo.toml" "Cargo.lock")))
          (directory-files-recursively (expand-file-name "crates" root)
                                       "\\(?:\\.rs\\|\\`Cargo\\.toml\\)\\'")))

(defconst mevedel-core-build--helper-name "mevedel-sandbox"
  "File name of the sandbox helper binary installed next to the module.")

(defun mevedel-core-build-helper-file ()
  "Return the absolute file name of the sandbox helper binary."
  (expand-file-name mevedel-core-build--helper-name
                    (file-name-directory (mevedel-core-build-module-file))))

(defun mevedel-core-build-stale-p ()
  "Return non-nil when the module file is missing or older than its sources.
Without sources (a binary-only install) an existing module is never stale."
  (let ((file (mevedel-core-build-module-file))
        (root (mevedel-core-build-source-root)))
    (or (not (file-exists-p file))
        (and root
             (cl-some (lambda (src) (file-newer-than-file-p src file))
                      (mevedel-core-build--source-files root))))))

(defun mevedel-core-build--cargo ()
  "Return the cargo executable, or signal an error that names rustup."
  (or (executable-find mevedel-core-build-cargo-program)
      (let ((home (expand-file-name "~/.cargo/bin/cargo")))
        (and (file-executable-p home) home))
      (signal 'mevedel-core-load-error
              (list (concat "Cannot build mevedel's native module: `cargo' was not found. "
                            "Install the Rust toolchain with rustup (https://rustup.rs), "
                            "or set `mevedel-core-build-cargo-program'")))))

(defconst mevedel-core-build--remote-name "mevedel-remote"
  "The remote helper binary, installed next to the module as NAME-ARCH.")

(defun mevedel-core-build--remote-triple ()
  "Return the Rust target the remote helper is built for, or nil.
This machine's architecture on GNU/Linux, linked statically there so
that it runs on hosts with any libc."
  (and (eq system-type 'gnu/linux)
       (concat (car (split-string system-configuration "-")) "-unknown-linux-gnu")))

(defun mevedel-core-build--command ()
  "Return the shell command that builds the module and the remote helper.
A remote helper that fails to build leaves the module built: remote
searches then fall back to rg/grep on the host."
  (let ((cargo (mevedel-core-build--cargo))
        (triple (mevedel-core-build--remote-triple)))
    (concat (mapconcat #'shell-quote-argument (list cargo "build" "--release" "--locked") " ")
            (and triple
                 (format " && { RUSTFLAGS='-C target-feature=+crt-static' %s || true; }"
                         (mapconcat #'shell-quote-argument
                                    (list cargo "build" "--release" "--locked"
                                          "-p" mevedel-core-build--remote-name "--target" triple)
                                    " "))))))

(defun mevedel-core-build--built-library (root)
  "Return the library file that cargo built under ROOT."
  (expand-file-name (concat "release/libmevedel_dyn" module-file-suffix)
                    (or (getenv "CARGO_TARGET_DIR")
                        (expand-file-name "target" root))))

(defun mevedel-core-build--install (root target)
  "Copy the freshly built library under ROOT to TARGET, the module file.
The sandbox helper binary built with it goes next to TARGET, and so
does the remote helper, when it was built, as mevedel-remote-ARCH.  Each copy
goes through a temporary file and a rename, so an Emacs that has the old
file mapped (or a helper running) keeps a valid file."
  (let* ((built (mevedel-core-build--built-library root))
         (helper (expand-file-name mevedel-core-build--helper-name (file-name-directory built)))
         (installed-helper (expand-file-name mevedel-core-build--helper-name
                                             (file-name-directory target)))
         (triple (mevedel-core-build--remote-triple))
         (remote (and triple
                      (expand-file-name (format "../%s/release/%s" triple
                                                mevedel-core-build--remote-name)
                                        (file-name-directory built)))))
    (dolist (file (list built helper))
      (unless (file-exists-p file)
        (signal 'mevedel-core-load-error
                (list (format "cargo finished but %s does not exist" file)))))
    (make-directory (file-name-directory target) t)
    (dolist (pair (append (list (cons built target) (cons helper installed-helper))
                          (and remote (file-exists-p remote)
                               (list (cons remote (expand-file-name
                                                   (concat mevedel-core-build--remote-name "-"
                                                           (car (split-string triple "-")))
                                                   (file-name-directory target)))))))
      (let ((tmp (concat (cdr pair) ".tmp")))
        (copy-file (car pair) tmp t)
        (rename-file tmp (cdr pair) t)))
    target))

(defconst mevedel-core-build--first-cpu-seconds 550
  "About how long a first build takes on one core, in seconds.
Measured: 276 s of cargo on 2 vCPUs for the release module and helper.")

(defvar-local mevedel-core-build--progress nil
  "Progress of the build in this buffer, (START DONE TOTAL).
START is when it started, DONE the crates compiled so far and TOTAL
how many the lock file names.")

(defun mevedel-core-build--crate-count (root)
  "Return how many packages ROOT's Cargo.lock names (what a first build compiles)."
  (let ((lock (expand-file-name "Cargo.lock" root)))
    (if (file-readable-p lock)
        (with-temp-buffer
          (insert-file-contents lock)
          (how-many "^\\[\\[package\\]\\]" (point-min) (point-max)))
      0)))

(defun mevedel-core-build--first-estimate ()
  "Return a rough duration of a first build on this machine, as text."
  (let ((minutes (/ mevedel-core-build--first-cpu-seconds
                    (max 1 (num-processors)) 60.0)))
    (if (< minutes 1.5) "about a minute" (format "about %d minutes" (round minutes)))))

(defun mevedel-core-build--progress-text (progress now)
  "Return the mode-line text of build PROGRESS, (START DONE TOTAL), at time NOW."
  (pcase-let ((`(,start ,done ,total) progress))
    (if (or (zerop done) (zerop total))
        (format " [starting; a first build takes %s]" (mevedel-core-build--first-estimate))
      (let ((left (* (- now start) (/ (float (max 0 (- total done))) done))))
        (format " [%d/%d crates%s]" (min done total) total
                (if (>= done total) ""
                  (format ", ~%d min left" (max 1 (round (/ left 60))))))))))

(defun mevedel-core-build--count-compiled ()
  "Count the crates cargo reports compiled in this build's new output.
A `compilation-filter-hook' member: the mode line shows the progress."
  (when mevedel-core-build--progress
    (save-excursion
      (goto-char compilation-filter-start)
      (forward-line 0)
      (let ((found (how-many "^ *Compiling " (point) (point-max))))
        (setf (nth 1 mevedel-core-build--progress)
              (+ found (nth 1 mevedel-core-build--progress)))))
    (setq mode-line-process
          (mevedel-core-build--progress-text mevedel-core-build--progress (float-time)))
    (force-mode-line-update)))

(defvar mevedel-core-build--callbacks nil
  "Functions to call once the running build has installed the module.")

(defvar-local mevedel-core-build--target nil
  "Module file that the build in this buffer installs when it succeeds.")

(defun mevedel-core-build--finished (buffer status)
  "Install the module after the build in BUFFER ended with STATUS."
  (let ((callbacks (prog1 mevedel-core-build--callbacks
                     (setq mevedel-core-build--callbacks nil))))
    (if (not (string-prefix-p "finished" status))
        (message "mevedel: building the native module failed; see %s" (buffer-name buffer))
      (with-current-buffer buffer
        (mevedel-core-build--install default-directory mevedel-core-build--target))
      (message "mevedel: native module built")
      (mapc #'funcall callbacks))))

;;;###autoload
(defun mevedel-core-build (&optional callback)
  "Build mevedel's native module with cargo, showing output in a buffer.
The build runs asynchronously in a `compilation-mode' buffer; when it
succeeds the module is installed and CALLBACK (if non-nil) is called.
A module already loaded in this Emacs cannot be replaced: restart Emacs
to use the new build."
  (interactive)
  (let ((root (or (mevedel-core-build-source-root)
                  (user-error "Cannot find mevedel's Rust sources (Cargo.toml)")))
        (command (mevedel-core-build--command))
        (target (mevedel-core-build-module-file)))
    (when callback (push callback mevedel-core-build--callbacks))
    (message "mevedel: building the native module; a first build takes %s"
             (mevedel-core-build--first-estimate))
    (let* ((default-directory root)
           (buffer (compilation-start command 'compilation-mode
                                      (lambda (_) "*mevedel-core-build*"))))
      (with-current-buffer buffer
        (setq mevedel-core-build--target target
              mevedel-core-build--progress (list (float-time) 0 (mevedel-core-build--crate-count root)))
        (add-hook 'compilation-filter-hook #'mevedel-core-build--count-compiled nil t)
        (add-hook 'compilation-finish-functions #'mevedel-core-build--finished nil t))
      buffer)))

(defun mevedel-core-build--sync ()
  "Build and install the module, waiting for cargo to finish.
Used in batch Emacs, where nobody watches an asynchronous build."
  (let* ((root (or (mevedel-core-build-source-root)
                   (signal 'mevedel-core-load-error
                           '("mevedel's Rust sources (Cargo.toml) were not found"))))
         (default-directory root)
         (buffer (get-buffer-create "*mevedel-core-build*"))
         (command (mevedel-core-build--command)))
    (message "mevedel: building the native module (%s)..." command)
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (setq default-directory root)
        (let ((status (call-process-shell-command command nil buffer)))
          (compilation-mode)
          (unless (eql status 0)
            (signal 'mevedel-core-load-error
                    (list (format "Building the module failed (cargo exit %s):\n%s"
                                  status
                                  (buffer-substring-no-properties
                                   (max (point-min) (- (point-max) 3000))
                                   (point-max)))))))))
    (mevedel-core-build--install root (mevedel-core-build-module-file))))

;;;; Build policy

(defun mevedel-core-build--effective-policy ()
  "Return the build policy in force; `ask' means `always' in batch."
  (if (and noninteractive (eq mevedel-core-build-policy 'ask))
      'always
    mevedel-core-build-policy))

(defun mevedel-core-build-as-policy-says ()
  "Build a missing or stale module, or refuse, per `mevedel-core-build-policy'."
  (pcase (mevedel-core-build--effective-policy)
    ('always (mevedel-core-build--sync))
    ('ask
     (if (y-or-n-p "Build mevedel's native module now (takes a few minutes)? ")
         (progn (mevedel-core-build)
                (user-error "Building mevedel's native module; retry when the build finishes"))
       (signal 'mevedel-core-load-error
               (list "The native module is missing or stale; run M-x mevedel-core-build"))))
    (_
     (signal 'mevedel-core-load-error
             (list (format "%s is missing or stale and `mevedel-core-build-policy' is `never'"
                           (mevedel-core-build-module-file)))))))

(provide 'mevedel-core-build)
;;; mevedel-core-build.el ends here
