//! HTML to readable text, with links as Markdown.
//!
//! The page is parsed as a browser would (html5ever, through `scraper`)
//! and walked once, iteratively, so ten thousand nested elements cost a
//! loop, not a stack. Blocks become paragraphs, headings `#` lines,
//! list items `*`/`N.` lines, `pre` fenced blocks, table rows lines of
//! `|`-separated cells. Script, style and other invisible parts are
//! dropped.
//!
//! A link becomes `[text](url)`: its target resolved against the final
//! URL through the first `<base href>`, parentheses percent-encoded, its
//! text on one line with brackets escaped. Links that go nowhere useful
//! (not http(s), no text, an anchor into this page) leave their text
//! plain, and a link whose text is its URL becomes the bare URL.

use ego_tree::iter::Edge;
use scraper::{Html, Node};
use url::Url;

/// A rendered page.
pub struct Page {
    pub text: String,
    pub title: Option<String>,
}

/// Elements whose content is never shown.
const HIDDEN: &[&str] = &[
    "head", "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "embed",
    "canvas", "select", "textarea", "button", "input",
];

/// Elements that start and end a paragraph (a blank line around them);
/// lists do too, unless nested in another.
const PARAGRAPH: &[&str] = &[
    "p",
    "dl",
    "pre",
    "blockquote",
    "table",
    "figure",
    "form",
    "fieldset",
    "address",
    "details",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
];

/// Elements that start and end a line.
const LINE: &[&str] = &[
    "div",
    "li",
    "dt",
    "dd",
    "tr",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "main",
    "aside",
    "figcaption",
    "caption",
    "summary",
    "center",
    "body",
    "html",
];

/// An open list: its next item number, or None for a bullet list.
struct List {
    next: Option<u64>,
}

/// A link being collected: its target and its text so far.
struct Link {
    href: Option<String>,
    text: String,
}

struct Writer<'a> {
    out: String,
    /// Line breaks owed before the next text (0, 1 or 2).
    breaks: usize,
    space: bool,
    /// A list item's marker, written before its first text.
    marker: Option<String>,
    pre: usize,
    lists: Vec<List>,
    /// Per open table row: how many cells it has had.
    rows: Vec<usize>,
    link: Option<Link>,
    base: Option<Url>,
    page: Option<&'a Url>,
}

impl Writer<'_> {
    fn want_breaks(&mut self, n: usize) {
        self.breaks = self.breaks.max(n);
        self.space = false;
    }

    /// Write what is owed before text: breaks, the list marker, a space.
    fn lead(&mut self) {
        if self.out.is_empty() {
            self.breaks = 0;
            self.space = false;
        } else if self.breaks > 0 {
            while self.out.ends_with(' ') {
                self.out.pop();
            }
            let have = self.out.len() - self.out.trim_end_matches('\n').len();
            for _ in have..self.breaks {
                self.out.push('\n');
            }
            self.breaks = 0;
            self.space = false;
        }
        if let Some(marker) = self.marker.take() {
            self.out.push_str(&marker);
            self.space = false;
        }
        if self.space {
            self.out.push(' ');
            self.space = false;
        }
    }

    /// Text of the page, whitespace collapsed outside `pre`.
    fn text(&mut self, text: &str) {
        if self.pre > 0 {
            if let Some(link) = &mut self.link {
                link.text.push_str(text);
            } else {
                self.lead();
                self.out.push_str(text);
            }
            return;
        }
        let words = text.split(|c: char| c.is_ascii_whitespace());
        let starts_blank = text.starts_with(|c: char| c.is_ascii_whitespace());
        let ends_blank = text.ends_with(|c: char| c.is_ascii_whitespace());
        if let Some(link) = &mut self.link {
            let t = &mut link.text;
            if starts_blank && !t.is_empty() && !t.ends_with(' ') {
                t.push(' ');
            }
            let mut first = true;
            for w in words.filter(|w| !w.is_empty()) {
                if !first {
                    t.push(' ');
                }
                t.push_str(w);
                first = false;
            }
            if ends_blank && !first {
                t.push(' ');
            }
            return;
        }
        if starts_blank {
            self.space = true;
        }
        let mut any = false;
        for w in words.filter(|w| !w.is_empty()) {
            if any {
                self.out.push(' ');
            } else {
                self.lead();
            }
            self.out.push_str(w);
            any = true;
        }
        if ends_blank && any {
            self.space = true;
        }
    }

    /// Literal markup (a fence, a cell separator) where text would go.
    fn markup(&mut self, s: &str) {
        self.lead();
        self.out.push_str(s);
    }

    fn open_link(&mut self, href: Option<&str>) {
        if self.link.is_none() {
            self.link = Some(Link {
                href: href.map(str::to_string),
                text: String::new(),
            });
        }
    }

    fn close_link(&mut self) {
        let Some(link) = self.link.take() else {
            return;
        };
        let leading = link.text.starts_with(' ');
        let trailing = link.text.ends_with(' ');
        let text = link.text.trim();
        if text.is_empty() {
            self.space |= leading || trailing;
            return;
        }
        if leading {
            self.space = true;
        }
        let shown = match link.href.as_deref().and_then(|h| self.target(h)) {
            None => text.replace('\n', " "),
            Some(url) if text == url || link.href.as_deref() == Some(text) => url,
            Some(url) => format!("[{}]({url})", escape_text(text)),
        };
        self.lead();
        self.out.push_str(&shown);
        if trailing {
            self.space = true;
        }
    }

    /// HREF's Markdown target, or None when the link stays plain text.
    fn target(&self, href: &str) -> Option<String> {
        let href = href.trim();
        if href.is_empty() || href.starts_with('#') {
            return None;
        }
        let url = match (&self.base, self.page) {
            (Some(base), _) => base.join(href).ok()?,
            (None, Some(page)) => page.join(href).ok()?,
            (None, None) => Url::parse(href).ok()?,
        };
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return None;
        }
        if let Some(page) = self.page
            && url.fragment().is_some()
        {
            let mut bare = url.clone();
            bare.set_fragment(None);
            let mut here = page.clone();
            here.set_fragment(None);
            if bare == here {
                return None;
            }
        }
        Some(url.as_str().replace('(', "%28").replace(')', "%29"))
    }
}

/// Link text for `[...]`: brackets (and the backslash) escaped.
fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hidden_by_attributes(e: &scraper::node::Element) -> bool {
    e.attr("hidden").is_some()
        || e.attr("aria-hidden") == Some("true")
        || e.attr("style").is_some_and(|s| {
            let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
            s.to_ascii_lowercase().contains("display:none")
        })
}

/// The first `<base href>` of DOC resolved against PAGE.
fn base_of(doc: &Html, page: Option<&Url>) -> Option<Url> {
    let href = doc.tree.nodes().find_map(|n| match n.value() {
        Node::Element(e) if e.name() == "base" => e.attr("href"),
        _ => None,
    })?;
    match page {
        Some(p) => p.join(href.trim()).ok(),
        None => Url::parse(href.trim()).ok(),
    }
}

fn title_of(doc: &Html) -> Option<String> {
    let node = doc
        .tree
        .nodes()
        .find(|n| matches!(n.value(), Node::Element(e) if e.name() == "title"))?;
    let text: String = node
        .descendants()
        .filter_map(|d| d.value().as_text().map(|t| t.to_string()))
        .collect();
    let title = text.split_ascii_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty()).then_some(title)
}

/// SOURCE, an HTML document fetched from URL, as readable text.
pub fn render(source: &str, url: &str) -> Page {
    let doc = Html::parse_document(source);
    let page = Url::parse(url).ok();
    let mut w = Writer {
        out: String::with_capacity(source.len() / 4),
        breaks: 0,
        space: false,
        marker: None,
        pre: 0,
        lists: Vec::new(),
        rows: Vec::new(),
        link: None,
        base: base_of(&doc, page.as_ref()),
        page: page.as_ref(),
    };
    let mut skip: Option<ego_tree::NodeId> = None;
    for edge in doc.tree.root().traverse() {
        match edge {
            Edge::Open(node) => {
                if skip.is_some() {
                    continue;
                }
                match node.value() {
                    Node::Text(t) => w.text(t),
                    Node::Element(e) => {
                        let name = e.name();
                        if HIDDEN.contains(&name) || hidden_by_attributes(e) {
                            skip = Some(node.id());
                            continue;
                        }
                        open(&mut w, name, e);
                    }
                    _ => {}
                }
            }
            Edge::Close(node) => {
                if let Some(id) = skip {
                    if id == node.id() {
                        skip = None;
                    }
                    continue;
                }
                if let Node::Element(e) = node.value() {
                    close(&mut w, e.name());
                }
            }
        }
    }
    w.close_link();
    let mut text = w.out;
    let end = text.trim_end().len();
    text.truncate(end);
    text.push('\n');
    Page {
        text,
        title: title_of(&doc),
    }
}

fn open(w: &mut Writer, name: &str, e: &scraper::node::Element) {
    if PARAGRAPH.contains(&name) {
        w.want_breaks(2);
    } else if LINE.contains(&name) {
        w.want_breaks(1);
    }
    match name {
        "br" => {
            if let Some(link) = &mut w.link {
                link.text.push(' ');
            } else {
                w.lead();
                w.out.push('\n');
                w.space = false;
            }
        }
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
            let level = usize::from(name.as_bytes()[1] - b'0');
            w.marker = Some(format!("{} ", "#".repeat(level)));
        }
        "ul" | "menu" => {
            w.want_breaks(if w.lists.is_empty() { 2 } else { 1 });
            w.lists.push(List { next: None })
        }
        "ol" => {
            w.want_breaks(if w.lists.is_empty() { 2 } else { 1 });
            let start = e.attr("start").and_then(|s| s.trim().parse().ok());
            w.lists.push(List {
                next: Some(start.unwrap_or(1)),
            })
        }
        "li" => {
            let depth = w.lists.len().saturating_sub(1);
            let bullet = match w.lists.last_mut() {
                Some(List { next: Some(n) }) => {
                    let b = format!("{n}. ");
                    *n += 1;
                    b
                }
                _ => "* ".to_string(),
            };
            w.marker = Some(format!("{}{bullet}", "  ".repeat(depth)));
        }
        "pre" => {
            w.markup("```");
            w.out.push('\n');
            w.pre += 1;
        }
        "code" if w.pre == 0 && w.link.is_none() => {
            w.markup("`");
        }
        "tr" => w.rows.push(0),
        "td" | "th" => {
            if let Some(cells) = w.rows.last_mut() {
                *cells += 1;
                if *cells > 1 {
                    w.space = false;
                    w.markup(" | ");
                }
            }
        }
        "hr" => w.markup("---"),
        "a" => w.open_link(e.attr("href")),
        "img" => {
            if let Some(alt) = e.attr("alt").map(str::trim).filter(|a| !a.is_empty()) {
                w.text(alt);
            }
        }
        _ => {}
    }
}

fn close(w: &mut Writer, name: &str) {
    match name {
        "a" => w.close_link(),
        "pre" => {
            w.pre = w.pre.saturating_sub(1);
            if !w.out.ends_with('\n') {
                w.out.push('\n');
            }
            w.out.push_str("```");
        }
        "code" if w.pre == 0 && w.link.is_none() => {
            w.out.push('`');
        }
        "ul" | "ol" | "menu" => {
            w.lists.pop();
            w.want_breaks(if w.lists.is_empty() { 2 } else { 1 });
        }
        "tr" => {
            w.rows.pop();
        }
        "li" => w.marker = None,
        _ => {}
    }
    if PARAGRAPH.contains(&name) {
        w.want_breaks(2);
    } else if LINE.contains(&name) {
        w.want_breaks(1);
    }
}
