//! MCP tool names as the model and permission rules see them:
//! `mcp__SERVER__TOOL`, with Claude Code's rule that every character
//! other than an ASCII letter, digit, `_` or `-` becomes `_`, so rules
//! written for Claude Code (`mcp__github__create_issue`, `mcp__github`)
//! carry over.
//!
//! The mapping loses information (`a.b` and `a_b` both become `a_b`, and
//! names may themselves contain `__`), so going back from a name to its
//! server and tool is a lookup in a [`NameIndex`] of the tools actually
//! listed, never a split of the string.

use std::collections::HashMap;

/// The prefix of every MCP tool name.
pub const PREFIX: &str = "mcp__";

/// NAME with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn normalize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `mcp__SERVER__TOOL`, both parts normalized; a prompt's slash command
/// is named the same way (`mcp__SERVER__PROMPT`).
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{PREFIX}{}__{}", normalize(server), normalize(tool))
}

/// `mcp__SERVER`: the rule name that covers every tool of SERVER; also
/// the prefix (before `__`) of each of its tool names.
pub fn server_name(server: &str) -> String {
    format!("{PREFIX}{}", normalize(server))
}

/// Normalized names back to the (server, tool) pairs they came from.
#[derive(Debug, Default, Clone)]
pub struct NameIndex {
    by_name: HashMap<String, (String, String)>,
}

impl NameIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record SERVER's TOOL and return its name. When another pair
    /// already has that name, the first keeps it and this returns `Err`
    /// with the name, so the caller can report the clash.
    pub fn insert(&mut self, server: &str, tool: &str) -> Result<String, String> {
        let name = tool_name(server, tool);
        match self.by_name.get(&name) {
            Some((s, t)) if s == server && t == tool => Ok(name),
            Some(_) => Err(name),
            None => {
                self.by_name
                    .insert(name.clone(), (server.to_string(), tool.to_string()));
                Ok(name)
            }
        }
    }

    /// Forget every tool of SERVER (before recording its new list).
    pub fn remove_server(&mut self, server: &str) {
        self.by_name.retain(|_, (s, _)| s != server);
    }

    /// The (server, tool) that NAME stands for.
    pub fn lookup(&self, name: &str) -> Option<(&str, &str)> {
        self.by_name
            .get(name)
            .map(|(s, t)| (s.as_str(), t.as_str()))
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}
