;;; acp-bench.el --- ACP provider: what mevedel adds to an agent's turn  -*- lexical-binding: t; -*-

;;; Commentary:

;; acp-turn-overhead: a text-only turn of a chat whose provider is
;; Claude Code (`claude-agent-acp' from .deps/acp, Claude Code's CLI
;; inside it) against the project's scripted Anthropic server, from
;; `mevedel-chat-send' (what the composer's send and `bin/mevedel -p'
;; call) to the turn's end: the ACP provider's prompt, the module's
;; client, the agent's updates through the event channel into the data
;; buffer, the turn settled and saved.  Minus the same turn driven by a
;; bare client of the ACP SDK (the peer,
;; crates/mevedel-core/examples/acp_bare_turn.rs, which scripts/bench.sh
;; builds) with its own agent against the same server, in alternating
;; rounds of this run.  Not a peer field: its ratio would divide a whole
;; turn by an overhead.
;;
;; Figures are medians, so that the turns this shared machine preempts
;; do not decide them.  A missing agent or peer fails the bench.

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'mevedel-bench-lib)
(require 'mevedel)
(mevedel--load)
(require 'mevedel-acp)
(require 'mevedel-scripted-model)

(defun acp-bench--file (relative)
  "Return RELATIVE in the checkout, failing the bench when it is missing."
  (mevedel-bench-checkout-file
   relative "run scripts/deps.sh (agent) or scripts/bench.sh (peer)"))

(defun acp-bench--turn (chat)
  "Send a text turn in CHAT; return its milliseconds, from the send to its end."
  (let ((box (list nil))
        (start (float-time)))
    (mevedel-chat-observe chat (lambda (event _chat &rest args)
                                 (when (and (eq event 'turn-end) (not (car box)))
                                   (setcar box (cons (car args)
                                                     (* 1000 (- (float-time) start)))))))
    (mevedel-chat-send chat "Say hi.")
    (let ((deadline (+ start 60)))
      (while (and (not (car box)) (< (float-time) deadline))
        (accept-process-output nil 0.005)))
    (unless (eq (car (car box)) 'done)
      (error "The turn ended %S: %s" (car (car box)) (mevedel-chat-status-detail chat)))
    (cdr (car box))))

(defun acp-bench--bare (peer agent n)
  "Return the bare client PEER's median milliseconds of N turns of AGENT.
Claude Code as root refuses to start unless IS_SANDBOX is 1, which
mevedel sets for its agents: the peer's agent gets it too."
  (with-temp-buffer
    (setq-local process-environment (cons "IS_SANDBOX=1" process-environment))
    (unless (zerop (call-process peer nil t nil "3" (number-to-string n) agent))
      (error "The bare ACP peer failed: %s" (buffer-string)))
    (string-to-number (buffer-string))))

(let* ((agent (acp-bench--file ".deps/acp/npm/node_modules/.bin/claude-agent-acp"))
       (peer (acp-bench--file "target/release/examples/acp_bare_turn"))
       (script (make-temp-file "acp-bench-script-" nil ".json"))
       (root (file-name-as-directory (make-temp-file "acp-bench-ws-" t)))
       (server (progn (with-temp-file script
                        (insert (json-encode '((repeat . t) (steps . [((text . "Hi."))])))))
                      (mevedel-scripted-model-start script :delay 0)))
       (env `(("ANTHROPIC_BASE_URL" . ,(format "http://127.0.0.1:%d"
                                               (mevedel-scripted-model-port server)))
              ("ANTHROPIC_API_KEY" . "dummy")
              ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC" . "1")))
       (mevedel-acp-agents `((claude-code :command ,agent :env ,env
                                          :disallowed-tools ,mevedel-acp--claude-tools)))
       (mevedel-provider 'claude-code)
       (process-environment (append (mapcar (lambda (pair) (concat (car pair) "=" (cdr pair)))
                                            env)
                                    process-environment))
       (default-directory root)
       (inhibit-message t)
       (chat (mevedel-chat-get-create root)))
  (setf (mevedel-chat-permission-mode chat) 'full-auto)
  (unwind-protect
      (let ((rounds 5) (n 10) ours bare)
        ;; The first turn starts the agent and opens its session.
        (dotimes (_ 3) (acp-bench--turn chat))
        (dotimes (_ rounds)
          (push (acp-bench--bare peer agent n) bare)
          (garbage-collect)
          (push (mevedel-bench-percentile (cl-loop repeat n collect (acp-bench--turn chat)) 50)
                ours))
        (let ((ours (mevedel-bench-percentile ours 50))
              (bare (mevedel-bench-percentile bare 50)))
          (mevedel-bench-describe "a text-only turn of a chat whose provider is Claude Code \
\(claude-agent-acp, the scripted Anthropic server answering \"Hi.\"), from `mevedel-chat-send' \
to the turn's end (ACP prompt, module client, updates through the event channel into the data \
buffer, the turn settled and saved), mevedel's tools served over MCP: %.2f ms per turn; the \
bare ACP SDK client (examples/acp_bare_turn.rs, its own agent, no MCP server): %.2f ms per \
turn; each the median of %d alternating rounds, a round the median of %d turns in a row; the \
figure is the difference; goal <= 20 ms"
                                  ours bare rounds n)
          (mevedel-bench-report "acp-turn-overhead" (- ours bare) "ms")))
    (kill-buffer (mevedel-chat-data-buffer chat))
    (mevedel-scripted-model-stop server)
    (delete-file script)
    (delete-directory root t)))

;;; acp-bench.el ends here
