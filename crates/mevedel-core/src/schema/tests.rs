//! Tests of compiled tools: every repair rule with positive and negative
//! cases, atomicity, search, and a property test over random schemas.

use std::cell::Cell;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

use super::repair::conforms;
use super::tool_search::{self, Kind};
use super::*;

/// A Grep-shaped tool, as the Lisp DSL would describe it.
fn grep() -> CompiledTool {
    tool(json!({
        "name": "Grep", "category": "filesystem", "groups": ["search", "files"],
        "description": "Search file contents with a regular expression. Returns matching lines.",
        "args": [
            {"name":"pattern","type":"string","flag":"required","description":"Regex."},
            {"name":"path","type":"path","flag":"optional","description":"Where to search."},
            {"name":"glob","type":"string","flag":"optional"},
            {"name":"output_mode","type":"string","flag":"optional",
             "enum":["content","files_with_matches","count"]},
            {"name":"-i","type":"boolean","flag":"optional"},
            {"name":"head_limit","type":"integer","flag":"optional","minimum":0,"maximum":1000},
            {"name":"paths","type":"array","flag":"optional","items":{"type":"path"}},
            {"name":"globs","type":"array","flag":"optional","items":{"type":"string"},"minItems":1},
            {"name":"types","type":"array","flag":"optional","items":{"type":"string"},"maxItems":2},
            {"name":"source","type":"path-or-resource","flag":"optional"},
            {"name":"ratio","type":"number","flag":"optional","minimum":0.5,"maximum":2.5},
            {"name":"options","type":"object","flag":"optional",
             "properties":[{"name":"context","type":"integer","minimum":0,"maximum":10},
                           {"name":"label","type":"string"}],
             "required":["label"]}
        ]
    }))
}

fn tool(descriptor: Value) -> CompiledTool {
    CompiledTool::compile(&descriptor.to_string()).unwrap()
}

fn repaired(outcome: Outcome) -> (Value, Vec<Repair>, String) {
    match outcome {
        Outcome::Repaired {
            arguments,
            repairs,
            note,
        } => (arguments, repairs, note),
        other => panic!("expected a repair, got {other:?}"),
    }
}

fn rules(repairs: &[Repair]) -> Vec<u8> {
    repairs.iter().map(|r| r.rule.number()).collect()
}

fn invalid(outcome: Outcome) -> Vec<Issue> {
    match outcome {
        Outcome::Invalid { issues, guidance } => {
            assert!(
                guidance.starts_with("Invalid arguments for Grep"),
                "{guidance}"
            );
            issues
        }
        other => panic!("expected invalid, got {other:?}"),
    }
}

fn issue_paths(issues: &[Issue]) -> Vec<&str> {
    issues.iter().map(|i| i.instance_path.as_str()).collect()
}

#[test]
fn valid_input_is_never_rewritten() {
    let t = grep();
    for args in [
        json!({"pattern":"defun","path":"src","output_mode":"content","-i":true,"head_limit":10}),
        json!({"pattern":"10","glob":"[a](http://a)","source":"lisp/[x.el](http://x.el)"}),
        json!({"pattern":"x","path":"[lisp](http://lisp)/foo.el"}),
        json!({"pattern":"x","paths":[],"options":{"label":"l"}}),
    ] {
        assert_eq!(t.check(args.clone(), true), Outcome::Valid, "{args}");
    }
}

#[test]
fn rule1_omits_null_only_from_optional_properties() {
    let t = grep();
    let (args, repairs, note) = repaired(t.check(json!({"pattern":"x","path":null}), true));
    assert_eq!(args, json!({"pattern":"x"}));
    assert_eq!(rules(&repairs), [1]);
    assert_eq!(repairs[0].schema_path, "/properties/path");
    assert_eq!((repairs[0].before, repairs[0].after), ("null", "absent"));
    assert!(note.contains("dropped null optional `path`"), "{note}");
    // Nested optional property too.
    let (args, _, _) = repaired(t.check(
        json!({"pattern":"x","options":{"label":"l","context":null}}),
        true,
    ));
    assert_eq!(args, json!({"pattern":"x","options":{"label":"l"}}));
    // Required null stays invalid: no value is invented.
    let issues = invalid(t.check(json!({"pattern":null}), true));
    assert_eq!(issue_paths(&issues), ["/pattern"]);
    assert_eq!(issues[0].message, "expected string, got null");
    let issues = invalid(t.check(json!({"pattern":"x","options":{"label":null}}), true));
    assert_eq!(issue_paths(&issues), ["/options/label"]);
}

#[test]
fn rule2_parses_exact_json_strings_for_non_string_contracts() {
    let t = grep();
    let (args, repairs, note) = repaired(t.check(json!({"pattern":"x","head_limit":"10"}), true));
    assert_eq!(args, json!({"pattern":"x","head_limit":10}));
    assert_eq!(rules(&repairs), [2]);
    assert_eq!((repairs[0].before, repairs[0].after), ("string", "integer"));
    assert!(
        note.contains("parsed string `head_limit` as integer"),
        "{note}"
    );
    let (args, _, _) = repaired(t.check(json!({"pattern":"x","-i":"true"}), true));
    assert_eq!(args, json!({"pattern":"x","-i":true}));
    let (args, _, _) = repaired(t.check(json!({"pattern":"x","paths":"[\"a\",\"b\"]"}), true));
    assert_eq!(args, json!({"pattern":"x","paths":["a","b"]}));
    // Arbitrary strings are never coerced.
    for bad in ["ten", " 10", "10 ", "0x10", "10abc", "", "1.5"] {
        let issues = invalid(t.check(json!({"pattern":"x","head_limit":bad}), true));
        assert_eq!(issue_paths(&issues), ["/head_limit"], "{bad:?}");
    }
    // A parse whose result breaks the contract is refused ("yes" is not JSON,
    // "1" is not a boolean).
    invalid(t.check(json!({"pattern":"x","-i":"1"}), true));
    invalid(t.check(json!({"pattern":"x","output_mode":"\"grep\""}), true));
    // A string contract is never parsed.
    assert_eq!(t.check(json!({"pattern":"10"}), true), Outcome::Valid);
}

#[test]
fn rule2_tolerates_only_ranges_that_rule6_clamps() {
    let t = grep();
    let (args, repairs, note) = repaired(t.check(json!({"pattern":"x","head_limit":"5000"}), true));
    assert_eq!(args, json!({"pattern":"x","head_limit":1000}));
    assert_eq!(rules(&repairs), [2, 6]);
    assert!(note.contains("from 5000 to the maximum 1000"), "{note}");
}

#[test]
fn rule3_wraps_only_a_valid_singleton() {
    let t = grep();
    let (args, repairs, _) = repaired(t.check(json!({"pattern":"x","paths":"src"}), true));
    assert_eq!(args, json!({"pattern":"x","paths":["src"]}));
    assert_eq!(rules(&repairs), [3]);
    assert_eq!((repairs[0].before, repairs[0].after), ("string", "array"));
    // The element must validate as an item.
    let issues = invalid(t.check(json!({"pattern":"x","paths":5}), true));
    assert_eq!(issue_paths(&issues), ["/paths"]);
    let issues = invalid(t.check(json!({"pattern":"x","paths":{"a":1}}), true));
    assert_eq!(issue_paths(&issues), ["/paths"]);
}

#[test]
fn rule4_empty_object_to_array_only_for_optional_arrays_allowing_zero() {
    let t = grep();
    let (args, repairs, note) = repaired(t.check(json!({"pattern":"x","paths":{}}), true));
    assert_eq!(args, json!({"pattern":"x","paths":[]}));
    assert_eq!(rules(&repairs), [4]);
    assert_eq!(
        (repairs[0].before, repairs[0].after),
        ("empty-object", "empty-array")
    );
    assert!(
        note.contains("replaced `{}` in `paths` with `[]`"),
        "{note}"
    );
    let (args, _, _) = repaired(t.check(json!({"pattern":"x","types":{}}), true));
    assert_eq!(args, json!({"pattern":"x","types":[]}));
    // minItems 1: an empty array would not do.
    invalid(t.check(json!({"pattern":"x","globs":{}}), true));
    // A required array keeps its placeholder invalid.
    let req = tool(json!({"name":"Grep","description":"d","args":[
        {"name":"files","type":"array","flag":"required","items":{"type":"string"}}]}));
    let issues = invalid(req.check(json!({"files":{}}), true));
    assert_eq!(issue_paths(&issues), ["/files"]);
}

#[test]
fn rule5_unwraps_autolinks_only_in_the_final_component_of_path_args() {
    let t = grep();
    let (args, repairs, note) = repaired(t.check(
        json!({"pattern":"x","path":"lisp/[foo.el](http://foo.el)"}),
        true,
    ));
    assert_eq!(args, json!({"pattern":"x","path":"lisp/foo.el"}));
    assert_eq!(rules(&repairs), [5]);
    assert!(
        note.contains("unwrapped the Markdown link in `path`"),
        "{note}"
    );
    let (args, _, _) = repaired(t.check(
        json!({"pattern":"x","paths":["ok","[a.md](https://a.md)"]}),
        true,
    ));
    assert_eq!(args, json!({"pattern":"x","paths":["ok","a.md"]}));
    // string and path-or-resource args are left alone (and valid).
    assert_eq!(
        t.check(
            json!({"pattern":"[a.el](http://a.el)","glob":"[b](http://b)"}),
            true
        ),
        Outcome::Valid
    );
    assert_eq!(
        t.check(json!({"pattern":"x","source":"[a.el](http://a.el)"}), true),
        Outcome::Valid
    );
    // A non-exact link is an invalid path, but not repaired.
    let issues = invalid(t.check(
        json!({"pattern":"x","path":"lisp/[a.el](http://b.el)"}),
        true,
    ));
    assert_eq!(
        issues[0].message,
        "must be a raw filesystem path, not a Markdown link or URL"
    );
    // Not the final component: valid, untouched.
    assert_eq!(
        t.check(
            json!({"pattern":"x","path":"[lisp](http://lisp)/a.el"}),
            true
        ),
        Outcome::Valid
    );
}

#[test]
fn rule6_clamps_to_declared_bounds_and_reports_before_after() {
    let t = grep();
    let (args, repairs, note) = repaired(t.check(json!({"pattern":"x","head_limit":-3}), true));
    assert_eq!(args, json!({"pattern":"x","head_limit":0}));
    assert_eq!(rules(&repairs), [6]);
    assert_eq!(repairs[0].schema_path, "/properties/head_limit/minimum");
    assert!(
        note.contains("clamped `head_limit` from -3 to the minimum 0"),
        "{note}"
    );
    let (args, _, note) = repaired(t.check(json!({"pattern":"x","ratio":9.75}), true));
    assert_eq!(args, json!({"pattern":"x","ratio":2.5}));
    assert!(note.contains("from 9.75 to the maximum 2.5"), "{note}");
    let (args, _, _) = repaired(t.check(
        json!({"pattern":"x","options":{"label":"l","context":99}}),
        true,
    ));
    assert_eq!(
        args,
        json!({"pattern":"x","options":{"label":"l","context":10}})
    );
    // A non-integer for an integer is not "clamped" into shape.
    invalid(t.check(json!({"pattern":"x","head_limit":5000.5}), true));
}

#[test]
fn three_rule_repair_of_the_benchmark_call() {
    let t = grep();
    let outcome = t
        .check_json(
            r#"{"pattern":"defun","path":null,"head_limit":"10","-i":"true"}"#,
            true,
        )
        .unwrap();
    let (args, repairs, _) = repaired(outcome);
    assert_eq!(args, json!({"pattern":"defun","head_limit":10,"-i":true}));
    assert_eq!(rules(&repairs), [1, 2, 2]);
}

#[test]
fn atomic_two_issues_one_unrepairable_reports_both_and_commits_nothing() {
    let t = grep();
    match t.check(json!({"pattern":"x","head_limit":"10","bogus":1}), true) {
        Outcome::Abandoned {
            issues,
            repairs,
            guidance,
        } => {
            assert_eq!(issue_paths(&issues), ["/head_limit", "/bogus"]);
            assert_eq!(rules(&repairs), [2]);
            assert!(
                guidance.contains("- head_limit: expected integer, got string"),
                "{guidance}"
            );
            assert!(
                guidance.contains("- bogus: is not an accepted argument"),
                "{guidance}"
            );
            assert!(guidance.contains("none was applied"), "{guidance}");
        }
        other => panic!("expected abandoned, got {other:?}"),
    }
}

#[test]
fn the_invalid_benchmark_call_lists_every_issue_without_values() {
    let t = grep();
    let issues = invalid(
        t.check_json(r#"{"path":"src","head_limit":"ten","bogus":1}"#, true)
            .unwrap(),
    );
    let mut paths = issue_paths(&issues);
    paths.sort();
    assert_eq!(paths, ["/bogus", "/head_limit", "/pattern"]);
    assert!(!format!("{issues:?}").contains("ten"));
}

#[test]
fn repair_disabled_validates_but_never_mutates() {
    let t = grep();
    let issues = invalid(t.check(json!({"pattern":"x","head_limit":"10"}), false));
    assert_eq!(issue_paths(&issues), ["/head_limit"]);
    assert_eq!(t.check(json!({"pattern":"x"}), false), Outcome::Valid);
}

#[test]
fn malformed_argument_json_is_a_schema_error() {
    match grep().check_json("{\"pattern\":", true) {
        Err(e) => {
            assert_eq!(e.kind, crate::ErrorKind::Schema);
            assert!(e.message.contains("not valid JSON"), "{}", e.message);
        }
        Ok(o) => panic!("accepted malformed JSON: {o:?}"),
    }
}

// ToolSearch

fn catalog() -> Vec<Arc<CompiledTool>> {
    let mk = |name: &str, category: &str, groups: &[&str], description: &str| {
        Arc::new(tool(
            json!({"name":name,"category":category,"groups":groups,"description":description,
                    "args":[{"name":"file_path","type":"path","flag":"required","description":"File."},
                            {"name":"limit","type":"integer","flag":"optional","minimum":1}]}),
        ))
    };
    let mut out = vec![
        mk(
            "Imenu",
            "code",
            &["navigation"],
            "Fast outline of a file's definitions.",
        ),
        mk(
            "Treesitter",
            "code",
            &["navigation"],
            "Syntax tree of a file.",
        ),
        mk(
            "Xref",
            "code",
            &["navigation"],
            "Find definitions and references.",
        ),
        mk(
            "Read",
            "filesystem",
            &[],
            "Read a file. Long description here.",
        ),
    ];
    for i in 0..30 {
        out.push(mk(
            &format!("Task{i:02}"),
            "tasks",
            &["planning"],
            "Track a checklist item.",
        ));
    }
    out
}

/// The index of TOOLS.
fn index(tools: &[Arc<CompiledTool>]) -> tool_search::Index {
    tool_search::Index::new(tools.to_vec())
}

/// QUERY's answer over the whole [`catalog`].
fn search_catalog(query: &str) -> tool_search::Answer {
    index(&catalog()).search(query)
}

/// Assert that TEXT contains each of PARTS, naming the one it lacks.
fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} not in {text:?}");
    }
}

#[test]
fn search_few_matches_return_full_contracts() {
    let a = search_catalog("NAVIGATION");
    assert_eq!(a.kind, Kind::Contracts);
    assert_eq!(a.shown, ["Imenu", "Treesitter", "Xref"]);
    assert_contains(
        &a.text,
        &[
            "## Imenu\nCalling shape: (Imenu :file_path string [:limit integer])",
            "- file_path (string, required, a raw filesystem path): File.",
            "- limit (integer, optional, minimum 1)",
            "Fast outline of a file's definitions.",
        ],
    );
}

#[test]
fn search_exact_name_selects_only_that_tool() {
    // "read" is a substring of other summaries? No: but "file" is; an exact
    // name term must not pull in the rest.
    let a = search_catalog("read");
    assert_eq!(a.shown, ["Read"]);
    let a = search_catalog("imenu, xref");
    assert_eq!(a.kind, Kind::Contracts);
    assert_eq!(a.shown, ["Imenu", "Xref"]);
}

#[test]
fn search_broad_queries_return_at_most_20_shapes_with_totals() {
    let tools = catalog();
    let a = index(&tools).search("planning code");
    assert_eq!(a.kind, Kind::Shapes);
    assert_eq!(a.total, 33);
    assert_eq!(a.shown.len(), tool_search::MAX_SHAPES);
    assert!(
        a.text
            .starts_with("33 tools match \"planning code\"; showing the first 20:")
    );
    assert_contains(
        &a.text,
        &[
            "- (Imenu :file_path string [:limit integer]) - Fast outline",
            "exact tool names",
        ],
    );
    // Duplicated identities count once.
    let mut dup = tools.clone();
    dup.extend(tools.iter().take(4).cloned());
    assert_eq!(index(&dup).search("code").total, 3);
}

#[test]
fn search_ranks_name_then_category_and_groups_then_summary() {
    let mk = |name: &str, groups: &[&str], description: &str| {
        Arc::new(tool(
            json!({"name": name, "category": "misc", "groups": groups,
                             "description": description, "args": []}),
        ))
    };
    let tools = vec![
        mk("Alpha", &[], "Counts the widgets."),
        mk("Beta", &["Widgets"], "Something else."),
        mk("WidgetTool", &[], "No such word."),
        // Its summary names the term too, but its name scores.
        mk("MakeWidget", &[], "Makes a widget."),
        mk("Gamma", &[], "Unrelated."),
    ];
    let a = index(&tools).search("WIDGET");
    assert_eq!(a.shown, ["WidgetTool", "MakeWidget", "Beta", "Alpha"]);
    assert_eq!(a.total, 4);
    // A term matches within one tool's words, never across two tools.
    assert_eq!(index(&tools).search("widgets.beta").total, 0);
    // Each term counts at its best; terms are ORed.
    let a = index(&tools).search("unrelated widgettool");
    assert_eq!(a.shown, ["WidgetTool", "Gamma"]);
}

#[test]
fn search_without_match_suggests_sorted_categories_and_groups() {
    let a = search_catalog("zebra");
    assert_eq!(a.kind, Kind::NoMatch);
    assert!(a.text.ends_with(
        "Categories and groups you can search for: code, filesystem, navigation, planning, tasks."
    ));
    assert_eq!(index(&[]).search("zebra").text, "No tools match \"zebra\".");
}

// Property test: random DSL schemas, schema-directed random inputs.

const NAMES: [&str; 6] = ["a", "b", "path", "-i", "n", "x/y"];

/// DESCRIPTOR with the bounds that are present set under KEYS (lower,
/// upper); an absent bound stays absent.
fn with_bounds<T: Into<Value>>(
    mut descriptor: Value,
    keys: [&str; 2],
    (lo, hi): (Option<T>, Option<T>),
) -> Value {
    for (key, bound) in keys.into_iter().zip([lo, hi]) {
        if let Some(bound) = bound {
            descriptor[key] = bound.into();
        }
    }
    descriptor
}

fn leaf_descriptor() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(json!({"type":"string"})),
        Just(json!({"type":"string","enum":["red","green"]})),
        Just(json!({"type":"path"})),
        Just(json!({"type":"path-or-resource"})),
        Just(json!({"type":"boolean"})),
        (
            proptest::option::of(-5i64..5),
            proptest::option::of(5i64..50)
        )
            .prop_map(|b| with_bounds(
                json!({"type":"integer"}),
                ["minimum", "maximum"],
                b
            )),
        (
            proptest::option::of(-2.5f64..0.0),
            proptest::option::of(1.0f64..9.5)
        )
            .prop_map(|b| with_bounds(json!({"type":"number"}), ["minimum", "maximum"], b)),
        Just(json!({"type":"integer","enum":[1,2,3]})),
    ]
    .boxed()
}

/// FIELDS (a [`NAMES`] index, a schema, whether it is required) with
/// each schema named, keeping only the first field of each name (object
/// properties and tool arguments must be unique).
fn named_fields(fields: Vec<(usize, Value, bool)>) -> Vec<(Value, bool)> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (i, mut schema, req) in fields {
        if seen.contains(&i) {
            continue;
        }
        seen.push(i);
        schema["name"] = json!(NAMES[i]);
        out.push((schema, req));
    }
    out
}

fn node_descriptor() -> BoxedStrategy<Value> {
    leaf_descriptor()
        .prop_recursive(3, 12, 4, |inner| {
            prop_oneof![
                (
                    inner.clone(),
                    proptest::option::of(0u64..2),
                    proptest::option::of(2u64..4)
                )
                    .prop_map(|(items, lo, hi)| {
                        with_bounds(
                            json!({"type":"array","items":items}),
                            ["minItems", "maxItems"],
                            (lo, hi),
                        )
                    }),
                proptest::collection::vec((0..NAMES.len(), inner, any::<bool>()), 0..4).prop_map(
                    |props| {
                        let fields = named_fields(props);
                        let required: Vec<Value> = fields
                            .iter()
                            .filter(|(_, req)| *req)
                            .map(|(schema, _)| schema["name"].clone())
                            .collect();
                        let list: Vec<Value> =
                            fields.into_iter().map(|(schema, _)| schema).collect();
                        json!({"type":"object","properties":list,"required":required})
                    }
                ),
            ]
        })
        .boxed()
}

fn tool_descriptor() -> BoxedStrategy<Value> {
    proptest::collection::vec((0..NAMES.len(), node_descriptor(), any::<bool>()), 0..5)
        .prop_map(|args| {
            let list: Vec<Value> = named_fields(args)
                .into_iter()
                .map(|(mut schema, req)| {
                    schema["flag"] = json!(if req { "required" } else { "optional" });
                    schema
                })
                .collect();
            json!({"name":"P","description":"Property tool.","args":list})
        })
        .boxed()
}

fn arbitrary_json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-100i64..100).prop_map(Value::from),
        (-100.0f64..100.0).prop_map(Value::from),
        "[a-z0-9\\[\\]():/. \"]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            proptest::collection::btree_map("[a-z]{1,2}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// Inputs shaped by NODE: mostly plausible, often perturbed in exactly
/// the ways the catalogue knows, sometimes arbitrary.
fn input_for(node: &dsl::Node) -> BoxedStrategy<Value> {
    let typed: BoxedStrategy<Value> = match node.ty {
        dsl::Ty::String | dsl::Ty::PathOrResource => {
            let mut options: Vec<Value> = vec![json!("src"), json!("10"), json!("[a](http://a)")];
            if let Some(e) = &node.enumeration {
                options.extend(e.iter().cloned());
            }
            proptest::sample::select(options).boxed()
        }
        dsl::Ty::Path => proptest::sample::select(vec![
            json!("src/a.el"),
            json!("lisp/[foo.el](http://foo.el)"),
            json!("[x](https://x)"),
            json!("[x](https://y)"),
            json!("[d](http://d)/f"),
            json!("[a(b](http://a(b)"),
            json!("a/[b]c](http://c)"),
        ])
        .boxed(),
        dsl::Ty::Integer => prop_oneof![
            (-60i64..60).prop_map(Value::from),
            Just(json!(2.0)),
            Just(json!(2.5)),
        ]
        .boxed(),
        dsl::Ty::Number => (-12.0f64..12.0).prop_map(Value::from).boxed(),
        dsl::Ty::Boolean => any::<bool>().prop_map(Value::from).boxed(),
        dsl::Ty::Array => {
            let item = node
                .items
                .as_ref()
                .map_or_else(arbitrary_json, |i| input_for(i));
            prop_oneof![
                proptest::collection::vec(item.clone(), 0..4).prop_map(Value::from),
                item,
            ]
            .boxed()
        }
        dsl::Ty::Object => {
            let props: Vec<(String, BoxedStrategy<Option<Value>>)> = node
                .properties
                .iter()
                .map(|p| {
                    (
                        p.name.clone(),
                        proptest::option::weighted(0.7, input_for(&p.node)).boxed(),
                    )
                })
                .collect();
            let names: Vec<String> = props.iter().map(|(n, _)| n.clone()).collect();
            let values: Vec<BoxedStrategy<Option<Value>>> =
                props.into_iter().map(|(_, s)| s).collect();
            (values, proptest::option::weighted(0.1, arbitrary_json()))
                .prop_map(move |(values, extra)| {
                    let mut m = serde_json::Map::new();
                    for (name, v) in names.iter().zip(values) {
                        if let Some(v) = v {
                            m.insert(name.clone(), v);
                        }
                    }
                    if let Some(extra) = extra {
                        m.insert("zz_extra".into(), extra);
                    }
                    Value::Object(m)
                })
                .boxed()
        }
    };
    let as_text = typed.clone().prop_map(|v| Value::String(v.to_string()));
    prop_oneof![
        8 => typed,
        1 => Just(Value::Null),
        1 => Just(json!({})),
        1 => as_text,
        1 => arbitrary_json(),
    ]
    .boxed()
}

#[test]
fn property_repair_never_panics_never_changes_valid_input_commits_only_valid() {
    const CASES: u32 = 20_000;
    let runs = Cell::new(0u32);
    let repaired_count = Cell::new(0u32);
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = tool_descriptor().prop_flat_map(|descriptor| {
        let spec =
            dsl::parse_tool(&descriptor.to_string()).expect("generator made a bad descriptor");
        let input = input_for(&spec.root);
        (Just(descriptor), input)
    });
    let result = runner.run(&strategy, |(descriptor, input)| {
        runs.set(runs.get() + 1);
        let t = CompiledTool::compile(&descriptor.to_string())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let valid = t.is_valid(&input);
        // Our structural check agrees with the authoritative validator.
        prop_assert_eq!(
            conforms(&t.spec.root, &input, false),
            valid,
            "conforms disagrees"
        );
        let outcome = t.check(input.clone(), true);
        if valid {
            prop_assert_eq!(&outcome, &Outcome::Valid);
        }
        match &outcome {
            Outcome::Repaired {
                arguments, repairs, ..
            } => {
                repaired_count.set(repaired_count.get() + 1);
                prop_assert!(!valid);
                prop_assert!(!repairs.is_empty());
                prop_assert!(t.is_valid(arguments), "committed repair does not validate");
            }
            Outcome::Invalid { guidance, .. } | Outcome::Abandoned { guidance, .. } => {
                prop_assert!(!valid);
                let listed = guidance.lines().filter(|l| l.starts_with("- ")).count();
                prop_assert!(listed <= check::MAX_GUIDANCE_ISSUES + 1);
            }
            Outcome::Valid => {}
        }
        // Without repair nothing is ever mutated.
        let off = t.check(input, false);
        let mutated = matches!(off, Outcome::Repaired { .. } | Outcome::Abandoned { .. });
        prop_assert!(!mutated, "repair ran while disabled");
        Ok(())
    });
    if let Err(e) = result {
        panic!("property failed: {e}");
    }
    eprintln!(
        "schema property test: {} cases run, {} committed repairs",
        runs.get(),
        repaired_count.get()
    );
    assert!(runs.get() >= CASES);
    assert!(
        repaired_count.get() > CASES / 50,
        "too few repairs exercised"
    );
}

#[test]
fn a_raw_input_schema_is_offered_and_validated_as_given() {
    let schema = json!({
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "Text to echo."},
            "times": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
            "opts": {"anyOf": [{"type": "string"}, {"type": "object"}]}
        },
        "required": ["message"]
    });
    let t = tool(json!({
        "name": "mcp__everything__echo", "category": "mcp",
        "description": "Echoes back the input.", "input_schema": schema
    }));
    // Offered exactly as the server gave it.
    let offered: Value = serde_json::from_str(&t.provider_schema).unwrap();
    assert_eq!(offered, schema);
    // The shape comes from the top-level properties.
    assert!(
        t.shape
            .starts_with("(mcp__everything__echo :message string"),
        "{}",
        t.shape
    );
    assert!(t.shape.contains("[:times integer]"), "{}", t.shape);
    // Validation is the server's own schema, nested parts included.
    assert!(t.is_valid(&json!({"message": "hi", "opts": {"a": 1}})));
    assert!(!t.is_valid(&json!({"times": 2})));
    assert!(!t.is_valid(&json!({"message": "hi", "times": 0})));
    assert!(!t.is_valid(&json!({"message": "hi", "tags": [1]})));
    // Not both ways of describing arguments at once.
    let both = json!({"name": "T", "description": "D.", "input_schema": {"type": "object"},
                      "args": [{"name": "a", "type": "string", "flag": "required"}]});
    assert!(CompiledTool::compile(&both.to_string()).is_err());
}
