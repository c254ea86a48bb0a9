//! The one tokio runtime shared by all background work in the module.
//!
//! Small on purpose: Emacs machines are often laptops, and the heavy work
//! (search, process I/O) is I/O-bound. Created on first use so that merely
//! loading the module starts no threads.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};

use crate::error::{Error, ErrorKind, Result};

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
