//! Printing [`Sexp`] values as text that both Emacs's `read` and our
//! reader turn back into equal data.
//!
//! The output is one line: newlines in strings are printed as `\n`, and
//! control characters and raw bytes as octal escapes. That keeps every
//! delimiter-shaped string inside a payload on the payload's own line.

use super::reader::{Sexp, parse_number_token};

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

/// Decode the character at BYTES[I] of Emacs's internal form: its code
/// (raw bytes as `0x3FFF00 + byte`) and length.
fn internal_char(bytes: &[u8], i: usize) -> (u32, usize) {
    let lead = bytes[i];
    let len = match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        0xF8 => 5,
        _ => 1,
    };
    if len == 1 || i + len > bytes.len() {
        return (u32::from(lead), 1);
    }
    let init = u32::from(lead) & (0x7F >> len);
    let code = bytes[i + 1..i + len]
        .iter()
        .fold(init, |acc, &b| (acc << 6) | u32::from(b & 0x3F));
    if lead == 0xC0 || lead == 0xC1 {
        // Emacs's raw-byte form.
        return (0x3F_FF00 + (code | 0x80), 2);
    }
    (code, len)
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
        let (code, len) = internal_char(bytes, i);
        match char::from_u32(code) {
            Some(ch) if len > 1 => out.push(ch),
            _ if code >= 0x3F_FF80 => out.push_str(&format!("\\{:03o}", code - 0x3F_FF00)),
            _ if len > 1 && code <= 0x10_FFFF => {
                // A surrogate: hex escape, ended by an ignored `\ `.
                out.push_str(&format!("\\x{code:x}\\ "));
            }
            _ => out.push('\u{FFFD}'),
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
            Sexp::Str("é 漢 🎉".as_bytes().to_vec()),
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
}
