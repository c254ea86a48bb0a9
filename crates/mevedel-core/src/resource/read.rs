//! The second resolver stage for Read: run a prepared attempt (or read
//! an ordinary path) and return one page of text.

use std::io::BufReader;
use std::path::Path;

use super::contain::Found;
use super::gzlog;
use super::journal;
use super::page::{self, PageRequest};
use super::prepare::{Attempt, Filter, Scope, Selection, Target};
use crate::error::{Error, ErrorKind};
use mevedel_search::files::io_reason;
pub use mevedel_search::files::{VCS_DIRS, open_regular, read_file, read_path};

/// Most entries a listing collects before it says it stopped.
const LISTING_CAP: usize = 50_000;

fn fail(message: String) -> Error {
    Error::new(ErrorKind::Resource, message)
}

/// Read TEXT, the unsaved text of the Emacs buffer visiting DISPLAY
/// (NEW: its file does not exist yet), paged as the file would be and
/// headed by a line saying so, since the model must not take it for the
/// disk copy.
pub fn read_buffer(
    text: &[u8],
    display: &str,
    new: bool,
    req: &PageRequest,
) -> Result<String, Error> {
    let head = if new {
        "(unsaved new buffer in Emacs: this text exists only in an Emacs buffer, not on disk yet; \
         ApplyPatch refuses this file until the user saves it.)"
    } else {
        "(unsaved changes in Emacs: this is the text of the buffer visiting the file, not the \
         copy on disk; ApplyPatch refuses this file until the user saves it.)"
    };
    if text[..text.len().min(8192)].contains(&0) {
        return Err(fail(format!(
            "Read `{display}`: its buffer in Emacs holds binary data ({} bytes, unsaved \
             changes); Read shows text only",
            text.len()
        )));
    }
    let page = page::page(&mut &text[..], req, display, true)
        .map_err(|e| fail(format!("{} {head}", e.message)))?;
    Ok(format!("{head}\n{page}"))
}

/// Page TEXT, a document of mevedel's own named DISPLAY (a conversation).
pub fn read_text(text: &[u8], display: &str, req: &PageRequest) -> Result<String, Error> {
    page::page(&mut &text[..], req, display, true)
}

/// Read the uncompressed text of the compressed log at PATH, named
/// ADDRESS (its logical `.log` address).
fn read_compressed(path: &Path, address: &str, req: &PageRequest) -> Result<String, Error> {
    let inflated = gzlog::open(path, gzlog::INFLATE_LIMIT).map_err(|e| {
        fail(format!(
            "Read `{address}`: cannot open it: {}",
            io_reason(&e)
        ))
    })?;
    let mut reader = BufReader::with_capacity(64 * 1024, inflated);
    page::page(&mut reader, req, address, true)
}

/// Visible files below DIR (a directory inside SCOPE), as components
/// relative to the scope root, sorted. Symbolic links and VCS
/// directories are skipped; the walk never leaves the scope.
pub fn scope_files(scope: &Scope, dir_rel: &[String], dir: &Path) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), dir_rel.to_vec())];
    while let Some((path, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            let mut child = rel.clone();
            child.push(name.clone());
            if ft.is_dir() {
                if !VCS_DIRS.contains(&name.as_str())
                    && !matches!(scope.filter, Filter::Journal { .. })
                {
                    stack.push((e.path(), child));
                }
            } else if ft.is_file()
                && scope.filter.admits(&name, child.len())
                && out.len() < LISTING_CAP
            {
                if scope.filter.maps_compressed() && gzlog::logical_name(&name).is_some() {
                    // Listed under its logical name, unless a plain file has it.
                    let Some(logical) = gzlog::visible_logical(&e.path()) else {
                        continue;
                    };
                    if let (Some(last), Some(n)) = (child.last_mut(), logical.file_name()) {
                        *last = n.to_string_lossy().into_owned();
                    }
                }
                out.push(child);
            }
        }
    }
    if let Filter::Journal { .. } = scope.filter {
        // Newest first.
        out.sort_by_key(|c| std::cmp::Reverse(c.last().and_then(|n| journal::entry_time(n))));
    } else {
        out.sort();
    }
    out
}

fn listing(sel: &Selection) -> String {
    let files = scope_files(&sel.scope, &sel.rel, &sel.path);
    let mut out = String::new();
    for f in &files {
        out.push_str(&sel.scope.address_of(f));
        out.push('\n');
    }
    out
}

fn union_listing(selections: &[Selection], none_note: Option<&str>) -> String {
    let mut out = String::new();
    let mut any = false;
    for sel in selections {
        let mut heading = sel.scope.address_of(&[]);
        if let Some(src) = &sel.scope.source {
            heading.push_str(&format!(" ({src})"));
        }
        out.push_str(&format!("# {heading}\n"));
        let body = if sel.found == Found::Dir {
            listing(sel)
        } else {
            String::new()
        };
        if body.is_empty() {
            if sel.scope.empty_note.is_empty() {
                out.push_str("(no files)\n");
            } else {
                out.push_str(&sel.scope.empty_note);
                out.push('\n');
            }
        } else {
            any = true;
            out.push_str(&body);
        }
    }
    match none_note {
        Some(note) if !any => format!("{note}\n"),
        _ => out,
    }
}

/// The one file a prepared Read names, when it names a single file
/// (not a listing, not a compressed log): images and PDFs are read
/// from it by `crate::media`.
pub fn attempt_file(attempt: &Attempt) -> Option<&Path> {
    match &attempt.target {
        Target::Files {
            selections,
            none_note: None,
        } => match &selections[..] {
            [sel]
                if sel.found == Found::File
                    && !(sel.scope.filter.maps_compressed() && gzlog::is_compressed(&sel.path)) =>
            {
                Some(&sel.path)
            }
            _ => None,
        },
        _ => None,
    }
}

/// Execute a prepared Read.
pub fn read_attempt(attempt: &Attempt, req: &PageRequest) -> Result<String, Error> {
    let address = attempt.authored.as_str();
    let text = match &attempt.target {
        Target::Unavailable(msg) => return Err(fail(msg.clone())),
        Target::Text(text) => format!("{text}\n"),
        Target::Conversation => {
            return Err(fail(format!(
                "Read `{address}`: the conversation's text was not supplied"
            )));
        }
        Target::Files {
            selections,
            none_note,
        } => match &selections[..] {
            [] => format!("{}\n", none_note.as_deref().unwrap_or("(nothing to list)")),
            [sel] if none_note.is_none() => {
                if sel.rel.is_empty() && sel.found == Found::Missing {
                    format!("{}\n", sel.scope.empty_note)
                } else {
                    match sel.found {
                        Found::File
                            if sel.scope.filter.maps_compressed()
                                && gzlog::is_compressed(&sel.path) =>
                        {
                            return read_compressed(&sel.path, address, req);
                        }
                        Found::File => return read_file(&sel.path, address, req),
                        Found::Dir => {
                            let body = listing(sel);
                            if body.is_empty() {
                                if sel.rel.is_empty() {
                                    format!("{}\n", sel.scope.empty_note)
                                } else {
                                    format!("(`{address}` is an empty directory.)\n")
                                }
                            } else {
                                body
                            }
                        }
                        Found::Missing => {
                            return Err(fail(format!(
                                "Read `{address}`: it does not exist (Read {} lists what does)",
                                sel.scope.address_of(&[])
                            )));
                        }
                        Found::Other => {
                            return Err(fail(format!(
                                "Read `{address}`: it is not a regular file or directory"
                            )));
                        }
                    }
                }
            }
            sels => union_listing(sels, none_note.as_deref()),
        },
    };
    page::page(&mut text.as_bytes(), req, address, false)
}
