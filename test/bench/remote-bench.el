;;; remote-bench.el --- Grep and Read tools on a remote workspace  -*- lexical-binding: t; -*-

;;; Commentary:

;; A private sshd on 127.0.0.1 (test/e2e/mevedel-sshd.el) stands for
;; the remote host.  A generated tree of about 60 MB (deterministic
;; text, a .git directory, deleted afterwards) is searched there:
;;
;; - remote-grep-60mb: the Grep tool's handler in content mode, in a
;;   session whose workspace is the remote tree, from the call to its
;;   result; the helper is loaded and started by a first (untimed) call,
;;   as a session's first remote call starts it.  Peer: `ssh HOST rg -n
;;   PATTERN DIR' with a fresh ssh each time, as a user would type it.
;;   Goal: peer/ours >= 0.67, and under 10% of the tree's bytes crossing
;;   the connection (counted at the helper's process).
;; - remote-read-roundtrip: the Read tool on a small remote file as a
;;   model's call runs it (`mevedel-pipeline-run-tool': arguments,
;;   permission, handler, result).  Goal: at most 2 ssh round trips'
;;   time, one round trip being a helper request answered as Read's
;;   are (on a thread of its own, the file opened) that reads nothing,
;;   over the same open connection, printed on a line of its own
;;   (remote-helper-rtt).  Both are medians of 51 samples taken in
;;   turn, so that a loaded machine slows both alike.  Peer: TRAMP's
;;   own `insert-file-contents' of the file over its open connection.
;;
;; Both fail the run when the results differ or a goal is missed; the
;; Grep, whose peer is a separate ssh, by more than a noisy 2-core
;; machine explains (25%).

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (expand-file-name
                           "../e2e" (file-name-directory (or load-file-name byte-compile-current-file
                                                         buffer-file-name)))))
(require 'cl-lib)
(require 'mevedel-core)
(require 'mevedel-remote-helper)
(require 'mevedel-tool-fs)
(require 'mevedel-pipeline)
(require 'mevedel-sshd)
(require 'mevedel-test-helpers)
(require 'mevedel-bench-lib)

(defconst remote-bench--pattern "defun bench-1[0-4]7-"
  "What the Grep looks for: a few hundred lines of the tree.")

(defun remote-bench--make-tree (dir files bytes-per-file)
  "Create FILES deterministic Lisp-like files of BYTES-PER-FILE bytes under DIR."
  (dotimes (i files)
    (let ((sub (expand-file-name (format "pkg%02d" (% i 40)) dir))
          (parts nil) (len 0) (k 0))
      (make-directory sub t)
      (while (< len bytes-per-file)
        (let ((chunk (format "(defun bench-%d-%d (arg)\n  \"Compute from ARG, %d.\"\n  (* arg %d))\n;; filler text to make the file longer, section %d\n\n"
                             i k k (mod (* 7 k) 97) k)))
          (push chunk parts)
          (setq len (+ len (length chunk)) k (1+ k))))
      (let ((coding-system-for-write 'utf-8-unix))
        (write-region (apply #'concat (nreverse parts)) nil
                      (expand-file-name (format "file%04d.el" i) sub) nil 'silent))))
  (make-directory (expand-file-name ".git" dir) t))

(defun remote-bench--wait (getter)
  "Process events until GETTER returns non-nil; return that."
  (let (value)
    (while (not (setq value (funcall getter)))
      (accept-process-output nil 0.01))
    value))

(defun remote-bench--counting (conn)
  "Count the bytes CONN's helper sends; return a cell whose car is the count."
  (let* ((process (mevedel-remote-helper--conn-process conn))
         (filter (process-filter process))
         (cell (list 0)))
    (set-process-filter process (lambda (p output)
                                  (setcar cell (+ (car cell) (string-bytes output)))
                                  (funcall filter p output)))
    cell))

(defun remote-bench--call (fn &rest args)
  "Call FN with ARGS and a callback; wait; return (SECONDS . VALUE)."
  (let* ((result nil)
         (start (float-time)))
    (apply fn (append args (list (lambda (status value)
                                   (unless (eq status 'ok)
                                     (error "Remote call failed: %S" value))
                                   (setq result (cons (- (float-time) start) value))))))
    (remote-bench--wait (lambda () result))))

(defun remote-bench--tool (handler args directory)
  "Run the tool HANDLER on ARGS in DIRECTORY; return (SECONDS . RESULT-TEXT)."
  (let* ((result nil)
         (default-directory directory)
         (start (float-time)))
    (funcall handler (lambda (r) (setq result (cons (- (float-time) start) r))) args)
    (remote-bench--wait (lambda () result))
    (when (eq (plist-get (cdr result) :status) 'error)
      (error "%s failed: %s" handler (plist-get (cdr result) :result)))
    (cons (car result) (plist-get (cdr result) :result))))

(defconst remote-bench--read-samples 51
  "How many Reads, and as many round trips, the Read figure takes the median of.")

(defun remote-bench--model-read (tool file directory)
  "Run TOOL, Read, on FILE in DIRECTORY as a model's call runs it.
A model's call has its tool at hand (mevedel-gptel.el), so the
registry lookup is not timed.  Return (SECONDS . TEXT)."
  (let* ((result nil)
         (default-directory directory)
         (start (float-time)))
    (mevedel-pipeline-run-tool tool (list :file_path file)
                               (lambda (text) (setq result (cons (- (float-time) start) text))))
    (remote-bench--wait (lambda () result))))

(defun remote-bench--ssh-rg (sshd dir)
  "Run `ssh HOST rg' for the pattern on DIR; return (SECONDS . LINES)."
  (with-temp-buffer
    (let* ((start (float-time))
           (status (call-process "ssh" nil t nil "-F" (mevedel-sshd-config sshd)
                                 (mevedel-sshd-alias sshd)
                                 "rg" "-n" "--no-heading" "-g" "!.git"
                                 (shell-quote-argument remote-bench--pattern) dir))
           (seconds (- (float-time) start)))
      (unless (memq status '(0 1)) (error "ssh rg failed: %s" (buffer-string)))
      (cons seconds (count-lines (point-min) (point-max))))))

(defun remote-bench-run ()
  "Run both remote benchmarks and print their lines."
  (unless (executable-find "rg")
    (error "The remote bench needs ripgrep (rg) as its peer; scripts/deps.sh installs it"))
  (mevedel-core-ensure)
  (let* ((cache (file-name-as-directory (make-temp-file "mevedel-bench-cache-" t)))
         (mevedel-remote-helper-cache-directory cache)
         (dir (file-name-as-directory (file-truename (make-temp-file "mevedel-remote-bench-" t)))))
    (unwind-protect
        (mevedel-sshd-with sshd
          (remote-bench--make-tree dir 2000 30000)
          (let* ((tree-bytes (* 2000 30000))
                 (remote-dir (mevedel-sshd-file sshd dir))
                 (grep (list :pattern remote-bench--pattern :output_mode "content"
                             :-n t :head_limit 0))
                 (host (mevedel-remote-host remote-dir)))
            ;; The session's first remote call loads and starts the helper.
            (remote-bench--tool #'mevedel-tool-fs-grep grep remote-dir)
            (let ((conn (gethash host mevedel-remote--helpers)))
              (unless (mevedel-remote-helper--conn-p conn)
                (error "The helper did not start on %s: %S" host conn))
              ;; Grep
              (let* ((counted (remote-bench--counting conn))
                     (ours (cl-loop repeat 5 collect
                                    (remote-bench--tool #'mevedel-tool-fs-grep grep remote-dir)))
                     (bytes (/ (car counted) 5))
                     (lines (length (split-string (cdar ours) "\n" t)))
                     (peer (cl-loop repeat 5 collect (remote-bench--ssh-rg sshd dir)))
                     (ours-ms (* 1000 (mevedel-bench-percentile (mapcar #'car ours) 50)))
                     (peer-ms (* 1000 (mevedel-bench-percentile (mapcar #'car peer) 50))))
                (unless (= lines (cdar peer))
                  (error "remote-grep-60mb: ours found %d lines, ssh rg %d" lines (cdar peer)))
                (when (>= bytes (/ tree-bytes 10))
                  (error "remote-grep-60mb: %d bytes crossed, 10%% of the tree is %d"
                         bytes (/ tree-bytes 10)))
                (when (< (/ peer-ms ours-ms) (* 0.67 0.75))
                  (error "remote-grep-60mb: %.0f ms, ssh rg %.0f ms: ratio under 0.67 by more \
than noise" ours-ms peer-ms))
                (mevedel-bench-describe
                 "The Grep tool, -n %S (content mode, %d lines), in a workspace of 2,000 files / %.0f MB on sshd at 127.0.0.1, through the remote helper (started by a first call), median of 5; %d bytes (%.3f%% of the tree) crossed per Grep; peer: a fresh `ssh HOST rg -n` each time"
                 remote-bench--pattern lines (/ tree-bytes 1e6) bytes (/ (* 100.0 bytes) tree-bytes))
                (mevedel-bench-report "remote-grep-60mb" ours-ms "ms" "ssh-rg" peer-ms))
              ;; Read
              (let* ((file (expand-file-name "small.txt" dir))
                     (remote-file (mevedel-sshd-file sshd file))
                     (read-tool (mevedel-tool-get "Read"))
                     (ours nil) (rtt nil))
                (with-temp-file file
                  (dotimes (i 40) (insert (format "line %d of a small file\n" i))))
                ;; Interleaved, so that both see the same load: one
                ;; round trip, then one Read, then the other way round.
                (dotimes (i remote-bench--read-samples)
                  (let ((trip (lambda ()
                                (push (car (remote-bench--call
                                            #'mevedel-remote-helper--call conn "read"
                                            (list :path file :bytes t :length 0)))
                                      rtt)))
                        (read (lambda ()
                                (push (remote-bench--model-read read-tool "small.txt" remote-dir) ours))))
                    (if (cl-evenp i)
                        (progn (funcall trip) (funcall read))
                      (funcall read) (funcall trip))))
                (let* ((peer (cl-loop repeat 20 collect
                                      (with-temp-buffer
                                        (let ((start (float-time)))
                                          (insert-file-contents remote-file)
                                          (cons (- (float-time) start) (buffer-string))))))
                       (ours-ms (* 1000 (mevedel-bench-percentile (mapcar #'car ours) 50)))
                       (rtt-ms (* 1000 (mevedel-bench-percentile rtt 50))))
                  (unless (string-search "line 39 of a small file" (cdar ours))
                    (error "remote-read-roundtrip: the Read lacks the file's text: %s" (cdar ours)))
                  (when (> ours-ms (* 2 rtt-ms))
                    (error "remote-read-roundtrip: %.3f ms, over 2 round trips (%.3f ms each)"
                           ours-ms rtt-ms))
                  (mevedel-bench-describe
                   "One helper round trip over the open connection to sshd at 127.0.0.1: a request answered as Read's are (its own thread, the file opened) that reads 0 bytes; median of %d, interleaved with the Reads below"
                   remote-bench--read-samples)
                  (mevedel-bench-report "remote-helper-rtt" rtt-ms "ms")
                  (mevedel-bench-describe
                   "The Read tool as the model calls it (the whole pipeline: arguments, permission, handler, result) on a 1 KB file in a workspace on sshd at 127.0.0.1 (helper running), median of %d; %.2f round trips; goal: at most 2 (%.3f ms); peer: TRAMP's insert-file-contents over its open connection"
                   remote-bench--read-samples (/ ours-ms rtt-ms) (* 2 rtt-ms))
                  (mevedel-bench-report "remote-read-roundtrip" ours-ms "ms"
                                        "tramp-insert-file-contents"
                                        (* 1000 (mevedel-bench-percentile
                                                 (mapcar #'car peer) 50))))))))
      (mevedel-test-stop-remote-helpers)
      (delete-directory dir t)
      (delete-directory cache t))))

(remote-bench-run)

(provide 'remote-bench)
;;; remote-bench.el ends here
