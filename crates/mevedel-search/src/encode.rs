//! RFC 3986 percent-encoding of one address component.
//!
//! Canonical spelling keeps only unreserved bytes (`A-Z a-z 0-9 - . _ ~`)
//! literal and escapes every other UTF-8 byte with uppercase hex. Input
//! is more lenient: any byte may be literal or escaped in either hex case,
//! but escapes must be well formed and the decoded bytes valid UTF-8.

/// Why a component was refused; the parser adds the address around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentError {
    MalformedEscape,
    InvalidUtf8,
    DecodedSeparator,
    ControlCharacter,
    Empty,
    Dot,
    DotDot,
}

impl ComponentError {
    pub fn reason(&self) -> &'static str {
        match self {
            ComponentError::MalformedEscape => "malformed percent escape",
            ComponentError::InvalidUtf8 => "percent escapes do not decode to UTF-8",
            ComponentError::DecodedSeparator => "an escaped `/` inside a component",
            ComponentError::ControlCharacter => "a control character",
            ComponentError::Empty => "an empty path component",
            ComponentError::Dot => "a `.` component",
            ComponentError::DotDot => "a `..` component (parent traversal)",
        }
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Append the canonical spelling of TEXT to OUT, keeping the bytes in
/// KEEP literal as well as the unreserved ones.
pub fn encode_into(out: &mut String, text: &str, keep: &[u8]) {
    for &b in text.as_bytes() {
        if is_unreserved(b) || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
}

/// The canonical spelling of one component.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    encode_into(&mut out, text, &[]);
    out
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decode RAW's escapes once, without any component rule.
pub fn decode_raw(raw: &str) -> Result<String, ComponentError> {
    if !raw.as_bytes().contains(&b'%') {
        return Ok(raw.to_string());
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hi = bytes.get(i + 1).copied().and_then(hex_value);
            let lo = bytes.get(i + 2).copied().and_then(hex_value);
            match (hi, lo) {
                (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
                _ => return Err(ComponentError::MalformedEscape),
            }
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ComponentError::InvalidUtf8)
}

/// Decode one path component and apply the component rules: not empty,
/// not `.` or `..`, no decoded `/`, no control characters.
pub fn decode_component(raw: &str) -> Result<String, ComponentError> {
    if raw.is_empty() {
        return Err(ComponentError::Empty);
    }
    let text = decode_raw(raw)?;
    check_decoded(&text)?;
    Ok(text)
}

/// The rules a decoded component must satisfy.
pub fn check_decoded(text: &str) -> Result<(), ComponentError> {
    match text {
        "" => return Err(ComponentError::Empty),
        "." => return Err(ComponentError::Dot),
        ".." => return Err(ComponentError::DotDot),
        _ => {}
    }
    if text.contains('/') {
        return Err(ComponentError::DecodedSeparator);
    }
    if text.chars().any(char::is_control) {
        return Err(ComponentError::ControlCharacter);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_spelling() {
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(encode("Az09-._~"), "Az09-._~");
        assert_eq!(encode("é:#%"), "%C3%A9%3A%23%25");
    }

    #[test]
    fn decoding_accepts_both_hex_cases() {
        assert_eq!(decode_component("%c3%a9"), Ok("é".into()));
        assert_eq!(decode_component("%C3%A9"), Ok("é".into()));
        assert_eq!(decode_component("x%3Ay"), Ok("x:y".into()));
    }

    #[test]
    fn decoding_refusals() {
        let cases = [
            ("", ComponentError::Empty),
            (".", ComponentError::Dot),
            ("..", ComponentError::DotDot),
            ("%2E%2e", ComponentError::DotDot),
            ("%2e", ComponentError::Dot),
            ("a%2Fb", ComponentError::DecodedSeparator),
            ("a%2fb", ComponentError::DecodedSeparator),
            ("%", ComponentError::MalformedEscape),
            ("%4", ComponentError::MalformedEscape),
            ("%G0", ComponentError::MalformedEscape),
            ("%FF", ComponentError::InvalidUtf8),
            ("%C3", ComponentError::InvalidUtf8),
            ("a%00", ComponentError::ControlCharacter),
            ("a%0A", ComponentError::ControlCharacter),
            ("a\tb", ComponentError::ControlCharacter),
            ("%7F", ComponentError::ControlCharacter),
            ("%C2%85", ComponentError::ControlCharacter),
        ];
        for (raw, want) in cases {
            assert_eq!(decode_component(raw), Err(want), "{raw:?}");
        }
    }

    #[test]
    fn decoding_is_once_only() {
        assert_eq!(decode_component("%252F"), Ok("%2F".into()));
    }
}
