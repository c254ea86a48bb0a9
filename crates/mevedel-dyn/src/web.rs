//! WebFetch and WebSearch conversions: started here, answered by `reply`
//! events (`mevedel_core::web`).
//!
//! A body crosses as a string of characters U+0000..U+00FF (Lisp decodes
//! the response bytes as Latin-1, which the module API can copy); the
//! worker turns each character back into its byte, so the main thread
//! only copies.

use emacs::{Env, Result, Value, defun};
use mevedel_core::web::{self, Job, Kind};

use crate::args::{Plist, fail};
use crate::errors::OrSignal;
use crate::guard::guarded;
use crate::text::copy_exact;

/// BODY's text, as UTF-8 of its Latin-1 characters (see the module docs).
fn body_bytes(env: &Env, body: Value<'_>) -> Result<Vec<u8>> {
    Ok(copy_exact(env, body)?.bytes().to_vec())
}

/// Convert a response body in the background; the reply for request
/// ID carries the result. ARGS: `:kind` and `:body` (see the module
/// docs), and per kind: "html" `:charset` and `:url` (reply (:text :title
/// :charset)), "text" `:charset` (reply (:text :charset)), "search"
/// `:allowed` and `:blocked` (reply (:results :challenge)),
/// "youtube-page" (reply (:title :author :description :captions)) or
/// "captions" (reply: the text).
#[defun(name = "web-convert")]
fn web_convert(env: &Env, id: i64, args: Value<'_>) -> Result<()> {
    guarded(env, || {
        let mut args = Plist::new(env, "web-convert", args)?;
        let body = args.required(":body", "a string")?;
        let kind = match args.string(":kind")?.as_str() {
            "html" => Kind::Html {
                charset: args.opt_string(":charset")?,
                url: args.opt_string(":url")?.unwrap_or_default(),
            },
            "text" => Kind::Text {
                charset: args.opt_string(":charset")?,
            },
            "search" => Kind::Search {
                allowed: args.strings(":allowed")?,
                blocked: args.strings(":blocked")?,
            },
            "youtube-page" => Kind::YoutubePage,
            "captions" => Kind::Captions,
            other => return fail(env, "web-convert", format_args!("unknown :kind `{other}`")),
        };
        args.finish()?;
        let job = Job {
            kind,
            latin1: body_bytes(env, body)?,
        };
        web::start(id, job).or_signal(env)
    })
}
