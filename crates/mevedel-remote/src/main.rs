//! `mevedel-remote`: the helper mevedel runs on a remote host, so
//! searches and reads happen where the files are and only their results
//! cross the connection.
//!
//! # Protocol
//!
//! One helper per host, started by Emacs through TRAMP; it speaks
//! line-delimited JSON on stdin and stdout (one object per line, UTF-8,
//! no embedded newlines), chosen because both ends parse it natively
//! (`json-parse-string`, `serde_json`) and a line is a whole message.
//!
//! - On start it writes `{"hello":{"protocol":1,"version":V,"arch":A}}`.
//! - A request is `{"id":N,"op":OP,"args":{...}}`; each runs on a thread
//!   of its own, so answers come back in any order:
//!   `{"id":N,"ok":{...}}` or `{"id":N,"error":{"kind":K,"message":M}}`
//!   (K is the area of the local core's error, e.g. `search`).
//! - `cancel` `{"target":N}` stops request N's search (it answers with
//!   the partial result, as a local search cut short does).
//! - Stdin closing ends the helper.
//!
//! Operations ([`ops`]), with host-side paths:
//! - `glob` `{path, display, pattern, timeout_ms, new_files}` and
//!   `grep` `{path, display, options, timeout_ms, unsaved}` answer
//!   `{text, total, shown, partial}` exactly as the local core does;
//! - `read` `{path, display, offset, limit, char_offset}` answers one
//!   page `{text}`; with `bytes: true` and `start`/`length` it answers
//!   `{data (base64), size}` for media;
//! - `write` `{path, data (base64), expect_hash}` writes beside the file
//!   and renames over it, keeping its mode, and answers `{hash, size}`;
//! - `write_all` `{files: [{path, data (base64) | delete: true,
//!   expect_hash, mode}]}` changes several files as one ([`batch`]):
//!   every `expect_hash` (the SHA-256 the file must still have; `""`: it
//!   must not exist) is checked first, then every content written
//!   beside its target, then all renamed over their targets and the
//!   deletions done; any failure undoes what was done and the error
//!   names the file and why. It answers `{files: [{path, hash, size} or
//!   {path, deleted}]}`;
//! - `exec_start` `{argv | command, path (the directory), env, spool_dir,
//!   sandbox, writable, stream, tty}` runs `argv` as it is (else the
//!   shell `command`, `bash -c`) with `env` ("NAME=VALUE" strings) over
//!   the helper's environment, in a process group of its own, output
//!   (stdout and stderr merged) spooled on the host, confined with
//!   `writable` the only writable roots by bubblewrap and Landlock, or
//!   either alone where the host has one ([`confine`]; `sandbox`:
//!   `required`, the default, refuses when the host has none;
//!   `best-effort` runs unconfined and says why; `off`). `tty: true` is
//!   refused: remote commands get no terminal. It answers `{run, spool,
//!   confined, unconfined_reason, confinement}` (`confinement`: e.g.
//!   "bubblewrap and Landlock", "Landlock", or null). With `stream:
//!   true` the helper then pushes, on lines without an id,
//!   `{"event":"exec_output","run":R,"data":BASE64}` for each chunk of
//!   output from offset 0, in order, then one
//!   `{"event":"exec_exit","run":R,"exit_code":N,"signal":NAME}` after
//!   the last output (`signal` e.g. "TERM", or null);
//! - `exec_poll` `{run, offset, yield_time_ms}` waits up to that long
//!   for it to end and answers `{output, next_offset, size, exited,
//!   exit_code, signal}` (`signal` a number); `exec_stdin` `{run, data,
//!   close}`; `exec_signal` `{run, signal}` sends `TERM`, `KILL`, `INT`,
//!   `HUP` (or another standard name) to its group and answers `{sent}`,
//!   false once it ended; `exec_stop` `{run}` ends the group (SIGTERM,
//!   then SIGKILL) and answers as `exec_poll`. Closing stdin kills every
//!   group still running.
//!
//! `mevedel-remote --confine ARGS -- COMMAND` is how the helper starts a
//! confined command: it applies the Landlock rules of ARGS (a
//! `HelperArgs` command line, as the local sandbox helper takes) to
//! itself and becomes COMMAND. For tests, `MEVEDEL_REMOTE_NO_SANDBOX` in
//! the helper's environment makes it act as on a host without bwrap and
//! Landlock (`1`), without bwrap (`bwrap`) or without Landlock
//! (`landlock`).

mod batch;
mod confine;
mod exec;
mod ops;

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

/// The protocol's version, said in the hello line.
const PROTOCOL: u32 = 1;

/// Writes whole lines to stdout, one message at a time.
#[derive(Clone)]
pub struct Out(Arc<Mutex<std::io::Stdout>>);

impl Out {
    fn send(&self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let mut out = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // A closed stdout means Emacs is gone; stdin's end stops us.
        let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
    }
}

type Running = Arc<Mutex<HashMap<u64, Arc<AtomicBool>>>>;

fn main() {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "--confine") {
        confine::enter(args.collect());
    }
    let out = Out(Arc::new(Mutex::new(std::io::stdout())));
    out.send(&json!({"hello": {
        "protocol": PROTOCOL,
        "version": env!("CARGO_PKG_VERSION"),
        "arch": std::env::consts::ARCH,
    }}));
    let running: Running = Arc::default();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        dispatch(&line, &out, &running);
    }
    exec::stop_all();
}

/// Answer the request on LINE, on a thread of its own.
fn dispatch(line: &str, out: &Out, running: &Running) {
    let request: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            out.send(&json!({"error": {"kind": "internal",
                                       "message": format!("unreadable request: {e}")}}));
            return;
        }
    };
    let id = request.get("id").and_then(Value::as_u64).unwrap_or(0);
    let op = request
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let args = request.get("args").cloned().unwrap_or(Value::Null);
    if op == "cancel" {
        let target = args.get("target").and_then(Value::as_u64).unwrap_or(0);
        let flag = running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&target)
            .cloned();
        if let Some(flag) = &flag {
            flag.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        out.send(&json!({"id": id, "ok": {"cancelled": flag.is_some()}}));
        return;
    }
    let cancel = Arc::new(AtomicBool::new(false));
    running
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, cancel.clone());
    let (out, running) = (out.clone(), running.clone());
    std::thread::spawn(move || {
        let answer = std::panic::catch_unwind(|| ops::run(&op, &args, cancel))
            .unwrap_or_else(|p| Err(mevedel_search::Error::from_panic(&op, p.as_ref())));
        running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        let streamed = match &answer {
            Ok(v) if op == "exec_start" && args.get("stream") == Some(&Value::Bool(true)) => {
                v.get("run").and_then(Value::as_u64)
            }
            _ => None,
        };
        out.send(&match answer {
            Ok(v) => json!({"id": id, "ok": v}),
            Err(e) => json!({"id": id, "error": {"kind": e.kind.area(), "message": e.message}}),
        });
        // Its events follow its start's answer, never precede it.
        if let Some(run) = streamed {
            exec::open_stream(run, out);
        }
    });
}
