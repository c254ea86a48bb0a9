//! Analyzer and outcome tests. The pipeline table runs every case through
//! a real Bash with the snapshot attached, so it checks the appended line
//! as well as the rules.

use std::io::{Read, Seek};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

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

#[test]
fn snapshot_line_parses() {
    assert_eq!(parse_snapshot("0 141 0\n"), Some(vec![141, 0]));
    assert_eq!(parse_snapshot(""), None);
    assert_eq!(parse_snapshot("x 1"), None);
    assert_eq!(parse_snapshot("0"), None);
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
    let mut status_file = tempfile_in(dir).unwrap_or_else(|e| panic!("status file: {e}"));
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
    let out = cmd.output().unwrap_or_else(|e| panic!("bash: {e}"));
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
    std::fs::create_dir_all(dir.join("sub")).unwrap_or_else(|e| panic!("{e}"));
    for (name, text) in [("a", "alpha\n"), ("b", "beta\n"), ("f", "one\ntwo\n")] {
        std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("{e}"));
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

/// The fast path for plain sources gives exactly the tree-sitter
/// path's analysis, and it does take most of the generated sources.
#[test]
fn simple_sources_match_tree_sitter() {
    let mut runner = TestRunner::new(Config {
        cases: 10_000,
        failure_persistence: None,
        ..Config::default()
    });
    let fast = std::cell::Cell::new(0usize);
    let result = runner.run(&simple_source(), |src| {
        if let Some(quick) = simple::analyze(&src) {
            fast.set(fast.get() + 1);
            prop_assert_eq!(quick, walk::analyze_tree(&src), "source: {:?}", src);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        fast.get() > 800,
        "only {} sources took the fast path",
        fast.get()
    );
    for src in [
        "git status --short # 5",
        "rm -rf t && mkdir -p t && cp -r a t/\n",
    ] {
        assert!(simple::analyze(src).is_some(), "{src:?} should be plain");
    }
}
