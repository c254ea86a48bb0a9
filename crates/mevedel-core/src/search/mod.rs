//! Glob and Grep in-process over the `ignore`, `globset` (through
//! `ignore`'s overrides), `grep-regex` and `grep-searcher` crates.
//!
//! The searches themselves live in the `mevedel-search` crate, shared
//! with the remote helper; this module adds what needs the rest of the
//! core:
//!
//! - [`jobs`]: background runs answered through the event channel;
//! - [`plan_for`] and [`attempt_plan`]: plans over resource attempts.
//!
//! Resource attempts become [`Plan`]s here, so a search over
//! `work://` or `mevedel://` names its results by address and never
//! shows a backing path.

pub mod jobs;

pub use mevedel_search::{budget, glob, grep, output, unsaved, walk};

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::resource::contain::Found;
use crate::resource::prepare::{Attempt, Target};
pub use mevedel_search::plan::{Plan, glob, grep};
pub use walk::{Naming, Root};

/// What a Glob or Grep runs over: a prepared resource attempt, or an
/// ordinary path and how the caller spelled it.
pub enum Over {
    Attempt(Arc<Attempt>),
    Path(PathBuf, String),
}

/// The plan for OVER, with the modified buffers UNSAVED standing in
/// for their files.
pub fn plan_for(over: &Over, unsaved: unsaved::Unsaved) -> Result<Plan, Error> {
    let plan = match over {
        Over::Attempt(attempt) => attempt_plan(attempt)?,
        Over::Path(path, display) => return Plan::for_path(path, display, unsaved),
    };
    Ok(Plan { unsaved, ..plan })
}

/// The roots of a prepared resource ATTEMPT.
pub fn attempt_plan(attempt: &Attempt) -> Result<Plan, Error> {
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
