//! Conversions started from Lisp and answered by `reply` events.

use super::{charset, html, search_results, youtube};
use crate::datum::Datum;
use crate::error::{Error, ErrorKind};
use crate::runtime;

/// Stack of a conversion thread: the walkers are iterative, but the HTML
/// tree builder and selector matching recurse a little per level.
const STACK_BYTES: usize = 64 << 20;

/// What to make of a body; CHARSET is the Content-Type header's, if any.
pub enum Kind {
    /// HTML to readable text, links resolved against the final URL.
    Html {
        charset: Option<String>,
        url: String,
    },
    /// Any other text type, decoded and returned as it is.
    Text { charset: Option<String> },
    /// A DuckDuckGo result page, filtered by host.
    Search {
        allowed: Vec<String>,
        blocked: Vec<String>,
    },
    /// A YouTube watch page: its player data.
    YoutubePage,
    /// A YouTube caption track, as text.
    Captions,
}

/// One body to convert, still as the UTF-8 of its Latin-1 reading: the
/// main thread only copies it, the worker takes the bytes back.
pub struct Job {
    pub kind: Kind,
    pub latin1: Vec<u8>,
}

/// The bytes that UTF8, text of characters U+0000..U+00FF, stands for.
fn latin1_bytes(utf8: Vec<u8>) -> Result<Vec<u8>, Error> {
    if utf8.is_ascii() {
        return Ok(utf8);
    }
    let text = String::from_utf8(utf8)
        .map_err(|_| Error::new(ErrorKind::Internal, "web body is not valid text"))?;
    text.chars()
        .map(|c| u8::try_from(u32::from(c)))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| Error::new(ErrorKind::Internal, "web body holds a non-byte character"))
}

/// Run JOB on this thread.
pub fn run(job: Job) -> Result<Datum, Error> {
    let body = latin1_bytes(job.latin1)?;
    match job.kind {
        Kind::Html { charset, url } => {
            let (text, used) = charset::decode(&body, charset.as_deref(), true);
            let page = html::render(&text, &url);
            Ok(Datum::plist([
                ("text", Datum::Str(page.text)),
                ("title", Datum::opt_str(page.title)),
                ("charset", Datum::str(used)),
            ]))
        }
        Kind::Text { charset } => {
            let (text, used) = charset::decode(&body, charset.as_deref(), false);
            Ok(Datum::plist([
                ("text", Datum::Str(text)),
                ("charset", Datum::str(used)),
            ]))
        }
        Kind::Search { allowed, blocked } => {
            let (text, _) = charset::decode(&body, None, true);
            Ok(search_results::parse(&text, &allowed, &blocked).to_datum())
        }
        Kind::YoutubePage => {
            let (text, _) = charset::decode(&body, None, true);
            youtube::player(&text).map(|p| p.to_datum()).ok_or_else(|| {
                Error::new(
                    ErrorKind::Resource,
                    "the YouTube page has no player data (ytInitialPlayerResponse)",
                )
            })
        }
        Kind::Captions => {
            let (text, _) = charset::decode(&body, None, false);
            Ok(Datum::str(youtube::captions(&text)))
        }
    }
}

/// Start JOB on a thread of its own; request ID's `reply` event carries
/// the result.
pub fn start(id: i64, job: Job) -> Result<(), Error> {
    runtime::spawn_job(id, "web", Some(STACK_BYTES), move || run(job))
}
