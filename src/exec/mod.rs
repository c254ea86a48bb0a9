//! Process execution: every child the module starts is owned here.
//!
//! [`owner`] is the lifetime layer (process groups, parent-death signal,
//! reaping, stop-all at exit) that every later spawner builds on.

pub mod owner;
