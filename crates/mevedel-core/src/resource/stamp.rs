//! File stamps: a file's identity (kind, size, modification time, inode)
//! as one string, so that Lisp can tell an unchanged file from a changed
//! one for many files in one call instead of one `file-attributes` each
//! (the prompt's components check every file they cache, every turn).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The stamp of PATH (links followed), or None when it does not exist.
/// Equal stamps mean the file was not changed as far as `stat` can tell.
pub fn stamp(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let kind = if meta.is_file() {
        'f'
    } else if meta.is_dir() {
        'd'
    } else {
        'o'
    };
    Some(format!(
        "{kind}:{}:{}.{}:{}",
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ino()
    ))
}

#[cfg(test)]
mod tests {
    use super::stamp;

    #[test]
    fn stamps_tell_kind_and_change() {
        let dir = std::env::temp_dir().join(format!("mevedel-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let file = dir.join("a.txt");
        std::fs::write(&file, "one").ok();
        let first = stamp(&file).unwrap_or_default();
        assert!(first.starts_with("f:3:"));
        assert!(stamp(&dir).is_some_and(|s| s.starts_with("d:")));
        std::fs::write(&file, "three").ok();
        assert_ne!(stamp(&file).unwrap_or_default(), first);
        assert_eq!(stamp(&dir.join("missing")), None);
        std::fs::remove_dir_all(&dir).ok();
    }
}
