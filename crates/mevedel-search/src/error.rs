//! One error type for the library, tagged with the area it comes from.
//!
//! The area picks the Lisp error symbol (`mevedel-core-<area>-error`) when
//! the error crosses into Emacs, so Lisp callers can `condition-case` on
//! exactly the failures they know how to handle.

use std::fmt;

/// The area an error belongs to; one Lisp error symbol per variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Schema,
    Resource,
    Search,
    Exec,
    Sandbox,
    Store,
    Patch,
    Internal,
}

/// A library error: an area and a message meant for people (and models).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl ErrorKind {
    /// The area's name, as in the Lisp symbol `mevedel-core-<area>-error`.
    pub fn area(self) -> &'static str {
        match self {
            ErrorKind::Schema => "schema",
            ErrorKind::Resource => "resource",
            ErrorKind::Search => "search",
            ErrorKind::Exec => "exec",
            ErrorKind::Sandbox => "sandbox",
            ErrorKind::Store => "store",
            ErrorKind::Patch => "patch",
            ErrorKind::Internal => "internal",
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// A panic caught on a worker thread, with what it was doing.
    pub fn from_panic(doing: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Error::new(ErrorKind::Internal, format!("{doing} panicked: {text}"))
    }

    /// An I/O failure, with what we were doing when it happened.
    pub fn io(kind: ErrorKind, doing: &str, err: &std::io::Error) -> Self {
        Error::new(kind, format!("{doing}: {err}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
