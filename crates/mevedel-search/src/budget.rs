//! When a search must stop: cancelled by its caller or out of time.
//!
//! Every loop of a search (the walk, the sink, the file reader) asks
//! [`Budget::stop`], so a cancel or timeout takes effect within one read
//! of a file, even inside a large file without matches.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Budget {
    cancel: Arc<AtomicBool>,
    deadline: Option<Instant>,
    expired: Arc<AtomicBool>,
}

impl Budget {
    /// A budget that expires after TIMEOUT (None: never) and is
    /// cancelled by setting CANCEL.
    pub fn new(cancel: Arc<AtomicBool>, timeout: Option<Duration>) -> Self {
        Budget {
            cancel,
            deadline: timeout.map(|t| Instant::now() + t),
            expired: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn unlimited() -> Self {
        Budget::new(Arc::new(AtomicBool::new(false)), None)
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// True once the search was cancelled or ran out of time.
    pub fn stop(&self) -> bool {
        if self.cancelled() || self.expired.load(Ordering::Relaxed) {
            return true;
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.expired.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// True when the time limit ended the search (results are partial).
    pub fn timed_out(&self) -> bool {
        self.expired.load(Ordering::Relaxed)
    }
}

/// A reader that fails once the budget is spent.
pub struct BudgetReader<'a, R> {
    pub inner: R,
    pub budget: &'a Budget,
}

impl<R: Read> Read for BudgetReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.budget.stop() {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "search stopped"));
        }
        self.inner.read(buf)
    }
}
