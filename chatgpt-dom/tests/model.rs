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
use chatgpt_dom::model::pin;
use chatgpt_dom::{Act, Dom};
use protocol::ErrorCode;
use scraper::{ElementRef, Html, Selector};

fn load(name: &str) -> Html {
    let path = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("fixtures")
        .join(format!("{name}.html"));
    Html::parse_document(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// A page in one picker state: generation, how far the picker is open,
/// and the current model. Clicks move it as fakechat's page script does.
struct Picker {
    generation: &'static str,
    level: RefCell<&'static str>,
    current: RefCell<String>,
    html: RefCell<Html>,
    clicks: RefCell<Vec<String>>,
}

impl Picker {
    fn new(generation: &'static str, current: &str) -> Picker {
        let page = Picker {
            generation,
            level: RefCell::new("closed"),
            current: RefCell::new(current.into()),
            html: RefCell::new(Html::new_document()),
            clicks: RefCell::new(vec![]),
        };
        page.reload();
        page
    }

    fn reload(&self) {
        let suffix = if *self.current.borrow() == "o3" { "-o3" } else { "" };
        *self.html.borrow_mut() = load(&format!("{}-model-{}{suffix}", self.generation, self.level.borrow()));
    }

    fn element(&self, node: ego_tree::NodeId) -> (String, Vec<(String, String)>) {
        let html = self.html.borrow();
        let e = ElementRef::wrap(html.tree.get(node).unwrap()).unwrap();
        let attrs = e.value().attrs().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        (e.text().collect::<String>().trim().to_owned(), attrs)
    }
}

impl Dom for Picker {
    type Node = ego_tree::NodeId;

    fn query_all(&self, scope: Option<&Self::Node>, selector: &str) -> Vec<Self::Node> {
        let selector = Selector::parse(selector).unwrap();
        let html = self.html.borrow();
        match scope {
            None => html.select(&selector).map(|e| e.id()).collect(),
            Some(id) => {
                ElementRef::wrap(html.tree.get(*id).unwrap()).unwrap().select(&selector).map(|e| e.id()).collect()
            }
        }
    }

    fn attr(&self, node: &Self::Node, name: &str) -> Option<String> {
        let html = self.html.borrow();
        ElementRef::wrap(html.tree.get(*node)?)?.value().attr(name).map(str::to_owned)
    }

    fn text(&self, node: &Self::Node) -> String {
        self.element(*node).0
    }

    fn within(&self, node: &Self::Node, selector: &str) -> bool {
        let selector = Selector::parse(selector).unwrap();
        let html = self.html.borrow();
        let mut current = html.tree.get(*node).unwrap().parent();
        while let Some(n) = current {
            if ElementRef::wrap(n).is_some_and(|e| selector.matches(&e)) {
                return true;
            }
            current = n.parent();
        }
        false
    }

    fn visible(&self, node: &Self::Node) -> bool {
        chatgpt_dom::html::visible(&self.html.borrow(), *node)
    }
}

impl Act for Picker {
    fn insert_text(&self, _editor: &Self::Node, _text: &str) -> bool {
        panic!("nothing is typed while pinning a model")
    }

    fn click(&self, node: &Self::Node) {
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

    fn clear(&self, _editor: &Self::Node) {
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
