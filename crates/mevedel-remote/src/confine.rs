//! Confinement of remote commands with the local policy: the workspace
//! the only writable root, its `.git` and `.dir-locals.el` read-only,
//! credentials masked, no network. Enforced by bubblewrap and Landlock
//! where the host has both, by either alone where it has one. The
//! bubblewrap command line and the Landlock rules come from the same
//! code as a local launch's (`mevedel_sandbox_protocol::bwrap`,
//! `mevedel_landlock`): the helper re-executes itself with `--confine`
//! and a [`HelperArgs`] (inside bwrap, or alone), applies the rules to
//! itself and becomes the command.
//!
//! For tests on a machine that has both, `MEVEDEL_REMOTE_NO_SANDBOX` in
//! the helper's environment makes it behave as on a host without them:
//! `1` neither, `bwrap` or `landlock` without that one.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use mevedel_sandbox_protocol::plan::{DEVICE_WRITES, HOME_SECRETS, Masked, Plan};
use mevedel_sandbox_protocol::{EXIT_EXEC_FAILED, EXIT_REFUSED, HelperArgs, bwrap, landlock_abi};

/// The environment variable that makes the helper act as on a host
/// without a sandbox (for tests of the modes that handle one).
const NO_SANDBOX: &str = "MEVEDEL_REMOTE_NO_SANDBOX";

/// Why LAYER (`bwrap`, `landlock`) is unavailable on purpose, if it is.
fn disabled(layer: &str) -> Option<String> {
    let value = std::env::var(NO_SANDBOX).ok()?;
    (value == "1" || value == layer)
        .then(|| format!("{NO_SANDBOX}={value} disables {layer} in this helper"))
}

/// The kernel's Landlock ABI, found once: `Ok(abi)` or `Err(why not)`.
fn landlock() -> &'static Result<u32, String> {
    static FOUND: OnceLock<Result<u32, String>> = OnceLock::new();
    FOUND.get_or_init(|| match disabled("landlock") {
        Some(why) => Err(why),
        None => landlock_abi(),
    })
}

/// Where bubblewrap is on this host and whether it starts, found once:
/// `Ok(path)` or `Err(why not)`.
fn bwrap() -> &'static Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND.get_or_init(|| {
        if let Some(why) = disabled("bwrap") {
            return Err(why);
        }
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
        .flat_map(|home| HOME_SECRETS.iter().map(move |m| home.join(m)))
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

/// What a launch gets: the command line to run, whether and how it is
/// confined, and what it needs beside.
pub struct Launch {
    pub argv: Vec<OsString>,
    /// Why it runs unconfined (None: confined, or confinement is off).
    pub unconfined: Option<String>,
    /// What confines it, in words (None: nothing).
    pub confinement: Option<&'static str>,
    /// Whether it runs inside bwrap, whose own processes die of a
    /// signal the command may want to handle (see `exec::signal`).
    pub in_bwrap: bool,
    /// A private temporary directory (the command's `TMPDIR`) where no
    /// mount namespace gives it a private `/tmp`; removed after the run.
    pub scratch: Option<PathBuf>,
}

/// The launch of INNER in CWD under MODE (`required`, `best-effort` or
/// `off`) with WRITABLE roots; SCRATCH is where a private temporary
/// directory goes if one is needed. `required` without any working
/// sandbox is an error saying why.
pub fn launch(
    mode: &str,
    writable: &[PathBuf],
    cwd: &Path,
    inner: Vec<OsString>,
    scratch: &Path,
) -> Result<Launch, String> {
    let plain = |unconfined| Launch {
        argv: inner.clone(),
        unconfined,
        confinement: None,
        in_bwrap: false,
        scratch: None,
    };
    if mode == "off" {
        return Ok(plain(None));
    }
    let plan = plan(writable);
    let required = mode == "required";
    match (bwrap(), landlock()) {
        (Ok(path), Ok(abi)) => {
            let args = landlock_args(&plan, *abi, required, true, Vec::new(), inner.clone());
            Ok(Launch {
                argv: bwrap::argv(path, &plan, cwd, &trampoline(&args)?),
                unconfined: None,
                confinement: Some("bubblewrap and Landlock"),
                in_bwrap: true,
                scratch: None,
            })
        }
        (Ok(path), Err(_)) => Ok(Launch {
            argv: bwrap::argv(path, &plan, cwd, &inner),
            unconfined: None,
            confinement: Some("bubblewrap"),
            in_bwrap: true,
            scratch: None,
        }),
        (Err(_), Ok(abi)) => {
            std::fs::create_dir_all(scratch).map_err(|e| {
                format!(
                    "cannot create the private TMPDIR {}: {e}",
                    scratch.display()
                )
            })?;
            let args = landlock_args(
                &plan,
                *abi,
                required,
                false,
                vec![scratch.to_path_buf()],
                inner.clone(),
            );
            Ok(Launch {
                argv: trampoline(&args)?,
                unconfined: None,
                confinement: Some("Landlock"),
                in_bwrap: false,
                scratch: Some(scratch.to_path_buf()),
            })
        }
        (Err(no_bwrap), Err(no_landlock)) => {
            let why = format!("{no_bwrap}; {no_landlock}");
            if required {
                Err(format!(
                    "the sandbox is required but this host has none ({why})"
                ))
            } else {
                Ok(plain(Some(why)))
            }
        }
    }
}

/// The Landlock layer of PLAN, as the local launcher builds it: `/`
/// readable, the writable roots (and EXTRA ones) writable, devices
/// usable. Inside bwrap (BWRAP_LAYER) its binds and masks enforce the
/// carve-outs and `/tmp` is private; alone, Landlock enforces them.
fn landlock_args(
    plan: &Plan,
    abi: u32,
    required: bool,
    bwrap_layer: bool,
    extra: Vec<PathBuf>,
    command: Vec<OsString>,
) -> HelperArgs {
    let mut write: Vec<PathBuf> = plan.writable.iter().cloned().chain(extra).collect();
    if bwrap_layer {
        write.extend(["/tmp", "/dev/shm"].map(PathBuf::from));
    }
    write.extend(
        DEVICE_WRITES
            .iter()
            .map(PathBuf::from)
            .filter(|p| bwrap_layer || p.exists()),
    );
    HelperArgs {
        landlock: Some(abi),
        required,
        deny_net: !plan.network,
        read: vec![PathBuf::from("/")],
        write,
        protect: if bwrap_layer {
            Vec::new()
        } else {
            plan.protected.clone()
        },
        deny: if bwrap_layer {
            Vec::new()
        } else {
            plan.masked.iter().map(|m| m.path.clone()).collect()
        },
        command,
        ..HelperArgs::default()
    }
}

/// This helper re-executed with `--confine` and ARGS.
fn trampoline(args: &HelperArgs) -> Result<Vec<OsString>, String> {
    let me =
        std::env::current_exe().map_err(|e| format!("cannot find the helper's own binary: {e}"))?;
    let mut argv = vec![me.into_os_string(), "--confine".into()];
    argv.extend(args.to_args());
    Ok(argv)
}

/// `mevedel-remote --confine ARGS`: apply ARGS' Landlock rules to this
/// process, then become its command. Never returns: a refusal exits
/// with [`EXIT_REFUSED`], a command that cannot run with
/// [`EXIT_EXEC_FAILED`], each saying why on stderr (the run's output).
pub fn enter(args: Vec<OsString>) -> ! {
    let refuse = |why: String| -> ! {
        eprintln!("mevedel-remote: {why}");
        std::process::exit(EXIT_REFUSED);
    };
    let args = HelperArgs::parse(args).unwrap_or_else(|why| refuse(why));
    if let Some(abi) = args.landlock
        && let Err(why) = mevedel_landlock::restrict(&args, abi)
    {
        refuse(why);
    }
    let err = Command::new(&args.command[0])
        .args(&args.command[1..])
        .exec();
    eprintln!(
        "mevedel-remote: cannot execute {}: {err}",
        args.command[0].to_string_lossy()
    );
    std::process::exit(EXIT_EXEC_FAILED);
}
