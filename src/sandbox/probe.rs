//! Which confinement layers work here, and why not when they don't.
//!
//! Runs `bwrap` once with the namespaces the launcher will use and asks
//! the kernel for its Landlock ABI. Never confines the calling process.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::datum::Datum;

/// The outcome of one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub bwrap_path: Option<PathBuf>,
    /// Whether a trivial command ran inside bwrap with fresh namespaces.
    pub bwrap_works: bool,
    /// Why bwrap is unusable, when it is.
    pub bwrap_problem: Option<String>,
    /// The kernel's Landlock ABI version, when Landlock is enabled.
    pub landlock_abi: Option<u32>,
    pub landlock_problem: Option<String>,
}

impl Probe {
    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            (
                "bwrap-path",
                Datum::opt_str(self.bwrap_path.as_ref().map(|p| p.display().to_string())),
            ),
            ("bwrap-works", Datum::bool(self.bwrap_works)),
            ("bwrap-problem", Datum::opt_str(self.bwrap_problem.clone())),
            (
                "landlock-abi",
                self.landlock_abi
                    .map_or(Datum::Nil, |v| Datum::Int(v.into())),
            ),
            (
                "landlock-problem",
                Datum::opt_str(self.landlock_problem.clone()),
            ),
        ])
    }
}

/// Find PROGRAM on PATH, as a shell would.
pub fn find_executable(program: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path_var = path_var?;
    std::env::split_paths(path_var)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            candidate
                .metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Run the probe, giving bwrap at most TIMEOUT to start and exit.
pub fn run(timeout: Duration) -> Probe {
    let bwrap_path = find_executable("bwrap", std::env::var_os("PATH").as_deref());
    let (bwrap_works, bwrap_problem) = match &bwrap_path {
        None => (
            false,
            Some("bwrap is not installed (Debian/Ubuntu: apt install bubblewrap)".into()),
        ),
        Some(path) => match try_bwrap(path, timeout) {
            Ok(()) => (true, None),
            Err(problem) => (false, Some(problem)),
        },
    };
    let (landlock_abi, landlock_problem) = match landlock_abi() {
        Ok(abi) => (Some(abi), None),
        Err(problem) => (None, Some(problem)),
    };
    Probe {
        bwrap_path,
        bwrap_works,
        bwrap_problem,
        landlock_abi,
        landlock_problem,
    }
}

fn try_bwrap(bwrap: &Path, timeout: Duration) -> std::result::Result<(), String> {
    let mut child = Command::new(bwrap)
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args([
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
    let mut stderr = child.stderr.take();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(err) = stderr.as_mut() {
            let _ = err.read_to_string(&mut text);
        }
        let _ = tx.send((child.wait(), text));
    });
    match rx.recv_timeout(timeout) {
        Ok((Ok(status), _)) if status.success() => Ok(()),
        Ok((Ok(status), text)) => Err(explain_bwrap_failure(&text, status.code())),
        Ok((Err(e), _)) => Err(format!("waiting for bwrap failed: {e}")),
        Err(_) => {
            // SAFETY: signalling the child we started; the waiter thread reaps it.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            Err(format!(
                "bwrap did not finish within {} ms",
                timeout.as_millis()
            ))
        }
    }
}

/// Turn bwrap's complaint into advice a user can act on.
fn explain_bwrap_failure(stderr: &str, code: Option<i32>) -> String {
    let said = stderr.trim();
    let userns_blocked = said.contains("setting up uid map")
        || said.contains("No permissions to create new namespace")
        || said.contains("Operation not permitted");
    if userns_blocked {
        format!(
            "bwrap cannot create user namespaces ({said}). On Ubuntu 24.04+ AppArmor blocks them: \
             run 'sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0' or install an \
             AppArmor profile for bwrap; elsewhere check 'sysctl kernel.unprivileged_userns_clone'"
        )
    } else {
        format!(
            "bwrap failed (exit {}): {said}",
            code.map_or("?".into(), |c| c.to_string())
        )
    }
}

/// Ask the kernel for its Landlock ABI without creating a ruleset.
fn landlock_abi() -> std::result::Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and size 0 this syscall only reports
    // the ABI version; it creates nothing and confines nothing.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi >= 1 {
        return u32::try_from(abi).map_err(|_| format!("unexpected Landlock ABI {abi}"));
    }
    let err = std::io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no Landlock support (needs Linux 5.13+)".into(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built in but disabled: add 'landlock' to the kernel's lsm= boot parameter"
                .into()
        }
        _ => format!("Landlock probe failed: {err}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_executable_walks_path() {
        let path = std::ffi::OsString::from("/nonexistent:/bin:/usr/bin");
        assert!(find_executable("sh", Some(&path)).is_some());
        assert!(find_executable("no-such-program-here", Some(&path)).is_none());
        assert!(find_executable("sh", None).is_none());
    }

    #[test]
    fn userns_failures_get_the_apparmor_advice() {
        let text = explain_bwrap_failure("bwrap: setting up uid map: Permission denied", Some(1));
        assert!(text.contains("apparmor_restrict_unprivileged_userns"));
        let other = explain_bwrap_failure("bwrap: Can't find source path /x", Some(1));
        assert!(other.starts_with("bwrap failed (exit 1)"));
    }

    #[test]
    fn probe_reports_each_layer() {
        let probe = run(Duration::from_secs(5));
        assert_eq!(probe.bwrap_works, probe.bwrap_problem.is_none());
        assert_eq!(
            probe.landlock_abi.is_some(),
            probe.landlock_problem.is_none()
        );
    }
}
