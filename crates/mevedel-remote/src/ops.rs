//! The helper's operations, each from a JSON argument object to a JSON
//! answer, over the same search and read code the local core runs.

use std::ffi::OsString;
use std::io::{Read as _, Seek, SeekFrom, Write as _};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use mevedel_search::budget::Budget;
use mevedel_search::error::{Error, ErrorKind};
use mevedel_search::files;
use mevedel_search::grep::{Asked, Options};
use mevedel_search::output::Page;
use mevedel_search::page::PageRequest;
use mevedel_search::plan::{self, Plan};
use mevedel_search::unsaved::{Buffer, Unsaved};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Most bytes one `read` with `bytes` answers (media pages are smaller).
const BYTES_CAP: u64 = 64 << 20;

/// Run OP with ARGS; CANCEL stops a search early.
pub fn run(op: &str, args: &Value, cancel: Arc<AtomicBool>) -> Result<Value, Error> {
    let a = Args(args);
    match op {
        "glob" => glob(&a, cancel),
        "grep" => grep(&a, cancel),
        "read" => read(&a),
        "write" => write(&a),
        "exec_start" => exec_start(&a),
        "exec_poll" => crate::exec::poll(
            a.run()?,
            a.int("offset").unwrap_or(0).max(0) as u64,
            Duration::from_millis(a.int("yield_time_ms").unwrap_or(0).max(0) as u64),
        ),
        "exec_stdin" => crate::exec::write_stdin(
            a.run()?,
            a.str("data").unwrap_or_default().as_bytes(),
            a.flag("close"),
        ),
        "exec_signal" => crate::exec::signal(a.run()?, &a.str("signal").unwrap_or_default()),
        "exec_stop" => crate::exec::stop(a.run()?),
        "write_all" => write_all(&a),
        _ => Err(Error::new(
            ErrorKind::Internal,
            format!("the remote helper has no operation `{op}`"),
        )),
    }
}

/// A request's argument object, read leniently: absent means default.
struct Args<'a>(&'a Value);

impl Args<'_> {
    fn str(&self, key: &str) -> Option<String> {
        self.0.get(key).and_then(Value::as_str).map(str::to_string)
    }
    fn int(&self, key: &str) -> Option<i64> {
        self.0.get(key).and_then(Value::as_i64)
    }
    fn flag(&self, key: &str) -> bool {
        self.0
            .get(key)
            .is_some_and(|v| v.as_bool().unwrap_or(!v.is_null()))
    }
    fn strings(&self, key: &str) -> Vec<String> {
        self.0
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    }
    fn path(&self) -> Result<PathBuf, Error> {
        self.str("path")
            .filter(|p| p.starts_with('/'))
            .map(PathBuf::from)
            .ok_or_else(|| Error::new(ErrorKind::Internal, "`path` must be an absolute host path"))
    }
    fn run(&self) -> Result<u64, Error> {
        self.0
            .get("run")
            .and_then(Value::as_u64)
            .ok_or_else(|| Error::new(ErrorKind::Internal, "`run` must name an execution"))
    }
    fn display(&self) -> String {
        self.str("display").unwrap_or_default()
    }
    fn budget(&self, cancel: Arc<AtomicBool>) -> Budget {
        let timeout = self
            .int("timeout_ms")
            .filter(|ms| *ms > 0)
            .map(|ms| Duration::from_millis(ms as u64));
        Budget::new(cancel, timeout)
    }
}

/// Start a command: `argv` run as it is, else the shell `command`.
fn exec_start(a: &Args) -> Result<Value, Error> {
    let bad = |m: &str| Error::new(ErrorKind::Internal, m.to_string());
    if a.flag("tty") {
        return Err(Error::new(
            ErrorKind::Exec,
            "a terminal (tty) is not available for commands on remote hosts",
        ));
    }
    let argv = match a.0.get("argv") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(OsString::from))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("`argv` must be an array of strings"))?,
        Some(_) => return Err(bad("`argv` must be an array of strings")),
        None => crate::exec::shell(&a.str("command").unwrap_or_default()),
    };
    let env = a
        .strings("env")
        .into_iter()
        .map(|pair| {
            pair.split_once('=')
                .filter(|(name, _)| !name.is_empty())
                .map(|(name, value)| (OsString::from(name), OsString::from(value)))
                .ok_or_else(|| bad(&format!("`env` entry `{pair}` is not NAME=VALUE")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    crate::exec::start(crate::exec::Start {
        argv,
        cwd: a.path()?,
        env,
        spool_dir: a.str("spool_dir").map_or_else(
            || std::env::temp_dir().join("mevedel-remote"),
            PathBuf::from,
        ),
        sandbox: crate::exec::Sandbox {
            mode: a.str("sandbox").unwrap_or_else(|| "required".into()),
            writable: a
                .strings("writable")
                .into_iter()
                .map(PathBuf::from)
                .collect(),
        },
        stream: a.flag("stream"),
    })
}

fn page_json(p: Page) -> Value {
    json!({"text": p.text, "total": p.total, "shown": p.shown, "partial": p.partial})
}

fn glob(a: &Args, cancel: Arc<AtomicBool>) -> Result<Value, Error> {
    let new_files =
        a.0.get("new_files")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|f| (PathBuf::from(f), Buffer::of_file(Vec::new(), true)));
    let plan = Plan::for_path(&a.path()?, &a.display(), Unsaved::new(new_files))?;
    let pattern = a.str("pattern").unwrap_or_default();
    Ok(page_json(plan::glob(&plan, &pattern, &a.budget(cancel))?))
}

fn grep(a: &Args, cancel: Arc<AtomicBool>) -> Result<Value, Error> {
    let o = Args(a.0.get("options").unwrap_or(&Value::Null));
    let asked = Asked {
        pattern: o.str("pattern").unwrap_or_default(),
        glob: o.str("glob"),
        file_type: o.str("type"),
        mode: o.str("output_mode"),
        before: o.int("before").unwrap_or(0),
        after: o.int("after").unwrap_or(0),
        case_insensitive: o.flag("case_insensitive"),
        line_numbers: o.flag("line_numbers"),
        multiline: o.flag("multiline"),
        head_limit: o.int("head_limit").unwrap_or(0),
        offset: o.int("offset").unwrap_or(0),
    };
    let opts = Options::check(asked)?;
    // Each unsaved buffer is [TRUENAME, TEXT, NEW].
    let unsaved =
        a.0.get("unsaved")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|b| {
                let name = b.get(0)?.as_str()?;
                let text = b.get(1)?.as_str()?;
                let new = b.get(2).is_some_and(|n| n.as_bool().unwrap_or(false));
                Some((
                    PathBuf::from(name),
                    Buffer::of_file(text.as_bytes().to_vec(), new),
                ))
            });
    let plan = Plan::for_path(&a.path()?, &a.display(), Unsaved::new(unsaved))?;
    Ok(page_json(plan::grep(&plan, &opts, &a.budget(cancel))?))
}

fn read(a: &Args) -> Result<Value, Error> {
    let path = a.path()?;
    if a.flag("bytes") {
        return read_bytes(a, &path);
    }
    let req = PageRequest {
        offset: a.int("offset"),
        limit: a.int("limit"),
        char_offset: a.int("char_offset"),
    };
    Ok(json!({"text": files::read_path(&path, &a.display(), &req)?}))
}

/// Bytes START.. (at most LENGTH) of the regular file at PATH.
fn read_bytes(a: &Args, path: &Path) -> Result<Value, Error> {
    let fail = |e: std::io::Error| {
        Error::new(
            ErrorKind::Resource,
            format!("Read `{}`: {}", a.display(), files::io_reason(&e)),
        )
    };
    let mut file = files::open_regular(path).map_err(fail)?;
    let size = file.metadata().map_err(fail)?.len();
    let start = a.int("start").unwrap_or(0).max(0) as u64;
    let length = a
        .int("length")
        .map_or(BYTES_CAP, |l| l.max(0) as u64)
        .min(BYTES_CAP);
    file.seek(SeekFrom::Start(start)).map_err(fail)?;
    let mut data = Vec::new();
    file.take(length).read_to_end(&mut data).map_err(fail)?;
    Ok(json!({"data": B64.encode(&data), "size": size}))
}

/// The lowercase hex SHA-256 of BYTES.
pub fn hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Replace the file at PATH with `data` atomically: written beside it,
/// synced, given the old file's mode, then renamed over it. With
/// `expect_hash`, the file must still hash to it (the empty string: it
/// must not exist), so a change made since the caller looked is never
/// overwritten.
fn write(a: &Args) -> Result<Value, Error> {
    let path = a.path()?;
    let fail = |doing: &str, e: &std::io::Error| {
        Error::new(
            ErrorKind::Patch,
            format!("{doing} `{}`: {}", path.display(), files::io_reason(e)),
        )
    };
    let data = B64
        .decode(a.str("data").unwrap_or_default())
        .map_err(|e| Error::new(ErrorKind::Internal, format!("`data` is not base64: {e}")))?;
    let old = std::fs::read(&path);
    if let Some(expected) = a.str("expect_hash") {
        let now = match &old {
            Ok(bytes) => hash(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(fail("Cannot read", e)),
        };
        if now != expected {
            return Err(Error::new(
                ErrorKind::Patch,
                format!(
                    "`{}` changed on the remote host since it was read; read it again",
                    path.display()
                ),
            ));
        }
    }
    let mode = std::fs::metadata(&path)
        .ok()
        .map(|m| m.permissions().mode());
    let temp = crate::batch::beside(&path, "");
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        f.write_all(&data)?;
        if let Some(mode) = mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.sync_all()?;
        std::fs::rename(&temp, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(fail("Cannot write", &e));
    }
    Ok(json!({"hash": hash(&data), "size": data.len()}))
}

/// `write_all` `{files: [{path, data (base64) | delete, expect_hash,
/// mode}]}`: all of them or none (see [`crate::batch`]).
fn write_all(a: &Args) -> Result<Value, Error> {
    let bad = |m: String| Error::new(ErrorKind::Internal, m);
    let files =
        a.0.get("files")
            .and_then(Value::as_array)
            .filter(|f| !f.is_empty())
            .ok_or_else(|| bad("`files` must be a non-empty array".into()))?;
    let changes = files
        .iter()
        .map(|f| {
            let f = Args(f);
            let path = f.path()?;
            let data = if f.flag("delete") {
                None
            } else {
                Some(B64.decode(f.str("data").unwrap_or_default()).map_err(|e| {
                    bad(format!("`data` of `{}` is not base64: {e}", path.display()))
                })?)
            };
            Ok(crate::batch::Change {
                path,
                data,
                expect: f.str("expect_hash"),
                mode: f.int("mode").and_then(|m| u32::try_from(m).ok()),
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    crate::batch::apply(&changes)
}

#[cfg(test)]
mod tests;
