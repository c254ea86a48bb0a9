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
          ;; Three Pings make one group; its marker is the worst status.
          (should (string-match-p "^▸ × Ping a  (\\+2 more)$" text))
          (should-not (string-match-p "Ping b" text))
          ;; Hidden rows are not drawn; a collapsed row shows its preview.
          (should-not (string-match-p "^. . q$" text))
          (should (string-match-p "^▸ ✓ Tree\n    peek\n" text)))
        (goto-char (point-min))
        (search-forward "Ping a")
        (mevedel-view-toggle-row)
        (let ((text (buffer-substring-no-properties (point-min) mevedel-view--transcript-end)))
          (should (string-match-p "^▾ × Ping a  (\\+2 more)\n▸ ✓ Ping a\n▸ × Ping b\n▸ ✓ Ping c\n"
                                  text)))
        (goto-char (point-min))
        (search-forward "Tree")
        (mevedel-view-toggle-row)
        (should (string-match-p "^▾ ✓ Tree\n    tree result\n    ▸ ✓ Ping child\n"
                                (buffer-substring-no-properties (point-min)
                                                                mevedel-view--transcript-end)))))))

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

(provide 'view-test)
;;; view-test.el ends here
