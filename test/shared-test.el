;;; shared-test.el --- Shared documents and whiteboards through the pipeline  -*- lexical-binding: t; -*-

;;; Commentary:

;; SharedCreate, SharedEdit, Read and Grep of shared:// run through the
;; pipeline in a chat, as the model calls them: documents' hashed
;; blocks, stale hashes reported with the current line, atomic edits,
;; rewind, ask mode asking once per item, the reminder of the user's
;; edits and comments, export, and the host loaded only on demand.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'mevedel-test-helpers)
(require 'mevedel)
(require 'mevedel-checkpoint)
(require 'mevedel-tool-editing)

(defmacro shared-test--with (chat &rest body)
  "Run BODY with CHAT a fresh session's chat whose Shared* calls are allowed."
  (declare (indent 1))
  `(mevedel-test-with-view view ,chat
     (let ((mevedel-permissions-rules (append '((allow "SharedCreate") (allow "SharedEdit")
                                                (allow "SharedSaveImage"))
                                              mevedel-permissions-rules)))
       ,@body)))

(defun shared-test--turn (chat id)
  "Start turn ID of CHAT as `mevedel-chat-send' would."
  (with-current-buffer (mevedel-chat-data-buffer chat)
    (goto-char (point-max))
    (let ((start (copy-marker (point))))
      (insert "\n\n### " id "\n")
      (let ((turn (list :id id :label id :start start)))
        (push turn (mevedel-chat-turns chat))
        (setf (mevedel-chat-turn chat) turn
              (mevedel-chat-turn-start chat) start)))))

(defvar shared-test--n 0 "Call counter for unique tool-use ids.")

(defun shared-test--call (chat name &rest args)
  "Run tool NAME with ARGS in CHAT through the pipeline; return its result text."
  (mevedel-test-run-tool chat name (format "toolu_sh%d" (cl-incf shared-test--n)) args t))

(defun shared-test--hash (overview text)
  "Return the hash of the OVERVIEW line whose text contains TEXT."
  (and (string-match (concat "\\(?:^\\|\t\\)\\([0-9a-f]\\{8\\}\\) [a-z]+ .*" (regexp-quote text))
                     overview)
       (match-string 1 overview)))

(defconst shared-test--doc "# Plan\n\nThe service reads the queue.\n\n- first step\n- second step\n\n```sh\nmake test\n```\n"
  "A document with a heading, a paragraph, two items and a code block.")

(defun shared-test--create (chat)
  "Create the document `plan' in CHAT; return SharedCreate's result."
  (shared-test--call chat "SharedCreate" :kind "document" :title "Plan" :id "plan"
                     :content shared-test--doc))

(defun shared-test--buffer (chat)
  "Return the buffer of CHAT's document `plan'."
  (find-buffer-visiting (expand-file-name "shared/plan.md"
                                          (mevedel-session-directory (mevedel-chat-session chat)))))

(ert-deftest shared-test-create-read-grep-a-document ()
  "A document's blocks are hashed lines; Read, Grep and the listing see it."
  (shared-test--with chat
    (let ((created (shared-test--create chat)))
      (should (string-search "Created document shared://plan" created))
      (should (string-match-p "^[0-9a-f]\\{8\\} heading \"# Plan\"$" created)))
    (let ((overview (shared-test--call chat "Read" :file_path "shared://plan")))
      (dolist (line '("heading \"# Plan\"" "paragraph \"The service reads the queue.\""
                      "item \"- first step\"" "item \"- second step\""
                      "code \"```sh\\nmake test\\n```\""))
        (should (string-search line overview))))
    ;; The roster names shared:// once the session has an item.
    (should (string-search "- shared:// this session's shared documents"
                           (mevedel-prompt--resource-roster chat)))
    (should (string-match-p "shared://plan  document \"Plan\" (markdown, 5 blocks)"
                            (shared-test--call chat "Read" :file_path "shared://")))
    (let ((found (shared-test--call chat "Grep" :pattern "second" :path "shared://plan"
                                    :output_mode "content")))
      (should (string-search "item \"- second step\"" found)))
    ;; A click on the address in the view opens the document.
    (with-current-buffer view
      (should (run-hook-with-args-until-success 'mevedel-locations-address-functions
                                                "shared://plan/discussions"))
      (should (eq (window-buffer (selected-window)) (shared-test--buffer chat))))
    ;; The document is a buffer the user edits, in the mode of its format.
    (should (buffer-live-p (shared-test--buffer chat)))
    (should (buffer-local-value 'mevedel-shared-document-mode (shared-test--buffer chat)))))

(ert-deftest shared-test-edits-name-blocks-by-hash-and-stale-hashes-conflict ()
  "An edit names blocks by hash; a block the user changed since is a conflict."
  (shared-test--with chat
    (shared-test--create chat)
    (let* ((overview (shared-test--call chat "Read" :file_path "shared://plan"))
           (para (shared-test--hash overview "The service"))
           (first (shared-test--hash overview "first step"))
           (second (shared-test--hash overview "second step")))
      (let ((edited (shared-test--call
                     chat "SharedEdit" :id "plan"
                     :edits (vector (list :op "replace" :hash para
                                          :text "The service reads the queue twice.")
                                    (list :op "insert" :after second :text "- third step")))))
        (should (string-search "Edited shared://plan" edited))
        (should (string-search "paragraph \"The service reads the queue twice.\"" edited))
        (should (string-search "item \"- third step\"" edited)))
      (with-current-buffer (shared-test--buffer chat)
        (should (string-search "- second step\n\n- third step" (buffer-string)))
        (should-not (buffer-modified-p))
        ;; The user rewrites the first item behind the model.
        (goto-char (point-min))
        (search-forward "first step")
        (replace-match "first step, done"))
      (let* ((before (with-current-buffer (shared-test--buffer chat) (buffer-string)))
             (result (shared-test--call chat "SharedEdit" :id "plan"
                                        :edits (vector (list :op "delete" :hash second)
                                                       (list :op "delete" :hash first)))))
        (should (string-prefix-p "Error: " result))
        (should (string-search (format "block %s changed since you read it" first) result))
        (should (string-search "item \"- first step, done\"" result))
        ;; All or nothing: the valid delete was not applied either.
        (should (equal before (with-current-buffer (shared-test--buffer chat) (buffer-string))))))))

(ert-deftest shared-test-an-edit-row-previews-its-diff ()
  "SharedEdit's row shows the change as a diff."
  (shared-test--with chat
    (shared-test--create chat)
    (let* ((para (shared-test--hash (shared-test--call chat "Read" :file_path "shared://plan")
                                    "The service"))
           (args (list :id "plan" :edits (vector (list :op "replace" :hash para :text "New."))))
           (outcome nil))
      (with-current-buffer (mevedel-chat-data-buffer chat)
        (mevedel-pipeline-run-tool-outcome (mevedel-tool-get "SharedEdit") args
                                           (lambda (o) (setq outcome o))
                                           :session (mevedel-chat-session chat)
                                           :data-buffer (current-buffer)))
      (mevedel-test-wait-until outcome 20)
      (should (eq (plist-get outcome :status) 'success))
      (let ((row (mevedel-tool-render-row "SharedEdit" args (plist-get outcome :result)
                                          (plist-get outcome :render-data))))
        (should (equal (plist-get row :header) "SharedEdit shared://plan (1 edit)"))
        (should (string-search "-The service reads the queue." (plist-get row :body)))
        (should (string-search "+New." (plist-get row :body)))))))

(ert-deftest shared-test-rewind-restores-a-document ()
  "Rewinding a turn restores the document's text, and removes one it created."
  (shared-test--with chat
    (shared-test--turn chat "t1")
    (shared-test--create chat)
    (setf (mevedel-chat-turn chat) nil)
    (shared-test--turn chat "t2")
    (let* ((overview (shared-test--call chat "Read" :file_path "shared://plan"))
           (para (shared-test--hash overview "The service")))
      (shared-test--call chat "SharedEdit" :id "plan"
                         :edits (vector (list :op "replace" :hash para :text "Rewritten."))))
    (setf (mevedel-chat-turn chat) nil)
    (should (string-search "Rewritten." (with-current-buffer (shared-test--buffer chat)
                                          (buffer-string))))
    (let* ((store (mevedel-session-store (mevedel-chat-session chat)))
           (turns (mevedel-core-checkpoint-turns store)))
      (cl-letf (((symbol-function 'message) #'ignore))
        (mevedel-rewind chat (nth 1 turns)))
      (should (equal (with-current-buffer (shared-test--buffer chat) (buffer-string))
                     shared-test--doc))
      (cl-letf (((symbol-function 'message) #'ignore))
        (mevedel-rewind chat (car (mevedel-core-checkpoint-turns store))))
      (should (string-prefix-p "Error: " (shared-test--call chat "Read" :file_path "shared://plan"))))))

(ert-deftest shared-test-ask-mode-asks-once-per-item ()
  "In ask mode the first call on an item asks; later calls on it do not."
  (mevedel-test-with-view view chat
    (let ((cards nil))
      (setf (mevedel-chat-permission-mode chat) 'ask)
      (shared-test--turn chat "t1")
      (mevedel-chat-set-prompter chat (lambda (_chat request)
                                        (push (plist-get request :tool) cards)
                                        (funcall (plist-get request :answer) 'once)
                                        nil))
      (should (string-search "Created" (shared-test--create chat)))
      (should (equal cards '("SharedCreate")))
      (let ((para (shared-test--hash (shared-test--call chat "Read" :file_path "shared://plan")
                                     "The service")))
        (shared-test--call chat "SharedEdit" :id "plan"
                           :edits (vector (list :op "comment" :hash para :text "Looks right."))))
      (should (equal cards '("SharedCreate")))
      ;; The model's comment shows below its block in the document.
      (with-current-buffer (shared-test--buffer chat)
        (should (cl-some (lambda (o) (string-search "model: Looks right."
                                                    (or (overlay-get o 'after-string) "")))
                         (overlays-in (point-min) (point-max)))))
      (shared-test--call chat "SharedCreate" :kind "document" :title "Other" :format "org"
                         :content "* Notes\n")
      (should (equal cards '("SharedCreate" "SharedCreate")))
      (should (string-search "commented on"
                             (shared-test--call chat "Read" :file_path "shared://plan/history"))))))

(ert-deftest shared-test-user-edits-and-comments-reach-the-model ()
  "What the user changes or comments on after the model's read is announced once."
  (shared-test--with chat
    (shared-test--create chat)
    (shared-test--call chat "Read" :file_path "shared://plan")
    (should-not (mevedel-test-edited-files-update chat))
    (with-current-buffer (shared-test--buffer chat)
      (goto-char (point-min))
      (search-forward "second step")
      (replace-match "second step, by the user")
      (goto-char (point-min))
      (search-forward "Plan")
      (mevedel-shared-comment "Call it Roadmap?"))
    (let ((update (car (mevedel-test-edited-files-update chat))))
      (should (string-search "shared://plan was changed" update))
      (should (string-search "+" update))
      (should (string-search "second step, by the user" update))
      (should (string-search "Call it Roadmap?" update)))
    (should-not (mevedel-test-edited-files-update chat))
    ;; The model's own edit is not announced back to it.
    (let ((para (shared-test--hash (shared-test--call chat "Read" :file_path "shared://plan")
                                   "The service")))
      (shared-test--call chat "SharedEdit" :id "plan"
                         :edits (vector (list :op "replace" :hash para :text "Mine."))))
    (should-not (mevedel-test-edited-files-update chat))))

(ert-deftest shared-test-addresses-missing-items-and-export ()
  "Bad identities are refused, missing items unavailable; export writes the text."
  (shared-test--with chat
    (should (string-search "no shared whiteboards or documents"
                           (shared-test--call chat "Read" :file_path "shared://")))
    (should-not (string-search "shared://" (mevedel-prompt--resource-roster chat)))
    (should (string-search "not a shared item id"
                           (shared-test--call chat "Read" :file_path "shared://bad%20id")))
    (shared-test--create chat)
    (should (string-search "no shared item with that id"
                           (shared-test--call chat "Read" :file_path "shared://nope")))
    (should (string-search "documents have no pictures"
                           (shared-test--call chat "Read" :file_path "shared://plan/view.png")))
    (should (string-search "exists already"
                           (shared-test--create chat)))
    (let ((file (make-temp-file "shared-export-" nil ".md")))
      (unwind-protect
          (progn
            (mevedel-shared-export (mevedel-chat-session chat) "plan" file)
            (should (equal (with-temp-buffer (insert-file-contents file) (buffer-string))
                           shared-test--doc)))
        (delete-file file)))))

(ert-deftest shared-test-the-user-shares-a-document ()
  "`mevedel-shared-new' makes an item the model then reads and edits."
  (shared-test--with chat
    (let ((id (mevedel-shared-new (mevedel-chat-session chat) 'document "Notes for today" 'org)))
      (should (equal id "notes-for-today"))
      (with-current-buffer (window-buffer (selected-window))
        (should (derived-mode-p 'org-mode))
        (insert "* Questions

What about caching?
")
        (save-buffer)))
    (let ((overview (shared-test--call chat "Read" :file_path "shared://notes-for-today")))
      (should (string-search "document \"Notes for today\" (org)" overview))
      (should (string-search "heading \"* Questions\"" overview)))
    (should (string-search "user: created it"
                           (shared-test--call chat "Read"
                                              :file_path "shared://notes-for-today/history")))))

(ert-deftest shared-test-element-libraries ()
  "shared://library lists the workspace's Excalidraw libraries and their items."
  (shared-test--with chat
    (shared-test--create chat)
    (should (string-search "No element libraries"
                           (shared-test--call chat "Read" :file_path "shared://library")))
    (let ((libraries (expand-file-name ".mevedel/libraries" (mevedel-chat-root chat))))
      (make-directory libraries t)
      (with-temp-file (expand-file-name "flow.excalidrawlib" libraries)
        (insert "{\"type\":\"excalidrawlib\",\"version\":2,\"libraryItems\":[
{\"id\":\"a\",\"status\":\"unpublished\",\"name\":\"Start\",\"elements\":[{\"type\":\"ellipse\"}]},
{\"id\":\"b\",\"status\":\"unpublished\",\"name\":\"Step\",\"elements\":[{\"type\":\"rectangle\"},
{\"type\":\"text\",\"text\":\"do\"}]}]}")))
    (should (string-search "shared://library/flow  2 items"
                           (shared-test--call chat "Read" :file_path "shared://library")))
    (let ((items (shared-test--call chat "Read" :file_path "shared://library/flow")))
      (should (string-search "1 \"Start\" (1 elements)" items))
      (should (string-search "2 \"Step\" (2 elements)" items)))
    (should (string-search "element libraries (1)"
                           (shared-test--call chat "Read" :file_path "shared://")))))

(ert-deftest shared-test-the-host-loads-only-when-called ()
  "The catalog declares the tools without loading the shared host."
  (let ((out (mevedel-test-run-emacs
              '(progn (require 'mevedel-catalog)
                      (princ (format "%s %s" (featurep 'mevedel-shared)
                                     (and (mevedel-tool-get "SharedEdit") t)))))))
    (should (equal (car out) 0))
    (should (string-search "nil t" (cdr out)))))

;;;; Whiteboards (the native host)

(defconst shared-test--elements
  "[{\"type\":\"rectangle\",\"id\":\"api\",\"x\":0,\"y\":0,\"width\":160,\"height\":60},
    {\"type\":\"rectangle\",\"id\":\"db\",\"x\":300,\"y\":0,\"width\":160,\"height\":60},
    {\"type\":\"text\",\"id\":\"label\",\"x\":10,\"y\":20,\"width\":100,\"height\":20,\"text\":\"API server\"}]"
  "Three elements of a small architecture board.")

(defun shared-test--board-create (chat)
  "Create the whiteboard `arch' in CHAT; return SharedCreate's result."
  (shared-test--call chat "SharedCreate" :kind "whiteboard" :title "Architecture" :id "arch"
                     :content shared-test--elements))

(defun shared-test--board-hash (overview id)
  "Return the hash of element ID's line in OVERVIEW."
  (and (string-match (concat "\\(?:^\\|\t\\)\\([0-9a-f]\\{8\\}\\) " (regexp-quote id) " ") overview)
       (match-string 1 overview)))

(defun shared-test--board-handle (chat)
  "Return the host handle of CHAT's whiteboard `arch'."
  (car (gethash (concat (mevedel-session-id (mevedel-chat-session chat)) "/arch")
                mevedel-shared--boards)))

(ert-deftest shared-test-whiteboard-edits-by-hash-and-stale-hashes-conflict ()
  "A board's elements are hashed lines; an element the user moved is a conflict."
  (shared-test--with chat
    (should (string-search "Created whiteboard shared://arch" (shared-test--board-create chat)))
    (let* ((overview (shared-test--call chat "Read" :file_path "shared://arch"))
           (api (shared-test--board-hash overview "api"))
           (db (shared-test--board-hash overview "db")))
      (should (and api db))
      (should (string-search "\"API server\"" overview))
      (should (string-search "\"type\": \"rectangle\""
                             (shared-test--call chat "Read" :file_path "shared://arch/elements/db")))
      (let ((edited (shared-test--call chat "SharedEdit" :id "arch"
                                       :edits (vector (list :op "update" :hash api
                                                            :set (list :strokeColor "#e03131"))
                                                      (list :op "add" :element
                                                            (list :type "ellipse" :id "cache"
                                                                  :x 150 :y 200 :width 80
                                                                  :height 80))))))
        (should (string-search "Edited shared://arch: 1 changed, 1 added" edited))
        (should (string-search " cache ellipse" edited)))
      ;; The user drags db in the browser: the board changes behind the model.
      (mevedel-core-shared-board-edit
       (shared-test--board-handle chat)
       (json-serialize (vector (list :op "update" :hash db :set (list :x 420)))) "user")
      (let ((result (shared-test--call chat "SharedEdit" :id "arch"
                                       :edits (vector (list :op "delete" :hash db)))))
        (should (string-prefix-p "Error: Conflict" result))
        (should (string-search (format "element %s" db) result)))
      (should (string-search " db rectangle"
                             (shared-test--call chat "Read" :file_path "shared://arch")))
      (should (string-search "model" (shared-test--call chat "Read"
                                                        :file_path "shared://arch/history"))))))

(ert-deftest shared-test-rewind-restores-a-whiteboard ()
  "Rewinding a turn's SharedEdit gives the board its elements back."
  (shared-test--with chat
    (shared-test--turn chat "t1")
    (shared-test--board-create chat)
    (setf (mevedel-chat-turn chat) nil)
    (shared-test--turn chat "t2")
    (let* ((before (shared-test--call chat "Read" :file_path "shared://arch"))
           (api (shared-test--board-hash before "api")))
      (shared-test--call chat "SharedEdit" :id "arch"
                         :edits (vector (list :op "delete" :hash api)
                                        (list :op "set-background" :color "#fff9db")))
      (setf (mevedel-chat-turn chat) nil)
      (should-not (shared-test--board-hash
                   (shared-test--call chat "Read" :file_path "shared://arch") "api"))
      (let ((store (mevedel-session-store (mevedel-chat-session chat))))
        (cl-letf (((symbol-function 'message) #'ignore))
          (mevedel-rewind chat (nth 1 (mevedel-core-checkpoint-turns store)))))
      (let ((after (shared-test--call chat "Read" :file_path "shared://arch")))
        (should (equal (shared-test--board-hash after "api") api))
        (should-not (string-search "#fff9db" after))))))

(ert-deftest shared-test-whiteboard-persists-renders-exports-and-inserts ()
  "A board survives its host closing; it renders, saves images, exports, takes library items."
  (shared-test--with chat
    (shared-test--board-create chat)
    (let* ((session (mevedel-chat-session chat))
           (overview (shared-test--call chat "Read" :file_path "shared://arch"))
           (api (shared-test--board-hash overview "api")))
      ;; Closed (as at exit) and opened again from the session's storage.
      (mevedel-shared--close-boards session)
      (should (equal (shared-test--board-hash
                      (shared-test--call chat "Read" :file_path "shared://arch") "api")
                     api))
      ;; view.png goes through Read's media handling.
      (let ((outcome nil))
        (with-current-buffer (mevedel-chat-data-buffer chat)
          (mevedel-pipeline-run-tool-outcome (mevedel-tool-get "Read")
                                             (list :file_path "shared://arch/view.png")
                                             (lambda (o) (setq outcome o))
                                             :session session
                                             :data-buffer (current-buffer)))
        (mevedel-test-wait-until outcome 30)
        (should (eq (plist-get outcome :status) 'success))
        ;; Read's media handling took it (this model takes no images).
        (should (string-match-p "\\`Image `shared://arch/view.png`: PNG, [0-9]+×[0-9]+ px"
                                (plist-get outcome :result))))
      (let ((png (expand-file-name "arch.png" (mevedel-chat-root chat))))
        (should (string-prefix-p "Wrote arch.png"
                                 (shared-test--call chat "SharedSaveImage" :id "arch"
                                                    :file_path png)))
        (should (equal (with-temp-buffer
                         (set-buffer-multibyte nil)
                         (insert-file-contents-literally png nil 0 4)
                         (buffer-string))
                       "\211PNG"))
        (should (string-search "exists already"
                               (shared-test--call chat "SharedSaveImage" :id "arch"
                                                  :file_path png))))
      (let ((file (make-temp-file "shared-export-" nil ".excalidraw")))
        (unwind-protect
            (progn
              (mevedel-shared-export session "arch" file)
              (let ((scene (with-temp-buffer (insert-file-contents file)
                                             (json-parse-buffer :object-type 'plist))))
                (should (equal (plist-get scene :type) "excalidraw"))
                (should (= (length (plist-get scene :elements)) 3))))
          (delete-file file)))
      (let ((libraries (expand-file-name ".mevedel/libraries" (mevedel-chat-root chat))))
        (make-directory libraries t)
        (with-temp-file (expand-file-name "shapes.excalidrawlib" libraries)
          (insert "{\"type\":\"excalidrawlib\",\"version\":2,\"libraryItems\":[{\"id\":\"i1\",
\"status\":\"published\",\"name\":\"Queue\",\"elements\":[{\"type\":\"rectangle\",\"id\":\"q\",
\"x\":5,\"y\":5,\"width\":40,\"height\":20}]}]}"))
        (should (string-search "shared://library/shapes  1 items"
                               (shared-test--call chat "Read" :file_path "shared://library")))
        (should (string-search "1 \"Queue\" (1 elements)"
                               (shared-test--call chat "Read" :file_path "shared://library/shapes")))
        ;; The numbered sheets are drawn as pictures.
        (dolist (address '("shared://library/shapes/sheet.png" "shared://library/sheet.png"))
          (should (string-match-p (concat "\\`Image `" (regexp-quote address) "`: PNG")
                                  (shared-test--call chat "Read" :file_path address))))
        (should (string-search "1 added"
                               (shared-test--call chat "SharedEdit" :id "arch"
                                                  :edits (vector (list :op "insert"
                                                                       :library "shapes" :item 1
                                                                       :x 0 :y 300)))))))))

(ert-deftest shared-test-open-a-whiteboard-in-the-browser ()
  "`mevedel-shared-open' hands the board's 127.0.0.1 page, with its token, to the browser."
  (shared-test--with chat
    (shared-test--board-create chat)
    (let ((urls nil))
      (cl-letf (((symbol-function 'browse-url) (lambda (url &rest _) (push url urls))))
        (mevedel-shared-open (mevedel-chat-session chat) "arch")
        (mevedel-shared-open (mevedel-chat-session chat) "arch"))
      (should (string-match-p "\\`http://127\\.0\\.0\\.1:[0-9]+/.*token=" (car urls)))
      ;; The same page both times.
      (should (equal (car urls) (cadr urls))))))

(ert-deftest shared-test-browser-changes-reach-the-model ()
  "A browser's change and comment on a board the model read are announced."
  (shared-test--with chat
    (shared-test--board-create chat)
    (let* ((overview (shared-test--call chat "Read" :file_path "shared://arch"))
           (db (shared-test--board-hash overview "db"))
           (handle (shared-test--board-handle chat))
           (key (concat (mevedel-session-id (mevedel-chat-session chat)) "/arch")))
      (should-not (mevedel-test-edited-files-update chat))
      ;; What the host does for a page: apply, store the comment, post events.
      (mevedel-core-shared-board-edit
       handle (json-serialize (vector (list :op "update" :hash db :set (list :x 500)))) "user")
      (mevedel-core-shared-board-discuss handle "db" "user" "Should this be Postgres?")
      (mevedel-shared--board-event (list key :author "user" :ids '("db")))
      (let ((update (car (mevedel-test-edited-files-update chat))))
        (should (string-search "shared://arch was changed" update))
        (should (string-search "x=500" update))
        (should (string-search "Should this be Postgres?" update)))
      ;; Saved with the change: a fresh host sees it.
      (mevedel-shared--close-boards (mevedel-chat-session chat))
      (should (string-search "x=500"
                             (shared-test--call chat "Read" :file_path "shared://arch"))))))

(provide 'shared-test)
;;; shared-test.el ends here
