//! Model requests over the module's HTTP client (`mevedel_core::http`):
//! started here, answered by `http` events.

use emacs::{Env, Result, Value, defun};
use mevedel_core::http::{self, Proxies, Request};

use crate::args::Plist;
use crate::errors::OrSignal;
use crate::guard::guarded;

/// POST a request as request ID. ARGS: `:url`, `:headers` ("Name:
/// value" strings), `:body` (strings whose concatenation is the body,
/// so a long saved history is not joined in Lisp first), and the
/// proxies `:proxy` (every request), `:http-proxy`, `:https-proxy`,
/// `:no-proxy`.
#[defun(name = "http-request")]
fn http_request(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "http-request", args)?;
        let url = args.string(":url")?;
        let headers = args.strings(":headers")?;
        let body = args.strings(":body")?.concat().into_bytes();
        let proxies = Proxies {
            all: args.opt_string(":proxy")?,
            http: args.opt_string(":http-proxy")?,
            https: args.opt_string(":https-proxy")?,
            no: args.opt_string(":no-proxy")?,
        };
        args.finish()?;
        let request = Request {
            url,
            headers,
            body,
            proxies,
        };
        http::start(id, request).or_signal(env)
    })
}

/// Stop request ID at once; non-nil when it was still running.
#[defun(name = "http-cancel")]
fn http_cancel(env: &Env, id: i64) -> Result<bool> {
    guarded(env, || Ok(http::cancel(id)))
}
