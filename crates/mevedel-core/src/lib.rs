//! Native core of mevedel.
//!
//! Every module here is plain Rust that can be unit-tested without Emacs:
//! this crate does not depend on the `emacs` crate. The seam that exposes
//! it to Lisp is the `mevedel-dyn` crate. This file only declares modules
//! and re-exports.

pub mod acp;
pub mod bash;
pub mod codec;
pub mod datum;
pub mod events;
pub mod exec;
pub mod http;
pub mod mcp;
pub mod media;
pub mod patch;
pub mod process;
pub mod ptc;
pub mod resource;
pub mod runtime;
pub mod sandbox;
pub mod schema;
pub mod search;
pub mod shared;
pub mod store;
pub mod text;
pub mod web;

#[cfg(test)]
mod testdir;

pub use datum::Datum;
pub use error::{Error, ErrorKind, Result};
pub use mevedel_search::error;
