;;; cards-bench.el --- A permission card of a long Bash command  -*- lexical-binding: t; -*-

;;; Commentary:

;; A 40-line Bash command in `ask' mode, from its permission decision
;; (`mevedel-permissions-decide-call', the command's analysis included)
;; through the session's prompter (the cards planned, what each command
;; does to files asked of the module, the card drawn in the view's live
;; zone, point moved to it) until the card is in the view.  Every
;; command is new (a distinct trailing comment), so no analysis is
;; remembered; taking the card away again is not timed.

;;; Code:

(require 'mevedel)
(require 'mevedel-view)
(require 'mevedel-bench-lib)
(require 'mevedel-test-helpers)

(defconst cards-bench--lines
  ["cargo build --release 2>&1 | tail -20"
   "rm -rf target/tmp && mkdir -p target/tmp"
   "cp -r assets target/tmp/"
   "grep -rn \"TODO\" src | sort | uniq -c | sort -rn | head -20"
   "git status --short"
   "sed -i 's/old/new/g' src/lib.rs"
   "find . -name '*.rs' -newer Cargo.toml | xargs wc -l > counts.txt"
   "cd build && make -j4"]
  "The commands the long command is made of, in turn.")

(defun cards-bench--command (n)
  "Return the Nth 40-line command: `cards-bench--lines' in turn, then a mark."
  (concat (mapconcat (lambda (i) (aref cards-bench--lines (% i (length cards-bench--lines))))
                     (number-sequence 0 39) "\n")
          (format " # %d" n)))

(let* ((root (file-name-as-directory (make-temp-file "mevedel-cbench-" t)))
       (mevedel-save-sessions nil)
       (mevedel-permissions-rules nil)
       (view (mevedel root))
       (chat (mevedel-view-chat view))
       (session (mevedel-chat-session chat))
       (bash (mevedel-tool-get "Bash"))
       (runs 200)
       (times nil)
       (drawn nil))
  (switch-to-buffer view)
  (setf (mevedel-chat-permission-mode chat) 'ask
        (mevedel-chat-turn chat) 'bench-turn)
  (unwind-protect
      (dotimes (i (+ runs 10))
        (let* ((context (list :tool bash :session session :tool-use-id "toolu_bench"
                              :data-buffer (mevedel-chat-data-buffer chat)
                              :args (list :command (cards-bench--command i)
                                          :description "bench")))
               (start (float-time))
               (verdict (mevedel-permissions-decide-call context session))
               (withdraw (progn
                           (unless (eq verdict 'ask)
                             (error "Bench card-render: unexpected verdict %S" verdict))
                           (funcall (mevedel-session-prompter session) context #'ignore)))
               (elapsed (- (float-time) start)))
          (unless (and (eq (mevedel-interaction-kind (mevedel-interaction-at)) 'permission)
                       (string-search "… 20 more lines" (buffer-string))
                       (string-search "rm → deletes: target/tmp" (buffer-string)))
            (error "Bench card-render: the card was not drawn as expected"))
          (setq drawn t)
          ;; The first runs warm the module and the faces up.
          (when (>= i 10) (push elapsed times))
          (funcall withdraw)))
    (setf (mevedel-chat-turn chat) nil)
    (kill-buffer view)
    (kill-buffer (mevedel-chat-data-buffer chat))
    (delete-directory root t))
  (unless drawn (error "Bench card-render: no card drawn"))
  (mevedel-bench-describe "a Bash call of a 40-line command (8 commands in turn: cargo, rm, cp, grep pipeline, git status, sed -i, find | xargs > file, cd && make), never seen before, in `ask' mode with no rules: the permission decision, then the prompter (cards planned, each command's reads/writes/deletes asked of the module, the card drawn in the view, point moved to it), until the card shows its first 15 and last 5 lines; median of %d runs; goal <= 10 ms" runs)
  (mevedel-bench-report "card-render-multiline-bash"
                        (* 1e3 (mevedel-bench-percentile times 50)) "ms"))

;;; cards-bench.el ends here
