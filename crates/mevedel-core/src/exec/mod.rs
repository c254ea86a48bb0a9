//! Managed executions (Bash and Monitor), on top of the process layer
//! (`crate::process`), which owns every child.
//!
//! Calls go one way: [`manager`] (the registry and the tools'
//! operations) starts a [`driver`] task per execution and retires the
//! record once the task is done; both work on an [`execution`] (the
//! record, its state and the observations built from it). [`scheduler`]
//! admits executions, their output goes to a [`spool`] file, [`pacing`]
//! times progress events, [`monitor`] frames watcher lines, and [`mail`]
//! delivers results nobody waited for. A [`child`] is the command as
//! the driver reaches it: a local process group, or a [`relay`] whose
//! process Lisp runs elsewhere (a remote workspace's host).

pub mod child;
pub mod driver;
pub mod execution;
pub mod mail;
pub mod manager;
pub mod monitor;
pub mod pacing;
pub mod relay;
pub mod scheduler;
pub mod spool;

#[cfg(test)]
mod tests;
