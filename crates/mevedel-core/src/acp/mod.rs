//! The ACP client: mevedel drives an Agent Client Protocol agent (Claude
//! Code through `claude-agent-acp`, Codex, Gemini) as a provider.
//!
//! Built on the official Rust SDK (`agent-client-protocol`), protocol
//! version 1, over the agent's stdio:
//! - [`config`]: what to start ([`AgentConfig`]), the limits
//!   ([`Options`]) and the agent's environment (`IS_SANDBOX=1` as root);
//! - [`child`]: the agent's process, started through [`crate::process`]
//!   in its own process group, its stderr kept (the last lines and a log),
//!   and stopping the whole group and its descendants;
//! - [`connection`]: one live agent: `initialize` (advertising fs and
//!   terminal), `session/new` (with Claude Code's `disallowedTools`),
//!   `session/load`, `session/prompt`, `session/cancel`, and stop
//!   (cancel, then kill the group);
//! - [`delegate`]: the agent's requests to the client (files, terminals,
//!   permissions), handed to a [`Delegate`] that answers them, now or
//!   later, from any thread;
//! - [`update`]: `session/update` notifications as plain data;
//! - [`session`]: the agent as Lisp drives it through the seam: replies,
//!   and updates, requests and exits as events;
//! - [`terminal`]: the agent's terminals as managed executions.
//!
//! What it does not do: decide anything. Which tools to disallow, what a
//! permission answer is, how a file read sees unsaved buffers, where a
//! terminal runs: all of that belongs to the caller, through
//! [`SessionOptions`] and the [`Delegate`] (Lisp's, through [`session`]).
//! Nothing here touches Emacs.

pub mod child;
pub mod config;
pub mod connection;
pub mod delegate;
pub mod session;
pub mod terminal;
pub mod update;

#[cfg(test)]
mod tests;

pub use config::{AgentConfig, Options};
pub use connection::{
    AgentInfo, Connection, Event, Listener, SessionInfo, SessionOptions, TokenUsage, TurnEnd,
};
pub use delegate::{Delegate, Reply, Request};
pub use update::{Chunk, Command, PlanEntry, ToolCall, Update, Usage};

/// The ACP SDK's protocol v1 message types, for callers building prompts
/// and answering requests.
pub use agent_client_protocol::v1::schema;
