//! Printing [`Sexp`] values as text that both Emacs's `read` and our
//! reader turn back into equal data.
//!
//! The output is one line: newlines in strings are printed as `\n`, and
//! control characters and raw bytes as octal escapes. That keeps every
//! delimiter-shaped string inside a payload on the payload's own line.

use super::reader::{Sexp, parse_number_token};
use crate::text::internal;

/// Why a value cannot be printed as readable text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintError(pub &'static str);

/// Print VALUE onto OUT.
pub fn print(value: &Sexp, out: &mut String) -> Result<(), PrintError> {
    match value {
        Sexp::Int(n) => out.push_str(&n.to_string()),
        Sexp::BigInt(digits) => out.push_str(digits),
        Sexp::Float(x) => print_float(*x, out),
        Sexp::Str(bytes) => print_string(bytes, out),
        Sexp::Symbol(name) => print_symbol(name, out)?,
        Sexp::List(items, tail) => {
            out.push('(');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                print(item, out)?;
            }
            if let Some(tail) = tail {
                out.push_str(" . ");
                print(tail, out)?;
            }
            out.push(')');
        }
        Sexp::Vector(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                print(item, out)?;
            }
            out.push(']');
        }
    }
    Ok(())
}

fn print_float(x: f64, out: &mut String) {
    if x.is_nan() {
        out.push_str(if x.is_sign_negative() {
            "-0.0e+NaN"
        } else {
            "0.0e+NaN"
        });
    } else if x.is_infinite() {
        out.push_str(if x < 0.0 { "-1.0e+INF" } else { "1.0e+INF" });
    } else {
        // Debug is the shortest text that parses back to the same value,
        // and always has a `.` or an exponent, so it reads as a float.
        out.push_str(&format!("{x:?}"));
    }
}

fn print_string(bytes: &[u8], out: &mut String) {
    out.push('"');
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            match b {
                b'"' => out.push_str("\\\""),
                b'\\' => out.push_str("\\\\"),
                b'\n' => out.push_str("\\n"),
                0..=0x1F | 0x7F => out.push_str(&format!("\\{b:03o}")),
                _ => out.push(char::from(b)),
            }
            i += 1;
            continue;
        }
        let Some((code, len)) = internal::char_at(&bytes[i..]) else {
            break;
        };
        match char::from_u32(code) {
            Some(ch) => out.push(ch),
            // Raw bytes, also stray ones, as Emacs reads them.
            None if code >= internal::RAW_BYTE_BASE + 0x80 => {
                out.push_str(&format!("\\{:03o}", code - internal::RAW_BYTE_BASE));
            }
            None if code <= 0x10_FFFF => {
                // A surrogate: hex escape, ended by an ignored `\ `.
                out.push_str(&format!("\\x{code:x}\\ "));
            }
            None => out.push('\u{FFFD}'),
        }
        i += len;
    }
    out.push('"');
}

/// True for ASCII bytes that need no backslash in a symbol name.
fn plain_symbol_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-+*/_~!@$%^&=<>{}|:?.".contains(&b)
}

fn print_symbol(name: &[u8], out: &mut String) -> Result<(), PrintError> {
    if name.is_empty() {
        out.push_str("##");
        return Ok(());
    }
    let text = std::str::from_utf8(name)
        .map_err(|_| PrintError("a symbol name holds raw bytes or surrogates"))?;
    let looks_special = name == b"." || name[0] == b'?' || parse_number_token(name);
    for (i, ch) in text.chars().enumerate() {
        let plain = if ch.is_ascii() {
            plain_symbol_byte(ch as u8)
        } else {
            ch != '\u{A0}'
        };
        if !plain || (i == 0 && looks_special) {
            out.push('\\');
        }
        out.push(ch);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::reader::{Tree, read_one};
    use super::*;

    fn printed(value: &Sexp) -> String {
        let mut out = String::new();
        print(value, &mut out).unwrap();
        out
    }

    fn round_trip(value: Sexp) {
        let text = printed(&value);
        let (back, end) = read_one(text.as_bytes(), 0, &mut Tree).unwrap();
        assert_eq!(end, text.len(), "{text}");
        match (&value, &back) {
            (Sexp::Float(a), Sexp::Float(b)) if a.is_nan() => {
                assert!(b.is_nan() && a.is_sign_negative() == b.is_sign_negative())
            }
            _ => assert_eq!(back, value, "{text}"),
        }
    }

    #[test]
    fn values_round_trip() {
        let values = vec![
            Sexp::Int(0),
            Sexp::Int(i64::MIN),
            Sexp::BigInt("-99999999999999999999999".into()),
            Sexp::Float(1.0),
            Sexp::Float(-0.0),
            Sexp::Float(1e20),
            Sexp::Float(5e-324),
            Sexp::Float(f64::INFINITY),
            Sexp::Float(-f64::NAN),
            Sexp::Str(b"quote \" backslash \\ newline \n tab \t nul \0 del \x7f".to_vec()),
            Sexp::string("é 漢 🎉"),
            Sexp::Str(vec![b'a', 0xC0, 0x80, 0xC1, 0xBF, b'1']),
            Sexp::Str(vec![0xED, 0xA0, 0x80, b'f']),
            Sexp::symbol(""),
            Sexp::symbol("1"),
            Sexp::symbol("-1.5"),
            Sexp::symbol("."),
            Sexp::symbol("?x"),
            Sexp::symbol("a b;c#d(e)[f]\"g'h`i,j\\k"),
            Sexp::symbol(":keyword"),
            Sexp::symbol("sym\u{A0}nbsp"),
            Sexp::List(
                vec![Sexp::Int(1), Sexp::Vector(vec![Sexp::nil()])],
                Some(Box::new(Sexp::symbol("tail"))),
            ),
        ];
        for value in values {
            round_trip(value);
        }
    }

    #[test]
    fn strings_print_on_one_line() {
        let text = printed(&Sexp::Str(b"a\n<!-- /mevedel-render-data -->\nb".to_vec()));
        assert!(!text.contains('\n'), "{text}");
    }

    #[test]
    fn raw_bytes_in_symbol_names_are_refused() {
        let mut out = String::new();
        assert!(print(&Sexp::Symbol(vec![0xC0, 0x80]), &mut out).is_err());
    }

    #[test]
    fn stray_bytes_print_as_the_raw_bytes_emacs_reads() {
        // A lead whose next byte does not continue it keeps that byte.
        let value = Sexp::Str(vec![0xC3, b'"', 0xFF, 0xE0, 0x80, 0x80]);
        assert_eq!(printed(&value), r#""\303\"\377\340\200\200""#);
        round_trip(Sexp::Str(vec![0xC1, 0x83, b'"', 0xC1, 0xBF]));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_print_as_the_characters_emacs_reads(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..32)
        ) {
            let text = printed(&Sexp::Str(bytes.clone()));
            let (back, _) = read_one(text.as_bytes(), 0, &mut Tree).unwrap();
            let mut want = Vec::new();
            let mut i = 0;
            while let Some((code, len)) = internal::char_at(&bytes[i..]) {
                // Characters above U+10FFFF have no printed form here.
                let code = if (0x11_0000..0x3F_FF80).contains(&code) { 0xFFFD } else { code };
                internal::push_char(&mut want, code);
                i += len;
            }
            proptest::prop_assert_eq!(back, Sexp::Str(want));
        }
    }
}
