//! The registry as Lisp drives it: one [`Session`] per root session,
//! every network or process step run on `runtime`'s tokio runtime and
//! answered by a `reply` event, progress and notices as events.
//!
//! Events (besides `reply`):
//! - `mcp-progress` `(ID PROGRESS TOTAL MESSAGE)` for tool call ID;
//! - `mcp-notice` `(:key KEY :kind KIND :server NAME ...)`, KIND being
//!   `tools-changed`, `resources-changed` (with `:generation`),
//!   `prompts-changed` or `crashed` (with `:message` and `:stderr`);
//!   KEY is the one Lisp gave [`Session::open`], so it finds the
//!   session the notice is about.
//!
//! Calls in flight are cancellable by request id ([`cancel`]): the
//! registry then sends `notifications/cancelled`.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::config::{self, ConfigFile, Source};
use super::confine::Confinement;
use super::connection::{Notice, Progress};
use super::content::{Content, PromptInfo, ResourceInfo, TemplateInfo, ToolInfo};
use super::registry::{CallOptions, Options, Registry, status_datum};
use crate::datum::Datum;
use crate::error::Result;
use crate::{events, runtime};

/// What opening a session's registry needs.
#[derive(Debug, Clone, Default)]
pub struct OpenRequest {
    /// Configuration files in merge order, each with its source; a
    /// missing file is skipped.
    pub files: Vec<(PathBuf, Source)>,
    /// The environment `${VAR}` expands from and stdio servers start
    /// from.
    pub env: HashMap<String, String>,
    /// Working directory of stdio servers that name none.
    pub cwd: Option<PathBuf>,
    /// The session's MCP log (every server's stderr).
    pub log_file: Option<PathBuf>,
    pub startup_timeout: Option<Duration>,
    pub request_timeout: Option<Duration>,
    /// Names this session in `mcp-notice` events.
    pub key: String,
    /// The stdio servers that run inside the sandbox, and how.
    pub sandbox: Option<Confinement>,
}

/// One configuration file as read: where from, its hash, its servers
/// or the error that kept them out.
#[derive(Debug, Clone)]
pub struct FileInfo {
    pub path: PathBuf,
    pub source: Source,
    pub sha256: Option<String>,
    pub servers: Vec<String>,
    pub error: Option<String>,
}

impl FileInfo {
    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            ("file", Datum::str(self.path.to_string_lossy())),
            ("source", Datum::Symbol(self.source.name().into())),
            ("sha256", Datum::opt_str(self.sha256.clone())),
            (
                "servers",
                Datum::List(self.servers.iter().map(Datum::str).collect()),
            ),
            ("error", Datum::opt_str(self.error.clone())),
        ])
    }
}

/// A session's MCP servers: the registry and the files it came from.
pub struct Session {
    registry: Arc<Registry>,
    files: Vec<FileInfo>,
    /// (server, file) of every merged server, to approve by file.
    origins: Vec<(String, PathBuf, Source)>,
}

fn notice_datum(key: &str, notice: Notice) -> Datum {
    let key = ("key", Datum::str(key));
    let kind = |k: &str| ("kind", Datum::Symbol(k.into()));
    match notice {
        Notice::ToolsChanged { server, generation } => Datum::plist([
            key,
            kind("tools-changed"),
            ("server", Datum::Str(server)),
            ("generation", Datum::Int(generation as i64)),
        ]),
        Notice::ResourcesChanged { server, generation } => Datum::plist([
            key,
            kind("resources-changed"),
            ("server", Datum::Str(server)),
            ("generation", Datum::Int(generation as i64)),
        ]),
        Notice::PromptsChanged { server } => {
            Datum::plist([key, kind("prompts-changed"), ("server", Datum::Str(server))])
        }
        Notice::Crashed {
            server,
            message,
            stderr,
        } => Datum::plist([
            key,
            kind("crashed"),
            ("server", Datum::Str(server)),
            ("message", Datum::Str(message)),
            (
                "stderr",
                Datum::List(stderr.into_iter().map(Datum::Str).collect()),
            ),
        ]),
    }
}

impl Session {
    /// Read REQUEST's files, merge their servers and make a registry
    /// that starts none of them yet. A file that fails to parse is
    /// kept out with its error (see [`Session::files`]).
    pub fn open(request: OpenRequest) -> Session {
        let mut parsed: Vec<ConfigFile> = Vec::new();
        let mut files = Vec::new();
        for (path, source) in &request.files {
            match config::read(path, *source, &request.env) {
                Ok(Some(file)) => {
                    files.push(FileInfo {
                        path: path.clone(),
                        source: *source,
                        sha256: Some(file.sha256.clone()),
                        servers: file.servers.iter().map(|s| s.name.clone()).collect(),
                        error: None,
                    });
                    parsed.push(file);
                }
                Ok(None) => {}
                Err(e) => files.push(FileInfo {
                    path: path.clone(),
                    source: *source,
                    sha256: None,
                    servers: Vec::new(),
                    error: Some(e.message),
                }),
            }
        }
        let merged = config::merge(&parsed);
        let origins = merged
            .iter()
            .map(|s| (s.name.clone(), s.file.clone(), s.source))
            .collect();
        let defaults = Options::default();
        let options = Options {
            startup_timeout: request.startup_timeout.unwrap_or(defaults.startup_timeout),
            request_timeout: request.request_timeout.unwrap_or(defaults.request_timeout),
            log_file: request.log_file.clone(),
            env: Some(
                request
                    .env
                    .iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            ),
            cwd: request.cwd.clone(),
            sandbox: request.sandbox.clone(),
            ..defaults
        };
        let key = request.key.clone();
        let listener: super::Listener = Arc::new(move |notice| {
            events::global().push(events::Event::new("mcp-notice", notice_datum(&key, notice)));
        });
        Session {
            registry: Arc::new(Registry::new(merged, options, Some(listener))),
            files,
            origins,
        }
    }

    /// The configuration files read, as data.
    pub fn files(&self) -> Datum {
        Datum::List(self.files.iter().map(FileInfo::to_datum).collect())
    }

    /// Approve the workspace servers declared by a file whose text hashes
    /// to SHA256 (and still win the merge); return their names.
    pub fn approve(&self, sha256: &str) -> Result<Vec<String>> {
        let paths: Vec<&PathBuf> = self
            .files
            .iter()
            .filter(|f| f.source == Source::Workspace && f.sha256.as_deref() == Some(sha256))
            .map(|f| &f.path)
            .collect();
        let mut approved = Vec::new();
        for (name, file, source) in &self.origins {
            if *source == Source::Workspace && paths.contains(&file) {
                self.registry.approve(name)?;
                approved.push(name.clone());
            }
        }
        Ok(approved)
    }

    /// Every server's status, as data.
    pub fn status(&self) -> Datum {
        status_datum(&self.registry.status())
    }

    /// The registry, for operations of its own.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Start server NAME (or every approved one when NAME is `None`);
    /// the reply is t, or for all, a list of (NAME ERROR-OR-NIL).
    pub fn start(&self, id: i64, name: Option<String>) -> Result<()> {
        let registry = Arc::clone(&self.registry);
        answer(id, async move {
            match name {
                Some(name) => registry.start(&name).await.map(|()| Datum::T),
                None => Ok(Datum::List(
                    registry
                        .start_all()
                        .await
                        .into_iter()
                        .map(|(name, result)| {
                            Datum::List(vec![
                                Datum::Str(name),
                                Datum::opt_str(result.err().map(|e| e.message)),
                            ])
                        })
                        .collect(),
                )),
            }
        })
    }

    /// Stop server NAME (every server when `None`); the reply is t.
    pub fn stop(&self, id: i64, name: Option<String>) -> Result<()> {
        let registry = Arc::clone(&self.registry);
        answer(id, async move {
            match name {
                Some(name) => registry.stop(&name).await?,
                None => registry.stop_all().await,
            }
            Ok(Datum::T)
        })
    }

    /// Restart server NAME now, whatever its backoff; the reply is t.
    pub fn restart(&self, id: i64, name: String) -> Result<()> {
        let registry = Arc::clone(&self.registry);
        answer(id, async move {
            registry.restart(&name).await.map(|()| Datum::T)
        })
    }

    /// List server NAME's tools (starting it if needed); the reply is a
    /// list of tool plists with `:input-schema` as JSON text.
    pub fn list_tools(&self, id: i64, name: String) -> Result<()> {
        let registry = Arc::clone(&self.registry);
        answer(id, async move {
            let tools = registry.list_tools(&name).await?;
            Ok(Datum::List(tools.iter().map(ToolInfo::to_datum).collect()))
        })
    }

    /// Call TOOL of server NAME with ARGUMENTS, JSON text of an object;
    /// the reply is the result plist. Progress goes out as
    /// `mcp-progress` events; [`cancel`] with ID ends the call.
    pub fn call_tool(
        &self,
        id: i64,
        name: String,
        tool: String,
        arguments: &str,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let arguments: Value = if arguments.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(arguments).map_err(|e| {
                super::connection::mcp_error(format!("the arguments of {tool} are not JSON: {e}"))
            })?
        };
        let token = CancellationToken::new();
        lock(calls()).insert(id, token.clone());
        let registry = Arc::clone(&self.registry);
        let progress: super::ProgressFn = Arc::new(move |p: Progress| {
            events::global().push(events::Event::new(
                "mcp-progress",
                Datum::List(vec![
                    Datum::Int(id),
                    Datum::Float(p.progress),
                    p.total.map_or(Datum::Nil, Datum::Float),
                    Datum::opt_str(p.message),
                ]),
            ));
        });
        answer(id, async move {
            let options = CallOptions {
                timeout,
                progress: Some(progress),
                cancel: Some(token),
            };
            let result = registry.call_tool(&name, &tool, arguments, options).await;
            lock(calls()).remove(&id);
            result.map(|r| r.to_datum())
        })
    }

    /// List server NAME's resources and templates; the reply is
    /// `(:resources LIST :templates LIST)`.
    pub fn list_resources(&self, id: i64, name: String) -> Result<()> {
        let registry = Arc::clone(&self.registry);
        answer(id, async move {
            let resources = registry.list_resources(&name).await?;
            let templates = registry
                .list_resource_templates(&name)
                .await
                .unwrap_or_default();
            Ok(Datum::plist([
                (
                    "resources",
                    Datum::List(resources.iter().map(ResourceInfo::to_datum).collect()),
                ),
                (
                    "templates",
                    Datum::List(templates.iter().map(TemplateInfo::to_datum).collect()),
                ),
            ]))
        })
    }

    /// Read URI from server NAME; the reply is a list of content plists.
    pub fn read_resource(&self, id: i64, name: String, uri: String) -> Result<()> {
        let registry = Arc::clone(&self.registry);
        answer(id, async move {
            let contents = registry.read_resource(&name, &uri).await?;
            Ok(Datum::List(
                contents.iter().map(Content::to_datum).collect(),
            ))
        })
    }
}

// Prompts, the composer's `/mcp__SERVER__PROMPT` commands.
impl Session {
    /// List server NAME's prompts (starting it if needed); the reply is
    /// a list of prompt plists, each with its `:command`.
    pub fn list_prompts(&self, id: i64, name: String) -> Result<()> {
        let registry = Arc::clone(&self.registry);
        answer(id, async move {
            let prompts = registry.list_prompts(&name).await?;
            Ok(Datum::List(
                prompts.iter().map(PromptInfo::to_datum).collect(),
            ))
        })
    }

    /// Fill in PROMPT of server NAME with ARGUMENTS; the reply is
    /// `(:description :messages)`, each message `(:role :content)`.
    pub fn get_prompt(
        &self,
        id: i64,
        name: String,
        prompt: String,
        arguments: HashMap<String, String>,
    ) -> Result<()> {
        let registry = Arc::clone(&self.registry);
        answer(id, async move {
            let result = registry.get_prompt(&name, &prompt, arguments).await?;
            Ok(result.to_datum())
        })
    }
}

/// Cancellation tokens of the tool calls in flight, by request id.
fn calls() -> &'static Mutex<HashMap<i64, CancellationToken>> {
    static CALLS: OnceLock<Mutex<HashMap<i64, CancellationToken>>> = OnceLock::new();
    CALLS.get_or_init(Default::default)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Cancel tool call ID (the server gets `notifications/cancelled`);
/// true when it was in flight.
pub fn cancel(id: i64) -> bool {
    match lock(calls()).remove(&id) {
        Some(token) => {
            token.cancel();
            true
        }
        None => false,
    }
}

/// Answer request ID with the outcome of the async WORK.
fn answer<F>(id: i64, work: F) -> Result<()>
where
    F: Future<Output = Result<Datum>> + Send + 'static,
{
    runtime::spawn_reply(id, "MCP", work)
}
