;;; sandbox-test.el --- Tests of the sandbox launch API  -*- lexical-binding: t; -*-

;;; Commentary:

;; The Lisp side of the sandbox: the helper's installation, the probe,
;; confined commands run the way the execution tools run them (a
;; managed execution whose spec carries the sandbox request, answered
;; through the event channel), `required' refusing and `best-effort'
;; disclosing when bwrap is missing, network denial and grants, the
;; summary facts, and the status buffer.  The full escape suite is the
;; cargo test (crates/mevedel-core/tests/sandbox_escape.rs).
;;
;; bwrap and Landlock are expected to work here: these tests fail, never
;; skip, when they do not.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-sandbox)

(defvar mevedel-sandbox-test--base nil
  "Directory of the current test's files (outside /tmp).")

(defmacro mevedel-sandbox-test--with-world (&rest body)
  "Run BODY with a workspace `ws' holding .git and an outside dir `out'.
The files live under target/tmp of the checkout, not under /tmp, where
bwrap's private /tmp would hide them."
  (declare (indent 0))
  `(let* ((mevedel-sandbox-test--base
           (progn
             (make-directory (expand-file-name "target/tmp" mevedel-test-root) t)
             (make-temp-file (expand-file-name "target/tmp/ert-sandbox-" mevedel-test-root) t)))
          (ws (file-name-as-directory (expand-file-name "ws" mevedel-sandbox-test--base)))
          (out (file-name-as-directory (expand-file-name "out" mevedel-sandbox-test--base))))
     (make-directory (expand-file-name ".git/hooks" ws) t)
     (make-directory (expand-file-name "sub" ws) t)
     (make-directory out t)
     (with-temp-file (expand-file-name ".git/config" ws) (insert "orig\n"))
     (with-temp-file (expand-file-name "target" out) (insert "orig\n"))
     (unwind-protect (progn ,@body)
       (delete-directory mevedel-sandbox-test--base t))))

(defun mevedel-sandbox-test--start (command cwd request callback)
  "Start the shell COMMAND in CWD as a managed execution under REQUEST.
REQUEST is a plist for `mevedel-sandbox-request'.  CALLBACK gets the
first observation, after at most 30 s.  Return the execution id."
  (mevedel-core-exec-start
   (list :session "sandbox-test" :owner "/root" :command command
         :description "sandbox test" :cwd (directory-file-name cwd) :yield-ms 30000
         :sandbox (mevedel-core-sandbox-object
                   (apply #'mevedel-sandbox-request :env nil request)))
   (lambda (_status value) (funcall callback value))))

(defun mevedel-sandbox-test--run (command cwd &rest request)
  "Run the shell COMMAND in CWD under the sandbox REQUEST plist.
Return its terminal observation (waits up to 30 s)."
  (let ((obs nil))
    (mevedel-sandbox-test--start command cwd request (lambda (o) (setq obs o)))
    (mevedel-test-wait-until obs 30)
    obs))

(defun mevedel-sandbox-test--facts (obs key)
  "Return KEY of the terminal facts of observation OBS."
  (plist-get (plist-get obs :facts) key))

(defun mevedel-sandbox-test--boundary (obs key)
  "Return KEY of the sandbox facts of observation OBS."
  (plist-get (plist-get obs :sandbox) key))

(defun mevedel-sandbox-test--contents (file)
  "Return FILE's contents, or nil when it does not exist."
  (when (file-exists-p file)
    (with-temp-buffer (insert-file-contents file) (buffer-string))))

;;;; Installation and probe

(ert-deftest mevedel-sandbox:helper-installed-next-to-module ()
  (mevedel-core-ensure)
  (should (file-executable-p (mevedel-core-build-helper-file)))
  (should (equal (file-name-directory (mevedel-core-build-helper-file))
                 (file-name-directory (mevedel-core-build-module-file)))))

(ert-deftest mevedel-sandbox:probe-finds-both-layers ()
  (let ((probe nil) (done nil))
    (mevedel-sandbox-probe (lambda (p) (setq probe p done t)) nil t)
    (mevedel-test-wait-until done 20)
    (should probe)
    (should (equal (plist-get probe :bwrap-problem) nil))
    (should (eq (plist-get probe :bwrap-works) t))
    (should (eq (plist-get probe :landlock-enforced) t))
    (should (integerp (plist-get probe :landlock-abi)))
    (should (null (plist-get probe :helper-problem)))))

;;;; Runs

(ert-deftest mevedel-sandbox:confined-run-answers-through-the-channel ()
  (mevedel-sandbox-test--with-world
    (let* ((start (float-time))
           (obs nil)
           (id (mevedel-sandbox-test--start
                (concat "sleep 0.3; echo made > sub/made; "
                        "echo evil > .git/config; "
                        "echo evil > " out "target; "
                        "echo done; exit 3")
                ws (list :writable (list ws))
                (lambda (o) (setq obs o)))))
      (should (stringp id))
      ;; The call returned at once; the answer comes later as an event.
      (should (< (- (float-time) start) 0.25))
      (should-not obs)
      (mevedel-test-wait-until obs 30)
      (should (equal (plist-get obs :state) "completed"))
      (should (eq (mevedel-sandbox-test--boundary obs :boundary) 'bwrap-landlock))
      (should (eq (mevedel-sandbox-test--boundary obs :start) 'started))
      (should (equal (mevedel-sandbox-test--boundary obs :landlock) "full"))
      (should (eql (mevedel-sandbox-test--facts obs :exit-code) 3))
      (should (string-match-p "done" (plist-get obs :output)))
      (should (string-match-p "Read-only file system" (plist-get obs :output)))
      (should (equal (mevedel-sandbox-test--contents (expand-file-name "sub/made" ws)) "made\n"))
      (should (equal (mevedel-sandbox-test--contents (expand-file-name ".git/config" ws)) "orig\n"))
      (should (equal (mevedel-sandbox-test--contents (expand-file-name "target" out)) "orig\n")))))

(ert-deftest mevedel-sandbox:landlock-only-layer-confines ()
  (mevedel-sandbox-test--with-world
    (let* ((home (expand-file-name "home" mevedel-sandbox-test--base))
           (key (expand-file-name ".ssh/id_rsa" home)))
      (make-directory (file-name-directory key) t)
      (with-temp-file key (insert "FAKE-KEY-93a1"))
      (let ((obs (mevedel-sandbox-test--run
                  (concat "cat " key "; echo evil > .git/config")
                  ws :writable (list ws) :home home
                  :backend 'landlock :mode 'required)))
        (should (eq (mevedel-sandbox-test--boundary obs :boundary) 'landlock))
        (should (eq (mevedel-sandbox-test--boundary obs :start) 'started))
        (should-not (string-match-p "FAKE-KEY" (plist-get obs :output)))
        (should (string-match-p "Permission denied" (plist-get obs :output)))
        (should (equal (mevedel-sandbox-test--contents (expand-file-name ".git/config" ws))
                       "orig\n"))))))

(ert-deftest mevedel-sandbox:required-refuses-without-bwrap ()
  (mevedel-sandbox-test--with-world
    (let* ((marker (expand-file-name "sub/ran" ws))
           (obs (mevedel-sandbox-test--run
                 (concat "touch " marker)
                 ws :writable (list ws)
                 :mode 'required :path "/nonexistent-bin")))
      (should (eq (mevedel-sandbox-test--boundary obs :boundary) 'refused))
      (should (eq (mevedel-sandbox-test--boundary obs :start) 'refused))
      (should (equal (mevedel-sandbox-test--facts obs :termination) "launch-failed"))
      (should (string-match-p "required" (mevedel-sandbox-test--facts obs :error)))
      (should (string-match-p "bwrap is not installed" (mevedel-sandbox-test--facts obs :error)))
      (should-not (file-exists-p marker)))))

(ert-deftest mevedel-sandbox:best-effort-discloses-without-bwrap ()
  (mevedel-sandbox-test--with-world
    (let* ((marker (expand-file-name "sub/ran" ws))
           (obs (mevedel-sandbox-test--run
                 (concat "touch " marker)
                 ws :writable (list ws)
                 :mode 'best-effort :path "/nonexistent-bin")))
      (should (eq (mevedel-sandbox-test--boundary obs :boundary) 'landlock))
      (should (eq (mevedel-sandbox-test--boundary obs :start) 'started))
      (should (string-match-p "Landlock only" (mevedel-sandbox-test--boundary obs :disclosure)))
      (should (string-match-p "bwrap is not installed"
                              (mevedel-sandbox-test--boundary obs :disclosure)))
      (should (file-exists-p marker))
      (delete-file marker)
      ;; No layer at all (the helper is missing too): run directly, say so.
      (let ((direct (mevedel-sandbox-test--run
                     (concat "touch " marker)
                     ws :writable (list ws)
                     :mode 'best-effort :path "/nonexistent-bin"
                     :helper "/nonexistent/mevedel-sandbox")))
        (should (eq (mevedel-sandbox-test--boundary direct :boundary) 'unconfined))
        (should (string-match-p "ran unconfined"
                                (mevedel-sandbox-test--boundary direct :disclosure)))
        (should (file-exists-p marker))))))

(ert-deftest mevedel-sandbox:network-denied-unless-granted ()
  (mevedel-sandbox-test--with-world
    (let* ((connections 0)
           (server (make-network-process
                    :name "mevedel-sandbox-test-listener" :server t
                    :host "127.0.0.1" :service t :family 'ipv4 :noquery t
                    :sentinel #'ignore
                    :log (lambda (&rest _) (cl-incf connections))))
           (port (process-contact server :service))
           (script (format "exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED" port)))
      (unwind-protect
          (let ((denied (mevedel-sandbox-test--run script ws :writable (list ws)))
                (granted (mevedel-sandbox-test--run script ws :writable (list ws)
                                                    :network t)))
            (should (eq (mevedel-sandbox-test--boundary denied :network) 'denied))
            (should-not (string-match-p "CONNECTED" (plist-get denied :output)))
            (should (eq (mevedel-sandbox-test--boundary granted :network) 'granted))
            (should (string-match-p "CONNECTED" (plist-get granted :output)))
            (mevedel-test-wait-until (= connections 1) 5))
        (delete-process server)))))

;;;; Requests

(ert-deftest mevedel-sandbox:prepare-describes-the-launch ()
  (mevedel-sandbox-test--with-world
    (let* ((plan (mevedel-sandbox-prepare (list :command '("true") :cwd ws :writable (list ws))))
           (argv (plist-get plan :argv))
           (git (directory-file-name (file-truename (expand-file-name ".git" ws)))))
      (should (eq (plist-get plan :boundary) 'bwrap-landlock))
      (should (string-suffix-p "/bwrap" (car argv)))
      (should (member "--unshare-all" argv))
      (should-not (member "--share-net" argv))
      (should (cl-search (list "--ro-bind" git git) argv :test #'equal))
      (should (equal (last argv 2) '("--" "true"))))))

(ert-deftest mevedel-sandbox:bad-requests-are-named ()
  (mevedel-core-ensure)
  (let ((err (should-error (mevedel-core-sandbox-prepare '(:command ("true") :wrtable ("/")))
                           :type 'mevedel-core-sandbox-error)))
    (should (string-match-p ":wrtable" (cadr err))))
  (let ((err (should-error (mevedel-core-sandbox-prepare '(:command ("true") :mode sometimes))
                           :type 'mevedel-core-sandbox-error)))
    (should (string-match-p "sometimes" (cadr err))))
  (let ((err (should-error (mevedel-sandbox-prepare
                            '(:command ("true") :writable ("/nonexistent/ws")))
                           :type 'mevedel-core-sandbox-error)))
    (should (string-match-p "writable root /nonexistent/ws" (cadr err)))))

;;;; Summary facts

(ert-deftest mevedel-sandbox:summary-counts-without-paths ()
  (let* ((ok '(:boundary bwrap-landlock :start started :network denied
               :extra-writes 0 :extra-reads 2 :output "/secret/path"))
         (summary (mevedel-sandbox-summary-add nil ok)))
    (should (equal summary '(:attempts 1 :starts 1 :refusals 0 :start-failures 0
                             :boundaries (bwrap-landlock) :network-grants 0
                             :open-sockets 0 :extra-write-mounts 0 :extra-read-mounts 2)))
    ;; Defaults and extra read-only mounts stay silent.
    (should-not (mevedel-sandbox-summary-warning summary))
    (setq summary (mevedel-sandbox-summary-add
                   summary '(:boundary landlock :start started :network granted
                             :extra-writes 1 :extra-reads 0)))
    (setq summary (mevedel-sandbox-summary-add
                   summary '(:boundary refused :start refused :network denied
                             :extra-writes 0 :extra-reads 0)))
    (setq summary (mevedel-sandbox-summary-add
                   summary '(:boundary bwrap-landlock :start exec-failed :network denied)))
    (setq summary (mevedel-sandbox-summary-add
                   summary '(:boundary bwrap-landlock :start started :network denied
                             :sockets "open")))
    (should (equal (plist-get summary :attempts) 5))
    (should (equal (plist-get summary :starts) 3))
    (should (equal (plist-get summary :refusals) 1))
    (should (equal (plist-get summary :start-failures) 1))
    (should (equal (plist-get summary :boundaries) '(bwrap-landlock landlock refused)))
    (should (equal (mevedel-sandbox-summary-warning summary)
                   (concat "sandbox: Landlock only, 1 refused, 1 never started, "
                           "network allowed, Unix sockets not blocked, 1 extra writable path")))
    (should-not (string-match-p "/" (format "%S" summary)))
    (let ((data (mevedel-sandbox-render-data '(:preview "x") summary)))
      (should (equal (plist-get data :preview) "x"))
      (should (eq (plist-get data :sandbox-summary) summary)))
    (should (equal (mevedel-sandbox-render-data '(:a 1) nil) '(:a 1)))))

(ert-deftest mevedel-sandbox:unconfined-boundaries-warn ()
  (dolist (case '((unconfined . "unconfined (no sandbox layer works)")
                  (off . "unconfined (sandbox off)")
                  (escalated . "escalated outside the sandbox")))
    (should (equal (mevedel-sandbox-summary-warning
                    (mevedel-sandbox-summary-add
                     nil (list :boundary (car case) :start 'started :network 'granted)))
                   (concat "sandbox: " (cdr case))))))

;;;; Status

(ert-deftest mevedel-sandbox:status-shows-layers-and-boundary ()
  (let ((help-window-select nil))
    (when-let* ((old (get-buffer "*Help*"))) (kill-buffer old))
    (mevedel-sandbox-status)
    (mevedel-test-wait-until
      (and (get-buffer "*Help*")
           (with-current-buffer "*Help*"
             (string-match-p "Commands now run" (buffer-string))))
      20)
    (with-current-buffer "*Help*"
      (let ((text (buffer-string)))
        (should (string-match-p "Mode: +best-effort" text))
        (should (string-match-p "bubblewrap +works +/.*bwrap" text))
        (should (string-match-p "Landlock +works +kernel ABI [0-9]+" text))
        (should (string-match-p "helper +works" text))
        (should (string-match-p "Commands now run: bwrap-landlock" text))))))

(ert-deftest mevedel-sandbox:status-gives-advice-when-bwrap-is-missing ()
  (let ((probe '(:bwrap-works nil :bwrap-problem "bwrap is not installed (Debian/Ubuntu: apt install bubblewrap)"
                 :landlock-enforced t :landlock-abi 6 :helper-path "/m/mevedel-sandbox")))
    (with-temp-buffer
      (mevedel-sandbox--insert-status
       probe '(:boundary refused :refusal "not run: mevedel-sandbox-mode is required but bwrap is not installed"))
      (should (string-match-p "bubblewrap +unavailable +bwrap is not installed.*apt install bubblewrap"
                              (buffer-string)))
      (should (string-match-p "Commands now run: refused" (buffer-string)))
      (should (string-match-p "not run: mevedel-sandbox-mode is required" (buffer-string))))))

(provide 'sandbox-test)
;;; sandbox-test.el ends here
