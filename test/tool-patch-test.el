;;; tool-patch-test.el --- Tests of ApplyPatch through the pipeline  -*- lexical-binding: t; -*-

;;; Commentary:

;; ApplyPatch as the model calls it: through `mevedel-pipeline-run-tool'
;; in a session of its own workspace.  Add, update, delete and move;
;; grammar and ambiguity errors that change nothing; buffers visiting
;; the files (updated in place as one undo step, or refusing the patch
;; when they hold unsaved changes); protected paths refused before any
;; read; work:// and memory:// targets; permission; a review's plan and
;; selection; the row renderer.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-pipeline)
(require 'mevedel-render-data)
(require 'mevedel-tool-fs)
(require 'mevedel-tool-patch)

(defmacro mevedel-tool-patch-test--with-session (mode &rest body)
  "Run BODY in a fresh workspace whose session has permission MODE.
Binds `root' (the workspace, a directory name), `session' and `data'
\(a data buffer whose calls belong to the session).  Everything goes
afterwards."
  (declare (indent 1))
  `(let* ((root (file-name-as-directory (make-temp-file "mevedel-patch-" t)))
          (session (mevedel-session-create :workspace root))
          (data (generate-new-buffer " *mevedel-patch-test*"))
          (mevedel-permissions-rules nil))
     (setf (mevedel-session-permission-mode session) ,mode)
     (with-current-buffer data
       (setq default-directory root)
       (setq-local mevedel-session-current session))
     (unwind-protect (let ((default-directory root)) ,@body)
       (mevedel-session-close session)
       (kill-buffer data)
       (delete-directory root t))))

(defun mevedel-tool-patch-test--write (file text)
  "Write TEXT to FILE, creating its directory."
  (make-directory (file-name-directory file) t)
  (with-temp-file file (insert text)))

(defun mevedel-tool-patch-test--read (file)
  "Return the contents of FILE."
  (with-temp-buffer
    (insert-file-contents file)
    (buffer-string)))

(defun mevedel-tool-patch-test--run (data patch)
  "Run ApplyPatch on PATCH as a provider call from DATA.
Return (TEXT . RENDER-DATA): the result the model sees and the
call's render-data."
  (let ((box nil))
    (with-current-buffer data
      (mevedel-pipeline-run-tool (mevedel-tool-get "ApplyPatch") (list :patch patch)
                                 (lambda (result) (setq box (list result)))
                                 :tool-use-id "call-patch" :data-buffer data))
    (mevedel-test-wait-until box 20)
    (cons (mevedel-render-data-strip (car box) "call-patch")
          (mevedel-render-data-extract (car box) "call-patch"))))

(defun mevedel-tool-patch-test--patch (&rest lines)
  "Return a patch of LINES between the begin and end markers."
  (concat "*** Begin Patch\n" (mapconcat (lambda (line) (concat line "\n")) lines "")
          "*** End Patch\n"))

;;;; The manual

(ert-deftest mevedel-tool-patch:the-description-points-to-a-manual-that-is-served ()
  (should (string-search "mevedel://tools/applypatch.md"
                         (mevedel-tool-description (mevedel-tool-get "ApplyPatch"))))
  (let ((result nil))
    (mevedel-pipeline-run-tool-outcome (mevedel-tool-get "Read")
                                       (list :file_path "mevedel://tools/applypatch.md")
                                       (lambda (outcome) (setq result outcome)))
    (mevedel-test-wait-until result 20)
    (should (eq (plist-get result :status) 'success))
    (should (string-search "# ApplyPatch" (plist-get result :result)))))

;;;; Add, update, delete, move

(ert-deftest mevedel-tool-patch:adds-updates-deletes-and-moves-in-edits-mode ()
  (mevedel-tool-patch-test--with-session 'edits
    (mevedel-tool-patch-test--write (expand-file-name "lisp/a.el" root)
                                    "(one)\n(two)\n(three)\n(four)\n(five)\n(six)\n(seven)\n")
    (mevedel-tool-patch-test--write (expand-file-name "old.txt" root) "gone\n")
    (mevedel-tool-patch-test--write (expand-file-name "src/m.txt" root) "alpha\nbeta\ngamma\n")
    (pcase-let ((`(,text . ,data)
                 (mevedel-tool-patch-test--run
                  data (mevedel-tool-patch-test--patch
                        "*** Add File: new/dir/n.txt" "+fresh" "+file"
                        "*** Update File: lisp/a.el"
                        "@@" " (one)" "-(two)" "+(TWO)" " (three)"
                        "@@" " (five)" "-(six)" "+(SIX)" "+(six and a half)" " (seven)"
                        "*** Delete File: old.txt"
                        "*** Update File: src/m.txt" "*** Move to: dst/m.txt"
                        "@@" " alpha" "-beta" "+BETA" " gamma"))))
      (should (equal (mevedel-tool-patch-test--read (expand-file-name "new/dir/n.txt" root))
                     "fresh\nfile\n"))
      (should (equal (mevedel-tool-patch-test--read (expand-file-name "lisp/a.el" root))
                     "(one)\n(TWO)\n(three)\n(four)\n(five)\n(SIX)\n(six and a half)\n(seven)\n"))
      (should-not (file-exists-p (expand-file-name "old.txt" root)))
      (should-not (file-exists-p (expand-file-name "src/m.txt" root)))
      (should (equal (mevedel-tool-patch-test--read (expand-file-name "dst/m.txt" root))
                     "alpha\nBETA\ngamma\n"))
      ;; The model: one line per file, authored paths, counts.
      (should (string-match-p "^Added new/dir/n\\.txt (\\+2 -0)$" text))
      (should (string-match-p "^Updated lisp/a\\.el (\\+3 -2)$" text))
      (should (string-match-p "^Deleted old\\.txt (\\+0 -1)$" text))
      (should (string-match-p "^Moved src/m\\.txt to dst/m\\.txt (\\+1 -1)$" text))
      (should-not (string-search root text))
      ;; The row: render-data of kind patch, one block per file.
      (should (eq (plist-get data :kind) 'patch))
      (should (= (length (plist-get data :files)) 4))
      (should (string-search "+(six and a half)"
                             (plist-get (nth 1 (plist-get data :files)) :diff)))
      (let ((row (mevedel-tool-render-row "ApplyPatch" nil text data)))
        (should (equal (plist-get row :header) "Edited 4 files (+6 −4)"))
        (should (eq (plist-get row :status) 'success))
        (should (eq (plist-get row :body-mode) #'diff-mode))
        (should (string-search "+(TWO)" (plist-get row :body)))
        ;; The preview opens on the first change, the new file's lines.
        (should (string-match-p "\\`[^\n]*\n\\+fresh\n" (plist-get row :preview-body)))))))

(ert-deftest mevedel-tool-patch:rows-name-a-single-file-by-its-operation ()
  (cl-flet ((header (op &optional move-to)
              (plist-get (mevedel-tool-render-row
                          "ApplyPatch" nil "The patch was applied."
                          (list :kind 'patch :added 2 :removed 1
                                :files (list (list :path "a.el" :op op :move-to move-to
                                                   :status 'applied :added 2 :removed 1
                                                   :diff "--- a.el\n+++ a.el\n@@ -1 +1,2 @@\n-x\n+y\n+z\n"))))
                         :header)))
    (should (equal (header 'add) "Added a.el (+2 −1)"))
    (should (equal (header 'delete) "Deleted a.el (+2 −1)"))
    (should (equal (header 'update) "Edited a.el (+2 −1)"))
    (should (equal (header 'update "b.el") "Moved a.el → b.el (+2 −1)"))))

;;;; Errors change nothing

(ert-deftest mevedel-tool-patch:a-bad-patch-is-an-error-naming-the-line ()
  (mevedel-tool-patch-test--with-session 'edits
    (pcase-let ((`(,text . ,_)
                 (mevedel-tool-patch-test--run
                  data (mevedel-tool-patch-test--patch "*** Add File: made.txt" "+ok"
                                                       "*** Frobnicate File: x.txt"))))
      (should (string-prefix-p "Error: " text))
      (should (string-search "Frobnicate" text))
      (should-not (file-exists-p (expand-file-name "made.txt" root))))))

(ert-deftest mevedel-tool-patch:an-ambiguous-hunk-fails-every-file ()
  (mevedel-tool-patch-test--with-session 'edits
    (let ((twice "start\nsame\nline\nmiddle\nsame\nline\nend\n"))
      (mevedel-tool-patch-test--write (expand-file-name "twice.txt" root) twice)
      (mevedel-tool-patch-test--write (expand-file-name "fine.txt" root) "fine\n")
      (pcase-let* ((patch (mevedel-tool-patch-test--patch
                           "*** Update File: fine.txt" "@@" "-fine" "+FINE"
                           "*** Update File: twice.txt" "@@" " same" "-line" "+LINE"))
                   (`(,text . ,data) (mevedel-tool-patch-test--run data patch)))
        (should (string-prefix-p "Error: " text))
        (should (string-search "twice.txt" text))
        (should-not data)
        (should (equal (mevedel-tool-patch-test--read (expand-file-name "twice.txt" root)) twice))
        (should (equal (mevedel-tool-patch-test--read (expand-file-name "fine.txt" root))
                       "fine\n"))
        (should (string-prefix-p "ApplyPatch fine.txt, twice.txt"
                                 (plist-get (mevedel-tool-render-row "ApplyPatch"
                                                                     (list :patch patch) text nil)
                                            :header)))))))

;;;; Visited buffers

(ert-deftest mevedel-tool-patch:an-unmodified-buffer-follows-in-one-undo-step ()
  (mevedel-tool-patch-test--with-session 'edits
    (let* ((file (expand-file-name "v.txt" root))
           (before "one\ntwo\nthree\nfour\nfive\nsix\n")
           buffer)
      (mevedel-tool-patch-test--write file before)
      (setq buffer (find-file-noselect file))
      (unwind-protect
          (with-current-buffer buffer
            (buffer-enable-undo)
            (goto-char (point-min))
            (forward-line 4)            ; on "five", below the change
            (narrow-to-region (line-beginning-position 0) (point-max))
            (setq buffer-read-only t)
            (set-window-buffer (selected-window) buffer)
            (set-window-start (selected-window) (point-min))
            (pcase-let ((`(,text . ,_)
                         (mevedel-tool-patch-test--run
                          data (mevedel-tool-patch-test--patch
                                "*** Update File: v.txt" "@@" " one" "-two" "+TWO" "+two and more"
                                " three"))))
              (should (string-match-p "^Updated v\\.txt (\\+2 -1)$" text)))
            ;; The text is the file's, saved state is clean, Emacs agrees with the disk.
            (should (equal (save-restriction (widen) (buffer-string))
                           (mevedel-tool-patch-test--read file)))
            (should-not (buffer-modified-p))
            (should (verify-visited-file-modtime buffer))
            ;; Point stayed on its line, the narrowing and read-only state stayed.
            (should (looking-at "five"))
            (should (equal (buffer-substring (window-start) (+ (window-start) 4)) "four"))
            (should (buffer-narrowed-p))
            (should (equal (buffer-substring (point-min) (point-max)) "four\nfive\nsix\n"))
            (should buffer-read-only)
            ;; One undo step gives the old text back.
            (let ((inhibit-read-only t))
              (widen)
              (primitive-undo 1 buffer-undo-list))
            (should (equal (save-restriction (widen) (buffer-string)) before)))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer)))))

(ert-deftest mevedel-tool-patch:a-buffer-that-cannot-follow-is-a-note-not-an-error ()
  (mevedel-tool-patch-test--with-session 'edits
    (let ((file (expand-file-name "hooked.txt" root))
          buffer)
      (mevedel-tool-patch-test--write file "x\n")
      (setq buffer (find-file-noselect file))
      (unwind-protect
          (progn
            (with-current-buffer buffer
              (add-hook 'before-change-functions (lambda (&rest _) (error "Hook says no")) nil t))
            (pcase-let ((`(,text . ,_)
                         (mevedel-tool-patch-test--run
                          data (mevedel-tool-patch-test--patch "*** Update File: hooked.txt"
                                                               "@@" "-x" "+y"))))
              (should (string-match-p "^Updated hooked\\.txt (\\+1 -1)$" text))
              (should (string-search "hooked.txt was written, but its Emacs buffer could not be \
updated (Hook says no)" text)))
            (should (equal (mevedel-tool-patch-test--read file) "y\n")))
        (with-current-buffer buffer
          (setq before-change-functions nil)
          (set-buffer-modified-p nil))
        (kill-buffer buffer)))))

(ert-deftest mevedel-tool-patch:a-crlf-buffer-keeps-its-line-endings ()
  (mevedel-tool-patch-test--with-session 'edits
    (let ((file (expand-file-name "dos.txt" root))
          buffer)
      (with-temp-file file (set-buffer-multibyte nil) (insert "a\r\nb\r\nc\r\n"))
      (setq buffer (find-file-noselect file))
      (unwind-protect
          (progn
            (mevedel-tool-patch-test--run
             data (mevedel-tool-patch-test--patch "*** Update File: dos.txt" "@@" " a" "-b" "+B"))
            (with-temp-buffer
              (set-buffer-multibyte nil)
              (insert-file-contents-literally file)
              (should (equal (buffer-string) "a\r\nB\r\nc\r\n")))
            (with-current-buffer buffer
              (should (equal (buffer-string) "a\nB\nc\n"))
              (should (eq (coding-system-eol-type buffer-file-coding-system) 1))
              (should-not (buffer-modified-p))))
        (kill-buffer buffer)))))

(ert-deftest mevedel-tool-patch:a-moved-file-takes-its-buffer-along ()
  (mevedel-tool-patch-test--with-session 'edits
    (let ((file (expand-file-name "from.txt" root))
          buffer)
      (mevedel-tool-patch-test--write file "a\nb\n")
      (setq buffer (find-file-noselect file))
      (unwind-protect
          (progn
            (mevedel-tool-patch-test--run
             data (mevedel-tool-patch-test--patch "*** Update File: from.txt"
                                                  "*** Move to: to.txt" "@@" " a" "-b" "+B"))
            (with-current-buffer buffer
              (should (equal buffer-file-name (expand-file-name "to.txt" root)))
              (should (equal (buffer-string) "a\nB\n"))
              (should-not (buffer-modified-p))
              (should (verify-visited-file-modtime buffer))))
        (kill-buffer buffer)))))

(ert-deftest mevedel-tool-patch:a-deleted-file-leaves-its-buffer-alone ()
  (mevedel-tool-patch-test--with-session 'edits
    (let ((file (expand-file-name "doomed.txt" root))
          buffer)
      (mevedel-tool-patch-test--write file "last words\n")
      (setq buffer (find-file-noselect file))
      (unwind-protect
          (progn
            (mevedel-tool-patch-test--run
             data (mevedel-tool-patch-test--patch "*** Delete File: doomed.txt"))
            (should-not (file-exists-p file))
            (should (buffer-live-p buffer))
            (with-current-buffer buffer
              (should (equal (buffer-string) "last words\n"))
              (should (equal buffer-file-name file))
              (should-not (buffer-modified-p))))
        (kill-buffer buffer)))))

(ert-deftest mevedel-tool-patch:unsaved-changes-refuse-the-whole-patch ()
  (mevedel-tool-patch-test--with-session 'edits
    (let ((dirty (expand-file-name "dirty.txt" root))
          (other (expand-file-name "other.txt" root))
          buffer)
      (mevedel-tool-patch-test--write dirty "on disk\n")
      (mevedel-tool-patch-test--write other "other\n")
      (setq buffer (find-file-noselect dirty))
      (unwind-protect
          (progn
            (with-current-buffer buffer
              (goto-char (point-max))
              (insert "typed by the user\n"))
            (pcase-let ((`(,text . ,_)
                         (mevedel-tool-patch-test--run
                          data (mevedel-tool-patch-test--patch
                                "*** Update File: other.txt" "@@" "-other" "+OTHER"
                                "*** Update File: dirty.txt" "@@" "-on disk" "+changed"))))
              (should (string-prefix-p "Error: " text))
              (should (string-search "dirty.txt" text))
              (should (string-search "unsaved changes" text))
              (should (string-search "nothing was written" text)))
            (should (equal (mevedel-tool-patch-test--read dirty) "on disk\n"))
            (should (equal (mevedel-tool-patch-test--read other) "other\n"))
            (with-current-buffer buffer
              (should (buffer-modified-p))
              (should (equal (buffer-string) "on disk\ntyped by the user\n"))))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer)))))

;;;; Protected paths and resources

(ert-deftest mevedel-tool-patch:protected-paths-are-refused-before-any-read ()
  (mevedel-tool-patch-test--with-session 'full-auto
    (let* ((home-rc (expand-file-name "home/.bashrc" root))
           (mevedel-tool-patch-protected-files (list home-rc))
           (planned 0))
      (mevedel-tool-patch-test--write (expand-file-name ".git/config" root) "[core]\n")
      (mevedel-tool-patch-test--write (expand-file-name ".mevedel/state.el" root) "()\n")
      (mevedel-tool-patch-test--write home-rc "export A=1\n")
      (make-symbolic-link home-rc (expand-file-name "rc-link" root))
      ;; A link to a protected file that does not exist yet: adding
      ;; through it would create the file.
      (make-symbolic-link (expand-file-name "home/.profile" root)
                          (expand-file-name "profile-link" root))
      (push (expand-file-name "home/.profile" root) mevedel-tool-patch-protected-files)
      (advice-add 'mevedel-core-patch-plan :before (lambda (&rest _) (cl-incf planned))
                  '((name . mevedel-tool-patch-test--count)))
      (unwind-protect
          (pcase-dolist (`(,path . ,why)
                         `((".git/config" . ".git directory")
                           ("sub/../.mevedel/state.el" . ".mevedel/")
                           (,home-rc . "protected startup")
                           ("rc-link" . "protected startup")
                           ("profile-link" . "protected startup")))
            (pcase-let ((`(,text . ,_)
                         (mevedel-tool-patch-test--run
                          data (mevedel-tool-patch-test--patch
                                "*** Add File: innocent.txt" "+x"
                                (concat "*** Update File: " path) "@@" "-x" "+y"))))
              (should (string-prefix-p "Error: " text))
              (should (string-search (format "`%s'" path) text))
              (should (string-search why text))
              (should-not (file-exists-p (expand-file-name "innocent.txt" root)))))
        (advice-remove 'mevedel-core-patch-plan 'mevedel-tool-patch-test--count))
      (should (= planned 0))
      (should (equal (mevedel-tool-patch-test--read home-rc) "export A=1\n"))
      (should-not (file-exists-p (expand-file-name "home/.profile" root)))
      (should (equal (mevedel-tool-patch-test--read (expand-file-name ".git/config" root))
                     "[core]\n")))))

;; Issue 42 item 6: the prompt tells the model to add journal entries
;; with ApplyPatch; that one write under .mevedel/ is allowed, and only
;; as a new, well-named entry.
(ert-deftest mevedel-tool-patch:a-new-journal-entry-is-the-one-mevedel-write ()
  (mevedel-tool-patch-test--with-session 'full-auto
    (let ((entry ".mevedel/journal/2026-01-02T03:04:05Z-fixed-the-build.md"))
      (pcase-let ((`(,text . ,_)
                   (mevedel-tool-patch-test--run
                    data (mevedel-tool-patch-test--patch (concat "*** Add File: " entry)
                                                         "+Fixed the build."))))
        (should-not (string-prefix-p "Error: " text))
        (should (equal (mevedel-tool-patch-test--read (expand-file-name entry root))
                       "Fixed the build.\n")))
      ;; Editing it, a badly named entry or a nested one stay refused.
      (dolist (patch (list (mevedel-tool-patch-test--patch
                            (concat "*** Update File: " entry) "@@" "-Fixed the build." "+Rewritten.")
                           (mevedel-tool-patch-test--patch
                            (concat "*** Delete File: " entry))
                           (mevedel-tool-patch-test--patch
                            "*** Add File: .mevedel/journal/notes.md" "+x")
                           (mevedel-tool-patch-test--patch
                            "*** Add File: .mevedel/journal/x/2026-01-02T03:04:05Z.md" "+x")
                           (mevedel-tool-patch-test--patch
                            "*** Add File: .mevedel/permissions.el" "+((allow \"Bash\"))")))
        (pcase-let ((`(,text . ,_) (mevedel-tool-patch-test--run data patch)))
          (should (string-prefix-p "Error: " text))
          (should (string-search ".mevedel/" text))))
      (should (equal (mevedel-tool-patch-test--read (expand-file-name entry root))
                     "Fixed the build.\n"))
      (should-not (file-exists-p (expand-file-name ".mevedel/permissions.el" root))))))

(ert-deftest mevedel-tool-patch:a-protected-path-is-refused-without-asking ()
  (mevedel-tool-patch-test--with-session 'ask
    (let ((asked 0))
      (setf (mevedel-session-prompter session)
            (lambda (_context answer) (cl-incf asked) (funcall answer 'approve)))
      (pcase-let ((`(,text . ,_)
                   (mevedel-tool-patch-test--run
                    data (mevedel-tool-patch-test--patch "*** Add File: .git/hooks/pre-commit"
                                                         "+exit 0"))))
        (should (string-prefix-p "Error: " text))
        (should (string-search ".git directory" text)))
      (should (= asked 0))
      (should-not (file-exists-p (expand-file-name ".git/hooks/pre-commit" root))))))

(ert-deftest mevedel-tool-patch:work-and-memory-addresses-are-targets ()
  (mevedel-tool-patch-test--with-session 'edits
    (let ((mevedel-resource-memory-roots '(".mevedel/memory")))
      (mevedel-tool-patch-test--write (expand-file-name ".mevedel/memory/topic.md" root)
                                      "remember this\n")
      (pcase-let ((`(,text . ,_)
                   (mevedel-tool-patch-test--run
                    data (mevedel-tool-patch-test--patch
                          "*** Add File: work://plans/p.md" "+the plan"
                          "*** Update File: memory://local-mevedel/topic.md"
                          "@@" "-remember this" "+remember that"))))
        (should (string-match-p "^Added work://plans/p\\.md (\\+1 -0)$" text))
        (should (string-match-p "^Updated memory://local-mevedel/topic\\.md (\\+1 -1)$" text))
        (should-not (string-search root text)))
      (should (equal (mevedel-tool-patch-test--read
                      (expand-file-name "plans/p.md" (mevedel-session-local-directory session)))
                     "the plan\n"))
      (should (equal (mevedel-tool-patch-test--read
                      (expand-file-name ".mevedel/memory/topic.md" root))
                     "remember that\n"))
      (should (mevedel-session-storage-p session))
      ;; Families ApplyPatch does not write are refused before anything is read.
      (pcase-let ((`(,text . ,_)
                   (mevedel-tool-patch-test--run
                    data (mevedel-tool-patch-test--patch "*** Add File: mevedel://x.md" "+no"))))
        (should (string-prefix-p "Error: " text))
        (should (string-search "mevedel://x.md" text))))))

;;;; Permission and review

(ert-deftest mevedel-tool-patch:the-destination-is-the-one-approved ()
  "A link swapped between approval and execution redirects nothing."
  (mevedel-tool-patch-test--with-session 'edits
    (let ((a (expand-file-name "a.txt" root))
          (b (expand-file-name "b.txt" root))
          (link (expand-file-name "link.txt" root)))
      (mevedel-tool-patch-test--write a "same\n")
      (mevedel-tool-patch-test--write b "same\n")
      (make-symbolic-link a link)
      ;; The snapshot step runs after the approval, before the handler.
      (let ((mevedel-pipeline-snapshot-functions
             (list (lambda (_context)
                     (delete-file link)
                     (make-symbolic-link b link)))))
        (pcase-let ((`(,text . ,_)
                     (mevedel-tool-patch-test--run
                      data (mevedel-tool-patch-test--patch "*** Update File: link.txt"
                                                           "@@" "-same" "+changed"))))
          (should (string-prefix-p "Error: " text))
          (should (string-search "another file than the one approved" text))))
      (should (equal (mevedel-tool-patch-test--read a) "same\n"))
      (should (equal (mevedel-tool-patch-test--read b) "same\n"))
      ;; Unchanged, the approved destination is written.
      (pcase-let ((`(,text . ,_)
                   (mevedel-tool-patch-test--run
                    data (mevedel-tool-patch-test--patch "*** Update File: link.txt"
                                                         "@@" "-same" "+changed"))))
        (should (string-search "Updated link.txt" text)))
      (should (equal (mevedel-tool-patch-test--read b) "changed\n")))))

(defvar mevedel-tool-patch-test--moved nil
  "The session directory requests report once it has moved, or nil.")

(defun mevedel-tool-patch-test--owners (owners)
  "Return OWNERS with the moved session directory, when it has moved."
  (if mevedel-tool-patch-test--moved
      (plist-put (copy-sequence owners) :session-dir mevedel-tool-patch-test--moved)
    owners))

(ert-deftest mevedel-tool-patch:a-moved-session-directory-is-not-followed ()
  "work:// approved in one session directory is not written in another."
  (mevedel-tool-patch-test--with-session 'edits
    (mevedel-session-ensure-storage session)
    (let* ((moved (make-temp-file "mevedel-patch-moved-" t))
           (mevedel-tool-patch-test--moved nil)
           ;; After the approval, before the handler, the directory moves.
           (mevedel-pipeline-snapshot-functions
            (list (lambda (_context) (setq mevedel-tool-patch-test--moved moved)))))
      (advice-add 'mevedel-resource-default-session :filter-return
                  #'mevedel-tool-patch-test--owners)
      (unwind-protect
          (pcase-let ((`(,text . ,_)
                       (mevedel-tool-patch-test--run
                        data (mevedel-tool-patch-test--patch "*** Add File: work://n.md" "+note"))))
            (should (string-search "another file than the one approved" text))
            (should-not (directory-files moved nil "n\\.md" nil))
            (should-not (file-exists-p (expand-file-name
                                        "n.md" (mevedel-session-local-directory session)))))
        (advice-remove 'mevedel-resource-default-session #'mevedel-tool-patch-test--owners)
        (delete-directory moved t)))))

(ert-deftest mevedel-tool-patch:ask-mode-without-a-prompter-refuses ()
  (mevedel-tool-patch-test--with-session 'ask
    (mevedel-tool-patch-test--write (expand-file-name "a.txt" root) "a\n")
    (pcase-let ((`(,text . ,_)
                 (mevedel-tool-patch-test--run
                  data (mevedel-tool-patch-test--patch "*** Update File: a.txt"
                                                       "@@" "-a" "+b"))))
      (should (string-prefix-p "Permission denied: " text))
      (should (equal (mevedel-tool-patch-test--read (expand-file-name "a.txt" root)) "a\n")))))

(ert-deftest mevedel-tool-patch:edits-mode-asks-outside-the-workspace ()
  (mevedel-tool-patch-test--with-session 'edits
    (let ((outside (make-temp-file "mevedel-patch-outside-" nil ".txt" "x\n"))
          (asked nil))
      (unwind-protect
          (progn
            (setf (mevedel-session-prompter session)
                  (lambda (context answer)
                    (setq asked (mevedel-permissions-tool-paths (plist-get context :tool)
                                                                (plist-get context :args)))
                    (funcall answer '(deny . "not there"))))
            (mevedel-tool-patch-test--run
             data (mevedel-tool-patch-test--patch (concat "*** Update File: " outside)
                                                  "@@" "-x" "+y"))
            (should (equal asked (list outside)))
            (should (equal (mevedel-tool-patch-test--read outside) "x\n")))
        (delete-file outside)))))

(ert-deftest mevedel-tool-patch:a-review-applies-its-own-plan-and-selection ()
  (mevedel-tool-patch-test--with-session 'ask
    (mevedel-tool-patch-test--write (expand-file-name "r.txt" root)
                                    "alpha\nbravo\ncharlie\ndelta\necho\nfoxtrot\ngolf\nhotel\nindia\njuliet\nkilo\nlima\n")
    (mevedel-tool-patch-test--write (expand-file-name "s.txt" root) "s\n")
    (let* ((patch (mevedel-tool-patch-test--patch
                   "*** Update File: r.txt" "@@" "-alpha" "+ALPHA" "@@" " kilo" "-lima" "+Lima"
                   "*** Update File: s.txt" "@@" "-s" "+S"))
           (plan (mevedel-core-patch-plan
                  patch (list (cons "r.txt" (expand-file-name "r.txt" root))
                              (cons "s.txt" (expand-file-name "s.txt" root)))))
           (r (expand-file-name "r.txt" root))
           (hunks (plist-get (car (mevedel-core-patch-plan-files plan)) :hunks))
           (lima (plist-get (nth 1 hunks) :new-text))
           (taken nil))
      (should (= (length hunks) 2))
      (should (string-search "Lima" lima))
      (setf (mevedel-session-prompter session)
            (lambda (_context answer)
              (funcall answer '(approve . (:source review :reason "reviewed" :review-id "rv1")))))
      (cl-letf* (((symbol-function 'mevedel-patch-review-take)
                  (lambda (id)
                    (setq taken id)
                    (list :plan plan
                          ;; The second hunk's new text, edited.
                          :selection `((,r accept (edit . ,(string-replace "Lima" "LIMA" lima)))
                                       (,(expand-file-name "s.txt" root) . reject))
                          :feedback "Keep s.txt as it is."))))
        (pcase-let ((`(,text . ,_) (mevedel-tool-patch-test--run data patch)))
          (should (equal taken "rv1"))
          (should (string-match-p "^The user reviewed the patch" text))
          (should (string-match-p "^Updated r\\.txt (\\+2 -2); the user edited the change at @@"
                                  text))
          (should (string-search "+LIMA" text))
          (should (string-match-p "^Left s\\.txt unchanged: the user rejected this file$" text))
          (should (string-search "The user's feedback on the patch:\nKeep s.txt as it is." text))))
      (should (equal (mevedel-tool-patch-test--read r)
                     "ALPHA\nbravo\ncharlie\ndelta\necho\nfoxtrot\ngolf\nhotel\nindia\njuliet\nkilo\nLIMA\n"))
      (should (equal (mevedel-tool-patch-test--read (expand-file-name "s.txt" root)) "s\n")))))

;; Without this guard a lost review would apply what the user may have rejected.
(ert-deftest mevedel-tool-patch:a-reviewed-call-without-its-review-writes-nothing ()
  (mevedel-tool-patch-test--with-session 'ask
    (mevedel-tool-patch-test--write (expand-file-name "a.txt" root) "a\n")
    (setf (mevedel-session-prompter session)
          (lambda (_context answer)
            (funcall answer '(approve . (:source review :reason "reviewed")))))
    (cl-letf (((symbol-function 'mevedel-patch-review-take) #'ignore))
      (pcase-let ((`(,text . ,_)
                   (mevedel-tool-patch-test--run
                    data (mevedel-tool-patch-test--patch "*** Update File: a.txt"
                                                         "@@" "-a" "+b"))))
        (should (string-prefix-p "Error: " text))
        (should (string-search "review" text))))
    (should (equal (mevedel-tool-patch-test--read (expand-file-name "a.txt" root)) "a\n"))))

(provide 'tool-patch-test)
;;; tool-patch-test.el ends here
