//! The adapter's cost per page (run: `cargo bench -p chatgpt-dom`). Prints
//! figures, asserts nothing. Over every page of the real-evidence corpus,
//! parsed once: `classify` per call against a plain `query_all("button")`
//! in the same run as the baseline (one selector walk of the document,
//! the least any reading of the page costs), and `compose::observed` (what
//! a carrier reports on every mutation) against `classify` too. Native, on the HTML-parser
//! `Dom`; a browser's `querySelectorAll` is faster per walk, so the ratio,
//! not the microseconds, is what carries over.

use std::time::Instant;

use chatgpt_dom::html::HtmlPage;
use chatgpt_dom::{Dom, classify};

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let rounds = if quick { 20 } else { 2_000 };
    let dir = std::path::Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("fixtures/corpus");
    let mut pages: Vec<(String, HtmlPage)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                HtmlPage::parse(&std::fs::read_to_string(&p).unwrap()),
            )
        })
        .collect();
    pages.sort_by(|a, b| a.0.cmp(&b.0));
    let time = |f: &dyn Fn(&HtmlPage)| -> f64 {
        let start = Instant::now();
        for _ in 0..rounds {
            for (_, page) in &pages {
                f(page);
            }
        }
        start.elapsed().as_secs_f64() * 1e6 / (rounds * pages.len()) as f64
    };
    let baseline = time(&|p| {
        std::hint::black_box(p.query_all(None, "button"));
    });
    let classify_us = time(&|p| {
        let _ = std::hint::black_box(classify(p));
    });
    // What a carrier reports on every mutation: the reading and a person's
    // draft (typed text or an attachment).
    let observed_us = time(&|p| {
        std::hint::black_box(chatgpt_dom::compose::observed(p, false));
    });
    let inspect_us = time(&|p| {
        std::hint::black_box(chatgpt_dom::inspect::inspect(p));
    });
    println!("chatgpt-dom over {} corpus pages, {rounds} rounds{}", pages.len(), if quick { " (quick)" } else { "" });
    println!("  baseline query_all(\"button\"): {baseline:.1} µs/page");
    println!("  classify:                     {classify_us:.1} µs/page ({:.1}x baseline)", classify_us / baseline);
    println!(
        "  observed (the report):        {observed_us:.1} µs/page ({:.1}x baseline, {:.2}x classify)",
        observed_us / baseline,
        observed_us / classify_us
    );
    println!("  inspect (the page check):     {inspect_us:.1} µs/page ({:.1}x baseline)", inspect_us / baseline);
}
