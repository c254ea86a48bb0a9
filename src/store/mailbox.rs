//! The mailbox: messages queued for an agent, each delivered once.

use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::params;

use super::Store;
use crate::datum::Datum;
use crate::error::Result;

/// A message to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    pub recipient: String,
    pub sender: Option<String>,
    pub kind: String,
    pub payload: String,
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: i64,
    pub recipient: String,
    pub sender: Option<String>,
    pub kind: String,
    pub payload: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
}

impl Message {
    /// `(:id ID :recipient R :sender S :kind K :payload P :created-at MS)`.
    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            ("id", Datum::Int(self.id)),
            ("recipient", Datum::str(&self.recipient)),
            ("sender", Datum::opt_str(self.sender.as_deref())),
            ("kind", Datum::str(&self.kind)),
            ("payload", Datum::str(&self.payload)),
            ("created-at", Datum::Int(self.created_at)),
        ])
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Store {
    /// Queue MESSAGE; return its id.
    pub fn mailbox_post(&self, message: &NewMessage) -> Result<i64> {
        self.with("Cannot post to the mailbox", |c| {
            c.execute(
                "INSERT INTO mailbox (recipient, sender, kind, payload, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    message.recipient,
                    message.sender,
                    message.kind,
                    message.payload,
                    now_ms()
                ],
            )?;
            Ok(c.last_insert_rowid())
        })
    }

    /// Undelivered messages for RECIPIENT, oldest first.
    pub fn mailbox_unread(&self, recipient: &str) -> Result<Vec<Message>> {
        self.with("Cannot read the mailbox", |c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, recipient, sender, kind, payload, created_at FROM mailbox
                 WHERE recipient = ?1 AND delivered_at IS NULL ORDER BY id",
            )?;
            let rows = stmt.query_map([recipient], |row| {
                Ok(Message {
                    id: row.get(0)?,
                    recipient: row.get(1)?,
                    sender: row.get(2)?,
                    kind: row.get(3)?,
                    payload: row.get(4)?,
                    created_at: row.get(5)?,
                })
            })?;
            rows.collect()
        })
    }

    /// Mark IDS delivered (in one transaction); return how many were
    /// still undelivered. A message is delivered at most once.
    pub fn mailbox_mark_delivered(&self, ids: &[i64]) -> Result<usize> {
        self.with("Cannot mark mailbox messages delivered", |c| {
            let tx = c.transaction()?;
            let mut changed = 0;
            {
                let mut stmt = tx.prepare_cached(
                    "UPDATE mailbox SET delivered_at = ?2 WHERE id = ?1 AND delivered_at IS NULL",
                )?;
                let now = now_ms();
                for id in ids {
                    changed += stmt.execute(params![id, now])?;
                }
            }
            tx.commit()?;
            Ok(changed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_read_deliver_once() {
        let dir = std::env::temp_dir().join(format!("mevedel-mailbox-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let store = Store::open(&dir.join("session.sqlite")).unwrap_or_else(|e| panic!("{e}"));
        let post = |recipient: &str, payload: &str| {
            store
                .mailbox_post(&NewMessage {
                    recipient: recipient.into(),
                    sender: Some("/root/worker".into()),
                    kind: "RESULT".into(),
                    payload: payload.into(),
                })
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let first = post("/root", "one");
        let second = post("/root", "two é");
        post("/root/other", "elsewhere");
        let unread = store
            .mailbox_unread("/root")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            unread
                .iter()
                .map(|m| m.payload.as_str())
                .collect::<Vec<_>>(),
            ["one", "two é"]
        );
        assert_eq!(store.mailbox_mark_delivered(&[first]).ok(), Some(1));
        assert_eq!(store.mailbox_mark_delivered(&[first, second]).ok(), Some(1));
        assert!(
            store
                .mailbox_unread("/root")
                .map(|v| v.is_empty())
                .unwrap_or(false)
        );
        assert_eq!(
            store.mailbox_unread("/root/other").map(|v| v.len()).ok(),
            Some(1)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
