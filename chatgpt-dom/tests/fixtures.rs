//! The adapter against every fakechat fixture (the same DOM the browser tests
//! see), plus hand-made breakage: each fixture classifies as its name says,
//! and the composer resolves to exactly one editor and one send button.

use std::cell::RefCell;
use std::path::PathBuf;

use chatgpt_dom::{Act, Dom, Element, Incident, PageState, classify, confirmed, resolve, submit};
use protocol::ErrorCode;
use scraper::{ElementRef, Html, Selector};

/// A parsed HTML page as a [`Dom`].
struct Page {
    html: Html,
    /// What [`Act`] did: text typed into a node, and clicks, in order.
    typed: RefCell<Option<(ego_tree::NodeId, String)>>,
    clicks: RefCell<Vec<ego_tree::NodeId>>,
    /// Whether the editor accepts insertion (a broken editor does not).
    accepts_input: bool,
}

impl Page {
    fn parse(text: &str) -> Page {
        Page {
            html: Html::parse_document(text),
            typed: RefCell::new(None),
            clicks: RefCell::new(Vec::new()),
            accepts_input: true,
        }
    }
}

/// Acts like the page: typing fills the editor and enables the send button.
impl Act for Page {
    fn insert_text(&self, editor: &Self::Node, text: &str) -> bool {
        if self.accepts_input {
            *self.typed.borrow_mut() = Some((*editor, text.to_owned()));
        }
        self.accepts_input
    }

    fn click(&self, node: &Self::Node) {
        self.clicks.borrow_mut().push(*node);
    }

    fn clear(&self, _editor: &Self::Node) {
        *self.typed.borrow_mut() = None;
    }
}

impl Dom for Page {
    type Node = ego_tree::NodeId;

    fn query_all(&self, scope: Option<&Self::Node>, selector: &str) -> Vec<Self::Node> {
        let selector = Selector::parse(selector).unwrap_or_else(|e| panic!("bad selector {selector}: {e:?}"));
        match scope {
            None => self.html.select(&selector).map(|e| e.id()).collect(),
            Some(id) => {
                ElementRef::wrap(self.html.tree.get(*id).unwrap()).unwrap().select(&selector).map(|e| e.id()).collect()
            }
        }
    }

    fn attr(&self, node: &Self::Node, name: &str) -> Option<String> {
        if name == "disabled" && self.typed.borrow().is_some() {
            return None;
        }
        ElementRef::wrap(self.html.tree.get(*node)?)?.value().attr(name).map(str::to_owned)
    }

    fn text(&self, node: &Self::Node) -> String {
        if let Some((typed, text)) = &*self.typed.borrow()
            && typed == node
        {
            return text.clone();
        }
        ElementRef::wrap(self.html.tree.get(*node).unwrap()).unwrap().text().collect()
    }

    fn within(&self, node: &Self::Node, selector: &str) -> bool {
        let selector = Selector::parse(selector).unwrap();
        let mut current = self.html.tree.get(*node).unwrap().parent();
        while let Some(n) = current {
            if ElementRef::wrap(n).is_some_and(|e| selector.matches(&e)) {
                return true;
            }
            current = n.parent();
        }
        false
    }
}

fn fixture(name: &str) -> Page {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(format!("{name}.html"));
    Page::parse(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

#[test]
fn every_fixture_classifies_as_named() {
    let expectations: &[(&str, Result<PageState, &str>)] = &[
        ("ready-new-chat", Ok(PageState::Ready)),
        ("idle", Ok(PageState::Idle)),
        ("idle-de", Ok(PageState::Idle)),
        ("generating", Ok(PageState::Generating { deferral: false })),
        ("generating-deferral", Ok(PageState::Generating { deferral: true })),
        ("error-delivery-timeout", Ok(PageState::Error(Incident::DeliveryTimeout))),
        ("error-something-went-wrong", Ok(PageState::Error(Incident::Unknown))),
        ("rate-limited", Ok(PageState::Error(Incident::RateLimited))),
        ("loading", Ok(PageState::Loading)),
        ("signed-out", Ok(PageState::Error(Incident::SignedOut))),
        ("challenge", Ok(PageState::Error(Incident::Challenge))),
        ("ui-missing", Err("missing")),
        ("ui-duplicated", Err("ambiguous")),
    ];
    for generation in ["a", "b"] {
        for (name, expected) in expectations {
            let page = fixture(&format!("{generation}-{name}"));
            let got = classify(&page);
            match (expected, &got) {
                (Ok(state), Ok(snapshot)) => assert_eq!(&snapshot.state, state, "{generation}-{name}"),
                (Err(detail), Err(changed)) => {
                    assert!(changed.detail.starts_with(detail), "{generation}-{name}: {changed:?}");
                    assert_eq!(changed.code(), protocol::ErrorCode::HostUiChanged);
                }
                _ => panic!("{generation}-{name}: expected {expected:?}, got {got:?}"),
            }
        }
    }
    assert_eq!(classify(&fixture("a-idle-lexical")).unwrap().state, PageState::Idle);
}

#[test]
fn the_composer_resolves_to_exactly_one_editor_and_send_button_in_every_generation() {
    for name in ["a-idle", "a-idle-lexical", "a-idle-de", "b-idle", "b-idle-de", "a-ready-new-chat", "b-ready-new-chat"]
    {
        let page = fixture(name);
        let editor = resolve(&page, Element::Editor).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(page.attr(&editor, "contenteditable").as_deref(), Some("true"), "{name}");
        let send = resolve(&page, Element::SendButton).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert!(page.attr(&send, "disabled").is_some(), "{name}: send is disabled while empty");
    }
    // While generating, generation A shows stop instead of send; B keeps the slot.
    assert!(resolve(&fixture("a-generating"), Element::StopButton).is_ok());
    assert!(resolve(&fixture("a-generating"), Element::SendButton).is_err());
}

#[test]
fn hand_made_breakage_fails_closed() {
    let idle = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/a-idle.html")).unwrap();
    // Test ids renamed and the old id dropped: no candidate matches the editor.
    let renamed = idle
        .replace(r#"id="prompt-textarea""#, "")
        .replace(r#"data-testid="prompt-textarea""#, r#"data-testid="composer-v9""#);
    let err = classify(&Page::parse(&renamed)).unwrap_err();
    assert_eq!((err.element, err.detail.as_str()), (Element::Editor, "missing"));
    // Two send buttons: ambiguous, never "the first one".
    let doubled = idle.replace("</form>", r#"<button data-testid="send-button"></button></form>"#);
    let err = classify(&Page::parse(&doubled)).unwrap_err();
    assert!(err.detail.starts_with("ambiguous"), "{err:?}");
    // Only English labels left (structure gone): not enough to act on.
    let labels_only = idle.replace(r#"data-testid="send-button""#, "").replace(r#"id="composer-submit-button""#, "");
    let err = classify(&Page::parse(&labels_only)).unwrap_err();
    assert_eq!(err.element, Element::SendButton);
}

#[test]
fn a_prompt_is_typed_and_the_send_button_clicked_once_in_every_generation() {
    for name in ["a-idle", "a-idle-lexical", "a-idle-de", "b-idle", "b-idle-de", "a-ready-new-chat", "b-ready-new-chat"]
    {
        let page = fixture(name);
        let pressed = submit(&page, "line one\nline two").unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let send = resolve(&page, Element::SendButton).unwrap();
        assert_eq!(*page.clicks.borrow(), vec![send], "{name}: exactly one click, on send");
        // The page has not reacted yet: the editor still holds the prompt.
        assert!(!confirmed(&page, pressed), "{name}");
    }
}

#[test]
fn nothing_is_clicked_unless_the_page_can_take_the_prompt() {
    let cases: &[(&str, ErrorCode)] = &[
        ("a-generating", ErrorCode::Conflict),
        ("b-generating-deferral", ErrorCode::Conflict),
        ("a-loading", ErrorCode::Conflict),
        ("a-error-delivery-timeout", ErrorCode::DeliveryTimeout),
        ("b-error-something-went-wrong", ErrorCode::HostUiChanged),
        ("a-rate-limited", ErrorCode::RateLimited),
        ("b-signed-out", ErrorCode::ChatgptSignedOut),
        ("a-challenge", ErrorCode::HostUiChanged),
        ("a-ui-duplicated", ErrorCode::HostUiChanged),
        ("b-ui-missing", ErrorCode::HostUiChanged),
    ];
    for (name, code) in cases {
        let page = fixture(name);
        let refusal = submit(&page, "hello").unwrap_err();
        assert_eq!(refusal.code, *code, "{name}: {refusal:?}");
        assert!(page.clicks.borrow().is_empty(), "{name}: clicked");
    }
    // An editor that does not take the text, a draft, an empty prompt: refused, no click.
    let mut broken = fixture("a-idle");
    broken.accepts_input = false;
    assert_eq!(submit(&broken, "hello").unwrap_err().code, ErrorCode::HostUiChanged);
    let drafted = fixture("a-idle");
    *drafted.typed.borrow_mut() = Some((resolve(&drafted, Element::Editor).unwrap(), "my draft".into()));
    assert_eq!(submit(&drafted, "hello").unwrap_err().code, ErrorCode::Conflict);
    assert_eq!(submit(&fixture("b-idle"), " \n ").unwrap_err().code, ErrorCode::InvalidArgument);
    for page in [broken, drafted] {
        assert!(page.clicks.borrow().is_empty());
    }
}

#[test]
fn the_configured_app_is_offered_only_by_its_exact_label() {
    use chatgpt_dom::bind::{Offer, Selected, offer, selected};
    for g in ["a", "b"] {
        // Rows "Orchestrator Dev", "Orchestrator", "orchestrator", "Orchestrator Legacy" (disabled).
        let page = fixture(&format!("{g}-apps-mention"));
        let Offer::Pick(row) = offer(&page, "Orchestrator") else { panic!("{g}: exact label offered") };
        assert_eq!(page.attr(&row, "data-fakechat-app").as_deref(), Some("connector-0"), "{g}");
        assert_eq!(offer(&page, "Orchestrator Legacy"), Offer::Disabled, "{g}");
        assert_eq!(offer(&page, "Orch"), Offer::Absent, "{g}: a prefix is not a label");
        assert_eq!(offer(&fixture(&format!("{g}-apps-mention-stale")), "Orchestrator"), Offer::Stale, "{g}");
        assert_eq!(offer(&fixture(&format!("{g}-apps-mention-disabled")), "Orchestrator"), Offer::Disabled, "{g}");
        assert_eq!(offer(&fixture(&format!("{g}-idle")), "Orchestrator"), Offer::Closed, "{g}");
        assert_eq!(selected(&fixture(&format!("{g}-apps-bound")), "Orchestrator"), Selected::Bound, "{g}");
        assert_eq!(selected(&fixture(&format!("{g}-idle")), "Orchestrator"), Selected::None, "{g}");
        assert_eq!(
            selected(&fixture(&format!("{g}-apps-other-bound")), "Orchestrator"),
            Selected::Other(vec!["Orchestrator Dev".into()]),
            "{g}"
        );
        assert!(resolve(&fixture(&format!("{g}-idle")), Element::PlusButton).is_ok(), "{g}");
    }
    // Generation A: + → More → Developer mode → the app list; B lists apps at once.
    assert_eq!(offer(&fixture("a-apps-plus-menu"), "Orchestrator"), Offer::Closed);
    assert!(matches!(offer(&fixture("b-apps-plus-menu"), "Orchestrator"), Offer::Pick(_)));
    assert!(matches!(offer(&fixture("a-apps-developer-mode"), "Orchestrator"), Offer::Pick(_)));
}

#[test]
fn a_bound_submission_clicks_only_while_the_apps_pill_is_there() {
    use chatgpt_dom::submit_bound;
    for g in ["a", "b"] {
        let bound = fixture(&format!("{g}-apps-bound"));
        assert!(submit_bound(&bound, "bootstrap", "Orchestrator").is_ok(), "{g}");
        assert_eq!(bound.clicks.borrow().len(), 1, "{g}");
        let unbound = fixture(&format!("{g}-idle"));
        let refused = submit_bound(&unbound, "bootstrap", "Orchestrator").unwrap_err();
        assert_eq!(refused.code, ErrorCode::HostAppBindingNotReady, "{g}");
        assert!(unbound.clicks.borrow().is_empty(), "{g}: nothing clicked");
        assert!(unbound.typed.borrow().is_none(), "{g}: the prompt was cleared");
    }
}
