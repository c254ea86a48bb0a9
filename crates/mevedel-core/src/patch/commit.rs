//! Writing a computed change atomically across files.
//!
//! 1. Every target is re-read: one that no longer has the bytes the plan
//!    read (or that appeared where nothing was) fails the whole commit.
//! 2. Each new content goes to a temporary sibling in its target's
//!    directory (parents created for new files), with the old file's mode.
//! 3. Each removed file is renamed to a temporary sibling, then each
//!    temporary file is renamed over its target.
//! 4. On any failure in 2–3 the renames made so far are undone (an
//!    overwritten file gets its old bytes and mode back, a created one is
//!    removed, a removed one is renamed back), temporaries and created
//!    directories are removed, and the error is returned: nothing stays
//!    half-applied. After 3 the removed files' temporaries are deleted.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::plan::read_target;
use crate::error::{Error, ErrorKind, Result};

/// A file the commit must find as the plan saw it.
#[derive(Debug, Clone)]
pub struct Expect<'a> {
    pub display: String,
    pub path: PathBuf,
    pub bytes: Option<&'a [u8]>,
}

/// One change to the filesystem.
#[derive(Debug, Clone)]
pub enum Action {
    Write {
        display: String,
        path: PathBuf,
        bytes: Vec<u8>,
        mode: Option<u32>,
    },
    Remove {
        display: String,
        path: PathBuf,
    },
}

fn patch_error(message: String) -> Error {
    Error::new(ErrorKind::Patch, message)
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn sibling(path: &Path, what: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.mevedel-{what}-{}-{n}", std::process::id()))
}

#[cfg(test)]
thread_local! {
    /// Tests: fail the Nth rename of step 3 (0-based).
    pub static FAIL_RENAME: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

fn rename(from: &Path, to: &Path, _step: usize) -> std::io::Result<()> {
    #[cfg(test)]
    if FAIL_RENAME.with(|f| f.get()) == Some(_step) {
        return Err(std::io::Error::other("injected failure"));
    }
    fs::rename(from, to)
}

fn write_file(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(bytes)?;
    // No fsync, as Emacs's own saves (`write-region-inhibit-fsync').
    match mode {
        Some(mode) => file.set_permissions(fs::Permissions::from_mode(mode)),
        None => Ok(()),
    }
}

/// Where a write to PATH lands: through a symbolic link to its target.
fn real_target(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// What was done so far, for undoing it.
enum Done<'a> {
    /// A temporary file or created directory to remove.
    Temp(PathBuf),
    Dir(PathBuf),
    /// A removed file now at BACKUP.
    Moved {
        path: PathBuf,
        backup: PathBuf,
    },
    /// TARGET was replaced; OLD is what it held (`None`: nothing).
    Replaced {
        target: PathBuf,
        old: Option<(&'a [u8], Option<u32>)>,
    },
}

/// Check EXPECT, then make every ACTION, all or none.
pub fn commit(expect: &[Expect<'_>], actions: &[Action]) -> Result<()> {
    for e in expect {
        let now = read_target(&e.display, &e.path)?;
        if now.as_deref() != e.bytes {
            let what = match (e.bytes, &now) {
                (None, Some(_)) => "now exists",
                (Some(_), None) => "no longer exists",
                _ => "has changed",
            };
            return Err(patch_error(format!(
                "{}: the file {what} since the patch was planned; nothing was written",
                e.display
            )));
        }
    }
    let mut done: Vec<Done> = Vec::new();
    match run(expect, actions, &mut done) {
        Ok(()) => {
            for d in done {
                if let Done::Moved { backup, .. } = d {
                    let _ = fs::remove_file(backup);
                }
            }
            Ok(())
        }
        Err(err) => {
            undo(done);
            Err(err)
        }
    }
}

fn run<'a>(expect: &[Expect<'a>], actions: &[Action], done: &mut Vec<Done<'a>>) -> Result<()> {
    // Step 2: temporaries.
    let mut staged: Vec<(PathBuf, PathBuf, &str)> = Vec::new();
    for action in actions {
        let Action::Write {
            display,
            path,
            bytes,
            mode,
        } = action
        else {
            continue;
        };
        let target = real_target(path);
        if let Some(parent) = target.parent() {
            create_parents(display, parent, done)?;
        }
        let temp = sibling(&target, "patch");
        write_file(&temp, bytes, *mode).map_err(|e| {
            patch_error(format!("{display}: cannot write: {e}; nothing was written"))
        })?;
        done.push(Done::Temp(temp.clone()));
        staged.push((temp, target, display));
    }
    // Step 3: removals, then replacements.
    let mut step = 0;
    for action in actions {
        let Action::Remove { display, path } = action else {
            continue;
        };
        let backup = sibling(path, "removed");
        rename(path, &backup, step).map_err(|e| {
            patch_error(format!(
                "{display}: cannot remove: {e}; nothing was changed"
            ))
        })?;
        step += 1;
        done.push(Done::Moved {
            path: path.clone(),
            backup,
        });
    }
    for (temp, target, display) in staged {
        let old = expect
            .iter()
            .find(|e| real_target(&e.path) == target || e.path == target)
            .and_then(|e| e.bytes)
            .map(|b| {
                let mode = fs::metadata(&target).ok().map(|m| m.permissions().mode());
                (b, mode)
            });
        rename(&temp, &target, step).map_err(|e| {
            patch_error(format!("{display}: cannot write: {e}; nothing was changed"))
        })?;
        step += 1;
        // The temporary is now the target.
        if let Some(i) = done
            .iter()
            .position(|d| matches!(d, Done::Temp(t) if *t == temp))
        {
            done.remove(i);
        }
        done.push(Done::Replaced { target, old });
    }
    Ok(())
}

fn create_parents(display: &str, dir: &Path, done: &mut Vec<Done<'_>>) -> Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at {
        if d.as_os_str().is_empty() || fs::symlink_metadata(d).is_ok() {
            break;
        }
        missing.push(d.to_path_buf());
        at = d.parent();
    }
    for d in missing.into_iter().rev() {
        match fs::create_dir(&d) {
            Ok(()) => done.push(Done::Dir(d)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(patch_error(format!(
                    "{display}: cannot create directory {}: {e}; nothing was written",
                    d.display()
                )));
            }
        }
    }
    Ok(())
}

fn undo(done: Vec<Done<'_>>) {
    for d in done.into_iter().rev() {
        match d {
            Done::Temp(t) => {
                let _ = fs::remove_file(t);
            }
            Done::Dir(d) => {
                let _ = fs::remove_dir(d);
            }
            Done::Moved { path, backup } => {
                let _ = fs::rename(backup, path);
            }
            Done::Replaced { target, old } => match old {
                None => {
                    let _ = fs::remove_file(target);
                }
                Some((bytes, mode)) => {
                    let temp = sibling(&target, "restore");
                    if write_file(&temp, bytes, mode).is_ok() {
                        if fs::rename(&temp, &target).is_err() {
                            let _ = fs::remove_file(&temp);
                        }
                    } else {
                        let _ = fs::remove_file(&temp);
                    }
                }
            },
        }
    }
}
