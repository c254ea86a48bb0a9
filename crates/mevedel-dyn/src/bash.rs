//! The facts of a Bash command that its permission decision needs (see
//! `bash`): the permission step calls this once per Bash or Monitor call.
//!
//! The result is built through the raw module API, as in `lisp_data.rs`
//! (ADR 0005): each module call costs more than the analysis of a short
//! command, and the `emacs` crate adds an exit check after each.
//! Everything a result is made of is made once per thread and kept
//! behind a global reference: the keywords, `t`, `nil`, the `list`
//! symbol, class names, command keys and reasons (at most [`SHARED_MAX`]
//! distinct strings) and the lists of them (as many), as many paths and
//! lists of paths, and as many result plists made of those. A call then
//! copies its arguments into reused buffers, asks the thread's [`Judge`]
//! for the source's facts (core decides everything), and calls `list`
//! only for a list or plist not seen before, with one exit check at the
//! end: a source seen never before but judged like an earlier one costs
//! no Lisp allocation.
//!
//! `bash-effects` tells a permission card what each command does to
//! files: only a drawn card asks, so it is built the plain way.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CStr;

use emacs::raw::emacs_value;
use emacs::{Env, FromLisp, Result, Value, defun};
use mevedel_core::bash::{self, Class, Facts, Judge};
use mevedel_core::datum::Datum;
use mevedel_core::error::{Error, ErrorKind};

use crate::convert;
use crate::errors;
use crate::guard::guarded;
use crate::raw::Raw;

/// Most distinct strings (and lists) of each [`Pool`] kept shared.
const SHARED_MAX: usize = 512;

/// Sources up to this many bytes are copied into the reused buffer;
/// longer ones are read the `emacs` crate's way.
const SOURCE_BUFFER: usize = 4096;

/// The result's keys, in order.
const KEYS: [&CStr; 7] = [
    c":class",
    c":reasons",
    c":read-only",
    c":inside",
    c":keys",
    c":unkeyed",
    c":paths",
];

const CLASSES: [Class; 5] = [
    Class::ReadOnly,
    Class::Mutating,
    Class::Unknown,
    Class::Complex,
    Class::Dangerous,
];

/// A shared string's global reference, as a key of a shared list: the
/// same text always has the same reference.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Shared(emacs_value);

/// A global reference to the symbol NAME.
fn symbol(api: &Raw, name: &CStr) -> emacs_value {
    api.make_global_ref(api.intern(name))
}

/// `(list ITEMS...)`, or nil without items.
fn list(api: &Raw, seam: &Seam, items: &mut [emacs_value]) -> emacs_value {
    if items.is_empty() {
        return seam.nil;
    }
    api.funcall(seam.list, items)
}

/// Shared strings and lists of them, by their text and items.
#[derive(Default)]
struct Pool {
    strings: HashMap<Box<str>, emacs_value, foldhash::fast::RandomState>,
    /// Lists of shared strings by their items: each `list` call costs
    /// more than the lookup.
    lists: HashMap<Box<[Shared]>, emacs_value, foldhash::fast::RandomState>,
}

/// Values made once per thread (global references, never freed) and the
/// reused buffers.
struct Seam {
    list: emacs_value,
    nil: emacs_value,
    t: emacs_value,
    keys: [emacs_value; 7],
    classes: [emacs_value; 5],
    /// Command keys and reasons.
    words: Pool,
    /// Paths: a workspace's few files and directories come back call
    /// after call.
    files: Pool,
    /// Result plists made only of shared values, by those values.
    plists: HashMap<[Shared; 7], emacs_value, foldhash::fast::RandomState>,
    /// The arguments' bytes, then a list's items and its key in `lists`.
    source: Vec<u8>,
    cwd: Vec<u8>,
    root: Vec<u8>,
    items: Vec<emacs_value>,
    key: Vec<Shared>,
}

impl Seam {
    /// The shared values, or `None` when making one failed (the pending
    /// signal says why).
    fn new(api: &Raw) -> Option<Seam> {
        let keys = KEYS.map(|k| symbol(api, k));
        let classes = CLASSES.map(|c| api.make_global_ref(api.make_string(c.name().as_bytes())));
        let seam = Seam {
            list: symbol(api, c"list"),
            nil: symbol(api, c"nil"),
            t: symbol(api, c"t"),
            keys,
            classes,
            words: Pool::default(),
            files: Pool::default(),
            plists: HashMap::default(),
            source: vec![0; SOURCE_BUFFER],
            cwd: vec![0; SOURCE_BUFFER],
            root: vec![0; SOURCE_BUFFER],
            items: Vec::with_capacity(16),
            key: Vec::with_capacity(16),
        };
        api.ok().then_some(seam)
    }

    fn boolean(&self, value: bool) -> emacs_value {
        if value { self.t } else { self.nil }
    }

    fn class(&self, class: Class) -> emacs_value {
        let index = CLASSES.iter().position(|&c| c == class).unwrap_or(0);
        self.classes[index]
    }

    /// The shared Lisp string TEXT, or `None` once [`SHARED_MAX`] are
    /// kept (or making it failed).
    fn shared_string(pool: &mut Pool, api: &Raw, text: &str) -> Option<emacs_value> {
        if let Some(&known) = pool.strings.get(text) {
            return Some(known);
        }
        if pool.strings.len() >= SHARED_MAX {
            return None;
        }
        let global = api.make_global_ref(api.make_string(text.as_bytes()));
        if global.is_null() {
            return None;
        }
        pool.strings.insert(text.into(), global);
        Some(global)
    }

    /// A list of TEXTS as Lisp strings, or nil, and whether it is
    /// shared: kept in the pool of FILES or words, as are its strings,
    /// when every text is shared and fewer than [`SHARED_MAX`] lists are
    /// kept.
    fn strings<'s>(
        &mut self,
        api: &Raw,
        files: bool,
        texts: impl ExactSizeIterator<Item = &'s str>,
    ) -> (emacs_value, bool) {
        // Most results have no reasons, and many no paths.
        if texts.len() == 0 {
            return (self.nil, true);
        }
        let mut pool = std::mem::take(if files {
            &mut self.files
        } else {
            &mut self.words
        });
        let mut items = std::mem::take(&mut self.items);
        items.clear();
        let mut all_shared = true;
        for text in texts {
            items.push(match Seam::shared_string(&mut pool, api, text) {
                Some(shared) => shared,
                None => {
                    all_shared = false;
                    api.make_string(text.as_bytes())
                }
            });
        }
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.extend(items.iter().map(|&v| Shared(v)));
        let (list, shared) = match pool.lists.get(key.as_slice()) {
            Some(&known) if all_shared => (known, true),
            _ => {
                let list = list(api, self, &mut items);
                let global = if all_shared && pool.lists.len() < SHARED_MAX {
                    api.make_global_ref(list)
                } else {
                    std::ptr::null_mut()
                };
                if global.is_null() {
                    (list, false)
                } else {
                    pool.lists.insert(key.as_slice().into(), global);
                    (global, true)
                }
            }
        };
        self.items = items;
        self.key = key;
        *(if files {
            &mut self.files
        } else {
            &mut self.words
        }) = pool;
        (list, shared)
    }

    /// The result plist of FACTS: the shared one of the same values when
    /// every value is shared, as most are (sources differ far more often
    /// than their facts do).
    fn plist(&mut self, api: &Raw, facts: &Facts) -> emacs_value {
        let (a, access) = (&*facts.analysis, &facts.access);
        let (reasons, reasons_shared) = self.strings(api, false, a.reasons.iter().map(|r| &**r));
        let (keys, keys_shared) = self.strings(api, false, a.keys.iter().map(String::as_str));
        let (paths, paths_shared) =
            self.strings(api, true, access.paths.iter().map(String::as_str));
        let values = [
            self.class(a.class),
            reasons,
            self.boolean(a.read_only()),
            self.boolean(access.inside),
            keys,
            self.boolean(a.unkeyed),
            paths,
        ];
        let shared = reasons_shared && keys_shared && paths_shared;
        let key = values.map(Shared);
        if shared && let Some(&known) = self.plists.get(&key) {
            return known;
        }
        // Keys whose value is nil are left out: `plist-get' reads the
        // same, and each item costs a cons.
        let mut items = [self.nil; 2 * KEYS.len()];
        let mut n = 0;
        for (&key, value) in self.keys.iter().zip(values) {
            if value != self.nil {
                items[n] = key;
                items[n + 1] = value;
                n += 2;
            }
        }
        let plist = list(api, self, &mut items[..n]);
        if shared && self.plists.len() < SHARED_MAX {
            let global = api.make_global_ref(plist);
            if !global.is_null() {
                self.plists.insert(key, global);
                return global;
            }
        }
        plist
    }
}

thread_local! {
    /// Emacs calls the module from its main thread (and Lisp threads,
    /// each with their own copy here), with the thread's judge, whose
    /// recent analyses make a repeated source cost a comparison.
    static SEAM: RefCell<Option<(Seam, Judge)>> = const { RefCell::new(None) };
}

/// Copy the Lisp string VALUE into BUFFER and read it, or read it the
/// `emacs` crate's way when it is longer or not valid UTF-8 (a
/// non-string signals the usual error).
fn text<'b>(value: Value<'_>, buffer: &'b mut [u8], long: &'b mut String) -> Result<&'b str> {
    if let Ok(bytes) = value.copy_string_contents(buffer)
        && let Ok(text) = std::str::from_utf8(bytes)
    {
        return Ok(text);
    }
    *long = String::from_lisp(value)?;
    Ok(long.as_str())
}

/// Judge Bash SOURCE, run in the directory CWD of the workspace ROOT
/// (both absolute), without running it: a plist with `:class` (a string:
/// read-only, mutating, unknown, complex, dangerous), `:reasons` (why it
/// is not read-only), `:read-only`, `:inside` (read-only, and every file
/// it names is inside ROOT), `:keys` (each command's key, such as `git
/// status` or `npm test`), `:unkeyed` (some command has none, so no
/// session answer covers the source) and `:paths` (the files it names,
/// absolute); a key whose value is nil is left out.
///
/// The plist, its class, reason, key and path strings, and its lists of
/// reasons, of keys and of paths, are shared between results: do not
/// modify them.
#[defun(name = "bash-permission")]
fn bash_permission<'e>(
    env: &'e Env,
    source: Value<'e>,
    cwd: Value<'e>,
    root: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let api = Raw::new(env)?;
        SEAM.with(|cell| {
            let Ok(mut slot) = cell.try_borrow_mut() else {
                return errors::signal(
                    env,
                    Error::new(ErrorKind::Internal, "Bash analysis re-entered"),
                );
            };
            if slot.is_none() {
                *slot = Seam::new(&api).map(|seam| (seam, Judge::new(std::env::var("HOME").ok())));
            }
            let Some((seam, judge)) = slot.as_mut() else {
                // Making the shared values failed: the pending signal wins.
                return errors::signal(
                    env,
                    Error::new(ErrorKind::Internal, "Making Lisp values failed"),
                );
            };
            let (mut long_source, mut long_cwd, mut long_root) =
                (String::new(), String::new(), String::new());
            let mut source_buffer = std::mem::take(&mut seam.source);
            let mut cwd_buffer = std::mem::take(&mut seam.cwd);
            let mut root_buffer = std::mem::take(&mut seam.root);
            let read = (|| -> Result<emacs_value> {
                let source_text = text(source, &mut source_buffer, &mut long_source)?;
                // Most calls run in the workspace itself: the same string
                // twice, copied once.
                let same = cwd == root;
                let cwd_text = text(cwd, &mut cwd_buffer, &mut long_cwd)?;
                let root_text = if same {
                    cwd_text
                } else {
                    text(root, &mut root_buffer, &mut long_root)?
                };
                let facts = judge.judge(source_text, cwd_text, root_text);
                Ok(seam.plist(&api, &facts))
            })();
            seam.source = source_buffer;
            seam.cwd = cwd_buffer;
            seam.root = root_buffer;
            let plist = read?;
            api.finish(plist, "Building the result failed")
        })
    })
}

/// What each command of Bash SOURCE, run in the directory CWD of the
/// workspace ROOT (both absolute), does to files, for a permission card:
/// a list with one plist per command, in source order: `:command` (its
/// key, such as `git status`, or its name), `:class` (as
/// `bash-permission` names it), `:start` and `:end` (where it is in
/// SOURCE, 0-based, in characters), `:reads`, `:writes` and `:deletes`
/// (paths relative to ROOT when inside it, else absolute) and
/// `:unknown` (some file it touches cannot be told).
#[defun(name = "bash-effects")]
fn bash_effects<'e>(env: &'e Env, source: String, cwd: String, root: String) -> Result<Value<'e>> {
    guarded(env, || {
        let home = std::env::var("HOME").ok();
        let strings = |paths: Vec<String>| Datum::List(paths.into_iter().map(Datum::Str).collect());
        let effects = bash::describe(&source, &cwd, &root, home.as_deref())
            .into_iter()
            .map(|e| {
                Datum::plist([
                    (":command", Datum::Str(e.label)),
                    (":class", Datum::Str(e.class.name().into())),
                    (":start", Datum::Int(e.start as i64)),
                    (":end", Datum::Int(e.end as i64)),
                    (":reads", strings(e.reads)),
                    (":writes", strings(e.writes)),
                    (":deletes", strings(e.deletes)),
                    (":unknown", if e.unknown { Datum::T } else { Datum::Nil }),
                ])
            })
            .collect();
        convert::to_lisp(env, &Datum::List(effects))
    })
}
