//! The event channel: a pipe process that background work wakes.

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::{events, process};

use crate::convert::to_lisp;
use crate::guard::guarded;

/// Connect background events to PROCESS, a pipe process made by
/// `make-pipe-process`, replacing any earlier channel.
#[defun(name = "channel-open")]
fn channel_open(env: &Env, process: Value) -> Result<()> {
    guarded(env, || {
        // Emacs dups the descriptor without close-on-exec and the crate
        // hides its number: mark whatever descriptor the call added.
        let writer = process::fds::close_on_exec_after(|| env.open_channel(process))?;
        events::global().attach(Box::new(writer));
        Ok(())
    })
}

/// Stop delivering events; called before the pipe process is deleted.
#[defun(name = "channel-close")]
fn channel_close(env: &Env) -> Result<()> {
    guarded(env, || {
        events::global().detach();
        Ok(())
    })
}

/// Every queued event, oldest first, as a list of `(KIND . DATA)`.
#[defun(name = "events-drain")]
fn events_drain(env: &Env) -> Result<Value<'_>> {
    guarded(env, || {
        let pairs = events::global()
            .drain()
            .iter()
            .map(|e| env.cons(env.intern(&e.kind)?, to_lisp(env, &e.data)?))
            .collect::<Result<Vec<_>>>()?;
        env.list(&pairs[..])
    })
}

/// Events that were discarded because no channel was open.
#[defun(name = "events-dropped")]
fn events_dropped(env: &Env) -> Result<Value<'_>> {
    guarded(env, || (events::global().dropped() as i64).into_lisp(env))
}
