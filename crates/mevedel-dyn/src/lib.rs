//! The seam: mevedel's Emacs module. This is the only crate that depends
//! on the `emacs` crate, so code anywhere else that tried to touch Emacs
//! would not compile.
//!
//! Each submodule exposes one area's `#[defun]`s, named explicitly so the
//! Lisp name is greppable: every export is `mevedel-core--AREA-VERB`,
//! private, and called only from `lisp/mevedel-core.el`. Functions here
//! convert arguments, call the plain library (`mevedel-core`), and convert results back;
//! they hold no logic of their own.

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
mod lisp_data;
mod patch;
mod ptc;
mod raw;
mod resource;
mod sandbox;
mod schema;
mod selftest;
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
