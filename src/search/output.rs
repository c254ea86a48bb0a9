//! Result pages: `offset` and `head_limit` over output lines, and the
//! notes that say what a page holds.

use crate::error::{Error, ErrorKind};

/// One output line and whether a `--` separator precedes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    pub break_before: bool,
}

/// What a search produced, before paging.
#[derive(Debug, Default)]
pub struct Found {
    pub lines: Vec<Line>,
    /// The search stopped at its time limit.
    pub partial: bool,
    /// Notes about roots that had nothing to search yet.
    pub notes: Vec<String>,
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
    let total = found.lines.len();
    let mut text = String::new();
    if total == 0 {
        text.push_str(empty);
    } else if offset >= total {
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
    for (i, line) in found.lines.iter().enumerate().take(end).skip(offset) {
        if line.break_before && i > offset {
            text.push_str("--\n");
        }
        text.push_str(&line.text);
        text.push('\n');
    }
    if total > 0 && end < total {
        text.push_str(&format!(
            "\n[Showing output lines {}-{end} of {total}. Continue with offset={end}, or raise head_limit (0 = unlimited).]\n",
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
        Found {
            lines: (0..n)
                .map(|i| Line {
                    text: format!("l{i}"),
                    break_before: i == 2,
                })
                .collect(),
            ..Found::default()
        }
    }

    #[test]
    fn offset_and_limit() {
        let p = page(found(5), 1, 2, "none", "Grep").unwrap_or_else(|e| panic!("{e}"));
        assert!(p.text.starts_with("l1\n--\nl2\n"), "{}", p.text);
        assert!(
            p.text
                .contains("Showing output lines 2-3 of 5. Continue with offset=3")
        );
        let p = page(found(5), 0, 0, "none", "Grep").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.shown, 5);
        assert!(!p.text.contains("Showing"));
    }

    #[test]
    fn offset_past_the_end_is_an_error_but_no_matches_is_not() {
        let e = page(found(3), 3, 10, "none", "Grep")
            .err()
            .unwrap_or_else(|| panic!("ok"));
        assert!(
            e.message.contains("offset 3 is past the last output line"),
            "{}",
            e.message
        );
        assert!(e.message.contains("0 to 2"));
        let p =
            page(found(0), 0, 10, "No matches found.", "Grep").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.text, "No matches found.");
    }
}
