//! Relayed executions: the core keeps the execution (admission, spool,
//! yields and observations, monitor lines, stops, mail) while its
//! command runs elsewhere — on a remote workspace's host — and Lisp
//! carries it there.
//!
//! Out, as `exec-relay` events (`:op` "launch", "signal" or "stdin"):
//! the shell command line to run with its directory, controlled
//! environment and terminal mode; the signals of stops and Ctrl-C; a
//! terminal's input. In, through [`started`], [`output`], [`exited`]
//! and [`failed`]: the boundary it started under, output chunks in
//! order, then one exit or one failure. Output lands in the
//! execution's local spool, so everything read from it works as for a
//! local run.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Mutex, OnceLock};

use tokio::sync::mpsc;

use super::driver;
use super::execution::{Exec, lock};
use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::events::{self, Event};
use crate::sandbox::launch::{Facts, Start};
use crate::sandbox::policy::Boundary;

/// What Lisp reports about a relayed command, in order.
#[derive(Debug)]
pub enum Report {
    /// It started, under this boundary.
    Started(Facts),
    Output(Vec<u8>),
    Exit(ExitStatus),
    /// It could not start, or was lost (e.g. with its connection).
    Failed(String),
}

/// Each relayed execution's driver, by session and id.
type Feeds = HashMap<(String, String), mpsc::UnboundedSender<Report>>;

/// Where relayed executions' reports go, from launch to settlement.
/// Apart from the manager's registry: a torn-down session's commands
/// still report their ends.
fn feeds() -> &'static Mutex<Feeds> {
    static FEEDS: OnceLock<Mutex<Feeds>> = OnceLock::new();
    FEEDS.get_or_init(Mutex::default)
}

/// EXEC settled: reports about it are no longer taken.
pub fn forget(exec: &Exec) {
    if exec.spec.relay {
        lock(feeds()).remove(&(exec.spec.session.clone(), exec.id.clone()));
    }
}

fn exec_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Exec, message)
}

/// Push an `exec-relay` event for execution ID of SESSION. Even a
/// torn-down session's get out: its command still runs elsewhere.
fn publish(session: &str, id: &str, op: &str, rest: Vec<(&str, Datum)>) {
    let mut pairs = vec![
        ("session", Datum::str(session)),
        ("id", Datum::str(id)),
        ("op", Datum::str(op)),
    ];
    pairs.extend(rest);
    events::global().push(Event::new("exec-relay", Datum::plist(pairs)));
}

/// Ask for EXEC's command to be run elsewhere: the shell command line a
/// local run would start, its working directory, the controlled
/// environment entries (the host keeps its own environment otherwise),
/// its terminal mode and kind. Returns the receiving end of its feed.
pub fn launch(exec: &Exec) -> mpsc::UnboundedReceiver<Report> {
    let (tx, rx) = mpsc::unbounded_channel();
    lock(feeds()).insert((exec.spec.session.clone(), exec.id.clone()), tx);
    let strs = |v: Vec<String>| Datum::List(v.into_iter().map(Datum::Str).collect());
    let spec = &exec.spec;
    publish(
        &spec.session,
        &exec.id,
        "launch",
        vec![
            ("argv", strs(driver::shell_argv(exec))),
            (
                "cwd",
                Datum::opt_str(spec.cwd.as_ref().map(|c| c.to_string_lossy().into_owned())),
            ),
            ("env", strs(driver::controlled_env(spec))),
            ("tty", Datum::bool(spec.tty)),
            ("kind", Datum::str(spec.kind.name())),
        ],
    );
    rx
}

/// Send signal NAME ("TERM", "KILL", "INT") to the relayed group.
pub fn signal(session: &str, id: &str, name: &str) {
    publish(session, id, "signal", vec![("signal", Datum::str(name))]);
}

/// Type CHARS into the relayed command's terminal.
pub fn input(session: &str, id: &str, chars: &str) {
    publish(session, id, "stdin", vec![("data", Datum::str(chars))]);
}

/// Relayed execution ID of SESSION started under BOUNDARY, named as
/// the local sandbox's facts name theirs ("bwrap-landlock",
/// "landlock", "unconfined", "off", ...); DISCLOSURE says what it
/// lacks. False when its driver no longer listens.
pub fn started(
    session: &str,
    id: &str,
    boundary: &str,
    disclosure: Option<String>,
) -> Result<bool> {
    let facts = started_facts(boundary, disclosure)?;
    report(session, id, Report::Started(facts))
}

/// Output of relayed execution ID of SESSION: DATA is base64, so bytes
/// that are not UTF-8 reach the spool as they were.
pub fn output(session: &str, id: &str, data: &str) -> Result<bool> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim_end())
        .map_err(|e| exec_error(format!("output of execution {id} is not base64: {e}")))?;
    report(session, id, Report::Output(bytes))
}

/// Relayed execution ID of SESSION exited with CODE, or died of SIGNAL.
pub fn exited(session: &str, id: &str, code: Option<i64>, signal: Option<&str>) -> Result<bool> {
    let status = exit_status(code, signal)?;
    report(session, id, Report::Exit(status))
}

/// Relayed execution ID of SESSION could not start, or was lost, WHY.
pub fn failed(session: &str, id: &str, why: &str) -> Result<bool> {
    report(session, id, Report::Failed(why.to_owned()))
}

/// Hand REPORT to the driver of relayed execution ID of SESSION. False
/// when none listens: it settled, or it is no relayed execution.
fn report(session: &str, id: &str, report: Report) -> Result<bool> {
    let feed = lock(feeds())
        .get(&(session.to_owned(), id.to_owned()))
        .cloned();
    Ok(feed.is_some_and(|feed| feed.send(report).is_ok()))
}

/// The boundary a relayed command started under: BOUNDARY names it as
/// the local sandbox's facts do ("bwrap-landlock", "unconfined", ...);
/// DISCLOSURE says what it lacks.
fn started_facts(boundary: &str, disclosure: Option<String>) -> Result<Facts> {
    let boundary = Boundary::from_symbol(boundary)
        .ok_or_else(|| exec_error(format!("unknown sandbox boundary {boundary:?}")))?;
    Ok(Facts {
        boundary,
        start: Start::Started,
        disclosure,
        landlock: None,
        sockets: None,
        evaluated: Vec::new(),
        network: false,
        extra_writes: 0,
        extra_reads: 0,
    })
}

/// The status of a command that exited with CODE, or died of the
/// signal NAME ("TERM", "SIGKILL", or a number).
fn exit_status(code: Option<i64>, signal: Option<&str>) -> Result<ExitStatus> {
    match (code, signal) {
        (_, Some(name)) => {
            let bare = name.strip_prefix("SIG").unwrap_or(name);
            let number = match bare {
                "HUP" => libc::SIGHUP,
                "INT" => libc::SIGINT,
                "QUIT" => libc::SIGQUIT,
                "ABRT" => libc::SIGABRT,
                "KILL" => libc::SIGKILL,
                "SEGV" => libc::SIGSEGV,
                "PIPE" => libc::SIGPIPE,
                "ALRM" => libc::SIGALRM,
                "TERM" => libc::SIGTERM,
                "USR1" => libc::SIGUSR1,
                "USR2" => libc::SIGUSR2,
                _ => bare
                    .parse::<i32>()
                    .ok()
                    .filter(|n| (1..65).contains(n))
                    .ok_or_else(|| exec_error(format!("unknown signal {name:?}")))?,
            };
            Ok(ExitStatus::from_raw(number))
        }
        (Some(code @ 0..256), None) => Ok(ExitStatus::from_raw((code as i32) << 8)),
        (Some(code), None) => Err(exec_error(format!("exit code {code} is out of range"))),
        (None, None) => Err(exec_error("an exit needs an exit code or a signal")),
    }
}
