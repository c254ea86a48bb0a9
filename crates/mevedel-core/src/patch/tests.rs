//! Golden scenarios (`test/patch-fixtures/NAME/{before/,patch,after/}`
//! or `expected-error`), atomicity under injected failures, selections,
//! and property tests of the parser and of apply-then-reverse.
//!
//! The property tests run `MEVEDEL_PATCH_CASES` cases each (default
//! 2,000, so `cargo test` stays fast).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::apply::{self, TextFile};
use super::commit::FAIL_RENAME;
use super::grammar::Op;
use super::*;

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// A fresh empty directory under the system temporary directory.
fn temp_dir(tag: &str) -> PathBuf {
    let n = DIRS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mevedel-patch-{tag}-{}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every file under ROOT (relative path → bytes); directories as `None`
/// when empty.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for (rel, bytes) in tree(from) {
        let dest = to.join(rel);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::write(dest, bytes).unwrap();
    }
    // Empty directories are not in fixtures; none are needed.
}

/// Every authored path of PATCH resolved under ROOT.
fn paths_under(patch: &Patch, root: &Path) -> HashMap<String, PathBuf> {
    let mut paths = HashMap::new();
    for op in &patch.ops {
        paths.insert(op.path().to_string(), root.join(op.path()));
        if let Op::Update {
            move_to: Some(to), ..
        } = op
        {
            paths.insert(to.clone(), root.join(to));
        }
    }
    paths
}

/// Parse, plan and apply TEXT in ROOT.
fn run_patch(text: &str, root: &Path) -> crate::Result<Outcome> {
    let patch = parse(text)?;
    let plan = plan(&patch, &paths_under(&patch, root))?;
    apply(&plan, &|_| FileChoice::All)
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test/patch-fixtures")
}

#[test]
fn golden_scenarios() {
    let mut names: Vec<_> = fs::read_dir(fixtures())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    assert!(names.len() >= 20, "fixtures missing: {names:?}");
    let mut failures = Vec::new();
    for case in &names {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let work = temp_dir("golden");
        copy_tree(&case.join("before"), &work);
        let before = tree(&work);
        let patch = fs::read_to_string(case.join("patch")).unwrap();
        let result = run_patch(&patch, &work);
        let after = tree(&work);
        match fs::read_to_string(case.join("expected-error")) {
            Ok(expected) => match result {
                Ok(_) => failures.push(format!("{name}: applied, expected an error")),
                Err(e) => {
                    if !e.message.contains(expected.trim_end()) {
                        failures.push(format!(
                            "{name}: error\n{}\ndoes not contain\n{}",
                            e.message,
                            expected.trim_end()
                        ));
                    }
                    if after != before {
                        failures.push(format!("{name}: the tree changed after an error"));
                    }
                }
            },
            Err(_) => match result {
                Err(e) => failures.push(format!("{name}: {}", e.message)),
                Ok(_) => {
                    let want = tree(&case.join("after"));
                    if after != want {
                        failures.push(format!(
                            "{name}: got {:?}\nwant {:?}",
                            after
                                .iter()
                                .map(|(k, v)| (k, String::from_utf8_lossy(v)))
                                .collect::<Vec<_>>(),
                            want.iter()
                                .map(|(k, v)| (k, String::from_utf8_lossy(v)))
                                .collect::<Vec<_>>()
                        ));
                    }
                }
            },
        }
        let _ = fs::remove_dir_all(&work);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

const MIXED: &str = "*** Begin Patch
*** Update File: a.txt
@@
-alpha
+ALPHA
*** Add File: sub/new.txt
+new
*** Delete File: c.txt
*** Update File: m.txt
*** Move to: moved/m.txt
@@
-m
+M
*** End Patch";

fn mixed_tree(root: &Path) {
    fs::write(root.join("a.txt"), "alpha\nbeta\n").unwrap();
    fs::write(root.join("c.txt"), "gone\n").unwrap();
    fs::write(root.join("m.txt"), "m\n").unwrap();
}

#[test]
fn a_failed_rename_at_any_step_leaves_everything_as_it_was() {
    // Renames: c.txt and m.txt aside, then a.txt, sub/new.txt, moved/m.txt.
    for step in 0..5 {
        let work = temp_dir("rollback");
        mixed_tree(&work);
        let before = tree(&work);
        FAIL_RENAME.with(|f| f.set(Some(step)));
        let result = run_patch(MIXED, &work);
        FAIL_RENAME.with(|f| f.set(None));
        let e = result.expect_err("the injected failure must fail the apply");
        assert!(e.message.contains("injected failure"), "{}", e.message);
        assert_eq!(tree(&work), before, "step {step}");
        assert!(
            !work.join("sub").exists(),
            "step {step}: created directory left"
        );
        assert!(
            !work.join("moved").exists(),
            "step {step}: created directory left"
        );
        let _ = fs::remove_dir_all(&work);
    }
    let work = temp_dir("rollback");
    mixed_tree(&work);
    run_patch(MIXED, &work).unwrap();
    let got = tree(&work);
    let names: Vec<_> = got.keys().cloned().collect();
    assert_eq!(names, ["a.txt", "moved/m.txt", "sub/new.txt"]);
    assert_eq!(got["a.txt"], b"ALPHA\nbeta\n");
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_file_changed_after_planning_fails_everything() {
    let work = temp_dir("stale");
    mixed_tree(&work);
    let patch = parse(MIXED).unwrap();
    let planned = plan(&patch, &paths_under(&patch, &work)).unwrap();
    fs::write(work.join("m.txt"), "m\nmore\n").unwrap();
    let before = tree(&work);
    let e = apply(&planned, &|_| FileChoice::All).unwrap_err();
    assert!(
        e.message.contains("m.txt: the file has changed"),
        "{}",
        e.message
    );
    assert_eq!(tree(&work), before);
    // A file appearing at an Add's path.
    fs::write(work.join("m.txt"), "m\n").unwrap();
    let planned = plan(&patch, &paths_under(&patch, &work)).unwrap();
    fs::create_dir_all(work.join("sub")).unwrap();
    fs::write(work.join("sub/new.txt"), "racing\n").unwrap();
    let e = apply(&planned, &|_| FileChoice::All).unwrap_err();
    assert!(
        e.message.contains("sub/new.txt: the file now exists"),
        "{}",
        e.message
    );
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn modes_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let work = temp_dir("mode");
    fs::write(work.join("x.sh"), "echo a\n").unwrap();
    fs::set_permissions(work.join("x.sh"), fs::Permissions::from_mode(0o750)).unwrap();
    run_patch(
        "*** Begin Patch\n*** Update File: x.sh\n@@\n-echo a\n+echo b\n*** End Patch",
        &work,
    )
    .unwrap();
    let mode = fs::metadata(work.join("x.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750);
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_symlinked_target_is_written_through() {
    let work = temp_dir("link");
    fs::write(work.join("real.txt"), "a\n").unwrap();
    std::os::unix::fs::symlink(work.join("real.txt"), work.join("link.txt")).unwrap();
    run_patch(
        "*** Begin Patch\n*** Update File: link.txt\n@@\n-a\n+b\n*** End Patch",
        &work,
    )
    .unwrap();
    assert!(
        fs::symlink_metadata(work.join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read(work.join("real.txt")).unwrap(), b"b\n");
    let _ = fs::remove_dir_all(&work);
}

fn twenty() -> String {
    (1..=20).map(|i| format!("{i}\n")).collect()
}

const FAR: &str = "*** Begin Patch
*** Update File: f.txt
@@
-1
+one
@@
-20
+twenty
*** End Patch";

fn planned_far(work: &Path) -> Plan {
    fs::write(work.join("f.txt"), twenty()).unwrap();
    let patch = parse(FAR).unwrap();
    plan(&patch, &paths_under(&patch, work)).unwrap()
}

#[test]
fn plan_files_report_diff_hunks() {
    let work = temp_dir("hunks");
    let planned = planned_far(&work);
    let f = &planned.files[0];
    assert_eq!((f.added, f.removed), (2, 2));
    assert_eq!(f.hunks.len(), 2);
    assert_eq!(f.hunks[0].header(), "@@ -1,4 +1,4 @@");
    assert_eq!(f.hunks[1].header(), "@@ -17,4 +17,4 @@");
    assert_eq!(f.hunks[1].text(), " 17\n 18\n 19\n-20\n+twenty\n");
    assert!(
        f.diff()
            .starts_with("--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,4 @@\n-1\n+one\n")
    );
    // Nothing was written.
    assert_eq!(fs::read_to_string(work.join("f.txt")).unwrap(), twenty());
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn many_hunks_on_a_large_file_report_exact_counts() {
    let work = temp_dir("many");
    let text: String = (1..=20_000).map(|i| format!("line {i}\n")).collect();
    fs::write(work.join("big.txt"), &text).unwrap();
    let mut patch = String::from("*** Begin Patch\n*** Update File: big.txt\n");
    for k in 0..200 {
        let i = 50 + k * 100;
        patch.push_str(&format!(
            "@@\n line {}\n-line {i}\n+LINE {i}\n line {}\n",
            i - 1,
            i + 1
        ));
    }
    patch.push_str("*** End Patch\n");
    let parsed = parse(&patch).unwrap();
    let planned = plan(&parsed, &paths_under(&parsed, &work)).unwrap();
    assert_eq!(planned.files[0].hunks.len(), 200);
    assert_eq!(
        (planned.files[0].added, planned.files[0].removed),
        (200, 200)
    );
    let out = apply(&planned, &|_| FileChoice::All).unwrap();
    assert_eq!((out.added, out.removed), (200, 200));
    assert_eq!(out.files[0].diff, planned.files[0].diff());
    let got = fs::read_to_string(work.join("big.txt")).unwrap();
    assert!(got.contains("\nLINE 150\nline 151\n"));
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn diff_headers_carry_the_patch_anchor() {
    let work = temp_dir("section");
    fs::write(
        work.join("c.py"),
        "def a():\n    return 0\n\ndef b():\n    return 0\n",
    )
    .unwrap();
    let patch = parse(
        "*** Begin Patch\n*** Update File: c.py\n@@ def b():\n-    return 0\n+    return 1\n*** End Patch",
    )
    .unwrap();
    let planned = plan(&patch, &paths_under(&patch, &work)).unwrap();
    assert_eq!(
        planned.files[0].hunks[0].header(),
        "@@ -2,4 +2,4 @@ def b():"
    );
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn selections_apply_subsets_and_edits() {
    let work = temp_dir("select");
    let planned = planned_far(&work);
    let out = apply(&planned, &|_| {
        FileChoice::Hunks(vec![HunkChoice::Reject, HunkChoice::Accept])
    })
    .unwrap();
    assert_eq!(out.files[0].status, Status::Partial);
    assert_eq!((out.added, out.removed), (1, 1));
    assert!(out.files[0].diff.contains("+twenty"));
    assert!(!out.files[0].diff.contains("+one"));
    let got = fs::read_to_string(work.join("f.txt")).unwrap();
    assert_eq!(got, twenty().replace("20\n", "twenty\n"));

    let planned = planned_far(&work);
    apply(&planned, &|_| {
        FileChoice::Hunks(vec![
            HunkChoice::Edit("uno\n2\n3\n4\n".into()),
            HunkChoice::Edit("17\n18\n19\n20\n21".into()),
        ])
    })
    .unwrap();
    let got = fs::read_to_string(work.join("f.txt")).unwrap();
    let want: String = twenty().replacen("1\n", "uno\n", 1) + "21";
    assert_eq!(got, want);

    let planned = planned_far(&work);
    let out = apply(&planned, &|_| FileChoice::Reject).unwrap();
    assert_eq!(out.files[0].status, Status::Rejected);
    assert_eq!(fs::read_to_string(work.join("f.txt")).unwrap(), twenty());

    let planned = planned_far(&work);
    let e = apply(&planned, &|_| FileChoice::Hunks(vec![HunkChoice::Accept])).unwrap_err();
    assert!(e.message.contains("2 hunks"), "{}", e.message);
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn rejected_hunks_of_a_move_still_move() {
    let work = temp_dir("move-select");
    fs::write(work.join("a.txt"), "x\n").unwrap();
    let patch = parse(
        "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-x\n+y\n*** End Patch",
    )
    .unwrap();
    let planned = plan(&patch, &paths_under(&patch, &work)).unwrap();
    let out = apply(&planned, &|_| FileChoice::Hunks(vec![HunkChoice::Reject])).unwrap();
    assert_eq!(out.files[0].status, Status::Partial);
    assert!(!work.join("a.txt").exists());
    assert_eq!(fs::read(work.join("b.txt")).unwrap(), b"x\n");
    let _ = fs::remove_dir_all(&work);
}

// ---- property tests ----

fn cases() -> u32 {
    std::env::var("MEVEDEL_PATCH_CASES")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(2000)
}

fn config() -> proptest::prelude::ProptestConfig {
    proptest::prelude::ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        max_global_rejects: u32::MAX / 2,
        max_local_rejects: u32::MAX / 2,
        ..proptest::prelude::ProptestConfig::default()
    }
}

use proptest::prelude::*;

fn patchish_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*** Begin Patch".to_string()),
        Just("*** End Patch".to_string()),
        Just("*** Add File: a".to_string()),
        Just("*** Delete File: b".to_string()),
        Just("*** Update File: c".to_string()),
        Just("*** Move to: d".to_string()),
        Just("*** End of File".to_string()),
        Just("@@".to_string()),
        Just("@@ fn x".to_string()),
        Just("<<'EOF'".to_string()),
        Just("EOF".to_string()),
        Just(String::new()),
        "[ +\\-@*a-z\t]{0,6}",
        "[ +\\-][a-z ]{0,5}",
        any::<String>(),
    ]
}

/// Line texts for generated files: few distinct, to make repeats likely.
fn file_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("    ".to_string()),
        Just("}".to_string()),
        Just("*** End of File".to_string()),
        Just("@@ x".to_string()),
        Just("é — “q”".to_string()),
        "[a-c ]{1,4}",
        "[a-z]{1,8}",
    ]
}

#[derive(Debug, Clone)]
struct Edit {
    /// Old lines START..START+LEN are replaced by NEW.
    start: usize,
    len: usize,
    new: Vec<String>,
}

fn occurs_once(lines: &[String], window: &[String]) -> bool {
    if window.is_empty() {
        return lines.is_empty();
    }
    let mut count = 0;
    for start in 0..=lines.len().saturating_sub(window.len()) {
        if lines.len() >= window.len() && lines[start..start + window.len()] == *window {
            count += 1;
            if count > 1 {
                return false;
            }
        }
    }
    count == 1
}

/// A patch turning OLD (lines) into the result of EDITS (sorted,
/// disjoint) for the file PATH; hunks are widened until their old lines
/// occur exactly once (at worst, the whole file).
fn build_patch(path: &str, old: &[String], edits: &[Edit], eof_marker: bool) -> String {
    // Windows [from, to) of old lines per hunk, and the edits inside.
    let mut hunks: Vec<(usize, usize, Vec<Edit>)> = Vec::new();
    for e in edits {
        let from = e.start.saturating_sub(1);
        let to = (e.start + e.len + 1).min(old.len());
        hunks.push((from, to.max(from), vec![e.clone()]));
    }
    loop {
        // Widen each until unique.
        for h in hunks.iter_mut() {
            while !occurs_once(old, &old[h.0..h.1]) && (h.0 > 0 || h.1 < old.len()) {
                h.0 = h.0.saturating_sub(1);
                h.1 = (h.1 + 1).min(old.len());
            }
        }
        // Merge overlapping or touching windows.
        let mut merged: Vec<(usize, usize, Vec<Edit>)> = Vec::new();
        let mut changed = false;
        for h in hunks.drain(..) {
            match merged.last_mut() {
                Some(last) if h.0 <= last.1 => {
                    last.1 = last.1.max(h.1);
                    last.2.extend(h.2);
                    changed = true;
                }
                _ => merged.push(h),
            }
        }
        hunks = merged;
        if !changed {
            break;
        }
    }
    let mut out = format!("*** Begin Patch\n*** Update File: {path}\n");
    for (from, to, inner) in &hunks {
        out.push_str("@@\n");
        let mut at = *from;
        for e in inner {
            for line in &old[at..e.start] {
                out.push(' ');
                out.push_str(line);
                out.push('\n');
            }
            for line in &old[e.start..e.start + e.len] {
                out.push('-');
                out.push_str(line);
                out.push('\n');
            }
            for line in &e.new {
                out.push('+');
                out.push_str(line);
                out.push('\n');
            }
            at = e.start + e.len;
        }
        for line in &old[at..*to] {
            out.push(' ');
            out.push_str(line);
            out.push('\n');
        }
        if eof_marker && *to == old.len() && *to > *from {
            out.push_str("*** End of File\n");
        }
    }
    out.push_str("*** End Patch\n");
    out
}

/// The edits that undo EDITS (same order), in the new file's lines.
fn reverse(old: &[String], edits: &[Edit]) -> Vec<Edit> {
    let mut shift: isize = 0;
    edits
        .iter()
        .map(|e| {
            let start = (e.start as isize + shift) as usize;
            shift += e.new.len() as isize - e.len as isize;
            Edit {
                start,
                len: e.new.len(),
                new: old[e.start..e.start + e.len].to_vec(),
            }
        })
        .collect()
}

fn edited(old: &[String], edits: &[Edit]) -> Vec<String> {
    let reps: Vec<apply::Replacement> = edits
        .iter()
        .map(|e| apply::Replacement {
            start: e.start,
            old_len: e.len,
            new: e.new.clone(),
        })
        .collect();
    apply::replace(old, &reps)
}

/// Apply the one-file PATCH to BYTES in memory, as a plan does.
fn apply_text(patch: &str, bytes: &[u8]) -> crate::Result<(Vec<u8>, TextFile, TextFile)> {
    let parsed = parse(patch)?;
    let Some(Op::Update { chunks, .. }) = parsed.ops.first() else {
        return Err(crate::Error::new(crate::ErrorKind::Patch, "not an update"));
    };
    let old = TextFile::decode("f", bytes)?;
    let (reps, _) = apply::compute(&old, chunks, "f")?;
    let new = old.with_lines(apply::replace(&old.lines, &reps), old.final_newline);
    // The diff hunks reproduce the change.
    let hunks = diff::hunks(&old.lines, &new.lines, &reps, true, true);
    let side: Vec<apply::Replacement> = hunks
        .iter()
        .map(|h| apply::Replacement {
            start: h.old_from,
            old_len: h.old_count,
            new: h.new_side(),
        })
        .collect();
    assert_eq!(apply::replace(&old.lines, &side), new.lines);
    for h in &hunks {
        let old_side: Vec<&String> = h
            .lines
            .iter()
            .filter(|(c, _)| *c != '+')
            .map(|(_, l)| l)
            .collect();
        let file_side: Vec<&String> = old.lines[h.old_from..h.old_from + h.old_count]
            .iter()
            .collect();
        assert_eq!(old_side, file_side);
    }
    Ok((new.encode(), old, new))
}

fn edits_strategy(len: usize) -> impl Strategy<Value = Vec<Edit>> {
    proptest::collection::vec(
        (
            0..=len,
            0usize..3,
            proptest::collection::vec(file_line(), 0..4),
        ),
        1..4,
    )
    .prop_map(move |raw| {
        let mut raw = raw;
        raw.sort_by_key(|r| r.0);
        let mut edits: Vec<Edit> = Vec::new();
        let mut next = 0;
        for (start, del, new) in raw {
            let start = start.max(next);
            if start > len {
                continue;
            }
            let del = del.min(len - start);
            if del == 0 && new.is_empty() {
                continue;
            }
            edits.push(Edit {
                start,
                len: del,
                new,
            });
            next = start + del + 1;
        }
        edits
    })
}

fn encode(lines: &[String], crlf: bool, final_newline: bool) -> Vec<u8> {
    TextFile {
        lines: lines.to_vec(),
        crlf,
        final_newline,
        bom: false,
    }
    .encode()
}

proptest! {
    #![proptest_config(config())]

    /// Arbitrary text, patch-like or not, never makes the parser panic.
    #[test]
    fn parser_never_panics(
        lines in proptest::collection::vec(patchish_line(), 0..24),
        crlf in any::<bool>(),
        raw in any::<String>(),
    ) {
        let text = lines.join(if crlf { "\r\n" } else { "\n" });
        let _ = parse(&text);
        let _ = parse(&raw);
        let framed = format!("*** Begin Patch\n{text}\n*** End Patch");
        if let Ok(p) = parse(&framed) {
            prop_assert!(!p.ops.is_empty());
        }
    }

    /// A generated edit applies, and its reverse restores the file byte
    /// for byte (line endings and final newline included).
    #[test]
    fn apply_then_reverse(
        (old, edits) in proptest::collection::vec(file_line(), 0..30)
            .prop_flat_map(|old| { let n = old.len(); (Just(old), edits_strategy(n)) }),
        crlf in any::<bool>(),
        final_newline in any::<bool>(),
        eof_marker in any::<bool>(),
    ) {
        if edits.is_empty() {
            return Ok(());
        }
        let new = edited(&old, &edits);
        let old_bytes = encode(&old, crlf, final_newline);
        // Lines-to-bytes must round-trip for the comparison to be fair.
        // (Lines ending in an empty one without a final newline are not.)
        let representable = |lines: &[String]| {
            let decoded = TextFile::decode("f", &encode(lines, crlf, final_newline));
            decoded.is_ok_and(|d| d.lines == lines && (lines.len() < 2 || d.crlf == crlf))
        };
        if !representable(&old) || !representable(&new) {
            return Ok(());
        }
        let forward = build_patch("f", &old, &edits, eof_marker);
        let (bytes, _, applied) = match apply_text(&forward, &old_bytes) {
            Ok(r) => r,
            Err(e) => return Err(TestCaseError::fail(format!("{}\n{forward}", e.message))),
        };
        prop_assert_eq!(&applied.lines, &new, "{}", forward);
        let back = build_patch("f", &new, &reverse(&old, &edits), eof_marker);
        let (restored, _, _) = match apply_text(&back, &bytes) {
            Ok(r) => r,
            Err(e) => return Err(TestCaseError::fail(format!("{}\n{back}", e.message))),
        };
        // A file without a newline cannot say it was CRLF, and an empty
        // one that it lacked its final newline: those facts are lost.
        let want = encode(
            &old,
            crlf && bytes.contains(&b'\n'),
            final_newline || bytes.is_empty(),
        );
        prop_assert_eq!(restored, want, "{}\n{}", forward, back);
    }
}
