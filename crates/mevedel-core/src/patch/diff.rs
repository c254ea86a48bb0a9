//! Unified diff hunks of a computed change, with 3 lines of context.
//!
//! The change is known as replacements of old line ranges (what the
//! patch's hunks matched), so only those ranges are diffed: each one's
//! common head and tail are trimmed and the rest is aligned by a longest
//! common subsequence (or, past [`LCS_CELLS`], shown as removed then
//! added). Neighbouring changes of one patch hunk closer than twice the
//! context share a diff hunk, as `diff -u` does; changes of two patch
//! hunks never do (each `@@` section the model wrote stays a hunk the
//! reviewer decides alone), and when they are close the context between
//! them is shared out so that the two hunks do not overlap.

use super::apply::Replacement;

/// Lines of context around each change.
pub const CONTEXT: usize = 3;

/// Largest old×new region aligned line by line.
const LCS_CELLS: usize = 4_000_000;

/// One hunk of a unified diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffHunk {
    /// 0-based first old line the hunk covers, and how many.
    pub old_from: usize,
    pub old_count: usize,
    /// 0-based first new line, and how many.
    pub new_from: usize,
    pub new_count: usize,
    pub added: usize,
    pub removed: usize,
    /// Every line of the hunk: (' ' | '-' | '+', text).
    pub lines: Vec<(char, String)>,
    /// The old file's last line is in the hunk and has no newline.
    pub old_no_newline: bool,
    pub new_no_newline: bool,
    /// The text after the header, as `diff -p` prints a function name:
    /// the `@@` anchor of the patch hunk the change came from.
    pub section: Option<String>,
}

impl DiffHunk {
    /// `@@ -12,7 +12,9 @@`, line numbers as `diff -u` prints them.
    pub fn header(&self) -> String {
        let mut out = format!(
            "@@ -{} +{} @@",
            range(self.old_from, self.old_count),
            range(self.new_from, self.new_count)
        );
        if let Some(section) = &self.section {
            out.push(' ');
            out.push_str(section);
        }
        out
    }

    pub fn old_start(&self) -> usize {
        if self.old_count == 0 {
            self.old_from
        } else {
            self.old_from + 1
        }
    }

    pub fn new_start(&self) -> usize {
        if self.new_count == 0 {
            self.new_from
        } else {
            self.new_from + 1
        }
    }

    /// The hunk's lines, each prefixed and newline-terminated.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let last_old = self.lines.iter().rposition(|(c, _)| *c != '+');
        let last_new = self.lines.iter().rposition(|(c, _)| *c != '-');
        for (i, (c, line)) in self.lines.iter().enumerate() {
            out.push(*c);
            out.push_str(line);
            out.push('\n');
            let old_end = self.old_no_newline && Some(i) == last_old;
            let new_end = self.new_no_newline && Some(i) == last_new;
            if (*c == ' ' && (old_end || new_end))
                || (*c == '-' && old_end)
                || (*c == '+' && new_end)
            {
                out.push_str("\\ No newline at end of file\n");
            }
        }
        out
    }

    /// The new side: the lines the file will hold in place of the old side.
    pub fn new_side(&self) -> Vec<String> {
        self.lines
            .iter()
            .filter(|(c, _)| *c != '-')
            .map(|(_, l)| l.clone())
            .collect()
    }

    /// The new side as text, newline-terminated (LF) unless it ends a
    /// file without a final newline.
    pub fn new_text(&self) -> String {
        let side = self.new_side();
        let mut out = side.join("\n");
        if !side.is_empty() && !self.new_no_newline {
            out.push('\n');
        }
        out
    }
}

fn range(from: usize, count: usize) -> String {
    match count {
        0 => format!("{from},0"),
        1 => format!("{}", from + 1),
        n => format!("{},{n}", from + 1),
    }
}

/// A run of changed lines: old OLD..OLD+DEL become new NEW..NEW+INS,
/// made by the replacement numbered FROM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Change {
    old: usize,
    del: usize,
    new: usize,
    ins: usize,
    from: usize,
}

/// The diff hunks from OLD to NEW, where NEW is OLD with REPLACEMENTS
/// made. OLD_NL / NEW_NL: whether each ends with a newline.
pub fn hunks(
    old: &[String],
    new: &[String],
    replacements: &[Replacement],
    old_nl: bool,
    new_nl: bool,
) -> Vec<DiffHunk> {
    let mut changes = Vec::new();
    let mut shift: isize = 0;
    for (from, r) in replacements.iter().enumerate() {
        let new_start = (r.start as isize + shift) as usize;
        align(
            &old[r.start..r.start + r.old_len],
            &r.new,
            (r.start, new_start, from),
            &mut changes,
        );
        shift += r.new.len() as isize - r.old_len as isize;
    }
    // A change of only the final newline shows as the last line changed.
    if old_nl != new_nl && !old.is_empty() && !new.is_empty() {
        let (o, n) = (old.len() - 1, new.len() - 1);
        let covered = changes
            .last()
            .is_some_and(|c| c.old + c.del == old.len() && c.new + c.ins == new.len());
        if !covered && old[o] == new[n] {
            changes.push(Change {
                old: o,
                del: 1,
                new: n,
                ins: 1,
                from: replacements.len().saturating_sub(1),
            });
        }
    }
    group(old, new, &changes, old_nl, new_nl)
}

/// Changes turning OLD into NEW (both slices), offset to file lines by
/// AT's first two (old, new) and made by the replacement AT's third.
fn align(old: &[String], new: &[String], at: (usize, usize, usize), out: &mut Vec<Change>) {
    let (o0, n0, from) = at;
    let head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (a, b) = (&old[head..old.len() - tail], &new[head..new.len() - tail]);
    let (o0, n0) = (o0 + head, n0 + head);
    if a.is_empty() && b.is_empty() {
        return;
    }
    if a.is_empty() || b.is_empty() || a.len().saturating_mul(b.len()) > LCS_CELLS {
        out.push(Change {
            old: o0,
            del: a.len(),
            new: n0,
            ins: b.len(),
            from,
        });
        return;
    }
    // LCS lengths of suffixes: table[i][j] for a[i..], b[j..].
    let w = b.len() + 1;
    let mut table = vec![0u32; (a.len() + 1) * w];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            table[i * w + j] = if a[i] == b[j] {
                table[(i + 1) * w + j + 1] + 1
            } else {
                table[(i + 1) * w + j].max(table[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut pending: Option<Change> = None;
    let flush = |pending: &mut Option<Change>, out: &mut Vec<Change>| {
        if let Some(c) = pending.take() {
            out.push(c);
        }
    };
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            flush(&mut pending, out);
            i += 1;
            j += 1;
            continue;
        }
        let c = pending.get_or_insert(Change {
            old: o0 + i,
            del: 0,
            new: n0 + j,
            ins: 0,
            from,
        });
        if i < a.len() && (j == b.len() || table[(i + 1) * w + j] >= table[i * w + j + 1]) {
            c.del += 1;
            i += 1;
        } else {
            c.ins += 1;
            j += 1;
        }
    }
    flush(&mut pending, out);
}

fn group(
    old: &[String],
    new: &[String],
    changes: &[Change],
    old_nl: bool,
    new_nl: bool,
) -> Vec<DiffHunk> {
    let mut out = Vec::new();
    let mut k = 0;
    // Where the previous hunk's old lines end: no hunk starts before it.
    let mut floor = 0;
    while k < changes.len() {
        let mut last = k;
        while last + 1 < changes.len()
            && changes[last + 1].from == changes[last].from
            && changes[last + 1].old - (changes[last].old + changes[last].del) <= 2 * CONTEXT
        {
            last += 1;
        }
        let first = changes[k];
        let end = changes[last];
        let before = first.old.min(CONTEXT).min(first.new).min(first.old - floor);
        let old_from = first.old - before;
        let new_from = first.new - before;
        let changed_end = end.old + end.del;
        // A close hunk of the next replacement gets the later half of
        // the lines between them as its context.
        let limit = changes.get(last + 1).map_or(old.len(), |next| {
            changed_end + (next.old - changed_end).div_ceil(2)
        });
        let old_end = (changed_end + CONTEXT).min(old.len()).min(limit);
        let after = old_end - (end.old + end.del);
        let new_end = end.new + end.ins + after;
        let mut lines = Vec::new();
        let mut o = old_from;
        let (mut added, mut removed) = (0, 0);
        for c in &changes[k..=last] {
            while o < c.old {
                lines.push((' ', old[o].clone()));
                o += 1;
            }
            for line in &old[c.old..c.old + c.del] {
                lines.push(('-', line.clone()));
            }
            for line in &new[c.new..c.new + c.ins] {
                lines.push(('+', line.clone()));
            }
            removed += c.del;
            added += c.ins;
            o = c.old + c.del;
        }
        while o < old_end {
            lines.push((' ', old[o].clone()));
            o += 1;
        }
        out.push(DiffHunk {
            old_from,
            old_count: old_end - old_from,
            new_from,
            new_count: new_end - new_from,
            added,
            removed,
            lines,
            old_no_newline: !old_nl && old_end == old.len() && old_end > old_from,
            new_no_newline: !new_nl && new_end == new.len() && new_end > new_from,
            section: None,
        });
        floor = old_end;
        k = last + 1;
    }
    out
}

/// Give each hunk the SECTIONS entry of the first replacement it
/// overlaps (SECTIONS parallel to REPLACEMENTS).
pub fn name_sections(
    hunks: &mut [DiffHunk],
    replacements: &[Replacement],
    sections: &[Option<String>],
) {
    for h in hunks.iter_mut() {
        let (from, to) = (h.old_from, h.old_from + h.old_count);
        h.section = replacements
            .iter()
            .zip(sections)
            .find(|(r, _)| r.start <= to && r.start + r.old_len >= from)
            .and_then(|(_, s)| s.clone());
    }
}

/// A whole-file unified diff: `---`/`+++` lines, then each hunk.
pub fn unified(old_name: &str, new_name: &str, hunks: &[DiffHunk]) -> String {
    if hunks.is_empty() {
        return String::new();
    }
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    for h in hunks {
        out.push_str(&h.header());
        out.push('\n');
        out.push_str(&h.text());
    }
    out
}

/// The unified diff of BEFORE against NOW, files named OLD_NAME and
/// NEW_NAME; text that is not UTF-8 is shown lossily.
pub fn whole_file(before: &[u8], now: &[u8], old_name: &str, new_name: &str) -> String {
    let lines = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        let newline = text.ends_with('\n');
        let body = text.strip_suffix('\n').unwrap_or(&text);
        let lines: Vec<String> = if body.is_empty() && !newline {
            Vec::new()
        } else {
            body.split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
                .collect()
        };
        (lines, newline || bytes.is_empty())
    };
    let (old, old_nl) = lines(before);
    let (new, new_nl) = lines(now);
    let whole = Replacement {
        start: 0,
        old_len: old.len(),
        new: new.clone(),
    };
    unified(
        old_name,
        new_name,
        &hunks(&old, &new, &[whole], old_nl, new_nl),
    )
}

/// One changed file for [`changes`]: its name and both texts.
pub struct FileChange {
    pub name: String,
    pub before: Vec<u8>,
    pub now: Vec<u8>,
}

/// The unified diffs of CHANGES, in order, within BUDGET characters in
/// all: a diff that does not fit in what is left is None, so the caller
/// names that file instead of cutting its diff at an arbitrary line.
/// STOP is asked between files; once it says so, the rest are None too.
pub fn changes(
    changes: &[FileChange],
    budget: usize,
    stop: impl Fn() -> bool,
) -> Vec<Option<String>> {
    let mut left = budget;
    changes
        .iter()
        .map(|c| {
            if stop() {
                return None;
            }
            let diff = whole_file(&c.before, &c.now, &c.name, &c.name);
            let size = diff.chars().count();
            (size <= left).then(|| {
                left -= size;
                diff
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_fit_a_budget_for_all_and_name_the_rest() {
        let change = |name: &str, before: &str, now: &str| FileChange {
            name: name.into(),
            before: before.as_bytes().to_vec(),
            now: now.as_bytes().to_vec(),
        };
        let big_before: String = (0..200).map(|n| format!("line {n}\n")).collect();
        let big_now: String = (0..200).map(|n| format!("LINE {n}\n")).collect();
        let list = [
            change("a", "x\n", "y\n"),
            change("big", &big_before, &big_now),
            change("b", "p\n", "q\n"),
        ];
        let out = changes(&list, 200, || false);
        assert_eq!(
            out[0].as_deref(),
            Some("--- a\n+++ a\n@@ -1 +1 @@\n-x\n+y\n")
        );
        assert_eq!(out[1], None);
        assert!(out[2].is_some());
        assert!(changes(&list, 100_000, || true).iter().all(Option::is_none));
    }

    fn v(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    fn whole(old: &[String], new: &[String]) -> Vec<Replacement> {
        vec![Replacement {
            start: 0,
            old_len: old.len(),
            new: new.to_vec(),
        }]
    }

    #[test]
    fn one_change_with_context() {
        let old = v("1\n2\n3\n4\n5\n6\n7\n8\n9");
        let new = v("1\n2\n3\n4\nfive\n6\n7\n8\n9");
        let h = hunks(&old, &new, &whole(&old, &new), true, true);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].header(), "@@ -2,7 +2,7 @@");
        assert_eq!(h[0].text(), " 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
        assert_eq!((h[0].added, h[0].removed), (1, 1));
        assert_eq!(h[0].new_text(), "2\n3\n4\nfive\n6\n7\n8\n");
    }

    #[test]
    fn distant_changes_are_separate_hunks() {
        let old: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
        let mut new = old.clone();
        new[1] = "two".into();
        new[18] = "nineteen".into();
        let h = hunks(&old, &new, &whole(&old, &new), true, true);
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].header(), "@@ -1,5 +1,5 @@");
        assert_eq!(h[1].header(), "@@ -16,5 +16,5 @@");
    }

    #[test]
    fn pure_insertion_and_deletion_headers() {
        let old: Vec<String> = vec![];
        let new = v("a\nb");
        let h = hunks(&old, &new, &whole(&old, &new), true, true);
        assert_eq!(h[0].header(), "@@ -0,0 +1,2 @@");
        let h = hunks(&new, &old, &whole(&new, &old), true, true);
        assert_eq!(h[0].header(), "@@ -1,2 +0,0 @@");
    }

    #[test]
    fn missing_final_newline_is_marked() {
        let old = v("a\nb");
        let new = v("a\nc");
        let h = hunks(&old, &new, &whole(&old, &new), false, false);
        assert_eq!(
            h[0].text(),
            " a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
        );
        assert_eq!(h[0].new_text(), "a\nc");
    }

    #[test]
    fn lcs_keeps_common_lines() {
        let old = v("a\nb\nc\nd");
        let new = v("a\nx\nc\ny");
        let h = hunks(&old, &new, &whole(&old, &new), true, true);
        assert_eq!(h[0].text(), " a\n-b\n+x\n c\n-d\n+y\n");
    }

    #[test]
    fn close_changes_of_two_patch_hunks_stay_two_hunks() {
        let old: Vec<String> = (1..=12).map(|i| i.to_string()).collect();
        let mut new = old.clone();
        new[3] = "four".into();
        new[7] = "eight".into();
        let replacements = vec![
            Replacement {
                start: 3,
                old_len: 1,
                new: vec!["four".into()],
            },
            Replacement {
                start: 7,
                old_len: 1,
                new: vec!["eight".into()],
            },
        ];
        let h = hunks(&old, &new, &replacements, true, true);
        assert_eq!(h.len(), 2);
        // Lines 5..7 between the changes are shared out: 5 and 6 to the
        // first hunk, 7 to the second, so the hunks do not overlap.
        assert_eq!(h[0].text(), " 1\n 2\n 3\n-4\n+four\n 5\n 6\n");
        assert_eq!(h[1].text(), " 7\n-8\n+eight\n 9\n 10\n 11\n");
        assert_eq!(h[0].old_from + h[0].old_count, h[1].old_from);
        // One replacement's close changes still share a hunk.
        let h = hunks(&old, &new, &whole(&old, &new), true, true);
        assert_eq!(h.len(), 1);
    }
}
