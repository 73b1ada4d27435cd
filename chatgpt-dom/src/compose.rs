//! Composer operations: put a prompt into the editor, wait for the page to
//! show its send button for it, press it once, and tell afterwards whether
//! the page took it.
//!
//! Fail closed at every step: a page that is not idle, a composer that
//! already holds a person's draft (typed text or an attachment), text that
//! did not land verbatim, or a send button that stays disabled is refused
//! *before* anything is clicked, so a refusal never leaves a half-submitted
//! prompt behind.

use protocol::ErrorCode;
use protocol::executor::ConversationState;

use crate::Dom;
use crate::classify::{Incident, PageState, classify};
use crate::locators::{Element, resolve};

/// The few effects a carrier performs on the page, on top of reading it.
pub trait Act: Dom {
    /// Focuses `editor` and inserts `text` the way typing would (so the
    /// page's editor framework sees input events), replacing everything in
    /// it except an app mention ([`crate::bind::ATOMS`]) and the space after
    /// it: the text goes after the mention, which is the app binding.
    /// Returns whether the browser accepted the insertion.
    fn insert_text(&self, editor: &Self::Node, text: &str) -> bool;
    /// Clicks `node`.
    fn click(&self, node: &Self::Node);
    /// Empties `editor` the way deleting would, keeping an app mention (as
    /// [`Act::insert_text`] does).
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
/// `Err` on an incident or a changed UI. "Message delivery timed out" sits
/// inside the last assistant turn with the composer below it still usable
/// (CHATGPT-DOM.md, "Incidents and dialogs"; corpus fixture
/// `a-2026-06-error-delivery-timeout`, whose source describes the structure
/// but keeps no HTML capture): a new user turn is its answer, never a click
/// on its Retry button.
pub fn ready<D: Dom>(dom: &D) -> Result<bool, Refusal> {
    let snapshot = classify(dom).map_err(|e| Refusal::new(e.code(), format!("{:?}: {}", e.element, e.detail)))?;
    match snapshot.state {
        PageState::Ready | PageState::Idle => Ok(true),
        // Only the in-turn notice: the same words in a dialog stand over the page.
        PageState::Error(Incident::DeliveryTimeout) if !crate::classify::overlay_shown(dom) => Ok(true),
        PageState::Loading | PageState::Generating { .. } | PageState::Unsettled => Ok(false),
        PageState::Error(incident) => Err(Refusal::new(incident_code(incident), format!("{incident:?}"))),
    }
}

/// What a carrier reports of the page: its coarse state, and why it takes
/// no prompt when that is an incident, a changed UI or **a person's draft**
/// (an idle page whose composer holds their text or attachment reads as
/// `error` with `COMPOSER_HAS_DRAFT`, so the daemon holds its sends until
/// they send or remove it). `typing`: the carrier is putting its own prompt
/// in right now, so typed text is not read as a person's (an attachment
/// always is).
pub fn observed<D: Dom>(dom: &D, typing: bool) -> (ConversationState, Option<ErrorCode>) {
    let state = match classify(dom) {
        Ok(snapshot) => snapshot.state,
        Err(changed) => return (ConversationState::Error, Some(changed.code())),
    };
    match state {
        PageState::Error(incident) => (ConversationState::Error, Some(incident_code(incident))),
        PageState::Ready | PageState::Idle => match person_draft(dom) {
            Ok(Some(Draft::Attachment)) => (ConversationState::Error, Some(ErrorCode::ComposerHasDraft)),
            Ok(Some(Draft::Typed)) if !typing => (ConversationState::Error, Some(ErrorCode::ComposerHasDraft)),
            Ok(_) => (state.coarse(), None),
            Err(changed) => (ConversationState::Error, Some(changed.code())),
        },
        state => (state.coarse(), None),
    }
}

/// The code [`Incident::ApprovalRequired`] is reported with: a person's
/// question in that chat, not a changed UI (nothing pauses the worker; it
/// waits for the person, and the card is never clicked).
pub const APPROVAL_REQUIRED_CODE: ErrorCode = ErrorCode::ToolApprovalRequired;

/// The command-level code for a page incident.
pub fn incident_code(incident: Incident) -> ErrorCode {
    match incident {
        Incident::DeliveryTimeout => ErrorCode::DeliveryTimeout,
        Incident::RateLimited => ErrorCode::RateLimited,
        Incident::SignedOut => ErrorCode::ChatgptSignedOut,
        Incident::ApprovalRequired => APPROVAL_REQUIRED_CODE,
        Incident::ConversationTooLong => ErrorCode::ConversationTooLong,
        Incident::Challenge => ErrorCode::ChatgptChallenge,
        Incident::NotConversation => ErrorCode::NotConversationPage,
        Incident::Unknown => ErrorCode::HostUiChanged,
    }
}

/// Editor text compared the way the page will read it: whitespace-insensitive
/// at the ends and between lines (editors turn newlines into paragraphs).
fn normalized(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A person's draft in `editor`, normalized: its text without the app
/// mentions and pills it may hold ([`crate::bind::ATOMS`]), which are the
/// binding, not a draft (2026-09: the mention is the editor's first node).
pub fn draft<D: Dom>(dom: &D, editor: &D::Node) -> String {
    let mut text = dom.text(editor);
    for atom in dom.query_all(Some(editor), crate::bind::ATOMS) {
        let shown = dom.text(&atom);
        if let Some(at) = text.find(shown.as_str()).filter(|_| !shown.is_empty()) {
            text.replace_range(at..at + shown.len(), " ");
        }
    }
    normalized(&text.replace('\u{feff}', ""))
}

/// What of a person's a composer holds. Either makes the composer theirs:
/// nothing is typed beside it, and nothing is sent with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draft {
    /// A file, an image or a pasted block ([`crate::attachments`]).
    Attachment,
    /// Text they typed ([`draft`]).
    Typed,
}

impl Draft {
    /// How refusals name it.
    pub fn words(self) -> &'static str {
        match self {
            Draft::Attachment => "attachment",
            Draft::Typed => "typed draft",
        }
    }
}

/// The person's draft in the composer, if any (an attachment first).
pub fn person_draft<D: Dom>(dom: &D) -> Result<Option<Draft>, crate::UiChanged> {
    let form = resolve(dom, Element::ComposerForm)?;
    if crate::attachments::shown(dom, &form) {
        return Ok(Some(Draft::Attachment));
    }
    let editor = resolve(dom, Element::Editor)?;
    Ok((!draft(dom, &editor).is_empty()).then_some(Draft::Typed))
}

/// The refusal for a composer holding a person's draft.
pub fn draft_refusal(what: Draft) -> Refusal {
    let words = what.words();
    Refusal::new(ErrorCode::ComposerHasDraft, format!("the composer holds a person's {words}; nothing typed or sent"))
}

/// Whether the tab may be closed to free capacity (it is reopened on its
/// exact conversation later): only an idle conversation (or an empty new
/// chat) with nothing in the composer. A draft, a running or unsettled turn, an incident or a
/// person's question keeps it open (`TAB_IN_USE`); a changed UI refuses as
/// such. Read-only.
pub fn parkable<D: Dom>(dom: &D) -> Result<(), Refusal> {
    let snapshot = classify(dom).map_err(|e| Refusal::new(e.code(), format!("{:?}: {}", e.element, e.detail)))?;
    if !matches!(snapshot.state, PageState::Idle | PageState::Ready) {
        let reading = crate::classify::reading(dom);
        return Err(Refusal::new(ErrorCode::TabInUse, format!("the page is not idle ({reading})")));
    }
    if let Some(what) = person_draft(dom).map_err(ui)? {
        return Err(Refusal::new(ErrorCode::TabInUse, format!("the composer holds a person's {}", what.words())));
    }
    Ok(())
}

/// A prompt typed into the empty editor and not sent yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Typed {
    /// Turns on the page before the prompt went in.
    turns_before: usize,
}

/// Step one: checks that the page can take a prompt, and types `prompt`
/// into the empty editor. Nothing is clicked. The real site renders the send
/// button only *after* it has seen the text (its editor observes the input,
/// then its frontend re-renders the slot), so the click is a second step.
pub fn type_prompt<D: Act>(dom: &D, prompt: &str) -> Result<Typed, Refusal> {
    if normalized(prompt).is_empty() {
        return Err(Refusal::new(ErrorCode::InvalidArgument, "empty prompt"));
    }
    if !ready(dom)? {
        return Err(busy(dom));
    }
    let turns_before = crate::classify::turns(dom).len();
    if let Some(what) = person_draft(dom).map_err(ui)? {
        return Err(draft_refusal(what));
    }
    let editor = resolve(dom, Element::Editor).map_err(ui)?;
    if !dom.insert_text(&editor, prompt) || draft(dom, &editor) != normalized(prompt) {
        return Err(Refusal::new(ErrorCode::HostUiChanged, "the editor did not take the prompt verbatim"));
    }
    Ok(Typed { turns_before })
}

/// The refusal for a page that cannot take a prompt yet, naming its reading.
fn busy<D: Dom>(dom: &D) -> Refusal {
    Refusal::new(ErrorCode::Conflict, format!("the page is busy ({})", crate::classify::reading(dom)))
}

fn ui(e: crate::UiChanged) -> Refusal {
    Refusal::new(e.code(), format!("{:?}: {}", e.element, e.detail))
}

/// Step two: clicks the send button the page now shows for the typed text,
/// once. `Ok(None)`: no usable send button yet — wait for the page's next
/// change and call again (or [`abandon`] at the deadline). Checked right
/// before the click: the app's pill (when `app` is set), and that the page
/// still takes a prompt ([`ready`]: no stop button, no busy notice, no
/// approval card or other incident appeared); any refusal empties the
/// editor first.
pub fn press_send<D: Act>(dom: &D, typed: Typed, app: Option<&str>) -> Result<Option<Pressed>, Refusal> {
    let refuse = |refusal: Refusal| {
        clear_editor(dom);
        Err(refusal)
    };
    if let Some(label) = app
        && crate::bind::selected(dom, label) != crate::bind::Selected::Bound
    {
        return refuse(Refusal::new(ErrorCode::HostAppBindingNotReady, "the app's pill is gone; not sending unbound"));
    }
    match ready(dom) {
        Ok(true) => {}
        Ok(false) => return refuse(busy(dom)),
        Err(refusal) => return refuse(refusal),
    }
    // A person may attach something while the prompt waits for its send
    // button: it would go out with the prompt.
    match resolve(dom, Element::ComposerForm) {
        Ok(form) if crate::attachments::shown(dom, &form) => return refuse(draft_refusal(Draft::Attachment)),
        Ok(_) => {}
        Err(e) => return refuse(ui(e)),
    }
    let send = match crate::locators::find(dom, Element::SendButton) {
        Ok(Some(send)) => send,
        Ok(None) => return Ok(None),
        Err(e) => return refuse(ui(e)),
    };
    if dom.attr(&send, "disabled").is_some() || dom.attr(&send, "aria-disabled").as_deref() == Some("true") {
        return Ok(None);
    }
    dom.click(&send);
    Ok(Some(Pressed { turns_before: typed.turns_before }))
}

/// Gives up on a typed prompt (no send button came): empties the editor and
/// returns the refusal to report. Nothing was clicked.
pub fn abandon<D: Act>(dom: &D) -> Refusal {
    clear_editor(dom);
    Refusal::new(ErrorCode::HostUiChanged, "no send button appeared for the typed prompt")
}

fn clear_editor<D: Act>(dom: &D) {
    if let Ok(editor) = resolve(dom, Element::Editor) {
        dom.clear(&editor);
    }
}

/// Types `prompt` and clicks send exactly once, waiting (bounded by
/// [`crate::bind::STEP_MS`]) for the page to render its send button. With
/// `app`, the app labelled so must still be selected right before the
/// click. Every refusal happens before any click and leaves the editor empty.
pub async fn submit<D: Act, W: crate::bind::Wait>(
    dom: &D,
    prompt: &str,
    app: Option<&str>,
    wait: &W,
) -> Result<Pressed, Refusal> {
    let typed = type_prompt(dom, prompt)?;
    let end = wait.now_ms() + crate::bind::STEP_MS;
    loop {
        if let Some(pressed) = press_send(dom, typed, app)? {
            return Ok(pressed);
        }
        if wait.now_ms() >= end || !wait.change(end).await {
            return match press_send(dom, typed, app)? {
                Some(pressed) => Ok(pressed),
                None => Err(abandon(dom)),
            };
        }
    }
}

/// Whether the page shows that it took the prompt: a new turn, or the
/// editor emptied.
pub fn confirmed<D: Dom>(dom: &D, pressed: Pressed) -> bool {
    if crate::classify::turns(dom).len() > pressed.turns_before {
        return true;
    }
    resolve(dom, Element::Editor).is_ok_and(|editor| draft(dom, &editor).is_empty())
}
