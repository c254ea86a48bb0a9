//! The last lines a child wrote to stderr, kept for the message that
//! reports its failure, the log file that gets every line whole, and
//! how the child ended.
//! MCP servers and ACP agents both report a crash with them.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::error::{Error, ErrorKind, Result};

/// Longest stderr line kept in memory, in bytes; the log gets it whole.
const LINE_BYTES: usize = 2000;

/// A log file several children may append to (a session's MCP servers
/// share one); `None` inside when it could not be opened.
pub type SharedLog = Arc<Mutex<Option<File>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Open PATH for appending, creating its directory: a log the caller
/// asked for, so failing to open it is an error.
pub fn open_log(path: &Path) -> Result<SharedLog> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::io(
                ErrorKind::Exec,
                &format!("cannot create {}", dir.display()),
                &e,
            )
        })?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| {
            Error::io(
                ErrorKind::Exec,
                &format!("cannot open {}", path.display()),
                &e,
            )
        })?;
    Ok(Arc::new(Mutex::new(Some(file))))
}

/// How a child ended, from its wait STATUS, for the message that
/// reports its exit.
pub fn describe_exit(status: std::io::Result<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            _ => "exited".to_string(),
        },
        Err(e) => format!("exited (status unknown: {e})"),
    }
}

/// The last lines of one child's stderr, bounded in count and length.
pub struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    keep: usize,
    log: Option<SharedLog>,
}

impl StderrTail {
    /// Keep KEEP lines, and append every line to LOG when given.
    pub fn new(keep: usize, log: Option<SharedLog>) -> StderrTail {
        StderrTail {
            lines: Mutex::new(VecDeque::new()),
            keep,
            log,
        }
    }

    /// Keep LINE (cut to [`LINE_BYTES`]) and log it whole, after `WHO: `
    /// when the log is shared by several children.
    pub fn push(&self, who: Option<&str>, line: &str) {
        if let Some(log) = &self.log
            && let Some(file) = lock(log).as_mut()
        {
            let _ = match who {
                Some(who) => writeln!(file, "{who}: {line}"),
                None => writeln!(file, "{line}"),
            };
        }
        let mut kept = line.to_string();
        if kept.len() > LINE_BYTES {
            let mut cut = LINE_BYTES;
            while !kept.is_char_boundary(cut) {
                cut -= 1;
            }
            kept.truncate(cut);
            kept.push('…');
        }
        let mut lines = lock(&self.lines);
        lines.push_back(kept);
        while lines.len() > self.keep {
            lines.pop_front();
        }
    }

    /// The kept lines, oldest first.
    pub fn tail(&self) -> Vec<String> {
        lock(&self.lines).iter().cloned().collect()
    }
}
