//! Render-data blocks: finding, decoding, authorising and encoding them.
//!
//! A block is
//!
//! ```text
//! \n<!-- mevedel-render-data -->\n(:tool-use-id "ID" :key value ...)\n<!-- /mevedel-render-data -->\n
//! ```
//!
//! Scanning looks for opening delimiters only (one SIMD substring search
//! over the text), reads exactly one complete object after each with the
//! safe reader (a quick path handles the common plain plist and gives up
//! to the full reader on anything else), and then requires only
//! whitespace before the closing delimiter. Delimiter-shaped text inside the object (in a string, say)
//! is payload, and the scan continues after the block's end. A candidate
//! whose payload is not one proper keyword plist, has trailing data, or
//! is unreadable is not a block: it stays ordinary text, and the scan
//! continues just after its opening delimiter.
//!
//! Texts of [`PARALLEL_MIN`] bytes or more are scanned by up to
//! four threads, each from the start of its own range; the
//! parts are joined into exactly the single-threaded answer (see
//! [`join_parts`]), which a property test holds them to.
//!
//! A block is bound to a tool call by its `:tool-use-id` entry. Bound
//! blocks count only for that ID; unbound blocks count only where Lisp
//! vouches for the span's provenance (a text property Rust cannot see).

use std::ops::Range;

use super::print::print;
use std::vec::Drain;

use super::reader::{
    self, Build, MAX_DEPTH, ReadError, Scratch, Sexp, Tree, read_one, read_one_reusing,
    skip_whitespace,
};
use crate::error::{Error, ErrorKind, Result};

/// The opening delimiter (a block's text starts with a newline before it).
pub const OPEN: &[u8] = b"<!-- mevedel-render-data -->";
/// The closing delimiter (a newline follows it in an encoded block).
pub const CLOSE: &[u8] = b"<!-- /mevedel-render-data -->";
/// The plist key that binds a block to its tool call.
pub const OWNER_KEY: &str = ":tool-use-id";

/// Whom a block belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// No `:tool-use-id`: a non-tool record, valid only with provenance.
    Unbound,
    /// The tool-use ID (Emacs's internal bytes).
    Bound(Vec<u8>),
    /// `:tool-use-id` is present but not a string: never authorised.
    Invalid,
}

/// A well-formed block in some text; offsets are bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Start of the block, including the newline before the opening
    /// delimiter when there is one.
    pub start: usize,
    /// End of the block, including the newline after the closing
    /// delimiter when there is one.
    pub end: usize,
    /// The printed plist.
    pub payload: Range<usize>,
    pub owner: Owner,
}

/// What the scan needs to know about each object: nothing is built but
/// the shape of the outermost list.
enum Shape {
    Keyword {
        owner_key: bool,
    },
    Str(Range<usize>),
    Nil,
    Other,
    /// The outermost list, checked: its owner, or why it is no plist.
    Plist(std::result::Result<ScanOwner, &'static str>),
}

struct Shapes;

impl Build for Shapes {
    type Node = Shape;
    fn int(&mut self, _: i64) -> Shape {
        Shape::Other
    }
    fn big_int(&mut self, _: String) -> Shape {
        Shape::Other
    }
    fn float(&mut self, _: f64) -> Shape {
        Shape::Other
    }
    fn string(&mut self, _: &[u8], range: Range<usize>) -> Shape {
        Shape::Str(range)
    }
    fn symbol(&mut self, input: &[u8], range: Range<usize>) -> Shape {
        let token = &input[range];
        let name;
        let name = if token.contains(&b'\\') {
            name = reader::unescape_symbol(token);
            &name[..]
        } else {
            token
        };
        match name {
            b"nil" => Shape::Nil,
            [b':', ..] => Shape::Keyword {
                owner_key: name == OWNER_KEY.as_bytes(),
            },
            _ => Shape::Other,
        }
    }
    fn named(&mut self, _: &'static str) -> Shape {
        Shape::Other
    }
    fn list(&mut self, items: Drain<'_, Shape>, tail: Option<Shape>, depth: usize) -> Shape {
        if depth > 0 {
            return if items.len() == 0 && tail.is_none() {
                Shape::Nil
            } else {
                Shape::Other
            };
        }
        Shape::Plist(plist_owner(items.as_slice(), tail.is_some()))
    }
    fn vector(&mut self, _: Drain<'_, Shape>) -> Shape {
        Shape::Other
    }
}

/// A block's owner as the scan first sees it: the ID as the byte range
/// of its printed string, unescaped only once the block is complete.
#[derive(Debug, PartialEq)]
enum ScanOwner {
    Unbound,
    Bound(Range<usize>),
    Invalid,
}

/// The owner of a top-level list of shapes, or why it is not a plist.
fn plist_owner(items: &[Shape], dotted: bool) -> std::result::Result<ScanOwner, &'static str> {
    if dotted {
        return Err("a dotted list");
    }
    if !items.len().is_multiple_of(2) {
        return Err("an odd number of elements");
    }
    let mut owner = None;
    for pair in items.chunks_exact(2) {
        let Shape::Keyword { owner_key } = pair[0] else {
            return Err("a key that is not a keyword");
        };
        if owner_key && owner.is_none() {
            owner = Some(match &pair[1] {
                Shape::Str(range) => ScanOwner::Bound(range.clone()),
                _ => ScanOwner::Invalid,
            });
        }
    }
    Ok(owner.unwrap_or(ScanOwner::Unbound))
}

/// Texts at least this long are scanned by several threads: below it,
/// starting a thread costs more than it saves.
pub const PARALLEL_MIN: usize = 2 << 20;

/// Most threads a scan uses (the search is bound by memory bandwidth).
const MAX_THREADS: usize = 4;

/// Find every well-formed block in TEXT, in order.
pub fn scan(text: &[u8]) -> Vec<Block> {
    let parts = if text.len() >= PARALLEL_MIN {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS))
    } else {
        1
    };
    scan_in_parts(text, parts)
}

/// [`scan`] with TEXT cut into PARTS equal ranges of candidates, each
/// scanned by its own thread, and the results joined so that they are
/// exactly the single-threaded answer (see [`join_parts`]).
pub(super) fn scan_in_parts(text: &[u8], parts: usize) -> Vec<Block> {
    let parts = parts.clamp(1, text.len().max(1));
    let bounds: Vec<usize> = (0..parts)
        .map(|i| text.len() / parts * i)
        .chain([text.len()])
        .collect();
    if parts == 1 {
        return scan_part(text, 0, text.len()).blocks;
    }
    let done: Vec<Part> = std::thread::scope(|s| {
        let workers: Vec<_> = bounds[1..]
            .windows(2)
            .map(|w| {
                let (from, limit) = (w[0], w[1]);
                std::thread::Builder::new()
                    .spawn_scoped(s, move || scan_part(text, from, limit))
                    .map_err(|_| (from, limit))
            })
            .collect();
        let mut done = vec![scan_part(text, 0, bounds[1])];
        for worker in workers {
            done.push(match worker {
                Ok(handle) => match handle.join() {
                    Ok(part) => part,
                    Err(panic) => std::panic::resume_unwind(panic),
                },
                // No thread to be had: this thread scans the part.
                Err((from, limit)) => scan_part(text, from, limit),
            });
        }
        done
    });
    join_parts(text, done)
}

/// The blocks one scan found whose opening delimiters start in
/// `from..limit`, scanning from FROM.
struct Part {
    from: usize,
    limit: usize,
    blocks: Vec<Block>,
    /// Where the scan stood after the last candidate before LIMIT.
    end: usize,
}

/// Scan for blocks whose opening delimiter starts in `from..limit` (a
/// block itself may run past LIMIT), as [`scan`] would from FROM.
fn scan_part(text: &[u8], from: usize, limit: usize) -> Part {
    let finder = memchr::memmem::Finder::new(OPEN);
    // A delimiter starting before LIMIT may end after it.
    let search_end = (limit + OPEN.len() - 1).min(text.len());
    let mut scratch = Scratch::default();
    let mut blocks = Vec::new();
    let mut pos = from;
    while pos < search_end {
        let Some(found) = finder.find(&text[pos..search_end]) else {
            break;
        };
        pos = step(text, pos + found, pos, &mut scratch, &mut blocks);
    }
    Part {
        from,
        limit,
        blocks,
        end: pos,
    }
}

/// Try the candidate at OPEN_AT with the scan at POS: push the block it
/// opens, if any, and return where the scan stands next.
fn step(
    text: &[u8],
    open_at: usize,
    pos: usize,
    scratch: &mut Scratch<Shape>,
    blocks: &mut Vec<Block>,
) -> usize {
    match block_at(text, open_at, pos, scratch) {
        Some(block) => {
            let end = block.end;
            blocks.push(block);
            end
        }
        None => open_at + OPEN.len(),
    }
}

/// Join the PARTS of a scan into the single-threaded answer.
///
/// The scan's state is only its position: from the same position it
/// finds the same blocks. The first part starts where a single scan
/// does. Each later part started at its own range's start, which the
/// single scan may reach with a different position (a block of the
/// previous range running into this one, say). So the single scan is
/// continued here, candidate by candidate, until its position is one the
/// part also stood at (its start, or the end of one of its blocks); from
/// there the part's remaining blocks are the single scan's. When that
/// never happens, the continuation has done the part's work itself.
fn join_parts(text: &[u8], parts: Vec<Part>) -> Vec<Block> {
    let finder = memchr::memmem::Finder::new(OPEN);
    let mut scratch = Scratch::default();
    let mut parts = parts.into_iter();
    let Some(first) = parts.next() else {
        return Vec::new();
    };
    let mut blocks = first.blocks;
    let mut pos = first.end;
    for mut part in parts {
        let search_end = (part.limit + OPEN.len() - 1).min(text.len());
        loop {
            let met = if pos == part.from {
                Some(0)
            } else {
                part.blocks
                    .binary_search_by_key(&pos, |b| b.end)
                    .ok()
                    .map(|i| i + 1)
            };
            if let Some(next) = met {
                blocks.extend(part.blocks.drain(next..));
                pos = part.end;
                break;
            }
            let Some(found) = (pos < search_end)
                .then(|| finder.find(&text[pos..search_end]))
                .flatten()
            else {
                break;
            };
            pos = step(text, pos + found, pos, &mut scratch, &mut blocks);
        }
    }
    blocks
}

/// The block whose opening delimiter is at OPEN_AT, if it is one. The
/// block may not start before FLOOR (the end of the previous block).
fn block_at(
    text: &[u8],
    open_at: usize,
    floor: usize,
    scratch: &mut Scratch<Shape>,
) -> Option<Block> {
    let payload_start = skip_whitespace(text, open_at + OPEN.len());
    let (owner, payload_end) =
        quick_plist(text, payload_start).or_else(|| read_plist(text, payload_start, scratch))?;
    let owner = match owner {
        ScanOwner::Bound(range) => Owner::Bound(reader::unescape_string(&text[range])),
        ScanOwner::Unbound => Owner::Unbound,
        ScanOwner::Invalid => Owner::Invalid,
    };
    let close_at = skip_whitespace(text, payload_end);
    if !text[close_at..].starts_with(CLOSE) {
        return None;
    }
    let mut end = close_at + CLOSE.len();
    if text.get(end) == Some(&b'\n') {
        end += 1;
    }
    let start = if open_at > floor && text[open_at - 1] == b'\n' {
        open_at - 1
    } else {
        open_at
    };
    Some(Block {
        start,
        end,
        payload: payload_start..payload_end,
        owner,
    })
}

/// The owner and end of the keyword plist printed at START, read by the
/// full reader; `None` when it is unreadable or no keyword plist.
fn read_plist(
    text: &[u8],
    start: usize,
    scratch: &mut Scratch<Shape>,
) -> Option<(ScanOwner, usize)> {
    match read_one_reusing(text, start, &mut Shapes, scratch).ok()? {
        (Shape::Plist(Ok(owner)), end) => Some((owner, end)),
        (Shape::Nil, end) => Some((ScanOwner::Unbound, end)),
        _ => None,
    }
}

/// [`read_plist`] for the common case, without the reader's machinery:
/// a list whose keys are plain keywords, whose strings' escapes check
/// out, and whose other tokens are plain atoms and nested lists. It
/// gives up (`None`) on anything else (quotes, vectors, `#` syntax,
/// non-ASCII or escaped atoms, dots, comments, odd length), and the full
/// reader decides; where it answers, it answers as the reader would (a
/// property test holds it to that).
fn quick_plist(text: &[u8], start: usize) -> Option<(ScanOwner, usize)> {
    if text.get(start) != Some(&b'(') {
        return None;
    }
    let mut pos = start + 1;
    let mut depth = 1;
    let mut items = 0usize;
    let mut owner = None;
    let mut owner_value_next = false;
    loop {
        let b = *text.get(pos)?;
        if b <= b' ' {
            pos += 1;
            continue;
        }
        if depth == 1 && b != b')' {
            items += 1;
            if !items.is_multiple_of(2) {
                if b != b':' {
                    return None;
                }
                let end = reader::plain_atom_end(text, pos)?;
                owner_value_next = owner.is_none() && &text[pos..end] == OWNER_KEY.as_bytes();
                pos = end;
                continue;
            }
            if std::mem::take(&mut owner_value_next) {
                if b != b'"' {
                    owner = Some(ScanOwner::Invalid);
                } else {
                    let end = reader::string_end(text, pos + 1)?;
                    owner = Some(ScanOwner::Bound(pos + 1..end - 1));
                    pos = end;
                    continue;
                }
            }
        }
        match b {
            b'(' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                depth += 1;
                pos += 1;
            }
            b')' => {
                depth -= 1;
                pos += 1;
                if depth == 0 {
                    return items
                        .is_multiple_of(2)
                        .then(|| (owner.unwrap_or(ScanOwner::Unbound), pos));
                }
            }
            b'"' => pos = reader::string_end(text, pos + 1)?,
            _ => pos = reader::plain_atom_end(text, pos)?,
        }
    }
}

/// Whether the quick path agrees with the full reader on the payload at
/// START, or `None` when it gives up there.
#[cfg(test)]
pub(super) fn quick_agrees(text: &[u8], start: usize) -> Option<bool> {
    let quick = quick_plist(text, start)?;
    Some(read_plist(text, start, &mut Scratch::default()) == Some(quick))
}

/// Decode BLOCK's payload (a block returned by [`scan`] on TEXT).
pub fn decode(text: &[u8], block: &Block) -> std::result::Result<Sexp, ReadError> {
    let start = block.payload.start;
    let mut scratch = Scratch::default();
    match reader::read_plain(text, start, &mut Tree, &mut scratch) {
        Some((value, _)) => Ok(value),
        None => read_one_reusing(text, start, &mut Tree, &mut scratch).map(|(value, _)| value),
    }
}

/// Is BLOCK authorised? For OWNER `Some(id)`, only blocks bound to that
/// ID are; for `None`, only unbound blocks whose span VOUCHED accepts.
pub fn authorised(block: &Block, owner: Option<&[u8]>, vouched: &dyn Fn(&Block) -> bool) -> bool {
    match (&block.owner, owner) {
        (Owner::Bound(id), Some(want)) => id == want,
        (Owner::Unbound, None) => vouched(block),
        _ => false,
    }
}

/// Blocks a provider message must not carry: those bound to OWNER and
/// unbound ones with provenance.
pub fn scrubbed(block: &Block, owner: Option<&[u8]>, vouched: &dyn Fn(&Block) -> bool) -> bool {
    match &block.owner {
        Owner::Bound(id) => owner == Some(&id[..]),
        Owner::Unbound => vouched(block),
        Owner::Invalid => false,
    }
}

/// The shape of [`scrubbed`] and [`authorised`].
pub type Check = fn(&Block, Option<&[u8]>, &dyn Fn(&Block) -> bool) -> bool;

/// TEXT's blocks from one scan, each as the byte offset of its payload
/// (for decoding) and the block with positions counted in characters
/// from BASE (ONE_BYTE_CHARS: every character of TEXT is one byte).
pub fn scan_positions(text: &[u8], one_byte_chars: bool, base: usize) -> Vec<(usize, Block)> {
    let mut map = crate::text::ByteToChar::new(text, one_byte_chars);
    let mut pos = |offset: usize| base + map.char_at(offset);
    scan(text)
        .into_iter()
        .map(|mut b| {
            let payload_at = b.payload.start;
            b.start = pos(b.start);
            b.payload = pos(b.payload.start)..pos(b.payload.end);
            b.end = pos(b.end);
            (payload_at, b)
        })
        .collect()
}

/// Keep those of BLOCKS that KEEP ([`scrubbed`] or [`authorised`])
/// passes for OWNER, an unbound block counting as vouched for when it
/// lies inside one of the (START, END) spans VOUCHED.
pub fn keep(
    blocks: &mut Vec<(usize, Block)>,
    owner: Option<&[u8]>,
    vouched: &[(usize, usize)],
    keep: Check,
) {
    let inside = |b: &Block| vouched.iter().any(|&(s, e)| s <= b.start && b.end <= e);
    blocks.retain(|(_, b)| keep(b, owner, &inside));
}

/// The pairs of VALUE if it is a proper keyword plist (nil is empty).
pub fn plist_pairs(value: &Sexp) -> std::result::Result<&[Sexp], &'static str> {
    match value {
        v if v.is_nil() => Ok(&[]),
        Sexp::List(items, None) => {
            if !items.len().is_multiple_of(2) {
                return Err("it has an odd number of elements");
            }
            if items.iter().step_by(2).any(|k| !k.is_keyword()) {
                return Err("a key is not a keyword");
            }
            Ok(items)
        }
        Sexp::List(_, Some(_)) => Err("it is a dotted list"),
        _ => Err("it is not a list"),
    }
}

fn schema_error(message: String) -> Error {
    Error::new(ErrorKind::Schema, message)
}

/// The printed payload for PRINTED (a keyword plist printed by Emacs),
/// bound to OWNER (any earlier `:tool-use-id` is replaced) or unbound.
pub fn payload(printed: &[u8], owner: Option<&str>) -> Result<String> {
    let (value, end) = read_one(printed, 0, &mut Tree)
        .map_err(|e| schema_error(format!("Render-data is not readable data: {e}")))?;
    if skip_whitespace(printed, end) != printed.len() {
        return Err(schema_error(format!(
            "Render-data has trailing text after its plist at byte {end}"
        )));
    }
    let pairs = plist_pairs(&value)
        .map_err(|why| schema_error(format!("Render-data must be a keyword plist, but {why}")))?;
    let mut items = Vec::with_capacity(pairs.len() + 2);
    if let Some(id) = owner {
        items.push(Sexp::symbol(OWNER_KEY));
        items.push(Sexp::string(id));
    }
    for pair in pairs.chunks_exact(2) {
        if pair[0] != Sexp::symbol(OWNER_KEY) {
            items.extend_from_slice(pair);
        }
    }
    let mut out = String::new();
    print(&Sexp::list(items), &mut out)
        .map_err(|e| schema_error(format!("Render-data cannot be printed: {}", e.0)))?;
    Ok(out)
}

/// The complete block for PRINTED bound to OWNER (see [`payload`]).
pub fn encode(printed: &[u8], owner: Option<&str>) -> Result<String> {
    let payload = payload(printed, owner)?;
    let open = String::from_utf8_lossy(OPEN);
    let close = String::from_utf8_lossy(CLOSE);
    Ok(format!("\n{open}\n{payload}\n{close}\n"))
}
