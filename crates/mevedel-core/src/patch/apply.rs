//! Applying an Update's hunks to a file's text, in memory.
//!
//! A file is split into lines once ([`TextFile`]): its line ending
//! (CRLF when its first line ends so), whether it ends with a newline and
//! whether it starts with a byte-order mark are kept and restored when the
//! result is encoded. Targets with a NUL byte or that are not UTF-8 are
//! refused. Hunks are found top to bottom (see [`super::matching`]); the
//! context lines of the result are the file's own lines, never the
//! patch's.

use super::grammar::{Chunk, Kind};
use super::matching::{self, Seek};
use crate::error::{Error, ErrorKind, Result};

/// A text file as lines, with what its bytes looked like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextFile {
    pub lines: Vec<String>,
    pub crlf: bool,
    pub final_newline: bool,
    pub bom: bool,
}

const BOM: &str = "\u{FEFF}";

fn patch_error(message: String) -> Error {
    Error::new(ErrorKind::Patch, message)
}

impl TextFile {
    /// Lines of new text as an Add writes them (LF, final newline).
    pub fn from_lines(lines: Vec<String>) -> Self {
        TextFile {
            lines,
            crlf: false,
            final_newline: true,
            bom: false,
        }
    }

    /// BYTES of the file DISPLAY as lines; binary or non-UTF-8 is refused.
    pub fn decode(display: &str, bytes: &[u8]) -> Result<Self> {
        if memchr::memchr(0, bytes).is_some() {
            return Err(patch_error(format!(
                "{display}: the file is binary (it contains a NUL byte); a patch edits text files only"
            )));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            patch_error(format!(
                "{display}: the file is not UTF-8 text (invalid byte at offset {}); a patch edits UTF-8 text files only",
                e.valid_up_to()
            ))
        })?;
        let (bom, text) = match text.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let crlf = text
            .find('\n')
            .is_some_and(|i| i > 0 && text.as_bytes()[i - 1] == b'\r');
        let final_newline = text.is_empty() || text.ends_with('\n');
        let body = text.strip_suffix('\n').unwrap_or(text);
        let lines = if text.is_empty() {
            Vec::new()
        } else {
            body.split('\n')
                .map(|l| {
                    if crlf {
                        l.strip_suffix('\r').unwrap_or(l).to_string()
                    } else {
                        l.to_string()
                    }
                })
                .collect()
        };
        Ok(TextFile {
            lines,
            crlf,
            final_newline,
            bom,
        })
    }

    pub fn eol(&self) -> &'static str {
        if self.crlf { "\r\n" } else { "\n" }
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let eol = self.eol();
        let size: usize = self.lines.iter().map(|l| l.len() + eol.len()).sum();
        let mut out = String::with_capacity(size + BOM.len());
        if self.bom {
            out.push_str(BOM);
        }
        for (i, line) in self.lines.iter().enumerate() {
            if i > 0 {
                out.push_str(eol);
            }
            out.push_str(line);
        }
        if self.final_newline && !self.lines.is_empty() {
            out.push_str(eol);
        }
        out.into_bytes()
    }

    /// The same file with LINES and the given final newline.
    pub fn with_lines(&self, lines: Vec<String>, final_newline: bool) -> Self {
        TextFile {
            lines,
            final_newline,
            ..*self
        }
    }
}

/// Lines START..START+OLD_LEN of the old file become NEW.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub start: usize,
    pub old_len: usize,
    pub new: Vec<String>,
}

/// Find every chunk of an Update of DISPLAY in FILE, top to bottom: the
/// replacements in file order, each with the section (last anchor) of
/// its chunk.
pub fn compute(
    file: &TextFile,
    chunks: &[Chunk],
    display: &str,
) -> Result<(Vec<Replacement>, Vec<Option<String>>)> {
    let lines = &file.lines;
    let places = matching::Index::new(lines);
    let mut cursor = 0usize;
    let mut out = Vec::with_capacity(chunks.len());
    for (index, chunk) in chunks.iter().enumerate() {
        let number = index + 1;
        for anchor in &chunk.anchors {
            match matching::seek_anchor(lines, anchor, cursor) {
                Some(at) => cursor = at + 1,
                None => {
                    return Err(patch_error(format!(
                        "{display}: hunk {number} (patch line {}): its anchor '@@ {anchor}' is not in the file{}.{}",
                        chunk.line,
                        after(cursor),
                        nearest_text(lines, &[anchor.as_str()], cursor)
                    )));
                }
            }
        }
        let mut body: &[(Kind, String)] = &chunk.lines;
        let replacement = loop {
            let old: Vec<&str> = body
                .iter()
                .filter(|(k, _)| *k != Kind::Add)
                .map(|(_, t)| t.as_str())
                .collect();
            // A hunk of only added lines goes at the end of the file, its
            // anchors notwithstanding (as the reference tool does), and
            // leaves the search position where its anchors put it.
            if old.is_empty() {
                break Replacement {
                    start: lines.len(),
                    old_len: 0,
                    new: body.iter().map(|(_, t)| t.clone()).collect(),
                };
            }
            match matching::seek_with(lines, Some(&places), &old, cursor, chunk.end_of_file) {
                Seek::Found { start, .. } => break build(lines, body, start, old.len()),
                Seek::Ambiguous {
                    level,
                    first,
                    second,
                    count,
                } => {
                    return Err(patch_error(format!(
                        "{display}: hunk {number} (patch line {}) matches {count} places {} (lines {} and {}{}); \
                         add context lines or an '@@' anchor line so that it matches one place",
                        chunk.line,
                        level.describe(),
                        first + 1,
                        second + 1,
                        if count > 2 { ", …" } else { "" }
                    )));
                }
                Seek::NotFound => {
                    // A trailing empty context line is often only the
                    // blank line that separated two hunks.
                    if let Some((Kind::Context, t)) = body.last()
                        && t.is_empty()
                    {
                        body = &body[..body.len() - 1];
                        continue;
                    }
                    let old: Vec<&str> = chunk.old_lines();
                    let where_ = if chunk.end_of_file {
                        " at the end of the file".to_string()
                    } else {
                        after(cursor)
                    };
                    return Err(patch_error(format!(
                        "{display}: hunk {number} (patch line {}) does not match the file{where_}; the hunk expects:\n{}{}",
                        chunk.line,
                        quoted(&old),
                        nearest_text(lines, &old, cursor)
                    )));
                }
            }
        };
        if replacement.old_len > 0 {
            cursor = replacement.start + replacement.old_len;
        }
        out.push((replacement, chunk.anchors.last().cloned()));
    }
    // In file order; additions at the end keep their patch order.
    out.sort_by_key(|(r, _)| r.start);
    Ok(out.into_iter().unzip())
}

fn after(cursor: usize) -> String {
    if cursor == 0 {
        String::new()
    } else {
        format!(" after line {cursor}")
    }
}

/// The replacement of the old lines at START by BODY, context from the file.
fn build(lines: &[String], body: &[(Kind, String)], start: usize, old_len: usize) -> Replacement {
    let mut new = Vec::with_capacity(body.len());
    let mut at = start;
    for (kind, text) in body {
        match kind {
            Kind::Context => {
                new.push(lines[at].clone());
                at += 1;
            }
            Kind::Remove => at += 1,
            Kind::Add => new.push(text.clone()),
        }
    }
    Replacement {
        start,
        old_len,
        new,
    }
}

fn quoted(lines: &[&str]) -> String {
    let mut out = String::new();
    for line in lines.iter().take(8) {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    if lines.len() > 8 {
        out.push_str(&format!("    … ({} more)\n", lines.len() - 8));
    }
    out
}

/// "The nearest lines the file contains" for an error message.
fn nearest_text(lines: &[String], pattern: &[&str], from: usize) -> String {
    let Some(start) = matching::nearest(lines, pattern, from) else {
        return " The file is empty.".to_string();
    };
    let begin = start.saturating_sub(1);
    let end = (start + pattern.len().clamp(1, 6) + 1).min(lines.len());
    let mut out = format!(
        "\nThe nearest lines the file contains (lines {}-{}):\n",
        begin + 1,
        end
    );
    for (i, line) in lines[begin..end].iter().enumerate() {
        out.push_str(&format!("{:>6}| {line}\n", begin + i + 1));
    }
    out.truncate(out.trim_end().len());
    out
}

/// LINES with every replacement made (REPLACEMENTS in order, disjoint).
pub fn replace(lines: &[String], replacements: &[Replacement]) -> Vec<String> {
    let mut out = Vec::with_capacity(lines.len());
    let mut at = 0;
    for r in replacements {
        out.extend_from_slice(&lines[at..r.start]);
        out.extend(r.new.iter().cloned());
        at = r.start + r.old_len;
    }
    out.extend_from_slice(&lines[at.min(lines.len())..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::grammar::{Op, parse};

    fn chunks(patch: &str) -> Vec<Chunk> {
        match parse(patch).map(|p| p.ops.into_iter().next()) {
            Ok(Some(Op::Update { chunks, .. })) => chunks,
            other => panic!("not an update: {other:?}"),
        }
    }

    fn run(file: &str, patch: &str) -> Result<String> {
        let text = TextFile::decode("f", file.as_bytes())?;
        let (reps, _) = compute(&text, &chunks(patch), "f")?;
        let new = text.with_lines(replace(&text.lines, &reps), text.final_newline);
        Ok(String::from_utf8(new.encode()).unwrap_or_default())
    }

    #[test]
    fn decode_keeps_shape() {
        let t = TextFile::decode("f", b"a\r\nb").unwrap();
        assert!(t.crlf && !t.final_newline);
        assert_eq!(t.lines, ["a", "b"]);
        assert_eq!(t.encode(), b"a\r\nb");
        let e = TextFile::decode("f", b"").unwrap();
        assert!(e.lines.is_empty());
        assert_eq!(e.encode(), b"");
        let nl = TextFile::decode("f", b"\n").unwrap();
        assert_eq!(nl.lines, [""]);
        assert_eq!(nl.encode(), b"\n");
        let bom = TextFile::decode("f", "\u{FEFF}x\n".as_bytes()).unwrap();
        assert!(bom.bom);
        assert_eq!(bom.encode(), "\u{FEFF}x\n".as_bytes());
    }

    #[test]
    fn binary_and_non_utf8_refused() {
        let e = TextFile::decode("bin", b"a\0b").unwrap_err();
        assert!(e.message.contains("binary"), "{}", e.message);
        let e = TextFile::decode("latin", b"caf\xe9\n").unwrap_err();
        assert!(e.message.contains("not UTF-8"), "{}", e.message);
    }

    #[test]
    fn context_comes_from_the_file() {
        let out = run(
            "    if x:\n        y()\n",
            "*** Begin Patch\n*** Update File: f\n@@\n if x:\n-    y()\n+        z()\n*** End Patch",
        )
        .unwrap();
        assert_eq!(out, "    if x:\n        z()\n");
    }

    #[test]
    fn pure_addition_goes_at_the_end_whatever_its_anchor() {
        let p = "*** Begin Patch\n*** Update File: f\n@@ fn a\n+x\n*** End Patch";
        assert_eq!(run("fn a\nfn b\n", p).unwrap(), "fn a\nfn b\nx\n");
        // The anchor still narrows the search for the hunks after it.
        let p = "*** Begin Patch\n*** Update File: f\n@@ fn b\n+x\n@@\n-y\n+Y\n*** End Patch";
        assert_eq!(run("y\nfn b\ny\n", p).unwrap(), "y\nfn b\nY\nx\n");
        let p = "*** Begin Patch\n*** Update File: f\n@@\n+x\n*** End Patch";
        assert_eq!(run("fn a\n", p).unwrap(), "fn a\nx\n");
    }

    #[test]
    fn failure_names_hunk_and_nearest_lines() {
        let e = run(
            "one\ntwo\nthree\n",
            "*** Begin Patch\n*** Update File: f\n@@\n one\n-tow\n+2\n*** End Patch",
        )
        .unwrap_err();
        assert!(
            e.message.contains("f: hunk 1 (patch line 3)"),
            "{}",
            e.message
        );
        assert!(e.message.contains("2| two"), "{}", e.message);
    }

    #[test]
    fn ambiguity_is_an_error() {
        let e = run(
            "x\ny\nx\ny\n",
            "*** Begin Patch\n*** Update File: f\n@@\n-x\n+z\n*** End Patch",
        )
        .unwrap_err();
        assert!(e.message.contains("matches 2 places"), "{}", e.message);
        assert!(e.message.contains("lines 1 and 3"), "{}", e.message);
    }

    #[test]
    fn hunks_apply_top_to_bottom() {
        let p = "*** Begin Patch\n*** Update File: f\n@@\n-x\n+1\n@@\n-x\n+2\n*** End Patch";
        // The first is ambiguous on its own.
        assert!(run("x\nx\n", p).is_err());
        let p = "*** Begin Patch\n*** Update File: f\n@@\n a\n-x\n+1\n@@\n-x\n+2\n*** End Patch";
        assert_eq!(run("a\nx\nx\n", p).unwrap(), "a\n1\n2\n");
    }

    #[test]
    fn end_of_file_anchors_at_the_end() {
        let p = "*** Begin Patch\n*** Update File: f\n@@\n-x\n+z\n*** End of File\n*** End Patch";
        assert_eq!(run("x\ny\nx\n", p).unwrap(), "x\ny\nz\n");
        let p = "*** Begin Patch\n*** Update File: f\n@@\n-y\n+z\n*** End of File\n*** End Patch";
        assert!(run("x\ny\nx\n", p).is_err());
    }

    #[test]
    fn trailing_blank_context_is_dropped_when_needed() {
        let p = "*** Begin Patch\n*** Update File: f\n@@\n-b\n+c\n\n*** End Patch";
        assert_eq!(run("a\nb\n", p).unwrap(), "a\nc\n");
    }
}
