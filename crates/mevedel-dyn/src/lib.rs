//! The seam: mevedel's Emacs module. This is the only crate that depends
//! on the `emacs` crate, so code anywhere else that tried to touch Emacs
//! would not compile.
//!
//! Each submodule exposes one area's `#[defun]`s, named explicitly so the
//! Lisp name is greppable: every export is `mevedel-core--AREA-VERB`,
//! private, and called only from `lisp/mevedel-core.el`. Functions here
//! convert arguments, make one call into the plain library
//! (`mevedel-core`), and convert the result back; they hold no logic of
//! their own (no branching on meaning, no IO, no caching, no threads).
//!
//! # How arguments cross (ADR 0020)
//!
//! A defun takes its *subject* first: the handle or user pointer it acts
//! on, the request id its `reply` event answers, or the text it reads.
//! After the subject it takes either
//!
//! - at most three further arguments, each a single value: a string,
//!   number, flag, handle, or one list of like items (file names, ids,
//!   `(START . END)` spans, `(KEY . VALUE)` pairs, fixed-shape records
//!   such as a skill's `(NAME SOURCE-KEY ROOT ORIGIN PLUGIN)`); or
//! - exactly one keyword plist `(:key VALUE ...)`, decoded by
//!   [`args::Plist`] and nothing else: typed getters, nil counting as
//!   absent, unknown keys rejected, and errors that name the function
//!   and the key (`mevedel-core-argument-error`, a `wrong-type-argument`).
//!   A request core states as a serde type (the execution spec, the
//!   sandbox request) is decoded from the plist by
//!   [`args::Plist::deserialize`], so its shape is stated once.
//!
//! Anything with more than three arguments after its subject, optional
//! parts, or a list standing for several arguments takes a plist.
//! `bash-permission` (source, directory, root) stays positional: it is
//! the hottest call and fits the first form. Text crosses as text where
//! the data is text by nature: JSON where it *is* JSON (the model's tool
//! arguments for `schema-check`, tool descriptors carrying JSON Schema
//! for `schema-compile`, a ToolCall request's arguments), printed Lisp
//! where Lisp printed it (render-data payloads, transcript properties).
//! No other JSON text crosses.

mod acp;
mod args;
mod bash;
mod channel;
mod checkpoint;
mod codec;
mod convert;
mod errors;
mod exec;
mod files;
mod guard;
mod http;
mod lisp_data;
mod mcp;
mod patch;
mod ptc;
mod raw;
mod resource;
mod sandbox;
mod schema;
mod selftest;
mod shared;
mod store;
mod text;
mod web;

use emacs::{Env, Result};

emacs::plugin_is_GPL_compatible!();

#[emacs::module(
    name = "mevedel-dyn",
    defun_prefix = "mevedel-core",
    separator = "--",
    mod_in_name = false
)]
fn init(_env: &Env) -> Result<()> {
    guard::install_panic_hook();
    Ok(())
}
