;;; spelling-test.el --- Decisions judge the resolved resource, not its spelling  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Plan's boundary, permission rules and the workspace check must give
;; every spelling of one target the verdict of its canonical spelling:
;; percent-encoded unreserved characters and a scheme in any case name
;; the same resource, and a dot segment in an address is refused, never
;; read as an ordinary path.  A property test draws random spellings of
;; addresses of every family (and of ordinary paths) for ApplyPatch's
;; Add, Update, Delete and Move targets and for Read, Glob and Grep.
;; Then the concrete bypasses: Plan-mode patches that spell
;; work://shared/ otherwise are refused and write nothing, deny rules
;; bind the calls that act under another's authority (which still never
;; ask), and memory and skill roots outside the workspace are judged as
;; the files behind them.  Ordinary paths are judged by their real
;; path too: a link carries a call neither out of a deny rule nor into
;; an allow rule.

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-plan)
(require 'mevedel-view)
(mevedel--load)

(defmacro spelling-test--with-resources (&rest body)
  "Run BODY with `chat', `session', `root' and `outside' bound.
The session has storage and a file of every family: work://plans/p.md,
work://shared/x.md, artifact://tool-results/r.txt, a memory root in
the workspace and one outside it (`outside'/memory), a skill outside
the workspace (`outside'/skills/demo) and the bundled ones.  Every card
is answered \"allow once\" and noted in `asked'."
  (declare (indent 0))
  `(let* ((outside (file-name-as-directory (make-temp-file "mevedel-outside-" t)))
          (mevedel-resource-memory-roots
           (list ".mevedel/memory" (expand-file-name "memory" outside)))
          (mevedel-resource-skill-roots
           (list (cons 'global-agents (expand-file-name "skills" outside))
                 (cons 'bundled "skills"))))
     (unwind-protect
         (mevedel-test-with-view view chat
           (let* ((session (mevedel-chat-session chat))
                  (root (mevedel-session-workspace session))
                  (mevedel-session-current session)
                  (asked nil))
             (ignore view)
             (mevedel-chat-set-prompter chat (lambda (_chat request)
                                               (push request asked)
                                               (funcall (plist-get request :answer) 'once)))
             (mevedel-session-ensure-storage session)
             (dolist (file (list (expand-file-name "plans/p.md"
                                                   (mevedel-session-local-directory session))
                                 (expand-file-name ".mevedel/shared/x.md" root)
                                 (expand-file-name ".mevedel/shared/deny-me.md" root)
                                 (expand-file-name "tool-results/r.txt"
                                                   (mevedel-session-directory session))
                                 (expand-file-name ".mevedel/memory/a.md" root)
                                 (expand-file-name "memory/g.md" outside)
                                 (expand-file-name "memory/deny-me.md" outside)
                                 (expand-file-name "skills/demo/SKILL.md" outside)
                                 (expand-file-name "src/a.txt" root)
                                 (expand-file-name "elsewhere.txt" outside)))
               (make-directory (file-name-directory file) t)
               (with-temp-file file (insert "---\nname: demo\ndescription: d\n---\na\n")))
             ,@body))
       (delete-directory outside t))))

(defun spelling-test--memory-key (path)
  "Return the memory:// key of the configured root PATH."
  (cadr (assoc (directory-file-name path)
               (mevedel-resource-memory-root-list
                (directory-file-name (plist-get (funcall mevedel-resource-session-function)
                                                :workspace))))))

(defun spelling-test--targets (root outside)
  "Return a target of every family, canonical: addresses, then paths.
ROOT is the workspace and OUTSIDE a directory outside it."
  (let ((local (spelling-test--memory-key (expand-file-name ".mevedel/memory" root)))
        (global (spelling-test--memory-key (expand-file-name "memory" outside))))
    (list "work://plans/p.md" "work://plans/new.md" "work://shared/x.md"
          "work://shared/deny-me.md" "work://shared/new.md" "work://shared"
          "artifact://tool-results/r.txt" "artifact://"
          (format "memory://%s/a.md" local) (format "memory://%s/g.md" global)
          (format "memory://%s/deny-me.md" global) "memory://root"
          "skill://global-agents/demo/SKILL.md" "skill://bundled/journal/SKILL.md"
          "mevedel://tools/files.md" "mevedel://"
          "src/a.txt" (expand-file-name "src/a.txt" root)
          (expand-file-name "elsewhere.txt" outside) ".mevedel/shared/x.md")))

;;;; Spellings

(defun spelling-test--random-case (text)
  "Return TEXT with each letter in a random case."
  (mapconcat (lambda (c) (string (if (zerop (random 2)) (upcase c) (downcase c)))) text ""))

(defun spelling-test--escape-some (component)
  "Return COMPONENT with some unreserved characters percent-encoded.
The escapes use either hex case."
  (mapconcat (lambda (c)
               (if (and (string-match-p "[A-Za-z0-9._~-]" (string c)) (zerop (random 3)))
                   (funcall (if (zerop (random 2)) #'upcase #'downcase) (format "%%%02X" c))
                 (string c)))
             component ""))

(defun spelling-test--insert-dots (components)
  "Return COMPONENTS with a `.' or an `x/..' inserted at a random place."
  (let ((at (random (1+ (length components)))))
    (append (seq-take components at)
            (if (zerop (random 2)) (list ".") (list "x" ".."))
            (seq-drop components at))))

(defun spelling-test--respell (target &optional dots)
  "Return a random spelling of TARGET, an address or a path.
An address gets a scheme in random case and random escapes; a path
stays as it is.  With DOTS, a dot segment is inserted as well."
  (if (string-match "\\`\\([a-z]+\\)://\\(.*\\)\\'" target)
      (let ((scheme (match-string 1 target))
            (parts (split-string (match-string 2 target) "/")))
        (concat (spelling-test--random-case scheme) "://"
                (mapconcat #'spelling-test--escape-some
                           (if dots (spelling-test--insert-dots parts) parts)
                           "/")))
    (let ((absolute (file-name-absolute-p target))
          (parts (split-string target "/" t)))
      (concat (if absolute "/" "")
              (string-join (if dots (spelling-test--insert-dots parts) parts) "/")))))

;;;; Verdicts

(defun spelling-test--verdict (chat name args)
  "Return the permission decision on NAME with ARGS in CHAT's running turn.
It is `allow', `ask', `deny', or `error' when the call is refused as
malformed; the Plan verdict comes first, as in the pipeline."
  (let* ((session (mevedel-chat-session chat))
         (context (list :tool (mevedel-tool-get name) :args args :tool-use-id "toolu_spell"
                        :data-buffer (mevedel-chat-data-buffer chat) :session session)))
    (pcase (condition-case nil
               (mevedel-permissions-decide-call context session)
             (error 'error))
      ((or 'allow `(allow . ,_)) 'allow)
      ((or 'deny `(deny . ,_)) 'deny)
      (verdict verdict))))

(defun spelling-test--plan-verdict (chat name args)
  "Return Plan's own verdict on NAME with ARGS in CHAT: `allow', `deny' or nil."
  (let ((session (mevedel-chat-session chat)))
    (pcase (mevedel-plan-restriction
            (list :tool (mevedel-tool-get name) :args args :session session
                  :data-buffer (mevedel-chat-data-buffer chat))
            session)
      ('allow 'allow)
      (`(deny . ,_) 'deny)
      ('nil nil))))

(defun spelling-test--calls-on (target)
  "Return a (NAME . ARGS) for each tool call to judge on TARGET.
They are ApplyPatch's Add, Update, Delete, and Move from and to
TARGET, then a Read, a Glob and a Grep of TARGET."
  (let ((patch (lambda (&rest lines)
                 (list :patch (concat "*** Begin Patch\n" (string-join lines "\n")
                                      "\n*** End Patch")))))
    (list (cons "ApplyPatch" (funcall patch (concat "*** Add File: " target) "+new"))
          (cons "ApplyPatch" (funcall patch (concat "*** Update File: " target) "@@" "-a" "+b"))
          (cons "ApplyPatch" (funcall patch (concat "*** Delete File: " target)))
          (cons "ApplyPatch" (funcall patch (concat "*** Update File: " target)
                                      "*** Move to: work://plans/moved.md" "@@" "-a" "+b"))
          (cons "ApplyPatch" (funcall patch "*** Update File: work://plans/p.md"
                                      (concat "*** Move to: " target) "@@" "-a" "+b"))
          (list "Read" :file_path target)
          (list "Glob" :pattern "*" :path target)
          (list "Grep" :pattern "a" :path target))))

(defun spelling-test--judge-all (chat target)
  "Return the verdicts in CHAT on each `spelling-test--calls-on' TARGET.
Each is (PLAN PERMISSION): Plan's verdict and the whole decision."
  (mapcar (pcase-lambda (`(,name . ,args))
            (list (spelling-test--plan-verdict chat name args)
                  (spelling-test--verdict chat name args)))
          (spelling-test--calls-on target)))

;;;; The property

(ert-deftest mevedel-spelling:every-spelling-gets-the-canonical-verdict ()
  "Random spellings of a target of every family get its canonical verdict.
In a Plan turn and outside one, under rules that deny some files and
allow some reads, for ApplyPatch Add, Update, Delete and Move targets
and for Read, Glob and Grep."
  (random "mevedel-spelling")
  (spelling-test--with-resources
    (let ((mevedel-permissions-rules
           (append (list '(deny "*" "**/deny-me*")
                         (list 'allow "Grep" (concat outside "skills/**")))
                   mevedel-permissions-rules))
          (targets (spelling-test--targets root outside)))
      ;; The canonical forms are what the module says they are.
      (dolist (target targets)
        (when (mevedel-resource-address-p target)
          (should (equal (mevedel-resource-parse target) target))))
      (dolist (stamp (list nil (mevedel-plan-make-stamp 'sticky)))
        (mevedel-test-in-turn chat (list :id "spell" :plan-stamp stamp)
          (dolist (target targets)
            (let ((canonical (spelling-test--judge-all chat target)))
              (dotimes (_ 6)
                (let ((spelling (spelling-test--respell target)))
                  (should (equal (list spelling (spelling-test--judge-all chat spelling))
                                 (list spelling canonical)))))
              ;; A dot segment: an address is refused, a path is the same path.
              (dotimes (_ 3)
                (let* ((spelling (spelling-test--respell target t))
                       (verdicts (spelling-test--judge-all chat spelling)))
                  (if (mevedel-resource-address-p target)
                      (pcase-dolist (`(,plan ,permission) verdicts)
                        (should (equal (list spelling (and (not (eq plan 'allow))
                                                           (memq permission '(deny error))
                                                           t))
                                       (list spelling t))))
                    (should (equal (list spelling verdicts)
                                   (list spelling canonical)))))))))))
    (should-not asked)))

;;;; Plan: the bypass spellings of work://shared/

(defconst spelling-test--shared-spellings
  '("work://%73hared/" "work://sh%61red/" "WORK://shared/" "Work://%73h%61red/"
    "work://%73%68%61%72%65%64/")
  "Spellings of work://shared/ that once passed Plan's check of the text.")

(ert-deftest mevedel-spelling:plan-refuses-shared-however-spelled ()
  "Add, Update, Delete and Move into work://shared/, in any spelling, write nothing."
  (spelling-test--with-resources
    (let ((shared (expand-file-name ".mevedel/shared/" root))
          (plan (expand-file-name "plans/p.md" (mevedel-session-local-directory session))))
      (mevedel-test-in-turn chat (list :id "t" :plan-stamp (mevedel-plan-make-stamp 'sticky))
        (dolist (prefix spelling-test--shared-spellings)
          (dolist (patch
                   (list (format "*** Add File: %snew.md\n+x" prefix)
                         (format "*** Update File: %sx.md\n@@\n-a\n+changed" prefix)
                         (format "*** Delete File: %sx.md" prefix)
                         (format "*** Update File: work://plans/p.md\n*** Move to: %smoved.md\n\
@@\n-a\n+moved" prefix)
                         (format "*** Update File: %sx.md\n*** Move to: work://plans/from.md\n\
@@\n-a\n+moved" prefix)))
            (let ((result (mevedel-test-run-tool
                           chat "ApplyPatch" (format "s%d" (random 100000))
                           (list :patch (concat "*** Begin Patch\n" patch "\n*** End Patch")))))
              (should (equal (list patch (string-match-p "\\`Permission denied: Plan mode" result))
                             (list patch 0)))
              (should-not (file-exists-p (expand-file-name "new.md" shared)))
              (should-not (file-exists-p (expand-file-name "moved.md" shared)))
              (should (equal (with-temp-buffer
                               (insert-file-contents (expand-file-name "x.md" shared))
                               (buffer-string))
                             "---\nname: demo\ndescription: d\n---\na\n"))
              (should (file-exists-p plan))
              (should-not (file-exists-p (expand-file-name
                                          "plans/from.md"
                                          (mevedel-session-local-directory session)))))))
        ;; A dot segment is refused as malformed, with the reason.
        (should (string-match-p "Plan mode: ApplyPatch refused: Invalid resource address \
`work://plans/\\.\\./x\\.md`"
                                (mevedel-test-run-tool
                                 chat "ApplyPatch" "dots"
                                 (list :patch "*** Begin Patch\n*** Add File: work://plans/../x.md\n\
+x\n*** End Patch"))))
        ;; The canonical session spelling still writes, in any case.
        (should (string-match-p "Added"
                                (mevedel-test-run-tool
                                 chat "ApplyPatch" "ok"
                                 (list :patch "*** Begin Patch\n*** Add File: WORK://%70lans/q.md\n\
+q\n*** End Patch"))))
        (should (file-exists-p (expand-file-name "plans/q.md"
                                                 (mevedel-session-local-directory session))))))
    (should-not asked)))

;;;; Deny rules bind the delegated calls

(ert-deftest mevedel-spelling:deny-rules-bind-delegated-calls ()
  "Execution controls and collaboration tools never ask; a deny rule refuses them."
  (spelling-test--with-resources
    (let ((calls '(("WriteStdin" :execution_id "e1" :chars "")
                   ("StopExecution" :execution_id "e1")
                   ("ListExecutions")
                   ("SendMessage" :to "/root/a" :message "hi")
                   ("Agent" :task_name "t" :message "hi")
                   ("InterruptAgent" :path "/root/a"))))
      (dolist (stamp (list nil (mevedel-plan-make-stamp 'sticky)))
        (mevedel-test-in-turn chat (list :id "d" :plan-stamp stamp)
          (pcase-dolist (`(,name . ,args) calls)
            ;; No rule, or one that asks or allows: they run without asking.
            (dolist (rules '(nil ((ask "*")) ((allow "*"))))
              (let ((mevedel-permissions-rules rules))
                (should (equal (list name rules (spelling-test--verdict chat name args))
                               (list name rules 'allow)))))
            ;; A deny rule naming them, or every tool, refuses them.
            (dolist (rules (list (list (list 'deny name)) '((deny "*"))))
              (let ((mevedel-permissions-rules rules))
                (should (equal (list name rules (spelling-test--verdict chat name args))
                               (list name rules 'deny)))))))
        ;; Through the pipeline: refused before the handler, without a card.
        (let ((mevedel-permissions-rules '((deny "ListExecutions"))))
          (should (string-prefix-p "Permission denied: a permission rule forbids this \
ListExecutions call"
                                   (mevedel-test-run-tool chat "ListExecutions" "l" nil))))
        (should (string-match-p "No yielded"
                                (mevedel-test-run-tool chat "ListExecutions" "l2" nil)))))
    ;; A deny rule also binds Plan's own allow of a session patch.
    (let ((mevedel-permissions-rules '((deny "ApplyPatch" "**/plans/**"))))
      (mevedel-test-in-turn chat (list :id "p" :plan-stamp (mevedel-plan-make-stamp 'sticky))
        (should (string-prefix-p "Permission denied: a permission rule"
                                 (mevedel-test-run-tool
                                  chat "ApplyPatch" "denied-plan"
                                  (list :patch "*** Begin Patch\n*** Add File: work://plans/z.md\n\
+z\n*** End Patch"))))
        (should-not (file-exists-p (expand-file-name
                                    "plans/z.md" (mevedel-session-local-directory session))))))
    (should-not asked)))

;;;; Memory and skill roots outside the workspace

(ert-deftest mevedel-spelling:outside-roots-are-judged-as-their-files ()
  "A Read, Glob or Grep of a memory or skill root outside the workspace asks as its path would."
  (spelling-test--with-resources
    (let* ((global (spelling-test--memory-key (expand-file-name "memory" outside)))
           (local (spelling-test--memory-key (expand-file-name ".mevedel/memory" root)))
           (cases `((,(format "memory://%s/g.md" global) ,(expand-file-name "memory/g.md" outside))
                    (,(format "memory://%s" global) ,(expand-file-name "memory" outside))
                    ("skill://global-agents/demo/SKILL.md"
                     ,(expand-file-name "skills/demo/SKILL.md" outside))
                    ("skill://global-agents/demo" ,(expand-file-name "skills/demo" outside))
                    (,(format "memory://%s/a.md" local)
                     ,(expand-file-name ".mevedel/memory/a.md" root)))))
      (mevedel-test-in-turn chat (list :id "o")
        (pcase-dolist (`(,address ,path) cases)
          (dolist (rules (list nil
                               (list (list 'allow "Read" (concat outside "**"))
                                     (list 'allow "Glob" (concat outside "**"))
                                     (list 'allow "Grep" (concat outside "**")))
                               (list (list 'deny "*" (concat (file-name-directory path) "**")))))
            (let ((mevedel-permissions-rules rules))
              (pcase-dolist (`(,name . ,args)
                             (list (list "Read" :file_path address)
                                   (list "Glob" :pattern "*" :path address)
                                   (list "Grep" :pattern "a" :path address)))
                (let ((as-path (spelling-test--verdict
                                chat name (plist-put (copy-sequence args)
                                                     (if (equal name "Read") :file_path :path)
                                                     path))))
                  (should (equal (list address name rules
                                       (spelling-test--verdict chat name args))
                                 (list address name rules as-path))))))))
        ;; In `ask' mode, without rules, the outside ones ask and the local one runs.
        (should (eq (spelling-test--verdict chat "Read" (list :file_path (caar cases))) 'ask))
        (should (eq (spelling-test--verdict chat "Grep" (list :pattern "a" :path "memory://root"))
                    'ask))
        (should (eq (spelling-test--verdict chat "Read" (list :file_path (car (nth 4 cases))))
                    'allow))
        ;; The package's own skills are read like its docs, without asking.
        (should (eq (spelling-test--verdict chat "Read"
                                            (list :file_path "skill://bundled/journal/SKILL.md"))
                    'allow))
        ;; Through the pipeline the card names the real file.
        (should (string-match-p "description: d"
                                (mevedel-test-run-tool chat "Read" "mem"
                                                       (list :file_path (caar cases)))))
        (should (equal (plist-get (car asked) :paths)
                       (list (file-truename (expand-file-name "memory/g.md" outside)))))))))

;;;; Links

(ert-deftest mevedel-spelling:rules-judge-the-real-path-behind-a-link ()
  "A link in the workspace is judged by the file it reaches, and by its name."
  (spelling-test--with-resources
    (make-symbolic-link (directory-file-name outside) (expand-file-name "src/link" root))
    (let ((read (list :file_path "src/link/elsewhere.txt"))
          (add (list :patch "*** Begin Patch\n*** Add File: src/link/new.txt\n+x\n*** End Patch")))
      (mevedel-test-in-turn chat (list :id "l")
        ;; A deny rule on the real directory binds the link's name.
        (let ((mevedel-permissions-rules (list (list 'deny "*" (concat outside "**")))))
          (should (eq (spelling-test--verdict chat "Read" read) 'deny))
          (should (eq (spelling-test--verdict chat "ApplyPatch" add) 'deny)))
        ;; So does a deny rule on the name.
        (let ((mevedel-permissions-rules '((deny "Read" "src/link/**"))))
          (should (eq (spelling-test--verdict chat "Read" read) 'deny)))
        ;; An allow rule on the name does not cover the real file outside.
        (let ((mevedel-permissions-rules '((allow "Read" "src/**"))))
          (should (eq (spelling-test--verdict chat "Read" read) 'ask))
          (should (eq (spelling-test--verdict chat "Read" (list :file_path "src/a.txt")) 'allow)))
        ;; An allow rule on the real file does.
        (let ((mevedel-permissions-rules (list (list 'allow "Read" (concat outside "**")))))
          (should (eq (spelling-test--verdict chat "Read" read) 'allow)))))
    (should-not asked)))

;;;; The first write's storage

(ert-deftest mevedel-spelling:first-write-makes-storage-however-spelled ()
  "A first ApplyPatch to work:// in another spelling still materialises the session."
  (mevedel-test-with-view view chat
    (let ((session (mevedel-chat-session chat)))
      (ignore view)
      (mevedel-plan-enter session)
      (should-not (mevedel-session-store session))
      ;; Outside a turn: no checkpoint materialises it first.
      (should (string-match-p "Added"
                              (mevedel-test-run-tool
                               chat "ApplyPatch" "first"
                               (list :patch "*** Begin Patch\n*** Add File: WORK://%70lans/n.md\n\
+n\n*** End Patch"))))
      (should (file-exists-p (expand-file-name "plans/n.md"
                                               (mevedel-session-local-directory session))))
      (should (mevedel-session-store session)))))

(provide 'spelling-test)
;;; spelling-test.el ends here
