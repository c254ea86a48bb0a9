;;; mevedel-composer.el --- Completion in the composer; /context and /memory  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Completion at point in the view's composer for @file and @agent
;; mentions, $skill, and scheme:// addresses (/command is the view's
;; own).  Completion reads only cached metadata, never the filesystem:
;;
;; - the project's files: one bounded list per workspace, made by the
;;   module's Glob off the main thread when a view opens, at the end of
;;   every turn and when it is older than `mevedel-composer-refresh-seconds'
;;   as completion runs (the old list serves meanwhile);
;; - skills, memory files, journal entries and manuals: gathered with
;;   that refresh.
;;
;; Completion inserts plain text; it attaches, invokes or delegates
;; nothing (that happens when the message is sent, mevedel-mentions.el).
;; A completed @file, @agent or $skill mention is bound to what it was
;; completed to (`mevedel-mentions-bind'); scheme:// addresses stay
;; plain text, always canonically encoded: one typed as it reads
;; completes to its encoded spelling.
;;
;; The composer commands /context (the prompt's components, their
;; sizes and the instruction files in effect), /memory (the memory
;; root in Dired) and /journal (a new journal entry) are here too, and
;; /learn and /clean-work, which ask the model to promote what it
;; learned into memory:// and to tidy work://shared/: an ordinary turn
;; whose every change is an ApplyPatch under the session's permissions
;; and review.  This file does not consolidate memory by itself.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'url-util)
(require 'mevedel-core)
(require 'mevedel-environment)
(require 'mevedel-instructions)
(require 'mevedel-memory)
(require 'mevedel-mentions)
(require 'mevedel-prompt)
(require 'mevedel-resource)
(require 'mevedel-skills)
(require 'mevedel-view)

(defgroup mevedel-composer nil
  "Completion in mevedel's composer."
  :group 'mevedel
  :prefix "mevedel-composer-")

(defcustom mevedel-composer-file-limit 20000
  "How many project files completion knows at most."
  :type 'natnum)

(defcustom mevedel-composer-refresh-seconds 60
  "Age after which completion refreshes the project's file list."
  :type 'number)

(defcustom mevedel-composer-candidate-limit 500
  "How many candidates one completion offers at most."
  :type 'natnum)

;;;; Cached metadata

(cl-defstruct (mevedel-composer--cache (:constructor mevedel-composer--cache-make)
                                       (:copier nil))
  "What completion knows about one workspace."
  (files []) time request skills addresses)

(defvar mevedel-composer--caches (make-hash-table :test #'equal)
  "Completion metadata per workspace root (a directory name).")

(defconst mevedel-composer--schemes
  '("mevedel://" "work://" "work://shared/" "artifact://" "memory://" "skill://" "history://")
  "Address prefixes offered first.")

(defun mevedel-composer--cache (root)
  "Return the completion cache of workspace ROOT, made if needed."
  (or (gethash root mevedel-composer--caches)
      (puthash root (mevedel-composer--cache-make) mevedel-composer--caches)))

(defun mevedel-composer--addresses (root)
  "Return the addresses of ROOT's resources, for completion.
Each is written canonically: a file name's spaces, non-ASCII letters
and other reserved characters are percent-encoded, as the resolver
expects them."
  (let ((workspace (directory-file-name root)))
    (append
     (list "memory://root" "memory://journal/" "history://root" "history://saved")
     (cl-loop for (path key _) in (mevedel-resource-memory-root-list workspace)
              collect (format "memory://%s/" key)
              append (mapcar (lambda (file)
                               (format "memory://%s/%s" key (mevedel-prompt-hexify file)))
                             (mevedel-memory-root-files path)))
     (mapcar #'mevedel-memory-journal-address (mevedel-memory-journal-names root))
     (when-let* ((docs (mevedel-resource-docs-directory)))
       (mapcar (lambda (file)
                 (concat "mevedel://" (mevedel-prompt-hexify (file-relative-name file docs))))
               (directory-files-recursively docs "\\.md\\'"))))))

(defun mevedel-composer-refresh (root &optional on-done)
  "Refresh the completion metadata of workspace ROOT in the background.
The file list comes from the module's Glob (none for a remote ROOT);
ON-DONE, if non-nil, is called once it is in.  A refresh still running
is not started again."
  (let ((cache (mevedel-composer--cache root)))
    (unless (mevedel-composer--cache-request cache)
      (setf (mevedel-composer--cache-time cache) (float-time))
      (let ((default-directory root))
        (setf (mevedel-composer--cache-skills cache) (mevedel-skills-list)
              (mevedel-composer--cache-addresses cache) (mevedel-composer--addresses root)))
      (if (file-remote-p root)
          ;; A remote tree is not walked for completion: file names
          ;; complete as typed, through TRAMP.
          (when on-done (funcall on-done))
	(setf (mevedel-composer--cache-request cache)
              (mevedel-core-search-glob
               (directory-file-name root) "" "**/*" 10000
               (lambda (status value)
		 (setf (mevedel-composer--cache-request cache) nil)
		 (when (eq status 'ok)
                   (let ((files (split-string (plist-get value :text) "\n" t)))
                     (setf (mevedel-composer--cache-files cache)
                           (vconcat (seq-take (cl-remove-if (lambda (f) (string-prefix-p "(" f))
                                                            files)
                                              mevedel-composer-file-limit)))))
		 (when on-done (funcall on-done)))))))))

(defun mevedel-composer--fresh-cache (root)
  "Return ROOT's cache, starting a refresh when it is old."
  (let ((cache (mevedel-composer--cache root)))
    (when (> (- (float-time) (or (mevedel-composer--cache-time cache) 0))
             mevedel-composer-refresh-seconds)
      (mevedel-composer-refresh root))
    cache))

;;;; Candidates

(defun mevedel-composer--take (prefix strings)
  "Return the STRINGS that start with PREFIX, in order.
At most `mevedel-composer-candidate-limit' of them."
  (let ((out nil) (n 0))
    (catch 'full
      (seq-doseq (s strings)
        (when (string-prefix-p prefix s)
          (push s out)
          (when (>= (cl-incf n) mevedel-composer-candidate-limit) (throw 'full nil)))))
    (nreverse out)))

(defun mevedel-composer-candidates (root kind prefix)
  "Return the completions of PREFIX for KIND in workspace ROOT.
KIND is `file' (@: files and agents), `skill' ($) or `address'
\(scheme://).  Only cached metadata is read."
  (let ((cache (mevedel-composer--fresh-cache root)))
    (pcase kind
      ('file (append (mevedel-composer--take prefix (mevedel-mentions-agent-names))
                     (mevedel-composer--take prefix (mevedel-composer--cache-files cache))))
      ('skill (mevedel-composer--take
               prefix (delete-dups (mapcar (lambda (s) (plist-get s :name))
                                           (mevedel-composer--cache-skills cache)))))
      ('address
       (if (not (string-match-p "://" prefix))
           (mevedel-composer--take prefix mevedel-composer--schemes)
         (mevedel-composer--take
          prefix
          (if (string-prefix-p "skill://" prefix)
              ;; Readable aliases; exact locators once @ is typed or
              ;; when a skill has no alias.
              (mapcar (lambda (s) (if (or (string-search "@" prefix) (null (plist-get s :alias)))
                                      (plist-get s :exact)
                                    (plist-get s :alias)))
                      (mevedel-composer--cache-skills cache))
            (mevedel-composer--cache-addresses cache))))))))

(defun mevedel-composer-capf ()
  "Complete @file, @agent, $skill and scheme:// addresses in the composer."
  (when (and mevedel-view--composer (>= (point) mevedel-view--composer))
    (let* ((start (save-excursion
                    (skip-chars-backward "^ \t\n(" mevedel-view--composer)
                    (point)))
           (token (buffer-substring-no-properties start (point)))
           (root (file-name-as-directory default-directory)))
      (cond
       ((string-prefix-p "@" token)
        (let ((candidates (mevedel-composer-candidates root 'file (substring token 1))))
          (list (1+ start) (point) candidates
                :exclusive 'no :annotation-function
                (lambda (c) (if (member c (mevedel-mentions-agent-names))
                                "  agent" ""))
                :exit-function (mevedel-composer--binder root candidates))))
       ((string-prefix-p "$" token)
        (let ((candidates (mevedel-composer-candidates root 'skill (substring token 1))))
          (list (1+ start) (point) candidates
                :exclusive 'no :annotation-function (lambda (_) "  skill")
                :exit-function (mevedel-composer--binder root candidates))))
       ((string-match-p "\\`[a-z][a-z+.-]*:" token)
        (let* ((canonical (mevedel-composer-canonical-spelling token))
               (candidates (mevedel-composer-candidates root 'address canonical)))
          (and candidates
               (list start (point) (mevedel-composer-address-table candidates)
                     :exclusive 'no))))))))

(defun mevedel-composer-canonical-spelling (typed)
  "Return TYPED, the start of an address, spelled as the resolver spells it.
What follows scheme:// is percent-encoded where the canonical address
is (a space, a non-ASCII letter, a colon in a journal entry's name);
what is already encoded stays so, and so does the @ of a skill's
exact locator; the URI after mcp://SERVER/ is encoded as one
name.  An incomplete escape at the end is left as typed."
  (if (string-match "\\`\\([a-z][a-z0-9+.-]*://\\)\\(.*?\\)\\(%[0-9A-Fa-f]?\\)?\\'" typed)
      (let ((scheme (match-string 1 typed))
            (tail (match-string 2 typed))
            (escape (or (match-string 3 typed) "")))
        (concat scheme
                (let ((separator (if (equal scheme "skill://") "[/@]" "/"))
                      (start 0) (out nil))
                  (while (and (string-match separator tail start)
                              ;; An MCP resource's URI is one name.
                              (not (and (equal scheme "mcp://") out)))
                    (push (mevedel-composer--encode-part (substring tail start (match-beginning 0)))
                          out)
                    (push (match-string 0 tail) out)
                    (setq start (match-end 0)))
                  (push (mevedel-composer--encode-part (substring tail start)) out)
                  (apply #'concat (nreverse out)))
                escape))
    typed))

(defun mevedel-composer--encode-part (part)
  "Return PART, one name of an address, percent-encoded once."
  (url-hexify-string (decode-coding-string (url-unhex-string part) 'utf-8)))

(defun mevedel-composer-address-table (candidates)
  "Return the completion table of CANDIDATES, canonical addresses.
The address typed is matched as its canonical spelling, so typing a
name as it reads (café, 10:30) completes to the address the resolver
takes (caf%C3%A9, 10%3A30), and that is what is inserted: plain text,
never a decoded form."
  (lambda (string pred action)
    (if (eq (car-safe action) 'boundaries)
        nil
      (let ((canonical (mevedel-composer-canonical-spelling string)))
        (complete-with-action action candidates
                              (if (and (not (equal canonical string))
                                       (not (try-completion string candidates pred)))
                                  canonical
                                string)
                              pred)))))

(defun mevedel-composer--binder (root candidates)
  "Return the completion exit function binding a mention of CANDIDATES.
A completed @NAME or $NAME keeps the locator it was completed to: the
agent, the file of workspace ROOT, or the skill (by its exact address
when one skill has the name), see `mevedel-mentions-bind'."
  (lambda (string status)
    (let ((start (- (point) (length string) 1)))
      (when (and status (member string candidates) (>= start (point-min))
                 (memq (char-after start) '(?@ ?$)))
        (mevedel-mentions-bind
         start (point)
         (cond
          ((eq (char-after start) ?$)
           (let ((skills (cl-remove-if-not
                          (lambda (s) (equal (plist-get s :name) string))
                          (mevedel-composer--cache-skills (mevedel-composer--cache root)))))
             (append (list :kind 'skill :name string)
                     (and (= (length skills) 1)
                          (list :spec (plist-get (car skills) :exact))))))
          ((member string (mevedel-mentions-agent-names)) (list :kind 'agent :name string))
          (t (list :kind 'file :file (expand-file-name string root)))))))))

(defun mevedel-composer--setup (view)
  "Set up completion in the VIEW buffer; refresh its workspace's metadata.
The environment's git facts are looked for too, so that the first turn
has them."
  (with-current-buffer view
    (add-hook 'completion-at-point-functions #'mevedel-composer-capf nil t)
    (let ((root (file-name-as-directory default-directory)))
      (mevedel-composer-refresh root)
      (mevedel-environment-refresh root))))

(add-hook 'mevedel-view-open-functions #'mevedel-composer--setup)

(defun mevedel-composer--turn-ended (chat &rest _)
  "Refresh the completion metadata of CHAT's workspace after a turn.
A child agent's chat has no composer: its turns refresh nothing."
  (unless (mevedel-chat-agent chat)
    (mevedel-composer-refresh (mevedel-prompt-workspace chat))))

(add-hook 'mevedel-chat-idle-functions #'mevedel-composer--turn-ended)

;;;; /context, /memory and /journal

(defun mevedel-composer-context (chat _argument)
  "Show what CHAT's model is told: components, sizes, instruction files (/context)."
  (let ((report (mevedel-prompt-report chat))
        (files (mevedel-instructions-in-effect chat)))
    (with-help-window "*mevedel context*"
      (princ report)
      (princ "\n\nInstruction files in effect:\n")
      (if files
          (dolist (file files)
            (princ (format "  %s (%d chars)\n" (abbreviate-file-name file)
                           (length (or (mevedel-prompt-file-text file) "")))))
        (princ "  none\n")))))

(defun mevedel-composer-memory (chat _argument)
  "Open CHAT's first memory root in Dired, creating it if needed (/memory)."
  (let ((root (car (car (mevedel-resource-memory-root-list
                         (directory-file-name (mevedel-prompt-workspace chat)))))))
    (unless root (user-error "No memory roots are configured (`mevedel-resource-memory-roots')"))
    (make-directory root t)
    (dired-other-window root)))

(defun mevedel-composer-journal (chat argument)
  "Open a new journal entry of CHAT's workspace about ARGUMENT (/journal)."
  (mevedel-memory-journal-new (mevedel-prompt-workspace chat)
                              (if (string-blank-p argument)
                                  (read-string "Journal entry about: ")
                                argument)))

(defun mevedel-composer--focus (argument)
  "Return the sentence focusing a task on ARGUMENT, or nil when it is blank."
  (unless (string-blank-p argument)
    (format "  Focus on: %s." (string-trim argument))))

(defun mevedel-composer-learn-task (argument)
  "Return the model's task for /learn with ARGUMENT (what to learn)."
  (concat "Promote what this session learned into persistent memory.  First Grep "
          "memory://root for topics that already cover it and update the one that fits "
          "(ApplyPatch on its memory://KEY/FILE address) instead of adding a near-duplicate; "
          "add a topic file only for new ground.  Keep lasting knowledge (how the project "
          "works, decisions and their reasons, pitfalls and how to avoid them), not a log "
          "of this session.  Say in one line per change what you kept."
          (mevedel-composer--focus argument)))

(defun mevedel-composer-clean-work-task (argument)
  "Return the model's task for /clean-work with ARGUMENT (a focus)."
  (concat "Clean up the workspace's working notes under work://shared/.  List them "
          "(Read work://shared), read each one, and first move any lasting knowledge into "
          "memory (ApplyPatch on a memory://KEY/FILE address, updating an existing topic "
          "when one fits); then delete, keep or condense the note, preferring deletion "
          "for notes whose work is done.  Keep notes an unfinished task still relies on.  "
          "Make every change with ApplyPatch, and end with one line per note saying what "
          "happened to it."
          (mevedel-composer--focus argument)))

(defun mevedel-composer--send-task (chat task)
  "Send TASK as CHAT's next turn, or say why it cannot start now."
  (when (mevedel-chat-busy-p chat)
    (user-error "The model is working; run this again when the turn has ended"))
  (mevedel-chat-send chat task))

(defun mevedel-composer-learn (chat argument)
  "Ask CHAT's model to promote what it learned into memory (/learn [WHAT]).
ARGUMENT, the WHAT, narrows it; blank, the whole session counts."
  (mevedel-composer--send-task chat (mevedel-composer-learn-task argument)))

(defun mevedel-composer-clean-work (chat argument)
  "Ask CHAT's model to tidy work://shared/ (/clean-work [FOCUS]).
ARGUMENT, the FOCUS, narrows it; blank, every note is reviewed."
  (mevedel-composer--send-task chat (mevedel-composer-clean-work-task argument)))

(mevedel-view-register-slash-command "learn"
  #'mevedel-composer-learn "save what was learned to memory:// (/learn [WHAT])")
(mevedel-view-register-slash-command "clean-work"
  #'mevedel-composer-clean-work "tidy the notes in work://shared/ (/clean-work [FOCUS])")
(mevedel-view-register-slash-command "journal"
  #'mevedel-composer-journal "write a journal entry yourself (/journal SLUG)")
(mevedel-view-register-slash-command "context"
  #'mevedel-composer-context
  "show the prompt's components, their sizes and the instruction files")
(mevedel-view-register-slash-command "memory"
  #'mevedel-composer-memory "open the memory root in Dired")

(provide 'mevedel-composer)
;;; mevedel-composer.el ends here
