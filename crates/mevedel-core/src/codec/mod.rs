//! Render-data blocks: scanning, the safe printed-Lisp reader and
//! printer, authorisation and encoding.
//!
//! `reader` reads printed Lisp data without evaluating anything,
//! `print` writes it back, and `block` finds and encodes the hidden
//! blocks that carry render-data beside tool results.

pub mod block;
pub mod print;
pub mod reader;

pub use block::{Block, CLOSE, OPEN, OWNER_KEY, Owner, authorised, decode, encode, scan, scrubbed};
pub use reader::{MAX_DEPTH, ReadError, Sexp};

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
