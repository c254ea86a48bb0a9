//! The file search and read core shared by mevedel's Emacs module and
//! its remote helper: Glob and Grep with one walk order, ignore rules
//! and result shape, and paged Reads of files of any size.
//!
//! It links neither SQLite nor the Emacs module API (ADR 0019): a
//! binary shipped to another host carries exactly this and no more.
//!
//! - [`walk`]: search roots, naming, ignore rules, pattern checks;
//! - [`grep`] and [`glob`]: the two searches, each with its own sink;
//! - [`plan`]: where one search looks, and the paged Glob and Grep;
//! - [`output`]: `offset`/`head_limit` pages and result notes;
//! - [`budget`]: cancellation and the time limit (partial results);
//! - [`unsaved`]: the text of files with unsaved changes in Emacs;
//! - [`files`] and [`page`]: opening files safely and paging their lines;
//! - [`filter`], [`journal`], [`gzlog`], [`encode`]: what a resource
//!   scope shows and how its files are named;
//! - [`error`]: the error type every mevedel crate above this one uses.

pub mod budget;
pub mod encode;
pub mod error;
pub mod files;
pub mod filter;
pub mod glob;
pub mod grep;
pub mod gzlog;
pub mod journal;
pub mod output;
pub mod page;
pub mod plan;
pub mod unsaved;
pub mod walk;

pub use error::{Error, ErrorKind, Result};
