//! Files with unsaved changes in Emacs.
//!
//! The model should see what the user sees: when a file is visited in
//! a modified buffer, Grep searches the buffer's text instead of the
//! disk copy, and a buffer whose file does not exist yet is searched
//! (Grep) and listed (Glob) as if it did. Lisp hands the texts over
//! once per call, keyed by truename; the job owns them from then on.
//! Files without a buffer entry take the ordinary path untouched.
//!
//! A walked file is looked up by its truename, the root's truename
//! joined with its path below the root (the walk follows no links, so
//! that is the file's own truename). Files met by the walk keep its
//! rules (ignore files, filters); new files are held to the same rules
//! by [`admits`].

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use ignore::Match;
use ignore::gitignore::Gitignore;
use ignore::overrides::Override;
use ignore::types::Types;

use super::walk::Root;
use crate::files::{self, VCS_DIRS};

/// How results mark a file searched as a modified buffer's text.
pub const CHANGED: &str = " (unsaved changes in Emacs)";
/// How results mark a file that exists only as an unsaved buffer.
pub const NEW: &str = " (unsaved new buffer in Emacs)";

/// One modified buffer's text.
#[derive(Debug, Clone)]
pub struct Buffer {
    pub text: Vec<u8>,
    /// The file does not exist on disk.
    pub new: bool,
    /// A document of mevedel's own (a conversation), named by its
    /// address: results do not mark it.
    pub plain: bool,
}

impl Buffer {
    /// A buffer's text standing in for its file; NEW when the file does
    /// not exist yet.
    pub fn of_file(text: Vec<u8>, new: bool) -> Buffer {
        Buffer {
            text,
            new,
            plain: false,
        }
    }

    pub fn mark(&self) -> &'static str {
        match (self.plain, self.new) {
            (true, _) => "",
            (false, true) => NEW,
            (false, false) => CHANGED,
        }
    }
}

/// The modified buffers of one call, by the truename of their file.
#[derive(Debug, Clone, Default)]
pub struct Unsaved {
    buffers: HashMap<PathBuf, Buffer>,
}

impl Unsaved {
    pub fn new(buffers: impl IntoIterator<Item = (PathBuf, Buffer)>) -> Unsaved {
        Unsaved {
            buffers: buffers.into_iter().collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
    }

    pub fn get(&self, truename: &Path) -> Option<&Buffer> {
        self.buffers.get(truename)
    }

    /// Buffers whose files do not exist, in path order.
    pub fn new_files(&self) -> Vec<(&Path, &Buffer)> {
        let mut out: Vec<_> = self
            .buffers
            .iter()
            .filter(|(_, b)| b.new)
            .map(|(p, b)| (p.as_path(), b))
            .collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// The lookup of ROOT's walked paths, or None when there is nothing
    /// to look up (the ordinary path stays as it was).
    pub fn locate(&self, root: &Root) -> Option<Located> {
        (!self.is_empty()).then(|| Located {
            base: root.base.clone(),
            truename: files::truename(&root.base),
        })
    }
}

/// A root's base and its truename.
pub struct Located {
    base: PathBuf,
    truename: PathBuf,
}

impl Located {
    /// The truename of PATH, a path the walk of this root met.
    pub fn truename_of(&self, path: &Path) -> PathBuf {
        self.truename
            .join(path.strip_prefix(&self.base).unwrap_or(path))
    }

    /// The walk's spelling of TRUENAME and its components below the
    /// base, when it lies below the base.
    pub fn walked(&self, truename: &Path) -> Option<(PathBuf, Vec<String>)> {
        let below = truename.strip_prefix(&self.truename).ok()?;
        let rel: Vec<String> = below
            .components()
            .map(|c| match c {
                Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect::<Option<_>>()?;
        (!rel.is_empty()).then(|| (self.base.join(below), rel))
    }
}

/// Whether a new file at PATH (components REL below ROOT's base) is one
/// the walk would have met: not in a VCS directory, admitted by the
/// root's filter, selected by the OV and TYPES filters and, when
/// RESPECT_IGNORE, not ignored by an ignore file of its directories.
pub fn admits(
    root: &Root,
    path: &Path,
    rel: &[String],
    ov: &Override,
    types: Option<&Types>,
    respect_ignore: bool,
) -> bool {
    let name = rel.last().map(String::as_str).unwrap_or("");
    !rel[..rel.len() - 1]
        .iter()
        .any(|c| VCS_DIRS.contains(&c.as_str()))
        && root.filter.admits(name, rel.len())
        && !ov.matched(path, false).is_ignore()
        && types.is_none_or(|t| !t.matched(path, false).is_ignore())
        && !(respect_ignore && ignored(&root.base, path))
}

/// Whether the walk of ROOT would skip PATH for an ignore file: PATH or
/// a directory between the root and it is ignored. The walk's start
/// itself is never ignored (naming a directory selects it).
fn ignored(root: &Path, path: &Path) -> bool {
    path.ancestors()
        .take_while(|a| *a != root && a.starts_with(root))
        .enumerate()
        .any(|(i, a)| verdict(a, i > 0))
}

/// Whether an ignore file above PATH (IS_DIR: a directory) ignores it:
/// the nearest file with a say decides, `.gitignore` only up to the
/// root of the Git repository, as the walk reads them.
fn verdict(path: &Path, is_dir: bool) -> bool {
    let dirs: Vec<&Path> = path.ancestors().skip(1).collect();
    let git_root = dirs.iter().position(|d| d.join(".git").exists());
    for (i, dir) in dirs.iter().enumerate() {
        let git = git_root.is_some_and(|g| i <= g);
        for name in [".rgignore", ".ignore", ".gitignore"] {
            let file = dir.join(name);
            if (name == ".gitignore" && !git) || !file.is_file() {
                continue;
            }
            let (gi, _) = Gitignore::new(&file);
            match gi.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
    }
    false
}
