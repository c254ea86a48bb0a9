;;; search-bench.el --- Grep and Glob against ripgrep; responsiveness  -*- lexical-binding: t; -*-

;;; Commentary:

;; Two generated trees of Lisp-like files (deterministic content, built
;; here and deleted afterwards): about 500 files / 15 MB and 5,000 files
;; / 60 MB, each with a .git directory and a .gitignore.  On each, Grep
;; `defun' in files and content mode and Glob `**/*.el' run through
;; the tool handlers the pipeline calls (module background thread,
;; reply through the event channel, complete result text in Lisp)
;; and, as the peer, `rg' through `call-process' into a buffer in this
;; same Emacs.  On the 60 MB tree, Grep then runs with 10 of its files
;; visited in modified buffers of 5,000 lines, against the same Grep
;; with `mevedel-tool-fs-read-unsaved-buffers' off (which is what
;; grep-files-60mb measures).  Then a 10 ms timer measures how late
;; Emacs runs timers while 60 MB Greps run.

;;; Code:

(require 'mevedel-core)
(require 'mevedel-tool-fs)
(require 'mevedel-bench-lib)

(defconst search-bench--vcs-globs
  '("-g" "!.git" "-g" "!.svn" "-g" "!.hg" "-g" "!.bzr" "-g" "!.jj" "-g" "!.sl")
  "Make rg skip VCS directories as Grep and Glob do.")

(defun search-bench--file-text (i size)
  "Return deterministic Lisp-like text of about SIZE bytes for file I."
  (let ((parts nil) (len 0) (k 0))
    (while (< len size)
      (let ((chunk (format ";;; Section %d of file %d\n\n(defvar bench-%d-%d-var %d\n  \"A variable, number %d.\")\n\n(defun bench-%d-%d-fn (arg &optional other)\n  \"Compute something from ARG and OTHER (%d).\"\n  (let ((x (* arg %d)))\n    (when other (setq x (+ x other)))\n    (list x '(a b c) \"text %d\")))\n\n;; A comment that mentions no keyword at all, %d.\n(cl-defmethod bench-%d-%d-method ((obj bench-type))\n  (message \"value: %%s\" obj))\n\n"
                           k i i k (* i k) k i k (mod (* 7 k) 97) (1+ k) k k i k)))
        (push chunk parts)
        (setq len (+ len (length chunk)) k (1+ k))))
    (apply #'concat (nreverse parts))))

(defun search-bench--make-tree (dir files bytes-per-file)
  "Create FILES Lisp-like files of BYTES-PER-FILE bytes under DIR."
  (dotimes (i files)
    (let ((sub (expand-file-name (format "pkg%02d/mod%d" (% i 50) (% (/ i 50) 4)) dir)))
      (make-directory sub t)
      (let ((coding-system-for-write 'utf-8-unix))
        (write-region (search-bench--file-text i bytes-per-file) nil
                      (expand-file-name (format "file%04d.el" i) sub) nil 'silent))))
  (make-directory (expand-file-name ".git" dir) t)
  (write-region "(defun in-git ())\n" nil (expand-file-name ".git/objects" dir) nil 'silent)
  (write-region "*.elc\n" nil (expand-file-name ".gitignore" dir) nil 'silent)
  dir)

(defun search-bench--tree-size (dir)
  "Return (FILES . BYTES) of the regular files under DIR."
  (let ((files 0) (bytes 0))
    (dolist (f (directory-files-recursively dir "" nil) (cons files bytes))
      (setq files (1+ files) bytes (+ bytes (file-attribute-size (file-attributes f)))))))

(defun search-bench--wait (cell)
  "Process events until CELL's car is set; return it."
  (while (not (car cell)) (accept-process-output nil 0.05))
  (car cell))

(defun search-bench--ours (kind dir &optional mode)
  "Run our KIND (grep or glob) tool handler on DIR in MODE.
Return (SECONDS . TEXT).  The handler is the one the pipeline calls
(`mevedel-tool-fs-grep', `mevedel-tool-fs-glob'), with the arguments a
model would send.  The time ends when the callback holds the result
text: after the callback `accept-process-output' with no process may
sleep on for about 10 ms, which is the waiting loop's cost, not ours."
  (let* ((cell (list nil))
         (start (float-time))
         (end nil)
         (done (lambda (result)
                 (setq end (float-time))
                 (setcar cell (if (plist-get result :status)
                                  (error "Search failed: %S" result)
                                (plist-get result :result))))))
    (pcase kind
      ('grep (mevedel-tool-fs-grep done (list :pattern "defun" :path dir
                                              :output_mode mode :head_limit 0)))
      ('glob (mevedel-tool-fs-glob done (list :pattern "**/*.el" :path dir))))
    (let ((text (search-bench--wait cell)))
      (cons (- end start) text))))

(defun search-bench--rg (args dir)
  "Run rg with ARGS in DIR into a buffer; return (SECONDS . LINES)."
  (with-temp-buffer
    (let* ((default-directory (file-name-as-directory dir))
           (start (float-time))
           (status (apply #'call-process "rg" nil t nil
                          (append '("--no-config" "--hidden") args search-bench--vcs-globs)))
           (secs (- (float-time) start)))
      (unless (memq status '(0 1)) (error "The rg call failed: %s" (buffer-string)))
      (cons secs (count-lines (point-min) (point-max))))))

(defun search-bench--compare (id label dir kind mode rg-args runs)
  "Report ID: our KIND/MODE vs rg RG-ARGS on DIR (LABEL), median of RUNS.
The two alternate run by run, so both see the same machine load."
  (search-bench--ours kind dir mode)     ; warm the page cache and threads
  (search-bench--rg rg-args dir)
  (let (ours-times rg-times ours rg)
    (dotimes (_ runs)
      (setq ours (search-bench--ours kind dir mode)
            rg (search-bench--rg rg-args dir))
      (push (car ours) ours-times)
      (push (car rg) rg-times))
    (let ((our-lines (with-temp-buffer (insert (cdr ours)) (count-lines (point-min) (point-max)))))
      (unless (= our-lines (cdr rg))
        (error "%s: ours printed %d lines, rg %d" id our-lines (cdr rg)))
      (mevedel-bench-describe "%s; %s; %d output lines from both, median of %d alternating runs, timed until the result text is in Lisp (our callback; rg: `call-process' returned)"
                              label id our-lines runs)
      (mevedel-bench-report id (* 1000 (mevedel-bench-percentile ours-times 50)) "ms"
                            "rg" (* 1000 (mevedel-bench-percentile rg-times 50))))))

(defun search-bench--tree (label dir runs)
  "Run the three comparisons on DIR, described by LABEL, RUNS times each."
  (let* ((size (search-bench--tree-size dir))
         (label (format "%s tree: %d files, %.1f MB" label (car size) (/ (cdr size) 1e6)))
         (tag (if (string-match-p "large" label) "60mb" "15mb")))
    (search-bench--compare (concat "grep-files-" tag) label dir 'grep "files_with_matches"
                           '("-l" "defun") runs)
    (search-bench--compare (concat "grep-content-" tag) label dir 'grep "content"
                           '("-n" "--with-filename" "defun") runs)
    (search-bench--compare (concat "glob-el-" tag) label dir 'glob nil
                           '("--files" "--no-ignore" "-g" "**/*.el") runs)))

(defun search-bench--modified-buffers (dir n lines)
  "Visit N files of the tree DIR in buffers of LINES lines, modified.
Return the buffers."
  (cl-loop for k below n
           for i = (* k 487)
           for file = (expand-file-name (format "pkg%02d/mod%d/file%04d.el" (% i 50) (% (/ i 50) 4) i)
                                        dir)
           collect (with-current-buffer (find-file-noselect file)
                     (erase-buffer)
                     (insert (search-bench--file-text (+ i 7) (* lines 40)))
                     (goto-char (point-min))
                     (forward-line lines)
                     (delete-region (point) (point-max))
                     (cl-assert (and (buffer-modified-p)
                                     (= lines (count-lines (point-min) (point-max)))))
                     (current-buffer))))

(defun search-bench--unsaved (dir runs)
  "Report Grep of DIR with 10 modified buffers against none, median of RUNS."
  (let ((buffers (search-bench--modified-buffers dir 10 5000))
        with without with-text without-text)
    (unwind-protect
        (let ((off (lambda ()
                     (let ((mevedel-tool-fs-read-unsaved-buffers nil))
                       (search-bench--ours 'grep dir "files_with_matches")))))
          (search-bench--ours 'grep dir "files_with_matches")
          (funcall off)
          (dotimes (_ runs)
            (let ((on (search-bench--ours 'grep dir "files_with_matches"))
                  (disk (funcall off)))
              (push (car on) with)
              (push (car disk) without)
              (setq with-text (cdr on) without-text (cdr disk)))))
      (dolist (b buffers)
        (with-current-buffer b (set-buffer-modified-p nil))
        (kill-buffer b)))
    (let ((marked (cl-count-if (lambda (line) (string-suffix-p "(unsaved changes in Emacs)" line))
                               (split-string with-text "\n" t)))
          (lines (cl-count ?\n with-text)))
      (unless (and (= lines (cl-count ?\n without-text)) (= marked 10))
        (error "The Grep with modified buffers printed %d lines, %d marked; without, %d"
               lines marked (cl-count ?\n without-text)))
      (mevedel-bench-describe "large tree, 10 of its files visited in modified buffers of 5,000 lines; Grep `defun' files_with_matches through the tool handler (the buffers' text searched, %d output lines, 10 marked) against the same Grep with `mevedel-tool-fs-read-unsaved-buffers' off (the disk, as grep-files-60mb), median of %d alternating runs"
                              lines runs)
      (mevedel-bench-report "grep-with-10-modified-buffers"
                            (* 1000 (mevedel-bench-percentile with 50)) "ms"
                            "grep-files-60mb" (* 1000 (mevedel-bench-percentile without 50))))))

(defun search-bench--responsiveness (dir)
  "Report the p99 lag of a 10 ms timer while Greps of DIR run."
  (let* ((searches 0)
         (lags (mevedel-bench-timer-lags
                3 (lambda ()
                    (let ((cell (list nil)))
                      (mevedel-core-search-grep dir "" (list :pattern "defun" :output-mode "content"
                                                             :line-numbers t :head-limit 250 :offset 0
                                                             :before 0 :after 0)
                                                0 (lambda (_s _v) (setcar cell t)))
                      (search-bench--wait cell)
                      (setq searches (1+ searches)))))))
    (mevedel-bench-describe "10 ms repeating timer while %d back-to-back Greps (`defun', content mode, head_limit 250) of the 60 MB tree run for 3 s; %d timer samples"
                            searches (length lags))
    (mevedel-bench-report "grep-60mb-timer-lag-p99" (mevedel-bench-percentile lags 99) "ms")))

(mevedel-core-ensure)
(unless (executable-find "rg")
  (error "The search bench needs ripgrep (rg); scripts/deps.sh installs it"))
(let* ((base (make-temp-file "mevedel-sbench" t))
       (small (search-bench--make-tree (expand-file-name "small" base) 500 30000))
       (large (search-bench--make-tree (expand-file-name "large" base) 5000 12000)))
  (unwind-protect
      (progn
        (search-bench--tree "small" small 11)
        (search-bench--tree "large" large 7)
        (search-bench--unsaved large 11)
        (search-bench--responsiveness large))
    (delete-directory base t)))

;;; search-bench.el ends here
