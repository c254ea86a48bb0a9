;;; agent-roles-stub.el --- Stand-ins for mevedel-agent-roles.el  -*- lexical-binding: t; -*-

;;; Commentary:

;; Until the roles helper's mevedel-agent-roles.el is merged, the agent
;; runtime's tests use these: the default role only, no tiers.  Each is
;; defined only when the real one is missing.

;;; Code:

(require 'subr-x)

(unless (fboundp 'mevedel-agent-role)
  (defun mevedel-agent-role (name _directory)
    "Return nil for the default role NAME (nil); refuse any other."
    (when name (user-error "Unknown agent role %s" name))))

(unless (fboundp 'mevedel-agent-role-names)
  (defun mevedel-agent-role-names (_directory)
    "Return no role names: only the default role exists here."
    nil))

(unless (fboundp 'mevedel-agent-resolve-model)
  (defun mevedel-agent-resolve-model (_spec _workload inherited)
    "Return INHERITED: there are no tiers here."
    inherited))

(unless (fboundp 'mevedel-agent-tier-names)
  (defun mevedel-agent-tier-names ()
    "Return no tier names."
    nil))

(unless (fboundp 'mevedel-agent-parse-verdict)
  (defun mevedel-agent-parse-verdict (text)
    "Return the verdict of TEXT's last line, or nil."
    (let ((last (car (last (split-string (string-trim (or text "")) "\n")))))
      (and last (string-match "\\`VERDICT: \\(PASS\\|FAIL\\|PARTIAL\\)\\'" last)
           (match-string 1 last)))))

(provide 'agent-roles-stub)
;;; agent-roles-stub.el ends here
