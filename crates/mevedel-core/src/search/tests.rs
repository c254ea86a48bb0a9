//! Glob and Grep against ripgrep on a fixture tree built here: hidden
//! files, nested .gitignore, VCS directories, a binary and a CRLF file,
//! symbolic links inside and outside the root. Every output mode must
//! give the same lines as `rg --hidden` with the same rules (compared
//! sorted, since neither sorts its results).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::budget::Budget;
use super::grep::{Mode, Options};
use super::unsaved::Unsaved;
use super::{Plan, Root};

fn write(p: &Path, bytes: &[u8]) {
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(p, bytes).expect("write a test file");
}

/// The fixture: DIR/tree is searched, DIR/outside is not.
fn fixture(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mevedel-search-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let t = dir.join("tree");
    let files: &[(&str, &[u8])] = &[
        (".git/config", b"[core]\n\tdefun = git\n"),
        (".git/HEAD", b"ref: refs/heads/main\n"),
        (".gitignore", b"ignored.txt\nbuild/\n*.log\n"),
        (".hidden.el", b"(defun hidden ())\n"),
        (
            "a.el",
            b";;; a.el\n(defun alpha ()\n  \"Doc.\")\n\n(defvar x 1)\n(defun beta (y)\n  y)\n;; DEFUN in a comment\n",
        ),
        ("a-b.el", b"(defun dash ())\n"),
        ("b.txt", b"Defun upper\n defun lower\nnothing\n"),
        ("crlf.txt", b"defun one\r\nother\r\ndefun two\r\n"),
        ("bin.dat", b"\0\0\0defun binary\n"),
        ("ignored.txt", b"defun ignored\n"),
        ("build/out.el", b"(defun built ())\n"),
        ("x.log", b"defun log\n"),
        ("sub/.gitignore", b"secret.el\n"),
        ("sub/secret.el", b"(defun secret ())\n"),
        (
            "sub/c.el",
            b"line1\nline2\n(defun c1 ()\nline4\nline5\nline6\n(defun c2 ()\n  \"multi\nline\")\nend\n",
        ),
        ("sub/deep/d.el", b"(defun deep ())\n(defun deeper ())\n"),
        ("sub/.hg/store", b"defun hg\n"),
        (".svn/entries", b"defun svn\n"),
        ("sub/deep/.jj/x", b"defun jj\n"),
        ("uni.txt", "défun accent\ndefun ünïcode\n".as_bytes()),
        ("empty.el", b""),
    ];
    for (rel, bytes) in files {
        write(&t.join(rel), bytes);
    }
    write(&dir.join("outside/out.el"), b"(defun outside ())\n");
    let link = |target: &Path, at: &str| {
        symlink(target, t.join(at)).unwrap();
    };
    link(Path::new("sub/c.el"), "link_in.el");
    link(&dir.join("outside/out.el"), "link_out.el");
    link(&dir.join("outside"), "dirlink_out");
    link(Path::new("sub"), "dirlink_in");
    dir
}

const VCS_GLOBS: [&str; 12] = [
    "-g", "!.git", "-g", "!.svn", "-g", "!.hg", "-g", "!.bzr", "-g", "!.jj", "-g", "!.sl",
];

fn rg(cwd: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new("rg")
        .current_dir(cwd)
        .args(["--no-config", "--hidden", "--sort", "path"])
        .args(args)
        // Last, so they win over a caller's positive glob as in ours.
        .args(VCS_GLOBS)
        .stdin(Stdio::null())
        .output()
        .expect("ripgrep (rg) must be installed (scripts/deps.sh)");
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "rg {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_end_matches('\r').to_string())
        .filter(|l| l != "--")
        .collect();
    lines.sort();
    lines
}

fn root(tree: &Path) -> Root {
    Root::ordinary(tree, "")
}

fn ours_grep(tree: &Path, opts: &Options) -> Vec<String> {
    let found = super::grep::grep_lines(
        &[root(tree)],
        opts,
        &Unsaved::default(),
        &Budget::unlimited(),
    )
    .unwrap();
    let mut lines: Vec<String> = found.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

fn ours_glob(tree: &Path, pattern: &str) -> Vec<String> {
    let found = super::glob::glob_lines(
        &[root(tree)],
        pattern,
        &Unsaved::default(),
        &Budget::unlimited(),
    )
    .unwrap();
    let mut lines: Vec<String> = found.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

fn opts(pattern: &str, mode: Mode) -> Options {
    Options {
        pattern: pattern.into(),
        mode,
        head_limit: 0,
        ..Options::default()
    }
}

#[test]
fn grep_matches_ripgrep_in_every_mode() {
    let dir = fixture("grep");
    let tree = dir.join("tree");
    let cases: Vec<(Options, Vec<&str>)> = vec![
        (opts("defun", Mode::FilesWithMatches), vec!["-l", "defun"]),
        (
            opts("defun", Mode::Count),
            vec!["-c", "--with-filename", "defun"],
        ),
        (
            opts("defun", Mode::Content),
            vec!["-n", "--with-filename", "defun"],
        ),
        (
            Options {
                case_insensitive: true,
                ..opts("defun", Mode::Content)
            },
            vec!["-n", "-i", "--with-filename", "defun"],
        ),
        (
            Options {
                line_numbers: false,
                ..opts("defun", Mode::Content)
            },
            vec!["-N", "--with-filename", "defun"],
        ),
        (
            Options {
                before: 1,
                after: 2,
                ..opts("defun", Mode::Content)
            },
            vec!["-n", "-B1", "-A2", "--with-filename", "defun"],
        ),
        (
            Options {
                before: 2,
                after: 2,
                ..opts("c2", Mode::Content)
            },
            vec!["-n", "-C2", "--with-filename", "c2"],
        ),
        (
            Options {
                glob: Some("*.el".into()),
                ..opts("defun", Mode::FilesWithMatches)
            },
            vec!["-l", "-g", "*.el", "defun"],
        ),
        (
            Options {
                glob: Some("*.log".into()),
                ..opts("defun", Mode::FilesWithMatches)
            },
            vec!["-l", "-g", "*.log", "defun"],
        ),
        (
            Options {
                glob: Some("sub/**".into()),
                ..opts("defun", Mode::Count)
            },
            vec!["-c", "--with-filename", "-g", "sub/**", "defun"],
        ),
        (
            Options {
                file_type: Some("elisp".into()),
                ..opts("defun", Mode::FilesWithMatches)
            },
            vec!["-l", "-t", "elisp", "defun"],
        ),
        (
            Options {
                multiline: true,
                ..opts("\"multi\\nline", Mode::Content)
            },
            vec![
                "-n",
                "-U",
                "--multiline-dotall",
                "--with-filename",
                "\"multi\\nline",
            ],
        ),
        (
            Options {
                multiline: true,
                ..opts("c1.*?c2", Mode::Count)
            },
            vec![
                "-c",
                "-U",
                "--multiline-dotall",
                "--with-filename",
                "c1.*?c2",
            ],
        ),
        (
            opts("^defun \\w+$", Mode::Content),
            vec!["-n", "--with-filename", "^defun \\w+$"],
        ),
        (
            opts("d.fun", Mode::Content),
            vec!["-n", "--with-filename", "d.fun"],
        ),
        (
            opts("nomatchatall", Mode::Content),
            vec!["-n", "nomatchatall"],
        ),
    ];
    for (o, args) in cases {
        let want = rg(&tree, &args);
        let got = ours_grep(&tree, &o);
        assert_eq!(got, want, "rg {args:?}");
    }
    // The fixture exercises what it claims to.
    let files = ours_grep(&tree, &opts("defun", Mode::FilesWithMatches));
    for present in [
        ".hidden.el",
        "crlf.txt",
        "sub/c.el",
        "sub/deep/d.el",
        "a-b.el",
    ] {
        assert!(
            files.contains(&present.to_string()),
            "{present} missing: {files:?}"
        );
    }
    for absent in [
        ".git/config",
        "bin.dat",
        "ignored.txt",
        "build/out.el",
        "x.log",
        "sub/secret.el",
        "sub/.hg/store",
        ".svn/entries",
        "link_in.el",
        "link_out.el",
        "dirlink_out/out.el",
    ] {
        assert!(
            !files.iter().any(|f| f.contains(absent)),
            "{absent} present: {files:?}"
        );
    }
}

#[test]
fn glob_matches_ripgrep_files() {
    let dir = fixture("glob");
    let tree = dir.join("tree");
    for pattern in [
        "*.el",
        "**/*.el",
        "sub/*.el",
        "sub/**/*.el",
        "*.{el,txt}",
        ".hidden*",
        "nomatch/**",
        "sub/deep/*",
        "**/deep/**",
        "*",
    ] {
        let want = rg(&tree, &["--files", "--no-ignore", "-g", pattern]);
        let got = ours_glob(&tree, pattern);
        assert_eq!(got, want, "pattern {pattern}");
    }
    // Glob ignores ignore files but still skips VCS directories and links.
    let all = ours_glob(&tree, "**/*");
    assert!(all.contains(&"ignored.txt".to_string()) && all.contains(&"build/out.el".to_string()));
    assert!(
        !all.iter()
            .any(|f| f.starts_with(".git/") || f.contains(".hg/") || f.contains("link"))
    );
}

#[test]
fn glob_patterns_are_checked_and_narrowed() {
    let dir = fixture("narrow");
    let tree = dir.join("tree");
    let b = Budget::unlimited();
    for bad in ["/etc/*", "../*", "sub/../../x", "~/x"] {
        let e = super::glob::glob_lines(&[root(&tree)], bad, &Unsaved::default(), &b).err();
        assert!(e.is_some(), "{bad} accepted");
    }
    let e = super::glob::glob_lines(&[root(&tree)], "dirlink_out/**", &Unsaved::default(), &b)
        .err()
        .map(|e| e.message)
        .unwrap_or_default();
    assert!(e.contains("outside the search path"), "{e}");
    assert!(!e.contains(&*dir.to_string_lossy()), "{e}");
    // A link inside the root is simply not followed; a missing qualified
    // directory is an ordinary no-match.
    for none in ["dirlink_in/**", "missing/dir/*.el"] {
        let found = super::glob::glob_lines(&[root(&tree)], none, &Unsaved::default(), &b).unwrap();
        assert!(found.is_empty(), "{none}");
    }
    let grep_bad = Options {
        glob: Some("../*".into()),
        ..opts("x", Mode::Content)
    };
    assert!(super::grep::grep_lines(&[root(&tree)], &grep_bad, &Unsaved::default(), &b).is_err());
}

#[test]
fn explicit_paths_select_ignored_content() {
    let dir = fixture("explicit");
    let tree = dir.join("tree");
    let b = Budget::unlimited();
    let file = Root::ordinary(&tree.join("ignored.txt"), "ignored.txt");
    let found = super::grep::grep_lines(
        &[file],
        &opts("defun", Mode::Content),
        &Unsaved::default(),
        &b,
    )
    .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found.line(0), "ignored.txt:1:defun ignored");
    let build = Root::ordinary(&tree.join("build"), "build");
    let found = super::grep::grep_lines(
        &[build],
        &opts("defun", Mode::FilesWithMatches),
        &Unsaved::default(),
        &b,
    )
    .unwrap();
    assert_eq!(found.lines().collect::<Vec<_>>(), ["build/out.el"]);
}

#[test]
fn pagination_and_errors() {
    let dir = fixture("page");
    let tree = dir.join("tree");
    let b = Budget::unlimited();
    let plan = Plan::ordinary(root(&tree));
    let all = super::grep(&plan, &opts("defun", Mode::Content), &b).unwrap();
    assert!(all.total > 5);
    let page = super::grep(
        &plan,
        &Options {
            head_limit: 2,
            offset: 1,
            ..opts("defun", Mode::Content)
        },
        &b,
    )
    .unwrap();
    assert_eq!(page.shown, 2);
    assert!(
        page.text
            .contains(&format!("Showing output lines 2-3 of {}", all.total)),
        "{}",
        page.text
    );
    let past = super::grep(
        &plan,
        &Options {
            offset: all.total,
            ..opts("defun", Mode::Content)
        },
        &b,
    );
    assert!(past.is_err_and(|e| e.message.contains("past the last output line")));
    let none = super::grep(&plan, &opts("zzzz", Mode::Content), &b).unwrap();
    assert_eq!(none.text, "No matches found.");
    assert!(
        super::grep(&plan, &opts("(", Mode::Content), &b)
            .is_err_and(|e| e.message.contains("invalid regular expression"))
    );
    assert!(
        super::grep(
            &plan,
            &Options {
                file_type: Some("nosuchtype".into()),
                ..opts("x", Mode::Content)
            },
            &b
        )
        .is_err()
    );
}

#[test]
fn cancellation_and_timeout() {
    let dir = fixture("budget");
    let tree = dir.join("tree");
    // A big file so the search takes a moment.
    let big: String = (0..200_000).map(|i| format!("line {i} defun\n")).collect();
    write(&tree.join("big.txt"), big.as_bytes());
    let cancel = Arc::new(AtomicBool::new(true));
    let b = Budget::new(cancel, None);
    let r = super::grep(
        &Plan::ordinary(root(&tree)),
        &opts("defun", Mode::Content),
        &b,
    );
    assert!(r.is_err_and(|e| e.message.contains("cancelled")));
    let b = Budget::new(Arc::new(AtomicBool::new(false)), Some(Duration::ZERO));
    let p = super::grep(
        &Plan::ordinary(root(&tree)),
        &opts("defun", Mode::Content),
        &b,
    )
    .unwrap();
    assert!(p.partial);
    assert!(
        p.text.contains("Partial results") && p.text.contains("narrow `path`"),
        "{}",
        p.text
    );
}

#[test]
fn long_lines_are_previewed_with_a_read_continuation() {
    let dir = fixture("long");
    let tree = dir.join("tree");
    write(
        &tree.join("min.js"),
        format!("{}defun{}\n", "x".repeat(3000), "y".repeat(10)).as_bytes(),
    );
    let file = Root::ordinary(&tree.join("min.js"), "min.js");
    let found = super::grep::grep_lines(
        &[file],
        &opts("defun", Mode::Content),
        &Unsaved::default(),
        &Budget::unlimited(),
    )
    .unwrap();
    let line = found.line(0);
    assert!(line.starts_with("min.js:1:xxx"));
    assert!(
        line.contains("\"offset\": 1, \"limit\": 1, \"char_offset\": 1000"),
        "{line}"
    );
    assert!(line.len() < 1300);
}

#[test]
fn glob_stops_at_its_cap_and_says_so() {
    let tree = std::env::temp_dir().join(format!("mevedel-glob-cap-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tree);
    for d in 0..=super::glob::GLOB_CAP / 1000 {
        let dir = tree.join(format!("d{d:03}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..1000 {
            fs::File::create(dir.join(format!("f{f:03}"))).unwrap();
        }
    }
    let found = super::glob::glob_lines(
        &[root(&tree)],
        "**/*",
        &Unsaved::default(),
        &Budget::unlimited(),
    )
    .unwrap();
    assert_eq!(found.lines().count(), super::glob::GLOB_CAP);
    assert!(
        found
            .notes
            .iter()
            .any(|n| n.contains("Glob stopped after 100000 files")),
        "{:?}",
        found.notes
    );
    fs::remove_dir_all(&tree).unwrap();
}

#[test]
fn walks_from_the_root_skip_kernel_file_systems() {
    let b = Budget::new(
        Arc::new(AtomicBool::new(false)),
        Some(Duration::from_secs(5)),
    );
    let found = super::glob::glob_lines(
        &[root(Path::new("/"))],
        "**/status",
        &Unsaved::default(),
        &b,
    )
    .unwrap();
    assert!(
        !found
            .lines()
            .any(|l| l.starts_with("proc/") || l.starts_with("/proc/"))
    );
    // Named as the path, they are searched.
    // (A budget of its own: the walk of / may have spent the first.)
    let found = super::glob::glob_lines(
        &[root(Path::new("/proc/1"))],
        "status",
        &Unsaved::default(),
        &Budget::unlimited(),
    )
    .unwrap();
    assert!(
        found.lines().any(|l| l == "status"),
        "{:?}",
        found.lines().collect::<Vec<_>>()
    );
}

#[test]
fn unsaved_buffers_stand_in_for_their_files() {
    use super::unsaved::{Buffer, CHANGED, NEW};
    let tree = fixture("unsaved").join("tree");
    let t = crate::resource::contain::truename(&tree);
    let buffer = |rel: &str, text: &str, new: bool| {
        (t.join(rel), Buffer::of_file(text.as_bytes().to_vec(), new))
    };
    let unsaved = Unsaved::new([
        buffer("a.el", "added\nlines\n(defun alpha-edited ())\n", false),
        buffer("sub/new.el", "(defun fresh ())\n", true),
        buffer("new.log", "(defun ignored-log ())\n", true),
        buffer("build/n.el", "(defun ignored-dir ())\n", true),
        buffer(".git/n.el", "(defun in-vcs ())\n", true),
    ]);
    let b = Budget::unlimited();
    let run = |mode| {
        let found =
            super::grep::grep_lines(&[root(&tree)], &opts("defun", mode), &unsaved, &b).unwrap();
        found.lines().map(str::to_string).collect::<Vec<_>>()
    };
    let content = run(Mode::Content);
    let at = |l: &str| content.iter().position(|c| c == l);
    let head = at(&format!("a.el{CHANGED}")).expect("a.el's heading");
    assert_eq!(at("a.el:3:(defun alpha-edited ())"), Some(head + 1));
    assert!(at("a.el:2:(defun alpha ()").is_none(), "{content:?}");
    assert!(at(&format!("sub/new.el{NEW}")).is_some(), "{content:?}");
    assert!(at("sub/new.el:1:(defun fresh ())").is_some());
    for hidden in ["ignored-log", "ignored-dir", "in-vcs"] {
        assert!(!content.iter().any(|l| l.contains(hidden)), "{hidden}");
    }
    // Lines of files without buffers are the disk's, as rg sees them.
    assert!(at("sub/c.el:3:(defun c1 ()").is_some());
    let files = run(Mode::FilesWithMatches);
    assert!(files.contains(&format!("a.el{CHANGED}")), "{files:?}");
    assert!(files.contains(&format!("sub/new.el{NEW}")), "{files:?}");
    assert!(files.contains(&"sub/c.el".to_string()));
    assert!(run(Mode::Count).contains(&format!("a.el:1{CHANGED}")));
    // A single file is searched as its buffer, new or not.
    let file = Root::ordinary(&tree.join("a.el"), "a.el");
    let found =
        super::grep::grep_lines(&[file], &opts("alpha", Mode::Content), &unsaved, &b).unwrap();
    assert_eq!(
        found.lines().collect::<Vec<_>>(),
        [
            format!("a.el{CHANGED}").as_str(),
            "a.el:3:(defun alpha-edited ())"
        ]
    );
    // Glob lists new buffers by name, ignore files aside, VCS not.
    let listed = super::glob::glob_lines(&[root(&tree)], "**/*.el", &unsaved, &b).unwrap();
    let listed: Vec<&str> = listed.lines().collect();
    assert!(listed.contains(&format!("sub/new.el{NEW}").as_str()));
    assert!(listed.contains(&format!("build/n.el{NEW}").as_str()));
    assert!(listed.contains(&"a.el"), "{listed:?}");
    assert!(!listed.iter().any(|l| l.contains(".git/")));
    assert_eq!(listed.len(), ours_glob(&tree, "**/*.el").len() + 2);
}

#[test]
fn read_pages_a_buffer_like_a_file_and_says_whose_text_it_is() {
    use crate::resource::page::PageRequest;
    use crate::resource::read::read_buffer;
    let req = PageRequest {
        offset: Some(2),
        limit: Some(1),
        char_offset: None,
    };
    let out = read_buffer(b"one\ntwo\nthree\n", "f.txt", false, &req).unwrap();
    assert!(out.starts_with("(unsaved changes in Emacs: "), "{out}");
    assert!(out.contains("\n     2\ttwo\n"), "{out}");
    assert!(out.contains("Showing lines 2-2 of 3"), "{out}");
    let new = read_buffer(b"x\n", "n.txt", true, &PageRequest::default()).unwrap();
    assert!(new.starts_with("(unsaved new buffer in Emacs: "), "{new}");
    let past = PageRequest {
        offset: Some(9),
        ..PageRequest::default()
    };
    let e = read_buffer(b"x\n", "n.txt", false, &past).expect_err("past the end");
    assert!(
        e.message.contains("unsaved changes in Emacs"),
        "{}",
        e.message
    );
    let e = read_buffer(b"a\0b", "b.bin", false, &PageRequest::default()).expect_err("binary");
    assert!(e.message.contains("binary"), "{}", e.message);
}

#[test]
fn documents_are_searched_under_their_addresses_with_their_line_numbers() {
    let plan = Plan::texts(vec![
        (
            "history://root".into(),
            b"## User\nwhere is the answer?\n\n## Assistant\nthe answer is 42\n".to_vec(),
        ),
        (
            "history://saved/s1/segment-0001.chat.org".into(),
            b"## User\nno answer here\n".to_vec(),
        ),
    ]);
    let mut content = opts("answer", Mode::Content);
    content.line_numbers = true;
    let page = super::grep(&plan, &content, &Budget::unlimited()).unwrap();
    assert_eq!(
        page.text.lines().collect::<Vec<_>>(),
        vec![
            "history://root:2:where is the answer?",
            "history://root:5:the answer is 42",
            "history://saved/s1/segment-0001.chat.org:2:no answer here",
        ]
    );
    let files = super::grep(
        &plan,
        &opts("42", Mode::FilesWithMatches),
        &Budget::unlimited(),
    )
    .unwrap();
    assert_eq!(files.text.trim(), "history://root");
}

#[test]
fn a_plan_for_a_path_names_what_is_wrong_with_it() {
    let dir = std::env::temp_dir().join(format!("mevedel-plan-path-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write(&dir.join("a.txt"), b"alpha\n");
    let missing = dir.join("nope");
    let e = Plan::for_path(&missing, "nope", Unsaved::default()).expect_err("missing");
    assert_eq!(e.message, "`nope` does not exist");
    let fifo = dir.join("pipe");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success())
    );
    let e = Plan::for_path(&fifo, "pipe", Unsaved::default()).expect_err("fifo");
    assert!(e.message.contains("not a regular file"), "{}", e.message);
    let plan = Plan::for_path(&dir, "d", Unsaved::default()).unwrap();
    let page = super::glob(&plan, "*.txt", &Budget::unlimited()).unwrap();
    assert_eq!(page.text.trim(), "d/a.txt");
    // A new file that exists only as an unsaved buffer is searched as it.
    let new = dir.join("new.txt");
    let unsaved = Unsaved::new([(
        new.clone(),
        super::unsaved::Buffer::of_file(b"alpha beta\n".to_vec(), true),
    )]);
    let plan = Plan::for_path(&new, "new.txt", unsaved).unwrap();
    let page = super::grep(&plan, &opts("beta", Mode::Content), &Budget::unlimited()).unwrap();
    assert!(page.text.contains("alpha beta"), "{}", page.text);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn grep_options_are_checked_for_the_model() {
    use super::grep::Asked;
    let ok = Options::check(Asked {
        pattern: "x".into(),
        mode: Some("count".into()),
        before: 2,
        head_limit: 10,
        ..Asked::default()
    })
    .unwrap();
    assert_eq!(ok.mode, Mode::Count);
    assert_eq!((ok.before, ok.after, ok.head_limit), (2, 0, 10));
    let default = Options::check(Asked::default()).unwrap();
    assert_eq!(default.mode, Mode::FilesWithMatches);
    let e = Options::check(Asked {
        mode: Some("lines".into()),
        ..Asked::default()
    })
    .expect_err("unknown mode");
    assert!(
        e.message.contains("unknown output_mode `lines`"),
        "{}",
        e.message
    );
    let e = Options::check(Asked {
        after: -1,
        ..Asked::default()
    })
    .expect_err("negative");
    assert_eq!(e.message, "Grep: `-A` must not be negative (got -1)");
}

/// Files below DIR in the order reading its directories gives them,
/// each directory's files where the directory is met (depth first).
fn directory_order(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type().unwrap().is_dir() {
            directory_order(&entry.path(), &format!("{name}/"), out);
        } else {
            out.push(name);
        }
    }
}

#[test]
fn results_come_in_the_walk_order_and_pages_stay_put() {
    let tree = std::env::temp_dir().join(format!("mevedel-walk-order-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tree);
    for d in 0..4 {
        for f in 0..40 {
            write(
                &tree.join(format!("d{d}/f{f:02}.el")),
                format!("(defun f{d}-{f} ())\n").as_bytes(),
            );
        }
    }
    let mut walked = Vec::new();
    directory_order(&tree, "", &mut walked);
    let mut sorted = walked.clone();
    sorted.sort();
    // The case to tell apart: these directories do not list themselves
    // in name order, so a sorted result is not the walk's.
    assert_ne!(
        walked, sorted,
        "the fixture's directories read in name order"
    );
    let glob = ours_glob_unsorted(&tree, "**/*.el");
    assert_eq!(glob, walked);
    let opts = opts("defun", Mode::FilesWithMatches);
    let files = super::grep::grep_lines(
        &[root(&tree)],
        &opts,
        &Unsaved::default(),
        &Budget::unlimited(),
    )
    .unwrap();
    assert_eq!(files.lines().collect::<Vec<_>>(), walked);
    // Pages of one search, asked for separately, tile its whole output.
    let plan = Plan::ordinary(root(&tree));
    let b = Budget::unlimited();
    let mut paged = Vec::new();
    for offset in (0..walked.len()).step_by(50) {
        let page = super::grep(
            &plan,
            &Options {
                head_limit: 50,
                offset,
                ..opts.clone()
            },
            &b,
        )
        .unwrap();
        paged.extend(
            page.text
                .lines()
                .filter(|l| l.ends_with(".el"))
                .map(str::to_string),
        );
    }
    assert_eq!(paged, walked);
    fs::remove_dir_all(&tree).unwrap();
}

fn ours_glob_unsorted(tree: &Path, pattern: &str) -> Vec<String> {
    super::glob::glob_lines(
        &[root(tree)],
        pattern,
        &Unsaved::default(),
        &Budget::unlimited(),
    )
    .unwrap()
    .lines()
    .map(str::to_string)
    .collect()
}
