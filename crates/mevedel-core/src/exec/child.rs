//! Where an execution's command runs, as its driver and the controls
//! reach it: a local process group, or a relay (see [`super::relay`])
//! whose process runs elsewhere and which Lisp carries. Stopping,
//! killing, Ctrl-C and terminal input are the same requests for both;
//! only how they travel differs.

use std::fs::File;
use std::time::Duration;

use super::relay;
use crate::error::{Error, ErrorKind, Result};
use crate::process;

/// How long a relayed command may stay silent after its KILL.
pub const RELAY_KILL_WAIT: Duration = Duration::from_secs(5);

/// The running command of one execution.
#[derive(Debug, Clone)]
pub enum Child {
    /// A local process group led by `pid` (bwrap, the sandbox helper or
    /// the shell). `inner`: bwrap runs the command in a session of its
    /// own, whose group takes TERM and Ctrl-C.
    Group { pid: i32, inner: bool },
    /// A process elsewhere: requests go out as `exec-relay` events.
    Relay { session: String, id: String },
}

fn exec_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Exec, message)
}

impl Child {
    /// The local group leader, if the command runs here.
    pub fn pid(&self) -> Option<i32> {
        match self {
            Child::Group { pid, .. } => Some(*pid),
            Child::Relay { .. } => None,
        }
    }

    /// Ask the command to end (TERM). Inside bwrap the command's own
    /// group gets it, so the command may clean up and bwrap then ends by
    /// itself; the KILL that may follow goes to the whole group.
    pub fn terminate(&self) {
        match self {
            Child::Group { pid, inner } => {
                let group = if *inner {
                    process::inner_group(*pid).unwrap_or(*pid)
                } else {
                    *pid
                };
                process::signal(group, libc::SIGTERM);
            }
            Child::Relay { session, id } => relay::signal(session, id, "TERM"),
        }
    }

    /// TERM to what is left of the group once the shell has exited.
    pub fn terminate_leftovers(&self) {
        match self {
            Child::Group { pid, .. } => process::signal(*pid, libc::SIGTERM),
            Child::Relay { session, id } => relay::signal(session, id, "TERM"),
        }
    }

    /// KILL the whole group.
    pub fn kill(&self) {
        match self {
            Child::Group { pid, .. } => process::signal(*pid, libc::SIGKILL),
            Child::Relay { session, id } => relay::signal(session, id, "KILL"),
        }
    }

    /// Whether members of the group remain after the shell exited. A
    /// relayed group is its host's to clean up: its exit report comes
    /// once the command is done.
    pub fn remains(&self) -> bool {
        match self {
            Child::Group { pid, .. } => process::group_alive(*pid),
            Child::Relay { .. } => false,
        }
    }

    /// How long after its KILL the command may still not report its
    /// end: a local reaper always reports; a relay whose reports stopped
    /// coming (its carrier gone) is given up as lost after this.
    pub fn kill_wait(&self) -> Option<Duration> {
        match self {
            Child::Group { .. } => None,
            Child::Relay { .. } => Some(RELAY_KILL_WAIT),
        }
    }

    /// Ctrl-C for a pipe-mode command. bwrap dies of a signal sent to
    /// its own group (taking the command with it); Ctrl-C goes across
    /// its session boundary, once, to the command's group instead.
    pub fn interrupt(&self) -> Result<()> {
        match self {
            Child::Group { pid, inner } => {
                let group = if *inner {
                    process::inner_group(*pid).ok_or_else(|| {
                        exec_error("the command has not started inside its sandbox")
                    })?
                } else {
                    *pid
                };
                process::signal(group, libc::SIGINT);
            }
            Child::Relay { session, id } => relay::signal(session, id, "INT"),
        }
        Ok(())
    }

    /// Type CHARS into the command's terminal (TERMINAL: the controller
    /// side of a local PTY).
    pub fn type_in(&self, terminal: Option<&File>, chars: &str) -> Result<()> {
        match self {
            Child::Group { .. } => {
                let Some(input) = terminal.and_then(|f| f.try_clone().ok()) else {
                    return Err(exec_error("the terminal of this execution is closed"));
                };
                write_all_patiently(&input, chars.as_bytes())
            }
            Child::Relay { session, id } => {
                relay::input(session, id, chars);
                Ok(())
            }
        }
    }
}

/// Write BYTES to a non-blocking terminal, retrying briefly when its
/// input queue is full.
fn write_all_patiently(file: &File, mut bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::time::Instant;
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut file = file;
    while !bytes.is_empty() {
        match file.write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                return Err(Error::io(
                    ErrorKind::Exec,
                    "cannot write to the terminal",
                    &e,
                ));
            }
        }
    }
    Ok(())
}
