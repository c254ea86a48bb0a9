//! Tests of the MCP client: configuration and names as plain functions;
//! the registry against scripted fault servers of our own
//! (`tests/mcp-servers/fault_server.py`) and against real servers nobody
//! here wrote, installed by `scripts/deps.sh` under `.deps/mcp/`. Tests
//! that need those fail, naming the script, when they are missing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::config::{self, ServerConfig, Source, Transport};
use super::names::{self, NameIndex};
use super::*;
use crate::runtime;

fn block<F: Future>(future: F) -> F::Output {
    runtime::get().expect("runtime").block_on(future)
}

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mevedel-mcp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn stdio(name: &str, source: Source, command: &str, args: &[&str]) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        transport: Transport::Stdio {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Default::default(),
            cwd: None,
        },
        source,
        file: PathBuf::from("/test/mcp.json"),
    }
}

fn fault_script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp-servers/fault_server.py")
        .to_string_lossy()
        .into_owned()
}

/// Fault server NAME in MODE, with extra environment ENV.
fn fault(name: &str, mode: &str, vars: &[(&str, &str)]) -> ServerConfig {
    let mut config = stdio(name, Source::User, "python3", &[&fault_script(), mode]);
    if let Transport::Stdio { env, .. } = &mut config.transport {
        for (k, v) in vars {
            env.insert(k.to_string(), v.to_string());
        }
    }
    config
}

fn quick() -> Options {
    Options {
        startup_timeout: Duration::from_secs(20),
        request_timeout: Duration::from_secs(30),
        stop_grace: Duration::from_millis(500),
        ..Options::default()
    }
}

fn registry(configs: Vec<ServerConfig>) -> Arc<Registry> {
    Arc::new(Registry::new(configs, quick(), None))
}

/// The real servers' install directory (`.deps/mcp`); a missing one fails
/// the test with what to run.
fn deps_mcp() -> PathBuf {
    let deps = std::env::var_os("MEVEDEL_DEPS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps"));
    let dir = deps.join("mcp");
    let needed = [
        "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        "npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
        "venv/bin/mcp-server-time",
        "npm/node_modules/.bin/conformance",
    ];
    for file in needed {
        assert!(
            dir.join(file).exists(),
            "{} is missing: the MCP test servers are not installed; run scripts/deps.sh",
            dir.join(file).display()
        );
    }
    dir
}

fn everything_js() -> String {
    deps_mcp()
        .join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .to_string_lossy()
        .into_owned()
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
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

// ---- configuration ----

#[test]
fn config_reads_claude_code_shape() {
    let text = r#"{"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"],
                  "env": {"DEBUG": "1"}, "cwd": "/srv"},
        "typed": {"type": "stdio", "command": "srv"},
        "web": {"type": "http", "url": "https://example.test/mcp",
                "headers": {"Authorization": "Bearer x"}},
        "old": {"type": "sse", "url": "https://example.test/sse"},
        "bare": {"url": "http://127.0.0.1:9/mcp"}}}"#;
    let file = config::parse(text, Path::new("/u/mcp.json"), Source::User, &env(&[])).unwrap();
    let kinds: Vec<(&str, &str)> = file
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.transport.kind()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("bare", "http"),
            ("files", "stdio"),
            ("old", "sse"),
            ("typed", "stdio"),
            ("web", "http")
        ]
    );
    let Transport::Stdio {
        command,
        args,
        env,
        cwd,
    } = &file.servers[1].transport
    else {
        panic!("not stdio")
    };
    assert_eq!(command, "npx");
    assert_eq!(args, &["-y", "server-filesystem", "/tmp"]);
    assert_eq!(env.get("DEBUG").map(String::as_str), Some("1"));
    assert_eq!(cwd.as_deref(), Some(Path::new("/srv")));
    assert_eq!(file.sha256, config::sha256_hex(text));
    assert_eq!(file.sha256.len(), 64);
}

#[test]
fn config_expands_variables_like_claude_code() {
    let vars = env(&[("TOKEN", "s3cret"), ("EMPTY", ""), ("HOME", "/home/u")]);
    assert_eq!(
        config::expand("Bearer ${TOKEN}", &vars).as_deref(),
        Ok("Bearer s3cret")
    );
    assert_eq!(
        config::expand("${MISSING:-fallback}/${HOME}", &vars).as_deref(),
        Ok("fallback//home/u")
    );
    assert_eq!(
        config::expand("[${EMPTY:-unused}]", &vars).as_deref(),
        Ok("[]")
    );
    assert_eq!(
        config::expand("$HOME and ${unclosed", &vars).as_deref(),
        Ok("$HOME and ${unclosed")
    );
    assert_eq!(config::expand("${NOPE}", &vars), Err("NOPE".to_string()));
    let text = r#"{"mcpServers": {"s": {"command": "${HOME}/bin/srv",
        "args": ["--token=${TOKEN}"], "env": {"K": "${MISSING:-d}"}},
        "h": {"type": "http", "url": "${BASE:-http://127.0.0.1:1}/mcp",
              "headers": {"X-Key": "${TOKEN}"}}}}"#;
    let file = config::parse(text, Path::new("/w/.mcp.json"), Source::Workspace, &vars).unwrap();
    assert_eq!(
        file.servers[1].transport,
        Transport::Stdio {
            command: "/home/u/bin/srv".into(),
            args: vec!["--token=s3cret".into()],
            env: [("K".to_string(), "d".to_string())].into(),
            cwd: None,
        }
    );
    assert_eq!(
        file.servers[0].transport,
        Transport::Http {
            url: "http://127.0.0.1:1/mcp".into(),
            headers: [("X-Key".to_string(), "s3cret".to_string())].into(),
        }
    );
    let err = config::parse(
        r#"{"mcpServers": {"gh": {"command": "gh", "args": ["${GH_TOKEN}"]}}}"#,
        Path::new("/w/.mcp.json"),
        Source::Workspace,
        &vars,
    )
    .unwrap_err();
    assert!(
        err.message.contains("\"gh\"")
            && err.message.contains("args[0]")
            && err.message.contains("GH_TOKEN"),
        "{}",
        err.message
    );
}

#[test]
fn config_syntax_error_names_file_line_and_column() {
    let text = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n";
    let err = config::parse(
        text,
        Path::new("/p/.mcp.json"),
        Source::Workspace,
        &env(&[]),
    )
    .unwrap_err();
    assert!(
        err.message.starts_with("/p/.mcp.json:3:"),
        "{}",
        err.message
    );
}

#[test]
fn config_shape_errors_name_server_and_field() {
    let cases = [
        (r#"{"servers": {}}"#, "mcpServers"),
        (r#"{"mcpServers": []}"#, "mcpServers"),
        (
            r#"{"mcpServers": {"a": {"args": []}}}"#,
            "\"a\": \"command\"",
        ),
        (
            r#"{"mcpServers": {"a": {"command": 3}}}"#,
            "\"a\": \"command\" must be a string",
        ),
        (
            r#"{"mcpServers": {"b": {"command": "x", "args": "y"}}}"#,
            "\"b\": \"args\"",
        ),
        (
            r#"{"mcpServers": {"b": {"command": "x", "env": {"K": 1}}}}"#,
            "\"env.K\"",
        ),
        (
            r#"{"mcpServers": {"c": {"type": "ws", "url": "u"}}}"#,
            "\"c\": \"type\" is \"ws\"",
        ),
        (
            r#"{"mcpServers": {"d": {"type": "http"}}}"#,
            "\"d\": \"url\" is missing",
        ),
    ];
    for (text, expected) in cases {
        let err = config::parse(text, Path::new("/f.json"), Source::User, &env(&[])).unwrap_err();
        assert!(
            err.message.contains(expected) && err.message.starts_with("/f.json"),
            "{text}: {}",
            err.message
        );
    }
}

#[test]
fn merge_lets_the_more_specific_source_win() {
    let user = config::parse(
        r#"{"mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"}}}"#,
        Path::new("/u.json"),
        Source::User,
        &env(&[]),
    )
    .unwrap();
    let workspace = config::parse(
        r#"{"mcpServers": {"b": {"command": "ws-b"}, "c": {"command": "ws-c"}}}"#,
        Path::new("/w/.mcp.json"),
        Source::Workspace,
        &env(&[]),
    )
    .unwrap();
    let flag = config::parse(
        r#"{"mcpServers": {"c": {"command": "flag-c"}}}"#,
        Path::new("/f.json"),
        Source::CommandLine,
        &env(&[]),
    )
    .unwrap();
    let merged = config::merge(&[user, workspace, flag]);
    let got: Vec<(&str, Source)> = merged.iter().map(|s| (s.name.as_str(), s.source)).collect();
    assert_eq!(
        got,
        [
            ("a", Source::User),
            ("b", Source::Workspace),
            ("c", Source::CommandLine)
        ]
    );
    assert!(Source::Workspace.needs_approval());
    assert!(!Source::User.needs_approval() && !Source::CommandLine.needs_approval());
}

// ---- names ----

#[test]
fn names_follow_claude_codes_rule_and_map_back() {
    assert_eq!(names::normalize("my.server v2"), "my_server_v2");
    assert_eq!(names::normalize("ok_name-1"), "ok_name-1");
    assert_eq!(
        names::normalize("é/ü"),
        "___".chars().take(3).collect::<String>()
    );
    assert_eq!(
        names::tool_name("everything", "get-sum"),
        "mcp__everything__get-sum"
    );
    assert_eq!(names::tool_name("a.b", "c d"), "mcp__a_b__c_d");
    assert_eq!(names::server_name("git hub"), "mcp__git_hub");
    let mut index = NameIndex::new();
    assert_eq!(index.insert("a.b", "x").as_deref(), Ok("mcp__a_b__x"));
    assert_eq!(index.insert("a.b", "x").as_deref(), Ok("mcp__a_b__x"));
    // Another pair with the same normalized name is refused.
    assert_eq!(index.insert("a_b", "x"), Err("mcp__a_b__x".to_string()));
    // Names with `__` inside map back through the index, not a split.
    index.insert("srv", "do__it").unwrap();
    assert_eq!(index.lookup("mcp__srv__do__it"), Some(("srv", "do__it")));
    assert_eq!(index.lookup("mcp__a_b__x"), Some(("a.b", "x")));
    index.remove_server("a.b");
    assert_eq!(index.lookup("mcp__a_b__x"), None);
    assert_eq!(index.len(), 1);
}

// ---- registry against the fault servers ----

#[test]
fn crash_at_start_names_the_exit_and_its_stderr() {
    let reg = registry(vec![fault("broken", "crash-at-start", &[])]);
    let err = block(reg.start("broken")).unwrap_err();
    assert!(
        err.message.contains("exited with status 3")
            && err.message.contains("cannot open the database"),
        "{}",
        err.message
    );
    let status = reg.status_of("broken").unwrap();
    assert_eq!(status.state, State::Failed);
    assert!(status.stderr.iter().any(|l| l.contains("giving up")));
    // Used again at once: the backoff answers without a new launch.
    let again = block(reg.start("broken")).unwrap_err();
    assert!(again.message.contains("next try in"), "{}", again.message);
    // A manual restart tries now.
    let restarted = block(reg.restart("broken")).unwrap_err();
    assert!(restarted.message.contains("exited with status 3"));
}

#[test]
fn hang_on_initialize_times_out_within_the_bound() {
    let options = Options {
        startup_timeout: Duration::from_millis(1500),
        ..quick()
    };
    let reg = Registry::new(vec![fault("mute", "hang", &[])], options, None);
    let started = Instant::now();
    let err = block(reg.start("mute")).unwrap_err();
    let took = started.elapsed();
    assert!(
        err.message
            .contains("did not answer initialize within 1.5 s"),
        "{}",
        err.message
    );
    // The timeout itself, plus the group's stop (grace 0.5 s), no more.
    assert!(took < Duration::from_millis(3500), "took {took:?}");
    assert!(took >= Duration::from_millis(1500), "took {took:?}");
    assert_eq!(reg.status_of("mute").unwrap().state, State::Failed);
}

#[test]
fn initialize_offers_a_current_protocol_and_names_mevedel() {
    let dir = scratch("init");
    let log = dir.join("log");
    let reg = registry(vec![fault(
        "basic",
        "basic",
        &[("FAULT_LOG", &log.to_string_lossy())],
    )]);
    block(reg.start("basic")).unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text.lines().find(|l| l.starts_with("initialize")).unwrap();
    assert!(line.starts_with("initialize 2025-11-25 "), "{line}");
    assert!(
        line.contains("\"name\": \"mevedel\"")
            && line.contains(&format!("\"version\": \"{}\"", env!("CARGO_PKG_VERSION"))),
        "{line}"
    );
    assert!(PROTOCOL_VERSION.as_str() >= "2025-06-18");
    let status = reg.status_of("basic").unwrap();
    assert_eq!(status.state, State::Ready);
    assert_eq!(status.protocol_version.as_deref(), Some("2025-11-25"));
    assert_eq!(status.tools, Some(5));
    assert_eq!(status.resources, Some(1));
    block(reg.stop_all());
}

#[test]
fn crash_mid_call_is_an_error_with_stderr_reported_once() {
    let crashes = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&crashes);
    let listener: Listener = Arc::new(move |notice| {
        if let Notice::Crashed {
            message, stderr, ..
        } = notice
        {
            seen.lock().unwrap().push((message, stderr));
        }
    });
    let reg = Registry::new(vec![fault("frail", "basic", &[])], quick(), Some(listener));
    let err =
        block(reg.call_tool("frail", "crash", json!({}), CallOptions::default())).unwrap_err();
    assert!(
        err.message.contains("exited with status 5")
            && err.message.contains("crashing in the middle of a call"),
        "{}",
        err.message
    );
    assert!(wait_until(Duration::from_secs(5), || !crashes
        .lock()
        .unwrap()
        .is_empty()));
    std::thread::sleep(Duration::from_millis(300));
    let reported = crashes.lock().unwrap().clone();
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert!(reported[0].0.contains("exited with status 5"));
    assert!(reported[0].1.iter().any(|l| l.contains("crashing")));
    let status = reg.status_of("frail").unwrap();
    assert_eq!(status.state, State::Failed);
    // Next use after the backoff starts it again.
    std::thread::sleep(Duration::from_millis(1100));
    let result = block(reg.call_tool(
        "frail",
        "echo",
        json!({"message": "back"}),
        CallOptions::default(),
    ))
    .unwrap();
    assert_eq!(result.text(), "Echo: back");
    block(reg.stop_all());
}

#[test]
fn hundred_tools_are_listed_with_their_schemas() {
    let reg = registry(vec![fault("wide", "many", &[])]);
    let tools = block(reg.list_tools("wide")).unwrap();
    assert_eq!(tools.len(), 105);
    let last = tools.iter().find(|t| t.name == "tool_099").unwrap();
    assert_eq!(last.full_name, "mcp__wide__tool_099");
    assert_eq!(
        last.input_schema["properties"]["n"]["description"],
        json!("any number")
    );
    assert_eq!(
        reg.lookup_tool("mcp__wide__tool_042"),
        Some(("wide".into(), "tool_042".into()))
    );
    let result =
        block(reg.call_tool("wide", "tool_042", json!({"n": 1}), CallOptions::default())).unwrap();
    assert_eq!(result.text(), "tool_042");
    let failed = block(reg.call_tool("wide", "fail", json!({}), CallOptions::default())).unwrap();
    assert!(failed.is_error);
    block(reg.stop_all());
}

#[test]
fn slow_tool_reports_progress_and_cancellation_reaches_the_server() {
    let dir = scratch("cancel");
    let log = dir.join("log");
    let reg = registry(vec![fault(
        "slow",
        "basic",
        &[("FAULT_LOG", &log.to_string_lossy())],
    )]);
    let steps = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&steps);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let progress: ProgressFn = Arc::new(move |p: Progress| {
        let mut seen = seen.lock().unwrap();
        seen.push((p.progress, p.total, p.message));
        if seen.len() == 3 {
            trigger.cancel();
        }
    });
    let options = CallOptions {
        progress: Some(progress),
        cancel: Some(cancel),
        ..CallOptions::default()
    };
    let started = Instant::now();
    let err = block(reg.call_tool("slow", "slow", json!({"steps": 200}), options)).unwrap_err();
    assert!(err.message.contains("cancelled"), "{}", err.message);
    assert!(started.elapsed() < Duration::from_secs(5));
    let steps = steps.lock().unwrap().clone();
    assert!(steps.len() >= 3, "{steps:?}");
    assert_eq!(steps[0], (1.0, Some(200.0), Some("step 1".into())));
    assert!(
        wait_until(Duration::from_secs(5), || std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("stopped")),
        "the server never saw notifications/cancelled"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("cancelled"), "{text}");
    // The connection stays usable.
    let ok =
        block(reg.call_tool("slow", "slow", json!({"steps": 2}), CallOptions::default())).unwrap();
    assert_eq!(ok.text(), "done 2");
    block(reg.stop_all());
}

#[test]
fn per_call_timeout_cancels_on_the_server() {
    let dir = scratch("timeout");
    let log = dir.join("log");
    let reg = registry(vec![fault(
        "slow",
        "basic",
        &[("FAULT_LOG", &log.to_string_lossy())],
    )]);
    let options = CallOptions {
        timeout: Some(Duration::from_millis(300)),
        ..CallOptions::default()
    };
    let started = Instant::now();
    let err = block(reg.call_tool("slow", "slow", json!({"steps": 200}), options)).unwrap_err();
    assert!(
        err.message.contains("timed out after 0.3 s"),
        "{}",
        err.message
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("cancelled")
    }));
    block(reg.stop_all());
}

#[test]
fn list_changed_bumps_generations_and_tells_the_listener() {
    let notices = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&notices);
    let listener: Listener = Arc::new(move |n| seen.lock().unwrap().push(n));
    let reg = Registry::new(vec![fault("grow", "basic", &[])], quick(), Some(listener));
    assert_eq!(block(reg.list_tools("grow")).unwrap().len(), 5);
    block(reg.call_tool("grow", "add_tool", json!({}), CallOptions::default())).unwrap();
    assert!(wait_until(Duration::from_secs(5), || notices
        .lock()
        .unwrap()
        .len()
        >= 2));
    let got = notices.lock().unwrap().clone();
    assert!(got.contains(&Notice::ToolsChanged {
        server: "grow".into(),
        generation: 1
    }));
    assert!(got.contains(&Notice::ResourcesChanged {
        server: "grow".into(),
        generation: 1
    }));
    let status = reg.status_of("grow").unwrap();
    assert_eq!(
        (status.tools_generation, status.resources_generation),
        (1, 1)
    );
    let tools = block(reg.list_tools("grow")).unwrap();
    assert_eq!(tools.len(), 6);
    assert!(reg.lookup_tool("mcp__grow__added_0").is_some());
    block(reg.stop_all());
}

#[test]
fn unapproved_workspace_server_is_never_started() {
    let dir = scratch("unapproved");
    let marker = dir.join("started");
    let script = format!(
        "touch {}; exec python3 {} basic",
        marker.display(),
        fault_script()
    );
    let config = stdio("ws", Source::Workspace, "sh", &["-c", &script]);
    let reg = registry(vec![config, fault("mine", "basic", &[])]);
    let err = block(reg.start("ws")).unwrap_err();
    assert!(
        err.message.contains("\"ws\"") && err.message.contains("not approved"),
        "{}",
        err.message
    );
    for attempt in [
        block(reg.list_tools("ws")).map(|_| ()),
        block(reg.call_tool(
            "ws",
            "echo",
            json!({"message": "x"}),
            CallOptions::default(),
        ))
        .map(|_| ()),
        block(reg.read_resource("ws", "fault://note")).map(|_| ()),
        block(reg.restart("ws")),
    ] {
        assert!(attempt.unwrap_err().message.contains("not approved"));
    }
    let outcomes = block(reg.start_all());
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].0, "mine");
    assert!(outcomes[0].1.is_ok());
    assert!(!marker.exists(), "the unapproved server was started");
    let status = reg.status_of("ws").unwrap();
    assert_eq!((status.state, status.approved), (State::Configured, false));
    reg.approve("ws").unwrap();
    block(reg.start("ws")).unwrap();
    assert!(marker.exists());
    block(reg.stop_all());
}

#[test]
fn stop_kills_the_whole_group_and_reaps_it() {
    let dir = scratch("group");
    let pid_file = dir.join("grandchild");
    let reg = registry(vec![fault(
        "family",
        "grandchild",
        &[("FAULT_PID_FILE", &pid_file.to_string_lossy())],
    )]);
    block(reg.start("family")).unwrap();
    let leader = reg.status_of("family").unwrap().pid.unwrap() as i32;
    let grandchild: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(leader) && alive(grandchild));
    block(reg.stop("family")).unwrap();
    assert!(!crate::process::group_alive(leader), "the group survived");
    // The leader is reaped by us: no /proc entry left, not even a zombie.
    assert!(
        wait_until(Duration::from_secs(2), || !Path::new(&format!(
            "/proc/{leader}"
        ))
        .exists()),
        "the leader is left as a zombie"
    );
    assert!(
        wait_until(Duration::from_secs(2), || !alive(grandchild)),
        "the grandchild was orphaned"
    );
    let status = reg.status_of("family").unwrap();
    assert_eq!(status.state, State::Stopped);
    assert_eq!(status.pid, None);
}

#[test]
fn stderr_goes_to_the_ring_and_the_session_log() {
    let dir = scratch("stderr");
    let log = dir.join("mcp.log");
    let options = Options {
        log_file: Some(log.clone()),
        stderr_lines: 2,
        ..quick()
    };
    let reg = Registry::new(vec![fault("noisy", "crash-at-start", &[])], options, None);
    let _ = block(reg.start("noisy"));
    let status = reg.status_of("noisy").unwrap();
    assert!(status.stderr.len() <= 2);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("noisy: fault server: cannot open the database")
            && text.contains("noisy: fault server: giving up"),
        "{text}"
    );
}

fn sse(name: &str, url: String) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        transport: Transport::Sse {
            url,
            headers: [("X-Test".to_string(), "sse-header".to_string())].into(),
        },
        source: Source::User,
        file: PathBuf::from("/u.json"),
    }
}

/// A scripted legacy SSE server on 127.0.0.1 for the faults no real one
/// shows; every request it gets is kept, head and body, in the list.
/// GET /silent streams but never names its endpoint; /missing is a 404;
/// /json is not an event stream; /elsewhere names an endpoint on another
/// origin; /mute names `/post`, whose POSTs are accepted and never
/// answered.
fn scripted_sse_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = n.trim().parse().unwrap_or(0);
                    }
                    head.push_str(&line);
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                log.lock()
                    .unwrap()
                    .push(format!("{head}\n{}", String::from_utf8_lossy(&body)));
                let stream_head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n";
                let answer = match path.as_str() {
                    "/silent" => format!("{stream_head}: nothing to say\n\n"),
                    "/elsewhere" => format!(
                        "{stream_head}event: endpoint\ndata: http://elsewhere.invalid/post\n\n"
                    ),
                    "/mute" => format!("{stream_head}event: endpoint\r\ndata: /post?s=1\r\n\r\n"),
                    "/json" => {
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
                            .to_string()
                    }
                    p if p.starts_with("/post") => {
                        "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_string()
                    }
                    _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 14\r\n\r\nno such stream"
                        .to_string(),
                };
                let mut stream = reader.into_inner();
                let _ = stream.write_all(answer.as_bytes());
                // Hold a stream open until the client goes away.
                let mut sink = [0u8; 64];
                while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
            });
        }
    });
    (port, seen)
}

#[test]
fn legacy_sse_failures_name_the_url_and_what_failed() {
    let (port, _) = scripted_sse_server();
    let base = format!("http://127.0.0.1:{port}");
    let dead = free_port();
    let cases = [
        (
            format!("{base}/missing"),
            "GET answered HTTP 404 Not Found: no such stream",
        ),
        (format!("{base}/json"), "not an event stream"),
        (format!("{base}/elsewhere"), "another origin"),
        (format!("http://127.0.0.1:{dead}/sse"), "GET failed"),
        ("no url at all".to_string(), "not a URL"),
    ];
    for (url, expected) in cases {
        let reg = registry(vec![sse("old", url.clone())]);
        let err = block(reg.start("old")).unwrap_err();
        assert!(
            err.message.contains(&format!("legacy SSE server at {url}"))
                && err.message.contains(expected),
            "{url}: {}",
            err.message
        );
        assert_eq!(reg.status_of("old").unwrap().state, State::Failed);
    }
}

/// Start a legacy SSE server at PATH of the scripted server with a 1 s
/// startup timeout, which must fail: its error, how long the start
/// took, and the requests the server saw.
fn failed_sse_start(path: &str) -> (crate::error::Error, Duration, Vec<String>) {
    let (port, seen) = scripted_sse_server();
    let options = Options {
        startup_timeout: Duration::from_secs(1),
        ..quick()
    };
    let reg = Registry::new(
        vec![sse("scripted", format!("http://127.0.0.1:{port}{path}"))],
        options,
        None,
    );
    let started = Instant::now();
    let err = block(reg.start("scripted")).unwrap_err();
    let took = started.elapsed();
    let requests = seen.lock().unwrap().clone();
    (err, took, requests)
}

#[test]
fn legacy_sse_without_endpoint_event_fails_within_the_startup_timeout() {
    let (err, took, requests) = failed_sse_start("/silent");
    assert!(took < Duration::from_secs(3));
    assert!(
        err.message
            .contains("no endpoint event within the startup timeout"),
        "{}",
        err.message
    );
    // The GET asked for a stream and carried the configured header.
    let get = requests[0].to_ascii_lowercase();
    assert!(
        get.starts_with("get /silent ")
            && get.contains("accept: text/event-stream")
            && get.contains("x-test: sse-header"),
        "{get}"
    );
}

#[test]
fn legacy_sse_posts_to_the_endpoint_with_the_configured_headers() {
    let (err, _, requests) = failed_sse_start("/mute");
    assert!(
        err.message.contains("did not answer initialize within 1 s"),
        "{}",
        err.message
    );
    let post = requests
        .iter()
        .find(|r| r.starts_with("POST "))
        .expect("no POST reached the endpoint");
    let lower = post.to_ascii_lowercase();
    assert!(
        lower.starts_with("post /post?s=1 ")
            && lower.contains("content-type: application/json")
            && lower.contains("x-test: sse-header")
            && post.contains("\"method\":\"initialize\""),
        "{post}"
    );
}

// ---- real servers (installed by scripts/deps.sh) ----

fn everything_stdio() -> ServerConfig {
    stdio(
        "everything",
        Source::User,
        "node",
        &[&everything_js(), "stdio"],
    )
}

#[test]
fn everything_server_round_trips_tools_resources_and_prompts() {
    let reg = registry(vec![everything_stdio()]);
    let tools = block(reg.list_tools("everything")).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for expected in ["echo", "get-sum", "get-tiny-image", "get-env"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let sum = tools.iter().find(|t| t.name == "get-sum").unwrap();
    assert_eq!(sum.full_name, "mcp__everything__get-sum");
    assert!(
        sum.input_schema["properties"]["a"].is_object(),
        "{}",
        sum.input_schema
    );

    let echo = block(reg.call_tool(
        "everything",
        "echo",
        json!({"message": "hi"}),
        CallOptions::default(),
    ))
    .unwrap();
    assert!(echo.text().contains("hi") && !echo.is_error, "{echo:?}");
    let sum = block(reg.call_tool(
        "everything",
        "get-sum",
        json!({"a": 2, "b": 3}),
        CallOptions::default(),
    ))
    .unwrap();
    assert!(sum.text().contains('5'), "{sum:?}");
    let image = block(reg.call_tool(
        "everything",
        "get-tiny-image",
        json!({}),
        CallOptions::default(),
    ))
    .unwrap();
    let png = image.content.iter().find_map(|c| match c {
        Content::Image { data, mime_type } => Some((data.clone(), mime_type.clone())),
        _ => None,
    });
    let (data, mime) = png.expect("no image block");
    assert_eq!(mime, "image/png");
    assert!(
        data.starts_with("iVBORw0KGgo"),
        "not base64 PNG: {}",
        &data[..20]
    );
    // A bad argument is the tool's error or a protocol error, never a hang.
    let bad = block(reg.call_tool(
        "everything",
        "get-sum",
        json!({"a": "x"}),
        CallOptions::default(),
    ));
    assert!(bad.map(|r| r.is_error).unwrap_or(true));

    let resources = block(reg.list_resources("everything")).unwrap();
    assert!(!resources.is_empty());
    let text_resource = resources
        .iter()
        .find(|r| r.mime_type.as_deref() == Some("text/plain"))
        .or_else(|| resources.first())
        .unwrap();
    let contents = block(reg.read_resource("everything", &text_resource.uri)).unwrap();
    assert!(!contents.is_empty());
    assert!(matches!(
        &contents[0],
        Content::ResourceText { uri, .. } | Content::ResourceBlob { uri, .. } if *uri == text_resource.uri
    ));
    let templates = block(reg.list_resource_templates("everything")).unwrap();
    assert!(!templates.is_empty());

    let prompts = block(reg.list_prompts("everything")).unwrap();
    assert!(
        prompts.iter().any(|p| p.name == "simple-prompt"),
        "{prompts:?}"
    );
    let prompt = block(reg.get_prompt("everything", "simple-prompt", HashMap::new())).unwrap();
    assert!(!prompt.messages.is_empty());
    let status = reg.status_of("everything").unwrap();
    assert_eq!(status.tools, Some(tools.len()));
    assert!(status.server_info.is_some());
    let datum = status.to_datum();
    assert!(matches!(datum, crate::Datum::List(_)));
    block(reg.stop_all());
}

#[test]
fn everything_prompts_are_commands_with_arguments_and_embedded_resources() {
    let reg = registry(vec![everything_stdio()]);
    let prompts = block(reg.list_prompts("everything")).unwrap();
    let args = prompts
        .iter()
        .find(|p| p.name == "args-prompt")
        .unwrap_or_else(|| panic!("no args-prompt in {prompts:?}"));
    assert_eq!(args.command, "mcp__everything__args-prompt");
    assert_eq!(args.server, "everything");
    let declared: Vec<(&str, bool)> = args
        .arguments
        .iter()
        .map(|(name, _, required)| (name.as_str(), *required))
        .collect();
    assert_eq!(declared, vec![("city", true), ("state", false)]);

    let filled = block(reg.get_prompt(
        "everything",
        "args-prompt",
        env(&[("city", "Paris"), ("state", "Texas")]),
    ))
    .unwrap();
    assert_eq!(filled.messages.len(), 1);
    assert_eq!(
        filled.messages[0],
        (
            "user".to_string(),
            Content::Text("What's weather in Paris, Texas?".into())
        )
    );
    // A prompt may embed a resource: its text arrives with its URI.
    let embedded = block(reg.get_prompt(
        "everything",
        "resource-prompt",
        env(&[("resourceType", "Text"), ("resourceId", "2")]),
    ))
    .unwrap();
    assert!(
        embedded.messages.iter().any(|(_, c)| matches!(
            c,
            Content::ResourceText { uri, text, .. }
                if uri.ends_with("/text/2") && !text.is_empty()
        )),
        "{embedded:?}"
    );
    // The server's refusal of a missing required argument names the server.
    let err = block(reg.get_prompt("everything", "args-prompt", HashMap::new())).unwrap_err();
    assert!(err.message.contains("\"everything\""), "{}", err.message);
    block(reg.stop_all());
}

#[test]
fn prompts_list_changed_tells_the_listener() {
    let notices = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&notices);
    let listener: Listener = Arc::new(move |n| seen.lock().unwrap().push(n));
    let reg = Registry::new(vec![fault("p", "prompts", &[])], quick(), Some(listener));
    let names = |prompts: Vec<PromptInfo>| -> Vec<String> {
        prompts.into_iter().map(|p| p.command).collect()
    };
    assert_eq!(
        names(block(reg.list_prompts("p")).unwrap()),
        vec!["mcp__p__greet".to_string()]
    );
    block(reg.call_tool("p", "add_prompt", json!({}), CallOptions::default())).unwrap();
    assert!(wait_until(Duration::from_secs(5), || notices
        .lock()
        .unwrap()
        .contains(&Notice::PromptsChanged { server: "p".into() })));
    assert_eq!(
        names(block(reg.list_prompts("p")).unwrap()),
        vec!["mcp__p__greet".to_string(), "mcp__p__added_0".to_string()]
    );
    // A server without the prompts capability lists none, without asking.
    let plain = registry(vec![fault("plain", "basic", &[])]);
    assert!(block(plain.list_prompts("plain")).unwrap().is_empty());
    block(reg.stop_all());
    block(plain.stop_all());
}

#[test]
fn everything_server_passes_configured_env() {
    let mut config = everything_stdio();
    if let Transport::Stdio { env, .. } = &mut config.transport {
        env.insert("MEVEDEL_MCP_PROBE".into(), "from-config".into());
    }
    let reg = registry(vec![config]);
    let result =
        block(reg.call_tool("everything", "get-env", json!({}), CallOptions::default())).unwrap();
    assert!(result.text().contains("from-config"), "{}", result.text());
    block(reg.stop_all());
}

/// A free TCP port on 127.0.0.1 (free when asked; the server binds it next).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn everything_server_over_streamable_http() {
    let port = free_port();
    let mut server = std::process::Command::new("node")
        .arg(everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let outcome = std::panic::catch_unwind(|| {
        assert!(up, "server-everything did not listen on {port}");
        let config = ServerConfig {
            name: "remote".into(),
            transport: Transport::Http {
                url: format!("http://127.0.0.1:{port}/mcp"),
                headers: [("X-Test".to_string(), "1".to_string())].into(),
            },
            source: Source::CommandLine,
            file: PathBuf::from("/flag.json"),
        };
        let reg = registry(vec![config]);
        let tools = block(reg.list_tools("remote")).unwrap();
        assert!(tools.iter().any(|t| t.name == "echo"));
        let echo = block(reg.call_tool(
            "remote",
            "echo",
            json!({"message": "over http"}),
            CallOptions::default(),
        ))
        .unwrap();
        assert!(echo.text().contains("over http"), "{echo:?}");
        let status = reg.status_of("remote").unwrap();
        assert_eq!((status.transport, status.state), ("http", State::Ready));
        block(reg.stop_all());
    });
    let _ = server.kill();
    let _ = server.wait();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Server-everything serving legacy SSE on PORT, its stderr in LOG.
fn everything_sse(port: u16, log: &Path) -> std::process::Child {
    let child = std::process::Command::new("node")
        .arg(everything_js())
        .arg("sse")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("cannot run node");
    let up = wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "server-everything did not listen on {port}");
    child
}

#[test]
fn everything_server_over_legacy_sse() {
    let port = free_port();
    let dir = scratch("legacy-sse");
    let log = dir.join("server.log");
    let mut server = everything_sse(port, &log);
    let crashes = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&crashes);
    let listener: Listener = Arc::new(move |notice| {
        if let Notice::Crashed {
            server, message, ..
        } = notice
        {
            seen.lock().unwrap().push((server, message));
        }
    });
    let reg = Registry::new(
        vec![sse("old", format!("http://127.0.0.1:{port}/sse"))],
        quick(),
        Some(listener),
    );
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let tools = block(reg.list_tools("old")).unwrap();
        assert!(tools.iter().any(|t| t.full_name == "mcp__old__echo"));
        let echo = block(reg.call_tool(
            "old",
            "echo",
            json!({"message": "over legacy sse"}),
            CallOptions::default(),
        ))
        .unwrap();
        assert_eq!(echo.text(), "Echo: over legacy sse");

        let features = "demo://resource/static/document/features.md";
        let resources = block(reg.list_resources("old")).unwrap();
        assert!(resources.iter().any(|r| r.uri == features), "{resources:?}");
        let contents = block(reg.read_resource("old", features)).unwrap();
        assert!(
            matches!(&contents[0], Content::ResourceText { uri, text, .. }
                     if uri == features && text.contains("Everything Server")),
            "{contents:?}"
        );

        // Progress notifications come back on the stream, tied to the call.
        let steps = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&steps);
        let progress: ProgressFn = Arc::new(move |p: Progress| {
            into.lock().unwrap().push((p.progress, p.total));
        });
        let done = block(reg.call_tool(
            "old",
            "trigger-long-running-operation",
            json!({"duration": 0.6, "steps": 3}),
            CallOptions {
                progress: Some(progress),
                ..CallOptions::default()
            },
        ))
        .unwrap();
        assert!(done.text().contains("completed"), "{done:?}");
        // The last notification is handled apart from the answer and may
        // come just after it on a busy machine.
        wait_until(Duration::from_secs(5), || steps.lock().unwrap().len() >= 3);
        assert_eq!(
            *steps.lock().unwrap(),
            vec![(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]
        );
        let status = reg.status_of("old").unwrap();
        assert_eq!((status.transport, status.state), ("sse", State::Ready));
        assert!(status.server_info.is_some());

        // A stop closes the stream: the server sees the client go.
        block(reg.stop("old")).unwrap();
        assert!(
            wait_until(Duration::from_secs(5), || std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("Client Disconnected")),
            "the server never saw the stream close"
        );
        assert!(crashes.lock().unwrap().is_empty());

        // The server going away is a crash, reported once.
        block(reg.start("old")).unwrap();
        let _ = server.kill();
        let _ = server.wait();
        assert!(wait_until(Duration::from_secs(5), || !crashes
            .lock()
            .unwrap()
            .is_empty()));
        std::thread::sleep(Duration::from_millis(300));
        let reported = crashes.lock().unwrap().clone();
        assert_eq!(reported.len(), 1, "{reported:?}");
        assert_eq!(reported[0].0, "old");
        assert!(reported[0].1.contains("event stream"), "{reported:?}");
        let status = reg.status_of("old").unwrap();
        assert_eq!(status.state, State::Failed);
        assert_eq!(status.last_error, Some(reported[0].1.clone()));
    }));
    let _ = server.kill();
    let _ = server.wait();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn filesystem_server_reads_inside_its_root() {
    let dir = scratch("fs");
    std::fs::write(dir.join("note.txt"), "filesystem says hello\n").unwrap();
    let js =
        deps_mcp().join("npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let root = dir.canonicalize().unwrap();
    let reg = registry(vec![stdio(
        "fs",
        Source::User,
        "node",
        &[&js.to_string_lossy(), &root.to_string_lossy()],
    )]);
    let tools = block(reg.list_tools("fs")).unwrap();
    assert!(tools.iter().any(|t| t.name == "read_text_file"));
    let path = root.join("note.txt");
    let read = block(reg.call_tool(
        "fs",
        "read_text_file",
        json!({"path": path}),
        CallOptions::default(),
    ))
    .unwrap();
    assert!(read.text().contains("filesystem says hello"), "{read:?}");
    let outside = block(reg.call_tool(
        "fs",
        "read_text_file",
        json!({"path": "/etc/passwd"}),
        CallOptions::default(),
    ));
    assert!(outside.map(|r| r.is_error).unwrap_or(true));
    block(reg.stop_all());
}

#[test]
fn time_server_from_pypi_answers() {
    let bin = deps_mcp().join("venv/bin/mcp-server-time");
    let reg = registry(vec![stdio(
        "time",
        Source::User,
        &bin.to_string_lossy(),
        &["--local-timezone", "UTC"],
    )]);
    let tools = block(reg.list_tools("time")).unwrap();
    assert!(tools.iter().any(|t| t.name == "convert_time"), "{tools:?}");
    let result = block(reg.call_tool(
        "time",
        "convert_time",
        json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        CallOptions::default(),
    ))
    .unwrap();
    assert!(
        !result.is_error && result.text().contains("21:00"),
        "{result:?}"
    );
    block(reg.stop_all());
}

#[test]
fn eager_start_runs_servers_in_parallel() {
    // Three servers that each take ~1 s to start would take 3 s in turn.
    let slow = |name: &str| {
        let script = format!("sleep 1; exec python3 {} basic", fault_script());
        stdio(name, Source::User, "sh", &["-c", &script])
    };
    let reg = registry(vec![slow("a"), slow("b"), slow("c")]);
    let started = Instant::now();
    let outcomes = block(reg.start_all());
    assert!(outcomes.iter().all(|(_, r)| r.is_ok()), "{outcomes:?}");
    assert!(
        started.elapsed() < Duration::from_millis(2800),
        "{:?}",
        started.elapsed()
    );
    let count = AtomicUsize::new(0);
    for status in reg.status() {
        assert_eq!(status.state, State::Ready);
        count.fetch_add(1, Ordering::Relaxed);
    }
    assert_eq!(count.load(Ordering::Relaxed), 3);
    block(reg.stop_all());
}

#[test]
fn dropping_the_registry_kills_its_servers() {
    let reg = registry(vec![fault("left", "basic", &[])]);
    block(reg.start("left")).unwrap();
    let pid = reg.status_of("left").unwrap().pid.unwrap() as i32;
    assert!(alive(pid));
    drop(reg);
    assert!(
        wait_until(Duration::from_secs(5), || !Path::new(&format!(
            "/proc/{pid}"
        ))
        .exists()),
        "the server outlived its registry"
    );
}

/// `examples/mcp_conformance_client`, built for this run into the target
/// directory and profile of this test binary (target/PROFILE/deps/):
/// `cargo test` does not always build examples (not with a test-name
/// filter), so the test builds it, a no-op when it is fresh.
fn conformance_client() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let mut build = std::process::Command::new(env!("CARGO"));
    build
        .args([
            "build",
            "--quiet",
            "-p",
            "mevedel-core",
            "--example",
            "mcp_conformance_client",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    if let Some(target) = profile_dir.parent() {
        build.env("CARGO_TARGET_DIR", target);
    }
    let status = build.status().unwrap();
    assert!(status.success(), "building the conformance client failed");
    let path = profile_dir.join("examples/mcp_conformance_client");
    assert!(path.exists(), "{} is missing", path.display());
    path
}

#[test]
fn conformance_client_scenarios_pass() {
    let conformance = deps_mcp().join("npm/node_modules/.bin/conformance");
    let client = conformance_client();
    for scenario in ["initialize", "tools_call"] {
        let out = std::process::Command::new(&conformance)
            .args(["client", "--scenario", scenario, "--command"])
            .arg(&client)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("OVERALL: PASSED") && !text.contains("FAILURE"),
            "conformance scenario {scenario} failed:\n{text}"
        );
    }
}

/// The reply event for request ID, waiting up to LIMIT; other events
/// (progress, notices) are collected into SEEN.
fn await_reply(id: i64, seen: &mut Vec<crate::events::Event>, limit: Duration) -> crate::Datum {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        for event in crate::events::global().drain() {
            if event.kind == "reply"
                && let crate::Datum::List(items) = &event.data
                && items.first() == Some(&crate::Datum::Int(id))
            {
                return event.data;
            }
            seen.push(event);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no reply for request {id} within {limit:?}");
}

#[test]
fn session_answers_by_events_and_approves_workspace_files_by_hash() {
    use super::session::{OpenRequest, Session, cancel};
    crate::events::global().attach(Box::new(std::io::sink()));
    let dir = scratch("session");
    let marker = dir.join("started");
    let user = dir.join("user.json");
    std::fs::write(
        &user,
        json!({"mcpServers": {"everything": {"command": "node",
                                             "args": [everything_js(), "stdio"]}}})
        .to_string(),
    )
    .unwrap();
    let workspace = dir.join(".mcp.json");
    let workspace_text = json!({"mcpServers": {"marker": {
        "command": "sh", "args": ["-c", format!("touch {}; sleep 5", marker.display())]}}})
    .to_string();
    std::fs::write(&workspace, &workspace_text).unwrap();
    let broken = dir.join("broken.json");
    std::fs::write(&broken, "{\"mcpServers\": {\n  oops}").unwrap();
    let session = Session::open(OpenRequest {
        files: vec![
            (user.clone(), Source::User),
            (workspace.clone(), Source::Workspace),
            (dir.join("absent.json"), Source::CommandLine),
            (broken.clone(), Source::CommandLine),
        ],
        env: env(&[("PATH", &std::env::var("PATH").unwrap_or_default())]),
        key: "k1".into(),
        startup_timeout: Some(Duration::from_secs(20)),
        ..OpenRequest::default()
    });
    // Three files are reported (the absent one is skipped); the broken
    // one names its line.
    let files = format!("{:?}", session.files());
    assert!(
        files.contains("broken.json") && files.contains("line 2"),
        "{files}"
    );
    assert!(!files.contains("absent.json"), "{files}");

    let mut seen = Vec::new();
    // The unapproved workspace server does not start.
    session.start(9001, Some("marker".into())).unwrap();
    let reply = format!(
        "{:?}",
        await_reply(9001, &mut seen, Duration::from_secs(10))
    );
    assert!(reply.contains("error"), "{reply}");
    assert!(!marker.exists(), "an unapproved server was started");
    // Approval by another file's hash approves nothing; by its own, it.
    assert!(
        session
            .approve(&config::sha256_hex("{}"))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        session
            .approve(&config::sha256_hex(&workspace_text))
            .unwrap(),
        vec!["marker".to_string()]
    );

    // A tool call answers through a reply event.
    session
        .call_tool(
            9002,
            "everything".into(),
            "echo".into(),
            r#"{"message": "hi there"}"#,
            Some(Duration::from_secs(30)),
        )
        .unwrap();
    let reply = format!(
        "{:?}",
        await_reply(9002, &mut seen, Duration::from_secs(60))
    );
    assert!(
        reply.contains("hi there") && reply.contains("ok"),
        "{reply}"
    );
    assert!(!cancel(9002), "a finished call is no longer cancellable");
    // Arguments that are not JSON are refused at once.
    assert!(
        session
            .call_tool(9003, "everything".into(), "echo".into(), "{", None)
            .is_err()
    );
    // The status lists both servers, everything running.
    let status = format!("{:?}", session.status());
    assert!(
        status.contains("everything") && status.contains("marker"),
        "{status}"
    );
    // Prompts: listed with their commands, filled in by name.
    session.list_prompts(9005, "everything".into()).unwrap();
    let reply = format!(
        "{:?}",
        await_reply(9005, &mut seen, Duration::from_secs(20))
    );
    assert!(
        reply.contains("mcp__everything__simple-prompt") && reply.contains(":required"),
        "{reply}"
    );
    session
        .get_prompt(
            9006,
            "everything".into(),
            "args-prompt".into(),
            env(&[("city", "Oslo")]),
        )
        .unwrap();
    let reply = format!(
        "{:?}",
        await_reply(9006, &mut seen, Duration::from_secs(20))
    );
    assert!(reply.contains("What's weather in Oslo?"), "{reply}");
    session.stop(9004, None).unwrap();
    await_reply(9004, &mut seen, Duration::from_secs(20));
}
