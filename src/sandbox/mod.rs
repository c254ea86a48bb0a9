//! Confinement of the commands the model causes.
//!
//! [`probe`] finds out which layers (bubblewrap, Landlock) work on this
//! machine. Policy, the bwrap argv builder and the Landlock helper arrive
//! with the sandbox issue.

pub mod probe;
