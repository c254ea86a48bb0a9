//! The mailbox (`mailbox.sqlite`): messages queued for an agent, each
//! delivered once.

use std::sync::PoisonError;
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
    /// Opening-tag attributes, in order.
    pub attrs: Vec<(String, String)>,
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: i64,
    pub recipient: String,
    pub sender: Option<String>,
    pub kind: String,
    pub payload: String,
    pub attrs: Vec<(String, String)>,
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
            (
                "attrs",
                Datum::List(
                    self.attrs
                        .iter()
                        .map(|(k, v)| Datum::List(vec![Datum::str(k), Datum::str(v)]))
                        .collect(),
                ),
            ),
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
        let ids = self.mailbox_post_all(std::slice::from_ref(message))?;
        Ok(ids.first().copied().unwrap_or(0))
    }

    /// Queue MESSAGES in one transaction, in order; return their ids.
    pub fn mailbox_post_all(&self, messages: &[NewMessage]) -> Result<Vec<i64>> {
        self.with_mail("Cannot post to the mailbox", |c| {
            let tx = c.transaction()?;
            let mut ids = Vec::with_capacity(messages.len());
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT INTO mailbox (recipient, sender, kind, payload, created_at, attrs)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?;
                for message in messages {
                    let attrs =
                        serde_json::to_string(&message.attrs).unwrap_or_else(|_| "[]".into());
                    stmt.execute(params![
                        message.recipient,
                        message.sender,
                        message.kind,
                        message.payload,
                        now_ms(),
                        attrs
                    ])?;
                    ids.push(tx.last_insert_rowid());
                }
            }
            tx.commit()?;
            Ok(ids)
        })
    }

    /// Bytes of SENDER's undelivered payloads (a monitor's flood gauge).
    pub fn mailbox_undelivered_bytes(&self, sender: &str) -> Result<u64> {
        self.with_mail("Cannot read the mailbox", |c| {
            c.query_row(
                "SELECT COALESCE(SUM(LENGTH(CAST(payload AS BLOB))), 0) FROM mailbox
                 WHERE sender = ?1 AND delivered_at IS NULL",
                [sender],
                |row| row.get::<_, i64>(0),
            )
            .map(|n| n.max(0) as u64)
        })
    }

    /// Undelivered messages for RECIPIENT, oldest first, but for those
    /// held for delivery.
    pub fn mailbox_unread(&self, recipient: &str) -> Result<Vec<Message>> {
        if !self.mail_exists() {
            return Ok(Vec::new());
        }
        let held = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.with_mail("Cannot read the mailbox", |c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, recipient, sender, kind, payload, created_at, attrs FROM mailbox
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
                    attrs: serde_json::from_str(&row.get::<_, String>(6)?).unwrap_or_default(),
                })
            })?;
            rows.filter(|m| m.as_ref().map_or(true, |m| !held.contains(&m.id)))
                .collect()
        })
    }

    /// Hold IDS for delivery: they are read (no longer unread) while a
    /// writer saves the conversation that read them.
    pub fn mailbox_hold(&self, ids: &[i64]) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.extend(ids);
    }

    /// Release the held IDS: marked delivered when DELIVER, else unread
    /// again (the conversation that read them was not saved).
    pub fn mailbox_release(&self, ids: &[i64], deliver: bool) -> Result<usize> {
        let marked = if deliver {
            self.mailbox_mark_delivered(ids)
        } else {
            Ok(0)
        };
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        for id in ids {
            held.remove(id);
        }
        marked
    }

    /// Mark IDS delivered (in one transaction); return how many were
    /// still undelivered. A message is delivered at most once.
    pub fn mailbox_mark_delivered(&self, ids: &[i64]) -> Result<usize> {
        self.with_mail("Cannot mark mailbox messages delivered", |c| {
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
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("session.sqlite")).unwrap();
        let post = |recipient: &str, payload: &str| {
            store
                .mailbox_post(&NewMessage {
                    recipient: recipient.into(),
                    sender: Some("/root/worker".into()),
                    kind: "RESULT".into(),
                    payload: payload.into(),
                    attrs: Vec::new(),
                })
                .unwrap()
        };
        let first = post("/root", "one");
        let second = post("/root", "two é");
        post("/root/other", "elsewhere");
        let unread = store.mailbox_unread("/root").unwrap();
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

    #[test]
    fn attributes_batches_and_undelivered_bytes() {
        let dir =
            std::env::temp_dir().join(format!("mevedel-mailbox-attrs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("session.sqlite")).unwrap();
        let message = |payload: &str| NewMessage {
            recipient: "/root".into(),
            sender: Some("x1".into()),
            kind: "MONITOR".into(),
            payload: payload.into(),
            attrs: vec![
                ("execution_id".into(), "x1".into()),
                ("description".into(), "d".into()),
            ],
        };
        let ids = store
            .mailbox_post_all(&[message("one"), message("two")])
            .unwrap();
        assert_eq!(ids.len(), 2);
        assert!(ids[0] < ids[1]);
        let unread = store.mailbox_unread("/root").unwrap();
        assert_eq!(unread[1].attrs[1], ("description".into(), "d".into()));
        assert_eq!(store.mailbox_undelivered_bytes("x1").ok(), Some(6));
        assert_eq!(store.mailbox_mark_delivered(&ids[..1]).ok(), Some(1));
        assert_eq!(store.mailbox_undelivered_bytes("x1").ok(), Some(3));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
