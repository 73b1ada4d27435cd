//! The app-binding driver against a scripted page that moves between the
//! fakechat fixtures as the real page would on each click or keystroke:
//! every route ends on the exact app, a refusal leaves the composer empty
//! and the menu closed, and no look-alike row is ever clicked.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;

use chatgpt_dom::bind::{Route, Wait, bind};
use chatgpt_dom::{Act, Dom};
use protocol::ErrorCode;
use scraper::{ElementRef, Html, Selector};

fn load(name: &str) -> Html {
    let path = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("fixtures")
        .join(format!("{name}.html"));
    Html::parse_document(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// A page that becomes another fixture on each effect, per a script.
struct Scripted {
    html: RefCell<Html>,
    /// The fixture a mention popover for the typed text shows (none: no popover).
    mention: Option<&'static str>,
    /// The app-list fixture `+` → More → Developer mode ends on.
    apps: &'static str,
    /// The fixture picking the app ends on.
    picked: &'static str,
    /// Text typed into the editor and not cleared.
    typed: RefCell<String>,
    /// Clicked elements, described.
    clicks: RefCell<Vec<String>>,
}

impl Scripted {
    fn new(start: &str, mention: Option<&'static str>, apps: &'static str) -> Scripted {
        Scripted {
            html: RefCell::new(load(start)),
            mention,
            apps,
            picked: "a-apps-bound",
            typed: RefCell::new(String::new()),
            clicks: RefCell::new(vec![]),
        }
    }

    fn element(&self, node: ego_tree::NodeId) -> (String, Vec<(String, String)>) {
        let html = self.html.borrow();
        let e = ElementRef::wrap(html.tree.get(node).unwrap()).unwrap();
        let attrs = e.value().attrs().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        (e.text().collect::<String>().trim().to_owned(), attrs)
    }
}

impl Dom for Scripted {
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
        let (text, attrs) = self.element(*node);
        if attrs.iter().any(|(k, v)| k == "contenteditable" && v == "true") {
            return self.typed.borrow().clone();
        }
        text
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

impl Act for Scripted {
    fn insert_text(&self, _editor: &Self::Node, text: &str) -> bool {
        *self.typed.borrow_mut() = text.to_owned();
        if text.starts_with('@')
            && let Some(fixture) = self.mention
        {
            *self.html.borrow_mut() = load(fixture);
        }
        true
    }

    fn click(&self, node: &Self::Node) {
        let (text, attrs) = self.element(*node);
        let attr = |name: &str| attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        self.clicks.borrow_mut().push(text.clone());
        let next = if attr("data-testid").as_deref() == Some("composer-plus-btn") {
            if attr("aria-expanded").as_deref() == Some("true") { "a-ready-new-chat" } else { "a-apps-plus-menu" }
        } else if attr("data-fakechat-nav").as_deref() == Some("more") {
            "a-apps-more"
        } else if attr("data-fakechat-nav").as_deref() == Some("developer_mode") {
            self.apps
        } else if let Some(app) = attr("data-fakechat-app") {
            assert_eq!(app, "connector-0", "only the exact app is ever clicked, not {text}");
            self.typed.borrow_mut().clear();
            self.picked
        } else {
            panic!("unexpected click on {text} {attrs:?}")
        };
        *self.html.borrow_mut() = load(next);
    }

    fn clear(&self, _editor: &Self::Node) {
        self.typed.borrow_mut().clear();
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

fn bind_on(page: &Scripted) -> Result<Route, chatgpt_dom::Refusal> {
    run(bind(page, "Orchestrator", &Clock(Cell::new(0))))
}

#[test]
fn an_inherited_or_earlier_binding_needs_no_click() {
    let page = Scripted::new("a-apps-bound", None, "a-apps-developer-mode");
    assert_eq!(bind_on(&page), Ok(Route::Already));
    assert!(page.clicks.borrow().is_empty());
    let other = Scripted::new("a-apps-other-bound", None, "a-apps-developer-mode");
    assert_eq!(bind_on(&other).unwrap_err().code, ErrorCode::HostAppBindingNotReady);
    assert!(other.clicks.borrow().is_empty());
}

#[test]
fn the_mention_popover_picks_the_exact_app() {
    let page = Scripted::new("a-ready-new-chat", Some("a-apps-mention"), "a-apps-developer-mode");
    assert_eq!(bind_on(&page), Ok(Route::Mention));
    assert_eq!(*page.clicks.borrow(), vec!["Orchestrator"]);
    assert_eq!(*page.typed.borrow(), "", "the editor is left empty");
}

/// The redesign's `@` list (rows as buttons titled by their row content,
/// no scroll area) leaves the app inside the editor: that mention is the
/// binding, and the editor holds nothing else.
#[test]
fn the_redesigns_mention_list_leaves_the_app_in_the_editor() {
    let mut page = Scripted::new("b-ready-new-chat", Some("b-apps-mention"), "b-apps-plus-menu");
    page.picked = "b-apps-mention-picked";
    assert_eq!(bind_on(&page), Ok(Route::Mention));
    assert_eq!(*page.clicks.borrow(), vec!["OrchestratorApp"], "the row with the exact title (its text, described)");
    assert_eq!(chatgpt_dom::bind::pills(&page), ["Orchestrator"]);
    assert_eq!(*page.typed.borrow(), "", "the query is gone, the mention stays");
    // Bound already: the next binding clicks nothing.
    page.clicks.borrow_mut().clear();
    assert_eq!(bind_on(&page), Ok(Route::Already));
    assert!(page.clicks.borrow().is_empty());
    for (mention, code) in
        [("b-apps-mention-disabled", ErrorCode::HostAppDisabled), ("b-apps-mention-stale", ErrorCode::HostAppStale)]
    {
        let page = Scripted::new("b-ready-new-chat", Some(mention), "b-apps-plus-menu");
        assert_eq!(bind_on(&page).unwrap_err().code, code, "{mention}");
        assert!(page.clicks.borrow().is_empty(), "{mention}: nothing clicked");
    }
}

#[test]
fn without_a_mention_the_plus_menu_leads_through_more_and_developer_mode() {
    let page = Scripted::new("a-ready-new-chat", None, "a-apps-developer-mode");
    assert_eq!(bind_on(&page), Ok(Route::PlusMenu));
    assert_eq!(*page.clicks.borrow(), vec!["+", "More", "Developer mode", "Orchestrator"]);
    assert_eq!(*page.typed.borrow(), "");
}

#[test]
fn disabled_and_stale_apps_are_refused_with_the_editor_empty_and_the_menu_closed() {
    for (mention, code) in
        [("a-apps-mention-disabled", ErrorCode::HostAppDisabled), ("a-apps-mention-stale", ErrorCode::HostAppStale)]
    {
        let page = Scripted::new("a-ready-new-chat", Some(mention), "a-apps-developer-mode");
        assert_eq!(bind_on(&page).unwrap_err().code, code, "{mention}");
        assert!(page.clicks.borrow().is_empty(), "{mention}: nothing clicked");
        assert_eq!(*page.typed.borrow(), "", "{mention}: the typed mention is removed");
    }
}

#[test]
fn a_stale_app_in_the_developer_mode_list_is_refused_and_the_menu_closed() {
    let page = Scripted::new("a-ready-new-chat", None, "a-apps-developer-mode-stale");
    assert_eq!(bind_on(&page).unwrap_err().code, ErrorCode::HostAppStale);
    assert_eq!(*page.clicks.borrow(), vec!["+", "More", "Developer mode", "+"]);
}

#[test]
fn an_absent_label_is_not_ready_after_every_route_and_the_menu_is_closed() {
    // The app list shows only look-alikes of "Orchestrator": bind to a label none carries exactly.
    let page = Scripted::new("a-ready-new-chat", Some("a-apps-mention"), "a-apps-developer-mode");
    let refused = run(bind(&page, "Orchestrator Beta", &Clock(Cell::new(0)))).unwrap_err();
    assert_eq!(refused.code, ErrorCode::HostAppBindingNotReady);
    assert_eq!(*page.clicks.borrow(), vec!["+", "More", "Developer mode", "+"], "the menu is closed again");
    assert_eq!(*page.typed.borrow(), "");
}
