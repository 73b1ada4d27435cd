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
}
