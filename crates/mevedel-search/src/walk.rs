//! Where a search looks and how it names what it finds.

use std::path::{Path, PathBuf};

use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};
use ignore::{DirEntry, WalkBuilder};

use crate::error::{Error, ErrorKind};
use crate::files::VCS_DIRS;
use crate::filter::Filter;
use crate::{encode, gzlog};

/// How result paths are spelled.
#[derive(Debug, Clone)]
pub enum Naming {
    /// Ordinary paths: PREFIX (the directory as the caller wrote it,
    /// ending in `/`, or empty) then the relative path.
    Plain(String),
    /// Resource addresses: LABEL then percent-encoded components.
    Address(String),
}

/// One place to search.
#[derive(Debug, Clone)]
pub struct Root {
    /// Directory results are relative to (and globs are anchored at).
    pub base: PathBuf,
    /// A single file to search instead of walking BASE, and its name.
    pub file: Option<(PathBuf, String)>,
    pub naming: Naming,
    pub filter: Filter,
    /// Said in the result when this root has nothing to search yet.
    pub empty_note: Option<String>,
}

impl Root {
    /// An ordinary directory or file, as the caller DISPLAYed it.
    pub fn ordinary(path: &Path, display: &str) -> Root {
        if path.is_file() {
            return Root {
                base: path.parent().map(Path::to_path_buf).unwrap_or_default(),
                file: Some((path.to_path_buf(), display.to_string())),
                naming: Naming::Plain(String::new()),
                filter: Filter::Any,
                empty_note: None,
            };
        }
        let prefix = if display.is_empty() || display.ends_with('/') {
            display.to_string()
        } else {
            format!("{display}/")
        };
        Root {
            base: path.to_path_buf(),
            file: None,
            naming: Naming::Plain(prefix),
            filter: Filter::Any,
            empty_note: None,
        }
    }

    pub fn display(&self, rel: &[String]) -> String {
        match &self.naming {
            Naming::Plain(prefix) => {
                let mut out = prefix.clone();
                out.push_str(&rel.join("/"));
                out
            }
            Naming::Address(label) => {
                let mut out = label.clone();
                for (i, c) in rel.iter().enumerate() {
                    if i > 0 {
                        out.push('/');
                    }
                    encode::encode_into(&mut out, c, &[]);
                }
                out
            }
        }
    }

    /// Components of PATH below the base.
    pub fn rel(&self, path: &Path) -> Vec<String> {
        path.strip_prefix(&self.base)
            .unwrap_or(path)
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect()
    }

    /// Whether the file at PATH is a compressed log this root shows
    /// (and searches) under its logical name.
    pub fn compressed(&self, path: &Path) -> bool {
        self.filter.maps_compressed() && gzlog::is_compressed(path)
    }

    /// Components of PATH below the base, by logical name.
    pub fn logical_rel(&self, path: &Path) -> Vec<String> {
        if self.compressed(path) {
            self.rel(&logical_path(path))
        } else {
            self.rel(path)
        }
    }
}

/// PATH with a compressed log's logical file name.
pub fn logical_path(path: &Path) -> PathBuf {
    match path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(gzlog::logical_name)
    {
        Some(name) => path.with_file_name(name),
        None => path.to_path_buf(),
    }
}

/// Select a walk's entries by logical name: OV (and TYPES) see
/// `RUN.log` for `RUN.log.gz`, so `*.log` selects retired logs too; a
/// compressed log shadowed by a plain file of its name is skipped.
/// Replaces the walker's overrides and types for scopes that map names.
pub fn logical_selection(builder: &mut WalkBuilder, ov: Override, types: Option<Types>) {
    builder.filter_entry(move |e| {
        if is_vcs(e) {
            return false;
        }
        let is_dir = e.file_type().is_some_and(|t| t.is_dir());
        let path = if !is_dir && gzlog::is_compressed(e.path()) {
            match gzlog::visible_logical(e.path()) {
                Some(p) => p,
                None => return false,
            }
        } else {
            e.path().to_path_buf()
        };
        !ov.matched(&path, is_dir).is_ignore()
            && types
                .as_ref()
                .is_none_or(|t| !t.matched(&path, is_dir).is_ignore())
    });
}

fn bad(msg: String) -> Error {
    Error::new(ErrorKind::Search, msg)
}

/// Refuse absolute patterns and parent traversal in a glob FIELD.
pub fn check_pattern(field: &str, pattern: &str) -> Result<(), Error> {
    if pattern.is_empty() {
        return Err(bad(format!("`{field}` must not be empty")));
    }
    if pattern.starts_with('/') || pattern.starts_with('~') {
        return Err(bad(format!(
            "`{field}` must be relative to the search path, not absolute: `{pattern}`"
        )));
    }
    if pattern.split('/').any(|c| c == "..") {
        return Err(bad(format!(
            "`{field}` must not climb out of the search path with `..`: `{pattern}`"
        )));
    }
    Ok(())
}

/// The literal directory components a slash-qualified PATTERN starts
/// with (before any glob syntax), which the walk can start from.
pub fn literal_prefix(pattern: &str) -> Vec<String> {
    let parts: Vec<&str> = pattern.split('/').collect();
    if parts.len() < 2 {
        return Vec::new();
    }
    parts[..parts.len() - 1]
        .iter()
        .take_while(|c| !c.is_empty() && **c != "." && !c.contains(['*', '?', '[', '{', '\\', '!']))
        .map(|c| c.to_string())
        .collect()
}

/// Where the walk starts below BASE for PREFIX: `Ok(None)` when that
/// directory does not exist (an ordinary no-match) or is reached
/// through a symbolic link inside the base (links are not followed);
/// an error when a link in it leads outside the base.
pub fn narrowed_start(
    base: &Path,
    prefix: &[String],
    field: &str,
) -> Result<Option<PathBuf>, Error> {
    let croot = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    let mut cur = base.to_path_buf();
    for c in prefix {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Err(_) => return Ok(None),
            Ok(m) if m.file_type().is_symlink() => {
                let inside = std::fs::canonicalize(&cur).is_ok_and(|t| t.starts_with(&croot));
                if inside {
                    return Ok(None);
                }
                return Err(bad(format!(
                    "`{field}` passes through `{c}`, a symbolic link that leads outside the search path"
                )));
            }
            Ok(m) if !m.is_dir() => return Ok(None),
            Ok(_) => {}
        }
    }
    Ok(Some(cur))
}

pub fn overrides(base: &Path, field: &str, pattern: Option<&str>) -> Result<Override, Error> {
    let mut b = OverrideBuilder::new(base);
    if let Some(p) = pattern {
        check_pattern(field, p)?;
        b.add(p)
            .map_err(|e| bad(format!("invalid `{field}` pattern `{p}`: {e}")))?;
    }
    b.build()
        .map_err(|e| bad(format!("invalid `{field}` pattern: {e}")))
}

/// The file-type filter: none at all unless a type is selected, since
/// compiling the default type table's globs costs more than a small walk.
pub fn types(selected: Option<&str>) -> Result<Types, Error> {
    if selected.is_none() {
        return Ok(Types::empty());
    }
    let mut b = TypesBuilder::new();
    b.add_defaults();
    if let Some(t) = selected {
        b.select(t);
    }
    b.build().map_err(|e| bad(format!("invalid `type`: {e}")))
}

pub fn is_vcs(entry: &DirEntry) -> bool {
    entry.depth() > 0
        && entry
            .file_name()
            .to_str()
            .is_some_and(|n| VCS_DIRS.contains(&n))
}

/// Kernel file systems a walk from above never enters: their files say
/// nothing true about their size, some never end and some block. Named
/// as the search path itself, they are searched.
const PSEUDO_DIRS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Whether a walk skips ENTRY: a VCS directory, or a kernel file system
/// below the walk's start.
fn skipped(entry: &DirEntry) -> bool {
    is_vcs(entry)
        || (entry.depth() == 1 && PSEUDO_DIRS.iter().any(|d| entry.path() == Path::new(d)))
}

/// A walker over START that never follows links, sees hidden files,
/// skips VCS directories and kernel file systems below START, and
/// honours ignore files when RESPECT_IGNORE.
pub fn walker(start: &Path, respect_ignore: bool, filter: &Filter) -> WalkBuilder {
    let mut b = WalkBuilder::new(start);
    b.hidden(false)
        .follow_links(false)
        .ignore(respect_ignore)
        .git_ignore(respect_ignore)
        .git_global(respect_ignore)
        .git_exclude(respect_ignore)
        .parents(respect_ignore)
        .require_git(true)
        .threads(2)
        .filter_entry(|e| !skipped(e));
    if respect_ignore {
        b.add_custom_ignore_filename(".rgignore");
    }
    if let Filter::Journal { .. } = filter {
        b.max_depth(Some(1));
    }
    b
}
