;;; mevedel-tool-fs-registration.el --- Register Read, Glob and Grep  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; Declares the filesystem tools with `mevedel-define-tool'.  The
;; handlers live in mevedel-tool-fs.el, which is loaded on the first
;; call, not by registration.
;;
;; Handlers deliver the canonical result plist (:result TEXT [:status
;; error]); the registered functions hand a dispatcher the legacy shape
;; it also understands: the text, with errors as "Error: ..." strings.
;;
;; `mevedel-tool-fs-prepare-pipeline-args' fills the pipeline's
;; resource-preparation seam: ordinary paths are normalised as before,
;; and a resource address is prepared (validated, contained, resolved
;; to an opaque attempt) before permission.

;;; Code:

(require 'cl-lib)
(require 'mevedel-tool-registry)
(require 'mevedel-session)

(autoload 'mevedel-tool-fs-read "mevedel-tool-fs")
(autoload 'mevedel-tool-fs-glob "mevedel-tool-fs")
(autoload 'mevedel-tool-fs-grep "mevedel-tool-fs")
(autoload 'mevedel-tool-fs-prepare-args "mevedel-tool-fs")
(declare-function mevedel-pipeline-normalize-paths "mevedel-pipeline" (context))

;;;; Descriptions

(defconst mevedel-tool-fs-read-description
  "Read a text file, a directory listing, or a resource address, with numbered lines.

When to use: you know the file or resource you need (a source file,
work://notes.md, artifact://tool-results/..., mevedel://tools/files.md).

When NOT to use: to find files by name (Glob) or text inside files (Grep).

How to use: file_path is a path or a scheme:// address.  Pages show
`limit' lines (default 2000) from line `offset' (from 1); lines over
2000 characters are cut with an exact char_offset continuation.  An
offset past the last line is an error naming the lines that exist and
a working last-page call.  Directories and bare addresses (work://,
artifact://, mevedel://, skill://, memory://root) list their entries.
Images and PDFs are not shown yet.  Manual: Read mevedel://tools/files.md."
  "Model-facing description of Read.")

(defconst mevedel-tool-fs-glob-description
  "List files whose path matches a glob pattern, sorted by path.

When to use: find files by name or location, e.g. \"**/*.el\" or \"src/**/*.rs\".

When NOT to use: to search file contents (Grep).

How to use: pattern is relative to path (default: the working directory;
a resource address works too).  A pattern without / matches file names at
any depth; one with / is anchored at path.  Hidden files are listed,
ignore files do not apply, VCS directories and symbolic links are
skipped; absolute patterns and .. are refused.  A search running past the
time limit returns labelled partial results.  Manual: Read
mevedel://tools/files.md."
  "Model-facing description of Glob.")

(defconst mevedel-tool-fs-grep-description
  "Search file contents with a regular expression (ripgrep syntax).

When to use: find where something is defined or used, which files mention
it, or how often it occurs.

When NOT to use: to list files by name (Glob) or to read a known file (Read).

How to use: pattern is required.  output_mode is files_with_matches
(default), content (path:line:text) or count.  Narrow with path (a file,
directory or resource address), glob (\"*.el\") or type (\"rust\").  In
content mode: -A/-B/-C context, -n line numbers (default on), -i ignores
case, multiline lets patterns span lines.  head_limit (default 250, 0 for
all) and offset page the output lines; an offset past the last line is
an error, not \"no matches\".  Hidden files are searched, .gitignore is
respected while walking, VCS directories are skipped.  Past the time limit
you get labelled partial results: narrow path, glob or type.  Manual:
Read mevedel://tools/files.md."
  "Model-facing description of Grep.")

(defun mevedel-tool-fs-registration--text (result)
  "Return RESULT, a handler's result plist, as dispatchers expect it."
  (let ((text (plist-get result :result)))
    (if (eq (plist-get result :status) 'error)
        (concat "Error: " text)
      text)))

(defun mevedel-tool-fs-registration--adapt (handler)
  "Return an asynchronous tool function running HANDLER."
  (lambda (callback args)
    (funcall handler
             (lambda (result) (funcall callback (mevedel-tool-fs-registration--text result)))
             args)))

(defun mevedel-tool-fs-prepare-pipeline-args (context)
  "Return CONTEXT's arguments with paths normalised and addresses prepared.
CONTEXT is the pipeline's call context (:tool :args :session
:workspace ...); the call's session owns its work:// and artifact://
resources.  Read, Glob and Grep get their resource address prepared for
their own operation; a malformed address, unsupported operation or
containment failure signals, which ends the call before permission."
  (let* ((mevedel-session-current (or (plist-get context :session) mevedel-session-current))
         (args (if (fboundp 'mevedel-pipeline-normalize-paths)
                   (mevedel-pipeline-normalize-paths context)
                 (plist-get context :args)))
         (tool (plist-get context :tool))
         (name (and tool (mevedel-tool-name tool))))
    (if (member name '("Read" "Glob" "Grep"))
        (mevedel-tool-fs-prepare-args name args)
      args)))

(mevedel-define-tool "Read"
  :category "filesystem"
  :description mevedel-tool-fs-read-description
  :args ((file_path path-or-resource :required
                    "File, directory or resource address (scheme://...) to read."
                    :access read)
         (offset integer :optional "First line to show, from 1 (default 1).")
         (limit integer :optional "How many lines to show (default 2000).")
         (char_offset integer :optional
                      "Characters to skip in line OFFSET; shows only that line (for very long lines)."))
  :function (mevedel-tool-fs-registration--adapt #'mevedel-tool-fs-read)
  :async-p t
  :read-only-p t
  :get-path (lambda (args) (plist-get args :file_path)))

(mevedel-define-tool "Glob"
  :category "filesystem"
  :description mevedel-tool-fs-glob-description
  :args ((pattern string :required "Glob pattern, relative to path (e.g. \"**/*.el\").")
         (path path-or-resource :optional
               "Directory or resource address to search (default: the working directory)."
               :access read))
  :function (mevedel-tool-fs-registration--adapt #'mevedel-tool-fs-glob)
  :async-p t
  :read-only-p t
  :max-result-size 30000
  :get-path (lambda (args) (plist-get args :path))
  :get-pattern (lambda (args) (plist-get args :pattern)))

(mevedel-define-tool "Grep"
  :category "filesystem"
  :description mevedel-tool-fs-grep-description
  :args ((pattern string :required "Regular expression to search for.")
         (path path-or-resource :optional
               "File, directory or resource address to search (default: the working directory)."
               :access read)
         (glob string :optional "Only search files matching this glob (e.g. \"*.el\").")
         (type string :optional "Only search files of this ripgrep type (e.g. \"rust\").")
         (output_mode string :optional "What to show (default files_with_matches)."
                      :enum ("content" "files_with_matches" "count"))
         (-A integer :optional "Lines of context after each match (content mode).")
         (-B integer :optional "Lines of context before each match (content mode).")
         (-C integer :optional "Lines of context around each match (content mode).")
         (context integer :optional "Same as -C.")
         (-i boolean :optional "Ignore case.")
         (-n boolean :optional "Show line numbers in content mode (default true).")
         (multiline boolean :optional "Let . match newlines and patterns span lines.")
         (head_limit integer :optional "Show at most this many output lines (default 250; 0: all).")
         (offset integer :optional "Skip this many output lines first (default 0)."))
  :function (mevedel-tool-fs-registration--adapt #'mevedel-tool-fs-grep)
  :async-p t
  :read-only-p t
  :max-result-size 20000
  :get-path (lambda (args) (plist-get args :path))
  :get-pattern (lambda (args) (plist-get args :pattern)))

(with-eval-after-load 'mevedel-pipeline
  (defvar mevedel-pipeline-prepare-resources-function)
  (setq mevedel-pipeline-prepare-resources-function #'mevedel-tool-fs-prepare-pipeline-args))

(provide 'mevedel-tool-fs-registration)
;;; mevedel-tool-fs-registration.el ends here
