;;; sandbox-escape-test.el --- Attacks on the sandbox, each with a control  -*- lexical-binding: t; -*-

;;; Commentary:

;; Each attack of issue 16 items 1-5, run as a model's Bash call in both
;; layers (bubblewrap + Landlock, and Landlock alone), with a control
;; showing the same attack works where the boundary is not in its way.
;; The layers run in `required' mode: a layer that does not work here
;; refuses the command and the test fails loudly, never skips.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-tool-exec)
(require 'mevedel-view)
(require 'server)

(defvar sandbox-escape-test--n 0)

(defvar sandbox-escape-test--pwned nil
  "Set by a command that reached this Emacs's server.")

(defvar sandbox-escape-test--root
  (file-name-directory (directory-file-name
                        (file-name-directory (or load-file-name buffer-file-name))))
  "The checkout, where directories outside /tmp can be made.")

(defconst sandbox-escape-test--layers
  '((bwrap-landlock . auto) (landlock . landlock))
  "Each layer under test and the `mevedel-sandbox-backend' that gives it.")

(defmacro sandbox-escape-test--with-workspace (var &rest body)
  "Run BODY with VAR a fresh workspace that is the execution context's cwd."
  (declare (indent 1))
  (let ((dir (make-symbol "dir")))
    `(let* ((,dir (file-name-as-directory (make-temp-file "sbx-escape-ws" t)))
            (,var ,dir)
            (ctx (list :session (format "sbx-escape-%d" (cl-incf sandbox-escape-test--n))
                       :owner "/root" :cwd ,dir))
            (mevedel-tool-exec-context-function (lambda () ctx)))
       (unwind-protect (progn ,@body)
         (mevedel-core-exec-teardown (plist-get ctx :session))
         (delete-directory ,dir t)))))

(defmacro sandbox-escape-test--in-each-layer (layer &rest body)
  "Run BODY once per layer, with LAYER bound to its boundary symbol."
  (declare (indent 1))
  `(dolist (pair sandbox-escape-test--layers)
     (let ((,layer (car pair))
           (mevedel-sandbox-mode 'required)
           (mevedel-sandbox-backend (cdr pair)))
       (ert-info ((format "layer %s" ,layer))
         ,@body))))

(defun sandbox-escape-test--bash (command &rest args)
  "Run COMMAND through the Bash handler with ARGS; return the answer."
  (let ((box (list nil)))
    (mevedel-tool-exec-bash (lambda (v) (setcar box (list v)))
                            (append (list :command command :description "attack"
                                          :yield_time_ms 20000)
                                    args))
    (mevedel-test-wait-until (car box) 30)
    (caar box)))

(defun sandbox-escape-test--text (answer)
  "Return the model-visible text of ANSWER."
  (if (stringp answer) answer (plist-get answer :result)))

(defun sandbox-escape-test--confined (layer command &rest args)
  "Run COMMAND (with ARGS) confined in LAYER; return its text.
Fail unless it ran, and ran in LAYER."
  (let ((text (sandbox-escape-test--text
               (apply #'sandbox-escape-test--bash
                      (concat "echo ran-confined; " command) args))))
    (should (string-match-p "^ran-confined$" text))
    (if (eq layer 'landlock)
        (should (string-match-p "Note: this command was confined by Landlock only" text))
      (should-not (string-match-p "^Note: .*\\(sandbox\\|Landlock\\)" text)))
    text))

(defun sandbox-escape-test--unconfined (command &rest args)
  "Run COMMAND (with ARGS) with the sandbox off; return its text."
  (let* ((mevedel-sandbox-mode 'off)
         (text (sandbox-escape-test--text (apply #'sandbox-escape-test--bash command args))))
    (should (string-match-p "Note: the sandbox is off" text))
    text))

(defun sandbox-escape-test--read (file)
  "Return FILE's contents, or nil when it does not exist."
  (and (file-exists-p file)
       (with-temp-buffer (insert-file-contents file) (buffer-string))))

;;;; 1. Nothing the launcher trusts is writable by the command

(defconst sandbox-escape-test--forge-markers
  "for p in /proc/[0-9]*; do
  [ \"${p#/proc/}\" = \"$$\" ] && continue
  case \"$(cat $p/comm 2>/dev/null)\" in
    mevedel-sandbo*|bwrap)
      for f in $p/fd/*; do
        [ -e \"$f\" ] || continue
        { printf 'refused forged\\nexited status=0\\n' > \"$f\"; } 2>/dev/null && echo \"FORGED $f\"
      done;;
  esac
done; exit 3"
  "Write forged start markers into every descriptor of the helper and bwrap.")

(ert-deftest mevedel-sandbox-escape:start-markers-cannot-be-forged ()
  (mevedel-core-ensure)
  (sandbox-escape-test--with-workspace _ws
    (sandbox-escape-test--in-each-layer layer
      ;; The control: the same technique reaches an ordinary process in
      ;; the same sandbox (a pipe held by `sleep', reopened through /proc).
      (let ((text (sandbox-escape-test--confined
                   layer
                   "sleep 1 | { for p in /proc/[0-9]*; do \
[ \"$(cat $p/comm 2>/dev/null)\" = sleep ] && echo via-proc > $p/fd/1; done; cat; }")))
        (should (string-match-p "^via-proc$" text)))
      ;; The attack on the helper's start pipe: nothing reaches it, and the
      ;; command's own exit stands.
      (let ((text (sandbox-escape-test--confined layer sandbox-escape-test--forge-markers)))
        (should-not (string-match-p "^FORGED /proc" text))
        (should (string-match-p "exit_code=\"3\"" text))
        (should (string-match-p "termination=\"exit\"" text))))))

(ert-deftest mevedel-sandbox-escape:pipeline-statuses-cannot-be-forged ()
  (mevedel-core-ensure)
  (sandbox-escape-test--with-workspace ws
    (let ((forge "printf '0 0 0\\n' >&63; false | false")
          (forge-alone "printf '0 0 0\\n' >&63; exec 63>&-; false | false")
          (reopen "printf '0 0 0\\n' > /proc/self/fd/63; false | false"))
      ;; The control: unconfined, the shell's descriptor is the record.
      (should (string-match-p "pipeline_exit_codes=\"0 0\""
                              (sandbox-escape-test--unconfined forge)))
      (sandbox-escape-test--in-each-layer layer
        ;; The snapshot still works...
        (should (string-match-p "pipeline_exit_codes=\"1 0\""
                                (sandbox-escape-test--confined layer "false | true")))
        ;; ...a line of the command's own next to it, alone, or through
        ;; /proc is refused, and the exit stays the command's.
        (dolist (attack (list forge forge-alone reopen))
          (let ((text (sandbox-escape-test--confined layer attack)))
            (should-not (string-match-p "pipeline_exit_codes=\"0 0\"" text))
            (should (string-match-p "exit_code=\"1\"" text))))
        ;; No descriptor onto mevedel's storage reaches the command.
        (let ((text (sandbox-escape-test--confined
                     layer "ls -l /proc/self/fd/ | grep -c 'tool-results\\|\\.status'; true | true")))
          (should (string-match-p "^0$" text))))
      (should-not (directory-files ws nil "\\.status\\'")))))

;;;; 2. No Emacs server, no other pathname socket

(defmacro sandbox-escape-test--with-server (name-var &rest body)
  "Run BODY with this Emacs serving on a socket named NAME-VAR.
XDG_RUNTIME_DIR is a fresh directory, as on a desktop session."
  (declare (indent 1))
  `(let* ((runtime (make-temp-file "sbx-escape-run" t))
          (process-environment (cons (concat "XDG_RUNTIME_DIR=" runtime) process-environment))
          (server-socket-dir (expand-file-name "emacs" runtime))
          (server-name (format "sbx-escape-%d" (emacs-pid)))
          (,name-var server-name))
     (unwind-protect
         (progn (server-start) (should (server-running-p server-name)) ,@body)
       (server-force-delete server-name)
       (delete-directory runtime t))))

(defun sandbox-escape-test--listener (dir)
  "Return a Unix socket server listening in DIR (outside every writable root)."
  (make-network-process :name "sbx-escape-unix" :server t :family 'local
                        :service (expand-file-name "agent.sock" dir) :noquery t
                        :filter (lambda (proc _text) (process-send-string proc "PONG\n"))))

(defun sandbox-escape-test--connect (path)
  "Return Bash source that connects to the Unix socket PATH and talks."
  (format "python3 -c 'import socket,sys
s=socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1]); s.sendall(b\"ping\\n\")
print(\"CONNECTED\", s.recv(10).decode().strip())' %s 2>&1 || true"
          (shell-quote-argument path)))

(ert-deftest mevedel-sandbox-escape:no-emacs-server-or-unix-socket ()
  (mevedel-core-ensure)
  (sandbox-escape-test--with-workspace _ws
    (sandbox-escape-test--with-server name
      (let* ((outside (make-temp-file (expand-file-name "target/sbx-escape-out"
                                                        sandbox-escape-test--root)
                                      t))
             (agent (sandbox-escape-test--listener outside))
             (socket (expand-file-name name server-socket-dir))
             (client (format "emacsclient -s %s --eval '(setq sandbox-escape-test--pwned t)' \
2>&1; echo client=$?" (shell-quote-argument name))))
        (unwind-protect
            (progn
              ;; The control: unconfined, the server evaluates the form and
              ;; the other socket answers.
              (setq sandbox-escape-test--pwned nil)
              (let ((text (sandbox-escape-test--unconfined client)))
                (should (string-match-p "client=0" text))
                (mevedel-test-wait-until sandbox-escape-test--pwned 10)
                (should sandbox-escape-test--pwned))
              (should (string-match-p "^CONNECTED PONG"
                                      (sandbox-escape-test--unconfined
                                       (sandbox-escape-test--connect
                                        (expand-file-name "agent.sock" outside)))))
              (sandbox-escape-test--in-each-layer layer
                (setq sandbox-escape-test--pwned nil)
                (let ((text (sandbox-escape-test--confined
                             layer
                             (concat client "; "
                                     (sandbox-escape-test--connect socket) "; "
                                     (sandbox-escape-test--connect
                                      (expand-file-name "agent.sock" outside))))))
                  (should-not (string-match-p "client=0" text))
                  (should-not (string-match-p "^CONNECTED" text))
                  ;; socketpair streams still work (shells and runtimes use them).
                  (should (string-match-p
                           "^pair ok$"
                           (sandbox-escape-test--confined
                            layer "python3 -c 'import socket
a,b=socket.socketpair(); a.sendall(b\"ok\"); print(\"pair\", b.recv(2).decode())'"))))
                (accept-process-output nil 0.3)
                (should-not sandbox-escape-test--pwned)))
          (delete-process agent)
          (delete-directory outside t))))))

;; A TCP server is reachable over the network once that is granted:
;; what guards it is its key, in `server-auth-dir', masked like the
;; socket directory.
(ert-deftest mevedel-sandbox-escape:tcp-emacs-server-key-stays-hidden ()
  (mevedel-core-ensure)
  (sandbox-escape-test--with-workspace ws
    ;; In the workspace, which every layer shows: only the mask hides it.
    (let* ((auth (expand-file-name "auth" ws))
           (server-use-tcp t)
           (server-host "127.0.0.1")
           (server-auth-dir (file-name-as-directory auth))
           (server-name (format "sbx-escape-tcp-%d" (emacs-pid)))
           (key (expand-file-name server-name auth))
           (client (format "emacsclient -f %s --eval '(setq sandbox-escape-test--pwned t)' \
2>&1; echo client=$?; echo keybytes=$(cat %s 2>/dev/null | wc -c)"
                           (shell-quote-argument key) (shell-quote-argument key))))
      (make-directory auth)
      (set-file-modes auth #o700)
      (unwind-protect
          (progn
            (server-start)
            (should (file-exists-p key))
            ;; The control: unconfined, the key works.
            (setq sandbox-escape-test--pwned nil)
            (let ((text (sandbox-escape-test--unconfined client)))
              (should (string-match-p "client=0" text))
              (should-not (string-match-p "keybytes=0$" text)))
            (mevedel-test-wait-until sandbox-escape-test--pwned 10)
            (should sandbox-escape-test--pwned)
            (sandbox-escape-test--in-each-layer layer
              (setq sandbox-escape-test--pwned nil)
              (let ((text (sandbox-escape-test--confined
                           layer client :additional_permissions '(:network t)
                           :justification "reach the test server")))
                (should-not (string-match-p "client=0" text))
                (should (string-match-p "^keybytes=0$" text)))
              (accept-process-output nil 0.3)
              (should-not sandbox-escape-test--pwned)))
        (server-force-delete server-name)
        (delete-directory auth t)))))

;;;; 3. The user's startup files in a workspace that is $HOME

(defconst sandbox-escape-test--startup-files
  '(".bashrc" ".profile" ".gitconfig" ".config/git/config" ".emacs.d/init.el"
    ".emacs.d/early-init.el" ".emacs" ".netrc" ".authinfo" ".config/gh/hosts.yml"
    ".config/mevedel/config.el")
  "Startup and credential files a command tries to write.")

(defun sandbox-escape-test--make-home (home)
  "Give HOME some existing startup files (the rest are missing)."
  (dolist (file '(".bashrc" ".gitconfig" ".config/git/config" ".emacs.d/init.el"))
    (make-directory (file-name-directory (expand-file-name file home)) t)
    (write-region "original\n" nil (expand-file-name file home) nil 'silent)))

(defun sandbox-escape-test--attack-startup ()
  "Return Bash source that attacks each startup file (write, create, replace)."
  (mapconcat (lambda (file)
               (format "mkdir -p %s 2>/dev/null; echo pwned >> %s 2>/dev/null; \
{ echo pwned > x.tmp && mv -f x.tmp %s; } 2>/dev/null; rm -f x.tmp 2>/dev/null"
                       (shell-quote-argument (or (file-name-directory file) "."))
                       (shell-quote-argument file) (shell-quote-argument file)))
             sandbox-escape-test--startup-files
             "; "))

(ert-deftest mevedel-sandbox-escape:startup-files-stay-read-only-in-home ()
  (mevedel-core-ensure)
  (sandbox-escape-test--in-each-layer layer
    (sandbox-escape-test--with-workspace home
      (let ((process-environment (cons (concat "HOME=" (directory-file-name home))
                                       process-environment)))
        (sandbox-escape-test--make-home home)
        (make-directory (expand-file-name "proj" home))
        (let ((text (sandbox-escape-test--confined
                     layer (concat (sandbox-escape-test--attack-startup)
                                   "; echo work > proj/notes.txt && echo wrote-work"))))
          ;; Ordinary work in the workspace still goes on.
          (should (string-match-p "^wrote-work$" text)))
        (dolist (file sandbox-escape-test--startup-files)
          (let ((now (sandbox-escape-test--read (expand-file-name file home))))
            (should (member now '(nil "original\n")))
            (should-not (and now (string-match-p "pwned" now)))))
        ;; The control: unconfined, every one of them is written.
        (sandbox-escape-test--unconfined (sandbox-escape-test--attack-startup))
        (dolist (file sandbox-escape-test--startup-files)
          (should (string-match-p "pwned" (or (sandbox-escape-test--read
                                               (expand-file-name file home))
                                              ""))))))))

;;;; 4. Files Emacs evaluates later

(ert-deftest mevedel-sandbox-escape:dir-locals-protected-and-changes-named ()
  (mevedel-core-ensure)
  (sandbox-escape-test--in-each-layer layer
    (sandbox-escape-test--with-workspace ws
      (let ((top (expand-file-name ".dir-locals.el" ws))
            (second (expand-file-name ".dir-locals-2.el" ws))
            (evil "((nil . ((eval . (setq sandbox-escape-test--pwned t)))))"))
        (write-region "()\n" nil top nil 'silent)
        (write-region "()\n" nil second nil 'silent)
        (make-directory (expand-file-name "src" ws))
        ;; Existing ones cannot be written, replaced or removed.
        (sandbox-escape-test--confined
         layer (format "for f in .dir-locals.el .dir-locals-2.el; do echo %s > $f; \
echo %s > x.tmp && mv -f x.tmp $f; rm -f $f; done 2>/dev/null; true"
                       (shell-quote-argument evil) (shell-quote-argument evil)))
        (should (equal (sandbox-escape-test--read top) "()\n"))
        (should (equal (sandbox-escape-test--read second) "()\n"))
        ;; A new one beneath cannot be stopped, but it is named on the
        ;; result and the row.
        (let* ((answer (sandbox-escape-test--bash
                        (format "echo %s > src/.dir-locals.el" (shell-quote-argument evil))))
               (text (sandbox-escape-test--text answer))
               (data (plist-get answer :render-data))
               (header (plist-get (mevedel-tool-exec-render-bash
                                   "Bash" '(:command "x") text data)
                                  :header)))
          (should (string-match-p "Warning: .*files Emacs may evaluate later: .*src/\\.dir-locals\\.el"
                                  text))
          (should (string-match-p "changed files Emacs evaluates: .*src/\\.dir-locals\\.el" header)))
        ;; An ordinary command carries no such warning.
        (should-not (string-match-p "Emacs may evaluate"
                                    (sandbox-escape-test--confined layer "echo x > plain.txt")))
        ;; The control: allowed by the option, the write goes through, and
        ;; is still named.
        (let* ((mevedel-sandbox-allow-dir-locals t)
               (text (sandbox-escape-test--confined
                      layer (format "echo %s > .dir-locals.el" (shell-quote-argument evil)))))
          (should (equal (sandbox-escape-test--read top) (concat evil "\n")))
          (should (string-match-p "evaluate later: .*/\\.dir-locals\\.el" text)))))))

;;;; 5. Secrets in the environment

(ert-deftest mevedel-sandbox-escape:secrets-are-withheld ()
  (mevedel-core-ensure)
  (let ((secrets '(("OPENAI_API_KEY" . "sk-openai-s3cret")
                   ("ANTHROPIC_API_KEY" . "sk-ant-s3cret")
                   ("GITHUB_TOKEN" . "ghp-s3cret")
                   ("AWS_SECRET_ACCESS_KEY" . "aws-s3cret")
                   ("db_password" . "pw-s3cret")
                   ("NPM_AUTH_X" . "npm-s3cret")
                   ("GOOGLE_APPLICATION_CREDENTIALS" . "/cred-s3cret"))))
    (sandbox-escape-test--in-each-layer layer
      (sandbox-escape-test--with-workspace _ws
        (let ((process-environment
               (append (mapcar (lambda (kv) (concat (car kv) "=" (cdr kv))) secrets)
                       (list "PLAIN_SETTING=visible")
                       process-environment)))
          (let ((text (sandbox-escape-test--confined layer "env")))
            (should (string-match-p "^PLAIN_SETTING=visible$" text))
            (dolist (kv secrets)
              (should-not (string-match-p (regexp-quote (cdr kv)) text))
              ;; The session's first result names each, never its value.
              (should (string-match-p (concat "withheld from commands: .*"
                                              (regexp-quote (car kv)))
                                      text))))
          ;; Only the first result says so.
          (should-not (string-match-p "withheld" (sandbox-escape-test--confined layer "true")))
          ;; A granted call gets the one variable it asked for.
          (let ((text (sandbox-escape-test--confined
                       layer "env" :additional_permissions '(:env ["GITHUB_TOKEN"]))))
            (should (string-match-p "^GITHUB_TOKEN=ghp-s3cret$" text))
            (should-not (string-match-p "sk-openai-s3cret" text)))
          ;; Kept by name.
          (let ((mevedel-sandbox-env-keep '("OPENAI_API_KEY")))
            (should (string-match-p "^OPENAI_API_KEY=sk-openai-s3cret$"
                                    (sandbox-escape-test--confined layer "env"))))
          ;; Dropped by name.
          (let ((mevedel-sandbox-env-drop '("PLAIN_*")))
            (should-not (string-match-p "visible" (sandbox-escape-test--confined layer "env"))))
          ;; The control: without the policy the command sees them all.
          (let* ((mevedel-sandbox-env-drop-patterns nil)
                 (text (sandbox-escape-test--unconfined "env")))
            (dolist (kv secrets)
              (should (string-match-p (regexp-quote (cdr kv)) text)))))))))

(defmacro sandbox-escape-test--with-profile (&rest body)
  "Run BODY in a fresh workspace whose HOME's login profile exports two variables.
HOME is inside the workspace, which every layer shows (bwrap replaces
/tmp, where a checkout may be)."
  (declare (indent 0))
  `(sandbox-escape-test--with-workspace ws
     (let* ((home (expand-file-name "home/" ws))
            (process-environment (cons (concat "HOME=" home) process-environment)))
       (make-directory home t)
       (write-region "export FAKE_API_KEY=profile-s3cret\nexport PLAIN_FROM_PROFILE=shown\n"
                     nil (expand-file-name ".bash_profile" home) nil 'silent)
       ,@body)))

(defconst sandbox-escape-test--profile-probe
  "touch made; echo \"k=${FAKE_API_KEY:-none} p=${PLAIN_FROM_PROFILE:-none}\""
  "Not provably read-only, so it runs in a login shell, after the profile.")

(ert-deftest mevedel-sandbox-escape:secrets-from-login-startup-files-are-withheld ()
  (mevedel-core-ensure)
  (sandbox-escape-test--in-each-layer layer
    (sandbox-escape-test--with-profile
      (should (string-match-p "^k=none p=shown$"
                              (sandbox-escape-test--confined
                               layer sandbox-escape-test--profile-probe)))
      ;; Granted for one call, it passes.
      (should (string-match-p "^k=profile-s3cret "
                              (sandbox-escape-test--confined
                               layer sandbox-escape-test--profile-probe
                               :additional_permissions '(:env ["FAKE_API_KEY"]))))))
  ;; The control: without the policy the profile's export shows.
  (sandbox-escape-test--with-profile
    (let ((mevedel-sandbox-env-drop-patterns nil))
      (should (string-match-p "^k=profile-s3cret p=shown$"
                              (sandbox-escape-test--unconfined
                               sandbox-escape-test--profile-probe))))))

(ert-deftest mevedel-sandbox-escape:env-grant-is-asked-on-its-card ()
  (let ((grant (mevedel-tool-exec-grant-request
                '(:command "gh pr list" :additional_permissions (:env ["GITHUB_TOKEN"])
                  :justification "gh needs the token"))))
    (should (equal (plist-get grant :env) '("GITHUB_TOKEN")))
    (should (string-match-p "pass the withheld variable GITHUB_TOKEN"
                            (mevedel-view--grant-text 'grant grant nil))))
  (should-error (mevedel-tool-exec-grant-request
                 '(:command "x" :additional_permissions (:env ["A=B"])))))

;;; sandbox-escape-test.el ends here
