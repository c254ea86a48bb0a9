;;; roundtrip-e2e-test.el --- How a turn hands its requests to curl  -*- lexical-binding: t; -*-

;;; Commentary:

;; How a turn hands its requests to the network.  Over the module's
;; kept-alive client (`mevedel-gptel-transport' `native', the default):
;; no curl starts, a tool loop's requests extend each other byte for
;; byte, cancelling stops the request in the module at once, and a
;; refused connection fails the turn as curl's exit 7 would.  Through
;; curl (`curl'), with a tool loop whose requests outgrow a pipe (64
;; KiB): curl gets each request's body in a file, never on its standard
;; input, where Emacs would wait 20 ms each time it found the pipe
;; full; each file is gone once curl exits.  Every request after the
;; first goes to a curl started while the previous one ran, and no curl
;; outlives the turn.  A turn encodes its tools once.  Body files an
;; Emacs killed outright left are swept by the next Emacs that sends.

;;; Code:

(eval-and-compile
  (add-to-list 'load-path (file-name-directory (or load-file-name buffer-file-name))))
(require 'mevedel-e2e-helpers)

(defconst roundtrip-e2e--files
  (mevedel-e2e-numbered-files 2 500 (concat "line %d of file %d: " (make-string 60 ?x)))
  "Files of about 40 KB: a request after two Reads is larger than a pipe.")

(defun roundtrip-e2e--reads (count)
  "Return a script of COUNT sequential Reads of the files, then an answer."
  (append (cl-loop for n below count
                   collect (list (mevedel-e2e-read-call (% n 2))))
          '(((text . "Read them.")))))

(defun roundtrip-e2e--curls ()
  "Return the live curl processes gptel's requests use."
  (cl-remove-if-not (lambda (process)
                      (and (string-prefix-p "gptel-curl" (process-name process))
                           (process-live-p process)))
                    (process-list)))

(mevedel-e2e-deftest-matrix roundtrip-e2e:curl-reads-the-body-from-a-file
  "Requests larger than a pipe reach curl in files, deleted once curl exits."
  (wire stream)
  (let* ((sent nil)
         (record (lambda (process string)
                   (when (string-prefix-p "gptel-curl" (process-name process))
                     (push string sent))))
         (mevedel-gptel-transport 'curl)
         (run (unwind-protect
                  (progn (advice-add 'process-send-string :before record)
                         (mevedel-e2e-run :wire wire :stream stream :files roundtrip-e2e--files
                                          :prompt "Read the files." :timeout 60
                                          :steps (roundtrip-e2e--reads 4)))
                (advice-remove 'process-send-string record)))
         (raws (mapcar (lambda (r) (alist-get 'raw r)) (plist-get run :requests)))
         (files (delete-dups
                 (mapcar (lambda (config)
                           (and (string-match "^data-binary = \"@\\([^\"]+\\)\"$" config)
                                (match-string 1 config)))
                         sent))))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length raws) 5))
    (should (> (apply #'max (mapcar #'string-bytes raws)) (* 2 65536)))
    (mevedel-e2e-check-extends raws)
    ;; curl's standard input carries its config only, never a body.
    (should (= (length sent) 5))
    (should (< (apply #'max (mapcar #'string-bytes sent)) 2048))
    (should (= (length files) 5))
    (should (cl-every #'stringp files))
    (should-not (cl-some #'file-exists-p files))))

(mevedel-e2e-deftest-matrix roundtrip-e2e:requests-go-to-a-curl-already-started
  "Each request after a turn's first goes to a curl started before it; none outlives the turn."
  (wire stream)
  (let* ((started nil)
         (note (lambda (get-response fsm)
                 (let ((before (process-list)))
                   (prog1 (funcall get-response fsm)
                     (let ((process (car (cl-find-if (lambda (entry) (eq (cadr entry) fsm))
                                                     gptel--request-alist))))
                       (should process)
                       (push (and (memq process before) t) started))))))
         (mevedel-gptel-transport 'curl)
         (run (unwind-protect
                  (progn (advice-add 'gptel-curl-get-response :around note)
                         (mevedel-e2e-run :wire wire :stream stream :files roundtrip-e2e--files
                                          :prompt "Read the files." :timeout 60
                                          :steps (roundtrip-e2e--reads 3)))
                (advice-remove 'gptel-curl-get-response note))))
    (should (eq (plist-get run :outcome) 'done))
    (should (equal (reverse started) '(nil t t t)))
    (should-not (roundtrip-e2e--curls))))

(mevedel-e2e-deftest-matrix roundtrip-e2e:tools-encoded-once-per-turn
  "A turn encodes its tools for its first request; the next ones reuse that."
  (wire stream)
  (let* ((encoded 0)
         (key (if (eq wire 'anthropic) "\"input_schema\":" "\"parameters\":"))
         (count (lambda (json)
                  (when (string-search key json) (cl-incf encoded))
                  json))
         (run (unwind-protect
                  (progn (advice-add 'json-serialize :filter-return count)
                         (mevedel-e2e-run :wire wire :stream stream :files roundtrip-e2e--files
                                          :prompt "Read the files." :timeout 60
                                          :steps (roundtrip-e2e--reads 3)))
                (advice-remove 'json-serialize count)))
         (raws (mapcar (lambda (r) (alist-get 'raw r)) (plist-get run :requests))))
    (should (eq (plist-get run :outcome) 'done))
    (should (= (length raws) 4))
    ;; Every request carries the tools, byte for byte the same.
    (should (cl-every (lambda (raw) (string-search key raw)) raws))
    (mevedel-e2e-check-extends raws)
    (should (= encoded 1))))

;;;; The module's client

(defun roundtrip-e2e--noting-requests (function)
  "Call FUNCTION with a function returning the module requests started meanwhile.
Also return, with them, the curls started: (RESULT IDS CURLS)."
  (let* ((ids nil)
         (curls 0)
         (note (lambda (id) (push id ids) id))
         (count (lambda (&rest args)
                  (when (string-prefix-p "gptel-curl" (or (plist-get args :name) ""))
                    (cl-incf curls)))))
    (unwind-protect
        (progn (advice-add 'mevedel-core-http-request :filter-return note)
               (advice-add 'make-process :before count)
               (let ((result (funcall function (lambda () ids))))
                 (list result (reverse ids) curls)))
      (advice-remove 'mevedel-core-http-request note)
      (advice-remove 'make-process count))))

(mevedel-e2e-deftest-matrix roundtrip-e2e:native-requests-start-no-curl
  "A tool loop's requests go over the module's client: no curl, bodies extended."
  (wire stream)
  (pcase-let* ((`(,run ,ids ,curls)
                (roundtrip-e2e--noting-requests
                 (lambda (_ids)
                   (mevedel-e2e-run :wire wire :stream stream :files roundtrip-e2e--files
                                    :prompt "Read the files, \u00e9t\u00e9 \U0001F600." :timeout 60
                                    :steps (roundtrip-e2e--reads 4)))))
               (raws (mapcar (lambda (r) (alist-get 'raw r)) (plist-get run :requests))))
    (should (eq (plist-get run :outcome) 'done))
    (should (string-search "Read them." (plist-get run :transcript)))
    (should (= (length ids) 5))
    (should (= curls 0))
    (should (= (length raws) 5))
    ;; Non-ASCII text arrives as the UTF-8 it is.
    (should (string-search "\u00e9t\u00e9 \U0001F600" (decode-coding-string (car raws) 'utf-8)))
    (mevedel-e2e-check-extends raws)
    (should (= (hash-table-count mevedel-core--http-functions) 0))))

(ert-deftest roundtrip-e2e:cancel-mid-stream-stops-the-native-request-at-once ()
  "C-c C-k while the answer streams ends the turn and the module's request."
  (let ((cancelled nil)
        (words (mapconcat #'identity (make-list 60 "streaming") " ")))
    (pcase-let ((`(,run ,ids ,_)
                 (roundtrip-e2e--noting-requests
                  (lambda (ids)
                    (mevedel-e2e-run
                     :wire 'anthropic :stream t :prompt "Hello" :timeout 20 :delay 0.1
                     :steps `(((text . ,words)))
                     :during (lambda (_chat view)
                               (when (and (not cancelled) (funcall ids)
                                          (string-search "streaming"
                                                         (mevedel-e2e-transcript-text view)))
                                 (setq cancelled (float-time))
                                 (with-current-buffer view (mevedel-view-abort)))))))))
      (should cancelled)
      (should (plist-get run :outcome))
      (should-not (eq (plist-get run :outcome) 'done))
      (should (< (- (float-time) cancelled) 3))
      (should-not (string-search words (plist-get run :transcript)))
      (should (= (length ids) 1))
      ;; The module had already let go of it.
      (should-not (mevedel-core-http-cancel (car ids)))
      (should (= (hash-table-count mevedel-core--http-functions) 0)))))

(ert-deftest roundtrip-e2e:a-refused-connection-fails-as-curl-s-exit-7 ()
  "Nothing listening: the turn fails, naming the address, no retry left."
  (let* ((port (mevedel-e2e-free-port))
         (mevedel-recovery-max-retries 0)
         (run (mevedel-e2e-run
               :wire 'openai :stream t :prompt "Hello" :timeout 20
               :steps '(((text . "Never sent.")))
               :setup (lambda (chat)
                        (setf (mevedel-chat-backend chat)
                              (gptel-make-openai "nobody listening"
                                :host (format "127.0.0.1:%d" port)
                                :protocol "http" :endpoint "/v1/chat/completions"
                                :stream t :key "scripted" :models '(scripted-model)
                                :curl-args '("--noproxy" "127.0.0.1")))))))
    (should (eq (plist-get run :outcome) 'error))
    (should (string-match-p
             (format "could not connect to 127.0.0.1:%d: connection refused .*(code 7)" port)
             (plist-get run :transcript)))))


(ert-deftest roundtrip-e2e:bodies-of-a-killed-emacs-are-swept ()
  "Body files an Emacs killed outright left are deleted by the next request's."
  (let* ((temporary-file-directory (file-name-as-directory
                                    (make-temp-file "mevedel-roundtrip-tmp-" t)))
         (dead (let ((process (make-process :name "roundtrip-dead" :command '("true")
                                            :noquery t)))
                 (while (process-live-p process) (accept-process-output process 0.05))
                 (process-id process)))
         (left (make-temp-file (mevedel-gptel--body-prefix dead)))
         (mine (make-temp-file (mevedel-gptel--body-prefix (emacs-pid))))
         (mevedel-gptel--swept nil)
         (mevedel-gptel--body-files nil)
         (info (list :mevedel-attempt t)))
    (unwind-protect
        (let* ((writes 0)
               (count (lambda (&rest _) (cl-incf writes)))
               (file (unwind-protect
                         (progn (advice-add 'write-region :before count)
                                (mevedel-gptel--write-body info '("{\"a\":" "1}")))
                       (advice-remove 'write-region count))))
          (should-not (file-exists-p left))
          (should (file-exists-p mine))
          (should (equal (with-temp-buffer (insert-file-contents-literally file) (buffer-string))
                         "{\"a\":1}"))
          ;; A small body is written at once, to a file only its user reads.
          (should (= writes 1))
          (should (= (file-modes file) #o600))
          (mevedel-gptel--drop-body info)
          (should-not (file-exists-p file))
          ;; Large parts are written one by one.
          (let* ((mevedel-gptel--join-limit 4)
                 (file (mevedel-gptel--write-body info '("{\"a\":" "\"\u00e9\"}"))))
            (should (equal (with-temp-buffer
                             (set-buffer-multibyte nil)
                             (insert-file-contents-literally file)
                             (buffer-string))
                           (encode-coding-string "{\"a\":\"\u00e9\"}" 'utf-8)))
            (mevedel-gptel--drop-body info)))
      (delete-directory temporary-file-directory t))))

(ert-deftest roundtrip-e2e:a-request-the-module-cannot-start-fails-once ()
  "The module refusing a request fails the turn with a message, not a hang."
  (let* ((mevedel-recovery-max-retries 0)
         (run (cl-letf (((symbol-function 'mevedel-core-http-request)
                         (lambda (&rest _) (error "No client here"))))
                (mevedel-e2e-run :wire 'anthropic :stream t :prompt "Hello" :timeout 20
                                 :steps '(((text . "Never sent.")))))))
    (should (eq (plist-get run :outcome) 'error))
    (should (string-match-p "the request to 127\\.0\\.0\\.1:[0-9]+ failed (code 2)"
                            (plist-get run :transcript)))
    (should-not (string-search "Never sent." (plist-get run :transcript)))))

;;; roundtrip-e2e-test.el ends here
