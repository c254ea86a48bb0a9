//! ToolSearch: matching a query against a callable catalog, and the
//! texts it answers with (full contracts, calling shapes, suggestions).
//!
//! Matching is a case-insensitive OR over the query's terms against each
//! tool's name, summary, category and groups. A term that is exactly a
//! tool's name selects only that tool. Summaries, not full descriptions,
//! are the search index.
//!
//! A catalog is searched many times between changes and may hold
//! thousands of tools (fifty MCP servers of a hundred): each tool's
//! words are lowercased once, when it is compiled ([`Key`]), and an
//! [`Index`] of a catalog lays them end to end, so that a term is one
//! substring scan of the whole catalog.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use memchr::memmem;

use super::CompiledTool;
use super::dsl::{Node, ToolSpec, Ty};

/// Up to this many matches get full contracts.
pub const MAX_CONTRACTS: usize = 3;
/// Broader results list at most this many calling shapes.
pub const MAX_SHAPES: usize = 20;
/// A failed search suggests at most this many categories and groups.
pub const MAX_SUGGESTIONS: usize = 20;

/// What kind of answer a search produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Contracts,
    Shapes,
    NoMatch,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Contracts => "contracts",
            Kind::Shapes => "shapes",
            Kind::NoMatch => "none",
        }
    }
}

/// A search's answer: the text for the model and its facts.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub kind: Kind,
    pub text: String,
    /// Identities of the tools the text shows, best first.
    pub shown: Vec<String>,
    /// How many distinct tools matched.
    pub total: usize,
}

/// The words of one tool that terms are matched against, lowercased:
/// identity, category, groups and summary, one per line in the order of
/// their scores, so that a term's first occurrence is its best field.
/// Terms never hold whitespace, so no match spans two lines.
#[derive(Debug, Clone)]
pub struct Key {
    text: String,
    /// The end of the identity in `text`.
    identity_end: usize,
    /// The end of the category and groups in `text`.
    groups_end: usize,
    /// The lowercased name, which an exact term may be.
    name: String,
}

impl Key {
    pub(crate) fn of(spec: &ToolSpec) -> Key {
        let mut text = spec.identity.to_lowercase();
        text.push('\n');
        let identity_end = text.len();
        for word in std::iter::once(&spec.category).chain(&spec.groups) {
            text.push_str(&word.to_lowercase());
            text.push('\n');
        }
        let groups_end = text.len();
        text.push_str(&spec.summary.to_lowercase());
        text.push('\n');
        Key {
            text,
            identity_end,
            groups_end,
            name: spec.name.to_lowercase(),
        }
    }

    fn identity(&self) -> &str {
        &self.text[..self.identity_end - 1]
    }
}

/// Where one tool's key lies in an [`Index`]'s text.
struct Span {
    start: usize,
    identity_end: usize,
    groups_end: usize,
}

impl Span {
    /// The score of a match at AT (higher is better).
    fn score_at(&self, at: usize) -> u8 {
        if at < self.identity_end {
            3
        } else if at < self.groups_end {
            2
        } else {
            1
        }
    }
}

/// A catalog ready to be searched: its tools (the first of each
/// identity, in catalog order), their keys laid end to end and their
/// exact names. A search reads these few contiguous tables only, not the
/// tools spread over the heap, until it writes the answer.
pub struct Index {
    tools: Vec<Arc<CompiledTool>>,
    /// Every tool's key text, in order.
    text: String,
    /// Each tool's key in `text`.
    spans: Vec<Span>,
    /// Lowercased name or identity -> the tools it is exactly.
    named: HashMap<String, Vec<usize>>,
    /// The categories and groups a search without a match suggests.
    suggestions: Vec<String>,
}

impl Index {
    /// The index of CATALOG (the caller's callable tools).
    pub fn new(catalog: Vec<Arc<CompiledTool>>) -> Index {
        let mut names: BTreeSet<&str> = BTreeSet::new();
        for t in &catalog {
            names.insert(t.spec.category.as_str());
            names.extend(t.spec.groups.iter().map(String::as_str));
        }
        let suggestions = names
            .into_iter()
            .take(MAX_SUGGESTIONS)
            .map(str::to_string)
            .collect();
        let mut seen: HashSet<String> = HashSet::with_capacity(catalog.len());
        let tools: Vec<Arc<CompiledTool>> = catalog
            .into_iter()
            .filter(|t| seen.insert(t.spec.identity.clone()))
            .collect();
        let mut text = String::with_capacity(tools.iter().map(|t| t.key.text.len()).sum());
        let mut spans = Vec::with_capacity(tools.len());
        let mut named: HashMap<String, Vec<usize>> = HashMap::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            let start = text.len();
            text.push_str(&t.key.text);
            spans.push(Span {
                start,
                identity_end: start + t.key.identity_end,
                groups_end: start + t.key.groups_end,
            });
            named.entry(t.key.name.clone()).or_default().push(i);
            if t.key.identity() != t.key.name {
                named
                    .entry(t.key.identity().to_string())
                    .or_default()
                    .push(i);
            }
        }
        Index {
            tools,
            text,
            spans,
            named,
            suggestions,
        }
    }

    /// Search for QUERY.
    pub fn search(&self, query: &str) -> Answer {
        // The best score of each tool over the terms; 0 is no match.
        let mut scores = vec![0u8; self.tools.len()];
        for term in terms(query) {
            self.score(&term, &mut scores);
        }
        // Best score first, in catalog order within a score.
        let matches: Vec<&CompiledTool> = (1..=4u8)
            .rev()
            .flat_map(|score| {
                scores
                    .iter()
                    .enumerate()
                    .filter(move |(_, s)| **s == score)
                    .map(|(i, _)| &*self.tools[i])
            })
            .collect();
        answer(&matches, query, &self.suggestions)
    }

    /// Raise SCORES with TERM's matches: only the tools named TERM when
    /// there is one, else every tool whose words hold TERM.
    fn score(&self, term: &str, scores: &mut [u8]) {
        if let Some(tools) = self.named.get(term) {
            for &i in tools {
                scores[i] = 4;
            }
            return;
        }
        // Matches come in order: the tool holding one is found by walking
        // on from the last one's.
        let (mut i, mut scored) = (0, None);
        for at in memmem::find_iter(self.text.as_bytes(), term.as_bytes()) {
            while self.spans.get(i + 1).is_some_and(|next| next.start <= at) {
                i += 1;
            }
            // The first match in a tool's text is its best field.
            if scored != Some(i) {
                scored = Some(i);
                scores[i] = scores[i].max(self.spans[i].score_at(at));
            }
        }
    }
}

/// The answer listing MATCHES (best first) for QUERY; SUGGESTIONS are
/// what a search without a match offers instead.
fn answer(matches: &[&CompiledTool], query: &str, suggestions: &[String]) -> Answer {
    let total = matches.len();
    if total == 0 {
        return no_match(query, suggestions);
    }
    if total <= MAX_CONTRACTS {
        let text = matches
            .iter()
            .map(|t| contract(t))
            .collect::<Vec<_>>()
            .join("\n\n");
        return Answer {
            kind: Kind::Contracts,
            text,
            shown: matches.iter().map(|t| t.spec.identity.clone()).collect(),
            total,
        };
    }
    let shown: Vec<&CompiledTool> = matches.iter().take(MAX_SHAPES).copied().collect();
    let mut text = if total > MAX_SHAPES {
        format!("{total} tools match \"{query}\"; showing the first {MAX_SHAPES}:\n")
    } else {
        format!("{total} tools match \"{query}\":\n")
    };
    for t in &shown {
        text.push_str(&format!("- {} - {}\n", t.shape, t.spec.summary));
    }
    text.push_str("Search again for one or two exact tool names to get their full contracts.");
    Answer {
        kind: Kind::Shapes,
        text,
        shown: shown.iter().map(|t| t.spec.identity.clone()).collect(),
        total,
    }
}

fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for term in query
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
    {
        let term = term.to_lowercase();
        if !out.contains(&term) {
            out.push(term);
        }
    }
    out
}

fn no_match(query: &str, suggestions: &[String]) -> Answer {
    let text = if suggestions.is_empty() {
        format!("No tools match \"{query}\".")
    } else {
        format!(
            "No tools match \"{query}\". Categories and groups you can search for: {}.",
            suggestions.join(", ")
        )
    };
    Answer {
        kind: Kind::NoMatch,
        text,
        shown: Vec::new(),
        total: 0,
    }
}

/// The full contract of TOOL: shape, arguments with their constraints,
/// and the whole description.
pub fn contract(tool: &CompiledTool) -> String {
    let spec = &tool.spec;
    let mut out = format!("## {}\nCalling shape: {}\n", spec.identity, tool.shape);
    out.push_str(&format!("Category: {}", spec.category));
    if !spec.groups.is_empty() {
        out.push_str(&format!("; groups: {}", spec.groups.join(", ")));
    }
    out.push('\n');
    if spec.root.properties.is_empty() {
        out.push_str("Arguments: none\n");
    } else {
        out.push_str("Arguments:\n");
        for p in &spec.root.properties {
            let mut facts = vec![type_text(&p.node)];
            facts.push(if p.required { "required" } else { "optional" }.to_string());
            facts.extend(constraints(&p.node));
            out.push_str(&format!("- {} ({})", p.name, facts.join(", ")));
            if let Some(d) = &p.node.description {
                out.push_str(&format!(": {d}"));
            }
            out.push('\n');
        }
    }
    out.push_str("Description:\n");
    out.push_str(spec.description.trim_end());
    out
}

fn type_text(node: &Node) -> String {
    match (&node.ty, &node.items) {
        (Ty::Array, Some(items)) => format!("array of {}", type_text(items)),
        (Ty::Object, _) if !node.properties.is_empty() => {
            let fields: Vec<String> = node
                .properties
                .iter()
                .map(|p| {
                    format!(
                        "{}{}: {}",
                        p.name,
                        if p.required { "" } else { "?" },
                        type_text(&p.node)
                    )
                })
                .collect();
            format!("object {{{}}}", fields.join(", "))
        }
        _ => node.ty.json_name().to_string(),
    }
}

fn constraints(node: &Node) -> Vec<String> {
    let mut out = Vec::new();
    match node.ty {
        Ty::Path => out.push("a raw filesystem path".to_string()),
        Ty::PathOrResource => out.push("a path or a scheme:// address".to_string()),
        _ => {}
    }
    if let Some(options) = &node.enumeration {
        let listed: Vec<String> = options
            .iter()
            .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_string))
            .collect();
        out.push(format!("one of: {}", listed.join(" | ")));
    }
    if let Some(b) = &node.minimum {
        out.push(format!("minimum {}", b.number));
    }
    if let Some(b) = &node.maximum {
        out.push(format!("maximum {}", b.number));
    }
    if let Some(n) = node.min_items {
        out.push(format!("at least {n} items"));
    }
    if let Some(n) = node.max_items {
        out.push(format!("at most {n} items"));
    }
    out
}
