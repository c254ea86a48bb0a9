//! Sandbox probe, answered asynchronously through the event channel.

use std::time::Duration;

use emacs::{Env, Result, defun};

use super::errors::OrSignal;
use super::guard::guarded;
use crate::error::{Error, ErrorKind};
use crate::events;
use crate::sandbox::probe;

/// Probe the confinement layers on a background thread; the answer
/// arrives as the `reply' event for request ID.
#[defun(name = "sandbox-probe")]
fn sandbox_probe(env: &Env, id: i64, timeout_ms: i64) -> Result<()> {
    guarded(env, || {
        let timeout = Duration::from_millis(timeout_ms.clamp(1, 60_000) as u64);
        std::thread::Builder::new()
            .name("mevedel-probe".into())
            .spawn(move || {
                let result = probe::run(timeout).to_datum();
                events::global().push(events::reply(id, Ok(result)));
            })
            .map(|_| ())
            .map_err(|e| Error::io(ErrorKind::Internal, "cannot start the probe thread", &e))
            .or_signal(env)
    })
}
