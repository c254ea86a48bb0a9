;;; core-test.el --- Tests of the native module seam  -*- lexical-binding: t; -*-

;;; Commentary:

;; Module loading and version check, the error tree, panics and wrong
;; types, the event channel, and the process-lifetime hazards of
;; ../shared/notes/module-hazards.md (SIGPIPE, inherited descriptors,
;; children outliving Emacs).

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-core)

(defconst mevedel-core-test--areas
  '(schema resource search exec sandbox store patch internal))

;;;; Loading

(ert-deftest mevedel-core:module-loads-with-expected-version ()
  (should (mevedel-core-ensure))
  (should (featurep 'mevedel-dyn))
  (should (equal (mevedel-core-version) mevedel-core-expected-version))
  (should (string-suffix-p (concat "mevedel-dyn" module-file-suffix)
                           (mevedel-core-build-module-file))))

(ert-deftest mevedel-core:expected-version-matches-cargo-toml ()
  (with-temp-buffer
    (insert-file-contents (expand-file-name "Cargo.toml" mevedel-test-root))
    (should (re-search-forward "^version = \"\\([^\"]+\\)\"" nil t))
    (should (equal (match-string 1) mevedel-core-expected-version))))

(ert-deftest mevedel-core:stale-version-refused-with-clear-message ()
  (let ((result (mevedel-test-run-emacs
                 '(progn
                    (require 'mevedel-core)
                    (setq mevedel-core-expected-version "9.9.9")
                    (condition-case err
                        (progn (mevedel-core-ensure) (princ "LOADED"))
                      (mevedel-core-version-mismatch
                       (princ (format "REFUSED %S %s" (car err) (cadr err)))))
                    ;; Nothing else may have been wired up.
                    (princ (format " READY=%s" mevedel-core--ready))))))
    (should (eql (car result) 0))
    (should (string-match-p "REFUSED mevedel-core-version-mismatch" (cdr result)))
    (should (string-match-p "is version 0\\.1\\.0 but this mevedel expects 9\\.9\\.9" (cdr result)))
    (should (string-match-p "restart Emacs" (cdr result)))
    (should (string-match-p "READY=nil" (cdr result)))))

(ert-deftest mevedel-core:require-never-builds ()
  "Loading and byte-compiling mevedel must not run cargo.
Every file of lisp/ is compiled, as package.el does after an install:
tool declarations wait for the module instead of loading it."
  (let* ((marker (make-temp-name (expand-file-name "cargo-ran-" temporary-file-directory)))
         (fake (make-temp-file "fake-cargo"))
         (dir (make-temp-file "mevedel-empty" t)))
    (with-temp-file fake (insert "#!/bin/sh\ntouch " marker "\nexit 1\n"))
    (set-file-modes fake #o755)
    (unwind-protect
        (let ((result (mevedel-test-run-emacs
                       `(progn
                          (setq mevedel-core-build-cargo-program ,fake
                                mevedel-core-build-module-directory ,dir)
                          (require 'mevedel)
                          (require 'bytecomp) ; so the let below binds dynamically
                          (let ((byte-compile-dest-file-function
                                 (lambda (_) (make-temp-file "mevedel-core" nil ".elc"))))
                            (dolist (file (directory-files
                                           (file-name-directory (locate-library "mevedel-core.el"))
                                           t "\\`mevedel.*\\.el\\'"))
                              (unless (byte-compile-file file)
                                (error "Compiling %s failed" file))))
                          (princ (if (featurep 'mevedel-dyn) "LOADED" "NOT-LOADED"))))))
          (should (eql (car result) 0))
          (should (string-match-p "NOT-LOADED" (cdr result)))
          (should-not (file-exists-p marker)))
      (delete-file fake)
      (delete-directory dir t)
      (when (file-exists-p marker) (delete-file marker)))))

(ert-deftest mevedel-core:first-build-shows-progress-and-an-estimate ()
  "The build buffer's mode line counts the crates cargo compiled and the time left."
  (progn
    (should (string-match-p "\\`about \\(?:a minute\\|[0-9]+ minutes\\)\\'"
                            (mevedel-core-build--first-estimate)))
    (should (string-match-p "starting; a first build takes about"
                            (mevedel-core-build--progress-text (list 100.0 0 180) 100.0)))
    ;; 60 of 180 crates in 120 s: 240 s, 4 minutes, left.
    (should (equal (mevedel-core-build--progress-text (list 100.0 60 180) 220.0)
                   " [60/180 crates, ~4 min left]"))
    (should (equal (mevedel-core-build--progress-text (list 100.0 180 180) 400.0)
                   " [180/180 crates]"))
    nil)
  (with-temp-buffer
    (setq-local mevedel-core-build--progress (list (float-time) 0 10))
    (insert "   Compiling libc v0.2\n    Compiling memchr v2\n")
    (let ((compilation-filter-start (point-min)))
      (mevedel-core-build--count-compiled))
    (insert "warning: x\n   Compiling regex v1\n")
    (let ((compilation-filter-start (- (point-max) 30)))
      (mevedel-core-build--count-compiled))
    (should (= (nth 1 mevedel-core-build--progress) 3))
    (should (string-match-p "\\` \\[3/10 crates" mode-line-process)))
  (should (> (mevedel-core-build--crate-count mevedel-test-root) 100)))

(ert-deftest mevedel-core:build-policy-in-batch ()
  (let ((mevedel-core-build-policy 'ask))
    (should (eq (mevedel-core-build--effective-policy) 'always)))
  (let ((mevedel-core-build-policy 'never))
    (should (eq (mevedel-core-build--effective-policy) 'never))
    (let ((err (should-error (mevedel-core-build-as-policy-says)
                             :type 'mevedel-core-load-error)))
      (should (string-match-p "mevedel-core-build-policy" (cadr err))))))

(ert-deftest mevedel-core:old-option-names-still-work ()
  (with-suppressed-warnings ((obsolete mevedel-core-module-directory
                                       mevedel-core-cargo-program))
    (let ((mevedel-core-module-directory "/modules/")
          (mevedel-core-cargo-program "my-cargo"))
      (should (equal mevedel-core-build-module-directory "/modules/"))
      (should (equal mevedel-core-build-cargo-program "my-cargo")))))

(ert-deftest mevedel-core:missing-cargo-names-rustup ()
  (let ((mevedel-core-build-cargo-program "no-such-cargo-here")
        (process-environment (cons (concat "HOME=" (make-temp-file "home" t))
                                   process-environment)))
    (let ((err (should-error (mevedel-core-build--cargo) :type 'mevedel-core-load-error)))
      (should (string-match-p "rustup" (cadr err))))))

(ert-deftest mevedel-core:stale-module-detected ()
  (let* ((dir (make-temp-file "mevedel-mod" t))
         (mevedel-core-build-module-directory dir)
         (file (mevedel-core-build-module-file)))
    (unwind-protect
        (progn
          (should (mevedel-core-build-stale-p)) ; missing
          (with-temp-file file (insert "x"))
          (set-file-times file (encode-time '(0 0 0 1 1 2001 nil nil t)))
          (should (mevedel-core-build-stale-p)) ; older than crates/*/src/*.rs
          (set-file-times file)
          (should-not (mevedel-core-build-stale-p)))
      (delete-directory dir t))))

;; `compilation-start' on an up-to-date tree: cargo only checks, in seconds.
(ert-deftest mevedel-core:interactive-build-installs-and-calls-back ()
  (let* ((dir (make-temp-file "mevedel-build" t))
         (mevedel-core-build-module-directory dir)
         (called nil))
    (unwind-protect
        (let ((buffer (mevedel-core-build (lambda () (setq called t)))))
          (should (eq (with-current-buffer buffer major-mode) 'compilation-mode))
          (setq mevedel-core-build-module-directory nil) ; the target was captured
          (mevedel-test-wait-until (not (get-buffer-process buffer)) 600)
          (should called)
          (should (file-exists-p (expand-file-name (concat "mevedel-dyn" module-file-suffix) dir)))
          (should (string-match-p "cargo build --release --locked"
                                  (with-current-buffer buffer (buffer-string)))))
      (delete-directory dir t))))

;;;; Errors

(ert-deftest mevedel-core:error-tree ()
  (mevedel-core-ensure)
  (dolist (area mevedel-core-test--areas)
    (let* ((symbol (intern (format "mevedel-core-%s-error" area)))
           (conditions (get symbol 'error-conditions)))
      (should (memq 'mevedel-core-error conditions))
      (should (memq 'error conditions))
      (should (stringp (get symbol 'error-message))))))

(ert-deftest mevedel-core:panic-is-a-catchable-lisp-error ()
  (mevedel-core-ensure)
  (let ((err (should-error (mevedel-core--selftest-panic "boom 42")
                           :type 'mevedel-core-internal-error)))
    (should (string-match-p "Rust panic: boom 42" (cadr err)))
    (should (string-match-p "selftest\\.rs" (cadr err))))
  ;; Emacs and the module carry on.
  (should (equal (mevedel-core--version) mevedel-core-expected-version))
  (should (condition-case nil
              (mevedel-core--selftest-panic "again")
            (mevedel-core-error 'caught))))

(defun mevedel-core-test--exports ()
  "Return every module function, sorted by name."
  (let (fns)
    (mapatoms (lambda (s)
                (when (and (fboundp s)
                           (string-prefix-p "mevedel-core--" (symbol-name s))
                           (module-function-p (symbol-function s)))
                  (push s fns))))
    (sort fns #'string<)))

(ert-deftest mevedel-core:every-export-is-private ()
  (mevedel-core-ensure)
  (let (public)
    (mapatoms (lambda (s)
                (when (and (fboundp s) (module-function-p (symbol-function s))
                           (not (string-prefix-p "mevedel-core--" (symbol-name s))))
                  (push s public))))
    (should-not public)))

(ert-deftest mevedel-core:wrong-typed-arguments-signal-for-every-export ()
  (mevedel-core-ensure)
  (let ((exports (mevedel-core-test--exports))
        (bogus (list (make-bool-vector 3 t) 'a-symbol 1.5 (make-hash-table)))
        (checked 0))
    (should (>= (length exports) 10))
    (dolist (fn exports)
      (let ((arity (func-arity fn)))
        (if (zerop (car arity))
            ;; Nothing to mistype: an extra argument must still signal.
            (should-error (funcall fn (car bogus)) :type 'wrong-number-of-arguments)
          (dolist (value bogus)
            (dotimes (position (car arity))
              ;; Every other argument is a plausible value of some type,
              ;; so the bogus one is what the function must reject.
              (let ((args (make-list (car arity) 1)))
                (setf (nth position args) value)
                (should (condition-case err
                            (progn (apply fn args)
                                   (ert-fail (format "%s accepted %S" fn args)))
                          (wrong-type-argument t)
                          (error (memq 'wrong-type-argument
                                       (get (car err) 'error-conditions))))))))))
      (cl-incf checked))
    (should (= checked (length exports)))
    (should (equal (mevedel-core--version) mevedel-core-expected-version))))

;; The declarations are kept by hand; this keeps them honest.
(defun mevedel-core-test--declared ()
  "Return the `declare-function' forms of mevedel-core.el for module functions."
  (with-temp-buffer
    (insert-file-contents (expand-file-name "lisp/mevedel-core.el" mevedel-test-root))
    (let (forms)
      (condition-case nil
          (while t
            (let ((form (read (current-buffer))))
              (when (and (eq (car-safe form) 'declare-function)
                         (string-prefix-p "mevedel-core--" (symbol-name (nth 1 form))))
                (push form forms))))
        (end-of-file nil))
      (nreverse forms))))

(ert-deftest mevedel-core:declarations-match-exports ()
  "Every export is declared once, with its arity, and nothing else is."
  (mevedel-core-ensure)
  (let* ((forms (mevedel-core-test--declared))
         (names (mapcar #'cadr forms)))
    (should (equal (seq-uniq names) names))
    (let ((exports (mevedel-core-test--exports)))
      (should-not (cl-set-difference exports names)) ; undeclared
      (should-not (cl-set-difference names exports))) ; stale
    (dolist (form forms)
      (should (equal (list (nth 1 form) (func-arity (nth 1 form)))
                     (list (nth 1 form) (func-arity `(lambda ,(nth 3 form)))))))))

;;;; Arguments

(ert-deftest mevedel-core:plist-arguments-name-the-key ()
  "A structured call's plist rejects unknown keys and names ill-typed ones."
  (mevedel-core-ensure)
  (let ((err (should-error (mevedel-core--search-glob 0 '(:path "/" :pattrn "x"))
                           :type 'mevedel-core-argument-error)))
    (should (string-match-p "mevedel-core--search-glob: unknown key :pattrn" (cadr err))))
  (let ((err (should-error (mevedel-core--search-grep 0 '(:path "/" :options (:before "2")))
                           :type 'wrong-type-argument)))
    (should (string-match-p ":options :before must be an integer, not a string" (cadr err))))
  (let ((err (should-error (mevedel-core--ptc-start "1" '(:tools ("Read") :steps 1))
                           :type 'mevedel-core-argument-error)))
    (should (string-match-p ":depth is required" (cadr err))))
  (should-error (mevedel-core--search-glob 0 '(:path "/" :path "/tmp"))
                :type 'mevedel-core-argument-error)
  (should-error (mevedel-core--search-glob 0 '(:path))
                :type 'mevedel-core-argument-error)
  (let ((err (should-error (mevedel-core--exec-start
                            0 '(:session "s" :owner "/root" :command "true" :cwd 5))
                           :type 'mevedel-core-exec-error)))
    (should (string-match-p "bad execution spec: :cwd" (cadr err))))
  ;; `:false' is false, as `json-serialize' has it, not a name.
  (should (eq (plist-get (mevedel-core--sandbox-decide
                          '(:command ("true") :mode "off" :network :false))
                         :boundary)
              'off)))

;;;; Event channel

(ert-deftest mevedel-core:channel-delivers-1000-events-in-order ()
  (let (result)
    (mevedel-core-channel-selftest 1000 (lambda (r) (setq result r)))
    (mevedel-test-wait-until result)
    (should (= (plist-get result :received) 1000))
    (should (plist-get result :in-order))))

(ert-deftest mevedel-core:channel-survives-a-100k-burst ()
  (let (result)
    (mevedel-core-channel-selftest 100000 (lambda (r) (setq result r)))
    (mevedel-test-wait-until result 30)
    (should (= (plist-get result :received) 100000))
    (should (plist-get result :in-order))))

(ert-deftest mevedel-core:handler-error-does-not-stop-dispatch ()
  (let ((seen nil))
    (mevedel-core-register-event-handler
     'selftest (lambda (n) (push n seen) (when (= n 1) (error "Handler bug"))))
    (unwind-protect
        (progn
          (mevedel-core--selftest-events 5)
          (mevedel-test-wait-until (= (length seen) 5)))
      (mevedel-core-register-event-handler 'selftest nil))
    (should (equal (nreverse seen) '(0 1 2 3 4)))))

(ert-deftest mevedel-core:round-trip-ping ()
  (let ((done nil))
    (mevedel-core-channel-ping (lambda () (setq done t)))
    (mevedel-test-wait-until done)))

(ert-deftest mevedel-core:deleted-channel-does-not-kill-emacs ()
  "Hazard 1: a worker writing after the pipe process is gone gets EPIPE."
  (let ((result (mevedel-test-run-emacs
                 '(progn
                    (require 'mevedel-core)
                    (mevedel-core-ensure)
                    ;; Delete the reader behind the module's back.
                    (delete-process mevedel-core--channel-process)
                    (mevedel-core--selftest-events 10)
                    (sleep-for 0.3)
                    (mevedel-core--selftest-events 10)
                    (sleep-for 0.3)
                    (princ (format "ALIVE dropped=%d" (mevedel-core--events-dropped)))))))
    (should (eql (car result) 0))
    (should (string-match-p "ALIVE dropped=[1-9]" (cdr result)))))

(ert-deftest mevedel-core:channel-descriptor-not-inherited ()
  "Hazard 2: Emacs's own children must not inherit the channel descriptor."
  (let ((result (mevedel-test-run-emacs
                 '(progn
                    (require 'mevedel-core)
                    (let ((fds (lambda ()
                                 (with-temp-buffer
                                   (call-process "sh" nil t nil "-c" "ls /proc/$$/fd")
                                   (split-string (buffer-string))))))
                      (let ((before (funcall fds)))
                        (mevedel-core-ensure)
                        (princ (format "%S %S" before (funcall fds)))))))))
    (should (eql (car result) 0))
    (let* ((lists (car (read-from-string (format "(%s)" (cdr result))))))
      (should (equal (car lists) (cadr lists))))))

(ert-deftest mevedel-core:children-stopped-when-emacs-exits ()
  "Hazard 3: finalizers do not run at exit, so `kill-emacs-hook' stops children."
  (let* ((result (mevedel-test-run-emacs
                  `(progn
                     (require 'mevedel-core)
                     (load ,(expand-file-name "test/mevedel-test-helpers.el" mevedel-test-root)
                           nil t)
                     (princ (mevedel-test-start-group "sh -c 'sleep 300 & sleep 300; wait'"))
                     (sleep-for 0.2)
                     (kill-emacs 0))))
         (pgid (string-to-number (cdr result))))
    (should (eql (car result) 0))
    (should (> pgid 1))
    (mevedel-test-wait-until (null (mevedel-test-group-members pgid)) 5)))

(ert-deftest mevedel-core:children-die-with-a-killed-emacs ()
  "Hazard 3: a SIGKILLed Emacs runs no hook; the parent-death signal acts."
  (let* ((out nil)
         (proc (make-process
                :name "mevedel-victim" :connection-type 'pipe
                :command (cons (expand-file-name invocation-name invocation-directory)
                               (mevedel-test-emacs-args
                                `(progn (require 'mevedel-core)
                                        (load ,(expand-file-name "test/mevedel-test-helpers.el"
                                                                 mevedel-test-root)
                                              nil t)
                                        (message "PID:%d" (mevedel-test-start-group "sleep 300"))
                                        (sleep-for 60))))
                :filter (lambda (_ s) (setq out (concat out s))))))
    (unwind-protect
        (progn
          (mevedel-test-wait-until (and out (string-match "PID:\\([0-9]+\\)" out)) 20)
          (let ((child (string-to-number (match-string 1 out))))
            (should (mevedel-test-pid-alive-p child))
            (signal-process proc 'SIGKILL)
            (mevedel-test-wait-until (not (mevedel-test-pid-alive-p child)) 5)))
      (delete-process proc))))

(ert-deftest mevedel-core:stop-all-processes ()
  (let ((pid (mevedel-test-start-group "sleep 300")))
    (should (memq pid (mevedel-core-live-process-groups)))
    (should (>= (mevedel-core-stop-all-processes 200) 1))
    (should-not (memq pid (mevedel-core-live-process-groups)))
    (should-not (mevedel-test-pid-alive-p pid))
    (mevedel-core-exec-teardown "test-group")))

(ert-deftest mevedel-core:start-failures-are-exec-failures ()
  ;; Refused before anything is spawned: an exec error at once.
  (let ((err (should-error (mevedel-core-exec-start
                            (list :session "core-test" :owner "/root"
                                  :command "sleep 1 & true")
                            #'ignore)
                           :type 'mevedel-core-exec-error)))
    (should (string-match-p "background operator" (cadr err))))
  ;; The shell cannot be started: the owner's error, reported as a
  ;; launch failure.
  (let ((obs nil))
    (mevedel-core-exec-start
     (list :session "core-test" :owner "/root" :command "true" :yield-ms 10000
           :environment '("PATH=/no/such/dir"))
     (lambda (_status value) (setq obs value)))
    (mevedel-test-wait-until obs 10)
    (let ((facts (plist-get obs :facts)))
      (should (equal (plist-get facts :termination) "launch-failed"))
      (should (string-match-p "cannot start the command" (plist-get facts :error))))))

;;;; Sandbox probe

(ert-deftest mevedel-core:sandbox-probe-finds-bwrap-and-landlock ()
  "`make test' machines must have both layers: say so loudly when not."
  (let (probe (done nil))
    (mevedel-core-sandbox-probe (lambda (p) (setq probe p done t)))
    (mevedel-test-wait-until done 10)
    (unless (plist-get probe :bwrap-works)
      (ert-fail (format "bubblewrap unusable: %s" (plist-get probe :bwrap-problem))))
    (unless (plist-get probe :landlock-abi)
      (ert-fail (format "Landlock unavailable: %s" (plist-get probe :landlock-problem))))
    (should (>= (plist-get probe :landlock-abi) 1))))

;;;; Dependencies

(ert-deftest mevedel-core:fetched-gptel-shadows-builtins ()
  (require 'gptel)
  (should (version<= "0.9.9" gptel-version))
  (should (string-match-p "/\\.deps/elpa/" (locate-library "gptel")))
  (should (string-match-p "/\\.deps/elpa/" (locate-library "transient")))
  (require 'transient)
  (should (version<= "0.7.8" transient-version)))

(defvar mevedel-save-sessions)

(ert-deftest mevedel-core:status-buffer-reports-everything ()
  (require 'mevedel)
  (save-window-excursion (mevedel-status))
  (with-current-buffer "*mevedel status*"
    (mevedel-test-wait-until
      (not (save-excursion (goto-char (point-min)) (search-forward "checking..." nil t))))
    (let ((text (buffer-string)))
      (should (string-match-p "Native module: +0\\.1\\.0" text))
      (should (string-match-p "1000 events received in order" text))
      (should (string-match-p "bubblewrap works" text))
      (should (string-match-p "No open session: start one with M-x mevedel" text))))
  ;; With a session open, the status names it instead.
  (let* ((root (file-name-as-directory (make-temp-file "mevedel-status-" t)))
         (mevedel-save-sessions nil)
         (view (mevedel root)))
    (unwind-protect
        (progn
          (save-window-excursion (mevedel-status))
          (with-current-buffer "*mevedel status*"
            (let ((text (buffer-string)))
              (should (string-match-p "Open session:\n  mevedel-status-.* (idle)" text))
              (should-not (string-match-p "start one" text)))))
      (let ((chat (mevedel-view-chat view)))
        (kill-buffer view)
        (kill-buffer (mevedel-chat-data-buffer chat)))
      (delete-directory root t))))

;;; core-test.el ends here
