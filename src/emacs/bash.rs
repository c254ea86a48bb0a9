//! Bash analysis (see `bash`).
//!
//! One call per command the agent runs, so the result is built through
//! the raw module API, as in `lisp_data.rs` (ADR 0005): each module call
//! costs more than the analysis of a short command, and the `emacs`
//! crate adds an exit check after each. Everything a result is made of
//! but its plist is made once per thread and kept behind a global
//! reference: the keywords, `t`, `nil`, the `list` symbol, class names,
//! small integers, stage labels and reasons (at most [`SHARED_MAX`]
//! distinct strings), and the lists of them (as many). A call then
//! copies its argument into a reused buffer, takes the analysis from the
//! thread's table of recent ones or makes it, and calls `list` for the
//! plist and any list not seen before, with one exit check at the end.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, c_char};

use emacs::raw::{emacs_env, emacs_value};
use emacs::{Env, FromLisp, Result, Value, defun};

use super::errors;
use super::guard::guarded;
use crate::bash::{Analysis, Class, Recent};
use crate::error::{Error, ErrorKind};

type Funcall =
    unsafe extern "C" fn(*mut emacs_env, emacs_value, isize, *mut emacs_value) -> emacs_value;
type MakeString = unsafe extern "C" fn(*mut emacs_env, *const c_char, isize) -> emacs_value;
type MakeInteger = unsafe extern "C" fn(*mut emacs_env, i64) -> emacs_value;
type MakeGlobalRef = unsafe extern "C" fn(*mut emacs_env, emacs_value) -> emacs_value;
type Intern = unsafe extern "C" fn(*mut emacs_env, *const c_char) -> emacs_value;
type ExitCheck = unsafe extern "C" fn(*mut emacs_env) -> u32;

/// Most distinct stage labels and reasons kept as shared strings.
const SHARED_MAX: usize = 512;

/// Pipeline counts below this are shared integers.
const SMALL_INTS: usize = 64;

/// Sources up to this many bytes are copied into the reused buffer;
/// longer ones are read the `emacs` crate's way.
const SOURCE_BUFFER: usize = 4096;

/// The result's keys, in order.
const KEYS: [&CStr; 8] = [
    c":class",
    c":reasons",
    c":background",
    c":parse-error",
    c":read-only",
    c":snapshot",
    c":pipelines",
    c":stages",
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

/// The module API functions a call uses.
struct Api {
    raw: *mut emacs_env,
    funcall: Funcall,
    make_string: MakeString,
    make_integer: MakeInteger,
    make_global_ref: MakeGlobalRef,
    intern: Intern,
    exit_check: ExitCheck,
}

impl Api {
    fn new(env: &Env) -> Result<Api> {
        let raw = env.raw();
        // SAFETY: ENV is the live environment of the current module call.
        let table = unsafe { &*raw };
        let (
            Some(funcall),
            Some(make_string),
            Some(make_integer),
            Some(make_global_ref),
            Some(intern),
            Some(exit_check),
        ) = (
            table.funcall,
            table.make_string,
            table.make_integer,
            table.make_global_ref,
            table.intern,
            table.non_local_exit_check,
        )
        else {
            return errors::signal(
                env,
                Error::new(ErrorKind::Internal, "The module API lacks a function"),
            );
        };
        Ok(Api {
            raw,
            funcall,
            make_string,
            make_integer,
            make_global_ref,
            intern,
            exit_check,
        })
    }

    /// Whether no module call of this environment has failed.
    fn ok(&self) -> bool {
        // SAFETY: plain query of the live environment.
        unsafe { (self.exit_check)(self.raw) == 0 }
    }

    /// A global reference to VALUE, valid in every later call.
    fn global(&self, value: emacs_value) -> emacs_value {
        // SAFETY: live environment; VALUE was made in it.
        unsafe { (self.make_global_ref)(self.raw, value) }
    }

    fn symbol(&self, name: &CStr) -> emacs_value {
        // SAFETY: live environment; a NUL-terminated ASCII name.
        self.global(unsafe { (self.intern)(self.raw, name.as_ptr()) })
    }

    fn string(&self, text: &str) -> emacs_value {
        let len = isize::try_from(text.len()).unwrap_or(isize::MAX);
        // SAFETY: live environment; TEXT is valid UTF-8 of length LEN.
        unsafe { (self.make_string)(self.raw, text.as_ptr().cast(), len) }
    }

    /// `(list ITEMS...)`, or nil without items.
    fn list(&self, seam: &Seam, items: &mut [emacs_value]) -> emacs_value {
        if items.is_empty() {
            return seam.nil;
        }
        let n = isize::try_from(items.len()).unwrap_or(isize::MAX);
        // SAFETY: live environment; Emacs only reads the N items.
        unsafe { (self.funcall)(self.raw, seam.list, n, items.as_mut_ptr()) }
    }
}

/// Values made once per thread (global references, never freed) and the
/// reused buffers.
struct Seam {
    list: emacs_value,
    nil: emacs_value,
    t: emacs_value,
    keys: [emacs_value; 8],
    classes: [emacs_value; 5],
    ints: [emacs_value; SMALL_INTS],
    strings: HashMap<Box<str>, emacs_value, foldhash::fast::RandomState>,
    /// Lists of shared strings (stage labels, reasons) by their items:
    /// each `list` call costs more than the lookup.
    lists: HashMap<Box<[Shared]>, emacs_value, foldhash::fast::RandomState>,
    /// The source's bytes, then a list's items and its key in `lists`.
    source: Vec<u8>,
    items: Vec<emacs_value>,
    key: Vec<Shared>,
}

impl Seam {
    /// The shared values, or `None` when making one failed (the pending
    /// signal says why).
    fn new(api: &Api) -> Option<Seam> {
        let keys = KEYS.map(|k| api.symbol(k));
        let classes = CLASSES.map(|c| api.global(api.string(c.name())));
        let ints = std::array::from_fn(|n| {
            // SAFETY: live environment.
            api.global(unsafe { (api.make_integer)(api.raw, n as i64) })
        });
        let seam = Seam {
            list: api.symbol(c"list"),
            nil: api.symbol(c"nil"),
            t: api.symbol(c"t"),
            keys,
            classes,
            ints,
            strings: HashMap::default(),
            lists: HashMap::default(),
            source: vec![0; SOURCE_BUFFER],
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
    fn shared_string(&mut self, api: &Api, text: &str) -> Option<emacs_value> {
        if let Some(&known) = self.strings.get(text) {
            return Some(known);
        }
        if self.strings.len() >= SHARED_MAX {
            return None;
        }
        let global = api.global(api.string(text));
        if global.is_null() {
            return None;
        }
        self.strings.insert(text.into(), global);
        Some(global)
    }

    /// A list of TEXTS as Lisp strings, or nil. Shared, as are its
    /// strings, when every text is shared and fewer than [`SHARED_MAX`]
    /// lists are kept.
    fn strings<'s>(&mut self, api: &Api, texts: impl Iterator<Item = &'s str>) -> emacs_value {
        let mut items = std::mem::take(&mut self.items);
        items.clear();
        let mut all_shared = true;
        for text in texts {
            items.push(match self.shared_string(api, text) {
                Some(shared) => shared,
                None => {
                    all_shared = false;
                    api.string(text)
                }
            });
        }
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.extend(items.iter().map(|&v| Shared(v)));
        let list = match self.lists.get(key.as_slice()) {
            Some(&known) if all_shared => known,
            _ => {
                let list = api.list(self, &mut items);
                if all_shared && !items.is_empty() && self.lists.len() < SHARED_MAX {
                    let global = api.global(list);
                    if !global.is_null() {
                        self.lists.insert(key.as_slice().into(), global);
                    }
                }
                list
            }
        };
        self.items = items;
        self.key = key;
        list
    }

    /// The result plist of A.
    fn plist(&mut self, api: &Api, a: &Analysis) -> emacs_value {
        let stages = match &a.final_pipeline {
            Some(stages) => self.strings(api, stages.iter().map(|s| s.label.as_str())),
            None => self.nil,
        };
        let reasons = self.strings(api, a.reasons.iter().map(|r| &**r));
        let pipelines = match self.ints.get(a.pipelines) {
            Some(&n) => n,
            // SAFETY: live environment.
            None => unsafe {
                (api.make_integer)(api.raw, i64::try_from(a.pipelines).unwrap_or(i64::MAX))
            },
        };
        let values = [
            self.class(a.class),
            reasons,
            self.boolean(a.background),
            self.boolean(a.parse_error),
            self.boolean(a.read_only()),
            self.boolean(a.snapshot()),
            pipelines,
            stages,
        ];
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
        api.list(self, &mut items[..n])
    }
}

thread_local! {
    /// Emacs calls the module from its main thread (and Lisp threads,
    /// each with their own copy here), with the thread's table of recent
    /// analyses: a repeated source costs a comparison, not an analysis.
    static SEAM: RefCell<Option<(Seam, Recent)>> = const { RefCell::new(None) };
}

/// Analyse SOURCE without running it: a plist with `:class` (a string:
/// read-only, mutating, unknown, complex, dangerous), `:reasons`,
/// `:background`, `:parse-error`, `:read-only`, `:snapshot`,
/// `:pipelines` and `:stages` (labels of the final pipeline's stages);
/// a key whose value is nil is left out.
///
/// The class, reason and stage strings, and the lists of reasons and of
/// stages, are shared between results: do not modify them.
#[defun(name = "bash-analyze")]
fn bash_analyze<'e>(env: &'e Env, source: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let api = Api::new(env)?;
        SEAM.with(|cell| {
            let Ok(mut slot) = cell.try_borrow_mut() else {
                return errors::signal(
                    env,
                    Error::new(ErrorKind::Internal, "Bash analysis re-entered"),
                );
            };
            if slot.is_none() {
                *slot = Seam::new(&api).map(|seam| (seam, Recent::default()));
            }
            let Some((seam, recent)) = slot.as_mut() else {
                // Making the shared values failed: the pending signal wins.
                return errors::signal(
                    env,
                    Error::new(ErrorKind::Internal, "Making Lisp values failed"),
                );
            };
            let analysis = match source.copy_string_contents(&mut seam.source) {
                Ok(bytes) => match std::str::from_utf8(bytes) {
                    Ok(text) => recent.analyze(text),
                    Err(_) => recent.analyze(&String::from_lisp(source)?),
                },
                // Longer than the buffer, or not a string: the crate's
                // conversion reads it or signals the usual error.
                Err(_) => recent.analyze(&String::from_lisp(source)?),
            };
            let plist = seam.plist(&api, &analysis);
            if !api.ok() {
                return errors::signal(
                    env,
                    Error::new(ErrorKind::Internal, "Building the analysis failed"),
                );
            }
            // SAFETY: PLIST was made in this environment, which is live.
            Ok(unsafe { Value::new(plist, env) })
        })
    })
}
