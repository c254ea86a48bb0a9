//! Remote executions through the helper binary, as Emacs drives them:
//! streamed output and exit events, signals, argv and environment, and
//! confinement by each sandbox the host has (bwrap and Landlock are
//! dependencies, scripts/deps.sh: a machine without them fails here).

// The fixtures are test code too: a failure there is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

/// A running helper and what it said.
struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next: u64,
    /// Events read while waiting for answers, in order.
    events: Vec<Value>,
}

impl Helper {
    /// Start the helper with NO_SANDBOX as `MEVEDEL_REMOTE_NO_SANDBOX`.
    fn start(no_sandbox: Option<&str>) -> Helper {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mevedel-remote"));
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
        command.env_remove("MEVEDEL_REMOTE_NO_SANDBOX");
        if let Some(value) = no_sandbox {
            command.env("MEVEDEL_REMOTE_NO_SANDBOX", value);
        }
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                    break;
                }
            }
        });
        let hello: Value = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(hello["hello"]["protocol"], 1);
        Helper {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            next: 0,
            events: Vec::new(),
        }
    }

    fn read(&mut self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(20))
            .expect("the helper said nothing for 20 s")
    }

    /// Send OP with ARGS; answer its `ok` value or its error message.
    fn call(&mut self, op: &str, args: Value) -> Result<Value, String> {
        self.next += 1;
        let id = self.next;
        let line = json!({"id": id, "op": op, "args": args});
        writeln!(self.stdin.as_mut().unwrap(), "{line}").unwrap();
        loop {
            let message = self.read();
            if message.get("event").is_some() {
                self.events.push(message);
            } else if message["id"] == id {
                return match message.get("ok") {
                    Some(ok) => Ok(ok.clone()),
                    None => Err(message["error"]["message"].as_str().unwrap().to_string()),
                };
            }
        }
    }

    /// Read events until run RUN's output contains UNTIL (or it exits);
    /// answer its output so far.
    fn output_until(&mut self, run: &Value, until: &str) -> String {
        loop {
            let text = self.output(run);
            if text.contains(until) || self.exit_of(run).is_some() {
                return text;
            }
            let message = self.read();
            assert!(message.get("event").is_some(), "{message}");
            self.events.push(message);
        }
    }

    /// Run RUN's streamed output so far, decoded.
    fn output(&self, run: &Value) -> String {
        let bytes: Vec<u8> = self
            .events
            .iter()
            .filter(|e| e["event"] == "exec_output" && &e["run"] == run)
            .flat_map(|e| B64.decode(e["data"].as_str().unwrap()).unwrap())
            .collect();
        String::from_utf8(bytes).unwrap()
    }

    fn exit_of(&self, run: &Value) -> Option<Value> {
        self.events
            .iter()
            .find(|e| e["event"] == "exec_exit" && &e["run"] == run)
            .cloned()
    }

    /// Wait for RUN's exit event; answer its output and the event.
    fn finish(&mut self, run: &Value) -> (String, Value) {
        while self.exit_of(run).is_none() {
            let message = self.read();
            self.events.push(message);
        }
        let exit = self.exit_of(run).unwrap();
        // Nothing of the run comes after its exit.
        let last = self.events.iter().rposition(|e| &e["run"] == run).unwrap();
        assert_eq!(self.events[last], exit);
        (self.output(run), exit)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// A workspace with a `.git` and a `src`, and a directory beside the
/// tests (not under /tmp, which bwrap makes private) that is outside it.
struct Place {
    ws: PathBuf,
    outside: PathBuf,
}

impl Place {
    fn new(tag: &str) -> Place {
        let ws = std::env::temp_dir().join(format!("mevedel-rexec-{tag}-{}", std::process::id()));
        let outside = std::env::current_dir().unwrap().join(format!(
            "mevedel-rexec-outside-{tag}-{}",
            std::process::id()
        ));
        for dir in [&ws, &outside] {
            let _ = std::fs::remove_dir_all(dir);
        }
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        Place {
            ws: std::fs::canonicalize(&ws).unwrap(),
            outside,
        }
    }

    fn start_args(&self, argv: &[&str], sandbox: &str) -> Value {
        json!({"argv": argv, "path": self.ws, "spool_dir": self.ws.join("spool"),
               "sandbox": sandbox, "writable": [self.ws], "stream": true})
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.ws);
        let _ = std::fs::remove_dir_all(&self.outside);
    }
}

#[test]
fn output_is_pushed_as_it_comes_and_the_exit_follows_it() {
    let place = Place::new("stream");
    let mut helper = Helper::start(None);
    let mut args = place.start_args(
        &[
            "/bin/sh",
            "-c",
            "echo \"$GREETING\" \"$1\"; echo err >&2; read x; echo got $x; exit 4",
            "sh",
            "one arg",
        ],
        "off",
    );
    args["env"] = json!(["GREETING=hi there"]);
    let started = helper.call("exec_start", args).unwrap();
    assert_eq!(started["confined"], false);
    let run = started["run"].clone();
    // Pushed while the command still waits for its input.
    let first = helper.output_until(&run, "err\n");
    assert_eq!(first, "hi there one arg\nerr\n");
    assert!(helper.exit_of(&run).is_none());
    helper
        .call("exec_stdin", json!({"run": run, "data": "go\n"}))
        .unwrap();
    let (output, exit) = helper.finish(&run);
    assert_eq!(output, "hi there one arg\nerr\ngot go\n");
    assert_eq!(exit["exit_code"], 4);
    assert_eq!(exit["signal"], Value::Null);
    // The spool holds the same bytes, for a poll.
    let polled = helper
        .call("exec_poll", json!({"run": run, "yield_time_ms": 1000}))
        .unwrap();
    assert_eq!(polled["output"], output);
    assert_eq!(polled["exited"], true);
}

#[test]
fn a_large_output_is_streamed_whole_and_in_order() {
    let place = Place::new("large");
    let mut helper = Helper::start(None);
    let started = helper
        .call(
            "exec_start",
            place.start_args(&["/bin/sh", "-c", "seq 1 200000"], "off"),
        )
        .unwrap();
    let (output, exit) = helper.finish(&started["run"]);
    let expected: String = (1..=200_000).map(|n| format!("{n}\n")).collect();
    assert!(output == expected, "{} bytes differ", output.len());
    assert_eq!(exit["exit_code"], 0);
}

#[test]
fn signals_reach_the_group_and_name_how_it_ended() {
    let place = Place::new("signal");
    let mut helper = Helper::start(None);
    let trapped = helper
        .call(
            "exec_start",
            place.start_args(
                &[
                    "/bin/sh",
                    "-c",
                    "trap 'echo caught; exit 7' INT; echo up; while :; do sleep 0.1; done",
                ],
                "off",
            ),
        )
        .unwrap();
    let run = trapped["run"].clone();
    helper.output_until(&run, "up\n");
    let sent = helper
        .call("exec_signal", json!({"run": run, "signal": "INT"}))
        .unwrap();
    assert_eq!(sent["sent"], true);
    let (output, exit) = helper.finish(&run);
    assert_eq!(output, "up\ncaught\n");
    assert_eq!(exit["exit_code"], 7);
    let killed = helper
        .call(
            "exec_start",
            place.start_args(&["/bin/sh", "-c", "echo up; sleep 60"], "off"),
        )
        .unwrap();
    let run = killed["run"].clone();
    helper.output_until(&run, "up\n");
    helper
        .call("exec_signal", json!({"run": run, "signal": "KILL"}))
        .unwrap();
    let (_, exit) = helper.finish(&run);
    assert_eq!(exit["signal"], "KILL");
    assert_eq!(exit["exit_code"], Value::Null);
    let late = helper
        .call("exec_signal", json!({"run": run, "signal": "TERM"}))
        .unwrap();
    assert_eq!(late["sent"], false);
    let bad = helper
        .call("exec_signal", json!({"run": run, "signal": "NOPE"}))
        .unwrap_err();
    assert!(bad.contains("`NOPE`"), "{bad}");
}

#[test]
fn a_confined_command_handles_the_signals_it_traps() {
    let place = Place::new("trap");
    let mut helper = Helper::start(None);
    for (signal, expected) in [("INT", "caught INT\n"), ("TERM", "caught TERM\n")] {
        let started = helper
            .call(
                "exec_start",
                place.start_args(
                    &[
                        "/bin/sh",
                        "-c",
                        "trap 'echo caught INT; exit 7' INT; trap 'echo caught TERM; exit 8' TERM; \
                         echo up; while :; do sleep 0.1; done",
                    ],
                    "required",
                ),
            )
            .unwrap();
        assert_eq!(started["confinement"], "bubblewrap and Landlock");
        let run = started["run"].clone();
        helper.output_until(&run, "up\n");
        let sent = helper
            .call("exec_signal", json!({"run": run, "signal": signal}))
            .unwrap();
        assert_eq!(sent["sent"], true);
        let (output, exit) = helper.finish(&run);
        // The shell may first say its `sleep` was terminated.
        assert!(
            output.starts_with("up\n") && output.ends_with(expected),
            "{output}"
        );
        assert_eq!(exit["exit_code"], if signal == "INT" { 7 } else { 8 });
    }
    // One that does not trap it dies of it, and is said to, though bwrap
    // turns that into an exit code.
    let started = helper
        .call(
            "exec_start",
            place.start_args(&["/bin/sh", "-c", "echo up; sleep 60"], "required"),
        )
        .unwrap();
    let run = started["run"].clone();
    helper.output_until(&run, "up\n");
    helper
        .call("exec_signal", json!({"run": run, "signal": "TERM"}))
        .unwrap();
    let (_, exit) = helper.finish(&run);
    assert_eq!(exit["signal"], "TERM", "{exit}");
    assert_eq!(exit["exit_code"], Value::Null);
}

#[test]
fn bad_requests_are_refused_with_the_reason() {
    let place = Place::new("bad");
    let mut helper = Helper::start(None);
    let mut tty = place.start_args(&["/bin/true"], "off");
    tty["tty"] = json!(true);
    let tty = helper.call("exec_start", tty).unwrap_err();
    assert!(tty.contains("tty"), "{tty}");
    let mut env = place.start_args(&["/bin/true"], "off");
    env["env"] = json!(["NOEQUALS"]);
    let env = helper.call("exec_start", env).unwrap_err();
    assert!(env.contains("`NOEQUALS`"), "{env}");
    let missing = helper
        .call("exec_start", place.start_args(&["/no/such/program"], "off"))
        .unwrap_err();
    assert!(missing.contains("cannot run"), "{missing}");
}

/// Run the write probe under SANDBOX with the helper's NO_SANDBOX;
/// answer the start's answer and the output.
fn probe_writes(tag: &str, no_sandbox: Option<&str>, sandbox: &str) -> (Value, String, Place) {
    let place = Place::new(tag);
    let mut helper = Helper::start(no_sandbox);
    let script = format!(
        "echo in > src/inside.txt && echo inside-ok; \
         (echo out > {}/outside.txt) 2>/dev/null || echo outside-refused; \
         (echo x > .git/config) 2>/dev/null || echo git-refused; \
         echo t > \"${{TMPDIR:-/tmp}}/t\" && echo tmp-ok",
        place.outside.display()
    );
    let started = helper
        .call(
            "exec_start",
            place.start_args(&["/bin/sh", "-c", &script], sandbox),
        )
        .unwrap();
    let (output, exit) = helper.finish(&started["run"]);
    assert_eq!(exit["exit_code"], 0, "{output} {exit}");
    (started, output, place)
}

#[test]
fn bubblewrap_and_landlock_confine_writes_to_the_workspace() {
    let (started, output, place) = probe_writes("both", None, "required");
    assert_eq!(started["confinement"], "bubblewrap and Landlock");
    assert_eq!(started["confined"], true);
    assert_eq!(output, "inside-ok\noutside-refused\ngit-refused\ntmp-ok\n");
    assert!(place.ws.join("src/inside.txt").exists());
    assert!(!place.outside.join("outside.txt").exists());
}

#[test]
fn landlock_alone_confines_writes_where_bwrap_cannot_run() {
    let (started, output, place) = probe_writes("landlock", Some("bwrap"), "required");
    assert_eq!(started["confinement"], "Landlock");
    assert_eq!(output, "inside-ok\noutside-refused\ngit-refused\ntmp-ok\n");
    // Its private TMPDIR went with it.
    let spool: Vec<_> = std::fs::read_dir(place.ws.join("spool"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(spool.iter().all(|name| name.ends_with(".log")), "{spool:?}");
    assert!(place.ws.join("src/inside.txt").exists());
    assert!(!place.outside.join("outside.txt").exists());
}

#[test]
fn bubblewrap_alone_confines_writes_without_landlock() {
    let (started, output, place) = probe_writes("bwrap", Some("landlock"), "required");
    assert_eq!(started["confinement"], "bubblewrap");
    assert_eq!(output, "inside-ok\noutside-refused\ngit-refused\ntmp-ok\n");
    assert!(!place.outside.join("outside.txt").exists());
}

#[test]
fn a_host_without_a_sandbox_refuses_required_and_says_why_for_best_effort() {
    let place = Place::new("none");
    let mut helper = Helper::start(Some("1"));
    let refused = helper
        .call("exec_start", place.start_args(&["/bin/true"], "required"))
        .unwrap_err();
    assert!(
        refused.contains("required") && refused.contains("MEVEDEL_REMOTE_NO_SANDBOX"),
        "{refused}"
    );
    drop(helper);
    let (started, output, place) = probe_writes("besteffort", Some("1"), "best-effort");
    assert_eq!(started["confined"], false);
    assert_eq!(started["confinement"], Value::Null);
    assert!(
        started["unconfined_reason"]
            .as_str()
            .unwrap()
            .contains("MEVEDEL_REMOTE_NO_SANDBOX=1"),
        "{started}"
    );
    assert_eq!(output, "inside-ok\ntmp-ok\n");
    assert!(place.outside.join("outside.txt").exists());
}
