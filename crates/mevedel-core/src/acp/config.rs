//! What to start and within which limits, and the environment the agent
//! gets: mevedel's own, the configured variables on top, and
//! `IS_SANDBOX=1` when running as root.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// One ACP agent to start.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// The agent's name as the user knows it (`claude-code`); every error
    /// and notice names it.
    pub name: String,
    /// The program, looked up in the PATH of the agent's environment.
    pub command: String,
    pub args: Vec<String>,
    /// Variables set on top of the base environment.
    pub env: Vec<(String, String)>,
    /// The workspace: the agent's working directory and the default
    /// working directory of its sessions.
    pub cwd: PathBuf,
}

/// Limits of one connection.
#[derive(Debug, Clone)]
pub struct Options {
    /// The environment the agent starts from; this process's when `None`.
    pub base_env: Option<Vec<(OsString, OsString)>>,
    /// How long the agent may take to answer `initialize`.
    pub startup_timeout: Duration,
    /// How long `session/new` and `session/load` may take (Claude Code
    /// starts its CLI then: seconds on a loaded machine). A prompt has no
    /// limit: the caller ends a turn with cancel or stop.
    pub request_timeout: Duration,
    /// How long stop waits for cancelled turns to end before killing.
    pub cancel_grace: Duration,
    /// Between SIGTERM and SIGKILL of the agent's processes.
    pub stop_grace: Duration,
    /// How many of the agent's last stderr lines an error or exit reports.
    pub stderr_lines: usize,
    /// Where every stderr line is appended too, when set.
    pub stderr_log: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            base_env: None,
            startup_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            cancel_grace: Duration::from_secs(2),
            stop_grace: Duration::from_millis(500),
            stderr_lines: 20,
            stderr_log: None,
        }
    }
}

/// Whether this process runs as root.
pub fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The agent's environment: BASE with OVERRIDES set on top; AS_ROOT
/// forces `IS_SANDBOX=1`, whatever BASE or OVERRIDES say, because Claude
/// Code refuses to skip its permission prompts as root otherwise, and
/// machines like this one set `IS_SANDBOX=yes`.
pub fn agent_env(
    base: Vec<(OsString, OsString)>,
    overrides: &[(String, String)],
    as_root: bool,
) -> Vec<(OsString, OsString)> {
    let mut vars = base;
    let mut set = |name: &str, value: &str| {
        vars.retain(|(k, _)| k != name);
        vars.push((name.into(), value.into()));
    };
    for (name, value) in overrides {
        set(name, value);
    }
    if as_root {
        set("IS_SANDBOX", "1");
    }
    vars
}
