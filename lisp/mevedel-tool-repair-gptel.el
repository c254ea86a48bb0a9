;;; mevedel-tool-repair-gptel.el --- Keep JSON null, false, {} and [] apart in gptel  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; gptel decodes tool-call arguments with `json-parse-string' and
;; :null-object nil, so JSON null and an empty object both become nil
;; and schema validation could not tell them apart.  This temporary
;; bridge covers every gptel backend in one place:
;;
;; - while a backend parses a provider response (`gptel--parse-response'
;;   and `gptel-curl--parse-stream'), a `json-parse-string' call asking
;;   for :null-object nil gets :null instead, so null survives as :null;
;; - before gptel runs the captured calls (`gptel--handle-tool-use'), the
;;   remaining nils nested in each call's :args, which can now only be
;;   decoded {}, become explicit empty objects
;;   (`mevedel-tool-json-empty-object').
;;
;; false is already :json-false and [] a vector.  The same advice binds
;; `mevedel-tool-repair-gptel-context' to the request's backend and model
;; for the repair log.

;;; Code:

(require 'cl-lib)
(require 'mevedel-tool-repair)

(declare-function gptel-fsm-info "gptel-request" (fsm))
(declare-function gptel-backend-name "gptel-request" (backend))

(defvar mevedel-tool-repair-gptel-context nil
  "Plist (:backend NAME :model NAME) of the gptel request running tools.")

(defvar mevedel-tool-repair-gptel--decoding nil
  "Non-nil while a gptel backend parses a provider response.")

(defun mevedel-tool-repair-gptel--json-parse-string (parse string &rest args)
  "Call PARSE on STRING and ARGS, keeping JSON null distinct while decoding."
  (if (and mevedel-tool-repair-gptel--decoding
           (plist-member args :null-object)
           (null (plist-get args :null-object)))
      (apply parse string (plist-put (copy-sequence args) :null-object :null))
    (apply parse string args)))

(defun mevedel-tool-repair-gptel--while-decoding (parse &rest args)
  "Call the gptel response parser PARSE with ARGS, null kept distinct."
  (let ((mevedel-tool-repair-gptel--decoding t))
    (apply parse args)))

(defun mevedel-tool-repair-gptel-restore-call (tool-call)
  "Make decoded empty objects in TOOL-CALL's :args explicit, in place.
TOOL-CALL is gptel's plist (:name NAME :args ARGS ...).  Idempotent."
  (when (plist-get tool-call :args)
    (plist-put tool-call :args
               (mevedel-tool-json-restore-empty-objects (plist-get tool-call :args))))
  tool-call)

(defun mevedel-tool-repair-gptel--handle-tool-use (handle fsm)
  "Make decoded empty objects explicit in FSM, then apply HANDLE to FSM."
  (let* ((info (gptel-fsm-info fsm))
         (backend (plist-get info :backend))
         (mevedel-tool-repair-gptel-context
          (list :backend (and backend (gptel-backend-name backend))
                :model (and (plist-get info :model)
                            (format "%s" (plist-get info :model))))))
    (dolist (call (plist-get info :tool-use))
      (unless (plist-get call :result)
        (mevedel-tool-repair-gptel-restore-call call)))
    (funcall handle fsm)))

(defun mevedel-tool-repair-gptel-install ()
  "Install the bridge (idempotent)."
  (advice-add 'json-parse-string :around #'mevedel-tool-repair-gptel--json-parse-string)
  (advice-add 'gptel--parse-response :around #'mevedel-tool-repair-gptel--while-decoding)
  (advice-add 'gptel-curl--parse-stream :around #'mevedel-tool-repair-gptel--while-decoding)
  (advice-add 'gptel--handle-tool-use :around #'mevedel-tool-repair-gptel--handle-tool-use))

(defun mevedel-tool-repair-gptel-uninstall ()
  "Remove the bridge."
  (advice-remove 'json-parse-string #'mevedel-tool-repair-gptel--json-parse-string)
  (advice-remove 'gptel--parse-response #'mevedel-tool-repair-gptel--while-decoding)
  (advice-remove 'gptel-curl--parse-stream #'mevedel-tool-repair-gptel--while-decoding)
  (advice-remove 'gptel--handle-tool-use #'mevedel-tool-repair-gptel--handle-tool-use))

(provide 'mevedel-tool-repair-gptel)
;;; mevedel-tool-repair-gptel.el ends here
