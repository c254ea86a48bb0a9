//! The task that runs one execution: admission, launch, reading output
//! into the spool, progress and monitor events, stop (TERM, then KILL
//! after one bounded interval), cleanup of the process group after the
//! shell exits, and settlement. The command is a [`Child`]: a local
//! process group whose pipes it reads, or a relay whose output and exit
//! Lisp reports; the run is the same either way.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mevedel_sandbox_protocol::Marker;
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot};
use tokio::time::sleep_until;

use super::child::Child;
use super::execution::{self, Exec, Facts, Kind, Phase, StopBy, Termination};
use super::mail;
use super::monitor::{self, FloodWindow, Framer, Line};
use super::pacing::Pacer;
use super::relay::{self, Report};
use super::scheduler::Ticket;
use super::spool::{self, Append, Spool};
use crate::bash::{self, Exit};
use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::events::{self, Event};
use crate::process::{self, Program, pty};
use crate::sandbox::launch;

// The helper's start markers and the shell's PIPESTATUS snapshot need
// their own numbers.
const _: () = assert!(launch::START_FD != bash::SNAPSHOT_FD);

fn wants_snapshot(exec: &Exec) -> bool {
    // A relayed shell's descriptors are its host's.
    exec.spec.kind == Kind::Bash && !exec.spec.relay && exec.analysis.snapshot()
}

/// Default time between TERM and KILL.
pub const DEFAULT_GRACE: Duration = Duration::from_millis(1000);
/// How long to keep reading after the group is gone (an escaped process
/// may still hold the pipe).
const DRAIN_AFTER_GROUP: Duration = Duration::from_millis(100);
/// How long to wait for a killed group to disappear before settling.
const KILL_WAIT: Duration = Duration::from_secs(1);
/// Bounded live tail of progress events.
const TAIL_CHARS: usize = 2000;
const TAIL_LINES: usize = 20;

/// Environment every child gets (a command may override it itself).
pub const CONTROLLED_ENV: &[(&str, &str)] = &[
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("LC_ALL", "C.UTF-8"),
    ("MEVEDEL_EXECUTION", "1"),
];

struct Launched {
    child: Child,
    output: Output,
    status_file: Option<File>,
    spool: Spool,
    /// Read end of the sandbox's start-marker pipe (confined launches).
    marker: Option<OwnedFd>,
    /// The sandbox's scratch directory, kept while the command runs.
    _keep: launch::Keep,
}

/// Where a launched command's output and exit will come from.
enum Output {
    /// Its pipes (stderr apart for a monitor) and the reaper's status.
    Pipes {
        out: OwnedFd,
        err: Option<OwnedFd>,
        exit: oneshot::Receiver<io::Result<ExitStatus>>,
    },
    /// Lisp's reports.
    Relay(mpsc::UnboundedReceiver<Report>),
}

fn exec_err(doing: &str, e: &io::Error) -> Error {
    Error::io(ErrorKind::Exec, doing, e)
}

/// The shell command line for EXEC (inside the sandbox, if any).
pub fn shell_argv(exec: &Exec) -> Vec<String> {
    let script = if wants_snapshot(exec) {
        bash::with_snapshot(&exec.spec.command)
    } else {
        exec.spec.command.clone()
    };
    let mut argv: Vec<String> = if exec.analysis.read_only() {
        ["bash", "--noprofile", "--norc", "-p", "-c"]
            .map(String::from)
            .to_vec()
    } else {
        vec!["bash".into(), "-lc".into()]
    };
    match &exec.spec.login_prelude {
        Some(prelude) if !exec.analysis.read_only() => argv.push(format!("{prelude}\n{script}")),
        _ => argv.push(script),
    }
    argv
}

fn status_file(dir: &std::path::Path, id: &str) -> Result<File> {
    let path = dir.join(format!("{id}.status"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| exec_err("cannot create the status file", &e))?;
    let _ = std::fs::remove_file(&path);
    Ok(file)
}

/// The controlled settings, then SPEC's own, as (NAME, VALUE).
fn settings(spec: &super::execution::Spec) -> impl Iterator<Item = (String, String)> {
    CONTROLLED_ENV
        .iter()
        .map(|&(k, v)| (k.to_string(), v.to_string()))
        .chain(
            spec.env
                .iter()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string())),
        )
}

/// What a relayed shell's environment gets on top of its host's: the
/// controlled settings and SPEC's own, as "NAME=VALUE".
pub fn controlled_env(spec: &super::execution::Spec) -> Vec<String> {
    settings(spec).map(|(k, v)| format!("{k}={v}")).collect()
}

/// The environment of EXEC's shell: the spec's (or the module's), the
/// controlled settings, then the spec's own settings.
fn environment(spec: &super::execution::Spec) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = match &spec.environment {
        Some(list) => list
            .iter()
            .filter_map(|kv| kv.split_once('='))
            .filter(|(k, _)| !k.is_empty())
            .map(|(k, v)| (k.into(), v.into()))
            .collect(),
        None => std::env::vars_os().collect(),
    };
    for (k, v) in settings(spec) {
        env.retain(|(name, _)| name.as_os_str() != k.as_str());
        env.push((k.into(), v.into()));
    }
    env
}

/// How EXEC's shell is started: directly, or prepared by the sandbox
/// (decided from the cached probe, which may probe now: this runs off
/// the Emacs thread).
fn plan(exec: &Exec) -> Result<launch::Parts> {
    let spec = &exec.spec;
    let argv = shell_argv(exec);
    let env = environment(spec);
    let Some(policy) = &spec.sandbox else {
        return Ok(launch::Parts {
            argv: argv.into_iter().map(OsString::from).collect(),
            cwd: spec.cwd.clone().unwrap_or_default(),
            env: Some(env),
            marker: None,
            bwrap: false,
            keep: launch::Keep::default(),
            facts: None,
            refusal: None,
        });
    };
    let mut request = policy.clone();
    request.command = argv;
    request.cwd = spec.cwd.clone();
    request.tty = spec.tty;
    // Confined, the snapshot goes to the supervising helper, which checks
    // it against the status it reaps: the command holds no descriptor
    // onto anything Emacs reads.
    request.snapshot_fd = wants_snapshot(exec).then_some(bash::SNAPSHOT_FD);
    request.env = Some(
        env.iter()
            .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
            .collect(),
    );
    launch::prepare(&request).map(launch::Prepared::into_parts)
}

/// Why a launch did not start, and the boundary facts known by then.
struct NotLaunched {
    message: String,
}

fn launch(exec: &Exec) -> std::result::Result<Launched, NotLaunched> {
    let failed = |e: Error| NotLaunched { message: e.message };
    let spec = &exec.spec;
    if let Some(cwd) = &spec.cwd
        && !cwd.is_dir()
    {
        return Err(NotLaunched {
            message: format!("working directory {} does not exist", cwd.display()),
        });
    }
    let parts = plan(exec).map_err(|e| NotLaunched {
        message: format!("the sandbox could not be prepared: {}", e.message),
    })?;
    let launch::Parts {
        argv,
        cwd,
        env,
        marker,
        bwrap,
        keep,
        facts,
        refusal,
    } = parts;
    exec.state().sandbox = facts;
    if let Some(why) = refusal {
        return Err(NotLaunched {
            message: format!("the sandbox refused to run the command: {why}"),
        });
    }

    let (spool, dir) = open_spool(exec)?;

    let mut fd_map = Vec::new();
    // Unconfined (no helper), the shell writes its snapshot to a file of
    // ours; it could write anything else there too, as it could anywhere.
    let status = if wants_snapshot(exec) && marker.is_none() {
        let file = status_file(&dir, &exec.id).map_err(failed)?;
        fd_map.push((file.as_raw_fd(), bash::SNAPSHOT_FD));
        Some(file)
    } else {
        None
    };
    let marker = marker.map(|(reader, writer)| {
        fd_map.push((writer.as_raw_fd(), launch::START_FD));
        (reader, writer)
    });

    let mut program = Program {
        argv,
        env,
        cwd: (!cwd.as_os_str().is_empty()).then_some(cwd),
        stdin: None,
        stdout: None,
        stderr: None,
        fd_map,
        // Inside bwrap the helper takes the terminal in bwrap's session.
        new_session: spec.tty && !bwrap,
    };
    let (out, err, input) = if spec.tty {
        let (controller, terminal) = pty::open().map_err(failed)?;
        let dup = |fd: &OwnedFd| {
            fd.try_clone()
                .map_err(|e| failed(exec_err("cannot share the terminal", &e)))
        };
        program.stdin = Some(dup(&terminal)?);
        program.stdout = Some(dup(&terminal)?);
        program.stderr = Some(terminal);
        let input = dup(&controller)?;
        (controller, None, Some(File::from(input)))
    } else {
        let pipe = || io::pipe().map_err(|e| failed(exec_err("cannot create a pipe", &e)));
        let (out_r, out_w) = pipe()?;
        let out_w = OwnedFd::from(out_w);
        let err_r = if spec.kind == Kind::Monitor {
            let (err_r, err_w) = pipe()?;
            program.stderr = Some(OwnedFd::from(err_w));
            Some(OwnedFd::from(err_r))
        } else {
            program.stderr = Some(
                out_w
                    .try_clone()
                    .map_err(|e| failed(exec_err("cannot create a pipe", &e)))?,
            );
            None
        };
        program.stdout = Some(out_w);
        (OwnedFd::from(out_r), err_r, None)
    };

    let (tx, rx) = oneshot::channel();
    let started = process::global().start(
        program,
        Some(Box::new(move |status| {
            let _ = tx.send(status);
        })),
    );
    // The child has its copy of the start pipe's writer; ours would keep
    // the pipe from ever reaching its end.
    let marker = marker.map(|(reader, _writer)| reader);
    let info = started.map_err(|e| {
        let (message, start) = if marker.is_some() {
            let why = format!("the sandbox failed to start: {}", e.message);
            (why.clone(), launch::Start::SandboxFailed(why))
        } else {
            (e.message.clone(), launch::Start::ExecFailed(e.message))
        };
        // The boundary facts say the command never started.
        if let Some(facts) = exec.state().sandbox.as_mut() {
            facts.start = start;
        }
        NotLaunched { message }
    })?;
    let child = Child::Group {
        pid: info.pid as i32,
        inner: bwrap,
    };
    let mut st = exec.state();
    st.child = Some(child.clone());
    st.launched = Some(Instant::now());
    st.input = input;
    drop(st);
    Ok(Launched {
        child,
        output: Output::Pipes { out, err, exit: rx },
        status_file: status,
        spool,
        marker,
        _keep: keep,
    })
}

/// EXEC's spool, created empty with its reader, and its directory.
fn open_spool(exec: &Exec) -> std::result::Result<(Spool, std::path::PathBuf), NotLaunched> {
    let failed = |e: Error| NotLaunched { message: e.message };
    let spool_path = exec.state().spool_path.clone();
    let dir = spool_path
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&dir)
        .map_err(|e| failed(exec_err("cannot create the spool directory", &e)))?;
    let cap = exec.spec.output_cap.unwrap_or(spool::DEFAULT_CAP);
    let spool = Spool::create(&spool_path, cap).map_err(failed)?;
    exec.state().reader = Some(spool.reader().map_err(failed)?);
    Ok((spool, dir))
}

/// Launch EXEC elsewhere: ask Lisp to run its command (see
/// [`relay::launch`]); its output goes to the local spool.
fn launch_relayed(exec: &Exec) -> std::result::Result<Launched, NotLaunched> {
    let (spool, _) = open_spool(exec)?;
    let feed = relay::launch(exec);
    let child = Child::Relay {
        session: exec.spec.session.clone(),
        id: exec.id.clone(),
    };
    let mut st = exec.state();
    st.child = Some(child.clone());
    st.launched = Some(Instant::now());
    drop(st);
    Ok(Launched {
        child,
        output: Output::Relay(feed),
        status_file: None,
        spool,
        marker: None,
        _keep: launch::Keep::default(),
    })
}

fn set_nonblocking(fd: &OwnedFd) {
    // SAFETY: flag change on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the OwnedFd stays open, and is the same descriptor, for as
    // long as the AsyncFd owns it.
    unsafe { AsyncFd::register(fd) }.map_err(|e| io::Error::other(e.to_string()))
}

/// Read once from FD; Ok(0) at end of stream (EIO from a PTY whose
/// terminal side is closed counts as the end).
async fn read_some(fd: &AsyncFd<OwnedFd>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        let mut guard = fd.readable().await?;
        let result = guard.try_io(|inner| {
            // SAFETY: reads into a buffer we own, at most its length.
            let n = unsafe { libc::read(inner.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match result {
            Ok(Ok(n)) => return Ok(n),
            Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        }
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

/// Push EVENT unless the execution was retired.
fn publish(exec: &Exec, kind: &str, data: Datum) {
    if !exec.state().retired {
        events::global().push(Event::new(kind, data));
    }
}

/// Monitor bookkeeping inside the driver.
struct MonitorRun {
    framer: Framer,
    pending: Vec<Line>,
    batch_at: Option<Instant>,
    flood: FloodWindow,
    deadline: Instant,
}

/// Everything a settlement records, handed over once.
struct Settlement {
    termination: Termination,
    status: Option<ExitStatus>,
    bytes: u64,
    /// Exit codes of the pipeline's stages, from the snapshot descriptor.
    pipestatus: Option<Vec<i32>>,
    error: Option<String>,
    /// Monitor lines not yet published (folded into a stopped monitor's
    /// result).
    pending_lines: Vec<Line>,
}

impl Settlement {
    /// An ending without an exit status: nothing ran, or what ran is
    /// unknown.
    fn without_exit(termination: Termination, bytes: u64, error: Option<String>) -> Settlement {
        Settlement {
            termination,
            status: None,
            bytes,
            pipestatus: None,
            error,
            pending_lines: Vec::new(),
        }
    }
}

/// Run EXEC to settlement.
pub async fn drive(exec: Arc<Exec>, ticket: Ticket) {
    let lease = tokio::select! {
        lease = ticket.admitted() => Some(lease),
        () = exec.stop_signal.notified() => None,
    };
    let stop = exec.state().stop;
    let (Some(lease), None) = (lease, stop) else {
        let why = stop.map_or(Termination::Stopped, |(t, _)| t);
        settle(&exec, Settlement::without_exit(why, 0, None)).await;
        return;
    };
    exec.state().lease = Some(lease);
    let launched = if exec.spec.relay {
        launch_relayed(&exec)
    } else {
        // Launching waits for the spawner thread's fork; keep the workers free.
        let launching = Arc::clone(&exec);
        tokio::task::spawn_blocking(move || launch(&launching))
            .await
            .unwrap_or_else(|e| {
                Err(NotLaunched {
                    message: format!("launch panicked: {e}"),
                })
            })
    };
    let launched = match launched {
        Ok(l) => l,
        Err(e) => {
            let failed = Settlement::without_exit(Termination::LaunchFailed, 0, Some(e.message));
            settle(&exec, failed).await;
            return;
        }
    };
    exec.set_phase(Phase::Running);
    run(exec, launched).await;
}

/// Watch LAUNCHED until its group is gone and its output drained, then
/// settle it.
async fn run(exec: Arc<Exec>, launched: Launched) {
    let Launched {
        child,
        output,
        status_file,
        spool,
        marker,
        _keep: keep,
    } = launched;
    let mut source = match Source::open(output) {
        Ok(source) => source,
        Err(e) => {
            child.kill();
            let failed =
                Settlement::without_exit(Termination::LaunchFailed, 0, Some(e.to_string()));
            settle(&exec, failed).await;
            return;
        }
    };
    let mut running = Running::new(Arc::clone(&exec), child, spool, &source);
    running.watch(&mut source).await;
    let settlement = running.finish(marker.as_ref(), status_file);
    let evaluated = keep.watch.changed();
    if let Some(facts) = exec.state().sandbox.as_mut() {
        facts.evaluated = evaluated;
    }
    settle(&exec, settlement).await;
    // The streams, the spool and the sandbox's scratch directory go only
    // once the execution has settled.
    drop((source, running, keep));
}

/// What a running command's source produced.
enum Happening {
    Out(Vec<u8>),
    /// Stderr, kept apart (a monitor's).
    Err(Vec<u8>),
    OutEnd,
    ErrEnd,
    Exit(io::Result<ExitStatus>),
    /// A relayed command started under this boundary.
    Started(launch::Facts),
    /// A relayed command failed to start, or was lost.
    Lost(String),
}

/// Which of a source's happenings are still awaited.
#[derive(Clone, Copy)]
struct Awaiting {
    exit: bool,
    out: bool,
    err: bool,
}

impl Awaiting {
    fn any(self) -> bool {
        self.exit || self.out || self.err
    }
}

/// Where a running command's output and exit come from.
enum Source {
    Pipes(Streams),
    /// Lisp's reports; `ended` once the exit or a failure came.
    Relay {
        feed: mpsc::UnboundedReceiver<Report>,
        ended: bool,
    },
}

impl Source {
    fn open(output: Output) -> io::Result<Source> {
        Ok(match output {
            Output::Pipes { out, err, exit } => Source::Pipes(Streams::new(out, err, exit)?),
            Output::Relay(feed) => Source::Relay { feed, ended: false },
        })
    }

    /// Stderr is read apart.
    fn separate_err(&self) -> bool {
        matches!(self, Source::Pipes(streams) if streams.err.is_some())
    }

    /// A local command started when it was spawned; a relayed one once
    /// Lisp says so.
    fn started(&self) -> bool {
        matches!(self, Source::Pipes(_))
    }

    /// The next of what AWAITING still waits for (some must be).
    async fn next(&mut self, awaiting: Awaiting) -> Happening {
        match self {
            Source::Pipes(streams) => streams.next(awaiting).await,
            Source::Relay { ended: true, .. } => Happening::OutEnd,
            Source::Relay { feed, ended } => match feed.recv().await {
                Some(Report::Started(facts)) => Happening::Started(facts),
                Some(Report::Output(bytes)) => Happening::Out(bytes),
                Some(Report::Exit(status)) => {
                    *ended = true;
                    Happening::Exit(Ok(status))
                }
                Some(Report::Failed(why)) => {
                    *ended = true;
                    Happening::Lost(why)
                }
                None => {
                    *ended = true;
                    Happening::Lost("its relay ended without reporting an exit".into())
                }
            },
        }
    }
}

/// The launched child's output streams, their buffers and its exit.
struct Streams {
    out: AsyncFd<OwnedFd>,
    err: Option<AsyncFd<OwnedFd>>,
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
    exit: oneshot::Receiver<io::Result<ExitStatus>>,
}

impl Streams {
    async fn next(&mut self, awaiting: Awaiting) -> Happening {
        let Streams {
            out,
            err,
            out_buf,
            err_buf,
            exit,
        } = self;
        tokio::select! {
            biased;
            status = &mut *exit, if awaiting.exit => {
                Happening::Exit(status.unwrap_or_else(|_| Err(io::Error::other("reaper gone"))))
            }
            r = read_some(out, out_buf), if awaiting.out => match r {
                Ok(n) if n > 0 => Happening::Out(out_buf[..n].to_vec()),
                _ => Happening::OutEnd,
            },
            r = async {
                match err.as_ref() {
                    Some(fd) => read_some(fd, err_buf).await,
                    None => Ok(0),
                }
            }, if awaiting.err => match r {
                Ok(n) if n > 0 => Happening::Err(err_buf[..n].to_vec()),
                _ => Happening::ErrEnd,
            },
        }
    }

    fn new(
        out: OwnedFd,
        err: Option<OwnedFd>,
        exit: oneshot::Receiver<io::Result<ExitStatus>>,
    ) -> io::Result<Streams> {
        set_nonblocking(&out);
        let out = register(out)?;
        let err = err.and_then(|fd| {
            set_nonblocking(&fd);
            register(fd).ok()
        });
        Ok(Streams {
            out,
            err,
            out_buf: vec![0u8; 64 * 1024],
            err_buf: vec![0u8; 16 * 1024],
            exit,
        })
    }
}

/// A launched execution while it runs: what it wrote, how it is being
/// stopped, and the cleanup of its group after the shell exits.
struct Running {
    exec: Arc<Exec>,
    child: Child,
    /// A relayed command reported its start.
    started: bool,
    /// Why a relayed command failed or was lost.
    lost: Option<String>,
    grace: Duration,
    spool: Spool,
    out_open: bool,
    err_open: bool,
    exit: Option<io::Result<ExitStatus>>,
    /// Why it is ending, once a stop began.
    ending: Option<Termination>,
    write_error: Option<String>,
    /// Output past the cap (or a failed write) is no longer kept.
    discard: bool,
    term_sent: bool,
    kill_at: Option<Instant>,
    killed_at: Option<Instant>,
    group_gone: bool,
    drain_until: Option<Instant>,
    pacer: Pacer,
    progress: bool,
    monitor: Option<MonitorRun>,
}

impl Running {
    fn new(exec: Arc<Exec>, child: Child, spool: Spool, source: &Source) -> Running {
        let start = Instant::now();
        let spec = &exec.spec;
        let grace = spec
            .stop_grace_ms
            .map_or(DEFAULT_GRACE, Duration::from_millis);
        let monitor = (spec.kind == Kind::Monitor).then(|| MonitorRun {
            framer: Framer::default(),
            pending: Vec::new(),
            batch_at: None,
            flood: FloodWindow::default(),
            deadline: start + Duration::from_millis(spec.timeout_ms.unwrap_or(300_000)),
        });
        let progress = spec.progress && spec.kind == Kind::Bash;
        Running {
            exec,
            child,
            started: source.started(),
            lost: None,
            grace,
            spool,
            out_open: true,
            err_open: source.separate_err(),
            exit: None,
            ending: None,
            write_error: None,
            discard: false,
            term_sent: false,
            kill_at: None,
            killed_at: None,
            group_gone: false,
            drain_until: None,
            pacer: Pacer::new(start),
            progress,
            monitor,
        }
    }

    /// Read SOURCE, time events and stops, until the group is gone and
    /// its output drained.
    async fn watch(&mut self, source: &mut Source) {
        loop {
            let now = Instant::now();
            let progress_at = if self.progress {
                self.pacer.next_check(self.spool.len())
            } else {
                far_future()
            };
            let polling = self.exit.is_some() && !self.group_gone;
            let poll_at = if polling {
                now + Duration::from_millis(20)
            } else {
                far_future()
            };
            let batch_at = self.monitor.as_ref().and_then(|m| m.batch_at);
            let deadline = self
                .monitor
                .as_ref()
                .filter(|_| self.ending.is_none())
                .map(|m| m.deadline);
            // A command whose end is still unreported after its KILL.
            let silent_at = self
                .killed_at
                .zip(self.child.kill_wait())
                .filter(|_| self.exit.is_none())
                .map(|(t, wait)| t + wait);
            let awaiting = Awaiting {
                exit: self.exit.is_none(),
                out: self.out_open,
                err: self.err_open,
            };
            tokio::select! {
                biased;
                () = self.exec.stop_signal.notified(), if self.ending.is_none() => {
                    let why = self.exec.state().stop.map_or(Termination::Stopped, |(t, _)| t);
                    self.begin_stop(why);
                }
                happening = source.next(awaiting), if awaiting.any() => self.happen(happening),
                () = sleep_until(self.kill_at.unwrap_or_else(far_future).into()), if self.kill_at.is_some() => {
                    self.child.kill();
                    self.kill_at = None;
                    self.killed_at = Some(Instant::now());
                }
                () = sleep_until(silent_at.unwrap_or_else(far_future).into()), if silent_at.is_some() => {
                    self.happen(Happening::Lost("its end was not reported after it was killed".into()));
                }
                () = sleep_until(progress_at.into()), if self.progress => {
                    if self.pacer.due(Instant::now(), self.spool.len()) {
                        emit_progress(&self.exec, self.spool.len());
                    }
                }
                () = sleep_until(batch_at.unwrap_or_else(far_future).into()), if batch_at.is_some() => {
                    self.publish_batch();
                }
                () = sleep_until(deadline.unwrap_or_else(far_future).into()), if deadline.is_some() => {
                    self.begin_stop(Termination::Timeout);
                }
                () = sleep_until(poll_at.into()), if polling => {}
                // The drain deadline wakes the loop itself: an escaped
                // process may hold the pipe open with nothing else due.
                () = sleep_until(self.drain_until.unwrap_or_else(far_future).into()), if self.drain_until.is_some() => {}
            }
            if self.exit.is_some() && !self.group_gone {
                self.clean_up_group();
            }
            if self.group_gone && self.drained() {
                break;
            }
        }
    }

    /// Begin stopping for WHY (the first reason wins): TERM now, KILL
    /// after the grace interval.
    fn begin_stop(&mut self, why: Termination) {
        if self.ending.is_none() {
            self.ending = Some(why);
        }
        if !self.term_sent {
            self.term_sent = true;
            self.exec.set_phase(Phase::Stopping);
            self.child.terminate();
            self.kill_at = Some(Instant::now() + self.grace);
        }
    }

    /// Take in what the source produced.
    fn happen(&mut self, happening: Happening) {
        match happening {
            Happening::Out(chunk) => self.stdout(&chunk),
            Happening::Err(chunk) => self.capture(&chunk),
            Happening::OutEnd => self.out_open = false,
            Happening::ErrEnd => self.err_open = false,
            Happening::Exit(status) => self.exit = Some(status),
            Happening::Started(facts) => {
                self.started = true;
                self.exec.state().sandbox = Some(facts);
            }
            Happening::Lost(why) => {
                self.exit = Some(Err(io::Error::other(why.clone())));
                self.lost = Some(why);
                self.out_open = false;
                self.err_open = false;
            }
        }
    }

    /// Keep CHUNK of stdout and frame a monitor's lines from it.
    fn stdout(&mut self, chunk: &[u8]) {
        self.capture(chunk);
        let Some(m) = self.monitor.as_mut() else {
            return;
        };
        let lines = m.framer.push(chunk);
        if lines.is_empty() {
            return;
        }
        let flooded = m.flood.record(Instant::now(), lines.len());
        m.pending.extend(lines);
        if m.batch_at.is_none() {
            m.batch_at = Some(Instant::now() + monitor::BATCH_DELAY);
        }
        if flooded {
            self.begin_stop(Termination::Flood);
        }
    }

    /// Append CHUNK (stdout or stderr) to the spool unless output is
    /// already being discarded; stop when the cap is reached or the write
    /// fails (the rest of the output is then discarded).
    fn capture(&mut self, chunk: &[u8]) {
        if self.discard {
            return;
        }
        let stop = match self.spool.append(chunk) {
            Append::Written => None,
            Append::Limit => Some(Termination::OutputLimit),
            Append::Failed(e) => {
                self.write_error = Some(e);
                Some(Termination::OutputWriteFailed)
            }
        };
        self.discard = stop.is_some();
        self.exec.state().written = self.spool.len();
        if let Some(why) = stop {
            self.begin_stop(why);
        }
    }

    /// Publish the monitor's pending lines as one batch.
    fn publish_batch(&mut self) {
        let Some(m) = self.monitor.as_mut() else {
            return;
        };
        m.batch_at = None;
        if mail::publish_monitor_batch(&self.exec, &mut m.pending) {
            self.begin_stop(Termination::Flood);
        }
    }

    /// The shell has exited: its leftover descendants get the same single
    /// TERM, then KILL after the interval; the group counts as gone once
    /// empty, or a bounded time after the KILL.
    fn clean_up_group(&mut self) {
        if self.child.remains() {
            let waited_out = self.killed_at.is_some_and(|t| t.elapsed() >= KILL_WAIT);
            if waited_out {
                self.group_gone = true;
            } else if !self.term_sent {
                self.term_sent = true;
                self.child.terminate_leftovers();
                self.kill_at = Some(Instant::now() + self.grace);
            }
        } else {
            self.group_gone = true;
        }
        if self.group_gone {
            self.kill_at = None;
            self.drain_until = Some(Instant::now() + DRAIN_AFTER_GROUP);
        }
    }

    /// Both streams ended, or the drain interval after the group is over.
    fn drained(&self) -> bool {
        (!self.out_open && !self.err_open) || self.drain_until.is_some_and(|t| Instant::now() >= t)
    }

    /// The settlement of the finished run: its status (the supervising
    /// helper's from MARKER when confined), how it ended, the pipeline's
    /// statuses from STATUS_FILE, and a monitor's last lines.
    fn finish(&mut self, marker: Option<&OwnedFd>, status_file: Option<File>) -> Settlement {
        if let Some(m) = self.monitor.as_mut()
            && let Some(line) = m.framer.finish()
        {
            m.pending.push(line);
        }
        let markers = marker.map(launch::read_markers);
        // A supervising helper knows the command's own status; bwrap's would
        // turn a death by signal into an exit code.
        let status = markers
            .as_deref()
            .and_then(launch::exited)
            .map(ExitStatus::from_raw)
            .or_else(|| self.exit.take().and_then(|r| r.ok()));
        let mut termination = match (self.ending, status) {
            (Some(t), _) => t,
            (None, Some(s)) if s.signal().is_some() => Termination::Signal,
            _ => Termination::Exit,
        };
        let mut error = self.write_error.take();
        if let Some(why) = self.lost.take()
            && termination != Termination::Teardown
        {
            termination = if self.started {
                Termination::Lost
            } else {
                Termination::LaunchFailed
            };
            error = Some(why);
        }
        if let Some(problem) = markers
            .as_deref()
            .and_then(|m| sandbox_start(&self.exec, m, &self.spool, status))
            && self.ending.is_none()
        {
            termination = Termination::LaunchFailed;
            error = Some(problem);
        }
        // The relayed statuses must also have one entry per stage.
        let stages = self.exec.analysis.final_pipeline.as_ref().map(Vec::len);
        let relayed = markers
            .as_deref()
            .and_then(launch::pipestatus)
            .filter(|codes| Some(codes.len()) == stages);
        let pipestatus = relayed.or_else(|| {
            status_file.and_then(|mut f| {
                use std::io::{Read, Seek};
                let mut text = String::new();
                f.rewind().ok()?;
                f.read_to_string(&mut text).ok()?;
                bash::parse_snapshot(&text)
            })
        });
        if let Some(m) = self.monitor.as_mut() {
            let by = self.exec.state().stop.map(|(_, by)| by);
            let fold = matches!(by, Some(StopBy::Model | StopBy::User));
            if !fold && termination != Termination::Teardown {
                mail::publish_monitor_batch(&self.exec, &mut m.pending);
            }
        }
        let pending_lines = self
            .monitor
            .as_mut()
            .map(|m| std::mem::take(&mut m.pending))
            .unwrap_or_default();
        Settlement {
            termination,
            status,
            bytes: self.spool.len(),
            pipestatus,
            error,
            pending_lines,
        }
    }
}

/// Settle the sandbox's start from its MARKERS (read once the launch
/// ended); return the problem when the command never started.
fn sandbox_start(
    exec: &Exec,
    markers: &[Marker],
    spool: &Spool,
    status: Option<ExitStatus>,
) -> Option<String> {
    let said = exec
        .state()
        .reader
        .as_ref()
        .map(|r| spool::live_tail(r, spool.len(), TAIL_CHARS, TAIL_LINES))
        .unwrap_or_default();
    let status = match status.map(|s| (s.code(), s.signal())) {
        Some((Some(code), _)) => format!("status {code}"),
        Some((None, Some(sig))) => format!("signal {sig}"),
        _ => "unknown status".into(),
    };
    let mut st = exec.state();
    let facts = st.sandbox.as_mut()?;
    facts.settle_start(markers, &said, &status);
    facts.start.problem()
}

fn emit_progress(exec: &Exec, bytes: u64) {
    let st = exec.state();
    let tail = st
        .reader
        .as_ref()
        .map(|r| spool::live_tail(r, bytes, TAIL_CHARS, TAIL_LINES))
        .unwrap_or_default();
    let data = Datum::plist([
        ("session", Datum::str(&exec.spec.session)),
        ("id", Datum::str(&exec.id)),
        ("tool-use-id", Datum::opt_str(exec.spec.tool_use_id.clone())),
        ("state", Datum::str(st.phase.name())),
        (
            "elapsed-ms",
            Datum::Int(exec.elapsed(&st).as_millis() as i64),
        ),
        ("bytes", Datum::Int(bytes as i64)),
        ("tail", Datum::Str(tail)),
    ]);
    let retired = st.retired;
    drop(st);
    if !retired {
        events::global().push(Event::new("exec-progress", data));
    }
}

/// Settle EXEC whose driver died (a bug): kill its group, report it lost.
pub async fn settle_lost(exec: &Arc<Exec>, why: String) {
    let child = exec.state().child.clone();
    if let Some(child) = child {
        child.kill();
    }
    let bytes = exec.state().written;
    settle(
        exec,
        Settlement::without_exit(Termination::Lost, bytes, Some(why)),
    )
    .await;
}

/// Record the terminal facts of SETTLEMENT, deliver them (waiting
/// observer, or the owner's mailbox when the execution had yielded) and
/// announce them. Retiring the record is the manager's, once the driver
/// is done.
async fn settle(exec: &Arc<Exec>, settlement: Settlement) {
    let Settlement {
        termination,
        status,
        bytes,
        pipestatus,
        error,
        pending_lines,
    } = settlement;
    let exit = status.map(|s| match (s.code(), s.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, sig) => Exit::Signal(sig.unwrap_or(0)),
    });
    let derived = exit.map(|e| bash::outcome(&exec.analysis, e, pipestatus.as_deref()));
    let outcome = match termination {
        Termination::Exit | Termination::Signal => {
            derived.as_ref().map_or("failure", |d| d.outcome)
        }
        Termination::Stopped | Termination::Teardown => "stopped",
        Termination::Timeout => "timeout",
        _ => "failure",
    };
    // Observations build under this lock, so a caller either sees the
    // result (and delivers it) or was counted before the decision below.
    let guard = exec.observe_lock.lock().await;
    let (observed, yielded, retired, by) = {
        let mut st = exec.state();
        let duration = st.launched.map_or(Duration::ZERO, |t| t.elapsed());
        st.facts = Some(Facts {
            termination,
            outcome,
            exit_code: exit.and_then(|e| match e {
                Exit::Code(c) => Some(c),
                Exit::Signal(_) => None,
            }),
            signal: exit.and_then(|e| match e {
                Exit::Signal(s) => Some(s),
                Exit::Code(_) => None,
            }),
            duration,
            bytes,
            tty: exec.spec.tty,
            pipeline: derived.filter(|d| d.pipeline_exit_codes.is_some()),
            error,
            sandbox: st.sandbox.clone(),
        });
        st.lease = None;
        st.input = None;
        st.phase = Phase::Completed;
        (
            st.observers > 0,
            st.yielded,
            st.retired,
            st.stop.map(|(_, by)| by),
        )
    };
    exec.phase_tx.send_replace(Phase::Completed);
    relay::forget(exec);
    let delivery = if retired {
        mail::Delivery::default()
    } else if exec.spec.kind == Kind::Monitor {
        let folded = if matches!(by, Some(StopBy::Model | StopBy::User)) {
            pending_lines
        } else {
            Vec::new()
        };
        mail::monitor_terminal(exec, &folded, observed)
    } else if !observed && yielded {
        let (_, text) = execution::build(exec);
        mail::execution_record(exec, &text)
    } else {
        mail::Delivery::default()
    };
    exec.state()
        .mailbox_ids
        .extend(delivery.ids.iter().copied());
    drop(guard);
    let facts = exec
        .state()
        .facts
        .as_ref()
        .map_or(Datum::Nil, Facts::to_datum);
    let st = exec.state();
    let data = Datum::plist([
        ("session", Datum::str(&exec.spec.session)),
        ("id", Datum::str(&exec.id)),
        ("owner", Datum::str(&exec.spec.owner)),
        ("kind", Datum::str(exec.spec.kind.name())),
        ("tool-use-id", Datum::opt_str(exec.spec.tool_use_id.clone())),
        ("command", Datum::str(&exec.spec.command)),
        ("description", Datum::opt_str(exec.spec.description.clone())),
        ("yielded", Datum::bool(st.yielded)),
        ("facts", facts),
        (
            "mailbox-ids",
            Datum::List(delivery.ids.iter().map(|&i| Datum::Int(i)).collect()),
        ),
        ("mailbox", Datum::opt_str(delivery.mailbox)),
        ("wake", Datum::bool(delivery.wake)),
        ("error", Datum::opt_str(delivery.error)),
    ]);
    drop(st);
    publish(exec, "exec-settled", data);
}
