//! ApplyPatch's engine (`patch`) for Lisp: parse, plan (an opaque
//! handle), the plan's files and diff hunks, apply with a selection, and
//! the before-state of every target.
//!
//! Results are built as [`Datum`]s and converted in one pass; a plan's
//! data never crosses until asked for.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::datum::Datum;
use mevedel_core::error::{Error, ErrorKind};
use mevedel_core::patch::{self, FileChoice, FilePlan, HunkChoice, Op, Plan};

use mevedel_core::search::jobs::{self, Job};

use crate::args::Plist;
use crate::convert::{list_items, to_lisp};
use crate::errors::OrSignal;
use crate::guard::guarded;
use crate::text::copy_exact;

/// The opaque plan Lisp holds between planning and applying.
pub type PlanPtr = Arc<Plan>;

fn patch_text(env: &Env, patch: Value<'_>) -> Result<String> {
    let copied = copy_exact(env, patch)?;
    Ok(String::from_utf8_lossy(copied.bytes()).into_owned())
}

/// The operations of PATCH, as written: a list of plists `(:op add|delete|update
/// :path P)`, updates with `:move-to` (or nil) and `:hunks N`. A grammar
/// error signals `mevedel-core-patch-error` naming the line.
#[defun(name = "patch-parse")]
fn patch_parse<'e>(env: &'e Env, patch: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let text = patch_text(env, patch)?;
        let parsed = patch::parse(&text).or_signal(env)?;
        let ops = parsed.ops.iter().map(Op::to_datum).collect();
        to_lisp(env, &Datum::List(ops))
    })
}

/// Plan PATCH against the files PATHS (an alist from each authored path,
/// move targets included, to its absolute backing path) resolves it to:
/// read every target and compute every result, writing nothing. Returns
/// the opaque plan; a failure signals `mevedel-core-patch-error`.
#[defun(user_ptr, name = "patch-plan")]
fn patch_plan(env: &Env, patch: Value<'_>, paths: Value<'_>) -> Result<PlanPtr> {
    guarded(env, || {
        let text = patch_text(env, patch)?;
        let parsed = patch::parse(&text).or_signal(env)?;
        let mut resolved = HashMap::new();
        for pair in list_items(paths)? {
            let authored: String = pair.car()?;
            let abs: String = pair.cdr()?;
            resolved.insert(authored, PathBuf::from(abs));
        }
        let plan = patch::plan(&parsed, &resolved).or_signal(env)?;
        Ok(Arc::new(plan))
    })
}

/// Per file of PLAN, in patch order, a plist of :path :abs :op :move-to
/// :move-abs :added :removed :diff and :hunks (the diff hunks of the
/// computed change, each :index :header :old-start :old-lines :new-start
/// :new-lines :added :removed :text :new-text).
#[defun(name = "patch-plan-files")]
fn patch_plan_files<'e>(env: &'e Env, plan: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let plan = plan.into_ref::<PlanPtr>()?;
        let files = plan.files.iter().map(FilePlan::to_datum).collect();
        to_lisp(env, &Datum::List(files))
    })
}

fn selection_error(message: &str) -> Error {
    Error::new(ErrorKind::Patch, format!("Invalid selection: {message}"))
}

fn hunk_choice(env: &Env, item: Value<'_>) -> Result<HunkChoice> {
    let accept = env.intern("accept")?;
    let reject = env.intern("reject")?;
    let edit = env.intern("edit")?;
    if item == accept {
        return Ok(HunkChoice::Accept);
    }
    if item == reject {
        return Ok(HunkChoice::Reject);
    }
    let head: Value<'_> = match item.car() {
        Ok(head) => head,
        Err(_) => {
            return Err(selection_error(
                "a hunk choice is accept, reject or (edit . TEXT)",
            ))
            .or_signal(env);
        }
    };
    if head != edit {
        return Err(selection_error(
            "a hunk choice is accept, reject or (edit . TEXT)",
        ))
        .or_signal(env);
    }
    let text = patch_text(env, item.cdr()?)?;
    Ok(HunkChoice::Edit(text))
}

fn selection(env: &Env, value: Value<'_>) -> Result<HashMap<PathBuf, FileChoice>> {
    let mut out = HashMap::new();
    let accept = env.intern("accept")?;
    let reject = env.intern("reject")?;
    for pair in list_items(value)? {
        let abs: String = pair.car()?;
        let choice: Value<'_> = pair.cdr()?;
        let choice = if choice == reject {
            FileChoice::Reject
        } else if choice == accept {
            FileChoice::All
        } else {
            let hunks = list_items(choice)?
                .into_iter()
                .map(|item| hunk_choice(env, item))
                .collect::<Result<Vec<_>>>()?;
            FileChoice::Hunks(hunks)
        };
        out.insert(PathBuf::from(abs), choice);
    }
    Ok(out)
}

/// Apply PLAN atomically: everything when SELECTION is nil, else per the
/// alist ((ABS . reject | accept | (HUNK-CHOICE...)) ...), each
/// HUNK-CHOICE `accept', `reject' or (edit . TEXT); files not named are
/// applied whole. Returns (:files (PLIST...) :added N :removed N).
#[defun(name = "patch-apply")]
fn patch_apply<'e>(env: &'e Env, plan: Value<'e>, choices: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let plan = Arc::clone(&*plan.into_ref::<PlanPtr>()?);
        let chosen = selection(env, choices)?;
        let outcome = patch::apply(&plan, &|abs: &Path| {
            chosen.get(abs).cloned().unwrap_or(FileChoice::All)
        })
        .or_signal(env)?;
        to_lisp(env, &outcome.to_datum(&plan))
    })
}

/// The before-state of every target of PLAN: ((ABS . BYTES-OR-NIL) ...),
/// BYTES a unibyte string, nil for a file that did not exist.
#[defun(name = "patch-before")]
fn patch_before<'e>(env: &'e Env, plan: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let plan = plan.into_ref::<PlanPtr>()?;
        let mut items = Vec::new();
        for f in &plan.files {
            let abs = f.abs.to_string_lossy().into_owned().into_lisp(env)?;
            let bytes = match &f.before {
                Some(b) => b.as_slice().into_lisp(env)?,
                None => ().into_lisp(env)?,
            };
            items.push(env.cons(abs, bytes)?);
            if let Some(to) = &f.move_abs {
                let abs = to.to_string_lossy().into_owned().into_lisp(env)?;
                items.push(env.cons(abs, ().into_lisp(env)?)?);
            }
        }
        env.list(&items[..])
    })
}

/// The unified diff of NAME from BEFORE to NOW (both strings), empty
/// when nothing changed: the preview of a shared item's edit, whose
/// texts are small enough to diff while the row is drawn.
#[defun(name = "patch-diff-texts")]
fn patch_diff_texts<'e>(
    env: &'e Env,
    before: Value<'e>,
    now: Value<'e>,
    name: String,
) -> Result<String> {
    guarded(env, || {
        let before = copy_exact(env, before)?;
        let now = copy_exact(env, now)?;
        Ok(patch::diff::whole_file(
            before.bytes(),
            now.bytes(),
            &name,
            &name,
        ))
    })
}

/// The unified diffs of changed files, in the background; the reply
/// for request ID is (:diffs DIFFS), one string per file, or nil for a
/// file whose diff did not fit in what was left of the budget. ARGS:
/// `:changes`, a list of (NAME BEFORE NOW) with both texts strings, and
/// `:budget`, characters for all the diffs. The model is told this way
/// of edits it did not make; `search-cancel` stops the job.
#[defun(name = "patch-diffs-start")]
fn patch_diffs_start(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "patch-diffs-start", args)?;
        let items = args.list(":changes")?;
        let budget = usize::try_from(args.int(":budget")?).unwrap_or(0);
        args.finish()?;
        let mut changes = Vec::with_capacity(items.len());
        for item in items {
            let name: String = item.car()?;
            let rest = item.cdr::<Value>()?;
            let before = copy_exact(env, rest.car()?)?.bytes().to_vec();
            let now = copy_exact(env, rest.cdr::<Value>()?.car()?)?
                .bytes()
                .to_vec();
            changes.push(patch::diff::FileChange { name, before, now });
        }
        jobs::start(id, Job::Diffs(changes, budget), None).or_signal(env)
    })
}
