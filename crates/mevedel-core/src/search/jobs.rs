//! Background runs of Read, Glob and Grep (and of the edited-file
//! reminder's diffs), answered through the event channel so Emacs never
//! waits, and cancellable by request id.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::budget::Budget;
use super::{Plan, grep};
use crate::datum::Datum;
use crate::error::{Error, ErrorKind};
use crate::media;
use crate::patch::diff;
use crate::resource::page::PageRequest;
use crate::resource::prepare::Attempt;
use crate::resource::read;
use crate::runtime;

pub enum ReadTarget {
    Attempt(Arc<Attempt>),
    /// An ordinary path and how the caller spelled it.
    Path(PathBuf, String),
    /// The text of a modified Emacs buffer standing in for the file
    /// spelled DISPLAY, and whether that file is new.
    Buffer {
        text: Vec<u8>,
        display: String,
        new: bool,
    },
    /// A document of mevedel's own (a conversation) named DISPLAY.
    Text {
        text: Vec<u8>,
        display: String,
    },
}

pub enum Job {
    /// A page of text, or an image or PDF as the media request asks.
    Read(ReadTarget, PageRequest, media::Request),
    Grep(Plan, grep::Options),
    Glob(Plan, String),
    /// The diffs of changed files within a budget of characters for
    /// all of them (the edited-file reminder).
    Diffs(Vec<diff::FileChange>, usize),
}

static RUNNING: Mutex<Option<HashMap<i64, Arc<AtomicBool>>>> = Mutex::new(None);

fn with_running<T>(f: impl FnOnce(&mut HashMap<i64, Arc<AtomicBool>>) -> T) -> T {
    let mut guard = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    f(guard.get_or_insert_with(HashMap::new))
}

/// Run JOB now, on this thread.
pub fn run(job: &Job, budget: &Budget) -> Result<Datum, Error> {
    match job {
        Job::Read(target, req, wanted) => {
            if let Some((path, address)) = media_file(target)
                && let Some(kind) = media::kind(path, address)
            {
                return Ok(media::read(path, address, kind, wanted, budget)?.datum());
            }
            let text = match target {
                ReadTarget::Attempt(a) => read::read_attempt(a, req)?,
                ReadTarget::Path(path, display) => read::read_path(path, display, req)?,
                ReadTarget::Buffer { text, display, new } => {
                    read::read_buffer(text, display, *new, req)?
                }
                ReadTarget::Text { text, display } => read::read_text(text, display, req)?,
            };
            if let Some((svg, address)) = svg_source(target, req, wanted) {
                return Ok(media::svg::with_rendering(text, svg, address, wanted).datum());
            }
            Ok(Datum::plist([("text", Datum::Str(text))]))
        }
        Job::Grep(plan, opts) => page_datum(super::grep(plan, opts, budget)?),
        Job::Glob(plan, pattern) => page_datum(super::glob(plan, pattern, budget)?),
        Job::Diffs(changes, limit) => {
            let diffs = diff::changes(changes, *limit, || budget.cancelled());
            if budget.cancelled() {
                return Err(Error::new(ErrorKind::Search, "the diffs were cancelled"));
            }
            Ok(Datum::plist([(
                "diffs",
                Datum::List(diffs.into_iter().map(Datum::opt_str).collect()),
            )]))
        }
    }
}

/// The file TARGET reads, and its name, when it is one file on disk
/// (which may be an image or PDF).
fn media_file(target: &ReadTarget) -> Option<(&std::path::Path, &str)> {
    match target {
        ReadTarget::Attempt(a) => read::attempt_file(a).map(|p| (p, a.authored.as_str())),
        ReadTarget::Path(path, display) if path.is_file() => Some((path.as_path(), display)),
        _ => None,
    }
}

/// The SVG TARGET holds and its name, when a Read of its first page
/// (REQ) for a model that takes images (WANTED) draws it: a file's
/// bytes, or a modified buffer's text.
fn svg_source<'a>(
    target: &'a ReadTarget,
    req: &PageRequest,
    wanted: &media::Request,
) -> Option<(Result<Vec<u8>, String>, &'a str)> {
    let first_page = req.offset.unwrap_or(1) <= 1 && req.char_offset.unwrap_or(0) == 0;
    if !(first_page && media::svg::wanted(wanted)) {
        return None;
    }
    match target {
        ReadTarget::Buffer { text, display, .. } if media::svg::is_svg(display) => {
            Some((Ok(text.clone()), display))
        }
        _ => media_file(target)
            .filter(|(_, address)| media::svg::is_svg(address))
            .map(|(path, address)| (media::svg::load(path), address)),
    }
}

fn page_datum(p: super::output::Page) -> Result<Datum, Error> {
    Ok(Datum::plist([
        ("text", Datum::Str(p.text)),
        ("total", Datum::Int(p.total as i64)),
        ("shown", Datum::Int(p.shown as i64)),
        ("partial", Datum::bool(p.partial)),
    ]))
}

/// Start JOB on a background thread; its `reply` event for request ID
/// carries the result. TIMEOUT ends a search with partial results.
pub fn start(id: i64, job: Job, timeout: Option<Duration>) -> Result<(), Error> {
    let cancel = Arc::new(AtomicBool::new(false));
    with_running(|m| m.insert(id, Arc::clone(&cancel)));
    let running = Running(id);
    runtime::spawn_job(id, "search", None, move || {
        let _running = running;
        run(&job, &Budget::new(cancel, timeout))
    })
}

/// Request ID's entry among the running jobs, removed when the job is
/// done, has panicked or could not start, before any reply is sent.
struct Running(i64);

impl Drop for Running {
    fn drop(&mut self) {
        with_running(|m| m.remove(&self.0));
    }
}

/// Ask the job of request ID to stop; false when none is running.
pub fn cancel(id: i64) -> bool {
    with_running(|m| m.get(&id).map(|c| c.store(true, Ordering::Relaxed))).is_some()
}

/// How many jobs are running now.
pub fn running() -> usize {
    with_running(|m| m.len())
}
