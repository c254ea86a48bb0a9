;;; cache-e2e-test.el --- Prompt caching and byte-stable requests, end to end  -*- lexical-binding: t; -*-

;;; Commentary:

;; A long tool loop against the scripted model, which applies each
;; provider's caching rules: every request extends the one before it
;; byte for byte (the test names the first differing byte), thinking
;; blocks come back unchanged (the server checks them), Anthropic
;; requests carry at most four breakpoints placed so that each reads
;; what the previous one wrote, OpenAI requests one stable
;; prompt_cache_key, and most of the input is read from the cache.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun cache-e2e--reads (count &optional label)
  "Return a script of COUNT sequential Read calls, then an answer naming LABEL.
On the Anthropic wire each answer comes with thinking blocks, one of
them redacted; the server checks that they come back unchanged."
  (append (cl-loop for n below count
                   collect `((thinking . ,(format "  I should read file %d next.  " (% n 3)))
                             (redacted_thinking . ,(format "opaque-%d" n))
                             ,(mevedel-e2e-read-call (% n 3))))
          `(((thinking . ,(format "  All %d read.  " count))
             (text . ,(format "Read them all%s." (if label (concat " " label) "")))))))

(defconst cache-e2e--files
  (mevedel-e2e-numbered-files 3 40 "   line %d of file %d  ")
  "Files whose lines start and end with spaces, which a trimmed replay would lose.")

(defun cache-e2e--breakpoints (raw)
  "Return how many cache breakpoints the request body RAW carries."
  (let ((count 0) (start 0))
    (while (setq start (string-search "\"cache_control\"" raw start))
      (setq count (1+ count) start (1+ start)))
    count))

(mevedel-e2e-deftest-matrix cache-e2e:a-long-turn-reads-its-prefix-from-the-cache
  "Thirty sequential calls: each request extends the last and reads it from the cache."
  (wire stream)
  (let* ((run (mevedel-e2e-run :wire wire :stream stream :files cache-e2e--files
                               :prompt "Read the files, one at a time."
                               :steps (cache-e2e--reads 30) :timeout 60))
         (requests (plist-get run :requests))
         (raws (mapcar (lambda (r) (alist-get 'raw r)) requests)))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length requests) 31))
    (mevedel-e2e-check-extends raws)
    (if (eq wire 'anthropic)
        (dolist (raw raws)
          (should (<= 2 (cache-e2e--breakpoints raw) 4)))
      (let ((keys (delete-dups
                   (mapcar (lambda (raw) (alist-get 'prompt_cache_key
                                                    (json-parse-string raw :object-type 'alist)))
                           raws))))
        (should (= (length keys) 1))
        (should (stringp (car keys)))))
    (let ((share (mevedel-e2e-cached-share requests)))
      (should (>= share 0.9)))))

(defun cache-e2e--turns (wire stream files steps turns)
  "Run headless turns of WIRE (streaming when STREAM) joined by --continue.
FILES populate the workspace, STEPS are the server's script.  TURNS is
a list of (ARGS . BEFORE): each turn runs bin/mevedel with ARGS after
calling BEFORE (nil or a function of the workspace root); every turn
after the first continues the last session.  Return the server's
requests."
  (mevedel-e2e-require-python)
  (let* ((root (mevedel-e2e-workspace files))
         (script (mevedel-e2e-write-script steps))
         (server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
         (init (mevedel-e2e-headless-config (mevedel-scripted-model-port server) wire stream nil))
         (process-environment (cons (concat "EMACS=" (expand-file-name invocation-name
                                                                       invocation-directory))
                                    process-environment)))
    (unwind-protect
        (cl-loop for (args . before) in turns
                 for continue = nil then '("--continue")
                 do (when before (funcall before root))
                 (with-temp-buffer
                   (let ((status (apply #'call-process
                                        (expand-file-name "bin/mevedel" mevedel-test-root)
                                        nil (list t nil) nil "--config" init "--dir" root
                                        (append continue args))))
                     (unless (zerop status)
                       (ert-fail (format "bin/mevedel %S failed: %s %S" args (buffer-string)
                                         (mevedel-scripted-model-mismatches server))))))
                 finally return
                 (progn (should-not (mevedel-scripted-model-mismatches server))
                        (mevedel-e2e-requests server)))
      (mevedel-scripted-model-stop server)
      (dolist (file (list script init)) (delete-file file))
      (delete-directory root t))))

(defun cache-e2e--continue (wire stream)
  "Run three headless turns of WIRE (streaming when STREAM) joined by --continue.
AGENTS.md changes between the first two.  Return the server's requests."
  (cache-e2e--turns
   wire stream (cons '("AGENTS.md" . "Be brief.\n") cache-e2e--files)
   (append (cache-e2e--reads 3 "once") (cache-e2e--reads 2 "twice")
           (cache-e2e--reads 2 "thrice"))
   `((("-p" "Read the files."))
     (("-p" "Read them again.")
      . ,(lambda (root)
           (with-temp-file (expand-file-name "AGENTS.md" root) (insert "Be very brief.\n"))))
     (("-p" "Once more.")))))

(mevedel-e2e-deftest-matrix cache-e2e:continue-replays-the-history-byte-for-byte
  "Each --continue extends the last request; the changed AGENTS.md comes as an update."
  (wire stream)
  (let* ((requests (cache-e2e--continue wire stream))
         (raws (mapcar (lambda (r) (alist-get 'raw r)) requests)))
    (should (= (length requests) 10))
    (mevedel-e2e-check-extends raws)
    ;; The system text stayed frozen; the new instructions were appended.
    (should (string-search "Be brief." (nth 4 raws)))
    (should-not (string-search "Be very brief." (nth 3 raws)))
    (should (string-search "Be very brief." (nth 4 raws)))
    ;; The first request of each later turn is read from the cache.
    (dolist (first '(4 7))
      (should (>= (mevedel-e2e-cached-share (list (nth first requests))) 0.8)))))

;;;; What a session learns between turns is appended

(defun cache-e2e--search (query)
  "Return a script step calling ToolSearch with QUERY."
  `((tool_calls . [((name . "ToolSearch") (arguments . ((query . ,query))))])))

(defun cache-e2e--mcp (mode)
  "Write an MCP configuration of the fault server `srv' in MODE; return its file."
  (mevedel-e2e-mcp-config
   `((srv . ((command . "python3")
             (args . [,(expand-file-name "crates/mevedel-core/tests/mcp-servers/fault_server.py"
                                         mevedel-test-root)
                      ,mode]))))))

(mevedel-e2e-deftest-matrix cache-e2e:what-changes-between-turns-is-appended
  "A role file, a skill and an MCP server's new tools between --continue turns.
Each request extends the last: the tools and the system text stay as
the first turn sent them, and the new roles, skills and specialists
arrive as appended context updates and listings."
  (wire stream)
  (let* ((basic (cache-e2e--mcp "basic"))
         (many (cache-e2e--mcp "many"))
         (requests
          (unwind-protect
              (cache-e2e--turns
               wire stream cache-e2e--files
               (append
                ;; Turn 1 finds the server's echo tool.
                (list (cache-e2e--search "echo"))
                (cl-subseq (cache-e2e--reads 2 "once") 0 2)
                (list '((text . "Read them once."))
                      ;; Turn 2: the checker role and the lint skill
                      ;; are new, and the server lists 100 more tools.
                      (cache-e2e--search "tool_042"))
                (cache-e2e--reads 1 "twice")
                (cache-e2e--reads 1 "thrice"))
               `((("-p" "Read the files." "--mcp-config" ,basic))
                 (("-p" "Read them again." "--mcp-config" ,many)
                  . ,(lambda (root)
                       (make-directory (expand-file-name ".mevedel/agents" root) t)
                       (with-temp-file (expand-file-name ".mevedel/agents/checker.md" root)
                         (insert "---\ndescription: Checks the claims made\n---\nCheck.\n"))
                       (make-directory (expand-file-name ".mevedel/skills/lint" root) t)
                       (with-temp-file (expand-file-name ".mevedel/skills/lint/SKILL.md" root)
                         (insert "---\nname: lint\ndescription: Lints the tree\n---\nLint.\n"))))
                 (("-p" "Once more." "--mcp-config" ,many))))
            (delete-file basic)
            (delete-file many)))
         (raws (mapcar (lambda (r) (alist-get 'raw r)) requests))
         (first-of-turn-2 (nth 4 raws)))
    (should (= (length requests) 9))
    (mevedel-e2e-check-extends raws)
    (should (string-search "mcp__srv__echo" (nth 1 raws)))
    ;; Turn 1 knew nothing of the role, the skill or the many tools.
    (dolist (raw (seq-take raws 4))
      (should-not (string-search "checker" raw))
      (should-not (string-search "skill://local-mevedel/lint" raw)))
    ;; Turn 2's first request appends them as context updates.
    (should (string-match-p "component=\\\\\"agent-roles\\\\\"" first-of-turn-2))
    (should (string-search "- checker: Checks the claims made" first-of-turn-2))
    (should (string-match-p "component=\\\\\"skills-roster\\\\\"" first-of-turn-2))
    (should (string-search "skill://local-mevedel/lint" first-of-turn-2))
    (should (string-search "mcp__srv__tool_042" (nth 5 raws)))
    ;; The first request of each later turn is read from the cache.
    (dolist (first '(4 7))
      (should (>= (mevedel-e2e-cached-share (list (nth first requests))) 0.8)))))

(provide 'cache-e2e-test)
;;; cache-e2e-test.el ends here
