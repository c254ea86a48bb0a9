;;; patch-core-test.el --- The patch engine through its wrappers  -*- lexical-binding: t; -*-

;;; Commentary:

;; End to end in a temporary directory: parse, plan, plan-files, apply
;; (whole, with a selection, with an edited hunk), before-state, and the
;; errors (grammar, hunk, stale file, atomicity).

;;; Code:

(require 'ert)
(require 'mevedel-test-helpers)
(require 'mevedel-core)

(defmacro mevedel-core-patch-test--in-dir (&rest body)
  "Run BODY with `default-directory' a fresh temporary directory."
  (declare (indent 0))
  `(let ((default-directory (file-name-as-directory
                             (make-temp-file "mevedel-patch" t))))
     (unwind-protect (progn ,@body)
       (delete-directory default-directory t))))

(defun mevedel-core-patch-test--write (file text)
  "Write TEXT to FILE, creating its directory."
  (make-directory (or (file-name-directory (expand-file-name file)) ".") t)
  (let ((coding-system-for-write 'no-conversion))
    (write-region text nil file nil 'silent)))

(defun mevedel-core-patch-test--read (file)
  "Return FILE's bytes as a unibyte string."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (let ((coding-system-for-read 'no-conversion))
      (insert-file-contents-literally file))
    (buffer-string)))

(defun mevedel-core-patch-test--paths (patch)
  "The alist of PATCH's authored paths to absolute ones."
  (let (paths)
    (dolist (op (mevedel-core-patch-parse patch))
      (dolist (p (list (plist-get op :path) (plist-get op :move-to)))
        (when p (push (cons p (expand-file-name p)) paths))))
    paths))

(defun mevedel-core-patch-test--plan (patch)
  "Plan PATCH in the current directory."
  (mevedel-core-patch-plan patch (mevedel-core-patch-test--paths patch)))

(defconst mevedel-core-patch-test--two-files
  "*** Begin Patch
*** Update File: a.txt
@@
 one
-two
+TWO
 three
@@
 seven
-eight
+EIGHT
*** Add File: sub/new.txt
+hello
+world
*** End Patch")

(defconst mevedel-core-patch-test--a
  "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n")

(ert-deftest mevedel-core-patch:parse-lists-operations ()
  (should (equal (mevedel-core-patch-parse
                  "*** Begin Patch
*** Add File: a/new.el
+x
*** Delete File: old.txt
*** Update File: x.el
*** Move to: y.el
@@ f
-a
+b
@@
-c
+d
*** End Patch")
                 '((:op add :path "a/new.el")
                   (:op delete :path "old.txt")
                   (:op update :path "x.el" :move-to "y.el" :hunks 2)))))

(ert-deftest mevedel-core-patch:grammar-errors-name-the-line ()
  (let ((err (should-error (mevedel-core-patch-parse "*** Begin Patch\n*** Frobnicate: x\n*** End Patch")
                           :type 'mevedel-core-patch-error)))
    (should (string-match-p "line 2" (cadr err)))
    (should (string-match-p "Frobnicate" (cadr err))))
  (should-error (mevedel-core-patch-parse "") :type 'mevedel-core-patch-error)
  (should-error (mevedel-core-patch-parse "*** Begin Patch\n*** End Patch")
                :type 'mevedel-core-patch-error)
  (should-error (mevedel-core-patch-parse "*** Begin Patch\n*** Update File: x\n*** End Patch")
                :type 'mevedel-core-patch-error)
  (should (memq 'mevedel-core-error (get 'mevedel-core-patch-error 'error-conditions))))

(ert-deftest mevedel-core-patch:plan-files-and-apply-everything ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--write "a.txt" mevedel-core-patch-test--a)
    (let* ((plan (mevedel-core-patch-test--plan mevedel-core-patch-test--two-files))
           (files (mevedel-core-patch-plan-files plan))
           (a (nth 0 files))
           (new (nth 1 files)))
      ;; Nothing is written by planning.
      (should-not (file-exists-p "sub/new.txt"))
      (should (equal (plist-get a :path) "a.txt"))
      (should (equal (plist-get a :abs) (expand-file-name "a.txt")))
      (should (eq (plist-get a :op) 'update))
      (should (= (plist-get a :added) 2))
      (should (= (plist-get a :removed) 2))
      ;; Each @@ section is a hunk, however close: the lines between
      ;; them are shared out as context, never in both.
      (should (= (length (plist-get a :hunks)) 2))
      (let ((h (car (plist-get a :hunks))))
        (should (equal (plist-get h :header) "@@ -1,5 +1,5 @@"))
        (should (= (plist-get h :index) 0))
        (should (string-prefix-p " one\n-two\n+TWO\n" (plist-get h :text))))
      (let ((h (cadr (plist-get a :hunks))))
        (should (equal (plist-get h :header) "@@ -6,4 +6,4 @@"))
        (should (= (plist-get h :index) 1))
        (should (string-prefix-p " six\n seven\n-eight\n+EIGHT\n" (plist-get h :text))))
      (should (string-prefix-p "--- a/a.txt\n+++ b/a.txt\n" (plist-get a :diff)))
      (should (eq (plist-get new :op) 'add))
      (should (equal (plist-get new :move-to) nil))
      (let ((result (mevedel-core-patch-apply plan)))
        (should (= (plist-get result :added) 4))
        (should (= (plist-get result :removed) 2))
        (should (equal (mapcar (lambda (f) (plist-get f :status))
                               (plist-get result :files))
                       '(applied applied))))
      (should (equal (mevedel-core-patch-test--read "a.txt")
                     "one\nTWO\nthree\nfour\nfive\nsix\nseven\nEIGHT\nnine\n"))
      (should (equal (mevedel-core-patch-test--read "sub/new.txt") "hello\nworld\n")))))

(defconst mevedel-core-patch-test--far
  "*** Begin Patch
*** Update File: far.txt
@@
-1
+one
@@
-20
+twenty
*** End Patch")

(defun mevedel-core-patch-test--far-file ()
  "Write far.txt: the numbers 1 to 20, one a line."
  (mevedel-core-patch-test--write
   "far.txt" (mapconcat (lambda (n) (format "%d\n" n)) (number-sequence 1 20) "")))

(ert-deftest mevedel-core-patch:apply-a-selection ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--far-file)
    (mevedel-core-patch-test--write "a.txt" mevedel-core-patch-test--a)
    (let* ((patch (concat (string-remove-suffix "*** End Patch" mevedel-core-patch-test--far)
                          "*** Delete File: a.txt\n*** End Patch"))
           (plan (mevedel-core-patch-test--plan patch))
           (far (car (mevedel-core-patch-plan-files plan))))
      (should (= (length (plist-get far :hunks)) 2))
      (let ((result (mevedel-core-patch-apply
                     plan `((,(expand-file-name "far.txt") accept reject)
                            (,(expand-file-name "a.txt") . reject)))))
        (should (equal (mapcar (lambda (f) (plist-get f :status))
                               (plist-get result :files))
                       '(partial rejected)))
        (should (= (plist-get result :added) 1)))
      (should (file-exists-p "a.txt"))
      (should (string-prefix-p "one\n2\n" (mevedel-core-patch-test--read "far.txt")))
      (should (string-suffix-p "\n19\n20\n" (mevedel-core-patch-test--read "far.txt"))))))

(ert-deftest mevedel-core-patch:apply-an-edited-hunk ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--far-file)
    (let* ((plan (mevedel-core-patch-test--plan mevedel-core-patch-test--far))
           (hunks (plist-get (car (mevedel-core-patch-plan-files plan)) :hunks))
           (second (nth 1 hunks)))
      (should (equal (plist-get second :new-text) "17\n18\n19\ntwenty\n"))
      (mevedel-core-patch-apply
       plan `((,(expand-file-name "far.txt") reject
               (edit . "17\n18\n19\nXX\n"))))
      (should (string-prefix-p "1\n2\n" (mevedel-core-patch-test--read "far.txt")))
      (should (string-suffix-p "\n19\nXX\n" (mevedel-core-patch-test--read "far.txt"))))))

(ert-deftest mevedel-core-patch:before-state ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--write "a.txt" mevedel-core-patch-test--a)
    (let* ((plan (mevedel-core-patch-test--plan mevedel-core-patch-test--two-files))
           (before (mevedel-core-patch-before plan)))
      (should (equal before
                     `((,(expand-file-name "a.txt") . ,mevedel-core-patch-test--a)
                       (,(expand-file-name "sub/new.txt")))))
      (should-not (multibyte-string-p (cdar before))))))

(ert-deftest mevedel-core-patch:hunk-error-names-file-hunk-and-lines ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--write "a.txt" mevedel-core-patch-test--a)
    (let ((err (should-error
                (mevedel-core-patch-test--plan
                 "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-tow\n+2\n*** End Patch")
                :type 'mevedel-core-patch-error)))
      (should (string-match-p "a\\.txt: hunk 1" (cadr err)))
      (should (string-match-p "2| two" (cadr err))))))

(ert-deftest mevedel-core-patch:stale-file-writes-nothing ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--write "a.txt" mevedel-core-patch-test--a)
    (let ((plan (mevedel-core-patch-test--plan mevedel-core-patch-test--two-files)))
      (mevedel-core-patch-test--write "a.txt" (concat mevedel-core-patch-test--a "ten\n"))
      (let ((err (should-error (mevedel-core-patch-apply plan)
                               :type 'mevedel-core-patch-error)))
        (should (string-match-p "a\\.txt: the file has changed" (cadr err))))
      (should-not (file-exists-p "sub/new.txt")))))

(ert-deftest mevedel-core-patch:failing-file-leaves-everything-untouched ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--write "a.txt" mevedel-core-patch-test--a)
    (mevedel-core-patch-test--write "b.txt" "b\n")
    (should-error
     (mevedel-core-patch-test--plan
      "*** Begin Patch\n*** Delete File: a.txt\n*** Add File: b.txt\n+x\n*** End Patch")
     :type 'mevedel-core-patch-error)
    (should (equal (mevedel-core-patch-test--read "a.txt") mevedel-core-patch-test--a))
    (should (equal (mevedel-core-patch-test--read "b.txt") "b\n"))))

(ert-deftest mevedel-core-patch:move-keeps-mode ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--write "run.sh" "#!/bin/sh\necho hi\n")
    (set-file-modes "run.sh" #o755)
    (mevedel-core-patch-apply
     (mevedel-core-patch-test--plan
      "*** Begin Patch\n*** Update File: run.sh\n*** Move to: bin/run.sh\n@@\n-echo hi\n+echo bye\n*** End Patch"))
    (should-not (file-exists-p "run.sh"))
    (should (equal (mevedel-core-patch-test--read "bin/run.sh") "#!/bin/sh\necho bye\n"))
    (should (= (file-modes "bin/run.sh") #o755))))

(ert-deftest mevedel-core-patch:move-before-state-and-anchor-header ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--write "c.py" "def a():\n    return 0\n\ndef b():\n    return 0\n")
    (let* ((plan (mevedel-core-patch-test--plan
                  "*** Begin Patch\n*** Update File: c.py\n*** Move to: d.py\n@@ def b():\n-    return 0\n+    return 1\n*** End Patch"))
           (file (car (mevedel-core-patch-plan-files plan))))
      (should (equal (plist-get file :move-to) "d.py"))
      (should (equal (plist-get file :move-abs) (expand-file-name "d.py")))
      (should (equal (plist-get (car (plist-get file :hunks)) :header)
                     "@@ -2,4 +2,4 @@ def b():"))
      (should (equal (mapcar #'car (mevedel-core-patch-before plan))
                     (list (expand-file-name "c.py") (expand-file-name "d.py"))))
      (should-not (cdr (nth 1 (mevedel-core-patch-before plan))))
      (mevedel-core-patch-apply plan)
      (should-not (file-exists-p "c.py"))
      (should (string-suffix-p "return 1\n" (mevedel-core-patch-test--read "d.py"))))))

(ert-deftest mevedel-core-patch:line-endings-and-final-newline-follow-the-file ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--write "w.txt" "one\r\ntwo\r\n")
    (mevedel-core-patch-test--write "n.txt" "a\nb")
    (mevedel-core-patch-apply
     (mevedel-core-patch-test--plan
      "*** Begin Patch\n*** Update File: w.txt\n@@\n-two\n+2\n*** Update File: n.txt\n@@\n-b\n+B\n*** End Patch"))
    (should (equal (mevedel-core-patch-test--read "w.txt") "one\r\n2\r\n"))
    (should (equal (mevedel-core-patch-test--read "n.txt") "a\nB"))))

(ert-deftest mevedel-core-patch:binary-and-ambiguous-targets-refused ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--write "bin.dat" (unibyte-string ?a 0 ?b ?\n))
    (mevedel-core-patch-test--write "dup.txt" "x\ny\nx\n")
    (let ((err (should-error
                (mevedel-core-patch-test--plan
                 "*** Begin Patch\n*** Update File: bin.dat\n@@\n-a\n+b\n*** End Patch")
                :type 'mevedel-core-patch-error)))
      (should (string-match-p "bin\\.dat: the file is binary" (cadr err))))
    (let ((err (should-error
                (mevedel-core-patch-test--plan
                 "*** Begin Patch\n*** Update File: dup.txt\n@@\n-x\n+z\n*** End Patch")
                :type 'mevedel-core-patch-error)))
      (should (string-match-p "matches 2 places" (cadr err))))))

(ert-deftest mevedel-core-patch:bad-selection-signals ()
  (mevedel-core-patch-test--in-dir
    (mevedel-core-patch-test--far-file)
    (let ((plan (mevedel-core-patch-test--plan mevedel-core-patch-test--far)))
      (should-error (mevedel-core-patch-apply
                     plan `((,(expand-file-name "far.txt") accept)))
                    :type 'mevedel-core-patch-error)
      (should-error (mevedel-core-patch-apply
                     plan `((,(expand-file-name "far.txt") accept frob)))
                    :type 'mevedel-core-patch-error)
      (should (equal (mevedel-core-patch-test--read "far.txt")
                     (mapconcat (lambda (n) (format "%d\n" n)) (number-sequence 1 20) ""))))))

(provide 'patch-core-test)
;;; patch-core-test.el ends here
