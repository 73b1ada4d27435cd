//! A page that acts like the site for the adapter's tests: a parsed HTML
//! document whose editor takes typed text and whose composer shows the send
//! button only on the page's *next change* after the text went in (the real
//! site renders none while the composer is empty — the voice button holds
//! the slot — and re-renders the slot after its editor has observed the
//! input), with every click recorded. Mutations build hostile variants of a
//! fixture for the property test.

#![allow(dead_code)]

use std::cell::RefCell;
use std::path::PathBuf;

use chatgpt_dom::html::{HtmlPage, visible};
use chatgpt_dom::{Act, Dom};
use ego_tree::NodeId;
use scraper::{Html, Node};

/// A fixture as a live page.
pub struct Page {
    doc: RefCell<HtmlPage>,
    /// Text typed into an editor and not cleared.
    pub typed: RefCell<Option<(NodeId, String)>>,
    /// Clicked elements, in order.
    pub clicks: RefCell<Vec<NodeId>>,
    /// Whether the editor accepts insertion (a broken editor does not).
    pub accepts_input: bool,
    /// The editor the site has yet to render a send button for.
    pending: RefCell<Option<NodeId>>,
}

/// The text of `fixtures/<name>.html`.
pub fn fixture_text(name: &str) -> String {
    let path = package_dir().join("fixtures").join(format!("{name}.html"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `fixtures/<name>.html` as a page.
pub fn fixture(name: &str) -> Page {
    Page::parse(&fixture_text(name))
}

impl Page {
    /// Parses a whole document.
    pub fn parse(text: &str) -> Page {
        Page {
            doc: RefCell::new(HtmlPage::parse(text)),
            typed: RefCell::new(None),
            clicks: RefCell::new(Vec::new()),
            accepts_input: true,
            pending: RefCell::new(None),
        }
    }

    /// The page's next change: the site reacts to what was typed.
    pub fn settle(&self) {
        if let Some(editor) = self.pending.borrow_mut().take() {
            self.show_send(editor);
        }
    }

    /// The ground-truth role a corpus fixture gives `node` (`data-corpus`).
    pub fn truth(&self, node: NodeId) -> Option<String> {
        self.doc.borrow().attr(&node, "data-corpus")
    }

    /// Nodes whose ground truth is `role`, and whether each is visible.
    pub fn truths(&self, role: &str) -> Vec<(NodeId, bool)> {
        let doc = self.doc.borrow();
        let found = doc.query_all(None, &format!(r#"[data-corpus="{role}"]"#));
        found.into_iter().map(|n| (n, visible(&doc.html, n))).collect()
    }

    /// The start tag of `node`, for messages.
    pub fn describe(&self, node: NodeId) -> String {
        self.doc.borrow().describe(node)
    }

    fn element_name(&self, node: NodeId) -> Option<String> {
        self.doc.borrow().element(node).map(|e| e.value().name().to_owned())
    }

    fn attrs(&self, node: NodeId) -> Vec<(String, String)> {
        let doc = self.doc.borrow();
        let Some(e) = doc.element(node) else { return Vec::new() };
        e.value().attrs().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
    }

    /// Sets (`Some`) or removes (`None`) an attribute of `node`.
    pub fn set_attr(&self, node: NodeId, name: &str, value: Option<&str>) {
        let Some(tag) = self.element_name(node) else { return };
        let mut attrs: Vec<(String, String)> = self.attrs(node).into_iter().filter(|(k, _)| k != name).collect();
        if let Some(v) = value {
            attrs.push((name.to_owned(), v.to_owned()));
        }
        let element = make_element(&tag, &attrs);
        *self.doc.borrow_mut().html.tree.get_mut(node).expect("a node of this page").value() = Node::Element(element);
    }

    /// Inserts a copy of `node`'s subtree right after it; returns the copy.
    pub fn copy_after(&self, node: NodeId) -> NodeId {
        let mut doc = self.doc.borrow_mut();
        let value = doc.html.tree.get(node).expect("a node of this page").value().clone();
        let copy = doc.html.tree.get_mut(node).unwrap().insert_after(value).id();
        copy_children(&mut doc.html, node, copy);
        copy
    }

    /// Parses `markup` as a fragment and appends its nodes to `parent`'s
    /// children (`after: false`) or inserts them right after `parent`
    /// (`after: true`); returns the first node added.
    pub fn graft(&self, parent: NodeId, markup: &str, after: bool) -> Option<NodeId> {
        let fragment = Html::parse_fragment(markup);
        let root = fragment.tree.nodes().find(|n| matches!(n.value(), Node::Element(e) if e.name() == "html"))?;
        let tops: Vec<NodeId> = root.children().map(|c| c.id()).collect();
        let mut doc = self.doc.borrow_mut();
        let mut first = None;
        let mut anchor = parent;
        for top in tops {
            let value = fragment.tree.get(top).unwrap().value().clone();
            let added = if after {
                doc.html.tree.get_mut(anchor).expect("a node of this page").insert_after(value).id()
            } else {
                doc.html.tree.get_mut(parent).expect("a node of this page").append(value).id()
            };
            anchor = added;
            first.get_or_insert(added);
            graft_children(&mut doc.html, &fragment, top, added);
        }
        first
    }

    /// Moves `node` to be its parent's first child.
    pub fn move_first(&self, node: NodeId) {
        let mut doc = self.doc.borrow_mut();
        let Some(parent) = doc.html.tree.get(node).and_then(|n| n.parent()).map(|p| p.id()) else { return };
        let first = doc.html.tree.get(parent).unwrap().first_child().unwrap().id();
        if first != node {
            doc.html.tree.get_mut(first).unwrap().insert_id_before(node);
        }
    }

    /// The site's reaction to typing: the send button replaces the voice
    /// button in the composer form (or joins it where no slot is marked).
    fn show_send(&self, editor: NodeId) {
        let form = {
            let doc = self.doc.borrow();
            let mut current = doc.html.tree.get(editor).and_then(|n| n.parent());
            loop {
                match current {
                    Some(n) if doc.element(n.id()).is_some_and(|e| e.value().name() == "form") => break n.id(),
                    Some(n) => current = n.parent(),
                    None => return,
                }
            }
        };
        let (has_send, voice, redesign) = {
            let doc = self.doc.borrow();
            let sends = doc.query_all(Some(&form), r#"[data-corpus="send"]"#);
            let voice = doc.query_all(Some(&form), r#"[data-corpus="voice"]"#).into_iter().next();
            (!sends.is_empty(), voice, doc.attr(&form, "data-chatgpt-composer").is_some())
        };
        if has_send {
            return;
        }
        let attrs: &[(&str, &str)] = if redesign {
            &[("type", "submit"), ("aria-label", "Send"), ("data-corpus", "send")]
        } else {
            &[
                ("id", "composer-submit-button"),
                ("aria-label", "Send prompt"),
                ("data-testid", "send-button"),
                ("data-corpus", "send"),
            ]
        };
        let attrs: Vec<(String, String)> = attrs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let send = Node::Element(make_element("button", &attrs));
        let mut doc = self.doc.borrow_mut();
        match voice {
            Some(voice) => *doc.html.tree.get_mut(voice).unwrap().value() = send,
            None => {
                doc.html.tree.get_mut(form).unwrap().append(send);
            }
        }
    }
}

fn graft_children(html: &mut Html, source: &Html, from: NodeId, to: NodeId) {
    let children: Vec<NodeId> = source.tree.get(from).unwrap().children().map(|c| c.id()).collect();
    for child in children {
        let value = source.tree.get(child).unwrap().value().clone();
        let copy = html.tree.get_mut(to).unwrap().append(value).id();
        graft_children(html, source, child, copy);
    }
}

fn copy_children(html: &mut Html, from: NodeId, to: NodeId) {
    let children: Vec<NodeId> = html.tree.get(from).unwrap().children().map(|c| c.id()).collect();
    for child in children {
        let value = html.tree.get(child).unwrap().value().clone();
        let copy = html.tree.get_mut(to).unwrap().append(value).id();
        copy_children(html, child, copy);
    }
}

/// A fresh element `<tag attrs…>`, built by the HTML parser itself.
fn make_element(tag: &str, attrs: &[(String, String)]) -> scraper::node::Element {
    let attrs: String =
        attrs.iter().map(|(k, v)| format!(" {k}=\"{}\"", v.replace('&', "&amp;").replace('"', "&quot;"))).collect();
    let markup = format!("<{tag}{attrs}></{tag}>");
    let parsed = if tag == "html" { Html::parse_document(&markup) } else { Html::parse_fragment(&markup) };
    parsed
        .tree
        .nodes()
        .find_map(|n| match n.value() {
            Node::Element(e) if e.name() == tag => Some(e.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the parser made no <{tag}>"))
}

impl Dom for Page {
    type Node = NodeId;

    fn query_all(&self, scope: Option<&NodeId>, selector: &str) -> Vec<NodeId> {
        self.doc.borrow().query_all(scope, selector)
    }

    fn attr(&self, node: &NodeId, name: &str) -> Option<String> {
        self.doc.borrow().attr(node, name)
    }

    fn text(&self, node: &NodeId) -> String {
        // Typing keeps what the editor held before (an app mention; the
        // adapter refuses any draft) and puts the text after it.
        if let Some((typed, text)) = &*self.typed.borrow()
            && typed == node
        {
            return format!("{} {text}", self.doc.borrow().text(node));
        }
        self.doc.borrow().text(node)
    }

    fn within(&self, node: &NodeId, selector: &str) -> bool {
        self.doc.borrow().within(node, selector)
    }

    fn visible(&self, node: &NodeId) -> bool {
        self.doc.borrow().visible(node)
    }
}

impl Act for Page {
    fn insert_text(&self, editor: &NodeId, text: &str) -> bool {
        if self.accepts_input {
            *self.typed.borrow_mut() = Some((*editor, text.to_owned()));
            *self.pending.borrow_mut() = Some(*editor);
        }
        self.accepts_input
    }

    fn click(&self, node: &NodeId) {
        self.clicks.borrow_mut().push(*node);
    }

    fn clear(&self, _editor: &NodeId) {
        *self.typed.borrow_mut() = None;
    }
}

/// A corpus fixture's header, parsed.
pub struct Header {
    /// The `expect:` line.
    pub expect: String,
    /// The `notes:` line.
    pub notes: String,
    /// The `fakechat:` line (a control object), if fakechat renders this structure.
    pub fakechat: Option<String>,
    /// The `source:` line.
    pub source: String,
    /// The `human:` line.
    pub human: String,
    /// The `captured:` line.
    pub captured: String,
}

/// Reads the header comment of a corpus fixture.
pub fn header(text: &str) -> Header {
    let line = |key: &str| text.lines().find_map(|l| l.strip_prefix(&format!("{key}: "))).map(str::to_owned);
    Header {
        expect: line("expect").expect("every corpus fixture says what to expect"),
        notes: line("notes").unwrap_or_default(),
        fakechat: line("fakechat"),
        source: line("source").expect("every corpus fixture names its source"),
        human: line("human").expect("every corpus fixture says what a human reads"),
        captured: line("captured").expect("every corpus fixture dates its capture"),
    }
}

/// Every corpus fixture: (name, text).
pub fn corpus() -> Vec<(String, String)> {
    let dir = package_dir().join("fixtures/corpus");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "html"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    out.sort();
    out
}

/// The page's clock and its changes, for the adapter's waits: each wait
/// lets the page react once ([`Page::settle`]) and advances 100 ms.
pub struct Settle<'a> {
    page: &'a Page,
    now: std::cell::Cell<u64>,
}

impl chatgpt_dom::bind::Wait for Settle<'_> {
    fn now_ms(&self) -> u64 {
        self.now.get()
    }

    async fn change(&self, _until_ms: u64) -> bool {
        self.page.settle();
        self.now.set(self.now.get() + 100);
        true
    }
}

/// Runs a future that never waits on anything outside the page.
pub fn run<T>(future: impl std::future::Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

/// `chatgpt_dom::submit` on `page`, the page reacting on each wait.
pub fn submit(page: &Page, prompt: &str, app: Option<&str>) -> Result<chatgpt_dom::Pressed, chatgpt_dom::Refusal> {
    run(chatgpt_dom::submit(page, prompt, app, &Settle { page, now: std::cell::Cell::new(0) }))
}

/// `chatgpt_dom::bind::bind` on `page`, the page reacting on each wait.
pub fn bind(page: &Page, label: &str) -> Result<chatgpt_dom::bind::Route, chatgpt_dom::Refusal> {
    run(chatgpt_dom::bind::bind(page, label, &Settle { page, now: std::cell::Cell::new(0) }))
}

/// This package's directory, read at run time: the compile-time path goes
/// stale when another clone shares the target directory (CI's does).
pub fn package_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).expect("run through cargo")
}
