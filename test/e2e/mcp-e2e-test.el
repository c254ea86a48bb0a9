;;; mcp-e2e-test.el --- MCP servers through bin/mevedel  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; MCP servers the way a user starts them: bin/mevedel -p with
;; --mcp-config, --trust-mcp and a workspace .mcp.json, against the
;; scripted model and the real server-everything from .deps/mcp (run
;; scripts/deps.sh; these tests fail naming it when it is missing),
;; plus the project's fault server for 100 tools and a crash at start.

;;; Code:

(require 'ert)
(require 'json)
(require 'mevedel-e2e-helpers)

(defun mcp-e2e--fault-server ()
  "Return the fault server script."
  (expand-file-name "crates/mevedel-core/tests/mcp-servers/fault_server.py" mevedel-test-root))

(defun mcp-e2e--output (run)
  "Return RUN's stdout and stderr together."
  (concat (plist-get run :stdout) "\n" (plist-get run :stderr)))

(defun mcp-e2e--search-then-call (program &optional expect)
  "Steps: ToolSearch for the echo tool, ToolCall PROGRAM, then finish.
EXPECT is a string the ToolCall's result must contain."
  `(((tool_calls . [((name . "ToolSearch") (arguments . ((query . "echo"))))]))
    ((tool_calls . [((name . "ToolCall") (arguments . ((program . ,program))))]))
    ,(append (and expect `((expect . ((results . [((contains . ,expect))])))))
             '((text . "Done.")))))

(ert-deftest mevedel-e2e:mcp-tool-found-and-called-through-toolsearch-and-toolcall ()
  "--mcp-config: ToolSearch finds mcp__everything__echo; ToolCall runs it."
  (let* ((config (mevedel-e2e-mcp-config `((everything . ,(mevedel-e2e-mcp-everything-spec)))))
         (run (unwind-protect
                  (mevedel-e2e-headless
                   :steps (mcp-e2e--search-then-call
                           "(mcp__everything__echo :message \"hello from mcp\")"
                           "Echo: hello from mcp")
                   :args (list "-p" "Echo something" "--json" "--permission-mode" "full-auto"
                               "--mcp-config" config))
                (delete-file config)))
         (log (plist-get run :log))
         (search-result (json-encode (alist-get 'body (nth 1 log)))))
    (should (equal (plist-get run :status) 0))
    ;; ToolSearch returned the full contract of the MCP tool.
    (should (string-match-p "mcp__everything__echo" search-result))
    ;; The echoed text reached the transcript.
    (should (string-match-p "Echo: hello from mcp" (plist-get run :stdout)))
    (should-not (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e))) log))))

(ert-deftest mevedel-e2e:mcp-tools-cost-no-request-schema ()
  "The first request's tools are the same bytes with 100 MCP tools configured."
  (let* ((config (mevedel-e2e-mcp-config
                  `((many . ((command . "python3")
                             (args . [,(mcp-e2e--fault-server) "many"]))))))
         (steps '(((text . "Hi."))))
         (plain (mevedel-e2e-headless :steps steps :args '("-p" "Hello" "--json")))
         (with-mcp (unwind-protect
                       (mevedel-e2e-headless
                        :steps steps
                        :settings '((setq mevedel-mcp-start-at-session-start t))
                        :args (list "-p" "Hello" "--json" "--mcp-config" config))
                     (delete-file config)))
         (tools (lambda (run) (json-encode (alist-get 'tools (alist-get 'body
                                                                        (car (plist-get run :log))))))))
    (should (equal (plist-get plain :status) 0))
    (should (equal (plist-get with-mcp :status) 0))
    (should (> (length (funcall tools plain)) 100))
    (should (equal (funcall tools plain) (funcall tools with-mcp)))))

(ert-deftest mevedel-e2e:mcp-workspace-servers-start-only-when-trusted ()
  "A workspace .mcp.json starts nothing unapproved; --trust-mcp starts it."
  (let* ((marker (make-temp-file "mevedel-mcp-marker"))
         (mcp-json (lambda ()
                     (json-encode
                      `((mcpServers
                         . ((ws . ((command . "sh")
                                   (args . ["-c" "touch \"$0\"; exec node \"$1\" stdio"
                                            ,marker ,(mevedel-e2e-mcp-everything)])))))))))
         (steps (mcp-e2e--search-then-call "(mcp__ws__echo :message \"from the workspace\")"))
         (args '("-p" "Echo" "--json" "--permission-mode" "full-auto")))
    (delete-file marker)
    (unwind-protect
        (let ((untrusted (mevedel-e2e-headless :files `((".mcp.json" . ,(funcall mcp-json)))
                                               :steps steps :args args)))
          (should-not (file-exists-p marker))
          ;; The model is told, in one line, and the user too.
          (should (string-match-p "declares MCP servers (ws) that are not approved"
                                  (json-encode (alist-get 'body (car (plist-get untrusted :log))))))
          (should (string-match-p "not approved" (plist-get untrusted :stderr)))
          (should-not (string-match-p "from the workspace\"\\|Echo: from the workspace"
                                      (plist-get untrusted :stdout)))
          (let ((trusted (mevedel-e2e-headless :files `((".mcp.json" . ,(funcall mcp-json)))
                                               :steps steps
                                               :args (append args '("--trust-mcp")))))
            (should (file-exists-p marker))
            (should (equal (plist-get trusted :status) 0))
            (should (string-match-p "Echo: from the workspace" (plist-get trusted :stdout)))))
      (when (file-exists-p marker) (delete-file marker)))))

(ert-deftest mevedel-e2e:mcp-deny-rule-on-a-server-refuses-its-tools ()
  "A deny rule naming mcp__everything refuses every tool of that server."
  (let* ((config (mevedel-e2e-mcp-config `((everything . ,(mevedel-e2e-mcp-everything-spec)))))
         (run (unwind-protect
                  (mevedel-e2e-headless
                   :steps (mcp-e2e--search-then-call
                           "(mcp__everything__echo :message \"should not run\")")
                   :settings '((setq mevedel-permissions-rules '((deny "mcp__everything"))))
                   :args (list "-p" "Echo" "--json" "--permission-mode" "full-auto"
                               "--mcp-config" config))
                (delete-file config))))
    (should-not (string-match-p "Echo: should not run" (plist-get run :stdout)))
    (should (string-match-p "a permission rule forbids this mcp__everything__echo call"
                            (json-encode (alist-get 'body (nth 2 (plist-get run :log))))))))

(ert-deftest mevedel-e2e:mcp-ask-mode-refuses-headless ()
  "In ask mode nobody can approve an MCP call headless: it is refused."
  (let* ((config (mevedel-e2e-mcp-config `((everything . ,(mevedel-e2e-mcp-everything-spec)))))
         (run (unwind-protect
                  (mevedel-e2e-headless
                   :steps (mcp-e2e--search-then-call
                           "(mcp__everything__echo :message \"needs asking\")")
                   :args (list "-p" "Echo" "--json" "--mcp-config" config))
                (delete-file config))))
    (should-not (string-match-p "Echo: needs asking" (plist-get run :stdout)))
    (should (string-match-p "Permission denied.*mcp__everything__echo"
                            (json-encode (alist-get 'body (nth 2 (plist-get run :log))))))))

(ert-deftest mevedel-e2e:mcp-server-crashing-at-start-is-named-and-the-turn-goes-on ()
  "A server that dies at start is named with its stderr; the turn finishes."
  (let* ((config (mevedel-e2e-mcp-config
                  `((broken . ((command . "python3")
                               (args . [,(mcp-e2e--fault-server) "crash-at-start"]))))))
         (start (float-time))
         (run (unwind-protect
                  (mevedel-e2e-headless
                   :steps '(((tool_calls . [((name . "ToolSearch")
                                             (arguments . ((query . "echo"))))]))
                            ((text . "Done.")))
                   :args (list "-p" "Find echo" "--json" "--mcp-config" config
                               "--timeout" "60"))
                (delete-file config))))
    (should (< (- (float-time) start) 45))
    (should (equal (plist-get run :status) 0))
    (should (string-match-p "MCP server broken failed" (mcp-e2e--output run)))
    (should (string-match-p "cannot open the database" (mcp-e2e--output run)))))

(ert-deftest mevedel-e2e:mcp-resources-read-as-mcp-addresses ()
  "Read mcp:// lists servers, mcp://SERVER its resources, and one reads as text.
An unapproved workspace server is listed but never started."
  (let* ((config (mevedel-e2e-mcp-config `((everything . ,(mevedel-e2e-mcp-everything-spec)))))
         (marker (make-temp-file "mevedel-mcp-marker"))
         (doc (concat "mcp://everything/"
                      (url-hexify-string "demo://resource/static/document/features.md")))
         (run (unwind-protect
                  (progn
                    (delete-file marker)
                    (mevedel-e2e-headless
                     :files `((".mcp.json"
                               . ,(json-encode
                                   `((mcpServers
                                      . ((ws . ((command . "sh")
                                                (args . ["-c" "touch \"$0\"" ,marker])))))))))
                     :steps `(((tool_calls . [((name . "Read")
                                               (arguments . ((file_path . "mcp://"))))]))
                              ((expect . ((results . [((contains . "mcp://everything"))])))
                               (tool_calls . [((name . "Read")
                                               (arguments . ((file_path . "mcp://ws"))))]))
                              ((tool_calls . [((name . "Read")
                                               (arguments . ((file_path . "mcp://everything"))))]))
                              ((expect . ((results . [((contains . ,doc))])))
                               (tool_calls . [((name . "Read")
                                               (arguments . ((file_path . ,doc))))]))
                              ((expect . ((results . [((contains . "Everything Server - Features"))])))
                               (text . "Done.")))
                     :args (list "-p" "Look at the MCP resources" "--json"
                                 "--mcp-config" config)))
                (delete-file config)))
         (log (plist-get run :log))
         (listing (json-encode (alist-get 'body (nth 1 log))))
         (unapproved (json-encode (alist-get 'body (nth 2 log)))))
    (should (equal (plist-get run :status) 0))
    (should (string-match-p "mcp://everything  configured, stdio from command-line" listing))
    (should (string-match-p "mcp://ws  unapproved" listing))
    (should (string-match-p "not approved" unapproved))
    (should-not (file-exists-p marker))
    (should-not (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e))) log))))


(ert-deftest mevedel-e2e:mcp-images-reach-the-model-as-image-content ()
  "get-tiny-image's PNG is sent to the model as an image, not as text."
  (let* ((config (mevedel-e2e-mcp-config `((everything . ,(mevedel-e2e-mcp-everything-spec)))))
         (run (unwind-protect
                  (mevedel-e2e-headless
                   :steps (mcp-e2e--search-then-call "(mcp__everything__get-tiny-image)")
                   :args (list "-p" "Show the image" "--json" "--permission-mode" "full-auto"
                               "--mcp-config" config))
                (delete-file config)))
         (last-request (json-encode (alist-get 'body (nth 2 (plist-get run :log))))))
    (should (equal (plist-get run :status) 0))
    (should (string-match-p "data:image/png;base64," last-request))))

(ert-deftest mevedel-e2e:mcp-pre-tool-use-hooks-match-mcp-names ()
  "A PreToolUse hook whose matcher names mcp__everything__ blocks the call."
  (let* ((config (mevedel-e2e-mcp-config `((everything . ,(mevedel-e2e-mcp-everything-spec)))))
         (run (unwind-protect
                  (mevedel-e2e-headless
                   :steps (mcp-e2e--search-then-call
                           "(mcp__everything__echo :message \"hooked\")")
                   :settings '((setq mevedel-hooks
                                     '((PreToolUse
                                        (:matcher "mcp__everything__.*"
                                         :command "echo no MCP today >&2; exit 2")))))
                   :args (list "-p" "Echo" "--json" "--permission-mode" "full-auto"
                               "--mcp-config" config))
                (delete-file config))))
    (should-not (string-match-p "Echo: hooked" (plist-get run :stdout)))
    (should (string-match-p "no MCP today"
                            (json-encode (alist-get 'body (nth 2 (plist-get run :log))))))))

(provide 'mcp-e2e-test)
;;; mcp-e2e-test.el ends here
