//! Pinning the model against a scripted page that moves between the
//! fakechat picker fixtures (`render::picker`, sources in
//! `docs/evidence/model-picker.md`) as the real page would on each click:
//! the exact model is chosen and verified in both generations, one already
//! current needs no choice, and an absent, disabled or prefix-only model is
//! `MODEL_UNAVAILABLE` with the picker closed again; no page without a
//! picker is guessed at.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;

use chatgpt_dom::bind::Wait;
use chatgpt_dom::html::HtmlPage;
use chatgpt_dom::model::pin;
use chatgpt_dom::{Act, Dom};
use ego_tree::NodeId;
use protocol::ErrorCode;

fn load(name: &str) -> HtmlPage {
    let path = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("fixtures")
        .join(format!("{name}.html"));
    HtmlPage::parse(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// A page in one picker state: generation, how far the picker is open,
/// and the current model. Clicks move it as fakechat's page script does.
struct Picker {
    generation: &'static str,
    level: RefCell<&'static str>,
    current: RefCell<String>,
    html: RefCell<HtmlPage>,
    clicks: RefCell<Vec<String>>,
}

impl Picker {
    fn new(generation: &'static str, current: &str) -> Picker {
        let page = Picker {
            generation,
            level: RefCell::new("closed"),
            current: RefCell::new(current.into()),
            html: RefCell::new(HtmlPage::parse("")),
            clicks: RefCell::new(vec![]),
        };
        page.reload();
        page
    }

    fn reload(&self) {
        let suffix = if *self.current.borrow() == "o3" { "-o3" } else { "" };
        *self.html.borrow_mut() = load(&format!("{}-model-{}{suffix}", self.generation, self.level.borrow()));
    }

    /// A node's text and attributes.
    fn element(&self, node: NodeId) -> (String, Vec<(String, String)>) {
        let page = self.html.borrow();
        let attrs = ["data-fakechat-model-trigger", "data-fakechat-model-nav", "data-fakechat-model", "aria-disabled"]
            .iter()
            .filter_map(|name| page.attr(&node, name).map(|v| (name.to_string(), v)))
            .collect();
        (page.text(&node).trim().to_owned(), attrs)
    }
}

impl Dom for Picker {
    type Node = NodeId;

    fn query_all(&self, scope: Option<&NodeId>, selector: &str) -> Vec<NodeId> {
        self.html.borrow().query_all(scope, selector)
    }

    fn attr(&self, node: &NodeId, name: &str) -> Option<String> {
        self.html.borrow().attr(node, name)
    }

    fn text(&self, node: &NodeId) -> String {
        self.html.borrow().text(node)
    }

    fn within(&self, node: &NodeId, selector: &str) -> bool {
        self.html.borrow().within(node, selector)
    }

    fn visible(&self, node: &NodeId) -> bool {
        self.html.borrow().visible(node)
    }
}

impl Act for Picker {
    fn insert_text(&self, _editor: &NodeId, _text: &str) -> bool {
        panic!("nothing is typed while pinning a model")
    }

    fn click(&self, node: &NodeId) {
        let (text, attrs) = self.element(*node);
        let attr = |name: &str| attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        self.clicks.borrow_mut().push(text.clone());
        let level = *self.level.borrow();
        let next = if attr("data-fakechat-model-trigger").is_some() {
            if level == "closed" { "open" } else { "closed" }
        } else if attr("data-fakechat-model-nav").as_deref() == Some("advanced") {
            "advanced"
        } else if attr("data-fakechat-model-nav").as_deref() == Some("submenu") {
            if self.generation == "a" { "legacy" } else { "submenu" }
        } else if let Some(model) = attr("data-fakechat-model") {
            assert_ne!(attr("aria-disabled").as_deref(), Some("true"), "a disabled row is never clicked");
            *self.current.borrow_mut() = model;
            "closed"
        } else {
            panic!("unexpected click on {text} {attrs:?}")
        };
        *self.level.borrow_mut() = next;
        self.reload();
    }

    fn clear(&self, _editor: &NodeId) {
        panic!("nothing is cleared while pinning a model")
    }
}

/// The page changes synchronously; time advances a second per wait.
struct Clock(Cell<u64>);

impl Wait for Clock {
    fn now_ms(&self) -> u64 {
        self.0.get()
    }

    async fn change(&self, _until_ms: u64) -> bool {
        self.0.set(self.0.get() + 1_000);
        true
    }
}

fn run<T>(future: impl std::future::Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

fn pin_on(page: &Picker, label: &str) -> Result<(), chatgpt_dom::Refusal> {
    run(pin(page, label, &Clock(Cell::new(0))))
}

#[test]
fn a_model_behind_a_submenu_is_chosen_and_verified_in_both_generations() {
    for generation in ["a", "b"] {
        let page = Picker::new(generation, "GPT-5.5");
        assert_eq!(pin_on(&page, "o3"), Ok(()), "{generation}");
        assert_eq!(*page.current.borrow(), "o3", "{generation}");
        assert_eq!(*page.level.borrow(), "closed", "{generation}: the picker is closed again");
        assert!(page.clicks.borrow().iter().any(|c| c.starts_with("o3")), "{generation}: {:?}", page.clicks.borrow());
    }
}

#[test]
fn a_current_model_needs_no_choice() {
    let a = Picker::new("a", "GPT-5.5");
    assert_eq!(pin_on(&a, "GPT-5.5"), Ok(()));
    assert!(a.clicks.borrow().is_empty(), "A's trigger names it: {:?}", a.clicks.borrow());
    // B's pill shows the effort: the picker is read, nothing chosen.
    let b = Picker::new("b", "o3");
    assert_eq!(pin_on(&b, "o3"), Ok(()));
    assert!(!b.clicks.borrow().iter().any(|c| c == "o3"), "{:?}", b.clicks.borrow());
    assert_eq!(*b.level.borrow(), "closed");
}

#[test]
fn an_absent_disabled_or_prefix_only_model_is_unavailable_and_the_picker_closed() {
    for generation in ["a", "b"] {
        for label in ["GPT-9", "GPT-4o", "GPT-5", "Pro", "High"] {
            let page = Picker::new(generation, "GPT-5.5");
            let refused = pin_on(&page, label).unwrap_err();
            assert_eq!(refused.code, ErrorCode::ModelUnavailable, "{generation} {label}: {refused:?}");
            assert_eq!(*page.current.borrow(), "GPT-5.5", "{generation} {label}");
            assert_eq!(*page.level.borrow(), "closed", "{generation} {label}: closed again");
        }
    }
}

#[test]
fn a_page_without_a_picker_is_not_guessed_at() {
    let page = Picker::new("a", "GPT-5.5");
    *page.html.borrow_mut() = load("a-idle");
    let refused = pin_on(&page, "o3").unwrap_err();
    assert_eq!(refused.code, ErrorCode::HostUiChanged);
    assert!(page.clicks.borrow().is_empty());
}
