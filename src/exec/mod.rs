//! Process execution: every child the module starts is owned here.
//!
//! [`owner`] is the lifetime layer (process groups, parent-death signal,
//! reaping, stop-all at exit) that every spawner builds on. On top of it,
//! [`manager`] runs managed executions (Bash and Monitor): [`scheduler`]
//! admits them, [`driver`] runs each one, its output goes to a
//! [`spool`] file, [`pacing`] times progress events, [`monitor`] frames
//! watcher lines, and [`mail`] delivers results nobody waited for.

pub mod driver;
pub mod execution;
pub mod mail;
pub mod manager;
pub mod monitor;
pub mod owner;
pub mod pacing;
pub mod pty;
pub mod scheduler;
pub mod spawn;
pub mod spool;

#[cfg(test)]
mod tests;
