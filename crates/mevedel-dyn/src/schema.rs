//! Tool contracts: compile a declaration into a handle, check one call's
//! arguments against it, index a catalog of handles and search it.
//!
//! A handle is a `user-ptr` owning an `Arc<CompiledTool>` (no `RefCell`:
//! handles are read-only, so they are taken as `Value` and converted with
//! `into_rust`, which borrows nothing); the GC frees it once the registry
//! lets go.
//! Arguments cross as JSON text (the only representation that keeps null,
//! false, {} and [] apart cheaply); results come back as Lisp values.

use std::sync::Arc;

use emacs::{Env, IntoLisp, OnceGlobalRef, Result, Value, Vector, defun};
use mevedel_core::datum::Datum;
use mevedel_core::schema::tool_search;
use mevedel_core::schema::{CompiledTool, Issue, Outcome, Repair};
use serde_json::Value as JsonValue;

use crate::convert::to_lisp;
use crate::errors::OrSignal;
use crate::guard::guarded;

// Interned once at load: a module call per `intern` would cost more than
// building the rest of a result.
emacs::use_symbols! {
    json_null => ":null"
    json_false => ":json-false"
    repaired invalid abandoned
    omit_null parse_json_string wrap_singleton empty_object_to_array unwrap_autolink clamp_number
    null boolean integer number string array object empty_object empty_array absent
    markdown_autolink
}

/// The symbol named NAME (a rule id or shape name of the schema library).
fn symbol<'e>(env: &'e Env, name: &str) -> Result<Value<'e>> {
    let known: &'static OnceGlobalRef = match name {
        "omit-null" => omit_null,
        "parse-json-string" => parse_json_string,
        "wrap-singleton" => wrap_singleton,
        "empty-object-to-array" => empty_object_to_array,
        "unwrap-autolink" => unwrap_autolink,
        "clamp-number" => clamp_number,
        "null" => null,
        "boolean" => boolean,
        "integer" => integer,
        "number" => number,
        "string" => string,
        "array" => array,
        "object" => object,
        "empty-object" => empty_object,
        "empty-array" => empty_array,
        "absent" => absent,
        "markdown-autolink" => markdown_autolink,
        _ => return env.intern(name),
    };
    known.into_lisp(env)
}

/// Compile the tool DESCRIPTOR (JSON text). Return (HANDLE PROVIDER-SCHEMA
/// GPTEL-ARGS SHAPE SUMMARY): the two JSON texts, the calling shape, and
/// the summary (declared or derived from the description).
#[defun(name = "schema-compile")]
fn schema_compile(env: &Env, descriptor: String) -> Result<Value<'_>> {
    guarded(env, || {
        let tool = CompiledTool::compile(&descriptor).or_signal(env)?;
        let provider = tool.provider_schema.as_str().into_lisp(env)?;
        let gptel_args = tool.gptel_args.as_str().into_lisp(env)?;
        let shape = tool.shape.as_str().into_lisp(env)?;
        let summary = tool.spec.summary.as_str().into_lisp(env)?;
        let handle = Arc::new(tool).into_lisp(env)?;
        env.list((handle, provider, gptel_args, shape, summary))
    })
}

/// Check ARGUMENTS (JSON text) against TOOL, repairing when REPAIR is
/// non-nil. Return t when valid as sent, else one of
///   (repaired ARGS NOTE AUDIT)
///   (invalid GUIDANCE ISSUES)
///   (abandoned GUIDANCE ISSUES AUDIT)
/// ARGS is the JSON-faithful plist (see [`json_to_lisp`]), AUDIT is
/// ((RULE-NUMBER RULE-ID INSTANCE-PATH SCHEMA-PATH BEFORE AFTER) ...) with
/// symbols for RULE-ID, BEFORE and AFTER, and ISSUES is ((INSTANCE-PATH
/// SCHEMA-PATH) ...). The values are built here rather than parsed from
/// text in Lisp: every byte a call allocates in Lisp is paid again in
/// garbage collection.
#[defun(name = "schema-check")]
fn schema_check<'e>(
    env: &'e Env,
    tool: Value<'e>,
    arguments: String,
    repair: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let tool: &Arc<CompiledTool> = tool.into_rust()?;
        match tool
            .check_json(&arguments, repair.is_not_nil())
            .or_signal(env)?
        {
            Outcome::Valid => true.into_lisp(env),
            Outcome::Repaired {
                arguments,
                repairs,
                note,
            } => env.list((
                repaired,
                json_to_lisp(env, &arguments, true)?,
                text(env, &note)?,
                audit(env, &repairs)?,
            )),
            Outcome::Invalid { issues, guidance } => {
                env.list((env.intern("invalid")?, guidance, issue_list(env, &issues)?))
            }
            Outcome::Abandoned {
                issues,
                repairs,
                guidance,
            } => env.list((
                abandoned,
                text(env, &guidance)?,
                issue_list(env, &issues)?,
                audit(env, &repairs)?,
            )),
        }
    })
}

/// The ToolSearch index of TOOLS (a vector of handles, the caller's
/// catalog): a `user-ptr` a caller keeps while its catalog stays the
/// same, so that a search does not cross the seam once per tool.
#[defun(name = "schema-index")]
fn schema_index<'e>(env: &'e Env, tools: Vector<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let mut catalog: Vec<Arc<CompiledTool>> = Vec::with_capacity(tools.len());
        for i in 0..tools.len() {
            let tool: &Arc<CompiledTool> = tools.get(i)?;
            catalog.push(Arc::clone(tool));
        }
        Arc::new(tool_search::Index::new(catalog)).into_lisp(env)
    })
}

/// Search INDEX (from `schema-index`) for QUERY. Return (KIND TEXT SHOWN
/// TOTAL): KIND is `contracts', `shapes' or `none'; SHOWN lists the
/// identities the text shows.
#[defun(name = "schema-search")]
fn schema_search<'e>(env: &'e Env, index: Value<'e>, query: String) -> Result<Value<'e>> {
    guarded(env, || {
        let index: &Arc<tool_search::Index> = index.into_rust()?;
        let answer = index.search(&query);
        to_lisp(
            env,
            &Datum::List(vec![
                Datum::Symbol(answer.kind.name().into()),
                Datum::Str(answer.text),
                Datum::List(answer.shown.into_iter().map(Datum::Str).collect()),
                Datum::Int(answer.total as i64),
            ]),
        )
    })
}

/// The full contract of TOOL, as ToolSearch shows it.
#[defun(name = "schema-contract")]
fn schema_contract<'e>(env: &'e Env, tool: Value<'e>) -> Result<String> {
    guarded(env, || {
        let tool: &Arc<CompiledTool> = tool.into_rust()?;
        Ok(tool_search::contract(tool))
    })
}

/// S as a Lisp string. ASCII goes in as a unibyte string, which Lisp
/// treats the same but which the module API makes with one allocation
/// instead of two (a multibyte string is decoded into a second copy).
fn text<'e>(env: &'e Env, s: &str) -> Result<Value<'e>> {
    if s.is_ascii() {
        s.as_bytes().into_lisp(env)
    } else {
        s.into_lisp(env)
    }
}

/// VALUE as JSON-faithful Lisp data: objects are keyword plists, arrays
/// vectors, null `:null`, false `:json-false`, true t, and an empty
/// object an empty hash table, except that the TOP-level object (the
/// argument plist) is nil when empty.
fn json_to_lisp<'e>(env: &'e Env, value: &JsonValue, top: bool) -> Result<Value<'e>> {
    match value {
        JsonValue::Null => json_null.into_lisp(env),
        JsonValue::Bool(true) => true.into_lisp(env),
        JsonValue::Bool(false) => json_false.into_lisp(env),
        JsonValue::Number(n) => match n.as_i64() {
            Some(i) => i.into_lisp(env),
            None => n.as_f64().unwrap_or(f64::NAN).into_lisp(env),
        },
        JsonValue::String(s) => text(env, s),
        JsonValue::Array(items) => {
            let items = items
                .iter()
                .map(|v| json_to_lisp(env, v, false))
                .collect::<Result<Vec<_>>>()?;
            env.vector(&items[..])
        }
        JsonValue::Object(map) if map.is_empty() && !top => env.call("make-hash-table", &[][..]),
        JsonValue::Object(map) => {
            let mut plist = Vec::with_capacity(map.len() * 2);
            for (key, v) in map {
                plist.push(env.intern(&format!(":{key}"))?);
                plist.push(json_to_lisp(env, v, false)?);
            }
            env.list(&plist[..])
        }
    }
}

/// ((RULE-NUMBER RULE-ID INSTANCE-PATH SCHEMA-PATH BEFORE AFTER) ...).
fn audit<'e>(env: &'e Env, repairs: &[Repair]) -> Result<Value<'e>> {
    let entries = repairs
        .iter()
        .map(|r| {
            env.list((
                i64::from(r.rule.number()),
                symbol(env, r.rule.id())?,
                text(env, &r.instance_path)?,
                text(env, &r.schema_path)?,
                symbol(env, r.before)?,
                symbol(env, r.after)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    env.list(&entries[..])
}

/// ((INSTANCE-PATH SCHEMA-PATH) ...); the messages are in the guidance.
fn issue_list<'e>(env: &'e Env, issues: &[Issue]) -> Result<Value<'e>> {
    let entries = issues
        .iter()
        .map(|i| env.list((text(env, &i.instance_path)?, text(env, &i.schema_path)?)))
        .collect::<Result<Vec<_>>>()?;
    env.list(&entries[..])
}
