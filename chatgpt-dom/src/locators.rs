//! The locator table, as data. Each element has ordered candidates across UI
//! generations; only elements a person can see count, and the first
//! candidate with a visible match decides: one match wins, several are
//! ambiguous (never guess). Sources: `../shared/CHATGPT-DOM.md` and the
//! corpus in `chatgpt-dom/fixtures/README.md` (generation A: 2025 – mid
//! 2026; generation B: the 2026-09 redesign).
//!
//! Stop semantics are decided here, once, by [`is_stop`]: the stop button
//! shares the send button's id in generation A and has nothing but its
//! label in generation B, so no send candidate may ever carry them.

use protocol::ErrorCode;

use crate::Dom;

/// The elements the adapter needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    /// The composer form.
    ComposerForm,
    /// The composer's text editor (inside the composer form).
    Editor,
    /// The send button: the composer's submit control, present only once
    /// the editor holds text, never one with stop semantics.
    SendButton,
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
    // Looked up inside the composer form only: B keeps a hidden legacy
    // `#prompt-textarea` and an inline "Edit message" editor elsewhere.
    Locator {
        element: Element::Editor,
        candidates: &[
            c("A", r#"#prompt-textarea[contenteditable="true"]"#),
            c("A", r#"[data-testid="prompt-textarea"][contenteditable="true"]"#),
            c("A", r#"[contenteditable="true"][data-lexical-editor="true"]"#),
            c("B", r#"[contenteditable="true"][role="textbox"]"#),
        ],
    },
    // Inside the composer form, and filtered by [`is_stop`]: generation A's
    // stop button reuses `#composer-submit-button`.
    Locator {
        element: Element::SendButton,
        candidates: &[
            c("A", r#"button[data-testid="send-button"]"#),
            c("A", "button#composer-submit-button"),
            c("B", r#"button[type="submit"]"#),
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

/// Where no send button can be: inside a tool-approval card or an app's
/// confirmation dialog (`crate::classify`'s approval structures), whatever
/// its buttons are called.
const NOT_SEND: &str = r#"[data-codex-approval-surface], [role="dialog"][data-app-name]"#;

/// Stop-button labels per locale, exactly as the site renders them. In
/// generation B the label is the *only* stop marker, so a page in a locale
/// missing here is refused ([`supported_locale`]) rather than guessed.
/// Sources: en "Stop" (2026-10 capture), "Stop streaming"/"Stop answering"
/// (generation A); ja 停止, ko 중지/스트리밍 중지, zh-CN 停止/停止生成/停止流式传输
/// (2025-12 capture, 2026-09 maps).
pub const STOP_LABELS: &[&str] =
    &["Stop", "Stop streaming", "Stop answering", "停止", "停止生成", "停止流式传输", "중지", "스트리밍 중지"];

/// Locales whose stop labels are in [`STOP_LABELS`] (the `lang` prefix).
pub const LOCALES: &[&str] = &["en", "ja", "ko", "zh"];

/// Whether `lang` (the page's `html[lang]`) is a locale whose labels the
/// adapter carries. No `lang` counts as English, as the site defaults to it.
pub fn supported_locale(lang: Option<&str>) -> bool {
    let lang = lang.unwrap_or("en").trim().to_ascii_lowercase();
    let primary = lang.split(['-', '_']).next().unwrap_or_default();
    LOCALES.contains(&primary)
}

/// Whether `node` has stop semantics: generation A's test id, a stop label
/// in any supported locale, or a stop-state marker (the logged-out mobile
/// surface's `data-stop-generating`). Never a send candidate.
pub fn is_stop<D: Dom>(dom: &D, node: &D::Node) -> bool {
    dom.attr(node, "data-testid").is_some_and(|id| id.split(['-', '_']).any(|word| word == "stop"))
        || dom.attr(node, "aria-label").is_some_and(|label| STOP_LABELS.contains(&label.trim()))
        || dom.attr(node, "data-stop-generating").is_some()
        || dom.attr(node, "data-state").as_deref() == Some("stop")
}

/// Every visible button on the page with stop semantics.
pub fn stop_buttons<D: Dom>(dom: &D) -> Vec<D::Node> {
    // Attributes first: `visible` can force layout in a live page, and this
    // runs on every observed mutation.
    dom.query_all(None, "button").into_iter().filter(|b| is_stop(dom, b) && dom.visible(b)).collect()
}

/// Every visible match of `selector`, within `scope` or the document.
pub fn visible<D: Dom>(dom: &D, scope: Option<&D::Node>, selector: &str) -> Vec<D::Node> {
    dom.query_all(scope, selector).into_iter().filter(|n| dom.visible(n)).collect()
}

/// The page does not match the locator table: typed, fail-closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiChanged {
    /// The element.
    pub element: Element,
    /// `missing`, `ambiguous (n matches)` or why the page cannot be read.
    pub detail: String,
}

impl UiChanged {
    /// Always `HOST_UI_CHANGED`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::HostUiChanged
    }
}

/// Resolves `element` to exactly one visible node. The first candidate with
/// a visible match decides: one match wins, several are ambiguous.
pub fn resolve<D: Dom>(dom: &D, element: Element) -> Result<D::Node, UiChanged> {
    let scope = match element {
        Element::ComposerForm | Element::PlusButton => None,
        Element::Editor | Element::SendButton => Some(resolve(dom, Element::ComposerForm)?),
    };
    let locator = TABLE.iter().find(|l| l.element == element).expect("every element has a locator");
    for candidate in locator.candidates {
        let mut found = visible(dom, scope.as_ref(), candidate.selector);
        if element == Element::SendButton {
            // Never a stop button, and never a button of a question to the
            // person (an approval card, even inside the form).
            found.retain(|n| !is_stop(dom, n) && !dom.within(n, NOT_SEND));
        }
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
