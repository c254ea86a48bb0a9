//! Lowering the DSL to JSON Schema, to gptel's argument plists and to
//! calling shapes.
//!
//! The provider schema is what models see. The validation schema is the
//! same document plus one internal constraint: a `path` argument whose
//! final component is a Markdown link to an HTTP(S) URL is invalid, as
//! the path guidance says (so repair rule 5, which unwraps the exact
//! auto-link form, only ever touches invalid input). Both are built fresh for every
//! registration; nothing is shared between tools.

use serde_json::{Map, Value, json};

use super::dsl::{Node, Prop, ToolSpec, Ty};

/// Appended to the description of every `path` argument.
pub const PATH_GUIDANCE: &str = "Pass a raw filesystem path, not Markdown or a URL.";

/// A final path component that is a Markdown link to an HTTP(S) URL,
/// `[TEXT](http...)`, TEXT without `/` or brackets, the URL without
/// parentheses. (No back-reference: that would force the slow regex
/// engine on every validated path.)
pub const MARKDOWN_LINK_PATTERN: &str = r"(?:^|/)\[[^\[\]/]+\]\(https?://[^()]*\)$";

/// The provider JSON Schema of SPEC's arguments, its keys sorted: the
/// same bytes in every request whatever order serde_json keeps (the ACP
/// SDK turns on its `preserve_order` for the whole build).
pub fn provider_schema(spec: &ToolSpec) -> Value {
    let mut schema = lower(&spec.root, false);
    schema.sort_all_objects();
    schema
}

/// The schema validation compiles: the provider schema plus internal checks.
pub fn validation_schema(spec: &ToolSpec) -> Value {
    lower(&spec.root, true)
}

fn lower(node: &Node, internal: bool) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), json!(node.ty.json_name()));
    let description = match (node.ty, &node.description) {
        (Ty::Path, Some(d)) if !d.trim().is_empty() => {
            Some(format!("{} {PATH_GUIDANCE}", d.trim_end()))
        }
        (Ty::Path, _) => Some(PATH_GUIDANCE.to_string()),
        (_, d) => d.clone(),
    };
    if let Some(d) = description {
        out.insert("description".into(), Value::String(d));
    }
    if let Some(options) = &node.enumeration {
        out.insert("enum".into(), Value::Array(options.clone()));
    }
    if let Some(items) = &node.items {
        out.insert("items".into(), lower(items, internal));
    }
    if let Some(n) = node.min_items {
        out.insert("minItems".into(), json!(n));
    }
    if let Some(n) = node.max_items {
        out.insert("maxItems".into(), json!(n));
    }
    if let Some(b) = &node.minimum {
        out.insert("minimum".into(), Value::Number(b.number.clone()));
    }
    if let Some(b) = &node.maximum {
        out.insert("maximum".into(), Value::Number(b.number.clone()));
    }
    if node.ty == Ty::Object {
        let mut props = Map::new();
        for p in &node.properties {
            props.insert(p.name.clone(), lower(&p.node, internal));
        }
        out.insert("properties".into(), Value::Object(props));
        out.insert("required".into(), required_names(&node.properties));
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    if internal && node.ty == Ty::Path {
        out.insert("not".into(), json!({ "pattern": MARKDOWN_LINK_PATTERN }));
    }
    Value::Object(out)
}

fn required_names(props: &[Prop]) -> Value {
    Value::Array(
        props
            .iter()
            .filter(|p| p.required)
            .map(|p| Value::String(p.name.clone()))
            .collect(),
    )
}

/// gptel's `:args` for SPEC: one object per argument, in declaration
/// order, holding `name`, `optional` and the argument's provider schema.
/// gptel rebuilds the provider schema from these for each backend.
pub fn gptel_args(spec: &ToolSpec) -> Value {
    Value::Array(
        spec.root
            .properties
            .iter()
            .map(|p| {
                let mut schema = match lower(&p.node, false) {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                schema.insert("name".into(), Value::String(p.name.clone()));
                if !p.required {
                    schema.insert("optional".into(), Value::Bool(true));
                }
                Value::Object(schema)
            })
            .collect(),
    )
}

/// The calling shape of SPEC, e.g. `(Grep :pattern string [:path string])`.
/// Bracketed arguments are optional; types are the provider's JSON types.
pub fn calling_shape(spec: &ToolSpec) -> String {
    let mut out = format!("({}", spec.identity);
    for p in &spec.root.properties {
        let arg = format!(":{} {}", p.name, p.node.ty.json_name());
        if p.required {
            out.push(' ');
            out.push_str(&arg);
        } else {
            out.push_str(" [");
            out.push_str(&arg);
            out.push(']');
        }
    }
    out.push(')');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::dsl::parse_tool;

    fn spec(args: &str) -> ToolSpec {
        parse_tool(&format!(
            r#"{{"name":"T","description":"D.","args":{args}}}"#
        ))
        .unwrap()
    }

    fn golden(arg: &str, expected: Value) {
        let s = spec(&format!("[{arg}]"));
        let schema = provider_schema(&s);
        let lowered = &schema["properties"]["x"];
        assert_eq!(lowered, &expected, "lowering {arg}");
    }

    #[test]
    fn golden_string() {
        golden(
            r#"{"name":"x","type":"string","flag":"required","description":"Text.","enum":["a","b"]}"#,
            json!({"type":"string","description":"Text.","enum":["a","b"]}),
        );
    }

    #[test]
    fn golden_path_gets_guidance() {
        golden(
            r#"{"name":"x","type":"path","flag":"required","description":"File to read."}"#,
            json!({"type":"string","description":
                   "File to read. Pass a raw filesystem path, not Markdown or a URL."}),
        );
        golden(
            r#"{"name":"x","type":"path","flag":"required"}"#,
            json!({"type":"string","description":PATH_GUIDANCE}),
        );
    }

    #[test]
    fn golden_path_or_resource_has_no_guidance_and_no_access_key() {
        golden(
            r#"{"name":"x","type":"path-or-resource","flag":"required","description":"Source.","access":"read"}"#,
            json!({"type":"string","description":"Source."}),
        );
    }

    #[test]
    fn golden_numbers_booleans() {
        golden(
            r#"{"name":"x","type":"integer","flag":"optional","minimum":0,"maximum":100}"#,
            json!({"type":"integer","minimum":0,"maximum":100}),
        );
        golden(
            r#"{"name":"x","type":"number","flag":"optional","minimum":0.5,"enum":[0.5,1]}"#,
            json!({"type":"number","minimum":0.5,"enum":[0.5,1]}),
        );
        golden(
            r#"{"name":"x","type":"boolean","flag":"optional","description":"Flag."}"#,
            json!({"type":"boolean","description":"Flag."}),
        );
    }

    #[test]
    fn golden_array_and_object() {
        golden(
            r#"{"name":"x","type":"array","flag":"optional","items":{"type":"path"},"minItems":1,"maxItems":4}"#,
            json!({"type":"array","items":{"type":"string","description":PATH_GUIDANCE},
                   "minItems":1,"maxItems":4}),
        );
        golden(
            r#"{"name":"x","type":"object","flag":"optional","description":"Opts.",
                "properties":[{"name":"k","type":"integer","minimum":1}],"required":["k"]}"#,
            json!({"type":"object","description":"Opts.",
                   "properties":{"k":{"type":"integer","minimum":1}},
                   "required":["k"],"additionalProperties":false}),
        );
    }

    #[test]
    fn golden_top_level() {
        let s = spec(
            r#"[{"name":"a","type":"string","flag":"required"},{"name":"b","type":"boolean","flag":"optional"}]"#,
        );
        assert_eq!(
            provider_schema(&s),
            json!({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"boolean"}},
                   "required":["a"],"additionalProperties":false})
        );
        assert_eq!(
            gptel_args(&s),
            json!([{"name":"a","type":"string"},{"name":"b","type":"boolean","optional":true}])
        );
        assert_eq!(calling_shape(&s), "(T :a string [:b boolean])");
    }

    #[test]
    fn validation_schema_adds_markdown_link_check_only_for_path() {
        let s = spec(
            r#"[{"name":"p","type":"path","flag":"required"},{"name":"r","type":"path-or-resource","flag":"required"}]"#,
        );
        let v = validation_schema(&s);
        assert_eq!(
            v["properties"]["p"]["not"]["pattern"],
            json!(MARKDOWN_LINK_PATTERN)
        );
        assert!(v["properties"]["r"].get("not").is_none());
        assert!(provider_schema(&s)["properties"]["p"].get("not").is_none());
    }
}
