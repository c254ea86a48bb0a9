//! Unicode normalisation of tool output in one scan.
//!
//! Valid UTF-8 is recognised by a single validating pass and reported as
//! [`Normalized::Unchanged`], so the caller can keep the original Lisp
//! string (and its text properties) without building a copy. Anything
//! else is repaired from the first invalid byte on:
//!
//! - raw bytes that happen to form UTF-8 become those characters;
//! - a surrogate pair in generalized UTF-8 becomes its supplementary
//!   character; a lone surrogate becomes U+FFFD;
//! - values above U+10FFFF (Emacs's four- and five-byte extensions),
//!   overlong forms, stray continuation bytes and truncated sequences
//!   become U+FFFD (one per complete sequence, else one per byte).

use super::internal::{self, Unit};

/// The result of [`normalize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Normalized {
    /// The input was valid UTF-8; use it as it is.
    Unchanged,
    /// The repaired text.
    Repaired(String),
}

const REPLACEMENT: char = '\u{FFFD}';

fn is_high_surrogate(c: u32) -> bool {
    (0xD800..=0xDBFF).contains(&c)
}

fn is_low_surrogate(c: u32) -> bool {
    (0xDC00..=0xDFFF).contains(&c)
}

/// Repair BYTES from the start; VALID_UP_TO bytes are known to be UTF-8.
fn repair(bytes: &[u8], valid_up_to: usize) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    // The prefix was validated by the caller.
    out.push_str(std::str::from_utf8(&bytes[..valid_up_to]).unwrap_or_default());
    let mut i = valid_up_to;
    while i < bytes.len() {
        // Copy the next valid run in one piece.
        match std::str::from_utf8(&bytes[i..]) {
            Ok(rest) => {
                out.push_str(rest);
                break;
            }
            Err(e) if e.valid_up_to() > 0 => {
                let end = i + e.valid_up_to();
                out.push_str(std::str::from_utf8(&bytes[i..end]).unwrap_or_default());
                i = end;
                continue;
            }
            Err(_) => {}
        }
        let Some((unit, len)) = internal::decode(&bytes[i..]) else {
            break;
        };
        match unit {
            Unit::Char(high) if is_high_surrogate(high) => {
                if let Some((Unit::Char(low), len2)) = internal::decode(&bytes[i + len..])
                    && is_low_surrogate(low)
                {
                    let c = 0x1_0000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                    out.push(char::from_u32(c).unwrap_or(REPLACEMENT));
                    i += len + len2;
                    continue;
                }
                out.push(REPLACEMENT);
            }
            // Values above U+10FFFF and lone low surrogates fail here.
            Unit::Char(c) => out.push(char::from_u32(c).unwrap_or(REPLACEMENT)),
            // Emacs's raw-byte form is an overlong form in UTF-8.
            Unit::Raw(_) | Unit::Malformed | Unit::Stray(_) => out.push(REPLACEMENT),
        }
        i += len;
    }
    out
}

/// Normalise BYTES (an Emacs string's generalized UTF-8) in one scan.
pub fn normalize(bytes: &[u8]) -> Normalized {
    match std::str::from_utf8(bytes) {
        Ok(_) => Normalized::Unchanged,
        Err(e) => Normalized::Repaired(repair(bytes, e.valid_up_to())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repaired(bytes: &[u8]) -> String {
        match normalize(bytes) {
            Normalized::Repaired(s) => s,
            Normalized::Unchanged => panic!("expected a repair of {bytes:?}"),
        }
    }

    #[test]
    fn valid_text_is_unchanged() {
        assert_eq!(normalize(b""), Normalized::Unchanged);
        assert_eq!(normalize("plain é 漢 🎉".as_bytes()), Normalized::Unchanged);
    }

    #[test]
    fn raw_bytes_forming_utf8_become_characters() {
        // Raw bytes C3 A9 next to an invalid byte.
        assert_eq!(repaired(&[b'a', 0xFF, 0xC3, 0xA9]), "a\u{FFFD}é");
    }

    #[test]
    fn lone_bytes_and_truncations_become_replacements() {
        assert_eq!(repaired(&[0x80, b'x']), "\u{FFFD}x");
        assert_eq!(repaired(&[b'x', 0xE6, 0xBC]), "x\u{FFFD}\u{FFFD}");
        assert_eq!(repaired(&[0xC0, 0x80]), "\u{FFFD}", "Emacs raw-byte form");
    }

    #[test]
    fn surrogates_pair_up_or_are_replaced() {
        // U+D83D U+DE00 in generalized UTF-8 is U+1F600.
        let pair = [0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80];
        assert_eq!(repaired(&pair), "😀");
        assert_eq!(repaired(&[0xED, 0xA0, 0x80, b'z']), "\u{FFFD}z");
        assert_eq!(repaired(&[0xED, 0xB8, 0x80]), "\u{FFFD}");
    }

    #[test]
    fn out_of_range_values_are_one_replacement_each() {
        // #x110000 (four bytes) and #x3FFF7F (Emacs's five-byte form).
        assert_eq!(repaired(&[0xF4, 0x90, 0x80, 0x80, b'-']), "\u{FFFD}-");
        assert_eq!(repaired(&[0xF8, 0x8F, 0xBF, 0xBD, 0xBF]), "\u{FFFD}");
    }
}
