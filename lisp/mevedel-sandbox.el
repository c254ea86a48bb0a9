;;; mevedel-sandbox.el --- Confinement of commands the model causes  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Every child the model causes runs confined: bubblewrap namespaces
;; plus the `mevedel-sandbox' helper's Landlock ruleset, or Landlock
;; alone where bubblewrap cannot start.  Writable roots are the
;; workspace, session scratch and artifact directories; every `.git',
;; every `.dir-locals.el', the session's own state and the user's
;; startup files (`mevedel-sandbox-protected-home-files') stay read-only
;; inside them; ~/.ssh, ~/.gnupg, ~/.aws, ~/.azure, ~/.config/gcloud and
;; ~/.kube are inaccessible, and so are the Emacs server and MCP socket
;; directories; no Unix socket can be created; the network is denied
;; unless a call was granted it.  Secrets in the environment are
;; withheld (`mevedel-sandbox-environment').
;;
;; This file owns the user options, the per-target probe, the sandbox
;; requests the execution tools put in their managed executions' specs
;; (`mevedel-sandbox-request'), \\[mevedel-sandbox-status], and the
;; model-hidden `:sandbox-summary' facts that tool rows keep in their
;; render-data.

;;; Code:

(require 'cl-lib)
(require 'help-mode)
(require 'mevedel-core)

;;;; Options

(defgroup mevedel-sandbox nil
  "Confinement of the commands the model causes."
  :group 'mevedel
  :prefix "mevedel-sandbox-")

(defcustom mevedel-sandbox-mode 'best-effort
  "How commands the model causes are confined.
`best-effort' confines when a layer works and otherwise runs the
command directly, saying so on the tool row; `required' refuses to run
unless bubblewrap confines; `off' runs every command directly."
  :type '(choice (const :tag "Confine when possible, disclose otherwise" best-effort)
                 (const :tag "Refuse unless bubblewrap confines" required)
                 (const :tag "Never confine" off)))

(defcustom mevedel-sandbox-backend 'auto
  "Which confinement layers to use.
`auto' uses bubblewrap with the Landlock helper inside it, and (in
`best-effort' mode only) the Landlock helper alone where bubblewrap
cannot start.  `landlock' always uses the Landlock helper alone, for
hosts where bubblewrap misbehaves."
  :type '(choice (const auto) (const landlock)))

(defcustom mevedel-sandbox-probe-timeout 2.0
  "Seconds a local sandbox probe may take before the layer counts as broken."
  :type 'number)

(defcustom mevedel-sandbox-protected-home-files
  '(".profile" ".bash_profile" ".bash_login" ".bashrc" ".bash_logout" ".bash_aliases"
    ".zshenv" ".zprofile" ".zshrc" ".zlogin" ".zlogout" ".kshrc" ".mkshrc" ".cshrc"
    ".tcshrc" ".login" ".logout" ".inputrc" ".config/fish" ".config/environment.d"
    ".xprofile" ".xinitrc" ".xsession" ".pam_environment" ".config/autostart"
    ".bashrc.d" ".vimrc" ".vim" ".config/nvim" ".tmux.conf" ".screenrc"
    "bin" ".local/bin" ".emacs" ".emacs.el" ".emacs.elc" ".emacs.d" ".config/emacs"
    ".gitconfig" ".config/git" ".ssh" ".gnupg" ".netrc"
    ".authinfo" ".authinfo.gpg" ".aws" ".config/gh" ".docker" ".npmrc" ".pypirc"
    ".cargo/credentials" ".cargo/credentials.toml" ".config/systemd" ".mevedel"
    ".config/mevedel")
  "Files and directories under the home directory that commands never write.
Each is relative to the home directory and stays read-only even when a
writable root (the workspace) contains it, as when mevedel works in
~ itself: shell, login and editor startup files, the personal `bin'
directories on PATH, Emacs init files and directories (all of
~/.emacs.d: packages and native-compiled code load from there too),
git, ssh and gpg configuration, credential files and mevedel's own user
configuration.  One that does not exist yet cannot
be created either: its directory then accepts no new entries (Landlock
enforces that in both layers)."
  :type '(repeat string))

(defcustom mevedel-sandbox-allow-dir-locals nil
  "Non-nil lets commands write `.dir-locals.el' and `.dir-locals-2.el'.
By default every one under a writable root is read-only, because Emacs
evaluates what they hold (`eval:' forms) when it visits a file beneath.
Either way, a command that creates or changes one is named in a warning
on its result and row."
  :type 'boolean)

(defcustom mevedel-sandbox-env-drop-patterns
  '("*KEY*" "*SECRET*" "*TOKEN*" "*PASSWORD*" "*PASSWD*" "*PASSPHRASE*"
    "*CREDENTIAL*" "*_AUTH*")
  "Wildcard patterns of environment variable names withheld from commands.
Matching ignores case; `*' matches any run of characters.  A command
the model causes never sees a matching variable unless
`mevedel-sandbox-env-keep' names it or a grant passes it for one call."
  :type '(repeat string))

(defcustom mevedel-sandbox-env-drop nil
  "More wildcard patterns of variable names to withhold from commands."
  :type '(repeat string))

(defcustom mevedel-sandbox-env-keep nil
  "Wildcard patterns of variable names passed even though they look secret."
  :type '(repeat string))

;;;; Environment

(defun mevedel-sandbox--env-match-p (name patterns)
  "Return non-nil when NAME matches one of the wildcard PATTERNS, ignoring case."
  (let ((case-fold-search t))
    (cl-some (lambda (pattern) (string-match-p (wildcard-to-regexp pattern) name))
             patterns)))

(defun mevedel-sandbox-environment (env &optional pass)
  "Return (ENTRIES . WITHHELD) for the environment list ENV.
ENV holds \"NAME=VALUE\" entries like `process-environment'.  ENTRIES
is ENV without the variables whose names look secret (see
`mevedel-sandbox-env-drop-patterns'), except those named in PASS (a
list of names granted for one call); WITHHELD lists the names left
out, sorted, never their values."
  (let ((drop (append mevedel-sandbox-env-drop-patterns mevedel-sandbox-env-drop))
        (kept nil)
        (withheld nil))
    (dolist (entry env)
      (let ((name (if (string-match "\\`\\([^=]*\\)=" entry) (match-string 1 entry) entry)))
        (if (and (mevedel-sandbox--env-match-p name drop)
                 (not (mevedel-sandbox--env-match-p name mevedel-sandbox-env-keep))
                 (not (member name pass)))
            (cl-pushnew name withheld :test #'equal)
          (push entry kept))))
    (cons (nreverse kept) (sort withheld #'string<))))

(defun mevedel-sandbox--case-patterns (patterns)
  "Return PATTERNS as one Bash `case' pattern list, upper-cased, or nil.
Only names and the wildcards `*' and `?' can appear in a Bash pattern
unquoted; a pattern with anything else is left out."
  (let ((safe (cl-loop for pattern in patterns
                       when (string-match-p "\\`[A-Za-z0-9_*?]+\\'" pattern)
                       collect (upcase pattern))))
    (and safe (mapconcat #'identity safe "|"))))

(defun mevedel-sandbox-login-prelude (&optional pass)
  "Return Bash that unsets exported variables the policy withholds, or nil.
A login shell's startup files may export secrets after the
environment was filtered (see `mevedel-sandbox-environment'); this
runs after them, before the command.  PASS lists names granted for
one call, kept like `mevedel-sandbox-env-keep'."
  (let ((drop (mevedel-sandbox--case-patterns
               (append mevedel-sandbox-env-drop-patterns mevedel-sandbox-env-drop)))
        (keep (mevedel-sandbox--case-patterns (append mevedel-sandbox-env-keep pass))))
    (when drop
      (concat "for __mevedel_v in $(compgen -e); do case ${__mevedel_v^^} in "
              drop ") "
              (if keep
                  (concat "case ${__mevedel_v^^} in " keep
                          ") ;; *) unset -v \"$__mevedel_v\";; esac")
                "unset -v \"$__mevedel_v\"")
              ";; esac; done; unset -v __mevedel_v"))))

;;;; Requests

(defvar mevedel-sandbox--helper-cache nil
  "(MODULE-DIRECTORY-SETTING . HELPER-FILE) from the last lookup.
Finding the module directory walks the file system, so requests reuse
the answer while `mevedel-core-build-module-directory' stays the same.")

(defun mevedel-sandbox-helper ()
  "Return the sandbox helper binary's file name."
  (unless (and mevedel-sandbox--helper-cache
               (equal (car mevedel-sandbox--helper-cache) mevedel-core-build-module-directory))
    (setq mevedel-sandbox--helper-cache
          (cons mevedel-core-build-module-directory (mevedel-core-build-helper-file))))
  (cdr mevedel-sandbox--helper-cache))

(defvar mevedel-sandbox--read-only-cache nil
  "((HOME . NAMES) . FILES): the last expansion of the protected home files.
Every request carries them, so requests reuse it while the home
directory and `mevedel-sandbox-protected-home-files' stay the same.")

(defun mevedel-sandbox--read-only-files ()
  "Return `mevedel-sandbox-protected-home-files' as absolute file names."
  (let ((home (getenv "HOME")))
    (unless (and (equal (caar mevedel-sandbox--read-only-cache) home)
                 (eq (cdar mevedel-sandbox--read-only-cache) mevedel-sandbox-protected-home-files))
      (let ((dir (file-name-as-directory (expand-file-name "~"))))
        (setq mevedel-sandbox--read-only-cache
              (cons (cons home mevedel-sandbox-protected-home-files)
                    (mapcar (lambda (f) (concat dir f)) mevedel-sandbox-protected-home-files)))))
    (cdr mevedel-sandbox--read-only-cache)))

(defun mevedel-sandbox--socket-dirs ()
  "Return the directories where Emacs servers and MCP sockets of this user live.
They are masked from confined commands: a server there evaluates Lisp
in its Emacs, outside any sandbox."
  (let ((runtime (getenv "XDG_RUNTIME_DIR"))
        (uid (user-uid)))
    (delete-dups
     (mapcar #'directory-file-name
             (delq nil
                   (list (and (boundp 'server-socket-dir) (stringp server-socket-dir)
                              server-socket-dir)
                         (and (boundp 'server-auth-dir) (stringp server-auth-dir)
                              (expand-file-name server-auth-dir))
                         (and runtime (expand-file-name "emacs" runtime))
                         (format "/tmp/emacs%d" uid)
                         (expand-file-name (format "emacs%d" uid)
                                           (or (getenv "TMPDIR") "/tmp"))
                         (expand-file-name (format "mevedel-mcp-%d" uid)
                                           (or runtime temporary-file-directory))))))))

(defun mevedel-sandbox-request (&rest args)
  "Return a sandbox request plist: ARGS over the user's defaults.
ARGS are keys of `mevedel-core--sandbox-request-keys', e.g. :command
\(a list of strings), :cwd, :writable (list of directories), :network,
:extra-write.  Defaults: `mevedel-sandbox-mode', `mevedel-sandbox-backend',
the home directory, `process-environment' and its PATH, the helper next
to the module, the probe timeout, and the local target."
  (let ((request (copy-sequence args)))
    (dolist (default `((:mode . ,mevedel-sandbox-mode)
                       (:backend . ,mevedel-sandbox-backend)
                       (:home . ,(expand-file-name "~"))
                       (:inaccessible . ,(mevedel-sandbox--socket-dirs))
                       (:read-only . ,(mevedel-sandbox--read-only-files))
                       (:allow-dir-locals . ,mevedel-sandbox-allow-dir-locals)
                       (:env . ,process-environment)
                       (:path . ,(getenv "PATH"))
                       (:helper . ,(mevedel-sandbox-helper))
                       (:target . "local")
                       (:probe-timeout-ms
                        . ,(round (* 1000 mevedel-sandbox-probe-timeout)))))
      (unless (plist-member request (car default))
        (setq request (plist-put request (car default) (cdr default)))))
    request))

(defun mevedel-sandbox-prepare (request)
  "Describe the launch of the sandbox REQUEST plist without running it.
See `mevedel-core-sandbox-prepare'."
  (mevedel-core-sandbox-prepare (apply #'mevedel-sandbox-request request)))

;;;; Probe

(defun mevedel-sandbox-probe (callback &optional target refresh)
  "Call CALLBACK with the probe plist for TARGET (default local).
Probes are cached per target; REFRESH non-nil probes again."
  (mevedel-core-sandbox-probe
   callback
   (list :timeout-ms (round (* 1000 mevedel-sandbox-probe-timeout))
         :target (or target "local")
         :refresh refresh)))

;;;; Summary facts

(defun mevedel-sandbox-summary-add (summary outcome)
  "Return SUMMARY with one execution OUTCOME added.
SUMMARY is a `:sandbox-summary' plist or nil; it counts attempts,
starts, refusals, failed starts, network grants, launches whose Unix
socket filter was missing and additional mounts, and lists the
boundaries used.  It never holds paths or commands."
  (let* ((boundary (plist-get outcome :boundary))
         (start (plist-get outcome :start))
         (count (lambda (key test)
                  (+ (or (plist-get summary key) 0) (if test 1 0)))))
    (list :attempts (funcall count :attempts t)
          :starts (funcall count :starts (eq start 'started))
          :refusals (funcall count :refusals (eq start 'refused))
          :start-failures (funcall count :start-failures
                                   (memq start '(sandbox-failed exec-failed)))
          :boundaries (let ((seen (plist-get summary :boundaries)))
                        (if (or (null boundary) (memq boundary seen))
                            seen
                          (append seen (list boundary))))
          :network-grants (funcall count :network-grants
                                   (and (eq (plist-get outcome :network) 'granted)
                                        (memq boundary '(bwrap-landlock bwrap landlock))))
          :open-sockets (funcall count :open-sockets
                                 (equal (plist-get outcome :sockets) "open"))
          :extra-write-mounts (+ (or (plist-get summary :extra-write-mounts) 0)
                                 (or (plist-get outcome :extra-writes) 0))
          :extra-read-mounts (+ (or (plist-get summary :extra-read-mounts) 0)
                                (or (plist-get outcome :extra-reads) 0)))))

(defun mevedel-sandbox-summary-merge (summary other)
  "Return SUMMARY and OTHER, two `:sandbox-summary' plists, as one.
Counts add up and the boundaries used are listed once each; an agent
row rolls up its turn's executions this way."
  (if (null summary)
      other
    (let ((merged (list :boundaries (append (plist-get summary :boundaries)
                                            (cl-remove-if (lambda (b)
                                                            (memq b (plist-get summary :boundaries)))
                                                          (plist-get other :boundaries))))))
      (dolist (key '(:attempts :starts :refusals :start-failures :network-grants :open-sockets
                               :extra-write-mounts :extra-read-mounts)
                   merged)
        (setq merged (plist-put merged key (+ (or (plist-get summary key) 0)
                                              (or (plist-get other key) 0))))))))

(defconst mevedel-sandbox--default-boundaries '(bwrap-landlock bwrap)
  "Boundaries a healthy machine gives; others are worth a warning.")

(defun mevedel-sandbox-summary-warning (summary)
  "Return a compact warning for SUMMARY's non-default facts, or nil.
Non-default boundaries, refusals, commands that never started, network
grants and additional writable mounts are mentioned; additional
read-only mounts stay silent."
  (let ((parts nil)
        (n (lambda (key) (or (plist-get summary key) 0))))
    (dolist (boundary (plist-get summary :boundaries))
      (unless (memq boundary (cons 'refused mevedel-sandbox--default-boundaries))
        (push (pcase boundary
                ('landlock "Landlock only")
                ('unconfined "unconfined (no sandbox layer works)")
                ('off "unconfined (sandbox off)")
                ('escalated "escalated outside the sandbox")
                (_ (symbol-name boundary)))
              parts)))
    (when (> (funcall n :refusals) 0)
      (push (format "%d refused" (funcall n :refusals)) parts))
    (when (> (funcall n :start-failures) 0)
      (push (format "%d never started" (funcall n :start-failures)) parts))
    (when (> (funcall n :network-grants) 0)
      (push "network allowed" parts))
    (when (> (funcall n :open-sockets) 0)
      (push "Unix sockets not blocked" parts))
    (when (> (funcall n :extra-write-mounts) 0)
      (push (format "%d extra writable path%s" (funcall n :extra-write-mounts)
                    (if (= 1 (funcall n :extra-write-mounts)) "" "s"))
            parts))
    (when parts
      (concat "sandbox: " (string-join (nreverse parts) ", ")))))

(defun mevedel-sandbox-render-data (render-data summary)
  "Return RENDER-DATA (a plist) carrying SUMMARY as `:sandbox-summary'.
The summary is model-hidden UI state; nil SUMMARY leaves RENDER-DATA
unchanged."
  (if summary
      (plist-put (copy-sequence render-data) :sandbox-summary summary)
    render-data))

;;;; Status

(defun mevedel-sandbox--insert-layer (name ok text)
  "Insert a status line for layer NAME, working when OK, described by TEXT."
  (insert (format "  %-12s " name)
          (propertize (if ok "works" "unavailable")
                      'face (if ok 'success 'warning))
          (if text (concat "  " text) "")
          "\n"))

(defun mevedel-sandbox--insert-status (probe decision)
  "Insert the status report for PROBE and the current mode's DECISION."
  (insert (propertize "mevedel sandbox\n\n" 'face 'bold))
  (insert (format "Mode:     %s   (mevedel-sandbox-mode)\n" mevedel-sandbox-mode))
  (insert (format "Backend:  %s   (mevedel-sandbox-backend)\n" mevedel-sandbox-backend))
  (insert "Target:   local\n\n")
  (if (null probe)
      (insert (propertize "The probe failed.\n" 'face 'error))
    (insert "Layers:\n")
    (mevedel-sandbox--insert-layer
     "bubblewrap" (plist-get probe :bwrap-works)
     (if (plist-get probe :bwrap-works)
         (plist-get probe :bwrap-path)
       (plist-get probe :bwrap-problem)))
    (mevedel-sandbox--insert-layer
     "Landlock" (plist-get probe :landlock-enforced)
     (if (plist-get probe :landlock-enforced)
         (format "kernel ABI %s" (plist-get probe :landlock-abi))
       (plist-get probe :landlock-problem)))
    (mevedel-sandbox--insert-layer
     "helper" (null (plist-get probe :helper-problem))
     (or (plist-get probe :helper-problem) (plist-get probe :helper-path))))
  (when decision
    (insert "\nCommands now run: "
            (propertize (symbol-name (plist-get decision :boundary))
                        'face (if (memq (plist-get decision :boundary)
                                        mevedel-sandbox--default-boundaries)
                                  'success
                                'warning))
            "\n")
    (when-let* ((text (or (plist-get decision :refusal)
                          (plist-get decision :disclosure))))
      (insert "  " text "\n")))
  (insert "\nWritable: the workspace, session scratch and artifact directories, a\n"
          "private /tmp.  Read-only inside them: every .git, .dir-locals.el, the\n"
          "session's state and your startup files.  Inaccessible: ~/.ssh ~/.gnupg\n"
          "~/.aws ~/.azure ~/.config/gcloud ~/.kube and the Emacs server and MCP\n"
          "socket directories.  Unix sockets: none can be created.  Network: denied\n"
          "unless a call is granted it.  Secret-looking environment variables are\n"
          "withheld.\n"))

;;;###autoload
(defun mevedel-sandbox-status (&optional refresh)
  "Show which sandbox layers work here and what commands now run under.
With prefix argument REFRESH, probe again instead of using the cache."
  (interactive "P")
  (mevedel-sandbox-probe
   (lambda (probe)
     (let ((decision (and probe
                          (ignore-errors
                            (mevedel-core-sandbox-decide
                             (mevedel-sandbox-request :command '("true")))))))
       (with-help-window (help-buffer)
         (with-current-buffer standard-output
           (mevedel-sandbox--insert-status probe decision)))))
   nil refresh))

(provide 'mevedel-sandbox)
;;; mevedel-sandbox.el ends here
