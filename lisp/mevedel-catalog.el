;;; mevedel-catalog.el --- The one tool catalog every entry point loads  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Loading this file loads every tool family and what their sessions
;; rely on (the child agents' runtime, checkpoints, Plan mode, saving,
;; resuming, compaction), so a session offers the same tools, keeps the
;; same policy and is saved and compacted alike however it was
;; started: M-x mevedel, `mevedel-new', a resume from the sessions list,
;; `make run', bin/mevedel, or a child agent of any of them.
;; Every entry point requires it, and `mevedel-chat-get-create' refuses
;; to open a session before it is loaded.
;;
;; A tool that cannot work in some context (Ask or ProposePlan with
;; nobody to answer, headless) is still offered there and answers with
;; a tool error saying why.  Which tools are native, standalone-only or
;; limited by Plan is each declaration's business
;; (`mevedel-define-tool'), never a list here.
;;
;; This file adds no tool and no behaviour of its own; the views and
;; commands of M-x mevedel are loaded by mevedel.el.

;;; Code:

(require 'mevedel-tool-fs)
(require 'mevedel-tool-exec)
(require 'mevedel-tool-patch)
(require 'mevedel-tool-eval)
(require 'mevedel-tool-emacs)
(require 'mevedel-tool-screenshot)
(require 'mevedel-tool-code)
(require 'mevedel-ptc)
(require 'mevedel-mcp)
(require 'mevedel-mcp-mentions)
(require 'mevedel-web)
(require 'mevedel-tool-skill)
(require 'mevedel-tool-ask)
(require 'mevedel-tool-tasks)
(require 'mevedel-tool-plan)
(require 'mevedel-tool-goal)
(require 'mevedel-tool-editing)
(require 'mevedel-tool-agent)
(require 'mevedel-mailbox)
(require 'mevedel-checkpoint)
(require 'mevedel-save)
(require 'mevedel-resume)
(require 'mevedel-compaction)
(require 'mevedel-acp)
(require 'mevedel-usage)

(provide 'mevedel-catalog)
;;; mevedel-catalog.el ends here
