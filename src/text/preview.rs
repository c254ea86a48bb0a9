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
}
