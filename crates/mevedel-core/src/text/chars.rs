//! Byte offsets to character positions.
//!
//! Lisp counts characters; Rust scans bytes. In Emacs's string bytes
//! each character has exactly one lead byte (anything but a UTF-8
//! continuation byte `0x80..=0xBF`), so counting lead bytes converts
//! between the two without decoding.

use super::internal::is_continuation;

/// Characters in BYTES: the bytes that are not continuation bytes. The
/// loop is written so the compiler vectorises it.
pub fn char_count(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| !is_continuation(b)).count()
}

/// Converts increasing byte offsets into character positions in one
/// pass over the text, however many offsets are asked for.
pub struct ByteToChar<'a> {
    bytes: &'a [u8],
    /// True when every character is one byte (ASCII or unibyte text).
    identity: bool,
    byte: usize,
    chars: usize,
}

impl<'a> ByteToChar<'a> {
    pub fn new(bytes: &'a [u8], identity: bool) -> Self {
        ByteToChar {
            bytes,
            identity,
            byte: 0,
            chars: 0,
        }
    }

    /// The character position of byte OFFSET. Offsets asked for must not
    /// decrease; an earlier offset restarts the count from the beginning.
    pub fn char_at(&mut self, offset: usize) -> usize {
        if self.identity {
            return offset;
        }
        let offset = offset.min(self.bytes.len());
        if offset < self.byte {
            self.byte = 0;
            self.chars = 0;
        }
        self.chars += char_count(&self.bytes[self.byte..offset]);
        self.byte = offset;
        self.chars
    }
}

/// The byte offset of character position POS in BYTES (clamped to the end).
pub fn byte_at_char(bytes: &[u8], pos: usize) -> usize {
    let mut seen = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        if !is_continuation(b) {
            if seen == pos {
                return i;
            }
            seen += 1;
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lead_bytes_only() {
        assert_eq!(char_count(b""), 0);
        assert_eq!(char_count("abc".as_bytes()), 3);
        assert_eq!(char_count("é漢🎉xyzxyzxyz".as_bytes()), 12);
        // A surrogate in generalized UTF-8 is one character.
        assert_eq!(char_count(&[b'a', 0xED, 0xA0, 0x80, b'b']), 3);
    }

    #[test]
    fn converts_increasing_offsets() {
        let text = "aé漢b🎉c".as_bytes();
        let mut map = ByteToChar::new(text, false);
        assert_eq!(map.char_at(0), 0);
        assert_eq!(map.char_at(1), 1);
        assert_eq!(map.char_at(3), 2);
        assert_eq!(map.char_at(6), 3);
        assert_eq!(map.char_at(7), 4);
        assert_eq!(map.char_at(11), 5);
        assert_eq!(map.char_at(2), 2, "a decreasing offset restarts");
        assert_eq!(byte_at_char(text, 4), 7);
        assert_eq!(byte_at_char(text, 99), text.len());
    }
}
