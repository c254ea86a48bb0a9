//! `session/update` notifications as plain data.
//!
//! Read leniently from the JSON rather than through the SDK's typed
//! `SessionUpdate`: agents bend the schema (`claude-agent-acp` 0.23.1
//! sends `usage_update` with `"used": null`, which the typed form
//! rejects, losing the whole update), and an update of a kind this
//! version does not know must still reach the caller. Each variant keeps
//! what the view shows; tool calls keep their raw JSON as well, since
//! their content (diffs, terminals, locations) varies by agent.

use serde_json::Value;

/// One `session/update` of a session.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// A piece of the agent's answer.
    Message(Chunk),
    /// A piece of the agent's reasoning.
    Thought(Chunk),
    /// A piece of a user message (a loaded session replays its history).
    UserMessage(Chunk),
    /// A tool call announced or updated (boxed: it is several times the
    /// size of the chunks that make up most updates).
    ToolCall(Box<ToolCall>),
    /// The agent's plan, whole (each update replaces the last).
    Plan(Vec<PlanEntry>),
    /// Context size and cost so far.
    Usage(Usage),
    /// The agent's slash commands, whole.
    Commands(Vec<Command>),
    /// The session's mode changed.
    Mode(String),
    /// Any other kind, as sent.
    Other { kind: String, raw: Value },
}

/// A content block of a message: text, or any other block as sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    Text(String),
    Block(Value),
}

/// A tool call (`tool_call`) or a change to one (`tool_call_update`,
/// where only the changed fields are set).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    /// Whether this updates a call announced before.
    pub is_update: bool,
    pub title: Option<String>,
    /// read, edit, delete, move, search, execute, think, fetch, other.
    pub kind: Option<String>,
    /// pending, in_progress, completed, failed.
    pub status: Option<String>,
    pub raw_input: Option<Value>,
    pub raw_output: Option<Value>,
    /// The whole update, with its content and locations.
    pub raw: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlanEntry {
    pub content: String,
    pub priority: String,
    pub status: String,
}

/// A `usage_update`: tokens in context, the window's size, the cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    pub used: Option<u64>,
    pub size: Option<u64>,
    /// Amount and currency.
    pub cost: Option<(f64, String)>,
}

/// One of the agent's slash commands.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub name: String,
    pub description: String,
    /// What the command's input looks like, when it takes one.
    pub hint: Option<String>,
}

fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

fn chunk(update: &Value) -> Chunk {
    let content = update.get("content").cloned().unwrap_or(Value::Null);
    match (
        content.get("type").and_then(Value::as_str),
        content.get("text").and_then(Value::as_str),
    ) {
        (Some("text"), Some(text)) => Chunk::Text(text.to_string()),
        _ => Chunk::Block(content),
    }
}

/// The session id and update of `session/update` PARAMS; `None` when
/// PARAMS has neither a session id nor an update kind.
pub fn parse(params: &Value) -> Option<(String, Update)> {
    let session = text(params, "sessionId")?;
    let update = params.get("update")?;
    let kind = text(update, "sessionUpdate")?;
    let parsed = match kind.as_str() {
        "agent_message_chunk" => Update::Message(chunk(update)),
        "agent_thought_chunk" => Update::Thought(chunk(update)),
        "user_message_chunk" => Update::UserMessage(chunk(update)),
        "tool_call" | "tool_call_update" => match text(update, "toolCallId") {
            Some(id) => Update::ToolCall(Box::new(ToolCall {
                id,
                is_update: kind == "tool_call_update",
                title: text(update, "title"),
                kind: text(update, "kind"),
                status: text(update, "status"),
                raw_input: update.get("rawInput").cloned(),
                raw_output: update.get("rawOutput").cloned(),
                raw: update.clone(),
            })),
            None => Update::Other {
                kind,
                raw: update.clone(),
            },
        },
        "plan" => Update::Plan(
            update
                .get("entries")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|entry| PlanEntry {
                    content: text(entry, "content").unwrap_or_default(),
                    priority: text(entry, "priority").unwrap_or_default(),
                    status: text(entry, "status").unwrap_or_default(),
                })
                .collect(),
        ),
        "usage_update" => Update::Usage(Usage {
            used: update.get("used").and_then(Value::as_u64),
            size: update.get("size").and_then(Value::as_u64),
            cost: update.get("cost").and_then(|cost| {
                Some((
                    cost.get("amount")?.as_f64()?,
                    text(cost, "currency").unwrap_or_default(),
                ))
            }),
        }),
        "available_commands_update" => Update::Commands(
            update
                .get("availableCommands")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|command| {
                    Some(Command {
                        name: text(command, "name")?,
                        description: text(command, "description").unwrap_or_default(),
                        hint: command.get("input").and_then(|input| text(input, "hint")),
                    })
                })
                .collect(),
        ),
        "current_mode_update" => match text(update, "currentModeId") {
            Some(mode) => Update::Mode(mode),
            None => Update::Other {
                kind,
                raw: update.clone(),
            },
        },
        _ => Update::Other {
            kind,
            raw: update.clone(),
        },
    };
    Some((session, parsed))
}
