//! The page's coarse state, from structure, in a fixed order: page-level
//! screens (challenge, signed out, no composer), the composer (an editor,
//! or a pre-hydration fallback), **stop evidence before anything else**,
//! blocking incidents, then the turns (none: a new chat; the last one
//! failed, finished or still going).
//!
//! Readiness never depends on a send button: the real site renders none
//! while the composer is empty. Text is read only to tell incidents and
//! the deferral notice apart, through per-locale tables, and an
//! unrecognized incident is `error{unknown}`, never ignored. The page's
//! permanent live regions are evidence of nothing unless they carry one of
//! those texts.

use protocol::executor::ConversationState;

use crate::Dom;
use crate::locators::{Element, UiChanged, find, stop_buttons, supported_locale, visible};

/// Why the page is in `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incident {
    /// "Message delivery timed out" (with Retry: never clicked).
    DeliveryTimeout,
    /// The rate-limit dialog or alert.
    RateLimited,
    /// The login screen, or a composer offered to a logged-out visitor.
    SignedOut,
    /// A bot-check interstitial.
    Challenge,
    /// An error the table does not know (including "something went wrong").
    Unknown,
}

/// The classified page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageState {
    /// No composer yet, or the server-rendered page before hydration.
    Loading,
    /// A composer and no turns: a new chat.
    Ready,
    /// The assistant is producing the last turn (or has not started on it).
    Generating {
        /// The deferral notice is shown (a slow turn, not a stall).
        deferral: bool,
    },
    /// The last assistant turn finished.
    Idle,
    /// An incident.
    Error(Incident),
}

impl PageState {
    /// The state's name in reports and in the corpus (`fixtures/README.md`):
    /// `loading`, `ready`, `idle`, `generating` (`+deferral`),
    /// `delivery_timeout`, `rate_limited`, `signed_out`, `challenge`,
    /// `error_unknown`.
    pub fn name(&self) -> &'static str {
        match self {
            PageState::Loading => "loading",
            PageState::Ready => "ready",
            PageState::Idle => "idle",
            PageState::Generating { deferral: false } => "generating",
            PageState::Generating { deferral: true } => "generating+deferral",
            PageState::Error(Incident::DeliveryTimeout) => "delivery_timeout",
            PageState::Error(Incident::RateLimited) => "rate_limited",
            PageState::Error(Incident::SignedOut) => "signed_out",
            PageState::Error(Incident::Challenge) => "challenge",
            PageState::Error(Incident::Unknown) => "error_unknown",
        }
    }

    /// The executor protocol's coarse state.
    pub fn coarse(&self) -> ConversationState {
        match self {
            PageState::Loading => ConversationState::Loading,
            PageState::Ready | PageState::Idle => ConversationState::Idle,
            PageState::Generating { .. } => ConversationState::Generating,
            PageState::Error(_) => ConversationState::Error,
        }
    }
}

/// What a classification saw, for diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The state.
    pub state: PageState,
    /// Turns on the page.
    pub turns: usize,
}

/// Incident texts per locale, for telling incidents apart (never for locating).
const DELIVERY_TIMEOUT: &[&str] = &["Message delivery timed out", "メッセージ配信がタイムアウトしました"];
const RATE_LIMITED: &[&str] = &[
    "Too many requests",
    "making requests too quickly",
    "You've hit your rate limit",
    "You\u{2019}ve hit your rate limit",
];
/// The deferral notice ("Our systems are thinking a bit more…").
const DEFERRAL: &[&str] = &["thinking a bit more"];

/// Conversation turns, per generation: A's test-id turns (`article` until
/// 2025, `section` in 2026), B's turn keys. The first form present decides.
pub const TURNS: &[&str] =
    &[r#"article[data-testid^="conversation-turn-"], section[data-testid^="conversation-turn-"]"#, "[data-turn-key]"];
/// A login control (generation A's test id; the logged-out mobile surface).
const LOGIN: &str = r#"[data-testid="login-button"], button[data-login-button]"#;
const CHALLENGE: &str = "#challenge-stage, .cf-turnstile";
/// Incidents inside a turn: A's error text and Retry, B's alert.
const TURN_ERROR: &str =
    r#".text-token-text-error, button[data-testid="regenerate-thread-error-button"], [role="alert"]"#;
/// Blocking overlays outside the turns.
const BLOCKING: &str = r#"[role="dialog"], [role="alertdialog"], [role="alert"]"#;
/// Generation A: an assistant message; finished once its action bar shows Copy.
const A_ASSISTANT: &str = r#"[data-message-author-role="assistant"]"#;
const A_COPY: &str = r#"button[data-testid="copy-turn-action-button"]"#;
/// Generation B: the assistant's unit in a turn, its streaming marker, and
/// the action bars (the user's sits inside the user unit).
const B_ASSISTANT: &str = r#"[data-content-search-unit-key$=":assistant"]"#;
const B_STREAMING: &str = "[data-markdown-animated]";
const B_USER_UNIT: &str = r#"[data-content-search-unit-key$=":user"]"#;
const B_ACTIONS: &str = ".turn-action-controls";

fn contains_any(text: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| text.contains(n))
}

/// What the dialogs and alerts outside the thread say, one incident each;
/// an empty one says nothing, nor a live region without an incident's text.
fn overlay_incidents<D: Dom>(dom: &D) -> Vec<Incident> {
    visible(dom, None, BLOCKING)
        .iter()
        .filter(|overlay| !TURNS.iter().any(|t| dom.within(overlay, t)))
        .filter_map(|overlay| {
            let text = dom.text(overlay);
            if contains_any(&text, RATE_LIMITED) {
                Some(Incident::RateLimited)
            } else if contains_any(&text, DELIVERY_TIMEOUT) {
                Some(Incident::DeliveryTimeout)
            } else {
                (dom.attr(overlay, "aria-live").is_none() && !text.trim().is_empty()).then_some(Incident::Unknown)
            }
        })
        .collect()
}

/// Whether a dialog or alert stands over the page, whatever it says:
/// nothing may be typed behind it.
pub fn overlay_shown<D: Dom>(dom: &D) -> bool {
    !overlay_incidents(dom).is_empty()
}

/// The turns, in the first form the page uses. Visibility is not asked:
/// turn wrappers may be layout-less (`display: contents`) and action bars
/// may show on hover only; hidden copies are a composer matter.
pub fn turns<D: Dom>(dom: &D) -> Vec<D::Node> {
    TURNS.iter().map(|s| dom.query_all(None, s)).find(|t| !t.is_empty()).unwrap_or_default()
}

/// What the thread shows, to tell that a running turn moves on: how many
/// turns there are and how much text the last one holds. Streamed text and
/// tool-call rows ("Called tool") grow it; a spinner, an animated attribute
/// or a live region outside the turns does not, so a turn that only looks
/// busy shows no progress. Compared between readings, never stored.
pub fn turn_mark<D: Dom>(dom: &D) -> (usize, usize) {
    let turns = turns(dom);
    (turns.len(), turns.last().map_or(0, |last| dom.text(last).len()))
}

/// Classifies the page. `HOST_UI_CHANGED` when the composer's elements are
/// ambiguous, the chat lacks an editor, or a label-only page is in a locale
/// the adapter does not carry.
pub fn classify<D: Dom>(dom: &D) -> Result<Snapshot, UiChanged> {
    let turns = turns(dom);
    let snapshot = |state| Ok(Snapshot { state, turns: turns.len() });
    if !visible(dom, None, CHALLENGE).is_empty() {
        return snapshot(PageState::Error(Incident::Challenge));
    }
    // A login control beside a composer is a logged-out chat: not ours to use.
    if !visible(dom, None, LOGIN).is_empty() {
        return snapshot(PageState::Error(Incident::SignedOut));
    }
    let Some(form) = find(dom, Element::ComposerForm)? else {
        return snapshot(PageState::Loading);
    };
    if find(dom, Element::Editor)?.is_none() {
        // Server-rendered, not yet hydrated: the fallback textarea shows and
        // no editor exists. Once hydrated, that textarea is hidden.
        if !visible(dom, Some(&form), "textarea").is_empty() {
            return snapshot(PageState::Loading);
        }
        return Err(UiChanged { element: Element::Editor, detail: "missing".into() });
    }
    // Generation B tells stop from send by label alone: fail closed on a locale we cannot read.
    let lang = dom.query_all(None, "html").first().and_then(|h| dom.attr(h, "lang"));
    let label_only = dom.attr(&form, "data-chatgpt-composer").is_some();
    if label_only && !supported_locale(lang.as_deref()) {
        return Err(UiChanged {
            element: Element::ComposerForm,
            detail: format!("unsupported locale {:?}: its stop label is unknown", lang.unwrap_or_default()),
        });
    }
    let deferral = || visible(dom, None, r#"[role="status"]"#).iter().any(|n| contains_any(&dom.text(n), DEFERRAL));
    if !stop_buttons(dom).is_empty() {
        return snapshot(PageState::Generating { deferral: deferral() });
    }
    // Overlays: a rate limit wins over whatever else is shown beside it.
    let overlays = overlay_incidents(dom);
    if let Some(incident) = overlays.iter().find(|i| **i == Incident::RateLimited).or(overlays.first()) {
        return snapshot(PageState::Error(*incident));
    }
    let Some(last) = turns.last() else { return snapshot(PageState::Ready) };
    let errors = dom.query_all(Some(last), TURN_ERROR);
    if !errors.is_empty() {
        let text: String = errors.iter().map(|n| dom.text(n)).collect();
        return snapshot(PageState::Error(if contains_any(&text, DELIVERY_TIMEOUT) {
            Incident::DeliveryTimeout
        } else {
            Incident::Unknown
        }));
    }
    if finished(dom, last) {
        snapshot(PageState::Idle)
    } else {
        snapshot(PageState::Generating { deferral: deferral() })
    }
}

/// Whether `turn` is a finished assistant turn: A's message with its Copy
/// button; B's assistant unit, no longer streaming, with an action bar of
/// its own (outside the user unit).
fn finished<D: Dom>(dom: &D, turn: &D::Node) -> bool {
    if !dom.query_all(Some(turn), A_ASSISTANT).is_empty() {
        return !dom.query_all(Some(turn), A_COPY).is_empty();
    }
    if dom.query_all(Some(turn), B_ASSISTANT).is_empty() || !dom.query_all(Some(turn), B_STREAMING).is_empty() {
        return false;
    }
    dom.query_all(Some(turn), B_ACTIONS).iter().any(|bar| !dom.within(bar, B_USER_UNIT))
}

/// The page's reading in one word: [`PageState::name`], or `ui_changed`
/// when the adapter refuses the page (`HOST_UI_CHANGED`).
pub fn reading<D: Dom>(dom: &D) -> &'static str {
    classify(dom).map_or("ui_changed", |s| s.state.name())
}
