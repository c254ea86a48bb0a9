;;; mevedel-resource.el --- Resource addresses for the filesystem-shaped tools  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Resource addresses (`work://', `artifact://', `mevedel://',
;; `memory://', `skill://', `agent://', `history://' and `mcp://' (read
;; by mevedel-mcp.el), and the not yet available `shared://') name
;; mevedel-owned content in
;; Read, Glob, Grep and ApplyPatch.  The grammar, canonical spelling,
;; operation matrix, containment and the two-stage resolver are in the
;; native module (crates/mevedel-core/src/resource/); this file gathers
;; the session facts the resolver needs and exposes the Lisp API:
;;
;; - `mevedel-resource-parse': canonical form of an address, nil for an
;;   ordinary path;
;; - `mevedel-resource-prepare': stage one, before permission: an opaque
;;   attempt, or a validation error naming the address and the reason;
;; - `mevedel-resource-prepare-kept' and `mevedel-resource-take-prepared':
;;   the pipeline prepares every resource argument of a call this way
;;   and the handler takes the attempt (kept beside the address string
;;   object itself, so the arguments stay plain data);
;; - `mevedel-resource-facts': what a permission check needs to know,
;;   and `mevedel-resource-judged-paths': the real files it judges;
;; - `mevedel-resource-visit-path': the backing file of a file-backed
;;   address, for buttons in the transcript view.
;;
;; Execution (stage two) is Read, Glob and Grep in mevedel-tool-fs.el.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-session)

(declare-function project-root "project" (project))
(autoload 'url-hexify-string "url-util")

;;;; Customization

(defgroup mevedel-resource nil
  "Resource addresses used by mevedel's file tools."
  :group 'mevedel
  :prefix "mevedel-resource-")

(defcustom mevedel-resource-memory-roots '(".mevedel/memory" "~/.mevedel/memory")
  "Persistent-memory roots, highest precedence first.
A relative directory is relative to the workspace root.  A root inside a
`.mevedel' or `.agents' directory of the workspace or of the home
directory gets a readable key (local-mevedel, local-agents,
global-mevedel, global-agents) when it is the only one of its kind;
every root can also be named by the SHA-256 digest of its path."
  :type '(repeat directory))

(defcustom mevedel-resource-journal-recall-days 14
  "Days after its creation that a journal entry stays readable."
  :type 'natnum)

(defcustom mevedel-resource-skill-roots
  '((local-mevedel . ".mevedel/skills")
    (local-agents . ".agents/skills")
    (local-agents . ".claude/skills")
    (global-mevedel . "~/.mevedel/skills")
    (global-agents . "~/.agents/skills")
    (global-agents . "~/.claude/skills")
    (bundled . "skills"))
  "Where skills are discovered: an alist of (ORIGIN . DIRECTORY).
Each subdirectory of DIRECTORY holding a SKILL.md file is one skill.
Relative directories are relative to the workspace root, except for
the `bundled' origin, whose directory is relative to the package.
Claude Code's .claude/skills share the agents origins: a skill there
with the name of one in .agents/skills has no readable alias, only its
exact skill://NAME@SOURCE-KEY address."
  :type '(alist :key-type symbol :value-type directory))

(defvar mevedel-resource-skills-function #'mevedel-resource-discover-skills
  "Function returning the discovered skills.
Each skill is a list (NAME SOURCE-KEY ROOT ORIGIN PLUGIN) of strings;
ORIGIN names one of the skill:// origin aliases and PLUGIN is nil
except for plugin skills.")

(defvar mevedel-resource-session-function #'mevedel-resource-default-session
  "Function returning the current request's owners as a plist.
Keys: :session-dir (the session storage directory, or nil without a
session) and :workspace (the workspace root, or nil).")

;;;; Owners

(defconst mevedel-resource--this-directory
  (file-name-directory (file-truename (or load-file-name byte-compile-current-file
                                          buffer-file-name default-directory)))
  "Real directory of this file.")

(defun mevedel-resource-docs-directory ()
  "Return the installed docs/ directory, or nil when there is none.
The package directory is the real directory of this library (or of
its sibling source file), so symlinked build trees find the docs of the
package they belong to."
  (cl-loop for dir in (list mevedel-resource--this-directory
                            (file-name-directory
                             (directory-file-name mevedel-resource--this-directory)))
           for docs = (expand-file-name "docs" dir)
           when (file-directory-p docs) return docs))

(defun mevedel-resource--package-directory (name)
  "Return the package directory holding NAME: this library's, or its parent."
  (cl-loop for dir in (list mevedel-resource--this-directory
                            (file-name-directory
                             (directory-file-name mevedel-resource--this-directory)))
           when (file-exists-p (expand-file-name name dir)) return dir
           finally return mevedel-resource--this-directory))

(defun mevedel-resource-default-session ()
  "Return the owners of the current buffer's requests.
With a `mevedel-session-current' session, its storage directory (nil
for an ephemeral session) and workspace.  Without one there is no
session directory, and the workspace is the current project's root or
`default-directory'."
  (if (mevedel-session-p mevedel-session-current)
      (let ((dir (mevedel-session-directory mevedel-session-current)))
        (list :session-dir (and dir (directory-file-name dir))
              :workspace (directory-file-name
                          (mevedel-session-workspace mevedel-session-current))))
    (list :session-dir nil
          :workspace (directory-file-name
                      (expand-file-name
                       (or (and (fboundp 'project-current)
                                (when-let* ((p (project-current))) (project-root p)))
                           default-directory))))))

(defun mevedel-resource--kind (dir workspace)
  "Return the readable memory kind of root DIR in WORKSPACE, or nil."
  (let* ((dir (file-name-as-directory (expand-file-name dir)))
         (home (file-name-as-directory (expand-file-name "~")))
         (scope (cond ((and workspace (file-in-directory-p dir workspace)) "local")
                      ((file-in-directory-p dir home) "global")))
         (flavor (cond ((string-match-p "/\\.mevedel/" dir) "mevedel")
                       ((string-match-p "/\\.agents/" dir) "agents"))))
    (and scope flavor (concat scope "-" flavor))))

(defun mevedel-resource--memory-roots (workspace)
  "Return the memory roots for WORKSPACE as (PATH KIND LABEL) lists."
  (cl-loop for root in mevedel-resource-memory-roots
           for dir = (directory-file-name
                      (if (and workspace (not (file-name-absolute-p root))
                               (not (string-prefix-p "~" root)))
                          (expand-file-name root workspace)
                        (expand-file-name root)))
           for kind = (mevedel-resource--kind dir workspace)
           collect (list dir kind (or kind (abbreviate-file-name dir)))))

(defvar mevedel-resource--root-lists (make-hash-table :test #'equal)
  "Memory root lists by (WORKSPACE . `mevedel-resource-memory-roots').")

(defun mevedel-resource-memory-root-list (workspace)
  "Return the memory roots of WORKSPACE as (PATH KEY LABEL) lists.
KEY is the root's key in memory://KEY/PATH addresses: its readable
kind when no other root has that kind, else the SHA-256 digest of PATH
\(the module's rule).  The list is made once per workspace and setting."
  (let ((key (cons workspace mevedel-resource-memory-roots)))
    (or (gethash key mevedel-resource--root-lists)
        (puthash
         key
         (let ((roots (mevedel-resource--memory-roots workspace)))
           (cl-loop for (path kind label) in roots
                    collect (list path
                                  (if (and kind (= 1 (cl-count kind roots :key #'cadr
                                                               :test #'equal)))
                                      kind
                                    (secure-hash 'sha256 path))
                                  label)))
         mevedel-resource--root-lists))))

(defvar mevedel-resource--skill-scans (make-hash-table :test #'equal)
  "Skill discoveries by (WORKSPACE . `mevedel-resource-skill-roots').
Each value is (STAMPS . SKILLS): STAMPS the (DIRECTORY . STAMP) of
the directories looked at, which must all be the same for SKILLS to
stand.")

(defun mevedel-resource--mtime (dir)
  "Return DIR's stamp (`mevedel-core-file-stamps'), or nil when it is missing."
  (car (mevedel-core-file-stamps (list dir))))

(defun mevedel-resource-discover-skills ()
  "Return the skills found under `mevedel-resource-skill-roots'.
The source key of a skill is its origin and the real path of its
directory.  A discovery stands while none of the directories it looked
at (the roots and each skill's) changed."
  (let* ((workspace (plist-get (funcall mevedel-resource-session-function) :workspace))
         (key (cons workspace mevedel-resource-skill-roots))
         (scan (gethash key mevedel-resource--skill-scans)))
    (if (and scan (equal (mapcar #'cdr (car scan))
                         (mevedel-core-file-stamps (mapcar #'car (car scan)))))
        (cdr scan)
      (let ((stamps nil) (skills nil))
        (cl-loop for (origin . root) in mevedel-resource-skill-roots
                 for base = (if (eq origin 'bundled)
                                (mevedel-resource--package-directory root)
                              workspace)
                 for dir = (if (and base (not (file-name-absolute-p root))
                                    (not (string-prefix-p "~" root)))
                               (expand-file-name root base)
                             (expand-file-name root))
                 do (push (cons dir (mevedel-resource--mtime dir)) stamps)
                 when (file-directory-p dir)
                 do (dolist (sub (directory-files dir t "\\`[^.]"))
                      (push (cons sub (mevedel-resource--mtime sub)) stamps)
                      (when (file-exists-p (expand-file-name "SKILL.md" sub))
                        (let ((real (file-truename sub)))
                          (push (list (file-name-nondirectory sub)
                                      (format "%s:%s" origin real)
                                      real (symbol-name origin) nil)
                                skills)))))
        (cdr (puthash key (cons stamps (nreverse skills)) mevedel-resource--skill-scans))))))

(defun mevedel-resource-context ()
  "Return the resolver context of the current request."
  (let* ((owners (funcall mevedel-resource-session-function))
         (workspace (plist-get owners :workspace)))
    (list :session-dir (plist-get owners :session-dir)
          :workspace workspace
          :docs-root (mevedel-resource-docs-directory)
          :memory-roots (mevedel-resource--memory-roots workspace)
          :skills (funcall mevedel-resource-skills-function)
          :recall-days mevedel-resource-journal-recall-days)))

;;;; Addresses

(defun mevedel-resource-parse (string)
  "Return the canonical address STRING names, or nil for an ordinary path.
An already canonical STRING is returned itself (`eq').  A malformed
address or unknown scheme signals `mevedel-core-resource-error' naming
STRING and the reason."
  (mevedel-core-resource-parse string))

(defun mevedel-resource-parse-many (strings)
  "Return the canonical address of each of STRINGS (nil for paths).
One module call for all of them; a malformed address signals
`mevedel-core-resource-error'."
  (mevedel-core-resource-parse-many strings))

(defun mevedel-resource-address-p (string)
  "Return non-nil when STRING has the shape of a resource address.
It may still be malformed; `mevedel-resource-prepare' says why."
  (and (stringp string)
       ;; Most arguments are plain paths: no regexp for them.
       (string-search "://" string)
       (string-match-p "\\`[A-Za-z][A-Za-z0-9+.-]*://" string)))

(defun mevedel-resource-prepare (address operation &optional context)
  "Prepare ADDRESS for OPERATION (\"Read\", \"Glob\", \"Grep\", \"ApplyPatch\").
Return an opaque attempt that the tool handler executes after
permission.  CONTEXT defaults to `mevedel-resource-context'.  Malformed
addresses, unsupported operations and containment failures signal
`mevedel-core-resource-error' before any permission check."
  (mevedel-core-resource-prepare address operation
                                 (or context (mevedel-resource-context))))

(defvar mevedel-resource--kept (make-hash-table :test #'eq :weakness 'key)
  "Prepared attempts: address string object -> (OPERATION . ATTEMPT).")

(defun mevedel-resource-prepare-kept (address operation)
  "Prepare the string ADDRESS for OPERATION and keep the attempt for its handler.
Return the attempt.  The attempt is found again through ADDRESS itself
\(the same string object) by `mevedel-resource-take-prepared'.
Failures signal as `mevedel-resource-prepare' does."
  (let ((attempt (mevedel-resource-prepare address operation)))
    (puthash address (cons operation attempt) mevedel-resource--kept)
    attempt))

(defun mevedel-resource-take-prepared (address operation)
  "Return and forget the attempt kept for OPERATION on string ADDRESS, or nil."
  (let ((entry (gethash address mevedel-resource--kept)))
    (when (equal (car entry) operation)
      (remhash address mevedel-resource--kept)
      (cdr entry))))

(defun mevedel-resource-prepared (address operation)
  "Return the attempt kept for OPERATION on string ADDRESS, or a fresh one.
Permission judges the attempt the pipeline prepared, the one its
handler then executes; a call judged outside the pipeline prepares
anew.  Failures signal as `mevedel-resource-prepare' does."
  (let ((entry (gethash address mevedel-resource--kept)))
    (if (equal (car entry) operation)
        (cdr entry)
      (mevedel-resource-prepare address operation))))

(defun mevedel-resource-facts (attempt)
  "Return the permission facts of ATTEMPT.
See `mevedel-core-resource-attempt-facts' for the keys."
  (mevedel-core-resource-attempt-facts attempt))

(defun mevedel-resource-judged-paths (attempt)
  "Return the backing files of ATTEMPT that permission judges as ordinary paths.
Memory, skills and work://shared/ are directories the user owns (in
the workspace, the home directory or wherever configured): reaching
them is reaching those files, so rules and the inside-the-workspace
check see the real path, whatever the address's spelling.  The
session's own work:// and artifact:// storage, the packaged docs and
skills and the virtual families give none."
  (let* ((facts (mevedel-resource-facts attempt))
         (scheme (plist-get facts :scheme))
         (canonical (plist-get facts :canonical)))
    (cond
     ((equal scheme "skill")
      (let ((bundled (file-name-as-directory
                      (expand-file-name "skills" (mevedel-resource--package-directory "skills")))))
        (cl-remove-if (lambda (path) (file-in-directory-p path bundled))
                      (plist-get facts :paths))))
     ((or (equal scheme "memory")
          (equal canonical "work://shared")
          (string-prefix-p "work://shared/" canonical))
      (plist-get facts :paths)))))

(defun mevedel-resource-visit-path (address)
  "Return the backing file of the file-backed ADDRESS, or nil.
The address goes through Read preparation and containment first."
  (let ((facts (mevedel-resource-facts (mevedel-resource-prepare address "Read"))))
    (and (plist-get facts :available)
         (= (length (plist-get facts :paths)) 1)
         (car (plist-get facts :paths)))))

(defun mevedel-resource-artifact-address (file session-dir)
  "Return the artifact:// address of FILE, persisted output of SESSION-DIR.
FILE must be inside the session's tool-results/ or executions/
directory; otherwise return nil."
  (let ((rel (file-relative-name (expand-file-name file) (expand-file-name session-dir))))
    (and (string-match-p "\\`\\(tool-results\\|executions\\)/" rel)
         (concat "artifact://"
                 (mapconcat #'url-hexify-string (split-string rel "/") "/")))))

(provide 'mevedel-resource)
;;; mevedel-resource.el ends here
