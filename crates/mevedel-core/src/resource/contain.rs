//! Containment of a descendant below its backing root.
//!
//! Three checks, in order: the components are lexically plain (no `.`,
//! `..`, separators or absolute parts); no existing component is a
//! symbolic link that leads outside the root; and the canonical path of
//! whatever exists lies inside the canonical root.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a descendant was refused. The caller turns it into a message
/// with the authored address; backing paths never leave this module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Escape {
    /// A component that is not a plain name.
    Lexical,
    /// The Nth component (1-based) is a symbolic link leaving the root.
    Symlink(usize),
    /// The canonical path lies outside the root.
    Canonical,
}

impl Escape {
    pub fn reason(&self) -> String {
        match self {
            Escape::Lexical => "a path component that is not a plain name".into(),
            Escape::Symlink(n) => {
                format!("component {n} is a symbolic link that leads outside its root")
            }
            Escape::Canonical => "the path resolves outside its root".into(),
        }
    }
}

/// What exists at a contained descendant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Missing,
    File,
    Dir,
    /// Something else (socket, device, ...): never read.
    Other,
}

/// Remove `.` and resolve `..` without touching the filesystem.
fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn plain(component: &str) -> bool {
    !component.is_empty()
        && component != "."
        && component != ".."
        && !component.contains('/')
        && !component.contains('\0')
}

/// The canonical form of ROOT, or ROOT itself when it does not exist.
pub fn canonical_root(root: &Path) -> PathBuf {
    std::fs::canonicalize(root).unwrap_or_else(|_| lexical_normalize(root))
}

/// Check that ROOT/REL stays inside ROOT; return the joined path and
/// what exists there. A missing tail is fine (it may be created later).
pub fn contain(root: &Path, rel: &[String]) -> Result<(PathBuf, Found), Escape> {
    if !rel.iter().all(|c| plain(c)) {
        return Err(Escape::Lexical);
    }
    let croot = canonical_root(root);
    let mut cur = croot.clone();
    for (i, comp) in rel.iter().enumerate() {
        cur.push(comp);
        let meta = match std::fs::symlink_metadata(&cur) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                for rest in &rel[i + 1..] {
                    cur.push(rest);
                }
                return Ok((cur, Found::Missing));
            }
            Err(_) => return Ok((cur, Found::Other)),
        };
        if meta.file_type().is_symlink() {
            let inside = match std::fs::canonicalize(&cur) {
                Ok(target) => target.starts_with(&croot),
                Err(_) => {
                    // Dangling: judge the link text lexically.
                    let link = std::fs::read_link(&cur).unwrap_or_default();
                    let parent = cur.parent().map(Path::to_path_buf).unwrap_or_default();
                    lexical_normalize(&parent.join(link)).starts_with(&croot)
                }
            };
            if !inside {
                return Err(Escape::Symlink(i + 1));
            }
        }
    }
    match std::fs::canonicalize(&cur) {
        Ok(real) if !real.starts_with(&croot) => Err(Escape::Canonical),
        Ok(real) => {
            let found = match std::fs::metadata(&real) {
                Ok(m) if m.is_dir() => Found::Dir,
                Ok(m) if m.is_file() => Found::File,
                Ok(_) => Found::Other,
                Err(_) => Found::Missing,
            };
            Ok((cur, found))
        }
        Err(_) => Ok((cur, Found::Missing)),
    }
}

pub use mevedel_search::files::truename;

#[cfg(test)]
mod tests {
    #[test]
    fn truename_resolves_links_and_keeps_what_is_missing() {
        let root = truename(&tmp("truename"));
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        std::os::unix::fs::symlink("real/../gone/x", root.join("dangling")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        assert_eq!(truename(&root.join("link/a/b")), root.join("real/a/b"));
        assert_eq!(truename(&root.join("dangling")), root.join("gone/x"));
        assert_eq!(truename(&root.join("real/../link")), root.join("real"));
        assert_eq!(truename(&root.join("loop")), root.join("loop"));
        assert_eq!(truename(Path::new("/")), PathBuf::from("/"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    use super::*;
    use std::os::unix::fs::symlink;

    fn tmp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mevedel-contain-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root/sub")).unwrap();
        std::fs::write(dir.join("root/sub/f.txt"), "x").unwrap();
        std::fs::write(dir.join("outside.txt"), "secret").unwrap();
        dir
    }

    fn v(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plain_descendants_resolve() {
        let d = tmp("plain");
        let root = d.join("root");
        assert_eq!(
            contain(&root, &v(&["sub", "f.txt"])).map(|r| r.1),
            Ok(Found::File)
        );
        assert_eq!(contain(&root, &v(&["sub"])).map(|r| r.1), Ok(Found::Dir));
        assert_eq!(
            contain(&root, &v(&["new", "x"])).map(|r| r.1),
            Ok(Found::Missing)
        );
        assert_eq!(contain(&root, &[]).map(|r| r.1), Ok(Found::Dir));
    }

    #[test]
    fn lexical_attacks_are_refused() {
        let d = tmp("lex");
        let root = d.join("root");
        for bad in [&["..", "outside.txt"][..], &["sub", "."], &["a/b"], &[""]] {
            assert_eq!(contain(&root, &v(bad)), Err(Escape::Lexical), "{bad:?}");
        }
    }

    #[test]
    fn symlink_escapes_are_refused() {
        let d = tmp("link");
        let root = d.join("root");
        symlink("/etc", root.join("etc")).unwrap();
        symlink(d.join("outside.txt"), root.join("sub/out")).unwrap();
        // A chain: inner -> hop (inside) -> etc (outside).
        symlink(root.join("etc"), root.join("hop")).unwrap();
        symlink("../../nowhere", root.join("dangling")).unwrap();
        symlink("sub", root.join("inner")).unwrap();
        assert_eq!(
            contain(&root, &v(&["etc", "passwd"])),
            Err(Escape::Symlink(1))
        );
        assert_eq!(contain(&root, &v(&["sub", "out"])), Err(Escape::Symlink(2)));
        assert_eq!(
            contain(&root, &v(&["hop", "passwd"])),
            Err(Escape::Symlink(1))
        );
        assert_eq!(contain(&root, &v(&["dangling"])), Err(Escape::Symlink(1)));
        assert_eq!(
            contain(&root, &v(&["inner", "f.txt"])).map(|r| r.1),
            Ok(Found::File)
        );
    }
}
