//! A board drawn without a browser: its elements as SVG, rendered with
//! resvg. Used for `view.png` when no page is open to export Excalidraw's
//! own drawing; shapes, lines, arrows, text and frames are drawn plainly
//! (no hand-drawn roughness), images as labelled boxes.

use std::fmt::Write;
use std::io::Cursor;

use image::ImageFormat;
use resvg::usvg;
use serde_json::{Map, Value};

use super::board::State;
use super::element;
use crate::error::{Error, ErrorKind, Result};

/// Margin around the drawing, in board units.
const MARGIN: f64 = 20.0;
/// Longest side of the PNG, in pixels.
const MAX_SIDE: f64 = 2000.0;

fn f(el: &Map<String, Value>, key: &str) -> f64 {
    el.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

fn s<'a>(el: &'a Map<String, Value>, key: &str, default: &'a str) -> &'a str {
    el.get(key).and_then(Value::as_str).unwrap_or(default)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn points(el: &Map<String, Value>) -> Vec<(f64, f64)> {
    el.get("points")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p.get(0)?.as_f64()?, p.get(1)?.as_f64()?)))
        .collect()
}

/// The box EL covers, as (min x, min y, max x, max y).
fn bounds(el: &Map<String, Value>) -> (f64, f64, f64, f64) {
    let (x, y) = (f(el, "x"), f(el, "y"));
    let pts = points(el);
    if pts.is_empty() {
        return (x, y, x + f(el, "width"), y + f(el, "height"));
    }
    pts.iter().fold(
        (
            f64::INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NEG_INFINITY,
        ),
        |(a, b, c, d), (px, py)| (a.min(x + px), b.min(y + py), c.max(x + px), d.max(y + py)),
    )
}

fn shape(el: &Map<String, Value>, out: &mut String) {
    let (x, y, w, h) = (f(el, "x"), f(el, "y"), f(el, "width"), f(el, "height"));
    let stroke = s(el, "strokeColor", "#1e1e1e");
    let fill = match s(el, "backgroundColor", "transparent") {
        "transparent" => "none",
        c => c,
    };
    let opacity = el.get("opacity").and_then(Value::as_f64).unwrap_or(100.0) / 100.0;
    let style = format!(
        "stroke=\"{}\" fill=\"{}\" stroke-width=\"{}\" opacity=\"{opacity}\"",
        escape(stroke),
        escape(fill),
        f(el, "strokeWidth").max(1.0)
    );
    let angle = f(el, "angle").to_degrees();
    let (cx, cy) = (x + w / 2.0, y + h / 2.0);
    let _ = write!(out, "<g transform=\"rotate({angle} {cx} {cy})\">");
    match s(el, "type", "") {
        "rectangle" | "frame" | "embeddable" => {
            let _ = write!(
                out,
                "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" {style}/>"
            );
        }
        "image" => {
            let _ = write!(
                out,
                "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" stroke=\"#888\" fill=\"#eee\"/>"
            );
        }
        "ellipse" => {
            let _ = write!(
                out,
                "<ellipse cx=\"{cx}\" cy=\"{cy}\" rx=\"{}\" ry=\"{}\" {style}/>",
                w / 2.0,
                h / 2.0
            );
        }
        "diamond" => {
            let _ = write!(
                out,
                "<polygon points=\"{cx},{y} {},{cy} {cx},{} {x},{cy}\" {style}/>",
                x + w,
                y + h
            );
        }
        "arrow" | "line" | "freedraw" => {
            let pts = points(el);
            let list: Vec<String> = pts
                .iter()
                .map(|(px, py)| format!("{},{}", x + px, y + py))
                .collect();
            let _ = write!(
                out,
                "<polyline points=\"{}\" stroke=\"{}\" fill=\"none\" stroke-width=\"{}\" opacity=\"{opacity}\"/>",
                list.join(" "),
                escape(stroke),
                f(el, "strokeWidth").max(1.0)
            );
            if s(el, "type", "") == "arrow" && pts.len() >= 2 {
                let (ax, ay) = pts[pts.len() - 2];
                let (bx, by) = pts[pts.len() - 1];
                let t = (by - ay).atan2(bx - ax);
                let (tx, ty) = (x + bx, y + by);
                let wing = |d: f64| (tx - 12.0 * (t + d).cos(), ty - 12.0 * (t + d).sin());
                let (l, r) = (wing(0.45), wing(-0.45));
                let _ = write!(
                    out,
                    "<polyline points=\"{},{} {tx},{ty} {},{}\" stroke=\"{}\" fill=\"none\" stroke-width=\"{}\"/>",
                    l.0,
                    l.1,
                    r.0,
                    r.1,
                    escape(stroke),
                    f(el, "strokeWidth").max(1.0)
                );
            }
        }
        _ => {}
    }
    if let Some(text) = element::text(el).filter(|t| !t.is_empty()) {
        let size = el.get("fontSize").and_then(Value::as_f64).unwrap_or(20.0);
        let (anchor, tx) = match s(el, "textAlign", "left") {
            "center" => ("middle", cx),
            "right" => ("end", x + w),
            _ => ("start", x),
        };
        let ty = if s(el, "type", "") == "frame" {
            y - 6.0
        } else {
            y + size
        };
        let _ = write!(
            out,
            "<text x=\"{tx}\" y=\"{ty}\" font-size=\"{size}\" font-family=\"sans-serif\" text-anchor=\"{anchor}\" fill=\"{}\">",
            escape(stroke)
        );
        for (i, line) in text.lines().enumerate() {
            let dy = if i == 0 { 0.0 } else { size * 1.25 };
            let _ = write!(
                out,
                "<tspan x=\"{tx}\" dy=\"{dy}\">{}</tspan>",
                escape(line)
            );
        }
        out.push_str("</text>");
    }
    out.push_str("</g>");
}

/// The board as SVG text, sized to its elements plus a margin.
pub fn svg(state: &State) -> String {
    let live: Vec<&Map<String, Value>> = state.live().collect();
    let (mut x0, mut y0, mut x1, mut y1) = live.iter().map(|e| bounds(e)).fold(
        (
            f64::INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NEG_INFINITY,
        ),
        |(a, b, c, d), (e, g, h, i)| (a.min(e), b.min(g), c.max(h), d.max(i)),
    );
    if live.is_empty() {
        (x0, y0, x1, y1) = (0.0, 0.0, 200.0, 100.0);
    }
    let (w, h) = (x1 - x0 + 2.0 * MARGIN, y1 - y0 + 2.0 * MARGIN);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"{} {} {w} {h}\"><rect x=\"{}\" y=\"{}\" width=\"{w}\" height=\"{h}\" fill=\"{}\"/>",
        x0 - MARGIN,
        y0 - MARGIN,
        x0 - MARGIN,
        y0 - MARGIN,
        escape(&state.background)
    );
    for el in live {
        shape(el, &mut out);
    }
    out.push_str("</svg>");
    out
}

/// The board drawn as PNG bytes, with the picture's width and height.
pub fn png(state: &State) -> Result<(Vec<u8>, u32, u32)> {
    let fail = |what: String| {
        Error::new(
            ErrorKind::Internal,
            format!("cannot draw the board: {what}"),
        )
    };
    let options = usvg::Options {
        fontdb: crate::media::svg::fonts(),
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(&svg(state), &options).map_err(|e| fail(e.to_string()))?;
    let (w, h) = (
        f64::from(tree.size().width()),
        f64::from(tree.size().height()),
    );
    let scale = (MAX_SIDE / w.max(h)).min(1.0) as f32;
    let (pw, ph) = (
        ((w as f32 * scale).round() as u32).max(1),
        ((h as f32 * scale).round() as u32).max(1),
    );
    let image = crate::media::svg::on_white(&tree, scale, pw, ph).map_err(fail)?;
    let mut bytes = Cursor::new(Vec::new());
    image
        .write_to(&mut bytes, ImageFormat::Png)
        .map_err(|e| fail(e.to_string()))?;
    Ok((bytes.into_inner(), pw, ph))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_board_draws_to_a_png_of_its_extent() {
        let mut s = State::new(1);
        let ops = json!([
            {"op": "add", "element": {"type": "rectangle", "x": 0, "y": 0, "width": 300, "height": 100, "backgroundColor": "#ffc9c9"}},
            {"op": "add", "element": {"type": "text", "x": 10, "y": 10, "text": "a <b> & c"}},
            {"op": "add", "element": {"type": "arrow", "x": 0, "y": 150, "points": [[0, 0], [200, 50]]}}
        ]);
        s.edit(ops.as_array().expect("ops"), "model", 0)
            .expect("edit");
        let (png, w, h) = png(&s).expect("png");
        assert_eq!(&png[1..4], b"PNG");
        assert_eq!((w, h), (340, 240));
        let img = image::load_from_memory(&png).expect("decodes").to_rgb8();
        assert_eq!(img.get_pixel(60, 60).0, [0xff, 0xc9, 0xc9]);
    }
}
