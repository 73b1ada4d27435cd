//! A read-only account of how this build reads a page: what each locator
//! candidate finds (visible and hidden), the stop evidence, the turns, the
//! classification, what a submit would click, and the app pills. For
//! operators checking a saved real page against the build, and for bug
//! reports. It never clicks, types or sends anything.

use crate::Dom;
use crate::classify::{PageState, classify, turns};
use crate::locators::{Element, TABLE, find, stop_buttons};

/// The adapter's version, as reports name it.
pub const ADAPTER_VERSION: &str = concat!("chatgpt-dom ", env!("CARGO_PKG_VERSION"));

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

/// What a submit would do on this page, now.
#[derive(Debug, Clone)]
pub enum SubmitPlan<N> {
    /// Click this send button (a draft is in the composer already).
    Click(N),
    /// Type the prompt first: the site renders the send button only then.
    AfterTyping,
    /// Nothing: the page is not ready, with the reason.
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
    /// What a submit would click.
    pub submit: SubmitPlan<N>,
    /// The app pills the composer shows.
    pub pills: Vec<String>,
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
    let submit = match &state {
        Ok(PageState::Ready | PageState::Idle) => match find(dom, Element::SendButton) {
            Ok(Some(send)) => SubmitPlan::Click(send),
            Ok(None) => SubmitPlan::AfterTyping,
            Err(e) => SubmitPlan::Nothing(format!("send button {}", e.detail)),
        },
        Ok(other) => SubmitPlan::Nothing(format!("the page is {other:?}")),
        Err(refusal) => SubmitPlan::Nothing(refusal.clone()),
    };
    Report {
        adapter: ADAPTER_VERSION,
        lang: dom.query_all(None, "html").first().and_then(|h| dom.attr(h, "lang")),
        locators,
        stop_buttons: stop_buttons(dom),
        turns: turns(dom).len(),
        state,
        submit,
        pills: crate::bind::pills(dom),
    }
}
