//! The event channel: a pipe process that background work wakes.

use std::collections::BTreeSet;

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::events;

use crate::convert::to_lisp;
use crate::guard::guarded;

/// Descriptors open in this process right now.
fn open_fds() -> BTreeSet<i32> {
    let listed: BTreeSet<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    // The listing's own descriptor is closed by now; drop it.
    // SAFETY: F_GETFD only queries a descriptor number.
    listed
        .into_iter()
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1)
        .collect()
}

/// Connect background events to PROCESS, a pipe process made by
/// `make-pipe-process`, replacing any earlier channel.
#[defun(name = "channel-open")]
fn channel_open(env: &Env, process: Value) -> Result<()> {
    guarded(env, || {
        let before = open_fds();
        let writer = env.open_channel(process)?;
        // Emacs dups the descriptor without close-on-exec, so every child
        // (ours and Emacs's own) would inherit it. The crate hides the
        // number, so mark whatever descriptor the call added.
        for fd in open_fds().difference(&before) {
            // SAFETY: sets a flag on a descriptor that now belongs to us.
            unsafe { libc::fcntl(*fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
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
