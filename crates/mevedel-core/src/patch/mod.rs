//! ApplyPatch's engine: the patch grammar, matching, applying in memory,
//! diffs of the computed change, selection of hunks, and the atomic
//! commit across files.
//!
//! `grammar` parses; `plan` reads every target and runs `apply` (which
//! uses `matching`) and `diff` for every file, writing nothing;
//! `selection` turns a plan and the reviewer's choices into `commit`'s
//! actions, which write everything or nothing; `report` describes
//! operations, plans and outcomes as plists for the reviewers.
//!
//! Deliberately stricter or different than the reference (Codex) tool:
//! a patch applies to every file or to none; Add refuses an existing
//! file; a hunk found in more than one place is an error; a file touched
//! by two operations of one patch is refused (but Delete then Add of one
//! path is one rewrite of it, as an update); a file keeps its missing
//! final newline. As in the reference, a Move overwrites an existing
//! destination and a hunk of only added lines goes at the end of the
//! file, whatever its anchors.

pub mod apply;
pub mod commit;
pub mod diff;
pub mod grammar;
pub mod matching;
pub mod plan;
pub mod report;
pub mod selection;

#[cfg(test)]
mod tests;

pub use grammar::{Chunk, Kind, Op, Patch, parse};
pub use plan::{FilePlan, OpKind, Plan, plan};
pub use selection::{FileChoice, FileOutcome, HunkChoice, Outcome, Status, apply};
