;;; remote-e2e-test.el --- Sessions on a remote host over TRAMP  -*- lexical-binding: t; -*-

;;; Commentary:

;; Against a private sshd on 127.0.0.1 (mevedel-sshd.el): the file
;; tools on a TRAMP workspace answer as the same calls on a local copy
;; (but for the workspace's name), session state stays on this
;; machine, ApplyPatch writes atomically there, the mutation lease
;; keeps a second writer out, and a lost or hung host fails loudly.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'mevedel-test-helpers)
(require 'mevedel-sshd)
(require 'mevedel)
(require 'mevedel-tool-fs)
(require 'mevedel-tool-patch)
(require 'mevedel-remote)
(require 'mevedel-remote-helper)
(require 'mevedel-session)
(mevedel--load)

(defconst mevedel-remote-test-files
  '(("a.txt" . "alpha\nbeta foo\n")
    ("src/b.el" . "foo one\nx\nfoo two\n")
    ("src/deep/c.py" . "def foo():\n    return 1\n")
    (".hidden/h.txt" . "foo hidden\n")
    (".gitignore" . "ign/\n")
    ("ign/i.txt" . "foo ignored\n"))
  "The workspace both copies hold.")

(defun mevedel-remote-test--tree (dir)
  "Write `mevedel-remote-test-files' under DIR, a Git repository."
  (pcase-dolist (`(,name . ,text) mevedel-remote-test-files)
    (let ((file (expand-file-name name dir)))
      (make-directory (file-name-directory file) t)
      (with-temp-file file (insert text))))
  (make-directory (expand-file-name ".git" dir) t))

(defmacro mevedel-remote-test--with (vars &rest body)
  "Bind VARS (SSHD LOCAL REMOTE) to a server and two copies of a workspace.
LOCAL is a local directory, REMOTE the TRAMP name of another one on
SSHD.  BODY runs; everything is removed afterwards."
  (declare (indent 1))
  (pcase-let ((`(,sshd ,local ,remote) vars))
    `(mevedel-sshd-with ,sshd
       (let* ((base (file-name-as-directory (make-temp-file "mevedel-remote-" t)))
              (,local (expand-file-name "local/" base))
              (,remote (mevedel-sshd-file ,sshd (expand-file-name "remote/" base)))
              (mevedel-remote-state-directory (expand-file-name "state/" base)))
         (mevedel-remote-test--tree ,local)
         (mevedel-remote-test--tree (expand-file-name "remote/" base))
         (unwind-protect (progn ,@body)
           (delete-directory base t))))))

(defun mevedel-remote-test--call (handler args directory)
  "Run the tool HANDLER on ARGS in DIRECTORY; return its result plist."
  (let ((result nil) (calls 0) (default-directory directory))
    (funcall handler (lambda (r) (setq result r) (cl-incf calls)) args)
    (mevedel-test-wait-until result 30)
    (should (= calls 1))
    result))

(defvar mevedel-remote-test--results nil
  "Every remote result `mevedel-remote-test--same' saw, newest first.")

(defun mevedel-remote-test--same (handler args local remote)
  "Check HANDLER on ARGS answers in REMOTE as in LOCAL, names aside.
ARGS may hold the symbol `ROOT', the workspace's absolute name."
  (let* ((subst (lambda (root) (mapcar (lambda (v) (if (eq v 'ROOT) root v)) args)))
         (here (mevedel-remote-test--call handler (funcall subst local) local))
         (there (mevedel-remote-test--call handler (funcall subst remote) remote))
         (clean (lambda (text root)
                  (string-join
                   (sort (split-string (string-replace root "ROOT/" (or text "")) "\n" t)
                         #'string<)
                   "\n"))))
    (push (plist-get there :result) mevedel-remote-test--results)
    (should-not (eq (plist-get here :status) 'error))
    (should (equal (plist-get there :status) (plist-get here :status)))
    (should (equal (funcall clean (replace-regexp-in-string
                                   "\n(Searched with rg on [^\n]*)" "" (plist-get there :result))
                            remote)
                   (funcall clean (plist-get here :result) local)))
    (plist-get there :result)))

(defmacro mevedel-remote-test--helper (available &rest body)
  "Run BODY with the remote helper AVAILABLE or not, from a fresh start.
Unavailable is a host whose architecture has no helper binary here."
  (declare (indent 1))
  `(let ((mevedel-remote-helper-cache-directory
          (file-name-as-directory (make-temp-file "mevedel-remote-cache-" t)))
         (mevedel-remote-test--results nil))
     (clrhash mevedel-remote--helpers)
     (clrhash mevedel-remote--said-fallback)
     (clrhash mevedel-remote-helper--connections)
     (setq mevedel-remote-helper--told nil)
     (cl-letf (((symbol-function 'mevedel-remote-helper--binary)
                (if ,available (symbol-function 'mevedel-remote-helper--binary) #'ignore)))
       (unwind-protect (progn ,@body)
         (mevedel-test-stop-remote-helpers)
         (delete-directory mevedel-remote-helper-cache-directory t)))))

(defun mevedel-remote-test--file-tools (local remote)
  "Check Glob, Grep and Read in REMOTE answer as in LOCAL."
  (dolist (call `((,#'mevedel-tool-fs-glob (:pattern "**/*"))
                    (,#'mevedel-tool-fs-glob (:pattern "*.el" :path "src"))
                    (,#'mevedel-tool-fs-glob (:pattern "*.py" :path ROOT))
                    (,#'mevedel-tool-fs-grep (:pattern "foo"))
                    (,#'mevedel-tool-fs-grep (:pattern "foo" :path "src" :output_mode "content"))
                    (,#'mevedel-tool-fs-grep (:pattern "FOO" :-i t :output_mode "content" :-A 1))
                    (,#'mevedel-tool-fs-grep (:pattern "foo" :path ROOT :output_mode "count"))
                    (,#'mevedel-tool-fs-grep (:pattern "nothing-here"))
                    (,#'mevedel-tool-fs-read (:file_path "src/b.el"))
                    (,#'mevedel-tool-fs-read (:file_path "src/b.el" :offset 2 :limit 1))))
      (mevedel-remote-test--same (car call) (cadr call) local remote))
    ;; Pages as the module pages: the same counts and notes.
    (should (string-match-p
             (regexp-quote "[Showing output lines 1-2 of 5. Continue with offset=2")
             (plist-get (mevedel-remote-test--call
                         #'mevedel-tool-fs-grep '(:pattern "foo" :output_mode "content" :head_limit 2)
                         remote)
                        :result)))
    ;; A big file is paged from its start, with the whole file's count.
    (let ((big (expand-file-name "big.txt" local)))
      (with-temp-file big
        (dotimes (i 5000) (insert (format "line %d\n" (1+ i)))))
      (copy-file big (expand-file-name "big.txt" remote))
      (let ((mevedel-remote-read-chunk 1024))
        (mevedel-remote-test--same #'mevedel-tool-fs-read '(:file_path "big.txt" :offset 10 :limit 5)
                                   local remote)
        (mevedel-remote-test--same #'mevedel-tool-fs-read '(:file_path "big.txt") local remote)))
    ;; Absolute names are full TRAMP names, never bare host paths.
    (should (string-search (concat "\n" remote "src/b.el:2\n")
                           (plist-get (mevedel-remote-test--call
                                         #'mevedel-tool-fs-grep
                                         (list :pattern "foo" :path remote :output_mode "count")
                                         remote)
                                      :result))))

(ert-deftest mevedel-remote:file-tools-answer-as-locally-through-the-helper ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd)
    (mevedel-remote-test--helper t
      (let ((ops nil))
        (cl-letf* ((call (symbol-function 'mevedel-remote-helper--call))
                   ((symbol-function 'mevedel-remote-helper--call)
                    (lambda (conn op &rest rest)
                      (push op ops)
                      (apply call conn op rest))))
          (mevedel-remote-test--file-tools local remote))
        (should (equal (sort (delete-dups (delete "cancel" ops)) #'string<)
                       '("glob" "grep" "read"))))
      ;; The helper did the work: it runs, and nothing fell back to rg.
      (should (mevedel-remote-helper--conn-p
               (gethash (mevedel-remote-host remote) mevedel-remote--helpers)))
      (should mevedel-remote-test--results)
      (dolist (result mevedel-remote-test--results)
        (should-not (string-search "(Searched with rg" result))))))

(ert-deftest mevedel-remote:file-tools-answer-as-locally-without-the-helper ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd)
    (mevedel-remote-test--helper nil
      (let ((messages nil))
        (cl-letf* ((message-fn (symbol-function 'message))
                   ((symbol-function 'message)
                    (lambda (format &rest args)
                      (when format (push (apply #'format-message format args) messages))
                      (apply message-fn format args))))
          (mevedel-remote-test--file-tools local remote))
        (should (eq (car-safe (gethash (mevedel-remote-host remote) mevedel-remote--helpers))
                    :error))
        ;; Said once: one result and one message name the missing helper.
        (should (= 1 (cl-count-if (lambda (result)
                                    (string-search "(Searched with rg on" result))
                                  mevedel-remote-test--results)))
        (should (= 1 (cl-count-if (lambda (text) (string-search "No mevedel helper is built" text))
                                  messages)))))))

(defconst mevedel-remote-test--media
  '((:file_path "small.png")
    (:file_path "screen-4000x3000.png")
    (:file_path "three-pages.pdf")
    (:file_path "three-pages.pdf" :pages "2" :mode "image"))
  "Reads of images and PDFs, each from test/fixtures/media/.")

(defun mevedel-remote-test--media-reads (local remote)
  "Check Read of images and PDFs in REMOTE answers as in LOCAL, pictures too.
Return how many times TRAMP copied a file here meanwhile."
  (let ((copies 0)
        (host-dir (mevedel-remote-local-name remote))
        ;; Private: what is left there afterwards was left by Read.
        (temporary-file-directory (file-name-as-directory
                                   (make-temp-file "mevedel-remote-media-test-" t))))
    (dolist (name '("small.png" "screen-4000x3000.png" "three-pages.pdf"))
      (let ((fixture (expand-file-name (concat "test/fixtures/media/" name) mevedel-test-root)))
        (copy-file fixture (expand-file-name name local))
        (copy-file fixture (expand-file-name name host-dir))))
    (cl-letf* (((symbol-function 'mevedel-tool-fs-accepted-images)
                (lambda (_buffer) '("image/png" "image/jpeg")))
               (local-copy (symbol-function 'file-local-copy))
               ((symbol-function 'file-local-copy)
                (lambda (file &rest rest) (cl-incf copies) (apply local-copy file rest)))
               ;; Small steps: the larger files take several requests.
               (mevedel-remote-read-chunk 4096))
      (dolist (args mevedel-remote-test--media)
        (let ((here (mevedel-remote-test--call #'mevedel-tool-fs-read args local))
              (there (mevedel-remote-test--call #'mevedel-tool-fs-read args remote)))
          (should-not (eq (plist-get here :status) 'error))
          (should (equal (plist-get there :status) (plist-get here :status)))
          (should (equal (plist-get there :result) (plist-get here :result)))
          (when (string-suffix-p ".png" (plist-get args :file_path))
            (should (plist-get here :media)))
          (should (equal (plist-get there :media) (plist-get here :media)))))
      ;; Nothing is left behind here.
      (should-not (directory-files temporary-file-directory nil
                                   directory-files-no-dot-files-regexp)))
    (delete-directory temporary-file-directory t)
    copies))

(ert-deftest mevedel-remote:media-reads-go-through-the-helper ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd)
    (mevedel-remote-test--helper t
      (let ((requests nil))
        (cl-letf* ((call (symbol-function 'mevedel-remote-helper--call))
                   ((symbol-function 'mevedel-remote-helper--call)
                    (lambda (conn op args &rest rest)
                      (push (cons op args) requests)
                      (apply call conn op args rest))))
          (should (= 0 (mevedel-remote-test--media-reads local remote)))
          ;; Byte reads: the 160 KB PNG in three, its first 4 KB then
          ;; 128 KB steps.
          (should (cl-every (lambda (request)
                              (and (equal (car request) "read")
                                   (plist-get (cdr request) :bytes)))
                            requests))
          (should (= 3 (cl-count-if (lambda (request)
                                      (string-suffix-p "/screen-4000x3000.png"
                                                       (plist-get (cdr request) :path)))
                                    requests)))
          ;; A file over the limit fails at its first request, naming it.
          (setq requests nil)
          (let* ((mevedel-tool-fs-remote-read-limit 1000)
                 (result (mevedel-remote-test--call #'mevedel-tool-fs-read
                                                    '(:file_path "small.png") remote)))
            (should (eq (plist-get result :status) 'error))
            (should (string-search "mevedel-tool-fs-remote-read-limit" (plist-get result :result)))
            (should (= 1 (length requests))))
          ;; A missing file says so, as locally.
          (should (equal (plist-get (mevedel-remote-test--call
                                     #'mevedel-tool-fs-read '(:file_path "none.png") remote)
                                    :result)
                         (plist-get (mevedel-remote-test--call
                                     #'mevedel-tool-fs-read '(:file_path "none.png") local)
                                    :result))))))))

(ert-deftest mevedel-remote:media-reads-without-the-helper-copy-through-tramp ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd)
    (mevedel-remote-test--helper nil
      (should (> (mevedel-remote-test--media-reads local remote) 0)))))

(defun mevedel-remote-test--model-read (args directory)
  "Run Read on ARGS in DIRECTORY as a model's call runs; return the outcome."
  (let ((outcome nil) (default-directory directory))
    (mevedel-pipeline-run-tool-outcome (mevedel-tool-get "Read") args
                                       (lambda (o) (setq outcome o)))
    (mevedel-test-wait-until outcome 30)
    outcome))

(ert-deftest mevedel-remote:names-are-answered-as-tramp-answers-them ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd local)
    (mevedel-remote-fast-names remote)
    (let* ((host (mevedel-remote-host remote))
           (tramp (lambda (operation &rest args)
                    (let ((inhibit-file-name-handlers
                           (cons #'mevedel-remote--name-handler inhibit-file-name-handlers))
                          (inhibit-file-name-operation operation))
                      (apply operation args))))
           (calls `((expand-file-name "a.txt" ,remote) (expand-file-name "src/b.el" ,remote)
                    (expand-file-name "src/../a.txt" ,remote) (expand-file-name "" ,remote)
                    (expand-file-name "." ,remote) (expand-file-name ,(concat remote "x//y"))
                    (expand-file-name ,(concat remote "src/")) (expand-file-name "/etc" ,remote)
                    (expand-file-name ,(concat host "/")) (expand-file-name "x" ,host)
                    (file-remote-p ,remote) (file-remote-p ,(concat remote "a.txt") localname)
                    (file-remote-p ,remote host) (file-remote-p ,remote method)
                    (file-name-as-directory ,(directory-file-name remote))
                    (file-name-as-directory ,remote) (directory-file-name ,remote)
                    (directory-file-name ,(concat host "/")) (directory-file-name ,(concat remote "a"))
                    (file-name-directory ,(concat remote "src/b.el")) (file-name-directory ,remote)
                    (file-name-directory ,(concat host "/")) (file-name-nondirectory ,(concat remote "a.txt"))
                    (file-name-nondirectory ,remote))))
      (should (rassq #'mevedel-remote--name-handler file-name-handler-alist))
      (dolist (call calls)
        (should (equal (cons call (apply (car call) (cdr call)))
                       (cons call (apply tramp call))))
        ;; The string-work expansion agrees, on every name.
        (when (eq (car call) 'expand-file-name)
          (should (equal (cons call (apply #'mevedel-remote-expand-file-name (cdr call)))
                         (cons call (apply tramp call))))))
      (let ((default-directory remote))
        (should (equal (mevedel-remote-expand-file-name "src/b.el") (concat remote "src/b.el"))))
      ;; A plain name never reaches TRAMP, nor, expanded by string work,
      ;; the handler that the search of every handler's regexp finds.
      (let ((reached nil))
        (cl-letf* ((handler (symbol-function 'tramp-file-name-handler))
                   ((symbol-function 'tramp-file-name-handler)
                    (lambda (&rest args) (push (car args) reached) (apply handler args))))
          (expand-file-name "src/b.el" remote)
          (file-remote-p (concat remote "a.txt") 'localname)
          (directory-file-name remote)
          (file-name-directory (concat remote "src/b.el")))
        (should-not reached))
      (let ((searched nil))
        (cl-letf* ((handler (symbol-function 'mevedel-remote--name-handler))
                   ((symbol-function 'mevedel-remote--name-handler)
                    (lambda (&rest args) (push (car args) searched) (apply handler args))))
          (should (equal (mevedel-remote-expand-file-name "src/b.el" remote)
                         (concat remote "src/b.el")))
          (should (equal (mevedel-remote-expand-file-name (concat remote "a.txt") "/tmp/")
                         (concat remote "a.txt"))))
        (should-not searched)))))

(ert-deftest mevedel-remote:a-model-read-is-one-helper-request-and-no-tramp-call ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd local)
    (mevedel-remote-test--helper t
      ;; The first call starts the helper.
      (should-not (plist-get (mevedel-remote-test--model-read '(:file_path "a.txt") remote)
                             :denied))
      (let ((requests nil) (tramp nil))
        (cl-letf* ((call (symbol-function 'mevedel-remote-helper--call))
                   ((symbol-function 'mevedel-remote-helper--call)
                    (lambda (conn op &rest rest) (push op requests) (apply call conn op rest)))
                   (handler (symbol-function 'tramp-file-name-handler))
                   ((symbol-function 'tramp-file-name-handler)
                    (lambda (&rest args) (push (car args) tramp) (apply handler args))))
          (let ((outcome (mevedel-remote-test--model-read '(:file_path "a.txt") remote)))
            (should (eq (plist-get outcome :status) 'success))
            (should (string-search "beta foo" (plist-get outcome :result)))))
        (should (equal requests '("read")))
        ;; At most a look at the workspace's rules file, which the
        ;; permission check takes once per
        ;; `mevedel-permissions-recheck-interval'.
        (should (member tramp '(nil (file-attributes))))))))

;; A page asked ahead is taken only by the same request, soon after;
;; anything else asks the host again.
(ert-deftest mevedel-remote:a-page-asked-ahead-is-taken-only-unchanged-and-fresh ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd local)
    (mevedel-remote-test--helper t
      ;; The first call starts the helper.
      (mevedel-remote-test--model-read '(:file_path "a.txt") remote)
      (let* ((file (expand-file-name "a.txt" remote))
             (root (mevedel-remote-local-name remote))
             (first-line (list :offset 1 :limit 1 :char-offset nil :root root))
             (whole (list :offset nil :limit nil :char-offset nil :root root))
             (requests 0)
             (read (lambda (page)
                     (let ((answer nil))
                       (mevedel-remote-read-page file file page
                                                 (lambda (status value)
                                                   (setq answer (list status value)))
                                                 (lambda () (setq answer '(fallback))))
                       (mevedel-test-wait-until answer 30)
                       answer)))
             (plain (funcall read whole)))
        (should (eq (car plain) 'ok))
        (cl-letf* ((call (symbol-function 'mevedel-remote-helper--call))
                   ((symbol-function 'mevedel-remote-helper--call)
                    (lambda (conn op &rest rest) (cl-incf requests) (apply call conn op rest))))
          ;; The same page, soon: one request, the same answer.
          (mevedel-remote-read-page-ahead file file whole)
          (should (equal (funcall read whole) plain))
          (should (= requests 1))
          ;; Another page: asked again, answered for that page.
          (mevedel-remote-read-page-ahead file file first-line)
          (let ((answer (funcall read whole)))
            (should (equal answer plain)))
          (should (= requests 3))
          ;; The same page, but asked too long ago (the Read waited
          ;; for a question, say): asked again.
          (mevedel-remote-read-page-ahead file file whole)
          (sleep-for (* 2 mevedel-remote--ahead-seconds))
          (should (equal (funcall read whole) plain))
          (should (= requests 5)))))))

(ert-deftest mevedel-remote:a-link-out-of-the-workspace-is-not-read-unasked ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd)
    (let* ((host-dir (mevedel-remote-local-name remote))
           (outside (make-temp-file "mevedel-remote-outside-" nil ".txt" "secret\n")))
      (unwind-protect
          (progn
            (make-symbolic-link outside (expand-file-name "out.txt" host-dir))
            (make-symbolic-link (expand-file-name "a.txt" host-dir)
                                (expand-file-name "in.txt" host-dir))
            (dolist (available '(t nil))
              (mevedel-remote-test--helper available
                (mevedel-remote-test--model-read '(:file_path "a.txt") remote)
                (let ((out (mevedel-remote-test--model-read '(:file_path "out.txt") remote))
                      (in (mevedel-remote-test--model-read '(:file_path "in.txt") remote)))
                  ;; Refused, or asked about (nobody can answer here):
                  ;; never read.
                  (should (eq (plist-get out :status) 'error))
                  (should-not (string-search "secret" (plist-get out :result)))
                  (when available
                    (should (string-search outside (plist-get out :result))))
                  (should (eq (plist-get in :status) 'success))
                  (should (string-search "beta foo" (plist-get in :result)))))))
        (delete-file outside)
        (ignore local)))))

(ert-deftest mevedel-remote:session-state-stays-on-this-machine ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore local)
    (let* ((session (mevedel-session-create :workspace remote))
           (dir (mevedel-session-ensure-storage session))
           (other (mevedel-sshd-file sshd "/tmp/")))
      (unwind-protect
          (progn
            (should-not (file-remote-p dir))
            (should (string-prefix-p (expand-file-name mevedel-remote-state-directory) dir))
            (should (file-exists-p (mevedel-session-database-file session)))
            ;; Keyed by host and path: another path, another place.
            (should-not (equal (mevedel-remote-state-root remote)
                               (mevedel-remote-state-root other)))
            (should (string-search (mevedel-sshd-alias sshd) (mevedel-remote-state-root remote)))
            ;; Nothing of it on the host.
            (should-not (file-exists-p (expand-file-name ".mevedel/sessions" remote)))
            (should (equal (mapcar #'car (mevedel-session-saved remote)) nil)))
        (mevedel-session-close session)))))

(defun mevedel-remote-test--patch (data patch)
  "Run ApplyPatch on PATCH as a provider call from DATA; return its text."
  (let ((box nil))
    (with-current-buffer data
      (mevedel-pipeline-run-tool (mevedel-tool-get "ApplyPatch") (list :patch patch)
                                 (lambda (result) (setq box (list result)))
                                 :tool-use-id "call-patch" :data-buffer data))
    (mevedel-test-wait-until box 60)
    (mevedel-render-data-strip (car box) "call-patch")))

(defmacro mevedel-remote-test--with-session (vars root &rest body)
  "Run BODY with VARS (SESSION DATA) bound to a full-auto session of ROOT.
DATA is a data buffer whose calls belong to SESSION."
  (declare (indent 2))
  (pcase-let ((`(,session ,data) vars))
    `(let* ((,session (mevedel-session-create :workspace ,root))
            (,data (generate-new-buffer " *mevedel-remote-test*"))
            (mevedel-permissions-rules nil))
       (setf (mevedel-session-permission-mode ,session) 'full-auto)
       (with-current-buffer ,data
         (setq default-directory ,root)
         (setq-local mevedel-session-current ,session))
       (unwind-protect (let ((default-directory ,root)) ,@body)
         (mevedel-remote-lease-release ,root)
         (mevedel-session-close ,session)
         (kill-buffer ,data)))))

(defun mevedel-remote-test--text (file)
  "Return FILE's contents."
  (with-temp-buffer (insert-file-contents file) (buffer-string)))

(defun mevedel-remote-test--hash (file)
  "Return the SHA-256 of FILE's bytes."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file)
    (secure-hash 'sha256 (current-buffer))))

(defun mevedel-remote-test--chattr (flag dir)
  "Run chattr FLAG on host DIR: +i makes it read-only for root too."
  (unless (eql 0 (call-process "chattr" nil nil nil flag dir))
    (ert-fail (format "chattr %s %s failed (e2fsprogs is needed)" flag dir))))

(defun mevedel-remote-test--apply-patch (local remote)
  "Check ApplyPatch and its writer in REMOTE against LOCAL: all or nothing."
  (let ((patch (concat "*** Begin Patch\n*** Update File: src/b.el\n@@\n-x\n+y\n"
                       "*** Add File: new/n.txt\n+fresh\n*** Delete File: a.txt\n"
                       "*** End Patch\n"))
        (host-b (mevedel-remote-local-name (expand-file-name "src/b.el" remote))))
    (set-file-modes host-b #o751)
    (set-file-modes (expand-file-name "src/b.el" local) #o751)
    (let ((here (mevedel-remote-test--with-session (session data) local
						   (ignore session)
						   (mevedel-remote-test--patch data patch)))
          (there (mevedel-remote-test--with-session (session data) remote
						    (ignore session)
						    (mevedel-remote-test--patch data patch))))
      (should (equal there here))
      (dolist (name '("src/b.el" "new/n.txt"))
        (should (equal (mevedel-remote-test--text (expand-file-name name remote))
                       (mevedel-remote-test--text (expand-file-name name local)))))
      (should-not (file-exists-p (expand-file-name "a.txt" remote)))
      ;; The mode is kept, and nothing is left beside the file.
      (should (= (file-modes host-b) #o751))
      (should (equal (directory-files (file-name-directory host-b) nil "mevedel") nil)))
    ;; A hunk that does not apply: nothing at all is written.
    (let ((before (mevedel-remote-test--text (expand-file-name "src/b.el" remote))))
      (mevedel-remote-test--with-session (session data) remote
					 (ignore session)
					 (should (string-prefix-p
						  "Error:"
						  (mevedel-remote-test--patch
						   data (concat "*** Begin Patch\n*** Add File: other.txt\n+o\n"
								"*** Update File: src/b.el\n@@\n-not there\n+z\n"
								"*** End Patch\n")))))
      (should (equal (mevedel-remote-test--text (expand-file-name "src/b.el" remote)) before))
      (should-not (file-exists-p (expand-file-name "other.txt" remote))))
    ;; The writer: a file changed on the host since it was read, a
    ;; read-only directory, or a write failing after another was
    ;; staged, leaves every file as it was and nothing beside them.
    (let* ((b (expand-file-name "src/b.el" remote))
           (c (expand-file-name "src/deep/c.py" remote))
           (deep (mevedel-remote-local-name (expand-file-name "src/deep/" remote)))
           (new (make-temp-file "mevedel-new-"))
           (b-attrs (file-attributes b))
           (b-hash (mevedel-remote-test--hash b))
           (c-hash (mevedel-remote-test--hash c))
           (b-before (mevedel-remote-test--text b))
           (c-before (mevedel-remote-test--text c)))
      (unwind-protect
          (progn
            (with-temp-file new (insert "new\n"))
            (should (string-match-p
                     "src/deep/c.py.*changed"
                     (cadr (should-error (mevedel-remote-patch-write
                                          (list (list b new b-attrs b-hash)
                                                (list c new (file-attributes b) b-hash)))))))
            (should-error (mevedel-remote-patch-write
                           (list (list b new b-attrs b-hash)
                                 (list c (concat new "-missing") (file-attributes c) c-hash))))
            (mevedel-remote-test--chattr "+i" deep)
            (unwind-protect
                (should-error (mevedel-remote-patch-write
                               (list (list b new b-attrs b-hash)
                                     (list c new (file-attributes c) c-hash))))
              (mevedel-remote-test--chattr "-i" deep))
            (should (equal (mevedel-remote-test--text b) b-before))
            (should (equal (mevedel-remote-test--text c) c-before))
            (dolist (dir '("src/" "src/deep/"))
              (should (equal (directory-files (mevedel-remote-local-name
                                               (expand-file-name dir remote))
                                              nil "mevedel")
                             nil))))
        (delete-file new)))))

(ert-deftest mevedel-remote:apply-patch-writes-atomically-through-the-helper ()
  "ApplyPatch's files are written by the helper, in one request: all or none."
  (require 'mevedel-render-data)
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd)
    (mevedel-remote-test--helper t
      (let ((requests 0))
        (advice-add 'mevedel-remote-helper-write-all :before
                    (lambda (&rest _) (cl-incf requests))
                    '((name . count)))
        (unwind-protect (mevedel-remote-test--apply-patch local remote)
          (advice-remove 'mevedel-remote-helper-write-all 'count))
        ;; The patch, the stale file and the read-only directory, one
        ;; request each (a missing local file is refused before any).
        (should (= requests 3))))))

(ert-deftest mevedel-remote:apply-patch-writes-atomically-through-tramp ()
  "Without the helper on the host, TRAMP writes ApplyPatch's files: all or none."
  (require 'mevedel-render-data)
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd)
    (mevedel-remote-test--helper nil
      (advice-add 'mevedel-remote-helper-write-all :override
                  (lambda (&rest _) (ert-fail "the helper wrote without running"))
                  '((name . never)))
      (unwind-protect (mevedel-remote-test--apply-patch local remote)
        (advice-remove 'mevedel-remote-helper-write-all 'never)))))

;;;; The real bin/mevedel

(require 'mevedel-e2e-helpers)

(cl-defun mevedel-remote-test--headless (sshd dir &key steps args (bin mevedel-test-root)
                                              before settings)
  "Run BIN's bin/mevedel --dir DIR with ARGS against a scripted model.
The model replays STEPS ({{root}} in them is DIR).  SSHD's TRAMP
settings are in the --config file, and SETTINGS, more forms, after
them.  BEFORE, a function of the process and the model server, runs
once it started.
Return (STATUS STDOUT STDERR SECONDS)."
  (mevedel-e2e-require-python)
  (let* ((script (mevedel-e2e-write-script steps))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,dir))))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) 'openai t
                                            (append (mevedel-sshd-tramp-forms sshd) settings)))
         (out (generate-new-buffer " *mevedel-remote-out*"))
         (err (generate-new-buffer " *mevedel-remote-err*"))
         (start (float-time)))
    (unwind-protect
        (let* ((process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                             invocation-directory))
                                          process-environment))
               (process (make-process
                         :name "mevedel-headless" :buffer out :stderr err :noquery t
                         :sentinel #'ignore
                         :connection-type 'pipe
                         :command (append (list (expand-file-name "bin/mevedel" bin)
                                                "--config" init "--dir" dir "--json")
                                          args))))
          (when before (funcall before process server))
          (let ((deadline (+ (float-time) 150)))
            (while (and (process-live-p process) (< (float-time) deadline))
              (accept-process-output nil 0.05)))
          (when (process-live-p process) (delete-process process))
          (accept-process-output nil 0.1)
          (list (process-exit-status process)
                (with-current-buffer out (buffer-string))
                (with-current-buffer err (buffer-string))
                (- (float-time) start)))
      (mevedel-scripted-model-stop server)
      (kill-buffer out)
      (kill-buffer err)
      (dolist (file (list init script)) (delete-file file)))))

(defun mevedel-remote-test--json (stdout)
  "Return the JSON transcript STDOUT as an alist."
  (json-parse-string stdout :object-type 'alist :array-type 'list
                     :null-object nil :false-object nil))

(ert-deftest mevedel-remote:headless-run-works-in-a-remote-workspace ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore local)
    (pcase-let* ((cache (file-name-as-directory (make-temp-file "mevedel-remote-cache-" t)))
                 (`(,status ,stdout ,stderr ,_)
                 (mevedel-remote-test--headless
                  sshd remote
                  :settings `((setq mevedel-remote-helper-cache-directory ,cache))
                  :args '("-p" "Edit b.el" "--permission-mode" "full-auto" "--timeout" "40")
                  :steps `(((tool_calls
                             . [((name . "Read") (arguments . ((file_path . "src/b.el"))))
                                ((name . "Grep") (arguments . ((pattern . "foo")
                                                               (output_mode . "content"))))
                                ((name . "Glob") (arguments . ((pattern . "*.py"))))]))
                           ((tool_calls
                             . [((name . "ApplyPatch")
                                 (arguments
                                  . ((patch . ,(concat "*** Begin Patch\n*** Update File: src/b.el\n"
                                                       "@@\n-x\n+edited remotely\n*** End Patch\n")))))]))
                           ((text . "Done."))))))
      (unless (eql status 0) (ert-fail (list status stdout stderr)))
      (let* ((json (mevedel-remote-test--json stdout))
             (calls (alist-get 'tool_calls json)))
        (should (equal (alist-get 'outcome json) "done"))
        (should (equal (mapcar (lambda (c) (alist-get 'status c)) calls)
                       '("success" "success" "success" "success")))
        (should (string-search "foo one" (alist-get 'result_preview (nth 0 calls))))
        (should (string-search "src/b.el:1:foo one" (alist-get 'result_preview (nth 1 calls))))
        (should (string-search "src/deep/c.py" (alist-get 'result_preview (nth 2 calls))))
        ;; The first remote call loaded the helper, shipped it and searched with it.
        (should-not (string-search "Searched with rg" (alist-get 'result_preview (nth 1 calls))))
        (should (directory-files cache nil "\\`mevedel-remote-[0-9a-f]+\\'"))
        (delete-directory cache t))
      (should (equal (mevedel-remote-test--text (expand-file-name "src/b.el" remote))
                     "foo one\nedited remotely\nfoo two\n"))
      ;; The session was saved here, keyed by host and path.
      (should (directory-files-recursively (expand-file-name "~/.mevedel/remote/")
                                           "\\`session\\.sqlite\\'"))
      (should-not (file-exists-p (expand-file-name ".mevedel/sessions" remote)))
      (should-not (string-search "Cannot open session store" stderr)))))

(ert-deftest mevedel-remote:a-store-that-cannot-open-fails-the-run-at-once ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore local)
    (let ((blocker (make-temp-file "mevedel-not-a-directory-")))
      (unwind-protect
          (pcase-let ((`(,status ,_ ,stderr ,seconds)
                       (mevedel-remote-test--headless
                        sshd remote
                        :settings `((setq mevedel-remote-state-directory
                                          ,(expand-file-name "state/" blocker)))
                        :args '("-p" "hi" "--timeout" "60")
                        :steps '(((text . "never"))))))
            (should (eql status 1))
            (should (string-match-p "Cannot open the storage of session" stderr))
            (should (< seconds 30)))
        (delete-file blocker)))))

;;;; Connections that fail

(defun mevedel-remote-test--unreachable (sshd dir)
  "Run bin/mevedel --dir DIR, unreachable, with SSHD's TRAMP settings.
Return (STATUS STDERR SECONDS)."
  (pcase-let ((`(,status ,_ ,stderr ,seconds)
               (mevedel-remote-test--headless sshd dir :args '("-p" "hi" "--timeout" "100")
                                              :steps '(((text . "never"))))))
    (list status stderr seconds)))

(ert-deftest mevedel-remote:unreachable-hosts-fail-loudly-naming-the-host ()
  (mevedel-sshd-with sshd
    (pcase-let* ((`(,alias . ,listener) (mevedel-sshd-black-hole sshd))
                 (password (mevedel-sshd-password-alias sshd)))
      (unwind-protect
          (progn
            ;; A host that accepts TCP and never answers.
            (pcase-let ((`(,status ,stderr ,seconds)
                         (mevedel-remote-test--unreachable sshd (format "/ssh:%s:/tmp/" alias))))
              (should (equal (list status stderr) (list 1 stderr)))
              (should (string-match-p (format "Cannot reach /ssh:%s:" alias) stderr))
              (should (< seconds 35)))
            ;; A login that wants a password nobody can type.
            (pcase-let ((`(,status ,stderr ,seconds)
                         (mevedel-remote-test--unreachable sshd (format "/ssh:%s:/tmp/" password))))
              (should (equal (list status stderr) (list 1 stderr)))
              (should (string-match-p (format "Cannot reach /ssh:%s:.*password" password) stderr))
              (should (< seconds 35))))
        (delete-process listener)))
    ;; A host that is down: nothing listens any more.
    (let ((dir (mevedel-sshd-file sshd "/tmp/")))
      (delete-process (mevedel-sshd-process sshd))
      (mevedel-test-wait-until (not (process-live-p (mevedel-sshd-process sshd))))
      (pcase-let ((`(,status ,stderr ,seconds) (mevedel-remote-test--unreachable sshd dir)))
        (should (equal (list status stderr) (list 1 stderr)))
        (should (string-match-p (format "Cannot reach /ssh:%s:" (mevedel-sshd-alias sshd)) stderr))
        (should (< seconds 35))))))

(defun mevedel-remote-test--between-steps (action)
  "Return a BEFORE for `mevedel-remote-test--headless' doing ACTION mid-turn.
ACTION runs once the model server got its second request, whose
answer the script holds back."
  (lambda (_process server)
    (mevedel-test-wait-until (>= (length (mevedel-scripted-model-log server)) 2) 60)
    (funcall action)))

(defconst mevedel-remote-test--two-reads
  '(((tool_calls . [((name . "Read") (arguments . ((file_path . "src/b.el"))))]))
    ((sleep . 2)
     (tool_calls . [((name . "Grep") (arguments . ((pattern . "foo"))))]))
    ((text . "Done.")))
  "A turn reading, then (after a pause) searching.")

(ert-deftest mevedel-remote:a-lost-connection-reconnects-for-the-next-call ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore local)
    (pcase-let ((`(,status ,stdout ,stderr ,_)
                 (mevedel-remote-test--headless
                  sshd remote :steps mevedel-remote-test--two-reads
                  :args '("-p" "go" "--timeout" "60")
                  :before (mevedel-remote-test--between-steps
                           (lambda () (mevedel-sshd-kill-connections sshd))))))
      (unless (eql status 0) (ert-fail (list status stdout stderr)))
      (let ((calls (alist-get 'tool_calls (mevedel-remote-test--json stdout))))
        (should (equal (mapcar (lambda (c) (alist-get 'status c)) calls)
                       '("success" "success")))))))

(ert-deftest mevedel-remote:a-host-lost-mid-turn-ends-the-call-not-emacs ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore local)
    (pcase-let ((`(,status ,stdout ,stderr ,seconds)
                 (mevedel-remote-test--headless
                  sshd remote :steps mevedel-remote-test--two-reads
                  :args '("-p" "go" "--timeout" "90")
                  :before (mevedel-remote-test--between-steps
                           (lambda ()
                             (mevedel-sshd-kill-connections sshd)
                             (delete-process (mevedel-sshd-process sshd)))))))
      ;; The turn went on to its answer; Emacs did not die.
      (unless (eql status 0) (ert-fail (list status stdout stderr)))
      (should (< seconds 60))
      (let* ((json (mevedel-remote-test--json stdout))
             (calls (alist-get 'tool_calls json)))
        (should (equal (alist-get 'answer json) "Done."))
        (should (equal (mapcar (lambda (c) (alist-get 'status c)) calls) '("success" "error")))
        (should (string-match-p (format "Cannot reach /ssh:%s:" (mevedel-sshd-alias sshd))
                                (alist-get 'result_preview (nth 1 calls))))))))

;;;; The mutation lease

(ert-deftest mevedel-remote:a-second-writer-sees-the-lease-and-chooses ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore local)
    (let ((patch (lambda (text)
                   (format "*** Begin Patch\n*** Update File: a.txt\n@@\n alpha\n-%s\n+%s!\n*** End Patch\n"
                           text text))))
      (mevedel-remote-test--with-session (first first-data) remote
        ;; The first writer takes the lease.
        (should (string-prefix-p "The patch was applied"
                                 (mevedel-remote-test--patch first-data (funcall patch "beta foo"))))
        (should (string-search (mevedel-session-id first)
                               (car (mevedel-remote-lease-holder remote))))
        (mevedel-remote-test--with-session (second second-data) remote
          ;; The second sees who holds it and writes nothing.
          (let ((mevedel-remote-lease-policy 'fail))
            (let ((result (mevedel-remote-test--patch second-data (funcall patch "beta foo!"))))
              (should (string-match-p (format "is being written by session %s"
                                              (mevedel-session-id first))
                                      result))))
          (should (equal (mevedel-remote-test--text (expand-file-name "a.txt" remote))
                         "alpha\nbeta foo!\n"))
          ;; Take-over waits until the lease is stale: the first
          ;; session's Emacs stops renewing it (it died, say).
          (let ((held (gethash remote mevedel-remote--leases)))
            (cancel-timer (cdr held))
            (remhash remote mevedel-remote--leases))
          (let* ((mevedel-remote-lease-policy 'take-over)
                 (mevedel-remote-lease-stale-seconds 2)
                 (mevedel-remote-lease-poll 0.2)
                 ;; When the lease was last renewed: the writes before
                 ;; took a while, the helper's start among them.
                 (renewed (- (float-time) (cdr (mevedel-remote-lease-holder remote)))))
            (should (string-prefix-p "The patch was applied"
                                     (mevedel-remote-test--patch second-data
                                                                 (funcall patch "beta foo!"))))
            (should (>= (- (float-time) renewed) 2)))
          (should (string-search (mevedel-session-id second)
                                 (car (mevedel-remote-lease-holder remote)))))))))

(ert-deftest mevedel-remote:headless-runs-say-who-holds-the-lease ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore local)
    (mevedel-remote-test--with-session (holder data) remote
      (ignore data)
      (let ((got nil))
        (mevedel-remote-lease-acquire remote (mevedel-session-id holder)
                                      (lambda (refusal) (setq got (list refusal))))
        (should (equal got '(nil))))
      (dolist (lease '("fail" "read-only"))
        (pcase-let ((`(,status ,stdout ,stderr ,_)
                     (mevedel-remote-test--headless
                      sshd remote
                      :args (list "-p" "edit" "--permission-mode" "full-auto" "--lease" lease)
                      :steps `(((tool_calls
                                 . [((name . "ApplyPatch")
                                     (arguments
                                      . ((patch . ,(concat "*** Begin Patch\n*** Add File: z.txt\n"
                                                           "+z\n*** End Patch\n")))))]))
                               ((text . "Could not."))))))
          (should (eql status 0))
          (should (string-match-p (format "is being written by session %s"
                                          (mevedel-session-id holder))
                                  stderr))
          (let ((call (car (alist-get 'tool_calls (mevedel-remote-test--json stdout)))))
            (should (equal (alist-get 'status call) "error"))
            (should (string-match-p (if (equal lease "read-only") "read-only" "is being written")
                                    (alist-get 'result_preview call))))
          (should-not (file-exists-p (expand-file-name "z.txt" remote))))))))

;;;; Waiting for the lease without blocking Emacs

(defmacro mevedel-remote-test--waiting (vars remote &rest body)
  "Run BODY while a second session of REMOTE waits for a first one's lease.
VARS (FIRST SECOND BOX PROGRESS) are bound to the sessions, the box
the waiting ApplyPatch (adding z.txt) fills with its result, and the
progress texts its row got, newest first."
  (declare (indent 2))
  (pcase-let ((`(,first ,second ,box ,progress) vars))
    `(mevedel-remote-test--with-session (,first first-data) ,remote
       (ignore first-data)
       (let ((got nil))
         (mevedel-remote-lease-acquire ,remote (mevedel-session-id ,first)
                                       (lambda (refusal) (setq got (list refusal))))
         (should (equal got '(nil))))
       (mevedel-remote-test--with-session (,second second-data) ,remote
         (let* ((mevedel-remote-lease-policy 'wait)
                (mevedel-remote-lease-poll 0.2)
                ;; Blocking code would give up after this many seconds.
                (mevedel-remote-lease-wait 8)
                (,box nil)
                (,progress nil)
                (mevedel-pipeline-tool-event-hook
                 (list (lambda (event info)
                         (when (eq event 'progress) (push (plist-get info :progress) ,progress))))))
           (with-current-buffer second-data
             (mevedel-pipeline-run-tool
              (mevedel-tool-get "ApplyPatch")
              (list :patch "*** Begin Patch\n*** Add File: z.txt\n+z\n*** End Patch\n")
              (lambda (result) (setq ,box (list (mevedel-render-data-strip result "call-wait"))))
              :tool-use-id "call-wait" :data-buffer second-data))
           (unwind-protect (progn ,@body)
             (remhash ,remote mevedel-remote--read-only)))))))

(ert-deftest mevedel-remote:a-waiting-writer-leaves-emacs-free-then-writes ()
  (require 'mevedel-render-data)
  (require 'mevedel-view)
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd local)
    (mevedel-remote-test--waiting (first second box progress) remote
      ;; The call came back at once: it waits, and says for whom, on
      ;; its row and in the session's header.
      (should-not box)
      (mevedel-test-wait-until progress 10)
      (let ((waiting (format "Waiting for the lease held by %s" (mevedel-session-id first))))
        (should (string-prefix-p waiting (car progress)))
        (should (string-prefix-p waiting (mevedel-view--lease-header
                                          (mevedel-chat--make :session second)))))
      ;; Emacs runs meanwhile: a timer fires again and again.
      (let* ((ticks 0)
             (timer (run-at-time 0.05 0.05 (lambda () (cl-incf ticks)))))
        (unwind-protect (mevedel-test-wait-until (> ticks 10) 5)
          (cancel-timer timer)))
      (should-not box)
      (should-not (file-exists-p (expand-file-name "z.txt" remote)))
      ;; The first session lets go: the waiting write goes through.
      (mevedel-remote-lease-release remote (mevedel-session-id first))
      (mevedel-test-wait-until box 30)
      (should (string-prefix-p "The patch was applied" (car box)))
      (should (equal (mevedel-remote-test--text (expand-file-name "z.txt" remote)) "z\n"))
      (should (string-search (mevedel-session-id second)
                             (car (mevedel-remote-lease-holder remote))))
      (should-not (mevedel-remote-lease-wait-text remote))
      (should-not (mevedel-view--lease-header (mevedel-chat--make :session second))))))

(ert-deftest mevedel-remote:a-user-stops-waiting-and-reads-only ()
  (require 'mevedel-render-data)
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd local)
    (mevedel-remote-test--waiting (first second box progress) remote
      (mevedel-test-wait-until progress 10)
      (should-not box)
      (mevedel-remote-lease-stop-waiting remote)
      (should box)
      (should (string-match-p "opened read-only while waiting" (car box)))
      (should (mevedel-remote-read-only-p remote))
      (should-not (mevedel-remote-lease-wait-text remote))
      ;; Nothing written, the first session keeps its lease, and the
      ;; read-only session's later writes are refused at once.
      (should-not (file-exists-p (expand-file-name "z.txt" remote)))
      (should (string-search (mevedel-session-id first)
                             (car (mevedel-remote-lease-holder remote))))
      (let ((got nil))
        (mevedel-remote-lease-acquire remote (mevedel-session-id second)
                                      (lambda (refusal) (setq got (list refusal))))
        (should (string-match-p "read-only" (car got))))
      (should-error (mevedel-remote-lease-stop-waiting remote) :type 'user-error))))

(ert-deftest mevedel-remote:a-headless-run-waits-for-the-lease-within-its-timeout ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore local)
    (mevedel-remote-test--with-session (holder data) remote
      (ignore data)
      (let ((got nil))
        (mevedel-remote-lease-acquire remote (mevedel-session-id holder)
                                      (lambda (refusal) (setq got (list refusal))))
        (should (equal got '(nil))))
      (let ((run (lambda (file timeout before)
                   (mevedel-remote-test--headless
                    sshd remote
                    :args (list "-p" "edit" "--permission-mode" "full-auto" "--lease" "wait"
                                "--timeout" (number-to-string timeout))
                    :settings '((setq mevedel-remote-lease-poll 0.3))
                    :before before
                    :steps `(((tool_calls
                               . [((name . "ApplyPatch")
                                   (arguments
                                    . ((patch . ,(format "*** Begin Patch\n*** Add File: %s\n\
+z\n*** End Patch\n" file)))))]))
                             ((text . "Done.")))))))
        ;; Never released: the run waits, then ends at its --timeout.
        (pcase-let ((`(,status ,_ ,stderr ,seconds) (funcall run "never.txt" 6 nil)))
          (should (eql status 1))
          (should (string-match-p (format "waiting for the lease: .*%s" (mevedel-session-id holder))
                                  stderr))
          (should (< seconds 60))
          (should-not (file-exists-p (expand-file-name "never.txt" remote))))
        ;; Released while it waits: the run writes and succeeds.
        (pcase-let ((`(,status ,stdout ,stderr ,_)
                     (funcall run "z.txt" 120
                              (lambda (_process _server)
                                (run-at-time 4 nil #'mevedel-remote-lease-release
                                             remote (mevedel-session-id holder))))))
          (should (eql status 0))
          (should (string-match-p "waiting for the lease" stderr))
          (should (equal (alist-get 'status (car (alist-get 'tool_calls
                                                            (mevedel-remote-test--json stdout))))
                         "success"))
          (should (file-exists-p (expand-file-name "z.txt" remote))))))))

;;;; Opening a remote workspace, unsaved remote buffers

(ert-deftest mevedel-remote:m-x-mevedel-in-a-remote-buffer-opens-its-workspace ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd local)
    (let ((buffer (find-file-noselect (expand-file-name "src/b.el" remote)))
          (view nil))
      (unwind-protect
          (with-current-buffer buffer
            (setq view (call-interactively #'mevedel))
            (let* ((chat (mevedel-view-chat view))
                   (session (mevedel-chat-session chat)))
              (should (equal (mevedel-chat-root chat) remote))
              (should (equal (mevedel-session-workspace session) remote))
              (should-not (file-remote-p (mevedel-session-directory session)))))
        (when (buffer-live-p view)
          (let ((data (mevedel-chat-data-buffer (mevedel-view-chat view))))
            (kill-buffer view)
            (when (buffer-live-p data) (kill-buffer data))))
        (kill-buffer buffer)))))

(ert-deftest mevedel-remote:apply-patch-respects-unsaved-remote-buffers ()
  (mevedel-remote-test--with (sshd local remote)
    (ignore sshd local)
    (let ((buffer (find-file-noselect (expand-file-name "src/b.el" remote))))
      (unwind-protect
          (progn
            (with-current-buffer buffer (goto-char (point-max)) (insert "unsaved\n"))
            (mevedel-remote-test--with-session (session data) remote
              (ignore session)
              (should (string-match-p
                       "src/b.el' has unsaved changes"
                       (mevedel-remote-test--patch
                        data "*** Begin Patch\n*** Update File: src/b.el\n@@\n-x\n+y\n*** End Patch\n")))
              (should (equal (mevedel-remote-test--text (expand-file-name "src/b.el" remote))
                             "foo one\nx\nfoo two\n"))
              ;; Saved, the buffer follows the patch.
              (with-current-buffer buffer (set-buffer-modified-p nil) (revert-buffer t t))
              (should (string-prefix-p
                       "The patch was applied"
                       (mevedel-remote-test--patch
                        data "*** Begin Patch\n*** Update File: src/b.el\n@@\n-x\n+y\n*** End Patch\n")))
              (should (equal (with-current-buffer buffer (buffer-string)) "foo one\ny\nfoo two\n"))
              (should-not (buffer-modified-p buffer))))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer)))))

(provide 'remote-e2e-test)
;;; remote-e2e-test.el ends here
