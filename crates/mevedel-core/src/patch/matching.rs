//! Finding a hunk's lines in a file.
//!
//! Four levels, tried in order; the first level at which the lines occur
//! anywhere in the searched range decides. More than one location at
//! that level is [`Seek::Ambiguous`]: a hunk never lands on the first of
//! several places. Anchors (`@@ TEXT`) are different: they only move the
//! search start past their first occurrence, as the reference tool does.

use std::borrow::Cow;
use std::collections::HashMap;

/// How loosely two lines are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Exact,
    TrailingWhitespace,
    SurroundingWhitespace,
    Punctuation,
}

pub const LEVELS: [Level; 4] = [
    Level::Exact,
    Level::TrailingWhitespace,
    Level::SurroundingWhitespace,
    Level::Punctuation,
];

impl Level {
    pub fn describe(self) -> &'static str {
        match self {
            Level::Exact => "exactly",
            Level::TrailingWhitespace => "ignoring trailing whitespace",
            Level::SurroundingWhitespace => "ignoring surrounding whitespace",
            Level::Punctuation => "with typographic punctuation normalised",
        }
    }

    /// Whether file line A and patch line B are equal at this level.
    pub fn equal(self, a: &str, b: &str) -> bool {
        match self {
            Level::Exact => a == b,
            Level::TrailingWhitespace => a.trim_end() == b.trim_end(),
            Level::SurroundingWhitespace => a.trim() == b.trim(),
            Level::Punctuation => {
                let (a, b) = (a.trim(), b.trim());
                a == b || (normalise(a) == normalise(b))
            }
        }
    }
}

/// TEXT with curly quotes, dashes and unusual spaces as their ASCII forms.
pub fn normalise(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().map(plain).collect())
}

fn plain(c: char) -> char {
    match c {
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
        | '\u{2212}' | '\u{FE58}' | '\u{FE63}' | '\u{FF0D}' => '-',
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' | '\u{FF07}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{FF02}' => '"',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        '\u{2026}' => '.',
        other => other,
    }
}

/// The result of looking for a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seek {
    Found {
        start: usize,
        level: Level,
    },
    /// The first two of several 0-based starts at LEVEL.
    Ambiguous {
        level: Level,
        first: usize,
        second: usize,
        count: usize,
    },
    NotFound,
}

fn matches_at<S: AsRef<str>>(lines: &[String], pattern: &[S], start: usize, level: Level) -> bool {
    pattern
        .iter()
        .zip(&lines[start..])
        .all(|(p, l)| level.equal(l, p.as_ref()))
}

/// Where each distinct line of a file is, so that the exact level looks
/// only at the places where a hunk's rarest line occurs. Each distinct
/// line maps to its first place and count; `next` chains each place to
/// the following one of the same line (one allocation for the file, not
/// one per distinct line).
pub struct Index<'a> {
    places: HashMap<&'a str, (u32, u32), foldhash::fast::RandomState>,
    next: Vec<u32>,
}

/// The end of a chain of places.
const END: u32 = u32::MAX;

impl<'a> Index<'a> {
    pub fn new(lines: &'a [String]) -> Self {
        let mut places: HashMap<&str, (u32, u32), _> =
            HashMap::with_capacity_and_hasher(lines.len(), foldhash::fast::RandomState::default());
        let mut next = vec![END; lines.len()];
        for (i, line) in lines.iter().enumerate().rev() {
            let entry = places.entry(line.as_str()).or_insert((END, 0));
            next[i] = entry.0;
            *entry = (i as u32, entry.1 + 1);
        }
        Index { places, next }
    }

    /// How often LINE occurs.
    fn count(&self, line: &str) -> u32 {
        self.places.get(line).map_or(0, |&(_, count)| count)
    }

    /// Where LINE occurs, top to bottom.
    fn of(&self, line: &str) -> impl Iterator<Item = usize> + '_ {
        let mut at = self.places.get(line).map_or(END, |&(first, _)| first);
        std::iter::from_fn(move || {
            (at != END).then(|| {
                let here = at as usize;
                at = self.next[here];
                here
            })
        })
    }
}

/// Exact matches of PATTERN at or after FROM, through INDEX: (first two, count).
fn exact_indexed<S: AsRef<str>>(
    lines: &[String],
    index: &Index<'_>,
    pattern: &[S],
    from: usize,
) -> (Vec<usize>, usize) {
    let (n, m) = (lines.len(), pattern.len());
    let Some(offset) = (0..m).min_by_key(|&j| index.count(pattern[j].as_ref())) else {
        return (Vec::new(), 0);
    };
    let mut found = Vec::new();
    let mut count = 0;
    for at in index.of(pattern[offset].as_ref()) {
        if at < offset {
            continue;
        }
        let start = at - offset;
        if start < from || start + m > n {
            continue;
        }
        if matches_at(lines, pattern, start, Level::Exact) {
            count += 1;
            if found.len() < 2 {
                found.push(start);
            }
        }
    }
    (found, count)
}

/// Where PATTERN (non-empty) occurs in LINES at or after FROM. With
/// AT_END, only where it ends the file.
pub fn seek<S: AsRef<str>>(lines: &[String], pattern: &[S], from: usize, at_end: bool) -> Seek {
    seek_with(lines, None, pattern, from, at_end)
}

/// [`seek`], with the exact level through INDEX (of LINES) when given.
pub fn seek_with<S: AsRef<str>>(
    lines: &[String],
    index: Option<&Index<'_>>,
    pattern: &[S],
    from: usize,
    at_end: bool,
) -> Seek {
    let (n, m) = (lines.len(), pattern.len());
    if m == 0 || m > n || from > n - m {
        return Seek::NotFound;
    }
    if at_end {
        let start = n - m;
        return LEVELS
            .iter()
            .find(|&&level| matches_at(lines, pattern, start, level))
            .map_or(Seek::NotFound, |&level| Seek::Found { start, level });
    }
    for level in LEVELS {
        let (found, count) = match index {
            Some(index) if level == Level::Exact => exact_indexed(lines, index, pattern, from),
            _ => {
                let mut found: Vec<usize> = Vec::new();
                let mut count = 0;
                for start in from..=n - m {
                    if matches_at(lines, pattern, start, level) {
                        count += 1;
                        if found.len() < 2 {
                            found.push(start);
                        }
                    }
                }
                (found, count)
            }
        };
        match found[..] {
            [] => continue,
            [start] => return Seek::Found { start, level },
            [first, second, ..] => {
                return Seek::Ambiguous {
                    level,
                    first,
                    second,
                    count,
                };
            }
        }
    }
    Seek::NotFound
}

/// The first line at or after FROM equal to ANCHOR at the loosest
/// level needed (exact first).
pub fn seek_anchor(lines: &[String], anchor: &str, from: usize) -> Option<usize> {
    LEVELS.iter().find_map(|&level| {
        lines
            .iter()
            .enumerate()
            .skip(from)
            .find(|(_, l)| level.equal(l, anchor))
            .map(|(i, _)| i)
    })
}

/// Where the file comes closest to PATTERN: the 0-based start of the
/// most similar window, for error messages. `None` for an empty file.
pub fn nearest<S: AsRef<str>>(lines: &[String], pattern: &[S], from: usize) -> Option<usize> {
    if lines.is_empty() {
        return None;
    }
    let probe: Vec<Vec<(char, char)>> = pattern.iter().take(4).map(|p| pairs(p.as_ref())).collect();
    if probe.iter().all(Vec::is_empty) {
        return Some(from.min(lines.len() - 1));
    }
    let mut best = (0.0f64, from.min(lines.len() - 1));
    let cache: Vec<Vec<(char, char)>> = lines.iter().map(|l| pairs(l)).collect();
    for start in 0..lines.len() {
        let mut score = 0.0;
        for (k, p) in probe.iter().enumerate() {
            if let Some(l) = cache.get(start + k) {
                score += dice(p, l);
            }
        }
        // Prefer windows after the search start when scores tie.
        if score > best.0 + 1e-9 || (score >= best.0 - 1e-9 && start >= from && best.1 < from) {
            best = (score, start);
        }
    }
    Some(best.1)
}

fn pairs(text: &str) -> Vec<(char, char)> {
    let t = normalise(text.trim()).to_lowercase();
    let chars: Vec<char> = t.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out: Vec<(char, char)> = chars.windows(2).map(|w| (w[0], w[1])).collect();
    out.sort_unstable();
    out
}

fn dice(a: &[(char, char)], b: &[(char, char)]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * common as f64 / (a.len() + b.len()) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn exact_beats_looser_levels() {
        let file = v(&["a ", "a"]);
        assert_eq!(
            seek(&file, &["a"], 0, false),
            Seek::Found {
                start: 1,
                level: Level::Exact
            }
        );
    }

    #[test]
    fn trailing_whitespace_level() {
        let file = v(&["x", "foo  ", "y"]);
        assert_eq!(
            seek(&file, &["foo"], 0, false),
            Seek::Found {
                start: 1,
                level: Level::TrailingWhitespace
            }
        );
    }

    #[test]
    fn surrounding_whitespace_level() {
        let file = v(&["x", "    foo()", "y"]);
        assert_eq!(
            seek(&file, &["foo()"], 0, false),
            Seek::Found {
                start: 1,
                level: Level::SurroundingWhitespace
            }
        );
    }

    #[test]
    fn punctuation_level() {
        let file = v(&["say \u{201C}hi\u{201D} \u{2014} it\u{2019}s\u{00A0}ok"]);
        assert_eq!(
            seek(&file, &["say \"hi\" - it's ok"], 0, false),
            Seek::Found {
                start: 0,
                level: Level::Punctuation
            }
        );
    }

    #[test]
    fn two_places_at_the_first_level_is_ambiguous() {
        let file = v(&["a", "b", "a", "b"]);
        assert_eq!(
            seek(&file, &["a", "b"], 0, false),
            Seek::Ambiguous {
                level: Level::Exact,
                first: 0,
                second: 2,
                count: 2
            }
        );
        // Searching after the first one is not ambiguous.
        assert_eq!(
            seek(&file, &["a", "b"], 1, false),
            Seek::Found {
                start: 2,
                level: Level::Exact
            }
        );
    }

    #[test]
    fn a_unique_exact_match_wins_over_fuzzy_duplicates() {
        let file = v(&["a", "a ", " a"]);
        assert!(matches!(
            seek(&file, &["a"], 0, false),
            Seek::Found { start: 0, .. }
        ));
    }

    #[test]
    fn the_index_finds_what_the_scan_finds() {
        let file = v(&["a", "b", "a", "b", "c", "a", "b"]);
        let index = Index::new(&file);
        for pattern in [
            &["a", "b"][..],
            &["b", "c"],
            &["c"],
            &["z"],
            &["b", "a", "b"],
        ] {
            for from in 0..file.len() {
                assert_eq!(
                    seek_with(&file, Some(&index), pattern, from, false),
                    seek(&file, pattern, from, false),
                    "{pattern:?} from {from}"
                );
            }
        }
    }

    #[test]
    fn at_end_only_matches_the_end() {
        let file = v(&["a", "b", "a"]);
        assert_eq!(
            seek(&file, &["a"], 0, true),
            Seek::Found {
                start: 2,
                level: Level::Exact
            }
        );
        assert_eq!(seek(&file, &["b"], 0, true), Seek::NotFound);
    }

    #[test]
    fn anchors_take_the_first_occurrence() {
        let file = v(&["fn a", "x", "fn a", "x"]);
        assert_eq!(seek_anchor(&file, "fn a", 1), Some(2));
        assert_eq!(seek_anchor(&file, "  fn a ", 0), Some(0));
        assert_eq!(seek_anchor(&file, "fn b", 0), None);
    }

    #[test]
    fn nearest_finds_the_similar_line() {
        let file = v(&["alpha", "fn compute(x: i32)", "omega"]);
        assert_eq!(nearest(&file, &["fn compute(y: i64)"], 0), Some(1));
    }
}
