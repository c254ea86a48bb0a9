//! Head-and-tail previews of oversized text.
//!
//! A preview keeps the same character budget for its head and its tail,
//! moves each cut to a nearby newline when one is close (so lines stay
//! whole), and reports exactly how many characters and which lines it
//! left out, so a notice can point at a precise continuation.
//!
//! With failure patterns ([`super::keep`]), the lines of the omitted
//! middle that match are kept too, with their line numbers: they share
//! the budget (head and tail shrink by what the kept lines take, at most
//! half of it), the counts stay exact, and the header of the kept block
//! says how many matched and how many are not shown.

use super::keep::{Collector, Kept, Patterns};

/// How far (as a fraction of one side's budget) a cut may move to reach
/// a newline: one fifth.
const NEWLINE_SLACK_DIVISOR: usize = 5;

/// A head and tail of some text, with exact facts about the omitted middle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview<'a> {
    pub head: &'a str,
    pub tail: &'a str,
    /// Characters in the whole text.
    pub total_chars: usize,
    pub head_chars: usize,
    pub tail_chars: usize,
    /// Exactly `total_chars - head_chars - tail_chars`.
    pub omitted_chars: usize,
    /// 1-based line of the first omitted character (the head's last line
    /// when the head was cut inside a line).
    pub omitted_first_line: usize,
    /// 1-based line of the last omitted character.
    pub omitted_last_line: usize,
    /// Lines in the whole text (a final newline does not start a line).
    pub total_lines: usize,
    /// Omitted lines that look like failures, shown after the omission
    /// notice; their renderings share the budget with head and tail.
    pub kept: Kept,
}

fn newlines(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', bytes).count()
}

/// Byte offset just after the first N characters of TEXT.
fn after_chars(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// Byte offset where the last N characters of TEXT begin.
fn last_chars(text: &str, n: usize) -> usize {
    if n == 0 {
        return text.len();
    }
    text.char_indices().rev().nth(n - 1).map_or(0, |(i, _)| i)
}

/// Where a head of SIDE characters of TEXT ends: moved back to just
/// after a newline at most a fifth of SIDE away.
pub(crate) fn head_end(text: &str, side: usize) -> usize {
    let slack = side / NEWLINE_SLACK_DIVISOR;
    let end = after_chars(text, side);
    match memchr::memrchr(b'\n', &text.as_bytes()[..end]) {
        Some(nl) if super::char_count(&text.as_bytes()[nl + 1..end]) <= slack => nl + 1,
        _ => end,
    }
}

/// Where a tail of SIDE characters of TEXT starts, not before FLOOR:
/// moved forward to just after a newline at most a fifth of SIDE away
/// (a tail never starts at the very end).
pub(crate) fn tail_start(text: &str, side: usize, floor: usize) -> usize {
    let slack = side / NEWLINE_SLACK_DIVISOR;
    let bytes = text.as_bytes();
    let start = last_chars(text, side).max(floor);
    if start > 0
        && bytes[start - 1] != b'\n'
        && let Some(nl) = memchr::memchr(b'\n', &bytes[start..])
    {
        let cut = start + nl + 1;
        if cut < bytes.len() && super::char_count(&bytes[start..cut]) <= slack {
            return cut;
        }
    }
    start
}

/// The 1-based lines of the first and last characters of BYTES that
/// are neither in the head `..head_end` nor in the tail `tail_start..`.
fn omitted_lines(
    bytes: &[u8],
    head_end: usize,
    tail_start: usize,
    total_newlines: usize,
) -> (usize, usize) {
    let head_newlines = newlines(&bytes[..head_end]);
    let tail_newlines = newlines(&bytes[tail_start..]);
    let last_omitted_is_newline = tail_start > head_end && bytes[tail_start - 1] == b'\n';
    (
        head_newlines + 1,
        total_newlines - tail_newlines + 1 - usize::from(last_omitted_is_newline),
    )
}

/// A preview of TEXT within BUDGET characters (head and tail each get
/// half), or `None` when TEXT already fits. With PATTERNS, omitted lines
/// that match are kept (see [`super::keep`]): they take at most half the
/// budget, and head and tail shrink by what they take.
pub fn head_tail<'a>(
    text: &'a str,
    budget: usize,
    patterns: Option<&Patterns>,
) -> Option<Preview<'a>> {
    let bytes = text.as_bytes();
    let total_chars = super::char_count(bytes);
    if total_chars <= budget {
        return None;
    }
    let total_newlines = newlines(bytes);
    let cut = |side: usize| {
        let head = head_end(text, side);
        let tail = tail_start(text, side, head);
        (head, tail, omitted_lines(bytes, head, tail, total_newlines))
    };
    let (mut head_end, mut tail_start, mut lines) = cut(budget / 2);
    let mut kept = Kept::default();
    if let Some(patterns) = patterns {
        let mut collector = Collector::new(patterns, head_end as u64, tail_start as u64);
        collector.scan(bytes, 0, 1);
        let room = collector.select(lines.0, lines.1, budget / 2);
        if room.matched > 0 {
            (head_end, tail_start, lines) = cut((budget - room.chars()) / 2);
            kept = collector.select(lines.0, lines.1, room.chars());
        }
    }
    let head = &text[..head_end];
    let tail = &text[tail_start..];
    let head_chars = super::char_count(head.as_bytes());
    let tail_chars = super::char_count(tail.as_bytes());
    Some(Preview {
        head,
        tail,
        total_chars,
        head_chars,
        tail_chars,
        omitted_chars: total_chars - head_chars - tail_chars,
        omitted_first_line: lines.0,
        omitted_last_line: lines.1,
        total_lines: total_newlines + usize::from(!text.ends_with('\n')),
        kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered_lines(n: usize) -> String {
        (1..=n).map(|i| format!("line {i:04}\n")).collect()
    }

    #[test]
    fn short_text_needs_no_preview() {
        assert_eq!(head_tail("abc", 3, None), None);
        assert_eq!(head_tail("", 0, None), None);
    }

    #[test]
    fn equal_budgets_exact_omitted_count() {
        let text = "x".repeat(1000);
        let p = head_tail(&text, 100, None).expect("needs a preview");
        assert_eq!(p.head_chars, 50);
        assert_eq!(p.tail_chars, 50);
        assert_eq!(p.omitted_chars, 900);
        assert_eq!(p.head.len() + p.tail.len() + p.omitted_chars, 1000);
    }

    #[test]
    fn cuts_move_to_nearby_newlines() {
        // Lines of 10 characters; a side budget of 55 ends mid-line.
        let text = numbered_lines(100);
        let p = head_tail(&text, 110, None).expect("needs a preview");
        assert!(p.head.ends_with('\n'), "head {:?}", p.head);
        assert_eq!(p.head, numbered_lines(5));
        assert!(p.tail.starts_with("line "), "tail {:?}", p.tail);
        assert!(p.head_chars <= 55 && p.tail_chars <= 55);
        assert_eq!(p.omitted_chars, 1000 - p.head_chars - p.tail_chars);
        assert_eq!(p.omitted_first_line, 6);
        assert_eq!(p.omitted_last_line, 95);
        assert_eq!(p.total_lines, 100);
    }

    #[test]
    fn far_newlines_are_not_used() {
        let text = format!("a\n{}\nb", "y".repeat(500));
        let p = head_tail(&text, 100, None).expect("needs a preview");
        assert_eq!(p.head_chars, 50);
        assert_eq!(p.tail_chars, 50);
        assert_eq!(p.omitted_first_line, 2);
        assert_eq!(p.omitted_last_line, 2);
    }

    #[test]
    fn counts_characters_not_bytes() {
        let text = "é".repeat(300);
        let p = head_tail(&text, 100, None).expect("needs a preview");
        assert_eq!((p.head_chars, p.tail_chars, p.omitted_chars), (50, 50, 200));
        assert_eq!(p.head, "é".repeat(50));
    }

    #[test]
    fn odd_and_tiny_budgets() {
        let p = head_tail("abcdef", 1, None).expect("needs a preview");
        assert_eq!((p.head, p.tail, p.omitted_chars), ("", "", 6));
        let p = head_tail("abcdef", 5, None).expect("needs a preview");
        assert_eq!((p.head, p.tail, p.omitted_chars), ("ab", "ef", 2));
    }

    use crate::text::keep::tests::default_patterns;
    use crate::text::keep::{KEPT_LINE_CHARS, MAX_KEPT_LINES};

    /// Build output that matches no default pattern.
    fn filler(from: usize, n: usize) -> String {
        (from..from + n)
            .map(|i| {
                format!(
                    "   Compiling dep-{i:04} v1.0.{} (/home/user/work/crates/dep-{i:04})\n",
                    i % 10
                )
            })
            .collect()
    }

    /// FIXTURE between 400 filler lines on each side, and the 1-based
    /// line of its first line.
    fn padded(fixture: &str) -> (String, usize) {
        (
            format!("{}{fixture}{}", filler(0, 400), filler(400, 400)),
            401,
        )
    }

    /// The kept lines of FIXTURE's padded preview must be exactly its
    /// lines that start with one of WANTED, numbered in the whole text.
    fn keeps(fixture: &str, wanted: &[&str]) {
        let (text, first) = padded(fixture);
        let patterns = default_patterns();
        let p = head_tail(&text, 2000, Some(&patterns)).expect("needs a preview");
        let want: Vec<(usize, String)> = fixture
            .lines()
            .enumerate()
            .filter(|(_, l)| wanted.iter().any(|w| l.starts_with(w)))
            .map(|(i, l)| (first + i, l.to_string()))
            .collect();
        assert!(
            wanted
                .iter()
                .all(|w| fixture.lines().any(|l| l.starts_with(w))),
            "each wanted line is in the fixture"
        );
        let got: Vec<(usize, String)> = p
            .kept
            .lines
            .iter()
            .map(|l| (l.number, l.text.clone()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(p.kept.matched, want.len());
        assert!(p.head_chars + p.tail_chars + p.kept.chars() <= 2000);
        assert_eq!(p.omitted_chars, p.total_chars - p.head_chars - p.tail_chars);
        // The numbers are those of the text's own lines.
        for (number, line) in &want {
            assert_eq!(text.lines().nth(number - 1), Some(line.as_str()));
        }
    }

    #[test]
    fn keeps_a_failing_cargo_test() {
        keeps(
            include_str!("fixtures/cargo-test-failed.txt"),
            &[
                "test tests::adds_wrongly ... FAILED",
                "thread 'tests::adds_wrongly'",
                "assertion `left == right` failed",
                "test result: FAILED.",
                "error: test failed",
            ],
        );
    }

    #[test]
    fn keeps_a_cargo_build_error() {
        keeps(
            include_str!("fixtures/cargo-build-error.txt"),
            &["error[E0308]: mismatched types", "error: could not compile"],
        );
    }

    #[test]
    fn keeps_gcc_diagnostics_and_the_make_failure() {
        keeps(
            include_str!("fixtures/gcc-make-error.txt"),
            &[
                "broken.c:5:17: warning:",
                "broken.c:6:26: error:",
                "make: *** [Makefile:2",
            ],
        );
    }

    #[test]
    fn keeps_a_python_traceback() {
        keeps(
            include_str!("fixtures/python-traceback.txt"),
            &["Traceback (most recent call last):", "FileNotFoundError:"],
        );
    }

    #[test]
    fn keeps_a_failing_ert_run() {
        keeps(
            include_str!("fixtures/ert-failed.txt"),
            &[
                "Test demo-adds-wrongly condition:",
                "   FAILED  2/3  demo-adds-wrongly",
                "Test demo-signals condition:",
                "   FAILED  3/3  demo-signals",
                "Ran 3 tests, 1 results as expected, 2 unexpected",
            ],
        );
    }

    #[test]
    fn keeps_a_node_assertion() {
        keeps(
            include_str!("fixtures/node-assert.txt"),
            &["AssertionError [ERR_ASSERTION]"],
        );
    }

    #[test]
    fn keeps_go_failures() {
        // Go is not installed here: the shapes `go test` and `go build`
        // print.
        keeps(
            "=== RUN   TestAdd\n    add_test.go:9: Add(2, 2) = 4, want 5\n--- FAIL: TestAdd (0.00s)\n\
             FAIL\nFAIL\texample.com/demo\t0.002s\n./main.go:5:2: undefined: total\n\
             panic: runtime error: index out of range [5] with length 3\n\ngoroutine 1 [running]:\n",
            &[
                "    add_test.go:9:",
                "--- FAIL: TestAdd",
                "FAIL",
                "./main.go:5:2:",
                "panic: runtime error",
            ],
        );
    }

    #[test]
    fn nothing_kept_when_nothing_matches() {
        let text = filler(0, 800);
        let patterns = default_patterns();
        let with = head_tail(&text, 2000, Some(&patterns)).expect("needs a preview");
        let without = head_tail(&text, 2000, None).expect("needs a preview");
        assert_eq!(with.kept, Kept::default());
        assert_eq!(with.kept.render(), "");
        assert_eq!(with, without);
    }

    #[test]
    fn many_failures_keep_the_first_ones_and_the_last() {
        let text: String = (1..=3000)
            .map(|i| {
                if i % 10 == 0 {
                    format!("src/m{i}.c:{i}:1: error: bad {i}\n")
                } else {
                    format!("ok {i}\n")
                }
            })
            .collect();
        let patterns = default_patterns();
        let p = head_tail(&text, 4000, Some(&patterns)).expect("needs a preview");
        let numbers: Vec<usize> = p.kept.lines.iter().map(|l| l.number).collect();
        // All of them but those the head and tail show.
        let shown_in_tail = p.tail.matches(": error: ").count();
        let shown_in_head = p.head.matches(": error: ").count();
        assert_eq!(p.kept.matched, 300 - shown_in_head - shown_in_tail);
        assert_eq!(numbers.len(), MAX_KEPT_LINES);
        let first_omitted = (shown_in_head + 1) * 10;
        let mut want: Vec<usize> = (0..MAX_KEPT_LINES - 1)
            .map(|k| first_omitted + 10 * k)
            .collect();
        want.push((300 - shown_in_tail) * 10);
        assert_eq!(numbers, want);
        assert!(p.head_chars + p.tail_chars + p.kept.chars() <= 4000);
        assert!(p.kept.render().starts_with(&format!(
            "[{} of the omitted lines look like failures; {MAX_KEPT_LINES} shown, {} not shown:]\n  L{}: src/m",
            p.kept.matched,
            p.kept.matched - MAX_KEPT_LINES,
            want[0]
        )));
        assert!(p.kept.render().ends_with("[end of kept lines]\n"));
    }

    #[test]
    fn kept_lines_take_at_most_half_the_budget() {
        let long = format!("error: {}\n", "x".repeat(400));
        let text: String = (0..200)
            .map(|i| {
                if i % 2 == 0 {
                    long.clone()
                } else {
                    format!("{i}\n")
                }
            })
            .collect();
        let patterns = default_patterns();
        let p = head_tail(&text, 2000, Some(&patterns)).expect("needs a preview");
        assert!(p.kept.chars() <= 1000, "{}", p.kept.chars());
        assert!(!p.kept.lines.is_empty());
        assert!(
            p.kept
                .lines
                .iter()
                .all(|l| l.text.chars().count() == KEPT_LINE_CHARS + 1)
        );
        assert!(p.head_chars + p.tail_chars + p.kept.chars() <= 2000);
        assert!(p.head_chars >= 400 && p.tail_chars >= 400);
    }

    fn lines_text() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just("error: x".to_string()),
                proptest::strategy::Just("FAIL".to_string()),
                proptest::strategy::Just("éé ok".to_string()),
                proptest::strategy::Just(String::new()),
                "[a-z ]{1,40}",
            ],
            1..300,
        )
        .prop_map(|lines| lines.join("\n"))
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Whatever the text and budget: the kept lines are exactly the
        /// matching lines of the omitted range (or the first ones and the
        /// last), in order, and they share the budget with head and tail.
        #[test]
        fn kept_lines_are_exact(text in lines_text(), budget in 4usize..400) {
            let patterns = default_patterns();
            let Some(p) = head_tail(&text, budget, Some(&patterns)) else {
                return Ok(());
            };
            let matching: Vec<usize> = text
                .split('\n')
                .enumerate()
                .map(|(i, l)| (i + 1, l))
                .filter(|(n, l)| {
                    (p.omitted_first_line..=p.omitted_last_line).contains(n)
                        && patterns.matches(l.as_bytes())
                })
                .map(|(n, _)| n)
                .collect();
            proptest::prop_assert_eq!(p.kept.matched, matching.len());
            let numbers: Vec<usize> = p.kept.lines.iter().map(|l| l.number).collect();
            proptest::prop_assert!(numbers.windows(2).all(|w| w[0] < w[1]));
            proptest::prop_assert!(numbers.iter().all(|n| matching.contains(n)));
            if let (Some(first), Some(last)) = (numbers.first(), numbers.last())
                && numbers.len() > 1
            {
                proptest::prop_assert_eq!(*first, matching[0]);
                proptest::prop_assert_eq!(Some(last), matching.last());
            }
            proptest::prop_assert!(p.head_chars + p.tail_chars + p.kept.chars() <= budget);
            proptest::prop_assert_eq!(p.omitted_chars, p.total_chars - p.head_chars - p.tail_chars);
            proptest::prop_assert!(text.starts_with(p.head) && text.ends_with(p.tail));
            proptest::prop_assert_eq!(p.omitted_first_line, newlines(p.head.as_bytes()) + 1);
        }
    }
}
