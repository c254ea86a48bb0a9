//! Commands run on the remote host: each in its own process group,
//! its output spooled to a file there, so a caller yields, polls from
//! an offset, writes to its stdin and stops it as it does a local run.

use std::collections::HashMap;
use std::io::{Read as _, Seek, SeekFrom, Write as _};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mevedel_search::error::{Error, ErrorKind};
use serde_json::{Value, json};

/// Most output bytes one poll answers; the rest stays in the spool.
const POLL_CAP: u64 = 256 * 1024;

/// How long a stopped group has between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

struct Run {
    pgid: i32,
    spool: PathBuf,
    stdin: Mutex<Option<ChildStdin>>,
    status: Mutex<Option<ExitStatus>>,
    ended: Condvar,
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

/// Start COMMAND (`bash -c`, else `sh -c`) in CWD under SANDBOX; answer
/// `{run, spool, confined, unconfined_reason}`.
pub fn start(command: &str, cwd: &str, spool_dir: &str, sandbox: &Sandbox) -> Result<Value, Error> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    std::fs::create_dir_all(spool_dir).map_err(|e| {
        fail(format!(
            "cannot create the spool directory {spool_dir}: {e}"
        ))
    })?;
    let spool = PathBuf::from(spool_dir).join(format!("run-{}-{id}.log", std::process::id()));
    let out = std::fs::File::create(&spool)
        .map_err(|e| fail(format!("cannot create {}: {e}", spool.display())))?;
    let err = out
        .try_clone()
        .map_err(|e| fail(format!("cannot share the spool: {e}")))?;
    let shell = if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    let launch = crate::confine::launch(
        &sandbox.mode,
        &sandbox.writable,
        std::path::Path::new(cwd),
        vec![shell.into(), "-c".into(), command.into()],
    )
    .map_err(|why| Error::new(ErrorKind::Sandbox, why))?;
    let mut child = Command::new(&launch.argv[0])
        .args(&launch.argv[1..])
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| fail(format!("cannot run the command in {cwd}: {e}")))?;
    let run = Arc::new(Run {
        pgid: child.id() as i32,
        spool: spool.clone(),
        stdin: Mutex::new(child.stdin.take()),
        status: Mutex::new(None),
        ended: Condvar::new(),
    });
    RUNS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, run.clone());
    std::thread::spawn(move || {
        let status = child.wait().ok();
        *run.status.lock().unwrap_or_else(PoisonError::into_inner) = status;
        run.ended.notify_all();
    });
    Ok(json!({
        "run": id,
        "spool": spool.to_string_lossy(),
        "confined": sandbox.mode != "off" && launch.unconfined.is_none(),
        "unconfined_reason": launch.unconfined,
    }))
}

/// Wait up to WAIT for run ID to end, then answer its output from
/// OFFSET: `{output, next_offset, size, exited, exit_code, signal}`.
pub fn poll(id: u64, offset: u64, wait: Duration) -> Result<Value, Error> {
    let run = run_of(id)?;
    let deadline = Instant::now() + wait;
    let mut status = run.status.lock().unwrap_or_else(PoisonError::into_inner);
    while status.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        status = run
            .ended
            .wait_timeout(status, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    let status = *status;
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
        "exited": status.is_some(),
        "exit_code": status.and_then(|s| s.code()),
        "signal": status.and_then(|s| s.signal()),
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

/// Stop run ID's whole process group: SIGTERM, then SIGKILL after a
/// grace period; answer as `poll` does once it ended.
pub fn stop(id: u64) -> Result<Value, Error> {
    let run = run_of(id)?;
    // SAFETY: kill(2) on a process group we created; no memory involved.
    unsafe { libc::kill(-run.pgid, libc::SIGTERM) };
    let ended = poll(id, u64::MAX, STOP_GRACE)?;
    if ended["exited"] == true {
        return Ok(ended);
    }
    // SAFETY: as above.
    unsafe { libc::kill(-run.pgid, libc::SIGKILL) };
    poll(id, u64::MAX, STOP_GRACE)
}

/// Kill every group still running: the helper is ending.
pub fn stop_all() {
    for run in RUNS.lock().unwrap_or_else(PoisonError::into_inner).values() {
        if run
            .status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
        {
            // SAFETY: as in `stop`.
            unsafe { libc::kill(-run.pgid, libc::SIGKILL) };
        }
    }
}
