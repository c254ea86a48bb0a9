//! Temporary directories for the unit tests, removed when dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh directory, canonical, removed on drop.
pub struct TestDir(PathBuf);

impl TestDir {
    pub fn new(tag: &str) -> TestDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("mevedel-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let path = std::fs::canonicalize(&path).unwrap();
        TestDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn mkdirs(&self, dirs: &[&str]) {
        for d in dirs {
            std::fs::create_dir_all(self.0.join(d)).unwrap_or_else(|e| panic!("{d}: {e}"));
        }
    }

    pub fn write(&self, file: &str, text: &str) {
        std::fs::write(self.0.join(file), text).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
