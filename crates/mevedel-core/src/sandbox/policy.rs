//! What a confined command may touch, and which boundary enforces it.
//!
//! [`decide`] maps the user's mode, the probe and the call's approvals to
//! a [`Decision`]; [`resolve`] turns a [`Policy`] into a [`Plan`] of
//! canonical paths that both launch layers (bwrap binds and the Landlock
//! helper's rules) enforce the same way:
//!
//! - everything is readable, nothing is writable, except the writable
//!   roots (workspace, session scratch, artifact directory; `/tmp` is
//!   private);
//! - inside writable roots every `.git`, every `.dir-locals.el` and
//!   `.dir-locals-2.el` (unless allowed), the session's own state and the
//!   user's startup files (a list from Lisp) stay read-only; a startup
//!   file that does not exist yet cannot be created (Landlock only);
//! - [`HOME_SECRETS`] and any extra inaccessible path cannot be read;
//! - the network is denied unless this call was granted it;
//! - exact extra read/write paths, granted through the permission prompt,
//!   are applied last, so they may reopen a protected spot on purpose.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::sandbox::facts::Probe;
use crate::sandbox::scan::{self, Scanner};

/// `mevedel-sandbox-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Run commands directly.
    Off,
    /// Confine when a layer works; disclose direct execution otherwise.
    #[default]
    BestEffort,
    /// Refuse to run when bubblewrap cannot confine.
    Required,
}

/// Which layer to prefer (`mevedel-sandbox-backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// bubblewrap plus the Landlock helper; Landlock alone where
    /// bubblewrap cannot start (best-effort only).
    #[default]
    Auto,
    /// The Landlock helper alone (for hosts where bwrap misbehaves).
    Landlock,
}

/// The boundary that applied to one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// bubblewrap namespaces plus the Landlock helper.
    BwrapLandlock,
    /// bubblewrap only (kernel without Landlock).
    Bwrap,
    /// The Landlock helper only (bubblewrap cannot start).
    Landlock,
    /// No layer was available; best-effort ran the command directly.
    Unconfined,
    /// `mevedel-sandbox-mode` is `off`.
    Off,
    /// Approved `require_escalated`: ran outside the sandbox.
    Escalated,
    /// Not run.
    Refused,
}

impl Boundary {
    /// The Lisp symbol naming this boundary.
    pub fn symbol(self) -> &'static str {
        match self {
            Boundary::BwrapLandlock => "bwrap-landlock",
            Boundary::Bwrap => "bwrap",
            Boundary::Landlock => "landlock",
            Boundary::Unconfined => "unconfined",
            Boundary::Off => "off",
            Boundary::Escalated => "escalated",
            Boundary::Refused => "refused",
        }
    }

    /// The boundary named by SYMBOL (see [`Boundary::symbol`]).
    pub fn from_symbol(symbol: &str) -> Option<Boundary> {
        [
            Boundary::BwrapLandlock,
            Boundary::Bwrap,
            Boundary::Landlock,
            Boundary::Unconfined,
            Boundary::Off,
            Boundary::Escalated,
            Boundary::Refused,
        ]
        .into_iter()
        .find(|b| b.symbol() == symbol)
    }

    /// Whether this is what a healthy machine gives by default.
    pub fn is_default(self) -> bool {
        matches!(self, Boundary::BwrapLandlock | Boundary::Bwrap)
    }
}

/// The confinement asked for one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    pub mode: Mode,
    pub backend: Backend,
    /// Workspace, session scratch, artifact directory.
    pub writable: Vec<PathBuf>,
    /// The session's own state (`.mevedel`): read-only even when inside a
    /// writable root.
    pub state_dirs: Vec<PathBuf>,
    /// The home directory whose [`HOME_SECRETS`] are masked.
    pub home: Option<PathBuf>,
    /// More paths to make inaccessible.
    pub inaccessible: Vec<PathBuf>,
    /// Paths (existing or not) that stay read-only even inside a writable
    /// root: the user's startup and credential files.
    pub read_only: Vec<PathBuf>,
    /// Let commands write `.dir-locals.el` and `.dir-locals-2.el`.
    pub allow_dir_locals: bool,
    /// Additive permission: network access for this call.
    pub network: bool,
    /// Additive permission: exact extra writable paths.
    pub extra_write: Vec<PathBuf>,
    /// Additive permission: exact extra readable paths.
    pub extra_read: Vec<PathBuf>,
    /// `require_escalated` was approved: run outside the sandbox.
    pub escalated: bool,
}

/// How to run one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Confine with bubblewrap (when `bwrap`) and the helper, which applies
    /// Landlock with the features of `landlock` (an ABI version) if any.
    Confine {
        bwrap: bool,
        landlock: Option<u32>,
        /// Non-default facts the user should see (degraded layers).
        disclosure: Option<String>,
    },
    /// Run directly, with the reason the user is told.
    Direct {
        boundary: Boundary,
        disclosure: String,
    },
    /// Do not run.
    Refuse(String),
}

impl Decision {
    pub fn boundary(&self) -> Boundary {
        match self {
            Decision::Confine {
                bwrap: true,
                landlock: Some(_),
                ..
            } => Boundary::BwrapLandlock,
            Decision::Confine {
                bwrap: true,
                landlock: None,
                ..
            } => Boundary::Bwrap,
            Decision::Confine { bwrap: false, .. } => Boundary::Landlock,
            Decision::Direct { boundary, .. } => *boundary,
            Decision::Refuse(_) => Boundary::Refused,
        }
    }

    /// What the user is told about the boundary (degraded layers, or why
    /// the command runs directly), and why it does not run at all.
    pub fn disclosure_and_refusal(&self) -> (Option<String>, Option<String>) {
        match self {
            Decision::Confine { disclosure, .. } => (disclosure.clone(), None),
            Decision::Direct { disclosure, .. } => (Some(disclosure.clone()), None),
            Decision::Refuse(why) => (None, Some(why.clone())),
        }
    }

    /// `(:boundary SYMBOL :disclosure TEXT :refusal TEXT)`.
    pub fn to_datum(&self) -> Datum {
        let (disclosure, refusal) = self.disclosure_and_refusal();
        Datum::plist([
            ("boundary", Datum::Symbol(self.boundary().symbol().into())),
            ("disclosure", Datum::opt_str(disclosure)),
            ("refusal", Datum::opt_str(refusal)),
        ])
    }
}

/// Landlock ABI that restricts TCP connect/bind.
pub const LANDLOCK_NET_ABI: u32 = 4;

/// Choose the boundary for POLICY given what PROBE found.
pub fn decide(policy: &Policy, probe: &Probe) -> Decision {
    if policy.escalated {
        return Decision::Direct {
            boundary: Boundary::Escalated,
            disclosure: "ran outside the sandbox (require_escalated was approved)".into(),
        };
    }
    if policy.mode == Mode::Off {
        return Decision::Direct {
            boundary: Boundary::Off,
            disclosure: "ran unconfined: mevedel-sandbox-mode is off".into(),
        };
    }
    let landlock_only = || -> std::result::Result<Decision, String> {
        let abi = probe.landlock_usable()?;
        if !policy.network && abi < LANDLOCK_NET_ABI {
            let why = format!(
                "Landlock ABI {abi} cannot deny network access (needs ABI {LANDLOCK_NET_ABI})"
            );
            if policy.mode == Mode::Required {
                return Err(why);
            }
            return Ok(Decision::Confine {
                bwrap: false,
                landlock: Some(abi),
                disclosure: Some(format!("confined by Landlock only; {why}")),
            });
        }
        Ok(Decision::Confine {
            bwrap: false,
            landlock: Some(abi),
            disclosure: Some(
                "confined by Landlock only: no PID or network namespace (TCP is denied, \
                 other protocols are not), and directories holding protected paths accept \
                 no new entries"
                    .into(),
            ),
        })
    };
    let unavailable = |why: String| {
        if policy.mode == Mode::Required {
            Decision::Refuse(format!(
                "not run: mevedel-sandbox-mode is required but {why}"
            ))
        } else {
            Decision::Direct {
                boundary: Boundary::Unconfined,
                disclosure: format!("ran unconfined because no sandbox layer works: {why}"),
            }
        }
    };
    match policy.backend {
        Backend::Landlock => match landlock_only() {
            Ok(decision) => decision,
            Err(why) => unavailable(why),
        },
        Backend::Auto => match probe.bwrap_usable() {
            Ok(()) => Decision::Confine {
                bwrap: true,
                landlock: probe.landlock_usable().ok(),
                disclosure: None,
            },
            Err(bwrap_why) if policy.mode == Mode::Required => unavailable(bwrap_why),
            Err(bwrap_why) => match landlock_only() {
                Ok(Decision::Confine {
                    bwrap,
                    landlock,
                    disclosure,
                }) => Decision::Confine {
                    bwrap,
                    landlock,
                    disclosure: Some(format!(
                        "{}; bubblewrap: {bwrap_why}",
                        disclosure.unwrap_or_default()
                    )),
                },
                Ok(other) => other,
                Err(landlock_why) => unavailable(format!("{bwrap_why}; {landlock_why}")),
            },
        },
    }
}

pub use mevedel_sandbox_protocol::plan::{HOME_SECRETS, Masked, Plan, depth, is_within};

fn canonical(path: &Path, what: &str) -> Result<PathBuf> {
    if !path.is_absolute() {
        return Err(Error::new(
            ErrorKind::Sandbox,
            format!("{what} {} is not an absolute path", path.display()),
        ));
    }
    std::fs::canonicalize(path).map_err(|e| {
        Error::new(
            ErrorKind::Sandbox,
            format!("{what} {} cannot be used: {e}", path.display()),
        )
    })
}

/// Drop paths that lie inside another path of the list; sort the rest.
fn outermost(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let mut out: Vec<PathBuf> = Vec::new();
    for path in paths {
        if !out.iter().any(|kept| is_within(&path, kept)) {
            out.push(path);
        }
    }
    out
}

/// PATH with its parent resolved as far as it exists (the rest does not
/// exist, or is the link itself), so it compares with canonical roots.
/// PARENTS caches the answer for each parent.
fn beneath_real_parent(
    path: &Path,
    parents: &mut std::collections::HashMap<PathBuf, PathBuf>,
) -> PathBuf {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return path.to_path_buf();
    };
    if let Some(real) = parents.get(parent) {
        return real.join(name);
    }
    let real =
        std::fs::canonicalize(parent).unwrap_or_else(|_| beneath_real_parent(parent, parents));
    parents.insert(parent.to_path_buf(), real.clone());
    real.join(name)
}

/// Resolve POLICY's paths for a confined launch. Writable roots and
/// granted paths must exist; secrets that do not exist are skipped.
pub fn resolve(policy: &Policy, scanner: &Scanner) -> Result<Plan> {
    let writable = outermost(
        policy
            .writable
            .iter()
            .map(|p| canonical(p, "writable root"))
            .collect::<Result<Vec<_>>>()?,
    );
    if writable.iter().any(|w| w == Path::new("/")) {
        return Err(Error::new(
            ErrorKind::Sandbox,
            "the whole file system cannot be a writable root; run unconfined instead \
             (mevedel-sandbox-mode off, or an approved require_escalated)",
        ));
    }
    let grant_write = policy
        .extra_write
        .iter()
        .map(|p| canonical(p, "additional write path"))
        .collect::<Result<Vec<_>>>()?;
    let grant_read = policy
        .extra_read
        .iter()
        .map(|p| canonical(p, "additional read path"))
        .collect::<Result<Vec<_>>>()?;
    let write_hierarchies: Vec<&PathBuf> = writable.iter().chain(&grant_write).collect();
    let inside_writable = |p: &Path| write_hierarchies.iter().any(|w| is_within(p, w));

    let mut protected = Vec::new();
    for root in &write_hierarchies {
        if root.is_dir() {
            protected.extend(scanner.protected_under(root)?.0);
        }
    }
    let dir_locals: Vec<PathBuf> = protected
        .iter()
        .filter(|p| scan::is_dir_locals(p))
        .cloned()
        .collect();
    for dir in &policy.state_dirs {
        if let Ok(dir) = std::fs::canonicalize(dir) {
            protected.push(dir);
        }
    }
    if policy.allow_dir_locals {
        protected.retain(|p| !scan::is_dir_locals(p));
    }
    let mut landlock_protected = Vec::new();
    let mut parents = std::collections::HashMap::new();
    for path in &policy.read_only {
        if !path.is_absolute() {
            return Err(Error::new(
                ErrorKind::Sandbox,
                format!("read-only path {} is not absolute", path.display()),
            ));
        }
        // Most of the list lies outside every writable root: tell that
        // from the resolved parent alone (shared by many entries).
        let lexical = beneath_real_parent(path, &mut parents);
        if !inside_writable(&lexical) && !write_hierarchies.iter().any(|w| is_within(w, &lexical)) {
            continue;
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) => {
                if meta.file_type().is_symlink() {
                    landlock_protected.push(lexical);
                }
                if let Ok(real) = std::fs::canonicalize(path) {
                    protected.push(real);
                }
            }
            Err(_) => landlock_protected.push(lexical),
        }
    }
    protected.retain(|p| inside_writable(p));
    landlock_protected.retain(|p| inside_writable(p));
    landlock_protected.sort();
    landlock_protected.dedup();

    let mut secret_paths: Vec<PathBuf> = policy.inaccessible.clone();
    if let Some(home) = &policy.home {
        secret_paths.extend(HOME_SECRETS.iter().map(|s| home.join(s)));
    }
    let mut masked = Vec::new();
    for path in secret_paths {
        if !path.is_absolute() {
            return Err(Error::new(
                ErrorKind::Sandbox,
                format!("inaccessible path {} is not absolute", path.display()),
            ));
        }
        if let Ok(real) = std::fs::canonicalize(&path)
            && real != Path::new("/")
        {
            let is_dir = real.is_dir();
            masked.push(Masked { path: real, is_dir });
        }
    }
    masked.sort();
    masked.dedup();
    protected.retain(|p| !masked.iter().any(|m| is_within(p, &m.path)));
    protected.sort();
    protected.dedup();

    Ok(Plan {
        writable,
        protected,
        landlock_protected,
        dir_locals,
        masked,
        grant_write,
        grant_read,
        network: policy.network,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::scan::Limits;
    use crate::testdir::TestDir;

    fn probe(bwrap: bool, landlock: Option<u32>) -> Probe {
        Probe {
            bwrap_path: bwrap.then(|| PathBuf::from("/usr/bin/bwrap")),
            bwrap_works: bwrap,
            bwrap_problem: (!bwrap).then(|| "bwrap is not installed".to_string()),
            landlock_abi: landlock,
            landlock_problem: landlock
                .is_none()
                .then(|| "the kernel has no Landlock support".to_string()),
            helper_path: Some(PathBuf::from("/m/mevedel-sandbox")),
            helper_problem: None,
            landlock_enforced: landlock.is_some(),
        }
    }

    fn policy(mode: Mode) -> Policy {
        Policy {
            mode,
            ..Policy::default()
        }
    }

    #[test]
    fn full_machine_confines_with_both_layers() {
        let d = decide(&policy(Mode::BestEffort), &probe(true, Some(7)));
        assert_eq!(d.boundary(), Boundary::BwrapLandlock);
        assert_eq!(
            d,
            Decision::Confine {
                bwrap: true,
                landlock: Some(7),
                disclosure: None
            }
        );
        let d = decide(&policy(Mode::Required), &probe(true, None));
        assert_eq!(d.boundary(), Boundary::Bwrap);
    }

    #[test]
    fn missing_bwrap_best_effort_falls_to_landlock_and_says_so() {
        let d = decide(&policy(Mode::BestEffort), &probe(false, Some(7)));
        assert_eq!(d.boundary(), Boundary::Landlock);
        let Decision::Confine { disclosure, .. } = d else {
            panic!("not confined")
        };
        let text = disclosure.unwrap_or_default();
        assert!(text.contains("Landlock only"), "{text}");
        assert!(text.contains("bwrap is not installed"), "{text}");
    }

    #[test]
    fn missing_everything_best_effort_discloses_direct_run() {
        let d = decide(&policy(Mode::BestEffort), &probe(false, None));
        let Decision::Direct {
            boundary,
            disclosure,
        } = d
        else {
            panic!("not direct")
        };
        assert_eq!(boundary, Boundary::Unconfined);
        assert!(
            disclosure.contains("bwrap is not installed"),
            "{disclosure}"
        );
    }

    #[test]
    fn required_refuses_without_bwrap_even_with_landlock() {
        for landlock in [None, Some(7)] {
            let d = decide(&policy(Mode::Required), &probe(false, landlock));
            let Decision::Refuse(why) = d else {
                panic!("not refused")
            };
            assert!(why.contains("required"), "{why}");
            assert!(why.contains("bwrap is not installed"), "{why}");
        }
    }

    #[test]
    fn landlock_backend_and_old_abi_network() {
        let mut p = policy(Mode::Required);
        p.backend = Backend::Landlock;
        assert_eq!(
            decide(&p, &probe(true, Some(7))).boundary(),
            Boundary::Landlock
        );
        // ABI 3 cannot deny TCP: required refuses, best-effort discloses.
        assert!(matches!(
            decide(&p, &probe(true, Some(3))),
            Decision::Refuse(_)
        ));
        p.network = true;
        assert_eq!(
            decide(&p, &probe(true, Some(3))).boundary(),
            Boundary::Landlock
        );
        p.network = false;
        p.mode = Mode::BestEffort;
        let Decision::Confine { disclosure, .. } = decide(&p, &probe(true, Some(3))) else {
            panic!("not confined")
        };
        assert!(
            disclosure
                .unwrap_or_default()
                .contains("cannot deny network")
        );
    }

    #[test]
    fn off_and_escalated_run_directly() {
        assert_eq!(
            decide(&policy(Mode::Off), &probe(true, Some(7))).boundary(),
            Boundary::Off
        );
        let mut p = policy(Mode::Required);
        p.escalated = true;
        assert_eq!(
            decide(&p, &probe(false, None)).boundary(),
            Boundary::Escalated
        );
    }

    #[test]
    fn boundary_symbols_and_defaults() {
        assert_eq!(Boundary::BwrapLandlock.symbol(), "bwrap-landlock");
        assert!(Boundary::Bwrap.is_default());
        for b in [
            Boundary::Landlock,
            Boundary::Unconfined,
            Boundary::Off,
            Boundary::Escalated,
            Boundary::Refused,
        ] {
            assert!(!b.is_default(), "{}", b.symbol());
        }
    }

    #[test]
    fn startup_files_and_dir_locals_stay_read_only_in_a_writable_home() {
        let dir = TestDir::new("policy-home");
        dir.mkdirs(&["home/.emacs.d", "home/src/deep", "home/dots"]);
        dir.write("home/.bashrc", "x");
        dir.write("home/.dir-locals.el", "()");
        dir.write("home/src/deep/.dir-locals-2.el", "()");
        dir.write("home/dots/gitconfig", "x");
        let home = dir.path().join("home");
        std::os::unix::fs::symlink(home.join("dots/gitconfig"), home.join(".gitconfig")).unwrap();
        let mut p = Policy {
            writable: vec![home.clone()],
            read_only: [".bashrc", ".profile", ".gitconfig", ".emacs.d/init.el"]
                .iter()
                .map(|f| home.join(f))
                .chain([PathBuf::from("/etc/outside-any-root")])
                .collect(),
            ..Policy::default()
        };
        let plan = resolve(&p, &Scanner::new(Limits::default())).unwrap();
        for f in [
            ".bashrc",
            "dots/gitconfig",
            ".dir-locals.el",
            "src/deep/.dir-locals-2.el",
        ] {
            assert!(plan.protected.contains(&home.join(f)), "{f}: {plan:?}");
        }
        // Missing files and the link itself: Landlock keeps them from
        // being created or replaced.
        assert_eq!(
            plan.landlock_protected,
            [".emacs.d/init.el", ".gitconfig", ".profile"]
                .map(|f| home.join(f))
                .to_vec()
        );
        p.allow_dir_locals = true;
        let plan = resolve(&p, &Scanner::new(Limits::default())).unwrap();
        assert!(!plan.protected.iter().any(|f| scan::is_dir_locals(f)));
        assert!(plan.protected.contains(&home.join(".bashrc")));
    }

    #[test]
    fn resolve_protects_git_state_and_masks_secrets() {
        let dir = TestDir::new("policy");
        dir.mkdirs(&[
            "ws/.git/hooks",
            "ws/sub/.git",
            "ws/.mevedel",
            "home/.ssh",
            "home/.config/gcloud",
            "other/.git",
            "grant",
        ]);
        dir.write("home/.netrc", "machine x");
        let root = dir.path();
        let scanner = Scanner::new(Limits::default());
        let p = Policy {
            writable: vec![root.join("ws"), root.join("ws/sub")],
            state_dirs: vec![root.join("ws/.mevedel"), root.join("missing")],
            home: Some(root.join("home")),
            inaccessible: vec![root.join("home/.netrc")],
            extra_write: vec![root.join("grant")],
            extra_read: vec![root.join("home/.ssh")],
            ..Policy::default()
        };
        let plan = resolve(&p, &scanner).unwrap();
        assert_eq!(plan.writable, vec![root.join("ws")]);
        assert_eq!(
            plan.protected,
            vec![
                root.join("ws/.git"),
                root.join("ws/.mevedel"),
                root.join("ws/sub/.git")
            ]
        );
        assert_eq!(
            plan.masked,
            vec![
                Masked {
                    path: root.join("home/.config/gcloud"),
                    is_dir: true
                },
                Masked {
                    path: root.join("home/.netrc"),
                    is_dir: false
                },
                Masked {
                    path: root.join("home/.ssh"),
                    is_dir: true
                },
            ]
        );
        assert_eq!(plan.grant_write, vec![root.join("grant")]);
        assert_eq!(plan.grant_read, vec![root.join("home/.ssh")]);
        assert!(!plan.network);
    }

    #[test]
    fn resolve_names_bad_paths() {
        let scanner = Scanner::new(Limits::default());
        let p = Policy {
            writable: vec![PathBuf::from("relative/ws")],
            ..Policy::default()
        };
        let err = resolve(&p, &scanner).expect_err("accepted");
        assert!(err.message.contains("relative/ws"), "{}", err.message);
        let p = Policy {
            extra_write: vec![PathBuf::from("/nonexistent/grant")],
            ..Policy::default()
        };
        let err = resolve(&p, &scanner).expect_err("accepted");
        assert!(
            err.message
                .contains("additional write path /nonexistent/grant")
        );
        let p = Policy {
            writable: vec![PathBuf::from("/")],
            ..Policy::default()
        };
        let err = resolve(&p, &scanner).expect_err("accepted");
        assert!(err.message.contains("whole file system"), "{}", err.message);
    }

    #[test]
    fn depth_and_within() {
        assert_eq!(depth(Path::new("/")), 0);
        assert_eq!(depth(Path::new("/a/b")), 2);
        assert!(is_within(Path::new("/a/b"), Path::new("/a")));
        assert!(!is_within(Path::new("/ab"), Path::new("/a")));
    }
}
