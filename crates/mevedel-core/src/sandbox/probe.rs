//! Which confinement layers work here, and why not when they don't.
//!
//! Runs the `mevedel-sandbox` helper's `--probe` (which applies a
//! Landlock ruleset to itself and reports), then bwrap with exactly the
//! namespaces a launch uses around the same helper probe. Results are
//! cached per execution target (and PATH and helper, which decide what
//! runs), because launches consult them on every call. Never confines
//! the calling process; its children start through the process owner,
//! like every other child.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use mevedel_sandbox_protocol::landlock_abi;

use crate::process::bounded::{self, Unfinished};
use crate::sandbox::bwrap;
use crate::sandbox::facts::Probe;

/// What to probe with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Options {
    /// The execution target (only "local" exists so far).
    pub target: String,
    /// PATH used to find bwrap (the caller's, not necessarily ours).
    pub path_var: Option<OsString>,
    pub helper: Option<PathBuf>,
}

impl Options {
    /// The options for TARGET (default "local"), finding bwrap on
    /// PATH_VAR (default: this process's PATH) with HELPER.
    pub fn new(
        target: Option<String>,
        path_var: Option<String>,
        helper: Option<PathBuf>,
    ) -> Options {
        Options {
            target: target.unwrap_or_else(|| "local".into()),
            path_var: path_var
                .map(Into::into)
                .or_else(|| std::env::var_os("PATH")),
            helper,
        }
    }
}

/// Probe for OPTIONS on a background thread (see [`cached`]), giving it
/// TIMEOUT-MS (clamped to 1 ms .. 1 min); the probe's plist answers
/// request ID as its `reply` event.
pub fn start(
    id: i64,
    options: Options,
    timeout_ms: i64,
    refresh: bool,
) -> crate::error::Result<()> {
    let timeout = Duration::from_millis(timeout_ms.clamp(1, 60_000) as u64);
    crate::runtime::spawn_job(id, "probe", None, move || {
        Ok(cached(&options, timeout, refresh).to_datum())
    })
}

/// Find PROGRAM on PATH, as a shell would.
pub fn find_executable(program: &str, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let path_var = path_var?;
    std::env::split_paths(path_var)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Run the probe; each child gets at most what is left of TIMEOUT.
pub fn run(options: &Options, timeout: Duration) -> Probe {
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let (kernel_abi, kernel_problem) = match landlock_abi() {
        Ok(abi) => (Some(abi), None),
        Err(problem) => (None, Some(problem)),
    };
    let mut probe = Probe {
        bwrap_path: find_executable("bwrap", options.path_var.as_deref()),
        bwrap_works: false,
        bwrap_problem: None,
        landlock_abi: kernel_abi,
        landlock_problem: kernel_problem,
        helper_path: options.helper.clone(),
        helper_problem: None,
        landlock_enforced: false,
    };
    let helper = match &options.helper {
        None => {
            probe.helper_problem = Some("no sandbox helper was given".into());
            None
        }
        Some(path) if !is_executable(path) => {
            probe.helper_problem = Some(format!(
                "the sandbox helper {} is missing; rebuild with `make module' or \
                 M-x mevedel-core-build",
                path.display()
            ));
            None
        }
        Some(path) => Some(path.clone()),
    };
    if let Some(helper) = &helper {
        let argv = [helper.clone().into_os_string(), "--probe".into()];
        match run_bounded(&argv, left()) {
            Ok((status, text)) if status.success() => {
                if text.starts_with("landlock=full") {
                    probe.landlock_enforced = true;
                } else if probe.landlock_problem.is_none() {
                    probe.landlock_problem = Some(format!(
                        "the helper could not enforce Landlock: {}",
                        text.trim()
                    ));
                }
            }
            Ok((status, text)) => {
                probe.helper_problem = Some(format!(
                    "the sandbox helper failed its probe ({status}): {}",
                    text.trim()
                ))
            }
            Err(problem) => probe.helper_problem = Some(problem),
        }
    }
    match &probe.bwrap_path {
        None => {
            probe.bwrap_problem =
                Some("bwrap is not installed (Debian/Ubuntu: apt install bubblewrap)".into());
        }
        Some(path) => {
            let inner: Vec<OsString> = match &helper {
                Some(h) => vec![h.clone().into_os_string(), "--probe".into()],
                None => vec!["true".into()],
            };
            match run_bounded(&bwrap::probe_argv(path, &inner), left()) {
                Ok((status, _)) if status.success() => probe.bwrap_works = true,
                Ok((status, text)) => {
                    probe.bwrap_problem = Some(explain_bwrap_failure(&text, status.code()))
                }
                Err(problem) => probe.bwrap_problem = Some(problem),
            }
        }
    }
    probe
}

type CacheMap = HashMap<Options, Probe>;

fn cache() -> &'static Mutex<CacheMap> {
    static CACHE: OnceLock<Mutex<CacheMap>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The cached probe for OPTIONS, probing (within TIMEOUT) when there is
/// none yet or REFRESH is set.
pub fn cached(options: &Options, timeout: Duration, refresh: bool) -> Probe {
    let mut map = cache().lock().unwrap_or_else(PoisonError::into_inner);
    if !refresh && let Some(probe) = map.get(options) {
        return probe.clone();
    }
    let probe = run(options, timeout);
    map.insert(options.clone(), probe.clone());
    probe
}

/// Forget every cached probe (the next launch probes again).
pub fn forget() {
    cache()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

/// Run ARGV through the process owner with combined output captured;
/// kill its group after TIMEOUT.
fn run_bounded(argv: &[OsString], timeout: Duration) -> Result<(ExitStatus, String), String> {
    let name = bounded::program_name(argv);
    match bounded::run(argv.to_vec(), true, timeout, &|| false) {
        Ok(done) => Ok((
            done.status,
            String::from_utf8_lossy(&done.stdout).into_owned(),
        )),
        Err(Unfinished::Late) => Err(format!(
            "{} (mevedel-sandbox-probe-timeout)",
            Unfinished::Late.describe(&name, timeout)
        )),
        Err(other) => Err(other.describe(&name, timeout)),
    }
}

/// Turn bwrap's complaint into advice a user can act on.
fn explain_bwrap_failure(output: &str, code: Option<i32>) -> String {
    let said = output.trim();
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
    fn missing_helper_and_bwrap_are_explained() {
        let options = Options {
            target: "local".into(),
            path_var: Some("/nonexistent".into()),
            helper: Some("/nonexistent/mevedel-sandbox".into()),
        };
        let probe = run(&options, Duration::from_secs(5));
        assert!(!probe.bwrap_works);
        let bwrap = probe.bwrap_usable().err().unwrap_or_default();
        assert!(bwrap.contains("mevedel-sandbox is missing"), "{bwrap}");
        assert!(
            probe
                .bwrap_problem
                .as_deref()
                .unwrap_or("")
                .contains("bwrap is not installed")
        );
        assert!(probe.landlock_usable().is_err());
    }

    #[test]
    fn bwrap_without_helper_still_probes_namespaces() {
        let options = Options {
            target: "local".into(),
            path_var: std::env::var_os("PATH"),
            helper: None,
        };
        let probe = run(&options, Duration::from_secs(10));
        assert!(probe.bwrap_path.is_some(), "bwrap must be installed here");
        assert!(probe.bwrap_works, "{:?}", probe.bwrap_problem);
        assert!(probe.landlock_abi.is_some(), "{:?}", probe.landlock_problem);
        assert_eq!(
            probe.bwrap_usable(),
            Err("no sandbox helper was given".into())
        );
    }

    #[test]
    fn timeout_is_reported() {
        let result = run_bounded(&["sleep".into(), "5".into()], Duration::from_millis(50));
        let problem = result.err().unwrap_or_default();
        assert!(problem.contains("did not finish within 50 ms"), "{problem}");
    }
}
