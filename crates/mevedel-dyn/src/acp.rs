//! ACP conversions (`mevedel_core::acp::session`): a user-pointer handle
//! per agent process; operations answered by `reply` events, with
//! `acp-update`, `acp-request` and `acp-exited` events besides.

use std::cell::Ref;
use std::path::PathBuf;
use std::time::Duration;

use emacs::{Env, Result, Value, defun};
use mevedel_core::acp::session::{self, Agent, Answer, StartRequest};
use mevedel_core::acp::{AgentConfig, SessionOptions, schema};
use mevedel_core::error::ErrorKind;
use mevedel_core::exec::execution::Spec;

use crate::args::{Plist, fail};
use crate::errors::OrSignal;
use crate::guard::guarded;

fn agent_of<'e>(handle: Value<'e>) -> Result<Ref<'e, Agent>> {
    handle.into_ref::<Agent>()
}

fn millis(ms: Option<i64>) -> Option<Duration> {
    ms.filter(|ms| *ms > 0)
        .map(|ms| Duration::from_millis(ms as u64))
}

fn pairs(items: Vec<Value<'_>>) -> Result<Vec<(String, String)>> {
    items
        .into_iter()
        .map(|pair| Ok((pair.car::<String>()?, pair.cdr::<String>()?)))
        .collect()
}

/// Start an ACP agent in the background and return its handle; the
/// reply for request ID is (:name :title :version :load-session :mcp-http :pid)
/// once it answered `initialize`. ARGS: `:name` (the agent as the user
/// calls it), `:command`, `:args`, `:env` (a list of (NAME . VALUE) set
/// on top of Emacs's environment), `:cwd`, `:key` (the string its events
/// carry), `:stderr-log`, `:startup-timeout-ms`, `:request-timeout-ms`.
#[defun(user_ptr, name = "acp-start")]
fn acp_start(env: &Env, id: i64, args: Value<'_>) -> Result<Agent> {
    guarded(env, || {
        let mut args = Plist::new(env, "acp-start", args)?;
        let config = AgentConfig {
            name: args.string(":name")?,
            command: args.string(":command")?,
            args: args.strings(":args")?,
            env: pairs(args.list(":env")?)?,
            cwd: PathBuf::from(args.string(":cwd")?),
        };
        let request = StartRequest {
            key: args.opt_string(":key")?.unwrap_or_default(),
            stderr_log: args.opt_string(":stderr-log")?.map(PathBuf::from),
            startup_timeout: millis(args.opt_int(":startup-timeout-ms")?),
            request_timeout: millis(args.opt_int(":request-timeout-ms")?),
        };
        args.finish()?;
        Agent::start(id, config, request).or_signal(env)
    })
}

/// One MCP server of `acp-new-session`: (:name :command :args :env) for
/// stdio, (:name :url :headers) for HTTP.
fn mcp_server(env: &Env, item: Value<'_>) -> Result<schema::McpServer> {
    let mut server = Plist::new(env, "acp-new-session", item)?;
    let name = server.string(":name")?;
    let url = server.opt_string(":url")?;
    let headers = pairs(server.list(":headers")?)?;
    let command = server.opt_string(":command")?;
    let args = server.strings(":args")?;
    let vars = pairs(server.list(":env")?)?;
    server.finish()?;
    match (url, command) {
        (Some(url), None) => Ok(schema::McpServer::Http(
            schema::McpServerHttp::new(name, url).headers(
                headers
                    .into_iter()
                    .map(|(k, v)| schema::HttpHeader::new(k, v))
                    .collect(),
            ),
        )),
        (None, Some(command)) => Ok(schema::McpServer::Stdio(
            schema::McpServerStdio::new(name, command).args(args).env(
                vars.into_iter()
                    .map(|(k, v)| schema::EnvVariable::new(k, v))
                    .collect(),
            ),
        )),
        _ => fail(
            env,
            "acp-new-session",
            format_args!("MCP server {name} needs either :url or :command"),
        ),
    }
}

/// Open a session, or with `:load` reopen that session (`session/load`,
/// its history replayed as `acp-update` events first); the reply for
/// request ID is (:session-id :modes :models), the last two as the
/// agent's JSON. ARGS: `:handle`, `:load`, `:cwd`, `:disallowed-tools`
/// (Claude Code's built-in tools to switch off), `:mcp-servers`
/// (plists, see `mcp_server`).
#[defun(name = "acp-new-session")]
fn acp_new_session(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "acp-new-session", args)?;
        let handle = args.required(":handle", "an ACP agent handle")?;
        let load = args.opt_string(":load")?;
        let cwd = args.opt_string(":cwd")?.map(PathBuf::from);
        let disallowed_tools = args.strings(":disallowed-tools")?;
        let mut mcp_servers = Vec::new();
        for item in args.list(":mcp-servers")? {
            mcp_servers.push(mcp_server(env, item)?);
        }
        args.finish()?;
        let options = SessionOptions {
            cwd,
            mcp_servers,
            disallowed_tools,
            meta: None,
        };
        let agent = agent_of(handle)?;
        match load {
            Some(session) => agent.load_session(id, session, options),
            None => agent.new_session(id, options),
        }
        .or_signal(env)
    })
}

/// Choose MODEL for SESSION of HANDLE's agent; the reply for request ID
/// is t, or the agent's error.
#[defun(name = "acp-set-model")]
fn acp_set_model(
    env: &Env,
    id: i64,
    handle: Value<'_>,
    session: String,
    model: String,
) -> Result<()> {
    guarded(env, || {
        agent_of(handle)?
            .set_model(id, session, model)
            .or_signal(env)
    })
}

/// Run a turn of SESSION with TEXTS, its prompt's text blocks; the
/// reply for request ID is (:stop-reason :input :output :cached-read
/// :cached-write :thought).
#[defun(name = "acp-prompt")]
fn acp_prompt(
    env: &Env,
    id: i64,
    handle: Value<'_>,
    session: String,
    texts: Value<'_>,
) -> Result<()> {
    guarded(env, || {
        let texts = crate::convert::strings(texts)?;
        agent_of(handle)?.prompt(id, session, texts).or_signal(env)
    })
}

/// Ask HANDLE's agent to end SESSION's turn (`session/cancel`).
#[defun(name = "acp-cancel")]
fn acp_cancel(env: &Env, handle: Value<'_>, session: String) -> Result<()> {
    guarded(env, || agent_of(handle)?.cancel(&session).or_signal(env))
}

/// Stop HANDLE's agent and all its processes; the reply for request ID
/// is t once none is left.
#[defun(name = "acp-stop")]
fn acp_stop(env: &Env, id: i64, handle: Value<'_>) -> Result<()> {
    guarded(env, || agent_of(handle)?.stop(id).or_signal(env))
}

/// Whether any process of HANDLE's agent is alive.
#[defun(name = "acp-alive")]
fn acp_alive(env: &Env, handle: Value<'_>) -> Result<bool> {
    guarded(env, || Ok(agent_of(handle)?.alive()))
}

/// Answer the agent's request ID; non-nil when it was waiting. ARGS is
/// one of (:text TEXT) for a read, (:written t) for a write, (:option
/// ID) or (:cancelled t) for a permission, (:terminal SPEC) for
/// terminal/create (SPEC an execution spec, as `exec-start` takes),
/// (:error-code CODE :error-message MESSAGE) for any.
#[defun(name = "acp-answer")]
fn acp_answer(env: &Env, id: i64, args: Value<'_>) -> Result<bool> {
    guarded(env, || {
        let mut args = Plist::new(env, "acp-answer", args)?;
        let text = args.opt_string(":text")?;
        let written = args.bool(":written")?;
        let option = args.opt_string(":option")?;
        let cancelled = args.bool(":cancelled")?;
        let terminal = match args.value(":terminal")? {
            Some(spec) => Some(
                Plist::new(env, "acp-answer", spec)?
                    .deserialize::<Spec>(ErrorKind::Exec, "bad execution spec")?,
            ),
            None => None,
        };
        let code = args.opt_int(":error-code")?;
        let message = args.opt_string(":error-message")?;
        args.finish()?;
        if let Some(spec) = terminal {
            if text.is_some() || written || option.is_some() || cancelled || code.is_some() {
                return fail(env, "acp-answer", ":terminal goes alone");
            }
            return Ok(session::answer(id, Answer::Terminal(Box::new(spec))));
        }
        let answer = match (text, written, option, cancelled, code) {
            (Some(text), false, None, false, None) => Answer::Text(text),
            (None, true, None, false, None) => Answer::Written,
            (None, false, Some(option), false, None) => Answer::Option(option),
            (None, false, None, true, None) => Answer::Cancelled,
            (None, false, None, false, Some(code)) => {
                Answer::Error(code as i32, message.unwrap_or_default())
            }
            _ => {
                return fail(
                    env,
                    "acp-answer",
                    "give exactly one of :text, :written, :option, :cancelled, :terminal \
                     or :error-code",
                );
            }
        };
        Ok(session::answer(id, answer))
    })
}

/// Stop every agent and wait up to LIMIT-MS until none of their
/// processes is left (Emacs is exiting); return how many ran.
#[defun(name = "acp-stop-all")]
fn acp_stop_all(env: &Env, limit_ms: i64) -> Result<i64> {
    guarded(env, || {
        let limit = Duration::from_millis(limit_ms.max(0) as u64);
        session::stop_all(limit).map(|n| n as i64).or_signal(env)
    })
}
