//! Confinement of the commands the model causes.
//!
//! [`policy`] decides the boundary and resolves what a command may touch;
//! [`scan`] finds the `.git` and dir-locals entries that stay read-only
//! inside writable roots; [`bwrap`] builds the bubblewrap command line;
//! [`helper_args`] is the command line of the `mevedel-sandbox` helper
//! binary, which applies Landlock and the Unix-socket filter
//! (`landlock.rs`, `seccomp.rs`, compiled into the helper only) and
//! reports its start; [`launch`] puts them together and runs a command through the
//! process owner; [`probe`] finds out which layers work here and
//! [`facts`] holds what it found.

pub mod bwrap;
pub mod facts;
pub mod helper_args;
pub mod launch;
pub mod policy;
pub mod probe;
pub mod scan;

#[cfg(test)]
mod testdir;
