//! The PIPESTATUS snapshot: the line Bash appends to a command writes
//! the final pipeline's statuses, and whoever holds the other end of
//! [`SNAPSHOT_FD`] reads them (the supervising helper when confined,
//! the driver otherwise). Writer and readers share this definition.

/// Descriptor number on which the snapshot writes its statuses.
pub const SNAPSHOT_FD: i32 = 63;

/// SRC followed by the snapshot: one line that records `$?` and
/// `PIPESTATUS` on [`SNAPSHOT_FD`] and exits with the source's status.
/// No pipefail, no traps: the source runs exactly as written.
pub fn with_snapshot(src: &str) -> String {
    format!(
        "{src}\n__mevedel_st=\"$? ${{PIPESTATUS[*]}}\"; \
         {{ printf '%s\\n' \"$__mevedel_st\" >&{SNAPSHOT_FD}; }} 2>/dev/null; \
         exit \"${{__mevedel_st%% *}}\"\n"
    )
}

/// Parse what [`with_snapshot`] wrote: the statuses of the final
/// pipeline's stages, or `None` when the line is missing or malformed.
pub fn parse_snapshot(text: &str) -> Option<Vec<i32>> {
    let line = text.lines().next()?;
    let mut fields = line.split_whitespace();
    fields.next()?.parse::<i32>().ok()?;
    let statuses: Option<Vec<i32>> = fields.map(|f| f.parse().ok()).collect();
    statuses.filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_line_parses() {
        assert_eq!(parse_snapshot("0 141 0\n"), Some(vec![141, 0]));
        assert_eq!(parse_snapshot(""), None);
        assert_eq!(parse_snapshot("x 1"), None);
        assert_eq!(parse_snapshot("0"), None);
    }
}
