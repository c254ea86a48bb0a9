;;; shared-model-browser-e2e-test.el --- The model's whiteboard in a real browser  -*- lexical-binding: t; -*-

;;; Commentary:

;; The Lisp side of a whiteboard with a real page: in a chat the model
;; creates a board (SharedCreate) and edits it by the hash it read
;; (SharedEdit); the user opens it (`mevedel-shared-open') in headless
;; Chromium, driven by the host's browser script
;; (shared-board-browser.mjs); the model's edit shows in the page, and
;; the rectangle the page draws is saved with the session and reaches
;; the model's next request as a context update.  Chromium and the npm
;; packages are required: the test fails without them.

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-tool-editing)

(defun shared-model-browser--call (chat name &rest args)
  "Run tool NAME with ARGS in CHAT through the pipeline; return its result text."
  (mevedel-test-run-tool chat name (format "toolu_%d" (random 100000000)) args t))

(ert-deftest shared-model-browser-user-drawing-reaches-the-model ()
  "The model's edit shows in the page; the page's drawing is saved and told to the model."
  (let ((modules (expand-file-name ".deps/shared/npm/node_modules" mevedel-test-root))
        (driver (expand-file-name "test/e2e/shared-board-browser.mjs" mevedel-test-root)))
    (should (file-executable-p "/usr/bin/chromium"))
    (should (file-directory-p (expand-file-name "playwright-core" modules)))
    (should (executable-find "node"))
    (mevedel-test-with-view view chat
      (let ((mevedel-permissions-rules (append '((allow "SharedCreate") (allow "SharedEdit"))
                                               mevedel-permissions-rules)))
        (shared-model-browser--call
         chat "SharedCreate" :kind "whiteboard" :title "Flow" :id "arch"
         :content "[{\"type\":\"rectangle\",\"id\":\"model1\",\"x\":10,\"y\":10,\"width\":120,\
\"height\":60}]")
        (let* ((session (mevedel-chat-session chat))
               (url (let (opened)
                      (cl-letf (((symbol-function 'browse-url)
                                 (lambda (u &rest _) (setq opened u))))
                        (mevedel-shared-open session "arch"))
                      opened))
               (profile (make-temp-file "mevedel-chromium" t))
               (stderr (generate-new-buffer " *shared-model-browser-stderr*"))
               (scene (expand-file-name "shared/arch.excalidraw"
                                        (mevedel-session-directory session)))
               (out "")
               (output (lambda () out))
               proc)
          (unwind-protect
              (progn
                (setq proc (make-process
                            :name "shared-model-browser" :noquery t :connection-type 'pipe
                            :command (list "node" driver modules url profile)
                            :stderr stderr
                            :filter (lambda (_ s) (setq out (concat out s)))))
                (mevedel-test-browser-wait proc output "^\\(READY\\)$")
                (let ((overview (shared-model-browser--call chat "Read"
                                                            :file_path "shared://arch")))
                  (should (string-match "\t\\([0-9a-f]\\{8\\}\\) model1 " overview))
                  (should (string-search
                           "1 changed"
                           (shared-model-browser--call
                            chat "SharedEdit" :id "arch"
                            :edits (vector (list :op "update" :hash (match-string 1 overview)
                                                 :set (list :x 640)))))))
                (process-send-string proc "EDITED model1\n")
                (mevedel-test-browser-wait proc output "^SEEN \\(model1\\)$")
                (let ((drawn (mevedel-test-browser-wait proc output
                                                         "^DRAWN \\([A-Za-z0-9_-]+\\)$")))
                  ;; Saved with the session as it arrives, and told to the model.
                  (with-timeout (20 (ert-fail (list "the drawing was not saved" drawn)))
                    (while (not (with-temp-buffer (insert-file-contents scene)
                                                  (search-forward drawn nil t)))
                      (accept-process-output nil 0.05)))
                  (process-send-string proc "CHECKED\n")
                  (let ((update (car (mevedel-test-edited-files-update chat))))
                    (should (string-search "shared://arch was changed" update))
                    (should (string-match-p (concat "\\+[0-9a-f]\\{8\\} " (regexp-quote drawn)
                                                    " rectangle")
                                            update))))
                (mevedel-test-browser-wait proc output "^\\(DONE\\)$"))
            (when (process-live-p proc)
              (delete-process proc)
              ;; Chromium leaves its profile when its driver is gone.
              (sleep-for 1))
            (kill-buffer stderr)
            (delete-directory profile t)))))))

(provide 'shared-model-browser-e2e-test)
;;; shared-model-browser-e2e-test.el ends here
