//! One live connection to one MCP server: launching it (a child process
//! for stdio, an HTTP session otherwise), the `initialize` handshake
//! through `rmcp`, the handler that receives the server's notifications,
//! the child's stderr, and stopping it.
//!
//! A stdio server is started through [`crate::process::global`], like
//! every child of the module: its own process group, the parent-death
//! signal, no inherited descriptors, reaped as soon as it exits. Stopping
//! signals the whole group (TERM, then KILL) and waits for the reaper, so
//! neither a zombie nor an orphaned grandchild is left behind.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;

use super::config::Transport;
use crate::error::{Error, ErrorKind, Result};
use crate::process::{self, Program};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn mcp_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Exec, message)
}

/// The protocol version offered in `initialize`: the newest one that still
/// has the handshake. Servers that know only 2025-06-18 answer with it.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// Progress of a call, as the server reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where a call's progress goes.
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// Something a server did that the session should know about.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// The server's tool list changed; GENERATION is the new count.
    ToolsChanged { server: String, generation: u64 },
    /// The server's resource list changed.
    ResourcesChanged { server: String, generation: u64 },
    /// The server's prompt list changed (its slash commands).
    PromptsChanged { server: String },
    /// The server stopped without being asked to (reported once per crash),
    /// with the last lines it wrote to stderr.
    Crashed {
        server: String,
        message: String,
        stderr: Vec<String>,
    },
}

/// Where notices go; called from worker threads.
pub type Listener = Arc<dyn Fn(Notice) + Send + Sync>;

/// The last lines a server wrote to stderr, bounded, and the per-session
/// log every line is appended to as `SERVER: LINE`.
pub(crate) struct StderrLog {
    lines: Mutex<VecDeque<String>>,
    keep: usize,
    file: Option<Arc<Mutex<Option<std::fs::File>>>>,
}

/// Longest stderr line kept in memory, in bytes; the log gets it whole.
const LINE_BYTES: usize = 2000;

impl StderrLog {
    pub(crate) fn new(keep: usize, file: Option<Arc<Mutex<Option<std::fs::File>>>>) -> Self {
        StderrLog {
            lines: Mutex::new(VecDeque::new()),
            keep,
            file,
        }
    }

    pub(crate) fn push(&self, server: &str, line: &str) {
        if let Some(file) = &self.file
            && let Some(f) = lock(file).as_mut()
        {
            let _ = writeln!(f, "{server}: {line}");
        }
        let mut kept = line.to_string();
        if kept.len() > LINE_BYTES {
            let mut cut = LINE_BYTES;
            while !kept.is_char_boundary(cut) {
                cut -= 1;
            }
            kept.truncate(cut);
            kept.push('…');
        }
        let mut lines = lock(&self.lines);
        lines.push_back(kept);
        while lines.len() > self.keep {
            lines.pop_front();
        }
    }

    pub(crate) fn tail(&self) -> Vec<String> {
        lock(&self.lines).iter().cloned().collect()
    }
}

/// State shared by a server's successive connections and its handler.
pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) tools_generation: AtomicU64,
    pub(crate) resources_generation: AtomicU64,
    pub(crate) progress: Mutex<HashMap<ProgressToken, ProgressFn>>,
    pub(crate) listener: Option<Listener>,
    pub(crate) stderr: StderrLog,
}

impl Shared {
    pub(crate) fn notify(&self, notice: Notice) {
        if let Some(listener) = &self.listener {
            listener(notice);
        }
    }
}

/// The `rmcp` client handler: identifies mevedel and routes the server's
/// notifications.
#[derive(Clone)]
pub(crate) struct Handler {
    shared: Arc<Shared>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mevedel", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(PROTOCOL_VERSION)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let callback = lock(&self.shared.progress)
            .get(&params.progress_token)
            .cloned();
        if let Some(callback) = callback {
            callback(Progress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let generation = self.shared.tools_generation.fetch_add(1, Ordering::SeqCst) + 1;
        self.shared.notify(Notice::ToolsChanged {
            server: self.shared.name.clone(),
            generation,
        });
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let generation = self
            .shared
            .resources_generation
            .fetch_add(1, Ordering::SeqCst)
            + 1;
        self.shared.notify(Notice::ResourcesChanged {
            server: self.shared.name.clone(),
            generation,
        });
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.shared.notify(Notice::PromptsChanged {
            server: self.shared.name.clone(),
        });
    }
}

/// A stdio server's process.
pub(crate) struct Child {
    pub(crate) pid: u32,
    /// How the leader ended, once it is reaped.
    pub(crate) exit: watch::Receiver<Option<String>>,
    /// Set before a deliberate stop, so the exit is not a crash.
    pub(crate) stopping: AtomicBool,
}

impl Child {
    /// How the leader ended, waiting up to LIMIT for it to be reaped.
    pub(crate) async fn exit_within(&self, limit: Duration) -> Option<String> {
        let mut exit = self.exit.clone();
        let _ = tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await;
        exit.borrow().clone()
    }

    /// Signal the whole group: TERM, KILL after GRACE, then wait (bounded)
    /// for the leader to be reaped.
    pub(crate) async fn stop(&self, grace: Duration) {
        self.stopping.store(true, Ordering::SeqCst);
        let pgid = self.pid as i32;
        process::signal(pgid, libc::SIGTERM);
        let deadline = tokio::time::Instant::now() + grace;
        while process::group_alive(pgid) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if process::group_alive(pgid) {
            process::signal(pgid, libc::SIGKILL);
        }
        self.exit_within(Duration::from_secs(5)).await;
        // Members other than the leader are reparented; wait until the
        // group is empty so the caller can rely on it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while process::group_alive(pgid) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn describe_exit(status: std::io::Result<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            _ => "exited".to_string(),
        },
        Err(e) => format!("exited (status unknown: {e})"),
    }
}

/// A ready connection.
pub(crate) struct Connection {
    pub(crate) peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    pub(crate) child: Option<Arc<Child>>,
    pub(crate) protocol_version: String,
    pub(crate) server_info: Option<(String, String)>,
    pub(crate) has_tools: bool,
    pub(crate) has_resources: bool,
    pub(crate) has_prompts: bool,
}

impl Connection {
    /// Close the session and, for stdio, stop the process group.
    pub(crate) async fn close(&self, grace: Duration) {
        if let Some(child) = &self.child {
            child.stopping.store(true, Ordering::SeqCst);
        }
        if let Some(mut service) = self.service.lock().await.take() {
            // Closing drops the transport: stdin reaches EOF, which is how
            // the spec asks a stdio server to stop.
            let _ = service.close_with_timeout(Duration::from_millis(500)).await;
        }
        if let Some(child) = &self.child {
            child.stop(grace).await;
        }
    }
}

/// How to launch servers.
pub(crate) struct Launch {
    /// The environment children start from; this process's when `None`.
    pub(crate) env: Option<Vec<(OsString, OsString)>>,
    /// Working directory of a stdio server that names none.
    pub(crate) cwd: Option<PathBuf>,
}

/// Launch the server TRANSPORT describes and run the `initialize`
/// handshake; the caller bounds the whole with the startup timeout. A
/// failure names what went wrong, with a stdio server's exit status.
pub(crate) async fn connect(
    transport: &Transport,
    launch: &Launch,
    shared: &Arc<Shared>,
    on_child: impl FnOnce(Arc<Child>),
) -> Result<Connection> {
    let handler = Handler {
        shared: Arc::clone(shared),
    };
    let (service, child) = match transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let (reader, writer, child) =
                spawn_stdio(command, args, env, cwd.as_ref(), launch, shared).await?;
            on_child(Arc::clone(&child));
            match handler.serve((reader, writer)).await {
                Ok(service) => (service, Some(child)),
                Err(e) => {
                    // Most often the server exited: say how, not just that
                    // the pipe closed.
                    let exit = child.exit_within(Duration::from_millis(500)).await;
                    child.stop(Duration::from_millis(200)).await;
                    return Err(mcp_error(match exit {
                        Some(how) => format!("the server {how} before answering initialize"),
                        None => format!("initialize failed: {e}"),
                    }));
                }
            }
        }
        Transport::Http { url, headers } => {
            let config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url.as_str(),
                )
                .custom_headers(header_map(headers)?);
            let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
            let service = handler
                .serve(transport)
                .await
                .map_err(|e| mcp_error(format!("initialize over HTTP at {url} failed: {e}")))?;
            (service, None)
        }
        Transport::Sse { url, .. } => {
            return Err(mcp_error(format!(
                "{url}: the legacy SSE transport is not supported (the rmcp SDK dropped it); \
                 if the server also speaks streamable HTTP, configure it with \"type\": \"http\""
            )));
        }
    };
    let peer = service.peer().clone();
    let info = peer.peer_info();
    let capabilities = info.as_ref().map(|i| i.capabilities.clone());
    Ok(Connection {
        protocol_version: info
            .as_ref()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default(),
        server_info: info
            .as_ref()
            .and_then(|i| i.server_info.as_ref())
            .map(|s| (s.name.clone(), s.version.clone())),
        has_tools: capabilities.as_ref().is_some_and(|c| c.tools.is_some()),
        has_resources: capabilities.as_ref().is_some_and(|c| c.resources.is_some()),
        has_prompts: capabilities.as_ref().is_some_and(|c| c.prompts.is_some()),
        peer,
        service: tokio::sync::Mutex::new(Some(service)),
        child,
    })
}

fn header_map(
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = http::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| mcp_error(format!("header name {k:?} is not valid")))?;
            let value = http::HeaderValue::from_str(v)
                .map_err(|_| mcp_error(format!("the value of header {k} is not valid")))?;
            Ok((name, value))
        })
        .collect()
}

/// Start a stdio server through the module's process owner with pipes for
/// its three streams; its stderr goes to SHARED's log line by line.
async fn spawn_stdio(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
    launch: &Launch,
    shared: &Arc<Shared>,
) -> Result<(
    tokio::net::unix::pipe::Receiver,
    tokio::net::unix::pipe::Sender,
    Arc<Child>,
)> {
    let pipe = |what: &str| {
        std::io::pipe().map_err(|e| Error::io(ErrorKind::Exec, &format!("cannot open {what}"), &e))
    };
    let (child_in, to_child) = pipe("the server's stdin")?;
    let (from_child, child_out) = pipe("the server's stdout")?;
    let (from_stderr, child_err) = pipe("the server's stderr")?;
    let mut argv: Vec<OsString> = vec![command.into()];
    argv.extend(args.iter().map(OsString::from));
    let mut program = Program::new(argv);
    let mut vars: Vec<(OsString, OsString)> = match &launch.env {
        Some(vars) => vars.clone(),
        None => std::env::vars_os().collect(),
    };
    for (k, v) in env {
        vars.retain(|(name, _)| name != k.as_str());
        vars.push((k.into(), v.into()));
    }
    program.env = Some(vars);
    program.cwd = cwd.cloned().or_else(|| launch.cwd.clone());
    program.stdin = Some(OwnedFd::from(child_in));
    program.stdout = Some(OwnedFd::from(child_out));
    program.stderr = Some(OwnedFd::from(child_err));
    let (exit_tx, exit_rx) = watch::channel(None);
    let on_exit: process::OnExit = Box::new(move |status| {
        let _ = exit_tx.send(Some(describe_exit(status)));
    });
    // Owner::start waits for the spawner thread: keep it off the runtime's
    // few workers. The Program (and so the child's ends) drops there.
    let started =
        tokio::task::spawn_blocking(move || process::global().start(program, Some(on_exit)))
            .await
            .map_err(|e| mcp_error(format!("cannot start {command}: {e}")))?
            .map_err(|e| mcp_error(format!("cannot start {command}: {}", e.message)))?;
    let child = Arc::new(Child {
        pid: started.pid,
        exit: exit_rx,
        stopping: AtomicBool::new(false),
    });
    let io = |e: std::io::Error| Error::io(ErrorKind::Exec, "cannot watch the server's pipes", &e);
    let writer =
        tokio::net::unix::pipe::Sender::from_owned_fd(OwnedFd::from(to_child)).map_err(io)?;
    let reader =
        tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(from_child)).map_err(io)?;
    let stderr =
        tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(from_stderr)).map_err(io)?;
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        // Bytes, not `lines()`: one invalid UTF-8 byte must not stop the
        // reading and leave the server blocked on a full pipe.
        let mut reader = tokio::io::BufReader::new(stderr);
        let mut line = Vec::new();
        while matches!(reader.read_until(b'\n', &mut line).await, Ok(n) if n > 0) {
            let text = String::from_utf8_lossy(&line);
            shared
                .stderr
                .push(&shared.name, text.trim_end_matches(['\n', '\r']));
            line.clear();
        }
    });
    Ok((reader, writer, child))
}
