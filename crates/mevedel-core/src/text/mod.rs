//! Text utilities: Emacs's internal encoding, head/tail previews (with
//! the failure lines they keep from the middle, [`keep`]),
//! Unicode normalisation, and positions in Emacs's generalized UTF-8.
//!
//! Text reaches Rust as the bytes of an Emacs string (see `text.rs` in
//! the seam, `mevedel-dyn`): UTF-8, except that surrogate code points may
//! appear in their three-byte generalized form. Every character starts
//! with exactly one byte outside `0x80..=0xBF`, which is all that
//! [`chars`] needs to turn byte offsets into Lisp character positions.
//! Bytes in Emacs's full internal form (raw bytes, characters above
//! U+10FFFF) are read only through [`internal`].

pub mod chars;
pub mod internal;
pub mod keep;
pub mod preview;
pub mod unicode;

pub use chars::{ByteToChar, char_count};
pub use preview::{Preview, head_tail};
pub use unicode::{Normalized, normalize};

/// BYTES (an Emacs string's text) as a string with one character per
/// Emacs character: what is not Unicode (a surrogate) becomes U+FFFD,
/// so positions stay those of the buffer. Valid UTF-8 is taken as is.
pub fn per_char(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let bytes = e.into_bytes();
            let mut out = String::with_capacity(bytes.len());
            let mut rest = &bytes[..];
            while let Some((code, len)) = internal::char_at(rest) {
                out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                rest = &rest[len.max(1)..];
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn per_char_keeps_one_character_per_emacs_character() {
        assert_eq!(super::per_char("héllo".as_bytes().to_vec()), "héllo");
        // A surrogate in its three-byte form, between two characters.
        let text = super::per_char(vec![b'a', 0xED, 0xA0, 0x80, b'b']);
        assert_eq!(text, "a\u{FFFD}b");
        assert_eq!(text.chars().count(), 3);
    }
}
