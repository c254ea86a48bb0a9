;;; mevedel-tool-patch.el --- ApplyPatch: atomic edits of files  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The file editing tool: the declaration of ApplyPatch, its handler,
;; the syncing of buffers that visit the files it changes, and its row
;; renderer.  The native module does the work (crates/mevedel-core/src/patch/): it parses
;; the patch, reads every target, matches every hunk and computes
;; every result in memory (a plan), then writes all files or none.
;; This file decides where each authored path points and what may be
;; touched, and keeps Emacs's buffers in step with the files.
;;
;; A call goes:
;;
;; 1. Targets (`mevedel-tool-patch--targets'), for permission (the
;;    tool's :get-paths, which pins them for the handler: a path that
;;    reaches another file by execution is refused, never followed):
;;    every path of the patch, Move destinations included.  An ordinary path is relative
;;    to the session's working directory unless absolute; a resource
;;    address (work://..., memory://KEY/FILE) is prepared for the
;;    ApplyPatch operation, so the operation matrix refuses other
;;    families, and its backing file is what permission judges.
;;    Paths inside a .git directory, the workspace's .mevedel/ and
;;    `mevedel-tool-patch-protected-files' are refused.  Nothing has
;;    been read yet.
;; 2. Permission is the ordinary policy: ApplyPatch is a :snapshot-p
;;    edit, so `edits' and `full-auto' apply inside the workspace and
;;    `ask' asks through the session's prompter.  A review card plans
;;    with `mevedel-tool-patch-plan-for-review' and approves once the
;;    user settles; the handler then takes that review's plan,
;;    selection and feedback (`mevedel-patch-review-take') instead of
;;    planning again, and refuses a reviewed call whose review is gone.
;; 3. The handler plans (`mevedel-core-patch-plan'), refuses the whole
;;    patch when a file it changes is visited by a buffer with unsaved
;;    changes, applies (`mevedel-core-patch-apply') and syncs visiting
;;    buffers (`mevedel-tool-patch--sync'): an unmodified buffer gets
;;    the new text in place as one undo step, keeping point, window
;;    starts and narrowing, and stays unmodified; a moved file's
;;    buffer follows it; a deleted file's buffer is left as it is.
;;
;; The model reads one line per file (`Updated lisp/a.el (+3 -1)'),
;; with authored paths, plus what a review rejected or edited and the
;; user's feedback.  The row shows `Edited 3 files (+12 −4)' over the
;; unified diff (render-data :kind patch, one block per file).  The
;; manual is docs/tools/applypatch.md (mevedel://tools/applypatch.md).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-pipeline)
(require 'mevedel-remote)
(require 'mevedel-resource)
(require 'mevedel-session)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)
(require 'mevedel-patch-review)
(require 'mevedel-plan)
(require 'mevedel-memory)


;;;; Customization

(defgroup mevedel-tool-patch nil
  "ApplyPatch, the tool that edits files."
  :group 'mevedel-tool
  :prefix "mevedel-tool-patch-")

(defcustom mevedel-tool-patch-protected-files
  '("~/.bashrc" "~/.bash_profile" "~/.bash_login" "~/.bash_logout" "~/.profile"
    "~/.zshrc" "~/.zshenv" "~/.zprofile" "~/.zlogin" "~/.zlogout" "~/.config/fish/"
    "~/.emacs" "~/.emacs.el" "~/.emacs.d/init.el" "~/.emacs.d/early-init.el"
    "~/.config/emacs/" "~/.gitconfig" "~/.config/git/" "~/.ssh/" "~/.gnupg/"
    "~/.netrc" "~/.authinfo" "~/.authinfo.gpg" "~/.aws/" "~/.config/gh/")
  "Files ApplyPatch never changes: startup files, configuration, credentials.
A name ending in / protects everything below that directory.  A
patch naming one of them (or a link to one) is refused before any
file is read."
  :type '(repeat string))

(defcustom mevedel-tool-patch-buffer-update-seconds 1.0
  "Seconds an in-place update of a visiting buffer may spend on minimal edits.
Past it, the buffer's text is replaced whole (still as one undo
step), which may move point; see `replace-buffer-contents'."
  :type 'number)

(define-error 'mevedel-tool-patch-error "ApplyPatch error")

;;;; Targets

(defun mevedel-tool-patch--fail (format-string &rest args)
  "Signal `mevedel-tool-patch-error' with FORMAT-STRING and ARGS."
  (signal 'mevedel-tool-patch-error (list (apply #'format format-string args))))

(defun mevedel-tool-patch--truenames (files)
  "Return FILES with links resolved, as `mevedel-core-truenames' does.
Remote FILES are resolved on their host, through TRAMP."
  (let ((local (mevedel-core-truenames (cl-remove-if #'mevedel-remote-p files))))
    (mapcar (lambda (file)
              (if (mevedel-remote-p file)
                  (mevedel-remote-call file (lambda () (file-truename file)))
                (pop local)))
            files)))

;; Links are resolved by the module, every name of a patch in one call:
;; `file-truename' costs a Lisp step per component and would make the
;; protected list alone cost milliseconds per patch.

(defun mevedel-tool-patch--journal-entry-p (real state)
  "Return non-nil when REAL names a new entry of the journal in STATE.
STATE is the workspace's .mevedel/ directory; an entry sits directly
in its journal/ and has a journal entry's name."
  (and (equal (file-name-directory real) (concat state "journal/"))
       (mevedel-memory-journal-entry-name-p (file-name-nondirectory real))))

(defun mevedel-tool-patch--protection (file real state protected &optional add-only)
  "Return why FILE (links resolved: REAL) may not be patched, or nil.
STATE is the workspace's .mevedel/ directory, links resolved, for an
ordinary path (nil for a resource's backing file): then it and any
.git directory are refused as well, except, with ADD-ONLY (the patch
only adds FILE), a new journal entry.  PROTECTED is the resolved
`mevedel-tool-patch-protected-files', directories ending in a slash."
  (cond
   ((and state (cl-some (lambda (name) (member ".git" (split-string name "/" t)))
                        (list file real)))
    "it is inside a .git directory, the repository's own data")
   ((and state add-only (mevedel-tool-patch--journal-entry-p real state))
    nil)
   ((and state (string-prefix-p state (file-name-as-directory real)))
    "it is inside the workspace's .mevedel/ directory, mevedel's own state \
\(keep working notes at work:// or memory:// addresses instead; the one \
exception is an Add File of a new .mevedel/journal/YYYY-MM-DDTHH:MM:SSZ-SLUG.md \
entry)")
   ((cl-some (lambda (entry)
               (if (string-suffix-p "/" entry)
                   (string-prefix-p entry (file-name-as-directory real))
                 (equal real entry)))
             protected)
    "it is a protected startup, configuration or credential file \
(`mevedel-tool-patch-protected-files')")))

(defun mevedel-tool-patch--backing (authored root)
  "Return (AUTHORED ABS CANONICAL) for the patch path AUTHORED.
An ordinary path is made absolute against ROOT (CANONICAL nil); a
resource address is prepared for the ApplyPatch operation, ABS is its
backing file and CANONICAL its canonical address, which decisions
read instead of the spelling typed.
An unavailable resource signals `mevedel-tool-patch-error'; a family
the operation matrix refuses signals `mevedel-core-resource-error'.
Nothing is read."
  (if (not (mevedel-resource-address-p authored))
      (list authored (expand-file-name authored root) nil)
    (let* ((facts (mevedel-resource-facts
                   (mevedel-resource-prepare authored "ApplyPatch")))
           (paths (plist-get facts :paths)))
      (unless (and (plist-get facts :available) (= (length paths) 1))
        (mevedel-tool-patch--fail
         "ApplyPatch cannot write `%s' in this request: its owner is unavailable \
\(work:// files need a session with storage)" authored))
      (list authored (car paths) (plist-get facts :canonical)))))

(defun mevedel-tool-patch--targets (patch root)
  "Return the targets of PATCH, each (AUTHORED ABS CANONICAL REAL), in order.
REAL is ABS with links resolved.  Every path of every operation is
there once, Move destinations included.  ROOT is the directory
relative paths are relative to.  A malformed patch signals the
module's error; a remote, protected or unavailable target signals
`mevedel-tool-patch-error' before anything is read."
  (let ((authored nil) (changed nil))
    (dolist (op (mevedel-core-patch-parse patch))
      (unless (eq (plist-get op :op) 'add)
        (push (plist-get op :path) changed))
      (when (plist-get op :move-to) (push (plist-get op :move-to) changed))
      (dolist (path (list (plist-get op :path) (plist-get op :move-to)))
        (when (and path (not (member path authored)))
          (push path authored))))
    (let ((targets (mapcar (lambda (path) (mevedel-tool-patch--backing path root))
                           (nreverse authored))))
      (let ((host (file-remote-p root)))
        (dolist (target targets)
          (unless (or (nth 2 target) (equal (file-remote-p (cadr target)) host))
            (mevedel-tool-patch--fail
             "ApplyPatch refuses `%s': it is on %s, and this session works on %s; a \
session writes only on its own host" (car target)
             (or (file-remote-p (cadr target)) "this machine") (or host "this machine")))))
      (let* ((entries mevedel-tool-patch-protected-files)
             (reals (mevedel-tool-patch--truenames
                     (append (list (expand-file-name ".mevedel" root))
                             (mapcar #'expand-file-name entries)
                             (mapcar #'cadr targets))))
             (state (file-name-as-directory (pop reals)))
             (protected (cl-loop for entry in entries
                                 collect (if (string-suffix-p "/" entry)
                                             (file-name-as-directory (pop reals))
                                           (pop reals)))))
        (cl-loop for (authored abs resource) in targets
                 for real in reals
                 for why = (mevedel-tool-patch--protection
                            abs real (and (not resource) state) protected
                            (not (member authored changed)))
                 when why
                 do (mevedel-tool-patch--fail
                     "ApplyPatch refuses `%s': %s.  Nothing was read or written; ask the user \
to make this change if it is needed" authored why))
        (cl-mapcar (lambda (target real) (append target (list real))) targets reals)))))

(defun mevedel-tool-patch--approved-targets (patch root)
  "Return the targets of PATCH as its call was approved.
They are the ones its permission decision pinned
\(`mevedel-pipeline-pin'); a call judged without them resolves them
now, relative paths against ROOT.
When a path now reaches another file than the approved one (a link
swapped, a session's directory moved), signal
`mevedel-tool-patch-error': the approval does not cover the new
destination."
  (let ((current (mevedel-tool-patch--targets patch root))
        (pinned (mevedel-pipeline-pinned)))
    (when pinned
      (cl-loop for (authored abs _ real) in pinned
               for (_ now-abs _ now-real) = (assoc authored current)
               unless (and (equal abs now-abs) (equal real now-real))
               do (mevedel-tool-patch--fail
                   "ApplyPatch refused: `%s' now reaches another file than the one approved \
for this call; nothing was written.  Send the patch again to have the new destination judged"
                   authored)))
    (or pinned current)))

(defun mevedel-tool-patch--paths (args)
  "Return the file paths a call with ARGS may change, for permission.
Resource addresses give their backing files.  Ordinary paths are
given as written: the permission step resolves relative ones against
the call's workspace.  A malformed patch or a refused target signals
a plain `error' whose message is the model's explanation."
  (condition-case err
      (let* ((patch (plist-get args :patch))
             (workspace (file-name-as-directory
                         (plist-get (funcall mevedel-resource-session-function) :workspace)))
             (targets (mevedel-tool-patch--targets patch workspace)))
        (mevedel-pipeline-pin
         (lambda ()
           (if (equal (expand-file-name default-directory) workspace)
               targets
             (mevedel-tool-patch--targets patch default-directory))))
        (mapcar (pcase-lambda (`(,authored ,abs ,resource . ,_)) (if resource abs authored))
                targets))
    ((mevedel-core-error mevedel-tool-patch-error) (error "%s" (cadr err)))))

;;;; Visiting buffers

(defun mevedel-tool-patch--unsaved (files selection)
  "Return (AUTHORED . BUFFER) for each of FILES whose buffer is modified.
FILES are the plan's files.  A file that SELECTION rejects whole is
left out: it is not written."
  (cl-loop for file in files
           for abs = (plist-get file :abs)
           unless (eq (alist-get abs selection nil nil #'equal) 'reject)
           append (cl-loop for (authored path) in (list (list (plist-get file :path) abs)
                                                        (list (plist-get file :move-to)
                                                              (plist-get file :move-abs)))
                           for buffer = (and path (find-buffer-visiting path))
                           when (and buffer (buffer-modified-p buffer))
                           collect (cons authored buffer))))

(defun mevedel-tool-patch--refresh (buffer file)
  "Give the unmodified BUFFER the contents of FILE in place, as one undo step.
Point, window starts and markers stay where minimal edits leave them,
a narrowing stays, read-only text is replaced too, and the buffer
ends unmodified and in step with FILE's modification time."
  (with-current-buffer buffer
    (let ((coding buffer-file-coding-system)
          (source (generate-new-buffer " *mevedel-patch*" t)))
      (unwind-protect
          (progn
            (with-current-buffer source
              (let ((coding-system-for-read coding))
                (insert-file-contents file)))
            ;; In step with the file first, so that editing asks nothing
            ;; about a file changed on disk; no lock for a transient edit.
            (set-visited-file-modtime)
            (undo-boundary)
            (let ((inhibit-read-only t)
                  (create-lockfiles nil))
              (save-restriction
                (widen)
                (with-undo-amalgamate
                  (replace-buffer-contents source mevedel-tool-patch-buffer-update-seconds))))
            (set-buffer-modified-p nil))
        (kill-buffer source)))))

(defun mevedel-tool-patch--planned (file planned)
  "Return the entry of PLANNED, the plan's files, for the applied FILE."
  (cl-find (plist-get file :abs) planned :key (lambda (entry) (plist-get entry :abs))
           :test #'equal))

(defun mevedel-tool-patch--sync (file planned)
  "Bring the buffers visiting FILE, an applied file of the patch, in step.
FILE is a plist of `mevedel-core-patch-apply''s :files; PLANNED is
the plan's files, which know where a moved file went."
  (let* ((abs (plist-get file :abs))
         (dest (or (plist-get (mevedel-tool-patch--planned file planned) :move-abs) abs))
         (buffer (find-buffer-visiting abs))
         (dest-buffer (and (not (equal dest abs)) (find-buffer-visiting dest))))
    (cond
     ((eq (plist-get file :status) 'rejected))
     ((eq (plist-get file :op) 'delete)
      (when buffer
        (message "ApplyPatch deleted %s; buffer %s still holds its text"
                 (plist-get file :path) (buffer-name buffer))))
     (t
      (when dest-buffer (mevedel-tool-patch--refresh dest-buffer dest))
      (when buffer
        (mevedel-tool-patch--refresh buffer dest)
        (unless (equal dest abs)
          (with-current-buffer buffer
            (set-visited-file-name dest t t)
            (set-buffer-modified-p nil)
            (set-visited-file-modtime))))))))

;;;; The model's result

(defun mevedel-tool-patch--counts (added removed)
  "Return the line counts ADDED and REMOVED as ASCII text, \"+3 -1\"."
  (format "+%d -%d" added removed))

(defun mevedel-tool-patch--hunk-notes (file choices)
  "Return what the per-hunk CHOICES of a review did to plan FILE, or nil."
  (let ((hunks (plist-get file :hunks)) rejected edited)
    (cl-loop for choice in choices
             for hunk in hunks
             do (pcase choice
                  ('reject (push (plist-get hunk :header) rejected))
                  (`(edit . ,_) (push (plist-get hunk :header) edited))))
    (when (or rejected edited)
      (string-join
       (delq nil (list (and rejected (format "the user rejected the change at %s"
                                             (string-join (nreverse rejected) ", ")))
                       (and edited (format "the user edited the change at %s"
                                           (string-join (nreverse edited) ", ")))))
       "; "))))

(defun mevedel-tool-patch--file-line (file planned choice)
  "Return the result line of the applied FILE, whose plan entry is PLANNED.
CHOICE is the review's choice for it (nil: applied whole)."
  (let* ((path (plist-get file :path))
         (counts (mevedel-tool-patch--counts (plist-get file :added) (plist-get file :removed)))
         (notes (and (consp choice) (mevedel-tool-patch--hunk-notes planned choice)))
         (line (pcase (plist-get file :op)
                 ((guard (eq (plist-get file :status) 'rejected))
                  (format "Left %s unchanged: the user rejected this file" path))
                 ('add (format "Added %s (%s)" path counts))
                 ('delete (format "Deleted %s (%s)" path counts))
                 ((guard (plist-get file :move-to))
                  (format "Moved %s to %s (%s)" path (plist-get file :move-to) counts))
                 (_ (format "Updated %s (%s)" path counts)))))
    (if (null notes)
        line
      (concat line "; " notes ".  What the file now holds from this patch:\n"
              (plist-get file :diff)))))

(defun mevedel-tool-patch--summary (applied planned selection feedback)
  "Return the model's text for the APPLIED result of a plan.
PLANNED is the plan's files; SELECTION and FEEDBACK come from a
review, or are nil."
  (let ((lines (cl-loop for file in (plist-get applied :files)
                        collect (mevedel-tool-patch--file-line
                                 file (mevedel-tool-patch--planned file planned)
                                 (alist-get (plist-get file :abs) selection nil nil #'equal)))))
    (concat (if selection
                (format "The user reviewed the patch; this is what was applied (%s):\n"
                        (mevedel-tool-patch--counts (plist-get applied :added)
                                                    (plist-get applied :removed)))
              "The patch was applied.\n")
            (string-join lines "\n")
            (and feedback (not (string-empty-p feedback))
                 (concat "\n\nThe user's feedback on the patch:\n" feedback)))))

(defun mevedel-tool-patch--render-data (applied)
  "Return the render-data of the APPLIED result: one block per file."
  (list :kind 'patch
        :added (plist-get applied :added)
        :removed (plist-get applied :removed)
        :files (mapcar (lambda (file)
                         (list :path (plist-get file :path) :op (plist-get file :op)
                               :move-to (plist-get file :move-to)
                               :status (plist-get file :status)
                               :added (plist-get file :added) :removed (plist-get file :removed)
                               :diff (plist-get file :diff)))
                       (plist-get applied :files))))

;;;; The handler

(defun mevedel-tool-patch--review ()
  "Return the review that approved the running call, or nil.
The review is (:plan PLAN :selection SELECTION :feedback TEXT), taken
with `mevedel-patch-review-take' by the approval's :review-id.  A call
that a review approved without a review
to take signals: applying the whole patch would ignore what the user
decided.  A review that could not plan approves with the outcome
`plan-failed'; the handler then plans and reports the error itself."
  (let* ((approvals (mevedel-pipeline-active-permission-approvals))
         (id (cl-some (lambda (approval) (plist-get approval :review-id)) approvals))
         (review (and id (mevedel-patch-review-take id))))
    (or review
        (when (cl-some (lambda (approval)
                         (and (eq (plist-get approval :source) 'review)
                              (not (eq (plist-get approval :outcome) 'plan-failed))))
                       approvals)
          (mevedel-tool-patch--fail
           "ApplyPatch: the review that approved this call is gone; nothing was written.  \
Send the patch again")))))

(defvar mevedel-tool-patch--mirrors (make-hash-table :test #'eq :weakness 'key)
  "Plans of remote targets → the local mirror they were planned on.
Each value is `mevedel-remote-patch-mirror''s (DIRECTORY . MAP).")

(defun mevedel-tool-patch--plan (patch targets)
  "Return the module's plan of PATCH over TARGETS; nothing is written.
TARGETS are `mevedel-tool-patch--targets' of PATCH.  Remote targets are
planned on a local mirror of their files (`mevedel-remote-patch-mirror'),
remembered with the plan for `mevedel-tool-patch--apply' to write back."
  (let* ((remote (cl-remove-if-not (lambda (target) (mevedel-remote-p (cadr target))) targets))
         (mirror (and remote (mevedel-remote-patch-mirror remote))))
    (condition-case err
        (let ((plan (mevedel-core-patch-plan
                     patch (mapcar (lambda (target)
                                     (cons (car target)
                                           (or (nth 1 (assoc (cadr target) (cdr mirror)))
                                               (cadr target))))
                                   targets))))
          (when mirror (puthash plan mirror mevedel-tool-patch--mirrors))
          plan)
      (error (when mirror (delete-directory (car mirror) t))
             (signal (car err)
                     (if mirror
                         (list (mevedel-tool-patch--remote-names (cadr err) mirror))
                       (cdr err)))))))

(defun mevedel-tool-patch--remote-names (text mirror)
  "Return TEXT with the files of MIRROR named by their remote names."
  (if (stringp text)
      (cl-loop for (remote local) in (cdr mirror)
               do (setq text (string-replace local remote text))
               finally return text)
    text))

(defun mevedel-tool-patch--remote-file (file mirror)
  "Return the plan's FILE, a plist, with MIRROR's names made remote again."
  (let ((file (copy-sequence file)))
    (dolist (key '(:abs :move-abs))
      (when-let* ((local (plist-get file key))
                  (entry (cl-find local (cdr mirror) :key #'cadr :test #'equal)))
        (setq file (plist-put file key (car entry)))))
    file))

(defun mevedel-tool-patch--write-back (applied planned mirror)
  "Write the APPLIED files of the mirror MIRROR to their remote files.
PLANNED is the plan's files (mirror names).  All files or none are
written (`mevedel-remote-patch-write'), each beside its target then
renamed over it, mode kept."
  (let ((writes nil))
    (dolist (file (plist-get applied :files))
      (unless (eq (plist-get file :status) 'rejected)
        (let* ((entry (lambda (local) (cl-find local (cdr mirror) :key #'cadr :test #'equal)))
               (source (funcall entry (plist-get file :abs)))
               (dest-local (or (plist-get (mevedel-tool-patch--planned file planned) :move-abs)
                               (plist-get file :abs)))
               (dest (funcall entry dest-local)))
          (if (eq (plist-get file :op) 'delete)
              (push (list (car source) nil (nth 2 source) (nth 3 source)) writes)
            (push (list (car dest) dest-local (nth 2 dest) (nth 3 dest)) writes)
            (unless (eq source dest)
              (push (list (car source) nil (nth 2 source) (nth 3 source)) writes))))))
    (mevedel-remote-patch-write (nreverse writes))))

(defun mevedel-tool-patch-plan-for-review (context)
  "Return the plan of the ApplyPatch call CONTEXT, for its review.
CONTEXT is the pipeline's call context.  Targets are resolved and
refused as for the call itself; nothing is written."
  (let* ((session (plist-get context :session))
         (buffer (plist-get context :data-buffer))
         (mevedel-session-current (or session mevedel-session-current))
         (root (mevedel-session-call-directory session buffer))
         (patch (plist-get (plist-get context :args) :patch)))
    (mevedel-tool-patch--plan patch (mevedel-tool-patch--targets patch root))))

(defun mevedel-tool-patch-review (context session answer open)
  "Review the ApplyPatch call CONTEXT of SESSION: ApplyPatch's :review.
ANSWER and OPEN are as `mevedel-patch-review-start' takes them; this
passes it `mevedel-tool-patch-plan-for-review', so that the review
needs nothing from this file."
  (mevedel-patch-review-start #'mevedel-tool-patch-plan-for-review
                              context session answer open))

(defun mevedel-tool-patch--apply (patch refusal)
  "Apply PATCH in the running call's workspace; return the handler's envelope.
Relative paths are relative to `default-directory', which the
pipeline binds to the workspace.  Any refusal or failure signals
with nothing written; REFUSAL, when non-nil, is why the workspace's
lease was not had (`mevedel-tool-patch--lease')."
  (let* ((session (plist-get (mevedel-pipeline-current-context) :session))
         (mevedel-session-current (or session mevedel-session-current))
         (targets (mevedel-tool-patch--approved-targets patch default-directory))
         (review (mevedel-tool-patch--review))
         (plan (or (plist-get review :plan) (mevedel-tool-patch--plan patch targets)))
         (mirror (gethash plan mevedel-tool-patch--mirrors))
         (selection (plist-get review :selection))
         (planned (mevedel-core-patch-plan-files plan))
         (unsaved (if mirror
                      (mevedel-tool-patch--unsaved
                       (mapcar (lambda (file) (mevedel-tool-patch--remote-file file mirror)) planned)
                       (mapcar (lambda (choice)
                                 (cons (car (or (cl-find (car choice) (cdr mirror)
                                                         :key #'cadr :test #'equal)
                                                (list (car choice))))
                                       (cdr choice)))
                               selection))
                    (mevedel-tool-patch--unsaved planned selection))))
    (when refusal
      (when mirror (delete-directory (car mirror) t))
      (mevedel-tool-patch--fail "ApplyPatch refused: %s; nothing was written" refusal))
    (when unsaved
      (mevedel-tool-patch--fail
       "ApplyPatch refused: %s; nothing was written.  Ask the user to save or revert it, \
then send the patch again"
       (mapconcat (pcase-lambda (`(,path . ,buffer))
                    (format "`%s' has unsaved changes in buffer %s" path (buffer-name buffer)))
                  unsaved "; ")))
    (when (and (mevedel-session-durable-p mevedel-session-current)
               (cl-some (lambda (target)
                          (and (nth 2 target) (string-prefix-p "work://" (nth 2 target))))
                        targets))
      (mevedel-session-ensure-storage mevedel-session-current))
    (let* ((applied (if (not mirror)
                        (mevedel-core-patch-apply plan selection)
                      (unwind-protect
                          (let ((applied (mevedel-core-patch-apply plan selection)))
                            (mevedel-tool-patch--write-back applied planned mirror)
                            (setq planned (mapcar (lambda (file)
                                                    (mevedel-tool-patch--remote-file file mirror))
                                                  planned))
                            (plist-put applied :files
                                       (mapcar (lambda (file)
                                                 (mevedel-tool-patch--remote-file file mirror))
                                               (plist-get applied :files))))
                        (delete-directory (car mirror) t))))
           ;; The files are written: a buffer that cannot follow is a
           ;; note on the result, never an error.
           (stale (cl-loop for file in (plist-get applied :files)
                           for failure = (condition-case err
                                             (progn (mevedel-tool-patch--sync file planned) nil)
                                           (error (error-message-string err)))
                           when failure
                           collect (format "%s was written, but its Emacs buffer could not be \
updated (%s)" (plist-get file :path) failure))))
      (list :result (concat (mevedel-tool-patch--summary applied planned selection
                                                         (plist-get review :feedback))
                            (and stale (concat "\n\n" (string-join stale "\n"))))
            :render-data (mevedel-tool-patch--render-data applied)))))

(defun mevedel-tool-patch--lease (patch then)
  "Call THEN once the running call may write PATCH's remote targets.
THEN gets nil, or why not: another session holds the remote
workspace's lease (`mevedel-remote-lease-acquire').  While it waits,
the call's row says for whom, and cancelling the call ends the wait.
A patch with no remote target needs no lease."
  (let* ((session (or (plist-get (mevedel-pipeline-current-context) :session)
                      mevedel-session-current))
         (workspace (and session (mevedel-session-workspace session))))
    (if (not (and (mevedel-remote-p workspace)
                  (cl-some (lambda (target) (mevedel-remote-p (nth 1 target)))
                           ;; A bad patch fails in the apply, saying why.
                           (ignore-errors
                             (mevedel-tool-patch--approved-targets patch default-directory)))))
        (funcall then nil)
      (mevedel-pipeline-add-canceller
       (mevedel-remote-lease-acquire
        workspace (mevedel-session-id session) (mevedel-pipeline-continuation then) nil
        (mevedel-pipeline-continuation #'mevedel-pipeline-report-progress))))))

(defun mevedel-tool-patch-run (callback args)
  "Apply the patch in ARGS (:patch) and call CALLBACK with the result once.
The result is an envelope, or an \"Error: ...\" text naming the file,
hunk and nearest lines of a failure; nothing is written then."
  (let ((directory default-directory)
        (patch (plist-get args :patch)))
    (mevedel-remote-when-free
     ;; Maybe later, from a timer: the call's context and directory go along.
     (mevedel-pipeline-continuation
      (lambda ()
        (let ((default-directory directory))
          (mevedel-tool-patch--lease
           patch
           (lambda (refusal)
             (let ((default-directory directory))
               (funcall callback
                        (condition-case err
                            (mevedel-tool-patch--apply patch refusal)
                          ((mevedel-core-error mevedel-tool-patch-error)
                           (concat "Error: " (cadr err)))
                          (error (concat "Error: " (error-message-string err))))))))))))))

;;;; The renderer

(defun mevedel-tool-patch--changed (files)
  "Return the FILES of patch render-data that changed on disk."
  (cl-remove-if (lambda (file) (eq (plist-get file :status) 'rejected)) files))

(defun mevedel-tool-patch--header (render-data)
  "Return the row header of a settled patch with RENDER-DATA."
  (let* ((files (plist-get render-data :files))
         (changed (mevedel-tool-patch--changed files))
         (rejected (- (length files) (length changed)))
         (counts (format "(+%d −%d)" (plist-get render-data :added)
                         (plist-get render-data :removed)))
         (file (car changed)))
    (concat
     (if (cdr changed)
         (format "Edited %d files %s" (length changed) counts)
       (let ((path (mevedel-tool-render-display-path (or (plist-get file :path) "?"))))
         (pcase (plist-get file :op)
           ((guard (null file)) "Changed no file")
           ('add (format "Added %s %s" path counts))
           ('delete (format "Deleted %s %s" path counts))
           ((guard (plist-get file :move-to))
            (format "Moved %s → %s %s" path
                    (mevedel-tool-render-display-path (plist-get file :move-to)) counts))
           (_ (format "Edited %s %s" path counts)))))
     (and (> rejected 0) (format ", %d rejected" rejected)))))

(defun mevedel-tool-patch--preview (diff)
  "Return the first lines of DIFF from just before its first change."
  (let* ((lines (split-string diff "\n"))
         (first (or (cl-position-if (lambda (line)
                                      (and (string-match-p "\\`[-+]" line)
                                           (not (string-match-p "\\`\\(?:---\\|\\+\\+\\+\\) " line))))
                                    lines)
                    0)))
    (string-join (take mevedel-tool-render-preview-lines (nthcdr (max 0 (1- first)) lines))
                 "\n")))

(defun mevedel-tool-patch--attempt-header (args)
  "Return the header of an ApplyPatch row with ARGS that changed nothing."
  (let ((paths (ignore-errors
                 (mapcar (lambda (op) (plist-get op :path))
                         (mevedel-core-patch-parse (plist-get args :patch))))))
    (concat "ApplyPatch"
            (and paths (concat " " (mevedel-tool-render-shorten
                                    (mapconcat #'mevedel-tool-render-display-path paths ", ")
                                    60))))))

(defun mevedel-tool-patch-render (_name args result render-data)
  "Render an ApplyPatch call with ARGS, RESULT and RENDER-DATA.
A settled patch shows its counts over the unified diff, opening on
the first changes; a refused or failed one shows its error."
  (if (eq (plist-get render-data :kind) 'patch)
      (let ((diff (mapconcat (lambda (file) (plist-get file :diff))
                             (mevedel-tool-patch--changed (plist-get render-data :files))
                             "")))
        (list :header (mevedel-tool-patch--header render-data)
              :body (unless mevedel-tool-render-summary-only diff)
              :body-mode #'diff-mode
              :preview-body (mevedel-tool-patch--preview diff)
              :expandable-p (not (string-empty-p diff))
              :initially-collapsed-p nil))
    (list :header (mevedel-tool-patch--attempt-header args)
          :body (unless mevedel-tool-render-summary-only result)
          :expandable-p (and result (not (string-empty-p result)))
          :initially-collapsed-p t)))

;;;; Description

(defconst mevedel-tool-patch-description
  "Create, change, move or delete files with one patch that applies atomically.

When to use: every edit of a file's text, new files included.  Prefer it to
shell redirection, sed or heredocs.

When NOT to use: to read files (Read) or to run generators and formatters (Bash).

How to use: `patch' is the whole patch:
*** Begin Patch
*** Add File: docs/new.md
+every line of a new file starts with +
*** Update File: src/old.el
*** Move to: src/new.el
@@ (defun example
 context lines start with a space
-removed lines with -
+added lines with +
*** Delete File: obsolete.txt
*** End Patch
`*** Move to:' (a rename) and the text after `@@' (a line above the
change that locates it) are optional; `*** End of File' after a hunk's
lines anchors it at the end of the file.
Read a file before changing it and copy context and removed lines exactly;
give about 3 lines of context around each change, enough to be unique.
Paths are relative to the working directory unless absolute; work://FILE
and memory://KEY/FILE addresses work too.  Everything applies or nothing
does.  A hunk that matches nowhere, or in more than one place, fails the
whole patch; the error names the file, the hunk and the nearest lines the
file has: Read them and send a corrected patch, not the same one.  Files
under .git/ or .mevedel/, startup and credential files, and files with
unsaved changes in an Emacs buffer are refused.  The user may review the
patch, accepting, rejecting or editing each change; the result says what
was applied and passes on their feedback: follow it, and do not resend a
rejected change unchanged.  Manual: Read mevedel://tools/applypatch.md."
  "Model-facing description of ApplyPatch.")

;;;; Declaration

(mevedel-define-tool "ApplyPatch"
  :native t
  :plan #'mevedel-plan-patch-verdict
  :category "filesystem"
  :description mevedel-tool-patch-description
  :args ((patch string :required
                "The patch text, from *** Begin Patch to *** End Patch."))
  :function #'mevedel-tool-patch-run
  :async-p t
  :snapshot-p t
  :renderer #'mevedel-tool-patch-render
  :review #'mevedel-tool-patch-review
  :get-paths #'mevedel-tool-patch--paths)

(provide 'mevedel-tool-patch)
;;; mevedel-tool-patch.el ends here
