//! The queue behind the event channel: how background work reaches Lisp.
//!
//! Worker threads [`push`](EventQueue::push) events; the first push after a
//! drain writes one wake-up byte to the channel (a pipe that Emacs watches),
//! later pushes only queue. Emacs's process filter then calls
//! [`drain`](EventQueue::drain) once and dispatches every queued event in
//! order. Emacs therefore never polls, and a burst of events costs one
//! wake-up.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::datum::Datum;

/// One message for Lisp: a handler kind and its data.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Name of the Lisp handler kind (a symbol name).
    pub kind: String,
    pub data: Datum,
}

impl Event {
    pub fn new(kind: impl Into<String>, data: Datum) -> Self {
        Event {
            kind: kind.into(),
            data,
        }
    }
}

/// The event that answers asynchronous request ID: `(ID ok VALUE)` or
/// `(ID error AREA MESSAGE)`, dispatched by Lisp to the waiting callback.
pub fn reply(id: i64, result: crate::Result<Datum>) -> Event {
    let data = match result {
        Ok(value) => vec![Datum::Int(id), Datum::Symbol("ok".into()), value],
        Err(e) => vec![
            Datum::Int(id),
            Datum::Symbol("error".into()),
            Datum::Symbol(e.kind.area().into()),
            Datum::Str(e.message),
        ],
    };
    Event::new("reply", Datum::List(data))
}

type Writer = Box<dyn Write + Send>;

/// A FIFO of events plus the wake-up pipe, shared by every thread.
pub struct EventQueue {
    queue: Mutex<VecDeque<Event>>,
    writer: Mutex<Option<Writer>>,
    /// True from the wake-up byte until the next drain: pushes in between
    /// need no byte of their own.
    wake_pending: AtomicBool,
    dropped: AtomicU64,
}

/// Lock a mutex even if a panicking thread poisoned it: the queue's
/// invariants hold between statements, so the data is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl EventQueue {
    pub const fn new() -> Self {
        EventQueue {
            queue: Mutex::new(VecDeque::new()),
            writer: Mutex::new(None),
            wake_pending: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        }
    }

    /// Connect the queue to a wake-up pipe, replacing any earlier one.
    /// Events queued while detached are kept and announced at once.
    pub fn attach(&self, writer: Writer) {
        *lock(&self.writer) = Some(writer);
        self.wake_pending.store(false, Ordering::SeqCst);
        if !lock(&self.queue).is_empty() {
            self.wake();
        }
    }

    /// Disconnect the wake-up pipe and discard queued events.
    pub fn detach(&self) {
        *lock(&self.writer) = None;
        lock(&self.queue).clear();
    }

    pub fn is_attached(&self) -> bool {
        lock(&self.writer).is_some()
    }

    /// Queue EVENT for Lisp. Returns false, and counts the event as
    /// dropped, when no channel is attached: nobody would ever read it.
    pub fn push(&self, event: Event) -> bool {
        if !self.is_attached() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        lock(&self.queue).push_back(event);
        if !self.wake_pending.swap(true, Ordering::AcqRel) {
            self.wake();
        }
        true
    }

    /// Take every queued event, oldest first. Clears the wake-up flag
    /// first, so an event pushed during the drain gets a fresh byte.
    pub fn drain(&self) -> Vec<Event> {
        self.wake_pending.store(false, Ordering::Release);
        lock(&self.queue).drain(..).collect()
    }

    /// Events discarded because no channel was attached.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn wake(&self) {
        let mut writer = lock(&self.writer);
        let Some(w) = writer.as_mut() else { return };
        match write_without_sigpipe(w.as_mut(), b"!") {
            Ok(()) => {}
            Err(_) => {
                // The reading side is gone (pipe process deleted): stop
                // writing instead of failing on every later event.
                *writer = None;
                drop(writer);
                lock(&self.queue).clear();
            }
        }
    }
}

/// Write BYTES with SIGPIPE blocked in this thread, so a closed reader
/// gives EPIPE instead of killing Emacs: a module does not inherit Rust's
/// start-up that ignores SIGPIPE, and Emacs may leave it at its default.
fn write_without_sigpipe(w: &mut dyn Write, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: plain signal-mask syscalls on this thread's own mask, with
    // stack-allocated sets; every path restores the previous mask.
    unsafe {
        let mut pipe_set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe_set);
        libc::sigaddset(&mut pipe_set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &pipe_set, &mut old);
        let result = w.write_all(bytes).and_then(|()| w.flush());
        if let Err(e) = &result
            && e.kind() == io::ErrorKind::BrokenPipe
            && libc::sigismember(&old, libc::SIGPIPE) == 0
        {
            // Consume the SIGPIPE now pending for this thread before
            // unblocking, or it would be delivered at once.
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::sigtimedwait(&pipe_set, std::ptr::null_mut(), &zero);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        result
    }
}

static GLOBAL: EventQueue = EventQueue::new();

/// The process-wide queue that the Emacs channel drains.
pub fn global() -> &'static EventQueue {
    &GLOBAL
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::sync::Arc;

    fn pipe_queue() -> (EventQueue, io::PipeReader) {
        let (reader, writer) = io::pipe().expect("pipe");
        let q = EventQueue::new();
        q.attach(Box::new(writer));
        (q, reader)
    }

    #[test]
    fn burst_needs_one_wakeup_byte() {
        let (q, mut reader) = pipe_queue();
        for i in 0..100 {
            assert!(q.push(Event::new("k", Datum::Int(i))));
        }
        let mut buf = [0u8; 8];
        assert_eq!(reader.read(&mut buf).ok(), Some(1));
        let got = q.drain();
        assert_eq!(got.len(), 100);
        assert_eq!(got[99].data, Datum::Int(99));
        // After a drain the next push writes again.
        q.push(Event::new("k", Datum::Nil));
        assert_eq!(reader.read(&mut buf).ok(), Some(1));
    }

    #[test]
    fn events_from_threads_keep_per_thread_order() {
        let (q, _reader) = pipe_queue();
        let q = Arc::new(q);
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let q = Arc::clone(&q);
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        q.push(Event::new(format!("t{t}"), Datum::Int(i)));
                    }
                })
            })
            .collect();
        for h in handles {
            assert!(h.join().is_ok());
        }
        let all = q.drain();
        assert_eq!(all.len(), 4000);
        for t in 0..4 {
            let seq: Vec<_> = all.iter().filter(|e| e.kind == format!("t{t}")).collect();
            assert!(
                seq.iter()
                    .enumerate()
                    .all(|(i, e)| e.data == Datum::Int(i as i64))
            );
        }
    }

    #[test]
    fn closed_reader_detaches_instead_of_failing() {
        let (q, reader) = pipe_queue();
        drop(reader);
        q.push(Event::new("k", Datum::Nil));
        assert!(!q.is_attached());
        assert!(!q.push(Event::new("k", Datum::Nil)));
        assert_eq!(q.dropped(), 1);
    }

    #[test]
    fn detached_queue_drops_events() {
        let q = EventQueue::new();
        assert!(!q.push(Event::new("k", Datum::Nil)));
        assert!(q.drain().is_empty());
    }
}
