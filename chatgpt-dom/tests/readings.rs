//! Readings that only a page the corpus does not hold as such can show:
//! corpus pages with one thing added or taken away, each change named after
//! the evidence it stands for (`fixtures/README.md`, issue 30). Busy until
//! proven finished: a notice in the last turn keeps a finished-looking
//! page busy, an answer without any finished-bar evidence is not idle, and
//! a person's question (the tool-approval card) is read before the stop
//! button.

mod support;

use chatgpt_dom::Dom as _;
use support::{Page, fixture, fixture_text};

fn reading(page: &Page) -> &'static str {
    chatgpt_dom::reading(page)
}

/// `corpus/<name>` with `markup` appended inside its last turn.
fn in_last_turn(name: &str, markup: &str) -> Page {
    let page = fixture(&format!("corpus/{name}"));
    let last = *chatgpt_dom::classify::turns(&page).last().expect("a page with turns");
    page.graft(last, markup, false).expect("grafted");
    page
}

/// `corpus/<name>` with `markup` at the end of the body (outside every turn).
fn in_body(name: &str, markup: &str) -> Page {
    let page = fixture(&format!("corpus/{name}"));
    let body = page.query_all(None, "body")[0];
    page.graft(body, markup, false).expect("grafted");
    page
}

/// `corpus/<name>` with every node matching `selector` hidden (standing in
/// for a node the page did not render).
fn without(name: &str, selector: &str) -> Page {
    let page = fixture(&format!("corpus/{name}"));
    for node in page.query_all(None, selector) {
        page.set_attr(node, "hidden", Some(""));
    }
    page
}

const B_FINISHED: &str = "b-2026-09-thread-idle-finished";
const A_FINISHED: &str = "a-2026-07-idle-section-containers";
/// The finished answer's action bars of those two pages, as they render them.
const B_BAR: &str = r#"<div class="turn-action-controls"><span data-state="closed"><button type="button" aria-label="Copy"></button></span><button aria-label="Share"></button><button aria-label="Regenerate response" aria-haspopup="menu" aria-expanded="false" data-state="closed"></button></div>"#;
const A_BAR: &str = r#"<div class="turn-actions"><button data-testid="copy-turn-action-button" aria-label="Copy response" data-state="closed"></button></div>"#;

/// `corpus/<name>`'s text with `from` (present) replaced by `to`.
fn edited(name: &str, from: &str, to: &str) -> Page {
    let text = fixture_text(&format!("corpus/{name}"));
    assert!(text.contains(from), "{name}: {from}");
    Page::parse(&text.replacen(from, to, 1))
}

#[test]
fn a_notice_in_a_finished_looking_turn_keeps_the_page_busy() {
    let cases: &[(&str, &str)] = &[
        // Recovery (Koba OBS 2026-10-07, ru; the English client default in Bloom++).
        (
            r#"<div role="status"><span class="text-chatgpt-recovery">Connection interrupted. Waiting for the complete answer</span></div>"#,
            "generating+recovery",
        ),
        (
            r#"<div role="status"><span class="text-chatgpt-recovery">Соединение прервано. Ожидание полного ответа</span></div>"#,
            "generating+recovery",
        ),
        // The recovery class alone, whatever its words.
        (r#"<div role="status"><span class="text-chatgpt-recovery">…</span></div>"#, "generating+recovery"),
        // The slow-answer / safety-review family (en ×2, fr, ru).
        (
            r#"<div role="status" aria-live="polite"><span>Our systems are thinking a bit more about this request before responding.</span></div>"#,
            "generating+deferral",
        ),
        (
            r#"<div role="status" aria-live="polite"><span>Our systems are checking a few extra things before responding. You can retry with a faster model to get an answer sooner.</span></div>"#,
            "generating+deferral",
        ),
        (
            r#"<div role="status" aria-live="polite"><span>Nos systèmes effectuent quelques vérifications supplémentaires avant de répondre.</span></div>"#,
            "generating+deferral",
        ),
        (
            r#"<div role="status" aria-live="polite"><span>Наши системы выполняют дополнительную обработку этого запроса, прежде чем предоставить ответ.</span></div>"#,
            "generating+deferral",
        ),
        // Activity markers: a busy status (Bloom++'s turnBusy), A's streaming status.
        (r#"<div class="thread-status" role="status" aria-busy="true">Generating</div>"#, "generating"),
        (
            r#"<div data-streaming-response-status=""><span aria-hidden="true">Working for 9s</span></div>"#,
            "generating",
        ),
        // A status in the turn whose words no table holds: never idle.
        (r#"<div role="status"><span>Something the tables do not know</span></div>"#, "generating+notice"),
    ];
    for (markup, expected) in cases {
        for name in [B_FINISHED, A_FINISHED] {
            assert_eq!(reading(&in_last_turn(name, markup)), *expected, "{name} + {markup}");
        }
    }
}

#[test]
fn generation_as_streaming_status_counts_in_the_last_turns_container_too() {
    // GPT-AntiCurse looks for it anywhere in the last [data-turn-id-container].
    let page = fixture(&format!("corpus/{A_FINISHED}"));
    let last = *chatgpt_dom::classify::turns(&page).last().unwrap();
    page.graft(last, r#"<div data-streaming-response-status="streaming"><span>…</span></div>"#, true).unwrap();
    assert_eq!(reading(&page), "generating");
}

#[test]
fn a_known_notice_after_the_last_turn_keeps_the_page_busy_and_the_live_region_says_nothing() {
    let recovery = r#"<div role="status"><span class="text-chatgpt-recovery">Connection interrupted. Waiting for the complete answer</span></div>"#;
    assert_eq!(reading(&in_body(B_FINISHED, recovery)), "generating+recovery");
    // The permanent live region announcing something else, or an unknown
    // status outside every turn: evidence of nothing.
    let page = fixture(&format!("corpus/{B_FINISHED}"));
    let live = page.query_all(None, "#aria-notify-live-region-polite span")[0];
    page.graft(live, "<span>Copied to clipboard</span>", false).unwrap();
    assert_eq!(reading(&page), "idle");
    assert_eq!(reading(&in_body(B_FINISHED, r#"<div role="status">Saved</div>"#)), "idle");
    // An empty status inside the turn says nothing either.
    assert_eq!(reading(&in_last_turn(B_FINISHED, r#"<div role="status"><span></span></div>"#)), "idle");
}

#[test]
fn the_turn_state_attribute_is_corroboration_only() {
    // Stale `in_progress` on a finished turn (Koba OBS): still idle.
    let text = fixture_text(&format!("corpus/{B_FINISHED}"))
        .replace("<div data-turn-key=", r#"<div data-talvt-turn-state="in_progress" data-turn-key="#);
    assert_eq!(reading(&Page::parse(&text)), "idle");
    // `complete` with no action bar: not proof of idle.
    let text = fixture_text(&format!("corpus/{B_FINISHED}"))
        .replace("<div data-turn-key=", r#"<div data-talvt-turn-state="complete" data-turn-key="#)
        .replace(B_BAR, "");
    assert_eq!(reading(&Page::parse(&text)), "unsettled");
}

#[test]
fn a_recovery_line_that_says_delivery_timed_out_is_the_delivery_timeout() {
    // Bloom++ reads the failure words in the same element as a failure.
    let page = in_last_turn(
        "b-2026-09-streaming",
        r#"<div role="status"><span class="text-chatgpt-recovery">Message delivery timed out. Please try again.</span></div>"#,
    );
    let stop = page.query_all(None, r#"[data-corpus="stop"]"#)[0];
    page.set_attr(stop, "hidden", Some(""));
    let animated = page.query_all(None, "[data-markdown-animated]")[0];
    page.set_attr(animated, "data-markdown-animated", None);
    assert_eq!(reading(&page), "delivery_timeout");
}

#[test]
fn a_finished_answer_without_copy_is_idle_on_any_evidenced_bar_button() {
    // Generation A: Good / Bad response test ids in the assistant turn (adamlporter, 2026-01-29).
    for id in ["good-response-turn-action-button", "bad-response-turn-action-button"] {
        let bar = format!(r#"<div class="turn-actions"><button data-testid="{id}"></button></div>"#);
        assert_eq!(reading(&edited(A_FINISHED, A_BAR, &bar)), "idle", "{id}");
    }
    // Generation B: any of the five labels of zain1237's finished bar.
    for label in ["Rate response", "Share", "Regenerate response", "More actions"] {
        let bar =
            format!(r#"<div class="turn-action-controls"><button type="button" aria-label="{label}"></button></div>"#);
        assert_eq!(reading(&edited(B_FINISHED, B_BAR, &bar)), "idle", "{label}");
    }
    // A Copy test id in the user's turn says nothing about the answer.
    assert_eq!(reading(&edited(A_FINISHED, A_BAR, "")), "unsettled");
}

#[test]
fn an_answer_with_no_finished_evidence_at_all_is_unsettled_never_idle_nor_generating_for_ever() {
    // A: the answer's text, no Copy / Good / Bad, no stop, no marker.
    assert_eq!(reading(&edited(A_FINISHED, A_BAR, "")), "unsettled");
    // B: the answer unit, no action bar outside the user unit.
    assert_eq!(reading(&edited(B_FINISHED, B_BAR, "")), "unsettled");
    // B: a bar whose buttons carry no label the adapter knows is no proof.
    let bar = r#"<div class="turn-action-controls"><button type="button" aria-label="Kopieren"></button></div>"#;
    assert_eq!(reading(&edited(B_FINISHED, B_BAR, bar)), "unsettled");
    // An answer that has not begun is still generating (the Deep Research page).
    assert_eq!(reading(&fixture("corpus/a-2025-12-deep-research-running")), "generating");
    // Nothing is typed into an unsettled page.
    let page = edited(A_FINISHED, A_BAR, "");
    assert!(support::submit(&page, "continue", None).is_err());
    assert!(page.clicks.borrow().is_empty() && page.typed.borrow().is_none());
}

#[test]
fn the_approval_card_is_read_before_the_stop_button_and_only_while_it_waits() {
    let card = r#"<div data-codex-approval-surface="true"><div role="alert"><p>Allow ChatGPT to use Orchestrator?</p></div><button type="button">Deny</button><button type="button">Allow once</button></div>"#;
    // During a turn, Stop showing: a question to the person, not progress.
    assert_eq!(reading(&in_last_turn("b-2026-09-streaming", card)), "approval_required");
    assert_eq!(reading(&in_last_turn("a-2026-generating-stop-streaming", card)), "approval_required");
    // Outside the thread too.
    assert_eq!(reading(&in_body(B_FINISHED, card)), "approval_required");
    // Answered (every button disabled): nothing, not even its alert.
    let answered = card.replace(r#"type="button">"#, r#"type="button" disabled="">"#);
    assert_eq!(reading(&in_last_turn(B_FINISHED, &answered)), "idle");
    assert_eq!(reading(&in_body(B_FINISHED, &answered)), "idle");
    // Hidden, or on a kept page surface that is not shown.
    assert_eq!(reading(&in_body(B_FINISHED, &format!("<div hidden>{card}</div>"))), "idle");
    let kept = format!(r#"<div data-app-shell-page-surface="" style="display:none">{card}</div>"#);
    assert_eq!(reading(&in_body(B_FINISHED, &kept)), "idle");
}

#[test]
fn a_composer_with_stop_and_no_editor_reads_generating() {
    // Stop first: no editor beside an unambiguous stop button is a running turn.
    let page = without("b-2026-09-streaming", r#"form [contenteditable="true"]"#);
    assert_eq!(reading(&page), "generating");
    let page = without("a-2026-generating-stop-streaming", r#"form [contenteditable="true"]"#);
    assert_eq!(reading(&page), "generating");
    // Without stop it stays a changed UI.
    assert_eq!(reading(&without(B_FINISHED, r#"form [contenteditable="true"]"#)), "ui_changed");
}

#[test]
fn a_login_control_counts_only_outside_the_turns_and_their_content() {
    let login = r#"<button data-testid="login-button">Log in</button>"#;
    assert_eq!(reading(&in_last_turn(B_FINISHED, login)), "idle");
    assert_eq!(reading(&in_last_turn(A_FINISHED, login)), "idle");
    // Outside the turns, beside a stop button: signed out (fail closed).
    assert_eq!(reading(&in_body("b-2026-09-streaming", login)), "signed_out");
}

#[test]
fn a_fragment_without_a_composer_reports_its_last_turns_error_and_takes_no_prompt() {
    for (name, expected) in [
        ("a-2026-06-error-delivery-timeout", "delivery_timeout"),
        ("b-2026-09-ja-error-delivery-timeout", "delivery_timeout"),
        ("a-2026-09-conversation-too-long", "conversation_too_long"),
    ] {
        let text = fixture_text(&format!("corpus/{name}"));
        let start = text.find("<form").unwrap();
        let end = text.find("</form>").unwrap() + "</form>".len();
        let fragment = format!("{}{}", &text[..start], &text[end..]);
        let page = Page::parse(&fragment);
        assert_eq!(reading(&page), expected, "{name}");
        assert!(support::submit(&page, "continue", None).is_err(), "{name}");
        assert!(page.clicks.borrow().is_empty(), "{name}");
    }
    // Without an error it is still loading.
    let text = fixture_text(&format!("corpus/{B_FINISHED}"));
    let fragment = text.replace("<form data-chatgpt-composer", "<div data-x").replace("</form>", "</div>");
    assert_eq!(reading(&Page::parse(&fragment)), "loading");
}

#[test]
fn a_button_inside_an_approval_card_is_never_the_send_button() {
    use chatgpt_dom::{Element, resolve};
    // An answered card left inside the composer form, its button a submit
    // control: not a send candidate, so the real send is not ambiguous.
    let card = r#"<div data-codex-approval-surface="true"><p>Allow ChatGPT to use Orchestrator?</p><button type="submit" disabled="">Allow once</button></div>"#;
    let page = fixture(&format!("corpus/{B_FINISHED}"));
    let form = page.query_all(None, r#"form[data-composer-placement="thread"]"#)[0];
    page.graft(form, card, false).unwrap();
    assert_eq!(reading(&page), "idle");
    assert_eq!(resolve(&page, Element::SendButton).unwrap_err().detail, "missing");
    assert!(support::submit(&page, "continue", None).is_ok());
    let clicks = page.clicks.borrow();
    assert_eq!(clicks.len(), 1);
    assert_eq!(page.truth(clicks[0]).as_deref(), Some("send"), "clicked {}", page.describe(clicks[0]));
}
