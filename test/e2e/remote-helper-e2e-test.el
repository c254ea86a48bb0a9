;;; remote-helper-e2e-test.el --- The remote helper over a real sshd  -*- lexical-binding: t; -*-

;;; Commentary:

;; `mevedel-remote-helper' against a private sshd on 127.0.0.1
;; (mevedel-sshd.el): shipped once by hash, started through TRAMP, and
;; its Glob, Grep and Read compared with the local core's on the same
;; tree (the "remote" host is this machine, so host paths are local
;; paths); atomic writes; a connection killed under it; commands run
;; there with their output pushed as it comes, confined by bwrap and
;; Landlock, by Landlock alone, or (on a host without a sandbox) not.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'ert)
(require 'cl-lib)
(require 'mevedel-sshd)
(require 'mevedel-core)
(require 'mevedel-remote-helper)

(defmacro remote-helper-e2e--with-cache (var &rest body)
  "Run BODY with VAR a fresh helper cache directory on the (local) host."
  (declare (indent 1))
  `(let* ((,var (file-name-as-directory (make-temp-file "mevedel-rh-cache-" t)))
          (mevedel-remote-helper-cache-directory ,var))
     (unwind-protect (progn ,@body)
       (clrhash mevedel-remote-helper--connections)
       (delete-directory ,var t))))

(defun remote-helper-e2e--wait (getter &optional seconds)
  "Wait up to SECONDS (default 30) for GETTER to return non-nil; return it."
  (let ((deadline (+ (float-time) (or seconds 30)))
        value)
    (while (and (not (setq value (funcall getter))) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or value (ert-fail "timed out waiting"))))

(defun remote-helper-e2e--sync (start)
  "Call START with a callback; wait for it and return (STATUS VALUE).
A plist VALUE comes sorted by key, since JSON keeps no order."
  (let (result)
    (funcall start (lambda (status value) (setq result (list status value))))
    (pcase-let ((`(,status ,value) (remote-helper-e2e--wait (lambda () result))))
      (list status
            (if (and (eq status 'ok) (keywordp (car-safe value)))
                (apply #'append (sort (seq-partition value 2)
                                      (lambda (a b) (string< (car a) (car b)))))
              value)))))

(defun remote-helper-e2e--tree ()
  "Make a small project tree; return its directory (a truename, with /)."
  (let ((dir (file-name-as-directory (file-truename (make-temp-file "mevedel-rh-" t)))))
    (dolist (entry '(("src/main.rs" . "fn main() {\n    println!(\"hello\");\n}\n")
                     ("src/lib.rs" . "pub fn hello() -> &'static str {\n    \"hello\"\n}\n")
                     ("README.md" . "# Hello\n\nSay hello.\n")
                     ("target/debug.log" . "hello from the build\n")
                     (".gitignore" . "target/\n")))
      (let ((file (expand-file-name (car entry) dir)))
        (make-directory (file-name-directory file) t)
        (with-temp-file file (insert (cdr entry)))))
    (make-directory (expand-file-name ".git" dir))
    (with-temp-file (expand-file-name "big.txt" dir)
      (dotimes (i 5000) (insert (format "line %d of a big file\n" i))))
    dir))

(defun remote-helper-e2e--connect (sshd dir)
  "Return a ready helper connection for DIR on SSHD."
  (let* ((remote (mevedel-sshd-file sshd dir))
         result)
    (mevedel-remote-helper-ensure remote (lambda (c) (setq result c)))
    (let ((conn (remote-helper-e2e--wait (lambda () result))))
      (when (eq (car-safe conn) :error)
        (ert-fail (cadr conn)))
      conn)))

(ert-deftest remote-helper:searches-and-reads-match-the-local-core ()
  "Glob, Grep and Read through the helper equal the local core's answers."
  (mevedel-core-ensure)
  (remote-helper-e2e--with-cache _cache
   (mevedel-sshd-with sshd
    (let* ((dir (remote-helper-e2e--tree))
           (conn (remote-helper-e2e--connect sshd dir)))
      (unwind-protect
          (progn
            (should (equal (plist-get (mevedel-remote-helper--conn-hello conn) :arch)
                           (car (split-string system-configuration "-"))))
            (dolist (pattern '("**/*.rs" "*.md" "**/*.log" "nothing*"))
              (should (equal (remote-helper-e2e--sync
                              (lambda (cb) (mevedel-remote-helper-glob
                                            conn (list :path dir :display "" :pattern pattern) cb)))
                             (remote-helper-e2e--sync
                              (lambda (cb) (mevedel-core-search-glob dir "" pattern 0 cb))))))
            (dolist (options '((:pattern "hello" :output-mode "content" :line-numbers t)
                               (:pattern "HELLO" :case-insensitive t :output-mode "count")
                               (:pattern "hello" :glob "*.rs")
                               (:pattern "line 4[0-9]{3}" :output-mode "content" :head-limit 5
                                         :offset 2)))
              (let ((remote (remote-helper-e2e--sync
                             (lambda (cb) (mevedel-remote-helper-grep
                                           conn (list :path dir :display "w/" :options options) cb))))
                    (local (remote-helper-e2e--sync
                            (lambda (cb) (mevedel-core-search-grep dir "w/" options 0 cb)))))
                (should (eq (car remote) 'ok))
                (should-not (string-search "target/" (plist-get (cadr remote) :text)))
                (should (equal remote local)))
            (let ((file (expand-file-name "big.txt" dir)))
              (should (equal (remote-helper-e2e--sync
                              (lambda (cb) (mevedel-remote-helper-read
                                            conn file '(:display "big.txt" :offset 4000 :limit 3) cb)))
                             (remote-helper-e2e--sync
                              (lambda (cb) (mevedel-core-resource-read
                                            file "big.txt" '(:offset 4000 :limit 3) cb)))))
              (should (equal (remote-helper-e2e--sync
                              (lambda (cb) (mevedel-remote-helper-read
                                            conn file '(:bytes t :start 5 :length 4) cb)))
                             (list 'ok (list :bytes "0 of" :size (file-attribute-size
                                                                  (file-attributes file))))))
            (let ((missing (remote-helper-e2e--sync
                            (lambda (cb) (mevedel-remote-helper-read
                                          conn (expand-file-name "gone.txt" dir)
                                          '(:display "gone.txt") cb)))))
              (should (eq (car missing) 'error))
              (should (string-search "`gone.txt`" (cadr (cadr missing))))))))
        (delete-directory dir t))))))

(ert-deftest remote-helper:writes-atomically-keeping-the-mode ()
  "A write replaces the file in one rename, keeps its mode, refuses a stale hash."
  (mevedel-core-ensure)
  (remote-helper-e2e--with-cache _cache
   (mevedel-sshd-with sshd
    (let* ((dir (remote-helper-e2e--tree))
           (conn (remote-helper-e2e--connect sshd dir))
           (file (expand-file-name "src/main.rs" dir))
           (old (with-temp-buffer (insert-file-contents-literally file)
                                  (secure-hash 'sha256 (current-buffer)))))
      (unwind-protect
          (progn
            (set-file-modes file #o750)
            (let ((stale (remote-helper-e2e--sync
                          (lambda (cb) (mevedel-remote-helper-write
                                        conn file "x" '(:expect-hash "00") cb)))))
              (should (eq (car stale) 'error))
              (should (string-search "changed on the remote host" (cadr (cadr stale)))))
            (should (equal (remote-helper-e2e--sync
                            (lambda (cb) (mevedel-remote-helper-write
                                          conn file "fn main() { \"héllo\" }\n"
                                          (list :expect-hash old) cb)))
                           (list 'ok (list :hash (secure-hash 'sha256 "fn main() { \"h\303\251llo\" }\n")
                                           :size 23))))
            (should (equal (with-temp-buffer (insert-file-contents file) (buffer-string))
                           "fn main() { \"héllo\" }\n"))
            (should (= (file-modes file) #o750))
            (should-not (directory-files (file-name-directory file) nil "mevedel-")))
        (delete-directory dir t))))))

(ert-deftest remote-helper:a-lost-connection-fails-loudly-and-the-next-call-reconnects ()
  "Killing the connection fails pending calls naming the host; ensure starts anew.
The binary is shipped once: the second start finds it in the cache."
  (mevedel-core-ensure)
  (remote-helper-e2e--with-cache cache
   (mevedel-sshd-with sshd
    (let* ((dir (remote-helper-e2e--tree))
           (conn (remote-helper-e2e--connect sshd dir))
           (host (mevedel-remote-helper--conn-host conn))
           (shipped (directory-files cache t "\\`mevedel-remote-[0-9a-f]+\\'"))
           result)
      (unwind-protect
          (progn
            (should (= (length shipped) 1))
            (mevedel-remote-helper-grep conn (list :path dir :options '(:pattern "hello"))
                                        (lambda (s v) (setq result (list s v))))
            (mevedel-sshd-kill-connections sshd)
            (remote-helper-e2e--wait
             (lambda () (not (process-live-p (mevedel-remote-helper--conn-process conn)))))
            (let ((late (remote-helper-e2e--sync
                         (lambda (cb) (mevedel-remote-helper-read conn (concat dir "README.md")
                                                                  nil cb)))))
              (should (eq (car late) 'error))
              (should (string-search host (cadr (cadr late)))))
            (when result
              ;; The grep may have finished before the kill; if not, it failed naming the host.
              (unless (eq (car result) 'ok)
                (should (string-search host (cadr (cadr result))))))
            (let ((again (remote-helper-e2e--connect sshd dir)))
              (should-not (eq again conn))
              (should (eq (car (remote-helper-e2e--sync
                                (lambda (cb) (mevedel-remote-helper-glob
                                              again (list :path dir :pattern "*.md") cb))))
                          'ok)))
            (should (equal (directory-files cache t "\\`mevedel-remote-[0-9a-f]+\\'") shipped)))
        (delete-directory dir t))))))

(ert-deftest remote-helper:a-remote-command-yields-polls-and-stops ()
  "A command on the host yields with its output so far, takes stdin, and stops."
  (mevedel-core-ensure)
  (remote-helper-e2e--with-cache cache
   (mevedel-sshd-with sshd
    (let* ((dir (remote-helper-e2e--tree))
           (conn (remote-helper-e2e--connect sshd dir)))
      (unwind-protect
          (let* ((started (cadr (remote-helper-e2e--sync
                                 (lambda (cb) (mevedel-remote-helper-exec-start
                                               conn "pwd; read x; echo got $x; sleep 60" dir cb
                                               'required)))))
                 (run (plist-get started :run))
                 (first (cadr (remote-helper-e2e--sync
                               (lambda (cb) (mevedel-remote-helper-exec-poll
                                             conn run '(:yield-time-ms 3000) cb))))))
            (should (string-prefix-p cache (plist-get started :spool)))
            (should (eq (plist-get started :confined) t))
            ;; The host's own shell start-up may print first (a confined
            ;; rc file finding its directories read-only).
            (should (string-suffix-p (concat (directory-file-name dir) "\n")
                                     (plist-get first :output)))
            (should-not (plist-get first :exited))
            (remote-helper-e2e--sync
             (lambda (cb) (mevedel-remote-helper-exec-write-stdin conn run "hi\n" nil cb)))
            (should (equal (plist-get (cadr (remote-helper-e2e--sync
                                             (lambda (cb) (mevedel-remote-helper-exec-poll
                                                           conn run
                                                           (list :offset (plist-get first :next_offset)
                                                                 :yield-time-ms 3000)
                                                           cb))))
                                      :output)
                           "got hi\n"))
            (let ((stopped (cadr (remote-helper-e2e--sync
                                  (lambda (cb) (mevedel-remote-helper-exec-stop conn run cb))))))
              (should (plist-get stopped :exited))
              (should (eql (plist-get stopped :signal) 15))))
        (delete-directory dir t))))))

(ert-deftest remote-helper:a-remote-command-writes-only-its-workspace ()
  "Confined on the host: a write inside the workspace lands, one outside fails."
  (mevedel-core-ensure)
  (remote-helper-e2e--with-cache _cache
   (mevedel-sshd-with sshd
    (let* ((dir (remote-helper-e2e--tree))
           (conn (remote-helper-e2e--connect sshd dir))
           (outside (expand-file-name (format "mevedel-outside-%d" (emacs-pid))
                                      (or (getenv "MEVEDEL_ROOT") default-directory))))
      (unwind-protect
          (let* ((started (remote-helper-e2e--sync
                           (lambda (cb) (mevedel-remote-helper-exec-start
                                         conn (format "echo in > inside.txt; (echo out > %s) 2>/dev/null || echo refused"
                                                      outside)
                                         dir cb 'required))))
                 (run (plist-get (cadr started) :run))
                 (done (cadr (remote-helper-e2e--sync
                              (lambda (cb) (mevedel-remote-helper-exec-poll
                                            conn run '(:yield-time-ms 10000) cb))))))
            (should (eq (plist-get (cadr started) :confined) t))
            (should (string-suffix-p "refused\n" (plist-get done :output)))
            (should (file-exists-p (expand-file-name "inside.txt" dir)))
            (should-not (file-exists-p outside)))
        (ignore-errors (delete-file outside))
        (delete-directory dir t))))))

;;;; Streamed commands

(cl-defstruct (remote-helper-e2e--run (:constructor remote-helper-e2e--run-make)
                                      (:copier nil))
  "What one streamed run's handlers were told."
  started (output "") ends)

(defun remote-helper-e2e--stream (conn plist)
  "Start PLIST streamed on CONN; return the record its handlers fill."
  (let ((run (remote-helper-e2e--run-make)))
    (mevedel-remote-helper-exec-stream
     conn plist
     (list :started (lambda (answer) (setf (remote-helper-e2e--run-started run) answer))
           :output (lambda (data)
                     (setf (remote-helper-e2e--run-output run)
                           (concat (remote-helper-e2e--run-output run)
                                   (decode-coding-string (base64-decode-string data) 'utf-8))))
           :exited (lambda (code signal)
                     (push (list :exited code signal) (remote-helper-e2e--run-ends run)))
           :failed (lambda (message)
                     (push (list :failed message) (remote-helper-e2e--run-ends run)))))
    run))

(defun remote-helper-e2e--output (run text)
  "Wait until RUN's output ends with TEXT; fail if it ended first."
  (remote-helper-e2e--wait (lambda () (or (string-suffix-p text (remote-helper-e2e--run-output run))
                                          (remote-helper-e2e--run-ends run))))
  (should (string-suffix-p text (remote-helper-e2e--run-output run)))
  (should-not (remote-helper-e2e--run-ends run)))

(defun remote-helper-e2e--end (run)
  "Wait for RUN's one end, (:exited CODE SIGNAL) or (:failed MESSAGE)."
  (remote-helper-e2e--wait (lambda () (remote-helper-e2e--run-ends run)))
  ;; Exactly one, even after a while.
  (accept-process-output nil 0.3)
  (should (= (length (remote-helper-e2e--run-ends run)) 1))
  (car (remote-helper-e2e--run-ends run)))

(ert-deftest remote-helper:a-streamed-command-pushes-its-output-then-its-exit ()
  "Output arrives while the command runs; its exit, signal or a lost host ends it once."
  (mevedel-core-ensure)
  (remote-helper-e2e--with-cache _cache
   (mevedel-sshd-with sshd
    (let* ((dir (remote-helper-e2e--tree))
           (conn (remote-helper-e2e--connect sshd dir)))
      (unwind-protect
          (let ((talk (remote-helper-e2e--stream
                       conn (list :argv '("/bin/sh" "-c"
                                          "echo \"$GREETING\" \"$1\"; read x; echo got $x; exit 3"
                                          "sh" "an árg")
                                  :directory dir :env '("GREETING=hi there")
                                  :sandbox "required"))))
            (remote-helper-e2e--output talk "hi there an árg\n")
            (let ((started (remote-helper-e2e--run-started talk)))
              (should (eq (plist-get started :confined) t))
              (should (equal (plist-get started :confinement) "bubblewrap and Landlock")))
            (remote-helper-e2e--sync
             (lambda (cb) (mevedel-remote-helper-exec-write-stdin
                           conn (plist-get (remote-helper-e2e--run-started talk) :run)
                           "go\n" nil cb)))
            (should (equal (remote-helper-e2e--end talk) '(:exited 3 nil)))
            (should (equal (remote-helper-e2e--run-output talk) "hi there an árg\ngot go\n"))
            (let ((sleeper (remote-helper-e2e--stream
                            conn (list :argv '("/bin/sh" "-c" "echo up; sleep 60")
                                       :directory dir))))
              (remote-helper-e2e--output sleeper "up\n")
              (should (equal (remote-helper-e2e--sync
                              (lambda (cb) (mevedel-remote-helper-exec-signal
                                            conn (plist-get (remote-helper-e2e--run-started sleeper)
                                                            :run)
                                            "KILL" cb)))
                             '(ok (:sent t))))
              (should (equal (remote-helper-e2e--end sleeper) '(:exited nil "KILL"))))
            (let ((tty (remote-helper-e2e--stream
                        conn (list :argv '("/bin/true") :directory dir :tty t))))
              (pcase-let ((`(,kind ,message) (remote-helper-e2e--end tty)))
                (should (eq kind :failed))
                (should (string-search "tty" message))))
            (let ((lost (remote-helper-e2e--stream
                         conn (list :argv '("/bin/sh" "-c" "echo up; sleep 60")
                                    :directory dir))))
              (remote-helper-e2e--output lost "up\n")
              (mevedel-sshd-kill-connections sshd)
              (pcase-let ((`(,kind ,message) (remote-helper-e2e--end lost)))
                (should (eq kind :failed))
                (should (string-search (mevedel-remote-helper--conn-host conn) message)))))
        (delete-directory dir t))))))

(defun remote-helper-e2e--probe-writes (sshd dir no-sandbox sandbox)
  "Run a write probe in DIR under SANDBOX, the helper told NO-SANDBOX.
NO-SANDBOX is `MEVEDEL_REMOTE_NO_SANDBOX' for a helper started anew
on SSHD.  Return the run's record once it ended."
  (clrhash mevedel-remote-helper--connections)
  (let* ((process-environment (cons (concat "MEVEDEL_REMOTE_NO_SANDBOX=" no-sandbox)
                                    process-environment))
         (conn (remote-helper-e2e--connect sshd dir))
         (outside (expand-file-name (format "mevedel-outside-%d" (emacs-pid))
                                    (or (getenv "MEVEDEL_ROOT") default-directory)))
         (run (remote-helper-e2e--stream
               conn (list :argv (list "/bin/sh" "-c"
                                      (format "echo in > src/in.txt && echo inside-ok; \
(echo out > %s) 2>/dev/null || echo outside-refused; \
(echo x > .git/config) 2>/dev/null || echo git-refused" outside))
                          :directory dir :sandbox sandbox))))
    (unwind-protect (remote-helper-e2e--end run)
      (when (file-exists-p outside)
        (delete-file outside)
        (setf (remote-helper-e2e--run-output run)
              (concat (remote-helper-e2e--run-output run) "[outside was written]\n")))
      (delete-process (mevedel-remote-helper--conn-process conn)))
    run))

(ert-deftest remote-helper:each-sandbox-the-host-has-confines-and-none-is-said ()
  "Landlock alone confines as both do; a host without either refuses or says why."
  (mevedel-core-ensure)
  (remote-helper-e2e--with-cache _cache
   (mevedel-sshd-with sshd
    (let ((dir (remote-helper-e2e--tree)))
      (unwind-protect
          (progn
            (pcase-dolist (`(,no-sandbox ,confinement)
                           '(("" "bubblewrap and Landlock") ("bwrap" "Landlock")
                             ("landlock" "bubblewrap")))
              (let ((run (remote-helper-e2e--probe-writes sshd dir no-sandbox "required")))
                (should (equal (plist-get (remote-helper-e2e--run-started run) :confinement)
                               confinement))
                (should (equal (remote-helper-e2e--run-output run)
                               "inside-ok\noutside-refused\ngit-refused\n"))
                (should (equal (car (remote-helper-e2e--run-ends run)) '(:exited 0 nil)))))
            (let ((refused (remote-helper-e2e--probe-writes sshd dir "1" "required")))
              (should-not (remote-helper-e2e--run-started refused))
              (pcase-let ((`(:failed ,message) (car (remote-helper-e2e--run-ends refused))))
                (should (string-search "the sandbox is required" message))
                (should (string-search "MEVEDEL_REMOTE_NO_SANDBOX=1" message))))
            (let* ((open (remote-helper-e2e--probe-writes sshd dir "1" "best-effort"))
                   (started (remote-helper-e2e--run-started open)))
              (should-not (plist-get started :confined))
              (should-not (plist-get started :confinement))
              (should (string-search "MEVEDEL_REMOTE_NO_SANDBOX=1"
                                     (plist-get started :unconfined_reason)))
              (should (equal (remote-helper-e2e--run-output open)
                             "inside-ok\n[outside was written]\n"))))
        (delete-directory dir t))))))

(provide 'remote-helper-e2e-test)
;;; remote-helper-e2e-test.el ends here

