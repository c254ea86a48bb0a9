//! Where one search looks ([`Plan`]) and the two searches over it,
//! paged as the Glob and Grep tools show them.

use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind};
use crate::files;
use crate::filter::Filter;
use crate::walk::{Naming, Root};
use crate::{budget, glob, grep, output, unsaved};

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
    /// The plan for the ordinary PATH shown as DISPLAY, with UNSAVED
    /// standing in for their files. A PATH that exists only as one of
    /// them (a new file's buffer) is searched as that file; a PATH that
    /// does not exist, or is neither a regular file nor a directory, is
    /// an error naming DISPLAY.
    pub fn for_path(path: &Path, display: &str, unsaved: unsaved::Unsaved) -> Result<Plan, Error> {
        let truename = files::truename(path);
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
                filter: Filter::Any,
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
