//! The patch grammar: text to [`Patch`], or an error naming the line.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: PATH          every following line starts with `+`
//! *** Delete File: PATH
//! *** Update File: PATH
//! *** Move to: PATH           optional, right after Update
//! @@ [ANCHOR]                 one or more hunks of ` `, `-`, `+` lines
//! *** End of File             optional, ends a hunk that reaches the end
//! *** End Patch
//! ```
//!
//! Tolerated as the reference parser tolerates them: blank lines around
//! the patch, markers and header lines padded with whitespace, a first
//! hunk of an Update without its `@@` line, an empty line inside a hunk
//! (an empty context line), and the patch wrapped in a shell heredoc
//! (`<<'EOF'` … `EOF`). Several `@@ ANCHOR` lines in a row narrow the
//! search one after the other. Rejected, naming the 1-based line and its
//! text: a missing begin or end marker, no operation at all, an Update
//! without hunks, a hunk without lines, and any other header line.

use crate::error::{Error, ErrorKind, Result};

pub const BEGIN: &str = "*** Begin Patch";
pub const END: &str = "*** End Patch";
pub const ADD: &str = "*** Add File: ";
pub const DELETE: &str = "*** Delete File: ";
pub const UPDATE: &str = "*** Update File: ";
pub const MOVE_TO: &str = "*** Move to: ";
pub const END_OF_FILE: &str = "*** End of File";

/// A parsed patch: its operations in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub ops: Vec<Op>,
}

/// One file operation; paths are as authored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Add {
        path: String,
        lines: Vec<String>,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
    },
}

/// What a hunk line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Context,
    Remove,
    Add,
}

/// One `@@` hunk of an Update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The texts after each `@@ ` line, in order (empty for a bare `@@`).
    pub anchors: Vec<String>,
    /// The hunk's lines without their first character.
    pub lines: Vec<(Kind, String)>,
    /// Ended by `*** End of File`: the hunk reaches the end of the file.
    pub end_of_file: bool,
    /// 1-based line of the patch where the hunk starts.
    pub line: usize,
}

impl Op {
    /// The authored path the operation reads or creates.
    pub fn path(&self) -> &str {
        match self {
            Op::Add { path, .. } | Op::Delete { path } | Op::Update { path, .. } => path,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::Add { .. } => "add",
            Op::Delete { .. } => "delete",
            Op::Update { .. } => "update",
        }
    }
}

impl Chunk {
    /// The lines the file must contain: context and removed lines.
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter(|(k, _)| *k != Kind::Add)
            .map(|(_, t)| t.as_str())
            .collect()
    }

    pub fn added(&self) -> usize {
        self.lines.iter().filter(|(k, _)| *k == Kind::Add).count()
    }

    pub fn removed(&self) -> usize {
        self.lines
            .iter()
            .filter(|(k, _)| *k == Kind::Remove)
            .count()
    }
}

fn error_at(line: usize, message: impl std::fmt::Display, text: &str) -> Error {
    Error::new(
        ErrorKind::Patch,
        format!("Invalid patch: line {line}: {message}: '{text}'"),
    )
}

/// A line of the patch with its 1-based number.
#[derive(Clone, Copy)]
struct Line<'a> {
    number: usize,
    text: &'a str,
}

fn is_heredoc_start(text: &str) -> bool {
    matches!(text.trim(), "<<EOF" | "<<'EOF'" | "<<\"EOF\"")
}

/// Parse TEXT into a patch.
pub fn parse(text: &str) -> Result<Patch> {
    let all: Vec<Line<'_>> = text
        .lines()
        .enumerate()
        .map(|(i, text)| Line {
            number: i + 1,
            text: text.strip_suffix('\r').unwrap_or(text),
        })
        .collect();
    let mut lines = trim_blank(&all);
    let Some(first) = lines.first().copied() else {
        return Err(Error::new(
            ErrorKind::Patch,
            format!("Invalid patch: the patch is empty; it must start with '{BEGIN}'"),
        ));
    };
    if first.text.trim() != BEGIN && is_heredoc_start(first.text) && lines.len() >= 2 {
        let last = lines[lines.len() - 1];
        if last.text.trim().ends_with("EOF") {
            lines = trim_blank(&lines[1..lines.len() - 1]);
        }
    }
    let Some(first) = lines.first().copied() else {
        return Err(Error::new(
            ErrorKind::Patch,
            format!("Invalid patch: the patch is empty; it must start with '{BEGIN}'"),
        ));
    };
    if first.text.trim() != BEGIN {
        return Err(error_at(
            first.number,
            format!("the first line of the patch must be '{BEGIN}'"),
            first.text,
        ));
    }
    let last = lines[lines.len() - 1];
    if lines.len() < 2 || last.text.trim() != END {
        return Err(error_at(
            last.number,
            format!("the last line of the patch must be '{END}'"),
            last.text,
        ));
    }
    let body = &lines[1..lines.len() - 1];
    let mut parser = Parser { body, at: 0 };
    let mut ops = Vec::new();
    while let Some(line) = parser.peek() {
        if line.text.trim().is_empty() {
            parser.at += 1;
            continue;
        }
        ops.push(parser.operation()?);
    }
    if ops.is_empty() {
        return Err(error_at(
            last.number,
            "the patch has no file operation before its end",
            last.text,
        ));
    }
    Ok(Patch { ops })
}

fn trim_blank<'s, 'a>(lines: &'s [Line<'a>]) -> &'s [Line<'a>] {
    let start = lines
        .iter()
        .position(|l| !l.text.trim().is_empty())
        .unwrap_or(lines.len());
    let end = lines
        .iter()
        .rposition(|l| !l.text.trim().is_empty())
        .map_or(start, |i| i + 1);
    &lines[start..end.max(start)]
}

struct Parser<'s, 'a> {
    body: &'s [Line<'a>],
    at: usize,
}

/// The path after MARKER on a trimmed header line, or `None`.
fn header<'t>(trimmed: &'t str, marker: &str) -> Option<&'t str> {
    // "*** Add File:PATH", and a bare "*** Add File:" (to say it lacks a path).
    trimmed
        .strip_prefix(marker)
        .or_else(|| trimmed.strip_prefix(marker.trim_end()))
}

impl<'a> Parser<'_, 'a> {
    fn peek(&self) -> Option<Line<'a>> {
        self.body.get(self.at).copied()
    }

    fn path(line: Line<'_>, raw: &str, what: &str) -> Result<String> {
        let path = raw.trim();
        if path.is_empty() {
            return Err(error_at(
                line.number,
                format!("{what} needs a path"),
                line.text,
            ));
        }
        Ok(path.to_string())
    }

    fn operation(&mut self) -> Result<Op> {
        let Some(line) = self.peek() else {
            return Err(Error::new(
                ErrorKind::Patch,
                "Invalid patch: unexpected end",
            ));
        };
        let trimmed = line.text.trim();
        self.at += 1;
        if let Some(raw) = header(trimmed, ADD) {
            let path = Self::path(line, raw, "'*** Add File:'")?;
            let mut lines = Vec::new();
            while let Some(next) = self.peek() {
                let Some(text) = next.text.strip_prefix('+') else {
                    break;
                };
                lines.push(text.to_string());
                self.at += 1;
            }
            return Ok(Op::Add { path, lines });
        }
        if let Some(raw) = header(trimmed, DELETE) {
            let path = Self::path(line, raw, "'*** Delete File:'")?;
            return Ok(Op::Delete { path });
        }
        if let Some(raw) = header(trimmed, UPDATE) {
            let path = Self::path(line, raw, "'*** Update File:'")?;
            let mut move_to = None;
            if let Some(next) = self.peek()
                && let Some(raw) = header(next.text.trim(), MOVE_TO)
            {
                move_to = Some(Self::path(next, raw, "'*** Move to:'")?);
                self.at += 1;
            }
            let mut chunks = Vec::new();
            while let Some(next) = self.peek() {
                let trimmed = next.text.trim();
                if trimmed.is_empty() {
                    self.at += 1;
                    continue;
                }
                if trimmed.starts_with("***") && next.text.trim_end() != END_OF_FILE {
                    break;
                }
                chunks.push(self.chunk(chunks.is_empty())?);
            }
            if chunks.is_empty() {
                return Err(error_at(
                    line.number,
                    "an Update File needs at least one hunk",
                    line.text,
                ));
            }
            return Ok(Op::Update {
                path,
                move_to,
                chunks,
            });
        }
        Err(error_at(
            line.number,
            format!(
                "not a valid file header (expected '{ADD}PATH', '{DELETE}PATH' or '{UPDATE}PATH')"
            ),
            line.text,
        ))
    }

    fn chunk(&mut self, first: bool) -> Result<Chunk> {
        let start = self.peek().map_or(0, |l| l.number);
        let mut anchors = Vec::new();
        let mut marked = false;
        let mut marker = None;
        while let Some(line) = self.peek() {
            // Only the first marker line may be indented: after it, an
            // indented "@@ x" is a context line.
            let trimmed = if marked {
                line.text.trim_end()
            } else {
                line.text.trim()
            };
            if trimmed == "@@" {
                marked = true;
                marker = Some(line);
            } else if let Some(anchor) = trimmed.strip_prefix("@@ ") {
                marked = true;
                marker = Some(line);
                let anchor = anchor.trim_start();
                // "@@ -1,3 +1,4 @@" unified headers carry no anchor of ours.
                if !anchor.is_empty() && !is_unified_header(trimmed) {
                    anchors.push(anchor.to_string());
                }
            } else {
                break;
            }
            self.at += 1;
        }
        if !marked
            && !first
            && let Some(line) = self.peek()
        {
            return Err(error_at(
                line.number,
                "expected a hunk to start with '@@'",
                line.text,
            ));
        }
        let mut lines = Vec::new();
        let mut end_of_file = false;
        while let Some(line) = self.peek() {
            // Untrimmed on the left: " *** End of File" is a context line.
            if line.text.trim_end() == END_OF_FILE {
                if lines.is_empty() {
                    return Err(error_at(
                        line.number,
                        "a hunk needs at least one line before '*** End of File'",
                        line.text,
                    ));
                }
                end_of_file = true;
                self.at += 1;
                break;
            }
            // A unified diff's marker; the file's own final newline is kept.
            if !lines.is_empty() && line.text.starts_with("\\ No newline at end of file") {
                self.at += 1;
                continue;
            }
            let mut chars = line.text.chars();
            let kind = match chars.next() {
                None => Kind::Context,
                Some(' ') => Kind::Context,
                Some('-') => Kind::Remove,
                Some('+') => Kind::Add,
                Some(_) => {
                    if lines.is_empty() {
                        return Err(error_at(
                            line.number,
                            "unexpected line in a hunk: every hunk line starts with ' ' \
                             (context), '-' (removed) or '+' (added)",
                            line.text,
                        ));
                    }
                    break;
                }
            };
            lines.push((kind, chars.as_str().to_string()));
            self.at += 1;
        }
        if lines.is_empty() {
            let (number, text) = marker
                .or(self.peek())
                .map_or((start, ""), |l| (l.number, l.text));
            return Err(error_at(number, "a hunk needs at least one line", text));
        }
        Ok(Chunk {
            anchors,
            lines,
            end_of_file,
            line: start,
        })
    }
}

/// `@@ -12,7 +12,9 @@` (with or without counts and a trailing section).
fn is_unified_header(trimmed: &str) -> bool {
    let mut words = trimmed.split_whitespace();
    words.next() == Some("@@")
        && words.next().is_some_and(|w| range_word(w, '-'))
        && words.next().is_some_and(|w| range_word(w, '+'))
        && words.next() == Some("@@")
}

fn range_word(word: &str, sign: char) -> bool {
    word.strip_prefix(sign).is_some_and(|r| {
        !r.is_empty()
            && r.split(',')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(text: &str) -> Vec<Op> {
        match parse(text) {
            Ok(p) => p.ops,
            Err(e) => panic!("{}", e.message),
        }
    }

    fn err(text: &str) -> String {
        match parse(text) {
            Ok(p) => panic!("parsed: {p:?}"),
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Patch);
                e.message
            }
        }
    }

    fn update(text: &str) -> (String, Option<String>, Vec<Chunk>) {
        match ops(text).into_iter().next() {
            Some(Op::Update {
                path,
                move_to,
                chunks,
            }) => (path, move_to, chunks),
            other => panic!("not an update: {other:?}"),
        }
    }

    #[test]
    fn add_file_takes_plus_lines() {
        assert_eq!(
            ops("*** Begin Patch\n*** Add File: a/b.txt\n+one\n+\n+ two\n*** End Patch"),
            [Op::Add {
                path: "a/b.txt".into(),
                lines: vec!["one".into(), "".into(), " two".into()]
            }]
        );
    }

    #[test]
    fn add_file_may_be_empty() {
        assert_eq!(
            ops("*** Begin Patch\n*** Add File: e\n*** End Patch"),
            [Op::Add {
                path: "e".into(),
                lines: vec![]
            }]
        );
    }

    #[test]
    fn delete_file() {
        assert_eq!(
            ops("*** Begin Patch\n*** Delete File: old.txt\n*** End Patch"),
            [Op::Delete {
                path: "old.txt".into()
            }]
        );
    }

    #[test]
    fn update_with_move_and_hunks() {
        let (path, move_to, chunks) = update(
            "*** Begin Patch\n*** Update File: x.el\n*** Move to: y.el\n@@ (defun f\n a\n-b\n+c\n@@\n-d\n*** End Patch",
        );
        assert_eq!(path, "x.el");
        assert_eq!(move_to.as_deref(), Some("y.el"));
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].anchors, ["(defun f"]);
        assert_eq!(
            chunks[0].lines,
            [
                (Kind::Context, "a".to_string()),
                (Kind::Remove, "b".to_string()),
                (Kind::Add, "c".to_string())
            ]
        );
        assert_eq!(chunks[0].line, 4);
        assert!(chunks[1].anchors.is_empty());
        assert_eq!(chunks[1].line, 8);
    }

    #[test]
    fn several_operations_in_order() {
        let got = ops(
            "*** Begin Patch\n*** Add File: a\n+x\n*** Delete File: b\n*** Update File: c\n@@\n-1\n+2\n*** End Patch",
        );
        let names: Vec<_> = got
            .iter()
            .map(|o| (o.name(), o.path().to_string()))
            .collect();
        assert_eq!(
            names,
            [
                ("add", "a".to_string()),
                ("delete", "b".to_string()),
                ("update", "c".to_string())
            ]
        );
    }

    #[test]
    fn padded_markers_and_headers_are_tolerated() {
        let got = ops(
            "\n\n  *** Begin Patch  \n \t*** Delete File: y \n   *** Update File:   x.txt  \n  @@  \n-a\n+b\n  *** End Patch \n\n",
        );
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].path(), "y");
        assert_eq!(got[1].path(), "x.txt");
        // After a hunk line, a line starting with a space is context.
        let (_, _, chunks) = update(
            "*** Begin Patch\n*** Update File: x\n@@\n-a\n *** Delete File: y\n*** End Patch",
        );
        assert_eq!(
            chunks[0].lines[1],
            (Kind::Context, "*** Delete File: y".to_string())
        );
    }

    #[test]
    fn heredoc_wrapping_is_stripped() {
        for open in ["<<'EOF'", "<<EOF", "<<\"EOF\""] {
            let got = ops(&format!(
                "{open}\n*** Begin Patch\n*** Delete File: y\n*** End Patch\nEOF\n"
            ));
            assert_eq!(got.len(), 1, "{open}");
        }
    }

    #[test]
    fn first_hunk_may_lack_its_at_at_line() {
        let (_, _, chunks) =
            update("*** Begin Patch\n*** Update File: x\n a\n-b\n+c\n*** End Patch");
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].lines.len(), 3);
    }

    #[test]
    fn later_hunks_need_their_at_at_line() {
        let m = err("*** Begin Patch\n*** Update File: x\n@@\n-a\nstray\n*** End Patch");
        assert!(m.contains("line 5") && m.contains("'stray'"), "{m}");
        assert!(m.contains("'@@'"), "{m}");
    }

    #[test]
    fn several_anchors_narrow_in_turn() {
        let (_, _, chunks) = update(
            "*** Begin Patch\n*** Update File: x\n@@ class A\n@@   def f\n-a\n+b\n*** End Patch",
        );
        assert_eq!(chunks[0].anchors, ["class A", "def f"]);
        let (_, _, chunks) =
            update("*** Begin Patch\n*** Update File: x\n  @@ class A\n @@ x\n-a\n*** End Patch");
        assert_eq!(chunks[0].anchors, ["class A"]);
        assert_eq!(chunks[0].lines[0], (Kind::Context, "@@ x".to_string()));
    }

    #[test]
    fn unified_range_headers_are_not_anchors() {
        let (_, _, chunks) =
            update("*** Begin Patch\n*** Update File: x\n@@ -1,2 +1,3 @@\n-a\n+b\n*** End Patch");
        assert!(chunks[0].anchors.is_empty());
    }

    #[test]
    fn empty_line_in_a_hunk_is_empty_context() {
        let (_, _, chunks) =
            update("*** Begin Patch\n*** Update File: x\n@@\n a\n\n-b\n*** End Patch");
        assert_eq!(chunks[0].lines[1], (Kind::Context, String::new()));
    }

    #[test]
    fn end_of_file_marker() {
        let (_, _, chunks) = update(
            "*** Begin Patch\n*** Update File: x\n@@\n-a\n+b\n*** End of File\n@@\n-c\n*** End Patch",
        );
        assert!(chunks[0].end_of_file);
        assert!(!chunks[1].end_of_file);
        // Indented, it is the context line "*** End of File".
        let (_, _, chunks) =
            update("*** Begin Patch\n*** Update File: x\n@@\n *** End of File\n-a\n*** End Patch");
        assert!(!chunks[0].end_of_file);
        assert_eq!(chunks[0].lines.len(), 2);
    }

    #[test]
    fn no_newline_markers_are_skipped() {
        let (_, _, chunks) = update(
            "*** Begin Patch\n*** Update File: x\n@@\n-a\n\\ No newline at end of file\n+b\n*** End Patch",
        );
        assert_eq!(chunks[0].lines.len(), 2);
    }

    #[test]
    fn crlf_patch_text() {
        let (_, _, chunks) =
            update("*** Begin Patch\r\n*** Update File: x\r\n@@\r\n-a\r\n+b\r\n*** End Patch\r\n");
        assert_eq!(chunks[0].lines[1], (Kind::Add, "b".to_string()));
    }

    #[test]
    fn empty_patch_is_rejected() {
        assert!(err("").contains("empty"));
        assert!(err("  \n\n ").contains("empty"));
        assert!(err("<<'EOF'\nEOF").contains("empty"));
    }

    #[test]
    fn patch_without_operations_is_rejected() {
        let m = err("*** Begin Patch\n*** End Patch");
        assert!(
            m.contains("line 2") && m.contains("no file operation"),
            "{m}"
        );
    }

    #[test]
    fn missing_begin_is_rejected() {
        let m = err("*** Update File: x\n@@\n-a\n*** End Patch");
        assert!(
            m.contains("line 1") && m.contains("'*** Update File: x'"),
            "{m}"
        );
    }

    #[test]
    fn missing_end_is_rejected() {
        let m = err("*** Begin Patch\n*** Delete File: x\n");
        assert!(m.contains("line 2") && m.contains("*** End Patch"), "{m}");
        let m = err("*** Begin Patch");
        assert!(m.contains("line 1"), "{m}");
    }

    #[test]
    fn invalid_file_header_is_rejected() {
        let m = err("*** Begin Patch\n*** Delete File: a\n*** Rename File: b\n*** End Patch");
        assert!(
            m.contains("line 3") && m.contains("'*** Rename File: b'"),
            "{m}"
        );
        assert!(m.contains("not a valid file header"), "{m}");
        let m = err("*** Begin Patch\n+stray\n*** End Patch");
        assert!(m.contains("line 2"), "{m}");
    }

    #[test]
    fn empty_update_is_rejected() {
        let m = err("*** Begin Patch\n*** Update File: x\n*** End Patch");
        assert!(
            m.contains("line 2") && m.contains("at least one hunk"),
            "{m}"
        );
        let m = err(
            "*** Begin Patch\n*** Update File: x\n*** Move to: y\n*** Delete File: z\n*** End Patch",
        );
        assert!(m.contains("line 2"), "{m}");
    }

    #[test]
    fn hunk_without_lines_is_rejected() {
        let m = err("*** Begin Patch\n*** Update File: x\n@@\n*** End Patch");
        assert!(
            m.contains("line 3: a hunk needs at least one line: '@@'"),
            "{m}"
        );
        let m = err("*** Begin Patch\n*** Update File: x\n@@\n-a\n@@ f\n*** End Patch");
        assert!(m.contains("line 5") && m.contains("'@@ f'"), "{m}");
    }

    #[test]
    fn end_of_file_without_lines_is_rejected() {
        let m = err("*** Begin Patch\n*** Update File: x\n@@\n*** End of File\n*** End Patch");
        assert!(m.contains("line 4") && m.contains("End of File"), "{m}");
    }

    #[test]
    fn unexpected_hunk_line_is_rejected() {
        let m = err("*** Begin Patch\n*** Update File: x\n@@\n?what\n*** End Patch");
        assert!(m.contains("line 4") && m.contains("'?what'"), "{m}");
        assert!(m.contains("every hunk line starts with"), "{m}");
    }

    #[test]
    fn header_without_path_is_rejected() {
        let m = err("*** Begin Patch\n*** Add File:   \n*** End Patch");
        assert!(m.contains("line 2"), "{m}");
        let m = err("*** Begin Patch\n*** Update File: x\n*** Move to: \n@@\n-a\n*** End Patch");
        assert!(m.contains("line 3"), "{m}");
    }
}
