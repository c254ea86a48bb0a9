//! The registry of managed executions, per session, and the operations
//! the tools use: start, observe (yield/poll), input, stop, list, and
//! teardown.
//!
//! Each execution belongs to one owner (`/root` or an agent path) in one
//! session. Lookups are owner-scoped: another owner's id is reported as
//! unknown. A session holds at most [`MAX_LIVE`] unfinished executions;
//! the next start is refused before anything is spawned.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::driver;
use super::execution::{self, Exec, Kind, Phase, Spec, StopBy, Termination, lock};
use super::scheduler::Scheduler;
use crate::bash;
use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::events::{self, Event};
use crate::process;
use crate::store::Store;

/// Unfinished executions one session may hold.
pub const MAX_LIVE: usize = 64;
/// How long a settled execution stays pollable.
pub const RETAIN: Duration = Duration::from_secs(60);
/// Extra wait for a shell that exited at the yield boundary to settle.
const RECONCILE: Duration = Duration::from_secs(3);

/// One session's executions.
pub struct Session {
    scheduler: Arc<Scheduler>,
    execs: Mutex<HashMap<String, Arc<Exec>>>,
}

pub struct Manager {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    counter: AtomicU64,
    seed: u64,
    spool_root: PathBuf,
}

fn exec_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Exec, message)
}

/// SplitMix64: spreads a counter into an opaque id.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Manager {
    fn new() -> Manager {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ u64::from(std::process::id());
        Manager {
            sessions: Mutex::new(HashMap::new()),
            counter: AtomicU64::new(0),
            seed,
            spool_root: std::env::temp_dir().join(format!("mevedel-exec-{}", std::process::id())),
        }
    }

    /// Directory of spools for sessions without artifact storage.
    pub fn spool_root(&self) -> &std::path::Path {
        &self.spool_root
    }

    fn session(&self, key: &str) -> Arc<Session> {
        let mut sessions = lock(&self.sessions);
        Arc::clone(sessions.entry(key.to_string()).or_insert_with(|| {
            Arc::new(Session {
                scheduler: Scheduler::new(),
                execs: Mutex::new(HashMap::new()),
            })
        }))
    }

    fn new_id(&self, taken: &HashMap<String, Arc<Exec>>) -> String {
        loop {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let id = format!("x{:08x}", mix(self.seed.wrapping_add(n)) as u32);
            if !taken.contains_key(&id) {
                return id;
            }
        }
    }

    /// Check SPEC, register it and start its driver; the record retires
    /// once the driver is done. Refusals (the `&` operator, the
    /// live-process cap, bad monitor arguments) happen here, before
    /// anything is spawned.
    pub fn start(&self, spec: Spec) -> Result<Arc<Exec>> {
        if spec.command.trim().is_empty() {
            return Err(exec_error("the command is empty"));
        }
        if spec.kind == Kind::Monitor {
            if spec.owner != "/root" {
                return Err(exec_error("Monitor is available only to the root owner"));
            }
            if spec
                .description
                .as_deref()
                .is_none_or(|d| d.trim().is_empty())
            {
                return Err(exec_error("Monitor needs a non-empty description"));
            }
            if spec.tty {
                return Err(exec_error(
                    "Monitor has no terminal mode: its stdin is closed",
                ));
            }
        }
        let analysis = bash::analyze(&spec.command);
        if analysis.background {
            return Err(exec_error(
                "the command uses the shell background operator `&`, which would escape \
                 managed execution; run it in the foreground (yield and poll instead), or run \
                 a long-lived service outside managed Bash",
            ));
        }
        let session = self.session(&spec.session);
        let mut execs = lock(&session.execs);
        let live = execs
            .values()
            .filter(|e| e.state().phase != Phase::Completed)
            .count();
        if live >= MAX_LIVE {
            return Err(exec_error(format!(
                "{MAX_LIVE} managed processes are already live in this session; stop one \
                 (StopExecution) or wait for one to finish before starting another"
            )));
        }
        let id = self.new_id(&execs);
        let dir = spec
            .artifact_dir
            .clone()
            .unwrap_or_else(|| self.spool_root.clone());
        let spool = dir.join(format!("exec-{id}.out"));
        let exec = Arc::new(Exec::new(id.clone(), spec, analysis, spool));
        execs.insert(id, Arc::clone(&exec));
        drop(execs);
        let ticket = Scheduler::enqueue(&session.scheduler, exec.lane());
        let runtime = crate::runtime::get()?;
        let running = runtime.spawn(driver::drive(Arc::clone(&exec), ticket));
        let watched = Arc::clone(&exec);
        runtime.spawn(async move {
            if let Err(e) = running.await {
                driver::settle_lost(&watched, format!("internal error: {e}")).await;
            }
            retire_later(watched);
        });
        Ok(exec)
    }

    /// The execution ID of SESSION, when OWNER (or anyone, for `None`)
    /// owns it.
    pub fn find(&self, session: &str, id: &str, owner: Option<&str>) -> Result<Arc<Exec>> {
        let found = lock(&self.sessions)
            .get(session)
            .and_then(|s| lock(&s.execs).get(id).cloned())
            .filter(|e| owner.is_none_or(|o| e.spec.owner == o));
        found.ok_or_else(|| {
            exec_error(format!(
                "no execution {id} for this owner (unknown, finished more than a minute ago, or owned by another agent)"
            ))
        })
    }

    /// Yielded, unfinished executions of OWNER in SESSION; every one in
    /// the session for `None` (the user's view).
    pub fn list(&self, session: &str, owner: Option<&str>) -> Vec<Datum> {
        let Some(s) = lock(&self.sessions).get(session).cloned() else {
            return Vec::new();
        };
        let mut execs: Vec<Arc<Exec>> = lock(&s.execs).values().cloned().collect();
        execs.sort_by_key(|e| e.created);
        execs
            .into_iter()
            .filter(|e| {
                let st = e.state();
                match owner {
                    Some(o) => e.spec.owner == o && st.yielded && st.phase != Phase::Completed,
                    None => st.phase != Phase::Completed,
                }
            })
            .map(|e| e.summary())
            .collect()
    }

    fn remove(&self, exec: &Exec) {
        if let Some(s) = lock(&self.sessions).get(&exec.spec.session) {
            let mut execs = lock(&s.execs);
            if execs
                .get(&exec.id)
                .is_some_and(|e| std::ptr::eq(e.as_ref(), exec))
            {
                execs.remove(&exec.id);
            }
        }
        discard_spool(exec);
    }

    /// Stop every execution of SESSION (queued ones never start),
    /// without events or mail, and forget the session. Spools not kept as
    /// artifacts are deleted. Returns how many were still unfinished.
    pub fn teardown(&self, session: &str) -> usize {
        let Some(s) = lock(&self.sessions).remove(session) else {
            return 0;
        };
        let execs: Vec<Arc<Exec>> = lock(&s.execs).drain().map(|(_, e)| e).collect();
        let mut stopped = 0;
        for exec in execs {
            exec.state().retired = true;
            if exec.request_stop(Termination::Teardown, StopBy::System) {
                stopped += 1;
            }
            discard_spool(&exec);
        }
        stopped
    }

    /// Tear down every session (Emacs exit, package unload) and remove
    /// the private spool directory.
    pub fn teardown_all(&self) -> usize {
        let keys: Vec<String> = lock(&self.sessions).keys().cloned().collect();
        let n = keys.iter().map(|k| self.teardown(k)).sum();
        let _ = std::fs::remove_dir_all(&self.spool_root);
        n
    }
}

/// Delete EXEC's spool unless an observation made it a session artifact.
fn discard_spool(exec: &Exec) {
    let st = exec.state();
    if !st.kept {
        let _ = std::fs::remove_file(&st.spool_path);
    }
}

/// The process-wide manager.
pub fn global() -> &'static Manager {
    static MANAGER: OnceLock<Manager> = OnceLock::new();
    MANAGER.get_or_init(Manager::new)
}

/// Forget a settled EXEC after [`RETAIN`] (at once when its session was
/// torn down); called once its driver is done.
fn retire_later(exec: Arc<Exec>) {
    if exec.state().retired {
        discard_spool(&exec);
        return;
    }
    let _ = crate::runtime::spawn(async move {
        tokio::time::sleep(RETAIN).await;
        global().remove(&exec);
    });
}

/// Wait up to WAIT for EXEC to complete, then observe it: newly unread
/// output plus its state, or its terminal facts. A still-running
/// execution becomes yielded (and releases its scheduler lane); a
/// completed one is delivered (its mailbox record, if any, is read).
/// BEFORE runs once this observer is counted (e.g. to request a stop).
pub async fn observe(exec: Arc<Exec>, wait: Duration, before: impl FnOnce(&Exec)) -> Datum {
    exec.state().observers += 1;
    before(&exec);
    let mut rx = exec.phase_tx.subscribe();
    let _ = tokio::time::timeout(wait, rx.wait_for(|p| *p == Phase::Completed)).await;
    let exited = exec.state().phase == Phase::Stopping
        || exec
            .state()
            .pid()
            .is_some_and(|pid| !process::group_alive(pid));
    if exec.state().phase != Phase::Completed && exited {
        // Reconcile a shell that already exited: report completion, not a
        // stale live handle.
        let _ = tokio::time::timeout(RECONCILE, rx.wait_for(|p| *p == Phase::Completed)).await;
    }
    let guard = exec.observe_lock.lock().await;
    let (datum, _) = execution::build(&exec);
    let mut st = exec.state();
    st.observers -= 1;
    let completed = st.phase == Phase::Completed;
    let (read_ids, remove_now) = if completed {
        st.delivered = true;
        (std::mem::take(&mut st.mailbox_ids), !st.yielded)
    } else {
        st.yielded = true;
        st.lease = None;
        (Vec::new(), false)
    };
    drop(st);
    drop(guard);
    if !read_ids.is_empty()
        && let Some(db) = exec.spec.mailbox.as_deref()
    {
        let _ = Store::shared(db).and_then(|store| store.mailbox_mark_delivered(&read_ids));
        events::global().push(Event::new(
            "exec-delivered",
            Datum::plist([
                ("session", Datum::str(&exec.spec.session)),
                ("id", Datum::str(&exec.id)),
                (
                    "mailbox-ids",
                    Datum::List(read_ids.iter().map(|&i| Datum::Int(i)).collect()),
                ),
            ]),
        ));
    }
    if remove_now {
        global().remove(&exec);
    }
    datum
}

/// A monitor's first result: once launched (or after WAIT in the
/// queue), its metadata without any output; it is yielded from then on.
pub async fn observe_launch(exec: Arc<Exec>, wait: Duration) -> Datum {
    let mut rx = exec.phase_tx.subscribe();
    let _ = tokio::time::timeout(wait, rx.wait_for(|p| *p != Phase::Queued)).await;
    let mut st = exec.state();
    if st.phase != Phase::Completed {
        st.yielded = true;
        st.lease = None;
    }
    let expires = st.launched.map(|t| {
        let ms = exec.spec.timeout_ms.unwrap_or(300_000);
        let left = (t + Duration::from_millis(ms)).saturating_duration_since(Instant::now());
        std::time::SystemTime::now() + left
    });
    drop(st);
    let mut datum = execution::observation(&exec, String::new(), None, None);
    if let (Datum::List(items), Some(at)) = (&mut datum, expires) {
        let secs = at
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        items.push(Datum::Symbol(":expires-at".into()));
        items.push(Datum::Float(secs));
    }
    datum
}

/// Send CHARS to EXEC: ordinary input only to a terminal; `\u{3}`
/// (Ctrl-C) through the terminal, or as an interrupt to a pipe-mode
/// command (see [`super::child::Child::interrupt`]).
pub fn write_input(exec: &Exec, chars: &str) -> Result<()> {
    let st = exec.state();
    match st.phase {
        Phase::Queued => {
            return Err(exec_error(format!(
                "execution {} has not started yet, so it takes no input; StopExecution cancels it",
                exec.id
            )));
        }
        Phase::Completed => {
            return Err(exec_error(format!(
                "execution {} has already finished",
                exec.id
            )));
        }
        Phase::Running | Phase::Stopping => {}
    }
    let Some(child) = st.child.clone() else {
        return Err(exec_error(format!(
            "execution {} has not started yet",
            exec.id
        )));
    };
    if exec.spec.tty {
        let terminal = st.input.as_ref().and_then(|f| f.try_clone().ok());
        drop(st);
        return child.type_in(terminal.as_ref(), chars);
    }
    drop(st);
    if chars == "\u{3}" {
        child.interrupt()
    } else if exec.spec.kind == Kind::Monitor {
        Err(exec_error(
            "a monitor takes no input; only Ctrl-C (\\u0003) can be sent, and StopExecution stops it",
        ))
    } else {
        Err(exec_error(format!(
            "stdin of execution {} is closed (pipe mode); only Ctrl-C (\\u0003) can be sent. \
             Start the command with tty=true to type into it",
            exec.id
        )))
    }
}

/// Stop EXEC on behalf of the model: TERM to its group, KILL after the
/// interval, and return its final observation once it has settled.
pub async fn stop_for_model(exec: Arc<Exec>) -> Datum {
    let silence = exec
        .state()
        .child
        .as_ref()
        .and_then(super::child::Child::kill_wait)
        .unwrap_or_default();
    let wait = exec
        .spec
        .stop_grace_ms
        .map_or(driver::DEFAULT_GRACE, Duration::from_millis)
        + silence
        + RECONCILE;
    observe(exec, wait, |e| {
        e.request_stop(Termination::Stopped, StopBy::Model);
    })
    .await
}

/// Stop EXEC on behalf of the user; its result goes wherever it would
/// have gone (waiting caller or mailbox), without waking the model.
pub fn stop_for_user(exec: &Exec) -> bool {
    exec.request_stop(Termination::Stopped, StopBy::User)
}

// Requests from Lisp: each answers its request id with one `reply`
// event once the observation it asks for is ready.

/// Answer REQUEST-ID with what WORK gives, once it is done.
fn answer(
    request_id: i64,
    work: impl std::future::Future<Output = Datum> + Send + 'static,
) -> Result<()> {
    crate::runtime::spawn(async move {
        let datum = work.await;
        events::global().push(events::reply(request_id, Ok(datum)));
    })
}

/// MS milliseconds to wait, at most an hour.
fn wait_ms(ms: i64) -> Duration {
    Duration::from_millis(ms.clamp(0, 3_600_000) as u64)
}

/// Start SPEC and return its id. Refusals are errors at once; the first
/// observation (after the spec's yield-ms, 10 s when absent; for a
/// Monitor, its launch) answers REQUEST-ID.
pub fn answer_start(request_id: i64, spec: Spec) -> Result<String> {
    let yield_for = wait_ms(spec.yield_ms.map_or(10_000, |ms| ms as i64));
    let monitor = spec.kind == Kind::Monitor;
    let exec = global().start(spec)?;
    let id = exec.id.clone();
    answer(request_id, async move {
        if monitor {
            observe_launch(exec, yield_for).await
        } else {
            observe(exec, yield_for, |_| {}).await
        }
    })?;
    Ok(id)
}

/// Observe execution ID of SESSION for OWNER (None: the user) after
/// waiting up to WAIT-MS for it to finish; answers REQUEST-ID.
pub fn answer_observe(
    request_id: i64,
    session: &str,
    id: &str,
    owner: Option<&str>,
    wait: i64,
) -> Result<()> {
    let exec = global().find(session, id, owner)?;
    answer(request_id, observe(exec, wait_ms(wait), |_| {}))
}

/// Send CHARS to execution ID (see [`write_input`]), then observe it
/// after WAIT-MS; answers REQUEST-ID.
pub fn answer_write(
    request_id: i64,
    session: &str,
    id: &str,
    owner: Option<&str>,
    chars: &str,
    wait: i64,
) -> Result<()> {
    let exec = global().find(session, id, owner)?;
    write_input(&exec, chars)?;
    answer(request_id, observe(exec, wait_ms(wait), |_| {}))
}

/// Stop execution ID for OWNER (see [`stop_for_model`]); the final
/// observation answers REQUEST-ID once it settled.
pub fn answer_stop(request_id: i64, session: &str, id: &str, owner: Option<&str>) -> Result<()> {
    let exec = global().find(session, id, owner)?;
    answer(request_id, stop_for_model(exec))
}

/// Send CHARS to execution ID of SESSION for the user: nothing is
/// observed, so the model's unread output stays unread.
pub fn user_input(session: &str, id: &str, chars: &str) -> Result<()> {
    write_input(&*global().find(session, id, None)?, chars)
}

/// Stop execution ID of SESSION for the user (see [`stop_for_user`]).
pub fn user_stop(session: &str, id: &str) -> Result<bool> {
    Ok(stop_for_user(&*global().find(session, id, None)?))
}
