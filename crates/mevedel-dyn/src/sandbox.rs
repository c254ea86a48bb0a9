//! Sandbox probe and preparation (confined commands run as managed
//! executions: `exec-start` with a `:sandbox` request).
//!
//! Requests arrive as JSON text (built by `lisp/mevedel-core.el`), so
//! their shape is checked in one place (`sandbox::launch::Request`).
//! Slow work (probing) is a background job (`runtime::spawn_job`) that
//! answers as the `reply' event for the request id.

use std::path::PathBuf;
use std::time::Duration;

use emacs::{Env, Result, Value, defun};
use mevedel_core::datum::Datum;
use mevedel_core::runtime;
use mevedel_core::sandbox::launch::{self, Request};
use mevedel_core::sandbox::{policy, probe};

use crate::convert::to_lisp;
use crate::errors::OrSignal;
use crate::guard::guarded;

/// Probe the confinement layers on a background thread; the answer (a
/// plist) arrives as the `reply' event for request ID. PATH is where to
/// look for bwrap (default: Emacs's PATH), HELPER the helper binary,
/// TARGET the execution target; the result is cached per target, PATH
/// and helper unless REFRESH is non-nil.
#[defun(name = "sandbox-probe")]
fn sandbox_probe(
    env: &Env,
    id: i64,
    timeout_ms: i64,
    path: Option<String>,
    helper: Option<String>,
    target: Option<String>,
    refresh: Option<Value>,
) -> Result<()> {
    guarded(env, || {
        let timeout = Duration::from_millis(timeout_ms.clamp(1, 60_000) as u64);
        let options = probe::Options {
            target: target.unwrap_or_else(|| "local".into()),
            path_var: path.map(Into::into).or_else(|| std::env::var_os("PATH")),
            helper: helper.map(PathBuf::from),
        };
        let refresh = refresh.is_some_and(|v| v.is_not_nil());
        runtime::spawn_job(id, "probe", None, move || {
            Ok(probe::cached(&options, timeout, refresh).to_datum())
        })
        .or_signal(env)
    })
}

/// Forget every cached probe.
#[defun(name = "sandbox-forget-probes")]
fn sandbox_forget_probes(env: &Env) -> Result<()> {
    guarded(env, || {
        probe::forget();
        Ok(())
    })
}

/// The boundary REQUEST-JSON would get, without preparing a launch:
/// (:boundary SYMBOL :disclosure TEXT :refusal TEXT). Probes (bounded by
/// the request's probe timeout) when nothing is cached yet.
#[defun(name = "sandbox-decide")]
fn sandbox_decide<'e>(env: &'e Env, request_json: String) -> Result<Value<'e>> {
    guarded(env, || {
        let request = Request::from_json(&request_json).or_signal(env)?;
        let decision = policy::decide(&request.policy(), &request.probe());
        let (disclosure, refusal) = match &decision {
            policy::Decision::Confine { disclosure, .. } => (disclosure.clone(), None),
            policy::Decision::Direct { disclosure, .. } => (Some(disclosure.clone()), None),
            policy::Decision::Refuse(why) => (None, Some(why.clone())),
        };
        let datum = Datum::plist([
            (
                "boundary",
                Datum::Symbol(decision.boundary().symbol().into()),
            ),
            ("disclosure", Datum::opt_str(disclosure)),
            ("refusal", Datum::opt_str(refusal)),
        ]);
        to_lisp(env, &datum)
    })
}

/// Prepare the launch of REQUEST-JSON and describe it (boundary, full
/// command line, working directory, facts) without running anything.
#[defun(name = "sandbox-prepare")]
fn sandbox_prepare<'e>(env: &'e Env, request_json: String) -> Result<Value<'e>> {
    guarded(env, || {
        let request = Request::from_json(&request_json).or_signal(env)?;
        let prepared = launch::prepare(&request).or_signal(env)?;
        to_lisp(env, &prepared.to_datum())
    })
}
