//! Stdio MCP servers confined with the sandbox of Bash commands
//! (`mcp::Confinement`), under bubblewrap plus the Landlock helper and
//! under the Landlock helper alone: a confined server cannot write
//! outside the workspace while the same server run directly can (the
//! control: these tests run as root, where file permissions stop
//! nothing), it can write inside it, a real server nobody here wrote
//! (server-everything, on node) still works confined, and stopping
//! leaves none of its processes behind.
//!
//! The launches use mode `required`, so a missing bwrap or Landlock fails
//! these tests loudly instead of skipping them; a missing server-everything
//! fails naming `scripts/deps.sh`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mevedel_core::mcp::{
    CallOptions, Confinement, Content, Options, Registry, Selection, ServerConfig, Source,
    ToolResult, Transport,
};
use mevedel_core::sandbox::launch::Request;
use mevedel_core::sandbox::policy::{Backend, Mode};
use serde_json::json;

mod common;
use common::helper;

fn block<F: Future>(future: F) -> F::Output {
    mevedel_core::runtime::get()
        .expect("runtime")
        .block_on(future)
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-servers")
}

fn deps_mcp() -> PathBuf {
    std::env::var_os("MEVEDEL_DEPS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps"))
        .join("mcp")
}

/// A workspace and a directory outside it, not under /tmp: bwrap's
/// private /tmp would swallow writes there and so prove nothing.
struct World {
    base: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
    /// Found in the command line of every server process of this world.
    tag: String,
}

impl World {
    fn new(tag: &str) -> World {
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("mcp-sandbox-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for dir in ["ws", "outside"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        let base = std::fs::canonicalize(&base).unwrap();
        World {
            ws: base.join("ws"),
            outside: base.join("outside"),
            tag: format!("mcp-sandbox-{tag}-{}", std::process::id()),
            base,
        }
    }

    /// Bash's policy for this workspace (mode `required`, BACKEND), for
    /// the servers named in CONFINED.
    fn confinement(&self, backend: Backend, confined: &[&str]) -> Confinement {
        let env = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
        Confinement {
            request: Request {
                mode: Mode::Required,
                backend,
                writable: vec![self.ws.clone()],
                state_dirs: vec![self.ws.join(".mevedel")],
                home: std::env::var_os("HOME").map(PathBuf::from),
                // The servers' own files stay readable even where the
                // checkout lives under /tmp.
                extra_read: vec![fixtures(), deps_mcp()],
                env: Some(env),
                helper: Some(helper().into()),
                ..Request::default()
            },
            servers: Selection::Only(confined.iter().map(|s| s.to_string()).collect()),
            network: Selection::Only(Vec::new()),
        }
    }

    fn registry(&self, configs: Vec<ServerConfig>, sandbox: Confinement) -> Arc<Registry> {
        Arc::new(Registry::new(
            configs,
            Options {
                startup_timeout: Duration::from_secs(30),
                request_timeout: Duration::from_secs(30),
                stop_grace: Duration::from_millis(500),
                cwd: Some(self.ws.clone()),
                sandbox: Some(sandbox),
                ..Options::default()
            },
            None,
        ))
    }

    /// The fault server in writer mode as NAME.
    fn writer(&self, name: &str) -> ServerConfig {
        let script = fixtures().join("fault_server.py");
        stdio(
            name,
            "python3",
            &[&script.to_string_lossy(), "writer", &self.tag],
        )
    }

    /// Pids of live processes whose command line names this world.
    fn processes(&self) -> Vec<u32> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
                && String::from_utf8_lossy(&cmdline).contains(&self.tag)
                && pid != std::process::id()
            {
                found.push(pid);
            }
        }
        found
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn stdio(name: &str, command: &str, args: &[&str]) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        transport: Transport::Stdio {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Default::default(),
            cwd: None,
        },
        source: Source::User,
        file: PathBuf::from("/test/mcp.json"),
    }
}

fn text(result: &ToolResult) -> String {
    result
        .content
        .iter()
        .map(|c| match c {
            Content::Text(t) => t.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn write(reg: &Registry, server: &str, path: &Path) -> ToolResult {
    let args = json!({"path": path.to_string_lossy(), "text": "written"});
    block(reg.call_tool(server, "write_file", args, CallOptions::default()))
        .unwrap_or_else(|e| panic!("{server}: the call failed: {}", e.message))
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

/// Stop every server of REG and check that no process of WORLD is left.
fn stop_leaves_nothing(world: &World, reg: &Registry) {
    block(reg.stop_all());
    assert!(
        wait_until(Duration::from_secs(3), || world.processes().is_empty()),
        "left running: {:?}",
        world.processes()
    );
}

/// Under BACKEND, "boxed" (confined) is refused outside the workspace
/// and writes inside it; "free" (the same server, run directly) writes
/// outside; stopping leaves no process of either.
fn confined_server_writes_only_the_workspace(backend: Backend, boundary: &str) {
    let world = World::new(boundary);
    let reg = world.registry(
        vec![world.writer("boxed"), world.writer("free")],
        world.confinement(backend, &["boxed"]),
    );

    let control = world.outside.join("free.txt");
    let result = write(&reg, "free", &control);
    assert!(!result.is_error, "the control failed: {}", text(&result));
    assert_eq!(std::fs::read_to_string(&control).unwrap(), "written");

    let escape = world.outside.join("boxed.txt");
    let result = write(&reg, "boxed", &escape);
    assert!(
        result.is_error,
        "a confined server wrote outside: {}",
        text(&result)
    );
    let said = text(&result);
    assert!(
        said.contains("Read-only file system") || said.contains("Permission denied"),
        "{said}"
    );
    assert!(!escape.exists(), "{} was created", escape.display());

    let inside = world.ws.join("boxed.txt");
    let result = write(&reg, "boxed", &inside);
    assert!(!result.is_error, "{}", text(&result));
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "written");

    let boxed = reg.status_of("boxed").unwrap();
    assert_eq!(boxed.sandbox, Some(boundary));
    assert_eq!(reg.status_of("free").unwrap().sandbox, None);
    assert!(
        world.processes().len() >= 2,
        "the tag does not find the servers"
    );

    stop_leaves_nothing(&world, &reg);
}

#[test]
fn bwrap_confined_server_writes_only_the_workspace() {
    confined_server_writes_only_the_workspace(Backend::Auto, "bwrap-landlock");
}

#[test]
fn landlock_confined_server_writes_only_the_workspace() {
    confined_server_writes_only_the_workspace(Backend::Landlock, "landlock");
}

#[test]
fn everything_server_works_confined() {
    let js =
        deps_mcp().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        js.exists(),
        "{} is missing: the MCP test servers are not installed; run scripts/deps.sh",
        js.display()
    );
    let world = World::new("everything");
    let reg = world.registry(
        vec![stdio(
            "everything",
            "node",
            &[&js.to_string_lossy(), "stdio", &world.tag],
        )],
        world.confinement(Backend::Auto, &["everything"]),
    );
    let echo = block(reg.call_tool(
        "everything",
        "echo",
        json!({"message": "from inside"}),
        CallOptions::default(),
    ))
    .unwrap();
    assert!(!echo.is_error);
    assert_eq!(text(&echo), "Echo: from inside");
    let status = reg.status_of("everything").unwrap();
    assert_eq!(status.sandbox, Some("bwrap-landlock"));
    assert!(status.tools.is_some_and(|n| n > 5), "{status:?}");
    stop_leaves_nothing(&world, &reg);
}

#[test]
fn a_server_that_cannot_be_confined_does_not_start() {
    let world = World::new("refused");
    let mut sandbox = world.confinement(Backend::Auto, &["boxed"]);
    sandbox.request.mode = Mode::Off;
    let reg = world.registry(vec![world.writer("boxed")], sandbox);
    let err = block(reg.start("boxed")).expect_err("started unconfined");
    assert!(
        err.message
            .contains("is to run confined (mevedel-mcp-sandbox) but would run unconfined"),
        "{}",
        err.message
    );
    assert!(world.processes().is_empty());
}

#[test]
fn a_confined_server_that_cannot_be_executed_says_so() {
    let world = World::new("missing");
    let reg = world.registry(
        vec![stdio("gone", "/nonexistent/mcp-server", &[&world.tag])],
        world.confinement(Backend::Auto, &["gone"]),
    );
    let err = block(reg.start("gone")).expect_err("started");
    assert!(
        err.message
            .starts_with("not started: /nonexistent/mcp-server: No such file"),
        "{}",
        err.message
    );
    assert!(world.processes().is_empty());
}
