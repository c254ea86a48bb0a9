//! PDFs for the model, through poppler's programs (`pdfinfo`,
//! `pdftotext`, `pdftoppm` from poppler-utils), each run to its end as
//! an owned child (crate::process::bounded) and killed when Read is
//! cancelled.
//!
//! A Read answers the page count and the text of the pages asked for,
//! each headed `--- page N of M ---`; by default the first
//! [`DEFAULT_PAGES`] within [`TEXT_BUDGET`]. A page without a text layer
//! (a scan), or every page in `image` mode, is rendered and sent as an
//! image when the model takes images. A password-protected PDF is an
//! error saying so.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use super::{Picture, Reading, Request, fail, picture, size};
use crate::error::Error;
use crate::process::bounded::{self, Finished, Unfinished};
use crate::search::budget::Budget;

/// Pages a Read shows when it names none.
pub const DEFAULT_PAGES: u32 = 10;
/// Characters of page text a Read without `pages` stops adding pages after.
pub const TEXT_BUDGET: usize = 60_000;
/// Most pages one Read renders as images.
pub const MAX_RENDERED: usize = 10;
/// Longest a poppler program may run.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Run ARGV, a poppler program, to its end; kill it when BUDGET stops
/// or [`TIMEOUT`] passes.
fn run(argv: Vec<OsString>, budget: &Budget) -> Result<Finished, String> {
    let name = bounded::program_name(&argv);
    bounded::run(argv, false, TIMEOUT, &|| budget.stop()).map_err(|e| match e {
        Unfinished::Start(why) => {
            format!("cannot run {name} ({why}); install poppler-utils, which provides it")
        }
        other => other.describe(&name, TIMEOUT),
    })
}

/// The page count of the PDF at PATH, named ADDRESS; its errors say
/// what is wrong with the file.
fn page_count(path: &Path, address: &str, budget: &Budget) -> Result<u32, Error> {
    let out = run(vec!["pdfinfo".into(), path.into()], budget)
        .map_err(|e| fail(format!("Read `{address}`: {e}")))?;
    if !out.status.success() {
        let said = out.stderr.trim();
        if said.contains("Incorrect password") {
            return Err(fail(format!(
                "Read `{address}`: the PDF is encrypted with a password, so its pages cannot \
                 be read; ask the user for an unprotected copy"
            )));
        }
        return Err(fail(format!(
            "Read `{address}`: it is not a readable PDF (pdfinfo: {said})"
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Pages:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| fail(format!("Read `{address}`: pdfinfo gave no page count")))
}

/// The pages SPEC names ("3", "3-5", "7-", "1,4,9-10") in a PDF of
/// COUNT pages, in order without repeats.
pub fn parse_pages(spec: &str, count: u32) -> Result<Vec<u32>, String> {
    let mut pages = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{part}` is not a page number or range like \"3-5\""))
        };
        let (from, to) = match part.split_once('-') {
            Some((a, b)) if b.trim().is_empty() => (number(a)?, count),
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(part)?, number(part)?),
        };
        if from == 0 || from > to || to > count {
            return Err(format!(
                "pages `{part}` is outside the document, which has pages 1-{count}"
            ));
        }
        pages.extend(from..=to);
    }
    if pages.is_empty() {
        return Err("`pages` names no page; give one like \"3-5\"".into());
    }
    pages.sort_unstable();
    pages.dedup();
    Ok(pages)
}

/// The text of pages FROM to TO of the PDF at PATH, one string per page.
fn page_texts(
    path: &Path,
    address: &str,
    from: u32,
    to: u32,
    budget: &Budget,
) -> Result<Vec<String>, Error> {
    let argv: Vec<OsString> = vec![
        "pdftotext".into(),
        "-layout".into(),
        "-enc".into(),
        "UTF-8".into(),
        "-f".into(),
        from.to_string().into(),
        "-l".into(),
        to.to_string().into(),
        path.into(),
        "-".into(),
    ];
    let out = run(argv, budget).map_err(|e| fail(format!("Read `{address}`: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "Read `{address}`: pdftotext failed: {}",
            out.stderr.trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .split('\x0c')
        .take((to - from + 1) as usize)
        .map(str::to_owned)
        .collect())
}

/// Page PAGE of the PDF at PATH as an image fitting REQ.
fn render(
    path: &Path,
    address: &str,
    page: u32,
    req: &Request,
    budget: &Budget,
) -> Result<Picture, Error> {
    let n = page.to_string();
    let argv: Vec<OsString> = vec![
        "pdftoppm".into(),
        "-png".into(),
        "-singlefile".into(),
        "-f".into(),
        n.clone().into(),
        "-l".into(),
        n.into(),
        "-scale-to".into(),
        req.max_side().to_string().into(),
        path.into(),
    ];
    let out = run(argv, budget).map_err(|e| fail(format!("Read `{address}`: {e}")))?;
    if !out.status.success() || out.stdout.is_empty() {
        return Err(fail(format!(
            "Read `{address}`: cannot render page {page}: {}",
            out.stderr.trim()
        )));
    }
    let named = format!("{address} page {page}");
    Ok(picture::prepare(&out.stdout, "image/png", &named, req)?.picture)
}

/// Read the PDF at PATH, named ADDRESS, as REQ asks.
pub fn read(path: &Path, address: &str, req: &Request, budget: &Budget) -> Result<Reading, Error> {
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let count = page_count(path, address, budget)?;
    if count == 0 {
        return Ok(Reading {
            text: format!("PDF `{address}`: no pages ({}).\n", size(bytes)),
            pictures: Vec::new(),
        });
    }
    let asked = req.pages.as_deref().filter(|p| !p.trim().is_empty());
    let pages = match asked {
        Some(spec) => {
            parse_pages(spec, count).map_err(|e| fail(format!("Read `{address}`: {e}")))?
        }
        None => (1..=count.min(DEFAULT_PAGES)).collect(),
    };
    let images = req.accepts("image/png") || req.accepts("image/jpeg");
    if req.render && !images {
        return Err(fail(format!(
            "Read `{address}`: mode \"image\" renders pages as images, and the current model \
             takes text only; read the text instead (no mode)"
        )));
    }
    if req.render && pages.len() > MAX_RENDERED {
        return Err(fail(format!(
            "Read `{address}`: mode \"image\" renders at most {MAX_RENDERED} pages at once; \
             ask fewer with `pages` (e.g. \"1-{MAX_RENDERED}\")"
        )));
    }
    let mut out = Reading::default();
    let mut body = String::new();
    let mut shown = Vec::new();
    let texts = if req.render {
        Vec::new()
    } else {
        let (first, last) = (pages[0], pages[pages.len() - 1]);
        page_texts(path, address, first, last, budget)?
    };
    for &page in &pages {
        if budget.stop() {
            return Err(fail("Cancelled.".into()));
        }
        if asked.is_none() && body.len() > TEXT_BUDGET {
            break;
        }
        body.push_str(&format!("--- page {page} of {count} ---\n"));
        shown.push(page);
        let text = if req.render {
            ""
        } else {
            texts
                .get((page - pages[0]) as usize)
                .map_or("", String::as_str)
        };
        if !text.trim().is_empty() {
            body.push_str(text.trim_end());
            body.push('\n');
            continue;
        }
        let why = if req.render {
            "rendered"
        } else {
            "no text layer (a scan or a drawing)"
        };
        if !images {
            body.push_str(&format!(
                "({why}; the current model takes text only, so the page is not shown)\n"
            ));
        } else if out.pictures.len() >= MAX_RENDERED {
            body.push_str(&format!(
                "({why}; {MAX_RENDERED} pages were rendered already: Read it with pages: \"{page}\")\n"
            ));
        } else {
            let picture = render(path, address, page, req, budget)?;
            body.push_str(&format!(
                "({why}: the page is sent as image {}, {}×{} px, {})\n",
                out.pictures.len() + 1,
                picture.width,
                picture.height,
                size(picture.data.len() as u64)
            ));
            out.pictures.push(picture);
        }
    }
    let mut head = format!(
        "PDF `{address}`: {count} page{}, {}. ",
        if count == 1 { "" } else { "s" },
        size(bytes)
    );
    head.push_str(&format!("Showing {}", describe_pages(&shown)));
    let last = shown.last().copied().unwrap_or(0);
    if asked.is_none() && last < count {
        let next_end = (last + DEFAULT_PAGES).min(count);
        head.push_str(&format!(
            "; read on with pages: \"{}-{next_end}\"",
            last + 1
        ));
    }
    head.push_str(".\n");
    out.text = head + &body;
    Ok(out)
}

/// PAGES as ranges: "page 3", "pages 1-10", "pages 1-3, 7".
pub fn describe_pages(pages: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < pages.len() {
        let start = pages[i];
        let mut end = start;
        while i + 1 < pages.len() && pages[i + 1] == end + 1 {
            i += 1;
            end = pages[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    let plural = pages.len() > 1;
    format!("page{} {}", if plural { "s" } else { "" }, parts.join(", "))
}
