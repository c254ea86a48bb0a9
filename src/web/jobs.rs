//! Conversions started from Lisp and answered by `reply` events.

use std::panic::{AssertUnwindSafe, catch_unwind};

use super::{charset, html, search, youtube};
use crate::datum::Datum;
use crate::error::{Error, ErrorKind};
use crate::events;

/// Stack of a conversion thread: the walkers are iterative, but the HTML
/// tree builder and selector matching recurse a little per level.
const STACK_BYTES: usize = 64 << 20;

/// One body to convert; CHARSET is the Content-Type header's, if any.
pub enum Job {
    /// HTML to readable text, links resolved against the final URL.
    Html {
        body: Vec<u8>,
        charset: Option<String>,
        url: String,
    },
    /// Any other text type, decoded and returned as it is.
    Text {
        body: Vec<u8>,
        charset: Option<String>,
    },
    /// A DuckDuckGo result page, filtered by host.
    Search {
        body: Vec<u8>,
        allowed: Vec<String>,
        blocked: Vec<String>,
    },
    /// A YouTube watch page: its player data.
    YoutubePage { body: Vec<u8> },
    /// A YouTube caption track, as text.
    Captions { body: Vec<u8> },
}

/// Run JOB on this thread.
pub fn run(job: Job) -> Result<Datum, Error> {
    match job {
        Job::Html { body, charset, url } => {
            let (text, used) = charset::decode(&body, charset.as_deref(), true);
            let page = html::render(&text, &url);
            Ok(Datum::plist([
                ("text", Datum::Str(page.text)),
                ("title", Datum::opt_str(page.title)),
                ("charset", Datum::str(used)),
            ]))
        }
        Job::Text { body, charset } => {
            let (text, used) = charset::decode(&body, charset.as_deref(), false);
            Ok(Datum::plist([
                ("text", Datum::Str(text)),
                ("charset", Datum::str(used)),
            ]))
        }
        Job::Search {
            body,
            allowed,
            blocked,
        } => {
            let (text, _) = charset::decode(&body, None, true);
            Ok(search::parse(&text, &allowed, &blocked).to_datum())
        }
        Job::YoutubePage { body } => {
            let (text, _) = charset::decode(&body, None, true);
            youtube::player(&text).map(|p| p.to_datum()).ok_or_else(|| {
                Error::new(
                    ErrorKind::Resource,
                    "the YouTube page has no player data (ytInitialPlayerResponse)",
                )
            })
        }
        Job::Captions { body } => {
            let (text, _) = charset::decode(&body, None, false);
            Ok(Datum::str(youtube::captions(&text)))
        }
    }
}

/// Start JOB on a thread of its own; request ID's `reply` event carries
/// the result.
pub fn start(id: i64, job: Job) -> Result<(), Error> {
    std::thread::Builder::new()
        .name("mevedel-web".into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let result = catch_unwind(AssertUnwindSafe(|| run(job)))
                .unwrap_or_else(|p| Err(Error::from_panic("web conversion", p.as_ref())));
            events::global().push(events::reply(id, result));
        })
        .map(|_| ())
        .map_err(|e| Error::io(ErrorKind::Internal, "cannot start a web thread", &e))
}
