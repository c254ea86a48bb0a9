;;; prompt-test.el --- Tests of the system prompt and its components  -*- lexical-binding: t; -*-

;;; Commentary:

;; Component order and budgets, the frozen system text and context
;; updates, the file cache, workspace instructions (root,
;; subdirectories, local files, the CLAUDE.md fallback), the
;; environment, the memory index (and a memory write through
;; ApplyPatch's review) and the journal.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defmacro mevedel-prompt-test--with-chat (files &rest body)
  "Run BODY with `root' a workspace holding FILES and `chat' its chat.
FILES is an alist (NAME . CONTENT).  The global instructions directory
is empty; the chat and the workspace go afterwards."
  (declare (indent 1))
  `(let* ((root (file-name-as-directory (make-temp-file "mevedel-prompt-" t)))
          (mevedel-instructions-global-directory (make-temp-file "mevedel-global-" t))
          (mevedel-resource-memory-roots '(".mevedel/memory"))
          (mevedel-resource-skill-roots '((local-mevedel . ".mevedel/skills")
                                          (local-agents . ".agents/skills")
                                          (local-agents . ".claude/skills")))
          (chat nil))
     (pcase-dolist (`(,name . ,content) ,files)
       (mevedel-prompt-test--write (expand-file-name name root) content))
     (setq chat (mevedel-chat-get-create root))
     (unwind-protect (progn ,@body)
       (remhash (mevedel-chat-root chat) mevedel-chat--chats)
       (kill-buffer (mevedel-chat-data-buffer chat))
       (delete-directory root t)
       (delete-directory mevedel-instructions-global-directory t))))

(defun mevedel-prompt-test--write (file text)
  "Write TEXT to FILE, creating its directory."
  (make-directory (file-name-directory file) t)
  (with-temp-file file (insert text)))

(defun mevedel-prompt-test--touch-later (file text)
  "Write TEXT to FILE so that its modification time surely changes."
  (mevedel-prompt-test--write file text)
  (set-file-times file (time-add (current-time) 5)))

;;;; Components

(ert-deftest mevedel-prompt:components-in-order-with-budgets ()
  (mevedel-prompt-test--with-chat '(("notes.txt" . "from a file"))
    (mevedel-prompt-define-component 'mevedel-test-a :function (lambda (_) "AAA"))
    (mevedel-prompt-define-component 'mevedel-test-long
                                     :function (lambda (_) (make-string 50 ?x)) :budget 10)
    (let ((text (mevedel-prompt-system-text
                 chat '(mevedel-test-long "literal" mevedel-test-a (inline :file "notes.txt")
                                          (quoted :text "inline text")))))
      (should (string-match-p
               (concat "\\`x\\{10\\}\n\\[… component mevedel-test-long truncated: 10 of 50 "
                       "characters shown\\]\n\nliteral\n\nAAA\n\nfrom a file\n\ninline text\\'")
               text)))
    ;; The overall budget cuts the whole text, visibly.
    (mevedel-prompt-reset chat)
    (let* ((mevedel-prompt-system-budget 5)
           (text (mevedel-prompt-system-text chat '("0123456789"))))
      (should (equal text "01234\n[… system prompt truncated: 5 of 10 characters shown]")))))

(ert-deftest mevedel-prompt:the-default-prompt-has-every-component ()
  (mevedel-prompt-test--with-chat '(("AGENTS.md" . "Run make check before committing.")
                                    (".mevedel/memory/build.md" . "# Build with make -j2\n")
                                    (".mevedel/skills/lint/SKILL.md"
                                     . "---\nname: lint\ndescription: Lint the code\n---\nRun it."))
    (let ((text (mevedel-prompt-system-text chat)))
      (should (string-prefix-p mevedel-prompt-identity text))
      (should (string-search "Run make check before committing." text))
      (should (string-search "memory://local-mevedel/build.md — Build with make -j2" text))
      (should (string-search "skill://local-mevedel/lint — Lint the code" text))
      (should (string-search "mevedel://" text))
      ;; Environment and journal map are context updates, never system text.
      (should-not (string-search "Emacs: " text))
      (let ((report (mevedel-prompt-report chat)))
        (dolist (name '("identity" "environment" "workspace-instructions" "memory-index"
                        "journal-map" "skills-roster"))
          (should (string-search name report)))))))

(ert-deftest mevedel-prompt:system-text-is-frozen-changes-are-updates ()
  (mevedel-prompt-test--with-chat '(("AGENTS.md" . "first rules"))
    (let ((components '(workspace-instructions))
          (first nil))
      (setq first (mevedel-prompt-system-text chat components))
      (should (string-search "first rules" first))
      (should (null (mevedel-prompt-context-updates chat)))
      (mevedel-prompt-test--touch-later (expand-file-name "AGENTS.md" root) "second rules")
      (should (string-search "changed: sent with the next turn" (mevedel-prompt-report chat)))
      ;; The system text stays (the provider's cache); the change is an update.
      (should (eq (mevedel-prompt-system-text chat components) first))
      (let ((updates (mevedel-prompt-context-updates chat)))
        (should (= (length updates) 1))
        (should (string-prefix-p "<context-update component=\"workspace-instructions\">"
                                 (car updates)))
        (should (string-search "second rules" (car updates))))
      ;; Not accepted (the request failed): sent again.
      (should (= (length (mevedel-prompt-context-updates chat)) 1))
      (mevedel-prompt-note-accepted chat)
      (should (null (mevedel-prompt-context-updates chat))))))

(ert-deftest mevedel-prompt:unchanged-files-are-not-read-again ()
  (let ((file (make-temp-file "mevedel-prompt-file-" nil ".md" "text"))
        (reads 0))
    (unwind-protect
        (cl-letf* ((real (symbol-function 'insert-file-contents))
                   ((symbol-function 'insert-file-contents)
                    (lambda (&rest args) (cl-incf reads) (apply real args))))
          (should (equal (mevedel-prompt-file-text file) "text"))
          (should (equal (mevedel-prompt-file-text file) "text"))
          (should (= reads 1))
          (mevedel-prompt-test--touch-later file "other text")
          (should (equal (mevedel-prompt-file-text file) "other text"))
          (should (= reads 2))
          (delete-file file)
          (should (null (mevedel-prompt-file-text file))))
      (when (file-exists-p file) (delete-file file)))))

;;;; Workspace instructions

(ert-deftest mevedel-prompt:nested-instructions ()
  (mevedel-prompt-test--with-chat '(("AGENTS.md" . "root rules")
                                    ("AGENTS.local.md" . "my local rules")
                                    ("CLAUDE.md" . "ignored: AGENTS.md exists")
                                    ("sub/CLAUDE.md" . "sub rules from CLAUDE.md")
                                    ("sub/deep/AGENTS.md" . "deep rules")
                                    ("sub/deep/file.el" . ";; code\n")
                                    ("other/x.el" . ";; other\n"))
    (mevedel-prompt-test--write (expand-file-name "AGENTS.md" mevedel-instructions-global-directory)
                                "global rules")
    (let ((text (mevedel-prompt-system-text chat '(workspace-instructions))))
      (should (string-match-p "global rules\\(.\\|\n\\)*root rules\\(.\\|\n\\)*my local rules"
                              text))
      (should-not (string-search "ignored" text))
      (should-not (string-search "sub rules" text)))
    ;; The first call touching sub/deep/file.el brings sub's and deep's files.
    (let ((result (mevedel-test-run-tool chat "Read" "call_r1"
                                         (list :file_path (expand-file-name "sub/deep/file.el"
                                                                            root)))))
      (should (string-search ";; code" result))
      (should (string-match-p "sub rules from CLAUDE.md\\(.\\|\n\\)*deep rules" result)))
    ;; Only once per conversation.
    (let ((result (mevedel-test-run-tool chat "Read" "call_r2"
                                         (list :file_path (expand-file-name "sub/deep/file.el"
                                                                            root)))))
      (should-not (string-search "deep rules" result)))
    (should-not (string-search "<workspace-instructions>"
                               (mevedel-test-run-tool chat "Read" "call_r3"
                                                      (list :file_path "other/x.el"))))
    (should (equal (mapcar (lambda (f) (file-relative-name f root))
                           (last (mevedel-instructions-in-effect chat) 2))
                   '("sub/CLAUDE.md" "sub/deep/AGENTS.md")))
    ;; After a compaction (a reset) they come again.
    (mevedel-prompt-reset chat)
    (should (string-search "deep rules"
                           (mevedel-test-run-tool chat "Read" "call_r4"
                                                  (list :file_path "sub/deep/file.el"))))))

;;;; Environment

(ert-deftest mevedel-prompt:environment-is-sent-only-when-it-changed ()
  (should (executable-find "git"))
  (mevedel-prompt-test--with-chat '(("a.txt" . "a\n"))
    (let ((default-directory root))
      (should (zerop (call-process "git" nil nil nil "init" "-q" "-b" "trunk"))))
    (let ((done nil))
      (mevedel-environment-refresh (mevedel-prompt-workspace chat) (lambda () (setq done t)))
      (mevedel-test-wait-until done 10))
    (mevedel-prompt-system-text chat '(identity environment))
    (let ((updates (mevedel-prompt-context-updates chat)))
      (should (= (length updates) 1))
      (should (string-search "component=\"environment\"" (car updates)))
      (should (string-search "Git branch: trunk" (car updates)))
      (should (string-search "a.txt" (car updates)))
      (should (string-search (format "Emacs: %s" emacs-version) (car updates))))
    (mevedel-prompt-note-accepted chat)
    (should (null (mevedel-prompt-context-updates chat)))
    ;; A new file changes the status: the next turn gets the environment again.
    (mevedel-prompt-test--write (expand-file-name "b.txt" root) "b\n")
    (let ((done nil))
      (mevedel-environment-refresh (mevedel-prompt-workspace chat) (lambda () (setq done t)))
      (mevedel-test-wait-until done 10))
    (let ((updates (mevedel-prompt-context-updates chat)))
      (should (= (length updates) 1))
      (should (string-search "b.txt" (car updates))))))

(ert-deftest mevedel-prompt:environment-text-never-waits-for-git ()
  (mevedel-prompt-test--with-chat nil
    (cl-letf (((symbol-function 'call-process)
               (lambda (&rest _) (error "No synchronous process in a turn's path"))))
      (let ((text (mevedel-environment-text (mevedel-prompt-workspace chat))))
        (should (string-search (format "Workspace root: %s" (mevedel-prompt-workspace chat))
                               text))
        (should (string-search (format-time-string "Date: %F") text))))))

;;;; Memory and journal

(ert-deftest mevedel-prompt:memory-index-and-a-reviewed-memory-write ()
  (mevedel-prompt-test--with-chat '((".mevedel/memory/style.md" . "Prefer seq over cl-lib\n")
                                    (".mevedel/memory/db/schema.md" . "\n## Tables: users\n"))
    (let ((text (mevedel-prompt-system-text chat '(memory-index))))
      (should (string-search "memory://local-mevedel/db/schema.md — Tables: users" text))
      (should (string-search "memory://local-mevedel/style.md — Prefer seq over cl-lib" text))
      (should (null (mevedel-prompt-context-updates chat))))
    (let* ((session (mevedel-chat-session chat))
           (review nil))
      (setf (mevedel-session-permission-mode session) 'ask)
      (setf (mevedel-session-prompter session)
            (lambda (context answer)
              (setq review (save-window-excursion
                             (mevedel-patch-review-start
                              #'mevedel-tool-patch-plan-for-review
                              context session answer
                              (lambda (&rest keys)
                                (apply #'mevedel-chat-open-interaction chat context keys)))
                             (window-buffer (selected-window))))))
      (let ((box (mevedel-test-start-tool
                  chat "ApplyPatch" "call_m"
                  (list :patch (concat "*** Begin Patch\n"
                                       "*** Add File: memory://local-mevedel/release.md\n"
                                       "+Tag releases as vN.N\n*** End Patch")))))
        (mevedel-test-wait-until review 10)
        (with-current-buffer review
          (should (string-search "release.md" (buffer-string)))
          (mevedel-patch-review-settle))
        (mevedel-test-wait-until (car box) 20)
        (should (string-search "memory://local-mevedel/release.md" (caar box)))
        (should (file-exists-p (expand-file-name ".mevedel/memory/release.md" root)))
        (when (buffer-live-p review) (kill-buffer review))))
    ;; The index changed: the model reads it once as a context update.
    (let ((updates (mevedel-prompt-context-updates chat)))
      (should (= (length updates) 1))
      (should (string-search "memory://local-mevedel/release.md — Tag releases as vN.N"
                             (car updates))))))

(ert-deftest mevedel-prompt:journal-listing-and-recall-window ()
  (let* ((now (current-time))
         (day (lambda (n) (format-time-string "%FT%TZ" (time-subtract now (* n 86400)) t)))
         (recent (concat (funcall day 1) "-fixed-the-build.md"))
         (older (concat (funcall day 5) ".md"))
         (expired (concat (funcall day 20) "-old.md")))
    (mevedel-prompt-test--with-chat
        `((,(concat ".mevedel/journal/" recent) . "# Fixed the build\n")
          (,(concat ".mevedel/journal/" older) . "Looked at the tests\n")
          (,(concat ".mevedel/journal/" expired) . "Too old\n")
          (".mevedel/journal/notes.md" . "not an entry\n"))
      (should (equal (mevedel-memory-journal-names (mevedel-prompt-workspace chat))
                     (list recent older)))
      (let ((map (mevedel-memory-journal-map (mevedel-prompt-workspace chat))))
        (should (string-search (concat (mevedel-memory-journal-address recent)
                                       " — Fixed the build")
                               map))
        (should (string-search "%3A" map))
        (should-not (string-search "Too old" map))
        (should (< (string-search recent (string-replace "%3A" ":" map))
                   (string-search older (string-replace "%3A" ":" map)))))
      ;; The map is main-session context: an update, never system text.
      (should-not (string-search "Fixed the build" (mevedel-prompt-system-text chat)))
      (should (cl-some (lambda (u) (string-search "Fixed the build" u))
                       (mevedel-prompt-context-updates chat)))
      ;; Read memory://journal/ (the module) agrees on what is recallable.
      (let ((listing (mevedel-test-run-tool chat "Read" "call_j"
                                            (list :file_path "memory://journal/"))))
        (should (string-search "fixed-the-build" listing))
        (should-not (string-search "-old.md" listing))))))

(ert-deftest mevedel-prompt:journal-file-names ()
  (let ((name (mevedel-memory-journal-file-name "Fixed the Build!" 0)))
    (should (equal name "1970-01-01T00:00:00Z-fixed-the-build.md"))
    (should (time-equal-p (mevedel-memory-journal-entry-time name) 0))
    (should (null (mevedel-memory-journal-entry-time "notes.md")))))

(provide 'prompt-test)
;;; prompt-test.el ends here
