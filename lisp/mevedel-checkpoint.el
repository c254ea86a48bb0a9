;;; mevedel-checkpoint.el --- Checkpoints of edited files, rewind, the session diff  -*- lexical-binding: t; -*-

;;; Commentary:

;; Before a tool that declares `:snapshot-p' (ApplyPatch) changes files,
;; the pipeline's snapshot step calls `mevedel-checkpoint-snapshot': the
;; first time a turn touches a path, the module keeps the path's bytes
;; (content-addressed, beside session.sqlite) or notes that it did not
;; exist.  When the call settles, what it left is remembered, so that a
;; rewind tells the user's later changes from the session's own.  A call
;; of a tool that is neither read-only nor snapshotting (Bash, Monitor,
;; Eval, Agent, ...) marks its turn: a rewind names such turns, since
;; whatever they changed is not undone.
;;
;; `mevedel-rewind' restores the workspace files to their state before a
;; chosen turn, and can remove that turn and the later ones from the
;; conversation.  `mevedel-session-diff' shows, in `diff-mode', what the
;; session's edits changed since their first checkpoint.
;;
;; Only turns of a chat (M-x mevedel) are checkpointed; an ephemeral
;; session has no storage and keeps none.  Working files (work://, both
;; the session's local/ and the workspace's .mevedel/shared/) are never
;; checkpointed, so rewind and the session diff leave them alone.

;;; Code:

(require 'cl-lib)
(require 'mevedel-core)
(require 'mevedel-session)
(require 'mevedel-pipeline)
(require 'mevedel-permissions)
(require 'mevedel-tool-registry)
(require 'mevedel-chat)

(defgroup mevedel-checkpoint nil
  "Checkpoints of the files a session's edits change, and rewinding them."
  :group 'mevedel)

;;;; Recording

(defvar mevedel-checkpoint--bash (make-hash-table :test #'eq :weakness 'key)
  "Turns that ran a tool that may change files before their session had storage.
Session -> list of (ID . LABEL); written with the session's first
checkpoint, so that reads and commands alone create no storage.")

(defun mevedel-checkpoint--turn (buffer)
  "Return the running turn of the chat whose data buffer is BUFFER, or nil.
The value is (ID . LABEL), from the turn plist `mevedel-chat-send' made."
  (when-let* ((chat (mevedel-chat-of-buffer buffer))
              (turn (mevedel-chat-turn chat))
              ((consp turn))
              (id (plist-get turn :id))
              ((stringp id)))
    (cons id (or (plist-get turn :label) ""))))

(defun mevedel-checkpoint--paths (tool args session buffer)
  "Return the absolute file paths a call of TOOL with ARGS in SESSION touches.
BUFFER is the call's data buffer: a child agent's relative paths start
at its own directory.  Working files are left out: the session's
local/ (work://) and the workspace's .mevedel/shared/ are working
material a rewind must leave as they are, not source."
  (let ((root (mevedel-session-call-directory session buffer))
        ;; A tool's :get-paths may name session-owned files (shared items).
        (mevedel-session-current session)
        (working (delq nil (list (mevedel-session-local-directory session)
                                 (expand-file-name ".mevedel/shared/"
                                                   (mevedel-session-workspace session))))))
    (cl-loop for path in (mevedel-permissions-tool-paths tool args)
             for file = (expand-file-name path root)
             unless (cl-some (lambda (dir) (string-prefix-p dir file)) working)
             collect file)))

(defun mevedel-checkpoint--flush (session store)
  "Write to STORE what was marked in SESSION before it had storage."
  (dolist (turn (reverse (gethash session mevedel-checkpoint--bash)))
    (mevedel-core-checkpoint-note-bash store (car turn) (cdr turn)))
  (remhash session mevedel-checkpoint--bash))

(defun mevedel-checkpoint-snapshot (context)
  "Record the before-state of the files the tool call CONTEXT will change.
For `mevedel-pipeline-snapshot-functions': nothing outside a chat's
turn or in an ephemeral session."
  (when-let* ((session (plist-get context :session))
              ((mevedel-session-p session))
              ((mevedel-session-durable-p session))
              (turn (mevedel-checkpoint--turn (plist-get context :data-buffer)))
              (paths (mevedel-checkpoint--paths (plist-get context :tool)
                                                (plist-get context :args) session
                                                (plist-get context :data-buffer))))
    (let ((store (mevedel-session-store-handle session)))
      (mevedel-checkpoint--flush session store)
      (mevedel-core-checkpoint-before store (car turn) (cdr turn) paths))))

(defun mevedel-checkpoint--observe (event info)
  "Follow the tool call INFO's EVENT for checkpoints.
A snapshot tool's settled call remembers what it left; the start of a
call that may change files untracked marks its turn."
  (when-let* ((buffer (plist-get info :data-buffer))
              ((buffer-live-p buffer))
              (session (buffer-local-value 'mevedel-session-current buffer))
              ((mevedel-session-durable-p session))
              (turn (mevedel-checkpoint--turn buffer))
              (tool (mevedel-tool-get (plist-get info :name))))
    (cond
     ((and (eq event 'settled) (mevedel-tool-snapshot-p tool) (mevedel-session-store session))
      (mevedel-core-checkpoint-after
       (mevedel-session-store session)
       (mevedel-checkpoint--paths tool (plist-get info :args) session buffer)))
     ((and (eq event 'started) (not (mevedel-tool-read-only-p tool))
           (not (mevedel-tool-snapshot-p tool)))
      (if-let* ((store (mevedel-session-store session)))
          (mevedel-core-checkpoint-note-bash store (car turn) (cdr turn))
        (cl-pushnew turn (gethash session mevedel-checkpoint--bash) :test #'equal))))))

(add-hook 'mevedel-pipeline-snapshot-functions #'mevedel-checkpoint-snapshot)
(add-hook 'mevedel-pipeline-tool-event-hook #'mevedel-checkpoint--observe)

;;;; Choosing a chat and a turn

(defun mevedel-checkpoint--chat ()
  "Return the chat of the current buffer's workspace, or signal."
  (or (mevedel-chat-get (mevedel-chat-workspace-root))
      (user-error "No mevedel session in this workspace")))

(defun mevedel-checkpoint--store (chat)
  "Return the open store of CHAT's session, or signal that nothing was recorded."
  (let ((session (mevedel-chat-session chat)))
    (or (mevedel-session-store session)
        (user-error "Session %s has edited no file yet" (mevedel-chat-name chat)))))

(defun mevedel-checkpoint--describe (turn)
  "Return a line naming the recorded TURN: its number, label and files."
  (let ((files (plist-get turn :files)))
    (format "%d. %s%s%s"
            (plist-get turn :number) (plist-get turn :label)
            (if files
                (format "  [%s]" (mapconcat #'file-name-nondirectory files ", "))
              "")
            (if (plist-get turn :bash) "  (ran tools that may have changed files)" ""))))

(defun mevedel-checkpoint--read-turn (chat prompt)
  "Ask with PROMPT for a recorded turn of CHAT; return its plist."
  (let* ((turns (or (mevedel-core-checkpoint-turns (mevedel-checkpoint--store chat))
                    (user-error "Session %s has no checkpoints" (mevedel-chat-name chat))))
         (choices (mapcar (lambda (turn) (cons (mevedel-checkpoint--describe turn) turn))
                          (reverse turns)))
         (choice (completing-read prompt choices nil t nil nil (caar choices))))
    (cdr (assoc choice choices))))

;;;; Rewinding

(defun mevedel-checkpoint--refuse-modified (paths)
  "Signal when a buffer visiting one of PATHS is modified."
  (when-let* ((modified (cl-loop for path in paths
                                 for buffer = (find-buffer-visiting path)
                                 when (and buffer (buffer-modified-p buffer))
                                 collect (abbreviate-file-name path))))
    (user-error "Save or revert these buffers first: %s" (string-join modified ", "))))

(defun mevedel-checkpoint--revert-visiting (paths)
  "Bring the unmodified buffers visiting PATHS up to date with the disk."
  (dolist (path paths)
    (when-let* ((buffer (find-buffer-visiting path)))
      (with-current-buffer buffer
        (if (file-exists-p path)
            (revert-buffer t t t)
          (set-buffer-modified-p nil)
          (message "%s was removed by the rewind; its buffer is kept" path))))))

(defvar mevedel-checkpoint-rewound-functions nil
  "Functions of the restored PATHS, run after a rewind.
What keeps a restored file's content elsewhere too (a shared
whiteboard's host, mevedel-shared.el) takes it back here.")

(defun mevedel-checkpoint--chat-turn (chat id)
  "Return CHAT's turn plist with ID, or nil."
  (cl-find id (mevedel-chat-turns chat) :key (lambda (turn) (plist-get turn :id))
           :test #'equal))

;;;###autoload
(defun mevedel-rewind (chat turn &optional truncate)
  "Restore CHAT's workspace files to their state before TURN.
Files changed since the session last edited them are listed and
restored only if you confirm.  What other tools changed (Bash, Eval,
...) is not rewound: the turns from TURN on that ran them are named.
With TRUNCATE (interactively, when you agree), TURN and every later
turn leave the conversation."
  (interactive
   (let* ((chat (mevedel-checkpoint--chat))
          (turn (mevedel-checkpoint--read-turn chat "Rewind to before turn: ")))
     (list chat turn
           (and (mevedel-checkpoint--chat-turn chat (plist-get turn :id))
                (y-or-n-p "Also remove that turn and the later ones from the conversation? ")))))
  (when (mevedel-chat-busy-p chat)
    (user-error "A turn is running in %s; abort it first" (mevedel-chat-name chat)))
  (let* ((store (mevedel-checkpoint--store chat))
         (id (plist-get turn :id))
         (plan (mevedel-core-checkpoint-rewind-plan store id))
         (paths (mapcar (lambda (entry) (plist-get entry :path)) plan))
         (changed (cl-loop for entry in plan when (plist-get entry :changed)
                           collect (abbreviate-file-name (plist-get entry :path))))
         (bash (cl-loop for each in (mevedel-core-checkpoint-turns store)
                        when (and (plist-get each :bash)
                                  (>= (plist-get each :seq) (plist-get turn :seq)))
                        collect (plist-get each :number))))
    (mevedel-checkpoint--refuse-modified paths)
    (when (and changed
               (not (yes-or-no-p (format "Changed since the session edited them: %s.  Restore anyway? "
                                         (string-join changed ", ")))))
      (user-error "Nothing was rewound"))
    (let ((done (mevedel-core-checkpoint-rewind store id)))
      (mevedel-checkpoint--revert-visiting paths)
      (run-hook-with-args 'mevedel-checkpoint-rewound-functions paths)
      (when-let* ((truncate)
                  (turn (mevedel-checkpoint--chat-turn chat id)))
        (mevedel-chat-truncate chat turn))
      (message "Rewound %d file%s to before turn %d%s"
               (length done) (if (= (length done) 1) "" "s") (plist-get turn :number)
               (if bash
                   (format "; what tools changed in turn%s %s (Bash, Eval, ...) is not undone"
                           (if (cdr bash) "s" "") (mapconcat #'number-to-string bash ", "))
                 ""))
      done)))

;;;; The session diff

;;;###autoload
(defun mevedel-session-diff (chat)
  "Show what CHAT's session edits changed, as one diff in `diff-mode'."
  (interactive (list (mevedel-checkpoint--chat)))
  (let ((text (mevedel-core-checkpoint-diff (mevedel-checkpoint--store chat)))
        (buffer (get-buffer-create (format "*mevedel-session-diff: %s*" (mevedel-chat-name chat)))))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (if (string-empty-p text) "No changes.\n" text)))
      (setq default-directory (mevedel-chat-root chat))
      (diff-mode)
      (setq buffer-read-only t)
      (goto-char (point-min)))
    (pop-to-buffer buffer)
    buffer))

(provide 'mevedel-checkpoint)
;;; mevedel-checkpoint.el ends here
