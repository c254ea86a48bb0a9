//! Admission of executions within one session: read-only calls share a
//! lane, everything else runs alone, and admission is FIFO so a waiting
//! writer holds back the readers that arrive after it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

/// Which lane an execution needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Analyzer-proven read-only: may overlap with other readers.
    Shared,
    /// Anything else: runs with no other admitted execution.
    Exclusive,
}

struct Waiter {
    lane: Lane,
    grant: oneshot::Sender<Lease>,
}

#[derive(Default)]
struct Inner {
    readers: usize,
    writer: bool,
    queue: VecDeque<Waiter>,
}

impl Inner {
    fn fits(&self, lane: Lane) -> bool {
        match lane {
            Lane::Shared => !self.writer,
            Lane::Exclusive => !self.writer && self.readers == 0,
        }
    }

    fn take(&mut self, lane: Lane) {
        match lane {
            Lane::Shared => self.readers += 1,
            Lane::Exclusive => self.writer = true,
        }
    }

    fn give_back(&mut self, lane: Lane) {
        match lane {
            Lane::Shared => self.readers = self.readers.saturating_sub(1),
            Lane::Exclusive => self.writer = false,
        }
    }
}

/// One session's scheduler.
#[derive(Default)]
pub struct Scheduler {
    inner: Mutex<Inner>,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A place in line.
pub enum Ticket {
    Ready(Lease),
    Waiting(oneshot::Receiver<Lease>),
}

impl Ticket {
    /// The lease, once admitted. A ticket whose scheduler went away
    /// (session teardown) never resolves; its owner stops it instead.
    pub async fn admitted(self) -> Lease {
        match self {
            Ticket::Ready(lease) => lease,
            Ticket::Waiting(rx) => match rx.await {
                Ok(lease) => lease,
                Err(_) => std::future::pending().await,
            },
        }
    }
}

/// An admitted execution's hold on its lane; dropping it releases the
/// lane and admits whoever is next in line.
pub struct Lease {
    scheduler: Arc<Scheduler>,
    lane: Lane,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut inner = lock(&self.scheduler.inner);
        inner.give_back(self.lane);
        Scheduler::pump(&self.scheduler, &mut inner);
    }
}

impl Scheduler {
    pub fn new() -> Arc<Scheduler> {
        Arc::new(Scheduler::default())
    }

    /// Admit the head of the queue for as long as it fits.
    fn pump(this: &Arc<Scheduler>, inner: &mut Inner) {
        while let Some(front) = inner.queue.front() {
            if !inner.fits(front.lane) {
                break;
            }
            let Some(waiter) = inner.queue.pop_front() else {
                break;
            };
            inner.take(waiter.lane);
            let lease = Lease {
                scheduler: Arc::clone(this),
                lane: waiter.lane,
            };
            if let Err(lease) = waiter.grant.send(lease) {
                // The waiter gave up; its lane is free again.
                std::mem::forget(lease);
                inner.give_back(waiter.lane);
            }
        }
    }

    /// Take a place in line for LANE now; admission order is the order
    /// of these calls, whatever order the waiting tasks run in.
    pub fn enqueue(this: &Arc<Scheduler>, lane: Lane) -> Ticket {
        let mut inner = lock(&this.inner);
        if inner.queue.is_empty() && inner.fits(lane) {
            inner.take(lane);
            return Ticket::Ready(Lease {
                scheduler: Arc::clone(this),
                lane,
            });
        }
        let (grant, rx) = oneshot::channel();
        inner.queue.push_back(Waiter { lane, grant });
        Ticket::Waiting(rx)
    }

    /// Wait for admission to LANE. Dropping the future before it
    /// resolves gives up the place in line.
    pub async fn admit(this: &Arc<Scheduler>, lane: Lane) -> Lease {
        Scheduler::enqueue(this, lane).admitted().await
    }

    /// (readers admitted, writer admitted, waiting)
    pub fn load(&self) -> (usize, bool, usize) {
        let inner = lock(&self.inner);
        (inner.readers, inner.writer, inner.queue.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;
    use std::time::Duration;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn readers_overlap_writer_is_alone() {
        rt().block_on(async {
            let s = Scheduler::new();
            let a = Scheduler::admit(&s, Lane::Shared).await;
            let b = Scheduler::admit(&s, Lane::Shared).await;
            assert_eq!(s.load(), (2, false, 0));
            let s2 = Arc::clone(&s);
            let w = tokio::spawn(async move { Scheduler::admit(&s2, Lane::Exclusive).await });
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert_eq!(s.load(), (2, false, 1));
            drop(a);
            drop(b);
            let w = w.await.unwrap();
            assert_eq!(s.load(), (0, true, 0));
            drop(w);
            assert_eq!(s.load(), (0, false, 0));
        });
    }

    #[test]
    fn fifo_reader_writer_reader() {
        rt().block_on(async {
            let s = Scheduler::new();
            let order = Arc::new(StdMutex::new(Vec::new()));
            let first = Scheduler::admit(&s, Lane::Shared).await;
            order
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push("reader1");
            let spawn = |lane, name: &'static str| {
                let s = Arc::clone(&s);
                let order = Arc::clone(&order);
                tokio::spawn(async move {
                    let lease = Scheduler::admit(&s, lane).await;
                    order
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(name);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    drop(lease);
                })
            };
            let writer = spawn(Lane::Exclusive, "writer");
            tokio::time::sleep(Duration::from_millis(5)).await;
            let reader2 = spawn(Lane::Shared, "reader2");
            tokio::time::sleep(Duration::from_millis(5)).await;
            // The second reader would fit beside the first, but waits
            // behind the writer.
            assert_eq!(s.load(), (1, false, 2));
            drop(first);
            let _ = writer.await;
            let _ = reader2.await;
            let got = order.lock().unwrap_or_else(PoisonError::into_inner).clone();
            assert_eq!(got, vec!["reader1", "writer", "reader2"]);
        });
    }

    #[test]
    fn abandoned_waiter_frees_its_turn() {
        rt().block_on(async {
            let s = Scheduler::new();
            let w = Scheduler::admit(&s, Lane::Exclusive).await;
            let s2 = Arc::clone(&s);
            let gone = tokio::spawn(async move { Scheduler::admit(&s2, Lane::Exclusive).await });
            tokio::time::sleep(Duration::from_millis(5)).await;
            gone.abort();
            let _ = gone.await;
            drop(w);
            let again = tokio::time::timeout(
                Duration::from_secs(1),
                Scheduler::admit(&s, Lane::Exclusive),
            )
            .await;
            assert!(again.is_ok());
        });
    }
}
