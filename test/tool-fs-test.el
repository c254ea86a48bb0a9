;;; tool-fs-test.el --- Tests of resource addresses and Read, Glob, Grep  -*- lexical-binding: t; -*-

;;; Commentary:

;; The Lisp layer over the native resolver and searches: address
;; parsing and preparation errors before permission, every implemented
;; family through the tool handlers, ordinary paths, pagination errors,
;; and cancellation of a running search.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-resource)
(require 'mevedel-tool-fs)

(defvar mevedel-permissions-rules)      ; bound by a pipeline test

(defun mevedel-tool-fs-test--write (file text)
  "Write TEXT to FILE, creating its directory."
  (make-directory (file-name-directory file) t)
  (with-temp-file file (insert text)))

(defun mevedel-tool-fs-test--journal-name (days-ago)
  "Return a journal entry file name created DAYS-AGO days ago."
  (format-time-string "%Y-%m-%dT%H:%M:%SZ.md"
                      (time-subtract nil (* days-ago 86400)) t))

(defmacro mevedel-tool-fs-test--with-workspace (&rest body)
  "Run BODY with a fresh workspace, session and memory root bound.
Binds `ws', `session' and `outside' (directory names)."
  (declare (indent 0))
  `(let* ((base (file-name-as-directory (make-temp-file "mevedel-fs" t)))
          (ws (expand-file-name "ws/" base))
          (session (expand-file-name ".mevedel/sessions/s1/" ws))
          (outside (expand-file-name "outside/" base))
          (mevedel-resource-session-function
           (lambda () (list :session-dir (directory-file-name session)
                            :workspace (directory-file-name ws))))
          (mevedel-resource-memory-roots '(".mevedel/memory"))
          (mevedel-resource-skill-roots '((local-mevedel . ".mevedel/skills"))))
     (mevedel-tool-fs-test--write (expand-file-name "local/notes.txt" session)
                                  "alpha\nbeta defun\ngamma\n")
     (mevedel-tool-fs-test--write (expand-file-name "local/plans/p.md" session) "plan defun\n")
     (mevedel-tool-fs-test--write (expand-file-name "tool-results/r1.txt" session) "persisted defun\n")
     (mevedel-tool-fs-test--write (expand-file-name ".mevedel/memory/topic.md" ws) "remember defun\n")
     (mevedel-tool-fs-test--write (expand-file-name ".mevedel/skills/demo/SKILL.md" ws) "skill defun\n")
     (mevedel-tool-fs-test--write
      (expand-file-name (concat ".mevedel/journal/" (mevedel-tool-fs-test--journal-name 1)) ws)
      "fresh journal defun\n")
     (mevedel-tool-fs-test--write
      (expand-file-name (concat ".mevedel/journal/" (mevedel-tool-fs-test--journal-name 20)) ws)
      "stale journal defun\n")
     (mevedel-tool-fs-test--write (expand-file-name "src/a.el" ws) "(defun a ())\n")
     (mevedel-tool-fs-test--write (expand-file-name "secret.txt" outside) "secret defun\n")
     (make-symbolic-link (expand-file-name "secret.txt" outside)
                         (expand-file-name "local/escape.txt" session))
     (unwind-protect (let ((default-directory ws)) ,@body)
       (delete-directory base t))))

(defun mevedel-tool-fs-test--call (handler args)
  "Run the asynchronous HANDLER on ARGS and return its result plist."
  (let ((result nil) (calls 0))
    (funcall handler (lambda (r) (setq result r) (cl-incf calls)) args)
    (mevedel-test-wait-until result 20)
    (should (= calls 1))
    result))

(defun mevedel-tool-fs-test--lines (text)
  "Return the lines of TEXT sorted: Glob and Grep promise no order."
  (sort (split-string text "\n" t)))

(defun mevedel-tool-fs-test--ok (handler args)
  "Return the text of HANDLER's successful result for ARGS."
  (let ((r (mevedel-tool-fs-test--call handler args)))
    (should-not (eq (plist-get r :status) 'error))
    (plist-get r :result)))

(defun mevedel-tool-fs-test--err (handler args)
  "Return the text of HANDLER's error result for ARGS."
  (let ((r (mevedel-tool-fs-test--call handler args)))
    (should (eq (plist-get r :status) 'error))
    (plist-get r :result)))

;;;; Addresses

(ert-deftest mevedel-resource:parse-canonicalises-and-leaves-paths-alone ()
  (should (equal (mevedel-resource-parse "WORK://a%2db/c d/") "work://a-b/c%20d"))
  (should (equal (mevedel-resource-parse "memory://journal") "memory://journal/"))
  (should-not (mevedel-resource-parse "src/a.el"))
  (should-not (mevedel-resource-parse "C:foo"))
  (let ((err (should-error (mevedel-resource-parse "work://a/../b")
                           :type 'mevedel-core-resource-error)))
    (should (string-match-p "`work://a/\\.\\./b'\\|`work://a/../b`" (cadr err)))
    (should (string-match-p "parent traversal" (cadr err))))
  (should-error (mevedel-resource-parse "nope://x") :type 'mevedel-core-resource-error)
  (should (equal (mevedel-resource-parse-many '("work://a/" "src/x" "mevedel://%7e"))
                 '("work://a" nil "mevedel://~")))
  (should-error (mevedel-resource-parse-many '("work://ok" "work://..")) :type 'mevedel-core-resource-error))

(ert-deftest mevedel-resource:parse-returns-canonical-input-itself ()
  (let ((canonical "memory://local-mevedel/topics/build.md")
        (long (concat "work://" (mapconcat (lambda (i) (format "dir%04d" i))
                                           (number-sequence 1 300) "/")))
        (long-lax (concat "WORK://" (make-string 2000 ?a) "/%c3%a9/")))
    (should (eq (mevedel-resource-parse canonical) canonical))
    (should (eq (mevedel-resource-parse long) long))
    (should (> (string-bytes long) 1024))
    (should (equal (mevedel-resource-parse long-lax)
                   (concat "work://" (make-string 2000 ?a) "/%C3%A9")))
    (should (equal (mevedel-resource-parse "work://d\u00e9j\u00e0") "work://d%C3%A9j%C3%A0"))
    (should-error (mevedel-resource-parse 42) :type 'wrong-type-argument)
    (should-error (mevedel-resource-parse (concat "work://" (make-string 1500 ?b) "/%2F"))
                  :type 'mevedel-core-resource-error)))

(ert-deftest mevedel-resource:validation-fails-before-permission-without-paths ()
  (mevedel-tool-fs-test--with-workspace
    (dolist (case '(("work://%2E%2E/x" . "Invalid resource address")
                    ("work://escape.txt" . "symbolic link")
                    ("work://a%2Fb" . "escaped")
                    ("agent://root/x" . "Unsupported operation")
                    ("mcp://s" . "Unsupported operation")))
      (let ((err (should-error (mevedel-resource-prepare (car case) "Grep")
                               :type 'mevedel-core-resource-error)))
        (should (string-match-p (regexp-quote (cdr case)) (cadr err)))
        (should-not (string-match-p (regexp-quote base) (cadr err)))))))

(ert-deftest mevedel-resource:facts-carry-backing-paths-for-permission ()
  (mevedel-tool-fs-test--with-workspace
    (let ((facts (mevedel-resource-facts (mevedel-resource-prepare "work://shared/n.md" "ApplyPatch"))))
      (should (equal (plist-get facts :operation) "ApplyPatch"))
      (should (plist-get facts :write))
      (should (equal (plist-get facts :canonical) "work://shared/n.md"))
      (should (equal (plist-get facts :paths)
                     (list (expand-file-name ".mevedel/shared/n.md" ws)))))
    (should (equal (mevedel-resource-visit-path "work://notes.txt")
                   (expand-file-name "local/notes.txt" session)))
    (should (equal (mevedel-resource-artifact-address
                    (expand-file-name "tool-results/a b.txt" session) session)
                   "artifact://tool-results/a%20b.txt"))))

;;;; Owners

(ert-deftest mevedel-resource:owners-come-from-the-current-session ()
  (let* ((ws (make-temp-file "mevedel-owner" t))
         (session (mevedel-session-create :workspace ws :id "s-1"))
         (ephemeral (mevedel-session-create :workspace ws :ephemeral t)))
    (unwind-protect
        (progn
          (with-temp-buffer
            (setq mevedel-session-current session)
            (should (equal (mevedel-resource-default-session)
                           (list :session-dir (expand-file-name ".mevedel/sessions/s-1" ws)
                                 :workspace (directory-file-name ws))))
            ;; Discovery never materialises the session.
            (should (string-match-p "no work:// files yet"
                                    (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read
                                                              '(:file_path "work://"))))
            (should-not (file-exists-p (expand-file-name ".mevedel" ws))))
          (with-temp-buffer
            (setq mevedel-session-current ephemeral)
            (should (string-match-p "no session"
                                    (mevedel-tool-fs-test--err #'mevedel-tool-fs-read
                                                               '(:file_path "work://x"))))))
      (delete-directory ws t))))

;;;; Special files

(defun mevedel-tool-fs-test--threads ()
  "Return how many threads this Emacs has."
  (length (directory-files "/proc/self/task" nil "\\`[0-9]+\\'")))

(ert-deftest mevedel-tool-fs:special-files-never-block ()
  (mevedel-tool-fs-test--with-workspace
    (let* ((fifo (expand-file-name "pipe" ws))
           (socket (expand-file-name "sock" ws))
           (server (progn
                     (should (eql 0 (call-process "mkfifo" nil nil nil fifo)))
                     (make-network-process :name "mevedel-fs-test-socket" :server t
                                           :family 'local :service socket :noquery t)))
           (cases `((,#'mevedel-tool-fs-read (:file_path ,fifo) "not a regular file")
                    (,#'mevedel-tool-fs-read (:file_path "pipe") "not a regular file")
                    (,#'mevedel-tool-fs-read (:file_path ,socket) "not a regular file")
                    (,#'mevedel-tool-fs-read (:file_path "/dev/zero") "not a regular file")
                    (,#'mevedel-tool-fs-grep (:pattern "x" :path ,fifo) "not a regular file")
                    (,#'mevedel-tool-fs-grep (:pattern "x" :path "/dev/zero")
                                             "not a regular file"))))
      (unwind-protect
          (let ((before nil))
            ;; Each call settles (the helper waits a bounded time), as an
            ;; error naming the file's kind.
            (pcase-dolist (`(,handler ,args ,expected) cases)
              (should (string-match-p expected (mevedel-tool-fs-test--err handler args))))
            ;; A directory holding them is searched and listed past them.
            (should (string-match-p "a\\.el" (mevedel-tool-fs-test--ok
                                               #'mevedel-tool-fs-grep
                                               (list :pattern "defun" :path ws))))
            (let ((listed (mevedel-tool-fs-test--ok #'mevedel-tool-fs-glob
                                                    (list :pattern "*" :path ws))))
              (should (string-match-p "a\\.el" listed))
              (should-not (string-match-p "pipe\\|sock" listed)))
            (setq before (mevedel-tool-fs-test--threads))
            (dotimes (i 100)
              (pcase-let ((`(,handler ,args ,_) (nth (% i (length cases)) cases)))
                (mevedel-tool-fs-test--err handler args)))
            (should (= (mevedel-tool-fs-test--threads) before)))
        (delete-process server)))))

;;;; Unsaved buffers

(defun mevedel-tool-fs-test--run (tool args)
  "Run the registered TOOL on ARGS through the pipeline; return its text."
  (let ((result nil))
    (mevedel-pipeline-run-tool (mevedel-tool-get tool "filesystem") args
                               (lambda (r) (setq result r)))
    (mevedel-test-wait-until result 20)
    result))

(defun mevedel-tool-fs-test--run-in (dir tool args)
  "Run TOOL on ARGS through the pipeline; return its text, DIR's name cut.
The pipeline makes relative paths absolute; results are compared
relative to DIR."
  (string-replace dir "" (mevedel-tool-fs-test--run tool args)))

(defmacro mevedel-tool-fs-test--with-buffers (bindings &rest body)
  "Bind BINDINGS, (VAR FILE) pairs, to buffers visiting FILE; run BODY.
The buffers are killed afterwards, their changes discarded."
  (declare (indent 1))
  `(let ,(mapcar (lambda (b) `(,(car b) (find-file-noselect ,(cadr b)))) bindings)
     (unwind-protect (progn ,@body)
       (dolist (buffer (list ,@(mapcar #'car bindings)))
         (with-current-buffer buffer (set-buffer-modified-p nil))
         (kill-buffer buffer)))))

(ert-deftest mevedel-tool-fs:unsaved-buffers-are-what-the-model-reads ()
  (require 'mevedel-pipeline)
  (mevedel-tool-fs-test--with-workspace
    (mevedel-tool-fs-test--write (expand-file-name "src/b.el" ws)
                                 "line one\n(defun disk-only ())\n(defun shared ())\n")
    (mevedel-tool-fs-test--with-buffers ((edited (expand-file-name "src/b.el" ws))
                                         (fresh (expand-file-name "src/new.el" ws)))
      ;; Three lines above the matches, so buffer and disk numbers differ.
      (with-current-buffer edited
        (goto-char (point-min))
        (insert "new 1\nnew 2\nnew 3\n")
        (should (search-forward "disk-only"))
        (replace-match "buffer-only"))
      (with-current-buffer fresh (insert "(defun brand-new ())\n"))
      (should-not (file-exists-p (expand-file-name "src/new.el" ws)))
      (let ((grep (mevedel-tool-fs-test--run-in
                   ws "Grep" '(:pattern "defun" :path "src" :output_mode "content"))))
        (should (string-search "src/b.el (unsaved changes in Emacs)\nsrc/b.el:5:(defun buffer-only ())\nsrc/b.el:6:(defun shared ())\n" grep))
        (should-not (string-search "disk-only" grep))
        (should-not (string-search "src/b.el:3:" grep))
        (should (string-search "src/a.el:1:(defun a ())" grep))
        (should (string-search "src/new.el (unsaved new buffer in Emacs)\nsrc/new.el:1:(defun brand-new ())" grep))
        (should (string-search " (unsaved buffers in Emacs)"
                               (plist-get (mevedel-tool-fs-render-grep "Grep" '(:pattern "defun")
                                                                       grep nil)
                                          :header))))
      (should (equal (mevedel-tool-fs-test--run-in ws "Grep" '(:pattern "buffer-only"))
                     "src/b.el (unsaved changes in Emacs)\n"))
      (should (equal (mevedel-tool-fs-test--run-in ws "Grep" '(:pattern "buffer-only" :path "src/b.el"
                                                          :output_mode "count"))
                     "src/b.el:1 (unsaved changes in Emacs)\n"))
      (let ((read (mevedel-tool-fs-test--run-in ws "Read" '(:file_path "src/b.el"))))
        (should (string-prefix-p "(unsaved changes in Emacs: " read))
        (should (string-search "ApplyPatch refuses this file until the user saves it" read))
        (should (string-search "\n     5\t(defun buffer-only ())\n     6\t(defun shared ())\n" read))
        (should-not (string-search "disk-only" read))
        (should (string-suffix-p "Read src/b.el (unsaved changes in Emacs)"
                                 (plist-get (mevedel-tool-fs-render-read
                                             "Read" '(:file_path "src/b.el") read nil)
                                            :header))))
      (should (string-search "     1\t(defun brand-new ())"
                             (mevedel-tool-fs-test--run-in ws "Read" '(:file_path "src/new.el"))))
      (should (string-prefix-p "(unsaved new buffer in Emacs: "
                               (mevedel-tool-fs-test--run-in ws "Read" '(:file_path "src/new.el"))))
      (should (equal (mevedel-tool-fs-test--lines
                      (mevedel-tool-fs-test--run-in ws "Glob" '(:pattern "*.el" :path "src")))
                     '("src/a.el" "src/b.el" "src/new.el (unsaved new buffer in Emacs)")))
      ;; A narrowing is the user's view, not the file's text.
      (with-current-buffer edited
        (narrow-to-region (point-min) (point-min)))
      (should (string-search "src/b.el:5:(defun buffer-only ())"
                             (mevedel-tool-fs-test--run-in
                              ws "Grep" '(:pattern "buffer-only" :output_mode "content"))))
      ;; The option off: the disk, and nothing but the disk.
      (let ((mevedel-tool-fs-read-unsaved-buffers nil))
        (let ((grep (mevedel-tool-fs-test--run-in
                     ws "Grep" '(:pattern "defun" :path "src" :output_mode "content"))))
          (should (string-search "src/b.el:2:(defun disk-only ())\nsrc/b.el:3:(defun shared ())" grep))
          (should-not (string-search "unsaved" grep))
          (should-not (string-search "brand-new" grep)))
        (should (equal (mevedel-tool-fs-test--run-in ws "Read" '(:file_path "src/b.el"))
                       "     1\tline one\n     2\t(defun disk-only ())\n     3\t(defun shared ())\n"))
        (should (equal (mevedel-tool-fs-test--lines
                        (mevedel-tool-fs-test--run-in ws "Glob" '(:pattern "*.el" :path "src")))
                       '("src/a.el" "src/b.el")))
        (should (string-match-p "does not exist"
                                (mevedel-tool-fs-test--run-in ws "Read" '(:file_path "src/new.el")))))
      ;; Saved, the buffer is the disk again and nothing is marked.
      (with-current-buffer edited
        (widen)
        (let ((save-silently t)) (save-buffer)))
      (should (equal (mevedel-tool-fs-test--run-in ws "Grep" '(:pattern "buffer-only"))
                     "src/b.el\n")))))

(ert-deftest mevedel-tool-fs:unsaved-buffers-keep-the-walk-rules ()
  (mevedel-tool-fs-test--with-workspace
    (mevedel-tool-fs-test--write (expand-file-name ".gitignore" ws) "build/\n")
    (make-directory (expand-file-name ".git" ws))
    (mevedel-tool-fs-test--write (expand-file-name "build/old.el" ws) "(defun built ())\n")
    (mevedel-tool-fs-test--with-buffers ((ignored (expand-file-name "build/old.el" ws))
                                         (ignored-new (expand-file-name "build/new.el" ws))
                                         (vcs (expand-file-name ".git/x.el" ws)))
      (dolist (b (list ignored ignored-new vcs))
        (with-current-buffer b (insert "(defun unsaved-everywhere ())\n")))
      ;; Ignored or VCS files are not searched, buffer or not.
      (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-grep
                                               '(:pattern "unsaved-everywhere"))
                     "No files found."))
      ;; Named as the path, an ignored file is searched, as its buffer.
      (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-grep
                                               '(:pattern "unsaved-everywhere" :path "build")
                                               )
                     "build/new.el (unsaved new buffer in Emacs)\nbuild/old.el (unsaved changes in Emacs)\n"))
      ;; Glob ignores ignore files but never lists VCS directories.
      (let ((listed (mevedel-tool-fs-test--ok #'mevedel-tool-fs-glob '(:pattern "**/*.el"))))
        (should (string-search "build/new.el (unsaved new buffer in Emacs)\n" listed))
        (should-not (string-search ".git" listed))))))

(ert-deftest mevedel-tool-fs:unsaved-buffers-behind-resource-addresses ()
  (mevedel-tool-fs-test--with-workspace
    (mevedel-tool-fs-test--with-buffers ((notes (expand-file-name "local/notes.txt" session))
                                         (fresh (expand-file-name "local/draft.md" session)))
      (with-current-buffer notes
        (goto-char (point-max))
        (insert "delta defun\n"))
      (with-current-buffer fresh (insert "draft defun\n"))
      (let ((read (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read
                                            '(:file_path "work://notes.txt"))))
        (should (string-prefix-p "(unsaved changes in Emacs: " read))
        (should (string-suffix-p "     4\tdelta defun\n" read)))
      (let ((grep (mevedel-tool-fs-test--ok #'mevedel-tool-fs-grep
                                            '(:pattern "delta|draft" :path "work://"
                                              :output_mode "content"))))
        (should (equal grep (concat "work://draft.md (unsaved new buffer in Emacs)\n"
                                    "work://draft.md:1:draft defun\n"
                                    "work://notes.txt (unsaved changes in Emacs)\n"
                                    "work://notes.txt:4:delta defun\n"))))
      (should (string-search "work://draft.md (unsaved new buffer in Emacs)\n"
                             (mevedel-tool-fs-test--ok #'mevedel-tool-fs-glob
                                                       '(:pattern "*.md" :path "work://")))))))

(ert-deftest mevedel-tool-fs:a-large-modified-buffer-is-searched-without-blocking ()
  (require 'mevedel-pipeline)
  (mevedel-tool-fs-test--with-workspace
    (mevedel-tool-fs-test--write (expand-file-name "big.txt" ws) "nothing here\n")
    (mevedel-tool-fs-test--with-buffers ((big (expand-file-name "big.txt" ws)))
      (with-current-buffer big
        (erase-buffer)
        (dotimes (i 9999) (insert (format "line %d of a large buffer\n" (1+ i))))
        (insert "the needle on line 10000\n"))
      (let* ((result nil) (ticks 0)
             (timer (run-at-time 0 0.005 (lambda () (cl-incf ticks))))
             (start (float-time)))
        (unwind-protect
            (progn
              (mevedel-pipeline-run-tool (mevedel-tool-get "Grep" "filesystem")
                                         '(:pattern "needle|line 5000 " :output_mode "content")
                                         (lambda (r) (setq result r)))
              ;; The call returns at once and answers later: Emacs runs
              ;; timers (and everything else) while the search runs.
              (should-not result)
              (should (< (- (float-time) start) 1.0))
              (mevedel-test-wait-until result 20)
              (should (> ticks 0)))
          (cancel-timer timer))
        (should (equal (string-replace ws "" result)
                       (concat "big.txt (unsaved changes in Emacs)\n"
                               "big.txt:5000:line 5000 of a large buffer\n"
                               "big.txt:10000:the needle on line 10000\n")))))))

(ert-deftest mevedel-tool-fs:special-file-calls-through-the-pipeline-leave-no-threads ()
  (require 'mevedel-pipeline)
  (mevedel-tool-fs-test--with-workspace
    (let* ((fifo (expand-file-name "pipe" ws))
           (socket (expand-file-name "sock" ws))
           (server (progn
                     (should (eql 0 (call-process "mkfifo" nil nil nil fifo)))
                     (make-network-process :name "mevedel-fs-test-socket2" :server t
                                           :family 'local :service socket :noquery t)))
           (cases (cl-loop for file in (list fifo socket "/dev/zero" "/dev/null")
                           append `(("Read" (:file_path ,file))
                                    ("Grep" (:pattern "x" :path ,file))
                                    ("Glob" (:pattern "*" :path ,file)))))
           (mevedel-permissions-rules '((allow "Read") (allow "Grep") (allow "Glob")))
           (run (lambda (case)
                  (let ((text (mevedel-tool-fs-test--run (car case) (cadr case))))
                    (should (string-match-p "\\`Error: .*not a regular file" text))))))
      (unwind-protect
          (progn
            ;; Every kind of call once first, so lasting threads (the
            ;; event channel, the runtime) exist before counting.
            (mapc run cases)
            (let ((before (mevedel-tool-fs-test--threads)))
              (dotimes (i 100)
                (funcall run (nth (% i (length cases)) cases)))
              ;; A job's thread ends just after its reply: allow it that.
              (mevedel-test-wait-until (<= (mevedel-tool-fs-test--threads) before) 5)
              (should (= (mevedel-tool-fs-test--threads) before))))
        (delete-process server)))))

;;;; Read

(ert-deftest mevedel-tool-fs:read-families-and-paths ()
  (mevedel-tool-fs-test--with-workspace
    (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read '(:file_path "work://notes.txt"))
                   "     1\talpha\n     2\tbeta defun\n     3\tgamma\n"))
    ;; (EXPECTED-REGEXP FILE-PATH OUTCOME): each read's text matches.
    (pcase-dolist (`(,regexp ,path ,outcome)
                   '(("work://plans/p\\.md" "work://" ok)
                     ("ApplyPatch can create files under work://shared/" "work://shared/" ok)
                     ("artifact://tool-results/r1\\.txt" "artifact://" ok)
                     ("remember" "memory://local-mevedel/topic.md" ok)
                     ("skill defun" "skill://local-mevedel/demo/SKILL.md" ok)
                     ("(defun a ())" "src/a.el" ok)
                     ("a\\.el" "src" ok)
                     ("is unavailable" "agent://" err)
                     ("does not exist" "work://nope.txt" err)))
      (should (string-match-p regexp (funcall (if (eq outcome 'ok)
                                                  #'mevedel-tool-fs-test--ok
                                                #'mevedel-tool-fs-test--err)
                                              #'mevedel-tool-fs-read
                                              (list :file_path path)))))
    (let ((journal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read '(:file_path "memory://journal/"))))
      (should (= 1 (cl-count ?\n journal)))
      (should (string-match-p "%3A" journal)))))

(ert-deftest mevedel-tool-fs:read-bounds-errors-give-a-working-retry ()
  (mevedel-tool-fs-test--with-workspace
    (let ((msg (mevedel-tool-fs-test--err #'mevedel-tool-fs-read
                                          '(:file_path "work://notes.txt" :offset 9 :limit 2))))
      (should (string-match-p "offset 9 is past the last line" msg))
      (should (string-match-p "lines 1-3" msg))
      (should (string-match-p "\"offset\": 2, \"limit\": 2" msg))
      (should-not (string-match-p (regexp-quote session) msg)))
    (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read
                                             '(:file_path "work://notes.txt" :offset 2 :limit 2))
                   "     2\tbeta defun\n     3\tgamma\n"))
    (should (string-match-p "must not be negative"
                            (mevedel-tool-fs-test--err #'mevedel-tool-fs-read
                                                       '(:file_path "work://notes.txt" :offset -1))))))

(ert-deftest mevedel-tool-fs:bare-memory-root-reads-as-the-prompt-index ()
  "Read of memory://root gives the prompt's memory index, labelled and in order."
  (mevedel-tool-fs-test--with-workspace
    (let ((read (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read '(:file_path "memory://root")))
          (index (mevedel-memory-index (directory-file-name ws))))
      (should (string-match-p "^ +3\tRoots: memory://local-mevedel/ " read))
      (should (string-match-p "^ +5\t- memory://local-mevedel/topic\.md — remember defun$" read))
      (should (equal (replace-regexp-in-string "^ *[0-9]+\t" "" read)
                     (concat index "\n"))))
    (let ((mevedel-resource-memory-roots nil))
      (should (string-match-p "No memory roots are configured"
                              (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read
                                                        '(:file_path "memory://root")))))))

(ert-deftest mevedel-tool-fs:read-packaged-manuals ()
  (let ((listing (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read '(:file_path "mevedel://"))))
    (should (string-match-p "^mevedel://tools/files\\.md$" listing))
    (should (string-match-p "^mevedel://address-to-resource\\.md$" listing))
    (should-not (string-match-p "\\.el$" listing)))
  (should (string-match-p "When to use"
                          (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read
                                                    '(:file_path "mevedel://tools/files.md")))))

;;;; Glob and Grep

(ert-deftest mevedel-tool-fs:grep-and-glob-name-results-by-address ()
  (mevedel-tool-fs-test--with-workspace
    (should (equal (mevedel-tool-fs-test--lines
                    (mevedel-tool-fs-test--ok #'mevedel-tool-fs-grep '(:pattern "defun" :path "work://")))
                   '("work://notes.txt" "work://plans/p.md")))
    (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-grep
                                             '(:pattern "defun" :path "work://plans" :output_mode "content"))
                   "work://plans/p.md:1:plan defun\n"))
    (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-grep
                                             '(:pattern "defun" :path "memory://root" :output_mode "count"))
                   "memory://local-mevedel/topic.md:1\n"))
    (let ((j (mevedel-tool-fs-test--ok #'mevedel-tool-fs-grep '(:pattern "journal" :path "memory://journal/"))))
      (should (string-prefix-p "memory://journal/" j))
      (should (= 1 (cl-count ?\n j))))
    (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-glob '(:pattern "**/*.txt" :path "artifact://"))
                   "artifact://tool-results/r1.txt\n"))
    (should (string-match-p "^mevedel://tools/files\\.md$"
                            (mevedel-tool-fs-test--ok #'mevedel-tool-fs-glob '(:pattern "**/*" :path "mevedel://"))))
    (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-grep '(:pattern "defun" :path "src"))
                   "src/a.el\n"))
    (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-glob '(:pattern "*.el"))
                   "src/a.el\n"))
    (should (string-match-p "ApplyPatch can create"
                            (mevedel-tool-fs-test--ok #'mevedel-tool-fs-glob
                                                      '(:pattern "*" :path "work://shared"))))
    (should (string-match-p "Unsupported operation"
                            (mevedel-tool-fs-test--err #'mevedel-tool-fs-glob
                                                       '(:pattern "*" :path "history://root"))))
    (should (string-match-p "past the last output line"
                            (mevedel-tool-fs-test--err #'mevedel-tool-fs-grep
                                                       '(:pattern "defun" :path "work://" :offset 5))))
    (should (string-match-p "must not be negative"
                            (mevedel-tool-fs-test--err #'mevedel-tool-fs-grep
                                                       '(:pattern "defun" :head_limit -1))))))

(ert-deftest mevedel-tool-fs:search-is-cancellable-and-settles-once ()
  (let* ((dir (make-temp-file "mevedel-cancel" t))
         (line (concat (make-string 200 ?x) "\n"))
         (results nil))
    (unwind-protect
        (progn
          (dotimes (i 20)
            (with-temp-file (expand-file-name (format "f%02d.txt" i) dir)
              (insert (apply #'concat (make-list 20000 line)))))
          (let ((cancel (mevedel-tool-fs-grep (lambda (r) (push r results))
                                              (list :pattern "x+y" :path dir))))
            (should (functionp cancel))
            (funcall cancel)
            (funcall cancel)
            (should (equal results '((:result "Cancelled." :status error))))
            (mevedel-test-wait-until (zerop (mevedel-core-search-running)) 20)
            ;; The late reply from the module does not settle again.
            (accept-process-output nil 0.2)
            (should (= (length results) 1))))
      (delete-directory dir t))))

(ert-deftest mevedel-tool-fs:timeout-returns-labelled-partial-results ()
  (let ((mevedel-tool-fs-search-timeout 0.001)
        (dir (make-temp-file "mevedel-timeout" t)))
    (unwind-protect
        (progn
          (dotimes (i 30)
            (with-temp-file (expand-file-name (format "f%02d.txt" i) dir)
              (insert (apply #'concat (make-list 20000 "defun line\n")))))
          (let ((text (mevedel-tool-fs-test--ok #'mevedel-tool-fs-grep
                                                (list :pattern "defun" :path dir :output_mode "count"))))
            (should (string-match-p "Partial results" text))
            (should (string-match-p "narrow `path'\\|narrow `path`" text))))
      (delete-directory dir t))))

;;;; Registration

(ert-deftest mevedel-tool-fs:registered-with-contracts-and-manual ()
  (dolist (case '(("Read" nil) ("Glob" 30000) ("Grep" 20000)))
    (let ((tool (mevedel-tool-get (car case) "filesystem")))
      (should tool)
      (should (mevedel-tool-async-p tool))
      (should (mevedel-tool-read-only-p tool))
      (should (equal (mevedel-tool-max-result-size tool) (cadr case)))
      (let ((d (mevedel-tool-description tool)))
        (dolist (part '("When to use" "When NOT to use" "How to use" "mevedel://tools/files.md"))
          (should (string-search part d))))
      ;; path-or-resource arguments do not get the raw-path guidance.
      (should-not (string-search "Pass a raw filesystem path"
                                 (format "%S" (mevedel-tool-provider-schema tool)))))))

(ert-deftest mevedel-tool-fs:registered-tools-run-through-the-pipeline ()
  (mevedel-tool-fs-test--with-workspace
    (let ((grep (mevedel-tool-get "Grep" "filesystem"))
          (result nil))
      (mevedel-pipeline-run-tool grep '(:pattern "defun" :path "work://" :head_limit "10")
                                    (lambda (r) (setq result r)))
      (mevedel-test-wait-until result)
      (should (equal (sort (take 2 (split-string result "\n" t)))
                     '("work://notes.txt" "work://plans/p.md")))
      (setq result nil)
      (mevedel-pipeline-run-tool (mevedel-tool-get "Read" "filesystem")
                                    '(:file_path "work://nope.txt")
                                    (lambda (r) (setq result r)))
      (mevedel-test-wait-until result)
      (should (string-prefix-p "Error: " result)))))

(ert-deftest mevedel-tool-fs:pipeline-seam-prepares-addresses-before-permission ()
  (require 'mevedel-pipeline)
  (mevedel-tool-fs-test--with-workspace
    (let* ((grep (mevedel-tool-get "Grep" "filesystem"))
           (args (mevedel-pipeline-prepare-resources
                  grep (list :pattern "x" :path "work://plans") ws nil)))
      (should (equal args '(:pattern "x" :path "work://plans")))
      (should (mevedel-resource-take-prepared (plist-get args :path) "Grep"))
      ;; Consumed once.
      (should-not (mevedel-resource-take-prepared (plist-get args :path) "Grep"))
      (should-error (mevedel-pipeline-prepare-resources
                     grep (list :pattern "x" :path "work://a/../b") ws nil)
                    :type 'mevedel-core-resource-error)
      (should-error (mevedel-pipeline-prepare-resources
                     (mevedel-tool-get "Glob" "filesystem")
                     (list :pattern "*" :path "agent://") ws nil)
                    :type 'mevedel-core-resource-error))))

;; A new tool gets address preparation from its declaration alone: no
;; registration, hook or list of names beyond `mevedel-define-tool'.
(ert-deftest mevedel-tool-fs:any-declared-resource-argument-is-prepared ()
  (require 'mevedel-pipeline)
  (mevedel-tool-fs-test--with-workspace
    (let* ((seen nil)
           (handler (lambda (args)
                      (let ((source (plist-get args :source)))
                        (push (list :attempt (and (mevedel-resource-take-prepared source "Read") t)
                                    :source source :file (plist-get args :file))
                              seen)
                        "ok")))
           (peek (mevedel-define-tool Peek
                   :category "fs-test" :description "Look at something." :read-only-p t
                   :args ((source path-or-resource :required "What to look at.")
                          (file path :optional "A file."))
                   :function handler))
           (poke (mevedel-define-tool Poke
                   :category "fs-test" :description "Change something."
                   :args ((source path-or-resource :required "What to change."))
                   :function handler))
           (run (lambda (tool args)
                  (let ((outcome nil))
                    (with-temp-buffer
                      (setq default-directory ws)
                      (mevedel-pipeline-run-tool-outcome tool args (lambda (o) (setq outcome o)))
                      (mevedel-test-wait-until outcome 20))
                    outcome))))
      (unwind-protect
          (progn
            ;; An address is prepared for the handler; a path becomes absolute.
            (should (eq 'success (plist-get (funcall run peek '(:source "work://notes.txt"
                                                                :file "src/a.el"))
                                            :status)))
            (should (equal (pop seen) (list :attempt t :source "work://notes.txt"
                                            :file (expand-file-name "src/a.el" ws))))
            (funcall run peek '(:source "src/a.el"))
            (should (equal (pop seen) (list :attempt nil :source (expand-file-name "src/a.el" ws)
                                            :file nil)))
            ;; A malformed address ends the call before the handler.
            (let ((outcome (funcall run peek '(:source "work://a/../b"))))
              (should (eq 'error (plist-get outcome :status)))
              (should (string-search "work://a/../b" (plist-get outcome :result))))
            ;; A mutating tool's argument is prepared for a write, which the
            ;; manual pages refuse.
            (let ((outcome (funcall run poke '(:source "mevedel://tools/files.md"))))
              (should (eq 'error (plist-get outcome :status)))
              (should (string-match-p "ApplyPatch" (plist-get outcome :result))))
            (should-not seen))
        (mevedel-tool-unregister "Peek" "fs-test")
        (mevedel-tool-unregister "Poke" "fs-test")))))

(ert-deftest mevedel-tool-fs:oversized-grep-is-persisted-and-followable ()
  (require 'mevedel-pipeline)
  (let* ((ws (make-temp-file "mevedel-persist" t))
         (session (mevedel-session-create :workspace ws :id "p-1"))
         (grep (mevedel-tool-get "Grep" "filesystem"))
         (read (mevedel-tool-get "Read" "filesystem"))
         (outcome nil))
    ;; The session has stored something before: output may join it.
    (mevedel-session-ensure-storage session)
    (unwind-protect
        (with-temp-buffer
          (setq mevedel-session-current session)
          (dotimes (i 40)
            (with-temp-file (expand-file-name (format "f%02d.el" i) ws)
              (dotimes (j 30) (insert (format "(defun fn-%d-%d () \"body\")\n" i j)))))
          (mevedel-pipeline-run-tool
           grep (list :pattern "defun" :path ws :output_mode "content" :head_limit 0)
           (lambda (r) (setq outcome r)))
          (mevedel-test-wait-until outcome 20)
          (should (string-match-p "<persisted-output>" outcome))
          (should (string-match "artifact://tool-results/[^ \n]*\\.txt" outcome))
          (let ((address (match-string 0 outcome)) (page nil) (hits nil))
            (mevedel-pipeline-run-tool read (list :file_path address :offset 1200 :limit 1)
                                       (lambda (r) (setq page r)))
            (mevedel-test-wait-until page 20)
            (should (string-match-p "^  1200\t.*defun fn-" page))
            (mevedel-pipeline-run-tool grep (list :pattern "fn-39-29 " :path address
                                                  :output_mode "count")
                                       (lambda (r) (setq hits r)))
            (mevedel-test-wait-until hits 20)
            (should (equal hits (concat address ":1\n")))))
      (delete-directory ws t))))

;;;; Remote (TRAMP) paths and compressed execution logs

(defmacro mevedel-tool-fs-test--with-mock-tramp (&rest body)
  "Run BODY with a `mock' TRAMP method that reaches this machine via sh."
  (declare (indent 0))
  `(progn
     (require 'tramp)
     (let ((tramp-methods
            (cons '("mock"
                    (tramp-login-program "sh")
                    (tramp-login-args (("-i")))
                    (tramp-direct-async ("-c"))
                    (tramp-remote-shell "/bin/sh")
                    (tramp-remote-shell-args ("-c"))
                    (tramp-connection-timeout 10))
                  tramp-methods))
           (tramp-default-host-alist
            (cons `("\\`mock\\'" nil ,(system-name)) tramp-default-host-alist))
           (tramp-persistency-file-name nil)
           (tramp-verbose 0))
       (unwind-protect (progn ,@body)
         (tramp-cleanup-all-connections)))))

(ert-deftest mevedel-tool-fs:remote-read-pages-and-searches-run-there ()
  (mevedel-tool-fs-test--with-mock-tramp
    (let* ((dir (file-name-as-directory (make-temp-file "mevedel-remote" t)))
           (remote-dir (concat "/mock::" dir))
           (remote (concat remote-dir "notes.txt"))
           (temps (lambda () (directory-files temporary-file-directory nil "\\`tramp\\."))))
      (unwind-protect
          (let ((before (funcall temps)))
            (mevedel-tool-fs-test--write (expand-file-name "notes.txt" dir) "alpha\nbeta defun\ngamma\n")
            (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read (list :file_path remote))
                           "     1\talpha\n     2\tbeta defun\n     3\tgamma\n"))
            (let ((page (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read
                                                  (list :file_path remote :offset 2 :limit 1))))
              (should (string-prefix-p "     2\tbeta defun\n" page))
              (should (string-match-p (regexp-quote (format "{\"file_path\": \"%s\", \"offset\": 3" remote))
                                      page)))
            (let ((past (mevedel-tool-fs-test--err #'mevedel-tool-fs-read
                                                   (list :file_path remote :offset 9))))
              (should (string-match-p (regexp-quote remote) past))
              (should-not (string-match-p "/tmp/tramp\\." past)))
            (should (equal (funcall temps) before))
            ;; The helper on the host lists a directory as a local Read does.
            (should (string-match-p "^Directory .*\n.*notes\\.txt"
                                    (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read
                                                              (list :file_path remote-dir))))
            (should (string-match-p "does not exist"
                                    (mevedel-tool-fs-test--err #'mevedel-tool-fs-read
                                                               (list :file_path (concat remote-dir "nope.txt")))))
            ;; Text is paged where it is: no copy, so no size limit.
            (let ((mevedel-tool-fs-remote-read-limit 4))
              (should (string-prefix-p "     1\talpha"
                                       (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read
                                                                 (list :file_path remote)))))
            ;; Searches run on the host, named as a local run names them.
            (should (equal (car (split-string (mevedel-tool-fs-test--ok
                                               #'mevedel-tool-fs-grep
                                               (list :pattern "defun" :path remote-dir))
                                              "\n"))
                           remote))
            (let ((default-directory remote-dir))
              (should (equal (car (split-string (mevedel-tool-fs-test--ok
                                                 #'mevedel-tool-fs-glob '(:pattern "*.txt"))
                                                "\n"))
                             "notes.txt"))))
        (delete-directory dir t)))))

(ert-deftest mevedel-tool-fs:compressed-execution-logs-read-and-search-by-logical-name ()
  (mevedel-tool-fs-test--with-workspace
    (let ((exec (expand-file-name "executions/" session)))
      (mevedel-tool-fs-test--write (expand-file-name "run1.log" exec) "started\nfailed defun\n")
      (should (eq 0 (call-process "gzip" nil nil nil (expand-file-name "run1.log" exec))))
      (should (file-exists-p (expand-file-name "run1.log.gz" exec)))
      (should (string-match-p "^artifact://executions/run1\\.log$"
                              (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read
                                                        '(:file_path "artifact://"))))
      (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-read
                                               '(:file_path "artifact://executions/run1.log"))
                     "     1\tstarted\n     2\tfailed defun\n"))
      (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-glob
                                               '(:pattern "**/*.log" :path "artifact://"))
                     "artifact://executions/run1.log\n"))
      (should (equal (mevedel-tool-fs-test--ok #'mevedel-tool-fs-grep
                                               '(:pattern "failed" :path "artifact://executions"
                                                 :output_mode "content"))
                     "artifact://executions/run1.log:2:failed defun\n"))
      (should (mevedel-tool-fs-test--err #'mevedel-tool-fs-read
                                         '(:file_path "artifact://executions/run1.log.gz"))))))

;; Issue 42 item 9: the spec leaves search order unspecified, so neither
;; the description nor the manual may promise one.
(ert-deftest mevedel-tool-fs:glob-promises-no-order ()
  (should-not (string-match-p "sorted" mevedel-tool-fs-glob-description))
  (should (string-search "no promised order" mevedel-tool-fs-glob-description))
  (with-temp-buffer
    (insert-file-contents (expand-file-name "docs/tools/files.md" (getenv "MEVEDEL_ROOT")))
    (should-not (search-forward "sorted by path" nil t))))

(provide 'tool-fs-test)
;;; tool-fs-test.el ends here
