//! A fast path for the commonest sources: plain words joined by `|`,
//! `&&`, `||` and `;`, optionally ending in a comment (`git status`,
//! `rm -rf a && mkdir a`). A tree-sitter parse costs 10-20 us; reading
//! these directly costs well under one. Anything else (quotes,
//! expansions, redirections, keywords, ...) returns `None` and takes the
//! tree-sitter path. The property test in `tests.rs` checks that the
//! result equals the tree-sitter path's on generated sources.

use super::commands::Arg;
use super::walk::{Walker, command_stage};
use super::{Analysis, Stage};

/// Words that tree-sitter-bash reads as syntax or as a declaration or
/// unset command when they start a command.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "in", "function", "time", "coproc", "declare", "typeset", "export", "readonly",
    "local", "unset", "unsetenv",
];

/// Operators between commands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `|`
    Pipe,
    /// `&&` or `||`
    AndOr,
    /// `;`
    Semi,
}

fn word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b',' | b':' | b'+' | b'=' | b'-')
}

/// The words and operators of SRC, or `None` when it has anything else.
fn tokens(src: &str) -> Option<(Vec<&str>, Vec<Op>)> {
    let src = src.strip_suffix('\n').unwrap_or(src);
    let bytes = src.as_bytes();
    let mut words = Vec::new();
    // An operator also pushes "" into WORDS, ending a command.
    let mut ops = Vec::new();
    let mut i = 0;
    let mut after_space = true;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b' ' | b'\t' => {
                i += 1;
                after_space = true;
                continue;
            }
            b'#' if after_space => {
                if src[i..].contains('\n') {
                    return None;
                }
                break;
            }
            b'|' | b'&' | b';' => {
                let next = bytes.get(i + 1).copied();
                let (op, len) = match (b, next) {
                    (b'|', Some(b'|')) | (b'&', Some(b'&')) => (Op::AndOr, 2),
                    (b'|', Some(b'&')) | (b'&', _) | (b';', Some(b';' | b'&')) => return None,
                    (b'|', _) => (Op::Pipe, 1),
                    _ => (Op::Semi, 1),
                };
                words.push("");
                ops.push(op);
                i += len;
                after_space = false;
                continue;
            }
            // `==`, `=~` and the like are operators to tree-sitter-bash.
            _ if word_byte(b) && b != b'=' => {
                let start = i;
                while i < bytes.len() && word_byte(bytes[i]) {
                    i += 1;
                }
                words.push(&src[start..i]);
            }
            _ => return None,
        }
        after_space = false;
        if i < bytes.len() && !matches!(bytes[i], b' ' | b'\t' | b'|' | b'&' | b';') {
            return None;
        }
    }
    Some((words, ops))
}

/// One simple command: its name and arguments.
struct Command<'s> {
    name: &'s str,
    args: &'s [&'s str],
}

/// The analysis of SRC when it is made only of plain words and
/// operators, else `None`.
pub fn analyze(src: &str) -> Option<Analysis> {
    let (words, ops) = tokens(src)?;
    // Split the words at the "" markers into commands.
    let mut commands = Vec::with_capacity(ops.len() + 1);
    for part in words.split(|w| w.is_empty()) {
        let (&name, args) = part.split_first()?;
        let plain_name = !name.starts_with('-')
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'-'));
        if !plain_name || RESERVED.contains(&name) {
            return None;
        }
        commands.push(Command { name, args });
    }
    // Statements are ;-separated runs of commands; within one, `|`
    // joins a command to the next in one pipeline.
    let mut w = Walker::new(src);
    for c in &commands {
        let args: Vec<Arg> = c
            .args
            .iter()
            .map(|a| Arg {
                literal: Some((*a).to_string()),
            })
            .collect();
        w.judge_command(c.name.to_string(), &args);
    }
    // Each pipeline as (first, last) command index: `|` extends the
    // current one, `&&`, `||` and `;` start the next.
    let mut pipelines: Vec<(usize, usize)> = vec![(0, 0)];
    // Whether the current statement has `&&`/`||`, and a pipeline of
    // three or more commands: tree-sitter-bash nests such a pipeline
    // when it opens a list (counting two), so those take its path.
    let (mut list, mut long) = (false, false);
    for (k, op) in ops.iter().enumerate() {
        match (op, pipelines.last_mut()) {
            (Op::Pipe, Some(last)) => {
                last.1 = k + 1;
                long |= last.1 - last.0 >= 2;
            }
            _ => pipelines.push((k + 1, k + 1)),
        }
        match op {
            Op::AndOr => list = true,
            Op::Semi => (list, long) = (false, false),
            Op::Pipe => {}
        }
        if list && long {
            return None;
        }
    }
    w.pipelines = pipelines.iter().filter(|(a, b)| b > a).count();
    let stage = |i: usize| command_stage(commands[i].name.to_string());
    let single = if ops.is_empty() { stage(0) } else { None };
    // The last statement, a pipeline or a list, ends with the last
    // pipeline; a one-command pipeline is no pipeline.
    let final_pipeline: Option<Vec<Stage>> = pipelines
        .last()
        .filter(|(a, b)| b > a)
        .and_then(|&(a, b)| (a..=b).map(stage).collect())
        .filter(|_| w.ineligible.is_none());
    Some(w.finish(single, final_pipeline))
}
