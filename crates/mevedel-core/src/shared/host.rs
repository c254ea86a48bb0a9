//! The pages' host: one HTTP + WebSocket listener on 127.0.0.1 (a random
//! port, on the module's runtime) for every served board.
//!
//! A board's page is `/board/ROUTE/?token=TOKEN`: ROUTE is random, TOKEN
//! a per-board 128-bit secret compared in constant time. Every request
//! must name the listener itself as its Host (no DNS rebinding), and a
//! WebSocket's Origin must be exactly the page's origin, so no other
//! site in the user's browser can reach a board. Each page has a
//! bounded queue: a page that falls behind is dropped rather than
//! slowing the board, and the model's edits never wait for a browser.
//! Static files (the bundled Excalidraw page) come from the assets
//! directory Lisp names; nothing is fetched from a network.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use hyper::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Message, Role, WebSocketConfig};

use super::{Inner, lock};
use crate::error::{Error, ErrorKind, Result};
use crate::runtime;

/// Largest message a page may send (a board with images is large).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

struct Host {
    port: u16,
    assets: PathBuf,
    boards: HashMap<String, Weak<Inner>>,
}

static HOST: Mutex<Option<Host>> = Mutex::new(None);

/// Register BOARD on the host (starting it) and return its page URL.
pub(super) fn serve(board: &Arc<Inner>, assets: &str) -> Result<String> {
    let mut host = lock(&HOST);
    if host.is_none() {
        *host = Some(start(PathBuf::from(assets))?);
    }
    let Some(h) = host.as_mut() else {
        return Err(Error::new(
            ErrorKind::Internal,
            "the shared host did not start",
        ));
    };
    h.assets = PathBuf::from(assets);
    h.boards.insert(board.route.clone(), Arc::downgrade(board));
    Ok(format!(
        "http://127.0.0.1:{}/board/{}/?token={}",
        h.port, board.route, board.token
    ))
}

/// Stop serving the board at ROUTE.
pub(super) fn forget(route: &str) {
    if let Some(h) = lock(&HOST).as_mut() {
        h.boards.remove(route);
    }
}

fn start(assets: PathBuf) -> Result<Host> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| Error::io(ErrorKind::Resource, "cannot listen on 127.0.0.1", &e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io(ErrorKind::Resource, "cannot read the host's port", &e))?
        .port();
    runtime::spawn(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request: Request<Incoming>| async move {
                        Ok::<_, Infallible>(respond(request, port))
                    });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            });
        }
    })?;
    Ok(Host {
        port,
        assets,
        boards: HashMap::new(),
    })
}

/// A and B equal, in time that depends only on their lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn token_of(request: &Request<Incoming>) -> Option<&str> {
    request
        .uri()
        .query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, e)| e) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("woff2") => "font/woff2",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

/// The asset NAME (a relative path of plain segments) under ASSETS.
fn asset(assets: &Path, name: &str) -> Response<Full<Bytes>> {
    let plain_segments = name.split('/').all(|s| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    });
    if !plain_segments {
        return plain(StatusCode::NOT_FOUND, "no such file");
    }
    match std::fs::read(assets.join(name)) {
        Ok(bytes) => {
            let mut r = Response::new(Full::new(Bytes::from(bytes)));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(content_type(name)),
            );
            r
        }
        Err(_) => plain(StatusCode::NOT_FOUND, "no such file"),
    }
}

fn respond(mut request: Request<Incoming>, port: u16) -> Response<Full<Bytes>> {
    let origin = format!("http://127.0.0.1:{port}");
    let host_ok = request
        .headers()
        .get(header::HOST)
        .is_some_and(|h| h.as_bytes() == &origin.as_bytes()["http://".len()..]);
    if !host_ok {
        return plain(StatusCode::FORBIDDEN, "wrong host");
    }
    let path = request.uri().path().to_string();
    let (board, assets) = {
        let host = lock(&HOST);
        let Some(h) = host.as_ref() else {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "stopped");
        };
        if let Some(name) = path.strip_prefix("/assets/") {
            return asset(&h.assets, name);
        }
        let route = path
            .strip_prefix("/board/")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default();
        (
            h.boards.get(route).and_then(Weak::upgrade),
            h.assets.clone(),
        )
    };
    let Some(board) = board else {
        return plain(StatusCode::NOT_FOUND, "no such board");
    };
    let given = token_of(&request).unwrap_or_default();
    if !same(given.as_bytes(), board.token.as_bytes()) {
        return plain(StatusCode::FORBIDDEN, "wrong token");
    }
    let base = format!("/board/{}/", board.route);
    if path == base {
        let mut r = asset(&assets, "index.html");
        let headers = r.headers_mut();
        // The token is in the URL: no page it links to may see it.
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return r;
    }
    if path != format!("{base}ws") {
        return plain(StatusCode::NOT_FOUND, "no such page");
    }
    let origin_ok = request
        .headers()
        .get(header::ORIGIN)
        .is_some_and(|o| o.as_bytes() == origin.as_bytes());
    if !origin_ok {
        return plain(StatusCode::FORBIDDEN, "wrong origin");
    }
    let key = request.headers().get(header::SEC_WEBSOCKET_KEY).cloned();
    let upgrade = request
        .headers()
        .get(header::UPGRADE)
        .is_some_and(|u| u.as_bytes().eq_ignore_ascii_case(b"websocket"));
    let (Some(key), true) = (key, upgrade) else {
        return plain(StatusCode::BAD_REQUEST, "a WebSocket upgrade is expected");
    };
    let upgraded = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        if let Ok(io) = upgraded.await {
            let mut config = WebSocketConfig::default();
            config.max_message_size = Some(MAX_MESSAGE);
            config.max_frame_size = Some(MAX_MESSAGE);
            let ws = WebSocketStream::from_raw_socket(TokioIo::new(io), Role::Server, Some(config))
                .await;
            connection(board, ws).await;
        }
    });
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = r.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    r
}

/// One page's WebSocket: its queue out, its messages in, until either
/// side goes away (or the board drops the page for falling behind).
async fn connection<S>(board: Arc<Inner>, ws: WebSocketStream<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (page, mut queue) = board.attach();
    let (mut sink, mut stream) = ws.split();
    let writer = tokio::spawn(async move {
        while let Some(text) = queue.recv().await {
            if sink.send(Message::text(text)).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let weak = Arc::downgrade(&board);
    drop(board);
    while let Some(Ok(msg)) = stream.next().await {
        let Some(board) = weak.upgrade() else { break };
        match msg {
            Message::Text(text) => board.receive(page, text.as_str()),
            Message::Close(_) => break,
            _ => {}
        }
    }
    if let Some(board) = weak.upgrade() {
        board.detach(page);
    }
    writer.abort();
}

#[cfg(test)]
mod tests;
