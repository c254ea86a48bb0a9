;;; mcp-test.el --- Tests of mevedel-mcp.el  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The approval card of a workspace .mcp.json, rule names of MCP tools
;; and per-session visibility.  Round trips with real servers are in
;; test/e2e/mcp-e2e-test.el.

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel-mcp)
(require 'mevedel-permissions)
(require 'mevedel)
(require 'mevedel-file-approval)

(defmacro mcp-test--with-workspace (var text &rest body)
  "Run BODY with VAR a fresh workspace whose .mcp.json holds TEXT."
  (declare (indent 2))
  `(let* ((,var (make-temp-file "mevedel-mcp-ws" t))
          (mevedel-mcp-approvals-file (expand-file-name "approved.eld" ,var))
          (mevedel-mcp--approvals 'unread)
          (mevedel-mcp-user-file (expand-file-name "absent-user.json" ,var))
          (mevedel-mcp-command-line-files nil)
          (mevedel-mcp-trust-workspace nil))
     (unwind-protect
         (progn
           (with-temp-file (expand-file-name ".mcp.json" ,var) (insert ,text))
           ,@body)
       (delete-directory ,var t))))

(defun mcp-test--approved (state)
  "Return (NAME . APPROVED) of each server of STATE."
  (mapcar (lambda (s) (cons (plist-get s :name) (plist-get s :approved)))
          (mevedel-core-mcp-status (mevedel-mcp--state-handle state))))

(defconst mcp-test--config
  "{\"mcpServers\": {\"marker\": {\"command\": \"true\"}}}"
  "A workspace configuration with one server.")

(ert-deftest mevedel-mcp:approval-card-asks-once-per-content ()
  "The card names the file and servers; approval is remembered by content."
  (mcp-test--with-workspace root mcp-test--config
    (let* ((asked nil)
           (answer t)
           (mevedel-mcp-can-ask-function #'always)
           (mevedel-interaction-file-approval-functions
            (list (lambda (file question callback)
                    (push (list file (plist-get question :summary)) asked)
                    (funcall callback answer)
                    t)))
           (state (mevedel-mcp-state (mevedel-session-create :workspace root :ephemeral t))))
      ;; Asked with a card naming the file and its server; approved.
      (should (equal (length asked) 1))
      (should (string-suffix-p ".mcp.json" (car (car asked))))
      (should (string-match-p "marker" (cadr (car asked))))
      (should (equal (mcp-test--approved state) '(("marker" . t))))
      (should (file-exists-p mevedel-mcp-approvals-file))
      ;; The same content in a new session: not asked, approved.
      (setq mevedel-mcp--approvals 'unread)
      (let ((again (mevedel-mcp-state (mevedel-session-create :workspace root :ephemeral t))))
        (should (equal (length asked) 1))
        (should (equal (mcp-test--approved again) '(("marker" . t)))))
      ;; Changed content asks again; declining leaves it unapproved.
      (with-temp-file (expand-file-name ".mcp.json" root)
        (insert "{\"mcpServers\": {\"marker\": {\"command\": \"false\"}}}"))
      (setq answer nil)
      (let ((changed (mevedel-mcp-state (mevedel-session-create :workspace root :ephemeral t))))
        (should (equal (length asked) 2))
        (should (equal (mcp-test--approved changed) '(("marker"))))))))

;; The question says whether the servers it starts are confined
;; (`mevedel-mcp-sandbox').
(ert-deftest mevedel-mcp:approval-says-where-the-servers-run ()
  (let ((does (lambda ()
                (let (question)
                  (let ((mevedel-interaction-file-approval-functions
                         (list (lambda (_file q _callback) (setq question q) t))))
                    (mevedel-mcp-ask-approval "/ws/.mcp.json" "  a" #'ignore))
                  (plist-get question :does)))))
    (let ((mevedel-mcp-sandbox nil))
      (should (equal (funcall does) "It starts, outside the sandbox:")))
    (let ((mevedel-mcp-sandbox t))
      (should (equal (funcall does) "It starts, inside the sandbox:")))
    (let ((mevedel-mcp-sandbox '("a")))
      (should (equal (funcall does) "It starts, some inside the sandbox:"))
      (should (equal (mevedel-mcp--where '("a")) "inside the sandbox"))
      (should (equal (mevedel-mcp--where '("b")) "outside the sandbox"))
      (should (equal (mevedel-mcp--where '("a" "b")) "some inside the sandbox")))))

;; The question a workspace .mcp.json asks is the card a hook file's
;; approval uses (mevedel-file-approval.el), in a view of the workspace.
(ert-deftest mevedel-mcp:a-view-asks-with-the-file-approval-card ()
  (mcp-test--with-workspace root mcp-test--config
    (let* ((view (mevedel root))
           (chat (mevedel-view-chat view))
           (answer 'unanswered))
      (unwind-protect
          (progn
            (mevedel-mcp-ask-approval (expand-file-name ".mcp.json" root) "  marker: true"
                                      (lambda (approved) (setq answer approved)))
            (let ((card (cl-find 'mcp-approval (mevedel-interaction-list chat)
                                 :key #'mevedel-interaction-kind)))
              (should card)
              (with-current-buffer view
                (should (string-match-p "Start the MCP servers of .*\\.mcp\\.json\\?"
                                        (buffer-string)))
                (should (string-search "  marker: true" (buffer-string)))
                (should (string-search "servers do not start until it changes" (buffer-string)))
                (goto-char (mevedel-interaction-start card))
                (call-interactively (lookup-key (mevedel-interaction-keymap card) "y")))
              (should (eq answer t))
              (should-not (mevedel-interaction-list chat))))
        (kill-buffer view)
        (kill-buffer (mevedel-chat-data-buffer chat))))))

(ert-deftest mevedel-mcp:headless-tells-the-model-about-unapproved-servers ()
  "Nobody can ask: the servers stay unapproved and one note says so."
  (mcp-test--with-workspace root mcp-test--config
    (let* ((mevedel-mcp-can-ask-function #'ignore)
           (inhibit-message t)
           (state (mevedel-mcp-state (mevedel-session-create :workspace root :ephemeral t))))
      (should (equal (mcp-test--approved state) '(("marker"))))
      (should (equal (length (mevedel-mcp--state-notes state)) 1))
      (should (string-match-p "declares MCP servers (marker) that are not approved"
                              (car (mevedel-mcp--state-notes state))))))
  (mcp-test--with-workspace root mcp-test--config
    (let* ((mevedel-mcp-trust-workspace t)
           (state (mevedel-mcp-state (mevedel-session-create :workspace root :ephemeral t))))
      (should (equal (mcp-test--approved state) '(("marker" . t))))
      (should-not (mevedel-mcp--state-notes state)))))

;; Issue 42 item 12: the roster lists mcp:// when the session has MCP
;; servers, and not otherwise.
(ert-deftest mevedel-mcp:the-resource-roster-lists-mcp-with-servers ()
  (let ((mevedel-mcp-can-ask-function #'ignore)
        (inhibit-message t))
    (mcp-test--with-workspace root mcp-test--config
      (let ((chat (mevedel-chat--make
                   :root root
                   :session (mevedel-session-create :workspace root :ephemeral t))))
        (should (string-search "- mcp://" (mevedel-prompt--resource-roster chat)))))
    (mcp-test--with-workspace root "{}"
      (let ((chat (mevedel-chat--make
                   :root root
                   :session (mevedel-session-create :workspace root :ephemeral t))))
        (should (string-search "- mevedel://" (mevedel-prompt--resource-roster chat)))
        (should-not (string-search "mcp://" (mevedel-prompt--resource-roster chat)))))))

(ert-deftest mevedel-mcp:rules-name-a-server-or-one-tool ()
  "mcp__SERVER matches every tool of the server; other names match whole."
  (should (equal (mevedel-permissions-rule-names "mcp__everything__echo")
                 '("mcp__everything__echo" "mcp__everything")))
  (should (equal (mevedel-permissions-rule-names "mcp__my-server__get-sum")
                 '("mcp__my-server__get-sum" "mcp__my-server")))
  (should (equal (mevedel-permissions-rule-names "Read") '("Read")))
  (should (equal (mevedel-permissions-rule-names "mcp__x") '("mcp__x"))))

(ert-deftest mevedel-mcp:tools-are-visible-only-to-sessions-that-listed-them ()
  "An mcp__ tool is hidden from a session whose registry did not list it."
  (mcp-test--with-workspace root "{}"
    (let* ((tool (mevedel-tool-register
                  "mcp__visible__probe"
                  (list :category "mcp" :description "Probe."
                        :input-schema "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}"
                        :function #'ignore)))
           (mine (mevedel-session-create :workspace root :ephemeral t))
           (other (mevedel-session-create :workspace root :ephemeral t)))
      (unwind-protect
          (progn
            (puthash "mcp__visible__probe" "visible"
                     (mevedel-mcp--state-tools (mevedel-mcp-state mine)))
            (mevedel-mcp-state other)
            (with-temp-buffer
              (setq mevedel-session-current mine)
              (should (mevedel-tool-visible-p tool (current-buffer)))
              (should (memq tool (mevedel-ptc-catalog (current-buffer)))))
            (with-temp-buffer
              (setq mevedel-session-current other)
              (should-not (mevedel-tool-visible-p tool (current-buffer)))
              (should-not (memq tool (mevedel-ptc-catalog (current-buffer)))))
            ;; The server's own schema validates.
            (let ((schema (mevedel-tool-provider-schema tool)))
              (should (equal (plist-get schema :properties) '(:a (:type "string"))))
              (should-not (plist-member schema :additionalProperties))))
        (mevedel-tool-unregister "mcp__visible__probe" "mcp")))))

(ert-deftest mevedel-mcp:a-new-tool-list-reaches-toolsearch-at-once ()
  "A server's new list decides what ToolSearch finds, though the tools stay registered.
Closing the session hides the rest: a kept index never answers for
tools the session no longer has."
  (mcp-test--with-workspace root "{}"
    (let* ((session (mevedel-session-create :workspace root :ephemeral t))
           (state (mevedel-mcp-state session))
           (other (mevedel-session-create :workspace root :ephemeral t))
           (listed '("alpha" "beta"))
           (search (lambda (query)
                     (let ((cell (list nil)))
                       (mevedel-pipeline-run-tool-outcome
                        (mevedel-tool-get "ToolSearch") (list :query query)
                        (lambda (outcome) (setcar cell outcome))
                        :tool-use-id "search_1" :source 'provider
                        :data-buffer (current-buffer))
                       ;; The session's servers are readied first.
                       (mevedel-test-wait-until (car cell) 10)
                       (plist-get (car cell) :result)))))
      (cl-letf (((symbol-function 'mevedel-core-mcp-tools)
                 (lambda (_handle server callback)
                   (funcall callback 'ok
                            (mapcar (lambda (name)
                                      (list :full-name (format "mcp__%s__%s" server name)
                                            :server server :name name
                                            :description (format "The %s quillwort." name)
                                            :input-schema "{\"type\":\"object\"}"))
                                    listed)))))
        (unwind-protect
            (with-temp-buffer
              (setq mevedel-session-current session)
              (mevedel-mcp--load-tools state "srv" #'ignore)
              (should (string-match-p "^## mcp__srv__beta" (funcall search "mcp__srv__beta")))
              ;; The server lists nothing now: nothing is registered or
              ;; unregistered, yet the session's catalog changed.
              (setq listed nil)
              (mevedel-mcp--load-tools state "srv" #'ignore)
              (should (mevedel-tool-get "mcp__srv__beta" "mcp"))
              (should (string-prefix-p "No tools match" (funcall search "mcp__srv__beta")))
              (setq listed '("alpha"))
              (mevedel-mcp--load-tools state "srv" #'ignore)
              (should (string-match-p "^## mcp__srv__alpha" (funcall search "quillwort")))
              ;; Another session's buffer keeps a catalog without it.
              (let ((mine (current-buffer)))
                (with-temp-buffer
                  (setq mevedel-session-current other)
                  (should (string-prefix-p "No tools match" (funcall search "quillwort"))))
                (should (string-match-p "^## mcp__srv__alpha"
                                        (with-current-buffer mine (funcall search "quillwort")))))
              (mevedel-mcp--close session)
              (should (string-prefix-p "No tools match" (funcall search "quillwort"))))
          (mevedel-mcp--close other)
          (mevedel-tool-unregister "mcp__srv__alpha" "mcp")
          (mevedel-tool-unregister "mcp__srv__beta" "mcp"))))))

(ert-deftest mevedel-mcp:view-lists-servers-and-approves ()
  "M-x mevedel-mcp lists each server; `a' approves its workspace file."
  (mcp-test--with-workspace root mcp-test--config
    (let* ((mevedel-mcp-can-ask-function #'ignore)
           (inhibit-message t)
           (session (mevedel-session-create :workspace root :ephemeral t))
           (buffer (mevedel-mcp session)))
      (unwind-protect
          (with-current-buffer buffer
            (goto-char (point-min))
            (should (search-forward "marker" nil t))
            (should (search-forward "unapproved" nil t))
            (goto-char (point-min))
            (while (and (not (equal (tabulated-list-get-id) "marker")) (not (eobp)))
              (forward-line 1))
            (cl-letf (((symbol-function 'y-or-n-p) #'always))
              (mevedel-mcp-approve-server))
            (should (equal (mcp-test--approved (mevedel-mcp-state session))
                           '(("marker" . t))))
            (goto-char (point-min))
            (should (search-forward "configured" nil t)))
        (kill-buffer buffer)))))

(ert-deftest mevedel-mcp:images-the-model-cannot-take-are-saved-and-named ()
  "An image result is media when the model takes it, else an artifact named in text."
  (mcp-test--with-workspace root "{}"
    (let* ((png (base64-decode-string
                 "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="))
           (value (list :content (list (list :type 'text :text "Here:")
                                       (list :type 'image :mime-type "image/png"
                                             :data (base64-encode-string png t)))))
           (session (mevedel-session-create :workspace root)))
      (cl-letf (((symbol-function 'mevedel-gptel-model-accepts-mime-p) #'always))
        (let ((taken (mevedel-mcp--result value "mcp__s__pic" session nil)))
          (should (equal (plist-get taken :result) "Here:"))
          (should (equal (plist-get (car (plist-get taken :media)) :data) png))))
      (cl-letf (((symbol-function 'mevedel-gptel-model-accepts-mime-p) #'ignore))
        (let* ((saved (mevedel-mcp--result value "mcp__s__pic" session nil))
               (text (plist-get saved :result)))
          (should-not (plist-get saved :media))
          (should (string-match "not shown (the model does not take image/png); saved at \
artifact://tool-results/\\(mcp__s__pic-[^]]+\\.png\\)\\]" text))
          (should (equal (with-temp-buffer
                           (set-buffer-multibyte nil)
                           (insert-file-contents-literally
                            (expand-file-name (match-string 1 text)
                                              (mevedel-session-tool-results-directory session)))
                           (buffer-string))
                         png))))
      ;; A session that keeps no files says so without an address.
      (cl-letf (((symbol-function 'mevedel-gptel-model-accepts-mime-p) #'ignore))
        (should (string-match-p
                 "\\`Here:\n\\[image image/png, [0-9]+ bytes, not shown (the model does not take image/png)\\]\\'"
                 (plist-get (mevedel-mcp--result
                             value "mcp__s__pic"
                             (mevedel-session-create :workspace root :ephemeral t) nil)
                            :result)))))))

(provide 'mcp-test)
;;; mcp-test.el ends here
