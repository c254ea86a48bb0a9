//! The tool argument DSL, as Lisp hands it over: a JSON descriptor.
//!
//! `mevedel-define-tool` turns `(NAME TYPE :required|:optional "doc" .
//! EXTRAS)` forms into this descriptor; here it becomes a typed tree of
//! [`Node`]s that lowering, validation, repair and search all walk. Every
//! mistake in a declaration is reported here, at registration, with the
//! tool and argument it concerns.

use serde_json::{Map, Number, Value};

use crate::error::{Error, ErrorKind, Result};

/// The DSL's argument types. `Path` and `PathOrResource` lower to JSON
/// strings but keep their meaning for guidance and repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    String,
    Path,
    PathOrResource,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

impl Ty {
    /// Parse a DSL type name.
    pub fn parse(name: &str) -> Option<Ty> {
        Some(match name {
            "string" => Ty::String,
            "path" => Ty::Path,
            "path-or-resource" => Ty::PathOrResource,
            "integer" => Ty::Integer,
            "number" => Ty::Number,
            "boolean" => Ty::Boolean,
            "array" => Ty::Array,
            "object" => Ty::Object,
            _ => return None,
        })
    }

    /// The DSL name of this type.
    pub fn dsl_name(self) -> &'static str {
        match self {
            Ty::String => "string",
            Ty::Path => "path",
            Ty::PathOrResource => "path-or-resource",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::Boolean => "boolean",
            Ty::Array => "array",
            Ty::Object => "object",
        }
    }

    /// The JSON Schema type this lowers to.
    pub fn json_name(self) -> &'static str {
        match self {
            Ty::String | Ty::Path | Ty::PathOrResource => "string",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::Boolean => "boolean",
            Ty::Array => "array",
            Ty::Object => "object",
        }
    }

    /// Whether values of this type are JSON strings.
    pub fn is_stringy(self) -> bool {
        matches!(self, Ty::String | Ty::Path | Ty::PathOrResource)
    }

    fn is_numeric(self) -> bool {
        matches!(self, Ty::Integer | Ty::Number)
    }
}

/// A numeric bound as declared: the JSON number (emitted unchanged) and
/// its value for comparisons.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    pub number: Number,
    pub value: f64,
}

/// One schema node: an argument's type and constraints, recursively.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub ty: Ty,
    pub description: Option<String>,
    pub enumeration: Option<Vec<Value>>,
    pub items: Option<Box<Node>>,
    /// Declared properties of an object, in declaration order.
    pub properties: Vec<Prop>,
    pub minimum: Option<Bound>,
    pub maximum: Option<Bound>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
}

/// A named property of an object node (a tool argument at top level).
#[derive(Debug, Clone, PartialEq)]
pub struct Prop {
    pub name: String,
    pub required: bool,
    /// `:access read`: authorised as a read although the tool mutates.
    /// Pipeline metadata only; never part of the provider schema.
    pub access_read: bool,
    pub node: Node,
}

impl Node {
    /// The declared property NAME, if any.
    pub fn property(&self, name: &str) -> Option<&Prop> {
        self.properties.iter().find(|p| p.name == name)
    }
}

/// A whole tool declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    /// How search results and listings name the tool: the short name for
    /// built-ins, `category/name` for wrapped tools.
    pub identity: String,
    pub category: String,
    pub groups: Vec<String>,
    pub description: String,
    pub summary: String,
    /// The arguments: an object node whose properties are the arguments.
    pub root: Node,
    /// A tool described by someone else's JSON Schema (an MCP server's
    /// `inputSchema`): validated and offered exactly as given; `root`
    /// then holds its top-level properties only, for the calling shape,
    /// the contract and ToolSearch.
    pub input_schema: Option<Value>,
}

/// The longest summary, in characters.
pub const SUMMARY_MAX_CHARS: usize = 160;

/// Parse a descriptor (JSON text) into a [`ToolSpec`].
pub fn parse_tool(json: &str) -> Result<ToolSpec> {
    let value: Value = serde_json::from_str(json)
        .map_err(|e| schema_err(format!("tool descriptor is not valid JSON: {e}")))?;
    let obj = value
        .as_object()
        .ok_or_else(|| schema_err("tool descriptor must be a JSON object".into()))?;
    let name = req_str(obj, "name", "tool descriptor")?;
    if name.is_empty() {
        return Err(schema_err("tool name must not be empty".into()));
    }
    let ctx = format!("tool {name}");
    check_keys(
        obj,
        &[
            "name",
            "identity",
            "category",
            "groups",
            "description",
            "summary",
            "args",
            "input_schema",
        ],
        &ctx,
    )?;
    let description = req_str(obj, "description", &ctx)?;
    let category = opt_str(obj, "category", &ctx)?.unwrap_or_else(|| "mevedel".to_string());
    let identity = opt_str(obj, "identity", &ctx)?.unwrap_or_else(|| name.clone());
    let groups = match obj.get("groups") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|g| {
                g.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| schema_err(format!("{ctx}: every group must be a string")))
            })
            .collect::<Result<_>>()?,
        Some(_) => return Err(schema_err(format!("{ctx}: groups must be a list"))),
    };
    let summary = match opt_str(obj, "summary", &ctx)? {
        Some(s) if s.chars().count() > SUMMARY_MAX_CHARS => {
            return Err(schema_err(format!(
                "{ctx}: summary is longer than {SUMMARY_MAX_CHARS} characters"
            )));
        }
        Some(s) => s,
        None => default_summary(&description),
    };
    let args = match obj.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(args)) => args.clone(),
        Some(_) => return Err(schema_err(format!("{ctx}: args must be a list"))),
    };
    let input_schema = match obj.get("input_schema") {
        None | Some(Value::Null) => None,
        Some(schema @ Value::Object(_)) if args.is_empty() => Some(schema.clone()),
        Some(Value::Object(_)) => {
            return Err(schema_err(format!(
                "{ctx}: give args or input_schema, not both"
            )));
        }
        Some(_) => {
            return Err(schema_err(format!(
                "{ctx}: input_schema must be a JSON Schema object"
            )));
        }
    };
    let mut properties = match &input_schema {
        Some(schema) => raw_properties(schema),
        None => Vec::with_capacity(args.len()),
    };
    for arg in &args {
        let prop = parse_arg(arg, &ctx)?;
        if properties.iter().any(|p: &Prop| p.name == prop.name) {
            return Err(schema_err(format!(
                "{ctx}: argument {} is declared twice",
                prop.name
            )));
        }
        properties.push(prop);
    }
    Ok(ToolSpec {
        name,
        identity,
        category,
        groups,
        description,
        summary,
        root: Node {
            ty: Ty::Object,
            description: None,
            enumeration: None,
            items: None,
            properties,
            minimum: None,
            maximum: None,
            min_items: None,
            max_items: None,
        },
        input_schema,
    })
}

/// The top-level properties of the JSON Schema SCHEMA as plain nodes
/// (type and description only): enough for a calling shape and a
/// contract; validation uses SCHEMA itself. A property whose type is
/// not one JSON type shows as an object.
fn raw_properties(schema: &Value) -> Vec<Prop> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(Value::Object(props)) = schema.get("properties") else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, sub)| {
            let ty = match sub.get("type").and_then(Value::as_str) {
                Some("string") => Ty::String,
                Some("integer") => Ty::Integer,
                Some("number") => Ty::Number,
                Some("boolean") => Ty::Boolean,
                Some("array") => Ty::Array,
                _ => Ty::Object,
            };
            Prop {
                name: name.clone(),
                required: required.contains(&name.as_str()),
                access_read: false,
                node: Node {
                    ty,
                    description: sub
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    enumeration: sub.get("enum").and_then(Value::as_array).cloned(),
                    items: None,
                    properties: Vec::new(),
                    minimum: None,
                    maximum: None,
                    min_items: None,
                    max_items: None,
                },
            }
        })
        .collect()
}

/// The first sentence of DESCRIPTION, at most [`SUMMARY_MAX_CHARS`].
///
/// A sentence ends at `.`, `!` or `?` followed by whitespace or the end,
/// or at a blank line; whitespace runs are collapsed.
pub fn default_summary(description: &str) -> String {
    let paragraph = description
        .trim_start()
        .split("\n\n")
        .next()
        .unwrap_or_default();
    let flat: String = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
    let chars: Vec<char> = flat.chars().collect();
    let mut end = chars.len();
    for (i, c) in chars.iter().enumerate() {
        if matches!(c, '.' | '!' | '?') && chars.get(i + 1).is_none_or(|n| *n == ' ') {
            end = i + 1;
            break;
        }
    }
    let sentence: String = chars[..end].iter().collect();
    if sentence.chars().count() <= SUMMARY_MAX_CHARS {
        return sentence;
    }
    let mut cut: String = sentence.chars().take(SUMMARY_MAX_CHARS - 1).collect();
    if let Some(space) = cut.rfind(' ')
        && space > SUMMARY_MAX_CHARS / 2
    {
        cut.truncate(space);
    }
    cut.push('…');
    cut
}

fn parse_arg(arg: &Value, tool_ctx: &str) -> Result<Prop> {
    let obj = arg
        .as_object()
        .ok_or_else(|| schema_err(format!("{tool_ctx}: every argument must be an object")))?;
    let name = req_str(obj, "name", tool_ctx)?;
    check_name(&name, tool_ctx)?;
    let ctx = format!("{tool_ctx}: argument {name}");
    let required = match obj.get("flag").and_then(Value::as_str) {
        Some("required") => true,
        Some("optional") => false,
        _ => {
            return Err(schema_err(format!(
                "{ctx}: say :required or :optional after the type"
            )));
        }
    };
    let access_read = match obj.get("access") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "read" => true,
        Some(_) => return Err(schema_err(format!("{ctx}: :access only accepts read"))),
    };
    let mut rest = obj.clone();
    rest.remove("name");
    rest.remove("flag");
    rest.remove("access");
    let node = parse_node(&rest, &ctx)?;
    if access_read && node.ty != Ty::PathOrResource {
        return Err(schema_err(format!(
            "{ctx}: :access read is only for path-or-resource arguments"
        )));
    }
    Ok(Prop {
        name,
        required,
        access_read,
        node,
    })
}

fn parse_node(obj: &Map<String, Value>, ctx: &str) -> Result<Node> {
    check_keys(
        obj,
        &[
            "type",
            "description",
            "enum",
            "items",
            "properties",
            "required",
            "minimum",
            "maximum",
            "minItems",
            "maxItems",
        ],
        ctx,
    )?;
    let type_name = req_str(obj, "type", ctx)?;
    let ty = Ty::parse(&type_name).ok_or_else(|| {
        schema_err(format!(
            "{ctx}: unknown type {type_name} (expected string, path, path-or-resource, \
             integer, number, boolean, array or object)"
        ))
    })?;
    let only = |key: &str, allowed: bool, which: &str| -> Result<()> {
        if obj.get(key).is_some_and(|v| !v.is_null()) && !allowed {
            Err(schema_err(format!(
                "{ctx}: :{key} is only allowed for {which} arguments"
            )))
        } else {
            Ok(())
        }
    };
    only("items", ty == Ty::Array, "array")?;
    only("minItems", ty == Ty::Array, "array")?;
    only("maxItems", ty == Ty::Array, "array")?;
    only("properties", ty == Ty::Object, "object")?;
    only("required", ty == Ty::Object, "object")?;
    only("minimum", ty.is_numeric(), "integer and number")?;
    only("maximum", ty.is_numeric(), "integer and number")?;
    only(
        "enum",
        ty.is_stringy() || ty.is_numeric(),
        "string, path, integer and number",
    )?;

    let description = opt_str(obj, "description", ctx)?;
    let enumeration = match obj.get("enum") {
        None | Some(Value::Null) => None,
        Some(Value::Array(options)) if !options.is_empty() => {
            for option in options {
                let fits = match ty {
                    Ty::Integer => is_integer(option),
                    Ty::Number => option.is_number(),
                    _ => option.is_string(),
                };
                if !fits {
                    return Err(schema_err(format!(
                        "{ctx}: every :enum option must be a {}",
                        ty.json_name()
                    )));
                }
            }
            Some(options.clone())
        }
        Some(_) => {
            return Err(schema_err(format!("{ctx}: :enum must be a non-empty list")));
        }
    };
    let items = if ty == Ty::Array {
        match obj.get("items") {
            Some(Value::Object(items)) => {
                Some(Box::new(parse_node(items, &format!("{ctx} items"))?))
            }
            _ => {
                return Err(schema_err(format!(
                    "{ctx}: array arguments need :items (a type or (:type TYPE ...))"
                )));
            }
        }
    } else {
        None
    };
    let mut properties = Vec::new();
    if ty == Ty::Object {
        if let Some(props) = obj.get("properties").filter(|v| !v.is_null()) {
            let props = props.as_array().ok_or_else(|| {
                schema_err(format!("{ctx}: :properties must be a plist of NAME SCHEMA"))
            })?;
            for prop in props {
                let prop_obj = prop
                    .as_object()
                    .ok_or_else(|| schema_err(format!("{ctx}: every property must be a schema")))?;
                let name = req_str(prop_obj, "name", ctx)?;
                check_name(&name, ctx)?;
                if properties.iter().any(|p: &Prop| p.name == name) {
                    return Err(schema_err(format!(
                        "{ctx}: property {name} is declared twice"
                    )));
                }
                let mut rest = prop_obj.clone();
                rest.remove("name");
                let node = parse_node(&rest, &format!("{ctx} property {name}"))?;
                properties.push(Prop {
                    name,
                    required: false,
                    access_read: false,
                    node,
                });
            }
        }
        if let Some(required) = obj.get("required").filter(|v| !v.is_null()) {
            let names = required.as_array().ok_or_else(|| {
                schema_err(format!("{ctx}: :required must be a list of property names"))
            })?;
            for name in names {
                let name = name.as_str().ok_or_else(|| {
                    schema_err(format!("{ctx}: :required must be a list of property names"))
                })?;
                let prop = properties
                    .iter_mut()
                    .find(|p| p.name == name)
                    .ok_or_else(|| {
                        schema_err(format!(
                            "{ctx}: :required names {name}, which is not in :properties"
                        ))
                    })?;
                prop.required = true;
            }
        }
    }
    let minimum = bound(obj, "minimum", ty, ctx)?;
    let maximum = bound(obj, "maximum", ty, ctx)?;
    if let (Some(lo), Some(hi)) = (&minimum, &maximum)
        && lo.value > hi.value
    {
        return Err(schema_err(format!(
            "{ctx}: :minimum is greater than :maximum"
        )));
    }
    let min_items = count(obj, "minItems", ctx)?;
    let max_items = count(obj, "maxItems", ctx)?;
    if let (Some(lo), Some(hi)) = (min_items, max_items)
        && lo > hi
    {
        return Err(schema_err(format!(
            "{ctx}: :minItems is greater than :maxItems"
        )));
    }
    Ok(Node {
        ty,
        description,
        enumeration,
        items,
        properties,
        minimum,
        maximum,
        min_items,
        max_items,
    })
}

/// Whether V is a JSON integer in the JSON Schema sense (1.0 counts).
pub fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64()
                || n.is_u64()
                || n.as_f64()
                    .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
        }
        _ => false,
    }
}

fn bound(obj: &Map<String, Value>, key: &str, ty: Ty, ctx: &str) -> Result<Option<Bound>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let value = n
                .as_f64()
                .filter(|f| f.is_finite())
                .ok_or_else(|| schema_err(format!("{ctx}: :{key} must be a finite number")))?;
            if ty == Ty::Integer && value.fract() != 0.0 {
                return Err(schema_err(format!(
                    "{ctx}: :{key} of an integer argument must be an integer"
                )));
            }
            Ok(Some(Bound {
                number: n.clone(),
                value,
            }))
        }
        Some(_) => Err(schema_err(format!("{ctx}: :{key} must be a number"))),
    }
}

fn count(obj: &Map<String, Value>, key: &str, ctx: &str) -> Result<Option<u64>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| schema_err(format!("{ctx}: :{key} must be a non-negative integer"))),
    }
}

fn check_name(name: &str, ctx: &str) -> Result<()> {
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err(schema_err(format!(
            "{ctx}: argument names must be non-empty and contain no whitespace"
        )))
    } else {
        Ok(())
    }
}

fn check_keys(obj: &Map<String, Value>, allowed: &[&str], ctx: &str) -> Result<()> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(schema_err(format!("{ctx}: unknown key :{key}"))),
        None => Ok(()),
    }
}

fn req_str(obj: &Map<String, Value>, key: &str, ctx: &str) -> Result<String> {
    opt_str(obj, key, ctx)?.ok_or_else(|| schema_err(format!("{ctx}: missing {key}")))
}

fn opt_str(obj: &Map<String, Value>, key: &str, ctx: &str) -> Result<Option<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(schema_err(format!("{ctx}: {key} must be a string"))),
    }
}

fn schema_err(message: String) -> Error {
    Error::new(ErrorKind::Schema, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(args: &str) -> Result<ToolSpec> {
        parse_tool(&format!(
            r#"{{"name":"T","description":"Does things. More.","args":{args}}}"#
        ))
    }

    #[test]
    fn parses_every_type_and_extra() {
        let spec = tool(
            r#"[{"name":"s","type":"string","flag":"required","description":"d","enum":["a","b"]},
                {"name":"p","type":"path","flag":"optional"},
                {"name":"r","type":"path-or-resource","flag":"optional","access":"read"},
                {"name":"i","type":"integer","flag":"optional","minimum":0,"maximum":10},
                {"name":"n","type":"number","flag":"optional","minimum":0.5},
                {"name":"b","type":"boolean","flag":"optional"},
                {"name":"a","type":"array","flag":"optional","items":{"type":"string"},"minItems":1,"maxItems":3},
                {"name":"o","type":"object","flag":"optional",
                 "properties":[{"name":"x","type":"integer"},{"name":"y","type":"string"}],
                 "required":["x"]}]"#,
        )
        .unwrap();
        assert_eq!(spec.summary, "Does things.");
        assert_eq!(spec.category, "mevedel");
        assert_eq!(spec.identity, "T");
        let names: Vec<_> = spec
            .root
            .properties
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["s", "p", "r", "i", "n", "b", "a", "o"]);
        assert!(spec.root.properties[0].required);
        assert!(spec.root.properties[2].access_read);
        let o = &spec.root.properties[7].node;
        assert!(o.properties[0].required);
        assert!(!o.properties[1].required);
    }

    #[test]
    fn rejects_bad_declarations_with_context() {
        let cases = [
            (
                r#"[{"name":"x","type":"strin","flag":"required"}]"#,
                "unknown type strin",
            ),
            (
                r#"[{"name":"x","type":"string"}]"#,
                ":required or :optional",
            ),
            (
                r#"[{"name":"x","type":"string","flag":"optional","minimum":1}]"#,
                ":minimum is only allowed",
            ),
            (
                r#"[{"name":"x","type":"array","flag":"optional"}]"#,
                "need :items",
            ),
            (
                r#"[{"name":"x","type":"string","flag":"optional","access":"read"}]"#,
                "only for path-or-resource",
            ),
            (
                r#"[{"name":"x","type":"integer","flag":"optional","minimum":5,"maximum":1}]"#,
                "greater than",
            ),
            (
                r#"[{"name":"x","type":"object","flag":"optional","properties":[{"name":"a","type":"string"}],"required":["b"]}]"#,
                "not in :properties",
            ),
            (
                r#"[{"name":"x","type":"string","flag":"optional","bogus":1}]"#,
                "unknown key :bogus",
            ),
            (
                r#"[{"name":"x","type":"string","flag":"optional"},{"name":"x","type":"string","flag":"optional"}]"#,
                "declared twice",
            ),
            (
                r#"[{"name":"x","type":"integer","flag":"optional","enum":["a"]}]"#,
                "must be a integer",
            ),
        ];
        for (args, expected) in cases {
            match tool(args) {
                Ok(_) => panic!("accepted {args}"),
                Err(e) => {
                    assert_eq!(e.kind, ErrorKind::Schema);
                    assert!(
                        e.message.contains(expected),
                        "{} lacks {expected}",
                        e.message
                    );
                    assert!(e.message.starts_with("tool T"), "{}", e.message);
                }
            }
        }
    }

    #[test]
    fn summary_is_first_sentence_within_limit() {
        assert_eq!(default_summary("Read a file. Then more."), "Read a file.");
        assert_eq!(
            default_summary("Version 1.5 of things is here"),
            "Version 1.5 of things is here"
        );
        assert_eq!(
            default_summary("First line\nsecond line.\n\nOther"),
            "First line second line."
        );
        let long = "word ".repeat(60);
        let s = default_summary(&long);
        assert!(
            s.chars().count() <= SUMMARY_MAX_CHARS,
            "{}",
            s.chars().count()
        );
        assert!(s.ends_with('…'));
    }
}
