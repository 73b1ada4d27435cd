//! The page's coarse state, from structure: turn-finished evidence (the copy
//! button), the stop button, the error element and Retry button inside the
//! last turn, and page-level screens. Text is read only to tell incidents
//! apart, through a per-locale table, and an unrecognized incident is
//! `error{unknown}`, never ignored. The deferral notice ("thinking a bit
//! more") renders outside the turn and is not a stall.

use protocol::executor::ConversationState;

use crate::Dom;
use crate::locators::{Element, UiChanged, find};

/// Why the page is in `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incident {
    /// "Message delivery timed out" (with Retry: never clicked).
    DeliveryTimeout,
    /// The rate-limit dialog.
    RateLimited,
    /// The login screen.
    SignedOut,
    /// A bot-check interstitial.
    Challenge,
    /// An error the table does not know (including "something went wrong").
    Unknown,
}

/// The classified page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageState {
    /// No composer yet.
    Loading,
    /// A composer and no turns: a new chat.
    Ready,
    /// The assistant is producing the last turn.
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
const DELIVERY_TIMEOUT: &[&str] = &["Message delivery timed out", "Zeitüberschreitung bei der Nachrichtenzustellung"];
const RATE_LIMITED: &[&str] = &["Too many requests", "making requests too quickly", "Zu viele Anfragen"];

/// A conversation turn.
pub(crate) const TURN: &str = r#"article[data-testid^="conversation-turn-"]"#;
const ASSISTANT: &str = r#"[data-message-author-role="assistant"]"#;
const COPY: &str = r#"button[data-testid="copy-turn-action-button"]"#;
const RETRY: &str = r#"button[data-testid="regenerate-thread-error-button"]"#;
const ERROR_TEXT: &str = ".text-token-text-error";

fn contains_any(text: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| text.contains(n))
}

/// Classifies the page. `HOST_UI_CHANGED` when the composer's elements are
/// ambiguous or the chat lacks an editor.
pub fn classify<D: Dom>(dom: &D) -> Result<Snapshot, UiChanged> {
    let turns = dom.query_all(None, TURN);
    let snapshot = |state| Ok(Snapshot { state, turns: turns.len() });
    if !dom.query_all(None, "#challenge-stage, .cf-turnstile").is_empty() {
        return snapshot(PageState::Error(Incident::Challenge));
    }
    let form = find(dom, Element::ComposerForm)?;
    if form.is_none() {
        if !dom.query_all(None, r#"[data-testid="login-button"]"#).is_empty() {
            return snapshot(PageState::Error(Incident::SignedOut));
        }
        return snapshot(PageState::Loading);
    }
    // A chat page must have exactly one editor; anything else is a changed UI.
    crate::locators::resolve(dom, Element::Editor)?;
    let send = find(dom, Element::SendButton)?;
    let stop = find(dom, Element::StopButton)?;
    if send.is_none() && stop.is_none() {
        return Err(UiChanged { element: Element::SendButton, detail: "missing".into() });
    }
    // A modal dialog blocks the composer: a rate limit if its text says so, else unknown.
    let dialogs = dom.query_all(None, r#"[role="dialog"]"#);
    if !dialogs.is_empty() {
        let limited = dialogs.iter().any(|d| contains_any(&dom.text(d), RATE_LIMITED));
        return snapshot(PageState::Error(if limited { Incident::RateLimited } else { Incident::Unknown }));
    }
    let Some(last) = turns.last() else { return snapshot(PageState::Ready) };
    let last_is_assistant = !dom.query_all(Some(last), ASSISTANT).is_empty();
    if !dom.query_all(Some(last), RETRY).is_empty() || !dom.query_all(Some(last), ERROR_TEXT).is_empty() {
        let text = dom.query_all(Some(last), ERROR_TEXT).iter().map(|n| dom.text(n)).collect::<String>();
        return snapshot(PageState::Error(if contains_any(&text, DELIVERY_TIMEOUT) {
            Incident::DeliveryTimeout
        } else {
            Incident::Unknown
        }));
    }
    let finished = last_is_assistant && !dom.query_all(Some(last), COPY).is_empty();
    if stop.is_some() || !finished {
        // The deferral notice is a status outside every turn.
        let deferral = dom.query_all(None, r#"[role="status"]"#).iter().any(|n| !dom.within(n, TURN));
        return snapshot(PageState::Generating { deferral });
    }
    snapshot(PageState::Idle)
}
