//! Messages between the background and the content script, as JSON objects
//! over `runtime.sendMessage` / `tabs.sendMessage`. The content script
//! offers typed adapter operations only: no generic DOM access, no script.

use protocol::ErrorCode;
use protocol::executor::ConversationState;
use serde::{Deserialize, Serialize};

/// Background → page requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum ToPage {
    /// Is the content script up? Answered with a [`PageReply::Report`].
    Ping,
    /// Submit a prompt once the page is idle, exactly once per key.
    Submit(Submission),
    /// How the adapter reads this page, for the popup's "Check this page":
    /// read-only, answered with a [`PageReply::Inspection`].
    Inspect,
    /// Look for tool calls in the page now (the daemon waits on the one
    /// with this request id, and reports it again if the page shows it):
    /// answered with a [`PageReply::Report`]; what is found follows as an
    /// unsolicited [`PageReply::Callers`].
    Callers {
        /// The request id a call waits on.
        request_id: String,
    },
}

/// A prompt to submit in a page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Submission {
    /// The command's idempotency key.
    pub key: String,
    /// The prompt.
    pub prompt: String,
    /// Give up (without clicking) after this time, ms since the epoch.
    pub deadline_ms: u64,
    /// A new chat: wait for the page to show its `/c/<uuid>` URL.
    pub expect_conversation: bool,
    /// The conversation the page must show (none: a new chat); anything
    /// else is refused before the click.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// Bind the conversation to the app with exactly this label first, and
    /// refuse (nothing typed, nothing clicked) if that cannot be done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
}

/// What the page observed: URL and classified state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `location.href`.
    pub url: String,
    /// The coarse state.
    pub state: ConversationState,
    /// The incident or UI change, when `state` is `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorCode>,
}

/// Page → background replies, and unsolicited reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum PageReply {
    /// The page's current state (a ping answer, or a coalesced change).
    Report(Report),
    /// Unsolicited: the running turn's content moved on (see
    /// `chatgpt_dom::turn_mark`). The background paces what it forwards.
    Progress,
    /// The page took the prompt.
    Submitted(Report),
    /// Nothing was clicked.
    Refused {
        /// Why.
        code: ErrorCode,
        /// Detail without page content.
        detail: String,
    },
    /// Send was clicked but the page never showed it took the prompt.
    Ambiguous {
        /// Detail without page content.
        detail: String,
    },
    /// How the adapter reads the page (an answer to [`ToPage::Inspect`]).
    Inspection(PageCheck),
    /// Unsolicited: request ids the page's data shows (caller
    /// attribution), as the page script read them.
    Callers(PageRequests),
}

/// What the page script (`page.js`, in the page's own world) read: the
/// conversation on screen and the request ids its turns' messages carry
/// (`metadata.request_id`, one per turn). The content script checks the
/// conversation against the page's URL, and the executor core against the
/// tab's bound conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PageRequests {
    /// The conversation the page shows (`/c/<uuid>`).
    pub conversation: String,
    /// Ids not reported before, or the one the executor asked for (at most
    /// `protocol::executor::CALLS_PER_REPORT_MAX` are used).
    pub request_ids: Vec<String>,
    /// The newest id the page shows, in its own order.
    #[serde(default)]
    pub newest: Option<String>,
    /// Holds an id the executor asked for, which may have been sent before
    /// (repeat it; only that one, never the whole page again).
    #[serde(default)]
    pub again: bool,
}

/// The adapter's reading of a page, without page content: counts and
/// verdicts only (the saved-page CLI, `orchestrator inspect-page`, shows
/// the elements themselves).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageCheck {
    /// `chatgpt-dom <version>`.
    pub adapter: String,
    /// The reading (`ready`, `idle`, `generating`, …, `ui_changed`).
    pub state: String,
    /// The typed refusal, when the adapter refuses the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Turns found.
    pub turns: usize,
    /// Visible buttons with stop semantics.
    pub stop_buttons: usize,
    /// What a submit would do now.
    pub submit: String,
    /// The app pills the composer shows.
    pub app_pills: Vec<String>,
    /// Per element of the locator table.
    pub locators: Vec<LocatorCheck>,
}

/// One element of the locator table on this page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocatorCheck {
    /// The element (`Editor`, `SendButton`, …).
    pub element: String,
    /// `found`, or why not (`missing`, `ambiguous …`).
    pub resolved: String,
    /// Per candidate: (generation, selector, visible matches, hidden matches).
    pub candidates: Vec<(String, String, usize, usize)>,
}

impl PageCheck {
    /// Summarizes the adapter's report.
    pub fn from_report<N>(report: &chatgpt_dom::inspect::Report<N>) -> PageCheck {
        use chatgpt_dom::inspect::SubmitPlan;
        PageCheck {
            adapter: report.adapter.to_owned(),
            state: report.state.as_ref().map_or("ui_changed", |s| s.name()).to_owned(),
            refusal: report.state.as_ref().err().cloned(),
            turns: report.turns,
            stop_buttons: report.stop_buttons.len(),
            submit: match &report.submit {
                SubmitPlan::Click(_) => "would click the send button shown now".into(),
                SubmitPlan::AfterTyping => "would type the prompt, then click the send button it brings".into(),
                SubmitPlan::Nothing(why) => format!("nothing ({why})"),
            },
            app_pills: report.pills.clone(),
            locators: report
                .locators
                .iter()
                .map(|l| LocatorCheck {
                    element: format!("{:?}", l.element),
                    resolved: l.resolved.as_ref().map_or_else(Clone::clone, |_| "found".to_owned()),
                    candidates: l
                        .candidates
                        .iter()
                        .map(|c| {
                            let visible = c.matches.iter().filter(|(_, v)| *v).count();
                            (c.generation.to_owned(), c.selector.to_owned(), visible, c.matches.len() - visible)
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// The check as the popup shows it.
    pub fn render(&self) -> String {
        let mut out = format!(
            "adapter: {}\nstate: {}\n{}turns: {}\nstop buttons: {}\nsubmit: {}\napp pills: {}\n",
            self.adapter,
            self.state,
            self.refusal.as_ref().map(|r| format!("refusal: {r}\n")).unwrap_or_default(),
            self.turns,
            self.stop_buttons,
            self.submit,
            if self.app_pills.is_empty() { "(none)".to_owned() } else { self.app_pills.join(", ") },
        );
        for locator in &self.locators {
            out.push_str(&format!("{}: {}\n", locator.element, locator.resolved));
            for (generation, selector, visible, hidden) in &locator.candidates {
                if visible + hidden > 0 {
                    out.push_str(&format!("  [{generation}] {selector}: {visible} visible, {hidden} hidden\n"));
                }
            }
        }
        out
    }
}

/// A request from the popup to the background.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "popup", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum FromPopup {
    /// A person blocks (or unblocks) the managed chat in this tab: every
    /// tool call it makes is refused with `CHAT_BLOCKED` until unblocked.
    Block {
        /// The tab (a JS number: an internally tagged message reads numbers
        /// as floats).
        tab: f64,
        /// Block (`true`) or unblock.
        blocked: bool,
    },
}
