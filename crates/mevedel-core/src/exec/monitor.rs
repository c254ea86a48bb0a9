//! Monitor's line handling: stdout bytes framed into lines (CRLF
//! normalised, each line bounded, a partial final line kept), batches of
//! at most 8 KiB, and the flood rule.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Characters kept per line; the rest is counted.
pub const LINE_MAX: usize = 2000;
/// Bytes of line text per batch (event); further lines are counted.
pub const BATCH_BYTES: usize = 8 * 1024;
/// Delay between the first pending line and its batch.
pub const BATCH_DELAY: Duration = Duration::from_millis(200);
/// More lines than this within [`FLOOD_WINDOW`] stop the monitor.
pub const FLOOD_LINES: usize = 100;
pub const FLOOD_WINDOW: Duration = Duration::from_secs(60);
/// More unread mailbox bytes than this stop the monitor.
pub const FLOOD_UNREAD_BYTES: u64 = 64 * 1024;

/// One framed line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    /// Characters cut from the end of the line.
    pub truncated: usize,
}

impl Line {
    /// The line as it appears in a record or event.
    pub fn render(&self) -> String {
        if self.truncated == 0 {
            self.text.clone()
        } else {
            format!("{} [... {} more characters]", self.text, self.truncated)
        }
    }
}

/// Splits a byte stream into lines.
#[derive(Debug, Default)]
pub struct Framer {
    partial: Vec<u8>,
    /// Characters of the current line dropped because it was too long.
    dropped: usize,
}

/// Bytes of one line kept before counting instead of storing.
const PARTIAL_MAX: usize = LINE_MAX * 4 + 4;

fn char_starts(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count()
}

impl Framer {
    fn line(&mut self) -> Line {
        let mut bytes = std::mem::take(&mut self.partial);
        if self.dropped == 0 && bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        let text = String::from_utf8_lossy(&bytes);
        let total = text.chars().count();
        let kept: String = text.chars().take(LINE_MAX).collect();
        let truncated = total.saturating_sub(LINE_MAX) + std::mem::take(&mut self.dropped);
        Line {
            text: kept,
            truncated,
        }
    }

    /// Feed BYTES; return the lines they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Line> {
        let mut lines = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let (piece, done) = match memchr_nl(rest) {
                Some(i) => (&rest[..i], i + 1),
                None => (rest, rest.len()),
            };
            let room = PARTIAL_MAX.saturating_sub(self.partial.len());
            if piece.len() <= room {
                self.partial.extend_from_slice(piece);
            } else {
                self.partial.extend_from_slice(&piece[..room]);
                self.dropped += char_starts(&piece[room..]);
            }
            let ended = done <= rest.len() && rest.get(done - 1) == Some(&b'\n');
            rest = &rest[done..];
            if ended {
                lines.push(self.line());
            }
        }
        lines
    }

    /// The partial final line, if any, at end of stream.
    pub fn finish(&mut self) -> Option<Line> {
        (!self.partial.is_empty() || self.dropped > 0).then(|| self.line())
    }
}

fn memchr_nl(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// Lines for one event, and how many pending lines it left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub lines: Vec<Line>,
    pub omitted: usize,
}

/// Take PENDING as one batch of at most [`BATCH_BYTES`] of line text.
pub fn batch(pending: &mut Vec<Line>) -> Batch {
    let mut size = 0;
    let mut lines = Vec::new();
    let mut omitted = 0;
    for line in pending.drain(..) {
        let len = line.render().len() + 1;
        if omitted == 0 && (lines.is_empty() || size + len <= BATCH_BYTES) && len <= BATCH_BYTES {
            size += len;
            lines.push(line);
        } else {
            omitted += 1;
        }
    }
    Batch { lines, omitted }
}

/// Lines seen in the last [`FLOOD_WINDOW`].
#[derive(Debug, Default)]
pub struct FloodWindow {
    times: VecDeque<Instant>,
}

impl FloodWindow {
    /// Count N lines at NOW; true when the window now holds too many.
    pub fn record(&mut self, now: Instant, n: usize) -> bool {
        while self
            .times
            .front()
            .is_some_and(|&t| now.duration_since(t) > FLOOD_WINDOW)
        {
            self.times.pop_front();
        }
        for _ in 0..n.min(FLOOD_LINES + 1) {
            self.times.push_back(now);
        }
        while self.times.len() > FLOOD_LINES + 1 {
            self.times.pop_front();
        }
        self.times.len() > FLOOD_LINES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_lines_across_chunks_and_normalises_crlf() {
        let mut f = Framer::default();
        assert!(f.push(b"hel").is_empty());
        let lines = f.push(b"lo\r\nwor");
        assert_eq!(
            lines,
            vec![Line {
                text: "hello".into(),
                truncated: 0
            }]
        );
        let lines = f.push(b"ld\n\n");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].text, "world");
        assert_eq!(lines[1].text, "");
        assert!(f.push(b"tail").is_empty());
        assert_eq!(f.finish().map(|l| l.text), Some("tail".into()));
        assert_eq!(f.finish(), None);
    }

    #[test]
    fn long_lines_keep_2000_chars_and_count_the_rest() {
        let mut f = Framer::default();
        let long = "x".repeat(LINE_MAX * 10 + 7);
        let mut lines = Vec::new();
        for chunk in long.as_bytes().chunks(999) {
            lines.extend(f.push(chunk));
        }
        lines.extend(f.push(b"\n"));
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].text.chars().count(), LINE_MAX);
        assert_eq!(lines[0].truncated, LINE_MAX * 9 + 7);
        assert!(
            lines[0]
                .render()
                .ends_with(&format!("[... {} more characters]", LINE_MAX * 9 + 7))
        );
    }

    #[test]
    fn batches_hold_8k_and_count_the_rest() {
        let mut pending: Vec<Line> = (0..100)
            .map(|i| Line {
                text: format!("{i:0>199}"),
                truncated: 0,
            })
            .collect();
        let b = batch(&mut pending);
        assert!(pending.is_empty());
        assert_eq!(b.lines.len(), 40);
        assert_eq!(b.omitted, 60);
        let size: usize = b.lines.iter().map(|l| l.text.len() + 1).sum();
        assert!(size <= BATCH_BYTES);
    }

    #[test]
    fn flood_after_100_lines_in_a_minute() {
        let start = Instant::now();
        let mut w = FloodWindow::default();
        assert!(!w.record(start, 60));
        assert!(!w.record(start + Duration::from_secs(30), 40));
        assert!(w.record(start + Duration::from_secs(31), 1));
        let mut w = FloodWindow::default();
        assert!(!w.record(start, 60));
        // The first 60 have left the window a minute later.
        assert!(!w.record(start + Duration::from_secs(61), 60));
    }
}
