;;; mevedel-tool-editing.el --- SharedCreate, SharedEdit, SharedSaveImage and shared:// views  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The shared editing family: the declarations of SharedCreate,
;; SharedEdit and SharedSaveImage (specialists in the `editing' group),
;; their renderers, and the entry points through which Read and Grep
;; see shared:// addresses (`mevedel-tool-editing-view') and the
;; edited-file reminder sees an item the model read.  Every handler and
;; view loads the host, mevedel-shared.el, on its first call: a session
;; that never shares an item never loads it.
;;
;; The tools change session-owned files (shared/ in the session's
;; storage), so the pipeline treats them as edits: permission judges
;; those files (inside the workspace), the checkpoint step keeps their
;; before-state and a rewind restores them.  In `ask' mode the first
;; call on an item asks; once approved, the session's later calls on
;; the same item do not.
;;
;; This file holds no item format: documents, boards, hashes and views
;; are mevedel-shared.el's and the native module's.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'mevedel-core)
(require 'mevedel-edited-files)
(require 'mevedel-permissions)
(require 'mevedel-pipeline)
(require 'mevedel-prompt)
(require 'mevedel-session)
(require 'mevedel-tool-fs)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)

(autoload 'mevedel-shared-create "mevedel-shared")
(autoload 'mevedel-shared-edit "mevedel-shared")
(autoload 'mevedel-shared-files "mevedel-shared")
(autoload 'mevedel-shared-meta "mevedel-shared")
(autoload 'mevedel-shared-new-id "mevedel-shared")
(autoload 'mevedel-shared-save-image "mevedel-shared")
(autoload 'mevedel-shared-serve "mevedel-shared")
(autoload 'mevedel-shared-visit "mevedel-shared")
(autoload 'mevedel-shared-watched "mevedel-shared")

;;;; Plumbing

(defun mevedel-tool-editing--session ()
  "Return the session of the call being judged or run, or nil."
  (let ((session (or (plist-get (mevedel-pipeline-current-context) :session)
                     mevedel-session-current)))
    (and (mevedel-session-p session) session)))

(defun mevedel-tool-editing--paths (args)
  "Return the files of the item SharedCreate or SharedEdit ARGS name.
They are what permission judges and the checkpoint step keeps, with
SharedEdit's image source, which permission judges as well."
  (when-let* ((session (mevedel-tool-editing--session))
              ((mevedel-session-directory session)))
    (let ((id (mevedel-shared-new-id session args))
          (source (plist-get args :source)))
      (append (and (stringp id)
                   (mevedel-shared-files session id
                                         (if (equal (plist-get args :kind) "whiteboard")
                                             'excalidraw
                                           (intern (or (plist-get args :format) "markdown")))))
              ;; SharedEdit's image source is judged too (read, not changed).
              (and (stringp source) (list source))))))

(defun mevedel-tool-editing--check (args)
  "Allow a call on an item this session already approved an edit of.
ARGS name the item by :id; see the Commentary."
  (let ((session (mevedel-tool-editing--session))
        (id (plist-get args :id)))
    (and session (stringp id)
         (mevedel-permissions-answered-p session (cons 'shared-item id))
         'allow)))

(defun mevedel-tool-editing--run (function)
  "Return a handler calling FUNCTION with the session and the arguments.
Its value (text, or (TEXT . PREVIEW)) becomes the tool result; an error
becomes an error result.  The item the call worked on counts as
approved for the rest of the session (`mevedel-tool-editing--check')."
  (lambda (args)
    (let ((session (mevedel-tool-editing--session)))
      (if (not session)
          "Error: shared items belong to a mevedel session; there is none here"
        (condition-case err
            (let* ((value (funcall function session args))
                   (id (or (plist-get args :id) (mevedel-shared-new-id session args))))
              (mevedel-permissions-remember session (list (cons 'shared-item id)))
              (if (consp value)
                  (list :result (car value) :render-data (list :preview (cdr value)))
                value))
          (error (list :result (concat "Error: " (error-message-string err))
                       :status 'error)))))))

(defun mevedel-tool-editing--created (session args)
  "Create the item of SharedCreate ARGS in SESSION, with its id fixed first."
  (mevedel-shared-create session (plist-put (copy-sequence args) :id
                                            (mevedel-shared-new-id session args))))

;;;; Views for Read, Grep and the reminder

(defun mevedel-tool-editing-view (canonical session callback)
  "Serve the Read or Grep of the shared:// address CANONICAL in SESSION.
For `mevedel-tool-fs-read-functions': return nil for another address;
else call CALLBACK once with the view's text, (file PATH) for a
picture or (error MESSAGE), and return non-nil."
  (when (string-prefix-p "shared://" canonical)
    (mevedel-shared-serve canonical session callback)
    t))

(defun mevedel-tool-editing-watched (address session)
  "Return (KEY . TEXT) of the shared item ADDRESS belongs to in SESSION, or nil.
For `mevedel-edited-files-resource-functions'."
  (and (string-prefix-p "shared://" address)
       (mevedel-shared-watched address session)))

(defun mevedel-tool-editing--resource-lines (chat)
  "Return the shared:// roster line once CHAT's session has a shared item.
It looks for the items' files only, without loading the host."
  (when-let* ((buffer (mevedel-prompt-chat-data-buffer chat))
              ((buffer-live-p buffer))
              (session (buffer-local-value 'mevedel-session-current buffer))
              ((mevedel-session-p session))
              (dir (mevedel-session-directory session))
              (shared (expand-file-name "shared" dir))
              ((file-directory-p shared))
              ((directory-files shared nil "\\.eld\\'" t 1)))
    (list "- shared:// this session's shared documents and whiteboards (Read shared:// \
lists them; SharedEdit changes them)")))

(add-hook 'mevedel-prompt-resource-roster-functions #'mevedel-tool-editing--resource-lines -20)
(defun mevedel-tool-editing-visit (address)
  "Open the shared item ADDRESS names, clicked in a session's view.
For `mevedel-locations-address-functions': nil for other addresses."
  (when-let* (((string-prefix-p "shared://" (downcase address)))
              (chat (bound-and-true-p mevedel-view--chat)))
    (mevedel-shared-visit address chat)))

(add-hook 'mevedel-locations-address-functions #'mevedel-tool-editing-visit 30)
(add-hook 'mevedel-tool-fs-read-functions #'mevedel-tool-editing-view)
(add-hook 'mevedel-edited-files-resource-functions #'mevedel-tool-editing-watched)

;;;; Renderers

(defun mevedel-tool-editing-render (name args result render-data)
  "Render a call of NAME with ARGS and RESULT; RENDER-DATA has its :preview."
  (let ((preview (plist-get render-data :preview))
        (target (if (plist-get args :id) (concat "shared://" (plist-get args :id))
                  (or (plist-get args :title) "?"))))
    (list :header (pcase name
                    ("SharedCreate" (format "SharedCreate %s %s" (or (plist-get args :kind) "")
                                            target))
                    ("SharedEdit" (format "SharedEdit %s (%d edit%s)" target
                                          (length (plist-get args :edits))
                                          (if (= (length (plist-get args :edits)) 1) "" "s")))
                    (_ (format "%s %s → %s" name target
                               (mevedel-tool-render-display-path
                                (or (plist-get args :file_path) "?")))))
          :body (unless mevedel-tool-render-summary-only (or preview result))
          :body-mode (and preview 'diff-mode)
          :expandable-p (and (or preview result) t)
          :initially-collapsed-p (not preview))))

;;;; Declarations

(defconst mevedel-tool-editing--element-schema
  '(:type object
    :properties
    (type (:type string) id (:type string) x (:type number) y (:type number)
          width (:type number) height (:type number) angle (:type number)
          strokeColor (:type string) backgroundColor (:type string)
          fillStyle (:type string) strokeWidth (:type number) strokeStyle (:type string)
          roughness (:type number) opacity (:type number) text (:type string)
          fontSize (:type number) fontFamily (:type number) textAlign (:type string)
          verticalAlign (:type string) lineHeight (:type number)
          points (:type array :items (:type array :items number))
          startArrowhead (:type string) endArrowhead (:type string)
          startBinding (:type object :properties (elementId (:type string) focus (:type number)
                                                            gap (:type number)))
          endBinding (:type object :properties (elementId (:type string) focus (:type number)
                                                          gap (:type number)))
          boundElements (:type array :items (:type object :properties (id (:type string)
                                                                         type (:type string))))
          roundness (:type object :properties (type (:type number) value (:type number)))
          containerId (:type string) frameId (:type string) groupIds (:type array :items string)
          link (:type string) locked (:type boolean) fileId (:type string)
          scale (:type array :items number)))
  "The Excalidraw element properties a whiteboard edit may give.")

(defconst mevedel-tool-editing--edit-schema
  `(:type object
    :properties
    (op (:type string :enum ("replace" "delete" "insert" "comment" "update" "add" "add-image"
                             "set-background"))
        hash (:type string) text (:type string) after (:type string) before (:type string)
        id (:type string) set ,mevedel-tool-editing--element-schema
        element ,mevedel-tool-editing--element-schema
        library (:type string) item (:type integer) key (:type string)
        x (:type number) y (:type number) width (:type number) height (:type number)
        color (:type string))
    :required (op))
  "One SharedEdit edit: document and whiteboard edits share it.")

(defconst mevedel-tool-editing-edit-description
  "Change a shared item (read it first: Read shared://ID) naming each target by the hash \
you read. All edits apply or none: a hash that changed since you read it is a conflict, \
answered with the line now in its place; read again and retry. Document edits: \
{\"op\":\"replace\",\"hash\":H,\"text\":T}, {\"op\":\"delete\",\"hash\":H}, \
{\"op\":\"insert\",\"after\":H or \"before\":H (neither: at the end),\"text\":T} (T may hold \
several blocks), {\"op\":\"comment\",\"hash\":H,\"text\":T}. Whiteboard edits (Excalidraw \
elements): {\"op\":\"update\",\"hash\":H,\"set\":{PROPS}}, {\"op\":\"delete\",\"hash\":H}, \
{\"op\":\"add\",\"element\":{\"type\":...}}, {\"op\":\"insert\",\"library\":NAME,\"item\":N,\
\"x\":X,\"y\":Y} (a shared://library item), {\"op\":\"add-image\",\"x\":X,\"y\":Y,\"width\":W,\
\"height\":H} (the image is source, a file or readable resource), \
{\"op\":\"set-background\",\"color\":\"#RRGGBB\"}, {\"op\":\"comment\",\"id\":ELEMENT,\"text\":T}. \
Manual: mevedel://shared-editing.md."
  "What the model reads about SharedEdit.")

(mevedel-define-tool "SharedCreate"
  :category "editing"
  :groups '(editing)
  :summary "Shared items: create a whiteboard or a document the user edits with you live."
  :description "Create a shared item of this session: a whiteboard (Excalidraw; the user \
draws on it in the browser) or a document (Markdown or Org; the user edits it in Emacs), \
which you then read at shared://ID and change with SharedEdit. content is a document's \
text, or a whiteboard's Excalidraw scene or elements array as JSON. Manual: \
mevedel://shared-editing.md."
  :args ((kind string :required "whiteboard or document." :enum ("whiteboard" "document"))
         (title string :required "Its title, shown to the user.")
         (id string :optional "Its id ([a-zA-Z0-9_-], at most 80); default: from the title.")
         (format string :optional "A document's format (default markdown)."
                 :enum ("markdown" "org"))
         (content string :optional "Initial document text or whiteboard JSON."))
  :function (mevedel-tool-editing--run #'mevedel-tool-editing--created)
  :snapshot-p t
  :check-permission #'mevedel-tool-editing--check
  :get-paths #'mevedel-tool-editing--paths
  :renderer #'mevedel-tool-editing-render)

(mevedel-define-tool "SharedEdit"
  :category "editing"
  :groups '(editing)
  :summary "Shared items: change a whiteboard's elements or a document's blocks by hash."
  :description mevedel-tool-editing-edit-description
  :args `((id string :required "The item's id (shared://ID).")
          (edits array :required "The edits, applied together or not at all."
                 :items ,mevedel-tool-editing--edit-schema :minItems 1)
          (source path-or-resource :optional
                  "Image file or readable resource address for an add-image edit."
                  :access read))
  :function (mevedel-tool-editing--run #'mevedel-shared-edit)
  :snapshot-p t
  :check-permission #'mevedel-tool-editing--check
  :get-paths #'mevedel-tool-editing--paths
  :renderer #'mevedel-tool-editing-render)

(mevedel-define-tool "SharedSaveImage"
  :category "editing"
  :groups '(editing)
  :summary "Shared items: write a whiteboard's picture or image to a new workspace file."
  :description "Write a whiteboard's rendering as PNG (or, with image, one of its images, \
shared://ID/images/KEY) to file_path, a file that must not exist yet. Manual: \
mevedel://shared-editing.md."
  :args ((id string :required "The whiteboard's id (shared://ID).")
         (file_path path :required "The new file.")
         (image string :optional "An image KEY of the board instead of its rendering."))
  :function (lambda (callback args)
              (let ((session (mevedel-tool-editing--session)))
                (if session
                    (mevedel-shared-save-image session args callback)
                  (funcall callback "Error: shared items belong to a mevedel session; there is \
none here"))))
  :async-p t
  :snapshot-p t
  :get-path (lambda (args) (plist-get args :file_path))
  :renderer #'mevedel-tool-editing-render)

(provide 'mevedel-tool-editing)
;;; mevedel-tool-editing.el ends here
