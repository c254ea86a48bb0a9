;;; mevedel-web.el --- WebFetch and WebSearch  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The mevedel authors
;; SPDX-License-Identifier: GPL-3.0-or-later

;;; Commentary:

;; The web tools: WebFetch (one URL, returned by its content type) and
;; WebSearch (DuckDuckGo's HTML endpoint).  Both are specialists
;; (group `web').
;;
;; Retrieval (mevedel-web-retrieval.el) follows redirects by hand and
;; lets the caller decide each hop.  WebFetch follows the same host,
;; asks `mevedel-permissions-decide-now' about another (an allowed
;; target is followed, a denied one fails, any other is returned as
;; "REDIRECT: URL" for the model's next call), and never follows a
;; public host's redirect to a private address
;; (`mevedel-web--redirect-decider').
;;
;; Bodies are converted by the module on a worker thread
;; (`mevedel-core-web-convert'): charsets, HTML to readable text with
;; Markdown links, DuckDuckGo result blocks, YouTube player data.  The
;; main thread only moves bytes, so a hostile page cannot freeze Emacs.
;; PDFs go through pdftotext, run locally under the same timeout.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'url)
(require 'button)
(require 'mevedel-core)
(require 'mevedel-permissions)
(require 'mevedel-pipeline)
(require 'mevedel-session)
(require 'mevedel-tool-media)
(require 'mevedel-tool-registry)
(require 'mevedel-tool-render)
(require 'mevedel-web-retrieval)

(declare-function mevedel-gptel-model-accepts-mime-p "mevedel-gptel" (mime &optional buffer))
(declare-function eww "eww" (url &optional new-buffer buffer))

;;;; Customization

(defgroup mevedel-web nil
  "The web tools of mevedel: WebFetch and WebSearch."
  :group 'mevedel
  :prefix "mevedel-web-")

(defcustom mevedel-web-search-url "https://html.duckduckgo.com/html/"
  "DuckDuckGo's HTML endpoint, which WebSearch asks with `?q=QUERY'.
It is WebSearch's own, independent of `eww-search-prefix'."
  :type 'string)

(defcustom mevedel-web-youtube-watch-url "https://www.youtube.com/watch?v=%s"
  "Format of a YouTube watch page's URL, `%s' the video id."
  :type 'string)

(defcustom mevedel-web-pdftotext-program "pdftotext"
  "The pdftotext program WebFetch extracts PDF text with."
  :type 'string)

(defcustom mevedel-web-open-function #'eww
  "Function of one URL that a link button in the view opens.
With a prefix argument the button uses `browse-url' instead."
  :type 'function)

(defconst mevedel-web-manual-address "mevedel://tools/web.md"
  "Where the model reads the web tools' manual.")

(defconst mevedel-web-pdf-artifact-limit (* 25 1024 1024)
  "Largest PDF WebFetch saves as a session artifact, in bytes.")

(defconst mevedel-web-concurrent-searches 2
  "Most WebSearch requests in flight at once.")

;;;; Conversion

(defun mevedel-web--convert (kind body options callback)
  "Convert BODY (unibyte) of KIND with OPTIONS in the module; CALLBACK gets it.
CALLBACK is called with the value, or with (:error MESSAGE)."
  (mevedel-core-web-convert
   kind (decode-coding-string body 'latin-1 t) options
   (lambda (status value)
     (funcall callback (if (eq status 'ok) value
                         (list :error (cadr value)))))))

(defun mevedel-web--stop-cell ()
  "Return a cell whose car stops the current stage of the running call.
The call's pipeline canceller runs it; each stage that starts work
stores its stop function there."
  (let ((cell (list nil)))
    (mevedel-pipeline-add-canceller (lambda () (when (car cell) (funcall (car cell)))))
    cell))

(defun mevedel-web--once (callback)
  "Return a function calling CALLBACK with its argument the first time only."
  (let ((called nil))
    (lambda (value)
      (unless called
        (setq called t)
        (funcall callback value)))))

;;;; WebFetch

(defconst mevedel-web--text-types
  (rx bos (or (seq "text/" (+ nonl))
              (seq "application/" (or "json" "xml" "javascript" "ecmascript"
                                      "x-javascript" "ld+json" "x-sh" "toml" "yaml"
                                      "x-yaml"))
              (seq (+ nonl) "/" (+ nonl) (or "+json" "+xml")))
      eos)
  "Content types WebFetch returns verbatim, decoded.")

(defun mevedel-web--sniff (body)
  "Return the content type of BODY by its first bytes: PDF, HTML, binary or text."
  (let ((head (substring body 0 (min 1024 (length body)))))
    (cond ((string-prefix-p "%PDF-" head) "application/pdf")
          ((let ((case-fold-search t))
             (string-match-p "\\`\\(?:\xef\xbb\xbf\\)?[ \t\r\n]*<\\(?:!doctype html\\|html\\|head\\|body\\)"
                             head))
           "text/html")
          ((string-search "\0" head) "application/octet-stream")
          (t "text/plain"))))

(defun mevedel-web--size (bytes)
  "Return BYTES (a number) for people."
  (file-size-human-readable bytes 'iec " " "B"))

(defun mevedel-web--lead (response &rest lines)
  "Return the lines leading a WebFetch result for RESPONSE, then LINES.
The final URL comes first when redirects moved the request."
  (let ((lines (delq nil (append (and (plist-get response :redirected)
                                      (list (concat "Final URL: " (plist-get response :url))))
                                 lines))))
    (if lines (concat (string-join lines "\n") "\n\n") "")))

(defun mevedel-web--render-data (response &rest more)
  "Return WebFetch's render-data for RESPONSE plus the plist MORE."
  (append (list :url (plist-get response :requested)
                :final-url (plist-get response :url)
                :http-status (plist-get response :status)
                :type (plist-get response :type)
                :size (length (plist-get response :body)))
          more))

(defun mevedel-web--fetch-image (response type context callback)
  "Give CALLBACK the image RESPONSE of TYPE as media, when it may be.
CONTEXT is the call's pipeline context: its buffer's model decides."
  (let* ((body (plist-get response :body))
         (size (length body))
         (buffer (plist-get context :data-buffer)))
    (funcall
     callback
     (cond
      ((> size mevedel-tool-media-limit)
       (format "Error: the image (%s, %s) is larger than %s" type (mevedel-web--size size)
               (mevedel-web--size mevedel-tool-media-limit)))
      ((not (string-match-p (nth 2 (mevedel-tool-media-type-p type)) body))
       (format "Error: the response says %s but its bytes are not one (%s)"
               type (mevedel-web--size size)))
      ((not (and (fboundp 'mevedel-gptel-model-accepts-mime-p)
                 (mevedel-gptel-model-accepts-mime-p type buffer)))
       (format "Error: the image (%s, %s) cannot be shown: the current model does not \
accept %s" type (mevedel-web--size size) type))
      (t (list :result (concat (mevedel-web--lead response)
                               (format "Image %s, %s, attached." type (mevedel-web--size size)))
               :media (list (list :mime type :data body))
               :render-data (mevedel-web--render-data response)))))))

(defun mevedel-web--pdf-artifact (body session)
  "Save the PDF BODY in SESSION's tool-results/; return its address or nil."
  (and (<= (length body) mevedel-web-pdf-artifact-limit)
       (mevedel-session-save-artifact session "WebFetch" "pdf" body)))

(defun mevedel-web--pdftotext (body callback)
  "Extract the text of the PDF BODY with pdftotext; CALLBACK gets it.
CALLBACK is called once with the text or (:error MESSAGE).  The bytes
go to a private temporary file, removed afterwards.  Return a function
that stops the extraction (CALLBACK is then never called)."
  (let ((program (executable-find mevedel-web-pdftotext-program)))
    (if (not program)
        (progn (funcall callback (list :error (format "%s is not installed"
                                                      mevedel-web-pdftotext-program)))
               #'ignore)
      (let* ((file (make-temp-file "mevedel-web-" nil ".pdf"))
             (out (generate-new-buffer " *mevedel-pdftotext*" t))
             (errors (generate-new-buffer " *mevedel-pdftotext-errors*" t))
             (timer nil)
             (process nil)
             (done nil)
             (release
              (lambda ()
                (setq done t)
                (when timer (cancel-timer timer))
                (dolist (p (list process (get-buffer-process errors)))
                  (when (process-live-p p) (delete-process p)))
                (ignore-errors (delete-file file))
                (dolist (b (list out errors))
                  (when (buffer-live-p b) (kill-buffer b)))))
             (finish
              (lambda (result)
                (unless done
                  (let ((text (with-current-buffer out
                                (decode-coding-region (point-min) (point-max) 'utf-8)
                                (buffer-string)))
                        (why (with-current-buffer errors
                               (string-trim (buffer-substring (point-min)
                                                              (min (point-max) 300))))))
                    (funcall release)
                    (funcall callback
                             (pcase result
                               ('ok text)
                               (`(:error ,message)
                                (list :error (if (string-empty-p why) message
                                               (format "%s: %s" message why)))))))))))
        (let ((coding-system-for-write 'binary))
          (write-region body nil file nil 'silent))
        (setq process
              (make-process
               :name "mevedel-pdftotext" :buffer out :noquery t
               :connection-type 'pipe :coding 'binary
               :command (list program "-layout" "-enc" "UTF-8" file "-")
               :stderr errors
               :sentinel (lambda (p _)
                           (unless (process-live-p p)
                             (funcall finish
                                      (if (eq (process-exit-status p) 0)
                                          'ok
                                        (list :error (format "pdftotext failed (exit %d)"
                                                             (process-exit-status p)))))))))
        (setq timer (run-at-time mevedel-web-retrieval-timeout nil
                                 (lambda ()
                                   (funcall finish (list :error (format "pdftotext timed out after %s s"
                                                                        mevedel-web-retrieval-timeout))))))
        (lambda () (unless done (funcall release)))))))

(defun mevedel-web--fetch-pdf (response context stop callback)
  "Give CALLBACK the text of the PDF RESPONSE, led by its artifact address.
CONTEXT is the call's pipeline context (its session keeps the copy);
STOP is its stop cell (see `mevedel-web--stop-cell')."
  (let* ((body (plist-get response :body))
         (session (plist-get context :session))
         (address (mevedel-web--pdf-artifact body session))
         (saved (and address (format "%s (the PDF as fetched, %s: Read it for pages, \
figures and layout)" address (mevedel-web--size (length body))))))
    (setcar
     stop
     (mevedel-web--pdftotext
      body
      (lambda (text)
        (let ((data (mevedel-web--render-data response :artifact address)))
          (funcall
           callback
           (cond
            ((and (stringp text) (string-match-p "\\`[ \t\n\r\f\v]*\\'" text))
             (list :result (mevedel-web--lead response saved
                                              "The PDF has no extractable text (a scan or \
only figures?).")
                   :render-data data))
            ((stringp text)
             (list :result (concat (mevedel-web--lead response saved) text) :render-data data))
            (address
             (list :result (mevedel-web--lead response saved
                                              (format "No text extracted: %s."
                                                      (plist-get text :error)))
                   :render-data data))
            (t (format "Error: cannot extract the PDF's text (%s) and the session has no \
storage to keep it: %s" (mevedel-web--size (length body)) (plist-get text :error)))))))))))

(defun mevedel-web--fetch-text (kind response callback)
  "Give CALLBACK RESPONSE converted as KIND (\"html\" or \"text\")."
  (mevedel-web--convert
   kind (plist-get response :body)
   (if (equal kind "html")
       (list (plist-get response :charset) (plist-get response :url))
     (list (plist-get response :charset)))
   (lambda (value)
     (funcall callback
              (if-let* ((message (plist-get value :error)))
                  (format "Error: converting the page failed: %s" message)
                (list :result (concat (mevedel-web--lead response) (plist-get value :text))
                      :render-data (mevedel-web--render-data
                                    response :title (plist-get value :title))))))))

(defun mevedel-web--deliver-response (response context stop callback)
  "Give CALLBACK the WebFetch result of RESPONSE, by its content type.
CONTEXT and STOP are the call's context and stop cell."
  (let* ((body (plist-get response :body))
         (status (plist-get response :status))
         (declared (plist-get response :type))
         (type (or declared (mevedel-web--sniff body))))
    (cond
     ((not (and (integerp status) (<= 200 status 299)))
      (funcall callback (format "Error: %s answered HTTP %s (%s, %s)"
                                (plist-get response :url) status (or declared "no type")
                                (mevedel-web--size (length body)))))
     ((member type '("text/html" "application/xhtml+xml"))
      (mevedel-web--fetch-text "html" response callback))
     ((string-match-p mevedel-web--text-types type)
      (mevedel-web--fetch-text "text" response callback))
     ((mevedel-tool-media-type-p type)
      (mevedel-web--fetch-image response type context callback))
     ((member type '("application/pdf" "application/x-pdf"))
      (mevedel-web--fetch-pdf response context stop callback))
     (t (funcall callback (format "Error: WebFetch cannot read %s content%s (%s)"
                                  type (if declared "" " (sniffed: binary)")
                                  (mevedel-web--size (length body))))))))

(defun mevedel-web--redirect-decider (tool buffer)
  "Return WebFetch's redirect decision function for TOOL dispatched from BUFFER."
  (lambda (from to)
    (let ((from-host (mevedel-web-retrieval-host from))
          (to-host (mevedel-web-retrieval-host to)))
      (cond
       ((equal from-host to-host) 'follow)
       ((and (not (mevedel-web-retrieval-private-host-p from-host))
             (mevedel-web-retrieval-private-host-p to-host))
        'return)
       (t (pcase (mevedel-permissions-decide-now tool (list :url to) buffer)
            ('allow 'follow)
            ('deny (cons 'error (format "%s redirected to %s, which permission rules deny"
                                        from to)))
            (_ 'return)))))))

(defun mevedel-web--youtube-id (url)
  "Return the video id of the YouTube URL, or nil for any other URL."
  (let* ((parsed (url-generic-parse-url url))
         (host (downcase (or (url-host parsed) "")))
         (path (car (url-path-and-query parsed)))
         (query (cdr (url-path-and-query parsed))))
    (cond
     ((member host '("youtu.be" "www.youtu.be"))
      (and path (string-match "\\`/\\([A-Za-z0-9_-]+\\)" path) (match-string 1 path)))
     ((member host '("youtube.com" "www.youtube.com" "m.youtube.com" "music.youtube.com"))
      (cond ((and path (string-match "\\`/\\(?:shorts\\|embed\\|live\\)/\\([A-Za-z0-9_-]+\\)" path))
             (match-string 1 path))
            ((and query (equal path "/watch"))
             (cadr (assoc "v" (url-parse-query-string query)))))))))

(defun mevedel-web--youtube (id stop callback)
  "Give CALLBACK the description and English captions of YouTube video ID.
STOP is the call's stop cell.  Each stage has its own timeout."
  (let ((watch (format mevedel-web-youtube-watch-url (url-hexify-string id))))
    (setcar
     stop
     (mevedel-web-retrieval-start
      watch
      (lambda (page)
        (if (plist-get page :error)
            (funcall callback (format "Error: cannot retrieve the YouTube video %s: %s"
                                      id (plist-get page :error)))
          (mevedel-web--convert
           "youtube-page" (plist-get page :body) nil
           (lambda (player)
             (if (plist-get player :error)
                 (funcall callback (format "Error: YouTube video %s: %s"
                                           id (plist-get player :error)))
               (mevedel-web--youtube-captions id player stop callback))))))
      :headers '(("Accept-Language" . "en"))))))

(defun mevedel-web--youtube-captions (id player stop callback)
  "Give CALLBACK video ID's PLAYER description with its captions, if any.
STOP is the call's stop cell.  A caption failure keeps the description."
  (let ((head (format "YouTube video %s: %s\nChannel: %s\n\nDescription:\n%s\n\n"
                      id (plist-get player :title) (plist-get player :author)
                      (plist-get player :description)))
        (track (plist-get player :captions))
        (data (list :url (format mevedel-web-youtube-watch-url id)
                    :title (plist-get player :title) :type "youtube")))
    (if (not track)
        (funcall callback (list :result (concat head "Transcript: the video has no English captions.")
                                :render-data data))
      (setcar
       stop
       (mevedel-web-retrieval-start
        track
        (lambda (response)
          (let ((fail (lambda (why)
                        (funcall callback
                                 (list :result (format "%sTranscript unavailable: %s" head why)
                                       :render-data data)))))
            (cond ((plist-get response :error) (funcall fail (plist-get response :error)))
                  ((not (eql (plist-get response :status) 200))
                   (funcall fail (format "HTTP %s" (plist-get response :status))))
                  (t (mevedel-web--convert
                      "captions" (plist-get response :body) nil
                      (lambda (text)
                        (if (stringp text)
                            (funcall callback
                                     (list :result (concat head "Transcript (English captions):\n"
                                                           text)
                                           :render-data data))
                          (funcall fail (plist-get text :error))))))))))))))

(defun mevedel-web-fetch (callback args)
  "Fetch the URL of ARGS as WebFetch does; call CALLBACK once with the result."
  (let* ((callback (mevedel-web--once callback))
         (url (string-trim (or (plist-get args :url) "")))
         (context (mevedel-pipeline-current-context))
         (stop (mevedel-web--stop-cell))
         (problem (mevedel-web-retrieval-url-problem url))
         (video (and (not problem) (mevedel-web--youtube-id url))))
    (cond
     (problem (funcall callback (concat "Error: " problem)))
     (video (mevedel-web--youtube video stop callback))
     (t
      (setcar
       stop
       (mevedel-web-retrieval-start
        url
        (lambda (response)
          (cond
           ((plist-get response :error)
            (funcall callback (concat "Error: " (plist-get response :error))))
           ((plist-get response :redirect)
            (funcall callback
                     (list :result (format "REDIRECT: %s\n\n%s redirected to another host; \
fetch that URL with WebFetch to follow it." (plist-get response :redirect)
                                           (plist-get response :from))
                           :render-data (list :url url :final-url (plist-get response :redirect)
                                              :http-status "redirect"))))
           (t (mevedel-web--deliver-response response context stop callback))))
        :headers '(("Accept" . "text/markdown, text/html;q=0.9, */*;q=0.8"))
        :redirect (mevedel-web--redirect-decider (plist-get context :tool)
                                                 (plist-get context :data-buffer))))))))

;;;; WebSearch

(defvar mevedel-web--searches 0
  "WebSearch requests in flight.")

(defvar mevedel-web--search-queue nil
  "Thunks of WebSearch requests waiting for a free slot, oldest first.")

(defun mevedel-web--search-slot (start)
  "Run START, a function of a release thunk, when a search slot is free.
Return a function that withdraws it if it has not started."
  (let* ((released nil)
         (release (lambda ()
                    (unless released
                      (setq released t)
                      (cl-decf mevedel-web--searches)
                      (when-let* ((next (pop mevedel-web--search-queue)))
                        (funcall next)))))
         (thunk (lambda () (cl-incf mevedel-web--searches) (funcall start release))))
    (if (< mevedel-web--searches mevedel-web-concurrent-searches)
        (funcall thunk)
      (setq mevedel-web--search-queue (append mevedel-web--search-queue (list thunk))))
    (lambda () (setq mevedel-web--search-queue (delq thunk mevedel-web--search-queue)))))

(defun mevedel-web--search-query (query allowed blocked)
  "Return QUERY with site: terms for ALLOWED or -site: terms for BLOCKED."
  (string-join
   (delq nil (list query
                   (and allowed (mapconcat (lambda (d) (concat "site:" d)) allowed " OR "))
                   (and blocked (mapconcat (lambda (d) (concat "-site:" d)) blocked " "))))
   " "))

(defun mevedel-web--format-results (query results)
  "Return the WebSearch result text for QUERY's RESULTS."
  (if (null results)
      (format "No results for %S." query)
    (concat (format "Web search results for %S:\n\n" query)
            (mapconcat (lambda (n-hit)
                         (let ((hit (cdr n-hit)))
                           (concat (format "%d. %s\n   %s" (car n-hit) (plist-get hit :title)
                                           (plist-get hit :url))
                                   (let ((s (plist-get hit :snippet)))
                                     (if (string-empty-p s) "" (concat "\n   " s))))))
                       (cl-loop for hit in results for n from 1 collect (cons n hit))
                       "\n\n"))))

(defun mevedel-web--search-result (query value)
  "Return the WebSearch result for QUERY from the module's parse VALUE."
  (cond
   ((plist-get value :error)
    (concat "Error: reading the results failed: " (plist-get value :error)))
   ((plist-get value :challenge)
    "Error: DuckDuckGo answered with its bot challenge instead of results; \
searching is blocked for now (this is not an empty result)")
   (t (let ((results (plist-get value :results)))
        (list :result (mevedel-web--format-results query results)
              :render-data
              (list :query query
                    :results (mapcar (lambda (h) (list :title (plist-get h :title)
                                                       :url (plist-get h :url)))
                                     results)))))))

(defun mevedel-web--search-run (url query allowed blocked done)
  "Retrieve the result page URL for QUERY, filtered by ALLOWED and BLOCKED.
DONE gets the result once.  Return a function that cancels."
  (mevedel-web-retrieval-start
   url
   (lambda (response)
     (cond
      ((plist-get response :error)
       (funcall done (concat "Error: the search failed: " (plist-get response :error))))
      ((not (eql (plist-get response :status) 200))
       (funcall done (format "Error: DuckDuckGo answered HTTP %s" (plist-get response :status))))
      (t (mevedel-web--convert
          "search" (plist-get response :body) (list allowed blocked)
          (lambda (value) (funcall done (mevedel-web--search-result query value)))))))))

(defun mevedel-web-search (callback args)
  "Search the web for the query of ARGS; call CALLBACK once with the result."
  (let* ((callback (mevedel-web--once callback))
         (query (string-trim (or (plist-get args :query) "")))
         (allowed (append (plist-get args :allowed_domains) nil))
         (blocked (append (plist-get args :blocked_domains) nil)))
    (cond
     ((string-empty-p query) (funcall callback "Error: the query is empty"))
     ((and allowed blocked)
      (funcall callback "Error: give allowed_domains or blocked_domains, not both"))
     (t
      (let* ((full (mevedel-web--search-query query allowed blocked))
             (url (concat mevedel-web-search-url
                          (if (string-search "?" mevedel-web-search-url) "&" "?")
                          "q=" (url-hexify-string full)))
             (stop (mevedel-web--stop-cell)))
        (setcar
         stop
         (mevedel-web--search-slot
          (lambda (release)
            (let ((cancel (mevedel-web--search-run
                           url query allowed blocked
                           (lambda (result) (funcall release) (funcall callback result)))))
              (setcar stop (lambda () (funcall cancel) (funcall release))))))))))))

;;;; Rendering

(defun mevedel-web--open (button)
  "Open BUTTON's URL; with a prefix argument in the system browser."
  (let ((url (button-get button 'mevedel-url)))
    (if current-prefix-arg (browse-url url) (funcall mevedel-web-open-function url))))

(defconst mevedel-web--link-regexp
  (rx (or (seq "[" (group (* (or (seq "\\" nonl) (not (any "]\\"))))) "]("
               (group "http" (? "s") "://" (+ (not (any ") \n")))) ")")
          (group "http" (? "s") "://" (+ (not (any " \n<>\"'`)]"))))))
  "A Markdown link (text 1, target 2) or a bare URL (3).")

(defun mevedel-web-buttonize (text)
  "Return TEXT with its Markdown links and bare URLs as buttons.
A button opens its URL with `mevedel-web-open-function' (EWW), or
with a prefix argument in the system browser."
  (let ((text (copy-sequence text))
        (start 0))
    (while (string-match mevedel-web--link-regexp text start)
      (let ((url (or (match-string 2 text) (match-string 3 text))))
        (add-text-properties (match-beginning 0) (match-end 0)
                             (mevedel-web--button-properties url) text)
        (setq start (match-end 0))))
    text))

(defun mevedel-web--button-properties (url)
  "Return the text properties of a button opening URL."
  (list 'button '(t) 'category 'default-button 'face 'button 'follow-link t
        'action #'mevedel-web--open 'mevedel-url url
        'help-echo (concat url "\nRET: open in EWW; C-u RET: system browser")))

(defun mevedel-web-render-fetch (_name args result render-data)
  "Render a WebFetch call with ARGS, RESULT and RENDER-DATA."
  (let* ((url (or (plist-get render-data :url) (plist-get args :url) "?"))
         (host (or (mevedel-web-retrieval-host url) url))
         (final (mevedel-web-retrieval-host (plist-get render-data :final-url)))
         (size (plist-get render-data :size))
         (facts (delq nil (list (and final (not (equal final host)) (concat "→ " final))
                                (and size (mevedel-web--size size))
                                (and (plist-get render-data :http-status)
                                     (format "%s" (plist-get render-data :http-status)))
                                (plist-get render-data :type)))))
    (list :header (string-join (cons (concat "WebFetch " host) facts) " · ")
          :body (unless (or mevedel-tool-render-summary-only (null result))
                  (mevedel-web-buttonize result))
          :expandable-p (and result (not (string-empty-p result)))
          :initially-collapsed-p t)))

(defun mevedel-web-render-search (_name args result render-data)
  "Render a WebSearch call with ARGS, RESULT and RENDER-DATA."
  (let ((results (plist-get render-data :results)))
    (list :header (format "WebSearch %S%s" (or (plist-get args :query) "?")
                          (if render-data (format " · %d results" (length results)) ""))
          :body (unless mevedel-tool-render-summary-only
                  (if results
                      (mapconcat
                       (lambda (hit)
                         (let ((url (plist-get hit :url)))
                           (concat (apply #'propertize (plist-get hit :title)
                                          (mevedel-web--button-properties url))
                                   " — " (or (mevedel-web-retrieval-host url) url))))
                       results "\n")
                    result))
          :expandable-p (and result (not (string-empty-p result)))
          :initially-collapsed-p t)))

;;;; Declarations

(mevedel-define-tool WebFetch
  :category "web"
  :groups '(web)
  :description (concat "Fetch a web page or file by URL and return it as text. HTML comes back as \
readable text with links as [text](url); other text types (JSON, XML, Markdown, JavaScript) \
verbatim; images attached when the model accepts them; PDFs as their text (also saved as an \
artifact:// copy). Only http(s) URLs. A redirect to another host you may not fetch comes \
back as \"REDIRECT: URL\": fetch that URL to follow it. YouTube URLs return the video's \
description and English captions. Results over 50,000 characters are saved and previewed. \
Manual: " mevedel-web-manual-address)
  :args ((url string :required "The http or https URL to fetch"))
  :async-p t
  :read-only-p t
  :max-result-size 50000
  :get-domain (lambda (args) (mevedel-web-retrieval-host (plist-get args :url)))
  :function #'mevedel-web-fetch
  :renderer '((success . mevedel-web-render-fetch)))

(mevedel-define-tool WebSearch
  :category "web"
  :groups '(web)
  :description (concat "Search the web (DuckDuckGo) and return up to 10 numbered results: title, URL \
and snippet. allowed_domains keeps only results on those domains (and their subdomains); \
blocked_domains drops them; give one or the other. Fetch a result with WebFetch to read it. \
Manual: " mevedel-web-manual-address)
  :args ((query string :required "What to search for")
         (allowed_domains array :optional "Only results from these domains" :items string)
         (blocked_domains array :optional "No results from these domains" :items string))
  :async-p t
  :read-only-p t
  :max-result-size 20000
  :function #'mevedel-web-search
  :renderer '((success . mevedel-web-render-search)))

(provide 'mevedel-web)
;;; mevedel-web.el ends here
