//! Read, Glob and Grep jobs: started here, answered by `reply` events,
//! cancellable by request id.
//!
//! The text of modified Emacs buffers crosses here once per call, one
//! string per buffer (see `crate::text`), and the job owns the copies.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use emacs::{Env, Result, Value, defun};
use mevedel_core::media;
use mevedel_core::resource::page::PageRequest;
use mevedel_core::search::grep::{Asked, Options};
use mevedel_core::search::jobs::{self, Job, ReadTarget};
use mevedel_core::search::unsaved::{Buffer, Unsaved};
use mevedel_core::search::{Over, Plan, plan_for};

use crate::args::Plist;
use crate::errors::OrSignal;
use crate::guard::guarded;
use crate::resource::AttemptPtr;
use crate::text::copy_exact;

/// A buffer's text (a string) as bytes.
fn buffer_text(env: &Env, text: Value<'_>) -> Result<Vec<u8>> {
    Ok(copy_exact(env, text)?.bytes().to_vec())
}

/// What `:attempt` (an attempt) or else `:path`, shown as `:display`, name.
fn over(args: &mut Plist<'_>) -> Result<Over> {
    let attempt = args.value(":attempt")?;
    let path = args.opt_string(":path")?;
    let display = args.opt_string(":display")?.unwrap_or_default();
    Ok(match attempt {
        Some(a) => Over::Attempt(Arc::clone(&*a.into_ref::<AttemptPtr>()?)),
        None => Over::Path(PathBuf::from(path.unwrap_or_default()), display),
    })
}

/// The modified buffers in LIST, items (TRUENAME TEXT NEW-P).
fn unsaved_of(env: &Env, list: Vec<Value<'_>>) -> Result<Unsaved> {
    let mut out = Vec::new();
    for item in list {
        let truename: String = item.car()?;
        let rest = item.cdr::<Value>()?;
        let text = buffer_text(env, rest.car()?)?;
        let new = rest.cdr::<Value>()?.car::<Value>()?.is_not_nil();
        out.push((PathBuf::from(truename), Buffer::of_file(text, new)));
    }
    Ok(Unsaved::new(out))
}

/// The page a Read asks for: the `:offset`, `:limit` and `:char-offset` of ARGS.
fn page(args: &mut Plist<'_>) -> Result<PageRequest> {
    Ok(PageRequest {
        offset: args.opt_int(":offset")?,
        limit: args.opt_int(":limit")?,
        char_offset: args.opt_int(":char-offset")?,
    })
}

/// The Grep options of the plist OPTIONS (see `search-grep`).
fn grep_options(env: &Env, mut options: Plist<'_>) -> Result<Options> {
    let asked = Asked {
        pattern: options.opt_string(":pattern")?.unwrap_or_default(),
        glob: options.opt_string(":glob")?,
        file_type: options.opt_string(":type")?,
        mode: options.opt_string(":output-mode")?,
        before: options.opt_int(":before")?.unwrap_or(0),
        after: options.opt_int(":after")?.unwrap_or(0),
        case_insensitive: options.bool(":case-insensitive")?,
        line_numbers: options.bool(":line-numbers")?,
        multiline: options.bool(":multiline")?,
        head_limit: options.opt_int(":head-limit")?.unwrap_or(0),
        offset: options.opt_int(":offset")?.unwrap_or(0),
    };
    options.finish()?;
    Options::check(asked).or_signal(env)
}

/// A crop box (X Y WIDTH HEIGHT) in pixels, or None for an empty list.
fn crop(list: Vec<Value<'_>>) -> Result<Option<[u32; 4]>> {
    if list.is_empty() {
        return Ok(None);
    }
    let mut out = [0u32; 4];
    for (slot, value) in out.iter_mut().zip(list) {
        *slot = value.into_rust::<i64>()?.clamp(0, i64::from(u32::MAX)) as u32;
    }
    Ok(Some(out))
}

fn timeout(ms: i64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms as u64))
}

/// Read in the background; the reply for request ID is (:text TEXT).
/// ARGS: `:attempt` (a prepared attempt) or `:path` (an ordinary file
/// name), `:display` (how the model spelled it), `:offset`, `:limit`,
/// `:char-offset`, and `:unsaved`, when non-nil (TEXT . NEW-P): the
/// text of the modified buffer visiting the file, read instead of it.
/// An image or PDF answers (:text TEXT :media LIST) instead (see
/// `mevedel_core::media`), as `:pages` (a page list like "3-5"),
/// `:render` (render pages as images), `:accepts` (the image types the
/// model takes), `:max-side` (longest side of a sent image) and `:crop`
/// ((X Y WIDTH HEIGHT), the part of an image to send) ask.
#[defun(name = "resource-read")]
fn resource_read(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "resource-read", args)?;
        let attempt = args.value(":attempt")?;
        let path = args.opt_string(":path")?;
        let display = args.opt_string(":display")?.unwrap_or_default();
        let req = page(&mut args)?;
        let unsaved = args.value(":unsaved")?;
        let wanted = media::Request {
            pages: args.opt_string(":pages")?,
            render: args.bool(":render")?,
            accepts: args.strings(":accepts")?,
            max_side: args.opt_int(":max-side")?.unwrap_or(0).clamp(0, 8000) as u32,
            crop: crop(args.list(":crop")?)?,
        };
        args.finish()?;
        let target = match (unsaved, attempt) {
            (Some(unsaved), _) => ReadTarget::Buffer {
                text: buffer_text(env, unsaved.car()?)?,
                display,
                new: unsaved.cdr::<Value>()?.is_not_nil(),
            },
            (None, Some(a)) => ReadTarget::Attempt(Arc::clone(&*a.into_ref::<AttemptPtr>()?)),
            (None, None) => ReadTarget::Path(PathBuf::from(path.unwrap_or_default()), display),
        };
        jobs::start(id, Job::Read(target, req, wanted), None).or_signal(env)
    })
}

/// Grep in the background; the reply for request ID is (:text :total
/// :shown :partial). ARGS: `:attempt` or `:path` and `:display` as for
/// `resource-read`, `:options` (a plist of :pattern :glob :type
/// :output-mode :before :after :case-insensitive :line-numbers
/// :multiline :head-limit :offset), `:timeout-ms` (0 or absent: none)
/// and `:unsaved`, a list of (TRUENAME TEXT NEW-P): modified buffers
/// searched instead of their files.
#[defun(name = "search-grep")]
fn search_grep(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "search-grep", args)?;
        let over = over(&mut args)?;
        let options = args.plist(":options")?;
        let timeout_ms = args.opt_int(":timeout-ms")?.unwrap_or(0);
        let unsaved = unsaved_of(env, args.list(":unsaved")?)?;
        args.finish()?;
        let opts = grep_options(env, options)?;
        let plan = plan_for(&over, unsaved).or_signal(env)?;
        jobs::start(id, Job::Grep(plan, opts), timeout(timeout_ms)).or_signal(env)
    })
}

/// Glob in the background; the reply for request ID is (:text :total
/// :shown :partial). ARGS: `:attempt` or `:path` and `:display` as for
/// `resource-read`, `:pattern`, `:timeout-ms`, and `:new-files`, the
/// truenames of files that exist only as unsaved buffers, listed when
/// they match.
#[defun(name = "search-glob")]
fn search_glob(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "search-glob", args)?;
        let over = over(&mut args)?;
        let pattern = args.opt_string(":pattern")?.unwrap_or_default();
        let timeout_ms = args.opt_int(":timeout-ms")?.unwrap_or(0);
        let new_files = args.strings(":new-files")?;
        args.finish()?;
        let unsaved = Unsaved::new(
            new_files
                .into_iter()
                .map(|f| (PathBuf::from(f), Buffer::of_file(Vec::new(), true))),
        );
        let plan = plan_for(&over, unsaved).or_signal(env)?;
        jobs::start(id, Job::Glob(plan, pattern), timeout(timeout_ms)).or_signal(env)
    })
}

/// Read a document of mevedel's own (a conversation) in pages like a
/// file; the reply for request ID is (:text TEXT). ARGS: `:text`,
/// `:display` (its name) and the page as for `resource-read`.
#[defun(name = "resource-read-text")]
fn resource_read_text(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "resource-read-text", args)?;
        let text = args.required(":text", "a string")?;
        let display = args.string(":display")?;
        let req = page(&mut args)?;
        args.finish()?;
        let target = ReadTarget::Text {
            text: buffer_text(env, text)?,
            display,
        };
        jobs::start(id, Job::Read(target, req, media::Request::default()), None).or_signal(env)
    })
}

/// Grep documents of mevedel's own in the background; the reply for
/// request ID is (:text :total :shown :partial). ARGS: `:texts`, a list
/// of (ADDRESS . TEXT), each searched as one file named ADDRESS, and
/// `:options` and `:timeout-ms` as for `search-grep`.
#[defun(name = "search-grep-texts")]
fn search_grep_texts(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "search-grep-texts", args)?;
        let texts = args.list(":texts")?;
        let options = args.plist(":options")?;
        let timeout_ms = args.opt_int(":timeout-ms")?.unwrap_or(0);
        args.finish()?;
        let mut documents = Vec::new();
        for item in texts {
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
