//! What the resolver knows about the session: its storage, workspace,
//! documentation tree, memory roots and discovered skills.
//!
//! Lisp gathers these facts; the resolver derives identities from them
//! (memory root keys, skill digests) and never consults Emacs itself.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::address::{MemoryKey, Origin};

/// Full lowercase SHA-256 hex digest of TEXT.
pub fn digest(text: &str) -> String {
    let hash = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRoot {
    pub path: PathBuf,
    /// One of the four `.mevedel`/`.agents` local/global kinds, if any.
    pub kind: Option<Origin>,
    /// A human label shown beside the root in listings.
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    /// The canonical source key the digest is computed from.
    pub source_key: String,
    pub root: PathBuf,
    pub origin: Origin,
    pub plugin: Option<String>,
}

impl Skill {
    pub fn digest(&self) -> String {
        digest(&self.source_key)
    }

    /// `skill://NAME@DIGEST`.
    pub fn exact_address(&self) -> String {
        let mut out = String::from("skill://");
        super::encode::encode_into(&mut out, &self.name, &[]);
        out.push('@');
        out.push_str(&self.digest());
        out
    }

    /// The readable alias, `skill://ORIGIN[/PLUGIN]/NAME`.
    pub fn alias_address(&self) -> String {
        let mut out = format!("skill://{}/", self.origin.name());
        if let Some(p) = &self.plugin {
            super::encode::encode_into(&mut out, p, &[]);
            out.push('/');
        }
        super::encode::encode_into(&mut out, &self.name, &[]);
        out
    }
}

#[derive(Debug, Clone)]
pub struct Context {
    /// The session's storage directory (it may not exist yet).
    pub session_dir: Option<PathBuf>,
    pub workspace: Option<PathBuf>,
    /// The installed `docs/` tree.
    pub docs_root: Option<PathBuf>,
    /// Configured memory roots, highest precedence first.
    pub memory_roots: Vec<MemoryRoot>,
    pub skills: Vec<Skill>,
    pub journal_recall_days: u64,
    /// Seconds since the epoch, for the journal recall limit.
    pub now: u64,
}

impl Default for Context {
    fn default() -> Self {
        Context {
            session_dir: None,
            workspace: None,
            docs_root: None,
            memory_roots: Vec::new(),
            skills: Vec::new(),
            journal_recall_days: 14,
            now: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }
}

impl Context {
    /// The key each memory root is addressed by: its readable kind when
    /// that kind is unique among the roots, else its digest.
    pub fn memory_key(&self, index: usize) -> MemoryKey {
        let root = &self.memory_roots[index];
        if let Some(kind) = root.kind {
            let same = self
                .memory_roots
                .iter()
                .filter(|r| r.kind == Some(kind))
                .count();
            if same == 1 {
                return MemoryKey::Readable(kind);
            }
        }
        MemoryKey::Digest(self.memory_digest(index))
    }

    pub fn memory_digest(&self, index: usize) -> String {
        digest(&self.memory_roots[index].path.to_string_lossy())
    }

    /// The root KEY names: a readable key only when it is unique, a
    /// digest always.
    pub fn memory_root(&self, key: &MemoryKey) -> Option<usize> {
        (0..self.memory_roots.len()).find(|&i| match key {
            MemoryKey::Readable(_) => &self.memory_key(i) == key,
            MemoryKey::Digest(d) => &self.memory_digest(i) == d,
        })
    }

    pub fn memory_key_text(&self, index: usize) -> String {
        match self.memory_key(index) {
            MemoryKey::Readable(o) => o.name().to_string(),
            MemoryKey::Digest(d) => d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(path: &str, kind: Option<Origin>) -> MemoryRoot {
        MemoryRoot {
            path: PathBuf::from(path),
            kind,
            label: path.into(),
        }
    }

    #[test]
    fn digest_is_full_lowercase_sha256() {
        assert_eq!(
            digest("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn memory_keys_are_readable_only_when_unique() {
        let mut ctx = Context {
            memory_roots: vec![
                root("/w/.mevedel/memory", Some(Origin::LocalMevedel)),
                root("/h/.agents/memory", Some(Origin::GlobalAgents)),
                root("/h/.agents/other", Some(Origin::GlobalAgents)),
                root("/elsewhere", None),
            ],
            ..Context::default()
        };
        assert_eq!(ctx.memory_key(0), MemoryKey::Readable(Origin::LocalMevedel));
        assert!(matches!(ctx.memory_key(1), MemoryKey::Digest(_)));
        assert!(matches!(ctx.memory_key(3), MemoryKey::Digest(_)));
        assert_eq!(
            ctx.memory_root(&MemoryKey::Readable(Origin::LocalMevedel)),
            Some(0)
        );
        assert_eq!(
            ctx.memory_root(&MemoryKey::Readable(Origin::GlobalAgents)),
            None
        );
        let d = ctx.memory_digest(2);
        assert_eq!(ctx.memory_root(&MemoryKey::Digest(d)), Some(2));
        // The digest of a readable root resolves to the same root.
        let d0 = ctx.memory_digest(0);
        assert_eq!(ctx.memory_root(&MemoryKey::Digest(d0)), Some(0));
        ctx.memory_roots.remove(2);
        assert_eq!(ctx.memory_key(1), MemoryKey::Readable(Origin::GlobalAgents));
    }
}
