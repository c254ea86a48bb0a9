//! Version and self-tests that prove the seam works on this machine.

use emacs::{Env, Result, defun};
use mevedel_core::datum::Datum;
use mevedel_core::events::{self, Event};
use mevedel_core::runtime;

use crate::errors::OrSignal;
use crate::guard::guarded;

/// The module's version, compared by the loader before anything else.
#[defun(name = "version")]
fn version(env: &Env) -> Result<String> {
    guarded(env, || Ok(env!("CARGO_PKG_VERSION").to_string()))
}

/// Panic on purpose with MESSAGE: proves a panic is a catchable error.
#[defun(name = "selftest-panic")]
fn selftest_panic(env: &Env, message: String) -> Result<()> {
    guarded(env, || panic!("{message}"))
}

/// Push COUNT events of kind `selftest` (data 0..COUNT-1) from a worker
/// thread of the shared runtime.
#[defun(name = "selftest-events")]
fn selftest_events(env: &Env, count: i64) -> Result<()> {
    guarded(env, || {
        runtime::spawn(async move {
            for i in 0..count {
                events::global().push(Event::new("selftest", Datum::Int(i)));
            }
        })
        .or_signal(env)
    })
}

/// Answer with a `pong` event carrying ID from a worker thread: one
/// round trip through the channel.
#[defun(name = "selftest-ping")]
fn selftest_ping(env: &Env, id: i64) -> Result<()> {
    guarded(env, || {
        runtime::spawn(async move {
            events::global().push(Event::new("pong", Datum::Int(id)));
        })
        .or_signal(env)
    })
}
