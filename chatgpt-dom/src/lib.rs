//! The one ChatGPT DOM adapter, shared by every carrier: the WebExtension's
//! content script (over web-sys) and the CDP host agent (over DevTools) each
//! implement the small [`Dom`] trait; everything else lives here once.
//!
//! # Layout
//! - [`locators`]: the locator table, as data: per element, ordered
//!   candidates across UI generations (semantic attributes, ids, roles,
//!   structure; never generated classes, never English labels alone).
//! - [`classify`]: the page's state (`loading | ready | generating | idle |
//!   unsettled | error{…}`) from turn-finished evidence, busy notices,
//!   incidents, the tool-approval card and screens: busy until proven
//!   finished.
//! - [`compose`]: inserting a prompt and pressing send, exactly once,
//!   never beside a person's draft ([`attachments`]: their files count).
//! - [`bind`]: binding the conversation to the orchestrator's app, by its
//!   exact label, before anything is submitted.
//! - [`model`]: pinning the conversation's model through the picker, by
//!   its exact label, verified before anything is typed.
//! - [`identity`]: conversation identity from `/c/<uuid>` and project URLs.
//! - [`inspect`]: a read-only account of how this build reads a page; its
//!   submit plan is the composer's own decision on a dry run.
//! - `html` (feature `html`): a parsed HTML document as a [`Dom`], for
//!   saved pages and the corpus in `fixtures/`.
//!
//! Fail closed: a locator that matches nothing, or more than one element,
//! is `HOST_UI_CHANGED`; nothing is ever clicked approximately, the Retry
//! button is located only to be reported, never to be clicked, and nothing
//! is ever clicked inside a tool-approval card.
//!
//! Architecture invariant: no IO, no browser API; builds for wasm32.

pub mod attachments;
pub mod bind;
pub mod classify;
pub mod compose;
#[cfg(feature = "html")]
pub mod html;
pub mod identity;
pub mod inspect;
pub mod locators;
pub mod model;

pub use classify::{Incident, Notice, PageState, Snapshot, classify, reading, turn_mark};
pub use compose::{Act, Pressed, Refusal, Typed, abandon, confirmed, press_send, ready, submit, type_prompt};
pub use identity::{ConversationRef, is_project_page, parse_url};
pub use locators::{Element, Locator, UiChanged, is_stop, resolve};

/// The DOM as a carrier sees it. Implementations: web-sys in the extension,
/// DevTools in the CDP agent, an HTML parser in tests.
pub trait Dom {
    /// An element handle; equal handles are the same element.
    type Node: Clone + PartialEq;
    /// Every element matching `selector` (CSS), within `scope` or the document.
    fn query_all(&self, scope: Option<&Self::Node>, selector: &str) -> Vec<Self::Node>;
    /// An attribute's value.
    fn attr(&self, node: &Self::Node, name: &str) -> Option<String>;
    /// The element's visible text.
    fn text(&self, node: &Self::Node) -> String;
    /// Whether the node lies inside any element matching `selector`.
    fn within(&self, node: &Self::Node, selector: &str) -> bool;
    /// Whether a person could see the node: neither it nor an ancestor is
    /// `hidden`, `display: none` or `visibility: hidden`, and it has a box
    /// (not 0×0), where the carrier can tell. The redesign keeps hidden
    /// legacy elements (an old editor, a stop button, a second composer
    /// form): only visible controls count. `aria-hidden` is not asked: the
    /// site's modal menus set it on everything else while they are open.
    fn visible(&self, node: &Self::Node) -> bool;
}
