;;; ptc-e2e-test.el --- ToolSearch and ToolCall in a real session  -*- lexical-binding: t; -*-

;;; Commentary:

;; A real mevedel session whose scripted model finds the outline tool
;; with ToolSearch, calls it through ToolCall directly (the row renders
;; as that tool) and then over three files with parallel-map (the
;; ToolCall row expands into three bracketed rows).  The first request
;; carries the specialist listing and only the native tools.
;;
;; The outline tool is `ptc-e2e--outline'.  Until the Emacs tools land,
;; a test-local stand-in of that name is declared here; once Imenu is
;; registered, setting the constant to "Imenu" runs the scenario on it.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defconst ptc-e2e--outline "Imenu"
  "Name of the specialist the scenario searches for and calls.")

(defun ptc-e2e--declare-stand-in ()
  "Declare the test-local outline specialist unless the real one exists.
It lists each file's lines that start with \"(def\"."
  (unless (mevedel-tool-get ptc-e2e--outline)
    (mevedel-tool-register
     ptc-e2e--outline
     (list :category "mevedel-test"
           :description "Outline of a file: its definitions with line numbers."
           :summary "Outline of a file's definitions (an Imenu-like index)."
           :groups '(code)
           :args '((file_path path :required "The file to outline."))
           :read-only-p t
           :function (lambda (args)
                       (with-temp-buffer
                         (insert-file-contents (plist-get args :file_path))
                         (let ((n 0) (out nil))
                           (dolist (line (split-string (buffer-string) "\n"))
                             (cl-incf n)
                             (when (string-prefix-p "(def" line)
                               (push (format "%d: %s" n line) out)))
                           (string-join (nreverse out) "\n"))))))))

(defun ptc-e2e--setup (chat)
  "Let CHAT read its workspace without cards, and declare the outline tool."
  (setf (mevedel-chat-permission-mode chat) 'full-auto)
  (ptc-e2e--declare-stand-in))

(ert-deftest mevedel-e2e:tool-search-and-tool-call ()
  "ToolSearch finds the outline tool; ToolCall calls it directly and over three files."
  (let* ((direct (format "(%s :file_path \"a.el\")" ptc-e2e--outline))
         (fan-out (format "(parallel-map [f [\"a.el\" \"b.el\" \"c.el\"]] (%s :file_path f))"
                          ptc-e2e--outline))
         (expanded nil)
         (run
          (unwind-protect
              (mevedel-e2e-run
               :files '(("a.el" . "(defun alpha ()\n  1)\n") ("b.el" . "\n(defvar beta 2)\n")
                        ("c.el" . "(defmacro gamma ())\n"))
               :prompt "Outline a.el, then all three files"
               :setup #'ptc-e2e--setup
               :steps `(((expect . ((user_contains . "<specialist-tools>")))
                         (tool_calls . [((name . "ToolSearch")
                                         (arguments . ((query . "outline"))))]))
                        ((expect . ((results . [((contains . ,(concat "## " ptc-e2e--outline))
                                                 (contains . ,(format "Calling shape: (%s :file_path"
                                                                      ptc-e2e--outline)))])))
                         (tool_calls . [((name . "ToolCall")
                                         (arguments . ((program . ,direct))))]))
                        ((expect . ((results . [((contains . "alpha"))])))
                         (tool_calls . [((name . "ToolCall")
                                         (arguments . ((program . ,fan-out))))]))
                        ((expect . ((results . [((contains . "alpha"))])))
                         (text . "Done.")))
               :inspect
               (lambda (_chat view)
                 (with-current-buffer view
                   (goto-char (point-min))
                   (search-forward "Ran 3 calls")
                   (mevedel-view-toggle-row)
                   (setq expanded (mevedel-e2e-transcript-text view)))))
            (mevedel-tool-unregister ptc-e2e--outline "mevedel-test")))
         (log (plist-get run :log))
         (rows (plist-get run :rows)))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length log) 4))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    (let ((fan-out-result (mevedel-e2e-result-content (nth 3 log) (car (nth 2 (mevedel-e2e-served-ids log))))))
      (should (string-match-p "alpha.*beta.*gamma" fan-out-result)))
    (should (= (length rows) 3))
    (should (string-match-p "ToolSearch outline" (cdr (nth 0 rows))))
    ;; The direct call renders as the outline tool itself.
    (should (string-match-p (concat "✓ " ptc-e2e--outline " a\\.el") (cdr (nth 1 rows))))
    (should (string-match-p (format "Ran 3 calls: %s ×3" ptc-e2e--outline)
                            (cdr (nth 2 rows))))
    ;; Expanded, the fan-out is three bracketed rows of the tool.
    (should (string-match-p (concat "┌ .*" ptc-e2e--outline " a\\.el\n"
                                    "\\(?:.*\n\\)*?.*│ .*" ptc-e2e--outline " b\\.el\n"
                                    "\\(?:.*\n\\)*?.*└ .*" ptc-e2e--outline " c\\.el")
                            expanded))))

(ert-deftest mevedel-e2e:a-nested-command-row-follows-its-command ()
  "A command a ToolCall ran, still running when the program ended, updates its row."
  (let* ((run (mevedel-e2e-run
               :prompt "wait for it"
               :setup (lambda (chat) (setf (mevedel-chat-permission-mode chat) 'full-auto))
               :steps '(((tool_calls . [((name . "ToolCall")
                                         (arguments . ((program . "(Bash :command \"sleep 1.5; echo finished\" :description \"wait\" :yield_time_ms 250)"))))]))
                        ((text . "ok") (times . 3)))
               :inspect
               (lambda (chat view)
                 (let* ((buffer (mevedel-chat-data-buffer chat))
                        (id (car (mevedel-e2e-data-ids chat)))
                        (child (lambda ()
                                 (plist-get (car (plist-get (mevedel-render-data-extract buffer id)
                                                            :ptc-children))
                                            :render-data)))
                        (before (plist-get (funcall child) :state)))
                   (mevedel-test-wait-until
                     (equal (plist-get (funcall child) :state) "completed") 10)
                   (list before (funcall child)
                         (with-current-buffer view (buffer-substring-no-properties
                                                    (point-min) (point-max))))))))
         (inspected (plist-get run :inspected)))
    (should (eq (plist-get run :outcome) 'done))
    (should (equal (nth 0 inspected) "running"))
    (should (equal (plist-get (nth 1 inspected) :state) "completed"))
    (should (equal (plist-get (nth 1 inspected) :exit-code) 0))
    ;; The row in the view says so, without another turn.
    (should (string-match-p "sleep 1\\.5; echo finished.*exit 0" (nth 2 inspected)))))

(provide 'ptc-e2e-test)
;;; ptc-e2e-test.el ends here
