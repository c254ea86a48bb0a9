//! An owned, flat syntax tree in tree-sitter-bash's own shape: node kinds
//! are the grammar's (as [`Kind`]), ranges are byte ranges of the source,
//! fields are the grammar's (as [`Field`]).
//!
//! The walker reads only this tree, whichever way it was built: converted
//! from a tree-sitter parse ([`Tree::from_tree_sitter`], one cursor step
//! per node) or built directly by the recognizer for common sources
//! (`recognize.rs`). One walker means the two paths cannot disagree
//! about what a shape means; the property tests check that they build
//! the same shapes.

use std::ops::Range;
use std::sync::LazyLock;

/// The node kinds of tree-sitter-bash that the recognizer builds or the
/// walker tells apart, by the grammar's name (named or not: the node's
/// own flag says); any other kind keeps the grammar's id. Comparing
/// these is an integer comparison where names were string comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Program,
    Comment,
    Command,
    CommandName,
    Word,
    Number,
    Concatenation,
    RawString,
    AnsiCString,
    String,
    StringContent,
    SimpleExpansion,
    Expansion,
    VariableName,
    SpecialVariableName,
    CommandSubstitution,
    ProcessSubstitution,
    ArithmeticExpansion,
    CStyleForStatement,
    Subscript,
    Array,
    VariableAssignment,
    VariableAssignments,
    DeclarationCommand,
    UnsetCommand,
    TestCommand,
    ForStatement,
    DoGroup,
    Pipeline,
    List,
    RedirectedStatement,
    FileRedirect,
    FileDescriptor,
    HeredocRedirect,
    HerestringRedirect,
    FunctionDefinition,
    Pipe,
    And,
    Or,
    Semicolon,
    Amp,
    Assign,
    PlusAssign,
    Gt,
    GtGt,
    Lt,
    AmpGt,
    AmpGtGt,
    GtAmp,
    GtPipe,
    Quote,
    DollarParen,
    CloseParen,
    DollarBrace,
    CloseBrace,
    Dollar,
    For,
    In,
    Do,
    Done,
    Error,
    /// Another kind, by the grammar's id.
    Other(u16),
}

/// Each named [`Kind`] with the grammar's name.
const KIND_NAMES: &[(Kind, &str)] = &[
    (Kind::Program, "program"),
    (Kind::Comment, "comment"),
    (Kind::Command, "command"),
    (Kind::CommandName, "command_name"),
    (Kind::Word, "word"),
    (Kind::Number, "number"),
    (Kind::Concatenation, "concatenation"),
    (Kind::RawString, "raw_string"),
    (Kind::AnsiCString, "ansi_c_string"),
    (Kind::String, "string"),
    (Kind::StringContent, "string_content"),
    (Kind::SimpleExpansion, "simple_expansion"),
    (Kind::Expansion, "expansion"),
    (Kind::VariableName, "variable_name"),
    (Kind::SpecialVariableName, "special_variable_name"),
    (Kind::CommandSubstitution, "command_substitution"),
    (Kind::ProcessSubstitution, "process_substitution"),
    (Kind::ArithmeticExpansion, "arithmetic_expansion"),
    (Kind::CStyleForStatement, "c_style_for_statement"),
    (Kind::Subscript, "subscript"),
    (Kind::Array, "array"),
    (Kind::VariableAssignment, "variable_assignment"),
    (Kind::VariableAssignments, "variable_assignments"),
    (Kind::DeclarationCommand, "declaration_command"),
    (Kind::UnsetCommand, "unset_command"),
    (Kind::TestCommand, "test_command"),
    (Kind::ForStatement, "for_statement"),
    (Kind::DoGroup, "do_group"),
    (Kind::Pipeline, "pipeline"),
    (Kind::List, "list"),
    (Kind::RedirectedStatement, "redirected_statement"),
    (Kind::FileRedirect, "file_redirect"),
    (Kind::FileDescriptor, "file_descriptor"),
    (Kind::HeredocRedirect, "heredoc_redirect"),
    (Kind::HerestringRedirect, "herestring_redirect"),
    (Kind::FunctionDefinition, "function_definition"),
    (Kind::Pipe, "|"),
    (Kind::And, "&&"),
    (Kind::Or, "||"),
    (Kind::Semicolon, ";"),
    (Kind::Amp, "&"),
    (Kind::Assign, "="),
    (Kind::PlusAssign, "+="),
    (Kind::Gt, ">"),
    (Kind::GtGt, ">>"),
    (Kind::Lt, "<"),
    (Kind::AmpGt, "&>"),
    (Kind::AmpGtGt, "&>>"),
    (Kind::GtAmp, ">&"),
    (Kind::GtPipe, ">|"),
    (Kind::Quote, "\""),
    (Kind::DollarParen, "$("),
    (Kind::CloseParen, ")"),
    (Kind::DollarBrace, "${"),
    (Kind::CloseBrace, "}"),
    (Kind::Dollar, "$"),
    (Kind::For, "for"),
    (Kind::In, "in"),
    (Kind::Do, "do"),
    (Kind::Done, "done"),
    (Kind::Error, "ERROR"),
];

/// The fields of tree-sitter-bash that the recognizer sets or the walker
/// reads; any other keeps the grammar's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Name,
    Argument,
    Body,
    Redirect,
    Destination,
    Descriptor,
    Value,
    Variable,
    /// Another field, by the grammar's id.
    Other(u16),
}

/// Each named [`Field`] with the grammar's name.
const FIELD_NAMES: &[(Field, &str)] = &[
    (Field::Name, "name"),
    (Field::Argument, "argument"),
    (Field::Body, "body"),
    (Field::Redirect, "redirect"),
    (Field::Destination, "destination"),
    (Field::Descriptor, "descriptor"),
    (Field::Value, "value"),
    (Field::Variable, "variable"),
];

/// One node; its children are `kids[first..first + count]` of the tree.
#[derive(Debug, Clone)]
struct Data {
    kind: Kind,
    start: u32,
    end: u32,
    named: bool,
    missing: bool,
    field: Option<Field>,
    first: u32,
    count: u32,
}

/// A syntax tree of one source.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    nodes: Vec<Data>,
    /// Child ids of every node, each node's run contiguous.
    kids: Vec<u32>,
    /// Ids of finished nodes whose parent is not built yet.
    pending: Vec<u32>,
    root: u32,
    has_error: bool,
    /// Whether a word or string content may hold a backslash escape.
    escapes: bool,
}

impl Tree {
    pub fn with_capacity(nodes: usize) -> Tree {
        Tree {
            nodes: Vec::with_capacity(nodes),
            kids: Vec::with_capacity(nodes),
            pending: Vec::with_capacity(16),
            root: 0,
            has_error: false,
            escapes: false,
        }
    }

    /// Empty the tree, keeping its buffers for the next one.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.kids.clear();
        self.pending.clear();
        self.root = 0;
        self.has_error = false;
        self.escapes = false;
    }

    /// Whether the tree holds more memory than a long command needs, so
    /// that keeping it for reuse would hold on to a rare big source.
    pub fn oversized(&self) -> bool {
        self.nodes.capacity() > 4096
    }

    /// Where the children of the next node to [`Tree::close`] begin:
    /// every node finished after this mark becomes one of them.
    #[inline]
    pub fn mark(&self) -> usize {
        self.pending.len()
    }

    /// Finish a node spanning START..END whose children are the nodes
    /// finished since MARK; it becomes pending itself. Returns its id.
    #[inline]
    pub fn close(&mut self, mark: usize, kind: Kind, start: usize, end: usize, named: bool) -> u32 {
        let first = self.kids.len() as u32;
        self.kids
            .extend_from_slice(self.pending.get(mark..).unwrap_or(&[]));
        self.pending.truncate(mark);
        let id = self.nodes.len() as u32;
        self.nodes.push(Data {
            kind,
            start: start as u32,
            end: end as u32,
            named,
            missing: false,
            field: None,
            first,
            count: self.kids.len() as u32 - first,
        });
        self.pending.push(id);
        id
    }

    /// A node without children.
    #[inline]
    pub fn leaf(&mut self, kind: Kind, start: usize, end: usize, named: bool) -> u32 {
        let id = self.nodes.len() as u32;
        self.nodes.push(Data {
            kind,
            start: start as u32,
            end: end as u32,
            named,
            missing: false,
            field: None,
            first: self.kids.len() as u32,
            count: 0,
        });
        self.pending.push(id);
        id
    }

    /// Give node ID the field name FIELD in its parent.
    #[inline]
    pub fn set_field(&mut self, id: u32, field: Field) {
        if let Some(d) = self.nodes.get_mut(id as usize) {
            d.field = Some(field);
        }
    }

    /// The last finished node whose parent is not built yet.
    #[inline]
    pub fn last_pending(&self) -> Option<u32> {
        self.pending.last().copied()
    }

    /// Make the last finished node the root.
    pub fn finish(&mut self) {
        self.root = self.pending.pop().unwrap_or(0);
        self.pending.clear();
    }

    /// Convert a tree-sitter parse, walking it once with a cursor
    /// (indexing children is linear in the index there).
    pub fn from_tree_sitter(ts: &tree_sitter::Tree) -> Tree {
        let mut out = Tree::with_capacity(64);
        out.has_error = ts.root_node().has_error();
        out.escapes = true;
        let mut cursor = ts.walk();
        let mut marks = Vec::with_capacity(16);
        loop {
            marks.push(out.mark());
            if cursor.goto_first_child() {
                continue;
            }
            loop {
                let node = cursor.node();
                let mark = marks.pop().unwrap_or(0);
                let range = node.byte_range();
                let id = out.close(
                    mark,
                    kind_of(&node),
                    range.start,
                    range.end,
                    node.is_named(),
                );
                if node.is_missing() {
                    out.nodes[id as usize].missing = true;
                }
                if let Some(field) = field_at(&cursor) {
                    out.set_field(id, field);
                }
                if cursor.goto_next_sibling() {
                    break;
                }
                if !cursor.goto_parent() {
                    out.finish();
                    return out;
                }
            }
        }
    }

    pub fn root(&self) -> Node<'_> {
        Node {
            tree: self,
            id: self.root,
        }
    }

    /// Note that a word or string content holds a backslash escape.
    #[inline]
    pub fn note_escape(&mut self) {
        self.escapes = true;
    }

    /// Whether a word or string content may hold a backslash escape
    /// (always, for a converted tree-sitter parse): without one, no word
    /// needs unescaping.
    pub fn escapes(&self) -> bool {
        self.escapes
    }

    /// Whether the parse had an error or a missing node anywhere.
    pub fn has_error(&self) -> bool {
        self.has_error
    }

    /// Every node with kind, range, named flag, field and children, one
    /// per line, indented by depth: two trees are the same shape when
    /// their dumps are equal.
    #[cfg(test)]
    pub fn dump(&self) -> String {
        let mut out = String::new();
        self.dump_node(self.root, 0, &mut out);
        out
    }

    #[cfg(test)]
    fn dump_node(&self, id: u32, depth: usize, out: &mut String) {
        use std::fmt::Write as _;
        let Some(d) = self.nodes.get(id as usize) else {
            return;
        };
        let _ = writeln!(
            out,
            "{:indent$}{}{:?} {}..{}{}{}",
            "",
            d.field
                .map(|f| format!("{}: ", f.name()))
                .unwrap_or_default(),
            d.kind.name(),
            d.start,
            d.end,
            if d.named { "" } else { " anon" },
            if d.missing { " MISSING" } else { "" },
            indent = depth * 2
        );
        for &k in self.kid_ids(d) {
            self.dump_node(k, depth + 1, out);
        }
    }

    fn kid_ids(&self, d: &Data) -> &[u32] {
        self.kids
            .get(d.first as usize..(d.first + d.count) as usize)
            .unwrap_or(&[])
    }
}

/// [`Kind`]s by tree-sitter-bash's kind id, matched by name once.
static KINDS: LazyLock<Vec<Kind>> = LazyLock::new(|| {
    let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
    (0..language.node_kind_count())
        .map(|id| {
            let id = id as u16;
            let name = language.node_kind_for_id(id).unwrap_or("");
            KIND_NAMES
                .iter()
                .find(|(_, n)| *n == name)
                .map_or(Kind::Other(id), |(k, _)| *k)
        })
        .collect()
});

/// [`Field`]s by tree-sitter-bash's field id (ids start at 1), matched
/// by name once from the grammar itself, so a new field cannot be missed.
static FIELDS: LazyLock<Vec<Field>> = LazyLock::new(|| {
    let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
    (0..=language.field_count())
        .map(|id| {
            let id = id as u16;
            let name = language.field_name_for_id(id).unwrap_or("");
            FIELD_NAMES
                .iter()
                .find(|(_, n)| *n == name)
                .map_or(Field::Other(id), |(f, _)| *f)
        })
        .collect()
});

fn kind_of(node: &tree_sitter::Node) -> Kind {
    match KINDS.get(node.kind_id() as usize) {
        Some(&kind) => kind,
        None if node.is_error() => Kind::Error,
        None => Kind::Other(node.kind_id()),
    }
}

/// The field the cursor stands at, if any.
fn field_at(cursor: &tree_sitter::TreeCursor) -> Option<Field> {
    cursor
        .field_id()
        .and_then(|id| FIELDS.get(usize::from(id.get())))
        .copied()
}

#[cfg(test)]
impl Kind {
    /// The grammar's name of this kind.
    fn name(self) -> &'static str {
        match self {
            Kind::Other(id) => KIND_STRS.get(usize::from(id)).copied().unwrap_or(""),
            known => KIND_NAMES
                .iter()
                .find(|(k, _)| *k == known)
                .map_or("", |(_, n)| n),
        }
    }
}

#[cfg(test)]
impl Field {
    /// The grammar's name of this field.
    fn name(self) -> &'static str {
        match self {
            Field::Other(id) => FIELD_STRS.get(usize::from(id)).copied().unwrap_or(""),
            known => FIELD_NAMES
                .iter()
                .find(|(f, _)| *f == known)
                .map_or("", |(_, n)| n),
        }
    }
}

/// A name of tree-sitter-bash's that outlives the parse (the language
/// lends its names only as long as itself).
#[cfg(test)]
fn leak(name: &str) -> &'static str {
    Box::leak(name.to_owned().into_boxed_str())
}

/// Kind names of tree-sitter-bash by kind id, made once.
#[cfg(test)]
static KIND_STRS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
    (0..language.node_kind_count())
        .map(|id| leak(language.node_kind_for_id(id as u16).unwrap_or("")))
        .collect()
});

/// Field names of tree-sitter-bash by field id, made once.
#[cfg(test)]
static FIELD_STRS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
    (0..=language.field_count())
        .map(|id| leak(language.field_name_for_id(id as u16).unwrap_or("")))
        .collect()
});

/// A node of a [`Tree`], with the accessors of `tree_sitter::Node` that
/// the walker uses.
#[derive(Clone, Copy)]
pub struct Node<'t> {
    tree: &'t Tree,
    id: u32,
}

impl<'t> Node<'t> {
    fn data(&self) -> &'t Data {
        &self.tree.nodes[self.id as usize]
    }

    pub fn kind(&self) -> Kind {
        self.data().kind
    }

    pub fn is_named(&self) -> bool {
        self.data().named
    }

    pub fn is_missing(&self) -> bool {
        self.data().missing
    }

    pub fn byte_range(&self) -> Range<usize> {
        let d = self.data();
        d.start as usize..d.end as usize
    }

    pub fn children(&self) -> impl Iterator<Item = Node<'t>> + use<'t> {
        let tree = self.tree;
        tree.kid_ids(self.data())
            .iter()
            .map(move |&id| Node { tree, id })
    }

    pub fn named_children(&self) -> impl Iterator<Item = Node<'t>> + use<'t> {
        self.children().filter(|n| n.is_named())
    }

    pub fn named_child(&self, i: usize) -> Option<Node<'t>> {
        self.named_children().nth(i)
    }

    pub fn named_child_count(&self) -> usize {
        self.named_children().count()
    }

    pub fn child_by_field_name(&self, field: Field) -> Option<Node<'t>> {
        self.children().find(|n| n.data().field == Some(field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind and field the recognizer and the walker name is one of
    /// tree-sitter-bash's, so none can silently never match.
    #[test]
    fn names_are_the_grammars() {
        for (kind, name) in KIND_NAMES {
            if *kind != Kind::Error {
                assert!(
                    KINDS.contains(kind),
                    "{name} is no kind of tree-sitter-bash"
                );
            }
        }
        for (field, name) in FIELD_NAMES {
            assert!(
                FIELDS.contains(field),
                "{name} is no field of tree-sitter-bash"
            );
        }
    }
}
