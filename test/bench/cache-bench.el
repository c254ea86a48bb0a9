;;; cache-bench.el --- Prompt caching and building the next request  -*- lexical-binding: t; -*-

;;; Commentary:

;; Two figures of issue 38.  The cached share of input tokens over a
;; 30-call headless turn (`bin/mevedel -p') against the scripted model,
;; which applies each provider's published caching rules: Anthropic
;; (mevedel's breakpoints; peer: gptel's own `gptel-cache' t) and
;; OpenAI.  And the time to build the next request of a 200-turn,
;; 20 MB conversation: the turn's text read from the data buffer
;; (gptel's prompt buffer, the chat's transforms, gptel's parser), the
;; saved provider history put before it with the cache breakpoints,
;; and the request body encoded as curl is given it; peer: the same
;; request without a history, the whole conversation parsed and
;; encoded as before.

;;; Code:

(require 'mevedel-bench-lib)
(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-scripted-model)
(mevedel--load)

;;;; The cached share of a 30-call turn

(defun cache-bench--share (wire settings)
  "Run a 30-call headless turn on WIRE with SETTINGS; return the cached share."
  (mevedel-bench-reads-turn
   30 wire settings
   (lambda (server _seconds)
     (let ((read 0) (total 0))
       (dolist (request (with-temp-buffer
                          (call-process "curl" nil t nil "-s" "--noproxy" "127.0.0.1"
                                        (format "http://127.0.0.1:%d/requests"
                                                (mevedel-scripted-model-port server)))
                          (goto-char (point-min))
                          (json-parse-buffer :object-type 'alist :array-type 'list)))
         (let ((usage (alist-get 'usage request)))
           (if (eq wire 'openai)
               (setq read (+ read (alist-get 'cached_tokens
                                             (alist-get 'prompt_tokens_details usage)))
                     total (+ total (alist-get 'prompt_tokens usage)))
             (setq read (+ read (alist-get 'cache_read_input_tokens usage))
                   total (+ total (alist-get 'cache_read_input_tokens usage)
                            (alist-get 'cache_creation_input_tokens usage)
                            (alist-get 'input_tokens usage))))))
       (unless (> total 0) (error "Bench cache-share: no usage reported"))
       (/ (float read) total)))))

(let ((anthropic (cache-bench--share 'anthropic nil))
      (gptel-cache (cache-bench--share 'anthropic '((setq mevedel-gptel-prompt-cache nil
                                                          gptel-cache t))))
      (openai (cache-bench--share 'openai nil)))
  (mevedel-bench-describe "Anthropic wire: a headless turn (bin/mevedel -p) of 30 sequential Read calls of 60-line files against the scripted model simulating Anthropic's caching rules (breakpoints, 20-block look-back, 1024-token minimum, tokens = characters / 4); figure: cached share of all input tokens (cache reads / input + cache writes + cache reads); peer: the same turn with gptel's own gptel-cache t instead of mevedel's breakpoints; goal >= 0.9")
  (mevedel-bench-report "cache-share-30-calls" anthropic "share" "gptel-cache" gptel-cache)
  (mevedel-bench-describe "OpenAI wire: the same turn against the scripted model simulating OpenAI's automatic prefix caching (1024-token minimum, 128-token steps, per prompt_cache_key); figure: cached_tokens / prompt_tokens over all requests; goal >= 0.9")
  (mevedel-bench-report "cache-share-30-calls" openai "share"))

;;;; Building the next request of a 200-turn, 20 MB conversation

(defun cache-bench--request (chat)
  "Build CHAT's next request as a turn does, and its body; return the body.
The request is made as `mevedel-chat--start-turn' makes it, without
sending (gptel's dry run), then made ready to send as the turn's
state machine does on WAIT, then encoded as curl gets it.  Return
curl's config and the body's parts, in order: the history's encoding
is one.  Writing them to the file curl reads is sending, not timed."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (goto-char (point-max))
    (let* ((fsm (gptel-request nil
                  :buffer (current-buffer)
                  :position (point-max-marker)
                  :stream t
                  :context chat
                  :transforms (append gptel-prompt-transform-functions
                                      (list #'mevedel-chat--strip-render-data)
                                      mevedel-chat-prompt-transform-functions)
                  :fsm (mevedel-chat--make-fsm)
                  :dry-run t)))
      (mevedel-gptel--prepare-request fsm)
      (mevedel-gptel--request-parts #'gptel-curl--get-config (gptel-fsm-info fsm) "bench"))))

(let* ((root (file-name-as-directory (make-temp-file "mevedel-bench-request-" t)))
       (chat (mevedel-chat-get-create root))
       (buffer (mevedel-chat-data-buffer chat)))
  (unwind-protect
      (let (ours peer size body-size)
        (with-current-buffer buffer
          (setq-local gptel-backend (gptel-make-anthropic "bench request"
                                      :host "127.0.0.1:9" :protocol "http" :key "bench"
                                      :models '((bench-model :capabilities (tool-use cache))))
                      gptel-model 'bench-model
                      gptel-system-prompt (mevedel-chat--system-text chat)
                      gptel-tools (mevedel-chat-tools chat)))
        (mevedel-bench-fill chat 200 38)
        (setq size (with-current-buffer buffer (position-bytes (point-max))))
        ;; The conversation so far, as a finished turn leaves it: its
        ;; request's messages kept as the buffer's history.
        (let ((fsm (with-current-buffer buffer
                     (goto-char (point-max))
                     (gptel-request nil :buffer buffer :position (point-max-marker) :stream t
                                    :context chat :fsm (mevedel-chat--make-fsm) :dry-run t))))
          (mevedel-gptel--prepare-request fsm)
          (mevedel-gptel--record-history fsm))
        (unless (with-current-buffer buffer (mevedel-gptel--history-mark mevedel-gptel-history))
          (error "Bench request-build: no history was recorded"))
        (mevedel-test-begin-turn chat "Question 200: and where is it used?")
        (garbage-collect)
        (let ((samples nil))
          (dotimes (_ 20)
            (push (* 1000 (mevedel-bench-seconds
                            (setq body-size (apply #'+ (mapcar #'length
                                                                (cache-bench--request chat))))))
                  samples))
          (setq ours (mevedel-bench-percentile samples 50)))
        (unless (> body-size (/ size 2))
          (error "Bench request-build: the body (%d bytes) lacks the conversation" body-size))
        (mevedel-gptel-forget-history buffer)
        (let ((samples nil))
          (dotimes (_ 5)
            (garbage-collect)
            (push (* 1000 (mevedel-bench-seconds (cache-bench--request chat))) samples))
          (setq peer (mevedel-bench-percentile samples 50)))
        (mevedel-bench-describe "building the next Anthropic request of a %.1f MB conversation (200 turns x 38 calls, Grep 40 lines / Read 100 lines) with its saved provider history, as a turn does: gptel's dry run with the chat's transforms (only the text after the history's mark copied and parsed), the history put before it with the cache breakpoints, and the body encoded for curl (%.1f MB, the history's part encoded when it was saved and sent as it is); median of 20; peer: the same request with no history (the whole conversation copied, parsed and encoded, as before this change), median of 5; goal <= 5 ms"
                                (/ size 1e6) (/ body-size 1e6))
        (mevedel-bench-report "request-build-200-turns" ours "ms" "no-history" peer))
    (kill-buffer buffer)
    (delete-directory root t)))

;;; cache-bench.el ends here
