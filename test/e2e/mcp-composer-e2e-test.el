;;; mcp-composer-e2e-test.el --- MCP prompts and @mentions, end to end  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The real server-everything (from .deps/mcp; run scripts/deps.sh,
;; these tests fail naming it when it is missing) behind the composer:
;; /mcp__everything__PROMPT commands typed into a view and sent to the
;; scripted model, and @everything:URI mentions attaching a resource, in
;; a view and in bin/mevedel -p.

;;; Code:

(require 'ert)
(require 'json)
(require 'url-util)
(require 'mevedel-e2e-helpers)

(defun mcp-composer-e2e--run (prompt steps &rest keys)
  "Send PROMPT from a view with server-everything configured; STEPS script the model.
KEYS go to `mevedel-e2e-run'.  Return its plist."
  (let* ((config (mevedel-e2e-mcp-config `((everything . ,(mevedel-e2e-mcp-everything-spec)))))
         (mevedel-mcp-command-line-files (list config)))
    (unwind-protect
        (apply #'mevedel-e2e-run :prompt prompt :steps steps :timeout 60 keys)
      (delete-file config))))

(defun mcp-composer-e2e--mismatches (run)
  "Return the scripted model's mismatches in RUN's log."
  (cl-mapcan (lambda (e) (copy-sequence (alist-get 'mismatches e))) (plist-get run :log)))

(ert-deftest mevedel-e2e:mcp-prompt-command-sends-the-filled-in-prompt ()
  "/mcp__everything__args-prompt Paris Texas sends the server's message."
  (let ((run (mcp-composer-e2e--run
              "/mcp__everything__args-prompt Paris Texas"
              '(((expect . ((user_contains . "What's weather in Paris, Texas?")))
                 (text . "Sunny."))))))
    (should (eq (plist-get run :outcome) 'done))
    (should (string-search "What's weather in Paris, Texas?" (plist-get run :transcript)))
    (should-not (mcp-composer-e2e--mismatches run))))

(ert-deftest mevedel-e2e:mcp-prompt-asks-for-a-missing-required-argument ()
  "Without words, each argument is asked for; the optional one may stay empty."
  (let* ((asked nil)
         (mevedel-mcp-composer-read-argument-function
          (lambda (question)
            (push question asked)
            (if (string-prefix-p "city" question) "Rome" "")))
         (run (mcp-composer-e2e--run
               "/mcp__everything__args-prompt"
               '(((expect . ((user_contains . "What's weather in Rome?")))
                  (text . "Warm."))))))
    (should (eq (plist-get run :outcome) 'done))
    (should (equal (length asked) 2))
    (should (equal (car (last asked)) "city [Name of the city]: "))
    (should (string-match-p "\\`state (optional)" (car asked)))
    (should-not (mcp-composer-e2e--mismatches run))))

(ert-deftest mevedel-e2e:mcp-prompt-embeds-its-resource-as-text ()
  "resource-prompt's embedded resource reaches the model as its text."
  (let ((run (mcp-composer-e2e--run
              "/mcp__everything__resource-prompt Text 3"
              '(((expect . ((user_contains . "<resource uri=\"demo://resource/dynamic/text/3\">")))
                 (text . "Analysed."))))))
    (should (eq (plist-get run :outcome) 'done))
    (should (string-search "This prompt includes the Text resource with id: 3"
                           (plist-get run :transcript)))
    (should-not (mcp-composer-e2e--mismatches run))))

(ert-deftest mevedel-e2e:mcp-mention-attaches-the-resource-in-a-view ()
  "@everything:URI attaches the resource's text; the message keeps the mention."
  (let* ((uri "demo://resource/static/document/features.md")
         (run (mcp-composer-e2e--run
               (format "Summarise @everything:%s." uri)
               `(((expect . ((user_contains . ,(format "<attachment kind=\"mcp-resource\" server=\"everything\" uri=\"%s\"" uri))))
                  (text . "Done."))))))
    (should (eq (plist-get run :outcome) 'done))
    (should (string-search (format "Summarise @everything:%s." uri) (plist-get run :transcript)))
    (should-not (string-search "<attachment" (plist-get run :transcript)))
    (should (string-search "Everything Server - Features"
                           (json-encode (alist-get 'body (car (plist-get run :log))))))
    (should-not (mcp-composer-e2e--mismatches run))))

(ert-deftest mevedel-e2e:mcp-mention-headless-attaches-and-never-starts-unapproved ()
  "bin/mevedel -p with @everything:URI attaches it; @ws:URI of an
unapproved workspace server is not read and says why."
  (let* ((config (mevedel-e2e-mcp-config `((everything . ,(mevedel-e2e-mcp-everything-spec)))))
         (marker (make-temp-file "mevedel-mcp-marker"))
         (run (unwind-protect
                  (progn
                    (delete-file marker)
                    (mevedel-e2e-headless
                     :files `((".mcp.json"
                               . ,(json-encode
                                   `((mcpServers
                                      . ((ws . ((command . "sh")
                                                (args . ["-c" "touch \"$0\"" ,marker])))))))))
                     :steps '(((expect . ((user_contains . "Everything Server - Features")))
                               (text . "Done.")))
                     :args (list "-p" "Compare @everything:demo://resource/static/document/features.md \
with @ws:demo://note" "--json" "--mcp-config" config)))
                (delete-file config)))
         (request (json-encode (alist-get 'body (car (plist-get run :log))))))
    (should (equal (plist-get run :status) 0))
    (should (string-match-p "kind=\\\\\"mcp-resource\\\\\" server=\\\\\"ws\\\\\"" request))
    (should (string-match-p "Not attached: MCP server ws could not read it: [^<]*not approved"
                            request))
    (should-not (file-exists-p marker))
    (should-not (mcp-composer-e2e--mismatches run))))

(provide 'mcp-composer-e2e-test)
;;; mcp-composer-e2e-test.el ends here
