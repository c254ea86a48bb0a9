//! Tests of the ACP client: the environment and updates as plain
//! functions; the connection against a scripted agent of our own
//! (`tests/acp-agents/fake_agent.py`), which sends what no real agent
//! does on demand; and against the real `claude-agent-acp` (Claude Code,
//! which nobody here wrote), installed by `scripts/deps.sh` under
//! `.deps/acp/`, talking to the scripted Anthropic server
//! (`scripted-model/server.py`) on 127.0.0.1 with a temporary HOME. Tests
//! that need it fail, naming the script, when it is missing.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::child::{descendants, live};
use super::config::agent_env;
use super::connection::SessionOptions;
use super::*;
use crate::runtime;
use agent_client_protocol::ErrorCode;

/// Start AGENT's turn of TEXT in SESSION on the runtime, to act while
/// it runs.
fn prompt_in_background(
    agent: &Arc<Connection>,
    session: &str,
    text: &str,
) -> tokio::task::JoinHandle<crate::Result<TurnEnd>> {
    let (agent, id, text) = (Arc::clone(agent), session.to_string(), text.to_string());
    runtime::get()
        .expect("runtime")
        .spawn(async move { agent.prompt_text(&id, &text).await })
}

fn block<F: Future>(future: F) -> F::Output {
    runtime::get().expect("runtime").block_on(future)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mevedel-acp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// Every event a connection sent, in order.
#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

impl Events {
    fn listener(self: &Arc<Self>) -> Listener {
        let events = Arc::clone(self);
        Arc::new(move |event| events.0.lock().expect("events").push(event))
    }

    fn all(&self) -> Vec<Event> {
        self.0.lock().expect("events").clone()
    }

    fn updates(&self) -> Vec<Update> {
        self.all()
            .into_iter()
            .filter_map(|event| match event {
                Event::Update { update, .. } => Some(update),
                _ => None,
            })
            .collect()
    }

    /// The text of every agent message chunk, joined.
    fn text(&self) -> String {
        self.updates()
            .into_iter()
            .filter_map(|update| match update {
                Update::Message(Chunk::Text(text)) => Some(text),
                _ => None,
            })
            .collect()
    }
}

/// A delegate over an in-memory file system and one canned terminal;
/// it answers reads from another thread, later, as the Lisp seam will.
/// With HOLD set it keeps permission requests unanswered.
#[derive(Default)]
struct TestDelegate {
    files: Mutex<HashMap<PathBuf, String>>,
    /// (agent, method) of every request.
    methods: Mutex<Vec<(String, &'static str)>>,
    hold: bool,
    held: Mutex<Vec<Reply<schema::RequestPermissionResponse>>>,
}

impl TestDelegate {
    fn with_file(path: &str, text: &str) -> TestDelegate {
        let delegate = TestDelegate::default();
        delegate
            .files
            .lock()
            .expect("files")
            .insert(path.into(), text.into());
        delegate
    }
}

impl Delegate for TestDelegate {
    fn request(&self, agent: &str, request: Request) {
        self.methods
            .lock()
            .expect("methods")
            .push((agent.to_string(), request.method()));
        match request {
            Request::ReadTextFile(read, reply) => {
                let text = self.files.lock().expect("files").get(&read.path).cloned();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(10));
                    match text {
                        Some(text) => {
                            let skip = read.line.map_or(0, |line| line.saturating_sub(1)) as usize;
                            let take = read.limit.map_or(usize::MAX, |limit| limit as usize);
                            let lines: String =
                                text.split_inclusive('\n').skip(skip).take(take).collect();
                            reply.ok(schema::ReadTextFileResponse::new(lines));
                        }
                        None => reply.fail(
                            ErrorCode::RESOURCE_NOT_FOUND,
                            format!("{} does not exist", read.path.display()),
                        ),
                    }
                });
            }
            Request::WriteTextFile(write, reply) => {
                self.files
                    .lock()
                    .expect("files")
                    .insert(write.path, write.content);
                reply.ok(schema::WriteTextFileResponse::new());
            }
            Request::CreateTerminal(create, reply) => {
                assert_eq!((create.command.as_str(), create.args.len()), ("echo", 1));
                reply.ok(schema::CreateTerminalResponse::new("term-1"));
            }
            Request::TerminalOutput(_, reply) => reply
                .ok(schema::TerminalOutputResponse::new("hi\n", false)
                    .exit_status(schema::TerminalExitStatus::new().exit_code(0))),
            Request::WaitForTerminalExit(_, reply) => {
                reply.ok(schema::WaitForTerminalExitResponse::new(
                    schema::TerminalExitStatus::new().exit_code(0),
                ))
            }
            Request::KillTerminal(_, reply) => reply.ok(schema::KillTerminalResponse::new()),
            Request::ReleaseTerminal(_, reply) => reply.ok(schema::ReleaseTerminalResponse::new()),
            Request::Permission(ask, reply) => {
                if self.hold {
                    self.held.lock().expect("held").push(reply);
                    return;
                }
                let allow = ask
                    .options
                    .iter()
                    .find(|option| option.kind == schema::PermissionOptionKind::AllowOnce)
                    .map(|option| option.option_id.clone());
                match allow {
                    Some(id) => reply.ok(schema::RequestPermissionResponse::new(
                        schema::RequestPermissionOutcome::Selected(
                            schema::SelectedPermissionOutcome::new(id),
                        ),
                    )),
                    None => reply.fail(ErrorCode::INVALID_PARAMS, "no allow option"),
                }
            }
        }
    }
}

// ---- plain functions ----

#[test]
fn env_forces_is_sandbox_to_1_only_as_root() {
    let base: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), "/bin".into()),
        ("IS_SANDBOX".into(), "yes".into()),
        ("KEEP".into(), "old".into()),
    ];
    let overrides = [("KEEP".to_string(), "new".to_string())];
    let get = |vars: &[(OsString, OsString)], name: &str| -> Vec<String> {
        vars.iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.to_string_lossy().into_owned())
            .collect()
    };
    let root = agent_env(base.clone(), &overrides, true);
    assert_eq!(get(&root, "IS_SANDBOX"), ["1"]);
    assert_eq!(get(&root, "KEEP"), ["new"]);
    assert_eq!(get(&root, "PATH"), ["/bin"]);
    let user = agent_env(base.clone(), &overrides, false);
    assert_eq!(get(&user, "IS_SANDBOX"), ["yes"]);
    // Not even a configured value survives as root.
    let configured = [("IS_SANDBOX".to_string(), "true".to_string())];
    assert_eq!(
        get(&agent_env(base, &configured, true), "IS_SANDBOX"),
        ["1"]
    );
}

#[test]
fn session_meta_puts_disallowed_tools_under_claude_code_options() {
    let options = SessionOptions {
        disallowed_tools: vec!["Read".into(), "Bash".into()],
        meta: Some(
            json!({"claudeCode": {"options": {"model": "haiku"}}, "other": 1})
                .as_object()
                .expect("object")
                .clone(),
        ),
        ..SessionOptions::default()
    };
    assert_eq!(
        Value::Object(options.request_meta().expect("meta")),
        json!({"claudeCode": {"options": {"model": "haiku", "disallowedTools": ["Read", "Bash"]}},
               "other": 1})
    );
    // A non-object in the way is replaced, not a panic.
    let odd = SessionOptions {
        disallowed_tools: vec!["Edit".into()],
        meta: Some(
            json!({"claudeCode": 5})
                .as_object()
                .expect("object")
                .clone(),
        ),
        ..SessionOptions::default()
    };
    assert_eq!(
        Value::Object(odd.request_meta().expect("meta")),
        json!({"claudeCode": {"options": {"disallowedTools": ["Edit"]}}})
    );
    assert_eq!(SessionOptions::default().request_meta(), None);
}

#[test]
fn updates_are_read_leniently() {
    let parse = |update: Value| update::parse(&json!({"sessionId": "s", "update": update}));
    assert_eq!(
        parse(
            json!({"sessionUpdate": "usage_update", "used": null, "size": 200000,
                     "cost": {"amount": 0.5, "currency": "USD"}})
        ),
        Some((
            "s".into(),
            Update::Usage(Usage {
                used: None,
                size: Some(200000),
                cost: Some((0.5, "USD".into()))
            })
        ))
    );
    assert_eq!(
        parse(json!({"sessionUpdate": "agent_message_chunk",
                     "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}})),
        Some((
            "s".into(),
            Update::Message(Chunk::Block(
                json!({"type": "image", "data": "AA==", "mimeType": "image/png"})
            ))
        ))
    );
    assert_eq!(
        parse(json!({"sessionUpdate": "tool_call", "title": "no id"})),
        Some((
            "s".into(),
            Update::Other {
                kind: "tool_call".into(),
                raw: json!({"sessionUpdate": "tool_call", "title": "no id"})
            }
        ))
    );
    assert_eq!(
        update::parse(&json!({"update": {"sessionUpdate": "plan"}})),
        None
    );
    assert_eq!(
        update::parse(&json!({"sessionId": "s", "update": {}})),
        None
    );
}

// ---- the scripted agent ----

fn fake_script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/acp-agents/fake_agent.py")
        .to_string_lossy()
        .into_owned()
}

fn fake_config(args: &[&str], cwd: &Path) -> AgentConfig {
    let mut all = vec![fake_script()];
    all.extend(args.iter().map(|a| a.to_string()));
    AgentConfig {
        name: "fake".into(),
        command: "python3".into(),
        args: all,
        env: vec![],
        cwd: cwd.to_path_buf(),
    }
}

fn quick() -> Options {
    Options {
        startup_timeout: Duration::from_secs(20),
        request_timeout: Duration::from_secs(20),
        ..Options::default()
    }
}

fn start_fake(
    args: &[&str],
    cwd: &Path,
    delegate: Arc<TestDelegate>,
    events: &Arc<Events>,
) -> Result<Connection, crate::Error> {
    block(Connection::start(
        fake_config(args, cwd),
        quick(),
        delegate,
        events.listener(),
    ))
}

#[test]
fn fake_tour_streams_every_update_and_serves_every_request() {
    let dir = scratch("tour");
    let delegate = Arc::new(TestDelegate::with_file("/w/notes.txt", "one\ntwo\nthree\n"));
    let events = Arc::new(Events::default());
    let agent = start_fake(&[], &dir, Arc::clone(&delegate), &events).expect("start");
    let info = agent.info();
    assert_eq!(
        (
            info.name.as_deref(),
            info.version.as_deref(),
            info.load_session
        ),
        (Some("fake-agent"), Some("0.1"), true)
    );
    // What mevedel advertised, as the agent received it.
    assert_eq!(
        info.raw["_meta"]["clientCapabilities"],
        json!({"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true,
               "auth": {"terminal": false}})
    );
    assert_eq!(info.raw["_meta"]["clientInfo"]["name"], "mevedel");
    let session = block(agent.new_session(&SessionOptions::default())).expect("session");
    let end = block(agent.prompt_text(&session.id, "tour")).expect("prompt");
    assert_eq!(end.stop_reason, "end_turn");
    assert_eq!(
        end.usage,
        Some(TokenUsage {
            input: Some(12),
            output: Some(7),
            total: Some(19),
            cached_read: Some(3),
            cached_write: Some(0),
            thought: None
        })
    );
    let updates = events.updates();
    assert_eq!(updates.len(), 11, "{updates:#?}");
    assert_eq!(
        updates[0],
        Update::Thought(Chunk::Text("Thinking it over".into()))
    );
    assert_eq!(updates[1], Update::Message(Chunk::Text("Hello ".into())));
    assert_eq!(updates[2], Update::Message(Chunk::Text("world".into())));
    let Update::ToolCall(call) = &updates[3] else {
        panic!("not a tool call: {:?}", updates[3])
    };
    assert_eq!(
        (
            call.id.as_str(),
            call.is_update,
            call.kind.as_deref(),
            call.status.as_deref()
        ),
        ("call-1", false, Some("read"), Some("pending"))
    );
    assert_eq!(call.raw_input, Some(json!({"path": "/w/notes.txt"})));
    let Update::ToolCall(done) = &updates[4] else {
        panic!("not a tool call update: {:?}", updates[4])
    };
    assert_eq!(
        (
            done.is_update,
            done.status.as_deref(),
            done.title.as_deref()
        ),
        (true, Some("completed"), None)
    );
    assert_eq!(done.raw_output, Some(json!({"lines": 2})));
    assert_eq!(
        updates[5],
        Update::Plan(vec![
            PlanEntry {
                content: "Read the notes".into(),
                priority: "high".into(),
                status: "completed".into()
            },
            PlanEntry {
                content: "Write the summary".into(),
                priority: "medium".into(),
                status: "pending".into()
            },
        ])
    );
    assert_eq!(
        updates[6],
        Update::Usage(Usage {
            used: None,
            size: Some(200000),
            cost: Some((0.25, "USD".into()))
        })
    );
    assert_eq!(
        updates[7],
        Update::Commands(vec![
            Command {
                name: "review".into(),
                description: "Review the diff".into(),
                hint: Some("[path]".into())
            },
            Command {
                name: "init".into(),
                description: "Write a CLAUDE.md".into(),
                hint: None
            },
        ])
    );
    assert_eq!(updates[8], Update::Mode("plan".into()));
    assert_eq!(
        updates[9],
        Update::Other {
            kind: "future_thing".into(),
            raw: json!({"sessionUpdate": "future_thing", "detail": 7})
        }
    );
    // The agent's record of each answer it got, as its last chunk.
    let Update::Message(Chunk::Text(answers)) = &updates[10] else {
        panic!("no answers: {:?}", updates[10])
    };
    let answers: Value = serde_json::from_str(answers).expect("answers JSON");
    assert_eq!(answers["read"], json!([{"content": "two\n"}, null]));
    assert_eq!(answers["read_missing"][1]["code"], -32002);
    assert_eq!(
        answers["read_missing"][1]["message"],
        "/w/missing.txt does not exist"
    );
    assert_eq!(answers["write"], json!([{}, null]));
    assert_eq!(answers["create"], json!({"terminalId": "term-1"}));
    assert_eq!(
        answers["output"],
        json!([{"output": "hi\n", "truncated": false, "exitStatus": {"exitCode": 0}}, null])
    );
    assert_eq!(answers["wait"], json!([{"exitCode": 0}, null]));
    assert_eq!(answers["kill"], json!([{}, null]));
    assert_eq!(answers["release"], json!([{}, null]));
    assert_eq!(
        answers["permission"],
        json!([{"outcome": {"outcome": "selected", "optionId": "yes"}}, null])
    );
    assert_eq!(answers["bad_params"][1]["code"], -32602);
    assert_eq!(answers["unknown"][1]["code"], -32601);
    assert_eq!(
        delegate
            .files
            .lock()
            .expect("files")
            .get(Path::new("/w/out.txt")),
        Some(&"written".to_string())
    );
    let methods = delegate.methods.lock().expect("methods").clone();
    assert!(methods.iter().all(|(agent, _)| agent == "fake"));
    assert_eq!(
        methods
            .iter()
            .map(|(_, method)| *method)
            .collect::<Vec<_>>(),
        [
            "fs/read_text_file",
            "fs/read_text_file",
            "fs/write_text_file",
            "terminal/create",
            "terminal/output",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/release",
            "session/request_permission"
        ]
    );
    block(agent.stop());
    assert!(!agent.alive());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fake_session_new_carries_cwd_mcp_servers_and_disallowed_tools() {
    let dir = scratch("new");
    let events = Arc::new(Events::default());
    let agent = start_fake(&[], &dir, Arc::default(), &events).expect("start");
    let options = SessionOptions {
        mcp_servers: vec![schema::McpServer::Stdio(schema::McpServerStdio::new(
            "mevedel",
            "/bin/true",
        ))],
        disallowed_tools: vec!["Read".into(), "Write".into(), "Bash".into()],
        ..SessionOptions::default()
    };
    let session = block(agent.new_session(&options)).expect("session");
    assert_eq!(session.id, "sess-1");
    assert_eq!(
        session.modes,
        Some(json!({"currentModeId": "default", "availableModes": []}))
    );
    let received = &session.raw["_meta"]["received"];
    assert_eq!(received["cwd"], json!(dir));
    assert_eq!(
        received["_meta"],
        json!({"claudeCode": {"options": {"disallowedTools": ["Read", "Write", "Bash"]}}})
    );
    assert_eq!(received["mcpServers"][0]["name"], "mevedel");
    assert_eq!(received["mcpServers"][0]["command"], "/bin/true");
    block(agent.stop());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fake_cancel_ends_the_turn_and_answers_held_permissions_cancelled() {
    let dir = scratch("cancel");
    let delegate = Arc::new(TestDelegate {
        hold: true,
        ..TestDelegate::default()
    });
    let events = Arc::new(Events::default());
    let agent = Arc::new(start_fake(&[], &dir, Arc::clone(&delegate), &events).expect("start"));
    let session = block(agent.new_session(&SessionOptions::default())).expect("session");
    // A plain hang first: cancel alone ends it.
    let turn = prompt_in_background(&agent, &session.id, "hang");
    assert!(
        wait_until(Duration::from_secs(10), || events.text() == "waiting"),
        "the agent never started waiting"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(!turn.is_finished(), "the hang ended by itself");
    agent.cancel(&session.id).expect("cancel");
    let end = block(turn).expect("join").expect("prompt");
    assert_eq!(end.stop_reason, "cancelled");
    // Then a turn waiting on the user's permission answer.
    let turn = prompt_in_background(&agent, &session.id, "ask-hang");
    assert!(
        wait_until(Duration::from_secs(10), || !delegate
            .held
            .lock()
            .expect("held")
            .is_empty()),
        "the permission request never came"
    );
    agent.cancel(&session.id).expect("cancel");
    let end = block(turn).expect("join").expect("prompt");
    assert_eq!(end.stop_reason, "cancelled");
    assert!(
        events.text() == r#"waitingpermission: {"outcome": {"outcome": "cancelled"}}"#,
        "{}",
        events.text()
    );
    // The delegate's late answer goes nowhere, harmlessly.
    for reply in delegate.held.lock().expect("held").drain(..) {
        reply.fail(ErrorCode::INTERNAL_ERROR, "too late");
    }
    let end = block(agent.prompt_text(&session.id, "still here")).expect("prompt");
    assert_eq!(end.stop_reason, "end_turn");
    block(agent.stop());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fake_load_session_replays_history_or_says_why_not() {
    let dir = scratch("load");
    let events = Arc::new(Events::default());
    let agent = start_fake(&[], &dir, Arc::default(), &events).expect("start");
    let session = block(agent.new_session(&SessionOptions::default())).expect("session");
    let loaded = block(agent.load_session(&session.id, &SessionOptions::default())).expect("load");
    assert_eq!(loaded.id, session.id);
    assert_eq!(
        events.updates(),
        [
            Update::UserMessage(Chunk::Text("earlier question".into())),
            Update::Message(Chunk::Text("earlier answer".into()))
        ]
    );
    // The agent's own error, word for word.
    let err = block(agent.load_session("sess-99", &SessionOptions::default()))
        .expect_err("unknown session");
    assert_eq!(
        err.message,
        "fake: session/load failed: Resource not found: session sess-99"
    );
    block(agent.stop());
    let agent = start_fake(&["--no-load"], &dir, Arc::default(), &events).expect("start");
    let err = block(agent.load_session("sess-1", &SessionOptions::default()))
        .expect_err("no session/load");
    assert_eq!(
        err.message,
        "fake: cannot resume session sess-1: the agent does not offer session/load"
    );
    block(agent.stop());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fake_set_model_chooses_one_of_the_sessions_models() {
    let dir = scratch("model");
    let events = Arc::new(Events::default());
    let agent = start_fake(&[], &dir, Arc::default(), &events).expect("start");
    let session = block(agent.new_session(&SessionOptions::default())).expect("session");
    let models = session.models.expect("models");
    assert_eq!(models["currentModelId"], "fast-model");
    block(agent.set_model(&session.id, "smart-model")).expect("set model");
    block(agent.prompt_text(&session.id, "history")).expect("prompt");
    assert_eq!(events.text(), " [smart-model]");
    // An unknown model: the agent's own error, word for word.
    let err = block(agent.set_model(&session.id, "huge-model")).expect_err("unknown model");
    assert!(
        err.message
            .starts_with("fake: session/set_config_option failed: Invalid config option"),
        "{}",
        err.message
    );
    block(agent.stop());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn models_come_from_the_model_config_option_too() {
    let raw = json!({"sessionId": "s", "configOptions": [
        {"id": "mode", "category": "mode", "currentValue": "default", "options": []},
        {"id": "model", "category": "model", "currentValue": "b",
         "options": [{"value": "a", "name": "A"}, {"value": "b"}]}]});
    assert_eq!(
        super::connection::models_of(&raw),
        Some(json!({"availableModels": [{"modelId": "a", "name": "A"},
                                        {"modelId": "b", "name": "b"}],
                    "currentModelId": "b"}))
    );
    assert_eq!(
        super::connection::models_of(&json!({"sessionId": "s"})),
        None
    );
}

#[test]
fn fake_crash_fails_the_turn_with_its_exit_and_stderr_and_is_reported() {
    let dir = scratch("crash");
    let events = Arc::new(Events::default());
    let agent = start_fake(&[], &dir, Arc::default(), &events).expect("start");
    let session = block(agent.new_session(&SessionOptions::default())).expect("session");
    let err = block(agent.prompt_text(&session.id, "crash")).expect_err("crashed");
    assert_eq!(
        err.message,
        "fake: exited with status 3 before answering session/prompt; its last stderr lines:\n\
         fake-agent: ready\nfatal: the model backend went away\nbye"
    );
    assert!(
        wait_until(Duration::from_secs(5), || events
            .all()
            .iter()
            .any(|e| matches!(e, Event::Exited { .. }))),
        "no exit event"
    );
    let exits: Vec<Event> = events
        .all()
        .into_iter()
        .filter(|e| matches!(e, Event::Exited { .. }))
        .collect();
    assert_eq!(
        exits,
        [Event::Exited {
            message: "fake exited with status 3".into(),
            stderr: vec![
                "fake-agent: ready".into(),
                "fatal: the model backend went away".into(),
                "bye".into()
            ]
        }]
    );
    // Later requests fail at once, saying the same.
    let err = block(agent.prompt_text(&session.id, "again")).expect_err("gone");
    assert!(
        err.message
            .starts_with("fake: exited with status 3 before answering session/prompt"),
        "{}",
        err.message
    );
    block(agent.stop());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fake_start_failures_name_the_agent_and_what_failed() {
    let dir = scratch("startfail");
    let events = Arc::new(Events::default());
    let err = start_fake(&["--die-at-start"], &dir, Arc::default(), &events)
        .err()
        .expect("died");
    assert_eq!(
        err.message,
        "fake: exited with status 2 before answering initialize; its last stderr lines:\n\
         fake-agent: cannot start\nfake-agent: no configuration found"
    );
    let err = start_fake(&["--version", "2"], &dir, Arc::default(), &events)
        .err()
        .expect("wrong version");
    assert!(
        err.message.starts_with("fake: initialize failed: ")
            && err
                .message
                .contains("required ACP protocol version 1 but peer negotiated 2"),
        "{}",
        err.message
    );
    let mut config = fake_config(&[], &dir);
    config.command = "/nonexistent/acp-agent".into();
    let err = block(Connection::start(
        config,
        quick(),
        Arc::new(TestDelegate::default()),
        events.listener(),
    ))
    .err()
    .expect("no such program");
    assert!(
        err.message
            .starts_with("fake: cannot start /nonexistent/acp-agent: "),
        "{}",
        err.message
    );
    // A failed start leaves nothing running and reports no exit event.
    assert!(
        !events
            .all()
            .iter()
            .any(|e| matches!(e, Event::Exited { .. }))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The pids a `leave` turn reported.
fn left_pids(events: &Events) -> Vec<i32> {
    let said: Value = serde_json::from_str(&events.text()).expect("pids JSON");
    said["pids"]
        .as_array()
        .expect("pids")
        .iter()
        .filter_map(Value::as_i64)
        .map(|pid| pid as i32)
        .collect()
}

#[test]
fn fake_stop_kills_the_group_and_descendants_that_left_it() {
    let dir = scratch("stop");
    let events = Arc::new(Events::default());
    // An agent deaf to SIGTERM, with one child in its group and one in a
    // session of its own.
    let agent = start_fake(&["--ignore-term"], &dir, Arc::default(), &events).expect("start");
    let session = block(agent.new_session(&SessionOptions::default())).expect("session");
    block(agent.prompt_text(&session.id, "leave")).expect("prompt");
    let pids = left_pids(&events);
    assert_eq!(pids.len(), 2);
    let pid = agent.pid();
    assert!(live(pid) && pids.iter().all(|&p| live(p)));
    assert!(descendants(pid).len() >= 2);
    block(agent.stop());
    assert!(!live(pid), "the agent survived");
    for p in pids {
        assert!(!live(p), "descendant {p} survived");
    }
    assert!(!crate::process::group_alive(pid), "its group survived");
    assert!(!agent.alive());
    // A stopped agent's exit is no crash.
    assert!(
        !events
            .all()
            .iter()
            .any(|e| matches!(e, Event::Exited { .. }))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fake_dropped_connection_kills_its_agent() {
    let dir = scratch("drop");
    let events = Arc::new(Events::default());
    let agent = start_fake(&[], &dir, Arc::default(), &events).expect("start");
    let session = block(agent.new_session(&SessionOptions::default())).expect("session");
    block(agent.prompt_text(&session.id, "leave")).expect("prompt");
    let mut pids = left_pids(&events);
    pids.push(agent.pid());
    drop(agent);
    assert!(
        wait_until(Duration::from_secs(5), || pids.iter().all(|&p| !live(p))),
        "processes survived a dropped connection: {pids:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fake_stop_kills_what_an_agent_exiting_at_cancel_left() {
    let dir = scratch("leave-hang");
    let events = Arc::new(Events::default());
    let agent = Arc::new(start_fake(&[], &dir, Arc::default(), &events).expect("start"));
    let session = block(agent.new_session(&SessionOptions::default())).expect("session");
    let turn = prompt_in_background(&agent, &session.id, "leave-hang");
    assert!(
        wait_until(Duration::from_secs(10), || serde_json::from_str::<Value>(
            &events.text()
        )
        .is_ok()),
        "the agent never said its processes' pids"
    );
    let pids = left_pids(&events);
    // Cancelled by the stop, the agent exits and its children are
    // orphaned before the connection closes.
    block(agent.stop());
    let _ = block(turn);
    for p in pids {
        assert!(!live(p), "descendant {p} survived");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fake_stderr_log_gets_every_line() {
    let dir = scratch("log");
    let log = dir.join("logs/fake.log");
    let events = Arc::new(Events::default());
    let options = Options {
        stderr_log: Some(log.clone()),
        ..quick()
    };
    let agent = block(Connection::start(
        fake_config(&[], &dir),
        options,
        Arc::new(TestDelegate::default()),
        events.listener(),
    ))
    .expect("start");
    assert!(
        wait_until(Duration::from_secs(5), || std::fs::read_to_string(&log)
            .is_ok_and(|text| text == "fake-agent: ready\n")),
        "log: {:?}",
        std::fs::read_to_string(&log)
    );
    assert_eq!(agent.stderr(), ["fake-agent: ready"]);
    block(agent.stop());
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- the real claude-agent-acp ----

/// `claude-agent-acp` under `.deps/acp` (or MEVEDEL_DEPS_DIR); a missing
/// one fails the test with what to run.
fn claude_agent_acp() -> PathBuf {
    let deps = std::env::var_os("MEVEDEL_DEPS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps"));
    let bin = deps.join("acp/npm/node_modules/.bin/claude-agent-acp");
    assert!(
        bin.exists(),
        "{} is missing: claude-agent-acp is not installed; run scripts/deps.sh",
        bin.display()
    );
    bin
}

/// The scripted Anthropic server on a free port of 127.0.0.1, killed
/// when dropped.
struct Model {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
}

impl Model {
    fn start(dir: &Path, script: Value) -> Model {
        let path = dir.join("script.json");
        std::fs::write(&path, script.to_string()).expect("script");
        let log = dir.join("model.jsonl");
        let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripted-model/server.py");
        let mut child = std::process::Command::new("python3")
            .arg(&server)
            .arg("--script")
            .arg(&path)
            .arg("--log")
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs the scripted model server");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("PORT line");
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the scripted model server said {line:?}"));
        Model { child, port, log }
    }

    /// The requests it received, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Claude Code's built-in file and shell tools, switched off as mevedel
/// will (its own tools come through MCP).
const DISALLOWED: [&str; 6] = ["Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"];

/// claude-agent-acp against MODEL with HOME as its home, nothing of this
/// process's environment but PATH (for node).
fn claude_config(model: &Model, home: &Path, cwd: &Path) -> (AgentConfig, Options) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), path),
        ("HOME".into(), home.into()),
        ("XDG_CONFIG_HOME".into(), home.join(".config").into()),
        (
            "ANTHROPIC_BASE_URL".into(),
            format!("http://127.0.0.1:{}", model.port).into(),
        ),
        ("ANTHROPIC_API_KEY".into(), "dummy".into()),
        (
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into(),
        ),
    ];
    let config = AgentConfig {
        name: "claude-code".into(),
        command: claude_agent_acp().to_string_lossy().into_owned(),
        args: vec![],
        env: vec![],
        cwd: cwd.to_path_buf(),
    };
    let options = Options {
        base_env: Some(env),
        startup_timeout: Duration::from_secs(60),
        request_timeout: Duration::from_secs(120),
        ..Options::default()
    };
    (config, options)
}

fn claude_options() -> SessionOptions {
    SessionOptions {
        disallowed_tools: DISALLOWED.iter().map(|t| t.to_string()).collect(),
        ..SessionOptions::default()
    }
}

/// Stop AGENT and check that none of its processes is left: the group,
/// and every descendant it had just before.
fn stop_and_check_gone(agent: &Connection) {
    let pid = agent.pid();
    let mut all = descendants(pid);
    all.push(pid);
    assert!(all.len() >= 2, "claude-agent-acp without its CLI child?");
    block(agent.stop());
    assert!(
        !crate::process::group_alive(pid),
        "its process group survived"
    );
    for p in all {
        assert!(!live(p), "process {p} of the agent survived");
    }
}

#[test]
fn claude_text_turn_streams_the_scripted_text_and_resumes() {
    let dir = scratch("claude-text");
    let (home, work) = (dir.join("home"), dir.join("work"));
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&work).expect("work");
    let text = "Hello from the scripted model, streamed in pieces.";
    let model = Model::start(&dir, json!({"repeat": true, "steps": [{"text": text}]}));
    let (config, options) = claude_config(&model, &home, &work);
    let events = Arc::new(Events::default());
    let agent = block(Connection::start(
        config.clone(),
        options.clone(),
        Arc::new(TestDelegate::default()),
        events.listener(),
    ))
    .expect("claude-agent-acp starts");
    assert_eq!(
        agent.info().name.as_deref(),
        Some("@zed-industries/claude-agent-acp")
    );
    assert!(agent.info().load_session);
    let session = block(agent.new_session(&claude_options())).expect("session/new");
    let end = block(agent.prompt_text(&session.id, "Say hello.")).expect("prompt");
    assert_eq!(end.stop_reason, "end_turn");
    assert_eq!(events.text(), text);
    let chunks = events
        .updates()
        .into_iter()
        .filter(|u| matches!(u, Update::Message(_)))
        .count();
    assert!(chunks > 2, "the text came in {chunks} chunk(s)");
    // The conversation request reached the model with the prompt and
    // without the disallowed tools.
    let requests = model.requests();
    let turn = requests
        .iter()
        .find(|r| r["body"].to_string().contains("Say hello."))
        .expect("the prompt reached the model");
    // The scripted server's usage (it simulates prompt caching, so the
    // uncached input varies with what Claude Code marks), as Claude Code
    // reported it.
    let usage = end.usage.expect("usage");
    assert_eq!(
        (usage.input, usage.output),
        (turn["usage"]["input_tokens"].as_u64(), Some(5))
    );
    assert_eq!(turn["path"], "/v1/messages?beta=true");
    assert_eq!(turn["mismatches"], json!([]));
    let tools: Vec<&str> = turn["body"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(!tools.is_empty(), "no tools at all");
    for tool in DISALLOWED {
        assert!(!tools.contains(&tool), "{tool} still offered: {tools:?}");
    }
    stop_and_check_gone(&agent);
    drop(agent);
    // A new agent process resumes the session with session/load, its
    // history replayed as updates.
    let replay = Arc::new(Events::default());
    let agent = block(Connection::start(
        config,
        options,
        Arc::new(TestDelegate::default()),
        replay.listener(),
    ))
    .expect("claude-agent-acp starts again");
    block(agent.load_session(&session.id, &claude_options())).expect("session/load");
    let history = replay.updates();
    assert!(
        history
            .iter()
            .any(|u| matches!(u, Update::UserMessage(Chunk::Text(t)) if t.contains("Say hello."))),
        "{history:#?}"
    );
    assert_eq!(replay.text(), text);
    stop_and_check_gone(&agent);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn claude_cancel_ends_a_stalled_turn_and_stop_leaves_nothing() {
    let dir = scratch("claude-cancel");
    let (home, work) = (dir.join("home"), dir.join("work"));
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&work).expect("work");
    // The model holds its answer back far longer than the test waits.
    let model = Model::start(
        &dir,
        json!({"repeat": true, "steps": [{"text": "too late", "sleep": 60}]}),
    );
    let (config, options) = claude_config(&model, &home, &work);
    let events = Arc::new(Events::default());
    let agent = Arc::new(
        block(Connection::start(
            config,
            options,
            Arc::new(TestDelegate::default()),
            events.listener(),
        ))
        .expect("claude-agent-acp starts"),
    );
    let session = block(agent.new_session(&claude_options())).expect("session/new");
    let turn = prompt_in_background(&agent, &session.id, "Take your time.");
    assert!(
        wait_until(Duration::from_secs(60), || model
            .requests()
            .iter()
            .any(|r| r["body"].to_string().contains("Take your time."))),
        "the prompt never reached the model"
    );
    let asked = Instant::now();
    agent.cancel(&session.id).expect("cancel");
    let end = block(async {
        tokio::time::timeout(Duration::from_secs(20), turn)
            .await
            .expect("the cancelled turn did not end")
    })
    .expect("join")
    .expect("prompt");
    assert_eq!(end.stop_reason, "cancelled");
    assert!(asked.elapsed() < Duration::from_secs(20));
    assert!(!events.text().contains("too late"));
    stop_and_check_gone(&agent);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn claude_stop_during_a_turn_cancels_it_and_kills_everything() {
    let dir = scratch("claude-stop");
    let (home, work) = (dir.join("home"), dir.join("work"));
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&work).expect("work");
    let model = Model::start(
        &dir,
        json!({"repeat": true, "steps": [{"text": "never", "sleep": 60}]}),
    );
    let (config, options) = claude_config(&model, &home, &work);
    let agent = Arc::new(
        block(Connection::start(
            config,
            options,
            Arc::new(TestDelegate::default()),
            Arc::new(|_| {}),
        ))
        .expect("claude-agent-acp starts"),
    );
    let session = block(agent.new_session(&claude_options())).expect("session/new");
    let turn = prompt_in_background(&agent, &session.id, "Stall.");
    assert!(
        wait_until(Duration::from_secs(60), || model
            .requests()
            .iter()
            .any(|r| r["body"].to_string().contains("Stall."))),
        "the prompt never reached the model"
    );
    let started = Instant::now();
    stop_and_check_gone(&agent);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stop took {:?}",
        started.elapsed()
    );
    // The turn ended one way or the other: cancelled in the grace, or
    // failing because the agent was stopped.
    match block(turn).expect("join") {
        Ok(end) => assert_eq!(end.stop_reason, "cancelled"),
        Err(e) => assert_eq!(
            e.message,
            "claude-code: was stopped before answering session/prompt"
        ),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
