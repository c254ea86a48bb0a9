;;; prompt-bench.el --- Prompt assembly and composer completion  -*- lexical-binding: t; -*-

;;; Commentary:

;; prompt-assemble: what a turn start costs in the prompt: the system
;; text of a chat's first request (`mevedel-prompt-system-text') and
;; the turn's context updates (`mevedel-prompt-context-updates', run on
;; every turn), all default components, for a workspace with 5
;; instruction files, 50 memory files and 30 skills, file texts cached.
;;
;; composer-completion-10k-files: one keystroke's completion of
;; "@src/" in the composer of a 10,000-file project (the capf and the
;; completion table's candidates), the file list made by the module's
;; Glob beforehand.

;;; Code:

(require 'cl-lib)
(require 'mevedel)
(require 'mevedel-test-helpers)
(require 'mevedel-bench-lib)
(require 'mevedel-composer)
(mevedel--load)

(defun prompt-bench--write (file text)
  "Write TEXT to FILE, creating its directory."
  (make-directory (file-name-directory file) t)
  (with-temp-file file (insert text)))

(defun prompt-bench--workspace ()
  "Return a workspace of 5 instruction files, 50 memory files and 30 skills.
The memory files are 10 in each of 5 directories."
  (let ((root (file-name-as-directory (make-temp-file "mevedel-prompt-bench-" t))))
    (dolist (name '("AGENTS.md" "AGENTS.local.md"))
      (prompt-bench--write (expand-file-name name root)
                           (mapconcat (lambda (n) (format "- Rule %d: keep the build green." n))
                                      (number-sequence 1 60) "\n"))
      (prompt-bench--write (expand-file-name name mevedel-instructions-global-directory)
                           "- Prefer small commits.\n- Explain trade-offs briefly.\n"))
    (prompt-bench--write (expand-file-name "src/AGENTS.md" root) "Code in src/ uses tabs.\n")
    (dotimes (i 50)
      (prompt-bench--write (expand-file-name (format ".mevedel/memory/area-%d/topic-%02d.md" (/ i 10) i) root)
                           (format "# Topic %d: what we learned\n\nDetails %d.\n" i i)))
    (dotimes (i 30)
      (prompt-bench--write (expand-file-name (format ".mevedel/skills/skill-%02d/SKILL.md" i) root)
                           (format "---\nname: skill-%02d\ndescription: Does task %d well\n\
allowed-tools: Read, Grep\n---\nSteps for task %d.\n" i i i)))
    root))

(defun prompt-bench--assemble ()
  "Report BENCH prompt-assemble."
  (let* ((mevedel-instructions-global-directory (make-temp-file "mevedel-bench-global-" t))
         (mevedel-resource-memory-roots '(".mevedel/memory"))
         (mevedel-resource-skill-roots '((local-mevedel . ".mevedel/skills")))
         (root (prompt-bench--workspace))
         (chat (mevedel-chat-get-create root))
         (size 0)
         (per-call
          (mevedel-bench-median-per-call
           7 200 (lambda ()
                   (mevedel-prompt-reset chat)
                   (setq size (+ (length (mevedel-prompt-system-text chat))
                                 (apply #'+ (mapcar #'length
                                                    (mevedel-prompt-context-updates chat)))))))))
    (mevedel-bench-describe
     "system text and context updates of a chat's turn, all %d default components, 5 instruction \
files (4 in the system text, 1 in src/), 50 memory files in 5 directories, 30 skills, file texts cached; %d \
characters; median of 7 rounds of 200 assemblies, byte-compiled"
     (length mevedel-system-components) size)
    (mevedel-bench-report "prompt-assemble" (* 1000 per-call) "ms")
    (kill-buffer (mevedel-chat-data-buffer chat))
    (delete-directory root t)
    (delete-directory mevedel-instructions-global-directory t)))

(defun prompt-bench--completion ()
  "Report BENCH composer-completion-10k-files."
  (let* ((root (file-name-as-directory (make-temp-file "mevedel-completion-bench-" t))))
    (dotimes (d 100)
      (let ((dir (expand-file-name (format "%s/mod%02d/" (if (< d 50) "src" "lib") d) root)))
        (make-directory dir t)
        (dotimes (f 100)
          (write-region "" nil (expand-file-name (format "file%02d.el" f) dir) nil 'silent))))
    (let* ((view (mevedel root))
           (cache (mevedel-composer--cache root))
           (count 0))
      (mevedel-test-wait-until (and (not (mevedel-composer--cache-request cache))
                                    (= (length (mevedel-composer--cache-files cache)) 10000))
                               60)
      (with-current-buffer view
        (goto-char (point-max))
        (insert "look at @src/")
        (let ((per-call
               (mevedel-bench-median-per-call
                7 50 (lambda ()
                       (let ((capf (mevedel-composer-capf)))
                         (setq count (length (all-completions
                                              (buffer-substring-no-properties
                                               (nth 0 capf) (nth 1 capf))
                                              (nth 2 capf)))))))))
          (mevedel-bench-describe
           "completion of \"@src/\" in the composer of a project of %d files (5,000 under src/), \
the capf and its table's candidates (%d, bounded), from the cached file list; median of 7 rounds \
of 50 keystrokes, byte-compiled"
           (length (mevedel-composer--cache-files cache)) count)
          (mevedel-bench-report "composer-completion-10k-files" (* 1000 per-call) "ms")))
      (kill-buffer (mevedel-chat-data-buffer (mevedel-view-chat view)))
      (kill-buffer view))
    (delete-directory root t)))

(prompt-bench--assemble)
(prompt-bench--completion)

;;; prompt-bench.el ends here
