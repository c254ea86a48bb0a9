//! Images and PDFs that Read shows the model.
//!
//! A file Read finds to be an image (by its first bytes, else its name)
//! or a PDF comes here instead of being paged as text. [`picture`]
//! decodes, scales and re-encodes images within the providers' limits;
//! [`pdf`] pages a PDF's text and renders pages with poppler's programs;
//! [`svg`] draws an SVG, whose text Read shows as a text file's.
//! Both run on Read's background thread and stop when its budget does.
//! What reaches Lisp is a [`Reading`]: the text the model reads and the
//! pictures to send beside it (base64). Whether the model takes images
//! at all, and which types, is Lisp's answer (gptel's model
//! capabilities); this module never sends a type it was not offered.

pub mod pdf;
pub mod picture;
pub mod svg;

use std::path::Path;

use base64::Engine as _;

use crate::datum::Datum;
use crate::error::{Error, ErrorKind};
use crate::search::budget::Budget;

/// Longest side an image is scaled to unless the caller asks otherwise.
pub const DEFAULT_MAX_SIDE: u32 = 1568;
/// Longest side ever sent, whatever the caller asks.
pub const MAX_SIDE: u32 = 8000;
/// Most base64 characters one image may take (the providers' 5 MB).
pub const MAX_BASE64: usize = 5 * 1024 * 1024;

/// What the caller wants of an image or PDF beyond its name.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// PDF pages as the model wrote them ("3-5", "1,4,7-9"); None: the first ones.
    pub pages: Option<String>,
    /// `image` renders PDF pages instead of extracting their text.
    pub render: bool,
    /// Image types the model accepts; empty for a text-only model.
    pub accepts: Vec<String>,
    /// Longest side of a sent image; 0 for [`DEFAULT_MAX_SIDE`].
    pub max_side: u32,
    /// The part of an image to send, (x y width height) in its pixels: a
    /// window of a frame's screenshot.
    pub crop: Option<[u32; 4]>,
}

impl Request {
    fn max_side(&self) -> u32 {
        match self.max_side {
            0 => DEFAULT_MAX_SIDE,
            n => n.min(MAX_SIDE),
        }
    }

    fn accepts(&self, mime: &str) -> bool {
        self.accepts.iter().any(|m| m == mime)
    }
}

/// An image ready to send.
#[derive(Debug, Clone)]
pub struct Picture {
    pub mime: &'static str,
    pub data: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// A small PNG of it for the tool row in the view (see
    /// [`picture::THUMBNAIL_SIDE`]); kept in the transcript, so small.
    pub thumbnail: Vec<u8>,
}

/// What a Read of an image or PDF returns: text, and pictures beside it.
#[derive(Debug, Default)]
pub struct Reading {
    pub text: String,
    pub pictures: Vec<Picture>,
}

impl Reading {
    /// `(:text TEXT :media ((:mime M :base64 B :width W :height H :bytes N
    /// :thumbnail B64) ...))`.
    pub fn datum(self) -> Datum {
        let b64 =
            |bytes: &[u8]| Datum::Str(base64::engine::general_purpose::STANDARD.encode(bytes));
        let media = self
            .pictures
            .into_iter()
            .map(|p| {
                Datum::plist([
                    ("mime", Datum::str(p.mime)),
                    ("base64", b64(&p.data)),
                    ("width", Datum::Int(i64::from(p.width))),
                    ("height", Datum::Int(i64::from(p.height))),
                    ("bytes", Datum::Int(p.data.len() as i64)),
                    ("thumbnail", b64(&p.thumbnail)),
                ])
            })
            .collect();
        Datum::plist([
            ("text", Datum::Str(self.text)),
            ("media", Datum::List(media)),
        ])
    }
}

/// What kind of media file a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Image(&'static str),
    Pdf,
}

/// The kind of the file at PATH named NAME: its first bytes decide, and
/// its extension when they say nothing (a truncated or corrupt image
/// still comes here, to fail with a reason).
pub fn kind(path: &Path, name: &str) -> Option<Kind> {
    let mut head = [0u8; 16];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    sniff(&head[..n]).or_else(|| by_name(name))
}

fn sniff(head: &[u8]) -> Option<Kind> {
    if head.starts_with(b"%PDF-") {
        return Some(Kind::Pdf);
    }
    picture::sniff(head).map(Kind::Image)
}

fn by_name(name: &str) -> Option<Kind> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => Kind::Image("image/png"),
        "jpg" | "jpeg" => Kind::Image("image/jpeg"),
        "gif" => Kind::Image("image/gif"),
        "webp" => Kind::Image("image/webp"),
        "pdf" => Kind::Pdf,
        _ => return None,
    })
}

fn fail(message: String) -> Error {
    Error::new(ErrorKind::Resource, message)
}

/// Read the image or PDF of KIND at PATH, named ADDRESS to the model.
pub fn read(
    path: &Path,
    address: &str,
    kind: Kind,
    req: &Request,
    budget: &Budget,
) -> Result<Reading, Error> {
    match kind {
        Kind::Image(mime) => picture::read(path, address, mime, req),
        Kind::Pdf => pdf::read(path, address, req, budget),
    }
}

/// Bytes as people say them: "812 B", "34.5 KB", "4.2 MB".
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{:.1} MB", b as f64 / (1024.0 * 1024.0)),
    }
}

#[cfg(test)]
mod tests;
