//! A read-only account of how this build reads a page: what each locator
//! candidate finds (visible and hidden), the stop evidence, the turns, the
//! classification, what a submit would do, and the app pills. For
//! operators checking a saved real page against the build, and for bug
//! reports. It never clicks, types or sends anything.
//!
//! The submit plan is not a second reading of the page: it is the
//! composer's own decision ([`crate::compose::type_prompt`] then
//! [`crate::compose::press_send`], the steps `submit` takes) run on a
//! [`DryRun`] of the page, which records what would be typed and clicked
//! instead of doing it. A refusal carries the code `submit` would return.

use std::cell::RefCell;

use crate::Dom;
use crate::classify::{PageState, classify, turns};
use crate::compose::{Act, Refusal, press_send, type_prompt};
use crate::locators::{Element, TABLE, stop_buttons};

/// The adapter's version, as reports name it.
pub const ADAPTER_VERSION: &str = concat!("chatgpt-dom ", env!("CARGO_PKG_VERSION"));

/// The prompt a dry run types: any non-empty text would do.
const PROBE: &str = "inspect-page dry run";

/// One candidate selector and what it matched.
#[derive(Debug, Clone)]
pub struct CandidateReport<N> {
    /// The UI generation it belongs to.
    pub generation: &'static str,
    /// The selector.
    pub selector: &'static str,
    /// Every match, with whether it is visible.
    pub matches: Vec<(N, bool)>,
}

/// One element of the locator table.
#[derive(Debug, Clone)]
pub struct LocatorReport<N> {
    /// The element.
    pub element: Element,
    /// Its candidates, in table order.
    pub candidates: Vec<CandidateReport<N>>,
    /// What the adapter resolves it to, or why not (`missing`, `ambiguous …`).
    pub resolved: Result<N, String>,
}

/// What a submit would do on this page, now: the composer's decision on a
/// dry run.
#[derive(Debug, Clone)]
pub enum SubmitPlan<N> {
    /// Type the prompt, then click this send button, which the page shows
    /// already.
    Click(N),
    /// Type the prompt first: the site renders the send button only then.
    AfterTyping,
    /// Nothing: `submit` refuses, with `"<CODE>: <detail>"` (the code as on
    /// the wire; the typed refusal is [`Report::submit_refusal`]).
    Nothing(String),
}

/// The whole account.
#[derive(Debug, Clone)]
pub struct Report<N> {
    /// [`ADAPTER_VERSION`].
    pub adapter: &'static str,
    /// The page's `html[lang]`.
    pub lang: Option<String>,
    /// Per element of the locator table.
    pub locators: Vec<LocatorReport<N>>,
    /// Visible buttons with stop semantics.
    pub stop_buttons: Vec<N>,
    /// Turns found.
    pub turns: usize,
    /// The classification, or the typed refusal (`HOST_UI_CHANGED: …`).
    pub state: Result<PageState, String>,
    /// What a submit would do.
    pub submit: SubmitPlan<N>,
    /// Why `submit` would refuse, with its code (the same refusal as
    /// [`SubmitPlan::Nothing`]'s text).
    pub submit_refusal: Option<Refusal>,
    /// The app pills the composer shows.
    pub pills: Vec<String>,
}

/// A page that records instead of acting: typing is kept (the editor then
/// reads as holding the text, as the real one would), clicks are listed,
/// and the page itself is never touched.
pub struct DryRun<'a, D: Dom> {
    dom: &'a D,
    typed: RefCell<Option<(D::Node, String)>>,
    clicks: RefCell<Vec<D::Node>>,
}

impl<'a, D: Dom> DryRun<'a, D> {
    /// A dry run over `dom`.
    pub fn new(dom: &'a D) -> Self {
        DryRun { dom, typed: RefCell::new(None), clicks: RefCell::new(Vec::new()) }
    }

    /// What would have been clicked, in order.
    pub fn clicks(&self) -> Vec<D::Node> {
        self.clicks.borrow().clone()
    }

    /// What would be in the editor now.
    pub fn typed(&self) -> Option<String> {
        self.typed.borrow().as_ref().map(|(_, text)| text.clone())
    }
}

impl<D: Dom> Dom for DryRun<'_, D> {
    type Node = D::Node;

    fn query_all(&self, scope: Option<&Self::Node>, selector: &str) -> Vec<Self::Node> {
        self.dom.query_all(scope, selector)
    }

    fn attr(&self, node: &Self::Node, name: &str) -> Option<String> {
        self.dom.attr(node, name)
    }

    fn text(&self, node: &Self::Node) -> String {
        match &*self.typed.borrow() {
            // Typing keeps an app mention: the text goes after it.
            Some((editor, text)) if editor == node => format!("{} {text}", self.dom.text(node)),
            _ => self.dom.text(node),
        }
    }

    fn within(&self, node: &Self::Node, selector: &str) -> bool {
        self.dom.within(node, selector)
    }

    fn visible(&self, node: &Self::Node) -> bool {
        self.dom.visible(node)
    }
}

impl<D: Dom> Act for DryRun<'_, D> {
    fn insert_text(&self, editor: &Self::Node, text: &str) -> bool {
        *self.typed.borrow_mut() = Some((editor.clone(), text.to_owned()));
        true
    }

    fn click(&self, node: &Self::Node) {
        self.clicks.borrow_mut().push(node.clone());
    }

    fn clear(&self, _editor: &Self::Node) {
        *self.typed.borrow_mut() = None;
    }
}

/// What `submit` (without an app) would do on `dom` now, decided by the
/// composer itself on a [`DryRun`]: refuse (with its code), click the send
/// button shown, or type first and click the one the page then shows.
pub fn plan<D: Dom>(dom: &D) -> (SubmitPlan<D::Node>, Option<Refusal>) {
    let dry = DryRun::new(dom);
    let refused =
        |refusal: Refusal| (SubmitPlan::Nothing(format!("{}: {}", refusal.code, refusal.detail)), Some(refusal));
    let typed = match type_prompt(&dry, PROBE) {
        Ok(typed) => typed,
        Err(refusal) => return refused(refusal),
    };
    match press_send(&dry, typed, None) {
        // `press_send` answers `Some` only after its one click.
        Ok(Some(_)) => (dry.clicks().pop().map_or(SubmitPlan::AfterTyping, SubmitPlan::Click), None),
        Ok(None) => (SubmitPlan::AfterTyping, None),
        Err(refusal) => refused(refusal),
    }
}

/// Reads `dom` the way the adapter does, touching nothing.
pub fn inspect<D: Dom>(dom: &D) -> Report<D::Node> {
    let locators = TABLE
        .iter()
        .map(|locator| LocatorReport {
            element: locator.element,
            candidates: locator
                .candidates
                .iter()
                .map(|c| CandidateReport {
                    generation: c.generation,
                    selector: c.selector,
                    matches: dom
                        .query_all(None, c.selector)
                        .into_iter()
                        .map(|n| (n.clone(), dom.visible(&n)))
                        .collect(),
                })
                .collect(),
            resolved: crate::locators::resolve(dom, locator.element).map_err(|e| e.detail),
        })
        .collect();
    let state = classify(dom).map(|s| s.state).map_err(|e| format!("{}: {:?}: {}", e.code(), e.element, e.detail));
    let (submit, submit_refusal) = plan(dom);
    Report {
        adapter: ADAPTER_VERSION,
        lang: dom.query_all(None, "html").first().and_then(|h| dom.attr(h, "lang")),
        locators,
        stop_buttons: stop_buttons(dom),
        turns: turns(dom).len(),
        state,
        submit,
        submit_refusal,
        pills: crate::bind::pills(dom),
    }
}
