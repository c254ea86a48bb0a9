//! What one simple command does, judged from its name and literal
//! arguments: the read-only allowlist with its argument checks, the
//! commands known to mutate, the dangerous ones, and the wrappers that
//! run another command (`env`, `xargs`, `timeout`, ...).
//!
//! Judgement is conservative: an argument that is not a literal word is
//! treated as if it could be any option.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use super::Class;

/// One argument as the analyzer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg<'a> {
    /// The word's value when it is fully literal (quotes removed),
    /// borrowed from the source when it could be.
    pub literal: Option<Cow<'a, str>>,
}

impl Arg<'_> {
    fn text(&self) -> Option<&str> {
        self.literal.as_deref()
    }
}

/// A verdict on one command, with the reason when it is not read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub class: Class,
    pub reason: Option<Cow<'static, str>>,
}

impl Verdict {
    fn read_only() -> Verdict {
        Verdict {
            class: Class::ReadOnly,
            reason: None,
        }
    }

    fn new(class: Class, reason: impl Into<Cow<'static, str>>) -> Verdict {
        Verdict {
            class,
            reason: Some(reason.into()),
        }
    }
}

/// Commands that only read, given acceptable arguments (checked below).
const READ_ONLY: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "cut",
    "tr",
    "nl",
    "tac",
    "rev",
    "column",
    "fold",
    "fmt",
    "paste",
    "join",
    "comm",
    "diff",
    "cmp",
    "file",
    "stat",
    "du",
    "df",
    "pwd",
    "echo",
    "true",
    "false",
    "test",
    "[",
    "which",
    "type",
    "whoami",
    "id",
    "uname",
    "printenv",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "od",
    "hexdump",
    "strings",
    "tree",
    "jq",
    "seq",
    "yes",
    "sleep",
    "expr",
    "ps",
    "free",
    "uptime",
    "nproc",
    "cd",
    "pushd",
    "popd",
    "dirs",
    "read",
    "wait",
    "less",
    "more",
    "look",
    "locale",
    "getconf",
    "groups",
    "tty",
    "arch",
    "logname",
    "lsblk",
    "numfmt",
    "shuf",
    "zcat",
    "bzcat",
    "xzcat",
    "zgrep",
    "awk",
    "gawk",
    "mawk",
    "sed",
    "find",
    "sort",
    "uniq",
    "xxd",
    "printf",
    "date",
    "hostname",
    "git",
    "env",
    "command",
    "shellcheck",
    "hash",
];

/// Commands that change files, packages or repositories.
const MUTATING: &[&str] = &[
    "rm",
    "mv",
    "cp",
    "mkdir",
    "rmdir",
    "touch",
    "ln",
    "chmod",
    "chown",
    "chgrp",
    "tee",
    "install",
    "truncate",
    "patch",
    "make",
    "cmake",
    "ninja",
    "cargo",
    "npm",
    "npx",
    "yarn",
    "pnpm",
    "pip",
    "pip3",
    "apt",
    "apt-get",
    "dpkg",
    "gem",
    "go",
    "mvn",
    "gradle",
    "unzip",
    "tar",
    "gzip",
    "gunzip",
    "bzip2",
    "xz",
    "zip",
    "rsync",
    "scp",
    "curl",
    "wget",
    "emacs",
    "split",
    "csplit",
    "shred",
    "mktemp",
    "kill",
    "pkill",
    "killall",
    "nohup",
    "sqlite3",
    "docker",
    "podman",
    "systemctl",
    "crontab",
    "yq",
    "sponge",
    "dd",
];

/// Commands whose effects reach beyond the workspace or cannot be undone.
const DANGEROUS: &[&str] = &[
    "sudo", "su", "doas", "pkexec", "mkfs", "fdisk", "parted", "sfdisk", "mkswap", "shutdown",
    "reboot", "halt", "poweroff", "init", "telinit", "wipefs", "mount", "umount", "chroot",
    "insmod", "rmmod", "modprobe", "iptables", "nft", "useradd", "userdel", "passwd",
];

/// Builtins and commands that run shell code they are given, so the
/// source alone cannot tell what they do.
const CODE_RUNNERS: &[&str] = &[
    "eval",
    "source",
    ".",
    "exec",
    "trap",
    "alias",
    "coproc",
    "builtin",
    "bash",
    "sh",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "enable",
    "declare",
    "typeset",
    "let",
    "mapfile",
    "readarray",
];

/// Interpreters: they may do anything their script says.
const INTERPRETERS: &[&str] = &[
    "python", "python3", "perl", "ruby", "node", "deno", "php", "lua", "tclsh", "Rscript",
];

fn flag(args: &[Arg<'_>], pred: impl Fn(&str) -> bool) -> bool {
    args.iter().any(|a| a.text().is_some_and(&pred))
}

fn has_dynamic(args: &[Arg<'_>]) -> bool {
    args.iter().any(|a| a.literal.is_none())
}

/// Whether ARG is a short-option cluster (`-rf`) containing LETTER.
fn short_has(arg: &str, letter: char) -> bool {
    arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(letter)
}

fn positional<'s, 'a>(args: &'s [Arg<'a>]) -> Vec<&'s Arg<'a>> {
    args.iter()
        .filter(|a| a.text().is_none_or(|t| !t.starts_with('-') || t == "-"))
        .collect()
}

/// Which list a command name is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Dangerous,
    CodeRunner,
    Interpreter,
    Mutating,
    ReadOnly,
}

impl Family {
    /// What the reason for a command of this family says after its name.
    fn says(self) -> &'static str {
        match self {
            Family::Dangerous => "is dangerous",
            Family::CodeRunner => "runs shell code",
            Family::Interpreter => "runs a script",
            Family::Mutating => "changes files",
            Family::ReadOnly => "",
        }
    }
}

/// A listed name's family and the reason a command of that name gets
/// (made once, so a verdict borrows it instead of building it).
struct Listed {
    family: Family,
    reason: String,
}

/// Every listed name with the first family [`judge`] checks it against,
/// so a name in several lists keeps the verdict of the earliest check:
/// one hash lookup instead of scanning each list.
static FAMILIES: LazyLock<HashMap<&'static str, Listed, foldhash::fast::RandomState>> =
    LazyLock::new(|| {
        let mut map = HashMap::default();
        for (names, family) in [
            (DANGEROUS, Family::Dangerous),
            (CODE_RUNNERS, Family::CodeRunner),
            (INTERPRETERS, Family::Interpreter),
            (MUTATING, Family::Mutating),
            (READ_ONLY, Family::ReadOnly),
        ] {
            for name in names {
                map.entry(*name).or_insert_with(|| Listed {
                    family,
                    reason: about(name, family.says()),
                });
            }
        }
        map
    });

/// Commands that run another command given in their arguments (see
/// [`wrapped`]).
const WRAPPERS: &[&str] = &[
    "env", "xargs", "timeout", "nice", "time", "stdbuf", "nohup", "ionice", "command",
];

/// NAME as it is spelled in the command tables, when it is listed there:
/// a copy that lives as long as the program.
pub fn listed_name(name: &str) -> Option<&'static str> {
    FAMILIES
        .get_key_value(name)
        .map(|(listed, _)| *listed)
        .or_else(|| WRAPPERS.iter().find(|w| **w == name).copied())
}

/// The analyzer's decision for a command named NAME (literal, no slash)
/// with ARGS. Wrappers are handled by the caller through [`wrapped`].
pub fn judge(name: &str, args: &[Arg<'_>]) -> Verdict {
    let listed = FAMILIES.get(name);
    let family = listed.map(|l| l.family);
    // The reason for NAME as a command of FAMILY.
    let reason = |family: Family| -> Cow<'static, str> {
        match listed {
            Some(l) if l.family == family => Cow::Borrowed(l.reason.as_str()),
            _ => Cow::Owned(about(name, family.says())),
        }
    };
    if name.starts_with("mkfs.") || family == Some(Family::Dangerous) {
        return Verdict::new(Class::Dangerous, reason(Family::Dangerous));
    }
    if family == Some(Family::CodeRunner) {
        return Verdict::new(Class::Complex, reason(Family::CodeRunner));
    }
    if let Some(v) = dangerous_use(name, args) {
        return v;
    }
    match family {
        Some(Family::Interpreter) => Verdict::new(Class::Unknown, reason(Family::Interpreter)),
        Some(Family::Mutating) => Verdict::new(Class::Mutating, reason(Family::Mutating)),
        Some(Family::ReadOnly) => match argument_check(name, args) {
            None => Verdict::read_only(),
            Some(why) => Verdict::new(Class::Mutating, why),
        },
        _ => Verdict::new(Class::Unknown, about(name, "is not a known command")),
    }
}

/// "`NAME` WHAT": a reason naming the command (built without the
/// formatting machinery, which costs more than the rest of a verdict).
fn about(name: &str, what: &str) -> String {
    let mut text = String::with_capacity(name.len() + what.len() + 3);
    text.push('`');
    text.push_str(name);
    text.push_str("` ");
    text.push_str(what);
    text
}

/// Dangerous uses of otherwise ordinary commands.
fn dangerous_use(name: &str, args: &[Arg<'_>]) -> Option<Verdict> {
    // The literal arguments, walked anew by each check (nothing allocated).
    let texts = || args.iter().filter_map(Arg::text);
    let has = |word: &str| texts().any(|t| t == word);
    match name {
        "rm" => {
            let recursive =
                texts().any(|t| short_has(t, 'r') || short_has(t, 'R') || t == "--recursive");
            let broad = texts().any(|t| {
                matches!(
                    t,
                    "/" | "/*" | "~" | "~/" | "~/*" | "." | ".." | "*" | "./*" | "$HOME"
                )
            }) || args.iter().any(|a| a.literal.is_none());
            (recursive && broad).then(|| {
                Verdict::new(
                    Class::Dangerous,
                    "recursive `rm` of a broad or unknown target",
                )
            })
        }
        "git" => {
            let force_push = has("push")
                && texts()
                    .any(|t| t == "--force" || t == "-f" || t.starts_with("--force-with-lease"));
            let hard_reset = has("reset") && has("--hard");
            let clean = has("clean") && texts().any(|t| short_has(t, 'f'));
            (force_push || hard_reset || clean)
                .then(|| Verdict::new(Class::Dangerous, "`git` discards work"))
        }
        "chmod" | "chown" => {
            let recursive = texts().any(|t| short_has(t, 'R'));
            let root = texts().any(|t| t == "/" || t == "~");
            (recursive && root)
                .then(|| Verdict::new(Class::Dangerous, "recursive permission change of /"))
        }
        "dd" => texts()
            .any(|t| t.starts_with("of=/dev/"))
            .then(|| Verdict::new(Class::Dangerous, "`dd` writes a device")),
        "kill" | "pkill" | "killall" => texts()
            .any(|t| t == "-1" || t == "1")
            .then(|| Verdict::new(Class::Dangerous, "signals every process")),
        _ => None,
    }
}

/// Why NAME with ARGS is not read-only, or `None` when it is.
fn argument_check(name: &str, args: &[Arg<'_>]) -> Option<String> {
    let dynamic = has_dynamic(args);
    let says = |what: &str| Some(about(name, what));
    match name {
        "find" => {
            let writes = |t: &str| {
                matches!(
                    t,
                    "-delete"
                        | "-exec"
                        | "-execdir"
                        | "-ok"
                        | "-okdir"
                        | "-fprint"
                        | "-fprint0"
                        | "-fprintf"
                        | "-fls"
                )
            };
            (flag(args, writes) || dynamic).then(|| format!("`{name}` with -delete/-exec"))
        }
        "sed" => {
            if dynamic || flag(args, |t| short_has(t, 'i') || t.starts_with("--in-place")) {
                return says("edits in place");
            }
            sed_scripts_write(args)
                .then(|| format!("`{name}` script writes files or runs commands"))
        }
        "awk" | "gawk" | "mawk" => {
            let program_writes = args.iter().any(|a| {
                a.text().is_some_and(|t| {
                    !t.starts_with('-')
                        && (t.contains("system")
                            || t.contains('>')
                            || t.contains('|')
                            || t.contains("getline"))
                })
            });
            (dynamic || program_writes || flag(args, |t| t == "-i" || t.starts_with("--inplace")))
                .then(|| format!("`{name}` program may write or run commands"))
        }
        "sort" => (dynamic || flag(args, |t| t == "-o" || t.starts_with("--output")))
            .then(|| format!("`{name}` -o writes a file")),
        "uniq" | "xxd" => (dynamic || positional(args).len() > 1)
            .then(|| format!("`{name}` with a second file writes it")),
        "date" => (dynamic || flag(args, |t| short_has(t, 's') || t.starts_with("--set")))
            .then(|| format!("`{name}` -s sets the clock")),
        "hostname" => (!args.is_empty()).then(|| format!("`{name}` with arguments sets it")),
        "printf" => (dynamic || flag(args, |t| t == "-v")).then(|| "`printf -v` assigns".into()),
        "git" => git_check(args),
        "env" | "command" => {
            // Reached only without a command to run (see `wrapped`).
            None
        }
        "less" | "more" => flag(args, |t| t.starts_with('+') || t == "-o" || t == "-O")
            .then(|| format!("`{name}` may run commands")),
        _ => None,
    }
}

/// Whether a sed script among ARGS writes (see [`sed_script_writes`]):
/// the `-e S` / `--expression=S` values, or the first operand when no
/// -e/-f is given.
fn sed_scripts_write(args: &[Arg<'_>]) -> bool {
    let mut writes = false;
    let mut explicit = false;
    let mut iter = args.iter().filter_map(Arg::text);
    let mut first_operand = None;
    while let Some(t) = iter.next() {
        if t == "-e" || t == "-f" || t == "--file" {
            explicit = true;
            if let Some(s) = iter.next()
                && t == "-e"
            {
                writes |= sed_script_writes(s);
            }
        } else if let Some(s) = t.strip_prefix("--expression=") {
            explicit = true;
            writes |= sed_script_writes(s);
        } else if t.starts_with("--file=") {
            explicit = true;
        } else if !t.starts_with('-') && first_operand.is_none() {
            first_operand = Some(t);
        }
    }
    writes || (!explicit && first_operand.is_some_and(sed_script_writes))
}

/// Whether a sed SCRIPT has a `w`/`W` (write file) or `e` (execute)
/// command, or an `s` command with a `w` or `e` flag. Conservative: a
/// script it cannot follow counts as writing.
fn sed_script_writes(script: &str) -> bool {
    let bytes = script.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b' ' | b'\t' | b'\n' | b';' | b'{' | b'}' | b'!' | b',' | b'$' | b'0'..=b'9' => i += 1,
            b'/' | b'\\' => {
                // An address regex: skip to its closing delimiter.
                let delim = if c == b'\\' {
                    i += 1;
                    *bytes.get(i).unwrap_or(&b'/')
                } else {
                    b'/'
                };
                i += 1;
                while i < bytes.len() && bytes[i] != delim {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                // Address flags (I, M).
                while i < bytes.len() && matches!(bytes[i], b'I' | b'M') {
                    i += 1;
                }
            }
            b's' | b'y' => {
                let Some(&delim) = bytes.get(i + 1) else {
                    return true;
                };
                i += 2;
                for _ in 0..2 {
                    while i < bytes.len() && bytes[i] != delim {
                        if bytes[i] == b'\\' {
                            i += 1;
                        }
                        i += 1;
                    }
                    i += 1;
                }
                if c == b's' {
                    while i < bytes.len() && !matches!(bytes[i], b';' | b'\n' | b'}') {
                        if matches!(bytes[i], b'w' | b'W' | b'e') {
                            return true;
                        }
                        i += 1;
                    }
                }
            }
            b'w' | b'W' | b'e' => return true,
            b'a' | b'i' | b'c' | b'r' | b'R' | b'b' | b't' | b'T' | b':' | b'q' | b'Q' | b'l'
            | b'L' => {
                // Commands taking the rest of the line as text or a label.
                while i < bytes.len() && bytes[i] != b'\n' && bytes[i] != b';' {
                    i += 1;
                }
            }
            b'p' | b'P' | b'd' | b'D' | b'n' | b'N' | b'g' | b'G' | b'h' | b'H' | b'x' | b'='
            | b'z' | b'F' => i += 1,
            _ => return true,
        }
    }
    false
}

/// Subcommands of git that only read, and options that would write.
fn git_check(args: &[Arg<'_>]) -> Option<String> {
    const READING: &[&str] = &[
        "status",
        "log",
        "diff",
        "show",
        "rev-parse",
        "ls-files",
        "ls-tree",
        "blame",
        "grep",
        "describe",
        "cat-file",
        "shortlog",
        "merge-base",
        "name-rev",
        "for-each-ref",
        "rev-list",
        "show-ref",
        "whatchanged",
        "count-objects",
        "check-ignore",
        "var",
        "version",
        "help",
    ];
    if has_dynamic(args) {
        return Some("`git` with computed arguments".into());
    }
    let texts: Vec<&str> = args.iter().filter_map(Arg::text).collect();
    let mut i = 0;
    // Global options before the subcommand.
    while i < texts.len() && texts[i].starts_with('-') {
        match texts[i] {
            "-C" | "--git-dir" | "--work-tree" => i += 2,
            "--no-pager" | "-P" | "--no-optional-locks" | "--bare" => i += 1,
            _ => return Some(format!("`git {}` may change configuration", texts[i])),
        }
    }
    // A bare `git` prints its usage.
    let &sub = texts.get(i)?;
    let rest = &texts[i + 1..];
    if rest.iter().any(|t| t.starts_with("--output")) {
        return Some("`git --output` writes a file".into());
    }
    let only_listing = |allowed: &[&str]| {
        rest.iter()
            .all(|t| allowed.contains(t) || (!t.starts_with('-') && allowed.contains(&"ARG")))
    };
    let ok = match sub {
        s if READING.contains(&s) => true,
        "branch" => {
            only_listing(&[
                "-a",
                "-r",
                "-v",
                "-vv",
                "--list",
                "--all",
                "--remotes",
                "--show-current",
                "--contains",
                "--merged",
                "--no-merged",
            ]) && rest.iter().all(|t| t.starts_with('-'))
        }
        "tag" => rest.is_empty() || rest.iter().all(|t| matches!(*t, "-l" | "--list" | "-n")),
        "remote" => {
            rest.is_empty()
                || rest == ["-v"]
                || rest.first() == Some(&"show")
                || rest.first() == Some(&"get-url")
        }
        "config" => rest
            .iter()
            .any(|t| matches!(*t, "--get" | "--get-all" | "--list" | "-l" | "--get-regexp")),
        "stash" => rest.first() == Some(&"list") || rest.first() == Some(&"show"),
        "reflog" => rest.is_empty() || rest.first() == Some(&"show"),
        "worktree" => rest.first() == Some(&"list"),
        "submodule" => rest.first() == Some(&"status"),
        _ => false,
    };
    (!ok).then(|| format!("`git {sub}` may change the repository"))
}

/// When NAME runs another command given in ARGS, the index of that
/// command's name within ARGS. `None` when NAME is no wrapper or runs
/// nothing (e.g. a bare `env` prints the environment).
pub fn wrapped(name: &str, args: &[Arg<'_>]) -> Option<usize> {
    let first_non_option = |skip_values: &[&str]| {
        let mut i = 0;
        while i < args.len() {
            match args[i].text() {
                Some("--") => return Some(i + 1).filter(|&j| j < args.len()),
                Some(t) if t.starts_with('-') => {
                    i += if skip_values.contains(&t) { 2 } else { 1 };
                }
                _ => return Some(i),
            }
        }
        None
    };
    match name {
        "env" => {
            let mut i = 0;
            while i < args.len() {
                match args[i].text() {
                    Some(t) if t == "-u" || t == "-C" || t == "--chdir" || t == "--unset" => i += 2,
                    Some(t) if t.starts_with('-') || t.contains('=') => i += 1,
                    _ => return Some(i),
                }
            }
            None
        }
        "xargs" => first_non_option(&[
            "-I",
            "-n",
            "-P",
            "-L",
            "-s",
            "-d",
            "-E",
            "-a",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
        ])
        .or(Some(usize::MAX)),
        "timeout" => first_non_option(&["-s", "--signal", "-k", "--kill-after"]).map(|i| i + 1),
        "nice" => first_non_option(&["-n", "--adjustment"]),
        "time" | "stdbuf" | "nohup" | "ionice" => first_non_option(&["-o", "-e", "-i", "-c", "-n"]),
        "command" => {
            if args.iter().any(|a| matches!(a.text(), Some("-v" | "-V"))) {
                None
            } else {
                first_non_option(&[])
            }
        }
        _ => None,
    }
}

/// Commands whose first operand names what they do (`git status`,
/// `npm test`): their key includes it (a `match`, compiled to a length
/// switch, not a scan of every name).
fn has_subcommands(name: &str) -> bool {
    matches!(
        name,
        "git"
            | "npm"
            | "npx"
            | "yarn"
            | "pnpm"
            | "cargo"
            | "go"
            | "docker"
            | "podman"
            | "pip"
            | "pip3"
            | "apt"
            | "apt-get"
            | "systemctl"
            | "make"
            | "gem"
            | "mvn"
            | "gradle"
            | "kubectl"
            | "gh"
            | "rustup"
            | "brew"
            | "dotnet"
            | "bundle"
            | "poetry"
            | "uv"
            | "composer"
            | "dune"
            | "stack"
            | "cabal"
            | "mix"
            | "bun"
            | "deno"
    )
}

/// Options of a subcommand tool that take the next word as their value.
fn takes_value(name: &str, option: &str) -> bool {
    match name {
        "git" => matches!(
            option,
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace"
        ),
        "make" => matches!(option, "-C" | "-f" | "--file" | "--directory" | "-I"),
        "cargo" => matches!(option, "-C" | "--config" | "-Z" | "--manifest-path"),
        "docker" | "podman" => matches!(option, "-H" | "--host" | "--context" | "--config"),
        "npm" | "yarn" | "pnpm" => matches!(option, "--prefix" | "-w" | "--workspace" | "-C"),
        _ => false,
    }
}

/// The key under which a session answer covers the command NAME with
/// ARGS: the name, plus the subcommand for tools that have them (`git
/// status`, `npm run build`, `python -m pytest`). `None` when no answer
/// may cover it: the command is dangerous, runs shell code it is given,
/// or its operands are computed where the key needs them.
pub fn key(name: &str, args: &[Arg<'_>], class: Class) -> Option<String> {
    if class == Class::Dangerous {
        return None;
    }
    match FAMILIES.get(name).map(|l| l.family) {
        Some(Family::CodeRunner | Family::Dangerous) => return None,
        Some(Family::Interpreter) => return interpreter_key(name, args),
        _ => {}
    }
    if !has_subcommands(name) {
        return Some(name.to_string());
    }
    let mut words = args.iter();
    let mut key = name.to_string();
    let mut wanted = 1;
    while let Some(arg) = words.next() {
        let text = arg.text()?;
        if text.starts_with('-') || (name == "cargo" && text.starts_with('+')) {
            if takes_value(name, text) {
                words.next();
            }
            continue;
        }
        if name == "make" && text.contains('=') {
            continue;
        }
        key.push(' ');
        key.push_str(text);
        wanted -= 1;
        if wanted == 0
            && matches!(name, "npm" | "yarn" | "pnpm" | "bun")
            && matches!(text, "run" | "run-script" | "exec" | "x")
        {
            wanted = 1;
        }
        if wanted == 0 {
            break;
        }
    }
    Some(key)
}

/// An interpreter's key: its script, or the module it runs; code given
/// on the command line (or read from stdin) is never covered.
fn interpreter_key(name: &str, args: &[Arg<'_>]) -> Option<String> {
    let mut words = args.iter();
    while let Some(arg) = words.next() {
        let text = arg.text()?;
        match text {
            "-c" | "-e" | "--eval" | "-p" | "--print" | "-E" | "-" => return None,
            "-m" => {
                let module = words.next()?.text()?;
                return Some(format!("{name} -m {module}"));
            }
            t if t.starts_with('-') => {}
            script => return Some(format!("{name} {script}")),
        }
    }
    None
}

/// Read-only commands whose operands are not files.
fn no_files(name: &str) -> bool {
    matches!(
        name,
        "echo"
            | "printf"
            | "true"
            | "false"
            | "sleep"
            | "seq"
            | "yes"
            | "expr"
            | "whoami"
            | "id"
            | "uname"
            | "nproc"
            | "date"
            | "hostname"
            | "pwd"
            | "which"
            | "type"
            | "printenv"
            | "basename"
            | "dirname"
            | "test"
            | "["
            | "locale"
            | "getconf"
            | "groups"
            | "tty"
            | "arch"
            | "logname"
            | "numfmt"
            | "free"
            | "uptime"
            | "ps"
            | "hash"
            | "command"
            | "env"
            | "dirs"
            | "popd"
            | "wait"
            | "read"
            | "cd"
            | "pushd"
    )
}

/// Pass each file operand of the read-only command NAME with ARGS to
/// EACH: its text, or `None` for a computed word (which could name any
/// file). Generous: a pattern or script that could be a file counts as
/// one, so what is left out is never a file the command reads.
pub fn file_operands<'s>(name: &str, args: &'s [Arg<'_>], mut each: impl FnMut(Option<&'s str>)) {
    if no_files(name) {
        return;
    }
    let git = name == "git";
    // git's subcommand is no file: its operands start after it.
    let (args, subcommand) = if git {
        let start = git_operands(args, &mut each);
        (
            &args[start..],
            start.checked_sub(1).and_then(|i| args[i].text()),
        )
    } else {
        (args, None)
    };
    // The first operand is a pattern, script or program unless an option
    // gave one (then every operand is a file).
    let leading = match name {
        "grep" | "egrep" | "fgrep" | "zgrep" | "rg" => !grep_pattern_given(args),
        "git" => subcommand == Some("grep") && !grep_pattern_given(args),
        "sed" => !flag(args, |t| {
            matches!(t, "-e" | "-f" | "--expression" | "--file")
                || t.starts_with("--expression=")
                || t.starts_with("--file=")
        }),
        "awk" | "gawk" | "mawk" => !flag(args, |t| t == "-f" || t.starts_with("--file")),
        "jq" => !flag(args, |t| t == "-f" || t == "--from-file"),
        _ => false,
    };
    let mut skip = leading;
    let mut expression = false;
    let mut value_follows = false;
    let mut separated = false;
    for arg in args {
        let Some(text) = arg.text() else {
            if skip {
                skip = false;
            } else {
                each(None);
            }
            continue;
        };
        if name == "find" {
            if value_follows {
                value_follows = false;
                each(Some(text));
                continue;
            }
            if text.starts_with('-') || text == "(" || text == "!" {
                expression = true;
                value_follows = matches!(
                    text,
                    "-newer" | "-anewer" | "-cnewer" | "-samefile" | "-files0-from"
                ) || text.starts_with("-newer");
                continue;
            }
            if !expression {
                each(Some(text));
            }
            continue;
        }
        if git && !separated {
            if text == "--" {
                separated = true;
                continue;
            }
            if revision_like(text) {
                continue;
            }
        }
        if let Some(option) = text.strip_prefix('-').filter(|o| !o.is_empty()) {
            // An option's attached value may be a file.
            match option.split_once('=') {
                Some((_, value)) => each(Some(value)),
                None if option.contains('/') || option.contains('~') => each(None),
                None => {}
            }
            continue;
        }
        if skip {
            skip = false;
            continue;
        }
        each(Some(text));
    }
}

/// Whether grep's ARGS give its pattern by an option, so that every
/// operand is a file.
fn grep_pattern_given(args: &[Arg<'_>]) -> bool {
    flag(args, |t| {
        matches!(t, "-e" | "-f" | "--regexp" | "--file")
            || t.starts_with("--regexp=")
            || t.starts_with("--file=")
            || (!t.starts_with("--") && (short_has(t, 'e') || short_has(t, 'f')))
    })
}

/// Where the operands of git's subcommand start in ARGS (after the
/// subcommand), passing the directories its global options name (`-C`,
/// `--git-dir`, `--work-tree`) to EACH: git reads those.
fn git_operands<'s>(args: &'s [Arg<'_>], each: &mut impl FnMut(Option<&'s str>)) -> usize {
    let mut i = 0;
    while i < args.len() {
        match args[i].text() {
            Some("-C" | "--git-dir" | "--work-tree") => {
                if let Some(value) = args.get(i + 1) {
                    each(value.text());
                }
                i += 2;
            }
            Some(t) if t.starts_with('-') => {
                if let Some((_, value)) = t.split_once('=') {
                    each(Some(value));
                }
                i += 1;
            }
            _ => return (i + 1).min(args.len()),
        }
    }
    args.len()
}

/// Whether the git operand TEXT names a revision (`HEAD~2`, `main..x`,
/// `HEAD:file`, `@{u}`) rather than a file: not a path that could
/// leave the directory (absolute, `~` or a `..` component).
fn revision_like(text: &str) -> bool {
    if text.starts_with('/') || text.starts_with('~') || text.split('/').any(|c| c == "..") {
        return false;
    }
    let head = ["HEAD", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD"]
        .iter()
        .any(|h| {
            text.strip_prefix(h)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['~', '^', '@', ':']))
        });
    head || text.contains("@{")
        || text.contains("..")
        || text
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .ends_with(['~', '^'])
}

/// What a command does to one of its file operands, as a card tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Read,
    Write,
    Delete,
}

/// Pass each file operand of the command NAME with ARGS, one that
/// changes files, to EACH with what it does to it (`None`: a computed
/// word). Return false when its words cannot tell which files it
/// touches (a build tool, an interpreter, an unlisted command).
pub fn effects<'s>(
    name: &str,
    args: &'s [Arg<'_>],
    mut each: impl FnMut(Effect, Option<&'s str>),
) -> bool {
    // Options whose value is the next word.
    let valued: &[&str] = match name {
        "rm" | "rmdir" | "unlink" | "tee" => &[],
        "shred" => &["-n", "--iterations", "-s", "--size"],
        "cp" | "mv" | "ln" => &["-t", "--target-directory", "-S", "--suffix"],
        "install" => &[
            "-t",
            "--target-directory",
            "-m",
            "--mode",
            "-o",
            "--owner",
            "-g",
            "--group",
            "-S",
            "--suffix",
        ],
        "mkdir" => &["-m", "--mode"],
        "touch" => &["-d", "--date", "-r", "--reference", "-t"],
        "truncate" => &["-s", "--size", "-r", "--reference"],
        "chmod" | "chown" | "chgrp" => &[],
        "sed" => &["-e", "--expression", "-f", "--file", "-l", "--line-length"],
        "dd" => {
            for arg in args {
                match arg.text() {
                    Some(t) if t.starts_with("if=") => each(Effect::Read, Some(&t[3..])),
                    Some(t) if t.starts_with("of=") => each(Effect::Write, Some(&t[3..])),
                    Some(_) => {}
                    None => each(Effect::Write, None),
                }
            }
            return true;
        }
        _ => return false,
    };
    let mut operands: Vec<Option<&'s str>> = Vec::new();
    let mut target: Option<Option<&'s str>> = None;
    let mut separated = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].text() {
            Some("--") if !separated => separated = true,
            Some(t) if !separated && t.starts_with('-') && t != "-" => {
                if let Some(dir) = t.strip_prefix("--target-directory=") {
                    target = Some(Some(dir));
                } else if valued.contains(&t) {
                    if matches!(t, "-t" | "--target-directory") {
                        target = Some(args.get(i + 1).and_then(Arg::text));
                    }
                    i += 1;
                }
            }
            text => operands.push(text),
        }
        i += 1;
    }
    match name {
        "rm" | "rmdir" | "unlink" | "shred" => {
            operands.into_iter().for_each(|o| each(Effect::Delete, o));
        }
        "mkdir" | "touch" | "truncate" | "tee" => {
            operands.into_iter().for_each(|o| each(Effect::Write, o));
        }
        "chmod" | "chown" | "chgrp" => {
            // The mode or owner comes first, unless a reference file gives it.
            let skip = usize::from(!flag(args, |t| t.starts_with("--reference")));
            operands
                .into_iter()
                .skip(skip)
                .for_each(|o| each(Effect::Write, o));
        }
        "sed" => {
            let scripted = flag(args, |t| {
                matches!(t, "-e" | "--expression" | "-f" | "--file")
                    || t.starts_with("--expression=")
                    || t.starts_with("--file=")
            });
            operands
                .into_iter()
                .skip(usize::from(!scripted))
                .for_each(|o| each(Effect::Write, o));
        }
        _ if name == "install" && flag(args, |t| t == "-d" || t == "--directory") => {
            operands.into_iter().for_each(|o| each(Effect::Write, o));
        }
        _ => {
            // cp, mv, ln, install: sources, then the destination.
            let source = if name == "mv" {
                Effect::Delete
            } else {
                Effect::Read
            };
            let destination = match target {
                Some(dir) => dir,
                None if operands.len() >= 2 => operands.pop().flatten(),
                // A lone operand lands in the working directory, under
                // a name the words do not give.
                None => return false,
            };
            operands.into_iter().for_each(|o| each(source, o));
            each(Effect::Write, destination);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args<'a>(items: &[&'a str]) -> Vec<Arg<'a>> {
        items
            .iter()
            .map(|s| Arg {
                literal: Some(Cow::Borrowed(*s)),
            })
            .collect()
    }

    #[test]
    fn sed_scripts_are_read() {
        assert!(!sed_script_writes("1,5p"));
        assert!(!sed_script_writes("s/a/b/g"));
        assert!(!sed_script_writes("/x/d; s|a|b|"));
        assert!(sed_script_writes("s/a/b/w out"));
        assert!(sed_script_writes("1e date"));
        assert!(sed_script_writes("w out"));
    }

    #[test]
    fn wrappers_find_their_command() {
        assert_eq!(wrapped("env", &args(&["A=1", "ls"])), Some(1));
        assert_eq!(wrapped("env", &args(&["A=1"])), None);
        assert_eq!(wrapped("timeout", &args(&["5", "grep", "x"])), Some(1));
        assert_eq!(wrapped("xargs", &args(&["-n", "1", "grep", "x"])), Some(2));
        assert_eq!(wrapped("command", &args(&["-v", "ls"])), None);
    }

    #[test]
    fn git_subcommands() {
        assert_eq!(judge("git", &args(&["status"])).class, Class::ReadOnly);
        assert_eq!(
            judge("git", &args(&["-C", "x", "log", "-3"])).class,
            Class::ReadOnly
        );
        assert_eq!(
            judge("git", &args(&["commit", "-m", "x"])).class,
            Class::Mutating
        );
        assert_eq!(
            judge("git", &args(&["branch", "new"])).class,
            Class::Mutating
        );
        assert_eq!(
            judge("git", &args(&["branch", "-a"])).class,
            Class::ReadOnly
        );
        assert_eq!(
            judge("git", &args(&["-c", "a=b", "log"])).class,
            Class::Mutating
        );
        assert_eq!(
            judge("git", &args(&["diff", "--output=x"])).class,
            Class::Mutating
        );
        assert_eq!(
            judge("git", &args(&["reset", "--hard"])).class,
            Class::Dangerous
        );
    }
}
