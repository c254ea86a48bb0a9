;;; mevedel-review.el --- /review and /verify: a leaf agent checks a change  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; `mevedel-review' (/review in a view) has a reviewer agent look at a
;; change and answer with prioritized findings; `mevedel-verify'
;; (/verify) has a verifier agent check it adversarially and end with a
;; verdict.  Both share a target: the uncommitted changes, the changes
;; against a base branch's merge-base, a commit, the last commit, or
;; custom instructions.  In the composer: /review current, /review HEAD,
;; /review branch:NAME, /review commit:REV, /review ANY OTHER TEXT (custom
;; instructions); /review alone asks.
;;
;; A workflow runs in three steps, none of which waits on the main
;; thread:
;;
;; 1. Evidence.  The target's git commands run one after the other as
;;    asynchronous processes, each adding one section when it ends.
;;    The whole package is bounded (`mevedel-review-evidence-limit'); a
;;    command that runs longer than `mevedel-review-git-timeout' fails
;;    the preparation.  `mevedel-review-cancel', or killing the chat,
;;    stops it before any agent is started.
;; 2. The agent.  A context-isolated retained leaf, the reviewer or the
;;    verifier role, starts below the root (/root/review, then
;;    /root/review-2 ...) through the agent runtime's
;;    `mevedel-agent-spawn', with the evidence in its task.
;; 3. The result.  When the agent's turn settles, the complete report
;;    is read: the reviewer's JSON is checked against its shape and
;;    rendered as a numbered summary (invalid JSON falls back to the raw
;;    answer, said so), the verifier's one final VERDICT line is
;;    accepted or the report is marked rejected.  The chat gains one
;;    turn (`mevedel-chat-append-reply', after any running turn): a
;;    notice, a hidden <user_action> record the model reads, so later
;;    turns can refer to finding 2, and the summary as the reply.
;;
;; From the start the chat's transcript holds the workflow's handle
;; (`mevedel-chat-append-handle', after any running turn): an Agent
;; row the model never reads, which says what the workflow does, then
;; follows its agent (the runtime updates it as an Agent call's row)
;; and ends with the verdict or the findings' count; RET opens the
;; agent.  The mode line names the active workflows too.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-agent-roles)
(require 'mevedel-agent)
(require 'mevedel-chat)
(require 'mevedel-session-list)
(require 'mevedel-view)

(defgroup mevedel-review nil
  "Reviewing and verifying changes with a leaf agent."
  :group 'mevedel
  :prefix "mevedel-review-")

(defcustom mevedel-review-evidence-limit 150000
  "Most characters of git output one review or verification carries.
Output beyond it is cut, with a note saying so; the agent can run git
itself for the rest."
  :type 'natnum)

(defcustom mevedel-review-git-timeout 30
  "Seconds one git command preparing the evidence may take."
  :type 'natnum)

(defcustom mevedel-review-git-program "git"
  "The git executable."
  :type 'string)

;;;; Targets

(defun mevedel-review-parse-target (text)
  "Return the target TEXT, a composer argument, names.
Empty or \"current\": the uncommitted changes; \"HEAD\" or \"last\": the
last commit; \"branch:NAME\": the changes against NAME's merge-base;
\"commit:REV\": that commit; anything else is custom instructions.
A target is a plist with :kind `uncommitted', `base' (:branch),
`commit' (:rev), `last-commit' or `custom' (:instructions)."
  (let ((text (string-trim (or text ""))))
    (cond ((member text '("" "current")) (list :kind 'uncommitted))
          ((member text '("HEAD" "last")) (list :kind 'last-commit))
          ((string-match "\\`branch:\\(\\S-+\\)\\'" text)
           (list :kind 'base :branch (match-string 1 text)))
          ((string-match "\\`commit:\\(\\S-+\\)\\'" text)
           (list :kind 'commit :rev (match-string 1 text)))
          (t (list :kind 'custom :instructions text)))))

(defun mevedel-review-describe-target (target)
  "Return a short description of TARGET, for messages and notices."
  (pcase (plist-get target :kind)
    ('uncommitted "the uncommitted changes")
    ('base (format "the changes against %s" (plist-get target :branch)))
    ('commit (format "commit %s" (plist-get target :rev)))
    ('last-commit "the last commit")
    ('custom (format-message "`%s'" (truncate-string-to-width
                                     (plist-get target :instructions) 60 nil nil "…")))))

;;;; Running git

(cl-defstruct (mevedel-review--git (:constructor mevedel-review--git-make) (:copier nil))
  "One git command's run."
  process stderr timer (truncated nil) (timed-out nil) (finished nil))

(defun mevedel-review--git (directory args limit callback)
  "Run git with ARGS in DIRECTORY; call CALLBACK with the outcome.
The outcome is a plist: :exit (a number), :output (at most LIMIT
characters of standard output), :truncated, :error (standard error),
:timed-out.  Return the run (see `mevedel-review--git-stop').  The
callback is not called once the run was stopped."
  (let* ((out (generate-new-buffer " *mevedel-review-git*"))
         (err (generate-new-buffer " *mevedel-review-git-stderr*"))
         (run (mevedel-review--git-make))
         (process-environment (append '("GIT_TERMINAL_PROMPT=0" "GIT_OPTIONAL_LOCKS=0"
                                        "GIT_PAGER=cat" "PAGER=cat")
                                      process-environment))
         (default-directory (file-name-as-directory directory)))
    (setf (mevedel-review--git-process run)
          (make-process
           :name "mevedel-review-git"
           :buffer out
           :stderr err
           :noquery t
           :connection-type 'pipe
           :coding 'utf-8-unix
           :command (append (list mevedel-review-git-program "--no-pager"
                                  "-c" "core.quotepath=off" "-c" "color.ui=never")
                            args)
           :filter (lambda (process string)
                     (when (buffer-live-p out)
                       (with-current-buffer out
                         (goto-char (point-max))
                         (insert string)
                         (when (> (buffer-size) limit)
                           (delete-region (1+ limit) (point-max))
                           (setf (mevedel-review--git-truncated run) t)
                           (delete-process process)))))
           :sentinel (lambda (process _event)
                       (unless (or (process-live-p process)
                                   (mevedel-review--git-finished run))
                         (setf (mevedel-review--git-finished run) t)
                         (let ((outcome
                                (list :exit (process-exit-status process)
                                      :output (if (buffer-live-p out)
                                                  (with-current-buffer out (buffer-string))
                                                "")
                                      :error (if (buffer-live-p err)
                                                 (with-current-buffer err
                                                   (string-trim (buffer-string)))
                                               "")
                                      :truncated (mevedel-review--git-truncated run)
                                      :timed-out (mevedel-review--git-timed-out run))))
                           (mevedel-review--git-stop run)
                           (when callback (funcall callback outcome)))))))
    (setf (mevedel-review--git-stderr run) (get-buffer-process err)
          (mevedel-review--git-timer run)
          (run-at-time mevedel-review-git-timeout nil
                       (lambda ()
                         (setf (mevedel-review--git-timed-out run) t)
                         (when (process-live-p (mevedel-review--git-process run))
                           (delete-process (mevedel-review--git-process run))))))
    ;; The sentinel's buffers go with the run.
    (process-put (mevedel-review--git-process run) 'mevedel-review-buffers (list out err))
    run))

(defun mevedel-review--git-stop (run &optional silence)
  "Stop RUN and free its buffers; SILENCE non-nil drops its callback too."
  (when (timerp (mevedel-review--git-timer run))
    (cancel-timer (mevedel-review--git-timer run)))
  (let ((process (mevedel-review--git-process run)))
    (when silence
      (set-process-sentinel process #'ignore)
      (set-process-filter process #'ignore))
    (when (process-live-p process) (delete-process process))
    (when-let* ((stderr (mevedel-review--git-stderr run)))
      (when (process-live-p stderr) (delete-process stderr)))
    (dolist (buffer (process-get process 'mevedel-review-buffers))
      (when (buffer-live-p buffer) (kill-buffer buffer)))))

;;;; Evidence

(cl-defstruct (mevedel-review-job (:constructor mevedel-review--job-make) (:copier nil))
  "The preparation of a review's git evidence."
  directory target callback steps run
  (sections nil) (used 0) merge-base error (state 'running))

(defun mevedel-review--steps (target)
  "Return the git commands for the evidence of TARGET, in order.
Each step is a plist: :title, :args (a list, or a function of the
job returning one), :section (nil for a step that only learns a
fact), :keep (a function storing that fact in the job)."
  (pcase (plist-get target :kind)
    ('uncommitted
     (list (list :title "Status" :args '("status" "--short" "--branch" "--untracked-files=all")
                 :section t)
           (list :title "Staged changes" :args '("diff" "--cached" "--stat" "--patch" "-M")
                 :section t)
           (list :title "Unstaged changes" :args '("diff" "--stat" "--patch" "-M") :section t)))
    ('base
     (let ((branch (plist-get target :branch)))
       (list (list :title "Merge base" :args (list "merge-base" "HEAD" branch)
                   :keep (lambda (job output)
                           (setf (mevedel-review-job-merge-base job) (string-trim output))))
             (list :title (format "Commits since the merge base with %s" branch)
                   :args (lambda (job) (list "log" "--oneline" "--no-decorate"
                                             (concat (mevedel-review-job-merge-base job) "..HEAD")))
                   :section t)
             (list :title (format "Changes against the merge base with %s (working tree)" branch)
                   :args (lambda (job) (list "diff" "--stat" "--patch" "-M"
                                             (mevedel-review-job-merge-base job)))
                   :section t))))
    ((or 'commit 'last-commit)
     (let ((rev (or (plist-get target :rev) "HEAD")))
       (list (list :title (format "Commit %s" rev)
                   :args (list "show" "--stat" "--patch" "-M" "--format=fuller" rev "--")
                   :section t))))
    ('custom nil)))

(defun mevedel-review-prepare (directory target callback)
  "Prepare TARGET's git evidence in DIRECTORY; call CALLBACK with the job.
Each git command runs asynchronously and adds its section when it
ends; CALLBACK runs once, after the last, with the job: see
`mevedel-review-job-error' (a message, when a command failed) and
`mevedel-review-evidence'.  Custom instructions need no git; their
callback still runs from a timer, never from here.  Return the job;
`mevedel-review-job-cancel' stops it and silences CALLBACK."
  (let ((job (mevedel-review--job-make :directory directory :target target :callback callback
                                       :steps (mevedel-review--steps target))))
    (run-at-time 0 nil #'mevedel-review--next job)
    job))

(defun mevedel-review--next (job)
  "Run JOB's next git step, or finish JOB when none is left."
  (when (eq (mevedel-review-job-state job) 'running)
    (if-let* ((step (pop (mevedel-review-job-steps job))))
        (let* ((args (plist-get step :args))
               (args (if (functionp args) (funcall args job) args))
               (left (- mevedel-review-evidence-limit (mevedel-review-job-used job))))
          (if (and (plist-get step :section) (<= left 0))
              ;; The limit is reached: the rest is only named.
              (mevedel-review--step-done job step args (list :exit 0 :output "" :truncated t))
            (condition-case err
                (setf (mevedel-review-job-run job)
                      (mevedel-review--git (mevedel-review-job-directory job) args (max left 1)
                                           (lambda (outcome)
                                             (mevedel-review--step-done job step args outcome))))
              (error (mevedel-review--finish
                      job (format "cannot run %s: %s" mevedel-review-git-program
                                  (error-message-string err)))))))
      (mevedel-review--finish job nil))))

(defun mevedel-review--step-done (job step args outcome)
  "Record the OUTCOME of JOB's STEP, run with git ARGS, and go on."
  (when (eq (mevedel-review-job-state job) 'running)
    (setf (mevedel-review-job-run job) nil)
    (cond
     ((plist-get outcome :timed-out)
      (mevedel-review--finish job (format "git %s took longer than %d s" (string-join args " ")
                                          mevedel-review-git-timeout)))
     ((and (not (plist-get outcome :truncated)) (not (eql (plist-get outcome :exit) 0)))
      (mevedel-review--finish
       job (format "git %s failed (exit %s): %s" (string-join args " ") (plist-get outcome :exit)
                   (let ((text (plist-get outcome :error)))
                     (if (string-empty-p text) "no message" text)))))
     (t
      (let ((output (plist-get outcome :output)))
        (when-let* ((keep (plist-get step :keep)))
          (funcall keep job output))
        (when (plist-get step :section)
          (cl-incf (mevedel-review-job-used job) (length output))
          (push (list :title (plist-get step :title) :command (concat "git " (string-join args " "))
                      :output output :truncated (plist-get outcome :truncated))
                (mevedel-review-job-sections job)))
        (mevedel-review--next job))))))

(defun mevedel-review--finish (job error)
  "End JOB with ERROR (a message, or nil) and call its callback once."
  (setf (mevedel-review-job-state job) (if error 'failed 'done)
        (mevedel-review-job-error job) error
        (mevedel-review-job-sections job) (nreverse (mevedel-review-job-sections job)))
  (funcall (mevedel-review-job-callback job) job))

(defun mevedel-review-job-cancel (job)
  "Stop preparing JOB; its callback is never called.  Return non-nil if it ran."
  (when (eq (mevedel-review-job-state job) 'running)
    (setf (mevedel-review-job-state job) 'cancelled
          (mevedel-review-job-sections job) nil)
    (when-let* ((run (mevedel-review-job-run job)))
      (mevedel-review--git-stop run t))
    t))

(defun mevedel-review-evidence (job)
  "Return the evidence JOB prepared, as Markdown sections."
  (mapconcat
   (lambda (section)
     (let ((output (plist-get section :output)))
       (format "## %s (`%s`)\n\n%s\n%s"
               (plist-get section :title) (plist-get section :command)
               (if (string-blank-p output)
                   "(nothing)\n"
                 (concat "```\n" output (if (string-suffix-p "\n" output) "" "\n") "```\n"))
               (if (plist-get section :truncated)
                   (format "[Cut at the evidence limit of %d characters: run the command \
yourself for the rest.]\n" mevedel-review-evidence-limit)
                 ""))))
   (mevedel-review-job-sections job)
   "\n"))

;;;; The agents' tasks

(defun mevedel-review--task (kind target evidence directory)
  "Return the task of KIND's agent (`review' or `verify') for TARGET.
EVIDENCE is the prepared git output; DIRECTORY the workspace."
  (let ((what (mevedel-review-describe-target target))
        (custom (plist-get target :instructions)))
    (concat
     (pcase kind
       ('review
        (if custom
            (format "Review the code in the workspace %s as these instructions ask:\n\n%s\n"
                    directory custom)
          (format "Review %s in the workspace %s.%s\n" what directory
                  (if-let* ((base (plist-get target :branch)))
                      (format "  They are the changes of the working tree against the merge-base \
of HEAD and %s." base)
                    ""))))
       ('verify
        (if custom
            (format "Verify, adversarially, in the workspace %s:\n\n%s\n" directory custom)
          (format "Verify, adversarially, that %s in the workspace %s are correct: they do what \
they set out to do and break nothing.\n" what directory))))
     (if (string-empty-p evidence)
         ""
       (concat "\nThe git evidence, prepared for you (read the files around it as you need):\n\n"
               evidence))
     (if (eq (plist-get target :kind) 'uncommitted)
         "\nFiles marked ?? in the status are new and not yet tracked: read them too.\n"
       "")
     (pcase kind
       ('review "\nAnswer with the JSON object your instructions describe, and nothing else.\n")
       ('verify "\nRun or recommend the relevant checks where you are allowed to, and end \
your report with exactly one line VERDICT: PASS, VERDICT: FAIL or VERDICT: PARTIAL.\n")))))

;;;; The reviewer's JSON

(defun mevedel-review--json-text (text)
  "Return the candidate JSON texts in the reviewer's answer TEXT, best first.
The whole answer; a fenced block; the text from the first `{' to
the last `}'."
  (let ((candidates (list (string-trim text))))
    (when (string-match "```\\(?:json\\)?[ \t]*\n\\(\\(?:.\\|\n\\)*?\\)\n[ \t]*```" text)
      (setcdr (last candidates) (list (match-string 1 text))))
    (when-let* ((open (string-search "{" text))
                (close (cl-position ?} text :from-end t))
                ((< open close)))
      (setcdr (last candidates) (list (substring text open (1+ close)))))
    candidates))

(defun mevedel-review--parse-json (text)
  "Return the JSON object in TEXT as an alist, or nil."
  (cl-loop for candidate in (mevedel-review--json-text text)
           for value = (condition-case nil
                           (json-parse-string candidate :object-type 'alist :array-type 'list
                                              :null-object :null :false-object :false)
                         (error nil))
           when (and value (consp value)) return value))

(defun mevedel-review--field (object key)
  "Return KEY's value in the JSON OBJECT (an alist), or `:absent'."
  (if-let* ((cell (assq key object))) (cdr cell) :absent))

(defun mevedel-review--show (value)
  "Return the decoded JSON VALUE as the reviewer wrote it, roughly."
  (pcase value
    (:absent "missing")
    (:null "null")
    (:false "false")
    (_ (format "%S" value))))

(defun mevedel-review--score-p (value)
  "Return non-nil when VALUE is a number from 0 to 1."
  (and (numberp value) (<= 0 value 1)))

(defun mevedel-review--check-finding (finding index)
  "Return FINDING (the INDEXth, from 1) as a plist, or signal its defect."
  (let ((where (format "finding %d" index)))
    (unless (and (consp finding) (symbolp (car-safe (car finding))))
      (throw 'invalid (format "%s is not an object" where)))
    (let ((title (mevedel-review--field finding 'title))
          (body (mevedel-review--field finding 'body))
          (confidence (mevedel-review--field finding 'confidence_score))
          (priority (mevedel-review--field finding 'priority))
          (location (mevedel-review--field finding 'code_location)))
      (unless (and (stringp title) (not (string-blank-p title)))
        (throw 'invalid (format "%s has no title" where)))
      (unless (stringp body)
        (throw 'invalid (format "%s has no body" where)))
      (unless (mevedel-review--score-p confidence)
        (throw 'invalid (format "%s: confidence_score is %s, not a number from 0 to 1" where
                                (mevedel-review--show confidence))))
      (unless (or (memq priority '(:absent :null)) (and (integerp priority) (<= 0 priority 3)))
        (throw 'invalid (format "%s: priority is %s, not 0-3 or null" where
                                (mevedel-review--show priority))))
      (let* ((path (and (consp location) (mevedel-review--field location 'absolute_file_path)))
             (range (and (consp location) (mevedel-review--field location 'line_range)))
             (start (and (consp range) (mevedel-review--field range 'start)))
             (end (and (consp range) (mevedel-review--field range 'end))))
        (unless (and (stringp path) (not (string-blank-p path)))
          (throw 'invalid (format "%s has no code_location.absolute_file_path" where)))
        (unless (and (integerp start) (integerp end) (<= 1 start end))
          (throw 'invalid (format "%s: code_location.line_range is not {start, end} with \
1 <= start <= end" where)))
        (list :title (string-trim title) :body (string-trim body) :confidence confidence
              :priority (and (integerp priority) priority)
              :file path :start start :end end)))))

(defun mevedel-review-parse (text)
  "Return the reviewer's answer TEXT read as its JSON finding shape.
The value is a plist: :findings (plists :title :body :confidence
:priority (0-3 or nil for unspecified) :file :start :end), :correct
\(t or nil), :explanation, :confidence; or (:error REASON) when TEXT
holds no JSON object of that shape.  A fenced block, or prose around
the object, is tolerated."
  (let ((object (and (stringp text) (mevedel-review--parse-json text))))
    (if (not object)
        (list :error "the answer holds no JSON object")
      (let ((result
             (catch 'invalid
               (let ((findings (mevedel-review--field object 'findings))
                     (correctness (mevedel-review--field object 'overall_correctness))
                     (explanation (mevedel-review--field object 'overall_explanation))
                     (confidence (mevedel-review--field object 'overall_confidence_score)))
                 (when (eq findings :absent)
                   (throw 'invalid "findings is missing"))
                 (unless (listp findings)
                   (throw 'invalid "findings is not a list"))
                 (unless (member correctness '("patch is correct" "patch is incorrect"))
                   (throw 'invalid "overall_correctness is not \"patch is correct\" or \
\"patch is incorrect\""))
                 (unless (stringp explanation)
                   (throw 'invalid "overall_explanation is missing"))
                 (unless (mevedel-review--score-p confidence)
                   (throw 'invalid "overall_confidence_score is not a number from 0 to 1"))
                 (list :findings (cl-loop for finding in findings
                                          for index from 1
                                          collect (mevedel-review--check-finding finding index))
                       :correct (equal correctness "patch is correct")
                       :explanation (string-trim explanation)
                       :confidence confidence)))))
        (if (stringp result) (list :error result) result)))))

;;;; Rendering

(defun mevedel-review--place (finding directory)
  "Return FINDING's place, relative to DIRECTORY when inside it."
  (let* ((file (plist-get finding :file))
         (root (file-name-as-directory (expand-file-name directory)))
         (name (if (and (file-name-absolute-p file) (string-prefix-p root (expand-file-name file)))
                   (file-relative-name (expand-file-name file) root)
                 file)))
    (if (= (plist-get finding :start) (plist-get finding :end))
        (format "%s:%d" name (plist-get finding :start))
      (format "%s:%d-%d" name (plist-get finding :start) (plist-get finding :end)))))

(defun mevedel-review--indent (text)
  "Return TEXT with every line indented by three spaces."
  (mapconcat (lambda (line) (if (string-empty-p line) "" (concat "   " line)))
             (split-string text "\n") "\n"))

(defun mevedel-review-render (review what directory)
  "Return REVIEW (from `mevedel-review-parse') as a numbered summary.
WHAT describes the target; places are relative to DIRECTORY when
inside it, so the view makes them buttons."
  (let ((findings (plist-get review :findings)))
    (concat
     (format "Review of %s: the patch is %s (confidence %.2f).\n"
             what (if (plist-get review :correct) "correct" "incorrect")
             (plist-get review :confidence))
     (if (string-empty-p (plist-get review :explanation))
         ""
       (concat (plist-get review :explanation) "\n"))
     "\n"
     (if (null findings)
         "No findings.\n"
       (concat
        (format "%d finding%s:\n" (length findings) (if (cdr findings) "s" ""))
        (cl-loop for finding in findings
                 for index from 1
                 concat (format "\n%d. %s%s\n   %s · confidence %.2f\n%s"
                                index
                                (if-let* ((priority (plist-get finding :priority)))
                                    (format "[P%d] " priority)
                                  "")
                                (plist-get finding :title)
                                (mevedel-review--place finding directory)
                                (plist-get finding :confidence)
                                (if (string-empty-p (plist-get finding :body))
                                    ""
                                  (concat (mevedel-review--indent (plist-get finding :body))
                                          "\n")))))))))

;;;; Workflows

(cl-defstruct (mevedel-review-workflow (:constructor mevedel-review--workflow-make)
                                       (:copier nil))
  "One /review or /verify of a chat."
  chat kind target job path (state 'preparing) result
  ;; The ID of its handle row in the chat's transcript; `placed' t
  ;; once the row is there (`waiting' for the chat's turn to end);
  ;; what the row says of it besides its agent's status
  ;; (`mevedel-review--handle-data').
  (row (format "mevedel-handle-%x" (random most-positive-fixnum))) placed note)

(defvar mevedel-review--workflows nil
  "The workflows still preparing or running, newest first.")

(defun mevedel-review--label (workflow)
  "Return WORKFLOW's command name and target, e.g. \"/review of commit abc\"."
  (format "/%s of %s" (mevedel-review-workflow-kind workflow)
          (mevedel-review-describe-target (mevedel-review-workflow-target workflow))))

(defun mevedel-review--forget (workflow)
  "Drop WORKFLOW from the active ones."
  (setq mevedel-review--workflows (delq workflow mevedel-review--workflows))
  (force-mode-line-update t))

(defun mevedel-review-mode-line ()
  "Return what the /review and /verify of this view's chat are doing, or nil.
The view shows it in its mode line while one is active."
  (when-let* ((chat (mevedel-view-chat (current-buffer)))
              (active (cl-remove-if-not (lambda (workflow)
                                          (eq (mevedel-review-workflow-chat workflow) chat))
                                        mevedel-review--workflows)))
    (concat " "
            (mapconcat (lambda (workflow)
                         (format "[%s: %s]" (mevedel-review-workflow-kind workflow)
                                 (if (eq (mevedel-review-workflow-state workflow) 'preparing)
                                     "preparing the evidence"
                                   (mevedel-review-workflow-path workflow))))
                       (reverse active) " "))))

(defun mevedel-review--handle-data (workflow)
  "Return the render-data of WORKFLOW's handle row now.
It is an Agent row's (mevedel-tool-agent.el draws it, RET opens the
agent), with :workflow naming the workflow; before the agent starts,
or when it never does, its :status says what the workflow does."
  (let* ((chat (mevedel-review-workflow-chat workflow))
         (path (mevedel-review-workflow-path workflow))
         (agent (and path (mevedel-agent-status chat path))))
    (append (list :workflow (if (eq (mevedel-review-workflow-kind workflow) 'review)
                                "Review" "Verify"))
            (unless agent
              (list :status (pcase (mevedel-review-workflow-state workflow)
                              ('preparing "preparing the evidence")
                              (state (symbol-name state)))))
            (mevedel-review-workflow-note workflow)
            (or agent (and path (list :path path))))))

(defun mevedel-review--place-handle (workflow)
  "Put WORKFLOW's handle row in its chat's transcript, once.
A chat running a turn gets it when the turn ends (`placed' is
`waiting' meanwhile), with what the row says then."
  (let ((chat (mevedel-review-workflow-chat workflow)))
    (when (and (not (eq (mevedel-review-workflow-placed workflow) t))
               (buffer-live-p (mevedel-chat-data-buffer chat)))
      (cond
       ((not (mevedel-chat-busy-p chat))
        (mevedel-chat-append-handle
         chat (mevedel-review--label workflow) (mevedel-review-workflow-row workflow) "Agent"
         (list :task_name (symbol-name (mevedel-review-workflow-kind workflow))
               :message (mevedel-review--label workflow))
         (mevedel-review--handle-data workflow))
        (setf (mevedel-review-workflow-placed workflow) t))
       ((not (mevedel-review-workflow-placed workflow))
        (setf (mevedel-review-workflow-placed workflow) 'waiting)
        (letrec ((wait (lambda (idle _outcome)
                         (when (eq idle chat)
                           (remove-hook 'mevedel-chat-idle-functions wait)
                           ;; After the hook: a queued message may start the next turn.
                           (run-at-time 0 nil (lambda ()
                                                (when (eq (mevedel-review-workflow-placed workflow)
                                                          'waiting)
                                                  (setf (mevedel-review-workflow-placed workflow) nil)
                                                  (mevedel-review--place-handle workflow))))))))
          (add-hook 'mevedel-chat-idle-functions wait)))))))

(defun mevedel-review--update-handle (workflow &rest note)
  "Show WORKFLOW's state on its handle row; NOTE is more of it (:summary TEXT).
The agent keeps its part of the row current itself."
  (when note (setf (mevedel-review-workflow-note workflow) note))
  (if (not (eq (mevedel-review-workflow-placed workflow) t))
      (mevedel-review--place-handle workflow)
    (let ((data (mevedel-review--handle-data workflow)))
      (ignore-errors
        (mevedel-chat-update-render-data
         (mevedel-review-workflow-chat workflow) (mevedel-review-workflow-row workflow)
         (lambda (render-data)
           (let ((new (copy-sequence render-data)))
             (cl-loop for (key value) on data by #'cddr
                      do (setq new (plist-put new key value)))
             new))
         'review-handle)))))

(defun mevedel-review--summary (kind outcome payload)
  "Return the handle's summary of a KIND workflow's settled PAYLOAD, or nil.
OUTCOME is how the turn ended; the row shows it (and a verdict) already."
  (when (eq outcome 'completed)
    (if (eq kind 'review)
        (let ((review (mevedel-review-parse payload)))
          (if (plist-get review :error)
              "no findings JSON"
            (format "patch is %s · %d finding%s"
                    (if (plist-get review :correct) "correct" "incorrect")
                    (length (plist-get review :findings))
                    (if (= 1 (length (plist-get review :findings))) "" "s"))))
      (unless (mevedel-agent-parse-verdict payload)
        "verdict rejected"))))

(defun mevedel-review--show-in-view (chat)
  "Have CHAT's view show the active workflows in its mode line."
  (with-current-buffer (mevedel-view-buffer chat)
    (setq-local mode-line-process '(:eval (mevedel-review-mode-line))))
  (force-mode-line-update t))

(defun mevedel-review-start (chat kind target)
  "Start the workflow KIND (`review' or `verify') of TARGET in CHAT.
Return the workflow; its evidence is prepared in the background and
its agent started after that."
  (let ((workflow (mevedel-review--workflow-make :chat chat :kind kind :target target)))
    (setf (mevedel-review-workflow-job workflow)
          (mevedel-review-prepare (mevedel-chat-root chat) target
                                  (lambda (job) (mevedel-review--prepared workflow job))))
    (push workflow mevedel-review--workflows)
    (mevedel-review--show-in-view chat)
    (mevedel-review--place-handle workflow)
    (message "Preparing %s…" (mevedel-review--label workflow))
    workflow))

(defun mevedel-review--abort (chat)
  "Stop the preparations of CHAT (`mevedel-chat-abort-functions').
Return non-nil when one was stopped."
  (let ((stopped nil))
    (dolist (workflow mevedel-review--workflows)
      (when (and (eq (mevedel-review-workflow-chat workflow) chat)
                 (eq (mevedel-review-workflow-state workflow) 'preparing))
        (mevedel-review--cancel workflow)
        (message "Cancelled %s" (mevedel-review--label workflow))
        (setq stopped t)))
    stopped))

(add-hook 'mevedel-chat-abort-functions #'mevedel-review--abort)

(defun mevedel-review--prepared (workflow job)
  "Start WORKFLOW's agent with the evidence of JOB, or report JOB's failure."
  (let ((chat (mevedel-review-workflow-chat workflow)))
    (cond
     ((not (buffer-live-p (mevedel-chat-data-buffer chat)))
      (mevedel-review--forget workflow))
     ((mevedel-review-job-error job)
      (setf (mevedel-review-workflow-state workflow) 'failed)
      (mevedel-review--forget workflow)
      (mevedel-review--update-handle workflow :summary (mevedel-review-job-error job))
      (message "%s failed: %s" (mevedel-review--label workflow) (mevedel-review-job-error job)))
     (t
      (let ((kind (mevedel-review-workflow-kind workflow)))
        (condition-case err
            (let ((path (mevedel-agent-spawn
                         chat
                         (list :task_name (symbol-name kind)
                               :role (if (eq kind 'review) "reviewer" "verifier")
                               :context "none"
                               :message (mevedel-review--task
                                         kind (mevedel-review-workflow-target workflow)
                                         (mevedel-review-evidence job) (mevedel-chat-root chat)))
                         (lambda (path outcome payload)
                           (mevedel-review--settled workflow path outcome payload))
                         (mevedel-review-workflow-row workflow))))
              (when (eq (mevedel-review-workflow-state workflow) 'preparing)
                (setf (mevedel-review-workflow-state workflow) 'running
                      (mevedel-review-workflow-path workflow) path)
                (mevedel-review--update-handle workflow)
                (force-mode-line-update t)
                (message "%s: %s is working" (mevedel-review--label workflow) path)))
          (error
           (setf (mevedel-review-workflow-state workflow) 'failed)
           (mevedel-review--forget workflow)
           (mevedel-review--update-handle workflow :summary (error-message-string err))
           (message "%s could not start: %s" (mevedel-review--label workflow)
                    (error-message-string err)))))))))

(defun mevedel-review--user-action (workflow path outcome payload)
  "Return the hidden record of WORKFLOW's result for the model.
PATH is the agent, OUTCOME how its turn ended, PAYLOAD its report."
  (format "<user_action>\n<context>The user ran %s. The %s agent %s ended its turn (%s); \
its complete report follows. The summary after this block numbers the findings the same \
way.</context>\n<action>%s</action>\n<results>\n%s\n</results>\n</user_action>"
          (mevedel-review--label workflow)
          (if (eq (mevedel-review-workflow-kind workflow) 'review) "reviewer" "verifier")
          path outcome (mevedel-review-workflow-kind workflow) (string-trim (or payload ""))))

(defun mevedel-review-result-text (kind what path outcome payload directory)
  "Return the reply of a KIND workflow (`review' or `verify') of WHAT.
PATH is the agent, OUTCOME how its turn ended (`completed', `failed'
or `interrupted'), PAYLOAD its complete report, DIRECTORY the
workspace."
  (let ((payload (string-trim (or payload ""))))
    (cond
     ((not (eq outcome 'completed))
      (format "The %s of %s by %s %s.%s" kind what path
              (if (eq outcome 'interrupted) "was interrupted" "failed")
              (if (string-empty-p payload) "" (concat "\n\n" payload))))
     ((eq kind 'review)
      (let ((review (mevedel-review-parse payload)))
        (if (plist-get review :error)
            (format "The reviewer %s did not answer with the findings JSON (%s); its answer \
as written:\n\n%s" path (plist-get review :error) payload)
          (mevedel-review-render review what directory))))
     (t
      (let ((verdict (mevedel-agent-parse-verdict payload)))
        (concat (if verdict
                    (format "Verification of %s by %s: VERDICT: %s\n\n" what path verdict)
                  (format "Verification of %s by %s: verdict rejected (the report must end with \
exactly one line VERDICT: PASS, VERDICT: FAIL or VERDICT: PARTIAL).\n\n" what path))
                payload))))))

(defun mevedel-review--settled (workflow path outcome payload)
  "Show the result of WORKFLOW's agent PATH: OUTCOME and its PAYLOAD."
  (unless (memq (mevedel-review-workflow-state workflow) '(done cancelled))
    (let* ((chat (mevedel-review-workflow-chat workflow))
           (kind (mevedel-review-workflow-kind workflow))
           (what (mevedel-review-describe-target (mevedel-review-workflow-target workflow)))
           (reply (mevedel-review-result-text kind what path outcome payload
                                              (mevedel-chat-root chat))))
      (setf (mevedel-review-workflow-state workflow) 'done
            (mevedel-review-workflow-path workflow) path
            (mevedel-review-workflow-result workflow)
            (if (eq kind 'verify)
                (and (eq outcome 'completed) (mevedel-agent-parse-verdict payload))
              (and (eq outcome 'completed) (mevedel-review-parse payload))))
      (mevedel-review--forget workflow)
      (mevedel-review--update-handle workflow :summary (mevedel-review--summary kind outcome payload))
      (mevedel-review--deliver
       workflow (format "%s by %s" (mevedel-review--label workflow) path)
       (mevedel-review--user-action workflow path outcome payload) reply))))

(defun mevedel-review--deliver (workflow notice hidden reply)
  "Append NOTICE, HIDDEN and REPLY to WORKFLOW's chat once it is idle.
Its handle row goes first, when it is not there yet."
  (let ((chat (mevedel-review-workflow-chat workflow)))
    (when (buffer-live-p (mevedel-chat-data-buffer chat))
      (if (not (mevedel-chat-busy-p chat))
          (progn
            (mevedel-review--place-handle workflow)
            (mevedel-chat-append-reply chat notice hidden reply))
        (letrec ((wait (lambda (idle _outcome)
                         (when (eq idle chat)
                           (remove-hook 'mevedel-chat-idle-functions wait)
                           ;; After the hook: a queued message may start the next turn.
                           (run-at-time 0 nil #'mevedel-review--deliver
                                        workflow notice hidden reply)))))
          (add-hook 'mevedel-chat-idle-functions wait))))))

(defun mevedel-review--cancel (workflow)
  "Cancel WORKFLOW: stop its preparation, or interrupt its agent."
  (pcase (mevedel-review-workflow-state workflow)
    ('preparing
     (mevedel-review-job-cancel (mevedel-review-workflow-job workflow))
     (setf (mevedel-review-workflow-state workflow) 'cancelled)
     (mevedel-review--forget workflow)
     (mevedel-review--update-handle workflow)
     t)
    ('running
     (mevedel-agent-interrupt (mevedel-review-workflow-chat workflow)
                              (mevedel-review-workflow-path workflow))
     t)))

;;;; Commands

(defvar mevedel-review-open-functions nil
  "Functions of no argument that open the current workspace's session.
The commands below run them, until one returns the view, when no
session is live there; without any, `mevedel-session-list-open' opens it.
The entry point adds `mevedel', which loads the whole view first: this
file cannot call it, being below it.")

(defun mevedel-review--chat ()
  "Return the chat of the current view, else of the current workspace.
Without one, open the workspace's session (`mevedel-review-open-functions')."
  (or (and (derived-mode-p 'mevedel-view-mode) (mevedel-view-chat))
      (mevedel-chat-get (mevedel-chat-workspace-root))
      (progn (if mevedel-review-open-functions
                 (run-hook-with-args-until-success 'mevedel-review-open-functions)
               (mevedel-session-list-open))
             (mevedel-view-chat))))

(defvar mevedel-review--lists (make-hash-table :test #'equal)
  "Workspace root -> (TIME BRANCHES COMMITS PROCESSES) of the git lists read.")

(defun mevedel-review--refresh-lists (root)
  "Start reading ROOT's branches and recent commits in the background.
Return the entry of `mevedel-review--lists', whose lists fill in as
the commands end."
  (let ((entry (list (float-time) nil nil nil)))
    (puthash root entry mevedel-review--lists)
    (let ((runs
           (list (mevedel-review--git
                  root '("for-each-ref" "--sort=-committerdate" "--format=%(refname:short)"
                         "refs/heads" "refs/remotes")
                  100000
                  (lambda (outcome)
                    (setf (nth 1 entry) (or (split-string (plist-get outcome :output) "\n" t)
                                            (list :none)))))
                 (mevedel-review--git
                  root '("log" "-n" "50" "--format=%h %s") 100000
                  (lambda (outcome)
                    (setf (nth 2 entry) (or (split-string (plist-get outcome :output) "\n" t)
                                            (list :none))))))))
      (setf (nth 3 entry) runs))
    entry))

(defun mevedel-review--lists (root)
  "Return ROOT's entry of `mevedel-review--lists', refreshed when older than 10 s."
  (let ((entry (gethash root mevedel-review--lists)))
    (if (and entry (< (- (float-time) (car entry)) 10))
        entry
      (mevedel-review--refresh-lists root))))

(defun mevedel-review--await (entry index)
  "Return the list at INDEX of the git lists ENTRY, waiting at most a second."
  (let ((deadline (+ (float-time) 1.0)))
    (while (and (null (nth index entry)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (remq :none (nth index entry))))

(defun mevedel-review-read-target (directory)
  "Ask which change to look at in the workspace DIRECTORY; return the target.
The branch and commit lists are read in the background while the
first question is open."
  (let* ((entry (mevedel-review--lists directory))
         (choices '(("Uncommitted changes" . uncommitted)
                    ("Against a base branch (its merge-base)…" . base)
                    ("A commit…" . commit)
                    ("The last commit" . last-commit)
                    ("Custom instructions…" . custom)))
         (kind (cdr (assoc (completing-read "Look at: " choices nil t) choices))))
    (pcase kind
      ('base
       (let* ((branches (mevedel-review--await entry 1))
              (default (cl-find-if (lambda (b) (member b branches))
                                   '("main" "master" "origin/main" "origin/master"))))
         (list :kind 'base
               :branch (completing-read (format-prompt "Base branch" default)
                                        branches nil nil nil nil default))))
      ('commit
       (let ((choice (completing-read "Commit: " (mevedel-review--await entry 2))))
         (list :kind 'commit :rev (car (split-string choice)))))
      ('custom
       (let ((text (read-string "Instructions: ")))
         (when (string-blank-p text) (user-error "No instructions given"))
         (list :kind 'custom :instructions text)))
      (_ (list :kind kind)))))

;;;###autoload
(defun mevedel-review (&optional target)
  "Have a reviewer agent review a change and show its numbered findings.
Interactively, ask for TARGET: the uncommitted changes, the changes
against a base branch, a commit, the last commit or custom
instructions (see `mevedel-review-parse-target')."
  (interactive)
  (let ((chat (mevedel-review--chat)))
    (mevedel-review-start chat 'review
                          (or target (mevedel-review-read-target (mevedel-chat-root chat))))))

;;;###autoload
(defun mevedel-verify (&optional target)
  "Have a verifier agent check a change adversarially and show its verdict.
TARGET is as for `mevedel-review'."
  (interactive)
  (let ((chat (mevedel-review--chat)))
    (mevedel-review-start chat 'verify
                          (or target (mevedel-review-read-target (mevedel-chat-root chat))))))

(defun mevedel-review-cancel ()
  "Cancel the newest /review or /verify of this session.
One still preparing its evidence stops before any agent starts; a
running one has its agent interrupted (the agent stays, for a look or
a follow-up)."
  (interactive)
  (let* ((chat (mevedel-review--chat))
         (workflow (or (cl-find chat mevedel-review--workflows
                                :key #'mevedel-review-workflow-chat)
                       (user-error "No /review or /verify is running in this session"))))
    (when (mevedel-review--cancel workflow)
      (message "Cancelled %s" (mevedel-review--label workflow)))))

;;;; In the view

(defun mevedel-review--slash (kind)
  "Return the composer command running workflow KIND."
  (lambda (chat argument)
    (mevedel-review-start chat kind
                          (if (string-blank-p argument)
                              (mevedel-review-read-target (mevedel-chat-root chat))
                            (mevedel-review-parse-target argument)))))

(defun mevedel-review--complete (chat)
  "Return the composer's target forms for CHAT, branches from the last listing."
  (let ((entry (gethash (mevedel-chat-root chat) mevedel-review--lists)))
    (unless (and entry (< (- (float-time) (car entry)) 10))
      (mevedel-review--refresh-lists (mevedel-chat-root chat)))
    (append '("current" "HEAD")
            (mapcar (lambda (branch) (concat "branch:" branch)) (remq :none (nth 1 entry)))
            (mapcar (lambda (line) (concat "commit:" (car (split-string line))))
                    (remq :none (nth 2 entry))))))

(mevedel-view-register-slash-command "review"
  (mevedel-review--slash 'review)
  "review changes (/review [current|HEAD|branch:B|commit:R|instructions])"
  #'mevedel-review--complete)
(mevedel-view-register-slash-command "verify"
  (mevedel-review--slash 'verify)
  "verify changes (/verify [current|HEAD|branch:B|commit:R|instructions])"
  #'mevedel-review--complete)

(provide 'mevedel-review)
;;; mevedel-review.el ends here
