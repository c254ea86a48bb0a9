//! A whiteboard's state and every change to it: the model's atomic edits
//! (targets named by hash), a browser's elements merged by Excalidraw's
//! reconciliation rule, a rewind's restore, and the scene JSON that
//! saves and exports it. Pure data: no IO, no clock of its own (callers
//! pass the time), so the merge property test drives it directly.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use serde_json::{Map, Value, json};

use super::element::{self, TYPES, valid_id};
use crate::error::{Error, ErrorKind, Result};

/// One message of an element's discussion.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub at_ms: i64,
    pub author: String,
    pub text: String,
}

/// One contribution in the board's history.
#[derive(Debug, Clone, PartialEq)]
pub struct Contribution {
    pub at_ms: i64,
    pub author: String,
    pub summary: String,
    pub ids: Vec<String>,
}

/// What an edit, merge or restore changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    pub changed: Vec<String>,
    pub added: Vec<String>,
    pub deleted: Vec<String>,
    pub background: bool,
    pub files: Vec<String>,
}

impl Change {
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty()
            && self.added.is_empty()
            && self.deleted.is_empty()
            && !self.background
            && self.files.is_empty()
    }

    /// Every element id it touched.
    pub fn ids(&self) -> Vec<String> {
        let mut ids = self.changed.clone();
        ids.extend(self.added.iter().cloned());
        ids.extend(self.deleted.iter().cloned());
        ids
    }
}

/// Why an edit did nothing: hashes that no longer name a live element.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    pub hash: String,
    /// The element the hash named once (the op's `id`, or an earlier
    /// version's hash the board remembers), if known.
    pub element: Option<String>,
}

#[derive(Debug)]
pub enum Outcome {
    Done(Change),
    Conflicts(Vec<Conflict>),
}

/// A small generator for seeds and nonces (xorshift64*): they need to
/// differ, not to be secret.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    pub fn draw(&mut self) -> i64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as i64
    }

    fn id(&mut self) -> String {
        format!("m{:08x}{:08x}", self.draw() as u32, self.draw() as u32)
    }
}

#[derive(Debug, Clone)]
pub struct State {
    /// Every element ever seen, deleted ones as tombstones, in z-order.
    elements: Vec<Map<String, Value>>,
    /// Each element's hash, by position in `elements`.
    hashes: Vec<String>,
    index: HashMap<String, usize>,
    pub background: String,
    pub files: Map<String, Value>,
    pub discussions: BTreeMap<String, Vec<Message>>,
    pub history: Vec<Contribution>,
    rng: Rng,
    /// Hashes of replaced element versions -> element id, oldest first,
    /// so a stale hash can be reported with the element's current line.
    past: HashMap<String, String>,
    past_order: VecDeque<String>,
    /// While an edit runs: each element it replaced or added, so a
    /// failed edit can be taken back.
    journal: Option<Vec<(String, Before)>>,
}

/// An element as it was before an edit replaced it, with its hash; None
/// when the edit added it.
type Before = Option<(Map<String, Value>, String)>;

/// Replaced versions whose hashes the board remembers.
const PAST_HASHES: usize = 20_000;

fn bad(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Schema, message)
}

fn object(value: Value) -> Option<Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Keys no edit may set: identity and the reconciliation bookkeeping.
const FIXED: [&str; 5] = ["id", "type", "version", "versionNonce", "isDeleted"];

impl State {
    pub fn new(seed: u64) -> Self {
        State {
            elements: Vec::new(),
            hashes: Vec::new(),
            index: HashMap::new(),
            background: "#ffffff".into(),
            files: Map::new(),
            discussions: BTreeMap::new(),
            history: Vec::new(),
            rng: Rng::new(seed),
            past: HashMap::new(),
            past_order: VecDeque::new(),
            journal: None,
        }
    }

    /// The state a scene JSON text describes (the `scene` output or a
    /// `.excalidraw` file).
    pub fn from_scene(text: &str, seed: u64) -> Result<Self> {
        let scene: Value =
            serde_json::from_str(text).map_err(|e| bad(format!("the scene is not JSON: {e}")))?;
        let mut state = State::new(seed);
        for item in scene
            .get("elements")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let el = Self::checked_remote(item.clone())?;
            state.put(el);
        }
        if let Some(bg) = scene
            .pointer("/appState/viewBackgroundColor")
            .and_then(Value::as_str)
        {
            state.background = bg.into();
        }
        if let Some(files) = scene.get("files").and_then(Value::as_object) {
            state.files = files.clone();
        }
        if let Some(extra) = scene.get("mevedel") {
            for (el, messages) in extra
                .get("discussions")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let list = messages
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|m| Message {
                        at_ms: m.get("at").and_then(Value::as_i64).unwrap_or(0),
                        author: str_of(m, "author"),
                        text: str_of(m, "text"),
                    })
                    .collect();
                state.discussions.insert(el.clone(), list);
            }
            state.history = extra
                .get("history")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| Contribution {
                    at_ms: c.get("at").and_then(Value::as_i64).unwrap_or(0),
                    author: str_of(c, "author"),
                    summary: str_of(c, "summary"),
                    ids: c
                        .get("ids")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect(),
                })
                .collect();
        }
        Ok(state)
    }

    /// The scene as JSON: with EXPORT, what a `.excalidraw` file holds
    /// (live elements only); otherwise tombstones, discussions and
    /// history too, for saving and restoring.
    pub fn scene(&self, export: bool) -> Value {
        let elements: Vec<Value> = self
            .elements
            .iter()
            .filter(|e| !export || !element::is_deleted(e))
            .map(|e| Value::Object(e.clone()))
            .collect();
        let mut scene = json!({
            "type": "excalidraw",
            "version": 2,
            "source": "mevedel",
            "elements": elements,
            "appState": {"viewBackgroundColor": self.background, "gridSize": 20},
            "files": self.files,
        });
        if !export && let Value::Object(map) = &mut scene {
            let discussions: Map<String, Value> = self
                .discussions
                .iter()
                .map(|(el, list)| {
                    let list = list
                        .iter()
                        .map(|m| json!({"at": m.at_ms, "author": m.author, "text": m.text}))
                        .collect();
                    (el.clone(), Value::Array(list))
                })
                .collect();
            let history: Vec<Value> = self
                .history
                .iter()
                .map(|c| json!({"at": c.at_ms, "author": c.author, "summary": c.summary, "ids": c.ids}))
                .collect();
            map.insert(
                "mevedel".into(),
                json!({"discussions": discussions, "history": history}),
            );
        }
        scene
    }

    /// Live elements in z-order.
    pub fn live(&self) -> impl Iterator<Item = &Map<String, Value>> {
        self.elements.iter().filter(|e| !element::is_deleted(e))
    }

    /// Every element, tombstones included, in z-order.
    pub fn all(&self) -> &[Map<String, Value>] {
        &self.elements
    }

    pub fn get(&self, id: &str) -> Option<&Map<String, Value>> {
        self.index.get(id).map(|&i| &self.elements[i])
    }

    pub fn get_live(&self, id: &str) -> Option<&Map<String, Value>> {
        self.get(id).filter(|e| !element::is_deleted(e))
    }

    /// Element ID's hash (kept with it: a hash is a SHA-256 over its
    /// JSON, too dear to recompute for a whole board at every edit).
    pub fn hash(&self, id: &str) -> &str {
        self.index.get(id).map_or("", |&i| self.hashes[i].as_str())
    }

    fn put(&mut self, el: Map<String, Value>) {
        let id = element::id(&el).to_string();
        let hash = element::hash(&el);
        match self.index.get(&id) {
            Some(&i) => {
                let old = std::mem::replace(&mut self.hashes[i], hash);
                if let Some(journal) = &mut self.journal {
                    journal.push((id.clone(), Some((self.elements[i].clone(), old.clone()))));
                }
                if self.past.insert(old.clone(), id).is_none() {
                    self.past_order.push_back(old);
                    if self.past_order.len() > PAST_HASHES
                        && let Some(gone) = self.past_order.pop_front()
                    {
                        self.past.remove(&gone);
                    }
                }
                self.elements[i] = el;
            }
            None => {
                if let Some(journal) = &mut self.journal {
                    journal.push((id.clone(), None));
                }
                self.index.insert(id, self.elements.len());
                self.elements.push(el);
                self.hashes.push(hash);
            }
        }
    }

    /// An element from outside (a page, a scene file): an object with a
    /// valid id and a type.
    fn checked_remote(value: Value) -> Result<Map<String, Value>> {
        let el = object(value).ok_or_else(|| bad("an element is not an object"))?;
        if !valid_id(element::id(&el)) {
            return Err(bad(format!(
                "element id `{}` is not [a-zA-Z0-9_-]{{1,80}}",
                element::id(&el)
            )));
        }
        if !el.get("type").is_some_and(Value::is_string) {
            return Err(bad(format!("element {} has no type", element::id(&el))));
        }
        Ok(el)
    }

    /// Merge ELEMENTS a page sent, by the reconciliation rule. Returns
    /// what changed and, for each element the page holds an older
    /// version of, the board's (the page must be told).
    pub fn merge(&mut self, elements: Vec<Value>) -> Result<(Change, Vec<Map<String, Value>>)> {
        let mut change = Change::default();
        let mut newer_here = Vec::new();
        for value in elements {
            let remote = Self::checked_remote(value)?;
            let id = element::id(&remote).to_string();
            match self.get(&id) {
                Some(local) if !element::remote_wins(local, &remote) => {
                    if local != &remote {
                        newer_here.push(local.clone());
                    }
                }
                local => {
                    let was_live = local.is_some_and(|l| !element::is_deleted(l));
                    let now_live = !element::is_deleted(&remote);
                    match (was_live, now_live) {
                        (false, true) => change.added.push(id),
                        (true, false) => change.deleted.push(id),
                        (true, true) => change.changed.push(id),
                        (false, false) => {}
                    }
                    self.put(remote);
                }
            }
        }
        Ok((change, newer_here))
    }

    /// Files a page sent (images it added): new keys only, never a
    /// replacement of bytes the board holds.
    pub fn merge_files(&mut self, files: Map<String, Value>) -> Vec<String> {
        let mut added = Vec::new();
        for (key, file) in files {
            if valid_id(&key) && !self.files.contains_key(&key) && file.is_object() {
                self.files.insert(key.clone(), file);
                added.push(key);
            }
        }
        added
    }

    /// Bump EL as a local change: the next version and a fresh nonce.
    fn bump(&mut self, el: &mut Map<String, Value>, now_ms: i64) {
        el.insert("version".into(), json!(element::version(el) + 1));
        el.insert("versionNonce".into(), json!(self.rng.draw()));
        el.insert("updated".into(), json!(now_ms));
    }

    fn hash_index(&self) -> HashMap<String, String> {
        self.live()
            .map(|e| {
                (
                    self.hash(element::id(e)).to_string(),
                    element::id(e).to_string(),
                )
            })
            .collect()
    }

    /// Apply the model's OPS atomically: every op, or none when a named
    /// hash is stale (a conflict) or an op is invalid (an error).
    pub fn edit(&mut self, ops: &[Value], author: &str, now_ms: i64) -> Result<Outcome> {
        let hashes = self.hash_index();
        let mut conflicts = Vec::new();
        for op in ops {
            if let Some(h) = op.get("hash") {
                let h = h.as_str().unwrap_or_default();
                if !hashes.contains_key(h) {
                    let named = op.get("id").and_then(Value::as_str).map(String::from);
                    conflicts.push(Conflict {
                        hash: h.to_string(),
                        element: named.or_else(|| self.past.get(h).cloned()),
                    });
                }
            }
        }
        if !conflicts.is_empty() {
            return Ok(Outcome::Conflicts(conflicts));
        }
        // Undone from a journal on failure, not applied to a copy: a
        // copy of a big board would cost more than the edit.
        self.journal = Some(Vec::new());
        let background = self.background.clone();
        let mut change = Change::default();
        for (i, op) in ops.iter().enumerate() {
            if let Err(e) = self.apply(op, &hashes, now_ms, &mut change) {
                self.undo(background, &change.files);
                return Err(bad(format!("operation {i}: {}", e.message)));
            }
        }
        self.journal = None;
        if !change.is_empty() {
            self.history.push(Contribution {
                at_ms: now_ms,
                author: author.into(),
                summary: summary(&change),
                ids: change.ids(),
            });
        }
        Ok(Outcome::Done(change))
    }

    /// Take back the journalled changes of a failed edit, newest first.
    fn undo(&mut self, background: String, files: &[String]) {
        for (id, before) in self.journal.take().unwrap_or_default().into_iter().rev() {
            match before {
                Some((el, hash)) => {
                    if let Some(&i) = self.index.get(&id) {
                        self.elements[i] = el;
                        self.hashes[i] = hash;
                    }
                }
                None => {
                    self.index.remove(&id);
                    self.elements.pop();
                    self.hashes.pop();
                }
            }
        }
        self.background = background;
        for key in files {
            self.files.remove(key);
        }
    }

    fn target(&self, op: &Value, hashes: &HashMap<String, String>) -> Result<String> {
        let h = op
            .get("hash")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("needs the element's `hash`"))?;
        let id = hashes
            .get(h)
            .ok_or_else(|| bad(format!("hash {h} is stale")))?;
        if let Some(named) = op.get("id").and_then(Value::as_str)
            && named != id
        {
            return Err(bad(format!("hash {h} is element {id}, not {named}")));
        }
        if self.get_live(id).is_none() {
            return Err(bad(format!(
                "element {id} was deleted by an earlier operation"
            )));
        }
        Ok(id.clone())
    }

    fn apply(
        &mut self,
        op: &Value,
        hashes: &HashMap<String, String>,
        now_ms: i64,
        change: &mut Change,
    ) -> Result<()> {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "update" => {
                let id = self.target(op, hashes)?;
                let props = op
                    .get("set")
                    .and_then(Value::as_object)
                    .ok_or_else(|| bad("update needs `set`, an object of element keys"))?;
                let mut el = self.get(&id).cloned().unwrap_or_default();
                for (key, value) in props {
                    if FIXED.contains(&key.as_str()) {
                        return Err(bad(format!("`{key}` cannot be set")));
                    }
                    el.insert(key.clone(), value.clone());
                }
                if let Some(text) = props.get("text")
                    && el.contains_key("originalText")
                {
                    el.insert("originalText".into(), text.clone());
                }
                self.bump(&mut el, now_ms);
                self.put(el);
                if !change.added.contains(&id) && !change.changed.contains(&id) {
                    change.changed.push(id);
                }
            }
            "delete" => {
                let id = self.target(op, hashes)?;
                self.delete(&id, now_ms, change);
            }
            "add" => {
                let el = op
                    .get("element")
                    .and_then(Value::as_object)
                    .ok_or_else(|| bad("add needs `element`, an object"))?;
                let id = self.add(el, now_ms)?;
                change.added.push(id);
            }
            "insert" => {
                let items = op
                    .get("elements")
                    .and_then(Value::as_array)
                    .ok_or_else(|| bad("insert needs `elements`, an array"))?;
                let x = num(op, "x")?;
                let y = num(op, "y")?;
                for id in self.insert(items, x, y, now_ms)? {
                    change.added.push(id);
                }
            }
            "add-image" => {
                let key = op.get("key").and_then(Value::as_str).unwrap_or_default();
                if !valid_id(key) {
                    return Err(bad(format!(
                        "image key `{key}` is not [a-zA-Z0-9_-]{{1,80}}"
                    )));
                }
                let mime = op
                    .get("mime")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("add-image needs `mime`"))?;
                let data = op
                    .get("data")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("add-image needs `data`, base64"))?;
                let data_url = format!("data:{mime};base64,{data}");
                match self.files.get(key) {
                    Some(f) if f.get("dataURL").and_then(Value::as_str) != Some(&data_url) => {
                        return Err(bad(format!("image {key} already holds other bytes")));
                    }
                    Some(_) => {}
                    None => {
                        self.files.insert(
                            key.into(),
                            json!({"id": key, "mimeType": mime, "dataURL": data_url, "created": now_ms}),
                        );
                        change.files.push(key.into());
                    }
                }
                let mut el = Map::new();
                el.insert("type".into(), json!("image"));
                el.insert("fileId".into(), json!(key));
                for k in ["id", "x", "y", "width", "height"] {
                    if let Some(v) = op.get(k) {
                        el.insert(k.into(), v.clone());
                    }
                }
                let id = self.add(&el, now_ms)?;
                change.added.push(id);
            }
            "set-background" => {
                let color = op
                    .get("color")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("set-background needs `color`"))?;
                self.background = color.into();
                change.background = true;
            }
            other => return Err(bad(format!("unknown op `{other}`"))),
        }
        Ok(())
    }

    fn delete(&mut self, id: &str, now_ms: i64, change: &mut Change) {
        let mut gone = vec![id.to_string()];
        // A container's bound text goes with it, as in Excalidraw.
        for el in self.live() {
            if el.get("containerId").and_then(Value::as_str) == Some(id) {
                gone.push(element::id(el).to_string());
            }
        }
        for id in gone {
            if let Some(mut el) = self.get_live(&id).cloned() {
                el.insert("isDeleted".into(), json!(true));
                self.bump(&mut el, now_ms);
                self.put(el);
                change.changed.retain(|c| c != &id);
                change.deleted.push(id);
            }
        }
    }

    fn add(&mut self, given: &Map<String, Value>, now_ms: i64) -> Result<String> {
        let kind = given
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !TYPES.contains(&kind) {
            return Err(bad(format!(
                "element type `{kind}` is not one of {}",
                TYPES.join(", ")
            )));
        }
        let id = match given.get("id").and_then(Value::as_str) {
            Some(id) if !valid_id(id) => {
                return Err(bad(format!(
                    "element id `{id}` is not [a-zA-Z0-9_-]{{1,80}}"
                )));
            }
            Some(id) if self.get(id).is_some() => {
                return Err(bad(format!("element id `{id}` is taken")));
            }
            Some(id) => id.to_string(),
            None => self.rng.id(),
        };
        let seed = self.rng.draw();
        let mut el = element::with_defaults(kind, &id, seed, now_ms);
        for (key, value) in given {
            if !matches!(
                key.as_str(),
                "version" | "versionNonce" | "isDeleted" | "id"
            ) {
                el.insert(key.clone(), value.clone());
            }
        }
        if kind == "text" && !given.contains_key("originalText") {
            let text = el.get("text").cloned().unwrap_or(json!(""));
            el.insert("originalText".into(), text);
        }
        if let Some(container) = given.get("containerId").and_then(Value::as_str) {
            let mut host = self
                .get_live(container)
                .cloned()
                .ok_or_else(|| bad(format!("container {container} is not on the board")))?;
            let mut bound = host
                .get("boundElements")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            bound.push(json!({"type": "text", "id": id}));
            host.insert("boundElements".into(), Value::Array(bound));
            self.bump(&mut host, now_ms);
            self.put(host);
        }
        el.insert("versionNonce".into(), json!(self.rng.draw()));
        self.put(el);
        Ok(id)
    }

    /// Library item insertion: ITEMS with fresh ids and group ids, their
    /// references remapped, moved so their box starts at X, Y.
    fn insert(&mut self, items: &[Value], x: f64, y: f64, now_ms: i64) -> Result<Vec<String>> {
        let mut ids = HashMap::new();
        let mut groups = HashMap::new();
        let (mut min_x, mut min_y) = (f64::INFINITY, f64::INFINITY);
        for item in items {
            let el = item
                .as_object()
                .ok_or_else(|| bad("an inserted element is not an object"))?;
            ids.insert(element::id(el).to_string(), self.rng.id());
            for g in el
                .get("groupIds")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(g) = g.as_str() {
                    let fresh = self.rng.id();
                    groups.entry(g.to_string()).or_insert(fresh);
                }
            }
            min_x = min_x.min(el.get("x").and_then(Value::as_f64).unwrap_or(0.0));
            min_y = min_y.min(el.get("y").and_then(Value::as_f64).unwrap_or(0.0));
        }
        let remap = |v: &Value, table: &HashMap<String, String>| -> Value {
            v.as_str()
                .and_then(|s| table.get(s))
                .map_or_else(|| v.clone(), |s| json!(s))
        };
        let mut added = Vec::new();
        for item in items {
            let mut el = item.as_object().cloned().unwrap_or_default();
            let old = element::id(&el).to_string();
            let id = ids.get(&old).cloned().unwrap_or_else(|| self.rng.id());
            el.insert("id".into(), json!(id));
            if let Some(Value::Array(gs)) = el.get_mut("groupIds") {
                for g in gs.iter_mut() {
                    *g = remap(g, &groups);
                }
            }
            for key in ["containerId", "frameId"] {
                if let Some(v) = el.get(key).map(|v| remap(v, &ids)) {
                    el.insert(key.into(), v);
                }
            }
            for key in ["startBinding", "endBinding"] {
                if let Some(Value::Object(b)) = el.get_mut(key)
                    && let Some(v) = b.get("elementId").map(|v| remap(v, &ids))
                {
                    b.insert("elementId".into(), v);
                }
            }
            if let Some(Value::Array(bs)) = el.get_mut("boundElements") {
                for b in bs.iter_mut() {
                    if let Some(v) = b.get("id").map(|v| remap(v, &ids))
                        && let Value::Object(b) = b
                    {
                        b.insert("id".into(), v);
                    }
                }
            }
            let ex = el.get("x").and_then(Value::as_f64).unwrap_or(0.0);
            let ey = el.get("y").and_then(Value::as_f64).unwrap_or(0.0);
            el.insert("x".into(), json!(ex - min_x + x));
            el.insert("y".into(), json!(ey - min_y + y));
            let kind = el
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let seed = self.rng.draw();
            let mut full = element::with_defaults(&kind, &id, seed, now_ms);
            for (k, v) in el {
                if !matches!(k.as_str(), "version" | "versionNonce" | "isDeleted") {
                    full.insert(k, v);
                }
            }
            full.insert("versionNonce".into(), json!(self.rng.draw()));
            self.put(full);
            added.push(id);
        }
        Ok(added)
    }

    /// Rewind: make the board's elements, background and files those of
    /// SCENE, bumping versions above both so open pages follow.
    pub fn restore(&mut self, scene: &str, author: &str, now_ms: i64) -> Result<Change> {
        let target = State::from_scene(scene, 1)?;
        let mut change = Change::default();
        let wanted: HashSet<String> = target.live().map(|e| element::id(e).to_string()).collect();
        for el in target.live() {
            let id = element::id(el).to_string();
            let mut fresh = el.clone();
            let base = self
                .get(&id)
                .map_or(0, element::version)
                .max(element::version(el));
            fresh.insert("version".into(), json!(base));
            match self.get(&id) {
                Some(cur) if !element::is_deleted(cur) && self.hash(&id) == element::hash(el) => {
                    continue;
                }
                Some(cur) if !element::is_deleted(cur) => change.changed.push(id),
                _ => change.added.push(id),
            }
            self.bump(&mut fresh, now_ms);
            self.put(fresh);
        }
        let extra: Vec<String> = self
            .live()
            .map(|e| element::id(e).to_string())
            .filter(|id| !wanted.contains(id))
            .collect();
        for id in extra {
            self.delete(&id, now_ms, &mut change);
        }
        if self.background != target.background {
            self.background = target.background.clone();
            change.background = true;
        }
        for (key, file) in target.files {
            if !self.files.contains_key(&key) {
                self.files.insert(key.clone(), file);
                change.files.push(key);
            }
        }
        self.history.push(Contribution {
            at_ms: now_ms,
            author: author.into(),
            summary: format!("restored an earlier state: {}", summary(&change)),
            ids: change.ids(),
        });
        Ok(change)
    }

    /// Record a browser's burst of changes, coalescing with the previous
    /// line when the same author changed within a few seconds.
    pub fn note(&mut self, author: &str, change: &Change, now_ms: i64) {
        if change.is_empty() {
            return;
        }
        if let Some(last) = self.history.last_mut()
            && last.author == author
            && now_ms - last.at_ms < 5000
            && last.summary.starts_with("drew")
        {
            for id in change.ids() {
                if !last.ids.contains(&id) {
                    last.ids.push(id);
                }
            }
            last.at_ms = now_ms;
            last.summary = format!("drew: {} element(s)", last.ids.len());
            return;
        }
        self.history.push(Contribution {
            at_ms: now_ms,
            author: author.into(),
            summary: format!("drew: {} element(s)", change.ids().len()),
            ids: change.ids(),
        });
    }
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .into()
}

fn num(op: &Value, key: &str) -> Result<f64> {
    op.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| bad(format!("needs `{key}`, a number")))
}

fn summary(change: &Change) -> String {
    let mut parts = Vec::new();
    for (n, what) in [
        (change.added.len(), "added"),
        (change.changed.len(), "changed"),
        (change.deleted.len(), "deleted"),
    ] {
        if n > 0 {
            parts.push(format!("{what} {n}"));
        }
    }
    if change.background {
        parts.push("set the background".into());
    }
    if !change.files.is_empty() {
        parts.push(format!("stored {} image(s)", change.files.len()));
    }
    if parts.is_empty() {
        "no change".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests;
