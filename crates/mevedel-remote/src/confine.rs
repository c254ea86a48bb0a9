//! Confinement of remote commands with the local policy: bubblewrap on
//! the host when it can start there, the workspace the only writable
//! root, its `.git` and `.dir-locals.el` read-only, credentials masked,
//! no network. The command line comes from the same code as a local
//! launch's (`mevedel_sandbox_protocol::bwrap`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use mevedel_sandbox_protocol::bwrap;
use mevedel_sandbox_protocol::plan::{Masked, Plan};

/// Credentials under the home directory no confined command may see,
/// as locally.
const MASKED_IN_HOME: [&str; 6] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
];

/// Where bubblewrap is on this host and whether it starts, found once:
/// `Ok(path)` or `Err(why not)`.
fn bwrap() -> &'static Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
            .map(|d| d.join("bwrap"))
            .find(|p| p.is_file())
            .ok_or_else(|| "bubblewrap (bwrap) is not installed".to_string())?;
        let argv = bwrap::probe_argv(&path, &["/bin/true".into()]);
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("bwrap cannot run: {e}"))?;
        if out.status.success() {
            Ok(path)
        } else {
            Err(format!(
                "bwrap cannot start its namespaces: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    })
}

/// The plan for WRITABLE roots: each canonical, with its `.git` and
/// `.dir-locals.el` kept read-only; credentials in HOME masked.
fn plan(writable: &[PathBuf]) -> Plan {
    let roots: Vec<PathBuf> = writable
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    let protected = roots
        .iter()
        .flat_map(|r| [r.join(".git"), r.join(".dir-locals.el")])
        .filter(|p| p.exists())
        .collect();
    let masked = std::env::var_os("HOME")
        .map(PathBuf::from)
        .into_iter()
        .flat_map(|home| MASKED_IN_HOME.map(|m| home.join(m)))
        .filter_map(|p| {
            let meta = std::fs::symlink_metadata(&p).ok()?;
            Some(Masked {
                path: std::fs::canonicalize(&p).ok()?,
                is_dir: meta.is_dir(),
            })
        })
        .collect();
    Plan {
        writable: roots,
        protected,
        masked,
        ..Plan::default()
    }
}

/// What a launch gets: the command line to run, and whether it is confined.
pub struct Launch {
    pub argv: Vec<OsString>,
    /// Why it runs unconfined (None: confined, or confinement is off).
    pub unconfined: Option<String>,
}

/// The launch of INNER in CWD under MODE (`required`, `best-effort` or
/// `off`) with WRITABLE roots. `required` without a working sandbox is
/// an error saying why.
pub fn launch(
    mode: &str,
    writable: &[PathBuf],
    cwd: &Path,
    inner: Vec<OsString>,
) -> Result<Launch, String> {
    if mode == "off" {
        return Ok(Launch {
            argv: inner,
            unconfined: None,
        });
    }
    match bwrap() {
        Ok(path) => Ok(Launch {
            argv: bwrap::argv(path, &plan(writable), cwd, &inner),
            unconfined: None,
        }),
        Err(why) if mode == "required" => Err(format!(
            "the sandbox is required but this host has none ({why})"
        )),
        Err(why) => Ok(Launch {
            argv: inner,
            unconfined: Some(why.clone()),
        }),
    }
}
