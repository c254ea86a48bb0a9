//! Applying part of a plan: per file everything, nothing, or a choice
//! per diff hunk (accept, reject, or accept with replaced new text).
//!
//! A hunk stands for its old lines (context included) and its new side;
//! applying a subset replaces each accepted hunk's old lines by its new
//! side (or by the edited text) and leaves the rest of the file as it was.
//! Hunks of one file never overlap, so any subset applies cleanly.

use std::borrow::Cow;
use std::path::Path;

use super::apply::{Replacement, TextFile};
use super::commit::{self, Action, Expect};
use super::diff::{self, DiffHunk};
use super::plan::{FilePlan, OpKind, Plan};
use crate::error::{Error, ErrorKind, Result};

/// What to do with one diff hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkChoice {
    Accept,
    Reject,
    /// Accept with this text as the hunk's new side.
    Edit(String),
}

/// What to do with one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChoice {
    All,
    Reject,
    Hunks(Vec<HunkChoice>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Applied,
    Rejected,
    Partial,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Applied => "applied",
            Status::Rejected => "rejected",
            Status::Partial => "partial",
        }
    }
}

/// What was done to one file.
#[derive(Debug, Clone)]
pub struct FileOutcome {
    pub index: usize,
    pub status: Status,
    pub added: usize,
    pub removed: usize,
    pub diff: String,
}

/// What the whole apply did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub files: Vec<FileOutcome>,
    pub added: usize,
    pub removed: usize,
}

fn patch_error(message: String) -> Error {
    Error::new(ErrorKind::Patch, message)
}

/// Lines of edited TEXT, and whether it ends with a newline.
fn edited_lines(text: &str) -> (Vec<String>, bool) {
    let lines = text
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect();
    (lines, text.is_empty() || text.ends_with('\n'))
}

/// The file's result under CHOICES: (new text or `None` for removal,
/// status, the replacements made when only some hunks are).
type Resolved<'a> = (Option<Cow<'a, TextFile>>, Status, Option<Vec<Replacement>>);

fn resolve<'a>(file: &'a FilePlan, choices: &[HunkChoice]) -> Result<Resolved<'a>> {
    if choices.len() != file.hunks.len() {
        return Err(patch_error(format!(
            "{}: the selection has {} hunk choices but the file has {} hunks",
            file.path,
            choices.len(),
            file.hunks.len()
        )));
    }
    let all_accept = choices.iter().all(|c| *c == HunkChoice::Accept);
    let all_reject = choices.iter().all(|c| *c == HunkChoice::Reject);
    if all_accept {
        return Ok((file.new.as_ref().map(Cow::Borrowed), Status::Applied, None));
    }
    if all_reject && file.move_abs.is_none() {
        return Ok((Some(Cow::Borrowed(&file.old)), Status::Rejected, None));
    }
    if file.op == OpKind::Delete {
        if choices.iter().any(|c| matches!(c, HunkChoice::Edit(_))) {
            return Err(patch_error(format!(
                "{}: the hunk of a deleted file cannot be edited; accept or reject it",
                file.path
            )));
        }
        return Ok((Some(Cow::Borrowed(&file.old)), Status::Rejected, None));
    }
    let old = &file.old;
    let mut replacements = Vec::new();
    let mut final_newline = old.final_newline;
    let new_nl = file.new.as_ref().is_none_or(|n| n.final_newline);
    for (hunk, choice) in file.hunks.iter().zip(choices) {
        let reaches_end = hunk.old_from + hunk.old_count == old.lines.len();
        let new = match choice {
            HunkChoice::Reject => continue,
            HunkChoice::Accept => {
                if reaches_end {
                    final_newline = new_nl;
                }
                hunk.new_side()
            }
            HunkChoice::Edit(text) => {
                let (lines, nl) = edited_lines(text);
                if reaches_end {
                    final_newline = nl;
                }
                lines
            }
        };
        replacements.push(Replacement {
            start: hunk.old_from,
            old_len: hunk.old_count,
            new,
        });
    }
    let lines = super::apply::replace(&old.lines, &replacements);
    Ok((
        Some(Cow::Owned(old.with_lines(lines, final_newline))),
        Status::Partial,
        Some(replacements),
    ))
}

/// The diff of what is actually done to FILE when it becomes NEW through
/// REPLACEMENTS (`None`: all of it at once).
fn diff_of(
    file: &FilePlan,
    new: Option<&TextFile>,
    removed: bool,
    replacements: Option<&[Replacement]>,
) -> (Vec<DiffHunk>, String) {
    let empty = TextFile::from_lines(Vec::new());
    let target = if removed {
        &empty
    } else {
        new.unwrap_or(&empty)
    };
    let whole;
    let replacements = match replacements {
        Some(r) => r,
        None => {
            whole = [Replacement {
                start: 0,
                old_len: file.old.lines.len(),
                new: target.lines.clone(),
            }];
            &whole[..]
        }
    };
    let hunks = diff::hunks(
        &file.old.lines,
        &target.lines,
        replacements,
        file.old.final_newline,
        target.final_newline,
    );
    let (a, b) = file.diff_names();
    let (a, b) = if removed {
        (a, "/dev/null".to_string())
    } else {
        (a, b)
    };
    let mut text = diff::unified(&a, &b, &hunks);
    if text.is_empty()
        && let Some(to) = &file.move_to
    {
        text = format!("rename from {}\nrename to {to}\n", file.path);
    }
    (hunks, text)
}

/// Apply PLAN with CHOICE_OF each file's absolute path (`All` when
/// absent): check every target, then write everything or nothing.
pub fn apply(plan: &Plan, choice_of: &dyn Fn(&Path) -> FileChoice) -> Result<Outcome> {
    let mut expect = Vec::new();
    let mut actions = Vec::new();
    let mut files = Vec::new();
    for (index, file) in plan.files.iter().enumerate() {
        expect.push(Expect {
            display: file.path.clone(),
            path: file.abs.clone(),
            bytes: file.before.as_deref(),
        });
        if let (Some(to), Some(to_abs)) = (&file.move_to, &file.move_abs) {
            expect.push(Expect {
                display: to.clone(),
                path: to_abs.clone(),
                bytes: file.move_before.as_deref(),
            });
        }
        let choice = choice_of(&file.abs);
        let (new, status, replacements) = match &choice {
            FileChoice::Reject => (None, Status::Rejected, None),
            FileChoice::All => (file.new.as_ref().map(Cow::Borrowed), Status::Applied, None),
            FileChoice::Hunks(choices) => resolve(file, choices)?,
        };
        if status == Status::Rejected {
            files.push(FileOutcome {
                index,
                status,
                added: 0,
                removed: 0,
                diff: String::new(),
            });
            continue;
        }
        // Applied whole, the change is the plan's own, diff included.
        let (added, removed, diff) = if status == Status::Applied {
            (file.added, file.removed, file.diff())
        } else {
            let replacements = replacements.unwrap_or_default();
            let removes = file.op == OpKind::Delete && new.is_none();
            let (hunks, diff) = diff_of(
                file,
                new.as_deref(),
                removes,
                (!removes).then_some(&replacements[..]),
            );
            (
                hunks.iter().map(|h| h.added).sum(),
                hunks.iter().map(|h| h.removed).sum(),
                diff,
            )
        };
        files.push(FileOutcome {
            index,
            status,
            added,
            removed,
            diff,
        });
        match (&new, &file.move_abs) {
            (None, _) => actions.push(Action::Remove {
                display: file.path.clone(),
                path: file.abs.clone(),
            }),
            (Some(text), None) => {
                let bytes = text.encode();
                if file.before.as_deref() != Some(&bytes[..]) {
                    actions.push(Action::Write {
                        display: file.path.clone(),
                        path: file.abs.clone(),
                        bytes,
                        mode: file.mode,
                    });
                }
            }
            (Some(text), Some(to_abs)) => {
                actions.push(Action::Write {
                    display: file.move_to.clone().unwrap_or_default(),
                    path: to_abs.clone(),
                    bytes: text.encode(),
                    mode: file.mode,
                });
                actions.push(Action::Remove {
                    display: file.path.clone(),
                    path: file.abs.clone(),
                });
            }
        }
    }
    commit::commit(&expect, &actions)?;
    let added = files.iter().map(|f| f.added).sum();
    let removed = files.iter().map(|f| f.removed).sum();
    Ok(Outcome {
        files,
        added,
        removed,
    })
}
