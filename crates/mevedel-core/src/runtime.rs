//! Background work: the one tokio runtime shared by every asynchronous
//! task in the module, and [`spawn_job`], the one way a blocking job
//! started from Lisp answers it.
//!
//! The runtime is small on purpose: Emacs machines are often laptops, and
//! the heavy work (search, process I/O) is I/O-bound. Created on first use
//! so that merely loading the module starts no threads.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};

use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::events;

/// Worker threads of the shared runtime.
pub const WORKER_THREADS: usize = 2;

static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();

/// The shared runtime, started on first call.
pub fn get() -> Result<&'static Runtime> {
    let built = RUNTIME.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name("mevedel-worker")
            .enable_time()
            .enable_io()
            .build()
            .map_err(|e| e.to_string())
    });
    built.as_ref().map_err(|e| {
        Error::new(
            ErrorKind::Internal,
            format!("cannot start the worker runtime: {e}"),
        )
    })
}

/// Run FUTURE in the background on the shared runtime.
pub fn spawn<F>(future: F) -> Result<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    get()?.spawn(future);
    Ok(())
}

/// Run WORK on a thread of its own, named after WHAT (with STACK_BYTES
/// of stack when a thread's default is not enough), and answer request
/// ID with its result as a `reply` event.
///
/// A thread rather than a task of the runtime, because the work blocks
/// (parsing, walking trees, waiting for a probe) and the runtime's few
/// workers drive every execution's I/O. A panic in WORK answers as an
/// error too, so Lisp never waits for a reply that cannot come.
pub fn spawn_job<F>(id: i64, what: &str, stack_bytes: Option<usize>, work: F) -> Result<()>
where
    F: FnOnce() -> Result<Datum> + Send + 'static,
{
    let mut thread = std::thread::Builder::new().name(format!("mevedel-{what}"));
    if let Some(bytes) = stack_bytes {
        thread = thread.stack_size(bytes);
    }
    let doing = format!("{what} job");
    thread
        .spawn(move || {
            let result = catch_unwind(AssertUnwindSafe(work))
                .unwrap_or_else(|p| Err(Error::from_panic(&doing, p.as_ref())));
            events::global().push(events::reply(id, result));
        })
        .map(|_| ())
        .map_err(|e| {
            Error::io(
                ErrorKind::Internal,
                &format!("cannot start a {what} thread"),
                &e,
            )
        })
}

/// Run the async WORK on the runtime and answer request ID with its
/// outcome as a `reply` event. A panic in WORK answers as an error too,
/// naming WHAT, so Lisp never waits for a reply that cannot come.
pub fn spawn_reply<F>(id: i64, what: &'static str, work: F) -> Result<()>
where
    F: Future<Output = Result<Datum>> + Send + 'static,
{
    let rt = get()?;
    rt.spawn(async move {
        let outcome = match tokio::spawn(work).await {
            Ok(result) => result,
            Err(e) => Err(Error::new(
                ErrorKind::Internal,
                format!("{what} job failed: {e}"),
            )),
        };
        events::global().push(events::reply(id, outcome));
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_runs_spawned_work() {
        let (tx, rx) = std::sync::mpsc::channel();
        assert!(
            spawn(async move {
                let _ = tx.send(42);
            })
            .is_ok()
        );
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(5)).ok(),
            Some(42)
        );
    }
}
