//! Grep in-process: the `ignore` walker feeding `grep-searcher` with a
//! `grep-regex` matcher, configured like ripgrep with `--hidden`.

use std::io;
use std::sync::{Condvar, Mutex};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::overrides::Override;
use ignore::types::Types;

use super::budget::{Budget, BudgetReader};
use super::output::Found;
use super::unsaved::{self, Unsaved};
use super::walk::{self, Root};
use crate::error::{Error, ErrorKind};
use crate::gzlog;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Content,
    FilesWithMatches,
    Count,
}

impl Mode {
    pub fn from_name(name: &str) -> Option<Mode> {
        match name {
            "content" => Some(Mode::Content),
            "files_with_matches" => Some(Mode::FilesWithMatches),
            "count" => Some(Mode::Count),
            _ => None,
        }
    }
}

/// Longest line text shown in content mode; longer lines say how to
/// read the rest.
pub const LINE_PREVIEW: usize = 1000;

#[derive(Debug, Clone)]
pub struct Options {
    pub pattern: String,
    pub glob: Option<String>,
    pub file_type: Option<String>,
    pub mode: Mode,
    pub before: usize,
    pub after: usize,
    pub case_insensitive: bool,
    pub line_numbers: bool,
    pub multiline: bool,
    /// 0 means unlimited.
    pub head_limit: usize,
    pub offset: usize,
}

/// Grep options as the caller gave them, before they are checked:
/// the output mode by name (`files_with_matches` when absent) and the
/// counts as signed numbers.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub pattern: String,
    pub glob: Option<String>,
    pub file_type: Option<String>,
    pub mode: Option<String>,
    pub before: i64,
    pub after: i64,
    pub case_insensitive: bool,
    pub line_numbers: bool,
    pub multiline: bool,
    pub head_limit: i64,
    pub offset: i64,
}

impl Options {
    /// The options ASKED names, or an error for the model naming an
    /// unknown output mode or a negative count.
    pub fn check(asked: Asked) -> Result<Options, Error> {
        let mode_name = asked.mode.as_deref().unwrap_or("files_with_matches");
        let mode = Mode::from_name(mode_name).ok_or_else(|| {
            Error::new(
                ErrorKind::Search,
                format!(
                    "Grep: unknown output_mode `{mode_name}` (content, files_with_matches, count)"
                ),
            )
        })?;
        let count = |field: &str, n: i64| {
            usize::try_from(n).map_err(|_| {
                Error::new(
                    ErrorKind::Search,
                    format!("Grep: `{field}` must not be negative (got {n})"),
                )
            })
        };
        Ok(Options {
            before: count("-B", asked.before)?,
            after: count("-A", asked.after)?,
            head_limit: count("head_limit", asked.head_limit)?,
            offset: count("offset", asked.offset)?,
            pattern: asked.pattern,
            glob: asked.glob,
            file_type: asked.file_type,
            mode,
            case_insensitive: asked.case_insensitive,
            line_numbers: asked.line_numbers,
            multiline: asked.multiline,
        })
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pattern: String::new(),
            glob: None,
            file_type: None,
            mode: Mode::FilesWithMatches,
            before: 0,
            after: 0,
            case_insensitive: false,
            line_numbers: true,
            multiline: false,
            head_limit: 250,
            offset: 0,
        }
    }
}

fn fail(msg: String) -> Error {
    Error::new(ErrorKind::Search, msg)
}

pub fn matcher(opts: &Options) -> Result<RegexMatcher, Error> {
    let mut b = RegexMatcherBuilder::new();
    b.case_insensitive(opts.case_insensitive);
    if opts.multiline {
        b.multi_line(true).dot_matches_new_line(true);
    } else {
        b.line_terminator(Some(b'\n'));
    }
    b.build(&opts.pattern).map_err(|e| {
        fail(format!(
            "Grep: invalid regular expression in `pattern`: {e}"
        ))
    })
}

fn searcher(opts: &Options) -> Searcher {
    let content = opts.mode == Mode::Content;
    SearcherBuilder::new()
        .line_number(content)
        .binary_detection(BinaryDetection::quit(0))
        .before_context(if content { opts.before } else { 0 })
        .after_context(if content { opts.after } else { 0 })
        .multi_line(opts.multiline)
        .build()
}

/// Collects one file's matches, already formatted as output lines.
struct FileSink<'a> {
    opts: &'a Options,
    budget: &'a Budget,
    display: &'a str,
    out: Found,
    pending_break: bool,
    count: u64,
    binary: bool,
}

fn strip_eol(bytes: &[u8]) -> &[u8] {
    let b = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    b.strip_suffix(b"\r").unwrap_or(b)
}

impl FileSink<'_> {
    fn line(&mut self, number: u64, is_match: bool, bytes: &[u8]) {
        let text = String::from_utf8_lossy(strip_eol(bytes));
        let sep = if is_match { ':' } else { '-' };
        let (display, numbers) = (self.display, self.opts.line_numbers);
        self.out.push_with(self.pending_break, |buf| {
            buf.push_str(display);
            buf.push(sep);
            if numbers {
                push_number(buf, number);
                buf.push(sep);
            }
            push_preview(buf, &text, display, number);
        });
        self.pending_break = false;
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.count += 1;
        match self.opts.mode {
            Mode::FilesWithMatches => return Ok(false),
            Mode::Count => {}
            Mode::Content => {
                let first = mat.line_number().unwrap_or(0);
                let bytes = strip_eol(mat.bytes());
                for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
                    self.line(first + i as u64, true, line);
                }
            }
        }
        Ok(!self.budget.stop())
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.opts.mode == Mode::Content && !matches!(ctx.kind(), SinkContextKind::Other) {
            self.line(ctx.line_number().unwrap_or(0), false, ctx.bytes());
        }
        Ok(!self.budget.stop())
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        self.pending_break = true;
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// Matches in one file, kept until every file is searched.
struct FileHits {
    display: String,
    out: Found,
    count: u64,
    /// Said after the file's name: how its text is not the disk copy.
    mark: &'static str,
}

/// What one searched file's text comes from.
enum Source<'a> {
    /// The file at a path (the uncompressed text of a compressed log).
    Disk(&'a std::path::Path, bool),
    /// A modified Emacs buffer's text.
    Buffer(&'a [u8]),
}

/// Search the text of SOURCE, named DISPLAY.
fn search_file(
    source: Source<'_>,
    display: &str,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    opts: &Options,
    budget: &Budget,
) -> Option<(Found, u64)> {
    let mut sink = FileSink {
        opts,
        budget,
        display,
        out: Found::default(),
        pending_break: false,
        count: 0,
        binary: false,
    };
    let result = match source {
        Source::Disk(path, true) => {
            let inner = gzlog::open(path, gzlog::INFLATE_LIMIT).ok()?;
            searcher.search_reader(matcher, BudgetReader { inner, budget }, &mut sink)
        }
        Source::Disk(path, false) => {
            let inner = crate::files::open_regular(path).ok()?;
            searcher.search_reader(matcher, BudgetReader { inner, budget }, &mut sink)
        }
        Source::Buffer(text) => searcher.search_slice(matcher, text, &mut sink),
    };
    if sink.binary || sink.count == 0 {
        return None;
    }
    // A read stopped by the budget keeps what it found (partial).
    if result.is_err() && !budget.stop() {
        return None;
    }
    Some((sink.out, sink.count))
}

/// The source of the file at PATH: the buffer standing in for it, when
/// LOCATED finds one, else the disk.
fn source<'a>(
    path: &'a std::path::Path,
    compressed: bool,
    located: Option<&unsaved::Located>,
    unsaved: &'a Unsaved,
) -> (Source<'a>, &'static str) {
    match located.filter(|_| !compressed) {
        Some(l) => match unsaved.get(&l.truename_of(path)) {
            Some(b) => (Source::Buffer(&b.text), b.mark()),
            None => (Source::Disk(path, false), ""),
        },
        None => (Source::Disk(path, compressed), ""),
    }
}

/// Where one search's hits go and what it searches with.
struct Run<'a> {
    opts: &'a Options,
    matcher: &'a RegexMatcher,
    unsaved: &'a Unsaved,
    budget: &'a Budget,
    hits: &'a Mutex<Vec<FileHits>>,
}

fn walk_root(root: &Root, run: &Run<'_>) -> Result<(), Error> {
    let Run {
        opts,
        matcher,
        unsaved,
        budget,
        hits,
    } = *run;
    let located = unsaved.locate(root);
    if let Some((file, display)) = &root.file {
        let mut s = searcher(opts);
        let (src, mark) = source(file, root.compressed(file), located.as_ref(), unsaved);
        if let Some((out, count)) = search_file(src, display, matcher, &mut s, opts, budget) {
            push(
                hits,
                FileHits {
                    display: display.clone(),
                    out,
                    count,
                    mark,
                },
            );
        }
        return Ok(());
    }
    let mut builder = walk::walker(&root.base, true, &root.filter);
    let ov = walk::overrides(&root.base, "glob", opts.glob.as_deref())?;
    let types = walk::types(opts.file_type.as_deref())?;
    if let Some(l) = &located {
        search_new_files(root, run, l, (&ov, &types));
    }
    if root.filter.maps_compressed() {
        walk::logical_selection(&mut builder, ov, Some(types));
    } else {
        builder.overrides(ov);
        builder.types(types);
    }
    search_walk(root, run, located.as_ref(), builder.build());
    Ok(())
}

/// Files a walk met and the searchers have not taken yet, each with
/// its place in the walk; None once the walk has ended.
type Queue = (
    Mutex<(std::collections::VecDeque<(usize, ignore::DirEntry)>, bool)>,
    Condvar,
);

/// Most walked files waiting for a searcher: bounds memory when the
/// walk outruns the search.
const QUEUE_CAP: usize = 4096;

/// Search the files WALK meets, `searchers()` at a time, and keep their
/// hits in the walk's order. One thread walks, so the order is the
/// directories' own and the same on every call over the same tree:
/// pages taken with `offset` stay consistent without a sort by path.
fn search_walk(root: &Root, run: &Run<'_>, located: Option<&unsaved::Located>, walk: ignore::Walk) {
    let Run {
        opts,
        matcher,
        unsaved,
        budget,
        hits,
    } = *run;
    let queue: Queue = (
        Mutex::new((std::collections::VecDeque::new(), false)),
        Condvar::new(),
    );
    let found: Mutex<Vec<(usize, FileHits)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..searchers() {
            scope.spawn(|| {
                let mut s = searcher(opts);
                let matcher = matcher.clone();
                while let Some((seq, entry)) = take(&queue) {
                    if budget.stop() {
                        continue;
                    }
                    let rel = root.logical_rel(entry.path());
                    let display = root.display(&rel);
                    let compressed = root.compressed(entry.path());
                    let (src, mark) = source(entry.path(), compressed, located, unsaved);
                    if let Some((out, count)) =
                        search_file(src, &display, &matcher, &mut s, opts, budget)
                    {
                        let h = FileHits {
                            display,
                            out,
                            count,
                            mark,
                        };
                        lock(&found).push((seq, h));
                    }
                }
            });
        }
        let mut seq = 0;
        for entry in walk {
            if budget.stop() {
                break;
            }
            let Ok(entry) = entry else {
                continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let rel = root.logical_rel(entry.path());
            let name = rel.last().map(String::as_str).unwrap_or("");
            if !root.filter.admits(name, rel.len()) {
                continue;
            }
            let (lock_, ready) = &queue;
            let mut q = lock(lock_);
            while q.0.len() >= QUEUE_CAP && !budget.stop() {
                q = ready
                    .wait(q)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            q.0.push_back((seq, entry));
            seq += 1;
            ready.notify_all();
        }
        let (lock_, ready) = &queue;
        lock(lock_).1 = true;
        ready.notify_all();
    });
    let mut found = found
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Back into the walk's order: the searchers finish out of it.
    found.sort_unstable_by_key(|(seq, _)| *seq);
    lock(hits).extend(found.into_iter().map(|(_, h)| h));
}

/// Threads searching one walk's files: one per core, as the walk is
/// cheap beside the search and a bigger machine should search faster.
fn searchers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// The next walked file of QUEUE, waiting for one; None when the walk
/// has ended and every file is taken.
fn take(queue: &Queue) -> Option<(usize, ignore::DirEntry)> {
    let (lock_, ready) = queue;
    let mut q = lock(lock_);
    loop {
        if let Some(next) = q.0.pop_front() {
            ready.notify_all();
            return Some(next);
        }
        if q.1 {
            return None;
        }
        q = ready
            .wait(q)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Search the buffers of ROOT's files that do not exist yet, which the
/// walk cannot meet, when the walk would have searched them (OV and
/// TYPES are its filters).
fn search_new_files(
    root: &Root,
    run: &Run<'_>,
    located: &unsaved::Located,
    (ov, types): (&Override, &Types),
) {
    let mut s = searcher(run.opts);
    for (truename, buffer) in run.unsaved.new_files() {
        let Some((path, rel)) = located.walked(truename) else {
            continue;
        };
        if !unsaved::admits(root, &path, &rel, ov, Some(types), true) {
            continue;
        }
        let display = root.display(&rel);
        let src = Source::Buffer(&buffer.text);
        if let Some((out, count)) =
            search_file(src, &display, run.matcher, &mut s, run.opts, run.budget)
        {
            push(
                run.hits,
                FileHits {
                    display,
                    out,
                    count,
                    mark: buffer.mark(),
                },
            );
        }
    }
}

fn push(hits: &Mutex<Vec<FileHits>>, h: FileHits) {
    lock(hits).push(h);
}

/// Append N in decimal without an intermediate string (one per output line).
fn push_number(buf: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        buf.push(char::from(d));
    }
}

/// Append TEXT, cut after [`LINE_PREVIEW`] characters with the Read
/// call that shows the rest of line NUMBER of DISPLAY.
fn push_preview(buf: &mut String, text: &str, display: &str, number: u64) {
    if text.len() <= LINE_PREVIEW {
        buf.push_str(text);
        return;
    }
    let total = text.chars().count();
    if total <= LINE_PREVIEW {
        buf.push_str(text);
        return;
    }
    buf.extend(text.chars().take(LINE_PREVIEW));
    buf.push_str(&format!(
        " [line continues: {LINE_PREVIEW} of {total} characters shown; \
         Read {{\"file_path\": \"{display}\", \"offset\": {number}, \"limit\": 1, \"char_offset\": {LINE_PREVIEW}}}]"
    ));
}

/// The output lines of a finished search, in the order HITS has.
fn render(hits: Vec<FileHits>, opts: &Options) -> Found {
    let mut found = Found::default();
    let context = opts.before > 0 || opts.after > 0;
    for h in hits {
        match opts.mode {
            Mode::FilesWithMatches => found.push_with(false, |buf| {
                buf.push_str(&h.display);
                buf.push_str(h.mark);
            }),
            Mode::Count => found.push_with(false, |buf| {
                buf.push_str(&h.display);
                buf.push(':');
                push_number(buf, h.count);
                buf.push_str(h.mark);
            }),
            // A buffer's lines follow one line naming it and its mark.
            Mode::Content if !h.mark.is_empty() => {
                found.push_with(context, |buf| {
                    buf.push_str(&h.display);
                    buf.push_str(h.mark);
                });
                found.append(h.out, false);
            }
            Mode::Content => found.append(h.out, context),
        }
    }
    found
}

/// Search ROOTS, with the buffers of UNSAVED standing in for their
/// files, and return every output line, unpaged.
pub fn grep_lines(
    roots: &[Root],
    opts: &Options,
    unsaved: &Unsaved,
    budget: &Budget,
) -> Result<Found, Error> {
    if opts.pattern.is_empty() {
        return Err(fail("Grep: `pattern` must not be empty".into()));
    }
    let matcher = matcher(opts)?;
    let hits = Mutex::new(Vec::new());
    let run = Run {
        opts,
        matcher: &matcher,
        unsaved,
        budget,
        hits: &hits,
    };
    for root in roots {
        if budget.stop() {
            break;
        }
        walk_root(root, &run)?;
    }
    if budget.cancelled() {
        return Err(fail("Grep was cancelled".into()));
    }
    let hits = hits
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut found = render(hits, opts);
    if found.is_empty() {
        found.notes = roots.iter().filter_map(|r| r.empty_note.clone()).collect();
    }
    found.partial = budget.timed_out();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::push_number;

    #[test]
    fn numbers_in_decimal() {
        for n in [0u64, 7, 10, 99, 100, 12345, u64::MAX] {
            let mut s = String::from("x");
            push_number(&mut s, n);
            assert_eq!(s, format!("x{n}"));
        }
    }
}
