//! The servers of one session: which are configured, their state, and
//! every operation on them (list, read, call), each started on first use
//! or all at once.
//!
//! Rules the registry itself enforces, so no caller can forget them:
//! - a server from a workspace `.mcp.json` never starts unless approved
//!   ([`Registry::approve`]); trying is an error naming it;
//! - a start is bounded by the startup timeout counted from launch, and
//!   callers arriving meanwhile wait for that same start, never longer;
//! - a failed server is retried on next use only after a backoff that
//!   doubles per failure (1 s up to 60 s); [`Registry::restart`] retries
//!   at once;
//! - a crash is reported once, through the listener, with the last stderr
//!   lines; the lines also go to the session's log file;
//! - stopping kills the whole process group and waits for it to be gone.
//! - a stdio server chosen for confinement ([`Options::sandbox`]) starts
//!   inside the sandbox or not at all.
//!
//! Every operation is async and meant for `runtime`'s tokio runtime; a
//! tool call takes a timeout, a progress callback and a cancellation
//! token, and cancelling sends `notifications/cancelled`.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, GetPromptRequestParams, JsonObject,
    ReadResourceRequestParams, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::config::{ServerConfig, Source};
use super::confine::Confinement;
use super::connection::{
    self, Child, Connection, Launch, Listener, ProgressFn, Shared, lock, mcp_error,
};
use super::content::{
    Content, PromptInfo, PromptResult, ResourceInfo, TemplateInfo, ToolInfo, ToolResult,
    datum_count, datum_list, resource_contents,
};
use super::names::NameIndex;
use crate::datum::Datum;
use crate::error::Result;
use crate::process::StderrTail;

/// How the registry runs its servers.
#[derive(Debug, Clone)]
pub struct Options {
    /// From launch to a finished `initialize`.
    pub startup_timeout: Duration,
    /// Limit of a request (list, read, call) without a timeout of its own.
    pub request_timeout: Duration,
    /// Between SIGTERM and SIGKILL when stopping a stdio server.
    pub stop_grace: Duration,
    /// Stderr lines kept per server.
    pub stderr_lines: usize,
    /// The session's MCP log: every server's stderr, `SERVER: LINE`.
    pub log_file: Option<PathBuf>,
    /// The environment stdio servers start from; this process's when `None`.
    pub env: Option<Vec<(OsString, OsString)>>,
    /// Working directory of stdio servers that name none (the workspace).
    pub cwd: Option<PathBuf>,
    /// The stdio servers that run inside the sandbox; none when `None`.
    pub sandbox: Option<Confinement>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            startup_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(600),
            stop_grace: Duration::from_secs(2),
            stderr_lines: 40,
            log_file: None,
            env: None,
            cwd: None,
            sandbox: None,
        }
    }
}

/// Where a server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Configured, never started.
    Configured,
    Starting,
    Ready,
    /// Failed to start, or crashed; see the last error.
    Failed,
    /// Stopped on request.
    Stopped,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Configured => "configured",
            State::Starting => "starting",
            State::Ready => "ready",
            State::Failed => "failed",
            State::Stopped => "stopped",
        }
    }
}

/// A server's state as the view and the catalog show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStatus {
    pub name: String,
    pub source: Source,
    pub file: PathBuf,
    /// `stdio`, `http` or `sse`.
    pub transport: &'static str,
    pub state: State,
    pub approved: bool,
    /// Known once listed (they are listed right after the start).
    pub tools: Option<usize>,
    pub resources: Option<usize>,
    pub last_error: Option<String>,
    /// The last stderr lines, oldest first.
    pub stderr: Vec<String>,
    pub tools_generation: u64,
    pub resources_generation: u64,
    pub pid: Option<u32>,
    pub protocol_version: Option<String>,
    /// The server's own name and version, from `initialize`.
    pub server_info: Option<(String, String)>,
    /// The sandbox boundary its running process has, when confined.
    pub sandbox: Option<&'static str>,
}

impl ServerStatus {
    pub fn to_datum(&self) -> Datum {
        let opt_count = |n: Option<usize>| n.map_or(Datum::Nil, datum_count);
        Datum::plist([
            ("name", Datum::str(&self.name)),
            ("source", Datum::Symbol(self.source.name().into())),
            ("file", Datum::str(self.file.to_string_lossy())),
            ("transport", Datum::Symbol(self.transport.into())),
            ("state", Datum::Symbol(self.state.name().into())),
            ("approved", Datum::bool(self.approved)),
            ("tools", opt_count(self.tools)),
            ("resources", opt_count(self.resources)),
            ("last-error", Datum::opt_str(self.last_error.clone())),
            (
                "stderr",
                Datum::List(self.stderr.iter().map(Datum::str).collect()),
            ),
            (
                "tools-generation",
                datum_count(self.tools_generation as usize),
            ),
            (
                "resources-generation",
                datum_count(self.resources_generation as usize),
            ),
            ("pid", self.pid.map_or(Datum::Nil, |p| Datum::Int(p.into()))),
            (
                "protocol-version",
                Datum::opt_str(self.protocol_version.clone()),
            ),
            (
                "server-info",
                self.server_info.as_ref().map_or(Datum::Nil, |(n, v)| {
                    Datum::List(vec![Datum::str(n), Datum::str(v)])
                }),
            ),
            (
                "sandbox",
                self.sandbox.map_or(Datum::Nil, |b| Datum::Symbol(b.into())),
            ),
        ])
    }
}

/// How to run one tool call.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Give up (and cancel on the server) after this long; the registry's
    /// request timeout when `None`.
    pub timeout: Option<Duration>,
    /// Receives the server's progress notifications for this call.
    pub progress: Option<ProgressFn>,
    /// Cancelling it ends the call with an error and sends
    /// `notifications/cancelled` to the server.
    pub cancel: Option<CancellationToken>,
}

/// Mutable facts of one server.
struct Status {
    state: State,
    approved: bool,
    last_error: Option<String>,
    failures: u32,
    retry_at: Option<Instant>,
    tools: Option<Vec<ToolInfo>>,
    /// The tools generation `tools` was listed at.
    tools_listed_at: u64,
    resources: Option<usize>,
    conn: Option<Arc<Connection>>,
    child: Option<Arc<Child>>,
}

struct Server {
    config: ServerConfig,
    shared: Arc<Shared>,
    status: Mutex<Status>,
    /// Held for the whole of a start, so concurrent first uses share it.
    starting: tokio::sync::Mutex<()>,
}

/// Longest wait before retrying a failed server on use.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The MCP servers of one session.
pub struct Registry {
    servers: Vec<Arc<Server>>,
    options: Options,
    names: Mutex<NameIndex>,
}

impl Registry {
    /// A registry of CONFIGS (already merged, see `config::merge`), none
    /// started. Servers from trusted sources count as approved; workspace
    /// ones wait for [`approve`](Self::approve). LISTENER receives crash
    /// and list-change notices.
    pub fn new(configs: Vec<ServerConfig>, options: Options, listener: Option<Listener>) -> Self {
        let log = options.log_file.as_ref().map(|path| {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok();
            Arc::new(Mutex::new(file))
        });
        let servers = configs
            .into_iter()
            .map(|config| {
                Arc::new(Server {
                    shared: Arc::new(Shared {
                        name: config.name.clone(),
                        tools_generation: 0.into(),
                        resources_generation: 0.into(),
                        progress: Mutex::new(HashMap::new()),
                        listener: listener.clone(),
                        stderr: StderrTail::new(options.stderr_lines, log.clone()),
                    }),
                    status: Mutex::new(Status {
                        state: State::Configured,
                        approved: !config.source.needs_approval(),
                        last_error: None,
                        failures: 0,
                        retry_at: None,
                        tools: None,
                        tools_listed_at: 0,
                        resources: None,
                        conn: None,
                        child: None,
                    }),
                    config,
                    starting: tokio::sync::Mutex::new(()),
                })
            })
            .collect();
        Registry {
            servers,
            options,
            names: Mutex::new(NameIndex::new()),
        }
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>> {
        self.servers
            .iter()
            .find(|s| s.config.name == name)
            .ok_or_else(|| mcp_error(format!("no MCP server is configured as \"{name}\"")))
    }

    /// Names of the configured servers, in configuration order.
    pub fn names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.config.name.clone()).collect()
    }

    /// Allow workspace server NAME to start (the user approved its file).
    pub fn approve(&self, name: &str) -> Result<()> {
        lock(&self.server(name)?.status).approved = true;
        Ok(())
    }

    /// Every server's status, in configuration order.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| status_of(s)).collect()
    }

    /// The status of server NAME.
    pub fn status_of(&self, name: &str) -> Result<ServerStatus> {
        Ok(status_of(self.server(name)?))
    }

    /// The (server, tool) behind an `mcp__SERVER__TOOL` name, among the
    /// tools listed so far.
    pub fn lookup_tool(&self, full_name: &str) -> Option<(String, String)> {
        lock(&self.names)
            .lookup(full_name)
            .map(|(s, t)| (s.to_string(), t.to_string()))
    }

    /// Start server NAME unless it is running: the lazy path every
    /// operation takes.
    pub async fn start(&self, name: &str) -> Result<()> {
        self.connection(self.server(name)?, false).await.map(|_| ())
    }

    /// Start every approved server at once; each one's outcome, in
    /// configuration order. Unapproved servers are left alone.
    pub async fn start_all(self: &Arc<Self>) -> Vec<(String, Result<()>)> {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, server) in self.servers.iter().enumerate() {
            if !lock(&server.status).approved {
                continue;
            }
            let me = Arc::clone(self);
            let server = Arc::clone(server);
            tasks.spawn(async move { (i, me.connection(&server, false).await.map(|_| ())) });
        }
        let mut outcomes = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(outcome) => outcomes.push(outcome),
                Err(e) => outcomes.push((usize::MAX, Err(mcp_error(format!("start failed: {e}"))))),
            }
        }
        outcomes.sort_by_key(|(i, _)| *i);
        outcomes
            .into_iter()
            .map(|(i, r)| {
                let name = self
                    .servers
                    .get(i)
                    .map_or_else(String::new, |s| s.config.name.clone());
                (name, r)
            })
            .collect()
    }

    /// Stop server NAME (if running) and start it again now, whatever
    /// the backoff.
    pub async fn restart(&self, name: &str) -> Result<()> {
        let server = self.server(name)?;
        self.stop_server(server).await;
        self.connection(server, true).await.map(|_| ())
    }

    /// Stop server NAME: close its session and kill its process group.
    pub async fn stop(&self, name: &str) -> Result<()> {
        self.stop_server(self.server(name)?).await;
        Ok(())
    }

    /// Stop every server, in parallel.
    pub async fn stop_all(&self) {
        let mut stops = tokio::task::JoinSet::new();
        for server in &self.servers {
            let conn = {
                let mut status = lock(&server.status);
                if status.conn.is_some() {
                    status.state = State::Stopped;
                }
                status.child = None;
                status.conn.take()
            };
            if let Some(conn) = conn {
                let grace = self.options.stop_grace;
                stops.spawn(async move { conn.close(grace).await });
            }
        }
        while stops.join_next().await.is_some() {}
    }

    async fn stop_server(&self, server: &Server) {
        let _starting = server.starting.lock().await;
        let conn = {
            let mut status = lock(&server.status);
            if status.conn.is_some() {
                status.state = State::Stopped;
            }
            status.child = None;
            status.conn.take()
        };
        if let Some(conn) = conn {
            conn.close(self.options.stop_grace).await;
        }
    }

    /// The ready connection of SERVER, starting it if needed. FORCE skips
    /// the backoff of a failed server.
    async fn connection(&self, server: &Arc<Server>, force: bool) -> Result<Arc<Connection>> {
        if let Some(conn) = ready(server) {
            return Ok(conn);
        }
        let _starting = server.starting.lock().await;
        if let Some(conn) = ready(server) {
            return Ok(conn);
        }
        let name = &server.config.name;
        {
            let mut status = lock(&server.status);
            if !status.approved {
                return Err(mcp_error(format!(
                    "MCP server \"{name}\" is declared in {} and is not approved; \
                     it is not started until the user approves that file",
                    server.config.file.display()
                )));
            }
            if !force
                && status.state == State::Failed
                && let Some(at) = status.retry_at
                && Instant::now() < at
            {
                return Err(mcp_error(format!(
                    "MCP server \"{name}\" failed: {} (next try in {} s, or restart it)",
                    status.last_error.as_deref().unwrap_or("unknown error"),
                    (at - Instant::now()).as_secs() + 1
                )));
            }
            status.state = State::Starting;
            status.last_error = None;
        }
        match self.launch(server).await {
            Ok(conn) => Ok(conn),
            Err(e) => {
                let mut status = lock(&server.status);
                status.state = State::Failed;
                status.failures += 1;
                let backoff = Duration::from_secs(1)
                    .saturating_mul(1 << status.failures.saturating_sub(1).min(6))
                    .min(MAX_BACKOFF);
                status.retry_at = Some(Instant::now() + backoff);
                status.last_error = Some(e.message.clone());
                status.conn = None;
                Err(e)
            }
        }
    }

    /// Launch and initialize SERVER within the startup timeout, list its
    /// tools and resources, and watch it for a crash.
    async fn launch(&self, server: &Arc<Server>) -> Result<Arc<Connection>> {
        let timeout = self.options.startup_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let launch = Launch {
            env: self.options.env.clone(),
            cwd: self.options.cwd.clone(),
            deadline,
            sandbox: self
                .options
                .sandbox
                .as_ref()
                .and_then(|c| c.request_for(&server.config.name)),
        };
        let launched: Arc<Mutex<Option<Arc<Child>>>> = Arc::new(Mutex::new(None));
        let record = Arc::clone(&launched);
        let connecting = connection::connect(
            &server.config.transport,
            &launch,
            &server.shared,
            move |child| *lock(&record) = Some(child),
        );
        let conn = match tokio::time::timeout_at(deadline, connecting).await {
            Ok(Ok(conn)) => Arc::new(conn),
            Ok(Err(e)) => return Err(self.with_stderr(server, e.message)),
            Err(_) => {
                let child = lock(&launched).take();
                if let Some(child) = child {
                    child.stop(self.options.stop_grace).await;
                }
                return Err(self.with_stderr(
                    server,
                    format!(
                        "did not answer initialize within {} s",
                        timeout.as_secs_f64()
                    ),
                ));
            }
        };
        {
            let mut status = lock(&server.status);
            status.conn = Some(Arc::clone(&conn));
            status.child = conn.child.clone();
        }
        // Counts for the view, and the tool names for lookups.
        if conn.has_tools {
            let _ = self.tools_of(server, &conn).await;
        }
        if conn.has_resources
            && let Ok(list) = self.request(conn.peer.list_all_resources()).await
        {
            lock(&server.status).resources = Some(list.len());
        }
        {
            let mut status = lock(&server.status);
            status.state = State::Ready;
            status.failures = 0;
            status.retry_at = None;
        }
        if let Some(child) = conn.child.clone() {
            self.watch_crash(server, &conn, child);
        }
        if let Some(ended) = conn.ended.clone() {
            watch_stream(server, &conn, ended);
        }
        Ok(conn)
    }

    /// MESSAGE followed by SERVER's last stderr lines, when there are any.
    fn with_stderr(&self, server: &Server, message: String) -> crate::Error {
        let tail = server.shared.stderr.tail();
        if tail.is_empty() {
            mcp_error(message)
        } else {
            let last: Vec<&str> = tail
                .iter()
                .rev()
                .take(10)
                .rev()
                .map(String::as_str)
                .collect();
            mcp_error(format!(
                "{message}; its stderr ended with:\n{}",
                last.join("\n")
            ))
        }
    }

    /// When CHILD exits while CONN is the server's connection and nobody
    /// asked it to stop, mark the server failed and report it once.
    fn watch_crash(&self, server: &Arc<Server>, conn: &Arc<Connection>, child: Arc<Child>) {
        let server = Arc::clone(server);
        let conn = Arc::downgrade(conn);
        tokio::spawn(async move {
            let mut exit = child.exit.clone();
            if exit.wait_for(Option::is_some).await.is_err() {
                return;
            }
            if child.stopping.load(Ordering::SeqCst) {
                return;
            }
            // Give the stderr reader a moment to take the last lines.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let how = exit.borrow().clone().unwrap_or_default();
            crashed(&server, &conn, format!("the server {how}")).await;
        });
    }

    /// Run a request future under the request timeout.
    async fn request<T>(
        &self,
        future: impl Future<Output = std::result::Result<T, ServiceError>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.options.request_timeout, future).await {
            Ok(r) => r.map_err(|e| mcp_error(e.to_string())),
            Err(_) => Err(mcp_error(format!(
                "no answer within {} s",
                self.options.request_timeout.as_secs()
            ))),
        }
    }

    /// A failed request on SERVER: when its process is gone, say so with
    /// its stderr instead of the transport's bare "closed".
    async fn failed(&self, server: &Server, conn: &Connection, e: crate::Error) -> crate::Error {
        if let Some(child) = &conn.child
            && let Some(how) = child.exit_within(Duration::from_millis(500)).await
            && !child.stopping.load(Ordering::SeqCst)
        {
            return self.with_stderr(
                server,
                format!(
                    "MCP server \"{}\" {how} during the request",
                    server.config.name
                ),
            );
        }
        if let Some(ended) = &conn.ended
            && let Some(how) = ended.borrow().clone()
        {
            // The crash is reported (once) by `watch_stream`.
            return mcp_error(format!(
                "MCP server \"{}\": {how} during the request",
                server.config.name
            ));
        }
        if conn.peer.is_transport_closed() {
            // An HTTP session that went away: fail the server so the next
            // use connects again (after the backoff).
            let mut status = lock(&server.status);
            if status
                .conn
                .as_ref()
                .is_some_and(|c| std::ptr::eq(c.as_ref(), conn))
            {
                status.state = State::Failed;
                status.last_error = Some(format!("the connection closed: {}", e.message));
                status.conn = None;
                status.failures += 1;
                status.retry_at = Some(Instant::now() + Duration::from_secs(1));
            }
        }
        mcp_error(format!(
            "MCP server \"{}\": {}",
            server.config.name, e.message
        ))
    }

    /// SERVER's tools, listed again only when its list changed.
    async fn tools_of(&self, server: &Server, conn: &Connection) -> Result<Vec<ToolInfo>> {
        let generation = server.shared.tools_generation.load(Ordering::SeqCst);
        {
            let status = lock(&server.status);
            if let Some(tools) = &status.tools
                && status.tools_listed_at == generation
            {
                return Ok(tools.clone());
            }
        }
        let listed = self.ask(server, conn, conn.peer.list_all_tools()).await?;
        let name = &server.config.name;
        let tools: Vec<ToolInfo> = {
            let mut names = lock(&self.names);
            names.remove_server(name);
            listed
                .iter()
                .map(|tool| {
                    let full = names.insert(name, &tool.name).unwrap_or_else(|clash| clash);
                    ToolInfo::from_sdk(name, full, tool)
                })
                .collect()
        };
        let mut status = lock(&server.status);
        status.tools = Some(tools.clone());
        status.tools_listed_at = generation;
        Ok(tools)
    }

    /// FUTURE's answer on SERVER's connection CONN; a failure is noted
    /// against the server (see [`Registry::failed`]).
    async fn ask<T>(
        &self,
        server: &Server,
        conn: &Connection,
        future: impl Future<Output = std::result::Result<T, ServiceError>>,
    ) -> Result<T> {
        match self.request(future).await {
            Ok(answer) => Ok(answer),
            Err(e) => Err(self.failed(server, conn, e).await),
        }
    }

    /// Server NAME's tools with their full input schemas.
    pub async fn list_tools(&self, name: &str) -> Result<Vec<ToolInfo>> {
        let server = self.server(name)?;
        let conn = self.connection(server, false).await?;
        self.tools_of(server, &conn).await
    }

    /// Server NAME's resources.
    pub async fn list_resources(&self, name: &str) -> Result<Vec<ResourceInfo>> {
        let server = self.server(name)?;
        let conn = self.connection(server, false).await?;
        if !conn.has_resources {
            return Ok(Vec::new());
        }
        let list = self
            .ask(server, &conn, conn.peer.list_all_resources())
            .await?;
        lock(&server.status).resources = Some(list.len());
        Ok(list.iter().map(ResourceInfo::from_sdk).collect())
    }

    /// Server NAME's resource templates.
    pub async fn list_resource_templates(&self, name: &str) -> Result<Vec<TemplateInfo>> {
        let server = self.server(name)?;
        let conn = self.connection(server, false).await?;
        if !conn.has_resources {
            return Ok(Vec::new());
        }
        let list = self
            .ask(server, &conn, conn.peer.list_all_resource_templates())
            .await?;
        Ok(list.iter().map(TemplateInfo::from_sdk).collect())
    }

    /// Read URI from server NAME: one entry per contents item.
    pub async fn read_resource(&self, name: &str, uri: &str) -> Result<Vec<Content>> {
        let server = self.server(name)?;
        let conn = self.connection(server, false).await?;
        let params = ReadResourceRequestParams::new(uri);
        let result = self
            .ask(server, &conn, conn.peer.read_resource(params))
            .await?;
        Ok(resource_contents(&result))
    }

    /// Server NAME's prompts.
    pub async fn list_prompts(&self, name: &str) -> Result<Vec<PromptInfo>> {
        let server = self.server(name)?;
        let conn = self.connection(server, false).await?;
        if !conn.has_prompts {
            return Ok(Vec::new());
        }
        let list = self
            .ask(server, &conn, conn.peer.list_all_prompts())
            .await?;
        Ok(list.iter().map(|p| PromptInfo::from_sdk(name, p)).collect())
    }

    /// Prompt PROMPT of server NAME filled in with ARGUMENTS (strings).
    pub async fn get_prompt(
        &self,
        name: &str,
        prompt: &str,
        arguments: HashMap<String, String>,
    ) -> Result<PromptResult> {
        let server = self.server(name)?;
        let conn = self.connection(server, false).await?;
        let args: JsonObject = arguments
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        let params = GetPromptRequestParams::new(prompt).with_arguments(args);
        let result = self
            .ask(server, &conn, conn.peer.get_prompt(params))
            .await?;
        Ok(PromptResult::from_sdk(&result))
    }

    /// Call TOOL of server NAME with ARGUMENTS (a JSON object, or null for
    /// none). A tool's own failure is a result with `is_error`; an error
    /// here means the call did not complete (timeout, cancellation, crash,
    /// protocol error).
    pub async fn call_tool(
        &self,
        name: &str,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<ToolResult> {
        let server = self.server(name)?;
        let arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            _ => {
                return Err(mcp_error(format!(
                    "the arguments of {tool} must be a JSON object"
                )));
            }
        };
        let conn = self.connection(server, false).await?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut handle = match conn
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(e) => return Err(self.failed(server, &conn, mcp_error(e.to_string())).await),
        };
        let token = handle.progress_token.clone();
        if let Some(progress) = options.progress {
            lock(&server.shared.progress).insert(token.clone(), progress);
        }
        let limit = options.timeout.unwrap_or(self.options.request_timeout);
        let cancel = options.cancel.unwrap_or_default();
        let outcome = tokio::select! {
            answer = &mut handle.rx => Some(answer),
            () = cancel.cancelled() => None,
            () = tokio::time::sleep(limit) => None,
        };
        lock(&server.shared.progress).remove(&token);
        match outcome {
            Some(Ok(Ok(ServerResult::CallToolResult(result)))) => Ok(ToolResult::from_sdk(&result)),
            Some(Ok(Ok(other))) => Err(mcp_error(format!(
                "MCP server \"{name}\" answered tools/call with something else: {other:?}"
            ))),
            Some(Ok(Err(e))) => Err(self.failed(server, &conn, mcp_error(e.to_string())).await),
            Some(Err(_closed)) => Err(self
                .failed(server, &conn, mcp_error("the connection closed"))
                .await),
            None => {
                let why = if cancel.is_cancelled() {
                    "cancelled".to_string()
                } else {
                    format!("timed out after {} s", limit.as_secs_f64())
                };
                let _ = handle.cancel(Some(why.clone())).await;
                Err(mcp_error(format!("{name}: {tool} {why}")))
            }
        }
    }
}

impl Drop for Registry {
    /// A registry dropped without [`Registry::stop_all`] still leaves no
    /// server running: each stdio group gets SIGKILL, and the process
    /// owner's reaper collects the leaders.
    fn drop(&mut self) {
        for server in &self.servers {
            let status = lock(&server.status);
            if let Some(child) = &status.child {
                child.stopping.store(true, Ordering::SeqCst);
                crate::process::signal(child.pid as i32, libc::SIGKILL);
            }
        }
    }
}

/// When the legacy SSE stream of CONN ends by itself (ENDED says how), mark
/// SERVER failed and report it once; a stop drops the stream's sender
/// instead, which ends this watch quietly.
fn watch_stream(server: &Arc<Server>, conn: &Arc<Connection>, mut ended: super::sse::Ended) {
    let server = Arc::clone(server);
    let conn = Arc::downgrade(conn);
    tokio::spawn(async move {
        let how = match ended.wait_for(Option::is_some).await {
            Ok(how) => how.clone().unwrap_or_default(),
            Err(_) => return,
        };
        crashed(&server, &conn, how).await;
    });
}

/// SERVER's connection CONN ended without being asked to, as MESSAGE
/// says: unless it was replaced or stopped meanwhile, mark the server
/// failed, close the session and report the crash through the listener.
async fn crashed(server: &Server, conn: &std::sync::Weak<Connection>, message: String) {
    let current = {
        let mut status = lock(&server.status);
        let current = match (&status.conn, conn.upgrade()) {
            (Some(now), Some(ours)) => Arc::ptr_eq(now, &ours),
            _ => false,
        };
        if current {
            status.state = State::Failed;
            status.last_error = Some(message.clone());
            status.conn = None;
            status.child = None;
            status.failures += 1;
            status.retry_at = Some(Instant::now() + Duration::from_secs(1));
        }
        current
    };
    if current {
        // Closing reaps nothing more but ends rmcp's session task.
        if let Some(conn) = conn.upgrade() {
            conn.close(Duration::from_millis(100)).await;
        }
        server.shared.notify(connection::Notice::Crashed {
            server: server.config.name.clone(),
            message,
            stderr: server.shared.stderr.tail(),
        });
    }
}

fn ready(server: &Server) -> Option<Arc<Connection>> {
    let status = lock(&server.status);
    match (&status.conn, status.state) {
        (Some(conn), State::Ready) => Some(Arc::clone(conn)),
        _ => None,
    }
}

fn status_of(server: &Server) -> ServerStatus {
    let status = lock(&server.status);
    let conn = status.conn.as_ref();
    ServerStatus {
        name: server.config.name.clone(),
        source: server.config.source,
        file: server.config.file.clone(),
        transport: server.config.transport.kind(),
        state: status.state,
        approved: status.approved,
        tools: status.tools.as_ref().map(Vec::len),
        resources: status.resources,
        last_error: status.last_error.clone(),
        stderr: server.shared.stderr.tail(),
        tools_generation: server.shared.tools_generation.load(Ordering::SeqCst),
        resources_generation: server.shared.resources_generation.load(Ordering::SeqCst),
        pid: status.child.as_ref().map(|c| c.pid),
        protocol_version: conn.map(|c| c.protocol_version.clone()),
        server_info: conn.and_then(|c| c.server_info.clone()),
        sandbox: status
            .child
            .as_ref()
            .and_then(|c| c.sandbox.as_ref())
            .map(|s| s.boundary.symbol()),
    }
}

/// Each status as a datum, for the seam.
pub fn status_datum(statuses: &[ServerStatus]) -> Datum {
    datum_list(statuses, ServerStatus::to_datum)
}
