//! The agent's process: started through [`crate::process::global`] like
//! every child of the module (its own process group, the parent-death
//! signal, no inherited descriptors, reaped as soon as it exits), with
//! pipes for its three streams.
//!
//! Stopping kills more than the leader: `claude-agent-acp` is a node
//! process whose Claude Code CLI is a child of its own, and killing only
//! node leaves that child running. [`Child::stop`] signals the whole
//! group and every descendant found under the leader (one that left the
//! group with `setsid` included), TERM and then KILL, and waits until
//! none is left, so no agent process outlives its connection.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::AsyncBufReadExt;
use tokio::net::unix::pipe;
use tokio::sync::watch;

use crate::error::{Error, ErrorKind, Result};
use crate::process::{self, Program, StderrTail};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn acp_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Exec, message)
}

/// A running agent process.
pub struct Child {
    /// The leader's pid, which is also its process group.
    pub pid: i32,
    /// How the leader ended, once it is reaped.
    exit: watch::Receiver<Option<String>>,
    pub stderr: Arc<StderrTail>,
    /// Whether its stderr reached end of file.
    stderr_closed: watch::Receiver<bool>,
}

/// The pipes to and from the agent.
pub struct Pipes {
    pub stdin: pipe::Sender,
    pub stdout: pipe::Receiver,
}

impl Child {
    /// Start ARGV in CWD with exactly ENV, its stderr read line by line
    /// into STDERR. Call on the shared runtime.
    pub async fn start(
        argv: Vec<OsString>,
        env: Vec<(OsString, OsString)>,
        cwd: PathBuf,
        stderr: Arc<StderrTail>,
    ) -> Result<(Child, Pipes)> {
        let pipe = |what: &str| {
            std::io::pipe()
                .map_err(|e| Error::io(ErrorKind::Exec, &format!("cannot open {what}"), &e))
        };
        let (child_in, to_child) = pipe("the agent's stdin")?;
        let (from_child, child_out) = pipe("the agent's stdout")?;
        let (from_stderr, child_err) = pipe("the agent's stderr")?;
        let mut program = Program::new(argv);
        program.env = Some(env);
        program.cwd = Some(cwd);
        program.stdin = Some(OwnedFd::from(child_in));
        program.stdout = Some(OwnedFd::from(child_out));
        program.stderr = Some(OwnedFd::from(child_err));
        let (exit_tx, exit_rx) = watch::channel(None);
        let on_exit: process::OnExit = Box::new(move |status| {
            let _ = exit_tx.send(Some(process::describe_exit(status)));
        });
        // Owner::start waits for the spawner thread: keep it off the
        // runtime's few workers. The Program (and so the child's ends of
        // the pipes) drops there.
        let started =
            tokio::task::spawn_blocking(move || process::global().start(program, Some(on_exit)))
                .await
                .map_err(|e| acp_error(e.to_string()))??;
        let (closed_tx, closed_rx) = watch::channel(false);
        let child = Child {
            pid: started.pid as i32,
            exit: exit_rx,
            stderr: Arc::clone(&stderr),
            stderr_closed: closed_rx,
        };
        let io =
            |e: std::io::Error| Error::io(ErrorKind::Exec, "cannot watch the agent's pipes", &e);
        let pipes = Pipes {
            stdin: pipe::Sender::from_owned_fd(OwnedFd::from(to_child)).map_err(io)?,
            stdout: pipe::Receiver::from_owned_fd(OwnedFd::from(from_child)).map_err(io)?,
        };
        let errors = pipe::Receiver::from_owned_fd(OwnedFd::from(from_stderr)).map_err(io)?;
        tokio::spawn(async move {
            // Bytes, not `lines()`: one invalid UTF-8 byte must not stop the
            // reading and leave the agent blocked on a full pipe.
            let mut reader = tokio::io::BufReader::new(errors);
            let mut line = Vec::new();
            while matches!(reader.read_until(b'\n', &mut line).await, Ok(n) if n > 0) {
                let text = String::from_utf8_lossy(&line);
                stderr.push(None, text.trim_end_matches(['\n', '\r']));
                line.clear();
            }
            let _ = closed_tx.send(true);
        });
        Ok((child, pipes))
    }

    /// How the leader ended, if it has.
    pub fn exit(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// How the leader ended, waiting up to LIMIT for it to be reaped.
    pub async fn exit_within(&self, limit: Duration) -> Option<String> {
        let mut exit = self.exit.clone();
        let _ = tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await;
        self.exit()
    }

    /// Wait up to LIMIT for the last stderr lines of an exited agent to
    /// be read (a descendant still holding the pipe keeps it open).
    pub async fn stderr_settled(&self, limit: Duration) {
        let mut closed = self.stderr_closed.clone();
        let _ = tokio::time::timeout(limit, closed.wait_for(|&closed| closed)).await;
    }

    /// Wait until the leader is reaped; how it ended.
    pub async fn exited(&self) -> String {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(how) => how.clone().unwrap_or_default(),
            Err(_) => "exited".to_string(),
        }
    }

    /// Whether any process of the agent is still alive: a member of its
    /// group or a descendant of its leader.
    pub fn alive(&self) -> bool {
        process::group_alive(self.pid) || !descendants(self.pid).is_empty()
    }

    /// Kill every process of the agent now, without waiting: the last
    /// resort of a connection dropped without being stopped. Call it
    /// before closing the connection (see [`Child::strays`]).
    pub fn kill_now(&self) {
        let strays = descendants(self.pid);
        process::signal(self.pid, libc::SIGKILL);
        kill_each(&strays, libc::SIGKILL);
    }

    /// The live descendants of the agent, to find before its connection
    /// closes or a turn is cancelled: an agent that exits then (at end
    /// of input, say) orphans them, and an orphan is reparented and
    /// cannot be traced to the leader afterwards.
    pub fn strays(&self) -> Vec<i32> {
        descendants(self.pid)
    }

    /// Stop every process of the agent: SIGTERM to its group and
    /// descendants (those found now and those of FOUND, from
    /// [`Child::strays`], still alive), SIGKILL to what is left after
    /// GRACE, then wait (bounded) until the leader is reaped and nothing
    /// is left.
    pub async fn stop(&self, found: Vec<i32>, grace: Duration) {
        // The descendants are found before any dies, for the same reason.
        let mut strays = descendants(self.pid);
        for pid in found {
            if live(pid) && !strays.contains(&pid) {
                strays.push(pid);
            }
        }
        process::signal(self.pid, libc::SIGTERM);
        kill_each(&strays, libc::SIGTERM);
        let gone =
            |strays: &[i32]| !process::group_alive(self.pid) && !strays.iter().any(|&p| live(p));
        let deadline = tokio::time::Instant::now() + grace;
        while !gone(&strays) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if !gone(&strays) {
            process::signal(self.pid, libc::SIGKILL);
            kill_each(&strays, libc::SIGKILL);
        }
        self.exit_within(Duration::from_secs(5)).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while !gone(&strays) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn kill_each(pids: &[i32], signal: i32) {
    for &pid in pids {
        // SAFETY: signals a process found under our own child; ESRCH is harmless.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// (pid, ppid, state) of every process, from /proc.
fn processes() -> Vec<(i32, i32, char)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // Fields after "(comm)": state ppid ...
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
            let state = fields.next()?.chars().next()?;
            let ppid = fields.next()?.parse::<i32>().ok()?;
            Some((pid, ppid, state))
        })
        .collect()
}

/// Whether PID is alive and not a zombie.
pub fn live(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

/// The live (non-zombie) descendants of ROOT, whatever their group.
pub fn descendants(root: i32) -> Vec<i32> {
    let procs = processes();
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid, state) in &procs {
            if ppid == parent && !found.contains(&pid) && pid != root {
                frontier.push(pid);
                if state != 'Z' {
                    found.push(pid);
                }
            }
        }
    }
    found
}
