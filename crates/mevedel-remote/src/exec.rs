//! Commands run on the remote host: each in its own process group, its
//! output (stdout and stderr on one pipe, so in order) read by a thread
//! of the helper as it comes, kept in a spool file on the host and, for
//! a streamed run, pushed to Emacs as events. A caller polls from an
//! offset, writes to its stdin, signals and stops it as it does a local
//! run.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{PipeReader, Read as _, Seek, SeekFrom, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use mevedel_search::error::{Error, ErrorKind};
use serde_json::{Value, json};

use crate::Out;

/// Most output bytes one poll answers; the rest stays in the spool.
const POLL_CAP: u64 = 256 * 1024;

/// How long a stopped group has between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Once the command ended, how long its output may stay quiet before it
/// counts as complete (a background process may still hold the pipe),
/// and how long it is read at most.
const DRAIN_QUIET_MS: i32 = 100;
const DRAIN_MAX: Duration = Duration::from_secs(1);

/// The signals a caller may name, with their numbers.
const SIGNALS: [(&str, i32); 15] = [
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
];

/// How a run ended.
#[derive(Clone, Copy)]
struct Ended {
    code: Option<i32>,
    signal: Option<i32>,
}

struct Run {
    pgid: i32,
    /// The group leader is bwrap: signals other than KILL go to the
    /// processes inside it (see [`signal`]).
    in_bwrap: bool,
    /// The last signal sent to it (0: none).
    signalled: AtomicI32,
    spool: PathBuf,
    stdin: Mutex<Option<ChildStdin>>,
    /// Set once the command was reaped: its group may be gone.
    reaped: AtomicBool,
    /// Set once the command ended and all its output is in the spool.
    ended: Mutex<Option<Ended>>,
    ended_cv: Condvar,
    /// For a streamed run, until its start was answered: where to send
    /// its events (its reader waits for this before the first one).
    opener: Mutex<Option<Sender<Out>>>,
}

static RUNS: LazyLock<Mutex<HashMap<u64, Arc<Run>>>> = LazyLock::new(Mutex::default);

fn fail(message: String) -> Error {
    Error::new(ErrorKind::Exec, message)
}

fn run_of(id: u64) -> Result<Arc<Run>, Error> {
    RUNS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&id)
        .cloned()
        .ok_or_else(|| fail(format!("no remote execution {id}")))
}

/// How a command is confined: the mode (`required`, `best-effort`,
/// `off`) and the writable roots.
pub struct Sandbox {
    pub mode: String,
    pub writable: Vec<PathBuf>,
}

/// One command to start.
pub struct Start {
    /// The program and its arguments, run as they are.
    pub argv: Vec<OsString>,
    /// Where it runs.
    pub cwd: PathBuf,
    /// Variables set for it, over the helper's own environment.
    pub env: Vec<(OsString, OsString)>,
    pub spool_dir: PathBuf,
    pub sandbox: Sandbox,
    /// Push its output and exit as events once its start is answered
    /// (see [`open_stream`]).
    pub stream: bool,
}

/// The argv that runs the shell COMMAND (`bash -c`, else `sh -c`).
pub fn shell(command: &str) -> Vec<OsString> {
    let shell = if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    vec![shell.into(), "-c".into(), command.into()]
}

/// Start START; answer `{run, spool, confined, unconfined_reason,
/// confinement}`.
pub fn start(start: Start) -> Result<Value, Error> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if start.argv.is_empty() {
        return Err(fail("`argv` must name a program".into()));
    }
    std::fs::create_dir_all(&start.spool_dir).map_err(|e| {
        fail(format!(
            "cannot create the spool directory {}: {e}",
            start.spool_dir.display()
        ))
    })?;
    let base = format!("run-{}-{id}", std::process::id());
    let spool = start.spool_dir.join(format!("{base}.log"));
    let (exited_rx, exited_tx) =
        std::io::pipe().map_err(|e| fail(format!("cannot create the run's exit pipe: {e}")))?;
    let launch = crate::confine::launch(
        &start.sandbox.mode,
        &start.sandbox.writable,
        &start.cwd,
        start.argv,
        &start.spool_dir.join(format!("{base}.tmp")),
    )
    .map_err(|why| Error::new(ErrorKind::Sandbox, why))?;
    let scratch = launch.scratch.clone();
    let spool_file = std::fs::File::create(&spool);
    let (argv, cwd, env, tmp) = (
        launch.argv.clone(),
        start.cwd.clone(),
        start.env,
        scratch.clone(),
    );
    let spawned = match spool_file {
        Ok(file) => on_spawner(move || spawn(&argv, &cwd, &env, tmp.as_ref()))
            .map(|(child, output)| (child, output, file))
            .map_err(|e| format!("cannot run the command in {}: {e}", start.cwd.display())),
        Err(e) => Err(format!("cannot create {}: {e}", spool.display())),
    };
    let (mut child, output, spool_file) = match spawned {
        Ok(spawned) => spawned,
        Err(why) => {
            if let Some(dir) = &scratch {
                let _ = std::fs::remove_dir_all(dir);
            }
            return Err(fail(why));
        }
    };
    let (opener, events) = if start.stream {
        let (tx, rx) = std::sync::mpsc::channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    let run = Arc::new(Run {
        pgid: child.id() as i32,
        in_bwrap: launch.in_bwrap,
        signalled: AtomicI32::new(0),
        spool: spool.clone(),
        stdin: Mutex::new(child.stdin.take()),
        reaped: AtomicBool::new(false),
        ended: Mutex::new(None),
        ended_cv: Condvar::new(),
        opener: Mutex::new(opener),
    });
    RUNS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, run.clone());
    let reader = std::thread::spawn(move || read_output(id, output, spool_file, exited_rx, events));
    std::thread::spawn(move || {
        let status = child.wait().ok();
        run.reaped.store(true, Ordering::SeqCst);
        drop(exited_tx);
        let sink = reader.join().ok().flatten();
        let ended = ended_as(&run, status);
        *run.ended.lock().unwrap_or_else(PoisonError::into_inner) = Some(ended);
        run.ended_cv.notify_all();
        if let Some(dir) = &scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(out) = sink {
            out.send(&json!({"event": "exec_exit", "run": id,
                             "exit_code": ended.code,
                             "signal": ended.signal.map(signal_name)}));
        }
    });
    Ok(json!({
        "run": id,
        "spool": spool.to_string_lossy(),
        "confined": launch.confinement.is_some(),
        "unconfined_reason": launch.unconfined,
        "confinement": launch.confinement,
    }))
}

/// How RUN ended, from its STATUS. bwrap reports a command that died of
/// signal N as exit code 128+N: when that N is the signal the run was
/// sent, it is said as that signal, as for an unconfined run.
fn ended_as(run: &Run, status: Option<ExitStatus>) -> Ended {
    let code = status.and_then(|s| s.code());
    let sent = run.signalled.load(Ordering::SeqCst);
    if run.in_bwrap && sent > 0 && code == Some(128 + sent) {
        return Ended {
            code: None,
            signal: Some(sent),
        };
    }
    Ended {
        code,
        signal: status.and_then(|s| s.signal()),
    }
}

/// A job for the spawner thread.
type Job = Box<dyn FnOnce() + Send>;

/// Run JOB on the one thread that starts every command, and answer what
/// it answers. bwrap's `--die-with-parent` kills it when the *thread*
/// that started it ends, so none may be started by a request's thread.
fn on_spawner<T: Send + 'static>(
    job: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    static SPAWNER: LazyLock<Mutex<Sender<Job>>> = LazyLock::new(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::spawn(move || {
            for job in rx {
                job();
            }
        });
        Mutex::new(tx)
    });
    let (reply, answer) = std::sync::mpsc::channel();
    let job: Job = Box::new(move || {
        let _ = reply.send(job());
    });
    // The spawner lives as long as the helper: it cannot have gone.
    let _ = SPAWNER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send(job);
    answer
        .recv()
        .map_err(|_| std::io::Error::other("the helper's spawner thread ended"))?
}

/// Spawn ARGV in CWD with ENV in a process group of its own, stdout and
/// stderr on one pipe; answer the child and the pipe's reading end.
fn spawn(
    argv: &[OsString],
    cwd: &std::path::Path,
    env: &[(OsString, OsString)],
    scratch: Option<&PathBuf>,
) -> std::io::Result<(std::process::Child, PipeReader)> {
    let (reader, writer) = std::io::pipe()?;
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .process_group(0);
    if let Some(dir) = scratch {
        command.env("TMPDIR", dir);
    }
    command.envs(env.iter().map(|(k, v)| (k, v)));
    Ok((command.spawn()?, reader))
}

/// Copy run ID's OUTPUT to its SPOOL as it comes, and to the events of
/// a streamed run (EVENTS gives where once its start was answered),
/// until the pipe closes, or, once EXITED closed (the command ended),
/// until it stays quiet. Answer where events went.
fn read_output(
    id: u64,
    mut output: PipeReader,
    mut spool: std::fs::File,
    exited: PipeReader,
    events: Option<Receiver<Out>>,
) -> Option<Out> {
    let sink = events.and_then(|rx| rx.recv().ok());
    let mut buf = vec![0u8; 64 * 1024];
    let mut since_exit: Option<Instant> = None;
    loop {
        let mut fds = [
            libc::pollfd {
                fd: output.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if since_exit.is_some() {
                    -1
                } else {
                    exited.as_raw_fd()
                },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let timeout = if since_exit.is_some() {
            DRAIN_QUIET_MS
        } else {
            -1
        };
        // SAFETY: poll(2) on two pollfd structs we own.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if ready == 0 {
            break;
        }
        if fds[0].revents != 0 {
            let n = match output.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            // A spool that cannot be written loses polls' output, not
            // the stream's.
            let _ = spool.write_all(&buf[..n]);
            if let Some(out) = &sink {
                out.send(&json!({"event": "exec_output", "run": id,
                                 "data": B64.encode(&buf[..n])}));
            }
            if since_exit.is_some_and(|t| t.elapsed() > DRAIN_MAX) {
                break;
            }
        }
        if fds[1].revents != 0 {
            since_exit = Some(Instant::now());
        }
    }
    sink
}

/// Run ID's start was answered: its events may go to OUT now.
pub fn open_stream(id: u64, out: Out) {
    if let Ok(run) = run_of(id)
        && let Some(opener) = run
            .opener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    {
        let _ = opener.send(out);
    }
}

/// The name of signal NUMBER, e.g. `TERM` (its number when unnamed).
fn signal_name(number: i32) -> String {
    SIGNALS
        .iter()
        .find(|(_, n)| *n == number)
        .map_or_else(|| number.to_string(), |(name, _)| (*name).to_string())
}

/// Wait up to WAIT for run ID to end, then answer its output from
/// OFFSET: `{output, next_offset, size, exited, exit_code, signal}`.
pub fn poll(id: u64, offset: u64, wait: Duration) -> Result<Value, Error> {
    let run = run_of(id)?;
    let deadline = Instant::now() + wait;
    let mut ended = run.ended.lock().unwrap_or_else(PoisonError::into_inner);
    while ended.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        ended = run
            .ended_cv
            .wait_timeout(ended, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    let ended = *ended;
    let mut file = std::fs::File::open(&run.spool)
        .map_err(|e| fail(format!("cannot open {}: {e}", run.spool.display())))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(offset.min(size)))
        .and_then(|_| file.take(POLL_CAP).read_to_end(&mut bytes))
        .map_err(|e| fail(format!("cannot read {}: {e}", run.spool.display())))?;
    let next = offset.min(size) + bytes.len() as u64;
    Ok(json!({
        "output": String::from_utf8_lossy(&bytes),
        "next_offset": next,
        "size": size,
        "exited": ended.is_some(),
        "exit_code": ended.and_then(|e| e.code),
        "signal": ended.and_then(|e| e.signal),
    }))
}

/// Write DATA to run ID's stdin (`close`: then close it).
pub fn write_stdin(id: u64, data: &[u8], close: bool) -> Result<Value, Error> {
    let run = run_of(id)?;
    let mut stdin = run.stdin.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(pipe) = stdin.as_mut() {
        pipe.write_all(data)
            .and_then(|()| pipe.flush())
            .map_err(|e| fail(format!("cannot write to the command's stdin: {e}")))?;
    } else if !data.is_empty() {
        return Err(fail("the command's stdin is closed".into()));
    }
    if close {
        *stdin = None;
    }
    Ok(json!({"written": data.len()}))
}

/// Send the signal NAME (`TERM`, `KILL`, `INT`, `HUP`…) to run ID's
/// process group; answer `{sent}`, false when it had already ended.
///
/// bwrap dies of a signal it does not handle, and takes the command
/// down with it (`--die-with-parent`) before the command could handle
/// it: inside bwrap, every signal but KILL goes to the processes beneath
/// bwrap's (its PID 1 ignores what it has no handler for), and the
/// command ends as it chooses.
pub fn signal(id: u64, name: &str) -> Result<Value, Error> {
    let run = run_of(id)?;
    let number = SIGNALS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, number)| *number)
        .ok_or_else(|| {
            fail(format!(
                "unknown signal `{name}` (say TERM, KILL, INT or HUP)"
            ))
        })?;
    if run.reaped.load(Ordering::SeqCst) {
        return Ok(json!({"sent": false}));
    }
    run.signalled.store(number, Ordering::SeqCst);
    let mut targets = if run.in_bwrap && number != libc::SIGKILL {
        descendants(run.pgid)
    } else {
        Vec::new()
    };
    // Not in bwrap, KILL, or bwrap has not started anything yet.
    if targets.is_empty() {
        targets.push(-run.pgid);
    }
    // SAFETY: kill(2) on processes of a group we created whose leader
    // was not reaped a moment ago; no memory involved.
    let sent = targets
        .iter()
        .filter(|pid| unsafe { libc::kill(**pid, number) } == 0)
        .count();
    Ok(json!({"sent": sent > 0}))
}

/// The processes descending from PID (not PID itself), from `/proc`.
fn descendants(pid: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let child: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `PID (COMM) STATE PPID ...`; COMM may hold spaces and `)`.
            let parent = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            Some((child, parent.parse().ok()?))
        })
        .collect();
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for (child, _) in parents.iter().filter(|(_, p)| *p == parent) {
            found.push(*child);
            frontier.push(*child);
        }
    }
    found
}

/// Stop run ID's whole process group: SIGTERM, then SIGKILL after a
/// grace period; answer as `poll` does once it ended.
pub fn stop(id: u64) -> Result<Value, Error> {
    signal(id, "TERM")?;
    let ended = poll(id, u64::MAX, STOP_GRACE)?;
    if ended["exited"] == true {
        return Ok(ended);
    }
    signal(id, "KILL")?;
    poll(id, u64::MAX, STOP_GRACE)
}

/// Kill every group still running: the helper is ending.
pub fn stop_all() {
    for run in RUNS.lock().unwrap_or_else(PoisonError::into_inner).values() {
        if !run.reaped.load(Ordering::SeqCst) {
            // SAFETY: as in `signal`.
            unsafe { libc::kill(-run.pgid, libc::SIGKILL) };
        }
    }
}
