//! An owned, flat syntax tree in tree-sitter-bash's own shape: node kinds
//! are the grammar's names, ranges are byte ranges of the source, fields
//! are the grammar's field names.
//!
//! The walker reads only this tree, whichever way it was built: converted
//! from a tree-sitter parse ([`Tree::from_tree_sitter`], one cursor step
//! per node) or built directly by the recognizer for common sources
//! (`recognize.rs`). One walker means the two paths cannot disagree
//! about what a shape means; the property tests check that they build
//! the same shapes.

use std::ops::Range;
use std::sync::LazyLock;

/// One node; its children are `kids[first..first + count]` of the tree.
#[derive(Debug, Clone)]
struct Data {
    kind: &'static str,
    start: u32,
    end: u32,
    named: bool,
    missing: bool,
    field: Option<&'static str>,
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
}

impl Tree {
    pub fn with_capacity(nodes: usize) -> Tree {
        Tree {
            nodes: Vec::with_capacity(nodes),
            kids: Vec::with_capacity(nodes),
            pending: Vec::with_capacity(16),
            root: 0,
            has_error: false,
        }
    }

    /// Empty the tree, keeping its buffers for the next one.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.kids.clear();
        self.pending.clear();
        self.root = 0;
        self.has_error = false;
    }

    /// Whether the tree holds more memory than a long command needs, so
    /// that keeping it for reuse would hold on to a rare big source.
    pub fn oversized(&self) -> bool {
        self.nodes.capacity() > 4096
    }

    /// Where the children of the next node to [`Tree::close`] begin:
    /// every node finished after this mark becomes one of them.
    pub fn mark(&self) -> usize {
        self.pending.len()
    }

    /// Finish a node spanning START..END whose children are the nodes
    /// finished since MARK; it becomes pending itself. Returns its id.
    pub fn close(
        &mut self,
        mark: usize,
        kind: &'static str,
        start: usize,
        end: usize,
        named: bool,
    ) -> u32 {
        let first = self.kids.len() as u32;
        self.kids.extend(self.pending.drain(mark..));
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
    pub fn leaf(&mut self, kind: &'static str, start: usize, end: usize, named: bool) -> u32 {
        let mark = self.mark();
        self.close(mark, kind, start, end, named)
    }

    /// Give node ID the field name FIELD in its parent.
    pub fn set_field(&mut self, id: u32, field: &'static str) {
        if let Some(d) = self.nodes.get_mut(id as usize) {
            d.field = Some(field);
        }
    }

    /// The last finished node whose parent is not built yet.
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
                    kind_name(&node),
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
            d.field.map(|f| format!("{f}: ")).unwrap_or_default(),
            d.kind,
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

/// A name of tree-sitter-bash's that outlives the parse (the language
/// lends its names only as long as itself).
fn leak(name: &str) -> &'static str {
    Box::leak(name.to_owned().into_boxed_str())
}

/// Node kind names of tree-sitter-bash by kind id, made once.
static KINDS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
    (0..language.node_kind_count())
        .map(|id| leak(language.node_kind_for_id(id as u16).unwrap_or("")))
        .collect()
});

/// Field names of tree-sitter-bash by field id (ids start at 1), made
/// once from the grammar itself, so a new field cannot be missed.
static FIELDS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    let language: tree_sitter::Language = tree_sitter_bash::LANGUAGE.into();
    (0..=language.field_count())
        .map(|id| leak(language.field_name_for_id(id as u16).unwrap_or("")))
        .collect()
});

fn kind_name(node: &tree_sitter::Node) -> &'static str {
    match KINDS.get(node.kind_id() as usize) {
        Some(name) => name,
        None if node.is_error() => "ERROR",
        None => "",
    }
}

/// The name of the field the cursor stands at, if any.
fn field_at(cursor: &tree_sitter::TreeCursor) -> Option<&'static str> {
    cursor
        .field_id()
        .and_then(|id| FIELDS.get(usize::from(id.get())))
        .copied()
}

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

    pub fn kind(&self) -> &'static str {
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

    pub fn child_by_field_name(&self, field: &str) -> Option<Node<'t>> {
        self.children().find(|n| n.data().field == Some(field))
    }
}
