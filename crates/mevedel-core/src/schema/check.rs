//! Validation with the `jsonschema` crate, and value-free issues.
//!
//! Issue messages name argument paths, expected types and declared
//! constraints, never the values the model sent: they go back to the
//! model as retry guidance and into the redacted repair log.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};

/// At most this many issues are listed in retry guidance.
pub const MAX_GUIDANCE_ISSUES: usize = 8;

/// Validation stops collecting after this many issues.
const MAX_COLLECTED_ISSUES: usize = 64;

/// One way the arguments break the schema, without the offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// JSON pointer to the offending argument (`/head_limit`).
    pub instance_path: String,
    /// JSON pointer to the violated keyword in the schema.
    pub schema_path: String,
    /// What is wrong, for people and models.
    pub message: String,
}

/// Compile SCHEMA once; the validator is reused for every call.
pub fn compile(schema: &Value) -> Result<Validator> {
    jsonschema::validator_for(schema).map_err(|e| {
        Error::new(
            ErrorKind::Internal,
            format!("the lowered schema does not compile: {e}"),
        )
    })
}

/// Every issue of INSTANCE (up to a fixed bound), in schema order.
pub fn issues(validator: &Validator, instance: &Value) -> Vec<Issue> {
    let mut out: Vec<Issue> = Vec::new();
    for error in validator.iter_errors(instance) {
        for issue in describe(&error) {
            if !out.contains(&issue) {
                out.push(issue);
            }
        }
        if out.len() >= MAX_COLLECTED_ISSUES {
            out.truncate(MAX_COLLECTED_ISSUES);
            break;
        }
    }
    out
}

fn describe(error: &ValidationError<'_>) -> Vec<Issue> {
    let at = error.instance_path().as_str().to_string();
    let schema_path = error.schema_path().as_str().to_string();
    let one = |message: String| {
        vec![Issue {
            instance_path: at.clone(),
            schema_path: schema_path.clone(),
            message,
        }]
    };
    match error.kind() {
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.as_str().to_string(),
                TypeKind::Multiple(set) => set
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            one(format!(
                "expected {expected}, got {}",
                shape_name(error.instance())
            ))
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or("?");
            vec![Issue {
                instance_path: join_pointer(&at, name),
                schema_path: schema_path.clone(),
                message: "is required but missing".into(),
            }]
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|name| Issue {
                instance_path: join_pointer(&at, name),
                schema_path: schema_path.clone(),
                message: "is not an accepted argument".into(),
            })
            .collect(),
        ValidationErrorKind::Enum { options } => {
            let listed = match options.as_ref() {
                Value::Array(options) => options
                    .iter()
                    .take(12)
                    .map(|o| match o {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                other => other.to_string(),
            };
            one(format!("must be one of: {listed}"))
        }
        ValidationErrorKind::Minimum { limit } => one(format!("must be at least {limit}")),
        ValidationErrorKind::Maximum { limit } => one(format!("must be at most {limit}")),
        ValidationErrorKind::MinItems { limit } => {
            one(format!("must have at least {limit} item(s)"))
        }
        ValidationErrorKind::MaxItems { limit } => {
            one(format!("must have at most {limit} item(s)"))
        }
        ValidationErrorKind::Not { .. } => {
            one("must be a raw filesystem path, not a Markdown link or URL".into())
        }
        other => one(format!("does not satisfy `{}`", other.keyword())),
    }
}

/// The shape of V: its JSON type, with empty containers named apart.
pub fn shape_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if super::dsl::is_integer(v) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(a) if a.is_empty() => "empty-array",
        Value::Array(_) => "array",
        Value::Object(o) if o.is_empty() => "empty-object",
        Value::Object(_) => "object",
    }
}

/// Append NAME as a segment to the JSON pointer BASE.
pub fn join_pointer(base: &str, name: &str) -> String {
    format!("{base}/{}", name.replace('~', "~0").replace('/', "~1"))
}

/// How a JSON pointer is shown to the model: without the leading slash,
/// and the whole arguments object as `arguments`.
pub fn display_path(pointer: &str) -> String {
    match pointer.strip_prefix('/') {
        Some(rest) if !rest.is_empty() => rest.to_string(),
        _ => "arguments".to_string(),
    }
}

/// Bounded, value-free retry guidance for TOOL: at most
/// [`MAX_GUIDANCE_ISSUES`] issues, then a count of the rest, then the
/// calling SHAPE.
pub fn guidance(tool: &str, shape: &str, issues: &[Issue], abandoned: bool) -> String {
    let mut out = format!(
        "Invalid arguments for {tool}; nothing was run. {} issue{}:\n",
        issues.len(),
        if issues.len() == 1 { "" } else { "s" }
    );
    for issue in issues.iter().take(MAX_GUIDANCE_ISSUES) {
        out.push_str(&format!(
            "- {}: {}\n",
            display_path(&issue.instance_path),
            issue.message
        ));
    }
    if issues.len() > MAX_GUIDANCE_ISSUES {
        out.push_str(&format!(
            "- ... and {} more\n",
            issues.len() - MAX_GUIDANCE_ISSUES
        ));
    }
    if abandoned {
        out.push_str("Automatic repair could not fix every issue, so none was applied.\n");
    }
    out.push_str(&format!(
        "Expected: {shape}\nCall {tool} again with arguments that match."
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn issues_are_value_free_and_located() {
        let schema = json!({"type":"object","properties":{
            "n":{"type":"integer","maximum":5},"e":{"type":"string","enum":["a","b"]}},
            "required":["r"],"additionalProperties":false});
        let v = compile(&schema).unwrap();
        let found = issues(
            &v,
            &json!({"n":"SECRET-1","e":"SECRET-2","bogus":"SECRET-3"}),
        );
        let text = format!("{found:?}");
        assert!(!text.contains("SECRET"), "{text}");
        let paths: Vec<_> = found.iter().map(|i| i.instance_path.as_str()).collect();
        for expected in ["/n", "/e", "/r", "/bogus"] {
            assert!(paths.contains(&expected), "{paths:?} lacks {expected}");
        }
        let n = found.iter().find(|i| i.instance_path == "/n");
        assert_eq!(
            n.map(|i| i.message.as_str()),
            Some("expected integer, got string")
        );
    }

    #[test]
    fn guidance_is_bounded() {
        let many: Vec<Issue> = (0..11)
            .map(|i| Issue {
                instance_path: format!("/a{i}"),
                schema_path: "/x".into(),
                message: "is not an accepted argument".into(),
            })
            .collect();
        let text = guidance("T", "(T)", &many, false);
        assert_eq!(text.matches("\n- a").count(), MAX_GUIDANCE_ISSUES);
        assert!(text.contains("and 3 more"));
        assert!(text.contains("11 issues"));
        assert!(text.ends_with("Call T again with arguments that match."));
    }
}
