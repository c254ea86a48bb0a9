;;; mcp-composer-test.el --- Tests of MCP prompts and @mentions in the composer  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; mevedel-mcp-composer.el and mevedel-mcp-mentions.el: arguments of a
;; prompt command, the text a filled-in prompt sends, @SERVER:URI
;; parsing, and, against the project's fault server in its `prompts'
;; mode, completion, list_changed, errors and aborting.  Round trips
;; with the real server-everything and a model are in
;; test/e2e/mcp-composer-e2e-test.el.

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-mcp-composer)

(defconst mcp-composer-test--fault
  (expand-file-name "crates/mevedel-core/tests/mcp-servers/fault_server.py" mevedel-test-root)
  "The project's scripted MCP server.")

(defmacro mcp-composer-test--with-view (spec servers &rest body)
  "Run BODY in a view of a fresh workspace whose MCP SERVERS are configured.
SPEC is (VIEW CHAT SESSION).  SERVERS is an alist NAME -> spec, written
to a trusted --mcp-config file.  The servers stop afterwards."
  (declare (indent 2))
  (pcase-let ((`(,view ,chat ,session) spec))
    `(let* ((root (make-temp-file "mevedel-mcp-composer" t))
            (config (expand-file-name "mcp.json" root))
            (mevedel-mcp-user-file (expand-file-name "absent.json" root))
            (mevedel-mcp-approvals-file (expand-file-name "approved.eld" root))
            (mevedel-mcp-command-line-files (list config))
            (mevedel-mcp-startup-timeout 20)
            (inhibit-message t)
            ,view ,chat ,session)
       (with-temp-file config (insert (json-encode `((mcpServers . ,,servers)))))
       (unwind-protect
           (progn
             (setq ,view (mevedel root)
                   ,chat (mevedel-view-chat ,view)
                   ,session (mevedel-chat-session ,chat))
             ,@body)
         (when-let* ((handle (and ,session (mevedel-mcp-handle ,session t))))
           (let ((stopped nil))
             (mevedel-core-mcp-stop handle nil (lambda (&rest _) (setq stopped t)))
             (mevedel-test-wait-until stopped 20)))
         (when (buffer-live-p ,view) (kill-buffer ,view))
         (when (and ,chat (buffer-live-p (mevedel-chat-data-buffer ,chat)))
           (kill-buffer (mevedel-chat-data-buffer ,chat)))
         (delete-directory root t)))))

(defun mcp-composer-test--server (mode)
  "Return the spec of the fault server in MODE."
  `((command . "python3") (args . [,mcp-composer-test--fault ,mode])))

(defun mcp-composer-test--complete (view text)
  "Return the composer's command completions of TEXT in VIEW."
  (with-current-buffer view
    (mevedel-view--set-composer text)
    (let ((capf (mevedel-view--slash-capf)))
      (all-completions (substring text 1) (nth 2 capf)))))

(defun mcp-composer-test--mention-completions (view text)
  "Return the @ completions of TEXT typed in VIEW's composer."
  (with-current-buffer view
    (mevedel-view--set-composer text)
    (when-let* ((capf (mevedel-mcp-composer-capf)))
      (all-completions (buffer-substring-no-properties (nth 0 capf) (nth 1 capf))
                       (nth 2 capf)))))

(defconst mcp-composer-test--args-prompt
  '(:server "s" :name "p" :command "mcp__s__p"
    :arguments ((:name "city" :description "Name of the city" :required t)
                (:name "state" :description nil :required nil)))
  "A prompt with a required and an optional argument.")

;;;; Arguments and text

(ert-deftest mevedel-mcp-composer:words-are-the-arguments-in-order ()
  "Words fill the declared arguments; quotes keep spaces; extra words join the last."
  (let ((mevedel-mcp-composer-read-argument-function
         (lambda (_) (ert-fail "asked although the words were given"))))
    (should (equal (mevedel-mcp-composer-arguments mcp-composer-test--args-prompt "Paris Texas")
                   '(("city" . "Paris") ("state" . "Texas"))))
    (should (equal (mevedel-mcp-composer-arguments mcp-composer-test--args-prompt
                                                   "\"New York\"")
                   '(("city" . "New York"))))
    (should (equal (mevedel-mcp-composer-arguments mcp-composer-test--args-prompt
                                                   "Springfield North Dakota")
                   '(("city" . "Springfield") ("state" . "North Dakota"))))
    (should-error (mevedel-mcp-composer-arguments '(:command "mcp__s__none") "surplus")
                  :type 'user-error)
    (should-not (mevedel-mcp-composer-arguments '(:command "mcp__s__none") ""))))

(ert-deftest mevedel-mcp-composer:missing-arguments-are-asked-for ()
  "No words: every argument is asked; an empty required one is refused."
  (let* ((answers '("Oslo" ""))
         (questions nil)
         (mevedel-mcp-composer-read-argument-function
          (lambda (question) (push question questions) (pop answers))))
    (should (equal (mevedel-mcp-composer-arguments mcp-composer-test--args-prompt "")
                   '(("city" . "Oslo"))))
    (should (equal (reverse questions)
                   '("city [Name of the city]: " "state (optional): "))))
  (let ((mevedel-mcp-composer-read-argument-function (lambda (_) "")))
    (should (string-match-p "needs its argument city"
                            (cadr (should-error (mevedel-mcp-composer-arguments
                                                 mcp-composer-test--args-prompt "")
                                                :type 'user-error))))))

(ert-deftest mevedel-mcp-composer:prompt-messages-become-the-users-text ()
  "Text as is, an embedded resource as its text, links and media named."
  (should (equal
           (mevedel-mcp-composer-prompt-text
            "srv"
            '(:messages ((:role "user" :content (:type text :text "Look:"))
                         (:role "user" :content (:type resource :uri "x://a" :text "body"))
                         (:role "assistant" :content (:type text :text "Sure."))
                         (:role "user" :content (:type resource-link :resource (:uri "x://b c")))
                         (:role "user" :content (:type image :data "AA==" :mime-type "image/png"))
                         (:role "user" :content (:type resource :uri "x://bin" :blob "AA=="
                                                       :mime-type "application/zip")))))
           (string-join
            '("Look:"
              "<resource uri=\"x://a\">\nbody\n</resource>"
              "[assistant]\nSure."
              "[resource x://b c: Read mcp://srv/x%3A%2F%2Fb%20c]"
              "[image image/png from the prompt: not attached, a user message carries no media]"
              "[resource x://bin (application/zip), binary: not attached]")
            "\n\n"))))

(ert-deftest mevedel-mcp-composer:mentions-name-a-configured-server-and-a-uri ()
  "@SERVER:URI with a known server and a scheme; sentence punctuation dropped."
  (should (equal (mevedel-mcp-mentions-parse
                  "See @docs:file:///a/b.md, then (@docs:demo://x/y). Ask @alice: hi, \
mail bob@docs:demo://z or @other:demo://q; again @docs:file:///a/b.md"
                  '("docs" "alice"))
                 '(("docs" . "file:///a/b.md") ("docs" . "demo://x/y")))))

;;;; Against the fault server

(ert-deftest mevedel-mcp-composer:prompts-complete-and-follow-list-changed ()
  "/mcp completes the started servers' prompts; list_changed brings new ones."
  (mcp-composer-test--with-view (view chat session)
      `((p . ,(mcp-composer-test--server "prompts")))
    (ignore chat)
    ;; Nothing MCP is offered, or started, before /mcp is typed.
    (should-not (cl-find-if (lambda (c) (string-prefix-p "mcp" c))
                            (mcp-composer-test--complete view "/")))
    (should-not (mevedel-mcp-handle session t))
    ;; Typing /mcp starts the server and lists its prompts.
    (mcp-composer-test--complete view "/mcp")
    (mevedel-test-wait-until
      (equal (mcp-composer-test--complete view "/mcp") '("mcp__p__greet")) 20)
    (with-current-buffer view
      (mevedel-view--set-composer "/mcp__p__g")
      (let ((capf (mevedel-view--slash-capf)))
        (should (string-match-p "Greet someone\\. (MCP server p; name greeting\\?)"
                                (funcall (plist-get (nthcdr 3 capf) :annotation-function)
                                         "mcp__p__greet")))))
    ;; The server adds a prompt and says so: the list follows.
    (let ((added nil))
      (mevedel-core-mcp-call (mevedel-mcp-handle session) "p" "add_prompt" "{}" nil
                             (lambda (&rest _) (setq added t)))
      (mevedel-test-wait-until added 20))
    (mevedel-test-wait-until
      (equal (sort (mcp-composer-test--complete view "/mcp") #'string<)
             '("mcp__p__added_0" "mcp__p__greet"))
      20)))

(ert-deftest mevedel-mcp-composer:running-a-prompt-sends-it-and-errors-name-it ()
  "/mcp__p__greet World sends the filled-in text; failures name server and prompt."
  (mcp-composer-test--with-view (view chat _session)
      `((p . ,(mcp-composer-test--server "prompts")))
    (let ((sent nil) (messages nil))
      (cl-letf (((symbol-function 'mevedel-chat-send)
                 (lambda (to text &rest _) (push (cons to text) sent)))
                ((symbol-function 'message)
                 (lambda (format-string &rest args)
                   (when format-string
                     (push (apply #'format-message format-string args) messages)))))
        ;; Run before anything is listed: the command waits for the listing.
        (with-current-buffer view
          (mevedel-view--set-composer "/mcp__p__greet World Good morning")
          (mevedel-view-send))
        (mevedel-test-wait-until sent 20)
        (should (equal sent `((,chat . "Good morning, World!"))))
        ;; The server's refusal names the server and the prompt.
        (with-current-buffer view
          (mevedel-view--set-composer "/mcp__p__greet nobody")
          (mevedel-view-send))
        (mevedel-test-wait-until
          (cl-find-if (lambda (m) (string-match-p "\\`mevedel: /mcp__p__greet: MCP server p, \
prompt greet: .*greet refuses to greet nobody" m))
                      messages)
          20)
        ;; A prompt no server offers is named.
        (with-current-buffer view
          (mevedel-view--set-composer "/mcp__p__absent")
          (mevedel-view-send))
        (mevedel-test-wait-until
          (cl-find-if (lambda (m) (string-match-p "No MCP prompt /mcp__p__absent; \
the servers offer: /mcp__p__greet" m))
                      messages)
          20)
        (should (equal (length sent) 1))
        ;; Other unknown commands are refused as before.
        (with-current-buffer view
          (mevedel-view--set-composer "/frobnicate")
          (should-error (mevedel-view-send) :type 'user-error))))))

(ert-deftest mevedel-mcp-composer:mentions-complete-servers-then-resources ()
  "@ completes the configured servers once open; @SERVER: the listed resources."
  (mcp-composer-test--with-view (view _chat session)
      `((p . ,(mcp-composer-test--server "prompts")))
    ;; Before the registry is open, @ offers no server (and opens nothing).
    (should-not (mcp-composer-test--mention-completions view "@"))
    (should-not (mevedel-mcp-handle session t))
    ;; After the colon it opens; the server starts to list its resources.
    (mcp-composer-test--mention-completions view "@p:")
    (should (mevedel-mcp-handle session t))
    (should (equal (mcp-composer-test--mention-completions view "@") '("p:")))
    (mevedel-test-wait-until
      (equal (mcp-composer-test--mention-completions view "@p:fa") '("p:fault://note"))
      20)))

;; Issue 42 item 12: an @SERVER:URI mention completion inserted keeps
;; the server and URI it was completed to, like @file and $skill.
(ert-deftest mevedel-mcp-composer:a-completed-resource-mention-keeps-its-locator ()
  "TAB on @p:fa binds the token; the bound locator is what is read."
  (mcp-composer-test--with-view (view _chat session)
      `((p . ,(mcp-composer-test--server "prompts")))
    (mcp-composer-test--mention-completions view "@p:")
    (mevedel-test-wait-until
      (mcp-composer-test--mention-completions view "@p:fa") 20)
    (with-current-buffer view
      (mevedel-view--set-composer "read @p:fa")
      (goto-char (point-max))
      (let ((completion-at-point-functions '(mevedel-mcp-composer-capf)))
        (completion-at-point))
      (insert " now")
      (let ((text (mevedel-view--composer-text)))
        (should (equal (substring-no-properties text) "read @p:fault://note now"))
        (should (equal (plist-get (get-text-property 5 'mevedel-mention text) :uri)
                       "fault://note"))
        (should (equal (mevedel-mcp-mentions-parse text '("p"))
                       '(("p" . "fault://note"))))
        ;; Not a file, agent or skill mention.
        (should-not (mevedel-mentions-parse text default-directory))))
    (ignore session)))

(ert-deftest mevedel-mcp-composer:mcp-addresses-complete-canonically-from-held-metadata ()
  "mcp:// completes servers, then listed resources encoded; nothing is opened."
  (mcp-composer-test--with-view (view _chat session)
      `((p . ,(mcp-composer-test--server "prompts")))
    (cl-flet ((complete (text)
                (with-current-buffer view
                  (mevedel-view--set-composer text)
                  (when-let* ((capf (mevedel-mcp-composer-address-capf)))
                    (all-completions (buffer-substring-no-properties (nth 0 capf) (nth 1 capf))
                                     (nth 2 capf))))))
      ;; Before the registry is open, nothing is offered and nothing opens.
      (should-not (complete "see mcp://"))
      (should-not (mevedel-mcp-handle session t))
      (mcp-composer-test--mention-completions view "@p:")
      (mevedel-test-wait-until (mcp-composer-test--mention-completions view "@p:fa") 20)
      (should (equal (complete "see mcp://") '("mcp://p/" "mcp://p/fault%3A%2F%2Fnote")))
      ;; Typed as it reads, the URI completes to its encoded spelling.
      (with-current-buffer view
        (mevedel-view--set-composer "see mcp://p/fault://n")
        (goto-char (point-max))
        (let ((completion-at-point-functions '(mevedel-mcp-composer-address-capf)))
          (completion-at-point))
        (should (equal (buffer-substring-no-properties mevedel-view--composer (point-max))
                       "see mcp://p/fault%3A%2F%2Fnote"))))))

(ert-deftest mevedel-mcp-composer:a-bound-mention-reads-its-exact-uri ()
  "A bound token gives its URI even when the spelling cannot carry it."
  (let ((text (concat "see " (propertize "@docs:file:///my notes.md"
                                         'mevedel-mention
                                         '(:token "@docs:file:///my notes.md" :kind mcp
                                           :server "docs" :uri "file:///my notes.md"))
                      " and @docs:demo://x")))
    (should (equal (mevedel-mcp-mentions-parse text '("docs"))
                   '(("docs" . "file:///my notes.md") ("docs" . "demo://x"))))
    ;; Edited inside, the token is read from its spelling again.
    (let ((edited (concat "see " (propertize "@docs:file:///my"
                                             'mevedel-mention
                                             '(:token "@docs:file:///my notes.md" :kind mcp
                                               :server "docs" :uri "file:///my notes.md")))))
      (should (equal (mevedel-mcp-mentions-parse edited '("docs"))
                     '(("docs" . "file:///my")))))))

(ert-deftest mevedel-mcp-composer:abort-drops-a-message-waiting-for-its-resource ()
  "Aborting while a mention is read: nothing is sent, the text stays in history."
  (mcp-composer-test--with-view (_view chat session)
      `((slow . ,(mcp-composer-test--server "hang")))
    (let* ((mevedel-mcp-startup-timeout 1)
           (sent nil)
           (text "Read @slow:fault://note please"))
      ;; The registry takes the timeout when it opens.
      (should (mevedel-mcp-handle session))
      (should (mevedel-mcp-mentions--before-send chat text (lambda () (setq sent t))))
      (should (eq (mevedel-chat-status chat) 'attaching))
      (should (mevedel-chat-abort chat))
      (should (eq (mevedel-chat-status chat) 'idle))
      (should (equal (car (mevedel-chat-history chat)) text))
      ;; The read ends (initialize times out) and still nothing is sent.
      (mevedel-test-wait-until
        (eq (plist-get (car (mevedel-core-mcp-status (mevedel-mcp-handle session))) :state)
            'failed)
        10)
      (dotimes (_ 10) (accept-process-output nil 0.02))
      (should-not sent)
      (should-not (gethash chat mevedel-mcp-mentions--attached)))))

(ert-deftest mevedel-mcp-composer:mention-attaches-the-resource-with-the-turn ()
  "The resource is read before the turn; its block is the turn's mail, once."
  (mcp-composer-test--with-view (_view chat session)
      `((p . ,(mcp-composer-test--server "prompts")))
    (ignore session)
    (let ((sent nil)
          (text "Look at @p:fault://note."))
      (should (mevedel-mcp-mentions--before-send chat text (lambda () (setq sent t))))
      (mevedel-test-wait-until sent 20)
      (should (eq (mevedel-chat-status chat) 'idle))
      (let ((mevedel-chat-turn-text "another text"))
        (should-not (mevedel-mcp-mentions-mail chat)))
      (should (mevedel-mcp-mentions--before-send chat text (lambda () (setq sent 'again))))
      (mevedel-test-wait-until (eq sent 'again) 20)
      (let ((mevedel-chat-turn-text text))
        (should (equal (mevedel-mcp-mentions-mail chat)
                       '("<attachment kind=\"mcp-resource\" server=\"p\" uri=\"fault://note\" \
address=\"mcp://p/fault%3A%2F%2Fnote\">\na note\n</attachment>")))
        (should-not (mevedel-mcp-mentions-mail chat))))))

(provide 'mcp-composer-test)
;;; mcp-composer-test.el ends here
