//! The MCP client: the user's Model Context Protocol servers, configured
//! as for Claude Code, become tools, resources and prompts of a session.
//!
//! Built on the official Rust SDK (`rmcp`):
//! - [`config`]: Claude Code's `mcpServers` files, `${VAR}` expansion,
//!   sources (user, workspace `.mcp.json` needing approval, `--mcp-config`)
//!   and how they merge;
//! - [`names`]: `mcp__SERVER__TOOL` names and the way back;
//! - [`registry`]: a session's servers, their state and every operation
//!   (start, stop, list, read, call with progress and cancellation);
//! - [`connection`]: one live connection: launching a stdio child through
//!   [`crate::process`] or opening a streamable HTTP session, the
//!   handshake, the server's notifications, stderr;
//! - `sse`: the legacy HTTP+SSE transport (2024-11-05), which `rmcp` has
//!   no client for, as an `rmcp` transport;
//! - [`content`]: what servers answer, as plain data with `to_datum`;
//! - [`confine`]: which stdio servers run inside Bash's sandbox, and
//!   their launch through the same launcher;
//! - [`session`]: the registry as the seam drives it, answering request
//!   ids with `reply` events and sending progress and notices as events;
//! - [`serve`]: the other direction, mevedel's own tools served to an ACP
//!   agent over streamable HTTP on 127.0.0.1, each call answered by Lisp.
//!
//! Nothing here touches Emacs: the seam calls [`Registry`] from
//! `runtime`'s tokio runtime and turns notices into events.

pub mod config;
pub mod confine;
pub mod connection;
pub mod content;
pub mod names;
pub mod registry;
pub mod serve;
pub mod session;
mod sse;

#[cfg(test)]
mod serve_tests;
#[cfg(test)]
mod tests;

pub use config::{ConfigFile, ServerConfig, Source, Transport};
pub use confine::{Confinement, Selection};
pub use connection::{Listener, Notice, PROTOCOL_VERSION, Progress, ProgressFn};
pub use content::{
    Content, PromptInfo, PromptResult, ResourceInfo, TemplateInfo, ToolInfo, ToolResult,
};
pub use names::NameIndex;
pub use registry::{CallOptions, Options, Registry, ServerStatus, State};
