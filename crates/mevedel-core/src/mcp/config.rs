//! MCP server configuration in Claude Code's shape, so files written for
//! Claude Code work here unchanged:
//!
//! ```json
//! {"mcpServers": {
//!    "NAME": {"command": "...", "args": [...], "env": {...}, "cwd": "..."},
//!    "WEB":  {"type": "http" | "sse", "url": "...", "headers": {...}}}}
//! ```
//!
//! `"type": "stdio"` may stand beside `command`; a `url` without a type is
//! streamable HTTP. Every string (command, args, env values, cwd, url,
//! header values) expands `${VAR}` and `${VAR:-default}` against an
//! environment the caller gives, so the result never depends on who runs
//! the tests; a variable that is unset and has no default is an error.
//!
//! Where a file comes from decides whether its servers may start:
//! [`Source::User`] (`$XDG_CONFIG_HOME/mevedel/mcp.json`) and
//! [`Source::CommandLine`] (`--mcp-config`, this run only) are trusted;
//! [`Source::Workspace`] (`.mcp.json`) needs the user's approval, which
//! Lisp remembers per [`ConfigFile::sha256`] of the file's text.
//!
//! Merging ([`merge`]) is by server name, a later source replacing an
//! earlier one: user file, then the workspace's `.mcp.json`, then each
//! `--mcp-config` in the order given. Like Claude Code's scopes, the more
//! specific place wins (project over user; an explicit flag over both);
//! a workspace entry that shadows a user server needs approval like any
//! other workspace entry, so shadowing cannot smuggle in a trusted name.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorKind, Result};

/// Where a configuration file comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The user's own file: trusted.
    User,
    /// The workspace's `.mcp.json`: starts nothing until approved.
    Workspace,
    /// A `--mcp-config` file: trusted, for this run.
    CommandLine,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::User => "user",
            Source::Workspace => "workspace",
            Source::CommandLine => "command-line",
        }
    }

    /// Whether servers from this source start only once approved.
    pub fn needs_approval(self) -> bool {
        self == Source::Workspace
    }
}

/// How mevedel talks to a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to (and overriding) the inherited environment.
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP (answers as JSON or as an SSE stream).
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// The legacy HTTP+SSE transport (protocol 2024-11-05).
    Sse {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    /// `stdio`, `http` or `sse`, as in the configuration's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
            Transport::Sse { .. } => "sse",
        }
    }
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    pub source: Source,
    /// The file that declared it.
    pub file: PathBuf,
}

/// A parsed configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub source: Source,
    /// SHA-256 of the file's text, lower-case hex: the key under which
    /// approval of a workspace file is remembered.
    pub sha256: String,
    /// Servers sorted by name (JSON objects have no order to keep).
    pub servers: Vec<ServerConfig>,
}

/// Lower-case hex SHA-256 of TEXT.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn config_error(message: String) -> Error {
    Error::new(ErrorKind::Resource, message)
}

/// Parse TEXT, the contents of the file at PATH from SOURCE, expanding
/// variables from ENV. A syntax error names the file, line and column; a
/// wrong shape names the server and field.
pub fn parse(
    text: &str,
    path: &Path,
    source: Source,
    env: &HashMap<String, String>,
) -> Result<ConfigFile> {
    let shown = path.display();
    let root: Value = serde_json::from_str(text).map_err(|e| {
        config_error(format!(
            "{shown}:{}:{}: invalid JSON: {e}",
            e.line(),
            e.column()
        ))
    })?;
    let Value::Object(root) = root else {
        return Err(config_error(format!(
            "{shown}: the top level must be an object with \"mcpServers\""
        )));
    };
    let servers = match root.get("mcpServers") {
        None => return Err(config_error(format!("{shown}: no \"mcpServers\" object"))),
        Some(Value::Object(servers)) => servers,
        Some(_) => {
            return Err(config_error(format!(
                "{shown}: \"mcpServers\" must be an object of servers by name"
            )));
        }
    };
    // Sorted here: serde_json keeps a file's order when another crate
    // turns on its preserve_order feature (the ACP SDK does).
    let mut entries: Vec<_> = servers.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let servers = entries
        .into_iter()
        .map(|(name, spec)| {
            let at = Field {
                file: path,
                server: name,
                env,
            };
            Ok(ServerConfig {
                name: name.clone(),
                transport: at.transport(spec)?,
                source,
                file: path.to_path_buf(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ConfigFile {
        path: path.to_path_buf(),
        source,
        sha256: sha256_hex(text),
        servers,
    })
}

/// Read and [`parse`] the file at PATH; `Ok(None)` when it does not exist.
pub fn read(
    path: &Path,
    source: Source,
    env: &HashMap<String, String>,
) -> Result<Option<ConfigFile>> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, path, source, env).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(
            ErrorKind::Resource,
            &format!("cannot read {}", path.display()),
            &e,
        )),
    }
}

/// The servers of FILES, in the order given (user, workspace, then each
/// `--mcp-config`), merged by name: a later file's entry replaces an
/// earlier one's. The result keeps first-appearance order.
pub fn merge(files: &[ConfigFile]) -> Vec<ServerConfig> {
    let mut merged: Vec<ServerConfig> = Vec::new();
    for server in files.iter().flat_map(|f| &f.servers) {
        match merged.iter_mut().find(|s| s.name == server.name) {
            Some(slot) => *slot = server.clone(),
            None => merged.push(server.clone()),
        }
    }
    merged
}

/// Where a value sits, for messages and expansion.
struct Field<'a> {
    file: &'a Path,
    server: &'a str,
    env: &'a HashMap<String, String>,
}

impl Field<'_> {
    fn error(&self, field: &str, what: &str) -> Error {
        config_error(format!(
            "{}: server \"{}\": \"{field}\" {what}",
            self.file.display(),
            self.server
        ))
    }

    fn transport(&self, spec: &Value) -> Result<Transport> {
        let Value::Object(spec) = spec else {
            return Err(config_error(format!(
                "{}: server \"{}\" must be an object",
                self.file.display(),
                self.server
            )));
        };
        let kind = match spec.get("type") {
            None => None,
            Some(Value::String(t)) => Some(t.as_str()),
            Some(_) => return Err(self.error("type", "must be a string")),
        };
        let kind = match (kind, spec.contains_key("command"), spec.contains_key("url")) {
            (Some(k), _, _) => k,
            (None, true, _) => "stdio",
            (None, false, true) => "http",
            (None, false, false) => {
                return Err(self.error("command", "is missing (or give \"type\" and \"url\")"));
            }
        };
        match kind {
            "stdio" => Ok(Transport::Stdio {
                command: self.string(spec.get("command"), "command")?,
                args: self.strings(spec.get("args"), "args")?,
                env: self.map(spec.get("env"), "env")?,
                cwd: match spec.get("cwd") {
                    None | Some(Value::Null) => None,
                    v => Some(PathBuf::from(self.string(v, "cwd")?)),
                },
            }),
            "http" | "streamable-http" | "streamableHttp" => Ok(Transport::Http {
                url: self.string(spec.get("url"), "url")?,
                headers: self.map(spec.get("headers"), "headers")?,
            }),
            "sse" => Ok(Transport::Sse {
                url: self.string(spec.get("url"), "url")?,
                headers: self.map(spec.get("headers"), "headers")?,
            }),
            other => Err(self.error(
                "type",
                &format!("is \"{other}\"; expected \"stdio\", \"http\" or \"sse\""),
            )),
        }
    }

    fn string(&self, value: Option<&Value>, field: &str) -> Result<String> {
        match value {
            Some(Value::String(s)) => self.expand(s, field),
            None => Err(self.error(field, "is missing")),
            Some(_) => Err(self.error(field, "must be a string")),
        }
    }

    fn strings(&self, value: Option<&Value>, field: &str) -> Result<Vec<String>> {
        match value {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(s) => self.expand(s, &format!("{field}[{i}]")),
                    _ => Err(self.error(&format!("{field}[{i}]"), "must be a string")),
                })
                .collect(),
            Some(_) => Err(self.error(field, "must be an array of strings")),
        }
    }

    fn map(&self, value: Option<&Value>, field: &str) -> Result<BTreeMap<String, String>> {
        match value {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(items)) => items
                .iter()
                .map(|(k, v)| {
                    let at = format!("{field}.{k}");
                    match v {
                        Value::String(s) => Ok((k.clone(), self.expand(s, &at)?)),
                        _ => Err(self.error(&at, "must be a string")),
                    }
                })
                .collect(),
            Some(_) => Err(self.error(field, "must be an object of strings")),
        }
    }

    fn expand(&self, text: &str, field: &str) -> Result<String> {
        expand(text, self.env).map_err(|var| {
            self.error(
                field,
                &format!("uses ${{{var}}}, which is not set (give a default: ${{{var}:-...}})"),
            )
        })
    }
}

/// TEXT with every `${VAR}` and `${VAR:-default}` replaced from ENV (a
/// variable set to the empty string counts as set, as in Claude Code).
/// Anything else, `$VAR` and an unclosed `${` included, stays as it is.
/// Returns the name of an unset variable that has no default.
pub fn expand(text: &str, env: &HashMap<String, String>) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (env.get(name), default) {
            (Some(value), _) => out.push_str(value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(name.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
