use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;

/// Start request ID to URL with BODY; its events arrive on the receiver.
fn send(id: i64, url: &str, body: &str, proxies: Proxies) -> mpsc::Receiver<Vec<Datum>> {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let request = Request {
        url: url.into(),
        headers: vec![
            "Content-Type: application/json".into(),
            "x-api-key: k".into(),
        ],
        body: body.as_bytes().to_vec(),
        proxies,
    };
    launch(
        id,
        request,
        Arc::new(move |data| {
            let _ = lock(&tx).send(data);
        }),
    )
    .unwrap();
    rx
}

/// The output text and the exit event of a request that ends.
fn outcome(rx: &mpsc::Receiver<Vec<Datum>>) -> (String, Vec<Datum>) {
    let mut text = String::new();
    loop {
        let data = rx.recv_timeout(Duration::from_secs(10)).expect("an event");
        match &data[1] {
            Datum::Symbol(kind) if kind == "output" => match &data[2] {
                Datum::Str(s) => text.push_str(s),
                other => panic!("output is {other:?}"),
            },
            Datum::Symbol(kind) if kind == "exit" => return (text, data[2..].to_vec()),
            other => panic!("unknown event {other:?}"),
        }
    }
}

/// Read one request from STREAM: its head and body.
fn read_request(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        bytes.push(byte[0]);
    }
    let head = String::from_utf8(bytes).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).ok()?;
    Some((head, String::from_utf8(body).unwrap()))
}

/// A server on a free port answering each request on each connection
/// with ANSWER; returns its URL, the connections it accepted and the
/// requests it read.
fn server(answer: &'static str) -> (String, Arc<AtomicUsize>, mpsc::Receiver<(String, String)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/messages", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            std::thread::spawn(move || {
                while let Some(request) = read_request(&mut stream) {
                    let _ = tx.send(request);
                    if stream.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, accepted, rx)
}

const OK: &str = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nRetry-After: 3\r\n\
                  Content-Length: 15\r\n\r\n{\"answer\":\"é\"}";

#[test]
fn answers_as_curl_prints_them_over_one_kept_connection() {
    let (url, accepted, requests) = server(OK);
    for id in [1, 2] {
        let (text, exit) = outcome(&send(id, &url, "{\"q\":\"ü\"}", Proxies::default()));
        let head_end = text.find("\r\n\r\n").unwrap() + 4;
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("\r\nretry-after: 3\r\n"), "{text}");
        assert_eq!(&text[head_end..], "{\"answer\":\"é\"}");
        assert_eq!(
            exit,
            vec![Datum::Int(0), Datum::str(""), Datum::Int(head_end as i64)]
        );
        let (head, body) = requests.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(head.starts_with("POST /v1/messages HTTP/1.1\r\n"), "{head}");
        assert!(head.to_lowercase().contains("x-api-key: k\r\n"), "{head}");
        assert_eq!(body, "{\"q\":\"ü\"}");
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the second request reused the connection"
    );
}

#[test]
fn a_response_cut_short_is_a_partial_transfer() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        read_request(&mut stream);
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nevent: message_start\n");
    });
    let (text, exit) = outcome(&send(10, &url, "{}", Proxies::default()));
    assert!(text.ends_with("event: message_start\n"), "{text}");
    assert_eq!(exit[0], Datum::Int(18), "{exit:?}");
}

#[test]
fn a_refused_connection_exits_as_curl_does() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    drop(listener);
    let (text, exit) = outcome(&send(20, &url, "{}", Proxies::default()));
    assert_eq!(text, "");
    assert_eq!(exit[0], Datum::Int(7), "{exit:?}");
}

#[test]
fn https_speaks_tls_and_a_failed_handshake_exits_35() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}/", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut first = [0u8; 3];
        let _ = stream.read_exact(&mut first);
        let _ = tx.send(first);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    });
    let (text, exit) = outcome(&send(30, &url, "{}", Proxies::default()));
    // A TLS record of type handshake, version 3.x: a ClientHello, not HTTP.
    let first = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(&first[..2], &[0x16, 0x03], "{first:?}");
    assert_eq!(text, "");
    assert_eq!(exit[0], Datum::Int(35), "{exit:?}");
}

#[test]
fn cancelling_closes_the_connection_at_once_and_says_nothing_more() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (tx, closed) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        read_request(&mut stream);
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nevent:\r\n");
        let mut rest = [0u8; 16];
        let start = Instant::now();
        // The client closing the connection ends this read.
        let _ = stream.read(&mut rest);
        let _ = tx.send(start.elapsed());
    });
    let rx = send(40, &url, "{}", Proxies::default());
    let mut text = String::new();
    while !text.contains("event:") {
        let data = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        if let Datum::Str(s) = &data[2] {
            text.push_str(s);
        }
    }
    assert!(cancel(40));
    let waited = closed
        .recv_timeout(Duration::from_secs(5))
        .expect("connection closed");
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "no event after cancel"
    );
    assert!(!cancel(40));
}

#[test]
fn the_configured_proxy_carries_the_request_unless_no_proxy_names_the_host() {
    let (proxy, _, requests) = server(OK);
    let proxy = proxy.trim_end_matches("/v1/messages").to_string();
    let via = Proxies {
        all: Some(proxy.clone()),
        ..Proxies::default()
    };
    let (_, exit) = outcome(&send(50, "http://model.invalid/v1/messages", "{}", via));
    assert_eq!(exit[0], Datum::Int(0), "{exit:?}");
    let (head, _) = requests.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        head.starts_with("POST http://model.invalid/v1/messages HTTP/1.1\r\n"),
        "{head}"
    );
    let (direct, _, direct_requests) = server(OK);
    let bypass = Proxies {
        http: Some(proxy),
        no: Some("127.0.0.1".into()),
        ..Proxies::default()
    };
    let (_, exit) = outcome(&send(51, &direct, "{}", bypass));
    assert_eq!(exit[0], Datum::Int(0), "{exit:?}");
    assert!(direct_requests.recv_timeout(Duration::from_secs(5)).is_ok());
    assert!(
        requests.try_recv().is_err(),
        "the proxy saw only the first request"
    );
}

#[test]
fn a_character_split_between_chunks_arrives_whole() {
    let mut text = Utf8Text::default();
    let bytes = "aé€".as_bytes();
    assert_eq!(text.push(&bytes[..2]), "a");
    assert_eq!(text.push(&bytes[2..4]), "é");
    assert_eq!(text.push(&bytes[4..]), "€");
    assert_eq!(text.push(b"\xffz"), "\u{FFFD}z");
    assert!(text.pending.is_empty());
}
