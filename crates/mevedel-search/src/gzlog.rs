//! Retired execution logs stored as gzip, seen under their logical
//! names: `executions/RUN.log.gz` is `artifact://executions/RUN.log`.
//!
//! Read, Glob and Grep use the logical name and the uncompressed text;
//! the physical `.log.gz` name is never an address, and a plain
//! `RUN.log` beside it wins. Inflation is bounded per file and happens
//! only for the operation that needs it (nothing is cached).

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

/// Most uncompressed bytes one compressed log may give.
pub const INFLATE_LIMIT: u64 = 64 << 20;

const SUFFIX: &str = ".log.gz";

/// The logical name of physical file NAME, when it is a compressed log.
pub fn logical_name(name: &str) -> Option<&str> {
    name.strip_suffix(".gz").filter(|_| name.ends_with(SUFFIX))
}

/// Whether PATH is a compressed log.
pub fn is_compressed(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| logical_name(n).is_some())
}

/// The compressed file that may stand for logical PATH (`RUN.log`).
pub fn physical_for(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    name.ends_with(".log")
        .then(|| path.with_file_name(format!("{name}.gz")))
}

/// The logical path of compressed PATH, or None when a plain file of
/// that name exists (it wins, so the compressed one is hidden).
pub fn visible_logical(path: &Path) -> Option<PathBuf> {
    let logical = path.with_file_name(logical_name(path.file_name()?.to_str()?)?);
    (!logical.exists()).then_some(logical)
}

/// The uncompressed text of PATH, failing past LIMIT bytes.
pub fn open(path: &Path, limit: u64) -> io::Result<Inflated> {
    Ok(Inflated {
        inner: MultiGzDecoder::new(File::open(path)?),
        left: limit,
        limit,
    })
}

/// A bounded reader over a compressed log's text.
pub struct Inflated {
    inner: MultiGzDecoder<File>,
    left: u64,
    limit: u64,
}

impl Read for Inflated {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(format!(
                    "the compressed log inflates past the {} MiB view limit",
                    self.limit >> 20
                ))),
            };
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::*;

    fn write_gz(path: &Path, text: &[u8]) {
        let file = File::create(path).expect("write a test file");
        let mut enc = GzEncoder::new(file, Compression::default());
        enc.write_all(text).unwrap();
        enc.finish().unwrap();
    }

    #[test]
    fn names() {
        assert_eq!(logical_name("run.log.gz"), Some("run.log"));
        assert_eq!(logical_name("run.txt.gz"), None);
        assert_eq!(logical_name("run.log"), None);
        assert_eq!(
            physical_for(Path::new("/x/run.log")),
            Some(PathBuf::from("/x/run.log.gz"))
        );
        assert_eq!(physical_for(Path::new("/x/run.txt")), None);
    }

    #[test]
    fn inflation_is_bounded() {
        let dir = std::env::temp_dir().join(format!("mevedel-gzlog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.log.gz");
        write_gz(&p, &b"0123456789\n".repeat(100));
        let mut all = String::new();
        open(&p, 1100)
            .and_then(|mut r| r.read_to_string(&mut all))
            .unwrap();
        assert_eq!(all.len(), 1100);
        let err = open(&p, 1099)
            .and_then(|mut r| r.read_to_string(&mut String::new()))
            .expect_err("read past the limit");
        assert!(err.to_string().contains("view limit"), "{err}");
        assert_eq!(visible_logical(&p), Some(dir.join("a.log")));
        std::fs::write(dir.join("a.log"), "plain").unwrap();
        assert_eq!(visible_logical(&p), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
