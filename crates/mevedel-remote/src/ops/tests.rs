use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::{Value, json};

use super::{hash, run};

/// A fresh directory for one test, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("mevedel-remote-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join("src")).unwrap();
        std::fs::create_dir_all(p.join(".git")).unwrap();
        std::fs::write(p.join("src/a.rs"), "fn alpha() {}\nfn beta() {}\n").unwrap();
        std::fs::write(p.join("src/b.txt"), "beta\n").unwrap();
        std::fs::write(p.join(".gitignore"), "ignored/\n").unwrap();
        std::fs::create_dir_all(p.join("ignored")).unwrap();
        std::fs::write(p.join("ignored/c.rs"), "fn beta() {}\n").unwrap();
        Dir(std::fs::canonicalize(&p).unwrap())
    }
    fn at(&self, rel: &str) -> String {
        self.0.join(rel).to_string_lossy().into_owned()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn call(op: &str, args: Value) -> Result<Value, String> {
    run(op, &args, Arc::new(AtomicBool::new(false))).map_err(|e| e.message)
}

#[test]
fn glob_and_grep_answer_the_local_shape_and_keep_ignore_rules() {
    let d = Dir::new("search");
    let g = call(
        "glob",
        json!({"path": d.at(""), "display": "", "pattern": "**/*.rs"}),
    )
    .unwrap();
    // Glob lists ignored files (as locally); Grep leaves them out.
    assert_eq!(g["text"], "src/a.rs\nignored/c.rs\n");
    assert_eq!(g["total"], 2);
    let r = call(
        "grep",
        json!({"path": d.at(""), "display": "w/",
               "options": {"pattern": "beta", "output_mode": "content", "line_numbers": true}}),
    )
    .unwrap();
    let mut lines: Vec<&str> = r["text"].as_str().unwrap().lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["w/src/a.rs:2:fn beta() {}", "w/src/b.txt:1:beta"]);
    assert_eq!(r["partial"], false);
    let bad = call(
        "grep",
        json!({"path": d.at(""), "options": {"pattern": "(", "output_mode": "x"}}),
    );
    assert!(bad.is_err());
}

#[test]
fn grep_searches_an_unsaved_buffer_instead_of_its_file() {
    let d = Dir::new("unsaved");
    let r = call(
        "grep",
        json!({"path": d.at(""), "display": "",
               "options": {"pattern": "gamma", "output_mode": "files_with_matches"},
               "unsaved": [[d.at("src/b.txt"), "gamma\n", false]]}),
    )
    .unwrap();
    assert!(r["text"].as_str().unwrap().starts_with("src/b.txt"), "{r}");
}

#[test]
fn read_pages_text_and_gives_bytes_for_media() {
    let d = Dir::new("read");
    let r = call(
        "read",
        json!({"path": d.at("src/a.rs"), "display": "a.rs", "offset": 2, "limit": 1}),
    )
    .unwrap();
    let text = r["text"].as_str().unwrap();
    assert!(
        text.contains("fn beta()") && !text.contains("alpha"),
        "{text}"
    );
    let b = call(
        "read",
        json!({"path": d.at("src/b.txt"), "bytes": true, "start": 1, "length": 2}),
    )
    .unwrap();
    assert_eq!(b["data"], "ZXQ=");
    assert_eq!(b["size"], 5);
    let missing = call("read", json!({"path": d.at("nope"), "display": "nope"})).unwrap_err();
    assert!(
        missing.contains("`nope`") && missing.contains("does not exist"),
        "{missing}"
    );
    assert!(call("read", json!({"path": "relative"})).is_err());
}

#[test]
fn write_is_atomic_keeps_the_mode_and_refuses_a_stale_hash() {
    let d = Dir::new("write");
    let file = d.0.join("src/b.txt");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o751)).unwrap();
    let stale = call(
        "write",
        json!({"path": d.at("src/b.txt"), "data": "bmV3Cg==", "expect_hash": hash(b"old\n")}),
    )
    .unwrap_err();
    assert!(stale.contains("changed on the remote host"), "{stale}");
    assert_eq!(std::fs::read(&file).unwrap(), b"beta\n");
    let ok = call(
        "write",
        json!({"path": d.at("src/b.txt"), "data": "bmV3Cg==", "expect_hash": hash(b"beta\n")}),
    )
    .unwrap();
    assert_eq!(ok["hash"], hash(b"new\n"));
    assert_eq!(std::fs::read(&file).unwrap(), b"new\n");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o751);
    // A new file: the empty hash says it must not exist yet.
    call(
        "write",
        json!({"path": d.at("src/new.txt"), "data": "eAo=", "expect_hash": ""}),
    )
    .unwrap();
    assert!(
        call(
            "write",
            json!({"path": d.at("src/new.txt"), "data": "eAo=", "expect_hash": ""})
        )
        .is_err()
    );
    // A directory that does not exist fails and leaves no temporary.
    assert!(call("write", json!({"path": d.at("gone/x"), "data": ""})).is_err());
    let leftovers: Vec<_> = std::fs::read_dir(d.0.join("src"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".mevedel-"))
        .collect();
    assert!(leftovers.is_empty());
    assert!(Path::new(&d.at("src/new.txt")).exists());
}

#[test]
fn an_unknown_operation_is_an_error_naming_it() {
    assert!(
        call("frobnicate", json!({}))
            .unwrap_err()
            .contains("`frobnicate`")
    );
}

#[test]
fn exec_yields_polls_and_stops_a_process_group() {
    let d = Dir::new("exec");
    let spool = d.at("spool");
    let quick = call(
        "exec_start",
        json!({"command": "echo out; echo err >&2; exit 3", "path": d.at(""),
               "spool_dir": spool, "sandbox": "off"}),
    )
    .unwrap();
    let done = call(
        "exec_poll",
        json!({"run": quick["run"], "yield_time_ms": 5000}),
    )
    .unwrap();
    assert_eq!(done["exited"], true);
    assert_eq!(done["exit_code"], 3);
    assert_eq!(done["output"], "out\nerr\n");
    let slow = call(
        "exec_start",
        json!({"command": "echo started; read line; echo got $line; sleep 60 & wait",
               "path": d.at(""), "spool_dir": spool, "sandbox": "off"}),
    )
    .unwrap();
    let first = call(
        "exec_poll",
        json!({"run": slow["run"], "yield_time_ms": 300}),
    )
    .unwrap();
    assert_eq!(first["exited"], false);
    assert_eq!(first["output"], "started\n");
    call("exec_stdin", json!({"run": slow["run"], "data": "hi\n"})).unwrap();
    let second = call(
        "exec_poll",
        json!({"run": slow["run"], "offset": first["next_offset"], "yield_time_ms": 300}),
    )
    .unwrap();
    assert_eq!(second["output"], "got hi\n");
    let stopped = call("exec_stop", json!({"run": slow["run"]})).unwrap();
    assert_eq!(stopped["exited"], true);
    assert_eq!(stopped["signal"], 15);
    assert!(call("exec_poll", json!({"run": 999_999})).is_err());
}

/// Files of the helper's left in DIR (staged or kept copies).
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".mevedel-"))
        .collect()
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A directory no one can create entries in, root included
/// (`chattr +i`; for other users a mode of 0555), until dropped.
struct ReadOnly(PathBuf);

impl ReadOnly {
    fn new(dir: PathBuf) -> ReadOnly {
        // SAFETY: plain getuid.
        if unsafe { libc::getuid() } == 0 {
            let status = std::process::Command::new("chattr")
                .arg("+i")
                .arg(&dir)
                .status()
                .expect("chattr (e2fsprogs) is needed to make a directory read-only for root");
            assert!(status.success(), "chattr +i {} failed", dir.display());
        } else {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        ReadOnly(dir)
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
    }
}

#[test]
fn write_all_changes_every_file_or_none() {
    let d = Dir::new("write-all");
    let a = d.0.join("src/a.rs");
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o751)).unwrap();
    std::fs::write(d.0.join("gone.txt"), "bye\n").unwrap();
    let a_old = std::fs::read(&a).unwrap();
    let ok = call(
        "write_all",
        json!({"files": [
            {"path": d.at("src/a.rs"), "data": b64("fn gamma() {}\n"), "expect_hash": hash(&a_old)},
            {"path": d.at("src/n/new.txt"), "data": b64("fresh\n"), "expect_hash": ""},
            {"path": d.at("gone.txt"), "delete": true, "expect_hash": hash(b"bye\n")},
        ]}),
    )
    .unwrap();
    assert_eq!(ok["files"][0]["hash"], hash(b"fn gamma() {}\n"));
    assert_eq!(ok["files"][2]["deleted"], true);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "fn gamma() {}\n");
    assert_eq!(
        std::fs::metadata(&a).unwrap().permissions().mode() & 0o7777,
        0o751
    );
    // A new file gets the umask's default, as one made by any program.
    let plain = d.0.join("plain");
    std::fs::File::create(&plain).unwrap();
    assert_eq!(
        std::fs::metadata(d.0.join("src/n/new.txt"))
            .unwrap()
            .permissions()
            .mode(),
        std::fs::metadata(&plain).unwrap().permissions().mode()
    );
    assert!(!d.0.join("gone.txt").exists());
    assert!(leftovers(&d.0.join("src")).is_empty());
    assert!(leftovers(&d.0).is_empty());

    // A file changed since it was read: nothing is written.
    let stale = call(
        "write_all",
        json!({"files": [
            {"path": d.at("src/a.rs"), "data": b64("x\n"), "expect_hash": hash(b"fn gamma() {}\n")},
            {"path": d.at("src/b.txt"), "data": b64("y\n"), "expect_hash": hash(b"old\n")},
        ]}),
    )
    .unwrap_err();
    assert!(
        stale.contains("src/b.txt") && stale.contains("changed on the remote host"),
        "{stale}"
    );
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "fn gamma() {}\n");

    // A target in a read-only directory: refused before any rename.
    std::fs::create_dir_all(d.0.join("ro")).unwrap();
    std::fs::write(d.0.join("ro/x"), "x\n").unwrap();
    {
        let _ro = ReadOnly::new(d.0.join("ro"));
        let refused = call(
            "write_all",
            json!({"files": [
                {"path": d.at("src/a.rs"), "data": b64("x\n")},
                {"path": d.at("ro/x"), "data": b64("y\n"), "expect_hash": hash(b"x\n")},
            ]}),
        )
        .unwrap_err();
        assert!(
            refused.contains("nothing was written") && refused.contains("ro/x"),
            "{refused}"
        );
    }
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "fn gamma() {}\n");
    assert_eq!(std::fs::read_to_string(d.0.join("ro/x")).unwrap(), "x\n");
    assert!(leftovers(&d.0.join("src")).is_empty());

    // A rename failing after others succeeded: those are undone.
    std::fs::create_dir_all(d.0.join("src/dir/inner")).unwrap();
    let undone = call(
        "write_all",
        json!({"files": [
            {"path": d.at("src/a.rs"), "data": b64("x\n")},
            {"path": d.at("src/fresh.txt"), "data": b64("f\n")},
            {"path": d.at("src/dir"), "data": b64("not a dir\n")},
        ]}),
    )
    .unwrap_err();
    assert!(
        undone.contains("nothing was written") && undone.contains("src/dir"),
        "{undone}"
    );
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "fn gamma() {}\n");
    assert_eq!(
        std::fs::metadata(&a).unwrap().permissions().mode() & 0o7777,
        0o751
    );
    assert!(!d.0.join("src/fresh.txt").exists());
    assert!(d.0.join("src/dir/inner").is_dir());
    assert!(leftovers(&d.0.join("src")).is_empty());

    // Deleting what is not there, or naming a file twice, is refused.
    let missing = call(
        "write_all",
        json!({"files": [{"path": d.at("nope"), "delete": true}]}),
    )
    .unwrap_err();
    assert!(missing.contains("does not exist"), "{missing}");
    let twice = call(
        "write_all",
        json!({"files": [{"path": d.at("src/b.txt"), "data": ""},
                         {"path": d.at("src/b.txt"), "delete": true}]}),
    )
    .unwrap_err();
    assert!(twice.contains("twice"), "{twice}");
    assert!(call("write_all", json!({"files": []})).is_err());
}
