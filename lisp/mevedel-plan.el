;;; mevedel-plan.el --- Plan mode: explore, propose, approve, implement  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Sticky Plan mode is the permission mode `plan' of a session (`/plan',
;; C-c C-p plan, the menu, `--permission-mode plan').  A turn sent
;; while it is on carries a Plan stamp, (:plan sticky), made once and
;; never changed: the turn keeps Plan's boundary whatever happens to
;; the session's mode meanwhile.  Directive planning (the model asked
;; to plan first) is the stamp (:plan directive).  Under a stamp,
;; before any rule, mode or answer:
;;
;;   read-only tools       decided as usual
;;   Bash, Monitor         only commands the analysis proves read-only
;;   Eval, other editors   denied
;;   ApplyPatch            sticky: only when every target is a session
;;                         work:// file (plans go in work://plans/),
;;                         and then without asking; directive: denied
;;
;; A denial happens in the permission step, before the patch is
;; prepared or anything is read or written.
;;
;; ProposePlan's card (mevedel-tool-plan.el) ends Plan here: an
;; approval returns the session to its mode before Plan, with edits
;; allowed for the implementation when so approved, and keeps the plan
;; in the session's metadata.  See docs/plan.md.
;;
;; Child agents' stamps and overrides are mevedel-agent.el's: it
;; answers `mevedel-plan-request-functions'; `mevedel-plan-stamp' is
;; what every check reads.
;;
;; Sticky Plan is saved with the session and comes back on resume.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-session)
(require 'mevedel-permissions)
(require 'mevedel-resource)
(require 'mevedel-tool-registry)
(require 'mevedel-chat)
(require 'mevedel-resume)
(require 'mevedel-interaction)

(defgroup mevedel-plan nil
  "Plan mode: read-only exploration, a proposed plan, approval."
  :group 'mevedel
  :prefix "mevedel-plan-")

(defvar mevedel-plan-request-functions nil
  "Abnormal hook run with a call's context to find its request's Plan stamp.
The first function returning non-nil gives the stamp, or `none' for a
request that has none; the agents runtime answers for its requests.
Without an answer, the root turn's stamp applies.")

(defvar mevedel-plan--previous (make-hash-table :test #'eq :weakness 'key)
  "Hash table: session to its permission mode before it entered Plan.")

(defvar mevedel-plan--next-override (make-hash-table :test #'eq :weakness 'key)
  "Hash table: chat to the mode override its next turn gets (approval with edits).")

;;;; The stamp

(defun mevedel-plan-make-stamp (kind)
  "Return a new Plan stamp of KIND, `sticky' or `directive'."
  (list :plan kind))

(defun mevedel-plan-stamp-kind (stamp)
  "Return the kind of Plan STAMP, or nil for no stamp."
  (and (consp stamp) (plist-get stamp :plan)))

(defun mevedel-plan-authority-p (stamp)
  "Return non-nil when STAMP is a Plan stamp, not nil or `none'.
A request with Plan authority cannot direct a turn that lacks a stamp,
and its mail stamps the turn that reads it."
  (memq (mevedel-plan-stamp-kind stamp) '(sticky directive)))

(defsubst mevedel-plan-active-p (session)
  "Return non-nil when SESSION is in sticky Plan mode.
Inline: Plan's restriction asks it for every tool call."
  (eq (mevedel-permissions-session-mode session) 'plan))

(defun mevedel-plan-stamp-turn (turn stamp)
  "Give TURN, a turn plist, STAMP unless it has a stamp already.
A stamp, once given, never changes; STAMP nil gives nothing."
  (when (and stamp (not (plist-get turn :plan-stamp)))
    (nconc turn (list :plan-stamp stamp))))

(defun mevedel-plan--stamp-turn (chat turn)
  "Stamp CHAT's new TURN if its session is in Plan; give it a pending override.
A `mevedel-chat-turn-functions' member."
  (when (mevedel-plan-active-p (mevedel-chat-session chat))
    (mevedel-plan-stamp-turn turn (mevedel-plan-make-stamp 'sticky)))
  (when-let* ((override (gethash chat mevedel-plan--next-override)))
    (remhash chat mevedel-plan--next-override)
    (nconc turn (list :mode-override override))))

(add-hook 'mevedel-chat-turn-functions #'mevedel-plan--stamp-turn)

(defsubst mevedel-plan--turn (context)
  "Return the root turn plist of the call CONTEXT, or nil.
Inline: Plan's hooks ask it for every tool call."
  (when-let* ((chat (mevedel-chat-of-buffer (plist-get context :data-buffer)))
              ((mevedel-chat-p chat)))
    (mevedel-chat-turn chat)))

(defsubst mevedel-plan-stamp (context)
  "Return the Plan stamp of the request the call CONTEXT belongs to, or nil.
An agent request's stamp comes from `mevedel-plan-request-functions';
a root turn's from the turn; a call outside any turn (a plain gptel
buffer) follows its session's mode.  Inline: Plan's restriction asks
it for every tool call."
  (let ((answer (run-hook-with-args-until-success 'mevedel-plan-request-functions context))
        (turn nil))
    (cond ((eq answer 'none) nil)
          (answer answer)
          ((setq turn (mevedel-plan--turn context)) (plist-get turn :plan-stamp))
          ((mevedel-plan-active-p (plist-get context :session))
           (mevedel-plan-make-stamp 'sticky)))))

;;;; The boundary

(defun mevedel-plan-session-target-p (canonical)
  "Return non-nil when the address CANONICAL names a session-owned work:// file.
CANONICAL is the canonical spelling (`mevedel-resource-parse'), nil for
an ordinary path: only it says where the resolver puts a file
\(`WORK://sh%61red/x' is work://shared/x).  work://shared/ belongs to
the workspace, and a bare work:// names no file."
  (and canonical
       (string-prefix-p "work://" canonical)
       (not (string-prefix-p "work://shared/" canonical))
       (not (member canonical '("work://" "work://shared")))))

(defun mevedel-plan-patch-verdict (kind args _context)
  "Return the Plan verdict of a stamp of KIND on an ApplyPatch of ARGS.
ApplyPatch's :plan: sticky Plan lets it write the session's work://
files only, directive planning not at all."
  (cond
   ((eq kind 'directive)
    (cons 'deny "Planning is read-only: ApplyPatch is not available, not even for work:// \
files.  Present the plan in your answer"))
   (t
    (let* ((targets (condition-case nil
                        (cl-loop for op in (mevedel-core-patch-parse (plist-get args :patch))
                                 append (delq nil (list (plist-get op :path)
                                                        (plist-get op :move-to))))
                      (mevedel-core-error 'unreadable)))
           (canonical (and (listp targets)
                           (condition-case err
                               (mevedel-resource-parse-many targets)
                             (mevedel-core-error (cons 'error (cadr err)))))))
      (cond
       ;; The pipeline reports the patch's own syntax error.
       ((eq targets 'unreadable) nil)
       ((eq (car-safe canonical) 'error)
        (cons 'deny (format "Plan mode: ApplyPatch refused: %s; nothing was written"
                            (cdr canonical))))
       ((cl-every #'mevedel-plan-session-target-p canonical) 'allow)
       (t (cons 'deny
                (format "Plan mode: ApplyPatch may only write this session's work:// files \
\(put plans in work://plans/), and this patch also targets %s; nothing was written.  \
Propose the plan with ProposePlan; the change is made after approval"
                        (mapconcat (lambda (target) (format "`%s'" target))
                                   (cl-loop for target in targets
                                            for address in canonical
                                            unless (mevedel-plan-session-target-p address)
                                            collect target)
                                   ", ")))))))))

(defun mevedel-plan-restriction (context session)
  "Return Plan's verdict on the call CONTEXT in SESSION, or nil when it has none.
A `mevedel-permissions-restriction-functions' member: under a Plan
stamp, a tool's :plan decides (ApplyPatch's); read-only tools and
calls acting under what they address are left to the usual decision;
commands (Bash, Monitor) must be proven read-only; everything else is
denied."
  (ignore session)
  (when-let* ((stamp (mevedel-plan-stamp context))
              (kind (mevedel-plan-stamp-kind stamp)))
    (let* ((tool (plist-get context :tool))
           (plan (mevedel-tool-plan tool))
           (args (plist-get context :args))
           (check (mevedel-tool-check-permission tool))
           (own (and check (not plan) (not (mevedel-tool-read-only-p tool))
                     (funcall check args))))
      (cond
       (plan (funcall plan kind args context))
       ((eq (car-safe own) 'command)
        (let* ((root (or (and (mevedel-session-p session) (mevedel-session-workspace session))
                         default-directory))
               (facts (mevedel-core-bash-permission (cdr own) root root)))
          (unless (plist-get facts :read-only)
            (cons 'deny (format "Plan mode: only read-only commands run, and this one is %s%s; \
nothing ran"
                                (plist-get facts :class)
                                (if-let* ((reasons (plist-get facts :reasons)))
                                    (concat " (" (string-join reasons "; ") ")")
                                  ""))))))
       ((or (mevedel-tool-read-only-p tool) (eq own 'delegated)) nil)
       (t (cons 'deny (format "Plan mode: %s is not available, as it changes things"
                              (mevedel-tool-name tool))))))))

(add-hook 'mevedel-permissions-restriction-functions #'mevedel-plan-restriction)

(defun mevedel-plan-mode-override (context _session)
  "Return the implementation override of the request of CONTEXT, or nil.
A `mevedel-permissions-mode-functions' member."
  (let ((turn (mevedel-plan--turn context)))
    (and turn (plist-get turn :mode-override))))

(add-hook 'mevedel-permissions-mode-functions #'mevedel-plan-mode-override)

;;;; Entering and leaving

(defun mevedel-plan-enter (session)
  "Put SESSION in sticky Plan mode, remembering the mode to come back to."
  (unless (mevedel-plan-active-p session)
    (puthash session (mevedel-permissions-session-mode session) mevedel-plan--previous)
    (setf (mevedel-session-permission-mode session) 'plan)
    (mevedel-plan--save-mode session)))

(defun mevedel-plan-leave (session)
  "Take SESSION out of Plan mode, back to the mode it had before."
  (when (mevedel-plan-active-p session)
    (setf (mevedel-session-permission-mode session)
          (let ((previous (gethash session mevedel-plan--previous)))
            (if (memq previous '(nil plan))
                (if (eq mevedel-permissions-mode 'plan) 'ask mevedel-permissions-mode)
              previous)))
    (remhash session mevedel-plan--previous)
    (mevedel-plan--save-mode session)))

(defun mevedel-plan-set-mode (session mode)
  "Set SESSION's permission MODE, entering or leaving Plan as needed.
Choosing `plan' remembers the mode to come back to; choosing another
mode from Plan leaves it first, so the choice is saved either way."
  (if (eq mode 'plan)
      (mevedel-plan-enter session)
    (mevedel-plan-leave session)
    (setf (mevedel-session-permission-mode session) mode)))

;;;; Sticky Plan across a resume

(defun mevedel-plan--save-mode (session)
  "Save in SESSION's storage whether it is in sticky Plan, and the mode after it.
The metadata \"sticky-plan\" is empty outside Plan, else the mode
leaving Plan returns to (\"plan\" when that is not known).  A session
without storage yet saves it at the end of its first turn."
  (when (mevedel-session-storage-p session)
    (condition-case err
        (mevedel-core-store-info-set
         (mevedel-session-store-handle session)
         `(("sticky-plan" . ,(if (mevedel-plan-active-p session)
                                 (symbol-name (or (gethash session mevedel-plan--previous) 'plan))
                               ""))))
      (error (display-warning 'mevedel (format "Cannot save the Plan mode: %s"
                                               (error-message-string err)))))))

(defun mevedel-plan--turn-ended (chat _outcome)
  "Save whether the session of the root CHAT is in sticky Plan.
A `mevedel-chat-idle-functions' member: the mode may have changed
during the turn, or the turn made the session's storage."
  (unless (mevedel-chat-agent chat)
    (mevedel-plan--save-mode (mevedel-chat-session chat))))

(add-hook 'mevedel-chat-idle-functions #'mevedel-plan--turn-ended)

(defun mevedel-plan--resume (chat)
  "Put the resumed session of the root CHAT back in sticky Plan if it was.
A `mevedel-resume-functions' member."
  (unless (mevedel-chat-agent chat)
    (let* ((session (mevedel-chat-session chat))
           (saved (cdr (assoc "sticky-plan" (mevedel-core-store-info-get
                                             (mevedel-session-store-handle session)))))
           (previous (and saved (intern-soft saved))))
      (when (and saved (not (string-empty-p saved)))
        (setf (mevedel-session-permission-mode session) 'plan)
        (when (and (memq previous mevedel-permissions-modes) (not (eq previous 'plan)))
          (puthash session previous mevedel-plan--previous))))))

(add-hook 'mevedel-resume-functions #'mevedel-plan--resume)

;;;; The approved plan

(defun mevedel-plan-save (session plan)
  "Keep the approved PLAN in SESSION's metadata, when it is durable.
It is also archived as work://plans/accepted-TIMESTAMP.md, so every
accepted plan stays addressable; the archive's name and SHA-256 are
kept with it, for a fork to carry it over (see
`mevedel-session-list-fork')."
  (when (mevedel-session-durable-p session)
    (condition-case err
        (let* ((store (mevedel-session-store-handle session))
               (file (mevedel-plan--archive session plan)))
          (mevedel-core-store-info-set
           store `(("plan" . ,plan)
                   ("plan-archive" . ,(file-name-nondirectory file))
                   ("plan-archive-sha256" . ,(secure-hash 'sha256 plan)))))
      (error (display-warning 'mevedel (format "Cannot save the plan: %s"
                                               (error-message-string err)))))))

(defun mevedel-plan--archive (session plan)
  "Write PLAN to SESSION's local/plans/accepted-TIMESTAMP.md; return the file.
The timestamp is UTC to the second; a name already taken moves on to
the next second, so an archive is never overwritten."
  (let* ((dir (expand-file-name "plans" (mevedel-session-local-directory session)))
         (time (floor (float-time)))
         file)
    (make-directory dir t)
    (while (file-exists-p
            (setq file (expand-file-name
                        (format-time-string "accepted-%Y%m%dT%H%M%SZ.md" time t) dir)))
      (setq time (1+ time)))
    (let ((coding-system-for-write 'utf-8-unix))
      (write-region plan nil file nil 'silent))
    file))

(defun mevedel-plan-current (session)
  "Return the plan last approved in SESSION (also after a resume), or nil."
  (when (mevedel-session-storage-p session)
    (let ((plan (cdr (assoc "plan" (mevedel-core-store-info-get
                                    (mevedel-session-store-handle session))))))
      (and plan (not (string-empty-p plan)) plan))))

(defvar mevedel-plan--unattended (make-hash-table :test #'eq :weakness 'key)
  "Hash table: session to the plan proposed where nobody could approve it.")

(defun mevedel-plan-propose-unattended (session plan)
  "Keep PLAN, proposed in SESSION where nobody can approve it (headless).
The run reports it to the user; approving is continuing the session
outside Plan mode."
  (puthash session plan mevedel-plan--unattended))

(defun mevedel-plan-unattended (session)
  "Return the plan proposed in SESSION where nobody could approve it, or nil."
  (gethash session mevedel-plan--unattended))

(defun mevedel-plan-implementation-prompt (plan)
  "Return the task of the implementation turn of the approved PLAN."
  (concat "The user approved this plan.  Implement it now, step by step, tracking the \
steps with TaskWrite:\n\n" plan))

(defun mevedel-plan-approve (chat plan override)
  "Approve PLAN in CHAT: leave Plan, then start the implementation turn.
OVERRIDE non-nil is the permission mode of that turn (`edits'), kept
with that invocation only.  The turn starts once the Plan turn ends."
  (let ((session (mevedel-chat-session chat)))
    (mevedel-plan-leave session)
    (mevedel-plan-save session plan)
    (when override (puthash chat override mevedel-plan--next-override))
    (letrec ((start (lambda (ended outcome)
                      (when (eq ended chat)
                        (remove-hook 'mevedel-chat-idle-functions start)
                        (if (eq outcome 'done)
                            (run-at-time 0 nil #'mevedel-chat-send chat
                                         (mevedel-plan-implementation-prompt plan))
                          (remhash chat mevedel-plan--next-override))))))
      (if (mevedel-chat-turn chat)
          (add-hook 'mevedel-chat-idle-functions start)
        (mevedel-chat-send chat (mevedel-plan-implementation-prompt plan))))))

(provide 'mevedel-plan)
;;; mevedel-plan.el ends here
