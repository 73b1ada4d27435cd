//! The locator table. Each element has ordered candidates; the first that
//! matches exactly one element wins. Sources: `../shared/CHATGPT-DOM.md`
//! (generation A: 2025 – mid 2026; generation B: the 2026-09 redesign).

use protocol::ErrorCode;

use crate::Dom;

/// The elements the adapter needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    /// The composer form.
    ComposerForm,
    /// The composer's text editor.
    Editor,
    /// The send button (not the stop button).
    SendButton,
    /// The stop button (B reuses the submit slot).
    StopButton,
    /// The composer's `+` ("Add files and more") button.
    PlusButton,
}

/// One candidate selector for an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Which UI generation it comes from.
    pub generation: &'static str,
    /// The CSS selector.
    pub selector: &'static str,
}

/// An element's ordered candidates.
#[derive(Debug, Clone, Copy)]
pub struct Locator {
    /// The element.
    pub element: Element,
    /// Candidates, most specific first.
    pub candidates: &'static [Candidate],
}

const fn c(generation: &'static str, selector: &'static str) -> Candidate {
    Candidate { generation, selector }
}

/// The table. Order matters: specific test ids and ids first, structure last.
pub const TABLE: &[Locator] = &[
    Locator {
        element: Element::ComposerForm,
        candidates: &[c("A", r#"form[data-type="unified-composer"]"#), c("B", "form[data-chatgpt-composer]")],
    },
    Locator {
        element: Element::Editor,
        candidates: &[
            c("A", r#"#prompt-textarea[contenteditable="true"]"#),
            c("A", r#"[data-testid="prompt-textarea"][contenteditable="true"]"#),
            c("A", r#"form[data-type="unified-composer"] [contenteditable="true"][data-lexical-editor="true"]"#),
            c("B", r#"form[data-chatgpt-composer] [contenteditable="true"][role="textbox"]"#),
        ],
    },
    Locator {
        element: Element::SendButton,
        candidates: &[
            c("A", r#"button[data-testid="send-button"]"#),
            c("A", "button#composer-submit-button"),
            c("B", r#"form[data-chatgpt-composer] button[type="submit"]:not([data-state="stop"])"#),
        ],
    },
    Locator {
        element: Element::StopButton,
        candidates: &[
            c("A", r#"button[data-testid="stop-button"]"#),
            // B reuses the submit slot; its stop state marker is an assumption
            // (fakechat renders data-state="stop"); turn-finished evidence decides anyway.
            c("B", r#"form[data-chatgpt-composer] button[type="submit"][data-state="stop"]"#),
        ],
    },
    Locator {
        element: Element::PlusButton,
        candidates: &[
            c("A", r#"button[data-testid="composer-plus-btn"]"#),
            c("B", r#"[data-composer-navigation-target="add-context"]"#),
        ],
    },
];

/// The page does not match the locator table: typed, fail-closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiChanged {
    /// The element.
    pub element: Element,
    /// `missing` or `ambiguous (n matches)`.
    pub detail: String,
}

impl UiChanged {
    /// Always `HOST_UI_CHANGED`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::HostUiChanged
    }
}

/// Resolves `element` to exactly one node. The first candidate with any
/// match decides: one match wins, several are ambiguous (never guess).
pub fn resolve<D: Dom>(dom: &D, element: Element) -> Result<D::Node, UiChanged> {
    let locator = TABLE.iter().find(|l| l.element == element).expect("every element has a locator");
    for candidate in locator.candidates {
        let mut found = dom.query_all(None, candidate.selector);
        match found.len() {
            0 => continue,
            1 => return Ok(found.remove(0)),
            n => {
                return Err(UiChanged {
                    element,
                    detail: format!("ambiguous ({n} matches for {})", candidate.selector),
                });
            }
        }
    }
    Err(UiChanged { element, detail: "missing".into() })
}

/// Like [`resolve`], but absence is an answer rather than an error.
pub fn find<D: Dom>(dom: &D, element: Element) -> Result<Option<D::Node>, UiChanged> {
    match resolve(dom, element) {
        Ok(node) => Ok(Some(node)),
        Err(e) if e.detail == "missing" => Ok(None),
        Err(e) => Err(e),
    }
}
