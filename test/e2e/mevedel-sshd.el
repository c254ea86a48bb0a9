;;; mevedel-sshd.el --- A private sshd for the remote tests  -*- lexical-binding: t; -*-

;;; Commentary:

;; Start a real OpenSSH server on 127.0.0.1 for one test: a free port,
;; its own host key, user key and authorized_keys in a temp directory,
;; no PAM, the current user (root included, with that key only) let in.
;; TRAMP reaches it through a generated ssh_config handed to every ssh
;; it runs (`-F'), under a host alias unique to the server, so the
;; tests' file names read /ssh:ALIAS:/path.  The same settings go into
;; a --config file for a headless `bin/mevedel --dir /ssh:...'.
;;
;; Also: a TCP listener that accepts and never answers (a hung host),
;; a host alias whose login asks for a password, and killing the
;; server's connections (a host lost mid-turn).
;;
;; Not here: what the tests assert; anything the product does.  A
;; missing sshd fails the test (never skips).

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'tramp)

(defvar tramp-use-connection-share)
(defvar tramp-ssh-controlmaster-options)

(defconst mevedel-sshd-program "/usr/sbin/sshd"
  "Debian's OpenSSH server, installed by scripts/deps.sh.")

(cl-defstruct (mevedel-sshd (:constructor mevedel-sshd--make))
  "A running test sshd."
  process port dir alias user config)

(defun mevedel-sshd--free-port ()
  "Return a TCP port on 127.0.0.1 nobody listens on just now."
  (let* ((probe (make-network-process :name "mevedel-sshd-probe" :server t
                                      :host "127.0.0.1" :service t :noquery t))
         (port (process-contact probe :service)))
    (delete-process probe)
    port))

(defun mevedel-sshd--run (program &rest args)
  "Run PROGRAM with ARGS; fail the test with its output unless it exits 0."
  (with-temp-buffer
    (let ((status (apply #'call-process program nil t nil args)))
      (unless (eql status 0)
        (ert-fail (format "%s %S failed (%s): %s" program args status (buffer-string)))))))

(defun mevedel-sshd--write (file text)
  "Write TEXT to FILE."
  (with-temp-file file (insert text)))

(defun mevedel-sshd--client-config (alias port user key)
  "Return ssh_config text for ALIAS reaching 127.0.0.1:PORT as USER by KEY."
  (format "Host %s
  HostName 127.0.0.1
  Port %d
  User %s
  IdentityFile %s
  IdentitiesOnly yes
  PasswordAuthentication no
  KbdInteractiveAuthentication no
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
"
          alias port user key))

(defun mevedel-sshd-start ()
  "Start a private sshd on 127.0.0.1 and point TRAMP at it.
Return the `mevedel-sshd'; stop it with `mevedel-sshd-stop'."
  (unless (file-executable-p mevedel-sshd-program)
    (ert-fail (format "%s is missing: install openssh-server (scripts/deps.sh)"
                      mevedel-sshd-program)))
  (unless (executable-find "ssh-keygen")
    (ert-fail "ssh-keygen is missing: install openssh-client (scripts/deps.sh)"))
  ;; Privilege separation needs this directory when sshd runs as root.
  (when (zerop (user-uid))
    (make-directory "/run/sshd" t))
  (let* ((dir (file-name-as-directory (make-temp-file "mevedel-sshd-" t)))
         (user (user-login-name))
         (port (mevedel-sshd--free-port))
         (alias (format "mevedel-sshd-%d" port))
         (key (expand-file-name "id_ed25519" dir))
         (config (expand-file-name "ssh_config" dir))
         (sshd-config (expand-file-name "sshd_config" dir)))
    (set-file-modes dir #o700)
    (mevedel-sshd--run "ssh-keygen" "-q" "-t" "ed25519" "-N" "" "-C" "host"
                       "-f" (expand-file-name "host_ed25519" dir))
    (mevedel-sshd--run "ssh-keygen" "-q" "-t" "ed25519" "-N" "" "-C" "user" "-f" key)
    (copy-file (concat key ".pub") (expand-file-name "authorized_keys" dir))
    (mevedel-sshd--write
     sshd-config
     (format "Port %d
ListenAddress 127.0.0.1
HostKey %shost_ed25519
PidFile %ssshd.pid
AuthorizedKeysFile %sauthorized_keys
AllowUsers %s
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication yes
KbdInteractiveAuthentication no
PermitEmptyPasswords no
UsePAM no
StrictModes no
PrintMotd no
LogLevel INFO
Subsystem sftp internal-sftp
"
             port dir dir dir user))
    (mevedel-sshd--write config (mevedel-sshd--client-config alias port user key))
    (let* ((buffer (generate-new-buffer " *mevedel-sshd*"))
           (process (make-process :name "mevedel-sshd" :buffer buffer :noquery t
                                  :connection-type 'pipe
                                  :command (list mevedel-sshd-program "-D" "-e"
                                                 "-f" sshd-config)))
           (sshd (mevedel-sshd--make :process process :port port :dir dir
                                     :alias alias :user user :config config))
           (deadline (+ (float-time) 10)))
      (while (and (process-live-p process)
                  (not (with-current-buffer buffer
                         (save-excursion (goto-char (point-min))
                                         (search-forward "Server listening" nil t))))
                  (< (float-time) deadline))
        (accept-process-output process 0.05))
      (unless (with-current-buffer buffer
                (save-excursion (goto-char (point-min))
                                (search-forward "Server listening" nil t)))
        (let ((log (with-current-buffer buffer (buffer-string))))
          (mevedel-sshd-stop sshd)
          (ert-fail (format "sshd did not start: %s" log))))
      (mevedel-sshd-apply sshd)
      sshd)))

(defun mevedel-sshd-tramp-forms (sshd)
  "Return the forms that point TRAMP at SSHD, for a --config file too.
Every ssh TRAMP runs (ssh, scp, rsync methods) reads SSHD's generated
ssh_config; the connections share one master per host, so a test run
opens one ssh login per host."
  (let ((control (expand-file-name "cm-%%C" (mevedel-sshd-dir sshd))))
    `((require 'tramp)
      (setq tramp-use-connection-share t
            tramp-ssh-controlmaster-options
            ,(format "-F %s -o ControlMaster=auto -o ControlPath=%s -o ControlPersist=no"
                     (mevedel-sshd-config sshd) control)))))

(defun mevedel-sshd-hop-forms (sshd)
  "Return forms letting multi-hop names reach SSHD, for a --config file too.
TRAMP gives `tramp-ssh-controlmaster-options' (and so SSHD's ssh_config)
to the first hop only, and not at all when the last hop's method is not
ssh's (a /ssh:...|sudo:... name): here every ssh of the `ssh' method
reads that config, so a hop run on the host (this machine) knows SSHD's
aliases too.  `mevedel-sshd-stop' puts `tramp-methods' back."
  `((require 'tramp)
    (let ((ssh (assoc "ssh" tramp-methods)))
      (setf (alist-get 'tramp-login-args (cdr ssh))
            (list (cons '("-F" ,(mevedel-sshd-config sshd))
                        (car (alist-get 'tramp-login-args (cdr ssh)))))))))

(defun mevedel-sshd-inner-alias (sshd)
  "Add to SSHD's ssh_config a second alias of SSHD; return it.
A multi-hop name /ssh:ALIAS|ssh:INNER: then logs in twice, the second
login run on the first hop's host."
  (let ((alias (concat (mevedel-sshd-alias sshd) "-inner")))
    (with-temp-buffer
      (insert (mevedel-sshd--client-config alias (mevedel-sshd-port sshd) (mevedel-sshd-user sshd)
                                           (expand-file-name "id_ed25519" (mevedel-sshd-dir sshd))))
      (append-to-file (point-min) (point-max) (mevedel-sshd-config sshd)))
    alias))

(defun mevedel-sshd-apply (sshd)
  "Point this Emacs's TRAMP at SSHD."
  (dolist (form (mevedel-sshd-tramp-forms sshd))
    (eval form t)))

(defun mevedel-sshd-file (sshd path &optional method)
  "Return the TRAMP name of host-side PATH on SSHD by METHOD (default ssh)."
  (format "/%s:%s:%s" (or method "ssh") (mevedel-sshd-alias sshd) path))

(defun mevedel-sshd--children (pid)
  "Return the PIDs of PID's child processes."
  (let (children)
    (dolist (task (ignore-errors (directory-files (format "/proc/%d/task" pid) nil "\\`[0-9]")))
      (let ((file (format "/proc/%d/task/%s/children" pid task)))
        (when (file-readable-p file)
          (with-temp-buffer
            (insert-file-contents file)
            (setq children (append children (mapcar #'string-to-number
                                                    (split-string (buffer-string)))))))))
    children))

(defun mevedel-sshd-kill-connections (sshd)
  "Kill every connection SSHD serves, keeping it listening.
Each connection is a child process of the listener; killing them by
PID is what a network drop looks like to the client."
  (let ((pid (process-id (mevedel-sshd-process sshd))))
    (dolist (child (mevedel-sshd--children pid))
      (ignore-errors (signal-process child 'KILL)))))

(defun mevedel-sshd-stop (sshd)
  "Stop SSHD and its connections by PID, and remove its directory."
  (let ((process (mevedel-sshd-process sshd)))
    (when (process-live-p process)
      (mevedel-sshd-kill-connections sshd)
      (signal-process (process-id process) 'KILL)
      (let ((deadline (+ (float-time) 5)))
        (while (and (process-live-p process) (< (float-time) deadline))
          (accept-process-output process 0.05))))
    (when (buffer-live-p (process-buffer process))
      (kill-buffer (process-buffer process)))
    (ignore-errors (tramp-cleanup-connection
                    (tramp-dissect-file-name (mevedel-sshd-file sshd "/"))
                    nil t))
    ;; Later tests of this Emacs get TRAMP's own defaults back.
    (dolist (var '(tramp-use-connection-share tramp-ssh-controlmaster-options))
      (set var (eval (car (get var 'standard-value)) t)))
    (let ((ssh (assoc "ssh" tramp-methods)))
      (setf (alist-get 'tramp-login-args (cdr ssh))
            (list (cl-remove (list "-F" (mevedel-sshd-config sshd))
                             (car (alist-get 'tramp-login-args (cdr ssh))) :test #'equal))))
    ;; Multi-hop names leave their hops behind (ad hoc proxies).
    (setq tramp-default-proxies-alist
          (cl-remove-if (lambda (proxy) (get-text-property 0 'tramp-ad-hoc (nth 2 proxy)))
                        tramp-default-proxies-alist))
    (delete-directory (mevedel-sshd-dir sshd) t)))

(defmacro mevedel-sshd-with (var &rest body)
  "Run BODY with VAR bound to a fresh `mevedel-sshd', stopped afterwards."
  (declare (indent 1))
  `(let ((,var (mevedel-sshd-start)))
     (unwind-protect (progn ,@body)
       (mevedel-sshd-stop ,var))))

(defun mevedel-sshd-black-hole (sshd)
  "Add to SSHD's ssh_config a host that accepts TCP and never answers.
Return (ALIAS . LISTENER); delete LISTENER (a server process of this
Emacs that reads nothing and writes nothing) when done."
  (let* ((listener (make-network-process :name "mevedel-black-hole" :server t
                                         :host "127.0.0.1" :service t :noquery t
                                         :filter #'ignore :sentinel #'ignore))
         (port (process-contact listener :service))
         (alias (format "mevedel-hole-%d" port)))
    (with-temp-buffer
      (insert (format "Host %s\n  HostName 127.0.0.1\n  Port %d\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
                      alias port))
      (append-to-file (point-min) (point-max) (mevedel-sshd-config sshd)))
    (cons alias listener)))

(defun mevedel-sshd-password-alias (sshd)
  "Add to SSHD's ssh_config a host alias whose login asks for a password.
It reaches SSHD without the test key, so the server asks for a password,
which no answer passes: the key is the only way in.  Return the alias."
  (let ((alias (format "mevedel-password-%d" (mevedel-sshd-port sshd))))
    (with-temp-buffer
      (insert (format "Host %s\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  PubkeyAuthentication no\n  PasswordAuthentication yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
                      alias (mevedel-sshd-port sshd) (mevedel-sshd-user sshd)))
      (append-to-file (point-min) (point-max) (mevedel-sshd-config sshd)))
    alias))

(provide 'mevedel-sshd)
;;; mevedel-sshd.el ends here
