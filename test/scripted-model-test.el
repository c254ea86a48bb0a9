;;; scripted-model-test.el --- Tests of the scripted model server and its Lisp helper  -*- lexical-binding: t; -*-

;;; Commentary:

;; The server's own Python unit tests, run from ERT (python3 is
;; required: the tests fail without it), and the Lisp helper that starts
;; the server and builds gptel backends for it.

;;; Code:

(require 'mevedel-test-helpers)
(require 'mevedel-scripted-model)

(defun mevedel-scripted-model-test--python ()
  "Fail (never skip) when python3 is missing."
  (unless (executable-find "python3")
    (ert-fail "python3 is required but not installed")))

(ert-deftest mevedel-scripted-model:python-unit-tests-pass ()
  (mevedel-scripted-model-test--python)
  (with-temp-buffer
    (let* ((default-directory (expand-file-name "test/" mevedel-test-root))
           (status (call-process "python3" nil t nil "-m" "unittest" "-v"
                                 "test_scripted_model_server")))
      (unless (eql status 0)
        (ert-fail (format "Python tests failed (%s):\n%s" status (buffer-string))))
      (should (string-match-p "^OK$" (buffer-string)))
      (should (string-match-p "Ran [1-9][0-9]* tests" (buffer-string))))))

(ert-deftest mevedel-scripted-model:start-log-stop ()
  (mevedel-scripted-model-test--python)
  (let* ((script (make-temp-file "mevedel-script" nil ".json"
                                 "{\"steps\": [{\"text\": \"hi {{who}}\"}]}"))
         (server (mevedel-scripted-model-start script :vars '(("who" . "there")))))
    (unwind-protect
        (progn
          (should (mevedel-scripted-model-live-p server))
          (should (> (mevedel-scripted-model-port server) 0))
          (dolist (wire '(openai anthropic))
            (let ((backend (mevedel-scripted-model-backend server :wire wire :stream nil)))
              (should (equal (gptel-backend-protocol backend) "http"))
              (should (equal (gptel-backend-host backend)
                             (format "127.0.0.1:%d" (mevedel-scripted-model-port server))))
              (should (member "--noproxy" (gptel-backend-curl-args backend)))))
          (should-error (mevedel-scripted-model-backend server :wire 'gemini))
          ;; One request through curl, as gptel would send it.
          (with-temp-buffer
            (call-process "curl" nil t nil "-s" "--noproxy" "127.0.0.1"
                          "-H" "Content-Type: application/json"
                          "-d" "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"
                          (format "http://127.0.0.1:%d/v1/chat/completions"
                                  (mevedel-scripted-model-port server)))
            (should (string-match-p "hi there" (buffer-string))))
          (let ((log (mevedel-scripted-model-log server)))
            (should (= (length log) 1))
            (should (equal (alist-get 'wire (car log)) "openai"))
            (should (equal (alist-get 'model (alist-get 'body (car log))) "m")))
          (should-not (mevedel-scripted-model-mismatches server)))
      (mevedel-scripted-model-stop server)
      (delete-file script))
    (should-not (mevedel-scripted-model-live-p server))))

(ert-deftest mevedel-scripted-model:log-leaves-out-a-half-written-line ()
  "The log is read while the server appends to it: a last line without
its newline is an entry still being written, not a parse error."
  (mevedel-scripted-model-test--python)
  (let* ((script (make-temp-file "mevedel-script" nil ".json" "{\"steps\": [{\"text\": \"hi\"}]}"))
         (log-file (make-temp-file "mevedel-scripted-log" nil ".jsonl"
                                   "{\"n\": 1, \"path\": \"/v1/messages\"}\n"))
         (server (mevedel-scripted-model-start script :log-file log-file)))
    (unwind-protect
        (progn
          (write-region "{\"n\": 2, \"path\": \"/v1/chat/compl" nil log-file t 'silent)
          (should (equal (mapcar (lambda (e) (alist-get 'n e)) (mevedel-scripted-model-log server))
                         '(1)))
          (write-region "etions\"}\n" nil log-file t 'silent)
          (should (equal (mapcar (lambda (e) (alist-get 'path e)) (mevedel-scripted-model-log server))
                         '("/v1/messages" "/v1/chat/completions")))
          (with-temp-file log-file (insert "{\"n\": 1"))
          (should-not (mevedel-scripted-model-log server)))
      (mevedel-scripted-model-stop server)
      (delete-file script)
      (delete-file log-file))))

(ert-deftest mevedel-scripted-model:bad-script-is-a-clear-error ()
  (mevedel-scripted-model-test--python)
  (let ((script (make-temp-file "mevedel-script" nil ".json" "{\"steps\": []}")))
    (unwind-protect
        (should (string-match-p "did not start.*non-empty \"steps\" list"
                                (cadr (should-error (mevedel-scripted-model-start script)))))
      (delete-file script))))

(provide 'scripted-model-test)
;;; scripted-model-test.el ends here
