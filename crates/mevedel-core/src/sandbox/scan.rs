//! Discovery of protected entries (every `.git`, and every
//! `.dir-locals.el` and `.dir-locals-2.el`, which Emacs evaluates when it
//! visits a file beneath) under writable roots.
//!
//! A repository's hooks and config must stay read-only even though the
//! workspace around them is writable, so each launch needs to know where
//! every `.git` is. Walking a large tree on every call is too slow, so a
//! result is cached per root together with the identity and mtime of
//! every directory walked: creating, removing or renaming any entry
//! changes its parent directory's mtime, so re-checking those stamps
//! (one `lstat` per directory, no `readdir`) proves the cached answer is
//! still right. A directory modified within [`RACY_MARGIN`] of the walk
//! is never trusted, because timestamps are coarse and a later change in
//! the same tick would leave its mtime unchanged.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, ErrorKind, Result};

/// Entry names that are protected wherever they appear.
pub const PROTECTED_NAMES: &[&str] = &[".git", ".dir-locals.el", ".dir-locals-2.el"];

/// Whether PATH names a directory-local variables file.
pub fn is_dir_locals(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == ".dir-locals.el" || n == ".dir-locals-2.el")
}

/// Directories changed this close to the walk are re-walked next time.
pub const RACY_MARGIN: Duration = Duration::from_secs(2);

/// Bounds of one walk; a walk that exceeds them fails (and so refuses the
/// launch) instead of returning a partial answer.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_entries: usize,
    pub max_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries: 1_000_000,
            max_time: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime_ns: i128,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        })
    }
}

#[derive(Debug, Clone)]
struct Walk {
    dirs: Vec<(PathBuf, Stamp)>,
    found: Vec<PathBuf>,
    /// Start of the walk minus the racy margin, in ns since the epoch.
    trusted_before_ns: i128,
}

impl Walk {
    fn still_valid(&self) -> bool {
        self.dirs.iter().all(|(dir, stamp)| {
            stamp.mtime_ns < self.trusted_before_ns && Stamp::of(dir) == Some(*stamp)
        })
    }
}

/// How the last answer for a root was obtained (for tests and benches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Walked,
    Cached,
}

/// A cache of walks, one per root.
#[derive(Default)]
pub struct Scanner {
    walks: Mutex<HashMap<PathBuf, Walk>>,
    limits: Limits,
}

impl Scanner {
    pub fn new(limits: Limits) -> Self {
        Scanner {
            walks: Mutex::new(HashMap::new()),
            limits,
        }
    }

    /// Every protected entry under ROOT (a canonical directory), sorted.
    /// Symbolic links named `.git` are reported by their canonical target.
    pub fn protected_under(&self, root: &Path) -> Result<(Vec<PathBuf>, Source)> {
        if let Some(walk) = self
            .walks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(root)
            && walk.still_valid()
        {
            return Ok((walk.found.clone(), Source::Cached));
        }
        let walk = walk(root, self.limits)?;
        let found = walk.found.clone();
        self.walks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(root.to_path_buf(), walk);
        Ok((found, Source::Walked))
    }
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

fn walk(root: &Path, limits: Limits) -> Result<Walk> {
    if let Err(e) = std::fs::symlink_metadata(root) {
        return Err(Error::io(
            ErrorKind::Sandbox,
            &format!("cannot scan writable root {}", root.display()),
            &e,
        ));
    }
    let started = Instant::now();
    let trusted_before_ns = now_ns() - RACY_MARGIN.as_nanos() as i128;
    let mut dirs = Vec::new();
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut entries = 0usize;
    while let Some(dir) = stack.pop() {
        let Some(stamp) = Stamp::of(&dir) else {
            // Vanished since its parent was read: the parent's stamp
            // changes too, so the next call walks again.
            continue;
        };
        let reader = match std::fs::read_dir(&dir) {
            Ok(reader) => reader,
            Err(e) if dir == root => {
                return Err(Error::io(
                    ErrorKind::Sandbox,
                    &format!("cannot scan writable root {}", root.display()),
                    &e,
                ));
            }
            // An unreadable subdirectory cannot be entered by the command
            // either; remember its stamp so a permission change shows.
            Err(_) => {
                dirs.push((dir, stamp));
                continue;
            }
        };
        dirs.push((dir.clone(), stamp));
        for entry in reader {
            let Ok(entry) = entry else { continue };
            entries += 1;
            if entries > limits.max_entries || started.elapsed() > limits.max_time {
                return Err(Error::new(
                    ErrorKind::Sandbox,
                    format!(
                        "scanning {} for protected paths did not finish ({} entries, {} ms); \
                         narrow the writable roots",
                        root.display(),
                        entries,
                        started.elapsed().as_millis()
                    ),
                ));
            }
            let name = entry.file_name();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if PROTECTED_NAMES.iter().any(|p| name == *p) {
                if kind.is_symlink() {
                    if let Ok(target) = std::fs::canonicalize(&path) {
                        found.push(target);
                    }
                } else {
                    found.push(path);
                }
            } else if kind.is_dir() {
                stack.push(path);
            }
        }
    }
    found.sort();
    found.dedup();
    Ok(Walk {
        dirs,
        found,
        trusted_before_ns,
    })
}

/// The process-wide scanner used by launches.
pub fn global() -> &'static Scanner {
    static SCANNER: OnceLock<Scanner> = OnceLock::new();
    SCANNER.get_or_init(|| Scanner::new(Limits::default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdir::TestDir;

    /// Make every directory under ROOT look older than the racy margin.
    fn age(root: &Path) {
        let old = libc::timespec {
            tv_sec: 1_000_000_000,
            tv_nsec: 0,
        };
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|k| k.is_dir()) {
                    stack.push(entry.path());
                }
            }
            let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
            let times = [old, old];
            // SAFETY: a valid path and two timespecs.
            let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) };
            assert_eq!(rc, 0);
        }
    }

    #[test]
    fn finds_every_git_and_does_not_descend_into_them() {
        let dir = TestDir::new("scan");
        let root = dir.path();
        dir.mkdirs(&[".git/hooks", "a/b/.git/modules/x/.git", "c/d", "e"]);
        dir.write("e/.git", "gitdir: ../.git/worktrees/e\n");
        dir.write("c/d/file", "x");
        let scanner = Scanner::new(Limits::default());
        let (found, _) = scanner.protected_under(root).unwrap();
        assert_eq!(
            found,
            vec![
                root.join(".git"),
                root.join("a/b/.git"),
                root.join("e/.git")
            ]
        );
    }

    #[test]
    fn symlinked_git_reports_its_target() {
        let dir = TestDir::new("scan-link");
        dir.mkdirs(&["real", "w"]);
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("w/.git")).unwrap();
        let scanner = Scanner::new(Limits::default());
        let (found, _) = scanner.protected_under(&dir.path().join("w")).unwrap();
        assert_eq!(found, vec![dir.path().join("real")]);
    }

    #[test]
    fn cache_is_reused_until_a_directory_changes() {
        let dir = TestDir::new("scan-cache");
        let root = dir.path();
        dir.mkdirs(&["a/b", "c"]);
        age(root);
        let scanner = Scanner::new(Limits::default());
        let first = scanner.protected_under(root).unwrap();
        assert_eq!(first, (vec![], Source::Walked));
        let second = scanner.protected_under(root).unwrap();
        assert_eq!(second, (vec![], Source::Cached));
        // A new repository deep down changes only its parent's mtime.
        std::fs::create_dir(root.join("a/b/.git")).unwrap();
        let third = scanner.protected_under(root).unwrap();
        assert_eq!(third, (vec![root.join("a/b/.git")], Source::Walked));
    }

    #[test]
    fn recently_changed_directories_are_not_trusted() {
        let dir = TestDir::new("scan-racy");
        dir.mkdirs(&["a"]);
        let scanner = Scanner::new(Limits::default());
        let _ = scanner.protected_under(dir.path());
        let again = scanner.protected_under(dir.path()).unwrap();
        assert_eq!(again.1, Source::Walked);
    }

    #[test]
    fn oversized_walk_fails_instead_of_answering_partially() {
        let dir = TestDir::new("scan-limit");
        dir.mkdirs(&["a", "b", "c", "d"]);
        let scanner = Scanner::new(Limits {
            max_entries: 2,
            max_time: Duration::from_secs(5),
        });
        let err = scanner
            .protected_under(dir.path())
            .expect_err("limit ignored");
        assert_eq!(err.kind, ErrorKind::Sandbox);
        assert!(err.message.contains("did not finish"), "{}", err.message);
    }

    #[test]
    fn missing_root_is_an_error() {
        let scanner = Scanner::new(Limits::default());
        let err = scanner
            .protected_under(Path::new("/nonexistent/mevedel/root"))
            .expect_err("no error");
        assert!(err.message.contains("/nonexistent/mevedel/root"));
    }
}
