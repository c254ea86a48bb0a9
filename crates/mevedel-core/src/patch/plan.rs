//! A plan: every target read, every hunk matched and every result
//! computed in memory, before anything is written.
//!
//! Paths come resolved from the caller (authored path → absolute backing
//! path). The plan keeps the bytes it read of every target so that
//! [`super::commit`] can refuse to write over a file changed since (a
//! Move's existing destination included).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::apply::{self, Replacement, TextFile};
use super::diff::{self, DiffHunk};
use super::grammar::{Op, Patch};
use crate::error::{Error, ErrorKind, Result};

/// What happens to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Add,
    Delete,
    Update,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Add => "add",
            OpKind::Delete => "delete",
            OpKind::Update => "update",
        }
    }
}

/// One file's computed change.
#[derive(Debug, Clone)]
pub struct FilePlan {
    pub path: String,
    pub abs: PathBuf,
    pub op: OpKind,
    pub move_to: Option<String>,
    pub move_abs: Option<PathBuf>,
    /// The bytes read at ABS (`None`: it did not exist).
    pub before: Option<Vec<u8>>,
    /// The bytes read at MOVE_ABS, which the move overwrites (`None`: it
    /// did not exist).
    pub move_before: Option<Vec<u8>>,
    /// The old text (empty for an Add).
    pub old: TextFile,
    /// The new text (`None` for a Delete).
    pub new: Option<TextFile>,
    /// The diff hunks of the change, what a reviewer accepts or rejects.
    pub hunks: Vec<DiffHunk>,
    pub added: usize,
    pub removed: usize,
    /// Permission bits of the existing file, kept on rewrite.
    pub mode: Option<u32>,
}

/// Every file's change, in patch order.
#[derive(Debug, Clone)]
pub struct Plan {
    pub files: Vec<FilePlan>,
}

fn patch_error(message: String) -> Error {
    Error::new(ErrorKind::Patch, message)
}

fn io_error(path: &str, doing: &str, err: &std::io::Error) -> Error {
    patch_error(format!("{path}: cannot {doing}: {err}"))
}

fn resolved<'p>(paths: &'p HashMap<String, PathBuf>, authored: &str) -> Result<&'p PathBuf> {
    paths.get(authored).ok_or_else(|| {
        Error::new(
            ErrorKind::Internal,
            format!("no resolved path was given for '{authored}'"),
        )
    })
}

/// The bytes at ABS, `None` when nothing is there; a directory is an error.
pub fn read_target(display: &str, abs: &Path) -> Result<Option<Vec<u8>>> {
    match fs::symlink_metadata(abs) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(display, "inspect the file", &e)),
        Ok(meta) if meta.is_dir() => Err(patch_error(format!("{display}: is a directory"))),
        Ok(_) => match fs::read(abs) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(display, "read the file", &e)),
        },
    }
}

fn mode_of(abs: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(abs).ok().map(|m| m.permissions().mode())
}

/// Compute PATCH against the files PATHS resolves its authored paths to.
pub fn plan(patch: &Patch, paths: &HashMap<String, PathBuf>) -> Result<Plan> {
    let mut files = Vec::with_capacity(patch.ops.len());
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut claim = |authored: &str, abs: &Path| -> Result<()> {
        if seen.insert(abs.to_path_buf()) {
            Ok(())
        } else {
            Err(patch_error(format!(
                "{authored}: the patch touches this file more than once; put all its changes in one operation"
            )))
        }
    };
    for op in &patch.ops {
        let path = op.path();
        let abs = resolved(paths, path)?.clone();
        // Delete then Add of one file rewrites it: one update.
        if let Op::Add { lines, .. } = op
            && let Some(i) = files
                .iter()
                .position(|f: &FilePlan| f.op == OpKind::Delete && f.abs == abs)
        {
            let deleted = files.remove(i);
            let new = TextFile::from_lines(lines.clone());
            let replacement = Replacement {
                start: 0,
                old_len: deleted.old.lines.len(),
                new: new.lines.clone(),
            };
            files.insert(
                i,
                finish(
                    path,
                    abs,
                    OpKind::Update,
                    None,
                    deleted.before,
                    deleted.mode,
                    deleted.old,
                    Some(new),
                    &[replacement],
                    &[],
                ),
            );
            continue;
        }
        claim(path, &abs)?;
        let before = read_target(path, &abs)?;
        let file = match op {
            Op::Add { lines, .. } => {
                if before.is_some() {
                    return Err(patch_error(format!(
                        "{path}: Add File refuses to overwrite an existing file; use Update File to change it"
                    )));
                }
                let new = TextFile::from_lines(lines.clone());
                let replacement = Replacement {
                    start: 0,
                    old_len: 0,
                    new: new.lines.clone(),
                };
                finish(
                    path,
                    abs,
                    OpKind::Add,
                    None,
                    None,
                    None,
                    TextFile::from_lines(Vec::new()),
                    Some(new),
                    &[replacement],
                    &[],
                )
            }
            Op::Delete { .. } => {
                let Some(bytes) = before else {
                    return Err(patch_error(format!(
                        "{path}: Delete File: the file does not exist"
                    )));
                };
                let old = TextFile::decode(path, &bytes)?;
                let replacement = Replacement {
                    start: 0,
                    old_len: old.lines.len(),
                    new: Vec::new(),
                };
                let mode = mode_of(&abs);
                finish(
                    path,
                    abs,
                    OpKind::Delete,
                    None,
                    Some(bytes),
                    mode,
                    old,
                    None,
                    &[replacement],
                    &[],
                )
            }
            Op::Update {
                move_to, chunks, ..
            } => {
                let Some(bytes) = before else {
                    return Err(patch_error(format!(
                        "{path}: Update File: the file does not exist (use Add File to create it)"
                    )));
                };
                let old = TextFile::decode(path, &bytes)?;
                let (replacements, sections) = apply::compute(&old, chunks, path)?;
                let new =
                    old.with_lines(apply::replace(&old.lines, &replacements), old.final_newline);
                let mut move_abs = None;
                let mut move_before = None;
                if let Some(dest) = move_to {
                    let dest_abs = resolved(paths, dest)?.clone();
                    if dest_abs != abs {
                        claim(dest, &dest_abs)?;
                        // An existing destination is overwritten (as the
                        // reference tool does); its bytes let the commit
                        // check it and put it back on failure.
                        move_before = read_target(dest, &dest_abs)?;
                        move_abs = Some(dest_abs);
                    }
                }
                let mode = mode_of(&abs);
                let move_to = move_abs.as_ref().and(move_to.clone());
                let mut file = finish(
                    path,
                    abs,
                    OpKind::Update,
                    move_to.zip(move_abs),
                    Some(bytes),
                    mode,
                    old,
                    Some(new),
                    &replacements,
                    &sections,
                );
                file.move_before = move_before;
                file
            }
        };
        files.push(file);
    }
    Ok(Plan { files })
}

#[allow(clippy::too_many_arguments)]
fn finish(
    path: &str,
    abs: PathBuf,
    op: OpKind,
    moved: Option<(String, PathBuf)>,
    before: Option<Vec<u8>>,
    mode: Option<u32>,
    old: TextFile,
    new: Option<TextFile>,
    replacements: &[Replacement],
    sections: &[Option<String>],
) -> FilePlan {
    let empty = TextFile::from_lines(Vec::new());
    let target = new.as_ref().unwrap_or(&empty);
    let mut hunks = diff::hunks(
        &old.lines,
        &target.lines,
        replacements,
        old.final_newline,
        target.final_newline,
    );
    diff::name_sections(&mut hunks, replacements, sections);
    let added = hunks.iter().map(|h| h.added).sum();
    let removed = hunks.iter().map(|h| h.removed).sum();
    let (move_to, move_abs) = match moved {
        Some((to, to_abs)) => (Some(to), Some(to_abs)),
        None => (None, None),
    };
    FilePlan {
        path: path.to_string(),
        abs,
        op,
        move_to,
        move_abs,
        before,
        move_before: None,
        old,
        new,
        hunks,
        added,
        removed,
        mode,
    }
}

impl FilePlan {
    /// The names in the `---`/`+++` lines of this file's diff.
    pub fn diff_names(&self) -> (String, String) {
        let old = match self.op {
            OpKind::Add => "/dev/null".to_string(),
            _ => format!("a/{}", self.path),
        };
        let new = match self.op {
            OpKind::Delete => "/dev/null".to_string(),
            _ => format!("b/{}", self.move_to.as_deref().unwrap_or(&self.path)),
        };
        (old, new)
    }

    /// The unified diff of the whole change.
    pub fn diff(&self) -> String {
        let (old, new) = self.diff_names();
        let mut out = diff::unified(&old, &new, &self.hunks);
        if out.is_empty()
            && let Some(to) = &self.move_to
        {
            out = format!("rename from {}\nrename to {to}\n", self.path);
        }
        out
    }
}
