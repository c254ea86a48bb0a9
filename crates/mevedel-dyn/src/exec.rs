//! Owned child processes (see `process::owner`) and managed executions
//! (see `exec::manager`).

use std::sync::Arc;
use std::time::Duration;

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::datum::Datum;
use mevedel_core::error::ErrorKind;
use mevedel_core::events;
use mevedel_core::exec::execution::{Exec, Kind, Spec};
use mevedel_core::exec::manager;
use mevedel_core::process;
use mevedel_core::runtime;

use crate::convert::to_lisp;
use crate::errors::OrSignal;
use crate::guard::guarded;

/// Stop every owned process group (TERM, KILL after GRACE-MS). Returns
/// how many groups were signalled.
#[defun(name = "exec-stop-all")]
fn exec_stop_all(env: &Env, grace_ms: i64) -> Result<i64> {
    guarded(env, || {
        let grace = Duration::from_millis(grace_ms.clamp(0, 60_000) as u64);
        Ok(process::global().stop_all(grace) as i64)
    })
}

/// Ids of the owned process groups that still have members.
#[defun(name = "exec-live-groups")]
fn exec_live_groups(env: &Env) -> Result<Value<'_>> {
    guarded(env, || {
        let groups = process::global()
            .live_groups()
            .into_iter()
            .map(|g| i64::from(g).into_lisp(env))
            .collect::<Result<Vec<_>>>()?;
        env.list(&groups[..])
    })
}

// Managed executions (Bash, Monitor). Observations and stops answer
// through `reply` events for the request id Lisp passes.

fn reply_when_done(
    request_id: i64,
    work: impl std::future::Future<Output = Datum> + Send + 'static,
) -> mevedel_core::Result<()> {
    runtime::spawn(async move {
        let datum = work.await;
        events::global().push(events::reply(request_id, Ok(datum)));
    })
}

fn wait(ms: i64) -> Duration {
    Duration::from_millis(ms.clamp(0, 3_600_000) as u64)
}

fn find(session: &str, id: &str, owner: Option<&str>) -> mevedel_core::Result<Arc<Exec>> {
    manager::global().find(session, id, owner)
}

/// Start the execution described by SPEC-JSON (see `exec::execution::Spec`)
/// and return its id. Refusals signal at once; the first observation
/// (after the spec's yield-ms) answers REQUEST-ID.
#[defun(name = "exec-start")]
fn exec_start(env: &Env, spec_json: String, request_id: i64) -> Result<String> {
    guarded(env, || {
        let spec: Spec = serde_json::from_str(&spec_json)
            .map_err(|e| {
                mevedel_core::Error::new(ErrorKind::Exec, format!("bad execution spec: {e}"))
            })
            .or_signal(env)?;
        let yield_for = wait(spec.yield_ms.map_or(10_000, |ms| ms as i64));
        let monitor = spec.kind == Kind::Monitor;
        let exec = manager::global().start(spec).or_signal(env)?;
        let id = exec.id.clone();
        let work = async move {
            if monitor {
                manager::observe_launch(exec, yield_for).await
            } else {
                manager::observe(exec, yield_for, |_| {}).await
            }
        };
        reply_when_done(request_id, work).or_signal(env)?;
        Ok(id)
    })
}

/// Observe execution ID of SESSION for OWNER (nil: the user) after
/// waiting up to WAIT-MS for it to finish; answers REQUEST-ID.
#[defun(name = "exec-observe")]
fn exec_observe(
    env: &Env,
    session: String,
    id: String,
    owner: Option<String>,
    wait_ms: i64,
    request_id: i64,
) -> Result<()> {
    guarded(env, || {
        let exec = find(&session, &id, owner.as_deref()).or_signal(env)?;
        reply_when_done(request_id, manager::observe(exec, wait(wait_ms), |_| {})).or_signal(env)
    })
}

/// Send CHARS to execution ID (input goes only to a PTY; "\x03" is
/// Ctrl-C), then observe it after WAIT-MS; answers REQUEST-ID.
#[defun(name = "exec-write")]
fn exec_write(
    env: &Env,
    session: String,
    id: String,
    owner: Option<String>,
    chars: String,
    wait_ms: i64,
    request_id: i64,
) -> Result<()> {
    guarded(env, || {
        let exec = find(&session, &id, owner.as_deref()).or_signal(env)?;
        manager::write_input(&exec, &chars).or_signal(env)?;
        reply_when_done(request_id, manager::observe(exec, wait(wait_ms), |_| {})).or_signal(env)
    })
}

/// Send CHARS to execution ID of SESSION for the user (the executions
/// table): the same input rules as `exec-write`, but nothing is
/// observed, so the model's unread output stays unread.
#[defun(name = "exec-input-by-user")]
fn exec_input_by_user(env: &Env, session: String, id: String, chars: String) -> Result<()> {
    guarded(env, || {
        let exec = find(&session, &id, None).or_signal(env)?;
        manager::write_input(&exec, &chars).or_signal(env)
    })
}

/// Stop execution ID for OWNER: the model's stop answers REQUEST-ID with
/// the final observation once it settled. With USER non-nil (the user's
/// controls) OWNER is ignored, and the answer is t or nil at once.
#[defun(name = "exec-stop")]
fn exec_stop<'e>(
    env: &'e Env,
    session: String,
    id: String,
    owner: Option<String>,
    user: Value<'e>,
    request_id: i64,
) -> Result<Value<'e>> {
    guarded(env, || {
        if user.is_not_nil() {
            let exec = find(&session, &id, None).or_signal(env)?;
            return manager::stop_for_user(&exec).into_lisp(env);
        }
        let exec = find(&session, &id, owner.as_deref()).or_signal(env)?;
        reply_when_done(request_id, manager::stop_for_model(exec)).or_signal(env)?;
        ().into_lisp(env)
    })
}

/// OWNER's yielded, unfinished executions in SESSION (every unfinished
/// one for nil), as plists.
#[defun(name = "exec-list")]
fn exec_list(env: &Env, session: String, owner: Option<String>) -> Result<Value<'_>> {
    guarded(env, || {
        let items = manager::global().list(&session, owner.as_deref());
        to_lisp(env, &Datum::List(items))
    })
}

/// Stop every execution of SESSION, silently; returns how many ran.
#[defun(name = "exec-teardown")]
fn exec_teardown(env: &Env, session: String) -> Result<i64> {
    guarded(env, || Ok(manager::global().teardown(&session) as i64))
}

/// Tear down every session (Emacs exit, unload); returns how many ran.
#[defun(name = "exec-teardown-all")]
fn exec_teardown_all(env: &Env) -> Result<i64> {
    guarded(env, || Ok(manager::global().teardown_all() as i64))
}
