//! The HTTP client behind a model request: a kept-alive connection pool
//! per proxy setting, each response streamed to Lisp as the text curl
//! would print for it.
//!
//! gptel reads a response from curl's output: the status line and
//! headers (`-D-`), the body, then its write-out. A request here emits
//! that text as `http` events (`(ID output TEXT)`, then `(ID exit CODE
//! MESSAGE HEADER-BYTES)`), so gptel's parsers and mevedel's readings of
//! the status, Retry-After and a stream's end work on it unchanged; a
//! failure ends with the exit code curl gives the same failure, which
//! Lisp already explains. Starting curl cost milliseconds per request;
//! a pooled connection costs none.
//!
//! Not here: HTTP/2, compression, SOCKS proxies and curl's options
//! (Lisp sends requests that need them through curl), and the request
//! body never reaches a log or an error message.

use std::collections::HashMap;
use std::error::Error as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::{Client, NoProxy, Proxy, Response};
use tokio::task::AbortHandle;

use crate::datum::Datum;
use crate::error::Result;
use crate::{events, runtime};

#[cfg(test)]
mod tests;

/// How long connecting, and then each wait for more of the response,
/// may take: gptel gives curl `-y300 -Y1`, and curl connects within 300 s.
const PATIENCE: Duration = Duration::from_secs(300);

/// Where requests go through a proxy, as the user configured it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proxies {
    /// Every request (`gptel-proxy`, or `all_proxy`).
    pub all: Option<String>,
    /// Plain-HTTP requests (`http_proxy`).
    pub http: Option<String>,
    /// HTTPS requests (`https_proxy`).
    pub https: Option<String>,
    /// Hosts reached directly (`no_proxy`, curl's syntax).
    pub no: Option<String>,
}

/// One POST, as gptel would have given it to curl.
#[derive(Debug, Clone)]
pub struct Request {
    pub url: String,
    /// "Name: value" lines.
    pub headers: Vec<String>,
    pub body: Vec<u8>,
    pub proxies: Proxies,
}

/// A failure as curl would report it: its exit code and what happened.
type Failure = (i64, String);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The clients made so far, one per proxy setting: each keeps its pool
/// of open connections, which is the point of this module.
static CLIENTS: Mutex<Vec<(Proxies, Client)>> = Mutex::new(Vec::new());

/// Requests under way, so that Lisp can cancel one.
static RUNNING: Mutex<Option<HashMap<i64, AbortHandle>>> = Mutex::new(None);

fn build_client(proxies: &Proxies) -> std::result::Result<Client, Failure> {
    let proxy_failure = |e: reqwest::Error| (5, format!("bad proxy: {}", chain(&e)));
    let no = proxies.no.as_deref().and_then(NoProxy::from_string);
    // The proxies Lisp passed replace the module's own environment,
    // which does not follow `setenv'.
    let mut builder = Client::builder()
        .no_proxy()
        .connect_timeout(PATIENCE)
        .read_timeout(PATIENCE)
        .tcp_nodelay(true)
        .user_agent(concat!("mevedel/", env!("CARGO_PKG_VERSION")));
    if let Some(all) = &proxies.all {
        builder = builder.proxy(Proxy::all(all).map_err(proxy_failure)?.no_proxy(no));
    } else {
        if let Some(http) = &proxies.http {
            builder = builder.proxy(
                Proxy::http(http)
                    .map_err(proxy_failure)?
                    .no_proxy(no.clone()),
            );
        }
        if let Some(https) = &proxies.https {
            builder = builder.proxy(Proxy::https(https).map_err(proxy_failure)?.no_proxy(no));
        }
    }
    builder
        .build()
        .map_err(|e| (2, format!("cannot make an HTTP client: {}", chain(&e))))
}

/// The client for PROXIES, made on first use.
fn client(proxies: &Proxies) -> std::result::Result<Client, Failure> {
    let mut clients = lock(&CLIENTS);
    if let Some((_, client)) = clients.iter().find(|(p, _)| p == proxies) {
        return Ok(client.clone());
    }
    let client = build_client(proxies)?;
    clients.push((proxies.clone(), client.clone()));
    Ok(client)
}

/// Where a request's events go: `(ID KIND ...)` lists.
type Sink = Arc<dyn Fn(Vec<Datum>) + Send + Sync>;

fn event(sink: &Sink, id: i64, kind: &str, items: Vec<Datum>) {
    let mut data = vec![Datum::Int(id), Datum::Symbol(kind.into())];
    data.extend(items);
    sink(data);
}

/// Start REQUEST as request ID; its output and end arrive as `http`
/// events. Only a module without a runtime fails here.
pub fn start(id: i64, request: Request) -> Result<()> {
    launch(
        id,
        request,
        Arc::new(|data| {
            events::global().push(events::Event::new("http", Datum::List(data)));
        }),
    )
}

fn launch(id: i64, request: Request, sink: Sink) -> Result<()> {
    let rt = runtime::get()?;
    let mut running = lock(&RUNNING);
    let task = rt.spawn(async move {
        let end = match transfer(id, request, &sink).await {
            Ok(header_bytes) => vec![
                Datum::Int(0),
                Datum::str(""),
                Datum::Int(header_bytes as i64),
            ],
            Err((code, message)) => vec![Datum::Int(code), Datum::Str(message), Datum::Int(0)],
        };
        if lock(&RUNNING).get_or_insert_default().remove(&id).is_some() {
            event(&sink, id, "exit", end);
        }
    });
    running
        .get_or_insert_default()
        .insert(id, task.abort_handle());
    Ok(())
}

/// Stop request ID at once, closing its connection; no further event
/// comes for it. Return whether it was still running.
pub fn cancel(id: i64) -> bool {
    let handle = lock(&RUNNING).get_or_insert_default().remove(&id);
    handle.map(|h| h.abort()).is_some()
}

async fn transfer(id: i64, request: Request, sink: &Sink) -> std::result::Result<usize, Failure> {
    let client = client(&request.proxies)?;
    let mut builder = client.post(&request.url);
    for line in &request.headers {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| (43, format!("bad header name in {name:?}")))?;
        let value = HeaderValue::from_str(value.trim())
            .map_err(|_| (43, format!("bad value of header {name}")))?;
        builder = builder.header(name, value);
    }
    let mut response = builder
        .body(request.body)
        .send()
        .await
        .map_err(|e| classify(&e))?;
    let head = head_text(&response);
    let header_bytes = head.len();
    event(sink, id, "output", vec![Datum::Str(head)]);
    let mut text = Utf8Text::default();
    while let Some(chunk) = response.chunk().await.map_err(|e| classify(&e))? {
        let part = text.push(&chunk);
        if !part.is_empty() {
            event(sink, id, "output", vec![Datum::Str(part)]);
        }
    }
    if !text.pending.is_empty() {
        event(sink, id, "output", vec![Datum::str("\u{FFFD}")]);
    }
    Ok(header_bytes)
}

/// The status line and headers as curl's `-D-` prints them.
fn head_text(response: &Response) -> String {
    let version = match response.version() {
        reqwest::Version::HTTP_2 => "HTTP/2",
        reqwest::Version::HTTP_10 => "HTTP/1.0",
        _ => "HTTP/1.1",
    };
    let status = response.status();
    let mut head = format!(
        "{version} {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    for (name, value) in response.headers() {
        head.push_str(name.as_str());
        head.push_str(": ");
        head.push_str(&String::from_utf8_lossy(value.as_bytes()));
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head
}

/// Response bytes as text, a character split between two chunks kept
/// for the next (Emacs decodes curl's output the same way).
#[derive(Default)]
struct Utf8Text {
    pending: Vec<u8>,
}

impl Utf8Text {
    fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    out.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(&String::from_utf8_lossy(valid));
                    match e.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            rest = &after[bad..];
                        }
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }
}

/// E's message with every cause, as one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// The curl exit code for E, with its description.
fn classify(e: &reqwest::Error) -> Failure {
    let text = chain(e);
    let lower = text.to_lowercase();
    let refused = {
        let mut source = e.source();
        let mut found = false;
        while let Some(cause) = source {
            if let Some(io) = cause.downcast_ref::<std::io::Error>() {
                found |= matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::HostUnreachable
                );
            }
            source = cause.source();
        }
        found
    };
    let code = if e.is_timeout() || lower.contains("timed out") {
        28
    } else if e.is_redirect() {
        47
    } else if lower.contains("certificate") || lower.contains("unknownissuer") {
        60
    } else if e.is_connect() && (lower.contains("dns error") || lower.contains("lookup")) {
        6
    } else if refused {
        7
    } else if e.is_connect()
        && (lower.contains("tls")
            || lower.contains("handshake")
            || lower.contains("corrupt message")
            || lower.contains("peer"))
    {
        35
    } else if e.is_connect() {
        7
    } else if e.is_body() || e.is_decode() {
        if lower.contains("incomplete") || lower.contains("end of file") || lower.contains("eof") {
            18
        } else {
            56
        }
    } else if lower.contains("closed before message completed") || lower.contains("incomplete") {
        52
    } else {
        56
    };
    (code, text)
}
