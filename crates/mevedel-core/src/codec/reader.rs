//! A safe reader for printed Lisp data.
//!
//! It reads exactly one object of the printed-data subset of Emacs Lisp
//! syntax: integers, floats (including `1.0e+INF` and `0.0e+NaN`),
//! strings (with their escapes, and `#("..." PROPS)` whose properties are
//! dropped), symbols, proper and dotted lists, vectors, and the quote
//! shorthands `'x`, `#'x`, `` `x ``, `,x`, `,@x`. Nothing is evaluated.
//! Everything else is refused with its position: `#.`, `#N=`/`#N#`
//! (circular structure), `#<...>` (unreadable objects), `#s(...)`,
//! `#[...]`, `#&...`, `?c` character syntax, named `\N{...}` escapes.
//!
//! The reader keeps its own stack instead of recursing, and refuses
//! nesting deeper than [`MAX_DEPTH`], so no input can overflow the Rust
//! stack, here or when the result is converted or dropped. What it
//! builds is up to a [`Build`] implementation: [`Tree`] builds [`Sexp`]
//! values; a scanner can build nothing and only check shapes.

use std::ops::Range;
use std::vec::Drain;

use crate::text::internal;

/// Deepest nesting of lists, vectors and quotes accepted (Emacs's own
/// printer gives up at 200 levels too).
pub const MAX_DEPTH: usize = 200;

/// A Lisp object read from printed text.
///
/// Strings and symbol names hold Emacs's internal bytes: UTF-8 for
/// Unicode characters (surrogates in their three-byte form), and a raw
/// byte `0x80..=0xFF` as the two-byte sequence `C0`/`C1` + continuation.
#[derive(Debug, Clone, PartialEq)]
pub enum Sexp {
    Int(i64),
    /// An integer outside `i64`, as its decimal digits with optional sign.
    BigInt(String),
    Float(f64),
    Str(Vec<u8>),
    Symbol(Vec<u8>),
    /// Items and, for a dotted list, its final cdr.
    List(Vec<Sexp>, Option<Box<Sexp>>),
    Vector(Vec<Sexp>),
}

impl Sexp {
    pub fn nil() -> Sexp {
        Sexp::Symbol(b"nil".to_vec())
    }

    /// The proper list of ITEMS: nil when there are none, as Lisp has no
    /// other empty list.
    pub fn list(items: Vec<Sexp>) -> Sexp {
        if items.is_empty() {
            Sexp::nil()
        } else {
            Sexp::List(items, None)
        }
    }

    pub fn symbol(name: &str) -> Sexp {
        Sexp::Symbol(name.as_bytes().to_vec())
    }

    pub fn string(text: &str) -> Sexp {
        Sexp::Str(text.as_bytes().to_vec())
    }

    pub fn is_nil(&self) -> bool {
        matches!(self, Sexp::Symbol(name) if name == b"nil")
    }

    /// True for a symbol whose name starts with a colon.
    pub fn is_keyword(&self) -> bool {
        matches!(self, Sexp::Symbol(name) if name.first() == Some(&b':'))
    }
}

/// Why some text is not readable data, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// Byte offset of the problem in the input.
    pub pos: usize,
    pub what: &'static str,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.what, self.pos)
    }
}

/// What the reader produces for each object; see [`Tree`].
pub trait Build {
    type Node;
    fn int(&mut self, value: i64) -> Self::Node;
    fn big_int(&mut self, digits: String) -> Self::Node;
    fn float(&mut self, value: f64) -> Self::Node;
    /// A string; RANGE covers its text between the quotes in INPUT, with
    /// escapes already checked (see [`unescape_string`]).
    fn string(&mut self, input: &[u8], range: Range<usize>) -> Self::Node;
    /// A symbol; RANGE is its printed token in INPUT (see [`unescape_symbol`]).
    fn symbol(&mut self, input: &[u8], range: Range<usize>) -> Self::Node;
    /// A symbol the reader itself names (`quote`, `function`, ...).
    fn named(&mut self, name: &'static str) -> Self::Node;
    /// A list of ITEMS (and TAIL, for a dotted list); DEPTH is 0 for the
    /// outermost object.
    fn list(
        &mut self,
        items: Drain<'_, Self::Node>,
        tail: Option<Self::Node>,
        depth: usize,
    ) -> Self::Node;
    fn vector(&mut self, items: Drain<'_, Self::Node>) -> Self::Node;
}

/// Builds [`Sexp`] values.
pub struct Tree;

impl Build for Tree {
    type Node = Sexp;
    fn int(&mut self, value: i64) -> Sexp {
        Sexp::Int(value)
    }
    fn big_int(&mut self, digits: String) -> Sexp {
        Sexp::BigInt(digits)
    }
    fn float(&mut self, value: f64) -> Sexp {
        Sexp::Float(value)
    }
    fn string(&mut self, input: &[u8], range: Range<usize>) -> Sexp {
        Sexp::Str(unescape_string(&input[range]))
    }
    fn symbol(&mut self, input: &[u8], range: Range<usize>) -> Sexp {
        Sexp::Symbol(unescape_symbol(&input[range]))
    }
    fn named(&mut self, name: &'static str) -> Sexp {
        Sexp::symbol(name)
    }
    fn list(&mut self, items: Drain<'_, Sexp>, tail: Option<Sexp>, _depth: usize) -> Sexp {
        match (items.len(), tail) {
            (0, None) => Sexp::nil(),
            (_, tail) => Sexp::List(items.collect(), tail.map(Box::new)),
        }
    }
    fn vector(&mut self, items: Drain<'_, Sexp>) -> Sexp {
        Sexp::Vector(items.collect())
    }
}

/// Read one object of INPUT starting at byte START (after any leading
/// whitespace and comments). Returns it and the byte offset just after it.
pub fn read_one<B: Build>(
    input: &[u8],
    start: usize,
    builder: &mut B,
) -> Result<(B::Node, usize), ReadError> {
    read_one_reusing(input, start, builder, &mut Scratch::default())
}

/// The reader's working storage, kept between [`read_one_reusing`]
/// calls so that reading many objects allocates once.
pub struct Scratch<N> {
    stack: Vec<Frame<N>>,
    items: Vec<N>,
}

impl<N> Default for Scratch<N> {
    fn default() -> Self {
        Scratch {
            stack: Vec::new(),
            items: Vec::new(),
        }
    }
}

/// [`read_one`] with working storage SCRATCH.
pub fn read_one_reusing<B: Build>(
    input: &[u8],
    start: usize,
    builder: &mut B,
    scratch: &mut Scratch<B::Node>,
) -> Result<(B::Node, usize), ReadError> {
    scratch.stack.clear();
    scratch.items.clear();
    let mut reader = Reader { input, pos: start };
    let node = reader.read(builder, scratch)?;
    Ok((node, reader.pos))
}

/// [`read_one_reusing`] for plain data, without the reader's general
/// machinery: nested lists, strings (escapes checked as the reader
/// checks them) and plain atoms (see [`plain_atom_end`]), separated by
/// ASCII whitespace. `None` as soon as anything else appears (quotes,
/// vectors, dots, `#` syntax, comments, escaped or non-ASCII atoms, end
/// of data): the caller then reads with [`read_one_reusing`], which
/// handles or refuses it. Where it answers, it answers exactly as
/// `read_one_reusing` does (a property test holds it to that); BUILDER
/// may have made nodes for an attempt that gave up.
pub fn read_plain<B: Build>(
    input: &[u8],
    start: usize,
    builder: &mut B,
    scratch: &mut Scratch<B::Node>,
) -> Option<(B::Node, usize)> {
    let Scratch { stack, items } = scratch;
    stack.clear();
    items.clear();
    let mut pos = start;
    loop {
        let c = *input.get(pos)?;
        if c <= b' ' {
            pos += 1;
            continue;
        }
        let node = match c {
            b'(' => {
                if stack.len() >= MAX_DEPTH {
                    return None;
                }
                stack.push(Frame::List {
                    start: items.len(),
                    tail: None,
                    dotted: false,
                });
                pos += 1;
                continue;
            }
            b')' => {
                let Some(Frame::List { start, .. }) = stack.pop() else {
                    return None;
                };
                pos += 1;
                builder.list(items.drain(start..), None, stack.len())
            }
            b'"' => {
                let end = string_end(input, pos + 1)?;
                let node = builder.string(input, pos + 1..end - 1);
                pos = end;
                node
            }
            _ => {
                let end = plain_atom_end(input, pos)?;
                let node = match parse_number(&input[pos..end]) {
                    Some(Number::Int(n)) => builder.int(n),
                    Some(Number::Big(digits)) => builder.big_int(digits),
                    Some(Number::Float(x)) => builder.float(x),
                    None => builder.symbol(input, pos..end),
                };
                pos = end;
                node
            }
        };
        if stack.is_empty() {
            return Some((node, pos));
        }
        items.push(node);
    }
}

/// Skip whitespace (any byte up to space, and no-break space) from POS.
pub fn skip_whitespace(input: &[u8], mut pos: usize) -> usize {
    loop {
        match input.get(pos) {
            Some(&b) if b <= b' ' => pos += 1,
            Some(0xC2) if input.get(pos + 1) == Some(&0xA0) => pos += 2,
            _ => return pos,
        }
    }
}

/// The offset just after the string whose body starts at BODY (just
/// after its opening quote), with every escape checked as the reader
/// checks it; `None` where the reader would refuse the string.
pub fn string_end(input: &[u8], body: usize) -> Option<usize> {
    let mut reader = Reader { input, pos: body };
    reader.string_body().ok().map(|_| reader.pos)
}

/// The end of the plain symbol or number token at POS: one that starts
/// with an ASCII byte other than `?` (character syntax), `.`-only tokens
/// excluded, and holds only ASCII bytes and no backslash up to its
/// delimiter. `None` for anything else, which only the full reader
/// handles (escapes, non-ASCII, `#` and quote syntax, the dot).
pub fn plain_atom_end(input: &[u8], pos: usize) -> Option<usize> {
    let first = *input.get(pos)?;
    if first >= 0x80 || first == b'?' || first == b'\\' || DELIMITERS[first as usize] {
        return None;
    }
    let mut end = pos + 1;
    while let Some(&b) = input.get(end) {
        if DELIMITERS[b as usize] {
            break;
        }
        if b >= 0x80 || b == b'\\' {
            return None;
        }
        end += 1;
    }
    if end == pos + 1 && first == b'.' {
        return None;
    }
    Some(end)
}

fn err<T>(pos: usize, what: &'static str) -> Result<T, ReadError> {
    Err(ReadError { pos, what })
}

/// Bytes that end a symbol or number token by themselves: whitespace
/// and control bytes, and `()[]"';#`,`. (No-break space, `C2 A0`, is
/// checked separately.)
const DELIMITERS: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b <= b' ' as usize {
        table[b] = true;
        b += 1;
    }
    let mut i = 0;
    let others = b"()[]\"';#`,";
    while i < others.len() {
        table[others[i] as usize] = true;
        i += 1;
    }
    table
};

/// True when the byte at POS ends a symbol or number token.
fn is_delimiter(input: &[u8], pos: usize) -> bool {
    match input.get(pos) {
        None => true,
        Some(0xC2) => input.get(pos + 1) == Some(&0xA0),
        Some(&b) => DELIMITERS[b as usize],
    }
}

enum Frame<N> {
    /// Items from `start` in the shared item stack.
    List {
        start: usize,
        tail: Option<N>,
        dotted: bool,
    },
    Vector {
        start: usize,
    },
    /// `'x` and friends: wraps the next object as `(NAME x)`.
    Quote(&'static str),
    /// `#("..." PROPS)`: the string, once read; the properties are checked
    /// as readable data and dropped.
    PropString(Option<N>),
}

/// What the next token was.
enum Token<N> {
    Node { node: N, is_string: bool },
    Open(Frame<N>),
    CloseList,
    CloseVector,
    Dot,
}

struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn read<B: Build>(
        &mut self,
        b: &mut B,
        scratch: &mut Scratch<B::Node>,
    ) -> Result<B::Node, ReadError> {
        let Scratch { stack, items } = scratch;
        loop {
            let token_pos = self.skip_atmosphere();
            let (mut node, mut is_string) = match self.token(b, items.len())? {
                Token::Node { node, is_string } => (node, is_string),
                Token::Open(frame) => {
                    if stack.len() >= MAX_DEPTH {
                        return err(token_pos, "nesting too deep");
                    }
                    stack.push(frame);
                    continue;
                }
                Token::Dot => match stack.last_mut() {
                    Some(Frame::List {
                        start,
                        dotted: dotted @ false,
                        ..
                    }) if items.len() > *start => {
                        *dotted = true;
                        continue;
                    }
                    _ => return err(token_pos, "misplaced dot"),
                },
                Token::CloseList => match stack.pop() {
                    Some(Frame::List {
                        start,
                        tail,
                        dotted,
                    }) => {
                        if dotted && tail.is_none() {
                            return err(token_pos, "missing object after dot");
                        }
                        (b.list(items.drain(start..), tail, stack.len()), false)
                    }
                    Some(Frame::PropString(Some(string))) => (string, true),
                    _ => return err(token_pos, "unexpected `)'"),
                },
                Token::CloseVector => match stack.pop() {
                    Some(Frame::Vector { start }) => (b.vector(items.drain(start..)), false),
                    _ => return err(token_pos, "unexpected `]'"),
                },
            };
            // Deliver the finished object to the frame that waits for it.
            loop {
                match stack.last_mut() {
                    None => return Ok(node),
                    Some(Frame::List { tail, dotted, .. }) => {
                        if tail.is_some() {
                            return err(token_pos, "more than one object after dot");
                        }
                        if *dotted {
                            *tail = Some(node);
                        } else {
                            items.push(node);
                        }
                        break;
                    }
                    Some(Frame::Vector { .. }) => {
                        items.push(node);
                        break;
                    }
                    Some(Frame::PropString(slot)) => {
                        if slot.is_none() {
                            if !is_string {
                                return err(token_pos, "`#(' must start with a string");
                            }
                            *slot = Some(node);
                        }
                        break;
                    }
                    Some(Frame::Quote(name)) => {
                        let name = *name;
                        stack.pop();
                        let start = items.len();
                        let head = b.named(name);
                        items.push(head);
                        items.push(node);
                        node = b.list(items.drain(start..), None, stack.len());
                        is_string = false;
                    }
                }
            }
        }
    }

    /// Skip whitespace and comments; return the new position.
    fn skip_atmosphere(&mut self) -> usize {
        loop {
            self.pos = skip_whitespace(self.input, self.pos);
            if self.input.get(self.pos) == Some(&b';') {
                self.pos = memchr::memchr(b'\n', &self.input[self.pos..])
                    .map_or(self.input.len(), |n| self.pos + n + 1);
            } else {
                return self.pos;
            }
        }
    }

    /// The next token; ITEMS is the height of the shared item stack, where
    /// a list or vector opened now starts.
    fn token<B: Build>(&mut self, b: &mut B, items: usize) -> Result<Token<B::Node>, ReadError> {
        let start = self.pos;
        let Some(&c) = self.input.get(start) else {
            return err(start, "end of data inside an object");
        };
        let open = |frame| Ok(Token::Open(frame));
        self.pos += 1;
        match c {
            b'(' => open(Frame::List {
                start: items,
                tail: None,
                dotted: false,
            }),
            b'[' => open(Frame::Vector { start: items }),
            b')' => Ok(Token::CloseList),
            b']' => Ok(Token::CloseVector),
            b'\'' => open(Frame::Quote("quote")),
            b'`' => open(Frame::Quote("`")),
            b',' => {
                if self.input.get(self.pos) == Some(&b'@') {
                    self.pos += 1;
                    open(Frame::Quote(",@"))
                } else {
                    open(Frame::Quote(","))
                }
            }
            b'"' => {
                let range = self.string_body()?;
                Ok(Token::Node {
                    node: b.string(self.input, range),
                    is_string: true,
                })
            }
            b'?' => err(start, "character syntax `?' is not accepted"),
            b'#' => self.dispatch(b, start),
            _ => {
                self.pos = start;
                self.atom(b)
            }
        }
    }

    fn dispatch<B: Build>(&mut self, b: &mut B, start: usize) -> Result<Token<B::Node>, ReadError> {
        let next = self.input.get(self.pos).copied();
        self.pos += 1;
        match next {
            Some(b'\'') => Ok(Token::Open(Frame::Quote("function"))),
            Some(b'(') => Ok(Token::Open(Frame::PropString(None))),
            Some(b'#') => Ok(Token::Node {
                node: b.named(""),
                is_string: false,
            }),
            Some(b'.') => err(start, "read-time evaluation `#.' is refused"),
            Some(b'<') => err(start, "unreadable object `#<'"),
            Some(b'0'..=b'9') => err(start, "circular-structure syntax `#N=' or `#N#' is refused"),
            _ => err(start, "unsupported `#' syntax"),
        }
    }

    /// Scan a string body after its opening quote, checking every escape.
    /// Returns the byte range between the quotes.
    fn string_body(&mut self) -> Result<Range<usize>, ReadError> {
        let body = self.pos;
        let input = self.input;
        loop {
            let Some(off) = memchr::memchr2(b'"', b'\\', &input[self.pos..]) else {
                return err(body - 1, "unterminated string");
            };
            self.pos += off;
            if input[self.pos] == b'"' {
                self.pos += 1;
                return Ok(body..self.pos - 1);
            }
            let (_, len) = string_escape(input, self.pos)?;
            self.pos += len;
        }
    }

    /// A symbol or number token.
    fn atom<B: Build>(&mut self, b: &mut B) -> Result<Token<B::Node>, ReadError> {
        let start = self.pos;
        let mut escaped = false;
        while !is_delimiter(self.input, self.pos) {
            let c = self.input[self.pos];
            if c == b'\\' {
                escaped = true;
                match self.input.get(self.pos + 1) {
                    Some(_) => self.pos += 1 + internal::char_len(&self.input[self.pos + 1..]),
                    None => return err(self.pos, "end of data after backslash"),
                }
            } else {
                self.pos += internal::char_len(&self.input[self.pos..]);
            }
        }
        self.pos = self.pos.min(self.input.len());
        let token = &self.input[start..self.pos];
        if !escaped {
            if token == b"." {
                return Ok(Token::Dot);
            }
            if let Some(number) = parse_number(token) {
                let node = match number {
                    Number::Int(n) => b.int(n),
                    Number::Big(s) => b.big_int(s),
                    Number::Float(x) => b.float(x),
                };
                return Ok(Token::Node {
                    node,
                    is_string: false,
                });
            }
        }
        Ok(Token::Node {
            node: b.symbol(self.input, start..self.pos),
            is_string: false,
        })
    }
}

/// True when TOKEN, unescaped, would read as a number.
pub fn parse_number_token(token: &[u8]) -> bool {
    parse_number(token).is_some()
}

enum Number {
    Int(i64),
    Big(String),
    Float(f64),
}

/// Parse TOKEN with Emacs's decimal number syntax, or `None` for a symbol.
fn parse_number(token: &[u8]) -> Option<Number> {
    let (negative, body) = match token.first() {
        Some(b'-') => (true, &token[1..]),
        Some(b'+') => (false, &token[1..]),
        _ => (false, token),
    };
    let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
    let lead = digits(body);
    let mut i = lead;
    let mut dot = false;
    let mut trail = 0;
    if body.get(i) == Some(&b'.') {
        dot = true;
        i += 1;
        trail = digits(&body[i..]);
        i += trail;
    }
    enum Exp {
        None,
        Num(usize),
        Inf,
        NaN,
    }
    let mut exp = Exp::None;
    if matches!(body.get(i), Some(b'e' | b'E')) && (lead > 0 || trail > 0) {
        let rest = &body[i + 1..];
        if rest == b"+INF" {
            exp = Exp::Inf;
            i = body.len();
        } else if rest == b"+NaN" {
            exp = Exp::NaN;
            i = body.len();
        } else {
            let signed = usize::from(matches!(rest.first(), Some(b'+' | b'-')));
            let n = digits(&rest[signed..]);
            if n > 0 {
                exp = Exp::Num(i + 1);
                i += 1 + signed + n;
            }
        }
    }
    if i != body.len() {
        return None;
    }
    let is_float = match exp {
        Exp::None => dot && trail > 0,
        _ => lead > 0 || trail > 0,
    };
    if !is_float {
        if lead == 0 {
            return None;
        }
        let mut value: i64 = 0;
        for &d in &body[..lead] {
            let digit = i64::from(d - b'0');
            match value.checked_mul(10).and_then(|v| {
                if negative {
                    v.checked_sub(digit)
                } else {
                    v.checked_add(digit)
                }
            }) {
                Some(v) => value = v,
                None => {
                    let digits = std::str::from_utf8(&body[..lead]).ok()?;
                    let sign = if negative { "-" } else { "" };
                    return Some(Number::Big(format!("{sign}{digits}")));
                }
            }
        }
        return Some(Number::Int(value));
    }
    let sign = if negative { -1.0 } else { 1.0 };
    if matches!(exp, Exp::None) && lead > 0 {
        // DIGITS.DIGITS, the printer's usual form: parsed as it stands.
        let magnitude: f64 = std::str::from_utf8(body).ok()?.parse().ok()?;
        return Some(Number::Float(sign * magnitude));
    }
    let value = match exp {
        Exp::Inf => sign * f64::INFINITY,
        Exp::NaN => f64::NAN.copysign(sign),
        Exp::None | Exp::Num(_) => {
            let int_part = std::str::from_utf8(&body[..lead]).ok()?;
            let frac_start = lead + usize::from(dot);
            let frac = std::str::from_utf8(&body[frac_start..frac_start + trail]).ok()?;
            let exponent = match exp {
                Exp::Num(at) => std::str::from_utf8(&body[at..]).ok()?,
                _ => "0",
            };
            let int_part = if int_part.is_empty() { "0" } else { int_part };
            let frac = if frac.is_empty() { "0" } else { frac };
            let magnitude: f64 = format!("{int_part}.{frac}e{exponent}").parse().ok()?;
            sign * magnitude
        }
    };
    Some(Number::Float(value))
}

/// One decoded string escape.
enum Escaped {
    /// Nothing (backslash-newline and backslash-space).
    Nothing,
    /// A character code (up to #x3FFF7F).
    Char(u32),
    /// A raw byte `0x80..=0xFF`.
    Raw(u8),
}

fn hex_value(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// Decode the escape at INPUT[POS] (a backslash inside a string).
/// Returns what it means and how many bytes it spans.
fn string_escape(input: &[u8], pos: usize) -> Result<(Escaped, usize), ReadError> {
    let Some(&c) = input.get(pos + 1) else {
        return err(pos, "end of data after backslash");
    };
    let simple = |code: u8| Ok((Escaped::Char(u32::from(code)), 2));
    match c {
        b'\n' | b' ' => Ok((Escaped::Nothing, 2)),
        b'a' => simple(7),
        b'b' => simple(8),
        b't' => simple(9),
        b'n' => simple(10),
        b'v' => simple(11),
        b'f' => simple(12),
        b'r' => simple(13),
        b'e' => simple(27),
        b's' => simple(b' '),
        b'd' => simple(127),
        b'x' => {
            let digits = input[pos + 2..]
                .iter()
                .take_while(|c| c.is_ascii_hexdigit())
                .count();
            let Some(value) = hex_value(&input[pos + 2..pos + 2 + digits]) else {
                return err(pos, "bad `\\x' escape");
            };
            let len = 2 + digits;
            match value {
                0x80..=0xFF => Ok((Escaped::Raw(value as u8), len)),
                0..=0x10FFFF => Ok((Escaped::Char(value), len)),
                _ => err(pos, "`\\x' escape beyond Unicode"),
            }
        }
        b'0'..=b'7' => {
            let digits = input[pos + 1..]
                .iter()
                .take(3)
                .take_while(|c| (b'0'..=b'7').contains(c))
                .count();
            let value = input[pos + 1..pos + 1 + digits]
                .iter()
                .fold(0u32, |acc, &d| acc * 8 + u32::from(d - b'0'));
            let len = 1 + digits;
            if (0x80..=0xFF).contains(&value) {
                Ok((Escaped::Raw(value as u8), len))
            } else {
                Ok((Escaped::Char(value), len))
            }
        }
        b'u' | b'U' => {
            let n = if c == b'u' { 4 } else { 8 };
            let digits = input.get(pos + 2..pos + 2 + n);
            match digits
                .filter(|d| d.iter().all(u8::is_ascii_hexdigit))
                .and_then(hex_value)
            {
                Some(value) if value <= 0x10FFFF => Ok((Escaped::Char(value), 2 + n)),
                _ => err(pos, "bad Unicode escape"),
            }
        }
        b'N' => {
            // Only the \N{U+X} form; character names are not resolved.
            let rest = &input[pos + 2..];
            if rest.starts_with(b"{U+") {
                let digits = rest[3..]
                    .iter()
                    .take_while(|c| c.is_ascii_hexdigit())
                    .count();
                if rest.get(3 + digits) == Some(&b'}')
                    && let Some(value) = hex_value(&rest[3..3 + digits]).filter(|&v| v <= 0x10FFFF)
                {
                    return Ok((Escaped::Char(value), 2 + 3 + digits + 1));
                }
            }
            err(pos, "unsupported `\\N' escape")
        }
        b'C' | b'^' => {
            let (ctl_at, len) = if c == b'C' {
                if input.get(pos + 2) != Some(&b'-') {
                    return Ok((Escaped::Char(u32::from(b'C')), 2));
                }
                (pos + 3, 4)
            } else {
                (pos + 2, 3)
            };
            match input.get(ctl_at) {
                Some(b'?') => Ok((Escaped::Char(127), len)),
                Some(&k @ (b'@'..=b'_' | b'a'..=b'z')) => {
                    Ok((Escaped::Char(u32::from(k & 0x1F)), len))
                }
                _ => err(pos, "unsupported control escape"),
            }
        }
        b'M' | b'S' | b'H' | b'A' if input.get(pos + 2) == Some(&b'-') => {
            err(pos, "modifier escapes are not accepted in strings")
        }
        _ => {
            // Any other character stands for itself.
            let Some((code, len)) = internal::char_at(&input[pos + 1..]) else {
                return err(pos, "end of data after backslash");
            };
            if code >= internal::RAW_BYTE_BASE + 0x80 {
                Ok((
                    Escaped::Raw((code - internal::RAW_BYTE_BASE) as u8),
                    1 + len,
                ))
            } else {
                Ok((Escaped::Char(code), 1 + len))
            }
        }
    }
}

/// The contents of a string body already checked by the reader.
pub fn unescape_string(body: &[u8]) -> Vec<u8> {
    if memchr::memchr(b'\\', body).is_none() {
        return body.to_vec();
    }
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'\\', &body[i..]) {
        out.extend_from_slice(&body[i..i + off]);
        i += off;
        match string_escape(body, i) {
            Ok((Escaped::Nothing, len)) => i += len,
            Ok((Escaped::Char(code), len)) => {
                internal::push_char(&mut out, code);
                i += len;
            }
            Ok((Escaped::Raw(b), len)) => {
                internal::push_raw(&mut out, b);
                i += len;
            }
            Err(_) => {
                // Unreachable for checked input; keep the rest verbatim.
                break;
            }
        }
    }
    out.extend_from_slice(&body[i..]);
    out
}

/// The name of a symbol from its printed token (backslashes removed).
pub fn unescape_symbol(token: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(token.len());
    let mut i = 0;
    while i < token.len() {
        if token[i] == b'\\' && i + 1 < token.len() {
            i += 1;
        }
        let len = internal::char_len(&token[i..]);
        out.extend_from_slice(&token[i..i + len]);
        i += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Sexp, ReadError> {
        read_one(text.as_bytes(), 0, &mut Tree).map(|(node, _)| node)
    }

    fn ok(text: &str) -> Sexp {
        read(text).unwrap()
    }

    fn sym(name: &str) -> Sexp {
        Sexp::symbol(name)
    }

    #[test]
    fn numbers_follow_emacs_syntax() {
        assert_eq!(ok("42"), Sexp::Int(42));
        assert_eq!(ok("-7"), Sexp::Int(-7));
        assert_eq!(ok("+3"), Sexp::Int(3));
        assert_eq!(ok("1."), Sexp::Int(1));
        assert_eq!(ok("1.5"), Sexp::Float(1.5));
        assert_eq!(ok(".5"), Sexp::Float(0.5));
        assert_eq!(ok("1e3"), Sexp::Float(1000.0));
        assert_eq!(ok("1.e3"), Sexp::Float(1000.0));
        assert_eq!(ok("-.5e3"), Sexp::Float(-500.0));
        assert_eq!(ok("1.0e+INF"), Sexp::Float(f64::INFINITY));
        assert_eq!(ok("-1.0e+INF"), Sexp::Float(f64::NEG_INFINITY));
        assert!(matches!(ok("0.0e+NaN"), Sexp::Float(x) if x.is_nan()));
        assert_eq!(
            ok("123456789012345678901234567890"),
            Sexp::BigInt("123456789012345678901234567890".into())
        );
        for symbol in ["5e", "0x10", "1_000", "1.5.", "-", "+", "e5", ".e3"] {
            assert_eq!(ok(symbol), sym(symbol), "{symbol}");
        }
    }

    #[test]
    fn symbols_and_escapes() {
        assert_eq!(ok("foo"), sym("foo"));
        assert_eq!(ok(":key"), sym(":key"));
        assert_eq!(ok("a\\ b"), sym("a b"));
        assert_eq!(ok("\\1"), sym("1"));
        assert_eq!(ok("##"), sym(""));
        assert_eq!(ok("a?b"), sym("a?b"));
        assert_eq!(ok("foo.bar"), sym("foo.bar"));
        assert_eq!(ok("é漢"), sym("é漢"));
        assert_eq!(ok("a#b"), sym("a"), "`#' ends a symbol");
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(ok(r#""a\"b\\c""#), Sexp::string("a\"b\\c"));
        assert_eq!(ok("\"line\nnext\""), Sexp::string("line\nnext"));
        assert_eq!(ok(r#""\n\t\e\s\d""#), Sexp::string("\n\t\u{1b} \u{7f}"));
        assert_eq!(ok(r#""\x41\ b\q""#), Sexp::string("Abq"));
        assert_eq!(ok(r#""\u00e9\U0001F600\N{U+41}""#), Sexp::string("é😀A"));
        assert_eq!(ok(r#""\101\C-a\^?""#), Sexp::string("A\u{1}\u{7f}"));
        assert_eq!(ok("\"a\\\nb\""), Sexp::string("ab"));
        assert_eq!(ok(r#""\200""#), Sexp::Str(vec![0xC0, 0x80]), "raw byte");
        assert_eq!(ok(r#""\377""#), Sexp::Str(vec![0xC1, 0xBF]));
        // A backslash before a raw byte's two-byte form keeps the raw byte.
        assert_eq!(
            read_one(b"\"\\\xC0\x80\"", 0, &mut Tree).map(|(v, _)| v),
            Ok(Sexp::Str(vec![0xC0, 0x80]))
        );
        assert_eq!(ok(r#""\ud800""#), Sexp::Str(vec![0xED, 0xA0, 0x80]));
        assert_eq!(ok(r##"#("ab" 0 1 (face bold))"##), Sexp::string("ab"));
    }

    #[test]
    fn lists_vectors_quotes() {
        assert_eq!(ok("()"), Sexp::nil());
        assert_eq!(
            ok("(a . b)"),
            Sexp::List(vec![sym("a")], Some(Box::new(sym("b"))))
        );
        assert_eq!(
            ok("(1 [2 \"x\"] ; comment\n 3)"),
            Sexp::List(
                vec![
                    Sexp::Int(1),
                    Sexp::Vector(vec![Sexp::Int(2), Sexp::string("x")]),
                    Sexp::Int(3)
                ],
                None
            )
        );
        assert_eq!(
            ok("('a #'b `(c ,d ,@e))"),
            Sexp::List(
                vec![
                    Sexp::List(vec![sym("quote"), sym("a")], None),
                    Sexp::List(vec![sym("function"), sym("b")], None),
                    Sexp::List(
                        vec![
                            sym("`"),
                            Sexp::List(
                                vec![
                                    sym("c"),
                                    Sexp::List(vec![sym(","), sym("d")], None),
                                    Sexp::List(vec![sym(",@"), sym("e")], None),
                                ],
                                None
                            )
                        ],
                        None
                    ),
                ],
                None
            )
        );
    }

    #[test]
    fn refuses_unsafe_and_unsupported_syntax() {
        let cases = [
            ("#.(delete-file \"x\")", "read-time evaluation"),
            ("(#1=(a) #1#)", "circular"),
            ("#<buffer x>", "unreadable"),
            ("#s(hash-table)", "unsupported"),
            ("#[0 \"\" [] 0]", "unsupported"),
            ("#&3\"\\7\"", "unsupported"),
            ("?a", "character syntax"),
            ("(a . b c)", "more than one object"),
            ("(. a)", "misplaced dot"),
            ("(a .)", "missing object"),
            ("(a", "end of data"),
            (")", "unexpected"),
            ("\"abc", "unterminated"),
            (r#""\N{LATIN SMALL LETTER A}""#, "\\N"),
            (r#""\M-a""#, "modifier"),
            (r#""\x110000""#, "beyond Unicode"),
            ("#(a)", "must start with a string"),
        ];
        for (text, what) in cases {
            match read(text) {
                Err(e) => assert!(e.what.contains(what), "{text}: {e}"),
                Ok(value) => panic!("{text} read as {value:?}"),
            }
        }
    }

    #[test]
    fn depth_is_bounded_without_recursion() {
        let deep = "(".repeat(100_000);
        assert_eq!(read(&deep).map_err(|e| e.what), Err("nesting too deep"));
        let quotes = "'".repeat(100_000) + "a";
        assert_eq!(read(&quotes).map_err(|e| e.what), Err("nesting too deep"));
        let fine = "(".repeat(MAX_DEPTH) + &")".repeat(MAX_DEPTH);
        assert!(read(&fine).is_ok());
    }

    #[test]
    fn reports_end_offset() {
        let text = b"  (a b) trailing";
        let (_, end) = read_one(text, 0, &mut Tree).unwrap();
        assert_eq!(end, 7);
    }
}
