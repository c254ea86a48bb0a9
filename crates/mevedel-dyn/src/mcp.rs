//! MCP conversions (`mevedel_core::mcp::session`): a user-pointer handle
//! per session's registry, and operations answered by `reply` events,
//! with `mcp-progress` and `mcp-notice` events besides; and the server
//! of mevedel's own tools (`mevedel_core::mcp::serve`), a user-pointer
//! handle whose calls arrive as `mcp-serve-call` events.

use std::cell::Ref;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use emacs::{Env, Result, Value, defun};
use mevedel_core::datum::Datum;
use mevedel_core::error::ErrorKind;
use mevedel_core::mcp::serve;
use mevedel_core::mcp::session::{self, OpenRequest, Session};
use mevedel_core::mcp::{Confinement, Selection, Source};
use mevedel_core::sandbox::launch::Request;

use crate::args::{Plist, fail};
use crate::convert::{list_items, to_lisp};
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
/// `mcp-notice` events carry; `:sandbox`, the sandbox request plist
/// (without a command) of the stdio servers that run confined:
/// `:sandbox-servers`, t for all or a list of names, and of those,
/// `:sandbox-network` (t or names) keep network access.
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
        let sandbox = match args.value(":sandbox")? {
            Some(plist) => {
                let request: Request = Plist::new(env, "mcp-open", plist)?
                    .deserialize(ErrorKind::Sandbox, "bad sandbox request")?;
                Some(Confinement {
                    request,
                    servers: selection(env, &mut args, ":sandbox-servers")?,
                    network: selection(env, &mut args, ":sandbox-network")?,
                })
            }
            None => None,
        };
        let request = OpenRequest {
            files,
            env: vars,
            cwd: args.opt_string(":cwd")?.map(PathBuf::from),
            log_file: args.opt_string(":log-file")?.map(PathBuf::from),
            startup_timeout: millis(args.opt_int(":startup-timeout-ms")?),
            request_timeout: millis(args.opt_int(":request-timeout-ms")?),
            key: args.opt_string(":key")?.unwrap_or_default(),
            sandbox,
        };
        args.finish()?;
        Ok(Session::open(request))
    })
}

/// KEY's servers: t for every one, else a list of names (none when
/// absent).
fn selection(env: &Env, args: &mut Plist<'_>, key: &'static str) -> Result<Selection> {
    match args.value(key)? {
        None => Ok(Selection::Only(Vec::new())),
        Some(v) if v == env.intern("t")? => Ok(Selection::All),
        Some(v) => Ok(Selection::Only(
            list_items(v)?
                .into_iter()
                .map(|name| name.into_rust())
                .collect::<Result<_>>()?,
        )),
    }
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

// ---- mevedel's tools served to an agent (`mevedel_core::mcp::serve`) ----

fn server_of<'e>(handle: Value<'e>) -> Result<Ref<'e, serve::Server>> {
    handle.into_ref::<serve::Server>()
}

/// Serve mevedel's tools over MCP on 127.0.0.1, behind a fresh secret;
/// return the server's handle. ARGS: `:key` (the string its
/// `mcp-serve-call` and `mcp-serve-cancel` events carry) and `:tools`,
/// each (NAME DESCRIPTION SCHEMA), the schema as JSON text.
#[defun(user_ptr, name = "mcp-serve-start")]
fn mcp_serve_start(env: &Env, args: Value<'_>) -> Result<serve::Server> {
    guarded(env, || {
        let mut args = Plist::new(env, "mcp-serve-start", args)?;
        let key = args.string(":key")?;
        let mut tools = Vec::new();
        for item in args.list(":tools")? {
            let name: String = item.car()?;
            let rest = item.cdr::<Value>()?;
            let description: String = rest.car()?;
            let schema: String = rest.cdr::<Value>()?.car()?;
            let schema = match serde_json::from_str(&schema) {
                Ok(serde_json::Value::Object(schema)) => schema,
                _ => {
                    return fail(
                        env,
                        "mcp-serve-start",
                        format_args!("the schema of {name} is not a JSON object"),
                    );
                }
            };
            tools.push(serve::ToolSpec {
                name,
                description,
                schema,
            });
        }
        args.finish()?;
        let secret = serve::new_secret().or_signal(env)?;
        serve::Server::start(tools, secret, Arc::new(serve::LispResponder { key })).or_signal(env)
    })
}

/// Where clients reach HANDLE's server: (:url URL :secret BEARER-TOKEN).
#[defun(name = "mcp-serve-address")]
fn mcp_serve_address<'e>(env: &'e Env, handle: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let server = server_of(handle)?;
        to_lisp(
            env,
            &Datum::plist([
                ("url", Datum::str(server.url())),
                ("secret", Datum::str(server.secret())),
            ]),
        )
    })
}

/// Stop HANDLE's server: no more requests, and its waiting calls end.
#[defun(name = "mcp-serve-stop")]
fn mcp_serve_stop(env: &Env, handle: Value<'_>) -> Result<()> {
    guarded(env, || {
        server_of(handle)?.stop();
        Ok(())
    })
}

/// Answer the served call ID; non-nil when its client still waited.
/// ARGS: `:text` (a string), `:images` (a list of (BASE64 . MIME)),
/// `:error` (non-nil when the call failed).
#[defun(name = "mcp-serve-answer")]
fn mcp_serve_answer(env: &Env, id: i64, args: Value<'_>) -> Result<bool> {
    guarded(env, || {
        let mut args = Plist::new(env, "mcp-serve-answer", args)?;
        let mut parts: Vec<serve::Part> = args
            .opt_string(":text")?
            .into_iter()
            .map(serve::Part::Text)
            .collect();
        for image in args.list(":images")? {
            parts.push(serve::Part::Image {
                data: image.car()?,
                mime: image.cdr()?,
            });
        }
        let is_error = args.bool(":error")?;
        args.finish()?;
        Ok(serve::answer(id, serve::Answer { parts, is_error }))
    })
}
