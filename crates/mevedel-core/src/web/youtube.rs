//! YouTube: a watch page's player data (title, channel, description,
//! English caption track) and a caption track's text.

use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

use crate::datum::Datum;

const MARKER: &str = "ytInitialPlayerResponse";

pub struct Player {
    pub title: String,
    pub author: String,
    pub description: String,
    /// Where the English captions are, if the video has any.
    pub captions: Option<String>,
}

impl Player {
    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            ("title", Datum::str(&self.title)),
            ("author", Datum::str(&self.author)),
            ("description", Datum::str(&self.description)),
            ("captions", Datum::opt_str(self.captions.clone())),
        ])
    }
}

/// The player data embedded in the watch page PAGE.
pub fn player(page: &str) -> Option<Player> {
    let at = page.find(MARKER)?;
    let rest = &page[at + MARKER.len()..];
    let brace = rest.find('{')?;
    let json: Value = serde_json::Deserializer::from_str(&rest[brace..])
        .into_iter::<Value>()
        .next()?
        .ok()?;
    let details = &json["videoDetails"];
    let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let tracks = json["captions"]["playerCaptionsTracklistRenderer"]["captionTracks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let english = |t: &&Value| {
        t["languageCode"]
            .as_str()
            .is_some_and(|l| l.starts_with("en"))
    };
    // A track written by people beats the automatic one.
    let track = tracks
        .iter()
        .filter(english)
        .find(|t| t["kind"].as_str() != Some("asr"))
        .or_else(|| tracks.iter().find(english));
    Some(Player {
        title: field(&details["title"]),
        author: field(&details["author"]),
        description: field(&details["shortDescription"]),
        captions: track
            .and_then(|t| t["baseUrl"].as_str())
            .map(str::to_string),
    })
}

static CUE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?s)<(?:text|p)\b[^>]*>(.*?)</(?:text|p)>").ok());
static TAG: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"<[^>]*>").ok());

/// Character references of XML and HTML's common named ones, once.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest[..rest.len().min(12)].find(';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let name = &rest[1..end];
        let c = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            _ => name
                .strip_prefix("#x")
                .or_else(|| name.strip_prefix("#X"))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The text of a caption track (timedtext XML), one cue per line.
/// Cue text is often escaped twice (`&amp;#39;`), so references are
/// resolved twice.
pub fn captions(track: &str) -> String {
    let (Some(cue), Some(tag)) = (CUE.as_ref(), TAG.as_ref()) else {
        return String::new();
    };
    let mut out = String::new();
    for c in cue.captures_iter(track) {
        let inner = c.get(1).map_or("", |m| m.as_str());
        let text = unescape(&unescape(&tag.replace_all(inner, "")));
        let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if !line.is_empty() {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
