//! SVGs for the model: Read shows an SVG's text as it shows any text
//! file's, and to a model that takes images it also sends a drawing of
//! it, made here with resvg rather than by Emacs's librsvg, which needs
//! a display: a headless or terminal session sends the same picture.
//!
//! Only the first page of a Read draws (paging on through a long file
//! does not send the picture again). Nothing outside the SVG is loaded:
//! an `<image>` naming another file stays blank, since the permission
//! asked covered the SVG alone; embedded (data URL) SVG images draw.
//! A drawing that fails leaves the text with a note saying why; the
//! Read itself succeeds.

use std::sync::{Arc, OnceLock};

use image::{DynamicImage, RgbImage};
use resvg::tiny_skia::{Color, Pixmap, Transform};
use resvg::usvg::{self, fontdb};

use super::{Reading, Request, picture, size};

/// Largest SVG drawn; a larger one is read as text only.
pub const FILE_LIMIT: u64 = 8 * 1024 * 1024;
/// Longest side a small SVG is drawn at (vectors scale up crisply,
/// and a 24 px icon says little to a model).
const MIN_SIDE: u32 = 512;

/// Whether the file NAME is an SVG, by its name.
pub fn is_svg(name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("svg"))
}

/// Whether a Read asking REQ gets a drawing at all: the model takes an
/// image type the drawing can be sent as.
pub fn wanted(req: &Request) -> bool {
    req.accepts("image/png") || req.accepts("image/jpeg")
}

/// The system's fonts, loaded once, with the generic families pointed
/// at fonts that exist here (fontdb's defaults name Windows fonts).
pub(crate) fn fonts() -> Arc<fontdb::Database> {
    static FONTS: OnceLock<Arc<fontdb::Database>> = OnceLock::new();
    Arc::clone(FONTS.get_or_init(|| {
        let mut db = fontdb::Database::new();
        db.load_system_fonts();
        let first = |names: &[&str]| {
            names
                .iter()
                .find(|name| {
                    db.faces()
                        .any(|f| f.families.iter().any(|(family, _)| family == *name))
                })
                .map(|name| (*name).to_owned())
        };
        let sans = first(&["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial"]);
        let serif = first(&["DejaVu Serif", "Liberation Serif", "Noto Serif"]);
        let mono = first(&["DejaVu Sans Mono", "Liberation Mono", "Noto Sans Mono"]);
        if let Some(sans) = &sans {
            db.set_sans_serif_family(sans.as_str());
        }
        // usvg falls back to serif for a family it cannot find.
        if let Some(serif) = serif.as_ref().or(sans.as_ref()) {
            db.set_serif_family(serif.as_str());
        }
        if let Some(mono) = &mono {
            db.set_monospace_family(mono.as_str());
        }
        Arc::new(db)
    }))
}

/// SVG drawn to fit REQ's longest side, on white (a model reads a
/// transparent background as black), or why it cannot be.
fn draw(svg: &[u8], req: &Request) -> Result<RgbImage, String> {
    let mut options = usvg::Options {
        fontdb: fonts(),
        ..usvg::Options::default()
    };
    options.image_href_resolver.resolve_string = Box::new(|_, _| None);
    let tree = usvg::Tree::from_data(svg, &options).map_err(|e| e.to_string())?;
    let (w, h) = (tree.size().width(), tree.size().height());
    let longest = w.max(h);
    let side = (longest.round() as u32).clamp(MIN_SIDE, req.max_side());
    let scale = side as f32 / longest;
    let (pw, ph) = (
        ((w * scale).round() as u32).clamp(1, side),
        ((h * scale).round() as u32).clamp(1, side),
    );
    on_white(&tree, scale, pw, ph)
}

/// TREE drawn at SCALE on a white PW x PH picture (a model reads a
/// transparent background as black), or why it cannot be.
pub(crate) fn on_white(
    tree: &usvg::Tree,
    scale: f32,
    pw: u32,
    ph: u32,
) -> Result<RgbImage, String> {
    let mut pixmap = Pixmap::new(pw, ph).ok_or("its size is not drawable")?;
    pixmap.fill(Color::WHITE);
    resvg::render(
        tree,
        Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    // Opaque on white, so the premultiplied channels are the colours.
    let rgb: Vec<u8> = pixmap
        .data()
        .chunks_exact(4)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    RgbImage::from_raw(pw, ph, rgb).ok_or_else(|| "its pixels do not fit".into())
}

/// TEXT, the Read of the SVG named ADDRESS, with a drawing of SVG (its
/// bytes, or why they could not be had) as REQ asks.
pub fn with_rendering(
    mut text: String,
    svg: Result<Vec<u8>, String>,
    address: &str,
    req: &Request,
) -> Reading {
    let drawn = svg.and_then(|svg| {
        let image = draw(&svg, req)?;
        picture::fit(
            DynamicImage::ImageRgb8(image),
            None,
            "image/png",
            false,
            address,
            req,
        )
        .map_err(|e| e.message)
    });
    if !text.ends_with('\n') {
        text.push('\n');
    }
    match drawn {
        Ok(prepared) => {
            let p = &prepared.picture;
            text.push_str(&format!(
                "(The SVG is also sent drawn, as an image: {} {}×{} px, {}.)\n",
                if p.mime == "image/jpeg" {
                    "JPEG"
                } else {
                    "PNG"
                },
                p.width,
                p.height,
                size(p.data.len() as u64)
            ));
            Reading {
                text,
                pictures: vec![prepared.picture],
            }
        }
        Err(why) => {
            text.push_str(&format!(
                "(The SVG could not be drawn as an image: {why}. Its text is above.)\n"
            ));
            Reading {
                text,
                pictures: Vec::new(),
            }
        }
    }
}

/// The bytes of the SVG file at PATH to draw, or why there are none.
pub fn load(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if bytes > FILE_LIMIT {
        return Err(format!(
            "it has {}, more than the {} Read draws",
            size(bytes),
            size(FILE_LIMIT)
        ));
    }
    std::fs::read(path).map_err(|e| e.to_string())
}
