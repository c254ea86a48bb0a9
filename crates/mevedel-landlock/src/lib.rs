//! The Landlock rules a confined command runs under, applied by the
//! `mevedel-sandbox` helper locally and by `mevedel-remote` on a remote
//! host, so both enforce one policy, described by one
//! [`mevedel_sandbox_protocol::HelperArgs`].
//!
//! Only those helper binaries depend on this crate, never one loaded
//! into Emacs: Emacs's own process cannot be restricted by it.

mod rules;

pub use rules::{SCOPE_ABI, probe, restrict, scope_child};
