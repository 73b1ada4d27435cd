//! Pinning the conversation's model through ChatGPT's model picker, by the
//! picker's exact label, before anything is typed; failing closed.
//!
//! The picker changed shape every few weeks through 2025–2026
//! (`docs/evidence/model-picker.md`). Two generations are read:
//! - **A** (2025 to early 2026): the header trigger
//!   `button[data-testid="model-switcher-dropdown-button"]` whose
//!   aria-label names the current model ("Model selector, current model is
//!   4o"); rows `[role=menuitem][data-testid^="model-switcher-"]`, older
//!   models behind a "Legacy models" submenu; the current row marked only by
//!   an icon, so the trigger's label is the verification.
//! - **B** (August 2026): the composer pill (`button.__composer-pill
//!   [aria-haspopup=menu]`, the same test id where present) showing the
//!   thinking effort, never the model; "Show advanced options", then the
//!   Model opener's submenu of `[role=menuitemradio]` rows whose
//!   `aria-checked` is the verification.
//!
//! Rules: every locator must resolve to exactly one visible element (not
//! inside `[inert]`); a row matches only when one of its elements reads
//! exactly the label (so "GPT-5.5" never picks "GPT-5.5 Pro"); a disabled
//! or absent row is `MODEL_UNAVAILABLE`; a picker that cannot be read or
//! does not show the choice afterwards is `HOST_UI_CHANGED`. The picker is
//! closed again either way, and nothing is typed here.

use protocol::ErrorCode;

use crate::Dom;
use crate::bind::{Wait, until};
use crate::compose::{Act, Refusal};
use crate::locators::visible;

/// The trigger, in order: the test id (both generations where present),
/// then generation B's composer pill. Never joined into one selector: the
/// first candidate with a visible match decides.
const TRIGGERS: &[&str] = &[
    r#"button[data-testid="model-switcher-dropdown-button"]"#,
    r#"form button.__composer-pill[aria-haspopup="menu"], [data-composer-surface="true"] button.__composer-pill[aria-haspopup="menu"]"#,
];
/// An open Radix menu.
const OPEN_MENU: &str = r#"[role="menu"][data-state="open"]"#;
/// What marks a menu as the model picker's (sidebar and search menus are
/// Radix menus too).
const PICKER_MARKS: &str = r#"[data-testid^="model-switcher-"], [data-testid="composer-intelligence-picker-content"]"#;
/// Model rows: generation A's test-id rows, generation B's radios (only
/// inside a model submenu: the first level's radios are effort tiers).
const A_ROWS: &str =
    r#"[role="menuitem"][data-testid^="model-switcher-"], [role="menuitemradio"][data-testid^="model-switcher-"]"#;
const B_ROWS: &str = r#"[role="menuitemradio"]"#;
/// Generation B's "Show advanced options": a menuitem that expands, with no submenu.
const ADVANCED: &str = r#"[role="menuitem"][aria-expanded]:not([aria-haspopup])"#;
/// Submenu openers: A's "Legacy models"/"More models", B's "Model".
const OPENERS: &str = r#"[role="menuitem"][aria-haspopup="menu"], [role="menuitem"][data-has-submenu]"#;
/// Generation A's trigger label, before the model's name (en only: other
/// locales verify by a checked radio or fail closed).
const CURRENT_IS: &str = "current model is ";

fn refuse(code: ErrorCode, detail: impl Into<String>) -> Refusal {
    Refusal { code, detail: detail.into() }
}

fn normalized(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn disabled<D: Dom>(dom: &D, node: &D::Node) -> bool {
    dom.attr(node, "aria-disabled").as_deref() == Some("true")
        || dom.attr(node, "data-disabled").is_some()
        || dom.attr(node, "disabled").is_some()
}

/// Visible and not inside an inert copy of the menu.
fn shown<D: Dom>(dom: &D, scope: Option<&D::Node>, selector: &str) -> Vec<D::Node> {
    visible(dom, scope, selector).into_iter().filter(|n| !dom.within(n, "[inert]")).collect()
}

/// The one trigger, or why there is none to use.
fn trigger<D: Dom>(dom: &D) -> Result<D::Node, Refusal> {
    for selector in TRIGGERS {
        match &shown(dom, None, selector)[..] {
            [] => continue,
            [one] => return Ok(one.clone()),
            many => {
                return Err(refuse(ErrorCode::HostUiChanged, format!("{} model pickers; not guessing", many.len())));
            }
        }
    }
    Err(refuse(ErrorCode::HostUiChanged, "no model picker on the page"))
}

/// The model generation A's trigger names, if it names one.
fn named<D: Dom>(dom: &D, trigger: &D::Node) -> Option<String> {
    let label = dom.attr(trigger, "aria-label")?;
    label.split_once(CURRENT_IS).map(|(_, model)| normalized(model))
}

/// The open menus that are the picker's: holding a model row or the
/// intelligence content (a menu the trigger opened that holds neither is
/// some other control's, and nothing in it is clicked).
fn picker_menus<D: Dom>(dom: &D, _trigger: &D::Node) -> Vec<D::Node> {
    shown(dom, None, OPEN_MENU).into_iter().filter(|m| !dom.query_all(Some(m), PICKER_MARKS).is_empty()).collect()
}

/// Whether `row` reads exactly `label`: the row, or one element in it (a
/// title beside its subtitle).
fn reads<D: Dom>(dom: &D, row: &D::Node, label: &str) -> bool {
    normalized(&dom.text(row)) == label
        || dom.query_all(Some(row), "*").iter().any(|n| normalized(&dom.text(n)) == label)
}

/// The open menus where model rows may be: the picker's own, and the
/// submenus its openers control.
/// Each with whether it is the first level (its radios are effort tiers):
/// a picker menu no model opener controls.
fn model_menus<D: Dom>(dom: &D, trigger: &D::Node) -> Vec<(D::Node, bool)> {
    let own = picker_menus(dom, trigger);
    let controlled: Vec<String> = own
        .iter()
        .flat_map(|m| shown(dom, Some(m), OPENERS))
        .filter(|o| leads_to_models(dom, o))
        .filter_map(|o| dom.attr(&o, "aria-controls"))
        .collect();
    shown(dom, None, OPEN_MENU)
        .into_iter()
        .filter_map(|m| {
            let submenu = dom.attr(&m, "id").is_some_and(|i| controlled.contains(&i));
            (own.contains(&m) || submenu).then_some((m, !submenu))
        })
        .collect()
}

/// The rows labelled `label` in the picker's menus. A first-level radio is
/// an effort tier, not a model: B's radios count only in a submenu.
fn rows<D: Dom>(dom: &D, trigger: &D::Node, label: &str) -> Vec<D::Node> {
    let mut found = Vec::new();
    for (menu, first_level) in model_menus(dom, trigger) {
        let mut candidates = shown(dom, Some(&menu), A_ROWS);
        if !first_level {
            candidates.extend(shown(dom, Some(&menu), B_ROWS));
        }
        for row in candidates {
            if reads(dom, &row, label) && !found.contains(&row) {
                found.push(row);
            }
        }
    }
    found
}

fn checked<D: Dom>(dom: &D, node: &D::Node) -> bool {
    dom.attr(node, "aria-checked").as_deref() == Some("true")
        || dom.attr(node, "data-state").as_deref() == Some("checked")
}

/// Whether an opener leads to models: A's "Legacy models"/"More models"
/// (`data-testid="… models-submenu"`), B's "Model". Never the effort
/// submenus (their radios are tiers, not models): the words are a hint
/// the evidence offers in English only, so elsewhere a model behind a
/// submenu is not found and nothing is typed.
fn leads_to_models<D: Dom>(dom: &D, opener: &D::Node) -> bool {
    if dom.attr(opener, "data-model-picker-thinking-effort-action").is_some() {
        return false;
    }
    let text = normalized(&dom.text(opener)).to_lowercase();
    dom.attr(opener, "data-testid").is_some_and(|t| t.ends_with("models-submenu"))
        || text.starts_with("model")
        || text.contains("models")
}

/// Opens the picker and finds the row labelled `label`, descending through
/// "Show advanced options" and the submenu openers. `Ok(None)`: the picker
/// offers no such model.
async fn open_row<D: Act, W: Wait>(
    dom: &D,
    trigger: &D::Node,
    label: &str,
    wait: &W,
) -> Result<Option<D::Node>, Refusal> {
    if picker_menus(dom, trigger).is_empty() {
        dom.click(trigger);
        if !until(dom, wait, |d| !picker_menus(d, trigger).is_empty()).await {
            return Err(refuse(ErrorCode::HostUiChanged, "the model picker did not open"));
        }
    }
    let found = |d: &D| !rows(d, trigger, label).is_empty();
    if found(dom) {
        return pick(dom, trigger, label);
    }
    // B: the advanced options, once.
    let advanced: Vec<D::Node> = picker_menus(dom, trigger)
        .iter()
        .flat_map(|m| shown(dom, Some(m), ADVANCED))
        .filter(|n| dom.attr(n, "aria-expanded").as_deref() == Some("false"))
        .collect();
    if let [toggle] = &advanced[..] {
        dom.click(toggle);
        until(dom, wait, |d| {
            found(d) || picker_menus(d, trigger).iter().any(|m| !shown(d, Some(m), OPENERS).is_empty())
        })
        .await;
    }
    // The submenus, each once, until the row shows.
    let mut opened: Vec<Option<String>> = Vec::new();
    while !found(dom) {
        let next = picker_menus(dom, trigger)
            .iter()
            .flat_map(|m| shown(dom, Some(m), OPENERS))
            .filter(|o| leads_to_models(dom, o))
            .find(|o| {
                !opened.contains(&dom.attr(o, "aria-controls"))
                    && dom.attr(o, "aria-expanded").as_deref() != Some("true")
            });
        let Some(opener) = next else { break };
        let controls = dom.attr(&opener, "aria-controls");
        opened.push(controls.clone());
        dom.click(&opener);
        until(dom, wait, |d| {
            found(d) || controls.as_ref().is_some_and(|id| !shown(d, None, &format!(r#"[id="{id}"]"#)).is_empty())
        })
        .await;
        if opened.len() > 4 {
            break;
        }
    }
    if found(dom) { pick(dom, trigger, label) } else { Ok(None) }
}

/// The one enabled row labelled `label`.
fn pick<D: Dom>(dom: &D, trigger: &D::Node, label: &str) -> Result<Option<D::Node>, Refusal> {
    match &rows(dom, trigger, label)[..] {
        [] => Ok(None),
        [row] if disabled(dom, row) => {
            Err(refuse(ErrorCode::ModelUnavailable, format!("the model \"{label}\" is disabled")))
        }
        [row] => Ok(Some(row.clone())),
        many => Err(refuse(ErrorCode::HostUiChanged, format!("{} rows read \"{label}\"; not guessing", many.len()))),
    }
}

/// Closes the picker if it is open (a click on its trigger, as a person would).
async fn close<D: Act, W: Wait>(dom: &D, trigger: &D::Node, wait: &W) {
    if !picker_menus(dom, trigger).is_empty() {
        dom.click(trigger);
        until(dom, wait, |d| picker_menus(d, trigger).is_empty()).await;
    }
}

/// Whether the picker shows `label` as the current model: generation A's
/// trigger names it; otherwise the picker is opened and exactly that row
/// must be the one checked. `Err` when it cannot tell.
async fn shows<D: Act, W: Wait>(dom: &D, trigger: &D::Node, label: &str, wait: &W) -> Result<bool, Refusal> {
    if let Some(current) = named(dom, trigger) {
        return Ok(current == label);
    }
    let row = open_row(dom, trigger, label, wait).await;
    let verdict = match row {
        Ok(Some(row)) if checked(dom, &row) => {
            // And no other model row of its menu is checked.
            let others = model_menus(dom, trigger)
                .iter()
                .filter(|(m, _)| dom.query_all(Some(m), "*").contains(&row))
                .flat_map(|(m, _)| shown(dom, Some(m), B_ROWS))
                .filter(|n| *n != row && checked(dom, n))
                .count();
            Ok(others == 0)
        }
        Ok(Some(_)) => Ok(false),
        Ok(None) => Err(refuse(ErrorCode::ModelUnavailable, format!("the picker offers no model \"{label}\""))),
        Err(e) => Err(e),
    };
    close(dom, trigger, wait).await;
    verdict
}

/// Sets the page's model picker to `label` and verifies it, before anything
/// is typed. `Ok` when the picker shows exactly that model afterwards.
pub async fn pin<D: Act, W: Wait>(dom: &D, label: &str, wait: &W) -> Result<(), Refusal> {
    let label = normalized(label);
    let trigger = trigger(dom)?;
    if named(dom, &trigger).as_deref() == Some(label.as_str()) {
        return Ok(());
    }
    let row = open_row(dom, &trigger, &label, wait).await;
    let row = match row {
        Ok(Some(row)) => row,
        Ok(None) => {
            close(dom, &trigger, wait).await;
            return Err(refuse(ErrorCode::ModelUnavailable, format!("the picker offers no model \"{label}\"")));
        }
        Err(e) => {
            close(dom, &trigger, wait).await;
            return Err(e);
        }
    };
    // Already the checked one (B): nothing to click.
    if checked(dom, &row) && named(dom, &trigger).is_none() {
        close(dom, &trigger, wait).await;
        return Ok(());
    }
    dom.click(&row);
    // A choice closes the menu; a menu left open is closed here.
    until(dom, wait, |d| picker_menus(d, &trigger).is_empty()).await;
    close(dom, &trigger, wait).await;
    match shows(dom, &trigger, &label, wait).await? {
        true => Ok(()),
        false => Err(refuse(
            ErrorCode::HostUiChanged,
            format!("the model \"{label}\" was picked but the picker does not show it"),
        )),
    }
}
