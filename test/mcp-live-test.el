;;; mcp-live-test.el --- MCP servers seen from a running view  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; What a user sees of a session's MCP servers while it runs: a tool
;; call's progress on its row, failed servers in the header, the view
;; of servers following their changed lists, and the notices of
;; `Read mcp://' naming the address.  The servers are the project's
;; scripted fault server, run for real.

;;; Code:

(require 'ert)
(require 'json)
(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-mcp)

(defun mcp-live--fault-spec (mode)
  "Return the stdio spec of the fault server in MODE."
  `((command . "python3")
    (args . [,(expand-file-name "crates/mevedel-core/tests/mcp-servers/fault_server.py"
                                mevedel-test-root)
             ,mode])))

(defmacro mcp-live--with-servers (view chat servers &rest body)
  "Run BODY in a fresh view VIEW of CHAT whose session has SERVERS.
SERVERS is an alist NAME -> stdio spec, given as a command-line file;
the session's tools of them are allowed."
  (declare (indent 3))
  `(let* ((config (make-temp-file "mevedel-mcp-live" nil ".json"))
          (mevedel-mcp-user-file (expand-file-name "absent" config))
          (mevedel-mcp-command-line-files (list config))
          (mevedel-mcp-start-at-session-start nil)
          (inhibit-message t))
     (with-temp-file config (insert (json-encode `((mcpServers . ,,servers)))))
     (unwind-protect
         (mevedel-test-with-view ,view ,chat
           (let ((mevedel-permissions-rules (append '((allow "ToolCall") (allow "ToolSearch"))
                                                    (mapcar (lambda (s)
                                                              (list 'allow (format "mcp__%s" (car s))))
                                                            ,servers)
                                                    mevedel-permissions-rules)))
             (unwind-protect (progn ,@body)
               (mevedel-mcp--close (mevedel-chat-session ,chat)))))
       (delete-file config))))

(defun mcp-live--load (chat)
  "Start CHAT's servers and list their tools; wait for it."
  (let ((done nil))
    (mevedel-mcp-prepare (mevedel-chat-session chat) nil (lambda () (setq done t)))
    (mevedel-test-wait-until done 30)))

(defun mcp-live--read (chat address)
  "Return the Read of ADDRESS in CHAT, as the model gets it."
  (let ((mevedel-session-current (mevedel-chat-session chat)))
    (mevedel-test-run-tool chat "Read" (format "read_%s" (random 100000))
                           (list :file_path address))))

(ert-deftest mevedel-mcp-live:progress-shows-on-the-toolcall-row ()
  "A server's progress notifications show on the ToolCall's row, then go."
  (mcp-live--with-servers view chat `((fault . ,(mcp-live--fault-spec "basic")))
    (mcp-live--load chat)
    (let ((seen nil)
          (args '(:program "(mcp__fault__slow :steps 30)")))
      (mevedel-chat-observe
       chat (lambda (event _chat &rest rest)
              (when (eq event 'tool-progress)
                (push (plist-get (mevedel-chat-call-progress chat (car rest)) :progress-text)
                      seen))))
      (setf (mevedel-chat-live-calls chat) (list (list :id "call_p" :name "ToolCall" :args args)))
      (mevedel-chat-notify chat 'tools-start (mevedel-chat-live-calls chat))
      (let ((box (mevedel-test-start-tool chat "ToolCall" "call_p" args)))
        (mevedel-test-wait-until
         (cl-some (lambda (text) (and text (string-match-p
                                            "\\`mcp__fault__slow: [0-9]+/30 · step [0-9]+\\'"
                                            text)))
                  seen)
         20)
        ;; The view redraws its live rows soon after, not at once.
        (with-current-buffer view
          (mevedel-test-wait-until
           (string-match-p "Running mcp__fault__slow · 0 done · mcp__fault__slow: [0-9]+/30 · step"
                           (buffer-substring-no-properties (point-min) (point-max)))
           5))
        (mevedel-test-wait-until (car box) 20)
        (should (string-match-p "done 30" (caar box)))
        (should-not (mevedel-chat-call-progress chat "call_p"))))))

(ert-deftest mevedel-mcp-live:cancelling-a-call-tells-the-server ()
  "Cancelling a ToolCall of an MCP tool sends notifications/cancelled."
  (let* ((log (make-temp-file "mevedel-mcp-fault-log"))
         (process-environment (cons (concat "FAULT_LOG=" log) process-environment)))
    (unwind-protect
        (mcp-live--with-servers view chat `((fault . ,(mcp-live--fault-spec "basic")))
          (mcp-live--load chat)
          (let* ((result nil)
                 (cancel (with-current-buffer (mevedel-chat-data-buffer chat)
                           (mevedel-pipeline-run-tool
                            (mevedel-tool-get "ToolCall") '(:program "(mcp__fault__slow :steps 200)")
                            (lambda (r) (setq result r))
                            :tool-use-id "call_c" :data-buffer (current-buffer)))))
            (mevedel-test-wait-until (mevedel-chat-call-progress chat "call_c") 10)
            (funcall cancel)
            (mevedel-test-wait-until result 10)
            (mevedel-test-wait-until
              (with-temp-buffer
                (insert-file-contents log)
                (re-search-forward "^cancelled [0-9]+ " nil t))
              10)))
      (delete-file log))))

(ert-deftest mevedel-mcp-live:progress-text-of-fractions-and-messages ()
  "Progress reads N/TOTAL · first line of the message; fractions stay short."
  (should (equal (mevedel-mcp--progress-text 3.0 10.0 "indexing\nmore") "3/10 · indexing"))
  (should (equal (mevedel-mcp--progress-text 0.25 nil nil) "0.25"))
  (should (equal (mevedel-mcp--progress-text 7.0 nil "") "7")))

(ert-deftest mevedel-mcp-live:failed-servers-in-the-header-until-they-work ()
  "A server that fails is named in the view's header; a working one is not."
  (mcp-live--with-servers view chat `((broken . ,(mcp-live--fault-spec "crash-at-start"))
                                      (fine . ,(mcp-live--fault-spec "basic")))
    (with-current-buffer view
      (should-not (string-match-p "MCP failed" (mevedel-view--header-line))))
    (mcp-live--load chat)
    (with-current-buffer view
      (let ((header (mevedel-view--header-line)))
        (should (string-match "MCP failed: broken\\'" header))
        (should (eq (get-text-property (match-beginning 0) 'face header) 'error))
        (should (eq (get-text-property (match-beginning 0) 'mevedel-mcp-session header)
                    (mevedel-chat-session chat)))))
    ;; Working again (its tools listed) takes it out.
    (let ((state (mevedel-mcp-state (mevedel-chat-session chat))))
      (mevedel-mcp--recovered state "broken")
      (with-current-buffer view
        (should-not (string-match-p "MCP failed" (mevedel-view--header-line)))))))

(ert-deftest mevedel-mcp-live:changed-lists-refresh-tools-and-the-view ()
  "tools/list_changed registers the new tool; resources/list_changed redraws."
  (mcp-live--with-servers view chat `((fault . ,(mcp-live--fault-spec "basic")))
    (mcp-live--load chat)
    (let* ((session (mevedel-chat-session chat))
           (servers (mevedel-mcp session))
           (redrawn 0))
      (unwind-protect
          (progn
            (advice-add 'mevedel-mcp-refresh :after (lambda () (cl-incf redrawn))
                        '((name . mcp-live-count)))
            ;; Another test's server may have registered it already.
            (mevedel-tool-unregister "mcp__fault__added_0" "mcp")
            (should-not (gethash "mcp__fault__added_0"
                                 (mevedel-mcp--state-tools (mevedel-mcp-state session))))
            ;; This search keeps the session's index; the list change
            ;; must not leave it answering.
            (should (string-prefix-p "No tools match"
                                     (mevedel-test-run-tool chat "ToolSearch" "search_a"
                                                            '(:query "added_0"))))
            (should (string-match-p "added" (mevedel-test-run-tool
                                             chat "ToolCall" "call_a"
                                             '(:program "(mcp__fault__add_tool)"))))
            (mevedel-test-wait-until (and (mevedel-tool-get "mcp__fault__added_0")
                                          (> redrawn 0))
                                     10)
            (should (gethash "mcp__fault__added_0"
                             (mevedel-mcp--state-tools (mevedel-mcp-state session))))
            (should (string-match-p "^## mcp__fault__added_0"
                                    (mevedel-test-run-tool chat "ToolSearch" "search_b"
                                                           '(:query "added_0")))))
        (advice-remove 'mevedel-mcp-refresh 'mcp-live-count)
        (kill-buffer servers)
        (mevedel-tool-unregister "mcp__fault__added_0" "mcp")))))

(ert-deftest mevedel-mcp-live:reads-name-the-address-in-every-notice ()
  "Empty content, content without text and failures each name the address."
  (mcp-live--with-servers view chat `((fault . ,(mcp-live--fault-spec "basic")))
    (should (string-match-p "a note" (mcp-live--read chat "mcp://fault/fault%3A%2F%2Fnote")))
    (should (string-match-p
             (regexp-quote "[mcp://fault/fault%3A%2F%2Fempty: the server returned no content]")
             (mcp-live--read chat "mcp://fault/fault%3A%2F%2Fempty")))
    (should (string-match-p
             (regexp-quote "[mcp://fault/fault%3A%2F%2Fblob: the server returned 1 content \
item(s) and no text: image/png]")
             (mcp-live--read chat "mcp://fault/fault%3A%2F%2Fblob")))
    (let ((failure (mcp-live--read chat "mcp://fault/fault%3A%2F%2Fmissing")))
      (should (string-match-p (regexp-quote "Cannot read mcp://fault/fault%3A%2F%2Fmissing: ")
                              failure))
      (should (string-match-p "resource not found: fault://missing" failure)))
    (should (string-match-p (regexp-quote "Cannot read mcp://nosuch: ")
                            (mcp-live--read chat "mcp://nosuch")))))

(provide 'mcp-live-test)
;;; mcp-live-test.el ends here
