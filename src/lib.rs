//! Native core of mevedel.
//!
//! Every module here is plain Rust that can be unit-tested without Emacs,
//! except [`emacs`](crate::emacs), the only place that talks to the Emacs
//! module API. This file only declares modules and re-exports.

pub mod bash;
pub mod codec;
pub mod datum;
pub mod error;
pub mod events;
pub mod exec;
pub mod patch;
pub mod process;
pub mod ptc;
pub mod resource;
pub mod runtime;
pub mod sandbox;
pub mod schema;
pub mod search;
pub mod store;
pub mod text;
pub mod web;

mod emacs;

pub use datum::Datum;
pub use error::{Error, ErrorKind, Result};

/// Version of this module, compared by `lisp/mevedel-core.el` before use.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
