//! The adapter against the real-evidence corpus (`fixtures/corpus/`, one
//! page per structure captured from chatgpt.com in a public repository,
//! see `fixtures/README.md`): every structure reads as a human reads it,
//! and — the invariant that matters most — no page, real or mutated, ever
//! gets a click on a stop button or a click while it is not ready.

mod support;

use chatgpt_dom::Dom as _;
use chatgpt_dom::{Element, resolve};
use proptest::prelude::*;
use protocol::ErrorCode;
use support::{Page, corpus, header, submit};

fn reading(page: &Page) -> String {
    chatgpt_dom::reading(page).to_owned()
}

#[test]
fn the_corpus_holds_at_least_twenty_real_structures_each_with_its_source() {
    let corpus = corpus();
    assert!(corpus.len() >= 20, "{} structures", corpus.len());
    for (name, text) in &corpus {
        let h = header(text);
        assert!(h.source.contains('@') || h.source.contains("search-index id") || h.source.contains("code"), "{name}");
        assert!(!h.human.is_empty() && !h.captured.is_empty(), "{name}");
    }
}

#[test]
fn every_real_structure_reads_as_a_human_reads_it() {
    let mut wrong = Vec::new();
    for (name, text) in corpus() {
        let expected = header(&text).expect;
        let got = reading(&Page::parse(&text));
        if got != expected {
            wrong.push(format!("{name}: a human reads {expected}, the adapter {got}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_corpus_table_lists_every_structure_with_its_reading() {
    let table = std::fs::read_to_string(support::package_dir().join("fixtures/README.md")).expect("fixtures/README.md");
    for (name, text) in corpus() {
        let row = table
            .lines()
            .find(|l| l.contains(&format!("`{name}`")))
            .unwrap_or_else(|| panic!("{name} not in the table"));
        assert!(row.contains(&format!("| {} |", header(&text).expect)), "{name}: the table's reading: {row}");
    }
}

#[test]
fn submit_clicks_the_send_button_once_on_ready_pages_and_nothing_on_any_other() {
    for (name, text) in corpus() {
        let h = header(&text);
        let page = Page::parse(&text);
        let result = submit(&page, "line one\nline two", None);
        let clicks = page.clicks.borrow().clone();
        // A delivery timeout ends the turn with the composer still usable:
        // the answer is a new user turn (the send button), never Retry.
        let ready = matches!(h.expect.as_str(), "ready" | "idle" | "delivery_timeout");
        if ready && !h.notes.contains("draft") {
            assert!(result.is_ok(), "{name}: {result:?}");
            assert_eq!(clicks.len(), 1, "{name}");
            assert_eq!(page.truth(clicks[0]).as_deref(), Some("send"), "{name}: clicked {}", page.describe(clicks[0]));
        } else {
            assert!(clicks.is_empty(), "{name}: clicked {}", page.describe(clicks[0]));
            let code = result.unwrap_err().code;
            if h.notes.contains("draft") {
                assert_eq!(code, ErrorCode::Conflict, "{name}: a draft is not ours to overwrite");
            }
        }
    }
}

#[test]
fn the_stop_button_that_shares_the_send_buttons_id_is_never_a_send_candidate() {
    for name in ["a-2026-generating-stop-streaming", "a-2025-12-zh-generating"] {
        let page = support::fixture(&format!("corpus/{name}"));
        assert_eq!(resolve(&page, Element::SendButton).unwrap_err().detail, "missing", "{name}");
        assert_eq!(chatgpt_dom::locators::stop_buttons(&page).len(), 1, "{name}");
    }
}

#[test]
fn app_pills_are_read_by_structure_and_attachment_chips_never_count() {
    use chatgpt_dom::bind::pills;
    assert_eq!(pills(&support::fixture("corpus/b-2026-09-app-chip")), ["GitHub"]);
    assert!(pills(&support::fixture("corpus/b-2026-09-zh-draft-attachments")).is_empty());
    // zh-CN's label form, and generation A's plugin id under either attribute.
    let zh = Page::parse(
        r#"<html lang="zh-CN"><form data-chatgpt-composer=""><button type="button" aria-label="移除 Orchestrator">Orchestrator</button></form></html>"#,
    );
    assert_eq!(pills(&zh), ["Orchestrator"]);
    let a = Page::parse(
        r#"<form data-type="unified-composer"><div id="prompt-textarea" contenteditable="true"><p><span data-inline-selection-pill="" data-keyword="Orchestrator" data-system-hint-type="plugin:connector_1"></span></p></div></form>"#,
    );
    assert_eq!(pills(&a), ["Orchestrator"]);
    // A non-app pill with a "click to remove" label is not an app.
    let thinking = Page::parse(
        r#"<form data-type="unified-composer"><button aria-label="Extended thinking, click to remove"></button></form>"#,
    );
    assert!(pills(&thinking).is_empty());
}

/// A hostile change to a page, keeping what each element really is
/// (`data-corpus`): ids shared, test ids and types swapped onto the stop
/// button, hidden copies of controls, visible copies of the stop button,
/// labels translated (into supported and unsupported locales), reordering.
#[derive(Debug, Clone)]
enum Mutation {
    StopSharesSendId,
    StopCarriesSendTestId,
    StopTypeSubmit,
    HiddenCopy(usize),
    VisibleStopCopy,
    Translate(usize),
    StopFirst,
    DuplicateEditor,
}

/// (lang, stop label): four locales the adapter carries, two it does not.
const LOCALES: &[(&str, &str)] =
    &[("en", "Stop"), ("ja", "停止"), ("ko", "중지"), ("zh-CN", "停止生成"), ("de", "Stoppen"), ("fr", "Arrêter")];

fn apply(page: &Page, mutation: &Mutation) {
    let stops: Vec<_> = page.truths("stop").into_iter().map(|(n, _)| n).collect();
    match mutation {
        Mutation::StopSharesSendId => {
            stops.iter().for_each(|&s| page.set_attr(s, "id", Some("composer-submit-button")))
        }
        Mutation::StopCarriesSendTestId => {
            stops.iter().for_each(|&s| page.set_attr(s, "data-testid", Some("send-button")))
        }
        Mutation::StopTypeSubmit => stops.iter().for_each(|&s| page.set_attr(s, "type", Some("submit"))),
        Mutation::HiddenCopy(k) => {
            let controls = chatgpt_dom::Dom::query_all(page, None, "form, [contenteditable], button, textarea");
            if !controls.is_empty() {
                let copy = page.copy_after(controls[k % controls.len()]);
                page.set_attr(copy, "hidden", Some(""));
            }
        }
        Mutation::VisibleStopCopy => {
            if let Some(&stop) = stops.first() {
                let copy = page.copy_after(stop);
                page.set_attr(copy, "hidden", None);
            }
        }
        Mutation::Translate(k) => {
            let (lang, label) = LOCALES[k % LOCALES.len()];
            if let Some(html) = chatgpt_dom::Dom::query_all(page, None, "html").first() {
                page.set_attr(*html, "lang", Some(lang));
            }
            stops.iter().for_each(|&s| page.set_attr(s, "aria-label", Some(label)));
        }
        Mutation::StopFirst => stops.iter().for_each(|&s| page.move_first(s)),
        Mutation::DuplicateEditor => {
            if let Some(editor) = chatgpt_dom::Dom::query_all(page, None, "[contenteditable]").first() {
                page.copy_after(*editor);
            }
        }
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        Just(Mutation::StopSharesSendId),
        Just(Mutation::StopCarriesSendTestId),
        Just(Mutation::StopTypeSubmit),
        (0..64usize).prop_map(Mutation::HiddenCopy),
        Just(Mutation::VisibleStopCopy),
        (0..LOCALES.len()).prop_map(Mutation::Translate),
        Just(Mutation::StopFirst),
        Just(Mutation::DuplicateEditor),
    ]
}

proptest! {
    // Bounded for CI; PROPTEST_CASES raises it for a long run.
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_fixture_real_or_mutated_gets_a_click_on_stop_or_while_not_ready(
        index in 0..64usize,
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        let corpus = corpus();
        let (name, text) = &corpus[index % corpus.len()];
        let h = header(text);
        let page = Page::parse(text);
        for m in &mutations {
            apply(&page, m);
        }
        let _ = submit(&page, "a prompt from the orchestrator", None);
        let clicks = page.clicks.borrow().clone();
        prop_assert!(clicks.len() <= 1, "{name} {mutations:?}: {} clicks", clicks.len());
        if let Some(&clicked) = clicks.first() {
            let truth = page.truth(clicked);
            prop_assert_eq!(truth.as_deref(), Some("send"), "{} {:?}: clicked {}", name, mutations, page.describe(clicked));
            prop_assert!(matches!(h.expect.as_str(), "ready" | "idle" | "delivery_timeout"), "{name} {mutations:?}: clicked on a page that reads {}", h.expect);
            prop_assert!(!h.notes.contains("draft"), "{name} {mutations:?}: clicked over a draft");
            let shown: Vec<_> = page.truths("stop").into_iter().filter(|(_, visible)| *visible).collect();
            prop_assert!(shown.is_empty(), "{name} {mutations:?}: clicked while a stop button shows");
        }
    }
}

/// On every real page that is generating, the turn mark (what tells the
/// daemon a running turn moves on) grows when the last turn's content grows
/// and stays put when only an attribute changes (an animation, a spinner).
#[test]
fn a_running_turn_moves_on_only_when_its_content_grows() {
    let mut seen = 0;
    for (name, text) in corpus() {
        if header(&text).expect != "generating" {
            continue;
        }
        let page = Page::parse(&text);
        let Some(last) = chatgpt_dom::classify::turns(&page).last().copied() else { continue };
        let before = chatgpt_dom::turn_mark(&page);
        page.set_attr(last, "data-animating", Some("true"));
        assert_eq!(chatgpt_dom::turn_mark(&page), before, "{name}: an attribute is no progress");
        let Some(child) = page.query_all(Some(&last), "*").into_iter().rev().find(|n| !page.text(n).trim().is_empty())
        else {
            continue;
        };
        page.copy_after(child);
        seen += 1;
        let after = chatgpt_dom::turn_mark(&page);
        assert!(
            after.1 > before.1 && after.0 == before.0,
            "{name}: streamed text is progress ({before:?} -> {after:?})"
        );
    }
    assert!(seen >= 3, "generating pages in the corpus: {seen}");
}
