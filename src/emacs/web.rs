//! WebFetch and WebSearch conversions: started here, answered by `reply`
//! events (`crate::web`).
//!
//! A body crosses as a multibyte string of characters U+0000..U+00FF
//! (Lisp decodes the response bytes as Latin-1, which the module API can
//! copy); each character is one byte of the body again here.

use emacs::{Env, Result, Value, defun};

use super::convert;
use super::errors::OrSignal;
use super::guard::guarded;
use super::resource::opt_string;
use super::text::copy_exact;
use crate::error::{Error, ErrorKind};
use crate::web::{self, Job};

/// The bytes BODY stands for (see the module docs).
fn body_bytes(env: &Env, body: Value<'_>) -> Result<Vec<u8>> {
    let copied = copy_exact(env, body)?;
    let text = std::str::from_utf8(copied.bytes()).unwrap_or_default();
    text.chars()
        .map(|c| u8::try_from(u32::from(c)))
        .collect::<std::result::Result<Vec<u8>, _>>()
        .map_err(|_| Error::new(ErrorKind::Internal, "web body holds a non-byte character"))
        .or_signal(env)
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
        let body = body_bytes(env, body)?;
        let opts = convert::list_items(options)?;
        let opt = |i: usize| opts.get(i).copied();
        let job = match kind.as_str() {
            "html" => Job::Html {
                body,
                charset: opt(0).map(opt_string).transpose()?.flatten(),
                url: opt(1)
                    .map(opt_string)
                    .transpose()?
                    .flatten()
                    .unwrap_or_default(),
            },
            "text" => Job::Text {
                body,
                charset: opt(0).map(opt_string).transpose()?.flatten(),
            },
            "search" => Job::Search {
                body,
                allowed: opt(0)
                    .map(convert::strings)
                    .transpose()?
                    .unwrap_or_default(),
                blocked: opt(1)
                    .map(convert::strings)
                    .transpose()?
                    .unwrap_or_default(),
            },
            "youtube-page" => Job::YoutubePage { body },
            "captions" => Job::Captions { body },
            other => {
                return Err(Error::new(
                    ErrorKind::Internal,
                    format!("web-convert: unknown kind `{other}`"),
                ))
                .or_signal(env);
            }
        };
        web::start(id, job).or_signal(env)
    })
}
