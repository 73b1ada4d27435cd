//! Composer operations: put a prompt into the editor and press the page's
//! own send button, once, and tell afterwards whether the page took it.
//!
//! Fail closed at every step: a page that is not idle, an editor that
//! already holds a draft, text that did not land verbatim, or a send button
//! that stays disabled is refused *before* anything is clicked, so a refusal
//! never leaves a half-submitted prompt behind.

use protocol::ErrorCode;

use crate::Dom;
use crate::classify::{Incident, PageState, classify};
use crate::locators::{Element, resolve};

/// The few effects a carrier performs on the page, on top of reading it.
pub trait Act: Dom {
    /// Focuses `editor` and inserts `text` the way typing would (so the
    /// page's editor framework sees input events). Returns whether the
    /// browser accepted the insertion.
    fn insert_text(&self, editor: &Self::Node, text: &str) -> bool;
    /// Clicks `node`.
    fn click(&self, node: &Self::Node);
    /// Empties `editor` the way deleting would.
    fn clear(&self, editor: &Self::Node);
}

/// Why a prompt was not submitted. Nothing was clicked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The typed code for the command result.
    pub code: ErrorCode,
    /// Detail, without page content.
    pub detail: String,
}

impl Refusal {
    fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Refusal { code, detail: detail.into() }
    }
}

/// Evidence from before the click, to confirm the submission with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pressed {
    /// Turns on the page before the click.
    pub turns_before: usize,
}

/// Whether the page can take a prompt now: `Ok(true)` when idle or a new
/// chat, `Ok(false)` while loading or generating (wait for a mutation),
/// `Err` on an incident or a changed UI.
pub fn ready<D: Dom>(dom: &D) -> Result<bool, Refusal> {
    let snapshot = classify(dom).map_err(|e| Refusal::new(e.code(), format!("{:?}: {}", e.element, e.detail)))?;
    match snapshot.state {
        PageState::Ready | PageState::Idle => Ok(true),
        PageState::Loading | PageState::Generating { .. } => Ok(false),
        PageState::Error(incident) => Err(Refusal::new(incident_code(incident), format!("{incident:?}"))),
    }
}

/// The command-level code for a page incident.
pub fn incident_code(incident: Incident) -> ErrorCode {
    match incident {
        Incident::DeliveryTimeout => ErrorCode::DeliveryTimeout,
        Incident::RateLimited => ErrorCode::RateLimited,
        Incident::SignedOut => ErrorCode::ChatgptSignedOut,
        Incident::Challenge | Incident::Unknown => ErrorCode::HostUiChanged,
    }
}

/// Editor text compared the way the page will read it: whitespace-insensitive
/// at the ends and between lines (editors turn newlines into paragraphs).
fn normalized(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Inserts `prompt` and clicks send, exactly once. Call only when [`ready`]
/// said `Ok(true)`; it is checked again here.
pub fn submit<D: Act>(dom: &D, prompt: &str) -> Result<Pressed, Refusal> {
    submit_with(dom, prompt, None)
}

/// Like [`submit`], and the app labelled `app` must still be selected once
/// the prompt is in, right before the click (typing must not have removed
/// its pill); otherwise the prompt is cleared and nothing is clicked.
pub fn submit_bound<D: Act>(dom: &D, prompt: &str, app: &str) -> Result<Pressed, Refusal> {
    submit_with(dom, prompt, Some(app))
}

fn submit_with<D: Act>(dom: &D, prompt: &str, app: Option<&str>) -> Result<Pressed, Refusal> {
    if normalized(prompt).is_empty() {
        return Err(Refusal::new(ErrorCode::InvalidArgument, "empty prompt"));
    }
    if !ready(dom)? {
        return Err(Refusal::new(ErrorCode::Conflict, "the page is busy"));
    }
    let turns_before = crate::classify::turns(dom).len();
    let ui = |e: crate::UiChanged| Refusal::new(e.code(), format!("{:?}: {}", e.element, e.detail));
    let editor = resolve(dom, Element::Editor).map_err(ui)?;
    if !normalized(&dom.text(&editor)).is_empty() {
        return Err(Refusal::new(ErrorCode::Conflict, "the composer holds a draft; not overwriting it"));
    }
    if !dom.insert_text(&editor, prompt) || normalized(&dom.text(&editor)) != normalized(prompt) {
        return Err(Refusal::new(ErrorCode::HostUiChanged, "the editor did not take the prompt verbatim"));
    }
    // From here on every refusal empties the editor again: nothing is left half-done.
    let refuse = |refusal: Refusal| {
        dom.clear(&editor);
        Err(refusal)
    };
    if let Some(label) = app
        && crate::bind::selected(dom, label) != crate::bind::Selected::Bound
    {
        return refuse(Refusal::new(ErrorCode::HostAppBindingNotReady, "the app's pill is gone; not sending unbound"));
    }
    // The send button exists only now that the editor holds text. Stop
    // evidence anywhere means the page is not ours to submit into.
    if !crate::locators::stop_buttons(dom).is_empty() {
        return refuse(Refusal::new(ErrorCode::Conflict, "a stop button appeared; the page is busy"));
    }
    let send = match resolve(dom, Element::SendButton) {
        Ok(send) => send,
        Err(e) => return refuse(ui(e)),
    };
    if dom.attr(&send, "disabled").is_some() || dom.attr(&send, "aria-disabled").as_deref() == Some("true") {
        return refuse(Refusal::new(ErrorCode::HostUiChanged, "the send button stayed disabled"));
    }
    dom.click(&send);
    Ok(Pressed { turns_before })
}

/// Whether the page shows that it took the prompt: a new turn, or the
/// editor emptied.
pub fn confirmed<D: Dom>(dom: &D, pressed: Pressed) -> bool {
    if crate::classify::turns(dom).len() > pressed.turns_before {
        return true;
    }
    resolve(dom, Element::Editor).is_ok_and(|editor| normalized(&dom.text(&editor)).is_empty())
}
