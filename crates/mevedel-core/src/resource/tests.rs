//! Table-driven tests of the grammar, the operation matrix and
//! containment, plus the parser property test.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::address::Origin;
use super::address::parse;
use super::context::{Context, MemoryRoot, Skill};
use super::matrix::{Operation, allowed, check};
use super::prepare::{Target, prepare};

const D: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

fn canonical(input: &str) -> String {
    match parse(input) {
        Ok(Some(a)) => a.locator.canonical(),
        Ok(None) => panic!("{input:?} parsed as an ordinary path"),
        Err(e) => panic!("{input:?}: {e}"),
    }
}

#[test]
fn canonical_forms() {
    let upper = D.to_ascii_uppercase();
    let table: Vec<(String, String)> = [
        ("work://", "work://"),
        ("work:///", "work://"),
        ("work://a/b", "work://a/b"),
        ("work://a/b/", "work://a/b"),
        ("work://shared/", "work://shared"),
        ("work://shared", "work://shared"),
        ("work://shared/notes/x.md", "work://shared/notes/x.md"),
        ("work://plans/p.md", "work://plans/p.md"),
        ("work://a%2db", "work://a-b"),
        ("work://a b", "work://a%20b"),
        ("work://%c3%a9", "work://%C3%A9"),
        ("work://é", "work://%C3%A9"),
        ("work://a:b#c?d", "work://a%3Ab%23c%3Fd"),
        ("WORK://x", "work://x"),
        ("artifact://", "artifact://"),
        (
            "artifact://tool-results/x.txt",
            "artifact://tool-results/x.txt",
        ),
        (
            "artifact://executions/e%201.log/",
            "artifact://executions/e%201.log",
        ),
        ("skill://", "skill://"),
        ("skill://local-mevedel/foo/", "skill://local-mevedel/foo"),
        (
            "skill://global-agents/foo/SKILL.md",
            "skill://global-agents/foo/SKILL.md",
        ),
        ("skill://bundled/x", "skill://bundled/x"),
        ("skill://managed/x", "skill://managed/x"),
        ("skill://plugin/p/s/x.md", "skill://plugin/p/s/x.md"),
        ("agent://", "agent://"),
        ("agent://root/explore", "agent://root/explore"),
        ("agent://root/a/b#/x~1y/~0z", "agent://root/a/b#/x~1y/~0z"),
        ("agent://root/a#", "agent://root/a#"),
        ("agent://root/a#%2Fk", "agent://root/a#/k"),
        ("agent://root/a#/a%20b", "agent://root/a#/a%20b"),
        ("agent://root/a#/", "agent://root/a#/"),
        ("history://", "history://"),
        ("history://root", "history://root"),
        ("history://root/a/b/", "history://root/a/b"),
        ("history://saved", "history://saved"),
        ("history://saved/s1", "history://saved/s1"),
        (
            "history://saved/s1/segment-0001.chat.org",
            "history://saved/s1/segment-0001.chat.org",
        ),
        ("memory://root", "memory://root"),
        ("memory://root/", "memory://root"),
        ("memory://journal", "memory://journal/"),
        ("memory://journal/", "memory://journal/"),
        (
            "memory://journal/2026-05-01T12:30:00Z.md",
            "memory://journal/2026-05-01T12%3A30%3A00Z.md",
        ),
        (
            "memory://journal/2026-05-01T12%3a30%3a00Z.md",
            "memory://journal/2026-05-01T12%3A30%3A00Z.md",
        ),
        ("memory://local-mevedel", "memory://local-mevedel"),
        (
            "memory://global-agents/topics/x.md",
            "memory://global-agents/topics/x.md",
        ),
        ("mcp://", "mcp://"),
        ("mcp://my%20server", "mcp://my%20server"),
        (
            "mcp://srv/file%3a%2F%2F%2Ftmp%2Fx",
            "mcp://srv/file%3A%2F%2F%2Ftmp%2Fx",
        ),
        ("mcp://srv/res%231%25", "mcp://srv/res%231%25"),
        ("shared://", "shared://"),
        ("shared://abc_1", "shared://abc_1"),
        ("shared://abc_1/view.png", "shared://abc_1/view.png"),
        ("shared://abc_1/discussions", "shared://abc_1/discussions"),
        ("shared://abc_1/history", "shared://abc_1/history"),
        ("shared://abc_1/elements/e-1", "shared://abc_1/elements/e-1"),
        ("shared://abc_1/images/k", "shared://abc_1/images/k"),
        ("shared://library", "shared://library"),
        ("shared://library/sheet.png", "shared://library/sheet.png"),
        ("shared://library/n", "shared://library/n"),
        (
            "shared://library/n/sheet.png",
            "shared://library/n/sheet.png",
        ),
        ("mevedel://", "mevedel://"),
        ("mevedel://tools/files.md", "mevedel://tools/files.md"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .chain([
        (
            format!("skill://my%20skill@{upper}/SKILL.md"),
            format!("skill://my%20skill@{D}/SKILL.md"),
        ),
        (format!("skill://a%40b@{D}"), format!("skill://a%40b@{D}")),
        (format!("memory://{upper}/x"), format!("memory://{D}/x")),
    ])
    .collect();
    for (input, want) in &table {
        let got = canonical(input);
        assert_eq!(&got, want, "canonical form of {input:?}");
        assert_eq!(&canonical(&got), want, "idempotence for {input:?}");
    }
}

#[test]
fn malformed_addresses_name_address_and_reason() {
    let table = [
        ("foo://x", "unknown scheme `foo://`"),
        ("https://example.com", "unknown scheme `https://`"),
        ("work://a/../b", "`..` component"),
        ("work://a/./b", "`.` component"),
        ("work://%2e%2e/x", "`..` component"),
        ("work://a%2Fb", "escaped `/`"),
        ("work://a%2fb", "escaped `/`"),
        ("work://a//b", "empty path component"),
        ("work://a//", "empty path component"),
        ("work:////etc/passwd", "absolute component"),
        ("work://%zz", "malformed percent escape"),
        ("work://a%4", "malformed percent escape"),
        ("work://%ff", "do not decode to UTF-8"),
        ("work://a%0Ab", "control character"),
        ("work://a\u{7}b", "control character"),
        ("mevedel://../src/lib.rs", "`..` component"),
        ("skill://foo", "unknown skill origin"),
        ("skill://foo@abc", "64-digit"),
        ("skill://local-mevedel", "needs a skill name"),
        ("skill://plugin/p", "needs a skill name"),
        ("skill://plugin", "needs PLUGIN/SKILL"),
        ("agent://root", "not a retained agent"),
        ("agent://x/y", "below root"),
        ("agent://root/a#x", "must be empty or start with `/`"),
        ("agent://root/a#/~2", "followed by 0 or 1"),
        ("agent://root/a#/%zz", "malformed percent escape"),
        ("agent://#/a", "needs an agent path"),
        ("history://other", "unknown history branch"),
        ("history://saved/s/notes.txt", "not a saved segment name"),
        (
            "history://saved/s/segment-0001.chat.org/x",
            "at most SESSION/SEGMENT",
        ),
        ("memory://", "bare memory://"),
        ("memory://root/x", "union listing"),
        ("memory://journal/a/b", "nested names"),
        ("memory://nokey/x", "unknown memory root key"),
        ("mcp://a/b/c", "at most two components"),
        ("mcp://a/%00", "control character"),
        ("shared://bad%20id", "not a shared item id"),
        ("shared://x/unknown", "unknown shared item part"),
        ("shared://x/elements/bad%20e", "unknown shared item part"),
        ("shared://library/a/b/c", "shared://library takes"),
    ];
    for (input, reason) in table {
        match parse(input) {
            Err(e) => {
                assert!(
                    e.message.contains(&format!("`{input}`")),
                    "{input}: {}",
                    e.message
                );
                assert!(e.message.contains(reason), "{input}: {}", e.message);
            }
            Ok(v) => panic!("{input:?} was accepted: {v:?}"),
        }
    }
}

#[test]
fn discovery_queries_are_not_exact_identities() {
    let discovery = [
        "work://",
        "artifact://",
        "skill://",
        "agent://",
        "history://",
        "memory://root",
        "mcp://",
        "shared://",
        "mevedel://",
    ];
    let exact = [
        "work://a",
        "work://shared",
        "artifact://tool-results/x",
        "mcp://s",
        "memory://journal/",
        "history://root",
        "mevedel://tools/files.md",
    ];
    for (inputs, want) in [(&discovery[..], true), (&exact[..], false)] {
        for input in inputs {
            let loc = match parse(input) {
                Ok(Some(a)) => a.locator,
                other => panic!("{input}: {other:?}"),
            };
            assert_eq!(loc.is_discovery(), want, "{input}");
        }
    }
}

#[test]
fn ordinary_paths_stay_paths() {
    for input in [
        "src/main.rs",
        "C:foo",
        "a:b",
        "/tmp/x",
        "./x://y",
        "1abc://x",
        "",
        "a b://c",
        "http:/x",
    ] {
        assert!(matches!(parse(input), Ok(None)), "{input:?}");
    }
}

#[test]
fn operation_matrix() {
    use Operation::{ApplyPatch as P, Glob as G, Grep as E, Read as R};
    let table: &[(&str, &[Operation])] = &[
        ("work://", &[R, G, E]),
        ("work://a.txt", &[R, G, E, P]),
        ("work://shared", &[R, G, E]),
        ("work://shared/n.md", &[R, G, E, P]),
        ("artifact://", &[R, G, E]),
        ("artifact://tool-results/x", &[R, G, E]),
        ("skill://", &[R]),
        ("skill://local-mevedel/s", &[R, G, E]),
        ("skill://plugin/p/s/x.md", &[R, G, E]),
        ("agent://", &[R]),
        ("agent://root/a#/x", &[R]),
        ("history://", &[R]),
        ("history://root", &[R, E]),
        ("history://root/a", &[R, E]),
        ("history://saved", &[R, G, E]),
        ("history://saved/s/segment-0001.chat.org", &[R, G, E]),
        ("memory://root", &[R, G, E]),
        ("memory://local-mevedel", &[R, G, E]),
        ("memory://local-mevedel/t.md", &[R, G, E, P]),
        ("memory://journal/", &[R, G, E]),
        ("memory://journal/2026-05-01T12%3A30%3A00Z.md", &[R, G, E]),
        ("mcp://", &[R]),
        ("mcp://s", &[R]),
        ("mcp://s/u", &[R]),
        ("shared://", &[R]),
        ("shared://i", &[R, E]),
        ("shared://i/discussions", &[R, E]),
        ("shared://i/history", &[R, E]),
        ("shared://i/elements/e", &[R, E]),
        ("shared://i/view.png", &[R]),
        ("shared://i/images/k", &[R]),
        ("shared://library", &[R, E]),
        ("shared://library/n", &[R, E]),
        ("shared://library/sheet.png", &[R]),
        ("mevedel://", &[R, G, E]),
        ("mevedel://tools/files.md", &[R, G, E]),
    ];
    for (input, ok) in table {
        let loc = match parse(input) {
            Ok(Some(a)) => a.locator,
            other => panic!("{input}: {other:?}"),
        };
        assert_eq!(allowed(&loc), *ok, "{input}");
        for op in Operation::ALL {
            let res = check(&loc, op, input);
            if ok.contains(&op) {
                assert!(res.is_ok(), "{input} {op:?}");
            } else {
                let msg = res.err().map(|e| e.message).unwrap_or_default();
                assert!(
                    msg.starts_with("Unsupported operation"),
                    "{input} {op:?}: {msg}"
                );
                assert!(!msg.contains("Invalid"), "{msg}");
            }
        }
    }
}

struct Fixture {
    dir: PathBuf,
    ctx: Context,
}

fn mkdir(p: &Path) {
    std::fs::create_dir_all(p).expect("create a test directory");
}

fn write(p: &Path, text: &str) {
    if let Some(parent) = p.parent() {
        mkdir(parent);
    }
    std::fs::write(p, text).expect("write a test file");
}

fn fixture(name: &str) -> Fixture {
    let dir = std::env::temp_dir().join(format!("mevedel-res-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ws = dir.join("ws");
    let session = ws.join(".mevedel/sessions/s1");
    write(&session.join("local/notes.txt"), "one\ntwo\n");
    write(&session.join("tool-results/r1.txt"), "persisted\n");
    write(&session.join("tool-results/old.txt.gz"), "zz");
    write(
        &ws.join(".mevedel/journal/2026-05-01T12:30:00Z.md"),
        "fresh entry\n",
    );
    write(
        &ws.join(".mevedel/journal/2026-04-01T12:30:00Z.md"),
        "old entry\n",
    );
    write(&ws.join(".mevedel/journal/garbage.md"), "not an entry\n");
    write(&dir.join("docs/tools/files.md"), "# Files\n");
    write(&dir.join("docs/tools/x.el"), "(secret)\n");
    write(&dir.join("mem1/topic.md"), "remember\n");
    write(&dir.join("skills/foo/SKILL.md"), "skill body\n");
    write(&dir.join("outside.txt"), "outside\n");
    let ctx = Context {
        session_dir: Some(session),
        workspace: Some(ws),
        docs_root: Some(dir.join("docs")),
        memory_roots: vec![MemoryRoot {
            path: dir.join("mem1"),
            kind: Some(Origin::LocalMevedel),
            label: "workspace memory".into(),
        }],
        skills: vec![Skill {
            name: "foo".into(),
            source_key: "local:foo".into(),
            root: dir.join("skills/foo"),
            origin: Origin::LocalMevedel,
            plugin: None,
        }],
        journal_recall_days: 14,
        now: 1_777_638_600 + 86_400,
    };
    Fixture { dir, ctx }
}

fn read(f: &Fixture, addr: &str) -> Result<String, String> {
    let attempt = prepare(addr, Operation::Read, &f.ctx).map_err(|e| format!("PREPARE: {e}"))?;
    super::read::read_attempt(&attempt, &Default::default()).map_err(|e| e.message)
}

#[test]
fn containment_attacks_are_refused_before_permission() {
    let f = fixture("attacks");
    let local = f.ctx.session_dir.clone().unwrap_or_default().join("local");
    symlink("/etc", local.join("etc")).unwrap();
    symlink(local.join("etc"), local.join("chain")).unwrap();
    symlink(f.dir.join("outside.txt"), f.dir.join("docs/out.md")).unwrap();
    for addr in [
        "work://../outside.txt",
        "work://%2E%2E/outside.txt",
        "work://a%2F..%2F..%2Foutside.txt",
        "work://etc/passwd",
        "work://chain/passwd",
        "work:////etc/passwd",
        "mevedel://out.md",
        "mevedel://../outside.txt",
    ] {
        for op in [Operation::Read, Operation::Grep] {
            match prepare(addr, op, &f.ctx) {
                Err(e) => {
                    assert!(
                        e.message.starts_with("Invalid resource address"),
                        "{addr}: {}",
                        e.message
                    );
                    assert!(
                        !e.message.contains(&*f.dir.to_string_lossy()),
                        "{}",
                        e.message
                    );
                }
                Ok(a) => panic!("{addr} prepared: {:?}", a.target),
            }
        }
    }
}

#[test]
fn families_read_through_attempts() {
    let f = fixture("families");
    assert_eq!(
        read(&f, "work://notes.txt"),
        Ok("     1\tone\n     2\ttwo\n".into())
    );
    let both = read(&f, "work://").unwrap();
    assert!(both.contains("work://notes.txt"), "{both}");
    assert!(
        both.contains("ApplyPatch can create files under work://shared/"),
        "{both}"
    );
    let shared = read(&f, "work://shared/").unwrap();
    assert!(shared.contains("ApplyPatch can create"), "{shared}");
    assert!(read(&f, "work://missing.txt").is_err_and(|e| e.contains("does not exist")));
    let arts = read(&f, "artifact://").unwrap();
    assert_eq!(
        arts.lines()
            .filter(|l| l.starts_with("artifact://"))
            .count(),
        1,
        "{arts}"
    );
    assert!(arts.contains("artifact://tool-results/r1.txt"));
    assert!(read(&f, "artifact://tool-results/old.txt.gz").is_err());
    assert!(read(&f, "artifact://local/notes.txt").is_err_and(|e| e.contains("No artifact")));
    assert_eq!(
        read(&f, "mevedel://"),
        Ok("mevedel://tools/files.md\n".into())
    );
    assert!(read(&f, "mevedel://tools/x.el").is_err_and(|e| e.contains("not a Markdown")));
    assert_eq!(
        read(&f, "memory://local-mevedel/topic.md"),
        Ok("     1\tremember\n".into())
    );
    let union = read(&f, "memory://root").unwrap();
    assert!(union.contains("memory://local-mevedel/topic.md"), "{union}");
    let journal = read(&f, "memory://journal/").unwrap();
    assert_eq!(journal, "memory://journal/2026-05-01T12%3A30%3A00Z.md\n");
    assert!(
        read(&f, "memory://journal/2026-04-01T12:30:00Z.md").is_err_and(|e| e.contains("14-day"))
    );
    assert_eq!(
        read(&f, "skill://local-mevedel/foo/SKILL.md"),
        Ok("     1\tskill body\n".into())
    );
    let digest = super::context::digest("local:foo");
    assert_eq!(
        read(&f, &format!("skill://foo@{digest}/SKILL.md")),
        Ok("     1\tskill body\n".into())
    );
    assert!(
        read(&f, &format!("skill://bar@{digest}"))
            .is_err_and(|e| e.contains("belongs to skill `foo`"))
    );
    let listing = read(&f, "skill://").unwrap();
    assert!(listing.contains("skill://local-mevedel/foo") && listing.contains(&digest));
    // Unavailable families have distinct messages, after preparation.
    let mut seen = std::collections::HashSet::new();
    for addr in ["shared://", "shared://i"] {
        let a = prepare(addr, Operation::Read, &f.ctx).unwrap();
        let Target::Unavailable(msg) = a.target else {
            panic!("{addr} is available")
        };
        assert!(seen.insert(msg), "{addr}");
    }
    // Conversations are projected, MCP resources read, by Lisp at execution.
    for addr in [
        "agent://",
        "agent://root/reviewer#/findings",
        "mcp://",
        "mcp://s",
        "mcp://s/u",
    ] {
        let a = prepare(addr, Operation::Read, &f.ctx).unwrap();
        assert!(matches!(a.target, Target::Conversation), "{addr}");
    }
    for addr in [
        "history://root",
        "history://root/reviewer",
        "history://saved",
        "history://saved/s/segment-0001.chat.org",
    ] {
        let a = prepare(addr, Operation::Grep, &f.ctx).unwrap();
        assert!(matches!(a.target, Target::Conversation), "{addr}");
    }
    assert!(read(&f, "history://").is_ok_and(|t| t.contains("history://saved")));
}

#[test]
fn missing_owners_are_unavailable() {
    let ctx = Context::default();
    for addr in [
        "work://",
        "work://x",
        "work://shared/x",
        "artifact://",
        "memory://journal/",
        "mevedel://",
    ] {
        let a = prepare(addr, Operation::Read, &ctx).unwrap();
        assert!(matches!(a.target, Target::Unavailable(_)), "{addr}");
    }
    let a = prepare("memory://root", Operation::Read, &ctx).unwrap();
    let text = super::read::read_attempt(&a, &Default::default()).unwrap();
    assert!(text.contains("No memory roots are configured"));
}

/// Address-shaped strings: a scheme, then pieces drawn from the bytes
/// the grammar cares about.
fn address_strategy() -> impl Strategy<Value = String> {
    let scheme = prop_oneof![
        Just("work://"),
        Just("artifact://"),
        Just("skill://"),
        Just("agent://"),
        Just("history://"),
        Just("memory://"),
        Just("mcp://"),
        Just("shared://"),
        Just("mevedel://"),
        Just("WORK://"),
        Just("x-y://"),
        Just(""),
    ];
    let piece = prop_oneof![
        Just("/".to_string()),
        Just("%".to_string()),
        Just("%2F".to_string()),
        Just("%2f".to_string()),
        Just("%2E".to_string()),
        Just(".".to_string()),
        Just("..".to_string()),
        Just("#".to_string()),
        Just("~".to_string()),
        Just("~0".to_string()),
        Just("~1".to_string()),
        Just("@".to_string()),
        Just("root".to_string()),
        Just("shared".to_string()),
        Just("saved".to_string()),
        Just("journal".to_string()),
        Just("library".to_string()),
        Just("sheet.png".to_string()),
        Just("elements".to_string()),
        Just("local-mevedel".to_string()),
        Just("plugin".to_string()),
        Just("segment-0001.chat.org".to_string()),
        Just(D.to_string()),
        Just("%C3%A9".to_string()),
        Just("%c3".to_string()),
        Just("%FF".to_string()),
        Just("%00".to_string()),
        "[a-zA-Z0-9 :?_-]{1,6}",
        "\\PC{1,3}",
        "[\\x00-\\x1f\\x7f]",
    ];
    (scheme, prop::collection::vec(piece, 0..10))
        .prop_map(|(s, parts)| format!("{s}{}", parts.concat()))
}

fn cases() -> u32 {
    std::env::var("MEVEDEL_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        .. ProptestConfig::default()
    })]

    /// Parsing never panics; a canonical spelling re-parses to the same
    /// locator and is its own canonical spelling.
    #[test]
    fn parser_canonicalisation_is_idempotent(input in address_strategy()) {
        if let Ok(Some(addr)) = parse(&input) {
            let canon = addr.locator.canonical();
            match parse(&canon) {
                Ok(Some(again)) => {
                    prop_assert_eq!(&again.locator, &addr.locator, "{} -> {}", input, canon);
                    prop_assert_eq!(again.locator.canonical(), canon.clone());
                }
                other => prop_assert!(false, "{} -> {} re-parsed as {:?}", input, canon, other),
            }
        }
    }
}

fn write_gz(p: &Path, text: &str) {
    use std::io::Write;
    if let Some(parent) = p.parent() {
        mkdir(parent);
    }
    let file = std::fs::File::create(p).expect("write a test file");
    let mut enc = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap();
}

fn search_text(
    f: &Fixture,
    addr: &str,
    op: Operation,
    run: &dyn Fn(&crate::search::Plan) -> String,
) -> String {
    let attempt = prepare(addr, op, &f.ctx).unwrap();
    let plan = crate::search::attempt_plan(&attempt).unwrap();
    run(&plan)
}

#[test]
fn compressed_execution_logs_answer_to_logical_names() {
    use crate::search::budget::Budget;
    use crate::search::grep::{Mode, Options};
    let f = fixture("gzlogs");
    let exec = f
        .ctx
        .session_dir
        .clone()
        .unwrap_or_default()
        .join("executions");
    write_gz(&exec.join("run1.log.gz"), "first line\nsecond defun\n");
    write(&exec.join("run2.log"), "plain defun\n");
    write_gz(&exec.join("run2.log.gz"), "shadowed defun\n");
    write_gz(&exec.join("old.txt.gz"), "not a log defun\n");
    assert_eq!(
        read(&f, "artifact://executions/"),
        Ok("artifact://executions/run1.log\nartifact://executions/run2.log\n".into())
    );
    assert_eq!(
        read(&f, "artifact://executions/run1.log"),
        Ok("     1\tfirst line\n     2\tsecond defun\n".into())
    );
    let attempt = prepare("artifact://executions/run1.log", Operation::Read, &f.ctx).unwrap();
    let page = super::page::PageRequest {
        offset: Some(2),
        limit: Some(1),
        char_offset: None,
    };
    assert_eq!(
        super::read::read_attempt(&attempt, &page).map_err(|e| e.message),
        Ok("     2\tsecond defun\n".into())
    );
    assert_eq!(
        read(&f, "artifact://executions/run2.log"),
        Ok("     1\tplain defun\n".into())
    );
    for physical in [
        "artifact://executions/run1.log.gz",
        "artifact://executions/old.txt",
    ] {
        assert!(read(&f, physical).is_err(), "{physical}");
    }
    let glob = |pattern: &'static str| {
        move |plan: &crate::search::Plan| {
            crate::search::glob(plan, pattern, &Budget::unlimited())
                .unwrap()
                .text
        }
    };
    assert_eq!(
        search_text(&f, "artifact://", Operation::Glob, &glob("**/*.log")),
        "artifact://executions/run1.log\nartifact://executions/run2.log\n"
    );
    assert_eq!(
        search_text(
            &f,
            "artifact://executions/run1.log",
            Operation::Glob,
            &glob("*.log")
        ),
        "artifact://executions/run1.log\n"
    );
    let grep = |pattern: &'static str, mode: Mode, glob: Option<&'static str>| {
        move |plan: &crate::search::Plan| {
            let opts = Options {
                pattern: pattern.into(),
                mode,
                glob: glob.map(str::to_string),
                head_limit: 0,
                ..Options::default()
            };
            crate::search::grep(plan, &opts, &Budget::unlimited())
                .unwrap()
                .text
        }
    };
    assert_eq!(
        search_text(
            &f,
            "artifact://",
            Operation::Grep,
            &grep("defun", Mode::FilesWithMatches, None)
        ),
        "artifact://executions/run1.log\nartifact://executions/run2.log\n"
    );
    assert_eq!(
        search_text(
            &f,
            "artifact://executions",
            Operation::Grep,
            &grep("defun", Mode::Content, Some("run1.log"))
        ),
        "artifact://executions/run1.log:2:second defun\n"
    );
    assert_eq!(
        search_text(
            &f,
            "artifact://executions/run1.log",
            Operation::Grep,
            &grep("second", Mode::Count, None)
        ),
        "artifact://executions/run1.log:1\n"
    );
}

#[test]
fn only_regular_files_are_opened() {
    use std::io::ErrorKind;
    let dir = std::env::temp_dir().join(format!("mevedel-res-special-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let socket = dir.join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::write(dir.join("plain"), "text\n").unwrap();
    // A FIFO with no writer would block a plain open for good.
    for special in [fifo.as_path(), socket.as_path(), Path::new("/dev/zero")] {
        let err = super::read::open_regular(special).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{special:?}");
        assert!(err.to_string().contains("not a regular file"));
    }
    assert!(super::read::open_regular(&dir.join("plain")).is_ok());
    // A pseudo-file reads with its size bound, to its end.
    let req = super::page::PageRequest::default();
    let text = super::read::read_path(Path::new("/proc/self/status"), "status", &req).unwrap();
    assert!(text.contains("Name:"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
