//! The canonical paths one confined launch enforces: what the policy
//! resolves in core and what the bubblewrap command line is built from,
//! here so that the remote helper builds the same command line.

use std::path::{Component, Path, PathBuf};

/// Device files a confined command may write (what its Landlock layer
/// grants; bwrap gives a fresh `/dev`).
pub const DEVICE_WRITES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// Secrets under the home directory that confined commands cannot read,
/// locally and on a remote host alike.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
];

/// A path masked from confined commands.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Masked {
    pub path: PathBuf,
    pub is_dir: bool,
}

/// The canonical paths one confined launch enforces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Writable hierarchies (nested duplicates removed).
    pub writable: Vec<PathBuf>,
    /// Read-only carve-outs inside writable hierarchies.
    pub protected: Vec<PathBuf>,
    /// Carve-outs only Landlock can enforce, in both layers: read-only
    /// paths that do not exist (bwrap can bind nothing there) and symbolic
    /// links (bwrap binds their target; the link itself could be
    /// replaced). Their directories accept no new entries.
    pub landlock_protected: Vec<PathBuf>,
    /// Inaccessible paths that exist.
    pub masked: Vec<Masked>,
    /// Granted extra writable paths (applied after carve-outs).
    pub grant_write: Vec<PathBuf>,
    /// Every dir-locals file under the writable roots, protected or not.
    pub dir_locals: Vec<PathBuf>,
    /// Granted extra readable paths (applied after carve-outs).
    pub grant_read: Vec<PathBuf>,
    pub network: bool,
}

/// Whether PATH is ROOT or lies beneath it (both canonical).
pub fn is_within(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}

/// Number of normal components, used to order mounts parent-first.
pub fn depth(path: &Path) -> usize {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}
