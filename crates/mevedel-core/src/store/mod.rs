//! Durable session state in SQLite: `session.sqlite` and, beside it,
//! `mailbox.sqlite`.
//!
//! Both files are in WAL mode so readers never block the writer. Each
//! schema grows by appending to its list in [`schema`]; a file's
//! `user_version` records how many have run. `session.sqlite` holds the
//! checkpoints of edited files, the conversation (`transcript`), the
//! session's info (title, tasks, agent registry, plan) and its input
//! history, in
//! large pages for large records; the mailbox has a file of small pages
//! of its own, because each message is a small commit of its own and a
//! commit writes whole pages to the WAL (ADR 0017). An older
//! `session.sqlite` hands its mailbox over when it is opened; otherwise
//! the mailbox file is opened (and made) on the first mailbox call, so
//! stores that hold only a conversation (a child agent's) make none.

pub mod checkpoint;
pub mod conversation;
pub mod handle;
pub mod mailbox;
pub mod readable;
pub mod schema;
pub mod transcript;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use rusqlite::Connection;

use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};

pub use checkpoint::{FileState, Restore, Turn};
pub use handle::Handle;
pub use mailbox::{Message, NewMessage};
pub use transcript::{Loaded, Prop, Transcript, Writer};

/// An open session store. Safe to share between threads; statements run
/// one at a time on each of its two connections.
pub struct Store {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// The mailbox's connection, once opened.
    mail: Mutex<Option<Connection>>,
    /// Records a writer will mark delivered once the conversation that
    /// read them is saved ([`Store::mailbox_hold`]): no longer unread.
    held: Mutex<HashSet<i64>>,
}

/// The page size of a new `session.sqlite`: a 20 MB transcript record
/// then spans hundreds of overflow pages instead of thousands, and loads
/// several times faster.
const SESSION_PAGE_SIZE: u32 = 65536;

/// The page size of a new `mailbox.sqlite`: a message is a few hundred
/// bytes, and every page its commit touches is written to the WAL and
/// later synced; smaller pages measured fastest (ADR 0017).
const MAILBOX_PAGE_SIZE: u32 = 1024;

/// Open (creating if needed) the SQLite file PATH in WAL mode with
/// synchronous NORMAL; PAGE_SIZE applies to a new file only.
fn connect(path: &Path, page_size: u32, doing: &str) -> Result<Connection> {
    let fail = |e: rusqlite::Error| store_error(doing, e);
    let conn = Connection::open(path).map_err(fail)?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(fail)?;
    conn.execute_batch(&format!("PRAGMA page_size = {page_size}"))
        .map_err(fail)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(fail)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(store_error(
            doing,
            format!("the file system refused WAL mode (journal mode is {mode})"),
        ));
    }
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
        .map_err(fail)?;
    Ok(conn)
}

/// The mailbox file of the session store at PATH.
pub fn mailbox_path(path: &Path) -> PathBuf {
    path.with_file_name("mailbox.sqlite")
}

/// Open (creating if needed) the mailbox file PATH, its schema up to date.
fn connect_mailbox(path: &Path, doing: &str) -> Result<Connection> {
    let mail = connect(path, MAILBOX_PAGE_SIZE, doing)?;
    schema::migrate(&mail, schema::MAILBOX_MIGRATIONS).map_err(|e| store_error(doing, e))?;
    Ok(mail)
}

/// Bring CONN (`session.sqlite` at PATH) up to date; return the
/// mailbox's connection when a file from before the move handed its
/// mailbox over. The copy keeps the ids and commits on its own before
/// the drop: a crash in between leaves both copies, and the next open
/// copies nothing twice.
fn migrate_session(conn: &Connection, path: &Path, doing: &str) -> Result<Option<Connection>> {
    let fail = |e: rusqlite::Error| store_error(doing, e);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(fail)?;
    let mut mail = None;
    // A new file (version 0) has no mail to hand over.
    if (1..=schema::MAILBOX_MOVED_AFTER).contains(&version) {
        schema::migrate(
            conn,
            &schema::MIGRATIONS[..schema::MAILBOX_MOVED_AFTER as usize],
        )
        .map_err(fail)?;
        let mail_path = mailbox_path(path);
        mail = Some(connect_mailbox(&mail_path, doing)?);
        conn.execute("ATTACH DATABASE ?1 AS mail", [mail_path.to_string_lossy()])
            .map_err(fail)?;
        let copied = conn.execute_batch(
            "INSERT OR IGNORE INTO mail.mailbox
                 (id, recipient, sender, kind, payload, created_at, delivered_at, attrs)
             SELECT id, recipient, sender, kind, payload, created_at, delivered_at, attrs
             FROM main.mailbox",
        );
        conn.execute_batch("DETACH DATABASE mail").map_err(fail)?;
        copied.map_err(fail)?;
    }
    schema::migrate(conn, schema::MIGRATIONS).map_err(fail)?;
    Ok(mail)
}

pub(crate) fn store_error(doing: &str, err: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Store, format!("{doing}: {err}"))
}

impl Store {
    /// Open (creating if needed) the store at PATH and bring its schema
    /// up to date.
    pub fn open(path: &Path) -> Result<Store> {
        let doing = format!("Cannot open session store {}", path.display());
        let conn = connect(path, SESSION_PAGE_SIZE, &doing)?;
        let mail = migrate_session(&conn, path, &doing)?;
        Ok(Store {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            mail: Mutex::new(mail),
            held: Mutex::new(HashSet::new()),
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

    /// Run BODY with the mailbox's connection, opened on first use.
    pub(crate) fn with_mail<T>(
        &self,
        doing: &str,
        body: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let mut slot = self
            .mail
            .lock()
            .map_err(|_| Error::new(ErrorKind::Store, format!("{doing}: store lock poisoned")))?;
        let conn = match slot.as_mut() {
            Some(conn) => conn,
            None => slot.insert(connect_mailbox(&mailbox_path(&self.path), doing)?),
        };
        body(conn).map_err(|e| store_error(doing, e))
    }

    /// Whether the mailbox may hold mail: it is open, or its file
    /// exists. Reading a mailbox that never got mail does not create it:
    /// the first connection writes the file and its schema, tens of
    /// milliseconds that would land on a turn's first tool round trip.
    pub(crate) fn mail_exists(&self) -> bool {
        self.mail.lock().map_or(true, |slot| slot.is_some()) || mailbox_path(&self.path).exists()
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

    /// `(:file FILE :journal-mode MODE :schema-version N)`.
    pub fn describe(&self) -> Result<Datum> {
        Ok(Datum::plist([
            ("file", Datum::str(self.path.to_string_lossy())),
            ("journal-mode", Datum::Str(self.journal_mode()?)),
            ("schema-version", Datum::Int(self.schema_version()?)),
        ]))
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

    fn page_size(file: &Path) -> i64 {
        let c = Connection::open(file).unwrap();
        c.query_row("PRAGMA page_size", [], |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn the_mailbox_has_a_file_of_small_pages() {
        let dir = temp_dir("pages");
        let path = dir.join("session.sqlite");
        let store = Store::open(&path).unwrap();
        assert!(
            !mailbox_path(&path).exists(),
            "a store without mail made a mailbox"
        );
        assert!(store.mailbox_unread("/root").unwrap().is_empty());
        assert!(
            !mailbox_path(&path).exists(),
            "reading an empty mailbox made one"
        );
        store
            .mailbox_post(&mailbox::NewMessage {
                recipient: "/root".into(),
                sender: None,
                kind: "MAIL".into(),
                payload: "first".into(),
                attrs: Vec::new(),
            })
            .unwrap();
        assert_eq!(store.mailbox_unread("/root").unwrap().len(), 1);
        drop(store);
        assert_eq!(page_size(&path), i64::from(SESSION_PAGE_SIZE));
        assert_eq!(
            page_size(&mailbox_path(&path)),
            i64::from(MAILBOX_PAGE_SIZE)
        );
        let c = Connection::open(&path).unwrap();
        let tables: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'mailbox'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(tables, 0, "session.sqlite keeps no mailbox");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A `session.sqlite` of schema 5 with two messages, the first
    /// delivered, ids 7 and 9.
    fn old_store(path: &Path) {
        let c = Connection::open(path).unwrap();
        c.execute_batch("PRAGMA journal_mode = WAL").unwrap();
        schema::migrate(&c, &schema::MIGRATIONS[..5]).unwrap();
        c.execute_batch(
            "INSERT INTO mailbox (id, recipient, sender, kind, payload, created_at, delivered_at, attrs)
             VALUES (7, '/root', '/root/a', 'MAIL', 'read', 1, 2, '[]'),
                    (9, '/root', 'x1', 'EXECUTION', 'unread é', 3, NULL, '[[\"execution_id\",\"x1\"]]');",
        )
        .unwrap();
    }

    fn unread_ids(store: &Store) -> Vec<(i64, String)> {
        store
            .mailbox_unread("/root")
            .unwrap()
            .into_iter()
            .map(|m| (m.id, m.payload))
            .collect()
    }

    #[test]
    fn an_older_store_hands_its_mailbox_over() {
        let dir = temp_dir("upgrade");
        let path = dir.join("session.sqlite");
        old_store(&path);
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.schema_version().ok(),
            Some(schema::MIGRATIONS.len() as i64)
        );
        assert_eq!(unread_ids(&store), vec![(9, "unread é".to_string())]);
        let unread = store.mailbox_unread("/root").unwrap();
        assert_eq!(unread[0].attrs, vec![("execution_id".into(), "x1".into())]);
        assert_eq!(unread[0].kind, "EXECUTION");
        // Ids go on past the old ones, and the delivered message stays so.
        let next = store
            .mailbox_post(&NewMessage {
                recipient: "/root".into(),
                sender: None,
                kind: "MAIL".into(),
                payload: "new".into(),
                attrs: Vec::new(),
            })
            .unwrap();
        assert!(next > 9, "{next}");
        assert_eq!(store.mailbox_mark_delivered(&[7]).ok(), Some(0));
        drop(store);
        let again = Store::open(&path).unwrap();
        assert_eq!(
            unread_ids(&again),
            vec![(9, "unread é".to_string()), (next, "new".to_string())]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_crash_between_copy_and_drop_copies_nothing_twice() {
        let dir = temp_dir("upgrade-crash");
        let path = dir.join("session.sqlite");
        old_store(&path);
        // The copy committed, then the process died before the drop:
        // the mailbox file has the rows (one already delivered there),
        // session.sqlite still has its table at schema 5.
        {
            let mail = connect_mailbox(&mailbox_path(&path), "test").unwrap();
            mail.execute_batch(&format!(
                "ATTACH DATABASE '{}' AS old;
                 INSERT INTO mailbox SELECT id, recipient, sender, kind, payload, created_at,
                     delivered_at, attrs FROM old.mailbox;
                 DETACH DATABASE old;
                 UPDATE mailbox SET delivered_at = 4 WHERE id = 9;",
                path.display()
            ))
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.schema_version().ok(),
            Some(schema::MIGRATIONS.len() as i64)
        );
        assert!(
            unread_ids(&store).is_empty(),
            "a delivered message came back"
        );
        let count: i64 = store
            .with_mail("count", |c| {
                c.query_row("SELECT COUNT(*) FROM mailbox", [], |row| row.get(0))
            })
            .unwrap();
        assert_eq!(count, 2);
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
