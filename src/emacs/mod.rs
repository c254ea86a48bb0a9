//! The seam: the only code that uses the `emacs` crate.
//!
//! Each submodule exposes one area's `#[defun]`s, named explicitly so the
//! Lisp name is greppable: every export is `mevedel-core--AREA-VERB`,
//! private, and called only from `lisp/mevedel-core.el`. Functions here
//! convert arguments, call the plain library, and convert results back;
//! they hold no logic of their own.

mod bash;
mod channel;
mod checkpoint;
mod codec;
mod convert;
mod errors;
mod exec;
mod guard;
mod lisp_data;
mod patch;
mod ptc;
mod raw;
mod resource;
mod sandbox;
mod schema;
mod search;
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
