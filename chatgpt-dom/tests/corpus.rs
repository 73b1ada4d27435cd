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
                assert_eq!(code, ErrorCode::ComposerHasDraft, "{name}: a draft is not ours to overwrite");
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

/// The 2026-09 in-editor app mention is the binding, not a draft: it reads
/// as the app's pill, `submit` types the prompt after it and keeps it (bound
/// right up to the click), and refusing leaves it in place.
#[test]
fn the_in_editor_app_mention_is_the_binding_and_the_prompt_goes_after_it() {
    use chatgpt_dom::bind::{Selected, pills, selected};
    let page = support::fixture("corpus/b-2026-09-app-mention-in-editor");
    assert_eq!(pills(&page), ["Orchestrator"]);
    assert_eq!(selected(&page, "Orchestrator"), Selected::Bound);
    let editor = resolve(&page, Element::Editor).unwrap();
    assert_eq!(chatgpt_dom::compose::draft(&page, &editor), "", "the mention is no draft");
    let result = submit(&page, "do the task", Some("Orchestrator"));
    assert!(result.is_ok(), "{result:?}");
    let clicks = page.clicks.borrow().clone();
    assert_eq!(clicks.iter().map(|c| page.truth(*c)).collect::<Vec<_>>(), [Some("send".to_owned())]);
    // What went in: the mention, then the prompt.
    let shown = page.text(&editor);
    assert!(shown.starts_with("Orchestrator") && shown.ends_with("do the task"), "{shown:?}");
    // A text the editor does not take verbatim is refused; the mention stays.
    let mut broken = support::fixture("corpus/b-2026-09-app-mention-in-editor");
    broken.accepts_input = false;
    assert_eq!(submit(&broken, "do the task", Some("Orchestrator")).unwrap_err().code, ErrorCode::HostUiChanged);
    assert_eq!(selected(&broken, "Orchestrator"), Selected::Bound);
    // A person's words after the mention are a draft.
    let text = support::fixture_text("corpus/b-2026-09-app-mention-in-editor");
    let draft = Page::parse(&text.replace("</span>&nbsp;</p>", "</span>&nbsp;half a thought</p>"));
    assert_eq!(submit(&draft, "do the task", Some("Orchestrator")).unwrap_err().code, ErrorCode::ComposerHasDraft);
    assert!(draft.clicks.borrow().is_empty());
    assert_eq!(
        chatgpt_dom::inspect::inspect(&page).pills,
        ["Orchestrator"],
        "inspect-page names the mention as the app pill"
    );
    // A tool pill a person chose (no plugin id) is their draft, not a binding.
    // No public capture shows a tool pill's attributes: this one is made up
    // (`data-system-hint-type="search"`), and the adapter fails closed on it.
    let tool = Page::parse(&text.replace(
        "</span>&nbsp;</p>",
        "</span>&nbsp;<span data-inline-selection-pill=\"\" data-system-hint-type=\"search\">Search</span></p>",
    ));
    assert_eq!(submit(&tool, "do the task", Some("Orchestrator")).unwrap_err().code, ErrorCode::ComposerHasDraft);
    assert!(tool.clicks.borrow().is_empty());
}

/// The redesign's mention rows are buttons titled by their row content's
/// first leaf, with or without a scroll area around them: the exact title
/// is picked, a longer name never is.
#[test]
fn mention_rows_without_a_scroll_area_are_read_by_their_row_content() {
    use chatgpt_dom::bind::{Offer, offer};
    let page = support::fixture("corpus/b-2026-09-mention-rows-unscrolled");
    match offer(&page, "Orchestrator") {
        Offer::Pick(row) => assert!(page.describe(row).contains("button"), "{}", page.describe(row)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(offer(&page, "Orchestrator Lab"), Offer::Pick(_)));
    assert_eq!(offer(&page, "Orch"), Offer::Absent);
    assert_eq!(offer(&page, "Worker pool tools"), Offer::Absent, "a description is no title");
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
    /// One of [`NOTICES`], placed per [`place`].
    Notice {
        kind: usize,
        place: usize,
    },
    /// A tool-approval card, waiting or answered (every button disabled).
    ApprovalCard {
        answered: bool,
        place: usize,
    },
}

/// Busy notices as the evidence shows them (`fixtures/README.md`, issue
/// 30), each with whether its text alone says busy wherever it stands.
/// The others (markers, an unknown status) say busy inside the last turn.
const NOTICES: &[(&str, bool)] = &[
    (
        r#"<div role="status"><span class="text-chatgpt-recovery">Connection interrupted. Waiting for the complete answer</span></div>"#,
        true,
    ),
    (
        r#"<div role="status"><span class="text-chatgpt-recovery">Соединение прервано. Ожидание полного ответа</span></div>"#,
        true,
    ),
    (
        r#"<div role="status" aria-live="polite"><span>Our systems are checking a few extra things before responding.</span></div>"#,
        true,
    ),
    (
        r#"<div role="status" aria-live="polite"><span>Nos systèmes effectuent quelques vérifications supplémentaires avant de répondre.</span></div>"#,
        true,
    ),
    (
        r#"<div role="status" aria-live="polite"><span>Наши системы выполняют дополнительную обработку этого запроса, прежде чем предоставить ответ.</span></div>"#,
        true,
    ),
    (
        r#"<div data-streaming-response-status="streaming"><span class="loading-shimmer-tertiary">Our systems are thinking a bit more about this request before responding.</span></div>"#,
        true,
    ),
    (r#"<div data-streaming-response-status=""><span aria-hidden="true">Working for 12s</span></div>"#, false),
    (r#"<div role="status" aria-busy="true"><span>Generating</span></div>"#, false),
    (r#"<div role="status"><span>A notice no table knows yet</span></div>"#, false),
];

/// A tool-approval card (`b-2026-10-approval-card-*`).
fn card(answered: bool) -> String {
    let disabled = if answered { r#" disabled="""# } else { "" };
    format!(
        r#"<div data-codex-approval-surface="true"><div role="alert"><p>Allow ChatGPT to use Orchestrator?</p></div><button type="button"{disabled}>Deny</button><button type="button"{disabled}>Allow once</button></div>"#
    )
}

/// Where an added node goes: 0 appended to the last turn, 1 right after
/// it, 2 at the end of the body, 3 into the last turn's deepest last
/// element. Returns whether it landed inside the last turn.
fn place(page: &Page, markup: &str, place: usize) -> bool {
    let body = page.query_all(None, "body").first().copied();
    let last = chatgpt_dom::classify::turns(page).last().copied();
    let target = match (place % 4, last) {
        (0, Some(turn)) => Some((turn, false, true)),
        (1, Some(turn)) => Some((turn, true, false)),
        (3, Some(turn)) => {
            let deepest = page.query_all(Some(&turn), "div").last().copied().unwrap_or(turn);
            Some((deepest, false, true))
        }
        _ => body.map(|b| (b, false, false)),
    };
    let Some((node, after, inside)) = target else { return false };
    page.graft(node, markup, after).is_some() && inside
}

/// (lang, stop label): four locales the adapter carries, two it does not.
const LOCALES: &[(&str, &str)] =
    &[("en", "Stop"), ("ja", "停止"), ("ko", "중지"), ("zh-CN", "停止生成"), ("de", "Stoppen"), ("fr", "Arrêter")];

/// Applies `mutation`; true when it added something that must keep the
/// page from taking a prompt (a busy notice, a waiting approval card).
fn apply(page: &Page, mutation: &Mutation) -> bool {
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
        Mutation::Notice { kind, place: at } => {
            let (markup, known) = NOTICES[kind % NOTICES.len()];
            let inside = place(page, markup, *at);
            return inside || known;
        }
        Mutation::ApprovalCard { answered, place: at } => {
            place(page, &card(*answered), *at);
            return !answered;
        }
    }
    false
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
        (0..NOTICES.len(), 0..4usize).prop_map(|(kind, place)| Mutation::Notice { kind, place }),
        (any::<bool>(), 0..4usize).prop_map(|(answered, place)| Mutation::ApprovalCard { answered, place }),
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
        let mut busy = false;
        for m in &mutations {
            busy |= apply(&page, m);
        }
        let _ = submit(&page, "a prompt from the orchestrator", None);
        let clicks = page.clicks.borrow().clone();
        prop_assert!(clicks.len() <= 1, "{name} {mutations:?}: {} clicks", clicks.len());
        // Busy until proven finished: a notice in (or naming itself after)
        // the last turn, or a waiting approval card, takes no prompt.
        prop_assert!(!busy || clicks.is_empty(), "{name} {mutations:?}: clicked beside a busy notice or an approval card");
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

/// The mutation the property test draws at random, tried exhaustively on
/// every page that takes a prompt: each busy notice in every place, and a
/// waiting approval card, leave it without a click.
#[test]
fn every_busy_notice_and_waiting_card_on_a_page_that_takes_a_prompt_leaves_it_unclicked() {
    let mut tried = 0;
    for (name, text) in corpus() {
        let h = header(&text);
        if !matches!(h.expect.as_str(), "ready" | "idle" | "delivery_timeout") {
            continue;
        }
        for at in 0..4 {
            let mut added: Vec<(String, bool)> =
                NOTICES.iter().map(|(markup, known)| ((*markup).to_owned(), *known)).collect();
            added.push((card(false), true));
            for (markup, known) in added {
                let page = Page::parse(&text);
                let inside = place(&page, &markup, at);
                let _ = submit(&page, "a prompt from the orchestrator", None);
                if inside || known {
                    tried += 1;
                    assert!(
                        page.clicks.borrow().is_empty(),
                        "{name}: clicked with {markup} at place {at}: {}",
                        chatgpt_dom::reading(&page)
                    );
                }
            }
        }
    }
    assert!(tried > 100, "{tried}");
}

/// `inspect`'s submit plan is the composer's own decision, run on a dry
/// run: on every page (the corpus and fakechat's pages) it agrees with
/// what `submit` then does, refusals and their codes included.
#[test]
fn inspect_plans_exactly_what_submit_does_on_every_page() {
    use chatgpt_dom::inspect::SubmitPlan;
    let mut pages = corpus();
    let dir = support::package_dir().join("fixtures");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "html") {
            pages.push((
                path.file_stem().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    let mut wrong = Vec::new();
    for (name, text) in &pages {
        let page = Page::parse(text);
        let plan = chatgpt_dom::inspect::inspect(&page).submit;
        let result = submit(&page, "a prompt from the orchestrator", None);
        let clicks = page.clicks.borrow().clone();
        let agrees = match (&plan, &result) {
            (SubmitPlan::Click(node), Ok(_)) => clicks == [*node],
            (SubmitPlan::AfterTyping, Ok(_)) => clicks.len() == 1,
            (SubmitPlan::Nothing(why), Err(refusal)) => clicks.is_empty() && why.starts_with(refusal.code.as_str()),
            _ => false,
        };
        if !agrees {
            wrong.push(format!("{name}: inspect plans {plan:?}, submit did {result:?} with {} clicks", clicks.len()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The approval card is a question to the person: no composer operation
/// clicks inside it, or anywhere while it waits, and a card that appears
/// between typing and the click stops the click.
#[test]
fn no_composer_operation_clicks_while_an_approval_card_waits() {
    for name in ["b-2026-10-approval-card-en", "b-2026-10-approval-card-de", "b-2026-09-app-confirmation-dialog"] {
        let page = support::fixture(&format!("corpus/{name}"));
        assert_eq!(chatgpt_dom::reading(&page), "approval_required", "{name}");
        assert!(submit(&page, "continue", None).is_err(), "{name}");
        assert!(support::bind(&page, "Orchestrator").is_err(), "{name}");
        assert!(page.clicks.borrow().is_empty(), "{name}: clicked {}", page.describe(page.clicks.borrow()[0]));
        assert!(page.typed.borrow().is_none(), "{name}: the editor is left empty");
    }
    let page = support::fixture("corpus/b-2026-09-thread-idle-finished");
    let typed = chatgpt_dom::type_prompt(&page, "continue").unwrap();
    page.settle();
    let last = *chatgpt_dom::classify::turns(&page).last().unwrap();
    page.graft(last, &card(false), false).unwrap();
    let refused = chatgpt_dom::press_send(&page, typed, None).unwrap_err();
    assert_ne!(refused.code, ErrorCode::Conflict, "a person's question, not a busy page");
    assert!(page.clicks.borrow().is_empty(), "clicked {}", page.describe(page.clicks.borrow()[0]));
    assert!(page.typed.borrow().is_none(), "the typed prompt is removed");
}

/// Only an idle conversation with an empty composer may have its tab closed
/// to free capacity: a draft, a running turn, an incident or a person's
/// question keeps it open, in every generation.
#[test]
fn only_an_idle_page_with_an_empty_composer_is_parkable() {
    use chatgpt_dom::compose::parkable;
    for name in ["b-2026-09-thread-idle-finished", "a-2026-02-idle-articles", "b-2026-09-app-mention-in-editor"] {
        let page = support::fixture(&format!("corpus/{name}"));
        assert_eq!(parkable(&page), Ok(()), "{name}");
    }
    for name in [
        "b-2026-09-draft-send",
        "a-2026-draft-send-prompt",
        "a-2026-ko-draft",
        "b-2026-09-streaming",
        "a-2026-09-working-status",
        "b-2026-10-approval-card-en",
        "a-2026-06-error-delivery-timeout",
        "a-2026-09-conversation-too-long",
    ] {
        let page = support::fixture(&format!("corpus/{name}"));
        let refused = parkable(&page).unwrap_err();
        assert_eq!(refused.code, ErrorCode::TabInUse, "{name}: {refused:?}");
        assert!(page.clicks.borrow().is_empty() && page.typed.borrow().is_none(), "{name}: read only");
    }
    // A person's draft typed into an idle conversation keeps its tab.
    let page = support::fixture("corpus/b-2026-09-thread-idle-finished");
    let editor = resolve(&page, Element::Editor).unwrap();
    assert!(chatgpt_dom::compose::Act::insert_text(&page, &editor, "half a thought"));
    assert_eq!(parkable(&page).unwrap_err().detail, "the composer holds a person's typed draft");
}

/// Hostile changes to a page holding a person's attachment, each keeping
/// what the card is: its remove control relabelled (another language, a
/// label that names no file), the card hidden, moved first in the form, or
/// stripped of one of its markers while another stays.
#[derive(Debug, Clone)]
enum AttachmentMutation {
    /// The remove control's label in another language, or gone.
    Relabel(usize),
    /// The card hidden (`hidden`), as a card off-screen or mid-animation may be.
    HideCard,
    /// The card moved to the front of the form.
    CardFirst,
    /// The `blob:` preview dropped (a file card has none).
    NoPreview,
}

/// Remove-control labels: de, fr, ja, zh-CN, ko, and none at all.
const REMOVE_LABELS: &[Option<&str>] = &[
    Some("Datei entfernen"),
    Some("Supprimer le fichier"),
    Some("ファイルを削除"),
    Some("移除文件"),
    Some("파일 제거"),
    None,
];

/// The attachment card in `page`: the outermost element matching a card marker.
fn attachment_card(page: &Page) -> Option<ego_tree::NodeId> {
    let form = resolve(page, Element::ComposerForm).ok()?;
    let markers = r#"[class~="group/composer-attachment"], [role="group"][aria-label], .group.relative.inline-block"#;
    page.query_all(Some(&form), markers)
        .into_iter()
        .find(|n| !page.within(n, r#"[class~="group/composer-attachment"]"#))
}

fn apply_attachment(page: &Page, mutation: &AttachmentMutation) {
    let Some(card) = attachment_card(page) else { return };
    match mutation {
        AttachmentMutation::Relabel(k) => {
            for b in page.query_all(Some(&card), "button[aria-label]") {
                let label = page.attr(&b, "aria-label").unwrap_or_default();
                if label.starts_with("Remove") {
                    page.set_attr(b, "aria-label", REMOVE_LABELS[k % REMOVE_LABELS.len()]);
                }
            }
        }
        AttachmentMutation::HideCard => page.set_attr(card, "hidden", Some("")),
        AttachmentMutation::CardFirst => page.move_first(card),
        // Generation A's image chip has no other structural marker than its
        // preview (its classes are layout utilities, its labels English): a
        // chip without both is outside the evidence, and not made here.
        AttachmentMutation::NoPreview
            if page.attr(&card, "role").is_none() && !page.within(&card, "[data-composer-attachments]") => {}
        AttachmentMutation::NoPreview => {
            for n in page.query_all(Some(&card), r#"[style*="blob:"], img[src^="blob:"]"#) {
                page.set_attr(n, "style", None);
                page.set_attr(n, "src", None);
            }
        }
    }
}

fn attachment_mutation() -> impl Strategy<Value = AttachmentMutation> {
    prop_oneof![
        (0..REMOVE_LABELS.len()).prop_map(AttachmentMutation::Relabel),
        Just(AttachmentMutation::HideCard),
        Just(AttachmentMutation::CardFirst),
        Just(AttachmentMutation::NoPreview),
    ]
}

fn attachment_pages() -> Vec<(String, String)> {
    corpus().into_iter().filter(|(_, text)| header(text).notes.contains("(attachment)")).collect()
}

#[test]
fn the_corpus_holds_an_image_a_file_and_a_pasted_block_alone_and_with_text_in_both_generations() {
    let names: Vec<String> = attachment_pages().into_iter().map(|(name, _)| name).collect();
    for generation in ["a-", "b-"] {
        for kind in ["image", "file", "pasted"] {
            let of = |text: bool| {
                names
                    .iter()
                    .filter(|n| n.starts_with(generation) && n.contains(kind) && n.ends_with("-text") == text)
                    .count()
            };
            assert!(of(false) >= 1 && of(true) >= 1, "{generation}{kind}: {names:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A person's attachment is their draft, however the page dresses it:
    /// no keystroke, no click, and the refusal names a person's draft.
    #[test]
    fn a_persons_attachment_never_gets_a_keystroke_or_a_click(
        index in 0..64usize,
        mutations in prop::collection::vec(attachment_mutation(), 0..4),
        others in prop::collection::vec(mutation(), 0..3),
    ) {
        let pages = attachment_pages();
        let (name, text) = &pages[index % pages.len()];
        let page = Page::parse(text);
        for m in &mutations {
            apply_attachment(&page, m);
        }
        for m in &others {
            apply(&page, m);
        }
        let result = submit(&page, "a prompt from the orchestrator", None);
        prop_assert!(page.typed.borrow().is_none(), "{name} {mutations:?} {others:?}: typed beside the attachment");
        prop_assert!(page.clicks.borrow().is_empty(), "{name} {mutations:?} {others:?}: clicked");
        prop_assert!(result.is_err(), "{name}");
        prop_assert_eq!(chatgpt_dom::compose::parkable(&page).is_err(), true, "{} may not be parked", name);
    }
}

/// The challenge as chatgpt.com serves it, and the page its script leaves,
/// read as a challenge by the platform's own markers; a composer page that
/// carries Cloudflare's JavaScript-detection script is still a chat.
#[test]
fn the_challenge_is_read_by_its_platforms_markers_and_a_detection_script_is_not_one() {
    for name in ["x-2026-06-challenge-served", "x-2026-06-challenge-running"] {
        assert_eq!(chatgpt_dom::reading(&support::fixture(&format!("corpus/{name}"))), "challenge", "{name}");
    }
    let text = support::fixture_text("corpus/b-2026-09-thread-idle-finished")
        .replace("</body>", r#"<script src="/cdn-cgi/challenge-platform/scripts/jsd/main.js"></script></body>"#);
    assert_eq!(chatgpt_dom::reading(&Page::parse(&text)), "idle");
}

/// Structure first: every finished answer of generation B still reads idle
/// when its bar's labels are words no table holds (the page's locale is one
/// whose stop label the adapter carries, so only the bar's words are new).
#[test]
fn a_finished_bar_in_words_no_table_holds_reads_as_it_does_in_english() {
    let mut tried = 0;
    for (name, text) in corpus() {
        if !name.starts_with("b-") || header(&text).expect != "idle" {
            continue;
        }
        let page = Page::parse(&text);
        for bar in page.query_all(None, ".turn-action-controls") {
            for (k, button) in page.query_all(Some(&bar), "button[aria-label]").into_iter().enumerate() {
                page.set_attr(button, "aria-label", Some(&format!("zz-{k}")));
            }
        }
        assert_eq!(chatgpt_dom::reading(&page), "idle", "{name}");
        tried += 1;
    }
    assert!(tried >= 4, "{tried}");
}
