//! The reader of the ToolCall dialect: text to [`Sexp`] trees.
//!
//! The surface is a small Lisp: `( )` forms, `[ ]` lists, `{ }` maps,
//! double-quoted strings with JSON escapes, integers, decimals,
//! `:keywords`, symbols and `;` comments. Nesting is bounded so hostile
//! input cannot exhaust the stack.

use std::fmt;

/// Where a form starts: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One read form.
#[derive(Debug, Clone, PartialEq)]
pub enum Sexp {
    Int(i64, Pos),
    Float(f64, Pos),
    Str(String, Pos),
    Keyword(String, Pos),
    Symbol(String, Pos),
    Form(Vec<Sexp>, Pos),
    List(Vec<Sexp>, Pos),
    Map(Vec<Sexp>, Pos),
}

impl Sexp {
    pub fn pos(&self) -> Pos {
        match self {
            Sexp::Int(_, p)
            | Sexp::Float(_, p)
            | Sexp::Str(_, p)
            | Sexp::Keyword(_, p)
            | Sexp::Symbol(_, p)
            | Sexp::Form(_, p)
            | Sexp::List(_, p)
            | Sexp::Map(_, p) => *p,
        }
    }
}

/// Longest program accepted, in bytes.
pub const MAX_SOURCE: usize = 200_000;

struct Reader<'a> {
    src: &'a [u8],
    text: &'a str,
    at: usize,
    line: u32,
    col: u32,
    max_depth: usize,
}

/// Read every top-level form of SRC; nesting deeper than MAX_DEPTH is an
/// error.
pub fn read(src: &str, max_depth: usize) -> Result<Vec<Sexp>, String> {
    if src.len() > MAX_SOURCE {
        return Err(format!(
            "the program is {} bytes; at most {MAX_SOURCE} are accepted",
            src.len()
        ));
    }
    let mut r = Reader {
        src: src.as_bytes(),
        text: src,
        at: 0,
        line: 1,
        col: 1,
        max_depth,
    };
    let mut forms = Vec::new();
    loop {
        r.skip_blank();
        if r.at >= r.src.len() {
            return Ok(forms);
        }
        forms.push(r.form(0)?);
    }
}

impl Reader<'_> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.at).copied()
    }

    /// Advance over one character (UTF-8 aware) and return it.
    fn bump(&mut self) -> Option<char> {
        let c = self.text.get(self.at..)?.chars().next()?;
        self.at += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn skip_blank(&mut self) {
        while let Some(b) = self.peek() {
            if b == b';' {
                while let Some(b) = self.peek() {
                    if b == b'\n' {
                        break;
                    }
                    self.bump();
                }
            } else if b.is_ascii_whitespace() || b == b',' {
                self.bump();
            } else {
                break;
            }
        }
    }

    fn form(&mut self, depth: usize) -> Result<Sexp, String> {
        if depth >= self.max_depth {
            return Err(format!(
                "{}: forms are nested more than {} deep",
                self.pos(),
                self.max_depth
            ));
        }
        let pos = self.pos();
        match self.peek() {
            Some(b'(') => self.seq(b')', depth).map(|v| Sexp::Form(v, pos)),
            Some(b'[') => self.seq(b']', depth).map(|v| Sexp::List(v, pos)),
            Some(b'{') => self.seq(b'}', depth).map(|v| Sexp::Map(v, pos)),
            Some(b @ (b')' | b']' | b'}')) => Err(format!("{pos}: unexpected `{}`", char::from(b))),
            Some(b'"') => self.string().map(|s| Sexp::Str(s, pos)),
            Some(_) => self.atom(pos),
            None => Err(format!("{pos}: the program ends in the middle of a form")),
        }
    }

    fn seq(&mut self, close: u8, depth: usize) -> Result<Vec<Sexp>, String> {
        let open = self.pos();
        self.bump();
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            match self.peek() {
                None => {
                    return Err(format!(
                        "{open}: `{}` is never closed",
                        match close {
                            b')' => '(',
                            b']' => '[',
                            _ => '{',
                        }
                    ));
                }
                Some(b) if b == close => {
                    self.bump();
                    return Ok(items);
                }
                Some(_) => items.push(self.form(depth + 1)?),
            }
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let start = self.pos();
        self.bump();
        let mut out = String::new();
        loop {
            match self.bump() {
                None => return Err(format!("{start}: the string is never closed")),
                Some('"') => return Ok(out),
                Some('\\') => {
                    let at = self.pos();
                    match self.bump() {
                        Some('"') => out.push('"'),
                        Some('\\') => out.push('\\'),
                        Some('/') => out.push('/'),
                        Some('n') => out.push('\n'),
                        Some('t') => out.push('\t'),
                        Some('r') => out.push('\r'),
                        Some('u') => out.push(self.unicode(at)?),
                        Some(c) => return Err(format!("{at}: unknown escape `\\{c}`")),
                        None => return Err(format!("{start}: the string is never closed")),
                    }
                }
                Some(c) => out.push(c),
            }
        }
    }

    fn hex4(&mut self, at: Pos) -> Result<u32, String> {
        let mut n = 0u32;
        for _ in 0..4 {
            let d = self
                .bump()
                .and_then(|c| c.to_digit(16))
                .ok_or_else(|| format!("{at}: `\\u` needs four hex digits"))?;
            n = n * 16 + d;
        }
        Ok(n)
    }

    fn unicode(&mut self, at: Pos) -> Result<char, String> {
        let hi = self.hex4(at)?;
        let code = if (0xD800..0xDC00).contains(&hi) {
            if self.bump() != Some('\\') || self.bump() != Some('u') {
                return Err(format!("{at}: a lone surrogate escape"));
            }
            let lo = self.hex4(at)?;
            if !(0xDC00..0xE000).contains(&lo) {
                return Err(format!("{at}: a lone surrogate escape"));
            }
            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
        } else {
            hi
        };
        char::from_u32(code).ok_or_else(|| format!("{at}: `\\u{code:04x}` is not a character"))
    }

    fn atom(&mut self, pos: Pos) -> Result<Sexp, String> {
        let start = self.at;
        while let Some(b) = self.peek() {
            if b.is_ascii_whitespace() || b"()[]{}\";,".contains(&b) {
                break;
            }
            self.bump();
        }
        let word = &self.text[start..self.at];
        if let Some(name) = word.strip_prefix(':') {
            if name.is_empty() || name.starts_with(':') {
                return Err(format!("{pos}: `{word}` is not a keyword"));
            }
            return Ok(Sexp::Keyword(name.to_string(), pos));
        }
        let numeric = word
            .strip_prefix('-')
            .unwrap_or(word)
            .starts_with(|c: char| c.is_ascii_digit());
        if numeric {
            if let Ok(n) = word.parse::<i64>() {
                return Ok(Sexp::Int(n, pos));
            }
            if word
                .bytes()
                .all(|b| b.is_ascii_digit() || b"-+.eE".contains(&b))
                && let Ok(x) = word.parse::<f64>()
                && x.is_finite()
            {
                return Ok(Sexp::Float(x, pos));
            }
            return Err(format!("{pos}: `{word}` is not a number"));
        }
        Ok(Sexp::Symbol(word.to_string(), pos))
    }
}
