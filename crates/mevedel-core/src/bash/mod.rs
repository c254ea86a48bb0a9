//! Static analysis of Bash source in tree-sitter-bash's syntax.
//!
//! [`analyze`] reads a command (never runs it) into tree-sitter-bash's
//! syntax tree, built by the recognizer for common sources and by a
//! tree-sitter parse otherwise (ADR 0003), and reports:
//! - its [`Class`]: read-only (may overlap with other readers, runs
//!   without startup files), mutating, unknown, complex or dangerous;
//! - whether it uses the `&` background operator (rejected before spawn);
//! - the final pipeline's stages, when the source ends in the only
//!   pipeline it has and every part of it is plain enough that appending a
//!   `PIPESTATUS` snapshot cannot change what the source does;
//! - the single simple command, when that is all the source is, so exit
//!   statuses such as grep's 1 can be read by [`outcome`].
//!
//! [`describe`] walks the same tree for a permission card: what each
//! command reads, writes or deletes, which a decision never needs.

mod commands;
mod outcome;
mod recognize;
mod syntax;
mod walk;

use std::borrow::Cow;
use std::hash::BuildHasher;

pub use mevedel_sandbox_protocol::{SNAPSHOT_FD, parse_snapshot, with_snapshot};
pub use outcome::{Exit, Outcome, outcome};

/// How much a command may do, least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    ReadOnly,
    Mutating,
    Unknown,
    Complex,
    Dangerous,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::ReadOnly => "read-only",
            Class::Mutating => "mutating",
            Class::Unknown => "unknown",
            Class::Complex => "complex",
            Class::Dangerous => "dangerous",
        }
    }
}

/// What exit status 1 means for a stage, when it means something other
/// than failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Exit 1 is a failure.
    Nothing,
    /// grep / rg: no line matched.
    NoMatch,
    /// diff: the inputs differ.
    Different,
    /// test / [: the condition is false.
    False,
}

impl Expect {
    pub fn outcome(self) -> Option<&'static str> {
        match self {
            Expect::Nothing => None,
            Expect::NoMatch => Some("no-match"),
            Expect::Different => Some("different"),
            Expect::False => Some("false"),
        }
    }
}

/// One stage of a pipeline (or the single command of a source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Short name for notes: the command name, or `for loop`.
    pub label: Label,
    pub expect: Expect,
    /// A loop: one conservative stage whose status has no special values.
    pub compound: bool,
}

/// A stage's label: the name of a listed command is borrowed from the
/// command tables, any other is copied.
#[derive(Clone, PartialEq, Eq)]
pub struct Label(Cow<'static, str>);

impl Label {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&'static str> for Label {
    fn from(name: &'static str) -> Label {
        Label(Cow::Borrowed(name))
    }
}

impl From<String> for Label {
    fn from(name: String) -> Label {
        Label(Cow::Owned(name))
    }
}

impl std::fmt::Debug for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The result of analysing one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    pub class: Class,
    /// Why the class is not read-only (one line each, deduplicated).
    pub reasons: Vec<Cow<'static, str>>,
    /// The source uses `&` to run something in the background.
    pub background: bool,
    /// tree-sitter could not parse all of the source.
    pub parse_error: bool,
    /// The source is this one simple command.
    pub single: Option<Stage>,
    /// Stages of the pipeline the source ends with, when eligible for the
    /// `PIPESTATUS` snapshot.
    pub final_pipeline: Option<Vec<Stage>>,
    /// Number of syntactic pipelines in the whole source.
    pub pipelines: usize,
    /// Why the source is not eligible for the snapshot, when it is not.
    pub ineligible: Option<&'static str>,
    /// The key of each command the source runs, once each, in order: the
    /// command name and, for tools with subcommands, the subcommand
    /// (`git status`, `npm test`, `cargo build`). A session answer that
    /// allows every key of a source allows the source.
    pub keys: Vec<String>,
    /// Some command has no key (computed name, shell code, dangerous):
    /// no session answer covers the source.
    pub unkeyed: bool,
    /// File operands of the read-only commands (and `cd` targets, and
    /// input redirections), as written, joined to the directory the
    /// source had changed to: relative ones are read from the call's
    /// working directory.
    pub paths: Vec<String>,
    /// Some file operand is computed, or read after a `cd` whose target is
    /// unknown, so [`Analysis::paths`] may not list every file read.
    pub paths_unknown: bool,
}

impl Analysis {
    /// Whether to append the `PIPESTATUS` snapshot when running it.
    pub fn snapshot(&self) -> bool {
        self.final_pipeline.is_some()
    }

    /// Whether the final pipeline's stages can be told apart (the sole
    /// pipeline of the source).
    pub fn classifiable(&self) -> bool {
        self.final_pipeline.is_some() && self.pipelines == 1
    }

    pub fn read_only(&self) -> bool {
        self.class == Class::ReadOnly && !self.parse_error && !self.background
    }
}

/// What one command of a source does to files, as a card shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandEffect {
    /// Its key (`git status`, `rm`), or its name when it has none.
    pub label: String,
    pub class: Class,
    /// Where the command is in the source, in characters.
    pub start: usize,
    pub end: usize,
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    pub deletes: Vec<String>,
    /// Some file it touches cannot be told from its words.
    pub unknown: bool,
}

/// What each command of SRC, run in the directory CWD of the workspace
/// ROOT (both absolute; HOME expands `~`), does to files: one entry per
/// command in source order, its paths relative to ROOT when inside it
/// (`.` for ROOT itself), else absolute.
pub fn describe(src: &str, cwd: &str, root: &str, home: Option<&str>) -> Vec<CommandEffect> {
    let cwd = normalize("/", cwd);
    let root = normalize("/", root);
    let shown = |path: &mut String| {
        let absolute = match path.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => match home {
                Some(h) => normalize("/", &format!("{h}{rest}")),
                None => return,
            },
            Some(_) => return,
            None => normalize(&cwd, path),
        };
        *path = match absolute.strip_prefix(root.as_str()) {
            Some("") => ".".into(),
            Some(rest) if root == "/" => rest.into(),
            Some(rest) if rest.starts_with('/') => rest[1..].into(),
            _ => absolute,
        };
    };
    let mut effects = walk::describe(src);
    for effect in &mut effects {
        for path in effect
            .reads
            .iter_mut()
            .chain(&mut effect.writes)
            .chain(&mut effect.deletes)
        {
            shown(path);
        }
    }
    effects
}

/// What a permission decision needs to know about a source run in one
/// working directory of one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The source only reads (see [`Analysis::read_only`]) and every file
    /// it names, and its working directory, are inside the workspace.
    pub inside: bool,
    /// The file operands made absolute and normalised (`.`, `..` and
    /// repeated slashes resolved by their text alone).
    pub paths: Vec<String>,
}

/// Judges analyses run in a working directory of a workspace (absolute
/// paths; HOME expands `~`). Paths are compared as text after one
/// normalisation, never looked up. The last directory and root given are
/// kept, as given and normalised: a caller judges source after source in
/// the same two, so each is normalised once.
#[derive(Default)]
struct Places {
    cwd: (String, String),
    root: (String, String),
}

/// The normalised PATH (absolute), from LAST when it was the last given.
fn remembered<'l>(last: &'l mut (String, String), path: &str) -> &'l str {
    if last.0 != path {
        last.0.clear();
        last.0.push_str(path);
        last.1 = normalize("/", path);
    }
    &last.1
}

impl Places {
    /// Judge ANALYSIS run in CWD for the workspace ROOT, normalising CWD
    /// and ROOT only when they changed.
    fn access(&mut self, analysis: &Analysis, cwd: &str, root: &str, home: Option<&str>) -> Access {
        judge_access(
            analysis,
            remembered(&mut self.cwd, cwd),
            remembered(&mut self.root, root),
            home,
        )
    }
}

/// The permission facts of Bash sources for one caller, such as the
/// module's thread: each source's analysis (from recent ones when it was
/// seen lately) and its files judged against the workspace, in one step,
/// so that the caller converts facts rather than deciding anything.
pub struct Judge {
    recent: Recent,
    places: Places,
    /// What `~` expands to in a file operand.
    home: Option<String>,
}

/// What [`Judge::judge`] found: the source's analysis and its access.
pub struct Facts<'j> {
    pub analysis: Cow<'j, Analysis>,
    pub access: Access,
}

impl Judge {
    /// A judge with no recent analyses, expanding `~` to HOME.
    pub fn new(home: Option<String>) -> Judge {
        Judge {
            recent: Recent::default(),
            places: Places::default(),
            home,
        }
    }

    /// The facts of SRC run in the directory CWD of the workspace ROOT
    /// (both absolute).
    pub fn judge(&mut self, src: &str, cwd: &str, root: &str) -> Facts<'_> {
        let analysis = self.recent.analyze(src);
        let access = self
            .places
            .access(&analysis, cwd, root, self.home.as_deref());
        Facts { analysis, access }
    }
}

/// [`Places::access`] with CWD and ROOT normalised.
fn judge_access(analysis: &Analysis, cwd: &str, root: &str, home: Option<&str>) -> Access {
    let mut inside = analysis.read_only() && !analysis.paths_unknown && within(cwd, root);
    let mut paths = Vec::with_capacity(analysis.paths.len());
    for path in &analysis.paths {
        let resolved = match path.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                home.map(|h| normalize("/", &format!("{h}{rest}")))
            }
            Some(_) => None,
            None => Some(normalize(cwd, path)),
        };
        match resolved {
            Some(p) => {
                inside &= within(&p, root);
                paths.push(p);
            }
            None => {
                inside = false;
                paths.push(path.clone());
            }
        }
    }
    Access { inside, paths }
}

/// PATH read from DIR (absolute and normalised), normalised by its text.
fn normalize(dir: &str, path: &str) -> String {
    // Most operands and directories need no resolving: one copy, no
    // component list.
    if clean(path) {
        let absolute = path.starts_with('/');
        let path = path.trim_end_matches('/');
        if absolute {
            return if path.is_empty() {
                "/".into()
            } else {
                path.into()
            };
        }
        let dir = dir.trim_end_matches('/');
        let mut out = String::with_capacity(dir.len() + path.len() + 1);
        out.push_str(dir);
        out.push('/');
        out.push_str(path);
        return out;
    }
    let mut parts: Vec<&str> = Vec::new();
    let start = if path.starts_with('/') { "" } else { dir };
    for part in start.split('/').chain(path.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let mut out = String::with_capacity(dir.len() + path.len() + 1);
    for part in &parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Whether PATH has no component to resolve: no `.` or `..`, no empty
/// component but a leading or trailing slash, and is not empty.
fn clean(path: &str) -> bool {
    let inner = path.strip_prefix('/').unwrap_or(path);
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    !path.is_empty()
        && (inner.is_empty() && path.starts_with('/')
            || inner
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != ".."))
}

/// Whether the normalised PATH is ROOT or below it.
fn within(path: &str, root: &str) -> bool {
    root == "/"
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Analyse SRC. Never fails: unparsable source is class unknown.
pub fn analyze(src: &str) -> Analysis {
    walk::analyze(src)
}

/// Slots of [`Recent`]; a power of two.
const RECENT_SLOTS: usize = 256;
/// Longer sources are analysed but not remembered.
const RECENT_MAX_SOURCE: usize = 4096;

/// Recent analyses, for a caller that sees the same sources again:
/// agents repeat commands (`git status`, a test run), and the analysis
/// depends on the text alone, so a repeated source costs a hash and a
/// comparison instead of an analysis.
///
/// Direct-mapped: a source's hash picks its one slot, and a new source
/// takes the slot over, reusing its text buffer. A source seen once thus
/// costs no allocation of its own and no sweep of a full table, which
/// keeps the miss (the usual case) as cheap as the analysis itself.
struct Recent {
    slots: Vec<Option<(String, Analysis)>>,
    hasher: foldhash::fast::FixedState,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent {
            slots: std::iter::repeat_with(|| None).take(RECENT_SLOTS).collect(),
            hasher: foldhash::fast::FixedState::default(),
        }
    }
}

impl Recent {
    /// The analysis of SRC, remembered or made (and then remembered,
    /// unless SRC is longer than [`RECENT_MAX_SOURCE`]).
    fn analyze(&mut self, src: &str) -> Cow<'_, Analysis> {
        if src.len() > RECENT_MAX_SOURCE {
            return Cow::Owned(analyze(src));
        }
        let index = self.hasher.hash_one(src) as usize & (RECENT_SLOTS - 1);
        let slot = &mut self.slots[index];
        if !matches!(slot, Some((text, _)) if text == src) {
            let mut text = slot.take().map(|(t, _)| t).unwrap_or_default();
            text.clear();
            text.push_str(src);
            return Cow::Borrowed(&slot.insert((text, walk::analyze(src))).1);
        }
        slot.as_ref()
            .map_or_else(|| Cow::Owned(analyze(src)), |(_, a)| Cow::Borrowed(a))
    }
}

#[cfg(test)]
mod tests;
