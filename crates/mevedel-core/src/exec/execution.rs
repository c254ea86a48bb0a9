//! One managed execution: what was asked, its lifecycle state, and the
//! observations built from its spool through one private cursor.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::{Notify, watch};

use super::child::Child;
use super::scheduler::{Lane, Lease};
use super::spool::{self, RangeView};
use crate::bash::{self, Analysis};
use crate::datum::Datum;
use crate::resource::Locator;
use crate::sandbox::launch::{self, Request};
use crate::text::keep;

/// What Lisp asks for: a keyword plist decoded into this type by the
/// seam (kebab-case keys, unknown ones refused).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Spec {
    /// The session's key; executions of one session share a scheduler.
    pub session: String,
    /// The owning model owner, e.g. `/root`.
    pub owner: String,
    pub command: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub kind: Kind,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub tty: bool,
    /// Monitor only: milliseconds from launch until it is stopped.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Milliseconds the first observation waits (Bash's yield_time_ms).
    #[serde(default)]
    pub yield_ms: Option<u64>,
    /// Directory of durable session artifacts; spools live there so an
    /// omitted range can be kept. A private temporary directory otherwise.
    #[serde(default)]
    pub artifact_dir: Option<PathBuf>,
    /// The session's `session.sqlite`, for background results.
    #[serde(default)]
    pub mailbox: Option<PathBuf>,
    #[serde(default)]
    pub tool_use_id: Option<String>,
    /// The sandbox policy the shell runs under (its command, working
    /// directory and environment are the execution's); run directly when
    /// absent.
    #[serde(default)]
    pub sandbox: Option<Request>,
    /// The complete environment ("NAME=VALUE"); the module's own when absent.
    #[serde(default)]
    pub environment: Option<Vec<String>>,
    /// Extra "NAME=VALUE" settings applied last.
    #[serde(default)]
    pub env: Vec<String>,
    /// Bash run in a login shell after its startup files, before the
    /// command: it unsets what those files exported that the environment
    /// policy withholds (the policy itself is the caller's).
    #[serde(default)]
    pub login_prelude: Option<String>,
    #[serde(default)]
    pub output_cap: Option<u64>,
    /// Milliseconds between TERM and KILL.
    #[serde(default)]
    pub stop_grace_ms: Option<u64>,
    /// Publish progress events (on unless false).
    #[serde(default = "yes")]
    pub progress: bool,
    /// Run the command elsewhere, through Lisp (see `exec::relay`): no
    /// local child, no local sandbox.
    #[serde(default)]
    pub relay: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    #[default]
    Bash,
    Monitor,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bash => "bash",
            Kind::Monitor => "monitor",
        }
    }
}

/// Lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Queued,
    Running,
    Stopping,
    Completed,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Queued => "queued",
            Phase::Running => "running",
            Phase::Stopping => "stopping",
            Phase::Completed => "completed",
        }
    }
}

/// How an execution ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// The shell exited by itself.
    Exit,
    /// The shell died of a signal nobody here sent.
    Signal,
    /// StopExecution or the user stopped it.
    Stopped,
    OutputLimit,
    OutputWriteFailed,
    /// A monitor reached its deadline.
    Timeout,
    /// A monitor produced too many events.
    Flood,
    /// Its session was torn down (or Emacs exited).
    Teardown,
    LaunchFailed,
    /// Its driver failed; what the process did is unknown.
    Lost,
}

impl Termination {
    pub fn name(self) -> &'static str {
        match self {
            Termination::Exit => "exit",
            Termination::Signal => "signal",
            Termination::Stopped => "stopped",
            Termination::OutputLimit => "output-limit",
            Termination::OutputWriteFailed => "output-write-failed",
            Termination::Timeout => "timeout",
            Termination::Flood => "flood",
            Termination::Teardown => "teardown",
            Termination::LaunchFailed => "launch-failed",
            Termination::Lost => "lost",
        }
    }

    /// Endings that wake an idle root model when nobody was waiting.
    pub fn wakes(self) -> bool {
        matches!(
            self,
            Termination::Exit | Termination::Signal | Termination::Timeout | Termination::Flood
        )
    }
}

/// Who asked for a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopBy {
    Model,
    User,
    System,
}

/// Terminal facts.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub termination: Termination,
    pub outcome: &'static str,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration: Duration,
    pub bytes: u64,
    pub tty: bool,
    pub pipeline: Option<bash::Outcome>,
    pub error: Option<String>,
    /// The boundary it ran under (absent when no sandbox policy applied).
    pub sandbox: Option<launch::Facts>,
}

impl Facts {
    pub fn to_datum(&self) -> Datum {
        let ints = |v: &[i32]| Datum::List(v.iter().map(|&n| Datum::Int(i64::from(n))).collect());
        let p = self.pipeline.as_ref();
        Datum::plist([
            ("termination", Datum::str(self.termination.name())),
            ("outcome", Datum::str(self.outcome)),
            (
                "exit-code",
                self.exit_code.map_or(Datum::Nil, |c| Datum::Int(c.into())),
            ),
            (
                "signal",
                self.signal.map_or(Datum::Nil, |s| Datum::Int(s.into())),
            ),
            ("duration-ms", Datum::Int(self.duration.as_millis() as i64)),
            ("bytes", Datum::Int(self.bytes as i64)),
            ("tty", Datum::bool(self.tty)),
            (
                "pipeline-exit-codes",
                p.and_then(|p| p.pipeline_exit_codes.as_deref())
                    .map_or(Datum::Nil, ints),
            ),
            (
                "pipeline-failed-stages",
                p.map_or(Datum::Nil, |p| {
                    Datum::List(
                        p.pipeline_failed_stages
                            .iter()
                            .map(|&n| Datum::Int(n as i64))
                            .collect(),
                    )
                }),
            ),
            (
                "pipeline-classification",
                Datum::opt_str(p.and_then(|p| p.pipeline_classification)),
            ),
            ("note", Datum::opt_str(p.and_then(|p| p.note.clone()))),
            ("error", Datum::opt_str(self.error.clone())),
            (
                "sandbox",
                self.sandbox
                    .as_ref()
                    .map_or(Datum::Nil, launch::Facts::to_datum),
            ),
        ])
    }

    /// The exit code as a mailbox attribute value.
    pub fn exit_code_attr(&self) -> String {
        match (self.exit_code, self.signal) {
            (Some(c), _) => c.to_string(),
            (None, Some(s)) => format!("signal {s}"),
            _ => String::new(),
        }
    }
}

/// Mutable state of an execution.
pub struct State {
    pub phase: Phase,
    /// Its command, once launched.
    pub child: Option<Child>,
    pub launched: Option<Instant>,
    pub spool_path: PathBuf,
    pub reader: Option<File>,
    /// Bytes in the spool.
    pub written: u64,
    /// The private unread cursor.
    pub cursor: u64,
    pub stop: Option<(Termination, StopBy)>,
    pub facts: Option<Facts>,
    /// An observation returned while it was still running.
    pub yielded: bool,
    /// Its terminal observation was returned to a caller.
    pub delivered: bool,
    /// Its session was torn down: no events, no mail.
    pub retired: bool,
    /// The spool is a session artifact and must survive retirement.
    pub kept: bool,
    /// Observations waiting right now.
    pub observers: usize,
    pub lease: Option<Lease>,
    pub mailbox_ids: Vec<i64>,
    /// The terminal observation, once built (repeat polls return it).
    pub terminal: Option<Datum>,
    /// Monitor events published so far.
    pub events: usize,
    /// The controller side of its PTY, for input.
    pub input: Option<File>,
    /// The boundary facts once its launch was prepared.
    pub sandbox: Option<launch::Facts>,
}

impl State {
    /// The local group leader of its command, once launched here.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().and_then(Child::pid)
    }
}

/// One execution, shared by its driver task and every caller.
pub struct Exec {
    pub id: String,
    pub spec: Spec,
    pub analysis: Analysis,
    pub created: Instant,
    pub state: Mutex<State>,
    /// Current phase; observers wait on it.
    pub phase_tx: watch::Sender<Phase>,
    /// Wakes the driver when a stop is requested.
    pub stop_signal: Notify,
    /// Serialises observations so the cursor moves once per range.
    pub observe_lock: tokio::sync::Mutex<()>,
}

/// Lock a mutex, ignoring poisoning (state stays consistent per statement).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Exec {
    pub fn new(id: String, spec: Spec, analysis: Analysis, spool_path: PathBuf) -> Exec {
        let (phase_tx, _) = watch::channel(Phase::Queued);
        Exec {
            id,
            spec,
            analysis,
            created: Instant::now(),
            state: Mutex::new(State {
                phase: Phase::Queued,
                child: None,
                launched: None,
                spool_path,
                reader: None,
                written: 0,
                cursor: 0,
                stop: None,
                facts: None,
                yielded: false,
                delivered: false,
                retired: false,
                kept: false,
                observers: 0,
                lease: None,
                mailbox_ids: Vec::new(),
                terminal: None,
                events: 0,
                input: None,
                sandbox: None,
            }),
            phase_tx,
            stop_signal: Notify::new(),
            observe_lock: tokio::sync::Mutex::new(()),
        }
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub fn lane(&self) -> Lane {
        if self.analysis.read_only() {
            Lane::Shared
        } else {
            Lane::Exclusive
        }
    }

    pub fn set_phase(&self, phase: Phase) {
        self.state().phase = phase;
        self.phase_tx.send_replace(phase);
    }

    /// Ask the driver to stop (first request wins). False when it had
    /// already completed.
    pub fn request_stop(&self, why: Termination, by: StopBy) -> bool {
        let mut st = self.state();
        if st.phase == Phase::Completed {
            return false;
        }
        if st.stop.is_none() {
            st.stop = Some((why, by));
        }
        drop(st);
        self.stop_signal.notify_one();
        true
    }

    /// Whether the spool sits in a durable artifact directory.
    pub fn durable(&self) -> bool {
        self.spec.artifact_dir.is_some()
    }

    /// Elapsed time: since launch, or since creation while queued.
    pub fn elapsed(&self, st: &State) -> Duration {
        match (&st.facts, st.launched) {
            (Some(f), _) => f.duration,
            (None, Some(t)) => t.elapsed(),
            (None, None) => self.created.elapsed(),
        }
    }

    /// What listings show of it (ListExecutions, the user's table):
    /// identity, command, state, counts and its sandbox facts.
    pub fn summary(&self) -> Datum {
        let st = self.state();
        Datum::plist([
            ("id", Datum::str(&self.id)),
            ("kind", Datum::str(self.spec.kind.name())),
            ("owner", Datum::str(&self.spec.owner)),
            ("state", Datum::str(st.phase.name())),
            ("command", Datum::str(&self.spec.command)),
            ("description", Datum::opt_str(self.spec.description.clone())),
            ("tty", Datum::bool(self.spec.tty)),
            (
                "elapsed-ms",
                Datum::Int(self.elapsed(&st).as_millis() as i64),
            ),
            ("bytes", Datum::Int(st.written as i64)),
            ("yielded", Datum::bool(st.yielded)),
            ("tool-use-id", Datum::opt_str(self.spec.tool_use_id.clone())),
            ("spool", Datum::str(st.spool_path.to_string_lossy())),
            ("events", Datum::Int(st.events as i64)),
            (
                "sandbox",
                st.sandbox
                    .as_ref()
                    .map_or(Datum::Nil, launch::Facts::to_datum),
            ),
        ])
    }
}

/// Model-visible text of VIEW: whole, or head, an omission notice naming
/// the full output's ARTIFACT address, the kept failure lines, tail.
pub fn compose(view: &RangeView, artifact: Option<&str>) -> String {
    if let Some(whole) = &view.whole {
        return whole.clone();
    }
    let mut out = String::with_capacity(view.head.len() + view.tail.len() + 200);
    out.push_str(&view.head);
    if !view.head.is_empty() && !view.head.ends_with('\n') {
        out.push('\n');
    }
    let where_ = match artifact {
        Some(path) => format!("full output: {path}"),
        None => "the full output is not available (no session storage); rerun a narrower command"
            .to_string(),
    };
    out.push_str(&format!(
        "[... {} characters omitted (lines {}-{} of this output); {where_} ...]\n",
        view.omitted_chars, view.omitted_lines.0, view.omitted_lines.1
    ));
    out.push_str(&view.kept.render());
    out.push_str(&view.tail);
    out
}

/// Build an observation of EXEC now (the cached terminal one when it
/// exists), advancing its cursor. Callers hold its `observe_lock`.
/// Returns the datum and its output text.
pub fn build(exec: &Exec) -> (Datum, String) {
    if let Some(t) = exec.state().terminal.clone() {
        return (t, String::new());
    }
    let (text, view, artifact) = take_unread(exec);
    let datum = observation(exec, text.clone(), view.as_ref(), artifact);
    let mut st = exec.state();
    if st.phase == Phase::Completed {
        st.terminal = Some(datum.clone());
    }
    (datum, text)
}

/// The unread range of EXEC as a view, advancing its cursor. Returns
/// (text, view, artifact path).
pub fn take_unread(exec: &Exec) -> (String, Option<RangeView>, Option<String>) {
    let (reader, start, written, done, path) = {
        let st = exec.state();
        let Some(reader) = st.reader.as_ref().and_then(|r| r.try_clone().ok()) else {
            return (String::new(), None, None);
        };
        (
            reader,
            st.cursor,
            st.written,
            st.phase == Phase::Completed,
            st.spool_path.clone(),
        )
    };
    let end = if done {
        written
    } else {
        spool::complete_end(&reader, start, written)
    };
    let patterns = keep::current();
    let view = spool::preview(
        &reader,
        start,
        end,
        spool::PREVIEW_BUDGET,
        patterns.as_deref(),
    );
    let artifact =
        (view.is_preview() && exec.durable()).then(|| path.to_string_lossy().into_owned());
    let mut st = exec.state();
    st.cursor = st.cursor.max(end);
    if artifact.is_some() {
        st.kept = true;
    }
    drop(st);
    let address = artifact.as_deref().map(artifact_address);
    (compose(&view, address.as_deref()), Some(view), artifact)
}

/// The `artifact://` address of kept output PATH (a spool in a session's
/// `tool-results/`): the model is told addresses it can Read, never
/// paths into the session's storage.
fn artifact_address(path: &str) -> String {
    let name = std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned());
    Locator::Artifact(vec!["tool-results".to_owned(), name]).canonical()
}

/// An observation datum for EXEC: unread OUTPUT plus its state and, when
/// completed, the terminal facts.
pub fn observation(
    exec: &Exec,
    output: String,
    view: Option<&RangeView>,
    artifact: Option<String>,
) -> Datum {
    let st = exec.state();
    let mut pairs = vec![
        ("id", Datum::str(&exec.id)),
        ("kind", Datum::str(exec.spec.kind.name())),
        ("state", Datum::str(st.phase.name())),
        ("command", Datum::str(&exec.spec.command)),
        ("description", Datum::opt_str(exec.spec.description.clone())),
        ("tty", Datum::bool(exec.spec.tty)),
        (
            "elapsed-ms",
            Datum::Int(exec.elapsed(&st).as_millis() as i64),
        ),
        ("bytes", Datum::Int(st.written as i64)),
        ("output", Datum::Str(output)),
        (
            "preview",
            Datum::bool(view.is_some_and(RangeView::is_preview)),
        ),
        (
            "omitted-chars",
            Datum::Int(view.map_or(0, |v| v.omitted_chars as i64)),
        ),
        ("artifact", Datum::opt_str(artifact)),
        ("class", Datum::str(exec.analysis.class.name())),
        (
            "facts",
            st.facts.as_ref().map_or(Datum::Nil, Facts::to_datum),
        ),
        (
            "sandbox",
            st.sandbox
                .as_ref()
                .map_or(Datum::Nil, launch::Facts::to_datum),
        ),
    ];
    if exec.spec.kind == Kind::Monitor {
        pairs.push(("events", Datum::Int(st.events as i64)));
    }
    Datum::plist(pairs)
}
