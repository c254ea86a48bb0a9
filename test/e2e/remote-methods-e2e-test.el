;;; remote-methods-e2e-test.el --- TRAMP methods beyond /ssh:  -*- lexical-binding: t; -*-

;;; Commentary:

;; The TRAMP methods this machine can reach besides /ssh: -- /scp: and
;; /rsync: through the private sshd (mevedel-sshd.el), /sudo:: on this
;; machine, and multi-hop names through the sshd (/ssh:...|ssh:...:,
;; /ssh:...|sudo:...:) -- each drive a session's Read, Glob, Grep and
;; ApplyPatch through the product, with the remote helper started
;; there, and answer as the same calls over /ssh: do, but for the
;; workspace's name.  A missing rsync or sudo, or a non-root run
;; (sudo without a password), fails the test, naming why.
;;
;; Also: the mutation lease another session holds is said at open, in
;; the view's header and a message, and headless on stderr, before any
;; write.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'mevedel-test-helpers)
(require 'mevedel-sshd)
(require 'remote-e2e-test)

(defconst mevedel-remote-methods-test--calls
  '((mevedel-tool-fs-glob (:pattern "**/*"))
    (mevedel-tool-fs-glob (:pattern "*.el" :path "src"))
    (mevedel-tool-fs-grep (:pattern "foo"))
    (mevedel-tool-fs-grep (:pattern "foo" :path "src" :output_mode "content"))
    (mevedel-tool-fs-grep (:pattern "FOO" :-i t :output_mode "count"))
    (mevedel-tool-fs-read (:file_path "src/b.el"))
    (mevedel-tool-fs-read (:file_path "src/b.el" :offset 2 :limit 1)))
  "The file tools' calls each method answers as /ssh: does.")

(defconst mevedel-remote-methods-test--patch
  (concat "*** Begin Patch\n*** Update File: src/b.el\n@@\n-x\n+y\n"
          "*** Add File: new/n.txt\n+fresh\n*** Delete File: a.txt\n*** End Patch\n")
  "The patch each method applies as /ssh: does.")

(defun mevedel-remote-methods-test--require (program why)
  "Fail the test unless PROGRAM is installed; WHY says what needs it."
  (unless (executable-find program)
    (ert-fail (format "%s is missing (%s): run scripts/deps.sh" program why))))

(defun mevedel-remote-methods-test--run (workspace)
  "Run the file tools and the patch in the remote WORKSPACE, helper started.
Return the results, WORKSPACE's name in them replaced by ROOT/, and
the host's name of WORKSPACE."
  (let ((root (mevedel-chat-workspace-root workspace)))
    (mevedel-remote-test--helper t
      (let* ((results
              (mapcar (lambda (call)
                        (let ((result (mevedel-remote-test--call (car call) (cadr call) root)))
                          (list (plist-get result :status)
                                (string-replace root "ROOT/" (plist-get result :result)))))
                      mevedel-remote-methods-test--calls))
             (helper (gethash (mevedel-remote-host root) mevedel-remote--helpers)))
        ;; The helper ran on that host, and every search was its.
        (unless (mevedel-remote-helper--conn-p helper)
          (ert-fail (list "no helper on" root helper)))
        (dolist (result results)
          (should-not (string-search "(Searched with rg" (cadr result))))
        (append results
                (list (mevedel-remote-test--with-session (session data) root
                        (ignore session)
                        (mevedel-remote-test--patch data mevedel-remote-methods-test--patch))))))))

(defun mevedel-remote-methods-test--tree (base method)
  "Make METHOD's copy of the test workspace under BASE; return its host path."
  (let ((dir (expand-file-name (concat method "/") base)))
    (mevedel-remote-test--tree dir)
    dir))

(defun mevedel-remote-methods-test--after-patch (host-dir)
  "Return what the patch left in HOST-DIR: the changed files' texts."
  (list (mevedel-remote-test--text (expand-file-name "src/b.el" host-dir))
        (mevedel-remote-test--text (expand-file-name "new/n.txt" host-dir))
        (file-exists-p (expand-file-name "a.txt" host-dir))))

(defmacro mevedel-remote-methods-test--with (vars &rest body)
  "Bind VARS (SSHD BASE) to a server and a temp directory; run BODY.
The methods' workspaces go under BASE; state stays below it too."
  (declare (indent 1))
  (pcase-let ((`(,sshd ,base) vars))
    `(mevedel-sshd-with ,sshd
       (let* ((,base (file-name-as-directory (make-temp-file "mevedel-methods-" t)))
              (mevedel-remote-state-directory (expand-file-name "state/" ,base)))
         (unwind-protect (progn ,@body)
           (delete-directory ,base t))))))

(defun mevedel-remote-methods-test--same-as-ssh (sshd base method name)
  "Check the workspace NAME (METHOD's, under BASE) answers as /ssh: does.
NAME is a function of the host path giving the TRAMP name."
  (let* ((ssh-dir (mevedel-remote-methods-test--tree base "ssh"))
         (dir (mevedel-remote-methods-test--tree base method))
         (ssh (mevedel-remote-methods-test--run (mevedel-sshd-file sshd ssh-dir)))
         (there (mevedel-remote-methods-test--run (funcall name dir))))
    (should (equal (length there) (1+ (length mevedel-remote-methods-test--calls))))
    (should (string-prefix-p "The patch was applied" (car (last there))))
    (cl-loop for want in ssh for got in there for call in mevedel-remote-methods-test--calls
             do (unless (equal got want) (ert-fail (list method call :ssh want :got got))))
    (should (equal (car (last there)) (car (last ssh))))
    (should (equal (mevedel-remote-methods-test--after-patch dir)
                   (mevedel-remote-methods-test--after-patch ssh-dir)))
    (should (equal (mevedel-remote-methods-test--after-patch dir) '("foo one\ny\nfoo two\n" "fresh\n" nil)))
    ;; Session state stays here, one directory per method, host and path.
    (let ((state (mevedel-remote-state-root (mevedel-chat-workspace-root (funcall name dir)))))
      (should-not (file-remote-p state))
      (should-not (equal state (mevedel-remote-state-root (mevedel-sshd-file sshd dir)))))))

(defun mevedel-remote-methods-test--host-down (sshd base method)
  "Check a Read by METHOD fails naming its host once SSHD is down.
The workspace is METHOD's copy under BASE."
  (let* ((root (mevedel-chat-workspace-root
                (mevedel-sshd-file sshd (expand-file-name (concat method "/") base) method)))
         (result (progn
                   (mevedel-sshd-kill-connections sshd)
                   (delete-process (mevedel-sshd-process sshd))
                   (mevedel-remote-test--call #'mevedel-tool-fs-read '(:file_path "src/b.el") root))))
    (should (eq (plist-get result :status) 'error))
    (should (string-match-p (format "Cannot reach /%s:%s: (for [^)]*): the connection failed"
                                    method (mevedel-sshd-alias sshd))
                            (plist-get result :result)))))

(ert-deftest mevedel-remote-methods:scp-answers-as-ssh ()
  (mevedel-remote-methods-test--with (sshd base)
    (mevedel-remote-methods-test--same-as-ssh
     sshd base "scp" (lambda (dir) (mevedel-sshd-file sshd dir "scp")))
    (mevedel-remote-methods-test--host-down sshd base "scp")))

(ert-deftest mevedel-remote-methods:rsync-answers-as-ssh ()
  (mevedel-remote-methods-test--require "rsync" "the /rsync: method")
  (mevedel-remote-methods-test--with (sshd base)
    (mevedel-remote-methods-test--same-as-ssh
     sshd base "rsync" (lambda (dir) (mevedel-sshd-file sshd dir "rsync")))
    (mevedel-remote-methods-test--host-down sshd base "rsync")))

(defun mevedel-remote-methods-test--require-root ()
  "Fail the test unless it runs as root: /sudo:: must not ask a password."
  (mevedel-remote-methods-test--require "sudo" "the /sudo: method")
  (unless (zerop (user-uid))
    (ert-fail (format "the /sudo: tests run as root (as CI does), so that sudo asks no \
password; this Emacs runs as %s" (user-login-name)))))

(ert-deftest mevedel-remote-methods:sudo-answers-as-ssh ()
  (mevedel-remote-methods-test--require-root)
  (mevedel-remote-methods-test--with (sshd base)
    (mevedel-remote-methods-test--same-as-ssh
     sshd base "sudo" (lambda (dir) (concat "/sudo::" dir)))))

(ert-deftest mevedel-remote-methods:multi-hop-answers-as-ssh ()
  (mevedel-remote-methods-test--require-root)
  (mevedel-remote-methods-test--with (sshd base)
    (dolist (form (mevedel-sshd-hop-forms sshd)) (eval form t))
    (let ((alias (mevedel-sshd-alias sshd))
          (inner (mevedel-sshd-inner-alias sshd)))
      (mevedel-remote-methods-test--same-as-ssh
       sshd base "hop-ssh" (lambda (dir) (format "/ssh:%s|ssh:%s:%s" alias inner dir)))
      (mevedel-remote-methods-test--same-as-ssh
       sshd (expand-file-name "sudo/" base) "hop-sudo"
       (lambda (dir) (format "/ssh:%s|sudo:root@%s:%s" alias alias dir)))
      ;; The state is keyed by the route too, however the name is
      ;; spelled: TRAMP drops the hops from expanded names.
      (let* ((typed (format "/ssh:%s|ssh:%s:/srv/app/" alias inner))
             (state (mevedel-remote-state-root typed)))
        (should (equal (mevedel-remote-state-root (expand-file-name typed)) state))
        (should (equal (file-name-nondirectory (directory-file-name (file-name-parent-directory state)))
                       (format "ssh-%s-%s" inner (substring (md5 (format "/ssh:%s:" alias)) 0 8))))))))

(ert-deftest mevedel-remote-methods:hops-in-a-loop-fail-at-once-naming-them ()
  ;; TRAMP follows /ssh:a|ssh:a: (a host reached through itself)
  ;; forever, without a word; the run says so and ends instead.
  (mevedel-sshd-with sshd
    (let ((alias (mevedel-sshd-alias sshd)))
      (pcase-let ((`(,status ,_ ,stderr ,seconds)
                   (mevedel-remote-test--headless
                    sshd (format "/ssh:%s|ssh:%s:/tmp/" alias alias)
                    :settings (mevedel-sshd-hop-forms sshd)
                    :args '("-p" "hi" "--timeout" "100") :steps '(((text . "never"))))))
        (should (eql status 1))
        (should (string-match-p (format "Cannot reach /ssh:%s|ssh:%s: .*hops lead back to /ssh:%s:"
                                        alias alias alias)
                                stderr))
        (should (< seconds 30))))))

(ert-deftest mevedel-remote-methods:headless-runs-over-hops ()
  (mevedel-remote-methods-test--require-root)
  (mevedel-remote-test--with (sshd local remote)
    (ignore local)
    (let* ((alias (mevedel-sshd-alias sshd))
           (dir (mevedel-remote-local-name remote))
           (hops (format "/ssh:%s|sudo:root@%s:%s" alias alias dir)))
      (pcase-let ((`(,status ,stdout ,stderr ,_)
                   (mevedel-remote-test--headless
                    sshd hops
                    :settings (mevedel-sshd-hop-forms sshd)
                    :args '("-p" "Edit b.el" "--permission-mode" "full-auto" "--timeout" "60")
                    :steps `(((tool_calls
                               . [((name . "Grep") (arguments . ((pattern . "foo")
                                                                 (output_mode . "content"))))]))
                             ((tool_calls
                               . [((name . "ApplyPatch")
                                   (arguments
                                    . ((patch . ,(concat "*** Begin Patch\n*** Update File: src/b.el\n"
                                                         "@@\n-x\n+over hops\n*** End Patch\n")))))]))
                             ((text . "Done."))))))
        (unless (eql status 0) (ert-fail (list status stdout stderr)))
        (let ((calls (alist-get 'tool_calls (mevedel-remote-test--json stdout))))
          (should (equal (mapcar (lambda (c) (alist-get 'status c)) calls) '("success" "success")))
          (should (string-search "src/b.el:1:foo one" (alist-get 'result_preview (car calls))))
          ;; The helper searched, started over the hops.
          (should-not (string-search "Searched with rg" (alist-get 'result_preview (car calls)))))
        (should (equal (mevedel-remote-test--text (expand-file-name "src/b.el" dir))
                       "foo one\nover hops\nfoo two\n")))
      ;; The last hop down: the run fails at once, naming the name given.
      (let ((down (concat alias "-down")))
        (with-temp-buffer
          (insert (mevedel-sshd--client-config down (mevedel-sshd--free-port) (mevedel-sshd-user sshd)
                                               (expand-file-name "id_ed25519" (mevedel-sshd-dir sshd))))
          (append-to-file (point-min) (point-max) (mevedel-sshd-config sshd)))
        (pcase-let ((`(,status ,_ ,stderr ,seconds)
                     (mevedel-remote-test--headless
                      sshd (format "/ssh:%s|ssh:%s:/tmp/" alias down)
                      :settings (mevedel-sshd-hop-forms sshd)
                      :args '("-p" "hi" "--timeout" "100") :steps '(((text . "never"))))))
          (should (eql status 1))
          (should (string-match-p (regexp-quote (format "Cannot reach /ssh:%s|ssh:%s:" alias down))
                                  stderr))
          (should (< seconds 35)))))))

;;;; The lease seen at open

(defconst mevedel-remote-methods-test--holder "other-session someone@elsewhere pid 42"
  "The lease another machine's session holds, written by the tests.")

(defun mevedel-remote-methods-test--hold (remote)
  "Write REMOTE's lease file as another machine's session holding it."
  (let ((file (mevedel-remote-local-name (expand-file-name ".mevedel/lease" remote))))
    (make-directory (file-name-directory file) t)
    (with-temp-file file (insert mevedel-remote-methods-test--holder))))

(ert-deftest mevedel-remote-methods:a-session-opening-sees-the-lease-at-once ()
  (require 'mevedel-render-data)
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd local)
    (mevedel-remote-methods-test--hold remote)
    (let ((buffer (find-file-noselect (expand-file-name "src/b.el" remote)))
          (lease (mevedel-remote-local-name (expand-file-name ".mevedel/lease" remote)))
          (messages nil)
          (mevedel-remote-lease-policy 'wait)
          (view nil))
      (unwind-protect
          (cl-letf* ((message-fn (symbol-function 'message))
                     ((symbol-function 'message)
                      (lambda (format &rest args)
                        (when format (push (apply #'format-message format args) messages))
                        (apply message-fn format args))))
            (with-current-buffer buffer
              (setq view (call-interactively #'mevedel)))
            (let* ((chat (mevedel-view-chat view))
                   (session (mevedel-chat-session chat))
                   (header (lambda () (with-current-buffer view (mevedel-view--header-line))))
                   (said (concat "Lease held by " mevedel-remote-methods-test--holder)))
              ;; Said once the view is up, before anything is written.
              (mevedel-test-wait-until (string-search said (funcall header)) 20)
              (should (cl-some (lambda (text)
                                 (string-match-p
                                  (concat "is being written by session "
                                          (regexp-quote mevedel-remote-methods-test--holder)
                                          ".*this session's writes will wait for it")
                                  text))
                               messages))
              ;; Seen, not taken: the other session keeps it.
              (should (equal (mevedel-remote-test--text lease) mevedel-remote-methods-test--holder))
              ;; It lets go; this session's first write takes it, and the
              ;; header stops naming the other one.
              (delete-file lease)
              (setf (mevedel-session-permission-mode session) 'full-auto)
              (should (string-prefix-p
                       "The patch was applied"
                       (mevedel-remote-test--patch
                        (mevedel-chat-data-buffer chat)
                        "*** Begin Patch\n*** Add File: mine.txt\n+mine\n*** End Patch\n")))
              (should (string-search (mevedel-session-id session) (mevedel-remote-test--text lease)))
              ;; At once: a lease released behind TRAMP's back is not
              ;; taken for held from its cache.
              (should-not (cl-some (lambda (text) (string-search "waiting for the lease" text))
                                   messages))
              (should-not (string-search "Lease held by" (funcall header)))))
        (when (buffer-live-p view)
          (let ((data (mevedel-chat-data-buffer (mevedel-view-chat view))))
            (kill-buffer view)
            (when (buffer-live-p data) (kill-buffer data))))
        (kill-buffer buffer)))))

(ert-deftest mevedel-remote-methods:a-headless-run-names-the-holder-at-open ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore local)
    (mevedel-remote-methods-test--hold remote)
    (pcase-let ((`(,status ,stdout ,stderr ,_)
                 (mevedel-remote-test--headless
                  sshd remote :args '("-p" "what is in b.el?")
                  :steps '(((tool_calls
                             . [((name . "Read") (arguments . ((file_path . "src/b.el"))))]))
                           ((text . "foo."))))))
      (unless (eql status 0) (ert-fail (list status stdout stderr)))
      ;; Named on stderr before the turn, though the run only reads.
      (should (string-match-p (concat "is being written by session "
                                      (regexp-quote mevedel-remote-methods-test--holder)
                                      ".*this session's writes will fail")
                              stderr))
      (should (equal (alist-get 'status (car (alist-get 'tool_calls
                                                        (mevedel-remote-test--json stdout))))
                     "success"))
      (should (equal (mevedel-remote-test--text
                      (mevedel-remote-local-name (expand-file-name ".mevedel/lease" remote)))
                     mevedel-remote-methods-test--holder)))))

(provide 'remote-methods-e2e-test)
;;; remote-methods-e2e-test.el ends here
