;;; composer-test.el --- Tests of mentions and composer completion  -*- lexical-binding: t; -*-

;;; Commentary:

;; @file and @file:10-40 attachments, @agent, $skill and plain tokens;
;; completion candidates for @, $ and scheme:// without filesystem
;; access on the keystroke path; /context.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defmacro composer-test--with-view (&rest body)
  "Run BODY with `root' a workspace, `view' its view and `chat' its chat."
  (declare (indent 0))
  `(let* ((root (file-name-as-directory (make-temp-file "mevedel-composer-" t)))
          (mevedel-resource-memory-roots '(".mevedel/memory"))
          (mevedel-resource-skill-roots '((local-mevedel . ".mevedel/skills")))
          (mevedel-instructions-global-directory (make-temp-file "mevedel-global-" t)))
     (pcase-dolist (`(,name . ,content)
                    `(("src/a.el" . ,(mapconcat (lambda (n) (format "line %d" n))
                                                (number-sequence 1 60) "\n"))
                      ("src/b.el" . "b\n")
                      ("README.md" . "readme\n")
                      ("AGENTS.md" . "Be brief.\n")
                      (".mevedel/memory/topic.md" . "topic\n")
                      (".mevedel/memory/new notes é.md" . "spaced\n")
                      (".mevedel/skills/lint/SKILL.md" . "---\ndescription: Lint\n---\nLINT STEPS\n")))
       (let ((file (expand-file-name name root)))
         (make-directory (file-name-directory file) t)
         (with-temp-file file (insert content))))
     (remhash root mevedel-composer--caches)
     (let* ((view (mevedel root))
            (chat (mevedel-view-chat view)))
       (unwind-protect (progn ,@body)
         (kill-buffer view)
         (kill-buffer (mevedel-chat-data-buffer chat))
         (remhash (mevedel-chat-root chat) mevedel-chat--chats)
         (delete-directory root t)
         (delete-directory mevedel-instructions-global-directory t)))))

(defun composer-test--wait-files (root)
  "Wait until the composer knows ROOT's files."
  (mevedel-test-wait-until
   (and (not (mevedel-composer--cache-request (mevedel-composer--cache root)))
        (> (length (mevedel-composer--cache-files (mevedel-composer--cache root))) 0))
   10))

(defvar composer-test--accessed nil
  "File operations `composer-test--spy' saw.")

(defconst composer-test--operations
  '(file-attributes file-exists-p file-regular-p file-directory-p file-readable-p
                    directory-files directory-files-and-attributes insert-file-contents
                    file-truename file-modes)
  "Operations that touch the filesystem.")

(defun composer-test--spy (operation &rest args)
  "Record OPERATION when it touches the filesystem; run it with ARGS."
  (when (memq operation composer-test--operations)
    (push (cons operation (car args)) composer-test--accessed))
  (let ((inhibit-file-name-handlers (cons #'composer-test--spy inhibit-file-name-handlers))
        (inhibit-file-name-operation operation))
    (apply operation args)))

(ert-deftest composer:mentions-become-blocks ()
  (composer-test--with-view
    (let* ((text "see @src/a.el:10-12 and @README.md, ask @worker, run $lint; not @nothing.txt or $HOME")
           (mentions (mevedel-mentions-parse text root))
           (blocks (mevedel-mentions-blocks chat text)))
      (should (equal (mapcar (lambda (m) (plist-get m :kind)) mentions) '(file file agent skill)))
      (should (equal (plist-get (car mentions) :token) "@src/a.el:10-12"))
      (should (= (length blocks) 4))
      (should (string-prefix-p "<attachment kind=\"file\" path=\"src/a.el\" lines=\"10-12\">\n    10\tline 10\n    11\tline 11\n    12\tline 12\n</attachment>"
                               (nth 0 blocks)))
      (should (string-search "readme" (nth 1 blocks)))
      (should (string-search "delegated to the worker agent" (nth 2 blocks)))
      (should (string-search "LINT STEPS" (nth 3 blocks)))
      ;; $lint has no allowed-tools: the turn is not restricted.
      (should-not (gethash (mevedel-chat-data-buffer chat) mevedel-skills--restrictions))
      ;; A modified buffer's text is the file's current content.
      (with-current-buffer (find-file-noselect (expand-file-name "src/b.el" root))
        (erase-buffer)
        (insert "unsaved b\n")
        (unwind-protect
            (should (string-search "unsaved b"
                                   (car (mevedel-mentions-blocks chat "@src/b.el"))))
          (set-buffer-modified-p nil)
          (kill-buffer))))))

(ert-deftest composer:a-queued-message-brings-its-mentions ()
  "A message queued while tools run joins the request with its attachments."
  (composer-test--with-view
    (setf (mevedel-chat-queued chat) '("also look at @src/b.el" "and this, plainly"))
    (let ((delivered (mevedel-chat--deliver-queued (list :context chat))))
      (should (equal (nth 0 delivered) "also look at @src/b.el"))
      (should (string-prefix-p "<attachment kind=\"file\" path=\"src/b.el\"" (nth 1 delivered)))
      ;; The attachment is hidden mail in the transcript, not the user's text.
      (should (get-text-property 0 'mevedel-mail (nth 1 delivered)))
      (should (equal (nthcdr 2 delivered) '("and this, plainly"))))))

(ert-deftest composer:chips-in-the-view ()
  (let ((text (mevedel-mentions-chips "look at @src/a.el:3 with @worker, not @ alone")))
    (should (eq (get-text-property (string-search "@src" text) 'face text) 'mevedel-mentions-chip))
    (should (eq (get-text-property (string-search "@worker" text) 'face text)
                'mevedel-mentions-chip))
    (should-not (get-text-property (string-search "not" text) 'face text))))

(ert-deftest composer:completion-without-filesystem-access ()
  (composer-test--with-view
    (composer-test--wait-files root)
    (let* ((file-name-handler-alist
            (cons (cons "\\`/" #'composer-test--spy) file-name-handler-alist))
           (composer-test--accessed nil))
      ;; The spy sees filesystem access.
      (file-exists-p root)
      (should composer-test--accessed)
      (setq composer-test--accessed nil)
      (with-current-buffer view
        (cl-flet ((complete (input)
                    (goto-char (point-max))
                    (delete-region mevedel-view--composer (point-max))
                    (insert input)
                    (let ((capf (mevedel-composer-capf)))
                      (and capf (all-completions (buffer-substring-no-properties
                                                  (nth 0 capf) (nth 1 capf))
                                                 (nth 2 capf))))))
          (should (equal (sort (complete "look at @src/") #'string<) '("src/a.el" "src/b.el")))
          (should (member "worker" (complete "ask @wor")))
          (should (equal (complete "run $li") '("lint")))
          (should (member "memory://" (complete "see memory:")))
          (should (member "memory://local-mevedel/topic.md" (complete "see memory://local")))
          ;; Inserted addresses are canonically encoded (issue 42).
          (should (member "memory://local-mevedel/new%20notes%20%C3%A9.md"
                          (complete "see memory://local-mevedel/new")))
          (should (member "skill://local-mevedel/lint" (complete "skill://")))
          (should (string-prefix-p "skill://lint@" (car (complete "skill://lint@"))))
          (should (member "mevedel://ptc-dialect.md" (complete "mevedel://p")))
          ;; /command stays the view's own completion.
          (goto-char (point-max))
          (delete-region mevedel-view--composer (point-max))
          (insert "/con")
          (should-not (mevedel-composer-capf))
          (should (member "context" (nth 2 (mevedel-view--slash-capf))))))
      (should (null composer-test--accessed)))))

(ert-deftest composer:only-the-root-chat-s-turns-refresh-the-metadata ()
  (composer-test--with-view
    (let* ((child (mevedel-chat-make-child chat "/root/helper"))
           (refreshed nil))
      (unwind-protect
          (cl-letf (((symbol-function 'mevedel-composer-refresh)
                     (lambda (root &rest _) (push root refreshed))))
            ;; A child agent has no composer: its turns cost nothing here.
            (run-hook-with-args 'mevedel-chat-idle-functions child 'done)
            (should-not refreshed)
            (run-hook-with-args 'mevedel-chat-idle-functions chat 'done)
            (should (equal refreshed (list (mevedel-prompt-workspace chat)))))
        (kill-buffer (mevedel-chat-data-buffer child))))))

(ert-deftest composer:tab-completes-in-the-composer ()
  (composer-test--with-view
    (composer-test--wait-files root)
    (with-current-buffer view
      (goto-char (point-max))
      (insert "look at @src/a")
      (execute-kbd-macro (kbd "TAB"))
      (should (string-suffix-p "@src/a.el" (mevedel-view--composer-text))))))

;; Issue 42 item 12: an address typed as it reads completes to, and
;; inserts, its canonical spelling (address-to-resource.md: insertion
;; always writes plain canonical address text).
(ert-deftest composer:an-address-typed-as-it-reads-completes-canonically ()
  (composer-test--with-view
    (composer-test--wait-files root)
    (with-current-buffer view
      (cl-flet ((tab (input)
                  (goto-char (point-max))
                  (delete-region mevedel-view--composer (point-max))
                  (insert input)
                  (let ((completion-at-point-functions '(mevedel-composer-capf)))
                    (completion-at-point))
                  (buffer-substring mevedel-view--composer (point-max))))
        (let ((inserted (tab "see memory://local-mevedel/new%20notes%20é")))
          (should (equal inserted "see memory://local-mevedel/new%20notes%20%C3%A9.md"))
          (should-not (text-properties-at (- (length inserted) 3) inserted)))
        (should (equal (tab "see memory://local-mevedel/top")
                       "see memory://local-mevedel/topic.md"))))))

;; Issue 42 item 12: a completed mention keeps the locator it was
;; completed to, even a name its spelling cannot carry, while the text
;; around it changes; an edit inside it unbinds it.
(ert-deftest composer:a-completed-mention-keeps-its-locator ()
  (composer-test--with-view
    (composer-test--wait-files root)
    (with-temp-file (expand-file-name "src/my plan.el" root) (insert "PLAN TEXT\n"))
    (let ((cache (mevedel-composer--cache root)))
      (mevedel-composer-refresh root)
      (mevedel-test-wait-until
       (and (not (mevedel-composer--cache-request cache))
            (seq-contains-p (mevedel-composer--cache-files cache) "src/my plan.el"))
       10))
    (with-current-buffer view
      (goto-char (point-max))
      (insert "look at @src/my")
      (execute-kbd-macro (kbd "TAB"))
      (should (string-suffix-p "@src/my plan.el" (mevedel-view--composer-text)))
      (insert " today")
      (goto-char mevedel-view--composer)
      (insert "Please, ")
      (let* ((text (mevedel-view--composer-text))
             (mentions (mevedel-mentions-parse text root)))
        (should (equal (mapcar (lambda (m) (plist-get m :kind)) mentions) '(file)))
        (should (equal (plist-get (car mentions) :file) (expand-file-name "src/my plan.el" root)))
        (should (string-search "PLAN TEXT" (car (mevedel-mentions-blocks chat text)))))
      ;; Deleting a character of the token unbinds it.
      (goto-char mevedel-view--composer)
      (search-forward "plan")
      (delete-char -1)
      (should-not (mevedel-mentions-parse (mevedel-view--composer-text) root)))))

(ert-deftest composer:slash-memory-opens-the-root ()
  (composer-test--with-view
    (save-window-excursion
      (mevedel-composer-memory chat "")
      (should (derived-mode-p 'dired-mode))
      (should (equal (file-name-as-directory default-directory)
                     (file-name-as-directory (expand-file-name ".mevedel/memory" root))))
      (kill-buffer))))

;; Issue 42 item 6: /learn and /clean-work start a model turn whose
;; changes go through ApplyPatch, as the spec describes.
(ert-deftest composer:slash-learn-and-clean-work-start-a-turn ()
  (composer-test--with-view
    (let ((sent nil))
      (cl-letf (((symbol-function 'mevedel-chat-send)
                 (lambda (_chat text &rest _) (push text sent) nil)))
        (with-current-buffer view
          (goto-char (point-max))
          (insert "/learn the build setup")
          (mevedel-view-send)
          (goto-char (point-max))
          (insert "/clean-work")
          (mevedel-view-send)))
      (pcase-let ((`(,clean ,learn) sent))
        (should (string-search "memory://root" learn))
        (should (string-search "ApplyPatch" learn))
        (should (string-suffix-p "Focus on: the build setup." learn))
        (should (string-search "work://shared" clean))
        (should (string-search "preferring deletion" clean))
        (should-not (string-search "Focus on" clean))))))

(ert-deftest composer:slash-journal-opens-a-new-entry ()
  (composer-test--with-view
    (save-window-excursion
      (let ((buffer (mevedel-composer-journal chat "Fixed the build")))
        (unwind-protect
            (let ((name (file-name-nondirectory (buffer-file-name buffer))))
              (should (string-suffix-p "-fixed-the-build.md" name))
              (should (mevedel-memory-journal-entry-time name))
              (should (equal (file-name-directory (buffer-file-name buffer))
                             (file-name-as-directory (expand-file-name ".mevedel/journal" root)))))
          (kill-buffer buffer))))))

(ert-deftest composer:slash-context-shows-components-and-files ()
  (composer-test--with-view
    (mevedel-composer-context chat "")
    (with-current-buffer "*mevedel context*"
      (should (string-search "workspace-instructions" (buffer-string)))
      (should (string-search "AGENTS.md" (buffer-string)))
      (should (string-search "memory-index" (buffer-string))))
    (kill-buffer "*mevedel context*")))

(provide 'composer-test)
;;; composer-test.el ends here
