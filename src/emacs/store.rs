//! The session store (`store`) for Lisp: a handle per open
//! `session.sqlite`, and the mailbox.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use emacs::{Env, IntoLisp, Result, Value, defun};

use super::convert::to_lisp;
use super::errors::{self, OrSignal};
use super::guard::guarded;
use crate::error::{Error, ErrorKind};
use crate::store::{NewMessage, Store};

/// What Lisp holds: the store until `store-close` releases it.
pub struct StoreHandle(Mutex<Option<Arc<Store>>>);

pub(super) fn store_of(env: &Env, handle: Value<'_>) -> Result<Arc<Store>> {
    let handle = handle.into_ref::<StoreHandle>()?;
    let slot = handle.0.lock().ok().and_then(|s| s.clone());
    match slot {
        Some(store) => Ok(store),
        None => errors::signal(
            env,
            Error::new(ErrorKind::Store, "The session store is closed"),
        ),
    }
}

/// Open (creating if needed) the session store FILE in WAL mode, with
/// its schema up to date. Returns a handle for the other store functions.
#[defun(user_ptr, name = "store-open")]
fn store_open(env: &Env, file: String) -> Result<StoreHandle> {
    guarded(env, || {
        let store = Store::open(&PathBuf::from(file)).or_signal(env)?;
        Ok(StoreHandle(Mutex::new(Some(Arc::new(store)))))
    })
}

/// Close HANDLE's store; later calls on it signal `mevedel-core-store-error`.
#[defun(name = "store-close")]
fn store_close(env: &Env, handle: Value) -> Result<()> {
    guarded(env, || {
        let handle = handle.into_ref::<StoreHandle>()?;
        if let Ok(mut slot) = handle.0.lock() {
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

/// Queue a mailbox message; return its id. ATTRS, when non-nil, is a
/// list of (NAME VALUE) strings: its opening-tag attributes.
#[defun(name = "store-mailbox-post")]
fn store_mailbox_post(
    env: &Env,
    handle: Value,
    recipient: String,
    kind: String,
    payload: String,
    sender: Option<String>,
    attrs: Option<Value>,
) -> Result<i64> {
    guarded(env, || {
        let store = store_of(env, handle)?;
        let mut pairs = Vec::new();
        let mut rest = attrs;
        while let Some(list) = rest.filter(|v| v.is_not_nil()) {
            let pair: Value = list.car()?;
            pairs.push((pair.car::<String>()?, pair.cdr::<Value>()?.car::<String>()?));
            rest = Some(list.cdr()?);
        }
        store
            .mailbox_post(&NewMessage {
                recipient,
                sender,
                kind,
                payload,
                attrs: pairs,
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

/// Mark the messages with IDS (a list) delivered; return how many were
/// still undelivered.
#[defun(name = "store-mailbox-deliver")]
fn store_mailbox_deliver(env: &Env, handle: Value, ids: Value) -> Result<i64> {
    guarded(env, || {
        let store = store_of(env, handle)?;
        let mut list = Vec::new();
        let mut rest = ids;
        while rest.is_not_nil() {
            list.push(rest.car::<i64>()?);
            rest = rest.cdr()?;
        }
        let n = store.mailbox_mark_delivered(&list).or_signal(env)?;
        Ok(n as i64)
    })
}
