//! MCP conversions (`mevedel_core::mcp::session`): a user-pointer handle
//! per session's registry, and operations answered by `reply` events,
//! with `mcp-progress` and `mcp-notice` events besides.

use std::cell::Ref;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use emacs::{Env, Result, Value, defun};
use mevedel_core::datum::Datum;
use mevedel_core::mcp::Source;
use mevedel_core::mcp::session::{self, OpenRequest, Session};

use crate::args::{Plist, fail};
use crate::convert::to_lisp;
use crate::errors::OrSignal;
use crate::guard::guarded;

fn session_of<'e>(handle: Value<'e>) -> Result<Ref<'e, Session>> {
    handle.into_ref::<Session>()
}

fn millis(ms: Option<i64>) -> Option<Duration> {
    ms.filter(|ms| *ms > 0)
        .map(|ms| Duration::from_millis(ms as u64))
}

/// Open a registry of MCP servers, starting none; return its handle.
/// ARGS: `:files`, a list of (FILE SOURCE) with SOURCE one of "user",
/// "workspace" or "command-line" in merge order (missing files are
/// skipped); `:env`, a list of (NAME . VALUE) strings that `${VAR}`
/// expands from and stdio servers start with; `:cwd`; `:log-file`;
/// `:startup-timeout-ms`; `:request-timeout-ms`; `:key`, the string
/// `mcp-notice` events carry.
#[defun(user_ptr, name = "mcp-open")]
fn mcp_open(env: &Env, args: Value<'_>) -> Result<Session> {
    guarded(env, || {
        let mut args = Plist::new(env, "mcp-open", args)?;
        let mut files = Vec::new();
        for item in args.list(":files")? {
            let file: String = item.car()?;
            let source: String = item.cdr::<Value>()?.car()?;
            let source = match source.as_str() {
                "user" => Source::User,
                "workspace" => Source::Workspace,
                "command-line" => Source::CommandLine,
                other => return fail(env, "mcp-open", format_args!("unknown source `{other}`")),
            };
            files.push((PathBuf::from(file), source));
        }
        let mut vars = HashMap::new();
        for pair in args.list(":env")? {
            vars.insert(pair.car::<String>()?, pair.cdr::<String>()?);
        }
        let request = OpenRequest {
            files,
            env: vars,
            cwd: args.opt_string(":cwd")?.map(PathBuf::from),
            log_file: args.opt_string(":log-file")?.map(PathBuf::from),
            startup_timeout: millis(args.opt_int(":startup-timeout-ms")?),
            request_timeout: millis(args.opt_int(":request-timeout-ms")?),
            key: args.opt_string(":key")?.unwrap_or_default(),
        };
        args.finish()?;
        Ok(Session::open(request))
    })
}

/// The configuration files HANDLE's registry read: plists (:file
/// :source :sha256 :servers :error).
#[defun(name = "mcp-files")]
fn mcp_files<'e>(env: &'e Env, handle: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || to_lisp(env, &session_of(handle)?.files()))
}

/// Approve the workspace servers of the file whose text hashes to
/// SHA256; return their names.
#[defun(name = "mcp-approve")]
fn mcp_approve<'e>(env: &'e Env, handle: Value<'e>, sha256: String) -> Result<Value<'e>> {
    guarded(env, || {
        let names = session_of(handle)?.approve(&sha256).or_signal(env)?;
        to_lisp(
            env,
            &Datum::List(names.into_iter().map(Datum::Str).collect()),
        )
    })
}

/// Every server's status in HANDLE's registry: a list of plists.
#[defun(name = "mcp-status")]
fn mcp_status<'e>(env: &'e Env, handle: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || to_lisp(env, &session_of(handle)?.status()))
}

/// Start server NAME of HANDLE (nil: every approved one, in parallel);
/// the reply for request ID is t, or for all a list of (NAME ERROR).
#[defun(name = "mcp-start")]
fn mcp_start(env: &Env, id: i64, handle: Value<'_>, name: Option<String>) -> Result<()> {
    guarded(env, || session_of(handle)?.start(id, name).or_signal(env))
}

/// Stop server NAME of HANDLE (nil: all); the reply for ID is t.
#[defun(name = "mcp-stop")]
fn mcp_stop(env: &Env, id: i64, handle: Value<'_>, name: Option<String>) -> Result<()> {
    guarded(env, || session_of(handle)?.stop(id, name).or_signal(env))
}

/// Restart server NAME of HANDLE now; the reply for ID is t.
#[defun(name = "mcp-restart")]
fn mcp_restart(env: &Env, id: i64, handle: Value<'_>, name: String) -> Result<()> {
    guarded(env, || session_of(handle)?.restart(id, name).or_signal(env))
}

/// List server NAME's tools; the reply for ID is a list of plists
/// (:server :name :full-name :title :description :input-schema
/// :annotations), the schema as JSON text.
#[defun(name = "mcp-tools")]
fn mcp_tools(env: &Env, id: i64, handle: Value<'_>, name: String) -> Result<()> {
    guarded(env, || {
        session_of(handle)?.list_tools(id, name).or_signal(env)
    })
}

/// Call a tool; the reply for request ID is (:content :structured
/// :is-error). ARGS: `:handle`, `:server`, `:tool`, `:arguments` (JSON
/// text of an object) and `:timeout-ms`.
#[defun(name = "mcp-call")]
fn mcp_call(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "mcp-call", args)?;
        let handle = args.required(":handle", "an MCP handle")?;
        let server = args.string(":server")?;
        let tool = args.string(":tool")?;
        let arguments = args.opt_string(":arguments")?.unwrap_or_default();
        let timeout = millis(args.opt_int(":timeout-ms")?);
        args.finish()?;
        session_of(handle)?
            .call_tool(id, server, tool, &arguments, timeout)
            .or_signal(env)
    })
}

/// Cancel tool call ID; non-nil when it was in flight.
#[defun(name = "mcp-cancel")]
fn mcp_cancel(env: &Env, id: i64) -> Result<bool> {
    guarded(env, || Ok(session::cancel(id)))
}

/// List server NAME's resources; the reply for ID is (:resources
/// :templates).
#[defun(name = "mcp-resources")]
fn mcp_resources(env: &Env, id: i64, handle: Value<'_>, name: String) -> Result<()> {
    guarded(env, || {
        session_of(handle)?.list_resources(id, name).or_signal(env)
    })
}

/// Read URI from server NAME; the reply for ID is a list of content
/// plists.
#[defun(name = "mcp-read")]
fn mcp_read(env: &Env, id: i64, handle: Value<'_>, name: String, uri: String) -> Result<()> {
    guarded(env, || {
        session_of(handle)?
            .read_resource(id, name, uri)
            .or_signal(env)
    })
}

/// List server NAME's prompts; the reply for ID is a list of plists
/// (:server :name :command :title :description :arguments), each
/// argument (:name :description :required).
#[defun(name = "mcp-prompts")]
fn mcp_prompts(env: &Env, id: i64, handle: Value<'_>, name: String) -> Result<()> {
    guarded(env, || {
        session_of(handle)?.list_prompts(id, name).or_signal(env)
    })
}

/// Fill in a prompt; the reply for ID is (:description :messages), each
/// message (:role :content) with one content plist. ARGS: `:handle`,
/// `:server`, `:prompt` and `:arguments`, a list of (NAME . VALUE)
/// strings.
#[defun(name = "mcp-prompt")]
fn mcp_prompt(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "mcp-prompt", args)?;
        let handle = args.required(":handle", "an MCP handle")?;
        let server = args.string(":server")?;
        let prompt = args.string(":prompt")?;
        let mut arguments = HashMap::new();
        for pair in args.list(":arguments")? {
            arguments.insert(pair.car::<String>()?, pair.cdr::<String>()?);
        }
        args.finish()?;
        session_of(handle)?
            .get_prompt(id, server, prompt, arguments)
            .or_signal(env)
    })
}
