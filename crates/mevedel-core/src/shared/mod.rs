//! Shared whiteboards: the board the user (in a browser) and the model
//! (through SharedEdit) draw on together. The board here is the
//! authority; pages are replicas that send their element changes and
//! take the board's (`host`).
//!
//! - [`board`]: the state and every change to it (pure data).
//! - [`view`]: the text views the model reads.
//! - [`render`]: `view.png` without a browser.
//! - [`host`]: the 127.0.0.1 HTTP + WebSocket server of the pages.
//!
//! Not here: the `shared://` addresses, tools, permissions, documents
//! and persistence, which are Lisp's (the scene JSON crosses).

pub mod board;
mod element;
pub mod host;
pub mod render;
pub mod view;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::events::{self, Event};
use crate::runtime;
use board::{Change, Message, Outcome, State};

use element::valid_id;

/// Messages queued for one page before it counts as too slow and is
/// dropped: the board never waits for a browser.
const PAGE_QUEUE: usize = 256;
/// How long a render waits for an open page before drawing headless.
const PAGE_RENDER_WAIT: Duration = Duration::from_secs(3);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// N fresh random bytes, from the kernel.
fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    use std::io::Read;
    let mut out = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut out))
        .map_err(|e| Error::io(ErrorKind::Internal, "cannot read random bytes", &e))?;
    Ok(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An open page of a board: its outgoing queue and what it acknowledged.
struct Page {
    id: u64,
    tx: mpsc::Sender<String>,
    acked: u64,
}

#[derive(Default)]
struct Pages {
    next: u64,
    open: Vec<Page>,
    /// Sequence number of the last change sent to pages.
    seq: u64,
    /// Callers waiting until every open page acknowledged a sequence number.
    waiters: Vec<(u64, oneshot::Sender<()>)>,
    renders: HashMap<u64, oneshot::Sender<std::result::Result<String, String>>>,
}

impl Pages {
    fn settle(&mut self) {
        let min = self.open.iter().map(|p| p.acked).min().unwrap_or(u64::MAX);
        let (done, waiting): (Vec<_>, Vec<_>) =
            self.waiters.drain(..).partition(|(seq, _)| *seq <= min);
        self.waiters = waiting;
        for (_, tx) in done {
            let _ = tx.send(());
        }
    }
}

pub(crate) struct Inner {
    id: String,
    key: String,
    /// The board's path segment and secret on the host.
    route: String,
    token: String,
    state: Mutex<State>,
    pages: Mutex<Pages>,
    closed: AtomicBool,
}

/// A board, as Lisp holds it.
pub struct Board(Arc<Inner>);

fn change_datum(change: &Change, lines: Vec<String>) -> Datum {
    let strs = |v: &[String]| Datum::List(v.iter().cloned().map(Datum::Str).collect());
    Datum::plist([
        ("status", Datum::Symbol("ok".into())),
        ("changed", strs(&change.changed)),
        ("added", strs(&change.added)),
        ("deleted", strs(&change.deleted)),
        ("lines", strs(&lines)),
    ])
}

impl Board {
    /// A board ID whose events carry KEY, holding SCENE (JSON) if given.
    pub fn open(id: &str, key: &str, scene: Option<&str>) -> Result<Board> {
        if !valid_id(id) {
            return Err(Error::new(
                ErrorKind::Schema,
                format!("board id `{id}` is not [a-zA-Z0-9_-]{{1,80}}"),
            ));
        }
        let seed = u64::from_le_bytes(random_bytes::<8>()?);
        let state = match scene {
            Some(text) => State::from_scene(text, seed)?,
            None => State::new(seed),
        };
        Ok(Board(Arc::new(Inner {
            id: id.into(),
            key: key.into(),
            route: hex(&random_bytes::<8>()?),
            token: hex(&random_bytes::<16>()?),
            state: Mutex::new(state),
            pages: Mutex::new(Pages::default()),
            closed: AtomicBool::new(false),
        })))
    }

    fn live(&self) -> Result<&Arc<Inner>> {
        if self.0.closed.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorKind::Resource,
                format!("board {} is closed", self.0.id),
            ));
        }
        Ok(&self.0)
    }

    pub fn overview(&self) -> Result<String> {
        let inner = self.live()?;
        let pages = lock(&inner.pages).open.len();
        Ok(view::overview(&inner.id, &lock(&inner.state), pages))
    }

    pub fn element(&self, id: &str) -> Result<Option<String>> {
        let inner = self.live()?;
        Ok(view::element(&lock(&inner.state), id))
    }

    pub fn discussions(&self) -> Result<String> {
        let inner = self.live()?;
        Ok(view::discussions(&inner.id, &lock(&inner.state)))
    }

    pub fn history(&self) -> Result<String> {
        let inner = self.live()?;
        Ok(view::history(&inner.id, &lock(&inner.state)))
    }

    pub fn scene(&self, export: bool) -> Result<String> {
        let inner = self.live()?;
        Ok(lock(&inner.state).scene(export).to_string())
    }

    /// The image stored under KEY: its MIME type and base64 bytes.
    pub fn image(&self, key: &str) -> Result<Option<(String, String)>> {
        let inner = self.live()?;
        let state = lock(&inner.state);
        Ok(state.files.get(key).and_then(|f| {
            let url = f.get("dataURL")?.as_str()?;
            let (head, data) = url.strip_prefix("data:")?.split_once(',')?;
            let mime = head.strip_suffix(";base64")?;
            Some((mime.to_string(), data.to_string()))
        }))
    }

    /// Apply the model's OPS (a JSON array) atomically for AUTHOR; see
    /// `board::State::edit`. The change reaches open pages at once.
    pub fn edit(&self, ops: &str, author: &str) -> Result<Datum> {
        let inner = self.live()?;
        let ops: Value = serde_json::from_str(ops).map_err(|e| {
            Error::new(
                ErrorKind::Schema,
                format!("the operations are not JSON: {e}"),
            )
        })?;
        let ops = ops
            .as_array()
            .ok_or_else(|| Error::new(ErrorKind::Schema, "the operations are not an array"))?;
        let mut state = lock(&inner.state);
        match state.edit(ops, author, now_ms())? {
            Outcome::Conflicts(conflicts) => {
                let items = conflicts
                    .into_iter()
                    .map(|c| {
                        let current = c.element.as_deref().and_then(|id| {
                            state
                                .get_live(id)
                                .map(|el| view::line(&inner.id, el, state.hash(id)))
                        });
                        Datum::plist([
                            ("hash", Datum::Str(c.hash)),
                            ("element", Datum::opt_str(c.element)),
                            ("current", Datum::opt_str(current)),
                        ])
                    })
                    .collect();
                Ok(Datum::plist([
                    ("status", Datum::Symbol("conflict".into())),
                    ("conflicts", Datum::List(items)),
                ]))
            }
            Outcome::Done(change) => Ok(inner.committed(&state, &change, None)),
        }
    }

    /// Rewind the board to SCENE (JSON); see `board::State::restore`.
    pub fn restore(&self, scene: &str, author: &str) -> Result<Datum> {
        let inner = self.live()?;
        let mut state = lock(&inner.state);
        let change = state.restore(scene, author, now_ms())?;
        Ok(inner.committed(&state, &change, None))
    }

    /// Add AUTHOR's TEXT to element EL's discussion; open pages show it.
    pub fn discuss(&self, el: &str, author: &str, text: &str) -> Result<()> {
        let inner = self.live()?;
        inner.add_comment(el, author, text, None)
    }

    /// The page address of this board, starting the host if needed;
    /// pages load their scripts from ASSETS.
    pub fn serve(&self, assets: &str) -> Result<String> {
        let inner = self.live()?;
        host::serve(inner, assets)
    }

    /// Answer request ID with the board as PNG (see the contract).
    pub fn render(&self, id: i64) -> Result<()> {
        let inner = Arc::clone(self.live()?);
        runtime::spawn_reply(id, "shared board render", async move {
            let asked = {
                let mut pages = lock(&inner.pages);
                let req = pages.seq.wrapping_add(pages.next) ^ now_ms() as u64;
                let first = pages.open.first().map(|p| p.tx.clone());
                first.and_then(|tx| {
                    let (reply, wait) = oneshot::channel();
                    let msg = json!({"t": "render", "req": req}).to_string();
                    tx.try_send(msg).ok()?;
                    pages.renders.insert(req, reply);
                    Some((req, wait))
                })
            };
            if let Some((req, wait)) = asked {
                let got = tokio::time::timeout(PAGE_RENDER_WAIT, wait).await;
                lock(&inner.pages).renders.remove(&req);
                if let Ok(Ok(Ok(data))) = got
                    && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(&data)
                    && let Ok(img) = image::load_from_memory(&bytes)
                {
                    return Ok(Datum::plist([
                        ("png", Datum::Str(data)),
                        ("width", Datum::Int(i64::from(img.width()))),
                        ("height", Datum::Int(i64::from(img.height()))),
                        ("source", Datum::Symbol("page".into())),
                    ]));
                }
            }
            let state = lock(&inner.state).clone();
            let (png, w, h) = tokio::task::spawn_blocking(move || render::png(&state))
                .await
                .map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))??;
            Ok(Datum::plist([
                (
                    "png",
                    Datum::Str(base64::engine::general_purpose::STANDARD.encode(png)),
                ),
                ("width", Datum::Int(i64::from(w))),
                ("height", Datum::Int(i64::from(h))),
                ("source", Datum::Symbol("headless".into())),
            ]))
        })
    }

    /// Answer request ID once every open page has acknowledged the
    /// board's latest change: (:pages N), N the pages that did.
    pub fn synced(&self, id: i64) -> Result<()> {
        let inner = Arc::clone(self.live()?);
        let wait = {
            let mut pages = lock(&inner.pages);
            let (tx, rx) = oneshot::channel();
            let seq = pages.seq;
            pages.waiters.push((seq, tx));
            pages.settle();
            rx
        };
        runtime::spawn_reply(id, "shared board sync", async move {
            let _ = wait.await;
            Ok(Datum::plist([(
                "pages",
                Datum::Int(lock(&inner.pages).open.len() as i64),
            )]))
        })
    }

    /// Close the board: its pages are disconnected and its calls fail.
    pub fn close(&self) {
        self.0.closed.store(true, Ordering::Release);
        host::forget(&self.0.route);
        let mut pages = lock(&self.0.pages);
        pages.open.clear();
        pages.settle();
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        self.close();
    }
}

impl Inner {
    fn event(&self, kind: &str, items: Vec<(&str, Datum)>) {
        let mut data = vec![Datum::Str(self.key.clone())];
        if let Datum::List(rest) = Datum::plist(items) {
            data.extend(rest);
        }
        events::global().push(Event::new(kind, Datum::List(data)));
    }

    /// After CHANGE was applied to STATE: tell the pages (all but
    /// EXCEPT) and return the edit's result.
    fn committed(&self, state: &State, change: &Change, except: Option<u64>) -> Datum {
        let ids = change.ids();
        let elements: Vec<Value> = ids
            .iter()
            .filter_map(|id| state.get(id).cloned().map(Value::Object))
            .collect();
        let files: Map<String, Value> = change
            .files
            .iter()
            .filter_map(|k| state.files.get(k).map(|f| (k.clone(), f.clone())))
            .collect();
        let mut highlight = change.changed.clone();
        highlight.extend(change.added.iter().cloned());
        self.broadcast(
            |seq| {
                json!({
                    "t": "update", "seq": seq, "elements": elements, "files": files,
                    "background": state.background, "highlight": highlight,
                })
                .to_string()
            },
            except,
        );
        let lines = highlight
            .iter()
            .filter_map(|id| {
                state
                    .get_live(id)
                    .map(|el| view::line(&self.id, el, state.hash(id)))
            })
            .collect();
        change_datum(change, lines)
    }

    /// Queue a message (made from the next sequence number) to every
    /// open page but EXCEPT; a page whose queue is full is dropped.
    fn broadcast(&self, message: impl FnOnce(u64) -> String, except: Option<u64>) {
        let mut pages = lock(&self.pages);
        if pages.open.is_empty() {
            return;
        }
        pages.seq += 1;
        let text = message(pages.seq);
        let before = pages.open.len();
        let seq = pages.seq;
        pages.open.retain_mut(|p| {
            if Some(p.id) == except {
                p.acked = p.acked.max(seq);
                return true;
            }
            p.tx.try_send(text.clone()).is_ok()
        });
        let after = pages.open.len();
        pages.settle();
        drop(pages);
        if after != before {
            self.event("shared-pages", vec![("open", Datum::Int(after as i64))]);
        }
    }

    fn add_comment(&self, el: &str, author: &str, text: &str, from: Option<u64>) -> Result<()> {
        if !valid_id(el) {
            return Err(Error::new(
                ErrorKind::Schema,
                format!("element id `{el}` is not [a-zA-Z0-9_-]{{1,80}}"),
            ));
        }
        let at = now_ms();
        lock(&self.state)
            .discussions
            .entry(el.into())
            .or_default()
            .push(Message {
                at_ms: at,
                author: author.into(),
                text: text.into(),
            });
        self.broadcast(
            |seq| json!({"t": "comment", "seq": seq, "element": el, "author": author, "text": text, "at": at}).to_string(),
            None,
        );
        if from.is_some() {
            self.event(
                "shared-comment",
                vec![
                    ("element", Datum::str(el)),
                    ("author", Datum::str(author)),
                    ("text", Datum::str(text)),
                ],
            );
        }
        Ok(())
    }

    /// A new page: its id, queue and the message that starts it.
    fn attach(&self) -> (u64, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(PAGE_QUEUE);
        // The board's state before its pages, as everywhere, so the
        // init message and the page's place in the broadcasts agree.
        let state = lock(&self.state);
        let mut pages = lock(&self.pages);
        pages.next += 1;
        let id = pages.next;
        let discussions: Map<String, Value> = state
            .discussions
            .iter()
            .map(|(el, list)| {
                let list = list
                    .iter()
                    .map(|m| json!({"author": m.author, "text": m.text, "at": m.at_ms}))
                    .collect();
                (el.clone(), Value::Array(list))
            })
            .collect();
        let init = json!({
            "t": "init", "board": self.id, "seq": pages.seq,
            "elements": state.all(), "files": state.files,
            "background": state.background, "discussions": discussions,
        });
        let _ = tx.try_send(init.to_string());
        let acked = pages.seq;
        pages.open.push(Page { id, tx, acked });
        let open = pages.open.len();
        drop(pages);
        drop(state);
        self.event("shared-pages", vec![("open", Datum::Int(open as i64))]);
        (id, rx)
    }

    fn detach(&self, page: u64) {
        let mut pages = lock(&self.pages);
        let before = pages.open.len();
        pages.open.retain(|p| p.id != page);
        let open = pages.open.len();
        pages.settle();
        drop(pages);
        if open != before && !self.closed.load(Ordering::Acquire) {
            self.event("shared-pages", vec![("open", Datum::Int(open as i64))]);
        }
    }

    /// One message from PAGE. Malformed messages are ignored: a page is
    /// a replica, and a bad one cannot harm the board.
    fn receive(&self, page: u64, text: &str) {
        let Ok(msg) = serde_json::from_str::<Value>(text) else {
            return;
        };
        match msg.get("t").and_then(Value::as_str) {
            Some("elements") => self.take_page_changes(page, msg),
            Some("ack") => {
                let seq = msg.get("seq").and_then(Value::as_u64).unwrap_or(0);
                let mut pages = lock(&self.pages);
                if let Some(p) = pages.open.iter_mut().find(|p| p.id == page) {
                    p.acked = p.acked.max(seq);
                }
                pages.settle();
            }
            Some("comment") => {
                let el = msg
                    .get("element")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let text = msg.get("text").and_then(Value::as_str).unwrap_or_default();
                if !text.trim().is_empty() {
                    let _ = self.add_comment(el, "user", text, Some(page));
                }
            }
            Some("png") => {
                let req = msg.get("req").and_then(Value::as_u64).unwrap_or(0);
                let reply = lock(&self.pages).renders.remove(&req);
                if let Some(reply) = reply {
                    let data = msg.get("data").and_then(Value::as_str).map(String::from);
                    let _ = reply.send(data.ok_or_else(|| "the page could not draw".into()));
                }
            }
            _ => {}
        }
    }

    /// A page's changes: `elements` the user made, `synced` ones only the
    /// page's bookkeeping changed (Excalidraw giving a board element its
    /// z-order `index`). Both are merged and sent on; only the user's
    /// reach the history and Lisp.
    fn take_page_changes(&self, page: u64, msg: Value) {
        let list = |key: &str| {
            msg.get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let mut elements = list("elements");
        let synced = list("synced");
        let quiet: HashSet<String> = synced
            .iter()
            .filter_map(|e| e.get("id").and_then(Value::as_str).map(String::from))
            .collect();
        elements.extend(synced);
        let mut state = lock(&self.state);
        let mut change = match state.merge(elements) {
            Ok((change, newer)) => {
                if !newer.is_empty() {
                    let mut pages = lock(&self.pages);
                    let msg = json!({"t": "update", "seq": pages.seq, "elements": newer, "highlight": []});
                    if let Some(p) = pages.open.iter().find(|p| p.id == page) {
                        let _ = p.tx.try_send(msg.to_string());
                    }
                    pages.settle();
                }
                change
            }
            Err(_) => return,
        };
        if let Some(files) = msg.get("files").and_then(Value::as_object) {
            change.files = state.merge_files(files.clone());
        }
        if let Some(bg) = msg.get("background").and_then(Value::as_str)
            && bg != state.background
        {
            state.background = bg.into();
            change.background = true;
        }
        if change.is_empty() {
            return;
        }
        self.committed(&state, &change, Some(page));
        let mut told = change;
        for ids in [&mut told.changed, &mut told.added, &mut told.deleted] {
            ids.retain(|id| !quiet.contains(id));
        }
        if told.is_empty() {
            return;
        }
        state.note("user", &told, now_ms());
        drop(state);
        let strs = |v: &[String]| Datum::List(v.iter().cloned().map(Datum::Str).collect());
        let mut ids = told.changed.clone();
        ids.extend(told.added.iter().cloned());
        self.event(
            "shared-changed",
            vec![
                ("author", Datum::str("user")),
                ("ids", strs(&ids)),
                ("deleted", strs(&told.deleted)),
                ("background", Datum::bool(told.background)),
            ],
        );
    }
}
