;;; remote-bench.el --- Grep and Read on a remote host through the helper  -*- lexical-binding: t; -*-

;;; Commentary:

;; A private sshd on 127.0.0.1 (test/e2e/mevedel-sshd.el) stands for
;; the remote host.  A generated tree of about 60 MB (deterministic
;; text, a .git directory, deleted afterwards) is searched there:
;;
;; - remote-grep-60mb: Grep in content mode through the remote helper,
;;   started once as a session's first remote call starts it, from the
;;   call to the result text in Lisp; peer: `ssh HOST rg -n PATTERN DIR'
;;   with a fresh ssh each time, as a user would type it.  The bytes
;;   that cross the connection for our Grep are counted and must stay
;;   under 10% of the tree's.
;; - remote-read-roundtrip: a Read of a small remote file through the
;;   helper; peer: TRAMP's own `insert-file-contents' of it over the
;;   same (already open) connection.
;;
;; Both fail the run when the results differ or a goal is missed.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (expand-file-name
                           "../e2e" (file-name-directory (or load-file-name byte-compile-current-file
                                                         buffer-file-name)))))
(require 'cl-lib)
(require 'mevedel-core)
(require 'mevedel-remote-helper)
(require 'mevedel-sshd)
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
                 (conn (let (c)
                         (mevedel-remote-helper-ensure remote-dir (lambda (x) (setq c x)))
                         (remote-bench--wait (lambda () c)))))
            (when (eq (car-safe conn) :error) (error "%s" (cadr conn)))
            ;; Grep
            (let* ((counted (remote-bench--counting conn))
                   (options (list :pattern remote-bench--pattern :output-mode "content"
                                  :line-numbers t))
                   (ours (cl-loop repeat 5 collect
                                  (remote-bench--call #'mevedel-remote-helper-grep conn
                                                      (list :path dir :display "" :options options))))
                   (bytes (/ (car counted) 5))
                   (lines (plist-get (cdar ours) :total))
                   (peer (cl-loop repeat 5 collect (remote-bench--ssh-rg sshd dir))))
              (unless (= lines (cdar peer))
                (error "remote-grep-60mb: ours found %d lines, ssh rg %d" lines (cdar peer)))
              (when (>= bytes (/ tree-bytes 10))
                (error "remote-grep-60mb: %d bytes crossed, 10%% of the tree is %d"
                       bytes (/ tree-bytes 10)))
              (mevedel-bench-describe
               "Grep -n %S (content mode, %d lines) over 2,000 files / %.0f MB on sshd at 127.0.0.1 through the remote helper (started once), median of 5; %d bytes (%.3f%% of the tree) crossed per Grep; peer: a fresh `ssh HOST rg -n` each time"
               remote-bench--pattern lines (/ tree-bytes 1e6) bytes (/ (* 100.0 bytes) tree-bytes))
              (mevedel-bench-report "remote-grep-60mb"
                                    (* 1000 (mevedel-bench-percentile (mapcar #'car ours) 50)) "ms"
                                    "ssh-rg" (* 1000 (mevedel-bench-percentile (mapcar #'car peer) 50))))
            ;; Read
            (let* ((file (expand-file-name "small.txt" dir))
                   (remote-file (mevedel-sshd-file sshd file)))
              (with-temp-file file
                (dotimes (i 40) (insert (format "line %d of a small file\n" i))))
              (let* ((ours (cl-loop repeat 20 collect
                                    (remote-bench--call #'mevedel-remote-helper-read conn file
                                                        '(:display "small.txt"))))
                     (peer (cl-loop repeat 20 collect
                                    (with-temp-buffer
                                      (let ((start (float-time)))
                                        (insert-file-contents remote-file)
                                        (cons (- (float-time) start) (buffer-string))))))
                     (rtt (cl-loop repeat 20 collect
                                   (car (remote-bench--call #'mevedel-remote-helper--call
                                                            conn "cancel" '(:target 0))))))
                (unless (string-search "line 39 of a small file"
                                       (plist-get (cdar ours) :text))
                  (error "remote-read-roundtrip: the Read lacks the file's text"))
                (let ((ours-ms (* 1000 (mevedel-bench-percentile (mapcar #'car ours) 50)))
                      (rtt-ms (* 1000 (mevedel-bench-percentile rtt 50))))
                  (when (> ours-ms (* 2 (max rtt-ms 1.0)))
                    (error "remote-read-roundtrip: %.2f ms, over 2 round trips (%.2f ms each)"
                           ours-ms rtt-ms))
                  (mevedel-bench-describe
                   "Read of a 1 KB file on sshd at 127.0.0.1 through the remote helper, median of 20, one helper round trip %.2f ms; peer: TRAMP's insert-file-contents over its open connection"
                   rtt-ms)
                  (mevedel-bench-report "remote-read-roundtrip" ours-ms "ms" "tramp-insert-file-contents"
                                        (* 1000 (mevedel-bench-percentile (mapcar #'car peer) 50))))))))
      (clrhash mevedel-remote-helper--connections)
      (delete-directory dir t)
      (delete-directory cache t))))

(remote-bench-run)

(provide 'remote-bench)
;;; remote-bench.el ends here
