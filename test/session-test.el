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

(provide 'session-test)
;;; session-test.el ends here
