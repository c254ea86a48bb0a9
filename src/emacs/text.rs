//! Text across the seam, and the text area's defuns.
//!
//! # Getting an Emacs string's text into Rust
//!
//! The module API copies strings out only as UTF-8
//! (`copy_string_contents`), and refuses strings holding raw bytes
//! (`#x3FFF80`..`#x3FFFFF`), characters above U+10FFFF, or non-ASCII
//! bytes of a unibyte string. Surrogates pass, in their three-byte
//! generalized form. So:
//!
//! - [`copy_exact`] asks for `string-bytes` (constant time) and copies
//!   once into a buffer of that size: for valid text that is the only
//!   copy, and Emacs's own check is the only scan before ours. When Emacs
//!   refuses, Lisp's `mevedel-core--mask-non-unicode` replaces each
//!   offending character with U+FFFD (one for one, so every character
//!   position stays the same) and the masked copy is used. Positions are
//!   what the codec reports, and encoded payloads never contain those
//!   characters literally (the printer escapes them), so masking loses
//!   nothing the codec needs.
//! - [`copy_for_repair`] is for normalisation, which must see the actual
//!   bytes: the string is encoded as `utf-8-emacs` (raw bytes become
//!   single bytes), decoded as Latin-1 (so every byte is a character the
//!   module can copy), copied, and turned back into the bytes.
//!
//! Buffers cross as one `buffer-substring-no-properties` string; the
//! module API has no access to buffer text.

use emacs::{Env, IntoLisp, Result, Value, defun};

use super::errors;
use super::guard::guarded;
use crate::error::{Error, ErrorKind};
use crate::text::{self, Normalized};

fn internal(message: &str) -> Error {
    Error::new(ErrorKind::Internal, message)
}

emacs::use_functions! {
    string_bytes => "string-bytes"
    length
    multibyte_string_p => "multibyte-string-p"
    encode_coding_string => "encode-coding-string"
    decode_coding_string => "decode-coding-string"
    concat
    make_char_string => "string"
}

emacs::use_symbols! {
    mevedel_core__mask_non_unicode => "mevedel-core--mask-non-unicode"
    utf_8_emacs => "utf-8-emacs"
    latin_1 => "latin-1"
}

/// An Emacs string's text as bytes (generalized UTF-8).
pub(super) struct LispText {
    pub bytes: Vec<u8>,
    /// Every character is one byte, so byte offsets are positions.
    pub one_byte_chars: bool,
}

fn usize_of(value: Value<'_>) -> Result<usize> {
    let n: i64 = value.into_rust()?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Copy STRING's bytes in one `copy_string_contents`, or `None` when
/// Emacs refuses them as non-Unicode.
fn try_copy(env: &Env, string: Value<'_>) -> Result<Option<Vec<u8>>> {
    let nbytes = usize_of(env.call(string_bytes, [string])?)?;
    let mut buffer = vec![0u8; nbytes + 1];
    match string.copy_string_contents(&mut buffer) {
        Ok(copied) => {
            let len = copied.len();
            buffer.truncate(len);
            Ok(Some(buffer))
        }
        // The module layer already cleared the pending signal.
        Err(_) => Ok(None),
    }
}

/// STRING's text with character positions intact (see the module docs).
pub(super) fn copy_exact(env: &Env, string: Value<'_>) -> Result<LispText> {
    let chars = usize_of(env.call(length, [string])?)?;
    if let Some(bytes) = try_copy(env, string)? {
        return Ok(LispText {
            one_byte_chars: bytes.len() == chars,
            bytes,
        });
    }
    let masked = env.call(mevedel_core__mask_non_unicode, [string])?;
    match try_copy(env, masked)? {
        Some(bytes) => Ok(LispText {
            one_byte_chars: bytes.len() == chars,
            bytes,
        }),
        None => errors::signal(env, internal("Masked text is still not copyable")),
    }
}

/// STRING's actual bytes for repair: `utf-8-emacs` with raw bytes as
/// single bytes (see the module docs).
fn copy_for_repair(env: &Env, string: Value<'_>) -> Result<Vec<u8>> {
    let t = true.into_lisp(env)?;
    let encoded = env.call(encode_coding_string, (string, utf_8_emacs, t))?;
    let latin = env.call(decode_coding_string, (encoded, latin_1, t))?;
    let Some(utf8) = try_copy(env, latin)? else {
        return errors::signal(env, internal("Latin-1 text is not copyable"));
    };
    // Every character is U+0000..U+00FF: one or two UTF-8 bytes.
    let mut bytes = Vec::with_capacity(utf8.len());
    let mut i = 0;
    while i < utf8.len() {
        let b = utf8[i];
        if b < 0x80 {
            bytes.push(b);
            i += 1;
        } else {
            let next = utf8.get(i + 1).copied().unwrap_or(0x80);
            bytes.push(((b & 0x03) << 6) | (next & 0x3F));
            i += 2;
        }
    }
    Ok(bytes)
}

/// A Lisp string from BYTES in Emacs's internal form (generalized UTF-8,
/// raw bytes as `C0`/`C1` pairs). Valid UTF-8 takes one `make_string`.
pub(super) fn make_string<'e>(env: &'e Env, bytes: &[u8]) -> Result<Value<'e>> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return text.into_lisp(env);
    }
    // Valid runs as strings, anything else one character at a time.
    let mut pieces: Vec<Value<'e>> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match std::str::from_utf8(&bytes[i..]) {
            Ok(rest) => {
                pieces.push(rest.into_lisp(env)?);
                break;
            }
            Err(e) if e.valid_up_to() > 0 => {
                let end = i + e.valid_up_to();
                let run = std::str::from_utf8(&bytes[i..end]).unwrap_or_default();
                pieces.push(run.into_lisp(env)?);
                i = end;
            }
            Err(_) => {
                let (code, len) = internal_char(&bytes[i..]);
                pieces.push(env.call(make_char_string, [i64::from(code).into_lisp(env)?])?);
                i += len;
            }
        }
    }
    env.call(concat, &pieces[..])
}

/// The Emacs character code at the start of BYTES (not valid UTF-8) and
/// its length: raw-byte pairs, surrogates, extended forms, else the byte
/// itself as a raw byte.
fn internal_char(bytes: &[u8]) -> (u32, usize) {
    let lead = bytes[0];
    let len = match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        0xF8 => 5,
        _ => 1,
    };
    if len == 1 || bytes.len() < len || !bytes[1..len].iter().all(|b| (b & 0xC0) == 0x80) {
        return (0x3F_FF00 + u32::from(lead.max(0x80)), 1);
    }
    let init = u32::from(lead) & (0x7F >> len);
    let code = bytes[1..len]
        .iter()
        .fold(init, |acc, &b| (acc << 6) | u32::from(b & 0x3F));
    if lead == 0xC0 || lead == 0xC1 {
        return (0x3F_FF00 + (code | 0x80), 2);
    }
    (code, len)
}

/// STRING normalised to valid Unicode text: STRING itself (with its text
/// properties) when it already is, else a repaired copy in which raw
/// bytes forming UTF-8 are decoded and every other raw byte, surrogate
/// or out-of-range character is U+FFFD.
#[defun(name = "text-normalize")]
fn text_normalize<'e>(env: &'e Env, string: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let multibyte = env.call(multibyte_string_p, [string])?.is_not_nil();
        let chars = usize_of(env.call(length, [string])?)?;
        let nbytes = usize_of(env.call(string_bytes, [string])?)?;
        if multibyte && chars == nbytes {
            // Pure ASCII.
            return Ok(string);
        }
        if let Some(bytes) = try_copy(env, string)? {
            return match text::normalize(&bytes) {
                Normalized::Unchanged => Ok(string),
                Normalized::Repaired(text) => text.into_lisp(env),
            };
        }
        let bytes = copy_for_repair(env, string)?;
        match text::normalize(&bytes) {
            Normalized::Repaired(text) => text.into_lisp(env),
            // Raw bytes that were all valid UTF-8 together.
            Normalized::Unchanged => String::from_utf8_lossy(&bytes).into_lisp(env),
        }
    })
}

/// A head-and-tail preview of STRING within BUDGET characters, or nil
/// when STRING fits. The result is a plist of character counts and line
/// numbers (see `text::Preview`); Lisp cuts the pieces with `substring`.
#[defun(name = "text-preview")]
fn text_preview<'e>(env: &'e Env, string: Value<'e>, budget: i64) -> Result<Value<'e>> {
    guarded(env, || {
        let copied = copy_exact(env, string)?;
        let repaired;
        let text = match std::str::from_utf8(&copied.bytes) {
            Ok(text) => text,
            Err(_) => {
                repaired = match text::normalize(&copied.bytes) {
                    Normalized::Repaired(text) => text,
                    Normalized::Unchanged => String::new(),
                };
                &repaired
            }
        };
        let budget = usize::try_from(budget).unwrap_or(0);
        let Some(p) = text::head_tail(text, budget) else {
            return ().into_lisp(env);
        };
        let mut plist = Vec::with_capacity(14);
        for (key, value) in [
            (":total-chars", p.total_chars),
            (":head-chars", p.head_chars),
            (":tail-chars", p.tail_chars),
            (":omitted-chars", p.omitted_chars),
            (":omitted-first-line", p.omitted_first_line),
            (":omitted-last-line", p.omitted_last_line),
            (":total-lines", p.total_lines),
        ] {
            plist.push(env.intern(key)?);
            plist.push((value as i64).into_lisp(env)?);
        }
        env.list(&plist[..])
    })
}
