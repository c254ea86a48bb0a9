//! Launch one command under the sandbox policy and collect its outcome.
//!
//! [`prepare`] decides the boundary (from the cached probe), resolves the
//! policy's paths and builds the complete command line: bwrap around the
//! `mevedel-sandbox` helper around the command, the helper alone
//! (Landlock-only layer), or the command itself when the sandbox is off,
//! escalated or (best-effort, disclosed) unavailable. A managed
//! execution (`crate::exec::driver`) takes the prepared launch apart
//! ([`Prepared::into_parts`]) and starts it through the process owner
//! ([`crate::process::Owner::start`], the one way a child is started).
//!
//! The helper reports on a dedicated pipe just before it executes the
//! command; a launch whose helper never reported failed to *start* (the
//! sandbox is broken), which is told apart from the command failing
//! ([`Facts::settle_start`]). Once confined preparation has begun nothing
//! falls back to running the command directly.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mevedel_sandbox_protocol::plan::DEVICE_WRITES;
use mevedel_sandbox_protocol::{HelperArgs, Marker};
use serde::Deserialize;

use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::sandbox::facts::Probe;
use crate::sandbox::policy::{self, Backend, Boundary, Decision, Mode, Policy};
use crate::sandbox::probe;
use crate::sandbox::{bwrap, scan};

/// One launch, as Lisp describes it: a keyword plist decoded into this
/// type by the seam (kebab-case keys, unknown ones refused).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Request {
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub backend: Backend,
    /// The command; managed executions fill it in themselves.
    #[serde(default)]
    pub command: Vec<String>,
    /// Working directory; a private scratch directory when absent.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    #[serde(default)]
    pub state_dirs: Vec<PathBuf>,
    #[serde(default)]
    pub home: Option<PathBuf>,
    #[serde(default)]
    pub inaccessible: Vec<PathBuf>,
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    #[serde(default)]
    pub allow_dir_locals: bool,
    #[serde(default)]
    pub network: bool,
    #[serde(default)]
    pub extra_write: Vec<PathBuf>,
    #[serde(default)]
    pub extra_read: Vec<PathBuf>,
    #[serde(default)]
    pub escalated: bool,
    /// The complete environment ("NAME=VALUE"); inherited when absent.
    #[serde(default)]
    pub env: Option<Vec<String>>,
    /// PATH used to find bwrap; the environment's PATH when absent.
    #[serde(default)]
    pub path: Option<String>,
    /// The `mevedel-sandbox` helper binary.
    #[serde(default)]
    pub helper: Option<PathBuf>,
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub probe_timeout_ms: Option<u64>,
    /// Standard input is a terminal private to this launch; inside
    /// bwrap's new session the helper makes it the controlling terminal.
    #[serde(default)]
    pub tty: bool,
    /// Descriptor at which a confined shell gets the supervising
    /// helper's snapshot pipe (managed Bash sets it; never from Lisp).
    #[serde(skip)]
    pub snapshot_fd: Option<i32>,
}

/// Probe timeout when the request names none.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

impl Request {
    /// The request itself, or an error when it has no command (Lisp's
    /// requests must name one; managed executions fill theirs in).
    pub fn checked(self) -> Result<Request> {
        if self.command.is_empty() {
            return Err(Error::new(
                ErrorKind::Sandbox,
                "bad sandbox request: the command is empty",
            ));
        }
        Ok(self)
    }

    /// The boundary this request would get, probing (bounded by its probe
    /// timeout) when nothing is cached yet.
    pub fn decide(&self) -> Decision {
        policy::decide(&self.policy(), &self.probe())
    }

    pub fn policy(&self) -> Policy {
        Policy {
            mode: self.mode,
            backend: self.backend,
            writable: self.writable.clone(),
            state_dirs: self.state_dirs.clone(),
            home: self.home.clone(),
            inaccessible: self.inaccessible.clone(),
            read_only: self.read_only.clone(),
            allow_dir_locals: self.allow_dir_locals,
            network: self.network,
            extra_write: self.extra_write.clone(),
            extra_read: self.extra_read.clone(),
            escalated: self.escalated,
        }
    }

    fn env_var(&self, name: &str) -> Option<String> {
        match &self.env {
            Some(env) => env.iter().find_map(|kv| {
                kv.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('='))
                    .map(str::to_string)
            }),
            None => std::env::var(name).ok(),
        }
    }

    pub fn probe_options(&self) -> probe::Options {
        probe::Options {
            target: self.target.clone().unwrap_or_else(|| "local".into()),
            path_var: self
                .path
                .clone()
                .or_else(|| self.env_var("PATH"))
                .map(OsString::from),
            helper: self.helper.clone(),
        }
    }

    pub fn probe_timeout(&self) -> Duration {
        self.probe_timeout_ms
            .map_or(DEFAULT_PROBE_TIMEOUT, Duration::from_millis)
    }

    /// The cached probe for this request's target.
    pub fn probe(&self) -> Probe {
        probe::cached(&self.probe_options(), self.probe_timeout(), false)
    }
}

/// A private directory removed when the launch is done.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch> {
        let template = std::env::temp_dir().join("mevedel-sandbox-XXXXXX");
        let mut bytes = template.into_os_string().into_vec();
        bytes.push(0);
        // SAFETY: BYTES is a writable NUL-terminated template.
        let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        if made.is_null() {
            return Err(Error::io(
                ErrorKind::Sandbox,
                "cannot create a private scratch directory",
                &std::io::Error::last_os_error(),
            ));
        }
        bytes.pop();
        let path = PathBuf::from(OsString::from_vec(bytes));
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A launch ready to start.
#[derive(Debug)]
pub struct Prepared {
    pub decision: Decision,
    /// The complete command line (empty when refused).
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// Complete environment, or `None` to inherit Emacs's.
    pub env: Option<Vec<(OsString, OsString)>>,
    pub network: bool,
    pub extra_writes: usize,
    pub extra_reads: usize,
    /// Read end of the helper's start-marker pipe (confined launches).
    marker: Option<(OwnedFd, OwnedFd)>,
    scratch: Option<Scratch>,
    watch: Watch,
}

impl Prepared {
    pub fn boundary(&self) -> Boundary {
        self.decision.boundary()
    }

    pub fn to_datum(&self) -> Datum {
        let (disclosure, refusal) = self.decision.disclosure_and_refusal();
        Datum::plist([
            ("boundary", Datum::Symbol(self.boundary().symbol().into())),
            (
                "argv",
                Datum::List(
                    self.argv
                        .iter()
                        .map(|a| Datum::str(a.to_string_lossy()))
                        .collect(),
                ),
            ),
            ("cwd", Datum::str(self.cwd.to_string_lossy())),
            ("disclosure", Datum::opt_str(disclosure)),
            ("refusal", Datum::opt_str(refusal)),
            ("network", network_datum(self.network)),
            ("extra-writes", Datum::Int(self.extra_writes as i64)),
            ("extra-reads", Datum::Int(self.extra_reads as i64)),
        ])
    }
}

fn network_datum(granted: bool) -> Datum {
    Datum::Symbol(if granted { "granted" } else { "denied" }.into())
}

/// "NAME=VALUE" entries as Emacs's `process-environment' means them: the
/// first entry for a name wins, and a bare "NAME" removes the variable.
fn split_env(env: &[String]) -> Vec<(OsString, OsString)> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for entry in env {
        let (name, value) = match entry.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (entry.as_str(), None),
        };
        if name.is_empty() || !seen.insert(name) {
            continue;
        }
        if let Some(value) = value {
            out.push((name.into(), value.into()));
        }
    }
    out
}

fn set_env(env: &mut Option<Vec<(OsString, OsString)>>, name: &str, value: &Path) {
    let vars = env.get_or_insert_with(|| std::env::vars_os().collect());
    vars.retain(|(k, _)| k != name);
    vars.push((name.into(), value.into()));
}

/// Decide and build the launch of REQUEST given PROBE.
pub fn prepare_with(request: &Request, probe: &Probe, scanner: &scan::Scanner) -> Result<Prepared> {
    if let Some(dir) = &request.cwd
        && !dir.is_absolute()
    {
        return Err(Error::new(
            ErrorKind::Sandbox,
            format!("working directory {} is not absolute", dir.display()),
        ));
    }
    let policy = request.policy();
    let decision = policy::decide(&policy, probe);
    let mut env = request.env.as_deref().map(split_env);
    let counts = (policy.extra_write.len(), policy.extra_read.len());
    let command: Vec<OsString> = request.command.iter().map(OsString::from).collect();
    let mut prepared = Prepared {
        decision: decision.clone(),
        argv: Vec::new(),
        cwd: PathBuf::new(),
        env: None,
        network: policy.network,
        extra_writes: counts.0,
        extra_reads: counts.1,
        marker: None,
        scratch: None,
        watch: Watch::default(),
    };
    let state_dirs: Vec<PathBuf> = request
        .state_dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    let (bwrap_layer, landlock) = match decision {
        Decision::Refuse(_) => return Ok(prepared),
        Decision::Direct { .. } => {
            prepared.network = true;
            prepared.scratch = match &request.cwd {
                Some(_) => None,
                None => Some(Scratch::new()?),
            };
            prepared.cwd = cwd_of(request, prepared.scratch.as_ref());
            prepared.argv = command;
            prepared.env = env;
            let roots = request
                .writable
                .iter()
                .filter_map(|d| std::fs::canonicalize(d).ok())
                .collect();
            prepared.watch = Watch::new(roots, None, state_dirs);
            return Ok(prepared);
        }
        Decision::Confine {
            bwrap, landlock, ..
        } => (bwrap, landlock),
    };
    let mut plan = policy::resolve(&policy, scanner)?;
    // Only Landlock keeps a missing read-only path from being created (or
    // a protected link from being replaced).
    if landlock.is_none() && !plan.landlock_protected.is_empty() {
        let why = format!(
            "without Landlock, {} protected startup file(s) that do not exist yet or are \
             symbolic links could be created or replaced",
            plan.landlock_protected.len()
        );
        if policy.mode == Mode::Required {
            prepared.decision = Decision::Refuse(format!("not run: {why}"));
            return Ok(prepared);
        }
        if let Decision::Confine { disclosure, .. } = &mut prepared.decision {
            *disclosure = Some(match disclosure.take() {
                Some(text) => format!("{text}; {why}"),
                None => why,
            });
        }
    }
    // A private working directory when none is given; the private TMPDIR
    // where no mount namespace gives a private /tmp.
    let scratch = if request.cwd.is_none() || !bwrap_layer {
        let scratch = Scratch::new()?;
        plan.writable.push(scratch.0.clone());
        Some(scratch)
    } else {
        None
    };
    let cwd = cwd_of(request, scratch.as_ref());
    if let Some(dir) = &request.cwd
        && !dir.is_dir()
    {
        return Err(Error::new(
            ErrorKind::Sandbox,
            format!("working directory {} does not exist", dir.display()),
        ));
    }
    let (reader, writer) = std::io::pipe()
        .map_err(|e| Error::io(ErrorKind::Sandbox, "cannot create the start pipe", &e))?;
    let (reader, writer): (OwnedFd, OwnedFd) = (reader.into(), writer.into());
    let helper = probe
        .helper_path
        .clone()
        .ok_or_else(|| Error::new(ErrorKind::Sandbox, "no sandbox helper"))?;
    let mut write: Vec<PathBuf> = plan
        .writable
        .iter()
        .chain(&plan.grant_write)
        .cloned()
        .collect();
    match &scratch {
        Some(dir) if !bwrap_layer => set_env(&mut env, "TMPDIR", &dir.0),
        _ => {
            write.extend(["/tmp", "/dev/shm"].map(PathBuf::from));
            set_env(&mut env, "TMPDIR", Path::new("/tmp"));
        }
    }
    write.extend(
        DEVICE_WRITES
            .iter()
            .map(PathBuf::from)
            .filter(|p| bwrap_layer || p.exists()),
    );
    let mut read = vec![PathBuf::from("/")];
    read.extend(plan.grant_read.iter().cloned());
    let helper_args = HelperArgs {
        landlock,
        required: policy.mode == Mode::Required,
        deny_net: !plan.network,
        // Inside bwrap too: the helper reports the command's raw status,
        // which bwrap would turn into an exit code.
        supervise: true,
        take_tty: request.tty && bwrap_layer,
        read,
        write,
        // Inside bwrap its read-only binds and masks enforce the carve-outs;
        // Landlock carve-outs would forbid creating anything in the
        // directories that hold them (a repository's top level).
        protect: if bwrap_layer {
            plan.landlock_protected.clone()
        } else {
            plan.protected
                .iter()
                .chain(&plan.landlock_protected)
                .cloned()
                .collect()
        },
        deny: if bwrap_layer {
            Vec::new()
        } else {
            plan.masked.iter().map(|m| m.path.clone()).collect()
        },
        start_fd: Some(START_FD),
        snapshot_fd: request.snapshot_fd,
        command,
    };
    let mut inner = vec![helper.into_os_string()];
    inner.extend(helper_args.to_args());
    prepared.argv = match (&probe.bwrap_path, bwrap_layer) {
        (Some(bwrap_path), true) => bwrap::argv(bwrap_path, &plan, &cwd, &inner),
        _ => inner,
    };
    prepared.cwd = cwd;
    prepared.env = env;
    prepared.marker = Some((reader, writer));
    prepared.scratch = scratch;
    let roots = plan
        .writable
        .iter()
        .chain(&plan.grant_write)
        .cloned()
        .collect();
    prepared.watch = Watch::new(roots, Some(&plan.dir_locals), state_dirs);
    Ok(prepared)
}

fn cwd_of(request: &Request, scratch: Option<&Scratch>) -> PathBuf {
    match (&request.cwd, scratch) {
        (Some(dir), _) => dir.clone(),
        (None, Some(s)) => s.0.clone(),
        (None, None) => PathBuf::from("/"),
    }
}

/// Decide and build the launch of REQUEST with the cached probe.
pub fn prepare(request: &Request) -> Result<Prepared> {
    prepare_with(request, &request.probe(), scan::global())
}

/// What a caller that starts a prepared launch itself keeps until the
/// command is done: the private scratch directory (removed on drop) and
/// the watch on files Emacs may evaluate later.
#[derive(Debug, Default)]
pub struct Keep {
    _scratch: Option<Scratch>,
    pub watch: Watch,
}

/// Identity and content stamp of a file: (device, inode, mtime ns, size).
type FileStamp = (u64, u64, i128, u64);

fn file_stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        m.size(),
    ))
}

/// Files under a state directory the watch stamps, at most.
const STATE_FILES_MAX: usize = 10_000;

/// The files Emacs may evaluate later that a command could change: every
/// `.dir-locals.el` / `.dir-locals-2.el` under the writable roots (found
/// by the cached scan) and every file under the workspace's state
/// directories (permission rules, memory, skills) but the sessions'
/// storage, stamped before the launch and compared after it.
#[derive(Debug, Default)]
pub struct Watch {
    roots: Vec<PathBuf>,
    state: Vec<PathBuf>,
    before: std::collections::BTreeMap<PathBuf, FileStamp>,
}

impl Watch {
    /// Watch ROOTS' dir-locals (DIR_LOCALS when the caller has just found
    /// them, else by scanning) and the STATE directories.
    fn new(roots: Vec<PathBuf>, dir_locals: Option<&[PathBuf]>, state: Vec<PathBuf>) -> Watch {
        let mut watch = Watch {
            roots,
            state,
            before: Default::default(),
        };
        watch.before = match dir_locals {
            Some(found) => watch.stamps_with(found.to_vec()),
            None => watch.stamps(),
        };
        watch
    }

    fn stamps(&self) -> std::collections::BTreeMap<PathBuf, FileStamp> {
        let mut found = Vec::new();
        for root in &self.roots {
            if let Ok((under, _)) = scan::global().protected_under(root) {
                found.extend(under.into_iter().filter(|p| scan::is_dir_locals(p)));
            }
        }
        self.stamps_with(found)
    }

    fn stamps_with(
        &self,
        dir_locals: Vec<PathBuf>,
    ) -> std::collections::BTreeMap<PathBuf, FileStamp> {
        let mut out = std::collections::BTreeMap::new();
        for path in dir_locals {
            if let Some(stamp) = file_stamp(&path) {
                out.insert(path, stamp);
            }
        }
        let mut stack: Vec<(PathBuf, bool)> =
            self.state.iter().map(|d| (d.clone(), true)).collect();
        while let Some((dir, top)) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if out.len() >= STATE_FILES_MAX {
                    return out;
                }
                let path = entry.path();
                match entry.file_type() {
                    // Sessions' storage is mevedel's own output, written
                    // while commands run.
                    Ok(kind) if kind.is_dir() && top && entry.file_name() == "sessions" => {}
                    Ok(kind) if kind.is_dir() => stack.push((path, false)),
                    Ok(_) => {
                        if let Some(stamp) = file_stamp(&path) {
                            out.insert(path, stamp);
                        }
                    }
                    Err(_) => {}
                }
            }
        }
        out
    }

    /// The watched files created, changed or removed since the launch.
    pub fn changed(&self) -> Vec<PathBuf> {
        if self.roots.is_empty() && self.state.is_empty() {
            return Vec::new();
        }
        let after = self.stamps();
        let mut out: Vec<PathBuf> = after
            .iter()
            .filter(|(path, stamp)| self.before.get(*path) != Some(*stamp))
            .map(|(path, _)| path.clone())
            .chain(
                self.before
                    .keys()
                    .filter(|path| !after.contains_key(*path))
                    .cloned(),
            )
            .collect();
        out.sort();
        out
    }
}

/// A prepared launch taken apart for a caller that starts it itself
/// (managed executions).
#[derive(Debug)]
pub struct Parts {
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// Complete environment, or `None` to inherit Emacs's.
    pub env: Option<Vec<(OsString, OsString)>>,
    /// The start-marker pipe (reader, writer) of a confined launch: the
    /// child must inherit the writer as descriptor [`START_FD`].
    pub marker: Option<(OwnedFd, OwnedFd)>,
    /// bwrap is the outermost layer (it starts its own session).
    pub bwrap: bool,
    pub keep: Keep,
    /// The facts so far (start: `Started` until markers say otherwise);
    /// absent when no sandbox policy applied.
    pub facts: Option<Facts>,
    /// Why the launch is refused (nothing may be started).
    pub refusal: Option<String>,
}

impl Prepared {
    pub fn into_parts(self) -> Parts {
        let (disclosure, refusal) = self.decision.disclosure_and_refusal();
        let bwrap = matches!(self.decision, Decision::Confine { bwrap: true, .. });
        let boundary = self.boundary();
        Parts {
            facts: Some(Facts {
                boundary,
                start: match &refusal {
                    Some(why) => Start::Refused(why.clone()),
                    None => Start::Started,
                },
                disclosure,
                landlock: None,
                sockets: None,
                evaluated: Vec::new(),
                network: self.network,
                extra_writes: self.extra_writes,
                extra_reads: self.extra_reads,
            }),
            argv: self.argv,
            cwd: self.cwd,
            env: self.env,
            marker: self.marker,
            bwrap,
            keep: Keep {
                _scratch: self.scratch,
                watch: self.watch,
            },
            refusal,
        }
    }
}

/// The boundary facts of one managed execution: no paths, no command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub boundary: Boundary,
    pub start: Start,
    pub disclosure: Option<String>,
    pub landlock: Option<String>,
    /// `blocked` when new Unix sockets are refused, `open` when the
    /// helper could not install that filter (best-effort, disclosed).
    pub sockets: Option<String>,
    /// Files Emacs may evaluate later that the command created, changed
    /// or removed (dir-locals, the session's state).
    pub evaluated: Vec<PathBuf>,
    pub network: bool,
    pub extra_writes: usize,
    pub extra_reads: usize,
}

/// What a confined command can still reach when the socket filter is
/// missing.
const OPEN_SOCKETS: &str = "pathname Unix sockets outside the workspace (an Emacs server, \
                            the session bus, ssh or gpg agents) stay connectable: the seccomp \
                            filter could not be installed";

impl Facts {
    /// Record what the start markers (read after the launch ended) say;
    /// SAID is what the launch printed, STATUS how it exited.
    pub fn settle_start(&mut self, markers: &[Marker], said: &str, status: &str) {
        self.start = start_of(markers, said, status);
        if let Some(Marker::Started { landlock, sockets }) =
            markers.iter().find(|m| matches!(m, Marker::Started { .. }))
        {
            self.landlock = Some(landlock.clone());
            self.sockets = Some(sockets.clone());
            if sockets != "blocked" {
                self.disclosure = Some(match self.disclosure.take() {
                    Some(text) => format!("{text}; {OPEN_SOCKETS}"),
                    None => OPEN_SOCKETS.into(),
                });
            }
        }
        if matches!(self.start, Start::Refused(_)) {
            self.boundary = Boundary::Refused;
        }
    }

    /// The plist `mevedel-sandbox-summary-add` takes.
    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            ("boundary", Datum::Symbol(self.boundary.symbol().into())),
            ("start", Datum::Symbol(self.start.symbol().into())),
            ("disclosure", Datum::opt_str(self.disclosure.clone())),
            ("landlock", Datum::opt_str(self.landlock.clone())),
            ("sockets", Datum::opt_str(self.sockets.clone())),
            (
                "evaluated-changes",
                Datum::List(
                    self.evaluated
                        .iter()
                        .map(|p| Datum::str(p.to_string_lossy()))
                        .collect(),
                ),
            ),
            ("network", network_datum(self.network)),
            ("extra-writes", Datum::Int(self.extra_writes as i64)),
            ("extra-reads", Datum::Int(self.extra_reads as i64)),
        ])
    }
}

/// The helper's start-marker descriptor in the child. A fixed number,
/// not the writer's own: that number could be one another descriptor is
/// placed at (Bash's PIPESTATUS snapshot), which would swallow the markers.
pub const START_FD: i32 = 62;

/// Every marker the start pipe READER holds now, without waiting: read
/// it after the launch is gone (a writer still open gives what is there).
pub fn read_markers(reader: &OwnedFd) -> Vec<Marker> {
    let fd = reader.as_raw_fd();
    // SAFETY: flag change on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reads into a buffer we own, at most its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            bytes.extend_from_slice(&buf[..n as usize]);
        } else if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {
            continue;
        } else {
            break;
        }
    }
    Marker::parse_all(&String::from_utf8_lossy(&bytes))
}

/// How a launch got going.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// The command was executed (inside the boundary, if any).
    Started,
    /// The sandbox itself failed before the command (e.g. bwrap error).
    SandboxFailed(String),
    /// The command could not be executed (not found, not executable).
    ExecFailed(String),
    /// The launch was refused (policy, or the helper could not enforce).
    Refused(String),
}

impl Start {
    pub fn symbol(&self) -> &'static str {
        match self {
            Start::Started => "started",
            Start::SandboxFailed(_) => "sandbox-failed",
            Start::ExecFailed(_) => "exec-failed",
            Start::Refused(_) => "refused",
        }
    }

    pub fn problem(&self) -> Option<String> {
        match self {
            Start::Started => None,
            Start::SandboxFailed(s) | Start::ExecFailed(s) | Start::Refused(s) => Some(s.clone()),
        }
    }
}

/// The command's raw wait status, as the supervising helper reported it.
pub fn exited(markers: &[Marker]) -> Option<i32> {
    markers.iter().find_map(|m| match m {
        Marker::Exited(raw) => Some(*raw),
        _ => None,
    })
}

/// The final pipeline's stage statuses the supervising helper relayed.
pub fn pipestatus(markers: &[Marker]) -> Option<Vec<i32>> {
    markers.iter().find_map(|m| match m {
        Marker::Pipestatus(codes) => Some(codes.clone()),
        _ => None,
    })
}

/// How a confined launch started, from its MARKERS; SAID (its output) and
/// STATUS describe a sandbox that never reported.
pub fn start_of(markers: &[Marker], said: &str, status: &str) -> Start {
    for marker in markers {
        if let Marker::Refused(why) = marker {
            return Start::Refused(why.clone());
        }
    }
    for marker in markers {
        if let Marker::ExecFailed(why) = marker {
            return Start::ExecFailed(why.clone());
        }
    }
    if markers.iter().any(|m| matches!(m, Marker::Started { .. })) {
        return Start::Started;
    }
    let said = said.trim();
    Start::SandboxFailed(if said.is_empty() {
        format!("the sandbox exited ({status}) before starting the command")
    } else {
        format!("the sandbox failed to start: {said}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::scan::{Limits as ScanLimits, Scanner};
    use crate::testdir::TestDir;

    fn probe(bwrap: bool, landlock: bool) -> Probe {
        Probe {
            bwrap_path: Some("/usr/bin/bwrap".into()),
            bwrap_works: bwrap,
            bwrap_problem: (!bwrap).then(|| "bwrap is not installed".into()),
            landlock_abi: Some(7),
            landlock_problem: None,
            helper_path: Some("/m/mevedel-sandbox".into()),
            helper_problem: None,
            landlock_enforced: landlock,
        }
    }

    fn request(ws: &Path) -> Request {
        Request {
            command: vec!["true".into()],
            cwd: Some(ws.to_path_buf()),
            writable: vec![ws.to_path_buf()],
            env: Some(vec!["PATH=/usr/bin:/bin".into()]),
            ..Request::default()
        }
    }

    fn text(argv: &[OsString]) -> String {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A request as Lisp's plist arrives: kebab-case keys, unknown ones
    /// refused, then `checked`.
    fn from_json(text: &str) -> Result<Request> {
        serde_json::from_str::<Request>(text)
            .map_err(|e| Error::new(ErrorKind::Sandbox, e.to_string()))?
            .checked()
    }

    #[test]
    fn request_shape_is_checked() {
        let ok = from_json(
            r#"{"mode":"required","backend":"landlock","command":["ls","-l"],"network":true,
                "extra-write":["/x"],"probe-timeout-ms":5}"#,
        )
        .unwrap();
        assert_eq!(ok.mode, Mode::Required);
        assert_eq!(ok.backend, Backend::Landlock);
        assert_eq!(ok.extra_write, vec![PathBuf::from("/x")]);
        assert_eq!(ok.probe_timeout(), Duration::from_millis(5));
        let bad = from_json(r#"{"command":["x"],"wrtable":[]}"#).expect_err("accepted");
        assert!(bad.message.contains("wrtable"), "{}", bad.message);
        let bad = from_json(r#"{"command":[],"mode":"best-effort"}"#).expect_err("accepted");
        assert!(bad.message.contains("command is empty"));
        let bad = from_json(r#"{"command":["x"],"mode":"sometimes"}"#).expect_err("accepted");
        assert!(bad.message.contains("sometimes"), "{}", bad.message);
    }

    #[test]
    fn decision_datum_names_boundary_and_reasons() {
        let refused = Decision::Refuse("no bwrap".into()).to_datum();
        assert_eq!(
            refused,
            Datum::plist([
                ("boundary", Datum::Symbol("refused".into())),
                ("disclosure", Datum::Nil),
                ("refusal", Datum::str("no bwrap")),
            ])
        );
        let direct = Decision::Direct {
            boundary: Boundary::Unconfined,
            disclosure: "runs directly".into(),
        }
        .to_datum();
        assert_eq!(
            direct,
            Datum::plist([
                ("boundary", Datum::Symbol("unconfined".into())),
                ("disclosure", Datum::str("runs directly")),
                ("refusal", Datum::Nil),
            ])
        );
    }

    #[test]
    fn confined_argv_nests_helper_in_bwrap() {
        let dir = TestDir::new("launch");
        dir.mkdirs(&["ws/.git"]);
        let ws = dir.path().join("ws");
        let scanner = Scanner::new(ScanLimits::default());
        let prepared = prepare_with(&request(&ws), &probe(true, true), &scanner).unwrap();
        assert_eq!(prepared.boundary(), Boundary::BwrapLandlock);
        let line = text(&prepared.argv);
        let ws = ws.display();
        assert!(line.starts_with("/usr/bin/bwrap --new-session"), "{line}");
        assert!(line.contains(&format!("--bind {ws} {ws}")), "{line}");
        assert!(
            line.contains(&format!("--ro-bind {ws}/.git {ws}/.git")),
            "{line}"
        );
        assert!(
            line.contains(&format!(
                "--chdir {ws} -- /m/mevedel-sandbox --landlock-abi 7"
            )),
            "{line}"
        );
        assert!(line.contains("--deny-net"), "{line}");
        // bwrap's read-only bind protects .git; no Landlock carve-out.
        assert!(!line.contains("--protect"), "{line}");
        assert!(line.ends_with("-- true"), "{line}");
        assert!(
            prepared
                .env
                .as_ref()
                .is_some_and(|e| e.contains(&("TMPDIR".into(), "/tmp".into())))
        );
    }

    #[test]
    fn landlock_only_supervises_and_uses_private_tmp() {
        let dir = TestDir::new("launch-ll");
        dir.mkdirs(&[".git"]);
        let ws = dir.path().to_path_buf();
        let scanner = Scanner::new(ScanLimits::default());
        let prepared = prepare_with(&request(&ws), &probe(false, true), &scanner).unwrap();
        assert_eq!(prepared.boundary(), Boundary::Landlock);
        let line = text(&prepared.argv);
        assert!(
            line.starts_with("/m/mevedel-sandbox --landlock-abi 7"),
            "{line}"
        );
        assert!(line.contains("--supervise"), "{line}");
        assert!(
            line.contains(&format!("--protect {}/.git", ws.display())),
            "{line}"
        );
        let scratch = prepared
            .scratch
            .as_ref()
            .map(|s| s.0.clone())
            .unwrap_or_default();
        assert!(scratch.is_dir());
        assert!(
            line.contains(&format!("--write {}", scratch.display())),
            "{line}"
        );
        assert!(
            prepared
                .env
                .as_ref()
                .is_some_and(|e| e.contains(&("TMPDIR".into(), scratch.clone().into())))
        );
        drop(prepared);
        assert!(!scratch.exists(), "scratch directory left behind");
    }

    #[test]
    fn bwrap_without_landlock_cannot_keep_missing_startup_files() {
        let dir = TestDir::new("launch-nolandlock");
        let ws = dir.path().to_path_buf();
        let scanner = Scanner::new(ScanLimits::default());
        let mut req = request(&ws);
        req.read_only = vec![ws.join(".bashrc")];
        let mut no_landlock = probe(true, true);
        no_landlock.landlock_abi = None;
        no_landlock.landlock_enforced = false;
        no_landlock.landlock_problem = Some("no Landlock".into());
        let prepared = prepare_with(&req, &no_landlock, &scanner).unwrap();
        assert_eq!(prepared.boundary(), Boundary::Bwrap);
        let (disclosure, _) = prepared.decision.disclosure_and_refusal();
        assert!(
            disclosure.is_some_and(|d| d.contains("could be created or replaced")),
            "{:?}",
            prepared.decision
        );
        req.mode = Mode::Required;
        let refused = prepare_with(&req, &no_landlock, &scanner).unwrap();
        assert_eq!(refused.boundary(), Boundary::Refused);
        // With Landlock, the helper gets the carve-out inside bwrap.
        let confined = prepare_with(&req, &probe(true, true), &scanner).unwrap();
        assert!(text(&confined.argv).contains(&format!("--protect {}/.bashrc", ws.display())));
    }

    #[test]
    fn refused_and_direct_launches() {
        let dir = TestDir::new("launch-direct");
        let ws = dir.path().to_path_buf();
        let scanner = Scanner::new(ScanLimits::default());
        let mut req = request(&ws);
        req.mode = Mode::Required;
        let refused = prepare_with(&req, &probe(false, true), &scanner).unwrap();
        assert_eq!(refused.boundary(), Boundary::Refused);
        assert!(refused.argv.is_empty());
        // What the execution driver gets: a refusal and nothing to start.
        let parts = refused.into_parts();
        assert!(parts.argv.is_empty());
        assert!(
            parts
                .refusal
                .as_deref()
                .is_some_and(|why| why.contains("bwrap"))
        );
        let facts = parts.facts.unwrap();
        assert!(
            matches!(facts.start, Start::Refused(_)),
            "{:?}",
            facts.start
        );
        assert_eq!(facts.boundary, Boundary::Refused);
        req.mode = Mode::Off;
        req.cwd = Some("relative/dir".into());
        let err =
            prepare_with(&req, &probe(true, true), &scanner).expect_err("relative cwd accepted");
        assert!(err.message.contains("relative/dir is not absolute"));
        req.cwd = Some(ws.clone());
        let direct = prepare_with(&req, &probe(true, true), &scanner).unwrap();
        assert_eq!(text(&direct.argv), "true");
        assert_eq!(direct.boundary(), Boundary::Off);
    }

    #[test]
    fn environment_follows_process_environment_rules() {
        let env: Vec<String> = ["A=1", "B", "A=2", "B=3", "C=x=y", "=bad"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            split_env(&env),
            vec![("A".into(), "1".into()), ("C".into(), "x=y".into())]
        );
    }

    #[test]
    fn watch_names_changed_dir_locals_and_state_but_not_sessions() {
        let dir = TestDir::new("launch-watch");
        dir.mkdirs(&["ws/src", "ws/.mevedel/sessions/s1", "ws/.mevedel/memory"]);
        dir.write("ws/.dir-locals.el", "()");
        dir.write("ws/.mevedel/permissions.el", "()");
        let ws = dir.path().join("ws");
        let watch = Watch::new(vec![ws.clone()], None, vec![ws.join(".mevedel")]);
        assert!(watch.changed().is_empty());
        dir.write("ws/.mevedel/sessions/s1/out.log", "output");
        dir.write("ws/src/plain.txt", "x");
        assert!(watch.changed().is_empty());
        dir.write("ws/src/.dir-locals-2.el", "((nil . ((eval . (x)))))");
        dir.write("ws/.mevedel/memory/note.md", "x");
        std::fs::remove_file(ws.join(".dir-locals.el")).unwrap();
        assert_eq!(
            watch.changed(),
            [
                ".dir-locals.el",
                ".mevedel/memory/note.md",
                "src/.dir-locals-2.el"
            ]
            .map(|f| ws.join(f))
            .to_vec()
        );
    }

    #[test]
    fn open_sockets_are_disclosed() {
        let mut facts = Facts {
            boundary: Boundary::Landlock,
            start: Start::Started,
            disclosure: Some("confined by Landlock only".into()),
            landlock: None,
            sockets: None,
            evaluated: Vec::new(),
            network: false,
            extra_writes: 0,
            extra_reads: 0,
        };
        let open = Marker::Started {
            landlock: "full".into(),
            sockets: "open".into(),
        };
        facts.settle_start(&[open], "", "status 0");
        assert_eq!(facts.sockets.as_deref(), Some("open"));
        let text = facts.disclosure.unwrap_or_default();
        assert!(
            text.starts_with("confined by Landlock only; pathname Unix sockets"),
            "{text}"
        );
        assert_eq!(
            pipestatus(&[Marker::Pipestatus(vec![1, 0]), Marker::Exited(0)]),
            Some(vec![1, 0])
        );
    }

    #[test]
    fn markers_classify_the_start() {
        let said = "bwrap: Can't mount tmpfs";
        assert_eq!(
            start_of(&[], said, "status 1"),
            Start::SandboxFailed("the sandbox failed to start: bwrap: Can't mount tmpfs".into())
        );
        assert_eq!(
            start_of(&[], "  ", "signal 9"),
            Start::SandboxFailed(
                "the sandbox exited (signal 9) before starting the command".into()
            )
        );
        let started = Marker::Started {
            landlock: "full".into(),
            sockets: "blocked".into(),
        };
        assert_eq!(
            start_of(std::slice::from_ref(&started), said, "status 1"),
            Start::Started
        );
        assert_eq!(
            start_of(
                &[started.clone(), Marker::ExecFailed("x: not found".into())],
                said,
                "status 1"
            ),
            Start::ExecFailed("x: not found".into())
        );
        assert_eq!(
            start_of(&[Marker::Refused("no".into())], said, "status 1"),
            Start::Refused("no".into())
        );
        // The facts a managed execution keeps: the helper's Landlock
        // report, and a refusal makes the boundary refused.
        let mut facts = Facts {
            boundary: Boundary::Bwrap,
            start: Start::Started,
            disclosure: None,
            landlock: None,
            sockets: None,
            evaluated: Vec::new(),
            network: false,
            extra_writes: 0,
            extra_reads: 0,
        };
        facts.settle_start(std::slice::from_ref(&started), "", "status 0");
        assert_eq!(
            (facts.start.clone(), facts.landlock.as_deref()),
            (Start::Started, Some("full"))
        );
        facts.settle_start(&[Marker::Refused("no".into())], "", "status 1");
        assert_eq!(facts.boundary, Boundary::Refused);
    }
}
