//! Files as every search and Read sees them: resolved names, regular
//! files opened without blocking, and one page of a file or directory.

use std::fs::File;
use std::io::{BufReader, Read as _, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, ErrorKind};
use crate::page::{self, PageRequest};

/// Directory names never listed or searched, at any depth.
pub const VCS_DIRS: [&str; 6] = [".git", ".svn", ".hg", ".bzr", ".jj", ".sl"];

fn fail(message: String) -> Error {
    Error::new(ErrorKind::Resource, message)
}

/// Most bytes read from a file under `/proc` or `/sys`: their sizes say
/// 0 and some never end.
const PSEUDO_FILE_LIMIT: u64 = 16 * 1024 * 1024;

/// Open PATH for reading if it is a regular file, else fail at once with
/// `InvalidInput` ("not a regular file"). A FIFO, socket or device is
/// never opened in a way that could block or act (a FIFO without a writer
/// would block `open`, a tape device rewinds): the type is checked before
/// opening, and again on the open file (it may have been swapped in), which
/// stays non-blocking, so a pseudo-file with nothing to say (`/proc/kmsg`)
/// fails its read instead of waiting.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular =
        || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// Whether PATH is a kernel pseudo-file, read with a size bound.
fn pseudo_file(path: &Path) -> bool {
    path.starts_with("/proc") || path.starts_with("/sys")
}

/// Read a text file at PATH, naming it ADDRESS in everything it says.
pub fn read_file(path: &Path, address: &str, req: &PageRequest) -> Result<String, Error> {
    let open = |e: std::io::Error| {
        fail(format!(
            "Read `{address}`: cannot open it: {}",
            io_reason(&e)
        ))
    };
    let mut file = open_regular(path).map_err(open)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut head = Vec::with_capacity(8192);
    (&mut file)
        .take(8192)
        .read_to_end(&mut head)
        .map_err(open)?;
    if head.contains(&0) {
        return Err(fail(format!(
            "Read `{address}`: this is a binary file ({size} bytes); Read shows text only"
        )));
    }
    file.seek(SeekFrom::Start(0)).map_err(open)?;
    let limit = if pseudo_file(path) {
        PSEUDO_FILE_LIMIT
    } else {
        u64::MAX
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file.take(limit));
    page::page(&mut reader, req, address, true)
}

pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "it does not exist".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::InvalidInput => e.to_string(),
        std::io::ErrorKind::WouldBlock => "it has nothing to read now".into(),
        _ => e.kind().to_string(),
    }
}

/// Read an ordinary filesystem PATH shown to the model as DISPLAY.
pub fn read_path(path: &Path, display: &str, req: &PageRequest) -> Result<String, Error> {
    let meta = std::fs::metadata(path)
        .map_err(|e| fail(format!("Read `{display}`: {}", io_reason(&e))))?;
    if meta.is_dir() {
        let text = list_dir_one_level(path, display)?;
        return page::page(&mut text.as_bytes(), req, display, false);
    }
    if !meta.is_file() {
        return Err(fail(format!(
            "Read `{display}`: it is not a regular file (a FIFO, socket or device); Read shows \
             files and directories only"
        )));
    }
    read_file(path, display, req)
}

fn list_dir_one_level(path: &Path, display: &str) -> Result<String, Error> {
    let entries = std::fs::read_dir(path).map_err(|e| {
        fail(format!(
            "Read `{display}`: cannot list it: {}",
            io_reason(&e)
        ))
    })?;
    let mut names: Vec<String> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().to_string_lossy().into_owned();
            let ft = e.file_type().ok()?;
            Some(if ft.is_symlink() {
                format!("{name}@")
            } else if ft.is_dir() {
                format!("{name}/")
            } else {
                name
            })
        })
        .collect();
    names.sort();
    if names.is_empty() {
        return Ok(format!("(`{display}` is an empty directory.)\n"));
    }
    let mut out = format!(
        "Directory `{display}` ({} entries; `/` marks directories, `@` symbolic links, which are not followed):\n",
        names.len()
    );
    for n in names {
        out.push_str(&n);
        out.push('\n');
    }
    Ok(out)
}

/// Most symbolic links followed while resolving one path (as the
/// kernel's own limit).
const MAX_LINKS: usize = 40;

/// PATH (absolute) with every symbolic link resolved, as Emacs's
/// `file-truename` resolves it: components that do not exist are kept
/// as written, and a dangling link resolves to where it points. A patch
/// target is compared with protected files through this, so a link to
/// one (even a missing one) is caught. A loop of links stops resolving.
pub fn truename(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    let mut pending: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .map(|c| c.as_os_str().to_owned())
        .collect();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        let part = Path::new(&part);
        match part.components().next() {
            Some(Component::RootDir) => out = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::Normal(name)) => {
                let next = out.join(name);
                let link = std::fs::symlink_metadata(&next)
                    .is_ok_and(|m| m.file_type().is_symlink())
                    .then(|| std::fs::read_link(&next).ok())
                    .flatten();
                match link {
                    Some(target) if links < MAX_LINKS => {
                        links += 1;
                        pending.extend(target.components().rev().map(|c| c.as_os_str().to_owned()));
                    }
                    _ => out = next,
                }
            }
            _ => {}
        }
    }
    out
}
