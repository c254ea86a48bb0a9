//! Durable session state in SQLite (`session.sqlite`).
//!
//! One file per session, in WAL mode so readers never block the writer.
//! The schema grows by appending to [`schema::MIGRATIONS`]; the file's
//! `user_version` records how many have run. It holds the mailbox, the
//! checkpoints of edited files and the conversation (`transcript`).

pub mod checkpoint;
pub mod mailbox;
pub mod readable;
pub mod schema;
pub mod transcript;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use rusqlite::Connection;

use crate::error::{Error, ErrorKind, Result};

pub use checkpoint::{FileState, Restore, Turn};
pub use mailbox::{Message, NewMessage};
pub use transcript::{Loaded, Prop, Transcript, Writer};

/// An open session store. Safe to share between threads; statements run
/// one at a time.
pub struct Store {
    path: PathBuf,
    conn: Mutex<Connection>,
}

pub(crate) fn store_error(doing: &str, err: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Store, format!("{doing}: {err}"))
}

impl Store {
    /// Open (creating if needed) the store at PATH and bring its schema
    /// up to date.
    pub fn open(path: &Path) -> Result<Store> {
        let doing = format!("Cannot open session store {}", path.display());
        let conn = Connection::open(path).map_err(|e| store_error(&doing, e))?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(|e| store_error(&doing, e))?;
        // Large pages for a new file: a 20 MB transcript record then
        // spans hundreds of overflow pages instead of thousands, and
        // loads several times faster. (A no-op for an existing file.)
        conn.execute_batch("PRAGMA page_size = 65536")
            .map_err(|e| store_error(&doing, e))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|e| store_error(&doing, e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(store_error(
                &doing,
                format!("the file system refused WAL mode (journal mode is {mode})"),
            ));
        }
        conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
            .map_err(|e| store_error(&doing, e))?;
        schema::migrate(&conn).map_err(|e| store_error(&doing, e))?;
        Ok(Store {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    /// The store at PATH shared by background writers (execution results),
    /// opened on first use and kept open; its directory is created.
    pub fn shared(path: &Path) -> Result<Arc<Store>> {
        static SHARED: OnceLock<Mutex<HashMap<PathBuf, Arc<Store>>>> = OnceLock::new();
        let mut shared = SHARED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(store) = shared.get(path) {
            if path.exists() {
                return Ok(Arc::clone(store));
            }
            // The file was removed (session deleted): start afresh.
            shared.remove(path);
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| store_error("Cannot create the session directory", e))?;
        }
        let store = Arc::new(Store::open(path)?);
        shared.insert(path.to_path_buf(), Arc::clone(&store));
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run BODY with the connection.
    pub(crate) fn with<T>(
        &self,
        doing: &str,
        body: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let mut conn = self
            .conn
            .lock()
            .map_err(|_| Error::new(ErrorKind::Store, format!("{doing}: store lock poisoned")))?;
        body(&mut conn).map_err(|e| store_error(doing, e))
    }

    /// The schema version (number of migrations applied).
    pub fn schema_version(&self) -> Result<i64> {
        self.with("Cannot read the schema version", |c| {
            c.query_row("PRAGMA user_version", [], |row| row.get(0))
        })
    }

    /// The journal mode in force (`wal`).
    pub fn journal_mode(&self) -> Result<String> {
        self.with("Cannot read the journal mode", |c| {
            c.query_row("PRAGMA journal_mode", [], |row| row.get(0))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mevedel-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn opens_in_wal_mode_with_current_schema() {
        let dir = temp_dir("open");
        let path = dir.join("session.sqlite");
        let store = Store::open(&path).unwrap();
        assert_eq!(store.journal_mode().ok().as_deref(), Some("wal"));
        assert_eq!(
            store.schema_version().ok(),
            Some(schema::MIGRATIONS.len() as i64)
        );
        drop(store);
        // Reopening runs no migration twice.
        let again = Store::open(&path).unwrap();
        assert_eq!(
            again.schema_version().ok(),
            Some(schema::MIGRATIONS.len() as i64)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unwritable_location_is_a_store_error() {
        let err = match Store::open(Path::new("/proc/mevedel/none/session.sqlite")) {
            Err(e) => e,
            Ok(_) => panic!("opened an impossible path"),
        };
        assert_eq!(err.kind, ErrorKind::Store);
        assert!(
            err.message.contains("Cannot open session store"),
            "{}",
            err.message
        );
    }
}
