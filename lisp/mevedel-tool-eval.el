;;; mevedel-tool-eval.el --- Eval: Emacs Lisp in this Emacs or in a batch child  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The Eval tool evaluates the Emacs Lisp forms of its `form' argument.
;;
;; `live' (the default) evaluates them here, in the running Emacs, so
;; the model can inspect and change live state: in the buffer of the
;; selected window, with the session's working directory as
;; `default-directory' and `lexical-binding' on.  The selected frame's
;; window configuration is restored afterwards unless `preserve_ui' is
;; false, so a stray `delete-other-windows' does not rearrange the
;; user's frame.  The result is the printed value (within
;; `print-length'/`print-level' and the memory guard
;; `mevedel-tool-eval-print-limit'), after whatever the forms sent to
;; `message'; the pipeline previews a long one by its head and tail.
;; An error is an error result with the same messages.
;;
;; `batch' runs the forms in a child `emacs --batch -Q' with the current
;; `load-path' (through EMACSLOADPATH) and the session's working
;; directory, as a managed execution on Bash's path
;; (`mevedel-tool-exec-run-command'): the same sandbox boundaries,
;; output spool, yield and teardown.  Its value is printed on stdout
;; after "=> "; an error exits with status 1.
;;
;; Eval is never read-only and can do anything Emacs can: in the `ask'
;; and `edits' permission modes every call asks, and no "always this
;; session" answer is offered (its own check asks, see
;; `mevedel-tool-eval-check'); `full-auto' runs it.  The forms are read before anything runs, so a
;; form that does not read is an error naming where.  Manual:
;; docs/tools/emacs.md (mevedel://tools/emacs.md).

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-pipeline)
(require 'mevedel-sandbox)
(require 'mevedel-tool-exec)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)

(defgroup mevedel-tool-eval nil
  "The Eval tool: Emacs Lisp for the model."
  :group 'mevedel-tool
  :prefix "mevedel-tool-eval-")

(defcustom mevedel-tool-eval-print-limit (* 64 1024 1024)
  "Most characters of a live Eval's printed value; the rest is cut with a note.
This only guards memory against a runaway value, like the 64 MiB cap
of an execution's output: what the model sees of a long value is the
pipeline's head-and-tail preview, with the whole value saved."
  :type 'natnum)

(defcustom mevedel-tool-eval-print-length 200
  "The `print-length' used to print an Eval value (live and batch)."
  :type 'natnum)

(defcustom mevedel-tool-eval-print-level 12
  "The `print-level' used to print an Eval value (live and batch)."
  :type 'natnum)

(defconst mevedel-tool-eval-manual-address "mevedel://tools/emacs.md"
  "Where the manual of the Emacs tools is served.")

;;;; Reading

(defun mevedel-tool-eval-read-forms (text)
  "Return the list of Lisp forms in TEXT, or signal an error naming the problem.
Comments and whitespace between forms are skipped; text that does not
read (an unbalanced parenthesis, say) is an error giving its offset."
  (unless (stringp text)
    (error "The form argument must be a string of Emacs Lisp"))
  (with-temp-buffer
    (insert text)
    (goto-char (point-min))
    (with-syntax-table emacs-lisp-mode-syntax-table
      (let ((forms nil))
        (while (progn (forward-comment (buffer-size)) (not (eobp)))
          (let ((start (point)))
            (condition-case err
                (push (read (current-buffer)) forms)
              ((end-of-file invalid-read-syntax)
               (error "The form does not read (%s) at character %d of %d"
                      (if (eq (car err) 'end-of-file)
                          "it ends inside an unfinished expression"
                        (format "invalid syntax %s" (mapconcat #'prin1-to-string (cdr err) " ")))
                      (1- start) (length text))))))
        (or (nreverse forms)
            (error "The form argument holds no Lisp form"))))))

;;;; Printing

(defun mevedel-tool-eval-print (value &optional limit)
  "Return VALUE printed as `prin1' does, in at most LIMIT characters.
LIMIT defaults to `mevedel-tool-eval-print-limit'; printing stops
there (even for a huge or circular structure) and a note says so."
  (let* ((limit (or limit mevedel-tool-eval-print-limit))
         (print-length mevedel-tool-eval-print-length)
         (print-level mevedel-tool-eval-print-level)
         (print-circle t)
         (count 0))
    (with-temp-buffer
      (let* ((out (current-buffer))
             (cut (catch 'mevedel-tool-eval--full
                    (prin1 value (lambda (c)
                                   (when (>= count limit) (throw 'mevedel-tool-eval--full t))
                                   (with-current-buffer out (insert c))
                                   (cl-incf count)))
                    nil)))
        (concat (buffer-string)
                (and cut (format " …[printing stopped after %d characters]" limit)))))))

;;;; Live evaluation

(defun mevedel-tool-eval--directory ()
  "Return the working directory of the running call's session."
  (file-name-as-directory
   (expand-file-name (or (plist-get (mevedel-tool-exec-context) :cwd) default-directory))))

(defun mevedel-tool-eval-live (forms preserve-ui)
  "Evaluate FORMS here; return the tool result plist.
With PRESERVE-UI non-nil the selected frame's window configuration is
restored afterwards, whatever the forms did to it."
  (let* ((frame (selected-frame))
         (config (and preserve-ui (current-window-configuration frame)))
         (directory (mevedel-tool-eval--directory))
         (log (with-current-buffer (messages-buffer) (point-max-marker)))
         (failure nil)
         (value nil))
    (unwind-protect
        (condition-case err
            (with-current-buffer (window-buffer (frame-selected-window frame))
              (let ((default-directory directory))
                (setq value (eval (cons 'progn forms) t))))
          (error (setq failure err)))
      (when config (set-window-configuration config)))
    (let ((messages (if (buffer-live-p (marker-buffer log))
                        (with-current-buffer (marker-buffer log)
                          (prog1 (buffer-substring-no-properties log (point-max))
                            (set-marker log nil)))
                      "")))
      (list :result (concat (unless (string-empty-p messages)
                              (concat "Messages:\n" messages
                                      (unless (string-suffix-p "\n" messages) "\n")))
                            (if failure
                                (format "Error: %s (%s)" (error-message-string failure)
                                        (car failure))
                              (concat "=> " (mevedel-tool-eval-print value))))
            :status (if failure 'error 'success)
            :render-data (list :mode "live")))))

;;;; Batch evaluation

(defun mevedel-tool-eval--quote (text)
  "Return TEXT quoted for Bash between single quotes."
  (concat "'" (string-replace "'" "'\\''" text) "'"))

(defun mevedel-tool-eval-batch-command (forms)
  "Return the Bash command evaluating FORMS in a child `emacs --batch -Q'.
The child prints the value on stdout after \"=> \"; an error prints
\"Error: ...\" and exits with status 1."
  (let ((driver
         `(condition-case err
              (let ((value (eval '(progn ,@forms) t))
                    (print-length ,mevedel-tool-eval-print-length)
                    (print-level ,mevedel-tool-eval-print-level)
                    (print-circle t))
                (princ "=> ")
                (prin1 value)
                (terpri))
            (error (princ (format "Error: %s (%s)\n" (error-message-string err) (car err)))
                   (kill-emacs 1)))))
    (concat (shell-quote-argument (expand-file-name invocation-name invocation-directory))
            " --batch -Q --eval "
            (mevedel-tool-eval--quote
             ;; One line, no control character (a NUL would end the
             ;; command), and shared structure kept.
             (let ((print-circle t) (print-escape-newlines t)
                   (print-escape-control-characters t) (print-length nil) (print-level nil))
               (prin1-to-string driver))))))

(defun mevedel-tool-eval--load-path-dirs ()
  "Return the existing directories of the current `load-path', expanded.
The sandbox shows them to a batch child read-only, wherever they are
\(a private /tmp hides what is under it otherwise)."
  (cl-remove-if-not #'file-directory-p
                    (delete-dups (mapcar #'expand-file-name
                                         (cl-remove-if-not #'stringp load-path)))))

(defun mevedel-tool-eval--load-path-entry (dirs)
  "Return the EMACSLOADPATH entry giving a child the load path DIRS."
  (concat "EMACSLOADPATH=" (mapconcat #'identity dirs ":")))

;;;; The handler

(defun mevedel-tool-eval--batch-status (answer)
  "Return the execution ANSWER of a batch Eval with its status set.
A child that exited non-zero or was killed failed; one still running
or done with status 0 succeeded, whatever its output says."
  (if (stringp answer)
      answer
    (let ((data (plist-get answer :render-data)))
      (append (list :status (if (and (not (plist-get data :signal))
                                     (memq (plist-get data :exit-code) '(nil 0)))
                                'success
                              'error))
              answer))))

(defconst mevedel-tool-eval--grant-keys
  '(:sandbox_permissions :additional_permissions :justification)
  "The arguments of a batch Eval that ask for more sandbox, as Bash's do.")

(defun mevedel-tool-eval--batch-args (args)
  "Return the execution arguments of the batch Eval call ARGS: its grant."
  (cl-loop for key in mevedel-tool-eval--grant-keys
           when (plist-member args key) append (list key (plist-get args key))))

(defun mevedel-tool-eval-grant-request (args)
  "Return the sandbox grant a batch Eval call with ARGS asks for, or nil.
It is Bash's (`mevedel-tool-exec-grant-request'); a live call has none."
  (and (equal (plist-get args :mode) "batch")
       (mevedel-tool-exec-grant-request (mevedel-tool-eval--batch-args args))))

(defun mevedel-tool-eval--preserve-ui-p (args)
  "Return non-nil unless ARGS (as handlers get them) set preserve_ui to false.
Handlers see JSON false as nil, so a present key with a nil value is
false and an absent key means the default, true."
  (let ((cell (plist-member args :preserve_ui)))
    (or (null cell) (and (cadr cell) (not (eq (cadr cell) :json-false))))))

(defun mevedel-tool-eval (callback args)
  "Evaluate the forms of the Eval call ARGS; answer CALLBACK once.
ARGS holds :form, :mode (\"live\" or \"batch\") and :preserve_ui."
  (condition-case err
      (let ((forms (mevedel-tool-eval-read-forms (plist-get args :form)))
            (mode (or (plist-get args :mode) "live"))
            (preserve (mevedel-tool-eval--preserve-ui-p args)))
        (pcase mode
          ("live" (funcall callback (mevedel-tool-eval-live forms preserve)))
          ("batch" (let ((dirs (mevedel-tool-eval--load-path-dirs)))
                     (mevedel-tool-exec-run-command
                      (lambda (answer) (funcall callback (mevedel-tool-eval--batch-status answer)))
                      (mevedel-tool-eval--batch-args args)
                      (mevedel-tool-eval-batch-command forms) "Eval (batch)"
                      (list (mevedel-tool-eval--load-path-entry dirs)) dirs)))
          (_ (error "The mode argument must be \"live\" or \"batch\", not %S" mode))))
    (error (funcall callback (list :result (concat "Error: " (error-message-string err))
                                   :status 'error)))))

;;;; The renderer

(defun mevedel-tool-eval-render (_name args result render-data)
  "Render an Eval call with ARGS, RESULT and RENDER-DATA.
A batch row shows its execution's state, a non-default sandbox
boundary and, once a yielded run ended, how it ended."
  (let* ((form (or (plist-get args :form) ""))
         (batch (equal (plist-get args :mode) "batch"))
         (state (plist-get render-data :state))
         (running (member state '("running" "queued" "stopping")))
         (code (plist-get render-data :exit-code))
         (warning (mevedel-sandbox-summary-warning (plist-get render-data :sandbox-summary))))
    (append
     (list :header (concat "Eval" (and batch " (batch)") " "
                           (mevedel-tool-render-shorten (mevedel-tool-render-first-line form) 60)
                           (and running (concat "  " state))
                           (and warning (concat "  [" warning "]")))
           :body (unless mevedel-tool-render-summary-only
                   (concat form (and result (concat "\n\n" result))))
           :breadcrumb (mevedel-tool-exec-breadcrumb-text (plist-get render-data :breadcrumb))
           :expandable-p t
           :initially-collapsed-p t)
     (cond (running (list :status 'running))
           ((or (plist-get render-data :signal) (and code (/= code 0))) (list :status 'error))))))

(defun mevedel-tool-eval-check (_args)
  "Ask about every Eval call, whatever was answered before.
Evaluated Lisp can do anything this Emacs can, so no answer covers
the next form; `full-auto' still runs it (see `mevedel-permissions-judge')."
  'ask)

;;;; The declaration

(mevedel-define-tool Eval
  :category "emacs"
  :groups '(emacs)
  :summary "Evaluate Emacs Lisp in the running Emacs, or in a sandboxed batch Emacs."
  :description (concat
                "Evaluate Emacs Lisp forms. mode \"live\" (default) runs them in the user's \
running Emacs, in the buffer of the selected window with the session's directory as \
default-directory: use it to inspect or change live state. The selected frame's window layout \
is restored afterwards unless preserve_ui is false. The result is the forms' `message' output \
and the printed value of the last form (\"=> VALUE\", bounded); an error is an error result. \
mode \"batch\" runs them in a fresh `emacs --batch -Q' with the current load-path in the \
session's directory, confined like Bash (workspace writable, no network; sandbox_permissions, \
additional_permissions and justification as for Bash); a long run returns an execution_id to \
poll with WriteStdin. Every call asks the user unless the permission mode is \
full-auto. Manual: " mevedel-tool-eval-manual-address)
  :args `((form string :required "Emacs Lisp: one or more forms, evaluated in order")
         (mode string :optional "\"live\" (default): this Emacs; \"batch\": a child emacs --batch -Q"
               :enum ("live" "batch"))
         (preserve_ui boolean :optional
                      "Live mode: restore the window layout afterwards (default true)")
         ,@(mevedel-tool-exec-permission-args "Batch mode: "))
  :async-p t
  :check-permission #'mevedel-tool-eval-check
  :grant-request #'mevedel-tool-eval-grant-request
  :max-result-size 30000
  :function #'mevedel-tool-eval
  :renderer #'mevedel-tool-eval-render)

(provide 'mevedel-tool-eval)
;;; mevedel-tool-eval.el ends here
