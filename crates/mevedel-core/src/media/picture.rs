//! Images for the model: decoded in full (so a corrupt or truncated file
//! fails here, naming it, instead of at the provider), scaled to the
//! longest side asked for, re-encoded until the base64 fits the
//! providers' 5 MB, and sent unchanged when nothing needed doing.
//! Animations send their first frame.

use std::io::Cursor;
use std::path::Path;

use image::codecs::gif::GifDecoder;
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::{CompressionType, FilterType, PngDecoder, PngEncoder};
use image::codecs::webp::WebPDecoder;
use image::{AnimationDecoder, DynamicImage, ImageFormat, ImageReader};

use super::{MAX_BASE64, Picture, Reading, Request, fail, size};
use crate::error::Error;

/// Longest side of the thumbnail the view shows in a tool row.
pub const THUMBNAIL_SIDE: u32 = 96;

/// Largest image file Read decodes; larger ones are refused before reading.
const FILE_LIMIT: u64 = 64 * 1024 * 1024;

/// The image type of HEAD, a file's first bytes, when it is one a model is sent.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    match image::guess_format(head).ok()? {
        ImageFormat::Png => Some("image/png"),
        ImageFormat::Jpeg => Some("image/jpeg"),
        ImageFormat::Gif => Some("image/gif"),
        ImageFormat::WebP => Some("image/webp"),
        _ => None,
    }
}

fn format_of(mime: &str) -> ImageFormat {
    match mime {
        "image/jpeg" => ImageFormat::Jpeg,
        "image/gif" => ImageFormat::Gif,
        "image/webp" => ImageFormat::WebP,
        _ => ImageFormat::Png,
    }
}

fn name_of(mime: &str) -> &'static str {
    match mime {
        "image/jpeg" => "JPEG",
        "image/gif" => "GIF",
        "image/webp" => "WebP",
        _ => "PNG",
    }
}

/// Base64 length of N bytes.
fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// Whether BYTES, an image of FORMAT, has more than one frame.
fn animated(bytes: &[u8], format: ImageFormat) -> bool {
    let cursor = || Cursor::new(bytes);
    match format {
        ImageFormat::Gif => GifDecoder::new(cursor())
            .map(|d| d.into_frames().take(2).count() > 1)
            .unwrap_or(false),
        ImageFormat::Png => PngDecoder::new(cursor())
            .and_then(|d| d.is_apng())
            .unwrap_or(false),
        ImageFormat::WebP => WebPDecoder::new(cursor())
            .map(|d| d.has_animation())
            .unwrap_or(false),
        _ => false,
    }
}

/// The decoded first frame of BYTES, an image of FORMAT.
fn decode(bytes: &[u8], format: ImageFormat) -> image::ImageResult<DynamicImage> {
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    let mut limits = image::Limits::default();
    // 16k x 16k RGBA; a bigger claim is a bomb, not a screenshot.
    limits.max_alloc = Some(1024 * 1024 * 1024);
    reader.limits(limits);
    reader.decode()
}

/// The error for the image ADDRESS of type MIME that failed to decode with E.
fn unreadable(address: &str, mime: &str, e: &image::ImageError) -> Error {
    fail(format!(
        "Read `{address}`: it is not a readable {} image (corrupt or truncated: {e})",
        name_of(mime)
    ))
}

/// Encode IMAGE as MIME (PNG or JPEG at QUALITY).
fn encode(image: &DynamicImage, mime: &str, quality: u8) -> image::ImageResult<Vec<u8>> {
    let mut out = Vec::new();
    if mime == "image/jpeg" {
        let rgb = DynamicImage::ImageRgb8(image.to_rgb8());
        rgb.write_with_encoder(JpegEncoder::new_with_quality(&mut out, quality))?;
    } else {
        image.write_with_encoder(PngEncoder::new_with_quality(
            &mut out,
            CompressionType::Fast,
            FilterType::Adaptive,
        ))?;
    }
    Ok(out)
}

/// IMAGE halved (2×2 boxes averaged) while its longest side stays at
/// least twice MAX: a cheap first step that leaves `thumbnail`'s finer
/// area averaging a quarter of the pixels each time (a 4000×3000
/// screenshot scales in about half the time). 8-bit RGB and RGBA only;
/// other layouts go to `thumbnail` as they are.
fn halve_to(mut image: DynamicImage, max: u32) -> DynamicImage {
    while image.width().max(image.height()) >= 2 * max && image.width().min(image.height()) >= 2 {
        image = match image {
            DynamicImage::ImageRgb8(b) => {
                let (w, h) = (b.width(), b.height());
                let raw = halve(b.as_raw(), w as usize, h as usize, 3);
                match image::RgbImage::from_raw(w / 2, h / 2, raw) {
                    Some(b) => DynamicImage::ImageRgb8(b),
                    None => return DynamicImage::ImageRgb8(b),
                }
            }
            DynamicImage::ImageRgba8(b) => {
                let (w, h) = (b.width(), b.height());
                let raw = halve(b.as_raw(), w as usize, h as usize, 4);
                match image::RgbaImage::from_raw(w / 2, h / 2, raw) {
                    Some(b) => DynamicImage::ImageRgba8(b),
                    None => return DynamicImage::ImageRgba8(b),
                }
            }
            other => return other,
        };
    }
    image
}

/// IMAGE scaled to fit MAX×MAX by area averaging, which `thumbnail`
/// also does but at about four times the cost for 8-bit RGB(A).
fn shrink(image: DynamicImage, max: u32) -> DynamicImage {
    let (w, h) = (image.width(), image.height());
    let ratio = f64::from(max) / f64::from(w.max(h));
    let (nw, nh) = (
        ((f64::from(w) * ratio).round() as u32).clamp(1, max),
        ((f64::from(h) * ratio).round() as u32).clamp(1, max),
    );
    let dims = (w as usize, h as usize, nw as usize, nh as usize);
    match image {
        DynamicImage::ImageRgb8(b) => {
            let raw = area(b.as_raw(), dims, 3);
            image::RgbImage::from_raw(nw, nh, raw).map_or_else(
                || DynamicImage::ImageRgb8(b).thumbnail(max, max),
                DynamicImage::ImageRgb8,
            )
        }
        DynamicImage::ImageRgba8(b) => {
            let raw = area(b.as_raw(), dims, 4);
            image::RgbaImage::from_raw(nw, nh, raw).map_or_else(
                || DynamicImage::ImageRgba8(b).thumbnail(max, max),
                DynamicImage::ImageRgba8,
            )
        }
        other => other.thumbnail(max, max),
    }
}

/// For each of N output cells over SRC input cells: the first input
/// cell it covers and the weights (summing to 1 << 14) of those it does.
fn area_weights(src: usize, n: usize) -> Vec<(usize, Vec<u32>)> {
    let scale = src as f64 / n as f64;
    (0..n)
        .map(|i| {
            let (from, to) = (i as f64 * scale, ((i + 1) as f64 * scale).min(src as f64));
            let first = from.floor() as usize;
            let last = (to.ceil() as usize).clamp(first + 1, src);
            let mut weights: Vec<u32> = (first..last)
                .map(|j| {
                    let cover = (to.min((j + 1) as f64) - from.max(j as f64)).max(0.0);
                    (cover / (to - from) * 16384.0).round() as u32
                })
                .collect();
            let total: u32 = weights.iter().sum();
            if let Some(w) = weights.iter_mut().max() {
                *w = (*w + 16384).saturating_sub(total);
            }
            (first, weights)
        })
        .collect()
}

/// SRC (W×H, C channels a byte) averaged by area into NW×NH: one pass
/// along rows, one along columns.
fn area(src: &[u8], (w, h, nw, nh): (usize, usize, usize, usize), c: usize) -> Vec<u8> {
    let round = |sum: u32| ((sum + 8192) >> 14).min(255) as u8;
    let xs = area_weights(w, nw);
    let mut rows = vec![0u8; nw * h * c];
    for (row, out) in src.chunks_exact(w * c).zip(rows.chunks_exact_mut(nw * c)) {
        for ((first, weights), px) in xs.iter().zip(out.chunks_exact_mut(c)) {
            for (k, value) in px.iter_mut().enumerate() {
                let sum: u32 = weights
                    .iter()
                    .enumerate()
                    .map(|(j, wt)| wt * u32::from(row[(first + j) * c + k]))
                    .sum();
                *value = round(sum);
            }
        }
    }
    let ys = area_weights(h, nh);
    let line = nw * c;
    let mut out = vec![0u8; line * nh];
    for ((first, weights), dst) in ys.iter().zip(out.chunks_exact_mut(line)) {
        let mut sums = vec![0u32; line];
        for (j, wt) in weights.iter().enumerate() {
            let from = (first + j) * line;
            for (sum, &v) in sums.iter_mut().zip(&rows[from..from + line]) {
                *sum += wt * u32::from(v);
            }
        }
        for (d, sum) in dst.iter_mut().zip(sums) {
            *d = round(sum);
        }
    }
    out
}

/// The W×H image SRC of C channels a byte, at half its width and height.
fn halve(src: &[u8], w: usize, h: usize, c: usize) -> Vec<u8> {
    let (nw, nh) = (w / 2, h / 2);
    let mut out = Vec::with_capacity(nw * nh * c);
    for y in 0..nh {
        let top = &src[2 * y * w * c..(2 * y + 1) * w * c];
        let bottom = &src[(2 * y + 1) * w * c..(2 * y + 2) * w * c];
        for (a, b) in top.chunks_exact(2 * c).zip(bottom.chunks_exact(2 * c)) {
            for k in 0..c {
                let sum =
                    u16::from(a[k]) + u16::from(a[k + c]) + u16::from(b[k]) + u16::from(b[k + c]);
                out.push(((sum + 2) / 4) as u8);
            }
        }
    }
    out
}

/// A small PNG of IMAGE for the view; empty when it cannot be made.
fn thumbnail(image: &DynamicImage) -> Vec<u8> {
    encode(
        &image.thumbnail(THUMBNAIL_SIDE, THUMBNAIL_SIDE),
        "image/png",
        0,
    )
    .unwrap_or_default()
}

/// What an image became for the model.
pub struct Prepared {
    pub picture: Picture,
    pub width: u32,
    pub height: u32,
    pub animated: bool,
}

/// Make BYTES, an image of type MIME named ADDRESS, fit REQ: decode it,
/// scale it, and re-encode it as a type REQ accepts until its base64
/// fits. Errors name ADDRESS.
pub fn prepare(
    bytes: &[u8],
    mime: &'static str,
    address: &str,
    req: &Request,
) -> Result<Prepared, Error> {
    let format = format_of(mime);
    let image = decode(bytes, format).map_err(|e| unreadable(address, mime, &e))?;
    let animated = animated(bytes, format);
    fit(image, Some(bytes), mime, animated, address, req)
}

/// Make IMAGE, decoded from ORIGINAL of type MIME (None: drawn here, as
/// an SVG is), fit REQ as [`prepare`] does; ORIGINAL is sent as it is
/// when nothing needs doing.
pub fn fit(
    image: DynamicImage,
    original: Option<&[u8]>,
    mime: &'static str,
    animated: bool,
    address: &str,
    req: &Request,
) -> Result<Prepared, Error> {
    let (width, height) = (image.width(), image.height());
    let cropped = req.crop.map(|[x, y, w, h]| {
        let (x, y) = (
            x.min(width.saturating_sub(1)),
            y.min(height.saturating_sub(1)),
        );
        image.crop_imm(x, y, w.clamp(1, width - x), h.clamp(1, height - y))
    });
    let image = cropped.unwrap_or(image);
    let (width, height) = (image.width(), image.height());
    let max = req.max_side();
    let fits = width <= max && height <= max;
    let as_it_is = original.filter(|bytes| {
        fits && !animated
            && req.crop.is_none()
            && req.accepts(mime)
            && base64_len(bytes.len()) <= MAX_BASE64
    });
    if let Some(bytes) = as_it_is {
        let picture = Picture {
            mime,
            data: bytes.to_vec(),
            width,
            height,
            thumbnail: thumbnail(&image),
        };
        return Ok(Prepared {
            picture,
            width,
            height,
            animated,
        });
    }
    let lossy_first = mime == "image/jpeg" || !req.accepts("image/png");
    let out_mime: &'static str = match (lossy_first, req.accepts("image/jpeg")) {
        (true, true) => "image/jpeg",
        _ if req.accepts("image/png") => "image/png",
        _ if req.accepts("image/jpeg") => "image/jpeg",
        _ => {
            return Err(fail(format!(
                "Read `{address}`: the current model takes neither PNG nor JPEG images, so this \
                 {} image ({width}×{height} px) cannot be sent in a form it accepts",
                name_of(mime)
            )));
        }
    };
    let mut scaled = if fits {
        image
    } else {
        shrink(halve_to(image, max), max)
    };
    let mut attempts = [(out_mime, 85u8), ("image/jpeg", 80), ("image/jpeg", 60)]
        .into_iter()
        .filter(|(m, _)| *m == out_mime || req.accepts(m))
        .collect::<Vec<_>>();
    attempts.dedup();
    loop {
        for &(m, q) in &attempts {
            let data = encode(&scaled, m, q)
                .map_err(|e| fail(format!("Read `{address}`: cannot encode it again: {e}")))?;
            if base64_len(data.len()) <= MAX_BASE64 {
                let picture = Picture {
                    mime: m,
                    data,
                    width: scaled.width(),
                    height: scaled.height(),
                    thumbnail: thumbnail(&scaled),
                };
                return Ok(Prepared {
                    picture,
                    width,
                    height,
                    animated,
                });
            }
        }
        let (w, h) = (scaled.width() * 3 / 4, scaled.height() * 3 / 4);
        if w < 64 || h < 64 {
            return Err(fail(format!(
                "Read `{address}`: it does not fit the 5 MB image limit even scaled down"
            )));
        }
        scaled = scaled.thumbnail(w, h);
    }
}

/// The sentence saying what was sent for PREPARED (an image first
/// MIME), read from a file of BYTES.
pub fn describe(prepared: &Prepared, mime: &str, bytes: u64) -> String {
    let p = &prepared.picture;
    let mut text = format!(
        "{}, {}×{} px, {}",
        name_of(mime),
        prepared.width,
        prepared.height,
        size(bytes)
    );
    if p.width == prepared.width && p.height == prepared.height && p.mime == mime {
        if p.data.len() as u64 == bytes {
            text.push_str("; sent as it is.");
        } else {
            text.push_str(&format!(
                "; sent as {} ({}).",
                name_of(p.mime),
                size(p.data.len() as u64)
            ));
        }
    } else {
        text.push_str(&format!(
            "; sent as {} {}×{} px ({}){}.",
            name_of(p.mime),
            p.width,
            p.height,
            size(p.data.len() as u64),
            if p.width < prepared.width {
                " scaled down"
            } else {
                ""
            }
        ));
    }
    if prepared.animated {
        text.push_str(" It is animated: only its first frame is sent.");
    }
    text
}

/// Read the image of type MIME at PATH, named ADDRESS.
pub fn read(
    path: &Path,
    address: &str,
    mime: &'static str,
    req: &Request,
) -> Result<Reading, Error> {
    let meta = std::fs::metadata(path)
        .map_err(|e| fail(format!("Read `{address}`: cannot open it: {e}")))?;
    if meta.len() > FILE_LIMIT {
        return Err(fail(format!(
            "Read `{address}`: the image has {}, more than the {} Read decodes",
            size(meta.len()),
            size(FILE_LIMIT)
        )));
    }
    let bytes =
        std::fs::read(path).map_err(|e| fail(format!("Read `{address}`: cannot read it: {e}")))?;
    if req.accepts.is_empty() {
        let image = decode(&bytes, format_of(mime)).map_err(|e| unreadable(address, mime, &e))?;
        return Ok(Reading {
            text: format!(
                "Image `{address}`: {}, {}×{} px, {}. Not shown: the current model takes text \
                 only, so the image cannot be sent to it.\n",
                name_of(mime),
                image.width(),
                image.height(),
                size(bytes.len() as u64)
            ),
            pictures: Vec::new(),
        });
    }
    let prepared = prepare(&bytes, mime, address, req)?;
    let text = format!(
        "Image `{address}`: {}\n",
        describe(&prepared, mime, bytes.len() as u64)
    );
    Ok(Reading {
        text,
        pictures: vec![prepared.picture],
    })
}
