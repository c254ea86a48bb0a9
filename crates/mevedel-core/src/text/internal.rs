//! Emacs's internal text encoding: the one decoder (and encoder).
//!
//! Emacs keeps multibyte text as a superset of UTF-8 (`character.h`):
//!
//! - characters up to U+10FFFF are UTF-8, except that surrogates
//!   (U+D800..U+DFFF) are allowed in their three-byte form;
//! - characters U+110000..#x1FFFFF take four bytes (`F0`..`F7` leads)
//!   and #x200000..#x3FFF7F five (`F8` lead, second byte `88`..`8F`);
//! - a raw byte 0x80..0xFF is the character #x3FFF00 + byte
//!   (#x3FFF80..#x3FFFFF), written as the two bytes `C0 80`..`C1 BF`.
//!
//! Emacs never writes an overlong form, and nothing else. Bytes that
//! follow none of these shapes (a stray continuation byte, `F9`..`FF`,
//! a lead whose continuation bytes are missing or wrong) are what Emacs
//! reads as raw bytes when it turns bytes into a multibyte string.
//!
//! [`decode`] says what the bytes at a position are, keeping the length
//! of a complete but malformed sequence for callers that replace such a
//! sequence as a whole; [`char_at`] gives the character Emacs reads there.

/// The first character code of the raw bytes, less 0x80: raw byte B is
/// the character `RAW_BYTE_BASE + B`.
pub const RAW_BYTE_BASE: u32 = 0x3F_FF00;

/// The largest character with a five-byte form.
const MAX_5_BYTE_CHAR: u32 = 0x3F_FF7F;

/// Whether B continues a sequence (`80`..`BF`). Written as a signed
/// comparison so loops over it vectorise.
pub const fn is_continuation(b: u8) -> bool {
    (b as i8) < -0x40
}

/// What a byte starts, by its value alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lead {
    /// `00`..`7F`: a character by itself.
    Ascii,
    /// `80`..`BF`: starts nothing.
    Continuation,
    /// `C0`, `C1`: the two-byte form of a raw byte.
    RawByte,
    /// `C2`..`DF`.
    Two,
    /// `E0`..`EF`.
    Three,
    /// `F0`..`F7`.
    Four,
    /// `F8`.
    Five,
    /// `F9`..`FF`: starts nothing.
    Invalid,
}

impl Lead {
    pub const fn of(b: u8) -> Lead {
        match b {
            0x00..=0x7F => Lead::Ascii,
            0x80..=0xBF => Lead::Continuation,
            0xC0 | 0xC1 => Lead::RawByte,
            0xC2..=0xDF => Lead::Two,
            0xE0..=0xEF => Lead::Three,
            0xF0..=0xF7 => Lead::Four,
            0xF8 => Lead::Five,
            0xF9..=0xFF => Lead::Invalid,
        }
    }

    /// Bytes in the sequence this lead starts; 1 when it starts none.
    pub const fn seq_len(self) -> usize {
        match self {
            Lead::Ascii | Lead::Continuation | Lead::Invalid => 1,
            Lead::RawByte | Lead::Two => 2,
            Lead::Three => 3,
            Lead::Four => 4,
            Lead::Five => 5,
        }
    }
}

/// What the bytes at a position are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A character in the form Emacs writes it: ASCII, Unicode
    /// (surrogates included), or an extension up to #x3FFF7F.
    Char(u32),
    /// The two-byte form of this raw byte (0x80..=0xFF).
    Raw(u8),
    /// A lead and all its continuation bytes, but a value Emacs never
    /// writes that way: an overlong form, or a five-byte form above
    /// #x3FFF7F. Emacs would read each of its bytes as a raw byte.
    Malformed,
    /// A byte starting no complete sequence (always 0x80 or above).
    Stray(u8),
}

/// The smallest value each sequence length may hold (index: length).
const MIN_VALUE: [u32; 6] = [0, 0, 0x80, 0x800, 0x1_0000, 0x20_0000];

/// The unit at the start of BYTES and how many bytes it spans (1 for a
/// stray byte), or `None` when BYTES is empty.
#[inline]
pub fn decode(bytes: &[u8]) -> Option<(Unit, usize)> {
    let &lead = bytes.first()?;
    let class = Lead::of(lead);
    let len = class.seq_len();
    if len == 1 {
        let unit = match class {
            Lead::Ascii => Unit::Char(u32::from(lead)),
            _ => Unit::Stray(lead),
        };
        return Some((unit, 1));
    }
    match bytes.get(1..len) {
        Some(rest) if rest.iter().all(|&b| is_continuation(b)) => {
            let value = rest
                .iter()
                .fold(u32::from(lead) & (0x7F >> len), |acc, &b| {
                    (acc << 6) | u32::from(b & 0x3F)
                });
            let unit = if class == Lead::RawByte {
                // VALUE is 0..=0x7F.
                Unit::Raw((value | 0x80) as u8)
            } else if value < MIN_VALUE[len] || value > MAX_5_BYTE_CHAR {
                Unit::Malformed
            } else {
                Unit::Char(value)
            };
            Some((unit, len))
        }
        _ => Some((Unit::Stray(lead), 1)),
    }
}

/// The character Emacs reads at the start of BYTES and its length in
/// bytes, or `None` when BYTES is empty. A raw byte, in its two-byte
/// form or stray, is `RAW_BYTE_BASE + byte`; a malformed sequence is
/// read byte by byte, as Emacs does.
#[inline]
pub fn char_at(bytes: &[u8]) -> Option<(u32, usize)> {
    Some(match decode(bytes)? {
        (Unit::Char(c), len) => (c, len),
        (Unit::Raw(b), len) => (RAW_BYTE_BASE + u32::from(b), len),
        (Unit::Stray(b), _) => (RAW_BYTE_BASE + u32::from(b), 1),
        (Unit::Malformed, _) => (RAW_BYTE_BASE + u32::from(bytes[0]), 1),
    })
}

/// Bytes of the character Emacs reads at the start of BYTES (0 when
/// BYTES is empty).
#[inline]
pub fn char_len(bytes: &[u8]) -> usize {
    match bytes.first() {
        Some(&b) if b < 0x80 => 1,
        _ => char_at(bytes).map_or(0, |(_, len)| len),
    }
}

/// Append character CODE (up to #x3FFFFF, raw bytes included) to OUT in
/// Emacs's internal form; a larger code is ignored.
pub fn push_char(out: &mut Vec<u8>, code: u32) {
    let cont = |shift: u32| 0x80 | ((code >> shift) & 0x3F) as u8;
    match code {
        0..=0x7F => out.push(code as u8),
        0x80..=0x7FF => out.extend_from_slice(&[0xC0 | (code >> 6) as u8, cont(0)]),
        0x800..=0xFFFF => out.extend_from_slice(&[0xE0 | (code >> 12) as u8, cont(6), cont(0)]),
        0x1_0000..=0x1F_FFFF => {
            out.extend_from_slice(&[0xF0 | (code >> 18) as u8, cont(12), cont(6), cont(0)]);
        }
        0x20_0000..=MAX_5_BYTE_CHAR => {
            out.extend_from_slice(&[0xF8, cont(18), cont(12), cont(6), cont(0)]);
        }
        0x3F_FF80..=0x3F_FFFF => push_raw(out, (code - RAW_BYTE_BASE) as u8),
        _ => {}
    }
}

/// Append the two-byte form of raw byte B (0x80..=0xFF) to OUT.
pub fn push_raw(out: &mut Vec<u8>, b: u8) {
    out.push(0xC0 | ((b >> 6) & 1));
    out.push(0x80 | (b & 0x3F));
}

#[cfg(test)]
mod tests;
