//! mevedel's own tools served to an ACP agent over MCP: the agent (Claude
//! Code, say) calls `mcp__mevedel__Read` and the call runs through
//! mevedel's pipeline instead of the agent's unconfined built-ins.
//!
//! One [`Server`] per agent session: `rmcp`'s streamable HTTP service
//! behind a hyper HTTP/1 loop on 127.0.0.1 and an ephemeral port, each
//! request carrying the session's secret as a bearer token (any other
//! gets 401, so no other local process can borrow mevedel's hands).
//! `tools/list` answers from the list the caller handed over;
//! `tools/call` goes to a [`Responder`] with a fresh id and waits for
//! [`answer`] with that id, from any thread. A client's
//! `notifications/cancelled`, or its connection dropping, tells the
//! responder ([`Responder::cancelled`]); stopping the server ends every
//! call still waiting.
//!
//! [`LispResponder`] turns calls into `mcp-serve-call` events
//! (`(:key :id :name :arguments :tool-use-id)`, the arguments as JSON
//! text, the tool-use id Claude Code passes in `_meta`) and cancellations
//! into `mcp-serve-cancel` (`(:key :id)`).
//!
//! What it does not do: run a tool, check a permission or know a
//! schema's meaning. The caller decides all of that.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use bytes::Bytes;
use http_body_util::Full;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::{events, runtime};

/// One tool as the agent sees it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// The input JSON schema, an object.
    pub schema: JsonObject,
}

/// A `tools/call` for the responder to answer with [`answer`].
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: i64,
    pub name: String,
    /// The arguments, a JSON object (empty when the client sent none).
    pub arguments: Value,
    /// The model's tool-use id, when the client says it (Claude Code
    /// does, in `_meta["claudecode/toolUseId"]`).
    pub tool_use_id: Option<String>,
}

/// One part of a tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    /// Base64 data and its MIME type.
    Image {
        data: String,
        mime: String,
    },
}

/// The answer to a [`Call`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    pub parts: Vec<Part>,
    pub is_error: bool,
}

/// Who answers the calls: Lisp through events ([`LispResponder`]), or a
/// test.
pub trait Responder: Send + Sync + 'static {
    /// CALL arrived; answer it later with [`answer`].
    fn call(&self, call: Call);
    /// The client gave up call ID (it cancelled, or went away); an
    /// answer to it now finds nobody.
    fn cancelled(&self, id: i64);
}

/// Calls waiting for their answer, by id.
fn waiting() -> &'static Mutex<HashMap<i64, oneshot::Sender<Answer>>> {
    static WAITING: OnceLock<Mutex<HashMap<i64, oneshot::Sender<Answer>>>> = OnceLock::new();
    WAITING.get_or_init(Default::default)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Answer call ID with ANSWER; true when a client was still waiting.
pub fn answer(id: i64, answer: Answer) -> bool {
    match lock(waiting()).remove(&id) {
        Some(sender) => sender.send(answer).is_ok(),
        None => false,
    }
}

fn next_id() -> i64 {
    static NEXT: AtomicI64 = AtomicI64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed) + 1
}

/// A call's place in [`waiting`]: leaving it unanswered (the client
/// cancelled, disconnected, or the server stopped) tells the responder.
struct Ticket {
    id: i64,
    responder: Arc<dyn Responder>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if lock(waiting()).remove(&self.id).is_some() {
            self.responder.cancelled(self.id);
        }
    }
}

/// What every session of one server shares.
struct Shared {
    tools: Vec<Tool>,
    responder: Arc<dyn Responder>,
    stopped: CancellationToken,
}

/// The `rmcp` handler of one MCP session.
#[derive(Clone)]
struct Handler(Arc<Shared>);

fn tool_use_id(
    params: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<String> {
    const KEY: &str = "claudecode/toolUseId";
    params
        .meta
        .as_ref()
        .and_then(|meta| meta.get(KEY))
        .or_else(|| context.meta.get(KEY))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn result_of(answer: Answer) -> CallToolResult {
    let content: Vec<ContentBlock> = answer
        .parts
        .into_iter()
        .map(|part| match part {
            Part::Text(text) => ContentBlock::text(text),
            Part::Image { data, mime } => ContentBlock::image(data, mime),
        })
        .collect();
    if answer.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl rmcp::ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("mevedel", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.0.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let shared = &self.0;
        if !shared.tools.iter().any(|tool| tool.name == request.name) {
            return Err(ErrorData::invalid_params(
                format!("mevedel has no tool {}", request.name),
                None,
            ));
        }
        let id = next_id();
        let (sender, receiver) = oneshot::channel();
        lock(waiting()).insert(id, sender);
        let ticket = Ticket {
            id,
            responder: Arc::clone(&shared.responder),
        };
        shared.responder.call(Call {
            id,
            name: request.name.to_string(),
            tool_use_id: tool_use_id(&request, &context),
            arguments: Value::Object(request.arguments.clone().unwrap_or_default()),
        });
        let outcome = tokio::select! {
            answered = receiver => answered.ok(),
            () = context.ct.cancelled() => None,
            () = shared.stopped.cancelled() => None,
        };
        drop(ticket);
        match outcome {
            Some(answer) => Ok(CallToolResponse::Complete(result_of(answer))),
            None => Err(ErrorData::internal_error(
                format!("mevedel's {} call ended without a result", request.name),
                None,
            )),
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn unauthorized() -> Response<Body> {
    let mut response = Response::new(BoxBody::new(Full::new(Bytes::from_static(
        b"a valid bearer token is required",
    ))));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response
}

/// Whether REQUEST carries SECRET as its bearer token.
fn authorized(request: &Request<Incoming>, secret: &str) -> bool {
    request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .is_some_and(|token| token.trim() == secret)
}

/// A fresh secret: 32 random bytes from the system, as hex.
pub fn new_secret() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|e| Error::io(ErrorKind::Exec, "cannot read /dev/urandom", &e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A running server; stopped when stopped or dropped.
pub struct Server {
    url: String,
    secret: String,
    stopped: CancellationToken,
}

impl Server {
    /// Serve TOOLS on 127.0.0.1 (an ephemeral port) to clients that
    /// send SECRET as their bearer token, RESPONDER answering the calls.
    pub fn start(
        tools: Vec<ToolSpec>,
        secret: String,
        responder: Arc<dyn Responder>,
    ) -> Result<Server> {
        if secret.is_empty() {
            return Err(Error::new(ErrorKind::Exec, "an MCP server needs a secret"));
        }
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| Error::io(ErrorKind::Exec, "cannot listen on 127.0.0.1", &e))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::io(ErrorKind::Exec, "cannot read the MCP server's port", &e))?
            .port();
        let stopped = CancellationToken::new();
        let shared = Arc::new(Shared {
            tools: tools
                .into_iter()
                .map(|spec| Tool::new(spec.name, spec.description, Arc::new(spec.schema)))
                .collect(),
            responder,
            stopped: stopped.clone(),
        });
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = stopped.child_token();
        let handler = Handler(shared);
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let url = format!("http://127.0.0.1:{port}/mcp");
        let kept = secret.clone();
        let secret: Arc<str> = secret.into();
        let token = stopped.clone();
        runtime::spawn(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                return;
            };
            loop {
                let stream = tokio::select! {
                    () = token.cancelled() => break,
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => stream,
                        Err(_) => continue,
                    },
                };
                let service = service.clone();
                let secret = Arc::clone(&secret);
                let token = token.clone();
                tokio::spawn(async move {
                    let serve = hyper::service::service_fn(move |request: Request<Incoming>| {
                        let service = service.clone();
                        let allowed = authorized(&request, &secret);
                        async move {
                            Ok::<_, Infallible>(if allowed {
                                service.handle(request).await
                            } else {
                                unauthorized()
                            })
                        }
                    });
                    let connection =
                        http1::Builder::new().serve_connection(TokioIo::new(stream), serve);
                    tokio::select! {
                        _ = connection => {}
                        () = token.cancelled() => {}
                    }
                });
            }
        })?;
        Ok(Server {
            url,
            secret: kept,
            stopped,
        })
    }

    /// Where clients reach the server.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bearer token clients must send.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Stop listening, end every session and every call still waiting.
    pub fn stop(&self) {
        self.stopped.cancel();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Calls as events for Lisp, under KEY.
pub struct LispResponder {
    pub key: String,
}

impl Responder for LispResponder {
    fn call(&self, call: Call) {
        events::global().push(events::Event::new(
            "mcp-serve-call",
            Datum::plist([
                ("key", Datum::str(&self.key)),
                ("id", Datum::Int(call.id)),
                ("name", Datum::Str(call.name)),
                ("arguments", Datum::Str(call.arguments.to_string())),
                ("tool-use-id", Datum::opt_str(call.tool_use_id)),
            ]),
        ));
    }

    fn cancelled(&self, id: i64) {
        events::global().push(events::Event::new(
            "mcp-serve-cancel",
            Datum::plist([("key", Datum::str(&self.key)), ("id", Datum::Int(id))]),
        ));
    }
}
