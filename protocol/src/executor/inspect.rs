//! The read-only page inspection of protocol v5 (`pageInspect`,
//! `pageInspected`): which pages may be named, and the reading's bounds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{DETAIL_MAX, FACT_MAX, FrameRefusal, URL_PREFIX, bounded};
use crate::error::ErrorCode;

/// The capability (protocol v5) of an executor that answers `pageInspect`:
/// it reads a page in a background tab of its own, acting on nothing.
pub const PAGE_INSPECT: &str = "page_inspect";

/// Whether `url` is a page a `pageInspect` may name: chatgpt.com's new
/// chat (`/`), a conversation (`/c/<uuid>`) or a Project's page
/// (`/g/g-p-<32 hex>[-slug]/project`), with no query or fragment: the
/// pages a run touches, never another path of the site (a GET can change
/// an account's state: a sign-out page).
pub fn inspectable(url: &str) -> bool {
    let Some(path) = url.strip_prefix(URL_PREFIX) else { return false };
    let uuid = |s: &str| {
        s.len() == 36
            && s.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_hexdigit(),
            })
    };
    let project = |s: &str| {
        s.strip_prefix("g-p-").is_some_and(|rest| {
            let (id, slug) = rest.split_at_checked(32).unwrap_or((rest, "x"));
            id.bytes().all(|b| b.is_ascii_hexdigit())
                && (slug.is_empty()
                    || slug.strip_prefix('-').is_some_and(|s| {
                        !s.is_empty() && s.len() <= 200 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    }))
        })
    };
    match path.split('/').collect::<Vec<_>>()[..] {
        [""] => true,
        ["c", id] => uuid(id),
        ["g", id, "project"] => project(id),
        _ => false,
    }
}

/// The longest an executor keeps an inspection's tab open, whatever
/// `untilMs` says (the two clocks may differ).
pub const INSPECT_WITHIN_MS: u64 = 60_000;

/// Most app pills one inspection reports.
pub const PILLS_MAX: usize = 16;

/// How this build's adapter reads one page, as `pageInspected` carries it:
/// verdicts and counts, never page content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PageInspection {
    /// The adapter that read it (`chatgpt-dom <version>`).
    pub adapter: String,
    /// The classification as the corpus names it (`ready`, `idle`,
    /// `generating`, `challenge`, `signed_out`, …), or `ui_changed` when
    /// the adapter refuses the page.
    pub state: String,
    /// The adapter's typed refusal (`HOST_UI_CHANGED: …`), when it refuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Turns found.
    pub turns: u32,
    /// Visible buttons with stop semantics.
    pub stop_buttons: u32,
    /// What a submit would do now, in words (the composer's own decision on
    /// a dry run), or `nothing (<CODE>: …)`.
    pub submit: String,
    /// The app pills the composer shows (at most [`PILLS_MAX`]).
    #[serde(default)]
    pub app_pills: Vec<String>,
}

impl PageInspection {
    /// Whether a worker's first prompt may go to this page: a new chat
    /// (`ready`) or a conversation whose turn ended (`idle`), with a submit
    /// the composer would make.
    pub fn usable(&self) -> bool {
        matches!(self.state.as_str(), "ready" | "idle") && !self.submit.starts_with("nothing")
    }

    pub(super) fn validate(&self) -> Result<(), FrameRefusal> {
        bounded("inspection.adapter", &self.adapter, FACT_MAX)?;
        bounded("inspection.state", &self.state, FACT_MAX)?;
        bounded("inspection.refusal", self.refusal.as_deref().unwrap_or_default(), DETAIL_MAX)?;
        bounded("inspection.submit", &self.submit, DETAIL_MAX)?;
        if self.app_pills.len() > PILLS_MAX {
            return Err(FrameRefusal { code: ErrorCode::TooLarge, detail: format!("more than {PILLS_MAX} app pills") });
        }
        self.app_pills.iter().try_for_each(|p| bounded("inspection.appPills", p, FACT_MAX))?;
        let words = [&self.adapter, &self.state, &self.submit].into_iter().chain(&self.refusal).chain(&self.app_pills);
        if words.into_iter().any(|w| w.chars().any(char::is_control)) {
            return Err(FrameRefusal {
                code: ErrorCode::InvalidArgument,
                detail: "an inspection must not hold control characters".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_pages_a_run_touches_are_inspectable() {
        for good in [
            "https://chatgpt.com/",
            "https://chatgpt.com/c/6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f",
            "https://chatgpt.com/g/g-p-0123456789abcdef0123456789abcdef/project",
            "https://chatgpt.com/g/g-p-0123456789abcdef0123456789abcdef-my-work/project",
        ] {
            assert!(inspectable(good), "{good}");
        }
        for bad in [
            "http://chatgpt.com/",
            "https://chatgpt.com",
            "https://chatgpt.com/auth/logout",
            "https://chatgpt.com/?model=x",
            "https://chatgpt.com/#x",
            "https://chatgpt.com/c/6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f?x=1",
            "https://chatgpt.com/c/not-a-uuid",
            "https://chatgpt.com/c/6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f/",
            "https://chatgpt.com/g/g-p-0123/project",
            "https://chatgpt.com/g/g-p-0123456789abcdef0123456789abcdef-/project",
            "https://chatgpt.com.evil.example/",
        ] {
            assert!(!inspectable(bad), "{bad}");
        }
    }
}
