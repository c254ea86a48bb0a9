//! A session's conversation on disk: an append-only log of text
//! replacements in `session.sqlite`, replayed on resume and consolidated
//! into one record (plus copies beside it) at quiet moments.
//!
//! A record says "from character AT on, the transcript is now TEXT",
//! with the text properties of TEXT. The chat buffer only ever changes
//! near its end (streamed text, tool results, notices), so a checkpoint
//! costs the changed tail, not the whole conversation, and SQLite makes
//! each record atomic: after a crash the log holds every record that
//! committed and nothing half-written.
//!
//! Consolidation rewrites the log as one record inside one transaction,
//! then refreshes the conversation written for people (`transcript.org`,
//! `.md` or `.txt`, see [`conversation`](super::conversation)) and the
//! resume copy of the exact text (`transcript.resume`), each by temporary
//! file and rename. Resuming inserts the resume copy in place of the one
//! record while it provably matches it ([`readable`]); the log stays the
//! truth.
//!
//! Offsets and property bounds count characters, as Emacs positions do.
//! A property is one line `START END NAME VALUE`: bounds relative to its
//! record, the property's name, and its value as Lisp printed it (opaque
//! here).

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use rusqlite::{OptionalExtension, params};

use super::{Store, readable, store_error};
use crate::error::{Error, ErrorKind, Result};

/// One text property over a range of characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prop {
    pub start: usize,
    pub end: usize,
    pub name: String,
    /// The value as Lisp printed it.
    pub value: String,
}

/// A whole transcript: its text and its properties (absolute bounds, in
/// order of start).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transcript {
    pub text: String,
    pub props: Vec<Prop>,
}

/// A transcript as resuming gets it: its text, or the readable copy
/// holding it (file and length in characters), and its properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    pub text: Option<String>,
    pub copy: Option<(std::path::PathBuf, usize)>,
    pub props: Vec<Prop>,
}

/// PROPS as Lisp lists `((START END NAME VALUE) ...)` in chunks of at
/// most PER, the latest-ending first, each with FROM: once it and the
/// chunks before it are applied, every property reaching past character
/// FROM is. A view drawing the last turns needs only the first chunks;
/// the rest can wait.
pub fn printed_chunks(props: &[Prop], per: usize) -> Vec<(usize, String)> {
    use std::fmt::Write as _;
    let mut order: Vec<&Prop> = props.iter().collect();
    order.sort_by_key(|p| std::cmp::Reverse(p.end));
    let per = per.max(1);
    order
        .chunks(per)
        .enumerate()
        .map(|(i, chunk)| {
            let from = order.get((i + 1) * per).map_or(0, |p| p.end);
            let mut out = String::with_capacity(chunk.len() * 40 + 2);
            out.push('(');
            for p in chunk {
                let _ = write!(out, "({} {} {} {})", p.start, p.end, p.name, p.value);
            }
            out.push(')');
            (from, out)
        })
        .collect()
}

/// Parse the property lines of a record.
pub fn parse_props(lines: &str) -> Result<Vec<Prop>> {
    let bad = |line: &str| {
        Error::new(
            ErrorKind::Store,
            format!("Malformed transcript property line {line:?}: expected START END NAME VALUE"),
        )
    };
    let mut props = Vec::new();
    for line in lines.lines().filter(|l| !l.is_empty()) {
        let mut fields = line.splitn(4, ' ');
        let (Some(start), Some(end), Some(name), Some(value)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(bad(line));
        };
        let (Ok(start), Ok(end)) = (start.parse::<usize>(), end.parse::<usize>()) else {
            return Err(bad(line));
        };
        if end < start || name.is_empty() {
            return Err(bad(line));
        }
        props.push(Prop {
            start,
            end,
            name: name.to_owned(),
            value: value.to_owned(),
        });
    }
    Ok(props)
}

/// Property lines from PRINTED, a flat list `(START END NAME VALUE ...)`
/// as Lisp printed it: one `prin1` in Emacs and one read here cost far
/// less than a module call per property.
pub fn lines_of_printed(printed: &str) -> Result<String> {
    use crate::codec::print::print;
    use crate::codec::reader::{Sexp, Tree, read_one};
    let bad = |why: String| {
        Error::new(
            ErrorKind::Store,
            format!("Malformed transcript properties: {why}"),
        )
    };
    let (list, _) =
        read_one(printed.as_bytes(), 0, &mut Tree).map_err(|e| bad(format!("{e:?}")))?;
    let items = match list {
        Sexp::List(items, None) => items,
        s if s.is_nil() => Vec::new(),
        _ => return Err(bad("not a proper list".into())),
    };
    let mut out = String::with_capacity(items.len() * 8);
    for quad in items.chunks(4) {
        let [Sexp::Int(start), Sexp::Int(end), Sexp::Symbol(name), value] = quad else {
            return Err(bad("expected START END NAME VALUE".into()));
        };
        out.push_str(&format!("{start} {end} {} ", String::from_utf8_lossy(name)));
        print(value, &mut out).map_err(|e| bad(e.0.into()))?;
        out.push('\n');
    }
    parse_props(&out)?;
    Ok(out)
}

/// Print PROPS as property lines (the inverse of [`parse_props`]).
pub fn print_props(props: &[Prop]) -> String {
    let mut out = String::new();
    for p in props {
        out.push_str(&format!("{} {} {} {}\n", p.start, p.end, p.name, p.value));
    }
    out
}

/// The resume copy beside the conversation file EXPORT: the same name
/// with the extension `.resume`. It holds the saved text exactly, which
/// the conversation, written for people, does not.
pub fn resume_copy(export: &Path) -> std::path::PathBuf {
    export.with_extension("resume")
}

/// Byte offset of character AT of TEXT (which has CHARS characters),
/// counted from whichever end is nearer: records replace the tail.
fn byte_of_char(text: &str, chars: usize, at: usize) -> usize {
    if at >= chars {
        return text.len();
    }
    if at <= chars / 2 {
        text.char_indices().nth(at).map_or(text.len(), |(i, _)| i)
    } else {
        text.char_indices()
            .rev()
            .nth(chars - at - 1)
            .map_or(0, |(i, _)| i)
    }
}

/// A transcript being rebuilt from its records, and its length in
/// characters once a record needed it.
#[derive(Default)]
struct Replay(Transcript, Option<usize>);

impl Replay {
    /// Apply one record. AT beyond the end counts as the end, so that a
    /// log that lost records (a damaged file) still replays.
    fn apply(&mut self, at: usize, text: String, props: Vec<Prop>) {
        if at == 0 {
            // A whole new transcript (a consolidated log starts so): no copy,
            // and no count unless a later record needs it.
            self.0.text = text;
            self.0.props = props;
            self.1 = None;
            return;
        }
        let t = &mut self.0;
        let chars = *self.1.get_or_insert_with(|| t.text.chars().count());
        let at = at.min(chars);
        let added = text.chars().count();
        t.text.truncate(byte_of_char(&t.text, chars, at));
        t.props.retain(|p| p.start < at);
        for p in &mut t.props {
            p.end = p.end.min(at);
        }
        t.text.push_str(&text);
        self.1 = Some(at + added);
        t.props.extend(props.into_iter().filter_map(|p| {
            let end = p.end.min(added);
            (p.start < end).then(|| Prop {
                start: p.start + at,
                end: end + at,
                ..p
            })
        }));
    }

    /// The transcript with adjacent equal properties joined and sorted.
    fn finish(self) -> Transcript {
        let mut t = self.0;
        t.props
            .sort_by(|a, b| (&a.name, a.start).cmp(&(&b.name, b.start)));
        let mut joined: Vec<Prop> = Vec::with_capacity(t.props.len());
        for p in t.props {
            match joined.last_mut() {
                Some(last)
                    if last.name == p.name && last.value == p.value && last.end == p.start =>
                {
                    last.end = p.end;
                }
                _ => joined.push(p),
            }
        }
        joined.sort_by_key(|p| p.start);
        t.props = joined;
        t
    }
}

impl Store {
    /// Record that from character AT on the transcript is TEXT, whose
    /// properties are PROPS (property lines, bounds relative to TEXT).
    pub fn transcript_append(&self, at: usize, text: &str, props: &str) -> Result<()> {
        parse_props(props)?;
        self.with("Cannot save the transcript", |c| {
            c.execute(
                "INSERT INTO transcript_log (at, text, props) VALUES (?1, ?2, ?3)",
                params![at as i64, text, props],
            )
            .map(|_| ())
        })
    }

    /// The transcript as its records leave it.
    pub fn transcript_load(&self) -> Result<Transcript> {
        let rows = self.with("Cannot read the transcript", |c| {
            let mut stmt = c.prepare("SELECT at, text, props FROM transcript_log ORDER BY seq")?;
            let rows = stmt
                .query_map([], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        // One copy out of SQLite, checked once below.
                        row.get_ref(1)?.as_bytes()?.to_vec(),
                        row.get::<_, String>(2)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })?;
        let mut replay = Replay::default();
        for (at, text, props) in rows {
            let text = String::from_utf8(text)
                .map_err(|e| store_error("The saved transcript is not UTF-8", e))?;
            replay.apply(at.max(0) as usize, text, parse_props(&props)?);
        }
        Ok(replay.finish())
    }

    /// Number of records in the log.
    pub fn transcript_records(&self) -> Result<i64> {
        self.with("Cannot read the transcript", |c| {
            c.query_row("SELECT count(*) FROM transcript_log", [], |row| row.get(0))
        })
    }

    /// Rewrite the log as one record, then (when EXPORT is given) write
    /// the conversation for people to EXPORT and the resume copy beside
    /// it ([`resume_copy`]), each by temporary file and rename, and record
    /// the resume copy as the stand-in for that record (see
    /// [`readable`](super::readable)).
    pub fn transcript_consolidate(&self, export: Option<&Path>) -> Result<()> {
        let t = self.transcript_load()?;
        let props = print_props(&t.props);
        let base = self.with("Cannot consolidate the transcript", |c| {
            let tx = c.transaction()?;
            tx.execute("DELETE FROM transcript_log", [])?;
            tx.execute(
                "INSERT INTO transcript_log (at, text, props) VALUES (0, ?1, ?2)",
                params![t.text, props],
            )?;
            let base = tx.last_insert_rowid();
            readable::forget(&tx)?;
            tx.commit()?;
            Ok(base)
        })?;
        if let Some(path) = export {
            let copy = resume_copy(path);
            write_atomic(&copy, t.text.as_bytes())?;
            let dir = self.path.parent().unwrap_or(Path::new("."));
            let chars = t.text.chars().count();
            self.with("Cannot record the resume copy", |c| {
                readable::record(c, dir, &copy, base, chars)
            })?;
            let style = super::conversation::Style::for_path(path);
            let conversation = super::conversation::render(&t, style);
            write_replacing(path, conversation.as_bytes(), false)?;
        }
        Ok(())
    }

    /// The transcript for resuming: when the log is one consolidated record
    /// whose readable copy is intact, its text is that file (not read
    /// here); otherwise the text the records leave.
    pub fn transcript_load_for_resume(&self) -> Result<Loaded> {
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let fast = self.with("Cannot read the transcript", |c| {
            let mut stmt = c.prepare("SELECT seq, at, props FROM transcript_log ORDER BY seq")?;
            let rows = stmt
                .query_map([], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            match rows.as_slice() {
                [(seq, 0, props)] => {
                    Ok(readable::intact(c, &dir, *seq)?.map(|copy| (copy, props.clone())))
                }
                _ => Ok(None),
            }
        })?;
        match fast {
            Some((copy, props)) => Ok(Loaded {
                text: None,
                copy: Some(copy),
                props: parse_props(&props)?,
            }),
            None => {
                let t = self.transcript_load()?;
                Ok(Loaded {
                    text: Some(t.text),
                    copy: None,
                    props: t.props,
                })
            }
        }
    }

    /// Set session metadata: each (KEY, VALUE); an empty value removes KEY.
    pub fn info_set(&self, pairs: &[(String, String)]) -> Result<()> {
        self.with("Cannot save the session metadata", |c| {
            let tx = c.transaction()?;
            for (key, value) in pairs {
                if value.is_empty() {
                    tx.execute("DELETE FROM session_info WHERE key = ?1", params![key])?;
                } else {
                    tx.execute(
                        "INSERT INTO session_info (key, value) VALUES (?1, ?2)
                         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        params![key, value],
                    )?;
                }
            }
            tx.commit()
        })
    }

    /// Every metadata (KEY, VALUE), sorted by key.
    pub fn info(&self) -> Result<Vec<(String, String)>> {
        self.with("Cannot read the session metadata", |c| {
            let mut stmt = c.prepare("SELECT key, value FROM session_info ORDER BY key")?;
            let rows = stmt
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }

    /// One metadata value, if set.
    pub fn info_value(&self, key: &str) -> Result<Option<String>> {
        self.with("Cannot read the session metadata", |c| {
            c.query_row(
                "SELECT value FROM session_info WHERE key = ?1",
                params![key],
                |row| row.get(0),
            )
            .optional()
        })
    }

    /// Append TEXT to the composer's input history.
    pub fn inputs_push(&self, text: &str) -> Result<()> {
        self.with("Cannot save the input history", |c| {
            c.execute("INSERT INTO inputs (text) VALUES (?1)", params![text])
                .map(|_| ())
        })
    }

    /// The composer's input history, oldest first (at most LIMIT, the newest).
    pub fn inputs(&self, limit: usize) -> Result<Vec<String>> {
        self.with("Cannot read the input history", |c| {
            let mut stmt =
                c.prepare("SELECT text FROM (SELECT seq, text FROM inputs ORDER BY seq DESC LIMIT ?1) ORDER BY seq")?;
            let rows = stmt
                .query_map(params![limit as i64], |row| row.get(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }
}

/// Write BYTES to PATH through a synced temporary file and a rename, so
/// that PATH holds either its old or its new content.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_replacing(path, bytes, true)
}

/// Replace PATH with BYTES by temporary file and rename, synced to disk
/// first when SYNC: a file only people read needs no sync, which costs
/// milliseconds on the writer thread every turn.
fn write_replacing(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let io = |e: std::io::Error| {
        Error::new(
            ErrorKind::Store,
            format!("Cannot write {}: {e}", path.display()),
        )
    };
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::File::create(&temp)
        .and_then(|mut f| {
            f.write_all(bytes)
                .and_then(|()| if sync { f.sync_all() } else { Ok(()) })
        })
        .and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(io(e));
    }
    Ok(())
}

/// Work for a session's writer thread, done in order.
enum Job {
    /// Text as Emacs copied it, and its properties as Lisp printed them:
    /// both are converted here, off Emacs's thread.
    Append {
        at: usize,
        text: Vec<u8>,
        printed: String,
    },
    Consolidate(Option<std::path::PathBuf>),
    Info(Vec<(String, String)>),
    Input(String),
    Flush(mpsc::SyncSender<()>),
    /// Mail the saved conversation read: delivered once what was queued
    /// before is written, unread again if any of that failed.
    Deliver {
        mailbox: Arc<Store>,
        ids: Vec<i64>,
    },
}

/// A session's background writer: saves happen off Emacs's thread, in
/// the order they were asked for. Failures go to the reporter given at
/// spawn time (the first since the last [`Writer::flush`] is also kept
/// for it); the caller keeps its in-memory conversation and can save
/// again.
pub struct Writer {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
    failure: Arc<Mutex<Option<String>>>,
}

impl Writer {
    /// Start the writer of STORE; REPORT is called (on the writer
    /// thread) with the message of each failed save.
    pub fn spawn(store: Arc<Store>, report: Box<dyn Fn(String) + Send>) -> Result<Writer> {
        let (tx, rx) = mpsc::channel::<Job>();
        let failure = Arc::new(Mutex::new(None::<String>));
        let kept = Arc::clone(&failure);
        let thread = thread::Builder::new()
            .name("mevedel-transcript".into())
            .spawn(move || {
                // Whether a job failed since the last delivery.
                let mut failed = false;
                for job in rx {
                    let done = match job {
                        Job::Append { at, text, printed } => {
                            lines_of_printed(&printed).and_then(|lines| {
                                store.transcript_append(at, &crate::text::per_char(text), &lines)
                            })
                        }
                        Job::Consolidate(export) => store.transcript_consolidate(export.as_deref()),
                        Job::Info(pairs) => store.info_set(&pairs),
                        Job::Input(text) => store.inputs_push(&text),
                        Job::Flush(reply) => {
                            let _ = reply.send(());
                            Ok(())
                        }
                        Job::Deliver { mailbox, ids } => {
                            let deliver = !std::mem::take(&mut failed);
                            mailbox.mailbox_release(&ids, deliver).map(|_| ())
                        }
                    };
                    if let Err(e) = done {
                        failed = true;
                        let mut slot = kept.lock().unwrap_or_else(PoisonError::into_inner);
                        slot.get_or_insert_with(|| e.message.clone());
                        drop(slot);
                        report(e.message);
                    }
                }
            })
            .map_err(|e| store_error("Cannot start the transcript writer", e))?;
        Ok(Writer {
            jobs: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            failure,
        })
    }

    fn send(&self, job: Job) -> Result<()> {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        match jobs.as_ref().map(|tx| tx.send(job)) {
            Some(Ok(())) => Ok(()),
            _ => Err(Error::new(
                ErrorKind::Store,
                "The transcript writer has stopped",
            )),
        }
    }

    /// Queue "from character AT on, the transcript is TEXT" (bytes as
    /// Emacs copies them) with PRINTED, its properties as the flat list
    /// Lisp printed (see [`lines_of_printed`]).
    pub fn append(&self, at: usize, text: Vec<u8>, printed: String) -> Result<()> {
        self.send(Job::Append { at, text, printed })
    }

    pub fn consolidate(&self, export: Option<std::path::PathBuf>) -> Result<()> {
        self.send(Job::Consolidate(export))
    }

    pub fn info(&self, pairs: Vec<(String, String)>) -> Result<()> {
        self.send(Job::Info(pairs))
    }

    pub fn input(&self, text: String) -> Result<()> {
        self.send(Job::Input(text))
    }

    /// Hold IDS of MAILBOX for delivery and mark them delivered once the
    /// saves queued so far are written: mail a conversation read is in
    /// its saved transcript before it stops being unread. A crash in
    /// between leaves it unread, never lost.
    pub fn deliver_after(&self, mailbox: Arc<Store>, ids: Vec<i64>) -> Result<()> {
        mailbox.mailbox_hold(&ids);
        let kept = Arc::clone(&mailbox);
        let held = ids.clone();
        self.send(Job::Deliver { mailbox, ids }).inspect_err(|_| {
            let _ = kept.mailbox_release(&held, false);
        })
    }

    /// Wait until every save asked for so far is done (at most TIMEOUT);
    /// return the first failure since the last flush, if any.
    pub fn flush(&self, timeout: std::time::Duration) -> Result<Option<String>> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(Job::Flush(tx))?;
        rx.recv_timeout(timeout).map_err(|_| {
            Error::new(
                ErrorKind::Store,
                format!("The transcript writer did not finish within {timeout:?}"),
            )
        })?;
        Ok(self
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take())
    }

    /// Finish the queued saves and stop the thread.
    pub fn stop(&self) {
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = thread.join();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a session list shows of one saved session, read without
/// opening it for writing.
pub fn read_info(file: &Path) -> Result<Vec<(String, String)>> {
    use rusqlite::{Connection, OpenFlags};
    let doing = format!("Cannot read session {}", file.display());
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| store_error(&doing, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(2))
        .map_err(|e| store_error(&doing, e))?;
    let mut stmt = conn
        .prepare("SELECT key, value FROM session_info ORDER BY key")
        .map_err(|e| store_error(&doing, e))?;
    let rows = stmt
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(|e| store_error(&doing, e))?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn store(name: &str) -> (PathBuf, Store) {
        let dir =
            std::env::temp_dir().join(format!("mevedel-transcript-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("session.sqlite")).unwrap();
        (dir, store)
    }

    fn prop(start: usize, end: usize, name: &str, value: &str) -> Prop {
        Prop {
            start,
            end,
            name: name.into(),
            value: value.into(),
        }
    }

    #[test]
    fn records_replace_the_tail_and_keep_properties() {
        let (dir, s) = store("tail");
        s.transcript_append(0, "### hi\n", "").unwrap();
        s.transcript_append(7, "answer…", "0 7 gptel response\n")
            .unwrap();
        // The streamed response grows: the record restarts inside it.
        s.transcript_append(7, "answer… more", "0 12 gptel response\n")
            .unwrap();
        s.transcript_append(19, "\n[Aborted]", "1 10 mevedel-notice abort\n")
            .unwrap();
        let t = s.transcript_load().unwrap();
        assert_eq!(t.text, "### hi\nanswer… more\n[Aborted]");
        assert_eq!(
            t.props,
            vec![
                prop(7, 19, "gptel", "response"),
                prop(20, 29, "mevedel-notice", "abort")
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn consolidation_keeps_the_text_and_writes_both_copies() {
        let (dir, s) = store("consolidate");
        s.transcript_append(0, "héllo ", "0 6 gptel response\n")
            .unwrap();
        s.transcript_append(6, "wörld", "0 5 gptel response\n")
            .unwrap();
        let before = s.transcript_load().unwrap();
        let export = dir.join("transcript.md");
        s.transcript_consolidate(Some(&export)).unwrap();
        assert_eq!(s.transcript_records().unwrap(), 1);
        let after = s.transcript_load().unwrap();
        assert_eq!(after, before);
        // Adjacent equal properties were joined.
        assert_eq!(after.props, vec![prop(0, 11, "gptel", "response")]);
        assert_eq!(
            std::fs::read_to_string(resume_copy(&export)).unwrap(),
            "héllo wörld"
        );
        assert_eq!(
            std::fs::read_to_string(&export).unwrap(),
            "## Assistant\n\nhéllo wörld\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_intact_resume_copy_stands_in_for_the_consolidated_text() {
        let (dir, s) = store("copy");
        s.transcript_append(0, "héllo ", "0 6 gptel response\n")
            .unwrap();
        s.transcript_append(6, "wörld", "0 5 gptel ignore\n")
            .unwrap();
        // Not consolidated: the text comes from the log.
        let loaded = s.transcript_load_for_resume().unwrap();
        assert_eq!(loaded.text.as_deref(), Some("héllo wörld"));
        assert_eq!(loaded.copy, None);
        let export = dir.join("transcript.md");
        s.transcript_consolidate(Some(&export)).unwrap();
        let loaded = s.transcript_load_for_resume().unwrap();
        assert_eq!(loaded.text, None);
        assert_eq!(loaded.copy, Some((resume_copy(&export), 11)));
        assert_eq!(loaded.props, s.transcript_load().unwrap().props);
        // A later record: the log again.
        s.transcript_append(11, "!", "").unwrap();
        let loaded = s.transcript_load_for_resume().unwrap();
        assert_eq!(loaded.text.as_deref(), Some("héllo wörld!"));
        assert_eq!(loaded.copy, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_changed_or_missing_copy_is_not_trusted() {
        let (dir, s) = store("copy-changed");
        s.transcript_append(0, "the text", "").unwrap();
        let export = dir.join("transcript.org");
        s.transcript_consolidate(Some(&export)).unwrap();
        assert!(s.transcript_load_for_resume().unwrap().copy.is_some());
        // Same size, same inode, a later write (past the clock's tick).
        std::thread::sleep(std::time::Duration::from_millis(30));
        std::fs::write(resume_copy(&export), "THE TEXT").unwrap();
        let loaded = s.transcript_load_for_resume().unwrap();
        assert_eq!(loaded.text.as_deref(), Some("the text"));
        assert_eq!(loaded.copy, None);
        // A new consolidation trusts its new copy; removing it ends that.
        s.transcript_consolidate(Some(&export)).unwrap();
        assert!(s.transcript_load_for_resume().unwrap().copy.is_some());
        std::fs::remove_file(resume_copy(&export)).unwrap();
        assert_eq!(
            s.transcript_load_for_resume().unwrap().text.as_deref(),
            Some("the text")
        );
        // Consolidation without a copy, or with one elsewhere, records none.
        s.transcript_consolidate(None).unwrap();
        assert_eq!(s.transcript_load_for_resume().unwrap().copy, None);
        let elsewhere =
            std::env::temp_dir().join(format!("mevedel-elsewhere-{}.md", std::process::id()));
        s.transcript_consolidate(Some(&elsewhere)).unwrap();
        assert_eq!(s.transcript_load_for_resume().unwrap().copy, None);
        let _ = std::fs::remove_file(&elsewhere);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn property_chunks_cover_the_text_from_its_end() {
        let props: Vec<Prop> = (0..10)
            .map(|i| prop(i * 10, i * 10 + 5, "gptel", &format!("(tool . \"c{i}\")")))
            .chain([prop(0, 100, "mevedel-mail", "t")])
            .collect();
        let chunks = printed_chunks(&props, 4);
        assert_eq!(chunks.len(), 3);
        // The property spanning everything ends last, so it comes first.
        assert!(
            chunks[0]
                .1
                .starts_with("((0 100 mevedel-mail t)(90 95 gptel (tool . \"c9\"))")
        );
        let froms: Vec<usize> = chunks.iter().map(|c| c.0).collect();
        assert_eq!(froms, vec![65, 25, 0]);
        // After each chunk, every property ending past its FROM is in it
        // or an earlier one.
        for (i, (from, _)) in chunks.iter().enumerate() {
            let applied: String = chunks[..=i].iter().map(|c| c.1.as_str()).collect();
            for p in props.iter().filter(|p| p.end > *from) {
                assert!(
                    applied.contains(&format!("({} {} {} {})", p.start, p.end, p.name, p.value))
                );
            }
        }
        assert!(printed_chunks(&[], 4).is_empty());
    }

    #[test]
    fn a_store_of_schema_4_keeps_its_log_when_upgraded() {
        let dir =
            std::env::temp_dir().join(format!("mevedel-transcript-v4-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("session.sqlite");
        {
            let c = rusqlite::Connection::open(&file).unwrap();
            for sql in &crate::store::schema::MIGRATIONS[..4] {
                c.execute_batch(sql).unwrap();
            }
            c.execute_batch(
                "PRAGMA user_version = 4;
                 INSERT INTO transcript_log (at, text, props) VALUES (0, 'old text', '0 3 gptel response\n');",
            )
            .unwrap();
        }
        let s = Store::open(&file).unwrap();
        let t = s.transcript_load().unwrap();
        assert_eq!(t.text, "old text");
        assert_eq!(t.props, vec![prop(0, 3, "gptel", "response")]);
        s.transcript_append(3, " new", "").unwrap();
        assert_eq!(s.transcript_load().unwrap().text, "old new");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn offsets_past_the_end_append() {
        let mut r = Replay::default();
        for (at, text) in [(0, "abc"), (3, "def"), (2, "XY"), (40, "z")] {
            r.apply(at, text.into(), vec![]);
        }
        assert_eq!(r.0.text, "abXYz");
        assert_eq!(r.1, Some(5));
    }

    #[test]
    fn printed_property_lists_become_lines() {
        let lines = lines_of_printed(
            r#"(0 7 gptel response 7 9 gptel (tool . "call \"1\"") 2 3 mevedel-mail t)"#,
        )
        .unwrap();
        assert_eq!(
            lines,
            "0 7 gptel response\n7 9 gptel (tool . \"call \\\"1\\\"\")\n2 3 mevedel-mail t\n"
        );
        assert_eq!(lines_of_printed("nil").unwrap(), "");
        for bad in [
            "(0 7 gptel)",
            "(0 x gptel response)",
            "(1 2 \"gptel\" response)",
            "[0 1 a b]",
        ] {
            assert!(lines_of_printed(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn offsets_count_characters_from_either_end() {
        let text = "aé𝄞b";
        assert_eq!(byte_of_char(text, 4, 0), 0);
        assert_eq!(byte_of_char(text, 4, 1), 1);
        assert_eq!(byte_of_char(text, 4, 2), 3);
        assert_eq!(byte_of_char(text, 4, 3), 7);
        assert_eq!(byte_of_char(text, 4, 4), 8);
        assert_eq!(byte_of_char(text, 4, 9), 8);
    }

    #[test]
    fn malformed_property_lines_are_refused_before_anything_is_written() {
        let (dir, s) = store("bad");
        for bad in [
            "1 x gptel response",
            "5 2 gptel response",
            "1 2 gptel",
            "1 2  v",
        ] {
            let err = s.transcript_append(0, "text", bad).unwrap_err();
            assert!(
                err.message.contains("Malformed transcript property"),
                "{bad}: {}",
                err.message
            );
        }
        assert_eq!(s.transcript_records().unwrap(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn metadata_and_inputs_round_trip() {
        let (dir, s) = store("info");
        s.info_set(&[
            ("title".into(), "Fix it".into()),
            ("turns".into(), "1".into()),
        ])
        .unwrap();
        s.info_set(&[
            ("turns".into(), "2".into()),
            ("title".into(), String::new()),
        ])
        .unwrap();
        assert_eq!(
            s.info().unwrap(),
            vec![("turns".to_owned(), "2".to_owned())]
        );
        assert_eq!(s.info_value("turns").unwrap().as_deref(), Some("2"));
        for i in 0..5 {
            s.inputs_push(&format!("prompt {i}")).unwrap();
        }
        assert_eq!(s.inputs(2).unwrap(), vec!["prompt 3", "prompt 4"]);
        assert_eq!(
            read_info(&dir.join("session.sqlite")).unwrap(),
            vec![("turns".to_owned(), "2".to_owned())]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_writer_saves_in_order_and_reports_failures() {
        let (dir, s) = store("writer");
        let s = Arc::new(s);
        let reported = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&reported);
        let writer = Writer::spawn(
            Arc::clone(&s),
            Box::new(move |m| sink.lock().unwrap().push(m)),
        )
        .unwrap();
        writer
            .append(0, b"one ".to_vec(), "(0 4 gptel response)".into())
            .unwrap();
        writer.append(4, b"two".to_vec(), "nil".into()).unwrap();
        // Malformed properties fail in the writer, reported.
        writer
            .append(7, b"!".to_vec(), "(0 1 gptel)".into())
            .unwrap();
        writer.input("hello".into()).unwrap();
        writer
            .consolidate(Some(dir.join("no-such-dir").join("transcript.md")))
            .unwrap();
        let failure = writer.flush(std::time::Duration::from_secs(10)).unwrap();
        assert!(failure.is_some_and(|m| m.contains("Malformed transcript properties")));
        assert_eq!(reported.lock().unwrap().len(), 2);
        assert!(reported.lock().unwrap()[1].contains("Cannot write"));
        assert_eq!(s.transcript_load().unwrap().text, "one two");
        assert_eq!(s.inputs(10).unwrap(), vec!["hello"]);
        // The failure was taken by the flush.
        assert_eq!(
            writer.flush(std::time::Duration::from_secs(10)).unwrap(),
            None
        );
        writer.stop();
        assert!(writer.append(0, b"late".to_vec(), "nil".into()).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn mail_is_delivered_after_the_save_that_read_it_and_only_if_it_was_written() {
        let (dir, s) = store("deliver-after");
        let s = Arc::new(s);
        let writer = Writer::spawn(Arc::clone(&s), Box::new(|_| {})).unwrap();
        let post = |payload: &str| {
            s.mailbox_post(&crate::store::NewMessage {
                recipient: "/root/a".into(),
                sender: Some("/root".into()),
                kind: "MAIL".into(),
                payload: payload.into(),
                attrs: Vec::new(),
            })
            .unwrap()
        };
        let unread = || {
            s.mailbox_unread("/root/a")
                .unwrap()
                .iter()
                .map(|m| m.payload.clone())
                .collect::<Vec<_>>()
        };
        let (one, two) = (post("one"), post("two"));
        // Held: not unread, and unread again once released undelivered.
        s.mailbox_hold(&[one]);
        assert_eq!(unread(), ["two"]);
        assert_eq!(s.mailbox_release(&[one], false).unwrap(), 0);
        assert_eq!(unread(), ["one", "two"]);
        // A failing save before the delivery: the mail is unread again.
        writer
            .append(0, b"x".to_vec(), "(0 1 gptel)".into())
            .unwrap();
        writer.deliver_after(Arc::clone(&s), vec![one]).unwrap();
        writer.flush(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(unread(), ["one", "two"]);
        // A good save: delivered once it is written.
        writer.append(0, b"one".to_vec(), "nil".into()).unwrap();
        writer
            .deliver_after(Arc::clone(&s), vec![one, two])
            .unwrap();
        writer.flush(std::time::Duration::from_secs(10)).unwrap();
        assert!(unread().is_empty());
        assert_eq!(s.mailbox_mark_delivered(&[one, two]).unwrap(), 0);
        // A stopped writer delivers nothing and holds nothing.
        let three = post("three");
        writer.stop();
        assert!(writer.deliver_after(Arc::clone(&s), vec![three]).is_err());
        assert_eq!(unread(), ["three"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
