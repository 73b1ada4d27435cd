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
