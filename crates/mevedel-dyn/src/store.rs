//! The session store (`store`) for Lisp: a handle per open
//! `session.sqlite`, the mailbox, and the conversation's saves.
//!
//! Saves of the conversation (`store-transcript-save`, metadata, input
//! history) go to the store's writer thread, started on the first save
//! (`store::Handle`): Lisp only pays for copying the text. A failed save
//! becomes a `store-failure` event `(FILE MESSAGE)`.

use std::cell::Ref;
use std::path::PathBuf;
use std::time::Duration;

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::store::transcript;
use mevedel_core::store::{Handle, NewMessage};

use crate::args::Plist;
use crate::convert::{list_items, to_lisp};
use crate::errors::OrSignal;
use crate::guard::guarded;
use crate::raw::Raw;
use crate::text::copy_current_buffer;

/// HANDLE's store (see `store::Handle`).
pub(super) fn handle_of<'e>(handle: Value<'e>) -> Result<Ref<'e, Handle>> {
    handle.into_ref::<Handle>()
}

/// Open (creating if needed) the session store FILE in WAL mode, with
/// its schema up to date. Returns a handle for the other store functions.
#[defun(user_ptr, name = "store-open")]
fn store_open(env: &Env, file: String) -> Result<Handle> {
    guarded(env, || Handle::open(&PathBuf::from(file)).or_signal(env))
}

/// Close HANDLE's store, after its queued saves are done; later calls
/// on it signal `mevedel-core-store-error`.
#[defun(name = "store-close")]
fn store_close(env: &Env, handle: Value) -> Result<()> {
    guarded(env, || {
        handle_of(handle)?.close();
        Ok(())
    })
}

/// `(:file FILE :journal-mode MODE :schema-version N)` of HANDLE's store.
#[defun(name = "store-info")]
fn store_info<'e>(env: &'e Env, handle: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let store = handle_of(handle)?.store().or_signal(env)?;
        to_lisp(env, &store.describe().or_signal(env)?)
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
        handle_of(handle)?
            .store()
            .or_signal(env)?
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
        let store = handle_of(handle)?.store().or_signal(env)?;
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
        let store = handle_of(handle)?.store().or_signal(env)?;
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
        let mailbox = handle_of(mailbox)?.store().or_signal(env)?;
        let writer = handle_of(handle)?.writer().or_signal(env)?;
        writer.deliver_after(mailbox, id_list(ids)?).or_signal(env)
    })
}

/// Save the current buffer's accessible text as the transcript from
/// character AT on (0-based), with PROPS, the printed flat list (START
/// END NAME VALUE ...) of its properties, bounds relative to the text.
/// The text is copied now and written by the store's writer thread.
#[defun(name = "store-transcript-save")]
fn store_transcript_save(env: &Env, handle: Value, at: i64, props: String) -> Result<()> {
    guarded(env, || {
        let writer = handle_of(handle)?.writer().or_signal(env)?;
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
        let writer = handle_of(handle)?.writer().or_signal(env)?;
        writer.consolidate(export.map(PathBuf::from)).or_signal(env)
    })
}

/// Wait up to TIMEOUT-MS for HANDLE's queued saves; return the message
/// of the first save that failed since the last flush, or nil.
#[defun(name = "store-flush")]
fn store_flush(env: &Env, handle: Value, timeout_ms: i64) -> Result<Option<String>> {
    guarded(env, || {
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        handle_of(handle)?.flush(timeout).or_signal(env)
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
        let full = full.is_some_and(|v| v.is_not_nil());
        let loaded = handle_of(handle)?.transcript(full).or_signal(env)?;
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
        let writer = handle_of(handle)?.writer().or_signal(env)?;
        writer.info(list).or_signal(env)
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
        let store = handle_of(handle)?.settled().or_signal(env)?;
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
    guarded(env, || {
        let writer = handle_of(handle)?.writer().or_signal(env)?;
        writer.input(text).or_signal(env)
    })
}

/// The newest LIMIT inputs of HANDLE's session, oldest first.
#[defun(name = "store-inputs")]
fn store_inputs<'e>(env: &'e Env, handle: Value<'e>, limit: i64) -> Result<Value<'e>> {
    guarded(env, || {
        let store = handle_of(handle)?.settled().or_signal(env)?;
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
