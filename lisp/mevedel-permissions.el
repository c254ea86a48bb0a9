;;; mevedel-permissions.el --- Permission modes, rules and decisions  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Whether a tool call may run without asking.
;;
;; A permission mode sets the default: `ask' (read-only tools inside
;; the workspace run, everything else asks), `edits' (file edits inside
;; the workspace run as well) and `full-auto' (everything runs).
;;
;; Rules override the mode.  A rule is (ACTION TOOL [GLOB...]) with
;; ACTION `allow', `ask' or `deny', TOOL a tool name or "*", and
;; optional path globs (`*' within a path component, `**' across
;; components; relative globs are matched against paths relative to
;; the workspace).  A rule without globs matches every call of TOOL.
;; With globs, an ask or deny rule matches when one of the call's paths
;; matches one of them, an allow rule only when all of them do.  Among matching rules deny beats ask beats allow.
;;
;; Rules come from `mevedel-permission-rules', from the workspace's
;; .mevedel/permissions.el (a list of rules, read as data, never
;; evaluated), and from this session's "always" answers.
;;
;; `mevedel-permissions-decide' returns `allow', `ask' or `deny'.  The
;; view asks with an inline card (see mevedel-view.el); headless runs
;; treat `ask' as `deny'.

;;; Code:

(require 'cl-lib)
(require 'subr-x)

(defgroup mevedel-permissions nil
  "Which tool calls run without asking."
  :group 'mevedel
  :prefix "mevedel-permission-")

(defconst mevedel-permission-modes '(ask edits full-auto)
  "The permission modes.")

(defcustom mevedel-permission-mode 'ask
  "Default permission mode of new sessions.
`ask': read-only tools run inside the workspace; anything else asks.
`edits': file edits inside the workspace run as well.
`full-auto': every call runs unless a rule says otherwise."
  :type '(choice (const ask) (const edits) (const full-auto)))

(defcustom mevedel-permission-rules nil
  "Permission rules for every workspace, each (ACTION TOOL [GLOB...]).
ACTION is `allow', `ask' or `deny'; TOOL is a tool name or \"*\";
each GLOB matches file paths (`*' within a component, `**' across).
Among the rules that match a call, deny beats ask beats allow.
Example: ((deny \"Bash\") (allow \"Read\" \"/usr/share/doc/**\"))."
  :type '(repeat (cons (choice (const allow) (const ask) (const deny))
                       (cons string (repeat string)))))

(defcustom mevedel-permission-workspace-file ".mevedel/permissions.el"
  "File, relative to a workspace root, holding that workspace's rules."
  :type 'string)

(defconst mevedel-permissions--rank '((deny . 3) (ask . 2) (allow . 1))
  "Precedence of rule actions.")

;;;; Rules

(defun mevedel-permissions-check-rule (rule)
  "Signal an error naming the problem unless RULE is well formed."
  (pcase rule
    (`(,action ,tool . ,globs)
     (unless (memq action '(allow ask deny))
       (error "Permission rule %S: action must be allow, ask or deny" rule))
     (unless (and (stringp tool) (not (string-empty-p tool)))
       (error "Permission rule %S: tool must be a non-empty string" rule))
     (unless (cl-every #'stringp globs)
       (error "Permission rule %S: globs must be strings" rule)))
    (_ (error "Permission rule %S is not (ACTION TOOL [GLOB...])" rule)))
  rule)

(defun mevedel-permissions-workspace-rules (root)
  "Return the rules in ROOT's workspace permission file, or nil.
The file holds one list of rules; it is read, never evaluated."
  (let ((file (expand-file-name mevedel-permission-workspace-file root)))
    (when (file-readable-p file)
      (let ((rules (with-temp-buffer
                     (insert-file-contents file)
                     (condition-case err
                         (read (current-buffer))
                       (error (error "Cannot read %s: %s" file (error-message-string err)))))))
        (unless (listp rules)
          (error "%s must hold a list of rules" file))
        (mapc #'mevedel-permissions-check-rule rules)))))

(defun mevedel-permissions-glob-regexp (glob)
  "Return a regexp matching the paths GLOB matches."
  (let ((i 0) (n (length glob)) (parts nil))
    (while (< i n)
      (let ((c (aref glob i)))
        (cond
         ((and (eq c ?*) (< (1+ i) n) (eq (aref glob (1+ i)) ?*))
          (if (and (< (+ i 2) n) (eq (aref glob (+ i 2)) ?/))
              (progn (push "\\(?:.*/\\)?" parts) (cl-incf i 3))
            (push ".*" parts) (cl-incf i 2)))
         ((eq c ?*) (push "[^/]*" parts) (cl-incf i))
         ((eq c ??) (push "[^/]" parts) (cl-incf i))
         (t (push (regexp-quote (string c)) parts) (cl-incf i)))))
    (concat "\\`" (apply #'concat (nreverse parts)) "\\'")))

(defun mevedel-permissions--glob-match-p (glob path root)
  "Return non-nil when GLOB matches PATH; relative globs are under ROOT."
  (let* ((absolute (expand-file-name path root))
         (regexp (mevedel-permissions-glob-regexp
                  (if (file-name-absolute-p glob) (expand-file-name glob) glob))))
    (or (string-match-p regexp absolute)
        (and (not (file-name-absolute-p glob))
             (file-in-directory-p absolute root)
             (string-match-p regexp (file-relative-name absolute root))))))

(defun mevedel-permissions--rule-matches-p (rule tool paths root)
  "Return non-nil when RULE matches a call of TOOL on PATHS under ROOT."
  (pcase-let ((`(,action ,rule-tool . ,globs) rule))
    (and (or (equal rule-tool "*") (equal rule-tool tool))
         (or (null globs)
             (and paths
                  (funcall (if (eq action 'allow) #'cl-every #'cl-some)
                           (lambda (path)
                             (cl-some (lambda (glob)
                                        (mevedel-permissions--glob-match-p glob path root))
                                      globs))
                           paths))))))

(defun mevedel-permissions-rule-decision (rules tool paths root)
  "Return the strongest action among RULES matching TOOL on PATHS, or nil.
ROOT is the workspace root for relative globs."
  (let ((best nil))
    (dolist (rule rules)
      (when (and (mevedel-permissions--rule-matches-p rule tool paths root)
                 (> (alist-get (car rule) mevedel-permissions--rank)
                    (alist-get best mevedel-permissions--rank 0)))
        (setq best (car rule))))
    best))

;;;; Decisions

(cl-defun mevedel-permissions-decide (tool &key paths root (mode mevedel-permission-mode)
                                          read-only-p edits-p session-rules)
  "Return `allow', `ask' or `deny' for a call of TOOL.
PATHS are the files the call touches; ROOT is the workspace root.
MODE is the permission mode.  READ-ONLY-P says the tool only reads;
EDITS-P says it edits files (and nothing else).  SESSION-RULES are
rules added by this session's \"always\" answers.  Rules from
`mevedel-permission-rules' and the workspace file apply first; the
mode decides when no rule matches."
  (unless (memq mode mevedel-permission-modes)
    (error "Unknown permission mode %S (expected one of %S)" mode mevedel-permission-modes))
  (let* ((root (file-name-as-directory (expand-file-name (or root default-directory))))
         (rules (append (mapcar #'mevedel-permissions-check-rule mevedel-permission-rules)
                        (mevedel-permissions-workspace-rules root)
                        session-rules))
         (inside (cl-every (lambda (path)
                             (file-in-directory-p (expand-file-name path root) root))
                           paths)))
    (or (mevedel-permissions-rule-decision rules tool paths root)
        (pcase mode
          ('full-auto 'allow)
          ('edits (if (and (or read-only-p edits-p) inside) 'allow 'ask))
          (_ (if (and read-only-p inside) 'allow 'ask))))))

(defun mevedel-permissions-refusal (tool how)
  "Return the result text the model sees when a call of TOOL is refused.
HOW is `rule' (a deny rule), `user' (the user said no) or
`headless' (nobody could be asked)."
  (format "Permission denied: %s"
          (pcase how
            ('rule (format "a permission rule forbids this %s call. \
Do not retry it; choose another approach or ask the user." tool))
            ('user (format "the user declined this %s call. \
Do not retry it unchanged; ask the user how to proceed." tool))
            (_ (format "this %s call needs approval and nobody can approve it in \
a headless run (use --permission-mode or an allow rule)." tool)))))

(provide 'mevedel-permissions)
;;; mevedel-permissions.el ends here
