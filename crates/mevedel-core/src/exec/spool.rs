//! The on-disk spool that holds a command's output.
//!
//! Output goes to a file, never to Emacs memory: the file is capped
//! ([`DEFAULT_CAP`], 64 MiB) and readers take byte ranges from it. A
//! range becomes model-visible text through [`preview`]: whole when it is
//! short, otherwise an equal head and tail (cuts moved to nearby newlines)
//! with the exact number of characters and the lines left out, computed by
//! streaming the file so a 64 MiB range costs no 64 MiB of memory.
//!
//! The range is also scanned for the omitted lines that look like
//! failures (`text::keep`), in the same pass as the count: each buffer
//! read is counted and searched while it is in cache, and the search's
//! line numbering counts the newlines. The literal search still costs
//! about half the count, so a long range is cut at line starts into
//! segments that two threads read, count and scan independently, and
//! a preview that keeps lines takes no longer than a plain one when a
//! second core is free. The preview keeps those lines between its
//! omission notice and its tail, within the same budget.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, ErrorKind, Result};
use crate::text::internal::{self, Lead};
use crate::text::keep::{Collector, Kept, Patterns};
use crate::text::preview;

/// Output kept per execution.
pub const DEFAULT_CAP: u64 = 64 * 1024 * 1024;

/// Characters of unread output returned whole; beyond it, a preview.
pub const PREVIEW_BUDGET: usize = 2000;

/// What appending a chunk did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Append {
    Written,
    /// The cap was reached; only the part that fit was written.
    Limit,
    /// The write failed; nothing of the chunk counts as written.
    Failed(String),
}

/// The writing side of a spool file.
#[derive(Debug)]
pub struct Spool {
    path: PathBuf,
    file: File,
    written: u64,
    cap: u64,
}

impl Spool {
    /// Create (truncate) the spool at PATH with CAP bytes of room.
    pub fn create(path: &Path, cap: u64) -> Result<Spool> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(ErrorKind::Exec, "cannot create the output spool", &e))?;
        Ok(Spool {
            path: path.to_path_buf(),
            file,
            written: 0,
            cap,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.written
    }

    pub fn is_empty(&self) -> bool {
        self.written == 0
    }

    /// A second handle for readers.
    pub fn reader(&self) -> Result<File> {
        self.file
            .try_clone()
            .map_err(|e| Error::io(ErrorKind::Exec, "cannot open the output spool", &e))
    }

    /// Append CHUNK, up to the cap. Counters only advance for bytes the
    /// file accepted.
    pub fn append(&mut self, chunk: &[u8]) -> Append {
        let room = self.cap.saturating_sub(self.written);
        let take = chunk.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        if take > 0 {
            if let Err(e) = self.file.write_all_at(&chunk[..take], self.written) {
                return Append::Failed(format!("cannot write the output spool: {e}"));
            }
            self.written += take as u64;
        }
        if take < chunk.len() {
            Append::Limit
        } else {
            Append::Written
        }
    }
}

/// Read bytes START..END of FILE (short at end of file).
pub fn read_range(file: &File, start: u64, end: u64) -> Vec<u8> {
    let len = usize::try_from(end.saturating_sub(start)).unwrap_or(0);
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        match file.read_at(&mut buf[done..], start + done as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => done += n,
        }
    }
    buf.truncate(done);
    buf
}

/// Where a range of possibly still-growing output may end without
/// splitting a character: END moved back over an incomplete final
/// sequence (at most 3 bytes).
pub fn complete_end(file: &File, start: u64, end: u64) -> u64 {
    let from = end.saturating_sub(3).max(start);
    from + complete_len(&read_range(file, from, end)) as u64
}

/// The length of BYTES without an incomplete final sequence, judged by
/// the lead classes of `text::internal`.
fn complete_len(bytes: &[u8]) -> usize {
    let from = bytes.len().saturating_sub(3);
    for (i, &b) in bytes[from..].iter().enumerate().rev() {
        if internal::is_continuation(b) {
            continue;
        }
        let at = from + i;
        return if bytes.len() - at < Lead::of(b).seq_len() {
            at
        } else {
            bytes.len()
        };
    }
    bytes.len()
}

/// Characters of lossily decoded BYTES, as Emacs would see them: each
/// invalid sequence counts as one replacement character.
fn chars(bytes: &[u8]) -> usize {
    if std::str::from_utf8(bytes).is_ok() {
        return bytecount::num_chars(bytes);
    }
    bytes
        .utf8_chunks()
        .map(|c| bytecount::num_chars(c.valid().as_bytes()) + usize::from(!c.invalid().is_empty()))
        .sum()
}

/// A model-visible view of a byte range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeView {
    /// The whole range, when it fits the budget.
    pub whole: Option<String>,
    pub head: String,
    pub tail: String,
    pub total_chars: usize,
    pub omitted_chars: usize,
    /// 1-based lines (within the range) of the first and last omitted
    /// characters.
    pub omitted_lines: (usize, usize),
    pub total_lines: usize,
    /// Omitted lines that look like failures (numbered within the range).
    pub kept: Kept,
}

impl RangeView {
    pub fn is_preview(&self) -> bool {
        self.whole.is_none()
    }
}

/// The buffer counting reads through: small enough to come from the
/// heap rather than a fresh mapping, and reused for the whole range.
const COUNT_CHUNK: usize = 64 * 1024;

/// Call F with FILE's START..END in consecutive pieces read through one
/// buffer, each ending on a whole character: a sequence cut at the
/// buffer's end is carried into the next piece.
fn for_each_piece(file: &File, start: u64, end: u64, mut f: impl FnMut(&[u8])) {
    let mut buf = vec![0u8; COUNT_CHUNK];
    let mut carried = 0;
    let mut pos = start;
    while pos < end {
        let want = (COUNT_CHUNK - carried).min(usize::try_from(end - pos).unwrap_or(usize::MAX));
        let n = match file.read_at(&mut buf[carried..carried + want], pos) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pos += n as u64;
        let filled = carried + n;
        let cut = if pos < end {
            complete_len(&buf[..filled])
        } else {
            filled
        };
        f(&buf[..cut]);
        buf.copy_within(cut..filled, 0);
        carried = filled - cut;
    }
    if carried > 0 {
        f(&buf[..carried]);
    }
}

/// Count characters and newlines of FILE's START..END, reading it through
/// one buffer.
fn count_range(file: &File, start: u64, end: u64) -> (usize, usize) {
    let (mut chars, mut lines) = (0, 0);
    for_each_piece(file, start, end, |piece| {
        chars += self::chars(piece);
        lines += bytecount::count(piece, b'\n');
    });
    (chars, lines)
}

/// A range scanned for failure lines is cut, at line starts, into
/// segments of about this size, which two threads take in turn
/// (`BENCH preview-keep-lines-64mib`): small enough that neither waits
/// long for the other's last one, and that the first takes what the
/// second has not started when it gets no core.
const SEGMENT: u64 = 2 * 1024 * 1024;

/// How far past a segment's nominal end its line start is looked for;
/// a longer line there joins it to the next segment.
const SEGMENT_PROBE: u64 = 4096;

/// Consecutive pieces of a range, fed to a collector as whole lines:
/// the whole lines of each piece go straight to it, a line cut at a
/// piece's end is carried into the next (one longer than
/// [`COUNT_CHUNK`] goes in pieces). The collector counts the newlines.
struct LineFeed<'c, 'p> {
    collector: &'c mut Collector<'p>,
    pending: Vec<u8>,
    /// Offset within the range of the next byte not yet fed (the first
    /// pending one), and the newlines before it.
    at: u64,
    lines: usize,
}

impl<'c, 'p> LineFeed<'c, 'p> {
    fn new(collector: &'c mut Collector<'p>) -> Self {
        LineFeed {
            collector,
            pending: Vec::new(),
            at: 0,
            lines: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        if !self.pending.is_empty() {
            let Some(nl) = memchr::memchr(b'\n', bytes) else {
                self.pending.extend_from_slice(bytes);
                self.flush_long();
                return;
            };
            self.pending.extend_from_slice(&bytes[..=nl]);
            bytes = &bytes[nl + 1..];
            let pending = std::mem::take(&mut self.pending);
            self.feed(&pending);
            self.pending = pending;
            self.pending.clear();
        }
        let whole = memchr::memrchr(b'\n', bytes).map_or(0, |nl| nl + 1);
        self.feed(&bytes[..whole]);
        self.pending.extend_from_slice(&bytes[whole..]);
        self.flush_long();
    }

    /// Feed the carried line now when it has grown past one buffer.
    fn flush_long(&mut self) {
        if self.pending.len() >= COUNT_CHUNK {
            self.finish();
        }
    }

    /// Feed what is carried (the range's last line).
    fn finish(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.feed(&pending);
        self.pending = pending;
        self.pending.clear();
    }

    fn feed(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.lines += self.collector.scan(bytes, self.at, self.lines + 1);
        self.at += bytes.len() as u64;
    }
}

/// [`count_range`] that also feeds FILE's START..END to COLLECTOR, each
/// piece while it is in cache; the collector counts the newlines.
fn scan_range(file: &File, start: u64, end: u64, collector: &mut Collector<'_>) -> (usize, usize) {
    let mut chars = 0;
    let mut feed = LineFeed::new(collector);
    for_each_piece(file, start, end, |piece| {
        chars += self::chars(piece);
        feed.push(piece);
    });
    feed.finish();
    (chars, feed.lines)
}

/// Line starts in FILE's START..END about [`SEGMENT`] apart, with START
/// and END: the bounds of the segments.
fn segment_bounds(file: &File, start: u64, end: u64) -> Vec<u64> {
    let mut bounds = vec![start];
    let mut at = start + SEGMENT;
    while at + SEGMENT / 2 < end {
        let probe = read_range(file, at, (at + SEGMENT_PROBE).min(end));
        if let Some(nl) = memchr::memchr(b'\n', &probe) {
            at += nl as u64 + 1;
            bounds.push(at);
        }
        at += SEGMENT;
    }
    bounds.push(end);
    bounds
}

/// Counts and collector of one segment (lines numbered within it).
type Segment<'p> = (usize, (usize, usize), Collector<'p>);

/// Count FILE's START..END and, with PATTERNS, collect its failure
/// lines (zones as for [`Collector::new`]) in the same pass; a long
/// range is cut into segments that this thread and a second one take in
/// turn. If that thread cannot start, this one takes them all; if it
/// panics, its segments are only counted and no lines are kept.
fn count_and_scan<'p>(
    file: &File,
    (start, end): (u64, u64),
    patterns: Option<&'p Patterns>,
    (head_zone_end, tail_zone_start): (u64, u64),
) -> ((usize, usize), Option<Collector<'p>>) {
    let Some(patterns) = patterns else {
        return (count_range(file, start, end), None);
    };
    let bounds = segment_bounds(file, start, end);
    let next = AtomicUsize::new(0);
    // Take segments until none is left. A segment's collector numbers
    // its lines from 1 and has the zones shifted to its start.
    let take = || {
        let mut done: Vec<Segment<'p>> = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let [from, to] = match bounds.get(i..i + 2) {
                Some(&[from, to]) => [from, to],
                _ => return done,
            };
            let offset = from - start;
            let mut collector = Collector::new(
                patterns,
                head_zone_end.saturating_sub(offset),
                tail_zone_start.saturating_sub(offset),
            );
            let counts = scan_range(file, from, to, &mut collector);
            done.push((i, counts, collector));
        }
    };
    let (mut segments, lost) = if bounds.len() > 2 {
        std::thread::scope(|s| {
            let helper = std::thread::Builder::new()
                .name("mevedel-preview-scan".into())
                .spawn_scoped(s, take);
            let mut segments = take();
            let lost = match helper.map(|h| h.join()) {
                Ok(Ok(theirs)) => {
                    segments.extend(theirs);
                    false
                }
                Ok(Err(_)) => true,
                Err(_) => false,
            };
            (segments, lost)
        })
    } else {
        (take(), false)
    };
    segments.sort_by_key(|(i, _, _)| *i);
    if lost {
        let (mut chars, mut lines) = (0, 0);
        for (i, pair) in bounds.windows(2).enumerate() {
            let (c, l) = match segments.iter().find(|(j, _, _)| *j == i) {
                Some((_, counts, _)) => *counts,
                None => count_range(file, pair[0], pair[1]),
            };
            chars += c;
            lines += l;
        }
        return ((chars, lines), None);
    }
    let mut collector = Collector::new(patterns, head_zone_end, tail_zone_start);
    let (mut chars, mut lines) = (0, 0);
    for (_, (c, l), segment) in segments {
        collector.append(segment, lines);
        chars += c;
        lines += l;
    }
    ((chars, lines), Some(collector))
}

/// A head and a tail cut from the windows at the range's two ends.
struct Sides<'a> {
    head: &'a str,
    tail: &'a str,
    /// 1-based lines of the first and last omitted characters.
    lines: (usize, usize),
}

impl<'a> Sides<'a> {
    /// SIDE characters each from HEAD_WINDOW and TAIL_WINDOW (decoded),
    /// cut as the shared text previews cut. AFTER_NEWLINE says the byte
    /// before the tail window is a newline; TOTAL_NEWLINES is the range's.
    fn new(
        head_window: &'a str,
        tail_window: &'a str,
        side: usize,
        after_newline: bool,
        total_newlines: usize,
    ) -> Sides<'a> {
        let head = &head_window[..preview::head_end(head_window, side)];
        let from = preview::tail_start(tail_window, side, 0);
        let tail = &tail_window[from..];
        let last_omitted_newline = if from > 0 {
            tail_window.as_bytes()[from - 1] == b'\n'
        } else {
            after_newline
        };
        let head_newlines = bytecount::count(head.as_bytes(), b'\n');
        let tail_newlines = bytecount::count(tail.as_bytes(), b'\n');
        Sides {
            head,
            tail,
            lines: (
                head_newlines + 1,
                total_newlines - tail_newlines + 1 - usize::from(last_omitted_newline),
            ),
        }
    }
}

/// View FILE's bytes START..END within BUDGET characters. Head and tail
/// get half the budget each; a cut moves to a newline at most a fifth of
/// its side away, as the shared text previews do. With PATTERNS, omitted
/// lines that match are kept as in `text::preview::head_tail`, found
/// while the range is counted.
pub fn preview(
    file: &File,
    start: u64,
    end: u64,
    budget: usize,
    patterns: Option<&Patterns>,
) -> RangeView {
    let side = budget / 2;
    let slack = side / 5;
    // Four bytes per character at most.
    let window = ((side + slack) * 4) as u64;
    if end - start <= (budget * 4) as u64 {
        let text = String::from_utf8_lossy(&read_range(file, start, end)).into_owned();
        let total_chars = text.chars().count();
        if total_chars <= budget {
            let total_lines =
                bytecount::count(text.as_bytes(), b'\n') + usize::from(!text.ends_with('\n'));
            return RangeView {
                whole: Some(text),
                head: String::new(),
                tail: String::new(),
                total_chars,
                omitted_chars: 0,
                omitted_lines: (0, 0),
                total_lines: if total_chars == 0 { 0 } else { total_lines },
                kept: Kept::default(),
            };
        }
    }
    let head_window = read_range(file, start, (start + window).min(end));
    let mut tail_from = end.saturating_sub(window).max(start);
    // Start the tail window on a character boundary.
    let probe = read_range(file, tail_from, (tail_from + 4).min(end));
    tail_from += probe.iter().take_while(|&&b| b & 0xC0 == 0x80).count() as u64;
    let tail_window = read_range(file, tail_from, end);
    let after_newline = tail_from > start && read_range(file, tail_from - 1, tail_from) == b"\n";
    let ((total_chars, total_newlines), collector) = count_and_scan(
        file,
        (start, end),
        patterns,
        (head_window.len() as u64, tail_from - start),
    );
    let head_text = String::from_utf8_lossy(&head_window);
    let tail_text = String::from_utf8_lossy(&tail_window);
    let sides = |side| Sides::new(&head_text, &tail_text, side, after_newline, total_newlines);
    let mut cut = sides(side);
    let mut kept = Kept::default();
    if let Some(collector) = &collector {
        let room = collector.select(cut.lines.0, cut.lines.1, budget / 2);
        if room.matched > 0 {
            cut = sides((budget - room.chars()) / 2);
            kept = collector.select(cut.lines.0, cut.lines.1, room.chars());
        }
    }
    let head_chars = cut.head.chars().count();
    let tail_chars = cut.tail.chars().count();
    RangeView {
        whole: None,
        head: cut.head.to_string(),
        tail: cut.tail.to_string(),
        total_chars,
        omitted_chars: total_chars - head_chars - tail_chars,
        omitted_lines: cut.lines,
        total_lines: total_newlines + usize::from(!cut.tail.ends_with('\n')),
        kept,
    }
}

/// The last characters of FILE up to END, at most MAX_CHARS and
/// MAX_LINES lines: the bounded live tail of progress events.
pub fn live_tail(file: &File, end: u64, max_chars: usize, max_lines: usize) -> String {
    let from = end.saturating_sub((max_chars * 4) as u64);
    let bytes = read_range(file, from, end);
    let skip = bytes.iter().take_while(|&&b| b & 0xC0 == 0x80).count();
    let text = String::from_utf8_lossy(&bytes[skip..]);
    let chars: Vec<char> = text.chars().collect();
    let mut start = chars.len().saturating_sub(max_chars);
    let mut newlines = 0;
    for i in (start..chars.len()).rev() {
        if chars[i] == '\n' && i + 1 < chars.len() {
            newlines += 1;
            if newlines >= max_lines {
                start = i + 1;
                break;
            }
        }
    }
    chars[start..].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spool_with(name: &str, bytes: &[u8]) -> (Spool, PathBuf) {
        let dir = std::env::temp_dir().join(format!("mevedel-spool-{}-{name}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("out");
        let mut spool = Spool::create(&path, DEFAULT_CAP).unwrap();
        assert_eq!(spool.append(bytes), Append::Written);
        (spool, dir)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Counting through one buffer gives what decoding all of it at
        /// once gives, wherever sequences (valid or not) meet its edges.
        #[test]
        fn counts_match_whole_decoding(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("\n".as_bytes().to_vec()),
                    proptest::strategy::Just("é".as_bytes().to_vec()),
                    proptest::strategy::Just("€".as_bytes().to_vec()),
                    proptest::strategy::Just("😀".as_bytes().to_vec()),
                    proptest::strategy::Just(vec![0xF0, 0x9F]),
                    proptest::strategy::Just(vec![0x80]),
                    proptest::collection::vec(b'a'..=b'z', 1..3000),
                ],
                1..200,
            ),
            skip in 0usize..5,
        ) {
            let bytes: Vec<u8> = pieces.concat();
            let (_spool, dir) = spool_with("count", &bytes);
            let file = File::open(dir.join("out")).unwrap();
            let start = skip.min(bytes.len());
            let text = String::from_utf8_lossy(&bytes[start..]);
            let want = (text.chars().count(), text.matches('\n').count());
            proptest::prop_assert_eq!(count_range(&file, start as u64, bytes.len() as u64), want);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn cap_writes_what_fits() {
        let dir = std::env::temp_dir().join(format!("mevedel-cap-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let mut spool = Spool::create(&dir.join("o"), 10).unwrap();
        assert_eq!(spool.append(b"12345"), Append::Written);
        assert_eq!(spool.append(b"6789abc"), Append::Limit);
        assert_eq!(spool.len(), 10);
        assert_eq!(spool.append(b"x"), Append::Limit);
        assert_eq!(
            std::fs::read(dir.join("o")).unwrap_or_default(),
            b"123456789a"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn short_range_is_whole() {
        let (spool, dir) = spool_with("short", b"one\ntwo\n");
        let r = spool.reader().unwrap();
        let v = preview(&r, 0, spool.len(), PREVIEW_BUDGET, None);
        assert_eq!(v.whole.as_deref(), Some("one\ntwo\n"));
        let v = preview(&r, 4, spool.len(), PREVIEW_BUDGET, None);
        assert_eq!(v.whole.as_deref(), Some("two\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn long_range_has_equal_sides_and_exact_counts() {
        let text: String = (1..=1000).map(|i| format!("line {i:04}\n")).collect();
        let (spool, dir) = spool_with("long", text.as_bytes());
        let r = spool.reader().unwrap();
        let v = preview(&r, 0, spool.len(), 110, None);
        assert!(v.is_preview());
        assert_eq!(
            v.head,
            (1..=5)
                .map(|i| format!("line {i:04}\n"))
                .collect::<String>()
        );
        assert!(v.tail.starts_with("line ") && v.tail.ends_with("line 1000\n"));
        assert_eq!(v.total_chars, 10_000);
        assert_eq!(v.omitted_chars, 10_000 - v.head.len() - v.tail.len());
        assert_eq!(v.omitted_lines.0, 6);
        assert_eq!(v.omitted_lines.1, 1000 - v.tail.lines().count());
        assert_eq!(v.total_lines, 1000);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn multibyte_counts_are_characters() {
        let text = "é".repeat(3000);
        let (spool, dir) = spool_with("utf8", text.as_bytes());
        let r = spool.reader().unwrap();
        let v = preview(&r, 0, spool.len(), 100, None);
        assert_eq!((v.head.chars().count(), v.tail.chars().count()), (50, 50));
        assert_eq!(v.omitted_chars, 2900);
        // A range ending inside a character backs off to its start.
        assert_eq!(complete_end(&r, 0, 3), 2);
        assert_eq!(complete_end(&r, 0, 4), 4);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn live_tail_is_bounded() {
        let text: String = (1..=100).map(|i| format!("{i}\n")).collect();
        let (spool, dir) = spool_with("tail", text.as_bytes());
        let r = spool.reader().unwrap();
        assert_eq!(live_tail(&r, spool.len(), 2000, 3), "98\n99\n100\n");
        assert_eq!(live_tail(&r, spool.len(), 4, 100), "100\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn kept_lines_match_the_text_preview() {
        // About 3 MiB of mixed-width lines; failures land at and across
        // the edges of the 64 KiB buffers, and one 100 KiB line starts
        // with one.
        let mut text = String::new();
        let mut i = 0;
        while text.len() < 3 << 20 {
            i += 1;
            if i % 997 == 0 {
                text.push_str(&format!("src/x.rs:{i}:1: error: bad thing {i}\n"));
            } else if i == 20_000 {
                text.push_str(&format!("error: {}\n", "y".repeat(100 * 1024)));
            } else {
                text.push_str(&format!("line {i} {}\n", "é".repeat(i % 13)));
            }
        }
        let (spool, dir) = spool_with("kept", text.as_bytes());
        let r = spool.reader().unwrap();
        let patterns = crate::text::keep::tests::default_patterns();
        for budget in [100, 2000, 20_000] {
            let v = preview(&r, 0, spool.len(), budget, Some(&patterns));
            let p = crate::text::head_tail(&text, budget, Some(&patterns)).unwrap();
            assert_eq!(v.head, p.head, "budget {budget}");
            assert_eq!(v.tail, p.tail, "budget {budget}");
            assert_eq!(v.kept, p.kept, "budget {budget}");
            assert_eq!(v.omitted_chars, p.omitted_chars);
            assert_eq!(v.omitted_lines, (p.omitted_first_line, p.omitted_last_line));
            assert_eq!(v.total_lines, p.total_lines);
            let matching = text
                .lines()
                .enumerate()
                .filter(|(i, l)| {
                    (v.omitted_lines.0..=v.omitted_lines.1).contains(&(i + 1))
                        && patterns.matches(l.as_bytes())
                })
                .count();
            assert_eq!(v.kept.matched, matching);
            assert!(matching > 100 && !v.kept.lines.is_empty());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn composed_preview_shows_kept_lines() {
        let mut text = String::new();
        for i in 1..=2000 {
            if i == 1234 {
                text.push_str("thread 'main' panicked at src/main.rs:3:5:\n");
            } else {
                text.push_str(&format!("step {i} done\n"));
            }
        }
        let (spool, dir) = spool_with("compose", text.as_bytes());
        let r = spool.reader().unwrap();
        let patterns = crate::text::keep::tests::default_patterns();
        let v = preview(&r, 0, spool.len(), PREVIEW_BUDGET, Some(&patterns));
        let out = super::super::execution::compose(&v, Some("/s/out"));
        let notice = format!(
            "[... {} characters omitted (lines {}-{} of this output); full output: /s/out ...]\n\
             [1 of the omitted lines looks like a failure:]\n\
             \x20 L1234: thread 'main' panicked at src/main.rs:3:5:\n\
             [end of kept lines]\n",
            v.omitted_chars, v.omitted_lines.0, v.omitted_lines.1
        );
        assert_eq!(out, format!("{}{notice}{}", v.head, v.tail));
        // Without patterns the same range has the plain preview.
        let plain = preview(&r, 0, spool.len(), PREVIEW_BUDGET, None);
        assert_eq!(plain.kept, Kept::default());
        assert!(plain.head.len() > v.head.len());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn segments_keep_what_one_pass_keeps() {
        // A failure every 1,000 lines over 9 MiB: in the head zone,
        // between the zones and in the tail zone, over several segments.
        let mut text = String::new();
        let mut i = 0;
        while text.len() < 9 << 20 {
            i += 1;
            if i % 1000 == 0 {
                text.push_str(&format!("src/a.c:{i}:1: error: bad {i}\n"));
            } else {
                text.push_str(&format!("line {i}\n"));
            }
        }
        let (spool, dir) = spool_with("segments", text.as_bytes());
        let r = spool.reader().unwrap();
        let end = spool.len();
        assert!(segment_bounds(&r, 0, end).len() > 4);
        let patterns = crate::text::keep::tests::default_patterns();
        let zones = (3 << 20, 7 << 20);
        let (counts, collector) = count_and_scan(&r, (0, end), Some(&patterns), zones);
        assert_eq!(counts, count_range(&r, 0, end));
        let collector = collector.unwrap();
        let mut one = Collector::new(&patterns, zones.0, zones.1);
        assert_eq!(one.scan(text.as_bytes(), 0, 1), counts.1);
        let lines = counts.1;
        for (first, last) in [(1, lines), (lines / 3, lines / 2), (150, lines - 150)] {
            let k = collector.select(first, last, 5000);
            assert_eq!(k, one.select(first, last, 5000), "lines {first}-{last}");
            assert!(k.matched > 100, "{}", k.matched);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn shared_buffers_count_the_same() {
        // Characters of every width and invalid bytes straddling the
        // 1 MiB buffer edges, and a 2 MiB line without a newline.
        let mut bytes = Vec::new();
        let mut i = 0usize;
        while bytes.len() < 5 << 20 {
            i += 1;
            match i % 5 {
                0 => bytes.extend_from_slice("😀€é\n".as_bytes()),
                1 => bytes.extend_from_slice(&[0xF0, 0x9F, b'\n']),
                2 => bytes.push(0x80),
                3 if i == 3 => bytes.extend(std::iter::repeat_n(b'z', 2 << 20)),
                _ => bytes.extend_from_slice(format!("error: {i}\n").as_bytes()),
            }
        }
        let (spool, dir) = spool_with("shared", &bytes);
        let r = spool.reader().unwrap();
        let patterns = crate::text::keep::tests::default_patterns();
        for skip in [0u64, 1, 2, 3] {
            let end = spool.len();
            let (counts, collector) =
                count_and_scan(&r, (skip, end), Some(&patterns), (0, u64::MAX));
            assert_eq!(counts, count_range(&r, skip, end), "skip {skip}");
            let mut alone = Collector::new(&patterns, 0, u64::MAX);
            scan_range(&r, skip, end, &mut alone);
            let lines = counts.1 + 1;
            assert_eq!(
                collector.unwrap().select(1, lines, usize::MAX),
                alone.select(1, lines, usize::MAX)
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
