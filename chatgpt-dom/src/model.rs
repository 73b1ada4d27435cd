//! Pinning the conversation's model, and with it the thinking effort,
//! through ChatGPT's model picker, by the picker's exact labels, before
//! anything is typed; failing closed.
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
//!   `aria-checked` is the verification; the Effort opener beside it holds
//!   the effort tiers, Pro among them (2026-08-10), as the first level's
//!   radios did before. A flat panel of 2026-09 puts the model radios in
//!   the advanced view itself, and its Radix trigger opens on
//!   `pointerdown`, not on a synthetic `click()` (the carriers press with a
//!   full pointer sequence, see `Act::click`).
//!
//! Openers are told apart by structure first: an effort action
//! (`data-model-picker-thinking-effort-action`) or an opener whose value is
//! what the pill shows (the pill names the effort) leads to efforts; one in
//! the advanced view or a "models-submenu" test id leads to models. Their
//! words, in the languages public code records, are a second signal.
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
/// Submenu openers: A's "Legacy models"/"More models", B's "Model" and "Effort".
const OPENERS: &str = r#"[role="menuitem"][aria-haspopup="menu"], [role="menuitem"][data-has-submenu]"#;
/// Generation B's advanced view: its openers (2026-08) or its model radios
/// (the flat panel of 2026-09: rzn-browser's live note 2026-08-31; a live
/// DOM recorded 2026-09-05, search-index id 59148944243).
const ADVANCED_VIEW: &str = r#"[data-testid="composer-model-picker-slider-advanced-view"]"#;
/// Openers' words, lower-cased, as a second signal (all CODE, no capture):
/// en "Model" / "Effort" (steipete/oracle @ 7b364aa5); zh-CN 选择模型, zh-TW
/// 選擇模型, ko 모델 선택 (GPTLock's list, search-index id 68634717668); vi
/// "Mô hình" / "Mức suy luận" (id 68948571794); ja 推論レベル (oracle's
/// changelog 0.17.3); zh-CN 强度 (Fabushi's spec of 2026-09-28 as search
/// results quote it, the weakest of these).
const MODEL_WORDS: &[&str] = &["model", "模型", "모델", "mô hình"];
const EFFORT_WORDS: &[&str] = &["effort", "强度", "推論レベル", "mức suy luận"];

/// What a picker row sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A model ("o3").
    Model,
    /// A thinking effort ("Pro").
    Effort,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Model => "model",
            Kind::Effort => "effort",
        }
    }
}

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

/// The open menus where rows may be: the picker's own (first level), and
/// the submenus its openers control, each with what its opener leads to.
fn menus<D: Dom>(dom: &D, trigger: &D::Node) -> Vec<(D::Node, bool, Option<Kind>)> {
    let own = picker_menus(dom, trigger);
    let controlled: Vec<(String, Option<Kind>)> = own
        .iter()
        .flat_map(|m| shown(dom, Some(m), OPENERS))
        .filter_map(|o| Some((dom.attr(&o, "aria-controls")?, leads_to(dom, trigger, &o))))
        .collect();
    shown(dom, None, OPEN_MENU)
        .into_iter()
        .filter_map(|m| {
            let id = dom.attr(&m, "id");
            let submenu = controlled.iter().find(|(c, _)| id.as_deref() == Some(c.as_str()));
            match submenu {
                Some((_, kind)) => Some((m, false, *kind)),
                None => own.contains(&m).then_some((m, true, None)),
            }
        })
        .collect()
}

/// The rows of `kind` labelled `label` in the picker's menus. Models: A's
/// test-id rows, B's radios in a model submenu or in the advanced view.
/// Efforts: the first level's radios outside the advanced view, and the
/// radios of an effort submenu.
fn rows<D: Dom>(dom: &D, trigger: &D::Node, label: &str, kind: Kind) -> Vec<D::Node> {
    let mut found = Vec::new();
    for (menu, first_level, of) in menus(dom, trigger) {
        let mut candidates = Vec::new();
        let radios = shown(dom, Some(&menu), B_ROWS);
        match kind {
            Kind::Model => {
                candidates.extend(shown(dom, Some(&menu), A_ROWS));
                match (first_level, of) {
                    (true, _) => candidates.extend(radios.into_iter().filter(|r| dom.within(r, ADVANCED_VIEW))),
                    (false, Some(Kind::Model)) => candidates.extend(radios),
                    (false, _) => {}
                }
            }
            Kind::Effort => match (first_level, of) {
                (true, _) => candidates.extend(radios.into_iter().filter(|r| !dom.within(r, ADVANCED_VIEW))),
                (false, Some(Kind::Effort)) => candidates.extend(radios),
                (false, _) => {}
            },
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

/// What an opener leads to, if it can be told: efforts (an effort action,
/// or its value is the pill's text, which names the effort; or effort
/// words), models (a "models-submenu" test id, an opener of the advanced
/// view that is no effort opener, or model words), else nothing (never
/// opened: an unknown submenu's radios are not clicked).
fn leads_to<D: Dom>(dom: &D, trigger: &D::Node, opener: &D::Node) -> Option<Kind> {
    if effort_marked(dom, trigger, opener) {
        return Some(Kind::Effort);
    }
    let text = normalized(&dom.text(opener)).to_lowercase();
    let says = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if dom.attr(opener, "data-testid").is_some_and(|t| t.ends_with("models-submenu")) || says(MODEL_WORDS) {
        return Some(Kind::Model);
    }
    // In the advanced view, in words no table holds: the model opener is
    // the one opener there not told to lead to efforts, if it is alone.
    let view = dom.query_all(None, ADVANCED_VIEW).into_iter().find(|v| dom.query_all(Some(v), "*").contains(opener))?;
    let others = shown(dom, Some(&view), OPENERS).into_iter().filter(|o| o != opener).collect::<Vec<_>>();
    let efforts = others.iter().filter(|o| effort_marked(dom, trigger, o)).count();
    (efforts == others.len()).then_some(Kind::Model)
}

/// Whether `opener` is marked as leading to efforts, by structure or words
/// (what [`leads_to`] checks first).
fn effort_marked<D: Dom>(dom: &D, trigger: &D::Node, opener: &D::Node) -> bool {
    let pill = normalized(&dom.text(trigger));
    let leaves: Vec<String> = dom
        .query_all(Some(opener), "span")
        .iter()
        .map(|n| normalized(&dom.text(n)))
        .filter(|t| !t.is_empty())
        .collect();
    let value_is_pill = !pill.is_empty() && leaves.len() > 1 && leaves.last().is_some_and(|v| *v == pill);
    let text = normalized(&dom.text(opener)).to_lowercase();
    dom.attr(opener, "data-model-picker-thinking-effort-action").is_some()
        || value_is_pill
        || EFFORT_WORDS.iter().any(|w| text.contains(w))
}

/// Opens the picker and finds the row labelled `label`, descending through
/// "Show advanced options" and the submenu openers. `Ok(None)`: the picker
/// offers no such model.
async fn open_row<D: Act, W: Wait>(
    dom: &D,
    trigger: &D::Node,
    label: &str,
    kind: Kind,
    wait: &W,
) -> Result<Option<D::Node>, Refusal> {
    if picker_menus(dom, trigger).is_empty() {
        dom.click(trigger);
        if !until(dom, wait, |d| !picker_menus(d, trigger).is_empty()).await {
            return Err(refuse(ErrorCode::HostUiChanged, "the model picker did not open"));
        }
    }
    let found = |d: &D| !rows(d, trigger, label, kind).is_empty();
    if found(dom) {
        return pick(dom, trigger, label, kind);
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
            .filter(|o| leads_to(dom, trigger, o) == Some(kind))
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
    if found(dom) { pick(dom, trigger, label, kind) } else { Ok(None) }
}

/// The one enabled row of `kind` labelled `label`.
fn pick<D: Dom>(dom: &D, trigger: &D::Node, label: &str, kind: Kind) -> Result<Option<D::Node>, Refusal> {
    match &rows(dom, trigger, label, kind)[..] {
        [] => Ok(None),
        [row] if disabled(dom, row) => {
            Err(refuse(ErrorCode::ModelUnavailable, format!("the {} \"{label}\" is disabled", kind.noun())))
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

/// Whether the picker shows `label` as the current model (or effort):
/// generation A's trigger names the model; otherwise the picker is opened
/// and exactly that row must be the one checked in its group. `Err` when it
/// cannot tell.
async fn shows<D: Act, W: Wait>(
    dom: &D,
    trigger: &D::Node,
    label: &str,
    kind: Kind,
    wait: &W,
) -> Result<bool, Refusal> {
    if let (Kind::Model, Some(current)) = (kind, named(dom, trigger)) {
        return Ok(current == label);
    }
    let row = open_row(dom, trigger, label, kind, wait).await;
    let verdict = match row {
        Ok(Some(row)) if checked(dom, &row) => {
            // And no other model row of its menu is checked.
            let others = menus(dom, trigger)
                .iter()
                .filter(|(m, _, _)| dom.query_all(Some(m), "*").contains(&row))
                .flat_map(|(m, _, _)| shown(dom, Some(m), B_ROWS))
                .filter(|n| {
                    *n != row && checked(dom, n) && dom.within(n, ADVANCED_VIEW) == dom.within(&row, ADVANCED_VIEW)
                })
                .count();
            Ok(others == 0)
        }
        Ok(Some(_)) => Ok(false),
        Ok(None) => {
            Err(refuse(ErrorCode::ModelUnavailable, format!("the picker offers no {} \"{label}\"", kind.noun())))
        }
        Err(e) => Err(e),
    };
    close(dom, trigger, wait).await;
    verdict
}

/// Sets the page's model picker to `label` and verifies it, before anything
/// is typed. `Ok` when the picker shows exactly that model afterwards.
pub async fn pin<D: Act, W: Wait>(dom: &D, label: &str, wait: &W) -> Result<(), Refusal> {
    set(dom, label, Kind::Model, wait).await
}

/// Sets the picker's thinking effort to `label` ("High", "Pro") and
/// verifies it, after the model was pinned and before anything is typed:
/// the tier is found among the first level's radios or behind an effort
/// opener, and must be the one checked afterwards. `MODEL_UNAVAILABLE` when
/// the picker offers no such effort (a slider alone is not driven: its
/// stops are not rows); nothing is typed either way.
pub async fn pin_effort<D: Act, W: Wait>(dom: &D, label: &str, wait: &W) -> Result<(), Refusal> {
    set(dom, label, Kind::Effort, wait).await
}

async fn set<D: Act, W: Wait>(dom: &D, label: &str, kind: Kind, wait: &W) -> Result<(), Refusal> {
    let label = normalized(label);
    let trigger = trigger(dom)?;
    if kind == Kind::Model && named(dom, &trigger).as_deref() == Some(label.as_str()) {
        return Ok(());
    }
    let row = open_row(dom, &trigger, &label, kind, wait).await;
    let row = match row {
        Ok(Some(row)) => row,
        Ok(None) => {
            close(dom, &trigger, wait).await;
            return Err(refuse(
                ErrorCode::ModelUnavailable,
                format!("the picker offers no {} \"{label}\"", kind.noun()),
            ));
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
    match shows(dom, &trigger, &label, kind, wait).await? {
        true => Ok(()),
        false => Err(refuse(
            ErrorCode::HostUiChanged,
            format!("the {} \"{label}\" was picked but the picker does not show it", kind.noun()),
        )),
    }
}
