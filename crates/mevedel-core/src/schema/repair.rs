//! The repair catalogue: six ordered rules, one bounded pass, all or nothing.
//!
//! Only invalid input gets a repair attempt. One walk visits every
//! declared location once and tries the rules there in order, touching
//! only values that break the schema in the one way a rule knows to fix; a rule never invents a
//! required value and never coerces arbitrary text. The candidate is
//! committed only when the authoritative validator accepts it; otherwise
//! the caller gets the original issues and nothing runs.

use serde_json::{Number, Value};

use super::check::{display_path, shape_name};
use super::dsl::{Bound, Node, Ty, is_integer};

/// The rules, in the order the pass applies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// 1: drop an explicit `null` given for an optional property.
    OmitNull,
    /// 2: parse a string holding exact JSON where a non-string is expected.
    ParseJsonString,
    /// 3: wrap a single valid element where an array is expected.
    WrapSingleton,
    /// 4: `{}` placeholder to `[]` for an optional array allowing zero items.
    EmptyObjectToArray,
    /// 5: `[x](http://x)` in a `path`'s final component to `x`.
    UnwrapAutolink,
    /// 6: a number outside its declared bounds to the nearest bound.
    ClampNumber,
}

impl Rule {
    pub const ALL: [Rule; 6] = [
        Rule::OmitNull,
        Rule::ParseJsonString,
        Rule::WrapSingleton,
        Rule::EmptyObjectToArray,
        Rule::UnwrapAutolink,
        Rule::ClampNumber,
    ];

    /// The rule's number in the catalogue (1-6).
    pub fn number(self) -> u8 {
        match self {
            Rule::OmitNull => 1,
            Rule::ParseJsonString => 2,
            Rule::WrapSingleton => 3,
            Rule::EmptyObjectToArray => 4,
            Rule::UnwrapAutolink => 5,
            Rule::ClampNumber => 6,
        }
    }

    /// The rule's stable id, as recorded in the repair log.
    pub fn id(self) -> &'static str {
        match self {
            Rule::OmitNull => "omit-null",
            Rule::ParseJsonString => "parse-json-string",
            Rule::WrapSingleton => "wrap-singleton",
            Rule::EmptyObjectToArray => "empty-object-to-array",
            Rule::UnwrapAutolink => "unwrap-autolink",
            Rule::ClampNumber => "clamp-number",
        }
    }
}

/// One applied rule, without values (except a clamp's numbers, which
/// are declared schema data and go into the corrective note).
#[derive(Debug, Clone, PartialEq)]
pub struct Repair {
    pub rule: Rule,
    pub instance_path: String,
    pub schema_path: String,
    pub before: &'static str,
    pub after: &'static str,
    /// For a clamp: the number sent and the bound it became.
    pub clamp: Option<(String, String)>,
}

/// Limits that keep one pass bounded whatever the input.
const MAX_REPAIRS: usize = 64;
const MAX_DEPTH: usize = 32;

/// Apply the catalogue to CANDIDATE in place; return what was done, as
/// `Err` when the pass hit its bounds (the candidate must be abandoned).
///
/// One depth-first walk: at each location the rules are tried in
/// catalogue order, then the walk descends into the (possibly new) value.
/// The repairs come back sorted by rule.
pub fn run(root: &Node, candidate: &mut Value) -> Result<Vec<Repair>, Vec<Repair>> {
    let mut pass = Pass {
        repairs: Vec::new(),
        exhausted: false,
    };
    pass.visit(
        root,
        candidate,
        false,
        &mut String::new(),
        &mut String::new(),
        0,
    );
    // Report in catalogue order; within a rule, in the order of the walk.
    pass.repairs.sort_by_key(|r| r.rule.number());
    if pass.exhausted {
        Err(pass.repairs)
    } else {
        Ok(pass.repairs)
    }
}

struct Pass {
    repairs: Vec<Repair>,
    exhausted: bool,
}

impl Pass {
    fn record(&mut self, repair: Repair) -> bool {
        if self.repairs.len() >= MAX_REPAIRS {
            self.exhausted = true;
            return false;
        }
        self.repairs.push(repair);
        true
    }

    fn simple(
        &mut self,
        rule: Rule,
        ipath: &str,
        spath: String,
        before: &'static str,
        after: &'static str,
    ) -> bool {
        self.record(Repair {
            rule,
            instance_path: ipath.to_string(),
            schema_path: spath,
            before,
            after,
            clamp: None,
        })
    }

    /// Repair VALUE, which NODE describes. OPTIONAL says VALUE is an
    /// optional property; returns true when the property must be omitted.
    fn visit(
        &mut self,
        node: &Node,
        value: &mut Value,
        optional: bool,
        ipath: &mut String,
        spath: &mut String,
        depth: usize,
    ) -> bool {
        if depth > MAX_DEPTH {
            self.exhausted = true;
            return false;
        }
        if optional && value.is_null() {
            return self.simple(Rule::OmitNull, ipath, spath.clone(), "null", "absent");
        }
        self.parse_json_string(node, value, ipath, spath);
        self.wrap_singleton(node, value, ipath, spath);
        if optional
            && node.ty == Ty::Array
            && node.min_items.unwrap_or(0) == 0
            && value.as_object().is_some_and(|o| o.is_empty())
            && self.simple(
                Rule::EmptyObjectToArray,
                ipath,
                format!("{spath}/type"),
                "empty-object",
                "empty-array",
            )
        {
            *value = Value::Array(Vec::new());
        }
        self.unwrap_autolink(node, value, ipath, spath);
        self.clamp_number(node, value, ipath, spath);
        match value {
            Value::Object(map) if node.ty == Ty::Object => {
                map.retain(|key, child| {
                    let Some(prop) = node.property(key) else {
                        return true;
                    };
                    let (il, sl) = (ipath.len(), spath.len());
                    push_segment(ipath, key);
                    spath.push_str("/properties");
                    push_segment(spath, key);
                    let omit =
                        self.visit(&prop.node, child, !prop.required, ipath, spath, depth + 1);
                    ipath.truncate(il);
                    spath.truncate(sl);
                    !omit
                });
            }
            Value::Array(items) if node.ty == Ty::Array => {
                if let Some(item_node) = &node.items {
                    for (i, item) in items.iter_mut().enumerate() {
                        let (il, sl) = (ipath.len(), spath.len());
                        ipath.push('/');
                        ipath.push_str(&i.to_string());
                        spath.push_str("/items");
                        self.visit(item_node, item, false, ipath, spath, depth + 1);
                        ipath.truncate(il);
                        spath.truncate(sl);
                    }
                }
            }
            _ => {}
        }
        false
    }

    /// Rule 2.
    fn parse_json_string(&mut self, node: &Node, value: &mut Value, ipath: &str, spath: &str) {
        if node.ty.is_stringy() {
            return;
        }
        let Value::String(text) = value else { return };
        let Some(parsed) = parse_exact(text) else {
            return;
        };
        if conforms(node, &parsed, true)
            && self.simple(
                Rule::ParseJsonString,
                ipath,
                format!("{spath}/type"),
                "string",
                shape_name(&parsed),
            )
        {
            *value = parsed;
        }
    }

    /// Rule 3.
    fn wrap_singleton(&mut self, node: &Node, value: &mut Value, ipath: &str, spath: &str) {
        if node.ty != Ty::Array || value.is_array() {
            return;
        }
        let Some(items) = &node.items else { return };
        if !conforms(items, value, false)
            || node.min_items.is_some_and(|n| n > 1)
            || node.max_items == Some(0)
        {
            return;
        }
        let before = shape_name(value);
        if self.simple(
            Rule::WrapSingleton,
            ipath,
            format!("{spath}/type"),
            before,
            "array",
        ) {
            let element = std::mem::take(value);
            *value = Value::Array(vec![element]);
        }
    }

    /// Rule 5.
    fn unwrap_autolink(&mut self, node: &Node, value: &mut Value, ipath: &str, spath: &str) {
        if node.ty != Ty::Path {
            return;
        }
        let Value::String(text) = value else { return };
        let Some(unwrapped) = unwrap_autolink(text) else {
            return;
        };
        if self.simple(
            Rule::UnwrapAutolink,
            ipath,
            spath.to_string(),
            "markdown-autolink",
            "string",
        ) {
            *value = Value::String(unwrapped);
        }
    }

    /// Rule 6.
    fn clamp_number(&mut self, node: &Node, value: &mut Value, ipath: &str, spath: &str) {
        if !matches!(node.ty, Ty::Integer | Ty::Number)
            || !value.is_number()
            || (node.ty == Ty::Integer && !is_integer(value))
        {
            return;
        }
        let Some(x) = value.as_f64() else { return };
        let (bound, keyword) = match (&node.minimum, &node.maximum) {
            (Some(lo), _) if x < lo.value => (lo, "minimum"),
            (_, Some(hi)) if x > hi.value => (hi, "maximum"),
            _ => return,
        };
        let shape = shape_name(value);
        if self.record(Repair {
            rule: Rule::ClampNumber,
            instance_path: ipath.to_string(),
            schema_path: format!("{spath}/{keyword}"),
            before: shape,
            after: shape,
            clamp: Some((value.to_string(), format!("the {keyword} {}", bound.number))),
        }) {
            *value = Value::Number(bound.number.clone());
        }
    }
}

/// Append NAME to the JSON pointer BUF as one escaped segment.
fn push_segment(buf: &mut String, name: &str) {
    buf.push('/');
    for c in name.chars() {
        match c {
            '~' => buf.push_str("~0"),
            '/' => buf.push_str("~1"),
            c => buf.push(c),
        }
    }
}

/// Parse TEXT only when it is exactly one JSON value: no surrounding
/// whitespace, nothing left over.
fn parse_exact(text: &str) -> Option<Value> {
    if text.is_empty() || text.trim() != text {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// TEXT's final component as a Markdown link to an HTTP(S) URL:
/// `(prefix, label, url)`. Matches exactly what
/// [`MARKDOWN_LINK_PATTERN`](super::lower::MARKDOWN_LINK_PATTERN) matches.
pub fn final_markdown_link(text: &str) -> Option<(&str, &str, &str)> {
    let body = text.strip_suffix(')')?;
    let open = body.rfind('(')?;
    let url = &body[open + 1..];
    if url.contains(')') || !(url.starts_with("http://") || url.starts_with("https://")) {
        return None;
    }
    let before = body[..open].strip_suffix(']')?;
    let start = before.rfind('[')?;
    let label = &before[start + 1..];
    let prefix = &before[..start];
    if label.is_empty()
        || label.contains(['[', ']', '/'])
        || !(prefix.is_empty() || prefix.ends_with('/'))
    {
        return None;
    }
    Some((prefix, label, url))
}

/// When TEXT's final component is an exact Markdown HTTP(S) auto-link,
/// `[x](http://x)` or `[x](https://x)`, TEXT with that component as `x`.
pub fn unwrap_autolink(text: &str) -> Option<String> {
    let (prefix, label, url) = final_markdown_link(text)?;
    let target = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    (target == label).then(|| format!("{prefix}{label}"))
}

/// Whether V satisfies NODE. With TOLERATE_BOUNDS, numbers outside their
/// declared minimum/maximum still count (the clamp rule fixes them later
/// in the same pass).
pub fn conforms(node: &Node, v: &Value, tolerate_bounds: bool) -> bool {
    let in_enum = |v: &Value| {
        node.enumeration
            .as_ref()
            .is_none_or(|options| options.iter().any(|o| json_eq(o, v)))
    };
    let in_bounds = |x: f64| {
        tolerate_bounds
            || (node.minimum.as_ref().is_none_or(|b: &Bound| x >= b.value)
                && node.maximum.as_ref().is_none_or(|b: &Bound| x <= b.value))
    };
    match node.ty {
        Ty::String | Ty::PathOrResource => v.is_string() && in_enum(v),
        Ty::Path => v
            .as_str()
            .is_some_and(|s| final_markdown_link(s).is_none() && in_enum(v)),
        Ty::Integer => is_integer(v) && in_enum(v) && v.as_f64().is_some_and(in_bounds),
        Ty::Number => v.as_f64().is_some_and(in_bounds) && v.is_number() && in_enum(v),
        Ty::Boolean => v.is_boolean(),
        Ty::Array => {
            let Value::Array(items) = v else { return false };
            let n = items.len() as u64;
            node.min_items.is_none_or(|m| n >= m)
                && node.max_items.is_none_or(|m| n <= m)
                && node
                    .items
                    .as_ref()
                    .is_none_or(|item| items.iter().all(|i| conforms(item, i, tolerate_bounds)))
        }
        Ty::Object => {
            let Value::Object(map) = v else { return false };
            node.properties
                .iter()
                .all(|p| !p.required || map.contains_key(&p.name))
                && map.iter().all(|(k, child)| {
                    node.property(k)
                        .is_some_and(|p| conforms(&p.node, child, tolerate_bounds))
                })
        }
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_eq(x, y),
        _ => a == b,
    }
}

fn num_eq(x: &Number, y: &Number) -> bool {
    match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
        (Some(a), Some(b), _, _) => a == b,
        (_, _, Some(a), Some(b)) => a == b,
        _ => x.as_f64() == y.as_f64(),
    }
}

/// The corrective note for committed REPAIRS, one sentence per repair.
pub fn note(tool: &str, repairs: &[Repair]) -> String {
    let parts: Vec<String> = repairs
        .iter()
        .map(|r| {
            let at = display_path(&r.instance_path);
            match r.rule {
                Rule::OmitNull => format!("dropped null optional `{at}`"),
                Rule::ParseJsonString => {
                    format!("parsed string `{at}` as {}", r.after)
                }
                Rule::WrapSingleton => format!("wrapped `{at}` in an array"),
                Rule::EmptyObjectToArray => format!("replaced `{{}}` in `{at}` with `[]`"),
                Rule::UnwrapAutolink => {
                    format!("unwrapped the Markdown link in `{at}`")
                }
                Rule::ClampNumber => match &r.clamp {
                    Some((before, after)) => format!("clamped `{at}` from {before} to {after}"),
                    None => format!("clamped `{at}` to its declared bound"),
                },
            }
        })
        .collect();
    format!(
        "[Note: {tool} arguments repaired before running: {}. Send schema-valid arguments.]",
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autolink_only_exact_and_final() {
        assert_eq!(
            unwrap_autolink("lisp/[foo.el](http://foo.el)").as_deref(),
            Some("lisp/foo.el")
        );
        assert_eq!(
            unwrap_autolink("[README.md](https://README.md)").as_deref(),
            Some("README.md")
        );
        assert_eq!(unwrap_autolink("lisp/[foo.el](http://bar.el)"), None);
        assert_eq!(unwrap_autolink("[lisp](http://lisp)/foo.el"), None);
        assert_eq!(unwrap_autolink("lisp/x[foo.el](http://foo.el)"), None);
        assert_eq!(unwrap_autolink("lisp/[foo.el](ftp://foo.el)"), None);
        assert_eq!(unwrap_autolink("lisp/foo.el"), None);
        assert_eq!(unwrap_autolink("[](http://)"), None);
        assert_eq!(unwrap_autolink("[a(b](http://a(b)"), None);
        // Non-exact links are links (invalid paths) but are not unwrapped.
        assert!(final_markdown_link("lisp/[foo.el](http://bar.el)").is_some());
        assert!(final_markdown_link("lisp/[foo.el](ftp://foo.el)").is_none());
        assert!(final_markdown_link("[a]b](http://x)").is_none());
        assert!(final_markdown_link("[a](http://x)y").is_none());
    }

    #[test]
    fn parse_exact_refuses_padding_and_garbage() {
        assert_eq!(parse_exact("10"), Some(Value::from(10)));
        assert_eq!(parse_exact(" 10"), None);
        assert_eq!(parse_exact("10 "), None);
        assert_eq!(parse_exact("ten"), None);
        assert_eq!(parse_exact("10x"), None);
        assert_eq!(parse_exact(""), None);
    }
}
