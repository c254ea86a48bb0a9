//! What a caller holds for one open store: the store until it is
//! closed, and its writer thread, started by the first save.
//!
//! Reads that must see the caller's saves ([`Handle::settled`]) wait for
//! the queued ones first. A failed save becomes a `store-failure` event
//! `(FILE MESSAGE)`, because the caller has moved on by then.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{FileState, Loaded, Store, Writer};
use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::events::{self, Event};

/// How long a read waits for the queued saves.
const SETTLE: Duration = Duration::from_secs(10);

/// One open store and its writer (see the module docs).
pub struct Handle {
    store: Mutex<Option<Arc<Store>>>,
    writer: Mutex<Option<Arc<Writer>>>,
}

fn closed() -> Error {
    Error::new(ErrorKind::Store, "The session store is closed")
}

impl Handle {
    /// Open (creating if needed) the store FILE.
    pub fn open(file: &Path) -> Result<Handle> {
        Ok(Handle {
            store: Mutex::new(Some(Arc::new(Store::open(file)?))),
            writer: Mutex::new(None),
        })
    }

    /// The store, or an error once it is closed.
    pub fn store(&self) -> Result<Arc<Store>> {
        let slot = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        slot.clone().ok_or_else(closed)
    }

    /// The writer, started on first use.
    pub fn writer(&self) -> Result<Arc<Writer>> {
        let store = self.store()?;
        let mut slot = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(writer) = slot.as_ref() {
            return Ok(Arc::clone(writer));
        }
        let file = store.path().to_string_lossy().into_owned();
        let writer = Arc::new(Writer::spawn(
            store,
            Box::new(move |message| {
                events::global().push(Event::new(
                    "store-failure",
                    Datum::List(vec![Datum::str(&file), Datum::Str(message)]),
                ));
            }),
        )?);
        *slot = Some(Arc::clone(&writer));
        Ok(writer)
    }

    /// Close the store after its queued saves; later calls fail.
    pub fn close(&self) {
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(writer) = writer {
            writer.stop();
        }
        self.store
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// Wait up to TIMEOUT for the queued saves; the message of the first
    /// save that failed since the last flush, or None.
    pub fn flush(&self, timeout: Duration) -> Result<Option<String>> {
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match writer {
            None => Ok(None),
            Some(writer) => writer.flush(timeout),
        }
    }

    /// The store once the queued saves are written.
    pub fn settled(&self) -> Result<Arc<Store>> {
        let store = self.store()?;
        self.flush(SETTLE)?;
        Ok(store)
    }

    /// The transcript after the queued saves: from the resume copy
    /// when it holds exactly the text (see `Store::transcript_load_for_resume`),
    /// or with the text itself when FULL.
    pub fn transcript(&self, full: bool) -> Result<Loaded> {
        let store = self.settled()?;
        if full {
            let t = store.transcript_load()?;
            return Ok(Loaded {
                text: Some(t.text),
                copy: None,
                props: t.props,
            });
        }
        store.transcript_load_for_resume()
    }

    /// Record for TURN (LABEL: what the user asked) the present state of
    /// each of PATHS it has not recorded yet; how many were new.
    pub fn checkpoint_before(&self, turn: &str, label: &str, paths: &[String]) -> Result<usize> {
        let store = self.store()?;
        store.checkpoint_before(turn, label, &FileState::read_all(paths)?)
    }

    /// Remember what each of PATHS holds now, as the session's edit left it.
    pub fn checkpoint_after(&self, paths: &[String]) -> Result<()> {
        let store = self.store()?;
        store.checkpoint_after(&FileState::read_all(paths)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_handle_refuses_and_reads_see_saves() {
        let dir = std::env::temp_dir().join(format!("mevedel-handle-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let handle = Handle::open(&dir.join("session.sqlite")).unwrap();
        assert_eq!(handle.flush(Duration::from_secs(1)).unwrap(), None);
        handle
            .writer()
            .unwrap()
            .info(vec![("title".into(), "t".into())])
            .unwrap();
        let info = handle.settled().unwrap().info().unwrap();
        assert!(info.contains(&("title".into(), "t".into())), "{info:?}");
        let file = dir.join("a.txt");
        std::fs::write(&file, "x").unwrap();
        let paths = vec![file.to_string_lossy().into_owned()];
        assert_eq!(handle.checkpoint_before("t1", "ask", &paths).unwrap(), 1);
        assert_eq!(handle.checkpoint_before("t1", "ask", &paths).unwrap(), 0);
        handle.close();
        assert_eq!(handle.store().err(), Some(closed()));
        assert!(handle.writer().is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
