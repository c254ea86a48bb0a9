//! Managed executions (Bash and Monitor), on top of the process layer
//! (`crate::process`), which owns every child.
//!
//! [`manager`] runs managed executions (Bash and Monitor): [`scheduler`]
//! admits them, [`driver`] runs each one, its output goes to a
//! [`spool`] file, [`pacing`] times progress events, [`monitor`] frames
//! watcher lines, and [`mail`] delivers results nobody waited for.

pub mod driver;
pub mod execution;
pub mod mail;
pub mod manager;
pub mod monitor;
pub mod pacing;
pub mod scheduler;
pub mod spool;

#[cfg(test)]
mod tests;
