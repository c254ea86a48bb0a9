;;; skills-test.el --- Tests of skills and the Skill tool  -*- lexical-binding: t; -*-

;;; Commentary:

;; Discovery with two same-named skills in different sources (exact
;; locators, aliases, no fallback), front matter, the roster, the Skill
;; tool and its tool restriction.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defmacro mevedel-skills-test--with (&rest body)
  "Run BODY with `root' a workspace of test skills and `chat' its chat."
  (declare (indent 0))
  `(let* ((root (file-name-as-directory (make-temp-file "mevedel-skills-" t)))
          (mevedel-resource-skill-roots '((local-mevedel . ".mevedel/skills")
                                          (local-agents . ".agents/skills")
                                          (local-agents . ".claude/skills")))
          (chat nil))
     (pcase-dolist (`(,name . ,content)
                    '((".agents/skills/deploy/SKILL.md"
                       . "---\nname: deploy\ndescription: Deploy from .agents\nallowed-tools: Read, Grep\n---\nAGENTS DEPLOY STEPS\n")
                      (".claude/skills/deploy/SKILL.md"
                       . "---\nname: deploy\ndescription: \"Deploy from .claude\"\nallowed-tools:\n  - Bash\n---\nCLAUDE DEPLOY STEPS\n")
                      (".mevedel/skills/lint/SKILL.md"
                       . "---\nname: lint\ndescription: Lint the code\n---\nRun the linter on $ARGUMENTS.\n")
                      (".agents/skills/lint/SKILL.md"
                       . "---\nname: lint\ndescription: Lint with the agents' rules\n---\nAGENTS LINT\n")
                      ("a.txt" . "a\n")))
       (let ((file (expand-file-name name root)))
         (make-directory (file-name-directory file) t)
         (with-temp-file file (insert content))))
     (setq chat (mevedel-chat-get-create root))
     (unwind-protect (with-current-buffer (mevedel-chat-data-buffer chat) ,@body)
       (remhash (mevedel-chat-root chat) mevedel-chat--chats)
       (kill-buffer (mevedel-chat-data-buffer chat))
       (delete-directory root t))))

(defun mevedel-skills-test--named (skills name origin-dir)
  "Return the skill of SKILLS called NAME whose root is under ORIGIN-DIR."
  (cl-find-if (lambda (s) (and (equal (plist-get s :name) name)
                               (string-search origin-dir (plist-get s :root))))
              skills))

(ert-deftest mevedel-skills:front-matter ()
  (let ((parsed (mevedel-skills-parse
                 "---\nname: x\ndescription: 'Does x'\nallowed-tools: [Read, \"Bash(git:*)\"]\n---\nBody\n")))
    (should (equal (car parsed) '(:name "x" :description "Does x" :allowed-tools ("Read" "Bash"))))
    (should (equal (cdr parsed) "Body\n")))
  (should (equal (mevedel-skills-parse "No front matter") '(nil . "No front matter"))))

(ert-deftest mevedel-skills:same-name-in-two-sources ()
  (mevedel-skills-test--with
    (let* ((skills (mevedel-skills-list))
           (agents (mevedel-skills-test--named skills "deploy" ".agents"))
           (claude (mevedel-skills-test--named skills "deploy" ".claude"))
           (lint (mevedel-skills-test--named skills "lint" ".mevedel")))
      (should (= (length skills) 4))
      ;; Exact locators: the name and the SHA-256 of the source key.
      (should (equal (plist-get agents :exact)
                     (concat "skill://deploy@"
                             (secure-hash 'sha256 (plist-get agents :source-key)))))
      (should-not (equal (plist-get agents :exact) (plist-get claude :exact)))
      ;; The shared origin's alias is nobody's; lint keeps its alias.
      (should (null (plist-get agents :alias)))
      (should (null (plist-get claude :alias)))
      (should (equal (plist-get lint :alias) "skill://local-mevedel/lint"))
      (should (equal (plist-get claude :allowed-tools) '("Bash")))
      (should (equal (plist-get claude :description) "Deploy from .claude"))
      ;; Lookups never fall back.
      (should (eq (mevedel-skills-find (plist-get claude :exact) skills) claude))
      (should (eq (mevedel-skills-find "skill://local-mevedel/lint" skills) lint))
      ;; Any spelling of an address names what its canonical spelling does.
      (should (eq (mevedel-skills-find "SKILL://local-m%65vedel/%6cint" skills) lint))
      (should (eq (mevedel-skills-find (concat "Skill://"
                                               (substring (plist-get claude :exact) 8))
                                       skills)
                  claude))
      (should-error (mevedel-skills-find "skill://local-mevedel/./lint" skills)
                    :type 'mevedel-skills-error)
      ;; Same name, different origins: each alias is its own skill, the bare
      ;; name is nobody's.
      (let ((agents-lint (mevedel-skills-test--named skills "lint" ".agents")))
        (should (equal (plist-get agents-lint :alias) "skill://local-agents/lint"))
        (should (eq (mevedel-skills-find "skill://local-agents/lint" skills) agents-lint)))
      (should-error (mevedel-skills-find "lint" skills) :type 'mevedel-skills-error)
      (let ((err (should-error (mevedel-skills-find "deploy" skills) :type 'mevedel-skills-error)))
        (should (string-search (plist-get agents :exact) (cadr err)))
        (should (string-search (plist-get claude :exact) (cadr err))))
      (should-error (mevedel-skills-find "skill://local-agents/deploy" skills)
                    :type 'mevedel-skills-error)
      (should-error (mevedel-skills-find "skill://deploy@0000" skills) :type 'mevedel-skills-error)
      (should-error (mevedel-skills-find "skill://global-mevedel/lint" skills)
                    :type 'mevedel-skills-error)
      ;; The roster lists the exact addresses of the twins.
      (let ((roster (mevedel-skills-roster skills)))
        (should (string-search (concat (plist-get claude :exact) " — Deploy from .claude") roster))
        (should (string-search "skill://local-mevedel/lint — Lint the code" roster)))
      ;; The module's resolver agrees: the alias is ambiguous, the exact one reads.
      (should (string-search "ambiguous"
                             (mevedel-test-run-tool chat "Read" "call_a"
                                                    '(:file_path "skill://local-agents/deploy/SKILL.md"))))
      (should (string-search "CLAUDE DEPLOY STEPS"
                             (mevedel-test-run-tool chat "Read" "call_e"
                                                    (list :file_path (concat (plist-get claude :exact)
                                                                             "/SKILL.md"))))))))

(ert-deftest mevedel-skills:the-bundled-journal-skill ()
  (let* ((mevedel-resource-skill-roots '((bundled . "skills")))
         (skill (mevedel-skills-find "skill://bundled/journal")))
    (should (string-search "journal entry" (plist-get skill :description)))
    (should (string-search ".mevedel/journal/YYYY-MM-DDTHH:MM:SSZ-SLUG.md"
                           (mevedel-skills-instructions skill)))))

(ert-deftest mevedel-skills:the-skill-tool-loads-and-restricts ()
  (mevedel-skills-test--with
    (let* ((skills (mevedel-skills-list))
           (agents (mevedel-skills-test--named skills "deploy" ".agents"))
           (result (mevedel-test-run-tool chat "Skill" "call_s"
                                          (list :skill (plist-get agents :exact)
                                                :arguments "staging"))))
      (should (string-search "AGENTS DEPLOY STEPS" result))
      (should (string-search "Arguments: staging" result))
      (should (string-search "only these tools run: Read, Grep" result))
      ;; The rest of the turn: Bash is refused, Read runs.
      (let ((bash (mevedel-test-run-tool chat "Bash" "call_b" '(:command "echo hi" :description "say hi"))))
        (should (string-search "allows only Read, Grep" bash)))
      (should (string-search "a"
                             (mevedel-test-run-tool chat "Read" "call_r" '(:file_path "a.txt"))))
      ;; The turn's end lifts the restriction.
      (mevedel-skills-turn-ended chat)
      (should-not (gethash (mevedel-chat-data-buffer chat) mevedel-skills--restrictions))
      ;; A bare name is refused, naming the qualified addresses (issue 42).
      (let ((err (mevedel-test-run-tool chat "Skill" "call_x" '(:skill "deploy"))))
        (should (string-prefix-p "Error: name the skill by its skill:// address" err))
        (should (string-search (mevedel-skills-address agents) err)))
      ;; The alias the error names loads the skill.
      (should (string-search "AGENTS DEPLOY STEPS"
                             (mevedel-test-run-tool chat "Skill" "call_y"
                                                    (list :skill (mevedel-skills-address agents))))))))

(provide 'skills-test)
;;; skills-test.el ends here
