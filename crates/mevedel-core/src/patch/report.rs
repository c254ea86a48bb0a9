//! A patch's operations, plan and outcome as the plists its reviewers
//! read (`Datum`s; the seam converts them).

use std::path::Path;

use super::diff::DiffHunk;
use super::{FilePlan, Op, Outcome, Plan};
use crate::datum::Datum;

fn int(n: usize) -> Datum {
    Datum::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn sym(name: &str) -> Datum {
    Datum::Symbol(name.to_string())
}

fn path_str(path: &Path) -> Datum {
    Datum::Str(path.to_string_lossy().into_owned())
}

impl Op {
    /// `(:op add|delete|update :path P)`, updates with `:move-to` (or
    /// nil) and `:hunks N`.
    pub fn to_datum(&self) -> Datum {
        let mut pairs = vec![
            (":op", sym(self.name())),
            (":path", Datum::str(self.path())),
        ];
        if let Op::Update {
            move_to, chunks, ..
        } = self
        {
            pairs.push((":move-to", Datum::opt_str(move_to.clone())));
            pairs.push((":hunks", int(chunks.len())));
        }
        Datum::plist(pairs)
    }
}

/// Hunk INDEX of a file's diff: `(:index :header :old-start :old-lines
/// :new-start :new-lines :added :removed :text :new-text)`.
fn hunk_datum(index: usize, h: &DiffHunk) -> Datum {
    Datum::plist([
        (":index", int(index)),
        (":header", Datum::Str(h.header())),
        (":old-start", int(h.old_start())),
        (":old-lines", int(h.old_count)),
        (":new-start", int(h.new_start())),
        (":new-lines", int(h.new_count)),
        (":added", int(h.added)),
        (":removed", int(h.removed)),
        (":text", Datum::Str(h.text())),
        (":new-text", Datum::Str(h.new_text())),
    ])
}

impl FilePlan {
    /// `(:path :abs :op :move-to :move-abs :added :removed :diff :hunks)`.
    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            (":path", Datum::str(self.path.as_str())),
            (":abs", path_str(&self.abs)),
            (":op", sym(self.op.name())),
            (":move-to", Datum::opt_str(self.move_to.clone())),
            (
                ":move-abs",
                self.move_abs.as_deref().map_or(Datum::Nil, path_str),
            ),
            (":added", int(self.added)),
            (":removed", int(self.removed)),
            (":diff", Datum::Str(self.diff())),
            (
                ":hunks",
                Datum::List(
                    self.hunks
                        .iter()
                        .enumerate()
                        .map(|(i, h)| hunk_datum(i, h))
                        .collect(),
                ),
            ),
        ])
    }
}

impl Outcome {
    /// `(:files (PLIST...) :added N :removed N)` of applying PLAN, each
    /// file `(:path :abs :op :move-to :status :added :removed :diff)`.
    pub fn to_datum(&self, plan: &Plan) -> Datum {
        let files = self
            .files
            .iter()
            .map(|o| {
                let f = &plan.files[o.index];
                Datum::plist([
                    (":path", Datum::str(f.path.as_str())),
                    (":abs", path_str(&f.abs)),
                    (":op", sym(f.op.name())),
                    (":move-to", Datum::opt_str(f.move_to.clone())),
                    (":status", sym(o.status.name())),
                    (":added", int(o.added)),
                    (":removed", int(o.removed)),
                    (":diff", Datum::Str(o.diff.clone())),
                ])
            })
            .collect();
        Datum::plist([
            (":files", Datum::List(files)),
            (":added", int(self.added)),
            (":removed", int(self.removed)),
        ])
    }
}
