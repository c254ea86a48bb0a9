;;; mevedel-skills.el --- Skills: discovery, roster, invocation  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A skill is a directory holding SKILL.md: YAML-like front matter
;; (name, description, allowed-tools) and then instructions.  The
;; sources are `mevedel-resource-skill-roots' (workspace .mevedel/skills,
;; .agents/skills and .claude/skills; global; bundled); discovery itself
;; is `mevedel-resource-discover-skills', shared with skill:// addresses.
;;
;; Every skill has an exact address, skill://NAME@DIGEST (DIGEST the
;; SHA-256 of its source key), and, when no other skill of its origin
;; has its name, a readable alias skill://ORIGIN/NAME.  Looking a skill
;; up never falls back: an alias or a bare name that fits two skills is
;; an error naming their exact addresses.
;;
;; The `skills-roster' prompt component lists them, bounded.  Invoking
;; a skill (the Skill tool, or $NAME in the composer) gives the model
;; its instructions; a skill with allowed-tools restricts the calls of
;; the rest of the turn to those tools (a PreToolUse function), until
;; the turn ends.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'url-util)
(require 'mevedel-core)
(require 'mevedel-prompt)
(require 'mevedel-resource)
(require 'mevedel-pipeline)

(defgroup mevedel-skills nil
  "Skills in mevedel."
  :group 'mevedel
  :prefix "mevedel-skills-")

(defcustom mevedel-skills-roster-entries 50
  "How many skills the prompt's roster lists at most."
  :type 'natnum)

;;;; Front matter

(defun mevedel-skills-parse (text)
  "Return (FRONT . BODY) of SKILL.md TEXT.
FRONT is a plist :name :description :allowed-tools (a list of tool
names, or nil for no restriction)."
  (let ((front nil) (body text))
    (when (string-match "\\`---[ \t]*\n\\(\\(?:.*\n\\)*?\\)---[ \t]*\\(?:\n\\|\\'\\)" text)
      (setq body (substring text (match-end 0)))
      (let ((key nil))
        (dolist (line (split-string (match-string 1 text) "\n"))
          (cond
           ((string-match "\\`\\([A-Za-z_-]+\\):[ \t]*\\(.*?\\)[ \t]*\\'" line)
            (setq key (intern (concat ":" (downcase (replace-regexp-in-string
                                                      "_" "-" (match-string 1 line))))))
            (let ((value (match-string 2 line)))
              (setq front (plist-put front key
                                     (if (eq key :allowed-tools)
                                         (mevedel-skills--tool-list value)
                                       (mevedel-skills--unquote value))))))
           ((and (eq key :allowed-tools) (string-match "\\`[ \t]*-[ \t]*\\(.+?\\)[ \t]*\\'" line))
            (setq front (plist-put front key (append (plist-get front key)
                                                     (list (mevedel-skills--unquote
                                                            (match-string 1 line)))))))))))
    (cons front body)))

(defun mevedel-skills--unquote (value)
  "Return VALUE without surrounding quotes."
  (if (string-match "\\`[\"']\\(.*\\)[\"']\\'" value) (match-string 1 value) value))

(defun mevedel-skills--tool-list (value)
  "Return the tool names of an allowed-tools VALUE (comma or space separated)."
  (let ((value (string-trim value "[[ \t]*" "[] \t]*")))
    (mapcar (lambda (name) (replace-regexp-in-string "(.*" "" (mevedel-skills--unquote name)))
            (split-string value "[, \t]+" t))))

;;;; Discovery

(defvar mevedel-skills--fronts (make-hash-table :test #'equal)
  "Parsed front matter by SKILL.md file: (TEXT . FRONT), TEXT compared by `eq'.")

(defun mevedel-skills--front (file stamp)
  "Return the front matter of the SKILL.md FILE, parsed once per text.
STAMP is the file's stamp."
  (let ((text (or (and stamp (mevedel-prompt-file-text file stamp)) ""))
        (cached (gethash file mevedel-skills--fronts)))
    (if (eq (car cached) text)
        (cdr cached)
      (cdr (puthash file (cons text (car (mevedel-skills-parse text))) mevedel-skills--fronts)))))

(defvar mevedel-skills--last nil
  "The last skill list: (RAW STAMPS . SKILLS), reused while both are the same.")

(defun mevedel-skills-list ()
  "Return the discovered skills as plists.
Keys: :name :origin :source-key :root :file :description :allowed-tools
:exact (skill://NAME@DIGEST) :alias (skill://ORIGIN/NAME, nil when
another skill of the origin has the name)."
  (let* ((raw (funcall mevedel-resource-skills-function))
         (files (mapcar (lambda (skill) (concat (file-name-as-directory (nth 2 skill)) "SKILL.md"))
                        raw))
         (stamps (mevedel-core-file-stamps files)))
    (if (and mevedel-skills--last (eq (car mevedel-skills--last) raw)
             (equal (cadr mevedel-skills--last) stamps))
        (cddr mevedel-skills--last)
      (let ((skills (mevedel-skills--make raw files stamps)))
        (setq mevedel-skills--last (cons raw (cons stamps skills)))
        skills))))

(defun mevedel-skills--make (raw files stamps)
  "Return the skill plists of discovered RAW skills.
FILES are their SKILL.md files and STAMPS the files' stamps."
  (let ((skills
         (cl-loop for (name source-key root origin plugin) in raw
                  for file in files
                  for stamp in stamps
                  for front = (mevedel-skills--front file stamp)
                  collect (list :name name :origin origin :plugin plugin
                                :source-key source-key :root root :file file
                                :description (plist-get front :description)
                                :allowed-tools (plist-get front :allowed-tools)
                                :exact (format "skill://%s@%s" (url-hexify-string name)
                                               (secure-hash 'sha256 source-key))))))
    (dolist (skill skills)
      (let ((twins (cl-count-if (lambda (other)
                                  (and (equal (plist-get other :name) (plist-get skill :name))
                                       (equal (plist-get other :origin) (plist-get skill :origin))
                                       (equal (plist-get other :plugin) (plist-get skill :plugin))))
                                skills)))
        (when (= twins 1)
          (plist-put skill :alias
                     (concat "skill://" (plist-get skill :origin) "/"
                             (if-let* ((plugin (plist-get skill :plugin)))
                                 (concat (url-hexify-string plugin) "/") "")
                             (url-hexify-string (plist-get skill :name)))))))
    skills))

(define-error 'mevedel-skills-error "Skill not found")

(defun mevedel-skills-find (spec &optional skills)
  "Return the skill SPEC names among SKILLS (default `mevedel-skills-list').
SPEC is an exact skill://NAME@DIGEST address, an alias
skill://ORIGIN/NAME, or a bare NAME; an address is matched in its
canonical spelling, whatever its scheme's case or escapes.  A SPEC
fitting no skill, or several, or a malformed address, signals
`mevedel-skills-error' saying which exact addresses there are; nothing
falls back to another skill."
  (let* ((skills (or skills (mevedel-skills-list)))
         (spec (string-trim spec))
         (spec (if (mevedel-resource-address-p spec)
                   (condition-case err
                       (mevedel-resource-parse spec)
                     (mevedel-core-error (signal 'mevedel-skills-error (list (cadr err)))))
                 spec))
         (matches
          (cond
           ((string-match "\\`skill://\\([^/@]+\\)@\\([0-9a-f]+\\)/?\\'" spec)
            (let ((name (url-unhex-string (match-string 1 spec))) (digest (match-string 2 spec)))
              (cl-remove-if-not (lambda (s) (and (equal (plist-get s :name) name)
                                                 (string-suffix-p (concat "@" digest)
                                                                  (plist-get s :exact))))
                                skills)))
           ((string-prefix-p "skill://" spec)
            (let ((alias (string-remove-suffix "/" spec)))
              (or (cl-remove-if-not (lambda (s) (equal (plist-get s :alias) alias)) skills)
                  ;; An alias claimed twice: name the twins.
                  (let ((parts (split-string (substring alias 8) "/")))
                    (cl-remove-if-not
                     (lambda (s) (and (equal (plist-get s :origin) (car parts))
                                      (equal (plist-get s :name)
                                             (url-unhex-string (car (last parts))))))
                     skills)))))
           (t (cl-remove-if-not (lambda (s) (equal (plist-get s :name) spec)) skills)))))
    (pcase matches
      (`(,one) one)
      ('nil (signal 'mevedel-skills-error
                    (list (format "No discovered skill is %s (Read skill:// lists them)" spec))))
      (_ (signal 'mevedel-skills-error
                 (list (format "%s fits %d skills; name one by its exact address: %s"
                               spec (length matches)
                               (mapconcat (lambda (s) (plist-get s :exact)) matches ", "))))))))

(defun mevedel-skills-address (skill)
  "Return the address SKILL is shown by: its alias, else its exact one."
  (or (plist-get skill :alias) (plist-get skill :exact)))

;;;; The roster

(defun mevedel-skills-roster (skills)
  "Return the roster text of SKILLS, or nil when there are none."
  (when skills
    (concat
     "Skills (skill://): instruction packages for particular tasks.  When one fits the "
     "task, load it before you start, through ToolCall: (Skill :skill \"ADDRESS\"); "
     "follow what it says.  Read skill://ADDRESS/FILE reads the files it ships.\n"
     (mapconcat (lambda (skill)
                  (format "- %s%s" (mevedel-skills-address skill)
                          (if-let* ((d (plist-get skill :description)))
                              (concat " — " (truncate-string-to-width d 200 nil nil "…"))
                            "")))
                (seq-take skills mevedel-skills-roster-entries) "\n")
     (if (> (length skills) mevedel-skills-roster-entries)
         (format "\n… %d more (Read skill:// lists all)"
                 (- (length skills) mevedel-skills-roster-entries))
       ""))))

(defvar mevedel-skills--roster nil
  "The last roster: (SKILLS . TEXT), SKILLS compared by `eq'.")

(defun mevedel-skills--roster-component (_chat)
  "Return the skills-roster component's text, made again when the skills changed."
  (let ((skills (mevedel-skills-list)))
    (if (eq (car mevedel-skills--roster) skills)
        (cdr mevedel-skills--roster)
      (cdr (setq mevedel-skills--roster (cons skills (mevedel-skills-roster skills)))))))

(defun mevedel-skills--resource-lines (_chat)
  "Return the skill:// roster line when a skill is there to read."
  (when (mevedel-skills-list)
    (list "- skill:// the files of the skills listed below")))

(add-hook 'mevedel-prompt-resource-roster-functions #'mevedel-skills--resource-lines -50)

(mevedel-prompt-define-component
 'skills-roster :function #'mevedel-skills--roster-component
 :budget 8000 :doc "discovered skills (`mevedel-resource-skill-roots')")

;;;; Invoking a skill

(defun mevedel-skills-instructions (skill &optional arguments)
  "Return the block giving the model SKILL's instructions.
ARGUMENTS, a string, is what the user or model passed to the skill."
  (let* ((parsed (mevedel-skills-parse (or (mevedel-prompt-file-text (plist-get skill :file)) "")))
         (tools (plist-get skill :allowed-tools)))
    (format "<skill name=\"%s\" address=\"%s\">\n%s%s%s\n</skill>"
            (plist-get skill :name) (mevedel-skills-address skill)
            (string-trim (cdr parsed))
            (if (and arguments (not (string-blank-p arguments)))
                (format "\n\nArguments: %s" arguments) "")
            (concat (format "\n\nFiles of this skill: Read %s/ lists them."
                            (mevedel-skills-address skill))
                    (if tools
                        (format "\nFor the rest of this turn only these tools run: %s."
                                (string-join tools ", "))
                      "")))))

(defvar mevedel-skills--restrictions (make-hash-table :test #'eq :weakness 'key)
  "Per data buffer: (SKILL-NAME . TOOL-NAMES) restricting its turn's calls.")

(defconst mevedel-skills--always-allowed '("Skill" "ToolSearch" "ToolCall")
  "Tools a skill's restriction never stops (ToolCall's own calls are checked).")

(defun mevedel-skills-restrict (buffer skill)
  "Restrict data BUFFER's turn to SKILL's allowed tools.
A skill without allowed-tools changes nothing."
  (when-let* ((tools (plist-get skill :allowed-tools)))
    (puthash buffer (cons (plist-get skill :name) tools) mevedel-skills--restrictions)))

(defun mevedel-skills-allowed (buffer)
  "Return the tool names permitted by the skill restriction of BUFFER's turn.
BUFFER is a data buffer; nil when no skill restricts its turn.  A
child agent spawned in that turn is bounded by them too
\(mevedel-agent.el)."
  (when-let* ((restriction (gethash buffer mevedel-skills--restrictions)))
    (append mevedel-skills--always-allowed (cdr restriction))))

(defun mevedel-skills-unrestrict (buffer)
  "End the skill restriction of data BUFFER's turn."
  (remhash buffer mevedel-skills--restrictions))

(defun mevedel-skills-pre-tool-use (context)
  "Refuse CONTEXT's call when the turn's skill does not allow its tool.
A PreToolUse function of the pipeline."
  (when-let* ((restriction (gethash (plist-get context :data-buffer)
                                    mevedel-skills--restrictions))
              (name (plist-get context :name))
              ((not (member name mevedel-skills--always-allowed)))
              ((not (member name (cdr restriction)))))
    (list :deny (format "The skill %s allows only %s for the rest of this turn"
                        (car restriction) (string-join (cdr restriction) ", ")))))

(add-hook 'mevedel-pipeline-pre-tool-use-functions #'mevedel-skills-pre-tool-use)

(defun mevedel-skills-turn-ended (chat &rest _)
  "End the skill restriction of CHAT's turn."
  (mevedel-skills-unrestrict (mevedel-prompt-chat-data-buffer chat)))

(provide 'mevedel-skills)
;;; mevedel-skills.el ends here
