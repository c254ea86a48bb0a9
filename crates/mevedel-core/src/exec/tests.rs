//! Managed execution end to end, with real processes: yield and poll,
//! PTY input and Ctrl-C, the output cap, the live-process cap, FIFO
//! lanes, mailbox delivery, Monitor, and teardown checked through /proc.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::execution::{Exec, Kind, Phase, Spec};
use super::manager::{self, global};
use super::relay;
use crate::datum::Datum;
use crate::sandbox::launch::Request;
use crate::sandbox::policy::Mode;
use crate::store::{Message, Store};

fn spec(session: &str, command: &str) -> Spec {
    Spec {
        session: session.into(),
        owner: "/root".into(),
        command: command.into(),
        description: Some("test".into()),
        kind: Kind::Bash,
        cwd: None,
        tty: false,
        timeout_ms: None,
        yield_ms: None,
        artifact_dir: None,
        mailbox: None,
        tool_use_id: None,
        sandbox: None,
        environment: None,
        env: Vec::new(),
        login_prelude: None,
        output_cap: None,
        stop_grace_ms: None,
        progress: true,
        relay: false,
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    crate::runtime::get().unwrap().block_on(f)
}

fn start(s: Spec) -> Arc<Exec> {
    global().start(s).expect("start")
}

fn observe(exec: &Arc<Exec>, ms: u64) -> Datum {
    block_on(manager::observe(
        Arc::clone(exec),
        Duration::from_millis(ms),
        |_| {},
    ))
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
        .map(|kv| &kv[1])
        .unwrap_or(&Datum::Nil)
}

fn text(d: &Datum) -> &str {
    match d {
        Datum::Str(s) => s,
        _ => "",
    }
}

fn int(d: &Datum) -> i64 {
    match d {
        Datum::Int(n) => *n,
        _ => i64::MIN,
    }
}

fn unread(db: &std::path::Path) -> crate::Result<Vec<Message>> {
    Store::shared(db)?.mailbox_unread("/root")
}

/// Wait until DB holds N MONITOR_TERMINAL records (published after the
/// phase changes).
fn wait_terminals(db: &std::path::Path, n: usize) -> bool {
    wait_until(Duration::from_secs(10), || {
        unread(db).is_ok_and(|r| r.iter().filter(|m| m.kind == "MONITOR_TERMINAL").count() >= n)
    })
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mevedel-exec-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Live (non-zombie) processes whose process group is PGID.
fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let mut f = rest.split_whitespace();
            let state = f.next().unwrap_or("Z");
            let pgrp = f.nth(1).and_then(|p| p.parse::<i32>().ok());
            state != "Z" && pgrp == Some(pgid)
        })
        .collect()
}

fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

#[test]
fn foreground_command_returns_output_and_facts() {
    let exec = start(spec("fg", "echo hi; echo err >&2"));
    let obs = observe(&exec, 10_000);
    assert_eq!(text(get(&obs, "state")), "completed");
    assert_eq!(text(get(&obs, "output")), "hi\nerr\n");
    let facts = get(&obs, "facts");
    assert_eq!(text(get(facts, "termination")), "exit");
    assert_eq!(text(get(facts, "outcome")), "success");
    assert_eq!(int(get(facts, "exit-code")), 0);
    assert_eq!(int(get(facts, "bytes")), 7);
    // Delivered foreground results are forgotten at once.
    assert!(global().find("fg", &exec.id, Some("/root")).is_err());
}

/// SPEC under a sandbox policy whose mode is off (run directly, said so).
fn unconfined(mut s: Spec) -> Spec {
    s.sandbox = Some(Request {
        mode: Mode::Off,
        ..Request::default()
    });
    s
}

#[test]
fn unconfined_run_reports_exit_output_and_boundary() {
    let exec = start(unconfined(spec("direct", "echo out; echo err >&2; exit 3")));
    let obs = observe(&exec, 10_000);
    assert_eq!(text(get(&obs, "output")), "out\nerr\n");
    let facts = get(&obs, "facts");
    assert_eq!(int(get(facts, "exit-code")), 3);
    assert_eq!(text(get(facts, "termination")), "exit");
    let sandbox = get(facts, "sandbox");
    assert_eq!(get(sandbox, "boundary"), &Datum::Symbol("off".into()));
    assert_eq!(get(sandbox, "start"), &Datum::Symbol("started".into()));
    assert_eq!(get(sandbox, "network"), &Datum::Symbol("granted".into()));
}

#[test]
fn shell_that_cannot_be_executed_is_an_exec_failure() {
    let mut s = unconfined(spec("exec-failed", "echo never"));
    s.environment = Some(vec!["PATH=/nonexistent-bin".into()]);
    let exec = start(s);
    let obs = observe(&exec, 10_000);
    let facts = get(&obs, "facts");
    assert_eq!(text(get(facts, "termination")), "launch-failed");
    assert!(
        text(get(facts, "error")).contains("bash was not found in PATH"),
        "{facts:?}"
    );
    assert_eq!(
        get(get(facts, "sandbox"), "start"),
        &Datum::Symbol("exec-failed".into())
    );
    assert_eq!(text(get(&obs, "output")), "");
}

#[test]
fn small_output_cap_stops_the_group_at_once() {
    let mut s = unconfined(spec("small-cap", "head -c 5000 /dev/zero; sleep 30"));
    s.output_cap = Some(100);
    let started = Instant::now();
    let exec = start(s);
    let obs = observe(&exec, 10_000);
    let facts = get(&obs, "facts");
    assert_eq!(text(get(facts, "termination")), "output-limit");
    assert_eq!(int(get(facts, "bytes")), 100);
    assert_eq!(text(get(&obs, "output")).len(), 100);
    assert!(started.elapsed() < Duration::from_secs(5));
    let pgid = exec.state().pid().unwrap_or(0);
    assert!(pgid > 0 && group_members(pgid).is_empty());
}

#[test]
fn yield_then_poll_then_completion() {
    let exec = start(spec("yield", "echo first; sleep 0.6; echo second"));
    let obs = observe(&exec, 250);
    assert_eq!(text(get(&obs, "state")), "running");
    assert_eq!(text(get(&obs, "output")), "first\n");
    assert_eq!(get(&obs, "facts"), &Datum::Nil);
    let id = text(get(&obs, "id")).to_string();
    // Only the owner finds it, and it is listed as yielded.
    assert!(global().find("yield", &id, Some("/root/other")).is_err());
    let listed = global().list("yield", Some("/root"));
    assert_eq!(listed.len(), 1);
    assert_eq!(text(get(&listed[0], "id")), id);
    let again = global().find("yield", &id, Some("/root")).unwrap();
    let obs = observe(&again, 5_000);
    assert_eq!(text(get(&obs, "state")), "completed");
    // Only the newly unread output.
    assert_eq!(text(get(&obs, "output")), "second\n");
    assert_eq!(text(get(get(&obs, "facts"), "outcome")), "success");
    // Still pollable, with the same terminal observation.
    let repeat = observe(&again, 100);
    assert_eq!(repeat, obs);
    assert!(global().list("yield", Some("/root")).is_empty());
}

#[test]
fn pty_input_is_echoed_and_read() {
    let mut s = spec("pty", "read x; echo got $x");
    s.tty = true;
    let exec = start(s);
    let obs = observe(&exec, 300);
    assert_eq!(text(get(&obs, "state")), "running");
    manager::write_input(&exec, "hello\n").unwrap();
    let obs = observe(&exec, 5_000);
    assert_eq!(text(get(&obs, "state")), "completed");
    let out = text(get(&obs, "output"));
    assert!(out.contains("got hello"), "{out:?}");
    assert_eq!(get(get(&obs, "facts"), "tty"), &Datum::T);
}

#[test]
fn ctrl_c_through_the_pty_interrupts() {
    let mut s = spec("ctrlc", "echo ready; sleep 30; echo not-reached");
    s.tty = true;
    let exec = start(s);
    let obs = observe(&exec, 300);
    assert_eq!(text(get(&obs, "state")), "running");
    let started = Instant::now();
    manager::write_input(&exec, "\u{3}").unwrap();
    let obs = observe(&exec, 5_000);
    assert!(started.elapsed() < Duration::from_secs(5));
    let facts = get(&obs, "facts");
    assert_eq!(text(get(&obs, "state")), "completed");
    assert!(!text(get(&obs, "output")).contains("not-reached"));
    // bash reports the interrupted job as 130 or dies of SIGINT itself.
    assert!(
        int(get(facts, "exit-code")) == 130 || int(get(facts, "signal")) == 2,
        "{facts:?}"
    );
}

#[test]
fn pipe_mode_refuses_input_but_takes_ctrl_c() {
    let exec = start(spec("pipe-input", "sleep 30"));
    let _ = observe(&exec, 300);
    let err = manager::write_input(&exec, "x\n").err();
    assert!(err.is_some_and(|e| e.message.contains("tty=true")));
    manager::write_input(&exec, "\u{3}").unwrap();
    let obs = observe(&exec, 5_000);
    assert_eq!(text(get(&obs, "state")), "completed");
}

#[test]
fn output_cap_settles_with_output_limit() {
    let exec = start(spec("cap", "yes 0123456789abcdef | head -c 80000000"));
    let obs = observe(&exec, 20_000);
    let facts = get(&obs, "facts");
    assert_eq!(text(get(facts, "termination")), "output-limit");
    assert_eq!(text(get(facts, "outcome")), "failure");
    assert_eq!(int(get(facts, "bytes")), 64 * 1024 * 1024);
    // The preview is bounded and exact about what it left out.
    assert_eq!(get(&obs, "preview"), &Datum::T);
    let out = text(get(&obs, "output"));
    assert!(out.len() < 10_000);
    let omitted = int(get(&obs, "omitted-chars"));
    assert!(omitted > 60_000_000 && out.contains(&format!("{omitted} characters omitted")));
}

#[test]
fn background_operator_is_refused_before_spawn() {
    let err = global().start(spec("amp", "sleep 1 & echo hi")).err();
    assert!(err.is_some_and(|e| e.message.contains('&')));
    assert!(global().list("amp", None).is_empty());
}

#[test]
fn sixty_fifth_process_is_refused_and_teardown_leaves_none() {
    let session = "cap65";
    let execs: Vec<Arc<Exec>> = (0..manager::MAX_LIVE)
        .map(|_| start(spec(session, "sleep 30")))
        .collect();
    let err = global().start(spec(session, "echo one-too-many")).err();
    assert!(err.is_some_and(|e| e.message.contains("64 managed processes")));
    // Nothing was evicted.
    assert_eq!(global().list(session, None).len(), manager::MAX_LIVE);
    assert!(wait_until(Duration::from_secs(10), || execs
        .iter()
        .all(|e| e.state().pid().is_some())));
    let pids: Vec<i32> = execs.iter().filter_map(|e| e.state().pid()).collect();
    assert_eq!(global().teardown(session), manager::MAX_LIVE);
    assert!(wait_until(Duration::from_secs(5), || pids
        .iter()
        .all(|&p| group_members(p).is_empty())));
}

#[test]
fn teardown_stops_grandchildren_and_nohup() {
    let dir = temp_dir("grandchild");
    let session = "teardown";
    let forker = start(spec(
        session,
        &format!("sh -c 'sleep 300 & echo $! > {0}/gc; wait'", dir.display()),
    ));
    // Yielding releases the exclusive lane for the next command.
    let _ = observe(&forker, 200);
    let hup = start(spec(session, "nohup sleep 300"));
    // The shell creates the file before it writes the pid: wait for the
    // pid itself, not for the file.
    let read_gc = || {
        std::fs::read_to_string(dir.join("gc"))
            .unwrap_or_default()
            .trim()
            .parse::<i32>()
            .unwrap_or(0)
    };
    assert!(wait_until(Duration::from_secs(10), || read_gc() > 0
        && hup.state().pid().is_some()));
    let gc = read_gc();
    let groups = [
        forker.state().pid().unwrap_or(0),
        hup.state().pid().unwrap_or(0),
    ];
    assert!(gc > 0 && groups.iter().all(|&g| !group_members(g).is_empty()));
    assert!(group_members(groups[0]).contains(&gc));
    assert_eq!(global().teardown(session), 2);
    assert!(wait_until(Duration::from_secs(5), || groups
        .iter()
        .all(|&g| group_members(g).is_empty())));
    // The forked grandchild itself is gone (or a zombie awaiting its reaper).
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(format!("/proc/{gc}/stat")).map_or(true, |s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    }));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn natural_exit_cleans_up_leftover_group_members() {
    let dir = temp_dir("leftover");
    let exec = start(spec(
        "leftover",
        &format!(
            "sh -c 'sleep 300 >/dev/null 2>&1 & echo $! > {0}/gc'",
            dir.display()
        ),
    ));
    let obs = observe(&exec, 10_000);
    assert_eq!(text(get(&obs, "state")), "completed");
    let gc: i32 = std::fs::read_to_string(dir.join("gc"))
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(gc > 0);
    assert!(wait_until(Duration::from_secs(3), || {
        std::fs::read_to_string(format!("/proc/{gc}/stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true)
    }));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kills PID (a process a test let escape) when dropped, so a failing
/// assertion leaves nothing behind.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0 > 0 {
            // SAFETY: signalling a process this test started.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
}

/// Whether PID is gone (or a zombie awaiting its reaper).
fn gone(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

#[test]
fn escaped_process_holding_stdout_does_not_keep_it_running() {
    // The shell exits at once; a process that left the group (setsid)
    // keeps the output pipe open. With progress events off nothing else
    // wakes the driver, so only the drain deadline after the group is
    // gone can settle it.
    let dir = temp_dir("escaped");
    let mut s = spec(
        "escaped",
        &format!(
            "bash -c 'setsid sh -c \"echo \\$\\$ > {0}/pid; exec sleep 30\" &'; \
             while [ ! -s {0}/pid ]; do sleep 0.01; done; echo done; exit 3",
            dir.display()
        ),
    );
    s.progress = false;
    let started = Instant::now();
    let exec = start(s);
    let obs = observe(&exec, 10_000);
    let elapsed = started.elapsed();
    let escaped: i32 = std::fs::read_to_string(dir.join("pid"))
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0);
    let guard = KillOnDrop(escaped);
    if text(get(&obs, "state")) != "completed" {
        let _ = block_on(manager::stop_for_model(Arc::clone(&exec)));
    }
    assert!(escaped > 0, "{obs:?}");
    assert_eq!(text(get(&obs, "state")), "completed", "after {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    let facts = get(&obs, "facts");
    assert_eq!(text(get(facts, "termination")), "exit");
    assert_eq!(int(get(facts, "exit-code")), 3);
    assert!(text(get(&obs, "output")).contains("done"), "{obs:?}");
    // Unconfined, a process that left the group on purpose is not
    // stopped (docs/tools/execution.md, Limits): it outlives settlement.
    assert!(!gone(escaped), "the escaped process was stopped");
    drop(guard);
    assert!(wait_until(Duration::from_secs(3), || gone(escaped)));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Start and end times (ns) a command printed with `date +%s%N`.
fn span(obs: &Datum) -> (u128, u128) {
    let stamps: Vec<u128> = text(get(obs, "output"))
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(stamps.len(), 2, "{obs:?}");
    (stamps[0], stamps[1])
}

#[test]
fn fifo_lanes_reader_writer_reader() {
    let session = "lanes";
    let reader1 = start(spec(session, "date +%s%N; sleep 1; date +%s%N"));
    let writer = start(spec(
        session,
        "touch /dev/null; date +%s%N; sleep 0.3; date +%s%N",
    ));
    let reader2 = start(spec(session, "date +%s%N; sleep 0.1; date +%s%N"));
    assert!(reader1.analysis.read_only() && reader2.analysis.read_only());
    assert!(!writer.analysis.read_only());
    // reader2 would fit beside reader1, but the writer is waiting.
    assert_eq!(reader2.state().phase, Phase::Queued);
    let r1 = span(&observe(&reader1, 20_000));
    let w = span(&observe(&writer, 20_000));
    let r2 = span(&observe(&reader2, 20_000));
    assert!(w.0 >= r1.1, "writer started before reader1 ended");
    assert!(r2.0 >= w.1, "reader2 started before the writer ended");
}

#[test]
fn yielding_releases_the_exclusive_lane() {
    let session = "release";
    let long = start(spec(session, "touch /dev/null; sleep 2"));
    let next = start(spec(session, "touch /dev/null; echo next"));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(next.state().phase, Phase::Queued);
    let obs = observe(&long, 250);
    assert_eq!(text(get(&obs, "state")), "running");
    let obs = observe(&next, 5_000);
    assert_eq!(text(get(&obs, "output")), "next\n");
    let _ = global().teardown(session);
}

#[test]
fn stop_terms_then_kills_and_settles() {
    // Bash hands its last command the process (exec), so the leader is
    // `sh`, which ignores TERM: it is killed after the interval, and the
    // record settles only after that.
    let mut s = spec(
        "stop",
        "sh -c 'trap \"\" TERM; echo stubborn; while :; do sleep 0.05; done'",
    );
    s.stop_grace_ms = Some(300);
    let exec = start(s);
    let mut seen = String::new();
    assert!(wait_until(Duration::from_secs(10), || {
        seen.push_str(text(get(&observe(&exec, 100), "output")));
        seen.contains("stubborn")
    }));
    let pgid = exec.state().pid().unwrap_or(0);
    let started = Instant::now();
    let obs = block_on(manager::stop_for_model(Arc::clone(&exec)));
    let facts = get(&obs, "facts");
    assert_eq!(text(get(facts, "termination")), "stopped");
    assert_eq!(text(get(facts, "outcome")), "stopped");
    assert_eq!(int(get(facts, "signal")), 9);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(group_members(pgid).is_empty());
}

#[test]
fn queued_execution_stops_without_starting() {
    let session = "queued-stop";
    let first = start(spec(session, "touch /dev/null; sleep 1"));
    let queued = start(spec(session, "touch /dev/null; echo never"));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(queued.state().phase, Phase::Queued);
    assert!(manager::write_input(&queued, "\u{3}").is_err());
    let obs = block_on(manager::stop_for_model(Arc::clone(&queued)));
    assert_eq!(text(get(get(&obs, "facts"), "termination")), "stopped");
    assert!(queued.state().pid().is_none());
    let _ = observe(&first, 5_000);
}

#[test]
fn pipeline_facts_reach_the_terminal_result() {
    let exec = start(spec("pipefacts", "false | true"));
    let obs = observe(&exec, 5_000);
    let facts = get(&obs, "facts");
    assert_eq!(int(get(facts, "exit-code")), 0);
    assert_eq!(text(get(facts, "outcome")), "failure");
    assert_eq!(
        get(facts, "pipeline-exit-codes"),
        &Datum::List(vec![Datum::Int(1), Datum::Int(0)])
    );
    assert_eq!(
        get(facts, "pipeline-failed-stages"),
        &Datum::List(vec![Datum::Int(1)])
    );
    assert_eq!(text(get(facts, "pipeline-classification")), "classified");
    let exec = start(spec("pipefacts", "grep -q zzz /dev/null"));
    let obs = observe(&exec, 5_000);
    assert_eq!(text(get(get(&obs, "facts"), "outcome")), "no-match");
}

#[test]
fn yielded_completion_goes_to_the_mailbox_once() {
    let dir = temp_dir("mail");
    let db = dir.join("session.sqlite");
    let mut s = spec("mail", "echo background; sleep 0.4; echo done");
    s.mailbox = Some(db.clone());
    s.artifact_dir = Some(dir.join("tool-results"));
    let exec = start(s);
    let obs = observe(&exec, 100);
    assert_eq!(text(get(&obs, "state")), "running");
    // The record is published after the phase changes (under the
    // observation lock), so wait for the record itself.
    assert!(wait_until(Duration::from_secs(5), || unread(&db)
        .is_ok_and(|r| !r.is_empty())));
    let records = unread(&db).unwrap();
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!(r.kind, "EXECUTION");
    let attr = |k: &str| {
        r.attrs
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    };
    assert_eq!(attr("execution_id"), exec.id);
    assert_eq!(attr("outcome"), "success");
    assert_eq!(attr("termination"), "exit");
    assert_eq!(attr("exit_code"), "0");
    assert_eq!(attr("description"), "test");
    assert_eq!(r.payload, "done\n");
    // Polling returns the terminal result and reads the record.
    let obs = observe(&exec, 100);
    assert_eq!(text(get(&obs, "state")), "completed");
    assert!(unread(&db).is_ok_and(|r| r.is_empty()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn foreground_completion_and_stops_do_not_mail() {
    let dir = temp_dir("nomail");
    let db = dir.join("session.sqlite");
    let mut s = spec("nomail", "echo now");
    s.mailbox = Some(db.clone());
    let exec = start(s.clone());
    let _ = observe(&exec, 5_000);
    s.command = "sleep 30".into();
    let exec = start(s);
    let _ = observe(&exec, 100);
    let _ = block_on(manager::stop_for_model(Arc::clone(&exec)));
    assert!(unread(&db).is_ok_and(|r| r.is_empty()));
    let _ = std::fs::remove_dir_all(&dir);
}

fn monitor_spec(session: &str, command: &str, db: &std::path::Path) -> Spec {
    let mut s = spec(session, command);
    s.kind = Kind::Monitor;
    s.description = Some("watch".into());
    s.mailbox = Some(db.to_path_buf());
    s
}

#[test]
fn monitor_lines_become_records_then_one_terminal() {
    let dir = temp_dir("monitor");
    let db = dir.join("session.sqlite");
    let exec = start(monitor_spec(
        "monitor",
        "printf 'one\\r\\ntwo\\n'; echo noise >&2; printf partial",
        &db,
    ));
    let first = block_on(manager::observe_launch(
        Arc::clone(&exec),
        Duration::from_secs(5),
    ));
    assert_eq!(text(get(&first, "output")), "");
    assert!(wait_terminals(&db, 1));
    let records = unread(&db).unwrap();
    let kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["MONITOR", "MONITOR", "MONITOR", "MONITOR_TERMINAL"]);
    let bodies: Vec<&str> = records.iter().take(3).map(|r| r.payload.as_str()).collect();
    assert_eq!(bodies, ["one", "two", "partial"]);
    let terminal = &records[3];
    let attr = |k: &str| {
        terminal
            .attrs
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(attr("event_count"), "3");
    assert_eq!(attr("termination"), "exit");
    assert_eq!(attr("exit_code"), "0");
    assert_eq!(attr("outcome"), "success");
    // The spool holds stderr too.
    let obs = observe(&exec, 100);
    assert!(text(get(&obs, "output")).contains("noise"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn monitor_flood_stops_it() {
    let dir = temp_dir("flood");
    let db = dir.join("session.sqlite");
    let exec = start(monitor_spec(
        "flood",
        "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.001; done",
        &db,
    ));
    assert!(wait_terminals(&db, 1));
    assert_eq!(exec.state().phase, Phase::Completed);
    let records = unread(&db).unwrap();
    let terminals: Vec<_> = records
        .iter()
        .filter(|r| r.kind == "MONITOR_TERMINAL")
        .collect();
    assert_eq!(terminals.len(), 1);
    assert!(
        terminals[0]
            .attrs
            .contains(&("termination".to_string(), "flood".to_string()))
    );
    assert!(terminals[0].payload.contains("tighter filter"));
    // The watcher is gone, and no second terminal record follows.
    let pgid = exec.state().pid().unwrap_or(0);
    assert!(pgid > 0 && group_members(pgid).is_empty());
    std::thread::sleep(Duration::from_millis(500));
    let records = unread(&db).unwrap();
    assert_eq!(
        records
            .iter()
            .filter(|r| r.kind == "MONITOR_TERMINAL")
            .count(),
        1
    );
    assert_eq!(
        records.last().map(|r| r.kind.as_str()),
        Some("MONITOR_TERMINAL")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn monitor_flood_by_unread_bytes_stops_it() {
    let dir = temp_dir("flood-bytes");
    let db = dir.join("session.sqlite");
    // 60 lines of 1,500 characters, 20 a second: far fewer than 100
    // lines, but more than 64 KiB of unread events after ~44 lines.
    let exec = start(monitor_spec(
        "flood-bytes",
        "for i in $(seq 1 60); do printf '%01500d\\n' $i; sleep 0.05; done; sleep 30",
        &db,
    ));
    assert!(wait_terminals(&db, 1));
    assert_eq!(exec.state().phase, Phase::Completed);
    let records = unread(&db).unwrap();
    let lines = records.iter().filter(|r| r.kind == "MONITOR").count();
    let terminals: Vec<_> = records
        .iter()
        .filter(|r| r.kind == "MONITOR_TERMINAL")
        .collect();
    assert_eq!(terminals.len(), 1);
    assert!(
        terminals[0]
            .attrs
            .contains(&("termination".to_string(), "flood".to_string())),
        "{:?}",
        terminals[0].attrs
    );
    assert!((40..60).contains(&lines), "{lines} line records");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn monitor_timeout_and_stop_notices() {
    let dir = temp_dir("montime");
    let db = dir.join("session.sqlite");
    let mut s = monitor_spec("montime", "sleep 30", &db);
    s.timeout_ms = Some(300);
    let exec = start(s);
    assert!(wait_terminals(&db, 1));
    assert_eq!(exec.state().phase, Phase::Completed);
    let s2 = monitor_spec("montime", "echo a; sleep 30", &db);
    let stopped = start(s2);
    std::thread::sleep(Duration::from_millis(100));
    assert!(manager::stop_for_user(&stopped));
    assert!(wait_terminals(&db, 2));
    let records = unread(&db).unwrap();
    let terms: Vec<_> = records
        .iter()
        .filter(|r| r.kind == "MONITOR_TERMINAL")
        .collect();
    assert_eq!(terms.len(), 2);
    assert!(terms[0].payload.contains("timeout"));
    assert!(terms[1].payload.contains("was stopped"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn monitor_rules_are_enforced() {
    let db = std::env::temp_dir().join("unused.sqlite");
    let mut s = monitor_spec("monrules", "echo x", &db);
    s.owner = "/root/worker".into();
    assert!(global().start(s).is_err());
    let mut s = monitor_spec("monrules", "echo x", &db);
    s.description = Some("  ".into());
    assert!(global().start(s).is_err());
}

#[test]
fn kept_output_is_named_by_its_artifact_address() {
    let dir = temp_dir("artifact-address");
    let mut s = spec("artifact-address", "seq 1 100000");
    std::fs::create_dir_all(dir.join("tool-results")).unwrap();
    s.artifact_dir = Some(dir.join("tool-results"));
    let exec = start(s);
    let obs = observe(&exec, 10_000);
    let out = text(get(&obs, "output"));
    let artifact = text(get(&obs, "artifact"));
    let name = std::path::Path::new(artifact)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(
        artifact.starts_with(&dir.to_string_lossy().into_owned()),
        "{artifact}"
    );
    assert!(
        out.contains(&format!(
            "; full output: artifact://tool-results/{name} ...]"
        )),
        "{out}"
    );
    assert!(!out.contains(&dir.to_string_lossy().into_owned()), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

// Relayed executions: no local child; the test plays Lisp, reading the
// `exec-relay` events and reporting back.

fn relayed(session: &str, command: &str) -> Arc<Exec> {
    crate::events::global().attach(Box::new(std::io::sink()));
    let mut s = spec(session, command);
    s.relay = true;
    s.stop_grace_ms = Some(200);
    start(s)
}

/// The next `exec-relay` event of SESSION with OP, waiting up to 5 s.
/// Other tests' events go back in the queue.
fn relay_event(session: &str, op: &str) -> Datum {
    let mut found = None;
    let got = wait_until(Duration::from_secs(5), || {
        let events = crate::events::global().drain();
        for event in events {
            let mine = found.is_none()
                && event.kind == "exec-relay"
                && text(get(&event.data, "session")) == session
                && text(get(&event.data, "op")) == op;
            if mine {
                found = Some(event.data);
            } else {
                crate::events::global().push(event);
            }
        }
        found.is_some()
    });
    assert!(got, "no {op} relay event for {session}");
    found.unwrap_or(Datum::Nil)
}

fn strings(d: &Datum) -> Vec<String> {
    match d {
        Datum::List(items) => items.iter().map(|i| text(i).to_owned()).collect(),
        _ => Vec::new(),
    }
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn relay_launches_elsewhere_and_spools_reported_chunks() {
    let session = "relay-run";
    let exec = relayed(session, "printf 'a|b' > f; false | true");
    let launch = relay_event(session, "launch");
    assert_eq!(text(get(&launch, "id")), exec.id);
    // The command line a local run starts, without the local-only
    // PIPESTATUS snapshot.
    assert_eq!(
        strings(get(&launch, "argv")),
        ["bash", "-lc", "printf 'a|b' > f; false | true"]
    );
    assert!(strings(get(&launch, "env")).contains(&"NO_COLOR=1".to_owned()));
    assert_eq!(get(&launch, "tty"), &Datum::Nil);
    assert!(exec.state().pid().is_none());
    let id = exec.id.clone();
    assert!(relay::started(session, &id, "unconfined", Some("no bwrap".into())).unwrap());
    assert!(relay::output(session, &id, &b64(b"first line\nhalf ")).unwrap());
    assert!(relay::output(session, &id, &b64(b"\xff\xfe bytes\n")).unwrap());
    assert!(relay::exited(session, &id, Some(3), None).unwrap());
    // The bytes themselves reached the spool (removed once delivered).
    assert!(wait_until(Duration::from_secs(5), || exec.state().phase
        == Phase::Completed));
    let spool = std::fs::read(exec.state().spool_path.clone()).unwrap_or_default();
    assert!(spool.windows(2).any(|w| w == b"\xff\xfe"));
    let obs = observe(&exec, 5_000);
    assert_eq!(text(get(&obs, "state")), "completed");
    let out = text(get(&obs, "output"));
    assert!(out.starts_with("first line\nhalf "), "{out:?}");
    assert!(out.contains(" bytes\n"), "{out:?}");
    assert_eq!(int(get(&obs, "bytes")), 25);
    let facts = get(&obs, "facts");
    assert_eq!(int(get(facts, "exit-code")), 3);
    assert_eq!(text(get(facts, "termination")), "exit");
    let sandbox = get(facts, "sandbox");
    assert_eq!(
        get(sandbox, "boundary"),
        &Datum::Symbol("unconfined".into())
    );
    assert_eq!(text(get(sandbox, "disclosure")), "no bwrap");
    // A settled execution no longer listens.
    assert!(!relay::output(session, &id, &b64(b"late")).unwrap());
}

#[test]
fn relay_stop_sends_term_then_kill_and_settles_on_the_exit() {
    let session = "relay-stop";
    let exec = relayed(session, "sleep 100");
    let _ = relay_event(session, "launch");
    let id = exec.id.clone();
    relay::started(session, &id, "bwrap-landlock", None).unwrap();
    assert!(exec.request_stop(
        super::execution::Termination::Stopped,
        super::execution::StopBy::Model
    ));
    assert_eq!(text(get(&relay_event(session, "signal"), "signal")), "TERM");
    let term = Instant::now();
    assert_eq!(text(get(&relay_event(session, "signal"), "signal")), "KILL");
    assert!(term.elapsed() >= Duration::from_millis(150));
    assert_eq!(exec.state().phase, Phase::Stopping);
    relay::exited(session, &id, None, Some("KILL")).unwrap();
    let obs = observe(&exec, 5_000);
    let facts = get(&obs, "facts");
    assert_eq!(text(get(facts, "termination")), "stopped");
    assert_eq!(int(get(facts, "signal")), 9);
}

#[test]
fn relay_input_goes_out_as_events() {
    let session = "relay-input";
    let mut s = spec(session, "cat");
    s.relay = true;
    s.tty = true;
    crate::events::global().attach(Box::new(std::io::sink()));
    let tty = start(s);
    let launch = relay_event(session, "launch");
    assert_eq!(get(&launch, "tty"), &Datum::T);
    manager::write_input(&tty, "hello\n").unwrap();
    assert_eq!(text(get(&relay_event(session, "stdin"), "data")), "hello\n");
    let pipe = relayed(session, "cat");
    let _ = relay_event(session, "launch");
    assert!(manager::write_input(&pipe, "text").is_err());
    manager::write_input(&pipe, "\u{3}").unwrap();
    assert_eq!(text(get(&relay_event(session, "signal"), "signal")), "INT");
    relay::exited(session, &tty.id, Some(0), None).unwrap();
    relay::exited(session, &pipe.id, None, Some("SIGINT")).unwrap();
    let facts = get(&observe(&pipe, 5_000), "facts").clone();
    assert_eq!(int(get(&facts, "signal")), 2);
    assert_eq!(text(get(&facts, "termination")), "signal");
}

#[test]
fn relay_failures_settle_as_launch_failed_or_lost() {
    let session = "relay-fail";
    let refused = relayed(session, "touch x");
    let _ = relay_event(session, "launch");
    relay::failed(session, &refused.id, "host h cannot confine commands").unwrap();
    let facts = get(&observe(&refused, 5_000), "facts").clone();
    assert_eq!(text(get(&facts, "termination")), "launch-failed");
    assert_eq!(text(get(&facts, "error")), "host h cannot confine commands");
    let lost = relayed(session, "touch y");
    let _ = relay_event(session, "launch");
    relay::started(session, &lost.id, "off", None).unwrap();
    relay::output(session, &lost.id, &b64(b"partial\n")).unwrap();
    relay::failed(session, &lost.id, "lost the connection to h").unwrap();
    let obs = observe(&lost, 5_000);
    assert_eq!(text(get(&obs, "output")), "partial\n");
    let facts = get(&obs, "facts");
    assert_eq!(text(get(facts, "termination")), "lost");
    assert_eq!(text(get(facts, "error")), "lost the connection to h");
    // Bad reports name what is wrong.
    let local = start(spec(session, "true"));
    assert!(!relay::output(session, &local.id, "AA==").unwrap());
    let other = relayed(session, "true");
    let _ = relay_event(session, "launch");
    assert!(relay::output(session, &other.id, "not base64!").is_err());
    assert!(relay::exited(session, &other.id, None, Some("NOPE")).is_err());
    assert!(relay::started(session, &other.id, "walls", None).is_err());
    relay::exited(session, &other.id, Some(0), None).unwrap();
    let _ = observe(&local, 5_000);
    let _ = observe(&other, 5_000);
}

#[test]
fn relay_teardown_still_signals_the_remote_group() {
    let session = "relay-teardown";
    let exec = relayed(session, "sleep 100");
    let _ = relay_event(session, "launch");
    relay::started(session, &exec.id, "bwrap", None).unwrap();
    assert_eq!(global().teardown(session), 1);
    assert_eq!(text(get(&relay_event(session, "signal"), "signal")), "TERM");
    assert!(relay::exited(session, &exec.id, None, Some("TERM")).unwrap());
    assert!(wait_until(Duration::from_secs(5), || {
        exec.state().phase == Phase::Completed
    }));
    assert_eq!(
        exec.state().facts.as_ref().map(|f| f.termination),
        Some(super::execution::Termination::Teardown)
    );
}

#[test]
fn a_relay_silent_after_its_kill_settles_as_lost() {
    let session = "relay-silent";
    let exec = relayed(session, "sleep 100");
    let _ = relay_event(session, "launch");
    relay::started(session, &exec.id, "bwrap", None).unwrap();
    let started = Instant::now();
    let obs = block_on(manager::stop_for_model(Arc::clone(&exec)));
    let facts = get(&obs, "facts");
    assert_eq!(text(get(facts, "termination")), "lost");
    assert!(text(get(facts, "error")).contains("not reported"));
    assert!(started.elapsed() >= super::child::RELAY_KILL_WAIT);
}
