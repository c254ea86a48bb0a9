//! What servers answer, as plain data: tools with their full input
//! schemas, resources, templates, prompts and tool results.
//!
//! Each is read from the SDK's value through its protocol JSON (the
//! spec's field names), not the SDK's Rust types, so an SDK upgrade that
//! reshapes its structs cannot change what Lisp receives. Every type has
//! a `to_datum` for the seam; JSON (schemas, structured content) travels
//! as a JSON string that Lisp parses only when it needs it.

use serde::Serialize;
use serde_json::Value;

use crate::datum::Datum;

fn json_of(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn text_at(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

fn count(n: usize) -> Datum {
    Datum::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// One tool a server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    pub server: String,
    /// The server's own name for it.
    pub name: String,
    /// `mcp__SERVER__TOOL`.
    pub full_name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// The complete input JSON Schema, as the server sent it.
    pub input_schema: Value,
    /// `readOnlyHint` and the like, when given.
    pub annotations: Option<Value>,
}

impl ToolInfo {
    pub(crate) fn from_sdk(server: &str, full_name: String, tool: &rmcp::model::Tool) -> Self {
        let json = json_of(tool);
        ToolInfo {
            server: server.to_string(),
            name: tool.name.to_string(),
            full_name,
            title: text_at(&json, "title"),
            description: text_at(&json, "description"),
            input_schema: json.get("inputSchema").cloned().unwrap_or(Value::Null),
            annotations: json.get("annotations").cloned(),
        }
    }

    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            ("server", Datum::str(&self.server)),
            ("name", Datum::str(&self.name)),
            ("full-name", Datum::str(&self.full_name)),
            ("title", Datum::opt_str(self.title.clone())),
            ("description", Datum::opt_str(self.description.clone())),
            ("input-schema", Datum::Str(self.input_schema.to_string())),
            (
                "annotations",
                Datum::opt_str(self.annotations.as_ref().map(Value::to_string)),
            ),
        ])
    }
}

/// A resource a server lists.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

impl ResourceInfo {
    pub(crate) fn from_json(json: &Value) -> Self {
        ResourceInfo {
            uri: text_at(json, "uri").unwrap_or_default(),
            name: text_at(json, "name").unwrap_or_default(),
            title: text_at(json, "title"),
            description: text_at(json, "description"),
            mime_type: text_at(json, "mimeType"),
        }
    }

    pub(crate) fn from_sdk(resource: &impl Serialize) -> Self {
        Self::from_json(&json_of(resource))
    }

    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            ("uri", Datum::str(&self.uri)),
            ("name", Datum::str(&self.name)),
            ("title", Datum::opt_str(self.title.clone())),
            ("description", Datum::opt_str(self.description.clone())),
            ("mime-type", Datum::opt_str(self.mime_type.clone())),
        ])
    }
}

/// A resource template (`uriTemplate`, RFC 6570).
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateInfo {
    pub uri_template: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

impl TemplateInfo {
    pub(crate) fn from_sdk(template: &impl Serialize) -> Self {
        let json = json_of(template);
        TemplateInfo {
            uri_template: text_at(&json, "uriTemplate").unwrap_or_default(),
            name: text_at(&json, "name").unwrap_or_default(),
            description: text_at(&json, "description"),
            mime_type: text_at(&json, "mimeType"),
        }
    }

    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            ("uri-template", Datum::str(&self.uri_template)),
            ("name", Datum::str(&self.name)),
            ("description", Datum::opt_str(self.description.clone())),
            ("mime-type", Datum::opt_str(self.mime_type.clone())),
        ])
    }
}

/// A prompt a server offers: the composer's slash command `command`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptInfo {
    pub server: String,
    /// The server's own name for it.
    pub name: String,
    /// `mcp__SERVER__PROMPT`, named like tools (Claude Code's commands).
    pub command: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// (name, description, required) of each argument.
    pub arguments: Vec<(String, Option<String>, bool)>,
}

impl PromptInfo {
    pub(crate) fn from_sdk(server: &str, prompt: &impl Serialize) -> Self {
        let json = json_of(prompt);
        let name = text_at(&json, "name").unwrap_or_default();
        let arguments = json
            .get("arguments")
            .and_then(Value::as_array)
            .map(|args| {
                args.iter()
                    .map(|a| {
                        (
                            text_at(a, "name").unwrap_or_default(),
                            text_at(a, "description"),
                            a.get("required").and_then(Value::as_bool).unwrap_or(false),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        PromptInfo {
            server: server.to_string(),
            command: super::names::tool_name(server, &name),
            name,
            title: text_at(&json, "title"),
            description: text_at(&json, "description"),
            arguments,
        }
    }

    pub fn to_datum(&self) -> Datum {
        let args = self
            .arguments
            .iter()
            .map(|(name, description, required)| {
                Datum::plist([
                    ("name", Datum::str(name)),
                    ("description", Datum::opt_str(description.clone())),
                    ("required", Datum::bool(*required)),
                ])
            })
            .collect();
        Datum::plist([
            ("server", Datum::str(&self.server)),
            ("name", Datum::str(&self.name)),
            ("command", Datum::str(&self.command)),
            ("title", Datum::opt_str(self.title.clone())),
            ("description", Datum::opt_str(self.description.clone())),
            ("arguments", Datum::List(args)),
        ])
    }
}

/// One block of a tool result, prompt message or resource read.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    /// Base64 data and its MIME type.
    Image {
        data: String,
        mime_type: String,
    },
    Audio {
        data: String,
        mime_type: String,
    },
    /// Text of an embedded or read resource.
    ResourceText {
        uri: String,
        mime_type: Option<String>,
        text: String,
    },
    /// Binary contents of an embedded or read resource, base64.
    ResourceBlob {
        uri: String,
        mime_type: Option<String>,
        blob: String,
    },
    /// A link to a resource the caller may read later.
    ResourceLink(ResourceInfo),
    /// A block type this client does not know, as its JSON.
    Other(Value),
}

impl Content {
    /// A content block of the protocol (`{"type": "text", ...}`).
    pub(crate) fn from_json(block: &Value) -> Content {
        let mime = || text_at(block, "mimeType").unwrap_or_default();
        match block.get("type").and_then(Value::as_str) {
            Some("text") => Content::Text(text_at(block, "text").unwrap_or_default()),
            Some("image") => Content::Image {
                data: text_at(block, "data").unwrap_or_default(),
                mime_type: mime(),
            },
            Some("audio") => Content::Audio {
                data: text_at(block, "data").unwrap_or_default(),
                mime_type: mime(),
            },
            Some("resource") => block
                .get("resource")
                .map_or(Content::Other(block.clone()), Content::from_resource),
            Some("resource_link") => Content::ResourceLink(ResourceInfo::from_json(block)),
            _ => Content::Other(block.clone()),
        }
    }

    /// Resource contents (`{"uri", "mimeType", "text" | "blob"}`).
    pub(crate) fn from_resource(contents: &Value) -> Content {
        let uri = text_at(contents, "uri").unwrap_or_default();
        let mime_type = text_at(contents, "mimeType");
        match (text_at(contents, "text"), text_at(contents, "blob")) {
            (Some(text), _) => Content::ResourceText {
                uri,
                mime_type,
                text,
            },
            (None, Some(blob)) => Content::ResourceBlob {
                uri,
                mime_type,
                blob,
            },
            (None, None) => Content::Other(contents.clone()),
        }
    }

    pub fn to_datum(&self) -> Datum {
        let kind = |k: &str| ("type", Datum::Symbol(k.into()));
        match self {
            Content::Text(text) => Datum::plist([kind("text"), ("text", Datum::str(text))]),
            Content::Image { data, mime_type } => Datum::plist([
                kind("image"),
                ("data", Datum::str(data)),
                ("mime-type", Datum::str(mime_type)),
            ]),
            Content::Audio { data, mime_type } => Datum::plist([
                kind("audio"),
                ("data", Datum::str(data)),
                ("mime-type", Datum::str(mime_type)),
            ]),
            Content::ResourceText {
                uri,
                mime_type,
                text,
            } => Datum::plist([
                kind("resource"),
                ("uri", Datum::str(uri)),
                ("mime-type", Datum::opt_str(mime_type.clone())),
                ("text", Datum::str(text)),
            ]),
            Content::ResourceBlob {
                uri,
                mime_type,
                blob,
            } => Datum::plist([
                kind("resource"),
                ("uri", Datum::str(uri)),
                ("mime-type", Datum::opt_str(mime_type.clone())),
                ("blob", Datum::str(blob)),
            ]),
            Content::ResourceLink(info) => {
                Datum::plist([kind("resource-link"), ("resource", info.to_datum())])
            }
            Content::Other(json) => {
                Datum::plist([kind("other"), ("json", Datum::Str(json.to_string()))])
            }
        }
    }
}

fn blocks(json: &Value, key: &str, each: fn(&Value) -> Content) -> Vec<Content> {
    json.get(key)
        .and_then(Value::as_array)
        .map(|items| items.iter().map(each).collect())
        .unwrap_or_default()
}

/// What a tool call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub content: Vec<Content>,
    /// `structuredContent`, when the tool gave one.
    pub structured: Option<Value>,
    /// The tool's own failure (`isError`), as opposed to a protocol error.
    pub is_error: bool,
}

impl ToolResult {
    pub(crate) fn from_sdk(result: &rmcp::model::CallToolResult) -> Self {
        let json = json_of(result);
        ToolResult {
            content: blocks(&json, "content", Content::from_json),
            structured: json.get("structuredContent").cloned(),
            is_error: json
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }
    }

    /// The text blocks joined by newlines (what most tools answer).
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            (
                "content",
                Datum::List(self.content.iter().map(Content::to_datum).collect()),
            ),
            (
                "structured",
                Datum::opt_str(self.structured.as_ref().map(Value::to_string)),
            ),
            ("is-error", Datum::bool(self.is_error)),
        ])
    }
}

/// What reading a resource returned: one entry per contents item.
pub(crate) fn resource_contents(result: &impl Serialize) -> Vec<Content> {
    blocks(&json_of(result), "contents", Content::from_resource)
}

/// A prompt filled in with its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptResult {
    pub description: Option<String>,
    /// (role, content) of each message.
    pub messages: Vec<(String, Content)>,
}

impl PromptResult {
    pub(crate) fn from_sdk(result: &impl Serialize) -> Self {
        let json = json_of(result);
        let messages = json
            .get("messages")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|m| {
                        (
                            text_at(m, "role").unwrap_or_default(),
                            m.get("content")
                                .map_or(Content::Other(Value::Null), Content::from_json),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        PromptResult {
            description: text_at(&json, "description"),
            messages,
        }
    }

    pub fn to_datum(&self) -> Datum {
        let messages = self
            .messages
            .iter()
            .map(|(role, content)| {
                Datum::plist([("role", Datum::str(role)), ("content", content.to_datum())])
            })
            .collect();
        Datum::plist([
            ("description", Datum::opt_str(self.description.clone())),
            ("messages", Datum::List(messages)),
        ])
    }
}

pub(crate) fn datum_list<T>(items: &[T], each: fn(&T) -> Datum) -> Datum {
    Datum::List(items.iter().map(each).collect())
}

pub(crate) fn datum_count(n: usize) -> Datum {
    count(n)
}
