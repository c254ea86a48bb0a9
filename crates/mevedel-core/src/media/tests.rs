//! Images made here (every codec the module reads) and the PDFs under
//! test/fixtures/media/, read as Read reads them.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use image::{DynamicImage, ImageFormat, Rgb, RgbImage};

use super::*;
use crate::testdir::TestDir;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../test/fixtures/media")
        .join(name)
}

fn all_types() -> Request {
    Request {
        accepts: ["image/png", "image/jpeg", "image/gif", "image/webp"]
            .map(String::from)
            .to_vec(),
        ..Request::default()
    }
}

/// A W×H picture with detail in it (so it does not compress to nothing).
fn picture_of(w: u32, h: u32, noise: bool) -> DynamicImage {
    let mut seed = 12345u32;
    DynamicImage::ImageRgb8(RgbImage::from_fn(w, h, |x, y| {
        if noise {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let v = seed.to_le_bytes();
            Rgb([v[1], v[2], v[3]])
        } else {
            Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
        }
    }))
}

fn write(dir: &Path, name: &str, image: &DynamicImage, format: ImageFormat) -> PathBuf {
    let mut bytes = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut bytes), format)
        .expect("encode");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

fn read_file(path: &Path, req: &Request) -> Result<Reading, String> {
    let name = path.to_string_lossy().into_owned();
    let kind = kind(path, &name).ok_or("not media")?;
    read(path, &name, kind, req, &Budget::unlimited()).map_err(|e| e.message)
}

fn decoded(p: &Picture) -> DynamicImage {
    image::load_from_memory(&p.data).expect("the sent bytes decode")
}

#[test]
fn a_large_png_is_scaled_to_the_longest_side_and_states_its_size() {
    let r = read_file(&fixture("screen-4000x3000.png"), &all_types()).expect("read");
    let [p] = &r.pictures[..] else {
        panic!("one picture")
    };
    assert_eq!((p.mime, p.width, p.height), ("image/png", 1568, 1176));
    assert_eq!(decoded(p).width(), 1568);
    assert!(r.text.contains("PNG, 4000×3000 px"), "{}", r.text);
    assert!(r.text.contains("1568×1176 px"), "{}", r.text);
    assert!(!p.thumbnail.is_empty());
}

#[test]
fn a_small_image_of_an_accepted_type_is_sent_as_it_is() {
    let r = read_file(&fixture("small.png"), &all_types()).expect("read");
    let bytes = std::fs::read(fixture("small.png")).expect("fixture");
    assert_eq!(r.pictures[0].data, bytes);
    assert!(r.text.contains("sent as it is"), "{}", r.text);
}

#[test]
fn jpeg_webp_and_gif_are_decoded_and_sent_in_a_type_the_model_takes() {
    let tmp = TestDir::new("media");
    let dir = tmp.path();
    let big = picture_of(2400, 1600, false);
    let jpeg = write(dir, "photo.jpg", &big, ImageFormat::Jpeg);
    let r = read_file(&jpeg, &all_types()).expect("jpeg");
    assert_eq!(r.pictures[0].mime, "image/jpeg");
    assert_eq!((r.pictures[0].width, r.pictures[0].height), (1568, 1045));
    let webp = write(
        dir,
        "pic.webp",
        &picture_of(40, 30, false),
        ImageFormat::WebP,
    );
    let r = read_file(&webp, &all_types()).expect("webp");
    assert_eq!(r.pictures[0].mime, "image/webp");
    let png_only = Request {
        accepts: vec!["image/png".into()],
        ..Request::default()
    };
    let r = read_file(&webp, &png_only).expect("webp as png");
    assert_eq!(r.pictures[0].mime, "image/png");
    assert_eq!(decoded(&r.pictures[0]).width(), 40);
}

#[test]
fn an_animated_gif_sends_its_first_frame_and_says_so() {
    let r = read_file(&fixture("animated.gif"), &all_types()).expect("gif");
    assert_eq!(r.pictures[0].mime, "image/png");
    assert_eq!((r.pictures[0].width, r.pictures[0].height), (32, 24));
    assert!(r.text.contains("only its first frame"), "{}", r.text);
}

#[test]
fn a_truncated_or_corrupt_image_is_an_error_naming_the_file() {
    let tmp = TestDir::new("media");
    let dir = tmp.path();
    let bytes = std::fs::read(fixture("small.png")).expect("fixture");
    let cut = dir.join("cut.png");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    let err = read_file(&cut, &all_types()).expect_err("truncated");
    assert!(
        err.contains("cut.png") && err.contains("corrupt or truncated"),
        "{err}"
    );
    let junk = dir.join("junk.jpg");
    std::fs::write(&junk, b"\xff\xd8\xff\xe0 not really a jpeg").expect("write");
    let err = read_file(&junk, &all_types()).expect_err("junk");
    assert!(err.contains("junk.jpg"), "{err}");
}

#[test]
fn a_text_only_model_gets_a_note_and_no_picture() {
    let r = read_file(&fixture("small.png"), &Request::default()).expect("read");
    assert!(r.pictures.is_empty());
    assert!(
        r.text.contains("64×48 px") && r.text.contains("text only"),
        "{}",
        r.text
    );
}

#[test]
fn the_longest_side_is_never_above_8000_and_base64_fits_5_mb() {
    let tmp = TestDir::new("media");
    let dir = tmp.path();
    let noisy = write(
        dir,
        "noise.png",
        &picture_of(2600, 2600, true),
        ImageFormat::Png,
    );
    let req = Request {
        max_side: 100_000,
        ..all_types()
    };
    assert_eq!(req.max_side(), MAX_SIDE);
    let r = read_file(&noisy, &req).expect("noise");
    let p = &r.pictures[0];
    assert!(
        p.data.len().div_ceil(3) * 4 <= MAX_BASE64,
        "{}",
        p.data.len()
    );
    assert!(p.width <= MAX_SIDE && p.height <= MAX_SIDE);
}

#[test]
fn a_crop_sends_only_that_part() {
    let req = Request {
        crop: Some([10, 5, 20, 10]),
        ..all_types()
    };
    let r = read_file(&fixture("small.png"), &req).expect("crop");
    assert_eq!((r.pictures[0].width, r.pictures[0].height), (20, 10));
}

#[test]
fn a_pdf_gives_its_pages_text_and_renders_a_page_without_text() {
    let r = read_file(&fixture("three-pages.pdf"), &all_types()).expect("pdf");
    assert!(r.text.starts_with("PDF `"), "{}", r.text);
    assert!(r.text.contains(": 3 pages, "), "{}", r.text);
    assert!(
        r.text.contains("--- page 1 of 3 ---\nAlpha page one."),
        "{}",
        r.text
    );
    assert!(
        r.text.contains("--- page 2 of 3 ---\nBravo page two."),
        "{}",
        r.text
    );
    assert!(
        r.text.contains("--- page 3 of 3 ---\n(no text layer"),
        "{}",
        r.text
    );
    let [p] = &r.pictures[..] else {
        panic!("one rendered page")
    };
    assert_eq!(p.mime, "image/png");
    assert_eq!(p.height.max(p.width), DEFAULT_MAX_SIDE);
}

#[test]
fn pdf_pages_and_image_mode_are_honoured() {
    let req = Request {
        pages: Some("2".into()),
        ..all_types()
    };
    let r = read_file(&fixture("three-pages.pdf"), &req).expect("page 2");
    assert!(r.text.contains("Showing page 2."), "{}", r.text);
    assert!(
        !r.text.contains("Alpha") && r.pictures.is_empty(),
        "{}",
        r.text
    );
    let req = Request {
        pages: Some("1-2".into()),
        render: true,
        ..all_types()
    };
    let r = read_file(&fixture("three-pages.pdf"), &req).expect("rendered");
    assert_eq!(r.pictures.len(), 2);
    let err = read_file(
        &fixture("three-pages.pdf"),
        &Request {
            pages: Some("2-9".into()),
            ..all_types()
        },
    )
    .expect_err("past the end");
    assert!(err.contains("pages 1-3"), "{err}");
}

#[test]
fn the_default_shows_ten_pages_and_says_how_to_read_on() {
    let r = read_file(&fixture("hundred-pages.pdf"), &Request::default()).expect("pdf");
    assert!(r.text.contains("--- page 10 of 100 ---"), "{}", r.text);
    assert!(!r.text.contains("--- page 11 of 100 ---"));
    assert!(r.text.contains("pages: \"11-20\""), "{}", r.text);
}

#[test]
fn an_encrypted_pdf_is_a_clear_error() {
    let err = read_file(&fixture("encrypted.pdf"), &all_types()).expect_err("encrypted");
    assert!(err.contains("encrypted with a password"), "{err}");
    assert!(err.contains("encrypted.pdf"), "{err}");
}

#[test]
fn page_lists_parse() {
    assert_eq!(pdf::parse_pages("3-5", 9), Ok(vec![3, 4, 5]));
    assert_eq!(pdf::parse_pages("1, 4,8-", 9), Ok(vec![1, 4, 8, 9]));
    assert!(pdf::parse_pages("0", 9).is_err());
    assert!(pdf::parse_pages("five", 9).is_err());
    assert_eq!(pdf::describe_pages(&[1, 2, 3, 7]), "pages 1-3, 7");
}

#[test]
fn a_cancelled_budget_stops_a_pdf_read() {
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let budget = Budget::new(cancel, None);
    let path = fixture("hundred-pages.pdf");
    let err = read(&path, "h.pdf", Kind::Pdf, &Request::default(), &budget).expect_err("cancelled");
    assert!(err.message.contains("Cancelled"), "{}", err.message);
}

/// A Read of the SVG at PATH as the job runs it: its text, and the datum.
fn read_svg(path: &Path, page: crate::resource::page::PageRequest, req: Request) -> Datum {
    use crate::search::jobs::{Job, ReadTarget, run};
    let target = ReadTarget::Path(path.to_path_buf(), path.to_string_lossy().into_owned());
    run(&Job::Read(target, page, req), &Budget::unlimited()).expect("read")
}

fn plist_get<'a>(datum: &'a Datum, key: &str) -> Option<&'a Datum> {
    let Datum::List(items) = datum else {
        return None;
    };
    items.chunks(2).find_map(|pair| match pair {
        [Datum::Symbol(k), v] if k.strip_prefix(':') == Some(key) => Some(v),
        _ => None,
    })
}

#[test]
fn an_svg_reads_as_text_and_is_sent_drawn_without_outside_files() {
    let datum = read_svg(
        &fixture("diagram.svg"),
        Default::default(),
        Request {
            accepts: vec!["image/png".into()],
            ..Request::default()
        },
    );
    let Some(Datum::Str(text)) = plist_get(&datum, "text") else {
        panic!("text: {datum:?}")
    };
    assert!(text.contains("<rect x=\"10\""), "{text}");
    assert!(
        text.contains("(The SVG is also sent drawn, as an image: PNG 512×256 px"),
        "{text}"
    );
    let Some(Datum::List(media)) = plist_get(&datum, "media") else {
        panic!("media: {datum:?}")
    };
    let [picture] = &media[..] else {
        panic!("one picture: {media:?}")
    };
    let Some(Datum::Str(b64)) = plist_get(picture, "base64") else {
        panic!("base64")
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    let image = image::load_from_memory(&bytes).expect("png").to_rgb8();
    assert_eq!(image.dimensions(), (512, 256));
    // Scaled 1.6×: the boxes' colours, white text on the blue one, and
    // the corner where the outside PNG would be left white.
    let px = |x: u32, y: u32| image.get_pixel(x, y).0;
    assert_eq!(px(30, 80), [0x3b, 0x82, 0xf6]);
    assert_eq!(px(480, 80), [0xef, 0x44, 0x44]);
    let label = (40..170)
        .flat_map(|x| (100..125).map(move |y| (x, y)))
        .filter(|&(x, y)| px(x, y) == [255, 255, 255])
        .count();
    assert!(label > 20, "the label's white pixels: {label}");
    assert!((0..30).all(|x| (0..30).all(|y| px(x, y) == [255, 255, 255])));
}

#[test]
fn an_svg_for_a_text_only_model_or_past_its_first_page_is_text_alone() {
    let text_only = read_svg(
        &fixture("diagram.svg"),
        Default::default(),
        Request::default(),
    );
    assert!(plist_get(&text_only, "media").is_none(), "{text_only:?}");
    let later = read_svg(
        &fixture("diagram.svg"),
        crate::resource::page::PageRequest {
            offset: Some(3),
            ..Default::default()
        },
        all_types(),
    );
    assert!(plist_get(&later, "media").is_none(), "{later:?}");
}

#[test]
fn a_broken_svg_keeps_its_text_and_says_why_it_is_not_drawn() {
    let tmp = TestDir::new("media");
    let path = tmp.path().join("broken.svg");
    std::fs::write(&path, "<svg xmlns=\"http://www.w3.org/2000/svg\"><rect").expect("write");
    let datum = read_svg(&path, Default::default(), all_types());
    let Some(Datum::Str(text)) = plist_get(&datum, "text") else {
        panic!("text: {datum:?}")
    };
    assert!(text.contains("<svg xmlns"), "{text}");
    assert!(
        text.contains("(The SVG could not be drawn as an image: "),
        "{text}"
    );
    assert!(
        matches!(plist_get(&datum, "media"), Some(Datum::List(m)) if m.is_empty()),
        "{datum:?}"
    );
}
