;;; transcript-test.el --- Tests of saving and restoring a data buffer  -*- lexical-binding: t; -*-

;;; Commentary:

;; A data buffer saved in a session store and restored from it: from
;; the readable copy when it is intact, from the log otherwise, and
;; with its properties applied lazily (last part first, the rest on a
;; timer or when a reader or a change needs them).

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-transcript)
(require 'mevedel-history)

(defmacro mevedel-transcript-test--with-store (spec &rest body)
  "Run BODY with a store in a temporary directory.
SPEC is (STORE DIR): both are bound."
  (declare (indent 1))
  (pcase-let ((`(,store ,dir) spec))
    `(let* ((,dir (file-name-as-directory (make-temp-file "mevedel-transcript" t)))
            (,store (mevedel-core-store-open (expand-file-name "session.sqlite" ,dir))))
       (unwind-protect (progn ,@body)
         (mevedel-core-store-close ,store)
         (delete-directory ,dir t)))))

(defun mevedel-transcript-test--fill (calls)
  "Insert a conversation of CALLS tool calls into the current buffer.
Each call is a response line and a tool result, so there are two
properties per call, more than one chunk of them for a few thousand."
  (insert "### Rename ünïcode everywhere\n")
  (dotimes (i calls)
    (insert (propertize (format "Checking file %d…\n" i) 'gptel 'response))
    (insert (propertize (format "(Grep :pattern \"x%d\")\nresult %d\n" i i)
                        'gptel (cons 'tool (format "call_%05d" i)))))
  (insert (propertize "Done.\n" 'gptel 'response 'mevedel-incomplete t)))

(defun mevedel-transcript-test--save (store dir calls)
  "Save a conversation of CALLS calls in STORE, compacted with its copy in DIR.
Return the saved buffer's text and property runs."
  (with-temp-buffer
    (mevedel-transcript-test--fill calls)
    (mevedel-transcript-track (current-buffer) store)
    (mevedel-transcript-save (current-buffer))
    (mevedel-transcript-consolidate (current-buffer) (expand-file-name "transcript.txt" dir))
    (should-not (mevedel-core-store-flush store))
    (mevedel-test-saved-runs (current-buffer))))

(ert-deftest mevedel-transcript:restore-from-the-intact-copy ()
  "A compacted transcript comes back from its readable copy, whole."
  (mevedel-transcript-test--with-store (store dir)
    (let ((saved (mevedel-transcript-test--save store dir 3000)))
      (should (equal (plist-get (mevedel-core-transcript-load store) :copy)
                     (expand-file-name "transcript.resume" dir)))
      (should-not (plist-get (mevedel-core-transcript-load store) :text))
      (with-temp-buffer
        (should (mevedel-transcript-restore (current-buffer) store))
        (should-not mevedel-transcript--pending)
        (should (equal (mevedel-test-saved-runs (current-buffer)) saved))
        (should-not (mevedel-transcript-dirty-p (current-buffer)))))))

(ert-deftest mevedel-transcript:the-readable-copy-is-a-conversation ()
  "transcript.txt says who said what, without plists, fences or tags."
  (mevedel-transcript-test--with-store (store dir)
    (mevedel-transcript-test--save store dir 2)
    (let ((text (with-temp-buffer
                  (insert-file-contents (expand-file-name "transcript.txt" dir))
                  (buffer-string))))
      (should (string-prefix-p "## User\n\nRename ünïcode everywhere\n\n## Assistant\n\nChecking file 0…\n"
                               text))
      (should (string-match-p "^\\*\\*Tool call\\*\\*: Grep (pattern: \"x1\")$" text))
      (should-not (string-match-p "(:name\\|(Grep\\|###" text)))))

(ert-deftest mevedel-transcript:an-edited-copy-is-not-used ()
  "A readable copy changed after it was written gives way to the log."
  (mevedel-transcript-test--with-store (store dir)
    (let* ((saved (mevedel-transcript-test--save store dir 10))
           (copy (expand-file-name "transcript.resume" dir)))
      (sleep-for 0.03)
      (with-temp-file copy
        (insert (upcase (car saved))))
      (should-not (plist-get (mevedel-core-transcript-load store) :copy))
      (with-temp-buffer
        (mevedel-transcript-restore (current-buffer) store)
        (should (equal (mevedel-test-saved-runs (current-buffer)) saved)))
      ;; A missing copy too.
      (delete-file copy)
      (with-temp-buffer
        (mevedel-transcript-restore (current-buffer) store)
        (should (equal (mevedel-test-saved-runs (current-buffer)) saved))))))

(ert-deftest mevedel-transcript:lazy-restore-applies-the-last-part-first ()
  "A lazy restore leaves the early properties for later: readers get them.
The segments of an early region, a change to the text, a save and the
timer each bring them in before anything could read them wrong."
  (mevedel-transcript-test--with-store (store dir)
    (let ((saved (mevedel-transcript-test--save store dir 3000)))
      ;; Segments of the last call only need the last chunk.
      (with-temp-buffer
        (mevedel-transcript-restore (current-buffer) store t)
        (should mevedel-transcript--pending)
        (should (equal (buffer-substring-no-properties (point-min) (point-max)) (car saved)))
        (should-not (get-text-property 40 'gptel))
        (let ((from (- (point-max) 200)))
          (mevedel-history-segments (current-buffer) from)
          (should mevedel-transcript--pending)
          (should (<= mevedel-transcript--complete-from from))
          (should (get-text-property from 'gptel)))
        ;; An early region brings in everything before it.
        (mevedel-history-segments (current-buffer) 1)
        (should-not mevedel-transcript--pending)
        (should (equal (mevedel-test-saved-runs (current-buffer)) saved)))
      ;; A change anywhere first applies what is pending, at the right places.
      (with-temp-buffer
        (mevedel-transcript-restore (current-buffer) store t)
        (should mevedel-transcript--pending)
        (goto-char (point-min))
        (insert "x")
        (should-not mevedel-transcript--pending)
        (delete-region 1 2)
        (should (equal (mevedel-test-saved-runs (current-buffer)) saved)))
      ;; The timer finishes the job on its own.
      (with-temp-buffer
        (mevedel-transcript-restore (current-buffer) store t)
        (should (timerp mevedel-transcript--timer))
        (let ((deadline (+ (float-time) 10)))
          (while (and mevedel-transcript--pending (< (float-time) deadline))
            (accept-process-output nil 0.01)))
        (should-not mevedel-transcript--pending)
        (should-not mevedel-transcript--timer)
        (should (equal (mevedel-test-saved-runs (current-buffer)) saved))))))

(provide 'transcript-test)
;;; transcript-test.el ends here
