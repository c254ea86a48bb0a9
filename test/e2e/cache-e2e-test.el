;;; cache-e2e-test.el --- Prompt caching and byte-stable requests, end to end  -*- lexical-binding: t; -*-

;;; Commentary:

;; A long tool loop against the scripted model, which applies each
;; provider's caching rules: every request extends the one before it
;; byte for byte (the test names the first differing byte), Anthropic
;; requests carry at most four breakpoints placed so that each reads
;; what the previous one wrote, OpenAI requests one stable
;; prompt_cache_key, and most of the input is read from the cache.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defun cache-e2e--reads (count)
  "Return a script of COUNT sequential Read calls, then an answer."
  (append (cl-loop for n below count
                   collect `((tool_calls . [((name . "Read")
                                             (arguments . ((file_path . ,(format "{{root}}f%d.txt" (% n 3))))))])))
          '(((text . "Read them all.")))))

(defconst cache-e2e--files
  (cl-loop for n below 3
           collect (cons (format "f%d.txt" n)
                         (mapconcat (lambda (i) (format "   line %d of file %d  " i n))
                                    (number-sequence 1 40) "\n")))
  "Files whose lines start and end with spaces, which a trimmed replay would lose.")

(defun cache-e2e--breakpoints (raw)
  "Return how many cache breakpoints the request body RAW carries."
  (let ((count 0) (start 0))
    (while (setq start (string-search "\"cache_control\"" raw start))
      (setq count (1+ count) start (1+ start)))
    count))

(mevedel-e2e-deftest-matrix cache-e2e:a-long-turn-reads-its-prefix-from-the-cache
  "Thirty sequential calls: each request extends the last and reads it from the cache."
  (wire stream)
  (let* ((run (mevedel-e2e-run :wire wire :stream stream :files cache-e2e--files
                               :prompt "Read the files, one at a time."
                               :steps (cache-e2e--reads 30) :timeout 60))
         (requests (plist-get run :requests))
         (raws (mapcar (lambda (r) (alist-get 'raw r)) requests)))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length requests) 31))
    (mevedel-e2e-check-extends raws)
    (if (eq wire 'anthropic)
        (dolist (raw raws)
          (should (<= 2 (cache-e2e--breakpoints raw) 4)))
      (let ((keys (delete-dups
                   (mapcar (lambda (raw) (alist-get 'prompt_cache_key
                                                    (json-parse-string raw :object-type 'alist)))
                           raws))))
        (should (= (length keys) 1))
        (should (stringp (car keys)))))
    (let ((share (mevedel-e2e-cached-share requests)))
      (should (>= share 0.9)))))

(provide 'cache-e2e-test)
;;; cache-e2e-test.el ends here
