//! WebFetch and WebSearch conversions: started here, answered by `reply`
//! events (`mevedel_core::web`).
//!
//! A body crosses as a string of characters U+0000..U+00FF (Lisp decodes
//! the response bytes as Latin-1, which the module API can copy); the
//! worker turns each character back into its byte, so the main thread
//! only copies.

use emacs::{Env, Result, Value, defun};
use mevedel_core::error::{Error, ErrorKind};
use mevedel_core::web::{self, Job, Kind};

use crate::convert;
use crate::errors::OrSignal;
use crate::guard::guarded;
use crate::resource::opt_string;
use crate::text::copy_exact;

/// BODY's text, as UTF-8 of its Latin-1 characters (see the module docs).
fn body_bytes(env: &Env, body: Value<'_>) -> Result<Vec<u8>> {
    Ok(copy_exact(env, body)?.bytes().to_vec())
}

/// Convert BODY of KIND in the background; the reply for request ID
/// carries the result. KIND is "html" (OPTIONS: (CHARSET URL), reply
/// (:text :title :charset)), "text" ((CHARSET), reply (:text
/// :charset)), "search" ((ALLOWED BLOCKED), reply (:results
/// :challenge)), "youtube-page" (reply (:title :author :description
/// :captions)) or "captions" (reply: the text).
#[defun(name = "web-convert")]
fn web_convert(
    env: &Env,
    id: i64,
    kind: String,
    body: Value<'_>,
    options: Value<'_>,
) -> Result<()> {
    guarded(env, || {
        let opts = convert::list_items(options)?;
        let opt = |i: usize| opts.get(i).copied();
        let kind = match kind.as_str() {
            "html" => Kind::Html {
                charset: opt(0).map(opt_string).transpose()?.flatten(),
                url: opt(1)
                    .map(opt_string)
                    .transpose()?
                    .flatten()
                    .unwrap_or_default(),
            },
            "text" => Kind::Text {
                charset: opt(0).map(opt_string).transpose()?.flatten(),
            },
            "search" => Kind::Search {
                allowed: opt(0)
                    .map(convert::strings)
                    .transpose()?
                    .unwrap_or_default(),
                blocked: opt(1)
                    .map(convert::strings)
                    .transpose()?
                    .unwrap_or_default(),
            },
            "youtube-page" => Kind::YoutubePage,
            "captions" => Kind::Captions,
            other => {
                return Err(Error::new(
                    ErrorKind::Internal,
                    format!("web-convert: unknown kind `{other}`"),
                ))
                .or_signal(env);
            }
        };
        let job = Job {
            kind,
            latin1: body_bytes(env, body)?,
        };
        web::start(id, job).or_signal(env)
    })
}
