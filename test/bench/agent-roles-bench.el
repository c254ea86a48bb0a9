;;; agent-roles-bench.el --- Role lookup per request  -*- lexical-binding: t; -*-

;;; Commentary:

;; What each turn pays for the role roster: `mevedel-agent-role-names'
;; (the roster the `agent-roles' prompt component lists, checked for a
;; context update) and one `mevedel-agent-role' (an Agent call), with 20
;; unchanged role files in each of the four role directories.  Only a
;; stat per directory and per file should remain once they are cached.

;;; Code:

(require 'mevedel-agent-roles)
(require 'mevedel-bench-lib)

(let* ((workspace (make-temp-file "roles-bench-ws" t))
       (home (make-temp-file "roles-bench-home" t))
       (mevedel-agent-role-directories
        (list '(workspace . ".mevedel/agents") '(workspace-claude . ".claude/agents")
              (cons 'global (expand-file-name ".mevedel/agents" home))
              (cons 'global-claude (expand-file-name ".claude/agents" home)))))
  (unwind-protect
      (progn
        (dolist (dir (list (expand-file-name ".mevedel/agents" workspace)
                           (expand-file-name ".claude/agents" workspace)
                           (expand-file-name ".mevedel/agents" home)
                           (expand-file-name ".claude/agents" home)))
          (make-directory dir t)
          (dotimes (i 20)
            (with-temp-file (expand-file-name (format "role-%02d.md" i) dir)
              (insert (format "---\nname: role-%02d\ndescription: Role %d of a bench\n\
tools: Read, Grep, Glob, Bash\nmodel: sonnet\n---\n%s\n" i i (make-string 2000 ?x))))))
        (let ((seconds (mevedel-bench-median-per-call
                        5 200 (lambda ()
                                (mevedel-agent-role-names workspace)
                                (mevedel-agent-role "role-07" workspace)))))
          (mevedel-bench-describe "role roster and one role per turn: 80 cached role files in 4 directories (20 each, 2 kB bodies)")
          (mevedel-bench-report "agent-role-lookup" (* 1e6 seconds) "us")))
    (delete-directory workspace t)
    (delete-directory home t)))

;;; agent-roles-bench.el ends here
