//! Bash analysis (see `bash`).

use emacs::{Env, Result, Value, defun};

use super::convert::to_lisp;
use super::guard::guarded;
use crate::bash;
use crate::datum::Datum;

/// Analyse SOURCE without running it: a plist with `:class` (a string:
/// read-only, mutating, unknown, complex, dangerous), `:reasons`,
/// `:background`, `:parse-error`, `:read-only`, `:snapshot`,
/// `:pipelines` and `:stages` (labels of the final pipeline's stages).
#[defun(name = "bash-analyze")]
fn bash_analyze(env: &Env, source: String) -> Result<Value<'_>> {
    guarded(env, || {
        let a = bash::analyze(&source);
        let datum = Datum::plist([
            ("class", Datum::str(a.class.name())),
            (
                "reasons",
                Datum::List(a.reasons.iter().map(Datum::str).collect()),
            ),
            ("background", Datum::bool(a.background)),
            ("parse-error", Datum::bool(a.parse_error)),
            ("read-only", Datum::bool(a.read_only())),
            ("snapshot", Datum::bool(a.snapshot())),
            ("pipelines", Datum::Int(a.pipelines as i64)),
            (
                "stages",
                a.final_pipeline.as_ref().map_or(Datum::Nil, |stages| {
                    Datum::List(stages.iter().map(|s| Datum::str(&s.label)).collect())
                }),
            ),
        ]);
        to_lisp(env, &datum)
    })
}
