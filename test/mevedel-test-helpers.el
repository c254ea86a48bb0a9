;;; mevedel-test-helpers.el --- Shared helpers for mevedel's ERT tests  -*- lexical-binding: t; -*-

;;; Commentary:

;; Helpers for running forms in a child batch Emacs, for waiting on
;; asynchronous module work without busy loops of our own, and for
;; running tool calls in a real session with its view.

;;; Code:

(require 'ert)
(require 'cl-lib)
;; A session opens only with the tool catalog loaded.
(require 'mevedel-catalog)
;; The chat's struct, for `setf' of its slots in compiled helpers.
(eval-when-compile (require 'mevedel-chat))

(declare-function mevedel "mevedel")
(declare-function mevedel-view-chat "mevedel-view")
(declare-function mevedel-view-buffer "mevedel-view")
(declare-function mevedel-view-rerender "mevedel-view")
(declare-function mevedel-chat-data-buffer "mevedel-chat")
(declare-function mevedel-chat-name "mevedel-chat")
(declare-function mevedel-pipeline-run-tool "mevedel-pipeline")
(declare-function mevedel-edited-files-prepare "mevedel-edited-files")
(declare-function mevedel-edited-files-update "mevedel-edited-files")
(declare-function mevedel-tool-get "mevedel-tool-registry")
(declare-function mevedel-render-data-extract "mevedel-render-data")
(defvar mevedel-permissions-rules)

(defconst mevedel-test-root
  (file-name-directory
   (directory-file-name
    (file-name-directory (or load-file-name buffer-file-name))))
  "Root of the checkout under test.")

(defun mevedel-test-emacs-args (form)
  "Return the argv of a batch Emacs that evaluates FORM with mevedel's paths."
  (list "-Q" "--batch" "-l" (expand-file-name "scripts/load-path.el" mevedel-test-root)
        "--eval" (prin1-to-string form)))

(defun mevedel-test-run-emacs (form)
  "Evaluate FORM in a child batch Emacs; return (EXIT-STATUS . OUTPUT)."
  (with-temp-buffer
    (let* ((default-directory mevedel-test-root)
           (status (apply #'call-process (expand-file-name invocation-name invocation-directory)
                          nil t nil (mevedel-test-emacs-args form))))
      (cons status (buffer-string)))))

(defmacro mevedel-test-wait-until (condition &optional seconds)
  "Process events until CONDITION holds, or fail after SECONDS (default 10)."
  (declare (indent 0))
  `(let ((deadline (+ (float-time) ,(or seconds 10))))
     (while (and (not ,condition) (< (float-time) deadline))
       (accept-process-output nil 0.01))
     (should ,condition)))

(defun mevedel-test-pid-alive-p (pid)
  "Non-nil when PID exists and is not a zombie.
A process that ends while its stat file is read counts as gone."
  (with-temp-buffer
    (and (ignore-error file-error
           (insert-file-contents (format "/proc/%d/stat" pid))
           t)
         (progn (goto-char (point-max))
                (search-backward ")" nil t))
         (not (looking-at ") Z")))))

(declare-function mevedel-core-live-process-groups "mevedel-core")
(declare-function mevedel-core-exec-start "mevedel-core")

(defun mevedel-test-start-group (command)
  "Start the shell COMMAND as an unconfined managed execution.
Managed executions are how the product starts every child; each leads
a process group of its own.  Return that group once the module owns
it, or nil after 10 s."
  (let ((before (mevedel-core-live-process-groups)))
    (mevedel-core-exec-start
     (list :session "test-group" :owner "/root" :command command :yield-ms 100)
     #'ignore)
    (let ((deadline (+ (float-time) 10)) new)
      (while (and (not (setq new (cl-set-difference (mevedel-core-live-process-groups)
                                                    before)))
                  (< (float-time) deadline))
        (accept-process-output nil 0.02))
      (car new))))

(defun mevedel-test-group-members (pgid)
  "Return the pids of live (non-zombie) processes in process group PGID."
  (cl-loop for dir in (directory-files "/proc" nil "\\`[0-9]+\\'")
           for stat = (ignore-errors
                        (with-temp-buffer
                          (insert-file-contents (format "/proc/%s/stat" dir))
                          (buffer-string)))
           when stat
           when (string-match ") \\([A-Z]\\) [0-9]+ \\([0-9]+\\) " stat)
           when (and (= (string-to-number (match-string 2 stat)) pgid)
                     (not (equal (match-string 1 stat) "Z")))
           collect (string-to-number dir)))

(defconst mevedel-test-run-tag (format "%07d" (emacs-pid))
  "Digits that set this test run's processes apart from another run's.
Tests that look for their commands in /proc (`sleep 301.TAG5' and the
like) put them in the command, so two suites on one machine cannot
count each other's processes.")

(defun mevedel-test-sleep (seconds &optional suffix)
  "Return \"sleep SECONDS.TAG[SUFFIX]\", TAG being `mevedel-test-run-tag'.
Without SUFFIX it is the prefix all such commands of SECONDS share."
  (format "sleep %d.%s%s" seconds mevedel-test-run-tag (or suffix "")))

(defun mevedel-test-processes-running (marker)
  "Return the pids of live processes whose command line starts with MARKER.
Found through /proc, so processes inside a sandbox's PID namespace
count too."
  (cl-loop for dir in (directory-files "/proc" nil "\\`[0-9]+\\'")
           for cmdline = (ignore-errors
                           (with-temp-buffer
                             (set-buffer-multibyte nil)
                             (insert-file-contents-literally (format "/proc/%s/cmdline" dir))
                             (subst-char-in-string ?\0 ?\s (buffer-string))))
           for stat = (ignore-errors
                        (with-temp-buffer
                          (insert-file-contents (format "/proc/%s/stat" dir))
                          (buffer-string)))
           when (and cmdline (string-prefix-p marker cmdline)
                     stat (not (string-match-p ") Z " stat)))
           collect (string-to-number dir)))

(defun mevedel-test-tool-text (id name args result)
  "Return data-buffer text for call ID of NAME with ARGS and RESULT.
The text is what gptel writes for a tool call."
  (concat (propertize (format "``` tool (%s)" name) 'gptel 'ignore)
          (propertize (concat "\n" (prin1-to-string (list :name name :args args)) "\n\n" result)
                      'gptel (cons 'tool id))
          (propertize "\n```\n" 'gptel 'ignore)))

(defun mevedel-test-begin-turn (chat text)
  "Append the user's TEXT as a new turn of CHAT, as `mevedel-chat-send' does."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (goto-char (point-max))
    (let ((start (point-marker)))
      (unless (bobp) (insert "\n\n"))
      (insert (gptel-prompt-prefix-string) text "\n")
      (setf (mevedel-chat-turn-start chat) start)
      (push (list :id (format "%x" (length (mevedel-chat-turns chat))) :label text :start start)
            (mevedel-chat-turns chat)))))

(defmacro mevedel-test-with-view (view chat &rest body)
  "Bind VIEW and CHAT to a fresh session's view and chat around BODY.
Bash and Monitor are allowed without asking (the execution controls
never ask), and no background
completion starts a turn (there is no backend).  Afterwards the view,
the session's executions table, the data buffer and the workspace go."
  (declare (indent 2))
  `(let* ((root (file-name-as-directory (make-temp-file "mevedel-view-" t)))
          (,view (mevedel root))
          (,chat (mevedel-view-chat ,view))
          (mevedel-permissions-rules (append '((allow "Bash") (allow "Monitor"))
                                             mevedel-permissions-rules)))
     (unwind-protect (cl-letf (((symbol-function 'mevedel-mailbox--wake) #'ignore))
                       ,@body)
       (when-let* ((ps (get-buffer (format "*mevedel ps: %s*" (mevedel-chat-name ,chat)))))
         (kill-buffer ps))
       (kill-buffer ,view)
       (kill-buffer (mevedel-chat-data-buffer ,chat))
       (mevedel-test-delete-workspace root))))

(defun mevedel-test-delete-workspace (root)
  "Delete the workspace ROOT of a session just closed.
Closing stops the session's executions and closes its store on other
threads, which may still add or remove a file there for a moment:
deleting retries until it succeeds, for at most 5 seconds."
  (let ((deadline (+ (float-time) 5)))
    (while (condition-case err
               (progn (delete-directory root t) nil)
             (file-error (if (< (float-time) deadline)
                             (progn (accept-process-output nil 0.05) t)
                           (signal (car err) (cdr err))))))))

(defun mevedel-test-insert-call (chat name id args result)
  "Append call ID of NAME with ARGS and RESULT to CHAT's data buffer; redraw."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (goto-char (point-max))
    (insert "\n" (mevedel-test-tool-text id name args result)))
  (mevedel-view-rerender (mevedel-view-buffer chat)))

(defun mevedel-test-start-tool (chat name id args)
  "Start tool NAME with ARGS as call ID of CHAT through the pipeline.
Return a box, a list whose car becomes (RESULT) when the call settles."
  (let ((box (list nil)))
    (with-current-buffer (mevedel-chat-data-buffer chat)
      (mevedel-pipeline-run-tool (mevedel-tool-get name) args
                                 (lambda (result) (setcar box (list result)))
                                 :tool-use-id id :data-buffer (current-buffer)))
    box))

(defun mevedel-test-run-tool (chat name id args &optional insert)
  "Run tool NAME with ARGS as call ID of CHAT through the pipeline.
Return its result text (with render-data, as gptel receives it).
With INSERT, also append it to the data buffer as gptel would."
  (let ((box (mevedel-test-start-tool chat name id args)))
    (mevedel-test-wait-until (car box) 20)
    (when insert (mevedel-test-insert-call chat name id args (caar box)))
    (caar box)))

(defun mevedel-test-execution-id (chat id)
  "Return the execution ID in the render-data of call ID of CHAT."
  (plist-get (mevedel-render-data-extract (mevedel-chat-data-buffer chat) id) :execution-id))

(defvar mevedel-transcript-properties)

(defun mevedel-test-saved-runs (buffer)
  "Return BUFFER's text with the runs of every saved property."
  (with-current-buffer buffer
    (cons (buffer-substring-no-properties (point-min) (point-max))
          (cl-loop for name in mevedel-transcript-properties
                   collect (let ((pos (point-min)) runs)
                             (while (< pos (point-max))
                               (let ((next (next-single-property-change pos name nil (point-max))))
                                 (when (get-text-property pos name)
                                   (push (list pos next (get-text-property pos name)) runs))
                                 (setq pos next)))
                             (cons name (nreverse runs)))))))

(defmacro mevedel-test-in-turn (chat turn &rest body)
  "Run BODY while CHAT's running turn is TURN (a plist)."
  (declare (indent 2))
  `(progn
     (setf (mevedel-chat-turn ,chat) ,turn)
     (unwind-protect (progn ,@body)
       (setf (mevedel-chat-turn ,chat) nil))))

(defvar mevedel-gptel-continuation-functions)
(defvar mevedel-gptel-continued-functions)

(defun mevedel-test-drain-mail (chat)
  "Drain CHAT's mail as its request continuing after tools does; return the blocks.
These are the gptel adapter's two calls: the blocks are gathered, then
(once they would be in the request) the conversation's save is queued
and the mail counts as read."
  (let* ((info (list :context chat))
         (texts (run-hook-with-args-until-success 'mevedel-gptel-continuation-functions info)))
    (when texts
      (run-hook-with-args 'mevedel-gptel-continued-functions info texts))
    texts))

(defvar mevedel-view--panel)
(defvar mevedel-view--separator)

(defun mevedel-test-press-panel-button (view label)
  "Press the button labelled [LABEL] in VIEW's background panel."
  (with-current-buffer view
    (goto-char mevedel-view--panel)
    (should (search-forward (concat "[" label "]") mevedel-view--separator t))
    (push-button (match-beginning 0))))

(defun mevedel-test-edited-files-update (chat)
  "Return CHAT's edited-files update once its diffs are made, as before a request."
  (let* ((ready nil)
         (stop (mevedel-edited-files-prepare chat (lambda () (setq ready t)))))
    (when stop (mevedel-test-wait-until ready 20))
    (mevedel-edited-files-update chat)))

(defun mevedel-test-browser-wait (proc output regexp)
  "Wait until the browser driver PROC printed a line matching REGEXP.
Return the match's first group.  OUTPUT is a function returning what
PROC printed so far.  A FAIL line, an exit or 60 s without the line
fails the test with the output and PROC's `stderr' buffer, if any."
  (let ((deadline (+ (float-time) 60)))
    (while (not (or (string-match regexp (funcall output))
                    (string-match-p "^FAIL" (funcall output))
                    (not (process-live-p proc))
                    (> (float-time) deadline)))
      (accept-process-output nil 0.05))
    (if (string-match regexp (funcall output))
        (match-string 1 (funcall output))
      (let ((stderr (process-get proc 'stderr)))
        (ert-fail (list "browser driver" regexp (funcall output)
                        (and (buffer-live-p stderr)
                             (with-current-buffer stderr (buffer-string)))))))))

(defvar mevedel-remote--helpers)
(defvar mevedel-remote-helper--connections)
(declare-function mevedel-remote-helper--conn-p "mevedel-remote-helper")
(declare-function mevedel-remote-helper--conn-process "mevedel-remote-helper")

(defun mevedel-test-stop-remote-helpers ()
  "End every remote helper started so far and forget them all.
The next call needing one starts its host's helper afresh."
  (maphash (lambda (_ conn)
             (when (mevedel-remote-helper--conn-p conn)
               (delete-process (mevedel-remote-helper--conn-process conn))))
           mevedel-remote--helpers)
  (clrhash mevedel-remote--helpers)
  (clrhash mevedel-remote-helper--connections))

(provide 'mevedel-test-helpers)
;;; mevedel-test-helpers.el ends here
