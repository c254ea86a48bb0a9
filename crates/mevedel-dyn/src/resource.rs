//! Resource addresses: parse, prepare (stage one) and the facts a
//! permission check needs. Execution runs through `files.rs`.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::error::{Error, ErrorKind};
use mevedel_core::resource::address::Origin;
use mevedel_core::resource::context::{MemoryRoot, Skill};
use mevedel_core::resource::{self, Attempt, Context, Operation};

use crate::args::Plist;
use crate::convert::{list_items, to_lisp};
use crate::errors::OrSignal;
use crate::guard::guarded;

/// The opaque attempt Lisp holds between preparation and execution.
pub type AttemptPtr = Arc<Attempt>;

/// V as a string, or None for nil.
pub(super) fn opt_string(v: Value<'_>) -> Result<Option<String>> {
    if v.is_not_nil() {
        Ok(Some(v.into_rust()?))
    } else {
        Ok(None)
    }
}

/// Bytes of a text copied in one step; longer texts take the allocating path.
const STACK_TEXT: usize = 1024;

/// The canonical spelling of the address TEXT names, or nil for an
/// ordinary path: TEXT itself when it is already canonical, so the
/// common call allocates nothing in Lisp and copies TEXT once.
fn canonical_value<'e>(env: &'e Env, text: Value<'e>) -> Result<Value<'e>> {
    let mut stack = [0u8; STACK_TEXT];
    let heap: Vec<u8>;
    let bytes = match text.copy_string_contents(&mut stack) {
        Ok(bytes) => bytes,
        Err(e) if too_small(&e) => {
            heap = text.clone_string_contents()?;
            &heap[..]
        }
        Err(e) => return Err(e),
    };
    let authored = std::str::from_utf8(bytes)
        .map_err(|_| Error::new(ErrorKind::Resource, "address text is not UTF-8"))
        .or_signal(env)?;
    match resource::parse_locator(authored).or_signal(env)? {
        None => ().into_lisp(env),
        Some(locator) => CANONICAL.with(|buffer| {
            let mut canonical = buffer.borrow_mut();
            canonical.clear();
            locator.write_canonical(&mut canonical);
            if *canonical == authored {
                Ok(text)
            } else {
                canonical.as_str().into_lisp(env)
            }
        }),
    }
}

thread_local! {
    /// The canonical spelling's buffer, reused from call to call.
    static CANONICAL: RefCell<String> = const { RefCell::new(String::new()) };
}

fn too_small(error: &emacs::Error) -> bool {
    matches!(
        error.downcast_ref::<emacs::ErrorKind>(),
        Some(emacs::ErrorKind::Module(
            emacs::ModuleError::BufferTooSmall { .. }
        ))
    )
}

/// The canonical spelling of address TEXT, or nil for an ordinary path.
/// Returns TEXT itself when it is already canonical. Malformed addresses
/// signal `mevedel-core-resource-error`.
#[defun(name = "resource-parse")]
fn resource_parse<'e>(env: &'e Env, text: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || canonical_value(env, text))
}

/// The canonical spelling of each string in TEXTS (nil for ordinary
/// paths), in one call; a malformed address signals.
#[defun(name = "resource-parse-many")]
fn resource_parse_many<'e>(env: &'e Env, texts: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let out = list_items(texts)?
            .into_iter()
            .map(|v| canonical_value(env, v))
            .collect::<Result<Vec<_>>>()?;
        env.list(&out[..])
    })
}

/// Each absolute file name in FILES with its symbolic links resolved,
/// as `file-truename` resolves it (see `resource::contain::truename`),
/// in one call: ApplyPatch compares every target and protected file.
#[defun(name = "truenames")]
fn truenames<'e>(env: &'e Env, files: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let out = crate::convert::strings(files)?
            .iter()
            .map(|f| {
                mevedel_core::resource::contain::truename(std::path::Path::new(f))
                    .to_string_lossy()
                    .into_owned()
                    .into_lisp(env)
            })
            .collect::<Result<Vec<_>>>()?;
        env.list(&out[..])
    })
}

/// The stamp of each file name in FILES (see `resource::stamp`): a
/// string equal between two calls only if the file did not change, or
/// nil for a missing file.  One call checks every file a prompt caches.
#[defun(name = "file-stamps")]
fn file_stamps<'e>(env: &'e Env, files: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let out = crate::convert::strings(files)?
            .iter()
            .map(
                |f| match mevedel_core::resource::stamp::stamp(std::path::Path::new(f)) {
                    Some(s) => s.into_lisp(env),
                    None => env.intern("nil"),
                },
            )
            .collect::<Result<Vec<_>>>()?;
        env.list(&out[..])
    })
}

/// Prepare ADDRESS for an operation in a session context; ARGS:
/// `:operation` ("Read", "Glob", "Grep", "ApplyPatch"), `:session-dir`,
/// `:workspace`, `:docs-root`, `:memory-roots` (records (PATH KIND
/// LABEL)), `:skills` (records (NAME SOURCE-KEY ROOT ORIGIN PLUGIN)) and
/// `:recall-days`. Returns the opaque attempt; validation failures signal.
#[defun(user_ptr, name = "resource-prepare")]
fn resource_prepare(env: &Env, address: String, args: Value<'_>) -> Result<AttemptPtr> {
    guarded(env, || {
        let mut args = Plist::new(env, "resource-prepare", args)?;
        let operation = args.string(":operation")?;
        let mut ctx = Context {
            session_dir: args.opt_string(":session-dir")?.map(PathBuf::from),
            workspace: args.opt_string(":workspace")?.map(PathBuf::from),
            docs_root: args.opt_string(":docs-root")?.map(PathBuf::from),
            journal_recall_days: args.opt_int(":recall-days")?.unwrap_or(0).max(0) as u64,
            ..Context::default()
        };
        let memory_roots = args.list(":memory-roots")?;
        let skills = args.list(":skills")?;
        args.finish()?;
        let origin = |name: Option<String>| name.map(|n| Origin::parse(&n)).transpose();
        for item in memory_roots {
            let parts = list_items(item)?;
            let get = |i: usize| parts.get(i).copied().map_or(Ok(None), opt_string);
            ctx.memory_roots.push(MemoryRoot {
                path: PathBuf::from(get(0)?.unwrap_or_default()),
                kind: origin(get(1)?).or_signal(env)?,
                label: get(2)?.unwrap_or_default(),
            });
        }
        for item in skills {
            let parts = list_items(item)?;
            let get = |i: usize| parts.get(i).copied().map_or(Ok(None), opt_string);
            ctx.skills.push(Skill {
                name: get(0)?.unwrap_or_default(),
                source_key: get(1)?.unwrap_or_default(),
                root: PathBuf::from(get(2)?.unwrap_or_default()),
                origin: origin(get(3)?).or_signal(env)?.unwrap_or(Origin::Managed),
                plugin: get(4)?,
            });
        }
        let op = Operation::parse(&operation).or_signal(env)?;
        let attempt = resource::prepare(&address, op, &ctx).or_signal(env)?;
        Ok(Arc::new(attempt))
    })
}

/// The logical authority facts of ATTEMPT: (:operation OP :scheme S
/// :canonical C :authored A :write BOOL :paths (BACKING...) :available
/// BOOL). Backing paths are for permission checks, never for the model.
#[defun(name = "resource-attempt-facts")]
fn resource_attempt_facts<'e>(env: &'e Env, attempt: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        to_lisp(env, &attempt.into_ref::<AttemptPtr>()?.facts())
    })
}
