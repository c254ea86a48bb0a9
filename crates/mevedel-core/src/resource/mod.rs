//! Resource addresses: the `scheme://` names the model uses for
//! mevedel-owned content in Read, Glob, Grep and ApplyPatch.
//!
//! - [`encode`]: RFC 3986 percent-encoding of one component;
//! - [`address`]: the grammar, [`Locator`]s and canonical spelling;
//! - [`matrix`]: which operation each form accepts;
//! - [`contain`]: containment below a backing root;
//! - [`context`]: what Lisp tells the resolver about the session;
//! - [`prepare`]: stage one, address to opaque [`Attempt`];
//! - [`read`] and [`page`]: Read's execution and line pages;
//! - [`journal`]: journal entry names and the recall window;
//! - [`gzlog`]: retired execution logs kept as gzip, under logical names;
//! - [`stamp`]: file identities, many in one call.
//!
//! Glob and Grep over attempts live in `crate::search`.

pub mod address;
pub mod contain;
pub mod context;
pub mod matrix;
pub mod prepare;
pub mod read;
pub mod stamp;

pub use mevedel_search::{encode, gzlog, journal, page};

#[cfg(test)]
mod tests;

pub use address::{Address, Locator, parse, parse_locator};
pub use context::Context;
pub use matrix::Operation;
pub use prepare::{Attempt, prepare};
