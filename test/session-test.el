;;; session-test.el --- Tests of sessions, their storage and the store  -*- lexical-binding: t; -*-

;;; Commentary:

;; Lazy materialisation of <workspace>/.mevedel/sessions/<id>/, the Git
;; exclusion, ephemeral sessions, and session.sqlite (WAL, mailbox).

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-session)

(defmacro mevedel-session-test--with-workspace (var &rest body)
  "Run BODY with VAR bound to a fresh workspace directory, removed afterwards."
  (declare (indent 1))
  `(let ((,var (file-name-as-directory (make-temp-file "mevedel-ws" t))))
     (unwind-protect (progn ,@body)
       (delete-directory ,var t))))

(defun mevedel-session-test--git-init (directory)
  "Make DIRECTORY a Git repository."
  (let ((default-directory directory))
    (should (zerop (call-process "git" nil nil nil "init" "-q")))))

(ert-deftest mevedel-session:storage-is-lazy ()
  (mevedel-session-test--with-workspace ws
    (let ((session (mevedel-session-create :workspace ws :id "s1")))
      (should (equal (mevedel-session-directory session)
                     (expand-file-name ".mevedel/sessions/s1/" ws)))
      (should-not (mevedel-session-storage-p session))
      (should-not (file-exists-p (expand-file-name ".mevedel" ws)))
      (mevedel-session-ensure-storage session)
      (unwind-protect
          (progn
            (should (mevedel-session-storage-p session))
            (should (file-directory-p (mevedel-session-tool-results-directory session)))
            (should (file-directory-p (mevedel-session-local-directory session)))
            (should (file-exists-p (mevedel-session-database-file session)))
            (should (equal (plist-get (mevedel-core-store-info (mevedel-session-store session))
                                      :journal-mode)
                           "wal")))
        (mevedel-session-close session)))))

(ert-deftest mevedel-session:git-exclude-added-once ()
  (mevedel-session-test--with-workspace ws
    (mevedel-session-test--git-init ws)
    (let ((session (mevedel-session-create :workspace ws))
          (exclude (expand-file-name ".git/info/exclude" ws)))
      (mevedel-session-ensure-storage session)
      (mevedel-session-close session)
      (mevedel-session-git-exclude ws)
      (let ((lines (with-temp-buffer
                     (insert-file-contents exclude)
                     (split-string (buffer-string) "\n" t))))
        (should (equal (cl-count "/.mevedel/" lines :test #'equal) 1)))
      ;; Git agrees the directory is ignored.
      (let ((default-directory ws))
        (should (string-empty-p
                 (string-trim (shell-command-to-string
                               "git status --porcelain --untracked-files=all"))))))))

(ert-deftest mevedel-session:git-exclude-for-a-subdirectory-workspace ()
  (mevedel-session-test--with-workspace repo
    (mevedel-session-test--git-init repo)
    (let ((ws (expand-file-name "sub/dir/" repo)))
      (make-directory ws t)
      (mevedel-session-git-exclude ws)
      (with-temp-buffer
        (insert-file-contents (expand-file-name ".git/info/exclude" repo))
        (should (search-forward "/sub/dir/.mevedel/" nil t))))))

(ert-deftest mevedel-session:no-git-no-exclude ()
  (mevedel-session-test--with-workspace ws
    (should-not (mevedel-session-git-exclude ws))))

(ert-deftest mevedel-session:ephemeral-has-no-storage ()
  (mevedel-session-test--with-workspace ws
    (let ((session (mevedel-session-create :workspace ws :ephemeral t)))
      (should-not (mevedel-session-directory session))
      (should-not (mevedel-session-durable-p session))
      (should-error (mevedel-session-ensure-storage session) :type 'mevedel-session-no-storage)
      (should-not (file-exists-p (expand-file-name ".mevedel" ws))))))

(ert-deftest mevedel-session:bad-ids-and-workspaces-are-refused ()
  (mevedel-session-test--with-workspace ws
    (dolist (id '("../x" "a/b" "" ".hidden" "a..b"))
      (should-error (mevedel-session-create :workspace ws :id id) :type 'mevedel-session-error))
    (should-error (mevedel-session-create :workspace (expand-file-name "missing" ws))
                  :type 'mevedel-session-error)))

(ert-deftest mevedel-session:mailbox-delivers-once ()
  (mevedel-session-test--with-workspace ws
    (let* ((session (mevedel-session-create :workspace ws))
           (store (mevedel-session-store-handle session)))
      (unwind-protect
          (let ((a (mevedel-core-mailbox-post store "/root" "RESULT" "done é" "/root/worker"))
                (b (mevedel-core-mailbox-post store "/root" "EXECUTION" "exit 0")))
            (mevedel-core-mailbox-post store "/root/other" "RESULT" "not yours")
            (let ((unread (mevedel-core-mailbox-unread store "/root")))
              (should (equal (mapcar (lambda (m) (plist-get m :payload)) unread)
                             '("done é" "exit 0")))
              (should (equal (plist-get (car unread) :sender) "/root/worker")))
            (should (= (mevedel-core-mailbox-deliver store (list a)) 1))
            (should (= (mevedel-core-mailbox-deliver store (list a b)) 1))
            (should-not (mevedel-core-mailbox-unread store "/root")))
        (mevedel-session-close session))
      ;; The messages are durable: a new handle sees the other recipient's.
      (let ((again (mevedel-core-store-open (mevedel-session-database-file session))))
        (unwind-protect
            (should (= (length (mevedel-core-mailbox-unread again "/root/other")) 1))
          (mevedel-core-store-close again))
        (should-error (mevedel-core-store-info again) :type 'mevedel-core-store-error)))))

(ert-deftest mevedel-session:store-open-failure-names-the-file ()
  (let ((err (should-error (mevedel-core-store-open "/proc/no-such-dir/session.sqlite")
                           :type 'mevedel-core-store-error)))
    (should (string-match-p "session.sqlite" (cadr err)))))

;;;; One writer per session

(defun mevedel-session-test--lock (session)
  "Return the target of SESSION's lock, or nil."
  (file-symlink-p (expand-file-name "lock" (mevedel-session-directory session))))

(defun mevedel-session-test--dead-pid ()
  "Return the PID of a process that has exited (and been reaped)."
  (let ((process (make-process :name "mevedel-dead" :command '("true") :noquery t)))
    (while (process-live-p process) (accept-process-output process 0.02))
    (process-id process)))

(defmacro mevedel-session-test--with-sleeper (var &rest body)
  "Run BODY with VAR bound to a live process of this host, killed afterwards."
  (declare (indent 1))
  `(let ((,var (make-process :name "mevedel-sleeper" :command '("sleep" "60") :noquery t)))
     (unwind-protect (progn ,@body)
       (delete-process ,var))))

(defun mevedel-session-test--plant (session target)
  "Make SESSION's directory and a lock there pointing at TARGET."
  (make-directory (mevedel-session-directory session) t)
  (make-symbolic-link target (expand-file-name "lock" (mevedel-session-directory session))))

(ert-deftest mevedel-session:lock-comes-with-storage-and-goes-with-close ()
  "A new session takes its lock when its storage is made, and gives it up on close."
  (mevedel-session-test--with-workspace ws
    (let ((session (mevedel-session-create :workspace ws :id "s1")))
      (mevedel-session-ensure-storage session)
      (let ((owner (mevedel-session--parse-owner (mevedel-session-test--lock session))))
        (should (eql (plist-get owner :pid) (emacs-pid)))
        (should (equal (plist-get owner :host) (system-name)))
        (should (natnump (plist-get owner :start))))
      ;; This Emacs's own session is nobody else's.
      (should-not (mevedel-session-owner ws "s1"))
      ;; Taking it again is a no-op.
      (mevedel-session-lock session)
      (mevedel-session-close session)
      (should-not (mevedel-session-test--lock session))
      (should (file-exists-p (mevedel-session-database-file session))))))

(ert-deftest mevedel-session:live-owner-keeps-its-session ()
  "A lock naming a live process refuses the storage, saying who holds it.
Nothing is written and the lock stays that process's."
  (mevedel-session-test--with-workspace ws
    (mevedel-session-test--with-sleeper sleeper
      (let* ((pid (process-id sleeper))
             (target (format "%d@%s" pid (system-name)))
             (session (mevedel-session-create :workspace ws :id "held")))
        (mevedel-session-test--plant session target)
        (should (equal (mevedel-session-owner ws "held") (list :pid pid :host (system-name) :start nil)))
        (let ((err (should-error (mevedel-session-ensure-storage session)
                                 :type 'mevedel-session-locked)))
          (should (equal (cadr err) (format "session held is in use by process %d" pid))))
        (should-not (mevedel-session-store session))
        (should-not (file-exists-p (mevedel-session-database-file session)))
        (should (equal (mevedel-session-test--lock session) target))
        ;; The same PID started at another time is a newer process: stale.
        (delete-file (expand-file-name "lock" (mevedel-session-directory session)))
        (mevedel-session-test--plant session (format "%d@%s:1000" pid (system-name)))
        (should-not (mevedel-session-owner ws "held"))
        (mevedel-session-ensure-storage session)
        (should (equal (mevedel-session-test--lock session) (mevedel-session--my-token)))
        (mevedel-session-close session)))))

(ert-deftest mevedel-session:stalled-check-keeps-a-live-owner ()
  "A live owner keeps its session when the check reads its start while stalled.
`process-attributes' subtracts the uptime from a clock read after it: a
checking process stalled between the two (a loaded machine short of
memory) reads a start seconds late.  Here every start it gives is 5 s
late, and the owner, which recorded its start unstalled, still holds."
  (mevedel-session-test--with-workspace ws
    (mevedel-session-test--with-sleeper sleeper
      (let* ((pid (process-id sleeper))
             (target (format "%d@%s:%d" pid (system-name) (mevedel-session--process-start pid)))
             (session (mevedel-session-create :workspace ws :id "held"))
             (attributes (symbol-function 'process-attributes)))
        (mevedel-session-test--plant session target)
        (cl-letf (((symbol-function 'process-attributes)
                   (lambda (pid)
                     (let ((attrs (funcall attributes pid)))
                       (cons (cons 'start (time-add (alist-get 'start attrs) 5)) attrs)))))
          (should (eql (plist-get (mevedel-session-owner ws "held") :pid) pid))
          (should-error (mevedel-session-ensure-storage session) :type 'mevedel-session-locked))
        (should (equal (mevedel-session-test--lock session) target))))))

(ert-deftest mevedel-session:other-host-owner-cannot-be-checked ()
  "A lock of another host is taken as held, and the message names that host."
  (mevedel-session-test--with-workspace ws
    (let ((session (mevedel-session-create :workspace ws :id "remote")))
      (mevedel-session-test--plant session "4242@elsewhere.example:1000")
      (should (equal (plist-get (mevedel-session-owner ws "remote") :host) "elsewhere.example"))
      (let ((err (should-error (mevedel-session-lock session) :type 'mevedel-session-locked)))
        (should (equal (cadr err)
                       "session remote is in use by process 4242 on elsewhere.example"))))))

(ert-deftest mevedel-session:stale-lock-is-taken-over ()
  "A lock whose process is gone, or that names nobody, is taken over silently.
A break lock left by a process that is gone does not stand in the way."
  (mevedel-session-test--with-workspace ws
    (let* ((dead (mevedel-session-test--dead-pid))
           (session (mevedel-session-create :workspace ws :id "stale")))
      (mevedel-session-test--plant session (format "%d@%s" dead (system-name)))
      (make-symbolic-link (format "%d@%s" dead (system-name))
                          (expand-file-name "lock.break" (mevedel-session-directory session)))
      (should-not (mevedel-session-owner ws "stale"))
      (mevedel-session-ensure-storage session)
      (should (equal (mevedel-session-test--lock session) (mevedel-session--my-token)))
      (should-not (file-symlink-p (expand-file-name "lock.break"
                                                    (mevedel-session-directory session))))
      (mevedel-session-close session)
      ;; A plain file there names nobody.
      (with-temp-file (expand-file-name "lock" (mevedel-session-directory session))
        (insert "garbage"))
      (mevedel-session-lock session)
      (should (equal (mevedel-session-test--lock session) (mevedel-session--my-token)))
      (mevedel-session-close session))))

(ert-deftest mevedel-session:one-open-session-object-per-session-here ()
  "In this Emacs, a second session object cannot write a session another has open."
  (mevedel-session-test--with-workspace ws
    (let ((first (mevedel-session-create :workspace ws :id "twice")))
      (mevedel-session-ensure-storage first)
      (let ((second (mevedel-session-create :workspace ws :id "twice")))
        (should-error (mevedel-session-ensure-storage second) :type 'mevedel-session-locked)
        (mevedel-session-close first)
        (mevedel-session-ensure-storage second)
        (should (mevedel-session-store second))
        ;; Closing the first again leaves the second's lock alone.
        (mevedel-session-close first)
        (should (mevedel-session-test--lock second))
        (mevedel-session-close second)))))

(ert-deftest mevedel-session:read-only-session-never-writes ()
  "A session only looked at refuses its storage, naming the owner."
  (mevedel-session-test--with-workspace ws
    (let ((session (mevedel-session-create :workspace ws :id "look")))
      (setf (mevedel-session-read-only session) (list :pid 4242 :host (system-name)))
      (let ((err (should-error (mevedel-session-ensure-storage session)
                               :type 'mevedel-session-locked)))
        (should (equal (cadr err) "session look is in use by process 4242")))
      (should-not (file-exists-p (mevedel-session-directory session))))))

(ert-deftest mevedel-session:exit-gives-up-every-lock ()
  "The `kill-emacs-hook' member deletes the locks this Emacs holds, after the saves."
  (should (memq #'mevedel-session--unlock-all kill-emacs-hook))
  ;; Other packages' members may come later; the saves must come first.
  (should (< (cl-position #'mevedel-save--flush-all kill-emacs-hook)
             (cl-position #'mevedel-session--unlock-all kill-emacs-hook)))
  (mevedel-session-test--with-workspace ws
    (let ((a (mevedel-session-create :workspace ws :id "a"))
          (b (mevedel-session-create :workspace ws :id "b")))
      (mevedel-session-ensure-storage a)
      (mevedel-session-ensure-storage b)
      (mevedel-session--unlock-all)
      (should-not (mevedel-session-test--lock a))
      (should-not (mevedel-session-test--lock b))
      (mevedel-session-close a)
      (mevedel-session-close b))))

(provide 'session-test)
;;; session-test.el ends here
