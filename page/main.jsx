// The whiteboard page mevedel serves on 127.0.0.1: the real Excalidraw
// editor kept in step with the board in Emacs over one WebSocket.
//
// The board in Emacs is the authority; this page is a replica. Local
// edits go out (debounced here, never in the host; at once when the page
// is left or hidden) as the elements whose version the board has not
// seen; the board's changes come in and are merged by Excalidraw's own
// reconciliation (higher version wins, ties by lower versionNonce),
// which the host applies too. Not here: any network access beyond the
// page's own origin, any state of its own that survives a reload.

import React, { useCallback, useEffect, useRef, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  CaptureUpdateAction,
  Excalidraw,
  exportToBlob,
  reconcileElements,
  restoreElements,
  sceneCoordsToViewportCoords,
} from "@excalidraw/excalidraw";
import "@excalidraw/excalidraw/index.css";
import "./page.css";

// How long the page waits for more local changes before sending them.
const SEND_DEBOUNCE_MS = 40;
// How long the board's changes stay highlighted.
const HIGHLIGHT_MS = 1800;
const RECONNECT_MS = 1000;

// What a page may change in a board element without the user doing
// anything: Excalidraw gives each element its z-order index.
const BOOKKEEPING = new Set(["index", "version", "versionNonce", "updated"]);

// Absent, null and empty lists mean the same to Excalidraw, which
// turns one into another when it restores an element.
const plain = (v) => JSON.stringify(v === undefined || (Array.isArray(v) && !v.length) ? null : v);

/** Whether A and B differ only in bookkeeping. */
function sameContent(a, b) {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) {
    if (!BOOKKEEPING.has(k) && plain(a[k]) !== plain(b[k])) return false;
  }
  return true;
}

const token = new URLSearchParams(location.search).get("token") || "";
const socketUrl = `ws://${location.host}${location.pathname}ws?token=${encodeURIComponent(token)}`;

// Keep the token out of the address bar (and its history) once read.
history.replaceState(null, "", location.pathname + "?token=" + encodeURIComponent(token));

function blobToBase64(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1]);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

/** The link to the board: the socket, what the board has seen, sending. */
class Link {
  constructor(onStatus, onComment, onHighlight, onInit) {
    this.api = null;
    this.known = new Map(); // element id -> version the board holds
    this.boardCopy = new Map(); // element id -> the element as the board sent it
    this.sentFiles = new Set();
    this.background = null;
    this.timer = null;
    this.onStatus = onStatus;
    this.onComment = onComment;
    this.onHighlight = onHighlight;
    this.onInit = onInit;
    this.ready = false;
    this.connect();
    // Leaving the page would drop an edit still waiting out the
    // debounce, and a hidden page may be discarded without notice: send
    // it now. The socket is still open in these events.
    const now = () => this.flushNow();
    addEventListener("pagehide", now);
    addEventListener("beforeunload", now);
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "hidden") now();
    });
  }

  connect() {
    this.socket = new WebSocket(socketUrl);
    this.socket.onopen = () => this.onStatus("connected");
    this.socket.onclose = () => {
      this.ready = false;
      this.onStatus("disconnected");
      setTimeout(() => this.connect(), RECONNECT_MS);
    };
    this.socket.onmessage = (event) => this.receive(JSON.parse(event.data));
  }

  send(message) {
    if (this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(message));
    }
  }

  /** Merge the board's ELEMENTS into the scene; remember their versions. */
  merge(elements, files, background) {
    const api = this.api;
    if (files && Object.keys(files).length) {
      api.addFiles(Object.values(files));
      Object.keys(files).forEach((id) => this.sentFiles.add(id));
    }
    const local = api.getSceneElementsIncludingDeleted();
    const remote = restoreElements(elements, local, { refreshDimensions: false });
    const merged = reconcileElements(local, remote, api.getAppState());
    const byId = new Map(elements.map((e) => [e.id, e]));
    for (const e of elements) this.boardCopy.set(e.id, e);
    for (const el of merged) {
      const board = byId.get(el.id);
      if (board && el.version === board.version && el.versionNonce === board.versionNonce) {
        this.known.set(el.id, el.version);
      }
    }
    const update = { elements: merged, captureUpdate: CaptureUpdateAction.NEVER };
    if (background && background !== api.getAppState().viewBackgroundColor) {
      this.background = background;
      update.appState = { viewBackgroundColor: background };
    }
    api.updateScene(update);
  }

  receive(msg) {
    if (!this.api) {
      this.pending = (this.pending || []).concat([msg]);
      return;
    }
    switch (msg.t) {
      case "init":
        this.known.clear();
        this.boardCopy.clear();
        this.merge(msg.elements, msg.files, msg.background);
        this.ready = true;
        this.onInit(msg);
        this.flush();
        this.send({ t: "ack", seq: msg.seq });
        break;
      case "update":
        this.merge(msg.elements, msg.files, msg.background);
        if (msg.highlight && msg.highlight.length) this.onHighlight(msg.highlight);
        this.send({ t: "ack", seq: msg.seq });
        break;
      case "comment":
        this.onComment(msg);
        this.send({ t: "ack", seq: msg.seq });
        break;
      case "render":
        this.render(msg.req);
        break;
      default:
        break;
    }
  }

  attach(api) {
    this.api = api;
    const pending = this.pending || [];
    this.pending = [];
    pending.forEach((m) => this.receive(m));
  }

  async render(req) {
    try {
      const api = this.api;
      const blob = await exportToBlob({
        elements: api.getSceneElements(),
        appState: { ...api.getAppState(), exportBackground: true },
        files: api.getFiles(),
        mimeType: "image/png",
        exportPadding: 20,
      });
      this.send({ t: "png", req, data: await blobToBase64(blob) });
    } catch (err) {
      this.send({ t: "png", req, error: String(err) });
    }
  }

  /** A local change: send it soon. */
  changed() {
    if (!this.ready) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.flush(), SEND_DEBOUNCE_MS);
  }

  /** Send the waiting local changes without waiting for more. */
  flushNow() {
    clearTimeout(this.timer);
    this.timer = null;
    this.flush();
  }

  flush() {
    const api = this.api;
    if (!api || !this.ready) return;
    const appState = api.getAppState();
    // An element still being drawn or typed goes out once finished.
    const busy = new Set(
      [appState.newElement, appState.editingTextElement, appState.resizingElement]
        .filter(Boolean)
        .map((e) => e.id),
    );
    const elements = api
      .getSceneElementsIncludingDeleted()
      .filter((el) => !busy.has(el.id) && this.known.get(el.id) !== el.version);
    const files = {};
    for (const [id, file] of Object.entries(api.getFiles())) {
      if (!this.sentFiles.has(id)) files[id] = file;
    }
    const mine = elements.filter((el) => {
      const board = this.boardCopy.get(el.id);
      return !board || !sameContent(board, el);
    });
    const mineIds = new Set(mine.map((el) => el.id));
    const synced = elements.filter((el) => !mineIds.has(el.id));
    const message = { t: "elements", elements: mine, synced, files };
    if (appState.viewBackgroundColor !== this.background) {
      message.background = appState.viewBackgroundColor;
    }
    if (!elements.length && !Object.keys(files).length && !message.background) return;
    elements.forEach((el) => {
      this.known.set(el.id, el.version);
      this.boardCopy.set(el.id, el);
    });
    Object.keys(files).forEach((id) => this.sentFiles.add(id));
    if (message.background) this.background = message.background;
    this.send(message);
    if (busy.size) this.changed();
  }
}

function Highlights({ api, ids }) {
  if (!api || !ids.length) return null;
  const appState = api.getAppState();
  const byId = new Map(api.getSceneElements().map((e) => [e.id, e]));
  return ids.map((id) => {
    const el = byId.get(id);
    if (!el) return null;
    const a = sceneCoordsToViewportCoords({ sceneX: el.x, sceneY: el.y }, appState);
    const b = sceneCoordsToViewportCoords(
      { sceneX: el.x + el.width, sceneY: el.y + el.height },
      appState,
    );
    const style = {
      left: Math.min(a.x, b.x) - 6 - appState.offsetLeft,
      top: Math.min(a.y, b.y) - 6 - appState.offsetTop,
      width: Math.abs(b.x - a.x) + 12,
      height: Math.abs(b.y - a.y) + 12,
    };
    return <div key={id} className="mevedel-highlight" data-element-id={id} style={style} />;
  });
}

function Discussion({ element, messages, onSend }) {
  const [text, setText] = useState("");
  const submit = () => {
    if (text.trim()) {
      onSend(text);
      setText("");
    }
  };
  return (
    <div className="mevedel-discussion" data-element-id={element.id}>
      <div className="mevedel-discussion-title">Discussion · {element.type} {element.id}</div>
      <ol>
        {messages.map((m, i) => (
          <li key={i} className={m.author === "user" ? "mine" : "theirs"}>
            <b>{m.author}</b> {m.text}
          </li>
        ))}
      </ol>
      <textarea
        value={text}
        placeholder="Comment for the model (Ctrl+Enter sends)"
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          e.stopPropagation();
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submit();
        }}
      />
      <button onClick={submit}>Send</button>
    </div>
  );
}

function App() {
  const [status, setStatus] = useState("connecting");
  const [highlight, setHighlight] = useState([]);
  const [discussions, setDiscussions] = useState({});
  const [selected, setSelected] = useState(null);
  const [title, setTitle] = useState("");
  const apiRef = useRef(null);
  const linkRef = useRef(null);

  if (!linkRef.current) {
    linkRef.current = new Link(
      setStatus,
      (c) =>
        setDiscussions((d) => ({
          ...d,
          [c.element]: [...(d[c.element] || []), { author: c.author, text: c.text, at: c.at }],
        })),
      (ids) => {
        setHighlight(ids);
        clearTimeout(linkRef.current.highlightTimer);
        linkRef.current.highlightTimer = setTimeout(() => setHighlight([]), HIGHLIGHT_MS);
      },
      (init) => {
        setTitle(init.board);
        setDiscussions(init.discussions || {});
        document.title = `${init.board} · mevedel whiteboard`;
      },
    );
    // For tests and the curious: the scene as the page holds it.
    window.mevedelBoard = {
      elements: () => (apiRef.current ? apiRef.current.getSceneElements() : []),
      status: () => linkRef.current.socket.readyState,
      ready: () => linkRef.current.ready,
    };
  }

  const onChange = useCallback((elements, appState) => {
    linkRef.current.changed();
    const ids = Object.keys(appState.selectedElementIds || {});
    const el = ids.length === 1 ? elements.find((e) => e.id === ids[0]) : null;
    setSelected((prev) => (prev?.id === el?.id ? prev : el || null));
  }, []);

  return (
    <div className="mevedel-page">
      <Excalidraw
        excalidrawAPI={(api) => {
          if (api && apiRef.current !== api) {
            apiRef.current = api;
            linkRef.current.attach(api);
          }
        }}
        onChange={onChange}
        UIOptions={{ canvasActions: { loadScene: false } }}
        renderTopRightUI={() => (
          <div className={`mevedel-status ${status}`} title={`board ${title}`}>
            {title} · {status}
          </div>
        )}
      />
      <Highlights api={apiRef.current} ids={highlight} />
      {selected && (
        <Discussion
          element={selected}
          messages={discussions[selected.id] || []}
          onSend={(text) => linkRef.current.send({ t: "comment", element: selected.id, text })}
        />
      )}
    </div>
  );
}

createRoot(document.getElementById("root")).render(<App />);
