//! The first resolver stage: from an authored address to an opaque
//! [`Attempt`] plus the facts permission needs, without reading content.
//!
//! Malformed addresses, unsupported operations and containment failures
//! are errors here (validation, before permission). Targets that are
//! valid but missing or unavailable become an attempt whose execution
//! fails through the ordinary tool-failure path.

use std::path::PathBuf;

use super::address::{self, HistoryRef, Locator, MemoryRef, SharedRef, SkillRef, WorkRef};
use super::contain::{self, Found};
use super::context::{Context, Skill};
use super::encode;
use super::journal;
use super::matrix::{self, Operation};
use crate::datum::Datum;
use crate::error::{Error, ErrorKind};

pub use mevedel_search::filter::Filter;

/// One backing directory and how its files are named in results.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Address prefix of its files, e.g. `work://shared/`.
    pub label: String,
    pub root: PathBuf,
    pub filter: Filter,
    /// Shown beside the scope in listings (memory sources).
    pub source: Option<String>,
    /// Said when the scope root does not exist yet (successful, empty).
    pub empty_note: String,
}

impl Scope {
    /// The address of the file at components REL below the root.
    pub fn address_of(&self, rel: &[String]) -> String {
        let mut out = self.label.clone();
        for (i, c) in rel.iter().enumerate() {
            if i > 0 {
                out.push('/');
            }
            encode::encode_into(&mut out, c, &[]);
        }
        out
    }
}

/// One selected place: a scope and a contained descendant.
#[derive(Debug, Clone)]
pub struct Selection {
    pub scope: Scope,
    pub rel: Vec<String>,
    pub path: PathBuf,
    pub found: Found,
}

#[derive(Debug, Clone)]
pub enum Target {
    /// File-backed: one selection, or several for a union listing.
    Files {
        selections: Vec<Selection>,
        /// Said when there is nothing to select at all.
        none_note: Option<String>,
    },
    /// Text computed from metadata at preparation (skill listing).
    Text(String),
    /// A conversation (`history://root[/PATH]`, `history://saved/...`)
    /// or a retained agent's settled result (`agent://`): Lisp projects
    /// its text at execution, after permission, and Read and Grep serve
    /// that text under the canonical address.
    Conversation,
    /// The family or target cannot be served now; execution fails so.
    Unavailable(String),
}

/// A prepared operation: execution consumes it without reparsing.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub authored: String,
    pub canonical: String,
    pub operation: Operation,
    pub target: Target,
}

impl Attempt {
    /// Backing paths a permission check must see (file-backed families).
    pub fn backing_paths(&self) -> Vec<PathBuf> {
        match &self.target {
            Target::Files { selections, .. } => selections.iter().map(|s| s.path.clone()).collect(),
            _ => Vec::new(),
        }
    }

    pub fn scheme(&self) -> &str {
        self.canonical.split("://").next().unwrap_or("")
    }

    /// The logical authority facts a permission check needs:
    /// `(:operation OP :scheme S :canonical C :authored A :write BOOL
    /// :paths (BACKING...) :available BOOL)`.
    pub fn facts(&self) -> Datum {
        Datum::plist([
            ("operation", Datum::str(self.operation.name())),
            ("scheme", Datum::str(self.scheme())),
            ("canonical", Datum::str(self.canonical.as_str())),
            ("authored", Datum::str(self.authored.as_str())),
            ("write", Datum::bool(self.operation.writes())),
            (
                "paths",
                Datum::List(
                    self.backing_paths()
                        .iter()
                        .map(|p| Datum::str(p.to_string_lossy()))
                        .collect(),
                ),
            ),
            (
                "available",
                Datum::bool(!matches!(self.target, Target::Unavailable(_))),
            ),
        ])
    }
}

fn unavailable(msg: impl Into<String>) -> Target {
    Target::Unavailable(msg.into())
}

struct Prep<'a> {
    ctx: &'a Context,
    authored: &'a str,
}

impl Prep<'_> {
    fn select(&self, scope: Scope, rel: &[String]) -> Result<Selection, Error> {
        let (path, found) = contain::contain(&scope.root, rel).map_err(|e| {
            Error::new(
                ErrorKind::Resource,
                format!(
                    "Invalid resource address `{}`: {}",
                    self.authored,
                    e.reason()
                ),
            )
        })?;
        Ok(Selection {
            scope,
            rel: rel.to_vec(),
            path,
            found,
        })
    }

    fn files(&self, scope: Scope, rel: &[String]) -> Result<Target, Error> {
        Ok(Target::Files {
            selections: vec![self.select(scope, rel)?],
            none_note: None,
        })
    }

    fn session_dir(&self) -> Option<&PathBuf> {
        self.ctx.session_dir.as_ref()
    }

    fn local_scope(&self) -> Option<Scope> {
        Some(Scope {
            label: "work://".into(),
            root: self.session_dir()?.join("local"),
            filter: Filter::Any,
            source: Some("session files".into()),
            empty_note: "The session has no work:// files yet.".into(),
        })
    }

    fn shared_scope(&self) -> Option<Scope> {
        Some(Scope {
            label: "work://shared/".into(),
            root: self.ctx.workspace.as_ref()?.join(".mevedel/shared"),
            filter: Filter::Any,
            source: Some("workspace shared files".into()),
            empty_note: "work://shared/ holds no files yet; an authorized ApplyPatch can create \
                         files under work://shared/."
                .into(),
        })
    }

    fn work(&self, r: &WorkRef) -> Result<Target, Error> {
        const NO_SESSION: &str = "work:// session files are unavailable: this request has no \
                                  session (ephemeral requests cannot own working files)";
        const NO_WORKSPACE: &str = "work://shared/ is unavailable: this request has no workspace";
        match r {
            WorkRef::Both => {
                let (Some(local), Some(shared)) = (self.local_scope(), self.shared_scope()) else {
                    return Ok(unavailable(if self.session_dir().is_none() {
                        NO_SESSION
                    } else {
                        NO_WORKSPACE
                    }));
                };
                Ok(Target::Files {
                    selections: vec![self.select(local, &[])?, self.select(shared, &[])?],
                    none_note: None,
                })
            }
            WorkRef::Local(rel) => match self.local_scope() {
                Some(s) => self.files(s, rel),
                None => Ok(unavailable(NO_SESSION)),
            },
            WorkRef::Shared(rel) => match self.shared_scope() {
                Some(s) => self.files(s, rel),
                None => Ok(unavailable(NO_WORKSPACE)),
            },
        }
    }

    fn artifact(&self, rel: &[String]) -> Result<Target, Error> {
        let Some(session) = self.session_dir() else {
            return Ok(unavailable(
                "artifact:// is unavailable: this request has no session to own persisted output",
            ));
        };
        let scope = |dir: &str| Scope {
            label: format!("artifact://{dir}/"),
            root: session.join(dir),
            filter: if dir == "executions" {
                Filter::ExecutionLogs
            } else {
                Filter::Artifact
            },
            source: None,
            empty_note: String::new(),
        };
        let Some(first) = rel.first() else {
            return Ok(Target::Files {
                selections: vec![
                    self.select(scope("tool-results"), &[])?,
                    self.select(scope("executions"), &[])?,
                ],
                none_note: Some(
                    "No artifacts yet: nothing has been persisted in this session.".into(),
                ),
            });
        };
        if (first != "tool-results" && first != "executions")
            || rel
                .last()
                .is_some_and(|n| n.ends_with(".gz") || n.starts_with('.'))
        {
            return Ok(unavailable(format!(
                "No artifact `{}` exists (Read artifact:// lists the current handles)",
                self.authored
            )));
        }
        let scope = scope(first);
        let mut sel = self.select(scope.clone(), &rel[1..])?;
        if sel.found == Found::Missing && scope.filter.maps_compressed() {
            // A retired log kept compressed answers to its logical name.
            let mut physical = rel[1..].to_vec();
            if let Some(last) = physical.last_mut()
                && last.ends_with(".log")
            {
                last.push_str(".gz");
                let compressed = self.select(scope, &physical)?;
                if compressed.found == Found::File {
                    sel.path = compressed.path;
                    sel.found = Found::File;
                }
            }
        }
        Ok(Target::Files {
            selections: vec![sel],
            none_note: None,
        })
    }

    fn docs(&self, rel: &[String]) -> Result<Target, Error> {
        let Some(root) = &self.ctx.docs_root else {
            return Ok(unavailable(
                "mevedel:// is unavailable: the packaged documentation directory was not found",
            ));
        };
        let scope = Scope {
            label: "mevedel://".into(),
            root: root.clone(),
            filter: Filter::Markdown,
            source: None,
            empty_note: "The packaged documentation is empty.".into(),
        };
        let sel = self.select(scope, rel)?;
        if sel.found == Found::File && !rel.last().is_some_and(|n| n.ends_with(".md")) {
            return Ok(unavailable(format!(
                "`{}` is not a Markdown document; mevedel:// exposes only packaged Markdown \
                 (Read mevedel:// lists them)",
                self.authored
            )));
        }
        Ok(Target::Files {
            selections: vec![sel],
            none_note: None,
        })
    }

    fn memory_scope(&self, i: usize) -> Scope {
        let root = &self.ctx.memory_roots[i];
        let key = self.ctx.memory_key_text(i);
        Scope {
            label: format!("memory://{key}/"),
            root: root.path.clone(),
            filter: Filter::Any,
            source: Some(root.label.clone()),
            empty_note: format!("memory://{key} holds no files yet."),
        }
    }

    fn memory(&self, r: &MemoryRef) -> Result<Target, Error> {
        match r {
            MemoryRef::Union => {
                if self.ctx.memory_roots.is_empty() {
                    return Ok(Target::Files {
                        selections: Vec::new(),
                        none_note: Some("No memory roots are configured.".into()),
                    });
                }
                let selections = (0..self.ctx.memory_roots.len())
                    .map(|i| self.select(self.memory_scope(i), &[]))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Target::Files {
                    selections,
                    none_note: Some("Memory roots are configured but hold no files.".into()),
                })
            }
            MemoryRef::Keyed { key, path } => match self.ctx.memory_root(key) {
                Some(i) => self.files(self.memory_scope(i), path),
                None => Ok(unavailable(format!(
                    "No configured memory root has the key in `{}` (Read memory://root lists the roots)",
                    self.authored
                ))),
            },
            MemoryRef::Journal(file) => {
                let Some(ws) = &self.ctx.workspace else {
                    return Ok(unavailable(
                        "memory://journal/ is unavailable: this request has no workspace",
                    ));
                };
                let filter = Filter::Journal {
                    now: self.ctx.now,
                    recall_days: self.ctx.journal_recall_days,
                };
                if let Some(name) = file
                    && !filter.admits(name, 1)
                {
                    let why = if journal::entry_time(name).is_some() {
                        format!(
                            "is older than the {}-day recall limit (or not yet published)",
                            self.ctx.journal_recall_days
                        )
                    } else {
                        "is not a published journal entry name".to_string()
                    };
                    return Ok(unavailable(format!(
                        "`{}` {why}; Read memory://journal/ lists the recallable entries",
                        self.authored
                    )));
                }
                let scope = Scope {
                    label: "memory://journal/".into(),
                    root: ws.join(".mevedel/journal"),
                    filter,
                    source: None,
                    empty_note: "The workspace journal has no published entries.".into(),
                };
                let rel: Vec<String> = file.iter().cloned().collect();
                self.files(scope, &rel)
            }
        }
    }

    fn skill_scope(&self, skill: &Skill, label: String) -> Scope {
        Scope {
            label,
            root: skill.root.clone(),
            filter: Filter::Any,
            source: None,
            empty_note: "The skill package is empty.".into(),
        }
    }

    fn skill(&self, r: &SkillRef) -> Result<Target, Error> {
        match r {
            SkillRef::Listing => {
                if self.ctx.skills.is_empty() {
                    return Ok(Target::Text("No skills are discovered.".into()));
                }
                let mut skills: Vec<&Skill> = self.ctx.skills.iter().collect();
                skills.sort_by_key(|s| s.alias_address());
                let text = skills
                    .iter()
                    .map(|s| format!("{}  (exact: {})", s.alias_address(), s.exact_address()))
                    .collect::<Vec<_>>()
                    .join("\n");
                Ok(Target::Text(text))
            }
            SkillRef::Exact { name, digest, path } => {
                let found = self.ctx.skills.iter().find(|s| &s.digest() == digest);
                match found {
                    Some(s) if &s.name == name => {
                        let label = format!("{}/", s.exact_address());
                        self.files(self.skill_scope(s, label), path)
                    }
                    Some(s) => Ok(unavailable(format!(
                        "`{}` is unavailable: that source key belongs to skill `{}`, not `{name}`",
                        self.authored, s.name
                    ))),
                    None => Ok(unavailable(format!(
                        "`{}` is unavailable: no discovered skill has that source key \
                         (it may be disabled, changed or removed; Read skill:// lists skills)",
                        self.authored
                    ))),
                }
            }
            SkillRef::Alias {
                origin,
                plugin,
                skill,
                path,
            } => {
                let matches: Vec<&Skill> = self
                    .ctx
                    .skills
                    .iter()
                    .filter(|s| s.origin == *origin && &s.name == skill && &s.plugin == plugin)
                    .collect();
                match matches[..] {
                    [s] => {
                        let mut label = s.alias_address();
                        label.push('/');
                        self.files(self.skill_scope(s, label), path)
                    }
                    [] => Ok(unavailable(format!(
                        "`{}` is unavailable: no discovered skill has that origin and name \
                         (Read skill:// lists skills)",
                        self.authored
                    ))),
                    _ => Ok(unavailable(format!(
                        "`{}` is ambiguous: several discovered skills share that origin and name; \
                         use the exact skill://NAME@SOURCE-KEY address from Read skill://",
                        self.authored
                    ))),
                }
            }
        }
    }
}

/// Prepare AUTHORED (a resource address) for OP in CTX.
pub fn prepare(authored: &str, op: Operation, ctx: &Context) -> Result<Attempt, Error> {
    let addr = address::parse_address(authored)?;
    matrix::check(&addr.locator, op, authored)?;
    let p = Prep { ctx, authored };
    let target = match &addr.locator {
        Locator::Work(r) => p.work(r)?,
        Locator::Artifact(rel) => p.artifact(rel)?,
        Locator::Docs(rel) => p.docs(rel)?,
        Locator::Memory(r) => p.memory(r)?,
        Locator::Skill(r) => p.skill(r)?,
        // Retained agents live in Lisp: it supplies the roster, the
        // settled payload or the transcript at execution.
        Locator::Agent { .. } => Target::Conversation,
        Locator::History(HistoryRef::Listing) => Target::Text(
            "history://root  this session's conversation, as the model and the user see it \
             (Read pages it, Grep searches it)\n\
             history://saved  the workspace's saved conversations (Read lists them)"
                .into(),
        ),
        Locator::History(_) => Target::Conversation,
        // MCP resources live in the session's servers: Lisp reads them
        // at execution, fresh on every call.
        Locator::Mcp { .. } => Target::Conversation,
        Locator::Shared(SharedRef::Listing | SharedRef::Library { .. }) => unavailable(
            "shared:// is unavailable: this session has no shared whiteboards or documents",
        ),
        Locator::Shared(SharedRef::Item { .. }) => unavailable(format!(
            "`{authored}` is unavailable: no shared item with that id exists in this session"
        )),
    };
    Ok(Attempt {
        authored: authored.to_string(),
        canonical: addr.locator.canonical(),
        operation: op,
        target,
    })
}
