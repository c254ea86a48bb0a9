;;; consolidation-e2e-test.el --- Memory consolidation of quiet notes  -*- lexical-binding: t; -*-

;;; Commentary:

;; Issue 42 item 6: after a turn ends, the quiet notes of work://shared/
;; are reviewed by a background turn of the scripted model, which moves
;; their lasting knowledge into memory and deletes them through
;; ApplyPatch; quiet unreferenced attachments and empty folders go; the
;; capture puts everything back with `mevedel-consolidation-undo'.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defconst consolidation-e2e--patch
  (concat "*** Begin Patch\n"
          "*** Add File: memory://local-mevedel/build.md\n"
          "+The build needs FOO=1.\n"
          "*** Delete File: work://shared/build-notes.md\n"
          "*** End Patch\n")
  "The model's review: the lasting fact into memory, the note deleted.")

(defun consolidation-e2e--age (root)
  "Make ROOT's shared files quiet (a month old), bar fresh.md; add an empty folder."
  (let ((old (time-subtract nil (* 30 86400)))
        (shared (expand-file-name ".mevedel/shared/" root)))
    (make-directory (expand-file-name "empty/inner" shared) t)
    (dolist (name '("build-notes.md" "diagram.bin" "named.bin" "index.md"))
      (set-file-times (expand-file-name name shared) old))))

(ert-deftest mevedel-e2e:quiet-notes-are-consolidated-into-memory ()
  "A turn's end reviews the quiet notes; the review's patch goes through ApplyPatch."
  (let* ((mevedel-resource-memory-roots '(".mevedel/memory"))
         (mevedel-consolidation-interval-hours 24)
         (undone nil)
         (run (mevedel-e2e-run
               :files '((".mevedel/shared/build-notes.md" . "The build needs FOO=1.\nTried X: no.\n")
                        (".mevedel/shared/diagram.bin" . "\0\1\2 binary")
                        (".mevedel/shared/named.bin" . "\0\3 binary")
                        (".mevedel/shared/index.md" . "See named.bin.\n")
                        (".mevedel/shared/fresh.md" . "In progress.\n")
                        ("src.txt" . "code\n"))
               :prompt "hello"
               :setup (lambda (chat)
                        (setf (mevedel-chat-permission-mode chat) 'full-auto)
                        (consolidation-e2e--age (mevedel-chat-root chat)))
               :steps `(((text . "Hi."))
                        ((expect . ((user_contains . "work://shared/build-notes.md")))
                         (tool_calls . [((name . "ApplyPatch")
                                         (arguments . ((patch . ,consolidation-e2e--patch))))]))
                        ((expect . ((results . [((contains . "memory://local-mevedel/build.md"))])))
                         (text . "work://shared/build-notes.md: moved to memory, deleted.")))
               :inspect
               (lambda (chat view)
                 (let* ((root (mevedel-chat-root chat))
                        (shared (expand-file-name ".mevedel/shared/" root))
                        (memory (expand-file-name ".mevedel/memory/build.md" root)))
                   (mevedel-test-wait-until
                     (and (file-exists-p memory) (not (mevedel-chat-busy-p chat))
                          (= (length (mevedel-chat-turns chat)) 2))
                     20)
                   ;; The turn's end after the review starts no other one.
                   (dotimes (_ 20) (accept-process-output nil 0.02))
                   (should (= (length (mevedel-chat-turns chat)) 2))
                   (should (string-search "Memory consolidation: reviewing"
                                          (with-current-buffer view (buffer-string))))
                   (should-not (file-exists-p (expand-file-name "build-notes.md" shared)))
                   (should-not (file-exists-p (expand-file-name "diagram.bin" shared)))
                   (should-not (file-exists-p (expand-file-name "empty" shared)))
                   ;; Named by a note, an attachment stays; a fresh note is not reviewed.
                   (should (file-exists-p (expand-file-name "named.bin" shared)))
                   (should (file-exists-p (expand-file-name "fresh.md" shared)))
                   ;; Undo puts the notes and memory back.
                   (mevedel-consolidation-undo root)
                   (setq undone
                         (list (file-exists-p (expand-file-name "build-notes.md" shared))
                               (file-exists-p (expand-file-name "diagram.bin" shared))
                               (file-exists-p memory)))))))
         (log (plist-get run :log)))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length log) 3))
    (should (string-search "Memory consolidation" (format "%S" (nth 1 log))))
    (should-not (string-search "fresh.md" (format "%S" (nth 1 log))))
    (should (equal undone '(t t nil)))))

(ert-deftest mevedel-e2e:consolidation-waits-its-interval-and-can-be-off ()
  "Not due right after a consolidation, nor when disabled, nor without quiet files."
  (let* ((root (mevedel-e2e-workspace '((".mevedel/shared/a.md" . "old\n"))))
         (file (expand-file-name ".mevedel/shared/a.md" root)))
    (unwind-protect
        (progn
          (should-not (mevedel-consolidation-due-p root))
          (set-file-times file (time-subtract nil (* 30 86400)))
          (should (mevedel-consolidation-due-p root))
          (let ((mevedel-consolidation-enabled nil))
            (should-not (mevedel-consolidation-due-p root)))
          (mevedel-consolidation--capture root (list file))
          (should-not (mevedel-consolidation-due-p root)))
      (delete-directory root t))))

(provide 'consolidation-e2e-test)
;;; consolidation-e2e-test.el ends here
