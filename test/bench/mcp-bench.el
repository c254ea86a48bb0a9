;;; mcp-bench.el --- MCP tools: a call's overhead, ToolSearch over 5,000  -*- lexical-binding: t; -*-

;;; Commentary:

;; Two figures of MCP servers as a session's specialists, each from the
;; entry point a model's call reaches (`mevedel-pipeline-run-tool', the
;; function every gptel tool of mevedel calls), in a session whose
;; servers come from the user's MCP file:
;;
;; - mcp-call-overhead: a ToolCall of server-everything's `echo' (the
;;   real npm server in .deps/mcp, run by node over stdio) through the
;;   whole pipeline: ToolCall, the program compiled and run, the nested
;;   call validated against the server's schema, permission (full-auto),
;;   hooks, the module's client and the result back through the event
;;   channel.  Minus the same call made by a bare `rmcp' client (the
;;   peer, crates/mevedel-core/examples/mcp_bare_echo.rs, which
;;   scripts/bench.sh builds) to its own server-everything, in alternating rounds of this run.  Not
;;   a peer field: its ratio would divide a whole call by an overhead.
;; - mcp-toolsearch-5k: ToolSearch in a session of 50 servers of 105
;;   tools each (the project's scripted fault server in its `many' mode),
;;   started, listed and registered by the session's first ToolSearch as
;;   for any user.
;;
;; Figures are medians of single calls, so that the calls this shared
;; machine preempts do not decide them.  Missing servers (scripts/deps.sh
;; installs them) or a missing peer fail the bench.

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'mevedel-bench-lib)
(require 'mevedel)
(mevedel--load)
(require 'mevedel-mcp)

(defun mcp-bench--file (relative)
  "Return RELATIVE in the checkout, failing the bench when it is missing."
  (mevedel-bench-checkout-file
   relative "the MCP test servers are not installed; run scripts/deps.sh"))

(defun mcp-bench--session (servers body)
  "Call BODY with a chat whose user MCP file configures SERVERS.
SERVERS is an alist NAME -> stdio spec; the chat runs in full-auto."
  (let* ((root (file-name-as-directory (make-temp-file "mcp-bench-ws-" t)))
         (mevedel-mcp-user-file (make-temp-file "mcp-bench-" nil ".json"))
         (inhibit-message t))
    (with-temp-file mevedel-mcp-user-file
      (insert (json-encode `((mcpServers . ,servers)))))
    (let ((chat (mevedel-chat-get-create root)))
      (setf (mevedel-chat-permission-mode chat) 'full-auto)
      (unwind-protect (funcall body chat)
        ;; Closes the session, which stops its servers.
        (kill-buffer (mevedel-chat-data-buffer chat))
        (delete-file mevedel-mcp-user-file)
        (delete-directory root t)))))

(defun mcp-bench--call (chat tool args)
  "Start TOOL (a name) with ARGS as the model's call in CHAT; wait for its result.
Return (RESULT . MILLISECONDS), the time from the call to the result's
arrival (the callback runs from the event channel's filter).  The tool
is looked up first, as gptel's tool holds it."
  (let* ((box (list nil))
         (tool (mevedel-tool-get tool))
         (id (format "call_%x" (random most-positive-fixnum)))
         (start (float-time)))
    (mevedel-pipeline-run-tool tool args
                               (lambda (result)
                                 (setcar box (cons result (* 1000 (- (float-time) start)))))
                               :tool-use-id id
                               :data-buffer (mevedel-chat-data-buffer chat)
                               :session (mevedel-chat-session chat))
    (let ((deadline (+ start 60)))
      (while (and (not (car box)) (< (float-time) deadline))
        (accept-process-output nil 0.05)))
    (or (car box) (error "%s %S had no result within 60 s" (mevedel-tool-name tool) args))))

(defun mcp-bench--median-ms (n call)
  "Return the median milliseconds of N calls of CALL, one after the other.
CALL returns (RESULT . MILLISECONDS)."
  (let (samples)
    (dotimes (_ n)
      (push (cdr (funcall call)) samples))
    (mevedel-bench-percentile samples 50)))

;;;; A call's overhead

(defconst mcp-bench--echo-program "(mcp__everything__echo :message \"hi\")"
  "The ToolCall program the model sends.")

(defun mcp-bench--peer ()
  "Return the bare rmcp client, which scripts/bench.sh builds first."
  (mcp-bench--file "target/release/examples/mcp_bare_echo"))

(defun mcp-bench--bare (peer everything n)
  "Return the bare client PEER's median milliseconds of N echo calls of EVERYTHING."
  (with-temp-buffer
    (unless (zerop (call-process peer nil t nil "20" (number-to-string n)
                                 "node" everything "stdio"))
      (error "The bare rmcp peer failed: %s" (buffer-string)))
    (string-to-number (buffer-string))))

(defun mcp-bench--echo (chat)
  "Run the echo ToolCall in CHAT; return (RESULT . MILLISECONDS)."
  (let ((call (mcp-bench--call chat "ToolCall" (list :program mcp-bench--echo-program))))
    (unless (string-match-p "Echo: hi" (car call))
      (error "Unexpected ToolCall result: %s" (car call)))
    call))

(let ((everything (mcp-bench--file
                   ".deps/mcp/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
      (peer (mcp-bench--peer)))
  (mcp-bench--session
   `((everything . ((command . "node") (args . [,everything "stdio"]))))
   (lambda (chat)
     (let ((rounds 7) (n 100) ours bare)
       ;; The first call starts the server; then warm up.
       (mcp-bench--median-ms 20 (lambda () (mcp-bench--echo chat)))
       (dotimes (_ rounds)
         (push (mcp-bench--bare peer everything n) bare)
         (garbage-collect)
         (push (mcp-bench--median-ms n (lambda () (mcp-bench--echo chat))) ours))
       (let ((ours (mevedel-bench-percentile ours 50))
             (bare (mevedel-bench-percentile bare 50)))
         (mevedel-bench-describe "a ToolCall `%s' of server-everything's echo (node, stdio) \
through the pipeline from `mevedel-pipeline-run-tool' to its result (program, nested call \
validated against the server's schema, full-auto permission, hooks, module client, event \
channel): %.3f ms per call; the bare rmcp client (examples/mcp_bare_echo.rs, its own \
server-everything): %.3f ms per call; each the median of %d alternating rounds, a round \
the median of %d calls in a row; the figure is the difference; goal <= 2 ms"
                                 mcp-bench--echo-program ours bare rounds n)
         (mevedel-bench-report "mcp-call-overhead" (- ours bare) "ms"))))))

;;;; ToolSearch over 5,000 tools

(defconst mcp-bench--queries
  '("mcp__srv17__tool_042" "srv17" "tool_042" "generated number" "zebra")
  "ToolSearch queries: one exact tool, a server, a tool name on every
server, description words, and no match.")

(defun mcp-bench--search-ms (chat query)
  "Return the milliseconds of a ToolSearch for QUERY in CHAT.
That is the median of 5 rounds, a round the median of 200 searches."
  (mevedel-bench-percentile
   (cl-loop repeat 5
            collect (mcp-bench--median-ms
                     200 (lambda () (mcp-bench--call chat "ToolSearch" (list :query query)))))
   50))

(let ((fault (mcp-bench--file "crates/mevedel-core/tests/mcp-servers/fault_server.py"))
      (servers 50))
  (mcp-bench--session
   (cl-loop for i below servers
            collect `(,(intern (format "srv%02d" i))
                      . ((command . "python3") (args . [,fault "many"]))))
   (lambda (chat)
     (pcase-let* ((`(,first . ,first-ms) (mcp-bench--call chat "ToolSearch" '(:query "echo")))
                  (catalog (mevedel-ptc-catalog (mevedel-chat-data-buffer chat)))
                  (mcp (cl-count "mcp" catalog :key #'mevedel-tool-category :test #'equal)))
       (unless (and (= mcp (* servers 105)) (string-match-p "mcp__srv[0-9]+__echo" first))
         (error "Expected %d MCP tools and their echo tools, got %d: %s"
                (* servers 105) mcp first))
       (unless (string-match-p "^## mcp__srv17__tool_042"
                               (car (mcp-bench--call chat "ToolSearch"
                                                     '(:query "mcp__srv17__tool_042"))))
         (error "ToolSearch missed mcp__srv17__tool_042"))
       (let* ((per-query (mapcar (lambda (query) (cons query (mcp-bench--search-ms chat query)))
                                 mcp-bench--queries))
              (worst (cl-reduce #'max per-query :key #'cdr))
              (rebuild (progn (mevedel-tool-catalog-changed)
                              (cdr (mcp-bench--call chat "ToolSearch" '(:query "zebra"))))))
         (mevedel-bench-describe "ToolSearch from `mevedel-pipeline-run-tool' in a session of %d \
stdio servers of 105 tools each (the fault server's `many' mode), %d tools in the catalog \
(%d of them MCP), registered by the session's first ToolSearch (servers started, listed, \
registered: %.1f s); per query, from the call to its result, the median of 5 rounds, a \
round the median of 200 searches: %s; the figure is the slowest; the first search after \
the catalog changes builds it again (%.1f ms); goal <= 1 ms"
                                 servers (length catalog) mcp (/ first-ms 1000)
                                 (mapconcat (lambda (q) (format "%S %.3f ms" (car q) (cdr q)))
                                            per-query ", ")
                                 rebuild)
         (mevedel-bench-report "mcp-toolsearch-5k" worst "ms"))))))

;;; mcp-bench.el ends here
