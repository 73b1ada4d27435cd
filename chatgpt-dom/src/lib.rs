//! The one ChatGPT DOM adapter, shared by every carrier: the WebExtension's
//! content script (over web-sys) and the CDP host agent (over DevTools) each
//! implement the small [`Dom`] trait; everything else lives here once.
//!
//! # Layout
//! - [`locators`]: the locator table, as data: per element, ordered
//!   candidates across UI generations (semantic attributes, ids, roles,
//!   structure; never generated classes, never English labels alone).
//! - [`classify`]: the page's state (`loading | ready | generating | idle |
//!   error{…} | closed`) from turn-finished evidence, incidents and screens.
//! - [`compose`]: inserting a prompt and pressing send, exactly once.
//! - [`bind`]: binding the conversation to the orchestrator's app, by its
//!   exact label, before anything is submitted.
//! - [`identity`]: conversation identity from `/c/<uuid>` and project URLs.
//!
//! Fail closed: a locator that matches nothing, or more than one element,
//! is `HOST_UI_CHANGED`; nothing is ever clicked approximately, and the
//! Retry button is located only to be reported, never to be clicked.
//!
//! Architecture invariant: no IO, no browser API; builds for wasm32.

pub mod bind;
pub mod classify;
pub mod compose;
pub mod identity;
pub mod locators;

pub use classify::{Incident, PageState, Snapshot, classify};
pub use compose::{Act, Pressed, Refusal, confirmed, ready, submit, submit_bound};
pub use identity::{ConversationRef, is_project_page, parse_url};
pub use locators::{Element, Locator, UiChanged, resolve};

/// The DOM as a carrier sees it. Implementations: web-sys in the extension,
/// DevTools in the CDP agent, an HTML parser in tests.
pub trait Dom {
    /// An element handle.
    type Node: Clone;
    /// Every element matching `selector` (CSS), within `scope` or the document.
    fn query_all(&self, scope: Option<&Self::Node>, selector: &str) -> Vec<Self::Node>;
    /// An attribute's value.
    fn attr(&self, node: &Self::Node, name: &str) -> Option<String>;
    /// The element's visible text.
    fn text(&self, node: &Self::Node) -> String;
    /// Whether the node lies inside any element matching `selector`.
    fn within(&self, node: &Self::Node, selector: &str) -> bool;
}
