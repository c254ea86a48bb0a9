;;; review-test.el --- Tests of /review and /verify  -*- lexical-binding: t; -*-

;;; Commentary:

;; Targets, the git evidence (in a temporary repository: asynchronous,
;; bounded, cancellable, timed out), the reviewer's JSON (valid,
;; invalid, edge cases), the numbered summary (golden text), verdicts,
;; and the whole workflow from the composer's /review and /verify
;; through a stubbed `mevedel-agent-spawn' to the turn in the view.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-review)
(require 'mevedel-review-test-helpers)
(mevedel--load)

(defun review-test--git (dir &rest args)
  "Run git with ARGS in DIR synchronously (test setup only); return its output."
  (with-temp-buffer
    (let ((default-directory (file-name-as-directory dir)))
      (unless (zerop (apply #'call-process "git" nil t nil
                            "-c" "user.name=Test" "-c" "user.email=test@example.invalid"
                            "-c" "init.defaultBranch=main" "-c" "commit.gpgsign=false" args))
        (error "git %s failed: %s" (string-join args " ") (buffer-string)))
      (buffer-string))))

(defun review-test--write (dir name text)
  "Write TEXT to NAME under DIR."
  (let ((file (expand-file-name name dir)))
    (make-directory (file-name-directory file) t)
    (with-temp-file file (insert text))))

(defun review-test--repo ()
  "Return a fresh repository: main has lisp/a.el; feature adds a commit."
  (let ((dir (file-name-as-directory (make-temp-file "review-repo-" t))))
    (review-test--git dir "init" "-q")
    (review-test--write dir "lisp/a.el" "(defun a ()\n  1)\n")
    (review-test--git dir "add" ".")
    (review-test--git dir "commit" "-q" "-m" "Add a")
    (review-test--git dir "checkout" "-q" "-b" "feature")
    (review-test--write dir "lisp/a.el" "(defun a ()\n  2)\n")
    (review-test--git dir "commit" "-q" "-am" "Make a return 2")
    dir))

(defun review-test--prepare (dir target)
  "Prepare TARGET's evidence in DIR and wait for it; return the job."
  (let* ((done nil)
         (job (mevedel-review-prepare dir target (lambda (job) (setq done job)))))
    ;; Never synchronous: the callback waits for the processes.
    (should-not done)
    (mevedel-test-wait-until done 20)
    (should (eq done job))
    job))

;;;; Targets

(ert-deftest mevedel-review:targets ()
  (should (equal (mevedel-review-parse-target "") '(:kind uncommitted)))
  (should (equal (mevedel-review-parse-target " current ") '(:kind uncommitted)))
  (should (equal (mevedel-review-parse-target "HEAD") '(:kind last-commit)))
  (should (equal (mevedel-review-parse-target "branch:main") '(:kind base :branch "main")))
  (should (equal (mevedel-review-parse-target "commit:abc123") '(:kind commit :rev "abc123")))
  (should (equal (mevedel-review-parse-target "look at the parser only")
                 '(:kind custom :instructions "look at the parser only")))
  (should (equal (mevedel-review-describe-target '(:kind base :branch "main"))
                 "the changes against main")))

;;;; Evidence

(ert-deftest mevedel-review:evidence-of-each-target ()
  (let ((dir (review-test--repo)))
    (unwind-protect
        (progn
          ;; Uncommitted: a modified file, a staged new one, an untracked one.
          (review-test--write dir "lisp/a.el" "(defun a ()\n  3)\n")
          (review-test--write dir "lisp/b.el" "(defun b () nil)\n")
          (review-test--git dir "add" "lisp/b.el")
          (review-test--write dir "notes.txt" "untracked\n")
          (let* ((job (review-test--prepare dir '(:kind uncommitted)))
                 (evidence (mevedel-review-evidence job)))
            (should-not (mevedel-review-job-error job))
            (should (equal (mapcar (lambda (s) (plist-get s :title)) (mevedel-review-job-sections job))
                           '("Status" "Staged changes" "Unstaged changes")))
            (should (string-match-p "?? notes.txt" evidence))
            (should (string-match-p "+(defun b () nil)" evidence))
            (should (string-match-p "-  2)\n\\+  3)" evidence))
            (should (string-match-p "## Staged changes (`git diff --cached" evidence)))
          ;; Against main's merge-base: the feature commit and the working tree.
          (let* ((job (review-test--prepare dir '(:kind base :branch "main")))
                 (evidence (mevedel-review-evidence job)))
            (should-not (mevedel-review-job-error job))
            (should (string-match-p "Make a return 2" evidence))
            (should (string-match-p "-  1)\n\\+  3)" evidence))
            (should (equal (mevedel-review-job-merge-base job)
                           (string-trim (review-test--git dir "rev-parse" "main")))))
          ;; The last commit, and a named one.
          (let ((evidence (mevedel-review-evidence (review-test--prepare dir '(:kind last-commit)))))
            (should (string-match-p "Make a return 2" evidence))
            (should (string-match-p "-  1)\n\\+  2)" evidence)))
          (let* ((rev (string-trim (review-test--git dir "rev-parse" "--short" "main")))
                 (evidence (mevedel-review-evidence
                            (review-test--prepare dir (list :kind 'commit :rev rev)))))
            (should (string-match-p "Add a" evidence))
            (should-not (string-match-p "Make a return 2" evidence)))
          ;; Custom instructions need no git, and still answer later.
          (let ((job (review-test--prepare dir '(:kind custom :instructions "x"))))
            (should (equal (mevedel-review-evidence job) ""))))
      (delete-directory dir t))))

(ert-deftest mevedel-review:evidence-failures-say-what-failed ()
  (let ((dir (review-test--repo))
        (plain (make-temp-file "review-plain-" t)))
    (unwind-protect
        (progn
          (let ((job (review-test--prepare dir '(:kind base :branch "no-such-branch"))))
            (should (string-match-p "git merge-base HEAD no-such-branch failed (exit 128)"
                                    (mevedel-review-job-error job))))
          (let ((job (review-test--prepare plain '(:kind uncommitted))))
            (should (string-match-p "git status .* failed.*not a git repository"
                                    (downcase (mevedel-review-job-error job))))))
      (delete-directory dir t)
      (delete-directory plain t)))
  ;; No git at all, or a workspace gone: the preparation fails, saying so.
  (let ((mevedel-review-git-program "/nonexistent/git"))
    (should (string-match-p "cannot run /nonexistent/git"
                            (mevedel-review-job-error
                             (review-test--prepare temporary-file-directory '(:kind uncommitted))))))
  (should (string-match-p "cannot run git"
                          (mevedel-review-job-error
                           (review-test--prepare "/nonexistent/workspace/" '(:kind uncommitted))))))

(ert-deftest mevedel-review:evidence-is-bounded ()
  (let ((dir (review-test--repo))
        (mevedel-review-evidence-limit 300))
    (unwind-protect
        (progn
          (review-test--write dir "big.txt" (make-string 5000 ?x))
          (review-test--git dir "add" "big.txt")
          (let* ((job (review-test--prepare dir '(:kind uncommitted)))
                 (evidence (mevedel-review-evidence job)))
            (should-not (mevedel-review-job-error job))
            (should (<= (cl-loop for s in (mevedel-review-job-sections job)
                                 sum (length (plist-get s :output)))
                        300))
            (should (string-match-p "Cut at the evidence limit of 300 characters" evidence))
            ;; The sections after the limit are named, not run.
            (should (= (length (mevedel-review-job-sections job)) 3))))
      (delete-directory dir t))))

(defun review-test--slow-git (seconds)
  "Return a fake git program that sleeps SECONDS, and its marker."
  (let ((marker (format "review-slow-%d" (random 1000000)))
        (file (make-temp-file "review-slow-git-")))
    (with-temp-file file
      (insert (format "#!/bin/sh\n# %s\nexec sleep %d\n" marker seconds)))
    (set-file-modes file #o755)
    (cons file marker)))

(ert-deftest mevedel-review:evidence-cancel-and-timeout ()
  (let* ((dir (review-test--repo))
         (slow (review-test--slow-git 30))
         (mevedel-review-git-program (car slow)))
    (unwind-protect
        (progn
          ;; Cancelled while git runs: the process goes, the callback never comes.
          (let* ((called nil)
                 (job (mevedel-review-prepare dir '(:kind uncommitted) (lambda (_) (setq called t)))))
            (mevedel-test-wait-until (mevedel-review-job-run job) 5)
            (let ((process (mevedel-review--git-process (mevedel-review-job-run job))))
              (should (process-live-p process))
              (should (mevedel-review-job-cancel job))
              (should-not (process-live-p process)))
            (should (eq (mevedel-review-job-state job) 'cancelled))
            (mevedel-test-sleep 0.3)
            (should-not called)
            (should-not (mevedel-review-job-cancel job)))
          ;; Cancelled before the first command: none starts.
          (let* ((called nil)
                 (job (mevedel-review-prepare dir '(:kind uncommitted) (lambda (_) (setq called t)))))
            (mevedel-review-job-cancel job)
            (mevedel-test-sleep 0.3)
            (should-not (mevedel-review-job-run job))
            (should-not called))
          ;; A command past the timeout fails the preparation.
          (let* ((mevedel-review-git-timeout 1)
                 (job (review-test--prepare dir '(:kind uncommitted))))
            (should (string-match-p "took longer than 1 s" (mevedel-review-job-error job))))
          (should-not (mevedel-test-processes-running (cdr slow))))
      (delete-file (car slow))
      (delete-directory dir t))))

;;;; The reviewer's JSON

(ert-deftest mevedel-review:json-valid-and-rendered ()
  (let* ((dir "/work/proj/")
         (review (mevedel-review-parse (mevedel-review-test-answer dir))))
    (should-not (plist-get review :error))
    (should-not (plist-get review :correct))
    (should (= (length (plist-get review :findings)) 3))
    (should (equal (mapcar (lambda (f) (plist-get f :priority)) (plist-get review :findings))
                   '(1 nil 3)))
    (should (equal (mevedel-review-render review "the uncommitted changes" dir)
                   mevedel-review-test-rendered))))

(ert-deftest mevedel-review:json-edge-cases ()
  (let ((finding (lambda (&rest extra)
                   (json-encode
                    `((findings . [,(append extra
                                            '((title . "T") (body . "B") (confidence_score . 0.5)
                                              (code_location . ((absolute_file_path . "/x.el")
                                                                (line_range . ((start . 3) (end . 3)))))))])
                      (overall_correctness . "patch is correct")
                      (overall_explanation . "Fine.")
                      (overall_confidence_score . 0.9))))))
    ;; Priority null and omitted both mean unspecified.
    (should (equal (plist-get (car (plist-get (mevedel-review-parse (funcall finding '(priority)))
                                              :findings))
                              :priority)
                   nil))
    (should-not (plist-get (mevedel-review-parse (funcall finding)) :error))
    (should (equal (plist-get (car (plist-get (mevedel-review-parse (funcall finding '(priority . 0)))
                                              :findings))
                              :priority)
                   0))
    ;; A fenced block and prose around the object are read.
    (should-not (plist-get (mevedel-review-parse (concat "Here it is:\n```json\n" (funcall finding)
                                                         "\n```\n"))
                           :error))
    (should-not (plist-get (mevedel-review-parse (concat "Sure. " (funcall finding) " Done."))
                           :error))
    ;; An empty list of findings renders as such.
    (let ((review (mevedel-review-parse "{\"findings\": [], \"overall_correctness\": \"patch is correct\",
\"overall_explanation\": \"\", \"overall_confidence_score\": 1}")))
      (should (plist-get review :correct))
      (should (equal (mevedel-review-render review "commit abc" "/")
                     "Review of commit abc: the patch is correct (confidence 1.00).\n\nNo findings.\n")))
    ;; Invalid shapes, each named.
    (pcase-dolist (`(,text ,reason)
                   `(("No JSON here." "holds no JSON object")
                     ("{\"overall_correctness\": \"patch is correct\"}" "findings is missing")
                     (,(funcall finding '(priority . 7)) "finding 1: priority is 7, not 0-3 or null")
                     (,(funcall finding '(priority . 1.5)) "priority is 1.5")
                     (,(funcall finding '(priority . "high")) "priority is \"high\"")
                     (,(replace-regexp-in-string "0.5" "1.5" (funcall finding)) "confidence_score is 1.5")
                     (,(replace-regexp-in-string "\"start\":3" "\"start\":0" (funcall finding))
                      "line_range")
                     (,(replace-regexp-in-string "absolute_file_path" "path" (funcall finding))
                      "no code_location.absolute_file_path")
                     (,(replace-regexp-in-string "\"title\":\"T\"" "\"title\":\"\"" (funcall finding))
                      "finding 1 has no title")
                     (,(replace-regexp-in-string "patch is correct" "looks good" (funcall finding))
                      "overall_correctness")
                     (,(replace-regexp-in-string "0.9" "\"high\"" (funcall finding))
                      "overall_confidence_score")))
      (let ((review (mevedel-review-parse text)))
        (should (plist-get review :error))
        (should (string-match-p (regexp-quote reason) (plist-get review :error)))))))

(ert-deftest mevedel-review:result-texts ()
  ;; Invalid JSON falls back to the raw answer, saying why.
  (let ((text (mevedel-review-result-text 'review "commit x" "/root/review" 'completed
                                          "I think it is fine." "/")))
    (should (string-match-p "did not answer with the findings JSON (the answer holds no JSON object)"
                            text))
    (should (string-suffix-p "I think it is fine." text)))
  (should (equal (mevedel-review-result-text 'verify "the last commit" "/root/verify" 'completed
                                             "Ran the tests.\nVERDICT: PASS" "/")
                 "Verification of the last commit by /root/verify: VERDICT: PASS\n\nRan the tests.\nVERDICT: PASS"))
  (should (string-match-p "verdict rejected"
                          (mevedel-review-result-text 'verify "x" "/root/verify" 'completed
                                                      "VERDICT: PASS\nVERDICT: FAIL" "/")))
  (should (equal (mevedel-review-result-text 'review "x" "/root/review-2" 'interrupted "partial" "/")
                 "The review of x by /root/review-2 was interrupted.\n\npartial")))

;;;; The workflow, from the composer

(defmacro review-test--with-session (vars &rest body)
  "Run BODY in a view of a fresh repository, with `mevedel-agent-spawn' stubbed.
VARS is (ROOT VIEW CHAT SPAWNS): the workspace, the view, its chat and
a variable holding the spawn calls, newest first, as (ARGS ON-SETTLE ROW)."
  (declare (indent 1))
  (pcase-let ((`(,root ,view ,chat ,spawns) vars))
    `(let* ((mevedel-save-sessions nil)
            (,root (review-test--repo))
            (,view (mevedel ,root))
            (,chat (mevedel-view-chat ,view))
            (,spawns nil))
       (unwind-protect
           (cl-letf (((symbol-function 'mevedel-agent-spawn)
                      (lambda (_chat args &optional on-settle row)
                        (push (list args on-settle row) ,spawns)
                        (if (= (length ,spawns) 1)
                            (concat "/root/" (plist-get args :task_name))
                          (format "/root/%s-%d" (plist-get args :task_name) (length ,spawns))))))
             ,@body)
         (kill-buffer ,view)
         (kill-buffer (mevedel-chat-data-buffer ,chat))
         (delete-directory ,root t)))))

(defun review-test--slash (chat name argument)
  "Run the composer command /NAME with ARGUMENT in CHAT."
  (funcall (nth 1 (assoc name mevedel-view-slash-commands)) chat argument))

(defun review-test--view-text (view)
  "Return VIEW's transcript text."
  (with-current-buffer view
    (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))

(ert-deftest mevedel-review:slash-review-end-to-end-with-stubbed-spawn ()
  (review-test--with-session (root view chat spawns)
    (review-test--write root "lisp/a.el" "(defun a ()\n  3)\n")
    (let ((workflow (review-test--slash chat "review" "current")))
      (should (eq (mevedel-review-workflow-state workflow) 'preparing))
      (with-current-buffer view
        (should (equal mode-line-process '(:eval (mevedel-review-mode-line))))
        (should (equal (mevedel-review-mode-line) " [review: preparing the evidence]")))
      (mevedel-test-wait-until spawns 20)
      (with-current-buffer view
        (should (equal (mevedel-review-mode-line) " [review: /root/review]")))
      (pcase-let ((`(,args ,on-settle) (car spawns)))
        ;; A context-isolated leaf reviewer, with the evidence in its task.
        (should (equal (plist-get args :task_name) "review"))
        (should (equal (plist-get args :role) "reviewer"))
        (should (equal (plist-get args :context) "none"))
        (should (string-match-p "Review the uncommitted changes" (plist-get args :message)))
        (should (string-match-p "-  2)\n\\+  3)" (plist-get args :message)))
        (should (string-match-p "Answer with the JSON object" (plist-get args :message)))
        (should (string-match-p "Files marked \\?\\? in the status" (plist-get args :message)))
        (should (eq (mevedel-review-workflow-state workflow) 'running))
        (should (equal (mevedel-review-workflow-path workflow) "/root/review"))
        (funcall on-settle "/root/review" 'completed (mevedel-review-test-answer root))
        (should (eq (mevedel-review-workflow-state workflow) 'done))
        (should-not (memq workflow mevedel-review--workflows))
        (with-current-buffer view
          (should-not (mevedel-review-mode-line)))
        ;; Settling twice changes nothing.
        (funcall on-settle "/root/review" 'completed "other")
        ;; The view shows the notice and the numbered summary, not the record.
        (let ((text (review-test--view-text view)))
          (should (string-match-p (regexp-quote "[/review of the uncommitted changes by /root/review]")
                                  text))
          (should (string-match-p (regexp-quote (substring mevedel-review-test-rendered
                                                           (string-search "1. [P1]" mevedel-review-test-rendered)))
                                  text))
          (should-not (string-match-p "user_action" text)))
        ;; The place of a finding in the workspace is a button.
        (with-current-buffer view
          (goto-char (point-min))
          (should (search-forward "lisp/a.el:2" nil t))
          (should (equal (get-text-property (match-beginning 0) 'mevedel-location)
                         (list "lisp/a.el" 2 (file-name-as-directory root)))))
        ;; The model reads the record and the summary.
        (with-current-buffer (mevedel-chat-data-buffer chat)
          (let ((data (buffer-string)))
            (should (string-match-p "<user_action>" data))
            (should (string-match-p "\"overall_correctness\"" data))
            (goto-char (point-min))
            (search-forward "<user_action>")
            (should (get-text-property (point) 'mevedel-mail))
            (search-forward "1. [P1]")
            (should (eq (get-text-property (point) 'gptel) 'response))))
        (should (equal (plist-get (car (mevedel-chat-turns chat)) :label)
                       "/review of the uncommitted changes by /root/review"))))))

(defun review-test--handle (chat)
  "Return the segment of the newest handle row in CHAT's transcript, or nil."
  (cl-find-if (lambda (segment) (plist-get (plist-get segment :render-data) :workflow))
              (reverse (mevedel-history-segments (mevedel-chat-data-buffer chat)))))

(ert-deftest mevedel-review:an-inline-handle-follows-the-workflow-hidden-from-the-model ()
  "/review puts a handle row in the transcript: it says what the workflow
does, names its agent, shows its summary once settled, opens the agent
on RET, and never reaches the model."
  (review-test--with-session (_root view chat spawns)
    (let ((workflow (review-test--slash chat "review" "HEAD")))
      ;; At once, before any agent: the evidence is being prepared.
      (let ((handle (review-test--handle chat)))
        (should (equal (plist-get handle :name) "Agent"))
        (should (equal (plist-get handle :id) (mevedel-review-workflow-row workflow)))
        (should (equal (plist-get (plist-get handle :render-data) :status)
                       "preparing the evidence")))
      (should (string-match-p "Review · preparing the evidence" (review-test--view-text view)))
      (mevedel-test-wait-until spawns 20)
      ;; The agent's runtime is given the row to keep current.
      (should (equal (nth 2 (car spawns)) (mevedel-review-workflow-row workflow)))
      (should (equal (plist-get (plist-get (review-test--handle chat) :render-data) :path)
                     "/root/review"))
      (should (string-match-p "Review · /root/review" (review-test--view-text view)))
      (funcall (nth 1 (car spawns)) "/root/review" 'completed (mevedel-review-test-answer "/"))
      (should (string-match-p "Review · /root/review · done · patch is incorrect · 3 findings"
                              (review-test--view-text view)))
      ;; RET on the row opens the agent, as on an Agent call's row.
      (let ((opened nil))
        (cl-letf (((symbol-function 'mevedel-agent-view-open)
                   (lambda (_chat path) (setq opened path))))
          (with-current-buffer view
            (goto-char (point-min))
            (search-forward "Review · /root/review")
            (mevedel-view-visit-row)))
        (should (equal opened "/root/review")))
      ;; What a request is sent: no trace of the row.
      (let ((text (with-temp-buffer
                    (insert-buffer-substring (mevedel-chat-data-buffer chat))
                    (mevedel-chat--drop-handles)
                    (buffer-string))))
        (should-not (string-search (mevedel-review-workflow-row workflow) text))
        (should (string-search "<user_action>" text)))
      ;; Nor does history://root, a compaction or a handoff summary.
      (should-not (string-search (mevedel-review-workflow-row workflow)
                                 (mevedel-history-project (mevedel-chat-data-buffer chat)))))))

(ert-deftest mevedel-review:a-handle-waits-for-the-running-turn ()
  "A /review started while a turn runs places its row once the turn ends."
  (review-test--with-session (_root _view chat spawns)
    (let ((busy t) workflow)
      (cl-letf (((symbol-function 'mevedel-chat-busy-p) (lambda (_) busy)))
        (setq workflow (review-test--slash chat "review" "HEAD"))
        (should-not (review-test--handle chat))
        (mevedel-test-wait-until spawns 20)
        (setq busy nil)
        (run-hook-with-args 'mevedel-chat-idle-functions chat 'done)
        (mevedel-test-wait-until (review-test--handle chat) 5))
      (should (eq (mevedel-review-workflow-placed workflow) t))
      ;; Placed once, saying what happened meanwhile.
      (mevedel-test-sleep 0.2)
      (should (= 1 (cl-count-if (lambda (segment) (plist-get segment :handle))
                                (mevedel-history-segments (mevedel-chat-data-buffer chat)))))
      (should (equal (plist-get (plist-get (review-test--handle chat) :render-data) :path)
                     "/root/review")))))

(ert-deftest mevedel-review:slash-verify-and-a-second-review ()
  (review-test--with-session (root view chat spawns)
    (review-test--slash chat "verify" "HEAD")
    (mevedel-test-wait-until spawns 20)
    (pcase-let ((`(,args ,on-settle) (car spawns)))
      (should (equal (plist-get args :role) "verifier"))
      (should (equal (plist-get args :task_name) "verify"))
      (should (string-match-p "Make a return 2" (plist-get args :message)))
      (should (string-match-p "VERDICT: PASS, VERDICT: FAIL or VERDICT: PARTIAL"
                              (plist-get args :message)))
      (funcall on-settle "/root/verify" 'completed "Probed the nil case.\nVERDICT: FAIL"))
    (should (string-match-p (regexp-quote "Verification of the last commit by /root/verify: VERDICT: FAIL")
                            (review-test--view-text view)))
    ;; A second review gets the next path from the runtime; custom instructions pass through.
    (let ((workflow (review-test--slash chat "review" "only the error paths")))
      (mevedel-test-wait-until (= (length spawns) 2) 20)
      (should (string-match-p "only the error paths" (plist-get (car (car spawns)) :message)))
      (should (equal (mevedel-review-workflow-path workflow) "/root/review-2"))
      (funcall (nth 1 (car spawns)) "/root/review-2" 'completed "not json")
      (should (string-match-p "did not answer with the findings JSON" (review-test--view-text view))))))

(ert-deftest mevedel-review:result-waits-for-the-running-turn ()
  (review-test--with-session (_root view chat spawns)
    (review-test--slash chat "review" "HEAD")
    (mevedel-test-wait-until spawns 20)
    (let ((busy t)
          (turns (length (mevedel-chat-turns chat))))
      (cl-letf (((symbol-function 'mevedel-chat-busy-p) (lambda (_) busy)))
        (funcall (nth 1 (car spawns)) "/root/review" 'completed (mevedel-review-test-answer "/"))
        (should (= (length (mevedel-chat-turns chat)) turns))
        (setq busy nil)
        (run-hook-with-args 'mevedel-chat-idle-functions chat 'done)
        (mevedel-test-wait-until (= (length (mevedel-chat-turns chat)) (1+ turns)) 5))
      (should (string-match-p "1. \\[P1\\]" (review-test--view-text view))))))

(ert-deftest mevedel-review:cancel-and-killed-chat-stop-preparation ()
  (let* ((slow (review-test--slow-git 30))
         (mevedel-review-git-program (car slow)))
    (unwind-protect
        (review-test--with-session (_root view chat spawns)
          (let ((workflow (review-test--slash chat "review" "current")))
            (mevedel-test-wait-until (mevedel-review-job-run (mevedel-review-workflow-job workflow)) 5)
            (with-current-buffer view (mevedel-review-cancel))
            (should (eq (mevedel-review-workflow-state workflow) 'cancelled))
            (should-error (with-current-buffer view (mevedel-review-cancel)) :type 'user-error))
          ;; The view's abort (C-c C-k) with no turn running stops a preparation.
          (let ((workflow (review-test--slash chat "review" "HEAD")))
            (mevedel-test-wait-until (mevedel-review-job-run (mevedel-review-workflow-job workflow)) 5)
            (with-current-buffer view (mevedel-view-abort))
            (should (eq (mevedel-review-workflow-state workflow) 'cancelled)))
          (let ((workflow (review-test--slash chat "verify" "current")))
            (mevedel-test-wait-until (mevedel-review-job-run (mevedel-review-workflow-job workflow)) 5)
            (kill-buffer (mevedel-chat-data-buffer chat))
            (should (eq (mevedel-review-workflow-state workflow) 'cancelled)))
          (mevedel-test-sleep 0.3)
          (should-not spawns)
          (should-not (mevedel-test-processes-running (cdr slow))))
      (delete-file (car slow)))))

(ert-deftest mevedel-review:spawn-failure-is-reported ()
  (review-test--with-session (_root _view chat _spawns)
    (cl-letf (((symbol-function 'mevedel-agent-spawn)
               (lambda (&rest _) (user-error "Unknown agent role \"reviewer\""))))
      (let ((workflow (review-test--slash chat "review" "HEAD"))
            (messages nil))
        (cl-letf (((symbol-function 'message)
                   (lambda (format-string &rest args) (push (apply #'format format-string args) messages))))
          (mevedel-test-wait-until (eq (mevedel-review-workflow-state workflow) 'failed) 20))
        (should (string-match-p "could not start: Unknown agent role" (car messages)))))))

(ert-deftest mevedel-review:completion-offers-target-forms ()
  (review-test--with-session (root _view chat _spawns)
    (mevedel-review--complete chat)
    (mevedel-test-wait-until
      (let ((candidates (mevedel-review--complete chat)))
        (and (member "branch:main" candidates)
             (cl-some (lambda (c) (string-prefix-p "commit:" c)) candidates)))
      10)
    (let ((candidates (mevedel-review--complete chat)))
      (should (member "current" candidates))
      (should (member "HEAD" candidates))
      (should (member "branch:feature" candidates))
      (should (member (concat "commit:" (string-trim (review-test--git root "rev-parse" "--short" "HEAD")))
                      candidates)))))

;;;; The picker

(ert-deftest mevedel-review:picker-asks-what-to-look-at ()
  (let ((dir (review-test--repo))
        (answers nil)
        (offered nil))
    (unwind-protect
        (cl-letf (((symbol-function 'completing-read)
                   (lambda (prompt collection &rest args)
                     (push (list prompt collection (nth 4 args)) offered)
                     (pop answers)))
                  ((symbol-function 'read-string) (lambda (&rest _) (pop answers))))
          (setq answers '("Uncommitted changes"))
          (should (equal (mevedel-review-read-target dir) '(:kind uncommitted)))
          (setq answers '("The last commit"))
          (should (equal (mevedel-review-read-target dir) '(:kind last-commit)))
          ;; The branches come from git, read in the background; main is the default.
          (setq answers '("Against a base branch (its merge-base)…" "main"))
          (should (equal (mevedel-review-read-target dir) '(:kind base :branch "main")))
          (pcase-let ((`(,prompt ,branches ,default) (car offered)))
            (should (string-prefix-p "Base branch (default main)" prompt))
            (should (member "feature" branches))
            (should (equal default "main")))
          (let ((short (string-trim (review-test--git dir "rev-parse" "--short" "main"))))
            (setq answers (list "A commit…" (concat short " Add a")))
            (should (equal (mevedel-review-read-target dir) (list :kind 'commit :rev short)))
            (should (member (concat short " Add a") (nth 1 (car offered)))))
          (setq answers '("Custom instructions…" "check the error paths"))
          (should (equal (mevedel-review-read-target dir)
                         '(:kind custom :instructions "check the error paths")))
          (setq answers '("Custom instructions…" "  "))
          (should-error (mevedel-review-read-target dir) :type 'user-error))
      (delete-directory dir t))))

(ert-deftest mevedel-review:result-turn-is-saved-with-the-session ()
  (let* ((mevedel-save-sessions t)
         (root (review-test--repo))
         (view (mevedel root))
         (chat (mevedel-view-chat view)))
    (unwind-protect
        (progn
          (mevedel-chat-append-reply chat "/review of x by /root/review" "<user_action>r</user_action>"
                                     "1. [P1] Saved finding")
          (kill-buffer view)
          (kill-buffer (mevedel-chat-data-buffer chat))
          (let ((resumed (mevedel-chat-get-create root (mevedel-session-latest root))))
            (unwind-protect
                (progn
                  (should (equal (plist-get (car (mevedel-chat-turns resumed)) :label)
                                 "/review of x by /root/review"))
                  (let ((segments (mevedel-history-segments (mevedel-chat-data-buffer resumed))))
                    (should (equal (mapcar (lambda (s) (plist-get s :type)) segments)
                                   '(notice response)))
                    (should (equal (plist-get (cadr segments) :text) "1. [P1] Saved finding")))
                  (with-current-buffer (mevedel-chat-data-buffer resumed)
                    (goto-char (point-min))
                    (search-forward "<user_action>")
                    (should (get-text-property (point) 'mevedel-mail))))
              (kill-buffer (mevedel-chat-data-buffer resumed)))))
      (delete-directory root t))))

(provide 'review-test)
;;; review-test.el ends here
