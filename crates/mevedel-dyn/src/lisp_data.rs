//! Building many small Lisp values fast: printed data read by the safe
//! reader straight into Lisp objects.
//!
//! Each module call costs far more than the work it does (Emacs sets up
//! a non-local-exit handler per call), and the `emacs` crate adds an
//! exit check after each. Decoding thousands of plists is mostly such
//! calls, so [`RawData`] makes them through [`Raw`] (ADR 0005), checks
//! for a pending non-local exit once at the end ([`RawData::finish`]),
//! and avoids calls it can: each symbol is interned once per use of a
//! `RawData`, and small integers and floats are made once and shared
//! (both are immutable). Strings are always fresh objects; ASCII ones
//! are unibyte, as Emacs's own reader makes them.

use std::collections::HashMap;
use std::ffi::CString;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;
use std::vec::Drain;

use emacs::raw::emacs_value;
use emacs::{Env, Result, Value};
use mevedel_core::codec::reader::{
    Build, ReadError, Scratch, read_one_reusing, read_plain, unescape_string, unescape_symbol,
};
use mevedel_core::text::internal;

use crate::raw::Raw;

/// Integers made once and shared.
const SMALL_INTS: Range<i64> = -16..1024;

/// A multiply-rotate hash over eight bytes at a time: the keys are
/// short symbol names and float bits, looked up once per atom, and
/// SipHash (or a byte-at-a-time hash) costs more than the lookup.
#[derive(Default)]
struct WordHash(u64);

impl WordHash {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for WordHash {
    fn finish(&self) -> u64 {
        // The table indexes by the low bits, which the multiply mixes least.
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut buf = [0u8; 8];
            buf.copy_from_slice(word);
            self.add(u64::from_le_bytes(buf));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

type FastMap<K> = HashMap<K, emacs_value, BuildHasherDefault<WordHash>>;

/// Lisp values made through the raw module API (see the module docs).
pub(super) struct RawData<'e> {
    api: Raw<'e>,
    pub nil: emacs_value,
    list: emacs_value,
    vector: emacs_value,
    cons: emacs_value,
    string: emacs_value,
    concat: emacs_value,
    lisp_intern: emacs_value,
    string_to_number: emacs_value,
    symbols: FastMap<Vec<u8>>,
    floats: FastMap<u64>,
    ints: Vec<Option<emacs_value>>,
    args: Vec<emacs_value>,
}

impl<'e> RawData<'e> {
    pub fn new(env: &'e Env) -> Result<Self> {
        let api = Raw::new(env)?;
        let sym = |name: &std::ffi::CStr| api.intern(name);
        let data = RawData {
            nil: sym(c"nil"),
            list: sym(c"list"),
            vector: sym(c"vector"),
            cons: sym(c"cons"),
            string: sym(c"string"),
            concat: sym(c"concat"),
            lisp_intern: sym(c"intern"),
            string_to_number: sym(c"string-to-number"),
            api,
            symbols: FastMap::default(),
            floats: FastMap::default(),
            ints: vec![None; (SMALL_INTS.end - SMALL_INTS.start) as usize],
            args: Vec::new(),
        };
        Ok(data)
    }

    /// VALUE as a `Value` once no module call has failed; else the
    /// pending signal (which Emacs keeps over the one signalled here).
    pub fn finish(&self, value: emacs_value) -> Result<Value<'e>> {
        self.api.finish(value, "Building Lisp data failed")
    }

    pub fn int(&mut self, n: i64) -> emacs_value {
        if SMALL_INTS.contains(&n) {
            let slot = (n - SMALL_INTS.start) as usize;
            if let Some(v) = self.ints[slot] {
                return v;
            }
            let v = self.api.make_integer(n);
            self.ints[slot] = Some(v);
            return v;
        }
        self.api.make_integer(n)
    }

    pub fn position(&mut self, n: usize) -> emacs_value {
        self.int(i64::try_from(n).unwrap_or(i64::MAX))
    }

    fn float(&mut self, x: f64) -> emacs_value {
        if let Some(v) = self.floats.get(&x.to_bits()) {
            return *v;
        }
        let v = self.api.make_float(x);
        self.floats.insert(x.to_bits(), v);
        v
    }

    /// Call FUNC with ARGS.
    pub fn call(&mut self, func: emacs_value, args: &[emacs_value]) -> emacs_value {
        self.args.clear();
        self.args.extend_from_slice(args);
        self.call_args(func)
    }

    fn call_args(&mut self, func: emacs_value) -> emacs_value {
        self.api.funcall(func, &mut self.args)
    }

    pub fn vector_of(&mut self, items: &[emacs_value]) -> emacs_value {
        let vector = self.vector;
        self.call(vector, items)
    }

    pub fn list_of(&mut self, items: &[emacs_value]) -> emacs_value {
        if items.is_empty() {
            return self.nil;
        }
        let list = self.list;
        self.call(list, items)
    }

    /// A Lisp string from BYTES in Emacs's internal form (generalized
    /// UTF-8, raw bytes as `C0`/`C1` pairs).
    /// ASCII text becomes a unibyte string, as Emacs's reader makes it
    /// (and the cheaper module call: nothing to decode).
    pub fn string(&mut self, bytes: &[u8]) -> emacs_value {
        if bytes.is_ascii() {
            return self.api.make_unibyte_string(bytes);
        }
        if std::str::from_utf8(bytes).is_ok() {
            return self.utf8(bytes);
        }
        // Valid runs as strings, anything else one character at a time.
        let mut pieces = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let valid = match std::str::from_utf8(&bytes[i..]) {
                Ok(_) => bytes.len() - i,
                Err(e) => e.valid_up_to(),
            };
            if valid > 0 {
                pieces.push(self.utf8(&bytes[i..i + valid]));
                i += valid;
            } else {
                let Some((code, len)) = internal::char_at(&bytes[i..]) else {
                    break;
                };
                let code = self.int(i64::from(code));
                let string = self.string;
                pieces.push(self.call(string, &[code]));
                i += len;
            }
        }
        let concat = self.concat;
        self.call(concat, &pieces)
    }

    fn utf8(&mut self, text: &[u8]) -> emacs_value {
        self.api.make_string(text)
    }

    /// The symbol named NAME (Emacs's internal bytes), interned once.
    pub fn symbol(&mut self, name: &[u8]) -> emacs_value {
        if let Some(v) = self.symbols.get(name) {
            return *v;
        }
        let v = match CString::new(name) {
            Ok(c) if name.is_ascii() => self.api.intern(&c),
            _ => {
                let string = self.string(name);
                let intern = self.lisp_intern;
                self.call(intern, &[string])
            }
        };
        self.symbols.insert(name.to_vec(), v);
        v
    }

    /// Read the object printed at START of TEXT as Lisp data.
    pub fn read(
        &mut self,
        text: &[u8],
        start: usize,
        scratch: &mut Scratch<emacs_value>,
    ) -> std::result::Result<emacs_value, ReadError> {
        match read_plain(text, start, self, scratch) {
            Some((value, _)) => Ok(value),
            None => read_one_reusing(text, start, self, scratch).map(|(value, _)| value),
        }
    }
}

impl Build for RawData<'_> {
    type Node = emacs_value;

    fn int(&mut self, value: i64) -> emacs_value {
        RawData::int(self, value)
    }
    fn big_int(&mut self, digits: String) -> emacs_value {
        let digits = self.utf8(digits.as_bytes());
        let convert = self.string_to_number;
        self.call(convert, &[digits])
    }
    fn float(&mut self, value: f64) -> emacs_value {
        RawData::float(self, value)
    }
    fn string(&mut self, input: &[u8], range: Range<usize>) -> emacs_value {
        let body = &input[range];
        if memchr::memchr(b'\\', body).is_none() {
            RawData::string(self, body)
        } else {
            RawData::string(self, &unescape_string(body))
        }
    }
    fn symbol(&mut self, input: &[u8], range: Range<usize>) -> emacs_value {
        let token = &input[range];
        if token.contains(&b'\\') {
            RawData::symbol(self, &unescape_symbol(token))
        } else {
            RawData::symbol(self, token)
        }
    }
    fn named(&mut self, name: &'static str) -> emacs_value {
        RawData::symbol(self, name.as_bytes())
    }
    fn list(
        &mut self,
        items: Drain<'_, emacs_value>,
        tail: Option<emacs_value>,
        _depth: usize,
    ) -> emacs_value {
        match tail {
            None if items.len() == 0 => self.nil,
            None => {
                self.args.clear();
                self.args.extend(items);
                let list = self.list;
                self.call_args(list)
            }
            Some(tail) => items.rev().fold(tail, |acc, item| {
                let cons = self.cons;
                self.call(cons, &[item, acc])
            }),
        }
    }
    fn vector(&mut self, items: Drain<'_, emacs_value>) -> emacs_value {
        self.args.clear();
        self.args.extend(items);
        let vector = self.vector;
        self.call_args(vector)
    }
}
