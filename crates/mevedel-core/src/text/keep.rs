//! Lines kept from the omitted middle of a preview because they look
//! like failures.
//!
//! A head-and-tail preview of a long build or test log tends to show the
//! start of the run and its summary, and to drop the one compiler error
//! or panic in the middle that explains it. [`Patterns`] is the user's
//! list of regexps (Rust `regex` syntax, from
//! `mevedel-pipeline-failure-patterns`), all compiled into one regex that
//! is matched against one line at a time, without its newline: `^` and
//! `$` are that line's ends, and no match spans lines.
//!
//! Scanning is cheap because of a literal prefilter: every pattern's
//! matches must contain one of a few literals (its prefix or suffix
//! literals, found by `regex-syntax`), so one SIMD literal search over
//! the text finds the only lines worth trying, and the whole regex runs
//! on those lines alone. A pattern without such literals (`\w+:` say)
//! turns the prefilter off, and every line is tried: still right, slower.
//!
//! A [`Collector`] is fed the text in file order (whole lines, except
//! that a line longer than the caller's buffer comes in pieces, each
//! matched on its own), and counts its newlines on the way, so a caller
//! that needs them does not read the text twice; a text cut at line
//! starts can be collected in parts at once, each appended to the one
//! before ([`Collector::append`]). It remembers every matching line
//! near the ends (the zones the head and tail may cover, which are
//! small) and, between them, the first [`MAX_KEPT_LINES`] and the last
//! one, with an exact count. [`Collector::select`] then picks, among the
//! lines of the final omitted middle, the first ones and the last one
//! that fit a character budget, in file order: the first errors of a
//! build are the ones that cause the rest, and the last names how the
//! run ended. The budget counts the kept lines as rendered
//! (`  L<n>: <text>`); the block's header with the exact counts and its
//! closing line, like the omission notice itself, are not counted.

use std::sync::{Arc, RwLock};

use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::hir::literal::Extractor;
use regex_syntax::hir::{Hir, HirKind};

use crate::error::{Error, ErrorKind, Result};

/// Kept lines shown at most, however many match.
pub const MAX_KEPT_LINES: usize = 20;

/// Characters of one kept line shown at most; a longer one is cut and
/// ends with `…`.
pub const KEPT_LINE_CHARS: usize = 160;

/// The shortest literal worth a prefilter: a one-byte literal such as
/// `:` would make nearly every line a candidate.
const MIN_LITERAL_LEN: usize = 2;

/// Compiled regexps are bounded so one pattern cannot take the memory of
/// Emacs.
const REGEX_SIZE_LIMIT: usize = 8 * 1024 * 1024;

/// The user's failure patterns, compiled once.
#[derive(Debug)]
pub struct Patterns {
    /// The source patterns, as given; installing the same list again is
    /// a no-op.
    sources: Vec<String>,
    /// Every pattern as one alternation, matched against one line.
    line: Regex,
    /// Literals one of which every match contains; `None` when some
    /// pattern has none, and every line is tried.
    prefilter: Option<Regex>,
}

fn builder(pattern: &str) -> RegexBuilder {
    let mut b = RegexBuilder::new(pattern);
    b.multi_line(true).crlf(true).size_limit(REGEX_SIZE_LIMIT);
    b
}

/// Literals one of which every match of PATTERN contains, or `None`.
fn required_literals(pattern: &str) -> Option<Vec<Vec<u8>>> {
    let hir = regex_syntax::ParserBuilder::new()
        .multi_line(true)
        .crlf(true)
        .build()
        .parse(pattern)
        .ok()?;
    required(&hir)
}

/// The shortest literal of a set (0 for none): how selective it is.
fn shortest(lits: &[Vec<u8>]) -> usize {
    lits.iter().map(Vec::len).min().unwrap_or(0)
}

/// Literals one of which every match of HIR contains: its own prefix
/// literals, or those of a part every match has (an element of a
/// concatenation, each branch of an alternation), whichever set has the
/// longest shortest literal.
fn required(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let own = prefix_literals(hir);
    let inner = match hir.kind() {
        HirKind::Concat(parts) => parts
            .iter()
            .filter_map(required)
            .max_by_key(|lits| (shortest(lits), std::cmp::Reverse(lits.len()))),
        HirKind::Alternation(branches) => branches
            .iter()
            .map(required)
            .collect::<Option<Vec<_>>>()
            .map(|sets| sets.concat()),
        HirKind::Capture(capture) => required(&capture.sub),
        HirKind::Repetition(rep) if rep.min > 0 => required(&rep.sub),
        _ => None,
    };
    match (own, inner) {
        (Some(a), Some(b)) => Some(if shortest(&b) > shortest(&a) { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// HIR's prefix literals when they are finite and none is too short.
fn prefix_literals(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let seq = Extractor::new().extract(hir);
    let lits: Vec<Vec<u8>> = seq
        .literals()?
        .iter()
        .map(|l| l.as_bytes().to_vec())
        .collect();
    (!lits.is_empty() && shortest(&lits) >= MIN_LITERAL_LEN).then_some(lits)
}

/// LITS without those containing another: a text with the longer one
/// has the shorter, and a small set keeps the SIMD literal search.
fn minimal(mut lits: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    lits.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    let mut kept: Vec<Vec<u8>> = Vec::new();
    for lit in lits {
        if !kept.iter().any(|k| memchr::memmem::find(&lit, k).is_some()) {
            kept.push(lit);
        }
    }
    kept
}

/// A regex source matching exactly the bytes LIT.
fn escaped(lit: &[u8]) -> String {
    let mut out = String::new();
    for &b in lit {
        if b.is_ascii_alphanumeric() {
            out.push(char::from(b));
        } else {
            out.push_str(&format!(r"\x{b:02x}"));
        }
    }
    out
}

impl Patterns {
    /// Compile SOURCES. An invalid pattern is a `Search` error naming it
    /// (with the parser's message); nothing is compiled then.
    pub fn new(sources: Vec<String>) -> Result<Patterns> {
        let mut literals: Option<Vec<Vec<u8>>> = Some(Vec::new());
        for source in &sources {
            if let Err(e) = builder(source).build() {
                return Err(Error::new(
                    ErrorKind::Search,
                    format!("invalid failure pattern {source:?} (Rust regex syntax): {e}"),
                ));
            }
            literals = match (literals, required_literals(source)) {
                (Some(mut all), Some(own)) => {
                    all.extend(own);
                    Some(all)
                }
                _ => None,
            };
        }
        let combined = sources
            .iter()
            .map(|s| format!("(?:{s})"))
            .collect::<Vec<_>>()
            .join("|");
        let line = builder(&combined).build().map_err(|e| {
            Error::new(
                ErrorKind::Search,
                format!("the failure patterns do not compile together: {e}"),
            )
        })?;
        let prefilter = match literals {
            Some(lits) if !lits.is_empty() => {
                let source = minimal(lits)
                    .iter()
                    .map(|l| escaped(l))
                    .collect::<Vec<_>>()
                    .join("|");
                // Unicode off: a literal is bytes, and may be part of a
                // character.
                RegexBuilder::new(&format!("(?-u:{source})"))
                    .unicode(false)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .ok()
            }
            _ => None,
        };
        Ok(Patterns {
            sources,
            line,
            prefilter,
        })
    }

    /// Whether LINE (without its newline) matches some pattern.
    pub fn matches(&self, line: &[u8]) -> bool {
        self.line.is_match(line)
    }
}

/// The patterns the module's previews use (set from Lisp).
static CURRENT: RwLock<Option<Arc<Patterns>>> = RwLock::new(None);

/// Use SOURCES from now on; an empty list turns kept lines off. An
/// invalid pattern leaves the previous patterns in place.
pub fn install(sources: Vec<String>) -> Result<()> {
    if current().is_some_and(|p| p.sources == sources) {
        return Ok(());
    }
    let compiled = if sources.is_empty() {
        None
    } else {
        Some(Arc::new(Patterns::new(sources)?))
    };
    match CURRENT.write() {
        Ok(mut slot) => *slot = compiled,
        Err(poisoned) => *poisoned.into_inner() = compiled,
    }
    Ok(())
}

/// The installed patterns, if any.
pub fn current() -> Option<Arc<Patterns>> {
    match CURRENT.read() {
        Ok(slot) => slot.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// 1-based line number within the previewed text.
    pub number: usize,
    /// The line, cut to [`KEPT_LINE_CHARS`] characters.
    pub text: String,
}

impl Line {
    fn new(number: usize, bytes: &[u8]) -> Line {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        // A cut line needs no more than this many bytes of it.
        let bytes = &bytes[..bytes.len().min(KEPT_LINE_CHARS * 4 + 4)];
        let decoded = String::from_utf8_lossy(bytes);
        let mut text: String = decoded.chars().take(KEPT_LINE_CHARS).collect();
        if text.len() < decoded.len() {
            text.push('…');
        }
        Line { number, text }
    }

    /// Characters of its rendering: `  L<n>: <text>` and a newline.
    fn chars(&self) -> usize {
        self.rendered().chars().count()
    }

    fn rendered(&self) -> String {
        format!("  L{}: {}\n", self.number, self.text)
    }
}

/// The matching lines of a text's omitted middle that a preview shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kept {
    /// Shown lines, in file order.
    pub lines: Vec<Line>,
    /// Omitted lines that match, shown or not.
    pub matched: usize,
}

impl Kept {
    /// Characters the shown lines take from the preview's budget.
    pub fn chars(&self) -> usize {
        self.lines.iter().map(Line::chars).sum()
    }

    /// The block placed after the omission line: a header with the exact
    /// counts, the shown lines and a closing line; empty when nothing
    /// matched.
    pub fn render(&self) -> String {
        if self.matched == 0 {
            return String::new();
        }
        let shown = self.lines.len();
        let what = if self.matched == 1 {
            "1 of the omitted lines looks like a failure".to_string()
        } else {
            format!("{} of the omitted lines look like failures", self.matched)
        };
        if shown == 0 {
            return format!("[{what}; none fits in this preview]\n");
        }
        let mut out = if shown == self.matched {
            format!("[{what}:]\n")
        } else {
            format!(
                "[{what}; {shown} shown, {} not shown:]\n",
                self.matched - shown
            )
        };
        for line in &self.lines {
            out.push_str(&line.rendered());
        }
        out.push_str("[end of kept lines]\n");
        out
    }
}

/// Matching lines of a text, gathered in one pass in file order.
#[derive(Debug)]
pub struct Collector<'p> {
    patterns: &'p Patterns,
    /// Byte offsets (within the text) before which a line may be in the
    /// head, and from which it may be in the tail.
    head_zone_end: u64,
    tail_zone_start: u64,
    head_zone: Vec<Line>,
    first: Vec<Line>,
    /// The latest interior match beyond `first`.
    last: Option<Line>,
    interior: usize,
    tail_zone: Vec<Line>,
    /// The number of the line last recorded (pieces of one long line
    /// record it once).
    recorded: usize,
}

impl<'p> Collector<'p> {
    /// A collector for a text whose head may reach byte HEAD_ZONE_END
    /// and whose tail may start at byte TAIL_ZONE_START.
    pub fn new(patterns: &'p Patterns, head_zone_end: u64, tail_zone_start: u64) -> Self {
        Collector {
            patterns,
            head_zone_end,
            tail_zone_start,
            head_zone: Vec::new(),
            first: Vec::new(),
            last: None,
            interior: 0,
            tail_zone: Vec::new(),
            recorded: 0,
        }
    }

    /// Scan BYTES, whole lines starting at byte AT of the text on line
    /// LINE (1-based); the last may lack its newline. Returns the
    /// newlines in BYTES: counting the gaps between candidate lines,
    /// which the line numbers need anyway, counts them all.
    pub fn scan(&mut self, bytes: &[u8], at: u64, line: usize) -> usize {
        let mut pos = 0;
        let mut counted = 0;
        let mut number = line;
        while pos < bytes.len() {
            let hit = match &self.patterns.prefilter {
                Some(p) => match p.find_at(bytes, pos) {
                    Some(m) => m.start(),
                    None => break,
                },
                None => pos,
            };
            let start = memchr::memrchr(b'\n', &bytes[pos..hit]).map_or(pos, |i| pos + i + 1);
            let end = memchr::memchr(b'\n', &bytes[hit..]).map_or(bytes.len(), |i| hit + i);
            number += bytecount::count(&bytes[counted..start], b'\n');
            counted = start;
            if self.patterns.matches(&bytes[start..end]) {
                self.record(at + start as u64, Line::new(number, &bytes[start..end]));
            }
            pos = end + 1;
        }
        number - line + bytecount::count(&bytes[counted..], b'\n')
    }

    /// Take in LATER, the collector of the text that follows this one's,
    /// from a line start after BEFORE newlines: its lines are numbered
    /// from 1 there, and its zones were given relative to where it
    /// starts.
    pub fn append(&mut self, later: Collector<'p>, before: usize) {
        let renumber = |mut line: Line| {
            line.number += before;
            line
        };
        self.head_zone
            .extend(later.head_zone.into_iter().map(renumber));
        // The interior matches in file order, of which the first ones
        // and the last stay.
        let interior: Vec<Line> = std::mem::take(&mut self.first)
            .into_iter()
            .chain(self.last.take())
            .chain(later.first.into_iter().map(renumber))
            .chain(later.last.map(renumber))
            .collect();
        let mut interior = interior.into_iter();
        self.first = interior.by_ref().take(MAX_KEPT_LINES).collect();
        self.last = interior.last();
        self.interior += later.interior;
        self.tail_zone
            .extend(later.tail_zone.into_iter().map(renumber));
        if later.recorded > 0 {
            self.recorded = later.recorded + before;
        }
    }

    fn record(&mut self, at: u64, line: Line) {
        if line.number == self.recorded {
            return;
        }
        self.recorded = line.number;
        if at < self.head_zone_end {
            self.head_zone.push(line);
        } else if at >= self.tail_zone_start {
            self.tail_zone.push(line);
        } else {
            self.interior += 1;
            if self.first.len() < MAX_KEPT_LINES {
                self.first.push(line);
            } else {
                self.last = Some(line);
            }
        }
    }

    /// The kept lines among lines FIRST..=LAST (the omitted middle): the
    /// first ones and the last one whose renderings fit MAX_CHARS, at
    /// most [`MAX_KEPT_LINES`], in file order.
    pub fn select(&self, first: usize, last: usize, max_chars: usize) -> Kept {
        let inside = |l: &&Line| (first..=last).contains(&l.number);
        let head: Vec<&Line> = self.head_zone.iter().filter(inside).collect();
        let tail: Vec<&Line> = self.tail_zone.iter().filter(inside).collect();
        let matched = head.len() + self.interior + tail.len();
        // Every match in file order up to the first MAX_KEPT_LINES of the
        // interior, then its last and the tail zone's: enough for "the
        // first ones and the last".
        let seen: Vec<&Line> = head
            .into_iter()
            .chain(self.first.iter())
            .chain(self.last.iter())
            .chain(tail)
            .collect();
        let Some((&final_line, before)) = seen.split_last() else {
            return Kept::default();
        };
        let final_chars = final_line.chars();
        let (room, with_final) = if final_chars <= max_chars {
            (max_chars - final_chars, true)
        } else {
            (max_chars, false)
        };
        let mut lines = Vec::new();
        let mut used = 0;
        let limit = MAX_KEPT_LINES - usize::from(with_final);
        let candidates = if with_final { before } else { &seen[..] };
        for line in candidates.iter().take(limit) {
            let chars = line.chars();
            if used + chars > room {
                break;
            }
            used += chars;
            lines.push((*line).clone());
        }
        if with_final {
            lines.push(final_line.clone());
        }
        Kept { lines, matched }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The default `mevedel-pipeline-failure-patterns`, read from the
    /// Lisp source so the tests check what users get.
    pub(crate) fn default_sources() -> Vec<String> {
        let lisp = include_str!("../../../../lisp/mevedel-pipeline.el");
        let from = lisp
            .find("(defcustom mevedel-pipeline-failure-patterns\n  '(")
            .expect("the defcustom is in the source");
        let mut sources = Vec::new();
        let mut chars = lisp[from..].chars();
        let mut depth = 0;
        while let Some(c) = chars.next() {
            match c {
                '(' => depth += 1,
                ')' if depth == 2 => break,
                ')' => depth -= 1,
                ';' => {
                    chars.by_ref().find(|&c| c == '\n');
                }
                '"' => {
                    let mut source = String::new();
                    while let Some(c) = chars.next() {
                        match c {
                            '"' => break,
                            '\\' => match chars.next() {
                                Some(e @ ('\\' | '"')) => source.push(e),
                                other => panic!("unexpected escape {other:?}"),
                            },
                            c => source.push(c),
                        }
                    }
                    sources.push(source);
                }
                _ => {}
            }
        }
        sources
    }

    pub(crate) fn default_patterns() -> Patterns {
        Patterns::new(default_sources()).unwrap()
    }

    fn collect<'p>(patterns: &'p Patterns, text: &str) -> Collector<'p> {
        let mut c = Collector::new(patterns, 0, u64::MAX);
        c.scan(text.as_bytes(), 0, 1);
        c
    }

    #[test]
    fn invalid_pattern_is_named() {
        let err = Patterns::new(vec!["ok".into(), "bad(".into()]).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Search);
        assert!(err.message.contains("\"bad(\""), "{}", err.message);
    }

    #[test]
    fn install_keeps_previous_on_error() {
        // The only test that touches the installed patterns.
        install(vec!["^boom".into()]).unwrap();
        assert!(install(vec!["(".into()]).is_err());
        assert_eq!(current().unwrap().sources, ["^boom".to_string()]);
        install(Vec::new()).unwrap();
        assert!(current().is_none());
    }

    #[test]
    fn prefilter_needs_literals_in_every_pattern() {
        assert!(default_patterns().prefilter.is_some());
        let loose = Patterns::new(vec!["error".into(), r"^\w+:$".into()]).unwrap();
        assert!(loose.prefilter.is_none());
        // Same lines found either way.
        let text = "a\nerror here\nword:\nb\n";
        let c = collect(&loose, text);
        let k = c.select(1, 4, 1000);
        assert_eq!(
            k.lines.iter().map(|l| l.number).collect::<Vec<_>>(),
            vec![2, 3]
        );
    }

    #[test]
    fn default_literals_are_few() {
        let sources = default_sources();
        assert!(sources.len() >= 20, "{sources:?}");
        let all: Vec<Vec<u8>> = sources
            .iter()
            .flat_map(|s| required_literals(s).unwrap_or_else(|| panic!("no literals: {s}")))
            .collect();
        let lits = minimal(all);
        let shown: Vec<String> = lits
            .iter()
            .map(|l| String::from_utf8_lossy(l).into())
            .collect();
        assert!(lits.len() <= 48, "{shown:?}");
        assert!(shown.contains(&"error".to_string()), "{shown:?}");
    }

    #[test]
    fn anchors_are_line_anchors() {
        let p = Patterns::new(vec![r"^FAIL$".into()]).unwrap();
        let c = collect(&p, "xFAIL\nFAIL\r\nFAIL x\nFAIL");
        let k = c.select(1, 4, 1000);
        assert_eq!(
            k.lines,
            vec![
                Line {
                    number: 2,
                    text: "FAIL".into()
                },
                Line {
                    number: 4,
                    text: "FAIL".into()
                }
            ]
        );
    }

    #[test]
    fn long_lines_are_cut() {
        let p = Patterns::new(vec!["error".into()]).unwrap();
        let text = format!("error {}\n", "é".repeat(500));
        let k = collect(&p, &text).select(1, 1, 10_000);
        assert_eq!(k.lines[0].text.chars().count(), KEPT_LINE_CHARS + 1);
        assert!(k.lines[0].text.ends_with('…'));
    }

    #[test]
    fn first_ones_and_the_last_within_bounds() {
        let p = Patterns::new(vec!["^E".into()]).unwrap();
        let text: String = (1..=100).map(|i| format!("E{i}\nok\n")).collect();
        let c = collect(&p, &text);
        let k = c.select(1, 200, 100_000);
        assert_eq!(k.matched, 100);
        let numbers: Vec<usize> = k.lines.iter().map(|l| l.number).collect();
        let mut want: Vec<usize> = (0..MAX_KEPT_LINES - 1).map(|i| 2 * i + 1).collect();
        want.push(199);
        assert_eq!(numbers, want);
        // A tight budget keeps the last and as many first ones as fit.
        let k = c.select(1, 200, 31);
        assert_eq!(
            k.lines.iter().map(|l| l.number).collect::<Vec<_>>(),
            vec![1, 3, 199]
        );
        assert_eq!(k.chars(), 31);
        assert!(k.render().starts_with(
            "[100 of the omitted lines look like failures; 3 shown, 97 not shown:]\n"
        ));
    }

    #[test]
    fn zones_filter_by_line() {
        let p = Patterns::new(vec!["^E".into()]).unwrap();
        let text = "E1\nE2\nE3\nE4\nE5\n";
        let mut c = Collector::new(&p, 6, 9);
        c.scan(text.as_bytes(), 0, 1);
        let k = c.select(2, 4, 1000);
        assert_eq!(k.matched, 3);
        assert_eq!(
            k.lines.iter().map(|l| l.number).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
    }
}
