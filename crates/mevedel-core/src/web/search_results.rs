//! A DuckDuckGo HTML result page as numbered results.
//!
//! Only result blocks count, never the page's other links. Ads (a block
//! marked `result--ad`, or a destination on DuckDuckGo's ad redirector)
//! are skipped; a destination wrapped in DuckDuckGo's `/l/?uddg=`
//! redirect is unwrapped and serialized again as a valid URL; repeated
//! destinations are dropped; host filters match at a label boundary
//! (`example.com` matches `docs.example.com`, not `badexample.com`).

use scraper::{ElementRef, Html, Selector};
use url::Url;

use crate::datum::Datum;

/// Most results returned.
pub const MAX_RESULTS: usize = 10;

pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

pub struct Results {
    pub hits: Vec<Hit>,
    /// DuckDuckGo answered with its bot challenge instead of results.
    pub challenge: bool,
}

impl Results {
    pub fn to_datum(&self) -> Datum {
        let hits = self
            .hits
            .iter()
            .map(|h| {
                Datum::plist([
                    ("title", Datum::str(&h.title)),
                    ("url", Datum::str(&h.url)),
                    ("snippet", Datum::str(&h.snippet)),
                ])
            })
            .collect();
        Datum::plist([
            ("results", Datum::List(hits)),
            ("challenge", Datum::bool(self.challenge)),
        ])
    }
}

fn selector(css: &str) -> Option<Selector> {
    Selector::parse(css).ok()
}

fn text_of(e: ElementRef<'_>) -> String {
    let all: String = e.text().collect();
    all.split_ascii_whitespace().collect::<Vec<_>>().join(" ")
}

/// HREF's real destination, or None for an ad, a non-web link or junk.
fn destination(href: &str) -> Option<Url> {
    let href = href.trim();
    let absolute = if href.starts_with("//") {
        format!("https:{href}")
    } else if href.starts_with('/') {
        format!("https://duckduckgo.com{href}")
    } else {
        href.to_string()
    };
    let url = Url::parse(&absolute).ok()?;
    let on_ddg = url
        .host_str()
        .is_some_and(|h| host_matches(h, "duckduckgo.com"));
    let url = if on_ddg {
        if url.path() != "/l/" {
            return None;
        }
        let (_, wrapped) = url.query_pairs().find(|(k, _)| k == "uddg")?;
        Url::parse(&wrapped).ok()?
    } else {
        url
    };
    (matches!(url.scheme(), "http" | "https") && url.host_str().is_some()).then_some(url)
}

/// HOST is DOMAIN or one of its subdomains.
pub fn host_matches(host: &str, domain: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let domain = domain
        .trim()
        .trim_start_matches("*.")
        .trim_start_matches('.')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    !domain.is_empty()
        && (host == domain
            || (host.len() > domain.len()
                && host.ends_with(&domain)
                && host.as_bytes()[host.len() - domain.len() - 1] == b'.'))
}

/// The results of PAGE, kept when their host is under one of ALLOWED
/// (when given) and under none of BLOCKED.
pub fn parse(page: &str, allowed: &[String], blocked: &[String]) -> Results {
    let doc = Html::parse_document(page);
    let (Some(block), Some(title), Some(snippet), Some(challenge)) = (
        selector(".result"),
        selector("a.result__a"),
        selector(".result__snippet"),
        selector("#challenge-form, .anomaly-modal, form[action*=\"anomaly\"]"),
    ) else {
        return Results {
            hits: Vec::new(),
            challenge: false,
        };
    };
    let mut hits: Vec<Hit> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for b in doc.select(&block) {
        if hits.len() >= MAX_RESULTS {
            break;
        }
        if b.value().classes().any(|c| c == "result--ad") {
            continue;
        }
        let Some(link) = b.select(&title).next() else {
            continue;
        };
        let Some(mut url) = link.value().attr("href").and_then(destination) else {
            continue;
        };
        let host = url.host_str().unwrap_or_default().to_string();
        if !allowed.is_empty() && !allowed.iter().any(|d| host_matches(&host, d)) {
            continue;
        }
        if blocked.iter().any(|d| host_matches(&host, d)) {
            continue;
        }
        url.set_fragment(None);
        if !seen.insert(url.as_str().to_string()) {
            continue;
        }
        hits.push(Hit {
            title: text_of(link),
            url: url.into(),
            snippet: b.select(&snippet).next().map(text_of).unwrap_or_default(),
        });
    }
    let challenge = hits.is_empty() && doc.select(&challenge).next().is_some();
    Results { hits, challenge }
}
