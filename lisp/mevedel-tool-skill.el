;;; mevedel-tool-skill.el --- The Skill tool  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Skill loads one discovered skill's instructions (mevedel-skills.el)
;; into the conversation: its result is the SKILL.md body.  A skill
;; that names allowed-tools restricts the rest of the turn's calls to
;; them.  The skill is named by its exact skill://NAME@DIGEST address
;; or its alias skill://ORIGIN/NAME; a bare name is refused with the
;; addresses that carry it, never guessed (a $skill mention in the
;; composer is how a user names one by name).

;;; Code:

(require 'cl-lib)
(require 'mevedel-pipeline)
(require 'mevedel-skills)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)

(defun mevedel-tool-skill--find (spec)
  "Return the skill the qualified address SPEC names.
A bare name signals `mevedel-skills-error' listing the addresses of
the skills that have it: the model names skills as the roster does."
  (if (mevedel-resource-address-p (string-trim spec))
      (mevedel-skills-find spec)
    (let ((named (cl-remove-if-not (lambda (s) (equal (plist-get s :name) (string-trim spec)))
                                   (mevedel-skills-list))))
      (signal 'mevedel-skills-error
              (list (if named
                        (format "name the skill by its skill:// address, not %S: %s" spec
                                (mapconcat #'mevedel-skills-address named ", "))
                      (format "%S is not a skill:// address (Read skill:// lists them)"
                              spec)))))))

(defun mevedel-tool-skill (args)
  "Return the instructions of the skill ARGS name; restrict the turn's tools.
A skill without allowed-tools restricts nothing."
  (condition-case err
      (let ((skill (mevedel-tool-skill--find (plist-get args :skill)))
            (buffer (plist-get (mevedel-pipeline-current-context) :data-buffer)))
        (when (buffer-live-p buffer)
          (mevedel-skills-restrict buffer skill))
        (list :result (mevedel-skills-instructions skill (plist-get args :arguments))
              :render-data (list :skill (mevedel-skills-address skill)
                                 :allowed-tools (plist-get skill :allowed-tools))))
    (mevedel-skills-error (concat "Error: " (cadr err)))))

(defun mevedel-tool-skill-render (_name args result render-data)
  "Render a Skill call with ARGS, RESULT and RENDER-DATA."
  (list :header (concat "Skill " (or (plist-get render-data :skill)
                                     (plist-get args :skill) "?")
                        (if-let* ((tools (plist-get render-data :allowed-tools)))
                            (format " (tools: %s)" (string-join tools ", ")) ""))
        :body (unless mevedel-tool-render-summary-only result)
        :expandable-p (and result (not (string-empty-p result)))
        :initially-collapsed-p t))

(mevedel-define-tool Skill
  :standalone t
  :category "skills"
  :groups '(skills)
  :summary "Load a skill's instructions (from the skills roster) before a task it fits."
  :description "Load the instructions of one skill listed in the skills roster of the \
prompt (or by Read skill://).  skill is its address as listed (skill://ORIGIN/NAME or the \
exact skill://NAME@DIGEST); a bare name is refused.  Follow the returned \
instructions; a skill may limit the tools of the rest of the turn."
  :args ((skill string :required "The skill's address (skill://ORIGIN/NAME or skill://NAME@DIGEST)")
         (arguments string :optional "What to apply the skill to, if anything"))
  :read-only-p t
  :function #'mevedel-tool-skill
  :renderer #'mevedel-tool-skill-render)

(provide 'mevedel-tool-skill)
;;; mevedel-tool-skill.el ends here
