use super::charset::decode;
use super::html::render;
use super::search_results::{host_matches, parse};
use super::youtube::{captions, player};

const PAGE: &str = "https://example.com/docs/page.html";

fn text(html: &str) -> String {
    render(html, PAGE).text
}

#[test]
fn charset_header_then_meta_then_utf8() {
    // é in Latin-1, declared by the header.
    assert_eq!(decode(b"caf\xe9", Some("ISO-8859-1"), true).0, "café");
    // Shift-JIS declared by a meta element.
    let sjis = b"<meta charset=\"shift_jis\"><p>\x93\xfa\x96\x7b</p>";
    let (t, used) = decode(sjis, None, true);
    assert!(t.contains("日本"), "{t}");
    assert_eq!(used, "Shift_JIS");
    // The http-equiv spelling.
    let equiv = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=iso-8859-1\">\xe9";
    assert!(decode(equiv, None, true).0.ends_with('é'));
    // The header beats the meta element.
    assert_eq!(
        decode(b"<meta charset=shift_jis>\xc3\xa9", Some("utf-8"), true).0,
        "<meta charset=shift_jis>é"
    );
    // Nothing declared: UTF-8, and a BOM is dropped.
    assert_eq!(
        decode(b"\xef\xbb\xbfna\xc3\xafve", None, true),
        ("naïve".into(), "UTF-8")
    );
    // Meta is HTML only.
    assert_eq!(
        decode(b"<meta charset=latin1>\xc3\xa9", None, false).0,
        "<meta charset=latin1>é"
    );
}

#[test]
fn blocks_headings_lists_and_pre() {
    let t = text(
        "<html><head><title>T</title><style>p{}</style></head><body>\
         <h2>Intro  text</h2><p>One\n two</p><ul><li>a</li><li>b<ol><li>c</li></ol></li></ul>\
         <pre>x  = 1\n  y</pre><script>alert(1)</script><table><tr><td>k</td><td>v</td></tr></table></body></html>",
    );
    assert_eq!(
        t,
        "## Intro text\n\nOne two\n\n* a\n* b\n  1. c\n\n```\nx  = 1\n  y\n```\n\nk | v\n"
    );
}

#[test]
fn links_resolve_escape_and_stay_plain() {
    let t = text(
        "<p><a href=\"../api/x.html\">API [v2]</a> \
         <a href=\"https://e.org/a_(b)\">wiki</a> \
         <a href=\"#top\">top</a> \
         <a href=\"page.html#s\">here</a> \
         <a href=\"mailto:me@example.com\">mail me</a> \
         <a href=\"/x\"><img src=i.png></a>\
         <a href=\"https://e.org/\">https://e.org/</a> \
         <a href=\"/multi\">two\nlines</a></p>",
    );
    assert_eq!(
        t,
        "[API \\[v2\\]](https://example.com/api/x.html) [wiki](https://e.org/a_%28b%29) top here \
         mail me https://e.org/ [two lines](https://example.com/multi)\n"
    );
}

#[test]
fn base_element_decides_relative_links() {
    let t =
        text("<head><base href=\"https://cdn.example.net/v1/\"></head><a href=\"guide\">Guide</a>");
    assert_eq!(t, "[Guide](https://cdn.example.net/v1/guide)\n");
}

#[test]
fn hostile_pages_stay_bounded() {
    let deep = "<div>".repeat(10_000) + "deep" + &"</div>".repeat(10_000);
    assert_eq!(text(&deep), "deep\n");
    let broken = "<p>open <b>bold <i>both</p> <a href=x>dangling <table><td>cell";
    let t = text(broken);
    assert!(t.contains("open bold both"), "{t}");
    assert!(t.contains("cell"), "{t}");
    let line = "<span>word</span> ".repeat(300_000);
    let t = text(&line);
    assert_eq!(t.matches("word").count(), 300_000);
}

const DDG: &str = r#"<html><body>
<div class="result results_links result--ad"><h2><a class="result__a" href="https://duckduckgo.com/y.js?ad_domain=shop.example">Buy</a></h2></div>
<div class="result results_links web-result"><h2><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fdocs.example.com%2Fa%20b%3Fq%3D1&amp;rut=x">Docs <b>A</b></a></h2>
<a class="result__snippet" href="x">First snippet</a></div>
<div class="result results_links web-result"><h2><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fdocs.example.com%2Fa%20b%3Fq%3D1%23frag">Docs again</a></h2></div>
<div class="result results_links web-result"><h2><a class="result__a" href="https://badexample.com/">Bad</a></h2></div>
<a class="result__a" href="https://outside.example/">Not in a block</a>
</body></html>"#;

#[test]
fn search_results_unwrap_dedupe_and_skip_ads() {
    let r = parse(DDG, &[], &[]);
    assert!(!r.challenge);
    let urls: Vec<&str> = r.hits.iter().map(|h| h.url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "https://docs.example.com/a%20b?q=1",
            "https://badexample.com/"
        ]
    );
    assert_eq!(r.hits[0].title, "Docs A");
    assert_eq!(r.hits[0].snippet, "First snippet");
    let only = parse(DDG, &["example.com".into()], &[]);
    assert_eq!(only.hits.len(), 1);
    let blocked = parse(DDG, &[], &["example.com".into()]);
    assert_eq!(blocked.hits.len(), 1);
    assert_eq!(blocked.hits[0].url, "https://badexample.com/");
}

#[test]
fn host_filters_match_at_label_boundaries() {
    assert!(host_matches("example.com", "example.com"));
    assert!(host_matches("docs.Example.com", "example.com"));
    assert!(host_matches("docs.example.com", "*.example.com"));
    assert!(!host_matches("badexample.com", "example.com"));
    assert!(!host_matches("example.com.evil", "example.com"));
    assert!(!host_matches("example.com", ""));
}

#[test]
fn bot_challenge_is_not_an_empty_result() {
    let page = r#"<html><body><div class="anomaly-modal"><form id="challenge-form" action="/anomaly.js"></form></div></body></html>"#;
    assert!(parse(page, &[], &[]).challenge);
    let empty = r#"<html><body><div class="no-results">No results.</div></body></html>"#;
    let r = parse(empty, &[], &[]);
    assert!(!r.challenge && r.hits.is_empty());
}

#[test]
fn youtube_player_and_captions() {
    let page = r#"<script>var ytInitialPlayerResponse = {"videoDetails":{"title":"Talk","author":"Chan","shortDescription":"About {braces}"},
"captions":{"playerCaptionsTracklistRenderer":{"captionTracks":[{"baseUrl":"http://h/asr","languageCode":"en","kind":"asr"},{"baseUrl":"http://h/en","languageCode":"en-GB"}]}}};var x = 1;</script>"#;
    let p = player(page).expect("player");
    assert_eq!(p.title, "Talk");
    assert_eq!(p.description, "About {braces}");
    assert_eq!(p.captions.as_deref(), Some("http://h/en"));
    assert!(player("<html>nothing</html>").is_none());
    let track = r#"<?xml version="1.0"?><transcript><text start="0" dur="1">It&amp;#39;s <b>here</b></text><text start="1">a &lt;tag&gt;</text></transcript>"#;
    assert_eq!(captions(track), "It's here\na <tag>\n");
}
