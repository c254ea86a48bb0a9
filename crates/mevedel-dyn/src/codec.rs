//! Render-data blocks (see `codec::block`) for Lisp.
//!
//! TEXT arguments are a string, or nil for the current buffer's
//! accessible portion. Positions in and out are string indices (from 0)
//! or buffer positions. VOUCHED is a list of `(START . END)` spans whose
//! provenance Lisp vouches for: an unbound block counts only inside one
//! of them.

use emacs::raw::emacs_value;
use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::codec::block::{self, Block, Check, Owner};
use mevedel_core::codec::reader::Scratch;

use crate::errors::OrSignal;
use crate::guard::guarded;
use crate::lisp_data::RawData;
use crate::text::{LispText, copy_exact, copy_text_or_buffer};

/// TEXT's blocks with positions counted from BASE (see
/// `block::scan_positions`).
fn blocks_in(text: &LispText, base: i64) -> Vec<(usize, Block)> {
    block::scan_positions(
        text.bytes(),
        text.one_byte_chars,
        usize::try_from(base).unwrap_or(0),
    )
}

fn owner_bytes(owner: Value<'_>) -> Result<Option<Vec<u8>>> {
    if owner.is_not_nil() {
        Ok(Some(owner.into_rust::<String>()?.into_bytes()))
    } else {
        Ok(None)
    }
}

fn spans(list: Value<'_>) -> Result<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    let mut rest = list;
    while rest.is_not_nil() {
        let span: Value = rest.car()?;
        let start: i64 = span.car()?;
        let end: i64 = span.cdr()?;
        out.push((
            usize::try_from(start).unwrap_or(0),
            usize::try_from(end).unwrap_or(0),
        ));
        rest = rest.cdr()?;
    }
    Ok(out)
}

/// TEXT and those of its blocks KEEP (`block::scrubbed` or
/// `block::authorised`) passes for OWNER and VOUCHED, in order.
fn blocks_kept(
    env: &Env,
    text: Value<'_>,
    owner: Value<'_>,
    vouched: Value<'_>,
    keep: Check,
) -> Result<(LispText, Vec<(usize, Block)>)> {
    let (text, base) = copy_text_or_buffer(env, text)?;
    let owner = owner_bytes(owner)?;
    let mut blocks = blocks_in(&text, base);
    block::keep(&mut blocks, owner.as_deref(), &spans(vouched)?, keep);
    Ok((text, blocks))
}

fn owner_value(data: &mut RawData<'_>, owner: &Owner) -> emacs_value {
    match owner {
        Owner::Bound(id) => data.string(id),
        Owner::Unbound => data.nil,
        Owner::Invalid => data.symbol(b"invalid"),
    }
}

fn int<'e>(env: &'e Env, n: usize) -> Result<Value<'e>> {
    (n as i64).into_lisp(env)
}

/// TEXT's blocks as one flat vector of START END OWNER, and with DECODE
/// PLIST too, leaving out blocks whose payload does not read.
fn flat_blocks<'e>(env: &'e Env, text: Value<'e>, decode: bool) -> Result<Value<'e>> {
    guarded(env, || {
        let (text, base) = copy_text_or_buffer(env, text)?;
        let blocks = blocks_in(&text, base);
        let mut data = RawData::new(env)?;
        let mut scratch = Scratch::default();
        let mut fields = Vec::with_capacity(blocks.len() * if decode { 4 } else { 3 });
        for (payload_at, b) in &blocks {
            let plist = if decode {
                let Ok(plist) = data.read(text.bytes(), *payload_at, &mut scratch) else {
                    continue;
                };
                Some(plist)
            } else {
                None
            };
            fields.push(data.position(b.start));
            fields.push(data.position(b.end));
            fields.push(owner_value(&mut data, &b.owner));
            fields.extend(plist);
        }
        let vector = data.vector_of(&fields);
        data.finish(vector)
    })
}

/// PRINTED bound to OWNER, made into text by MAKE (`block::encode` or
/// `block::payload`, which take the same arguments).
fn printed_block<'e>(
    env: &'e Env,
    printed: Value<'e>,
    owner: Value<'e>,
    make: fn(&[u8], Option<&str>) -> mevedel_core::Result<String>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let printed = copy_exact(env, printed)?;
        let owner = owner_bytes(owner)?.map(|b| String::from_utf8_lossy(&b).into_owned());
        let text = make(printed.bytes(), owner.as_deref()).or_signal(env)?;
        text.into_lisp(env)
    })
}

/// The block for PRINTED (a keyword plist printed by `prin1`) bound to
/// OWNER (a string, or nil for an unbound record).
#[defun(name = "codec-encode")]
fn codec_encode<'e>(env: &'e Env, printed: Value<'e>, owner: Value<'e>) -> Result<Value<'e>> {
    printed_block(env, printed, owner, block::encode)
}

/// The printed payload alone for PRINTED bound to OWNER (see `codec-encode`).
#[defun(name = "codec-payload")]
fn codec_payload<'e>(env: &'e Env, printed: Value<'e>, owner: Value<'e>) -> Result<Value<'e>> {
    printed_block(env, printed, owner, block::payload)
}

/// How many bytes TEXT has as the other codec functions receive it:
/// TEXT is copied into the module exactly as they copy it, and nothing
/// else is done (timing it measures the transfer alone).
#[defun(name = "codec-text-bytes")]
fn codec_text_bytes<'e>(env: &'e Env, text: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let (text, _) = copy_text_or_buffer(env, text)?;
        i64::try_from(text.bytes().len())
            .unwrap_or(i64::MAX)
            .into_lisp(env)
    })
}

/// Every well-formed block in TEXT, as one flat vector
/// `[START END OWNER START END OWNER ...]`; OWNER is the tool-use ID, nil
/// for an unbound block, or `invalid`. (One vector keeps the number of
/// module calls per block small.)
#[defun(name = "codec-scan")]
fn codec_scan<'e>(env: &'e Env, text: Value<'e>) -> Result<Value<'e>> {
    flat_blocks(env, text, false)
}

/// The `(START . END)` spans of the blocks a provider message must not
/// carry: those bound to OWNER, and unbound ones inside VOUCHED.
#[defun(name = "codec-spans")]
fn codec_spans<'e>(
    env: &'e Env,
    text: Value<'e>,
    owner: Value<'e>,
    vouched: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let (_, blocks) = blocks_kept(env, text, owner, vouched, block::scrubbed)?;
        let mut out = Vec::with_capacity(blocks.len());
        for (_, b) in blocks {
            out.push(env.cons(int(env, b.start)?, int(env, b.end)?)?);
        }
        env.list(&out[..])
    })
}

/// The authorised block of TEXT for OWNER as `(START END PLIST)`, or nil.
/// With OWNER a string, only blocks bound to it count; with OWNER nil,
/// only unbound blocks inside VOUCHED. The last such block wins (the
/// pipeline appends its block after the result text).
#[defun(name = "codec-extract")]
fn codec_extract<'e>(
    env: &'e Env,
    text: Value<'e>,
    owner: Value<'e>,
    vouched: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let (text, blocks) = blocks_kept(env, text, owner, vouched, block::authorised)?;
        let Some((payload_at, found)) = blocks.last() else {
            return ().into_lisp(env);
        };
        let mut data = RawData::new(env)?;
        let plist = data
            .read(text.bytes(), *payload_at, &mut Scratch::default())
            .or_else(|e| {
                crate::errors::signal(
                    env,
                    mevedel_core::Error::new(
                        mevedel_core::ErrorKind::Internal,
                        format!("Render-data decode: {e}"),
                    ),
                )
            })?;
        let start = data.position(found.start);
        let end = data.position(found.end);
        let result = data.list_of(&[start, end, plist]);
        data.finish(result)
    })
}

/// Every well-formed block of TEXT decoded, as one flat vector
/// `[START END OWNER PLIST START END OWNER PLIST ...]` (OWNER as in
/// `codec-scan`). Callers pair blocks with their tool calls and drop the
/// ones they may not trust.
#[defun(name = "codec-decode-all")]
fn codec_decode_all<'e>(env: &'e Env, text: Value<'e>) -> Result<Value<'e>> {
    flat_blocks(env, text, true)
}
