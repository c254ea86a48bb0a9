//! Analyzer and outcome tests. The pipeline table runs every case through
//! a real Bash with the snapshot attached, so it checks the appended line
//! as well as the rules.

use std::io::{Read, Seek};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRng, TestRunner};

use super::*;

fn class(src: &str) -> Class {
    analyze(src).class
}

#[test]
fn read_only_commands() {
    for src in [
        "ls -la",
        "cat a b | grep -n x | sort | uniq -c",
        "git status && git log --oneline -5",
        "find . -name '*.rs' -type f",
        "sed -n 1,5p f",
        "grep -rn foo src 2>/dev/null",
        "for f in *.el; do wc -l \"$f\"; done | tail",
        "cd sub; ls",
        "echo hi >&2",
        "diff a b",
        "test -f x",
        "[ -d y ] && ls y",
        "while read l; do echo \"$l\"; done < f",
        "x=1 grep \"$x\" f",
        "env LC_ALL=C sort f",
        "timeout 5 grep x f",
        "xargs grep x < list",
        "git -C sub diff HEAD~1",
        "awk '{print $1}' f",
        "jq .name package.json",
        "cat <<EOF\nhello\nEOF",
    ] {
        let a = analyze(src);
        assert_eq!(a.class, Class::ReadOnly, "{src}: {:?}", a.reasons);
        assert!(a.read_only(), "{src}");
    }
}

#[test]
fn mutating_commands() {
    for src in [
        "rm f",
        "echo x > out.txt",
        "ls >> log",
        "sed -i s/a/b/ f",
        "sed 's/a/b/w out' f",
        "find . -name '*.o' -delete",
        "find . -exec rm {} \\;",
        "sort -o f f",
        "git commit -m x",
        "cat a | tee b",
        "mkdir -p x && touch x/y",
        "ls &> out",
        "xargs rm < list",
        "uniq in out",
        "awk '{print > \"x\"}' f",
    ] {
        assert_eq!(class(src), Class::Mutating, "{src}");
    }
}

#[test]
fn unknown_complex_dangerous() {
    assert_eq!(class("make -j4"), Class::Mutating);
    assert_eq!(class("./configure"), Class::Unknown);
    assert_eq!(class("/usr/bin/ls"), Class::Unknown);
    assert_eq!(class("frobnicate --now"), Class::Unknown);
    assert_eq!(class("python3 x.py"), Class::Unknown);
    assert_eq!(class("eval \"$cmd\""), Class::Complex);
    assert_eq!(class("$cmd arg"), Class::Complex);
    assert_eq!(class("f() { ls; }; f"), Class::Complex);
    assert_eq!(class("bash -c 'ls'"), Class::Complex);
    assert_eq!(class("source env.sh"), Class::Complex);
    assert_eq!(class("sudo ls"), Class::Dangerous);
    assert_eq!(class("rm -rf /"), Class::Dangerous);
    assert_eq!(class("rm -rf \"$dir\""), Class::Dangerous);
    assert_eq!(class("git push --force"), Class::Dangerous);
    assert_eq!(class("dd if=x of=/dev/sda"), Class::Dangerous);
    assert_eq!(class("echo $(rm -rf ~)"), Class::Dangerous);
    assert_eq!(class("ls 'unterminated"), Class::Unknown);
    assert!(analyze("ls 'unterminated").parse_error);
    // The worst command decides.
    assert_eq!(class("ls; rm x; sudo reboot"), Class::Dangerous);
}

#[test]
fn background_operator_is_detected() {
    for src in [
        "sleep 1 & echo hi",
        "a && b &",
        "x &",
        "{ sleep 5 & }",
        "(ls &)",
    ] {
        assert!(analyze(src).background, "{src}");
    }
    for src in [
        "echo a\\&b",
        "echo 'a & b'",
        "echo \"a & b\"",
        "ls &> /dev/null",
        "cmd 2>&1",
        "a && b",
        "a |& b",
    ] {
        assert!(!analyze(src).background, "{src}");
    }
}

#[test]
fn snapshot_eligibility() {
    let eligible = |src: &str| analyze(src).snapshot();
    assert!(eligible("yes | head"));
    assert!(eligible("for f in *.el; do wc -l \"$f\"; done | tail"));
    assert!(eligible("cd sub && ls | wc -l"));
    assert!(eligible("printf '%s\\n' a b | sort"));
    assert!(eligible("x=1; echo \"$x\" \"$@\" $# | cat"));
    assert!(!eligible("yes | head && echo continued"));
    assert!(!eligible("echo $(date) | cat"));
    assert!(!eligible("echo $HOME | cat"));
    assert!(!eligible("echo ${x:-y} | cat"));
    assert!(!eligible("echo $((1+2)) | cat"));
    assert!(!eligible("trap 'echo bye' EXIT; ls | cat"));
    assert!(!eligible("printf -v x a | cat"));
    assert!(!eligible("printf '%n' | cat"));
    assert!(!eligible("while read l; do echo $l; done < f | cat"));
    assert!(!eligible("for f in a; do ls | cat; done | cat"));
    assert!(!eligible("for X in a; do echo; done | cat"));
    assert!(!eligible("{ ls; } | cat"));
    assert!(!eligible("test -f x | cat"));
    assert!(!eligible("ls | cat &"));
    assert!(!eligible("exit 0; ls | cat"));
    // Two pipelines: the snapshot still runs, but stages are ambiguous.
    let two = analyze("ls | cat; ls | wc -l");
    assert!(two.snapshot() && !two.classifiable());
}

struct Ran {
    exit: Exit,
    pipestatus: Option<Vec<i32>>,
    output: String,
}

/// Run SRC through Bash the way the process manager does.
fn run(src: &str, dir: &std::path::Path) -> Ran {
    let analysis = analyze(src);
    let script = if analysis.snapshot() {
        with_snapshot(src)
    } else {
        src.to_string()
    };
    let mut status_file = tempfile_in(dir).expect("status file");
    let fd = status_file.as_raw_fd();
    let mut cmd = Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-c", &script])
        .current_dir(dir)
        .env("LC_ALL", "C.UTF-8");
    // SAFETY: dup2 is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, SNAPSHOT_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().expect("bash");
    let exit = match out.status.code() {
        Some(c) => Exit::Code(c),
        None => Exit::Signal(out.status.signal().unwrap_or(0)),
    };
    let mut text = String::new();
    let _ = status_file.rewind();
    let _ = status_file.read_to_string(&mut text);
    Ran {
        exit,
        pipestatus: parse_snapshot(&text),
        output: String::from_utf8_lossy(&out.stdout).into_owned(),
    }
}

fn tempfile_in(dir: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!("status-{}", N.fetch_add(1, Ordering::Relaxed)));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

/// (source, outcome, pipeline_exit_codes, failed stages, classification)
type Case = (
    &'static str,
    &'static str,
    Option<&'static [i32]>,
    &'static [usize],
    Option<&'static str>,
);

const CASES: &[Case] = &[
    (
        "yes | head -n 1",
        "success",
        Some(&[141, 0]),
        &[],
        Some("classified"),
    ),
    (
        "seq 1 100000 | head -n 1",
        "success",
        Some(&[141, 0]),
        &[],
        Some("classified"),
    ),
    (
        "grep x f | sort",
        "success",
        Some(&[1, 0]),
        &[],
        Some("classified"),
    ),
    (
        "sort f | grep zzz",
        "no-match",
        Some(&[0, 1]),
        &[],
        Some("classified"),
    ),
    (
        "grep x f | grep y",
        "no-match",
        Some(&[1, 1]),
        &[],
        Some("classified"),
    ),
    (
        "false | true",
        "failure",
        Some(&[1, 0]),
        &[1],
        Some("classified"),
    ),
    (
        "true | false",
        "failure",
        Some(&[0, 1]),
        &[2],
        Some("classified"),
    ),
    (
        "cat missing | wc -l",
        "failure",
        Some(&[1, 0]),
        &[1],
        Some("classified"),
    ),
    (
        "diff a b | cat",
        "success",
        Some(&[1, 0]),
        &[],
        Some("classified"),
    ),
    (
        "cat f | diff - a",
        "different",
        Some(&[0, 1]),
        &[],
        Some("classified"),
    ),
    (
        "seq 1 100000 | head -n 1 | cat - missing",
        "failure",
        Some(&[141, 0, 1]),
        &[3],
        Some("classified"),
    ),
    (
        "for f in a b; do cat \"$f\"; done | wc -l",
        "success",
        Some(&[0, 0]),
        &[],
        Some("classified"),
    ),
    (
        "for f in a missing; do cat \"$f\"; done | wc -l",
        "failure",
        Some(&[1, 0]),
        &[1],
        Some("classified"),
    ),
    (
        "for f in a; do grep zzz \"$f\"; done | cat",
        "failure",
        Some(&[1, 0]),
        &[1],
        Some("classified"),
    ),
    (
        "cd sub && ls | wc -l",
        "success",
        Some(&[0, 0]),
        &[],
        Some("classified"),
    ),
    (
        "cd nowhere && ls | wc -l",
        "failure",
        Some(&[1]),
        &[],
        Some("unavailable"),
    ),
    (
        "x=a; cat \"$x\" | sort",
        "success",
        Some(&[0, 0]),
        &[],
        Some("classified"),
    ),
    (
        "printf '%s\\n' b a | sort",
        "success",
        Some(&[0, 0]),
        &[],
        Some("classified"),
    ),
    (
        "ls | wc -l # count",
        "success",
        Some(&[0, 0]),
        &[],
        Some("classified"),
    ),
    (
        "cat f | sort; ls | wc -l",
        "success",
        Some(&[0, 0]),
        &[],
        Some("unavailable"),
    ),
    (
        "false | true; true | true",
        "success",
        Some(&[0, 0]),
        &[],
        Some("unavailable"),
    ),
    (
        "yes | head -n 1 && echo continued",
        "success",
        None,
        &[],
        None,
    ),
    ("echo $(echo hi) | cat", "success", None, &[], None),
    (
        "while read l; do echo \"$l\"; done < f | cat",
        "success",
        None,
        &[],
        None,
    ),
    ("grep x f", "no-match", None, &[], None),
    ("grep -c zzz f", "no-match", None, &[], None),
    ("diff a b", "different", None, &[], None),
    ("diff a a", "success", None, &[], None),
    ("test -f x", "false", None, &[], None),
    ("[ -f x ]", "false", None, &[], None),
    ("[[ -e x ]]", "false", None, &[], None),
    ("false", "failure", None, &[], None),
    ("ls missing", "failure", None, &[], None),
    ("/usr/bin/grep x f", "failure", None, &[], None),
    ("grep x f; true", "success", None, &[], None),
    ("true; grep x f", "failure", None, &[], None),
    ("kill -9 $$", "failure", None, &[], None),
];

#[test]
fn pipeline_classification_table() {
    let dir = std::env::temp_dir().join(format!("mevedel-bash-table-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for (name, text) in [("a", "alpha\n"), ("b", "beta\n"), ("f", "one\ntwo\n")] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    assert!(CASES.len() >= 30);
    for &(src, want, codes, failed, classification) in CASES {
        let ran = run(src, &dir);
        let got = outcome(&analyze(src), ran.exit, ran.pipestatus.as_deref());
        assert_eq!(got.outcome, want, "{src}: {got:?} exit {:?}", ran.exit);
        assert_eq!(got.pipeline_exit_codes.as_deref(), codes, "{src}");
        assert_eq!(got.pipeline_failed_stages, failed, "{src}");
        assert_eq!(got.pipeline_classification, classification, "{src}");
        if !failed.is_empty() {
            assert!(got.note.is_some_and(|n| n.contains("stage")), "{src}");
        }
    }
    // The snapshot leaves output and the raw status alone.
    let ran = run("yes | head -n 2 && echo continued", &dir);
    assert_eq!(ran.output, "y\ny\ncontinued\n");
    let ran = run("printf 'x\\n' | grep -c x | cat", &dir);
    assert_eq!(ran.output, "1\n");
    assert_eq!(ran.exit, Exit::Code(0));
    let ran = run("true | false", &dir);
    assert_eq!(ran.exit, Exit::Code(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn signals_and_high_codes_fail() {
    let a = analyze("grep x f");
    assert_eq!(outcome(&a, Exit::Signal(15), None).outcome, "failure");
    assert_eq!(outcome(&a, Exit::Code(2), None).outcome, "failure");
    assert_eq!(outcome(&a, Exit::Code(1), None).outcome, "no-match");
    let complex = analyze("eval grep x f");
    assert_eq!(outcome(&complex, Exit::Code(1), None).outcome, "failure");
}

/// Sources built from plain words, operators and comments, with the odd
/// character that must send them to tree-sitter instead.
fn simple_source() -> impl Strategy<Value = String> {
    const NAMES: &[&str] = &[
        "ls", "cat", "grep", "rg", "git", "rm", "sed", "find", "xargs", "env", "timeout", "nice",
        "printf", "echo", "test", "sort", "uniq", "awk", "date", "diff", "eval", "export", "local",
        "read", "cd", "make", "cargo", "./run", "/bin/ls", "if", "then", "done", "for", "time",
        "in", "a=b", "command", "exec", "set", "true", "false", "yes", "head", "wc", "kill",
        "chmod", "dd", "hostname", "tee", "mkdir", "cp",
    ];
    const ARGS: &[&str] = &[
        "-rf",
        "-n",
        "1",
        "-20",
        "--short",
        "status",
        "push",
        "--force",
        "-i",
        "-delete",
        "-exec",
        ".",
        "/",
        "x=y",
        "--output=f",
        "done",
        "then",
        "in",
        "fi",
        "-v",
        "%n",
        "a:b",
        "@x",
        "+x",
        "--",
        "-C",
        "log",
        "reset",
        "--hard",
        "-1",
        "of=/dev/sda",
        "-R",
        "-s",
        "-o",
        "ls",
        "grep",
        "sh",
        "-e",
        "s/a/b/",
        "1,5p",
        "-0",
        "-I",
        "10",
        "b.txt",
        "-u",
        "X",
        "{}",
        "x,y",
    ];
    let word = |pool: &'static [&'static str]| {
        prop_oneof![
            3 => proptest::sample::select(pool).prop_map(str::to_string),
            1 => "[A-Za-z0-9_./,:+@=-]{1,6}",
        ]
    };
    let command =
        (word(NAMES), proptest::collection::vec(word(ARGS), 0..4)).prop_map(|(name, args)| {
            let mut words = vec![name];
            words.extend(args);
            words.join(" ")
        });
    let op = proptest::sample::select(
        &[
            " | ", "|", " && ", "&&", " || ", "||", "; ", ";", " ;", "|&", " & ", ";;", "\n",
            "  |  ",
        ][..],
    );
    let tail = proptest::sample::select(
        &[
            "", "", "", " # 12", " #x y", "#c", "\n", " # a\nb", ";", " |", " &",
        ][..],
    );
    let junk = prop_oneof![
        4 => Just(""),
        1 => proptest::sample::select(
            &["'", "\"", "$x", ">", "<", "*", "(", "{", "\\", "~", "!", "`", "\t", "\n"][..]
        ),
    ];
    (
        command.clone(),
        proptest::collection::vec((op, command), 0..4),
        tail,
        junk,
        any::<prop::sample::Index>(),
    )
        .prop_map(|(first, rest, tail, junk, at)| {
            let mut src = first;
            for (op, c) in rest {
                src.push_str(op);
                src.push_str(&c);
            }
            src.push_str(tail);
            if !junk.is_empty() {
                let mut at = at.index(src.len() + 1);
                while !src.is_char_boundary(at) {
                    at -= 1;
                }
                src.insert_str(at, junk);
            }
            src
        })
}

/// The recognizer's tree of SRC (newline-terminated) when it accepts
/// it, checked against tree-sitter's: the same shape, and the same
/// analysis. Returns whether it accepted.
fn check_recognized(src: &str) -> Result<bool, TestCaseError> {
    let terminated = walk::terminated(src);
    let Some(ours) = recognize::recognize(&terminated) else {
        return Ok(false);
    };
    let theirs = walk::tree_of(src).unwrap_or_else(|| panic!("tree-sitter failed on {src:?}"));
    prop_assert!(
        !theirs.has_error(),
        "accepted a source with a parse error: {:?}",
        src
    );
    prop_assert_eq!(
        ours.dump(),
        theirs.dump(),
        "source {:?}: recognizer (left) and tree-sitter (right) differ",
        src
    );
    prop_assert_eq!(
        walk::analyze(src),
        walk::analyze_tree(src),
        "source: {:?}",
        src
    );
    Ok(true)
}

/// Panic unless the recognizer reads SRC exactly when RECOGNIZED, and
/// then as tree-sitter does (see [`check_recognized`]).
fn expect_recognized(src: &str, recognized: bool) {
    match check_recognized(src) {
        Ok(r) if r == recognized => {}
        Ok(_) if recognized => panic!("{src:?} is not recognized"),
        Ok(_) => panic!("{src:?} is recognized"),
        Err(e) => panic!("{e}"),
    }
}

/// Check CASES sources from STRATEGY. The ordinary runs use a fixed seed,
/// so a test run never fails on a shape nobody has seen before; the long
/// run draws a new seed each time to look for such shapes.
fn run_equality(
    strategy: impl Strategy<Value = String>,
    cases: u32,
    fresh_seed: bool,
) -> (usize, usize) {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = if fresh_seed {
        TestRunner::new(config)
    } else {
        let rng = TestRng::deterministic_rng(config.rng_algorithm);
        TestRunner::new_with_rng(config, rng)
    };
    let accepted = std::cell::Cell::new(0usize);
    let result = runner.run(&strategy, |src| {
        if check_recognized(&src)? {
            accepted.set(accepted.get() + 1);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    (accepted.get(), cases as usize)
}

/// Plain words and operators with the odd character inserted: the
/// recognizer's trees equal tree-sitter's wherever it accepts.
#[test]
fn simple_sources_match_tree_sitter() {
    let (accepted, cases) = run_equality(simple_source(), 10_000, false);
    assert!(
        accepted > 800,
        "only {accepted} of {cases} sources recognized"
    );
}

/// Sources from a grammar of the recognized subset (and a little
/// beyond): wherever the recognizer accepts, its tree equals
/// tree-sitter's and so does the analysis.
#[test]
fn recognized_sources_match_tree_sitter() {
    let (accepted, cases) = run_equality(grammar_source(), 5_000, false);
    assert!(
        accepted * 20 > cases,
        "only {accepted} of {cases} sources recognized"
    );
}

/// [`recognized_sources_match_tree_sitter`] with many more cases:
/// `cargo test --release -- --ignored recognized_sources_long`.
#[test]
#[ignore]
fn recognized_sources_long() {
    let (accepted, cases) = run_equality(grammar_source(), 200_000, true);
    println!("{accepted} of {cases} generated sources recognized and equal");
    assert!(accepted * 20 > cases);
}

/// Sources where the recognizer once differed from tree-sitter (found by
/// [`recognized_sources_long`]), with their neighbours: descriptors
/// starting with `0` are a number or an error to tree-sitter-bash.
#[test]
fn descriptor_regressions() {
    for src in [
        "\"|${a1}\"  007<  '*.rs'  .  \"$_\"",
        "\ttee  $10  2020 && find || LC_ALL+='$x' sort 00>7A: $HOME 1>&2",
        " grep \"\\$\\n\" 0<x1g; # x",
        "grep x 0<x1g",
        "cat 0<x",
        "ls 0>x",
        "grep \"a\" 0>x",
        "ls 1>x 0>y",
        "grep x 07>x",
        "ls 00>x",
        "ls 0>&2",
    ] {
        expect_recognized(src, false);
    }
    for src in [
        "grep \"a\" 1<x",
        "grep 'a' 2>x",
        "grep \"a\" 12>x",
        "ls 10>x",
        "ls 0 2>x",
        "ls 00",
        "grep $x 2>x",
    ] {
        expect_recognized(src, true);
    }
}

/// A double-quoted string whose text is blanks, some escaped, before a
/// `$` or the closing quote: tree-sitter-bash joins them into one token
/// (found by [`recognized_sources_long`]).
#[test]
fn escaped_blank_regressions() {
    for src in [
        "\nls  %s  \"$LC_ALLTODO\\ $\";",
        "ls \"$x\\ $\"",
        "ls \"\\ $\"",
        "ls \"\\  $\"",
        "ls \"\\ \\ $\"",
        "ls \"$x\\ \"",
        "ls \" \\ $\"",
        "ls \"$x \\ $\"",
    ] {
        expect_recognized(src, false);
    }
    for src in [
        "ls \"a $\"",
        "ls \"a\\ $\"",
        "ls \"\\ a$\"",
        "ls \"$x\\ a$\"",
        "ls \"\\\\$\"",
    ] {
        expect_recognized(src, true);
    }
}

const MIX: &[&str] = &[
    "git status --short",
    "grep -rn \"TODO\" src | sort | uniq -c | sort -rn | head -20",
    "cargo test --release 2>&1 | tail -40",
    "for f in *.el; do wc -l \"$f\"; done | sort -n",
    "find . -name '*.rs' -newer Cargo.toml -print0 | xargs -0 ls -la",
    "cd build && make -j4 && ./run-tests --verbose > log.txt",
    "sed -n '1,50p' README.md; echo \"$(date) done\"",
    "rm -rf target/tmp && mkdir -p target/tmp && cp -r assets target/tmp/",
];

/// The benchmark's commands never reach tree-sitter.
#[test]
fn mix_is_recognized() {
    for cmd in MIX {
        for src in [cmd.to_string(), format!("{cmd} # 123")] {
            expect_recognized(&src, true);
        }
    }
}

/// The cursor conversion keeps what tree-sitter says: every node's kind,
/// range, named flag and field, read here by child index instead.
#[test]
fn conversion_keeps_the_tree() {
    fn dump(node: tree_sitter::Node, field: Option<&str>, depth: usize, out: &mut String) {
        out.push_str(&format!(
            "{:indent$}{}{:?} {}..{}{}{}\n",
            "",
            field.map(|f| format!("{f}: ")).unwrap_or_default(),
            node.kind(),
            node.start_byte(),
            node.end_byte(),
            if node.is_named() { "" } else { " anon" },
            if node.is_missing() { " MISSING" } else { "" },
            indent = depth * 2
        ));
        for i in 0..node.child_count() {
            if let Some(child) = node.child(i) {
                dump(child, node.field_name_for_child(i), depth + 1, out);
            }
        }
    }
    let mut parser = tree_sitter::Parser::new();
    let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
    parser.set_language(&language).unwrap();
    for src in MIX.iter().copied().chain([
        "cat <<EOF\nhello\nEOF\n",
        "if [[ -f x ]]; then echo $((1 + 2)); fi\n",
        "ls 'unterminated\n",
        "case $x in a) ls;; esac\n",
    ]) {
        let src = walk::terminated(src);
        let tree = parser
            .parse(src.as_ref(), None)
            .unwrap_or_else(|| panic!("no parse of {src:?}"));
        let mut want = String::new();
        dump(tree.root_node(), None, 0, &mut want);
        let got = syntax::Tree::from_tree_sitter(&tree);
        assert_eq!(got.dump(), want, "{src:?}");
        assert_eq!(got.has_error(), tree.root_node().has_error());
    }
}

/// A small deterministic generator (xorshift), so one proptest seed
/// makes one source from the grammar below. Tame sources keep to the
/// recognized subset; wild ones add odd words, operators and junk.
struct Gen {
    state: u64,
    wild: bool,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        let mut g = Gen {
            state: seed | 1,
            wild: false,
        };
        g.wild = g.chance(25);
        g
    }

    /// PERCENT when wild, else 0.
    fn odd(&mut self, percent: usize) -> bool {
        self.wild && self.chance(percent)
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, pool: &[&'a str]) -> &'a str {
        pool[self.below(pool.len())]
    }

    /// Usually a plain word; now and then an odd one or random bytes.
    fn word(&mut self) -> String {
        const PLAIN: &[&str] = &[
            "ls",
            "-la",
            "-rn",
            "-n",
            "-40",
            "-0",
            "20",
            "1",
            "status",
            "--short",
            "*.el",
            "src",
            "README.md",
            "target/tmp/",
            "/dev/null",
            ".",
            "..",
            "-j4",
            "a,b",
            "a:b",
            "--x=y",
            "x",
            "%s",
            "~/x",
            "-print0",
            "Cargo.toml",
            "log.txt",
            "-",
        ];
        const ODD: &[&str] = &[
            "0x1f",
            "1#2",
            "1a",
            "-1-",
            "1.5",
            "a\\ b",
            "\\$x",
            "a#b",
            "a=b",
            "!x",
            "x!",
            "@x",
            "?",
            "--",
            "+x",
            "^x",
            "x^",
            "\\\\",
            "\\\"",
            "=",
            "==",
            "=~",
            "x=",
            "#",
            "a#",
            "9",
            "007",
            "-9",
            "0x",
            "--1",
            "\\;",
            "\\|",
            "\\&",
            "12345678901234567890",
            "1#",
            "0x1g",
            "-0x2",
            "2#z@_",
        ];
        if self.odd(15) {
            return self.pick(ODD).to_string();
        }
        match self.below(100) {
            0..=89 => self.pick(PLAIN).to_string(),
            _ => {
                const TAME: &[u8] = b"abcxyzAZ019_./,:+%~*-";
                const CHARS: &[u8] = b"abcxyzAZ019_./,:+@%~!?*=#^-";
                let chars = if self.wild { CHARS } else { TAME };
                let len = 1 + self.below(5);
                (0..len)
                    .map(|_| chars[self.below(chars.len())] as char)
                    .collect()
            }
        }
    }

    fn name(&mut self) -> String {
        if !self.odd(10) {
            self.pick(&["x", "f", "HOME", "_a", "a1", "PATH", "LC_ALL"])
        } else {
            self.pick(&["_", "1", "1x", "10", "a-b"])
        }
        .to_string()
    }

    fn piece(&mut self, depth: usize) -> String {
        match self.below(12) {
            0..=4 => self.word(),
            5 => format!(
                "'{}'",
                self.pick(&["", "a b", "*.rs", "1,50p", "$x", "a\"b", "|;&", "\\"])
            ),
            6 | 7 => {
                let mut s = String::from("\"");
                for _ in 0..self.below(4) {
                    match self.below(9) {
                        0 => s.push_str(&format!("${}", self.name())),
                        1 => s.push_str(&format!("${{{}}}", self.name())),
                        2 if depth < 2 => s.push_str(&format!("$({})", self.statement(depth + 1))),
                        3 => s.push_str(self.pick(&["$@", "$#", "$?", "$$", "$_", "$"])),
                        _ => s.push_str(self.pick(&[
                            "TODO", " done", "a b", "\\\"", "\\$", "\\\\", "\\n", ".b", "x", "'",
                            " # ", "|", ";", "&", "*",
                        ])),
                    }
                }
                s.push('"');
                s
            }
            8 => format!("${}", self.name()),
            9 => format!("${{{}}}", self.name()),
            10 if depth < 2 => format!("$({})", self.statement(depth + 1)),
            _ => self
                .pick(&["$@", "$#", "$?", "$$", "$!", "$-", "$*"])
                .to_string(),
        }
    }

    fn literal(&mut self, depth: usize) -> String {
        let mut s = self.piece(depth);
        while self.chance(20) {
            s.push_str(&self.piece(depth));
        }
        s
    }

    fn redirect(&mut self, depth: usize) -> String {
        match self.below(6) {
            0 => self
                .pick(&["2>&1", ">&2", "2>/dev/null", "1>&2", ">& 2", "2>>log"])
                .to_string(),
            _ if !self.odd(20) => format!(
                "{}{}{}{}",
                self.pick(&["", "", "", "2", "1", "12", "0", "07", "10"]),
                self.pick(&[">", ">>", "<", "&>", "&>>", ">&"]),
                self.pick(&["", " ", ""]),
                self.literal(depth)
            ),
            _ => format!(
                "{}{}{}{}",
                self.pick(&["", "", "", "2", "1", "12", "0", "07", "10"]),
                self.pick(&["<<", ">|", "<&", ">&-", "<>", "<<<"]),
                self.pick(&["", " ", ""]),
                self.literal(depth)
            ),
        }
    }

    fn command(&mut self, depth: usize) -> String {
        let mut parts = Vec::new();
        for _ in 0..self.below(4).saturating_sub(2) {
            let value = if self.chance(20) {
                String::new()
            } else {
                self.literal(depth)
            };
            parts.push(format!(
                "{}{}{value}",
                self.name(),
                self.pick(&["=", "=", "+="])
            ));
        }
        if parts.is_empty() || self.chance(80) {
            parts.push(match self.below(100) {
                _ if self.odd(8) => self
                    .pick(&[
                        "do", "done", "in", "if", "for", "time", "export", "!", "[", "{", "1",
                        "x=1", "$cmd", "\"ls\"", "'ls'", "ls#c", "-x", "~",
                    ])
                    .to_string(),
                0..=89 => self
                    .pick(&[
                        "ls",
                        "git",
                        "grep",
                        "sort",
                        "uniq",
                        "head",
                        "tail",
                        "cargo",
                        "make",
                        "cd",
                        "echo",
                        "printf",
                        "sed",
                        "find",
                        "xargs",
                        "wc",
                        "rm",
                        "mkdir",
                        "cp",
                        "cat",
                        "./run-tests",
                        "env",
                        "sudo",
                        "eval",
                        "timeout",
                        "dd",
                        "tee",
                    ])
                    .to_string(),
                _ => self.literal(depth),
            });
            for _ in 0..self.below(5) {
                if self.chance(15) {
                    parts.push(self.redirect(depth));
                } else {
                    parts.push(self.literal(depth));
                }
            }
        }
        parts.join(self.pick(&[" ", " ", "  ", "\t"]))
    }

    fn unit(&mut self, depth: usize) -> String {
        if self.chance(8) {
            let values: Vec<String> = (0..self.below(3)).map(|_| self.literal(depth)).collect();
            let values = if values.is_empty() && self.chance(50) {
                String::new()
            } else {
                format!(" in {}", values.join(" "))
            };
            let body: Vec<String> = (0..1 + self.below(2))
                .map(|_| format!("{};", self.statement(depth + 1)))
                .collect();
            let mut s = format!(
                "for {}{values}{}do {} done",
                self.name(),
                self.pick(&["; ", ";", "\n", " ; "]),
                body.join(" ")
            );
            if self.chance(20) {
                s.push(' ');
                s.push_str(&self.redirect(depth));
            }
            s
        } else {
            self.command(depth)
        }
    }

    fn statement(&mut self, depth: usize) -> String {
        let mut s = self.unit(depth);
        for _ in 0..self.below(5) {
            s.push_str(if !self.odd(5) {
                self.pick(&[" | ", "|", " && ", "&&", " || ", " | ", " && "])
            } else {
                self.pick(&[" |& ", " & ", "\n| ", " &&\n"])
            });
            s.push_str(&self.unit(depth));
        }
        s
    }

    fn program(&mut self) -> String {
        let mut s = String::from(self.pick(&["", "", "", " ", "\n", "# c\n", "\t"]));
        s.push_str(&self.statement(0));
        for _ in 0..self.below(3) {
            s.push_str(if self.wild {
                self.pick(&["; ", ";", "\n", " ;", ";\n", " # c\n", "; ", "\n\n"])
            } else {
                self.pick(&["; ", ";", " ;", " ; "])
            });
            s.push_str(&self.statement(0));
        }
        s.push_str(self.pick(&["", "", "", " # 123", ";", "; # x", " ", "\n", " #x"]));
        if self.odd(10) {
            s.push_str(self.pick(&["#x", ";;", "\nls", " # c\nls"]));
        }
        if self.odd(40) {
            let junk = self.pick(&[
                "&", "(", ")", "{", "}", "`", "\\", "\n", "#", "'", "\"", "$", "<", ">", "|", ";",
                "=", "!", " ", "\t", "[", "]", "\\\n", "é",
            ]);
            let mut at = self.below(s.len() + 1);
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            s.insert_str(at, junk);
        }
        s
    }
}

/// Sources generated from a grammar of the recognized subset, with
/// shapes just outside it mixed in.
fn grammar_source() -> impl Strategy<Value = String> {
    any::<u64>().prop_map(|seed| Gen::new(seed).program())
}

/// The table of recent analyses answers what `analyze` answers, whether
/// a source was remembered, pushed out by another, or too long to keep.
#[test]
fn recent_answers_as_analyze_does() {
    let mut recent = Recent::default();
    let long = format!("echo {}", "x".repeat(5000));
    let sources: Vec<String> = (0..600)
        .map(|n| match n % 3 {
            0 => format!("grep -n x{n} f | sort"),
            1 => format!("rm -rf t{n} &"),
            _ => format!("echo {n} > out"),
        })
        .chain([long])
        .collect();
    for round in 0..2 {
        for src in &sources {
            assert_eq!(*recent.analyze(src), analyze(src), "{src} (round {round})");
        }
    }
}

/// A repeated source is answered from its slot, not analysed again; a
/// source too long to keep is analysed each time.
#[test]
fn recent_remembers_a_repeated_source() {
    let mut recent = Recent::default();
    let first: *const Analysis = &*recent.analyze("git status --short");
    let again = recent.analyze("git status --short");
    assert!(matches!(again, Cow::Borrowed(a) if std::ptr::eq(a, first)));
    let long = format!("echo {}", "x".repeat(5000));
    assert!(matches!(recent.analyze(&long), Cow::Owned(_)));
}

fn keys(src: &str) -> (Vec<String>, bool) {
    let a = analyze(src);
    (a.keys, a.unkeyed)
}

#[test]
fn command_keys_name_the_command_and_its_subcommand() {
    for (src, want) in [
        ("git status --short", &["git status"][..]),
        ("git -C sub log -3", &["git log"]),
        ("npm test --watch=false", &["npm test"]),
        ("npm run build", &["npm run build"]),
        ("cargo +nightly build --release", &["cargo build"]),
        ("make -j4 test", &["make test"]),
        ("make", &["make"]),
        ("rm -rf build", &["rm"]),
        ("npm test && curl -s x", &["npm test", "curl"]),
        ("cat x | head -3", &["cat", "head"]),
        ("timeout 5 npm test", &["npm test"]),
        ("python3 -m pytest -q", &["python3 -m pytest"]),
        ("./run-tests --verbose", &["./run-tests"]),
        ("'git' \"status\"", &["git status"]),
        ("g\\it st\\atus", &["git status"]),
        ("git status; git status", &["git status"]),
        ("echo \"$(git log -1)\"", &["git log", "echo"]),
    ] {
        let (got, unkeyed) = keys(src);
        assert_eq!(got, want, "{src}");
        assert!(!unkeyed, "{src}");
    }
    // No session answer may cover these.
    for src in [
        "eval \"$x\"",
        "\"$cmd\" -v",
        "rm -rf /",
        "git reset --hard",
        "python -c 'print(1)'",
        "bash -c 'ls'",
        "sudo ls",
        "ls && $x",
        "env \"$x\" ls",
        "ls (",
    ] {
        assert!(keys(src).1, "{src}");
    }
}

fn access_of(src: &str) -> Access {
    Places::default().access(&analyze(src), "/ws", "/ws", Some("/home/u"))
}

#[test]
fn read_only_paths_are_judged_against_the_workspace() {
    for src in [
        "git status",
        "ls",
        "cat a/b.txt | head",
        "grep -rn TODO src",
        "grep -rn /api/ src",
        "rg -n 'fn main' .",
        "sed -n '1,50p' README.md",
        "echo /etc/passwd",
        "cd sub && cat ../x",
        "cd sub; cd deeper; cat ../../y",
        "cat ./a/../b",
        "head -20 \"README.md\"",
        "wc -l < data.txt",
        "find . -name '/etc/*' -type f",
        "git diff -- src/lib.rs",
        "cat /ws/inside.txt",
        "jq .name package.json",
    ] {
        assert!(access_of(src).inside, "{src}: {:?}", access_of(src));
    }
    for src in [
        "cat /etc/passwd",
        "cat ../x",
        "cat \"/etc/pa\"'sswd'",
        "cat \\/etc\\/passwd",
        "cat < /etc/passwd",
        "cd sub && cat ../../x",
        "cd /etc && ls",
        "cd .. && ls",
        "cd && ls",
        "cd - && ls",
        "(cd sub); cat ../x",
        "cat \"$f\"",
        "ls ~/.ssh",
        "ls ~u/x",
        "grep -e /etc/x f",
        "grep x /wsx/y",
        "find / -name x",
        "git -C /etc status",
        "git --git-dir=/srv/repo log",
        "for f in *.el; do wc -l \"$f\"; done",
        "rm -rf build",
        "ls > out",
        "cat x &",
    ] {
        assert!(!access_of(src).inside, "{src}: {:?}", access_of(src));
    }
    assert_eq!(
        access_of("cd sub && cat ../x ./y").paths,
        ["/ws/sub", "/ws/x", "/ws/sub/y"]
    );
    assert_eq!(access_of("cat ../../etc//passwd").paths, ["/etc/passwd"]);
    assert_eq!(access_of("ls ~/p").paths, ["/home/u/p"]);
    // The working directory itself must be inside.
    let mut places = Places::default();
    assert!(!places.access(&analyze("ls"), "/tmp", "/ws", None).inside);
    assert!(
        places
            .access(&analyze("ls x"), "/ws/sub/", "/ws/", None)
            .inside
    );
    // The remembered directories follow a change of either.
    assert!(
        !places
            .access(&analyze("ls x"), "/ws/sub/", "/other/", None)
            .inside
    );
}

/// The judge answers as the analysis and the access do, `~` being its
/// HOME, for a new source and a repeated one alike.
#[test]
fn judge_gives_the_analysis_and_its_access() {
    let mut judge = Judge::new(Some("/home/u".into()));
    for round in 0..2 {
        for src in [
            "ls ~/p",
            "cat /etc/passwd",
            "git status --short",
            "rm -rf x",
        ] {
            let facts = judge.judge(src, "/ws/", "/ws");
            assert_eq!(*facts.analysis, analyze(src), "{src} (round {round})");
            assert_eq!(facts.access, access_of(src), "{src} (round {round})");
        }
    }
}

/// The reference for [`normalize`]: every path resolved by its components.
fn normalize_by_components(dir: &str, path: &str) -> String {
    let start = if path.starts_with('/') { "" } else { dir };
    let mut parts: Vec<&str> = Vec::new();
    for part in start.split('/').chain(path.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        "/".into()
    } else {
        parts.iter().map(|p| format!("/{p}")).collect()
    }
}

proptest! {
    #[test]
    fn normalize_agrees_with_resolving_every_component(
        dir in proptest::collection::vec(prop_oneof!["a", "bc"], 0..4),
        path in proptest::collection::vec(prop_oneof!["a", "bc", ".", "..", ""], 0..6),
        absolute in any::<bool>(),
        trailing in any::<bool>(),
    ) {
        let dir = format!("/{}", dir.join("/"));
        let mut path = path.join("/");
        if absolute { path.insert(0, '/'); }
        if trailing { path.push('/'); }
        prop_assert_eq!(normalize(&dir, &path), normalize_by_components(&dir, &path));
    }
}

/// A subcommand is no file: `git status` names none, for the permission
/// decision and for the card alike.
#[test]
fn subcommands_are_not_files() {
    assert!(access_of("git status").paths.is_empty());
    assert!(access_of("git log --oneline -5").paths.is_empty());
    assert!(access_of("git diff HEAD~1 main..topic").paths.is_empty());
    assert_eq!(
        access_of("git diff -- src/lib.rs").paths,
        ["/ws/src/lib.rs"]
    );
    assert_eq!(access_of("git -C /etc status").paths, ["/etc"]);
    assert_eq!(access_of("git grep -n TODO src").paths, ["/ws/src"]);
    assert_eq!(access_of("git show ../x..y").paths, ["/x..y"]);
}

/// One command's line of a card: its label, then what it touches.
fn described(src: &str) -> Vec<String> {
    describe(src, "/ws", "/ws", Some("/home/u"))
        .into_iter()
        .map(|e| {
            let mut line = e.label.clone();
            for (what, paths) in [
                ("reads", &e.reads),
                ("writes", &e.writes),
                ("deletes", &e.deletes),
            ] {
                if !paths.is_empty() {
                    line.push_str(&format!(" {what}: {}", paths.join(", ")));
                }
            }
            if e.unknown {
                line.push_str(" unknown");
            }
            line
        })
        .collect()
}

#[test]
fn each_command_says_what_it_touches() {
    assert_eq!(described("git status"), ["git status"]);
    assert_eq!(described("git log"), ["git log"]);
    assert_eq!(described("rm -rf /etc"), ["rm deletes: /etc"]);
    assert_eq!(described("rm -rf src"), ["rm deletes: src"]);
    assert_eq!(
        described("cat a.txt /etc/passwd | grep x > out.txt\nmv a b/c\ncp -r src /tmp/dst"),
        [
            "cat reads: a.txt, /etc/passwd",
            "grep writes: out.txt",
            "mv writes: b/c deletes: a",
            "cp reads: src writes: /tmp/dst",
        ]
    );
    assert_eq!(
        described("cd sub && touch x && mkdir -p ../d && tee -a log < in"),
        [
            "cd reads: sub",
            "touch writes: sub/x",
            "mkdir writes: d",
            "tee reads: sub/in writes: sub/log",
        ]
    );
    assert_eq!(
        described("cargo build && make"),
        ["cargo build unknown", "make unknown"]
    );
    assert_eq!(
        described("echo hi && ls ~/p"),
        ["echo", "ls reads: /home/u/p"]
    );
    assert_eq!(described("rm \"$f\""), ["rm unknown"]);
    assert_eq!(described("sed -i s/a/b/ f.txt"), ["sed writes: f.txt"]);
    assert_eq!(described("ls ."), ["ls reads: ."]);
    // Classes and character offsets, for highlighting.
    let effects = describe("é; sudo rm -rf /", "/ws", "/ws", None);
    assert_eq!(effects[1].label, "sudo");
    assert_eq!(effects[1].class, Class::Dangerous);
    assert_eq!((effects[1].start, effects[1].end), (3, 16));
}
