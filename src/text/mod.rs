//! Text utilities: Emacs's internal encoding, head/tail previews (with
//! the failure lines they keep from the middle, [`keep`]),
//! Unicode normalisation, and positions in Emacs's generalized UTF-8.
//!
//! Text reaches Rust as the bytes of an Emacs string (see
//! `src/emacs/text.rs`): UTF-8, except that surrogate code points may
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
