;;; mcp-agents-e2e-test.el --- MCP tools in child agents and in ToolCall  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; MCP tools on the paths the single-call tests of mcp-e2e-test.el do
;; not take: a result too large for a ToolCall program's value budget,
;; through bin/mevedel, and child agents spawned by Agent, in a session
;; of this Emacs, calling the session's real stdio servers
;; (server-everything from .deps/mcp, and the project's fault server).

;;; Code:

(require 'ert)
(require 'json)
(require 'mevedel-e2e-helpers)
(require 'mevedel-agent)
(require 'mevedel-ptc)

(defun mcp-agents-e2e--fault-server ()
  "Return the fault server script."
  (expand-file-name "crates/mevedel-core/tests/mcp-servers/fault_server.py" mevedel-test-root))

(defun mcp-agents-e2e--config (servers)
  "Write an MCP configuration of SERVERS (an alist NAME -> spec); return its file."
  (let ((file (make-temp-file "mevedel-mcp" nil ".json")))
    (with-temp-file file
      (insert (json-encode `((mcpServers . ,servers)))))
    file))

(ert-deftest mevedel-e2e:mcp-result-over-the-value-budget-is-previewed-in-toolcall ()
  "A ToolCall of an MCP tool answering 150,000 characters gets a preview.
The program does not fail on its 100,000-character value budget: the
model sees the <persisted-output> preview (head and tail), and the
artifact:// address it names holds the whole answer, the omitted
middle too."
  (let* ((config (mcp-agents-e2e--config
                  `((fault . ((command . "python3")
                              (args . [,(mcp-agents-e2e--fault-server) "big"]))))))
         (run (unwind-protect
                  (mevedel-e2e-headless
                   :steps `(((tool_calls . [((name . "ToolCall") (id . "call_big")
                                             (arguments . ((program . "(mcp__fault__big :size 150000)"))))]))
                            ((expect . ((results . [((contains . "<persisted-output>"))])))
                             (tool_calls . [((name . "Grep")
                                             (arguments . ((pattern . "line 002500 of")
                                                           (path . "artifact://tool-results/call_big_1.txt")
                                                           (output_mode . "content"))))]))
                            ((expect . ((results . [((contains . "line 002500 of the big answer"))])))
                             (text . "Done.")))
                   :args (list "-p" "Get the big answer" "--json" "--permission-mode" "full-auto"
                               "--mcp-config" config))
                (delete-file config)))
         (log (plist-get run :log))
         (result (json-encode (alist-get 'body (nth 1 log)))))
    (should (equal (plist-get run :status) 0))
    (should (= (length log) 3))
    (should-not (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e))) log))
    (should (string-match-p "Output too large: 150000 characters" result))
    (should (string-match-p "artifact://tool-results/call_big_1.txt" result))
    (should-not (string-match-p "value budget" result))
    ;; The preview, not the whole, reached the model; the artifact has
    ;; the middle the preview omits.
    (should (< (length result) 100000))
    (should (string-match-p "END OF THE BIG ANSWER" result))
    (should-not (string-match-p "line 002500 of" result))))

;;;; Child agents

(defun mcp-agents-e2e--everything-spec ()
  "Return the stdio spec of server-everything, failing loudly when it is missing."
  (let ((js (expand-file-name
             ".deps/mcp/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
             mevedel-test-root)))
    (unless (file-exists-p js)
      (ert-fail (format "%s is missing: the MCP test servers are not installed; \
run scripts/deps.sh" js)))
    `((command . "node") (args . [,js "stdio"]))))

(defmacro mcp-agents-e2e--with-session (vars spec &rest body)
  "Run BODY with VARS (CHAT SERVER) for a full-auto session with MCP servers.
SPEC is (SERVERS CONVERSATIONS FILES): SERVERS the alist of the
session's --mcp-config file, CONVERSATIONS the scripted model's (see
`mevedel-e2e-write-conversations'), FILES the workspace's."
  (declare (indent 2))
  (pcase-let ((`(,chat ,server) vars)
              (`(,servers ,conversations ,files) spec))
    `(progn
       (mevedel-e2e-require-python)
       (let* ((root (mevedel-e2e-workspace (or ,files '(("a.txt" . "a\n")))))
              (config (mcp-agents-e2e--config ,servers))
              (mevedel-mcp-command-line-files (list config))
              (mevedel-permissions-mode 'full-auto)
              (script (mevedel-e2e-write-conversations ,conversations))
              (,server (mevedel-scripted-model-start script :vars `(("root" . ,root))))
              (gptel-stream t)
              (view (mevedel root))
              (,chat (mevedel-view-chat view)))
         (setf (mevedel-chat-backend ,chat) (mevedel-scripted-model-backend ,server)
               (mevedel-chat-model ,chat) 'scripted-model)
         (unwind-protect (progn ,@body)
           (mevedel-scripted-model-stop ,server)
           (kill-buffer view)
           (when (buffer-live-p (mevedel-chat-data-buffer ,chat))
             (kill-buffer (mevedel-chat-data-buffer ,chat)))
           (dolist (file (list script config)) (delete-file file))
           (delete-directory root t))))))

(defun mcp-agents-e2e--quiet-p (chat)
  "Return non-nil when CHAT and every agent of its session are idle."
  (and (not (mevedel-chat-busy-p chat))
       (not (gethash (mevedel-session-id (mevedel-chat-session chat))
                     mevedel-mailbox--pending-wakes))
       (cl-every (lambda (agent) (eq (plist-get agent :status) 'idle))
                 (mevedel-agent-list chat))))

(defun mcp-agents-e2e--settle (chat seconds)
  "Wait up to SECONDS until CHAT's session stays quiet for half a second."
  (let ((deadline (+ (float-time) seconds)) (quiet-since nil))
    (while (and (< (float-time) deadline)
                (not (and quiet-since (> (- (float-time) quiet-since) 0.5))))
      (if (mcp-agents-e2e--quiet-p chat)
          (unless quiet-since (setq quiet-since (float-time)))
        (setq quiet-since nil))
      (accept-process-output nil 0.05))
    (should (mcp-agents-e2e--quiet-p chat))))

(defun mcp-agents-e2e--send (chat text)
  "Send TEXT in CHAT and wait for the turn's outcome; return it."
  (let ((outcome nil))
    (mevedel-chat-send chat text :on-done (lambda (_chat result) (setq outcome result)))
    (mevedel-test-wait-until outcome 60)
    outcome))

(defun mcp-agents-e2e--served (server conversation)
  "Return the request bodies SERVER's CONVERSATION (its index) answered, as JSON."
  (cl-loop for entry in (mevedel-scripted-model-log server)
           when (eql (alist-get 'conversation entry) conversation)
           collect (json-encode (alist-get 'body entry))))

(defun mcp-agents-e2e--catalog (chat)
  "Return the identities a ToolCall program of CHAT may call."
  (mapcar #'mevedel-tool-identity (mevedel-ptc-catalog (mevedel-chat-data-buffer chat))))

(defun mcp-agents-e2e--child (chat path)
  "Return the chat of the retained agent PATH of CHAT's session."
  (mevedel-chat-of-buffer (mevedel-agent-conversation chat path)))

(defconst mcp-agents-e2e--noted '((text . "Noted.") (times . 50))
  "A root step answering every later background turn.")

(ert-deftest mevedel-e2e:mcp-child-agent-calls-the-sessions-servers-with-a-frozen-set ()
  "A default child calls MCP tools through ToolCall on the session's servers.
It inherits the root's MCP specialists when spawned; a tool a server
lists later (tools/list_changed) reaches the root but not the child,
whose follow-up cannot call it.  One fault server process answers
both agents."
  (let ((fault-log (make-temp-file "mevedel-fault-log")))
    (unwind-protect
        (mcp-agents-e2e--with-session (chat server)
            (`((everything . ,(mcp-agents-e2e--everything-spec))
               (fault . ((command . "python3")
                         (args . [,(mcp-agents-e2e--fault-server) "basic"])
                         (env . ((FAULT_LOG . ,fault-log))))))
             `(("retained agent /root/echoer"
                ((tool_calls . [((name . "ToolCall")
                                 (arguments . ((program . "(mcp__everything__echo :message \"from the child\")"))))]))
                ((expect . ((results . [((contains . "Echo: from the child"))])))
                 (tool_calls . [((name . "ToolCall")
                                 (arguments . ((program . "(mcp__fault__echo :message \"child on fault\")"))))]))
                ((expect . ((results . [((contains . "Echo: child on fault"))])))
                 (text . "child report"))
                ((expect . ((user_contains . "Call the new tool")))
                 (tool_calls . [((name . "ToolCall")
                                 (arguments . ((program . "(mcp__fault__added_0)"))))]))
                ((expect . ((results . [((contains . "neither an operation"))])))
                 (text . "cannot call it")))
               (nil
                ((tool_calls . [((name . "Agent")
                                 (arguments . ((task_name . "Echoer")
                                               (message . "Echo through the servers"))))]))
                ((expect . ((results . [((contains . "/root/echoer"))])))
                 (tool_calls . [((name . "WaitAgent") (arguments . ((timeout_ms . 30000))))]))
                ((expect . ((user_contains . "child report")))
                 (tool_calls . [((name . "ToolCall")
                                 (arguments . ((program . "(mcp__fault__add_tool)"))))]))
                ((expect . ((results . [((contains . "added"))])))
                 (text . "Root done."))
                ,mcp-agents-e2e--noted))
             nil)
          (should (eq (mcp-agents-e2e--send chat "Delegate the echo.") 'done))
          (mcp-agents-e2e--settle chat 60)
          (should-not (mevedel-scripted-model-mismatches server))
          (let ((child (mcp-agents-e2e--child chat "/root/echoer"))
                (first (car (mcp-agents-e2e--served server 0))))
            ;; The child saw the MCP tools in its own specialist listing,
            ;; with no MCP schema among its provider tools.
            (should (string-match-p "(mcp__everything__echo :message string)" first))
            (should-not (string-match-p "\"name\":\"mcp__" first))
            (should (member "mcp__everything__echo" (mcp-agents-e2e--catalog child)))
            ;; The root's add_tool made the server list a new tool: the
            ;; root sees it, the running child's frozen set does not.
            (mevedel-test-wait-until
             (member "mcp__fault__added_0" (mcp-agents-e2e--catalog chat)) 10)
            (should (member "mcp__fault__added_0" (mcp-agents-e2e--catalog chat)))
            (should-not (member "mcp__fault__added_0" (mcp-agents-e2e--catalog child)))
            (should (eq (mevedel-agent-send chat "/root/echoer" "Call the new tool") 'started))
            (mcp-agents-e2e--settle chat 60)
            (should-not (mevedel-scripted-model-mismatches server))
            (should (equal (mevedel-agent-result chat "/root/echoer")
                           '(completed . "cannot call it"))))
          ;; One server process, started once, served the root and the child.
          (should (= 1 (with-temp-buffer
                         (insert-file-contents fault-log)
                         (how-many "^initialize ")))))
      (delete-file fault-log))))

(ert-deftest mevedel-e2e:mcp-a-role-sees-only-the-mcp-tools-it-names ()
  "A role without MCP tools cannot find or call them; one naming a tool gets that one.
Roles come from the workspace's .mevedel/agents files."
  (mcp-agents-e2e--with-session (chat server)
      (`((everything . ,(mcp-agents-e2e--everything-spec)))
       `(("retained agent /root/plain"
          ((tool_calls . [((name . "ToolSearch") (arguments . ((query . "echo"))))]))
          ((tool_calls . [((name . "ToolCall")
                           (arguments . ((program . "(mcp__everything__echo :message \"forbidden\")"))))]))
          ((expect . ((results . [((contains . "neither an operation"))])))
           (text . "plain report")))
         ("retained agent /root/narrow"
          ((tool_calls . [((name . "ToolCall")
                           (arguments . ((program . "(mcp__everything__echo :message \"narrow ok\")"))))]))
          ((expect . ((results . [((contains . "Echo: narrow ok"))])))
           (tool_calls . [((name . "ToolCall")
                           (arguments . ((program . "(mcp__everything__get-sum :a 1 :b 2)"))))]))
          ((expect . ((results . [((contains . "neither an operation"))])))
           (text . "narrow report")))
         (nil
          ((tool_calls . [((name . "Agent")
                           (arguments . ((task_name . "Plain") (role . "plain")
                                         (message . "Look around"))))
                          ((name . "Agent")
                           (arguments . ((task_name . "Narrow") (role . "narrow")
                                         (message . "Look around"))))]))
          ((expect . ((results . [((contains . "/root/plain")) ((contains . "/root/narrow"))])))
           (text . "Root done."))
          ,mcp-agents-e2e--noted))
       '((".mevedel/agents/plain.md"
          . "---\ndescription: Reads, no MCP\ntools: Read, ToolSearch, ToolCall\n---\nLook.\n")
         (".mevedel/agents/narrow.md"
          . "---\ndescription: One MCP tool\ntools: ToolSearch, ToolCall, mcp__everything__echo\n---\nLook.\n")))
    (should (eq (mcp-agents-e2e--send chat "Delegate.") 'done))
    (mcp-agents-e2e--settle chat 60)
    (should-not (mevedel-scripted-model-mismatches server))
    (should (equal (mevedel-agent-result chat "/root/plain") '(completed . "plain report")))
    (should (equal (mevedel-agent-result chat "/root/narrow") '(completed . "narrow report")))
    (let ((plain (mcp-agents-e2e--served server 0))
          (narrow (mcp-agents-e2e--served server 1)))
      ;; The plain role's listing and ToolSearch show no MCP tool.
      (should-not (string-match-p "mcp__" (nth 0 plain)))
      (should (string-match-p "ToolSearch" (nth 1 plain)))
      (should-not (string-match-p "mcp__" (nth 1 plain)))
      ;; The narrow role's listing shows echo and no other tool of the server.
      (should (string-match-p "mcp__everything__echo" (nth 0 narrow)))
      (should-not (string-match-p "mcp__everything__get-sum" (nth 0 narrow))))
    ;; The root sees every tool of the server.
    (should (member "mcp__everything__get-sum" (mcp-agents-e2e--catalog chat)))))

(provide 'mcp-agents-e2e-test)
;;; mcp-agents-e2e-test.el ends here
