//! The resume copy of a consolidated transcript (`transcript.resume`,
//! beside the conversation written for people) as a stand-in for the
//! log's base record on resume.
//!
//! Consolidation writes the copy from the same text it stores as the log's
//! one record, then records the copy's file identity (inode, size,
//! modification and status-change times) against that record. While
//! both still hold, resuming inserts the copy straight from the file
//! instead of reading a 20 MB text value out of SQLite, copying it into
//! Lisp and decoding it there. Any write to the file (a person editing
//! it, a restore from a backup) changes its status-change time, which
//! nobody can set back, so such a copy is never trusted: the log stays
//! the truth and the copy only a cache of it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

/// What identifies the copy as it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    ino: i64,
    size: i64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Identity {
    fn of(path: &Path) -> Option<Identity> {
        let meta = std::fs::metadata(path).ok()?;
        let ns = |secs: i64, nanos: i64| secs.saturating_mul(1_000_000_000).saturating_add(nanos);
        Some(Identity {
            ino: meta.ino() as i64,
            size: meta.size() as i64,
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        })
    }
}

/// Forget the copy (inside the transaction that replaces the log's
/// records, so a copy of an older log is never taken for the new one).
pub fn forget(tx: &Connection) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM transcript_copy", []).map(|_| ())
}

/// Record that COPY, just written, holds the text of base record
/// BASE_SEQ, CHARS characters long. A copy outside DIR, the store's
/// directory, or one that cannot be examined is not recorded.
pub fn record(
    conn: &Connection,
    dir: &Path,
    copy: &Path,
    base_seq: i64,
    chars: usize,
) -> rusqlite::Result<()> {
    let (Some(name), Some(id)) = (
        copy.file_name()
            .filter(|_| copy.parent() == Some(dir))
            .and_then(|n| n.to_str()),
        Identity::of(copy),
    ) else {
        return Ok(());
    };
    conn.execute(
        "INSERT OR REPLACE INTO transcript_copy
             (id, base_seq, name, ino, size, mtime_ns, ctime_ns, chars)
         VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            base_seq,
            name,
            id.ino,
            id.size,
            id.mtime_ns,
            id.ctime_ns,
            chars as i64
        ],
    )
    .map(|_| ())
}

/// The copy in DIR that holds base record BASE_SEQ, with its length in
/// characters, if it is still exactly as it was written.
pub fn intact(
    conn: &Connection,
    dir: &Path,
    base_seq: i64,
) -> rusqlite::Result<Option<(PathBuf, usize)>> {
    let row = conn
        .query_row(
            "SELECT base_seq, name, ino, size, mtime_ns, ctime_ns, chars FROM transcript_copy",
            [],
            |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    Identity {
                        ino: row.get(2)?,
                        size: row.get(3)?,
                        mtime_ns: row.get(4)?,
                        ctime_ns: row.get(5)?,
                    },
                    row.get::<_, i64>(6)?,
                ))
            },
        )
        .optional()?;
    Ok(row.and_then(|(seq, name, written, chars)| {
        let path = dir.join(name);
        (seq == base_seq && Identity::of(&path).as_ref() == Some(&written))
            .then(|| (path, chars.max(0) as usize))
    }))
}
