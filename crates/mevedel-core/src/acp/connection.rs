//! One live ACP agent: its process, the SDK connection over its stdio,
//! the requests mevedel sends and the messages the agent sends back.
//!
//! The SDK runs the JSON-RPC machinery (framing, ids, routing answers,
//! `$/cancel_request` when a waiting caller gives up) in a driver task on
//! the shared runtime. Requests go out as the SDK's typed schema
//! messages; answers and notifications come back as JSON and are read
//! leniently ([`super::update`]), so one odd field of one agent does not
//! lose a whole message. Every notification handler returns at once:
//! updates go to the [`Listener`] in the order the agent sent them, before
//! the answer to the prompt they belong to, and the agent's requests go
//! to the [`Delegate`], which answers later.
//!
//! An agent that exits on its own is reported once as [`Event::Exited`]
//! with its last stderr lines, and every request waiting on it fails
//! saying so. [`Connection::stop`] cancels the turns in flight, then kills
//! every process of the agent; a connection dropped without stop kills
//! them too.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::{
    self as sdk, ByteStreams, Error as RpcError, UntypedMessage, is_connection_terminated,
    is_incoming_transport_closed, v1,
};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::net::unix::pipe;
use tokio::sync::{Notify, oneshot};
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tokio_util::sync::CancellationToken;

use super::child::{Child, acp_error, lock};
use super::config::{AgentConfig, Options, agent_env, running_as_root};
use super::delegate::{self, Delegate};
use super::schema;
use super::update::{self, Update};
use crate::error::Result;
use crate::process::{self, StderrTail};

/// Something the agent sent that is not an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A `session/update` of session SESSION_ID.
    Update { session_id: String, update: Update },
    /// Any other notification, as sent.
    Notification { method: String, params: Value },
    /// The agent's process ended without being stopped: MESSAGE says how
    /// (naming the agent), STDERR holds its last lines.
    Exited {
        message: String,
        stderr: Vec<String>,
    },
}

/// Where events go; called from the runtime's threads, in order.
pub type Listener = Arc<dyn Fn(Event) + Send + Sync>;

/// What the agent said about itself in `initialize` (whose protocol
/// version the SDK has checked: an agent answering another than 1 fails
/// the start).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInfo {
    /// `agentInfo`: name, title and version, when given.
    pub name: Option<String>,
    pub title: Option<String>,
    pub version: Option<String>,
    /// Whether it offers `session/load`.
    pub load_session: bool,
    /// Whether it takes MCP servers over HTTP in `session/new` (where
    /// mevedel serves its own tools).
    pub mcp_http: bool,
    /// The whole `initialize` result.
    pub raw: Value,
}

/// How to open a session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionOptions {
    /// The session's working directory; the workspace when `None`.
    pub cwd: Option<PathBuf>,
    /// MCP servers the agent connects to for this session.
    pub mcp_servers: Vec<schema::McpServer>,
    /// Claude Code's built-in tools to switch off, sent as
    /// `_meta.claudeCode.options.disallowedTools` (other agents ignore it).
    pub disallowed_tools: Vec<String>,
    /// More `_meta`, merged under the disallowed tools.
    pub meta: Option<Map<String, Value>>,
}

impl SessionOptions {
    /// The request's `_meta`: META with the disallowed tools set in it.
    pub(crate) fn request_meta(&self) -> Option<Map<String, Value>> {
        let mut meta = self.meta.clone().unwrap_or_default();
        if !self.disallowed_tools.is_empty() {
            let object = |value: &mut Value| {
                if !value.is_object() {
                    *value = json!({});
                }
            };
            let claude = meta.entry("claudeCode").or_insert_with(|| json!({}));
            object(claude);
            if let Some(claude) = claude.as_object_mut() {
                let options = claude.entry("options").or_insert_with(|| json!({}));
                object(options);
                if let Some(options) = options.as_object_mut() {
                    options.insert("disallowedTools".into(), json!(self.disallowed_tools));
                }
            }
        }
        (!meta.is_empty()).then_some(meta)
    }
}

/// An open session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    pub id: String,
    /// The agent's models (`availableModels`, `currentModelId`), if it has any.
    pub models: Option<Value>,
    /// Its modes (`availableModes`, `currentModeId`), if it has any.
    pub modes: Option<Value>,
    /// The whole answer.
    pub raw: Value,
}

/// Tokens of one turn, as the agent reports them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenUsage {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub total: Option<u64>,
    pub cached_read: Option<u64>,
    pub cached_write: Option<u64>,
    pub thought: Option<u64>,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    /// end_turn, max_tokens, max_turn_requests, refusal or cancelled.
    pub stop_reason: String,
    pub usage: Option<TokenUsage>,
    /// The whole answer to `session/prompt`.
    pub raw: Value,
}

/// State shared with the SDK's handlers and the exit watcher.
struct State {
    name: String,
    /// Set once `initialize` succeeded: an exit before is the start's error.
    started: AtomicBool,
    stopping: AtomicBool,
    listener: Listener,
    delegate: Arc<dyn Delegate>,
    /// Sessions with turns in flight, and how many.
    turns: Mutex<HashMap<String, usize>>,
    turn_ended: Notify,
    /// Permission requests per session, until answered.
    permissions: Mutex<Vec<(String, Arc<delegate::Slot>)>>,
}

impl State {
    fn notification(&self, message: UntypedMessage) {
        let (method, params) = message.into_parts();
        let event = match update::parse(&params) {
            Some((session_id, update)) if method == "session/update" => {
                Event::Update { session_id, update }
            }
            _ => Event::Notification { method, params },
        };
        (self.listener)(event);
    }

    fn request(&self, message: UntypedMessage, responder: v1::Responder<Value>) {
        let (method, params) = message.into_parts();
        let session = params
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some((request, slot)) = delegate::parse(&method, params, responder) {
            if let (delegate::Request::Permission(..), Some(session)) = (&request, session) {
                let mut pending = lock(&self.permissions);
                pending.retain(|(_, slot)| delegate::unanswered(slot));
                pending.push((session, slot));
            }
            self.delegate.request(&self.name, request);
        }
    }
}

/// Marks a session's turn in flight while it lives.
struct Turn<'a> {
    state: &'a State,
    session: String,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut turns = lock(&self.state.turns);
        if let Some(count) = turns.get_mut(&self.session) {
            *count -= 1;
            if *count == 0 {
                turns.remove(&self.session);
            }
        }
        drop(turns);
        self.state.turn_ended.notify_waiters();
    }
}

/// A running ACP agent.
pub struct Connection {
    state: Arc<State>,
    info: AgentInfo,
    cwd: PathBuf,
    options: Options,
    child: Arc<Child>,
    cx: v1::ConnectionTo<sdk::Agent>,
    shutdown: CancellationToken,
    driver: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

const INITIALIZE: &str = "initialize";
const SESSION_NEW: &str = "session/new";
const SESSION_LOAD: &str = "session/load";
const SESSION_PROMPT: &str = "session/prompt";
const SESSION_SET_CONFIG: &str = "session/set_config_option";
const SESSION_SET_MODEL: &str = "session/set_model";
const SESSION_CANCEL: &str = "session/cancel";

impl Connection {
    /// Start the agent CONFIG describes and initialize it: protocol
    /// version 1, with the fs and terminal capabilities, whose requests go
    /// to DELEGATE; events go to LISTENER. Call on the shared runtime.
    pub async fn start(
        config: AgentConfig,
        options: Options,
        delegate: Arc<dyn Delegate>,
        listener: Listener,
    ) -> Result<Connection> {
        let name = config.name.clone();
        let fail = |what: String| acp_error(format!("{name}: {what}"));
        let log = match options.stderr_log.as_deref() {
            Some(path) => Some(process::open_log(path).map_err(|e| fail(e.message))?),
            None => None,
        };
        let stderr = Arc::new(StderrTail::new(options.stderr_lines, log));
        let base = options
            .base_env
            .clone()
            .unwrap_or_else(|| std::env::vars_os().collect());
        let env = agent_env(base, &config.env, running_as_root());
        let mut argv = vec![OsString::from(&config.command)];
        argv.extend(config.args.iter().map(OsString::from));
        let (child, pipes) = Child::start(argv, env, config.cwd.clone(), stderr)
            .await
            .map_err(|e| fail(format!("cannot start {}: {}", config.command, e.message)))?;
        let child = Arc::new(child);
        let state = Arc::new(State {
            name: name.clone(),
            started: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            listener,
            delegate,
            turns: Mutex::new(HashMap::new()),
            turn_ended: Notify::new(),
            permissions: Mutex::new(Vec::new()),
        });
        let shutdown = CancellationToken::new();
        let (cx_tx, cx_rx) = oneshot::channel();
        let transport = ByteStreams::new(pipes.stdin.compat_write(), pipes.stdout.compat());
        let driver = tokio::spawn(drive(
            transport,
            Arc::clone(&state),
            shutdown.clone(),
            cx_tx,
        ));
        tokio::spawn(watch_exit(
            Arc::clone(&child),
            Arc::clone(&state),
            shutdown.clone(),
        ));
        let Ok(cx) = cx_rx.await else {
            // The SDK gave up before connecting: nothing to talk to.
            let strays = child.strays();
            shutdown.cancel();
            child.stop(strays, options.stop_grace).await;
            return Err(fail("the ACP connection could not be set up".into()));
        };
        let mut connection = Connection {
            state,
            info: AgentInfo {
                name: None,
                title: None,
                version: None,
                load_session: false,
                mcp_http: false,
                raw: Value::Null,
            },
            cwd: config.cwd,
            options,
            child,
            cx,
            shutdown,
            driver: Mutex::new(Some(driver)),
        };
        match connection.initialize().await {
            Ok(info) => {
                connection.info = info;
                connection.state.started.store(true, Ordering::SeqCst);
                Ok(connection)
            }
            Err(e) => {
                connection.stop().await;
                Err(e)
            }
        }
    }

    async fn initialize(&self) -> Result<AgentInfo> {
        let capabilities = schema::ClientCapabilities::new()
            .fs(schema::FileSystemCapabilities::new()
                .read_text_file(true)
                .write_text_file(true))
            .terminal(true);
        let request = schema::InitializeRequest::new(sdk::schema::ProtocolVersion::V1)
            .client_capabilities(capabilities)
            .client_info(schema::Implementation::new(
                "mevedel",
                env!("CARGO_PKG_VERSION"),
            ));
        let raw = self
            .call(INITIALIZE, request, Some(self.options.startup_timeout))
            .await?;
        let about = raw.get("agentInfo");
        let text = |key: &str| {
            about
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Ok(AgentInfo {
            name: text("name"),
            title: text("title"),
            version: text("version"),
            load_session: raw
                .pointer("/agentCapabilities/loadSession")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            mcp_http: raw
                .pointer("/agentCapabilities/mcpCapabilities/http")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            raw,
        })
    }

    /// The agent's name as configured.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    pub fn info(&self) -> &AgentInfo {
        &self.info
    }

    /// The agent's process id, which is also its process group.
    pub fn pid(&self) -> i32 {
        self.child.pid
    }

    /// The agent's last stderr lines.
    pub fn stderr(&self) -> Vec<String> {
        self.child.stderr.tail()
    }

    /// Open a new session.
    pub async fn new_session(&self, options: &SessionOptions) -> Result<SessionInfo> {
        let cwd = options.cwd.clone().unwrap_or_else(|| self.cwd.clone());
        let mut request =
            schema::NewSessionRequest::new(cwd).mcp_servers(options.mcp_servers.clone());
        if let Some(meta) = options.request_meta() {
            request = request.meta(meta);
        }
        let raw = self
            .call(SESSION_NEW, request, Some(self.options.request_timeout))
            .await?;
        let Some(id) = raw.get("sessionId").and_then(Value::as_str) else {
            return Err(self.error(format!("answered {SESSION_NEW} without a sessionId: {raw}")));
        };
        Ok(SessionInfo {
            id: id.to_string(),
            models: models_of(&raw),
            modes: raw.get("modes").cloned(),
            raw,
        })
    }

    /// Reopen session SESSION_ID, whose history the agent replays as
    /// updates before this returns. An error when the agent does not
    /// offer `session/load`.
    pub async fn load_session(
        &self,
        session_id: &str,
        options: &SessionOptions,
    ) -> Result<SessionInfo> {
        if !self.info.load_session {
            return Err(self.error(format!(
                "cannot resume session {session_id}: the agent does not offer {SESSION_LOAD}"
            )));
        }
        let cwd = options.cwd.clone().unwrap_or_else(|| self.cwd.clone());
        let mut request = schema::LoadSessionRequest::new(session_id.to_string(), cwd)
            .mcp_servers(options.mcp_servers.clone());
        if let Some(meta) = options.request_meta() {
            request = request.meta(meta);
        }
        let raw = self
            .call(SESSION_LOAD, request, Some(self.options.request_timeout))
            .await?;
        Ok(SessionInfo {
            id: session_id.to_string(),
            models: models_of(&raw),
            modes: raw.get("modes").cloned(),
            raw,
        })
    }

    /// Choose MODEL_ID for session SESSION_ID: its `model` configuration
    /// option (`session/set_config_option`), or, for an agent that only
    /// has the older unstable method, `session/set_model`. The agent's
    /// error, word for word, when neither is taken.
    pub async fn set_model(&self, session_id: &str, model_id: &str) -> Result<()> {
        let limit = Some(self.options.request_timeout);
        let option = json!({"sessionId": session_id, "configId": "model", "value": model_id});
        match self.call(SESSION_SET_CONFIG, option, limit).await {
            Ok(_) => Ok(()),
            Err(first) => {
                let older = json!({"sessionId": session_id, "modelId": model_id});
                match self.call(SESSION_SET_MODEL, older, limit).await {
                    Ok(_) => Ok(()),
                    Err(_) => Err(first),
                }
            }
        }
    }

    /// Run one turn of session SESSION_ID with PROMPT; its updates reach
    /// the listener before this returns. No time limit: end a turn with
    /// [`Connection::cancel`] or [`Connection::stop`].
    pub async fn prompt(
        &self,
        session_id: &str,
        prompt: Vec<schema::ContentBlock>,
    ) -> Result<TurnEnd> {
        if self.state.stopping.load(Ordering::SeqCst) {
            return Err(self.error("is stopping; no new turn".into()));
        }
        let _turn = self.begin_turn(session_id);
        let request = schema::PromptRequest::new(session_id.to_string(), prompt);
        let raw = self.call(SESSION_PROMPT, request, None).await?;
        let Some(stop_reason) = raw.get("stopReason").and_then(Value::as_str) else {
            return Err(self.error(format!(
                "answered {SESSION_PROMPT} without a stopReason: {raw}"
            )));
        };
        let usage = raw.get("usage").map(|usage| {
            let count = |key: &str| usage.get(key).and_then(Value::as_u64);
            TokenUsage {
                input: count("inputTokens"),
                output: count("outputTokens"),
                total: count("totalTokens"),
                cached_read: count("cachedReadTokens"),
                cached_write: count("cachedWriteTokens"),
                thought: count("thoughtTokens"),
            }
        });
        Ok(TurnEnd {
            stop_reason: stop_reason.to_string(),
            usage,
            raw,
        })
    }

    /// [`Connection::prompt`] with one text block.
    pub async fn prompt_text(&self, session_id: &str, text: &str) -> Result<TurnEnd> {
        let block = schema::ContentBlock::Text(schema::TextContent::new(text));
        self.prompt(session_id, vec![block]).await
    }

    /// Ask the agent to end session SESSION_ID's turn (`session/cancel`;
    /// the prompt then answers `cancelled`), and answer its unanswered
    /// permission requests `cancelled`.
    pub fn cancel(&self, session_id: &str) -> Result<()> {
        let notification = schema::CancelNotification::new(session_id.to_string());
        let sent = UntypedMessage::new(SESSION_CANCEL, notification)
            .and_then(|message| self.cx.send_notification(message));
        let pending: Vec<_> = {
            let mut permissions = lock(&self.state.permissions);
            let (mine, others) = permissions
                .drain(..)
                .partition(|(session, _)| session == session_id);
            *permissions = others;
            mine
        };
        for (_, slot) in pending {
            delegate::cancel_permission(&slot);
        }
        sent.map_err(|e| self.error(format!("cannot send {SESSION_CANCEL}: {e}")))
    }

    /// Stop the agent: cancel every turn in flight and wait (up to the
    /// cancel grace) for them to end, close the connection, then kill
    /// every process of the agent and wait until none is left.
    pub async fn stop(&self) {
        self.state.stopping.store(true, Ordering::SeqCst);
        // Found first: the agent may exit as its turns are cancelled or
        // its input closes, and leave them untraceable.
        let strays = self.child.strays();
        let sessions: Vec<String> = lock(&self.state.turns).keys().cloned().collect();
        for session in &sessions {
            let _ = self.cancel(session);
        }
        if !sessions.is_empty() {
            let _ = tokio::time::timeout(self.options.cancel_grace, async {
                loop {
                    // Registered before the check, so an end between the
                    // two is not missed.
                    let ended = self.state.turn_ended.notified();
                    tokio::pin!(ended);
                    ended.as_mut().enable();
                    if lock(&self.state.turns).is_empty() {
                        break;
                    }
                    ended.await;
                }
            })
            .await;
        }
        self.shutdown.cancel();
        self.child.stop(strays, self.options.stop_grace).await;
        let driver = lock(&self.driver).take();
        if let Some(mut driver) = driver
            && tokio::time::timeout(Duration::from_secs(2), &mut driver)
                .await
                .is_err()
        {
            driver.abort();
        }
    }

    /// Whether any process of the agent is still alive.
    pub fn alive(&self) -> bool {
        self.child.alive()
    }

    fn begin_turn(&self, session_id: &str) -> Turn<'_> {
        *lock(&self.state.turns)
            .entry(session_id.to_string())
            .or_insert(0) += 1;
        Turn {
            state: &self.state,
            session: session_id.to_string(),
        }
    }

    /// Send request METHOD with PARAMS and wait for its answer, at most
    /// LIMIT when given.
    async fn call(
        &self,
        method: &str,
        params: impl Serialize,
        limit: Option<Duration>,
    ) -> Result<Value> {
        let message = UntypedMessage::new(method, params)
            .map_err(|e| self.error(format!("cannot encode {method}: {e}")))?;
        let answer = self.cx.send_request(message).block_task();
        let answer = match limit {
            None => answer.await,
            Some(limit) => match tokio::time::timeout(limit, answer).await {
                Ok(answer) => answer,
                Err(_) => {
                    return Err(self.error_with_stderr(format!(
                        "did not answer {method} within {} s",
                        limit.as_secs_f64()
                    )));
                }
            },
        };
        match answer {
            Ok(value) => Ok(value),
            Err(e) => Err(self.explain(method, e).await),
        }
    }

    /// The error for METHOD failing with E: the agent's own error word for
    /// word, or how its process ended, with its last stderr lines.
    async fn explain(&self, method: &str, e: RpcError) -> crate::Error {
        let gone = is_incoming_transport_closed(&e)
            || is_connection_terminated(&e)
            || self.child.exit().is_some();
        if !gone {
            return self.error(format!("{method} failed: {e}"));
        }
        if self.state.stopping.load(Ordering::SeqCst) {
            return self.error(format!("was stopped before answering {method}"));
        }
        let how = self.child.exit_within(Duration::from_secs(2)).await;
        self.child.stderr_settled(Duration::from_millis(500)).await;
        self.error_with_stderr(match how {
            Some(how) => format!("{how} before answering {method}"),
            None => format!("closed its connection before answering {method}"),
        })
    }

    fn error(&self, what: String) -> crate::Error {
        acp_error(format!("{}: {what}", self.state.name))
    }

    fn error_with_stderr(&self, what: String) -> crate::Error {
        self.error(with_stderr(what, &self.child.stderr.tail()))
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if !self.state.stopping.swap(true, Ordering::SeqCst) {
            // Killed before the input closes: an agent exiting at its end
            // would orphan its descendants before they were found.
            self.child.kill_now();
            self.shutdown.cancel();
        }
        if let Some(driver) = lock(&self.driver).take() {
            driver.abort();
        }
    }
}

/// The models of a session answer RAW: its `models`, else its `model`
/// configuration option in the same shape (`availableModels` of
/// `modelId` and `name`, `currentModelId`), else `None`.
pub(crate) fn models_of(raw: &Value) -> Option<Value> {
    if let Some(models) = raw.get("models").filter(|m| !m.is_null()) {
        return Some(models.clone());
    }
    let option = raw
        .get("configOptions")?
        .as_array()?
        .iter()
        .find(|o| o.get("category").and_then(Value::as_str) == Some("model"))?;
    let available: Vec<Value> = option
        .get("options")?
        .as_array()?
        .iter()
        .filter_map(|o| {
            let id = o.get("value")?.as_str()?;
            let name = o.get("name").and_then(Value::as_str).unwrap_or(id);
            Some(json!({"modelId": id, "name": name}))
        })
        .collect();
    Some(json!({"availableModels": available, "currentModelId": option.get("currentValue")}))
}

/// WHAT followed by STDERR's lines, when there are any.
fn with_stderr(what: String, stderr: &[String]) -> String {
    if stderr.is_empty() {
        what
    } else {
        format!("{what}; its last stderr lines:\n{}", stderr.join("\n"))
    }
}

/// Run the SDK connection over TRANSPORT until the agent closes its
/// output or SHUTDOWN fires; its handle goes out through CX_TX.
async fn drive(
    transport: ByteStreams<Compat<pipe::Sender>, Compat<pipe::Receiver>>,
    state: Arc<State>,
    shutdown: CancellationToken,
    cx_tx: oneshot::Sender<v1::ConnectionTo<sdk::Agent>>,
) {
    let notified = Arc::clone(&state);
    let asked = Arc::clone(&state);
    let _ = sdk::Client
        .v1()
        .name("mevedel")
        .on_receive_notification(
            async move |message: UntypedMessage, _cx| {
                notified.notification(message);
                Ok(())
            },
            sdk::on_receive_notification!(),
        )
        .on_receive_request(
            async move |message: UntypedMessage, responder: v1::Responder<Value>, _cx| {
                asked.request(message, responder);
                Ok(())
            },
            sdk::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: v1::ConnectionTo<sdk::Agent>| {
            let _ = cx_tx.send(cx.clone());
            tokio::select! {
                _ = cx.incoming_closed() => {}
                _ = shutdown.cancelled() => {}
            }
            Ok(())
        })
        .await;
}

/// Report CHILD's exit unless it was stopped or never started (the
/// start's error says it then), and close the connection so that every
/// waiting request fails at once.
async fn watch_exit(child: Arc<Child>, state: Arc<State>, shutdown: CancellationToken) {
    let how = child.exited().await;
    if state.started.load(Ordering::SeqCst) && !state.stopping.load(Ordering::SeqCst) {
        child.stderr_settled(Duration::from_millis(500)).await;
        (state.listener)(Event::Exited {
            message: format!("{} {how}", state.name),
            stderr: child.stderr.tail(),
        });
    }
    shutdown.cancel();
}
