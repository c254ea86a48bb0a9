//! Read, Glob and Grep jobs: started here, answered by `reply` events,
//! cancellable by request id.
//!
//! The text of modified Emacs buffers crosses here once per call, one
//! string per buffer (see `crate::text`), and the job owns the copies.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use emacs::{Env, Result, Value, defun};
use mevedel_core::error::{Error, ErrorKind};
use mevedel_core::resource::page::PageRequest;
use mevedel_core::resource::prepare::Filter;
use mevedel_core::search::grep::{Mode, Options};
use mevedel_core::search::jobs::{self, Job, ReadTarget};
use mevedel_core::search::unsaved::{Buffer, Unsaved};
use mevedel_core::search::{Naming, Plan, Root};

use crate::convert;
use crate::errors::OrSignal;
use crate::guard::guarded;
use crate::resource::AttemptPtr;
use crate::text::copy_exact;

fn attempt_of(v: Value<'_>) -> Result<Option<Arc<mevedel_core::resource::Attempt>>> {
    if v.is_not_nil() {
        Ok(Some(Arc::clone(&*v.into_ref::<AttemptPtr>()?)))
    } else {
        Ok(None)
    }
}

/// A buffer's text (a string) as bytes.
fn buffer_text(env: &Env, text: Value<'_>) -> Result<Vec<u8>> {
    Ok(copy_exact(env, text)?.bytes().to_vec())
}

/// The modified buffers in LIST, items (TRUENAME TEXT NEW-P).
fn unsaved_of(env: &Env, list: Value<'_>) -> Result<Unsaved> {
    let mut out = Vec::new();
    for item in convert::list_items(list)? {
        let truename: String = item.car()?;
        let rest = item.cdr::<Value>()?;
        let text = buffer_text(env, rest.car()?)?;
        let new = rest.cdr::<Value>()?.car::<Value>()?.is_not_nil();
        out.push((PathBuf::from(truename), Buffer::of_file(text, new)));
    }
    Ok(Unsaved::new(out))
}

/// The plan for ATTEMPT, or for the ordinary PATH shown as DISPLAY,
/// with the modified buffers UNSAVED standing in for their files. A
/// PATH that exists only as one of them is searched as that file.
fn plan(
    env: &Env,
    attempt: Value<'_>,
    path: Option<String>,
    display: Option<String>,
    unsaved: Unsaved,
) -> Result<Plan> {
    match attempt_of(attempt)? {
        Some(a) => {
            let plan = Plan::for_attempt(&a).or_signal(env)?;
            Ok(Plan { unsaved, ..plan })
        }
        None => {
            let path = PathBuf::from(path.unwrap_or_default());
            let truename = mevedel_core::resource::contain::truename(&path);
            if unsaved.get(&truename).is_some_and(|b| b.new) {
                let root = Root {
                    base: path.parent().map(PathBuf::from).unwrap_or_default(),
                    file: Some((path, display.unwrap_or_default())),
                    naming: Naming::Plain(String::new()),
                    filter: Filter::Any,
                    empty_note: None,
                };
                return Ok(Plan {
                    unsaved,
                    ..Plan::ordinary(root)
                });
            }
            let problem = match std::fs::metadata(&path) {
                Err(_) => Some("does not exist"),
                Ok(m) if !m.is_file() && !m.is_dir() => {
                    Some("is not a regular file or directory (a FIFO, socket or device)")
                }
                Ok(_) => None,
            };
            if let Some(problem) = problem {
                let shown = display.unwrap_or_default();
                return Err(Error::new(
                    ErrorKind::Search,
                    format!("`{shown}` {problem}"),
                ))
                .or_signal(env);
            }
            Ok(Plan {
                unsaved,
                ..Plan::ordinary(Root::ordinary(&path, &display.unwrap_or_default()))
            })
        }
    }
}

fn timeout(ms: i64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms as u64))
}

/// Read ATTEMPT (or the ordinary PATH shown as DISPLAY) in the
/// background; the reply for request ID is (:text TEXT). UNSAVED, when
/// non-nil, is (TEXT . NEW-P): the text of the modified buffer visiting
/// the file, read instead of it.
#[defun(name = "resource-read")]
#[allow(clippy::too_many_arguments)]
fn resource_read(
    env: &Env,
    id: i64,
    attempt: Value<'_>,
    path: Option<String>,
    display: Option<String>,
    offset: Option<i64>,
    limit: Option<i64>,
    char_offset: Option<i64>,
    unsaved: Value<'_>,
) -> Result<()> {
    guarded(env, || {
        let target = match attempt_of(attempt)? {
            _ if unsaved.is_not_nil() => ReadTarget::Buffer {
                text: buffer_text(env, unsaved.car()?)?,
                display: display.unwrap_or_default(),
                new: unsaved.cdr::<Value>()?.is_not_nil(),
            },
            Some(a) => ReadTarget::Attempt(a),
            None => ReadTarget::Path(
                PathBuf::from(path.unwrap_or_default()),
                display.unwrap_or_default(),
            ),
        };
        let req = PageRequest {
            offset,
            limit,
            char_offset,
        };
        jobs::start(id, Job::Read(target, req), None).or_signal(env)
    })
}

/// The Grep options of OPTIONS, a list (PATTERN GLOB TYPE MODE BEFORE
/// AFTER CASE-INSENSITIVE LINE-NUMBERS MULTILINE HEAD-LIMIT OFFSET).
fn grep_options(env: &Env, options: Value<'_>) -> Result<Options> {
    let mut o = Vec::new();
    let mut rest = options;
    while rest.is_not_nil() {
        o.push(rest.car::<Value>()?);
        rest = rest.cdr()?;
    }
    if o.len() != 11 {
        return Err(Error::new(
            ErrorKind::Internal,
            "search-grep: OPTIONS needs 11 items",
        ))
        .or_signal(env);
    }
    let s = |v: Value| -> Result<Option<String>> {
        if v.is_not_nil() {
            Ok(Some(v.into_rust()?))
        } else {
            Ok(None)
        }
    };
    let n = |v: Value| -> Result<i64> { if v.is_not_nil() { v.into_rust() } else { Ok(0) } };
    let mode_name = s(o[3])?.unwrap_or_else(|| "files_with_matches".into());
    let mode = Mode::from_name(&mode_name)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Search,
                format!(
                    "Grep: unknown output_mode `{mode_name}` (content, files_with_matches, count)"
                ),
            )
        })
        .or_signal(env)?;
    let mut nums = [0usize; 4];
    for (slot, (i, field)) in
        nums.iter_mut()
            .zip([(4, "-B"), (5, "-A"), (9, "head_limit"), (10, "offset")])
    {
        let v = n(o[i])?;
        if v < 0 {
            return Err(Error::new(
                ErrorKind::Search,
                format!("Grep: `{field}` must not be negative (got {v})"),
            ))
            .or_signal(env);
        }
        *slot = v as usize;
    }
    Ok(Options {
        pattern: s(o[0])?.unwrap_or_default(),
        glob: s(o[1])?,
        file_type: s(o[2])?,
        mode,
        before: nums[0],
        after: nums[1],
        case_insensitive: o[6].is_not_nil(),
        line_numbers: o[7].is_not_nil(),
        multiline: o[8].is_not_nil(),
        head_limit: nums[2],
        offset: nums[3],
    })
}

/// Grep in the background. OPTIONS is a list (PATTERN GLOB TYPE MODE
/// BEFORE AFTER CASE-INSENSITIVE LINE-NUMBERS MULTILINE HEAD-LIMIT
/// OFFSET); UNSAVED a list of (TRUENAME TEXT NEW-P), modified buffers
/// searched instead of their files; the reply for request ID is (:text
/// :total :shown :partial).
#[defun(name = "search-grep")]
#[allow(clippy::too_many_arguments)]
fn search_grep(
    env: &Env,
    id: i64,
    attempt: Value<'_>,
    path: Option<String>,
    display: Option<String>,
    options: Value<'_>,
    timeout_ms: i64,
    unsaved: Value<'_>,
) -> Result<()> {
    guarded(env, || {
        let unsaved = unsaved_of(env, unsaved)?;
        let plan = plan(env, attempt, path, display, unsaved)?;
        let opts = grep_options(env, options)?;
        jobs::start(id, Job::Grep(plan, opts), timeout(timeout_ms)).or_signal(env)
    })
}

/// Glob PATTERN in the background; NEW-FILES are the truenames of
/// files that exist only as unsaved buffers, listed when they match.
/// The reply for request ID is (:text :total :shown :partial).
#[defun(name = "search-glob")]
#[allow(clippy::too_many_arguments)]
fn search_glob(
    env: &Env,
    id: i64,
    attempt: Value<'_>,
    path: Option<String>,
    display: Option<String>,
    pattern: String,
    timeout_ms: i64,
    new_files: Value<'_>,
) -> Result<()> {
    guarded(env, || {
        let unsaved = Unsaved::new(
            convert::strings(new_files)?
                .into_iter()
                .map(|f| (PathBuf::from(f), Buffer::of_file(Vec::new(), true))),
        );
        let plan = plan(env, attempt, path, display, unsaved)?;
        jobs::start(id, Job::Glob(plan, pattern), timeout(timeout_ms)).or_signal(env)
    })
}

/// Read TEXT, a document of mevedel's own (a conversation) named
/// DISPLAY, in pages like a file; the reply for request ID is (:text TEXT).
#[defun(name = "resource-read-text")]
fn resource_read_text(
    env: &Env,
    id: i64,
    text: Value<'_>,
    display: String,
    offset: Option<i64>,
    limit: Option<i64>,
    char_offset: Option<i64>,
) -> Result<()> {
    guarded(env, || {
        let target = ReadTarget::Text {
            text: buffer_text(env, text)?,
            display,
        };
        let req = PageRequest {
            offset,
            limit,
            char_offset,
        };
        jobs::start(id, Job::Read(target, req), None).or_signal(env)
    })
}

/// Grep TEXTS, a list of (ADDRESS . TEXT) documents of mevedel's own,
/// each named by its address, in the background. OPTIONS are as for
/// `search-grep`; the reply for request ID is (:text :total :shown :partial).
#[defun(name = "search-grep-texts")]
fn search_grep_texts(
    env: &Env,
    id: i64,
    texts: Value<'_>,
    options: Value<'_>,
    timeout_ms: i64,
) -> Result<()> {
    guarded(env, || {
        let mut documents = Vec::new();
        for item in convert::list_items(texts)? {
            documents.push((item.car::<String>()?, buffer_text(env, item.cdr()?)?));
        }
        let opts = grep_options(env, options)?;
        jobs::start(
            id,
            Job::Grep(Plan::texts(documents), opts),
            timeout(timeout_ms),
        )
        .or_signal(env)
    })
}

/// Ask the job of request ID to stop. Returns non-nil if it was running.
#[defun(name = "search-cancel")]
fn search_cancel(env: &Env, id: i64) -> Result<bool> {
    guarded(env, || Ok(jobs::cancel(id)))
}

/// How many Read/Glob/Grep jobs are running.
#[defun(name = "search-running")]
fn search_running(env: &Env) -> Result<i64> {
    guarded(env, || Ok(jobs::running() as i64))
}
