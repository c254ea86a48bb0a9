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
//! The module API has no access to buffer text. [`copy_current_buffer`]
//! reads the current buffer's accessible portion in chunks of
//! [`CHUNK`] characters (`buffer-substring-no-properties`), appending each
//! to the same Rust buffer: the text is copied once, and Lisp only ever
//! holds one chunk.
//!
//! The Rust side keeps its copy buffer between calls (up to
//! [`KEEP_BYTES`]), so a repeated scan of a large transcript neither
//! zeroes nor faults in fresh memory.

use std::cell::RefCell;

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::error::{Error, ErrorKind};
use mevedel_core::text::{self, Normalized, keep};

use crate::convert;
use crate::errors::{self, OrSignal};
use crate::guard::guarded;

fn internal(message: &str) -> Error {
    Error::new(ErrorKind::Internal, message)
}

emacs::use_functions! {
    string_bytes => "string-bytes"
    length
    multibyte_string_p => "multibyte-string-p"
    encode_coding_string => "encode-coding-string"
    decode_coding_string => "decode-coding-string"
    point_min => "point-min"
    point_max => "point-max"
    buffer_substring_no_properties => "buffer-substring-no-properties"
}

emacs::use_symbols! {
    mevedel_core__mask_non_unicode => "mevedel-core--mask-non-unicode"
    utf_8_emacs => "utf-8-emacs"
    latin_1 => "latin-1"
}

/// Characters per chunk when a buffer is copied.
const CHUNK: i64 = 1 << 20;

/// Largest copy buffer kept for the next call.
const KEEP_BYTES: usize = 256 << 20;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// An Emacs string's (or buffer's) text as bytes (generalized UTF-8).
pub(super) struct LispText {
    /// Backing store; only `..len` is text. Its length is the high-water
    /// mark, so growing never zeroes memory twice.
    buffer: Vec<u8>,
    len: usize,
    /// Every character is one byte, so byte offsets are positions.
    pub one_byte_chars: bool,
}

impl LispText {
    fn new() -> Self {
        LispText {
            buffer: SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut())),
            len: 0,
            one_byte_chars: true,
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buffer[..self.len]
    }

    /// Append STRING's bytes with one `copy_string_contents`; false (and
    /// nothing appended) when Emacs refuses them as non-Unicode.
    fn append(&mut self, env: &Env, string: Value<'_>) -> Result<bool> {
        let nbytes = usize_of(env.call(string_bytes, [string])?)?;
        let need = self.len + nbytes + 1;
        if self.buffer.len() < need {
            self.buffer.resize(need, 0);
        }
        match string.copy_string_contents(&mut self.buffer[self.len..need]) {
            Ok(copied) => {
                self.len += copied.len();
                Ok(true)
            }
            // The module layer already cleared the pending signal.
            Err(_) => Ok(false),
        }
    }

    /// Append STRING exactly, masking what Emacs refuses (see the module docs).
    fn append_exact(&mut self, env: &Env, string: Value<'_>) -> Result<()> {
        let start = self.len;
        let chars = usize_of(env.call(length, [string])?)?;
        let ok = if self.append(env, string)? {
            true
        } else {
            let masked = env.call(mevedel_core__mask_non_unicode, [string])?;
            self.append(env, masked)?
        };
        if !ok {
            return errors::signal(env, internal("Masked text is still not copyable"));
        }
        if self.len - start != chars {
            self.one_byte_chars = false;
        }
        Ok(())
    }
}

impl Drop for LispText {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.buffer);
        if buffer.len() <= KEEP_BYTES {
            SCRATCH.with(|s| {
                let mut kept = s.borrow_mut();
                if kept.len() < buffer.len() {
                    *kept = buffer;
                }
            });
        }
    }
}

fn usize_of(value: Value<'_>) -> Result<usize> {
    let n: i64 = value.into_rust()?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// STRING's text with character positions intact (see the module docs).
pub(super) fn copy_exact(env: &Env, string: Value<'_>) -> Result<LispText> {
    let mut text = LispText::new();
    text.append_exact(env, string)?;
    Ok(text)
}

/// The current buffer's accessible text, copied chunk by chunk, and the
/// position of its start (`point-min`).
pub(super) fn copy_current_buffer(env: &Env) -> Result<(LispText, i64)> {
    let start: i64 = env.call(point_min, [])?.into_rust()?;
    let end: i64 = env.call(point_max, [])?.into_rust()?;
    let mut text = LispText::new();
    let mut pos = start;
    while pos < end {
        let next = (pos + CHUNK).min(end);
        let chunk = env.call(
            buffer_substring_no_properties,
            (pos.into_lisp(env)?, next.into_lisp(env)?),
        )?;
        text.append_exact(env, chunk)?;
        pos = next;
    }
    Ok((text, start))
}

/// TEXT (a string) or, when nil, the current buffer, with the position
/// that offset 0 stands for (0 for a string, `point-min` for a buffer).
pub(super) fn copy_text_or_buffer(env: &Env, text: Value<'_>) -> Result<(LispText, i64)> {
    if text.is_not_nil() {
        Ok((copy_exact(env, text)?, 0))
    } else {
        copy_current_buffer(env)
    }
}

/// STRING's actual bytes for repair: `utf-8-emacs` with raw bytes as
/// single bytes (see the module docs).
fn copy_for_repair(env: &Env, string: Value<'_>) -> Result<Vec<u8>> {
    let t = true.into_lisp(env)?;
    let encoded = env.call(encode_coding_string, (string, utf_8_emacs, t))?;
    let latin = env.call(decode_coding_string, (encoded, latin_1, t))?;
    let mut copied = LispText::new();
    if !copied.append(env, latin)? {
        return errors::signal(env, internal("Latin-1 text is not copyable"));
    }
    let utf8 = copied.bytes();
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
        let mut copied = LispText::new();
        if copied.append(env, string)? {
            return match text::normalize(copied.bytes()) {
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
/// `:kept` is the block of kept failure lines (the installed patterns,
/// `text::keep`), or nil.
#[defun(name = "text-preview")]
fn text_preview<'e>(env: &'e Env, string: Value<'e>, budget: i64) -> Result<Value<'e>> {
    guarded(env, || {
        let copied = copy_exact(env, string)?;
        let repaired;
        let text = match std::str::from_utf8(copied.bytes()) {
            Ok(text) => text,
            Err(_) => {
                repaired = match text::normalize(copied.bytes()) {
                    Normalized::Repaired(text) => text,
                    Normalized::Unchanged => String::new(),
                };
                &repaired
            }
        };
        let budget = usize::try_from(budget).unwrap_or(0);
        let patterns = keep::current();
        let Some(p) = text::head_tail(text, budget, patterns.as_deref()) else {
            return ().into_lisp(env);
        };
        let mut plist = Vec::with_capacity(16);
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
        plist.push(env.intern(":kept")?);
        plist.push(match p.kept.matched {
            0 => ().into_lisp(env)?,
            _ => p.kept.render().into_lisp(env)?,
        });
        env.list(&plist[..])
    })
}

/// Use PATTERNS (a list of Rust regexps) for the failure lines previews
/// keep; nil turns them off. An invalid pattern signals
/// `mevedel-core-search-error` naming it and changes nothing.
#[defun(name = "text-failure-patterns")]
fn text_failure_patterns<'e>(env: &'e Env, patterns: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let sources = convert::strings(patterns)?;
        keep::install(sources).or_signal(env)?;
        ().into_lisp(env)
    })
}
