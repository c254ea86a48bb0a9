//! The address grammar: `scheme://` strings to [`Locator`]s and back.
//!
//! A locator is the canonical identity of a resource; its
//! [`canonical`](Locator::canonical) spelling re-parses to an equal
//! locator, so canonicalisation is idempotent. Strings that do not start
//! with `scheme://` are ordinary paths and parse to `None`.

use super::encode::{self, ComponentError};
use crate::error::{Error, ErrorKind};

/// A locator plus the address text the model wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub authored: String,
    pub locator: Locator,
}

/// The canonical identity of an addressed resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Locator {
    Work(WorkRef),
    /// Handle components; empty is the artifact listing.
    Artifact(Vec<String>),
    Skill(SkillRef),
    /// Agent path below `root` (empty: listing) and an optional JSON
    /// pointer fragment.
    Agent {
        path: Vec<String>,
        pointer: Option<Pointer>,
    },
    History(HistoryRef),
    Memory(MemoryRef),
    Mcp {
        server: Option<String>,
        uri: Option<String>,
    },
    Shared(SharedRef),
    /// Path below the packaged `docs/` tree; empty is the listing.
    Docs(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WorkRef {
    /// Bare `work://`: both scopes.
    Both,
    /// A session `local/` descendant (never empty).
    Local(Vec<String>),
    /// `work://shared[/PATH]`: the workspace's shared files.
    Shared(Vec<String>),
}

/// Where a skill's files come from, as named by the readable aliases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    LocalMevedel,
    LocalAgents,
    GlobalMevedel,
    GlobalAgents,
    Bundled,
    Managed,
    Plugin,
}

impl Origin {
    pub const ALL: [Origin; 7] = [
        Origin::LocalMevedel,
        Origin::LocalAgents,
        Origin::GlobalMevedel,
        Origin::GlobalAgents,
        Origin::Bundled,
        Origin::Managed,
        Origin::Plugin,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Origin::LocalMevedel => "local-mevedel",
            Origin::LocalAgents => "local-agents",
            Origin::GlobalMevedel => "global-mevedel",
            Origin::GlobalAgents => "global-agents",
            Origin::Bundled => "bundled",
            Origin::Managed => "managed",
            Origin::Plugin => "plugin",
        }
    }

    pub fn from_name(name: &str) -> Option<Origin> {
        Origin::ALL.into_iter().find(|o| o.name() == name)
    }

    /// The origin NAME names, or an error saying it is unknown.
    pub fn parse(name: &str) -> Result<Origin, Error> {
        Origin::from_name(name)
            .ok_or_else(|| Error::new(ErrorKind::Resource, format!("unknown origin `{name}`")))
    }

    /// The four kinds that also name memory roots.
    pub fn is_memory_kind(self) -> bool {
        matches!(
            self,
            Origin::LocalMevedel
                | Origin::LocalAgents
                | Origin::GlobalMevedel
                | Origin::GlobalAgents
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SkillRef {
    Listing,
    /// `skill://NAME@DIGEST[/PATH]`; the digest is lowercase hex.
    Exact {
        name: String,
        digest: String,
        path: Vec<String>,
    },
    /// `skill://ORIGIN/SKILL[/PATH]` or `skill://plugin/PLUGIN/SKILL[/PATH]`.
    Alias {
        origin: Origin,
        plugin: Option<String>,
        skill: String,
        path: Vec<String>,
    },
}

/// An RFC 6901 pointer as its decoded reference tokens; no tokens
/// selects the whole JSON value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pointer(pub Vec<String>);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HistoryRef {
    Listing,
    /// `history://root[/PATH]`.
    Root(Vec<String>),
    Saved {
        session: Option<String>,
        segment: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MemoryKey {
    Readable(Origin),
    /// Full lowercase SHA-256 hex digest of the root.
    Digest(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MemoryRef {
    /// `memory://root`: the union of configured roots.
    Union,
    Keyed {
        key: MemoryKey,
        path: Vec<String>,
    },
    /// `memory://journal/[FILE]`.
    Journal(Option<String>),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SharedPart {
    View,
    Discussions,
    History,
    Element(String),
    Image(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SharedRef {
    Listing,
    Item {
        id: String,
        part: Option<SharedPart>,
    },
    Library {
        name: Option<String>,
        sheet: bool,
    },
}

/// The scheme names, in the order the manual lists them.
pub const SCHEMES: [&str; 9] = [
    "work", "artifact", "skill", "agent", "history", "memory", "mcp", "shared", "mevedel",
];

fn invalid(authored: &str, reason: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Resource,
        format!("Invalid resource address `{authored}`: {reason}"),
    )
}

/// True when TEXT has the shape `scheme://...` with an RFC 3986 scheme.
fn split_scheme(text: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = text.split_once("://")?;
    let mut bytes = scheme.bytes();
    let first = bytes.next()?;
    if !first.is_ascii_alphabetic() {
        return None;
    }
    if bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')) {
        Some((scheme, rest))
    } else {
        None
    }
}

/// Parse TEXT. `Ok(None)`: an ordinary path (no `scheme://` prefix).
pub fn parse(text: &str) -> Result<Option<Address>, Error> {
    Ok(parse_locator(text)?.map(|locator| Address {
        authored: text.to_string(),
        locator,
    }))
}

/// The locator TEXT names, or `None` for an ordinary path; like
/// [`parse`] without keeping a copy of the authored text.
pub fn parse_locator(text: &str) -> Result<Option<Locator>, Error> {
    let Some((scheme, rest)) = split_scheme(text) else {
        return Ok(None);
    };
    let scheme: std::borrow::Cow<'_, str> = if scheme.bytes().any(|b| b.is_ascii_uppercase()) {
        scheme.to_ascii_lowercase().into()
    } else {
        scheme.into()
    };
    Parser { authored: text }.locator(&scheme, rest).map(Some)
}

/// Parse TEXT, which must be a resource address.
pub fn parse_address(text: &str) -> Result<Address, Error> {
    parse(text)?.ok_or_else(|| invalid(text, "it has no `scheme://` prefix"))
}

struct Parser<'a> {
    authored: &'a str,
}

fn id_shaped(text: &str) -> bool {
    (1..=80).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_digest(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_segment_name(text: &str) -> bool {
    let Some(digits) = text
        .strip_prefix("segment-")
        .and_then(|t| t.strip_suffix(".chat.org"))
    else {
        return false;
    };
    digits.len() == 4 && digits.bytes().all(|b| b.is_ascii_digit())
}

impl Parser<'_> {
    fn err(&self, reason: impl std::fmt::Display) -> Error {
        invalid(self.authored, reason)
    }

    fn component_err(&self, index: usize, e: &ComponentError) -> Error {
        self.err(format!("{} in component {}", e.reason(), index + 1))
    }

    /// Split REST on literal slashes, after dropping one trailing slash.
    fn raw_components<'r>(&self, rest: &'r str) -> Result<Vec<&'r str>, Error> {
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return Ok(Vec::new());
        }
        if rest.starts_with('/') {
            return Err(self.err("an absolute component (the path must not start with `/`)"));
        }
        Ok(rest.split('/').collect())
    }

    fn decode_all(&self, raw: &[&str], offset: usize) -> Result<Vec<String>, Error> {
        raw.iter()
            .enumerate()
            .map(|(i, r)| {
                encode::decode_component(r).map_err(|e| self.component_err(i + offset, &e))
            })
            .collect()
    }

    fn locator(&self, scheme: &str, rest: &str) -> Result<Locator, Error> {
        if scheme == "agent" {
            return self.agent(rest);
        }
        let raw = self.raw_components(rest)?;
        match scheme {
            "work" => self.work(&raw),
            "artifact" => Ok(Locator::Artifact(self.decode_all(&raw, 0)?)),
            "skill" => self.skill(&raw),
            "history" => self.history(&raw),
            "memory" => self.memory(&raw),
            "mcp" => self.mcp(&raw),
            "shared" => self.shared(&raw),
            "mevedel" => Ok(Locator::Docs(self.decode_all(&raw, 0)?)),
            _ => Err(self.err(format!(
                "unknown scheme `{scheme}://` (resource schemes: {})",
                SCHEMES.map(|s| format!("{s}://")).join(" ")
            ))),
        }
    }

    fn work(&self, raw: &[&str]) -> Result<Locator, Error> {
        let mut parts = self.decode_all(raw, 0)?;
        if parts.is_empty() {
            return Ok(Locator::Work(WorkRef::Both));
        }
        if parts[0] == "shared" {
            parts.remove(0);
            return Ok(Locator::Work(WorkRef::Shared(parts)));
        }
        Ok(Locator::Work(WorkRef::Local(parts)))
    }

    fn skill(&self, raw: &[&str]) -> Result<Locator, Error> {
        let Some(first) = raw.first() else {
            return Ok(Locator::Skill(SkillRef::Listing));
        };
        if let Some((name_raw, key_raw)) = first.rsplit_once('@') {
            let name = encode::decode_component(name_raw).map_err(|e| self.component_err(0, &e))?;
            let key = encode::decode_raw(key_raw).map_err(|e| self.component_err(0, &e))?;
            if !is_digest(&key) {
                return Err(self
                    .err("the source key after `@` must be the full 64-digit SHA-256 hex digest"));
            }
            let path = self.decode_all(&raw[1..], 1)?;
            return Ok(Locator::Skill(SkillRef::Exact {
                name,
                digest: key.to_ascii_lowercase(),
                path,
            }));
        }
        let parts = self.decode_all(raw, 0)?;
        let Some(origin) = Origin::from_name(&parts[0]) else {
            return Err(self.err(format!(
                "unknown skill origin `{}`; use skill://NAME@SOURCE-KEY or an origin alias such as \
                 skill://local-mevedel/SKILL (Read skill:// lists them)",
                parts[0]
            )));
        };
        let (plugin, skill_at) = if origin == Origin::Plugin {
            (Some(parts.get(1).cloned()), 2)
        } else {
            (None, 1)
        };
        let plugin = match plugin {
            Some(None) => return Err(self.err("skill://plugin/ needs PLUGIN/SKILL")),
            Some(Some(p)) => Some(p),
            None => None,
        };
        let Some(skill) = parts.get(skill_at).cloned() else {
            return Err(self.err(format!(
                "skill://{}/ needs a skill name",
                parts[..skill_at].join("/")
            )));
        };
        Ok(Locator::Skill(SkillRef::Alias {
            origin,
            plugin,
            skill,
            path: parts[skill_at + 1..].to_vec(),
        }))
    }

    fn agent(&self, rest: &str) -> Result<Locator, Error> {
        let (path_part, fragment) = match rest.split_once('#') {
            Some((p, f)) => (p, Some(f)),
            None => (rest, None),
        };
        let raw = self.raw_components(path_part)?;
        let parts = self.decode_all(&raw, 0)?;
        let pointer = fragment.map(|f| self.pointer(f)).transpose()?;
        if parts.is_empty() {
            if pointer.is_some() {
                return Err(
                    self.err("a JSON fragment needs an agent path (agent://root/PATH#/KEY)")
                );
            }
            return Ok(Locator::Agent {
                path: Vec::new(),
                pointer: None,
            });
        }
        if parts[0] != "root" {
            return Err(self
                .err("agent addresses name a retained agent path below root (agent://root/PATH)"));
        }
        if parts.len() == 1 {
            return Err(self.err(
                "agent://root is the main conversation, not a retained agent; \
                 use history://root for it or Read agent:// for the agents",
            ));
        }
        Ok(Locator::Agent {
            path: parts[1..].to_vec(),
            pointer,
        })
    }

    fn pointer(&self, fragment: &str) -> Result<Pointer, Error> {
        let text = encode::decode_raw(fragment)
            .map_err(|e| self.err(format!("{} in the JSON fragment", e.reason())))?;
        if text.chars().any(char::is_control) {
            return Err(self.err("a control character in the JSON fragment"));
        }
        if text.is_empty() {
            return Ok(Pointer(Vec::new()));
        }
        let Some(body) = text.strip_prefix('/') else {
            return Err(self.err("a JSON pointer fragment must be empty or start with `/`"));
        };
        let mut tokens = Vec::new();
        for token in body.split('/') {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => {
                            return Err(self.err(
                                "`~` in a JSON pointer must be followed by 0 or 1 (RFC 6901)",
                            ));
                        }
                    }
                } else {
                    out.push(c);
                }
            }
            tokens.push(out);
        }
        Ok(Pointer(tokens))
    }

    fn history(&self, raw: &[&str]) -> Result<Locator, Error> {
        let parts = self.decode_all(raw, 0)?;
        let Some(first) = parts.first() else {
            return Ok(Locator::History(HistoryRef::Listing));
        };
        match first.as_str() {
            "root" => Ok(Locator::History(HistoryRef::Root(parts[1..].to_vec()))),
            "saved" => {
                if parts.len() > 3 {
                    return Err(self.err(
                        "history://saved takes at most SESSION/SEGMENT; \
                         files inside session storage are not addressable",
                    ));
                }
                let segment = parts.get(2).cloned();
                if let Some(s) = &segment
                    && !is_segment_name(s)
                {
                    return Err(self.err(format!(
                        "`{s}` is not a saved segment name (segment-NNNN.chat.org)"
                    )));
                }
                Ok(Locator::History(HistoryRef::Saved {
                    session: parts.get(1).cloned(),
                    segment,
                }))
            }
            other => Err(self.err(format!(
                "unknown history branch `{other}`; use history://root[/PATH] or history://saved"
            ))),
        }
    }

    fn memory(&self, raw: &[&str]) -> Result<Locator, Error> {
        let parts = self.decode_all(raw, 0)?;
        let Some(first) = parts.first() else {
            return Err(self.err(
                "bare memory:// names nothing; use memory://root (all roots) or memory://journal/",
            ));
        };
        match first.as_str() {
            "root" if parts.len() == 1 => Ok(Locator::Memory(MemoryRef::Union)),
            "root" => Err(self.err(
                "memory://root is the union listing; name a file through its root key \
                 (memory://ROOT-KEY/PATH, listed by Read memory://root)",
            )),
            "journal" if parts.len() <= 2 => {
                Ok(Locator::Memory(MemoryRef::Journal(parts.get(1).cloned())))
            }
            "journal" => {
                Err(self.err("journal entries are single files; nested names are refused"))
            }
            key => {
                let key = match Origin::from_name(key) {
                    Some(o) if o.is_memory_kind() => MemoryKey::Readable(o),
                    _ if is_digest(key) => MemoryKey::Digest(key.to_ascii_lowercase()),
                    _ => {
                        return Err(self.err(format!(
                            "unknown memory root key `{key}` (keys: local-mevedel, local-agents, \
                             global-mevedel, global-agents or a root's SHA-256 digest; \
                             Read memory://root lists them)"
                        )));
                    }
                };
                Ok(Locator::Memory(MemoryRef::Keyed {
                    key,
                    path: parts[1..].to_vec(),
                }))
            }
        }
    }

    fn mcp(&self, raw: &[&str]) -> Result<Locator, Error> {
        if raw.len() > 2 {
            return Err(self.err(
                "mcp addresses have at most two components, the server and the resource URI; \
                 percent-encode the URI's own slashes as %2F",
            ));
        }
        let mut parts = Vec::new();
        for (i, r) in raw.iter().enumerate() {
            let text = encode::decode_raw(r).map_err(|e| self.component_err(i, &e))?;
            if text.is_empty() {
                return Err(self.component_err(i, &ComponentError::Empty));
            }
            if text.chars().any(char::is_control) {
                return Err(self.component_err(i, &ComponentError::ControlCharacter));
            }
            parts.push(text);
        }
        let mut it = parts.into_iter();
        Ok(Locator::Mcp {
            server: it.next(),
            uri: it.next(),
        })
    }

    fn shared(&self, raw: &[&str]) -> Result<Locator, Error> {
        let parts = self.decode_all(raw, 0)?;
        let Some(first) = parts.first() else {
            return Ok(Locator::Shared(SharedRef::Listing));
        };
        let rest: Vec<&str> = parts[1..].iter().map(String::as_str).collect();
        if first == "library" {
            return match rest[..] {
                [] => Ok(Locator::Shared(SharedRef::Library {
                    name: None,
                    sheet: false,
                })),
                ["sheet.png"] => Ok(Locator::Shared(SharedRef::Library {
                    name: None,
                    sheet: true,
                })),
                [name] => Ok(Locator::Shared(SharedRef::Library {
                    name: Some(name.to_string()),
                    sheet: false,
                })),
                [name, "sheet.png"] => Ok(Locator::Shared(SharedRef::Library {
                    name: Some(name.to_string()),
                    sheet: true,
                })),
                _ => Err(self.err("shared://library takes [NAME][/sheet.png]")),
            };
        }
        if !id_shaped(first) {
            return Err(self.err(format!(
                "`{first}` is not a shared item id ([a-zA-Z0-9_-], 1 to 80 characters)"
            )));
        }
        let part = match rest[..] {
            [] => None,
            ["view.png"] => Some(SharedPart::View),
            ["discussions"] => Some(SharedPart::Discussions),
            ["history"] => Some(SharedPart::History),
            ["elements", e] if id_shaped(e) => Some(SharedPart::Element(e.to_string())),
            ["images", k] if id_shaped(k) => Some(SharedPart::Image(k.to_string())),
            _ => {
                return Err(self.err(
                    "unknown shared item part (parts: view.png, discussions, history, \
                     elements/ELEMENT, images/KEY)",
                ));
            }
        };
        Ok(Locator::Shared(SharedRef::Item {
            id: first.clone(),
            part,
        }))
    }
}

fn push_path(out: &mut String, parts: &[String]) {
    for p in parts {
        out.push('/');
        encode::encode_into(out, p, &[]);
    }
}

/// Append `scheme://a/b`: PREFIX (ending in `://`) and components.
fn join(out: &mut String, prefix: &str, parts: &[String]) {
    out.push_str(prefix);
    let mut it = parts.iter();
    if let Some(first) = it.next() {
        encode::encode_into(out, first, &[]);
    }
    for p in it {
        out.push('/');
        encode::encode_into(out, p, &[]);
    }
}

impl Locator {
    pub fn scheme(&self) -> &'static str {
        match self {
            Locator::Work(_) => "work",
            Locator::Artifact(_) => "artifact",
            Locator::Skill(_) => "skill",
            Locator::Agent { .. } => "agent",
            Locator::History(_) => "history",
            Locator::Memory(_) => "memory",
            Locator::Mcp { .. } => "mcp",
            Locator::Shared(_) => "shared",
            Locator::Docs(_) => "mevedel",
        }
    }

    /// The canonical address text.
    pub fn canonical(&self) -> String {
        let mut out = String::with_capacity(64);
        self.write_canonical(&mut out);
        out
    }

    /// Append the canonical address text to OUT (a caller's reused buffer).
    pub fn write_canonical(&self, out: &mut String) {
        match self {
            Locator::Work(WorkRef::Both) => out.push_str("work://"),
            Locator::Work(WorkRef::Local(p)) => join(out, "work://", p),
            Locator::Work(WorkRef::Shared(p)) => {
                out.push_str("work://shared");
                push_path(out, p);
            }
            Locator::Artifact(p) => join(out, "artifact://", p),
            Locator::Skill(SkillRef::Listing) => out.push_str("skill://"),
            Locator::Skill(SkillRef::Exact { name, digest, path }) => {
                out.push_str("skill://");
                encode::encode_into(out, name, &[]);
                out.push('@');
                out.push_str(digest);
                push_path(out, path);
            }
            Locator::Skill(SkillRef::Alias {
                origin,
                plugin,
                skill,
                path,
            }) => {
                out.push_str("skill://");
                out.push_str(origin.name());
                if let Some(p) = plugin {
                    push_path(out, std::slice::from_ref(p));
                }
                push_path(out, std::slice::from_ref(skill));
                push_path(out, path);
            }
            Locator::Agent { path, pointer } => {
                if path.is_empty() {
                    out.push_str("agent://");
                    return;
                }
                out.push_str("agent://root");
                push_path(out, path);
                if let Some(Pointer(tokens)) = pointer {
                    out.push('#');
                    for t in tokens {
                        out.push('/');
                        let escaped = t.replace('~', "~0").replace('/', "~1");
                        encode::encode_into(out, &escaped, &[]);
                    }
                }
            }
            Locator::History(HistoryRef::Listing) => out.push_str("history://"),
            Locator::History(HistoryRef::Root(p)) => {
                out.push_str("history://root");
                push_path(out, p);
            }
            Locator::History(HistoryRef::Saved { session, segment }) => {
                out.push_str("history://saved");
                for part in session.iter().chain(segment) {
                    push_path(out, std::slice::from_ref(part));
                }
            }
            Locator::Memory(MemoryRef::Union) => out.push_str("memory://root"),
            Locator::Memory(MemoryRef::Journal(None)) => out.push_str("memory://journal/"),
            Locator::Memory(MemoryRef::Journal(Some(f))) => {
                join(out, "memory://journal/", std::slice::from_ref(f))
            }
            Locator::Memory(MemoryRef::Keyed { key, path }) => {
                out.push_str("memory://");
                match key {
                    MemoryKey::Readable(o) => out.push_str(o.name()),
                    MemoryKey::Digest(d) => out.push_str(d),
                }
                push_path(out, path);
            }
            Locator::Mcp { server, uri } => {
                out.push_str("mcp://");
                let mut first = true;
                for part in server.iter().chain(uri) {
                    if !first {
                        out.push('/');
                    }
                    first = false;
                    encode::encode_into(out, part, &[]);
                }
            }
            Locator::Shared(SharedRef::Listing) => out.push_str("shared://"),
            Locator::Shared(SharedRef::Library { name, sheet }) => {
                out.push_str("shared://library");
                if let Some(n) = name {
                    push_path(out, std::slice::from_ref(n));
                }
                if *sheet {
                    out.push_str("/sheet.png");
                }
            }
            Locator::Shared(SharedRef::Item { id, part }) => {
                out.push_str("shared://");
                out.push_str(id);
                match part {
                    None => {}
                    Some(SharedPart::View) => out.push_str("/view.png"),
                    Some(SharedPart::Discussions) => out.push_str("/discussions"),
                    Some(SharedPart::History) => out.push_str("/history"),
                    Some(SharedPart::Element(e)) => {
                        out.push_str("/elements/");
                        out.push_str(e);
                    }
                    Some(SharedPart::Image(k)) => {
                        out.push_str("/images/");
                        out.push_str(k);
                    }
                }
            }
            Locator::Docs(p) => join(out, "mevedel://", p),
        }
    }

    /// Bare listings and `memory://root` are discovery queries, never
    /// exact identities that could be bound.
    pub fn is_discovery(&self) -> bool {
        matches!(
            self,
            Locator::Work(WorkRef::Both)
                | Locator::Skill(SkillRef::Listing)
                | Locator::History(HistoryRef::Listing)
                | Locator::Memory(MemoryRef::Union)
                | Locator::Mcp { server: None, .. }
                | Locator::Shared(SharedRef::Listing)
        ) || matches!(self, Locator::Artifact(p) | Locator::Docs(p) if p.is_empty())
            || matches!(self, Locator::Agent { path, .. } if path.is_empty())
    }
}
