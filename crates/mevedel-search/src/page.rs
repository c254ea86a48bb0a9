//! Read's line pages over any text source.
//!
//! A page shows up to `limit` lines from line `offset` (1-based), each
//! numbered like `cat -n`. Lines longer than [`LINE_CAP`] characters are
//! cut with an exact `char_offset` continuation; a positive `char_offset`
//! selects one line and pages through it by characters. A page stops
//! early, at a line boundary, when it would exceed [`PAGE_BUDGET`]
//! characters. Bounds errors name the address and give a retry that
//! works, never a backing path.

use std::io::BufRead;

use crate::error::{Error, ErrorKind};

pub const DEFAULT_LIMIT: usize = 2000;
pub const LINE_CAP: usize = 2000;
pub const PAGE_BUDGET: usize = 100_000;

/// The paging arguments as the model gave them (unchecked).
#[derive(Debug, Clone, Copy, Default)]
pub struct PageRequest {
    pub offset: Option<i64>,
    pub limit: Option<i64>,
    pub char_offset: Option<i64>,
}

struct Checked {
    offset: usize,
    limit: usize,
    char_offset: usize,
}

fn bad(message: String) -> Error {
    Error::new(ErrorKind::Resource, message)
}

fn check(req: &PageRequest, address: &str) -> Result<Checked, Error> {
    for (name, value) in [
        ("offset", req.offset),
        ("limit", req.limit),
        ("char_offset", req.char_offset),
    ] {
        if let Some(v) = value
            && v < 0
        {
            return Err(bad(format!(
                "Read `{address}`: {name} must not be negative (got {v})"
            )));
        }
    }
    if req.limit == Some(0) {
        return Err(bad(format!("Read `{address}`: limit must be at least 1")));
    }
    Ok(Checked {
        offset: req.offset.map_or(1, |o| o.max(1) as usize),
        limit: req.limit.map_or(DEFAULT_LIMIT, |l| l as usize),
        char_offset: req.char_offset.unwrap_or(0) as usize,
    })
}

fn quote(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A Read call the model can execute as is.
pub fn read_call(address: &str, offset: usize, limit: usize, char_offset: Option<usize>) -> String {
    let mut call = format!(
        "Read {{\"file_path\": {}, \"offset\": {offset}, \"limit\": {limit}",
        quote(address)
    );
    if let Some(c) = char_offset {
        call.push_str(&format!(", \"char_offset\": {c}"));
    }
    call.push('}');
    call
}

fn line_text(raw: &[u8]) -> String {
    let mut end = raw.len();
    if end > 0 && raw[end - 1] == b'\n' {
        end -= 1;
        if end > 0 && raw[end - 1] == b'\r' {
            end -= 1;
        }
    }
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

fn count_newlines(reader: &mut dyn BufRead) -> std::io::Result<(usize, bool)> {
    // Returns (newlines, ended without a trailing newline and non-empty tail).
    let mut lines = 0usize;
    let mut last = b'\n';
    let mut any = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        any = true;
        lines += buf.iter().filter(|&&b| b == b'\n').count();
        last = buf[buf.len() - 1];
        let n = buf.len();
        reader.consume(n);
    }
    Ok((lines, any && last != b'\n'))
}

/// Render one page of the text in READER for ADDRESS (as authored).
/// NUMBERED is false for listings, which page the same way but show
/// entries without line numbers.
pub fn page(
    reader: &mut dyn BufRead,
    req: &PageRequest,
    address: &str,
    numbered: bool,
) -> Result<String, Error> {
    let c = check(req, address)?;
    let io_err = |e: std::io::Error| bad(format!("Read `{address}`: {e}"));
    let mut out = String::new();
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut shown = 0usize;
    let mut stopped_at: Option<usize> = None;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io_err)? == 0 {
            break;
        }
        number += 1;
        if number < c.offset {
            continue;
        }
        if shown == c.limit || stopped_at.is_some() {
            // Count what follows without keeping it.
            let (rest, tail) = count_newlines(reader).map_err(io_err)?;
            number += rest + usize::from(tail);
            break;
        }
        let text = line_text(&line);
        if c.char_offset > 0 {
            return char_page(&text, number, c.char_offset, address, numbered);
        }
        let rendered = render_line(&text, number, 0, address, numbered);
        if shown > 0 && out.len() + rendered.len() > PAGE_BUDGET {
            stopped_at = Some(number);
            continue;
        }
        out.push_str(&rendered);
        shown += 1;
    }
    let total = number;
    if total == 0 {
        return Ok(format!("(`{address}` is empty.)"));
    }
    if c.offset > total {
        let width = c.limit;
        let last = total.saturating_sub(width) + 1;
        return Err(bad(format!(
            "Read `{address}`: offset {} is past the last line; this text has lines 1-{total}. \
             Last page: {}",
            c.offset,
            read_call(address, last, width, None)
        )));
    }
    let first = c.offset;
    let last_shown = first + shown - 1;
    if last_shown < total {
        let why = if stopped_at.is_some() {
            format!("the page reached its {PAGE_BUDGET}-character budget")
        } else {
            "more lines follow".to_string()
        };
        out.push_str(&format!(
            "\n[Showing lines {first}-{last_shown} of {total}; {why}. Continue with {}]\n",
            read_call(address, last_shown + 1, c.limit, None)
        ));
    }
    Ok(out)
}

fn render_line(text: &str, number: usize, from: usize, address: &str, numbered: bool) -> String {
    let mut out = String::new();
    if numbered {
        out.push_str(&format!("{number:>6}\t"));
    }
    let total_chars = text.chars().count();
    if from == 0 && total_chars <= LINE_CAP {
        out.push_str(text);
    } else {
        let piece: String = text.chars().skip(from).take(LINE_CAP).collect();
        out.push_str(&piece);
        let next = from + LINE_CAP;
        if next < total_chars {
            out.push_str(&format!(
                " [line {number} continues: {} of {total_chars} characters shown; next: {}]",
                next,
                read_call(address, number, 1, Some(next))
            ));
        }
    }
    out.push('\n');
    out
}

fn char_page(
    text: &str,
    number: usize,
    char_offset: usize,
    address: &str,
    numbered: bool,
) -> Result<String, Error> {
    let total_chars = text.chars().count();
    if char_offset >= total_chars {
        return Err(bad(format!(
            "Read `{address}`: char_offset {char_offset} is past the end of line {number}, \
             which has {total_chars} characters (valid char_offset: 0-{})",
            total_chars.saturating_sub(1)
        )));
    }
    Ok(render_line(text, number, char_offset, address, numbered))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        text: &str,
        offset: Option<i64>,
        limit: Option<i64>,
        co: Option<i64>,
    ) -> Result<String, Error> {
        let req = PageRequest {
            offset,
            limit,
            char_offset: co,
        };
        page(&mut text.as_bytes(), &req, "work://f.txt", true)
    }

    fn text(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn first_page_and_continuation() {
        let out = run(&text(5), None, Some(2), None).unwrap();
        assert!(out.starts_with("     1\tline 1\n     2\tline 2\n"));
        assert!(out.contains("Showing lines 1-2 of 5"));
        assert!(out.contains("\"offset\": 3, \"limit\": 2"));
        let out = run(&text(5), Some(4), None, None).unwrap();
        assert_eq!(out, "     4\tline 4\n     5\tline 5\n");
    }

    #[test]
    fn negative_and_zero_arguments_are_errors() {
        for (o, l, c) in [
            (Some(-1), None, None),
            (None, Some(-3), None),
            (None, None, Some(-2)),
        ] {
            let e = run("x\n", o, l, c).expect_err("no error");
            assert!(e.message.contains("must not be negative"), "{}", e.message);
        }
        assert!(run("x\n", None, Some(0), None).is_err());
    }

    #[test]
    fn offset_past_the_end_names_bounds_and_retry() {
        let e = run(&text(30), Some(31), Some(10), None).expect_err("no error");
        assert!(e.message.contains("offset 31"), "{}", e.message);
        assert!(e.message.contains("lines 1-30"), "{}", e.message);
        assert!(
            e.message
                .contains("Read {\"file_path\": \"work://f.txt\", \"offset\": 21, \"limit\": 10}"),
            "{}",
            e.message
        );
        // The retry itself works.
        assert!(run(&text(30), Some(21), Some(10), None).is_ok());
        let e = run(&text(3), Some(9), None, None).expect_err("no error");
        assert!(
            e.message.contains("\"offset\": 1, \"limit\": 2000"),
            "{}",
            e.message
        );
    }

    #[test]
    fn empty_text_is_a_successful_empty_result() {
        let out = run("", None, None, None).unwrap();
        assert!(out.contains("is empty"));
        assert!(run("", Some(5), None, None).is_ok());
    }

    #[test]
    fn last_line_without_newline_and_crlf() {
        let out = run("a\r\nb", None, None, None).unwrap();
        assert_eq!(out, "     1\ta\n     2\tb\n");
        let e = run("a\nb", Some(3), None, None).expect_err("no error");
        assert!(e.message.contains("lines 1-2"));
    }

    #[test]
    fn long_lines_continue_by_char_offset() {
        let long: String = "é".repeat(LINE_CAP + 500);
        let src = format!("short\n{long}\nend\n");
        let out = run(&src, None, None, None).unwrap();
        assert!(out.contains("[line 2 continues: 2000 of 2500 characters shown"));
        assert!(out.contains("\"offset\": 2, \"limit\": 1, \"char_offset\": 2000"));
        assert!(out.ends_with("     3\tend\n"));
        let next = run(&src, Some(2), Some(1), Some(2000)).unwrap();
        assert_eq!(next, format!("     2\t{}\n", "é".repeat(500)));
        let e = run(&src, Some(2), Some(1), Some(2500)).expect_err("no error");
        assert!(e.message.contains("2500 characters"), "{}", e.message);
    }

    #[test]
    fn page_budget_stops_at_a_line_boundary() {
        let line = "x".repeat(1500);
        let src: String = (0..200).map(|_| format!("{line}\n")).collect();
        let out = run(&src, None, None, None).unwrap();
        assert!(out.len() <= PAGE_BUDGET + 400);
        assert!(out.contains("character budget"));
        assert!(out.contains("of 200"));
    }
}
