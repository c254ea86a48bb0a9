//! The agent's terminals (`terminal/*`), run as mevedel's managed
//! executions: the command Lisp allowed, in the sandbox it chose, with
//! the execution's spool as the terminal's output.
//!
//! Lisp answers `terminal/create` with an execution spec (the command is
//! judged as a Bash call, confined as one); [`create`] starts it and the
//! execution's id is the terminal's. It counts as yielded from the start
//! (the background panel and /ps list it, it holds no scheduler lane)
//! but has no mailbox: its end wakes nobody, since the agent asked for
//! it and waits on it itself. Its spool is kept past the execution's
//! retirement so `terminal/output` answers until `terminal/release`.
//!
//! `terminal/output`, `terminal/wait_for_exit`, `terminal/kill` and
//! `terminal/release` are answered here without Lisp: they only read
//! the spool, wait for the execution or stop it.
//!
//! What it does not do: decide whether a command may run or how it is
//! confined (Lisp's permission policy and sandbox request), or render
//! anything.

use std::collections::HashMap;
use std::fs::File;
use std::sync::{Arc, Mutex, OnceLock};

use agent_client_protocol::ErrorCode;

use super::child::lock;
use super::delegate::Reply;
use super::schema;
use crate::error::Result;
use crate::exec::execution::{Exec, Phase, Spec, StopBy, Termination};
use crate::exec::{manager, spool};
use crate::runtime;

/// One terminal: its execution and the agent's output byte limit.
struct Terminal {
    exec: Arc<Exec>,
    limit: Option<u64>,
}

/// Terminals by (agent key, terminal id).
type Terminals = Mutex<HashMap<(String, String), Arc<Terminal>>>;

fn terminals() -> &'static Terminals {
    static TERMINALS: OnceLock<Terminals> = OnceLock::new();
    TERMINALS.get_or_init(Default::default)
}

/// Start SPEC as a terminal of agent AGENT whose output keeps at most
/// LIMIT bytes; return its id.
pub fn create(agent: &str, spec: Spec, limit: Option<u64>) -> Result<String> {
    let exec = manager::global().start(spec)?;
    {
        let mut st = exec.state();
        st.yielded = true;
        st.kept = true;
    }
    let id = exec.id.clone();
    // Launched, it gives its lane back as a yielded command does.
    let launched = Arc::clone(&exec);
    runtime::spawn(async move {
        let mut rx = launched.phase_tx.subscribe();
        let _ = rx.wait_for(|p| *p != Phase::Queued).await;
        launched.state().lease = None;
    })?;
    lock(terminals()).insert(
        (agent.to_string(), id.clone()),
        Arc::new(Terminal { exec, limit }),
    );
    Ok(id)
}

fn find(agent: &str, id: &str) -> Option<Arc<Terminal>> {
    lock(terminals())
        .get(&(agent.to_string(), id.to_string()))
        .cloned()
}

fn unknown<T: serde::Serialize>(reply: Reply<T>, id: &str) {
    reply.fail(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("no terminal {id} (never created, or released)"),
    );
}

/// How a signal number is named in an exit status.
fn signal_name(n: i32) -> String {
    match n {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        3 => "SIGQUIT".into(),
        6 => "SIGABRT".into(),
        9 => "SIGKILL".into(),
        13 => "SIGPIPE".into(),
        15 => "SIGTERM".into(),
        n => format!("SIG{n}"),
    }
}

/// EXEC's exit status once it completed.
fn exit_status(exec: &Exec) -> Option<schema::TerminalExitStatus> {
    let st = exec.state();
    let facts = st.facts.as_ref()?;
    Some(
        schema::TerminalExitStatus::new()
            .exit_code(facts.exit_code.and_then(|c| u32::try_from(c).ok()))
            .signal(facts.signal.map(signal_name)),
    )
}

/// The last LIMIT bytes of TERMINAL's output (all of it without a
/// limit), starting on a character boundary, and whether any was cut.
fn tail(terminal: &Terminal) -> (String, bool) {
    let (path, written) = {
        let st = terminal.exec.state();
        (st.spool_path.clone(), st.written)
    };
    let Ok(file) = File::open(&path) else {
        return (String::new(), false);
    };
    let end = spool::complete_end(&file, 0, written);
    let mut start = terminal.limit.map_or(0, |limit| end.saturating_sub(limit));
    let mut bytes = spool::read_range(&file, start, end);
    if start > 0 {
        let skip = bytes.iter().take_while(|b| (**b & 0xC0) == 0x80).count();
        bytes.drain(..skip);
        start += skip as u64;
    }
    (String::from_utf8_lossy(&bytes).into_owned(), start > 0)
}

/// Answer `terminal/output` for terminal ID of AGENT.
pub fn output(agent: &str, id: &str, reply: Reply<schema::TerminalOutputResponse>) {
    let Some(terminal) = find(agent, id) else {
        return unknown(reply, id);
    };
    let (text, truncated) = tail(&terminal);
    reply.ok(schema::TerminalOutputResponse::new(text, truncated)
        .exit_status(exit_status(&terminal.exec)));
}

/// Answer `terminal/wait_for_exit` once terminal ID of AGENT ended.
pub fn wait(agent: &str, id: &str, reply: Reply<schema::WaitForTerminalExitResponse>) {
    let Some(terminal) = find(agent, id) else {
        return unknown(reply, id);
    };
    // Without a runtime the reply is dropped, which answers an error.
    let _ = runtime::spawn(async move {
        let mut rx = terminal.exec.phase_tx.subscribe();
        let _ = rx.wait_for(|p| *p == Phase::Completed).await;
        let status = exit_status(&terminal.exec).unwrap_or_default();
        reply.ok(schema::WaitForTerminalExitResponse::new(status));
    });
}

/// Answer `terminal/kill`: stop terminal ID of AGENT, keeping its output.
pub fn kill(agent: &str, id: &str, reply: Reply<schema::KillTerminalResponse>) {
    let Some(terminal) = find(agent, id) else {
        return unknown(reply, id);
    };
    terminal
        .exec
        .request_stop(Termination::Stopped, StopBy::Model);
    reply.ok(schema::KillTerminalResponse::new());
}

/// Stop TERMINAL if it still runs and delete its spool once it ended.
fn discard(terminal: Arc<Terminal>) {
    terminal
        .exec
        .request_stop(Termination::Stopped, StopBy::Model);
    let _ = runtime::spawn(async move {
        let mut rx = terminal.exec.phase_tx.subscribe();
        let _ = rx.wait_for(|p| *p == Phase::Completed).await;
        let path = terminal.exec.state().spool_path.clone();
        let _ = std::fs::remove_file(path);
    });
}

/// Answer `terminal/release`: stop terminal ID of AGENT and forget it.
pub fn release(agent: &str, id: &str, reply: Reply<schema::ReleaseTerminalResponse>) {
    let Some(terminal) = lock(terminals()).remove(&(agent.to_string(), id.to_string())) else {
        return unknown(reply, id);
    };
    discard(terminal);
    reply.ok(schema::ReleaseTerminalResponse::new());
}

/// Release every terminal of AGENT (it stopped).
pub fn release_all(agent: &str) {
    let mine: Vec<Arc<Terminal>> = {
        let mut all = lock(terminals());
        let keys: Vec<_> = all.keys().filter(|(a, _)| a == agent).cloned().collect();
        keys.iter().filter_map(|key| all.remove(key)).collect()
    };
    mine.into_iter().for_each(discard);
}
