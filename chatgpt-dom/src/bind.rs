//! Binding a conversation to the orchestrator's app (a developer-mode
//! connector) before its bootstrap: a conversation reaches an app's tools
//! only once the app is selected in it, or inherited from its Project.
//!
//! Routes, in order: already bound (the Project's app, or an earlier pick)
//! → the `@` mention popover → `+` → More → Developer mode. Each pick is
//! verified by the pill it leaves. Only a row whose title is exactly the
//! configured label is ever clicked: a similar name, two rows with the
//! label, a disabled or a stale app are refused with the typed host/setup
//! state, and the editor is left empty as found.

use protocol::ErrorCode;

use crate::Dom;
use crate::compose::{Act, Refusal};
use crate::locators::{Element, resolve};

/// App pills by structure: generation A's selection pill with a plugin id
/// (as `data-id` or `data-system-hint-type`), and the app mention, which
/// since 2026-09 sits inside the editor as the first node of its paragraph
/// (`span[contenteditable="false"][app-mention-path="app://…"]
/// [app-mention-display-name]`, its text the app's name, then a space;
/// public code that drives the live site: `miuuyy/codex-chatgpt-web`
/// `src/chatgpt-session.ts`, and a userscript that validates that exact
/// paragraph). Some code reads it without the path: the display name alone
/// marks it. Each with the attribute that holds the app's name.
const PILLS: &[(&str, &str)] = &[
    (r#"[data-inline-selection-pill][data-keyword][data-id^="plugin:"]"#, "data-keyword"),
    (r#"[data-inline-selection-pill][data-keyword][data-system-hint-type^="plugin:"]:not([data-id])"#, "data-keyword"),
    ("[app-mention-display-name]", "app-mention-display-name"),
];

/// What an editor may hold that is not a person's draft: app pills (a
/// plugin id, or the app mention) and generation A's zero-width cursor
/// target beside its pill. The same public code removes exactly these
/// before reading the draft. A tool pill ("Search") or anything else a
/// person put there stays a draft.
pub const ATOMS: &str = r#"[data-inline-selection-pill][data-id^="plugin:"], [data-inline-selection-pill][data-system-hint-type^="plugin:"], [app-mention-display-name], [data-inline-selection-pill-cursor-target]"#;

/// The redesign's app chip has nothing but its remove control's label:
/// "Remove <App>" (en, 2026-09 map), "移除 <App>" (zh-CN). Attachment chips
/// use the same label form and never count; any other chip reads as
/// another selection (fail closed). Generation A's "<x>, click to remove"
/// labels are not read: non-app pills ("Extended thinking") use them too,
/// and A's app pills carry a plugin id.
const REMOVE_PREFIXES: &[&str] = &["Remove ", "移除 "];
const CHIPS: &str = "form[data-chatgpt-composer] button[aria-label]";
const ATTACHMENTS: &str = r#"[data-composer-attachments], [class~="group/composer-attachment"]"#;

/// App rows: the `+` menu's plugin rows.
const PLUGIN_ROWS: &str = r#"[data-composer-plugin-impression-id^="plugin:"]"#;

/// List rows: the mention popover's and the redesign's "add context" list's.
/// They count inside a [`LISTS`] scroll area, or anywhere when they carry
/// the redesign's row content (`button[data-list-navigation-item="true"] >
/// [data-menu-row-content] > span > span` = the title, then a description;
/// 2026-09 public tests of code that drives the live site render them
/// without a scroll area around them).
const LIST_ROWS: &str = r#"[data-list-navigation-item="true"]"#;
const ROW_CONTENT: &str = "[data-menu-row-content]";

/// Open lists that hold app rows.
const LISTS: &str = "[data-mention-list-scroll-area]";

/// The `+` menu rows leading to the developer-mode app list. Their ids are
/// an assumption (the evidence names the path, not the ids).
const NAV_MORE: &str = r#"[data-composer-plugin-impression-id="more"]"#;
const NAV_DEVELOPER_MODE: &str = r#"[data-composer-plugin-impression-id="developer_mode"]"#;

/// A stale app's marker in a row (an assumption, see fakechat's README).
const STALE: &str = r#"[data-app-status="needs-refresh"]"#;

/// How the binding was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// It was bound already: inherited from the Project, or picked earlier.
    Already,
    /// Picked in the `@` mention popover.
    Mention,
    /// Picked through the `+` menu.
    PlusMenu,
}

/// The conversation's app selection as the composer shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selected {
    /// No app pill.
    None,
    /// Exactly the app labelled as configured.
    Bound,
    /// Another app (or several).
    Other(Vec<String>),
}

/// Labels of the app pills in the composer (visible ones; two pills with
/// one label are two selections, never one).
pub fn pills<D: Dom>(dom: &D) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |label: String| out.push(label.trim().to_owned());
    // The composer's own: a mention in a sent message is not a selection.
    let composer = resolve(dom, Element::ComposerForm).ok();
    for (selector, attribute) in PILLS {
        for node in crate::locators::visible(dom, composer.as_ref(), selector) {
            add(dom.attr(&node, attribute).unwrap_or_default());
        }
    }
    for chip in crate::locators::visible(dom, None, CHIPS) {
        let label = dom.attr(&chip, "aria-label").unwrap_or_default();
        if let Some(app) = REMOVE_PREFIXES.iter().find_map(|p| label.strip_prefix(p))
            && !dom.within(&chip, ATTACHMENTS)
        {
            add(app.to_owned());
        }
    }
    out
}

/// Whether the composer shows exactly the app labelled `label` selected.
pub fn selected<D: Dom>(dom: &D, label: &str) -> Selected {
    let pills = pills(dom);
    match pills.as_slice() {
        [] => Selected::None,
        [one] if one == label => Selected::Bound,
        _ => Selected::Other(pills),
    }
}

/// What the open list offers for `label`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offer<N> {
    /// Exactly one usable row with that title.
    Pick(N),
    /// The row is disabled.
    Disabled,
    /// The row is marked as needing a refresh.
    Stale,
    /// Several rows carry that exact title.
    Ambiguous(usize),
    /// App rows are open, none with that exact title.
    Absent,
    /// No app rows are open.
    Closed,
}

/// A row's title: the first non-empty innermost span of its row content,
/// else its first span, else its text.
fn title<D: Dom>(dom: &D, row: &D::Node) -> String {
    if let Some(content) = dom.query_all(Some(row), ROW_CONTENT).first() {
        let leaf = dom
            .query_all(Some(content), "span")
            .into_iter()
            .filter(|span| dom.query_all(Some(span), "span").is_empty())
            .map(|span| dom.text(&span).trim().to_owned())
            .find(|text| !text.is_empty());
        if let Some(leaf) = leaf {
            return leaf;
        }
    }
    let text = match dom.query_all(Some(row), "span").first() {
        Some(span) => dom.text(span),
        None => dom.text(row),
    };
    text.trim().to_owned()
}

/// Every visible app or list row on the page.
fn rows<D: Dom>(dom: &D) -> Vec<D::Node> {
    let listed = dom
        .query_all(None, LIST_ROWS)
        .into_iter()
        .filter(|row| dom.within(row, LISTS) || !dom.query_all(Some(row), ROW_CONTENT).is_empty());
    dom.query_all(None, PLUGIN_ROWS).into_iter().chain(listed).filter(|row| dom.visible(row)).collect()
}

/// The open app list's offer for `label` (exact, case-sensitive title).
pub fn offer<D: Dom>(dom: &D, label: &str) -> Offer<D::Node> {
    let rows = rows(dom);
    if rows.is_empty() {
        // An open list with nothing in it is an answer too.
        let open = !dom.query_all(None, LISTS).is_empty();
        return if open { Offer::Absent } else { Offer::Closed };
    }
    let mut exact: Vec<D::Node> = rows.into_iter().filter(|r| title(dom, r) == label).collect();
    match exact.len() {
        0 => Offer::Absent,
        1 => {
            let row = exact.remove(0);
            if dom.attr(&row, "aria-disabled").as_deref() == Some("true") || dom.attr(&row, "disabled").is_some() {
                Offer::Disabled
            } else if !dom.query_all(Some(&row), STALE).is_empty() {
                Offer::Stale
            } else {
                Offer::Pick(row)
            }
        }
        n => Offer::Ambiguous(n),
    }
}

/// Waiting for the page, on the carrier's clock.
pub trait Wait {
    /// Now, in milliseconds.
    fn now_ms(&self) -> u64;
    /// Resolves after the page's next change, or at `until_ms`; false once
    /// the whole operation's deadline has passed.
    #[allow(async_fn_in_trait)]
    async fn change(&self, until_ms: u64) -> bool;
}

/// How long one step may wait for the page to answer a click or keystroke.
pub const STEP_MS: u64 = 5_000;

fn refuse(code: ErrorCode, detail: String) -> Refusal {
    Refusal { code, detail }
}

/// Waits until `done` holds, for at most [`STEP_MS`].
pub(crate) async fn until<D: Dom, W: Wait>(dom: &D, wait: &W, done: impl Fn(&D) -> bool) -> bool {
    let end = wait.now_ms() + STEP_MS;
    loop {
        if done(dom) {
            return true;
        }
        if wait.now_ms() >= end || !wait.change(end).await {
            return done(dom);
        }
    }
}

/// What an offer means once a list is open: pick it, refuse, or look further.
fn settle<N>(offer: Offer<N>, label: &str) -> Result<Option<N>, Refusal> {
    match offer {
        Offer::Pick(row) => Ok(Some(row)),
        Offer::Disabled => Err(refuse(ErrorCode::HostAppDisabled, format!("the app \"{label}\" is disabled"))),
        Offer::Stale => Err(refuse(ErrorCode::HostAppStale, format!("the app \"{label}\" needs a refresh"))),
        Offer::Ambiguous(n) => {
            Err(refuse(ErrorCode::HostAppBindingNotReady, format!("{n} apps are labelled \"{label}\"; not guessing")))
        }
        Offer::Absent | Offer::Closed => Ok(None),
    }
}

/// Binds the conversation shown to the app labelled `label`, or refuses with
/// a host/setup state. Nothing is submitted here; the editor is left empty.
pub async fn bind<D: Act, W: Wait>(dom: &D, label: &str, wait: &W) -> Result<Route, Refusal> {
    let ui = |e: crate::UiChanged| refuse(e.code(), format!("{:?}: {}", e.element, e.detail));
    match selected(dom, label) {
        Selected::Bound => return Ok(Route::Already),
        Selected::Other(labels) => {
            return Err(refuse(
                ErrorCode::HostAppBindingNotReady,
                format!("another app is selected in this conversation ({})", labels.join(", ")),
            ));
        }
        Selected::None => {}
    }
    // A question to the person stands: nothing is typed or clicked until it is answered.
    if crate::classify::approval_waiting(dom) {
        return Err(refuse(
            crate::compose::incident_code(crate::Incident::ApprovalRequired),
            "ChatGPT waits for the person to answer a tool-approval card".into(),
        ));
    }
    if let Some(what) = crate::compose::person_draft(dom).map_err(ui)? {
        return Err(crate::compose::draft_refusal(what));
    }
    let editor = resolve(dom, Element::Editor).map_err(ui)?;
    // The mention popover. Several rows with the label may include other
    // kinds of items (GPTs, files): the `+` menu lists apps only, so look there.
    if dom.insert_text(&editor, &format!("@{label}")) {
        until(dom, wait, |d| !matches!(offer(d, label), Offer::Closed)).await;
        let picked = match offer(dom, label) {
            Offer::Ambiguous(_) => Ok(None),
            offer => settle(offer, label),
        };
        if let Ok(Some(row)) = &picked {
            dom.click(row);
            let bound = until(dom, wait, |d| selected(d, label) == Selected::Bound).await;
            clear_editor(dom);
            // Verified after the leftover query text is gone: clearing
            // keeps an app mention in the editor, so losing it is a change.
            return match (bound, selected(dom, label)) {
                (true, Selected::Bound) => Ok(Route::Mention),
                _ => Err(refuse(ErrorCode::HostUiChanged, "the app was picked but its pill did not stay".into())),
            };
        }
        clear_editor(dom);
        picked?;
    }
    // The `+` menu: app rows, else More, else Developer mode.
    let plus = resolve(dom, Element::PlusButton).map_err(ui)?;
    dom.click(&plus);
    let mut followed = Vec::new();
    loop {
        // Absence is an answer only once the page has had its time to open the list.
        let decided = |d: &D| !matches!(offer(d, label), Offer::Closed | Offer::Absent) || nav(d, &followed).is_some();
        until(dom, wait, decided).await;
        match settle(offer(dom, label), label) {
            Ok(Some(row)) => {
                dom.click(&row);
                if until(dom, wait, |d| selected(d, label) == Selected::Bound).await {
                    return Ok(Route::PlusMenu);
                }
                return Err(refuse(ErrorCode::HostUiChanged, "the app was picked but no pill appeared".into()));
            }
            Ok(None) => {}
            Err(refusal) => {
                close_menu(dom);
                return Err(refusal);
            }
        }
        match nav(dom, &followed) {
            Some((selector, row)) => {
                followed.push(selector);
                dom.click(&row);
            }
            None => {
                close_menu(dom);
                return Err(refuse(
                    ErrorCode::HostAppBindingNotReady,
                    format!("no app labelled exactly \"{label}\" is offered; see docs/setup.md"),
                ));
            }
        }
    }
}

/// The next `+` menu row towards the app list not yet followed.
fn nav<D: Dom>(dom: &D, followed: &[&'static str]) -> Option<(&'static str, D::Node)> {
    [NAV_DEVELOPER_MODE, NAV_MORE].into_iter().filter(|s| !followed.contains(s)).find_map(|selector| {
        let mut found = dom.query_all(None, selector);
        (found.len() == 1).then(|| (selector, found.remove(0)))
    })
}

fn clear_editor<D: Act>(dom: &D) {
    if let Ok(editor) = resolve(dom, Element::Editor)
        && !crate::compose::draft(dom, &editor).is_empty()
    {
        dom.clear(&editor);
    }
}

fn close_menu<D: Act>(dom: &D) {
    if let Ok(plus) = resolve(dom, Element::PlusButton)
        && dom.attr(&plus, "aria-expanded").as_deref() == Some("true")
    {
        dom.click(&plus);
    }
}
