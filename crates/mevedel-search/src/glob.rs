//! Glob in-process: every file whose path below the search root matches
//! one gitignore-style pattern. Ignore files do not apply; hidden files
//! are listed; VCS directories and symbolic links are not. Files that
//! exist only as unsaved Emacs buffers are listed too, marked.

use super::budget::Budget;
use super::output::Found;
use super::unsaved::{self, Unsaved};
use super::walk::{self, Root};
use crate::error::{Error, ErrorKind};

/// Most files one Glob lists: past it the listing says it stopped, so a
/// pattern like `**/*` over a huge tree stays a usable answer.
pub const GLOB_CAP: usize = 100_000;

/// One listed file: its root, its components below the root, and
/// whether it exists only as an unsaved buffer.
type Hit = (usize, Vec<String>, bool);

/// Every file under ROOTS matching PATTERN, in walk order, up to
/// [`GLOB_CAP`], with the new files of UNSAVED after each root's own.
pub fn glob_lines(
    roots: &[Root],
    pattern: &str,
    unsaved: &Unsaved,
    budget: &Budget,
) -> Result<Found, Error> {
    walk::check_pattern("pattern", pattern)?;
    let mut hits: Vec<Hit> = Vec::new();
    let full = |hits: &Vec<Hit>| hits.len() >= GLOB_CAP;
    for (index, root) in roots.iter().enumerate() {
        if budget.stop() || full(&hits) {
            break;
        }
        if let Some((file, _)) = &root.file {
            // A single file matches when its own name does.
            let ov = walk::overrides(&root.base, "pattern", Some(pattern))?;
            let logical = if root.compressed(file) {
                walk::logical_path(file)
            } else {
                file.clone()
            };
            if ov.matched(&logical, false).is_whitelist() {
                hits.push((index, root.rel(file), false));
            }
            continue;
        }
        let ov = walk::overrides(&root.base, "pattern", Some(pattern))?;
        let mut new_files: Vec<Vec<String>> = Vec::new();
        if let Some(located) = unsaved.locate(root) {
            for (truename, _) in unsaved.new_files() {
                if let Some((path, rel)) = located.walked(truename)
                    && ov.matched(&path, false).is_whitelist()
                    && unsaved::admits(root, &path, &rel, &ov, None, false)
                {
                    new_files.push(rel);
                }
            }
        }
        let prefix = walk::literal_prefix(pattern);
        let Some(start) = walk::narrowed_start(&root.base, &prefix, "pattern")? else {
            hits.extend(new_files.into_iter().map(|rel| (index, rel, true)));
            continue;
        };
        let mut builder = walk::walker(&start, false, &root.filter);
        if root.filter.maps_compressed() {
            walk::logical_selection(&mut builder, ov, None);
        } else {
            builder.overrides(ov);
        }
        // One thread walks, so the listing comes in the directories' own
        // order, the same on every call over the same tree: pages taken
        // with `offset` stay consistent without sorting the whole list.
        for entry in builder.build() {
            if budget.stop() || full(&hits) {
                break;
            }
            let Ok(entry) = entry else {
                continue;
            };
            if entry.file_type().is_some_and(|t| t.is_file()) {
                let rel = root.logical_rel(entry.path());
                let name = rel.last().map(String::as_str).unwrap_or("");
                if root.filter.admits(name, rel.len()) {
                    // A buffer's file written since Lisp looked is listed
                    // once, as a file.
                    new_files.retain(|n| *n != rel);
                    hits.push((index, rel, false));
                }
            }
        }
        hits.extend(new_files.into_iter().map(|rel| (index, rel, true)));
    }
    if budget.cancelled() {
        return Err(Error::new(ErrorKind::Search, "Glob was cancelled"));
    }
    let capped = hits.len() >= GLOB_CAP;
    hits.truncate(GLOB_CAP);
    let mut found = Found::default();
    for (i, rel, new) in hits {
        match &roots[i].file {
            Some((_, name)) => found.push(name, false),
            None => found.push_with(false, |buf| {
                buf.push_str(&roots[i].display(&rel));
                if new {
                    buf.push_str(unsaved::NEW);
                }
            }),
        }
    }
    if found.is_empty() {
        found.notes = roots.iter().filter_map(|r| r.empty_note.clone()).collect();
    }
    if capped {
        found.notes.push(format!(
            "[Partial results: Glob stopped after {GLOB_CAP} files. Narrow `pattern` or `path` \
             to list the rest.]"
        ));
    }
    found.partial = budget.timed_out();
    Ok(found)
}
