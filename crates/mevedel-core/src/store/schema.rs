//! The session store's schema, as an append-only list of migrations.
//!
//! Migration N (1-based) runs when the file's `user_version` is below N,
//! inside one transaction with the version bump. Later issues append
//! their tables here; a released migration is never edited. The mailbox
//! has its own file and list ([`MAILBOX_MIGRATIONS`], ADR 0017).

use rusqlite::Connection;

/// Every migration, oldest first.
pub const MIGRATIONS: &[&str] = &[
    // 1: the mailbox. Messages for one recipient (an agent path such as
    // "/root"), delivered at most once: `delivered_at` is set when the
    // recipient has taken the message.
    "CREATE TABLE mailbox (
         id           INTEGER PRIMARY KEY AUTOINCREMENT,
         recipient    TEXT    NOT NULL,
         sender       TEXT,
         kind         TEXT    NOT NULL,
         payload      TEXT    NOT NULL,
         created_at   INTEGER NOT NULL,
         delivered_at INTEGER
     );
     CREATE INDEX mailbox_undelivered ON mailbox (recipient, delivered_at, id);",
    // 2: opening-tag attributes of a message (EXECUTION, MONITOR, ...):
    // a JSON array of [name, value] string pairs, in order.
    "ALTER TABLE mailbox ADD COLUMN attrs TEXT NOT NULL DEFAULT '[]'",
    // 3: checkpoints (see `checkpoint`). A turn's first edit of a path
    // records the path's state before it (`blob` NULL: it did not
    // exist); `checkpoint_left` holds the digest of what the session's
    // last edit left in each path.
    "CREATE TABLE checkpoint_turns (
         seq        INTEGER PRIMARY KEY AUTOINCREMENT,
         id         TEXT    NOT NULL UNIQUE,
         label      TEXT    NOT NULL,
         started_at INTEGER NOT NULL,
         bash       INTEGER NOT NULL DEFAULT 0
     );
     CREATE TABLE checkpoints (
         turn TEXT NOT NULL REFERENCES checkpoint_turns (id) ON DELETE CASCADE,
         path TEXT NOT NULL,
         blob TEXT,
         mode INTEGER,
         PRIMARY KEY (turn, path)
     );
     CREATE INDEX checkpoints_by_path ON checkpoints (path);
     CREATE TABLE checkpoint_left (
         path TEXT PRIMARY KEY,
         blob TEXT
     );",
    // 4: the conversation (see `transcript`): a log of tail
    // replacements, session metadata as keys and values, and the
    // composer's input history.
    "CREATE TABLE transcript_log (
         seq   INTEGER PRIMARY KEY AUTOINCREMENT,
         at    INTEGER NOT NULL,
         text  TEXT    NOT NULL,
         props TEXT    NOT NULL
     );
     CREATE TABLE session_info (
         key   TEXT PRIMARY KEY,
         value TEXT NOT NULL
     );
     CREATE TABLE inputs (
         seq  INTEGER PRIMARY KEY AUTOINCREMENT,
         text TEXT NOT NULL
     );",
    // 5: the log's properties before its text, so that a load taking
    // its base text from the resume copy reads no text pages; and the
    // identity of that copy when it was written (see `readable`).
    "CREATE TABLE transcript_log_next (
         seq   INTEGER PRIMARY KEY AUTOINCREMENT,
         at    INTEGER NOT NULL,
         props TEXT    NOT NULL,
         text  TEXT    NOT NULL
     );
     INSERT INTO transcript_log_next (seq, at, props, text)
         SELECT seq, at, props, text FROM transcript_log;
     DROP TABLE transcript_log;
     ALTER TABLE transcript_log_next RENAME TO transcript_log;
     CREATE TABLE transcript_copy (
         id       INTEGER PRIMARY KEY CHECK (id = 1),
         base_seq INTEGER NOT NULL,
         name     TEXT    NOT NULL,
         ino      INTEGER NOT NULL,
         size     INTEGER NOT NULL,
         mtime_ns INTEGER NOT NULL,
         ctime_ns INTEGER NOT NULL,
         chars    INTEGER NOT NULL
     );",
    // 6: the mailbox moved to its own file (`MAILBOX_MIGRATIONS`); the
    // store copied its rows there before this runs.
    "DROP TABLE mailbox",
];

/// The last migration whose `mailbox` table the store copies into the
/// mailbox file before migration 6 drops it.
pub const MAILBOX_MOVED_AFTER: i64 = 5;

/// Every migration of `mailbox.sqlite`, oldest first.
pub const MAILBOX_MIGRATIONS: &[&str] = &[
    // 1: messages for one recipient (an agent path such as "/root"),
    // delivered at most once: `delivered_at` is set when the recipient
    // has taken the message. Ids are never reused (AUTOINCREMENT), also
    // across the move from `session.sqlite`. The index holds only the
    // undelivered messages, so marking one delivered shrinks it.
    "CREATE TABLE mailbox (
         id           INTEGER PRIMARY KEY AUTOINCREMENT,
         recipient    TEXT    NOT NULL,
         sender       TEXT,
         kind         TEXT    NOT NULL,
         payload      TEXT    NOT NULL,
         created_at   INTEGER NOT NULL,
         delivered_at INTEGER,
         attrs        TEXT    NOT NULL DEFAULT '[]'
     );
     CREATE INDEX mailbox_undelivered ON mailbox (recipient, id) WHERE delivered_at IS NULL;",
];

/// Apply the migrations of LIST that CONN has not seen yet.
pub fn migrate(conn: &Connection, list: &[&str]) -> rusqlite::Result<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    for (index, sql) in list.iter().enumerate() {
        let version = index as i64 + 1;
        if version <= current {
            continue;
        }
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {sql}; PRAGMA user_version = {version}; COMMIT;"
        ))
        .inspect_err(|_| {
            let _ = conn.execute_batch("ROLLBACK");
        })?;
    }
    Ok(())
}
