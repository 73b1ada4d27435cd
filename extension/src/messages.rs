//! Messages between the background and the content script, as JSON objects
//! over `runtime.sendMessage` / `tabs.sendMessage`. The content script
//! offers typed adapter operations only: no generic DOM access, no script.

use protocol::ErrorCode;
use protocol::executor::{CommandOutcome, ConversationState};
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
    /// This tab is managed for this worker: show the overlay (answered
    /// with a [`PageReply::Report`]).
    Overlay {
        /// The worker.
        worker_id: String,
    },
    /// May this tab be closed to free capacity (`chatgpt_dom::compose::
    /// parkable`)? Read-only: a [`PageReply::Report`] when it may, else a
    /// [`PageReply::Refused`] (`TAB_IN_USE`).
    MayClose,
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
    /// Then set the model picker to exactly this model and verify it, and
    /// refuse (nothing typed) if that cannot be done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// With the model, set the picker's thinking effort to exactly this and
    /// verify it, or refuse (nothing typed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
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
    /// The adapter did not start in this page: its loader answers every
    /// request with why (nothing of the adapter runs to answer), so a
    /// command fails at once with the reason instead of waiting out its
    /// deadline for a page that will never answer.
    NotStarted(NotStarted),
}

/// Why the adapter did not start in a page, as its loader saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotStarted {
    /// The WebAssembly module did not compile (what a page CSP without
    /// `'wasm-unsafe-eval'` does in Chromium), so the WebAssembly-free
    /// build was tried, and did not start either.
    pub wasm_blocked: bool,
    /// The last error the loader caught (a browser's message, no page content).
    pub error: String,
}

/// The most of a loader's error a detail carries.
const ERROR_MAX: usize = 300;

impl NotStarted {
    /// What the command that needed the page answers: `ADAPTER_BLOCKED`,
    /// naming the cause.
    pub fn outcome(&self) -> CommandOutcome {
        CommandOutcome::Error { code: ErrorCode::AdapterBlocked, detail: self.detail() }
    }

    /// The reason, within the protocol's bound on a detail.
    pub fn detail(&self) -> String {
        let error: String = self.error.chars().filter(|c| !c.is_control()).take(ERROR_MAX).collect();
        let error = if error.is_empty() { "no message".to_owned() } else { error };
        if self.wasm_blocked {
            format!("the page's Content-Security-Policy blocks WebAssembly and the fallback did not start ({error})")
        } else {
            format!("the page adapter did not start ({error})")
        }
    }
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

    /// The check as `pageInspected` carries it (protocol v5): the verdicts
    /// without the locator table, each string cut to the wire's bound and
    /// stripped of control characters.
    pub fn inspection(&self) -> protocol::executor::PageInspection {
        use protocol::executor::{DETAIL_MAX, FACT_MAX, PILLS_MAX};
        protocol::executor::PageInspection {
            adapter: bounded(&self.adapter, FACT_MAX),
            state: bounded(&self.state, FACT_MAX),
            refusal: self.refusal.as_deref().map(|r| bounded(r, DETAIL_MAX)),
            turns: u32::try_from(self.turns).unwrap_or(u32::MAX),
            stop_buttons: u32::try_from(self.stop_buttons).unwrap_or(u32::MAX),
            submit: bounded(&self.submit, DETAIL_MAX),
            app_pills: self.app_pills.iter().take(PILLS_MAX).map(|p| bounded(p, FACT_MAX)).collect(),
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
    /// A person's control on a worker or a run (sent on as `operatorAct`).
    Act {
        /// What to do.
        action: protocol::operator::Action,
        /// The worker (worker actions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_id: Option<String>,
        /// The run (run actions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
        /// The answer (`answer`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// Bring the worker's managed tab to the front.
    Open {
        /// The worker.
        worker_id: String,
    },
}

/// A request from the overlay in a managed tab to the background: it acts
/// only on the worker of the tab it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "overlay", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum FromOverlay {
    /// A person's control on this tab's worker.
    Act {
        /// The worker the overlay shows: acted on only if it is still the tab's.
        worker_id: String,
        /// What to do (worker actions only).
        action: protocol::operator::Action,
        /// The answer (`answer`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
}

/// What the background keeps in `storage.local` under `settings`, set on
/// the options page.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Settings {
    /// Hide the overlay in managed tabs (the popup and dashboard still work).
    pub hide_overlay: bool,
    /// No browser notification when a worker needs a person.
    pub no_notifications: bool,
}

/// `text` without control characters, cut (marked `…`) to at most `max`
/// bytes at a character boundary.
fn bounded(text: &str, max: usize) -> String {
    let mut out: String = text.chars().filter(|c| !c.is_control()).collect();
    protocol::rollover::shorten(&mut out, max);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 29 item 13: a page whose adapter cannot start answers with why
    /// (the loader's reply, as `static/cs.js` and the CDP shim send it), and
    /// the command fails at once with `ADAPTER_BLOCKED` naming the cause.
    #[test]
    fn a_page_that_did_not_start_names_its_cause() {
        let reply = r#"{"kind":"not_started","wasmBlocked":true,"error":"TypeError: Failed to fetch dynamically imported module"}"#;
        let Ok(PageReply::NotStarted(why)) = serde_json::from_str::<PageReply>(reply) else { panic!("{reply}") };
        let CommandOutcome::Error { code, detail } = why.outcome() else { panic!("an error") };
        assert_eq!(code, ErrorCode::AdapterBlocked);
        assert_eq!(
            detail,
            "the page's Content-Security-Policy blocks WebAssembly and the fallback did not start \
             (TypeError: Failed to fetch dynamically imported module)"
        );
        assert!(code.is_host_state(), "a condition of the browser, not the worker's failure");

        let other = NotStarted { wasm_blocked: false, error: format!("RuntimeError\n{}", "x".repeat(5000)) };
        let detail = other.detail();
        assert!(detail.starts_with("the page adapter did not start (RuntimeError"), "{detail}");
        assert!(detail.len() <= protocol::executor::DETAIL_MAX && !detail.contains('\n'), "{}", detail.len());
    }

    #[test]
    fn an_inspection_is_cut_to_the_wire_bounds_and_keeps_no_control_characters() {
        let check = PageCheck {
            adapter: "chatgpt-dom 0.1.0".into(),
            state: "ready\n".into(),
            refusal: None,
            turns: 0,
            stop_buttons: 0,
            submit: "é".repeat(protocol::executor::DETAIL_MAX),
            app_pills: vec!["Orchestrator".into(); protocol::executor::PILLS_MAX + 3],
            locators: Vec::new(),
        };
        let inspection = check.inspection();
        assert_eq!(inspection.state, "ready");
        assert!(inspection.submit.len() <= protocol::executor::DETAIL_MAX, "{}", inspection.submit.len());
        assert!(inspection.submit.ends_with('…'), "the cut is marked");
        assert_eq!(inspection.app_pills.len(), protocol::executor::PILLS_MAX);
        let frame = protocol::executor::ExecutorFrame::PageInspected {
            inspect_id: "insp-1".into(),
            inspection: Some(inspection),
            error: None,
            detail: String::new(),
        };
        assert_eq!(frame.validate(), Ok(()));
    }
}
