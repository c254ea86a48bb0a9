//! What mevedel's sandbox launcher (in core, inside Emacs's process) and
//! the `mevedel-sandbox` helper binary agree on: the helper's command
//! line ([`HelperArgs`]) and the markers it reports on its start
//! descriptor ([`Marker`]), the PIPESTATUS snapshot it relays
//! ([`with_snapshot`]) and the kernel's Landlock ABI both sides ask for
//! ([`landlock_abi`]), and the bubblewrap command line for a resolved
//! [`plan::Plan`] ([`bwrap`]), which the remote helper builds too.
//!
//! A crate of its own so that both sides share one definition while the
//! helper links none of core (SQLite, tree-sitter, tokio): it depends on
//! libc only (ADR 0019).

mod args;
pub mod bwrap;
mod landlock;
pub mod plan;
mod snapshot;

pub use args::{EXIT_EXEC_FAILED, EXIT_REFUSED, HelperArgs, Marker};
pub use landlock::landlock_abi;
pub use snapshot::{SNAPSHOT_FD, parse_snapshot, with_snapshot};
