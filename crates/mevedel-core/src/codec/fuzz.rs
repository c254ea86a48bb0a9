//! Property tests of the decoder (proptest): no input panics, and what
//! the encoder writes the scanner finds and decodes back unchanged.
//!
//! Each property runs `MEVEDEL_FUZZ_CASES` cases (default 20,000, so a
//! plain `cargo test` stays quick); the 1,000,000-case run is
//! `MEVEDEL_FUZZ_CASES=200000 cargo test --release codec::fuzz` (five
//! properties). Every property prints how many cases it ran.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::block::{self, Owner};
use super::print::print;
use super::reader::{Scratch, Sexp, Tree, read_one, read_plain};
use crate::text::internal;

fn cases() -> u32 {
    std::env::var("MEVEDEL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// Run PROPERTY over STRATEGY; report and return the number of cases.
fn run<S: Strategy>(name: &str, strategy: S, property: impl Fn(S::Value)) -> u32
where
    S::Value: std::fmt::Debug,
{
    let cases = cases();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let ran = std::cell::Cell::new(0u32);
    let result = runner.run(&strategy, |value| {
        ran.set(ran.get() + 1);
        property(value);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    eprintln!("fuzz {name}: {} cases, 0 panics", ran.get());
    ran.get()
}

/// Everything the decoder does with TEXT; must never panic.
fn exercise(text: &[u8]) {
    for block in block::scan(text) {
        assert!(block.start <= block.payload.start && block.payload.end <= block.end);
        assert!(block.end <= text.len());
        // A block the scan accepted always decodes to a keyword plist.
        let value = block::decode(text, &block).unwrap();
        assert!(block::plist_pairs(&value).is_ok(), "{value:?}");
    }
    let _ = read_one(text, 0, &mut Tree);
    // The scan's quick path answers as the full reader does, wherever a
    // list starts.
    for start in memchr::memchr_iter(b'(', text) {
        assert_ne!(
            block::quick_agrees(text, start),
            Some(false),
            "quick path at {start}"
        );
        plain_agrees(text, start);
    }
    plain_agrees(text, 0);
}

/// The plain reader answers as the full reader does, where it answers.
fn plain_agrees(text: &[u8], start: usize) {
    let mut scratch = Scratch::default();
    if let Some((plain, end)) = read_plain(text, start, &mut Tree, &mut scratch) {
        match read_one(text, start, &mut Tree) {
            Ok((full, full_end)) => {
                assert!(
                    same(&plain, &full) && end == full_end,
                    "{plain:?} vs {full:?}"
                );
            }
            Err(e) => panic!("plain reader read {plain:?} where the reader says {e}"),
        }
    }
}

/// Lisp-looking fragments, delimiters and troublemakers.
const TOKENS: &[&str] = &[
    "\n<!-- mevedel-render-data -->\n",
    "\n<!-- /mevedel-render-data -->\n",
    "<!-- mevedel-render-data -->",
    "<!-- /mevedel-render-data -->",
    "(",
    ")",
    "[",
    "]",
    "\"",
    "\\",
    "'",
    "`",
    ",",
    ",@",
    "#'",
    "#(",
    "##",
    "#.",
    "#1=",
    "#1#",
    "#<",
    "#s(",
    "?a",
    ".",
    " . ",
    ";c\n",
    " ",
    "\n",
    "\t",
    "\u{a0}",
    ":tool-use-id",
    ":k",
    "\"toolu_1\"",
    "nil",
    "t",
    "1",
    "-2",
    "1.5",
    ".5",
    "1e3",
    "1.0e+INF",
    "0.0e+NaN",
    "99999999999999999999",
    "\\x41",
    "\\x",
    "\\200",
    "\\u00e9",
    "\\ud800",
    "\\U0001F600",
    "\\N{U+41}",
    "\\N{",
    "\\C-a",
    "\\^?",
    "\\M-",
    "é",
    "漢",
    "🎉",
    "\u{0}",
    "sym",
    "a\\ b",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|t| t.concat())
}

fn arb_sexp() -> impl Strategy<Value = Sexp> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Sexp::Int),
        any::<f64>().prop_map(Sexp::Float),
        "[\\PC\\n\"\\\\]{0,12}".prop_map(|s| Sexp::Str(s.into_bytes())),
        prop::collection::vec(any::<u8>(), 0..6).prop_map(|bytes| {
            // Strings with raw bytes, in Emacs's internal form.
            let mut out = Vec::new();
            for b in bytes {
                if b < 0x80 {
                    out.push(b);
                } else {
                    internal::push_raw(&mut out, b);
                }
            }
            Sexp::Str(out)
        }),
        "[a-z:.?#;( )\\\\0-9-]{0,8}".prop_map(|s| Sexp::Symbol(s.into_bytes())),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Sexp::list),
            (prop::collection::vec(inner.clone(), 1..4), inner.clone()).prop_map(|(v, t)| {
                if t.is_nil() {
                    Sexp::List(v, None)
                } else if let Sexp::List(mut more, tail) = t {
                    // (a . (b c)) is (a b c): keep the canonical form.
                    let mut items = v;
                    items.append(&mut more);
                    Sexp::List(items, tail)
                } else {
                    Sexp::List(v, Some(Box::new(t)))
                }
            }),
            prop::collection::vec(inner, 0..4).prop_map(Sexp::Vector),
        ]
    })
}

fn arb_plist() -> impl Strategy<Value = Vec<Sexp>> {
    prop::collection::vec(("[a-z-]{1,8}", arb_sexp()), 0..6).prop_map(|pairs| {
        pairs
            .into_iter()
            .flat_map(|(k, v)| [Sexp::Symbol(format!(":{k}").into_bytes()), v])
            .collect()
    })
}

fn same(a: &Sexp, b: &Sexp) -> bool {
    match (a, b) {
        (Sexp::Float(x), Sexp::Float(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        (Sexp::List(xs, xt), Sexp::List(ys, yt)) => {
            xs.len() == ys.len()
                && xs.iter().zip(ys).all(|(x, y)| same(x, y))
                && match (xt, yt) {
                    (None, None) => true,
                    (Some(x), Some(y)) => same(x, y),
                    _ => false,
                }
        }
        (Sexp::Vector(xs), Sexp::Vector(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same(x, y))
        }
        _ => a == b,
    }
}

/// PLIST as `prin1` would print it, or None where the printer refuses
/// it (the properties then have nothing to encode).
fn printed(plist: Vec<Sexp>) -> Option<String> {
    let mut out = String::new();
    print(&Sexp::list(plist), &mut out).ok()?;
    Some(out)
}

#[test]
fn fuzz_random_bytes_never_panic() {
    run(
        "random-bytes",
        prop::collection::vec(any::<u8>(), 0..300),
        |bytes| exercise(&bytes),
    );
}

#[test]
fn fuzz_token_soup_never_panics() {
    run("token-soup", token_soup(), |text| exercise(text.as_bytes()));
}

#[test]
fn fuzz_encoded_blocks_round_trip() {
    run(
        "round-trip",
        (arb_plist(), "[ -~]{0,12}", token_soup(), token_soup()),
        |(plist, id, before, after)| {
            let Some(printed) = printed(plist) else {
                return;
            };
            let encoded = block::encode(printed.as_bytes(), Some(&id)).unwrap();
            // Surrounding text ends in a newline so it cannot swallow the
            // block's opening.
            let text = format!("{before}\n{encoded}{after}");
            exercise(text.as_bytes());
            let blocks = block::scan(text.as_bytes());
            let at = before.len() + 1;
            let Some(mine) = blocks.iter().find(|b| b.start == at) else {
                // Only an earlier candidate that swallowed the block as
                // payload (an open string, say) may hide it.
                assert!(
                    blocks.iter().any(|b| b.start < at && b.end > at),
                    "block lost in {text:?}"
                );
                return;
            };
            assert_eq!(mine.owner, Owner::Bound(id.clone().into_bytes()));
            let decoded = block::decode(text.as_bytes(), mine).unwrap();
            let expected = block::payload(printed.as_bytes(), Some(&id)).unwrap();
            let (want, _) = read_one(expected.as_bytes(), 0, &mut Tree).unwrap();
            assert!(same(&decoded, &want), "{decoded:?} != {want:?}");
        },
    );
}

#[test]
fn fuzz_mutated_blocks_never_panic() {
    run(
        "mutated-blocks",
        (
            arb_plist(),
            prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
        ),
        |(plist, edits)| {
            let Some(printed) = printed(plist) else {
                return;
            };
            let Ok(encoded) = block::encode(printed.as_bytes(), Some("toolu_x")) else {
                return;
            };
            let mut bytes = encoded.into_bytes();
            for (at, byte, op) in edits {
                let i = at.index(bytes.len() + 1);
                match op {
                    0 if i < bytes.len() => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ if i < bytes.len() => {
                        bytes.remove(i);
                    }
                    _ => {}
                }
            }
            exercise(&bytes);
        },
    );
}

/// Text made of whole encoded blocks (some with delimiters inside their
/// strings), loose delimiters and token soup, so that the cuts of a
/// split scan fall inside blocks, strings and delimiters alike.
fn block_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        token_soup(),
        (arb_plist(), "[ -~]{0,6}").prop_map(|(plist, id)| {
            printed(plist)
                .and_then(|printed| block::encode(printed.as_bytes(), Some(&id)).ok())
                .unwrap_or_default()
        }),
        Just(
            "\n<!-- mevedel-render-data -->\n(:a \"\n<!-- mevedel-render-data -->\n(:b 1)\n<!-- /mevedel-render-data -->\n\")\n<!-- /mevedel-render-data -->\n"
                .to_string()
        ),
        Just("\n<!-- mevedel-render-data -->\n(:a \"open".to_string()),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|p| p.concat())
}

#[test]
fn fuzz_split_scan_is_the_single_scan() {
    run("split-scan", (block_soup(), 2usize..7), |(text, parts)| {
        let single = block::scan_in_parts(text.as_bytes(), 1);
        let split = block::scan_in_parts(text.as_bytes(), parts);
        assert_eq!(split, single, "{parts} parts of {text:?}");
    });
}
