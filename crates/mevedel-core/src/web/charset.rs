//! Which encoding a response body is in, and its text.
//!
//! The order is the one WebFetch documents: a byte-order mark, then the
//! `charset` of the Content-Type header, then (HTML only) a `<meta>`
//! declaration near the start, else UTF-8. Labels are WHATWG's, so
//! `iso-8859-1` means windows-1252 as browsers read it.

use encoding_rs::{Encoding, UTF_8};
use regex::bytes::Regex;
use std::sync::LazyLock;

/// How far into an HTML document a `<meta>` charset is looked for.
const META_SCAN: usize = 4096;

static META: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r#"(?i)<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([A-Za-z0-9_:.\-]+)"#).ok()
});

/// The encoding a `<meta>` element in the first bytes of BYTES declares.
fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(META_SCAN)];
    let caps = META.as_ref()?.captures(head)?;
    Encoding::for_label(caps.get(1)?.as_bytes())
}

/// BYTES decoded: header charset HEADER, else a meta charset when HTML,
/// else UTF-8; a BOM overrides all. Returns the text and the encoding's
/// name. Undecodable bytes become U+FFFD.
pub fn decode(bytes: &[u8], header: Option<&str>, html: bool) -> (String, &'static str) {
    let declared = header
        .and_then(|label| Encoding::for_label(label.trim().as_bytes()))
        .or_else(|| if html { meta_charset(bytes) } else { None })
        .unwrap_or(UTF_8);
    let (text, used, _) = declared.decode(bytes);
    (text.into_owned(), used.name())
}
