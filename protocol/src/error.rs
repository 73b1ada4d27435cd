//! Stable error codes. The string form appears on every wire (MCP tool errors,
//! executor frames, WebSocket close reasons) and in `docs/errors.md`; a tidy
//! test keeps the two in step. Codes are never renamed, only added.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// In tool schemas a code is a string with a pointer to its list: the ~40
/// codes with their meanings would add kilobytes to every schema that can
/// carry one, and every conversation pays for the catalogue in context.
impl JsonSchema for ErrorCode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorCode".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A stable error code such as NOT_FOUND or HOST_APP_STALE (every code, its meaning and what to do: docs/errors.md)."
        })
    }
}

macro_rules! error_codes {
    ($(#[doc = $doc:literal] $variant:ident = $code:literal, $action:literal;)*) => {
        /// A stable, machine-readable error code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $(#[doc = $doc] #[serde(rename = $code)] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in documentation order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The wire form, for example `RECONCILE_REQUIRED`.
            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code,)* }
            }

            /// What the code means (its doc line).
            pub fn meaning(self) -> &'static str {
                match self { $(ErrorCode::$variant => $doc.trim_ascii(),)* }
            }

            /// What a caller should do on receiving this code.
            pub fn caller_action(self) -> &'static str {
                match self { $(ErrorCode::$variant => $action,)* }
            }
        }
    };
}

error_codes! {
    /// An argument is missing, has the wrong type, or is an unknown field.
    InvalidArgument = "INVALID_ARGUMENT", "Fix the argument named in the message and call again.";
    /// An identifier is malformed (wrong prefix, length or alphabet).
    InvalidId = "INVALID_ID", "Use an id exactly as the orchestrator returned it.";
    /// A string or list exceeds its documented bound.
    TooLarge = "TOO_LARGE", "Shorten the field; put large material in an artifact and pass a reference.";
    /// The named run, worker or message does not exist.
    NotFound = "NOT_FOUND", "Check the id; list runs or workers to find the right one.";
    /// The capability is missing, malformed or not valid for this daemon.
    Unauthorized = "UNAUTHORIZED", "Use the capability returned by run_create (root) or worker_attach (worker).";
    /// The caller is authenticated but may not do this (acting as another worker, a worker calling a root-only tool).
    Forbidden = "FORBIDDEN", "Act only as yourself; ask root to perform root-only actions.";
    /// The transition is not allowed from the current state.
    InvalidTransition = "INVALID_TRANSITION", "Read the current state (run_get, worker_list) and choose an allowed action.";
    /// The run no longer accepts this action (completing, completed, failed or cancelled).
    RunNotActive = "RUN_NOT_ACTIVE", "Start a new run, or inspect this one with run_get.";
    /// The idempotency key was used before with different arguments.
    Conflict = "CONFLICT", "Use a fresh idempotency key for a different request, or resend the original arguments.";
    /// A configured limit was reached (workers per run, concurrency).
    LimitReached = "LIMIT_REACHED", "Wait for work to finish or raise the configured limit.";
    /// The durable store failed; nothing was committed.
    StoreUnavailable = "STORE_UNAVAILABLE", "Retry later; the daemon's log says why the store failed.";
    /// An unexpected internal fault; nothing was committed.
    Internal = "INTERNAL", "Report it with the daemon log; the call had no effect.";
    /// Executor and daemon speak different protocol versions.
    ProtocolVersionMismatch = "PROTOCOL_VERSION_MISMATCH", "Update the extension or host agent to the daemon's protocol version.";
    /// An executor frame is malformed, oversized or out of order.
    ProtocolViolation = "PROTOCOL_VIOLATION", "Fix the executor; the connection was closed and nothing was applied.";
    /// An external effect may or may not have happened; it must be read back, never blindly retried.
    OutcomeUnknown = "OUTCOME_UNKNOWN", "Wait for reconciliation; do not resend.";
    /// The journal holds an uncertain external effect; a human or exact readback must settle it.
    ReconcileRequired = "RECONCILE_REQUIRED", "Run runtime_recover or inspect the conversation; nothing new is created until it is settled.";
    /// A prompt submission started but its completion was not observed.
    AmbiguousSubmission = "AMBIGUOUS_SUBMISSION", "Inspect the conversation; automatic resend is suppressed to avoid duplicate prompts.";
    /// The ChatGPT page no longer matches the adapter's locators.
    HostUiChanged = "HOST_UI_CHANGED", "Update the DOM adapter; the worker is paused and nothing was clicked.";
    /// The browser session needs a person to allow remote control.
    BrowserAuthorizationRequired = "BROWSER_AUTHORIZATION_REQUIRED", "Approve the browser's remote-debugging prompt, then run runtime_recover.";
    /// No executor can reach a browser right now.
    BrowserControlUnavailable = "BROWSER_CONTROL_UNAVAILABLE", "Start the browser with the extension, or the CDP host agent, and pair it.";
    /// The ChatGPT session is signed out.
    ChatgptSignedOut = "CHATGPT_SIGNED_OUT", "Sign in to ChatGPT in the managed browser profile.";
    /// The conversation cannot call the orchestrator's MCP app yet.
    HostAppBindingNotReady = "HOST_APP_BINDING_NOT_READY", "Finish the one-time app setup in docs/setup.md.";
    /// The orchestrator's app is disabled in ChatGPT.
    HostAppDisabled = "HOST_APP_DISABLED", "Enable the app in ChatGPT's settings.";
    /// ChatGPT holds an outdated catalog of the orchestrator's tools.
    HostAppStale = "HOST_APP_STALE", "Refresh the app in ChatGPT's settings so it reloads the tool list.";
    /// The MCP peer calling in cannot be tied to one managed conversation.
    PeerIdentityUnresolved = "PEER_IDENTITY_UNRESOLVED", "Let the pool reconcile; do not attach by label or URL alone.";
    /// A carrier reports a different conversation than the one bound.
    ConversationIdentityDrift = "CONVERSATION_IDENTITY_DRIFT", "Run runtime_recover; the binding is fenced until it is settled.";
    /// ChatGPT refused a turn for rate limiting.
    RateLimited = "RATE_LIMITED", "Wait; every automatic continuation waits out the rate-limit wait and nothing is clicked.";
    /// ChatGPT did not deliver the message ("Message delivery timed out").
    DeliveryTimeout = "DELIVERY_TIMEOUT", "A fresh continuation is scheduled; ChatGPT's Retry is never clicked.";
    /// The command's deadline passed before it could complete.
    DeadlineExceeded = "DEADLINE_EXCEEDED", "The effect did not happen, or is reconciled; see the command's events.";
    /// The executor does not manage the tab or conversation named.
    UnmanagedTarget = "UNMANAGED_TARGET", "Only tabs the orchestrator created or a person attached can be controlled.";
    /// The call could not be proven to come from the conversation its capability belongs to.
    UnidentifiedCaller = "UNIDENTIFIED_CALLER", "Call only from your own managed conversation; a capability copied elsewhere is refused. A client no browser sees needs a run created with attribution capability_only.";
    /// A person or root blocked this chat: its tool calls are refused.
    ChatBlocked = "CHAT_BLOCKED", "Stop calling tools and answer the user in plain text.";
    /// The page adapter cannot start in a managed chatgpt.com page (the page's Content-Security-Policy blocks WebAssembly and the WebAssembly-free build did not start either); nothing was typed.
    AdapterBlocked = "ADAPTER_BLOCKED", "Rebuild the extension (or the CDP agent's bundle) with `cargo xtask dist`, which ships the WebAssembly-free build such pages need, reload it, then run runtime_recover.";
    /// ChatGPT asks a person in that conversation to allow or deny a tool call ("Allow ChatGPT to use <App>?"); nothing was clicked or typed.
    ToolApprovalRequired = "TOOL_APPROVAL_REQUIRED", "A person must answer ChatGPT's tool-approval card in that chat; the worker goes on once they do. To stop it recurring, allow the app's actions in ChatGPT's settings (docs/setup.md).";
    /// A person's draft is in that conversation's composer (text, or an attached file, image or pasted block); nothing was typed and nothing sent.
    ComposerHasDraft = "COMPOSER_HAS_DRAFT", "Nothing to do: the send waits until the person sends or removes their draft in that tab, then goes in once.";
    /// chatgpt.com shows a bot check (Cloudflare's challenge) in that tab; nothing was clicked.
    ChatgptChallenge = "CHATGPT_CHALLENGE", "A person completes the check in that tab (nothing is ever clicked for them); the worker goes on once the chat shows again.";
    /// The managed tab shows a chatgpt.com page that is not one conversation (a GPT editor with its preview, settings, the library); nothing was typed.
    NotConversationPage = "NOT_CONVERSATION_PAGE", "Bring the tab back to its conversation, or run runtime_recover; nothing is typed on such a page.";
    /// A managed tab was not closed to free capacity: it holds a draft, a running turn, an incident or a person's question.
    TabInUse = "TAB_IN_USE", "Nothing to do: the tab stays open and another idle one is closed instead, or this one later.";
    /// The page's model picker offers no model with the pinned label, or only a disabled one; nothing was typed.
    ModelUnavailable = "MODEL_UNAVAILABLE", "Pin a model the account's picker offers (its exact label), or none; the worker's conversation was left as it was.";
    /// ChatGPT says the conversation reached its maximum length ("You've reached the maximum length for this conversation…"): it takes no more turns.
    ConversationTooLong = "CONVERSATION_TOO_LONG", "Nothing to do: the worker rolls over to a fresh conversation, carrying a capsule of its work; the full one stays in the browser untouched.";
    /// The call came with the credentials of a conversation the worker rolled over from: that conversation is retired and may change nothing.
    ConversationRetired = "CONVERSATION_RETIRED", "Stop calling the orchestrator's tools in this chat: the work goes on in the worker's fresh conversation.";
    /// The worktree is held by another live ownership record (or its Git projection names one this daemon does not know).
    OwnershipConflict = "OWNERSHIP_CONFLICT", "Ask its holder (ownership_who names it) to hand it over or release it, or wait until it is stale and reclaim it.";
    /// The caller does not hold this ownership record (or is not the worker it is being handed to).
    OwnershipNotHolder = "OWNERSHIP_NOT_HOLDER", "Act only on worktrees you hold; ownership_who names the holder.";
    /// The record's holder is still live: it cannot be reclaimed.
    OwnershipHolderLive = "OWNERSHIP_HOLDER_LIVE", "Ask the holder to hand it over, or wait until its lease lapses (ownership_who shows when it was last seen).";
    /// The Git adapter refused: a path outside the daemon's worktree roots, not a Git worktree, an unsafe repository configuration, or a commit that is not where the call says.
    WorktreeRefused = "WORKTREE_REFUSED", "Use a worktree under one of the daemon's --worktree-root directories, and facts Git can confirm; the message says which.";
}

impl ErrorCode {
    /// Conditions of the host or its one-time setup (browser, sign-in, the
    /// ChatGPT app): they make the pool not ready and are never reported as
    /// a worker's or a task's failure.
    pub fn is_host_state(self) -> bool {
        matches!(
            self,
            ErrorCode::BrowserAuthorizationRequired
                | ErrorCode::BrowserControlUnavailable
                | ErrorCode::ChatgptSignedOut
                | ErrorCode::ChatgptChallenge
                | ErrorCode::NotConversationPage
                | ErrorCode::HostAppBindingNotReady
                | ErrorCode::HostAppDisabled
                | ErrorCode::HostAppStale
                | ErrorCode::ConversationIdentityDrift
                | ErrorCode::AdapterBlocked
        )
    }

    /// Page states that wait for a person at the browser: ChatGPT's
    /// tool-approval card, or their own draft in the composer. Nothing is
    /// typed meanwhile; the worker goes on once they are done.
    pub fn waits_for_person(self) -> bool {
        matches!(self, ErrorCode::ToolApprovalRequired | ErrorCode::ComposerHasDraft)
    }

    /// Page states nothing is typed into until they pass: a person's
    /// ([`Self::waits_for_person`]), or a browser the executor cannot reach
    /// or is not allowed to drive (asleep, stopped, unauthorized). The
    /// daemon holds sends and inspects the page until it answers.
    pub fn holds_sends(self) -> bool {
        self.waits_for_person()
            || matches!(self, ErrorCode::BrowserControlUnavailable | ErrorCode::BrowserAuthorizationRequired)
    }

    /// Whether a command that failed with this code may still have had its
    /// effect (a prompt may be in): never grounds for a resend.
    pub fn outcome_uncertain(self) -> bool {
        matches!(self, ErrorCode::OutcomeUnknown | ErrorCode::AmbiguousSubmission | ErrorCode::ReconcileRequired)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_upper_snake_and_serialize_as_written() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate {s}");
            assert!(s.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'), "{s}");
            assert_eq!(serde_json::to_string(code).unwrap(), format!("\"{s}\""));
            assert!(!code.caller_action().is_empty());
        }
    }
}
