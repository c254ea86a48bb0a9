;;; markdown-bench.el --- The view rendering the assistant's Markdown  -*- lexical-binding: t; -*-

;;; Commentary:

;; A long Markdown answer as models write them: sections with headings,
;; paragraphs with inline code, emphasis, links and file names, lists,
;; and fenced code blocks in six languages.  Measured: the view drawing
;; a 200 KB answer with 30 code blocks once the turn ends (the
;; `turn-end' event: the view draws the response segment again from the
;; data, rendered); and each streamed chunk of an answer (the `text'
;; event) at the end of a 2 MB transcript.

;;; Code:

(require 'mevedel)
(require 'mevedel-view)
(require 'mevedel-bench-lib)
(require 'mevedel-test-helpers)

(defconst markdown-bench--blocks
  '(("emacs-lisp" . "(defun mevedel-example-%d (items)
  \"Return ITEMS without duplicates, in order.\"
  (let ((seen (make-hash-table :test #'equal))
        (result nil))
    (dolist (item items (nreverse result))
      (unless (gethash item seen)
        (puthash item t seen)
        (push item result)))))
")
    ("python" . "def example_%d(items: list[str]) -> list[str]:
    \"\"\"Return items without duplicates, in order.\"\"\"
    seen = set()
    result = []
    for item in items:
        if item not in seen:
            seen.add(item)
            result.append(item)
    return result
")
    ("sh" . "#!/usr/bin/env bash
# Example %d: build and test.
set -euo pipefail
for dir in lisp src test; do
  if [[ -d \"$dir\" ]]; then
    echo \"checking $dir\"
    grep -rn 'TODO' \"$dir\" || true
  fi
done
")
    ("js" . "// Example %d
function unique(items) {
  const seen = new Set();
  return items.filter((item) => {
    if (seen.has(item)) return false;
    seen.add(item);
    return true;
  });
}
")
    ("c" . "/* Example %d */
#include <stdio.h>
static int count(const char *s) {
  int n = 0;
  while (*s) {
    if (*s++ == '\\n') n++;
  }
  return n;
}
")
    ("diff" . "--- a/lisp/example-%d.el
+++ b/lisp/example-%d.el
@@ -1,4 +1,4 @@
 (defun example ()
-  (message \"old\"))
+  (message \"new\"))
 ;; end
"))
  "Code blocks of the answer, by language: the code, with %d for a number.")

(defun markdown-bench--section (i)
  "Return section I of the answer: prose, a list, and a code block."
  (pcase-let ((`(,lang . ,code) (nth (% i (length markdown-bench--blocks))
                                     markdown-bench--blocks)))
    (concat
     (format "## Step %d: the `example-%d` function\n\n" i i)
     (apply #'concat
            (make-list 9 (format "The function **example-%d** in `lisp/example.el` keeps the \
*first* occurrence of each item; see [the manual](https://example.org/manual/%d) and \
lisp/mevedel-view.el:%d for the caller.  It is _linear_ in the length of the list, \
because a hash table remembers what was seen, and ~~quadratic~~ code is gone.\n\n" i i i)))
     "Things to check:\n\n"
     (apply #'concat (cl-loop for n from 1 to 8
                              collect (format "- item %d: `arg-%d` is **required**\n" n n)))
     "\n```" lang "\n" (replace-regexp-in-string "%d" (number-to-string i) code t t)
     "```\n\n")))

(defun markdown-bench--answer (size blocks)
  "Return a Markdown answer of about SIZE characters with BLOCKS code blocks."
  (let ((sections (mapcar #'markdown-bench--section (number-sequence 1 blocks))))
    (with-temp-buffer
      (dolist (section sections) (insert section))
      ;; Paragraphs between the sections bring it to SIZE.
      (let ((para "More prose follows: a `symbol`, a **bold** word and an *emphasis* in a \
paragraph long enough to wrap, as models write when they explain what they did and why.\n\n")
            (step 0))
        (while (< (buffer-size) size)
          (goto-char (point-min))
          (dotimes (_ (1+ (% step blocks)))
            (re-search-forward "^## " nil 'move))
          (forward-line 0)
          (insert para)
          (setq step (1+ step))))
      (buffer-string))))

(defun markdown-bench--view ()
  "Return a view of a new temporary workspace, with a file the answer names."
  (let ((root (file-name-as-directory (make-temp-file "mevedel-mdbench-" t))))
    (make-directory (expand-file-name "lisp" root))
    (with-temp-file (expand-file-name "lisp/mevedel-view.el" root) (insert ";; view\n"))
    (let ((mevedel-save-sessions nil))
      (mevedel root))))

(defun markdown-bench--close (view)
  "Kill VIEW, its chat's data buffer and its workspace."
  (let* ((chat (mevedel-view-chat view))
         (root (mevedel-chat-root chat)))
    (kill-buffer view)
    (kill-buffer (mevedel-chat-data-buffer chat))
    (delete-directory root t)))

(defun markdown-bench--drain (view)
  "Run VIEW's fontification of code blocks until none waits."
  (with-current-buffer view
    (while mevedel-view--code-queue
      (mevedel-view--fontify-code view))))

(defun markdown-bench--render (runs)
  "Report the view drawing a 200 KB answer when its turn ends, median of RUNS."
  (let* ((view (markdown-bench--view))
         (chat (mevedel-view-chat view))
         (answer (markdown-bench--answer 200000 30)))
    (unwind-protect
        (progn
          (mevedel-test-begin-turn chat "Explain the example functions.")
          (mevedel-chat-notify chat 'turn-start "Explain the example functions.")
          (mevedel-bench-append chat (mevedel-bench-response (concat "\n" answer)))
          (mevedel-chat-notify chat 'turn-end)
          (markdown-bench--drain view)
          (with-current-buffer view
            (goto-char (point-min))
            (unless (and (search-forward "example-3" nil t)
                         (text-property-search-forward 'mevedel-markdown-block))
              (error "The answer is not drawn rendered")))
          (let (cold fontify warm raw)
            (dotimes (_ runs)
              ;; Cold: the answer's blocks were never fontified (a resumed
              ;; session); their fontification waits for the view's timer.
              (clrhash mevedel-markdown--faces)
              (garbage-collect)
              (let ((start (float-time)))
                (mevedel-chat-notify chat 'turn-end)
                (push (- (float-time) start) cold))
              (let ((start (float-time)))
                (markdown-bench--drain view)
                (push (- (float-time) start) fontify))
              ;; Rendering off: the text as written, as before this change.
              (let ((mevedel-markdown-enabled nil))
                (garbage-collect)
                (let ((start (float-time)))
                  (mevedel-chat-notify chat 'turn-end)
                  (push (- (float-time) start) raw)))
              ;; Warm: as when the turn ends after the answer streamed,
              ;; its blocks fontified as each closed.
              (garbage-collect)
              (let ((start (float-time)))
                (mevedel-chat-notify chat 'turn-end)
                (push (- (float-time) start) warm)))
            (with-current-buffer view
              (goto-char (point-min))
              (search-forward "(defun mevedel-example-6")
              (unless (memq 'font-lock-keyword-face (ensure-list (get-text-property (- (point) 20) 'face)))
                (error "The emacs-lisp block is not fontified")))
            (mevedel-bench-describe "a Markdown answer of %.0f KB (30 sections: heading, 9 paragraphs with inline code, bold, italic, strike-through, a link and file names, an 8-item list, a fenced block in one of emacs-lisp, python, sh, js, c, diff), its turn drawn again by the view on `turn-end' (rendered: markup removed, file names checked), the blocks never fontified before, median of %d runs; their fontification by their modes then runs on the view's timer, in slices of at most 20 ms: %.1f ms in all; the same `turn-end' when the blocks were fontified as they closed while streaming: %.1f ms; with rendering off (`mevedel-markdown-enabled' nil: the text as written, file names marked, as before this change): %.1f ms"
                                    (/ (length answer) 1000.0) runs
                                    (* 1000 (mevedel-bench-percentile fontify 50))
                                    (* 1000 (mevedel-bench-percentile warm 50))
                                    (* 1000 (mevedel-bench-percentile raw 50)))
            (mevedel-bench-report "view-markdown-200kb" (* 1000 (mevedel-bench-percentile cold 50)) "ms")))
      (markdown-bench--close view))))

(defun markdown-bench--chunks (chat answer chunk-size)
  "Stream ANSWER into CHAT in chunks of CHUNK-SIZE; return each chunk's seconds."
  (let (times)
    (garbage-collect)
    (cl-loop for from from 0 below (length answer) by chunk-size
             for chunk = (substring answer from (min (length answer) (+ from chunk-size)))
             do (mevedel-bench-append chat (mevedel-bench-response chunk))
             (let ((start (float-time)))
               (mevedel-chat-notify chat 'text chunk)
               (push (- (float-time) start) times)))
    (mevedel-chat-notify chat 'turn-end)
    times))

(defun markdown-bench--stream (chunk-size)
  "Report each streamed chunk of CHUNK-SIZE characters after a 2 MB transcript."
  (let* ((view (markdown-bench--view))
         (chat (mevedel-view-chat view))
         (answer (markdown-bench--answer 30000 4))
         times raw)
    (unwind-protect
        (progn
          (mevedel-bench-fill chat 100 8)
          (mevedel-view-rerender view)
          (while (with-current-buffer view mevedel-view--pending)
            (accept-process-output nil 0.001))
          (let ((size (with-current-buffer (mevedel-chat-data-buffer chat) (buffer-size))))
            (mevedel-test-begin-turn chat "Explain the example functions.")
            (mevedel-chat-notify chat 'turn-start "Explain the example functions.")
            (setq raw (let ((mevedel-markdown-enabled nil))
                        (mevedel-bench-percentile (markdown-bench--chunks chat answer chunk-size) 50)))
            (mevedel-test-begin-turn chat "Explain the example functions again.")
            (mevedel-chat-notify chat 'turn-start "Explain the example functions again.")
            (setq times (markdown-bench--chunks chat answer chunk-size))
            (with-current-buffer view
              (goto-char (point-min))
              (unless (text-property-search-forward 'mevedel-markdown-block)
                (error "The streamed answer is not rendered")))
            (mevedel-bench-describe "an answer of %.0f KB (4 sections as in view-markdown-200kb, 4 code blocks) streamed in %d chunks of %d characters (the `text' event) after a transcript of %.1f MB (100 turns x 8 calls); per chunk: median; p99 %.2f ms, max %.2f ms (a code block's closing line: the block drawn again; its fontification waits for the view's timer); with rendering off (`mevedel-markdown-enabled' nil, the raw chunk appended as before this change): %.3f ms"
                                    (/ (length answer) 1000.0) (length times) chunk-size
                                    (/ size 1e6)
                                    (* 1000 (mevedel-bench-percentile times 99))
                                    (* 1000 (apply #'max times))
                                    (* 1000 raw))
            (mevedel-bench-report "view-stream-chunk" (* 1000 (mevedel-bench-percentile times 50)) "ms")))
      (markdown-bench--close view))))

(mevedel-core-ensure)
(markdown-bench--render 7)
(markdown-bench--stream 24)

;;; markdown-bench.el ends here
