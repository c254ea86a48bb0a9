;;; shared-board-browser-e2e-test.el --- A whiteboard page in a real browser  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; A shared whiteboard served by the module's host and opened in Debian's
;; Chromium, headless, driven by playwright-core
;; (shared-board-browser.mjs): the model's edit through the seam appears
;; in the page's scene with its highlight in the DOM, a rectangle drawn
;; by clicks reaches the board's overview, as does one drawn just before
;; the page is left, an open page draws `view.png', and a wrong token or
;; Origin is refused.  A missing Chromium or npm package fails the
;; test: it never skips.

;;; Code:

(require 'ert)
(require 'json)
(require 'mevedel-test-helpers)
(require 'mevedel-core)

(defconst shared-browser--driver
  (expand-file-name "test/e2e/shared-board-browser.mjs" mevedel-test-root)
  "The browser driver script.")

(defun shared-browser--hash (board id)
  "Return the hash of element ID in BOARD's overview."
  (let ((overview (mevedel-core-shared-board-overview board)))
    (should (string-match (format "^\\([0-9a-f]\\{8\\}\\) %s " id) overview))
    (match-string 1 overview)))

(defun shared-browser--await (request)
  "Start REQUEST (a function of a callback) and return its `ok' value."
  (let (result)
    (funcall request (lambda (status value) (setq result (cons status value))))
    (with-timeout (20 (ert-fail "no reply"))
      (while (not result) (accept-process-output nil 0.05)))
    (should (eq (car result) 'ok))
    (cdr result)))

(ert-deftest shared-board-browser-edits-flow-both-ways ()
  (let ((modules (expand-file-name ".deps/shared/npm/node_modules" mevedel-test-root)))
    (should (file-executable-p "/usr/bin/chromium"))
    (should (file-directory-p (expand-file-name "playwright-core" modules)))
    (should (executable-find "node"))
    (mevedel-core-ensure)
    (let* ((board (mevedel-core-shared-board-open '(:id "browser" :key "test/browser")))
           (profile (make-temp-file "mevedel-chromium" t))
           (stderr (generate-new-buffer " *shared-browser-stderr*"))
           (previous (gethash 'shared-changed mevedel-core--event-handlers))
           (changed nil)
           (out "")
           (output (lambda () out))
           proc)
      (mevedel-core-register-event-handler
       'shared-changed (lambda (data) (push data changed)))
      (unwind-protect
          (progn
            (mevedel-core-shared-board-edit
             board "[{\"op\":\"add\",\"element\":{\"type\":\"rectangle\",\"id\":\"model1\",\"x\":10,\"y\":10,\"width\":120,\"height\":60}}]"
             "model")
            (setq proc (make-process
                        :name "shared-browser" :noquery t :connection-type 'pipe
                        :command (list "node" shared-browser--driver modules
                                       (mevedel-core-shared-board-serve board) profile)
                        :stderr stderr
                        :filter (lambda (_ s) (setq out (concat out s)))))
            (process-put proc 'stderr stderr)
            (mevedel-test-browser-wait proc output "^\\(READY\\)$")
            (should (string-match-p ", 1 page(s) open"
                                    (mevedel-core-shared-board-overview board)))
            ;; The model's edit, through the seam, reaches the page.
            (let ((result (mevedel-core-shared-board-edit
                           board
                           (json-serialize
                            (vector `((op . "update")
                                      (hash . ,(shared-browser--hash board "model1"))
                                      (set . ((x . 640) (backgroundColor . "#ffc9c9"))))))
                           "model")))
              (should (eq (plist-get result :status) 'ok)))
            (should (equal (shared-browser--await
                            (lambda (cb) (mevedel-core-shared-board-synced board cb)))
                           '(:pages 1)))
            (process-send-string proc "EDITED model1\n")
            (mevedel-test-browser-wait proc output "^SEEN \\(model1\\)$")
            ;; An open page draws view.png with Excalidraw itself.
            (let ((png (shared-browser--await
                        (lambda (cb) (mevedel-core-shared-board-render board cb)))))
              (should (eq (plist-get png :source) 'page))
              (should (> (plist-get png :width) 100))
              (should (string-prefix-p "iVBORw0KGgo" (plist-get png :png))))
            ;; A rectangle drawn by clicks reaches the board.
            (let ((drawn (mevedel-test-browser-wait proc output "^DRAWN \\([A-Za-z0-9_-]+\\)$")))
              (with-timeout (20 (ert-fail (list "no shared-changed event for" drawn changed)))
                (while (not (cl-some (lambda (d) (member drawn (plist-get (cdr d) :ids))) changed))
                  (accept-process-output nil 0.05)))
              (process-send-string proc "CHECKED\n")
              (should (equal (car (car changed)) "test/browser"))
              (should (string-match-p (format "^[0-9a-f]\\{8\\} %s rectangle " (regexp-quote drawn))
                                      (mevedel-core-shared-board-overview board)))
              (should (string-match-p "user: drew" (mevedel-core-shared-board-history board)))
              ;; The page giving the model's element its z-order index is
              ;; no edit of the user's.
              (should-not (cl-some (lambda (d) (member "model1" (plist-get (cdr d) :ids)))
                                   changed))
              (should-not (string-match-p "user: .*model1"
                                          (mevedel-core-shared-board-history board))))
            ;; An edit made just before the page is left reaches the
            ;; board: the page sends it without waiting out its debounce.
            (let ((left (mevedel-test-browser-wait proc output "^LEFT \\([A-Za-z0-9_-]+\\)$")))
              (with-timeout (20 (ert-fail (list "the edit made before leaving is lost" left changed)))
                (while (not (cl-some (lambda (d) (member left (plist-get (cdr d) :ids))) changed))
                  (accept-process-output nil 0.05)))
              (should (string-match-p (format "^[0-9a-f]\\{8\\} %s rectangle " (regexp-quote left))
                                      (mevedel-core-shared-board-overview board))))
            ;; Strangers are refused; the page's own origin is not.
            (should (equal (mevedel-test-browser-wait proc output "^REFUSED token \\([0-9]+\\)$") "403"))
            (should (equal (mevedel-test-browser-wait proc output "^REFUSED origin \\([0-9]+\\)$") "403"))
            (should (equal (mevedel-test-browser-wait proc output "^ACCEPTED origin \\([0-9]+\\)$") "101"))
            (mevedel-test-browser-wait proc output "^\\(DONE\\)$")
            (with-timeout (10 (ert-fail "the browser driver did not exit"))
              (while (process-live-p proc) (accept-process-output nil 0.05)))
            (should (eq (process-exit-status proc) 0)))
        (mevedel-core-register-event-handler 'shared-changed previous)
        (when (process-live-p proc)
          (delete-process proc)
          ;; Chromium leaves its profile when its driver is gone.
          (sleep-for 1))
        (mevedel-core-shared-board-close board)
        (kill-buffer stderr)
        (delete-directory profile t)))))

(provide 'shared-board-browser-e2e-test)
;;; shared-board-browser-e2e-test.el ends here
