//! The conversation as a person reads it (`transcript.txt`, `.md` or
//! `.org`): who said what, each tool call as its name, arguments and
//! result, and the context mevedel delivered as one-line notes.
//!
//! The saved transcript is the chat's data buffer: user text bare,
//! answers under `gptel response`, each tool call as a printed plist and
//! its result under `gptel (tool . ID)`, fences under `gptel ignore`, and
//! delivered context (instructions, environment updates, agents' mail)
//! under `mevedel-mail`. This module reads those properties to write the
//! conversation; it never writes anything resuming reads back (that is
//! the resume copy, see [`readable`](super::readable)).

use std::ops::Range;

use super::transcript::{Prop, Transcript};
use crate::codec::block;
use crate::codec::print::print;
use crate::codec::reader::{Sexp, Tree, read_one};

/// How headings and verbatim blocks are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Markdown,
    Org,
}

impl Style {
    /// The style of a conversation file named PATH: Org for `.org`,
    /// Markdown (which reads as plain text too) otherwise.
    pub fn for_path(path: &std::path::Path) -> Style {
        match path.extension().and_then(|e| e.to_str()) {
            Some("org") => Style::Org,
            _ => Style::Markdown,
        }
    }

    fn heading(self, title: &str) -> String {
        match self {
            Style::Markdown => format!("## {title}\n\n"),
            Style::Org => format!("* {title}\n\n"),
        }
    }

    fn verbatim(self, text: &str) -> String {
        let text = text.trim_end_matches('\n');
        match self {
            Style::Markdown => {
                let fence = "`".repeat(longest_run(text, '`').max(2) + 1);
                format!("{fence}\n{text}\n{fence}\n\n")
            }
            Style::Org => {
                let body: String = text
                    .lines()
                    .map(|l| {
                        // A line that looks like Org syntax is escaped
                        // with a comma, as Org itself does.
                        if l.trim_start().starts_with('*') || l.trim_start().starts_with("#+") {
                            format!(",{l}\n")
                        } else {
                            format!("{l}\n")
                        }
                    })
                    .collect();
                format!("#+begin_example\n{body}#+end_example\n\n")
            }
        }
    }
}

/// Who a stretch of the saved text belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    User,
    Assistant,
    /// A tool call's printed request and its result.
    Tool,
    /// Context mevedel delivered with a user message.
    Context,
    /// Fences and other text only the model's wire needs.
    Hidden,
}

/// Render transcript T as a conversation in STYLE.
pub fn render(t: &Transcript, style: Style) -> String {
    let mut out = String::with_capacity(t.text.len() / 2);
    let mut speaker: Option<&str> = None;
    let mut speak = |out: &mut String, who: &'static str| {
        if speaker != Some(who) {
            out.push_str(&style.heading(who));
            speaker = Some(who);
        }
    };
    for (range, kind) in stretches(t) {
        let text = &t.text[range];
        match kind {
            Kind::User => {
                let said = strip_prompt_prefix(text).trim();
                if !said.is_empty() {
                    speak(&mut out, "User");
                    out.push_str(said);
                    out.push_str("\n\n");
                }
            }
            Kind::Context => {
                let notes = context_notes(text);
                if !notes.is_empty() {
                    speak(&mut out, "User");
                    out.push_str(&notes);
                    out.push('\n');
                }
            }
            Kind::Assistant => {
                let said = text.trim();
                if !said.is_empty() {
                    speak(&mut out, "Assistant");
                    out.push_str(said);
                    out.push_str("\n\n");
                }
            }
            Kind::Tool => {
                speak(&mut out, "Assistant");
                tool_call(text, style, &mut out);
            }
            Kind::Hidden => {}
        }
    }
    let end = out.trim_end().len();
    out.truncate(end);
    out.push('\n');
    out
}

/// T's text cut where its `gptel` or `mevedel-mail` property changes,
/// each piece (byte range) with whom it belongs to; neighbours of the
/// same kind and property value are one piece.
fn stretches(t: &Transcript) -> Vec<(Range<usize>, Kind)> {
    let of = |name: &str| -> Vec<&Prop> { t.props.iter().filter(|p| p.name == name).collect() };
    let (gptel, mail) = (of("gptel"), of("mevedel-mail"));
    let mut bounds: Vec<usize> = gptel
        .iter()
        .chain(mail.iter())
        .flat_map(|p| [p.start, p.end])
        .chain([0])
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut bytes = CharBytes::new(&t.text);
    let (mut g, mut m) = (0, 0);
    let mut out: Vec<(Range<usize>, Kind, Option<&str>)> = Vec::new();
    for (i, &from) in bounds.iter().enumerate() {
        let to = bounds.get(i + 1).copied().unwrap_or(usize::MAX);
        let (a, b) = (bytes.at(from), bytes.at(to));
        if a >= b {
            continue;
        }
        while g < gptel.len() && gptel[g].end <= from {
            g += 1;
        }
        while m < mail.len() && mail[m].end <= from {
            m += 1;
        }
        let value = covering(gptel.get(g), from).map(|p| p.value.as_str());
        let kind = if covering(mail.get(m), from).is_some() {
            Kind::Context
        } else {
            match value {
                None => Kind::User,
                Some("response") => Kind::Assistant,
                Some(v) if v.starts_with("(tool") => Kind::Tool,
                Some(_) => Kind::Hidden,
            }
        };
        match out.last_mut() {
            Some((range, k, v)) if *k == kind && *v == value && range.end == a => range.end = b,
            _ => out.push((a..b, kind, value)),
        }
    }
    out.into_iter().map(|(r, k, _)| (r, k)).collect()
}

/// P when it covers character AT.
fn covering<'p>(p: Option<&&'p Prop>, at: usize) -> Option<&'p Prop> {
    p.filter(|p| p.start <= at && at < p.end).copied()
}

/// Byte offsets of character positions of one text, found by walking
/// it once: [`stretches`] asks in increasing order only.
struct CharBytes<'a> {
    text: &'a str,
    chars: usize,
    byte: usize,
}

impl<'a> CharBytes<'a> {
    fn new(text: &'a str) -> Self {
        CharBytes {
            text,
            chars: 0,
            byte: 0,
        }
    }

    /// The byte offset of character AT (the text's length past its end),
    /// AT at least the position asked before.
    fn at(&mut self, at: usize) -> usize {
        let ahead = at.saturating_sub(self.chars);
        self.byte = match self.text[self.byte..].char_indices().nth(ahead) {
            Some((i, _)) => self.byte + i,
            None => self.text.len(),
        };
        self.chars = at;
        self.byte
    }
}

/// TEXT without the prompt prefix gptel puts before a user message (a
/// bare Markdown or Org heading marker).
fn strip_prompt_prefix(text: &str) -> &str {
    let trimmed = text.trim_start_matches('\n');
    let marker = trimmed.trim_start_matches(['#', '*']);
    if marker.len() < trimmed.len() && (marker.starts_with(' ') || marker.is_empty()) {
        marker
    } else {
        text
    }
}

/// One line per element of delivered context TEXT: what it was, not its
/// whole text, except a message from another agent, which is quoted.
/// Text outside elements is kept as it is.
fn context_notes(text: &str) -> String {
    let mut out = String::new();
    let mut loose = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        loose.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let tag = &after[..after.find('>').unwrap_or(0)];
        let name = tag.split(char::is_whitespace).next().unwrap_or("");
        let end_tag = format!("</{name}>");
        let body_at = tag.len() + 1;
        let body_end = after.get(body_at..).and_then(|b| b.find(&end_tag));
        let is_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        match body_end {
            Some(len) if !name.is_empty() && name.chars().all(is_name) && !tag.contains('<') => {
                flush(&mut loose, &mut out);
                out.push_str(&note(name, tag, &after[body_at..body_at + len]));
                rest = &after[body_at + len + end_tag.len()..];
            }
            _ => {
                loose.push('<');
                rest = after;
            }
        }
    }
    loose.push_str(rest);
    flush(&mut loose, &mut out);
    out
}

/// Move LOOSE text, trimmed, to OUT as its own lines.
fn flush(loose: &mut String, out: &mut String) {
    let text = loose.trim();
    if !text.is_empty() {
        out.push_str(text);
        out.push('\n');
    }
    loose.clear();
}

/// The note for one context element NAME with opening TAG and BODY.
fn note(name: &str, tag: &str, body: &str) -> String {
    let attr = |key: &str| attribute(tag, key);
    match name {
        "agent-message" => {
            let from = attr("from").unwrap_or("another agent");
            let quoted: String = body.trim().lines().map(|l| format!("> {l}\n")).collect();
            format!("Message from {from}:\n{quoted}")
        }
        "attachment" => {
            let what = attr("path")
                .or(attr("address"))
                .or(attr("uri"))
                .unwrap_or("content");
            format!("[attached {what}]\n")
        }
        "context-update" => match attr("component") {
            Some(component) => format!("[context update: {component}]\n"),
            None => "[context update]\n".into(),
        },
        other => format!("[{}]\n", other.replace(['-', '_'], " ")),
    }
}

/// The value of attribute KEY in opening TAG, if it has one.
fn attribute<'a>(tag: &'a str, key: &str) -> Option<&'a str> {
    let at = tag.find(&format!("{key}=\""))? + key.len() + 2;
    let len = tag[at..].find('"')?;
    Some(&tag[at..at + len])
}

/// Write the tool call TEXT (its printed request, then its result) to OUT.
fn tool_call(text: &str, style: Style, out: &mut String) {
    let (request, result) = match read_one(text.as_bytes(), 0, &mut Tree) {
        Ok((value, end)) => (Some(value), &text[end..]),
        Err(_) => (None, text),
    };
    let mut long = Vec::new();
    match request.as_ref().and_then(call_parts) {
        Some((name, args)) => {
            out.push_str(&format!(
                "{}: {name}",
                match style {
                    Style::Markdown => "**Tool call**",
                    Style::Org => "*Tool call*",
                }
            ));
            let shown: Vec<String> = args
                .iter()
                .map(|(key, value)| match value {
                    Sexp::Str(bytes) if bytes.contains(&b'\n') => {
                        long.push((key.clone(), String::from_utf8_lossy(bytes).into_owned()));
                        format!("{key}: (below)")
                    }
                    _ => format!("{key}: {}", shown(value)),
                })
                .collect();
            if !shown.is_empty() {
                out.push_str(&format!(" ({})", shown.join(", ")));
            }
            out.push_str("\n\n");
        }
        None => out.push_str("Tool call:\n\n"),
    }
    for (key, value) in long {
        out.push_str(&format!("{key}:\n"));
        out.push_str(&style.verbatim(&value));
    }
    let result = without_render_data(result);
    let result = result.trim_matches('\n');
    if result.trim().is_empty() {
        out.push_str("(no output)\n\n");
    } else {
        out.push_str(&style.verbatim(result));
    }
}

/// The name and arguments of tool request REQUEST, `(:name N :args ARGS)`
/// as gptel saves it, or the call's own shape `(NAME :KEY VALUE ...)`.
fn call_parts(request: &Sexp) -> Option<(String, Vec<(String, Sexp)>)> {
    if let Sexp::List(items, None) = request
        && let Some(Sexp::Symbol(name)) = items.first()
        && !name.starts_with(b":")
    {
        let args = Sexp::List(items[1..].to_vec(), None);
        return Some((
            String::from_utf8_lossy(name).into_owned(),
            arguments(&args)?,
        ));
    }
    let pairs = block::plist_pairs(request).ok()?;
    let get = |key: &[u8]| {
        pairs
            .chunks(2)
            .find(|kv| matches!(&kv[0], Sexp::Symbol(k) if k.as_slice() == key))
            .and_then(|kv| kv.get(1))
    };
    let name = match get(b":name")? {
        Sexp::Str(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        other => shown(other),
    };
    let args = match get(b":args") {
        Some(args) => arguments(args)?,
        None => Vec::new(),
    };
    Some((name, args))
}

/// The plist ARGS as (KEY without its colon, VALUE) pairs.
fn arguments(args: &Sexp) -> Option<Vec<(String, Sexp)>> {
    Some(
        block::plist_pairs(args)
            .ok()?
            .chunks(2)
            .filter_map(|kv| match (&kv[0], kv.get(1)) {
                (Sexp::Symbol(k), Some(v)) => Some((
                    String::from_utf8_lossy(k.strip_prefix(b":").unwrap_or(k)).into_owned(),
                    v.clone(),
                )),
                _ => None,
            })
            .collect(),
    )
}

/// VALUE as one line: strings quoted, anything else as Lisp prints it.
fn shown(value: &Sexp) -> String {
    let mut s = String::new();
    match value {
        Sexp::Str(bytes) => {
            s.push('"');
            s.push_str(&String::from_utf8_lossy(bytes).replace('"', "\\\""));
            s.push('"');
        }
        other => {
            if print(other, &mut s).is_err() {
                s = "…".into();
            }
        }
    }
    s
}

/// TEXT without the hidden render-data blocks mevedel keeps beside tool
/// results for its own view.
fn without_render_data(text: &str) -> String {
    let blocks = block::scan(text.as_bytes());
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for b in blocks {
        out.push_str(&text[at..b.start]);
        out.push('\n');
        at = b.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Length of the longest run of C in TEXT.
fn longest_run(text: &str, c: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for ch in text.chars() {
        run = if ch == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transcript built from pieces: text and its property (NAME VALUE).
    fn transcript(pieces: &[(&str, Option<(&str, &str)>)]) -> Transcript {
        let mut t = Transcript::default();
        for (text, prop) in pieces {
            let start = t.text.chars().count();
            t.text.push_str(text);
            if let Some((name, value)) = prop {
                t.props.push(Prop {
                    start,
                    end: start + text.chars().count(),
                    name: (*name).into(),
                    value: (*value).into(),
                });
            }
        }
        t
    }

    const RESPONSE: Option<(&str, &str)> = Some(("gptel", "response"));
    const IGNORE: Option<(&str, &str)> = Some(("gptel", "ignore"));
    const MAIL: Option<(&str, &str)> = Some(("mevedel-mail", "t"));
    const TOOL: Option<(&str, &str)> = Some(("gptel", "(tool . \"call_1\")"));

    #[test]
    fn a_turn_reads_as_a_conversation() {
        let t = transcript(&[
            ("### ", None),
            (
                "<specialist-tools>\n- (Eval :form string)\n</specialist-tools>\n\
                 <context-update component=\"environment\">\nDate: 2026-12-06\n</context-update>\n",
                MAIL,
            ),
            ("look araund é\n\n", None),
            ("First I read it.\n\n", RESPONSE),
            ("``` tool (Read :file_path \"a.txt\")\n", IGNORE),
            (
                "(:name \"Read\" :args (:file_path \"/w/a.txt\" :limit 40))\n\n     1\thello\n\n",
                TOOL,
            ),
            ("```\n", IGNORE),
            ("It says hello.\n", RESPONSE),
            ("### and now?\n", None),
            ("Done.\n", RESPONSE),
        ]);
        assert_eq!(
            render(&t, Style::Markdown),
            "## User\n\n\
             [specialist tools]\n\
             [context update: environment]\n\n\
             look araund é\n\n\
             ## Assistant\n\n\
             First I read it.\n\n\
             **Tool call**: Read (file_path: \"/w/a.txt\", limit: 40)\n\n\
             ```\n     1\thello\n```\n\n\
             It says hello.\n\n\
             ## User\n\n\
             and now?\n\n\
             ## Assistant\n\n\
             Done.\n"
        );
    }

    #[test]
    fn long_arguments_mail_and_render_data_are_readable() {
        let t = transcript(&[
            (
                "<agent-message from=\"/root/worker\" kind=\"result\">\nAll done.\nTwo files.\n</agent-message>\n",
                MAIL,
            ),
            (
                "(:name \"Bash\" :args (:command \"ls\\nrm x\"))\n\nhas ``` inside\n\
                 <!-- mevedel-render-data -->\n(:a 1)\n<!-- /mevedel-render-data -->\n",
                TOOL,
            ),
        ]);
        let out = render(&t, Style::Org);
        assert_eq!(
            out,
            "* User\n\n\
             Message from /root/worker:\n> All done.\n> Two files.\n\n\
             * Assistant\n\n\
             *Tool call*: Bash (command: (below))\n\n\
             command:\n#+begin_example\nls\nrm x\n#+end_example\n\n\
             #+begin_example\nhas ``` inside\n#+end_example\n"
        );
        let md = render(&t, Style::Markdown);
        assert!(md.contains("````\nhas ``` inside\n````"), "{md}");
    }

    #[test]
    fn a_stray_angle_bracket_and_unreadable_call_are_kept() {
        let t = transcript(&[
            ("a < b and <b>bold</b>\n", MAIL),
            ("(:name \"Read\" :args\n\nbroken", TOOL),
        ]);
        let out = render(&t, Style::Markdown);
        assert!(out.contains("a < b and\n[b]\n"), "{out}");
        assert!(
            out.contains("Tool call:\n\n```\n(:name \"Read\" :args\n\nbroken\n```"),
            "{out}"
        );
    }
}
