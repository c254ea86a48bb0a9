//! Result pages: `offset` and `head_limit` over output lines, and the
//! notes that say what a page holds.
//!
//! Output lines live in one text buffer, `--` group separators
//! included, with a mark per line; a page that shows everything hands
//! the buffer over without copying it line by line.

use crate::error::{Error, ErrorKind};

/// Where one output line ends in the buffer, and whether a `--`
/// separator line precedes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    start: usize,
    end: usize,
    break_before: bool,
}

/// What a search produced, before paging.
#[derive(Debug, Default)]
pub struct Found {
    text: String,
    marks: Vec<Mark>,
    /// The search stopped at its time limit.
    pub partial: bool,
    /// Notes about roots that had nothing to search yet.
    pub notes: Vec<String>,
}

impl Found {
    /// Append one output line (without its newline); BREAK_BEFORE puts
    /// a `--` separator before it unless it is the first line.
    pub fn push(&mut self, line: &str, break_before: bool) {
        self.push_with(break_before, |buf| buf.push_str(line));
    }

    /// Append one output line that WRITE appends to the buffer.
    pub fn push_with(&mut self, break_before: bool, write: impl FnOnce(&mut String)) {
        let break_before = break_before && !self.marks.is_empty();
        if break_before {
            self.text.push_str("--\n");
        }
        let start = self.text.len();
        write(&mut self.text);
        let end = self.text.len();
        self.text.push('\n');
        self.marks.push(Mark {
            start,
            end,
            break_before,
        });
    }

    /// Append OTHER's lines; BREAK_FIRST separates them from ours.
    pub fn append(&mut self, other: Found, break_first: bool) {
        if other.is_empty() {
            return;
        }
        let break_first = break_first && !self.is_empty();
        if break_first {
            self.text.push_str("--\n");
        }
        let shift = self.text.len();
        self.text.push_str(&other.text);
        self.marks
            .extend(other.marks.into_iter().enumerate().map(|(i, m)| Mark {
                start: m.start + shift,
                end: m.end + shift,
                break_before: if i == 0 { break_first } else { m.break_before },
            }));
    }

    pub fn len(&self) -> usize {
        self.marks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// Output line I, without separators.
    pub fn line(&self, i: usize) -> &str {
        let m = self.marks[i];
        &self.text[m.start..m.end]
    }

    pub fn lines(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).map(|i| self.line(i))
    }
}

/// A paged, rendered result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub text: String,
    pub total: usize,
    pub shown: usize,
    pub partial: bool,
}

pub const PARTIAL_HINT: &str =
    "narrow `path`, add a `glob` or `type` filter, or make `pattern` more specific";

/// Page FOUND: skip OFFSET lines, show at most LIMIT (0: all).
/// EMPTY is what to say when there are no lines at all.
pub fn page(
    found: Found,
    offset: usize,
    limit: usize,
    empty: &str,
    tool: &str,
) -> Result<Page, Error> {
    let total = found.len();
    if total > 0 && offset >= total {
        return Err(Error::new(
            ErrorKind::Search,
            format!(
                "{tool}: offset {offset} is past the last output line; this search has {total} \
                 output line{} (use an offset from 0 to {})",
                if total == 1 { "" } else { "s" },
                total - 1
            ),
        ));
    }
    let end = if limit == 0 {
        total
    } else {
        total.min(offset.saturating_add(limit))
    };
    let shown = end.saturating_sub(offset);
    let mut text = if total == 0 {
        empty.to_string()
    } else if offset == 0 && end == total {
        found.text
    } else {
        let mut out = String::new();
        for i in offset..end {
            let m = found.marks[i];
            if m.break_before && i > offset {
                out.push_str("--\n");
            }
            out.push_str(&found.text[m.start..=m.end]);
        }
        out
    };
    if total > 0 && end < total {
        text.push_str(&format!(
            "\n[Showing output lines {}-{end} of {total}. Continue with offset={end}, or raise \
             head_limit (0 = unlimited).]\n",
            offset + 1
        ));
    }
    for note in &found.notes {
        text.push_str(&format!("\n{note}\n"));
    }
    if found.partial {
        text.push_str(&format!(
            "\n[Partial results: the search stopped at its time limit before finishing. To get \
             complete results, {PARTIAL_HINT}.]\n"
        ));
    }
    Ok(Page {
        text,
        total,
        shown,
        partial: found.partial,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(n: usize) -> Found {
        let mut f = Found::default();
        for i in 0..n {
            f.push(&format!("l{i}"), i == 2);
        }
        f
    }

    #[test]
    fn offset_and_limit() {
        let p = page(found(5), 1, 2, "none", "Grep").unwrap();
        assert!(p.text.starts_with("l1\n--\nl2\n"), "{}", p.text);
        assert!(
            p.text
                .contains("Showing output lines 2-3 of 5. Continue with offset=3")
        );
        let p = page(found(5), 0, 0, "none", "Grep").unwrap();
        assert_eq!(p.shown, 5);
        assert_eq!(p.text, "l0\nl1\n--\nl2\nl3\nl4\n");
        let p = page(found(5), 2, 1, "none", "Grep").unwrap();
        assert!(p.text.starts_with("l2\n\n[Showing"), "{}", p.text);
    }

    #[test]
    fn offset_past_the_end_is_an_error_but_no_matches_is_not() {
        let e = page(found(3), 3, 10, "none", "Grep").expect_err("ok");
        assert!(
            e.message.contains("offset 3 is past the last output line"),
            "{}",
            e.message
        );
        assert!(e.message.contains("0 to 2"));
        let p = page(found(0), 0, 10, "No matches found.", "Grep").unwrap();
        assert_eq!(p.text, "No matches found.");
    }
}
