//! The escape suite: every attempt to get out of the sandbox, run under
//! bubblewrap plus the Landlock helper and under the Landlock helper
//! alone. Each attempt must be denied *and* leave its target unchanged.
//!
//! Every attempt runs the way the product runs a model's command: as a
//! managed execution (`exec::manager`) whose spec carries the sandbox
//! policy, so the driver prepares, starts and settles it.
//!
//! These tests run as root on the build machines, where file permissions
//! stop nothing. So each attempt that can be run harmlessly is first run
//! unconfined (the "control"), which must succeed: the denial that
//! follows comes from the sandbox, not from the machine.
//!
//! bwrap and Landlock are required: the launches use mode `required`, so
//! a missing layer fails these tests loudly instead of skipping them.
//!
//! The suite lives in core, not in the helper's crate, so that the helper
//! crate depends on nothing of core even for its tests; it builds the
//! helper binary itself ([`common::helper`]).

// The whole file is test code, helpers included; clippy's allowance for
// tests covers only the #[test] functions themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mevedel_core::Datum;
use mevedel_core::exec::execution::{Facts, Kind, Phase, Spec, Termination};
use mevedel_core::exec::manager;
use mevedel_core::sandbox::launch::{self, Request, Start};
use mevedel_core::sandbox::policy::{Backend, Boundary, Mode};

mod common;
use common::helper;

const SECRET: &str = "FAKE-PRIVATE-KEY-7f3a9c";
const ORIG: &str = "original contents\n";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Layer {
    BwrapLandlock,
    LandlockOnly,
}

/// A workspace, an outside directory, a fake home with secrets, and a
/// loopback listener that counts connections.
struct World {
    base: PathBuf,
    ws: PathBuf,
    out: PathBuf,
    home: PathBuf,
    port: u16,
    connections: Arc<AtomicUsize>,
    tag: String,
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

impl World {
    fn new(tag: &str) -> World {
        // Not under /tmp: bwrap's private /tmp would hide targets there
        // and so prove nothing.
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("escape-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let ws = base.join("ws");
        let out = base.join("outside");
        let home = base.join("home");
        for dir in [
            ws.join(".git/hooks"),
            ws.join("sub2"),
            ws.join("ws-home/.ssh"),
        ] {
            std::fs::create_dir_all(&dir).unwrap();
        }
        write(&ws.join(".git/config"), ORIG);
        write(&ws.join("sub/.git/config"), ORIG);
        write(&ws.join("ws-home/.ssh/id_rsa"), SECRET);
        write(&out.join("target.txt"), ORIG);
        write(&home.join(".ssh/id_rsa"), SECRET);
        let base = std::fs::canonicalize(&base).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").expect("cannot listen");
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&connections);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                seen.fetch_add(1, Ordering::SeqCst);
                let mut stream = stream;
                let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
                let mut buf = [0u8; 512];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        });
        World {
            ws: base.join("ws"),
            out: base.join("outside"),
            home: base.join("home"),
            base,
            port,
            connections,
            tag: tag.to_string(),
        }
    }

    /// The managed execution of SCRIPT (after `echo RAN`) in the
    /// workspace, under LAYER (unconfined for `None`).
    fn spec(&self, layer: Option<Layer>, script: &str) -> Spec {
        let (mode, backend) = match layer {
            None => (Mode::Off, Backend::Auto),
            Some(Layer::BwrapLandlock) => (Mode::Required, Backend::Auto),
            Some(Layer::LandlockOnly) => (Mode::Required, Backend::Landlock),
        };
        // Managed Bash refuses the background operator, the model's
        // commands included; a script that needs one runs in a child
        // bash, as a model's would have to.
        let script = if mevedel_core::bash::analyze(script).background {
            format!("bash -c '{}'", script.replace('\'', "'\\''"))
        } else {
            script.to_string()
        };
        Spec {
            session: format!("escape-{}", self.tag),
            owner: "/root".into(),
            command: format!("echo RAN; {script}"),
            description: Some("escape attempt".into()),
            kind: Kind::Bash,
            cwd: Some(self.ws.clone()),
            tty: false,
            timeout_ms: None,
            yield_ms: None,
            artifact_dir: None,
            mailbox: None,
            tool_use_id: None,
            sandbox: Some(Request {
                mode,
                backend,
                writable: vec![self.ws.clone()],
                home: Some(self.home.clone()),
                helper: Some(helper().into()),
                ..Request::default()
            }),
            environment: Some(vec![
                "PATH=/usr/local/bin:/usr/bin:/bin".into(),
                format!("HOME={}", self.home.display()),
                "LC_ALL=C".into(),
            ]),
            env: Vec::new(),
            login_prelude: None,
            output_cap: None,
            stop_grace_ms: None,
            // As every spec from Lisp has it.
            progress: true,
            relay: false,
        }
    }

    /// Run SPEC to settlement (stopped after 30 s) and return what it
    /// showed.
    fn run(&self, spec: Spec) -> Run {
        let exec = manager::global().start(spec).expect("start");
        let runtime = mevedel_core::runtime::get().expect("runtime");
        let wait = Duration::from_secs(30);
        let mut obs = runtime.block_on(manager::observe(Arc::clone(&exec), wait, |_| {}));
        let mut output = text(get(&obs, "output")).to_string();
        if text(get(&obs, "state")) != "completed" {
            obs = runtime.block_on(manager::stop_for_model(Arc::clone(&exec)));
            output.push_str(text(get(&obs, "output")));
        }
        let facts = exec.state().facts.clone().expect("not settled");
        Run { output, facts }
    }
}

/// What one managed execution showed: all its output and its terminal
/// facts.
struct Run {
    output: String,
    facts: Facts,
}

impl Run {
    fn output_text(&self) -> &str {
        &self.output
    }

    /// The boundary facts (every spec here carries a sandbox policy).
    fn sandbox(&self) -> launch::Facts {
        self.facts.sandbox.clone().expect("no boundary facts")
    }
}

/// The value after KEY in a plist datum.
fn get<'a>(d: &'a Datum, key: &str) -> &'a Datum {
    let Datum::List(items) = d else {
        panic!("not a plist: {d:?}")
    };
    let key = format!(":{key}");
    items
        .chunks(2)
        .find(|kv| kv[0] == Datum::Symbol(key.clone()))
        .map_or(&Datum::Nil, |kv| &kv[1])
}

fn text(d: &Datum) -> &str {
    match d {
        Datum::Str(s) => s,
        _ => "",
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Live processes whose command line (arguments joined by spaces) is
/// exactly NEEDLE.
fn processes_with(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let stat = read(&entry.path().join("stat")).unwrap_or_default();
        if stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline)
            .replace('\0', " ")
            .trim_end()
            == needle
        {
            found.push(pid);
        }
    }
    found
}

fn gone_within(needle: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if processes_with(needle).is_empty() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill_all(needle: &str) {
    for pid in processes_with(needle) {
        // SAFETY: killing a test process by pid.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// An outside process for the ptrace and signal attempts.
struct Victim(Child);

impl Victim {
    fn new() -> Victim {
        Victim(
            Command::new("sleep")
                .arg("300")
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn untouched(&self) -> Result<(), String> {
        Victim::untouched_pid(self.pid())
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

type Check = Box<dyn Fn(&World, &Run) -> Result<(), String>>;

/// One escape attempt.
struct Attempt {
    name: &'static str,
    script: String,
    /// Run unconfined first (must escape: print ESCAPED or fail `check`),
    /// then restore with `reset`.
    control: Option<String>,
    /// Run with the workspace as the home directory.
    home_is_ws: bool,
    check: Check,
    reset: Box<dyn Fn(&World)>,
}

fn unchanged(path: PathBuf, expected: Option<&'static str>) -> Check {
    Box::new(move |_, _| {
        let now = read(&path);
        if now.as_deref() == expected {
            Ok(())
        } else {
            Err(format!("{} is now {now:?}", path.display()))
        }
    })
}

fn no_output(text: &'static str) -> Check {
    Box::new(move |_, outcome| {
        if outcome.output_text().contains(text) {
            Err(format!("output holds {text}"))
        } else {
            Ok(())
        }
    })
}

/// The loopback listener saw no connection.
fn no_connection() -> Check {
    Box::new(|w, _| match w.connections.load(Ordering::SeqCst) {
        0 => Ok(()),
        n => Err(format!("the listener saw {n} connections")),
    })
}

fn attempts(w: &World, victim_pid: u32) -> Vec<Attempt> {
    let ws = w.ws.clone();
    let out = w.out.clone();
    let home = w.home.clone();
    let port = w.port;
    let me = std::process::id();
    let etc_name = format!("mevedel-escape-{}-{}", w.tag, me);
    let etc_file = PathBuf::from("/etc").join(&etc_name);
    let layer_digit = if w.tag == "bwrap" { 1 } else { 2 };
    let mark = |n: u32| format!("313{layer_digit}{n}{:05}", me % 100_000);
    let (m1, m2) = (mark(1), mark(2));
    let restore = |path: PathBuf, text: Option<&'static str>| -> Box<dyn Fn(&World)> {
        Box::new(move |_| match text {
            Some(t) => write(&path, t),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        })
    };
    vec![
        Attempt {
            name: "write a file outside the writable roots",
            script: format!("echo pwned > {}/target.txt && echo ESCAPED", out.display()),
            control: Some(String::new()),
            home_is_ws: false,
            check: unchanged(out.join("target.txt"), Some(ORIG)),
            reset: restore(out.join("target.txt"), Some(ORIG)),
        },
        Attempt {
            name: "create a file outside the writable roots",
            script: format!("touch {}/new && echo ESCAPED", out.display()),
            control: Some(String::new()),
            home_is_ws: false,
            check: unchanged(out.join("new"), None),
            reset: restore(out.join("new"), None),
        },
        Attempt {
            name: "plant .git/hooks/pre-commit",
            script: "printf '#!/bin/sh\\necho evil\\n' > .git/hooks/pre-commit && \
                     chmod +x .git/hooks/pre-commit && echo ESCAPED"
                .into(),
            control: Some(String::new()),
            home_is_ws: false,
            check: unchanged(ws.join(".git/hooks/pre-commit"), None),
            reset: restore(ws.join(".git/hooks/pre-commit"), None),
        },
        Attempt {
            name: "rewrite .git/config",
            script: "printf '[core]\\n\\thooksPath = /tmp/evil\\n' >> .git/config && echo ESCAPED"
                .into(),
            control: Some(String::new()),
            home_is_ws: false,
            check: unchanged(ws.join(".git/config"), Some(ORIG)),
            reset: restore(ws.join(".git/config"), Some(ORIG)),
        },
        Attempt {
            name: "rewrite a nested repository's .git/config",
            script: "echo pwned >> sub/.git/config && echo ESCAPED".into(),
            control: Some(String::new()),
            home_is_ws: false,
            check: unchanged(ws.join("sub/.git/config"), Some(ORIG)),
            reset: restore(ws.join("sub/.git/config"), Some(ORIG)),
        },
        Attempt {
            name: "move .git away and plant a fresh one",
            script: "mv .git .git-away && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit \
                     && echo ESCAPED"
                .into(),
            control: Some(String::new()),
            home_is_ws: false,
            check: Box::new(|w, _| {
                if w.ws.join(".git-away").exists() || read(&w.ws.join(".git/config")).is_none() {
                    Err(".git was moved".into())
                } else {
                    Ok(())
                }
            }),
            reset: Box::new(|w| {
                if w.ws.join(".git-away").exists() {
                    let _ = std::fs::remove_dir_all(w.ws.join(".git"));
                    let _ = std::fs::rename(w.ws.join(".git-away"), w.ws.join(".git"));
                }
            }),
        },
        Attempt {
            name: "read the planted ~/.ssh/id_rsa",
            script: "cat ~/.ssh/id_rsa && echo ESCAPED".into(),
            control: Some(String::new()),
            home_is_ws: false,
            check: no_output(SECRET),
            reset: Box::new(|_| {}),
        },
        Attempt {
            name: "plant ~/.ssh/authorized_keys",
            script: "echo ssh-ed25519 evil >> ~/.ssh/authorized_keys && echo ESCAPED".into(),
            control: Some(String::new()),
            home_is_ws: false,
            check: unchanged(home.join(".ssh/authorized_keys"), None),
            reset: restore(home.join(".ssh/authorized_keys"), None),
        },
        Attempt {
            name: "read ~/.ssh/id_rsa when home is inside the workspace",
            script: "cat ~/.ssh/id_rsa && echo ESCAPED".into(),
            control: Some(String::new()),
            home_is_ws: true,
            check: no_output(SECRET),
            reset: Box::new(|_| {}),
        },
        Attempt {
            name: "curl to a 127.0.0.1 listener",
            script: format!("curl -s -m 3 http://127.0.0.1:{port}/ && echo ESCAPED"),
            control: Some(String::new()),
            home_is_ws: false,
            check: no_connection(),
            reset: Box::new(|w| w.connections.store(0, Ordering::SeqCst)),
        },
        Attempt {
            name: "bash /dev/tcp to a 127.0.0.1 listener",
            // Waiting for the reply means the listener has counted the
            // connection before the control's reset clears the count.
            script: format!(
                "exec 3<>/dev/tcp/127.0.0.1/{port} && printf 'x\\n' >&3 && read -r -t 3 _ <&3 && echo ESCAPED"
            ),
            control: Some(String::new()),
            home_is_ws: false,
            check: no_connection(),
            reset: Box::new(|w| w.connections.store(0, Ordering::SeqCst)),
        },
        Attempt {
            name: "symlink to /etc inside the workspace, write through it",
            script: format!("ln -s /etc sub2/etc-link && echo pwned > sub2/etc-link/{etc_name} && echo ESCAPED"),
            control: Some(String::new()),
            home_is_ws: false,
            check: unchanged(etc_file.clone(), None),
            reset: {
                let etc_file = etc_file.clone();
                Box::new(move |w| {
                    let _ = std::fs::remove_file(&etc_file);
                    let _ = std::fs::remove_file(w.ws.join("sub2/etc-link"));
                })
            },
        },
        Attempt {
            name: "write through /proc/1/root",
            script: format!("echo pwned > /proc/1/root{}/target.txt && echo ESCAPED", out.display()),
            // PID 1 of these machines refuses even root; see the next one.
            control: None,
            home_is_ws: false,
            check: unchanged(out.join("target.txt"), Some(ORIG)),
            reset: restore(out.join("target.txt"), Some(ORIG)),
        },
        Attempt {
            name: "write through /proc/<outside pid>/root",
            script: format!("echo pwned > /proc/{me}/root{}/target.txt && echo ESCAPED", out.display()),
            control: Some(String::new()),
            home_is_ws: false,
            check: unchanged(out.join("target.txt"), Some(ORIG)),
            reset: restore(out.join("target.txt"), Some(ORIG)),
        },
        Attempt {
            name: "read ~/.ssh/id_rsa through /proc/<outside pid>/root",
            script: format!("cat /proc/{me}/root{}/.ssh/id_rsa && echo ESCAPED", home.display()),
            control: Some(String::new()),
            home_is_ws: false,
            check: no_output(SECRET),
            reset: Box::new(|_| {}),
        },
        Attempt {
            name: "ln -s + rename race on a writable root",
            script: format!(
                "mkdir -p sub2/d; \
                 ( for i in $(seq 200); do rm -rf sub2/d; ln -sfn {o} sub2/tmp-link; \
                   mv -Tf sub2/tmp-link sub2/d; rm -f sub2/d; mkdir sub2/d; done ) 2>/dev/null & \
                 for i in $(seq 200); do echo pwned > sub2/d/race.txt; done 2>/dev/null; wait; \
                 ln -sfn {o} sub2/l2 && mv -T sub2/l2 sub2/l3 && echo pwned > sub2/l3/race.txt; \
                 [ -e {o}/race.txt ] && echo ESCAPED",
                o = out.display()
            ),
            control: Some(String::new()),
            home_is_ws: false,
            check: unchanged(out.join("race.txt"), None),
            reset: restore(out.join("race.txt"), None),
        },
        Attempt {
            name: "setsid + double fork to outlive the command",
            script: format!(
                "setsid sleep {m1} </dev/null >/dev/null 2>&1 & \
                 ( sleep {m2} </dev/null >/dev/null 2>&1 & ) ; sleep 0.3"
            ),
            control: Some(String::new()),
            home_is_ws: false,
            check: {
                let (m1, m2) = (m1.clone(), m2.clone());
                Box::new(move |_, _| {
                    if gone_within(&format!("sleep {m1}"), Duration::from_secs(3)) && gone_within(&format!("sleep {m2}"), Duration::from_secs(3)) {
                        Ok(())
                    } else {
                        Err("a detached descendant survived the command".into())
                    }
                })
            },
            reset: {
                let (m1, m2) = (m1.clone(), m2.clone());
                Box::new(move |_| {
                    kill_all(&format!("sleep {m1}"));
                    kill_all(&format!("sleep {m2}"));
                })
            },
        },
        Attempt {
            name: "mount a tmpfs over .git and plant a hook",
            script: "mount -t tmpfs none .git && mkdir .git/hooks && echo evil > .git/hooks/pre-commit \
                     && echo ESCAPED; mount -o remount,rw / && echo ESCAPED"
                .into(),
            control: Some(format!("unshare -m sh -c 'mount -t tmpfs none {}/sub2 && echo ESCAPED'", ws.display())),
            home_is_ws: false,
            check: unchanged(ws.join(".git/hooks/pre-commit"), None),
            reset: Box::new(|_| {}),
        },
        Attempt {
            name: "unshare a mount namespace",
            script: "unshare -m true && echo ESCAPED".into(),
            control: Some(String::new()),
            home_is_ws: false,
            check: Box::new(|_, _| Ok(())),
            reset: Box::new(|_| {}),
        },
        Attempt {
            name: "unshare user+mount namespaces and mount over .git",
            script: "unshare -Urm sh -c 'mount -t tmpfs none .git && echo pwned > .git/config && \
                     cat .git/config && echo ESCAPED'"
                .into(),
            control: Some(String::new()),
            home_is_ws: false,
            check: unchanged(ws.join(".git/config"), Some(ORIG)),
            reset: Box::new(|_| {}),
        },
        Attempt {
            name: "ptrace-attach an outside process",
            script: format!(
                "python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); \
                 print(\"ESCAPED\" if libc.ptrace(16, {victim_pid}, 0, 0) == 0 else \"denied\")'"
            ),
            // The control attaches a process of its own (the victim must
            // stay untouched for the confined runs).
            control: Some(
                "sleep 300 & v=$!; sleep 0.1; python3 -c \"import ctypes,sys; \
                 libc = ctypes.CDLL(None, use_errno=True); \
                 print('ESCAPED' if libc.ptrace(16, int(sys.argv[1]), 0, 0) == 0 else 'denied')\" $v; \
                 kill -9 $v"
                    .into(),
            ),
            home_is_ws: false,
            check: Box::new(move |_, _| Victim::untouched_pid(victim_pid)),
            reset: Box::new(|_| {}),
        },
        Attempt {
            name: "read an outside process's environment",
            script: format!("cat /proc/{victim_pid}/environ > /dev/null && echo ESCAPED"),
            control: Some(String::new()),
            home_is_ws: false,
            check: Box::new(|_, _| Ok(())),
            reset: Box::new(|_| {}),
        },
        Attempt {
            name: "stop an outside process with a signal",
            script: format!("kill -STOP {victim_pid} && echo ESCAPED"),
            control: Some("sleep 300 & v=$!; kill -STOP $v && echo ESCAPED; kill -9 $v".into()),
            home_is_ws: false,
            check: Box::new(move |_, _| Victim::untouched_pid(victim_pid)),
            reset: Box::new(|_| {}),
        },
    ]
    .into_iter()
    .map(|a| Attempt {
        control: a.control.map(|c| if c.is_empty() { a.script.clone() } else { c }),
        ..a
    })
    .collect()
}

impl Victim {
    fn untouched_pid(pid: u32) -> Result<(), String> {
        let status = read(Path::new(&format!("/proc/{pid}/status"))).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
                .unwrap_or_default()
        };
        match (field("State:"), field("TracerPid:")) {
            (state, tracer) if state == "S" && tracer == "0" => Ok(()),
            other => Err(format!("outside process changed: {other:?}")),
        }
    }
}

fn suite(layer: Layer, tag: &str) {
    let world = World::new(tag);
    let victim = Victim::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while victim.untouched().is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    victim.untouched().expect("victim not ready");
    let list = attempts(&world, victim.pid());
    let mut blocked = 0;
    let mut failures = Vec::new();
    for attempt in &list {
        let spec_for = |layer: Option<Layer>, script: &str| {
            let mut spec = world.spec(layer, script);
            if attempt.home_is_ws {
                let home = world.ws.join("ws-home");
                if let Some(request) = spec.sandbox.as_mut() {
                    request.home = Some(home.clone());
                }
                if let Some(env) = spec.environment.as_mut() {
                    env.retain(|kv| !kv.starts_with("HOME="));
                    env.push(format!("HOME={}", home.display()));
                }
            }
            spec
        };
        if let Some(control) = &attempt.control {
            let outcome = world.run(spec_for(None, control));
            let escaped = outcome.output_text().contains("ESCAPED")
                || (attempt.check)(&world, &outcome).is_err();
            if !escaped {
                failures.push(format!(
                    "{}: the unconfined control did not escape, so the attempt proves nothing: {}",
                    attempt.name,
                    outcome.output_text()
                ));
            }
            (attempt.reset)(&world);
        }
        let outcome = world.run(spec_for(Some(layer), &attempt.script));
        let expected = match layer {
            Layer::BwrapLandlock => Boundary::BwrapLandlock,
            Layer::LandlockOnly => Boundary::Landlock,
        };
        let facts = outcome.sandbox();
        let verdict = if facts.start != Start::Started || facts.boundary != expected {
            Err(format!(
                "the sandbox did not run the attempt ({:?}, {:?}): {}",
                facts.boundary,
                facts.start,
                outcome.output_text()
            ))
        } else if !outcome.output_text().starts_with("RAN") {
            Err(format!(
                "the command did not run: {}",
                outcome.output_text()
            ))
        } else if outcome.output_text().contains("ESCAPED") {
            Err(format!("escaped: {}", outcome.output_text()))
        } else {
            (attempt.check)(&world, &outcome)
        };
        (attempt.reset)(&world);
        let said: Vec<&str> = outcome.output_text().lines().skip(1).take(2).collect();
        println!(
            "  [{tag}] {}: {} ({})",
            attempt.name,
            if verdict.is_ok() {
                "blocked"
            } else {
                "NOT BLOCKED"
            },
            said.join(" | ")
        );
        match verdict {
            Ok(()) => blocked += 1,
            Err(why) => failures.push(format!("{}: {why}", attempt.name)),
        }
    }
    println!(
        "escape suite [{tag}]: {} attempts, {blocked} blocked",
        list.len()
    );
    assert!(
        failures.is_empty(),
        "escape suite [{tag}]:\n{}",
        failures.join("\n")
    );
    assert_eq!(blocked, list.len());
    // The denial is network policy, not a broken network: granted, the
    // same connection goes through.
    let mut granted = world.spec(
        Some(layer),
        &format!(
            "curl -s -m 3 http://127.0.0.1:{}/ && exec 3<>/dev/tcp/127.0.0.1/{} && echo CONNECTED",
            world.port, world.port
        ),
    );
    if let Some(request) = granted.sandbox.as_mut() {
        request.network = true;
    }
    let outcome = world.run(granted);
    assert!(
        outcome.output_text().contains("okCONNECTED"),
        "granted network failed: {}",
        outcome.output_text()
    );
    // The listener thread counts a connection after accepting it, which
    // may lag the command's exit on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(5);
    while world.connections.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(world.connections.load(Ordering::SeqCst), 2);
}

#[test]
fn escape_suite_bwrap_and_landlock() {
    suite(Layer::BwrapLandlock, "bwrap");
}

#[test]
fn escape_suite_landlock_only() {
    suite(Layer::LandlockOnly, "landlock");
}

/// Teardown (of the execution's session, as when a chat closes or
/// Emacs exits) kills a descendant that left the process group, under
/// both layers; unconfined, it survives (the control).
#[test]
fn teardown_kills_setsid_descendants() {
    let world = World::new("teardown");
    for (n, layer) in [None, Some(Layer::BwrapLandlock), Some(Layer::LandlockOnly)]
        .into_iter()
        .enumerate()
    {
        let marker = format!("3134{n}{:05}", std::process::id() % 100_000);
        let spec = world.spec(layer, &format!("setsid sleep {marker} & sleep 60"));
        let session = spec.session.clone();
        let exec = manager::global().start(spec).expect("start");
        let deadline = Instant::now() + Duration::from_secs(10);
        while processes_with(&format!("sleep {marker}")).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !processes_with(&format!("sleep {marker}")).is_empty(),
            "{layer:?}: never started"
        );
        assert_eq!(manager::global().teardown(&session), 1);
        let deadline = Instant::now() + Duration::from_secs(10);
        while exec.state().phase != Phase::Completed && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let (phase, facts) = {
            let st = exec.state();
            (st.phase, st.facts.clone())
        };
        let facts = facts.unwrap_or_else(|| panic!("{layer:?}: not settled ({phase:?})"));
        let survived = !gone_within(&format!("sleep {marker}"), Duration::from_secs(3));
        kill_all(&format!("sleep {marker}"));
        assert_eq!(facts.termination, Termination::Teardown, "{layer:?}");
        match layer {
            None => assert!(survived, "control: setsid did not escape the group"),
            Some(layer) => {
                let start = facts.sandbox.map(|s| s.start);
                assert_eq!(start, Some(Start::Started), "{layer:?}");
                assert!(
                    !survived,
                    "{layer:?}: the setsid descendant survived teardown"
                );
            }
        }
    }
}

/// `required` refuses when bwrap cannot be found; best-effort falls back
/// to the Landlock helper and says so; with no layer at all best-effort
/// runs the command directly and says that.
#[test]
fn missing_bwrap_required_refuses_best_effort_discloses() {
    let world = World::new("nobwrap");
    // Not directly in the workspace root: under the Landlock-only layer a
    // directory holding a protected .git accepts no new entries.
    let ran = world.ws.join("sub2/ran");
    let script = format!("touch {}", ran.display());
    let mut spec = world.spec(Some(Layer::BwrapLandlock), &script);
    fn request(spec: &mut Spec) -> &mut Request {
        spec.sandbox.as_mut().unwrap()
    }
    request(&mut spec).path = Some("/nonexistent-bin".into());
    let outcome = world.run(spec.clone());
    let facts = outcome.sandbox();
    assert_eq!(facts.boundary, Boundary::Refused);
    let Start::Refused(why) = &facts.start else {
        panic!("not refused: {:?}", facts.start)
    };
    assert!(why.contains("bwrap is not installed"), "{why}");
    assert_eq!(outcome.facts.termination, Termination::LaunchFailed);
    assert!(!ran.exists(), "the refused command ran");

    request(&mut spec).mode = Mode::BestEffort;
    let outcome = world.run(spec.clone());
    let facts = outcome.sandbox();
    assert_eq!(facts.boundary, Boundary::Landlock);
    assert_eq!(facts.start, Start::Started);
    let disclosure = facts.disclosure.clone().unwrap_or_default();
    assert!(disclosure.contains("Landlock only"), "{disclosure}");
    assert!(
        disclosure.contains("bwrap is not installed"),
        "{disclosure}"
    );
    assert!(ran.exists());
    let _ = std::fs::remove_file(&ran);

    request(&mut spec).helper = Some("/nonexistent/mevedel-sandbox".into());
    let outcome = world.run(spec.clone());
    let facts = outcome.sandbox();
    assert_eq!(facts.boundary, Boundary::Unconfined);
    assert!(
        facts
            .disclosure
            .as_deref()
            .unwrap_or("")
            .contains("ran unconfined"),
        "{:?}",
        facts.disclosure
    );
    assert!(ran.exists(), "best-effort did not run the command");
    request(&mut spec).mode = Mode::Required;
    let _ = std::fs::remove_file(&ran);
    let outcome = world.run(spec);
    assert_eq!(outcome.sandbox().boundary, Boundary::Refused);
    assert!(!ran.exists());
}

/// A sandbox that cannot start is reported as such, not as the
/// command's failure; a shell that cannot be executed is an exec
/// failure; a missing command is the command's own failure.
#[test]
fn start_marker_tells_sandbox_failure_from_command_failure() {
    let world = World::new("marker");
    let spec = world.spec(Some(Layer::BwrapLandlock), "exit 7");
    let outcome = world.run(spec.clone());
    let facts = outcome.sandbox();
    assert_eq!(
        (facts.start.clone(), outcome.facts.exit_code),
        (Start::Started, Some(7))
    );
    assert_eq!(facts.landlock.as_deref(), Some("full"));

    // The command is missing: the sandbox started the shell, which says so.
    let missing = world.spec(Some(Layer::BwrapLandlock), "/nonexistent/program");
    let outcome = world.run(missing);
    assert_eq!(outcome.sandbox().start, Start::Started);
    assert_eq!(outcome.facts.exit_code, Some(127));
    assert!(
        outcome.output_text().contains("No such file"),
        "{}",
        outcome.output_text()
    );

    // The shell itself cannot be found inside the sandbox (bwrap is).
    let mut no_shell = spec.clone();
    no_shell.environment = Some(vec!["PATH=/nonexistent-bin".into()]);
    if let Some(request) = no_shell.sandbox.as_mut() {
        request.path = Some("/usr/local/bin:/usr/bin:/bin".into());
    }
    let outcome = world.run(no_shell);
    let facts = outcome.sandbox();
    assert!(
        matches!(facts.start, Start::ExecFailed(_)),
        "{:?}",
        facts.start
    );
    assert_eq!(outcome.facts.termination, Termination::LaunchFailed);

    // Break bwrap at start: the working directory lies inside a path it
    // masks, so it cannot change into it.
    let gone = world.ws.join("vanishing");
    std::fs::create_dir_all(gone.join("inner")).unwrap();
    let mut broken = spec;
    broken.cwd = Some(gone.join("inner"));
    if let Some(request) = broken.sandbox.as_mut() {
        request.inaccessible.push(gone.clone());
    }
    let outcome = world.run(broken);
    let Start::SandboxFailed(why) = &outcome.sandbox().start else {
        panic!("not a sandbox failure: {:?}", outcome.sandbox().start)
    };
    assert!(why.contains("vanishing"), "{why}");
    assert_eq!(outcome.facts.termination, Termination::LaunchFailed);
    assert!(
        outcome
            .facts
            .error
            .as_deref()
            .is_some_and(|e| e.contains("vanishing")),
        "{:?}",
        outcome.facts.error
    );
    assert!(!outcome.output_text().contains("RAN"));
}
