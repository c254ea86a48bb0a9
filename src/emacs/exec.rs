//! Owned child processes (see `exec::owner`).

use std::path::PathBuf;
use std::time::Duration;

use emacs::{Env, IntoLisp, Result, Value, defun};

use super::errors::OrSignal;
use super::guard::guarded;
use crate::exec::owner;

fn string_list(list: Value) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = list;
    while rest.is_not_nil() {
        out.push(rest.car::<String>()?);
        rest = rest.cdr()?;
    }
    Ok(out)
}

/// Start ARGV (a list of strings) in directory CWD (or the current one)
/// as an owned process group. Returns its pid.
#[defun(name = "exec-spawn")]
fn exec_spawn(env: &Env, argv: Value, cwd: Option<String>) -> Result<i64> {
    guarded(env, || {
        let argv = string_list(argv)?;
        let cwd = cwd.map(PathBuf::from);
        let pid = owner::global()
            .spawn(&argv, cwd.as_deref())
            .or_signal(env)?;
        Ok(i64::from(pid))
    })
}

/// Stop every owned process group (TERM, KILL after GRACE-MS). Returns
/// how many groups were signalled.
#[defun(name = "exec-stop-all")]
fn exec_stop_all(env: &Env, grace_ms: i64) -> Result<i64> {
    guarded(env, || {
        let grace = Duration::from_millis(grace_ms.clamp(0, 60_000) as u64);
        Ok(owner::global().stop_all(grace) as i64)
    })
}

/// Ids of the owned process groups that still have members.
#[defun(name = "exec-live-groups")]
fn exec_live_groups(env: &Env) -> Result<Value<'_>> {
    guarded(env, || {
        let groups = owner::global()
            .live_groups()
            .into_iter()
            .map(|g| i64::from(g).into_lisp(env))
            .collect::<Result<Vec<_>>>()?;
        env.list(&groups[..])
    })
}
