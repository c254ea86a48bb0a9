//! The web tools' heavy lifting, off Emacs's main thread: page charsets,
//! HTML to readable text with Markdown links, DuckDuckGo result pages and
//! YouTube's player data and captions.
//!
//! Emacs retrieves (url-http, with mevedel's own redirects); each body
//! then comes here as bytes and goes back as text through a `reply`
//! event, so a hostile page costs a worker thread, never the UI.

pub mod charset;
pub mod html;
pub mod jobs;
pub mod search_results;
pub mod youtube;

#[cfg(test)]
mod tests;

pub use jobs::{Job, Kind, start};
