//! A hand recognizer for the commonest Bash sources, building the same
//! [`Tree`] tree-sitter-bash would (kinds, ranges, fields, nesting) in a
//! fraction of the time of a parse. tree-sitter stays the authority:
//! whatever the recognizer is not sure of, it declines (`None`) and the
//! source is parsed by tree-sitter.
//!
//! Accepted: words (with backslash escapes), numbers, `'…'`, `"…"` with
//! text, `$name`, `${name}` and `$(…)` inside, the same expansions bare,
//! concatenations of these, `name=value` prefixes and statements, `|`
//! pipelines, `&&`/`||` lists, `;` and newline separators, file
//! redirections (`>`, `>>`, `<`, `&>`, `&>>`, `>&`, with a descriptor
//! number not starting with `0`), `for name [in words]; do …; done`, and comments where a
//! statement may end. Declined, among others: here-documents, `case`,
//! `if`, `while`, `[[ ]]`, arithmetic, backticks, subshells, braces,
//! `&`, non-ASCII text, line continuations.
//!
//! The shapes follow tree-sitter-bash's, quirks included: a redirection
//! after the last command of a list or pipeline wraps the whole list or
//! pipeline, and words after a redirection's target are more targets.
//! Where tree-sitter's shape is irregular (a pipeline of three or more
//! commands followed by `&&`), the recognizer declines. The property
//! tests in `tests.rs` compare its trees with tree-sitter's.

use super::syntax::{Field, Kind, Tree};

/// Whether WORD is syntax, or a declaration or unset command, when it
/// starts a command.
fn reserved(word: &[u8]) -> bool {
    matches!(
        word,
        b"if"
            | b"then"
            | b"else"
            | b"elif"
            | b"fi"
            | b"case"
            | b"esac"
            | b"for"
            | b"select"
            | b"while"
            | b"until"
            | b"do"
            | b"done"
            | b"in"
            | b"function"
            | b"time"
            | b"coproc"
            | b"declare"
            | b"typeset"
            | b"export"
            | b"readonly"
            | b"local"
            | b"unset"
            | b"unsetenv"
    )
}

/// The tree of SRC (which ends in a newline) when every part of it is
/// in the recognized subset, else `None`.
#[cfg(test)]
pub fn recognize(src: &str) -> Option<Tree> {
    let mut tree = Tree::default();
    recognize_into(src, &mut tree).then_some(tree)
}

/// Build the tree of SRC (which ends in a newline) in TREE, emptied
/// first, when every part of SRC is in the recognized subset; returns
/// whether it was (TREE is left unfinished when not).
pub fn recognize_into(src: &str, tree: &mut Tree) -> bool {
    tree.clear();
    if !src.ends_with('\n') || !src.is_ascii() {
        return false;
    }
    let mut p = Recognizer {
        s: src.as_bytes(),
        i: 0,
        t: tree,
    };
    if p.program().is_none() {
        return false;
    }
    p.t.finish();
    true
}

/// Where a list of statements ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// The whole source.
    Program,
    /// `$(…)`: at `)`.
    Substitution,
    /// `do …`: at `done`.
    DoGroup,
}

struct Recognizer<'s> {
    s: &'s [u8],
    i: usize,
    t: &'s mut Tree,
}

/// Bytes that end a word: tree-sitter-bash's special characters.
const fn special(b: u8) -> bool {
    matches!(
        b,
        b'\''
            | b'"'
            | b'<'
            | b'>'
            | b'{'
            | b'}'
            | b'['
            | b']'
            | b'('
            | b')'
            | b'`'
            | b'$'
            | b'|'
            | b'&'
            | b';'
            | b'\\'
    ) || b.is_ascii_whitespace()
}

/// Which bytes are word bytes, by value.
const WORD_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b as u8).is_ascii_graphic() && !special(b as u8);
        b += 1;
    }
    table
};

/// Which bytes may make up a plain command name, by value.
const COMMAND_NAME_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'/' | b'+' | b'-');
        b += 1;
    }
    table
};

/// Which bytes are word bytes other than `#`, by value.
const PLAIN_WORD_BYTES: [bool; 256] = {
    let mut table = WORD_BYTES;
    table[b'#' as usize] = false;
    table
};

/// A byte of a word (not a backslash escape): printable and not special.
fn word_byte(b: u8) -> bool {
    WORD_BYTES[b as usize]
}

fn name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether TEXT is only blanks and backslash-escaped blanks.
fn blank_run(text: &[u8]) -> bool {
    let mut i = 0;
    while i < text.len() {
        match (text[i], text.get(i + 1)) {
            (b' ' | b'\t', _) => i += 1,
            (b'\\', Some(b' ' | b'\t')) => i += 2,
            _ => return false,
        }
    }
    true
}

/// Whether TEXT is a tree-sitter-bash `number`:
/// `-?(0x)?[0-9]+(#[0-9A-Za-z@_]+)?`, all of it.
fn is_number(text: &[u8]) -> bool {
    if !matches!(text.first(), Some(b'-' | b'0'..=b'9')) {
        return false;
    }
    let t = text.strip_prefix(b"-").unwrap_or(text);
    let t = t.strip_prefix(b"0x").filter(|r| !r.is_empty()).unwrap_or(t);
    let digits = t.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return false;
    }
    match &t[digits..] {
        [] => true,
        [b'#', rest @ ..] => {
            !rest.is_empty()
                && rest
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'@' || b == b'_')
        }
        _ => false,
    }
}

impl Recognizer<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn at(&self, k: usize) -> Option<u8> {
        self.s.get(self.i + k).copied()
    }

    fn starts(&self, text: &[u8]) -> bool {
        self.s[self.i..].starts_with(text)
    }

    /// Skip spaces and tabs.
    fn blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// A leaf of LEN bytes at the cursor, which moves past it.
    fn leaf(&mut self, kind: Kind, len: usize, named: bool) -> u32 {
        let id = self.t.leaf(kind, self.i, self.i + len, named);
        self.i += len;
        id
    }

    /// Whether the cursor is at the word KW standing alone.
    fn keyword(&self, kw: &[u8]) -> bool {
        self.starts(kw)
            && self
                .s
                .get(self.i + kw.len())
                .is_none_or(|&b| matches!(b, b' ' | b'\t' | b'\n' | b';'))
    }

    fn program(&mut self) -> Option<()> {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n')) {
            self.i += 1;
        }
        let start = self.i;
        if start == self.s.len() {
            return None;
        }
        let mark = self.t.mark();
        self.statements(Context::Program)?;
        self.t.close(mark, Kind::Program, start, self.s.len(), true);
        Some(())
    }

    /// Statements with their terminators, up to the end of CONTEXT (not
    /// consumed).
    fn statements(&mut self, context: Context) -> Option<()> {
        let mut any = false;
        loop {
            self.blanks();
            if context == Context::Program {
                while self.peek() == Some(b'\n') {
                    self.i += 1;
                    self.blanks();
                }
            }
            match (context, self.peek()) {
                (Context::Program, None) | (Context::Substitution, Some(b')')) => break,
                (Context::DoGroup, _) if self.keyword(b"done") => break,
                (Context::Program, Some(b'#')) => {
                    self.comment()?;
                    continue;
                }
                (_, None | Some(b'#' | b';' | b'\n' | b')')) => return None,
                _ => {}
            }
            self.statement(context == Context::Program)?;
            any = true;
            self.blanks();
            match self.peek() {
                Some(b';') => {
                    if matches!(self.at(1), Some(b';' | b'&')) {
                        return None;
                    }
                    self.leaf(Kind::Semicolon, 1, false);
                }
                // tree-sitter-bash may read a newline (after a comment or
                // not) between statements as a blank, joining them: only
                // blank lines and comments may follow one.
                Some(b'\n' | b'#') if context == Context::Program => {
                    self.only_comments()?;
                    break;
                }
                Some(b')') if context == Context::Substitution => {}
                _ => return None,
            }
        }
        any.then_some(())
    }

    /// Blank lines and comments up to the end of the source.
    fn only_comments(&mut self) -> Option<()> {
        loop {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\n')) {
                self.i += 1;
            }
            match self.peek() {
                None => return Some(()),
                Some(b'#') => self.comment()?,
                Some(_) => return None,
            }
        }
    }

    /// A comment, which must end its line.
    fn comment(&mut self) -> Option<()> {
        let len = self.s[self.i..].iter().position(|&b| b == b'\n')?;
        self.leaf(Kind::Comment, len, true);
        self.i += 1;
        Some(())
    }

    /// Pipelines joined by `&&` and `||`, nested to the left. As in
    /// tree-sitter-bash, redirections after any command but the first
    /// wrap everything before them in the statement, which then goes on
    /// as the left side of what follows (`a && b 2>&1 | c` is a pipeline
    /// of the redirected list and `c`). Such wrapping is declined unless
    /// MAY_WRAP: inside `$(…)` and loops tree-sitter-bash reads it
    /// otherwise.
    fn statement(&mut self, may_wrap: bool) -> Option<()> {
        let mark = self.t.mark();
        let start = self.i;
        let mut units = 0;
        // The pipeline being read: where it starts, its stages so far.
        let mut pipe = (mark, start);
        let mut stages = 0;
        // Whether the pipeline is the right side of `&&`/`||`.
        let mut in_list = false;
        loop {
            let end = self.unit(units == 0)?;
            units += 1;
            stages += 1;
            self.blanks();
            if self.peek() == Some(b'|') && !matches!(self.at(1), Some(b'|' | b'&')) {
                self.leaf(Kind::Pipe, 1, false);
                self.blanks();
                continue;
            }
            if stages > 1 {
                self.t.close(pipe.0, Kind::Pipeline, pipe.1, end, true);
            }
            if in_list {
                self.t.close(mark, Kind::List, start, end, true);
                in_list = false;
            }
            if self.redirect_ahead() {
                if !may_wrap {
                    return None;
                }
                let body = self.t.last_pending()?;
                self.t.set_field(body, Field::Body);
                let end = self.redirects()?;
                self.t
                    .close(mark, Kind::RedirectedStatement, start, end, true);
                if self.peek() == Some(b'|') && !matches!(self.at(1), Some(b'|' | b'&')) {
                    self.leaf(Kind::Pipe, 1, false);
                    self.blanks();
                    pipe = (mark, start);
                    // Counted as two: `&&` after this pipeline nests
                    // irregularly too.
                    stages = 2;
                    continue;
                }
            }
            let op = match (self.peek(), self.at(1)) {
                (Some(b'&'), Some(b'&')) => Kind::And,
                (Some(b'|'), Some(b'|')) => Kind::Or,
                _ => return Some(()),
            };
            // tree-sitter-bash nests a longer pipeline irregularly here.
            if stages > 2 {
                return None;
            }
            self.leaf(op, 2, false);
            self.blanks();
            in_list = true;
            pipe = (self.t.mark(), self.i);
            stages = 0;
        }
    }

    /// Whether a redirection operator starts at the cursor.
    fn redirect_ahead(&self) -> bool {
        match self.peek() {
            Some(b'>' | b'<') => true,
            Some(b'&') => self.at(1) == Some(b'>'),
            // A descriptor number before the operator.
            Some(b'0'..=b'9') => {
                let digits = self.s[self.i..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                matches!(self.at(digits), Some(b'>' | b'<'))
            }
            _ => false,
        }
    }

    /// One command or `for` loop, with its redirections when FIRST (the
    /// first of its statement); returns where it ends. A later command's
    /// redirections are left for [`Recognizer::statement`].
    fn unit(&mut self, first: bool) -> Option<usize> {
        let mark = self.t.mark();
        let start = self.i;
        let mut end = if self.keyword(b"for") {
            self.for_statement()?
        } else {
            match self.command()? {
                (end, true) => end,
                // Assignments alone: only as a whole statement.
                (end, false) => {
                    self.blanks();
                    return (first && !matches!(self.peek(), Some(b'|' | b'&'))).then_some(end);
                }
            }
        };
        self.blanks();
        if !first || !self.redirect_ahead() {
            return Some(end);
        }
        let body = self.t.last_pending()?;
        self.t.set_field(body, Field::Body);
        end = self.redirects()?;
        self.t
            .close(mark, Kind::RedirectedStatement, start, end, true);
        Some(end)
    }

    /// File redirections up to the end of the statement; returns where
    /// the last ends.
    fn redirects(&mut self) -> Option<usize> {
        let mut end = self.i;
        while self.redirect_ahead() {
            end = self.file_redirect()?;
            if let Some(id) = self.t.last_pending() {
                self.t.set_field(id, Field::Redirect);
            }
            self.blanks();
        }
        Some(end)
    }

    fn file_redirect(&mut self) -> Option<usize> {
        let mark = self.t.mark();
        let start = self.i;
        let digits = self.s[self.i..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        // tree-sitter-bash's scanner never reads a descriptor starting
        // with `0`: `0>x` is a number and a redirection, `07>x` an error.
        if self.peek() == Some(b'0') && digits > 0 {
            return None;
        }
        if digits > 0 {
            let fd = self.leaf(Kind::FileDescriptor, digits, true);
            self.t.set_field(fd, Field::Descriptor);
        }
        let (op, len) = match (self.peek(), self.at(1), self.at(2)) {
            (Some(b'&'), Some(b'>'), Some(b'>')) => (Kind::AmpGtGt, 3),
            (Some(b'&'), Some(b'>'), _) => (Kind::AmpGt, 2),
            (Some(b'>'), Some(b'>'), _) => (Kind::GtGt, 2),
            (Some(b'>'), Some(b'&'), _) => (Kind::GtAmp, 2),
            (Some(b'>'), Some(b'|' | b'(') | None, _) => return None,
            (Some(b'>'), _, _) => (Kind::Gt, 1),
            (Some(b'<'), Some(b'<' | b'&' | b'>' | b'('), _) => return None,
            (Some(b'<'), _, _) => (Kind::Lt, 1),
            _ => return None,
        };
        self.leaf(op, len, false);
        if self.peek() == Some(b'-') && op == Kind::GtAmp {
            return None;
        }
        self.blanks();
        let mut end;
        loop {
            if !self.literal_ahead() {
                return None;
            }
            let dest = self.literal()?;
            self.t.set_field(dest, Field::Destination);
            end = self.i;
            self.blanks();
            if !self.literal_ahead() || self.redirect_ahead() {
                break;
            }
        }
        self.t.close(mark, Kind::FileRedirect, start, end, true);
        Some(end)
    }

    /// Whether a word, string or expansion starts at the cursor.
    fn literal_ahead(&self) -> bool {
        match self.peek() {
            Some(b'\'' | b'"' | b'$' | b'\\') => true,
            Some(b) => word_byte(b) && b != b'#',
            None => false,
        }
    }

    /// A simple command: assignments, name, arguments. Returns where it
    /// ends and whether it has a name (else it is a statement of
    /// assignments alone).
    fn command(&mut self) -> Option<(usize, bool)> {
        let mark = self.t.mark();
        let start = self.i;
        let mut assignments = 0;
        let mut end = self.i;
        while self.assignment_ahead() {
            end = self.assignment()?;
            assignments += 1;
            self.blanks();
        }
        if !self.literal_ahead() {
            if self.redirect_ahead() {
                return None;
            }
            match assignments {
                0 => return None,
                1 => {}
                _ => {
                    self.t
                        .close(mark, Kind::VariableAssignments, start, end, true);
                }
            }
            return Some((end, false));
        }
        // The name: a plain literal, not syntax.
        let name_mark = self.t.mark();
        let name_start = self.i;
        if self.redirect_ahead() {
            return None;
        }
        // Its first piece (up to a byte that is no word byte) must be all
        // name bytes, which are word bytes.
        let head_end = self.s[self.i..]
            .iter()
            .position(|&b| !COMMAND_NAME_BYTES[b as usize])
            .map_or(self.s.len(), |k| self.i + k);
        let head = &self.s[self.i..head_end];
        let plain = self.s.get(head_end).is_none_or(|&b| !word_byte(b));
        if !plain || head.first() == Some(&b'-') || reserved(head) {
            return None;
        }
        self.literal()?;
        let name = self
            .t
            .close(name_mark, Kind::CommandName, name_start, self.i, true);
        self.t.set_field(name, Field::Name);
        end = self.i;
        loop {
            self.blanks();
            if !self.literal_ahead() || self.redirect_ahead() {
                break;
            }
            if self.peek() == Some(b'=') {
                return None;
            }
            let arg = self.literal()?;
            self.t.set_field(arg, Field::Argument);
            end = self.i;
        }
        self.t.close(mark, Kind::Command, start, end, true);
        Some((end, true))
    }

    /// Whether `name=` or `name+=` starts at the cursor.
    fn assignment_ahead(&self) -> bool {
        if !self.peek().is_some_and(name_start) {
            return false;
        }
        let len = self.s[self.i..]
            .iter()
            .take_while(|&&b| name_byte(b))
            .count();
        // `_=x` is a command word to tree-sitter-bash.
        (len > 1 || self.peek() != Some(b'_'))
            && matches!(
                (self.at(len), self.at(len + 1)),
                (Some(b'='), _) | (Some(b'+'), Some(b'='))
            )
    }

    fn assignment(&mut self) -> Option<usize> {
        let mark = self.t.mark();
        let start = self.i;
        let len = self.s[self.i..]
            .iter()
            .take_while(|&&b| name_byte(b))
            .count();
        let name = self.leaf(Kind::VariableName, len, true);
        self.t.set_field(name, Field::Name);
        if self.peek() == Some(b'+') {
            self.leaf(Kind::PlusAssign, 2, false);
        } else {
            self.leaf(Kind::Assign, 1, false);
        }
        match self.peek() {
            Some(b' ' | b'\t' | b'\n' | b';') => {}
            Some(b'=' | b'#' | b'(') => return None,
            _ if self.literal_ahead() => {
                let value = self.literal()?;
                self.t.set_field(value, Field::Value);
            }
            _ => return None,
        }
        let end = self.i;
        self.t
            .close(mark, Kind::VariableAssignment, start, end, true);
        Some(end)
    }

    /// `for name [in words]; do statements; done`.
    fn for_statement(&mut self) -> Option<usize> {
        let mark = self.t.mark();
        let start = self.i;
        self.leaf(Kind::For, 3, false);
        self.blanks();
        if !self.peek().is_some_and(name_start) {
            return None;
        }
        let len = self.s[self.i..]
            .iter()
            .take_while(|&&b| name_byte(b))
            .count();
        let var = self.leaf(Kind::VariableName, len, true);
        self.t.set_field(var, Field::Variable);
        self.blanks();
        if self.keyword(b"in") {
            self.leaf(Kind::In, 2, false);
            let mut values = 0;
            loop {
                self.blanks();
                if !self.literal_ahead() || self.redirect_ahead() {
                    break;
                }
                let value = self.literal()?;
                self.t.set_field(value, Field::Value);
                values += 1;
            }
            if values == 0 {
                return None;
            }
        }
        if self.peek() != Some(b';') || matches!(self.at(1), Some(b';' | b'&')) {
            return None;
        }
        self.leaf(Kind::Semicolon, 1, false);
        self.blanks();
        if !self.keyword(b"do") {
            return None;
        }
        let group_mark = self.t.mark();
        let group_start = self.i;
        self.leaf(Kind::Do, 2, false);
        self.statements(Context::DoGroup)?;
        self.leaf(Kind::Done, 4, false);
        let group = self
            .t
            .close(group_mark, Kind::DoGroup, group_start, self.i, true);
        self.t.set_field(group, Field::Body);
        let end = self.i;
        self.t.close(mark, Kind::ForStatement, start, end, true);
        Some(end)
    }

    /// One word: its pieces, wrapped in a concatenation when more than
    /// one. Returns the node's id.
    fn literal(&mut self) -> Option<u32> {
        let mark = self.t.mark();
        let start = self.i;
        let mut pieces = 0;
        let mut last = 0;
        // The commonest literal, a word alone, without the general loop:
        // only a quote or `$` can join another piece to it.
        if self.peek().is_some_and(word_byte) {
            last = self.word()?;
            pieces = 1;
            match self.peek() {
                Some(b'\'' | b'"' | b'$' | b'#' | b'\\') => {}
                Some(b'<' | b'>') => return None,
                _ => return Some(last),
            }
        }
        while let Some(b) = self.peek() {
            last = match b {
                b'\'' => self.raw_string()?,
                b'"' => self.string()?,
                // `$$` next to other pieces reads differently.
                b'$' if self.at(1) == Some(b'$')
                    && (pieces > 0
                        || self.at(2).is_some_and(|c| {
                            !special(c) || c == b'$' || c == b'"' || c == b'\''
                        })) =>
                {
                    return None;
                }
                // tree-sitter-bash reads a later `$` as a bare one at times.
                b'$' if pieces > 1 => return None,
                // Bare `$?`, `$!` and the like: tree-sitter-bash at times
                // joins them to the word before, across a blank.
                b'$' if self
                    .at(1)
                    .is_some_and(|c| !name_byte(c) && c != b'{' && c != b'(') =>
                {
                    return None;
                }
                b'$' => self.dollar()?,
                b'#' | b'\\' if pieces > 0 => return None,
                b'\\' => self.word()?,
                _ if word_byte(b) => self.word()?,
                _ => break,
            };
            pieces += 1;
        }
        // `$1>&2` and the like: a descriptor tree-sitter-bash rejects.
        if matches!(self.peek(), Some(b'<' | b'>')) {
            return None;
        }
        match pieces {
            0 => None,
            1 => Some(last),
            _ => Some(self.t.close(mark, Kind::Concatenation, start, self.i, true)),
        }
    }

    /// A run of word bytes and backslash escapes: a `word`, or a
    /// `number` when it reads as one.
    fn word(&mut self) -> Option<u32> {
        let start = self.i;
        let mut escaped = false;
        let mut hash = false;
        loop {
            self.i += self.s[self.i..]
                .iter()
                .position(|&b| !PLAIN_WORD_BYTES[b as usize])
                .unwrap_or(self.s.len() - self.i);
            match self.peek() {
                Some(b'#') => {
                    hash = true;
                    self.i += 1;
                }
                Some(b'\\') => {
                    match self.at(1) {
                        Some(b' ') if self.i > start => {}
                        Some(c) if c.is_ascii_graphic() => {}
                        _ => return None,
                    }
                    escaped = true;
                    self.t.note_escape();
                    self.i += 2;
                }
                _ => break,
            }
        }
        let text = &self.s[start..self.i];
        if text.is_empty() {
            return None;
        }
        // (Most words, options included, cannot be numbers: tested here
        // without a call.)
        let number = !escaped
            && matches!(text, [b'0'..=b'9', ..] | [b'-', b'0'..=b'9', ..])
            && is_number(text);
        // `1#` is a parse error; `-` before `2>f` is dropped from the tree.
        if !number && hash && is_number(&[text.split(|&b| b == b'#').next()?, b"#0"].concat()) {
            return None;
        }
        if text == b"-" {
            let next = self.s[self.i..].iter().find(|&&b| b != b' ' && b != b'\t');
            if next.is_some_and(u8::is_ascii_digit) {
                return None;
            }
        }
        let kind = if number { Kind::Number } else { Kind::Word };
        Some(self.t.leaf(kind, start, self.i, true))
    }

    fn raw_string(&mut self) -> Option<u32> {
        let start = self.i;
        let len = self.s[start + 1..].iter().position(|&b| b == b'\'')?;
        if self.s[start + 1..start + 1 + len].contains(&b'\n') {
            return None;
        }
        self.i += len + 2;
        Some(self.t.leaf(Kind::RawString, start, self.i, true))
    }

    fn string(&mut self) -> Option<u32> {
        let mark = self.t.mark();
        let start = self.i;
        self.leaf(Kind::Quote, 1, false);
        loop {
            match self.peek()? {
                b'"' => {
                    self.leaf(Kind::Quote, 1, false);
                    break;
                }
                // `$$(` and the like read differently.
                b'$' if self.at(1) == Some(b'$') => return None,
                b'$' if self.at(1) == Some(b'"') => {
                    self.leaf(Kind::Dollar, 1, false);
                }
                b'$' => {
                    self.dollar()?;
                }
                b'`' | b'\n' | b'\r' => return None,
                _ => {
                    let content = self.i;
                    while let Some(b) = self.peek() {
                        match b {
                            b'"' | b'`' | b'$' | b'\r' | b'\n' => break,
                            b'\\' => {
                                self.t.note_escape();
                                if !self
                                    .at(1)
                                    .is_some_and(|c| c.is_ascii_graphic() || c == b' ')
                                {
                                    return None;
                                }
                                self.i += 2;
                            }
                            _ => self.i += 1,
                        }
                    }
                    // Blanks alone, escaped or not, may join the closing
                    // quote or a `$` before it.
                    if blank_run(&self.s[content..self.i]) {
                        return None;
                    }
                    self.t.leaf(Kind::StringContent, content, self.i, true);
                }
            }
        }
        Some(self.t.close(mark, Kind::String, start, self.i, true))
    }

    /// `$name`, `$@` and the like, `${name}` or `$(statements)`.
    fn dollar(&mut self) -> Option<u32> {
        let mark = self.t.mark();
        let start = self.i;
        match self.at(1)? {
            b'(' => {
                if self.at(2) == Some(b'(') {
                    return None;
                }
                self.leaf(Kind::DollarParen, 2, false);
                self.statements(Context::Substitution)?;
                self.leaf(Kind::CloseParen, 1, false);
                Some(
                    self.t
                        .close(mark, Kind::CommandSubstitution, start, self.i, true),
                )
            }
            b'{' => {
                self.leaf(Kind::DollarBrace, 2, false);
                let len = self.s[self.i..]
                    .iter()
                    .take_while(|&&b| name_byte(b))
                    .count();
                if len == 0
                    || !self.peek().is_some_and(name_start)
                    || self.at(len) != Some(b'}')
                    || (len == 1 && self.peek() == Some(b'_'))
                {
                    return None;
                }
                self.leaf(Kind::VariableName, len, true);
                self.leaf(Kind::CloseBrace, 1, false);
                Some(self.t.close(mark, Kind::Expansion, start, self.i, true))
            }
            b if name_byte(b) => {
                self.leaf(Kind::Dollar, 1, false);
                let len = self.s[self.i..]
                    .iter()
                    .take_while(|&&b| name_byte(b))
                    .count();
                if len == 1 && b == b'_' {
                    self.leaf(Kind::SpecialVariableName, 1, true);
                } else {
                    self.leaf(Kind::VariableName, len, true);
                }
                Some(
                    self.t
                        .close(mark, Kind::SimpleExpansion, start, self.i, true),
                )
            }
            // Followed by a word, these read differently at times.
            b'@' | b'?' | b'#' | b'$' | b'*' | b'!' | b'-'
                if self.at(2).is_none_or(|c| special(c) && c != b'\\') =>
            {
                self.leaf(Kind::Dollar, 1, false);
                self.leaf(Kind::SpecialVariableName, 1, true);
                Some(
                    self.t
                        .close(mark, Kind::SimpleExpansion, start, self.i, true),
                )
            }
            _ => None,
        }
    }
}
