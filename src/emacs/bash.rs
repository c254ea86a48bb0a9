//! Bash analysis (see `bash`).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use emacs::{Env, GlobalRef, IntoLisp, Result, Value, defun};

use super::guard::guarded;
use crate::bash;

emacs::use_symbols! {
    kw_class => ":class"
    kw_reasons => ":reasons"
    kw_background => ":background"
    kw_parse_error => ":parse-error"
    kw_read_only => ":read-only"
    kw_snapshot => ":snapshot"
    kw_pipelines => ":pipelines"
    kw_stages => ":stages"
}

/// Most distinct class names and stage labels kept as shared strings.
const SHARED_MAX: usize = 512;

/// Lisp strings for class names and stage labels (command names, mostly),
/// made once and shared by every result: a result then allocates only
/// its conses, which is what the garbage collector's cost follows.
static SHARED: LazyLock<Mutex<HashMap<String, &'static GlobalRef>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The shared Lisp string TEXT; a fresh one once [`SHARED_MAX`] are kept.
fn shared<'e>(env: &'e Env, text: &str) -> Result<Value<'e>> {
    let mut table = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = table.get(text).copied() {
        return Ok(known.bind(env));
    }
    let value = text.into_lisp(env)?;
    if table.len() < SHARED_MAX {
        // Kept for the session (at most SHARED_MAX of them): a reference
        // that lives as long as the module lets results borrow it freely.
        table.insert(
            text.to_string(),
            Box::leak(Box::new(value.make_global_ref())),
        );
    }
    Ok(value)
}

/// A list of strings (shared when SHARE), or nil: one call for the list.
fn string_list<'e, 's>(
    env: &'e Env,
    share: bool,
    items: impl Iterator<Item = &'s str>,
) -> Result<Value<'e>> {
    let values = items
        .map(|s| {
            if share {
                shared(env, s)
            } else {
                s.into_lisp(env)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    if values.is_empty() {
        ().into_lisp(env)
    } else {
        env.list(&values[..])
    }
}

/// Analyse SOURCE without running it: a plist with `:class` (a string:
/// read-only, mutating, unknown, complex, dangerous), `:reasons`,
/// `:background`, `:parse-error`, `:read-only`, `:snapshot`,
/// `:pipelines` and `:stages` (labels of the final pipeline's stages).
///
/// Built with one `list` call over pre-interned keywords: per call this
/// costs a module call per string and list, nothing per key.  The class
/// and stage strings are shared between results: do not modify them.
#[defun(name = "bash-analyze")]
fn bash_analyze(env: &Env, source: String) -> Result<Value<'_>> {
    guarded(env, || {
        let a = bash::analyze_shared(&source);
        let stages = match &a.final_pipeline {
            Some(stages) => string_list(env, true, stages.iter().map(|s| s.label.as_str()))?,
            None => ().into_lisp(env)?,
        };
        let plist = [
            kw_class.bind(env),
            shared(env, a.class.name())?,
            kw_reasons.bind(env),
            string_list(env, false, a.reasons.iter().map(String::as_str))?,
            kw_background.bind(env),
            a.background.into_lisp(env)?,
            kw_parse_error.bind(env),
            a.parse_error.into_lisp(env)?,
            kw_read_only.bind(env),
            a.read_only().into_lisp(env)?,
            kw_snapshot.bind(env),
            a.snapshot().into_lisp(env)?,
            kw_pipelines.bind(env),
            (a.pipelines as i64).into_lisp(env)?,
            kw_stages.bind(env),
            stages,
        ];
        env.list(&plist[..])
    })
}
