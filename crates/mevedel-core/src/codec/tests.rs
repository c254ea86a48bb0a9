//! Golden and adversarial tests of render-data blocks.

use super::block::{self, Block, Owner};
use super::reader::Sexp;

fn encode(printed: &str, owner: Option<&str>) -> String {
    block::encode(printed.as_bytes(), owner).unwrap()
}

fn owners(text: &str) -> Vec<Owner> {
    block::scan(text.as_bytes())
        .into_iter()
        .map(|b| b.owner)
        .collect()
}

fn bound(id: &str) -> Owner {
    Owner::Bound(id.as_bytes().to_vec())
}

fn decode(text: &str, block: &Block) -> Sexp {
    block::decode(text.as_bytes(), block).unwrap()
}

fn kw(name: &str) -> Sexp {
    Sexp::symbol(name)
}

#[test]
fn golden_encoding() {
    assert_eq!(
        encode("(:exit 0 :summary \"ok\")", Some("toolu_01")),
        "\n<!-- mevedel-render-data -->\n(:tool-use-id \"toolu_01\" :exit 0 :summary \"ok\")\n<!-- /mevedel-render-data -->\n"
    );
    assert_eq!(
        encode("(:kind patch)", None),
        "\n<!-- mevedel-render-data -->\n(:kind patch)\n<!-- /mevedel-render-data -->\n"
    );
    // An earlier owner is replaced, never duplicated.
    assert_eq!(
        encode("(:tool-use-id \"old\" :a 1)", Some("new")),
        "\n<!-- mevedel-render-data -->\n(:tool-use-id \"new\" :a 1)\n<!-- /mevedel-render-data -->\n"
    );
    assert_eq!(
        encode("nil", None),
        "\n<!-- mevedel-render-data -->\nnil\n<!-- /mevedel-render-data -->\n"
    );
}

#[test]
fn encode_refuses_non_plists_with_clear_errors() {
    for (printed, what) in [
        ("(:a)", "odd number"),
        ("(a 1)", "not a keyword"),
        ("(:a . 1)", "dotted"),
        ("\"str\"", "not a list"),
        ("(:a 1) (:b 2)", "trailing text"),
        ("(:buffer #<buffer x>)", "not readable"),
        ("(:x #.(delete-file \"f\"))", "not readable"),
    ] {
        match block::encode(printed.as_bytes(), Some("id")) {
            Err(e) => {
                assert_eq!(e.kind, crate::ErrorKind::Schema);
                assert!(e.message.contains(what), "{printed}: {}", e.message);
            }
            Ok(text) => panic!("{printed} encoded as {text}"),
        }
    }
}

#[test]
fn finds_and_decodes_blocks_between_text() {
    let text = format!(
        "result line 1{}between{}tail",
        encode("(:n 1 :s \"x\")", Some("a")),
        encode("(:n 2)", Some("b"))
    );
    let blocks = block::scan(text.as_bytes());
    assert_eq!(blocks.len(), 2);
    assert_eq!(&text[..blocks[0].start], "result line 1");
    assert_eq!(&text[blocks[0].end..blocks[1].start], "between");
    assert_eq!(&text[blocks[1].end..], "tail");
    assert_eq!(
        decode(&text, &blocks[0]),
        Sexp::List(
            vec![
                kw(":tool-use-id"),
                Sexp::string("a"),
                kw(":n"),
                Sexp::Int(1),
                kw(":s"),
                Sexp::string("x")
            ],
            None
        )
    );
    assert_eq!(blocks[1].owner, bound("b"));
}

#[test]
fn nested_delimiter_strings_are_payload() {
    // A complete marker-shaped block inside a string of the payload.
    let inner = encode("(:evil t)", Some("victim"));
    let printed = format!(
        "(:note {:?} :more \"<!-- /mevedel-render-data -->\")",
        inner
    );
    let text = format!("before{}after", encode(&printed, Some("outer")));
    let blocks = block::scan(text.as_bytes());
    assert_eq!(blocks.len(), 1, "{text}");
    assert_eq!(blocks[0].owner, bound("outer"));
    assert_eq!(&text[blocks[0].end..], "after");
    match decode(&text, &blocks[0]) {
        Sexp::List(items, None) => assert_eq!(items[3], Sexp::string(&inner)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn malformed_candidates_stay_text() {
    let open = "\n<!-- mevedel-render-data -->\n";
    let close = "\n<!-- /mevedel-render-data -->\n";
    for payload in [
        "(:a 1) (:b 2)",                 // trailing Lisp data
        "(:a 1) junk",                   // trailing text
        "[1 2]",                         // not a plist
        "(1 2)",                         // keys not keywords
        "(:a 1 :b)",                     // odd
        "(:a . 1)",                      // dotted
        "\"just a string\"",             // not a list
        "(:b #<buffer *scratch*>)",      // unreadable
        "(:x #.(shell-command \"rm\"))", // read-time evaluation
        "(:x #1=(a . #1#))",             // circular
        "(:x \"unterminated)",           // runs into the close
        "(:x (((((",                     // unbalanced
    ] {
        let text = format!("{open}{payload}{close}");
        assert!(block::scan(text.as_bytes()).is_empty(), "{payload}");
    }
    // Missing close, and a close preceded by non-whitespace.
    assert!(block::scan(format!("{open}(:a 1)\n").as_bytes()).is_empty());
    assert!(block::scan(format!("{open}(:a 1) x{close}").as_bytes()).is_empty());
}

#[test]
fn scan_continues_after_a_rejected_candidate() {
    let bad = "\n<!-- mevedel-render-data -->\n(1 2)\n<!-- /mevedel-render-data -->\n";
    let text = format!("{bad}{}", encode("(:ok t)", Some("id")));
    assert_eq!(owners(&text), vec![bound("id")]);
}

#[test]
fn owners_bound_unbound_invalid() {
    let text = format!(
        "{}{}{}",
        encode("(:a 1)", Some("x")),
        encode("(:a 1)", None),
        "\n<!-- mevedel-render-data -->\n(:tool-use-id 42)\n<!-- /mevedel-render-data -->\n"
    );
    assert_eq!(
        owners(&text),
        vec![bound("x"), Owner::Unbound, Owner::Invalid]
    );
}

#[test]
fn authorisation_by_owner_and_provenance() {
    let text = format!(
        "{}{}",
        encode("(:a 1)", Some("mine")),
        encode("(:b 2)", None)
    );
    let blocks = block::scan(text.as_bytes());
    let nobody = |_: &Block| false;
    let everybody = |_: &Block| true;
    assert!(block::authorised(&blocks[0], Some(b"mine"), &nobody));
    assert!(!block::authorised(&blocks[0], Some(b"other"), &everybody));
    assert!(!block::authorised(&blocks[0], None, &everybody));
    // Unbound blocks need provenance, and never answer for an ID.
    assert!(!block::authorised(&blocks[1], None, &nobody));
    assert!(block::authorised(&blocks[1], None, &everybody));
    assert!(!block::authorised(&blocks[1], Some(b"mine"), &everybody));
    // Scrubbing covers both kinds.
    assert!(block::scrubbed(&blocks[0], Some(b"mine"), &nobody));
    assert!(!block::scrubbed(&blocks[1], Some(b"mine"), &nobody));
    assert!(block::scrubbed(&blocks[1], Some(b"mine"), &everybody));
}

#[test]
fn adjacent_blocks_do_not_overlap() {
    let one = encode("(:a 1)", Some("x"));
    let text = format!("{one}{}", one.trim_start_matches('\n'));
    let blocks = block::scan(text.as_bytes());
    assert_eq!(blocks.len(), 2);
    assert!(blocks[0].end <= blocks[1].start);
}

#[test]
fn five_megabyte_payload() {
    let big = "line of payload text <!-- /mevedel-render-data --> \"q\"\n".repeat(95_000);
    assert!(big.len() > 5_000_000);
    let printed = format!("(:body {big:?} :n 1)");
    let text = format!("head{}tail", encode(&printed, Some("big")));
    let blocks = block::scan(text.as_bytes());
    assert_eq!(blocks.len(), 1);
    match decode(&text, &blocks[0]) {
        Sexp::List(items, None) => assert_eq!(items[3], Sexp::string(&big)),
        other => panic!("{:?}", std::mem::discriminant(&other)),
    }
}

#[test]
fn deep_nesting_is_text_not_a_crash() {
    let text = format!(
        "\n<!-- mevedel-render-data -->\n(:x {}{})\n<!-- /mevedel-render-data -->\n",
        "(".repeat(1_000_000),
        ")".repeat(1_000_000)
    );
    assert!(block::scan(text.as_bytes()).is_empty());
}

#[test]
fn quick_paths_answer_plain_payloads() {
    // The scan's quick path and the plain reader must actually take the
    // usual payloads (the fuzz properties only check they agree).
    let payload = b"(:tool-use-id \"toolu_1\" :kind bash :exit 0 :duration 1.25 \
                    :summary \"a \\\"quoted\\\" \\n line\" :files (\"a\" \"b\") :counts (:lines 60))";
    assert_eq!(block::quick_agrees(payload, 0), Some(true));
    let mut scratch = super::reader::Scratch::default();
    let plain = super::reader::read_plain(payload, 0, &mut super::reader::Tree, &mut scratch);
    let full = super::reader::read_one(payload, 0, &mut super::reader::Tree);
    match (plain, full) {
        (Some((plain, end)), Ok((full, full_end))) => {
            assert_eq!(plain, full);
            assert_eq!(end, full_end);
            assert_eq!(end, payload.len());
        }
        (plain, full) => panic!("plain {plain:?}, full {full:?}"),
    }
    // Off the quick path: quotes, vectors and escaped symbols.
    for other in [&b"(:a 'x)"[..], b"(:a [1])", b"(:a b\\ c)", b"(:a . 1)"] {
        assert_eq!(block::quick_agrees(other, 0), None, "{other:?}");
    }
}

#[test]
fn split_scan_agrees_at_every_cut() {
    // A block whose string holds a whole block, a failed candidate, and
    // plain blocks: with two parts, the cut falls at every byte once.
    let inner = encode("(:evil t)", Some("victim"));
    let text = format!(
        "x{}\n<!-- mevedel-render-data -->\n(:odd){}y{}",
        encode(&format!("(:note {inner:?})"), Some("outer")),
        encode("(:a 1)", Some("p")),
        encode("(:b 2)", None),
    );
    let single = block::scan_in_parts(text.as_bytes(), 1);
    assert_eq!(single.len(), 3, "{text}");
    for len in 1..=text.len() {
        let prefix = &text.as_bytes()[..len];
        let want = block::scan_in_parts(prefix, 1);
        for parts in 2..=4 {
            assert_eq!(
                block::scan_in_parts(prefix, parts),
                want,
                "{parts} parts of {len} bytes"
            );
        }
    }
    // Cuts at every byte of the full text, the prefix held fixed: pad
    // in front so that the two-part cut walks through the text.
    for pad in 0..text.len() {
        let padded = format!("{}{text}", "-".repeat(pad));
        let want = block::scan_in_parts(padded.as_bytes(), 1);
        assert_eq!(want.len(), 3);
        assert_eq!(
            block::scan_in_parts(padded.as_bytes(), 2),
            want,
            "pad {pad}"
        );
    }
}

#[test]
fn large_texts_scan_in_parts_exactly() {
    // Above the threshold `scan' splits the work; the answer is the same.
    let segment = format!(
        "{}{}",
        "line of tool output\n".repeat(40),
        encode("(:k \"<!-- mevedel-render-data -->\" :n 1)", Some("id"))
    );
    let text = segment.repeat(block::PARALLEL_MIN / segment.len() * 2 + 1);
    assert!(text.len() >= block::PARALLEL_MIN);
    let blocks = block::scan(text.as_bytes());
    assert_eq!(blocks, block::scan_in_parts(text.as_bytes(), 1));
    assert_eq!(blocks.len(), text.len() / segment.len());
}
