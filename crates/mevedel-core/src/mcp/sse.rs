//! The legacy "HTTP with SSE" transport (protocol 2024-11-05) as an
//! `rmcp` transport, for servers configured with `"type": "sse"`: the SDK
//! only has streamable HTTP on the client side, and servers deployed with
//! the old transport must still work as they do for Claude Code.
//!
//! The wire: one GET opens an event stream; its `endpoint` event names the
//! URL (relative to the stream's) every client message is POSTed to; every
//! server message — answers, requests, notifications — arrives as a
//! `message` event on that stream. The configured headers go on both.
//!
//! A reader task owns the stream and hands messages to `rmcp` through a
//! channel; dropping or closing the transport aborts it, so nothing runs
//! after a stop. When the stream ends by itself the reader says how on a
//! watch channel, which the registry turns into one crash report, as for
//! a stdio server that exits.
//!
//! Not here: reconnecting (a new GET is a new session on the server, so a
//! lost stream is a failed server, started afresh on next use) and the
//! bound on the whole start (the registry's startup timeout; this file
//! only says that the `endpoint` event is what never came).

use std::borrow::Cow;

use futures::{Stream, StreamExt};
use reqwest::header::{self, HeaderMap};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use sse_stream::{Sse, SseStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use url::Url;

use super::connection::mcp_error;
use crate::error::{Error, Result};

/// Longest event accepted, in bytes: one endless event from a broken
/// server must not take the editor's memory with it.
const MAX_EVENT_BYTES: usize = 16 << 20;

/// Server messages read ahead of `rmcp`; the reader waits when it is full.
const QUEUE: usize = 64;

/// How a stream ended, once it has (`None` while it runs).
pub(crate) type Ended = watch::Receiver<Option<String>>;

type Events =
    std::pin::Pin<Box<dyn Stream<Item = std::result::Result<Sse, sse_stream::Error>> + Send>>;

/// An open legacy SSE session: where to POST, and the messages the reader
/// task takes off the stream.
pub(crate) struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: tokio::task::JoinHandle<()>,
}

/// Open the event stream at URL with HEADERS and wait, until DEADLINE, for
/// its `endpoint` event. Errors name URL and what failed: the request, the
/// HTTP status, a stream that is not SSE, or the missing endpoint.
pub(crate) async fn open(
    url: &str,
    headers: HeaderMap,
    deadline: Instant,
) -> Result<(SseTransport, Ended)> {
    let at = |what: String| mcp_error(format!("legacy SSE server at {url}: {what}"));
    let parsed = Url::parse(url).map_err(|e| at(format!("not a URL ({e})")))?;
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| at(format!("cannot make an HTTP client: {}", chain(&e))))?;
    let response = client
        .get(parsed)
        .headers(headers.clone())
        .header(header::ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|e| at(format!("GET failed: {}", chain(&e))))?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(at(format!("GET answered HTTP {status}{}", excerpt(&body))));
    }
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("no content type")
        .to_string();
    if !kind.starts_with("text/event-stream") {
        return Err(at(format!(
            "GET answered {kind}, not an event stream; if this is a streamable HTTP \
             server, configure it with \"type\": \"http\""
        )));
    }
    // Redirects were followed: the endpoint is relative to where we ended up.
    let base = response.url().clone();
    let mut bound = EventBound::default();
    let bytes = response.bytes_stream().map(move |chunk| match chunk {
        Ok(bytes) if bound.observe(&bytes) => Ok(bytes),
        Ok(_) => Err(mcp_error(format!(
            "an event exceeded {MAX_EVENT_BYTES} bytes"
        ))),
        Err(e) => Err(mcp_error(chain(&e))),
    });
    let mut events: Events = Box::pin(SseStream::from_bytes_stream(bytes));
    let endpoint = match tokio::time::timeout_at(deadline, endpoint_event(&mut events)).await {
        Ok(Ok(data)) => data,
        Ok(Err(what)) => return Err(at(what)),
        Err(_) => return Err(at("no endpoint event within the startup timeout".into())),
    };
    let endpoint = base.join(endpoint.trim()).map_err(|e| {
        at(format!(
            "its endpoint event {endpoint:?} is not a URL ({e})"
        ))
    })?;
    // The configured headers (credentials, often) go to the server they
    // were written for, never to wherever an event points.
    if endpoint.origin() != base.origin() {
        return Err(at(format!(
            "its endpoint event names {endpoint}, another origin; refusing to send there"
        )));
    }
    let (tx, incoming) = mpsc::channel(QUEUE);
    let (ended_tx, ended) = watch::channel(None);
    let reader = tokio::spawn(read(events, tx, ended_tx));
    Ok((
        SseTransport {
            client,
            endpoint,
            headers,
            incoming,
            reader,
        },
        ended,
    ))
}

/// The data of the stream's `endpoint` event, or why there is none.
async fn endpoint_event(events: &mut Events) -> std::result::Result<String, String> {
    loop {
        match events.next().await {
            None => return Err("the event stream closed before its endpoint event".into()),
            Some(Err(e)) => return Err(format!("the event stream failed: {e}")),
            Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                return Ok(event.data.unwrap_or_default());
            }
            Some(Ok(_)) => {}
        }
    }
}

/// Hand every `message` event of EVENTS to TX; when the stream ends by
/// itself, say how on ENDED before TX drops, so whoever sees `rmcp`'s
/// closed transport can already tell why.
async fn read(
    mut events: Events,
    tx: mpsc::Sender<ServerJsonRpcMessage>,
    ended: watch::Sender<Option<String>>,
) {
    let how = loop {
        let event = match events.next().await {
            None => break "the event stream closed".to_string(),
            Some(Err(e)) => break format!("the event stream failed: {e}"),
            Some(Ok(event)) => event,
        };
        // An event without a name is a `message` (the SSE rule).
        if !matches!(event.event.as_deref(), None | Some("message")) {
            continue;
        }
        let Some(data) = event.data else { continue };
        match parse(&data) {
            Ok(messages) => {
                for message in messages {
                    if tx.send(message).await.is_err() {
                        return;
                    }
                }
            }
            Err(e) => break format!("the server sent a message that is not JSON-RPC ({e})"),
        }
    };
    let _ = ended.send(Some(how));
}

/// One message, or a batch (2024-11-05 allowed them).
fn parse(data: &str) -> serde_json::Result<Vec<ServerJsonRpcMessage>> {
    if data.trim_start().starts_with('[') {
        serde_json::from_str(data)
    } else {
        serde_json::from_str(data).map(|m| vec![m])
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = Error;

    fn name() -> Cow<'static, str> {
        "legacy SSE".into()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let request = serde_json::to_vec(&item).map(|body| {
            self.client
                .post(self.endpoint.clone())
                .headers(self.headers.clone())
                .header(header::CONTENT_TYPE, "application/json")
                .body(body)
        });
        let endpoint = self.endpoint.clone();
        async move {
            let at = |what: String| mcp_error(format!("POST to {endpoint} {what}"));
            let request = request.map_err(|e| at(format!("not sent: {e}")))?;
            let response = request
                .send()
                .await
                .map_err(|e| at(format!("failed: {}", chain(&e))))?;
            let status = response.status();
            if status.is_success() {
                Ok(())
            } else {
                let body = response.text().await.unwrap_or_default();
                Err(at(format!("answered HTTP {status}{}", excerpt(&body))))
            }
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<()> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// E with its sources: reqwest's own message rarely says what went wrong.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The start of an error answer's BODY, for the message.
fn excerpt(body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return String::new();
    }
    let cut: String = body.chars().take(200).collect();
    let more = if cut.len() < body.len() { "…" } else { "" };
    format!(": {cut}{more}")
}

/// The size of the event being received, counted on the raw bytes before
/// the parser buffers them (CR, LF and CRLF all end lines; a blank line
/// ends the event).
#[derive(Debug)]
struct EventBound {
    pending: usize,
    line_start: bool,
    after_cr: bool,
}

impl Default for EventBound {
    fn default() -> Self {
        EventBound {
            pending: 0,
            line_start: true,
            after_cr: false,
        }
    }
}

impl EventBound {
    /// Take CHUNK; false once the current event is over the bound.
    fn observe(&mut self, mut chunk: &[u8]) -> bool {
        while let Some(i) = memchr::memchr2(b'\n', b'\r', chunk) {
            if i > 0 {
                self.pending += i;
                self.line_start = false;
                self.after_cr = false;
            }
            let end = chunk[i];
            if end == b'\n' && self.after_cr {
                // The LF of a CRLF: the CR already ended the line.
                self.after_cr = false;
            } else {
                if self.line_start {
                    self.pending = 0;
                }
                self.line_start = true;
                self.after_cr = end == b'\r';
            }
            chunk = &chunk[i + 1..];
        }
        if !chunk.is_empty() {
            self.pending += chunk.len();
            self.line_start = false;
            self.after_cr = false;
        }
        self.pending <= MAX_EVENT_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_bound_resets_on_blank_lines_of_every_ending() {
        for sep in ["\n", "\r\n", "\r"] {
            let mut bound = EventBound::default();
            let line = "x".repeat(MAX_EVENT_BYTES / 2 - 1);
            let event = format!("data: {line}{sep}{sep}");
            // Many events, each under the bound, split at awkward places.
            let all = event.repeat(4);
            for piece in all.as_bytes().chunks(7_777_777) {
                assert!(bound.observe(piece), "{sep:?}");
            }
            // The CRLF split between chunks is still one line ending.
            let mut bound = EventBound::default();
            assert!(bound.observe(format!("data: {line}\r").as_bytes()));
            assert!(bound.observe(format!("\n\r\ndata: {line}\r\n\r\n").as_bytes()));
        }
        let mut bound = EventBound::default();
        let half = "x".repeat(MAX_EVENT_BYTES / 2 + 10);
        assert!(bound.observe(format!("data: {half}\n").as_bytes()));
        assert!(!bound.observe(format!("data: {half}\n").as_bytes()));
    }

    #[test]
    fn messages_and_batches_parse() {
        let one = parse(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap();
        assert_eq!(one.len(), 1);
        let two = parse(
            r#" [{"jsonrpc":"2.0","method":"notifications/tools/list_changed"},
                 {"jsonrpc":"2.0","id":2,"result":{}}]"#,
        )
        .unwrap();
        assert_eq!(two.len(), 2);
        assert!(parse("not json").is_err());
    }
}
