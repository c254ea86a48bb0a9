//! `write_all`: ApplyPatch's changes to several files applied as one.
//!
//! Every expectation is checked first; then each new content is written
//! beside its target (synced, with the target's mode, or the one asked
//! for, or the umask's default for a new file, whose missing
//! directories are made); then the targets are
//! replaced (renamed over) or deleted in turn, each old file kept under
//! a hard link beside it until all succeeded. Any failure undoes what
//! was done, so every target is left as it was, and the error names the
//! file and why.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use mevedel_search::error::{Error, ErrorKind};
use mevedel_search::files;
use serde_json::{Value, json};

use crate::ops::hash;

/// One file's change.
pub struct Change {
    pub path: PathBuf,
    /// The new content; None deletes the file.
    pub data: Option<Vec<u8>>,
    /// The SHA-256 the file must still have ("": it must not exist).
    pub expect: Option<String>,
    /// The new content's mode (default: the old file's, or the umask's).
    pub mode: Option<u32>,
}

/// A name beside PATH for a file of this helper's (TAG: what for).
pub fn beside(path: &Path, tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.mevedel-{}-{n}{tag}", std::process::id()))
}

fn refuse(message: String) -> Error {
    Error::new(ErrorKind::Patch, message)
}

fn io_fail(doing: &str, path: &Path, e: &std::io::Error) -> Error {
    refuse(format!(
        "nothing was written: cannot {doing} `{}`: {}",
        path.display(),
        files::io_reason(e)
    ))
}

/// Check CHANGE's expectation against the file as it is now.
fn check(change: &Change) -> Result<(), Error> {
    let now = match std::fs::read(&change.path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_fail("read", &change.path, &e)),
    };
    if change.data.is_none() && now.is_none() {
        return Err(refuse(format!(
            "nothing was written: `{}` cannot be deleted: it does not exist",
            change.path.display()
        )));
    }
    if let Some(expected) = &change.expect {
        let hash_now = now.as_deref().map(hash).unwrap_or_default();
        if &hash_now != expected {
            return Err(refuse(format!(
                "nothing was written: `{}` changed on the remote host since it was read; read it again",
                change.path.display()
            )));
        }
    }
    Ok(())
}

/// Write CHANGE's content beside its target; answer the staged file.
fn stage(change: &Change, data: &[u8]) -> Result<PathBuf, Error> {
    let mode = change.mode.or_else(|| {
        std::fs::metadata(&change.path)
            .ok()
            .map(|m| m.permissions().mode())
    });
    let temp = beside(&change.path, "");
    let written = (|| {
        if let Some(dir) = change.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        f.write_all(data)?;
        if let Some(mode) = mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.sync_all()
    })();
    match written {
        Ok(()) => Ok(temp),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(io_fail("write", &change.path, &e))
        }
    }
}

/// One target replaced or deleted: what undoes it.
struct Done {
    path: PathBuf,
    /// The old file, linked beside it (None: there was none).
    backup: Option<PathBuf>,
}

/// Put the target of DONE back as it was; answer what could not be.
fn undo(done: &Done) -> Option<String> {
    let result = match &done.backup {
        Some(backup) => std::fs::rename(backup, &done.path),
        None => std::fs::remove_file(&done.path),
    };
    result.err().map(|e| {
        format!(
            "`{}` could not be restored ({})",
            done.path.display(),
            files::io_reason(&e)
        )
    })
}

/// Replace or delete CHANGE's target (STAGED: its new content).
fn commit(change: &Change, staged: Option<&PathBuf>) -> Result<Done, Error> {
    let path = &change.path;
    let backup = if std::fs::symlink_metadata(path).is_ok() {
        let backup = beside(path, ".old");
        std::fs::hard_link(path, &backup).map_err(|e| io_fail("keep", path, &e))?;
        Some(backup)
    } else {
        None
    };
    let done = Done {
        path: path.clone(),
        backup,
    };
    let result = match staged {
        Some(temp) => std::fs::rename(temp, path).map_err(|e| io_fail("replace", path, &e)),
        None => std::fs::remove_file(path).map_err(|e| io_fail("delete", path, &e)),
    };
    match result {
        Ok(()) => Ok(done),
        Err(e) => {
            if let Some(backup) = &done.backup {
                let _ = std::fs::remove_file(backup);
            }
            Err(e)
        }
    }
}

/// Apply CHANGES as one; answer `{files: [{path, hash, size} or {path,
/// deleted}]}`, or an error naming the file that stopped them.
pub fn apply(changes: &[Change]) -> Result<Value, Error> {
    for (i, change) in changes.iter().enumerate() {
        if changes[..i].iter().any(|c| c.path == change.path) {
            return Err(refuse(format!(
                "nothing was written: `{}` is changed twice",
                change.path.display()
            )));
        }
        check(change)?;
    }
    let mut staged: Vec<Option<PathBuf>> = Vec::new();
    for change in changes {
        let temp = match &change.data {
            Some(data) => match stage(change, data) {
                Ok(temp) => Some(temp),
                Err(e) => {
                    for temp in staged.iter().flatten() {
                        let _ = std::fs::remove_file(temp);
                    }
                    return Err(e);
                }
            },
            None => None,
        };
        staged.push(temp);
    }
    let mut done: Vec<Done> = Vec::new();
    for (change, temp) in changes.iter().zip(&staged) {
        match commit(change, temp.as_ref()) {
            Ok(d) => done.push(d),
            Err(e) => {
                let lost: Vec<String> = done.iter().rev().filter_map(undo).collect();
                for temp in staged.iter().flatten() {
                    let _ = std::fs::remove_file(temp);
                }
                if lost.is_empty() {
                    return Err(e);
                }
                return Err(refuse(format!(
                    "{}; undoing the others failed, so the change is partial: {}",
                    e.message.trim_start_matches("nothing was written: "),
                    lost.join("; ")
                )));
            }
        }
    }
    for backup in done.iter().filter_map(|d| d.backup.as_ref()) {
        let _ = std::fs::remove_file(backup);
    }
    Ok(json!({"files": changes.iter().map(|c| match &c.data {
        Some(data) => json!({"path": c.path.to_string_lossy(), "hash": hash(data), "size": data.len()}),
        None => json!({"path": c.path.to_string_lossy(), "deleted": true}),
    }).collect::<Vec<_>>()}))
}
