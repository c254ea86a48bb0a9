;;; view-test.el --- Tests of tool renderers and the session view  -*- lexical-binding: t; -*-

;;; Commentary:

;; The renderer contract (validation, dispatch, fallback, summary-only),
;; the built-in Grep and Bash renderers, and the view's rows, toggling
;; and composer, on a data buffer written the way gptel writes it.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel)
(mevedel--load)

;;;; Renderer contract

(defmacro mevedel-view-test--with-renderers (renderers &rest body)
  "Declare a test tool per (NAME RENDERER) in RENDERERS around BODY.
Each tool's only display fact is its :renderer; they are removed after."
  (declare (indent 1))
  `(unwind-protect
       (progn
         ,@(mapcar (lambda (entry)
                     `(mevedel-tool-register
                       ,(car entry)
                       (list :description "A test tool." :function #'ignore
                             :category "view-test" :renderer ,(cadr entry))))
                   renderers)
         ,@body)
     ,@(mapcar (lambda (entry) `(mevedel-tool-unregister ,(car entry) "view-test"))
               renderers)))

(ert-deftest mevedel-view:renderer-result-is-validated ()
  (should (mevedel-tool-render-validate '(:header "Read a" :body "x" :status success)))
  (should-error (mevedel-tool-render-validate '(:body "no header")))
  (should-error (mevedel-tool-render-validate '(:header "")))
  (should-error (mevedel-tool-render-validate '(:header "h" :colour red)))
  (should-error (mevedel-tool-render-validate '(:header "h" :status fine)))
  (should-error (mevedel-tool-render-validate '(:header "h" :body 42)))
  (should-error (mevedel-tool-render-validate '(:header "h" :child-calls 3)))
  (should-error (mevedel-tool-render-validate '(:header "h" :body)))
  (should-error (mevedel-tool-register "T" (list :description "D." :function #'ignore
                                                 :renderer '((sometimes . ignore))))
                :type 'mevedel-tool-declaration-error))

(ert-deftest mevedel-view:dispatch-alist-by-status ()
  (mevedel-view-test--with-renderers
      (("T" `((success . ,(lambda (&rest _) '(:header "ok-renderer")))
              (error . ,(lambda (&rest _) '(:header "error-renderer")))
              (default . ,(lambda (&rest _) '(:header "default-renderer"))))))
    (should (equal (plist-get (mevedel-tool-render-row "T" nil "fine" nil) :header) "ok-renderer"))
    (should (equal (plist-get (mevedel-tool-render-row "T" nil "Error: no" nil) :header)
                   "error-renderer"))
    (should (eq (plist-get (mevedel-tool-render-row "T" nil "Error: no" nil) :status) 'error))
    (should (equal (plist-get (mevedel-tool-render-row "T" nil nil nil) :header)
                   "default-renderer"))
    (should (eq (plist-get (mevedel-tool-render-row "T" nil nil nil) :status) 'running))
    (should (eq (plist-get (mevedel-tool-render-row "T" nil "x" '(:status warning)) :status)
                'warning))
    (should (eq (plist-get (mevedel-tool-render-row "T" nil "Permission denied: no" nil) :status)
                'denied))))

;; Issue 42 item 9: the pipeline's outcome bounds what a renderer's
;; visual status may say.
(ert-deftest mevedel-view:renderer-status-never-hides-a-failure ()
  (mevedel-view-test--with-renderers
      (("T" (lambda (_name _args result _data)
              (list :header "t" :status (if (string-prefix-p "bad" result) 'error 'success)))))
    ;; A pipeline error stays one, whatever the renderer says.
    (should (eq (plist-get (mevedel-tool-render-row "T" nil "ok" '(:status error)) :status) 'error))
    (should (eq (plist-get (mevedel-tool-render-row "T" nil "Error: no" nil) :status) 'error))
    (should (eq (plist-get (mevedel-tool-render-row "T" nil "Permission denied: no" nil) :status)
                'denied))
    ;; An explicit success overrides the renderer's inferred error.
    (should (eq (plist-get (mevedel-tool-render-row "T" nil "bad news" '(:status success)) :status)
                'success))
    ;; Without one, the renderer's status stands.
    (should (eq (plist-get (mevedel-tool-render-row "T" nil "bad news" nil) :status) 'error))))

;; Count-style headers describe a search or fetch that worked; a failed
;; one keeps the generic row and its diagnostic.
(ert-deftest mevedel-view:count-renderers-only-for-success ()
  (mevedel-core-ensure)
  (require 'mevedel-web)
  (let ((failed (mevedel-tool-render-row "Grep" '(:pattern "x") "Error: rg failed: bad regex" nil)))
    (should-not (string-match-p "line" (plist-get failed :header)))
    (should (equal (plist-get failed :body) "Error: rg failed: bad regex")))
  (should (string-match-p "(2 lines)" (plist-get (mevedel-tool-render-row
                                                  "Grep" '(:pattern "x") "a:1:x\nb:2:x" nil)
                                                 :header)))
  (should-not (string-match-p "(1)" (plist-get (mevedel-tool-render-row
                                                "Glob" '(:pattern "*.el") "Error: timed out" nil)
                                               :header)))
  (should-not (string-match-p "results" (plist-get (mevedel-tool-render-row
                                                    "WebSearch" '(:query "q") "Error: offline"
                                                    '(:status error :results nil))
                                                   :header))))

(ert-deftest mevedel-view:declared-renderer-wins ()
  (mevedel-core-ensure)
  (unwind-protect
      (progn
        (mevedel-define-tool RenderMe
          :description "Render me." :function #'ignore
          :renderer `((success . ,(lambda (&rest _) '(:header "declared ok")))
                      (error . ,(lambda (&rest _) '(:header "declared error")))))
        (should (equal (plist-get (mevedel-tool-render-row "RenderMe" nil "fine" nil) :header)
                       "declared ok"))
        (should (equal (plist-get (mevedel-tool-render-row "RenderMe" nil "Error: x" nil) :header)
                       "declared error")))
    (mevedel-tool-unregister "RenderMe")))

(ert-deftest mevedel-view:tool-without-renderer-is-drawn-generically ()
  (mevedel-view-test--with-renderers (("Plain" nil))
    (let ((row (mevedel-tool-render-row "Plain" '(:path "/x/y") "plain text" nil)))
      (should (equal (plist-get row :header) "Plain /x/y"))
      (should (equal (plist-get row :body) "plain text"))
      (should (eq (plist-get row :status) 'success))))
  ;; So is a call of a tool nobody declared.
  (should (equal (plist-get (mevedel-tool-render-row "Nobody" nil "t" nil) :header) "Nobody"))
  ;; The built-in families draw through their own declared renderers.
  (should (eq (mevedel-tool-renderer (mevedel-tool-get "Read")) #'mevedel-tool-fs-render-read))
  (should (eq (mevedel-tool-renderer (mevedel-tool-get "Bash")) #'mevedel-tool-exec-render-bash)))

(ert-deftest mevedel-view:failing-renderer-falls-back-with-warning ()
  (let ((warnings nil))
    (mevedel-view-test--with-renderers
        (("T" (lambda (&rest _) (error "Renderer bug")))
         ("U" (lambda (&rest _) '(:header "u" :bogus 1))))
      (cl-letf (((symbol-function 'display-warning)
                 (lambda (_type message &rest _) (push message warnings))))
        (let ((row (mevedel-tool-render-row "T" '(:path "/x/y") "result text" nil)))
          (should (equal (plist-get row :header) "T /x/y"))
          (should (equal (plist-get row :body) "result text")))
        (should (equal (plist-get (mevedel-tool-render-row "U" nil "r" nil) :header) "U"))))
    (should (= (length warnings) 2))
    (should (string-match-p "Renderer for T failed.*Renderer bug" (cadr warnings)))
    (should (string-match-p "Unknown renderer key :bogus" (car warnings)))))

(ert-deftest mevedel-view:summary-only-while-collapsed ()
  (let ((seen nil))
    (mevedel-view-test--with-renderers
        (("T" (lambda (&rest _)
                (push mevedel-tool-render-summary-only seen)
                '(:header "t"))))
      (mevedel-tool-render-row "T" nil "r" nil t)
      (mevedel-tool-render-row "T" nil "r" nil nil))
    (should (equal seen '(nil t)))))

(ert-deftest mevedel-view:grep-body-uses-grep-mode-faces ()
  (let* ((result "lisp/a.el:12:(defun foo ()\nlisp/b.el:3:(defun bar ()\n")
         (row (mevedel-tool-render-row "Grep" '(:pattern "defun" :path "lisp") result nil))
         (body (mevedel-tool-render-fontify (plist-get row :body) (plist-get row :body-mode))))
    (should (eq (plist-get row :body-mode) 'grep-mode))
    (should (equal (plist-get row :header) "Grep \"defun\" in lisp (2 lines)"))
    (should (memq 'compilation-info (ensure-list (get-text-property 0 'face body))))
    (should (equal (substring-no-properties body) result))))

(ert-deftest mevedel-view:bash-header-shows-first-line-and-exit ()
  (let ((row (mevedel-tool-render-row "Bash" '(:command "make test\necho done")
                                      "<result exit_code=\"2\">failed</result>" nil)))
    (should (equal (plist-get row :header) "$ make test …  [exit 2]")))
  (let ((row (mevedel-tool-render-row "Bash" '(:command "ls") "a\nb" '(:exit-code 0))))
    (should (equal (plist-get row :header) "$ ls  [exit 0]")))
  (should (equal (plist-get (mevedel-tool-render-row "Bash" '(:command "sleep 9") nil nil t)
                            :header)
                 "$ sleep 9")))

;;;; The view on a hand-written data buffer

(defmacro mevedel-view-test--with-view (var &rest body)
  "Bind VAR to a fresh session view around BODY; the data buffer holds a turn."
  (declare (indent 1))
  `(let* ((root (file-name-as-directory (make-temp-file "mevedel-view-" t)))
          (,var (mevedel root))
          (chat (mevedel-view-chat ,var)))
     (unwind-protect
         (progn
           (with-current-buffer (mevedel-chat-data-buffer chat)
             (insert "### Find it\n\n"
                     (propertize "Searching." 'gptel 'response) "\n\n"
                     (mevedel-test-tool-text "call_g" "Grep" '(:pattern "x")
                                                   "a.el:1:x\nb.el:2:x")
                     (mevedel-test-tool-text "call_r" "Read" '(:file_path "a.el")
                                                   "Error: File does not exist: a.el")
                     (propertize "Found it." 'gptel 'response)))
           (mevedel-view-rerender ,var)
           ,@body)
       (kill-buffer ,var)
       (kill-buffer (mevedel-chat-data-buffer chat))
       (delete-directory root t))))

(ert-deftest mevedel-view:an-expanded-read-body-keeps-its-first-line-aligned ()
  "The first line of a Read result keeps its padding, like the lines after it."
  (mevedel-view-test--with-view view
    (let ((chat (mevedel-view-chat view)))
      (mevedel-view-test--data
       chat "\n\n" (mevedel-test-tool-text "call_r2" "Read" '(:file_path "b.el")
                                         "     1\t(defun a ())\n     2\t(defun b ())")))
    (mevedel-view-rerender view)
    (with-current-buffer view
      (goto-char (point-min))
      (search-forward "Read b.el")
      (mevedel-view-toggle-row)
      (should (string-match-p "Read b\\.el.*\n         1\t(defun a ())\n         2\t(defun b ())"
                              (buffer-substring-no-properties (point-min) (point-max)))))))

(ert-deftest mevedel-view:the-hint-line-fits-the-window ()
  "The separator's hints fit the width; what does not fit is left to /help."
  (mevedel-view-test--with-view view
    (with-current-buffer view
      (let ((narrow (mevedel-view--separator-text 40))
            (wide (mevedel-view--separator-text 400)))
        (should (<= (length (string-trim narrow)) 40))
        (should (string-match-p "C-c C-c send" narrow))
        (should (string-match-p "/help" narrow))
        (should-not (string-match-p "/sessions" narrow))
        (should (string-match-p "TAB on a row: expand · /help, " wide)))
      ;; A resize redraws the line; the composer keeps its text.
      (goto-char (point-max))
      (insert "draft")
      (cl-letf (((symbol-function 'window-body-width) (lambda (&rest _) 50)))
        (mevedel-view--fit-separator))
      (should (equal (mevedel-view--composer-text) "draft"))
      (let ((line (buffer-substring-no-properties mevedel-view--separator mevedel-view--composer)))
        (should (<= (length (string-trim line)) 50))
        ;; The rule, then the composer's prompt marker.
        (should (string-match-p "\\`\n──.*──\n› \\'" line)))
      (should (get-text-property mevedel-view--separator 'mevedel-separator))
      (should (= mevedel-view--panel mevedel-view--separator))
      ;; The transcript above is untouched.
      (should (string-match-p "Found it\\.\n\\'" (buffer-substring-no-properties
                                                  (point-min) mevedel-view--transcript-end))))))

(ert-deftest mevedel-view:describe-mode-documents-every-key ()
  "\\[describe-mode] in the view lists the keys of the view, rows, breadcrumbs and cards."
  (mevedel-view-test--with-view view
    (with-current-buffer view
      (let ((doc (substitute-command-keys (documentation 'mevedel-view-mode))))
        (dolist (command '(mevedel-view-send mevedel-view-abort mevedel-view-unqueue
                           mevedel-view-history-previous mevedel-view-toggle-row
                           mevedel-view-show-result mevedel-view-allow-once
                           mevedel-view-allow-session mevedel-view-deny))
          (should (string-match-p (regexp-quote (symbol-name command)) doc)))
        (should (string-match-p "/help" doc))))))

(ert-deftest mevedel-view:rows-and-text-lead-to-the-code ()
  "RET on a place visits it; `next-error' steps through the row's places."
  (let* ((root (file-name-as-directory (make-temp-file "mevedel-view-" t)))
         (view (mevedel root))
         (chat (mevedel-view-chat view)))
    (unwind-protect
        (progn
          (dolist (file '("a.el" "b.el"))
            (with-temp-file (expand-file-name file root)
              (insert (format ";; %s line 1\n;; %s line 2\n;; %s line 3\n" file file file))))
          (with-current-buffer (mevedel-chat-data-buffer chat)
            (insert "### Find it\n\n"
                    (mevedel-test-tool-text "call_g" "Grep" (list :pattern "line" :path root)
                                            "a.el:1:;; a.el line 1\nb.el:3:;; b.el line 3")
                    (mevedel-test-tool-text "call_r" "Read" (list :file_path (expand-file-name "b.el" root))
                                            "     1\t;; b.el line 1\n     2\t;; b.el line 2")
                    (propertize "See `b.el:2` for the answer, not missing.el." 'gptel 'response)))
          (mevedel-view-rerender view)
          (with-current-buffer view
            (dolist (row '("Grep" "Read b.el"))
              (goto-char (point-min))
              (search-forward row)
              (mevedel-view-toggle-row))
            ;; RET on a Grep line.
            (goto-char (point-min))
            (search-forward "b.el:3")
            (mevedel-locations-visit)
            (should (equal (buffer-file-name) (expand-file-name "b.el" root)))
            (should (= (line-number-at-pos) 3)))
          (with-current-buffer view
            ;; next-error from the row's start: the first place, then the next.
            (goto-char (point-min))
            (search-forward "Grep")
            (let ((shown (funcall next-error-function 1 t)))
              (should (equal (buffer-file-name shown) (expand-file-name "a.el" root)))
              (should (= (with-current-buffer shown (line-number-at-pos)) 1)))
            (let ((shown (funcall next-error-function 1)))
              (should (equal (buffer-file-name shown) (expand-file-name "b.el" root)))
              (should (= (with-current-buffer shown (line-number-at-pos)) 3)))
            (should-error (funcall next-error-function 1) :type 'user-error)
            (funcall next-error-function -1)
            (should (string-match-p "a\\.el:1" (buffer-substring (line-beginning-position)
                                                                 (line-end-position))))
            ;; A Read row's numbered line.
            (goto-char (point-min))
            (search-forward "2\t;; b.el line 2")
            (forward-line 0)
            (let ((shown (mevedel-locations-show (get-text-property (point) 'mevedel-location))))
              (should (= (with-current-buffer shown (line-number-at-pos)) 2)))
            ;; A file named in the answer is a button (its inline code
            ;; rendered); a missing one is not.
            (goto-char (point-min))
            (search-forward "See ")
            (should (memq 'mevedel-markdown-code (ensure-list (get-text-property (point) 'face))))
            (should (equal (car (get-text-property (point) 'mevedel-location)) "b.el"))
            (should (equal (nth 1 (get-text-property (point) 'mevedel-location)) 2))
            (search-forward "missing")
            (should-not (get-text-property (point) 'mevedel-location))))
      (dolist (file '("a.el" "b.el"))
        (when-let* ((buffer (get-file-buffer (expand-file-name file root))))
          (kill-buffer buffer)))
      (kill-buffer view)
      (kill-buffer (mevedel-chat-data-buffer chat))
      (delete-directory root t))))

(ert-deftest mevedel-view:the-menu-runs-the-commands-of-the-keys ()
  "The transient menu holds the session's commands, each the one its key runs."
  (require 'mevedel-menu)
  (let ((commands nil))
    (cl-labels ((walk (x) (cond ((and (symbolp x) (commandp x)
                                      (string-prefix-p "mevedel-" (symbol-name x)))
                                 (push x commands))
                                ((consp x) (walk (car x)) (walk (cdr x)))
                                ((vectorp x) (mapc #'walk x)))))
      (walk (get 'mevedel-menu 'transient--layout)))
    (dolist (command '(mevedel-view-set-model mevedel-view-set-permission-mode mevedel-new
                       mevedel-sessions mevedel-compact mevedel-view-abort mevedel-view-unqueue
                       mevedel-ps mevedel-tools-list mevedel-view-help))
      (should (memq command commands)))
    (pcase-dolist (`(,key . ,command) '(("C-c C-m" . mevedel-view-set-model)
                                        ("C-c C-p" . mevedel-view-set-permission-mode)
                                        ("C-c C-k" . mevedel-view-abort)
                                        ("C-c C-u" . mevedel-view-unqueue)
                                        ("C-c C-l" . mevedel-view-rerender)
                                        ("C-c C-e" . mevedel-ps)
                                        ("C-c C-o" . mevedel-menu)))
      (should (eq (keymap-lookup mevedel-view-mode-map key) command))
      (when (memq command commands)
        ;; The entry names the key it teaches.
        (should (string-match-p (regexp-quote key) (format "%S" (get 'mevedel-menu 'transient--layout)))))))
  ;; ? opens the menu outside the composer and is a character inside it.
  (mevedel-view-test--with-view view
    (with-current-buffer view
      (goto-char (point-max))
      (let ((last-command-event ??))
        (mevedel-menu-or-insert))
      (should (equal (mevedel-view--composer-text) "?"))
      (goto-char (point-min))
      (let ((opened nil))
        (cl-letf (((symbol-function 'mevedel-menu) (lambda () (interactive) (setq opened t))))
          (mevedel-menu-or-insert))
        (should opened)))))

(ert-deftest mevedel-view:rows-render-from-data-and-toggle ()
  (mevedel-view-test--with-view view
    (with-current-buffer view
      (let ((text (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))
        (should (equal text (concat "❯ Find it\n\nSearching.\n\n"
                                    "▸ ✓ Grep \"x\" (2 lines)\n"
                                    "▸ × Read a.el\n\nFound it.\n"))))
      ;; TAB on the Grep row expands it; its body comes from the data buffer.
      (goto-char (point-min))
      (search-forward "Grep")
      (should (eq (lookup-key (get-text-property (point) 'keymap) (kbd "TAB"))
                  #'mevedel-view-toggle-row))
      (mevedel-view-toggle-row)
      (should (string-match-p "▾ ✓ Grep \"x\" (2 lines)\n    a\\.el:1:x\n    b\\.el:2:x\n▸ × Read"
                              (buffer-substring-no-properties (point-min) (point-max))))
      (save-excursion
        (search-forward "a.el:1")
        (should (memq 'compilation-info (ensure-list (get-text-property (- (point) 5) 'face)))))
      ;; Change the data; collapse and expand again: the row is re-derived.
      (with-current-buffer (mevedel-chat-data-buffer (mevedel-view-chat view))
        (goto-char (point-min))
        (search-forward "b.el:2:x")
        (let ((props (text-properties-at (1- (point)))))
          (replace-match (apply #'propertize "c.el:9:x" props))))
      (goto-char (point-min)) (search-forward "Grep")
      (mevedel-view-toggle-row)
      (goto-char (point-min)) (search-forward "Grep")
      (mevedel-view-toggle-row)
      (should (string-match-p "    c\\.el:9:x"
                              (buffer-substring-no-properties (point-min) (point-max))))
      ;; The transcript is read-only.
      (goto-char (point-min))
      (should-error (insert "x") :type 'text-read-only))))

(ert-deftest mevedel-view:coalesced-hidden-preview-and-child-rows ()
  (mevedel-view-test--with-renderers
      (("Ping" (lambda (_name args result _data)
                 (list :header (format "Ping %s" (plist-get args :host)) :body result
                       :expandable-p t :initially-collapsed-p t :coalesce-key "ping")))
       ("Quiet" (lambda (&rest _) '(:header "q" :hidden-p t)))
       ("Tree" (lambda (&rest _)
                 '(:header "Tree" :body "tree result" :preview-body "peek"
                           :expandable-p t :initially-collapsed-p t
                           :child-calls (("Ping" (:host "child") "pong" nil))))))
    (mevedel-view-test--with-view view
      (with-current-buffer (mevedel-chat-data-buffer (mevedel-view-chat view))
        (goto-char (point-max))
        (insert "\n"
                (mevedel-test-tool-text "p1" "Ping" '(:host "a") "pong a")
                (mevedel-test-tool-text "p2" "Ping" '(:host "b") "Error: unreachable")
                (mevedel-test-tool-text "p3" "Ping" '(:host "c") "pong c")
                (mevedel-test-tool-text "q1" "Quiet" nil "nothing")
                (mevedel-test-tool-text "t1" "Tree" nil "tree result")))
      (with-current-buffer view
        (mevedel-view-rerender)
        (let ((text (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))
          ;; Three Pings make one group: the final row with the count.
          (should (string-match-p "^▸ ✓ Ping c  (3 calls)$" text))
          (should-not (string-match-p "Ping [ab]" text))
          ;; Hidden rows are not drawn; a collapsed row shows no preview.
          (should-not (string-match-p "^. . q$" text))
          (should (string-match-p "^▸ ✓ Tree\n\\'" text)))
        (goto-char (point-min))
        (search-forward "Ping c")
        (mevedel-view-toggle-row)
        (let ((text (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))
          (should (string-match-p "^▾ ✓ Ping c  (3 calls)\n▸ ✓ Ping a\n▸ × Ping b\n▸ ✓ Ping c\n"
                                  text)))
        (goto-char (point-min))
        (search-forward "Tree")
        (mevedel-view-toggle-row)
        (should (string-match-p "^▾ ✓ Tree\n    tree result\n    ▸ ✓ Ping child\n"
                                (buffer-substring-no-properties (point-min)
                                                                mevedel-view--transcript-end)))))))

;; Issue 42 item 9: a row that cannot be toggled is one event line, and
;; a preview replaces the body only under a row expanded by default.
(ert-deftest mevedel-view:event-lines-and-default-previews ()
  (mevedel-view-test--with-renderers
      (("Event" (lambda (&rest _)
                  '(:header "Event" :body "never drawn" :expandable-p nil
                            :initially-collapsed-p nil)))
       ("Open" (lambda (&rest _)
                 '(:header "Open" :body "the whole body" :preview-body "first changes"
                           :expandable-p t :initially-collapsed-p nil))))
    (mevedel-view-test--with-view view
      (with-current-buffer (mevedel-chat-data-buffer (mevedel-view-chat view))
        (goto-char (point-max))
        (insert "\n"
                (mevedel-test-tool-text "e1" "Event" nil "done")
                (mevedel-test-tool-text "o1" "Open" nil "done")))
      (with-current-buffer view
        (mevedel-view-rerender)
        (let ((text (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))
          (should (string-match-p "^  ✓ Event\n▾ ✓ Open\n    first changes\n" text))
          (should-not (string-search "never drawn" text))
          (should-not (string-search "the whole body" text)))
        ;; Collapsed, then asked for: the complete body.
        (goto-char (point-min)) (search-forward "Open")
        (mevedel-view-toggle-row)
        (should-not (string-search "first changes" (buffer-substring-no-properties
                                                    (point-min) mevedel-view--transcript-end)))
        (goto-char (point-min)) (search-forward "Open")
        (mevedel-view-toggle-row)
        (let ((text (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))
          (should (string-match-p "^▾ ✓ Open\n    the whole body\n" text)))))))

;; Issue 42 item 12: addresses in the transcript are buttons; a click
;; validates the address and visits its file.
(ert-deftest mevedel-view:addresses-in-the-transcript-are-clickable ()
  (mevedel-core-ensure)
  (mevedel-view-test--with-view view
    (let* ((session (mevedel-chat-session (mevedel-view-chat view)))
           (local (file-name-as-directory (expand-file-name "local" (mevedel-session-ensure-storage session)))))
      (with-temp-file (expand-file-name "notes.md" local) (insert "my notes\n"))
      (with-current-buffer (mevedel-chat-data-buffer (mevedel-view-chat view))
        (goto-char (point-max))
        (insert "\n\n" (propertize "I wrote work://notes.md. Also see work://missing.md"
                                   'gptel 'response)
                "\n\n"
                (mevedel-test-tool-text "call_l" "Glob" '(:pattern "*" :path "work://")
                                        "work://notes.md")))
      (with-current-buffer view
        (mevedel-view-rerender)
        (goto-char (point-min))
        (search-forward "I wrote work://")
        (should (equal (get-text-property (point) 'mevedel-address) "work://notes.md"))
        ;; The sentence's full stop is not part of it.
        (should-not (get-text-property (+ (point) (length "notes.md")) 'mevedel-address))
        (save-window-excursion
          (mevedel-locations-visit-address)
          (should (equal (buffer-file-name) (expand-file-name "notes.md" local)))
          (kill-buffer))
        ;; A missing file cannot be visited: said, not guessed.
        (goto-char (point-min))
        (search-forward "see work://")
        (should-error (mevedel-locations-visit-address) :type 'user-error)
        ;; Expanded, a tool row's body has its addresses marked too.
        (goto-char (point-min))
        (search-forward "Glob")
        (mevedel-view-toggle-row)
        (goto-char (point-min))
        (search-forward "    work://")
        (should (equal (get-text-property (point) 'mevedel-address) "work://notes.md"))))))

;; Only another visible rendering ends a run of coalesced calls.
(ert-deftest mevedel-view:hidden-rows-do-not-end-a-coalesced-run ()
  (mevedel-view-test--with-renderers
      (("Ping" (lambda (_name args result _data)
                 (list :header (format "Ping %s" (plist-get args :host)) :body result
                       :expandable-p t :initially-collapsed-p t :coalesce-key "ping")))
       ("Quiet" (lambda (&rest _) '(:header "q" :hidden-p t)))
       ("Loud" (lambda (&rest _) '(:header "Loud" :expandable-p nil))))
    (mevedel-view-test--with-view view
      (with-current-buffer (mevedel-chat-data-buffer (mevedel-view-chat view))
        (goto-char (point-max))
        (insert "\n"
                (mevedel-test-tool-text "p1" "Ping" '(:host "a") "pong a")
                (mevedel-test-tool-text "q1" "Quiet" nil "nothing")
                (mevedel-test-tool-text "p2" "Ping" '(:host "b") "pong b")
                (mevedel-test-tool-text "q2" "Quiet" nil "nothing")
                (mevedel-test-tool-text "l1" "Loud" nil "noise")
                (mevedel-test-tool-text "p3" "Ping" '(:host "c") "pong c")))
      (with-current-buffer view
        (mevedel-view-rerender)
        (let ((text (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))
          (should (string-match-p "^▸ ✓ Ping b  (2 calls)\n  ✓ Loud\n▸ ✓ Ping c\n" text)))))))

(ert-deftest mevedel-view:render-data-sets-status-and-stays-hidden ()
  (mevedel-core-ensure)
  (mevedel-view-test--with-view view
    (with-current-buffer (mevedel-chat-data-buffer (mevedel-view-chat view))
      (goto-char (point-max))
      (insert "\n"
              (mevedel-test-tool-text
               "call_b" "Bash" '(:command "make")
               (concat "compiled fine" (mevedel-render-data-encode '(:status error :exit-code 2)
                                                                   "call_b")))
              ;; A block bound to another call is ordinary text.
              (mevedel-test-tool-text
               "call_c" "Bash" '(:command "true")
               (concat "ok" (mevedel-render-data-encode '(:status error) "call_other")))))
    (with-current-buffer view
      (mevedel-view-rerender)
      (let ((text (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))
        (should (string-match-p "^▸ × \\$ make  \\[exit 2\\]$" text))
        (should (string-match-p "^▸ ✓ \\$ true$" text)))
      (goto-char (point-min))
      (search-forward "$ make")
      (mevedel-view-toggle-row)
      (let ((text (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))
        (should (string-match-p "    compiled fine\n" text))
        (should-not (string-match-p "call_b\\|:exit-code" text))))))

(ert-deftest mevedel-view:composer-history-and-keys ()
  (mevedel-view-test--with-view view
    (with-current-buffer view
      (let ((chat (mevedel-view-chat view)))
        (setf (mevedel-chat-history chat) (list "second" "first"))
        (goto-char (point-max))
        (insert "draft")
        (mevedel-view-history-previous)
        (should (equal (mevedel-view--composer-text) "second"))
        (mevedel-view-history-previous)
        (should (equal (mevedel-view--composer-text) "first"))
        (should-error (mevedel-view-history-previous) :type 'user-error)
        (mevedel-view-history-next)
        (mevedel-view-history-next)
        (should (equal (mevedel-view--composer-text) "draft"))
        ;; Keys: RET is a newline in the composer, C-c C-c sends, C-c C-k aborts.
        (should (eq (key-binding (kbd "RET")) #'newline))
        (should (eq (key-binding (kbd "C-c C-c")) #'mevedel-view-send))
        (should (eq (key-binding (kbd "C-c C-k")) #'mevedel-view-abort))
        (should (eq (key-binding (kbd "M-p")) #'mevedel-view-history-previous))
        (mevedel-view--set-composer "  ")
        (should-error (mevedel-view-send) :type 'user-error)))))

(ert-deftest mevedel-view:undo-in-the-composer-undoes-only-its-editing ()
  "What the view draws above the composer while the user types is not undone."
  (mevedel-test-with-view view chat
    (switch-to-buffer view)
    (let ((answer (lambda (text)
                    (with-current-buffer (mevedel-chat-data-buffer chat)
                      (goto-char (point-max))
                      (insert (propertize text 'gptel 'response)))
                    (mevedel-chat-notify chat 'text text)))
          (transcript (lambda () (buffer-substring-no-properties
                                  (point-min) mevedel-view--composer))))
      (mevedel-test-begin-turn chat "Explain it.")
      (mevedel-chat-notify chat 'turn-start "Explain it.")
      (goto-char (point-max))
      (insert "hello")
      (undo-boundary)
      (funcall answer "\nThe **first** part")
      (goto-char (point-max))
      (insert " world")
      (undo-boundary)
      (funcall answer ", then more.\n")
      (mevedel-chat-notify chat 'turn-end)
      (mevedel-view-replace-panel "a panel line\n")
      (let ((drawn (funcall transcript)))
        (should (string-match-p "The first part, then more\\." drawn))
        (should (equal (mevedel-view--composer-text) "hello world"))
        (setq last-command nil)
        (undo)
        (should (equal (mevedel-view--composer-text) "hello"))
        (should (equal (funcall transcript) drawn))
        ;; Drawn between two undos: the second still finds its text.
        (funcall answer "Another line.\n")
        (setq drawn (funcall transcript))
        (setq last-command 'undo)
        (undo)
        (should (equal (mevedel-view--composer-text) ""))
        (should (equal (funcall transcript) drawn))))))

(ert-deftest mevedel-view:composer-commands-clear-unknown-ones-are-refused ()
  "A handled command leaves the composer even when it fails; an unknown one is not sent."
  (require 'mevedel-ps)
  (mevedel-view-test--with-view view
    (with-current-buffer view
      (let ((chat (mevedel-view-chat view)))
        ;; /stop with nothing running: an error, and the composer is empty,
        ;; so the next text is not sent as "/stop...".
        (mevedel-view--set-composer "/stop")
        (should-error (mevedel-view-send) :type 'user-error)
        (should (equal (mevedel-view--composer-text) ""))
        ;; An unknown command stays to be fixed and nothing is sent.
        (mevedel-view--set-composer "/frobnicate now")
        (let ((err (should-error (mevedel-view-send) :type 'user-error)))
          (should (string-match-p "Unknown command /frobnicate" (cadr err)))
          (should (string-match-p "/help" (cadr err))))
        (should (equal (mevedel-view--composer-text) "/frobnicate now"))
        (should-not (mevedel-chat-busy-p chat))
        (should-not (mevedel-chat-turns chat))
        ;; /help lists the commands and the keys.
        (mevedel-view--set-composer "/help")
        (mevedel-view-send)
        (should (equal (mevedel-view--composer-text) ""))
        (with-current-buffer "*mevedel help*"
          (let ((text (buffer-string)))
            (should (string-match-p "/stop" text))
            (should (string-match-p "/help" text))
            (should (string-match-p "C-c C-c.*mevedel-view-send" text))
            (should (string-match-p "mevedel-view-allow-once" text))))
        (kill-buffer "*mevedel help*")))))

(ert-deftest mevedel-view:one-chat-per-workspace ()
  (let* ((root (file-name-as-directory (make-temp-file "mevedel-ws-" t)))
         (sub (expand-file-name "sub/" root)))
    (make-directory sub)
    (make-directory (expand-file-name ".git" root))
    (unwind-protect
        (let ((a (mevedel root))
              (b (mevedel sub)))
          (should (eq a b))
          (should (equal (mevedel-chat-root (mevedel-view-chat a)) root))
          (kill-buffer (mevedel-chat-data-buffer (mevedel-view-chat a)))
          (kill-buffer a))
      (delete-directory root t))))

;;;; Long transcripts

(defun mevedel-view-test--turn (chat text &optional mail)
  "Append the user's TEXT, after MAIL, as a new turn of CHAT.
The text is what `mevedel-chat-send' writes, and the turn is recorded."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (goto-char (point-max))
    (let ((start (point-marker)))
      (unless (bobp) (insert "\n\n"))
      (insert (gptel-prompt-prefix-string))
      (when mail (insert (propertize (concat mail "\n") 'mevedel-mail t)))
      (insert text "\n")
      (setf (mevedel-chat-turn-start chat) start)
      (push (list :id (format "t%d" (length (mevedel-chat-turns chat))) :label text :start start)
            (mevedel-chat-turns chat)))))

(defun mevedel-view-test--data (chat &rest texts)
  "Append TEXTS to CHAT's data buffer."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (goto-char (point-max))
    (apply #'insert texts)))

(defun mevedel-view-test--fill-mixed (chat)
  "Write a conversation of every kind of transcript block into CHAT's data."
  (dotimes (round 3)
    (mevedel-view-test--turn chat (format "Question %d" round))
    (mevedel-view-test--data
     chat (propertize (format "\nLooking, round %d." round) 'gptel 'response) "\n\n"
     (mevedel-test-tool-text (format "g%d" round) "Grep" '(:pattern "x" :path "lisp")
                             "a.el:1:x\nb.el:2:x\n\n")
     "\n\n"
     (mevedel-test-tool-text (format "r%d" round) "Read" '(:file_path "a.el")
                             "Error: File does not exist: a.el")
     (propertize "\nFound it.  " 'gptel 'response)
     (propertize "Twice." 'gptel 'response))
    (mevedel-chat-insert-notice chat 'background (format "Woken up %d" round))
    (mevedel-view-test--turn chat "Ping them" "<agent-message>hidden</agent-message>")
    (mevedel-view-test--data
     chat "\n\n"
     (mevedel-test-tool-text (format "p%da" round) "Ping" '(:host "a") "pong a")
     (mevedel-test-tool-text (format "p%db" round) "Ping" '(:host "b") "Error: unreachable")
     (mevedel-test-tool-text (format "q%d" round) "Quiet" nil "nothing")
     (mevedel-test-tool-text (format "t%d" round) "Tree" nil "tree result")
     (mevedel-test-tool-text (format "b%d" round) "Bash" '(:command "make")
                             (concat "compiled\n"
                                     (mevedel-render-data-encode '(:status error :exit-code 2)
                                                                 (format "b%d" round))))
     (propertize "\nThe build fails and then" 'gptel 'response 'mevedel-incomplete t))
    (mevedel-chat-insert-notice chat 'error "Request failed: boom")))

(defconst mevedel-view-test--mixed-properties
  '(mevedel-row mevedel-kind mevedel-group mevedel-breadcrumb face)
  "Properties of the transcript that `mevedel-view-test--transcript' records.")

(defun mevedel-view-test--transcript (view)
  "Return VIEW's transcript as its text and the runs of its main properties."
  (with-current-buffer view
    (cons (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)
          (cl-loop for property in mevedel-view-test--mixed-properties
                   collect
                   (let ((pos (point-min)) (runs nil))
                     (while (< pos mevedel-view--transcript-end)
                       (let ((next (next-single-property-change
                                    pos property nil mevedel-view--transcript-end)))
                         (when-let* ((value (get-text-property pos property)))
                           (push (list pos next value) runs))
                         (setq pos next)))
                     (cons property (nreverse runs)))))))

(defmacro mevedel-view-test--with-mixed (var &rest body)
  "Bind VAR to a view of a mixed conversation around BODY."
  (declare (indent 1))
  `(mevedel-view-test--with-renderers
       (("Ping" (lambda (_name args result _data)
                  (list :header (format "Ping %s" (plist-get args :host)) :body result
                        :expandable-p t :initially-collapsed-p t :coalesce-key "ping")))
        ("Quiet" (lambda (&rest _) '(:header "q" :hidden-p t)))
        ("Tree" (lambda (&rest _)
                  '(:header "Tree" :body "tree result" :preview-body "peek"
                            :expandable-p t :initially-collapsed-p t
                            :child-calls (("Ping" (:host "child") "pong" nil))))))
     (mevedel-core-ensure)
     (let* ((root (file-name-as-directory (make-temp-file "mevedel-view-" t)))
            (mevedel-save-sessions nil)
            (,var (mevedel root))
            (chat (mevedel-view-chat ,var)))
       (unwind-protect
           (progn (mevedel-view-test--fill-mixed chat)
                  ,@body)
         (kill-buffer ,var)
         (kill-buffer (mevedel-chat-data-buffer chat))
         (delete-directory root t)))))

;; What `mevedel-view-rerender' draws for `mevedel-view-test--fill-mixed'
;; in one pass over the data (first recorded before it drew in parts,
;; commit 0d48a42; groups and previews redrawn for issue 42).
(defconst mevedel-view-test--mixed-drawn
  '("❯ Question 0\n\nLooking, round 0.\n\n▸ ✓ Grep \"x\" in lisp (2 lines)\n▸ × Read a.el\n\nFound it.  Twice.\n\n[Woken up 0]\n\n❯ Ping them\n\n▸ × Ping b  (2 calls)\n▸ ✓ Tree\n▸ × $ make  [exit 2]\n\nThe build fails and then [incomplete: the response was cut off]\n\n[Request failed: boom]\n\n❯ Question 1\n\nLooking, round 1.\n\n▸ ✓ Grep \"x\" in lisp (2 lines)\n▸ × Read a.el\n\nFound it.  Twice.\n\n[Woken up 1]\n\n❯ Ping them\n\n▸ × Ping b  (2 calls)\n▸ ✓ Tree\n▸ × $ make  [exit 2]\n\nThe build fails and then [incomplete: the response was cut off]\n\n[Request failed: boom]\n\n❯ Question 2\n\nLooking, round 2.\n\n▸ ✓ Grep \"x\" in lisp (2 lines)\n▸ × Read a.el\n\nFound it.  Twice.\n\n[Woken up 2]\n\n❯ Ping them\n\n▸ × Ping b  (2 calls)\n▸ ✓ Tree\n▸ × $ make  [exit 2]\n\nThe build fails and then [incomplete: the response was cut off]\n\n[Request failed: boom]\n" (mevedel-row (34 65 "g0") (65 79 "r0") (148 157 "t0") (157 178 "b0") (301 332 "g1") (332 346 "r1") (415 424 "t1") (424 445 "b1") (568 599 "g2") (599 613 "r2") (682 691 "t2") (691 712 "b2")) (mevedel-kind (1 14 user) (14 33 response) (33 79 tool) (79 98 response) (98 112 notice) (112 125 user) (125 148 group) (148 178 tool) (178 243 response) (243 267 notice) (267 281 user) (281 300 response) (300 346 tool) (346 365 response) (365 379 notice) (379 392 user) (392 415 group) (415 445 tool) (445 510 response) (510 534 notice) (534 548 user) (548 567 response) (567 613 tool) (613 632 response) (632 646 notice) (646 659 user) (659 682 group) (682 712 tool) (712 777 response) (777 801 notice)) (mevedel-group (126 148 "p0a") (393 415 "p1a") (660 682 "p2a")) (mevedel-breadcrumb) (face (1 13 mevedel-view-user) (36 37 mevedel-view-success) (38 64 mevedel-view-tool-header) (67 68 mevedel-view-error) (69 78 mevedel-view-tool-header) (99 111 mevedel-view-notice) (113 124 mevedel-view-user) (128 129 mevedel-view-error) (130 136 mevedel-view-tool-header) (136 147 shadow) (150 151 mevedel-view-success) (152 156 mevedel-view-tool-header) (159 160 mevedel-view-error) (161 177 mevedel-view-tool-header) (203 242 mevedel-view-warning) (244 266 error) (268 280 mevedel-view-user) (303 304 mevedel-view-success) (305 331 mevedel-view-tool-header) (334 335 mevedel-view-error) (336 345 mevedel-view-tool-header) (366 378 mevedel-view-notice) (380 391 mevedel-view-user) (395 396 mevedel-view-error) (397 403 mevedel-view-tool-header) (403 414 shadow) (417 418 mevedel-view-success) (419 423 mevedel-view-tool-header) (426 427 mevedel-view-error) (428 444 mevedel-view-tool-header) (470 509 mevedel-view-warning) (511 533 error) (535 547 mevedel-view-user) (570 571 mevedel-view-success) (572 598 mevedel-view-tool-header) (601 602 mevedel-view-error) (603 612 mevedel-view-tool-header) (633 645 mevedel-view-notice) (647 658 mevedel-view-user) (662 663 mevedel-view-error) (664 670 mevedel-view-tool-header) (670 681 shadow) (684 685 mevedel-view-success) (686 690 mevedel-view-tool-header) (693 694 mevedel-view-error) (695 711 mevedel-view-tool-header) (737 776 mevedel-view-warning) (778 800 error)))
  "The transcript of the mixed conversation: text and property runs.")

(ert-deftest mevedel-view:long-transcript-draws-as-one-pass-did ()
  "Drawn at once or the last turns first, the transcript is the same."
  (mevedel-view-test--with-mixed view
    (mevedel-view-rerender view)
    (should (equal (mevedel-view-test--transcript view) mevedel-view-test--mixed-drawn))
    (let ((mevedel-view--first-paint-lines 10)
          (mevedel-view--fill-seconds 0)
          (mevedel-view--delete-now-chars 100)
          (full (car mevedel-view-test--mixed-drawn)))
      (mevedel-view-rerender view)
      ;; The old transcript is hidden, to be deleted piece by piece.
      (with-current-buffer view
        (should (= (overlay-start mevedel-view--stale) (point-min)))
        (should (overlay-get mevedel-view--stale 'invisible))
        (should (equal (buffer-substring-no-properties (point-min) (overlay-end mevedel-view--stale))
                       full)))
      ;; The last turn is there; earlier ones wait below a line saying so.
      (let ((drawn (with-current-buffer view
                     (buffer-substring-no-properties (overlay-end mevedel-view--stale)
                                                     mevedel-view--transcript-end))))
        (should (string-prefix-p "Drawing the earlier turns…\n" drawn))
        (should (string-suffix-p (substring full (- (length full) 120)) drawn))
        (should (< (length drawn) (/ (length full) 2))))
      (should (buffer-local-value 'mevedel-view--pending view))
      (with-current-buffer view
        (goto-char (point-max))
        (insert "typed"))
      (mevedel-test-wait-until (null (buffer-local-value 'mevedel-view--pending view)))
      (should (equal (mevedel-view-test--transcript view) mevedel-view-test--mixed-drawn))
      (with-current-buffer view
        (should (equal (mevedel-view--composer-text) "typed"))
        ;; Every row is known where it is drawn.
        (dolist (id '("g0" "r0" "t0" "b0" "g2" "b2"))
          (should (equal (get-text-property (mevedel-view--row-start id) 'mevedel-row) id)))))))

(ert-deftest mevedel-view:turn-events-while-earlier-turns-wait ()
  "A turn that runs while earlier turns wait to be drawn ends up as if drawn at once."
  (mevedel-view-test--with-mixed view
    (let ((chat (mevedel-view-chat view))
          (mevedel-view--first-paint-lines 10))
      (mevedel-view-rerender view)
      (should (buffer-local-value 'mevedel-view--pending view))
      (mevedel-view-test--turn chat "More")
      (mevedel-chat-notify chat 'turn-start "More")
      (mevedel-view-test--data chat (propertize "\nOne more." 'gptel 'response) "\n\n"
                               (mevedel-test-tool-text "g9" "Grep" '(:pattern "y") "c.el:3:y"))
      (mevedel-chat-notify chat 'tool-results nil)
      (with-current-buffer view
        (goto-char (mevedel-view--row-start "g9"))
        (mevedel-view-toggle-row)
        (should (looking-at-p "▾ ✓ Grep \"y\" (1 line)\n    c\\.el:3:y\n"))
        (mevedel-view--fill-pending view t))
      (should-not (buffer-local-value 'mevedel-view--pending view))
      (let ((drawn (mevedel-view-test--transcript view))
            (mevedel-view--first-paint-lines most-positive-fixnum))
        (mevedel-view-rerender view)
        (should (equal drawn (mevedel-view-test--transcript view)))
        (should (string-suffix-p "\n\n❯ More\n\nOne more.\n\n▾ ✓ Grep \"y\" (1 line)\n    c.el:3:y\n"
                                 (car drawn)))))))

(ert-deftest mevedel-view:collapsed-rows-compute-no-body ()
  "Collapsed rows are drawn from their renderer's summary; a body only on expanding."
  (let ((calls nil))
    (mevedel-view-test--with-renderers
        (("Lazy" (lambda (_name args result _data)
                   (push (cons (plist-get args :n) mevedel-tool-render-summary-only) calls)
                   (list :header (format "Lazy %s" (plist-get args :n))
                         :body (unless mevedel-tool-render-summary-only (upcase result))
                         :expandable-p t :initially-collapsed-p t))))
      (mevedel-view-test--with-view view
        (with-current-buffer (mevedel-chat-data-buffer (mevedel-view-chat view))
          (goto-char (point-max))
          (dotimes (n 3)
            (insert "\n" (mevedel-test-tool-text (format "lazy%d" n) "Lazy" (list :n n)
                                                 (format "body %d" n)))))
        (with-current-buffer view
          (mevedel-view-rerender)
          (should calls)
          (should (cl-every #'cdr calls))
          (should-not (string-match-p "BODY" (buffer-string)))
          (setq calls nil)
          (goto-char (point-min))
          (search-forward "Lazy 1")
          (mevedel-view-toggle-row)
          (should (member '(1) calls))
          (should-not (cl-find-if (lambda (call) (and (not (cdr call)) (/= (car call) 1))) calls))
          (should (string-match-p "▾ ✓ Lazy 1\n    BODY 1\n▸ ✓ Lazy 2"
                                  (buffer-substring-no-properties (point-min) (point-max)))))))))

(defun mevedel-view-test--mark (view id)
  "Put the property `test-mark' on the row of call ID in VIEW; return its text."
  (with-current-buffer view
    (let* ((start (mevedel-view--row-start id))
           (end (next-single-property-change start 'mevedel-row))
           (inhibit-read-only t))
      (put-text-property start end 'test-mark id)
      (buffer-substring-no-properties start end))))

(defun mevedel-view-test--marked (view id)
  "Return the text of VIEW's row of call ID if it still has its `test-mark'."
  (with-current-buffer view
    (let* ((start (mevedel-view--row-start id))
           (end (next-single-property-change start 'mevedel-row)))
      (and (equal (get-text-property start 'test-mark) id)
           (= (next-single-property-change start 'test-mark nil end) end)
           (buffer-substring-no-properties start end)))))

(ert-deftest mevedel-view:tool-event-redraws-only-its-row ()
  "A settled call adds its row and a changed one redraws its row; other rows stay."
  (mevedel-core-ensure)
  (mevedel-view-test--with-view view
    (let ((chat (mevedel-view-chat view)))
      (mevedel-view-test--turn chat "Build it")
      (mevedel-chat-notify chat 'turn-start "Build it")
      (mevedel-view-test--data
       chat (propertize "\nBuilding." 'gptel 'response) "\n\n"
       (mevedel-test-tool-text "call_a" "Bash" '(:command "make a")
                               (concat "ok" (mevedel-render-data-encode '(:exit-code 0) "call_a")))
       "\n\n"
       (mevedel-test-tool-text "call_b" "Bash" '(:command "make b")
                               (concat "ok" (mevedel-render-data-encode '(:exit-code 0) "call_b"))))
      (mevedel-chat-notify chat 'tool-results nil)
      (let ((grep (mevedel-view-test--mark view "call_g"))
            (a (mevedel-view-test--mark view "call_a")))
        ;; The model streams more text, then one more call settles.
        (mevedel-view-test--data chat (propertize "\nNow c." 'gptel 'response))
        (mevedel-chat-notify chat 'text "\nNow c.")
        (mevedel-view-test--data
         chat "\n\n" (mevedel-test-tool-text "call_c" "Bash" '(:command "make c") "ok"))
        (mevedel-chat-notify chat 'tool-results nil)
        (should (equal (mevedel-view-test--marked view "call_g") grep))
        (should (equal (mevedel-view-test--marked view "call_a") a))
        (should (string-suffix-p "▸ ✓ $ make b  [exit 0]\n\nNow c.\n\n▸ ✓ $ make c\n"
                                 (with-current-buffer view
                                   (buffer-substring-no-properties
                                    (point-min) mevedel-view--transcript-end))))
        ;; A settled call's render-data changes: its row alone is drawn again.
        (mevedel-view-test--mark view "call_b")
        (should (eq (mevedel-chat-update-render-data
                     chat "call_a" (lambda (data)
                                     (append '(:status error :exit-code 3) data)))
                    'updated))
        (should (equal (mevedel-view-test--marked view "call_g") grep))
        (should (mevedel-view-test--marked view "call_b"))
        (should-not (mevedel-view-test--marked view "call_a"))
        (with-current-buffer view
          (let ((start (mevedel-view--row-start "call_a")))
            (should (equal (buffer-substring-no-properties
                            start (save-excursion (goto-char start) (pos-eol)))
                           "▸ × $ make a  [exit 3]"))))))))

(ert-deftest mevedel-view:revealing-a-row-not-drawn-yet ()
  "Showing a call whose turn waits to be drawn draws the pending turns first."
  (mevedel-view-test--with-mixed view
    (let ((mevedel-view--first-paint-lines 10))
      (mevedel-view-rerender view)
      (with-current-buffer view
        (should mevedel-view--pending)
        (should-not (mevedel-view--row-start "g0"))
        (should (mevedel-view--reveal "g0"))
        (should-not mevedel-view--pending)
        (should (equal (get-text-property (point) 'mevedel-row) "g0"))
        (should (looking-at-p "▾ ✓ Grep \"x\" in lisp (2 lines)\n    a\\.el:1:x\n"))))))

(ert-deftest mevedel-view:a-call-split-in-runs-is-one-row ()
  "A call whose text runs carry equal but distinct `gptel' values, as a
transcript read back from disk has, is one segment and one row."
  (mevedel-view-test--with-view view
    (with-current-buffer (mevedel-chat-data-buffer (mevedel-view-chat view))
      (goto-char (point-max))
      (let ((start (point)))
        (insert "\n" (mevedel-test-tool-text "call_s" "Grep" '(:pattern "s") "a.el:1:s\nb.el:2:s"))
        (let ((middle (save-excursion (goto-char start) (search-forward "b.el") (point))))
          (put-text-property middle (next-single-property-change middle 'gptel)
                             'gptel (cons 'tool "call_s")))))
    (let ((segments (mevedel-history-segments (mevedel-chat-data-buffer (mevedel-view-chat view)))))
      (should (equal (mapcar (lambda (segment) (plist-get segment :id))
                             (cl-remove-if-not (lambda (segment) (eq (plist-get segment :type) 'tool))
                                               segments))
                     '("call_g" "call_r" "call_s")))
      (should (equal (plist-get (car (last (cl-remove-if-not
                                             (lambda (segment) (eq (plist-get segment :type) 'tool))
                                             segments)))
                                :result)
                     "a.el:1:s\nb.el:2:s")))
    (mevedel-view-rerender view)
    (with-current-buffer view
      (should (string-suffix-p "▸ ✓ Grep \"s\" (2 lines)\n"
                               (buffer-substring-no-properties (point-min)
                                                               mevedel-view--transcript-end))))))

(ert-deftest mevedel-view:reported-progress-shows-on-a-running-row ()
  "A handler's `mevedel-pipeline-report-progress' shows on its row until it settles."
  (mevedel-test-with-view view chat
    (let* ((finish nil)
           (mevedel-permissions-rules (cons '(allow "ProgressProbe") mevedel-permissions-rules))
           (args '(:what "x")))
      (mevedel-tool-register
       "ProgressProbe"
       (list :description "Report progress, then finish when told."
             :category "view-test"
             :args '((what string :required "Anything."))
             :async-p t
             :function (lambda (callback _what)
                         (let ((report (mevedel-pipeline-continuation
                                        #'mevedel-pipeline-report-progress)))
                           (run-at-time 0.05 nil (lambda () (funcall report "2/5 · halfway")))
                           (setq finish (lambda () (funcall callback "finished")))))))
      (unwind-protect
          (progn
            (setf (mevedel-chat-live-calls chat)
                  (list (list :id "call_r" :name "ProgressProbe" :args args)))
            (mevedel-chat-notify chat 'tools-start (mevedel-chat-live-calls chat))
            (let ((box (mevedel-test-start-tool chat "ProgressProbe" "call_r" args)))
              (mevedel-test-wait-until
                (equal (plist-get (mevedel-chat-call-progress chat "call_r") :progress-text)
                       "2/5 · halfway"))
              (with-current-buffer view
                (mevedel-test-wait-until
                  (string-match-p "ProgressProbe.* · 2/5 · halfway\n"
                                  (buffer-substring-no-properties (point-min) (point-max)))
                  5))
              (funcall finish)
              (mevedel-test-wait-until (car box))
              (should-not (mevedel-chat-call-progress chat "call_r"))))
        (mevedel-tool-unregister "ProgressProbe" "view-test")))))

(provide 'view-test)
;;; view-test.el ends here
