//! The session store (`store`) for Lisp: a handle per open
//! `session.sqlite`, the mailbox, and the conversation's saves.
//!
//! Saves of the conversation (`store-transcript-save`, metadata, input
//! history) go to the store's writer thread, started on the first save:
//! Lisp only pays for copying the text. A failed save becomes a
//! `store-failure` event `(FILE MESSAGE)`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::datum::Datum;
use mevedel_core::error::{Error, ErrorKind};
use mevedel_core::events::{self, Event};
use mevedel_core::store::transcript;
use mevedel_core::store::{Loaded, NewMessage, Store, Writer};

use crate::args::Plist;
use crate::convert::{list_items, to_lisp};
use crate::errors::{self, OrSignal};
use crate::guard::guarded;
use crate::raw::Raw;
use crate::text::copy_current_buffer;

/// What Lisp holds: the store (and its writer, once something was
/// saved) until `store-close` releases it.
pub struct StoreHandle {
    store: Mutex<Option<Arc<Store>>>,
    writer: Mutex<Option<Arc<Writer>>>,
}

fn closed() -> Error {
    Error::new(ErrorKind::Store, "The session store is closed")
}

pub(super) fn store_of(env: &Env, handle: Value<'_>) -> Result<Arc<Store>> {
    let handle = handle.into_ref::<StoreHandle>()?;
    let slot = handle.store.lock().ok().and_then(|s| s.clone());
    match slot {
        Some(store) => Ok(store),
        None => errors::signal(env, closed()),
    }
}

/// HANDLE's writer, started on first use.
fn writer_of(env: &Env, handle: Value<'_>) -> Result<Arc<Writer>> {
    let store = store_of(env, handle)?;
    let handle = handle.into_ref::<StoreHandle>()?;
    let mut slot = handle.writer.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(writer) = slot.as_ref() {
        return Ok(Arc::clone(writer));
    }
    let file = store.path().to_string_lossy().into_owned();
    let writer = Writer::spawn(
        store,
        Box::new(move |message| {
            events::global().push(Event::new(
                "store-failure",
                Datum::List(vec![Datum::str(&file), Datum::Str(message)]),
            ));
        }),
    )
    .or_signal(env)?;
    let writer = Arc::new(writer);
    *slot = Some(Arc::clone(&writer));
    Ok(writer)
}

/// Open (creating if needed) the session store FILE in WAL mode, with
/// its schema up to date. Returns a handle for the other store functions.
#[defun(user_ptr, name = "store-open")]
fn store_open(env: &Env, file: String) -> Result<StoreHandle> {
    guarded(env, || {
        let store = Store::open(&PathBuf::from(file)).or_signal(env)?;
        Ok(StoreHandle {
            store: Mutex::new(Some(Arc::new(store))),
            writer: Mutex::new(None),
        })
    })
}

/// Close HANDLE's store, after its queued saves are done; later calls
/// on it signal `mevedel-core-store-error`.
#[defun(name = "store-close")]
fn store_close(env: &Env, handle: Value) -> Result<()> {
    guarded(env, || {
        let handle = handle.into_ref::<StoreHandle>()?;
        let writer = handle.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(writer) = writer {
            writer.stop();
        }
        if let Ok(mut slot) = handle.store.lock() {
            slot.take();
        }
        Ok(())
    })
}

/// `(:file FILE :journal-mode MODE :schema-version N)` of HANDLE's store.
#[defun(name = "store-info")]
fn store_info<'e>(env: &'e Env, handle: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let store = store_of(env, handle)?;
        let mode = store.journal_mode().or_signal(env)?;
        let version = store.schema_version().or_signal(env)?;
        env.list((
            env.intern(":file")?,
            store.path().to_string_lossy().into_owned().into_lisp(env)?,
            env.intern(":journal-mode")?,
            mode.into_lisp(env)?,
            env.intern(":schema-version")?,
            version.into_lisp(env)?,
        ))
    })
}

/// Queue a mailbox message in HANDLE's store; return its id. ARGS:
/// `:recipient`, `:kind`, `:payload`, `:sender` (or nil) and `:attrs`,
/// a list of (NAME VALUE) strings: its opening-tag attributes.
#[defun(name = "store-mailbox-post")]
fn store_mailbox_post(env: &Env, handle: Value, args: Value) -> Result<i64> {
    guarded(env, || {
        let mut args = Plist::new(env, "store-mailbox-post", args)?;
        let recipient = args.string(":recipient")?;
        let kind = args.string(":kind")?;
        let payload = args.string(":payload")?;
        let sender = args.opt_string(":sender")?;
        let mut attrs = Vec::new();
        for pair in args.list(":attrs")? {
            attrs.push((pair.car::<String>()?, pair.cdr::<Value>()?.car::<String>()?));
        }
        args.finish()?;
        store_of(env, handle)?
            .mailbox_post(&NewMessage {
                recipient,
                sender,
                kind,
                payload,
                attrs,
            })
            .or_signal(env)
    })
}

/// Undelivered messages for RECIPIENT, oldest first, as plists.
#[defun(name = "store-mailbox-unread")]
fn store_mailbox_unread<'e>(
    env: &'e Env,
    handle: Value<'e>,
    recipient: String,
) -> Result<Value<'e>> {
    guarded(env, || {
        let store = store_of(env, handle)?;
        let messages = store.mailbox_unread(&recipient).or_signal(env)?;
        let values = messages
            .iter()
            .map(|m| to_lisp(env, &m.to_datum()))
            .collect::<Result<Vec<_>>>()?;
        env.list(&values[..])
    })
}

/// The integers of the Lisp list IDS.
fn id_list(ids: Value) -> Result<Vec<i64>> {
    let mut list = Vec::new();
    let mut rest = ids;
    while rest.is_not_nil() {
        list.push(rest.car::<i64>()?);
        rest = rest.cdr()?;
    }
    Ok(list)
}

/// Mark the messages with IDS (a list) delivered; return how many were
/// still undelivered.
#[defun(name = "store-mailbox-deliver")]
fn store_mailbox_deliver(env: &Env, handle: Value, ids: Value) -> Result<i64> {
    guarded(env, || {
        let store = store_of(env, handle)?;
        let n = store
            .mailbox_mark_delivered(&id_list(ids)?)
            .or_signal(env)?;
        Ok(n as i64)
    })
}

/// Mark the messages with IDS in MAILBOX's mailbox delivered once the
/// saves queued in HANDLE are written; until then they are not unread.
#[defun(name = "store-mailbox-deliver-after")]
fn store_mailbox_deliver_after(env: &Env, handle: Value, mailbox: Value, ids: Value) -> Result<()> {
    guarded(env, || {
        let mailbox = store_of(env, mailbox)?;
        writer_of(env, handle)?
            .deliver_after(mailbox, id_list(ids)?)
            .or_signal(env)
    })
}

/// Save the current buffer's accessible text as the transcript from
/// character AT on (0-based), with PROPS, the printed flat list (START
/// END NAME VALUE ...) of its properties, bounds relative to the text.
/// The text is copied now and written by the store's writer thread.
#[defun(name = "store-transcript-save")]
fn store_transcript_save(env: &Env, handle: Value, at: i64, props: String) -> Result<()> {
    guarded(env, || {
        let writer = writer_of(env, handle)?;
        let (text, _) = copy_current_buffer(env)?;
        writer
            .append(
                usize::try_from(at).unwrap_or(0),
                text.bytes().to_vec(),
                props,
            )
            .or_signal(env)
    })
}

/// Consolidate HANDLE's transcript log into one record, then write the
/// readable copy EXPORT (a file name, or nil for none), in the background.
#[defun(name = "store-transcript-consolidate")]
fn store_transcript_consolidate(env: &Env, handle: Value, export: Option<String>) -> Result<()> {
    guarded(env, || {
        writer_of(env, handle)?
            .consolidate(export.map(PathBuf::from))
            .or_signal(env)
    })
}

/// Wait up to TIMEOUT-MS for HANDLE's queued saves; return the message
/// of the first save that failed since the last flush, or nil.
#[defun(name = "store-flush")]
fn store_flush(env: &Env, handle: Value, timeout_ms: i64) -> Result<Option<String>> {
    guarded(env, || {
        let handle_ref = handle.into_ref::<StoreHandle>()?;
        let writer = handle_ref.writer.lock().ok().and_then(|w| w.clone());
        match writer {
            None => Ok(None),
            Some(writer) => writer
                .flush(Duration::from_millis(timeout_ms.max(0) as u64))
                .or_signal(env),
        }
    })
}

/// Properties per chunk of `store-transcript-load': a view drawing the
/// last turns reads one or two, each a few milliseconds of Lisp.
const PROPS_PER_CHUNK: usize = 2000;

/// `(TEXT COPY CHARS CHUNKS)`: the transcript of HANDLE, after the queued
/// saves. TEXT is its text as unibyte UTF-8, for `decode-coding-string'
/// (several times faster for a large text than the module's own
/// decoding) — or nil when COPY, the readable copy, holds exactly that
/// text, CHARS characters of it (see `store::readable`); FULL non-nil
/// always gives TEXT. CHUNKS are the properties as `(FROM . PRINTED)`,
/// PRINTED a list `((START END NAME VALUE) ...)` with absolute bounds,
/// for one `read` each (see `transcript::printed_chunks`).
#[defun(name = "store-transcript-load")]
fn store_transcript_load<'e>(
    env: &'e Env,
    handle: Value<'e>,
    full: Option<Value<'e>>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let store = store_of(env, handle)?;
        store_flush(env, handle, 10_000)?;
        let loaded = if full.is_some_and(|v| v.is_not_nil()) {
            let t = store.transcript_load().or_signal(env)?;
            Loaded {
                text: Some(t.text),
                copy: None,
                props: t.props,
            }
        } else {
            store.transcript_load_for_resume().or_signal(env)?
        };
        let api = Raw::new(env)?;
        let text = match &loaded.text {
            Some(text) => api.finish(
                api.make_unibyte_string(text.as_bytes()),
                "Cannot make the transcript's text",
            )?,
            None => ().into_lisp(env)?,
        };
        let (copy, chars) = match loaded.copy {
            Some((path, chars)) => (
                path.to_string_lossy().into_owned().into_lisp(env)?,
                (chars as i64).into_lisp(env)?,
            ),
            None => (().into_lisp(env)?, ().into_lisp(env)?),
        };
        let mut chunks = ().into_lisp(env)?;
        for (from, printed) in transcript::printed_chunks(&loaded.props, PROPS_PER_CHUNK)
            .into_iter()
            .rev()
        {
            let chunk = env.cons((from as i64).into_lisp(env)?, printed.into_lisp(env)?)?;
            chunks = env.cons(chunk, chunks)?;
        }
        env.list((text, copy, chars, chunks))
    })
}

/// Set metadata of HANDLE's session: PAIRS is an alist of strings; an
/// empty value removes its key. Written in the background.
#[defun(name = "store-info-set")]
fn store_info_set(env: &Env, handle: Value, pairs: Value) -> Result<()> {
    guarded(env, || {
        let mut list = Vec::new();
        for pair in list_items(pairs)? {
            list.push((pair.car::<String>()?, pair.cdr::<String>()?));
        }
        writer_of(env, handle)?.info(list).or_signal(env)
    })
}

fn info_alist<'e>(env: &'e Env, pairs: Vec<(String, String)>) -> Result<Value<'e>> {
    let values = pairs
        .into_iter()
        .map(|(k, v)| env.cons(k.into_lisp(env)?, v.into_lisp(env)?))
        .collect::<Result<Vec<_>>>()?;
    env.list(&values[..])
}

/// The metadata of HANDLE's session, an alist of strings (after the
/// queued saves).
#[defun(name = "store-info-get")]
fn store_info_get<'e>(env: &'e Env, handle: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let store = store_of(env, handle)?;
        store_flush(env, handle, 10_000)?;
        let pairs = store.info().or_signal(env)?;
        info_alist(env, pairs)
    })
}

/// The metadata of the saved session whose `session.sqlite` is FILE,
/// read without opening it for writing (for session lists).
#[defun(name = "store-file-info")]
fn store_file_info<'e>(env: &'e Env, file: String) -> Result<Value<'e>> {
    guarded(env, || {
        let pairs = transcript::read_info(&PathBuf::from(file)).or_signal(env)?;
        info_alist(env, pairs)
    })
}

/// Append TEXT to the composer history of HANDLE's session (in the background).
#[defun(name = "store-input-push")]
fn store_input_push(env: &Env, handle: Value, text: String) -> Result<()> {
    guarded(env, || writer_of(env, handle)?.input(text).or_signal(env))
}

/// The newest LIMIT inputs of HANDLE's session, oldest first.
#[defun(name = "store-inputs")]
fn store_inputs<'e>(env: &'e Env, handle: Value<'e>, limit: i64) -> Result<Value<'e>> {
    guarded(env, || {
        let store = store_of(env, handle)?;
        store_flush(env, handle, 10_000)?;
        let inputs = store
            .inputs(usize::try_from(limit).unwrap_or(0))
            .or_signal(env)?;
        let values = inputs
            .into_iter()
            .map(|t| t.into_lisp(env))
            .collect::<Result<Vec<_>>>()?;
        env.list(&values[..])
    })
}
