//! `orchestrator inspect-page FILE.html`: how this build reads a page an
//! operator saved from chatgpt.com (Ctrl-S), for checking the build against
//! the real site and for bug reports. Read-only: it parses the file, runs
//! the adapter's [`chatgpt_dom::inspect`] and prints; it never clicks,
//! types, or sends anything anywhere.
//!
//! A saved page has no layout: visibility is read from the markup (see
//! `chatgpt_dom::html`), so an element hidden only by a stylesheet counts
//! as visible here while the live extension would not count it.

use chatgpt_dom::html::HtmlPage;
use chatgpt_dom::inspect::{Report, SubmitPlan, inspect};
use ego_tree::NodeId;
use serde_json::{Value, json};

/// The largest page read (a saved ChatGPT page is a few MiB).
pub const MAX_PAGE_BYTES: u64 = 64 * 1024 * 1024;

/// Why a page could not be inspected.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path given.
        path: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file is over [`MAX_PAGE_BYTES`].
    #[error("{path} is {size} bytes; pages over {MAX_PAGE_BYTES} bytes are not read (TOO_LARGE)")]
    TooLarge {
        /// The path given.
        path: String,
        /// Its size.
        size: u64,
    },
    /// The file is not an HTML page (binary, or no markup at all).
    #[error(
        "{path} is not a saved HTML page ({why}); save the chat with Ctrl-S as \"Webpage, complete\" or \"HTML only\" (NOT_HTML)"
    )]
    NotHtml {
        /// The path given.
        path: String,
        /// What gave it away.
        why: &'static str,
    },
}

/// Reads and parses `path`.
pub fn load(path: &std::path::Path) -> Result<HtmlPage, Error> {
    let shown = path.display().to_string();
    let size = std::fs::metadata(path).map_err(|source| Error::Read { path: shown.clone(), source })?.len();
    if size > MAX_PAGE_BYTES {
        return Err(Error::TooLarge { path: shown, size });
    }
    // Read at most the bound even if the file grows or is not a regular file.
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(
            std::fs::File::open(path).map_err(|source| Error::Read { path: shown.clone(), source })?,
            MAX_PAGE_BYTES + 1,
        ),
        &mut bytes,
    )
    .map_err(|source| Error::Read { path: shown.clone(), source })?;
    if bytes.len() as u64 > MAX_PAGE_BYTES {
        return Err(Error::TooLarge { path: shown, size: bytes.len() as u64 });
    }
    // A saved page is UTF-8 text with markup; anything else would read as
    // an empty, "loading" page and mislead a bug report.
    let text =
        std::str::from_utf8(&bytes).map_err(|_| Error::NotHtml { path: shown.clone(), why: "not UTF-8 text" })?;
    if text.contains('\0') {
        return Err(Error::NotHtml { path: shown, why: "it holds NUL bytes" });
    }
    if !text.contains('<') {
        return Err(Error::NotHtml { path: shown, why: "it holds no markup" });
    }
    Ok(HtmlPage::parse(text))
}

fn state(report: &Report<NodeId>) -> String {
    match &report.state {
        Ok(state) => state.name().to_owned(),
        Err(_) => "ui_changed".to_owned(),
    }
}

/// The report as JSON, for bug reports: every field of the text form.
pub fn json(page: &HtmlPage, report: &Report<NodeId>) -> Value {
    let node = |n: &NodeId| page.describe(*n);
    json!({
        "adapter": report.adapter,
        "lang": report.lang,
        "state": state(report),
        "refusal": report.state.as_ref().err(),
        "turns": report.turns,
        "stop_buttons": report.stop_buttons.iter().map(node).collect::<Vec<_>>(),
        "submit": match &report.submit {
            SubmitPlan::Click(n) => json!({"click": node(n)}),
            SubmitPlan::AfterTyping => json!({"after_typing": "the send button appears once the prompt is typed; the form's submit control without stop semantics is clicked"}),
            SubmitPlan::Nothing(why) => json!({"nothing": why}),
        },
        "app_pills": report.pills,
        "locators": report.locators.iter().map(|l| json!({
            "element": format!("{:?}", l.element),
            "resolved": match &l.resolved { Ok(n) => json!({"found": node(n)}), Err(why) => json!({"refused": why}) },
            "candidates": l.candidates.iter().map(|c| json!({
                "generation": c.generation,
                "selector": c.selector,
                "matches": c.matches.iter().map(|(n, visible)| json!({"element": node(n), "visible": visible})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// The report for a person.
pub fn text(page: &HtmlPage, report: &Report<NodeId>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "adapter:   {}", report.adapter);
    let _ = writeln!(out, "lang:      {}", report.lang.as_deref().unwrap_or("(none)"));
    let _ = writeln!(out, "state:     {}", state(report));
    if let Err(refusal) = &report.state {
        let _ = writeln!(out, "refusal:   {refusal}");
    }
    let _ = writeln!(out, "turns:     {}", report.turns);
    let stops: Vec<String> = report.stop_buttons.iter().map(|n| page.describe(*n)).collect();
    let _ = writeln!(out, "stop:      {}", if stops.is_empty() { "(none visible)".into() } else { stops.join(" ") });
    let submit = match &report.submit {
        SubmitPlan::Click(n) => format!("would click {}", page.describe(*n)),
        SubmitPlan::AfterTyping => "would type the prompt, then click the send button the page shows for it".into(),
        SubmitPlan::Nothing(why) => format!("nothing ({why})"),
    };
    let _ = writeln!(out, "submit:    {submit}");
    let _ =
        writeln!(out, "app pills: {}", if report.pills.is_empty() { "(none)".into() } else { report.pills.join(", ") });
    out.push_str("locators:\n");
    for locator in &report.locators {
        let resolved = match &locator.resolved {
            Ok(n) => page.describe(*n),
            Err(why) => why.clone(),
        };
        let _ = writeln!(out, "  {:?}: {resolved}", locator.element);
        for candidate in &locator.candidates {
            let _ = writeln!(out, "    [{}] {}", candidate.generation, candidate.selector);
            for (n, visible) in &candidate.matches {
                let _ = writeln!(out, "        {} {}", if *visible { "visible" } else { "hidden " }, page.describe(*n));
            }
        }
    }
    out
}

/// Inspects the page at `path`; `Ok(text)` for printing.
pub fn run(path: &std::path::Path, as_json: bool) -> Result<String, Error> {
    let page = load(path)?;
    let report = inspect(&page);
    Ok(if as_json { format!("{:#}", json(&page, &report)) } else { text(&page, &report) })
}
