//! Checkpoints (`store::checkpoint`) for Lisp: recording the files a
//! turn's edits change, listing turns, rewinding and the session diff.

use emacs::{Env, Result, Value, defun};
use mevedel_core::datum::Datum;
use mevedel_core::store::Store;
use std::sync::Arc;

use crate::convert::{strings, to_lisp};
use crate::errors::OrSignal;
use crate::guard::guarded;
use crate::store::handle_of;

/// HANDLE's store, or the error that it is closed.
fn store_of(env: &Env, handle: Value<'_>) -> Result<Arc<Store>> {
    handle_of(handle)?.store().or_signal(env)
}

/// Record, for turn TURN (LABEL: what the user asked), the present state
/// of each of PATHS (absolute) that the turn has not recorded yet; return
/// how many were new. Directories are left out.
#[defun(name = "checkpoint-before")]
fn checkpoint_before(
    env: &Env,
    handle: Value,
    turn: String,
    label: String,
    paths: Value,
) -> Result<i64> {
    guarded(env, || {
        let added = handle_of(handle)?
            .checkpoint_before(&turn, &label, &strings(paths)?)
            .or_signal(env)?;
        Ok(added as i64)
    })
}

/// Remember what each of PATHS holds now, as the session's edit left it.
#[defun(name = "checkpoint-after")]
fn checkpoint_after(env: &Env, handle: Value, paths: Value) -> Result<()> {
    guarded(env, || {
        handle_of(handle)?
            .checkpoint_after(&strings(paths)?)
            .or_signal(env)
    })
}

/// Mark TURN (LABEL: what the user asked) as one whose Bash calls may
/// have changed files.
#[defun(name = "checkpoint-note-bash")]
fn checkpoint_note_bash(env: &Env, handle: Value, turn: String, label: String) -> Result<()> {
    guarded(env, || {
        store_of(env, handle)?
            .checkpoint_note_bash(&turn, &label)
            .or_signal(env)
    })
}

/// The recorded turns, oldest first, as plists (:id :seq :label
/// :started-at :bash :files).
#[defun(name = "checkpoint-turns")]
fn checkpoint_turns<'e>(env: &'e Env, handle: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let turns = store_of(env, handle)?.checkpoint_turns().or_signal(env)?;
        to_lisp(
            env,
            &Datum::List(turns.iter().map(|t| t.to_datum()).collect()),
        )
    })
}

/// What rewinding to the start of TURN would do: plists (:path PATH
/// :action restore|delete :changed BOOL), CHANGED meaning someone changed
/// the file since the session's last edit of it.
#[defun(name = "checkpoint-rewind-plan")]
fn checkpoint_rewind_plan<'e>(env: &'e Env, handle: Value<'e>, turn: String) -> Result<Value<'e>> {
    guarded(env, || {
        let steps = store_of(env, handle)?.rewind_steps(&turn).or_signal(env)?;
        to_lisp(
            env,
            &Datum::List(steps.iter().map(|s| s.to_datum()).collect()),
        )
    })
}

/// Restore the files TURN and later turns edited to their state before
/// TURN, all or none, and forget those turns; return the steps taken, as
/// `checkpoint-rewind-plan' describes them.
#[defun(name = "checkpoint-rewind")]
fn checkpoint_rewind<'e>(env: &'e Env, handle: Value<'e>, turn: String) -> Result<Value<'e>> {
    guarded(env, || {
        let steps = store_of(env, handle)?.rewind(&turn).or_signal(env)?;
        to_lisp(
            env,
            &Datum::List(steps.iter().map(|s| s.to_datum()).collect()),
        )
    })
}

/// The unified diff of everything the session's edits changed.
#[defun(name = "checkpoint-diff")]
fn checkpoint_diff(env: &Env, handle: Value) -> Result<String> {
    guarded(env, || store_of(env, handle)?.session_diff().or_signal(env))
}
