//! Ownership of every child process the module starts, used by both
//! managed executions (`exec`) and the sandbox (`sandbox`).
//!
//! [`owner`] is the lifetime layer (process groups, one spawner thread,
//! parent-death signal, reaping, stop-all at exit) and its one entry
//! point, [`Owner::start`]; [`spawn`] starts a [`Program`] without
//! copying Emacs (`clone` + `execve`); [`pty`] opens pseudo-terminals;
//! [`fds`] keeps descriptors Emacs hands us from leaking into children;
//! [`stderr`] keeps a child's last stderr lines for its failure report;
//! [`bounded`] runs a short helper program to its end within a time.

pub mod bounded;
pub mod fds;
pub mod owner;
pub mod pty;
pub mod spawn;
pub mod stderr;

pub use owner::{ChildInfo, OnExit, Owner, global, group_alive, inner_group, signal};
pub use spawn::Program;
pub use stderr::{SharedLog, StderrTail, describe_exit, open_log};
