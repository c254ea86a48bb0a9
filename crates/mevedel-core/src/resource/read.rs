//! The second resolver stage for Read: run a prepared attempt (or read
//! an ordinary path) and return one page of text.

use std::fs::File;
use std::io::{BufReader, Read as _, Seek, SeekFrom};
use std::path::Path;

use super::contain::Found;
use super::gzlog;
use super::journal;
use super::page::{self, PageRequest};
use super::prepare::{Attempt, Filter, Scope, Selection, Target};
use crate::error::{Error, ErrorKind};

/// Directory names never listed or searched, at any depth.
pub const VCS_DIRS: [&str; 6] = [".git", ".svn", ".hg", ".bzr", ".jj", ".sl"];

/// Most entries a listing collects before it says it stopped.
const LISTING_CAP: usize = 50_000;

fn fail(message: String) -> Error {
    Error::new(ErrorKind::Resource, message)
}

/// Most bytes read from a file under `/proc` or `/sys`: their sizes say
/// 0 and some never end.
const PSEUDO_FILE_LIMIT: u64 = 16 * 1024 * 1024;

/// Open PATH for reading if it is a regular file, else fail at once with
/// `InvalidInput` ("not a regular file"). A FIFO, socket or device is
/// never opened in a way that could block or act (a FIFO without a writer
/// would block `open`, a tape device rewinds): the type is checked before
/// opening, and again on the open file (it may have been swapped in), which
/// stays non-blocking, so a pseudo-file with nothing to say (`/proc/kmsg`)
/// fails its read instead of waiting.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular =
        || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// Whether PATH is a kernel pseudo-file, read with a size bound.
fn pseudo_file(path: &Path) -> bool {
    path.starts_with("/proc") || path.starts_with("/sys")
}

/// Read a text file at PATH, naming it ADDRESS in everything it says.
pub fn read_file(path: &Path, address: &str, req: &PageRequest) -> Result<String, Error> {
    let open = |e: std::io::Error| {
        fail(format!(
            "Read `{address}`: cannot open it: {}",
            io_reason(&e)
        ))
    };
    let mut file = open_regular(path).map_err(open)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut head = Vec::with_capacity(8192);
    (&mut file)
        .take(8192)
        .read_to_end(&mut head)
        .map_err(open)?;
    if head.contains(&0) {
        return Err(fail(format!(
            "Read `{address}`: this is a binary file ({size} bytes); Read shows text only"
        )));
    }
    file.seek(SeekFrom::Start(0)).map_err(open)?;
    let limit = if pseudo_file(path) {
        PSEUDO_FILE_LIMIT
    } else {
        u64::MAX
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file.take(limit));
    page::page(&mut reader, req, address, true)
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

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "it does not exist".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::InvalidInput => e.to_string(),
        std::io::ErrorKind::WouldBlock => "it has nothing to read now".into(),
        _ => e.kind().to_string(),
    }
}

/// Read an ordinary filesystem PATH shown to the model as DISPLAY.
pub fn read_path(path: &Path, display: &str, req: &PageRequest) -> Result<String, Error> {
    let meta = std::fs::metadata(path)
        .map_err(|e| fail(format!("Read `{display}`: {}", io_reason(&e))))?;
    if meta.is_dir() {
        let text = list_dir_one_level(path, display)?;
        return page::page(&mut text.as_bytes(), req, display, false);
    }
    if !meta.is_file() {
        return Err(fail(format!(
            "Read `{display}`: it is not a regular file (a FIFO, socket or device); Read shows \
             files and directories only"
        )));
    }
    read_file(path, display, req)
}

fn list_dir_one_level(path: &Path, display: &str) -> Result<String, Error> {
    let entries = std::fs::read_dir(path).map_err(|e| {
        fail(format!(
            "Read `{display}`: cannot list it: {}",
            io_reason(&e)
        ))
    })?;
    let mut names: Vec<String> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().to_string_lossy().into_owned();
            let ft = e.file_type().ok()?;
            Some(if ft.is_symlink() {
                format!("{name}@")
            } else if ft.is_dir() {
                format!("{name}/")
            } else {
                name
            })
        })
        .collect();
    names.sort();
    if names.is_empty() {
        return Ok(format!("(`{display}` is an empty directory.)\n"));
    }
    let mut out = format!(
        "Directory `{display}` ({} entries; `/` marks directories, `@` symbolic links, which are not followed):\n",
        names.len()
    );
    for n in names {
        out.push_str(&n);
        out.push('\n');
    }
    Ok(out)
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
