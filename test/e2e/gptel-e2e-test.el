;;; gptel-e2e-test.el --- mevedel's tools in a plain gptel buffer  -*- lexical-binding: t; -*-

;;; Commentary:

;; A plain gptel buffer (gptel-mode, no mevedel session) that offers
;; mevedel's registered Bash and Read tools to a model, the scripted
;; server, through real `gptel-send'.  Bash never runs without
;; approval: with gptel's confirmation turned off it is refused with a
;; clear message; with gptel's confirmation (its default `auto' and the
;; tool's :confirm) it runs only once the user accepts the call.  Read,
;; which is read-only, runs without asking.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun gptel-e2e--plain-buffer (server root tools confirm)
  "Return a plain gptel buffer in ROOT talking to SERVER, offering TOOLS.
CONFIRM is its `gptel-confirm-tool-calls'."
  (let ((buffer (generate-new-buffer "*gptel-e2e*")))
    (with-current-buffer buffer
      (text-mode)
      (setq default-directory root)
      (gptel-mode 1)
      (setq-local gptel-backend (mevedel-scripted-model-backend server :wire 'openai :stream t)
                  gptel-model 'scripted-model
                  gptel-use-tools t
                  gptel-tools (mapcar (lambda (name) (mevedel-tool-gptel-tool (mevedel-tool-get name)))
                                      tools)
                  gptel-confirm-tool-calls confirm)
      (add-hook 'gptel-post-response-functions #'gptel-e2e--count-response nil t)
      (should-not mevedel-session-current))
    buffer))

(defmacro gptel-e2e--with-server (vars steps &rest body)
  "Run BODY with VARS (SERVER ROOT) bound to a scripted server of STEPS and a workspace."
  (declare (indent 2))
  `(progn
     (mevedel-e2e-require-python)
     (let* ((,(cadr vars) (mevedel-e2e-workspace '(("a.txt" . "hello from a\n"))))
            (script (mevedel-e2e-write-script ,steps))
            (,(car vars) (mevedel-scripted-model-start script :vars `(("root" . ,,(cadr vars)))))
            (gptel-stream t))
       (unwind-protect (progn ,@body)
         (mevedel-scripted-model-stop ,(car vars))
         (delete-file script)
         (delete-directory ,(cadr vars) t)))))

(defun gptel-e2e--send (buffer prompt)
  "Send PROMPT from the plain gptel BUFFER."
  (with-current-buffer buffer
    (goto-char (point-max))
    (insert prompt)
    (gptel-send)))

(defvar-local gptel-e2e--responses 0
  "Responses gptel finished in this buffer.")

(defun gptel-e2e--count-response (&rest _)
  "Count a response gptel finished in this buffer."
  (cl-incf gptel-e2e--responses))

(defun gptel-e2e--finished (buffer text)
  "Wait until gptel finished BUFFER's request, its last answer TEXT inserted."
  (mevedel-test-wait-until (with-current-buffer buffer
                             (and (> gptel-e2e--responses 0)
                                  (save-excursion (goto-char (point-min))
                                                  (search-forward text nil t))))
                           20))

(defun gptel-e2e--bash-steps (marker)
  "Return a script whose model runs Bash to create MARKER, then answers."
  `(((tool_calls . [((name . "Bash")
                     (arguments . ((command . ,(format "touch %s; echo made" marker))
                                   (description . "make the marker"))))]))
    ((text . "Done."))))

(ert-deftest mevedel-e2e:plain-gptel-buffer-refuses-bash-without-confirmation ()
  "With gptel's confirmation off, Bash is refused and never runs."
  (gptel-e2e--with-server (server root) (gptel-e2e--bash-steps "{{root}}/ran-marker")
    (let ((buffer (gptel-e2e--plain-buffer server root '("Bash") nil)))
      (unwind-protect
          (progn
            (gptel-e2e--send buffer "Make the marker")
            (mevedel-test-wait-until (= (length (mevedel-scripted-model-log server)) 2) 20)
            (let ((content (mevedel-e2e-result-content
                            (nth 1 (mevedel-scripted-model-log server))
                            (car (nth 0 (mevedel-e2e-served-ids
                                         (mevedel-scripted-model-log server)))))))
              (should (string-match-p "\\`Permission denied: " content))
              (should (string-match-p "Bash" content))
              (should (string-match-p "approv" content)))
            (gptel-e2e--finished buffer "Done.")
            (should-not (file-exists-p (expand-file-name "ran-marker" root))))
        (kill-buffer buffer)))))

(ert-deftest mevedel-e2e:plain-gptel-buffer-runs-bash-only-after-confirmation ()
  "With gptel's own confirmation, Bash waits for the user and then runs."
  (gptel-e2e--with-server (server root) (gptel-e2e--bash-steps "{{root}}/ran-marker")
    (let ((buffer (gptel-e2e--plain-buffer server root '("Bash") 'auto)))
      (unwind-protect
          (let (overlay)
            (gptel-e2e--send buffer "Make the marker")
            ;; gptel shows its confirmation and waits.
            (mevedel-test-wait-until
             (setq overlay (with-current-buffer buffer
                             (cl-find-if (lambda (ov) (overlay-get ov 'gptel-tool))
                                         (overlays-in (point-min) (point-max)))))
             20)
            (accept-process-output nil 0.3)
            (should (= (length (mevedel-scripted-model-log server)) 1))
            (should-not (file-exists-p (expand-file-name "ran-marker" root)))
            ;; The user accepts, as gptel's keymap on the overlay does.
            (with-current-buffer buffer
              (goto-char (overlay-start overlay))
              (call-interactively (lookup-key (overlay-get overlay 'keymap) (kbd "C-c C-c"))))
            (mevedel-test-wait-until (= (length (mevedel-scripted-model-log server)) 2) 20)
            (let* ((log (mevedel-scripted-model-log server))
                   (content (mevedel-e2e-result-content
                             (nth 1 log) (car (nth 0 (mevedel-e2e-served-ids log))))))
              (should (string-match-p "\\`made\n<bash-execution " content))
              (should (string-match-p "exit_code=\"0\"" content)))
            (gptel-e2e--finished buffer "Done.")
            (should (file-exists-p (expand-file-name "ran-marker" root))))
        (kill-buffer buffer)))))

(ert-deftest mevedel-e2e:plain-gptel-buffer-runs-read-without-asking ()
  "A read-only tool runs in a plain gptel buffer without any confirmation."
  (gptel-e2e--with-server (server root)
      `(((tool_calls . [((name . "Read") (arguments . ((file_path . "{{root}}/a.txt"))))]))
        ((expect . ((results . [((contains . "hello from a"))])))
         (text . "It says hello.")))
    (let ((buffer (gptel-e2e--plain-buffer server root '("Read") 'auto)))
      (unwind-protect
          (progn
            (gptel-e2e--send buffer "Read a.txt")
            (mevedel-test-wait-until (= (length (mevedel-scripted-model-log server)) 2) 20)
            (gptel-e2e--finished buffer "It says hello.")
            (should-not (mevedel-scripted-model-mismatches server))
            (should-not (with-current-buffer buffer
                          (cl-find-if (lambda (ov) (overlay-get ov 'gptel-tool))
                                      (overlays-in (point-min) (point-max))))))
        (kill-buffer buffer)))))

(provide 'gptel-e2e-test)
;;; gptel-e2e-test.el ends here
