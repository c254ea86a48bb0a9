//! ToolSearch: matching a query against a callable catalog, and the
//! texts it answers with (full contracts, calling shapes, suggestions).
//!
//! Matching is a case-insensitive OR over the query's terms against each
//! tool's name, summary, category and groups. A term that is exactly a
//! tool's name selects only that tool. Summaries, not full descriptions,
//! are the search index.

use std::collections::BTreeSet;

use super::CompiledTool;
use super::dsl::{Node, Ty};

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

/// Search CATALOG (the caller's callable tools) for QUERY.
pub fn search(catalog: &[&CompiledTool], query: &str) -> Answer {
    let terms = terms(query);
    let mut scored: Vec<(u8, usize)> = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (index, tool) in catalog.iter().enumerate() {
        if !seen.insert(tool.spec.identity.as_str()) {
            continue;
        }
        if let Some(score) = terms.iter().filter_map(|t| score(catalog, tool, t)).max() {
            scored.push((score, index));
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let matches: Vec<&CompiledTool> = scored.iter().map(|&(_, i)| catalog[i]).collect();
    let total = matches.len();
    if total == 0 {
        return no_match(catalog, query);
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

/// How well TOOL matches TERM (higher is better), or `None`.
fn score(catalog: &[&CompiledTool], tool: &CompiledTool, term: &str) -> Option<u8> {
    let is_name = |t: &CompiledTool| {
        t.spec.name.to_lowercase() == term || t.spec.identity.to_lowercase() == term
    };
    if catalog.iter().any(|t| is_name(t)) {
        return is_name(tool).then_some(4);
    }
    let spec = &tool.spec;
    if spec.identity.to_lowercase().contains(term) {
        Some(3)
    } else if spec.category.to_lowercase().contains(term)
        || spec.groups.iter().any(|g| g.to_lowercase().contains(term))
    {
        Some(2)
    } else if spec.summary.to_lowercase().contains(term) {
        Some(1)
    } else {
        None
    }
}

fn no_match(catalog: &[&CompiledTool], query: &str) -> Answer {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for t in catalog {
        names.insert(t.spec.category.as_str());
        for g in &t.spec.groups {
            names.insert(g.as_str());
        }
    }
    let text = if names.is_empty() {
        format!("No tools match \"{query}\".")
    } else {
        let listed: Vec<&str> = names.into_iter().take(MAX_SUGGESTIONS).collect();
        format!(
            "No tools match \"{query}\". Categories and groups you can search for: {}.",
            listed.join(", ")
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
