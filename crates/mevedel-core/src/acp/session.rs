//! The ACP client as Lisp drives it: one [`Agent`] per agent process,
//! every step run on `runtime`'s tokio runtime and answered by a `reply`
//! event; what the agent sends on its own arrives as events.
//!
//! Events (besides `reply`), each a plist starting with `:key`, the
//! string Lisp gave [`Agent::start`], so it finds the chat concerned:
//! - `acp-update`: a `session/update`, `(:key :session :kind ...)`, KIND
//!   one of `message`, `thought`, `user-message` (with `:text`, or
//!   `:block`, the content block as JSON), `tool-call` (`:id :name
//!   :update :title :tool-kind :status :raw-input :raw-output :content`,
//!   the raw parts as
//!   JSON text: they are the agent's tool input and output), `plan`
//!   (`:entries`, each `(CONTENT PRIORITY STATUS)`), `usage` (`:used
//!   :size :cost :currency`), `commands` (`:commands`, each `(NAME
//!   DESCRIPTION HINT)`), `mode` (`:mode`) or `other` (`:name`);
//! - `acp-request`: a request of the agent, `(:key :id :method :session
//!   ...)`, answered by [`answer`] with its `:id`; per method: `:path
//!   :line :limit` (read), `:path :content` (write), `:tool-call-id
//!   :name :title :tool-kind :raw-input :options` (permission, each option
//!   `(ID NAME KIND)`) or `:command :args :cwd :env :output-byte-limit`
//!   (terminal/create, answered with an execution spec: see
//!   [`super::terminal`], which answers the other terminal methods
//!   itself);
//! - `acp-exited`: `(:key :message :stderr)`, the agent ended on its own.
//!
//! What it does not do: answer a request itself (Lisp decides every
//! one), or keep any state about sessions and turns beyond the
//! connection's.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use agent_client_protocol::ErrorCode;
use serde::Serialize;
use serde_json::Value;

use super::child::lock;
use super::config::{AgentConfig, Options};
use super::connection::{Connection, Event, Listener, SessionInfo, SessionOptions, TurnEnd};
use super::delegate::{Delegate, Reply, Request};
use super::update::{Chunk, Update};
use super::{schema, terminal};
use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::exec::execution::Spec;
use crate::{events, runtime};

/// What starting an agent needs besides its [`AgentConfig`].
#[derive(Debug, Clone, Default)]
pub struct StartRequest {
    /// Names the agent in its events.
    pub key: String,
    /// Where every stderr line of the agent goes too.
    pub stderr_log: Option<PathBuf>,
    pub startup_timeout: Option<Duration>,
    pub request_timeout: Option<Duration>,
}

/// The connection of an agent, once started.
#[derive(Default)]
struct Slot {
    connection: Option<Arc<Connection>>,
    stopped: bool,
}

/// One agent process and its connection, as Lisp holds it.
pub struct Agent {
    key: String,
    slot: Arc<Mutex<Slot>>,
}

fn acp_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Exec, message)
}

impl Agent {
    /// Start CONFIG's agent in the background and return its handle at
    /// once; request ID is answered with `(:name :title :version
    /// :load-session :mcp-http :pid)` when `initialize` succeeded.
    pub fn start(id: i64, config: AgentConfig, request: StartRequest) -> Result<Agent> {
        let defaults = Options::default();
        let options = Options {
            stderr_log: request.stderr_log,
            startup_timeout: request.startup_timeout.unwrap_or(defaults.startup_timeout),
            request_timeout: request.request_timeout.unwrap_or(defaults.request_timeout),
            ..defaults
        };
        let key = request.key;
        let slot = Arc::new(Mutex::new(Slot::default()));
        let delegate: Arc<dyn Delegate> = Arc::new(LispDelegate { key: key.clone() });
        let listener = listener(key.clone());
        let started = Arc::clone(&slot);
        answer_with(id, async move {
            let connection =
                Arc::new(Connection::start(config, options, delegate, listener).await?);
            let info = connection.info().clone();
            let stopped = {
                let mut slot = lock(&started);
                if !slot.stopped {
                    slot.connection = Some(Arc::clone(&connection));
                }
                slot.stopped
            };
            if stopped {
                connection.stop().await;
                return Err(acp_error(format!(
                    "{}: stopped before it finished starting",
                    connection.name()
                )));
            }
            Ok(Datum::plist([
                ("name", Datum::opt_str(info.name)),
                ("title", Datum::opt_str(info.title)),
                ("version", Datum::opt_str(info.version)),
                ("load-session", Datum::bool(info.load_session)),
                ("mcp-http", Datum::bool(info.mcp_http)),
                ("pid", Datum::Int(i64::from(connection.pid()))),
            ]))
        })?;
        lock(agents()).retain(|agent| agent.strong_count() > 0);
        lock(agents()).push(Arc::downgrade(&slot));
        Ok(Agent { key, slot })
    }

    fn connection(&self) -> Result<Arc<Connection>> {
        let slot = lock(&self.slot);
        match &slot.connection {
            Some(connection) => Ok(Arc::clone(connection)),
            None if slot.stopped => Err(acp_error("the agent was stopped")),
            None => Err(acp_error("the agent has not started yet")),
        }
    }

    /// Open a session with OPTIONS; request ID is answered with
    /// `(:session-id ID :modes JSON :models JSON)`.
    pub fn new_session(&self, id: i64, options: SessionOptions) -> Result<()> {
        let connection = self.connection()?;
        answer_with(id, async move {
            let info = connection.new_session(&options).await?;
            Ok(session_datum(info))
        })
    }

    /// Reopen SESSION with OPTIONS (`session/load`: the agent replays its
    /// history as `acp-update` events before it answers); request ID is
    /// answered as for [`Agent::new_session`], or with the agent's error
    /// (or a refusal when it does not offer `session/load`).
    pub fn load_session(&self, id: i64, session: String, options: SessionOptions) -> Result<()> {
        let connection = self.connection()?;
        answer_with(id, async move {
            let info = connection.load_session(&session, &options).await?;
            Ok(session_datum(info))
        })
    }

    /// Choose MODEL for SESSION; request ID is answered with t, or with
    /// the agent's error.
    pub fn set_model(&self, id: i64, session: String, model: String) -> Result<()> {
        let connection = self.connection()?;
        answer_with(id, async move {
            connection.set_model(&session, &model).await?;
            Ok(Datum::T)
        })
    }

    /// Run a turn of SESSION with TEXTS as its prompt's text blocks;
    /// request ID is answered with `(:stop-reason :input :output
    /// :cached-read :cached-write :thought)` once the agent ends it.
    pub fn prompt(&self, id: i64, session: String, texts: Vec<String>) -> Result<()> {
        let connection = self.connection()?;
        let blocks = texts
            .into_iter()
            .map(|text| schema::ContentBlock::Text(schema::TextContent::new(text)))
            .collect();
        answer_with(id, async move {
            let end = connection.prompt(&session, blocks).await?;
            Ok(turn_end_datum(end))
        })
    }

    /// Ask the agent to end SESSION's turn (`session/cancel`).
    pub fn cancel(&self, session: &str) -> Result<()> {
        self.connection()?.cancel(session)
    }

    /// Stop the agent and every process of it; request ID is answered
    /// with t once none is left. Its unanswered requests are dropped.
    pub fn stop(&self, id: i64) -> Result<()> {
        let connection = {
            let mut slot = lock(&self.slot);
            slot.stopped = true;
            slot.connection.take()
        };
        let key = self.key.clone();
        answer_with(id, async move {
            if let Some(connection) = connection {
                connection.stop().await;
            }
            lock(pending()).retain(|_, (owner, _)| *owner != key);
            terminal::release_all(&key);
            Ok(Datum::T)
        })
    }

    /// Whether any process of the agent is alive.
    pub fn alive(&self) -> bool {
        lock(&self.slot)
            .connection
            .as_ref()
            .is_some_and(|c| c.alive())
    }
}

/// Every agent's slot, to stop them all when Emacs exits.
fn agents() -> &'static Mutex<Vec<Weak<Mutex<Slot>>>> {
    static AGENTS: OnceLock<Mutex<Vec<Weak<Mutex<Slot>>>>> = OnceLock::new();
    AGENTS.get_or_init(Default::default)
}

/// Stop every agent and wait, up to LIMIT, until none of their
/// processes is left: Emacs is exiting, and no finalizer would run.
/// Return how many agents were running.
pub fn stop_all(limit: Duration) -> Result<usize> {
    let connections: Vec<Arc<Connection>> = lock(agents())
        .drain(..)
        .filter_map(|slot| slot.upgrade())
        .filter_map(|slot| {
            let mut slot = lock(&slot);
            slot.stopped = true;
            slot.connection.take()
        })
        .collect();
    let count = connections.len();
    if count > 0 {
        runtime::get()?.block_on(async move {
            let stops = connections
                .into_iter()
                .map(|connection| tokio::spawn(async move { connection.stop().await }));
            let all = async {
                for stop in stops.collect::<Vec<_>>() {
                    let _ = stop.await;
                }
            };
            let _ = tokio::time::timeout(limit, all).await;
        });
    }
    lock(pending()).clear();
    Ok(count)
}

/// An open session as `(:session-id ID :modes JSON :models JSON)`.
fn session_datum(info: SessionInfo) -> Datum {
    let json = |value: Option<Value>| Datum::opt_str(value.map(|v| v.to_string()));
    Datum::plist([
        ("session-id", Datum::Str(info.id)),
        ("modes", json(info.modes)),
        ("models", json(info.models)),
    ])
}

fn turn_end_datum(end: TurnEnd) -> Datum {
    let usage = end.usage.unwrap_or_default();
    let count = |n: Option<u64>| n.map_or(Datum::Nil, |n| Datum::Int(n as i64));
    Datum::plist([
        ("stop-reason", Datum::Str(end.stop_reason)),
        ("input", count(usage.input)),
        ("output", count(usage.output)),
        ("cached-read", count(usage.cached_read)),
        ("cached-write", count(usage.cached_write)),
        ("thought", count(usage.thought)),
    ])
}

// ---- events ----

fn json_text(value: Option<&Value>) -> Datum {
    match value {
        None | Some(Value::Null) => Datum::Nil,
        Some(value) => Datum::Str(value.to_string()),
    }
}

/// The name serde gives VALUE (an enum of the schema, an id).
fn name_of<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The tool's name as the agent called it, when the agent says it:
/// Claude Code's in `_meta.claudeCode.toolName`, others' in `name`.
fn tool_name(raw: &Value) -> Option<String> {
    raw.pointer("/_meta/claudeCode/toolName")
        .or_else(|| raw.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn chunk_pairs(chunk: Chunk) -> (&'static str, Datum) {
    match chunk {
        Chunk::Text(text) => ("text", Datum::Str(text)),
        Chunk::Block(block) => ("block", Datum::Str(block.to_string())),
    }
}

/// UPDATE of SESSION as the `acp-update` plist.
pub fn update_datum(key: &str, session: String, update: Update) -> Datum {
    let mut pairs: Vec<(&str, Datum)> =
        vec![("key", Datum::str(key)), ("session", Datum::Str(session))];
    let kind = |name: &str| ("kind", Datum::Symbol(name.into()));
    match update {
        Update::Message(chunk) => pairs.extend([kind("message"), chunk_pairs(chunk)]),
        Update::Thought(chunk) => pairs.extend([kind("thought"), chunk_pairs(chunk)]),
        Update::UserMessage(chunk) => pairs.extend([kind("user-message"), chunk_pairs(chunk)]),
        Update::ToolCall(call) => pairs.extend([
            kind("tool-call"),
            ("id", Datum::Str(call.id)),
            ("name", Datum::opt_str(tool_name(&call.raw))),
            ("update", Datum::bool(call.is_update)),
            ("title", Datum::opt_str(call.title)),
            ("tool-kind", Datum::opt_str(call.kind)),
            ("status", Datum::opt_str(call.status)),
            ("raw-input", json_text(call.raw_input.as_ref())),
            ("raw-output", json_text(call.raw_output.as_ref())),
            ("content", json_text(call.raw.get("content"))),
        ]),
        Update::Plan(entries) => pairs.extend([
            kind("plan"),
            (
                "entries",
                Datum::List(
                    entries
                        .into_iter()
                        .map(|e| {
                            Datum::List(vec![
                                Datum::Str(e.content),
                                Datum::Str(e.priority),
                                Datum::Str(e.status),
                            ])
                        })
                        .collect(),
                ),
            ),
        ]),
        Update::Usage(usage) => pairs.extend([
            kind("usage"),
            (
                "used",
                usage.used.map_or(Datum::Nil, |n| Datum::Int(n as i64)),
            ),
            (
                "size",
                usage.size.map_or(Datum::Nil, |n| Datum::Int(n as i64)),
            ),
            (
                "cost",
                usage
                    .cost
                    .as_ref()
                    .map_or(Datum::Nil, |(a, _)| Datum::Float(*a)),
            ),
            ("currency", Datum::opt_str(usage.cost.map(|(_, c)| c))),
        ]),
        Update::Commands(commands) => pairs.extend([
            kind("commands"),
            (
                "commands",
                Datum::List(
                    commands
                        .into_iter()
                        .map(|c| {
                            Datum::List(vec![
                                Datum::Str(c.name),
                                Datum::Str(c.description),
                                Datum::opt_str(c.hint),
                            ])
                        })
                        .collect(),
                ),
            ),
        ]),
        Update::Mode(mode) => pairs.extend([kind("mode"), ("mode", Datum::Str(mode))]),
        Update::Other { kind: name, .. } => {
            pairs.extend([kind("other"), ("name", Datum::Str(name))])
        }
    }
    Datum::plist(pairs)
}

fn listener(key: String) -> Listener {
    Arc::new(move |event| {
        let event = match event {
            Event::Update { session_id, update } => {
                events::Event::new("acp-update", update_datum(&key, session_id, update))
            }
            Event::Notification { method, .. } => events::Event::new(
                "acp-update",
                Datum::plist([
                    ("key", Datum::str(&key)),
                    ("kind", Datum::Symbol("other".into())),
                    ("name", Datum::Str(method)),
                ]),
            ),
            Event::Exited { message, stderr } => events::Event::new(
                "acp-exited",
                Datum::plist([
                    ("key", Datum::str(&key)),
                    ("message", Datum::Str(message)),
                    (
                        "stderr",
                        Datum::List(stderr.into_iter().map(Datum::Str).collect()),
                    ),
                ]),
            ),
        };
        events::global().push(event);
    })
}

// ---- the agent's requests ----

/// A request waiting for Lisp's answer.
enum Pending {
    Read(Reply<schema::ReadTextFileResponse>),
    Write(Reply<schema::WriteTextFileResponse>),
    Permission(Reply<schema::RequestPermissionResponse>),
    /// A terminal to create, with the agent's output byte limit.
    Create(Reply<schema::CreateTerminalResponse>, Option<u64>),
}

/// Requests waiting for Lisp, by id, with the key of their agent.
fn pending() -> &'static Mutex<HashMap<i64, (String, Pending)>> {
    static PENDING: OnceLock<Mutex<HashMap<i64, (String, Pending)>>> = OnceLock::new();
    PENDING.get_or_init(Default::default)
}

fn next_request_id() -> i64 {
    static NEXT: AtomicI64 = AtomicI64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed) + 1
}

struct LispDelegate {
    key: String,
}

impl Delegate for LispDelegate {
    fn request(&self, _agent: &str, request: Request) {
        let id = next_request_id();
        let method = request.method();
        let mut pairs: Vec<(&str, Datum)> = vec![
            ("key", Datum::str(&self.key)),
            ("id", Datum::Int(id)),
            ("method", Datum::str(method)),
        ];
        let path = |p: &PathBuf| Datum::str(p.to_string_lossy());
        let line = |n: Option<u32>| n.map_or(Datum::Nil, |n| Datum::Int(i64::from(n)));
        let waiting = match request {
            Request::ReadTextFile(read, reply) => {
                pairs.extend([
                    ("session", Datum::Str(name_of(&read.session_id))),
                    ("path", path(&read.path)),
                    ("line", line(read.line)),
                    ("limit", line(read.limit)),
                ]);
                Pending::Read(reply)
            }
            Request::WriteTextFile(write, reply) => {
                pairs.extend([
                    ("session", Datum::Str(name_of(&write.session_id))),
                    ("path", path(&write.path)),
                    ("content", Datum::Str(write.content)),
                ]);
                Pending::Write(reply)
            }
            Request::Permission(ask, reply) => {
                let fields = &ask.tool_call.fields;
                pairs.extend([
                    ("session", Datum::Str(name_of(&ask.session_id))),
                    (
                        "tool-call-id",
                        Datum::Str(name_of(&ask.tool_call.tool_call_id)),
                    ),
                    (
                        "name",
                        Datum::opt_str(
                            serde_json::to_value(&ask.tool_call)
                                .ok()
                                .and_then(|raw| tool_name(&raw)),
                        ),
                    ),
                    ("title", Datum::opt_str(fields.title.clone())),
                    (
                        "tool-kind",
                        Datum::opt_str(fields.kind.as_ref().map(name_of)),
                    ),
                    ("raw-input", json_text(fields.raw_input.as_ref())),
                    (
                        "options",
                        Datum::List(
                            ask.options
                                .iter()
                                .map(|o| {
                                    Datum::List(vec![
                                        Datum::Str(name_of(&o.option_id)),
                                        Datum::str(&o.name),
                                        Datum::Str(name_of(&o.kind)),
                                    ])
                                })
                                .collect(),
                        ),
                    ),
                ]);
                Pending::Permission(reply)
            }
            Request::CreateTerminal(create, reply) => {
                pairs.extend([
                    ("session", Datum::Str(name_of(&create.session_id))),
                    ("command", Datum::Str(create.command)),
                    (
                        "args",
                        Datum::List(create.args.into_iter().map(Datum::Str).collect()),
                    ),
                    (
                        "cwd",
                        Datum::opt_str(create.cwd.map(|c| c.to_string_lossy().into_owned())),
                    ),
                    (
                        "env",
                        Datum::List(
                            create
                                .env
                                .into_iter()
                                .map(|v| Datum::Str(format!("{}={}", v.name, v.value)))
                                .collect(),
                        ),
                    ),
                    (
                        "output-byte-limit",
                        create
                            .output_byte_limit
                            .map_or(Datum::Nil, |n| Datum::Int(n as i64)),
                    ),
                ]);
                Pending::Create(reply, create.output_byte_limit)
            }
            Request::TerminalOutput(ask, reply) => {
                return terminal::output(&self.key, &name_of(&ask.terminal_id), reply);
            }
            Request::WaitForTerminalExit(ask, reply) => {
                return terminal::wait(&self.key, &name_of(&ask.terminal_id), reply);
            }
            Request::KillTerminal(ask, reply) => {
                return terminal::kill(&self.key, &name_of(&ask.terminal_id), reply);
            }
            Request::ReleaseTerminal(ask, reply) => {
                return terminal::release(&self.key, &name_of(&ask.terminal_id), reply);
            }
        };
        lock(pending()).insert(id, (self.key.clone(), waiting));
        events::global().push(events::Event::new("acp-request", Datum::plist(pairs)));
    }
}

/// Lisp's answer to one request of an agent.
#[derive(Debug, Clone)]
pub enum Answer {
    /// The text of a read.
    Text(String),
    /// A write was done.
    Written,
    /// The permission option chosen.
    Option(String),
    /// The permission request is void: its turn was cancelled.
    Cancelled,
    /// Run the terminal as this execution (boxed: it is far larger than
    /// the other answers).
    Terminal(Box<Spec>),
    /// An error: a JSON-RPC code and what the agent is told.
    Error(i32, String),
}

/// Answer the agent's request ID with ANSWER; false when no request ID
/// waits (answered, or its agent stopped), or ANSWER does not fit it.
pub fn answer(id: i64, answer: Answer) -> bool {
    let Some((key, waiting)) = lock(pending()).remove(&id) else {
        return false;
    };
    match (waiting, answer) {
        (waiting, Answer::Error(code, message)) => {
            let code = ErrorCode::from(code);
            match waiting {
                Pending::Read(reply) => reply.fail(code, message),
                Pending::Write(reply) => reply.fail(code, message),
                Pending::Permission(reply) => reply.fail(code, message),
                Pending::Create(reply, _) => reply.fail(code, message),
            }
            true
        }
        (Pending::Read(reply), Answer::Text(text)) => {
            reply.ok(schema::ReadTextFileResponse::new(text));
            true
        }
        (Pending::Write(reply), Answer::Written) => {
            reply.ok(schema::WriteTextFileResponse::new());
            true
        }
        (Pending::Permission(reply), Answer::Option(option)) => {
            reply.ok(schema::RequestPermissionResponse::new(
                schema::RequestPermissionOutcome::Selected(schema::SelectedPermissionOutcome::new(
                    option,
                )),
            ));
            true
        }
        (Pending::Create(reply, limit), Answer::Terminal(spec)) => {
            match terminal::create(&key, *spec, limit) {
                Ok(id) => reply.ok(schema::CreateTerminalResponse::new(id)),
                Err(e) => reply.fail(
                    ErrorCode::INTERNAL_ERROR,
                    format!("mevedel could not start the command: {}", e.message),
                ),
            }
            true
        }
        (Pending::Permission(reply), Answer::Cancelled) => {
            reply.ok(schema::RequestPermissionResponse::new(
                schema::RequestPermissionOutcome::Cancelled,
            ));
            true
        }
        (waiting, other) => {
            let message = format!("mevedel answered {other:?}, which does not fit the request");
            match waiting {
                Pending::Read(reply) => reply.fail(ErrorCode::INTERNAL_ERROR, message),
                Pending::Write(reply) => reply.fail(ErrorCode::INTERNAL_ERROR, message),
                Pending::Permission(reply) => reply.fail(ErrorCode::INTERNAL_ERROR, message),
                Pending::Create(reply, _) => reply.fail(ErrorCode::INTERNAL_ERROR, message),
            }
            false
        }
    }
}

/// Answer request ID with the outcome of the async WORK.
fn answer_with<F>(id: i64, work: F) -> Result<()>
where
    F: Future<Output = Result<Datum>> + Send + 'static,
{
    runtime::spawn_reply(id, "ACP", work)
}
