//! The server of mevedel's tools, driven by rmcp's client (through our
//! `Registry`, as a user's HTTP server would be) and by bare HTTP.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::config::{ServerConfig, Source, Transport};
use super::serve::{self, Answer, Call, Part, Responder, Server, ToolSpec};
use super::{CallOptions, Content, Options, Registry};
use crate::runtime;

fn block<F: Future>(future: F) -> F::Output {
    runtime::get().expect("runtime").block_on(future)
}

/// Answers `Echo` at once, from another thread, with its arguments;
/// leaves `Wait` unanswered; keeps every call and cancellation.
#[derive(Default)]
struct TestResponder {
    calls: Mutex<Vec<Call>>,
    cancelled: Mutex<Vec<i64>>,
}

impl Responder for TestResponder {
    fn call(&self, call: Call) {
        self.calls.lock().unwrap().push(call.clone());
        if call.name == "Echo" {
            std::thread::spawn(move || {
                let answered = serve::answer(
                    call.id,
                    Answer {
                        parts: vec![
                            Part::Text(format!("echo {}", call.arguments)),
                            Part::Image {
                                data: "iVBORw0KGgo=".into(),
                                mime: "image/png".into(),
                            },
                        ],
                        is_error: call.arguments.get("fail").is_some(),
                    },
                );
                assert!(answered, "the client stopped waiting for {}", call.id);
            });
        }
    }

    fn cancelled(&self, id: i64) {
        self.cancelled.lock().unwrap().push(id);
    }
}

fn tools() -> Vec<ToolSpec> {
    let schema = |required: &str| {
        json!({"type": "object",
               "properties": {required: {"type": "string"}},
               "required": [required]})
        .as_object()
        .cloned()
        .unwrap()
    };
    vec![
        ToolSpec {
            name: "Echo".into(),
            description: "Says its arguments back.".into(),
            schema: schema("message"),
        },
        ToolSpec {
            name: "Wait".into(),
            description: "Never answers by itself.".into(),
            schema: schema("reason"),
        },
    ]
}

fn start() -> (Server, Arc<TestResponder>) {
    let responder = Arc::new(TestResponder::default());
    let server = Server::start(
        tools(),
        serve::new_secret().unwrap(),
        Arc::clone(&responder) as Arc<dyn Responder>,
    )
    .unwrap();
    (server, responder)
}

fn client(server: &Server, secret: &str) -> Arc<Registry> {
    let config = ServerConfig {
        name: "mevedel".into(),
        transport: Transport::Http {
            url: server.url().to_string(),
            headers: [("Authorization".to_string(), format!("Bearer {secret}"))].into(),
        },
        source: Source::CommandLine,
        file: PathBuf::from("/test.json"),
    };
    let options = Options {
        startup_timeout: Duration::from_secs(20),
        request_timeout: Duration::from_secs(30),
        stop_grace: Duration::from_millis(500),
        ..Options::default()
    };
    Arc::new(Registry::new(vec![config], options, None))
}

#[test]
fn serve_lists_the_tools_and_answers_a_call_by_id() {
    let (server, responder) = start();
    assert!(
        server.url().starts_with("http://127.0.0.1:"),
        "{}",
        server.url()
    );
    let reg = client(&server, server.secret());
    let listed = block(reg.list_tools("mevedel")).unwrap();
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Echo", "Wait"]);
    assert_eq!(
        listed[0].description.as_deref(),
        Some("Says its arguments back.")
    );
    assert_eq!(listed[0].full_name, "mcp__mevedel__Echo");
    let result = block(reg.call_tool(
        "mevedel",
        "Echo",
        json!({"message": "hi"}),
        CallOptions::default(),
    ))
    .unwrap();
    assert_eq!(result.text(), r#"echo {"message":"hi"}"#);
    assert!(!result.is_error);
    assert!(
        result
            .content
            .iter()
            .any(|c| matches!(c, Content::Image { mime_type, .. } if mime_type == "image/png")),
        "{result:?}"
    );
    let failed = block(reg.call_tool(
        "mevedel",
        "Echo",
        json!({"message": "hi", "fail": true}),
        CallOptions::default(),
    ))
    .unwrap();
    assert!(failed.is_error);
    // A name it does not serve never reaches the responder.
    let unknown = block(reg.call_tool("mevedel", "Nope", json!({}), CallOptions::default()));
    assert!(unknown.is_err());
    let calls = responder.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].name, "Echo");
    assert_ne!(calls[0].id, calls[1].id);
    assert!(responder.cancelled.lock().unwrap().is_empty());
    block(reg.stop_all());
}

#[test]
fn serve_refuses_a_wrong_or_missing_secret() {
    let (server, responder) = start();
    let reg = client(&server, "not-the-secret");
    let err = block(reg.start("mevedel")).unwrap_err();
    assert!(err.message.contains("401"), "{}", err.message);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let status = block(async {
        reqwest::Client::new()
            .post(server.url())
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body)
            .send()
            .await
            .map(|response| response.status().as_u16())
    })
    .unwrap();
    assert_eq!(status, 401);
    assert!(responder.calls.lock().unwrap().is_empty());
}

#[test]
fn serve_tells_the_responder_when_the_client_cancels() {
    let (server, responder) = start();
    let reg = client(&server, server.secret());
    let cancel = CancellationToken::new();
    let waiting = cancel.clone();
    let outcome = block(async {
        let call = reg.call_tool(
            "mevedel",
            "Wait",
            json!({"reason": "test"}),
            CallOptions {
                cancel: Some(waiting),
                ..CallOptions::default()
            },
        );
        let trigger = async {
            while responder.calls.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            cancel.cancel();
        };
        let (outcome, ()) = tokio::join!(call, trigger);
        outcome
    });
    assert!(outcome.is_err());
    let id = responder.calls.lock().unwrap()[0].id;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !responder.cancelled.lock().unwrap().contains(&id) {
        assert!(
            Instant::now() < deadline,
            "the cancellation never reached the responder"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its answer now finds nobody waiting.
    assert!(!serve::answer(id, Answer::default()));
    block(reg.stop_all());
}

#[test]
fn serve_stopping_ends_the_calls_still_waiting() {
    let (server, responder) = start();
    let reg = client(&server, server.secret());
    let outcome = block(async {
        let call = reg.call_tool(
            "mevedel",
            "Wait",
            json!({"reason": "stop"}),
            CallOptions::default(),
        );
        let stop = async {
            while responder.calls.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            server.stop();
        };
        let (outcome, ()) = tokio::join!(call, stop);
        outcome
    });
    assert!(outcome.is_err());
    let id = responder.calls.lock().unwrap()[0].id;
    assert!(responder.cancelled.lock().unwrap().contains(&id));
    block(reg.stop_all());
}
