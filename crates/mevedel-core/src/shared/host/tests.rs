use std::io::{Read, Write};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::Message;

use super::super::Board;
use crate::testdir::TestDir;

fn served(board: &Board, dir: &TestDir) -> (u16, String, String) {
    std::fs::write(dir.path().join("index.html"), "THE PAGE").expect("page");
    let url = board
        .serve(dir.path().to_str().expect("utf-8"))
        .expect("serve");
    let rest = url.strip_prefix("http://127.0.0.1:").expect("local url");
    let (port, rest) = rest.split_once('/').expect("path");
    let (path, token) = rest.split_once("?token=").expect("token");
    (
        port.parse().expect("port"),
        format!("/{path}"),
        token.to_string(),
    )
}

/// The status line and body of GET PATH with HOST as the Host header.
fn get(port: u16, path: &str, host: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let status = out[9..12].parse().expect("status");
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

type Ws = tokio_tungstenite::WebSocketStream<TcpStream>;

async fn ws(port: u16, path: &str, token: &str, origin: &str) -> Result<Ws, String> {
    let mut request = format!("ws://127.0.0.1:{port}{path}ws?token={token}")
        .into_client_request()
        .map_err(|e| e.to_string())?;
    request
        .headers_mut()
        .insert("Origin", origin.parse().map_err(|_| "origin")?);
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    tokio_tungstenite::client_async(request, stream)
        .await
        .map(|(ws, _)| ws)
        .map_err(|e| e.to_string())
}

async fn next_json(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a message in time")
            .expect("open")
            .expect("ok");
        if let Message::Text(t) = msg {
            return serde_json::from_str(t.as_str()).expect("json");
        }
    }
}

fn hash_line(board: &Board, id: &str) -> String {
    board
        .overview()
        .expect("overview")
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(id))
        .and_then(|l| l.split(' ').next())
        .expect("line")
        .to_string()
}

#[test]
fn pages_need_the_token_the_host_and_the_origin() {
    let dir = TestDir::new("shared-host");
    let board = Board::open("b1", "k1", None).expect("board");
    let (port, path, token) = served(&board, &dir);
    let host = format!("127.0.0.1:{port}");
    assert_eq!(
        get(port, &format!("{path}?token={token}"), &host),
        (200, "THE PAGE".into())
    );
    assert_eq!(
        get(port, &format!("{path}?token={}", "0".repeat(32)), &host).0,
        403
    );
    assert_eq!(get(port, &path, &host).0, 403);
    assert_eq!(
        get(
            port,
            &format!("{path}?token={token}"),
            &format!("evil.example:{port}")
        )
        .0,
        403
    );
    assert_eq!(get(port, "/assets/../index.html", &host).0, 404);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let origin = format!("http://127.0.0.1:{port}");
        let bad_origin = ws(port, &path, &token, "http://evil.example")
            .await
            .expect_err("refused");
        assert!(bad_origin.contains("403"), "{bad_origin}");
        let lookalike = ws(port, &path, &token, &format!("{origin}.evil.example"))
            .await
            .expect_err("refused");
        assert!(lookalike.contains("403"), "{lookalike}");
        let bad_token = ws(port, &path, &"f".repeat(32), &origin)
            .await
            .expect_err("refused");
        assert!(bad_token.contains("403"), "{bad_token}");
        let mut page = ws(port, &path, &token, &origin).await.expect("accepted");
        assert_eq!(next_json(&mut page).await["t"], "init");
    });
    board.close();
    assert_eq!(get(port, &format!("{path}?token={token}"), &host).0, 404);
}

#[test]
fn edits_flow_both_ways_between_board_and_pages() {
    let dir = TestDir::new("shared-host");
    let board = Board::open("b2", "k2", None).expect("board");
    board
        .edit(
            r#"[{"op":"add","element":{"type":"rectangle","id":"r1"}}]"#,
            "model",
        )
        .expect("add");
    let (port, path, token) = served(&board, &dir);
    let origin = format!("http://127.0.0.1:{port}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let mut a = ws(port, &path, &token, &origin).await.expect("page a");
        let mut b = ws(port, &path, &token, &origin).await.expect("page b");
        let init = next_json(&mut a).await;
        assert_eq!(init["elements"][0]["id"], "r1");
        next_json(&mut b).await;
        // The model's edit reaches both pages, highlighted.
        let h = hash_line(&board, "r1");
        board
            .edit(&json!([{"op": "update", "hash": h, "set": {"x": 42}}]).to_string(), "model")
            .expect("edit");
        for page in [&mut a, &mut b] {
            let up = next_json(page).await;
            assert_eq!(up["t"], "update");
            assert_eq!(up["elements"][0]["x"], 42);
            assert_eq!(up["highlight"], json!(["r1"]));
        }
        // A page's new element reaches the board and the other page.
        let drawn = json!({"t": "elements", "elements": [{"id": "u1", "type": "ellipse", "x": 5, "y": 6, "width": 7, "height": 8, "version": 2, "versionNonce": 3}]});
        a.send(Message::text(drawn.to_string())).await.expect("send");
        let up = next_json(&mut b).await;
        assert_eq!(up["elements"][0]["id"], "u1");
        assert!(board.overview().expect("overview").contains(" u1 ellipse x=5 y=6 w=7 h=8"));
        // A stale page version is answered with the board's.
        let stale = json!({"t": "elements", "elements": [{"id": "r1", "type": "rectangle", "x": 0, "version": 1, "versionNonce": 0}]});
        a.send(Message::text(stale.to_string())).await.expect("send");
        let back = next_json(&mut a).await;
        assert_eq!(back["elements"][0]["x"], 42);
        // A comment is stored in the element's discussion.
        a.send(Message::text(json!({"t": "comment", "element": "u1", "text": "why here?"}).to_string())).await.expect("send");
        let c = next_json(&mut b).await;
        assert_eq!(c["t"], "comment");
        assert!(board.discussions().expect("d").contains("user: \"why here?\""));
    });
}

#[test]
fn a_page_that_stops_reading_is_dropped_not_waited_for() {
    let dir = TestDir::new("shared-host");
    let board = Board::open("b3", "k3", None).expect("board");
    let big = "x".repeat(64 * 1024);
    board
        .edit(
            &json!([{"op": "add", "element": {"type": "text", "id": "t", "text": big}}])
                .to_string(),
            "model",
        )
        .expect("add");
    let (port, path, token) = served(&board, &dir);
    let origin = format!("http://127.0.0.1:{port}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let _stuck = rt.block_on(async { ws(port, &path, &token, &origin).await.expect("page") });
    let open = |b: &Board| b.overview().expect("o").contains(", 1 page(s) open");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !open(&board) {
        assert!(
            std::time::Instant::now() < deadline,
            "the page never attached"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let started = std::time::Instant::now();
    let mut edits = 0;
    while open(&board) {
        let h = hash_line(&board, "t");
        board
            .edit(
                &json!([{"op": "update", "hash": h, "set": {"x": edits}}]).to_string(),
                "model",
            )
            .expect("edit");
        edits += 1;
        assert!(edits < 5000, "the stuck page was never dropped");
    }
    assert!(started.elapsed() < Duration::from_secs(20));
}
