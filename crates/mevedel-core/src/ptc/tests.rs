use std::collections::HashSet;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::*;

fn set(names: &[&str]) -> HashSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Drive SRC to its end, answering each call with ANSWER; return the
/// final action and every request in the order it was made.
fn drive(
    src: &str,
    budgets: Budgets,
    mut answer: impl FnMut(&Request) -> (bool, String),
) -> (Action, Vec<Request>) {
    let tools = set(&["Read", "Grep", "Glob", "Bash", "Ask"]);
    let standalone = set(&["Ask"]);
    let mut m = Machine::new(src, &tools, &standalone, budgets);
    let mut seen = Vec::new();
    for _ in 0..1000 {
        match m.resume() {
            Action::Calls(requests) => {
                // Feed in reverse to show completion order does not matter.
                for r in requests.iter().rev() {
                    let (ok, text) = answer(r);
                    m.feed(r.n, ok, &text);
                }
                seen.extend(requests);
            }
            done => return (done, seen),
        }
    }
    panic!("the program never finished");
}

fn echo(r: &Request) -> (bool, String) {
    (true, format!("{}{}", r.tool, r.args))
}

fn done(src: &str) -> String {
    match drive(src, Budgets::default(), echo).0 {
        Action::Done { text, .. } => text,
        other => panic!("{src}: expected a value, got {other:?}"),
    }
}

fn failed(src: &str) -> String {
    match drive(src, Budgets::default(), echo).0 {
        Action::Failed { message, .. } => message,
        other => panic!("{src}: expected a failure, got {other:?}"),
    }
}

#[test]
fn corpus_of_valid_programs() {
    for (src, want) in [
        ("(+ 1 2 3)", "6"),
        ("(- 10)", "-10"),
        ("(/ 7 2)", "3.5"),
        ("(/ 8 2)", "4"),
        ("(mod -7 3)", "2"),
        ("(str \"a\" 1 true null [1 2])", "a1true[1,2]"),
        ("(let [x 2 y (* x 3)] (+ x y))", "8"),
        ("(if (> 2 1) \"yes\" \"no\")", "yes"),
        ("(when false 1)", "null"),
        ("(and 1 2 null 3)", "null"),
        ("(or null false 7)", "7"),
        ("(count \"héllo\")", "5"),
        ("(substring \"abcdef\" 1 -1)", "bcde"),
        ("(split \"a,b,,c\" \",\")", "[\"a\",\"b\",\"\",\"c\"]"),
        ("(join [\"a\" 1 \"b\"] \"-\")", "a-1-b"),
        ("(lines \"a\\nb\\n\")", "[\"a\",\"b\"]"),
        ("(upper (trim \"  x \"))", "X"),
        ("(replace \"a.b.c\" \".\" \"/\")", "a/b/c"),
        (
            "(re-find \"(\\\\w+)@(\\\\w+)\" \"mail: me@host now\")",
            "[\"me@host\",\"me\",\"host\"]",
        ),
        (
            "(re-all \"\\\\d+\" \"a1 b22 c333\")",
            "[\"1\",\"22\",\"333\"]",
        ),
        ("(re-match? \"^def\" \"define\")", "true"),
        ("(map (fn [x] (* x x)) (range 4))", "[0,1,4,9]"),
        ("(filter (fn [x] (> x 1)) [0 1 2 3])", "[2,3]"),
        ("(reduce (fn [a x] (+ a x)) 0 (range 1 11))", "55"),
        (
            "(sort-by (fn [m] (get m :n)) [{:n 3} {:n 1}])",
            "[{\"n\":1},{\"n\":3}]",
        ),
        ("(sort [\"b\" \"a\" \"c\"])", "[\"a\",\"b\",\"c\"]"),
        ("(distinct [1 2 1 3 2])", "[1,2,3]"),
        ("(some (fn [x] (> x 2)) [1 5 3])", "5"),
        ("(every? (fn [x] (> x 0)) [1 2])", "true"),
        (
            "(get-in (json-parse \"{\\\"a\\\":[{\\\"b\\\":7}]}\") [:a 0 :b])",
            "7",
        ),
        ("(get {:a 1} :b \"none\")", "none"),
        ("(keys (assoc {:a 1} :b 2))", "[\"a\",\"b\"]"),
        ("(dissoc {:a 1 :b 2} :a)", "{\"b\":2}"),
        ("(merge {:a 1} {:a 2 :c 3})", "{\"a\":2,\"c\":3}"),
        ("(json-str {:a [1 null true]})", "{\"a\":[1,null,true]}"),
        ("(nth [1 2] 5 0)", "0"),
        ("(take (range 10) 3)", "[0,1,2]"),
        ("(concat [1] [2 3])", "[1,2,3]"),
        ("(flatten [[1] 2 [3 4]])", "[1,2,3,4]"),
        ("(type 1.5)", "number"),
        ("(number \" 42 \")", "42"),
        ("; a comment\n(do 1 2)", "2"),
        ("1 2 3", "3"),
        ("(contains? {:a 1} :a)", "true"),
    ] {
        assert_eq!(done(src), want, "{src}");
    }
}

#[test]
fn tool_calls_are_values_in_order() {
    assert_eq!(done("(Read :file_path \"a\")"), "Read{\"file_path\":\"a\"}");
    let text = done("(let [a (Read :file_path \"a\") b (Grep :pattern a)] (count b))");
    assert_eq!(
        text,
        "Grep{\"pattern\":\"Read{\\\"file_path\\\":\\\"a\\\"}\"}"
            .chars()
            .count()
            .to_string()
    );
    let (action, seen) = drive(
        "(map (fn [f] (Read :file_path f)) [\"x\" \"y\"])",
        Budgets::default(),
        echo,
    );
    assert!(matches!(action, Action::Done { .. }));
    assert_eq!(
        seen.iter().map(|r| (r.n, r.batch)).collect::<Vec<_>>(),
        vec![(1, None), (2, None)]
    );
}

#[test]
fn joins_keep_input_order_with_out_of_order_completion() {
    // `drive' feeds each batch in reverse, the last call finishing first.
    let (action, seen) = drive(
        "(parallel-map [f [\"a\" \"b\" \"c\"]] (Read :file_path f))",
        Budgets::default(),
        |r| (true, format!("<{}>", r.n)),
    );
    assert_eq!(
        action,
        Action::Done {
            text: "[\"<1>\",\"<2>\",\"<3>\"]".into(),
            steps: match &action {
                Action::Done { steps, .. } => *steps,
                _ => 0,
            }
        }
    );
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|r| r.batch == Some(1)));
    let text = done("(parallel (Read :file_path \"a\") (Glob :pattern \"*\"))");
    assert_eq!(
        text,
        "[\"Read{\\\"file_path\\\":\\\"a\\\"}\",\"Glob{\\\"pattern\\\":\\\"*\\\"}\"]"
    );
    // A one-call join is not concurrency.
    let (_, seen) = drive(
        "(parallel (Read :file_path \"a\"))",
        Budgets::default(),
        echo,
    );
    assert_eq!(seen[0].batch, None);
}

#[test]
fn failures_are_values() {
    let (action, _) = drive(
        "(let [r (Read :file_path \"gone\")] (if (failed? r) (str \"missing: \" (error-message r)) r))",
        Budgets::default(),
        |_| (false, "Error: no such file".into()),
    );
    assert!(
        matches!(action, Action::Done { ref text, .. } if text == "missing: Error: no such file")
    );
    // A direct call's failure is the tool's own text.
    let (action, _) = drive("(Read :file_path \"gone\")", Budgets::default(), |_| {
        (false, "Error: no such file".into())
    });
    assert!(
        matches!(action, Action::Failed { ref message, .. } if message == "Error: no such file")
    );
    // Using a failure as an argument stops the program with guidance.
    let (action, _) = drive(
        "(Grep :pattern (Read :file_path \"x\"))",
        Budgets::default(),
        |r| (r.tool.as_ref() != "Read", "Error: nope".into()),
    );
    assert!(matches!(action, Action::Failed { ref message, .. } if message.contains("failed?")));
}

#[test]
fn oversized_child_value_is_a_guest_failure() {
    let budgets = Budgets {
        value: 1000,
        ..Budgets::default()
    };
    let (action, _) = drive(
        "(let [r (Read :file_path \"big\")] (if (failed? r) (error-message r) \"fits\"))",
        budgets,
        |_| (true, "x".repeat(5000)),
    );
    match action {
        Action::Done { text, .. } => assert!(text.contains("exceeds the value budget"), "{text}"),
        other => panic!("{other:?}"),
    }
    let budgets = Budgets {
        value: 1000,
        retained: 2500,
        ..Budgets::default()
    };
    let (action, _) = drive(
        "(map (fn [i] (count (Read :file_path (str i)))) (range 10))",
        budgets,
        |_| (true, "y".repeat(900)),
    );
    assert!(matches!(action, Action::Failed { ref message, .. } if message.contains("retained")));
}

#[test]
fn corpus_of_invalid_programs() {
    for (src, want) in [
        ("", "empty"),
        ("(", "never closed"),
        (")", "unexpected"),
        ("(Read :file_path)", "pairs"),
        ("(Read \"x\")", "pairs"),
        ("(Read \"x\" 1)", "named"),
        ("(Read :a 1 :a 2)", "twice"),
        ("(Write :file_path \"x\")", "neither an operation"),
        ("(read :file_path \"x\")", "case-sensitive"),
        ("(let [x] x)", "pairs"),
        ("(let [map 1] map)", "reserved"),
        ("(-)", "at least 1 argument"),
        ("(substring \"x\")", "takes 2 to 3 arguments"),
        ("(parallel (+ 1 2))", "direct tool call"),
        ("(parallel-map [f [1]] (str f))", "direct tool call"),
        ("y", "not bound"),
        ("(+ 1 \"a\")", "expects a number"),
        ("(/ 1 0)", "division by zero"),
        ("(+ 9223372036854775807 1)", "overflow"),
        ("(nth [1] 3)", "outside"),
        ("(json-parse \"{\")", "json-parse"),
        ("(re-find \"(\" \"x\")", "invalid regexp"),
        ("(fail \"stop here\")", "stop here"),
        (
            "(Ask :question \"q\") (Read :file_path \"x\")",
            "standalone only",
        ),
        ("(do (Ask :question \"q\"))", "standalone only"),
        ("()", "not an expression"),
        ("(1 2)", "starts with"),
        ("\"unterminated", "never closed"),
        ("\"\\q\"", "unknown escape"),
        ("12abc", "not a number"),
        ("{:a}", "pairs"),
        ("(Read :file_path (fn [x] x))", "no JSON form"),
        ("(map 1 [1])", "expects a function"),
    ] {
        let message = failed(src);
        assert!(message.contains(want), "{src:?}: {message}");
    }
    // Standalone-only tools are fine alone.
    assert!(done("(Ask :question \"q\")").starts_with("Ask"));
}

#[test]
fn corpus_of_hostile_programs() {
    let deep = format!("{}1{}", "(do ".repeat(5000), ")".repeat(5000));
    assert!(failed(&deep).contains("nested"));
    let deep_list = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(failed(&deep_list).contains("nested"));
    // Loops are bounded by the step budget.
    let message = failed("(map (fn [x] (map (fn [y] (+ x y)) (range 1000))) (range 1000))");
    assert!(message.contains("step budget"), "{message}");
    assert!(failed("(distinct (range 5000))").contains("step budget"));
    // Huge values are bounded by the value budget.
    let message = failed("(reduce (fn [s x] (str s s)) \"xxxxxxxx\" (range 64))");
    assert!(message.contains("value budget"), "{message}");
    assert!(failed("(range 1000000000)").contains("at most"));
    let message = failed("(let [a (range 50000)] [a a a a a a a a])");
    assert!(message.contains("value budget"), "{message}");
    // A join is bounded.
    assert!(failed("(parallel-map [f (range 500)] (Read :file_path (str f)))").contains("at most"));
    let huge = format!("\"{}\"", "z".repeat(300_000));
    assert!(failed(&huge).contains("at most"));
    // Catastrophic-looking regexps run in linear time.
    assert_eq!(
        done("(re-match? \"(a+)+$\" (str (join (map (fn [x] \"a\") (range 5000))) \"b\"))"),
        "false"
    );
}

#[test]
fn direct_calls_are_recognised() {
    let tools = set(&["Read", "Grep"]);
    let none = HashSet::new();
    let m = Machine::new("(Read :file_path \"x\")", &tools, &none, Budgets::default());
    assert_eq!(m.direct(), Some("Read"));
    let m = Machine::new(
        "(count (Read :file_path \"x\"))",
        &tools,
        &none,
        Budgets::default(),
    );
    assert_eq!(m.direct(), None);
}

/// Programs made of the dialect's words: valid, nearly valid and junk.
fn program() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("1".to_string()),
        Just("-3".to_string()),
        Just("2.5".to_string()),
        Just("\"a,b\"".to_string()),
        Just(":k".to_string()),
        Just("x".to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        Just("(range 5)".to_string()),
        Just("(Read :file_path \"f\")".to_string()),
        "[ -~]{0,4}",
    ];
    const HEADS: &[&str] = &[
        "+",
        "-",
        "*",
        "/",
        "mod",
        "<",
        "=",
        "str",
        "count",
        "substring",
        "split",
        "join",
        "re-find",
        "re-all",
        "map",
        "filter",
        "reduce",
        "sort",
        "distinct",
        "get",
        "get-in",
        "assoc",
        "merge",
        "json-parse",
        "json-str",
        "nth",
        "take",
        "concat",
        "range",
        "if",
        "let",
        "fn",
        "and",
        "or",
        "parallel",
        "parallel-map",
        "Read",
        "Grep",
        "failed?",
        "sort-by",
        "some",
        "Ask",
        "do",
        "when",
    ];
    atom.prop_recursive(6, 64, 5, |inner| {
        prop_oneof![
            (
                proptest::sample::select(HEADS),
                proptest::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(h, args)| format!("({h} {})", args.join(" "))),
            proptest::collection::vec(inner.clone(), 0..4)
                .prop_map(|v| format!("[{}]", v.join(" "))),
            proptest::collection::vec(inner.clone(), 0..4).prop_map(|v| format!(
                "(let [x {}] {})",
                v.first().cloned().unwrap_or_default(),
                v.join(" ")
            )),
            proptest::collection::vec(inner, 1..3)
                .prop_map(|v| format!("(map (fn [x] {}) [1 2 \"s\"])", v.join(" "))),
        ]
    })
}

/// Run CASES generated programs to their end; none may panic or run
/// away (the budgets end every one).
fn fuzz(cases: u32) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let budgets = Budgets {
        steps: 5_000,
        ..Budgets::default()
    };
    runner
        .run(&program(), |src| {
            let (action, _) = drive(&src, budgets, |r| (r.n % 3 != 0, format!("r{}", r.n)));
            prop_assert!(!matches!(action, Action::Calls(_)));
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn generated_programs_never_panic() {
    fuzz(3_000);
}

/// [`generated_programs_never_panic`] with a million cases:
/// `cargo test --release --lib -- --ignored generated_programs_long`.
#[test]
#[ignore]
fn generated_programs_long() {
    fuzz(1_000_000);
}

#[test]
fn budgets_from_a_caller_are_at_least_one() {
    let b = Budgets::at_least_one(0, -3, 7, i64::MAX);
    assert_eq!((b.steps, b.depth, b.value), (1, 1, 7));
    assert_eq!(b.retained, usize::try_from(i64::MAX).unwrap_or(usize::MAX));
}

#[test]
fn actions_become_the_lists_lisp_reads() {
    let calls = Action::Calls(vec![Request {
        n: 1,
        tool: "Read".into(),
        args: "{}".into(),
        batch: None,
    }]);
    assert_eq!(
        calls.to_datum(),
        Datum::List(vec![
            Datum::Symbol("calls".into()),
            Datum::List(vec![Datum::List(vec![
                Datum::Int(1),
                Datum::str("Read"),
                Datum::str("{}"),
                Datum::Nil,
            ])]),
        ])
    );
    let done = Action::Done {
        text: "ok".into(),
        steps: 3,
    };
    assert_eq!(
        done.to_datum(),
        Datum::List(vec![
            Datum::Symbol("done".into()),
            Datum::str("ok"),
            Datum::Int(3)
        ])
    );
}
