//! The decoder against a reference model written the other way round:
//! a sequence is valid when re-encoding its value gives it back.

use proptest::prelude::*;

use super::*;

/// Emacs's encoding of character C by its value ranges, or `None` above
/// #x3FFF7F (raw-byte characters aside).
fn encode_ref(c: u32) -> Option<Vec<u8>> {
    let cont = |shift: u32| 0x80 | ((c >> shift) & 0x3F) as u8;
    Some(if c < 0x80 {
        vec![c as u8]
    } else if c < 0x800 {
        vec![0xC0 | (c >> 6) as u8, cont(0)]
    } else if c < 0x1_0000 {
        vec![0xE0 | (c >> 12) as u8, cont(6), cont(0)]
    } else if c < 0x20_0000 {
        vec![0xF0 | (c >> 18) as u8, cont(12), cont(6), cont(0)]
    } else if c <= 0x3F_FF7F {
        vec![0xF8, cont(18), cont(12), cont(6), cont(0)]
    } else {
        return None;
    })
}

/// How long the sequence led by B would be: its leading one bits, but
/// only `F8` among the five-bit leads.
fn shape_len(b: u8) -> usize {
    match b.leading_ones() {
        0 => 1,
        n @ 2..=4 => n as usize,
        5 if b == 0xF8 => 5,
        _ => 1,
    }
}

fn reference(bytes: &[u8]) -> (Unit, usize) {
    let b = bytes[0];
    let n = shape_len(b);
    if b < 0x80 {
        return (Unit::Char(u32::from(b)), 1);
    }
    if n == 1 || bytes.len() < n || !bytes[1..n].iter().all(|&c| c & 0xC0 == 0x80) {
        return (Unit::Stray(b), 1);
    }
    if n == 2 && b <= 0xC1 {
        return (Unit::Raw(0x80 + ((b & 1) << 6) + (bytes[1] & 0x3F)), 2);
    }
    let payload_bits = 7 - n as u32;
    let mut value = u32::from(b) & ((1 << payload_bits) - 1);
    for &c in &bytes[1..n] {
        value = value * 64 + u32::from(c & 0x3F);
    }
    match encode_ref(value) {
        Some(encoded) if encoded == bytes[..n] => (Unit::Char(value), n),
        _ => (Unit::Malformed, n),
    }
}

fn units(bytes: &[u8]) -> Vec<(Unit, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some((unit, len)) = decode(&bytes[i..]) {
        assert!(
            len >= 1 && i + len <= bytes.len(),
            "{bytes:x?} at {i}: {len}"
        );
        out.push((unit, len));
        i += len;
    }
    assert_eq!(i, bytes.len());
    out
}

fn reference_units(bytes: &[u8]) -> Vec<(Unit, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let (unit, len) = reference(&bytes[i..]);
        out.push((unit, len));
        i += len;
    }
    out
}

/// One piece of every lead-byte class, with the units it must read as.
fn piece() -> impl Strategy<Value = (Vec<u8>, Vec<Unit>)> {
    let char_in = |lo: u32, hi: u32| {
        (lo..=hi).prop_map(|c| (encode_ref(c).unwrap_or_default(), vec![Unit::Char(c)]))
    };
    // A value below LEN's range written in LEN bytes.
    let overlong = |len: usize| {
        (0u32..MIN_VALUE[len]).prop_map(move |v| {
            let lead = [0, 0, 0xC0, 0xE0, 0xF0, 0xF8][len];
            let mut bytes = vec![lead | (v >> (6 * (len - 1))) as u8];
            bytes.extend(
                (0..len - 1)
                    .rev()
                    .map(|k| 0x80 | ((v >> (6 * k)) & 0x3F) as u8),
            );
            (bytes, vec![Unit::Malformed])
        })
    };
    prop_oneof![
        char_in(0, 0x7F),
        char_in(0x80, 0x7FF),
        char_in(0x800, 0xFFFF),
        char_in(0x1_0000, 0x1F_FFFF),
        char_in(0x20_0000, 0x3F_FF7F),
        (0x80u8..=0xFF).prop_map(|b| (
            vec![0xC0 | (b >> 6 & 1), 0x80 | (b & 0x3F)],
            vec![Unit::Raw(b)]
        )),
        (0x80u8..=0xBF).prop_map(|b| (vec![b], vec![Unit::Stray(b)])),
        (0xF9u8..=0xFF).prop_map(|b| (vec![b], vec![Unit::Stray(b)])),
        overlong(3),
        overlong(4),
        overlong(5),
        // Five bytes above #x3FFF7F: F8 8F BF BE 80 and up, or F8 9x...
        (0x3F_FF80u32..=0xFF_FFFF).prop_map(|v| {
            let mut bytes = vec![0xF8];
            bytes.extend((0..4).rev().map(|k| 0x80 | ((v >> (6 * k)) & 0x3F) as u8));
            (bytes, vec![Unit::Malformed])
        }),
        // A lead followed by a byte that does not continue it.
        (0xC0u8..=0xF8, 0u8..0x80).prop_map(|(lead, next)| {
            (
                vec![lead, next],
                vec![Unit::Stray(lead), Unit::Char(u32::from(next))],
            )
        }),
        // A valid sequence cut short: every byte left is stray.
        (0x80u32..=0x3F_FF7F, any::<prop::sample::Index>()).prop_map(|(c, cut)| {
            let mut bytes = encode_ref(c).unwrap_or_default();
            bytes.truncate(1 + cut.index(bytes.len() - 1));
            let units = bytes.iter().map(|&b| Unit::Stray(b)).collect();
            (bytes, units)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn raw_bytes_decode_as_the_reference_says(bytes in prop::collection::vec(any::<u8>(), 0..48)) {
        prop_assert_eq!(units(&bytes), reference_units(&bytes));
        for i in 0..bytes.len() {
            let (code, len) = char_at(&bytes[i..]).unwrap_or_default();
            prop_assert_eq!(len, char_len(&bytes[i..]));
            let mut again = Vec::new();
            push_char(&mut again, code);
            // What Emacs reads it as, written back, is the same bytes
            // unless they were a stray byte (now in two-byte form).
            if code < RAW_BYTE_BASE + 0x80 || len == 2 {
                prop_assert_eq!(&again[..], &bytes[i..i + len]);
            } else {
                prop_assert_eq!(len, 1);
            }
        }
    }

    #[test]
    fn every_lead_class_reads_as_its_units(pieces in prop::collection::vec(piece(), 0..16)) {
        let mut bytes = Vec::new();
        let mut want = Vec::new();
        for (piece, units) in pieces {
            bytes.extend_from_slice(&piece);
            want.extend(units);
            // ASCII between pieces ends any cut-short sequence.
            bytes.push(b'.');
            want.push(Unit::Char(u32::from(b'.')));
        }
        let got: Vec<Unit> = units(&bytes).into_iter().map(|(u, _)| u).collect();
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(units(&bytes), reference_units(&bytes));
    }
}

#[test]
fn every_character_round_trips() {
    let mut buf = Vec::with_capacity(5);
    for code in 0..=0x3F_FFFF {
        buf.clear();
        push_char(&mut buf, code);
        assert_eq!(char_at(&buf), Some((code, buf.len())), "{code:#x}");
        let unit = decode(&buf).map(|(u, _)| u);
        if code >= 0x3F_FF80 {
            assert_eq!(unit, Some(Unit::Raw((code - RAW_BYTE_BASE) as u8)));
        } else {
            assert_eq!(unit, Some(Unit::Char(code)), "{code:#x}");
            assert_eq!(encode_ref(code).as_deref(), Some(&buf[..]));
        }
    }
}

#[test]
fn every_two_byte_string_matches_the_reference() {
    for a in 0..=0xFFu8 {
        for b in 0..=0xFFu8 {
            assert_eq!(units(&[a, b]), reference_units(&[a, b]), "{a:02x} {b:02x}");
        }
    }
}

#[test]
fn lead_classes() {
    assert_eq!(Lead::of(b'a').seq_len(), 1);
    assert_eq!(Lead::of(0xBF), Lead::Continuation);
    assert_eq!(Lead::of(0xC1), Lead::RawByte);
    assert_eq!(Lead::of(0xF8).seq_len(), 5);
    assert_eq!(Lead::of(0xF9), Lead::Invalid);
    assert!(is_continuation(0x80) && is_continuation(0xBF));
    assert!(!is_continuation(0x7F) && !is_continuation(0xC0));
}

#[test]
fn emacs_forms() {
    assert_eq!(decode(&[0xC0, 0x80]), Some((Unit::Raw(0x80), 2)));
    assert_eq!(decode(&[0xC1, 0xBF]), Some((Unit::Raw(0xFF), 2)));
    assert_eq!(char_at(&[0xC1, 0xBF]), Some((0x3F_FFFF, 2)));
    assert_eq!(decode(&[0xED, 0xA0, 0x80]), Some((Unit::Char(0xD800), 3)));
    assert_eq!(
        decode(&[0xF8, 0x8F, 0xBF, 0xBD, 0xBF]),
        Some((Unit::Char(0x3F_FF7F), 5))
    );
    assert_eq!(
        decode(&[0xF8, 0x8F, 0xBF, 0xBE, 0x80]),
        Some((Unit::Malformed, 5))
    );
    assert_eq!(decode(&[0xE0, 0x80, 0x80]), Some((Unit::Malformed, 3)));
    assert_eq!(char_at(&[0xE0, 0x80, 0x80]), Some((0x3F_FFE0, 1)));
    assert_eq!(decode(&[0xE6, 0xBC]), Some((Unit::Stray(0xE6), 1)));
    assert_eq!(decode(&[0xC3, b'"']), Some((Unit::Stray(0xC3), 1)));
    assert_eq!(decode(&[]), None);
    assert_eq!(char_len(&[]), 0);
}
