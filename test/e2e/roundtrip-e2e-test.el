;;; roundtrip-e2e-test.el --- How a turn hands its requests to curl  -*- lexical-binding: t; -*-

;;; Commentary:

;; A tool loop against the scripted model whose requests outgrow a
;; pipe (64 KiB).  curl gets each request's body in a file, never on
;; its standard input, where Emacs would wait 20 ms each time it found
;; the pipe full; each file is gone once curl exits.  Every request
;; after the first goes to a curl started while the previous one ran,
;; and no curl outlives the turn.  A turn encodes its tools once.  Body
;; files an Emacs killed outright left are swept by the next Emacs that
;; sends.

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

;;; roundtrip-e2e-test.el ends here

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
