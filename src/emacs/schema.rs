//! Tool contracts: compile a declaration into a handle, check one call's
//! arguments against it, search a catalog of handles.
//!
//! A handle is a `user-ptr` owning an `Arc<CompiledTool>` (no `RefCell`:
//! handles are read-only, so they are taken as `Value` and converted with
//! `into_rust`, see hazard 5); the GC frees it once the registry lets go. Arguments cross as JSON text (the
//! only representation that keeps null, false, {} and [] apart cheaply).

use std::sync::Arc;

use emacs::{Env, IntoLisp, Result, Value, Vector, defun};

use super::convert::to_lisp;
use super::errors::OrSignal;
use super::guard::guarded;
use crate::datum::Datum;
use crate::schema::search;
use crate::schema::{CompiledTool, Outcome};

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
/// non-nil. Return t when valid as sent, else one JSON text (cheaper to
/// hand over than a tree of Lisp values) describing the outcome; see
/// [`crate::schema::Outcome::to_json`].
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
            outcome => outcome.to_json().into_lisp(env),
        }
    })
}

/// Search TOOLS (a vector of handles, the caller's catalog) for QUERY.
/// Return (KIND TEXT SHOWN TOTAL): KIND is `contracts', `shapes' or
/// `none'; SHOWN lists the identities the text shows.
#[defun(name = "schema-search")]
fn schema_search<'e>(env: &'e Env, tools: Vector<'e>, query: String) -> Result<Value<'e>> {
    guarded(env, || {
        let mut handles: Vec<&Arc<CompiledTool>> = Vec::with_capacity(tools.len());
        for i in 0..tools.len() {
            handles.push(tools.get(i)?);
        }
        let catalog: Vec<&CompiledTool> = handles.iter().map(|t| t.as_ref()).collect();
        let answer = search::search(&catalog, &query);
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
        Ok(search::contract(tool))
    })
}
