//! Bash analysis (see `bash`).

use emacs::{Env, IntoLisp, Result, Value, defun};

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

/// A list of fresh strings, or nil: one call for the strings' list.
fn string_list<'e, 's>(env: &'e Env, items: impl Iterator<Item = &'s str>) -> Result<Value<'e>> {
    let values = items
        .map(|s| s.into_lisp(env))
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
/// costs a module call per string and list, nothing per key.
#[defun(name = "bash-analyze")]
fn bash_analyze(env: &Env, source: String) -> Result<Value<'_>> {
    guarded(env, || {
        let a = bash::analyze_shared(&source);
        let stages = match &a.final_pipeline {
            Some(stages) => string_list(env, stages.iter().map(|s| s.label.as_str()))?,
            None => ().into_lisp(env)?,
        };
        let plist = [
            kw_class.bind(env),
            a.class.name().into_lisp(env)?,
            kw_reasons.bind(env),
            string_list(env, a.reasons.iter().map(String::as_str))?,
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
