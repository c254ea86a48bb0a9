;;; patch-e2e-test.el --- ApplyPatch in a real session against the scripted model  -*- lexical-binding: t; -*-

;;; Commentary:

;; The real gptel drives a mevedel session in permission mode `edits'
;; against the scripted model, which works as a coding agent would: it
;; reads a file, fixes it and adds a test with one ApplyPatch call over
;; two files, runs the project's tests with Bash and answers.  The
;; server's log shows the ApplyPatch result text the model received;
;; the files on disk and the view's row show what the user sees.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defconst patch-e2e--files
  '(("lib.sh" . "add() {\n  echo $(( $1 - $2 ))\n}\n")
    ("test.sh" . ". ./lib.sh\nfail=0\ncheck() {\n  [ \"$2\" = \"$3\" ] || { echo \"$1 failed: $2\"; fail=1; }\n}\ncheck 'add 2 3' \"$(add 2 3)\" 5\n[ \"$fail\" = 0 ] && echo \"all tests passed\"\nexit $fail\n"))
  "The project: a shell library with a bug and its test script.")

(defconst patch-e2e--patch
  (concat "*** Begin Patch\n"
          "*** Update File: lib.sh\n"
          "@@ add() {\n"
          "-  echo $(( $1 - $2 ))\n"
          "+  echo $(( $1 + $2 ))\n"
          " }\n"
          "*** Update File: test.sh\n"
          "@@\n"
          " check 'add 2 3' \"$(add 2 3)\" 5\n"
          "+check 'add 10 5' \"$(add 10 5)\" 15\n"
          " [ \"$fail\" = 0 ] && echo \"all tests passed\"\n"
          "*** End Patch\n")
  "The model's fix: one patch over both files.")

(defconst patch-e2e--result
  "The patch was applied.\nUpdated lib.sh (+1 -1)\nUpdated test.sh (+1 -0)"
  "The ApplyPatch result the model must receive.")

(defun patch-e2e--setup (chat)
  "Put CHAT in permission mode `edits', so that ApplyPatch needs no answer."
  (setf (mevedel-chat-permission-mode chat) 'edits))

(defun patch-e2e--library (chat _view)
  "Return the text of lib.sh in CHAT's workspace."
  (with-temp-buffer
    (insert-file-contents
     (expand-file-name "lib.sh" (mevedel-session-workspace (mevedel-chat-session chat))))
    (buffer-string)))

(mevedel-e2e-deftest-matrix mevedel-e2e:read-patch-test-answer
    "The model reads, patches two files, runs the tests with Bash and answers.
The server log holds the ApplyPatch result text (no render-data), the
files on disk are patched, and the view shows the patch row."
    (wire stream)
  (let* ((mevedel-permissions-rules '((allow "Bash")))
         (run (mevedel-e2e-run
               :wire wire :stream stream
               :files patch-e2e--files
               :prompt "add in lib.sh is wrong; fix it and test it"
               :setup #'patch-e2e--setup
               :inspect #'patch-e2e--library
               :steps `(((tool_calls . [((name . "Read")
                                         (arguments . ((file_path . "{{root}}lib.sh"))))]))
                        ((expect . ((results . [((contains . "$1 - $2"))])))
                         (text . "add subtracts; I will fix it and add a test.")
                         (tool_calls . [((name . "ApplyPatch")
                                         (arguments . ((patch . ,patch-e2e--patch))))]))
                        ((expect . ((results . [((contains . ,patch-e2e--result)
                                                 (lacks . "mevedel-render-data"))])))
                         (tool_calls . [((name . "Bash")
                                         (arguments . ((command . "sh test.sh")
                                                       (description . "run the tests"))))]))
                        ((expect . ((results . [((contains . "all tests passed"))])))
                         (text . "Fixed add in lib.sh; both tests pass.")))))
         (log (plist-get run :log))
         (served (mevedel-e2e-served-ids log))
         (rows (plist-get run :rows)))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length log) 4))
    (should-not (cl-mapcan (lambda (entry) (copy-sequence (alist-get 'mismatches entry))) log))
    ;; The server log: the ApplyPatch result text, under the ID it handed out.
    (should (equal (mevedel-e2e-result-content (nth 2 log) (car (nth 1 served)))
                   patch-e2e--result))
    (should (string-match-p "all tests passed"
                            (mevedel-e2e-result-content (nth 3 log) (car (nth 2 served)))))
    (should (equal (plist-get run :inspected) "add() {\n  echo $(( $1 + $2 ))\n}\n"))
    ;; The view: Read, the patch, Bash, all successful.
    (should (= (length rows) 3))
    (should (string-match-p "✓ Edited 2 files (\\+2 −1)" (cdr (nth 1 rows))))
    (should-not (cl-some (lambda (row) (string-match-p "×" (cdr row))) rows))
    (should (string-match-p "Fixed add in lib\\.sh; both tests pass\\.\n\\'"
                            (plist-get run :transcript)))))

(provide 'patch-e2e-test)
;;; patch-e2e-test.el ends here
