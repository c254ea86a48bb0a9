//! Owned child processes (see `process::owner`) and managed executions
//! (see `exec::manager`).

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::datum::Datum;
use mevedel_core::error::ErrorKind;
use mevedel_core::exec::execution::Spec;
use mevedel_core::exec::{manager, relay};
use mevedel_core::process;

use crate::args::Plist;
use crate::convert::to_lisp;
use crate::errors::OrSignal;
use crate::guard::guarded;

/// Stop every owned process group (TERM, KILL after GRACE-MS). Returns
/// how many groups were signalled.
#[defun(name = "exec-stop-all")]
fn exec_stop_all(env: &Env, grace_ms: i64) -> Result<i64> {
    guarded(env, || Ok(process::global().stop_all_ms(grace_ms) as i64))
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

/// Start the execution SPEC describes, a plist of the keys of
/// `exec::execution::Spec` (`:sandbox` a plist of
/// `sandbox::launch::Request`'s), and return its id. Refusals signal at
/// once; the first observation (after the spec's yield-ms) answers
/// REQUEST-ID.
#[defun(name = "exec-start")]
fn exec_start(env: &Env, request_id: i64, spec: Value<'_>) -> Result<String> {
    guarded(env, || {
        let spec: Spec = Plist::new(env, "exec-start", spec)?
            .deserialize(ErrorKind::Exec, "bad execution spec")?;
        manager::answer_start(request_id, spec).or_signal(env)
    })
}

/// The execution named by the `:session`, `:id` and `:owner` (nil: the
/// user) of ARGS.
fn execution(args: &mut Plist<'_>) -> Result<(String, String, Option<String>)> {
    Ok((
        args.string(":session")?,
        args.string(":id")?,
        args.opt_string(":owner")?,
    ))
}

/// Observe an execution after waiting up to `:wait-ms` for it to finish;
/// answers REQUEST-ID. ARGS: `:session`, `:id`, `:owner`, `:wait-ms`.
#[defun(name = "exec-observe")]
fn exec_observe(env: &Env, request_id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "exec-observe", args)?;
        let (session, id, owner) = execution(&mut args)?;
        let wait_ms = args.int(":wait-ms")?;
        args.finish()?;
        manager::answer_observe(request_id, &session, &id, owner.as_deref(), wait_ms).or_signal(env)
    })
}

/// Send `:chars` to an execution (input goes only to a PTY; "\x03" is
/// Ctrl-C), then observe it after `:wait-ms`; answers REQUEST-ID. ARGS:
/// `:session`, `:id`, `:owner`, `:chars`, `:wait-ms`.
#[defun(name = "exec-write")]
fn exec_write(env: &Env, request_id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "exec-write", args)?;
        let (session, id, owner) = execution(&mut args)?;
        let chars = args.string(":chars")?;
        let wait_ms = args.int(":wait-ms")?;
        args.finish()?;
        manager::answer_write(request_id, &session, &id, owner.as_deref(), &chars, wait_ms)
            .or_signal(env)
    })
}

/// Stop an execution for the model: the final observation answers
/// REQUEST-ID once it settled. ARGS: `:session`, `:id`, `:owner`.
#[defun(name = "exec-stop")]
fn exec_stop(env: &Env, request_id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "exec-stop", args)?;
        let (session, id, owner) = execution(&mut args)?;
        args.finish()?;
        manager::answer_stop(request_id, &session, &id, owner.as_deref()).or_signal(env)
    })
}

/// Send CHARS to execution ID of SESSION for the user (the executions
/// table): the same input rules as `exec-write`, but nothing is
/// observed, so the model's unread output stays unread.
#[defun(name = "exec-input-by-user")]
fn exec_input_by_user(env: &Env, session: String, id: String, chars: String) -> Result<()> {
    guarded(env, || {
        manager::user_input(&session, &id, &chars).or_signal(env)
    })
}

/// Stop execution ID of SESSION for the user's controls: non-nil if it
/// was running. Its result goes where it would have gone.
#[defun(name = "exec-stop-by-user")]
fn exec_stop_by_user(env: &Env, session: String, id: String) -> Result<bool> {
    guarded(env, || manager::user_stop(&session, &id).or_signal(env))
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

// Relayed executions (a remote workspace's commands): Lisp runs the
// command the `exec-relay` launch event describes and reports back
// here; each answers non-nil when the execution still listened.

/// A relayed execution started. ARGS: `:session`, `:id`, `:boundary`
/// (a sandbox boundary's name, e.g. "bwrap-landlock" or "unconfined"),
/// `:disclosure` (what it lacks, or nil).
#[defun(name = "exec-relay-started")]
fn exec_relay_started(env: &Env, args: Value<'_>) -> Result<bool> {
    guarded(env, || {
        let mut args = Plist::new(env, "exec-relay-started", args)?;
        let (session, id) = (args.string(":session")?, args.string(":id")?);
        let boundary = args.string(":boundary")?;
        let disclosure = args.opt_string(":disclosure")?;
        args.finish()?;
        relay::started(&session, &id, &boundary, disclosure).or_signal(env)
    })
}

/// Output of a relayed execution. ARGS: `:session`, `:id`, `:data`
/// (base64: the bytes need not be UTF-8).
#[defun(name = "exec-relay-output")]
fn exec_relay_output(env: &Env, args: Value<'_>) -> Result<bool> {
    guarded(env, || {
        let mut args = Plist::new(env, "exec-relay-output", args)?;
        let (session, id) = (args.string(":session")?, args.string(":id")?);
        let data = args.string(":data")?;
        args.finish()?;
        relay::output(&session, &id, &data).or_signal(env)
    })
}

/// A relayed execution ended. ARGS: `:session`, `:id`, `:exit-code`
/// (or nil), `:signal` (its name, e.g. "TERM", or nil).
#[defun(name = "exec-relay-exit")]
fn exec_relay_exit(env: &Env, args: Value<'_>) -> Result<bool> {
    guarded(env, || {
        let mut args = Plist::new(env, "exec-relay-exit", args)?;
        let (session, id) = (args.string(":session")?, args.string(":id")?);
        let code = args.opt_int(":exit-code")?;
        let signal = args.opt_string(":signal")?;
        args.finish()?;
        relay::exited(&session, &id, code, signal.as_deref()).or_signal(env)
    })
}

/// A relayed execution could not start, or was lost. ARGS: `:session`,
/// `:id`, `:message` (why, naming the host).
#[defun(name = "exec-relay-failed")]
fn exec_relay_failed(env: &Env, args: Value<'_>) -> Result<bool> {
    guarded(env, || {
        let mut args = Plist::new(env, "exec-relay-failed", args)?;
        let (session, id) = (args.string(":session")?, args.string(":id")?);
        let message = args.string(":message")?;
        args.finish()?;
        relay::failed(&session, &id, &message).or_signal(env)
    })
}
