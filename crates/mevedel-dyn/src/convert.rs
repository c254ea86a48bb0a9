//! [`Datum`] to Lisp values, on the main thread.

use emacs::{Env, IntoLisp, Result, Value};
use mevedel_core::datum::Datum;

pub fn to_lisp<'e>(env: &'e Env, datum: &Datum) -> Result<Value<'e>> {
    match datum {
        Datum::Nil => ().into_lisp(env),
        Datum::T => true.into_lisp(env),
        Datum::Int(n) => n.into_lisp(env),
        Datum::Float(x) => x.into_lisp(env),
        Datum::Str(s) => s.as_str().into_lisp(env),
        Datum::Symbol(name) => env.intern(name),
        Datum::List(items) => {
            let values = items
                .iter()
                .map(|d| to_lisp(env, d))
                .collect::<Result<Vec<_>>>()?;
            env.list(&values[..])
        }
    }
}

/// The elements of the Lisp list LIST.
pub fn list_items(list: Value<'_>) -> Result<Vec<Value<'_>>> {
    let mut out = Vec::new();
    let mut rest = list;
    while rest.is_not_nil() {
        out.push(rest.car()?);
        rest = rest.cdr()?;
    }
    Ok(out)
}

/// The strings of the Lisp list LIST.
pub fn strings(list: Value<'_>) -> Result<Vec<String>> {
    list_items(list)?
        .into_iter()
        .map(|v| v.into_rust())
        .collect()
}
