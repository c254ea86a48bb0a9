//! Confinement of the commands the model causes.
//!
//! [`policy`] decides the boundary and resolves what a command may touch;
//! [`scan`] finds the `.git` and dir-locals entries that stay read-only
//! inside writable roots; [`bwrap`] builds the bubblewrap command line;
//! the `mevedel-sandbox` helper binary (a crate of its own, whose command
//! line is in `mevedel-sandbox-protocol`) applies Landlock and the
//! Unix-socket filter and reports its start; [`launch`] puts them together
//! and runs a command through the process owner; [`probe`] finds out which
//! layers work here and [`facts`] holds what it found. This policy stays
//! here; only the enforcement runs in the helper, so the code loaded into
//! Emacs cannot restrict Emacs's own process.

pub mod facts;
pub mod launch;
pub mod policy;
pub mod probe;
pub mod scan;

pub use mevedel_sandbox_protocol::bwrap;
