//! Head-and-tail previews of oversized text.
//!
//! A preview keeps the same character budget for its head and its tail,
//! moves each cut to a nearby newline when one is close (so lines stay
//! whole), and reports exactly how many characters and which lines it
//! left out, so a notice can point at a precise continuation.

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

/// A preview of TEXT within BUDGET characters (head and tail each get
/// half), or `None` when TEXT already fits.
pub fn head_tail(text: &str, budget: usize) -> Option<Preview<'_>> {
    let bytes = text.as_bytes();
    let total_chars = super::char_count(bytes);
    if total_chars <= budget {
        return None;
    }
    let side = budget / 2;
    let slack = side / NEWLINE_SLACK_DIVISOR;

    let mut head_end = after_chars(text, side);
    if let Some(nl) = memchr::memrchr(b'\n', &bytes[..head_end]) {
        let cut = nl + 1;
        if super::char_count(&bytes[cut..head_end]) <= slack {
            head_end = cut;
        }
    }
    let mut tail_start = last_chars(text, side).max(head_end);
    if tail_start > 0
        && bytes[tail_start - 1] != b'\n'
        && let Some(nl) = memchr::memchr(b'\n', &bytes[tail_start..])
    {
        let cut = tail_start + nl + 1;
        if cut < bytes.len() && super::char_count(&bytes[tail_start..cut]) <= slack {
            tail_start = cut;
        }
    }

    let head = &text[..head_end];
    let tail = &text[tail_start..];
    let head_chars = super::char_count(head.as_bytes());
    let tail_chars = super::char_count(tail.as_bytes());
    let head_newlines = newlines(head.as_bytes());
    let omitted_newlines = newlines(&bytes[head_end..tail_start]);
    let last_omitted_is_newline = tail_start > head_end && bytes[tail_start - 1] == b'\n';
    let total_newlines = head_newlines + omitted_newlines + newlines(tail.as_bytes());
    Some(Preview {
        head,
        tail,
        total_chars,
        head_chars,
        tail_chars,
        omitted_chars: total_chars - head_chars - tail_chars,
        omitted_first_line: head_newlines + 1,
        omitted_last_line: head_newlines + omitted_newlines + 1
            - usize::from(last_omitted_is_newline),
        total_lines: total_newlines + usize::from(!text.ends_with('\n')),
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
        assert_eq!(head_tail("abc", 3), None);
        assert_eq!(head_tail("", 0), None);
    }

    #[test]
    fn equal_budgets_exact_omitted_count() {
        let text = "x".repeat(1000);
        let p = head_tail(&text, 100).expect("needs a preview");
        assert_eq!(p.head_chars, 50);
        assert_eq!(p.tail_chars, 50);
        assert_eq!(p.omitted_chars, 900);
        assert_eq!(p.head.len() + p.tail.len() + p.omitted_chars, 1000);
    }

    #[test]
    fn cuts_move_to_nearby_newlines() {
        // Lines of 10 characters; a side budget of 55 ends mid-line.
        let text = numbered_lines(100);
        let p = head_tail(&text, 110).expect("needs a preview");
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
        let p = head_tail(&text, 100).expect("needs a preview");
        assert_eq!(p.head_chars, 50);
        assert_eq!(p.tail_chars, 50);
        assert_eq!(p.omitted_first_line, 2);
        assert_eq!(p.omitted_last_line, 2);
    }

    #[test]
    fn counts_characters_not_bytes() {
        let text = "é".repeat(300);
        let p = head_tail(&text, 100).expect("needs a preview");
        assert_eq!((p.head_chars, p.tail_chars, p.omitted_chars), (50, 50, 200));
        assert_eq!(p.head, "é".repeat(50));
    }

    #[test]
    fn odd_and_tiny_budgets() {
        let p = head_tail("abcdef", 1).expect("needs a preview");
        assert_eq!((p.head, p.tail, p.omitted_chars), ("", "", 6));
        let p = head_tail("abcdef", 5).expect("needs a preview");
        assert_eq!((p.head, p.tail, p.omitted_chars), ("ab", "ef", 2));
    }
}
