//! Glob and Grep in-process over the `ignore`, `globset` (through
//! `ignore`'s overrides), `grep-regex` and `grep-searcher` crates.
//!
//! - [`walk`]: search roots, naming, ignore rules, pattern checks;
//! - [`grep`] and [`glob`]: the two searches, each with its own sink;
//! - [`output`]: `offset`/`head_limit` pages and result notes;
//! - [`budget`]: cancellation and the time limit (partial results);
//! - [`jobs`]: background runs answered through the event channel;
//! - [`unsaved`]: the text of files with unsaved changes in Emacs.
//!
//! Resource attempts become [`Plan`]s here, so a search over
//! `work://` or `mevedel://` names its results by address and never
//! shows a backing path.

pub mod budget;
pub mod glob;
pub mod grep;
pub mod jobs;
pub mod output;
pub mod unsaved;
pub mod walk;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::resource::contain::{self, Found};
use crate::resource::prepare::{Attempt, Filter, Target};
pub use walk::{Naming, Root};

/// What a Glob or Grep runs over: a prepared resource attempt, or an
/// ordinary path and how the caller spelled it.
pub enum Over {
    Attempt(Arc<Attempt>),
    Path(PathBuf, String),
}

/// Where one search looks, plus what to say if it finds nothing.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub roots: Vec<Root>,
    /// Said when no root had anything to search (e.g. no memory roots).
    pub none_note: Option<String>,
    /// Modified Emacs buffers standing in for their files.
    pub unsaved: unsaved::Unsaved,
}

impl Plan {
    /// The plan for OVER, with the modified buffers UNSAVED standing in
    /// for their files.
    pub fn for_search(over: &Over, unsaved: unsaved::Unsaved) -> Result<Plan, Error> {
        let plan = match over {
            Over::Attempt(attempt) => Plan::for_attempt(attempt)?,
            Over::Path(path, display) => return Plan::for_path(path, display, unsaved),
        };
        Ok(Plan { unsaved, ..plan })
    }

    /// The plan for the ordinary PATH shown as DISPLAY, with UNSAVED
    /// standing in for their files. A PATH that exists only as one of
    /// them (a new file's buffer) is searched as that file; a PATH that
    /// does not exist, or is neither a regular file nor a directory, is
    /// an error naming DISPLAY.
    pub fn for_path(path: &Path, display: &str, unsaved: unsaved::Unsaved) -> Result<Plan, Error> {
        let truename = contain::truename(path);
        if unsaved.get(&truename).is_some_and(|b| b.new) {
            let root = Root {
                base: path.parent().map(PathBuf::from).unwrap_or_default(),
                file: Some((path.to_path_buf(), display.to_string())),
                naming: Naming::Plain(String::new()),
                filter: Filter::Any,
                empty_note: None,
            };
            return Ok(Plan {
                unsaved,
                ..Plan::ordinary(root)
            });
        }
        let problem = match std::fs::metadata(path) {
            Err(_) => Some("does not exist"),
            Ok(m) if !m.is_file() && !m.is_dir() => {
                Some("is not a regular file or directory (a FIFO, socket or device)")
            }
            Ok(_) => None,
        };
        if let Some(problem) = problem {
            return Err(Error::new(
                ErrorKind::Search,
                format!("`{display}` {problem}"),
            ));
        }
        Ok(Plan {
            unsaved,
            ..Plan::ordinary(Root::ordinary(path, display))
        })
    }

    pub fn ordinary(root: Root) -> Plan {
        Plan {
            roots: vec![root],
            ..Plan::default()
        }
    }

    /// The roots of a prepared resource ATTEMPT.
    pub fn for_attempt(attempt: &Attempt) -> Result<Plan, Error> {
        let fail = |m: String| Error::new(ErrorKind::Resource, m);
        let (selections, none_note) = match &attempt.target {
            Target::Unavailable(msg) => return Err(fail(msg.clone())),
            Target::Text(_) => {
                return Err(fail(format!(
                    "`{}` is a listing; Read it instead of searching it",
                    attempt.authored
                )));
            }
            Target::Conversation => {
                return Err(fail(format!(
                    "`{}`: the conversation's text was not supplied",
                    attempt.authored
                )));
            }
            Target::Files {
                selections,
                none_note,
            } => (selections, none_note),
        };
        let mut roots = Vec::new();
        for sel in selections {
            let address = sel.scope.address_of(&sel.rel);
            let note = (!sel.scope.empty_note.is_empty()).then(|| sel.scope.empty_note.clone());
            match sel.found {
                Found::File => roots.push(Root {
                    base: sel
                        .path
                        .parent()
                        .map(|p| p.to_path_buf())
                        .unwrap_or_default(),
                    file: Some((sel.path.clone(), address)),
                    naming: Naming::Address(String::new()),
                    filter: sel.scope.filter.clone(),
                    empty_note: None,
                }),
                Found::Dir => {
                    let label = if sel.rel.is_empty() {
                        sel.scope.label.clone()
                    } else {
                        format!("{address}/")
                    };
                    roots.push(Root {
                        base: sel.path.clone(),
                        file: None,
                        naming: Naming::Address(label),
                        filter: sel.scope.filter.clone(),
                        empty_note: if sel.rel.is_empty() { note } else { None },
                    });
                }
                Found::Missing if sel.rel.is_empty() => {
                    // An unused scope: nothing to search, say so if empty.
                    if let Some(n) = note {
                        roots.push(Root {
                            base: sel.path.clone(),
                            file: None,
                            naming: Naming::Address(sel.scope.label.clone()),
                            filter: sel.scope.filter.clone(),
                            empty_note: Some(n),
                        });
                    }
                }
                Found::Missing => {
                    return Err(fail(format!(
                        "`{}` does not exist (Read {} lists what does)",
                        attempt.authored,
                        sel.scope.address_of(&[])
                    )));
                }
                Found::Other => {
                    return Err(fail(format!(
                        "`{}` is not a regular file or directory",
                        attempt.authored
                    )));
                }
            }
        }
        Ok(Plan {
            roots,
            none_note: none_note.clone(),
            ..Plan::default()
        })
    }
}

impl Plan {
    /// A plan over documents of mevedel's own: each (ADDRESS, TEXT) is
    /// searched as one file named ADDRESS, without a mark.
    pub fn texts(texts: Vec<(String, Vec<u8>)>) -> Plan {
        let mut roots = Vec::new();
        let mut buffers = Vec::new();
        for (index, (address, text)) in texts.into_iter().enumerate() {
            // A name no file has, standing for the document.
            let path = std::path::PathBuf::from(format!("/\0mevedel-document/{index}"));
            roots.push(Root {
                base: std::path::PathBuf::from("/\0mevedel-document"),
                file: Some((path.clone(), address)),
                naming: Naming::Plain(String::new()),
                filter: crate::resource::prepare::Filter::Any,
                empty_note: None,
            });
            buffers.push((
                path,
                unsaved::Buffer {
                    text,
                    new: true,
                    plain: true,
                },
            ));
        }
        Plan {
            roots,
            unsaved: unsaved::Unsaved::new(buffers),
            ..Plan::default()
        }
    }
}

/// Run Grep over PLAN.
pub fn grep(
    plan: &Plan,
    opts: &grep::Options,
    budget: &budget::Budget,
) -> Result<output::Page, Error> {
    let mut found = grep::grep_lines(&plan.roots, opts, &plan.unsaved, budget)?;
    if found.is_empty()
        && let Some(n) = &plan.none_note
    {
        found.notes = vec![n.clone()];
    }
    let empty = if opts.mode == grep::Mode::FilesWithMatches {
        "No files found."
    } else {
        "No matches found."
    };
    output::page(found, opts.offset, opts.head_limit, empty, "Grep")
}

/// Run Glob over PLAN.
pub fn glob(plan: &Plan, pattern: &str, budget: &budget::Budget) -> Result<output::Page, Error> {
    let mut found = glob::glob_lines(&plan.roots, pattern, &plan.unsaved, budget)?;
    if found.is_empty()
        && let Some(n) = &plan.none_note
    {
        found.notes = vec![n.clone()];
    }
    output::page(found, 0, 0, "No files found.", "Glob")
}
