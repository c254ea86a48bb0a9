//! One live connection to one MCP server: launching it (a child process
//! for stdio, an HTTP session otherwise), the `initialize` handshake
//! through `rmcp`, the handler that receives the server's notifications,
//! the child's stderr, and stopping it.
//!
//! A stdio server is started through [`crate::process::global`], like
//! every child of the module: its own process group, the parent-death
//! signal, no inherited descriptors, reaped as soon as it exits. Stopping
//! signals the whole group (TERM, then KILL) and waits for the reaper, so
//! neither a zombie nor an orphaned grandchild is left behind. A server
//! the user asked to confine starts the same way, inside the sandbox
//! ([`super::confine`]).

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
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
use super::confine::{self, Sandboxed};
use crate::error::{Error, ErrorKind, Result};
use crate::process::{self, Program, StderrTail};
use crate::sandbox::launch::{self, Request};

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

/// State shared by a server's successive connections and its handler.
pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) tools_generation: AtomicU64,
    pub(crate) resources_generation: AtomicU64,
    pub(crate) progress: Mutex<HashMap<ProgressToken, ProgressFn>>,
    pub(crate) listener: Option<Listener>,
    pub(crate) stderr: StderrTail,
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
    /// The sandbox it runs in, when confined.
    pub(crate) sandbox: Option<Sandboxed>,
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

/// A ready connection.
pub(crate) struct Connection {
    pub(crate) peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    pub(crate) child: Option<Arc<Child>>,
    /// How a legacy SSE stream ended, once it has: that transport's
    /// equivalent of a child's exit.
    pub(crate) ended: Option<super::sse::Ended>,
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
    /// When the start gives up; legacy SSE bounds its wait for the
    /// `endpoint` event by it, to say that this is what never came.
    pub(crate) deadline: tokio::time::Instant,
    /// The sandbox request of a confined stdio server.
    pub(crate) sandbox: Option<Request>,
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
    let mut ended = None;
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
                    let unstarted = child.sandbox.as_ref().and_then(|sandbox| {
                        let how = exit.as_deref().unwrap_or("is still running");
                        sandbox.start_problem(&shared.stderr.tail().join("\n"), how)
                    });
                    return Err(mcp_error(match (unstarted, exit) {
                        (Some(why), _) => format!("not started: {why}"),
                        (None, Some(how)) => {
                            format!("the server {how} before answering initialize")
                        }
                        (None, None) => format!("initialize failed: {e}"),
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
        Transport::Sse { url, headers } => {
            let headers = header_map(headers)?.into_iter().collect();
            let (transport, how) = super::sse::open(url, headers, launch.deadline).await?;
            ended = Some(how.clone());
            let service = handler.serve(transport).await.map_err(|e| {
                let why = how.borrow().clone().unwrap_or_else(|| e.to_string());
                mcp_error(format!("initialize over legacy SSE at {url} failed: {why}"))
            })?;
            (service, None)
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
        ended,
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
    let sandbox = launch.sandbox.clone();
    // A confined server starts from the sandbox's (filtered) environment.
    let confined_env = sandbox.as_ref().and_then(|r| r.env.as_ref());
    let mut vars: Vec<(OsString, OsString)> = match (confined_env, &launch.env) {
        (Some(list), _) => list
            .iter()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.into(), v.into()))
            .collect(),
        (None, Some(vars)) => vars.clone(),
        (None, None) => std::env::vars_os().collect(),
    };
    for (k, v) in env {
        vars.retain(|(name, _)| name != k.as_str());
        vars.push((k.into(), v.into()));
    }
    let cwd = cwd.cloned().or_else(|| launch.cwd.clone());
    let mut program = Program::new(argv);
    program.env = Some(vars);
    program.cwd = cwd;
    program.stdin = Some(OwnedFd::from(child_in));
    program.stdout = Some(OwnedFd::from(child_out));
    program.stderr = Some(OwnedFd::from(child_err));
    let (exit_tx, exit_rx) = watch::channel(None);
    let on_exit: process::OnExit = Box::new(move |status| {
        let _ = exit_tx.send(Some(process::describe_exit(status)));
    });
    // Owner::start waits for the spawner thread, and confining may probe:
    // keep both off the runtime's few workers. The Program (and so the
    // child's ends, the start pipe's writer among them) drops there.
    let (started, sandbox) = tokio::task::spawn_blocking(move || {
        let Some(request) = sandbox else {
            return process::global()
                .start(program, Some(on_exit))
                .map(|started| (started, None));
        };
        let cwd = program.cwd.take().unwrap_or_else(|| PathBuf::from("/"));
        let vars = program.env.take().unwrap_or_default();
        let confined = confine::prepare(request, &program.argv, cwd, &vars)?;
        let (reader, writer) = confined.marker;
        program.argv = confined.argv;
        program.env = confined.env;
        program.cwd = Some(confined.cwd);
        program.fd_map.push((writer.as_raw_fd(), launch::START_FD));
        let started = process::global().start(program, Some(on_exit))?;
        drop(writer);
        let mut sandbox = confined.sandbox;
        sandbox.set_marker(reader);
        Ok((started, Some(sandbox)))
    })
    .await
    .map_err(|e| mcp_error(format!("cannot start {command}: {e}")))?
    .map_err(|e| mcp_error(format!("cannot start {command}: {}", e.message)))?;
    let child = Arc::new(Child {
        pid: started.pid,
        exit: exit_rx,
        stopping: AtomicBool::new(false),
        sandbox,
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
                .push(Some(&shared.name), text.trim_end_matches(['\n', '\r']));
            line.clear();
        }
    });
    Ok((reader, writer, child))
}
