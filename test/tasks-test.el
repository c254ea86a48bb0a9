;;; tasks-test.el --- Tasks: validation, settlement, saving, nudge, fragment  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

(defmacro tasks-test--with-any-agent (&rest body)
  "Run BODY where any well-formed agent path counts as a retained agent."
  (declare (indent 0))
  `(let ((mevedel-tasks-agent-known-functions (list (lambda (_session _path) t))))
     ,@body))

(defmacro tasks-test--with-session (session &rest body)
  "Bind SESSION to a fresh ephemeral session around BODY.
Any well-formed agent path counts as a retained agent there."
  (declare (indent 1))
  `(tasks-test--with-any-agent
    (let ((,session (mevedel-session-create :ephemeral t)))
      ,@body)))

(defun tasks-test--write (session caller &rest args)
  "Write ARGS (TaskWrite's plist, tasks as a list) to SESSION as CALLER."
  (when (plist-get args :tasks)
    (setq args (plist-put args :tasks (vconcat (plist-get args :tasks)))))
  (mevedel-tasks-write session caller args))

(defun tasks-test--task (session id)
  "Return task ID of SESSION."
  (cl-find id (mevedel-tasks-list session) :key (lambda (task) (plist-get task :id))))

(defun tasks-test--plain (lines)
  "Return LINES without text properties, joined by newlines."
  (mapconcat #'substring-no-properties lines "\n"))

;;;; Validation

(ert-deftest mevedel-tasks:create-update-and-session-wide-ids ()
  (tasks-test--with-session session
			    (should (equal (tasks-test--write session "/root" :tasks '((:subject "  Write   the\n tests ")
										       (:subject "Ship")))
					   '(1 2)))
			    (should (equal (plist-get (tasks-test--task session 1) :subject) "Write the tests"))
			    (should (equal (plist-get (tasks-test--task session 1) :status) "pending"))
			    (should (equal (plist-get (tasks-test--task session 1) :owner) "/root"))
			    ;; An agent's task takes the next session-wide id.
			    (should (equal (tasks-test--write session "/root/worker" :tasks '((:subject "Probe"))) '(3)))
			    (should (equal (plist-get (tasks-test--task session 3) :owner) "/root/worker"))
			    ;; An id updates only the fields given.
			    (tasks-test--write session "/root" :tasks '((:id 1 :status "in_progress"
									     :activeForm "Writing the tests")))
			    (let ((task (tasks-test--task session 1)))
			      (should (equal (plist-get task :status) "in_progress"))
			      (should (equal (plist-get task :subject) "Write the tests"))
			      (should (equal (plist-get task :active-form) "Writing the tests")))
			    ;; Completed tasks are kept and their ids never come back.
			    (tasks-test--write session "/root" :tasks '((:id 2 :status "completed")))
			    (should (equal (tasks-test--write session "/root" :tasks '((:subject "More"))) '(4)))
			    (should (= (length (mevedel-tasks-list session)) 4))))

(ert-deftest mevedel-tasks:every-bad-entry-rejects-the-whole-batch ()
  (tasks-test--with-session session
			    (tasks-test--write session "/root" :tasks '((:subject "One")))
			    (tasks-test--write session "/root/a" :tasks '((:subject "A's")))
			    (let ((before (copy-tree (mevedel-tasks-list session))))
			      (dolist (bad `(((:subject "ok") (:subject "   "))
					     ((:subject "ok") (:subject "x" :status "done"))
					     ((:subject "ok") (:id 99 :status "completed"))
					     ((:subject "ok") (:id "1"))
					     ((:subject "ok") (:subject 7))
					     ((:subject "ok") (:subject "x" :owner "/elsewhere/x"))
					     ((:subject "ok") (:subject "x" :owner "/root//x"))
					     ((:subject "ok") (:subject "x" :owner "0123456789abcdef0123"))
					     ((:subject "ok") (:subject "x" :blockedBy ["1"]))
					     ((:subject "ok") (:subject "x" :activeForm 3))))
				(should-error (tasks-test--write session "/root" :tasks bad) :type 'mevedel-tasks-error))
			      ;; An unknown note owner rejects the tasks with it.
			      (should-error (tasks-test--write session "/root" :tasks '((:subject "ok"))
							       :note "hi" :noteOwner "/nowhere")
					    :type 'mevedel-tasks-error)
			      ;; A call with nothing in it is refused too.
			      (should-error (tasks-test--write session "/root") :type 'mevedel-tasks-error)
			      (should (equal (mevedel-tasks-list session) before))
			      (should-not (mevedel-tasks-notes session))
			      (should (equal (tasks-test--write session "/root" :tasks '((:subject "next"))) '(3))))))

(ert-deftest mevedel-tasks:owners-and-authority ()
  (tasks-test--with-session session
			    (tasks-test--write session "/root" :tasks '((:subject "main")
									(:subject "b's" :owner "/root/b")
									(:subject "a child's" :owner "/root/a/c")
									(:subject "docs" :owner "docs")))
			    ;; /root normalises; a bucket is a shared label.
			    (tasks-test--write session "/root" :tasks '((:subject "also main" :owner "/root/")))
			    (should (equal (plist-get (tasks-test--task session 5) :owner) "/root"))
			    ;; An agent may change its descendants', the main session's and buckets' tasks ...
			    (tasks-test--write session "/root/a" :tasks '((:id 3 :status "in_progress")
									  (:id 1 :status "in_progress")
									  (:id 4 :status "in_progress")))
			    ;; ... and create for others, but not touch another agent's task:
			    ;; the whole batch goes.
			    (should-error (tasks-test--write session "/root/a" :tasks '((:subject "for b" :owner "/root/b")
											(:id 2 :status "completed")))
					  :type 'mevedel-tasks-error)
			    (should (equal (plist-get (tasks-test--task session 2) :status) "pending"))
			    (should-not (tasks-test--task session 6))
			    (should-error (tasks-test--write session "/root/a" :note "x" :noteOwner "/root/b")
					  :type 'mevedel-tasks-error)
			    ;; Reassigning by an authorised writer moves the protection with it.
			    (tasks-test--write session "/root" :tasks '((:id 2 :owner "/root/a")))
			    (tasks-test--write session "/root/a" :tasks '((:id 2 :status "completed")))
			    (should (equal (plist-get (tasks-test--task session 2) :status) "completed"))
			    ;; An agent path must name an agent the session knows.
			    (let ((mevedel-tasks-agent-known-functions (list (lambda (_s path) (equal path "/root/a")))))
			      (should-error (tasks-test--write session "/root" :tasks '((:subject "x" :owner "/root/z")))
					    :type 'mevedel-tasks-error)
			      (should-error (tasks-test--write session "/root" :note "x" :noteOwner "/root/z")
					    :type 'mevedel-tasks-error))))

(ert-deftest mevedel-tasks:resolved-edges-are-dropped ()
  (tasks-test--with-session session
			    (tasks-test--write session "/root" :tasks '((:subject "first") (:subject "done" :status "completed")))
			    ;; An edge to an absent or completed task is dropped when written.
			    (tasks-test--write session "/root" :tasks '((:subject "third" :blockedBy [1 2 42])))
			    (should (equal (plist-get (tasks-test--task session 3) :blocked-by) '(1)))
			    (should (mevedel-tasks-blocked-p (tasks-test--task session 3)))
			    ;; Completing the blocker unblocks it.
			    (tasks-test--write session "/root" :tasks '((:id 1 :status "completed")))
			    (should-not (plist-get (tasks-test--task session 3) :blocked-by))))

(ert-deftest mevedel-tasks:agent-settlement ()
  (tasks-test--with-session session
			    (tasks-test--write session "/root/w" :tasks '((:subject "one") (:subject "two" :status "in_progress"))
					       :note "busy")
			    (tasks-test--write session "/root" :tasks '((:subject "after" :blockedBy [2])))
			    ;; A failed or interrupted turn leaves them open.
			    (should-not (mevedel-tasks-settle-owner session "/root/w" nil))
			    (should (mevedel-tasks-open-p (tasks-test--task session 1)))
			    (should (mevedel-tasks-notes session))
			    ;; Success completes them, clears the note and unblocks dependents.
			    (should (equal (mevedel-tasks-settle-owner session "/root/w" t) '(1 2)))
			    (should-not (mevedel-tasks-open-p (tasks-test--task session 2)))
			    (should-not (mevedel-tasks-notes session))
			    (should-not (plist-get (tasks-test--task session 3) :blocked-by))
			    (should (mevedel-tasks-open-p (tasks-test--task session 3)))))

(ert-deftest mevedel-tasks:saved-and-restored-with-owners-checked ()
  (tasks-test--with-any-agent
   (let* ((root (file-name-as-directory (make-temp-file "mevedel-tasks-" t)))
          (session (mevedel-session-create :workspace root))
          (id (mevedel-session-id session)))
     (unwind-protect
         (progn
           (tasks-test--write session "/root" :tasks '((:subject "main" :status "in_progress")
                                                       (:subject "gone's" :owner "/root/gone")
                                                       (:subject "kept's" :owner "/root/kept")
                                                       (:subject "waits" :blockedBy [2]))
                              :note "hello")
           (tasks-test--write session "/root" :note "k" :noteOwner "/root/gone")
           (mevedel-core-store-flush (mevedel-session-store session))
           (mevedel-session-close session)
           ;; Resuming checks the owners against the restored registry.
           (let* ((mevedel-tasks-agent-known-functions (list (lambda (_s path) (equal path "/root/kept"))))
                  (resumed (mevedel-session-create :workspace root :id id)))
             (unwind-protect
                 (progn
                   (should (equal (mapcar (lambda (task) (plist-get task :id))
                                          (mevedel-tasks-list resumed))
                                  '(1 3 4)))
                   ;; The edge to the dropped task went with it.
                   (should-not (plist-get (tasks-test--task resumed 4) :blocked-by))
                   (should (equal (mevedel-tasks-notes resumed) '(("/root" . "hello"))))
                   ;; Ids go on after the highest saved one.
                   (should (equal (tasks-test--write resumed "/root" :tasks '((:subject "new")))
                                  '(5))))
               (mevedel-session-close resumed))))
       (delete-directory root t)))))

(ert-deftest mevedel-tasks:restore-drops-opaque-and-malformed-owners ()
  (tasks-test--with-session session
			    (let ((state (mevedel-tasks--restore
					  session
					  (prin1-to-string
					   '(:next-id 9
						      :tasks ((:id 1 :subject "ok" :status "pending" :owner "/root")
							      (:id 2 :subject "opaque" :status "pending"
								   :owner "3f2a9c1e-77aa-4b1d-9c0e")
							      (:id 3 :subject "bad path" :status "pending" :owner "/root/")
							      (:id 4 :subject "malformed" :status "pending" :owner "/x/y")
							      (:id 5 :subject "bucket" :status "weird" :owner "docs"))
						      :notes (("/x" . "no")))))))
			      (should (equal (mapcar (lambda (task) (plist-get task :id)) (mevedel-tasks-state-tasks state))
					     '(1 3)))
			      (should (equal (plist-get (nth 1 (mevedel-tasks-state-tasks state)) :owner) "/root"))
			      (should-not (mevedel-tasks-state-notes state))
			      (should (= (mevedel-tasks-state-next-id state) 9)))))

(ert-deftest mevedel-tasks:nudge-at-most-once-per-interval ()
  (tasks-test--with-session session
			    (let ((mevedel-tasks-nudge-interval 8)
				  (fired nil))
			      ;; Nothing is open: never.
			      (dotimes (_ 10) (should-not (mevedel-tasks-nudge session)))
			      (tasks-test--write session "/root/w" :tasks '((:subject "Long job")))
			      (dotimes (n 30)
				(when-let* ((text (mevedel-tasks-nudge session)))
				  (push (1+ n) fired)
				  ;; The TaskList shape with canonical owners.
				  (should (string-match-p "/root/w (the retained agent /root/w's work):\n  #1 \\[pending\\] Long job"
							  text))))
			      (should (equal (nreverse fired) '(8 16 24)))
			      ;; A write starts the interval again.
			      (tasks-test--write session "/root" :tasks '((:id 1 :status "in_progress")))
			      (setq fired nil)
			      (dotimes (n 8) (when (mevedel-tasks-nudge session) (push n fired)))
			      (should (equal fired '(7))))))

;;;; The fragment

(defun tasks-test--sample ()
  "Return a session with tasks over several owners."
  (let ((session (mevedel-session-create :ephemeral t)))
    (tasks-test--write session "/root"
                       :tasks '((:subject "Plan the migration" :status "completed")
                                (:subject "Write the migration" :status "in_progress"
                                          :activeForm "Writing the migration")
                                (:subject "Announce it" :blockedBy [2])
                                (:subject "Run the tests" :owner "/root/worker" :status "in_progress"
                                          :activeForm "Running the tests")
                                (:subject "Review the patch" :owner "/root/reviewer")
                                (:subject "Sign off" :owner "/root/reviewer" :blockedBy [5])
                                (:subject "Update the docs" :owner "docs")
                                (:subject "Old docs" :owner "docs" :status "completed"))
                       :note "migrating the schema")
    (tasks-test--write session "/root" :note "halfway" :noteOwner "/root/reviewer")
    session))

(ert-deftest mevedel-tasks:fragment-golden ()
  (tasks-test--with-any-agent
   (let ((session (tasks-test--sample)))
     (should (equal (tasks-test--plain
                     (mevedel-tasks-view-lines (mevedel-tasks-list session)
                                               (mevedel-tasks-notes session) 60))
                    (string-join
                     '("── tasks · 2 running · 2 pending · 2 blocked · 2 done ──────"
                       "note: migrating the schema"
                       "◐ Write the migration"
                       "◌ Announce it (waits on #2)"
                       "worker · ◐ Running the tests"
                       "reviewer"
                       "  note: halfway"
                       "  ○ Review the patch"
                       "  ◌ Sign off (waits on #5)"
                       "docs · ○ Update the docs")
                     "\n")))
     ;; The done section keeps each row's owner.
     (should (equal (last (mapcar #'substring-no-properties
                                  (mevedel-tasks-view-lines (mevedel-tasks-list session)
                                                            (mevedel-tasks-notes session) 60 nil t))
                          3)
                    '("done" "  ✓ Plan the migration · /root" "  ✓ Old docs · docs"))))))

(ert-deftest mevedel-tasks:fragment-height-cap ()
  (tasks-test--with-any-agent
   (let ((session (tasks-test--sample)))
     ;; Six rows: five kept, the header left alone goes, one count row.
     (should (equal (tasks-test--plain
                     (mevedel-tasks-view-lines (mevedel-tasks-list session)
                                               (mevedel-tasks-notes session) 60 7))
                    (string-join
                     '("── tasks · 2 running · 2 pending · 2 blocked · 2 done ──────"
                       "note: migrating the schema"
                       "◐ Write the migration"
                       "◌ Announce it (waits on #2)"
                       "worker · ◐ Running the tests"
                       "… 3 more open")
                     "\n")))
     ;; With the done section, open rows stay ahead of completed ones.
     (should (equal (car (last (mevedel-tasks-view-lines (mevedel-tasks-list session)
                                                         (mevedel-tasks-notes session) 60 11 t)))
                    "… 2 completed"))
     ;; A note goes from view with its owner's last open task.
     (tasks-test--write session "/root" :tasks '((:id 2 :status "completed") (:id 3 :status "completed")))
     (should-not (string-match-p "migrating the schema"
                                 (tasks-test--plain
                                  (mevedel-tasks-view-lines (mevedel-tasks-list session)
                                                            (mevedel-tasks-notes session) 60))))
     ;; No open task: no fragment.
     (dolist (id '(2 3 4 5 6 7))
       (tasks-test--write session "/root" :tasks `((:id ,id :status "completed"))))
     (should-not (mevedel-tasks-view-lines (mevedel-tasks-list session) (mevedel-tasks-notes session))))))

(ert-deftest mevedel-tasks:taskwrite-renders-and-updates-the-fragment ()
  (mevedel-test-with-view view chat
			  (switch-to-buffer view)
			  (let ((result (mevedel-test-run-tool chat "TaskWrite" "t1"
							       (list :tasks (vector '(:subject "Build it"
											       :status "in_progress")
										    '(:subject "Test it"))))))
			    (should (string-match-p "#1 \\[in_progress\\] Build it" result)))
			  (with-current-buffer view
			    (mevedel-view-rerender)
			    (should (string-match-p "── tasks · 1 running · 1 pending ─+\n◐ Build it\n○ Test it"
						    (buffer-substring-no-properties (point-min) (point-max))))
			    ;; TAB on the fragment shows the done section.
			    (mevedel-test-run-tool chat "TaskWrite" "t2" (list :tasks (vector '(:id 1 :status "completed"))))
			    (goto-char (1+ (text-property-any (point-min) (point-max) 'mevedel-tasks t)))
			    (execute-kbd-macro (kbd "TAB"))
			    (should (string-match-p "done\n  ✓ Build it · /root"
						    (buffer-substring-no-properties (point-min) (point-max))))
			    ;; TaskList reads the same list.
			    (should (string-match-p "#2 \\[pending\\] Test it"
						    (mevedel-test-run-tool chat "TaskList" "t3" nil)))
			    ;; Completing the last one removes the fragment.
			    (mevedel-test-run-tool chat "TaskWrite" "t4" (list :tasks (vector '(:id 2 :status "completed"))))
			    (should-not (text-property-any (point-min) (point-max) 'mevedel-tasks t)))))

(ert-deftest mevedel-tasks:a-resumed-session-shows-its-tasks ()
  (let* ((root (file-name-as-directory (make-temp-file "mevedel-tasks-resume-" t)))
         (view (mevedel root))
         (chat (mevedel-view-chat view))
         (id (mevedel-session-id (mevedel-chat-session chat))))
    (unwind-protect
        (progn
          (mevedel-test-run-tool chat "TaskWrite" "r1"
                                 (list :tasks (vector '(:subject "Survive the restart"
								 :status "in_progress"))))
          (let* ((resumed (mevedel-session-list-switch root id))
                 (again (mevedel-view-chat resumed)))
            (setq view resumed chat again)
            ;; What is shown now was read back from the session's storage.
            (clrhash mevedel-tasks--states)
            (mevedel-view-rerender resumed)
            (should-not (eq (mevedel-chat-session again) nil))
            (should (equal (mapcar (lambda (task) (plist-get task :subject))
                                   (mevedel-tasks-list (mevedel-chat-session again)))
                           '("Survive the restart")))
            (with-current-buffer resumed
              (should (string-match-p "── tasks · 1 running[^\n]*\n◐ Survive the restart"
                                      (buffer-substring-no-properties (point-min) (point-max)))))))
      (when (buffer-live-p view) (kill-buffer view))
      (when (buffer-live-p (mevedel-chat-data-buffer chat))
        (kill-buffer (mevedel-chat-data-buffer chat)))
      (delete-directory root t))))

(provide 'tasks-test)
;;; tasks-test.el ends here
