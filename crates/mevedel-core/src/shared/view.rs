//! The text views of a board the model reads: the overview (one hashed
//! line per element), one full element, discussions and history. Long
//! strings are written as `string-chunks(...)`: one JSON string literal
//! per line, joined after decoding, so a view line stays within Read's
//! physical-line bound and no text is ever silently cut.

use std::fmt::Write;

use serde_json::{Map, Value};

use super::board::State;
use super::element;

/// Overview text beyond this many characters points to the element.
const EXCERPT_CHARS: usize = 120;
/// A string longer than this becomes `string-chunks(...)`.
const CHUNK_CHARS: usize = 400;
/// Points written per line in the element view.
const POINTS_PER_LINE: usize = 16;

fn number(v: Option<&Value>) -> String {
    let x = v.and_then(Value::as_f64).unwrap_or(0.0);
    let r = (x * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// The overview line of EL, whose hash is HASH, on board ID.
pub fn line(board: &str, el: &Map<String, Value>, hash: &str) -> String {
    let id = element::id(el);
    let kind = el.get("type").and_then(Value::as_str).unwrap_or("?");
    let mut out = format!(
        "{hash} {id} {kind} x={} y={} w={} h={}",
        number(el.get("x")),
        number(el.get("y")),
        number(el.get("width")),
        number(el.get("height")),
    );
    let angle = el.get("angle").and_then(Value::as_f64).unwrap_or(0.0);
    if angle != 0.0 {
        let _ = write!(out, " angle={}", number(el.get("angle")));
    }
    for (key, label, default) in [
        ("strokeColor", "stroke", "#1e1e1e"),
        ("backgroundColor", "fill", "transparent"),
    ] {
        if let Some(c) = el.get(key).and_then(Value::as_str)
            && c != default
        {
            let _ = write!(out, " {label}={c}");
        }
    }
    let groups: Vec<&str> = el
        .get("groupIds")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !groups.is_empty() {
        let _ = write!(out, " groups={}", groups.join(","));
    }
    if let Some(c) = el.get("containerId").and_then(Value::as_str) {
        let _ = write!(out, " in={c}");
    }
    if let Some(f) = el.get("frameId").and_then(Value::as_str) {
        let _ = write!(out, " frame={f}");
    }
    for (key, label) in [("startBinding", "from"), ("endBinding", "to")] {
        if let Some(t) = el
            .get(key)
            .and_then(|b| b.get("elementId"))
            .and_then(Value::as_str)
        {
            let _ = write!(out, " {label}={t}");
        }
    }
    if let Some(f) = el.get("fileId").and_then(Value::as_str) {
        let _ = write!(out, " image={f}");
    }
    if let Some(l) = el.get("link").and_then(Value::as_str) {
        let _ = write!(out, " link={}", Value::String(l.into()));
    }
    if el.get("locked").and_then(Value::as_bool) == Some(true) {
        out.push_str(" locked");
    }
    if let Some(text) = element::text(el).filter(|t| !t.is_empty()) {
        let chars = text.chars().count();
        if chars > EXCERPT_CHARS {
            let _ = write!(
                out,
                " text: {chars} chars, see shared://{board}/elements/{id}"
            );
        } else {
            let _ = write!(out, " {}", Value::String(text.into()));
        }
    }
    out
}

/// The overview of board ID: a heading, then one line per live element.
pub fn overview(board: &str, state: &State, pages: usize) -> String {
    let live: Vec<&Map<String, Value>> = state.live().collect();
    let mut out = format!(
        "board {board}: {} element(s), background {}, {pages} page(s) open\n",
        live.len(),
        state.background
    );
    if live.is_empty() {
        out.push_str("(no elements)\n");
    }
    for el in live {
        out.push_str(&line(board, el, state.hash(element::id(el))));
        out.push('\n');
    }
    out
}

/// VALUE as JSON text, a long string as `string-chunks(...)`.
fn string(text: &str, indent: usize, out: &mut String) {
    if text.chars().count() <= CHUNK_CHARS {
        out.push_str(&Value::String(text.into()).to_string());
        return;
    }
    let pad = " ".repeat(indent + 2);
    out.push_str("string-chunks(\n");
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(CHUNK_CHARS) {
        let piece: String = piece.iter().collect();
        let _ = writeln!(out, "{pad}{}", Value::String(piece));
    }
    out.push_str(&" ".repeat(indent));
    out.push(')');
}

fn is_point(v: &Value) -> bool {
    v.as_array()
        .is_some_and(|p| p.len() == 2 && p.iter().all(Value::is_number))
}

fn pretty(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent + 2);
    match value {
        Value::String(s) => string(s, indent, out),
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            for (i, (key, v)) in map.iter().enumerate() {
                let _ = write!(out, "{pad}{}: ", Value::String(key.clone()));
                pretty(v, indent + 2, out);
                out.push_str(if i + 1 < map.len() { ",\n" } else { "\n" });
            }
            out.push_str(&" ".repeat(indent));
            out.push('}');
        }
        Value::Array(items) if items.iter().all(is_point) && !items.is_empty() => {
            out.push_str("[\n");
            let lines: Vec<String> = items
                .chunks(POINTS_PER_LINE)
                .map(|chunk| {
                    chunk
                        .iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .collect();
            let _ = write!(
                out,
                "{pad}{}\n{}]",
                lines.join(&format!(",\n{pad}")),
                " ".repeat(indent)
            );
        }
        Value::Array(items)
            if items
                .iter()
                .any(|v| v.is_object() || v.is_array() || v.is_string()) =>
        {
            out.push_str("[\n");
            for (i, v) in items.iter().enumerate() {
                out.push_str(&pad);
                pretty(v, indent + 2, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&" ".repeat(indent));
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The full element ID: its hash and id, then its JSON, one key per line.
pub fn element(state: &State, id: &str) -> Option<String> {
    let el = state.get_live(id)?;
    let mut out = format!("{} {id}\n", state.hash(id));
    pretty(&Value::Object(el.clone()), 0, &mut out);
    out.push('\n');
    Some(out)
}

fn time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Every element's discussion, oldest message first.
pub fn discussions(board: &str, state: &State) -> String {
    if state.discussions.is_empty() {
        return format!("board {board}: no discussions\n");
    }
    let mut out = String::new();
    for (id, messages) in &state.discussions {
        let status = state.get_live(id).map_or("deleted", |_| state.hash(id));
        let _ = writeln!(out, "## {id} ({status})");
        for m in messages {
            let _ = write!(out, "{} {}: ", time(m.at_ms), m.author);
            string(&m.text, 0, &mut out);
            out.push('\n');
        }
    }
    out
}

/// The board's contributions, oldest first.
pub fn history(board: &str, state: &State) -> String {
    if state.history.is_empty() {
        return format!("board {board}: no contributions yet\n");
    }
    let mut out = String::new();
    for c in &state.history {
        let _ = write!(out, "{} {}: {}", time(c.at_ms), c.author, c.summary);
        if !c.ids.is_empty() {
            let ids = c.ids.join(" ");
            out.push_str(" (");
            string(&ids, 0, &mut out);
            out.push(')');
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_text_points_to_the_element_and_chunks_there() {
        let mut s = State::new(1);
        let long = "word ".repeat(200);
        let add = json!([{"op": "add", "element": {"type": "text", "id": "t", "text": long}}]);
        s.edit(add.as_array().expect("ops"), "model", 0)
            .expect("add");
        let o = overview("b", &s, 0);
        assert!(
            o.contains("text: 1000 chars, see shared://b/elements/t"),
            "{o}"
        );
        let e = element(&s, "t").expect("element");
        assert!(e.contains("string-chunks(\n"), "{e}");
        let mut joined = String::new();
        let mut inside = false;
        for l in e.lines() {
            if l.trim_end().ends_with("string-chunks(") {
                inside = true;
            } else if inside && l.trim() == ")," {
                break;
            } else if inside {
                let piece: String = serde_json::from_str(l.trim()).expect("a JSON string");
                joined.push_str(&piece);
            }
        }
        assert_eq!(joined, long);
        assert!(e.lines().all(|l| l.chars().count() < 500));
    }

    #[test]
    fn the_time_is_utc() {
        assert_eq!(time(0), "1970-01-01T00:00:00Z");
        assert_eq!(time(1_780_000_000_000), "2026-05-28T20:26:40Z");
    }
}
