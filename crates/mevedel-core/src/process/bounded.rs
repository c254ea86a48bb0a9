//! A short helper program run to its end and read whole: poppler's
//! PDF tools for Read, the sandbox probes. It starts through the
//! process owner like every other child, and its group is killed when
//! the time allowed passes or the caller stops wanting it.

use std::ffi::OsString;
use std::io::Read as _;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Program, global, signal};

/// What a finished program said.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// Its standard error, or empty when it went to `stdout` (see [`run`]).
    pub stderr: String,
}

/// Why there is no [`Finished`].
#[derive(Debug, PartialEq, Eq)]
pub enum Unfinished {
    /// It could not start (the reason, from the owner); a missing
    /// program is the usual one, which callers explain.
    Start(String),
    /// Creating its pipes or waiting for it failed.
    Lost(String),
    /// It ran past the time allowed and was killed.
    Late,
    /// The caller's `stopped` said so and it was killed.
    Stopped,
}

impl Unfinished {
    /// The problem in words, naming the program ARGV0 and the TIMEOUT it had.
    pub fn describe(&self, argv0: &str, timeout: Duration) -> String {
        match self {
            Unfinished::Start(why) => format!("cannot run {argv0}: {why}"),
            Unfinished::Lost(why) => format!("{argv0}: {why}"),
            Unfinished::Late => match timeout.as_millis() {
                ms if ms % 1000 == 0 => format!("{argv0} did not finish within {} s", ms / 1000),
                ms => format!("{argv0} did not finish within {ms} ms"),
            },
            Unfinished::Stopped => "Cancelled.".into(),
        }
    }
}

/// How often a run looks at its caller's `stopped`.
const STOP_CHECK: Duration = Duration::from_millis(25);

/// Run ARGV to its end and collect its output; with COMBINED its
/// standard error goes to the same pipe as its output (one text, in
/// the order written). Its group is killed after TIMEOUT, or as soon as
/// STOPPED answers true.
pub fn run(
    argv: Vec<OsString>,
    combined: bool,
    timeout: Duration,
    stopped: &dyn Fn() -> bool,
) -> Result<Finished, Unfinished> {
    let lost = |e: std::io::Error| Unfinished::Lost(format!("cannot create a pipe: {e}"));
    let (out_r, out_w) = std::io::pipe().map_err(lost)?;
    let (err_r, err_w) = if combined {
        (None, out_w.try_clone().map_err(lost)?)
    } else {
        let (r, w) = std::io::pipe().map_err(lost)?;
        (Some(r), w)
    };
    let mut child = Program::new(argv);
    child.stdout = Some(out_w.into());
    child.stderr = Some(err_w.into());
    let (exit_tx, exit) = mpsc::channel();
    let started = global()
        .start(
            child,
            Some(Box::new(move |status| {
                let _ = exit_tx.send(status);
            })),
        )
        .map_err(|e| Unfinished::Start(e.message))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let errors = err_r.map(|mut err_r| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = err_r.read_to_string(&mut text);
                text
            })
        });
        let mut stdout = Vec::new();
        let mut out_r = out_r;
        let _ = out_r.read_to_end(&mut stdout);
        let stderr = errors
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        let status = exit
            .recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("the reaper is gone")));
        let _ = tx.send((status, stdout, stderr));
    });
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(STOP_CHECK)) {
            Ok((Ok(status), stdout, stderr)) => {
                return Ok(Finished {
                    status,
                    stdout,
                    stderr,
                });
            }
            Ok((Err(e), _, _)) => return Err(Unfinished::Lost(format!("waiting failed: {e}"))),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Unfinished::Lost("its output was lost".into()));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let late = Instant::now() >= deadline;
                if late || stopped() {
                    // The reaper waits for the leader; the group goes with it.
                    signal(started.pid as i32, libc::SIGKILL);
                    return Err(if late {
                        Unfinished::Late
                    } else {
                        Unfinished::Stopped
                    });
                }
            }
        }
    }
}

/// The program ARGV runs, as messages name it.
pub fn program_name(argv: &[OsString]) -> String {
    argv.first()
        .map(|p| Path::new(p).display().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> bool {
        false
    }

    #[test]
    fn output_is_collected_apart_or_combined() {
        let argv = || -> Vec<OsString> {
            vec![
                "sh".into(),
                "-c".into(),
                "echo out; echo err >&2; exit 3".into(),
            ]
        };
        let apart = run(argv(), false, Duration::from_secs(10), &never).expect("runs");
        assert_eq!(apart.status.code(), Some(3));
        assert_eq!(apart.stdout, b"out\n");
        assert_eq!(apart.stderr, "err\n");
        let combined = run(argv(), true, Duration::from_secs(10), &never).expect("runs");
        assert_eq!(combined.stdout, b"out\nerr\n");
        assert!(combined.stderr.is_empty());
    }

    #[test]
    fn a_late_or_stopped_program_is_killed() {
        let sleep = || -> Vec<OsString> { vec!["sleep".into(), "5".into()] };
        let started = Instant::now();
        let late = run(sleep(), true, Duration::from_millis(50), &never);
        assert_eq!(late.err(), Some(Unfinished::Late));
        let stopped = run(sleep(), false, Duration::from_secs(10), &|| true);
        assert_eq!(stopped.err(), Some(Unfinished::Stopped));
        assert!(started.elapsed() < Duration::from_secs(2));
        let message = Unfinished::Late.describe("sleep", Duration::from_millis(50));
        assert_eq!(message, "sleep did not finish within 50 ms");
    }

    #[test]
    fn a_missing_program_cannot_start() {
        let missing = run(
            vec!["/nonexistent/no-such-program".into()],
            false,
            Duration::from_secs(5),
            &never,
        );
        assert!(matches!(missing, Err(Unfinished::Start(_))), "{missing:?}");
    }
}
