//! Sandbox probe and preparation (confined commands run as managed
//! executions: `exec-start` with a `:sandbox` request).
//!
//! A request is a keyword plist (built by `lisp/mevedel-core.el`),
//! decoded into `sandbox::launch::Request`, whose serde attributes are
//! the one statement of its shape. Probing is a background job
//! (`sandbox::probe::start`) that answers as the `reply' event for the
//! request id.

use std::path::PathBuf;

use emacs::{Env, Result, Value, defun};
use mevedel_core::error::ErrorKind;
use mevedel_core::sandbox::launch::{self, Request};
use mevedel_core::sandbox::probe;

use crate::args::Plist;
use crate::convert::to_lisp;
use crate::errors::OrSignal;
use crate::guard::guarded;

/// Probe the confinement layers on a background thread; the answer (a
/// plist) arrives as the `reply' event for request ID. ARGS:
/// `:timeout-ms`, `:path` (where to look for bwrap; default Emacs's
/// PATH), `:helper` (the helper binary), `:target` (the execution
/// target) and `:refresh`: the result is cached per target, path and
/// helper unless REFRESH is non-nil.
#[defun(name = "sandbox-probe")]
fn sandbox_probe(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "sandbox-probe", args)?;
        let timeout_ms = args.int(":timeout-ms")?;
        let path = args.opt_string(":path")?;
        let helper = args.opt_string(":helper")?.map(PathBuf::from);
        let target = args.opt_string(":target")?;
        let refresh = args.bool(":refresh")?;
        args.finish()?;
        let options = probe::Options::new(target, path, helper);
        probe::start(id, options, timeout_ms, refresh).or_signal(env)
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

/// The sandbox REQUEST, a plist of `launch::Request`'s keys.
fn request(env: &Env, function: &'static str, request: Value<'_>) -> Result<Request> {
    let request: Request = Plist::new(env, function, request)?
        .deserialize(ErrorKind::Sandbox, "bad sandbox request")?;
    request.checked().or_signal(env)
}

/// The boundary REQUEST would get, without preparing a launch:
/// (:boundary SYMBOL :disclosure TEXT :refusal TEXT). Probes (bounded by
/// the request's probe timeout) when nothing is cached yet.
#[defun(name = "sandbox-decide")]
fn sandbox_decide<'e>(env: &'e Env, request_plist: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let request = request(env, "sandbox-decide", request_plist)?;
        to_lisp(env, &request.decide().to_datum())
    })
}

/// Prepare the launch of REQUEST and describe it (boundary, full
/// command line, working directory, facts) without running anything.
#[defun(name = "sandbox-prepare")]
fn sandbox_prepare<'e>(env: &'e Env, request_plist: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let request = request(env, "sandbox-prepare", request_plist)?;
        let prepared = launch::prepare(&request).or_signal(env)?;
        to_lisp(env, &prepared.to_datum())
    })
}
