//! fakechat against the real-evidence corpus: for every structure in
//! `chatgpt-dom/fixtures/corpus/` that names the view fakechat renders for
//! it (`fakechat:` in its header), fakechat's page reads the same to the
//! adapter as the real structure does. When fakechat drifts from the
//! evidence, this fails.

use chatgpt_dom::html::HtmlPage;

#[test]
fn fakechat_renders_each_corpus_structure_it_claims_the_way_the_adapter_reads_the_real_one() {
    let dir = e2e::workspace().join("chatgpt-dom/fixtures/corpus");
    let mut checked = 0;
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let field = |key: &str| text.lines().find_map(|l| l.strip_prefix(&format!("{key}: "))).map(str::to_owned);
        let Some(control) = field("fakechat") else { continue };
        let expect = field("expect").expect("every corpus fixture has an expect line");
        let real = chatgpt_dom::reading(&HtmlPage::parse(&text));
        let view = fakechat::fixtures::corpus_view(&control).unwrap();
        let ours = chatgpt_dom::reading(&HtmlPage::parse(&fakechat::render::page(&view)));
        if real != expect || ours != expect {
            wrong.push(format!("{}: expected {expect}, real reads {real}, fakechat reads {ours}", path.display()));
        }
        checked += 1;
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 12, "only {checked} structures name a fakechat view");
}

#[test]
fn fakechat_draws_no_send_button_on_an_empty_composer() {
    for (name, view) in fakechat::fixtures::all() {
        let page = HtmlPage::parse(&fakechat::render::page(&view));
        let idle = matches!(chatgpt_dom::reading(&page), "ready" | "idle");
        if idle {
            let send = chatgpt_dom::locators::find(&page, chatgpt_dom::Element::SendButton).unwrap();
            assert!(send.is_none(), "{name}: a send button on an empty composer");
        }
    }
}

/// The structures `fakechat::fixtures::corpus_view` has no control for yet
/// (the recovery notice, the approval card), rendered from a view built
/// here: fakechat's page reads as the real structure does.
#[test]
fn fakechat_renders_the_busy_notices_and_the_approval_card_as_the_corpus_reads_them() {
    use fakechat::render::{Approval, Generation, Role, Turn, View};
    let turn = |role, text: &str, finished| Turn { role, text: text.into(), finished, error: None, calls: Vec::new() };
    let chat = |generation, generating: bool| View {
        generation,
        conversation: Some("6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f".into()),
        nonce: "fixture".into(),
        turns: vec![
            turn(Role::User, "Summarize the plan.", true),
            turn(Role::Assistant, "Here is the pl", !generating),
        ],
        generating,
        version: 1,
        ..View::default()
    };
    let card = |answered| Some(Approval { app: "Orchestrator".into(), answered, turn: 1 });
    let cases: Vec<(&str, View)> = vec![
        ("b-2026-10-recovery-finished-looking", View { recovery: true, ..chat(Generation::B, false) }),
        ("b-2026-10-approval-card-en", View { approval: card(false), ..chat(Generation::B, true) }),
        ("b-2026-10-approval-card-answered", View { approval: card(true), ..chat(Generation::B, false) }),
    ];
    let dir = e2e::workspace().join("chatgpt-dom/fixtures/corpus");
    for (name, view) in cases {
        let text = std::fs::read_to_string(dir.join(format!("{name}.html"))).unwrap();
        let expect = text.lines().find_map(|l| l.strip_prefix("expect: ")).unwrap();
        assert_eq!(chatgpt_dom::reading(&HtmlPage::parse(&text)), expect, "{name}: the real structure");
        assert_eq!(chatgpt_dom::reading(&HtmlPage::parse(&fakechat::render::page(&view))), expect, "{name}: fakechat");
    }
    // Generation A renders the same notices and card (A's are not captured:
    // the same markup, read the same way).
    let a = |view: View| chatgpt_dom::reading(&HtmlPage::parse(&fakechat::render::page(&view)));
    assert_eq!(a(View { recovery: true, ..chat(Generation::A, false) }), "generating+recovery");
    assert_eq!(a(View { approval: card(false), ..chat(Generation::A, true) }), "approval_required");
    assert_eq!(a(View { approval: card(true), ..chat(Generation::A, false) }), "idle");
    // A finished-looking answer with the deferral notice in it stays busy.
    assert_eq!(a(View { deferral: true, ..chat(Generation::A, false) }), "generating+deferral");
    assert_eq!(a(View { deferral: true, ..chat(Generation::B, false) }), "generating+deferral");
}
