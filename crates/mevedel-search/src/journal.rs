//! Public journal entries: `YYYY-MM-DDTHH:MM:SSZ[-SLUG].md` files in the
//! workspace's `.mevedel/journal/`, recalled for a limited number of days
//! after the creation time their name records.

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn number(text: &str) -> Option<i64> {
    if text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse().ok()
    } else {
        None
    }
}

/// Creation time (epoch seconds) of a well-formed entry NAME, else None.
pub fn entry_time(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".md")?;
    if stem.len() < 20 || !stem.is_char_boundary(20) {
        return None;
    }
    let (stamp, slug) = stem.split_at(20);
    if !slug.is_empty() {
        let s = slug.strip_prefix('-')?;
        if s.is_empty()
            || !s
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return None;
        }
    }
    let b = stamp.as_bytes();
    if b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let y = number(&stamp[0..4])?;
    let mo = number(&stamp[5..7])?;
    let d = number(&stamp[8..10])?;
    let h = number(&stamp[11..13])?;
    let mi = number(&stamp[14..16])?;
    let s = number(&stamp[17..19])?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s;
    u64::try_from(secs).ok()
}

/// True when NAME is a well-formed entry still within RECALL_DAYS at NOW.
pub fn recallable(name: &str, now: u64, recall_days: u64) -> bool {
    entry_time(name).is_some_and(|t| t <= now && now - t <= recall_days * 86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names() {
        assert_eq!(entry_time("1970-01-01T00:00:00Z.md"), Some(0));
        assert_eq!(
            entry_time("2026-05-01T12:30:00Z-digest.md"),
            Some(1_777_638_600)
        );
        for bad in [
            "2026-05-01T12:30:00Z",
            "2026-05-01 12:30:00Z.md",
            "2026-13-01T12:30:00Z.md",
            "2026-05-01T12:30:00Z-.md",
            "2026-05-01T12:30:00Z-a b.md",
            "notes.md",
            "2026-05-01T12:30:00Zx.md",
        ] {
            assert_eq!(entry_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn recall_window() {
        let t = 1_777_638_600;
        let name = "2026-05-01T12:30:00Z.md";
        assert!(recallable(name, t, 14));
        assert!(recallable(name, t + 14 * 86_400, 14));
        assert!(!recallable(name, t + 14 * 86_400 + 1, 14));
        // Entries from the future are not yet published.
        assert!(!recallable(name, t - 1, 14));
    }
}
