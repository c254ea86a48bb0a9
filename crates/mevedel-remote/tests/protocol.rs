//! The helper binary spoken to as Emacs speaks to it: lines of JSON on
//! stdin and stdout.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::Value;

#[test]
fn hello_then_answers_by_id_and_ends_when_stdin_closes() {
    let dir = std::env::temp_dir().join(format!("mevedel-remote-proto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.txt"), "one\ntwo\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mevedel-remote"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let hello: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(hello["hello"]["protocol"], 1);
    assert_eq!(hello["hello"]["arch"], std::env::consts::ARCH);
    let path = dir.join("f.txt").to_string_lossy().into_owned();
    writeln!(
        stdin,
        "{}\n{}\nnot json",
        serde_json::json!({"id": 7, "op": "read", "args": {"path": path, "display": "f.txt"}}),
        serde_json::json!({"id": 8, "op": "grep",
                           "args": {"path": path, "display": "f.txt",
                                    "options": {"pattern": "two", "output_mode": "count"}}}),
    )
    .unwrap();
    let mut answers: Vec<Value> = (0..3)
        .map(|_| serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap())
        .collect();
    answers.sort_by_key(|a| a["id"].as_u64().unwrap_or(0));
    assert!(
        answers[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unreadable request")
    );
    assert!(answers[1]["ok"]["text"].as_str().unwrap().contains("two"));
    assert_eq!(answers[2]["ok"]["text"], "f.txt:1\n");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}
