;;; prompt-e2e-test.el --- What the model is told, end to end  -*- lexical-binding: t; -*-

;;; Commentary:

;; A real turn through gptel against the scripted model: the request's
;; system prompt holds the workspace's AGENTS.md and the memory index;
;; the user's @file:RANGE and $skill mentions and the environment reach
;; the request as labelled blocks; a subdirectory's AGENTS.md rides on
;; the first tool result touching it.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defconst prompt-e2e--files
  '(("AGENTS.md" . "Always answer in haiku.\n")
    ("src/AGENTS.md" . "Code in src/ uses tabs.\n")
    ("src/main.c" . "int main(void) {\n  return 0;\n}\n")
    ("notes.txt" . "line one\nline two\nline three\n")
    (".mevedel/memory/build.md" . "# Build with make -j2\n")
    (".mevedel/skills/review/SKILL.md"
     . "---\nname: review\ndescription: Review a change\n---\nLook for off-by-one errors.\n"))
  "The workspace of the scenario.")

(defun prompt-e2e--messages (entry)
  "Return the messages of log ENTRY's request, system first, as (ROLE . TEXT)."
  (let* ((body (alist-get 'body entry))
         (text (lambda (content)
                 (if (stringp content) content
                   (mapconcat (lambda (part) (or (alist-get 'text part) "")) content "")))))
    (append
     (when-let* ((system (alist-get 'system body)))
       (list (cons "system" (funcall text system))))
     (mapcar (lambda (m) (cons (alist-get 'role m) (funcall text (alist-get 'content m))))
             (alist-get 'messages body)))))

(mevedel-e2e-deftest-matrix prompt-e2e:the-request-carries-what-the-model-knows
  "AGENTS.md and the memory index in the system prompt; mentions and updates as blocks."
  (wire stream)
  (let* ((mevedel-resource-memory-roots '(".mevedel/memory"))
         (mevedel-resource-skill-roots '((local-mevedel . ".mevedel/skills")))
         (mevedel-instructions-global-directory (make-temp-file "mevedel-global-" t))
         (run (mevedel-e2e-run
               :wire wire :stream stream :files prompt-e2e--files
               :prompt "$review look at @notes.txt:2-3 and @src/main.c please"
               :steps `(((tool_calls . [((name . "Read")
                                         (arguments . ((file_path . "{{root}}src/main.c"))))]))
                        ((expect . ((results . [((contains . "Code in src/ uses tabs."))])))
                         (text . "Tabs it is."))))))
    (delete-directory mevedel-instructions-global-directory t)
    (should (eq (plist-get run :outcome) 'done))
    (let* ((first (prompt-e2e--messages (car (plist-get run :log))))
           (system (cdr (assoc "system" first)))
           (user (mapconcat #'cdr (cl-remove-if-not (lambda (m) (equal (car m) "user")) first)
                            "\n")))
      (should (string-search "Always answer in haiku." system))
      (should (string-search "memory://local-mevedel/build.md — Build with make -j2" system))
      (should (string-search "skill://local-mevedel/review — Review a change" system))
      ;; Not in the system text: the subdirectory's file, the environment.
      (should-not (string-search "uses tabs" system))
      (should-not (string-search "Git branch" system))
      (should (string-search "<context-update component=\"environment\">" user))
      (should (string-search "<attachment kind=\"file\" path=\"notes.txt\" lines=\"2-3\">" user))
      (should (string-search "     2\tline two\n     3\tline three" user))
      (should-not (string-search "line one" user))
      (should (string-search "Look for off-by-one errors." user))
      (should (string-search "<attachment kind=\"file\" path=\"src/main.c\">\n     1\tint main(void) {" user))
      (should (string-search "$review look at @notes.txt:2-3 and @src/main.c please" user)))
    ;; The second request: the same system text (the provider's cache).
    (let ((log (plist-get run :log)))
      (should (= (length log) 2))
      (should (equal (cdr (assoc "system" (prompt-e2e--messages (car log))))
                     (cdr (assoc "system" (prompt-e2e--messages (cadr log)))))))
    ;; The view shows the user's line with the mention as a chip.
    (let ((rich (plist-get run :rich-transcript)))
      (should (eq (get-text-property (string-search "@notes.txt:2-3" rich) 'face rich)
                  'mevedel-mentions-chip)))))

(provide 'prompt-e2e-test)
;;; prompt-e2e-test.el ends here
