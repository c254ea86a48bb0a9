//! Panics become Lisp errors with their message, never a crash.
//!
//! The `emacs` crate already catches unwinding panics at the module
//! boundary, but reports a `&'static str` payload as an opaque `Any`
//! under `rust-panic`. [`guarded`] catches first and signals
//! `mevedel-core-internal-error` with the message and its location, which
//! a panic hook records because the payload does not carry it.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use emacs::{Env, Result};
use mevedel_core::error::{Error, ErrorKind};

use crate::errors;

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Record each panic's message and location for [`guarded`], and stay
/// silent: a message on stderr would garble a terminal Emacs.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        panic::set_hook(Box::new(|info| {
            let message = payload_text(info.payload());
            let text = match info.location() {
                Some(loc) => format!("{message} (at {}:{})", loc.file(), loc.line()),
                None => message,
            };
            LAST_PANIC.with(|slot| *slot.borrow_mut() = Some(text));
        }));
    });
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Run BODY; turn a panic into `mevedel-core-internal-error`.
pub fn guarded<T>(env: &Env, body: impl FnOnce() -> Result<T>) -> Result<T> {
    match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(payload) => {
            let recorded = LAST_PANIC.with(|slot| slot.borrow_mut().take());
            let text = recorded.unwrap_or_else(|| payload_text(payload.as_ref()));
            errors::signal(
                env,
                Error::new(ErrorKind::Internal, format!("Rust panic: {text}")),
            )
        }
    }
}
