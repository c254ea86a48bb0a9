//! The tree walk behind [`super::analyze`].

use std::borrow::Cow;
use std::cell::RefCell;

use tree_sitter::Parser;

use super::commands::{self, Arg, Effect};
use super::recognize::recognize_into;
use super::syntax::{Field, Kind, Node, Tree};
use super::{Analysis, Class, CommandEffect, Expect, Stage};

thread_local! {
    /// One parser per thread: creating one costs more than a parse.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
    /// Buffers reused from one analysis to the next.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// The newline-terminated copy of the source, the recognizer's tree and
/// the walker's argument vector: their allocations cost more than the
/// recognizer's work on a short command.
#[derive(Default)]
struct Scratch {
    text: String,
    tree: Tree,
    args: Vec<Arg<'static>>,
}

/// Longest source whose terminated copy is kept for reuse.
const SCRATCH_MAX: usize = 16 * 1024;

fn parse(src: &str) -> Option<tree_sitter::Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut parser = Parser::new();
            let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
            parser.set_language(&language).ok()?;
            *slot = Some(parser);
        }
        slot.as_mut()?.parse(src, None)
    })
}

/// Analyse SRC: read by the recognizer when it is in its subset, else
/// parsed by tree-sitter; either way the same tree is walked.
pub fn analyze(src: &str) -> Analysis {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let analysis = analyze_with(src, &mut scratch);
            if scratch.text.capacity() > SCRATCH_MAX || scratch.tree.oversized() {
                *scratch = Scratch::default();
            }
            analysis
        }
        Err(_) => analyze_with(src, &mut Scratch::default()),
    })
}

/// [`analyze`] with the buffers of SCRATCH. The source is read
/// ending in a newline: tree-sitter-bash is several times slower on a
/// pipeline that ends at the end of input than on one ended by a newline
/// (57 vs 10 us for `a | b | c`); the newline means the same, and the
/// command is run with one after it anyway (the snapshot line follows it).
fn analyze_with(src: &str, scratch: &mut Scratch) -> Analysis {
    let Scratch { text, tree, args } = scratch;
    text.clear();
    text.push_str(src);
    if !src.ends_with('\n') {
        text.push('\n');
    }
    if recognize_into(text, tree) {
        analyze_syntax(text, tree, args, false).0
    } else {
        analyze_parsed(text, false).0
    }
}

/// What each command of SRC does to files, in source order; their
/// paths as written, joined to the directory the source had changed to.
/// Only a card asks, so the permission decision's walk records nothing.
pub fn describe(src: &str) -> Vec<CommandEffect> {
    let text = if src.ends_with('\n') {
        src.to_string()
    } else {
        format!("{src}\n")
    };
    let mut tree = Tree::default();
    let mut effects = if recognize_into(&text, &mut tree) {
        analyze_syntax(&text, &tree, &mut Vec::new(), true).1
    } else {
        analyze_parsed(&text, true).1
    };
    // Offsets in characters, as Lisp counts them.
    for effect in &mut effects {
        effect.start = text.get(..effect.start).map_or(0, |t| t.chars().count());
        effect.end = text.get(..effect.end).map_or(0, |t| t.chars().count());
    }
    effects
}

/// [`analyze`] through tree-sitter, whatever the source.
#[cfg(test)]
pub fn analyze_tree(src: &str) -> Analysis {
    analyze_parsed(&terminated(src), false).0
}

/// The converted tree-sitter tree of SRC, newline-terminated.
#[cfg(test)]
pub fn tree_of(src: &str) -> Option<Tree> {
    parse(&terminated(src)).map(|t| Tree::from_tree_sitter(&t))
}

/// SRC ending in a newline, as [`analyze`] reads it.
#[cfg(test)]
pub fn terminated(src: &str) -> Cow<'_, str> {
    if src.ends_with('\n') {
        Cow::Borrowed(src)
    } else {
        Cow::Owned(format!("{src}\n"))
    }
}

/// Parse the newline-terminated SRC with tree-sitter and walk it (see
/// [`analyze_syntax`] for DETAIL).
fn analyze_parsed(src: &str, detail: bool) -> (Analysis, Vec<CommandEffect>) {
    let Some(tree) = parse(src) else {
        let analysis = Analysis {
            class: Class::Unknown,
            reasons: vec![Cow::Borrowed("the source could not be parsed")],
            background: false,
            parse_error: true,
            single: None,
            final_pipeline: None,
            pipelines: 0,
            ineligible: Some("unparsable"),
            keys: Vec::new(),
            unkeyed: true,
            paths: Vec::new(),
            paths_unknown: true,
        };
        return (analysis, Vec::new());
    };
    analyze_syntax(src, &Tree::from_tree_sitter(&tree), &mut Vec::new(), detail)
}

/// Walk TREE, the syntax of SRC, with the allocation of ARGS (left
/// empty) for the arguments of its commands; with DETAIL, record what
/// each command does to files (byte offsets), else nothing.
fn analyze_syntax(
    src: &str,
    tree: &Tree,
    args: &mut Vec<Arg<'static>>,
    detail: bool,
) -> (Analysis, Vec<CommandEffect>) {
    let root = tree.root();
    let mut w = Walker::new(src, tree.escapes(), std::mem::take(args));
    if detail {
        w.detail = Some(Vec::new());
    }
    w.parse_error = tree.has_error();
    w.walk(root);
    if w.parse_error {
        w.raise(Class::Unknown, "the source could not be parsed");
        w.decline("unparsable");
        w.unkeyed = true;
        w.paths_unknown = true;
    }
    if w.background {
        w.decline("background operator");
    }
    let statements = || named_children(root).filter(|n| n.kind() != Kind::Comment);
    let mut first_two = statements();
    let single = match (first_two.next(), first_two.next()) {
        (Some(only), None) if !w.parse_error && !w.background => w.stage_of(only, false),
        _ => None,
    };
    let final_pipeline = statements()
        .last()
        .and_then(|last| w.final_pipeline(last))
        .filter(|_| w.ineligible.is_none());
    *args = recycle(std::mem::take(&mut w.args));
    let mut effects = w.detail.take().unwrap_or_default();
    if w.parse_error {
        effects.iter_mut().for_each(|e| e.unknown = true);
    }
    (w.finish(single, final_pipeline), effects)
}

/// ARGS emptied, as a vector that outlives the source its arguments
/// borrowed from. Collecting a vector's own iterator into elements of the
/// same size reuses its allocation, so nothing is allocated or copied.
fn recycle(mut args: Vec<Arg<'_>>) -> Vec<Arg<'static>> {
    args.clear();
    args.into_iter().map(|_| Arg { literal: None }).collect()
}

fn named_children<'t>(node: Node<'t>) -> impl Iterator<Item = Node<'t>> {
    node.named_children()
}

fn children<'t>(node: Node<'t>) -> impl Iterator<Item = Node<'t>> {
    node.children()
}

/// The only named child of NODE, if it has exactly one.
fn sole_named_child(node: Node<'_>) -> Option<Node<'_>> {
    (node.named_child_count() == 1)
        .then(|| node.named_child(0))
        .flatten()
}

/// `[a-z_][a-z0-9_]*` except `_`: names whose reads and writes cannot
/// evaluate arithmetic or touch shell internals.
fn plain_name(name: &str) -> bool {
    name != "_"
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Commands that evaluate code, assign variables (possibly with
/// subscripts) or leave the shell early: any of them declines the snapshot.
fn snapshot_declines(name: &str) -> bool {
    matches!(
        name,
        "eval"
            | "source"
            | "."
            | "trap"
            | "exec"
            | "exit"
            | "return"
            | "logout"
            | "test"
            | "["
            | "let"
            | "declare"
            | "typeset"
            | "local"
            | "export"
            | "readonly"
            | "read"
            | "mapfile"
            | "readarray"
            | "unset"
            | "shopt"
            | "set"
            | "enable"
            | "builtin"
            | "command"
            | "alias"
            | "coproc"
            | "wait"
            | "getopts"
    )
}

struct Walker<'a> {
    src: &'a str,
    /// Whether a word may hold a backslash escape (known from the tree,
    /// instead of searching every word for one).
    escapes: bool,
    class: Class,
    reasons: Vec<Cow<'static, str>>,
    background: bool,
    parse_error: bool,
    pipelines: usize,
    ineligible: Option<&'static str>,
    /// A vector for a command's arguments, kept between commands.
    args: Vec<Arg<'a>>,
    keys: Vec<String>,
    unkeyed: bool,
    paths: Vec<String>,
    paths_unknown: bool,
    /// How many file operands were computed (for [`Walker::detail`]).
    unknowns: usize,
    /// What each command does to files, recorded only for a card
    /// ([`describe`]).
    detail: Option<Vec<CommandEffect>>,
    /// The record of [`Walker::detail`] of the command being walked.
    current: usize,
    /// The working directory reached by top-level `cd`s, relative to the
    /// call's (empty: the call's own); `None` once it cannot be known.
    cwd: Option<String>,
    /// How many nodes between the root and the node being walked are
    /// anything but the program, a list or a redirected statement: a `cd`
    /// inside one (a subshell, a pipeline, a loop) changes the directory
    /// of that part alone.
    nested: usize,
}

impl<'a> Walker<'a> {
    fn new(src: &'a str, escapes: bool, args: Vec<Arg<'a>>) -> Walker<'a> {
        Walker {
            src,
            escapes,
            class: Class::ReadOnly,
            reasons: Vec::new(),
            background: false,
            parse_error: false,
            pipelines: 0,
            ineligible: None,
            args,
            keys: Vec::new(),
            unkeyed: false,
            paths: Vec::new(),
            paths_unknown: false,
            unknowns: 0,
            detail: None,
            current: 0,
            cwd: Some(String::new()),
            nested: 0,
        }
    }

    /// The analysis, with the reasons deduplicated.
    fn finish(self, single: Option<Stage>, final_pipeline: Option<Vec<Stage>>) -> Analysis {
        let mut reasons = self.reasons;
        let mut k = 0;
        while k < reasons.len() {
            if reasons[..k].contains(&reasons[k]) {
                reasons.remove(k);
            } else {
                k += 1;
            }
        }
        Analysis {
            class: self.class,
            reasons,
            background: self.background,
            parse_error: self.parse_error,
            single,
            final_pipeline,
            pipelines: self.pipelines,
            ineligible: self.ineligible,
            keys: self.keys,
            unkeyed: self.unkeyed,
            paths: self.paths,
            paths_unknown: self.paths_unknown,
        }
    }

    /// Record the file operand TEXT (`None`: computed), read from the
    /// working directory the walk has reached.
    fn path(&mut self, text: Option<&str>) {
        match (text, &self.cwd) {
            (Some(t), _) if t.starts_with('/') || t.starts_with('~') => {
                self.paths.push(t.to_string());
            }
            (Some(t), Some(cwd)) => self.paths.push(join(cwd, t)),
            _ => {
                self.paths_unknown = true;
                self.unknowns += 1;
            }
        }
    }

    /// The file operand TEXT as [`Walker::path`] records it, or `None`
    /// when it cannot be told.
    fn located(&self, text: Option<&str>) -> Option<String> {
        match (text, &self.cwd) {
            (Some(t), _) if t.starts_with('/') || t.starts_with('~') => Some(t.to_string()),
            (Some(t), Some(cwd)) => Some(join(cwd, t)),
            _ => None,
        }
    }

    /// Record in the command being judged that it does EFFECT to the
    /// file operand TEXT.
    fn effect(&mut self, effect: Effect, text: Option<&str>) {
        let located = self.located(text);
        let Some(current) = self.detail.as_mut().and_then(|d| d.get_mut(self.current)) else {
            return;
        };
        match located {
            Some(path) => match effect {
                Effect::Read => current.reads.push(path),
                Effect::Write => current.writes.push(path),
                Effect::Delete => current.deletes.push(path),
            },
            None => current.unknown = true,
        }
    }

    /// Give the command being judged its LABEL and CLASS; with EFFECTS
    /// known (`Some(true)`) its operands were recorded, `Some(false)`
    /// means they cannot be told, `None` that they are its reads.
    fn note(&mut self, class: Class, label: &str, effects: Option<bool>) {
        if let Some(current) = self.detail.as_mut().and_then(|d| d.get_mut(self.current)) {
            current.label.clear();
            current.label.push_str(label);
            current.class = class;
            if effects == Some(false) {
                current.unknown = true;
            }
        }
    }

    /// Record as reads of the command being judged the paths recorded
    /// since BEFORE (the count of paths and of computed operands).
    fn note_reads(&mut self, before: (usize, usize)) {
        let unknown = self.unknowns > before.1;
        let paths = self.paths.get(before.0..).unwrap_or_default();
        if let Some(current) = self.detail.as_mut().and_then(|d| d.get_mut(self.current)) {
            current.reads.extend(paths.iter().cloned());
            current.unknown |= unknown;
        }
    }

    /// Follow `cd`/`pushd` with ARGS: the target is read (listed), and a
    /// top-level literal target becomes the directory later relative
    /// operands are read from.
    fn change_directory(&mut self, name: &str, args: &[Arg<'_>]) {
        let target = args.iter().find(|a| {
            a.literal
                .as_deref()
                .is_none_or(|t| !t.starts_with('-') || t == "-")
        });
        let target = match target {
            None if name == "cd" => Some("~"),
            None => None,
            Some(a) => a.literal.as_deref().filter(|t| *t != "-"),
        };
        if target.is_none() && name == "popd" {
            self.cwd = None;
            return;
        }
        self.path(target);
        self.cwd = match (target, &self.cwd) {
            (Some(t), Some(_)) if self.nested == 0 && name == "cd" && t.starts_with('/') => {
                Some(t.to_string())
            }
            (Some(t), Some(cwd)) if self.nested == 0 && name == "cd" && !t.starts_with('~') => {
                Some(join(cwd, t))
            }
            _ => None,
        };
    }

    fn text(&self, node: Node) -> &'a str {
        &self.src[node.byte_range()]
    }

    fn raise(&mut self, class: Class, reason: impl Into<Cow<'static, str>>) {
        self.class = self.class.max(class);
        self.reasons.push(reason.into());
    }

    fn decline(&mut self, why: &'static str) {
        if self.ineligible.is_none() {
            self.ineligible = Some(why);
        }
    }

    fn walk_children(&mut self, node: Node) {
        for child in children(node) {
            self.walk(child);
        }
    }

    fn walk(&mut self, node: Node) {
        let plain = matches!(
            node.kind(),
            Kind::Program | Kind::List | Kind::RedirectedStatement | Kind::Command
        );
        if !plain {
            self.nested += 1;
        }
        self.walk_node(node);
        if !plain {
            self.nested -= 1;
        }
    }

    fn walk_node(&mut self, node: Node) {
        if node.is_missing() {
            self.parse_error = true;
        }
        match node.kind() {
            Kind::Amp => self.background = true,
            Kind::Error => {
                self.parse_error = true;
                self.walk_children(node);
            }
            Kind::Comment => {}
            Kind::Command => self.command(node),
            Kind::FunctionDefinition => {
                self.raise(Class::Complex, "defines a shell function");
                self.decline("function definition");
                self.walk_children(node);
            }
            Kind::CommandSubstitution | Kind::ProcessSubstitution => {
                self.decline("command or process substitution");
                self.walk_children(node);
            }
            Kind::ArithmeticExpansion
            | Kind::CStyleForStatement
            | Kind::Subscript
            | Kind::Array => {
                self.decline("arithmetic or array syntax");
                self.walk_children(node);
            }
            Kind::Expansion => {
                let plain = sole_named_child(node).is_some_and(|var| {
                    var.kind() == Kind::VariableName && plain_name(self.text(var))
                });
                if !plain {
                    self.decline("parameter expansion with an operator or a special name");
                }
                self.walk_children(node);
            }
            Kind::SimpleExpansion => {
                let ok = node.named_child(0).is_some_and(|n| {
                    let t = self.text(n);
                    match n.kind() {
                        Kind::VariableName => plain_name(t),
                        Kind::SpecialVariableName => matches!(t, "@" | "#" | "?"),
                        _ => false,
                    }
                });
                if !ok {
                    self.decline("special or uppercase variable");
                }
            }
            Kind::VariableAssignment => {
                if let Some(name) = node.child_by_field_name(Field::Name)
                    && !(name.kind() == Kind::VariableName && plain_name(self.text(name)))
                {
                    self.decline("assignment to a special or uppercase variable");
                }
                self.walk_children(node);
            }
            Kind::DeclarationCommand | Kind::UnsetCommand | Kind::TestCommand => {
                self.decline("declaration or test builtin");
                self.walk_children(node);
            }
            Kind::ForStatement => {
                if let Some(var) = node.child_by_field_name(Field::Variable)
                    && !plain_name(self.text(var))
                {
                    self.decline("loop variable name");
                }
                self.walk_children(node);
            }
            Kind::Pipeline => {
                self.pipelines += 1;
                self.walk_children(node);
            }
            Kind::FileRedirect => self.redirect(node),
            Kind::HeredocRedirect => {
                if named_children(node).any(|n| n.kind() == Kind::Pipeline) {
                    self.decline("pipeline after a here-document");
                }
                self.walk_children(node);
            }
            _ => self.walk_children(node),
        }
    }

    /// The value of a fully literal word, or `None`; borrowed from the
    /// source unless escapes or pieces had to be joined.
    fn literal(&self, node: Node) -> Option<Cow<'a, str>> {
        match node.kind() {
            Kind::Word | Kind::Number => Some(self.unescape(self.text(node))),
            Kind::RawString => Some(Cow::Borrowed(
                self.text(node)
                    .trim_start_matches('\'')
                    .trim_end_matches('\''),
            )),
            Kind::AnsiCString => Some(Cow::Borrowed(
                self.text(node)
                    .trim_start_matches("$'")
                    .trim_end_matches('\''),
            )),
            Kind::String => {
                let mut parts = named_children(node);
                match (parts.next(), parts.next()) {
                    (None, _) => Some(Cow::Borrowed("")),
                    (Some(p), None) if p.kind() == Kind::StringContent => {
                        Some(self.unescape_dq(self.text(p)))
                    }
                    _ if named_children(node).all(|p| p.kind() == Kind::StringContent) => {
                        Some(Cow::Owned(
                            named_children(node)
                                .map(|p| self.unescape_dq(self.text(p)))
                                .collect(),
                        ))
                    }
                    _ => None,
                }
            }
            Kind::Concatenation => named_children(node)
                .map(|p| self.literal(p))
                .collect::<Option<String>>()
                .map(Cow::Owned),
            Kind::CommandName => node.named_child(0).and_then(|n| self.literal(n)),
            _ => None,
        }
    }

    /// [`unescape`], skipped when the tree has no escapes.
    fn unescape(&self, text: &'a str) -> Cow<'a, str> {
        if self.escapes {
            unescape(text)
        } else {
            Cow::Borrowed(text)
        }
    }

    /// [`unescape_dq`], skipped when the tree has no escapes.
    fn unescape_dq(&self, text: &'a str) -> Cow<'a, str> {
        if self.escapes {
            unescape_dq(text)
        } else {
            Cow::Borrowed(text)
        }
    }

    // Kept out of line: inlined, it would make every [`Walker::walk`] call dearer.
    #[inline(never)]
    fn redirect(&mut self, node: Node) {
        let op = children(node).find(|c| !c.is_named()).map(|c| c.kind());
        let dest = node.child_by_field_name(Field::Destination);
        let writes = matches!(
            op,
            Some(Kind::Gt | Kind::GtGt | Kind::GtPipe | Kind::AmpGt | Kind::AmpGtGt | Kind::GtAmp)
        );
        if writes {
            let harmless = dest.is_some_and(|d| {
                let value = self.literal(d);
                (op == Some(Kind::GtAmp)
                    && (d.kind() == Kind::Number || value.as_deref() == Some("-")))
                    || matches!(
                        value.as_deref(),
                        Some("/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty")
                    )
            });
            if !harmless {
                self.raise(Class::Mutating, "redirects output into a file");
                if self.detail.is_some() {
                    let value = dest.and_then(|d| self.literal(d));
                    self.effect(Effect::Write, value.as_deref());
                }
            }
        } else if op == Some(Kind::Lt) {
            let value = dest.and_then(|d| self.literal(d));
            self.path(value.as_deref());
            if self.detail.is_some() {
                self.effect(Effect::Read, value.as_deref());
            }
        }
        self.walk_children(node);
    }

    // Kept out of line: inlined, it would make every [`Walker::walk`] call dearer.
    #[inline(never)]
    fn command(&mut self, node: Node) {
        let mut name_node = None;
        // The walker's spare vector (a command nested in an argument
        // takes a new one).
        let mut args = std::mem::take(&mut self.args);
        args.clear();
        if let Some(detail) = self.detail.as_mut() {
            let range = node.byte_range();
            detail.push(CommandEffect {
                label: String::new(),
                class: Class::ReadOnly,
                start: range.start,
                end: range.end,
                reads: Vec::new(),
                writes: Vec::new(),
                deletes: Vec::new(),
                unknown: false,
            });
        }
        // The record this command's judgement and redirections fill
        // (commands in its arguments add theirs after it).
        let record = self
            .detail
            .as_ref()
            .map_or(0, |d| d.len().saturating_sub(1));
        self.current = record;
        for child in children(node) {
            match child.kind() {
                Kind::CommandName => name_node = Some(child),
                Kind::VariableAssignment
                | Kind::FileRedirect
                | Kind::HerestringRedirect
                | Kind::HeredocRedirect => {}
                _ if child.is_named() => args.push(Arg {
                    literal: self.literal(child),
                }),
                _ => {}
            }
            self.walk(child);
            self.current = record;
        }
        let reads = (self.paths.len(), self.unknowns);
        match name_node.map(|n| self.literal(n)) {
            None => {}
            Some(None) => {
                self.raise(Class::Complex, "the command name is computed");
                self.decline("computed command name");
                self.unkeyed = true;
                self.note(Class::Complex, "?", None);
            }
            Some(Some(name)) => self.judge_command(name, &args),
        }
        if self.detail.is_some() {
            self.note_reads(reads);
        }
        args.clear();
        self.args = args;
    }

    /// Judge the command NAME with ARGS (after its words were walked),
    /// following wrappers such as `env` and `xargs` to the command they run.
    fn judge_command(&mut self, mut name: Cow<'a, str>, mut args: &[Arg<'a>]) {
        loop {
            if name.contains('/') {
                self.raise(
                    Class::Unknown,
                    format!("`{name}` is a path-qualified program"),
                );
                self.note(Class::Unknown, &name, Some(false));
                self.add_key(Some(name.into_owned()));
                return;
            }
            if snapshot_declines(&name) {
                self.decline("builtin that evaluates code or assigns variables");
            }
            if name == "printf" {
                let format = args.iter().find(|a| {
                    a.literal
                        .as_deref()
                        .is_none_or(|t| !t.starts_with('-') || t == "--")
                });
                let plain = format
                    .and_then(|a| a.literal.as_deref())
                    .is_some_and(|f| !f.contains("%n") && f != "--");
                if !plain || args.iter().any(|a| a.literal.as_deref() == Some("-v")) {
                    self.decline("printf with -v, %n or a computed format");
                }
            }
            match commands::wrapped(&name, args) {
                Some(usize::MAX) => {
                    // xargs without a command runs echo.
                    name = Cow::Borrowed("echo");
                    args = &[];
                }
                Some(i) if i < args.len() => {
                    let Some(inner) = args[i].literal.clone() else {
                        self.raise(Class::Complex, "the wrapped command name is computed");
                        self.note(Class::Complex, &name, Some(false));
                        self.unkeyed = true;
                        return;
                    };
                    name = inner;
                    args = &args[i + 1..];
                }
                _ => break,
            }
        }
        let verdict = commands::judge(&name, args);
        let key = commands::key(&name, args, verdict.class);
        if self.detail.is_some() {
            self.describe_command(&name, args, verdict.class, key.as_deref());
        }
        self.add_key(key);
        if matches!(&*name, "cd" | "pushd" | "popd") {
            self.change_directory(&name, args);
        } else if verdict.class == Class::ReadOnly {
            commands::file_operands(&name, args, |text| self.path(text));
        }
        if let Some(reason) = verdict.reason {
            self.raise(verdict.class, reason);
        }
    }

    /// Record the command NAME with ARGS, judged CLASS, under its KEY (or
    /// its name): what it writes or deletes when it changes files (its
    /// reads are the paths its judgement records).
    #[inline(never)]
    fn describe_command(&mut self, name: &str, args: &[Arg<'_>], class: Class, key: Option<&str>) {
        let known = match class {
            Class::ReadOnly => None,
            _ => {
                let mut found = Vec::new();
                let known = commands::effects(name, args, |effect, text| {
                    found.push((effect, text.map(str::to_string)));
                });
                for (effect, text) in found {
                    self.effect(effect, text.as_deref());
                }
                Some(known)
            }
        };
        self.note(class, key.unwrap_or(name), known);
    }

    /// Note a command's KEY (`None`: no session answer may cover it).
    fn add_key(&mut self, key: Option<String>) {
        match key {
            Some(key) if !self.keys.contains(&key) => self.keys.push(key),
            Some(_) => {}
            None => self.unkeyed = true,
        }
    }

    /// The stage a statement makes; loops only when IN_PIPELINE.
    fn stage_of(&self, node: Node, in_pipeline: bool) -> Option<Stage> {
        match node.kind() {
            Kind::RedirectedStatement => {
                let body = node.child_by_field_name(Field::Body)?;
                if children(node).any(|c| c.kind() == Kind::HeredocRedirect) {
                    return None;
                }
                self.stage_of(body, in_pipeline)
            }
            Kind::Command => command_stage(self.literal(node.child_by_field_name(Field::Name)?)?),
            Kind::TestCommand => Some(Stage {
                label: if self.text(node).starts_with("[[") {
                    "[[".into()
                } else {
                    "[".into()
                },
                expect: Expect::False,
                compound: false,
            }),
            Kind::ForStatement if in_pipeline => {
                let body = node.child_by_field_name(Field::Body)?;
                let plain = named_children(body).all(|n| match n.kind() {
                    Kind::Command | Kind::Comment => true,
                    Kind::RedirectedStatement => n
                        .child_by_field_name(Field::Body)
                        .is_some_and(|b| b.kind() == Kind::Command),
                    _ => false,
                });
                plain.then(|| Stage {
                    label: "for loop".into(),
                    expect: Expect::Nothing,
                    compound: true,
                })
            }
            _ => None,
        }
    }

    /// Stages of the pipeline that NODE (the last statement) ends with.
    fn final_pipeline(&self, node: Node) -> Option<Vec<Stage>> {
        if self.parse_error || self.background {
            return None;
        }
        match node.kind() {
            Kind::List => {
                let last = named_children(node)
                    .filter(|n| n.kind() != Kind::Comment)
                    .last()?;
                self.final_pipeline(last)
            }
            Kind::RedirectedStatement => {
                let body = node.child_by_field_name(Field::Body)?;
                (body.kind() == Kind::Pipeline)
                    .then(|| self.final_pipeline(body))
                    .flatten()
            }
            Kind::Pipeline => {
                let mut stages = Vec::with_capacity(node.named_child_count());
                for n in named_children(node).filter(|n| n.kind() != Kind::Comment) {
                    stages.push(self.stage_of(n, true)?);
                }
                Some(stages)
            }
            _ => None,
        }
    }
}

/// The stage a simple command named NAME makes; `None` for a
/// path-qualified program, whose exit statuses mean nothing known.
fn command_stage(name: Cow<'_, str>) -> Option<Stage> {
    if name.contains('/') {
        return None;
    }
    let expect = match &*name {
        "grep" | "egrep" | "fgrep" | "rg" | "zgrep" => Expect::NoMatch,
        "diff" => Expect::Different,
        "test" | "[" => Expect::False,
        _ => Expect::Nothing,
    };
    Some(Stage {
        label: match commands::listed_name(&name) {
            Some(listed) => listed.into(),
            None => name.into_owned().into(),
        },
        expect,
        compound: false,
    })
}

/// OPERAND read from the directory DIR (relative to the call's working
/// directory; empty for that directory itself).
fn join(dir: &str, operand: &str) -> String {
    if dir.is_empty() {
        operand.to_string()
    } else {
        let mut path = String::with_capacity(dir.len() + operand.len() + 1);
        path.push_str(dir);
        path.push('/');
        path.push_str(operand);
        path
    }
}

/// A bare word's value: backslash escapes removed.
fn unescape(text: &str) -> Cow<'_, str> {
    if !text.contains('\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next()
                && next != '\n'
            {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Double-quoted content: only `\$ \` \" \\` and line continuations
/// are escapes.
fn unescape_dq(text: &str) -> Cow<'_, str> {
    if !text.contains('\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&next) = chars.peek()
            && matches!(next, '$' | '`' | '"' | '\\' | '\n')
        {
            chars.next();
            if next != '\n' {
                out.push(next);
            }
            continue;
        }
        out.push(c);
    }
    Cow::Owned(out)
}
